//! Which delete files apply to which data files (spec: "Scan Planning", "Delete Formats"), and
//! the deletion vector blob (`deletion-vector-v1`, Puffin spec). Skerry resolves deletes once,
//! at mount and sync, into each data file's delete mask, so readers (wasm too) never parse a
//! delete file.

use roaring::RoaringTreemap;

use super::manifests::{FileContent, LiveFile};
use super::metadata::TableMetadata;
use crate::error::{Error, Result};

/// Field id of `file_path` in position delete files (spec: "Position Delete Files").
pub const FILE_PATH_FIELD_ID: i32 = 2147483546;
/// Field id of `pos` in position delete files.
pub const POS_FIELD_ID: i32 = 2147483545;
/// Largest deletion vector blob read.
pub const MAX_DV_BYTES: u64 = 256 << 20;
/// Magic of a `deletion-vector-v1` blob.
pub const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

fn bad(what: impl Into<String>) -> Error {
    Error::Iceberg(what.into())
}

/// Whether the delete file `delete` applies to the data file `data` of the same snapshot:
///
/// - position deletes and deletion vectors: `data`'s data sequence number is at most the
///   delete file's, and `data` is in the delete file's partition (or the delete file's spec is
///   unpartitioned); deletion vectors and files naming a `referenced_data_file` apply to that
///   file only. (Whether a row of `data` is named is up to the file's rows.)
/// - equality deletes: `data`'s data sequence number is strictly smaller, and `data` is in the
///   delete file's partition or the delete file's spec is unpartitioned (a global delete).
pub fn applies(meta: &TableMetadata, delete: &LiveFile, data: &LiveFile) -> bool {
    let global = meta
        .partition_specs
        .iter()
        .find(|s| s.spec_id == delete.partition_spec_id)
        .is_some_and(|s| s.fields.is_empty());
    let same_partition = global
        || (delete.partition_spec_id == data.partition_spec_id
            && delete.partition == data.partition);
    if let Some(r) = &delete.referenced_data_file {
        if *r != data.path {
            return false;
        }
    }
    match delete.content {
        FileContent::Data => false,
        FileContent::PositionDeletes => {
            data.sequence_number <= delete.sequence_number && same_partition
        }
        FileContent::EqualityDeletes => {
            data.sequence_number < delete.sequence_number && same_partition
        }
    }
}

/// Decodes a `deletion-vector-v1` blob: a 4-byte big-endian length of magic + vector, the
/// magic `D1 D3 39 64`, the positions as a 64-bit Roaring bitmap in the portable format, and a
/// 4-byte big-endian CRC-32 of magic + vector. Errors: `E_ICEBERG` for a wrong length, magic
/// or checksum, a malformed bitmap, or a position at or past `record_count`.
pub fn decode_deletion_vector(blob: &[u8], record_count: u64) -> Result<RoaringTreemap> {
    if blob.len() < 12 {
        return Err(bad(format!(
            "deletion vector of {} bytes is truncated",
            blob.len()
        )));
    }
    let n = u32::from_be_bytes(blob[0..4].try_into().expect("4 bytes")) as usize;
    if n + 8 != blob.len() || n < 4 {
        return Err(bad(format!(
            "deletion vector: length field says {n} bytes, the blob holds {}",
            blob.len().saturating_sub(8)
        )));
    }
    let body = &blob[4..4 + n];
    if body[0..4] != DV_MAGIC {
        return Err(bad("deletion vector: wrong magic"));
    }
    let crc = u32::from_be_bytes(blob[4 + n..].try_into().expect("4 bytes"));
    if crc32fast::hash(body) != crc {
        return Err(bad("deletion vector: checksum mismatch"));
    }
    let mut bitmap = &body[4..];
    // The portable format's bitmap count cannot exceed what the bytes can hold (each bitmap
    // takes at least its 4-byte key and an 8-byte header): checked before decoding.
    if bitmap.len() < 8 {
        return Err(bad("deletion vector: truncated bitmap"));
    }
    let count = u64::from_le_bytes(bitmap[0..8].try_into().expect("8 bytes"));
    if count > (bitmap.len() as u64 - 8) / 12 {
        return Err(bad(format!(
            "deletion vector: {count} bitmaps cannot fit in {} bytes",
            bitmap.len()
        )));
    }
    let mask = RoaringTreemap::deserialize_from(&mut bitmap)
        .map_err(|e| bad(format!("deletion vector: {e}")))?;
    if !bitmap.is_empty() {
        return Err(bad(format!(
            "deletion vector: {} bytes after the bitmap",
            bitmap.len()
        )));
    }
    if let Some(max) = mask.max() {
        if max >= record_count {
            return Err(bad(format!(
                "deletion vector deletes position {max} of a file of {record_count} rows"
            )));
        }
    }
    Ok(mask)
}

/// Encodes `mask` as a `deletion-vector-v1` blob (the inverse of [`decode_deletion_vector`]).
pub fn encode_deletion_vector(mask: &RoaringTreemap) -> Vec<u8> {
    let mut body = DV_MAGIC.to_vec();
    mask.serialize_into(&mut body).expect("writes to a Vec");
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_vector_round_trips_and_every_damage_is_a_typed_error() {
        let mask: RoaringTreemap = [0u64, 7, 99, (1 << 32) + 5].into_iter().collect();
        let blob = encode_deletion_vector(&mask);
        assert_eq!(decode_deletion_vector(&blob, (1 << 32) + 6).unwrap(), mask);
        // Past the end of the data file.
        assert!(decode_deletion_vector(&blob, 99).is_err());
        // Every truncation and every flipped byte fails cleanly (no panic).
        for cut in 0..blob.len() {
            assert!(
                decode_deletion_vector(&blob[..cut], u64::MAX).is_err(),
                "{cut}"
            );
        }
        for i in 0..blob.len() {
            let mut b = blob.clone();
            b[i] ^= 0x5a;
            assert!(decode_deletion_vector(&b, u64::MAX).is_err(), "{i}");
        }
        // A checksummed blob claiming a huge bitmap count is refused before decoding.
        let mut body = DV_MAGIC.to_vec();
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut forged = (body.len() as u32).to_be_bytes().to_vec();
        forged.extend_from_slice(&body);
        forged.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        let e = decode_deletion_vector(&forged, u64::MAX).unwrap_err();
        assert!(e.to_string().contains("cannot fit"), "{e}");
    }

    #[test]
    fn the_portable_layout_is_the_one_the_spec_gives() {
        // One bitmap (key 0) holding {1, 2}: count 1 (u64 LE), key 0 (u32 LE), then a
        // 32-bit portable Roaring bitmap (cookie 12346, one array container).
        let mask: RoaringTreemap = [1u64, 2].into_iter().collect();
        let blob = encode_deletion_vector(&mask);
        let body = &blob[8..blob.len() - 4];
        assert_eq!(&body[0..8], &1u64.to_le_bytes());
        assert_eq!(&body[8..12], &0u32.to_le_bytes());
        assert_eq!(&body[12..16], &12346u32.to_le_bytes());
    }
}
