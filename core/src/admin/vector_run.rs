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

use crate::admin::run_bundle::{self, Sink};
use crate::error::Result;
use crate::formats::manifest::*;
use crate::index::blob::BlobError;
use crate::index::vector::ivf::{self, IvfBlob, IvfDirectory, RunWriter};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Bytes of codes read per chunk of partitions (over all files).
pub(crate) const CHUNK_BYTES: u64 = 32 << 20;
/// Range reads in flight while a chunk is gathered.
const READS: usize = 8;

/// What a run of `covered` is made of: their blobs' directories (by ordinal), the codes' shape,
/// and the partitions (with their bytes of codes over all files) cut into chunks.
pub(crate) struct Plan {
    dirs: Vec<IvfDirectory>,
    pub(crate) codes: ivf::Codes,
    sizes: BTreeMap<u32, u64>,
    chunks: Vec<(u32, u32)>,
}

/// Reads every covered blob's directory (checked against its manifest SHA-256) and plans the
/// run of vector index blobs `covered` (ordinals in that order) against codebook `book`.
/// `None` when no run can be made: no vector, a blob written against another codebook or of
/// another width, or a damaged directory (per-file blobs serve the index meanwhile; their
/// readers reject the damaged one).
pub(crate) async fn plan(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
    book: [u8; 32],
) -> Result<Option<Plan>> {
    if covered.len() >= u32::MAX as usize {
        return Ok(None);
    }
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
    let ids: Vec<u32> = sizes.keys().copied().collect();
    let chunks: Vec<(u32, u32)> = run_bundle::chunks(sizes.values().copied(), CHUNK_BYTES)
        .into_iter()
        .map(|r| (ids[r.start], ids[r.end - 1]))
        .collect();
    Ok(Some(Plan {
        dirs,
        codes,
        sizes,
        chunks,
    }))
}

/// Streams the run `p` plans into `sink` (codes, then raw vectors) and returns its directory
/// and footer, not yet written. `None` when a blob's bytes do not check out.
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
    p: &Plan,
    sink: &mut Sink,
) -> Result<Option<IvfBlob>> {
    let mut w = RunWriter::new(p.codes);
    let raw_len = p.codes.dim as u64 * 4 + 4;
    for raws in [false, true] {
        for &chunk in &p.chunks {
            if !write_chunk(reader, covered, p, chunk, raws, raw_len, &mut w, sink).await? {
                return Ok(None);
            }
        }
    }
    Ok(w.finish().ok())
}

/// One chunk of partitions (`lo..=hi`) of every covered file into the run: their codes, or
/// with `raws` their raw vectors. `false` when a blob's bytes do not check out.
#[allow(clippy::too_many_arguments)]
async fn write_chunk(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
    p: &Plan,
    (lo, hi): (u32, u32),
    raws: bool,
    raw_len: u64,
    w: &mut RunWriter,
    sink: &mut Sink,
) -> Result<bool> {
    let (dirs, sizes) = (&p.dirs, &p.sizes);
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
