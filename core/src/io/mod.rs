//! Range-read I/O: the one seam between Skerry's formats and where bytes live.
//!
//! [`RangeReader`] reads byte ranges, suffixes, sizes/versions and whole objects, addressed by
//! a [`Location`] (path + optional version). It is object-safe and usable as
//! `Arc<dyn RangeReader>`; its futures are `Send` natively and not `Send` on wasm32, where
//! JavaScript promises are not.
//!
//! Implementations: [`MemoryReader`] (everywhere; tests, whole-file fast paths),
//! [`ObjectStoreReader`] (native: `file://`, `memory://`, `s3://`). The wasm readers (fetch,
//! JS callback) live in the wasm binding. Wrappers: [`CachedReader`] (byte-budgeted cache
//! keyed by path + version + range).
//!
//! Every reader counts requests and bytes in [`IoCounters`]; [`RangeReader::read_ranges`]
//! coalesces adjacent or near ranges into one request.

mod cache;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod faults;
mod memory;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
mod object_store;
pub mod path;
pub mod rest;
#[cfg(all(feature = "s3", not(target_arch = "wasm32")))]
pub mod rest_catalog;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub mod store;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
mod url;

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

pub use self::cache::CachedReader;
pub use self::memory::MemoryReader;
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub use self::object_store::{ObjectStoreReader, LOCAL_INLINE_MAX};
#[cfg(all(feature = "native", not(target_arch = "wasm32")))]
pub use self::url::UrlReader;

#[cfg(not(target_arch = "wasm32"))]
mod markers {
    /// `Send` natively, nothing on wasm32.
    pub trait MaybeSend: Send {}
    impl<T: Send + ?Sized> MaybeSend for T {}
    /// `Sync` natively, nothing on wasm32.
    pub trait MaybeSync: Sync {}
    impl<T: Sync + ?Sized> MaybeSync for T {}
    /// A boxed future, `Send` natively.
    pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
}
#[cfg(target_arch = "wasm32")]
mod markers {
    /// `Send` natively, nothing on wasm32.
    pub trait MaybeSend {}
    impl<T: ?Sized> MaybeSend for T {}
    /// `Sync` natively, nothing on wasm32.
    pub trait MaybeSync {}
    impl<T: ?Sized> MaybeSync for T {}
    /// A boxed future, `Send` natively.
    pub type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;
}
pub use markers::*;

/// Ranges closer than this are fetched in one request by the default
/// [`RangeReader::read_ranges`].
pub const DEFAULT_COALESCE_GAP: u64 = 64 * 1024;

/// The gap bridged when fetching the pages that hold a few rows: pages of other rows (or
/// other column chunks) between them are not worth reading, and the requests go out in
/// parallel.
pub const PAGE_COALESCE_GAP: u64 = 8 * 1024;

/// An object to read: its path relative to the reader's root, and optionally the version
/// (ETag or object version) the caller expects.
///
/// With a version, a reader must fail with [`IoError::Changed`] rather than return bytes of
/// another version where the store can tell; caches key on it. A location without a version
/// is treated as immutable by caches (Skerry's bundles and manifests never change in place).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    pub path: Arc<str>,
    pub version: Option<Arc<str>>,
}

impl Location {
    pub fn new(path: impl AsRef<str>) -> Self {
        Location {
            path: Arc::from(path.as_ref()),
            version: None,
        }
    }
    pub fn with_version(mut self, version: impl AsRef<str>) -> Self {
        self.version = Some(Arc::from(version.as_ref()));
        self
    }
}

impl From<&str> for Location {
    fn from(p: &str) -> Self {
        Location::new(p)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            Some(v) => write!(f, "{}@{}", self.path, v),
            None => f.write_str(&self.path),
        }
    }
}

/// Whether an HTTP `ETag` is a content hash a store recomputes on every write — S3, R2,
/// MinIO and GCS's MD5 form (`"<32 hex>"`, or `"<32 hex>-<parts>"` for a multipart upload) —
/// as opposed to a weak validator (`W/"…"`) or one made of a file's modification time and
/// size (nginx, Apache, Node's servers), which a same-size rewrite can keep. Readers over
/// HTTP take the first kind as a content version ([`RangeReader::content_versions`]).
pub fn content_etag(etag: &str) -> bool {
    let Some(inner) = etag.strip_prefix('"').and_then(|e| e.strip_suffix('"')) else {
        return false;
    };
    let (hash, parts) = match inner.split_once('-') {
        Some((h, p)) => (h, Some(p)),
        None => (inner, None),
    };
    hash.len() == 32
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && parts
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Size and version of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
    pub size: u64,
    /// ETag or object version, when the store reports one.
    pub version: Option<String>,
}

/// Typed I/O failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    #[error("object not found: {path}")]
    NotFound { path: String },
    #[error("object changed: {path} is no longer version {expected}")]
    Changed { path: String, expected: String },
    #[error("range {start}..{end} is outside {path} ({size} bytes)")]
    OutOfRange {
        path: String,
        start: u64,
        end: u64,
        size: u64,
    },
    #[error("invalid range {start}..{end} for {path}")]
    InvalidRange { path: String, start: u64, end: u64 },
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A whole-object read found the object larger than the caller's bound (checked while
    /// reading, before the bytes are buffered).
    #[error("{path} is larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    /// A request got no complete answer within the reader's time limit.
    #[error("{path}: no answer within {ms} ms")]
    Timeout { path: String, ms: u64 },
    /// The caller's abort signal fired.
    #[error("{path}: aborted")]
    Aborted { path: String },
    /// The store refused the request's credentials (HTTP 401/403): not retried, `E_AUTH`.
    #[error("access denied to {path}: {message}")]
    Denied { path: String, message: String },
    #[error("I/O error on {path}: {message}")]
    Other {
        path: String,
        message: String,
        /// The store's or platform's own error, where there is one.
        #[source]
        source: Option<Source>,
    },
}

/// The error a failure came from, kept for [`std::error::Error::source`] (callers can walk
/// the chain to the object store's, SlateDB's or Parquet's own error). Compared and shown by
/// its message, so errors stay `Clone + Eq`.
#[derive(Clone)]
pub struct Source(pub Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Source {
    pub fn new(e: impl std::error::Error + Send + Sync + 'static) -> Option<Source> {
        Some(Source(Arc::new(e)))
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Source {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Source {}

/// Request/byte/cache counters of a reader. Cheap to share (`Arc`), safe to read any time.
#[derive(Debug, Default)]
pub struct IoCounters {
    requests: AtomicU64,
    bytes: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
}

/// The counters of a reader that counts nothing.
static UNCOUNTED: IoCounters = IoCounters {
    requests: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    cache_hits: AtomicU64::new(0),
    cache_misses: AtomicU64::new(0),
};

/// A snapshot of [`IoCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    pub requests: u64,
    pub bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

impl IoStats {
    /// Counter growth since `earlier`.
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        IoStats {
            requests: self.requests - earlier.requests,
            bytes: self.bytes - earlier.bytes,
            cache_hits: self.cache_hits - earlier.cache_hits,
            cache_misses: self.cache_misses - earlier.cache_misses,
        }
    }
}

impl IoCounters {
    pub fn record_request(&self, bytes: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    pub fn record_hit(&self) {
        self.cache_hits.fetch_add(1, Ordering::Relaxed);
    }
    pub fn record_miss(&self) {
        self.cache_misses.fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> IoStats {
        IoStats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            cache_misses: self.cache_misses.load(Ordering::Relaxed),
        }
    }
}

/// One request a [`RangeReader`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The object's metadata.
    Head,
    /// Exactly the bytes of the range.
    Range(Range<u64>),
    /// The last `min(n, size)` bytes, and the object's metadata.
    Suffix(u64),
    /// The last `min(len, size)` bytes of an object expected to be `expected_size` bytes
    /// long, and its metadata as it is now (see [`RangeReader::read_tail`]); a reader without
    /// a reason to differ answers it as [`Request::Suffix`].
    Tail { expected_size: u64, len: u64 },
    /// The whole object; with a bound, [`IoError::TooLarge`] past it, enforced while reading.
    All(Option<u64>),
}

/// What a [`Request`] returns: the bytes (none for [`Request::Head`]) and, for `Head`,
/// `Suffix` and `Tail`, the object's metadata.
#[derive(Clone, Debug)]
pub struct Reply {
    pub bytes: Bytes,
    pub meta: Option<ObjectMeta>,
}

impl Reply {
    pub fn bytes(bytes: Bytes) -> Reply {
        Reply { bytes, meta: None }
    }

    pub fn meta(meta: ObjectMeta) -> Reply {
        Reply {
            bytes: Bytes::new(),
            meta: Some(meta),
        }
    }

    pub fn tail(bytes: Bytes, meta: ObjectMeta) -> Reply {
        Reply {
            bytes,
            meta: Some(meta),
        }
    }

    /// The metadata a `Head`, `Suffix` or `Tail` reply must carry.
    fn need_meta(self, loc: &Location) -> Result<(Bytes, ObjectMeta), IoError> {
        match self.meta {
            Some(m) => Ok((self.bytes, m)),
            None => Err(IoError::Other {
                path: loc.path.to_string(),
                message: "the reader answered without the object's metadata".into(),
                source: None,
            }),
        }
    }
}

/// [`IoError::TooLarge`] when `bytes` exceed `max` (for readers whose objects are already in
/// memory; a reader that streams enforces the bound while reading).
pub fn at_most(loc: &Location, bytes: Bytes, max: Option<u64>) -> Result<Bytes, IoError> {
    match max {
        Some(max) if bytes.len() as u64 > max => Err(IoError::TooLarge {
            path: loc.path.to_string(),
            max,
        }),
        _ => Ok(bytes),
    }
}

/// Reads bytes of objects by range. A reader implements one method, [`RangeReader::fetch`];
/// every other read is built on it.
///
/// Contract:
/// - `Range` returns exactly `range.end - range.start` bytes or an error; an empty or
///   inverted range is [`IoError::InvalidRange`], a range past the end [`IoError::OutOfRange`].
/// - `Suffix(n)` returns the last `min(n, size)` bytes and the object's metadata, in ONE
///   request where the store supports suffix ranges (HTTP `Range: bytes=-n`).
/// - `All(Some(max))` never buffers more than `max` bytes before failing
///   [`IoError::TooLarge`].
/// - A location with a version fails [`IoError::Changed`] when the object is at another
///   version (where the store can tell).
/// - A reader that counts requests made to its backing store reports them in
///   [`RangeReader::counters`] (routers count once, in `fetch`; [`CachedReader`] counts
///   hits and misses).
pub trait RangeReader: MaybeSend + MaybeSync {
    /// Answers one request.
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>>;

    fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
        Box::pin(async move { Ok(self.fetch(loc, Request::Head).await?.need_meta(loc)?.1) })
    }
    fn read_range<'a>(
        &'a self,
        loc: &'a Location,
        range: Range<u64>,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move { Ok(self.fetch(loc, Request::Range(range)).await?.bytes) })
    }
    fn read_suffix<'a>(
        &'a self,
        loc: &'a Location,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move { self.fetch(loc, Request::Suffix(len)).await?.need_meta(loc) })
    }
    /// The last `min(n, size)` bytes of an object expected to be `expected_size` bytes long,
    /// and its metadata as it is now. Readers whose suffix requests are fragile (HTTP behind a
    /// browser cache turns `bytes=-n` into an unsatisfiable `bytes=<start>-n` once part of
    /// the object is cached) answer [`Request::Tail`] with an absolute range and re-read at
    /// the real size when the object is no longer `expected_size` bytes.
    fn read_tail<'a>(
        &'a self,
        loc: &'a Location,
        expected_size: u64,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            self.fetch(loc, Request::Tail { expected_size, len })
                .await?
                .need_meta(loc)
        })
    }
    fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move { Ok(self.fetch(loc, Request::All(None)).await?.bytes) })
    }
    /// Reads a whole object of at most `max` bytes, or fails [`IoError::TooLarge`].
    fn read_all_max<'a>(
        &'a self,
        loc: &'a Location,
        max: u64,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move { Ok(self.fetch(loc, Request::All(Some(max))).await?.bytes) })
    }
    /// This reader's counters (a reader that counts nothing reports zeros).
    fn counters(&self) -> &IoCounters {
        &UNCOUNTED
    }

    /// Whether a read of `loc` at its version proves its bytes are that version's, and a
    /// version names one content: the pin is checked on every read (by the store, or by the
    /// reader against the version the answer carries) and the store's versions change
    /// whenever the bytes do (S3-compatible ETags, which hash the content; counters that never
    /// repeat). Then a page kept from an earlier read at the same version may be used without
    /// fetching it again. `false` (the default, and the answer for a location without a
    /// version) where either half is not promised — a local file's ETag is its modification
    /// time and size, which a same-size rewrite can restore — and callers keep comparing
    /// bytes. The rule per store: `docs/guarantees.md`, "Versions".
    fn content_versions(&self, loc: &Location) -> bool {
        let _ = loc;
        false
    }

    /// Largest gap between two ranges that [`RangeReader::read_ranges`] bridges.
    fn coalesce_gap(&self) -> u64 {
        DEFAULT_COALESCE_GAP
    }

    /// Reads several ranges of one object, merging ranges closer than
    /// [`RangeReader::coalesce_gap`] into one request; results are in input order.
    fn read_ranges<'a>(
        &'a self,
        loc: &'a Location,
        ranges: &'a [Range<u64>],
    ) -> BoxFut<'a, Result<Vec<Bytes>, IoError>> {
        self.read_ranges_gap(loc, ranges, self.coalesce_gap())
    }

    /// [`RangeReader::read_ranges`] bridging gaps of at most `max_gap` bytes: the merged
    /// requests are issued in parallel, so a small gap costs requests, not round trips.
    fn read_ranges_gap<'a>(
        &'a self,
        loc: &'a Location,
        ranges: &'a [Range<u64>],
        max_gap: u64,
    ) -> BoxFut<'a, Result<Vec<Bytes>, IoError>> {
        Box::pin(read_ranges_each(self, loc, ranges, max_gap))
    }

    /// Snapshot of this reader's counters.
    fn stats(&self) -> IoStats {
        self.counters().snapshot()
    }
}

/// [`RangeReader::read_ranges_gap`] as every reader does it: `ranges` merged across gaps of at
/// most `max_gap`, one [`RangeReader::read_range`] per merged range, all in parallel.
pub async fn read_ranges_each<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    ranges: &[Range<u64>],
    max_gap: u64,
) -> Result<Vec<Bytes>, IoError> {
    for x in ranges {
        check_range(loc, x)?;
    }
    let merged = coalesce_ranges(ranges, max_gap);
    let fetched =
        futures::future::try_join_all(merged.iter().map(|m| r.read_range(loc, m.clone()))).await?;
    Ok(slice_merged(ranges, &merged, &fetched))
}

/// The requests for `ranges` when they are a subset of what `merged` (ascending, disjoint)
/// was coalesced from: within each merged range, those of `ranges` it holds, joined across
/// gaps of at most `max_gap` — so what was left out between two of them costs a request only
/// when it is larger than that. Never more requests than `merged` plus the gaps over
/// `max_gap`; ranges outside every merged range are dropped.
pub fn spans_within(merged: &[Range<u64>], ranges: &[Range<u64>], max_gap: u64) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for m in merged {
        let inside: Vec<Range<u64>> = ranges
            .iter()
            .filter(|r| m.start <= r.start && r.end <= m.end && r.start < r.end)
            .cloned()
            .collect();
        out.extend(coalesce_ranges(&inside, max_gap));
    }
    out
}

/// Each of `ranges` cut from the bytes `fetched` of the merged ranges `merged` that
/// [`coalesce_ranges`] made of them.
pub fn slice_merged(ranges: &[Range<u64>], merged: &[Range<u64>], fetched: &[Bytes]) -> Vec<Bytes> {
    ranges
        .iter()
        .map(|r| {
            let i = merged.partition_point(|m| m.end < r.end);
            let m = &merged[i];
            fetched[i].slice((r.start - m.start) as usize..(r.end - m.start) as usize)
        })
        .collect()
}

/// The bytes of every range of `ranges`, taking those `have` holds (same order, `None` for
/// the ones to read) as they are and reading the rest with one
/// [`RangeReader::read_ranges_gap`]; `fetched` sees each range read.
pub async fn read_missing<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    ranges: &[Range<u64>],
    mut have: Vec<Option<Bytes>>,
    gap: u64,
    mut fetched: impl FnMut(&Range<u64>, &Bytes),
) -> Result<Vec<Bytes>, IoError> {
    let missing: Vec<Range<u64>> = ranges
        .iter()
        .zip(&have)
        .filter(|(_, b)| b.is_none())
        .map(|(r, _)| r.clone())
        .collect();
    if !missing.is_empty() {
        let got = r.read_ranges_gap(loc, &missing, gap).await?;
        let mut got = missing.iter().zip(got);
        for slot in have.iter_mut().filter(|b| b.is_none()) {
            let (range, bytes) = got.next().expect("one read per missing range");
            fetched(range, &bytes);
            *slot = Some(bytes);
        }
    }
    Ok(have.into_iter().flatten().collect())
}

/// Rejects empty and inverted ranges.
pub fn check_range(loc: &Location, r: &Range<u64>) -> Result<(), IoError> {
    if r.start >= r.end {
        return Err(IoError::InvalidRange {
            path: loc.path.to_string(),
            start: r.start,
            end: r.end,
        });
    }
    Ok(())
}

/// [`IoError::OutOfRange`]: `r` of `loc` reaches past its `size`.
pub fn past_end(loc: &Location, r: &Range<u64>, size: u64) -> IoError {
    IoError::OutOfRange {
        path: loc.path.to_string(),
        start: r.start,
        end: r.end,
        size,
    }
}

/// Sorts and merges ranges whose gap is at most `max_gap` (overlapping ranges always merge).
/// Each input range lies entirely inside exactly one output range.
pub fn coalesce_ranges(ranges: &[Range<u64>], max_gap: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| r.start < r.end).cloned().collect();
    sorted.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(max_gap) => {
                last.end = last.end.max(r.end)
            }
            _ => out.push(r),
        }
    }
    out
}

/// Runs a future to completion on the current thread (tests, examples, benchmarks).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_merges_near_and_overlapping_ranges() {
        let m = coalesce_ranges(&[10..20, 0..5, 25..30, 100..110, 15..40], 5);
        assert_eq!(m, vec![0..40, 100..110]);
        assert_eq!(coalesce_ranges(&[0..5, 11..12], 5), vec![0..5, 11..12]);
        assert_eq!(coalesce_ranges(&[0..5, 10..12], 5), vec![0..12]);
    }

    #[test]
    fn spans_within_trims_the_ends_of_each_request() {
        let merged = [0..100, 200..300, 400..500];
        let want = [10..20, 50..60, 70..75, 210..220, 401..402, 600..700];
        assert_eq!(
            spans_within(&merged, &want, 25),
            vec![10..20, 50..75, 210..220, 401..402]
        );
        assert_eq!(
            spans_within(&merged, &want, 100),
            vec![10..75, 210..220, 401..402]
        );
        assert!(spans_within(&merged, &[], 100).is_empty());
    }

    #[test]
    fn only_content_hash_etags_are_content_versions() {
        for strong in [
            "\"9b2cf535f27731c974343645a3985328\"",
            "\"9B2CF535F27731C974343645A3985328\"",
            "\"d41d8cd98f00b204e9800998ecf8427e-12\"",
        ] {
            assert!(content_etag(strong), "{strong}");
        }
        for weak in [
            "W/\"9b2cf535f27731c974343645a3985328\"",
            "9b2cf535f27731c974343645a3985328",
            "\"5f3e1a2b-1c9f\"",
            "\"2a0e7-1f4-18c2f0e1d22\"",
            "\"9b2cf535f27731c974343645a398532\"",
            "\"9b2cf535f27731c974343645a3985328-\"",
            "\"9b2cf535f27731c974343645a3985328-x\"",
            "\"9b2cf535f27731c974343645a398532g\"",
            "\"\"",
            "\"",
            "",
        ] {
            assert!(!content_etag(weak), "{weak}");
        }
    }
}
