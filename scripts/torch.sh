# Sourced by scripts/setup.sh: libtorch for the `tch` crate, from the `torch` wheel on PyPI
# (the version tch 0.26 expects), in a virtualenv outside the clone so that every clone and
# every CI run on this machine reuses it. The first run downloads about 530 MB of wheels and
# takes 4.7 GB of disk; later runs check the version and go on.
JUDGECAL_TORCH_VERSION=2.13.0
export JUDGECAL_TORCH_VENV="${JUDGECAL_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/judgecal/torch-$JUDGECAL_TORCH_VERSION}"
if ! "$JUDGECAL_TORCH_VENV/bin/python" - "$JUDGECAL_TORCH_VERSION" >/dev/null 2>&1 <<'PY'
import importlib.metadata, sys
sys.exit(importlib.metadata.version("torch").split("+")[0] != sys.argv[1])
PY
then
    echo "judgecal: installing torch $JUDGECAL_TORCH_VERSION from PyPI into $JUDGECAL_TORCH_VENV" \
        "(about 530 MB to download, 4.7 GB on disk; once per machine)" >&2
    # The crates download meanwhile (a fresh machine fetches ~400), so the build starts on both.
    judgecal_fetch=""
    if [ -f "$(dirname "${BASH_SOURCE[0]}")/../Cargo.lock" ]; then
        (cd "$(dirname "${BASH_SOURCE[0]}")/.." && cargo fetch --locked --quiet) &
        judgecal_fetch=$!
    fi
    python3 -m venv "$JUDGECAL_TORCH_VENV"
    "$JUDGECAL_TORCH_VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$JUDGECAL_TORCH_VERSION"
    if [ -n "$judgecal_fetch" ]; then wait "$judgecal_fetch" || true; fi
fi
# torch-sys finds libtorch through this Python; build.rs gives the binaries a RUNPATH to it.
export PATH="$JUDGECAL_TORCH_VENV/bin:$PATH"
export LIBTORCH_USE_PYTORCH=1
