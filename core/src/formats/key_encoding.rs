//! Canonical, order-preserving key encoding.
//!
//! Every index kind that sorts stores keys in this encoding, natively and in wasm, so the
//! bytes are a contract: `docs/key-encoding.md` specifies them and
//! `core/tests/golden/key-encoding.txt` pins them with golden vectors.
//!
//! The contract, for a [`KeySchema`] and two tuples `x`, `y` of that schema:
//! `encode(x) < encode(y)` (unsigned bytewise) **iff** `x < y` under the declared per-column
//! order (SQL order of the type, reversed for DESC, NULL placed FIRST/LAST independently of
//! direction). Every column component is *prefix-free* (no complete component is a prefix of
//! another), so tuples frame unambiguously and complementing a component reverses its order.
//!
//! Failure modes are typed ([`KeyError`]); no error message ever contains an indexed value.

use crate::values::*;

/// Flag byte of a NULL component under NULLS FIRST.
pub const FLAG_NULL_FIRST: u8 = 0x00;
/// Flag byte of a present (non-NULL) component.
pub const FLAG_PRESENT: u8 = 0x01;
/// Flag byte of a NULL component under NULLS LAST.
pub const FLAG_NULL_LAST: u8 = 0x02;

/// Bits of the one canonical NaN (positive quiet NaN) every NaN collapses to.
pub const CANONICAL_NAN_BITS: u64 = 0x7FF8_0000_0000_0000;

impl KeySchema {
    /// Encodes a full key (one value per column).
    pub fn encode(&self, values: &[Value]) -> Result<Vec<u8>, KeyError> {
        if values.len() != self.columns.len() {
            return Err(KeyError::Arity {
                expected: self.columns.len(),
                found: values.len(),
            });
        }
        self.encode_prefix(values)
    }

    /// [`KeySchema::encode`] appended to `out` (builds encode millions of keys into one
    /// buffer). On error `out` is left as it was.
    pub fn encode_into(&self, out: &mut Vec<u8>, values: &[Value]) -> Result<(), KeyError> {
        if values.len() != self.columns.len() {
            return Err(KeyError::Arity {
                expected: self.columns.len(),
                found: values.len(),
            });
        }
        let start = out.len();
        for (i, (col, v)) in self.columns.iter().zip(values).enumerate() {
            if let Err(e) = encode_component(out, i, col, v) {
                out.truncate(start);
                return Err(e);
            }
            within_limit(out, start)?;
        }
        Ok(())
    }

    /// [`KeySchema::encode_into`] of a one-column `int64` key from a plain integer (`None`:
    /// NULL): the same bytes as `encode_into(&[Value::Int(..)])`, without a value per row.
    pub fn encode_i64_into(&self, out: &mut Vec<u8>, value: Option<i64>) -> Result<(), KeyError> {
        let col = match self.columns.as_slice() {
            [c] if c.ty == KeyType::Int64 => c,
            _ => {
                return Err(KeyError::Arity {
                    expected: self.columns.len(),
                    found: 1,
                })
            }
        };
        let Some(n) = value else {
            out.push(null_flag(col));
            return Ok(());
        };
        let mut body = ((n as u64) ^ (1 << 63)).to_be_bytes();
        in_direction(col, &mut body);
        out.push(FLAG_PRESENT);
        out.extend_from_slice(&body);
        Ok(())
    }

    /// [`KeySchema::encode_into`] of a one-column `string` or `binary` key from borrowed
    /// bytes (`None`: NULL): the same bytes as `encode_into(&[Value::String(..)])`, without
    /// an owned value per row (builds decode millions of them).
    pub fn encode_bytes_into(
        &self,
        out: &mut Vec<u8>,
        value: Option<&[u8]>,
    ) -> Result<(), KeyError> {
        let col = match self.columns.as_slice() {
            [c] if matches!(c.ty, KeyType::String | KeyType::Binary) => c,
            _ => {
                return Err(KeyError::Arity {
                    expected: self.columns.len(),
                    found: 1,
                })
            }
        };
        let Some(bytes) = value else {
            out.push(null_flag(col));
            return Ok(());
        };
        let start = out.len();
        out.push(FLAG_PRESENT);
        if let Err(e) = escaped(out, 0, bytes) {
            out.truncate(start);
            return Err(e);
        }
        within_limit(out, start)?;
        in_direction(col, &mut out[start + 1..]);
        Ok(())
    }

    /// Encodes the leading `values.len()` components. Every full key whose leading columns
    /// equal `values` starts with these bytes, and no other key does.
    pub fn encode_prefix(&self, values: &[Value]) -> Result<Vec<u8>, KeyError> {
        if values.len() > self.columns.len() {
            return Err(KeyError::Arity {
                expected: self.columns.len(),
                found: values.len(),
            });
        }
        let mut out = Vec::with_capacity(values.len() * 10);
        for (i, (col, v)) in self.columns.iter().zip(values).enumerate() {
            encode_component(&mut out, i, col, v)?;
            if out.len() > MAX_KEY_BYTES {
                return Err(KeyError::KeyTooLarge {
                    len: out.len(),
                    max: MAX_KEY_BYTES,
                });
            }
        }
        Ok(out)
    }

    /// Decodes a full key. Never panics; malformed input is a [`KeyError`].
    pub fn decode(&self, bytes: &[u8]) -> Result<Vec<Value>, KeyError> {
        let mut pos = 0usize;
        let mut out = Vec::with_capacity(self.columns.len());
        for (i, col) in self.columns.iter().enumerate() {
            out.push(decode_component(bytes, &mut pos, i, col)?);
        }
        if pos != bytes.len() {
            return Err(KeyError::TrailingBytes {
                extra: bytes.len() - pos,
            });
        }
        Ok(out)
    }

    /// Length of the first `n` components of an encoded key (to split a key into its
    /// equality prefix and the rest without decoding values).
    pub fn prefix_len(&self, bytes: &[u8], n: usize) -> Result<usize, KeyError> {
        let mut pos = 0usize;
        for (i, col) in self.columns.iter().take(n).enumerate() {
            decode_component(bytes, &mut pos, i, col)?;
        }
        Ok(pos)
    }
}

impl KeySchema {
    /// Converts loosely typed values (as JavaScript hands them over: numbers as
    /// `Float64`, big integers as `Int`/`UInt`, dates, decimals and UUIDs as strings) to
    /// each column's type. Values already of the right variant pass through; anything that
    /// does not convert exactly is a [`KeyError::TypeMismatch`] or [`KeyError::OutOfRange`].
    pub fn coerce(&self, values: Vec<Value>) -> Result<Vec<Value>, KeyError> {
        if values.len() > self.columns.len() {
            return Err(KeyError::Arity {
                expected: self.columns.len(),
                found: values.len(),
            });
        }
        values
            .into_iter()
            .zip(&self.columns)
            .enumerate()
            .map(|(i, (v, c))| coerce(i, c.ty, v))
            .collect()
    }
}

/// [`coerce_loose`], with integers moved to the variant the column's type decodes to
/// (`Int` for signed and temporal types, `UInt` for unsigned ones) and floats to the
/// column's width, so coerced values compare with decoded ones (`value_cmp`).
fn coerce(column: usize, ty: KeyType, v: Value) -> Result<Value, KeyError> {
    let unsigned = matches!(
        ty,
        KeyType::UInt8 | KeyType::UInt16 | KeyType::UInt32 | KeyType::UInt64
    );
    let v = match v {
        Value::UInt(u) if !unsigned => match i64::try_from(u) {
            Ok(i) => Value::Int(i),
            Err(_) => return Err(KeyError::OutOfRange { column, ty }),
        },
        Value::Int(n) if unsigned => match u64::try_from(n) {
            Ok(u) => Value::UInt(u),
            Err(_) => return Err(KeyError::OutOfRange { column, ty }),
        },
        v => v,
    };
    Ok(match (ty, coerce_loose(column, ty, v)?) {
        (KeyType::Float32, Value::Float64(f)) => {
            let g = f as f32;
            if !f.is_nan() && g as f64 != f {
                return Err(KeyError::OutOfRange { column, ty });
            }
            Value::Float32(g)
        }
        (KeyType::Float64, Value::Float32(f)) => Value::Float64(f as f64),
        (_, v) => v,
    })
}

fn coerce_loose(column: usize, ty: KeyType, v: Value) -> Result<Value, KeyError> {
    let mismatch = |v: &Value| KeyError::TypeMismatch {
        column,
        expected: ty,
        found: v.variant_name(),
    };
    let out_of_range = KeyError::OutOfRange { column, ty };
    let int_of = |f: f64| -> Result<i64, KeyError> {
        if f.fract() == 0.0 && f >= -(2f64.powi(63)) && f < 2f64.powi(63) {
            Ok(f as i64)
        } else {
            Err(out_of_range.clone())
        }
    };
    Ok(match (ty, v) {
        (_, Value::Null) => Value::Null,
        (KeyType::Int8 | KeyType::Int16 | KeyType::Int32 | KeyType::Int64, Value::Float64(f)) => {
            Value::Int(int_of(f)?)
        }
        (
            KeyType::UInt8 | KeyType::UInt16 | KeyType::UInt32 | KeyType::UInt64,
            Value::Float64(f),
        ) => {
            let n = int_of(f)?;
            Value::UInt(u64::try_from(n).map_err(|_| out_of_range.clone())?)
        }
        (KeyType::Int8 | KeyType::Int16 | KeyType::Int32 | KeyType::Int64, Value::String(s)) => {
            Value::Int(s.trim().parse().map_err(|_| out_of_range.clone())?)
        }
        (
            KeyType::UInt8 | KeyType::UInt16 | KeyType::UInt32 | KeyType::UInt64,
            Value::String(s),
        ) => Value::UInt(s.trim().parse().map_err(|_| out_of_range.clone())?),
        (KeyType::Float32, Value::Float64(f)) => {
            let g = f as f32;
            if !f.is_nan() && g as f64 != f {
                return Err(out_of_range);
            }
            Value::Float32(g)
        }
        (KeyType::Float32 | KeyType::Float64, Value::Int(n)) => Value::Float64(n as f64),
        (KeyType::Decimal { scale, .. }, Value::String(s)) => {
            Value::Decimal(parse_decimal(&s, scale).ok_or(out_of_range)?)
        }
        (KeyType::Decimal { scale, .. }, Value::Int(n)) => Value::Decimal(
            (n as i128)
                .checked_mul(10i128.pow(scale as u32))
                .ok_or(out_of_range)?,
        ),
        (KeyType::Decimal { scale, .. }, Value::Float64(f)) => {
            Value::Decimal(parse_decimal(&format!("{f}"), scale).ok_or(out_of_range)?)
        }
        (KeyType::Date, Value::Float64(f)) => {
            Value::Date(i32::try_from(int_of(f)?).map_err(|_| out_of_range.clone())?)
        }
        (KeyType::Date, Value::Int(n)) => {
            Value::Date(i32::try_from(n).map_err(|_| out_of_range.clone())?)
        }
        (KeyType::Date, Value::String(s)) => Value::Date(parse_date(&s).ok_or(out_of_range)?),
        (KeyType::Time, Value::Float64(f)) => Value::Time(int_of(f)?),
        (KeyType::Time, Value::Int(n)) => Value::Time(n),
        (
            KeyType::Timestamp
            | KeyType::TimestampTz
            | KeyType::TimestampNs
            | KeyType::TimestampTzNs,
            Value::Float64(f),
        ) => Value::Timestamp(int_of(f)?),
        (
            KeyType::Timestamp
            | KeyType::TimestampTz
            | KeyType::TimestampNs
            | KeyType::TimestampTzNs,
            Value::Int(n),
        ) => Value::Timestamp(n),
        (KeyType::Uuid, Value::String(s)) => {
            let hex: String = s.chars().filter(|c| *c != '-').collect();
            let b = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                })
                .collect::<Option<Vec<u8>>>()
                .filter(|b| b.len() == 16)
                .ok_or(out_of_range)?;
            Value::Binary(b)
        }
        (KeyType::Binary | KeyType::Fixed(_), Value::String(s)) => Value::Binary(s.into_bytes()),
        (_, v) => {
            // Already the right variant, or a mismatch the encoder reports.
            let probe = [v];
            let mut scratch = Vec::new();
            encode_body(&mut scratch, column, ty, &probe[0]).map_err(|e| match e {
                KeyError::TypeMismatch { .. } => mismatch(&probe[0]),
                other => other,
            })?;
            let [v] = probe;
            v
        }
    })
}

/// Parses `-?digits[.digits]` into an unscaled decimal of `scale` (exact: extra non-zero
/// fraction digits are refused).
fn parse_decimal(s: &str, scale: u8) -> Option<i128> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let scale = scale as usize;
    let (keep, extra) = if frac.len() > scale {
        frac.split_at(scale)
    } else {
        (frac, "")
    };
    if extra.chars().any(|c| c != '0') {
        return None;
    }
    let digits = format!("{int}{keep}{}", "0".repeat(scale - keep.len()));
    let v: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Parses `YYYY-MM-DD` into days since 1970-01-01 (proleptic Gregorian).
fn parse_date(s: &str) -> Option<i32> {
    let mut it = s.trim().splitn(3, '-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let dim = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ][(m - 1) as usize];
    if d > dim {
        return None;
    }
    // Days from civil (H. Hinnant).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    i32::try_from(era * 146_097 + doe - 719_468).ok()
}

pub use crate::index::blob::prefix_end;

fn encode_component(
    out: &mut Vec<u8>,
    column: usize,
    col: &KeyColumn,
    v: &Value,
) -> Result<(), KeyError> {
    if v.is_null() {
        out.push(null_flag(col));
        return Ok(());
    }
    out.push(FLAG_PRESENT);
    let start = out.len();
    encode_body(out, column, col.ty, v)?;
    in_direction(col, &mut out[start..]);
    Ok(())
}

/// The one byte of a NULL component: where the column puts NULLs.
fn null_flag(col: &KeyColumn) -> u8 {
    match col.nulls {
        NullOrder::First => FLAG_NULL_FIRST,
        NullOrder::Last => FLAG_NULL_LAST,
    }
}

/// A component's body as stored: inverted under a descending column.
fn in_direction(col: &KeyColumn, body: &mut [u8]) {
    if col.direction == Direction::Desc {
        for b in body {
            *b = !*b;
        }
    }
}

/// `KeyTooLarge` (and the key's bytes from `start` dropped) once they exceed the limit.
fn within_limit(out: &mut Vec<u8>, start: usize) -> Result<(), KeyError> {
    let len = out.len() - start;
    if len > MAX_KEY_BYTES {
        out.truncate(start);
        return Err(KeyError::KeyTooLarge {
            len,
            max: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

fn signed(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
}

fn int_in(column: usize, ty: KeyType, v: &Value, min: i64, max: i64) -> Result<i64, KeyError> {
    let n: i64 = match *v {
        Value::Int(n) => n,
        Value::UInt(n) => i64::try_from(n).map_err(|_| KeyError::OutOfRange { column, ty })?,
        _ => {
            return Err(KeyError::TypeMismatch {
                column,
                expected: ty,
                found: v.variant_name(),
            })
        }
    };
    if n < min || n > max {
        return Err(KeyError::OutOfRange { column, ty });
    }
    Ok(n)
}

fn uint_in(column: usize, ty: KeyType, v: &Value, max: u64) -> Result<u64, KeyError> {
    let n: u64 = match *v {
        Value::UInt(n) => n,
        Value::Int(n) => u64::try_from(n).map_err(|_| KeyError::OutOfRange { column, ty })?,
        _ => {
            return Err(KeyError::TypeMismatch {
                column,
                expected: ty,
                found: v.variant_name(),
            })
        }
    };
    if n > max {
        return Err(KeyError::OutOfRange { column, ty });
    }
    Ok(n)
}

/// The order-preserving transform of a float, after canonicalisation.
pub fn float_bits(f: f64) -> u64 {
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = if f.is_nan() {
        CANONICAL_NAN_BITS
    } else {
        f.to_bits()
    };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn float_from_bits(t: u64) -> f64 {
    let bits = if t >> 63 == 1 { t & !(1 << 63) } else { !t };
    f64::from_bits(bits)
}

/// The float whose one encoding is `t`: a NaN other than the canonical one, or −0, is never
/// written ([`float_bits`]) and is refused, so every key decodes to the value that encodes
/// back to its bytes (found by the `keys` fuzz target).
fn canonical_float(t: u64, column: usize) -> Result<f64, KeyError> {
    let f = float_from_bits(t);
    if float_bits(f) != t {
        return Err(KeyError::Malformed {
            column,
            reason:
                "a float not in its canonical encoding (a NaN other than the canonical one, or -0)",
        });
    }
    Ok(f)
}

fn escaped(out: &mut Vec<u8>, column: usize, bytes: &[u8]) -> Result<(), KeyError> {
    if bytes.len() > MAX_VALUE_BYTES {
        return Err(KeyError::ValueTooLarge {
            column,
            len: bytes.len(),
            max: MAX_VALUE_BYTES,
        });
    }
    if !bytes.contains(&0x00) {
        out.extend_from_slice(bytes);
    } else {
        for &b in bytes {
            out.push(b);
            if b == 0x00 {
                out.push(0xFF);
            }
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
    Ok(())
}

fn encode_body(out: &mut Vec<u8>, column: usize, ty: KeyType, v: &Value) -> Result<(), KeyError> {
    let mismatch = || KeyError::TypeMismatch {
        column,
        expected: ty,
        found: v.variant_name(),
    };
    match ty {
        KeyType::Boolean => match v {
            Value::Bool(b) => out.push(*b as u8),
            _ => return Err(mismatch()),
        },
        KeyType::Int8 => signed(out, int_in(column, ty, v, i8::MIN as i64, i8::MAX as i64)?),
        KeyType::Int16 => signed(
            out,
            int_in(column, ty, v, i16::MIN as i64, i16::MAX as i64)?,
        ),
        KeyType::Int32 => signed(
            out,
            int_in(column, ty, v, i32::MIN as i64, i32::MAX as i64)?,
        ),
        KeyType::Int64 => signed(out, int_in(column, ty, v, i64::MIN, i64::MAX)?),
        KeyType::UInt8 => {
            out.extend_from_slice(&uint_in(column, ty, v, u8::MAX as u64)?.to_be_bytes())
        }
        KeyType::UInt16 => {
            out.extend_from_slice(&uint_in(column, ty, v, u16::MAX as u64)?.to_be_bytes())
        }
        KeyType::UInt32 => {
            out.extend_from_slice(&uint_in(column, ty, v, u32::MAX as u64)?.to_be_bytes())
        }
        KeyType::UInt64 => out.extend_from_slice(&uint_in(column, ty, v, u64::MAX)?.to_be_bytes()),
        KeyType::Float32 => match v {
            Value::Float32(f) => out.extend_from_slice(&float_bits(*f as f64).to_be_bytes()),
            _ => return Err(mismatch()),
        },
        KeyType::Float64 => match v {
            Value::Float64(f) => out.extend_from_slice(&float_bits(*f).to_be_bytes()),
            Value::Float32(f) => out.extend_from_slice(&float_bits(*f as f64).to_be_bytes()),
            _ => return Err(mismatch()),
        },
        KeyType::Decimal { precision, .. } => match v {
            Value::Decimal(d) => {
                if d.unsigned_abs() >= 10u128.pow(precision as u32) {
                    return Err(KeyError::OutOfRange { column, ty });
                }
                out.extend_from_slice(&((*d as u128) ^ (1 << 127)).to_be_bytes());
            }
            _ => return Err(mismatch()),
        },
        KeyType::String => match v {
            Value::String(s) => escaped(out, column, s.as_bytes())?,
            _ => return Err(mismatch()),
        },
        KeyType::Binary => match v {
            Value::Binary(b) => escaped(out, column, b)?,
            _ => return Err(mismatch()),
        },
        KeyType::Fixed(len) => match v {
            Value::Binary(b) if b.len() == len as usize => out.extend_from_slice(b),
            Value::Binary(b) => {
                return Err(KeyError::FixedLength {
                    column,
                    expected: len,
                    found: b.len(),
                })
            }
            _ => return Err(mismatch()),
        },
        KeyType::Uuid => match v {
            Value::Binary(b) if b.len() == 16 => out.extend_from_slice(b),
            Value::Binary(b) => {
                return Err(KeyError::FixedLength {
                    column,
                    expected: 16,
                    found: b.len(),
                })
            }
            _ => return Err(mismatch()),
        },
        KeyType::Date => match v {
            Value::Date(d) => out.extend_from_slice(&((*d as u32) ^ (1 << 31)).to_be_bytes()),
            _ => return Err(mismatch()),
        },
        KeyType::Time => match v {
            Value::Time(t) => {
                if !(0..86_400_000_000).contains(t) {
                    return Err(KeyError::OutOfRange { column, ty });
                }
                signed(out, *t)
            }
            _ => return Err(mismatch()),
        },
        KeyType::Timestamp
        | KeyType::TimestampTz
        | KeyType::TimestampNs
        | KeyType::TimestampTzNs => match v {
            Value::Timestamp(t) => signed(out, *t),
            _ => return Err(mismatch()),
        },
    }
    Ok(())
}

/// Reads bytes of one component, undoing the DESC complement on the fly.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: &'a mut usize,
    flip: u8,
    column: usize,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, KeyError> {
        let b = *self.bytes.get(*self.pos).ok_or(KeyError::Malformed {
            column: self.column,
            reason: "truncated",
        })?;
        *self.pos += 1;
        Ok(b ^ self.flip)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], KeyError> {
        let end = self.pos.checked_add(N).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or(KeyError::Malformed {
            column: self.column,
            reason: "truncated",
        })?;
        let mut a = [0u8; N];
        for (d, s) in a.iter_mut().zip(&self.bytes[*self.pos..end]) {
            *d = s ^ self.flip;
        }
        *self.pos = end;
        Ok(a)
    }
    fn fixed(&mut self, n: usize) -> Result<Vec<u8>, KeyError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or(KeyError::Malformed {
            column: self.column,
            reason: "truncated",
        })?;
        let v = self.bytes[*self.pos..end]
            .iter()
            .map(|b| b ^ self.flip)
            .collect();
        *self.pos = end;
        Ok(v)
    }
    fn escaped(&mut self) -> Result<Vec<u8>, KeyError> {
        let mut v = Vec::new();
        loop {
            let b = self.byte()?;
            if b != 0x00 {
                v.push(b);
            } else {
                match self.byte()? {
                    0xFF => v.push(0x00),
                    0x01 => break,
                    _ => {
                        return Err(KeyError::Malformed {
                            column: self.column,
                            reason: "bad escape",
                        })
                    }
                }
            }
            if v.len() > MAX_VALUE_BYTES {
                return Err(KeyError::Malformed {
                    column: self.column,
                    reason: "value over the size cap",
                });
            }
        }
        Ok(v)
    }
    fn signed(&mut self) -> Result<i64, KeyError> {
        Ok((u64::from_be_bytes(self.array()?) ^ (1 << 63)) as i64)
    }
}

fn decode_component(
    bytes: &[u8],
    pos: &mut usize,
    column: usize,
    col: &KeyColumn,
) -> Result<Value, KeyError> {
    let flag = *bytes.get(*pos).ok_or(KeyError::Malformed {
        column,
        reason: "truncated",
    })?;
    *pos += 1;
    match (flag, col.nulls) {
        (FLAG_NULL_FIRST, NullOrder::First) | (FLAG_NULL_LAST, NullOrder::Last) => {
            return Ok(Value::Null)
        }
        (FLAG_PRESENT, _) => {}
        _ => {
            return Err(KeyError::Malformed {
                column,
                reason: "bad null flag",
            })
        }
    }
    let flip = if col.direction == Direction::Desc {
        0xFF
    } else {
        0x00
    };
    let mut c = Cursor {
        bytes,
        pos,
        flip,
        column,
    };
    let ty = col.ty;
    let out_of_range = KeyError::OutOfRange { column, ty };
    let ranged = |n: i64, min: i64, max: i64| {
        if n < min || n > max {
            Err(out_of_range.clone())
        } else {
            Ok(Value::Int(n))
        }
    };
    let uranged = |n: u64, max: u64| {
        if n > max {
            Err(out_of_range.clone())
        } else {
            Ok(Value::UInt(n))
        }
    };
    Ok(match ty {
        KeyType::Boolean => match c.byte()? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            _ => {
                return Err(KeyError::Malformed {
                    column,
                    reason: "bad boolean",
                })
            }
        },
        KeyType::Int8 => ranged(c.signed()?, i8::MIN as i64, i8::MAX as i64)?,
        KeyType::Int16 => ranged(c.signed()?, i16::MIN as i64, i16::MAX as i64)?,
        KeyType::Int32 => ranged(c.signed()?, i32::MIN as i64, i32::MAX as i64)?,
        KeyType::Int64 => Value::Int(c.signed()?),
        KeyType::UInt8 => uranged(u64::from_be_bytes(c.array()?), u8::MAX as u64)?,
        KeyType::UInt16 => uranged(u64::from_be_bytes(c.array()?), u16::MAX as u64)?,
        KeyType::UInt32 => uranged(u64::from_be_bytes(c.array()?), u32::MAX as u64)?,
        KeyType::UInt64 => Value::UInt(u64::from_be_bytes(c.array()?)),
        KeyType::Float32 => {
            let f = canonical_float(u64::from_be_bytes(c.array()?), column)?;
            let g = f as f32;
            if !f.is_nan() && g as f64 != f {
                return Err(KeyError::Malformed {
                    column,
                    reason: "float64 bits in a float32 column",
                });
            }
            Value::Float32(g)
        }
        KeyType::Float64 => {
            Value::Float64(canonical_float(u64::from_be_bytes(c.array()?), column)?)
        }
        KeyType::Decimal { precision, .. } => {
            let d = (u128::from_be_bytes(c.array()?) ^ (1 << 127)) as i128;
            if d.unsigned_abs() >= 10u128.pow(precision as u32) {
                return Err(out_of_range);
            }
            Value::Decimal(d)
        }
        KeyType::String => {
            Value::String(
                String::from_utf8(c.escaped()?).map_err(|_| KeyError::Malformed {
                    column,
                    reason: "invalid UTF-8",
                })?,
            )
        }
        KeyType::Binary => Value::Binary(c.escaped()?),
        KeyType::Fixed(len) => Value::Binary(c.fixed(len as usize)?),
        KeyType::Uuid => Value::Binary(c.fixed(16)?),
        KeyType::Date => Value::Date((u32::from_be_bytes(c.array()?) ^ (1 << 31)) as i32),
        KeyType::Time => {
            let t = c.signed()?;
            if !(0..86_400_000_000).contains(&t) {
                return Err(out_of_range);
            }
            Value::Time(t)
        }
        KeyType::Timestamp
        | KeyType::TimestampTz
        | KeyType::TimestampNs
        | KeyType::TimestampTzNs => Value::Timestamp(c.signed()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(ty: KeyType) -> KeySchema {
        KeySchema::new(vec![KeyColumn::new(ty)]).unwrap()
    }

    #[test]
    fn composite_framing_is_unambiguous() {
        let s = KeySchema::new(vec![
            KeyColumn::new(KeyType::String),
            KeyColumn::new(KeyType::String),
        ])
        .unwrap();
        let a = s
            .encode(&[Value::String("ab".into()), Value::String("c".into())])
            .unwrap();
        let b = s
            .encode(&[Value::String("a".into()), Value::String("bc".into())])
            .unwrap();
        assert_ne!(a, b);
        assert!(b < a, "(a, bc) < (ab, c)");
    }

    #[test]
    fn desc_reverses_variable_length_values() {
        let s = KeySchema::new(vec![KeyColumn::new(KeyType::String).desc()]).unwrap();
        let a = s.encode(&[Value::String("a".into())]).unwrap();
        let ab = s.encode(&[Value::String("ab".into())]).unwrap();
        let a0 = s.encode(&[Value::String("a\0".into())]).unwrap();
        assert!(ab < a, "DESC: \"ab\" sorts before \"a\"");
        assert!(a0 < a, "DESC: \"a\\0\" sorts before \"a\"");
    }

    #[test]
    fn oversized_values_are_refused_without_the_value() {
        let big = "x".repeat(MAX_VALUE_BYTES + 1);
        let e = one(KeyType::String)
            .encode(&[Value::String(big.clone())])
            .unwrap_err();
        assert_eq!(
            e,
            KeyError::ValueTooLarge {
                column: 0,
                len: MAX_VALUE_BYTES + 1,
                max: MAX_VALUE_BYTES
            }
        );
        assert!(!e.to_string().contains("xxxx"));
        // At the cap it is accepted.
        one(KeyType::String)
            .encode(&[Value::String("x".repeat(MAX_VALUE_BYTES))])
            .unwrap();
        // Many columns each under the cap can still exceed the key cap.
        let s = KeySchema::new(vec![KeyColumn::new(KeyType::Binary); 5]).unwrap();
        let vals = vec![Value::Binary(vec![0u8; MAX_VALUE_BYTES]); 5];
        assert!(matches!(s.encode(&vals), Err(KeyError::KeyTooLarge { .. })));
    }

    #[test]
    fn range_and_type_checks() {
        assert_eq!(
            one(KeyType::Int8).encode(&[Value::Int(128)]),
            Err(KeyError::OutOfRange {
                column: 0,
                ty: KeyType::Int8
            })
        );
        assert!(one(KeyType::UInt8).encode(&[Value::Int(-1)]).is_err());
        assert!(one(KeyType::Int32)
            .encode(&[Value::String("1".into())])
            .is_err());
        assert!(one(KeyType::Decimal {
            precision: 2,
            scale: 0
        })
        .encode(&[Value::Decimal(100)])
        .is_err());
        assert!(one(KeyType::Decimal {
            precision: 38,
            scale: 0
        })
        .encode(&[Value::Decimal(10i128.pow(38) - 1)])
        .is_ok());
        assert!(one(KeyType::Uuid)
            .encode(&[Value::Binary(vec![1; 15])])
            .is_err());
        assert!(one(KeyType::Time)
            .encode(&[Value::Time(86_400_000_000)])
            .is_err());
        assert!("decimal(39,0)".parse::<KeyType>().is_err());
        assert!("fixed[0]".parse::<KeyType>().is_err());
        assert!(one(KeyType::Int32).encode(&[]).is_err());
    }

    #[test]
    fn coercion_from_loose_values() {
        let s = KeySchema::new(vec![
            KeyColumn::new(KeyType::Int32),
            KeyColumn::new(KeyType::Date),
            KeyColumn::new(KeyType::Decimal {
                precision: 10,
                scale: 2,
            }),
            KeyColumn::new(KeyType::Uuid),
            KeyColumn::new(KeyType::String),
        ])
        .unwrap();
        let got = s
            .coerce(vec![
                Value::Float64(42.0),
                Value::String("2024-02-29".into()),
                Value::String("-12.5".into()),
                Value::String("00112233-4455-6677-8899-aabbccddeeff".into()),
                Value::String("x".into()),
            ])
            .unwrap();
        assert_eq!(
            got,
            vec![
                Value::Int(42),
                Value::Date(19782),
                Value::Decimal(-1250),
                Value::Binary((0..16).map(|i| i * 0x11).collect()),
                Value::String("x".into())
            ]
        );
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2023-02-29"), None);
        assert!(
            s.coerce(vec![Value::Float64(1.5)]).is_err(),
            "a fractional number is not an int"
        );
        assert!(s
            .coerce(vec![Value::Int(1), Value::String("x".into())])
            .is_err());
        assert_eq!(parse_decimal("1.234", 2), None, "no silent rounding");
        assert_eq!(parse_decimal("1.230", 2), Some(123));
        assert_eq!(
            s.coerce(vec![Value::Bool(true)]),
            Err(KeyError::TypeMismatch {
                column: 0,
                expected: KeyType::Int32,
                found: "bool"
            })
        );
    }

    #[test]
    fn int_promotion_keeps_keys() {
        let a = one(KeyType::Int32).encode(&[Value::Int(-7)]).unwrap();
        let b = one(KeyType::Int64).encode(&[Value::Int(-7)]).unwrap();
        assert_eq!(a, b);
        let f = one(KeyType::Float32)
            .encode(&[Value::Float32(1.5)])
            .unwrap();
        let d = one(KeyType::Float64)
            .encode(&[Value::Float64(1.5)])
            .unwrap();
        assert_eq!(f, d);
    }

    #[test]
    fn floats_decode_only_from_their_canonical_bytes() {
        for ty in [KeyType::Float32, KeyType::Float64] {
            let s = one(ty.clone());
            // NaN and 0 encode to one form each, and that form decodes back to its bytes.
            for v in [f64::NAN, -f64::NAN, 0.0, -0.0, 1.5, -2.25] {
                let value = if ty == KeyType::Float32 {
                    Value::Float32(v as f32)
                } else {
                    Value::Float64(v)
                };
                let b = s.encode(&[value]).unwrap();
                // The encoded bytes of a NaN are the canonical NaN's, whatever its sign.
                assert_eq!(s.encode(&s.decode(&b).unwrap()).unwrap(), b, "{ty:?} {v}");
            }
            // Another NaN's bits, or -0's: refused (the fuzz target's finding).
            let float = |v: f64| {
                if ty == KeyType::Float32 {
                    Value::Float32(v as f32)
                } else {
                    Value::Float64(v)
                }
            };
            let mut other_nan = s.encode(&[float(f64::NAN)]).unwrap();
            let n = other_nan.len();
            other_nan[n - 1] ^= 1;
            assert!(matches!(
                s.decode(&other_nan),
                Err(KeyError::Malformed { .. })
            ));
            let mut neg_zero = s.encode(&[float(0.0)]).unwrap();
            let t = !(-0.0f64).to_bits();
            neg_zero[n - 8..].copy_from_slice(&t.to_be_bytes());
            assert!(matches!(
                s.decode(&neg_zero),
                Err(KeyError::Malformed { .. })
            ));
        }
    }

    #[test]
    fn prefix_matches_exactly_the_extensions() {
        let s = KeySchema::new(vec![
            KeyColumn::new(KeyType::String),
            KeyColumn::new(KeyType::Int32),
        ])
        .unwrap();
        let p = s.encode_prefix(&[Value::String("a".into())]).unwrap();
        let end = prefix_end(&p).unwrap();
        let inside = s
            .encode(&[Value::String("a".into()), Value::Int(i32::MAX as i64)])
            .unwrap();
        let outside = s
            .encode(&[Value::String("a\0".into()), Value::Int(0)])
            .unwrap();
        assert!(inside.starts_with(&p) && inside < end);
        assert!(!outside.starts_with(&p) && outside >= end);
        assert_eq!(prefix_end(&[0x01, 0xFF]), Some(vec![0x02]));
        assert_eq!(prefix_end(&[0xFF]), None);
        assert_eq!(s.prefix_len(&inside, 1).unwrap(), p.len());
    }
}
