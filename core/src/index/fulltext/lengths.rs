//! A run's **length table** (directory flag bit 6; RFC 0002, decision 88): the document
//! length of every row of a table run, in row order, for the terms held by at least `1/α`
//! of its documents — their blocks carry no lengths of their own (the same values for
//! "the", "of" and "and" would otherwise be stored once per such term).
//!
//! ```text
//! LengthTable = Group*                    (⌈rows / 128⌉ of them, row order)
//! Group       = ⌈count·width/8⌉ bytes: (length − chunk min), LSB-first, at the chunk's width
//!               u32 crc32                 (of the group's packed bytes)
//! Directory   … u8 alpha  varint table_offset  varint table_length
//!               (varint min  u8 width)*⌈rows / 8192⌉      (one per chunk of 64 groups)
//! ```
//!
//! A group holds 128 rows (the last fewer); a chunk 64 groups, all at one width, so a group's
//! place follows from the chunk widths alone and a reader of a block reads just the groups
//! its rows fall in (a block of a term in `1/α` of the documents spans at most about `α`).
//! Every group is checked by its CRC-32 before it is decoded; the chunk facts ride in the
//! directory, which the manifest's SHA-256 covers.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{pack_at, unpack_bits};
use crate::index::ordered::{get_bytes, get_varint, put_varint, BlobError};

/// Rows a group holds.
pub const GROUP_ROWS: usize = 128;
/// Groups a chunk holds (one width and minimum each).
pub const CHUNK_GROUPS: usize = 64;
const CHUNK_ROWS: u64 = (GROUP_ROWS * CHUNK_GROUPS) as u64;

/// The `α` a run writer uses: terms in at least an eighth of the documents take their lengths
/// from the table (decision 88).
pub const DEFAULT_ALPHA: u8 = 8;

/// Whether a term of `df` documents among `docs` takes its lengths from a table of `alpha`.
#[inline]
pub fn shared(alpha: u8, df: u64, docs: u64) -> bool {
    alpha > 0 && df.saturating_mul(u64::from(alpha)) >= docs
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunk {
    /// Of its first group, from the table's start.
    start: u64,
    min: u32,
    width: u8,
}

/// Where a run's length table is and how its groups are laid out (parsed from the directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LengthTable {
    /// Terms with `df · alpha ≥ docs` take their lengths from the table ([`shared`]).
    pub alpha: u8,
    /// Within the blob.
    pub offset: u64,
    pub length: u64,
    rows: u64,
    chunks: Vec<Chunk>,
}

/// The bytes of a group of `count` rows at `width` bits.
fn group_bytes(count: u64, width: u8) -> u64 {
    (count * u64::from(width)).div_ceil(8) + 4
}

impl LengthTable {
    /// The rows the table covers (the run's).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Groups in the table.
    pub fn groups(&self) -> usize {
        self.rows.div_ceil(GROUP_ROWS as u64) as usize
    }

    /// The group holding `row`.
    #[inline]
    pub fn group_of(row: u32) -> usize {
        row as usize / GROUP_ROWS
    }

    /// Rows of group `g`.
    fn count(&self, g: usize) -> u64 {
        (self.rows - (g * GROUP_ROWS) as u64).min(GROUP_ROWS as u64)
    }

    /// Group `g`'s bytes within the blob (`None`: no such group).
    pub fn group_range(&self, g: usize) -> Option<Range<u64>> {
        if g >= self.groups() {
            return None;
        }
        let c = self.chunks[g / CHUNK_GROUPS];
        let full = group_bytes(GROUP_ROWS as u64, c.width);
        let start = self.offset + c.start + (g % CHUNK_GROUPS) as u64 * full;
        Some(start..start + group_bytes(self.count(g), c.width))
    }

    /// The bytes of groups `gs` (consecutive) within the blob.
    pub fn groups_range(&self, gs: Range<usize>) -> Option<Range<u64>> {
        let a = self.group_range(gs.start)?;
        let z = self.group_range(gs.end.checked_sub(1)?)?;
        Some(a.start..z.end)
    }

    /// Decodes group `g` from its bytes (`bytes`: [`LengthTable::group_range`]'s), checking
    /// their CRC-32 first.
    pub fn decode_group(&self, g: usize, bytes: &[u8]) -> Result<Group, BlobError> {
        let r = self
            .group_range(g)
            .ok_or(BlobError::Corrupt("no such length group"))?;
        if bytes.len() as u64 != r.end - r.start {
            return Err(BlobError::Corrupt("length group of another length"));
        }
        let (packed, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(packed) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(BlobError::Checksum("full-text length group"));
        }
        let c = self.chunks[g / CHUNK_GROUPS];
        let n = self.count(g) as usize;
        let mut vals = [0u32; GROUP_ROWS];
        unpack_bits(packed, &mut 0, u32::from(c.width), &mut vals[..n])?;
        let mut over = false;
        for v in vals[..n].iter_mut() {
            let (x, o) = v.overflowing_add(c.min);
            *v = x;
            over |= o;
        }
        if over {
            return Err(BlobError::Corrupt("length out of range"));
        }
        Ok(Group(vals[..n].into()))
    }

    /// Decodes the whole table from the blob's bytes (`blob`: from its first byte), checking
    /// every group: each row's length (a merge or carry reading a run whole).
    pub fn read_all(&self, blob: &[u8]) -> Result<Vec<u32>, BlobError> {
        let end = self
            .offset
            .checked_add(self.length)
            .ok_or(BlobError::Corrupt("overflow"))?;
        if end > blob.len() as u64 {
            return Err(BlobError::Corrupt("length table outside the blob"));
        }
        self.decode_all(&blob[self.offset as usize..end as usize])
    }

    /// Decodes the whole table from its bytes (`table`: the blob's `offset..offset + length`),
    /// checking every group, into [`RowTable`]: one byte a row when every chunk's lengths lie
    /// within 255 of its smallest (two within 65,535, else four) — what a reader keeps
    /// cached.
    pub fn decode_rows(&self, table: &[u8]) -> Result<RowTable, BlobError> {
        let all = self.decode_all(table)?;
        let mins: Box<[u32]> = self.chunks.iter().map(|c| c.min).collect();
        let widest = self.chunks.iter().map(|c| c.width).max().unwrap_or(0);
        let chunk = |r: usize| mins[r / CHUNK_ROWS as usize];
        Ok(match widest {
            0..=8 => RowTable::Narrow {
                vals: all
                    .iter()
                    .enumerate()
                    .map(|(r, l)| (l - chunk(r)) as u8)
                    .collect(),
                mins,
            },
            9..=16 => RowTable::Half {
                vals: all
                    .iter()
                    .enumerate()
                    .map(|(r, l)| (l - chunk(r)) as u16)
                    .collect(),
                mins,
            },
            _ => RowTable::Wide(all.into()),
        })
    }

    /// Decodes the whole table from its bytes (`table`: the blob's `offset..offset + length`),
    /// checking every group: each row's length.
    pub fn decode_all(&self, table: &[u8]) -> Result<Vec<u32>, BlobError> {
        if table.len() as u64 != self.length {
            return Err(BlobError::Corrupt("length table of another length"));
        }
        // `rows` is bounded by the table's bytes at parse (four a group at least).
        let mut out = Vec::with_capacity(self.rows as usize);
        for g in 0..self.groups() {
            let r = self.group_range(g).expect("within the table");
            let (a, z) = (
                (r.start - self.offset) as usize,
                (r.end - self.offset) as usize,
            );
            out.extend_from_slice(&self.decode_group(g, &table[a..z])?.0);
        }
        Ok(out)
    }

    /// Appends the table's facts to a directory.
    pub fn write_facts(&self, out: &mut Vec<u8>) {
        out.push(self.alpha);
        put_varint(out, self.offset);
        put_varint(out, self.length);
        for c in &self.chunks {
            put_varint(out, u64::from(c.min));
            out.push(c.width);
        }
    }

    /// Reads a table's facts at `b[*pos..]` for a run of `rows` rows in a `blob_length`-byte
    /// blob. What it allocates is bounded by the bytes (two a chunk at least).
    pub fn read_facts(
        b: &[u8],
        pos: &mut usize,
        rows: u64,
        blob_length: u64,
    ) -> Result<LengthTable, BlobError> {
        let alpha = *get_bytes(b, pos, 1)?.first().expect("1 byte");
        let offset = get_varint(b, pos)?;
        let length = get_varint(b, pos)?;
        let n = rows.div_ceil(CHUNK_ROWS);
        if alpha == 0
            || rows > u64::from(u32::MAX)
            || n > (b.len().saturating_sub(*pos) / 2) as u64
            || offset.checked_add(length).is_none_or(|e| e > blob_length)
        {
            return Err(BlobError::Corrupt("length table out of range"));
        }
        let mut chunks = Vec::with_capacity(n as usize);
        let mut at = 0u64;
        for c in 0..n {
            let min = u32::try_from(get_varint(b, pos)?)
                .map_err(|_| BlobError::Corrupt("length out of range"))?;
            let width = *get_bytes(b, pos, 1)?.first().expect("1 byte");
            if width > 32 {
                return Err(BlobError::Corrupt("bit width over 32"));
            }
            chunks.push(Chunk {
                start: at,
                min,
                width,
            });
            let first = c * CHUNK_ROWS;
            let last = (first + CHUNK_ROWS).min(rows);
            let (full, rest) = ((last - first) / GROUP_ROWS as u64, (last - first) % 128);
            at += full * group_bytes(GROUP_ROWS as u64, width);
            if rest > 0 {
                at += group_bytes(rest, width);
            }
        }
        if at != length {
            return Err(BlobError::Corrupt("length table disagrees with its chunks"));
        }
        Ok(LengthTable {
            alpha,
            offset,
            length,
            rows,
            chunks,
        })
    }
}

/// Where a decoder finds the lengths of rows whose blocks carry none (terms that take them
/// from the run's [`LengthTable`]).
pub trait LengthSource {
    /// Writes the length of each of `rows` to `out` (as long); an error when a row's length is
    /// not at hand (a row past the table, or a group not read).
    fn lengths_of(&self, rows: &[u32], out: &mut [u32]) -> Result<(), BlobError>;
}

/// Every row's length, by row (a table read whole: [`LengthTable::read_all`]); an empty one
/// for blobs without a table.
impl LengthSource for [u32] {
    fn lengths_of(&self, rows: &[u32], out: &mut [u32]) -> Result<(), BlobError> {
        for (o, r) in out.iter_mut().zip(rows) {
            *o = *self
                .get(*r as usize)
                .ok_or(BlobError::Corrupt("row past the run's length table"))?;
        }
        Ok(())
    }
}

/// A whole table's lengths decoded ([`LengthTable::decode_rows`]): each row's length less
/// its chunk's smallest, in as few bytes as the widest chunk needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowTable {
    Narrow { mins: Box<[u32]>, vals: Box<[u8]> },
    Half { mins: Box<[u32]>, vals: Box<[u16]> },
    Wide(Box<[u32]>),
}

impl RowTable {
    /// Row `row`'s length (`None`: past the table).
    #[inline]
    pub fn get(&self, row: u32) -> Option<u32> {
        let r = row as usize;
        let c = r / CHUNK_ROWS as usize;
        match self {
            // A row within `vals` is within a chunk of `mins` (both the table's rows).
            RowTable::Narrow { mins, vals } => {
                let v = *vals.get(r)?;
                Some(mins.get(c)? + u32::from(v))
            }
            RowTable::Half { mins, vals } => {
                let v = *vals.get(r)?;
                Some(mins.get(c)? + u32::from(v))
            }
            RowTable::Wide(v) => v.get(r).copied(),
        }
    }

    /// The bytes it holds in memory (a cache's account).
    pub fn bytes(&self) -> u64 {
        32 + match self {
            RowTable::Narrow { mins, vals } => 4 * mins.len() + vals.len(),
            RowTable::Half { mins, vals } => 4 * mins.len() + 2 * vals.len(),
            RowTable::Wide(v) => 4 * v.len(),
        } as u64
    }
}

impl LengthSource for RowTable {
    fn lengths_of(&self, rows: &[u32], out: &mut [u32]) -> Result<(), BlobError> {
        for (o, r) in out.iter_mut().zip(rows) {
            *o = self
                .get(*r)
                .ok_or(BlobError::Corrupt("row past the run's length table"))?;
        }
        Ok(())
    }
}

/// One group's lengths, decoded and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group(pub Box<[u32]>);

impl Group {
    /// The bytes it holds in memory (a cache's account).
    pub fn bytes(&self) -> u64 {
        4 * self.0.len() as u64 + 32
    }
}

/// Every row's length as a run writer learns them from its terms: two bytes a row, the rare
/// length past `u16::MAX - 1` kept aside.
#[derive(Default)]
pub struct RowLengths {
    short: Vec<u16>,
    long: BTreeMap<u32, u32>,
}

impl RowLengths {
    /// Records `len` as `row`'s length (every term holding the row gives the same).
    pub fn set(&mut self, row: u32, len: u32) {
        let r = row as usize;
        if self.short.len() <= r {
            self.short.resize(r + 1, 0);
        }
        if len >= u32::from(u16::MAX) {
            self.short[r] = u16::MAX;
            self.long.insert(row, len);
        } else {
            self.short[r] = len as u16;
        }
    }

    /// `row`'s length (0 for a row no term held).
    pub fn get(&self, row: u32) -> u32 {
        match self.short.get(row as usize) {
            Some(&u16::MAX) => self.long.get(&row).copied().unwrap_or(0),
            Some(&v) => u32::from(v),
            None => 0,
        }
    }

    /// Appends the table of `rows` rows to `out`, whose first byte is at blob offset `base`;
    /// its facts, for the directory.
    pub fn write(&self, alpha: u8, rows: u64, base: u64, out: &mut Vec<u8>) -> LengthTable {
        let start = out.len();
        let mut chunks = Vec::with_capacity(rows.div_ceil(CHUNK_ROWS) as usize);
        let mut vals = Vec::with_capacity(GROUP_ROWS);
        let mut c0 = 0u64;
        while c0 < rows {
            let c1 = (c0 + CHUNK_ROWS).min(rows);
            let (mut min, mut max) = (u32::MAX, 0u32);
            for r in c0..c1 {
                let l = self.get(r as u32);
                min = min.min(l);
                max = max.max(l);
            }
            let width = (32 - (max - min).leading_zeros()) as u8;
            chunks.push(Chunk {
                start: (out.len() - start) as u64,
                min,
                width,
            });
            let mut g0 = c0;
            while g0 < c1 {
                let g1 = (g0 + GROUP_ROWS as u64).min(c1);
                vals.clear();
                vals.extend((g0..g1).map(|r| self.get(r as u32) - min));
                let p0 = out.len();
                pack_at(&vals, u32::from(width), out);
                let crc = crc32fast::hash(&out[p0..]);
                out.extend_from_slice(&crc.to_le_bytes());
                g0 = g1;
            }
            c0 = c1;
        }
        LengthTable {
            alpha,
            offset: base + start as u64,
            length: (out.len() - start) as u64,
            rows,
            chunks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(lens: &[u32], alpha: u8) -> (Vec<u8>, LengthTable) {
        let mut w = RowLengths::default();
        for (r, l) in lens.iter().enumerate() {
            w.set(r as u32, *l);
        }
        let mut out = b"XXXX".to_vec();
        let t = w.write(alpha, lens.len() as u64, 0, &mut out);
        (out, t)
    }

    fn facts_round_trip(t: &LengthTable, blob_length: u64) -> LengthTable {
        let mut f = Vec::new();
        t.write_facts(&mut f);
        let mut pos = 0;
        let back = LengthTable::read_facts(&f, &mut pos, t.rows, blob_length).unwrap();
        assert_eq!(pos, f.len());
        back
    }

    /// Every row's length comes back, whole and group by group, through the directory's
    /// facts — across chunk boundaries, a short last group, lengths of every width (one
    /// chunk of a long document among short ones) and lengths past `u16`.
    #[test]
    fn tables_round_trip_by_group_and_whole() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for rows in [0usize, 1, 127, 128, 129, 8191, 8192, 8193, 20_000] {
            let mut lens: Vec<u32> = (0..rows).map(|_| 20 + (next() % 61) as u32).collect();
            if rows > 9000 {
                lens[8500] = 1 << 20; // one wide chunk
                lens[9000] = u32::from(u16::MAX); // the marker value itself
                lens[100] = 0;
            }
            let (blob, t) = table(&lens, 8);
            let t = facts_round_trip(&t, blob.len() as u64);
            assert_eq!(t.read_all(&blob).unwrap(), lens, "{rows} rows");
            // Decoded compactly: one byte a row for 20–80, four past u16 within a chunk.
            let compact = t
                .decode_rows(&blob[t.offset as usize..(t.offset + t.length) as usize])
                .unwrap();
            assert_eq!(
                matches!(compact, RowTable::Wide(_)),
                rows > 9000,
                "{rows} rows: {compact:?}"
            );
            let back: Vec<u32> = (0..rows as u32).map(|r| compact.get(r).unwrap()).collect();
            assert_eq!(back, lens);
            assert!(compact.get(rows as u32).is_none());
            assert_eq!(t.groups(), rows.div_ceil(GROUP_ROWS));
            for g in 0..t.groups() {
                let r = t.group_range(g).unwrap();
                let got = t
                    .decode_group(g, &blob[r.start as usize..r.end as usize])
                    .unwrap();
                let lo = g * GROUP_ROWS;
                assert_eq!(&got.0[..], &lens[lo..(lo + GROUP_ROWS).min(rows)]);
            }
            assert!(t.group_range(t.groups()).is_none());
            if rows > 0 {
                let all = t.groups_range(0..t.groups()).unwrap();
                assert_eq!(all, t.offset..t.offset + t.length);
            }
        }
        // Lengths of 20–2,000 decode compactly in two bytes a row.
        let lens: Vec<u32> = (0..10_000).map(|r| 20 + r % 1981).collect();
        let (blob, t) = table(&lens, 8);
        let compact = t.decode_rows(&blob[4..]).unwrap();
        assert!(matches!(compact, RowTable::Half { .. }));
        assert_eq!(
            (0..10_000)
                .map(|r| compact.get(r).unwrap())
                .collect::<Vec<_>>(),
            lens
        );
        // Narrow chunks cost their width: 20–80 in 6 bits a row, plus a CRC a group.
        let lens: Vec<u32> = (0..8192).map(|r| 20 + r % 61).collect();
        let (_, t) = table(&lens, 8);
        assert_eq!(t.length, 64 * (6 * 16 + 4));
    }

    /// A damaged group, a group of another length and facts that disagree with the table are
    /// refused, never decoded or allocated for.
    #[test]
    fn bad_tables_are_refused() {
        let lens: Vec<u32> = (0..1000).map(|r| 10 + r % 50).collect();
        let (blob, t) = table(&lens, 4);
        let r = t.group_range(3).unwrap();
        let mut bad = blob[r.start as usize..r.end as usize].to_vec();
        bad[0] ^= 1;
        assert!(matches!(
            t.decode_group(3, &bad),
            Err(BlobError::Checksum(_))
        ));
        assert!(t.decode_group(3, &bad[1..]).is_err());
        assert!(t.decode_group(99, &bad).is_err());
        let mut whole = blob.clone();
        whole[r.start as usize] ^= 1;
        assert!(t.read_all(&whole).is_err());
        assert!(t.read_all(&blob[..blob.len() - 1]).is_err());

        let mut f = Vec::new();
        t.write_facts(&mut f);
        let parse = |f: &[u8], rows: u64, len: u64| LengthTable::read_facts(f, &mut 0, rows, len);
        assert!(parse(&f, 1000, blob.len() as u64).is_ok());
        // Rows the chunks do not add up to, a table past the blob, no alpha, truncation,
        // a width over 32, and rows no directory could hold chunks for.
        assert!(parse(&f, 900, blob.len() as u64).is_err());
        assert!(parse(&f, 1000, blob.len() as u64 - 1).is_err());
        let mut g = f.clone();
        g[0] = 0;
        assert!(parse(&g, 1000, blob.len() as u64).is_err());
        for cut in 0..f.len() {
            assert!(parse(&f[..cut], 1000, blob.len() as u64).is_err());
        }
        let mut g = f.clone();
        *g.last_mut().unwrap() = 33;
        assert!(parse(&g, 1000, blob.len() as u64).is_err());
        assert!(parse(&f, u64::from(u32::MAX), u64::MAX).is_err());
        assert!(parse(&f, u64::MAX, u64::MAX).is_err());
    }

    #[test]
    fn shared_terms_are_those_in_one_alpha_th_of_the_documents() {
        assert!(shared(8, 125, 1000));
        assert!(!shared(8, 124, 1000));
        assert!(shared(1, 1000, 1000));
        assert!(!shared(0, 1000, 1000));
        assert!(!shared(2, 0, 1));
        assert!(shared(255, u64::MAX, u64::MAX));
    }
}
