//! What every kind's blob shares: the facts the manifest records about a blob
//! ([`BlobMeta`]), the check every directory read starts with ([`check_sha256`]), and the
//! key ranges a probe asks of it ([`ByteRange`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobError {
    #[error("corrupt index blob: {0}")]
    Corrupt(&'static str),
    #[error("index blob checksum mismatch in {0}")]
    Checksum(&'static str),
    #[error("ordered index entries out of order at entry {0}")]
    Unsorted(u64),
    #[error("key of {0} bytes exceeds the ordered index's cap")]
    KeyTooLarge(usize),
    /// A blob whose bytes check out but whose content a probe cannot use (a key that does
    /// not decode, more positions than one blob expands).
    #[error("unusable index blob: {0}")]
    Unusable(String),
    /// The blob's bytes could not be read (a vacuumed bundle is `NotFound`).
    #[error("index blob unreadable: {0}")]
    Io(crate::io::IoError),
}

/// Checks `bytes` against a lowercase or uppercase hex SHA-256 (the manifest's), when one is
/// given: `BlobError::Checksum(what)` on a mismatch. Every directory parse starts here, so a
/// damaged directory is rejected before a byte of it is trusted.
pub fn check_sha256(
    bytes: &[u8],
    sha256_hex: Option<&str>,
    what: &'static str,
) -> Result<(), BlobError> {
    match sha256_hex {
        Some(h) if !hex::encode(Sha256::digest(bytes)).eq_ignore_ascii_case(h) => {
            Err(BlobError::Checksum(what))
        }
        _ => Ok(()),
    }
}

/// A half-open byte range `[start, end)` of canonical keys (`end: None` runs to the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByteRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl ByteRange {
    /// Exactly the keys that start with `prefix`.
    pub fn prefix(prefix: Vec<u8>) -> ByteRange {
        ByteRange {
            end: prefix_end(&prefix),
            start: prefix,
        }
    }
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }
    /// Whether any key of `[min, max]` is in the range.
    pub fn meets(&self, min: &[u8], max: &[u8]) -> bool {
        self.start.as_slice() <= max && self.end.as_deref().is_none_or(|end| end > min)
    }
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None`
/// when no such string exists (empty prefix or all `0xFF`). `[prefix, prefix_end(prefix))`
/// is the byte range of a prefix scan.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// What a reader needs to use an ordered blob without reading its trailer or the bundle's
/// footer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobMeta {
    /// Directory range relative to the blob's start.
    pub directory_offset: u64,
    pub directory_length: u64,
    pub directory_sha256: String,
    /// Entries (ordered) or positions (bitmap) the blob holds.
    pub entries: u64,
    /// Distinct keys (bitmap blobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<u64>,
    /// Filter blocks (bloom blobs and striped runs: the directory is then the page hashes,
    /// or the stripes' trailer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    /// Smallest and largest key (hex), absent for an empty blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_key: Option<String>,
    /// A full-text blob's statistics (what a search sums into the table's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextStats>,
    /// A vector blob's dimensions (absent when the file holds no vector): every file of a
    /// vector index must agree, or the index is poisoned with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dim: Option<u32>,
}

/// One data file's full-text statistics, as its blob's directory records them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextStats {
    /// Rows with a non-NULL value.
    pub docs: u64,
    /// Terms over every document.
    pub tokens: u64,
    /// Distinct terms.
    pub terms: u64,
}

impl BlobMeta {
    /// The facts of a blob whose directory is at `directory` (relative to the blob's start)
    /// with SHA-256 `directory_sha256`, holding `entries`; the optional facts absent.
    pub fn new(directory: std::ops::Range<u64>, directory_sha256: &str, entries: u64) -> BlobMeta {
        BlobMeta {
            directory_offset: directory.start,
            directory_length: directory.end - directory.start,
            directory_sha256: directory_sha256.to_string(),
            entries,
            values: None,
            blocks: None,
            min_key: None,
            max_key: None,
            text: None,
            dim: None,
        }
    }

    /// The blob's smallest and largest key, decoded: `Ok(None)` for an empty blob, `Err`
    /// when the bounds are not hex or only one is present.
    pub fn key_bounds(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>, BlobError> {
        let unhex = |h: &Option<String>| h.as_deref().map(hex::decode).transpose();
        match (unhex(&self.min_key), unhex(&self.max_key)) {
            (Ok(Some(a)), Ok(Some(m))) => Ok(Some((a, m))),
            (Ok(None), Ok(None)) => Ok(None),
            _ => Err(BlobError::Corrupt("key bounds are not hex")),
        }
    }

    /// Whether the blob's key bounds let any of `ranges` in (an empty blob holds nothing;
    /// bounds that do not decode are not trusted to exclude anything).
    pub fn reaches(&self, ranges: &[ByteRange]) -> bool {
        match self.key_bounds() {
            Ok(Some((min, max))) => ranges.iter().any(|r| r.meets(&min, &max)),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// With the smallest and largest key (or term) the blob holds, hex-encoded.
    pub fn with_keys(mut self, min: &Option<Vec<u8>>, max: &Option<Vec<u8>>) -> BlobMeta {
        self.min_key = min.as_ref().map(hex::encode);
        self.max_key = max.as_ref().map(hex::encode);
        self
    }
}
