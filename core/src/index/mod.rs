//! Index kinds, one module each: the blob layout (writer and reader side by side) and what a
//! read asks of it. [`IndexKind`] is the seam: a definition names its kind, the build writes
//! the kind's blob from the file's sorted `(key, position)` entries, the manifest carries the
//! kind so readers decode the blob the kind wrote, and the planner weighs kinds by the bytes
//! they read. `ordered` (`docs/ordered-index.md`) serves `=`, IN, ranges and IS NULL on any
//! key; `bitmap` (`docs/bitmap-index.md`) serves the same on low-cardinality keys and answers
//! counts from its directory; `bloom` (`docs/bloom-index.md`) prunes files for `=`/IN on
//! high-cardinality keys, striped so one range read prunes every file of a table.

use serde::{Deserialize, Serialize};

use crate::formats::lineage::IndexCategory;

pub mod bitmap;
pub mod bloom;
pub mod ordered;

/// What an index definition builds per data file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Sorted keys → positions in blocks ([`ordered`]).
    #[default]
    Ordered,
    /// Distinct keys → Roaring bitmaps of positions ([`bitmap`]).
    Bitmap,
    /// A split-block bloom filter of the keys ([`bloom`]): prunes files for `=`/IN, names
    /// no positions.
    Bloom,
}

impl IndexKind {
    /// Parses a kind as hosts spell it (`E_INVALID` names the kinds there are).
    pub fn parse(s: &str) -> crate::error::Result<IndexKind> {
        match s {
            "ordered" => Ok(IndexKind::Ordered),
            "bitmap" => Ok(IndexKind::Bitmap),
            "bloom" => Ok(IndexKind::Bloom),
            other => Err(crate::error::Error::Invalid(format!(
                "unknown index kind {other:?} (kinds: ordered, bitmap, bloom)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Ordered => "ordered",
            IndexKind::Bitmap => "bitmap",
            IndexKind::Bloom => "bloom",
        }
    }

    /// Puffin blob type of the kind's per-file blob.
    pub fn blob_type(self) -> &'static str {
        match self {
            IndexKind::Ordered => ordered::BLOB_TYPE,
            IndexKind::Bitmap => bitmap::BLOB_TYPE,
            IndexKind::Bloom => bloom::BLOB_TYPE,
        }
    }

    /// The lineage's category and algorithm of the kind's blob.
    pub fn category(self) -> IndexCategory {
        match self {
            IndexKind::Ordered => IndexCategory::Ordered,
            IndexKind::Bitmap => IndexCategory::Bitmap,
            IndexKind::Bloom => IndexCategory::Bloom,
        }
    }

    pub fn algorithm(self) -> &'static str {
        match self {
            IndexKind::Ordered => "ordered-v1",
            IndexKind::Bitmap => "bitmap-v1",
            IndexKind::Bloom => "bloom-v1",
        }
    }

    pub fn is_ordered(&self) -> bool {
        *self == IndexKind::Ordered
    }

    /// Whether the kind's blobs name row positions (a bloom filter only prunes).
    pub fn has_positions(self) -> bool {
        self != IndexKind::Bloom
    }

    /// Calls `f(key, position)` for every entry of a whole blob of a kind with positions
    /// (verify reads blobs whole).
    pub fn read_entries(
        self,
        blob: &[u8],
        f: impl FnMut(&[u8], u64),
    ) -> Result<(), ordered::BlobError> {
        match self {
            IndexKind::Ordered => ordered::read_entries(blob, f),
            IndexKind::Bitmap => bitmap::read_entries(blob, f),
            IndexKind::Bloom => Err(ordered::BlobError::Corrupt("a bloom filter has no entries")),
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
