//! The bitmap index's table run (`skerry-bitmap-run-v1`): every covered file's bitmaps value by
//! value, so a count of one value reads one range for the whole table — the files holding it
//! with their cardinalities — and the positions of a file (to subtract its deleted rows or
//! intersect another column) one more range each. `docs/bitmap-index.md` ("Table runs")
//! documents the layout; [`RunWriter`] writes it a value at a time (a build streams it), and
//! [`RunDirectory`] / [`parse_files`] read it, verifying every byte they use.
//!
//! Layout (integers little-endian; `varint` = unsigned LEB128):
//!
//! ```text
//! Run       = Value₀ … Valueₙ₋₁ Directory Trailer
//! Value     = Files Bitmaps
//! Files     = FileRef*ᵐ     (the m covered files holding the value, ordinals ascending)
//! FileRef   = varint ordinal_delta  varint length  varint cardinality  hash[16]
//!             (ordinal_delta: the first file's ordinal, then the distance from the previous;
//!              hash = first 16 bytes of SHA-256 of the file's bitmap)
//! Bitmaps   = the m files' RoaringBitmaps (portable serialization), contiguous, in Files order
//! Directory = varint n  Entry*ⁿ
//! Entry     = varint key_len  key  varint offset  varint files_length  varint m
//!             varint length  varint cardinality  hash[16]
//!             (keys strictly ascending; values contiguous from offset 0 in key order;
//!              files_length = bytes of Files, length = bytes of Files + Bitmaps;
//!              cardinality = the files' sum; hash = first 16 bytes of SHA-256 of Files)
//! Trailer   = u64 dir_offset  u64 dir_length  u64 positions  u64 files  u8 version(=1)
//!             u8 flags(=0)  u16 reserved(=0)  "SKBR"
//! ```

use std::ops::{Bound, Range};

use sha2::{Digest, Sha256};

use super::{hash16, MAX_CARDINALITY};
use crate::index::blob::BlobError;
use crate::index::ordered::{get_bytes, get_varint, put_varint, MAX_KEY_BYTES};

/// Puffin blob type of a bitmap index's table run.
pub const BLOB_TYPE: &str = "skerry-bitmap-run-v1";
/// Trailer magic.
pub const MAGIC: [u8; 4] = *b"SKBR";
/// Fixed trailer length.
pub const TRAILER_LEN: u64 = 40;
/// Format version in the trailer.
pub const VERSION: u8 = 1;
/// Distinct values a run holds at most (a directory bound a reader enforces while parsing).
pub const MAX_VALUES: u64 = 1 << 24;

/// One value's directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunValue {
    pub key: Vec<u8>,
    /// Where the value's `Files` start (relative to the blob).
    pub offset: u64,
    pub files_length: u64,
    /// Files holding the value.
    pub files: u64,
    /// Bytes of `Files` and `Bitmaps`.
    pub length: u64,
    pub cardinality: u64,
    /// Of `Files`.
    pub hash: [u8; 16],
}

impl RunValue {
    /// The value's `Files` section.
    pub fn files_range(&self) -> Range<u64> {
        self.offset..self.offset + self.files_length
    }
}

/// One file's bitmap of a value, as its `FileRef` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileBitmap {
    pub ordinal: u64,
    /// The bitmap's range (relative to the blob).
    pub range: Range<u64>,
    pub cardinality: u64,
    pub hash: [u8; 16],
}

/// A parsed run directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunDirectory {
    pub values: Vec<RunValue>,
}

/// The facts a finished run's manifest entry records.
#[derive(Clone, Debug)]
pub struct RunTail {
    /// The directory and trailer (what follows the last value).
    pub bytes: Vec<u8>,
    /// The directory's range (relative to the blob).
    pub directory: Range<u64>,
    pub directory_sha256: String,
    pub positions: u64,
    pub values: u64,
    pub min_key: Option<Vec<u8>>,
    pub max_key: Option<Vec<u8>>,
}

/// Writes a run a value at a time: [`RunWriter::value`] returns the bytes to append,
/// [`RunWriter::finish`] the directory and trailer.
#[derive(Debug)]
pub struct RunWriter {
    files: u64,
    at: u64,
    dir: Vec<RunValue>,
    positions: u64,
}

impl RunWriter {
    /// A run of `files` covered files (ordinals `0..files`).
    pub fn new(files: u64) -> RunWriter {
        RunWriter {
            files,
            at: 0,
            dir: Vec::new(),
            positions: 0,
        }
    }

    /// The bytes of one value: `holders` are `(ordinal, bitmap bytes, cardinality)` in
    /// ascending ordinal order, the bitmaps as the files' blobs hold them (already verified
    /// by the caller). Keys must come in strictly ascending order.
    pub fn value(
        &mut self,
        key: &[u8],
        holders: &[(u64, &[u8], u64)],
    ) -> Result<Vec<u8>, BlobError> {
        if key.len() > MAX_KEY_BYTES {
            return Err(BlobError::KeyTooLarge(key.len()));
        }
        if self.dir.last().is_some_and(|v| v.key.as_slice() >= key) {
            return Err(BlobError::Unsorted(self.positions));
        }
        if holders.is_empty() || self.dir.len() as u64 >= MAX_VALUES {
            return Err(BlobError::Corrupt(
                "a run value without files, or too many values",
            ));
        }
        let mut files = Vec::with_capacity(holders.len() * 24);
        let mut prev: Option<u64> = None;
        let mut cardinality = 0u64;
        for &(ordinal, bytes, card) in holders {
            if ordinal >= self.files || prev.is_some_and(|p| p >= ordinal) || card == 0 {
                return Err(BlobError::Corrupt("run files out of order"));
            }
            put_varint(&mut files, ordinal - prev.map_or(0, |p| p));
            put_varint(&mut files, bytes.len() as u64);
            put_varint(&mut files, card);
            files.extend_from_slice(&hash16(bytes));
            prev = Some(ordinal);
            cardinality += card;
        }
        let files_length = files.len() as u64;
        let hash = hash16(&files);
        for &(_, bytes, _) in holders {
            files.extend_from_slice(bytes);
        }
        self.dir.push(RunValue {
            key: key.to_vec(),
            offset: self.at,
            files_length,
            files: holders.len() as u64,
            length: files.len() as u64,
            cardinality,
            hash,
        });
        self.at += files.len() as u64;
        self.positions += cardinality;
        Ok(files)
    }

    /// The directory and trailer that end the run.
    pub fn finish(self) -> RunTail {
        let mut out = Vec::new();
        put_varint(&mut out, self.dir.len() as u64);
        for v in &self.dir {
            put_varint(&mut out, v.key.len() as u64);
            out.extend_from_slice(&v.key);
            put_varint(&mut out, v.offset);
            put_varint(&mut out, v.files_length);
            put_varint(&mut out, v.files);
            put_varint(&mut out, v.length);
            put_varint(&mut out, v.cardinality);
            out.extend_from_slice(&v.hash);
        }
        let dir_len = out.len() as u64;
        let directory_sha256 = hex::encode(Sha256::digest(&out));
        out.extend_from_slice(&self.at.to_le_bytes());
        out.extend_from_slice(&dir_len.to_le_bytes());
        out.extend_from_slice(&self.positions.to_le_bytes());
        out.extend_from_slice(&self.files.to_le_bytes());
        out.extend_from_slice(&[VERSION, 0, 0, 0]);
        out.extend_from_slice(&MAGIC);
        RunTail {
            bytes: out,
            directory: self.at..self.at + dir_len,
            directory_sha256,
            positions: self.positions,
            values: self.dir.len() as u64,
            min_key: self.dir.first().map(|v| v.key.clone()),
            max_key: self.dir.last().map(|v| v.key.clone()),
        }
    }
}

/// The trailer's facts: the directory's range, the positions and the files of the run.
pub fn parse_trailer(t: &[u8], blob_len: u64) -> Result<(Range<u64>, u64, u64), BlobError> {
    if t.len() as u64 != TRAILER_LEN {
        return Err(BlobError::Corrupt("trailer length"));
    }
    if t[36..40] != MAGIC {
        return Err(BlobError::Corrupt("bad trailer magic"));
    }
    if t[32] != VERSION {
        return Err(BlobError::Corrupt("unsupported bitmap run version"));
    }
    let word = |i: usize| u64::from_le_bytes(t[i..i + 8].try_into().expect("8 bytes"));
    let (off, len) = (word(0), word(8));
    if off
        .checked_add(len)
        .and_then(|e| e.checked_add(TRAILER_LEN))
        .is_none_or(|e| e != blob_len)
    {
        return Err(BlobError::Corrupt("directory range"));
    }
    Ok((off..off + len, word(16), word(24)))
}

impl RunDirectory {
    /// Verifies `bytes` against `sha256_hex` (when given) and parses them; `dir_offset`
    /// (where the directory starts) bounds every value's range and `files` (the run's covered
    /// files) every value's file count.
    pub fn parse(
        bytes: &[u8],
        sha256_hex: Option<&str>,
        dir_offset: u64,
        files: u64,
    ) -> Result<Self, BlobError> {
        crate::index::blob::check_sha256(bytes, sha256_hex, "directory")?;
        let mut pos = 0usize;
        let n = get_varint(bytes, &mut pos)?;
        // Each value takes at least 22 bytes: bound the allocation by the input.
        if n > bytes.len() as u64 / 22 + 1 || n > MAX_VALUES {
            return Err(BlobError::Corrupt("value count"));
        }
        let mut values: Vec<RunValue> = Vec::with_capacity(n as usize);
        let mut next_offset = 0u64;
        for _ in 0..n {
            let klen = get_varint(bytes, &mut pos)?;
            if klen > MAX_KEY_BYTES as u64 {
                return Err(BlobError::Corrupt("key too long"));
            }
            let key = get_bytes(bytes, &mut pos, klen)?.to_vec();
            let offset = get_varint(bytes, &mut pos)?;
            let files_length = get_varint(bytes, &mut pos)?;
            let m = get_varint(bytes, &mut pos)?;
            let length = get_varint(bytes, &mut pos)?;
            let cardinality = get_varint(bytes, &mut pos)?;
            let hash: [u8; 16] = get_bytes(bytes, &mut pos, 16)?
                .try_into()
                .expect("16 bytes");
            // Each FileRef takes at least 19 bytes and each file at most 2³² positions.
            if offset != next_offset
                || m == 0
                || m > files
                || files_length < m.saturating_mul(19)
                || files_length >= length
                || cardinality < m
                || cardinality > m.saturating_mul(1 << 32)
                || offset.checked_add(length).is_none_or(|e| e > dir_offset)
            {
                return Err(BlobError::Corrupt("run value range"));
            }
            if values.last().is_some_and(|p| p.key >= key) {
                return Err(BlobError::Corrupt("keys out of order"));
            }
            next_offset = offset + length;
            values.push(RunValue {
                key,
                offset,
                files_length,
                files: m,
                length,
                cardinality,
                hash,
            });
        }
        if pos != bytes.len() || next_offset != dir_offset {
            return Err(BlobError::Corrupt("directory length"));
        }
        Ok(RunDirectory { values })
    }

    /// Indices of the values within `(lower, upper)`.
    pub fn values_in(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Range<usize> {
        super::keys_in(&self.values, |v| &v.key, lower, upper)
    }
}

/// Verifies a value's `Files` section (its bytes as read) against its directory entry and
/// parses it: ordinals ascending below the run's `files`, cardinalities summing to the
/// value's, bitmaps filling the rest of the value exactly.
pub fn parse_files(bytes: &[u8], v: &RunValue, files: u64) -> Result<Vec<FileBitmap>, BlobError> {
    if bytes.len() as u64 != v.files_length || hash16(bytes) != v.hash {
        return Err(BlobError::Checksum("bitmap run files"));
    }
    let mut out = Vec::with_capacity(v.files as usize);
    let mut pos = 0usize;
    let mut at = v.offset + v.files_length;
    let mut sum = 0u64;
    let mut prev: Option<u64> = None;
    for _ in 0..v.files {
        let delta = get_varint(bytes, &mut pos)?;
        let length = get_varint(bytes, &mut pos)?;
        let cardinality = get_varint(bytes, &mut pos)?;
        let hash: [u8; 16] = get_bytes(bytes, &mut pos, 16)?
            .try_into()
            .expect("16 bytes");
        let ordinal = match prev {
            None => delta,
            Some(p) if delta > 0 => p.checked_add(delta).ok_or(BlobError::Corrupt("ordinal"))?,
            Some(_) => return Err(BlobError::Corrupt("run files out of order")),
        };
        let end = at.checked_add(length);
        if ordinal >= files
            || length == 0
            || cardinality == 0
            || cardinality > 1 << 32
            || end.is_none_or(|e| e > v.offset + v.length)
        {
            return Err(BlobError::Corrupt("run file range"));
        }
        let end = end.expect("checked");
        sum += cardinality;
        out.push(FileBitmap {
            ordinal,
            range: at..end,
            cardinality,
            hash,
        });
        at = end;
        prev = Some(ordinal);
    }
    if pos != bytes.len() || at != v.offset + v.length || sum != v.cardinality {
        return Err(BlobError::Corrupt("run files length"));
    }
    Ok(out)
}

/// Verifies one file's bitmap bytes against its `FileRef` and decodes it (every position
/// below `rows`).
pub fn decode(
    bytes: &[u8],
    f: &FileBitmap,
    rows: u64,
) -> Result<roaring::RoaringBitmap, BlobError> {
    let v = super::ValueRef {
        key: Vec::new(),
        offset: f.range.start,
        length: f.range.end - f.range.start,
        cardinality: f.cardinality,
        hash: f.hash,
    };
    super::decode_bitmap(bytes, &v, Some(rows))
}

/// The run of per-file bitmap blobs given whole (tests and small tables): each blob's values
/// merged by key, files by their order in `blobs`.
pub fn write(blobs: &[&[u8]]) -> Result<(Vec<u8>, RunTail), BlobError> {
    use std::collections::BTreeMap;
    let mut by_key: BTreeMap<Vec<u8>, Vec<(u64, &[u8], u64)>> = BTreeMap::new();
    for (ordinal, b) in blobs.iter().enumerate() {
        let len = b.len() as u64;
        if len < super::TRAILER_LEN {
            return Err(BlobError::Corrupt("shorter than its trailer"));
        }
        let (dir, _) = super::parse_trailer(&b[(len - super::TRAILER_LEN) as usize..], len)?;
        let d = super::BitmapDirectory::parse(
            &b[dir.start as usize..dir.end as usize],
            None,
            dir.start,
        )?;
        for v in d.values {
            let bytes = &b[v.offset as usize..(v.offset + v.length) as usize];
            if hash16(bytes) != v.hash {
                return Err(BlobError::Checksum("bitmap"));
            }
            by_key
                .entry(v.key)
                .or_default()
                .push((ordinal as u64, bytes, v.cardinality));
        }
    }
    let mut w = RunWriter::new(blobs.len() as u64);
    let mut out = Vec::new();
    for (k, holders) in &by_key {
        out.extend(w.value(k, holders)?);
    }
    let tail = w.finish();
    out.extend_from_slice(&tail.bytes);
    Ok((out, tail))
}

const _: () = assert!(MAX_CARDINALITY <= MAX_VALUES);

#[cfg(test)]
mod tests {
    use super::*;
    use roaring::RoaringBitmap;

    /// Three files' blobs: file i holds value `k{j}` at positions p with p % (i + 2) == j.
    fn blobs() -> Vec<Vec<u8>> {
        (0..3u64)
            .map(|i| {
                let mut e: Vec<(Vec<u8>, u64)> = (0..500u64)
                    .map(|p| (format!("k{}", p % (i + 2)).into_bytes(), p))
                    .collect();
                e.sort();
                super::super::write(e.iter().map(|(k, p)| (k.as_slice(), *p)), 100)
                    .unwrap()
                    .bytes
            })
            .collect()
    }

    fn want(file: u64, value: u64) -> RoaringBitmap {
        (0..500u32)
            .filter(|p| u64::from(*p) % (file + 2) == value)
            .collect()
    }

    #[test]
    fn round_trips_value_by_value() {
        let b = blobs();
        let refs: Vec<&[u8]> = b.iter().map(|x| x.as_slice()).collect();
        let (run, tail) = write(&refs).unwrap();
        assert_eq!(tail.positions, 1500);
        assert_eq!(tail.values, 4);
        let len = run.len() as u64;
        let (dir, positions, files) =
            parse_trailer(&run[(len - TRAILER_LEN) as usize..], len).unwrap();
        assert_eq!(
            (dir.clone(), positions, files),
            (tail.directory.clone(), 1500, 3)
        );
        let d = RunDirectory::parse(
            &run[dir.start as usize..dir.end as usize],
            Some(&tail.directory_sha256),
            dir.start,
            3,
        )
        .unwrap();
        for (j, v) in d.values.iter().enumerate() {
            assert_eq!(v.key, format!("k{j}").into_bytes());
            let fr = v.files_range();
            let refs = parse_files(&run[fr.start as usize..fr.end as usize], v, 3).unwrap();
            // Value k{j} is in the files with i + 2 > j.
            let holders: Vec<u64> = refs.iter().map(|f| f.ordinal).collect();
            let expect: Vec<u64> = (0..3).filter(|i| i + 2 > j as u64).collect();
            assert_eq!(holders, expect);
            for f in &refs {
                let bm =
                    decode(&run[f.range.start as usize..f.range.end as usize], f, 500).unwrap();
                assert_eq!(bm, want(f.ordinal, j as u64));
            }
            assert_eq!(
                v.cardinality,
                refs.iter().map(|f| f.cardinality).sum::<u64>()
            );
        }
        assert_eq!(
            d.values_in(Bound::Included(b"k1"), Bound::Excluded(b"k3")),
            1..3
        );
        // A position past the file's rows is refused.
        let v = &d.values[0];
        let fr = v.files_range();
        let f = &parse_files(&run[fr.start as usize..fr.end as usize], v, 3).unwrap()[0];
        assert!(decode(&run[f.range.start as usize..f.range.end as usize], f, 10).is_err());
    }

    #[test]
    fn the_writer_refuses_what_a_run_cannot_hold() {
        let mut w = RunWriter::new(2);
        let bm = {
            let mut v = Vec::new();
            RoaringBitmap::from_iter([1u32])
                .serialize_into(&mut v)
                .unwrap();
            v
        };
        assert!(w.value(b"b", &[(0, &bm, 1)]).is_ok());
        assert!(matches!(
            w.value(b"a", &[(0, &bm, 1)]),
            Err(BlobError::Unsorted(_))
        ));
        assert!(w.value(b"c", &[(1, &bm, 1), (0, &bm, 1)]).is_err());
        assert!(w.value(b"c", &[(2, &bm, 1)]).is_err());
        assert!(w.value(b"c", &[]).is_err());
        assert!(w
            .value(&vec![b'x'; MAX_KEY_BYTES + 1], &[(0, &bm, 1)])
            .is_err());
    }

    #[test]
    fn damage_anywhere_is_an_error_never_a_panic() {
        let b = blobs();
        let refs: Vec<&[u8]> = b.iter().map(|x| x.as_slice()).collect();
        let (run, tail) = write(&refs).unwrap();
        let read_all = |r: &[u8]| -> Result<Vec<(Vec<u8>, u64, Vec<u32>)>, BlobError> {
            let len = r.len() as u64;
            if len < TRAILER_LEN {
                return Err(BlobError::Corrupt("short"));
            }
            let (dir, _, files) = parse_trailer(&r[(len - TRAILER_LEN) as usize..], len)?;
            // The manifest's SHA-256 guards the directory, as a reader's would.
            let d = RunDirectory::parse(
                &r[dir.start as usize..dir.end as usize],
                Some(&tail.directory_sha256),
                dir.start,
                files,
            )?;
            let mut out = Vec::new();
            for v in &d.values {
                let fr = v.files_range();
                for f in parse_files(&r[fr.start as usize..fr.end as usize], v, files)? {
                    let bm = decode(&r[f.range.start as usize..f.range.end as usize], &f, 500)?;
                    out.push((v.key.clone(), f.ordinal, bm.iter().collect()));
                }
            }
            Ok(out)
        };
        let good = read_all(&run).unwrap();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut caught = 0;
        for i in 0..3_000 {
            let mut r = run.clone();
            match i % 3 {
                0 => {
                    let at = (rnd() % r.len() as u64) as usize;
                    r[at] ^= 1 << (rnd() % 8);
                }
                1 => r.truncate((rnd() % r.len() as u64) as usize),
                _ => {
                    let at = (rnd() % r.len() as u64) as usize;
                    r.insert(at, rnd() as u8);
                }
            }
            match read_all(&r) {
                // Undetected damage may only be in bytes no reader uses (the trailer's
                // positions count, flags and reserved bytes).
                Ok(back) => assert_eq!(back, good, "mutation {i} changed the answer"),
                Err(_) => caught += 1,
            }
        }
        assert!(caught > 2_900, "{caught}");
    }
}
