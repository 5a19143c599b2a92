//! The value model: key column types and orders, values and SQL comparison. The byte
//! encoding of these values, and the coercion of loosely typed host values to a column's type
//! (checked by encoding them), are [`crate::formats::key_encoding`].

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Largest variable-length value (string, binary, fixed) accepted, in raw bytes.
pub const MAX_VALUE_BYTES: usize = 1024;
/// Largest encoded key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 4096;

/// The type of one key column. Integer and float widths are normalised in the encoding (see
/// `docs/key-encoding.md`) so that Iceberg's int→long and float→double promotions keep keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    /// Fixed-scale decimal; `precision` ≤ 38 digits. Values are the unscaled integer.
    Decimal {
        precision: u8,
        scale: u8,
    },
    String,
    Binary,
    /// Fixed-length binary of `len` bytes (1 ≤ len ≤ [`MAX_VALUE_BYTES`]).
    Fixed(u32),
    Uuid,
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since midnight, `0 ≤ t < 86_400_000_000`.
    Time,
    /// Microseconds since the epoch, no zone.
    Timestamp,
    /// Microseconds since the epoch, UTC.
    TimestampTz,
    /// Nanoseconds since the epoch, no zone.
    TimestampNs,
    /// Nanoseconds since the epoch, UTC.
    TimestampTzNs,
}

impl KeyType {
    /// Checks the type's own parameters (decimal precision, fixed length).
    pub fn validate(&self) -> Result<(), KeyError> {
        match *self {
            KeyType::Decimal { precision, scale } if precision == 0 || precision > 38 || scale > precision => {
                Err(KeyError::InvalidType { reason: format!("decimal({precision},{scale}) outside 1 ≤ precision ≤ 38, scale ≤ precision") })
            }
            KeyType::Fixed(len) if len == 0 || len as usize > MAX_VALUE_BYTES => Err(KeyError::InvalidType {
                reason: format!("fixed[{len}] outside 1..={MAX_VALUE_BYTES}"),
            }),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyType::Boolean => f.write_str("boolean"),
            KeyType::Int8 => f.write_str("int8"),
            KeyType::Int16 => f.write_str("int16"),
            KeyType::Int32 => f.write_str("int32"),
            KeyType::Int64 => f.write_str("int64"),
            KeyType::UInt8 => f.write_str("uint8"),
            KeyType::UInt16 => f.write_str("uint16"),
            KeyType::UInt32 => f.write_str("uint32"),
            KeyType::UInt64 => f.write_str("uint64"),
            KeyType::Float32 => f.write_str("float32"),
            KeyType::Float64 => f.write_str("float64"),
            KeyType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            KeyType::String => f.write_str("string"),
            KeyType::Binary => f.write_str("binary"),
            KeyType::Fixed(n) => write!(f, "fixed[{n}]"),
            KeyType::Uuid => f.write_str("uuid"),
            KeyType::Date => f.write_str("date"),
            KeyType::Time => f.write_str("time"),
            KeyType::Timestamp => f.write_str("timestamp"),
            KeyType::TimestampTz => f.write_str("timestamptz"),
            KeyType::TimestampNs => f.write_str("timestamp_ns"),
            KeyType::TimestampTzNs => f.write_str("timestamptz_ns"),
        }
    }
}

impl FromStr for KeyType {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, KeyError> {
        let s = s.trim();
        let bad = || KeyError::InvalidType {
            reason: format!("unknown key type {s:?}"),
        };
        let t = match s {
            "boolean" | "bool" => KeyType::Boolean,
            "int8" => KeyType::Int8,
            "int16" => KeyType::Int16,
            "int32" | "int" => KeyType::Int32,
            "int64" | "long" => KeyType::Int64,
            "uint8" => KeyType::UInt8,
            "uint16" => KeyType::UInt16,
            "uint32" => KeyType::UInt32,
            "uint64" => KeyType::UInt64,
            "float32" | "float" => KeyType::Float32,
            "float64" | "double" => KeyType::Float64,
            "string" => KeyType::String,
            "binary" => KeyType::Binary,
            "uuid" => KeyType::Uuid,
            "date" => KeyType::Date,
            "time" => KeyType::Time,
            "timestamp" => KeyType::Timestamp,
            "timestamptz" => KeyType::TimestampTz,
            "timestamp_ns" => KeyType::TimestampNs,
            "timestamptz_ns" => KeyType::TimestampTzNs,
            _ => {
                if let Some(inner) = s.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
                    let (p, sc) = inner.split_once(',').ok_or_else(bad)?;
                    let precision = p.trim().parse().map_err(|_| bad())?;
                    let scale = sc.trim().parse().map_err(|_| bad())?;
                    KeyType::Decimal { precision, scale }
                } else if let Some(inner) =
                    s.strip_prefix("fixed[").and_then(|r| r.strip_suffix(']'))
                {
                    KeyType::Fixed(inner.trim().parse().map_err(|_| bad())?)
                } else {
                    return Err(bad());
                }
            }
        };
        t.validate()?;
        Ok(t)
    }
}

impl Serialize for KeyType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Sort direction of one key column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Asc,
    Desc,
}

/// Where NULLs of one key column sort, independently of its direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NullOrder {
    First,
    #[default]
    Last,
}

/// One key column: its type, direction and NULL placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyColumn {
    #[serde(rename = "type")]
    pub ty: KeyType,
    #[serde(default)]
    pub direction: Direction,
    #[serde(default)]
    pub nulls: NullOrder,
}

impl KeyColumn {
    /// An ascending, NULLS LAST column of `ty`.
    pub fn new(ty: KeyType) -> Self {
        KeyColumn {
            ty,
            direction: Direction::Asc,
            nulls: NullOrder::Last,
        }
    }
    pub fn desc(mut self) -> Self {
        self.direction = Direction::Desc;
        self
    }
    pub fn nulls_first(mut self) -> Self {
        self.nulls = NullOrder::First;
        self
    }
    pub fn nulls_last(mut self) -> Self {
        self.nulls = NullOrder::Last;
        self
    }
}

/// The ordered columns of a key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeySchema {
    pub columns: Vec<KeyColumn>,
}

/// One value of a key component. The column's [`KeyType`] decides how it is read; a value
/// of the wrong variant is a [`KeyError::TypeMismatch`].
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    /// Any signed integer type (range-checked against the column's width).
    Int(i64),
    /// Any unsigned integer type (range-checked against the column's width).
    UInt(u64),
    Float32(f32),
    Float64(f64),
    /// Unscaled decimal value.
    Decimal(i128),
    String(String),
    /// binary, fixed[n] and uuid.
    Binary(Vec<u8>),
    Date(i32),
    Time(i64),
    /// Any of the four timestamp types, in the type's unit.
    Timestamp(i64),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub(crate) fn variant_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::UInt(_) => "uint",
            Value::Float32(_) => "float32",
            Value::Float64(_) => "float64",
            Value::Decimal(_) => "decimal",
            Value::String(_) => "string",
            Value::Binary(_) => "binary",
            Value::Date(_) => "date",
            Value::Time(_) => "time",
            Value::Timestamp(_) => "timestamp",
        }
    }
}

/// Equality is canonical equality: `-0.0 == +0.0`, every NaN equals every NaN.
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Float32(a), Value::Float32(b)) => {
                float_cmp(*a as f64, *b as f64) == Ordering::Equal
            }
            (Value::Float64(a), Value::Float64(b)) => float_cmp(*a, *b) == Ordering::Equal,
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::UInt(a), Value::UInt(b)) => a == b,
            (Value::Decimal(a), Value::Decimal(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Binary(a), Value::Binary(b)) => a == b,
            (Value::Date(a), Value::Date(b)) => a == b,
            (Value::Time(a), Value::Time(b)) => a == b,
            (Value::Timestamp(a), Value::Timestamp(b)) => a == b,
            _ => false,
        }
    }
}

/// Typed failures of encoding and decoding. Messages name columns and sizes, never values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("invalid key type: {reason}")]
    InvalidType { reason: String },
    #[error("key has {found} values but the index has {expected} columns")]
    Arity { expected: usize, found: usize },
    #[error("column {column}: a {found} value does not fit a {expected} key column")]
    TypeMismatch {
        column: usize,
        expected: KeyType,
        found: &'static str,
    },
    #[error("column {column}: value is outside the range of {ty}")]
    OutOfRange { column: usize, ty: KeyType },
    #[error("column {column}: value of {len} bytes exceeds the {max}-byte cap for indexed values")]
    ValueTooLarge {
        column: usize,
        len: usize,
        max: usize,
    },
    #[error("encoded key of {len} bytes exceeds the {max}-byte cap")]
    KeyTooLarge { len: usize, max: usize },
    #[error("column {column}: fixed[{expected}] value has {found} bytes")]
    FixedLength {
        column: usize,
        expected: u32,
        found: usize,
    },
    #[error("malformed key at column {column}: {reason}")]
    Malformed { column: usize, reason: &'static str },
    #[error("malformed key: {extra} trailing bytes after the last column")]
    TrailingBytes { extra: usize },
}

/// Total order of floats as SQL engines sort them: `-0.0 == +0.0`, NaN greatest and equal to
/// itself.
pub fn float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).expect("non-NaN floats compare"),
    }
}

/// The SQL order of two non-NULL values of the same variant (the reference the encoding is
/// tested against). Returns `None` for values of different variants or NULLs.
pub fn value_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    Some(match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
        (Value::Float32(x), Value::Float32(y)) => float_cmp(*x as f64, *y as f64),
        (Value::Float64(x), Value::Float64(y)) => float_cmp(*x, *y),
        (Value::Decimal(x), Value::Decimal(y)) => x.cmp(y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Binary(x), Value::Binary(y)) => x.cmp(y),
        (Value::Date(x), Value::Date(y)) => x.cmp(y),
        (Value::Time(x), Value::Time(y)) => x.cmp(y),
        (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        _ => return None,
    })
}

/// The declared order of two tuples under `schema`: per column, NULL placement first, then
/// the value order, reversed for DESC. Panics only if a tuple's variants do not match the
/// schema (a programming error in the caller).
pub fn tuple_cmp(schema: &KeySchema, a: &[Value], b: &[Value]) -> Ordering {
    for (i, col) in schema.columns.iter().enumerate() {
        let (x, y) = match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => (x, y),
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        };
        let ord = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => match col.nulls {
                NullOrder::First => Ordering::Less,
                NullOrder::Last => Ordering::Greater,
            },
            (false, true) => match col.nulls {
                NullOrder::First => Ordering::Greater,
                NullOrder::Last => Ordering::Less,
            },
            (false, false) => {
                let o = value_cmp(x, y).expect("values of one column share a variant");
                match col.direction {
                    Direction::Asc => o,
                    Direction::Desc => o.reverse(),
                }
            }
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

impl KeySchema {
    pub fn new(columns: Vec<KeyColumn>) -> Result<Self, KeyError> {
        for c in &columns {
            c.ty.validate()?;
        }
        Ok(KeySchema { columns })
    }
}

/// One side of a range: a tuple of leading column values compared with SQL row-comparison
/// semantics (`(a, b) >= (5, 10)`), or no bound.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueBound {
    Included(Vec<Value>),
    Excluded(Vec<Value>),
    Unbounded,
}

impl ValueBound {
    pub(crate) fn values(&self) -> &[Value] {
        match self {
            ValueBound::Included(v) | ValueBound::Excluded(v) => v,
            ValueBound::Unbounded => &[],
        }
    }
    pub(crate) fn is_bounded(&self) -> bool {
        !matches!(self, ValueBound::Unbounded)
    }
}
