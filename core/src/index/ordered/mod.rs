//! The ordered index blob (`skerry-ordered-v1`): sorted canonical keys → row positions, in
//! blocks a lookup fetches individually, behind a sparse block directory.
//!
//! Layout (integers little-endian; `varint` = unsigned LEB128):
//!
//! ```text
//! Blob      = Block₀ … Blockₙ₋₁ Directory Trailer
//! Block     = Entry*                       entries sorted by (key, position)
//! Entry     = varint shared  varint suffix_len  suffix  varint position
//!             (key = previous key[..shared] ++ suffix; the first entry of a block has shared = 0)
//! Directory = varint n  BlockRef*ⁿ  varint max_key_len  max_key
//! BlockRef  = varint offset  varint length  varint entries  varint first_key_len  first_key  hash[16]
//!             (hash = first 16 bytes of SHA-256 of the block's bytes)
//! Trailer   = u64 dir_offset  u64 dir_length  u64 entry_count  u8 version(=1)  u8 flags(=0)  u16 reserved(=0)  "SKO1"
//! ```
//!
//! A reader that knows the directory's range (the manifest records it, with the directory's
//! SHA-256) reads the directory once, then only the blocks whose key span can hold the keys
//! it looks for. Every byte read is verified: the directory against its SHA-256, each block
//! against its hash; a mismatch is [`BlobError::Checksum`]. Parsing never panics and bounds
//! what it allocates. `docs/ordered-index.md` documents the format.

use std::ops::{Bound, Range};

use sha2::{Digest, Sha256};

/// Puffin blob type of this format.
pub const BLOB_TYPE: &str = "skerry-ordered-v1";
/// Trailer magic.
pub const MAGIC: [u8; 4] = *b"SKO1";
/// Fixed trailer length.
pub const TRAILER_LEN: u64 = 32;
/// Format version in the trailer.
pub const VERSION: u8 = 1;
/// Default target size of a block.
pub const DEFAULT_BLOCK_BYTES: usize = 16 * 1024;
/// Largest key a blob may hold (matches the encoding's cap).
pub const MAX_KEY_BYTES: usize = crate::values::MAX_KEY_BYTES;

use super::access::{BlobAccess, KeyProbe};
pub use super::blob::BlobError;
use crate::io::BoxFut;

pub mod read;

/// A written blob and the facts the manifest records about it.
#[derive(Clone, Debug)]
pub struct OrderedBlob {
    pub bytes: Vec<u8>,
    pub directory: Range<u64>,
    pub directory_sha256: String,
    pub entries: u64,
    pub blocks: u64,
    pub min_key: Option<Vec<u8>>,
    pub max_key: Option<Vec<u8>>,
}

/// Builds a blob from entries pushed in ascending (key, position) order.
pub struct OrderedBlobWriter {
    block_bytes: usize,
    /// Bytes already handed out by [`OrderedBlobWriter::take_closed`]; `out` holds the rest.
    flushed: u64,
    out: Vec<u8>,
    dir: Vec<BlockRef>,
    block_start: usize,
    block_entries: u64,
    prev: Option<(Vec<u8>, u64)>,
    first_key: Option<Vec<u8>>,
    /// Position of the writer's first entry (ordering check of [`OrderedBlobWriter::append_streamed`]).
    first_position: Option<u64>,
    entries: u64,
    /// A key buffer reused by [`OrderedBlobWriter::push_block_mapped`].
    spare_key: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRef {
    pub offset: u64,
    pub length: u64,
    pub entries: u64,
    pub first_key: Vec<u8>,
    pub hash: [u8; 16],
}

impl BlockRef {
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset.saturating_add(self.length)
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint at `buf[at..]` (room for 10 bytes); the end.
fn varint_into(buf: &mut [u8; 20], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 && at < buf.len() {
        buf[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    if at < buf.len() {
        buf[at] = v as u8;
        at += 1;
    }
    at
}

pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, BlobError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or(BlobError::Corrupt("truncated varint"))?;
        *pos += 1;
        v |= ((byte & 0x7F) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(BlobError::Corrupt("varint too long"))
}

pub(crate) fn get_bytes<'a>(b: &'a [u8], pos: &mut usize, len: u64) -> Result<&'a [u8], BlobError> {
    let end = (*pos as u64)
        .checked_add(len)
        .filter(|e| *e <= b.len() as u64)
        .ok_or(BlobError::Corrupt("length past end"))?;
    let s = &b[*pos..end as usize];
    *pos = end as usize;
    Ok(s)
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

fn hash16(b: &[u8]) -> [u8; 16] {
    let d = Sha256::digest(b);
    let mut h = [0u8; 16];
    h.copy_from_slice(&d[..16]);
    h
}

impl OrderedBlobWriter {
    pub fn new(block_bytes: usize) -> Self {
        OrderedBlobWriter {
            block_bytes: block_bytes.max(64),
            flushed: 0,
            out: Vec::new(),
            dir: Vec::new(),
            block_start: 0,
            block_entries: 0,
            prev: None,
            first_key: None,
            first_position: None,
            entries: 0,
            spare_key: Vec::new(),
        }
    }

    /// Appends an entry; entries must come in ascending (key, position) order.
    pub fn push(&mut self, key: &[u8], position: u64) -> Result<(), BlobError> {
        let mut prev = self.prev.take();
        let written = self.write_entry(
            prev.as_ref().map(|(k, p)| (k.as_slice(), *p)),
            key,
            position,
        );
        if let Ok(common) = written {
            match &mut prev {
                Some((pk, pp)) => {
                    pk.truncate(common);
                    pk.extend_from_slice(&key[common..]);
                    *pp = position;
                }
                None => prev = Some((key.to_vec(), position)),
            }
        }
        self.prev = prev;
        written.map(|_| ())
    }

    /// Appends entries in ascending (key, position) order, as many [`OrderedBlobWriter::push`]
    /// calls would (the same bytes), comparing each with the previous borrowed key instead of
    /// a copy of it.
    pub fn push_all<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (&'a [u8], u64)>,
    ) -> Result<(), BlobError> {
        let before = self.prev.take();
        let mut last: Option<(&'a [u8], u64)> = None;
        let mut written = Ok(());
        for (k, p) in entries {
            let prev = match last {
                Some(l) => Some(l),
                None => before.as_ref().map(|(k, p)| (k.as_slice(), *p)),
            };
            if let Err(e) = self.write_entry(prev, k, p) {
                written = Err(e);
                break;
            }
            last = Some((k, p));
        }
        self.prev = match last {
            Some((k, p)) => Some((k.to_vec(), p)),
            None => before,
        };
        written
    }

    /// Writes one entry after `prev` (the writer's last entry) and closes the block when
    /// full; `self.prev` is the caller's to update. Returns the prefix length `key` shares
    /// with the previous key.
    fn write_entry(
        &mut self,
        prev: Option<(&[u8], u64)>,
        key: &[u8],
        position: u64,
    ) -> Result<usize, BlobError> {
        if key.len() > MAX_KEY_BYTES {
            return Err(BlobError::KeyTooLarge(key.len()));
        }
        // The prefix shared with the previous key, which also decides the order check.
        let common = match prev {
            Some((pk, pp)) => {
                let common = common_prefix(pk, key);
                let order = match (pk.get(common), key.get(common)) {
                    (Some(a), Some(b)) => a.cmp(b),
                    _ => pk.len().cmp(&key.len()).then(pp.cmp(&position)),
                };
                if order != std::cmp::Ordering::Less {
                    return Err(BlobError::Unsorted(self.entries));
                }
                common
            }
            None => 0,
        };
        let shared = if self.block_entries == 0 { 0 } else { common };
        if self.block_entries == 0 {
            self.first_key = Some(key.to_vec());
        }
        if self.entries == 0 {
            self.first_position = Some(position);
        }
        let mut head = [0u8; 20];
        let n = varint_into(&mut head, 0, shared as u64);
        let n = varint_into(&mut head, n, (key.len() - shared) as u64);
        self.out.extend_from_slice(&head[..n]);
        self.out.extend_from_slice(&key[shared..]);
        let n = varint_into(&mut head, 0, position);
        self.out.extend_from_slice(&head[..n]);
        self.block_entries += 1;
        self.entries += 1;
        if self.out.len() - self.block_start >= self.block_bytes {
            self.close_block();
        }
        Ok(common)
    }

    fn close_block(&mut self) {
        if self.block_entries == 0 {
            return;
        }
        let block = &self.out[self.block_start..];
        self.dir.push(BlockRef {
            offset: self.flushed + self.block_start as u64,
            length: block.len() as u64,
            entries: self.block_entries,
            first_key: self.first_key.take().unwrap_or_default(),
            hash: hash16(block),
        });
        self.block_start = self.out.len();
        self.block_entries = 0;
    }

    /// Takes the bytes of the blocks closed so far (the blob's next bytes, in order), so a
    /// large blob streams out in pieces; [`OrderedBlobWriter::finish`] then returns only
    /// what was not taken. Offsets stay those of the whole blob.
    pub fn take_closed(&mut self) -> Vec<u8> {
        let rest = self.out.split_off(self.block_start);
        let closed = std::mem::replace(&mut self.out, rest);
        self.flushed += closed.len() as u64;
        self.block_start = 0;
        closed
    }

    /// Appends a block of another blob (`r`, its directory entry, checked against the block's
    /// hash) as a block of its own, every position mapped by `map`: keys are copied as stored,
    /// not compressed again, so a run of blobs with key spans of their own is a concatenation.
    /// The block's entries must come after this writer's last (`Unsorted`), and `map` must
    /// keep every entry (`Corrupt` when it leaves one out) in order. On an error nothing of
    /// the block is kept.
    pub fn push_block_mapped(
        &mut self,
        block: &[u8],
        r: &BlockRef,
        map: impl Fn(u64) -> Option<u64>,
    ) -> Result<(), BlobError> {
        if block.len() as u64 != r.length || hash16(block) != r.hash {
            return Err(BlobError::Checksum("block"));
        }
        if r.entries == 0 {
            return Ok(());
        }
        self.close_block();
        let start = self.out.len();
        let mut key = std::mem::take(&mut self.spare_key);
        key.clear();
        let copied = self.copy_block(block, r, &map, &mut key);
        match copied {
            Ok(last) => {
                self.block_entries = r.entries;
                self.entries += r.entries;
                let old = self.prev.replace((key, last));
                self.spare_key = old.map(|(k, _)| k).unwrap_or_default();
                self.close_block();
                Ok(())
            }
            Err(e) => {
                self.out.truncate(start);
                self.first_key = None;
                if self.entries == 0 {
                    self.first_position = None;
                }
                self.spare_key = key;
                Err(e)
            }
        }
    }

    /// The entries of [`OrderedBlobWriter::push_block_mapped`]: written to `out`, `key` left
    /// holding the last key; the last mapped position.
    fn copy_block(
        &mut self,
        block: &[u8],
        r: &BlockRef,
        map: &impl Fn(u64) -> Option<u64>,
        key: &mut Vec<u8>,
    ) -> Result<u64, BlobError> {
        let mut pos = 0usize;
        let mut head = [0u8; 20];
        let mut last = 0u64;
        for i in 0..r.entries {
            let shared = get_varint(block, &mut pos)?;
            let slen = get_varint(block, &mut pos)?;
            if shared > key.len() as u64
                || (i == 0 && shared != 0)
                || shared.saturating_add(slen) > MAX_KEY_BYTES as u64
            {
                return Err(BlobError::Corrupt("entry key"));
            }
            let suffix = get_bytes(block, &mut pos, slen)?;
            let equal = i > 0 && slen == 0 && shared == key.len() as u64;
            key.truncate(shared as usize);
            key.extend_from_slice(suffix);
            let position = map(get_varint(block, &mut pos)?)
                .ok_or(BlobError::Corrupt("a concatenated entry left out"))?;
            if i == 0 {
                // After this writer's last entry.
                if let Some((pk, pp)) = &self.prev {
                    if !(key.as_slice() > pk.as_slice() || (*key == *pk && position > *pp)) {
                        return Err(BlobError::Unsorted(self.entries));
                    }
                }
                self.first_key = Some(key.clone());
                if self.entries == 0 {
                    self.first_position = Some(position);
                }
            } else if equal && position <= last {
                // Keys are sorted as stored; equal keys need ascending mapped positions.
                return Err(BlobError::Unsorted(self.entries + i));
            }
            let n = varint_into(&mut head, 0, shared);
            let n = varint_into(&mut head, n, slen);
            self.out.extend_from_slice(&head[..n]);
            self.out.extend_from_slice(suffix);
            let n = varint_into(&mut head, 0, position);
            self.out.extend_from_slice(&head[..n]);
            last = position;
        }
        if pos != block.len() {
            return Err(BlobError::Corrupt("block length"));
        }
        Ok(last)
    }

    /// Reserves room for `additional` more bytes of blocks.
    pub fn reserve(&mut self, additional: usize) {
        self.out.reserve(additional);
    }

    /// Closes the open block and takes every byte not taken yet.
    pub fn take_all(&mut self) -> Vec<u8> {
        self.close_block();
        self.take_closed()
    }

    /// Appends every entry of `other`, a writer over keys all after this one's whose blob
    /// streams out right after this one's: every byte of this writer must be taken
    /// ([`OrderedBlobWriter::take_all`]) and written, then the bytes `other` gave away;
    /// returns `other`'s remaining bytes, which come next. Blocks do not depend on where they
    /// sit, so sorted partitions of one blob can be written in parallel.
    pub fn append_streamed(&mut self, mut other: OrderedBlobWriter) -> Result<Vec<u8>, BlobError> {
        self.close_block();
        if !self.out.is_empty() {
            return Err(BlobError::Corrupt("appended after bytes not taken"));
        }
        let rest = other.take_all();
        self.check_follows(&other)?;
        for mut b in other.dir {
            b.offset += self.flushed;
            self.dir.push(b);
        }
        self.flushed += other.flushed;
        self.entries += other.entries;
        if other.prev.is_some() {
            self.prev = other.prev;
        }
        Ok(rest)
    }

    /// `Unsorted` unless `other`'s first entry comes after this writer's last.
    fn check_follows(&self, other: &OrderedBlobWriter) -> Result<(), BlobError> {
        if let (Some((pk, pp)), Some(first)) = (&self.prev, other.dir.first()) {
            if first.first_key.as_slice() < pk.as_slice()
                || (first.first_key == *pk && other.first_position.is_some_and(|p| p <= *pp))
            {
                return Err(BlobError::Unsorted(self.entries));
            }
        }
        Ok(())
    }

    /// Bytes written so far (taken or not).
    pub fn len(&self) -> u64 {
        self.flushed + self.out.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Finishes the blob: `bytes` of the result are what [`OrderedBlobWriter::take_closed`]
    /// did not take (the whole blob when it was never called).
    pub fn finish(mut self) -> OrderedBlob {
        self.close_block();
        let dir_offset = self.flushed + self.out.len() as u64;
        let mut d = Vec::new();
        put_varint(&mut d, self.dir.len() as u64);
        for b in &self.dir {
            put_varint(&mut d, b.offset);
            put_varint(&mut d, b.length);
            put_varint(&mut d, b.entries);
            put_varint(&mut d, b.first_key.len() as u64);
            d.extend_from_slice(&b.first_key);
            d.extend_from_slice(&b.hash);
        }
        let max_key = self.prev.as_ref().map(|(k, _)| k.clone());
        let mk = max_key.clone().unwrap_or_default();
        put_varint(&mut d, mk.len() as u64);
        d.extend_from_slice(&mk);
        let directory_sha256 = hex::encode(Sha256::digest(&d));
        self.out.extend_from_slice(&d);
        self.out.extend_from_slice(&dir_offset.to_le_bytes());
        self.out.extend_from_slice(&(d.len() as u64).to_le_bytes());
        self.out.extend_from_slice(&self.entries.to_le_bytes());
        self.out.extend_from_slice(&[VERSION, 0, 0, 0]);
        self.out.extend_from_slice(&MAGIC);
        OrderedBlob {
            bytes: self.out,
            directory: dir_offset..dir_offset + d.len() as u64,
            directory_sha256,
            entries: self.entries,
            blocks: self.dir.len() as u64,
            min_key: self.dir.first().map(|b| b.first_key.clone()),
            max_key,
        }
    }
}

/// A parsed, verified block directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedDirectory {
    pub blocks: Vec<BlockRef>,
    pub max_key: Vec<u8>,
}

/// Where the directory is, read from a trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    pub directory: (u64, u64),
    pub entries: u64,
}

impl Trailer {
    /// Parses the last [`TRAILER_LEN`] bytes of a blob of `blob_len` bytes.
    pub fn parse(t: &[u8], blob_len: u64) -> Result<Trailer, BlobError> {
        if t.len() as u64 != TRAILER_LEN {
            return Err(BlobError::Corrupt("trailer length"));
        }
        if t[28..32] != MAGIC {
            return Err(BlobError::Corrupt("bad trailer magic"));
        }
        if t[24] != VERSION {
            return Err(BlobError::Corrupt("unsupported ordered index version"));
        }
        let off = u64::from_le_bytes(t[0..8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(t[8..16].try_into().expect("8 bytes"));
        let entries = u64::from_le_bytes(t[16..24].try_into().expect("8 bytes"));
        if off
            .checked_add(len)
            .and_then(|e| e.checked_add(TRAILER_LEN))
            .is_none_or(|e| e != blob_len)
        {
            return Err(BlobError::Corrupt("directory range"));
        }
        Ok(Trailer {
            directory: (off, len),
            entries,
        })
    }
}

impl OrderedDirectory {
    /// Verifies `bytes` against `sha256_hex` (when given) and parses them. `blob_len` bounds
    /// every block range.
    pub fn parse(
        bytes: &[u8],
        sha256_hex: Option<&str>,
        dir_offset: u64,
    ) -> Result<Self, BlobError> {
        super::blob::check_sha256(bytes, sha256_hex, "directory")?;
        let mut pos = 0usize;
        let n = get_varint(bytes, &mut pos)?;
        // Each block ref takes at least 20 bytes: bound the allocation by the input.
        if n > bytes.len() as u64 / 20 + 1 {
            return Err(BlobError::Corrupt("block count"));
        }
        let mut blocks = Vec::with_capacity(n as usize);
        let mut next_offset = 0u64;
        for _ in 0..n {
            let offset = get_varint(bytes, &mut pos)?;
            let length = get_varint(bytes, &mut pos)?;
            let entries = get_varint(bytes, &mut pos)?;
            let klen = get_varint(bytes, &mut pos)?;
            if klen > MAX_KEY_BYTES as u64 {
                return Err(BlobError::Corrupt("first key too long"));
            }
            let first_key = get_bytes(bytes, &mut pos, klen)?.to_vec();
            let hash: [u8; 16] = get_bytes(bytes, &mut pos, 16)?
                .try_into()
                .expect("16 bytes");
            if offset != next_offset
                || length == 0
                || entries == 0
                || offset.checked_add(length).is_none_or(|e| e > dir_offset)
            {
                return Err(BlobError::Corrupt("block range"));
            }
            if blocks
                .last()
                .is_some_and(|p: &BlockRef| p.first_key > first_key)
            {
                return Err(BlobError::Corrupt("block keys out of order"));
            }
            next_offset = offset + length;
            blocks.push(BlockRef {
                offset,
                length,
                entries,
                first_key,
                hash,
            });
        }
        let mlen = get_varint(bytes, &mut pos)?;
        if mlen > MAX_KEY_BYTES as u64 {
            return Err(BlobError::Corrupt("max key too long"));
        }
        let max_key = get_bytes(bytes, &mut pos, mlen)?.to_vec();
        if pos != bytes.len() || next_offset != dir_offset {
            return Err(BlobError::Corrupt("directory length"));
        }
        Ok(OrderedDirectory { blocks, max_key })
    }

    /// Indices of the blocks that can hold keys within `(lower, upper)`.
    pub fn blocks_for(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Range<usize> {
        let n = self.blocks.len();
        if n == 0 {
            return 0..0;
        }
        // Out of the blob's key span entirely?
        let above_max = match lower {
            Bound::Included(l) => l > self.max_key.as_slice(),
            Bound::Excluded(l) => l >= self.max_key.as_slice(),
            Bound::Unbounded => false,
        };
        if above_max {
            return 0..0;
        }
        // First candidate: the block before the first whose first key is >= lower (a run
        // of equal keys may start in it).
        let start = match lower {
            Bound::Included(l) | Bound::Excluded(l) => self
                .blocks
                .partition_point(|b| b.first_key.as_slice() < l)
                .saturating_sub(1),
            Bound::Unbounded => 0,
        };
        let end = match upper {
            Bound::Included(u) => self.blocks.partition_point(|b| b.first_key.as_slice() <= u),
            Bound::Excluded(u) => self.blocks.partition_point(|b| b.first_key.as_slice() < u),
            Bound::Unbounded => n,
        };
        if end <= start {
            return start..start;
        }
        start..end
    }
}

/// Verifies a block against its directory entry and calls `f(key, position)` for each entry
/// in order. Stops early when `f` returns `false`.
pub fn scan_block(
    block: &[u8],
    r: &BlockRef,
    mut f: impl FnMut(&[u8], u64) -> bool,
) -> Result<(), BlobError> {
    verify_block(block, r)?;
    let mut pos = 0usize;
    let mut key: Vec<u8> = Vec::new();
    for i in 0..r.entries {
        let position = next_entry(block, &mut pos, i == 0, &mut key)?;
        if !f(&key, position) {
            return Ok(());
        }
    }
    if pos != block.len() {
        return Err(BlobError::Corrupt("block length"));
    }
    Ok(())
}

/// Checks a block's bytes against its directory entry (length and hash).
pub fn verify_block(block: &[u8], r: &BlockRef) -> Result<(), BlobError> {
    if block.len() as u64 != r.length || hash16(block) != r.hash {
        return Err(BlobError::Checksum("block"));
    }
    Ok(())
}

/// Decodes the entry of `block` at `*pos` (moved past it): `key` holds the previous entry's
/// key (empty for the `first` of the block) and becomes this one's; returns its position.
/// Entries are read one at a time by streams ([`scan_block`] reads them all).
pub fn next_entry(
    block: &[u8],
    pos: &mut usize,
    first: bool,
    key: &mut Vec<u8>,
) -> Result<u64, BlobError> {
    let shared = get_varint(block, pos)?;
    let slen = get_varint(block, pos)?;
    if shared > key.len() as u64
        || (first && shared != 0)
        || shared.saturating_add(slen) > MAX_KEY_BYTES as u64
    {
        return Err(BlobError::Corrupt("entry key"));
    }
    let suffix = get_bytes(block, pos, slen)?;
    key.truncate(shared as usize);
    key.extend_from_slice(suffix);
    get_varint(block, pos)
}

/// Calls `f(key, position)` for every entry of a whole blob in order: trailer, directory and
/// every block are parsed and checked (block hashes; the directory has no expected hash here).
pub fn read_entries(blob: &[u8], mut f: impl FnMut(&[u8], u64)) -> Result<(), BlobError> {
    let len = blob.len() as u64;
    if len < TRAILER_LEN {
        return Err(BlobError::Corrupt("shorter than its trailer"));
    }
    let t = Trailer::parse(&blob[(len - TRAILER_LEN) as usize..], len)?;
    let (off, dlen) = t.directory;
    let dir = OrderedDirectory::parse(&blob[off as usize..(off + dlen) as usize], None, off)?;
    for b in &dir.blocks {
        let block = blob
            .get(b.offset as usize..(b.offset + b.length) as usize)
            .ok_or(BlobError::Corrupt("block range"))?;
        scan_block(block, b, |k, p| {
            f(k, p);
            true
        })?;
    }
    Ok(())
}

/// True when `key` lies within `(lower, upper)`.
pub fn in_bounds(key: &[u8], lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    let lo = match lower {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    };
    let hi = match upper {
        Bound::Included(u) => key <= u,
        Bound::Excluded(u) => key < u,
        Bound::Unbounded => true,
    };
    lo && hi
}

/// The ordered kind ([`super::kind::Kind`]): `=`, IN, ranges and IS NULL on any key.
pub struct Ordered;

static ORDERED: super::kind::About = super::kind::About {
    answers: super::kind::Answers {
        rows: true,
        ..super::kind::Answers::NOTHING
    },
    refuses_unique: None,
    run: Some(super::kind::RunLayout::Merged),
    ..super::kind::About::new(
        super::IndexKind::Ordered,
        "ordered",
        BLOB_TYPE,
        "ordered-v1",
    )
};

impl super::kind::Kind for Ordered {
    fn about(&self) -> &'static super::kind::About {
        &ORDERED
    }
    fn spec(&self, _: &super::IndexOptions) -> Result<super::IndexSpec, String> {
        Ok(super::IndexSpec::Ordered)
    }
    fn write(
        &self,
        _: &super::IndexSpec,
        src: &super::kind::BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
        let mut bw = OrderedBlobWriter::new(src.block_bytes);
        bw.reserve(src.size_hint);
        bw.push_all(entries)?;
        let blob = bw.finish();
        let meta = super::blob::BlobMeta::new(blob.directory, &blob.directory_sha256, blob.entries)
            .with_keys(&blob.min_key, &blob.max_key);
        Ok((blob.bytes, meta))
    }
    fn read_entries(&self, blob: &[u8], f: &mut dyn FnMut(&[u8], u64)) -> Result<(), BlobError> {
        read_entries(blob, f)
    }
    fn rows<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Result<Option<Vec<(Vec<u8>, u64)>>, BlobError>> {
        Box::pin(async move { read::rows(blob, &probe).await })
    }
    fn estimate<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Option<u64>> {
        Box::pin(async move { read::estimate(blob, &probe).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(entries: &[(Vec<u8>, u64)], block: usize) -> OrderedBlob {
        let mut w = OrderedBlobWriter::new(block);
        for (k, p) in entries {
            w.push(k, *p).unwrap();
        }
        w.finish()
    }

    fn lookup(blob: &OrderedBlob, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<(Vec<u8>, u64)> {
        let d = &blob.bytes[blob.directory.start as usize..blob.directory.end as usize];
        let dir =
            OrderedDirectory::parse(d, Some(&blob.directory_sha256), blob.directory.start).unwrap();
        let mut out = vec![];
        for b in &dir.blocks[dir.blocks_for(lo, hi)] {
            scan_block(
                &blob.bytes[b.offset as usize..(b.offset + b.length) as usize],
                b,
                |k, p| {
                    if in_bounds(k, lo, hi) {
                        out.push((k.to_vec(), p));
                    }
                    true
                },
            )
            .unwrap();
        }
        out
    }

    /// `push_all` writes the bytes entry-by-entry pushes write, continues after them, and
    /// refuses the same disorder.
    #[test]
    fn push_all_equals_pushes() {
        let entries: Vec<(Vec<u8>, u64)> = (0u32..2000)
            .map(|i| (format!("k{:05}", i / 3).into_bytes(), i as u64))
            .collect();
        let (a, b) = entries.split_at(700);
        let mut one = OrderedBlobWriter::new(128);
        for (k, p) in &entries {
            one.push(k, *p).unwrap();
        }
        let mut all = OrderedBlobWriter::new(128);
        for (k, p) in a {
            all.push(k, *p).unwrap();
        }
        all.push_all(b.iter().map(|(k, p)| (k.as_slice(), *p)))
            .unwrap();
        assert_eq!(all.finish().bytes, one.finish().bytes);

        let mut w = OrderedBlobWriter::new(128);
        w.push_all([(b"b".as_slice(), 1)]).unwrap();
        assert!(matches!(
            w.push_all([(b"a".as_slice(), 2)]),
            Err(BlobError::Unsorted(_))
        ));
        assert!(matches!(
            w.push_all([(b"b".as_slice(), 1)]),
            Err(BlobError::Unsorted(_))
        ));
        w.push_all([(b"b".as_slice(), 2), (b"c".as_slice(), 0)])
            .unwrap();
        let blob = w.finish();
        assert_eq!(blob.entries, 3);
        assert_eq!(blob.max_key.as_deref(), Some(b"c".as_slice()));
    }

    /// Blocks of blobs with key spans of their own, copied in order with positions mapped,
    /// read back as one blob; out-of-order blocks, left-out entries and damaged blocks are
    /// refused and leave the writer as it was.
    #[test]
    fn blocks_concatenate_with_positions_mapped() {
        let part = |from: u32, to: u32| -> Vec<(Vec<u8>, u64)> {
            (from..to)
                .flat_map(|k| {
                    (0..2).map(move |r| (format!("k{k:04}").into_bytes(), (k * 2 + r) as u64))
                })
                .collect()
        };
        let (a, b) = (build(&part(0, 300), 96), build(&part(300, 500), 96));
        let blocks = |blob: &OrderedBlob| {
            let d = &blob.bytes[blob.directory.start as usize..blob.directory.end as usize];
            OrderedDirectory::parse(d, Some(&blob.directory_sha256), blob.directory.start)
                .unwrap()
                .blocks
        };
        let slice = |blob: &OrderedBlob, r: &BlockRef| {
            blob.bytes[r.offset as usize..(r.offset + r.length) as usize].to_vec()
        };
        let mut w = OrderedBlobWriter::new(96);
        for (blob, tag) in [(&a, 1u64 << 40), (&b, 2 << 40)] {
            for r in blocks(blob) {
                w.push_block_mapped(&slice(blob, &r), &r, |p| Some(tag | p))
                    .unwrap();
            }
        }
        let whole = w.finish();
        let mut want: Vec<(Vec<u8>, u64)> = part(0, 300)
            .into_iter()
            .map(|(k, p)| (k, 1 << 40 | p))
            .collect();
        want.extend(part(300, 500).into_iter().map(|(k, p)| (k, 2 << 40 | p)));
        assert_eq!(whole.entries, 1000);
        assert_eq!(lookup(&whole, Bound::Unbounded, Bound::Unbounded), want);
        assert_eq!(whole.max_key.as_deref(), Some(b"k0499".as_slice()));
        assert_eq!(whole.min_key.as_deref(), Some(b"k0000".as_slice()));

        let mut w = OrderedBlobWriter::new(96);
        let (ra, rb) = (blocks(&a), blocks(&b));
        w.push_block_mapped(&slice(&b, &rb[0]), &rb[0], Some)
            .unwrap();
        let before = w.len();
        // A block of keys before the writer's last.
        let err = w.push_block_mapped(&slice(&a, &ra[0]), &ra[0], Some);
        assert!(matches!(err, Err(BlobError::Unsorted(_))));
        // A map leaving an entry out; a damaged block.
        let err = w.push_block_mapped(&slice(&b, &rb[1]), &rb[1], |p| (p % 7 != 3).then_some(p));
        assert!(matches!(err, Err(BlobError::Corrupt(_))));
        let mut bad = slice(&b, &rb[1]);
        bad[3] ^= 1;
        let err = w.push_block_mapped(&bad, &rb[1], Some);
        assert!(matches!(err, Err(BlobError::Checksum(_))));
        assert_eq!(w.len(), before);
        w.push_block_mapped(&slice(&b, &rb[1]), &rb[1], Some)
            .unwrap();
        let blob = w.finish();
        let n = (rb[0].entries + rb[1].entries) as usize;
        assert_eq!(
            lookup(&blob, Bound::Unbounded, Bound::Unbounded),
            part(300, 500)[..n].to_vec()
        );
    }

    /// Partitions written apart, streamed out a piece at a time and appended, read back as
    /// the whole: every entry in order, blocks found at the offsets the directory gives.
    #[test]
    fn streamed_partitions_append_into_one_blob() {
        let entries: Vec<(Vec<u8>, u64)> = (0u32..3000)
            .map(|i| (format!("key-{:05}", i / 3).into_bytes(), i as u64))
            .collect();
        let cuts = [0, 1100, 1101, 3000]; // the second partition holds one entry
        let mut parts = Vec::new();
        for w in cuts.windows(2) {
            let mut p = OrderedBlobWriter::new(128);
            let mut given = Vec::new();
            for (n, (k, pos)) in entries[w[0]..w[1]].iter().enumerate() {
                p.push(k, *pos).unwrap();
                if n % 97 == 96 {
                    given.extend(p.take_closed());
                }
            }
            parts.push((p, given));
        }
        let mut bytes = Vec::new();
        let mut it = parts.into_iter();
        let (mut w, given) = it.next().unwrap();
        bytes.extend(given);
        bytes.extend(w.take_all());
        for (p, given) in it {
            bytes.extend(given);
            let rest = w.append_streamed(p).unwrap();
            bytes.extend(rest);
        }
        let mut blob = w.finish();
        bytes.extend(&blob.bytes);
        blob.bytes = bytes;
        assert_eq!(blob.entries, 3000);
        assert_eq!(lookup(&blob, Bound::Unbounded, Bound::Unbounded), entries);
        let k = b"key-00500".as_slice();
        assert_eq!(
            lookup(&blob, Bound::Included(k), Bound::Included(k)),
            entries[1500..1503].to_vec()
        );

        // Bytes not taken, or a partition that does not follow, are refused.
        let mut a = OrderedBlobWriter::new(128);
        a.push(b"b", 1).unwrap();
        let mut later = OrderedBlobWriter::new(128);
        later.push(b"c", 0).unwrap();
        assert!(matches!(
            a.append_streamed(later),
            Err(BlobError::Corrupt(_))
        ));
        a.take_all();
        let mut earlier = OrderedBlobWriter::new(128);
        earlier.push(b"a", 9).unwrap();
        assert!(matches!(
            a.append_streamed(earlier),
            Err(BlobError::Unsorted(_))
        ));
    }

    #[test]
    fn round_trip_with_duplicate_runs_across_blocks() {
        // Keys 0..50, each repeated 1..4 times, tiny blocks so runs span blocks.
        let mut entries = vec![];
        let mut pos = 0;
        for k in 0u32..50 {
            for _ in 0..(k % 4 + 1) {
                entries.push((k.to_be_bytes().to_vec(), pos));
                pos += 1;
            }
        }
        let blob = build(&entries, 64);
        assert!(blob.blocks > 5);
        let t = Trailer::parse(
            &blob.bytes[blob.bytes.len() - 32..],
            blob.bytes.len() as u64,
        )
        .unwrap();
        assert_eq!(
            t.directory,
            (
                blob.directory.start,
                blob.directory.end - blob.directory.start
            )
        );
        assert_eq!(t.entries, entries.len() as u64);
        for k in 0u32..52 {
            let key = k.to_be_bytes();
            let want: Vec<_> = entries
                .iter()
                .filter(|(e, _)| e[..] == key[..])
                .cloned()
                .collect();
            assert_eq!(
                lookup(&blob, Bound::Included(&key), Bound::Included(&key)),
                want,
                "key {k}"
            );
        }
        let (a, b) = (10u32.to_be_bytes(), 20u32.to_be_bytes());
        let want: Vec<_> = entries
            .iter()
            .filter(|(e, _)| e[..] > a[..] && e[..] < b[..])
            .cloned()
            .collect();
        assert_eq!(
            lookup(&blob, Bound::Excluded(&a), Bound::Excluded(&b)),
            want
        );
        assert_eq!(lookup(&blob, Bound::Unbounded, Bound::Unbounded), entries);
    }

    #[test]
    fn writer_refuses_unsorted_entries() {
        let mut w = OrderedBlobWriter::new(64);
        w.push(b"b", 1).unwrap();
        assert_eq!(w.push(b"a", 2), Err(BlobError::Unsorted(1)));
        assert_eq!(w.push(b"b", 1), Err(BlobError::Unsorted(1)));
        w.push(b"b", 2).unwrap();
    }

    #[test]
    fn empty_blob_has_no_blocks() {
        let blob = build(&[], 64);
        let d = &blob.bytes[blob.directory.start as usize..blob.directory.end as usize];
        let dir =
            OrderedDirectory::parse(d, Some(&blob.directory_sha256), blob.directory.start).unwrap();
        assert!(dir.blocks.is_empty());
        assert_eq!(dir.blocks_for(Bound::Unbounded, Bound::Unbounded), 0..0);
    }

    #[test]
    fn flipped_bytes_are_checksum_errors() {
        let entries: Vec<_> = (0u64..100).map(|i| (i.to_be_bytes().to_vec(), i)).collect();
        let blob = build(&entries, 128);
        let d = blob.bytes[blob.directory.start as usize..blob.directory.end as usize].to_vec();
        let mut bad = d.clone();
        bad[3] ^= 1;
        assert_eq!(
            OrderedDirectory::parse(&bad, Some(&blob.directory_sha256), blob.directory.start),
            Err(BlobError::Checksum("directory"))
        );
        let dir = OrderedDirectory::parse(&d, Some(&blob.directory_sha256), blob.directory.start)
            .unwrap();
        let b = &dir.blocks[1];
        let mut block = blob.bytes[b.range().start as usize..b.range().end as usize].to_vec();
        block[0] ^= 0x40;
        assert_eq!(
            scan_block(&block, b, |_, _| true),
            Err(BlobError::Checksum("block"))
        );
    }

    #[test]
    fn arbitrary_directory_bytes_never_panic() {
        let mut seed = 0x2545F4914F6CDD1Du64;
        for len in 0..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _ = OrderedDirectory::parse(&bytes, None, 1 << 20);
            let r = BlockRef {
                offset: 0,
                length: bytes.len() as u64,
                entries: 1000,
                first_key: vec![],
                hash: hash16(&bytes),
            };
            let _ = scan_block(&bytes, &r, |_, _| true);
            let _ = Trailer::parse(&bytes[..bytes.len().min(32)], 1000);
        }
    }
}
