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
source "$(dirname "${BASH_SOURCE[0]}")/torch.sh"
