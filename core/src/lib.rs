//! # skerry-core
//!
//! Overlay indexes beside lakehouse tables: the formats, the read path and (natively) the
//! administration Skerry runs in the Node addon and, read-only, in WebAssembly. The folders
//! follow the data flow (`docs/architecture.md` draws it):
//!
//! - [`values`]: key types, values, comparison and coercion (the bottom layer);
//! - [`formats`]: key encoding, Puffin, lineage, manifest, row sets — versioned byte
//!   contracts, each documented in `docs/`;
//! - [`index`]: index kinds and their blob layouts (`ordered`);
//! - [`io`] and [`datafile`]: range reads over object stores and HTTP, and Parquet data files
//!   through them;
//! - [`read`]: [`Snapshot`], lookups, predicates, planning, pruning;
//! - [`host`]: the boundary both bindings share — JavaScript-shaped input parsed and answers
//!   shaped once;
//! - [`admin`] (feature `native`): catalog, register, build, publish, vacuum, verify, repair.
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
