//! Reading index blobs of one manifest: where a blob is ([`BlobRef`]), what a probe asks of
//! it ([`Probe`]), and [`Blobs`] — the overlay's reader and the read cache, which the
//! per-kind blob readers (`read::bitmap`) are methods of. Below `read::lookup`: a kind's
//! reader never calls back into the engine.

use crate::formats::lineage::RejectReason;
use crate::formats::manifest::{IndexFileEntry, OrderedMeta};
use crate::index::blob::BlobError;
use crate::io::RangeReader;
use crate::read::cache::ReadCache;
use crate::read::range::{ByteRange, RangeFilter};

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

    pub(crate) fn corrupt(&self, err: BlobError) -> RejectReason {
        match err {
            BlobError::Checksum(what) => RejectReason::BlobChecksum {
                expected: self.ordered.directory_sha256.clone(),
                found: format!("{what} bytes differ"),
            },
            other => RejectReason::Corrupt {
                message: other.to_string(),
            },
        }
    }
}

/// Whether a blob's key bounds let any of `ranges` in (an empty blob holds nothing; bounds
/// that do not decode are not trusted to exclude anything).
pub(crate) fn reaches(o: &OrderedMeta, ranges: &[ByteRange]) -> bool {
    let unhex = |h: &Option<String>| h.as_deref().map(hex::decode);
    match (unhex(&o.min_key), unhex(&o.max_key)) {
        (Some(Ok(min)), Some(Ok(max))) => ranges.iter().any(|r| {
            r.start.as_slice() <= max.as_slice()
                && r.end.as_deref().is_none_or(|end| end > min.as_slice())
        }),
        (None, None) => false,
        _ => true,
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
