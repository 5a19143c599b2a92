//! Sorted ordered-index blobs read back as streams and merged in key order, with memory
//! bounded by the number of streams, never by their entries: the uniqueness check across
//! files ([`crate::admin::unique`]) and table runs ([`crate::admin::runs`]) both use it.

use std::sync::Arc;

use crate::error::Result;
use crate::formats::manifest::OrderedMeta;
use crate::index::ordered::{self, BlobError, BlockRef, OrderedDirectory};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Most bytes of whole blocks one stream reads at a time.
pub(crate) const CHUNK_BYTES: u64 = 256 << 10;
/// Read-ahead budget shared by all the streams of one merge: with many streams each reads
/// less at a time (never less than one block).
pub(crate) const MERGE_BUDGET: u64 = 32 << 20;

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

/// Directories read at once by [`read_directories`]: a merge of 100,000 blobs must not
/// hold 100,000 reads (and open files) in flight.
pub(crate) const DIRECTORY_READS: usize = 32;

/// [`read_directory`] of each of `ats`, in order, [`DIRECTORY_READS`] at a time.
pub(crate) async fn read_directories(
    reader: &ObjectStoreReader,
    ats: &[BlobAt<'_>],
) -> Result<Vec<(Location, OrderedDirectory)>> {
    let mut out = Vec::with_capacity(ats.len());
    for window in ats.chunks(DIRECTORY_READS) {
        let got = futures::future::try_join_all(window.iter().map(|at| read_directory(reader, at)))
            .await?;
        out.extend(got);
    }
    Ok(out)
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
    end_block: usize,
    /// Keys kept: `lo <= key < hi` (a partition of a parallel merge).
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    /// The chunk read last (whole blocks `raw_next..raw_end` from blob offset `raw_start`).
    raw: bytes::Bytes,
    raw_start: u64,
    raw_next: usize,
    raw_end: usize,
    /// The block being read (verified; its bytes in `raw`), entries decoded one at a time:
    /// the next entry at `pos`, `left` entries to go, bounds checked per entry or not.
    block: std::ops::Range<usize>,
    pos: usize,
    left: u64,
    first: bool,
    check_lo: bool,
    check_hi: bool,
    /// The current entry (when `has`).
    key: Vec<u8>,
    position: u64,
    has: bool,
}

impl BlobStream {
    /// Opens a stream (reads the directory and the first chunk).
    #[cfg(test)]
    pub async fn open(reader: Arc<ObjectStoreReader>, at: &BlobAt<'_>, chunk: u64) -> Result<Self> {
        let (loc, dir) = read_directory(&reader, at).await?;
        Self::open_range(reader, loc, at.blob_offset, dir, chunk, None, None).await
    }

    /// A stream over the keys `lo <= key < hi` of a blob whose directory was read already.
    pub async fn open_range(
        reader: Arc<ObjectStoreReader>,
        loc: Location,
        blob_offset: u64,
        dir: OrderedDirectory,
        chunk: u64,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    ) -> Result<Self> {
        use std::ops::Bound;
        let lower = lo.as_deref().map_or(Bound::Unbounded, Bound::Included);
        let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let blocks = dir.blocks_for(lower, upper);
        let mut s = BlobStream {
            reader,
            loc,
            blob_offset,
            dir,
            chunk,
            next_block: blocks.start,
            end_block: blocks.end,
            lo,
            hi,
            raw: bytes::Bytes::new(),
            raw_start: 0,
            raw_next: 0,
            raw_end: 0,
            block: 0..0,
            pos: 0,
            left: 0,
            first: true,
            check_lo: false,
            check_hi: false,
            key: Vec::new(),
            position: 0,
            has: false,
        };
        s.fill().await?;
        Ok(s)
    }

    /// Moves to the first kept entry of the next block holding one, reading the next chunk
    /// of whole blocks when the current one is used up (`has` false at the end). Memory is
    /// the raw chunk and one key.
    async fn fill(&mut self) -> Result<()> {
        let end_block = self.end_block.min(self.dir.blocks.len());
        loop {
            self.has = false;
            if self.raw_next < self.raw_end {
                let b = &self.dir.blocks[self.raw_next];
                self.raw_next += 1;
                let start = b
                    .offset
                    .checked_sub(self.raw_start)
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or(BlobError::Corrupt("block range"))?;
                let range = start..start.saturating_add(b.length as usize);
                let bytes = self
                    .raw
                    .get(range.clone())
                    .ok_or(BlobError::Corrupt("block range"))?;
                ordered::verify_block(bytes, b)?;
                // Bounds are checked per entry only in blocks they cut: a block starting at
                // or after `lo` holds no key below it, and one followed by a block starting
                // below `hi` holds none at or above it.
                self.check_lo = self
                    .lo
                    .as_deref()
                    .is_some_and(|lo| b.first_key.as_slice() < lo);
                self.check_hi = self.hi.as_deref().is_some_and(|hi| {
                    self.dir
                        .blocks
                        .get(self.raw_next)
                        .is_none_or(|n| n.first_key.as_slice() >= hi)
                });
                (self.block, self.pos, self.left, self.first) = (range, 0, b.entries, true);
                self.key.clear();
                if self.step()? {
                    return Ok(());
                }
                continue;
            }
            if self.next_block >= end_block {
                self.raw = bytes::Bytes::new();
                return Ok(());
            }
            let first = self.next_block;
            let (end, start, stop) = chunk_of(&self.dir.blocks[..end_block], first, self.chunk);
            self.raw = self
                .reader
                .read_range(&self.loc, self.blob_offset + start..self.blob_offset + stop)
                .await?;
            self.raw_start = start;
            self.raw_next = first;
            self.raw_end = end;
            self.next_block = end;
        }
    }

    /// The current entry, `None` at the end.
    pub fn head(&self) -> Option<(&[u8], u64)> {
        self.has.then_some((self.key.as_slice(), self.position))
    }

    /// Moves to the next kept entry of the current block; `false` when the block holds no
    /// more (then [`BlobStream::fill`] moves to the next). Past `hi`, the stream ends.
    fn step(&mut self) -> Result<bool> {
        let block = self.raw.get(self.block.clone()).unwrap_or_default();
        while self.left > 0 {
            self.left -= 1;
            self.position = ordered::next_entry(block, &mut self.pos, self.first, &mut self.key)?;
            self.first = false;
            if self.left == 0 && self.pos != block.len() {
                return Err(BlobError::Corrupt("block length").into());
            }
            if self.check_lo
                && self
                    .lo
                    .as_deref()
                    .is_some_and(|lo| self.key.as_slice() < lo)
            {
                continue;
            }
            if self.check_hi
                && self
                    .hi
                    .as_deref()
                    .is_some_and(|hi| self.key.as_slice() >= hi)
            {
                // Sorted: nothing after this is kept.
                (self.left, self.raw_next, self.next_block) = (0, self.raw_end, usize::MAX);
                self.has = false;
                return Ok(false);
            }
            self.has = true;
            return Ok(true);
        }
        self.has = false;
        Ok(false)
    }

    /// Moves to the next entry.
    pub async fn advance(&mut self) -> Result<()> {
        if !self.step()? {
            self.fill().await?;
        }
        Ok(())
    }
}

/// Keys splitting the blobs of `dirs` (holding `entries` in all) into `parts` key ranges of
/// about equal entries, at block first keys: range `i` is `splits[i-1] <= key < splits[i]`,
/// so equal keys never straddle two. Fewer splits when the blocks do not allow as many.
pub(crate) fn split_keys<'a>(
    dirs: impl Iterator<Item = &'a OrderedDirectory>,
    entries: u64,
    parts: usize,
) -> Vec<Vec<u8>> {
    let mut firsts: Vec<(&[u8], u64)> = dirs
        .flat_map(|d| d.blocks.iter().map(|b| (b.first_key.as_slice(), b.entries)))
        .collect();
    firsts.sort_unstable();
    let mut splits: Vec<Vec<u8>> = Vec::new();
    let per = entries / parts.max(1) as u64;
    let mut acc = 0u64;
    for (k, n) in &firsts {
        if splits.len() + 1 >= parts {
            break;
        }
        if acc >= per * (splits.len() as u64 + 1)
            && splits.last().is_none_or(|l| l.as_slice() < *k)
            && *k > firsts[0].0
        {
            splits.push(k.to_vec());
        }
        acc += n;
    }
    splits
}

/// The eight bytes of `k` after its first `shared` (zero-padded), big-endian: words that
/// differ order their keys.
fn word_after(k: &[u8], shared: usize) -> u64 {
    let mut w = [0u8; 8];
    let tail = k.get(shared..).unwrap_or_default();
    let n = tail.len().min(8);
    w[..n].copy_from_slice(&tail[..n]);
    u64::from_be_bytes(w)
}

/// The whole blocks from `first` read in one request of at most `chunk` bytes (at least
/// one block): the end block and the byte range `start..stop` within the blob.
pub(crate) fn chunk_of(blocks: &[BlockRef], first: usize, chunk: u64) -> (usize, u64, u64) {
    let mut end = first + 1;
    while end < blocks.len()
        && (blocks[end].offset + blocks[end].length).saturating_sub(blocks[first].offset) <= chunk
    {
        end += 1;
    }
    let last = &blocks[end - 1];
    (
        end,
        blocks[first].offset,
        last.offset.saturating_add(last.length),
    )
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

/// A k-way merge of sorted inputs: [`Merge::next`] moves to every kept entry in (key,
/// position, input) order, [`Merge::key`], [`Merge::position`] and [`Merge::input`]
/// describe it. Each input must be sorted by (key, mapped position).
///
/// A tournament (loser) tree over the inputs' current entries, compared where the streams
/// hold them: no key is copied, and moving on costs one comparison per level (⌈log₂ k⌉).
pub(crate) struct Merge {
    inputs: Vec<MergeInput>,
    /// Each input's current mapped position; `None` once it is used up.
    heads: Vec<Option<u64>>,
    /// Each input's current key's eight bytes after `shared` (zero-padded, big-endian): a
    /// different word decides a comparison without reading the keys.
    words: Vec<u64>,
    /// Bytes every key of every input starts with (from the blobs' first and last keys).
    shared: usize,
    /// `tree[n]` (1 ≤ n < k): the input that lost at node `n`; input `i` is leaf `k + i`.
    tree: Vec<usize>,
    /// The input holding the current entry (after the first [`Merge::next`]).
    winner: Option<usize>,
    started: bool,
}

impl Merge {
    pub fn new(inputs: Vec<MergeInput>) -> Self {
        let k = inputs.len();
        let mut bounds = inputs.iter().flat_map(|i| {
            let d = &i.stream.dir;
            d.blocks
                .first()
                .map(|b| [b.first_key.as_slice(), d.max_key.as_slice()])
        });
        let shared = match bounds.next() {
            None => 0,
            Some([a, b]) => {
                let mut n = ordered::common_prefix(a, b);
                for [x, y] in bounds {
                    n = n.min(ordered::common_prefix(&a[..n], x));
                    n = n.min(ordered::common_prefix(&a[..n], y));
                }
                n
            }
        };
        Merge {
            inputs,
            heads: vec![None; k],
            words: vec![0; k],
            shared,
            tree: vec![0; k.max(1)],
            winner: None,
            started: false,
        }
    }

    /// Moves to the next entry; `false` at the end.
    pub async fn next(&mut self) -> Result<bool> {
        let k = self.inputs.len();
        if k == 0 {
            return Ok(false);
        }
        if !self.started {
            self.started = true;
            for i in 0..k {
                self.heads[i] = self.skip_to_kept(i).await?;
            }
            let w = self.play(1);
            self.winner = Some(w);
        } else if let Some(w) = self.winner {
            // The common case stays synchronous: the next entry is in the decoded block and
            // the input keeps it.
            let stream = &mut self.inputs[w].stream;
            if !stream.step()? {
                stream.fill().await?;
            }
            self.heads[w] = match self.kept(w) {
                Some(out) => Some(out),
                None => self.skip_to_kept(w).await?,
            };
            // Replay the winner's path to the root.
            let mut cur = w;
            let mut n = (w + k) / 2;
            while n >= 1 {
                if self.less(self.tree[n], cur) {
                    std::mem::swap(&mut self.tree[n], &mut cur);
                }
                n /= 2;
            }
            self.winner = Some(cur);
        }
        Ok(self.winner.is_some_and(|w| self.heads[w].is_some()))
    }

    /// Plays the subtree under node `n`: records its losers, returns its winner.
    fn play(&mut self, n: usize) -> usize {
        let k = self.inputs.len();
        if n >= k {
            return n - k;
        }
        let (a, b) = (self.play(2 * n), self.play(2 * n + 1));
        if self.less(b, a) {
            self.tree[n] = a;
            b
        } else {
            self.tree[n] = b;
            a
        }
    }

    /// Does input `a`'s current entry come before input `b`'s? (Used-up inputs come last.)
    fn less(&self, a: usize, b: usize) -> bool {
        match (self.heads[a], self.heads[b]) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(_), Some(_)) if self.words[a] != self.words[b] => self.words[a] < self.words[b],
            (Some(pa), Some(pb)) => {
                let ka = self.inputs[a].stream.head().map_or(&[][..], |h| h.0);
                let kb = self.inputs[b].stream.head().map_or(&[][..], |h| h.0);
                (ka, pa, a) < (kb, pb, b)
            }
        }
    }

    /// The current entry's key (after [`Merge::next`] returned `true`).
    pub fn key(&self) -> &[u8] {
        let w = self.winner.expect("a current entry");
        self.inputs[w].stream.head().expect("current").0
    }

    /// The current entry's position, mapped by its input.
    pub fn position(&self) -> u64 {
        self.heads[self.winner.expect("a current entry")].expect("current")
    }

    /// The input of the current entry.
    pub fn input(&self) -> usize {
        self.winner.expect("a current entry")
    }

    /// Input `i`'s current entry's mapped position when there is one and its map keeps it
    /// (its word then set).
    fn kept(&mut self, i: usize) -> Option<u64> {
        let input = &self.inputs[i];
        let (k, p) = input.stream.head()?;
        let out = (input.map)(p)?;
        self.words[i] = word_after(k, self.shared);
        Some(out)
    }

    /// Advances input `i` past entries its map leaves out; its mapped position, `None` at
    /// its end.
    async fn skip_to_kept(&mut self, i: usize) -> Result<Option<u64>> {
        let input = &mut self.inputs[i];
        loop {
            let Some((k, p)) = input.stream.head() else {
                return Ok(None);
            };
            if let Some(out) = (input.map)(p) {
                self.words[i] = word_after(k, self.shared);
                return Ok(Some(out));
            }
            input.stream.advance().await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tournament agrees with a plain sort, duplicates and left-out entries included.
    #[tokio::test]
    async fn merge_orders_like_a_sort() {
        use crate::index::ordered::OrderedBlobWriter;
        use object_store::{memory::InMemory, path::Path, ObjectStoreExt};
        let store: Arc<dyn object_store::ObjectStore> = Arc::new(InMemory::new());
        let reader = Arc::new(ObjectStoreReader::new(store.clone(), Path::from("")));
        // Three inputs: two interleaved, one with a span of its own; equal keys across them.
        let inputs_keys: Vec<Vec<(Vec<u8>, u64)>> = vec![
            (0..500u64)
                .map(|i| ((i * 2).to_be_bytes().to_vec(), i))
                .collect(),
            (0..500u64)
                .map(|i| ((i * 3).to_be_bytes().to_vec(), i))
                .collect(),
            (0..300u64)
                .map(|i| ((10_000 + i).to_be_bytes().to_vec(), i))
                .collect(),
        ];
        let mut metas = Vec::new();
        for (n, keys) in inputs_keys.iter().enumerate() {
            let mut w = OrderedBlobWriter::new(256);
            for (k, p) in keys {
                w.push(k, *p).unwrap();
            }
            let b = w.finish();
            let path = format!("b{n}");
            store
                .put(&Path::from(path.as_str()), b.bytes.clone().into())
                .await
                .unwrap();
            metas.push((
                path,
                OrderedMeta {
                    text: None,
                    directory_offset: b.directory.start,
                    directory_length: b.directory.end - b.directory.start,
                    directory_sha256: b.directory_sha256.clone(),
                    entries: b.entries,
                    values: None,
                    blocks: None,
                    min_key: None,
                    max_key: None,
                    dim: None,
                },
            ));
        }
        let mut inputs = Vec::new();
        for (n, (path, meta)) in metas.iter().enumerate() {
            let at = BlobAt {
                bundle_path: path,
                blob_offset: 0,
                ordered: meta,
            };
            let tag = (n as u64) << 40;
            // Input 1 leaves odd positions out.
            let map: Box<dyn Fn(u64) -> Option<u64> + Send + Sync> = if n == 1 {
                Box::new(move |p| (p % 2 == 0).then_some(tag | p))
            } else {
                Box::new(move |p| Some(tag | p))
            };
            inputs.push(MergeInput {
                stream: BlobStream::open(reader.clone(), &at, 1024).await.unwrap(),
                map,
            });
        }
        let mut m = Merge::new(inputs);
        let mut got = Vec::new();
        while m.next().await.unwrap() {
            got.push((m.key().to_vec(), m.position(), m.input()));
        }
        let mut want: Vec<(Vec<u8>, u64, usize)> = Vec::new();
        for (n, keys) in inputs_keys.iter().enumerate() {
            for (k, p) in keys {
                if n != 1 || p % 2 == 0 {
                    want.push((k.clone(), ((n as u64) << 40) | p, n));
                }
            }
        }
        want.sort();
        assert_eq!(got, want);
    }
}
