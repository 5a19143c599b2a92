//! Table-wide sorted runs (`docs/ordered-index.md`, "Table runs"): per ready index, every
//! covered file's entries in one ordered blob, positions `ordinal << 40 | position`.
//!
//! A run is merged, never sorted in memory: the previous run (for the files it still covers
//! unchanged, their ordinals kept in order) plus the blobs of the files it lacks, streamed
//! through a k-way merge ([`crate::admin::merge`]) into a multipart upload. Memory is one
//! read chunk per input and one upload part, whatever the table's size; a registration adds
//! its files' blobs to the next build's merge instead of re-reading every file's blob.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use crate::admin::catalog::*;
use crate::admin::merge::{self, BlobAt, BlobStream, MergeInput};
use crate::admin::overlay::{store_err, Overlay, RUN_MIN_FILES};
use crate::error::{Error, Result};
use crate::formats::codec::Codec;
use crate::formats::manifest::*;
use crate::formats::puffin::{BlobSpec, PuffinWriter};
use crate::index::ordered::{self, OrderedBlobWriter};

/// Bytes buffered before an upload part goes out (object stores want ≥ 5 MiB parts).
const PART_BYTES: usize = 8 << 20;

/// Is `e` damage in a stored blob (a run is then not built; per-file blobs keep answering
/// and their readers reject the damaged one)?
fn is_damage(e: &Error) -> bool {
    matches!(e, Error::Blob(_))
}

impl Overlay {
    /// (Re)builds the table-wide sorted run of every ready index whose covered files changed
    /// since its run was built, on tables of at least [`RUN_MIN_FILES`] indexed files.
    pub(crate) async fn build_runs(&self, tr: &TableRecord) -> Result<()> {
        let t = self.catalog.begin()?;
        let files = self.catalog.files(&t, tr.table_id).await?;
        let indexes = self.catalog.indexes(&t, tr.table_id).await?;
        let mut todo = Vec::new();
        for ix in indexes
            .into_iter()
            .filter(|ix| ix.state == IndexState::Ready)
        {
            let by_file: HashMap<u64, IndexFileEntry> =
                self.catalog.artifacts_by_file(&t, ix.index_id).await?;
            let current: Option<TableRun> = t.get(&run_key(ix.index_id)).await?;
            // The run covers the files whose artifact the gate accepts now.
            let covered: Vec<(FileEntry, IndexFileEntry)> = files
                .iter()
                .filter(|f| accepted(f, by_file.get(&f.file_id), tr))
                .map(|f| (f.clone(), by_file[&f.file_id].clone()))
                .collect();
            if covered.len() < RUN_MIN_FILES {
                continue;
            }
            let same = current.as_ref().is_some_and(|r| {
                r.files.len() == covered.len()
                    && covered
                        .iter()
                        .all(|(f, a)| r.files.iter().any(|rf| same_file(rf, f, a)))
            });
            if !same {
                todo.push((ix, covered, current));
            }
        }
        drop(t);
        for (ix, covered, current) in todo {
            self.build_run(tr, &ix, &covered, current.as_ref()).await?;
        }
        Ok(())
    }

    /// Merges `previous` (what it covers unchanged) and the blobs of the other covered files
    /// into a new run and commits it.
    async fn build_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
        previous: Option<&TableRun>,
    ) -> Result<()> {
        if covered.len() as u64 >= 1 << (64 - RUN_POSITION_BITS)
            || covered
                .iter()
                .any(|(f, _)| f.record_count >= 1 << RUN_POSITION_BITS)
        {
            return Ok(()); // beyond the run's position encoding: per-file blobs serve it
        }
        // Ordinals: the previous run's files still covered unchanged keep their order (so
        // its entries stay sorted after renumbering), then the rest in file order.
        let mut order: Vec<usize> = Vec::with_capacity(covered.len());
        let mut remap: Vec<Option<u64>> = Vec::new();
        if let Some(prev) = previous {
            for rf in &prev.files {
                match covered.iter().position(|(f, a)| same_file(rf, f, a)) {
                    Some(i) => {
                        remap.push(Some(order.len() as u64));
                        order.push(i);
                    }
                    None => remap.push(None),
                }
            }
        }
        let from_previous = order.len();
        for i in 0..covered.len() {
            if !order[..from_previous].contains(&i) {
                order.push(i);
            }
        }
        // The inputs: where each blob is and how its positions become run positions.
        let mask = (1u64 << RUN_POSITION_BITS) - 1;
        let mut specs: Vec<(String, u64, OrderedMeta, PositionMap)> = Vec::new();
        if let (Some(prev), true) = (previous, from_previous > 0) {
            let remap = remap.clone();
            specs.push((
                prev.bundle_path.clone(),
                prev.blob_offset,
                prev.ordered.clone(),
                Arc::new(move |p| {
                    let old = (p >> RUN_POSITION_BITS) as usize;
                    remap
                        .get(old)
                        .copied()
                        .flatten()
                        .map(|new| new << RUN_POSITION_BITS | (p & mask))
                }),
            ));
        }
        for (ordinal, &i) in order.iter().enumerate().skip(from_previous) {
            let l = &covered[i].1.lineage;
            let tag = (ordinal as u64) << RUN_POSITION_BITS;
            specs.push((
                l.bundle_path.clone(),
                l.blob_offset,
                covered[i].1.ordered.clone(),
                Arc::new(move |p| Some(tag | p)),
            ));
        }
        let partitions = match self.open_partitions(&specs).await {
            Ok(p) => p,
            Err(e) if is_damage(&e) => return Ok(()),
            Err(e) => return Err(e),
        };

        let t = self.catalog.begin()?;
        let generation = t
            .get::<TableRun>(&run_key(ix.index_id))
            .await?
            .map_or(1, |r| run_generation(&r.bundle_path) + 1);
        drop(t);
        // A name no other attempt uses (concurrent builders of one run never collide).
        let bundle_path = format!(
            "bundles/{}/run-{}-g{}-{}.puffin",
            tr.table_id,
            ix.index_id,
            generation,
            crate::admin::build::attempt_token()
        );
        let path = Path::from(bundle_path.as_str());
        let mut upload = self.store.put_multipart(&path).await.map_err(store_err)?;
        let mut pw = PuffinWriter::new();
        pw.set_property("skerry.table", tr.name.clone());
        let blob_offset = pw.position();
        let w = OrderedBlobWriter::new(self.block_bytes);
        // Partitions after the first merge on their own tasks (both cores) into memory; the
        // first streams its parts out as it goes, then takes the others' blocks as they are.
        let mut partitions = partitions.into_iter();
        let first = partitions.next().expect("one partition at least");
        let block_bytes = self.block_bytes;
        let rest: Vec<_> = partitions
            .map(|inputs| {
                tokio::spawn(merge_partition(
                    inputs,
                    OrderedBlobWriter::new(block_bytes),
                    None,
                ))
            })
            .collect();
        let written: Result<OrderedBlobWriter> = async {
            let mut sink = Sink {
                pw: &mut pw,
                upload: &mut upload,
                blob_offset,
            };
            let mut w = merge_partition(first, w, Some(&mut sink)).await?;
            for h in rest {
                let other = match h.await {
                    Ok(r) => r?,
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                };
                w.append(other)?;
                sink.flush(&mut w, true).await?;
            }
            Ok(w)
        }
        .await;
        let w = match written {
            Ok(w) => w,
            Err(e) => {
                let _ = upload.abort().await;
                return if is_damage(&e) { Ok(()) } else { Err(e) };
            }
        };
        let blob = w.finish();
        pw.write_raw(&blob.bytes);
        let blob_length = pw.position() - blob_offset;
        let mut props = std::collections::BTreeMap::new();
        props.insert("skerry.index-id".to_string(), ix.index_id.to_string());
        props.insert("skerry.run".to_string(), "true".to_string());
        let snapshot = tr.snapshot as i64;
        pw.record_blob(
            BlobSpec {
                blob_type: ordered::BLOB_TYPE.into(),
                fields: ix.fields.clone(),
                snapshot_id: snapshot,
                sequence_number: snapshot,
                properties: props,
            },
            blob_offset,
            blob_length,
            Codec::None,
        );
        let tail = pw.finish();
        let done: Result<()> = async {
            upload
                .put_part(PutPayload::from(tail.bytes))
                .await
                .map_err(store_err)?;
            upload.complete().await.map_err(store_err)?;
            Ok(())
        }
        .await;
        if let Err(e) = done {
            let _ = upload.abort().await;
            return Err(e);
        }
        let files = order
            .iter()
            .map(|&i| {
                let (f, a) = &covered[i];
                let l = &a.lineage;
                RunFile {
                    file_id: f.file_id,
                    path: f.path.clone(),
                    sha256: l.source_sha256.clone(),
                    record_count: l.source_record_count,
                    snapshot_id: l.source_snapshot_id,
                    sequence_number: l.source_sequence_number,
                }
            })
            .collect();
        let run = TableRun {
            bundle_path,
            blob_offset,
            blob_length,
            ordered: OrderedMeta {
                directory_offset: blob.directory.start,
                directory_length: blob.directory.end - blob.directory.start,
                directory_sha256: blob.directory_sha256,
                entries: blob.entries,
                min_key: blob.min_key.as_ref().map(hex::encode),
                max_key: blob.max_key.as_ref().map(hex::encode),
            },
            files,
        };
        let t = self.catalog.begin()?;
        t.put(&run_key(ix.index_id), &run)?;
        t.bump_version().await?;
        t.commit().await?;
        Ok(())
    }
}

/// How an input's stored positions become run positions (`None`: left out).
type PositionMap = Arc<dyn Fn(u64) -> Option<u64> + Send + Sync>;

/// Inputs with fewer entries in all merge on one task.
const PARALLEL_MIN_ENTRIES: u64 = 200_000;
/// Runs of more input bytes merge on one task: the partitions after the first are held in
/// memory until the first is written, which bounds them (about half of this).
const PARALLEL_MAX_BYTES: u64 = 64 << 20;

/// Where finished blocks of the run go: the Puffin file being uploaded in parts.
struct Sink<'a> {
    pw: &'a mut PuffinWriter,
    upload: &'a mut Box<dyn object_store::MultipartUpload>,
    blob_offset: u64,
}

impl Sink<'_> {
    /// Uploads the closed blocks once a part's worth is waiting (or now, with `all`).
    async fn flush(&mut self, w: &mut OrderedBlobWriter, all: bool) -> Result<()> {
        let waiting = w.len() - (self.pw.position() - self.blob_offset);
        if waiting >= PART_BYTES as u64 || (all && waiting > 0) {
            self.pw.write_raw(&w.take_closed());
            self.upload
                .put_part(PutPayload::from(self.pw.take()))
                .await
                .map_err(store_err)?;
        }
        Ok(())
    }
}

/// Merges `inputs` into `w`, streaming parts to `sink` when given (else in memory).
async fn merge_partition(
    inputs: Vec<MergeInput>,
    mut w: OrderedBlobWriter,
    mut sink: Option<&mut Sink<'_>>,
) -> Result<OrderedBlobWriter> {
    let mut m = merge::Merge::new(inputs);
    while m.next().await? {
        w.push(m.key(), m.position())?;
        if let Some(s) = sink.as_deref_mut() {
            s.flush(&mut w, false).await?;
        }
    }
    Ok(w)
}

impl Overlay {
    /// Opens the inputs of a run merge, split into key ranges of about equal entries, one
    /// per core (one range for small runs, or runs whose in-memory partitions would exceed
    /// [`PARALLEL_MAX_BYTES`]). Directories are read concurrently, once.
    async fn open_partitions(
        &self,
        specs: &[(String, u64, OrderedMeta, PositionMap)],
    ) -> Result<Vec<Vec<MergeInput>>> {
        let dirs = futures::future::try_join_all(specs.iter().map(|(path, off, meta, _)| {
            let at = BlobAt {
                bundle_path: path,
                blob_offset: *off,
                ordered: meta,
            };
            async move { merge::read_directory(&self.reader, &at).await }
        }))
        .await?;
        let entries: u64 = specs.iter().map(|s| s.2.entries).sum();
        let bytes: u64 = dirs
            .iter()
            .flat_map(|(_, d)| d.blocks.iter().map(|b| b.length))
            .sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut splits: Vec<Vec<u8>> = Vec::new();
        if cores > 1 && entries >= PARALLEL_MIN_ENTRIES && bytes <= PARALLEL_MAX_BYTES {
            // Split at block first keys so each range holds about entries / cores.
            let mut firsts: Vec<(&[u8], u64)> = dirs
                .iter()
                .flat_map(|(_, d)| d.blocks.iter().map(|b| (b.first_key.as_slice(), b.entries)))
                .collect();
            firsts.sort_unstable();
            let per = entries / cores as u64;
            let mut acc = 0u64;
            for (k, n) in &firsts {
                if acc >= per * (splits.len() as u64 + 1)
                    && splits.last().is_none_or(|l| l.as_slice() < *k)
                    && *k > firsts[0].0
                {
                    splits.push(k.to_vec());
                    if splits.len() + 1 == cores {
                        break;
                    }
                }
                acc += n;
            }
        }
        let n = splits.len() + 1;
        let chunk = merge::chunk_for(specs.len() * n);
        let mut out = Vec::with_capacity(n);
        for part in 0..n {
            let lo = part.checked_sub(1).map(|i| splits[i].clone());
            let hi = splits.get(part).cloned();
            let mut inputs = Vec::with_capacity(specs.len());
            for ((_, off, _, map), (loc, dir)) in specs.iter().zip(&dirs) {
                let map = map.clone();
                inputs.push(MergeInput {
                    stream: BlobStream::open_range(
                        self.reader.clone(),
                        loc.clone(),
                        *off,
                        dir.clone(),
                        chunk,
                        lo.clone(),
                        hi.clone(),
                    )
                    .await?,
                    map: Box::new(move |p| map(p)),
                });
            }
            out.push(inputs);
        }
        Ok(out)
    }
}

/// Does the run's record of a file still describe `f` and its artifact?
fn same_file(rf: &RunFile, f: &FileEntry, a: &IndexFileEntry) -> bool {
    rf.file_id == f.file_id
        && rf.sha256 == a.lineage.source_sha256
        && rf.sequence_number == a.lineage.source_sequence_number
}

/// The generation in a run's name: `run-{index}-g{generation}[-{token}].puffin`.
fn run_generation(path: &str) -> u64 {
    path.rsplit("-g")
        .next()
        .map(|g| g.trim_end_matches(".puffin"))
        .and_then(|g| g.split('-').next())
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::run_generation;

    #[test]
    fn run_names_parse_old_and_new() {
        assert_eq!(run_generation("bundles/1/run-5-g3.puffin"), 3);
        assert_eq!(run_generation("bundles/1/run-5-g12-18ab3f.puffin"), 12);
        assert_eq!(run_generation("bundles/1/run-5.puffin"), 0);
    }
}
