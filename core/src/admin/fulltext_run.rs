//! A full-text index's table run (`docs/fulltext-index.md`, "Table runs"): every covered
//! file's postings merged term by term into one `skerry-fulltext-v1` blob over the files'
//! rows end to end ([`crate::index::fulltext::run`]).
//!
//! The run's inputs ([`Input`]) are the files' own blobs and the earlier runs it merges (RFC
//! 0004 tiers): a merge reads the runs, never the blobs of the files they cover, and leaves out
//! the postings (and statistics) of files a run covers that are no longer covered.
//!
//! The merge is streamed: each input's directory is read once (checked against its manifest
//! SHA-256), then its term blocks, postings and positions are read front to back
//! through a window of [`window_bytes`] each — every region of a per-file blob is in term
//! order — while a heap takes the terms in order across files. A term's postings are checked
//! (CRC-32) and decoded file by file, shifted by the file's base row, re-encoded and handed to
//! the multipart upload. Memory is three windows per file, one term's postings and the term
//! blocks written so far (a few bytes per term), and a length per row: the run's being written
//! (two bytes) and the earlier runs' length tables, read whole (four).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ops::Range;

use futures::{StreamExt, TryStreamExt};

use crate::admin::run_bundle::{Input, Sink};
use crate::error::Result;
use crate::formats::manifest::*;
use crate::index::fulltext::run::{RunTail, RunWriter, TermGather, MAX_RUN_ROWS};
use crate::index::fulltext::{
    check_positions, parse_term_block, FulltextDirectory, FulltextSpec, Postings, TermEntry,
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

/// One input (a file's blob or an earlier run), read term by term.
struct Source<'a> {
    blob: Blob<'a>,
    dir: FulltextDirectory,
    /// Where its rows go in the run.
    rows: Rows,
    next_block: usize,
    entries: VecDeque<TermEntry>,
    blocks: Window,
    postings: Window,
    positions: Window,
    /// Its length table read whole, each row's length (an earlier run's; empty without one).
    table: Vec<u32>,
}

/// How an input's rows become the run's.
enum Rows {
    /// All kept, shifted by this.
    Shift(u32),
    /// Old ordinal → (old base, record count, new base or `None`: left out), by old base.
    Map(Vec<(u64, u64, Option<u64>)>),
}

impl Rows {
    fn map(&self, r: u32) -> Option<u32> {
        match self {
            Rows::Shift(b) => r.checked_add(*b),
            Rows::Map(m) => {
                let r = u64::from(r);
                let k = m
                    .partition_point(|(base, _, _)| *base <= r)
                    .checked_sub(1)?;
                let (base, count, new) = m[k];
                if r - base >= count {
                    return None;
                }
                u32::try_from(new? + (r - base)).ok()
            }
        }
    }
}

impl Source<'_> {
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

/// Merges the inputs (the run's files `covered`, by new ordinal, and where their entries
/// are: [`Input`]) into a run streamed into `sink`; its tail, not yet written. `None` when the
/// run cannot be made: the files' rows pass [`MAX_RUN_ROWS`], or an input is of another kind
/// or definition, or damaged, or a run left a file out whose statistics it does not record
/// (the runs and blobs there serve the index meanwhile, and their readers reject the damaged
/// one).
pub(crate) async fn write(
    reader: &ObjectStoreReader,
    spec: &FulltextSpec,
    inputs: &[Input],
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
    // Each new ordinal's first row in the run.
    let mut new_base = Vec::with_capacity(covered.len());
    let mut at = 0u64;
    for (_, a) in covered {
        new_base.push(at);
        at += a.lineage.source_record_count;
    }
    // Directories.
    let futs: Vec<_> = inputs
        .iter()
        .map(|i| async move {
            let m = &i.meta;
            let bytes = i.directory(reader).await?;
            let rows: u64 = if i.run {
                i.files.iter().map(|f| f.record_count).sum()
            } else {
                i.rows.first().copied().unwrap_or(0)
            };
            Ok::<_, crate::error::Error>(
                FulltextDirectory::parse(&bytes, Some(&m.directory_sha256), i.length)
                    .ok()
                    .filter(|d| {
                        d.tokenizer == spec.tokenizer
                            && d.positions == spec.positions
                            && d.interleaved == i.run
                            && d.rows == rows
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
    let chunk = window_bytes(inputs.len());
    let (mut docs, mut tokens) = (0u64, 0u64);
    let mut sources: Vec<Source> = Vec::with_capacity(inputs.len());
    for (i, dir) in inputs.iter().zip(dirs) {
        docs += dir.docs;
        tokens += dir.tokens;
        let rows = if !i.run {
            let Some(Some(n)) = i.map.first() else {
                return Ok(None);
            };
            Rows::Shift(new_base[*n as usize] as u32)
        } else {
            // A left-out file's statistics leave the run's with it.
            let mut m = Vec::with_capacity(i.files.len());
            let mut old = 0u64;
            for (f, new) in i.files.iter().zip(&i.map) {
                if new.is_none() {
                    let Some(t) = f.text else {
                        return Ok(None);
                    };
                    docs = docs.saturating_sub(t.docs);
                    tokens = tokens.saturating_sub(t.tokens);
                }
                m.push((old, f.record_count, new.map(|n| new_base[n as usize])));
                old += f.record_count;
            }
            let shift = |(o, _, n): &(u64, u64, Option<u64>)| n.map(|n| n.checked_sub(*o));
            match m.first().map(shift) {
                Some(Some(Some(s))) if m.iter().all(|x| shift(x) == Some(Some(s))) => {
                    Rows::Shift(s as u32)
                }
                _ => Rows::Map(m),
            }
        };
        let first_block = dir.blocks.first().map_or(0, |b| b.offset);
        // An earlier run's length table, read whole and checked group by group.
        let table = match &dir.lengths {
            Some(t) => {
                let at = i.blob_offset + t.offset;
                let bytes = reader
                    .read_range(&Location::new(&i.bundle_path), at..at + t.length)
                    .await?;
                match t.decode_all(&bytes) {
                    Ok(v) => v,
                    Err(_) => return Ok(None),
                }
            }
            None => Vec::new(),
        };
        // A run's positions follow each term's postings: one window serves both.
        let postings_end = if dir.interleaved {
            first_block
        } else {
            dir.positions_start
        };
        sources.push(Source {
            blob: Blob {
                bundle: &i.bundle_path,
                offset: i.blob_offset,
            },
            rows,
            next_block: 0,
            entries: VecDeque::new(),
            blocks: Window {
                at: first_block,
                bytes: bytes::Bytes::new(),
                limit: i.meta.directory_offset,
            },
            postings: Window {
                at: 0,
                bytes: bytes::Bytes::new(),
                limit: postings_end,
            },
            positions: Window {
                at: dir.positions_start,
                bytes: bytes::Bytes::new(),
                limit: first_block.max(dir.positions_start),
            },
            dir,
            table,
        });
    }
    // The heap of each input's current term.
    let mut current: Vec<Option<TermEntry>> = Vec::with_capacity(sources.len());
    let mut heap: BinaryHeap<Reverse<(Vec<u8>, u32)>> = BinaryHeap::new();
    for (o, (src, i)) in sources.iter_mut().zip(inputs).enumerate() {
        match src.advance(reader, chunk, i.length).await? {
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
            let src = &mut sources[o as usize];
            let e = current[o as usize].take().expect("a held term");
            let length = inputs[o as usize].length;
            let Some(pb) = src
                .postings
                .get(reader, &src.blob, e.postings.clone(), chunk)
                .await?
            else {
                return Ok(None);
            };
            let Ok(p) = Postings::parse(pb, &e, src.dir.rows) else {
                return Ok(None);
            };
            let pos = match &e.positions {
                Some((r, crc)) if spec.positions => {
                    let window = if src.dir.interleaved {
                        &mut src.postings
                    } else {
                        &mut src.positions
                    };
                    let Some(b) = window.get(reader, &src.blob, r.clone(), chunk).await? else {
                        return Ok(None);
                    };
                    if check_positions(&b, *crc).is_err() {
                        return Ok(None);
                    }
                    Some(b)
                }
                _ => None,
            };
            let appended = match &src.rows {
                Rows::Shift(base) => g.append(&p, pos.as_deref(), &src.table, *base),
                rows => g.append_mapped(&p, pos.as_deref(), &src.table, |r| rows.map(r)),
            };
            if appended.is_err() {
                return Ok(None);
            }
            match src.advance(reader, chunk, length).await? {
                Ok(Some(next)) => {
                    heap.push(Reverse((next.term.clone(), o)));
                    current[o as usize] = Some(next);
                }
                Ok(None) => {}
                Err(()) => return Ok(None),
            }
        }
        if !g.rows.is_empty() {
            w.term(&term, g.as_ref());
        }
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
