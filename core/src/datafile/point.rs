//! A few rows of a flat column chunk, picked out of its pages without decoding the rest:
//! the row's definition level and value (PLAIN, or an index into the dictionary page) are
//! found by walking the page's RLE/bit-packed runs, and the rows are handed to parquet's own
//! array readers as one small PLAIN data page ([`plain_page`]), so every logical type
//! converts exactly as the full decoder would.
//!
//! Only what this module is sure of is taken: flat columns (no repetition, at most one
//! definition level), physical types INT32/INT64/INT96/FLOAT/DOUBLE/BYTE_ARRAY/
//! FIXED_LEN_BYTE_ARRAY, data pages PLAIN or dictionary-encoded, dictionaries PLAIN.
//! Anything else — or any page that does not parse — is `None`, and the caller decodes the
//! column chunk the general way (which reports damage as it always has). Every read is
//! bounds-checked; nothing here panics or allocates beyond the rows asked for and the
//! page's own size.

use bytes::Bytes;
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;

/// How a value of the column is laid out in a PLAIN stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Width {
    Fixed(usize),
    /// 4-byte little-endian length, then the bytes.
    Prefixed,
}

impl Width {
    pub(crate) fn of(t: PhysicalType, type_length: i32) -> Option<Width> {
        Some(match t {
            PhysicalType::INT32 | PhysicalType::FLOAT => Width::Fixed(4),
            PhysicalType::INT64 | PhysicalType::DOUBLE => Width::Fixed(8),
            PhysicalType::INT96 => Width::Fixed(12),
            PhysicalType::FIXED_LEN_BYTE_ARRAY if type_length > 0 => {
                Width::Fixed(type_length as usize)
            }
            PhysicalType::BYTE_ARRAY => Width::Prefixed,
            _ => return None,
        })
    }
}

/// Byte offsets of the values of a PLAIN stream (a dictionary page), `count` values: empty
/// for fixed-width values (value `i` is at `i × width`), checked to fit either way.
pub(crate) fn plain_offsets(buf: &[u8], count: usize, w: Width) -> Option<Vec<u32>> {
    if buf.len() > u32::MAX as usize {
        return None;
    }
    match w {
        Width::Fixed(n) => {
            if count.checked_mul(n)? > buf.len() {
                return None;
            }
            Some(Vec::new())
        }
        Width::Prefixed => {
            // Every value takes at least 4 bytes: a count beyond that is damage.
            if count > buf.len() / 4 {
                return None;
            }
            let mut out = Vec::with_capacity(count);
            let mut at = 0usize;
            for _ in 0..count {
                out.push(at as u32);
                let len = u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?) as usize;
                at = at.checked_add(4)?.checked_add(len)?;
                if at > buf.len() {
                    return None;
                }
            }
            Some(out)
        }
    }
}

/// The PLAIN bytes of the value starting at `at` (its length prefix included).
fn value_at(buf: &[u8], at: usize, w: Width) -> Option<&[u8]> {
    match w {
        Width::Fixed(n) => buf.get(at..at.checked_add(n)?),
        Width::Prefixed => {
            let len = u32::from_le_bytes(buf.get(at..at.checked_add(4)?)?.try_into().ok()?);
            buf.get(at..at.checked_add(4)?.checked_add(len as usize)?)
        }
    }
}

/// Parquet's RLE / bit-packed hybrid, read forward (values up to 32 bits).
struct Hybrid<'a> {
    buf: &'a [u8],
    pos: usize,
    width: u32,
    /// Values left in the current run.
    left: usize,
    /// An RLE run's value, or `None` in a bit-packed run.
    repeated: Option<u32>,
    /// A bit-packed run: its first byte and the index of the next value in it.
    packed_start: usize,
    packed_next: usize,
}

impl<'a> Hybrid<'a> {
    fn new(buf: &'a [u8], width: u32) -> Option<Hybrid<'a>> {
        (width <= 32).then_some(Hybrid {
            buf,
            pos: 0,
            width,
            left: 0,
            repeated: None,
            packed_start: 0,
            packed_next: 0,
        })
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// Starts the next run.
    fn run(&mut self) -> Option<()> {
        let h = self.varint()?;
        let count = usize::try_from(h >> 1).ok()?;
        if h & 1 == 1 {
            let values = count.checked_mul(8)?;
            let bytes = count.checked_mul(self.width as usize)?;
            if bytes > self.buf.len() - self.pos || values == 0 {
                return None;
            }
            self.packed_start = self.pos;
            self.packed_next = 0;
            self.pos += bytes;
            self.left = values;
            self.repeated = None;
        } else {
            let n = (self.width as usize).div_ceil(8);
            let mut v = 0u32;
            for (i, b) in self
                .buf
                .get(self.pos..self.pos.checked_add(n)?)?
                .iter()
                .enumerate()
            {
                v |= u32::from(*b) << (8 * i);
            }
            self.pos += n;
            if count == 0 {
                return None;
            }
            self.left = count;
            self.repeated = Some(v);
        }
        Some(())
    }

    /// Skips `n` values.
    fn skip(&mut self, mut n: usize) -> Option<()> {
        while n > 0 {
            if self.left == 0 {
                self.run()?;
            }
            let k = n.min(self.left);
            self.left -= k;
            self.packed_next += k;
            n -= k;
        }
        Some(())
    }

    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            self.run()?;
        }
        self.left -= 1;
        if let Some(v) = self.repeated {
            return Some(v);
        }
        let w = self.width as usize;
        let bit = self.packed_next * w;
        self.packed_next += 1;
        let mut v = 0u64;
        let first = self.packed_start + bit / 8;
        // A value spans at most 5 bytes (32 bits at any bit offset).
        for i in 0..(bit % 8 + w).div_ceil(8) {
            v |= u64::from(*self.buf.get(first + i)?) << (8 * i);
        }
        Some(((v >> (bit % 8)) & ((1u64 << w) - 1)) as u32)
    }
}

/// The column's dictionary, decompressed: `count` values, at `offsets` when they are
/// length-prefixed.
pub(crate) struct Dictionary<'a> {
    pub buf: &'a [u8],
    pub count: usize,
    pub offsets: &'a [u32],
}

impl Dictionary<'_> {
    fn value(&self, i: usize, w: Width) -> Option<&[u8]> {
        if i >= self.count {
            return None;
        }
        let at = match w {
            Width::Fixed(n) => i.checked_mul(n)?,
            Width::Prefixed => *self.offsets.get(i)? as usize,
        };
        value_at(self.buf, at, w)
    }
}

/// Appends to `out` the PLAIN value (or `None` for NULL) at each of `rows` (ascending, within
/// the page's rows) of one decoded data page. `max_def` is 0 or 1.
pub(crate) fn pick(
    page: &Page,
    rows: &[usize],
    max_def: i16,
    w: Width,
    dict: Option<&Dictionary>,
    out: &mut Vec<Option<Vec<u8>>>,
) -> Option<()> {
    let (buf, num_values, encoding, def_bytes): (&Bytes, usize, Encoding, Option<usize>) =
        match page {
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding,
                ..
            } => {
                if max_def > 0 && *def_level_encoding != Encoding::RLE {
                    return None;
                }
                (buf, *num_values as usize, *encoding, None)
            }
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            } => {
                if *rep_levels_byte_len != 0 {
                    return None;
                }
                (
                    buf,
                    *num_values as usize,
                    *encoding,
                    Some(*def_levels_byte_len as usize),
                )
            }
            _ => return None,
        };
    if rows.last().is_some_and(|&r| r >= num_values) {
        return None;
    }
    // Definition levels (v1: length-prefixed; v2: their stated length), then values.
    let (levels, values): (Option<&[u8]>, &[u8]) = match (max_def, def_bytes) {
        (0, Some(0)) | (0, None) => (None, &buf[..]),
        (0, Some(_)) => return None,
        (_, None) => {
            let n = u32::from_le_bytes(buf.get(0..4)?.try_into().ok()?) as usize;
            (Some(buf.get(4..4usize.checked_add(n)?)?), buf.get(4 + n..)?)
        }
        (_, Some(n)) => (Some(buf.get(..n)?), buf.get(n..)?),
    };
    // For each row: NULL, or the ordinal of its value among the page's values.
    let mut ordinals: Vec<Option<usize>> = Vec::with_capacity(rows.len());
    match levels {
        None => ordinals.extend(rows.iter().map(|&r| Some(r))),
        Some(l) => {
            let mut def = Hybrid::new(l, 1)?;
            let (mut at, mut present) = (0usize, 0usize);
            for &r in rows {
                while at < r {
                    present += def.next()? as usize;
                    at += 1;
                }
                let d = def.next()?;
                at += 1;
                ordinals.push((d == 1).then_some(present));
                present += d as usize;
            }
        }
    }
    match (encoding, dict) {
        (Encoding::PLAIN, _) => {
            // Walk the stream to each ordinal in turn.
            let (mut ordinal, mut at) = (0usize, 0usize);
            for o in ordinals {
                let Some(o) = o else {
                    out.push(None);
                    continue;
                };
                match w {
                    Width::Fixed(n) => at = o.checked_mul(n)?,
                    Width::Prefixed => {
                        while ordinal < o {
                            let len = u32::from_le_bytes(
                                values.get(at..at.checked_add(4)?)?.try_into().ok()?,
                            );
                            at = at.checked_add(4)?.checked_add(len as usize)?;
                            ordinal += 1;
                        }
                    }
                }
                out.push(Some(value_at(values, at, w)?.to_vec()));
            }
        }
        (Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY, Some(d)) => {
            let width = u32::from(*values.first()?);
            let mut ix = Hybrid::new(values.get(1..)?, width)?;
            let mut read = 0usize;
            for o in ordinals {
                let Some(o) = o else {
                    out.push(None);
                    continue;
                };
                ix.skip(o.checked_sub(read)?)?;
                let i = ix.next()? as usize;
                read = o + 1;
                out.push(Some(d.value(i, w)?.to_vec()));
            }
        }
        _ => return None,
    }
    Some(())
}

/// One uncompressed PLAIN data page (v1) holding `values` in order — the rows picked from a
/// column chunk, for parquet's array reader to decode into the column's Arrow type.
pub(crate) fn plain_page(values: &[Option<Vec<u8>>], max_def: i16) -> Page {
    let mut buf = Vec::new();
    if max_def > 0 {
        // Definition levels, bit width 1, as bit-packed groups of 8.
        let groups = values.len().div_ceil(8);
        let mut levels = Vec::with_capacity(groups + 10);
        let mut h = ((groups as u64) << 1) | 1;
        loop {
            let b = (h & 0x7f) as u8;
            h >>= 7;
            if h == 0 {
                levels.push(b);
                break;
            }
            levels.push(b | 0x80);
        }
        let mut bits = vec![0u8; groups];
        for (i, v) in values.iter().enumerate() {
            if v.is_some() {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        levels.extend_from_slice(&bits);
        buf.extend_from_slice(&(levels.len() as u32).to_le_bytes());
        buf.extend_from_slice(&levels);
    }
    for v in values.iter().flatten() {
        buf.extend_from_slice(v);
    }
    Page::DataPage {
        buf: Bytes::from(buf),
        num_values: values.len() as u32,
        encoding: Encoding::PLAIN,
        def_level_encoding: Encoding::RLE,
        rep_level_encoding: Encoding::RLE,
        statistics: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_reads_rle_and_bit_packed_runs_and_refuses_damage() {
        // RLE run of 3 × 5 (width 3), then one bit-packed group: 0..8 (width 3).
        let mut buf = vec![3 << 1, 5];
        buf.push((1 << 1) | 1);
        let mut bits = 0u32;
        for v in 0..8u32 {
            bits |= v << (3 * v);
        }
        buf.extend_from_slice(&bits.to_le_bytes()[..3]);
        let mut h = Hybrid::new(&buf, 3).unwrap();
        let got: Vec<u32> = (0..11).map(|_| h.next().unwrap()).collect();
        assert_eq!(got, vec![5, 5, 5, 0, 1, 2, 3, 4, 5, 6, 7]);
        assert!(h.next().is_none());
        let mut h = Hybrid::new(&buf, 3).unwrap();
        h.skip(6).unwrap();
        assert_eq!(h.next(), Some(3));
        // Truncated anywhere: None, never a panic.
        for cut in 0..buf.len() {
            let mut h = Hybrid::new(&buf[..cut], 3).unwrap();
            let _ = (0..11).map(|_| h.next()).collect::<Vec<_>>();
        }
        assert!(Hybrid::new(&buf, 33).is_none());
    }

    #[test]
    fn plain_offsets_refuse_counts_the_bytes_cannot_hold() {
        let mut b = Vec::new();
        for s in ["a", "bcd", ""] {
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
        assert_eq!(plain_offsets(&b, 3, Width::Prefixed), Some(vec![0, 5, 12]));
        assert_eq!(plain_offsets(&b, 4, Width::Prefixed), None);
        assert_eq!(plain_offsets(&b[..10], 3, Width::Prefixed), None);
        assert_eq!(plain_offsets(&[0; 16], 2, Width::Fixed(8)), Some(vec![]));
        assert_eq!(plain_offsets(&[0; 16], 3, Width::Fixed(8)), None);
        assert_eq!(plain_offsets(&[0; 16], usize::MAX, Width::Fixed(8)), None);
    }
}
