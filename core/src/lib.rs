//! # skerry-core
//!
//! The formats and read path Skerry shares between native (Node addon) and WebAssembly:
//!
//! - [`encoding`]: canonical, order-preserving key bytes (`docs/key-encoding.md`);
//! - [`puffin`]: spec-exact Iceberg Puffin container, writer and reader (`docs/puffin.md`);
//! - [`lineage`]: the `IndexFile` lineage record and the read gate (`docs/lineage.md`);
//! - [`io`]: range reads over object stores, with counters, caching and coalescing (`docs/io.md`);
//! - [`codec`]: bounded Puffin compression codecs;
//! - [`blob`]: index blob formats (`docs/ordered-index.md`);
//! - [`datafile`]: Parquet data files through range reads (push decoders);
//! - [`manifest`]: the published read model (`docs/manifest.md`);
//! - [`query`]: lookups over a pinned manifest with read gate and fallback scans;
//! - [`predicate`] and [`planner`]: `query({ where, columns, limit })` over a table — index
//!   choice, hybrid index/scan per file, statistics pruning, rows by page (`docs/query.md`).
//!
//! Native only (feature `native`): [`catalog`] (SlateDB), [`overlay`] (the administration
//! verbs) and [`repair`] (the queue of files whose index a query rejected). The crate compiles for `wasm32-unknown-unknown` with default features off.

pub mod blob;
pub mod codec;
pub mod datafile;
pub mod encoding;
pub mod error;
pub mod host;
pub mod io;
pub mod lineage;
pub mod manifest;
pub mod names;
pub mod planner;
pub mod predicate;
pub mod puffin;
pub mod query;
pub mod rowset;
pub mod snapshot;

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod build;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod catalog;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod lifecycle;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod overlay;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod reader;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod repair;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod sample;

pub use error::{Error, Result};
pub use snapshot::{RejectionSink, Snapshot};
