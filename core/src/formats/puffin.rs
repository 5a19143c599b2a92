//! Spec-exact Apache Iceberg Puffin container: writer and reader side by side.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! Magic Blob₁ Blob₂ … Blobₙ Footer
//! Footer = Magic FooterPayload FooterPayloadSize(u32) Flags(4 bytes) Magic
//! Magic  = "PFA1" (50 46 41 31)
//! ```
//!
//! `FooterPayload` is the JSON `FileMetadata` (optionally LZ4-frame compressed, flag bit 0 of
//! byte 0). Skerry writes footers uncompressed and blobs uncompressed or zstd, so the Java
//! and iceberg-rust readers read its files; it reads footers and blobs in every spec codec.
//!
//! The reader never trusts the file: every offset and length is checked against the file
//! size, footer and blob sizes are capped ([`Limits`]), decompression is bounded, and every
//! failure is a typed [`PuffinError`]. Opening costs one range read with a known footer
//! location, or one suffix read (a second only when the footer is larger than the suffix).
//! `docs/puffin.md` documents how Skerry uses the container.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::formats::codec::{self, Codec, CodecError};
use crate::io::{IoError, Location, RangeReader};

/// `"PFA1"`.
pub const MAGIC: [u8; 4] = *b"PFA1";
/// Payload size (4) + flags (4) + magic (4).
pub const FOOTER_TRAILER_LEN: u64 = 12;
/// Bytes a footer takes beyond its payload: leading magic + trailer.
pub const FOOTER_OVERHEAD: u64 = 4 + FOOTER_TRAILER_LEN;
/// Default size of the suffix read that opens a bundle of unknown layout.
pub const DEFAULT_SUFFIX_LEN: u64 = 64 * 1024;
/// Flag bit (byte 0, bit 0): the footer payload is LZ4-compressed.
pub const FLAG_FOOTER_COMPRESSED: u8 = 0x01;
/// The `created-by` file property.
pub const CREATED_BY: &str = "created-by";

/// Metadata of one blob, exactly the spec's JSON `BlobMetadata`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobMetadata {
    #[serde(rename = "type")]
    pub blob_type: String,
    /// Iceberg field ids the blob was computed from.
    pub fields: Vec<i32>,
    #[serde(rename = "snapshot-id")]
    pub snapshot_id: i64,
    #[serde(rename = "sequence-number")]
    pub sequence_number: i64,
    pub offset: u64,
    pub length: u64,
    #[serde(
        rename = "compression-codec",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub compression_codec: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

impl BlobMetadata {
    /// The blob's byte range in the file.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset.saturating_add(self.length)
    }
    pub fn codec(&self) -> Result<Codec, PuffinError> {
        Ok(Codec::from_spec_name(self.compression_codec.as_deref())?)
    }
}

/// The footer's JSON `FileMetadata`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMetadata {
    pub blobs: Vec<BlobMetadata>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

/// Caps the reader applies to untrusted files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest footer (payload + 16 bytes) accepted.
    pub max_footer_bytes: u64,
    /// Largest decompressed footer payload accepted.
    pub max_footer_payload: u64,
    /// Largest number of blobs in one footer.
    pub max_blobs: usize,
    /// Largest stored (possibly compressed) blob read.
    pub max_blob_bytes: u64,
    /// Largest decompressed blob.
    pub max_blob_decompressed: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_footer_bytes: 16 << 20,
            max_footer_payload: 64 << 20,
            max_blobs: 100_000,
            max_blob_bytes: 1 << 30,
            max_blob_decompressed: 1 << 30,
        }
    }
}

/// Typed Puffin failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PuffinError {
    #[error("not a Puffin file: bad magic at {at}")]
    BadMagic { at: &'static str },
    #[error("truncated Puffin file: {0}")]
    Truncated(String),
    #[error("Puffin footer of {size} bytes exceeds the {max}-byte limit")]
    FooterTooLarge { size: u64, max: u64 },
    #[error("Puffin footer uses unsupported flags {flags:02x?}")]
    UnsupportedFlags { flags: [u8; 4] },
    #[error("malformed Puffin footer JSON: {0}")]
    MalformedFooter(String),
    #[error("Puffin blob {index} ({blob_type}) has an invalid range {offset}+{length} (blobs must lie in 4..{limit})")]
    BlobOutOfBounds {
        index: usize,
        blob_type: String,
        offset: u64,
        length: u64,
        limit: u64,
    },
    #[error("Puffin footer lists {count} blobs, more than the {max} allowed")]
    TooManyBlobs { count: usize, max: usize },
    #[error("Puffin blob of {size} bytes exceeds the {max}-byte limit")]
    BlobTooLarge { size: u64, max: u64 },
    #[error("blob is not part of this Puffin file")]
    UnknownBlob,
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Where a footer lies in its file (what a manifest records to skip footer discovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FooterLocation {
    pub offset: u64,
    pub length: u64,
}

impl FooterLocation {
    /// Size of the file whose footer this is (the footer ends the file).
    pub fn file_size(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }
}

/// A blob to add: what goes into its `BlobMetadata` besides offset, length and codec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobSpec {
    pub blob_type: String,
    pub fields: Vec<i32>,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub properties: BTreeMap<String, String>,
}

/// Writes a Puffin file into memory. Bundles are per data file and small enough to build in
/// memory; the result is written to the object store with one put.
#[derive(Debug)]
pub struct PuffinWriter {
    /// Bytes already handed out by [`PuffinWriter::take`]; `buf` holds the rest.
    taken: u64,
    buf: Vec<u8>,
    blobs: Vec<BlobMetadata>,
    properties: BTreeMap<String, String>,
}

/// A finished Puffin file.
#[derive(Clone, Debug)]
pub struct PuffinFile {
    /// The file's bytes not taken by [`PuffinWriter::take`] (all of them when it was never
    /// called).
    pub bytes: Bytes,
    pub metadata: FileMetadata,
    pub footer: FooterLocation,
}

impl Default for PuffinWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PuffinWriter {
    pub fn new() -> Self {
        let mut properties = BTreeMap::new();
        properties.insert(
            CREATED_BY.to_string(),
            format!("skerry {}", env!("CARGO_PKG_VERSION")),
        );
        PuffinWriter {
            taken: 0,
            buf: MAGIC.to_vec(),
            blobs: Vec::new(),
            properties,
        }
    }

    /// Sets a file-level property (`created-by` is set by default).
    pub fn set_property(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.properties.insert(key.into(), value.into());
    }

    /// Compresses `data` with `codec` and appends it as a blob.
    pub fn add_blob(
        &mut self,
        spec: BlobSpec,
        data: &[u8],
        codec: Codec,
    ) -> Result<&BlobMetadata, PuffinError> {
        let stored = codec::compress(codec, data)?;
        Ok(self.add_stored_blob(spec, &stored, codec))
    }

    /// Appends an already-encoded blob verbatim (e.g. copied by range from an older bundle).
    pub fn add_stored_blob(
        &mut self,
        spec: BlobSpec,
        stored: &[u8],
        codec: Codec,
    ) -> &BlobMetadata {
        let offset = self.position();
        self.buf.extend_from_slice(stored);
        self.record_blob(spec, offset, stored.len() as u64, codec)
    }

    /// Bytes written so far (taken or not): the offset the next blob starts at.
    pub fn position(&self) -> u64 {
        self.taken + self.buf.len() as u64
    }

    /// Appends raw bytes of a blob being streamed in pieces; [`PuffinWriter::record_blob`]
    /// then describes it.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Takes the bytes written so far (the file's next bytes, in order), so a large file
    /// streams out in pieces; [`PuffinWriter::finish`] then returns only the rest.
    pub fn take(&mut self) -> Vec<u8> {
        self.taken += self.buf.len() as u64;
        std::mem::take(&mut self.buf)
    }

    /// Takes the bytes written so far, like [`PuffinWriter::take`], and counts `n` bytes the
    /// caller writes to the file itself right after them (a streamed blob's owned buffers,
    /// uploaded without a copy).
    pub fn take_and_skip(&mut self, n: u64) -> Vec<u8> {
        let head = self.take();
        self.taken += n;
        head
    }

    /// Describes a blob of `length` stored bytes written at `offset` by
    /// [`PuffinWriter::write_raw`].
    pub fn record_blob(
        &mut self,
        spec: BlobSpec,
        offset: u64,
        length: u64,
        codec: Codec,
    ) -> &BlobMetadata {
        self.blobs.push(BlobMetadata {
            blob_type: spec.blob_type,
            fields: spec.fields,
            snapshot_id: spec.snapshot_id,
            sequence_number: spec.sequence_number,
            offset,
            length,
            compression_codec: codec.spec_name().map(str::to_string),
            properties: spec.properties,
        });
        self.blobs.last().expect("just pushed")
    }

    /// Writes the (uncompressed) footer and returns the file.
    pub fn finish(mut self) -> PuffinFile {
        let offset = self.position();
        let metadata = FileMetadata {
            blobs: self.blobs,
            properties: self.properties,
        };
        let payload = serde_json::to_vec(&metadata).expect("footer metadata serializes");
        self.buf.extend_from_slice(&MAGIC);
        self.buf.extend_from_slice(&payload);
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&[0, 0, 0, 0]);
        self.buf.extend_from_slice(&MAGIC);
        let length = self.taken + self.buf.len() as u64 - offset;
        PuffinFile {
            bytes: Bytes::from(self.buf),
            metadata,
            footer: FooterLocation { offset, length },
        }
    }
}

/// An opened Puffin file: its footer, validated against the file size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PuffinFooter {
    pub metadata: FileMetadata,
    pub location: FooterLocation,
}

impl PuffinFooter {
    /// Parses the trailing bytes of a file. `tail` must end at the end of the file, which is
    /// `file_size` bytes long. Returns `Ok(None)` when `tail` is too short to hold the whole
    /// footer (the caller reads more), with the footer length needed.
    pub fn parse_tail(
        tail: &[u8],
        file_size: u64,
        limits: &Limits,
    ) -> Result<Result<Self, u64>, PuffinError> {
        if (tail.len() as u64) < FOOTER_TRAILER_LEN || file_size < FOOTER_OVERHEAD + 4 {
            return Err(PuffinError::Truncated(format!(
                "{file_size}-byte file cannot hold a footer"
            )));
        }
        let t = &tail[tail.len() - FOOTER_TRAILER_LEN as usize..];
        if t[8..12] != MAGIC {
            return Err(PuffinError::BadMagic { at: "end of file" });
        }
        let payload = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
        let footer_len = payload + FOOTER_OVERHEAD;
        if footer_len > limits.max_footer_bytes {
            return Err(PuffinError::FooterTooLarge {
                size: footer_len,
                max: limits.max_footer_bytes,
            });
        }
        if footer_len + 4 > file_size {
            return Err(PuffinError::Truncated(format!(
                "footer of {footer_len} bytes in a {file_size}-byte file"
            )));
        }
        if footer_len > tail.len() as u64 {
            return Ok(Err(footer_len));
        }
        let footer = &tail[tail.len() - footer_len as usize..];
        let location = FooterLocation {
            offset: file_size - footer_len,
            length: footer_len,
        };
        Ok(Ok(Self::parse_footer(footer, location, limits)?))
    }

    /// Parses exactly the footer bytes (`Magic … Magic`) found at `location`.
    pub fn parse_footer(
        footer: &[u8],
        location: FooterLocation,
        limits: &Limits,
    ) -> Result<Self, PuffinError> {
        let len = footer.len() as u64;
        if len != location.length {
            return Err(PuffinError::Truncated(format!(
                "read {len} footer bytes, expected {}",
                location.length
            )));
        }
        if len > limits.max_footer_bytes {
            return Err(PuffinError::FooterTooLarge {
                size: len,
                max: limits.max_footer_bytes,
            });
        }
        if len < FOOTER_OVERHEAD {
            return Err(PuffinError::Truncated(format!("{len}-byte footer")));
        }
        if footer[..4] != MAGIC {
            return Err(PuffinError::BadMagic {
                at: "start of footer",
            });
        }
        let t = &footer[footer.len() - FOOTER_TRAILER_LEN as usize..];
        if t[8..12] != MAGIC {
            return Err(PuffinError::BadMagic { at: "end of file" });
        }
        let payload_len = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
        if payload_len + FOOTER_OVERHEAD != len {
            return Err(PuffinError::Truncated(format!(
                "footer payload size {payload_len} does not fit a {len}-byte footer"
            )));
        }
        let flags = [t[4], t[5], t[6], t[7]];
        if flags[0] & !FLAG_FOOTER_COMPRESSED != 0 || flags[1..] != [0, 0, 0] {
            return Err(PuffinError::UnsupportedFlags { flags });
        }
        let raw = &footer[4..4 + payload_len as usize];
        let json = if flags[0] & FLAG_FOOTER_COMPRESSED != 0 {
            std::borrow::Cow::Owned(codec::decompress(
                Codec::Lz4,
                raw,
                limits.max_footer_payload,
            )?)
        } else {
            std::borrow::Cow::Borrowed(raw)
        };
        let metadata: FileMetadata = serde_json::from_slice(&json)
            .map_err(|e| PuffinError::MalformedFooter(e.to_string()))?;
        if metadata.blobs.len() > limits.max_blobs {
            return Err(PuffinError::TooManyBlobs {
                count: metadata.blobs.len(),
                max: limits.max_blobs,
            });
        }
        for (index, b) in metadata.blobs.iter().enumerate() {
            let end = b.offset.checked_add(b.length);
            if b.offset < 4 || end.is_none_or(|e| e > location.offset) {
                return Err(PuffinError::BlobOutOfBounds {
                    index,
                    blob_type: b.blob_type.chars().take(128).collect(),
                    offset: b.offset,
                    length: b.length,
                    limit: location.offset,
                });
            }
        }
        Ok(PuffinFooter { metadata, location })
    }

    /// Opens a file whose footer location is known: ONE range read.
    pub async fn read_at<R: RangeReader + ?Sized>(
        reader: &R,
        loc: &Location,
        location: FooterLocation,
        limits: &Limits,
    ) -> Result<Self, PuffinError> {
        if location.length > limits.max_footer_bytes {
            return Err(PuffinError::FooterTooLarge {
                size: location.length,
                max: limits.max_footer_bytes,
            });
        }
        let end = location
            .offset
            .checked_add(location.length)
            .ok_or(PuffinError::Truncated("footer range overflows".into()))?;
        let bytes = reader.read_range(loc, location.offset..end).await?;
        Self::parse_footer(&bytes, location, limits)
    }

    /// Opens a file of unknown layout: ONE suffix read of `suffix_len` bytes, and a second read
    /// only when the footer is larger than that. With `file_size` known, the suffix read is a
    /// plain range read.
    pub async fn open<R: RangeReader + ?Sized>(
        reader: &R,
        loc: &Location,
        suffix_len: u64,
        file_size: Option<u64>,
        limits: &Limits,
    ) -> Result<Self, PuffinError> {
        let suffix_len = suffix_len.max(FOOTER_TRAILER_LEN);
        let (tail, size) = match file_size {
            Some(size) => {
                let start = size.saturating_sub(suffix_len);
                if size == 0 {
                    return Err(PuffinError::Truncated("empty file".into()));
                }
                (reader.read_range(loc, start..size).await?, size)
            }
            None => {
                let (b, meta) = reader.read_suffix(loc, suffix_len).await?;
                (b, meta.size)
            }
        };
        if tail.len() as u64 > size {
            return Err(PuffinError::Truncated("suffix longer than the file".into()));
        }
        if size < FOOTER_OVERHEAD + 4 {
            return Err(PuffinError::Truncated(format!(
                "{size}-byte file cannot hold a footer"
            )));
        }
        if tail.len() as u64 == size && tail[..4] != MAGIC {
            return Err(PuffinError::BadMagic {
                at: "start of file",
            });
        }
        match Self::parse_tail(&tail, size, limits)? {
            Ok(f) => Ok(f),
            Err(footer_len) => {
                let start = size - footer_len;
                let missing_end = size - tail.len() as u64;
                let head = reader.read_range(loc, start..missing_end).await?;
                let mut footer = Vec::with_capacity(footer_len as usize);
                footer.extend_from_slice(&head);
                footer.extend_from_slice(&tail);
                Self::parse_footer(
                    &footer,
                    FooterLocation {
                        offset: start,
                        length: footer_len,
                    },
                    limits,
                )
            }
        }
    }

    /// Reads and decompresses one blob of this file (one range read).
    pub async fn read_blob<R: RangeReader + ?Sized>(
        &self,
        reader: &R,
        loc: &Location,
        blob: &BlobMetadata,
        limits: &Limits,
    ) -> Result<Vec<u8>, PuffinError> {
        if !self.metadata.blobs.contains(blob) {
            return Err(PuffinError::UnknownBlob);
        }
        read_blob(reader, loc, blob, limits).await
    }
}

fn check_blob(blob: &BlobMetadata, limits: &Limits) -> Result<Codec, PuffinError> {
    if blob.length > limits.max_blob_bytes {
        return Err(PuffinError::BlobTooLarge {
            size: blob.length,
            max: limits.max_blob_bytes,
        });
    }
    if blob.offset < 4 || blob.offset.checked_add(blob.length).is_none() || blob.length == 0 {
        return Err(PuffinError::BlobOutOfBounds {
            index: 0,
            blob_type: blob.blob_type.chars().take(128).collect(),
            offset: blob.offset,
            length: blob.length,
            limit: u64::MAX,
        });
    }
    blob.codec()
}

/// Decodes a blob's stored bytes.
pub fn decode_blob(
    blob: &BlobMetadata,
    stored: &[u8],
    limits: &Limits,
) -> Result<Vec<u8>, PuffinError> {
    let codec = check_blob(blob, limits)?;
    if stored.len() as u64 != blob.length {
        return Err(PuffinError::Truncated(format!(
            "blob has {} of {} bytes",
            stored.len(),
            blob.length
        )));
    }
    Ok(codec::decompress(
        codec,
        stored,
        limits.max_blob_decompressed,
    )?)
}

/// Reads one blob by its metadata (e.g. from a manifest, without reading the footer): ONE
/// range read, then bounded decompression.
pub async fn read_blob<R: RangeReader + ?Sized>(
    reader: &R,
    loc: &Location,
    blob: &BlobMetadata,
    limits: &Limits,
) -> Result<Vec<u8>, PuffinError> {
    check_blob(blob, limits)?;
    let stored = reader.read_range(loc, blob.range()).await?;
    decode_blob(blob, &stored, limits)
}

/// Reads several blobs of one file, coalescing adjacent ranges into one request; results in
/// input order.
pub async fn read_blobs<R: RangeReader + ?Sized>(
    reader: &R,
    loc: &Location,
    blobs: &[&BlobMetadata],
    limits: &Limits,
) -> Result<Vec<Vec<u8>>, PuffinError> {
    for b in blobs {
        check_blob(b, limits)?;
    }
    let ranges: Vec<Range<u64>> = blobs.iter().map(|b| b.range()).collect();
    let stored = reader.read_ranges(loc, &ranges).await?;
    blobs
        .iter()
        .zip(stored)
        .map(|(b, s)| decode_blob(b, &s, limits))
        .collect()
}
