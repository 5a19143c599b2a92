#!/usr/bin/env bash
# `npm run quickstart`: installs what is missing, builds the addon and the wasm reader, and
# runs examples/quickstart.mjs on generated sample data.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/setup.sh
bash scripts/build.sh all
node examples/quickstart.mjs "$@"
