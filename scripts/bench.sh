#!/usr/bin/env bash
# Benchmarks (not part of `npm test`): the Node end-to-end lookup benchmark on the built
# addon and wasm reader, then the criterion benchmarks (release build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/build.sh all
node bench/lookups.mjs
node bench/query.mjs
cargo bench -p skerry-core
