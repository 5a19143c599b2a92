//! A bitmap index's table run (`docs/bitmap-index.md`, "Table runs"): every covered file's
//! bitmaps laid out value by value in one `skerry-bitmap-run-v1` blob, so a count reads the
//! files holding a value — with their cardinalities — in one range whatever the number of
//! files.
//!
//! The run is streamed: the files' directories are read once (checked against their manifest
//! SHA-256), the distinct values are taken in key order in chunks of about [`CHUNK_BYTES`] of
//! bitmaps (one range read per file and chunk, [`READS`] at a time), every bitmap checked
//! against its hash and written straight into the multipart upload. Memory is one chunk and
//! the directories, whatever the table's size.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use crate::admin::run_bundle::{self, Sink};
use crate::error::Result;
use crate::formats::manifest::*;
use crate::index::bitmap::run::{RunTail, RunWriter};
use crate::index::bitmap::{self, BitmapDirectory};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Bytes of bitmaps read per chunk of values (over all files).
pub(crate) const CHUNK_BYTES: u64 = 32 << 20;
/// Range reads in flight while a chunk is gathered.
const READS: usize = 8;

/// What a run of `covered` is made of: their blobs' directories (by ordinal) and the distinct
/// values (each with its holders: ordinal and index in that file's directory), in key order,
/// cut into chunks.
pub(crate) struct Plan {
    dirs: Vec<BitmapDirectory>,
    values: Vec<(Vec<u8>, Vec<(u32, u32)>)>,
    /// Ranges of `values`.
    chunks: Vec<std::ops::Range<usize>>,
}

/// Reads every covered blob's directory (checked against its manifest SHA-256 and
/// cardinalities) and plans the run. `None` when no run can be made (a blob of another kind
/// or a damaged directory: per-file blobs serve the index meanwhile, and their readers
/// reject the damaged one).
pub(crate) async fn plan(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
) -> Result<Option<Plan>> {
    if covered.len() >= u32::MAX as usize {
        return Ok(None);
    }
    // (Futures collected first: a stream mapping borrowed items to futures is not `Send`
    // for every lifetime, which the addon's spawned builds need.)
    let futs: Vec<_> = covered
        .iter()
        .map(|(_, a)| async move {
            let m = &a.ordered;
            let Some(bytes) = run_bundle::blob_directory(reader, a, bitmap::BLOB_TYPE).await?
            else {
                return Ok(None);
            };
            Ok::<_, crate::error::Error>(
                BitmapDirectory::parse(&bytes, Some(&m.directory_sha256), m.directory_offset)
                    .ok()
                    .filter(|d| d.positions() == m.entries),
            )
        })
        .collect();
    let dirs: Vec<Option<BitmapDirectory>> = futures::stream::iter(futs)
        .buffered(READS)
        .try_collect()
        .await?;
    let Some(dirs) = dirs.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let mut by_key: BTreeMap<&[u8], Vec<(u32, u32)>> = BTreeMap::new();
    for (o, d) in dirs.iter().enumerate() {
        for (i, v) in d.values.iter().enumerate() {
            by_key
                .entry(v.key.as_slice())
                .or_default()
                .push((o as u32, i as u32));
        }
    }
    let values: Vec<(Vec<u8>, Vec<(u32, u32)>)> =
        by_key.into_iter().map(|(k, h)| (k.to_vec(), h)).collect();
    let chunks = run_bundle::chunks(
        values.iter().map(|(_, holders)| {
            holders
                .iter()
                .map(|&(o, j)| dirs[o as usize].values[j as usize].length)
                .sum::<u64>()
        }),
        CHUNK_BYTES,
    );
    Ok(Some(Plan {
        dirs,
        values,
        chunks,
    }))
}

/// Streams the run `p` plans into `sink` and returns its directory and trailer, not yet
/// written. `None` when a blob's bytes do not check out.
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
    p: &Plan,
    sink: &mut Sink,
) -> Result<Option<RunTail>> {
    let mut w = RunWriter::new(covered.len() as u64);
    for chunk in &p.chunks {
        if !write_chunk(reader, covered, p, chunk.clone(), &mut w, sink).await? {
            return Ok(None);
        }
    }
    Ok(Some(w.finish()))
}

/// The values `chunk` of every covered file into the run. `false` when a bitmap's bytes do
/// not check out.
async fn write_chunk(
    reader: &ObjectStoreReader,
    covered: &[(FileEntry, IndexFileEntry)],
    p: &Plan,
    chunk: std::ops::Range<usize>,
    w: &mut RunWriter,
    sink: &mut Sink,
) -> Result<bool> {
    let values = &p.values[chunk];
    // Per file: the indexes of its values in the chunk (a contiguous run of its directory,
    // since both are in key order), and so one contiguous range of its blob.
    let mut span: Vec<Option<(u32, u32)>> = vec![None; p.dirs.len()];
    for (_, holders) in values {
        for &(o, j) in holders {
            let s = span[o as usize].get_or_insert((j, j));
            s.1 = j;
        }
    }
    let futs: Vec<_> = covered
        .iter()
        .zip(&span)
        .zip(&p.dirs)
        .map(|(((_, e), s), d)| async move {
            let Some((a, b)) = *s else {
                return Ok::<_, crate::error::Error>(None);
            };
            let (first, last) = (&d.values[a as usize], &d.values[b as usize]);
            let o = e.lineage.blob_offset;
            let r = first.offset..last.offset.saturating_add(last.length);
            let bytes = reader
                .read_range(
                    &Location::new(&e.lineage.bundle_path),
                    o.saturating_add(r.start)..o.saturating_add(r.end),
                )
                .await?;
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
            let v = &p.dirs[o as usize].values[j as usize];
            let Some((start, bytes)) = &got[o as usize] else {
                return Ok(false);
            };
            let at = (v.offset - start) as usize;
            let Some(b) = bytes.get(at..at + v.length as usize) else {
                return Ok(false);
            };
            // The bitmap as its file's blob holds it, checked against its directory entry.
            if bitmap::decode_bitmap(b, v, Some(covered[o as usize].0.record_count)).is_err() {
                return Ok(false);
            }
            pieces.push((u64::from(o), b, v.cardinality));
        }
        match w.value(key, &pieces) {
            Ok(b) => sink.put(b).await?,
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}
