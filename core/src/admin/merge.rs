//! Sorted ordered-index blobs read back as streams and merged in key order, with memory
//! bounded by the number of streams, never by their entries: the uniqueness check across
//! files ([`crate::admin::unique`]) and table runs ([`crate::admin::runs`]) both use it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::error::Result;
use crate::formats::manifest::OrderedMeta;
use crate::index::ordered::{self, BlobError, BlockRef, OrderedDirectory};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Most bytes of whole blocks one stream reads at a time.
pub(crate) const CHUNK_BYTES: u64 = 256 << 10;
/// Read-ahead budget shared by all the streams of one merge: with many streams each reads
/// less at a time (never less than one block).
pub(crate) const MERGE_BUDGET: u64 = 64 << 20;

/// Where an ordered blob is: its bundle, its offset there, and the manifest's facts about it
/// (directory range and SHA-256).
pub(crate) struct BlobAt<'a> {
    pub bundle_path: &'a str,
    pub blob_offset: u64,
    pub ordered: &'a OrderedMeta,
}

/// Reads and verifies a blob's directory (against the SHA-256 the manifest records).
pub(crate) async fn read_directory(
    reader: &ObjectStoreReader,
    at: &BlobAt<'_>,
) -> Result<(Location, OrderedDirectory)> {
    let (d, loc) = (at.ordered, Location::new(at.bundle_path));
    let start = at.blob_offset + d.directory_offset;
    let bytes = reader
        .read_range(&loc, start..start + d.directory_length)
        .await?;
    let dir = OrderedDirectory::parse(&bytes, Some(&d.directory_sha256), d.directory_offset)?;
    Ok((loc, dir))
}

/// Reads the consecutive blocks `blocks` of a blob at `blob_offset` in one request and calls
/// `f(key, position)` per entry, each block verified against its hash.
pub(crate) async fn read_blocks(
    reader: &ObjectStoreReader,
    loc: &Location,
    blob_offset: u64,
    blocks: &[BlockRef],
    mut f: impl FnMut(&[u8], u64),
) -> Result<()> {
    let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
        return Ok(());
    };
    let (start, end) = (first.offset, last.offset.saturating_add(last.length));
    let bytes = reader
        .read_range(loc, blob_offset + start..blob_offset + end)
        .await?;
    for b in blocks {
        let block = b
            .offset
            .checked_sub(start)
            .and_then(|s| bytes.get(s as usize..(s + b.length) as usize))
            .ok_or(BlobError::Corrupt("block range"))?;
        ordered::scan_block(block, b, |k, p| {
            f(k, p);
            true
        })?;
    }
    Ok(())
}

/// A blob's entries in order, read `chunk` bytes of whole blocks at a time.
pub(crate) struct BlobStream {
    reader: Arc<ObjectStoreReader>,
    loc: Location,
    blob_offset: u64,
    dir: OrderedDirectory,
    chunk: u64,
    next_block: usize,
    keys: Vec<u8>,
    refs: Vec<(usize, usize, u64)>,
    at: usize,
}

impl BlobStream {
    /// Opens a stream (reads the directory and the first chunk).
    pub async fn open(reader: Arc<ObjectStoreReader>, at: &BlobAt<'_>, chunk: u64) -> Result<Self> {
        let (loc, dir) = read_directory(&reader, at).await?;
        let mut s = BlobStream {
            reader,
            loc,
            blob_offset: at.blob_offset,
            dir,
            chunk,
            next_block: 0,
            keys: Vec::new(),
            refs: Vec::new(),
            at: 0,
        };
        s.fill().await?;
        Ok(s)
    }

    async fn fill(&mut self) -> Result<()> {
        self.keys.clear();
        self.refs.clear();
        self.at = 0;
        let blocks = &self.dir.blocks;
        while self.refs.is_empty() && self.next_block < blocks.len() {
            let first = self.next_block;
            let mut end = first + 1;
            while end < blocks.len()
                && (blocks[end].offset + blocks[end].length).saturating_sub(blocks[first].offset)
                    <= self.chunk
            {
                end += 1;
            }
            let (keys, refs) = (&mut self.keys, &mut self.refs);
            read_blocks(
                &self.reader,
                &self.loc,
                self.blob_offset,
                &blocks[first..end],
                |k, p| {
                    refs.push((keys.len(), k.len(), p));
                    keys.extend_from_slice(k);
                },
            )
            .await?;
            self.next_block = end;
        }
        Ok(())
    }

    /// The current entry, `None` at the end.
    pub fn head(&self) -> Option<(&[u8], u64)> {
        self.refs
            .get(self.at)
            .map(|&(s, l, p)| (&self.keys[s..s + l], p))
    }

    /// Moves to the next entry.
    pub async fn advance(&mut self) -> Result<()> {
        self.at += 1;
        if self.at >= self.refs.len() {
            self.fill().await?;
        }
        Ok(())
    }
}

/// The chunk each of `streams` streams of one merge reads at a time.
pub(crate) fn chunk_for(streams: usize) -> u64 {
    (MERGE_BUDGET / streams.max(1) as u64).min(CHUNK_BYTES)
}

/// One input of [`merge`]: a stream and how its stored positions become output positions
/// (`None`: the entry is left out).
pub(crate) struct MergeInput {
    pub stream: BlobStream,
    pub map: Box<dyn Fn(u64) -> Option<u64> + Send + Sync>,
}

/// A k-way merge of sorted inputs: [`Merge::next`] yields every kept entry in (key,
/// position) order. Each input must be sorted by (key, mapped position).
pub(crate) struct Merge {
    inputs: Vec<MergeInput>,
    heap: BinaryHeap<Reverse<(Vec<u8>, u64, usize)>>,
    started: bool,
    last: Option<usize>,
}

impl Merge {
    pub fn new(inputs: Vec<MergeInput>) -> Self {
        Merge {
            inputs,
            heap: BinaryHeap::new(),
            started: false,
            last: None,
        }
    }

    /// The next entry: its key, output position and input; `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Vec<u8>, u64, usize)>> {
        if !self.started {
            self.started = true;
            for i in 0..self.inputs.len() {
                self.push_next(i).await?;
            }
        }
        if let Some(i) = self.last.take() {
            self.inputs[i].stream.advance().await?;
            self.push_next(i).await?;
        }
        let Some(Reverse(e)) = self.heap.pop() else {
            return Ok(None);
        };
        self.last = Some(e.2);
        Ok(Some(e))
    }

    /// Pushes input `i`'s next kept entry (skipping left-out ones).
    async fn push_next(&mut self, i: usize) -> Result<()> {
        let input = &mut self.inputs[i];
        loop {
            let Some((k, p)) = input.stream.head() else {
                return Ok(());
            };
            if let Some(out) = (input.map)(p) {
                self.heap.push(Reverse((k.to_vec(), out, i)));
                return Ok(());
            }
            input.stream.advance().await?;
        }
    }
}
