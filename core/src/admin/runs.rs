//! Table-wide sorted runs (`docs/ordered-index.md`, "Table runs"): per ready index, every
//! covered file's entries in one ordered blob, positions `ordinal << 40 | position`.
//!
//! A run is merged, never sorted in memory: the previous run (for the files it still covers
//! unchanged, their ordinals kept in order) plus the blobs of the files it lacks, streamed
//! through a k-way merge ([`crate::admin::merge`]) into a multipart upload. Memory is one
//! read chunk per input and one upload part, whatever the table's size; a registration adds
//! its files' blobs to the next build's merge instead of re-reading every file's blob.

use std::collections::HashMap;

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
            let by_file: HashMap<u64, IndexFileEntry> = self
                .catalog
                .artifacts(&t, ix.index_id)
                .await?
                .into_iter()
                .map(|a| (a.file_id, a))
                .collect();
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
        let inputs_n = (order.len() - from_previous) + usize::from(from_previous > 0);
        let chunk = merge::chunk_for(inputs_n);
        let mask = (1u64 << RUN_POSITION_BITS) - 1;
        let mut inputs = Vec::with_capacity(inputs_n);
        let opened: Result<()> = async {
            if let (Some(prev), true) = (previous, from_previous > 0) {
                let at = BlobAt {
                    bundle_path: &prev.bundle_path,
                    blob_offset: prev.blob_offset,
                    ordered: &prev.ordered,
                };
                let remap = remap.clone();
                inputs.push(MergeInput {
                    stream: BlobStream::open(self.reader.clone(), &at, chunk).await?,
                    map: Box::new(move |p| {
                        let old = (p >> RUN_POSITION_BITS) as usize;
                        remap
                            .get(old)
                            .copied()
                            .flatten()
                            .map(|new| new << RUN_POSITION_BITS | (p & mask))
                    }),
                });
            }
            for (ordinal, &i) in order.iter().enumerate().skip(from_previous) {
                let a = &covered[i].1;
                let at = BlobAt {
                    bundle_path: &a.lineage.bundle_path,
                    blob_offset: a.lineage.blob_offset,
                    ordered: &a.ordered,
                };
                let tag = (ordinal as u64) << RUN_POSITION_BITS;
                inputs.push(MergeInput {
                    stream: BlobStream::open(self.reader.clone(), &at, chunk).await?,
                    map: Box::new(move |p| Some(tag | p)),
                });
            }
            Ok(())
        }
        .await;
        match opened {
            Err(e) if is_damage(&e) => return Ok(()),
            Err(e) => return Err(e),
            Ok(()) => {}
        }

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
        let mut w = OrderedBlobWriter::new(self.block_bytes);
        // Parts go out as the merge produces them: memory is one part, not the run.
        let written: Result<()> = async {
            let mut m = merge::Merge::new(inputs);
            while let Some((k, p, _)) = m.next().await? {
                w.push(&k, p)?;
                if w.len() - pw.position() + blob_offset >= PART_BYTES as u64 {
                    pw.write_raw(&w.take_closed());
                    upload
                        .put_part(PutPayload::from(pw.take()))
                        .await
                        .map_err(store_err)?;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = written {
            let _ = upload.abort().await;
            return if is_damage(&e) { Ok(()) } else { Err(e) };
        }
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
