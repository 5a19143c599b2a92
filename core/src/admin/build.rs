//! Index builds in bounded, resumable steps (`docs/catalog.md`, "Builds").
//!
//! A step indexes rows of one index in file order until it has derived `max_entries` entries
//! or `max_bytes` of encoded entries, then commits in one catalog transaction: the artifacts
//! of the files it finished (each in a new bundle generation of its file, next to the valid
//! blobs of the file's other indexes), the unique claims of every row it read, and the
//! cursor. A file larger than a step is indexed in slices: each slice is written as a sorted
//! segment under `staging/`, and the step that reads the file's last row merges the segments
//! into the file's blob — the same bytes a one-shot build writes. A step that loses a race
//! with another builder of the same index commits nothing (`E_CONFLICT`); the cursor only
//! moves forward.

use crate::index::kind::Input;
use std::collections::{HashMap, HashSet};

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::admin::catalog::*;
use crate::admin::file_build;
use crate::admin::overlay::{store_err, BuildReport, Overlay, Progress, Skipped};
use crate::admin::unique;
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexState};
use crate::index::ordered::{self, OrderedBlobWriter};
use crate::io::{Location, RangeReader};
use crate::values::Value;

/// Default entries per step.
pub const DEFAULT_STEP_ENTRIES: u64 = 1_000_000;
/// Default encoded entry bytes per step.
pub const DEFAULT_STEP_BYTES: u64 = 8 << 20;
/// Most entries one catalog commit may carry (steps, file registrations).
pub const MAX_COMMIT_ENTRIES: u64 = 1_000_000;
/// Most encoded entry bytes one catalog commit may carry.
pub const MAX_COMMIT_BYTES: u64 = 64 << 20;
/// Claims or artifacts deleted per transaction when an index is reclaimed.
pub const RECLAIM_BATCH: usize = 10_000;

/// Bounds of one [`Overlay::build_step`]. An entry counts its key bytes plus 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepOptions {
    pub max_entries: u64,
    pub max_bytes: u64,
}

/// Most entries (rows × pending indexes) of one file in [`Overlay::build`]'s whole-file pass;
/// larger files are built in slices, index by index.
pub const FILE_PASS_ENTRIES: u64 = 2 * DEFAULT_STEP_ENTRIES;
/// Most files one batch of [`Overlay::build`] commits.
pub const BATCH_FILES: usize = 64;

/// Conflicting steps retried in a row before `E_CONFLICT` reaches the caller.
pub const STEP_RETRIES: u32 = 16;

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions {
            max_entries: DEFAULT_STEP_ENTRIES,
            max_bytes: DEFAULT_STEP_BYTES,
        }
    }
}

/// Where a staged build stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorInfo {
    pub file: String,
    pub position: u64,
}

/// What one merge of a staged build did ([`Overlay::merge_step`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeReport {
    /// Runs written again as part of the new one (0: the delta became a run of its own).
    pub runs_merged: u64,
    /// Files the new run covers, and their rows.
    pub files: u64,
    pub rows: u64,
    /// Bytes of the new run's blob (0 when the step only dropped runs that answer nothing).
    pub run_bytes: u64,
    /// The index's runs after the step.
    pub runs: u64,
}

/// What one step did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReport {
    pub index: String,
    pub state: IndexState,
    /// No row of the index is left to index.
    pub done: bool,
    /// The index's generation after this step: +1 per committed step, so it only grows.
    pub step: u64,
    pub entries: u64,
    pub entry_bytes: u64,
    pub files_completed: Vec<String>,
    pub bundles_written: u64,
    pub bytes_written: u64,
    pub skipped: Vec<Skipped>,
    /// The file in progress, when a step stopped inside one.
    pub cursor: Option<CursorInfo>,
    /// Rows indexed (covered files + the position in the file in progress) and all rows.
    pub rows_done: u64,
    pub rows_total: u64,
    /// A step of the merge phase (every row indexed): the tier step it took — the run it
    /// wrote and what that run covers (`docs/ordered-index.md`, "Table runs").
    pub merged: Option<MergeReport>,
}

pub(crate) use crate::admin::catalog::accepted;

/// Is `e` a value of the data that the index cannot hold (too long a key, a value that does
/// not fit its column's key type)? Deterministic: the same file fails the same way on every
/// attempt, so a build poisons the index with the reason instead of leaving it `building`.
pub(crate) fn is_value_error(e: &Error) -> bool {
    use crate::values::KeyError as K;
    matches!(
        e,
        Error::Key(
            K::ValueTooLarge { .. }
                | K::KeyTooLarge { .. }
                | K::TypeMismatch { .. }
                | K::OutOfRange { .. }
                | K::FixedLength { .. }
        ) | Error::Blob(ordered::BlobError::KeyTooLarge(_))
    )
}

/// Is `e` an error of the data file itself (unreadable, changed), which a build skips?
pub(crate) fn is_data_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Io(_) | Error::Drift { .. } | Error::Parquet { .. }
    )
}

/// Bundles [`Overlay::shed_covered`] writes again at once.
const SHED_WRITES: usize = 8;

impl Overlay {
    /// Sorted `(key, position)` entries of `ix` for the rows `range` of `f`, stopping after
    /// the row that takes the encoded size to `max_bytes`. Returns the entries, the end of
    /// the rows read and their encoded bytes. Reads only the indexed columns, pinned to the
    /// recorded version (`E_DRIFT` when the file changed).
    pub(crate) async fn index_slice(
        &self,
        tr: &TableRecord,
        f: &FileEntry,
        ix: &IndexRecord,
        range: std::ops::Range<u64>,
        max_bytes: u64,
    ) -> Result<(Vec<(Vec<u8>, u64)>, u64, u64)> {
        let (loc, md) = file_build::open_pinned(self.data.as_ref(), &tr.location, f).await?;
        let changed = file_build::drift_of(f);
        let mut keys: Vec<(Vec<u8>, u64)> =
            Vec::with_capacity((range.end - range.start).min(1 << 20) as usize);
        let input = ix.kind().kind().map_or(Input::Key, |k| k.input());
        let (mut bytes, mut end) = (0u64, range.start);
        datafile::scan_values_until(
            self.data.as_ref(),
            &loc,
            &md,
            &ix.fields,
            Some(range.clone()),
            |vals, position| {
                if bytes >= max_bytes {
                    // Over budget: the rest is the next step's, and is not read now (a
                    // step reading to its range's end read the file's rest at every step).
                    return Ok(false);
                }
                match input {
                    Input::Vector => {
                        let k = crate::index::vector::entry_of(&vals[0]);
                        bytes += k.len() as u64 + 8;
                        keys.push((k, position));
                    }
                    // Text, not a canonical key: documents of any length (a term is what
                    // the index keys, not the whole value).
                    Input::Text => {
                        let text = match &vals[0] {
                            Value::String(s) => Some(s.as_str()),
                            _ => None,
                        };
                        crate::index::fulltext::entries_of(text, |k| {
                            bytes += k.len() as u64 + 8;
                            keys.push((k, position));
                        });
                    }
                    Input::Key => {
                        let k = ix.key.encode(vals)?;
                        bytes += k.len() as u64 + 8;
                        keys.push((k, position));
                    }
                }
                end = position + 1;
                Ok(true)
            },
        )
        .await
        .map_err(changed)?;
        keys.sort_unstable();
        Ok((keys, end, bytes))
    }

    /// The blob of `ix` over `f` from its sorted entries, with its lineage (bundle placement
    /// filled in by [`Overlay::write_bundle`]).
    pub(crate) async fn blob_artifact(
        &self,
        tr: &TableRecord,
        f: &FileEntry,
        ix: &IndexRecord,
        entries: &[(Vec<u8>, u64)],
    ) -> Result<(IndexFileEntry, Vec<u8>)> {
        self.metrics.record_derived(1);
        self.write_artifact(tr, f, ix, entries).await
    }

    /// [`Overlay::blob_artifact`] of entries carried over a move (not counted as derived).
    pub(crate) async fn write_artifact(
        &self,
        tr: &TableRecord,
        f: &FileEntry,
        ix: &IndexRecord,
        entries: &[(Vec<u8>, u64)],
    ) -> Result<(IndexFileEntry, Vec<u8>)> {
        let book = match &ix.codebook {
            Some(c) => Some(self.codebooks.load(&self.reader, c).await?),
            None => None,
        };
        file_build::blob_artifact(
            tr.snapshot as i64,
            f,
            ix,
            entries.iter().map(|(k, p)| (k.as_slice(), *p)),
            self.block_bytes,
            entries.iter().map(|(k, _)| k.len() + 8).sum(),
            book.as_deref(),
        )
    }

    /// Writes a new bundle generation of `f` holding `fresh` plus the still-valid blobs of the
    /// file's other indexes (copied by range), in index-id order. Returns every artifact now
    /// in it, the bundle record and the bundle's size. Nothing is committed.
    pub(crate) async fn write_bundle(
        &self,
        tr: &TableRecord,
        f: &FileEntry,
        indexes: &[IndexRecord],
        fresh: Vec<(IndexFileEntry, Vec<u8>)>,
    ) -> Result<(Vec<IndexFileEntry>, BundleRecord, u64)> {
        let t = self.catalog.begin()?;
        let mut pending: Vec<(IndexFileEntry, Vec<u8>)> = fresh;
        for ix in indexes {
            if pending
                .iter()
                .any(|(e, _)| e.lineage.index_id == ix.index_id)
                || ix.state == IndexState::Poisoned
            {
                continue;
            }
            let old: Option<IndexFileEntry> = t.get(&artifact_key(ix.index_id, f.file_id)).await?;
            // A blob a run holds is not copied (its record stays as it is).
            if let Some(old) = old.filter(|a| !a.in_run && accepted(f, Some(a), tr)) {
                let l = &old.lineage;
                let bytes = self
                    .reader
                    .read_range(&Location::new(&l.bundle_path), l.blob_range())
                    .await?;
                pending.push((old, bytes.to_vec()));
            }
        }
        let generation = t
            .get::<BundleRecord>(&bundle_key(tr.table_id, f.file_id))
            .await?
            .map(|b| b.generation + 1)
            .unwrap_or(1);
        drop(t);
        // Unique to this attempt: a bundle a failed attempt left behind never blocks a retry.
        let bundle_path = format!(
            "bundles/{}/{}-g{}-{}.puffin",
            tr.table_id,
            f.file_id,
            generation,
            attempt_token()
        );
        let fpp = |id: u64| {
            indexes
                .iter()
                .find(|i| i.index_id == id)
                .and_then(|i| i.spec.fpp_ppm())
        };
        let pending = pending
            .into_iter()
            .map(|(e, b)| {
                let p = fpp(e.lineage.index_id);
                (e, b, p)
            })
            .collect();
        let written = self
            .bundle_builder()
            .write_object(tr, f, &bundle_path, pending, false)
            .await?;
        Ok((
            written.artifacts,
            BundleRecord {
                path: bundle_path,
                generation,
            },
            written.size,
        ))
    }

    /// Frees the bytes of the blobs runs now hold (RFC 0004 "the drop", decision 71): the
    /// bundle of each of `file_ids` that still holds a blob marked
    /// [`IndexFileEntry::in_run`] is written again without it — or, when no other blob of it
    /// is live, the file's bundle record is withdrawn — in one commit that skips a file whose
    /// bundle or artifacts another writer changed meanwhile. The old objects stay for the
    /// manifests that name them until [`Overlay::vacuum`]'s grace period; a bundle written
    /// here for a skipped file is left to vacuum too.
    pub(crate) async fn shed_covered(&self, tr: &TableRecord, file_ids: &[u64]) -> Result<()> {
        use futures::{StreamExt, TryStreamExt};
        if file_ids.is_empty() {
            return Ok(());
        }
        let t = self.catalog.begin()?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        // The table's bundles and each index's artifacts in a scan each, not a read per file.
        let (bundles, arts_of) = self.bundles_and_artifacts(&t, tr, &indexes).await?;
        drop(t);
        let wanted: HashSet<u64> = file_ids.iter().copied().collect();
        let mut plans = Vec::new();
        for f in files.iter().filter(|f| wanted.contains(&f.file_id)) {
            let Some(bundle) = bundles.get(&f.file_id) else {
                continue;
            };
            let arts: Vec<IndexFileEntry> = arts_of
                .iter()
                .filter_map(|by_file| by_file.get(&f.file_id))
                .filter(|a| a.lineage.bundle_path == bundle.path)
                .cloned()
                .collect();
            if arts.iter().any(|a| a.in_run) {
                plans.push((f, bundle.clone(), arts));
            }
        }
        // The bundles that keep a live blob are written again, SHED_WRITES at a time (each
        // reads its live blobs and writes one object: sequential, thousands of files took as
        // many round trips to the store one after another).
        let indexes = &indexes;
        // (The futures are made first: a stream mapping through a closure that borrows is
        // not `Send` for every lifetime, which the Node addon's runtime requires.)
        let writes: Vec<_> = plans
            .into_iter()
            .map(|(f, bundle, arts)| async move {
                let live = arts.iter().any(|a| !a.in_run && accepted(f, Some(a), tr));
                let next = if live {
                    Some(self.write_bundle(tr, f, indexes, vec![]).await?)
                } else {
                    None
                };
                Ok::<_, Error>((f, bundle, arts, next))
            })
            .collect();
        let written: Vec<_> = futures::stream::iter(writes)
            .buffered(SHED_WRITES)
            .try_collect()
            .await?;
        let t = self.catalog.begin()?;
        let (bundles, arts_of) = self.bundles_and_artifacts(&t, tr, indexes).await?;
        let mut changed = false;
        'file: for (f, bundle, arts, next) in &written {
            if bundles.get(&f.file_id) != Some(bundle) {
                continue;
            }
            for a in arts {
                let now = indexes
                    .iter()
                    .position(|ix| ix.index_id == a.lineage.index_id)
                    .and_then(|i| arts_of[i].get(&a.file_id));
                if now != Some(a) {
                    continue 'file;
                }
            }
            let key = bundle_key(tr.table_id, f.file_id);
            match next {
                Some((arts, b, _)) => {
                    for x in arts {
                        t.put(&artifact_key(x.lineage.index_id, x.file_id), x)?;
                    }
                    t.put(&key, b)?;
                }
                None => t.delete(&key)?,
            }
            changed = true;
        }
        if changed {
            t.bump_version().await?;
            t.commit().await?;
            self.invalidate();
        }
        Ok(())
    }

    /// The table's bundle records by file, and per index of `indexes` (in order) its
    /// artifacts by file, as `t` sees them.
    #[allow(clippy::type_complexity)]
    async fn bundles_and_artifacts(
        &self,
        t: &Txn<'_>,
        tr: &TableRecord,
        indexes: &[IndexRecord],
    ) -> Result<(
        HashMap<u64, BundleRecord>,
        Vec<HashMap<u64, IndexFileEntry>>,
    )> {
        let bundles = self.catalog.bundles_by_file(t, tr.table_id).await?;
        let mut arts = Vec::with_capacity(indexes.len());
        for ix in indexes {
            arts.push(self.catalog.artifacts_by_file(t, ix.index_id).await?);
        }
        Ok((bundles, arts))
    }

    /// Create-only put of an overlay object (`E_CONFLICT` when it exists: a concurrent
    /// writer took that name).
    pub(crate) async fn put_new(&self, path: &str, bytes: impl Into<PutPayload>) -> Result<()> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        self.store
            .put_opts(&Path::from(path), bytes.into(), opts)
            .await
            .map_err(|e| match e {
                object_store::Error::AlreadyExists { .. } => {
                    Error::Conflict(format!("{path} was written concurrently"))
                }
                e => store_err(e),
            })?;
        Ok(())
    }

    /// Marks `ix` poisoned (a duplicate under a unique index), withdraws its cursor and
    /// certificate, then reclaims its claims and artifacts in bounded batches.
    pub(crate) async fn poison(&self, tr: &TableRecord, ix: &IndexRecord) -> Result<()> {
        self.poison_because(tr, ix, None).await
    }

    /// [`Overlay::poison`] recording why (shown with the index).
    pub(crate) async fn poison_because(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        reason: Option<String>,
    ) -> Result<()> {
        let t = self.catalog.begin()?;
        if let Some(mut rec) = t
            .get::<IndexRecord>(&index_key(tr.table_id, ix.index_id))
            .await?
        {
            rec.state = IndexState::Poisoned;
            rec.reason = reason;
            rec.generation += 1;
            t.put(&index_key(tr.table_id, ix.index_id), &rec)?;
        }
        t.delete(&cursor_key(ix.index_id))?;
        t.delete(&certificate_key(ix.index_id))?;
        t.delete_runs(ix.index_id).await?;
        t.bump_version().await?;
        t.commit().await?;
        self.reclaim_prefix(&claim_prefix(ix.index_id)).await?;
        self.reclaim_prefix(&artifact_prefix(ix.index_id)).await?;
        self.reclaim_prefix(&repair_prefix(ix.index_id)).await?;
        self.invalidate();
        Ok(())
    }

    /// Poisons `ix` for two rows of `f` sharing a key, deletes `garbage` and returns the
    /// [`Error::Constraint`] naming both rows (or the error poisoning failed with).
    pub(crate) async fn poison_duplicate(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        f: &FileEntry,
        (a, b): (u64, u64),
        garbage: &[String],
    ) -> Error {
        self.delete_objects(garbage).await;
        if let Err(e) = self.poison(tr, ix).await {
            return e;
        }
        let row = |p: u64| RowIdentity {
            file_id: f.file_id,
            position: p,
            row_id: f.row_id_at(p).unwrap_or(0),
        };
        Error::Constraint {
            index: format!("{}.{}", tr.name, ix.name),
            existing: unique::row_name(&f.path, row(a)),
            row: unique::row_name(&f.path, row(b)),
        }
    }

    /// Deletes every catalog key under `prefix`, [`RECLAIM_BATCH`] per transaction. Returns
    /// how many it deleted.
    pub(crate) async fn reclaim_prefix(&self, prefix: &str) -> Result<u64> {
        let mut n = 0;
        loop {
            let t = self.catalog.begin()?;
            let batch: Vec<(String, serde_json::Value)> =
                t.scan_limit(prefix, RECLAIM_BATCH).await?;
            if batch.is_empty() {
                return Ok(n);
            }
            for (k, _) in &batch {
                t.delete(k)?;
            }
            t.commit().await?;
            n += batch.len() as u64;
        }
    }

    /// One bounded step of building `index` (see the module docs). The step that covers the
    /// last row flips a `building` index to `ready` (unless files were skipped). Then comes
    /// the **merge phase**: each step takes one step of the index's tier rule — the files no
    /// run covers written as a run, runs merged by size ([`Overlay::merge_step`]), reported
    /// in `merged` — bounded by the rule (it writes at most the runs it merges and the
    /// delta), not by `opts`. A step with nothing left to index or merge commits nothing and
    /// reports `done`.
    pub async fn build_step(
        &self,
        table: &str,
        index: &str,
        opts: StepOptions,
    ) -> Result<StepReport> {
        if opts.max_entries == 0 || opts.max_bytes == 0 {
            return Err(Error::Invalid(
                "a build step needs a positive budget".into(),
            ));
        }
        if opts.max_entries > MAX_COMMIT_ENTRIES {
            return Err(Error::Limit {
                what: "build step entries",
                count: opts.max_entries,
                limit: MAX_COMMIT_ENTRIES,
                remedy: "use a smaller maxEntries",
            });
        }
        if opts.max_bytes > MAX_COMMIT_BYTES {
            return Err(Error::Limit {
                what: "build step bytes",
                count: opts.max_bytes,
                limit: MAX_COMMIT_BYTES,
                remedy: "use a smaller maxBytes",
            });
        }
        // Files queries found wanting go first (`crate::admin::repair`).
        let repaired = self.drain_repairs(table, index).await?;
        // A vector index's codebook before any of its blobs.
        self.ensure_codebooks(table, &[]).await?;
        let _writing = self.writing.read().await;
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, index).await?;
        if ix.state == IndexState::Poisoned {
            return Err(Error::IndexNotReady {
                index: format!("{}.{}", tr.name, ix.name),
                state: ix.state.to_string(),
            });
        }
        let files = self.catalog.files(&t, tr.table_id).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        let mine: HashMap<u64, IndexFileEntry> =
            self.catalog.artifacts_by_file(&t, ix.index_id).await?;
        let cursor0: Option<BuildCursor> = t.get(&cursor_key(ix.index_id)).await?;
        drop(t);

        let mut cur = cursor0.clone().unwrap_or_default();
        cur.skipped
            .retain(|(id, sha)| files.iter().any(|f| f.file_id == *id && f.sha256 == *sha));
        let mut order: Vec<&FileEntry> = files
            .iter()
            .filter(|f| {
                !accepted(f, mine.get(&f.file_id), &tr)
                    && !cur.skipped.iter().any(|(id, _)| *id == f.file_id)
            })
            .collect();
        order.sort_by_key(|f| !repaired.contains(&f.file_id));
        let mut garbage: Vec<String> = Vec::new();
        // The file in progress first; a cursor on a file no longer pending (or changed)
        // starts over and its segments become garbage.
        match order
            .iter()
            .position(|f| f.file_id == cur.file_id && f.sha256 == cur.sha256)
        {
            Some(i) if cur.file_id != 0 => {
                let f = order.remove(i);
                order.insert(0, f);
            }
            _ => {
                garbage.extend(cur.segments.drain(..).map(|s| s.path));
                cur.file_id = 0;
                cur.position = 0;
                cur.sha256.clear();
            }
        }
        let mut report = StepReport {
            index: ix.name.clone(),
            state: ix.state,
            done: false,
            step: cur.steps,
            entries: 0,
            entry_bytes: 0,
            files_completed: vec![],
            bundles_written: 0,
            bytes_written: 0,
            skipped: vec![],
            cursor: None,
            rows_done: 0,
            rows_total: files.iter().map(|f| f.record_count).sum(),
            merged: None,
        };
        let flip_due = ix.state.catching_up() && cur.skipped.is_empty();
        if order.is_empty() && !flip_due && (cursor0.is_none() || cursor0 == Some(cur.clone())) {
            // Every row is indexed: the merge phase, one tier step per call.
            report.step = ix.generation;
            report.rows_done = report.rows_total;
            // A step that could not be taken (an input damaged, another build first) ends
            // the phase: the runs and blobs there answer meanwhile.
            report.done = true;
            if let Some(m) = self.merge_step(&tr, ix.index_id).await? {
                report.bytes_written = m.run_bytes;
                report.merged = Some(m);
                report.done = !self.merge_due(&tr, ix.index_id).await?;
            }
            return Ok(report);
        }

        let (mut left_entries, mut left_bytes) = (opts.max_entries, opts.max_bytes);
        let mut completed: Vec<(&FileEntry, Vec<(Vec<u8>, u64)>)> = Vec::new();
        // Outputs of a recorded move are carried over (RFC 0006), each whole and written into
        // its bundle at once: a carried file takes no share of the step's bounds (no column is
        // read; its commit is one artifact), so one step carries every recorded output and
        // reads the move's sources once. Memory: the sources' blobs and one output's.
        let moves = self.carrier().move_records(tr.table_id).await?;
        let mut carry_blobs = crate::admin::moves::SourceBlobs::default();
        let mut artifacts = Vec::new();
        let mut bundles = Vec::new();
        let mut carried_ids = Vec::new();
        let mut handled = 0usize;
        for f in &order {
            let start = if cur.file_id == f.file_id {
                cur.position
            } else {
                0
            };
            let remaining = f.record_count - start;
            if start == 0 {
                if let Some(rec) = moves.get(&f.file_id) {
                    if let Some(c) = self
                        .carrier()
                        .carry_step(rec, f, &ix, &indexes, &mut carry_blobs)
                        .await?
                    {
                        let blob = match c {
                            crate::admin::carry::Carried::Entries(e) => {
                                if ix.unique {
                                    self.refuse_duplicate(&tr, &ix, f, &e, &garbage).await?;
                                }
                                self.write_artifact(&tr, f, &ix, &e).await?
                            }
                            crate::admin::carry::Carried::Blob(b, meta) => (
                                file_build::artifact_of(tr.snapshot as i64, f, &ix, &b, meta),
                                b,
                            ),
                        };
                        let (arts, bundle, size) =
                            self.write_bundle(&tr, f, &indexes, vec![blob]).await?;
                        self.metrics.record_carried(1);
                        report.bundles_written += 1;
                        report.bytes_written += size;
                        report.files_completed.push(f.path.clone());
                        artifacts.extend(arts);
                        bundles.push((f.file_id, bundle));
                        carried_ids.push(f.file_id);
                        handled += 1;
                        report.entries += remaining;
                        continue;
                    }
                }
            }
            if !completed.is_empty() && remaining > left_entries {
                break; // a file that does not fit starts in a step of its own
            }
            let end = start + remaining.min(left_entries);
            let (keys, end, bytes) = match self
                .index_slice(&tr, f, &ix, start..end, left_bytes)
                .await
            {
                Ok(x) => x,
                Err(e) if is_data_error(&e) => {
                    tracing::warn!(target: "skerry::build", file = %f.path, "not indexed: {e}");
                    report.skipped.push(Skipped {
                        file: f.path.clone(),
                        code: e.code().into(),
                        message: e.to_string(),
                    });
                    cur.skipped.push((f.file_id, f.sha256.clone()));
                    if cur.file_id == f.file_id {
                        garbage.extend(cur.segments.drain(..).map(|s| s.path));
                        cur.file_id = 0;
                        cur.position = 0;
                        cur.sha256.clear();
                    }
                    handled += 1;
                    continue;
                }
                Err(e) if is_value_error(&e) => {
                    // Every later attempt would fail the same way: poisoned with the
                    // reason (a new definition or fixed data builds again).
                    tracing::warn!(target: "skerry::build", file = %f.path, index = %ix.name, "poisoned: {e}");
                    self.delete_objects(&garbage).await;
                    let reason = format!("{}: {e}", f.path);
                    self.poison_because(&tr, &ix, Some(reason)).await?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            if ix.unique && end < f.record_count {
                // A slice's own rows, early (the whole file is checked when it completes).
                self.refuse_duplicate(&tr, &ix, f, &keys, &garbage).await?;
            }
            left_entries -= end - start;
            left_bytes = left_bytes.saturating_sub(bytes);
            report.entries += end - start;
            report.entry_bytes += bytes;
            if end == f.record_count {
                let mut all = keys;
                if cur.file_id == f.file_id {
                    for s in &cur.segments {
                        // Gone: another builder finished this file and removed them.
                        let b =
                            self.reader
                                .read_all(&Location::new(&s.path))
                                .await
                                .map_err(|e| match e {
                                    crate::io::IoError::NotFound { .. } => Error::Conflict(
                                        format!("{} was merged by another build step", s.path),
                                    ),
                                    e => e.into(),
                                })?;
                        ordered::read_entries(&b, |k, p| all.push((k.to_vec(), p)))?;
                    }
                    garbage.extend(cur.segments.drain(..).map(|s| s.path));
                    cur.file_id = 0;
                    cur.position = 0;
                    cur.sha256.clear();
                    all.sort_unstable();
                }
                if ix.unique {
                    // The file's own rows: adjacent equal keys (other files: when it flips).
                    self.refuse_duplicate(&tr, &ix, f, &all, &garbage).await?;
                }
                completed.push((f, all));
                handled += 1;
            } else {
                // A slice: sorted segment now, merged when the file's last row is read.
                let mut bw = OrderedBlobWriter::new(self.block_bytes);
                for (k, p) in &keys {
                    bw.push(k, *p)?;
                }
                // A name no other attempt uses: a step killed after writing its segment
                // and before committing leaves an orphan no later step collides with (the
                // cursor never names it; vacuum deletes it).
                let path = format!(
                    "staging/{}/{}/{}-{}-s{}-{}.seg",
                    tr.table_id,
                    ix.index_id,
                    f.file_id,
                    start,
                    cur.steps + 1,
                    attempt_token()
                );
                self.put_new(&path, bw.finish().bytes).await?;
                if cur.file_id != f.file_id {
                    cur.file_id = f.file_id;
                    cur.sha256 = f.sha256.clone();
                    cur.segments.clear();
                }
                cur.position = end;
                cur.segments.push(Segment { path, start, end });
                report.cursor = Some(CursorInfo {
                    file: f.path.clone(),
                    position: end,
                });
                break;
            }
            if left_entries == 0 || left_bytes == 0 {
                break;
            }
        }
        let done = handled == order.len();

        // New bundle generations for the finished files.
        for (f, entries) in &completed {
            let fresh = self.blob_artifact(&tr, f, &ix, entries).await?;
            let (arts, bundle, size) = self.write_bundle(&tr, f, &indexes, vec![fresh]).await?;
            report.bundles_written += 1;
            report.bytes_written += size;
            report.files_completed.push(f.path.clone());
            artifacts.extend(arts);
            bundles.push((f.file_id, bundle));
        }

        // Commit, unless another builder moved the cursor or the index changed meanwhile.
        let t = self.catalog.begin()?;
        let now: Option<BuildCursor> = t.get(&cursor_key(ix.index_id)).await?;
        let rec: Option<IndexRecord> = t.get(&index_key(tr.table_id, ix.index_id)).await?;
        let Some(mut rec) = rec.filter(|r| r.generation == ix.generation && now == cursor0) else {
            return Err(Error::Conflict(format!(
                "another build step of {}.{} committed first",
                tr.name, ix.name
            )));
        };
        for a in &artifacts {
            t.put(&artifact_key(a.lineage.index_id, a.file_id), a)?;
        }
        for (file_id, b) in &bundles {
            t.put(&bundle_key(tr.table_id, *file_id), b)?;
        }
        cur.steps += 1;
        if done && cur.skipped.is_empty() {
            t.delete(&cursor_key(ix.index_id))?;
        } else {
            t.put(&cursor_key(ix.index_id), &cur)?;
        }
        rec.generation += 1;
        // A unique index flips only after the cross-file check (below, after this commit).
        let finish = done && rec.state.catching_up() && cur.skipped.is_empty();
        if finish && !ix.unique {
            rec.state = IndexState::Ready;
        }
        t.put(&index_key(tr.table_id, ix.index_id), &rec)?;
        t.delete(&certificate_key(ix.index_id))?;
        t.bump_version().await?;
        t.commit().await?;
        self.delete_objects(&garbage).await;
        self.invalidate();

        report.state = rec.state;
        if finish && ix.unique {
            report.state = self.finish_unique(&tr.name, &ix.name).await?;
        }
        if finish && ix.kind().kind().is_some_and(|k| k.input() == Input::Vector) {
            self.poison_mixed_dims(&tr.name).await?;
        }
        report.done = done;
        report.step = rec.generation;
        let done_files: u64 = files
            .iter()
            .filter(|f| {
                accepted(f, mine.get(&f.file_id), &tr)
                    || completed.iter().any(|(c, _)| c.file_id == f.file_id)
                    || carried_ids.contains(&f.file_id)
            })
            .map(|f| f.record_count)
            .sum();
        report.rows_done = done_files + if cur.file_id != 0 { cur.position } else { 0 };
        if done && report.state == IndexState::Ready {
            // The runs follow in steps of their own (the merge phase, above).
            report.done = !self.merge_due(&tr, ix.index_id).await?;
        }
        Ok(report)
    }

    /// [`Overlay::build_step`], retried from the cursor it left while it loses races to
    /// other builders of the same index (`E_CONFLICT`, at most [`STEP_RETRIES`] times in a
    /// row). The one retry loop of a build: hosts that drive steps themselves (the Node
    /// facade, for progress callbacks) call this.
    pub async fn build_step_retrying(
        &self,
        table: &str,
        index: &str,
        opts: StepOptions,
    ) -> Result<StepReport> {
        let mut conflicts = 0;
        loop {
            match self.build_step(table, index, opts).await {
                Err(Error::Conflict(m)) if conflicts < STEP_RETRIES => {
                    conflicts += 1;
                    tracing::debug!(target: "skerry::build", "retrying a step: {m}");
                }
                Err(e @ Error::Cardinality { .. }) => {
                    return Err(self.poison_over_cardinality(table, e).await)
                }
                r => return r,
            }
        }
    }

    /// Builds each unpoisoned index of `table` by steps until one fails on a value it cannot
    /// hold ([`is_value_error`]), which [`Overlay::build_step`] poisons: that error (or
    /// another the steps met), or `None` when every index built.
    async fn poison_by_steps(&self, table: &str) -> Option<Error> {
        let indexes = async {
            let t = self.catalog.begin()?;
            let tr = self.catalog.table(&t, table).await?;
            self.catalog.indexes(&t, tr.table_id).await
        };
        let indexes = match indexes.await {
            Ok(i) => i,
            Err(e) => return Some(e),
        };
        for ix in indexes.iter().filter(|i| i.state != IndexState::Poisoned) {
            if let Err(e) = self
                .build_index(table, &ix.name, StepOptions::default(), |_| {})
                .await
            {
                return Some(e);
            }
        }
        None
    }

    /// Poisons every vector index of `table` whose files hold vectors of different
    /// dimensions (no query vector could be compared with all of them), with the reason.
    /// Returns that reason as `E_INVALID` when an index was poisoned.
    pub(crate) async fn poison_mixed_dims(&self, table: &str) -> Result<()> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        let mut mixed = Vec::new();
        for ix in indexes.iter().filter(|i| {
            i.kind().kind().is_some_and(|k| k.input() == Input::Vector)
                && i.state != IndexState::Poisoned
        }) {
            let mut dims: std::collections::BTreeMap<u32, String> = Default::default();
            for a in self.catalog.artifacts(&t, ix.index_id).await? {
                if let Some(d) = a.ordered.dim {
                    dims.entry(d).or_insert(a.lineage.source_path);
                }
            }
            if dims.len() > 1 {
                let seen: Vec<String> = dims
                    .iter()
                    .take(3)
                    .map(|(d, f)| format!("{d} in {f}"))
                    .collect();
                let reason = format!(
                    "vector index {}.{} holds vectors of different dimensions ({})",
                    tr.name,
                    ix.name,
                    seen.join(", ")
                );
                mixed.push((ix.clone(), reason));
            }
        }
        drop(t);
        let mut first = None;
        for (ix, reason) in mixed {
            tracing::warn!(target: "skerry::build", "poisoned: {reason}");
            self.poison_because(&tr, &ix, Some(reason.clone())).await?;
            first.get_or_insert(reason);
        }
        match first {
            Some(r) => Err(Error::Invalid(r)),
            None => Ok(()),
        }
    }

    /// Poisons the bitmap index a [`Error::Cardinality`] names (its reason is the error's
    /// message: what `indexes()` shows) and returns the error, or the one poisoning met.
    async fn poison_over_cardinality(&self, table: &str, e: Error) -> Error {
        let Error::Cardinality { index, .. } = &e else {
            return e;
        };
        let poisoned = async {
            let t = self.catalog.begin()?;
            let tr = self.catalog.table(&t, table).await?;
            let ix = self.catalog.index(&t, &tr, index).await?;
            drop(t);
            self.poison_because(&tr, &ix, Some(e.to_string())).await
        };
        match poisoned.await {
            Ok(()) => e,
            Err(p) => p,
        }
    }

    /// Builds `index` to the end in steps of `opts`, calling `on_progress` after each step.
    /// A step that lost a race to another builder is retried from the cursor it left.
    pub async fn build_index(
        &self,
        table: &str,
        index: &str,
        opts: StepOptions,
        mut on_progress: impl FnMut(&StepReport),
    ) -> Result<BuildReport> {
        let mut report = BuildReport::default();
        let mut files = std::collections::BTreeSet::new();
        loop {
            let s = self.build_step_retrying(table, index, opts).await?;
            report.entries += s.entries;
            report.bundles_written += s.bundles_written;
            report.bytes_written += s.bytes_written;
            files.extend(s.files_completed.iter().cloned());
            report.skipped.extend(s.skipped.iter().cloned());
            on_progress(&s);
            if s.done {
                report.files_indexed = files.len() as u64;
                return Ok(report);
            }
        }
    }

    /// Builds every missing or stale index blob of `table` and flips built indexes to ready;
    /// poisoned indexes are left alone. `on_progress` sees rows done and total (summed over
    /// the indexes being built) after every commit.
    ///
    /// Files are built for all their pending indexes at once ([`crate::admin::file_build`]):
    /// one read of the indexed columns and ONE new bundle generation per data file, whatever
    /// the number of indexes, `available_parallelism` files at a time, committed in batches
    /// (at most [`MAX_COMMIT_ENTRIES`] unique claims, [`BATCH_FILES`] files). What that pass
    /// leaves — files too large for one piece (more than [`FILE_PASS_ENTRIES`] entries or
    /// [`MAX_COMMIT_BYTES`] of keys), files a staged build is in the middle of, files that
    /// could not be read — goes through [`Overlay::build_index`] per index, which also flips
    /// states and records skipped files.
    pub async fn build(
        &self,
        table: &str,
        mut on_progress: impl FnMut(&Progress),
    ) -> Result<BuildReport> {
        let metrics = self.metrics.clone();
        let on_progress = move |p: &Progress| {
            metrics.build_progress(p.done, p.total);
            on_progress(p)
        };
        // A bitmap index over its cardinality limit is poisoned and the build goes on for
        // the table's other indexes; the error is returned once they are built.
        let mut on_progress = on_progress;
        let mut over: Option<Error> = None;
        let report = loop {
            match self.build_all(table, &mut on_progress).await {
                Err(e @ Error::Cardinality { .. }) => {
                    let e = self.poison_over_cardinality(table, e).await;
                    if !matches!(e, Error::Cardinality { .. }) {
                        break Err(e);
                    }
                    over.get_or_insert(e);
                }
                Err(e) if is_value_error(&e) => {
                    // Which index cannot hold the value: the stepped path finds it and
                    // poisons it; the table's other indexes build on.
                    match self.poison_by_steps(table).await {
                        Some(p) if is_value_error(&p) => {
                            over.get_or_insert(p);
                        }
                        Some(p) => break Err(p),
                        None => break Err(e),
                    }
                }
                Ok(_) if over.is_some() => break Err(over.take().expect("set")),
                r => break r,
            }
        };
        self.metrics.record_build();
        let report = report?;
        self.poison_mixed_dims(table).await?;
        Ok(report)
    }

    async fn build_all(
        &self,
        table: &str,
        mut on_progress: impl FnMut(&Progress),
    ) -> Result<BuildReport> {
        let started = std::time::Instant::now();
        let mut report = BuildReport::default();
        let mut files = std::collections::BTreeSet::new();
        // Outputs of a recorded move go to the per-index steps, which carry their entries
        // over from the move's sources instead of reading their columns (RFC 0006).
        let mut deferred: HashSet<u64> = {
            let t = self.catalog.begin()?;
            let tr = self.catalog.table(&t, table).await?;
            drop(t);
            self.carrier()
                .move_records(tr.table_id)
                .await?
                .into_keys()
                .collect()
        };
        let mut conflicts = 0;
        let mut pass = None;
        loop {
            let plan = match pass.as_mut() {
                Some(p) => p,
                None => pass.insert(self.plan_file_pass(table).await?),
            };
            match self
                .build_files_batch(
                    plan,
                    &mut deferred,
                    &mut report,
                    &mut files,
                    &mut on_progress,
                )
                .await
            {
                Ok(true) => break,
                Ok(false) => conflicts = 0,
                Err(Error::Conflict(m)) if conflicts < STEP_RETRIES => {
                    conflicts += 1;
                    pass = None;
                    tracing::debug!(target: "skerry::build", "retrying a batch: {m}");
                }
                Err(e) => return Err(e),
            }
        }
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        drop(t);
        for ix in indexes.iter().filter(|i| i.state != IndexState::Poisoned) {
            let r = self
                .build_index(table, &ix.name, StepOptions::default(), |s| {
                    files.extend(s.files_completed.iter().cloned());
                    on_progress(&Progress {
                        phase: format!("build {}", ix.name),
                        done: s.rows_done,
                        total: s.rows_total,
                        file: s.cursor.as_ref().map(|c| c.file.clone()),
                    })
                })
                .await?;
            report.entries += r.entries;
            report.bundles_written += r.bundles_written;
            report.bytes_written += r.bytes_written;
            for s in r.skipped {
                if !report.skipped.iter().any(|x| x.file == s.file) {
                    report.skipped.push(s);
                }
            }
        }
        report.files_indexed = files.len() as u64;
        tracing::debug!(target: "skerry::build", "files indexed after {:?}", started.elapsed());
        self.build_runs(&tr).await?;
        tracing::debug!(target: "skerry::build", "runs built after {:?}", started.elapsed());
        Ok(report)
    }

    /// Under unique index `ix`: `Err` — the index poisoned with the reason, `garbage`
    /// deleted — when `entries` of file `f` repeat a key of two live rows.
    async fn refuse_duplicate(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        f: &FileEntry,
        entries: &[(Vec<u8>, u64)],
        garbage: &[String],
    ) -> Result<()> {
        let dup = unique::first_duplicate(
            &ix.key,
            entries.iter().map(|(k, p)| (k.as_slice(), *p)),
            f.deleted()?.as_ref(),
        )?;
        match dup {
            Some((a, b)) => Err(self.poison_duplicate(tr, ix, f, (a, b), garbage).await),
            None => Ok(()),
        }
    }

    /// Best-effort deletes of unreferenced overlay objects (vacuum finds what is left).
    pub(crate) async fn delete_objects(&self, paths: &[String]) -> u64 {
        let mut n = 0;
        for p in paths {
            match self.store.delete(&Path::from(p.as_str())).await {
                Ok(()) => n += 1,
                Err(e) => tracing::debug!(target: "skerry::vacuum", "{p}: {e}"),
            }
        }
        n
    }

    /// Drops the cached read model after a catalog change. (The read cache needs nothing:
    /// its keys name the exact bytes they hold, `crate::read::cache`.)
    pub(crate) fn invalidate(&self) {
        *self.model.lock().expect("model cache") = None;
    }
}

/// A token unique to one build-step attempt on this machine: wall-clock nanoseconds, the
/// process id and a per-process counter.
pub(crate) fn attempt_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{nanos:x}{:x}{:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Overlay {
    /// Trains and records the codebook of every live vector index of `table` that has none
    /// yet ([`crate::admin::codebook`]), from the table's files and `adding` (files a
    /// registration is about to add). An index whose files hold no vector yet stays without
    /// one. Idempotent: a codebook recorded meanwhile by another writer wins (this one's
    /// object stays unreferenced).
    pub(crate) async fn ensure_codebooks(&self, table: &str, adding: &[FileEntry]) -> Result<()> {
        use crate::admin::codebook as cb;
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let untrained: Vec<IndexRecord> = self
            .catalog
            .indexes(&t, tr.table_id)
            .await?
            .into_iter()
            .filter(|ix| {
                cb::is_vector(ix) && ix.codebook.is_none() && ix.state != IndexState::Poisoned
            })
            .collect();
        if untrained.is_empty() {
            return Ok(());
        }
        let mut files = self.catalog.files(&t, tr.table_id).await?;
        drop(t);
        for f in adding {
            if !files.iter().any(|x| x.path == f.path) {
                files.push(f.clone());
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let rows: u64 = files.iter().map(|f| f.record_count).sum();
        if rows == 0 {
            return Ok(());
        }
        let (nlist, per_file) = cb::sample_plan(rows, files.len());
        for ix in untrained {
            let (mut sample, mut dim) = (Vec::new(), None::<usize>);
            for f in &files {
                let n = per_file.min(f.record_count);
                if n == 0 {
                    continue;
                }
                match self.index_slice(&tr, f, &ix, 0..n, u64::MAX).await {
                    Ok((keys, _, _)) => cb::sample_entries(&keys, &mut dim, &mut sample),
                    Err(e) if is_data_error(&e) => continue, // the build reports the file
                    Err(e) => return Err(e),
                }
            }
            let Some(dim) = dim.filter(|d| *d > 0) else {
                continue; // no vector yet
            };
            let metric = ix.spec.vector().unwrap_or_default().metric.metric();
            let trained = cb::train(metric, dim, sample, nlist).await?;
            let c = cb::object_path(tr.table_id, ix.index_id, &trained);
            // Never swept by vacuum (it reclaims `bundles/` and `staging/` only), so it needs
            // no writer's lock between this write and the commit naming it.
            match self.put_new(&c.path, trained.bytes.clone()).await {
                // The same name holds the same bytes (named by their hash).
                Ok(()) | Err(Error::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
            let t = self.catalog.begin()?;
            let Some(mut rec) = t
                .get::<IndexRecord>(&index_key(tr.table_id, ix.index_id))
                .await?
            else {
                continue; // dropped meanwhile
            };
            if rec.codebook.is_some() {
                continue; // another writer trained one first: theirs is the index's
            }
            rec.codebook = Some(c);
            rec.generation += 1;
            t.put(&index_key(tr.table_id, ix.index_id), &rec)?;
            t.bump_version().await?;
            t.commit().await?;
            self.invalidate();
            tracing::debug!(target: "skerry::build", index = %ix.name, nlist, "codebook trained");
        }
        Ok(())
    }

    /// The vector indexes of `indexes` given the codebook their catalog records hold now
    /// (after [`Overlay::ensure_codebooks`] trained them).
    pub(crate) async fn with_codebooks(
        &self,
        table_id: u64,
        indexes: &mut [IndexRecord],
    ) -> Result<()> {
        let t = self.catalog.begin()?;
        for ix in indexes
            .iter_mut()
            .filter(|ix| crate::admin::codebook::is_vector(ix) && ix.codebook.is_none())
        {
            if let Some(r) = t
                .get::<IndexRecord>(&index_key(table_id, ix.index_id))
                .await?
            {
                ix.codebook = r.codebook;
                ix.generation = r.generation;
            }
        }
        Ok(())
    }
}
