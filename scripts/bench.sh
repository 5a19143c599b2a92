#!/usr/bin/env bash
# Benchmarks (not part of `npm test`), on release builds (what users install): the Node
# end-to-end build, lookup and query benchmarks on the addon and wasm reader, then the
# criterion benchmarks. `SKERRY_BENCH_SCALE=1` adds the 10M-row build run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/build.sh all --release
# The peers measured in the same runs (bench/package.json; not part of the workspace).
[ -d bench/node_modules/@lancedb/lancedb ] || npm install --prefix bench --no-audit --no-fund
node bench/build.mjs
if [ -n "${SKERRY_BENCH_SCALE:-}" ]; then node bench/build.mjs --scale; fi
node bench/lookups.mjs
node bench/query.mjs
cargo bench -p skerry-core
