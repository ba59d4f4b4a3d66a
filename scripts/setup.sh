# Sourced by scripts/quickstart and scripts/test: checks the toolchain this project needs.
if ! command -v cargo >/dev/null 2>&1; then
    echo "judgecal needs Rust 1.94 or newer: install it with rustup (https://rustup.rs) first" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
        rustup component add "$component"
    fi
done
# The build folder: outside the clone and keyed by Cargo.lock, as the torch virtualenv is, so
# that a fresh clone on this machine (CI) compiles this crate only, not its ~400 dependencies
# and libtorch's C++ glue (about 8 min of 2 cores). `target` becomes a link to it; a clone
# that already has a `target`, or a CARGO_TARGET_DIR, keeps its own. Folders of other lock
# files unused for a week are removed.
judgecal_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ ! -e "$judgecal_root/target" ] && [ ! -L "$judgecal_root/target" ]; then
    judgecal_builds="${XDG_CACHE_HOME:-$HOME/.cache}/judgecal"
    judgecal_target="$judgecal_builds/target-$(sha256sum "$judgecal_root/Cargo.lock" | cut -c1-16)"
    mkdir -p "$judgecal_target"
    touch "$judgecal_target/.used"
    find "$judgecal_builds" -maxdepth 2 -path '*/target-*/.used' -mtime +7 2>/dev/null |
        while read -r stamp; do rm -rf "$(dirname "$stamp")"; done
    ln -s "$judgecal_target" "$judgecal_root/target"
elif [ -L "$judgecal_root/target" ] && [ ! -e "$judgecal_root/target" ]; then
    # The link outlived its folder (a cleaned cache): make the folder again.
    mkdir -p "$(readlink "$judgecal_root/target")"
fi
# Cargo keys a workspace crate's build by the crate, not by the clone, and calls it fresh
# when no source file is newer than its last build: in a build folder shared between clones,
# a clone whose files are older than another clone's last build would be served that clone's
# binary. The folder remembers the clone that last used it; another clone's sources are
# touched, so that cargo rebuilds this workspace's crates (their dependencies stay built).
judgecal_built_in="${CARGO_TARGET_DIR:-$judgecal_root/target}"
if [ -d "$judgecal_built_in" ] && [ "$(cat "$judgecal_built_in/.clone" 2>/dev/null)" != "$judgecal_root" ]; then
    for judgecal_dir in src crates tests benches; do
        if [ -d "$judgecal_root/$judgecal_dir" ]; then
            find "$judgecal_root/$judgecal_dir" -type f -name '*.rs' -exec touch {} +
        fi
    done
    echo "$judgecal_root" >"$judgecal_built_in/.clone"
fi
source "$(dirname "${BASH_SOURCE[0]}")/torch.sh"
