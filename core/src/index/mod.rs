//! Index kinds, one module each: the blob layout (writer and reader side by side) and what a
//! read asks of it. [`IndexKind`] is the seam: a definition names its kind, the build writes
//! the kind's blob from the file's sorted `(key, position)` entries, the manifest carries the
//! kind so readers decode the blob the kind wrote, and the planner weighs kinds by the bytes
//! they read. `ordered` (`docs/ordered-index.md`) serves `=`, IN, ranges and IS NULL on any
//! key; `bitmap` (`docs/bitmap-index.md`) serves the same on low-cardinality keys and answers
//! counts from its directory; `bloom` (`docs/bloom-index.md`) prunes files for `=`/IN on
//! high-cardinality keys, striped so one range read prunes every file of a table;
//! `fulltext` (`docs/fulltext-index.md`) answers BM25 searches over a text column;
//! `vector` (`docs/vector-index.md`) answers k-nearest-neighbour searches over a vector column.

use serde::{Deserialize, Serialize};

use crate::formats::lineage::IndexCategory;

pub mod analyzer;
pub mod bitmap;
pub mod bloom;
pub mod fulltext;
pub mod ordered;
pub mod vector;

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
    /// An inverted index of a text column's terms ([`fulltext`]): answers `search`, names
    /// no key's rows.
    Fulltext,
    /// An HNSW graph over 8-bit codes of a vector column ([`vector`]): answers `nearest`.
    Vector,
    /// A kind written by a newer version: read past (never planned, never built), so a
    /// manifest naming it still serves every other index.
    #[serde(other)]
    Unknown,
}

impl IndexKind {
    /// Parses a kind as hosts spell it (`E_INVALID` names the kinds there are).
    pub fn parse(s: &str) -> crate::error::Result<IndexKind> {
        match s {
            "ordered" => Ok(IndexKind::Ordered),
            "bitmap" => Ok(IndexKind::Bitmap),
            "bloom" => Ok(IndexKind::Bloom),
            "fulltext" => Ok(IndexKind::Fulltext),
            "vector" => Ok(IndexKind::Vector),
            other => Err(crate::error::Error::Invalid(format!(
                "unknown index kind {other:?} (kinds: ordered, bitmap, bloom, fulltext, vector)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Ordered => "ordered",
            IndexKind::Bitmap => "bitmap",
            IndexKind::Bloom => "bloom",
            IndexKind::Fulltext => "fulltext",
            IndexKind::Vector => "vector",
            IndexKind::Unknown => "unknown",
        }
    }

    /// Puffin blob type of the kind's per-file blob.
    pub fn blob_type(self) -> &'static str {
        match self {
            IndexKind::Ordered => ordered::BLOB_TYPE,
            IndexKind::Bitmap => bitmap::BLOB_TYPE,
            IndexKind::Bloom => bloom::BLOB_TYPE,
            IndexKind::Fulltext => fulltext::BLOB_TYPE,
            IndexKind::Vector => vector::BLOB_TYPE,
            IndexKind::Unknown => "unknown",
        }
    }

    /// The lineage's category and algorithm of the kind's blob.
    pub fn category(self) -> IndexCategory {
        match self {
            IndexKind::Ordered => IndexCategory::Ordered,
            IndexKind::Bitmap => IndexCategory::Bitmap,
            IndexKind::Bloom => IndexCategory::Bloom,
            IndexKind::Fulltext => IndexCategory::Fulltext,
            IndexKind::Vector => IndexCategory::Vector,
            IndexKind::Unknown => IndexCategory::Unknown,
        }
    }

    pub fn algorithm(self) -> &'static str {
        match self {
            IndexKind::Ordered => "ordered-v1",
            IndexKind::Bitmap => "bitmap-v1",
            IndexKind::Bloom => "bloom-v1",
            IndexKind::Fulltext => "fulltext-v1",
            IndexKind::Vector => "hnsw-tq8-v1",
            IndexKind::Unknown => "unknown",
        }
    }

    pub fn is_ordered(&self) -> bool {
        *self == IndexKind::Ordered
    }

    /// Whether the kind's blobs name the rows of a key (a bloom filter only prunes; a
    /// full-text index names the rows of terms, not of the column's values).
    pub fn has_positions(self) -> bool {
        matches!(self, IndexKind::Ordered | IndexKind::Bitmap)
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
            IndexKind::Fulltext => Err(ordered::BlobError::Corrupt(
                "a full-text blob holds terms, not entries",
            )),
            IndexKind::Vector => Err(ordered::BlobError::Corrupt(
                "a vector blob holds a graph, not entries",
            )),
            IndexKind::Unknown => Err(ordered::BlobError::Corrupt(
                "an index kind this version does not know",
            )),
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The Fx hash (rustc's): the keys and terms of one file need speed, not DoS resistance.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for b in chunks.remainder() {
            self.add(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
