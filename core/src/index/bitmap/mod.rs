//! The bitmap index blob (`skerry-bitmap-v1`): each distinct canonical key of a data file's
//! indexed columns → a Roaring bitmap of the row positions holding it, behind a directory of
//! the sorted keys. Meant for low-cardinality columns: a count reads the directory alone (each
//! key's cardinality is in it), an `=`/IN reads one bitmap per key, and several columns'
//! bitmaps intersect without touching the data.
//!
//! Layout (integers little-endian; `varint` = unsigned LEB128):
//!
//! ```text
//! Blob      = Bitmap₀ … Bitmapₙ₋₁ Directory Trailer
//! Bitmap    = a RoaringBitmap in the portable serialization (the positions holding key i)
//! Directory = varint n  Value*ⁿ
//! Value     = varint key_len  key  varint offset  varint length  varint cardinality  hash[16]
//!             (keys strictly ascending; bitmaps contiguous from offset 0 in key order;
//!              hash = first 16 bytes of SHA-256 of the bitmap's bytes)
//! Trailer   = u64 dir_offset  u64 dir_length  u64 positions  u8 version(=1)  u8 flags(=0)
//!             u16 reserved(=0)  "SKB1"
//! ```
//!
//! `positions` is the sum of the cardinalities (the file's rows). The manifest records the
//! directory's range and SHA-256 like an ordered blob's ([`crate::formats::manifest::OrderedMeta`]),
//! so a reader reads the directory once and then only the bitmaps of the keys it wants. Every
//! byte read is verified; parsing never panics and bounds what it allocates by the bytes it was
//! given. `docs/bitmap-index.md` documents the format.

use std::ops::{Bound, Range};

use roaring::RoaringBitmap;
use sha2::{Digest, Sha256};

use crate::index::access::{BlobAccess, KeyProbe, Positions, RunPositions, RunWant};
use crate::index::ordered::{get_bytes, get_varint, put_varint, BlobError, MAX_KEY_BYTES};
use crate::io::BoxFut;

pub mod read;
pub mod run;

/// Puffin blob type of this format.
pub const BLOB_TYPE: &str = "skerry-bitmap-v1";
/// Trailer magic.
pub const MAGIC: [u8; 4] = *b"SKB1";
/// Fixed trailer length.
pub const TRAILER_LEN: u64 = 32;
/// Format version in the trailer.
pub const VERSION: u8 = 1;
/// Distinct keys per data file a bitmap index accepts unless its definition says otherwise.
pub const DEFAULT_MAX_CARDINALITY: u64 = 1_000;
/// The most distinct keys per data file any bitmap index accepts (past this an ordered index
/// answers in fewer bytes: see `docs/bitmap-index.md`).
pub const MAX_CARDINALITY: u64 = 65_536;

/// A written blob and the facts the manifest records about it.
#[derive(Clone, Debug)]
pub struct BitmapBlob {
    pub bytes: Vec<u8>,
    pub directory: Range<u64>,
    pub directory_sha256: String,
    /// Positions indexed (the sum of the cardinalities).
    pub positions: u64,
    /// Distinct keys.
    pub cardinality: u64,
    pub min_key: Option<Vec<u8>>,
    pub max_key: Option<Vec<u8>>,
}

/// Why a bitmap blob could not be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// More distinct keys than the limit (the count is the limit + 1: writing stops there).
    OverLimit {
        limit: u64,
    },
    /// A position past 2³² − 1 (a bitmap holds 32-bit positions).
    PositionTooLarge(u64),
    Blob(BlobError),
}

impl From<BlobError> for WriteError {
    fn from(e: BlobError) -> Self {
        WriteError::Blob(e)
    }
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueRef {
    pub key: Vec<u8>,
    pub offset: u64,
    pub length: u64,
    pub cardinality: u64,
    pub hash: [u8; 16],
}

impl ValueRef {
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset.saturating_add(self.length)
    }
}

/// A parsed directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitmapDirectory {
    pub values: Vec<ValueRef>,
}

fn hash16(bytes: &[u8]) -> [u8; 16] {
    Sha256::digest(bytes)[..16].try_into().expect("16 bytes")
}

/// Writes a blob from `(key, position)` entries in ascending (key, position) order, refusing
/// more than `limit` distinct keys as soon as the next one appears (memory stays bounded by
/// the bitmaps of at most `limit` keys).
pub fn write<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], u64)>,
    limit: u64,
) -> Result<BitmapBlob, WriteError> {
    let mut out = Vec::new();
    let mut dir: Vec<ValueRef> = Vec::new();
    let mut cur: Option<(Vec<u8>, RoaringBitmap)> = None;
    let mut last_pos: Option<u64> = None;
    let mut positions = 0u64;
    let close = |out: &mut Vec<u8>, dir: &mut Vec<ValueRef>, key: Vec<u8>, bm: RoaringBitmap| {
        let offset = out.len() as u64;
        bm.serialize_into(&mut *out).expect("vec write");
        let bytes = &out[offset as usize..];
        dir.push(ValueRef {
            key,
            offset,
            length: bytes.len() as u64,
            cardinality: bm.len(),
            hash: hash16(bytes),
        });
    };
    for (k, p) in entries {
        if k.len() > MAX_KEY_BYTES {
            return Err(BlobError::KeyTooLarge(k.len()).into());
        }
        let p32 = u32::try_from(p).map_err(|_| WriteError::PositionTooLarge(p))?;
        match &mut cur {
            Some((key, bm)) if key.as_slice() == k => {
                if last_pos.is_some_and(|l| l >= p) {
                    return Err(BlobError::Unsorted(positions).into());
                }
                bm.try_push(p32)
                    .map_err(|_| BlobError::Unsorted(positions))?;
            }
            _ => {
                if let Some((key, bm)) = cur.take() {
                    if key.as_slice() > k {
                        return Err(BlobError::Unsorted(positions).into());
                    }
                    close(&mut out, &mut dir, key, bm);
                }
                if dir.len() as u64 >= limit {
                    return Err(WriteError::OverLimit { limit });
                }
                let mut bm = RoaringBitmap::new();
                bm.insert(p32);
                cur = Some((k.to_vec(), bm));
            }
        }
        last_pos = Some(p);
        positions += 1;
    }
    if let Some((key, bm)) = cur.take() {
        close(&mut out, &mut dir, key, bm);
    }
    let dir_offset = out.len() as u64;
    put_varint(&mut out, dir.len() as u64);
    for v in &dir {
        put_varint(&mut out, v.key.len() as u64);
        out.extend_from_slice(&v.key);
        put_varint(&mut out, v.offset);
        put_varint(&mut out, v.length);
        put_varint(&mut out, v.cardinality);
        out.extend_from_slice(&v.hash);
    }
    let dir_end = out.len() as u64;
    let directory_sha256 = hex::encode(Sha256::digest(&out[dir_offset as usize..]));
    out.extend_from_slice(&dir_offset.to_le_bytes());
    out.extend_from_slice(&(dir_end - dir_offset).to_le_bytes());
    out.extend_from_slice(&positions.to_le_bytes());
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&MAGIC);
    Ok(BitmapBlob {
        bytes: out,
        directory: dir_offset..dir_end,
        directory_sha256,
        positions,
        cardinality: dir.len() as u64,
        min_key: dir.first().map(|v| v.key.clone()),
        max_key: dir.last().map(|v| v.key.clone()),
    })
}

/// The trailer's facts: the directory's range and the positions indexed.
pub fn parse_trailer(t: &[u8], blob_len: u64) -> Result<(Range<u64>, u64), BlobError> {
    if t.len() as u64 != TRAILER_LEN {
        return Err(BlobError::Corrupt("trailer length"));
    }
    if t[28..32] != MAGIC {
        return Err(BlobError::Corrupt("bad trailer magic"));
    }
    if t[24] != VERSION {
        return Err(BlobError::Corrupt("unsupported bitmap index version"));
    }
    let word = |i: usize| u64::from_le_bytes(t[i..i + 8].try_into().expect("8 bytes"));
    let (off, len, positions) = (word(0), word(8), word(16));
    if off
        .checked_add(len)
        .and_then(|e| e.checked_add(TRAILER_LEN))
        .is_none_or(|e| e != blob_len)
    {
        return Err(BlobError::Corrupt("directory range"));
    }
    Ok((off..off + len, positions))
}

impl BitmapDirectory {
    /// Verifies `bytes` against `sha256_hex` (when given) and parses them; `dir_offset` (where
    /// the directory starts in the blob) bounds every bitmap range.
    pub fn parse(
        bytes: &[u8],
        sha256_hex: Option<&str>,
        dir_offset: u64,
    ) -> Result<Self, BlobError> {
        super::blob::check_sha256(bytes, sha256_hex, "directory")?;
        let mut pos = 0usize;
        let n = get_varint(bytes, &mut pos)?;
        // Each value takes at least 20 bytes: bound the allocation by the input.
        if n > bytes.len() as u64 / 20 + 1 || n > MAX_CARDINALITY {
            return Err(BlobError::Corrupt("value count"));
        }
        let mut values: Vec<ValueRef> = Vec::with_capacity(n as usize);
        let mut next_offset = 0u64;
        for _ in 0..n {
            let klen = get_varint(bytes, &mut pos)?;
            if klen > MAX_KEY_BYTES as u64 {
                return Err(BlobError::Corrupt("key too long"));
            }
            let key = get_bytes(bytes, &mut pos, klen)?.to_vec();
            let offset = get_varint(bytes, &mut pos)?;
            let length = get_varint(bytes, &mut pos)?;
            let cardinality = get_varint(bytes, &mut pos)?;
            let hash: [u8; 16] = get_bytes(bytes, &mut pos, 16)?
                .try_into()
                .expect("16 bytes");
            if offset != next_offset
                || length == 0
                || cardinality == 0
                || cardinality > 1 << 32
                || offset.checked_add(length).is_none_or(|e| e > dir_offset)
            {
                return Err(BlobError::Corrupt("bitmap range"));
            }
            if values.last().is_some_and(|p| p.key >= key) {
                return Err(BlobError::Corrupt("keys out of order"));
            }
            next_offset = offset + length;
            values.push(ValueRef {
                key,
                offset,
                length,
                cardinality,
                hash,
            });
        }
        if pos != bytes.len() || next_offset != dir_offset {
            return Err(BlobError::Corrupt("directory length"));
        }
        Ok(BitmapDirectory { values })
    }

    /// Indices of the values within `(lower, upper)`.
    pub fn values_in(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Range<usize> {
        keys_in(&self.values, |v| &v.key, lower, upper)
    }

    /// Positions the directory accounts for.
    pub fn positions(&self) -> u64 {
        self.values.iter().map(|v| v.cardinality).sum()
    }
}

/// Indices of the entries of `sorted` (ascending by `key`) whose key is within
/// `(lower, upper)`: a file's directory and a table run's alike.
pub(crate) fn keys_in<T>(
    sorted: &[T],
    key: impl Fn(&T) -> &[u8],
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> Range<usize> {
    let start = match lower {
        Bound::Included(l) => sorted.partition_point(|x| key(x) < l),
        Bound::Excluded(l) => sorted.partition_point(|x| key(x) <= l),
        Bound::Unbounded => 0,
    };
    let end = match upper {
        Bound::Included(u) => sorted.partition_point(|x| key(x) <= u),
        Bound::Excluded(u) => sorted.partition_point(|x| key(x) < u),
        Bound::Unbounded => sorted.len(),
    };
    start..end.max(start)
}

/// Verifies one bitmap's bytes against its directory entry and decodes it: the hash, the
/// cardinality, and (when `rows` is given) that every position is below it.
pub fn decode_bitmap(
    bytes: &[u8],
    v: &ValueRef,
    rows: Option<u64>,
) -> Result<RoaringBitmap, BlobError> {
    if bytes.len() as u64 != v.length || hash16(bytes) != v.hash {
        return Err(BlobError::Checksum("bitmap"));
    }
    // The bytes are what the writer wrote (the hash says so), but a hash can be forged along
    // with the bytes: the decoder still sees them as untrusted and bounds itself by them.
    let bm = RoaringBitmap::deserialize_from(bytes)
        .map_err(|_| BlobError::Corrupt("undecodable bitmap"))?;
    if bm.len() != v.cardinality {
        return Err(BlobError::Corrupt("bitmap cardinality"));
    }
    if let (Some(n), Some(max)) = (rows, bm.max()) {
        if u64::from(max) >= n {
            return Err(BlobError::Corrupt("a position past the file's rows"));
        }
    }
    Ok(bm)
}

/// Calls `f(key, position)` for every entry of a whole blob, in key then position order
/// (verify and rebuilds read blobs whole).
pub fn read_entries(blob: &[u8], mut f: impl FnMut(&[u8], u64)) -> Result<(), BlobError> {
    let len = blob.len() as u64;
    if len < TRAILER_LEN {
        return Err(BlobError::Corrupt("shorter than its trailer"));
    }
    let (dir, _) = parse_trailer(&blob[(len - TRAILER_LEN) as usize..], len)?;
    let d = BitmapDirectory::parse(&blob[dir.start as usize..dir.end as usize], None, dir.start)?;
    for v in &d.values {
        let bytes = blob
            .get(v.offset as usize..(v.offset + v.length) as usize)
            .ok_or(BlobError::Corrupt("bitmap range"))?;
        for p in decode_bitmap(bytes, v, None)? {
            f(&v.key, u64::from(p));
        }
    }
    Ok(())
}

/// The bitmap kind ([`super::kind::Kind`]): `=`, IN, IS NULL and counts on low-cardinality
/// keys.
pub struct Bitmap;

static BITMAP: super::kind::About = super::kind::About {
    answers: super::kind::Answers {
        rows: true,
        counts: true,
        ..super::kind::Answers::NOTHING
    },
    options: &["maxCardinality"],
    refuses_unique: Some(" (a unique key has one row per value: use an ordered index)"),
    run: Some(super::kind::RunLayout::Stacked),
    ..super::kind::About::new(super::IndexKind::Bitmap, "bitmap", BLOB_TYPE, "bitmap-v1")
};

impl super::kind::Kind for Bitmap {
    fn about(&self) -> &'static super::kind::About {
        &BITMAP
    }
    fn spec(&self, o: &super::IndexOptions) -> Result<super::IndexSpec, String> {
        match o.max_cardinality {
            None => Ok(super::IndexSpec::Bitmap {
                max_cardinality: DEFAULT_MAX_CARDINALITY,
            }),
            Some(n) if (1..=MAX_CARDINALITY).contains(&n) => Ok(super::IndexSpec::Bitmap {
                max_cardinality: n,
            }),
            Some(n) => Err(format!(
                "maxCardinality {n} is outside 1..={MAX_CARDINALITY}; columns with more distinct values want an ordered index"
            )),
        }
    }
    fn write(
        &self,
        spec: &super::IndexSpec,
        src: &super::kind::BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
        use crate::error::Error;
        let limit = match spec {
            super::IndexSpec::Bitmap { max_cardinality } => *max_cardinality,
            _ => DEFAULT_MAX_CARDINALITY,
        };
        let blob = write(entries, limit).map_err(|e| match e {
            WriteError::OverLimit { limit } => Error::Cardinality {
                index: src.index.to_string(),
                file: src.path.to_string(),
                limit,
            },
            WriteError::PositionTooLarge(_) => Error::Limit {
                what: "rows of a data file under a bitmap index",
                count: src.record_count,
                limit: 1 << 32,
                remedy: "use an ordered index for files of more than 2^32 rows",
            },
            WriteError::Blob(b) => b.into(),
        })?;
        let meta = super::blob::BlobMeta {
            values: Some(blob.cardinality),
            ..super::blob::BlobMeta::new(blob.directory, &blob.directory_sha256, blob.positions)
        }
        .with_keys(&blob.min_key, &blob.max_key);
        Ok((blob.bytes, meta))
    }
    fn read_entries(&self, blob: &[u8], f: &mut dyn FnMut(&[u8], u64)) -> Result<(), BlobError> {
        read_entries(blob, f)
    }
    fn rows<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Result<Option<Vec<(Vec<u8>, u64)>>, BlobError>> {
        Box::pin(async move { read::rows(blob, &probe).await })
    }
    fn estimate<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Option<u64>> {
        Box::pin(async move { read::estimate(blob, &probe).await })
    }
    fn positions<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
        only_count: bool,
    ) -> BoxFut<'a, Result<Option<Positions>, BlobError>> {
        Box::pin(async move { read::positions(blob, &probe, only_count).await })
    }
    fn run_positions<'a>(
        &'a self,
        run: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
        want: &'a [RunWant],
    ) -> BoxFut<'a, Result<RunPositions, BlobError>> {
        Box::pin(async move { read::run_positions(run, &probe, want).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: u64, values: u64) -> Vec<(Vec<u8>, u64)> {
        let mut e: Vec<(Vec<u8>, u64)> = (0..n)
            .map(|p| (format!("k{:03}", (p * 7919) % values).into_bytes(), p))
            .collect();
        e.sort();
        e
    }

    #[test]
    fn round_trips_and_locates_values() {
        let e = entries(10_000, 37);
        let blob = write(e.iter().map(|(k, p)| (k.as_slice(), *p)), 1000).unwrap();
        assert_eq!(blob.cardinality, 37);
        assert_eq!(blob.positions, 10_000);
        let mut back = Vec::new();
        read_entries(&blob.bytes, |k, p| back.push((k.to_vec(), p))).unwrap();
        assert_eq!(back, e);
        let b = &blob.bytes;
        let d = BitmapDirectory::parse(
            &b[blob.directory.start as usize..blob.directory.end as usize],
            Some(&blob.directory_sha256),
            blob.directory.start,
        )
        .unwrap();
        assert_eq!(d.positions(), 10_000);
        let r = d.values_in(Bound::Included(b"k005"), Bound::Included(b"k005"));
        assert_eq!(r.len(), 1);
        let v = &d.values[r.start];
        let bm = decode_bitmap(
            &b[v.offset as usize..(v.offset + v.length) as usize],
            v,
            Some(10_000),
        )
        .unwrap();
        let want: Vec<u64> = e
            .iter()
            .filter(|(k, _)| k == b"k005")
            .map(|x| x.1)
            .collect();
        assert_eq!(bm.iter().map(u64::from).collect::<Vec<_>>(), want);
        assert_eq!(
            d.values_in(Bound::Excluded(b"k036"), Bound::Unbounded)
                .len(),
            0
        );
        assert_eq!(
            d.values_in(Bound::Unbounded, Bound::Excluded(b"k000"))
                .len(),
            0
        );
        assert_eq!(
            d.values_in(Bound::Included(b"k010"), Bound::Excluded(b"k020"))
                .len(),
            10
        );
    }

    #[test]
    fn refuses_past_the_limit_and_out_of_order() {
        let e = entries(1000, 50);
        let r = write(e.iter().map(|(k, p)| (k.as_slice(), *p)), 49);
        assert_eq!(r.unwrap_err(), WriteError::OverLimit { limit: 49 });
        assert!(write(e.iter().map(|(k, p)| (k.as_slice(), *p)), 50).is_ok());
        let bad = [(&b"b"[..], 0u64), (&b"a"[..], 1)];
        assert!(matches!(
            write(bad, 10),
            Err(WriteError::Blob(BlobError::Unsorted(_)))
        ));
        let bad = [(&b"a"[..], 3u64), (&b"a"[..], 3)];
        assert!(matches!(
            write(bad, 10),
            Err(WriteError::Blob(BlobError::Unsorted(_)))
        ));
        assert_eq!(
            write([(&b"a"[..], 1u64 << 32)], 10).unwrap_err(),
            WriteError::PositionTooLarge(1 << 32)
        );
        let empty = write(std::iter::empty(), 10).unwrap();
        assert_eq!((empty.cardinality, empty.min_key), (0, None));
        read_entries(&empty.bytes, |_, _| panic!("no entries")).unwrap();
    }

    #[test]
    fn damage_anywhere_is_an_error_never_a_panic() {
        let e = entries(3_000, 11);
        let blob = write(e.iter().map(|(k, p)| (k.as_slice(), *p)), 100).unwrap();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..3_000 {
            let mut b = blob.bytes.clone();
            match i % 3 {
                0 => {
                    let at = (rnd() % b.len() as u64) as usize;
                    b[at] ^= 1 << (rnd() % 8);
                }
                1 => b.truncate((rnd() % b.len() as u64) as usize),
                _ => {
                    let at = (rnd() % b.len() as u64) as usize;
                    b.insert(at, rnd() as u8);
                }
            }
            let mut back = Vec::new();
            if read_entries(&b, |k, p| back.push((k.to_vec(), p))).is_ok() {
                // Undetected damage may only be in bytes no reader looks at (none here but the
                // trailer's reserved bytes and the positions count).
                assert_eq!(back, e, "mutation {i} changed the answer");
            }
            // The directory alone, against the manifest's hash.
            let d = &b.get(blob.directory.start as usize..blob.directory.end as usize);
            if let Some(d) = d {
                if let Ok(p) =
                    BitmapDirectory::parse(d, Some(&blob.directory_sha256), blob.directory.start)
                {
                    assert_eq!(p.positions(), 3_000);
                }
            }
        }
    }
}
