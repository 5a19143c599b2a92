//! The catalog of record (native): one SlateDB database under `<root>/catalog/`.
//!
//! One ordered keyspace, a leading discriminant per kind (`docs/catalog.md`):
//!
//! | key | value (JSON) |
//! |---|---|
//! | `m/format` | catalog format version (u32) |
//! | `m/version` | catalog version, +1 per commit (u64) |
//! | `m/next_id` | next id; ids of every kind come from it, monotonic, never reused |
//! | `m/published` | newest published manifest version |
//! | `t/{table:020}` | [`TableRecord`] |
//! | `tn/{lowercase name}` | table id |
//! | `f/{table:020}/{file:020}` | [`FileEntry`] |
//! | `i/{table:020}/{index:020}` | [`IndexRecord`] |
//! | `in/{table:020}/{lowercase name}` | index id |
//! | `a/{index:020}/{file:020}` | [`IndexFileEntry`] (lineage + blob facts) |
//! | `b/{table:020}/{file:020}` | [`BundleRecord`] |
//! | `r/{index:020}` | [`crate::formats::manifest::TableRun`] (the index's table-wide sorted run) |
//! | `x/{index:020}` | [`Tombstone`] of a dropped index (its artifacts await vacuum) |
//! | `c/{index:020}/{hex key}` | retired: unique claims of catalogs written before decision #31; only ever deleted (drop, poison) |
//! | `k/{index:020}` | [`BuildCursor`] of a staged build |
//! | `v/{index:020}` | [`Certificate`] of the last clean `verify` |
//! | `q/{index:020}/{file:020}` | [`crate::admin::repair::RepairEntry`]: a file whose index a query rejected |
//!
//! Every multi-key change is one serializable SlateDB transaction, durable (WAL flushed to
//! the object store) before the call returns.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use slatedb::config::Settings;
use slatedb::{Db, DbTransaction, IsolationLevel};

use crate::error::{Error, Result};
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexState, TableRun};
use crate::values::FieldInfo;
use crate::values::KeySchema;

/// Catalog format version this build writes and reads.
pub const CATALOG_FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    pub table_id: u64,
    pub name: String,
    pub location: String,
    /// `parquet` (plain Parquet files registered through Skerry) or `iceberg` (mounted).
    pub source: String,
    pub fields: Vec<FieldInfo>,
    /// Catalog version of the table's last file-set change (its snapshot id and sequence).
    pub snapshot: u64,
    pub next_row_id: u64,
    /// The upstream Iceberg table of a mounted table (`source` = `iceberg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iceberg: Option<IcebergSource>,
}

/// What an Iceberg-backed table was mounted from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcebergSource {
    /// The metadata file read (`…/metadata/00003-….metadata.json`).
    pub metadata_location: String,
    /// The table's location (data paths are relative to it).
    pub location: String,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub format_version: u8,
    /// The REST catalog table it follows, when mounted through one (no secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<crate::io::rest::CatalogRef>,
}

/// What a sync of an Iceberg-backed table read last: the synced snapshot's manifests with
/// their live files, so the next sync reads only manifests it has not seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcebergState {
    pub snapshot_id: i64,
    pub manifests: Vec<crate::formats::iceberg::ManifestFiles>,
}

/// How [`IcebergState`] is stored (`docs/catalog.md`): the head at `ice/<table>` holds the
/// snapshot and the manifests' paths (and first row ids); each manifest's live files sit under
/// a key of their own (`icm/<table>/<hash of the path>`), written once when first seen and
/// deleted when no longer listed — so a sync writes what changed, not the table. A head of
/// the earlier form (every manifest inline in `manifests`) is still read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct IcebergStateHead {
    snapshot_id: i64,
    /// The earlier form: every manifest inline (read, never written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    manifests: Vec<crate::formats::iceberg::ManifestFiles>,
    /// The manifests, each `(path, first row id)`, stored under [`manifest_key`].
    #[serde(default)]
    parts: Vec<(String, Option<i64>)>,
}

/// The key of one manifest's live files in a table's Iceberg state.
fn manifest_key(t: u64, path: &str, first_row_id: Option<i64>) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(path.as_bytes());
    h.update(first_row_id.map_or([0xff; 8], i64::to_be_bytes));
    format!("icm/{t:020}/{}", &hex::encode(h.finalize())[..32])
}

impl Txn<'_> {
    /// Table `t`'s Iceberg state (empty when none).
    pub async fn iceberg_state(&self, t: u64) -> Result<IcebergState> {
        let Some(head) = self.get::<IcebergStateHead>(&iceberg_state_key(t)).await? else {
            return Ok(IcebergState::default());
        };
        let mut manifests = head.manifests;
        for (path, first) in &head.parts {
            let key = manifest_key(t, path, *first);
            let m = self.get(&key).await?.ok_or_else(|| {
                Error::Iceberg(format!(
                    "the catalog's state of table {t} names manifest {path}, which it lacks; \
                     mount the table again"
                ))
            })?;
            manifests.push(m);
        }
        Ok(IcebergState {
            snapshot_id: head.snapshot_id,
            manifests,
        })
    }

    /// Records `state` as table `t`'s Iceberg state, writing only manifests not stored yet and
    /// deleting those no longer listed (and an earlier inline form).
    pub async fn put_iceberg_state(&self, t: u64, state: &IcebergState) -> Result<()> {
        let old: Option<IcebergStateHead> = self.get(&iceberg_state_key(t)).await?;
        let old_parts: std::collections::HashSet<(String, Option<i64>)> = old
            .map(|h| h.parts.into_iter().collect())
            .unwrap_or_default();
        let mut parts = Vec::with_capacity(state.manifests.len());
        for m in &state.manifests {
            let part = (m.path.clone(), m.first_row_id);
            if !old_parts.contains(&part) {
                self.put(&manifest_key(t, &m.path, m.first_row_id), m)?;
            }
            parts.push(part);
        }
        let new_parts: std::collections::HashSet<&(String, Option<i64>)> = parts.iter().collect();
        for (path, first) in old_parts.iter().filter(|p| !new_parts.contains(p)) {
            self.delete(&manifest_key(t, path, *first))?;
        }
        self.put(
            &iceberg_state_key(t),
            &IcebergStateHead {
                snapshot_id: state.snapshot_id,
                manifests: Vec::new(),
                parts,
            },
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRecord {
    pub index_id: u64,
    pub table_id: u64,
    pub name: String,
    pub fields: Vec<i32>,
    pub key: KeySchema,
    pub unique: bool,
    /// What the index builds per data file, with the kind's parameters (flat: `kind`,
    /// absent in records written before kinds, then the kind's fields).
    #[serde(flatten)]
    pub spec: crate::index::IndexSpec,
    /// A vector index's codebook, once trained (set once, by the first build that sees a
    /// vector: `admin::codebook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codebook: Option<crate::formats::manifest::CodebookRef>,
    pub state: IndexState,
    /// Moves with every change of the index's content or state (build steps, rebuilds); a
    /// `verify` whose definition moved meanwhile records nothing.
    #[serde(default)]
    pub generation: u64,
    /// Why the index is poisoned, when something recorded it (an upstream schema change
    /// that dropped or retyped its column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl IndexRecord {
    /// The kind of the index's blobs.
    pub fn kind(&self) -> crate::index::IndexKind {
        self.spec.kind()
    }
}

/// A row of a table: its file, its position in the file and its table-wide row id (what
/// constraint errors name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowIdentity {
    pub file_id: u64,
    pub position: u64,
    pub row_id: u64,
}

/// A staged build's progress: the file in progress and the next position in it, the sorted
/// segments already written for it, and files skipped because they drifted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildCursor {
    /// File in progress (0: none).
    pub file_id: u64,
    /// Its SHA-256 when the build started on it (a changed file restarts).
    pub sha256: String,
    pub position: u64,
    pub segments: Vec<Segment>,
    /// Steps committed so far (only ever grows).
    pub steps: u64,
    /// Files that could not be read (file id, SHA-256 at the time); retried once they change.
    pub skipped: Vec<(u64, String)>,
}

/// A sorted run of one slice of a file's entries (`skerry-ordered-v1` bytes) under
/// `staging/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub path: String,
    pub start: u64,
    pub end: u64,
}

/// A clean `verify` pass: the table snapshot and index generation it checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    pub snapshot: u64,
    pub generation: u64,
    pub catalog_version: u64,
    pub entries: u64,
}

/// A dropped index: what vacuum needs to reclaim its artifacts and claims later.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    pub index_id: u64,
    pub table_id: u64,
    pub name: String,
    /// Catalog version of the drop.
    pub dropped_at: u64,
}

/// A table registration in flight ([`staged_table_key`]): its file records are written, its
/// name is not yet. Vacuum reclaims the records of one that died.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedTable {
    pub table_id: u64,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRecord {
    pub path: String,
    pub generation: u64,
}

fn err(e: slatedb::Error) -> Error {
    match e.kind() {
        slatedb::ErrorKind::Transaction => Error::Conflict(e.to_string()),
        _ => Error::catalog_from("slatedb", e),
    }
}

pub fn table_key(t: u64) -> String {
    format!("t/{t:020}")
}
pub fn table_name_key(name: &str) -> String {
    format!("tn/{}", crate::values::names::fold(name))
}
pub fn file_key(t: u64, f: u64) -> String {
    format!("f/{t:020}/{f:020}")
}
pub fn file_prefix(t: u64) -> String {
    format!("f/{t:020}/")
}
pub fn index_key(t: u64, i: u64) -> String {
    format!("i/{t:020}/{i:020}")
}
pub fn index_prefix(t: u64) -> String {
    format!("i/{t:020}/")
}
pub fn index_name_key(t: u64, name: &str) -> String {
    format!("in/{t:020}/{}", crate::values::names::fold(name))
}
pub fn artifact_key(i: u64, f: u64) -> String {
    format!("a/{i:020}/{f:020}")
}
pub fn artifact_prefix(i: u64) -> String {
    format!("a/{i:020}/")
}
/// A move's record for one output file (`admin::moves::MoveRecord`).
pub fn move_key(t: u64, f: u64) -> String {
    format!("mv/{t:020}/{f:020}")
}
pub fn move_prefix(t: u64) -> String {
    format!("mv/{t:020}/")
}
pub fn run_key(i: u64) -> String {
    format!("r/{i:020}")
}
/// The runs written after an index's [`run_key`] run (RFC 0004 tiers), in order: each a
/// [`TableRun`] under `r/<index>/<n>`, so every run of the catalog is one `r/` scan.
pub fn tier_key(i: u64, n: usize) -> String {
    format!("r/{i:020}/{n:020}")
}
pub fn tier_prefix(i: u64) -> String {
    format!("r/{i:020}/")
}
pub fn tombstone_key(i: u64) -> String {
    format!("x/{i:020}")
}
pub fn claim_prefix(i: u64) -> String {
    format!("c/{i:020}/")
}
pub fn cursor_key(i: u64) -> String {
    format!("k/{i:020}")
}
pub fn certificate_key(i: u64) -> String {
    format!("v/{i:020}")
}
pub fn repair_key(i: u64, f: u64) -> String {
    format!("q/{i:020}/{f:020}")
}
pub fn repair_prefix(i: u64) -> String {
    format!("q/{i:020}/")
}
/// The upstream snapshots a table's publishes held (`Vec<UpstreamVersion>`, oldest first).
pub fn upstream_history_key(t: u64) -> String {
    format!("iph/{t:020}")
}
pub fn iceberg_state_key(t: u64) -> String {
    format!("ice/{t:020}")
}
/// A table whose files are being registered in several commits (gone once it is named).
pub fn staged_table_key(t: u64) -> String {
    format!("g/{t:020}")
}
pub const STAGED_TABLE_PREFIX: &str = "g/";
pub fn bundle_key(t: u64, f: u64) -> String {
    format!("{}{f:020}", bundle_prefix(t))
}

/// The prefix of every [`bundle_key`] of table `t`.
fn bundle_prefix(t: u64) -> String {
    format!("b/{t:020}/")
}

/// The SlateDB-backed catalog.
pub struct Catalog {
    db: Db,
}

/// A catalog transaction: reads see a snapshot, writes land atomically at commit.
pub struct Txn<'a> {
    txn: DbTransaction,
    _catalog: &'a Catalog,
}

impl Txn<'_> {
    pub async fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.txn.get(key.as_bytes()).await.map_err(err)? {
            Some(b) => Ok(Some(
                serde_json::from_slice(&b).map_err(|e| Error::catalog_from(&key, e))?,
            )),
            None => Ok(None),
        }
    }

    pub async fn scan<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<T>> {
        let mut it = self
            .txn
            .scan_prefix(prefix.as_bytes(), ..)
            .await
            .map_err(err)?;
        let mut out = Vec::new();
        while let Some(kv) = it.next().await.map_err(err)? {
            out.push(
                serde_json::from_slice(&kv.value).map_err(|e| Error::catalog_from(&prefix, e))?,
            );
        }
        Ok(out)
    }

    /// Up to `limit` keys under `prefix`, in order, with their values.
    pub async fn scan_limit<T: DeserializeOwned>(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, T)>> {
        let mut it = self
            .txn
            .scan_prefix(prefix.as_bytes(), ..)
            .await
            .map_err(err)?;
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(kv) = it.next().await.map_err(err)? else {
                break;
            };
            let key = String::from_utf8_lossy(&kv.key).into_owned();
            let v = serde_json::from_slice(&kv.value).map_err(|e| Error::catalog_from(&key, e))?;
            out.push((key, v));
        }
        Ok(out)
    }

    pub fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.txn
            .put(
                key.as_bytes(),
                serde_json::to_vec(value).expect("record serializes"),
            )
            .map_err(err)
    }

    pub fn delete(&self, key: &str) -> Result<()> {
        self.txn.delete(key.as_bytes()).map_err(err)
    }

    /// Every run of index `i`, oldest first: its [`run_key`] run, then its tiers.
    pub async fn runs(&self, i: u64) -> Result<Vec<TableRun>> {
        let Some(first) = self.get::<TableRun>(&run_key(i)).await? else {
            return Ok(vec![]);
        };
        let mut out = vec![first];
        out.extend(self.scan::<TableRun>(&tier_prefix(i)).await?);
        Ok(out)
    }

    /// Replaces every run of index `i` with `runs` (oldest first; none drops them all), and
    /// keeps the index's artifacts to them (RFC 0004 "the drop", decision 71): an artifact a
    /// run now holds unchanged is marked [`IndexFileEntry::in_run`] when its kind drops
    /// covered blobs ([`crate::index::kind::drops_covered`]); an artifact marked so
    /// that no run holds any more is withdrawn, so the build derives the file again (its
    /// blob is gone). Returns the files newly marked: their bundles can shed the blob
    /// ([`crate::admin::overlay::Overlay::shed_covered`]) once this commits.
    pub async fn put_runs(&self, i: u64, runs: &[TableRun]) -> Result<Vec<u64>> {
        self.replace_runs(i, runs).await?;
        let held = |a: &IndexFileEntry| {
            runs.iter().any(|r| {
                r.files.iter().any(|rf| {
                    rf.file_id == a.file_id
                        && rf.sha256 == a.lineage.source_sha256
                        && rf.sequence_number == a.lineage.source_sequence_number
                })
            })
        };
        let mut marked = Vec::new();
        for (key, mut a) in self
            .scan_limit::<IndexFileEntry>(&artifact_prefix(i), usize::MAX)
            .await?
        {
            match (a.in_run, held(&a)) {
                (true, false) => self.delete(&key)?,
                (false, true) if crate::index::kind::drops_covered(&a.lineage.blob_type) => {
                    a.in_run = true;
                    self.put(&key, &a)?;
                    marked.push(a.file_id);
                }
                _ => {}
            }
        }
        Ok(marked)
    }

    /// Drops every run of index `i` and withdraws the artifacts only they held
    /// ([`Txn::put_runs`] with no runs).
    pub async fn delete_runs(&self, i: u64) -> Result<()> {
        self.put_runs(i, &[]).await.map(|_| ())
    }

    async fn replace_runs(&self, i: u64, runs: &[TableRun]) -> Result<()> {
        self.delete(&run_key(i))?;
        let keys: Vec<(String, serde::de::IgnoredAny)> =
            self.scan_limit(&tier_prefix(i), usize::MAX).await?;
        for (k, _) in keys {
            self.delete(&k)?;
        }
        for (n, r) in runs.iter().enumerate() {
            match n {
                0 => self.put(&run_key(i), r)?,
                n => self.put(&tier_key(i, n), r)?,
            }
        }
        Ok(())
    }

    /// Allocates a fresh id.
    pub async fn next_id(&self) -> Result<u64> {
        let id: u64 = self.get("m/next_id").await?.unwrap_or(1);
        self.put("m/next_id", &(id + 1))?;
        Ok(id)
    }

    /// The catalog version this transaction will commit as.
    pub async fn bump_version(&self) -> Result<u64> {
        let v: u64 = self.get("m/version").await?.unwrap_or(0) + 1;
        self.put("m/version", &v)?;
        Ok(v)
    }

    /// Commits and waits until the commit is durable in the object store.
    pub async fn commit(self) -> Result<()> {
        if let Some(h) = self.txn.commit().await.map_err(err)? {
            // Flush the WAL now rather than at the next flush tick: a verb's latency is then
            // one WAL write (the 5 ms interval stays as the backstop for concurrent commits).
            self._catalog.db.flush().await.map_err(err)?;
            h.await_durable().await.map_err(err)?;
        }
        Ok(())
    }
}

impl Catalog {
    /// Opens (creating when absent) the catalog at `catalog/` in `store`, checking its format.
    pub async fn open(store: Arc<dyn ObjectStore>) -> Result<Catalog> {
        let settings = Settings {
            flush_interval: Some(Duration::from_millis(5)),
            ..Settings::default()
        };
        let db = Db::builder("catalog", store)
            .with_settings(settings)
            .build()
            .await
            .map_err(err)?;
        let c = Catalog { db };
        let t = c.begin()?;
        match t.get::<u32>("m/format").await? {
            Some(CATALOG_FORMAT_VERSION) => {}
            Some(found) => {
                return Err(Error::CatalogFormat {
                    found,
                    supported: CATALOG_FORMAT_VERSION,
                })
            }
            None => {
                t.put("m/format", &CATALOG_FORMAT_VERSION)?;
                t.commit().await?;
            }
        }
        Ok(c)
    }

    pub fn begin(&self) -> Result<Txn<'_>> {
        Ok(Txn {
            txn: self
                .db
                .begin(IsolationLevel::SerializableSnapshot)
                .map_err(err)?,
            _catalog: self,
        })
    }

    pub async fn close(&self) -> Result<()> {
        self.db.close().await.map_err(err)
    }

    /// Looks up a table by name (case-insensitive).
    pub async fn table(&self, t: &Txn<'_>, name: &str) -> Result<TableRecord> {
        let id: u64 = t
            .get(&table_name_key(name))
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: name.into(),
            })?;
        t.get(&table_key(id))
            .await?
            .ok_or_else(|| Error::catalog(format!("table {name} has no record")))
    }

    /// Looks up an index of a table by name (case-insensitive).
    pub async fn index(&self, t: &Txn<'_>, table: &TableRecord, name: &str) -> Result<IndexRecord> {
        let id: u64 = t
            .get(&index_name_key(table.table_id, name))
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: "index",
                name: format!("{}.{name}", table.name),
            })?;
        t.get(&index_key(table.table_id, id))
            .await?
            .ok_or_else(|| Error::catalog(format!("index {name} has no record")))
    }

    pub async fn files(&self, t: &Txn<'_>, table_id: u64) -> Result<Vec<FileEntry>> {
        t.scan(&file_prefix(table_id)).await
    }

    pub async fn indexes(&self, t: &Txn<'_>, table_id: u64) -> Result<Vec<IndexRecord>> {
        t.scan(&index_prefix(table_id)).await
    }

    /// A table's record, its files and its indexes that are not poisoned (what writers
    /// maintain), read in `t`.
    pub async fn table_files_live_indexes(
        &self,
        t: &Txn<'_>,
        table: &str,
    ) -> Result<(TableRecord, Vec<FileEntry>, Vec<IndexRecord>)> {
        let tr = self.table(t, table).await?;
        let files = self.files(t, tr.table_id).await?;
        let indexes = self
            .indexes(t, tr.table_id)
            .await?
            .into_iter()
            .filter(|i| i.state != IndexState::Poisoned)
            .collect();
        Ok((tr, files, indexes))
    }

    pub async fn artifacts(&self, t: &Txn<'_>, index_id: u64) -> Result<Vec<IndexFileEntry>> {
        t.scan(&artifact_prefix(index_id)).await
    }

    /// [`Catalog::artifacts`] by file id.
    pub async fn artifacts_by_file(
        &self,
        t: &Txn<'_>,
        index_id: u64,
    ) -> Result<std::collections::HashMap<u64, IndexFileEntry>> {
        Ok(self
            .artifacts(t, index_id)
            .await?
            .into_iter()
            .map(|a| (a.file_id, a))
            .collect())
    }

    /// Every bundle record of table `table_id`, by file id: one scan, where a get per file
    /// costs a catalog read each (an object store request when not cached) at thousands of
    /// files.
    pub async fn bundles_by_file(
        &self,
        t: &Txn<'_>,
        table_id: u64,
    ) -> Result<std::collections::HashMap<u64, BundleRecord>> {
        let prefix = bundle_prefix(table_id);
        let mut out = std::collections::HashMap::new();
        for (key, b) in t.scan_limit::<BundleRecord>(&prefix, usize::MAX).await? {
            let file_id = key[prefix.len()..]
                .parse::<u64>()
                .map_err(|_| Error::catalog(format!("bundle key {key:?}")))?;
            out.insert(file_id, b);
        }
        Ok(out)
    }

    pub async fn tables(&self, t: &Txn<'_>) -> Result<Vec<TableRecord>> {
        t.scan("t/").await
    }
}

/// The table's snapshot as the read gate sees it.
pub(crate) fn active(tr: &TableRecord) -> crate::formats::lineage::ActiveSnapshot {
    crate::formats::lineage::ActiveSnapshot {
        snapshot_id: tr.snapshot as i64,
        sequence_number: tr.snapshot as i64,
    }
}

/// Does the read gate accept artifact `a` for file `f` at the table's snapshot?
pub(crate) fn accepted(f: &FileEntry, a: Option<&IndexFileEntry>, tr: &TableRecord) -> bool {
    a.is_some_and(|a| {
        // A vector blob of the graph layout is never read: built again.
        a.lineage.blob_type != crate::index::vector::OLD_BLOB_TYPE
            && crate::formats::lineage::ReadGate::check(
                &f.path,
                Some(&a.lineage),
                Some(&f.facts()),
                active(tr),
            )
            .is_accept()
    })
}

/// The row ids of one upstream data file (Iceberg v3 row lineage, spec "Row Lineage"): a
/// row's id is its `_row_id` value when the file has one (rows a compaction moved keep
/// their ids), else the file's `first_row_id` plus its position; neither → no id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowIds {
    pub start: Option<u64>,
    pub runs: Option<crate::formats::rowset::IdRuns>,
}

impl RowIds {
    /// Gives `f` these row ids; whether they changed.
    pub fn apply(&self, f: &mut crate::formats::manifest::FileEntry) -> bool {
        let changed = f.row_id_start != self.start || f.row_id_runs != self.runs;
        f.row_id_start = self.start;
        f.row_id_runs = self.runs.clone();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::iceberg::ManifestFiles;

    fn manifest(path: &str, files: usize) -> ManifestFiles {
        ManifestFiles {
            path: path.into(),
            first_row_id: None,
            files: (0..files)
                .map(|i| {
                    serde_json::from_value(serde_json::json!({
                        "path": format!("data/{path}-{i}.parquet"), "content": "Data",
                        "format": "PARQUET", "record_count": 3, "size": 100,
                        "partition_spec_id": 0, "partition": "", "sequence_number": 1,
                        "file_sequence_number": 1, "snapshot_id": 1, "first_row_id": null,
                        "referenced_data_file": null, "content_offset": null,
                        "content_size_in_bytes": null, "equality_ids": []
                    }))
                    .unwrap()
                })
                .collect(),
        }
    }

    /// The split Iceberg state reads the earlier inline form, writes only manifests it has
    /// not stored, and deletes the ones no longer listed.
    #[tokio::test]
    async fn iceberg_state_is_stored_per_manifest_and_reads_the_inline_form() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let c = Catalog::open(store).await.unwrap();
        let (a, b, n) = (manifest("a", 3), manifest("b", 2), manifest("n", 1));
        // The earlier form: every manifest inline in the head.
        let t = c.begin().unwrap();
        let legacy = IcebergStateHead {
            snapshot_id: 7,
            manifests: vec![a.clone(), b.clone()],
            parts: vec![],
        };
        t.put(&iceberg_state_key(1), &legacy).unwrap();
        t.commit().await.unwrap();
        let t = c.begin().unwrap();
        let s = t.iceberg_state(1).await.unwrap();
        assert_eq!(
            (s.snapshot_id, s.manifests.clone()),
            (7, vec![a.clone(), b.clone()])
        );
        // Rewritten split: a and n kept, b gone.
        let next = IcebergState {
            snapshot_id: 8,
            manifests: vec![a.clone(), n.clone()],
        };
        t.put_iceberg_state(1, &next).await.unwrap();
        t.commit().await.unwrap();
        let t = c.begin().unwrap();
        assert_eq!(t.iceberg_state(1).await.unwrap(), next);
        let head: IcebergStateHead = t.get(&iceberg_state_key(1)).await.unwrap().unwrap();
        assert!(head.manifests.is_empty());
        let parts: Vec<ManifestFiles> = t.scan(&format!("icm/{:020}/", 1)).await.unwrap();
        assert_eq!(parts.len(), 2);
        // Again with b back and a gone: only b is written, a deleted.
        let last = IcebergState {
            snapshot_id: 9,
            manifests: vec![n.clone(), b.clone()],
        };
        t.put_iceberg_state(1, &last).await.unwrap();
        t.commit().await.unwrap();
        let t = c.begin().unwrap();
        assert_eq!(t.iceberg_state(1).await.unwrap(), last);
        let parts: Vec<ManifestFiles> = t.scan(&format!("icm/{:020}/", 1)).await.unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(t.iceberg_state(2).await.unwrap(), IcebergState::default());
        c.close().await.unwrap();
    }
}
