#!/usr/bin/env bash
# Builds a baseline for the same-run benchmark comparisons: the release addon and wasm reader
# of commit <rev> (default: the merge base with origin/main, else HEAD~1), in a worktree under
# target/baseline/<rev> with its own target directory. Prints the directory to pass as
# SKERRY_BENCH_BASELINE to bench/query.mjs, bench/kinds.mjs and bench/build.mjs.
#   scripts/bench-baseline.sh [<rev>]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$(git rev-parse --short "${1:-HEAD~1}")
dir="$PWD/target/baseline/$rev"
if [ ! -d "$dir" ]; then
  git worktree add --detach "$dir" "$rev" >&2
fi
# The worktree shares this checkout's npm tools (napi CLI, binaryen).
[ -e "$dir/node_modules" ] || ln -s "$PWD/node_modules" "$dir/node_modules"
if [ ! -f "$dir/bindings-wasm/pkg/node/skerry_wasm_bg.wasm" ] || ! ls "$dir"/bindings-node/skerry.*.node >/dev/null 2>&1; then
  (cd "$dir" && CARGO_TARGET_DIR="$dir/target" bash scripts/build.sh all --release >&2)
fi
echo "$dir"
