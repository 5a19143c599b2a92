//! Reading index blobs of one manifest: where a blob is ([`BlobRef`]), what a probe asks of
//! it ([`Probe`]), and [`Blobs`] — the overlay's reader and the read cache — which hands a
//! kind's read hooks a blob as an [`OverlayBlob`] ([`BlobAccess`]). Below `read::lookup`: a
//! kind's reader never calls back into the engine.

use std::ops::Range;

use bytes::Bytes;

use crate::formats::lineage::RejectReason;
use crate::formats::manifest::{IndexFileEntry, OrderedMeta};
use crate::index::access::{BlobAccess, KeepKey, KeyProbe, Part};
use crate::index::blob::{BlobError, BlobMeta};
use crate::index::Kind;
use crate::io::{BoxFut, Location, RangeReader};
use crate::read::cache::ReadCache;
use crate::read::range::{ByteRange, RangeFilter};
use crate::values::KeySchema;

/// The overlay's reader and the read cache: what reading a blob takes.
#[derive(Clone, Copy)]
pub(crate) struct Blobs<'a> {
    pub(crate) overlay: &'a dyn RangeReader,
    pub(crate) cache: &'a ReadCache,
}

/// What one accessor asks of every file: byte ranges of the index (sorted, disjoint or not)
/// and, for ranges, the exact predicate on decoded keys.
pub(crate) struct Probe {
    pub(crate) ranges: Vec<ByteRange>,
    pub(crate) filter: Option<RangeFilter>,
}

/// A blob to probe: where it is and its directory facts.
#[derive(Clone, Copy)]
pub(crate) struct BlobRef<'a> {
    pub(crate) bundle_path: &'a str,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) ordered: &'a OrderedMeta,
    /// Rows of the data file: every position must be below it (`None` for a table run,
    /// whose positions are checked per covered file).
    pub(crate) rows: Option<u64>,
}

impl<'a> BlobRef<'a> {
    /// The blob of one file's entry.
    pub(crate) fn of(e: &'a IndexFileEntry) -> BlobRef<'a> {
        BlobRef {
            bundle_path: &e.lineage.bundle_path,
            offset: e.lineage.blob_offset,
            length: e.lineage.blob_length,
            ordered: &e.ordered,
            rows: Some(e.lineage.source_record_count),
        }
    }

    /// Why the blob cannot answer, as the read gate reports it.
    pub(crate) fn corrupt(&self, err: BlobError) -> RejectReason {
        match err {
            BlobError::Checksum(what) => RejectReason::BlobChecksum {
                expected: self.ordered.directory_sha256.clone(),
                found: format!("{what} bytes differ"),
            },
            BlobError::Io(e) => index_io(e),
            BlobError::Unusable(message) => RejectReason::Corrupt { message },
            other => RejectReason::Corrupt {
                message: other.to_string(),
            },
        }
    }
}

/// Whether a blob's key bounds let any of `ranges` in (an empty blob holds nothing; bounds
/// that do not decode are not trusted to exclude anything).
pub(crate) fn reaches(o: &OrderedMeta, ranges: &[ByteRange]) -> bool {
    o.reaches(ranges)
}

impl<'a> Blobs<'a> {
    /// The blob at `at`, as a kind's read hooks see it.
    pub(crate) fn at(self, at: BlobRef<'a>) -> OverlayBlob<'a> {
        OverlayBlob { blobs: self, at }
    }
}

/// One blob of the overlay read through the read cache: what a kind's read hooks are given.
pub(crate) struct OverlayBlob<'a> {
    blobs: Blobs<'a>,
    at: BlobRef<'a>,
}

impl OverlayBlob<'_> {
    /// `span` (relative to the blob) in the bundle.
    fn absolute(&self, span: &Range<u64>) -> Result<Range<u64>, BlobError> {
        if span.start > span.end || span.end > self.at.length {
            return Err(BlobError::Corrupt("a range outside the blob"));
        }
        let start = self.at.offset.checked_add(span.start);
        let end = self.at.offset.checked_add(span.end);
        match (start, end) {
            (Some(s), Some(e)) => Ok(s..e),
            _ => Err(BlobError::Corrupt("blob range overflows")),
        }
    }

    /// The `(key, position)` entries `kind` names for a probe of this blob.
    pub(crate) async fn rows(
        &self,
        kind: &dyn Kind,
        key: &KeySchema,
        probe: &Probe,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>, RejectReason> {
        let keep = probe.filter.as_ref().map(|f| keep_fn(key, f));
        let p = KeyProbe {
            ranges: &probe.ranges,
            keep: keep.as_deref(),
        };
        kind.rows(self, p).await.map_err(|e| self.at.corrupt(e))
    }

    /// What `kind` estimates a probe of this blob decodes.
    pub(crate) async fn estimate(
        &self,
        kind: &dyn Kind,
        key: &KeySchema,
        probe: &Probe,
    ) -> Option<u64> {
        let keep = probe.filter.as_ref().map(|f| keep_fn(key, f));
        let p = KeyProbe {
            ranges: &probe.ranges,
            keep: keep.as_deref(),
        };
        kind.estimate(self, p).await
    }

    /// Why this blob cannot answer, as the read gate reports it.
    pub(crate) fn reject(&self, err: BlobError) -> RejectReason {
        self.at.corrupt(err)
    }
}

/// A probe's exact filter as a kind's reader applies it to a key.
fn keep_fn<'k>(key: &'k KeySchema, f: &'k RangeFilter) -> Box<KeepKey<'k>> {
    Box::new(move |k: &[u8]| {
        key.decode(k)
            .map(|vals| f.matches(&vals))
            .map_err(|e| e.to_string())
    })
}

impl BlobAccess for OverlayBlob<'_> {
    fn meta(&self) -> &BlobMeta {
        self.at.ordered
    }
    fn length(&self) -> u64 {
        self.at.length
    }
    fn rows(&self) -> Option<u64> {
        self.at.rows
    }
    fn read<'s>(&'s self, spans: &'s [Range<u64>]) -> BoxFut<'s, Result<Vec<Bytes>, BlobError>> {
        self.read_near(spans, self.blobs.overlay.coalesce_gap())
    }
    fn read_near<'s>(
        &'s self,
        spans: &'s [Range<u64>],
        gap: u64,
    ) -> BoxFut<'s, Result<Vec<Bytes>, BlobError>> {
        Box::pin(async move {
            let spans: Vec<Range<u64>> = spans
                .iter()
                .map(|s| self.absolute(s))
                .collect::<Result<_, _>>()?;
            let (cache, bundle) = (self.blobs.cache, self.at.bundle_path);
            let cached: Vec<Option<Bytes>> = spans
                .iter()
                .map(|r| cache.block(bundle, r.start, r.end))
                .collect();
            crate::io::read_missing(
                self.blobs.overlay,
                &Location::new(bundle),
                &spans,
                cached,
                gap,
                |r, b| cache.put_block(bundle, r.start, r.end, b.clone()),
            )
            .await
            .map_err(BlobError::Io)
        })
    }
    fn read_once(&self, span: Range<u64>) -> BoxFut<'_, Result<Bytes, BlobError>> {
        Box::pin(async move {
            let span = self.absolute(&span)?;
            let at = Location::new(self.at.bundle_path);
            self.blobs
                .overlay
                .read_range(&at, span)
                .await
                .map_err(BlobError::Io)
        })
    }
    fn cached_directory(&self) -> Option<Part> {
        let sha = &self.at.ordered.directory_sha256;
        self.blobs
            .cache
            .directory(self.at.bundle_path, self.at.offset, sha)
    }
    fn keep_directory(&self, part: Part, bytes: u64) {
        let sha = &self.at.ordered.directory_sha256;
        self.blobs
            .cache
            .put_directory(self.at.bundle_path, self.at.offset, sha, part, bytes)
    }
}

/// A bundle that cannot be read (deleted by a vacuum, unreachable) is a rejection, not a
/// failed query: the file is scanned instead.
pub(crate) fn index_io(err: crate::io::IoError) -> RejectReason {
    match err {
        crate::io::IoError::NotFound { .. } => RejectReason::Missing,
        other => RejectReason::Corrupt {
            message: other.to_string(),
        },
    }
}
