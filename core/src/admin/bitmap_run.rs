//! A bitmap index's table run (`docs/bitmap-index.md`, "Table runs"): every covered file's
//! bitmaps laid out value by value in one `skerry-bitmap-run-v1` blob, so a count reads the
//! files holding a value — with their cardinalities — in one range whatever the number of
//! files.
//!
//! The run's inputs ([`Input`]) are the files' own blobs and the earlier runs it merges (RFC
//! 0004 tiers): a merge reads the runs, never the blobs of the files they cover, and leaves out
//! the bitmaps of files a run covers that are no longer covered (rewritten, removed).
//!
//! The run is streamed: the inputs' directories are read once (checked against their manifest
//! SHA-256), the distinct values are taken in key order in chunks of about [`CHUNK_BYTES`] of
//! bitmaps (one range read per input and chunk, [`READS`] at a time), every bitmap checked
//! against its hash and written straight into the multipart upload. Memory is one chunk and
//! the directories, whatever the table's size.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use crate::admin::run_bundle::{self, Input, Sink};
use crate::error::Result;
use crate::index::bitmap::run::{self, RunDirectory, RunTail, RunWriter};
use crate::index::bitmap::{self, BitmapDirectory};
use crate::io::ObjectStoreReader;

/// Bytes of bitmaps read per chunk of values (over all inputs).
pub(crate) const CHUNK_BYTES: u64 = 32 << 20;
/// Range reads in flight while a chunk is gathered.
const READS: usize = 8;

/// An input's directory: a file's blob's, or an earlier run's.
enum Directory {
    Blob(BitmapDirectory),
    Run(RunDirectory),
}

impl Directory {
    /// The byte range (relative to the blob) of value `j`: a file's bitmap, or a run's files
    /// and bitmaps of the value.
    fn range(&self, j: usize) -> std::ops::Range<u64> {
        match self {
            Directory::Blob(d) => d.values[j].offset..d.values[j].offset + d.values[j].length,
            Directory::Run(d) => d.values[j].offset..d.values[j].offset + d.values[j].length,
        }
    }
}

/// What a run of the inputs is made of: their directories and the distinct values (each
/// with its holders: input and index in that input's directory), in key order, cut into
/// chunks.
pub(crate) struct Plan {
    dirs: Vec<Directory>,
    values: Vec<(Vec<u8>, Vec<(u32, u32)>)>,
    /// Ranges of `values`.
    chunks: Vec<std::ops::Range<usize>>,
    /// The run's files (new ordinals).
    files: u64,
}

/// Reads every input's directory (checked against its manifest SHA-256 and cardinalities)
/// and plans the run. `None` when no run can be made (a blob of another kind or a damaged
/// directory: the runs and blobs there serve the index meanwhile, and their readers reject
/// the damaged one).
pub(crate) async fn plan(reader: &ObjectStoreReader, inputs: &[Input]) -> Result<Option<Plan>> {
    let files: usize = inputs.iter().map(|i| i.map.iter().flatten().count()).sum();
    if files >= u32::MAX as usize {
        return Ok(None);
    }
    // (Futures collected first: a stream mapping borrowed items to futures is not `Send`
    // for every lifetime, which the addon's spawned builds need.)
    let futs: Vec<_> = inputs
        .iter()
        .map(|i| async move {
            let m = &i.meta;
            let bytes = i.directory(reader).await?;
            let (sha, off) = (Some(m.directory_sha256.as_str()), m.directory_offset);
            Ok::<_, crate::error::Error>(if i.run {
                RunDirectory::parse(&bytes, sha, off, i.map.len() as u64)
                    .ok()
                    .map(Directory::Run)
            } else {
                BitmapDirectory::parse(&bytes, sha, off)
                    .ok()
                    .filter(|d| d.positions() == m.entries)
                    .map(Directory::Blob)
            })
        })
        .collect();
    let dirs: Vec<Option<Directory>> = futures::stream::iter(futs)
        .buffered(READS)
        .try_collect()
        .await?;
    let Some(dirs) = dirs.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let mut by_key: BTreeMap<&[u8], Vec<(u32, u32)>> = BTreeMap::new();
    for (o, d) in dirs.iter().enumerate() {
        let keys: Vec<&[u8]> = match d {
            Directory::Blob(d) => d.values.iter().map(|v| v.key.as_slice()).collect(),
            Directory::Run(d) => d.values.iter().map(|v| v.key.as_slice()).collect(),
        };
        for (i, k) in keys.into_iter().enumerate() {
            by_key.entry(k).or_default().push((o as u32, i as u32));
        }
    }
    let values: Vec<(Vec<u8>, Vec<(u32, u32)>)> =
        by_key.into_iter().map(|(k, h)| (k.to_vec(), h)).collect();
    let chunks = run_bundle::chunks(
        values.iter().map(|(_, holders)| {
            holders
                .iter()
                .map(|&(o, j)| {
                    let r = dirs[o as usize].range(j as usize);
                    r.end - r.start
                })
                .sum::<u64>()
        }),
        CHUNK_BYTES,
    );
    Ok(Some(Plan {
        dirs,
        values,
        chunks,
        files: files as u64,
    }))
}

/// Streams the run `p` plans into `sink` and returns its directory and trailer, not yet
/// written. `None` when an input's bytes do not check out.
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    inputs: &[Input],
    p: &Plan,
    sink: &mut Sink,
) -> Result<Option<RunTail>> {
    let mut w = RunWriter::new(p.files);
    for chunk in &p.chunks {
        if !write_chunk(reader, inputs, p, chunk.clone(), &mut w, sink).await? {
            return Ok(None);
        }
    }
    Ok(Some(w.finish()))
}

/// The values `chunk` of every input into the run. `false` when a bitmap's bytes do not
/// check out.
async fn write_chunk(
    reader: &ObjectStoreReader,
    inputs: &[Input],
    p: &Plan,
    chunk: std::ops::Range<usize>,
    w: &mut RunWriter,
    sink: &mut Sink,
) -> Result<bool> {
    let values = &p.values[chunk];
    // Per input: the indexes of its values in the chunk (a contiguous run of its directory,
    // since both are in key order), and so one contiguous range of its blob.
    let mut span: Vec<Option<(u32, u32)>> = vec![None; p.dirs.len()];
    for (_, holders) in values {
        for &(o, j) in holders {
            let s = span[o as usize].get_or_insert((j, j));
            s.1 = j;
        }
    }
    let futs: Vec<_> = inputs
        .iter()
        .zip(&span)
        .zip(&p.dirs)
        .map(|((i, s), d)| async move {
            let Some((a, b)) = *s else {
                return Ok::<_, crate::error::Error>(None);
            };
            let r = d.range(a as usize).start..d.range(b as usize).end;
            let bytes = i.read(reader, r.clone()).await?;
            Ok(Some((r.start, bytes)))
        })
        .collect();
    let got: Vec<Option<(u64, bytes::Bytes)>> = futures::stream::iter(futs)
        .buffered(READS)
        .try_collect()
        .await?;
    for (key, holders) in values {
        let mut pieces: Vec<(u64, &[u8], u64)> = Vec::with_capacity(holders.len());
        for &(o, j) in holders {
            let Some((start, bytes)) = &got[o as usize] else {
                return Ok(false);
            };
            let input = &inputs[o as usize];
            let r = p.dirs[o as usize].range(j as usize);
            let at = (r.start - start) as usize;
            let Some(b) = bytes.get(at..at + (r.end - r.start) as usize) else {
                return Ok(false);
            };
            match &p.dirs[o as usize] {
                Directory::Blob(d) => {
                    // The bitmap as its file's blob holds it, checked against its directory
                    // entry.
                    let v = &d.values[j as usize];
                    let (Some(Some(new)), Some(&rows)) = (input.map.first(), input.rows.first())
                    else {
                        return Ok(false);
                    };
                    if bitmap::decode_bitmap(b, v, Some(rows)).is_err() {
                        return Ok(false);
                    }
                    pieces.push((u64::from(*new), b, v.cardinality));
                }
                Directory::Run(d) => {
                    // The value's files (checked against their hash), each kept file's
                    // bitmap checked against its own, under its new ordinal.
                    let v = &d.values[j as usize];
                    let Ok(files) =
                        run::parse_files(&b[..v.files_length as usize], v, input.map.len() as u64)
                    else {
                        return Ok(false);
                    };
                    for f in &files {
                        let Some(new) = input.map[f.ordinal as usize] else {
                            continue;
                        };
                        let fb = &b[(f.range.start - v.offset) as usize
                            ..(f.range.end - v.offset) as usize];
                        if run::decode(fb, f, input.rows[f.ordinal as usize]).is_err() {
                            return Ok(false);
                        }
                        pieces.push((u64::from(new), fb, f.cardinality));
                    }
                }
            }
        }
        if pieces.is_empty() {
            continue; // every file holding the value left out
        }
        match w.value(key, &pieces) {
            Ok(b) => sink.put(b).await?,
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}
