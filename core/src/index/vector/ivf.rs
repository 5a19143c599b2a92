//! `skerry-vector-ivf-v1` (RFC 0001, `docs/rfcs/0001-vector-runs.md`): one data file's — or
//! one table run's — vectors laid out **partition-major** against the index's codebook, so a
//! query reads the partitions it probes as contiguous ranges and the raw vectors of its best
//! candidates in one more round. Writer ([`write`], and [`RunWriter`] streaming a table run) and
//! reader side by side.
//!
//! ```text
//! blob      = codes ‖ raw ‖ directory ‖ u64 directory_offset ‖ "SKI1"
//! codes     = per partition (ascending id):
//!               runs × (u32 ordinal u32 count)       the files its entries come from, ascending
//!               per entry (ascending (ordinal, position)): code[code_bytes] u32 position
//! raw       = per entry, in the same order: dim × f32 (the vector as the file holds it) u32 crc32
//! directory = "SKID" u8 version u8 metric u8 bits u8 0 u32 dim u32 code_bytes u64 entries
//!             32 bytes: the codebook's SHA-256
//!             u32 partitions, per partition (ascending id): u32 id u32 entries u32 runs
//!                                                            u32 crc32 (of its codes bytes)
//!             u64 raw_offset
//! ```
//!
//! A per-file blob names ordinal 0 only; a table run names the ordinals of its file table.
//! Entry `i` (counting over the partitions in order) has its raw vector at
//! `raw_offset + i · (dim · 4 + 4)`, followed by the CRC-32 of its floats. `bits` is the
//! codes' width (4: two dimensions a byte, decision 54; 8: one). All integers little-endian.
//! A reader checks the directory against the manifest's SHA-256, a partition's bytes against
//! its CRC-32 and each raw vector against its own; counts are bounded by the blob's length
//! before anything is allocated.

use std::ops::Range;

use sha2::{Digest, Sha256};

use super::Cur;
use crate::index::blob::{check_sha256, BlobError};

pub const BLOB_TYPE: &str = "skerry-vector-ivf-v1";
pub const MAGIC: &[u8; 4] = b"SKI1";
pub const DIRECTORY_MAGIC: &[u8; 4] = b"SKID";
pub const VERSION: u8 = 1;
/// Bytes of an entry beside its code: the position.
const ENTRY_TAIL: usize = 4;
/// Bytes of a partition's file run: ordinal and count.
const RUN_LEN: usize = 8;

/// One vector as the writer takes it.
pub struct Entry<'a> {
    pub partition: u32,
    /// The file's ordinal in a run's file table (0 in a per-file blob).
    pub ordinal: u32,
    pub position: u32,
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

/// What a blob's codes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codes {
    pub metric: u8,
    /// 4 or 8.
    pub bits: u8,
    /// Floats of a raw vector.
    pub dim: usize,
    /// Bytes of a code.
    pub code_bytes: usize,
    /// The codebook's SHA-256.
    pub codebook: [u8; 32],
}

/// Writes `entries` (sorted by partition, ordinal, position; codes of `c.code_bytes` bytes,
/// vectors of `c.dim` floats).
pub fn write(c: &Codes, entries: &[Entry<'_>]) -> Result<IvfBlob, BlobError> {
    if !matches!(c.bits, 4 | 8) {
        return Err(BlobError::Corrupt("vector code width"));
    }
    let mut codes = Vec::with_capacity(entries.len() * (c.code_bytes + ENTRY_TAIL));
    let mut raw = Vec::with_capacity(entries.len() * (c.dim * 4 + 4));
    // (id, entries, runs, crc)
    let mut parts: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let id = entries[i].partition;
        let end = i + entries[i..]
            .iter()
            .take_while(|e| e.partition == id)
            .count();
        let part = &entries[i..end];
        if parts.last().is_some_and(|p| p.0 >= id) {
            return Err(BlobError::Unsorted(i as u64));
        }
        let start = codes.len();
        let mut runs = 0u32;
        let mut k = 0;
        while k < part.len() {
            let o = part[k].ordinal;
            let n = part[k..].iter().take_while(|e| e.ordinal == o).count();
            codes.extend_from_slice(&o.to_le_bytes());
            codes.extend_from_slice(&(n as u32).to_le_bytes());
            runs += 1;
            k += n;
        }
        for (j, e) in part.iter().enumerate() {
            if e.code.len() != c.code_bytes || e.raw.len() != c.dim {
                return Err(BlobError::Corrupt("an entry of the wrong width"));
            }
            if j > 0 && (part[j - 1].ordinal, part[j - 1].position) >= (e.ordinal, e.position) {
                return Err(BlobError::Unsorted((i + j) as u64));
            }
            codes.extend_from_slice(e.code);
            codes.extend_from_slice(&e.position.to_le_bytes());
            let r0 = raw.len();
            for x in e.raw {
                raw.extend_from_slice(&x.to_le_bytes());
            }
            let crc = crc32fast::hash(&raw[r0..]);
            raw.extend_from_slice(&crc.to_le_bytes());
        }
        let n = u32::try_from(part.len()).map_err(|_| BlobError::Corrupt("partition size"))?;
        parts.push((id, n, runs, crc32fast::hash(&codes[start..])));
        i = end;
    }
    let raw_offset = codes.len() as u64;
    let mut out = codes;
    out.extend_from_slice(&raw);
    let dir_offset = out.len() as u64;
    let d = directory_bytes(c, entries.len() as u64, &parts, raw_offset);
    Ok(tail(out, d, dir_offset, entries.len() as u64))
}

/// `head` (the blob's bytes before its directory, or none of them when streamed) followed by
/// directory `d` starting at `dir_offset` and the footer.
fn tail(mut head: Vec<u8>, d: Vec<u8>, dir_offset: u64, entries: u64) -> IvfBlob {
    let sha = hex::encode(Sha256::digest(&d));
    head.extend_from_slice(&d);
    head.extend_from_slice(&dir_offset.to_le_bytes());
    head.extend_from_slice(MAGIC);
    IvfBlob {
        bytes: head,
        directory: dir_offset..dir_offset + d.len() as u64,
        directory_sha256: sha,
        entries,
    }
}

/// Writes a table run as the files' blobs are streamed, in two passes: the codes partition
/// by partition ([`partition`](Self::partition)), then the raw vectors in the same order
/// ([`raws`](Self::raws)); [`finish`](Self::finish) gives the directory and footer. Each call
/// returns the bytes that come next in the blob.
pub struct RunWriter {
    c: Codes,
    /// (id, entries, runs, crc)
    parts: Vec<(u32, u32, u32, u32)>,
    entries: u64,
    codes_len: u64,
    raws: u64,
}

impl RunWriter {
    pub fn new(c: Codes) -> RunWriter {
        RunWriter {
            c,
            parts: Vec::new(),
            entries: 0,
            codes_len: 0,
            raws: 0,
        }
    }

    /// The codes of partition `id` (ids ascending): per file, by ascending ordinal, its
    /// entries' bytes (`code ‖ u32 position` each, ascending position).
    pub fn partition(&mut self, id: u32, pieces: &[(u32, &[u8])]) -> Result<Vec<u8>, BlobError> {
        if self.parts.last().is_some_and(|p| p.0 >= id) || self.raws > 0 {
            return Err(BlobError::Unsorted(self.entries));
        }
        let entry_len = self.c.code_bytes + ENTRY_TAIL;
        let body: usize = pieces.iter().map(|p| p.1.len()).sum();
        let mut out = Vec::with_capacity(pieces.len() * RUN_LEN + body);
        let mut n = 0u64;
        for (k, (ordinal, bytes)) in pieces.iter().enumerate() {
            let count = bytes.len() / entry_len;
            if bytes.len() % entry_len != 0 || count == 0 || (k > 0 && pieces[k - 1].0 >= *ordinal)
            {
                return Err(BlobError::Corrupt("a run partition's file entries"));
            }
            out.extend_from_slice(&ordinal.to_le_bytes());
            out.extend_from_slice(&(count as u32).to_le_bytes());
            n += count as u64;
        }
        for p in pieces {
            out.extend_from_slice(p.1);
        }
        if n > 0 {
            let n = u32::try_from(n).map_err(|_| BlobError::Corrupt("partition size"))?;
            self.parts
                .push((id, n, pieces.len() as u32, crc32fast::hash(&out)));
            self.entries += u64::from(n);
        }
        self.codes_len += out.len() as u64;
        Ok(out)
    }

    /// Raw vectors (each `dim` floats and its CRC-32, as a file's blob holds them), next in
    /// entry order; every one is checked against its CRC-32.
    pub fn raws(&mut self, bytes: &[u8]) -> Result<(), BlobError> {
        let len = self.c.dim * 4 + 4;
        if bytes.len() % len != 0 {
            return Err(BlobError::Corrupt("raw vector length"));
        }
        for v in bytes.chunks_exact(len) {
            let (floats, crc) = v.split_at(len - 4);
            if crc32fast::hash(floats) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
                return Err(BlobError::Checksum("raw vector"));
            }
        }
        self.raws += (bytes.len() / len) as u64;
        if self.raws > self.entries {
            return Err(BlobError::Corrupt("more raw vectors than entries"));
        }
        Ok(())
    }

    /// The directory and footer (`directory` relative to the blob's start), once every
    /// entry's raw vector was given.
    pub fn finish(self) -> Result<IvfBlob, BlobError> {
        if self.raws != self.entries {
            return Err(BlobError::Corrupt("fewer raw vectors than entries"));
        }
        let raw_offset = self.codes_len;
        let dir_offset = raw_offset + self.entries * (self.c.dim as u64 * 4 + 4);
        let d = directory_bytes(&self.c, self.entries, &self.parts, raw_offset);
        Ok(tail(Vec::new(), d, dir_offset, self.entries))
    }
}

/// A directory's bytes.
fn directory_bytes(
    c: &Codes,
    entries: u64,
    parts: &[(u32, u32, u32, u32)],
    raw_offset: u64,
) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(DIRECTORY_MAGIC);
    d.extend_from_slice(&[VERSION, c.metric, c.bits, 0]);
    d.extend_from_slice(&(c.dim as u32).to_le_bytes());
    d.extend_from_slice(&(c.code_bytes as u32).to_le_bytes());
    d.extend_from_slice(&entries.to_le_bytes());
    d.extend_from_slice(&c.codebook);
    d.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    for (id, n, runs, crc) in parts {
        for v in [id, n, runs, crc] {
            d.extend_from_slice(&v.to_le_bytes());
        }
    }
    d.extend_from_slice(&raw_offset.to_le_bytes());
    d
}

/// One partition of a blob, as its directory records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub id: u32,
    /// Entries in it.
    pub entries: u32,
    /// File runs heading its codes.
    pub runs: u32,
    /// Index of its first entry in the blob.
    pub first: u64,
    /// Where its bytes start.
    pub offset: u64,
    pub codes_crc32: u32,
}

/// One entry of a partition as [`IvfDirectory::entries`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found<'b> {
    /// Its index in the blob (what [`IvfDirectory::raw_range`] takes).
    pub index: u64,
    pub code: &'b [u8],
    pub ordinal: u32,
    pub position: u32,
}

/// One file's entries in a partition: its ordinal, how many, and where their bytes are in the
/// partition's bytes ([`IvfDirectory::file_runs`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRun {
    pub ordinal: u32,
    pub entries: u32,
    pub bytes: Range<usize>,
}

/// A blob's parsed directory.
#[derive(Clone, Debug, PartialEq)]
pub struct IvfDirectory {
    pub codes: Codes,
    pub entries: u64,
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
        let (metric, bits) = (head[1], head[2]);
        if !matches!(bits, 4 | 8) {
            return Err(BlobError::Corrupt("vector code width"));
        }
        let dim = c.u32()? as usize;
        let code_bytes = c.u32()? as usize;
        let entries = c.u64()?;
        let codebook: [u8; 32] = c.take(32)?.try_into().expect("32 bytes");
        let n = c.u32()? as usize;
        if n > bytes.len() / 16 {
            return Err(BlobError::Corrupt("partition count"));
        }
        let entry_len = (code_bytes + ENTRY_TAIL) as u64;
        let mut partitions = Vec::with_capacity(n);
        let (mut first, mut offset) = (0u64, 0u64);
        for _ in 0..n {
            let (id, count, runs, crc) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
            if partitions.last().is_some_and(|p: &Partition| p.id >= id)
                || count == 0
                || runs == 0
                || runs > count
            {
                return Err(BlobError::Corrupt("partitions out of order"));
            }
            partitions.push(Partition {
                id,
                entries: count,
                runs,
                first,
                offset,
                codes_crc32: crc,
            });
            first += u64::from(count);
            offset += u64::from(runs) * RUN_LEN as u64 + u64::from(count) * entry_len;
        }
        let raw_offset = c.u64()?;
        let d = IvfDirectory {
            codes: Codes {
                metric,
                bits,
                dim,
                code_bytes,
                codebook,
            },
            entries,
            partitions,
            raw_offset,
        };
        // The sections must be exactly what the counts say, ending where the directory starts.
        let raw = entries.checked_mul(d.raw_len());
        if first != entries
            || offset != raw_offset
            || raw.and_then(|r| r.checked_add(raw_offset)) != Some(dir_offset)
        {
            return Err(BlobError::Corrupt("vector partition sections"));
        }
        Ok(d)
    }

    fn raw_len(&self) -> u64 {
        self.codes.dim as u64 * 4 + 4
    }

    /// The partition `id`, when the blob holds any of its vectors.
    pub fn partition(&self, id: u32) -> Option<&Partition> {
        self.partitions
            .binary_search_by_key(&id, |p| p.id)
            .ok()
            .map(|i| &self.partitions[i])
    }

    /// The byte range (relative to the blob) of a partition: its file runs and entries.
    pub fn codes_range(&self, p: &Partition) -> Range<u64> {
        let len = (self.codes.code_bytes + ENTRY_TAIL) as u64;
        p.offset..p.offset + u64::from(p.runs) * RUN_LEN as u64 + u64::from(p.entries) * len
    }

    /// The byte range of entry `i`'s raw vector and its CRC-32.
    pub fn raw_range(&self, i: u64) -> Range<u64> {
        let len = self.raw_len();
        self.raw_offset + i * len..self.raw_offset + (i + 1) * len
    }

    /// The file runs of partition `p` from its bytes (as [`codes_range`](Self::codes_range)
    /// spans them), checked against its CRC-32 and its entry count: each file's ordinal, and
    /// the range of `bytes` its entries take, ordinals ascending.
    pub fn file_runs(&self, p: &Partition, bytes: &[u8]) -> Result<Vec<FileRun>, BlobError> {
        let r = self.codes_range(p);
        if bytes.len() as u64 != r.end - r.start {
            return Err(BlobError::Corrupt("partition length"));
        }
        if crc32fast::hash(bytes) != p.codes_crc32 {
            return Err(BlobError::Checksum("vector partition"));
        }
        let head = p.runs as usize * RUN_LEN;
        let entry_len = self.codes.code_bytes + ENTRY_TAIL;
        let mut runs: Vec<FileRun> = Vec::with_capacity(p.runs as usize);
        let (mut at, mut total) = (head, 0u64);
        for run in bytes[..head].chunks_exact(RUN_LEN) {
            let ordinal = u32::from_le_bytes(run[..4].try_into().expect("4 bytes"));
            let n = u32::from_le_bytes(run[4..].try_into().expect("4 bytes"));
            if runs.last().is_some_and(|l| l.ordinal >= ordinal) || n == 0 {
                return Err(BlobError::Corrupt("partition file runs"));
            }
            total += u64::from(n);
            let end = at.saturating_add((n as usize).saturating_mul(entry_len));
            runs.push(FileRun {
                ordinal,
                entries: n,
                bytes: at..end,
            });
            at = end;
        }
        if total != u64::from(p.entries) || at != bytes.len() {
            return Err(BlobError::Corrupt("partition file runs"));
        }
        Ok(runs)
    }

    /// The entries of partition `p` from its bytes, checked against its CRC-32 and its file
    /// runs against its entry count, in order.
    pub fn entries<'b>(
        &self,
        p: &Partition,
        bytes: &'b [u8],
    ) -> Result<impl Iterator<Item = Found<'b>> + 'b, BlobError> {
        let runs = self.file_runs(p, bytes)?;
        let body = &bytes[p.runs as usize * RUN_LEN..];
        let ordinals = runs.into_iter().map(|r| (r.ordinal, r.entries));
        let (first, code_bytes) = (p.first, self.codes.code_bytes);
        let owners = ordinals
            .into_iter()
            .flat_map(|(o, n)| std::iter::repeat_n(o, n as usize));
        Ok(body
            .chunks_exact(code_bytes + ENTRY_TAIL)
            .zip(owners)
            .enumerate()
            .map(move |(k, (e, ordinal))| Found {
                index: first + k as u64,
                code: &e[..code_bytes],
                ordinal,
                position: u32::from_le_bytes(e[code_bytes..].try_into().expect("4 bytes")),
            }))
    }

    /// A raw vector from the bytes of its [`raw_range`](Self::raw_range), checked against
    /// the CRC-32 they end with.
    pub fn raw(&self, bytes: &[u8]) -> Result<Vec<f32>, BlobError> {
        if bytes.len() as u64 != self.raw_len() {
            return Err(BlobError::Corrupt("raw vector length"));
        }
        let (floats, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(floats) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(BlobError::Checksum("raw vector"));
        }
        Ok(floats
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

    type Row = (u32, u32, u32, Vec<u8>, Vec<f32>);

    fn sample() -> (Vec<Row>, Codes) {
        let c = Codes {
            metric: 0,
            bits: 4,
            dim: 5,
            code_bytes: 3,
            codebook: [7; 32],
        };
        let mut v = vec![];
        for (i, (p, o)) in [(0u32, 0u32), (0, 2), (3, 1), (3, 1), (3, 4), (9, 0)]
            .into_iter()
            .enumerate()
        {
            let code: Vec<u8> = (0..c.code_bytes).map(|d| (i * 7 + d) as u8).collect();
            let raw: Vec<f32> = (0..c.dim).map(|d| i as f32 + d as f32 / 10.0).collect();
            v.push((p, o, 10 * i as u32, code, raw));
        }
        (v, c)
    }

    fn blob() -> (IvfBlob, Vec<Row>) {
        let (v, c) = sample();
        let entries: Vec<Entry> = v
            .iter()
            .map(|(p, o, pos, code, r)| Entry {
                partition: *p,
                ordinal: *o,
                position: *pos,
                code,
                raw: r,
            })
            .collect();
        (write(&c, &entries).unwrap(), v)
    }

    #[test]
    fn round_trips_partition_by_partition() {
        let (b, v) = blob();
        let d = directory_of(&b.bytes, Some(&b.directory_sha256)).unwrap();
        assert_eq!((d.entries, d.codes), (6, sample().1));
        assert_eq!(
            d.partitions
                .iter()
                .map(|p| (p.id, p.entries, p.runs))
                .collect::<Vec<_>>(),
            vec![(0, 2, 2), (3, 3, 2), (9, 1, 1)]
        );
        assert!(d.partition(4).is_none());
        let mut seen = vec![];
        for id in [0u32, 3, 9] {
            let p = *d.partition(id).unwrap();
            let r = d.codes_range(&p);
            for f in d
                .entries(&p, &b.bytes[r.start as usize..r.end as usize])
                .unwrap()
            {
                let rr = d.raw_range(f.index);
                let raw = d.raw(&b.bytes[rr.start as usize..rr.end as usize]).unwrap();
                seen.push((id, f.ordinal, f.position, f.code.to_vec(), raw));
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

    /// A run streamed from per-file blobs (codes partition by partition, then raws) is the
    /// blob [`write`] makes of the same entries with their ordinals.
    #[test]
    fn a_streamed_run_is_the_blob_of_all_its_files_entries() {
        let (v, c) = sample();
        // Two "files": ordinal 0's and ordinal 1's entries, each written as its own blob.
        let per_file: Vec<IvfBlob> = (0..2u32)
            .map(|o| {
                let es: Vec<Entry> = v
                    .iter()
                    .filter(|r| r.1 % 2 == o)
                    .map(|(p, _, pos, code, r)| Entry {
                        partition: *p,
                        ordinal: 0,
                        position: *pos,
                        code,
                        raw: r,
                    })
                    .collect();
                write(&c, &es).unwrap()
            })
            .collect();
        let dirs: Vec<IvfDirectory> = per_file
            .iter()
            .map(|b| directory_of(&b.bytes, None).unwrap())
            .collect();
        let mut w = RunWriter::new(c);
        let mut out = Vec::new();
        let ids = [0u32, 3, 9];
        for id in ids {
            let pieces: Vec<(u32, &[u8])> = dirs
                .iter()
                .zip(&per_file)
                .enumerate()
                .filter_map(|(o, (d, b))| {
                    let p = d.partition(id)?;
                    let r = d.codes_range(p);
                    Some((o as u32, &b.bytes[r.start as usize + 8..r.end as usize]))
                })
                .collect();
            out.extend(w.partition(id, &pieces).unwrap());
        }
        for id in ids {
            for (d, b) in dirs.iter().zip(&per_file) {
                if let Some(p) = d.partition(id) {
                    let a = d.raw_range(p.first).start as usize;
                    let z = d.raw_range(p.first + u64::from(p.entries) - 1).end as usize;
                    w.raws(&b.bytes[a..z]).unwrap();
                    out.extend_from_slice(&b.bytes[a..z]);
                }
            }
        }
        let tail = w.finish().unwrap();
        out.extend(&tail.bytes);
        // The same entries written at once, ordinal = file.
        let es: Vec<Entry> = v
            .iter()
            .map(|(p, o, pos, code, r)| Entry {
                partition: *p,
                ordinal: o % 2,
                position: *pos,
                code,
                raw: r,
            })
            .collect();
        let mut sorted = es;
        sorted.sort_by_key(|e| (e.partition, e.ordinal, e.position));
        let whole = write(&c, &sorted).unwrap();
        assert_eq!(out, whole.bytes);
        assert_eq!(tail.directory, whole.directory);
        assert_eq!(tail.directory_sha256, whole.directory_sha256);
        // Out of order, partial entries, a damaged raw vector or a missing one: refused.
        let mut w = RunWriter::new(c);
        let e = vec![0u8; c.code_bytes + 4];
        assert!(w.partition(1, &[(1, &e[..]), (0, &e[..])]).is_err());
        assert!(w.partition(1, &[(0, &e[1..])]).is_err());
        w.partition(2, &[(0, &e[..])]).unwrap();
        assert!(w.partition(2, &[(0, &e[..])]).is_err());
        assert!(w.raws(&[0u8; 24]).is_err());
        let mut w = RunWriter::new(c);
        w.partition(2, &[(0, &e[..])]).unwrap();
        assert!(w.finish().is_err());
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
                        Ok(es) => es.collect::<Vec<_>>().iter().any(|f| {
                            let rr = dd.raw_range(f.index);
                            dd.raw(&bad[rr.start as usize..rr.end as usize]).is_err()
                        }),
                    }
                }),
            };
            assert!(caught, "byte {i} flipped unnoticed");
        }
        let p = d.partitions[1];
        assert!(d.entries(&p, &[0u8; 3]).is_err());
        assert!(d.raw(&[0u8; 24]).is_err());
        assert!(directory_of(&b.bytes[..10], None).is_err());
        assert!(IvfDirectory::parse(&[0u8; 8], None, 0).is_err());
        // File runs that do not add up, with a matching CRC-32: refused.
        let r = d.codes_range(&p);
        let mut part = b.bytes[r.start as usize..r.end as usize].to_vec();
        part[4..8].copy_from_slice(&9u32.to_le_bytes());
        let forged = Partition {
            codes_crc32: crc32fast::hash(&part),
            ..p
        };
        assert!(d.entries(&forged, &part).is_err());
        // Unsorted or mis-sized entries, or an unknown width, are refused by the writer.
        let raw = [0f32; 2];
        let e = |partition, ordinal, position| Entry {
            partition,
            ordinal,
            position,
            code: &[1, 2],
            raw: &raw,
        };
        let c = Codes {
            metric: 0,
            bits: 8,
            dim: 2,
            code_bytes: 2,
            codebook: [0; 32],
        };
        assert!(write(&c, &[e(1, 0, 0), e(0, 0, 5)]).is_err());
        assert!(write(&c, &[e(1, 0, 4), e(1, 0, 4)]).is_err());
        assert!(write(&c, &[e(1, 1, 4), e(1, 0, 5)]).is_err());
        assert!(write(&Codes { dim: 3, ..c }, &[e(1, 0, 4)]).is_err());
        assert!(write(&Codes { bits: 5, ..c }, &[e(1, 0, 4)]).is_err());
        assert_eq!(write(&c, &[]).unwrap().entries, 0);
        assert_eq!(write(&c, &[e(1, 0, 4), e(1, 3, 0)]).unwrap().entries, 2);
    }
}
