//! How a kind's reader reaches its blob: [`BlobAccess`] — the blob's facts and cached,
//! counted reads of its bytes, implemented by `read/` over the overlay and the read cache —
//! and what one probe asks of it ([`KeyProbe`]). A kind's read hooks ([`super::Kind::rows`],
//! [`super::Kind::may_hold`], …) see a blob only through these, so a kind's reader lives in
//! its own folder and never reaches into `read/`.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use roaring::RoaringTreemap;

use super::blob::{BlobError, BlobMeta, ByteRange};
use crate::io::BoxFut;

/// A decoded part of a blob (its parsed directory) as the read cache holds it.
pub type Part = Arc<dyn Any + Send + Sync>;

/// One blob as its kind's reader sees it.
pub trait BlobAccess: crate::io::MaybeSync {
    /// The facts the manifest records about the blob.
    fn meta(&self) -> &BlobMeta;
    /// The blob's length in bytes.
    fn length(&self) -> u64;
    /// Rows of the data file: every position must be below it (`None` for a table run,
    /// whose positions are checked per covered file).
    fn rows(&self) -> Option<u64>;
    /// The bytes of `spans` (relative to the blob's start), in order: cached spans as they
    /// are, the rest in one coalesced round, then cached. A span outside the blob is
    /// [`BlobError::Corrupt`]; a failed read is [`BlobError::Io`].
    fn read<'a>(&'a self, spans: &'a [Range<u64>]) -> BoxFut<'a, Result<Vec<Bytes>, BlobError>>;
    /// [`read`](Self::read) bridging gaps of at most `max_gap` bytes instead of the reader's
    /// (many small spans, e.g. single vectors, where bridged gaps would cost more bytes than
    /// requests save). By default the same as `read`.
    fn read_near<'a>(
        &'a self,
        spans: &'a [Range<u64>],
        max_gap: u64,
    ) -> BoxFut<'a, Result<Vec<Bytes>, BlobError>> {
        let _ = max_gap;
        self.read(spans)
    }
    /// The bytes of one span, not cached as bytes (a directory is cached decoded instead).
    fn read_once(&self, span: Range<u64>) -> BoxFut<'_, Result<Bytes, BlobError>>;
    /// The blob's decoded directory, when the cache holds one for this blob and its
    /// directory's SHA-256.
    fn cached_directory(&self) -> Option<Part>;
    /// Keeps the decoded directory (about `bytes` in memory) for the next probe.
    fn keep_directory(&self, part: Part, bytes: u64);
}

/// The blob's directory as `T`: cached, or read (one range request), parsed by `parse`
/// (which checks the manifest's SHA-256 first) and cached with its size from `size`.
pub async fn directory<T: Any + Send + Sync>(
    blob: &dyn BlobAccess,
    parse: impl FnOnce(&[u8], &BlobMeta) -> Result<T, BlobError>,
    size: impl FnOnce(&T) -> u64,
) -> Result<Arc<T>, BlobError> {
    if let Some(d) = blob.cached_directory().and_then(|p| p.downcast::<T>().ok()) {
        return Ok(d);
    }
    let m = blob.meta();
    let end = m
        .directory_offset
        .checked_add(m.directory_length)
        .filter(|&end| end <= blob.length())
        .ok_or(BlobError::Corrupt("directory outside the blob"))?;
    let bytes = blob.read_once(m.directory_offset..end).await?;
    let d = parse(&bytes, m)?;
    let bytes = size(&d);
    let d = Arc::new(d);
    blob.keep_directory(d.clone(), bytes);
    Ok(d)
}

/// The exact condition of a probe on a decoded key, beyond its byte ranges (`Err`: the key
/// does not decode).
#[cfg(not(target_arch = "wasm32"))]
pub type KeepKey<'a> = dyn Fn(&[u8]) -> Result<bool, String> + Send + Sync + 'a;
/// The exact condition of a probe on a decoded key, beyond its byte ranges (`Err`: the key
/// does not decode).
#[cfg(target_arch = "wasm32")]
pub type KeepKey<'a> = dyn Fn(&[u8]) -> Result<bool, String> + 'a;

/// What one probe asks of a blob: keys within `ranges` (sorted, disjoint or not) for which
/// `keep`, when given, holds.
#[derive(Clone, Copy)]
pub struct KeyProbe<'a> {
    pub ranges: &'a [ByteRange],
    pub keep: Option<&'a KeepKey<'a>>,
}

impl KeyProbe<'_> {
    /// Whether `key` is asked for (ranges then the exact condition).
    pub fn wants(&self, key: &[u8]) -> Result<bool, BlobError> {
        if !self.ranges.iter().any(|r| r.contains(key)) {
            return Ok(false);
        }
        match self.keep {
            None => Ok(true),
            Some(f) => f(key).map_err(|e| BlobError::Unusable(format!("undecodable key: {e}"))),
        }
    }
}

/// The rows a probe selects in one blob, for a count.
#[derive(Debug)]
pub enum Positions {
    /// Only how many (a directory's cardinalities: the blob's values are disjoint).
    Count(u64),
    /// The positions themselves (to intersect with other columns' or subtract deletes).
    Set(RoaringTreemap),
}

/// What a count asks of a table run about one of its covered files
/// ([`super::Kind::run_positions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunWant {
    /// Nothing: the file is answered another way.
    Skip,
    /// How many rows the probe selects.
    Count,
    /// The positions themselves, each below `rows` (the file's record count).
    Set { rows: u64 },
}

/// A table run's answer to a count ([`super::Kind::run_positions`]).
#[derive(Debug)]
pub enum RunPositions {
    /// Every covered file was asked how many: their total, from the run's directory alone.
    Total(u64),
    /// Per ordinal, what was asked (`None` where nothing was).
    PerFile(Vec<Option<Positions>>),
}

/// The entries a probe selects, as a position set (what a kind without a cheaper count
/// gives [`super::Kind::positions`]).
pub fn positions_of(entries: Vec<(Vec<u8>, u64)>) -> Positions {
    Positions::Set(entries.into_iter().map(|(_, p)| p).collect())
}
