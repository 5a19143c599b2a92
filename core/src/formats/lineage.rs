//! The lineage contract ([`IndexFile`]) and the read gate that enforces it.
//!
//! Every index blob Skerry writes is bound to the exact data file it was built from: its
//! SHA-256, record count and source snapshot, plus the SHA-256 of the blob itself. Before an
//! index answers for a file, [`ReadGate::check`] compares that binding with the table's
//! current facts about the file; any mismatch rejects the index (the caller scans the file
//! instead, so the answer stays right) with a [`Rejection`] that carries what the warning
//! event and metric need. `docs/lineage.md` documents the record.

use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::formats::codec::Codec;
use crate::io::{IoError, Location, RangeReader};

/// The `IndexFile` format version this build writes.
pub const INDEX_FILE_FORMAT_VERSION: u32 = 1;
/// The newest `IndexFile` format version this build can gate (newer ones are rejected, never
/// misread).
pub const MAX_READABLE_FORMAT_VERSION: u32 = 1;

fn default_format_version() -> u32 {
    1
}

/// Index families (the ADR's "category"): the kind of the definition that wrote the blob
/// (a kind written by a newer version reads as `Unknown` and is gated like any other).
pub use crate::index::IndexKind as IndexCategory;

/// Lineage record of one index blob: which data file (by content) it indexes and where its
/// bytes are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexFile {
    /// Format version of this record and of the blob layout it points to.
    #[serde(default = "default_format_version")]
    pub format_version: u32,
    /// Catalog id of the index definition.
    pub index_id: u64,
    pub category: IndexCategory,
    /// Concrete algorithm and its version, e.g. `"ordered-v1"`.
    pub algorithm: String,
    /// Indexed columns by Iceberg field id, in key order.
    pub fields: Vec<i32>,
    /// Path of the data file (relative to the table's root) the blob indexes.
    pub source_path: String,
    /// Snapshot id of the table when the blob was built.
    pub source_snapshot_id: i64,
    /// Sequence number of that snapshot: snapshot ids are not ordered (Iceberg's are random),
    /// sequence numbers are, so the future-snapshot check compares these.
    #[serde(default)]
    pub source_sequence_number: i64,
    /// Lowercase hex SHA-256 of the whole data file.
    pub source_sha256: String,
    /// Records in the data file.
    pub source_record_count: u64,
    /// Lowercase hex SHA-256 of the blob's stored (possibly compressed) bytes.
    pub blob_sha256: String,
    /// Path of the Puffin bundle holding the blob (relative to the overlay root).
    pub bundle_path: String,
    /// Puffin blob type.
    pub blob_type: String,
    pub blob_offset: u64,
    pub blob_length: u64,
    #[serde(default)]
    pub compression: Codec,
}

impl IndexFile {
    /// The blob's byte range in its bundle.
    pub fn blob_range(&self) -> Range<u64> {
        self.blob_offset..self.blob_offset.saturating_add(self.blob_length)
    }
}

/// What the table currently knows about a data file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFileFacts {
    pub path: String,
    pub sha256: String,
    pub record_count: u64,
}

/// The snapshot a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveSnapshot {
    pub snapshot_id: i64,
    pub sequence_number: i64,
}

/// Why an index was not used for a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RejectReason {
    /// No index record, or no current facts for the file.
    Missing,
    /// The data file's content differs from what the index was built from.
    Checksum { expected: String, found: String },
    /// The data file's record count differs from the index's.
    RecordCount { expected: u64, found: u64 },
    /// The index was built at a snapshot newer than the one being read.
    FutureSnapshot {
        index_sequence: i64,
        active_sequence: i64,
        index_snapshot: i64,
        active_snapshot: i64,
    },
    /// The blob bytes do not hash to the recorded SHA-256 (storage corruption).
    BlobChecksum { expected: String, found: String },
    /// The record names a different data file than the one being read.
    WrongFile { expected: String, found: String },
    /// The record's format version is newer than this reader understands.
    UnsupportedFormat { version: u32, max: u32 },
    /// The blob's bytes are structurally invalid (a truncated or damaged index).
    Corrupt { message: String },
    /// The data file in the store is not the one the catalog recorded (rewritten in place
    /// since registration: size, version or record count differ), seen while reading it.
    Drifted { detail: String },
}

impl RejectReason {
    /// Stable short code for metrics and events.
    pub fn code(&self) -> &'static str {
        match self {
            RejectReason::Missing => "missing",
            RejectReason::Checksum { .. } => "checksum",
            RejectReason::RecordCount { .. } => "record_count",
            RejectReason::FutureSnapshot { .. } => "future_snapshot",
            RejectReason::BlobChecksum { .. } => "blob_checksum",
            RejectReason::WrongFile { .. } => "wrong_file",
            RejectReason::UnsupportedFormat { .. } => "unsupported_format",
            RejectReason::Corrupt { .. } => "corrupt",
            RejectReason::Drifted { .. } => "drifted",
        }
    }
}

/// A rejected index, with what a warning event needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub data_file: String,
    pub index_id: Option<u64>,
    pub bundle_path: Option<String>,
    #[serde(flatten)]
    pub reason: RejectReason,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = self.bundle_path.as_deref().unwrap_or(&self.data_file);
        write!(f, "Index {what} rejected for {}: ", self.data_file)?;
        match &self.reason {
            RejectReason::Missing => write!(f, "missing"),
            RejectReason::Checksum { expected, found } => {
                write!(f, "checksum mismatch (expected {expected}, got {found})")
            }
            RejectReason::RecordCount { expected, found } => {
                write!(
                    f,
                    "record count mismatch (expected {expected}, got {found})"
                )
            }
            RejectReason::FutureSnapshot {
                index_snapshot,
                active_snapshot,
                ..
            } => {
                write!(
                    f,
                    "from future snapshot {index_snapshot} (active {active_snapshot})"
                )
            }
            RejectReason::BlobChecksum { expected, found } => {
                write!(
                    f,
                    "blob checksum mismatch (expected {expected}, got {found})"
                )
            }
            RejectReason::WrongFile { expected, found } => {
                write!(f, "built for {found}, not {expected}")
            }
            RejectReason::UnsupportedFormat { version, max } => {
                write!(f, "format version {version} is newer than supported {max}")
            }
            RejectReason::Corrupt { message } => write!(f, "corrupt index ({message})"),
            RejectReason::Drifted { detail } => {
                write!(f, "data file changed since it was recorded ({detail})")
            }
        }
    }
}

/// The gate's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateDecision {
    Accept,
    Reject(Rejection),
}

impl GateDecision {
    pub fn is_accept(&self) -> bool {
        matches!(self, GateDecision::Accept)
    }
}

/// Decides whether an index may answer for a data file.
pub struct ReadGate;

impl ReadGate {
    /// Compares an index's lineage with the file's current facts and the active snapshot.
    /// Checks, in order: presence, format version, file identity, content checksum, record
    /// count, snapshot. The first failing check is the reason.
    pub fn check(
        data_file: &str,
        index: Option<&IndexFile>,
        facts: Option<&DataFileFacts>,
        active: ActiveSnapshot,
    ) -> GateDecision {
        let reject = |index: Option<&IndexFile>, reason| {
            GateDecision::Reject(Rejection {
                data_file: data_file.to_string(),
                index_id: index.map(|i| i.index_id),
                bundle_path: index.map(|i| i.bundle_path.clone()),
                reason,
            })
        };
        let (Some(ix), Some(facts)) = (index, facts) else {
            return reject(index, RejectReason::Missing);
        };
        if ix.format_version > MAX_READABLE_FORMAT_VERSION {
            return reject(
                index,
                RejectReason::UnsupportedFormat {
                    version: ix.format_version,
                    max: MAX_READABLE_FORMAT_VERSION,
                },
            );
        }
        if ix.source_path != facts.path || facts.path != data_file {
            return reject(
                index,
                RejectReason::WrongFile {
                    expected: data_file.to_string(),
                    found: ix.source_path.clone(),
                },
            );
        }
        if !ix.source_sha256.eq_ignore_ascii_case(&facts.sha256) {
            return reject(
                index,
                RejectReason::Checksum {
                    expected: facts.sha256.clone(),
                    found: ix.source_sha256.clone(),
                },
            );
        }
        if ix.source_record_count != facts.record_count {
            return reject(
                index,
                RejectReason::RecordCount {
                    expected: facts.record_count,
                    found: ix.source_record_count,
                },
            );
        }
        if ix.source_sequence_number > active.sequence_number {
            return reject(
                index,
                RejectReason::FutureSnapshot {
                    index_sequence: ix.source_sequence_number,
                    active_sequence: active.sequence_number,
                    index_snapshot: ix.source_snapshot_id,
                    active_snapshot: active.snapshot_id,
                },
            );
        }
        GateDecision::Accept
    }

    /// Checks fetched blob bytes (as stored, before decompression) against the record.
    pub fn check_blob(index: &IndexFile, stored: &[u8]) -> GateDecision {
        let found = sha256_hex(stored);
        if stored.len() as u64 != index.blob_length
            || !found.eq_ignore_ascii_case(&index.blob_sha256)
        {
            return GateDecision::Reject(Rejection {
                data_file: index.source_path.clone(),
                index_id: Some(index.index_id),
                bundle_path: Some(index.bundle_path.clone()),
                reason: RejectReason::BlobChecksum {
                    expected: index.blob_sha256.clone(),
                    found,
                },
            });
        }
        GateDecision::Accept
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What a data file's `sha256` fact is a digest of (decision 77, `docs/lineage.md`, "Binding a
/// data file"). The gate compares the digest the table recorded with the one an index was
/// built against, so both sides always use the file's own binding; which one a file has is
/// fixed when it is registered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// SHA-256 of the whole file, streamed through bounded reads: plain Parquet tables, whose
    /// files may be rewritten in place (`refresh` tells a touched file from a changed one by it).
    #[default]
    Whole,
    /// [`footer_digest`]: SHA-256 of the file's size and its Parquet footer. Iceberg data
    /// files, which the table format never rewrites in place (a path names one immutable
    /// object), so registering one reads its footer only, not its bytes; reads stay pinned to
    /// the version registered, and `verify` compares index entries with the file's values.
    Footer,
}

impl Binding {
    /// Whether this is the default (serialized as absent).
    pub fn is_whole(&self) -> bool {
        *self == Binding::Whole
    }
}

/// Domain of [`footer_digest`]: no footer digest equals a whole-file SHA-256 of the same
/// bytes.
pub const FOOTER_DIGEST_DOMAIN: &[u8] = b"skerry-footer-v1\0";

/// Lowercase hex SHA-256 of `FOOTER_DIGEST_DOMAIN ‖ size (u64 little-endian) ‖ footer`, where
/// `footer` is the file's last `8 + footer length` bytes (the Thrift `FileMetaData`, its
/// 4-byte length and `PAR1`): every row group's and column chunk's offsets, sizes, encodings,
/// statistics and the writer's key-value metadata.
pub fn footer_digest(size: u64, footer: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(FOOTER_DIGEST_DOMAIN);
    h.update(size.to_le_bytes());
    h.update(footer);
    hex::encode(h.finalize())
}

/// Default chunk of [`sha256_object`]: memory used is one chunk.
pub const DEFAULT_HASH_CHUNK: u64 = 4 << 20;

/// Streams an object through SHA-256 in sequential range reads of at most `chunk` bytes,
/// so memory stays bounded by one chunk whatever the object's size. Returns the lowercase hex
/// digest and the object's size. With `size` unknown, one `head` finds it.
pub async fn sha256_object<R: RangeReader + ?Sized>(
    reader: &R,
    loc: &Location,
    size: Option<u64>,
    chunk: u64,
) -> Result<(String, u64), IoError> {
    let size = match size {
        Some(s) => s,
        None => reader.head(loc).await?.size,
    };
    let chunk = chunk.max(1);
    let mut h = Sha256::new();
    let mut pos = 0u64;
    while pos < size {
        let end = (pos + chunk).min(size);
        let b = reader.read_range(loc, pos..end).await?;
        h.update(&b);
        pos = end;
    }
    Ok((hex::encode(h.finalize()), size))
}
