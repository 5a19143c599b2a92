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

use crate::encoding::{Value, ValueBound};
use crate::error::{Error, Result};
use crate::io::{ObjectStoreReader, UrlReader};
use crate::manifest::{self, Manifest};
use crate::overlay::{open_store, OpenOptions};
use crate::query::{DirectoryCache, Lookup, LookupResult, RowRef};

/// A read-only view of the newest published version of an overlay.
pub struct OverlayReader {
    reader: Arc<ObjectStoreReader>,
    data: Arc<UrlReader>,
    manifest: RwLock<Arc<Manifest>>,
    dirs: DirectoryCache,
    scan_only: AtomicBool,
}

impl OverlayReader {
    /// Opens the overlay at `url` read-only and pins its newest published version. Errors:
    /// `E_NOT_FOUND` when nothing was published yet, `E_MANIFEST` for a malformed or
    /// oversized `HEAD`/manifest, `E_TIMEOUT` when the store does not answer in
    /// `options.timeout`.
    pub async fn open(url: &str, options: OpenOptions) -> Result<OverlayReader> {
        let store = open_store(url, &options.storage, false)?;
        let reader = Arc::new(
            ObjectStoreReader::new(store, object_store::path::Path::from(""))
                .with_timeout(options.timeout),
        );
        let data = Arc::new(UrlReader::new(options.storage).with_timeout(options.timeout));
        let m = manifest::read_latest(reader.as_ref()).await?;
        Ok(OverlayReader {
            reader,
            data,
            manifest: RwLock::new(Arc::new(m)),
            dirs: DirectoryCache::default(),
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
        self.dirs.clear();
        Ok(v)
    }

    /// See [`crate::overlay::Overlay::set_scan_only`].
    pub fn set_scan_only(&self, on: bool) {
        self.scan_only.store(on, Ordering::Relaxed);
    }

    fn over<'a>(&'a self, m: &'a Manifest) -> Lookup<'a> {
        Lookup {
            overlay: self.reader.as_ref(),
            data: self.data.as_ref(),
            manifest: m,
            dirs: &self.dirs,
            scan_only: self.scan_only.load(Ordering::Relaxed),
        }
    }

    pub async fn lookup(&self, table: &str, index: &str, key: &[Value]) -> Result<LookupResult> {
        let m = self.pinned();
        self.over(&m).lookup(table, index, key).await
    }

    pub async fn lookup_many(
        &self,
        table: &str,
        index: &str,
        keys: &[Vec<Value>],
    ) -> Result<LookupResult> {
        let m = self.pinned();
        self.over(&m).lookup_many(table, index, keys).await
    }

    pub async fn range(
        &self,
        table: &str,
        index: &str,
        lower: ValueBound,
        upper: ValueBound,
        reverse: bool,
    ) -> Result<LookupResult> {
        let m = self.pinned();
        self.over(&m)
            .range(table, index, lower, upper, reverse)
            .await
    }

    pub async fn check_range_column(
        &self,
        table: &str,
        index: &str,
        lower: &ValueBound,
        upper: &ValueBound,
        column: &str,
    ) -> Result<()> {
        let m = self.pinned();
        self.over(&m)
            .check_range_column(table, index, lower, upper, column)
    }

    pub async fn nulls(
        &self,
        table: &str,
        index: &str,
        prefix: &[Option<Value>],
        reverse: bool,
    ) -> Result<LookupResult> {
        let m = self.pinned();
        self.over(&m).nulls(table, index, prefix, reverse).await
    }

    /// Rows by position, data files read at the published versions (ETags) where the store
    /// reports them.
    pub async fn fetch(
        &self,
        table: &str,
        rows: &[RowRef],
        columns: &[String],
    ) -> Result<arrow_array::RecordBatch> {
        let m = self.pinned();
        self.over(&m).fetch(table, rows, columns, true).await
    }

    pub async fn query(
        &self,
        table: &str,
        q: &crate::planner::Query,
    ) -> Result<crate::planner::QueryResult> {
        let m = self.pinned();
        self.over(&m).query_native(table, q).await
    }

    pub async fn locate(&self, table: &str, ids: &[u64]) -> Result<crate::query::LocateResult> {
        let m = self.pinned();
        self.over(&m).locate(table, ids)
    }
}
