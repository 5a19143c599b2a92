//! A vector index's table run (`docs/vector-index.md`, "Table runs"; RFC 0001): every covered
//! file's blob laid out partition by partition in one `skerry-vector-ivf-v1` blob whose file
//! runs name the files by ordinal — so a query reads each partition it probes once for all
//! files, and the raw vectors of its candidates from the same few places, whatever the
//! number of files.
//!
//! The run is streamed in two passes, codes then raw vectors: the files' directories are read
//! once, then the partitions are taken in chunks of about [`CHUNK_BYTES`] (one range read per
//! file and chunk, [`READS`] at a time), checked against their CRC-32s and written straight
//! into the multipart upload. Memory is one chunk and the directories, whatever the table's
//! size.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use crate::admin::catalog::*;
use crate::admin::overlay::{store_err, Overlay};
use crate::admin::runs::{run_file, Sink};
use crate::error::Result;
use crate::formats::codec::Codec;
use crate::formats::manifest::*;
use crate::formats::puffin::BlobSpec;
use crate::index::blob::BlobError;
use crate::index::vector::ivf::{self, IvfDirectory, RunWriter};
use crate::io::{Location, RangeReader};

/// Bytes of codes read per chunk of partitions (over all files).
pub(crate) const CHUNK_BYTES: u64 = 32 << 20;
/// Range reads in flight while a chunk is gathered.
const READS: usize = 8;

impl Overlay {
    /// Writes the table run of vector index `ix` over `covered` (ordinals in that order) and
    /// returns its record, uncommitted. `None` when no run can be made: no codebook, no
    /// vector, a blob written against another codebook or of another width, or a damaged
    /// blob (per-file blobs serve the index meanwhile; their readers reject the damaged one).
    pub(crate) async fn write_vector_run(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        covered: &[(FileEntry, IndexFileEntry)],
    ) -> Result<Option<TableRun>> {
        let Some(book) = ix
            .codebook
            .as_ref()
            .and_then(|c| hex::decode(&c.sha256).ok())
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
        else {
            return Ok(None);
        };
        if covered.len() >= u32::MAX as usize {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        // Every covered blob's directory, checked against its manifest SHA-256.
        let reader = &self.reader;
        // (Futures collected first: a stream mapping borrowed items to futures is not `Send`
        // for every lifetime, which the addon's spawned builds need.)
        let futs: Vec<_> = covered
            .iter()
            .map(|(_, a)| async move {
                let l = &a.lineage;
                let m = &a.ordered;
                if l.blob_type != ivf::BLOB_TYPE {
                    return Ok(Err(BlobError::Corrupt("not a partition-major blob")));
                }
                let at = l.blob_offset.saturating_add(m.directory_offset);
                let bytes = reader
                    .read_range(
                        &Location::new(&l.bundle_path),
                        at..at.saturating_add(m.directory_length),
                    )
                    .await?;
                Ok::<_, crate::error::Error>(IvfDirectory::parse(
                    &bytes,
                    Some(&m.directory_sha256),
                    m.directory_offset,
                ))
            })
            .collect();
        let dirs: Vec<std::result::Result<IvfDirectory, BlobError>> = futures::stream::iter(futs)
            .buffered(READS)
            .try_collect()
            .await?;
        let Ok(dirs) = dirs.into_iter().collect::<std::result::Result<Vec<_>, _>>() else {
            return Ok(None);
        };
        let Some(codes) = dirs.iter().find(|d| d.entries > 0).map(|d| d.codes) else {
            return Ok(None); // no vector: nothing to probe
        };
        let fits = |d: &IvfDirectory| {
            d.entries == 0
                || (d.codes == codes
                    && d.codes.codebook == book
                    && d.entries < u64::from(u32::MAX)
                    && d.partitions.iter().all(|p| p.runs == 1))
        };
        if !dirs.iter().all(fits) {
            return Ok(None);
        }
        // Partitions in id order, cut into chunks of about CHUNK_BYTES of codes.
        let mut sizes: BTreeMap<u32, u64> = BTreeMap::new();
        for d in &dirs {
            for p in &d.partitions {
                let r = d.codes_range(p);
                *sizes.entry(p.id).or_default() += r.end - r.start;
            }
        }
        let mut chunks: Vec<(u32, u32)> = Vec::new();
        let mut acc = 0u64;
        for (&id, &n) in &sizes {
            match chunks.last_mut() {
                Some(c) if acc + n <= CHUNK_BYTES || acc == 0 => {
                    c.1 = id;
                    acc += n;
                }
                _ => {
                    chunks.push((id, id));
                    acc = n;
                }
            }
        }

        let (bundle_path, mut sink, blob_offset) = self.start_run_upload(tr, ix).await?;
        let mut w = RunWriter::new(codes);
        let raw_len = codes.dim as u64 * 4 + 4;
        let written: Result<bool> = async {
            for raws in [false, true] {
                for &(lo, hi) in &chunks {
                    if !self
                        .run_chunk(
                            covered,
                            &dirs,
                            &sizes,
                            (lo, hi),
                            raws,
                            raw_len,
                            &mut w,
                            &mut sink,
                        )
                        .await?
                    {
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        }
        .await;
        let Sink { mut pw, upload } = sink;
        match written {
            Ok(true) => {}
            Ok(false) => {
                let _ = upload.abort().await;
                return Ok(None);
            }
            Err(e) => {
                let _ = upload.abort().await;
                return Err(e);
            }
        }
        let Ok(tail) = w.finish() else {
            let _ = upload.abort().await;
            return Ok(None);
        };
        pw.write_raw(&tail.bytes);
        let blob_length = pw.position() - blob_offset;
        let mut props = std::collections::BTreeMap::new();
        props.insert("skerry.index-id".to_string(), ix.index_id.to_string());
        props.insert("skerry.run".to_string(), "true".to_string());
        let snapshot = tr.snapshot as i64;
        pw.record_blob(
            BlobSpec {
                blob_type: ivf::BLOB_TYPE.into(),
                fields: ix.fields.clone(),
                snapshot_id: snapshot,
                sequence_number: snapshot,
                properties: props,
            },
            blob_offset,
            blob_length,
            Codec::None,
        );
        let mut upload = upload;
        upload.put(pw.finish().bytes.into());
        upload.finish().await.map_err(store_err)?;
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
                dim: Some(codes.dim as u32),
            },
            files: covered.iter().map(|(f, a)| run_file(f, a)).collect(),
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

impl Overlay {
    /// One chunk of partitions (`lo..=hi`) of every covered file into the run: their codes,
    /// or with `raws` their raw vectors. `false` when a blob's bytes do not check out.
    #[allow(clippy::too_many_arguments)]
    async fn run_chunk(
        &self,
        covered: &[(FileEntry, IndexFileEntry)],
        dirs: &[IvfDirectory],
        sizes: &BTreeMap<u32, u64>,
        (lo, hi): (u32, u32),
        raws: bool,
        raw_len: u64,
        w: &mut RunWriter,
        sink: &mut Sink,
    ) -> Result<bool> {
        // Per file: its partitions lo..=hi (indexes a..b), whose codes — or raw vectors — are
        // one contiguous range of its blob.
        let spans: Vec<Option<(usize, usize, std::ops::Range<u64>)>> = dirs
            .iter()
            .map(|d| {
                let a = d.partitions.partition_point(|p| p.id < lo);
                let b = d.partitions.partition_point(|p| p.id <= hi);
                (a < b).then(|| {
                    let (first, last) = (&d.partitions[a], &d.partitions[b - 1]);
                    let r = if raws {
                        let end = last.first + u64::from(last.entries);
                        d.raw_offset + first.first * raw_len..d.raw_offset + end * raw_len
                    } else {
                        first.offset..d.codes_range(last).end
                    };
                    (a, b, r)
                })
            })
            .collect();
        let reader = &self.reader;
        let futs: Vec<_> = covered
            .iter()
            .zip(&spans)
            .map(|((_, e), s)| async move {
                let Some((_, _, r)) = s else {
                    return Ok::<_, crate::error::Error>(None);
                };
                let o = e.lineage.blob_offset;
                let b = reader
                    .read_range(
                        &Location::new(&e.lineage.bundle_path),
                        o.saturating_add(r.start)..o.saturating_add(r.end),
                    )
                    .await?;
                Ok(Some(b))
            })
            .collect();
        let got: Vec<Option<bytes::Bytes>> = futures::stream::iter(futs)
            .buffered(READS)
            .try_collect()
            .await?;
        // Each file's next partition within the chunk.
        let mut next: Vec<usize> = spans
            .iter()
            .map(|s| s.as_ref().map_or(0, |s| s.0))
            .collect();
        for &id in sizes.range(lo..=hi).map(|(id, _)| id) {
            let mut pieces: Vec<(u32, &[u8])> = Vec::new();
            for (o, d) in dirs.iter().enumerate() {
                let (Some((_, b, r)), Some(bytes)) = (&spans[o], &got[o]) else {
                    continue;
                };
                let k = next[o];
                if k >= *b || d.partitions[k].id != id {
                    continue;
                }
                next[o] += 1;
                let p = &d.partitions[k];
                let pr = if raws {
                    let a = d.raw_offset + p.first * raw_len;
                    a..a + u64::from(p.entries) * raw_len
                } else {
                    d.codes_range(p)
                };
                let at = (pr.start - r.start) as usize;
                let Some(part) = bytes.get(at..at + (pr.end - pr.start) as usize) else {
                    return Ok(false);
                };
                if raws {
                    pieces.push((o as u32, part));
                    continue;
                }
                // Its CRC-32 and its one file run (ordinal 0, all its entries).
                if crc32fast::hash(part) != p.codes_crc32
                    || part[..4] != [0; 4]
                    || part[4..8] != p.entries.to_le_bytes()
                {
                    return Ok(false);
                }
                pieces.push((o as u32, &part[8..]));
            }
            if raws {
                for (_, bytes) in &pieces {
                    if w.raws(bytes).is_err() {
                        return Ok(false);
                    }
                    // The bytes as they are (checked): one part of the upload at a time.
                    sink.put(bytes.to_vec()).await?;
                }
            } else {
                match w.partition(id, &pieces) {
                    Ok(b) => sink.put(b).await?,
                    Err(_) => return Ok(false),
                }
            }
        }
        Ok(true)
    }
}
