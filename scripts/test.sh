#!/usr/bin/env bash
# The whole test suite: Rust (core, interop) natively, core for wasm32, then the Node addon
# and the wasm reader end to end in Node.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

echo "== test: cargo test (native, ${CARGO_BUILD_TARGET})"
cargo test --workspace --exclude skerry-wasm --exclude skerry-bench-fulltext --exclude skerry-bench-vector --features skerry-core/s3

echo "== test: skerry-core builds for wasm32-unknown-unknown (default features off)"
cargo build -p skerry-core --target wasm32-unknown-unknown --no-default-features

# What ships: the addon as its platform package (stripped), the wasm as a release build
# through wasm-opt -Oz (the suite checks its size and runs it in Node, workerd and Chromium).
bash scripts/build.sh node
bash scripts/build.sh wasm --release

echo "== test: node --test (addon + wasm)"
node --test --test-concurrency=1 tests/
