#!/usr/bin/env bash
# Builds the Node addon and the wasm reader (debug profile; `--release` for packaging).
#   scripts/build.sh [node|wasm|all] [--release]
#   scripts/build.sh test-kinds   # both with the test-only toy kind, into target/test-kinds/
#   scripts/build.sh node-arm64 [--release]   # the linux-arm64-gnu addon, cross-compiled
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
  # napi-rs's per-platform layout: the addon ships in `skerry-<platform>` (an optional
  # dependency of `skerry`), stripped of symbols and debug info whatever the profile.
  node_file=$(cd bindings-node && ls skerry.*.node | head -1)
  platform=${node_file#skerry.}; platform=${platform%.node}
  strip --strip-unneeded -o "bindings-node/npm/$platform/$node_file" "bindings-node/$node_file"
fi
if [ "$what" = all ] || [ "$what" = wasm ]; then
  echo "== build: wasm reader (wasm-pack${release:+, release + wasm-opt -Oz})"
  profile=--dev; [ -n "$release" ] && profile="--profile wasm-release"
  for t in web nodejs; do
    out=node; [ "$t" = web ] && out=web
    # CARGO_BUILD_TARGET (the host triple, see env.sh) must not reach wasm-pack: it finds the
    # .wasm artifact only when cargo reports the wasm32 target it asked for. wasm-opt runs
    # below, once (wasm-pack would download binaryen, and both targets share one binary).
    (cd bindings-wasm && env -u CARGO_BUILD_TARGET wasm-pack --quiet build $profile --no-opt --target "$t" --out-dir "pkg/$out" --no-pack)
    # wasm-pack writes a `*` .gitignore there, which npm pack honours: the tarball would be
    # empty.
    rm -f "bindings-wasm/pkg/$out/.gitignore"
  done
  # `[Symbol.dispose]` needs lib esnext in the user's tsconfig (TS2550 under es2022 + dom); the
  # method stays at run time, `free()` is the typed way to release a reader early.
  sed -i '/\[Symbol.dispose\]()/d' bindings-wasm/pkg/web/skerry_wasm.d.ts bindings-wasm/pkg/node/skerry_wasm.d.ts
  # The web glue is an ES module; the package (whose Node entry is the CommonJS glue) is not.
  echo '{ "type": "module" }' > bindings-wasm/pkg/web/package.json
  if [ -n "$release" ]; then
    # npm's binaryen (a root devDependency): no download from elsewhere. Without -g the
    # name section (a megabyte of function names) is dropped.
    wasm_opt="$PWD/node_modules/.bin/wasm-opt"
    [ -x "$wasm_opt" ] || { echo "wasm-opt missing: run npm ci" >&2; exit 1; }
    w=bindings-wasm/pkg/web/skerry_wasm_bg.wasm
    cmp -s "$w" bindings-wasm/pkg/node/skerry_wasm_bg.wasm || { echo "the two targets' wasm differ" >&2; exit 1; }
    "$wasm_opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue --strip-debug --strip-producers "$w" -o "$w.opt"
    mv "$w.opt" "$w"
    cp "$w" bindings-wasm/pkg/node/skerry_wasm_bg.wasm
    node -e 'const fs=require("fs"),z=require("zlib");const b=fs.readFileSync(process.argv[1]);console.log(`wasm: ${b.length} bytes, ${z.gzipSync(b,{level:9}).length} gzipped`)' "$w"
  fi
fi
if [ "$what" = node-arm64 ]; then
  # Cross-compiled with Debian's gcc-aarch64-linux-gnu (linker and the C parts: zstd, aws-lc);
  # the platform package gets it stripped, like linux-x64-gnu. The generated types are the
  # host build's (identical), so they go to a scratch file.
  echo "== build: Node addon for linux-arm64-gnu (cross)"
  out="$PWD/target/napi-arm64"
  mkdir -p "$out"
  (cd bindings-node && \
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
    CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++ \
    AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
    npx napi build --platform --target aarch64-unknown-linux-gnu ${release:+--release} \
      --output-dir "$out" --no-js --dts "$out/index.d.ts")
  aarch64-linux-gnu-strip --strip-unneeded -o bindings-node/npm/linux-arm64-gnu/skerry.linux-arm64-gnu.node \
    "$out/skerry.linux-arm64-gnu.node"
fi
if [ "$what" = test-kinds ]; then
  # The kind conformance test (tests/kinds/) runs the toy kind `valueset` through both
  # surfaces: an addon and a (dev) wasm built with the `test-kinds` feature, kept apart from
  # what ships.
  echo "== build: addon + wasm with the test-only kinds (target/test-kinds)"
  out="$PWD/target/test-kinds"
  mkdir -p "$out"
  (cd bindings-node && npx napi build --platform --features test-kinds --output-dir "$out" --no-js --dts index.d.ts)
  (cd bindings-wasm && env -u CARGO_BUILD_TARGET wasm-pack --quiet build --dev --no-opt --target nodejs --out-dir "$out/wasm" --no-pack -- --features test-kinds)
  rm -f "$out/wasm/.gitignore"
fi
