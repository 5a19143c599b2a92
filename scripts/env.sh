# Shared environment for setup, tests and the quickstart (sourced).
# Tools built from crates.io live outside the clone so a machine builds them once.
export SKERRY_TOOLS="${SKERRY_TOOLS:-$HOME/.cache/skerry-tools}"
export PATH="$SKERRY_TOOLS/bin:$PATH"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# zstd (C) for wasm32 is compiled with Debian's clang.
export CC_wasm32_unknown_unknown="${CC_wasm32_unknown_unknown:-clang}"
# Pinned tool versions (the wasm-bindgen CLI must equal the crate version in Cargo.lock).
export WASM_BINDGEN_VERSION=0.2.130
export WASM_PACK_VERSION=0.15.1
export CARGO_FUZZ_VERSION=0.13.2
export MOTO_VERSION=5.2.1
export PYICEBERG_VERSION=0.12.0
export S3FS_VERSION=2026.9.0
# The arm64 Node the linux-arm64-gnu addon is tested with under qemu-user (npm's packaging of
# the nodejs.org binary: the same version as this machine's x64 Node).
export NODE_ARM64_VERSION=20.20.2
# Tests, the napi addon (whose CLI always passes --target) and examples share one target
# directory: build for the host triple explicitly so nothing is compiled twice.
export CARGO_BUILD_TARGET="${CARGO_BUILD_TARGET:-$(rustc -vV | sed -n 's/^host: //p')}"
