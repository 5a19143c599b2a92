//! Writes that keep indexes whole (file and delete registration) and the verbs that remove
//! and check them (purge, vacuum, verify). `docs/catalog.md` describes each commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use crate::admin::build::{accepted, is_data_error, MAX_COMMIT_BYTES, MAX_COMMIT_ENTRIES};
use crate::admin::catalog::*;
use crate::admin::overlay::{
    check_indexed_columns, same_fields, store_err, Overlay, FILES_PER_COMMIT,
};
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::lineage;
use crate::formats::manifest::{
    load_part, manifest_path, read_head, FileEntry, IndexFileEntry, IndexState, Manifest, TableRun,
};
use crate::io::{Location, RangeReader};

/// Attempts of a transaction that lost a write-write race before giving up.
const MAX_ATTEMPTS: usize = 64;

/// What [`Overlay::register_files`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterReport {
    pub files: u64,
    pub rows: u64,
    pub entries: u64,
    /// Of `entries`: carried over from a move's removed files (RFC 0006), and derived from
    /// the new files' columns.
    pub carried: u64,
    pub derived: u64,
    pub bundles_written: u64,
    /// Building unique indexes the new rows broke (now `poisoned`).
    pub poisoned: Vec<String>,
    /// Indexes whose work over the new files did not fit one commit: the files are
    /// registered and scanned until a build (`build`, `buildStep`, `startSync`'s catch-up or
    /// fan-out workers) covers them; a ready index is `maintaining` meanwhile.
    pub pending: Vec<String>,
    /// Attempts of the commits (more than [`RegisterReport::commits`] after write-write
    /// conflicts).
    pub attempts: u64,
    /// Commits the registration took: 1, or one per [`FILES_PER_COMMIT`] files of a plain
    /// registration of more (each a registration of its own, in list order).
    pub commits: u64,
}

/// Changes committed with a registration ([`Overlay::register_files_with`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct FileSetChange {
    /// Registered files to drop, by path.
    pub remove: Vec<String>,
    /// Delete masks by path, of kept or new files: `None` clears a file's mask.
    pub masks: HashMap<String, Option<RoaringTreemap>>,
    /// A duplicate key under a unique index poisons the index instead of failing (upstream
    /// writes cannot be refused).
    pub poison_duplicates: bool,
    /// Recorded on the table.
    pub iceberg: Option<IcebergSource>,
    pub iceberg_state: Option<IcebergState>,
    /// The table's columns from now on (an upstream schema change).
    pub fields: Option<Vec<crate::values::FieldInfo>>,
    /// The upstream snapshot the table must still be at (`E_REFUSED` otherwise: synced
    /// meanwhile by another process).
    pub expect_snapshot: Option<i64>,
    /// Row ids by path, of kept or new files, that come from upstream (Iceberg v3 row
    /// lineage) instead of the table's counter.
    pub row_ids: HashMap<String, crate::admin::catalog::RowIds>,
    /// The change moved rows (RFC 0006): the added files' entries of indexes whose blobs
    /// give their entries back are carried over from the removed files' blobs.
    pub moved: Option<crate::admin::moves::Move>,
    /// A column the new files hold beside the table's (a rewrite's row ids), left out of
    /// the schema check.
    pub extra_column: Option<String>,
}

/// Rows of one data file to delete, by position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDeletes {
    pub file: String,
    pub positions: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteReport {
    /// Rows newly deleted (already-deleted positions are not counted).
    pub rows_deleted: u64,
}

/// What [`Overlay::vacuum`] and a purging drop removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VacuumReport {
    /// Overlay objects deleted (bundles, runs, staged segments).
    pub artifacts: u64,
    pub bytes: u64,
    /// Manifest versions deleted.
    pub manifests: u64,
    /// Unique claims of dropped indexes reclaimed (catalogs written before claims were retired,
    /// `docs/decisions.md` #31).
    pub claims: u64,
    /// Catalog index-file records of dropped indexes reclaimed.
    pub index_files: u64,
    /// Dropped indexes fully reclaimed (tombstones removed).
    pub dropped_indexes: u64,
    /// Table registrations that died midway whose file records were reclaimed.
    pub staged_tables: u64,
    /// Unreferenced objects kept because they are younger than the grace period (a fan-out
    /// worker's bundle or a build step's segment whose commit may still come): the next
    /// vacuum after the grace period reclaims them if nothing references them by then.
    pub young: u64,
    pub young_bytes: u64,
}

/// Grace period of [`VacuumOptions::grace_seconds`] unless the caller says otherwise.
pub const DEFAULT_VACUUM_GRACE_SECONDS: u64 = 3600;

/// Options of [`Overlay::vacuum`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VacuumOptions {
    /// Published manifest versions to keep (the newest ones; at least 1: HEAD's).
    pub retain_versions: u64,
    /// Unreferenced bundles and staged segments younger than this (by the store's
    /// last-modified time) are kept: work written for a commit that has not happened yet —
    /// a fan-out worker's bundle, a build step's segment in another process — survives a
    /// vacuum. Default [`DEFAULT_VACUUM_GRACE_SECONDS`]; 0 reclaims everything unreferenced.
    #[serde(default = "default_grace")]
    pub grace_seconds: u64,
}

fn default_grace() -> u64 {
    DEFAULT_VACUUM_GRACE_SECONDS
}

impl VacuumOptions {
    /// Keep the newest `retain_versions` manifests, reclaim everything unreferenced now
    /// (no grace period: only when no build, fan-out worker or commit is in flight).
    pub fn now(retain_versions: u64) -> VacuumOptions {
        VacuumOptions {
            retain_versions,
            grace_seconds: 0,
        }
    }
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions {
            retain_versions: 1,
            grace_seconds: DEFAULT_VACUUM_GRACE_SECONDS,
        }
    }
}

/// What [`Overlay::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    pub files: u64,
    /// Files without an index blob the read gate accepts (answered by scans).
    pub files_unindexed: u64,
    /// Entries in accepted blobs.
    pub stored: u64,
    /// Entries the live rows call for.
    pub expected: u64,
    /// Live rows with no entry.
    pub missing: u64,
    /// Entries for deleted rows (harmless: answers leave deleted rows out).
    pub dead: u64,
    /// Entries whose key differs from the row's, or that name no row.
    pub mismatched: u64,
    /// A clean pass (nothing missing or mismatched, every file indexed) recorded a certificate.
    pub certified: bool,
    /// Files queued for repair because their entries were missing or mismatched, their
    /// blob failed its checksum, or the file no longer matches its facts (the next build of
    /// the index drains them: see [`crate::admin::repair`]).
    pub repairs_queued: u64,
}

fn retry_conflicts(e: &Error) -> bool {
    matches!(e, Error::Conflict(_))
}

impl Overlay {
    /// Registers more Parquet files in `table` (paths relative to its location) and keeps
    /// every index whole: reads only the indexed columns of the new files, writes their
    /// bundles, then checks unique keys against the index and commits files and index files
    /// in one transaction.
    ///
    /// Refused before any work (`E_LIMIT`) when the files would add more than
    /// [`MAX_COMMIT_ENTRIES`] entries or [`MAX_COMMIT_BYTES`] of encoded entries; refused
    /// (`E_REFUSED`) when a file lacks or retypes an indexed column. A key that a new row
    /// shares with another new row or a live row fails the whole registration with
    /// `E_CONSTRAINT` under a ready unique index, and poisons a unique index still building.
    /// Concurrent registrations retry after conflicts and check again, so of several
    /// registering one value exactly one commits.
    pub async fn register_files(&self, table: &str, paths: &[String]) -> Result<RegisterReport> {
        self.register_files_with(table, paths, FileSetChange::default())
            .await
    }

    /// [`Overlay::register_files`] committing `change` in the same transaction: files
    /// dropped, delete masks replaced, the upstream source recorded (an Iceberg sync), so
    /// readers see the old file set or the new one, never a mix.
    pub(crate) async fn register_files_with(
        &self,
        table: &str,
        paths: &[String],
        change: FileSetChange,
    ) -> Result<RegisterReport> {
        for p in paths {
            crate::admin::overlay::check_data_path(p)?;
        }
        crate::admin::overlay::check_listed_once(paths)?;
        let _writing = self.writing.read().await;
        let t = self.catalog.begin()?;
        let (tr, existing, indexes) = self.catalog.table_files_live_indexes(&t, table).await?;
        drop(t);
        if let Some(p) = paths.iter().find(|p| {
            existing
                .iter()
                .any(|f| &&f.path == p && !change.remove.contains(&f.path))
        }) {
            return Err(Error::AlreadyExists {
                kind: "data file",
                name: format!("{}/{p}", tr.name),
            });
        }
        // Facts and schema first: no catalog write, no bundle, until every file is known.
        let mut new_files = Vec::with_capacity(paths.len());
        let mut facts = Vec::with_capacity(paths.len());
        // An Iceberg-backed table follows its upstream schema: files may lack columns, hold
        // narrower types or dropped columns; an index a new file breaks is poisoned (upstream
        // writes cannot be refused) with the reason.
        let mut indexes = indexes;
        let mut broken: Vec<(IndexRecord, String)> = Vec::new();
        let iceberg = tr.iceberg.is_some();
        let mut evolved = tr.clone();
        if let Some(f) = &change.fields {
            evolved.fields = f.clone();
        }
        if iceberg && change.fields.is_some() {
            // The upstream schema moved: an index whose column was dropped, or retyped to
            // another key type (int → long widens the column but not the index's keys), can
            // no longer be kept whole.
            for ix in &indexes {
                // A vector index keys its column as bytes: it fits while the column holds
                // float vectors.
                let vector = ix
                    .kind()
                    .kind()
                    .is_some_and(|k| k.input() == crate::index::kind::Input::Vector);
                for (k, id) in ix.fields.iter().enumerate() {
                    let reason = match evolved.fields.iter().find(|f| f.field_id == *id) {
                        None => Some(format!(
                            "its column (field id {id}) was dropped from the upstream schema"
                        )),
                        Some(f) if vector && !datafile::is_vector_type(&f.data_type) => {
                            Some(format!(
                                "its column {} is {} in the upstream schema now; rebuild the index",
                                f.name, f.data_type
                            ))
                        }
                        Some(f) if !vector && f.key_type != ix.key.columns.get(k).map(|c| c.ty) => {
                            Some(format!(
                                "its column {} is {} in the upstream schema now; rebuild the index",
                                f.name, f.data_type
                            ))
                        }
                        _ => None,
                    };
                    if let Some(r) = reason {
                        if !broken.iter().any(|(b, _)| b.index_id == ix.index_id) {
                            broken.push((ix.clone(), r));
                        }
                    }
                }
            }
        }
        // Facts are read FACT_CONCURRENCY files at a time; of each footer only the indexed
        // columns' value bytes are kept (the commit estimate), not the footer.
        let estimate_of = |fields: &[crate::values::FieldInfo],
                           md: &parquet::file::metadata::ParquetMetaData|
         -> Vec<(u64, u64)> {
            indexes
                .iter()
                .map(|ix| {
                    let mut bytes = 0u64;
                    for id in &ix.fields {
                        let Ok(root) = datafile::root_of(fields, *id) else {
                            continue; // a column the file lacks: NULL keys
                        };
                        for rg in md.row_groups() {
                            if let Some(c) = rg.columns().get(root) {
                                bytes += c.uncompressed_size().max(0) as u64;
                            }
                        }
                    }
                    (ix.index_id, bytes)
                })
                .collect()
        };
        // Iceberg data files are bound by their footer (decision 77): a sync reads no data
        // file whole; plain Parquet files by their whole bytes.
        let binding = if iceberg {
            lineage::Binding::Footer
        } else {
            lineage::Binding::Whole
        };
        let mut read = Vec::with_capacity(paths.len());
        for window in paths.chunks(crate::admin::overlay::FACT_CONCURRENCY) {
            let got = futures::future::join_all(window.iter().map(|p| {
                let (location, estimate_of) = (&tr.location, &estimate_of);
                async move {
                    let (e, fields, md) = self.file_facts(location, p, binding).await?;
                    let estimate = estimate_of(&fields, &md);
                    Ok::<_, Error>((e, fields, estimate))
                }
            }))
            .await;
            for g in got {
                read.push(g?);
            }
        }
        for (p, (e, fields, md)) in paths.iter().zip(read) {
            if iceberg {
                crate::admin::schema::check_compatible(&evolved.fields, &fields, p)?;
                for ix in &indexes {
                    if let Err(e) = check_indexed_columns(&evolved, &[ix.clone()], &fields, p) {
                        if !broken.iter().any(|(b, _)| b.index_id == ix.index_id) {
                            broken.push((ix.clone(), e.to_string()));
                        }
                    }
                }
            } else {
                let mut fields = fields;
                if let Some(c) = &change.extra_column {
                    fields.retain(|f| &f.name != c);
                }
                check_indexed_columns(&tr, &indexes, &fields, p)?;
                if !tr.fields.is_empty() && !same_fields(&tr.fields, &fields) {
                    return Err(Error::Invalid(format!(
                        "{p} has a different schema from table {}",
                        tr.name
                    )));
                }
            }
            facts.push(md);
            new_files.push(e);
        }
        for (ix, reason) in &broken {
            self.poison_because(&tr, ix, Some(reason.clone())).await?;
        }
        indexes.retain(|ix| !broken.iter().any(|(b, _)| b.index_id == ix.index_id));
        let (mut entries, mut estimate) = (0u64, 0u64);
        for (e, per_index) in new_files.iter().zip(&facts) {
            entries += e.record_count * indexes.len() as u64;
            // Value bytes of the indexed columns, from the footer: a lower bound of key bytes.
            estimate += per_index
                .iter()
                .filter(|(id, _)| indexes.iter().any(|ix| ix.index_id == *id))
                .map(|(_, b)| b)
                .sum::<u64>();
        }
        // Many files of a plain registration go in bounded commits, each a registration of
        // its own (list order); an upstream change (removals, masks, a snapshot) is one
        // commit, so readers see the old file set or the new one, never a mix.
        let parts = change.remove.is_empty()
            && change.masks.is_empty()
            && change.iceberg.is_none()
            && change.iceberg_state.is_none()
            && change.fields.is_none()
            && new_files.len() > FILES_PER_COMMIT;
        // Index work that does not fit one commit is deferred (RFC 0016): the files are
        // registered, their indexes are `maintaining` (or stay `building`) and the staged
        // build path catches them up; until then those files are scanned.
        let mut defer = parts || entries > MAX_COMMIT_ENTRIES || estimate > MAX_COMMIT_BYTES;
        // Ids are reserved in a commit of their own: a registration that fails later leaves a
        // gap, never a reuse.
        let mut attempts = 0;
        let first_id = loop {
            let t = self.catalog.begin()?;
            let id: u64 = t.get("m/next_id").await?.unwrap_or(1);
            t.put("m/next_id", &(id + new_files.len() as u64))?;
            match t.commit().await {
                Ok(()) => break id,
                Err(e) if retry_conflicts(&e) && attempts < MAX_ATTEMPTS => attempts += 1,
                Err(e) => return Err(e),
            }
        };
        for (i, f) in new_files.iter_mut().enumerate() {
            f.file_id = first_id + i as u64;
        }
        // A vector index's codebook first (trained on the table and these files, when the
        // index has none yet).
        if !defer
            && indexes.iter().any(|ix| {
                ix.codebook.is_none()
                    && ix
                        .kind()
                        .kind()
                        .is_some_and(|k| k.input() == crate::index::kind::Input::Vector)
            })
        {
            self.ensure_codebooks(table, &new_files).await?;
            self.with_codebooks(tr.table_id, &mut indexes).await?;
        }
        // Entries (scoped reads of the indexed columns), then one bundle per new file.
        let mut keys: HashMap<(u64, u64), Vec<(Vec<u8>, u64)>> = HashMap::new();
        let mut bytes = 0u64;
        let (mut carried, mut derived) = (0u64, 0u64);
        let mut sources = crate::admin::moves::SourceEntries::default();
        // Blobs carried whole (full text, vector), and the source blobs and runs they were
        // read from (each read once for all outputs).
        let mut carried_blobs: HashMap<(u64, u64), (IndexFileEntry, Vec<u8>)> = HashMap::new();
        let mut read_blobs = crate::admin::moves::SourceBlobs::default();
        let mut carried_keys: HashSet<(u64, u64)> = HashSet::new();
        // What a move's carry reads of its sources, taken before the commit drops them (kept
        // in the catalog for each output when the work is deferred).
        let facts = match &change.moved {
            Some(mv) => Some(
                self.carrier()
                    .source_facts(&tr, &existing, mv, &indexes)
                    .await?,
            ),
            None => None,
        };
        'derive: for f in new_files.iter().filter(|_| !defer) {
            for ix in &indexes {
                if let (Some(mv), Some(facts)) = (&change.moved, &facts) {
                    if let Some(k) = self
                        .carrier()
                        .carried_entries(mv, facts, f, ix, &indexes, &mut sources)
                        .await?
                    {
                        carried += k.len() as u64;
                        carried_keys.insert((ix.index_id, f.file_id));
                        keys.insert((ix.index_id, f.file_id), k);
                        continue;
                    }
                    if let Some((bytes, meta)) = self
                        .carrier()
                        .carried_blob(mv, facts, f, ix, &mut read_blobs)
                        .await?
                    {
                        let a = crate::admin::file_build::artifact_of(
                            tr.snapshot as i64,
                            f,
                            ix,
                            &bytes,
                            meta,
                        );
                        let b = (a, bytes);
                        carried += f.record_count;
                        carried_blobs.insert((ix.index_id, f.file_id), b);
                        keys.insert((ix.index_id, f.file_id), Vec::new());
                        continue;
                    }
                }
                let (k, _, b) = self
                    .index_slice(&tr, f, ix, 0..f.record_count, u64::MAX)
                    .await?;
                derived += k.len() as u64;
                bytes += b;
                if bytes > MAX_COMMIT_BYTES {
                    // The footer's estimate was low: deferred after all.
                    defer = true;
                    keys.clear();
                    break 'derive;
                }
                keys.insert((ix.index_id, f.file_id), k);
            }
        }
        let built: Vec<IndexRecord> = if defer { Vec::new() } else { indexes.clone() };
        let mut report = RegisterReport {
            files: new_files.len() as u64,
            rows: new_files.iter().map(|f| f.record_count).sum(),
            entries: keys.values().map(|k| k.len() as u64).sum(),
            carried: if defer { 0 } else { carried },
            derived: if defer { 0 } else { derived },
            ..Default::default()
        };
        drop(sources);
        drop(read_blobs);
        for f in &mut new_files {
            if let Some(Some(m)) = change.masks.get(&f.path) {
                f.set_deleted(m);
            }
        }
        let mut artifacts = Vec::new();
        let mut bundles = Vec::new();
        for f in &new_files {
            let mut fresh = Vec::with_capacity(built.len());
            for ix in &built {
                let at = (ix.index_id, f.file_id);
                fresh.push(match carried_blobs.remove(&at) {
                    Some(b) => {
                        self.metrics.record_carried(1);
                        b
                    }
                    None if carried_keys.contains(&at) => {
                        self.metrics.record_carried(1);
                        self.write_artifact(&tr, f, ix, &keys[&at]).await?
                    }
                    None => self.blob_artifact(&tr, f, ix, &keys[&at]).await?,
                });
            }
            if fresh.is_empty() {
                continue;
            }
            let (arts, bundle, _) = self.write_bundle(&tr, f, &built, fresh).await?;
            report.bundles_written += 1;
            artifacts.extend(arts);
            bundles.push((f.file_id, bundle));
        }
        // The commit (or, for many files, one per part): retried from fresh reads after a
        // write-write conflict.
        // (A change without new files — masks, removals — is one commit too.)
        let parts_of: Vec<&[FileEntry]> = if parts {
            new_files.chunks(FILES_PER_COMMIT).collect()
        } else {
            vec![&new_files]
        };
        let mut poisoned = Vec::new();
        for part in parts_of {
            let mut attempt = 0u64;
            poisoned.extend(loop {
                attempt += 1;
                match self
                    .commit_registration(
                        table,
                        part,
                        &built,
                        defer,
                        &keys,
                        &artifacts,
                        &bundles,
                        &change,
                        facts.as_ref(),
                    )
                    .await
                {
                    Ok(p) => break p,
                    Err(e) if retry_conflicts(&e) && attempt < MAX_ATTEMPTS as u64 => {
                        tokio::time::sleep(std::time::Duration::from_millis(attempt.min(20))).await;
                    }
                    Err(e) => return Err(e),
                }
            });
            report.attempts += attempt;
            report.commits += 1;
        }
        if defer {
            report.pending = indexes.iter().map(|ix| ix.name.clone()).collect();
        }
        report.poisoned = broken.iter().map(|(ix, _)| ix.name.clone()).collect();
        for ix in &poisoned {
            self.poison(&tr, ix).await?;
            report.poisoned.push(ix.name.clone());
        }
        // A vector index the new files hold other dimensions for is poisoned (the files are
        // registered: an upstream change cannot be refused), and the report says so.
        if indexes.iter().any(|i| {
            i.kind()
                .kind()
                .is_some_and(|k| k.input() == crate::index::kind::Input::Vector)
        }) {
            let before: Vec<String> = indexes.iter().map(|i| i.name.clone()).collect();
            if self.poison_mixed_dims(table).await.is_err() {
                let t = self.catalog.begin()?;
                let tr = self.catalog.table(&t, table).await?;
                for ix in self.catalog.indexes(&t, tr.table_id).await? {
                    if ix.state == IndexState::Poisoned
                        && before.contains(&ix.name)
                        && !report.poisoned.contains(&ix.name)
                    {
                        report.poisoned.push(ix.name.clone());
                    }
                }
            }
        }
        self.invalidate();
        Ok(report)
    }

    async fn commit_registration(
        &self,
        table: &str,
        new_files: &[FileEntry],
        built: &[IndexRecord],
        deferred: bool,
        keys: &HashMap<(u64, u64), Vec<(Vec<u8>, u64)>>,
        artifacts: &[IndexFileEntry],
        bundles: &[(u64, BundleRecord)],
        change: &FileSetChange,
        facts: Option<&crate::admin::moves::SourceFacts>,
    ) -> Result<Vec<IndexRecord>> {
        let t = self.catalog.begin()?;
        let mut tr = self.catalog.table(&t, table).await?;
        if let Some(want) = change.expect_snapshot {
            let at = tr.iceberg.as_ref().map(|s| s.snapshot_id);
            if at != Some(want) {
                return Err(Error::Refused(format!(
                    "table {} was synced meanwhile (now at snapshot {at:?}, expected {want}); sync again",
                    tr.name
                )));
            }
        }
        let mut existing = self.catalog.files(&t, tr.table_id).await?;
        // The change first: dropped files leave, masks are replaced.
        for f in existing.iter().filter(|f| change.remove.contains(&f.path)) {
            t.delete(&file_key(tr.table_id, f.file_id))?;
        }
        existing.retain(|f| !change.remove.contains(&f.path));
        for f in &mut existing {
            if let Some(r) = change.row_ids.get(&f.path) {
                if r.apply(f) {
                    t.put(&file_key(tr.table_id, f.file_id), f)?;
                }
            }
            if let Some(m) = change.masks.get(&f.path) {
                let old = f.deleted()?;
                if old.as_ref() != m.as_ref() {
                    match m {
                        Some(m) => f.set_deleted(m),
                        None => f.deletes = None,
                    }
                    t.put(&file_key(tr.table_id, f.file_id), f)?;
                }
            }
        }
        if let Some(ice) = &change.iceberg {
            tr.iceberg = Some(ice.clone());
        }
        if let Some(f) = &change.fields {
            tr.fields = f.clone();
        }
        if let Some(state) = &change.iceberg_state {
            t.put_iceberg_state(tr.table_id, state).await?;
        }
        if let Some(f) = new_files
            .iter()
            .find(|n| existing.iter().any(|f| f.path == n.path))
        {
            return Err(Error::AlreadyExists {
                kind: "data file",
                name: format!("{}/{}", tr.name, f.path),
            });
        }
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        if let Some(ix) = indexes.iter().find(|i| {
            !deferred
                && i.state != IndexState::Poisoned
                && !built.iter().any(|b| b.index_id == i.index_id)
        }) {
            return Err(Error::Conflict(format!(
                "index {} was created during the registration; register again",
                ix.name
            )));
        }
        let version = t.bump_version().await?;
        let mut files = new_files.to_vec();
        let mut paths: HashMap<u64, String> = existing
            .iter()
            .map(|f| (f.file_id, f.path.clone()))
            .collect();
        for f in &mut files {
            match change.row_ids.get(&f.path) {
                Some(r) => {
                    r.apply(f);
                }
                None => {
                    f.row_id_start = Some(tr.next_row_id);
                    tr.next_row_id += f.record_count;
                }
            }
            t.put(&file_key(tr.table_id, f.file_id), f)?;
            paths.insert(f.file_id, f.path.clone());
        }
        let new_ids: HashSet<u64> = files.iter().map(|f| f.file_id).collect();
        // A move whose carry did not fit this commit: a record per output, from which the
        // build's steps carry its entries (RFC 0006, "the staged carry").
        if let (true, Some(mv), Some(facts)) = (deferred, &change.moved, facts) {
            for f in &files {
                if let Some(o) = mv.outputs.iter().position(|p| *p == f.path) {
                    let rec = crate::admin::moves::MoveRecord::of(mv, o as u32, facts);
                    t.put(&move_key(tr.table_id, f.file_id), &rec)?;
                }
            }
        }
        let mut poisoned = Vec::new();
        if deferred && !new_files.is_empty() {
            // The new files are pending for every live index: a ready one is `maintaining`
            // until the staged build path covers them (uniqueness is checked across files
            // then); the certificate no longer holds.
            for ix in indexes.iter().filter(|i| i.state != IndexState::Poisoned) {
                let mut rec = ix.clone();
                if rec.state == IndexState::Ready {
                    rec.state = IndexState::Maintaining;
                }
                rec.generation += 1;
                t.put(&index_key(tr.table_id, ix.index_id), &rec)?;
                t.delete(&certificate_key(ix.index_id))?;
            }
        }
        for ix in indexes
            .iter()
            .filter(|i| i.state != IndexState::Poisoned && !deferred)
        {
            for a in artifacts
                .iter()
                .filter(|a| a.lineage.index_id == ix.index_id)
            {
                t.put(&artifact_key(ix.index_id, a.file_id), a)?;
            }
            t.delete(&certificate_key(ix.index_id))?;
            if !ix.unique {
                continue;
            }
            let mut claims = Vec::new();
            for f in &files {
                let deleted = f.deleted()?;
                for (k, p) in &keys[&(ix.index_id, f.file_id)] {
                    if deleted.as_ref().is_some_and(|d| d.contains(*p)) {
                        continue;
                    }
                    if !ix.key.decode(k)?.iter().any(|v| v.is_null()) {
                        claims.push((
                            k.clone(),
                            RowIdentity {
                                file_id: f.file_id,
                                position: *p,
                                row_id: f.row_id_at(*p).unwrap_or(0),
                            },
                        ));
                    }
                }
            }
            // Checked against the index itself, inside this transaction (every commit bumps
            // `m/version`, so a registration that committed meanwhile fails this one, which
            // then checks again on fresh reads): `crate::admin::unique`.
            let artifacts: HashMap<u64, IndexFileEntry> = self
                .catalog
                .artifacts(&t, ix.index_id)
                .await?
                .into_iter()
                .filter(|a| !new_ids.contains(&a.file_id))
                .map(|a| (a.file_id, a))
                .collect();
            let indexed = crate::admin::unique::indexed(&tr, &existing, &artifacts)?;
            match self
                .probe_unique(&tr, ix, &indexed, &mut claims, &paths)
                .await
            {
                Ok(()) => {}
                // A building index is maintained, and poisoned instead of failing the writer.
                Err(Error::Constraint { .. })
                    if ix.state == IndexState::Building || change.poison_duplicates =>
                {
                    poisoned.push(ix.clone())
                }
                Err(e) => return Err(e),
            }
        }
        for (file_id, b) in bundles {
            t.put(&bundle_key(tr.table_id, *file_id), b)?;
        }
        tr.snapshot = version;
        t.put(&table_key(tr.table_id), &tr)?;
        t.commit().await?;
        Ok(poisoned)
    }

    /// Records deleted rows (by position) in the files' delete masks, in one transaction.
    /// Every later answer leaves the rows out, and their keys are free again under unique
    /// indexes.
    pub async fn register_deletes(
        &self,
        table: &str,
        deletes: &[FileDeletes],
    ) -> Result<DeleteReport> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        drop(t);
        // Per file: the positions not deleted yet.
        let mut work: Vec<(FileEntry, RoaringTreemap)> = Vec::new();
        for d in deletes {
            let f = files
                .iter()
                .find(|f| f.path == d.file)
                .ok_or_else(|| Error::NotFound {
                    kind: "data file",
                    name: format!("{}/{}", tr.name, d.file),
                })?;
            if let Some(p) = d.positions.iter().find(|p| **p >= f.record_count) {
                return Err(Error::Invalid(format!(
                    "position {p} is past the end of {} ({} rows)",
                    f.path, f.record_count
                )));
            }
            let old = f.deleted()?.unwrap_or_default();
            let new: RoaringTreemap = d
                .positions
                .iter()
                .copied()
                .filter(|p| !old.contains(*p))
                .collect();
            work.push((f.clone(), new));
        }
        let mut attempts = 0;
        loop {
            match self.commit_deletes(&tr, &work).await {
                Ok(r) => {
                    self.invalidate();
                    return Ok(r);
                }
                Err(e) if retry_conflicts(&e) && attempts < MAX_ATTEMPTS => attempts += 1,
                Err(e) => return Err(e),
            }
        }
    }

    async fn commit_deletes(
        &self,
        tr: &TableRecord,
        work: &[(FileEntry, RoaringTreemap)],
    ) -> Result<DeleteReport> {
        let t = self.catalog.begin()?;
        let mut report = DeleteReport::default();
        for (f0, new) in work {
            let mut f: FileEntry = t
                .get(&file_key(tr.table_id, f0.file_id))
                .await?
                .filter(|f: &FileEntry| f.sha256 == f0.sha256)
                .ok_or_else(|| Error::Conflict(format!("{} changed during the delete", f0.path)))?;
            let mut mask = f.deleted()?.unwrap_or_default();
            let before = mask.len();
            mask |= new;
            report.rows_deleted += mask.len() - before;
            f.set_deleted(&mask);
            t.put(&file_key(tr.table_id, f.file_id), &f)?;
        }
        for ix in self.catalog.indexes(&t, tr.table_id).await? {
            t.delete(&certificate_key(ix.index_id))?;
        }
        t.bump_version().await?;
        t.commit().await?;
        Ok(report)
    }

    /// Drops `name` like [`Overlay::drop_index`], then purges it: rewrites the bundles that
    /// hold its blobs without them, reclaims its catalog records and claims, and deletes the
    /// objects nothing references any more — neither the catalog nor any manifest still
    /// stored (those go with [`Overlay::vacuum`]) — at once, with no grace period: a
    /// fan-out worker's uncommitted bundle is taken too, so purge between builds.
    pub async fn drop_index_purge(&self, table: &str, name: &str) -> Result<VacuumReport> {
        let index_id = self.drop_index(table, name).await?;
        let _exclusive = self.writing.write().await;
        let mut report = VacuumReport::default();
        let t = self.catalog.begin()?;
        let Some(tomb) = t.get::<Tombstone>(&tombstone_key(index_id)).await? else {
            return Ok(report);
        };
        let tr: TableRecord = t
            .get(&table_key(tomb.table_id))
            .await?
            .ok_or_else(|| Error::catalog(format!("table {} has no record", tomb.table_id)))?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        let mine = self.catalog.artifacts(&t, index_id).await?;
        drop(t);
        for a in &mine {
            let Some(f) = files.iter().find(|f| f.file_id == a.file_id) else {
                continue;
            };
            let t = self.catalog.begin()?;
            let current: Option<BundleRecord> = t.get(&bundle_key(tr.table_id, f.file_id)).await?;
            drop(t);
            if current.as_ref().map(|b| &b.path) != Some(&a.lineage.bundle_path) {
                continue; // its current bundle no longer holds the dropped blob
            }
            let (arts, bundle, _) = self.write_bundle(&tr, f, &indexes, vec![]).await?;
            let t = self.catalog.begin()?;
            for x in &arts {
                t.put(&artifact_key(x.lineage.index_id, x.file_id), x)?;
            }
            t.put(&bundle_key(tr.table_id, f.file_id), &bundle)?;
            t.bump_version().await?;
            t.commit().await?;
        }
        self.reclaim_dropped(&tomb, &mut report).await?;
        let (manifests, _) = self.stored_manifests().await?;
        let retained: Vec<u64> = manifests.iter().map(|(v, _)| *v).collect();
        self.sweep(&retained, std::time::Duration::ZERO, &mut report)
            .await?;
        self.invalidate();
        Ok(report)
    }

    /// Reclaims a dropped index's claims, index-file records, cursor and certificate, in
    /// bounded batches, then its tombstone.
    async fn reclaim_dropped(&self, tomb: &Tombstone, report: &mut VacuumReport) -> Result<()> {
        report.claims += self.reclaim_prefix(&claim_prefix(tomb.index_id)).await?;
        report.index_files += self.reclaim_prefix(&artifact_prefix(tomb.index_id)).await?;
        self.reclaim_prefix(&repair_prefix(tomb.index_id)).await?;
        let t = self.catalog.begin()?;
        t.delete(&cursor_key(tomb.index_id))?;
        t.delete(&certificate_key(tomb.index_id))?;
        t.delete(&tombstone_key(tomb.index_id))?;
        t.commit().await?;
        report.dropped_indexes += 1;
        Ok(())
    }

    /// Manifest versions stored under `manifests/`, oldest first, with their paths; and the
    /// part objects stored there (`manifests/<version>/…`), with their versions.
    async fn stored_manifests(&self) -> Result<(Vec<(u64, String)>, Vec<(u64, Path)>)> {
        let mut out = Vec::new();
        let mut parts = Vec::new();
        let mut s = self.store.list(Some(&Path::from("manifests")));
        while let Some(m) = s.next().await {
            let m = m.map_err(store_err)?;
            let p = m.location.as_ref().to_string();
            let Some(name) = p.strip_prefix("manifests/") else {
                continue;
            };
            if let Some(v) = name
                .strip_suffix(".json")
                .and_then(|n| n.parse::<u64>().ok())
            {
                if p == manifest_path(v) {
                    out.push((v, p));
                }
            } else if let Some((dir, _)) = name.split_once('/') {
                if let Ok(v) = dir.parse::<u64>() {
                    if dir.len() == 20 {
                        parts.push((v, m.location));
                    }
                }
            }
        }
        out.sort();
        Ok((out, parts))
    }

    /// Drops the move records whose carry is over: their output is gone, or every live index
    /// of its table holds a blob of it the read gate accepts (built or carried). What they
    /// kept from vacuum (the sources' bundles and runs) goes with the next sweep.
    async fn settle_moves(&self) -> Result<()> {
        let t = self.catalog.begin()?;
        let records: Vec<(String, crate::admin::moves::MoveRecord)> =
            t.scan_limit("mv/", usize::MAX).await?;
        let mut settled = Vec::new();
        for (key, rec) in records {
            let mut parts = key.split('/').skip(1);
            let (Some(table_id), Some(file_id)) = (
                parts.next().and_then(|x| x.parse::<u64>().ok()),
                parts.next().and_then(|x| x.parse::<u64>().ok()),
            ) else {
                settled.push(key);
                continue;
            };
            let f: Option<FileEntry> = t.get(&file_key(table_id, file_id)).await?;
            let done = match f.filter(|f| f.path == rec.output) {
                None => true,
                Some(f) => {
                    let tables = self.catalog.tables(&t).await?;
                    match tables.into_iter().find(|x| x.table_id == table_id) {
                        None => true,
                        Some(tr) => {
                            let mut all = true;
                            for ix in self.catalog.indexes(&t, table_id).await? {
                                if ix.state == IndexState::Poisoned {
                                    continue;
                                }
                                let a: Option<IndexFileEntry> =
                                    t.get(&artifact_key(ix.index_id, file_id)).await?;
                                all &= crate::admin::catalog::accepted(&f, a.as_ref(), &tr);
                            }
                            all
                        }
                    }
                }
            };
            if done {
                settled.push(key);
            }
        }
        drop(t);
        if settled.is_empty() {
            return Ok(());
        }
        let t = self.catalog.begin()?;
        for k in &settled {
            t.delete(k)?;
        }
        t.commit().await
    }

    /// Every overlay object the catalog head references.
    async fn catalog_references(&self) -> Result<HashSet<String>> {
        let t = self.catalog.begin()?;
        let mut live = HashSet::new();
        for b in t.scan::<BundleRecord>("b/").await? {
            live.insert(b.path);
        }
        // A record whose blob a run holds names the bundle it was dropped from: not a
        // reference (manifests that still list the blob keep the bundle until they go).
        for a in t.scan::<IndexFileEntry>("a/").await? {
            if !a.in_run {
                live.insert(a.lineage.bundle_path);
            }
        }
        for r in t.scan::<TableRun>("r/").await? {
            live.insert(r.bundle_path);
        }
        for c in t.scan::<BuildCursor>("k/").await? {
            live.extend(c.segments.into_iter().map(|s| s.path));
        }
        // The sources' bundles and runs a move's carry is still to read.
        for m in t.scan::<crate::admin::moves::MoveRecord>("mv/").await? {
            live.extend(m.sources.objects().map(str::to_string));
        }
        // Vector indexes' codebooks (a dropped index's record is gone once it is reclaimed).
        for ix in t.scan::<IndexRecord>("i/").await? {
            live.extend(ix.codebook.map(|c| c.path));
        }
        Ok(live)
    }

    /// Deletes every object under `bundles/`, `staging/` and `codebooks/` that neither the
    /// catalog head nor a manifest of `retained` references.
    async fn sweep(
        &self,
        retained: &[u64],
        grace: std::time::Duration,
        report: &mut VacuumReport,
    ) -> Result<()> {
        // Objects modified after this (ms since the epoch) are young; a local clock behind
        // the store's keeps more, never less.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let cutoff = now_ms.saturating_sub(grace.as_millis().min(i64::MAX as u128) as i64);
        let mut live = self.catalog_references().await?;
        for v in retained {
            let b = self
                .reader
                .read_all(&Location::new(manifest_path(*v)))
                .await?;
            let m = Manifest::from_json(&b)?;
            for t in &m.tables {
                for ix in &t.indexes {
                    load_part(self.reader.as_ref(), &m, t, ix).await?;
                    live.extend(
                        ix.file_entries()
                            .iter()
                            .map(|a| a.lineage.bundle_path.clone()),
                    );
                    live.extend(ix.table_runs().iter().map(|r| r.bundle_path.clone()));
                    live.extend(ix.codebook.as_ref().map(|c| c.path.clone()));
                }
            }
        }
        for prefix in ["bundles", "staging", "codebooks"] {
            let mut doomed = Vec::new();
            let mut s = self.store.list(Some(&Path::from(prefix)));
            while let Some(m) = s.next().await {
                let m = m.map_err(store_err)?;
                if live.contains(m.location.as_ref()) {
                    continue;
                }
                if !grace.is_zero() && m.last_modified.timestamp_millis() > cutoff {
                    report.young += 1;
                    report.young_bytes += m.size;
                    continue;
                }
                doomed.push((m.location, m.size));
            }
            for (p, size) in doomed {
                match self.store.delete(&p).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                        report.artifacts += 1;
                        report.bytes += size;
                    }
                    Err(e) => return Err(store_err(e)),
                }
            }
        }
        Ok(())
    }

    /// Deletes manifests older than the newest `retain_versions` (HEAD's is always kept),
    /// reclaims dropped indexes (claims and records, in bounded batches), and deletes every
    /// bundle, run, staged segment and codebook that neither the catalog nor a retained manifest
    /// references and that is older than `grace_seconds` (younger ones are counted in
    /// `young`). Holds this overlay's writers off while it runs; the grace period protects
    /// what other processes (fan-out workers, a build elsewhere) wrote for a commit to come.
    pub async fn vacuum(&self, opts: VacuumOptions) -> Result<VacuumReport> {
        if opts.retain_versions == 0 {
            return Err(Error::Invalid(
                "retainVersions must be at least 1 (HEAD's manifest)".into(),
            ));
        }
        let _exclusive = self.writing.write().await;
        let mut report = VacuumReport::default();
        let (manifests, parts) = self.stored_manifests().await?;
        let head = match read_head(self.reader.as_ref()).await {
            Ok(h) => Some(h.version),
            Err(Error::Io(crate::io::IoError::NotFound { .. })) => None,
            Err(e) => return Err(e),
        };
        let keep_from = manifests
            .len()
            .saturating_sub(opts.retain_versions as usize);
        let mut retained = Vec::new();
        for (i, (v, p)) in manifests.iter().enumerate() {
            if i >= keep_from || Some(*v) == head {
                retained.push(*v);
            } else {
                self.store
                    .delete(&Path::from(p.as_str()))
                    .await
                    .map_err(store_err)?;
                report.manifests += 1;
            }
        }
        // Parts go with their manifest; parts without one are a publish that failed before
        // writing its root (publishes are held off while vacuum runs).
        for (v, p) in parts {
            if !retained.contains(&v) {
                match self.store.delete(&p).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(store_err(e)),
                }
            }
        }
        let t = self.catalog.begin()?;
        let tombs: Vec<Tombstone> = t.scan("x/").await?;
        let staged: Vec<StagedTable> = t.scan(STAGED_TABLE_PREFIX).await?;
        drop(t);
        for tomb in &tombs {
            self.reclaim_dropped(tomb, &mut report).await?;
        }
        // Registrations that died between their first and last commit (none is in flight:
        // registrations hold `writing` shared).
        for s in &staged {
            report.staged_tables += 1;
            self.reclaim_prefix(&file_prefix(s.table_id)).await?;
            let t = self.catalog.begin()?;
            t.delete(&staged_table_key(s.table_id))?;
            t.commit().await?;
        }
        self.settle_moves().await?;
        self.sweep(
            &retained,
            std::time::Duration::from_secs(opts.grace_seconds),
            &mut report,
        )
        .await?;
        self.invalidate();
        Ok(report)
    }

    /// Recomputes `index`'s entries from the live rows and compares them with the stored
    /// blobs. A clean pass records a [`Certificate`] (table snapshot + index generation)
    /// unless the index changed meanwhile; build steps and writes withdraw it.
    pub async fn verify(&self, table: &str, index: &str) -> Result<VerifyReport> {
        self.verify_with_pause(table, index, async {}).await
    }

    /// [`Overlay::verify`] awaiting `pause` between checking and recording (tests use it to
    /// move the index meanwhile).
    #[doc(hidden)]
    pub async fn verify_with_pause(
        &self,
        table: &str,
        index: &str,
        pause: impl std::future::Future<Output = ()>,
    ) -> Result<VerifyReport> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, index).await?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let artifacts: HashMap<u64, IndexFileEntry> =
            self.catalog.artifacts_by_file(&t, ix.index_id).await?;
        let runs = t.runs(ix.index_id).await?;
        drop(t);
        let mut wrong_runs: std::collections::BTreeSet<Option<String>> = Default::default();
        let mut r = VerifyReport {
            files: files.len() as u64,
            ..Default::default()
        };
        let mut repairs: Vec<crate::admin::repair::RepairEntry> = Vec::new();
        let repair =
            |f: &FileEntry, reason: &str, message: String| crate::admin::repair::RepairEntry {
                index_id: ix.index_id,
                file_id: f.file_id,
                path: f.path.clone(),
                run: None,
                reason: reason.to_string(),
                message,
            };
        for f in &files {
            let deleted = f.deleted()?.unwrap_or_default();
            let (expected, _, _) = match self
                .index_slice(&tr, f, &ix, 0..f.record_count, u64::MAX)
                .await
            {
                Ok(x) => x,
                Err(e) if is_data_error(&e) => {
                    // The file is not what was registered: nothing to compare against.
                    r.files_unindexed += 1;
                    repairs.push(repair(f, "drifted", format!("verify: {e}")));
                    continue;
                }
                Err(e) => return Err(e),
            };
            // A full-text blob is a function of the file's values: verify rebuilds it and
            // compares bytes.
            let rebuilt = if ix.kind().kind().is_some_and(|k| k.verify_by_rebuild()) {
                Some(self.blob_artifact(&tr, f, &ix, &expected).await?.1)
            } else {
                None
            };
            let expected: HashMap<u64, Vec<u8>> = expected
                .into_iter()
                .filter(|(_, p)| !deleted.contains(*p))
                .map(|(k, p)| (p, k))
                .collect();
            r.expected += expected.len() as u64;
            let a = artifacts.get(&f.file_id);
            if !accepted(f, a, &tr) {
                r.files_unindexed += 1;
                r.missing += expected.len() as u64;
                continue;
            }
            let a = a.expect("accepted implies present");
            if a.in_run {
                // A run holds the file's entries, merged from the blob this record names (the
                // drop, decision 71): a rebuild hashing to that blob's SHA-256 certifies them.
                // Otherwise the run answers the file wrongly: its repair withdraws the run
                // (its files are derived again) as well as re-checking the file.
                let n = expected.len() as u64;
                if rebuilt
                    .as_ref()
                    .is_some_and(|want| lineage::sha256_hex(want) == a.lineage.blob_sha256)
                {
                    r.stored += n;
                } else {
                    r.mismatched += n;
                    repairs.push(repair(
                        f,
                        "verify",
                        format!(
                            "verify: the {} entries a run holds differ from the file's",
                            ix.kind()
                        ),
                    ));
                    let holder = runs.iter().rev().find(|run| {
                        run.files.iter().any(|rf| {
                            rf.file_id == f.file_id && rf.sha256 == a.lineage.source_sha256
                        })
                    });
                    wrong_runs.insert(holder.map(|run| run.bundle_path.clone()));
                }
                continue;
            }
            let blob = self
                .reader
                .read_range(
                    &Location::new(&a.lineage.bundle_path),
                    a.lineage.blob_range(),
                )
                .await?;
            if lineage::sha256_hex(&blob) != a.lineage.blob_sha256 {
                r.mismatched += a.ordered.entries;
                r.missing += expected.len() as u64;
                repairs.push(repair(
                    f,
                    "blob_checksum",
                    "verify: the blob's SHA-256 differs from its lineage".into(),
                ));
                continue;
            }
            if let Some(want) = &rebuilt {
                let n = expected.len() as u64;
                if *want == blob.as_ref() {
                    r.stored += n;
                } else {
                    r.mismatched += n;
                    repairs.push(repair(
                        f,
                        "verify",
                        format!(
                            "verify: the {} blob differs from one rebuilt from the file",
                            ix.kind()
                        ),
                    ));
                }
                continue;
            }
            // A filter holds keys, not rows: every live row's key must pass it (a key it
            // excludes would prune a file that holds it).
            let excluded = ix
                .kind()
                .kind()
                .and_then(|k| k.excluded_keys(&blob, &mut expected.values().map(|k| k.as_slice())));
            if let Some(missing) = excluded {
                let missing = missing?;
                r.stored += expected.len() as u64 - missing;
                r.missing += missing;
                if missing > 0 {
                    repairs.push(repair(
                        f,
                        "verify",
                        format!("verify: the filter excludes {missing} live rows' keys"),
                    ));
                }
                continue;
            }
            let mut seen = HashSet::new();
            let (mut stored, mut dead, mut mismatched) = (0u64, 0u64, 0u64);
            ix.kind().read_entries(&blob, &mut |k, p| {
                stored += 1;
                if p >= f.record_count || !seen.insert(p) {
                    mismatched += 1;
                } else if deleted.contains(p) {
                    dead += 1;
                } else if expected.get(&p).map(|e| e.as_slice()) != Some(k) {
                    mismatched += 1;
                }
            })?;
            let missing = expected.keys().filter(|p| !seen.contains(p)).count() as u64;
            r.stored += stored;
            r.dead += dead;
            r.mismatched += mismatched;
            r.missing += missing;
            // Dead entries alone are harmless (masks leave them out) and a rebuild keeps them
            // (builds index every position): queuing them would rebuild on every verify.
            if missing + mismatched > 0 {
                repairs.push(repair(
                    f,
                    "verify",
                    format!(
                        "verify: {missing} missing, {dead} dead, {mismatched} mismatched entries"
                    ),
                ));
            }
        }
        if !wrong_runs.is_empty() {
            // One queued run repair per index: the run, or every run when more are wrong.
            repairs.push(crate::admin::repair::RepairEntry {
                index_id: ix.index_id,
                file_id: 0,
                path: "*".into(),
                run: match wrong_runs.len() {
                    1 => wrong_runs.into_iter().next().flatten(),
                    _ => None,
                },
                reason: "verify".into(),
                message: "verify: a run holds entries that differ from its files'".into(),
            });
        }
        if !repairs.is_empty() {
            let t = self.catalog.begin()?;
            for e in &repairs {
                t.put(&repair_key(e.index_id, e.file_id), e)?;
            }
            t.commit().await?;
            r.repairs_queued = repairs.len() as u64;
        }
        pause.await;
        if r.missing == 0 && r.mismatched == 0 && r.files_unindexed == 0 {
            let t = self.catalog.begin()?;
            let now: Option<IndexRecord> = t.get(&index_key(tr.table_id, ix.index_id)).await?;
            let tr_now = self.catalog.table(&t, table).await?;
            if now.is_some_and(|n| n.generation == ix.generation && n.state == ix.state)
                && tr_now.snapshot == tr.snapshot
            {
                let catalog_version: u64 = t.get("m/version").await?.unwrap_or(0);
                t.put(
                    &certificate_key(ix.index_id),
                    &Certificate {
                        snapshot: tr.snapshot,
                        generation: ix.generation,
                        catalog_version,
                        entries: r.expected,
                    },
                )?;
                t.commit().await?;
                r.certified = true;
            }
        }
        Ok(r)
    }

    /// The certificate of `index`'s last clean [`Overlay::verify`], if still standing.
    pub async fn certificate(&self, table: &str, index: &str) -> Result<Option<Certificate>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, index).await?;
        t.get(&certificate_key(ix.index_id)).await
    }

    /// How many catalog keys start with `prefix` (tests check what a verb left in the
    /// catalog, e.g. that nothing is stored per key).
    #[doc(hidden)]
    pub async fn catalog_keys(&self, prefix: &str) -> Result<u64> {
        let t = self.catalog.begin()?;
        let keys: Vec<serde_json::Value> = t.scan(prefix).await?;
        Ok(keys.len() as u64)
    }

    /// Requests and bytes read from the overlay's own objects (bundles, runs, staged
    /// segments) since it was opened; tests check how much a verb reads back.
    #[doc(hidden)]
    pub fn overlay_reads(&self) -> crate::io::IoStats {
        self.reader.counters().snapshot()
    }

    /// The indexes of `table`, in id order.
    pub async fn list_indexes(&self, table: &str) -> Result<Vec<IndexRecord>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        self.catalog.indexes(&t, tr.table_id).await
    }

    /// The registered tables, in name order, with their current file and row counts.
    pub async fn list_tables(&self) -> Result<Vec<crate::admin::overlay::TableInfo>> {
        let t = self.catalog.begin()?;
        let mut out = Vec::new();
        for tr in self.catalog.tables(&t).await? {
            let files = self.catalog.files(&t, tr.table_id).await?;
            out.push(crate::admin::overlay::TableInfo {
                rows: files.iter().map(|f| f.record_count).sum(),
                files: files.len() as u64,
                name: tr.name,
                table_id: tr.table_id,
                fields: tr.fields,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The index's definition as the catalog holds it.
    pub async fn index_record(&self, table: &str, index: &str) -> Result<IndexRecord> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        self.catalog.index(&t, &tr, index).await
    }

    /// The current bundle of each data file of `table` (path → bundle object bytes).
    pub async fn bundles(&self, table: &str) -> Result<Vec<(String, bytes::Bytes)>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let mut out = Vec::new();
        for f in files {
            if let Some(b) = t
                .get::<BundleRecord>(&bundle_key(tr.table_id, f.file_id))
                .await?
            {
                out.push((f.path, self.reader.read_all(&Location::new(&b.path)).await?));
            }
        }
        Ok(out)
    }

    /// The object store under the overlay root (tests inspect what vacuum left).
    pub fn store(&self) -> &Arc<dyn object_store::ObjectStore> {
        &self.store
    }
}
