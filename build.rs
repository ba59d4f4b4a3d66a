//! Gives every binary of the crate (the service, tests, benchmarks) a RUNPATH to libtorch, so
//! they run without LD_LIBRARY_PATH. libtorch is the `torch` wheel's, found the way torch-sys
//! finds it: `LIBTORCH`, or the Python on PATH when LIBTORCH_USE_PYTORCH is set
//! (scripts/torch.sh sets both up).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_USE_PYTORCH");
    println!("cargo:rerun-if-env-changed=JUDGECAL_TORCH_VENV");
    let lib = match std::env::var("LIBTORCH") {
        Ok(root) => Some(format!("{root}/lib")),
        Err(_) => Command::new("python")
            .args([
                "-c",
                "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))",
            ])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned()),
    };
    match lib {
        Some(dir) => println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}"),
        None => println!(
            "cargo:warning=libtorch not found: run `source scripts/setup.sh` first (it installs the torch wheel)"
        ),
    }
}
