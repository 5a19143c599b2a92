//! A full-text index's table run (`docs/fulltext-index.md`, "Table runs"): every covered
//! file's postings merged term by term into one `skerry-fulltext-v1` blob over the files'
//! rows end to end ([`crate::index::fulltext::run`]).
//!
//! The merge is streamed: each covered blob's directory is read once (checked against its
//! manifest SHA-256), then its term blocks, postings and positions are read front to back
//! through a window of [`window_bytes`] each — every region of a per-file blob is in term
//! order — while a heap takes the terms in order across files. A term's postings are checked
//! (CRC-32) and decoded file by file, shifted by the file's base row, re-encoded and handed to
//! the multipart upload. Memory is three windows per file, one term's postings and the term
//! blocks written so far (a few bytes per term), whatever the table's size.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ops::Range;

use futures::{StreamExt, TryStreamExt};

use crate::admin::run_bundle::{self, Sink};
use crate::error::Result;
use crate::formats::manifest::*;
use crate::index::fulltext::run::{RunTail, RunWriter, TermGather, MAX_RUN_ROWS};
use crate::index::fulltext::{
    self, check_positions, parse_term_block, FulltextDirectory, FulltextSpec, Postings, TermEntry,
};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Bytes of windows over all files (each file gets three, at least [`MIN_WINDOW`]).
const WINDOWS_BYTES: u64 = 96 << 20;
const MIN_WINDOW: u64 = 64 << 10;
const MAX_WINDOW: u64 = 8 << 20;
/// Run bytes handed to the upload at once.
const PUT_BYTES: usize = 8 << 20;
/// Directory reads in flight.
const READS: usize = 8;

/// Bytes each window of a run over `files` files reads at once.
pub(crate) fn window_bytes(files: usize) -> u64 {
    (WINDOWS_BYTES / (3 * files.max(1) as u64)).clamp(MIN_WINDOW, MAX_WINDOW)
}

/// A front-to-back reader of one region of a blob: ranges asked for in increasing order are
/// served from a window read `chunk` bytes at a time (never past `limit`).
struct Window {
    at: u64,
    bytes: bytes::Bytes,
    limit: u64,
}

impl Window {
    async fn get(
        &mut self,
        reader: &ObjectStoreReader,
        blob: &Blob<'_>,
        r: Range<u64>,
        chunk: u64,
    ) -> Result<Option<bytes::Bytes>> {
        if r.start < self.at || r.end > self.limit || r.start > r.end {
            return Ok(None);
        }
        if r.end > self.at + self.bytes.len() as u64 {
            let end = r.end.max(r.start.saturating_add(chunk).min(self.limit));
            self.bytes = reader
                .read_range(
                    &Location::new(blob.bundle),
                    blob.offset + r.start..blob.offset + end,
                )
                .await?;
            self.at = r.start;
            if (self.bytes.len() as u64) < end - r.start {
                return Ok(None);
            }
        }
        let a = (r.start - self.at) as usize;
        Ok(Some(self.bytes.slice(a..a + (r.end - r.start) as usize)))
    }
}

struct Blob<'a> {
    bundle: &'a str,
    offset: u64,
}

/// One covered file's blob, read term by term.
struct Input<'a> {
    blob: Blob<'a>,
    dir: FulltextDirectory,
    base: u32,
    next_block: usize,
    entries: VecDeque<TermEntry>,
    blocks: Window,
    postings: Window,
    positions: Window,
}

impl Input<'_> {
    /// Its next term's entry (`None`: done; `Err(None)`: damage).
    async fn advance(
        &mut self,
        reader: &ObjectStoreReader,
        chunk: u64,
        length: u64,
    ) -> Result<std::result::Result<Option<TermEntry>, ()>> {
        while self.entries.is_empty() {
            let Some(r) = self.dir.blocks.get(self.next_block) else {
                return Ok(Ok(None));
            };
            self.next_block += 1;
            let Some(b) = self
                .blocks
                .get(reader, &self.blob, r.offset..r.offset + r.length, chunk)
                .await?
            else {
                return Ok(Err(()));
            };
            match parse_term_block(&b, r, &self.dir, length) {
                Ok(es) => self.entries.extend(es),
                Err(_) => return Ok(Err(())),
            }
        }
        Ok(Ok(self.entries.pop_front()))
    }
}

/// Merges the blobs of `covered` (in that order: ordinal = index) into a run streamed into
/// `sink`; its tail, not yet written. `None` when the run cannot be made: the files' rows
/// pass [`MAX_RUN_ROWS`], or a blob is of another kind or definition, or damaged (per-file
/// blobs serve the index meanwhile, and their readers reject the damaged one).
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    spec: &FulltextSpec,
    covered: &[(FileEntry, IndexFileEntry)],
    sink: &mut Sink,
) -> Result<Option<RunTail>> {
    let rows: u64 = covered
        .iter()
        .map(|(_, a)| a.lineage.source_record_count)
        .sum();
    if rows > MAX_RUN_ROWS {
        return Ok(None);
    }
    // Directories.
    let futs: Vec<_> = covered
        .iter()
        .map(|(_, a)| async move {
            let (l, m) = (&a.lineage, &a.ordered);
            let Some(bytes) = run_bundle::blob_directory(reader, a, fulltext::BLOB_TYPE).await?
            else {
                return Ok(None);
            };
            Ok::<_, crate::error::Error>(
                FulltextDirectory::parse(&bytes, Some(&m.directory_sha256), l.blob_length)
                    .ok()
                    .filter(|d| {
                        d.tokenizer == spec.tokenizer
                            && d.positions == spec.positions
                            && !d.interleaved
                            && d.rows == l.source_record_count
                            && m.text
                                .is_some_and(|t| t.docs == d.docs && t.tokens == d.tokens)
                    }),
            )
        })
        .collect();
    let dirs: Vec<Option<FulltextDirectory>> = futures::stream::iter(futs)
        .buffered(READS)
        .try_collect()
        .await?;
    let Some(dirs) = dirs.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let chunk = window_bytes(covered.len());
    let (mut docs, mut tokens) = (0u64, 0u64);
    let mut inputs: Vec<Input> = Vec::with_capacity(covered.len());
    let mut base = 0u64;
    for ((_, a), dir) in covered.iter().zip(dirs) {
        let l = &a.lineage;
        docs += dir.docs;
        tokens += dir.tokens;
        let first_block = dir.blocks.first().map_or(0, |b| b.offset);
        inputs.push(Input {
            blob: Blob {
                bundle: &l.bundle_path,
                offset: l.blob_offset,
            },
            base: base as u32,
            next_block: 0,
            entries: VecDeque::new(),
            blocks: Window {
                at: first_block,
                bytes: bytes::Bytes::new(),
                limit: a.ordered.directory_offset,
            },
            postings: Window {
                at: 0,
                bytes: bytes::Bytes::new(),
                limit: dir.positions_start,
            },
            positions: Window {
                at: dir.positions_start,
                bytes: bytes::Bytes::new(),
                limit: first_block.max(dir.positions_start),
            },
            dir,
        });
        base += l.source_record_count;
    }
    // The heap of each input's current term.
    let mut current: Vec<Option<TermEntry>> = Vec::with_capacity(inputs.len());
    let mut heap: BinaryHeap<Reverse<(Vec<u8>, u32)>> = BinaryHeap::new();
    for (o, (inp, (_, a))) in inputs.iter_mut().zip(covered).enumerate() {
        match inp.advance(reader, chunk, a.lineage.blob_length).await? {
            Ok(Some(e)) => {
                heap.push(Reverse((e.term.clone(), o as u32)));
                current.push(Some(e));
            }
            Ok(None) => current.push(None),
            Err(()) => return Ok(None),
        }
    }
    let mut w = RunWriter::new(spec.positions, docs, tokens);
    let mut g = TermGather::default();
    let mut holders: Vec<u32> = Vec::new();
    while let Some(Reverse((term, o))) = heap.pop() {
        holders.clear();
        holders.push(o);
        while heap.peek().is_some_and(|Reverse((t, _))| *t == term) {
            let Reverse((_, o)) = heap.pop().expect("peeked");
            holders.push(o);
        }
        holders.sort_unstable();
        g.clear();
        for &o in &holders {
            let inp = &mut inputs[o as usize];
            let e = current[o as usize].take().expect("a held term");
            let length = covered[o as usize].1.lineage.blob_length;
            let Some(pb) = inp
                .postings
                .get(reader, &inp.blob, e.postings.clone(), chunk)
                .await?
            else {
                return Ok(None);
            };
            let Ok(p) = Postings::parse(pb, &e, inp.dir.rows) else {
                return Ok(None);
            };
            let pos = match &e.positions {
                Some((r, crc)) if spec.positions => {
                    let Some(b) = inp
                        .positions
                        .get(reader, &inp.blob, r.clone(), chunk)
                        .await?
                    else {
                        return Ok(None);
                    };
                    if check_positions(&b, *crc).is_err() {
                        return Ok(None);
                    }
                    Some(b)
                }
                _ => None,
            };
            if g.append(&p, pos.as_deref(), inp.base).is_err() {
                return Ok(None);
            }
            match inp.advance(reader, chunk, length).await? {
                Ok(Some(next)) => {
                    heap.push(Reverse((next.term.clone(), o)));
                    current[o as usize] = Some(next);
                }
                Ok(None) => {}
                Err(()) => return Ok(None),
            }
        }
        w.term(&term, g.as_ref());
        if w.pending() >= PUT_BYTES {
            sink.put(w.take()).await?;
        }
    }
    Ok(Some(w.finish(spec.tokenizer, rows)))
}

#[cfg(test)]
mod tests {
    use super::window_bytes;

    #[test]
    fn windows_share_a_budget_within_bounds() {
        assert_eq!(window_bytes(1), 8 << 20);
        assert_eq!(window_bytes(200), (96 << 20) / 600);
        assert_eq!(window_bytes(100_000), 64 << 10);
    }
}
