#!/usr/bin/env bash
# The whole test suite: Rust (core, interop) natively, core for wasm32, then the Node addon
# and the wasm reader end to end in Node.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

# Disk: where the suite stands at each step; with SKERRY_CI_PRUNE=1 (.ci/run) what no later step
# reads is removed as the suite goes (a clean clone's peak falls from about 12 GB to about 6).
disk() { echo "== disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free, target/ $(du -sh target 2>/dev/null | cut -f1)"; }
prune() {
  [ "${SKERRY_CI_PRUNE:-}" = 1 ] || return 0
  if [ $# -le 3 ]; then echo "== prune: $*"; else echo "== prune: $# files"; fi
  rm -rf "$@"; disk
}
test_features=(--workspace --exclude skerry-wasm --exclude skerry-bench-fulltext --exclude skerry-bench-vector --features skerry-core/s3,skerry-core/test-kinds)

echo "== test: cargo test (native, ${CARGO_BUILD_TARGET})"
cargo test "${test_features[@]}"
disk
if [ "${SKERRY_CI_PRUNE:-}" = 1 ]; then
  # The test executables (about 100 MB each): nothing after this step runs them.
  mapfile -t exes < <(cargo test "${test_features[@]}" --no-run --message-format=json 2>/dev/null \
    | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const l of s.split("\n")){if(!l)continue;const m=JSON.parse(l);if(m.executable)console.log(m.executable)}})')
  prune "${exes[@]}"
fi

echo "== test: skerry-core builds for wasm32-unknown-unknown (default features off)"
cargo build -p skerry-core --target wasm32-unknown-unknown --no-default-features

# What ships: the addon as its platform package (stripped), the wasm as a release build
# through wasm-opt -Oz (the suite checks its size and runs it in Node, workerd and Chromium).
bash scripts/build.sh node
bash scripts/build.sh node-arm64
bash scripts/build.sh wasm --release
disk
# The arm64 build's intermediates: its addon is in bindings-node/npm/linux-arm64-gnu/.
prune target/aarch64-unknown-linux-gnu target/napi-arm64

echo "== test: node --test (addon + wasm)"
node --test --test-concurrency=1 tests/

# A kind lives in one folder: the test-only toy kind, in an addon and a wasm built with it,
# through its own lifecycle test and the conformance suite (docs/architecture.md).
bash scripts/build.sh test-kinds
echo "== test: the toy kind through the addon and the wasm reader"
SKERRY_TEST_KINDS="$PWD/target/test-kinds" node --test --test-concurrency=1 tests/kinds/toy-kind.mjs tests/conformance.test.mjs
# Fuzzing builds into fuzz/target/ (nightly, sanitizers): the other builds are done with.
prune target

# Every decoder of bytes a reader did not write, fuzzed with coverage guidance for a bounded
# time from the checked-in seeds (fuzz/; a crash fails the suite).
bash scripts/fuzz.sh "${SKERRY_FUZZ_SECONDS:-20}"
