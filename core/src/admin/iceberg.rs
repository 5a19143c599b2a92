//! Mounting a read-only Iceberg table as an overlay table and following it (issue 16): the
//! live data files of a snapshot are registered like a Parquet table's, its delete files
//! (position deletes, equality deletes, deletion vectors) are resolved into each data file's
//! delete mask, and the upstream (metadata file, snapshot, manifests read) is recorded.
//! [`Overlay::sync_iceberg`] moves the table to a newer snapshot reading only the manifests it
//! has not seen. Nothing upstream is ever written.
//!
//! Format version 3: rows take their ids from the table's row lineage ([`RowIds`]).
//! Not yet (a typed refusal, never a wrong answer): data files in formats other than Parquet.

use std::collections::{BTreeSet, HashMap, HashSet};

use futures::StreamExt;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

pub use crate::admin::catalog::IcebergSource;
use crate::admin::catalog::IcebergState;
pub use crate::admin::catalog::RowIds;
use crate::admin::lifecycle::FileSetChange;
use crate::admin::overlay::{FileSelection, Overlay, TableInfo, TableSetup};
use crate::admin::schema::evolve_fields;
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::iceberg::deletes::{self, FILE_PATH_FIELD_ID, POS_FIELD_ID};
use crate::formats::iceberg::{
    self, metadata::MAX_METADATA_BYTES, FileContent, LiveFile, SnapshotFiles, TableMetadata,
};
use crate::io::{Location, ObjectStoreReader, RangeReader};
use crate::values::Value;

/// Distinct rows of equality delete files held while resolving them.
pub const MAX_EQUALITY_DELETE_ROWS: u64 = 10_000_000;

/// The reserved field id of Iceberg's `_row_id` column (spec: "Row Lineage").
pub const ROW_ID_FIELD_ID: i32 = 2147483540;

/// Runs of explicit row ids kept for one data file ([`crate::formats::rowset::IdRuns`]). A file whose materialized
/// `_row_id` values fragment into more runs reports no row ids (lookups answer `rowId:
/// null`, `locate` keeps it as a candidate) rather than a manifest as large as its column.
pub use crate::admin::moves::MAX_ROW_ID_RUNS;

/// What [`Overlay::sync_iceberg`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// The snapshot the table was at, and the one it is at now (the same when nothing changed).
    pub from_snapshot: i64,
    pub snapshot_id: i64,
    pub metadata_location: String,
    /// Data files registered, and dropped (removed upstream or rewritten).
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Data files whose delete mask changed.
    pub masks_changed: Vec<String>,
    /// Rows the added files brought.
    pub rows_added: u64,
    /// Manifests read (the others were known from the last sync) and delete files read.
    pub manifests_read: u64,
    pub delete_files_read: u64,
    /// Requests to and bytes from the upstream table: metadata file, manifest list,
    /// manifests, delete files and the data files read to resolve equality deletes (added
    /// data files' facts and indexed columns are not counted).
    pub requests: u64,
    pub bytes: u64,
    /// Unique indexes a duplicate upstream key poisoned.
    pub poisoned: Vec<String>,
    /// Indexes whose work over the added files did not fit the sync's commit: the files are
    /// registered (and scanned) and the staged build path catches them up.
    #[serde(default)]
    pub pending: Vec<String>,
    /// Set when the change claims to move rows (RFC 0006): files removed and added under
    /// `replace` snapshots only, on a table with row lineage. It says how many rows the
    /// added files hold of the removed files' — checked by their row ids — and how many
    /// index entries were carried over rather than derived, or why the ids do not bear the
    /// claim out (then every entry is derived, as for any change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<MoveReport>,
}

/// A change of files that claimed to move rows, as its row ids bear it out
/// ([`crate::admin::moves`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveReport {
    /// Files added (the move's outputs) and removed (its sources).
    pub files: u64,
    pub sources: u64,
    /// Rows the added files hold, each a live row of a removed file under the same id.
    pub rows: u64,
    /// Runs of consecutive rows moved together (a measure of the move's fragmentation).
    pub segments: u64,
    /// Index entries of the added files (rows, for full text and vector) carried over from
    /// the removed files' blobs or runs, and derived from the added files' columns (bloom,
    /// and any index whose source blobs could not give them). Both 0 when the work did not
    /// fit the sync's commit (`pending`): the build's steps carry it later from the move's
    /// record (decision 76).
    pub carried: u64,
    pub derived: u64,
    /// Why the change is not a move: the first check the row ids failed (`files`, `rows`
    /// and `segments` are then 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Overlay {
    /// Mounts the Iceberg table at `source` (`file://`, `s3://`, …) as table `name`, at its
    /// current snapshot. `source` is a metadata file (`….metadata.json`, `.gz.metadata.json`
    /// too) or the table's directory, whose newest metadata file is used
    /// ([`Overlay::locate_metadata`]): its live data files are registered (their
    /// facts read and checked against the manifests' record counts and sizes), its delete
    /// files resolved into delete masks, all in one commit; the table can then be indexed,
    /// queried and published like any table. Errors: `E_ICEBERG` (malformed or escaping
    /// metadata or delete files, a data file that does not match its manifest entry),
    /// `E_UNSUPPORTED` (mixed schemas, non-Parquet files), `E_INVALID` (no snapshot),
    /// `E_EXISTS`, and the reads' errors.
    pub async fn mount_iceberg(&self, name: &str, source: &str) -> Result<TableInfo> {
        self.mount_iceberg_at(name, source, None).await
    }

    /// Mounts table `name` from a REST catalog (`access`: the catalog's URI, warehouse,
    /// namespace and table, and this process's credentials): connects (OAuth2 client
    /// credentials or a bearer token), loads the table with vended credentials, reads its
    /// metadata and data through them (refreshed before they expire), then mounts as
    /// [`Overlay::mount_iceberg`]. The overlay records which catalog table it follows — never
    /// a secret; [`Overlay::sync_iceberg`] then follows the catalog's current metadata. Only
    /// `GET`s reach the catalog (and the OAuth2 token `POST`). Errors: `E_AUTH` (refused
    /// credentials), `E_NOT_FOUND` (no such table), `E_UNSUPPORTED` (non-S3 vended
    /// credentials), `E_ICEBERG` (a malformed answer), and the mount's errors.
    pub async fn mount_iceberg_catalog(
        &self,
        name: &str,
        access: crate::io::rest::CatalogAccess,
    ) -> Result<TableInfo> {
        crate::values::names::check("table", name)?;
        let at = access.table.clone();
        let metadata = self.connect_catalog(access).await?;
        self.mount_iceberg_at(name, &metadata, Some(at)).await
    }

    /// Connects this process to a REST catalog table (replacing an earlier connection to the
    /// same table): its vended credentials are routed for the table's objects and a sync of a
    /// table mounted from it asks it. Returns the table's current metadata file.
    #[cfg(feature = "s3")]
    pub async fn connect_catalog(&self, access: crate::io::rest::CatalogAccess) -> Result<String> {
        let c =
            crate::io::rest_catalog::RestCatalog::connect(access, self.reader.timeout()).await?;
        let metadata = c.follow(&self.data).await?;
        let mut all = self.catalogs.lock().expect("catalogs");
        all.retain(|o| o.table() != c.table());
        all.push(c);
        Ok(metadata)
    }

    /// Without the `s3` feature there is no catalog client: `E_UNSUPPORTED`.
    #[cfg(not(feature = "s3"))]
    pub async fn connect_catalog(&self, access: crate::io::rest::CatalogAccess) -> Result<String> {
        Err(crate::io::rest::no_client(&access.table))
    }

    /// The current metadata file of the catalog table `at`, asked through this process's
    /// connection to it (credentials re-vended and routed). `E_AUTH` without one.
    async fn follow_catalog(
        &self,
        table: &str,
        at: &crate::io::rest::CatalogRef,
    ) -> Result<String> {
        #[cfg(feature = "s3")]
        {
            let c = self
                .catalogs
                .lock()
                .expect("catalogs")
                .iter()
                .find(|c| c.table() == at)
                .cloned();
            match c {
                Some(c) => c.follow(&self.data).await,
                None => Err(Error::Auth(format!(
                    "table {table} follows the REST catalog table {}: this process has no \
                     credentials for it (open with catalogs: [...], or connectCatalog)",
                    at.display()
                ))),
            }
        }
        #[cfg(not(feature = "s3"))]
        {
            let _ = table;
            Err(crate::io::rest::no_client(at))
        }
    }

    async fn mount_iceberg_at(
        &self,
        name: &str,
        source: &str,
        catalog: Option<crate::io::rest::CatalogRef>,
    ) -> Result<TableInfo> {
        crate::values::names::check("table", name)?;
        let metadata_url = self.locate_metadata(source).await?;
        let (meta, _) = self.read_table_metadata(&metadata_url).await?;
        let snapshot_id = meta.current_snapshot().ok_or_else(|| {
            Error::Invalid(format!(
                "{metadata_url}: the table has no snapshot to mount"
            ))
        })?;
        let location = meta.location.trim_end_matches('/').to_string();
        let reader = self.rooted(&location)?;
        let files = iceberg::snapshot_files(&reader, &meta, snapshot_id).await?;
        check_formats(name, &files)?;
        let all: BTreeSet<&str> = files.data.iter().map(|f| f.path.as_str()).collect();
        let (masks, _) = self.resolve_deletes(&location, &meta, &files, &all).await?;
        // Newest first: the table's column types come from the newest file holding each.
        let mut newest: Vec<&LiveFile> = files.data.iter().collect();
        newest.sort_by(|a, b| {
            b.sequence_number
                .cmp(&a.sequence_number)
                .then(a.path.cmp(&b.path))
        });
        let paths: Vec<String> = newest.iter().map(|f| f.path.clone()).collect();
        let row_ids = self.row_ids(&location, &meta, &newest).await?;
        let setup = TableSetup {
            row_ids,
            schema: Some(meta.current_schema()?.clone()),
            expect: files
                .data
                .iter()
                .map(|f| (f.path.clone(), (f.record_count, f.size)))
                .collect(),
            masks,
            iceberg: Some(upstream(&metadata_url, &meta, &files, catalog)),
            iceberg_state: Some(IcebergState {
                snapshot_id,
                manifests: files.manifests.clone(),
            }),
        };
        self.register_table_with(name, &location, FileSelection::List(paths), setup)
            .await
    }

    /// Moves the mounted table `name` to the upstream table's current snapshot: the newest
    /// metadata file of its directory, or `source` (a metadata file, e.g. the one a catalog
    /// names). Reads the manifest list and only the manifests the last sync did not see,
    /// registers added data files (indexes kept whole: their keys are indexed at once),
    /// drops removed ones, and recomputes the delete masks a changed set of delete files
    /// touches — one commit, so readers see the old snapshot's files or the new one's. A key
    /// an upstream write duplicates poisons the unique index (upstream writes cannot be
    /// refused); the report names it. Publish to move readers.
    ///
    /// Errors: `E_NOT_FOUND` (not a mounted Iceberg table), `E_REFUSED` (another process
    /// synced the table meanwhile), `E_UNSUPPORTED` (schema evolution, non-Parquet files),
    /// `E_ICEBERG` and the reads' errors — the table is then left as it was.
    pub async fn sync_iceberg(&self, name: &str, source: Option<&str>) -> Result<SyncReport> {
        let _one = self.syncing.lock().await;
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, name).await?;
        let Some(src) = tr.iceberg.clone() else {
            return Err(Error::NotFound {
                kind: "Iceberg-backed table",
                name: name.to_string(),
            });
        };
        let state: IcebergState = t.iceberg_state(tr.table_id).await?;
        let registered = self.catalog.files(&t, tr.table_id).await?;
        drop(t);
        let metadata_url = match (source, &src.catalog) {
            (Some(s), _) => self.locate_metadata(s).await?,
            (None, Some(at)) => self.follow_catalog(name, at).await?,
            (None, None) => self.locate_metadata(&src.location).await?,
        };
        let (meta, meta_bytes) = self.read_table_metadata(&metadata_url).await?;
        let location = meta.location.trim_end_matches('/').to_string();
        if location != src.location {
            return Err(Error::Iceberg(format!(
                "{metadata_url} is the metadata of a table at {location}, not {}",
                src.location
            )));
        }
        let mut report = SyncReport {
            from_snapshot: src.snapshot_id,
            metadata_location: metadata_url.clone(),
            requests: 1,
            bytes: meta_bytes,
            ..Default::default()
        };
        let snapshot_id = meta
            .current_snapshot()
            .ok_or_else(|| Error::Invalid(format!("{metadata_url}: the table has no snapshot")))?;
        report.snapshot_id = snapshot_id;
        if snapshot_id == src.snapshot_id && state.snapshot_id == snapshot_id {
            return Ok(report);
        }
        let reader = self.rooted(&location)?;
        let known = if state.snapshot_id == src.snapshot_id {
            &state.manifests[..]
        } else {
            &[]
        };
        let files = iceberg::snapshot_files_since(&reader, &meta, snapshot_id, known).await?;
        report.requests += files.requests;
        report.bytes += files.bytes;
        report.manifests_read = files.requests.saturating_sub(1);
        check_formats(name, &files)?;
        let live: HashSet<&str> = files.data.iter().map(|f| f.path.as_str()).collect();
        let have: HashSet<&str> = registered.iter().map(|f| f.path.as_str()).collect();
        report.removed = registered
            .iter()
            .filter(|f| !live.contains(f.path.as_str()))
            .map(|f| f.path.clone())
            .collect();
        let added: Vec<&LiveFile> = files
            .data
            .iter()
            .filter(|f| !have.contains(f.path.as_str()))
            .collect();
        report.added = added.iter().map(|f| f.path.clone()).collect();
        report.rows_added = added.iter().map(|f| f.record_count).sum();
        // Masks: of every live file when the set of delete files changed, else of added files.
        let old_deletes: BTreeSet<&str> = state
            .manifests
            .iter()
            .flat_map(|m| m.files.iter())
            .filter(|f| f.content != FileContent::Data)
            .map(|f| f.path.as_str())
            .collect();
        let new_deletes: BTreeSet<&str> = files.deletes.iter().map(|f| f.path.as_str()).collect();
        let targets: BTreeSet<&str> = if old_deletes != new_deletes {
            live.iter().copied().collect()
        } else {
            added.iter().map(|f| f.path.as_str()).collect()
        };
        let (masks, (reads, bytes, n)) = self
            .resolve_deletes(&location, &meta, &files, &targets)
            .await?;
        report.requests += reads;
        report.bytes += bytes;
        report.delete_files_read = n;
        // Row ids (v3): of added files, and of kept files whose first row id changed (the
        // first snapshot after an upgrade to version 3 assigns them).
        let old_first: HashMap<&str, Option<i64>> = if state.snapshot_id == src.snapshot_id {
            state
                .manifests
                .iter()
                .flat_map(|m| m.files.iter())
                .filter(|f| f.content == FileContent::Data)
                .map(|f| (f.path.as_str(), f.first_row_id))
                .collect()
        } else {
            HashMap::new()
        };
        let lineage: Vec<&LiveFile> = files
            .data
            .iter()
            .filter(|f| {
                !have.contains(f.path.as_str())
                    || old_first.get(f.path.as_str()) != Some(&f.first_row_id)
            })
            .collect();
        let row_ids = self.row_ids(&location, &meta, &lineage).await?;
        let mut change = FileSetChange {
            row_ids,
            remove: report.removed.clone(),
            poison_duplicates: true,
            iceberg: Some(upstream(&metadata_url, &meta, &files, src.catalog.clone())),
            iceberg_state: Some(IcebergState {
                snapshot_id,
                manifests: files.manifests.clone(),
            }),
            expect_snapshot: Some(src.snapshot_id),
            fields: Some(evolve_fields(meta.current_schema()?, &tr.fields, &[])),
            ..Default::default()
        };
        for p in &targets {
            let new = masks.get(*p);
            let old = registered
                .iter()
                .find(|f| f.path == *p)
                .map(|f| f.deleted())
                .transpose()?
                .flatten();
            if new != old.as_ref() {
                report.masks_changed.push(p.to_string());
            }
            change.masks.insert(p.to_string(), new.cloned());
        }
        report.masks_changed.sort();
        let (verdict, mv) = match moved(
            &meta,
            (src.snapshot_id, snapshot_id),
            &registered,
            &report,
            &added,
            &change,
        ) {
            Some((v, m)) => (Some(v), m),
            None => (None, None),
        };
        report.moved = verdict;
        change.moved = mv;
        let r = self
            .register_files_with(name, &report.added, change)
            .await?;
        if let Some(m) = report.moved.as_mut().filter(|m| m.refused.is_none()) {
            m.carried = r.carried;
            m.derived = r.derived;
        }
        report.poisoned = r.poisoned;
        report.pending = r.pending;
        Ok(report)
    }

    /// The row ids of the data files `files` of a format-version-3 table (none for older
    /// versions: the table's own counter numbers their rows). Reads each file's footer, and
    /// its `_row_id` column when it has one. Errors: `E_ICEBERG` for a negative or repeated
    /// row id, a `_row_id` column that is not a long; the reads' errors.
    async fn row_ids(
        &self,
        location: &str,
        meta: &TableMetadata,
        files: &[&LiveFile],
    ) -> Result<HashMap<String, RowIds>> {
        let mut out = HashMap::new();
        if meta.format_version < 3 {
            return Ok(out);
        }
        // Futures built in a loop, not by a closure: a closure returning a borrowing future
        // makes the caller's future not `Send` (rustc's higher-ranked lifetime limits).
        let mut pending = Vec::with_capacity(files.len());
        for f in files {
            pending.push(self.file_row_ids(location, f));
        }
        let results: Vec<Result<RowIds>> =
            futures::stream::iter(pending).buffered(8).collect().await;
        for (f, r) in files.iter().zip(results) {
            out.insert(f.path.clone(), r?);
        }
        Ok(out)
    }

    async fn file_row_ids(&self, location: &str, f: &LiveFile) -> Result<RowIds> {
        let bad = |what: String| Error::Iceberg(format!("{}: {what}", f.path));
        let start = f
            .first_row_id
            .map(|v| u64::try_from(v).map_err(|_| bad(format!("first_row_id {v} is negative"))))
            .transpose()?;
        if start
            .and_then(|s| s.checked_add(f.record_count))
            .is_some_and(|e| e > i64::MAX as u64)
        {
            return Err(bad("row ids overflow".into()));
        }
        let url = crate::io::path::join(location, &f.path);
        let loc = Location::new(&url);
        let md = datafile::read_metadata(self.data.as_ref(), &loc, f.size).await?;
        let fields = datafile::fields(&datafile::arrow_schema(&md)?);
        let Some(root) = fields.iter().position(|x| x.field_id == ROW_ID_FIELD_ID) else {
            return Ok(RowIds { start, runs: None });
        };
        crate::admin::moves::read_ids(
            self.data.as_ref(),
            &loc,
            &md,
            root,
            start,
            f.record_count,
            |what| bad(format!("_row_id: {what}")),
        )
        .await
    }

    /// Reads and parses the metadata file at `url` (bounded); returns it and its size.
    async fn read_table_metadata(&self, url: &str) -> Result<(TableMetadata, u64)> {
        let bytes = self
            .data
            .read_all_max(&Location::new(url), MAX_METADATA_BYTES)
            .await
            .map_err(|e| match e {
                crate::io::IoError::TooLarge { .. } => {
                    Error::Iceberg(format!("{url} is larger than {MAX_METADATA_BYTES} bytes"))
                }
                e => e.into(),
            })?;
        Ok((TableMetadata::from_json(&bytes)?, bytes.len() as u64))
    }

    /// The delete masks of the data files `targets` of `files` (those with deleted rows), from
    /// the live delete files that apply to them ([`deletes::applies`]); and the requests,
    /// bytes and delete files read. A position naming a row past a file's end is `E_ICEBERG`.
    async fn resolve_deletes(
        &self,
        location: &str,
        meta: &TableMetadata,
        files: &SnapshotFiles,
        targets: &BTreeSet<&str>,
    ) -> Result<(HashMap<String, RoaringTreemap>, (u64, u64, u64))> {
        let mut masks: HashMap<String, RoaringTreemap> = HashMap::new();
        let (mut requests, mut bytes, mut read) = (0u64, 0u64, 0u64);
        let data: HashMap<&str, &LiveFile> = files
            .data
            .iter()
            .filter(|f| targets.contains(f.path.as_str()))
            .map(|f| (f.path.as_str(), f))
            .collect();
        let before = self.data.counters().snapshot();
        for d in &files.deletes {
            let applies: Vec<&LiveFile> = data
                .values()
                .copied()
                .filter(|f| deletes::applies(meta, d, f))
                .collect();
            if applies.is_empty() {
                continue;
            }
            read += 1;
            let url = crate::io::path::join(location, &d.path);
            let loc = Location::new(&url);
            let out_of_range = |f: &LiveFile, p: i64| {
                Error::Iceberg(format!(
                    "{} deletes position {p} of {}, which has {} rows",
                    d.path, f.path, f.record_count
                ))
            };
            match (d.content, d.format.as_str()) {
                (FileContent::PositionDeletes, "PUFFIN") => {
                    let (Some(off), Some(len)) = (d.content_offset, d.content_size_in_bytes)
                    else {
                        return Err(Error::Iceberg(format!(
                            "deletion vector {} has no content offset and size",
                            d.path
                        )));
                    };
                    let (off, len) = (
                        u64::try_from(off).map_err(|_| {
                            Error::Iceberg(format!("{}: negative content offset", d.path))
                        })?,
                        u64::try_from(len).map_err(|_| {
                            Error::Iceberg(format!("{}: negative content size", d.path))
                        })?,
                    );
                    if len > deletes::MAX_DV_BYTES || off.checked_add(len).is_none_or(|e| e > d.size) {
                        return Err(Error::Iceberg(format!(
                            "deletion vector {} at {off}+{len} is outside its {}-byte file",
                            d.path, d.size
                        )));
                    }
                    // A deletion vector names exactly one data file (spec: required).
                    let (Some(_), [f]) = (&d.referenced_data_file, applies.as_slice()) else {
                        return Err(Error::Iceberg(format!(
                            "deletion vector {} does not name the one data file it applies to",
                            d.path
                        )));
                    };
                    let blob = self.data.read_range(&loc, off..off + len).await?;
                    let mask = deletes::decode_deletion_vector(&blob, f.record_count)?;
                    *masks.entry(f.path.clone()).or_default() |= mask;
                }
                (FileContent::PositionDeletes, "PARQUET") => {
                    let md = datafile::read_metadata(self.data.as_ref(), &loc, d.size).await?;
                    let fields = datafile::fields(&datafile::arrow_schema(&md)?);
                    let id = |fid: i32, name: &str| {
                        fields
                            .iter()
                            .find(|f| f.field_id == fid)
                            .or_else(|| fields.iter().find(|f| f.name == name))
                            .map(|f| f.field_id)
                            .ok_or_else(|| {
                                Error::Iceberg(format!(
                                    "position delete file {} has no {name} column",
                                    d.path
                                ))
                            })
                    };
                    let ids = [id(FILE_PATH_FIELD_ID, "file_path")?, id(POS_FIELD_ID, "pos")?];
                    let by_uri: HashMap<&str, &LiveFile> =
                        applies.iter().map(|f| (f.path.as_str(), *f)).collect();
                    let mut last: Option<(String, Option<&LiveFile>)> = None;
                    datafile::scan_values(self.data.as_ref(), &loc, &md, &ids, |v, _| {
                        let (Value::String(path), Value::Int(pos)) = (&v[0], &v[1]) else {
                            return Err(Error::Iceberg(format!(
                                "{}: a row without a file path and position",
                                d.path
                            )));
                        };
                        // Rows are sorted by path: resolve each path once.
                        if last.as_ref().is_none_or(|(p, _)| p != path) {
                            let rel = iceberg::relative_to(location, path)?;
                            last = Some((path.clone(), by_uri.get(rel.as_str()).copied()));
                        }
                        if let Some((_, Some(f))) = &last {
                            let p = u64::try_from(*pos).map_err(|_| out_of_range(f, *pos))?;
                            if p >= f.record_count {
                                return Err(out_of_range(f, *pos));
                            }
                            masks.entry(f.path.clone()).or_default().insert(p);
                        }
                        Ok(())
                    })
                    .await?;
                }
                (FileContent::EqualityDeletes, "PARQUET") => {
                    if d.equality_ids.is_empty() {
                        return Err(Error::Iceberg(format!(
                            "equality delete file {} has no equality field ids",
                            d.path
                        )));
                    }
                    let md = datafile::read_metadata(self.data.as_ref(), &loc, d.size).await?;
                    let mut keys: HashSet<String> = HashSet::new();
                    let fields = datafile::fields(&datafile::arrow_schema(&md)?);
                    for id in &d.equality_ids {
                        datafile::root_of(&fields, *id).map_err(|_| {
                            Error::Iceberg(format!(
                                "equality delete file {} has no column with field id {id}",
                                d.path
                            ))
                        })?;
                    }
                    datafile::scan_values(
                        self.data.as_ref(),
                        &loc,
                        &md,
                        &d.equality_ids,
                        |v, _| {
                            keys.insert(equality_key(v.iter()));
                            if keys.len() as u64 > MAX_EQUALITY_DELETE_ROWS {
                                return Err(Error::Limit {
                                    what: "rows of an equality delete file",
                                    count: keys.len() as u64,
                                    limit: MAX_EQUALITY_DELETE_ROWS,
                                    remedy: "compact the upstream table's deletes",
                                });
                            }
                            Ok(())
                        },
                    )
                    .await?;
                    for f in applies {
                        let furl = crate::io::path::join(location, &f.path);
                        let floc = Location::new(&furl);
                        let fmd = datafile::read_metadata(self.data.as_ref(), &floc, f.size).await?;
                        let ffields = datafile::fields(&datafile::arrow_schema(&fmd)?);
                        // A column the data file does not have reads as NULL there.
                        let present: Vec<i32> = d
                            .equality_ids
                            .iter()
                            .copied()
                            .filter(|id| ffields.iter().any(|x| x.field_id == *id))
                            .collect();
                        let mut hit = RoaringTreemap::new();
                        let nulls = Value::Null;
                        datafile::scan_values(self.data.as_ref(), &floc, &fmd, &present, |v, p| {
                            let key = equality_key(d.equality_ids.iter().map(|id| {
                                present
                                    .iter()
                                    .position(|x| x == id)
                                    .map_or(&nulls, |i| &v[i])
                            }));
                            if keys.contains(&key) {
                                hit.insert(p);
                            }
                            Ok(())
                        })
                        .await?;
                        if !hit.is_empty() {
                            *masks.entry(f.path.clone()).or_default() |= hit;
                        }
                    }
                }
                (_, format) => {
                    return Err(Error::Unsupported(format!(
                        "delete file {} is {format}; Parquet position and equality deletes and Puffin deletion vectors are read",
                        d.path
                    )))
                }
            }
        }
        let after = self.data.counters().snapshot();
        requests += after.requests.saturating_sub(before.requests);
        bytes += after.bytes.saturating_sub(before.bytes);
        Ok((masks, (requests, bytes, read)))
    }

    /// The metadata file `source` names: itself when it ends in `.metadata.json`; else, taking
    /// it as a table directory, `metadata/v<N>.metadata.json` where `metadata/version-hint.text`
    /// holds `N` (and that file exists), else the newest `*.metadata.json` in `metadata/`
    /// ([`crate::formats::iceberg::metadata::newest_metadata`]). Errors: `E_NOT_FOUND` when the
    /// directory holds no metadata file.
    pub async fn locate_metadata(&self, source: &str) -> Result<String> {
        if source.ends_with(".metadata.json") {
            return Ok(source.to_string());
        }
        let dir = format!("{}/metadata", source.trim_end_matches('/'));
        let r = self.rooted(&dir)?;
        if let Ok(hint) = r
            .read_all_max(&Location::new("version-hint.text"), 1024)
            .await
        {
            let v = String::from_utf8_lossy(&hint).trim().to_string();
            if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
                for n in [
                    format!("v{v}.metadata.json"),
                    format!("v{v}.gz.metadata.json"),
                ] {
                    if r.head(&Location::new(&n)).await.is_ok() {
                        return Ok(format!("{dir}/{n}"));
                    }
                }
            }
        }
        let listed = r
            .store()
            .list_with_delimiter(Some(r.root()))
            .await
            .map_err(crate::admin::overlay::store_err)?;
        let names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        match iceberg::metadata::newest_metadata(names.iter().map(String::as_str)) {
            Some(n) => Ok(format!("{dir}/{n}")),
            None => Err(Error::NotFound {
                kind: "Iceberg metadata file",
                name: dir,
            }),
        }
    }

    /// What table `name` was mounted from (`None` for a Parquet table).
    pub async fn iceberg_source(&self, name: &str) -> Result<Option<IcebergSource>> {
        let t = self.catalog.begin()?;
        Ok(self.catalog.table(&t, name).await?.iceberg)
    }

    /// A reader of the objects under `location` (paths relative to it), through the
    /// overlay's data-file stores and their options.
    fn rooted(&self, location: &str) -> Result<ObjectStoreReader> {
        let (store, inner) = self.data.resolve(&Location::new(format!("{location}/")))?;
        Ok(ObjectStoreReader::new(
            store.store().clone(),
            object_store::path::Path::from(inner.path.trim_end_matches('/')),
        ))
    }
}

/// Whether the change from snapshot `from` to `to` moved rows ([`MoveReport`]): `None` unless
/// files were both removed and added under `replace` snapshots only, on a table with row
/// lineage; then the row ids' verdict. `registered` are the files before the change; `change`
/// holds the added files' row ids and every target's new delete mask.
fn moved(
    meta: &TableMetadata,
    (from, to): (i64, i64),
    registered: &[crate::formats::manifest::FileEntry],
    report: &SyncReport,
    added: &[&LiveFile],
    change: &FileSetChange,
) -> Option<(MoveReport, Option<crate::admin::moves::Move>)> {
    use crate::admin::moves::{replace_chain, Lineage, Move, MoveMap, NotAMove};
    if report.added.is_empty() || report.removed.is_empty() {
        return None;
    }
    replace_chain(meta, from, to).ok()?;
    let refused = |n: NotAMove| MoveReport {
        files: added.len() as u64,
        sources: report.removed.len() as u64,
        refused: Some(n.to_string()),
        ..Default::default()
    };
    // A kept file whose deleted rows changed: values left the table, not only files.
    let removed: HashSet<&str> = report.removed.iter().map(|p| p.as_str()).collect();
    let added_paths: HashSet<&str> = added.iter().map(|f| f.path.as_str()).collect();
    if let Some(p) = report
        .masks_changed
        .iter()
        .find(|p| !removed.contains(p.as_str()) && !added_paths.contains(p.as_str()))
    {
        return Some((refused(NotAMove::MasksChanged { file: p.clone() }), None));
    }
    let masks: Vec<Option<RoaringTreemap>> = match registered
        .iter()
        .filter(|f| removed.contains(f.path.as_str()))
        .map(|f| f.deleted())
        .collect::<Result<Vec<_>>>()
    {
        Ok(m) => m,
        Err(e) => {
            return Some((
                refused(NotAMove::BadIds {
                    file: String::new(),
                    reason: e.to_string(),
                }),
                None,
            ))
        }
    };
    let sources: Vec<Lineage<'_>> = registered
        .iter()
        .filter(|f| removed.contains(f.path.as_str()))
        .zip(&masks)
        .map(|(f, m)| Lineage::of_file(f, m.as_ref()))
        .collect();
    let no_ids = crate::admin::catalog::RowIds::default();
    let outputs: Vec<Lineage<'_>> = added
        .iter()
        .map(|f| {
            let ids = change.row_ids.get(&f.path).unwrap_or(&no_ids);
            Lineage {
                path: &f.path,
                rows: f.record_count,
                start: ids.start,
                runs: ids.runs.as_ref(),
                deleted: change.masks.get(&f.path).and_then(|m| m.as_ref()),
            }
        })
        .collect();
    Some(match MoveMap::of(&sources, &outputs) {
        Ok(m) => (
            MoveReport {
                files: outputs.len() as u64,
                sources: sources.len() as u64,
                rows: m.rows,
                segments: m.segments() as u64,
                ..Default::default()
            },
            Some(Move {
                sources: sources.iter().map(|s| s.path.to_string()).collect(),
                outputs: outputs.iter().map(|o| o.path.to_string()).collect(),
                map: m,
            }),
        ),
        Err(n) => (refused(n), None),
    })
}

/// The upstream record of a table at `files`' snapshot, read from `metadata_url`.
fn upstream(
    metadata_url: &str,
    meta: &TableMetadata,
    files: &SnapshotFiles,
    catalog: Option<crate::io::rest::CatalogRef>,
) -> IcebergSource {
    IcebergSource {
        catalog,
        metadata_location: metadata_url.to_string(),
        location: meta.location.trim_end_matches('/').to_string(),
        snapshot_id: files.snapshot_id,
        sequence_number: files.sequence_number,
        format_version: meta.format_version,
    }
}

/// A snapshot whose data files Skerry cannot read yet is refused (`E_UNSUPPORTED`).
fn check_formats(name: &str, files: &SnapshotFiles) -> Result<()> {
    if let Some(f) = files.data.iter().find(|f| f.format != "PARQUET") {
        return Err(Error::Unsupported(format!(
            "{name}: {} is {}; only Parquet data files are read",
            f.path, f.format
        )));
    }
    Ok(())
}

/// The identity of a row's equality-delete values: equal values (NULL equals NULL, an int
/// equals the same long, a float the same double) give equal keys.
fn equality_key<'a>(values: impl Iterator<Item = &'a Value>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for v in values {
        let _ = match v {
            Value::Float32(f) => write!(s, "{:?}\u{1f}", Value::Float64(*f as f64)),
            v => write!(s, "{v:?}\u{1f}"),
        };
    }
    s
}
