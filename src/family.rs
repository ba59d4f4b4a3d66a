//! A family: a named view of a shared core (the service's or the store's) whose methods
//! live in its own files, reached through an accessor on the core or by naming it.

/// Declares family `$name` over core `$core`: a copyable view that reads the core's fields
/// (it dereferences to it), and the core's accessor `$accessor` that hands it out.
macro_rules! family {
    ($core:ident, $(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a>(pub(super) &'a $core);

        impl std::ops::Deref for $name<'_> {
            type Target = $core;

            fn deref(&self) -> &$core {
                self.0
            }
        }

        impl $core {
            $(#[$doc])*
            pub fn $accessor(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
}

pub(crate) use family;
