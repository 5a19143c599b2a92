//! A native read-only view of a published overlay (`Overlay.open(url, { readOnly: true })`
//! in Node): it reads `manifests/HEAD` and the manifest it names, pins that version, and
//! answers lookups, queries and row fetches from it — the same planner as the wasm reader.
//!
//! It never opens the SlateDB catalog, so any number of reader processes can serve beside
//! the one writer without fencing it (a second catalog client would). Readers see what the
//! writer has *published*; [`OverlayReader::refresh`] moves to the newest version. They
//! queue no repairs (that needs the catalog): rejections are in every answer's stats.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::formats::manifest::{self, Manifest};
use crate::io::store::{open_store, OpenOptions};
use crate::io::{ObjectStoreReader, UrlReader};
use crate::read::cache::ReadCache;
use crate::read::snapshot::Snapshot;

/// A read-only view of the newest published version of an overlay.
pub struct OverlayReader {
    reader: Arc<ObjectStoreReader>,
    data: Arc<UrlReader>,
    manifest: RwLock<Arc<Manifest>>,
    cache: Arc<ReadCache>,
    metrics: Arc<crate::read::metrics::Metrics>,
    scan_only: AtomicBool,
}

impl OverlayReader {
    /// Opens the overlay at `url` read-only and pins its newest published version. Errors:
    /// `E_NOT_FOUND` when nothing was published yet, `E_MANIFEST` for a malformed or
    /// oversized `HEAD`/manifest, `E_TIMEOUT` when the store does not answer in
    /// `options.timeout`.
    pub async fn open(url: &str, options: OpenOptions) -> Result<OverlayReader> {
        let reader = Arc::new(open_store(url, &options, false)?.reader(options.timeout));
        let data = Arc::new(UrlReader::new(options.storage).with_timeout(options.timeout));
        // Catalog tables' data is read with the credentials their catalog vends (refreshed by
        // the routed stores themselves: nothing to keep here).
        #[cfg(feature = "s3")]
        crate::io::rest_catalog::connect_all(&data, &options.catalogs, options.timeout).await?;
        #[cfg(not(feature = "s3"))]
        if let Some(c) = options.catalogs.first() {
            return Err(crate::io::rest::no_client(&c.table));
        }
        let m = manifest::read_latest(reader.as_ref()).await?;
        Ok(OverlayReader {
            reader,
            data,
            manifest: RwLock::new(Arc::new(m)),
            cache: Arc::new(ReadCache::with_budget(
                crate::read::cache::DEFAULT_NATIVE_CACHE_BYTES,
            )),
            metrics: Arc::new(crate::read::metrics::Metrics::default()),
            scan_only: AtomicBool::new(false),
        })
    }

    /// The pinned manifest version.
    pub fn version(&self) -> u64 {
        self.pinned().version
    }

    /// The pinned manifest.
    pub fn pinned(&self) -> Arc<Manifest> {
        self.manifest.read().expect("manifest lock").clone()
    }

    /// Re-reads `HEAD` and pins the newest published version; returns it.
    pub async fn refresh(&self) -> Result<u64> {
        let m = manifest::read_latest(self.reader.as_ref()).await?;
        let v = m.version;
        if v < self.version() {
            return Err(Error::Manifest(format!(
                "HEAD moved back to version {v} (pinned {})",
                self.version()
            )));
        }
        *self.manifest.write().expect("manifest lock") = Arc::new(m);
        Ok(v)
    }

    /// With `on`, every read answers every file by scanning it, ignoring indexes.
    pub fn set_scan_only(&self, on: bool) {
        self.scan_only.store(on, Ordering::Relaxed);
    }

    /// A [`Snapshot`] of the pinned version: every read verb is answered from it (data files
    /// read at the versions the manifest recorded).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(
            self.reader.clone(),
            self.data.clone(),
            self.pinned(),
            self.cache.clone(),
        )
        .with_pinned_versions(true)
        .with_metrics(self.metrics.clone())
        .with_scan_only(self.scan_only.load(Ordering::Relaxed))
    }
}
