//! Table-wide sorted runs (`docs/ordered-index.md`, "Table runs"): per ready index, every
//! covered file's entries in one ordered blob, positions `ordinal << 40 | position`.
//!
//! A run is merged, never sorted in memory: the previous run (for the files it still covers
//! unchanged, their ordinals kept in order) plus the blobs of the files it lacks, streamed
//! through a k-way merge ([`crate::admin::merge`]) into a multipart upload — or, when the
//! inputs' key spans follow one another, their blocks concatenated. Memory is one read chunk
//! per input, the upload parts in flight and the parts later key ranges hold (bounded), whatever
//! the table's size; a registration adds its files' blobs to the next build's merge instead
//! of re-reading every file's blob.
//!
//! A bloom index's run is its striped filter (`docs/bloom-index.md`): every covered file's
//! filter widened to one block count, block b of all files side by side, so one range read
//! prunes them all for a key.

use std::collections::HashMap;
use std::sync::Arc;

use crate::admin::build::MergeReport;
use crate::admin::catalog::*;
use crate::admin::merge::{self, BlobAt, BlobStream, MergeInput};
use crate::admin::overlay::{store_err, Overlay, RUN_MIN_FILES};
use crate::admin::run_bundle::{run_file, run_generation, Input, Sink};
use crate::admin::unique::{has_null, row_name, Indexed, UniqueCheck};
use crate::error::{Error, Result};
use crate::formats::codec::Codec;
use crate::formats::manifest::*;
use crate::formats::puffin::{BlobSpec, PuffinWriter};
use crate::index::kind::RunLayout;
use crate::index::ordered::{self, OrderedBlobWriter};
use crate::io::{Location, RangeReader};
use crate::values::KeySchema;
use object_store::path::Path;
use object_store::PutPayload;
use object_store::{ObjectStoreExt, WriteMultipart};

/// Is `e` damage in a stored blob (a run is then not built; per-file blobs keep answering
/// and their readers reject the damaged one)?
fn is_damage(e: &Error) -> bool {
    matches!(e, Error::Blob(_))
}

/// Most runs a tiered index keeps (RFC 0004): past this, its two newest merge.
pub const MAX_TIERS: usize = 6;
/// A tier merges into the one below it while it holds at least `1 / MERGE_RATIO` of that
/// one's rows (size-tiered, as an LSM tree's compactor). Measured by the tier rule's test
/// (`appends_cost_a_bounded_multiple_of_their_rows`) over 2,000 appends: 4 rewrites each
/// appended row about 10 times over its life and keeps at most 5 runs (2: 7 times, 6 runs;
/// 8: 17 times, 4 runs) — where rewriting every run on every append wrote each row hundreds
/// of times.
pub const MERGE_RATIO: u64 = 4;

/// One step of a tiered index's build: which runs (by index, oldest first) are written
/// again as one, with the files no run covers (the delta) when `delta` is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TierStep {
    /// The runs kept as they are, oldest first (indexes into the current runs).
    pub keep: Vec<usize>,
    /// The runs merged into the new one (indexes into the current runs, oldest first).
    pub merge: Vec<usize>,
    /// Whether the delta's files join the new run.
    pub delta: bool,
}

/// What writes one run: the overlay's store and reader, the writers' sizes and the run
/// bundle's path — an [`Overlay`]'s ([`Overlay::run_writer`]) or a fan-out worker's (a run
/// task's, `admin::run_tasks`), which has no catalog.
pub(crate) struct RunWriter {
    pub store: Arc<dyn object_store::ObjectStore>,
    pub reader: Arc<crate::io::ObjectStoreReader>,
    /// Ordered-index block size.
    pub block_bytes: usize,
    /// Upload part size.
    pub part_bytes: usize,
    /// The run bundle to write (a name no other attempt uses).
    pub path: String,
}

/// The tier rule (RFC 0004, "Runs are tiers"), on rows: `live[i]` the rows of the files run
/// `i` (oldest first) still answers, `delta` the files no run covers and their rows. The
/// delta becomes a run once it holds [`RUN_MIN_FILES`] files or `1 / MERGE_RATIO` of the
/// newest run's rows; then, while the newest run holds at least `1 / MERGE_RATIO` of the
/// rows of the one below it (or there are more than [`MAX_TIERS`]), the two merge. A run
/// that answers no file any more is dropped. `None`: nothing to write.
pub(crate) fn tier_step(live: &[u64], delta: (usize, u64)) -> Option<TierStep> {
    let kept: Vec<usize> = (0..live.len()).filter(|&i| live[i] > 0).collect();
    let dropped = kept.len() != live.len();
    let newest = kept.last().map_or(0, |&i| live[i]);
    let flush = delta.0 > 0
        && (kept.is_empty() && delta.0 >= RUN_MIN_FILES
            || !kept.is_empty()
                && (delta.0 >= RUN_MIN_FILES || delta.1.saturating_mul(MERGE_RATIO) >= newest));
    if !flush {
        return dropped.then(|| TierStep {
            keep: kept,
            merge: vec![],
            delta: false,
        });
    }
    // Sizes of the runs after the flush, newest last; the merged run's inputs.
    let mut sizes: Vec<u64> = kept.iter().map(|&i| live[i]).collect();
    let mut merge: Vec<usize> = Vec::new();
    let mut top = delta.1;
    while let Some(&below) = sizes.last() {
        if top.saturating_mul(MERGE_RATIO) >= below || sizes.len() + 1 > MAX_TIERS {
            sizes.pop();
            top = top.saturating_add(below);
            merge.insert(0, kept[sizes.len()]);
        } else {
            break;
        }
    }
    Some(TierStep {
        keep: kept[..sizes.len()].to_vec(),
        merge,
        delta: true,
    })
}

impl Overlay {
    /// Takes a step of the tier rule ([`tier_step`]) for every ready index whose covered files
    /// changed since its runs were built: the files no run covers written as a run of their
    /// own once there are enough of them (on tables of at least [`RUN_MIN_FILES`] indexed
    /// files), runs merged by size.
    pub(crate) async fn build_runs(&self, tr: &TableRecord) -> Result<()> {
        let (tr, steps) = self.due_tiers(tr, None).await?;
        let mut marked = Vec::new();
        for (ix, runs, step) in steps {
            marked.extend(self.build_tiers(&tr, &ix, runs, step).await?.0);
        }
        // The runs hold those files' entries now: their blobs' bytes go, once per bundle
        // whatever the number of indexes that dropped a blob of it.
        marked.sort_unstable();
        marked.dedup();
        self.shed_covered(&tr, &marked).await
    }

    /// One merge of a staged build (`build_step`'s merge phase): the tier step due for index
    /// `index_id` of `tr`, if any, taken alone — its run written and committed, its covered
    /// files' blobs shed. `None` when none is due (or another build took it first). A step is
    /// bounded by the tier rule, not by a step budget: it writes at most its inputs (the runs
    /// it merges and the delta), and an entry is rewritten a few times over its life
    /// (decision 64).
    pub(crate) async fn merge_step(
        &self,
        tr: &TableRecord,
        index_id: u64,
    ) -> Result<Option<MergeReport>> {
        let (tr, steps) = self.due_tiers(tr, Some(index_id)).await?;
        let Some((ix, runs, step)) = steps.into_iter().next() else {
            return Ok(None);
        };
        let report = MergeReport {
            runs_merged: step.step.merge.len() as u64,
            files: step.inputs.len() as u64,
            rows: step.inputs.iter().map(|(f, _)| f.record_count).sum(),
            run_bytes: 0,
            runs: 0,
        };
        let (mut marked, outcome) = self.build_tiers(&tr, &ix, runs, step).await?;
        let Some((run_bytes, runs)) = outcome else {
            return Ok(None);
        };
        marked.sort_unstable();
        marked.dedup();
        self.shed_covered(&tr, &marked).await?;
        Ok(Some(MergeReport {
            run_bytes,
            runs,
            ..report
        }))
    }

    /// Whether a tier step is due for index `index_id` of `tr` (what [`Overlay::merge_step`]
    /// would take).
    pub(crate) async fn merge_due(&self, tr: &TableRecord, index_id: u64) -> Result<bool> {
        Ok(!self.due_tiers(tr, Some(index_id)).await?.1.is_empty())
    }

    /// The table as it is now and, per ready index with a table run (or `only` that one),
    /// the tier step its covered files call for, with its current runs.
    #[allow(clippy::type_complexity)]
    pub(crate) async fn due_tiers(
        &self,
        tr: &TableRecord,
        only: Option<u64>,
    ) -> Result<(TableRecord, Vec<(IndexRecord, Vec<TableRun>, PlannedTiers)>)> {
        let t = self.catalog.begin()?;
        // The table as it is now: a step's repairs may have moved its snapshot since the
        // caller read it, and against an older snapshot every artifact looks built in the
        // future — covering nothing, every run would look dead (and take its files' records
        // with it, decision 71).
        let tr: TableRecord = t
            .get::<TableRecord>(&table_key(tr.table_id))
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: tr.name.clone(),
            })?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        let mut steps = Vec::new();
        for ix in indexes
            .into_iter()
            .filter(|ix| only.is_none_or(|id| id == ix.index_id))
            // Runs merge ordered blobs, stripe bloom filters, lay vector codes out
            // partition-major, stack bitmaps and concatenate postings.
            .filter(|ix| {
                ix.state == IndexState::Ready && ix.kind().kind().is_some_and(|k| k.run().is_some())
            })
        {
            let by_file: HashMap<u64, IndexFileEntry> =
                self.catalog.artifacts_by_file(&t, ix.index_id).await?;
            let runs: Vec<TableRun> = t.runs(ix.index_id).await?;
            // The run covers the files whose artifact the gate accepts now.
            let covered: Vec<(FileEntry, IndexFileEntry)> = files
                .iter()
                .filter(|f| accepted(f, by_file.get(&f.file_id), &tr))
                .map(|f| (f.clone(), by_file[&f.file_id].clone()))
                .collect();
            if let Some(step) = plan_tiers(&runs, &covered) {
                steps.push((ix, runs, step));
            }
        }
        Ok((tr, steps))
    }

    /// Takes one step of a tiered index's runs: writes the merged runs and the delta
    /// (`step.inputs`) as one new run, and commits the kept runs and it — unless another
    /// build changed the index's runs meanwhile (its step stands; this run's bundle is left
    /// to vacuum).
    async fn build_tiers(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        runs: Vec<TableRun>,
        step: PlannedTiers,
    ) -> Result<(Vec<u64>, Option<(u64, u64)>)> {
        let mut next: Vec<TableRun> = step.step.keep.iter().map(|&i| runs[i].clone()).collect();
        if !step.inputs.is_empty() {
            let previous: Vec<&TableRun> = step.step.merge.iter().map(|&i| &runs[i]).collect();
            let w = self.run_writer(self.run_bundle_path(tr, ix).await?);
            let run = w.write_tier(tr, ix, &step.inputs, &previous).await?;
            let Some(run) = run else {
                // cannot be made: the runs stay, their files' blobs serve
                return Ok((vec![], None));
            };
            next.push(run);
        }
        let t = self.catalog.begin()?;
        let now = t.runs(ix.index_id).await?;
        let paths =
            |rs: &[TableRun]| -> Vec<String> { rs.iter().map(|r| r.bundle_path.clone()).collect() };
        if paths(&now) != paths(&runs) {
            return Ok((vec![], None));
        }
        let marked = t.put_runs(ix.index_id, &next).await?;
        t.bump_version().await?;
        t.commit().await?;
        let written = if step.inputs.is_empty() {
            0
        } else {
            next.last().map_or(0, |r| r.blob_length)
        };
        Ok((marked, Some((written, next.len() as u64))))
    }
}

impl RunWriter {
    /// Writes the run of `covered` (merging the runs `previous`, oldest first, where they
    /// still hold: a file by the first of them that covers it unchanged) and returns its
    /// record, uncommitted; `None` when the run cannot be made (beyond its position encoding,
    /// or an input is damaged: per-file blobs serve the index). With `check` (a unique index
    /// about to become ready), two live rows of different files sharing a non-NULL key fail
    /// [`Error::Constraint`] — found in the same pass, since equal keys meet in the merge.
    pub(crate) async fn write_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
        check: Option<UniqueCheck>,
    ) -> Result<Option<TableRun>> {
        if covered.len() as u64 >= 1 << (64 - RUN_POSITION_BITS)
            || covered
                .iter()
                .any(|(f, _)| f.record_count >= 1 << RUN_POSITION_BITS)
        {
            return Ok(None); // beyond the run's position encoding: per-file blobs serve it
        }
        let (order, remaps) = merge_order(covered, previous);
        let mask = (1u64 << RUN_POSITION_BITS) - 1;
        let mut specs: Vec<RunInput> = Vec::new();
        for (prev, remap) in previous.iter().zip(remaps) {
            if remap.iter().all(Option::is_none) {
                continue;
            }
            specs.push(RunInput {
                path: prev.bundle_path.clone(),
                offset: prev.blob_offset,
                meta: prev.ordered.clone(),
                keeps_all: remap.iter().all(Option::is_some),
                map: Arc::new(move |p| {
                    let old = (p >> RUN_POSITION_BITS) as usize;
                    remap
                        .get(old)
                        .copied()
                        .flatten()
                        .map(|new| new << RUN_POSITION_BITS | (p & mask))
                }),
            });
        }
        let from_previous = covered.len() - order.iter().filter(|o| o.1).count();
        let order: Vec<usize> = order.into_iter().map(|o| o.0).collect();
        // The inputs: where each blob is and how its positions become run positions.
        for (ordinal, &i) in order.iter().enumerate().skip(from_previous) {
            let l = &covered[i].1.lineage;
            let tag = (ordinal as u64) << RUN_POSITION_BITS;
            specs.push(RunInput {
                path: l.bundle_path.clone(),
                offset: l.blob_offset,
                meta: covered[i].1.ordered.clone(),
                keeps_all: true,
                map: Arc::new(move |p| Some(tag | p)),
            });
        }
        let started = std::time::Instant::now();
        let partitions = match self.open_partitions(&specs).await {
            Ok(p) => p,
            Err(e) if is_damage(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        // The check sees run positions: members by ordinal.
        let check = check.map(|c| {
            Arc::new(RunCheck {
                key: c.key,
                index: c.index,
                members: order.iter().map(|&i| c.members[i].clone()).collect(),
            })
        });

        let (bundle_path, mut sink, blob_offset) = self.start_run_upload(tr).await?;
        // Every partition merges on a task of its own (both cores) and hands its closed
        // blocks over a part at a time; this task uploads them in key order — the first
        // partition's as they come, a later one's (up to its share of [`HELD_PARTS`] held
        // meanwhile) once those before it are out — then appends each partition's directory to the first's.
        let block_bytes = self.block_bytes;
        let held = (HELD_PARTS / partitions.len().saturating_sub(1).max(1)).max(1);
        let part_bytes = self.part_bytes as u64;
        let tasks: Vec<_> = partitions
            .into_iter()
            .map(|inputs| {
                let (tx, rx) = tokio::sync::mpsc::channel(held);
                let task = tokio::spawn(merge_partition(
                    inputs,
                    OrderedBlobWriter::new(block_bytes),
                    tx,
                    check.clone(),
                    part_bytes,
                ));
                (rx, task)
            })
            .collect();
        let written: Result<OrderedBlobWriter> = async {
            let mut w: Option<OrderedBlobWriter> = None;
            for (mut rx, task) in tasks {
                while let Some(part) = rx.recv().await {
                    sink.put(part).await?;
                }
                let done = match task.await {
                    Ok(r) => r?,
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                };
                let rest = match w.as_mut() {
                    None => w.insert(done).take_all(),
                    Some(w) => w.append_streamed(done)?,
                };
                sink.put(rest).await?;
            }
            Ok(w.unwrap_or_else(|| OrderedBlobWriter::new(block_bytes)))
        }
        .await;
        let Sink { mut pw, upload, .. } = sink;
        let w = match written {
            Ok(w) => w,
            Err(e) => {
                let _ = upload.abort().await;
                return if is_damage(&e) { Ok(None) } else { Err(e) };
            }
        };
        let blob = w.finish();
        pw.write_raw(&blob.bytes);
        let blob_length = pw.position() - blob_offset;
        // The directory sits in the blob's last bytes (those not streamed yet).
        let directory = {
            let streamed = blob_length - blob.bytes.len() as u64;
            let dir = &blob.directory;
            (dir.end - dir.start <= INLINE_DIRECTORY_MAX && dir.start >= streamed).then(|| {
                hex::encode(
                    &blob.bytes[(dir.start - streamed) as usize..(dir.end - streamed) as usize],
                )
            })
        };
        finish_run_upload(
            pw,
            upload,
            tr,
            ix,
            ordered::BLOB_TYPE,
            blob_offset..blob_length,
        )
        .await?;
        let files = order
            .iter()
            .map(|&i| run_file(&covered[i].0, &covered[i].1))
            .collect();
        let run = TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                text: None,
                directory_offset: blob.directory.start,
                directory_length: blob.directory.end - blob.directory.start,
                directory_sha256: blob.directory_sha256,
                entries: blob.entries,
                values: None,
                blocks: None,
                min_key: blob.min_key.as_ref().map(hex::encode),
                max_key: blob.max_key.as_ref().map(hex::encode),
                dim: None,
            },
            files,
            directory,
        };
        tracing::debug!(
            target: "skerry::build",
            "run of {}.{}: {} entries in {:?}", tr.name, ix.name, run.ordered.entries, started.elapsed()
        );
        Ok(Some(run))
    }
}

impl RunWriter {
    /// Writes the table run of vector index `ix` over `covered`, merging the runs `previous`
    /// (oldest first: a file by the first of them that covers it unchanged, its entries read
    /// from that run, not from its blob; ordinals as [`merge_order`] gives them,
    /// `admin::vector_run`) and returns its record, uncommitted. `None` when no run can be
    /// made: no codebook, no vector, an input of another codebook or width, or damage in an
    /// input (the runs and blobs there serve the index meanwhile; their readers reject the
    /// damaged one).
    async fn write_vector_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
    ) -> Result<Option<TableRun>> {
        use crate::admin::vector_run;
        use crate::index::vector::ivf;
        let Some(book) = ix
            .codebook
            .as_ref()
            .and_then(|c| hex::decode(&c.sha256).ok())
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
        else {
            return Ok(None);
        };
        let started = std::time::Instant::now();
        if covered.len() >= u32::MAX as usize {
            return Ok(None);
        }
        if covered
            .iter()
            .any(|(_, a)| a.lineage.blob_type != ivf::BLOB_TYPE)
        {
            return Ok(None); // a blob of another layout: per-file blobs serve the index
        }
        let (order, inputs) = tier_inputs(covered, previous);
        let Some(plan) = vector_run::plan(&self.reader, &inputs, book).await? else {
            return Ok(None);
        };
        let (bundle_path, mut sink, blob_offset) = self.start_run_upload(tr).await?;
        let written = vector_run::write(&self.reader, &inputs, &plan, &mut sink).await;
        let Some((tail, blob_length)) = end_run_upload(
            sink,
            written,
            |t| &t.bytes,
            (tr, ix, ivf::BLOB_TYPE, blob_offset),
        )
        .await?
        else {
            return Ok(None);
        };
        let run = TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                text: None,
                directory_offset: tail.directory.start,
                directory_length: tail.directory.end - tail.directory.start,
                directory_sha256: tail.directory_sha256,
                entries: tail.entries,
                values: None,
                blocks: None,
                min_key: None,
                max_key: None,
                dim: Some(plan.codes.dim as u32),
            },
            files: order
                .iter()
                .map(|&(i, _)| run_file(&covered[i].0, &covered[i].1))
                .collect(),
            directory: None,
        };
        tracing::debug!(
            target: "skerry::build",
            "vector run of {}.{}: {} entries of {} files in {:?}",
            tr.name, ix.name, run.ordered.entries, covered.len(), started.elapsed()
        );
        Ok(Some(run))
    }
}

impl RunWriter {
    /// Writes the value-by-value run of `covered`'s bitmap blobs (`admin::bitmap_run`) and
    /// returns its record, uncommitted; `None` when a blob is damaged (per-file blobs serve
    /// the index meanwhile).
    async fn write_bitmap_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
    ) -> Result<Option<TableRun>> {
        use crate::admin::bitmap_run;
        use crate::index::bitmap::run::BLOB_TYPE;
        if covered
            .iter()
            .any(|(_, a)| a.lineage.blob_type != crate::index::bitmap::BLOB_TYPE)
        {
            return Ok(None); // a blob of another kind: per-file blobs serve the index
        }
        let (order, inputs) = tier_inputs(covered, previous);
        let Some(plan) = bitmap_run::plan(&self.reader, &inputs).await? else {
            return Ok(None);
        };
        let (bundle_path, mut sink, blob_offset) = self.start_run_upload(tr).await?;
        let written = bitmap_run::write(&self.reader, &inputs, &plan, &mut sink).await;
        let Some((tail, blob_length)) = end_run_upload(
            sink,
            written,
            |t| &t.bytes,
            (tr, ix, BLOB_TYPE, blob_offset),
        )
        .await?
        else {
            return Ok(None);
        };
        Ok(Some(TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                values: Some(tail.values),
                ..OrderedMeta::new(tail.directory, &tail.directory_sha256, tail.positions)
            }
            .with_keys(&tail.min_key, &tail.max_key),
            files: order
                .iter()
                .map(|&(i, _)| run_file(&covered[i].0, &covered[i].1))
                .collect(),
            directory: None,
        }))
    }

    /// Merges `covered`'s full-text blobs into one run over their rows end to end
    /// (`admin::fulltext_run`, `docs/fulltext-index.md`).
    async fn write_fulltext_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
    ) -> Result<Option<TableRun>> {
        use crate::admin::fulltext_run;
        use crate::index::fulltext::BLOB_TYPE;
        let Some(spec) = ix.spec.fulltext() else {
            return Ok(None);
        };
        if covered
            .iter()
            .any(|(_, a)| a.lineage.blob_type != BLOB_TYPE)
        {
            return Ok(None); // a blob of another kind: per-file blobs serve the index
        }
        let (order, inputs) = tier_inputs(covered, previous);
        let covered: Vec<(FileEntry, IndexFileEntry)> =
            order.iter().map(|&(i, _)| covered[i].clone()).collect();
        let covered = &covered[..];
        let (bundle_path, mut sink, blob_offset) = self.start_run_upload(tr).await?;
        let written = fulltext_run::write(&self.reader, &spec, &inputs, covered, &mut sink).await;
        let Some((tail, blob_length)) = end_run_upload(
            sink,
            written,
            |t| &t.bytes,
            (tr, ix, BLOB_TYPE, blob_offset),
        )
        .await?
        else {
            return Ok(None);
        };
        // A small directory rides in the manifest, so a cold search skips its read.
        let directory = {
            let streamed = blob_length - tail.bytes.len() as u64;
            let dir = &tail.directory;
            (dir.end - dir.start <= crate::index::fulltext::run::INLINE_DIRECTORY_MAX
                && dir.start >= streamed)
                .then(|| {
                    hex::encode(
                        &tail.bytes[(dir.start - streamed) as usize..(dir.end - streamed) as usize],
                    )
                })
        };
        Ok(Some(TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                text: Some(TextStats {
                    docs: tail.docs,
                    tokens: tail.tokens,
                    terms: tail.terms,
                }),
                ..OrderedMeta::new(tail.directory, &tail.directory_sha256, tail.postings)
            }
            .with_keys(&tail.min_term, &tail.max_term),
            // Each file's statistics (checked equal to its blob's directory by the merge).
            files: covered
                .iter()
                .map(|(f, a)| RunFile {
                    text: a.ordered.text,
                    ..run_file(f, a)
                })
                .collect(),
            directory,
        }))
    }

    /// Writes the striped filter of `covered`'s bloom blobs (`docs/bloom-index.md`): one
    /// Puffin bundle holding one `skerry-bloom-stripes-v1` blob, files in `covered` order.
    /// `None` when a blob is damaged (per-file filters serve the index meanwhile).
    async fn write_bloom_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
    ) -> Result<Option<TableRun>> {
        use crate::index::bloom;
        if covered
            .iter()
            .any(|(_, a)| a.lineage.blob_type != bloom::BLOB_TYPE)
        {
            return Ok(None); // a blob of another kind: per-file blobs serve the index
        }
        // Every file's filter, by new ordinal: a merged run's files' from its stripes (as
        // widened there: widening again gives what widening the file's own gives), the
        // others' from their blobs.
        let (order, inputs) = tier_inputs(covered, previous);
        let mut bitsets: Vec<Vec<u8>> = Vec::with_capacity(order.len());
        for input in &inputs {
            let b = self
                .reader
                .read_range(
                    &Location::new(&input.bundle_path),
                    input.blob_offset..input.blob_offset.saturating_add(input.length),
                )
                .await?;
            let got = if input.run {
                bloom::unstripe(&b, &input.meta.directory_sha256, &input.map)
            } else {
                let i = order[input.map[0].unwrap_or(0) as usize].0;
                if crate::formats::lineage::sha256_hex(&b) != covered[i].1.lineage.blob_sha256 {
                    return Ok(None);
                }
                bloom::bitset(&b).map(|bits| vec![bits.to_vec()])
            };
            match got {
                Ok(got) => bitsets.extend(got),
                Err(_) => return Ok(None),
            }
        }
        if bitsets.len() != order.len() {
            return Ok(None);
        }
        let bitsets: Vec<&[u8]> = bitsets.iter().map(Vec::as_slice).collect();
        let covered: Vec<(FileEntry, IndexFileEntry)> =
            order.iter().map(|&(i, _)| covered[i].clone()).collect();
        let covered = &covered[..];
        let stripes = match bloom::write_stripes(&bitsets) {
            Ok(s) => s,
            Err(_) => return Ok(None),
        };
        let blocks = bitsets
            .iter()
            .map(|b| (b.len() / bloom::BLOCK) as u64)
            .max()
            .unwrap_or(1);
        let bundle_path = self.path.clone();
        let mut pw = PuffinWriter::new();
        pw.set_property("skerry.table", tr.name.clone());
        let blob_offset = pw.position();
        let blob_length = stripes.len() as u64;
        let trailer = blob_length - bloom::STRIPES_TRAILER_LEN..blob_length;
        let trailer_sha = crate::formats::lineage::sha256_hex(
            &stripes[trailer.start as usize..trailer.end as usize],
        );
        let mut props = std::collections::BTreeMap::new();
        props.insert("skerry.index-id".to_string(), ix.index_id.to_string());
        props.insert("skerry.run".to_string(), "true".to_string());
        props.insert("skerry.files".to_string(), covered.len().to_string());
        props.insert("skerry.blocks".to_string(), blocks.to_string());
        let snapshot = tr.snapshot as i64;
        let mut chunks: Vec<bytes::Bytes> = vec![pw.take_and_skip(blob_length).into()];
        chunks.push(stripes.into());
        pw.record_blob(
            BlobSpec {
                blob_type: bloom::STRIPES_BLOB_TYPE.into(),
                fields: ix.fields.clone(),
                snapshot_id: snapshot,
                sequence_number: snapshot,
                properties: props,
            },
            blob_offset,
            blob_length,
            Codec::None,
        );
        chunks.push(pw.finish().bytes);
        // A name no other attempt uses; a retried fan-out task writes the same bytes again.
        self.store
            .put(
                &Path::from(bundle_path.as_str()),
                PutPayload::from_iter(chunks),
            )
            .await
            .map_err(store_err)?;
        let unhex = |h: &Option<String>| h.as_deref().and_then(|h| hex::decode(h).ok());
        let min_key = covered
            .iter()
            .filter_map(|(_, a)| unhex(&a.ordered.min_key))
            .min();
        let max_key = covered
            .iter()
            .filter_map(|(_, a)| unhex(&a.ordered.max_key))
            .max();
        let files = covered.iter().map(|(f, a)| run_file(f, a)).collect();
        Ok(Some(TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                text: None,
                directory_offset: trailer.start,
                directory_length: trailer.end - trailer.start,
                directory_sha256: trailer_sha,
                entries: covered.len() as u64,
                values: None,
                blocks: Some(blocks),
                min_key: min_key.map(hex::encode),
                max_key: max_key.map(hex::encode),
                dim: None,
            },
            files,
            directory: None,
        }))
    }
}

impl Overlay {
    /// A new run bundle's path: the next generation of the index's run, and a token no other
    /// attempt uses (concurrent builders of one run never collide).
    pub(crate) async fn run_bundle_path(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
    ) -> Result<String> {
        let t = self.catalog.begin()?;
        let runs = t.runs(ix.index_id).await?;
        drop(t);
        Ok(run_bundle_name(
            tr,
            ix,
            &runs,
            &crate::admin::build::attempt_token(),
        ))
    }
}

/// The name of index `ix`'s next run bundle after `runs` (its current ones): the next
/// generation, and `token` (an attempt's or a plan's), so no two writers share it.
pub(crate) fn run_bundle_name(
    tr: &TableRecord,
    ix: &IndexRecord,
    runs: &[TableRun],
    token: &str,
) -> String {
    let generation = runs
        .iter()
        .map(|r| run_generation(&r.bundle_path) + 1)
        .max()
        .unwrap_or(1);
    format!(
        "bundles/{}/run-{}-g{generation}-{token}.puffin",
        tr.table_id, ix.index_id
    )
}

impl Overlay {
    /// A [`RunWriter`] of this overlay's stores writing the run bundle `path`.
    pub(crate) fn run_writer(&self, path: String) -> RunWriter {
        RunWriter {
            store: self.store.clone(),
            reader: self.reader.clone(),
            block_bytes: self.block_bytes,
            part_bytes: self.run_part_bytes,
            path,
        }
    }
}

impl RunWriter {
    /// Writes the run of `inputs` (the files a tier step's new run covers, merging the runs
    /// `previous`, oldest first) in the layout of `ix`'s kind and returns its record,
    /// uncommitted; `None` when it cannot be made (the runs and blobs there serve meanwhile).
    pub(crate) async fn write_tier(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        inputs: &[(FileEntry, IndexFileEntry)],
        previous: &[&TableRun],
    ) -> Result<Option<TableRun>> {
        match ix.kind().kind().and_then(|k| k.run()) {
            Some(RunLayout::Partitioned) => self.write_vector_run(tr, ix, inputs, previous).await,
            Some(RunLayout::Merged) => self.write_run(tr, ix, inputs, previous, None).await,
            Some(RunLayout::Striped) => self.write_bloom_run(tr, ix, inputs, previous).await,
            Some(RunLayout::Stacked) => self.write_bitmap_run(tr, ix, inputs, previous).await,
            Some(RunLayout::Concatenated) => {
                self.write_fulltext_run(tr, ix, inputs, previous).await
            }
            None => Ok(None),
        }
    }

    /// The run bundle [`RunWriter::path`] as a multipart upload: its path, the sink (a Puffin
    /// writer at the blob's start) and the blob's offset.
    pub(crate) async fn start_run_upload(&self, tr: &TableRecord) -> Result<(String, Sink, u64)> {
        let bundle_path = self.path.clone();
        let path = Path::from(bundle_path.as_str());
        let upload = WriteMultipart::new_with_chunk_size(
            self.store.put_multipart(&path).await.map_err(store_err)?,
            self.part_bytes,
        );
        let mut pw = PuffinWriter::new();
        pw.set_property("skerry.table", tr.name.clone());
        let blob_offset = pw.position();
        Ok((bundle_path, Sink { pw, upload }, blob_offset))
    }
}

/// Ends a run streamed into `sink` by its writer's result `written`: with a tail (the blob's
/// directory and trailer, `bytes` of it), writes it and the Puffin footer recording the blob
/// (`blob_type` at `blob_offset`) and finishes the upload — the tail and the blob's length;
/// without one (an input did not check out) or on an error, aborts the upload.
async fn end_run_upload<T>(
    sink: Sink,
    written: Result<Option<T>>,
    bytes: impl Fn(&T) -> &[u8],
    (tr, ix, blob_type, blob_offset): (&TableRecord, &IndexRecord, &str, u64),
) -> Result<Option<(T, u64)>> {
    let Sink { mut pw, upload } = sink;
    let tail = match written {
        Ok(Some(t)) => t,
        Ok(None) => {
            let _ = upload.abort().await;
            return Ok(None);
        }
        Err(e) => {
            let _ = upload.abort().await;
            return Err(e);
        }
    };
    pw.write_raw(bytes(&tail));
    let blob_length = pw.position() - blob_offset;
    finish_run_upload(pw, upload, tr, ix, blob_type, blob_offset..blob_length).await?;
    Ok(Some((tail, blob_length)))
}

/// Records a run's one blob (`blob_type`, at `at.start`, `at.end` bytes long) in the Puffin
/// footer and finishes the upload with the footer.
async fn finish_run_upload(
    mut pw: PuffinWriter,
    mut upload: WriteMultipart,
    tr: &TableRecord,
    ix: &IndexRecord,
    blob_type: &str,
    at: std::ops::Range<u64>,
) -> Result<()> {
    let mut props = std::collections::BTreeMap::new();
    props.insert("skerry.index-id".to_string(), ix.index_id.to_string());
    props.insert("skerry.run".to_string(), "true".to_string());
    let snapshot = tr.snapshot as i64;
    pw.record_blob(
        BlobSpec {
            blob_type: blob_type.into(),
            fields: ix.fields.clone(),
            snapshot_id: snapshot,
            sequence_number: snapshot,
            properties: props,
        },
        at.start,
        at.end,
        Codec::None,
    );
    upload.put(pw.finish().bytes.into());
    upload.finish().await.map_err(store_err)?;
    Ok(())
}

/// [`UniqueCheck`] by run ordinal, shared by the partitions.
struct RunCheck {
    members: Vec<Indexed>,
    key: KeySchema,
    index: String,
}

impl RunCheck {
    /// The member and row position of a run position.
    fn at(&self, run_position: u64) -> Option<(&Indexed, u64)> {
        let m = self
            .members
            .get((run_position >> RUN_POSITION_BITS) as usize)?;
        Some((m, run_position & ((1 << RUN_POSITION_BITS) - 1)))
    }

    fn live(&self, run_position: u64) -> bool {
        self.at(run_position).is_some_and(|(m, p)| m.live(p))
    }

    fn constraint(&self, a: u64, b: u64) -> Error {
        let name = |q: u64| {
            self.at(q).map_or_else(
                || "?".to_string(),
                |(m, p)| row_name(&m.file.path, m.row(p)),
            )
        };
        Error::Constraint {
            index: self.index.clone(),
            existing: name(a),
            row: name(b),
        }
    }
}

/// How an input's stored positions become run positions (`None`: left out).
type PositionMap = Arc<dyn Fn(u64) -> Option<u64> + Send + Sync>;

/// One blob a run is made from: where it is, the manifest's facts about it, how its positions
/// become run positions, and whether that map keeps every entry.
struct RunInput {
    path: String,
    offset: u64,
    meta: OrderedMeta,
    map: PositionMap,
    keeps_all: bool,
}

/// A blob whose blocks are copied into a run whole, in order ([`Partition::Concat`]).
struct ConcatInput {
    reader: Arc<crate::io::ObjectStoreReader>,
    loc: crate::io::Location,
    blob_offset: u64,
    dir: ordered::OrderedDirectory,
    map: PositionMap,
}

/// A key range of a run, written by one task.
enum Partition {
    /// Inputs whose keys interleave: a k-way merge.
    Merge(Vec<MergeInput>),
    /// Inputs with key spans of their own, in key order (ids or timestamps written in
    /// order): their blocks are copied with positions mapped, entries never compared.
    Concat(Vec<ConcatInput>),
}

/// Inputs with fewer entries in all merge on one task.
const PARALLEL_MIN_ENTRIES: u64 = 200_000;
/// Parts the partitions after the first may hold, in all, while the ones before them are
/// written (memory: this many parts of
/// [`crate::admin::overlay::RUN_PART_BYTES`]); a partition that has filled its share waits.
/// Large runs then merge in parallel as far as this allows, any size within the same memory.
const HELD_PARTS: usize = 16;

/// Writes partition `part` into `w`, sending its closed blocks to `parts` a part's worth at
/// a time; returns the writer (what it holds is the partition's last bytes).
async fn merge_partition(
    part: Partition,
    mut w: OrderedBlobWriter,
    parts: tokio::sync::mpsc::Sender<Vec<u8>>,
    check: Option<Arc<RunCheck>>,
    part_bytes: u64,
) -> Result<OrderedBlobWriter> {
    let mut sent = 0u64;
    // Hands a part over once one is closed, waiting while this partition's share is held;
    // `false` when the receiver gave up (its run failed): the partition stops.
    let mut send = async |w: &mut OrderedBlobWriter| {
        if w.len() - sent >= part_bytes {
            let closed = w.take_closed();
            sent += closed.len() as u64;
            return parts.send(closed).await.is_ok();
        }
        true
    };
    match part {
        Partition::Merge(inputs) => {
            let mut m = merge::Merge::new(inputs);
            // Under a check: the last live entry's key and run position.
            let mut last: Option<(Vec<u8>, u64)> = None;
            while m.next().await? {
                let (k, p) = (m.key(), m.position());
                if let Some(c) = check.as_deref().filter(|c| c.live(p)) {
                    match &mut last {
                        Some((lk, lp)) => {
                            // Equal keys of one file were checked when its blob was built.
                            if lk.as_slice() == k
                                && *lp >> RUN_POSITION_BITS != p >> RUN_POSITION_BITS
                                && !has_null(&c.key, k)?
                            {
                                return Err(c.constraint(*lp, p));
                            }
                            lk.clear();
                            lk.extend_from_slice(k);
                            *lp = p;
                        }
                        None => last = Some((k.to_vec(), p)),
                    }
                }
                w.push(k, p)?;
                if !send(&mut w).await {
                    return Ok(w);
                }
            }
        }
        // Key spans of their own: no key is shared across files, nothing to check.
        Partition::Concat(inputs) => {
            for input in inputs {
                let blocks = &input.dir.blocks;
                let mut first = 0;
                while first < blocks.len() {
                    // Whole blocks, up to a chunk at a time.
                    let (end, start, stop) = merge::chunk_of(blocks, first, merge::CHUNK_BYTES);
                    let o = input.blob_offset;
                    let raw = input
                        .reader
                        .read_range(&input.loc, o.saturating_add(start)..o.saturating_add(stop))
                        .await?;
                    for b in &blocks[first..end] {
                        let block = (b.offset - start)
                            .try_into()
                            .ok()
                            .and_then(|s: usize| raw.get(s..s.checked_add(b.length as usize)?))
                            .ok_or(ordered::BlobError::Corrupt("block range"))?;
                        w.push_block_mapped(block, b, |p| (input.map)(p))?;
                        if !send(&mut w).await {
                            return Ok(w);
                        }
                    }
                    first = end;
                }
            }
        }
    }
    Ok(w)
}

impl RunWriter {
    /// Opens the inputs of a run merge, split into key ranges of about equal entries, one
    /// per core (one range for small runs). Directories are read [`merge::DIRECTORY_READS`] at a time, once.
    async fn open_partitions(&self, specs: &[RunInput]) -> Result<Vec<Partition>> {
        let ats: Vec<BlobAt<'_>> = specs
            .iter()
            .map(|s| BlobAt {
                bundle_path: &s.path,
                blob_offset: s.offset,
                ordered: &s.meta,
            })
            .collect();
        let dirs = merge::read_directories(&self.reader, &ats).await?;
        let entries: u64 = specs.iter().map(|s| s.meta.entries).sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let parallel = cores > 1 && entries >= PARALLEL_MIN_ENTRIES;
        if let Some(order) = concat_order(specs, &dirs) {
            // Consecutive inputs, split into `cores` groups of about equal entries.
            let groups = if parallel { cores as u64 } else { 1 };
            let per = entries.div_ceil(groups).max(1);
            let mut out: Vec<Vec<ConcatInput>> = vec![Vec::new()];
            let mut acc = 0u64;
            for i in order {
                if acc >= per * out.len() as u64 && !out.last().is_some_and(Vec::is_empty) {
                    out.push(Vec::new());
                }
                acc += specs[i].meta.entries;
                let (loc, dir) = &dirs[i];
                out.last_mut().expect("a group").push(ConcatInput {
                    reader: self.reader.clone(),
                    loc: loc.clone(),
                    blob_offset: specs[i].offset,
                    dir: dir.clone(),
                    map: specs[i].map.clone(),
                });
            }
            return Ok(out.into_iter().map(Partition::Concat).collect());
        }
        let splits = if parallel {
            merge::split_keys(dirs.iter().map(|(_, d)| d), entries, cores)
        } else {
            Vec::new()
        };
        let n = splits.len() + 1;
        let chunk = merge::chunk_for(specs.len() * n);
        let mut out = Vec::with_capacity(n);
        for part in 0..n {
            let lo = part.checked_sub(1).map(|i| splits[i].clone());
            let hi = splits.get(part).cloned();
            let mut inputs = Vec::with_capacity(specs.len());
            for (spec, (loc, dir)) in specs.iter().zip(&dirs) {
                let map = spec.map.clone();
                inputs.push(MergeInput {
                    stream: BlobStream::open_range(
                        self.reader.clone(),
                        loc.clone(),
                        spec.offset,
                        dir.clone(),
                        chunk,
                        lo.clone(),
                        hi.clone(),
                    )
                    .await?,
                    map: Box::new(move |p| map(p)),
                });
            }
            out.push(Partition::Merge(inputs));
        }
        Ok(out)
    }
}

/// The order in which the inputs' blocks concatenate into a sorted run, when they can: every
/// input keeps all its entries and its keys lie strictly after the previous input's
/// (directories give each blob's first and last key). Empty inputs are left out.
fn concat_order(
    specs: &[RunInput],
    dirs: &[(crate::io::Location, ordered::OrderedDirectory)],
) -> Option<Vec<usize>> {
    if specs.iter().any(|s| !s.keeps_all) {
        return None;
    }
    let mut spans: Vec<(&[u8], &[u8], usize)> = dirs
        .iter()
        .enumerate()
        .filter_map(|(i, (_, d))| {
            d.blocks
                .first()
                .map(|b| (b.first_key.as_slice(), d.max_key.as_slice(), i))
        })
        .collect();
    spans.sort_unstable();
    spans
        .windows(2)
        .all(|w| w[0].1 < w[1].0)
        .then(|| spans.into_iter().map(|(_, _, i)| i).collect())
}

/// Does the run's record of a file still describe `f` and its artifact?
/// A tier step and the files of the run it writes (the merged runs' files they still
/// answer and the delta's, in table order).
pub(crate) struct PlannedTiers {
    pub step: TierStep,
    pub inputs: Vec<(FileEntry, IndexFileEntry)>,
}

/// Which of `covered` (the files whose blobs the gate accepts, in table order) each of
/// `runs` (oldest first) still answers — a file by the newest run whose facts it matches —
/// and the step [`tier_step`] takes from there.
fn plan_tiers(runs: &[TableRun], covered: &[(FileEntry, IndexFileEntry)]) -> Option<PlannedTiers> {
    let by_id: HashMap<u64, usize> = covered
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (f.file_id, i))
        .collect();
    // By covered index: the run answering it.
    let mut owner: Vec<Option<usize>> = vec![None; covered.len()];
    for (ri, r) in runs.iter().enumerate().rev() {
        for rf in &r.files {
            if let Some(&i) = by_id.get(&rf.file_id) {
                if owner[i].is_none() && same_file(rf, &covered[i].0, &covered[i].1) {
                    owner[i] = Some(ri);
                }
            }
        }
    }
    // Rows, a file counting at least one (a run answering only empty files still answers).
    let rows = |i: usize| covered[i].0.record_count.max(1);
    let mut live = vec![0u64; runs.len()];
    let mut delta = (0usize, 0u64);
    for (i, o) in owner.iter().enumerate() {
        match o {
            Some(r) => live[*r] += rows(i),
            None => delta = (delta.0 + 1, delta.1 + rows(i)),
        }
    }
    let step = tier_step(&live, delta)?;
    let inputs = (0..covered.len())
        .filter(|&i| match owner[i] {
            Some(r) => step.merge.contains(&r),
            None => step.delta,
        })
        .map(|i| covered[i].clone())
        .collect();
    Some(PlannedTiers { step, inputs })
}

/// The ordinals of a run of `covered` that merges the runs `previous` (oldest first): each
/// previous run's files still covered unchanged keep their order (so its entries stay sorted
/// after renumbering), run after run, then the rest in file order. Returns, by new ordinal,
/// the index into `covered` and whether the file's own blob is the input (not a run), and per
/// previous run its old ordinals' new ones (`None`: left out).
#[allow(clippy::type_complexity)]
fn merge_order(
    covered: &[(FileEntry, IndexFileEntry)],
    previous: &[&TableRun],
) -> (Vec<(usize, bool)>, Vec<Vec<Option<u64>>>) {
    let by_id: HashMap<u64, usize> = covered
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (f.file_id, i))
        .collect();
    let mut order: Vec<(usize, bool)> = Vec::with_capacity(covered.len());
    let mut taken = vec![false; covered.len()];
    let mut remaps = Vec::with_capacity(previous.len());
    for prev in previous {
        let mut remap: Vec<Option<u64>> = Vec::with_capacity(prev.files.len());
        for rf in &prev.files {
            match by_id
                .get(&rf.file_id)
                .copied()
                .filter(|&i| !taken[i] && same_file(rf, &covered[i].0, &covered[i].1))
            {
                Some(i) => {
                    remap.push(Some(order.len() as u64));
                    taken[i] = true;
                    order.push((i, false));
                }
                None => remap.push(None),
            }
        }
        remaps.push(remap);
    }
    order.extend((0..covered.len()).filter(|&i| !taken[i]).map(|i| (i, true)));
    (order, remaps)
}

/// The inputs of a run of `covered` merging the runs `previous` (oldest first) for the run
/// writers that take runs as inputs ([`Input`]): the previous runs that still cover a file,
/// then the other files' own blobs; with the order of [`merge_order`].
#[allow(clippy::type_complexity)]
fn tier_inputs(
    covered: &[(FileEntry, IndexFileEntry)],
    previous: &[&TableRun],
) -> (Vec<(usize, bool)>, Vec<Input>) {
    let (order, remaps) = merge_order(covered, previous);
    let mut inputs: Vec<Input> = previous
        .iter()
        .zip(remaps)
        .filter(|(_, remap)| remap.iter().any(Option::is_some))
        .map(|(r, remap)| Input {
            bundle_path: r.bundle_path.clone(),
            blob_offset: r.blob_offset,
            length: r.blob_length,
            meta: r.ordered.clone(),
            rows: remap
                .iter()
                .map(|o| o.map_or(0, |o| covered[order[o as usize].0].0.record_count))
                .collect(),
            map: remap.into_iter().map(|o| o.map(|o| o as u32)).collect(),
            run: true,
            files: r.files.clone(),
        })
        .collect();
    for (ordinal, &(i, own)) in order.iter().enumerate() {
        if own {
            inputs.push(Input::blob(&covered[i], ordinal as u32));
        }
    }
    (order, inputs)
}

fn same_file(rf: &RunFile, f: &FileEntry, a: &IndexFileEntry) -> bool {
    rf.file_id == f.file_id
        && rf.sha256 == a.lineage.source_sha256
        && rf.sequence_number == a.lineage.source_sequence_number
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies the tier rule to `live` after one more delta file of `rows`; the rows written.
    fn append(live: &mut Vec<u64>, delta: &mut (usize, u64), rows: u64) -> u64 {
        *delta = (delta.0 + 1, delta.1 + rows);
        let Some(step) = tier_step(live, *delta) else {
            return 0;
        };
        let merged: u64 = step.merge.iter().map(|&i| live[i]).sum();
        let mut next: Vec<u64> = step.keep.iter().map(|&i| live[i]).collect();
        assert!(step.keep.iter().chain(&step.merge).all(|&i| live[i] > 0));
        // What is kept is below what is merged, in order.
        assert!(step.keep.iter().max() < step.merge.iter().min().or(Some(&usize::MAX)));
        let mut written = 0;
        if step.delta {
            next.push(merged + delta.1);
            written = merged + delta.1;
            *delta = (0, 0);
        }
        *live = next;
        written
    }

    #[test]
    fn appends_cost_a_bounded_multiple_of_their_rows() {
        for (files, per, add) in [
            (200u64, 10_000u64, 10_000u64),
            (20, 100_000, 10_000),
            (200, 10_000, 1_000_000),
            (1000, 10_000, 1_000),
        ] {
            let mut live = vec![files * per];
            let (mut delta, mut written, mut appended) = ((0, 0), 0u64, 0u64);
            for _ in 0..2000 {
                written += append(&mut live, &mut delta, add);
                appended += add;
                assert!(live.len() <= MAX_TIERS, "{live:?}");
                assert!(delta.0 < RUN_MIN_FILES, "{delta:?}");
                // Every run above the first is below a quarter of the one under it... until
                // the delta is written again.
                for w in live.windows(2) {
                    assert!(w[1].saturating_mul(MERGE_RATIO) < w[0], "{live:?}");
                }
            }
            let amp = written as f64 / appended as f64;
            assert!(
                amp < 13.0,
                "{files} x {per} + {add}: each row written {amp:.1} times"
            );
        }
    }

    #[test]
    fn the_delta_waits_for_enough_files_and_dead_runs_go() {
        // No run yet: a run once RUN_MIN_FILES files are indexed.
        assert_eq!(tier_step(&[], (RUN_MIN_FILES - 1, 1 << 30)), None);
        let s = tier_step(&[], (RUN_MIN_FILES, 4)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![], vec![], true));
        // A small delta waits; a large one is written (and merges what it outweighs).
        assert_eq!(tier_step(&[1000], (1, 10)), None);
        let s = tier_step(&[1000], (1, 300)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![], vec![0], true));
        let s = tier_step(&[1000], (RUN_MIN_FILES, 40)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![0], vec![], true));
        // Merges cascade while the new run outweighs a quarter of the one below.
        let s = tier_step(&[1000, 200, 40], (RUN_MIN_FILES, 40)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![], vec![0, 1, 2], true));
        let s = tier_step(&[100_000, 200, 40], (RUN_MIN_FILES, 40)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![0], vec![1, 2], true));
        // A run answering nothing is dropped, with or without a delta to write.
        let s = tier_step(&[1000, 0], (1, 1)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![0], vec![], false));
        let s = tier_step(&[0, 0], (0, 0)).unwrap();
        assert_eq!((s.keep, s.merge, s.delta), (vec![], vec![], false));
        // Never more than MAX_TIERS.
        let live: Vec<u64> = (0..MAX_TIERS as u32)
            .map(|i| 1u64 << (60 - 4 * i))
            .collect();
        let s = tier_step(&live, (RUN_MIN_FILES, 1)).unwrap();
        assert_eq!(s.keep.len() + 1, MAX_TIERS);
    }
}
