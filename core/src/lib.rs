//! # skerry-core
//!
//! The formats and read path Skerry shares between native (Node addon) and WebAssembly:
//!
//! - [`encoding`]: canonical, order-preserving key bytes (`docs/key-encoding.md`);
//! - [`puffin`]: spec-exact Iceberg Puffin container, writer and reader (`docs/puffin.md`);
//! - [`lineage`]: the `IndexFile` lineage record and the read gate (`docs/lineage.md`);
//! - [`io`]: range reads over object stores, with counters, caching and coalescing;
//! - [`codec`]: bounded Puffin compression codecs.
//!
//! The crate compiles for `wasm32-unknown-unknown` with default features off; the `native`
//! feature adds `object_store`-backed I/O and zstd compression on write.

pub mod codec;
pub mod encoding;
pub mod io;
pub mod lineage;
pub mod puffin;
