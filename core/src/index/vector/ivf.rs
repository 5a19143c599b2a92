//! `skerry-vector-ivf-v1` (RFC 0001, `docs/rfcs/0001-vector-runs.md`): one data file's — or
//! one table run's — vectors laid out **partition-major** against the index's codebook, so a
//! query reads the partitions it probes as contiguous ranges and the raw vectors of its best
//! candidates in one more round. Writer and reader side by side; not yet written by builds.
//!
//! ```text
//! blob      = codes ‖ raw ‖ directory ‖ u64 directory_offset ‖ "SKI1"
//! codes     = per partition (ascending id), per entry (ascending position):
//!             code[code_dim] u64 position u32 raw_crc32
//! raw       = per entry, in the same order: dim × f32 (the vector as the file holds it)
//! directory = "SKID" u8 version u8 metric u16 0 u32 dim u32 code_dim u64 entries
//!             32 bytes: the codebook's SHA-256
//!             u32 partitions, per partition (ascending id): u32 id u32 entries u32 codes_crc32
//!             u64 raw_offset
//! ```
//!
//! Entry `i` (counting over the partitions in order) has its code at `i · (code_dim + 12)` and
//! its raw vector at `raw_offset + i · dim · 4`. In a table run a position is
//! `ordinal << 40 | position`, as in the ordered runs. All integers little-endian. A reader
//! checks the directory against the manifest's SHA-256, a partition's codes against its
//! CRC-32 and each raw vector against the CRC-32 beside its code; counts are bounded by the
//! blob's length before anything is allocated.

use std::ops::Range;

use sha2::{Digest, Sha256};

use super::Cur;
use crate::index::blob::{check_sha256, BlobError};

pub const BLOB_TYPE: &str = "skerry-vector-ivf-v1";
pub const MAGIC: &[u8; 4] = b"SKI1";
pub const DIRECTORY_MAGIC: &[u8; 4] = b"SKID";
pub const VERSION: u8 = 1;
/// Bytes of an entry beside its code: the position and the raw vector's CRC-32.
const ENTRY_TAIL: usize = 12;

/// One vector as the writer takes it.
pub struct Entry<'a> {
    pub partition: u32,
    pub position: u64,
    pub code: &'a [u8],
    pub raw: &'a [f32],
}

/// A written blob: its bytes and where its directory is (what the manifest records).
pub struct IvfBlob {
    pub bytes: Vec<u8>,
    pub directory: Range<u64>,
    pub directory_sha256: String,
    pub entries: u64,
}

/// Writes `entries` (sorted by partition, then position; codes of `code_dim` bytes, vectors of
/// `dim` floats) against the codebook with SHA-256 `codebook`.
pub fn write(
    metric: u8,
    dim: usize,
    code_dim: usize,
    codebook: [u8; 32],
    entries: &[Entry<'_>],
) -> Result<IvfBlob, BlobError> {
    let mut codes = Vec::with_capacity(entries.len() * (code_dim + ENTRY_TAIL));
    let mut raw = Vec::with_capacity(entries.len() * dim * 4);
    let mut parts: Vec<(u32, u32, u32)> = Vec::new();
    let mut part_start = 0usize;
    for (i, e) in entries.iter().enumerate() {
        if e.code.len() != code_dim || e.raw.len() != dim {
            return Err(BlobError::Corrupt("an entry of the wrong width"));
        }
        if let Some(prev) = i.checked_sub(1).map(|p| &entries[p]) {
            if (prev.partition, prev.position) >= (e.partition, e.position) {
                return Err(BlobError::Unsorted(i as u64));
            }
        }
        if parts.last().is_none_or(|p| p.0 != e.partition) {
            if let Some(last) = parts.last_mut() {
                last.2 = crc32fast::hash(&codes[part_start..]);
            }
            part_start = codes.len();
            parts.push((e.partition, 0, 0));
        }
        let last = parts.last_mut().expect("pushed");
        last.1 = last
            .1
            .checked_add(1)
            .ok_or(BlobError::Corrupt("partition size"))?;
        let r0 = raw.len();
        for x in e.raw {
            raw.extend_from_slice(&x.to_le_bytes());
        }
        codes.extend_from_slice(e.code);
        codes.extend_from_slice(&e.position.to_le_bytes());
        codes.extend_from_slice(&crc32fast::hash(&raw[r0..]).to_le_bytes());
    }
    if let Some(last) = parts.last_mut() {
        last.2 = crc32fast::hash(&codes[part_start..]);
    }
    let raw_offset = codes.len() as u64;
    let mut out = codes;
    out.extend_from_slice(&raw);
    let dir_offset = out.len() as u64;
    let mut d = Vec::new();
    d.extend_from_slice(DIRECTORY_MAGIC);
    d.extend_from_slice(&[VERSION, metric, 0, 0]);
    d.extend_from_slice(&(dim as u32).to_le_bytes());
    d.extend_from_slice(&(code_dim as u32).to_le_bytes());
    d.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    d.extend_from_slice(&codebook);
    d.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    for (id, n, crc) in &parts {
        for v in [id, n, crc] {
            d.extend_from_slice(&v.to_le_bytes());
        }
    }
    d.extend_from_slice(&raw_offset.to_le_bytes());
    let sha = hex::encode(Sha256::digest(&d));
    out.extend_from_slice(&d);
    let dir_end = out.len() as u64;
    out.extend_from_slice(&dir_offset.to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok(IvfBlob {
        bytes: out,
        directory: dir_offset..dir_end,
        directory_sha256: sha,
        entries: entries.len() as u64,
    })
}

/// One partition of a blob, as its directory records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub id: u32,
    /// Entries in it.
    pub entries: u32,
    /// Index of its first entry in the blob.
    pub first: u64,
    pub codes_crc32: u32,
}

/// A blob's parsed directory.
#[derive(Clone, Debug, PartialEq)]
pub struct IvfDirectory {
    pub metric: u8,
    pub dim: usize,
    pub code_dim: usize,
    pub entries: u64,
    pub codebook: [u8; 32],
    /// Ascending by id.
    pub partitions: Vec<Partition>,
    pub raw_offset: u64,
}

impl IvfDirectory {
    /// Parses the directory `bytes` of a blob whose directory starts at `dir_offset`, checked
    /// against `sha256` when given. Never panics; allocates only what `bytes` can hold.
    pub fn parse(
        bytes: &[u8],
        sha256: Option<&str>,
        dir_offset: u64,
    ) -> Result<IvfDirectory, BlobError> {
        check_sha256(bytes, sha256, "vector partition directory")?;
        let mut c = Cur { b: bytes, at: 0 };
        if c.take(4)? != DIRECTORY_MAGIC {
            return Err(BlobError::Corrupt("not a vector partition directory"));
        }
        let head = c.take(4)?;
        if head[0] != VERSION {
            return Err(BlobError::Corrupt("vector partition directory version"));
        }
        let metric = head[1];
        let dim = c.u32()? as usize;
        let code_dim = c.u32()? as usize;
        let entries = c.u64()?;
        let codebook: [u8; 32] = c.take(32)?.try_into().expect("32 bytes");
        let n = c.u32()? as usize;
        if n > bytes.len() / 12 {
            return Err(BlobError::Corrupt("partition count"));
        }
        let mut partitions = Vec::with_capacity(n);
        let mut first = 0u64;
        for _ in 0..n {
            let (id, count, crc) = (c.u32()?, c.u32()?, c.u32()?);
            if partitions.last().is_some_and(|p: &Partition| p.id >= id) || count == 0 {
                return Err(BlobError::Corrupt("partitions out of order"));
            }
            partitions.push(Partition {
                id,
                entries: count,
                first,
                codes_crc32: crc,
            });
            first += u64::from(count);
        }
        let raw_offset = c.u64()?;
        let d = IvfDirectory {
            metric,
            dim,
            code_dim,
            entries,
            codebook,
            partitions,
            raw_offset,
        };
        // The sections must be exactly what the counts say, ending where the directory starts.
        let codes = entries.checked_mul(d.entry_len() as u64);
        let raw = entries
            .checked_mul(dim as u64)
            .and_then(|x| x.checked_mul(4));
        if first != entries
            || codes != Some(raw_offset)
            || raw.and_then(|r| r.checked_add(raw_offset)) != Some(dir_offset)
        {
            return Err(BlobError::Corrupt("vector partition sections"));
        }
        Ok(d)
    }

    fn entry_len(&self) -> usize {
        self.code_dim + ENTRY_TAIL
    }

    /// The partition `id`, when the blob holds any of its vectors.
    pub fn partition(&self, id: u32) -> Option<&Partition> {
        self.partitions
            .binary_search_by_key(&id, |p| p.id)
            .ok()
            .map(|i| &self.partitions[i])
    }

    /// The byte range (relative to the blob) of a partition's codes.
    pub fn codes_range(&self, p: &Partition) -> Range<u64> {
        let len = self.entry_len() as u64;
        p.first * len..(p.first + u64::from(p.entries)) * len
    }

    /// The byte range of entry `i`'s raw vector.
    pub fn raw_range(&self, i: u64) -> Range<u64> {
        let len = self.dim as u64 * 4;
        self.raw_offset + i * len..self.raw_offset + (i + 1) * len
    }

    /// The entries of partition `p` from its codes' bytes, checked against its CRC-32:
    /// `(entry index, code, position, raw_crc32)` in order.
    pub fn entries<'b>(
        &self,
        p: &Partition,
        bytes: &'b [u8],
    ) -> Result<impl Iterator<Item = (u64, &'b [u8], u64, u32)> + 'b, BlobError> {
        let len = self.entry_len();
        if bytes.len() as u64 != u64::from(p.entries) * len as u64 {
            return Err(BlobError::Corrupt("partition length"));
        }
        if crc32fast::hash(bytes) != p.codes_crc32 {
            return Err(BlobError::Checksum("vector partition"));
        }
        let (first, code_dim) = (p.first, self.code_dim);
        Ok(bytes.chunks_exact(len).enumerate().map(move |(k, e)| {
            let position =
                u64::from_le_bytes(e[code_dim..code_dim + 8].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(e[code_dim + 8..].try_into().expect("4 bytes"));
            (first + k as u64, &e[..code_dim], position, crc)
        }))
    }

    /// A raw vector from its bytes, checked against the CRC-32 its entry carries.
    pub fn raw(&self, bytes: &[u8], crc32: u32) -> Result<Vec<f32>, BlobError> {
        if bytes.len() != self.dim * 4 {
            return Err(BlobError::Corrupt("raw vector length"));
        }
        if crc32fast::hash(bytes) != crc32 {
            return Err(BlobError::Checksum("raw vector"));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect())
    }
}

/// The directory of a whole blob, from its tail (verify and tests read blobs whole).
pub fn directory_of(blob: &[u8], sha256: Option<&str>) -> Result<IvfDirectory, BlobError> {
    let n = blob.len();
    if n < 12 || &blob[n - 4..] != MAGIC {
        return Err(BlobError::Corrupt("not a vector partition blob"));
    }
    let at = u64::from_le_bytes(blob[n - 12..n - 4].try_into().expect("8 bytes"));
    let dir = usize::try_from(at)
        .ok()
        .filter(|a| *a <= n - 12)
        .ok_or(BlobError::Corrupt("vector partition directory offset"))?;
    IvfDirectory::parse(&blob[dir..n - 12], sha256, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<(u32, u64, Vec<u8>, Vec<f32>)>, usize, usize) {
        let (dim, code_dim) = (5, 6);
        let mut v = vec![];
        for (i, p) in [0u32, 0, 3, 3, 3, 9].into_iter().enumerate() {
            let code: Vec<u8> = (0..code_dim).map(|d| (i * 7 + d) as u8).collect();
            let raw: Vec<f32> = (0..dim).map(|d| i as f32 + d as f32 / 10.0).collect();
            v.push((p, 10 * i as u64, code, raw));
        }
        (v, dim, code_dim)
    }

    fn blob() -> (IvfBlob, Vec<(u32, u64, Vec<u8>, Vec<f32>)>) {
        let (v, dim, code_dim) = sample();
        let entries: Vec<Entry> = v
            .iter()
            .map(|(p, pos, c, r)| Entry {
                partition: *p,
                position: *pos,
                code: c,
                raw: r,
            })
            .collect();
        (write(0, dim, code_dim, [7; 32], &entries).unwrap(), v)
    }

    #[test]
    fn round_trips_partition_by_partition() {
        let (b, v) = blob();
        let d = directory_of(&b.bytes, Some(&b.directory_sha256)).unwrap();
        assert_eq!(
            (d.entries, d.dim, d.code_dim, d.codebook),
            (6, 5, 6, [7; 32])
        );
        assert_eq!(
            d.partitions
                .iter()
                .map(|p| (p.id, p.entries))
                .collect::<Vec<_>>(),
            vec![(0, 2), (3, 3), (9, 1)]
        );
        assert!(d.partition(4).is_none());
        let mut seen = vec![];
        for id in [0u32, 3, 9] {
            let p = *d.partition(id).unwrap();
            let r = d.codes_range(&p);
            for (i, code, position, crc) in d
                .entries(&p, &b.bytes[r.start as usize..r.end as usize])
                .unwrap()
            {
                let rr = d.raw_range(i);
                let raw = d
                    .raw(&b.bytes[rr.start as usize..rr.end as usize], crc)
                    .unwrap();
                seen.push((id, position, code.to_vec(), raw));
            }
        }
        assert_eq!(seen, v);
        // The manifest's facts: directory range and hash.
        let dir = &b.bytes[b.directory.start as usize..b.directory.end as usize];
        assert_eq!(
            IvfDirectory::parse(dir, Some(&b.directory_sha256), b.directory.start).unwrap(),
            d
        );
    }

    #[test]
    fn refuses_damage_and_bad_input_without_panicking() {
        let (b, _) = blob();
        let d = directory_of(&b.bytes, None).unwrap();
        // Every flipped byte is caught by a hash or a check before its bytes are used.
        for i in 0..b.bytes.len() {
            let mut bad = b.bytes.clone();
            bad[i] ^= 0x20;
            let caught = match directory_of(&bad, Some(&b.directory_sha256)) {
                Err(_) => true,
                Ok(dd) => dd.partitions.iter().any(|p| {
                    let r = dd.codes_range(p);
                    match dd.entries(p, &bad[r.start as usize..r.end as usize]) {
                        Err(_) => true,
                        Ok(es) => es.collect::<Vec<_>>().iter().any(|(i, _, _, crc)| {
                            let rr = dd.raw_range(*i);
                            dd.raw(&bad[rr.start as usize..rr.end as usize], *crc)
                                .is_err()
                        }),
                    }
                }),
            };
            assert!(caught, "byte {i} flipped unnoticed");
        }
        let p = d.partitions[1];
        assert!(d.entries(&p, &[0u8; 3]).is_err());
        assert!(d.raw(&[0u8; 20], 0).is_err());
        assert!(directory_of(&b.bytes[..10], None).is_err());
        assert!(IvfDirectory::parse(&[0u8; 8], None, 0).is_err());
        // Unsorted or mis-sized entries are refused by the writer.
        let raw = [0f32; 2];
        let e = |partition, position| Entry {
            partition,
            position,
            code: &[1, 2],
            raw: &raw,
        };
        assert!(write(0, 2, 2, [0; 32], &[e(1, 0), e(0, 5)]).is_err());
        assert!(write(0, 2, 2, [0; 32], &[e(1, 4), e(1, 4)]).is_err());
        assert!(write(0, 3, 2, [0; 32], &[e(1, 4)]).is_err());
        assert_eq!(write(0, 2, 2, [0; 32], &[]).unwrap().entries, 0);
    }
}
