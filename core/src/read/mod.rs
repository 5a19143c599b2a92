//! The read path, the same natively and in wasm:
//!
//! - [`snapshot`]: [`Snapshot`], the owned read handle every surface wraps (one pinned
//!   manifest, its readers, caches and a rejection sink);
//! - [`lookup`]: index accessors over a pinned manifest behind the read gate, with fallback
//!   scans, row fetches by position and `locate` by row id;
//! - [`predicate`] and [`plan`]: `query({ where, columns, limit })` — index choice, hybrid
//!   index/scan per file, re-checks of index answers (`docs/query.md`);
//! - [`range`]: bounds and IS NULL prefixes as byte ranges of an ordered index;
//! - [`prune`]: statistics and page-index pruning of data files;
//! - [`blob`]: a blob of the overlay through the read cache, as kinds' read hooks see it
//!   (each kind's reader lives in its folder, `index::<kind>::read`);
//! - [`bloom`]: pruning files by indexes that answer `prune` (table runs, per-file blobs);
//! - [`cache`]: the read handle's cache (directories, data-file metadata, index blocks);
//! - [`search`], [`nearest`] and [`hybrid`]: BM25 search, vector k-NN and their fusion;
//!   [`ranked`]: what the two share once their winners are known;
//! - [`count`]: `count({ where })`, from indexes alone when every column has one;
//! - [`explain`]: the per-file plan of a query, without running it;
//! - [`metrics`]: a handle's counters, as Prometheus text or one object.
//!
//! Native only: [`reader`], the read-only open of a published overlay.

pub(crate) mod blob;
pub mod bloom;
pub mod cache;
pub mod count;
pub mod explain;
pub(crate) mod files;
pub mod hybrid;
pub mod lookup;
pub mod metrics;
pub mod nearest;
pub mod plan;
pub mod predicate;
pub mod prune;
pub mod range;
pub mod ranked;
pub mod search;
pub mod snapshot;

#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod reader;

pub use snapshot::{RejectionSink, Snapshot};
