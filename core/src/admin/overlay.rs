//! The native overlay: catalog + bundles + manifests under one object-store prefix, and the
//! verbs that administer them (register, create index, build, publish, refresh, lookup).

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::admin::catalog::*;
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::lineage::{self, ActiveSnapshot};
use crate::formats::manifest::*;
use crate::index::ordered;
use crate::io::{Location, ObjectStoreReader, RangeReader, UrlReader};
use crate::read::cache::ReadCache;
use crate::read::lookup::LookupResult;
use crate::read::snapshot::{RejectionSink, Snapshot};
use crate::values::{Direction, KeyColumn, KeySchema, NullOrder, Value, ValueBound};

/// `E_ALREADY_EXISTS` when a table is named `name` in `t`.
/// Writes `rec` as a table named by its name, at the catalog version this transaction
/// moves to (its snapshot), with its Iceberg state.
async fn name_table(
    t: &Txn<'_>,
    mut rec: TableRecord,
    state: &Option<crate::admin::catalog::IcebergState>,
) -> Result<()> {
    rec.snapshot = t.bump_version().await?;
    if let Some(state) = state {
        t.put_iceberg_state(rec.table_id, state).await?;
    }
    t.put(&table_key(rec.table_id), &rec)?;
    t.put(&table_name_key(&rec.name), &rec.table_id)
}

async fn name_free(t: &Txn<'_>, name: &str) -> Result<()> {
    match t.get::<u64>(&table_name_key(name)).await? {
        Some(_) => Err(Error::AlreadyExists {
            kind: "table",
            name: name.into(),
        }),
        None => Ok(()),
    }
}

/// File records one registration commit writes at most (a few MiB of catalog values): a
/// table registered with more files is written in several commits and named by the last.
pub const FILES_PER_COMMIT: usize = 8192;

/// Times a registration's commit is tried when it conflicts with another writer's (each try
/// reads the catalog afresh).
const REGISTER_ATTEMPTS: usize = 16;

/// Data files whose facts (head, footer, SHA-256) are read at once while registering.
pub const FACT_CONCURRENCY: usize = 16;

/// Tables with at least this many indexed files get a table-wide sorted run per index.
pub const RUN_MIN_FILES: usize = 4;
/// Bytes buffered before a table run's upload part goes out (object stores want ≥ 5 MiB
/// parts).
pub const RUN_PART_BYTES: usize = 8 << 20;

pub(crate) use crate::io::store::open_store;
pub use crate::io::store::OpenOptions;

/// An object-store failure as Skerry's I/O error ([`crate::io::store::store_err`]).
pub(crate) fn store_err(e: object_store::Error) -> Error {
    crate::io::store::store_err(e).into()
}

/// What [`Overlay::register_table_with`] commits with a new table (a mounted Iceberg table).
#[derive(Clone, Debug, Default)]
pub(crate) struct TableSetup {
    /// Per path, the record count and size the file must have.
    pub expect: std::collections::HashMap<String, (u64, u64)>,
    /// Per path, the rows deleted.
    pub masks: std::collections::HashMap<String, roaring::RoaringTreemap>,
    pub iceberg: Option<crate::admin::catalog::IcebergSource>,
    pub iceberg_state: Option<crate::admin::catalog::IcebergState>,
    /// The upstream schema: the table's columns follow it (files in the order given, newest
    /// first, type columns no earlier file has), instead of every file having one schema.
    pub schema: Option<crate::formats::iceberg::metadata::Schema>,
    /// Row ids by path from upstream (Iceberg v3 row lineage) instead of the table's counter.
    pub row_ids: std::collections::HashMap<String, crate::admin::catalog::RowIds>,
}

/// Upstream snapshots a table's manifest remembers for pinned reads.
pub const MAX_UPSTREAM_HISTORY: usize = 1000;

/// Which files of a table location to register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileSelection {
    /// These paths, relative to the location.
    List(Vec<String>),
    /// Every `*.parquet` object under the location whose relative path starts with this.
    Prefix(String),
}

/// One column of an index definition: its name, sort direction and NULL placement
/// (default ASC, NULLS LAST).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexColumn {
    pub name: String,
    #[serde(default)]
    pub direction: Direction,
    #[serde(default)]
    pub nulls: NullOrder,
}

impl IndexColumn {
    pub fn desc(mut self) -> Self {
        self.direction = Direction::Desc;
        self
    }
    pub fn nulls_first(mut self) -> Self {
        self.nulls = NullOrder::First;
        self
    }
}

impl From<&str> for IndexColumn {
    fn from(name: &str) -> Self {
        IndexColumn {
            name: name.to_string(),
            direction: Direction::Asc,
            nulls: NullOrder::Last,
        }
    }
}

impl From<String> for IndexColumn {
    fn from(name: String) -> Self {
        IndexColumn::from(name.as_str())
    }
}

/// Options of [`Overlay::create_index`] (defined with the kinds that check them).
pub use crate::index::IndexOptions;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableInfo {
    pub name: String,
    pub table_id: u64,
    pub files: u64,
    pub rows: u64,
    pub fields: Vec<crate::values::FieldInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexInfo {
    pub name: String,
    pub index_id: u64,
    pub fields: Vec<i32>,
    pub unique: bool,
    pub kind: crate::index::IndexKind,
    pub state: IndexState,
}

/// A file a build could not index, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub file: String,
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReport {
    pub files_indexed: u64,
    pub entries: u64,
    pub bundles_written: u64,
    pub bytes_written: u64,
    pub skipped: Vec<Skipped>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishReport {
    pub version: u64,
    pub path: String,
    /// Bytes written: the manifest and its parts (large index lists, see
    /// [`crate::formats::manifest::PartRef`]).
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefreshReport {
    pub checked: u64,
    /// Files whose content changed (confirmed by SHA-256).
    pub changed: Vec<String>,
    /// Files whose version changed but whose content is the same.
    pub touched: Vec<String>,
    /// Files that no longer exist (dropped from the table).
    pub missing: Vec<String>,
    /// Changed files that had deleted rows: their delete masks named rows of the old content
    /// and were dropped (register the deletes again for the new content if they still apply).
    pub deletes_dropped: Vec<String>,
    /// Files that could not be read or can no longer join the table; left as they were.
    pub unreadable: Vec<Skipped>,
}

/// Progress of a long operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub phase: String,
    pub done: u64,
    pub total: u64,
    pub file: Option<String>,
}

/// An overlay opened for administration and lookups.
pub struct Overlay {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) reader: Arc<ObjectStoreReader>,
    pub(crate) data: Arc<UrlReader>,
    pub(crate) catalog: Catalog,
    pub(crate) cache: Arc<ReadCache>,
    /// Counters of reads, repairs and builds (`metrics()`).
    pub(crate) metrics: Arc<crate::read::metrics::Metrics>,
    /// Answer every file by scanning (benchmarks, debugging): see [`Overlay::set_scan_only`].
    scan_only: std::sync::atomic::AtomicBool,
    /// See [`Overlay::set_part_min_bytes`].
    part_min_bytes: std::sync::atomic::AtomicUsize,
    /// Read model of the catalog head, keyed by catalog version.
    pub(crate) model: std::sync::Mutex<Option<(u64, Arc<Manifest>)>>,
    pub(crate) block_bytes: usize,
    /// Bytes of a table run's upload parts ([`crate::admin::runs`]).
    pub(crate) run_part_bytes: usize,
    /// Verbs that write overlay objects before committing references to them hold it shared;
    /// vacuum holds it exclusively, so it never deletes an object about to be referenced.
    pub(crate) writing: tokio::sync::RwLock<()>,
    /// (index id, file id) pairs this process has queued for repair (one catalog write each).
    pub(crate) queued: std::sync::Mutex<std::collections::HashSet<(u64, u64)>>,
    /// Held by an Iceberg sync: one at a time per process.
    pub(crate) syncing: tokio::sync::Mutex<()>,
    /// Vector codebooks this process loaded ([`crate::admin::codebook`]).
    pub(crate) codebooks: Arc<crate::admin::codebook::Codebooks>,
    /// REST catalog connections of this process (`OpenOptions::catalogs`, `mount_iceberg_catalog`,
    /// `connect_catalog`): what a sync of a catalog-mounted table asks.
    #[cfg(feature = "s3")]
    pub(crate) catalogs: std::sync::Mutex<Vec<Arc<crate::io::rest_catalog::RestCatalog>>>,
}

impl Overlay {
    /// What carries a move's entries over with this overlay's catalog, store and codebooks
    /// ([`crate::admin::carry`]).
    pub(crate) fn carrier(&self) -> crate::admin::carry::Carrier<'_> {
        crate::admin::carry::Carrier {
            catalog: Some(&self.catalog),
            reader: &self.reader,
            codebooks: &self.codebooks,
            block_bytes: self.block_bytes,
        }
    }
}

impl Overlay {
    /// Opens the overlay at `url` (`file:///dir`, `memory://`, `s3://bucket/prefix`), creating
    /// its catalog when absent. Every catalog commit is durable when the call making it returns.
    pub async fn open(url: &str, options: OpenOptions) -> Result<Overlay> {
        Self::open_at(open_store(url, &options, true)?, options).await
    }

    /// Opens the overlay kept in `store` (its root is the overlay's root), creating its
    /// catalog when absent — for stores a URL cannot name (a wrapper that instruments or
    /// injects faults, a custom client). `options.storage` still configures data files.
    pub async fn open_with_store(
        store: Arc<dyn ObjectStore>,
        options: OpenOptions,
    ) -> Result<Overlay> {
        Self::open_at(crate::io::store::OverlayStore::of(store), options).await
    }

    async fn open_at(at: crate::io::store::OverlayStore, options: OpenOptions) -> Result<Overlay> {
        let store = at.store.clone();
        let catalog = Catalog::open(store.clone()).await?;
        let reader = Arc::new(at.reader(options.timeout));
        let data = Arc::new(UrlReader::new(options.storage).with_timeout(options.timeout));
        #[cfg(feature = "s3")]
        let catalogs =
            crate::io::rest_catalog::connect_all(&data, &options.catalogs, options.timeout).await?;
        #[cfg(not(feature = "s3"))]
        if let Some(c) = options.catalogs.first() {
            return Err(crate::io::rest::no_client(&c.table));
        }
        Ok(Overlay {
            store,
            reader,
            data,
            catalog,
            cache: Arc::new(ReadCache::with_budget(
                crate::read::cache::DEFAULT_NATIVE_CACHE_BYTES,
            )),
            metrics: Arc::new(crate::read::metrics::Metrics::default()),
            model: std::sync::Mutex::new(None),
            scan_only: std::sync::atomic::AtomicBool::new(false),
            part_min_bytes: std::sync::atomic::AtomicUsize::new(
                crate::formats::manifest::PART_MIN_BYTES,
            ),
            block_bytes: ordered::DEFAULT_BLOCK_BYTES,
            run_part_bytes: RUN_PART_BYTES,
            writing: tokio::sync::RwLock::new(()),
            queued: Default::default(),
            syncing: tokio::sync::Mutex::new(()),
            codebooks: Default::default(),
            #[cfg(feature = "s3")]
            catalogs: std::sync::Mutex::new(catalogs),
        })
    }

    /// Sets the ordered index block size used by later builds (tests use small blocks).
    pub fn set_block_bytes(&mut self, n: usize) {
        self.block_bytes = n;
    }

    /// Sets the part size of table run uploads (tests use small parts to exercise the
    /// hand-over between merge partitions; object stores want at least 5 MiB).
    #[doc(hidden)]
    pub fn set_run_part_bytes(&mut self, n: usize) {
        self.run_part_bytes = n.max(1024);
    }

    /// Reader of the overlay's objects (for stats and tests).
    pub fn reader(&self) -> &Arc<ObjectStoreReader> {
        &self.reader
    }

    /// Reader of data files.
    pub fn data_reader(&self) -> &Arc<UrlReader> {
        &self.data
    }

    pub async fn close(&self) -> Result<()> {
        self.catalog.close().await
    }

    async fn list_parquet(&self, location: &str, prefix: &str) -> Result<Vec<String>> {
        use futures::StreamExt;
        let base = format!("{}/", location.trim_end_matches('/'));
        let (store, dir) = self.data.resolve(&Location::new(&base))?;
        let root = store.resolve(&dir.path)?;
        let mut out = Vec::new();
        let mut s = store.store().list(Some(&root));
        while let Some(m) = s.next().await {
            let m = m.map_err(store_err)?;
            let rel: String = m
                .location
                .prefix_match(&root)
                .map(|p| {
                    p.map(|x| x.as_ref().to_string())
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .unwrap_or_default();
            if rel.ends_with(".parquet") && rel.starts_with(prefix) {
                out.push(rel);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Reads one data file's lineage facts: size and version from the store, record count and
    /// schema from the footer, and its digest by `binding` — the footer's, or the whole file's
    /// SHA-256 streamed through bounded reads — all pinned to one version, so a file rewritten
    /// meanwhile fails instead of mixing versions.
    pub(crate) async fn file_facts(
        &self,
        location: &str,
        path: &str,
        binding: lineage::Binding,
    ) -> Result<(
        FileEntry,
        Vec<crate::values::FieldInfo>,
        Arc<parquet::file::metadata::ParquetMetaData>,
    )> {
        let url = crate::io::path::join(location, path);
        check_local_containment(location, &url)?;
        let meta = self.data.head(&Location::new(&url)).await?;
        let mut loc = Location::new(&url);
        if let Some(v) = &meta.version {
            loc = loc.with_version(v);
        }
        let datafile::Located {
            metadata: md,
            metadata_offset,
            footer_digest,
        } = datafile::read_metadata_located(self.data.as_ref(), &loc, meta.size).await?;
        let fields = datafile::fields(&datafile::arrow_schema(&md)?);
        let sha256 = match binding {
            lineage::Binding::Footer => footer_digest,
            lineage::Binding::Whole => {
                lineage::sha256_object(
                    self.data.as_ref(),
                    &loc,
                    Some(meta.size),
                    lineage::DEFAULT_HASH_CHUNK,
                )
                .await?
                .0
            }
        };
        let entry = FileEntry {
            file_id: 0,
            path: path.to_string(),
            size: meta.size,
            etag: meta.version.clone(),
            record_count: md.file_metadata().num_rows().max(0) as u64,
            sha256,
            binding,
            row_id_start: None,
            row_id_runs: None,
            deletes: None,
            metadata_offset: Some(metadata_offset),
        };
        Ok((entry, fields, md))
    }

    /// Registers a table of plain Parquet files at `location` (a directory URL), recording
    /// each file's lineage facts and the schema with field ids.
    pub async fn register_parquet_table(
        &self,
        name: &str,
        location: &str,
        files: FileSelection,
    ) -> Result<TableInfo> {
        self.register_table_with(name, location, files, TableSetup::default())
            .await
    }

    /// [`Overlay::register_parquet_table`] with `setup` applied in the same transaction.
    pub(crate) async fn register_table_with(
        &self,
        name: &str,
        location: &str,
        files: FileSelection,
        setup: TableSetup,
    ) -> Result<TableInfo> {
        crate::values::names::check("table", name)?;
        let paths = match files {
            FileSelection::List(l) => l,
            FileSelection::Prefix(p) => {
                check_location_exists(location)?;
                self.list_parquet(location, &p).await?
            }
        };
        for p in &paths {
            check_data_path(p)?;
        }
        check_listed_once(&paths)?;
        // Held to the end: vacuum (exclusive) never sees a registration in flight.
        let _writing = self.writing.read().await;
        let mut entries = Vec::with_capacity(paths.len());
        let mut schema: Option<Vec<crate::values::FieldInfo>> = None;
        let mut file_fields = Vec::new();
        let mut facts = Vec::with_capacity(paths.len());
        // A mounted Iceberg table's files are bound by their footer (decision 77).
        let binding = if setup.iceberg.is_some() {
            lineage::Binding::Footer
        } else {
            lineage::Binding::Whole
        };
        for window in paths.chunks(FACT_CONCURRENCY) {
            let got = futures::future::join_all(window.iter().map(|p| async move {
                let (e, fields, _) = self.file_facts(location, p, binding).await?;
                Ok::<_, Error>((e, fields))
            }))
            .await;
            for g in got {
                facts.push(g?);
            }
        }
        for (p, (mut e, fields)) in paths.iter().zip(facts) {
            if let Some((rows, size)) = setup.expect.get(p) {
                if e.record_count != *rows || e.size != *size {
                    return Err(Error::Iceberg(format!(
                        "{p}: {} rows and {} bytes, its manifest entry says {rows} rows and {size} bytes",
                        e.record_count, e.size
                    )));
                }
            }
            if let Some(m) = setup.masks.get(p) {
                e.set_deleted(m);
            }
            if setup.schema.is_some() {
                file_fields.push(fields);
            } else {
                match &schema {
                    None => schema = Some(fields),
                    Some(s) if same_columns(s, &fields) => {}
                    Some(_) => {
                        return Err(Error::Invalid(format!(
                            "{p} has a different schema from {}",
                            paths[0]
                        )))
                    }
                }
            }
            entries.push(e);
        }
        // An Iceberg table's columns are its schema's; each file must read as them.
        if let Some(s) = &setup.schema {
            let fields = crate::admin::schema::evolve_fields(s, &[], &file_fields);
            for (p, f) in paths.iter().zip(&file_fields) {
                crate::admin::schema::check_compatible(&fields, f, p)?;
            }
            schema = Some(fields);
        }
        // Ids: the table's, then one per file, reserved in a commit of their own when the
        // files take more than one commit. A commit that conflicts with another writer's
        // (another registration reserving ids, any version bump) is retried from a fresh
        // read, so of two registrations of one name one names the table and the other
        // fails `E_EXISTS`.
        let staged = entries.len() > FILES_PER_COMMIT;
        let fields = schema.unwrap_or_default();
        let rec_of = |table_id: u64, next_row_id: u64| TableRecord {
            table_id,
            name: name.into(),
            location: location.trim_end_matches('/').into(),
            source: if setup.iceberg.is_some() {
                "iceberg"
            } else {
                "parquet"
            }
            .into(),
            fields: fields.clone(),
            snapshot: 0,
            next_row_id,
            iceberg: setup.iceberg.clone(),
        };
        let mut attempt = 0;
        let (table_id, next_row_id, rows) = loop {
            attempt += 1;
            let t = self.catalog.begin()?;
            name_free(&t, name).await?;
            let table_id: u64 = t.get("m/next_id").await?.unwrap_or(1);
            t.put("m/next_id", &(table_id + 1 + entries.len() as u64))?;
            let mut next_row_id = 0u64;
            let mut rows = 0;
            for (i, e) in entries.iter_mut().enumerate() {
                e.file_id = table_id + 1 + i as u64;
                match setup.row_ids.get(&e.path) {
                    Some(r) => {
                        r.apply(e);
                    }
                    None => {
                        e.row_id_start = Some(next_row_id);
                        next_row_id += e.record_count;
                    }
                }
                rows += e.record_count;
            }
            if staged {
                // Many files: their records go in bounded commits under a table id no name
                // points at yet (no reader can reach them), then one small commit names the
                // table. A registration that dies midway leaves a marker vacuum reclaims the
                // records by.
                t.put(
                    &staged_table_key(table_id),
                    &StagedTable {
                        table_id,
                        name: name.into(),
                    },
                )?;
            } else {
                for e in &entries {
                    t.put(&file_key(table_id, e.file_id), e)?;
                }
                name_table(&t, rec_of(table_id, next_row_id), &setup.iceberg_state).await?;
            }
            match t.commit().await {
                Ok(()) => break (table_id, next_row_id, rows),
                Err(Error::Conflict(_)) if attempt < REGISTER_ATTEMPTS => continue,
                Err(e) => return Err(e),
            }
        };
        if staged {
            for chunk in entries.chunks(FILES_PER_COMMIT) {
                let t = self.catalog.begin()?;
                for e in chunk {
                    t.put(&file_key(table_id, e.file_id), e)?;
                }
                if let Err(e) = t.commit().await {
                    self.abandon_staged(table_id).await;
                    return Err(e);
                }
            }
            let mut attempt = 0;
            loop {
                attempt += 1;
                let named = async {
                    let t = self.catalog.begin()?;
                    name_free(&t, name).await?;
                    t.delete(&staged_table_key(table_id))?;
                    name_table(&t, rec_of(table_id, next_row_id), &setup.iceberg_state).await?;
                    t.commit().await
                };
                match named.await {
                    Ok(()) => break,
                    Err(Error::Conflict(_)) if attempt < REGISTER_ATTEMPTS => continue,
                    Err(e) => {
                        self.abandon_staged(table_id).await;
                        return Err(e);
                    }
                }
            }
        }
        Ok(TableInfo {
            name: name.into(),
            table_id,
            files: entries.len() as u64,
            rows,
            fields,
        })
    }

    /// Best effort: the file records and marker of a table registration that failed after
    /// its first commit (what vacuum would reclaim).
    async fn abandon_staged(&self, table_id: u64) {
        let gone = async {
            self.reclaim_prefix(&file_prefix(table_id)).await?;
            let t = self.catalog.begin()?;
            t.delete(&staged_table_key(table_id))?;
            t.commit().await
        };
        if let Err(e) = gone.await {
            tracing::warn!(target: "skerry::register", "left for vacuum: table id {table_id}: {e}");
        }
    }

    /// Defines an index at once. Lookups on it are refused until [`Overlay::build`] makes it
    /// ready (immediately ready on an empty table).
    pub async fn create_index(
        &self,
        table: &str,
        name: &str,
        columns: &[IndexColumn],
        opts: IndexOptions,
    ) -> Result<IndexInfo> {
        crate::values::names::check("index", name)?;
        if columns.is_empty() {
            return Err(Error::Invalid("an index needs at least one column".into()));
        }
        let spec = crate::index::IndexSpec::from_options(&opts)?;
        let input = opts.kind.kind().map(|k| k.input());
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        if t.get::<u64>(&index_name_key(tr.table_id, name))
            .await?
            .is_some()
        {
            return Err(Error::AlreadyExists {
                kind: "index",
                name: format!("{}.{name}", tr.name),
            });
        }
        let mut fields = Vec::new();
        let mut key = Vec::new();
        for col in columns {
            let c = &col.name;
            let f = tr
                .fields
                .iter()
                .find(|f| f.name == *c)
                .ok_or_else(|| Error::NotFound {
                    kind: "column",
                    name: format!("{}.{c}", tr.name),
                })?;
            let vector_column = input == Some(crate::index::kind::Input::Vector);
            if vector_column
                && (columns.len() != 1 || !crate::datafile::is_vector_type(&f.data_type))
            {
                return Err(Error::Invalid(format!(
                    "a vector index covers one fixed_size_list<float32> or list<float32> column (column {c} is {})",
                    f.data_type
                )));
            }
            let ty = if vector_column {
                Some(crate::values::KeyType::Binary)
            } else {
                f.key_type
            };
            let ty = ty.ok_or_else(|| {
                Error::Unsupported(format!(
                    "column {c} of type {} cannot be indexed",
                    f.data_type
                ))
            })?;
            if fields.contains(&f.field_id) {
                return Err(Error::Invalid(format!(
                    "column {c} appears twice in the index"
                )));
            }
            if input == Some(crate::index::kind::Input::Text)
                && (columns.len() != 1 || ty != crate::values::KeyType::String)
            {
                return Err(Error::Invalid(format!(
                    "a fulltext index covers one string column (column {c} is {})",
                    f.data_type
                )));
            }
            fields.push(f.field_id);
            key.push(KeyColumn {
                ty,
                direction: col.direction,
                nulls: col.nulls,
            });
        }
        let has_rows = !self.catalog.files(&t, tr.table_id).await?.is_empty();
        t.bump_version().await?;
        let index_id = t.next_id().await?;
        let rec = IndexRecord {
            index_id,
            table_id: tr.table_id,
            name: name.into(),
            fields: fields.clone(),
            key: KeySchema::new(key)?,
            unique: opts.unique,
            spec,
            state: if has_rows {
                IndexState::Building
            } else {
                IndexState::Ready
            },
            generation: 0,
            reason: None,
            codebook: None,
        };
        t.put(&index_key(tr.table_id, index_id), &rec)?;
        t.put(&index_name_key(tr.table_id, name), &index_id)?;
        t.commit().await?;
        Ok(IndexInfo {
            name: name.into(),
            index_id,
            fields,
            unique: opts.unique,
            kind: opts.kind,
            state: rec.state,
        })
    }

    /// Drops an index in one catalog commit of a constant number of keys, whatever the
    /// table's size: the definition, its name and its run pointer go, a tombstone records
    /// what vacuum reclaims later (artifacts and bundles stay until then). Caches are
    /// invalidated; the next publish omits the index; the name is free again at once.
    pub async fn drop_index(&self, table: &str, name: &str) -> Result<u64> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, name).await?;
        let version = t.bump_version().await?;
        t.delete(&index_key(tr.table_id, ix.index_id))?;
        t.delete(&index_name_key(tr.table_id, &ix.name))?;
        t.delete_runs(ix.index_id).await?;
        t.put(
            &tombstone_key(ix.index_id),
            &Tombstone {
                index_id: ix.index_id,
                table_id: tr.table_id,
                name: ix.name.clone(),
                dropped_at: version,
            },
        )?;
        t.commit().await?;
        self.invalidate();
        Ok(ix.index_id)
    }

    /// The catalog head as a read model (what [`Overlay::publish`] writes).
    pub async fn snapshot_manifest(&self, version: u64) -> Result<Manifest> {
        let t = self.catalog.begin()?;
        let catalog_version: u64 = t.get("m/version").await?.unwrap_or(0);
        let mut tables = Vec::new();
        for tr in self.catalog.tables(&t).await? {
            let files = self.catalog.files(&t, tr.table_id).await?;
            let mut indexes = Vec::new();
            for ix in self.catalog.indexes(&t, tr.table_id).await? {
                // A blob a run holds has no bundle: the run answers the file, or a scan.
                let mut artifacts = self.catalog.artifacts(&t, ix.index_id).await?;
                artifacts.retain(|a| !a.in_run);
                let mut runs = t.runs(ix.index_id).await?.into_iter();
                indexes.push(IndexManifest {
                    index_id: ix.index_id,
                    name: ix.name,
                    fields: ix.fields,
                    key: ix.key,
                    unique: ix.unique,
                    spec: ix.spec,
                    codebook: ix.codebook,
                    state: ix.state,
                    files: artifacts,
                    run: runs.next(),
                    tiers: runs.collect(),
                    part: None,
                    loaded: Default::default(),
                });
            }
            let s = tr.snapshot as i64;
            tables.push(TableManifest {
                table_id: tr.table_id,
                name: tr.name,
                location: tr.location,
                snapshot: ActiveSnapshot {
                    snapshot_id: s,
                    sequence_number: s,
                },
                fields: tr.fields,
                files,
                indexes,
                upstream: match &tr.iceberg {
                    Some(src) => {
                        let history: Vec<crate::formats::manifest::UpstreamVersion> = t
                            .get(&crate::admin::catalog::upstream_history_key(tr.table_id))
                            .await?
                            .unwrap_or_default();
                        Some(crate::formats::manifest::Upstream {
                            snapshot_id: src.snapshot_id,
                            history: history
                                .into_iter()
                                .filter(|h| h.snapshot_id != src.snapshot_id)
                                .collect(),
                        })
                    }
                    None => None,
                },
            });
        }
        Ok(Manifest {
            format_version: FORMAT_VERSION_WHOLE,
            version,
            catalog_version,
            tables,
        })
    }

    /// Writes the catalog head as a new immutable manifest version and moves `HEAD` to it.
    pub async fn publish(&self) -> Result<PublishReport> {
        // Vacuum (exclusive) must not take the parts of a version still being published.
        let _writing = self.writing.read().await;
        // Reserve the version in the catalog first: a fenced (stale) writer fails here,
        // before it can write a manifest or move HEAD.
        let t = self.catalog.begin()?;
        let version = t.get::<u64>("m/published").await?.unwrap_or(0) + 1;
        t.put("m/published", &version)?;
        // Iceberg-backed tables: this version holds their current upstream snapshot.
        for tr in self.catalog.tables(&t).await? {
            let Some(src) = &tr.iceberg else { continue };
            let key = crate::admin::catalog::upstream_history_key(tr.table_id);
            let mut h: Vec<crate::formats::manifest::UpstreamVersion> =
                t.get(&key).await?.unwrap_or_default();
            match h.last_mut() {
                Some(last) if last.snapshot_id == src.snapshot_id => last.version = version,
                _ => h.push(crate::formats::manifest::UpstreamVersion {
                    snapshot_id: src.snapshot_id,
                    version,
                }),
            }
            let excess = h.len().saturating_sub(MAX_UPSTREAM_HISTORY);
            h.drain(..excess);
            t.put(&key, &h)?;
        }
        t.commit().await?;
        let mut m = self.snapshot_manifest(version).await?;
        let path = manifest_path(version);
        let create = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        // Large index lists go into parts beside the root, written first: a reader that
        // sees the root finds them (and verifies them by size and SHA-256).
        let concurrent = |e| match e {
            object_store::Error::AlreadyExists { .. } => Error::Conflict(format!(
                "manifest version {version} was published concurrently"
            )),
            e => store_err(e),
        };
        let parts = m.split_parts(
            self.part_min_bytes
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        let mut bytes = 0;
        for (p, body) in parts {
            bytes += body.len() as u64;
            self.store
                .put_opts(
                    &Path::from(p.as_str()),
                    PutPayload::from(body),
                    create.clone(),
                )
                .await
                .map_err(concurrent)?;
        }
        let body = m.to_json();
        bytes += body.len() as u64;
        let head = Head::body(version, &path, &body);
        self.store
            .put_opts(&Path::from(path.as_str()), PutPayload::from(body), create)
            .await
            .map_err(concurrent)?;
        self.move_head(version, head).await?;
        Ok(PublishReport {
            version,
            path,
            bytes,
        })
    }

    /// Moves `HEAD` forward with a conditional put where the store supports it; never moves
    /// it backwards.
    async fn move_head(&self, to: u64, body: Vec<u8>) -> Result<()> {
        let p = Path::from(HEAD_PATH);
        let current = match self.store.get(&p).await {
            Ok(r) => {
                let e_tag = r.meta.e_tag.clone();
                let version = r.meta.version.clone();
                let b = r.bytes().await.map_err(store_err)?;
                let old: Head = serde_json::from_slice(&Head::json(&b)?)
                    .map_err(|e| Error::Manifest(format!("HEAD: {e}")))?;
                if old.version >= to {
                    return Err(Error::Conflict(format!(
                        "HEAD is already at version {}",
                        old.version
                    )));
                }
                Some(UpdateVersion { e_tag, version })
            }
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(store_err(e)),
        };
        let mode = match current {
            Some(v) => PutMode::Update(v),
            None => PutMode::Create,
        };
        let r = self
            .store
            .put_opts(
                &p,
                PutPayload::from(body.clone()),
                PutOptions {
                    mode,
                    ..Default::default()
                },
            )
            .await;
        match r {
            Ok(_) => Ok(()),
            // Local disk has no conditional update; the catalog's single writer (SlateDB
            // fencing) is what serializes publishers there.
            Err(object_store::Error::NotImplemented { .. }) => {
                self.store
                    .put(&p, PutPayload::from(body))
                    .await
                    .map_err(store_err)?;
                Ok(())
            }
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Err(Error::Conflict("HEAD moved concurrently".into())),
            Err(e) => Err(store_err(e)),
        }
    }

    /// A [`Snapshot`] of the catalog head: the same planner the wasm reader runs against a
    /// published manifest, with data files read at the versions the catalog recorded. It
    /// reports nothing to the repair queue; [`Overlay::snapshot_with_repairs`] does.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let m = self.head_model().await?;
        Ok(Snapshot::new(
            self.reader.clone(),
            self.data.clone(),
            m,
            self.cache.clone(),
        )
        .with_pinned_versions(true)
        .with_metrics(self.metrics.clone())
        .with_scan_only(self.scan_only.load(std::sync::atomic::Ordering::Relaxed)))
    }

    /// [`Overlay::snapshot`] whose rejected indexes queue their files for repair
    /// ([`crate::admin::repair`]); a failure to queue never fails the read (it is logged).
    pub async fn snapshot_with_repairs(self: &Arc<Self>) -> Result<Snapshot> {
        Ok(self.snapshot().await?.with_sink(self.clone()))
    }

    /// Looks `key` up in `index` of `table` against the catalog head, queueing rejected
    /// files for repair (a convenience for Rust callers: [`Overlay::snapshot`] and
    /// [`Snapshot::lookup`]).
    pub async fn lookup(&self, table: &str, index: &str, key: &[Value]) -> Result<LookupResult> {
        let s = self.snapshot().await?;
        let r = s.lookup(table, index, key).await?;
        Ok(self.queue_rejected(s.manifest(), table, r).await)
    }

    /// `index IN (keys)` (see [`Snapshot::lookup_many`]).
    pub async fn lookup_many(
        &self,
        table: &str,
        index: &str,
        keys: &[Vec<Value>],
    ) -> Result<LookupResult> {
        let s = self.snapshot().await?;
        let r = s.lookup_many(table, index, keys).await?;
        Ok(self.queue_rejected(s.manifest(), table, r).await)
    }

    /// `lower ≤ index ≤ upper` (see [`Snapshot::range`]).
    pub async fn range(
        &self,
        table: &str,
        index: &str,
        lower: ValueBound,
        upper: ValueBound,
        reverse: bool,
    ) -> Result<LookupResult> {
        let s = self.snapshot().await?;
        let r = s.range(table, index, lower, upper, reverse, None).await?;
        Ok(self.queue_rejected(s.manifest(), table, r).await)
    }

    /// `IS NULL` over a leading run of columns (see [`Snapshot::nulls`]).
    pub async fn nulls(
        &self,
        table: &str,
        index: &str,
        prefix: &[Option<Value>],
        reverse: bool,
    ) -> Result<LookupResult> {
        let s = self.snapshot().await?;
        let r = s.nulls(table, index, prefix, reverse).await?;
        Ok(self.queue_rejected(s.manifest(), table, r).await)
    }

    /// Queues the files behind a lookup's rejections for repair (never failing the lookup).
    async fn queue_rejected(&self, m: &Manifest, table: &str, r: LookupResult) -> LookupResult {
        self.queue(m, table, &r.stats.rejections).await;
        r
    }

    async fn queue(
        &self,
        m: &Manifest,
        table: &str,
        rejections: &[crate::formats::lineage::Rejection],
    ) {
        if !rejections.is_empty() {
            if let Err(e) = self.enqueue_repairs(m, table, rejections).await {
                tracing::warn!(target: "skerry::repair", "could not queue repairs: {e}");
            }
        }
    }

    /// Fetches `columns` of `rows` (see [`Snapshot::fetch`]).
    pub async fn fetch(
        &self,
        table: &str,
        rows: &[crate::read::lookup::RowRef],
        columns: &[String],
    ) -> Result<arrow_array::RecordBatch> {
        self.snapshot().await?.fetch(table, rows, columns).await
    }

    /// Answers `q` over `table` against the catalog head (see [`Snapshot::query`]), queueing
    /// files whose index was rejected for repair.
    pub async fn query(
        &self,
        table: &str,
        q: &crate::read::plan::Query,
    ) -> Result<crate::read::plan::QueryResult> {
        let s = self.snapshot().await?;
        let r = s.query(table, q).await?;
        self.queue(s.manifest(), table, &r.stats.rejections).await;
        Ok(r)
    }

    /// Counts the rows of `table` matching `q` against the catalog head (see
    /// [`Snapshot::count`]), queueing files whose index was rejected for repair.
    pub async fn count(
        &self,
        table: &str,
        q: &crate::read::plan::Query,
    ) -> Result<crate::read::count::CountResult> {
        let s = self.snapshot().await?;
        let r = s.count(table, q).await?;
        self.queue(s.manifest(), table, &r.stats.rejections).await;
        Ok(r)
    }

    /// Searches `table`'s full-text index against the catalog head (see
    /// [`Snapshot::search`]), queueing files whose blob was rejected for repair.
    pub async fn search(
        &self,
        table: &str,
        q: &crate::read::search::Search,
    ) -> Result<crate::read::search::SearchResult> {
        let s = self.snapshot().await?;
        let r = s.search(table, q).await?;
        self.queue(s.manifest(), table, &r.stats.rejections).await;
        Ok(r)
    }

    /// The `k` rows of `table` nearest to a vector (see [`crate::read::nearest`]) against the
    /// catalog head, queueing files whose blob was rejected for repair.
    pub async fn nearest(
        &self,
        table: &str,
        q: &crate::read::nearest::Nearest,
    ) -> Result<crate::read::nearest::NearestResult> {
        let s = self.snapshot().await?;
        let r = s.nearest(table, q).await?;
        self.queue(s.manifest(), table, &r.stats.rejections).await;
        Ok(r)
    }

    /// With `on`, every accessor answers every file by scanning it and ignores indexes (the
    /// same answer, the baseline benchmarks compare against).
    pub fn set_scan_only(&self, on: bool) {
        self.scan_only
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Index lists larger than `bytes` are published as parts beside the manifest (default
    /// [`crate::formats::manifest::PART_MIN_BYTES`]; 0 splits every index with lists).
    /// Sets the read cache's budget in bytes (default
    /// [`crate::read::cache::DEFAULT_NATIVE_CACHE_BYTES`]; 0 caches nothing), evicting down to it.
    pub fn set_cache_bytes(&self, bytes: u64) {
        self.cache.set_budget(bytes);
    }

    pub fn set_part_min_bytes(&self, bytes: usize) {
        self.part_min_bytes
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where rows with stable ids `ids` are (see [`Snapshot::locate`]).
    pub async fn locate(
        &self,
        table: &str,
        ids: &[u64],
    ) -> Result<crate::read::lookup::LocateResult> {
        self.snapshot().await?.locate(table, ids)
    }

    /// The catalog head as a read model, rebuilt only when the catalog version moved (one
    /// point read per call otherwise).
    async fn head_model(&self) -> Result<Arc<Manifest>> {
        let t = self.catalog.begin()?;
        let version: u64 = t.get("m/version").await?.unwrap_or(0);
        drop(t);
        if let Some((v, m)) = self.model.lock().expect("model cache").as_ref() {
            if *v == version {
                return Ok(m.clone());
            }
        }
        let m = Arc::new(self.snapshot_manifest(0).await?);
        *self.model.lock().expect("model cache") = Some((m.catalog_version, m.clone()));
        Ok(m)
    }

    /// Re-checks every data file of `table` against the store: a changed size or version is
    /// confirmed by SHA-256; changed files get new facts (their indexes are then rejected by
    /// the read gate until rebuilt), missing files are dropped. Delete masks survive every
    /// refresh of a file whose content did not change; a changed file's mask no longer names
    /// its rows and is dropped, which the report says (`deletes_dropped`). A file that cannot
    /// be read is reported (`unreadable`) and left as it was; the rest are refreshed.
    pub async fn refresh(&self, table: &str) -> Result<RefreshReport> {
        self.refresh_files(table, None, false).await
    }

    /// [`Overlay::refresh`] that re-hashes every file (SHA-256 of all its bytes), so a
    /// rewrite the store's size and version do not show (an in-place rewrite of the same size
    /// with its modification time restored keeps a local file's ETag) is found too.
    pub async fn refresh_deep(&self, table: &str) -> Result<RefreshReport> {
        self.refresh_files(table, None, true).await
    }

    /// [`Overlay::refresh`] of the files `only` (file ids) of `table`, or of all of them;
    /// `deep` re-hashes files whose size and version look unchanged.
    pub(crate) async fn refresh_files(
        &self,
        table: &str,
        only: Option<&[u64]>,
        deep: bool,
    ) -> Result<RefreshReport> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let mut files = self.catalog.files(&t, tr.table_id).await?;
        if let Some(ids) = only {
            files.retain(|f| ids.contains(&f.file_id));
        }
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        drop(t);
        let mut report = RefreshReport::default();
        let mut updates: Vec<(FileEntry, bool)> = Vec::new();
        for f in &files {
            report.checked += 1;
            let url = crate::io::path::join(&tr.location, &f.path);
            let unreadable = |report: &mut RefreshReport, e: Error| {
                report.unreadable.push(Skipped {
                    file: f.path.clone(),
                    code: e.code().to_string(),
                    message: e.to_string(),
                });
            };
            match self.data.head(&Location::new(&url)).await {
                Ok(m) if m.size == f.size && m.version == f.etag && !deep => {}
                Ok(_) => {
                    let (mut e, fields, _) =
                        match self.file_facts(&tr.location, &f.path, f.binding).await {
                            Ok(x) => x,
                            Err(e) => {
                                unreadable(&mut report, e);
                                continue;
                            }
                        };
                    if let Err(e) = check_indexed_columns(&tr, &indexes, &fields, &f.path) {
                        unreadable(&mut report, e);
                        continue;
                    }
                    e.file_id = f.file_id;
                    e.row_id_start = f.row_id_start;
                    e.row_id_runs = f.row_id_runs.clone();
                    if e.sha256 == f.sha256 && e.record_count == f.record_count {
                        if e.size == f.size && e.etag == f.etag {
                            continue; // deep: nothing changed at all
                        }
                        // The same bytes: the same rows, so the same deleted rows.
                        e.deletes = f.deletes.clone();
                        report.touched.push(f.path.clone());
                    } else {
                        if f.deletes.is_some() {
                            report.deletes_dropped.push(f.path.clone());
                        }
                        report.changed.push(f.path.clone());
                    }
                    updates.push((e, false));
                }
                Err(crate::io::IoError::NotFound { .. }) => {
                    report.missing.push(f.path.clone());
                    updates.push((f.clone(), true));
                }
                Err(e) => unreadable(&mut report, e.into()),
            }
        }
        if updates.is_empty() {
            return Ok(report);
        }
        let t = self.catalog.begin()?;
        let mut tr = self.catalog.table(&t, table).await?;
        let version = t.bump_version().await?;
        for (e, missing) in &updates {
            if *missing {
                t.delete(&file_key(tr.table_id, e.file_id))?;
            } else {
                t.put(&file_key(tr.table_id, e.file_id), e)?;
            }
        }
        if !report.changed.is_empty() || !report.missing.is_empty() {
            tr.snapshot = version;
            // Rows of a changed file get fresh row ids: the old ones named other rows.
            for (e, missing) in &mut updates {
                if !*missing && report.changed.contains(&e.path) {
                    e.row_id_start = Some(tr.next_row_id);
                    e.row_id_runs = None;
                    tr.next_row_id += e.record_count;
                    t.put(&file_key(tr.table_id, e.file_id), e)?;
                }
            }
        }
        t.put(&table_key(tr.table_id), &tr)?;
        t.commit().await?;
        Ok(report)
    }
}

/// A `file://` table location must be an existing directory (`E_NOT_FOUND`): listing a
/// missing one would register an empty table by mistake. Object stores have no directories,
/// so other schemes are not checked.
fn check_location_exists(location: &str) -> Result<()> {
    if let Ok(u) = url::Url::parse(location) {
        if u.scheme() == "file" {
            if let Ok(dir) = u.to_file_path() {
                if !dir.is_dir() {
                    return Err(Error::NotFound {
                        kind: "table location",
                        name: location.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// A `file://` data file must resolve (symbolic links followed) to a file below its table
/// location's own resolved directory: a link inside the table that points out of it is
/// refused (`E_INVALID`), never read. Other schemes have no links.
pub(crate) fn check_local_containment(location: &str, url: &str) -> Result<()> {
    let local = |u: &str| {
        url::Url::parse(u)
            .ok()
            .filter(|u| u.scheme() == "file")
            .and_then(|u| u.to_file_path().ok())
    };
    let (Some(dir), Some(file)) = (local(location), local(url)) else {
        return Ok(());
    };
    // A path that does not resolve (missing) is left to the read, which says so.
    let (Ok(dir), Ok(real)) = (dir.canonicalize(), file.canonicalize()) else {
        return Ok(());
    };
    if !real.starts_with(&dir) {
        return Err(Error::Invalid(format!(
            "data file {} resolves outside the table location (a symbolic link to {})",
            url.chars().take(300).collect::<String>(),
            real.display()
        )));
    }
    Ok(())
}

/// Each data file at most once in one registration (`E_INVALID` naming the first listed
/// twice): a file listed twice would count its rows twice.
pub(crate) fn check_listed_once(paths: &[String]) -> Result<()> {
    let mut seen = std::collections::HashSet::with_capacity(paths.len());
    match paths.iter().find(|p| !seen.insert(p.as_str())) {
        Some(p) => Err(Error::Invalid(format!(
            "data file {:?} is listed more than once",
            p.chars().take(200).collect::<String>()
        ))),
        None => Ok(()),
    }
}

/// A data file path must be a safe relative path below its table's location
/// ([`crate::io::path::check_relative`]: `..`, `%2e%2e`, absolute URLs … are refused with
/// `E_INVALID`).
pub(crate) fn check_data_path(p: &str) -> Result<()> {
    crate::io::path::check_relative(p).map_err(|e| {
        Error::Invalid(format!(
            "data file path {:?} must be relative to the location ({e})",
            p.chars().take(200).collect::<String>()
        ))
    })?;
    Ok(())
}

/// A file whose schema lacks a column some index uses, or has it with another type, cannot
/// join the table (`E_REFUSED`): the index would not be whole. Columns are matched by field
/// id, so a renamed column is the same column.
pub(crate) fn check_indexed_columns(
    tr: &TableRecord,
    indexes: &[IndexRecord],
    fields: &[crate::values::FieldInfo],
    path: &str,
) -> Result<()> {
    for ix in indexes {
        for id in &ix.fields {
            let want = tr.fields.iter().find(|f| f.field_id == *id);
            let have = fields.iter().find(|f| f.field_id == *id);
            let name = want.map_or_else(|| id.to_string(), |f| f.name.clone());
            match (want, have) {
                (_, None) => {
                    return Err(Error::Refused(format!(
                        "{path} has no column {name} (field id {id}), which index {} uses; \
                         drop the index first",
                        ix.name
                    )))
                }
                (Some(w), Some(h)) if w.key_type != h.key_type => {
                    return Err(Error::Refused(format!(
                        "{path} has column {name} as {}, but index {} uses it as {}; drop the \
                         index first",
                        h.data_type, ix.name, w.data_type
                    )))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The same columns by field id and type; names may differ (a rename keeps the field id).
pub(crate) fn same_fields(a: &[crate::values::FieldInfo], b: &[crate::values::FieldInfo]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.field_id == y.field_id && x.key_type == y.key_type)
}

pub(crate) fn same_columns(a: &[crate::values::FieldInfo], b: &[crate::values::FieldInfo]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.field_id == y.field_id && x.name == y.name && x.key_type == y.key_type)
}

impl RejectionSink for Overlay {
    fn rejected<'a>(
        &'a self,
        manifest: &'a Manifest,
        table: &'a str,
        rejections: &'a [crate::formats::lineage::Rejection],
    ) -> crate::io::BoxFut<'a, ()> {
        Box::pin(self.queue(manifest, table, rejections))
    }
}
