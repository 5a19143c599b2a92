//! # skerry-core
//!
//! Overlay indexes beside lakehouse tables: the formats, the read path and (natively) the
//! administration Skerry runs in the Node addon and, read-only, in WebAssembly. The folders
//! follow the data flow (`docs/architecture.md` draws it):
//!
//! - [`values`]: key types, values, comparison and coercion (the bottom layer);
//! - [`io`]: range reads over object stores and HTTP, counted and cached;
//! - [`index`]: index definitions ([`index::IndexSpec`]), the [`index::Kind`] trait and its
//!   one registry, and one module per kind — ordered, bitmap, bloom, fulltext, vector — each
//!   with its blob layout, writer and reader side by side;
//! - [`formats`]: key encoding, Puffin, lineage, manifest, row sets, Iceberg metadata —
//!   versioned byte contracts, each documented in `docs/`;
//! - [`datafile`]: Parquet data files through range reads;
//! - [`read`]: [`Snapshot`], lookups, predicates, planning, pruning, counts, full-text
//!   `search` (BM25, hybrid), vector `nearest`, explain, the read cache;
//! - [`host`]: the boundary both bindings share — JavaScript-shaped input parsed and answers
//!   shaped once;
//! - [`admin`] (feature `native`): catalog, register (Parquet, Iceberg mount and sync),
//!   build (staged, table runs, fan-out), publish, vacuum, verify, repair.
//!
//! The crate compiles for `wasm32-unknown-unknown` with default features off.

pub mod datafile;
pub mod error;
pub mod formats;
pub mod host;
pub mod index;
pub mod io;
pub mod read;
pub mod values;

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod admin;

pub use error::{Error, Result};
pub use formats::manifest::Manifest;
pub use read::lookup::{LocateResult, LookupResult, LookupStats, RowRef};
pub use read::plan::{Query, QueryResult, QueryStats};
pub use read::predicate::{Condition, Op};
pub use read::{RejectionSink, Snapshot};
pub use values::{Direction, KeyColumn, KeySchema, KeyType, NullOrder, Value, ValueBound};

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub use admin::overlay::{IndexOptions, OpenOptions, Overlay};
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub use read::reader::OverlayReader;
