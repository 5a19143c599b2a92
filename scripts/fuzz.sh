#!/usr/bin/env bash
# Runs every fuzz target (fuzz/: cargo-fuzz, libFuzzer, nightly) for a bounded time from the
# seed corpus checked in as fuzz/seeds.tar.gz (issue 44). A crash fails the run and leaves
# its input under fuzz/artifacts/<target>/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# New inputs a run finds go to a scratch directory; `--keep` after the seconds writes them to
# fuzz/corpus/ instead (to grow the seeds: then `cargo +nightly fuzz cmin` and re-pack).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
secs=${1:-20}
shift || true
keep=
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "== fuzz: skipped: no nightly toolchain (cargo-fuzz needs one: rustup toolchain install nightly)"
  exit 0
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "== fuzz: skipped: cargo-fuzz missing (scripts/setup.sh installs it)"
  exit 0
fi
cd fuzz
# cargo-fuzz passes its own --target; the host triple from env.sh must not reach it twice.
unset CARGO_BUILD_TARGET
echo "== fuzz: build (nightly, sanitizer coverage)"
cargo +nightly fuzz build -O
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
tar xzf seeds.tar.gz -C "$seeds"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
for t in "${targets[@]}"; do
  mkdir -p "$seeds/$t"
  if [ -n "$keep" ]; then out="corpus/$t"; mkdir -p "$out"; else out=$(mktemp -d -p "$seeds"); fi
  echo "== fuzz: $t for ${secs} s ($(ls "$seeds/$t" | wc -l) seeds)"
  if ! cargo +nightly fuzz run -O "$t" "$out" "$seeds/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 \
      > "$seeds/$t.log" 2>&1; then
    grep -E "panicked|ERROR|SUMMARY|Test unit written" "$seeds/$t.log" | head -20
    echo "== fuzz: $t FAILED (input under fuzz/artifacts/$t/; full log above)"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|DONE" "$seeds/$t.log" | tail -2
done
