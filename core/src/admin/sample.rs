//! Deterministic sample data (native): Parquet files for the quickstart, examples and tests,
//! so a fresh machine needs no Python to try Skerry.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array,
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::values::{KeyColumn, KeySchema, KeyType, Value};

/// Codec of a sample file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleCodec {
    Snappy,
    Lz4,
    Zstd,
    None,
}

impl SampleCodec {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "snappy" => SampleCodec::Snappy,
            "lz4" => SampleCodec::Lz4,
            "zstd" => SampleCodec::Zstd,
            "none" | "uncompressed" => SampleCodec::None,
            _ => return None,
        })
    }
    fn compression(self) -> Compression {
        match self {
            SampleCodec::Snappy => Compression::SNAPPY,
            SampleCodec::Lz4 => Compression::LZ4_RAW,
            SampleCodec::Zstd => Compression::ZSTD(ZstdLevel::default()),
            SampleCodec::None => Compression::UNCOMPRESSED,
        }
    }
}

/// The sample `orders` schema: `order_id` (int64, unique), `customer` (string, repeats,
/// some NULL), `amount` (float64), `day` (date).
pub fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, false),
        Field::new("day", DataType::Date32, false),
    ]))
}

/// The customer of order `id` (deterministic; every 97th order has none).
pub fn customer_of(id: i64) -> Option<String> {
    if id % 97 == 13 {
        None
    } else {
        Some(format!("customer-{:05}", (id * 7919) % 5000))
    }
}

/// One sample Parquet file with orders `first_id .. first_id + rows`, row groups of
/// `row_group_rows`.
pub fn orders_parquet(
    first_id: i64,
    rows: usize,
    row_group_rows: usize,
    codec: SampleCodec,
) -> Result<Vec<u8>> {
    let ids: Vec<i64> = (first_id..first_id + rows as i64).collect();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from(
                ids.iter().map(|i| customer_of(*i)).collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from(
                ids.iter()
                    .map(|i| (*i % 1000) as f64 * 1.25)
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Date32Array::from(
                ids.iter()
                    .map(|i| 19_000 + (*i % 365) as i32)
                    .collect::<Vec<_>>(),
            )),
        ],
    )?;
    let props = WriterProperties::builder()
        .set_compression(codec.compression())
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema(), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(out)
}

/// A Parquet file from rows of values: columns of `boolean`, `int32`, `int64`, `uint64`,
/// `float64`, `decimal(p,s)`, `string`, `binary`, `date`, `timestamp` or `timestamptz`
/// (microseconds), every column nullable (tests and examples that need arbitrary data —
/// NaN, ±0.0, NULLs, unicode — without another Parquet writer).
pub fn parquet_from_rows(
    columns: &[(String, KeyType)],
    rows: &[Vec<Value>],
    row_group_rows: usize,
    codec: SampleCodec,
) -> Result<Vec<u8>> {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (i, (name, ty)) in columns.iter().enumerate() {
        let col = rows
            .iter()
            .map(|r| r.get(i).cloned().unwrap_or(Value::Null));
        let bad = |v: &Value| Error::Invalid(format!("column {name} ({ty}) cannot hold {v:?}"));
        let (dt, array): (DataType, ArrayRef) = match ty {
            KeyType::Boolean => (
                DataType::Boolean,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Bool(b) => Ok(Some(b)),
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<BooleanArray>>()?,
                ),
            ),
            KeyType::Int32 => (
                DataType::Int32,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Int(x) => i32::try_from(x).map(Some).map_err(|_| bad(&v)),
                        Value::UInt(x) => i32::try_from(x).map(Some).map_err(|_| bad(&v)),
                        Value::Float64(f) if f.fract() == 0.0 && f.abs() < 2f64.powi(31) => {
                            Ok(Some(f as i32))
                        }
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<Int32Array>>()?,
                ),
            ),
            KeyType::Int64 => (
                DataType::Int64,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Int(x) => Ok(Some(x)),
                        // A non-negative JavaScript bigint arrives unsigned.
                        Value::UInt(x) => i64::try_from(x).map(Some).map_err(|_| bad(&v)),
                        Value::Float64(f) if f.fract() == 0.0 && f.abs() < 2f64.powi(53) => {
                            Ok(Some(f as i64))
                        }
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<Int64Array>>()?,
                ),
            ),
            KeyType::Float64 => (
                DataType::Float64,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Float64(f) => Ok(Some(f)),
                        Value::Int(x) => Ok(Some(x as f64)),
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<Float64Array>>()?,
                ),
            ),
            KeyType::String => (
                DataType::Utf8,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::String(s) => Ok(Some(s)),
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<StringArray>>()?,
                ),
            ),
            KeyType::Date => (
                DataType::Date32,
                Arc::new(
                    col.map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Date(d) => Ok(Some(d)),
                        Value::Float64(f) if f.fract() == 0.0 && f.abs() < 2f64.powi(31) => {
                            Ok(Some(f as i32))
                        }
                        Value::Int(x) => i32::try_from(x).map(Some).map_err(|_| bad(&v)),
                        v => Err(bad(&v)),
                    })
                    .collect::<Result<Date32Array>>()?,
                ),
            ),
            KeyType::UInt64
            | KeyType::Decimal { .. }
            | KeyType::Binary
            | KeyType::Timestamp
            | KeyType::TimestampTz => {
                // Values as a key column of this type takes them (decimals as strings or
                // integers, timestamps as microseconds).
                let key = KeySchema {
                    columns: vec![KeyColumn::new(*ty)],
                };
                let vals = col
                    .map(|v| {
                        let shown = format!("{v:?}");
                        key.coerce(vec![v])
                            .map(|mut c| c.pop().unwrap_or(Value::Null))
                            .map_err(|e| {
                                Error::Invalid(format!("column {name} ({ty}): {shown}: {e}"))
                            })
                    })
                    .collect::<Result<Vec<Value>>>()?;
                match ty {
                    KeyType::UInt64 => (
                        DataType::UInt64,
                        Arc::new(UInt64Array::from_iter(vals.iter().map(|v| match v {
                            Value::UInt(x) => Some(*x),
                            _ => None,
                        }))) as ArrayRef,
                    ),
                    KeyType::Decimal { precision, scale } => {
                        let dt = DataType::Decimal128(*precision, *scale as i8);
                        let a = Decimal128Array::from_iter(vals.iter().map(|v| match v {
                            Value::Decimal(x) => Some(*x),
                            _ => None,
                        }))
                        .with_precision_and_scale(*precision, *scale as i8)?;
                        (dt, Arc::new(a) as ArrayRef)
                    }
                    KeyType::Binary => (
                        DataType::Binary,
                        Arc::new(BinaryArray::from_iter(vals.iter().map(|v| match v {
                            Value::Binary(b) => Some(b.as_slice()),
                            _ => None,
                        }))) as ArrayRef,
                    ),
                    _ => {
                        let micros =
                            TimestampMicrosecondArray::from_iter(vals.iter().map(|v| match v {
                                Value::Timestamp(t) | Value::Int(t) => Some(*t),
                                _ => None,
                            }));
                        let a = if *ty == KeyType::TimestampTz {
                            micros.with_timezone("UTC")
                        } else {
                            micros
                        };
                        (a.data_type().clone(), Arc::new(a) as ArrayRef)
                    }
                }
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "sample Parquet columns of type {other}"
                )))
            }
        };
        fields.push(Field::new(name, dt, true));
        arrays.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    let props = WriterProperties::builder()
        .set_compression(codec.compression())
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(out)
}
