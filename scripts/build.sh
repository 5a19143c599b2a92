#!/usr/bin/env bash
# Builds the Node addon and the wasm reader (debug profile; `--release` for packaging).
#   scripts/build.sh [node|wasm|all] [--release]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
what="${1:-all}"
release=""; [ "${2:-}" = "--release" ] && release=1

if [ "$what" = all ] || [ "$what" = node ]; then
  echo "== build: Node addon (napi-rs)"
  (cd bindings-node && npx napi build --platform ${release:+--release --strip} --dts index.d.ts --js index.js)
  # The host boundary's types (one file, shared with skerry-wasm) follow the generated ones.
  sed -i '/^\/\/ Types of the host boundary/,$d' bindings-node/index.d.ts
  cat core/src/host/host.d.ts >> bindings-node/index.d.ts
fi
if [ "$what" = all ] || [ "$what" = wasm ]; then
  echo "== build: wasm reader (wasm-pack)"
  profile=--dev; [ -n "$release" ] && profile=--release
  for t in nodejs web; do
    out=node; [ "$t" = web ] && out=web
    # CARGO_BUILD_TARGET (the host triple, see env.sh) must not reach wasm-pack: it finds the
    # .wasm artifact only when cargo reports the wasm32 target it asked for.
    (cd bindings-wasm && env -u CARGO_BUILD_TARGET wasm-pack --quiet build "$profile" --target "$t" --out-dir "pkg/$out" --no-pack)
    # wasm-pack writes a `*` .gitignore there, which npm pack honours: the tarball would be
    # empty.
    rm -f "bindings-wasm/pkg/$out/.gitignore"
  done
fi
