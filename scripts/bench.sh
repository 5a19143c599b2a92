#!/usr/bin/env bash
# Benchmarks (not part of `npm test`), on release builds (what users install): the Node
# end-to-end build, lookup, query and read (vs LanceDB and hyparquet) benchmarks on the addon
# and wasm reader, then the criterion benchmarks. `SKERRY_BENCH_SCALE=1` adds the 10M-row build run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/build.sh all --release
# The peers measured in the same runs (bench/package.json; not part of the workspace).
[ -d bench/node_modules/@lancedb/lancedb ] && [ -d bench/node_modules/hyparquet ] || npm install --prefix bench --no-audit --no-fund
# The read benchmark's table is written by pyarrow (another writer than Skerry's own).
python3 -c "import pyarrow" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pyarrow
node bench/build.mjs
if [ -n "${SKERRY_BENCH_SCALE:-}" ]; then node bench/build.mjs --scale; fi
# Following an upstream append past one commit's index work (pyiceberg table, 5 indexes).
node bench/sync.mjs
if [ -n "${SKERRY_BENCH_SCALE:-}" ]; then node bench/sync.mjs --scale; fi
# Build fan-out through BullMQ (Redis started by the bench) with 1, 2, 4 worker processes.
node bench/fanout.mjs
node bench/lookups.mjs
node bench/query.mjs
node bench/kinds.mjs
node bench/reads.mjs
# A Worker's first request: the example Worker in workerd (miniflare), a fresh workerd per run.
node bench/worker.mjs
cargo bench -p skerry-core
# Full text beside tantivy 0.27 on a generated 2M-document corpus in 20 and in 200 files
# (bench/fulltext), then the same layouts from the wasm reader over HTTP with 20 ms per
# response (bench/search.mjs). `SKERRY_BENCH_SCALE=1`: 10M documents.
fdir=$(mktemp -d)
cargo run --release -p skerry-bench-fulltext -- --keep "$fdir" ${SKERRY_BENCH_SCALE:+--docs 10000000}
node bench/search.mjs "$fdir"
rm -rf "$fdir"
# Vector k-NN beside an exact brute force on 2M clustered 64-d vectors in 20 and in 200 files
# (bench/vector; `--peer` adds hnsw_rs 0.3), then the same tables from the wasm reader over
# HTTP with 20 ms per response (bench/vector.mjs). `SKERRY_BENCH_SCALE=1`: 10M.
vdir=$(mktemp -d)
cargo run --release -p skerry-bench-vector -- --keep "$vdir" ${SKERRY_BENCH_SCALE:+--n 10000000}
node bench/vector.mjs "$vdir"
rm -rf "$vdir"
