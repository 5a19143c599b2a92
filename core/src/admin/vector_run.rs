//! A vector index's table run (`docs/vector-index.md`, "Table runs"; RFC 0001): every covered
//! file's entries laid out partition by partition in one `skerry-vector-ivf-v1` blob whose file
//! runs name the files by ordinal — so a query reads each partition it probes once for all
//! files, and the raw vectors of its candidates from the same few places, whatever the
//! number of files.
//!
//! The run's inputs ([`Input`]) are the files' own blobs and the earlier runs it merges (RFC
//! 0004 tiers): a merge reads the runs, never the blobs of the files they cover, and leaves out
//! the entries of files a run covers that are no longer covered (rewritten, removed).
//!
//! The run is streamed in two passes, codes then raw vectors: the inputs' directories are read
//! once, then the partitions are taken in chunks of about [`CHUNK_BYTES`] (one range read per
//! input and chunk, [`READS`] at a time), checked against their CRC-32s and written straight
//! into the multipart upload. Memory is one chunk, the directories and, for a run that leaves
//! files out, the sizes of its file runs, whatever the table's size.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use crate::admin::run_bundle::{self, Input, Sink};
use crate::error::Result;
use crate::index::blob::BlobError;
use crate::index::vector::ivf::{self, IvfBlob, IvfDirectory, RunWriter};
use crate::io::ObjectStoreReader;

/// Bytes of codes read per chunk of partitions (over all inputs).
pub(crate) const CHUNK_BYTES: u64 = 32 << 20;
/// Range reads in flight while a chunk is gathered.
const READS: usize = 8;

/// What a run of the inputs is made of: their directories, the codes' shape, and the
/// partitions (with their bytes of codes over all inputs) cut into chunks.
pub(crate) struct Plan {
    dirs: Vec<IvfDirectory>,
    pub(crate) codes: ivf::Codes,
    sizes: BTreeMap<u32, u64>,
    chunks: Vec<(u32, u32)>,
}

/// Reads every input's directory (checked against its manifest SHA-256) and plans their run
/// against codebook `book`. `None` when no run can be made: no vector, an input written
/// against another codebook or of another width, or a damaged directory (the runs and blobs
/// there serve the index meanwhile; their readers reject the damaged one).
pub(crate) async fn plan(
    reader: &ObjectStoreReader,
    inputs: &[Input],
    book: [u8; 32],
) -> Result<Option<Plan>> {
    let ordinals: usize = inputs.iter().map(|i| i.map.len()).sum();
    if ordinals >= u32::MAX as usize {
        return Ok(None);
    }
    // (Futures collected first: a stream mapping borrowed items to futures is not `Send`
    // for every lifetime, which the addon's spawned builds need.)
    let futs: Vec<_> = inputs
        .iter()
        .map(|i| async move {
            let m = &i.meta;
            let bytes = i.directory(reader).await?;
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
            || (d.codes == codes && d.codes.codebook == book && d.entries < u64::from(u32::MAX))
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

/// Per input that leaves files out, per partition id: its file runs' entry counts and
/// whether each is kept (read in the codes pass, used to cut the raw vectors alike).
type Cuts = Vec<BTreeMap<u32, Vec<(u32, bool)>>>;

/// Streams the run `p` plans into `sink` (codes, then raw vectors) and returns its directory
/// and footer, not yet written. `None` when an input's bytes do not check out.
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    inputs: &[Input],
    p: &Plan,
    sink: &mut Sink,
) -> Result<Option<IvfBlob>> {
    let mut w = RunWriter::new(p.codes);
    let raw_len = p.codes.dim as u64 * 4 + 4;
    let mut cuts: Cuts = vec![BTreeMap::new(); inputs.len()];
    for raws in [false, true] {
        for &chunk in &p.chunks {
            let pass = Pass {
                raws,
                raw_len,
                chunk,
            };
            if !write_chunk(reader, inputs, p, pass, &mut cuts, &mut w, sink).await? {
                return Ok(None);
            }
        }
    }
    Ok(w.finish().ok())
}

/// A chunk of partitions (`lo..=hi`) in one of the two passes.
#[derive(Clone, Copy)]
struct Pass {
    raws: bool,
    raw_len: u64,
    chunk: (u32, u32),
}

/// One chunk of partitions of every input into the run: their codes, or with `raws` their
/// raw vectors. `false` when an input's bytes do not check out.
async fn write_chunk(
    reader: &ObjectStoreReader,
    inputs: &[Input],
    p: &Plan,
    Pass {
        raws,
        raw_len,
        chunk: (lo, hi),
    }: Pass,
    cuts: &mut Cuts,
    w: &mut RunWriter,
    sink: &mut Sink,
) -> Result<bool> {
    let (dirs, sizes) = (&p.dirs, &p.sizes);
    // Per input: its partitions lo..=hi (indexes a..b), whose codes — or raw vectors — are
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
    let futs: Vec<_> = inputs
        .iter()
        .zip(&spans)
        .map(|(i, s)| async move {
            let Some((_, _, r)) = s else {
                return Ok::<_, crate::error::Error>(None);
            };
            let b = i.read(reader, r.clone()).await?;
            Ok(Some(b))
        })
        .collect();
    let got: Vec<Option<bytes::Bytes>> = futures::stream::iter(futs)
        .buffered(READS)
        .try_collect()
        .await?;
    // Each input's next partition within the chunk.
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
            let input = &inputs[o];
            if raws {
                // In entry order, as the codes pass cut them.
                match cuts[o].remove(&id) {
                    None => pieces.push((0, part)),
                    Some(runs) => {
                        let mut at = 0usize;
                        for (n, keep) in runs {
                            let len = n as usize * raw_len as usize;
                            let Some(run) = part.get(at..at + len) else {
                                return Ok(false);
                            };
                            if keep {
                                pieces.push((0, run));
                            }
                            at += len;
                        }
                    }
                }
                continue;
            }
            // Its CRC-32 and file runs, each file's entries under its new ordinal.
            let Ok(runs) = d.file_runs(p, part) else {
                return Ok(false);
            };
            let mut cut = Vec::new();
            for run in &runs {
                let Some(new) = input.map.get(run.ordinal as usize) else {
                    return Ok(false); // an ordinal the input does not have
                };
                if let Some(new) = new {
                    pieces.push((*new, &part[run.bytes.clone()]));
                }
                cut.push((run.entries, new.is_some()));
            }
            if !input.keeps_all() {
                cuts[o].insert(id, cut);
            }
        }
        if raws {
            for (_, bytes) in &pieces {
                if w.raws(bytes).is_err() {
                    return Ok(false);
                }
                // The bytes as they are (checked): one part of the upload at a time.
                sink.put(bytes.to_vec()).await?;
            }
        } else if pieces.is_empty() {
            // Every file of the partition left out.
        } else {
            match w.partition(id, &pieces) {
                Ok(b) => sink.put(b).await?,
                Err(_) => return Ok(false),
            }
        }
    }
    Ok(true)
}
