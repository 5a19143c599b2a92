//! Skerry's Node.js addon: translates JavaScript values and errors to and from
//! `skerry-core`; no logic of its own. The TypeScript facade (`lib/index.js`) turns the
//! `E_CODE: message` prefix of every rejection into `err.code`.

#![deny(clippy::all)]

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use skerry_core::encoding::Value;
use skerry_core::overlay as ov;

fn to_js(e: skerry_core::Error) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{}: {e}", e.code()))
}

fn big(v: u64) -> BigInt {
    BigInt::from(v)
}

/// Options of `Overlay.open`.
#[napi(object)]
pub struct OpenOptions {
    /// object_store settings, e.g. `{ aws_endpoint: "http://127.0.0.1:9000", aws_allow_http: "true" }`.
    pub storage: Option<std::collections::HashMap<String, String>>,
    /// Open read-only: answer from the newest *published* manifest without opening the
    /// catalog, so any number of reader processes serve beside one writer without fencing it.
    /// Writer verbs fail `E_READ_ONLY`; `refresh()` moves to the newest published version.
    pub read_only: Option<bool>,
    /// Limit on each read of overlay objects and data files (`E_TIMEOUT` past it).
    pub timeout_ms: Option<u32>,
}

/// Which files `registerParquetTable` records.
#[napi(object)]
pub struct RegisterOptions {
    /// Paths relative to the location. Default: every `*.parquet` below it.
    pub files: Option<Vec<String>>,
    /// Only files whose relative path starts with this.
    pub prefix: Option<String>,
}

#[napi(object)]
pub struct Field {
    pub field_id: i32,
    pub name: String,
    pub data_type: String,
    /// The key type when the column can be indexed.
    pub key_type: Option<String>,
    pub nullable: bool,
}

#[napi(object)]
pub struct TableInfo {
    pub name: String,
    pub table_id: BigInt,
    pub files: u32,
    pub rows: BigInt,
    pub fields: Vec<Field>,
}

/// One index column with its order.
#[napi(object)]
pub struct IndexColumn {
    pub name: String,
    /// `asc` (default) | `desc`
    pub direction: Option<String>,
    /// `last` (default) | `first`
    pub nulls: Option<String>,
}

fn index_column(c: Either<String, IndexColumn>) -> Result<ov::IndexColumn> {
    use skerry_core::encoding::{Direction, NullOrder};
    let invalid = |what: &str, v: &str| {
        napi::Error::new(Status::InvalidArg, format!("E_INVALID: {what} must be {v}"))
    };
    Ok(match c {
        Either::A(name) => ov::IndexColumn::from(name),
        Either::B(c) => ov::IndexColumn {
            name: c.name,
            direction: match c.direction.as_deref() {
                None | Some("asc") => Direction::Asc,
                Some("desc") => Direction::Desc,
                Some(_) => return Err(invalid("direction", "'asc' or 'desc'")),
            },
            nulls: match c.nulls.as_deref() {
                None | Some("last") => NullOrder::Last,
                Some("first") => NullOrder::First,
                Some(_) => return Err(invalid("nulls", "'first' or 'last'")),
            },
        },
    })
}

#[napi(object)]
pub struct CreateIndexOptions {
    pub unique: Option<bool>,
}

#[napi(object)]
pub struct IndexInfo {
    pub name: String,
    pub index_id: BigInt,
    pub fields: Vec<i32>,
    pub unique: bool,
    /// `building` | `ready` | `maintaining` | `poisoned`
    pub state: String,
}

#[napi(object)]
pub struct SkippedFile {
    pub file: String,
    pub code: String,
    pub message: String,
}

#[napi(object)]
pub struct BuildReport {
    pub files_indexed: u32,
    pub entries: BigInt,
    pub bundles_written: u32,
    pub bytes_written: BigInt,
    pub skipped: Vec<SkippedFile>,
}

#[napi(object)]
pub struct PublishReport {
    pub version: BigInt,
    pub path: String,
    pub bytes: BigInt,
}

#[napi(object)]
pub struct RefreshReport {
    pub checked: u32,
    pub changed: Vec<String>,
    pub touched: Vec<String>,
    pub missing: Vec<String>,
    /// Changed files whose delete masks no longer apply (dropped; register them again).
    pub deletes_dropped: Vec<String>,
    /// Files that could not be read (left as they were), with why.
    pub unreadable: Vec<SkippedFile>,
    /// For a read-only overlay: the published version now pinned.
    pub version: Option<BigInt>,
}

/// Options of `refresh`.
#[napi(object)]
pub struct RefreshOptions {
    /// Re-hash every file (finds rewrites that keep size and version).
    pub deep: Option<bool>,
}

#[napi(object)]
pub struct Row {
    /// Data file path, relative to the table location.
    pub file: String,
    pub position: BigInt,
    pub row_id: Option<BigInt>,
}

#[napi(object)]
pub struct Rejection {
    pub data_file: String,
    pub index_id: Option<BigInt>,
    pub bundle_path: Option<String>,
    /// `checksum` | `record_count` | `future_snapshot` | `blob_checksum` | `missing` | `corrupt` | …
    pub reason: String,
    pub message: String,
}

#[napi(object)]
pub struct LookupStats {
    pub files: u32,
    pub files_by_index: u32,
    pub files_scanned: u32,
    pub files_pruned: u32,
    pub rejections: Vec<Rejection>,
    pub drifted: Vec<String>,
    pub index_requests: u32,
    pub index_bytes: f64,
    pub data_requests: u32,
    pub data_bytes: f64,
}

#[napi(object)]
pub struct FetchedRows {
    /// Arrow IPC stream of the rows.
    pub ipc: Buffer,
    /// The rows as JSON (see `fetchRows` in the facade for plain objects).
    pub json: String,
}

#[napi(object)]
pub struct Candidates {
    pub file: String,
    pub row_ids: Vec<BigInt>,
}

#[napi(object)]
pub struct LocateResult {
    pub rows: Vec<Row>,
    pub candidates: Vec<Candidates>,
}

#[napi(object)]
pub struct LookupResult {
    pub rows: Vec<Row>,
    pub stats: LookupStats,
}

/// A range bound: `{ key, inclusive }` (inclusive by default).
#[napi(object)]
pub struct RangeBound {
    /// A value, or an array of leading column values.
    pub key: Unknown<'static>,
    pub inclusive: Option<bool>,
}

#[napi(object)]
pub struct ScanOptions {
    pub reverse: Option<bool>,
    /// For `range`: the column the bounds range over; refused (`E_REFUSED`) unless it is the
    /// column after the bounds' equality prefix.
    pub column: Option<String>,
}

/// The elements of a JavaScript array (`None` for holes); `E_INVALID` naming `what` when `v`
/// is not an array.
fn js_items<'a>(env: &Env, v: Unknown<'a>, what: &str) -> Result<Vec<Option<Unknown<'a>>>> {
    if !v.is_array()? {
        return Err(napi::Error::new(
            Status::InvalidArg,
            format!("E_INVALID: {what} must be an array"),
        ));
    }
    let arr: Array = unsafe { Array::from_napi_value(env.raw(), v.raw())? };
    (0..arr.len()).map(|i| arr.get::<Unknown>(i)).collect()
}

/// Elements of an array that must have no holes.
fn js_dense_items<'a>(env: &Env, v: Unknown<'a>, what: &str) -> Result<Vec<Unknown<'a>>> {
    js_items(env, v, what)?
        .into_iter()
        .map(|x| {
            x.ok_or_else(|| {
                napi::Error::new(Status::InvalidArg, format!("E_INVALID: hole in {what}"))
            })
        })
        .collect()
}

fn key_values(env: &Env, key: Unknown<'_>) -> Result<Vec<Value>> {
    if key.is_array()? {
        js_dense_items(env, key, "key")?
            .into_iter()
            .map(js_value)
            .collect()
    } else {
        Ok(vec![js_value(key)?])
    }
}

fn value_bound(env: &Env, b: Unknown<'_>) -> Result<skerry_core::encoding::ValueBound> {
    use skerry_core::encoding::ValueBound;
    match b.get_type()? {
        ValueType::Null | ValueType::Undefined => return Ok(ValueBound::Unbounded),
        ValueType::Object => {}
        _ => {
            return Err(napi::Error::new(
                Status::InvalidArg,
                "E_INVALID: a bound is { key, inclusive } or null".to_string(),
            ))
        }
    }
    let o: Object = unsafe { Object::from_napi_value(env.raw(), b.raw())? };
    let key: Option<Unknown> = o.get("key")?;
    let key = key.ok_or_else(|| {
        napi::Error::new(
            Status::InvalidArg,
            "E_INVALID: a bound needs a key".to_string(),
        )
    })?;
    let values = key_values(env, key)?;
    let inclusive: Option<bool> = o.get("inclusive")?;
    Ok(if inclusive.unwrap_or(true) {
        ValueBound::Included(values)
    } else {
        ValueBound::Excluded(values)
    })
}

fn result(r: skerry_core::query::LookupResult) -> LookupResult {
    LookupResult {
        rows: r
            .rows
            .into_iter()
            .map(|x| Row {
                file: x.file,
                position: big(x.position),
                row_id: x.row_id.map(big),
            })
            .collect(),
        stats: stats(r.stats),
    }
}

/// Converts a JavaScript key value: null/undefined, boolean, number, bigint, string, or
/// Buffer/Uint8Array. The index's column type decides the final type (`coerce`).
fn js_value(v: Unknown<'_>) -> Result<Value> {
    Ok(match v.get_type()? {
        ValueType::Null | ValueType::Undefined => Value::Null,
        ValueType::Boolean => Value::Bool(v.coerce_to_bool()?),
        ValueType::Number => Value::Float64(v.coerce_to_number()?.get_double()?),
        ValueType::String => {
            Value::String(v.coerce_to_string()?.into_utf8()?.as_str()?.to_string())
        }
        ValueType::BigInt => {
            let b: BigInt = unsafe { BigInt::from_napi_value(v.env(), v.raw())? };
            // Magnitude words (least significant first) and a sign bit.
            let out_of_range = || {
                napi::Error::new(
                    Status::InvalidArg,
                    "E_KEY: bigint key out of 64-bit range".to_string(),
                )
            };
            if b.words.iter().skip(1).any(|w| *w != 0) {
                return Err(out_of_range());
            }
            let magnitude = b.words.first().copied().unwrap_or(0);
            if b.sign_bit && magnitude != 0 {
                if magnitude > 1u64 << 63 {
                    return Err(out_of_range());
                }
                Value::Int((magnitude as i64).wrapping_neg())
            } else {
                Value::UInt(magnitude)
            }
        }
        ValueType::Object if v.is_buffer()? || v.is_typedarray()? => {
            let a: Uint8Array = unsafe { Uint8Array::from_napi_value(v.env(), v.raw())? };
            Value::Binary(a.to_vec())
        }
        other => {
            return Err(napi::Error::new(
                Status::InvalidArg,
                format!("E_KEY: a key value cannot be a {other:?}"),
            ));
        }
    })
}

fn stats(s: skerry_core::query::LookupStats) -> LookupStats {
    LookupStats {
        files: s.files as u32,
        files_by_index: s.files_by_index as u32,
        files_scanned: s.files_scanned as u32,
        files_pruned: s.files_pruned as u32,
        rejections: s.rejections.into_iter().map(rejection).collect(),
        drifted: s.drifted,
        index_requests: s.index_requests as u32,
        index_bytes: s.index_bytes as f64,
        data_requests: s.data_requests as u32,
        data_bytes: s.data_bytes as f64,
    }
}

/// How a `query` was answered (see `skerry_core::planner::QueryStats`).
#[napi(object)]
pub struct QueryStats {
    /// The index chosen; absent when every file was scanned.
    pub index: Option<String>,
    pub index_columns: Vec<String>,
    pub keys: f64,
    pub residual: Vec<String>,
    pub files: f64,
    pub files_by_index: f64,
    pub files_scanned: f64,
    pub files_pruned: f64,
    pub files_rejected: f64,
    pub rejections: Vec<Rejection>,
    pub drifted: Vec<String>,
    pub row_groups: f64,
    pub row_groups_pruned: f64,
    pub rows_pruned_by_pages: f64,
    pub rows_scanned: f64,
    pub requests: f64,
    pub bytes: f64,
    pub cache_hits: f64,
    pub index_requests: f64,
    pub index_bytes: f64,
    pub data_requests: f64,
    pub data_bytes: f64,
    pub elapsed_ms: f64,
}

/// The raw answer of `queryRaw` (the facade's `query` parses `json` into plain objects).
#[napi(object)]
pub struct QueryRaw {
    /// Arrow IPC stream of the requested columns.
    pub ipc: Buffer,
    /// The same rows as JSON (markers for bigints, bytes, decimals, non-finite floats).
    pub json: String,
    /// Where each row is (file, position, row id).
    pub refs: Vec<Row>,
    pub stats: QueryStats,
}

fn rejection(r: skerry_core::lineage::Rejection) -> Rejection {
    Rejection {
        message: r.to_string(),
        reason: r.reason.code().to_string(),
        data_file: r.data_file,
        index_id: r.index_id.map(big),
        bundle_path: r.bundle_path,
    }
}

fn query_stats(s: skerry_core::planner::QueryStats) -> QueryStats {
    QueryStats {
        index: s.index,
        index_columns: s.index_columns,
        keys: s.keys as f64,
        residual: s.residual,
        files: s.files as f64,
        files_by_index: s.files_by_index as f64,
        files_scanned: s.files_scanned as f64,
        files_pruned: s.files_pruned as f64,
        files_rejected: s.files_rejected as f64,
        rejections: s.rejections.into_iter().map(rejection).collect(),
        drifted: s.drifted,
        row_groups: s.row_groups as f64,
        row_groups_pruned: s.row_groups_pruned as f64,
        rows_pruned_by_pages: s.rows_pruned_by_pages as f64,
        rows_scanned: s.rows_scanned as f64,
        requests: s.requests as f64,
        bytes: s.bytes as f64,
        cache_hits: s.cache_hits as f64,
        index_requests: s.index_requests as f64,
        index_bytes: s.index_bytes as f64,
        data_requests: s.data_requests as f64,
        data_bytes: s.data_bytes as f64,
        elapsed_ms: s.elapsed_ms,
    }
}

fn invalid(msg: impl std::fmt::Display) -> napi::Error {
    napi::Error::new(Status::InvalidArg, format!("E_INVALID: {msg}"))
}

/// `where`: `{ column: value | null | { eq, in, lt, lte, gt, gte, between, isNull } }` —
/// a bare value is `=`, `null` is IS NULL.
fn js_where(env: &Env, w: Unknown<'_>) -> Result<Vec<skerry_core::predicate::Condition>> {
    use skerry_core::predicate::{Condition, Op};
    match w.get_type()? {
        ValueType::Null | ValueType::Undefined => return Ok(vec![]),
        ValueType::Object if !w.is_array()? => {}
        _ => return Err(invalid("`where` must be an object of column conditions")),
    }
    let o: Object = unsafe { Object::from_napi_value(env.raw(), w.raw())? };
    let mut out = Vec::new();
    for column in Object::keys(&o)? {
        let v: Unknown = o.get_named_property(&column)?;
        let plain_object = v.get_type()? == ValueType::Object
            && !v.is_array()?
            && !v.is_buffer()?
            && !v.is_typedarray()?;
        if v.get_type()? == ValueType::Null {
            out.push(Condition::new(&column, Op::IsNull));
            continue;
        }
        if !plain_object {
            out.push(Condition::new(&column, Op::Eq(js_value(v)?)));
            continue;
        }
        let ops: Object = unsafe { Object::from_napi_value(env.raw(), v.raw())? };
        let names = Object::keys(&ops)?;
        if names.is_empty() {
            return Err(invalid(format!("no condition given for column {column}")));
        }
        for name in names {
            let x: Unknown = ops.get_named_property(&name)?;
            let op = match name.as_str() {
                "eq" => Op::Eq(js_value(x)?),
                "lt" => Op::Lt(js_value(x)?),
                "lte" => Op::Le(js_value(x)?),
                "gt" => Op::Gt(js_value(x)?),
                "gte" => Op::Ge(js_value(x)?),
                "in" => Op::In(
                    js_dense_items(env, x, "an IN list")?
                        .into_iter()
                        .map(js_value)
                        .collect::<Result<_>>()?,
                ),
                "between" => {
                    let b = js_dense_items(env, x, "between")?;
                    if b.len() != 2 {
                        return Err(invalid("between is [low, high]"));
                    }
                    let mut b = b.into_iter();
                    let lo = js_value(b.next().expect("two"))?;
                    Op::Between(lo, js_value(b.next().expect("two"))?)
                }
                "isNull" => match x.get_type()? {
                    ValueType::Boolean if x.coerce_to_bool()? => Op::IsNull,
                    _ => return Err(invalid("isNull takes `true` (IS NOT NULL is not supported)")),
                },
                other => {
                    return Err(invalid(format!(
                        "unknown operator {other} on {column} (eq, in, lt, lte, gt, gte, between, isNull)"
                    )))
                }
            };
            out.push(Condition::new(&column, op));
        }
    }
    Ok(out)
}

/// Options of `query`.
fn js_query(env: &Env, options: Option<Unknown<'_>>) -> Result<skerry_core::planner::Query> {
    let mut q = skerry_core::planner::Query::default();
    let Some(options) = options else {
        return Ok(q);
    };
    match options.get_type()? {
        ValueType::Null | ValueType::Undefined => return Ok(q),
        ValueType::Object => {}
        _ => return Err(invalid("query options must be an object")),
    }
    let o: Object = unsafe { Object::from_napi_value(env.raw(), options.raw())? };
    if let Some(w) = o.get::<Unknown>("where")? {
        q.conditions = js_where(env, w)?;
    }
    if let Some(c) = o.get::<Unknown>("columns")? {
        if !matches!(c.get_type()?, ValueType::Undefined | ValueType::Null) {
            let cols = js_dense_items(env, c, "columns")?
                .into_iter()
                .map(|x| match x.get_type()? {
                    ValueType::String => {
                        Ok(x.coerce_to_string()?.into_utf8()?.as_str()?.to_string())
                    }
                    _ => Err(invalid("columns are names (strings)")),
                })
                .collect::<Result<Vec<_>>>()?;
            q.columns = Some(cols);
        }
    }
    if let Some(l) = o.get::<Unknown>("limit")? {
        match l.get_type()? {
            ValueType::Undefined | ValueType::Null => {}
            ValueType::Number => {
                let n = l.coerce_to_number()?.get_double()?;
                if !(n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0) {
                    return Err(invalid("limit is a non-negative integer"));
                }
                q.limit = Some(n as u64);
            }
            _ => return Err(invalid("limit is a non-negative integer")),
        }
    }
    if let Some(v) = o.get::<bool>("verify")? {
        q.verify_files = v;
    }
    Ok(q)
}

/// A file queued for repair.
#[napi(object)]
pub struct Repair {
    /// Data file path (`*` for the index's table run).
    pub path: String,
    /// The rejection's reason code.
    pub reason: String,
    pub message: String,
}

/// An overlay: catalog, bundles and manifests under one object-store prefix.
#[napi]
pub struct Overlay {
    handle: Handle,
}

/// A writer (catalog + publish) or a read-only view of the published overlay.
#[derive(Clone)]
enum Handle {
    Writer(Arc<ov::Overlay>),
    Reader(Arc<skerry_core::reader::OverlayReader>),
}

/// Runs the same read verb on either kind of handle.
macro_rules! read_verb {
    ($h:expr, |$o:ident| $e:expr) => {
        match $h {
            Handle::Writer($o) => $e,
            Handle::Reader($o) => $e,
        }
    };
}

impl Overlay {
    /// The writer, or `E_READ_ONLY` for a read-only overlay.
    fn writer(&self) -> Result<Arc<ov::Overlay>> {
        match &self.handle {
            Handle::Writer(o) => Ok(o.clone()),
            Handle::Reader(_) => Err(napi::Error::new(
                Status::GenericFailure,
                "E_READ_ONLY: this overlay was opened with readOnly: true".to_string(),
            )),
        }
    }
}

/// A JavaScript bigint as a u64, losslessly: negative or wider values are `E_INVALID`
/// naming `what`.
fn u64_arg(b: &BigInt, what: &str) -> Result<u64> {
    let (negative, v, lossless) = b.get_u64();
    if (negative && v != 0) || !lossless {
        return Err(napi::Error::new(
            Status::InvalidArg,
            format!("E_INVALID: {what} must be a bigint from 0 to 2^64-1"),
        ));
    }
    Ok(v)
}

/// Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`, `s3://bucket/prefix`.
#[napi]
pub async fn open_overlay(url: String, options: Option<OpenOptions>) -> Result<Overlay> {
    let (storage, read_only, timeout_ms) = match options {
        Some(o) => (o.storage, o.read_only.unwrap_or(false), o.timeout_ms),
        None => (None, false, None),
    };
    let opts = ov::OpenOptions {
        storage: storage.map(|m| m.into_iter().collect()).unwrap_or_default(),
        timeout: timeout_ms.map(|ms| std::time::Duration::from_millis(ms as u64)),
    };
    let handle = if read_only {
        Handle::Reader(Arc::new(
            skerry_core::reader::OverlayReader::open(&url, opts)
                .await
                .map_err(to_js)?,
        ))
    } else {
        Handle::Writer(Arc::new(
            ov::Overlay::open(&url, opts).await.map_err(to_js)?,
        ))
    };
    Ok(Overlay { handle })
}

/// Writes a deterministic sample `orders` Parquet file (columns `order_id`, `customer`,
/// `amount`, `day`) with orders `firstId .. firstId + rows`. `codec`: snappy | lz4 | zstd | none.
#[napi]
pub fn sample_orders_parquet(
    first_id: f64,
    rows: f64,
    row_group_rows: f64,
    codec: String,
) -> Result<Buffer> {
    let int = |v: f64, what: &str, lo: f64, hi: f64| -> Result<f64> {
        if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
            return Err(napi::Error::new(
                Status::InvalidArg,
                format!("E_INVALID: {what} must be an integer from {lo} to {hi}"),
            ));
        }
        Ok(v)
    };
    let rows = int(rows, "rows", 0.0, 10_000_000.0)? as usize;
    let row_group_rows = int(row_group_rows, "rowGroupRows", 1.0, 10_000_000.0)? as usize;
    let first_id = int(first_id, "firstId", -(2f64.powi(53)), 2f64.powi(53))? as i64;
    let c = skerry_core::sample::SampleCodec::parse(&codec).ok_or_else(|| {
        napi::Error::new(
            Status::InvalidArg,
            format!("E_INVALID: unknown codec {codec:?}"),
        )
    })?;
    let bytes =
        skerry_core::sample::orders_parquet(first_id, rows, row_group_rows, c).map_err(to_js)?;
    Ok(bytes.into())
}

/// A column of `writeParquet`.
#[napi(object)]
pub struct ParquetColumn {
    pub name: String,
    /// `boolean` | `int32` | `int64` | `float64` | `string` | `date`
    #[napi(js_name = "type")]
    pub ty: String,
}

/// Writes rows (arrays of values, `null` for NULL) as a Parquet file with nullable columns —
/// arbitrary test data (NaN, ±0, unicode, NULLs) without another Parquet writer.
#[napi(
    ts_args_type = "columns: ParquetColumn[], rows: unknown[][], rowGroupRows?: number, codec?: string"
)]
pub fn write_parquet(
    env: &Env,
    columns: Vec<ParquetColumn>,
    rows: Unknown<'_>,
    row_group_rows: Option<u32>,
    codec: Option<String>,
) -> Result<Buffer> {
    let cols = columns
        .into_iter()
        .map(|c| {
            c.ty.parse()
                .map(|t| (c.name, t))
                .map_err(|e: skerry_core::encoding::KeyError| {
                    napi::Error::new(Status::InvalidArg, format!("E_INVALID: {e}"))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = js_dense_items(env, rows, "rows")?
        .into_iter()
        .map(|r| key_values(env, r))
        .collect::<Result<Vec<_>>>()?;
    let codec = skerry_core::sample::SampleCodec::parse(codec.as_deref().unwrap_or("snappy"))
        .ok_or_else(|| {
            napi::Error::new(Status::InvalidArg, "E_INVALID: unknown codec".to_string())
        })?;
    let bytes = skerry_core::sample::parquet_from_rows(
        &cols,
        &rows,
        row_group_rows.unwrap_or(1000) as usize,
        codec,
    )
    .map_err(to_js)?;
    Ok(bytes.into())
}

/// What `registerFiles` did.
#[napi(object)]
pub struct RegisterReport {
    pub files: i64,
    pub rows: i64,
    pub entries: i64,
    pub bundles_written: i64,
    /// Building unique indexes the new rows broke (now `poisoned`).
    pub poisoned: Vec<String>,
    pub attempts: i64,
}

/// Rows of one data file to delete, by position.
#[napi(object)]
pub struct FileDeletes {
    pub file: String,
    pub positions: Vec<Either<BigInt, i64>>,
}

#[napi(object)]
pub struct DeleteReport {
    pub rows_deleted: i64,
    pub claims_removed: i64,
}

/// Bounds of one `buildStep` (defaults 1,000,000 entries, 8 MiB).
#[napi(object)]
pub struct StepOptions {
    pub max_entries: Option<i64>,
    pub max_bytes: Option<i64>,
}

#[napi(object)]
pub struct CursorInfo {
    pub file: String,
    pub position: i64,
}

/// What one build step did.
#[napi(object)]
pub struct StepReport {
    pub index: String,
    pub state: String,
    pub done: bool,
    pub step: i64,
    pub entries: i64,
    pub entry_bytes: i64,
    pub files_completed: Vec<String>,
    pub bundles_written: i64,
    pub bytes_written: i64,
    pub skipped: Vec<SkippedFile>,
    pub cursor: Option<CursorInfo>,
    pub rows_done: i64,
    pub rows_total: i64,
}

/// What vacuum (or a purging drop) removed.
#[napi(object)]
pub struct VacuumReport {
    pub artifacts: i64,
    pub bytes: i64,
    pub manifests: i64,
    pub claims: i64,
    pub index_files: i64,
    pub dropped_indexes: i64,
}

#[napi(object)]
pub struct VacuumOptions {
    /// Published manifest versions to keep (default 1).
    pub retain_versions: Option<i64>,
}

#[napi(object)]
pub struct VerifyReport {
    pub files: i64,
    pub files_unindexed: i64,
    pub stored: i64,
    pub expected: i64,
    pub missing: i64,
    pub dead: i64,
    pub mismatched: i64,
    pub certified: bool,
    /// Files queued for repair (drained by the next build of the index).
    pub repairs_queued: i64,
}

#[napi(object)]
pub struct Certificate {
    pub snapshot: i64,
    pub generation: i64,
    pub catalog_version: i64,
    pub entries: i64,
}

fn skipped(v: Vec<ov::Skipped>) -> Vec<SkippedFile> {
    v.into_iter()
        .map(|s| SkippedFile {
            file: s.file,
            code: s.code,
            message: s.message,
        })
        .collect()
}

fn u64_of(v: Either<BigInt, i64>) -> Result<u64> {
    match v {
        Either::A(b) => u64_arg(&b, "a position"),
        Either::B(n) if n >= 0 => Ok(n as u64),
        Either::B(_) => Err(napi::Error::from_reason(
            "E_INVALID: a position is negative",
        )),
    }
}

fn vacuum_report(r: skerry_core::lifecycle::VacuumReport) -> VacuumReport {
    VacuumReport {
        artifacts: r.artifacts as i64,
        bytes: r.bytes as i64,
        manifests: r.manifests as i64,
        claims: r.claims as i64,
        index_files: r.index_files as i64,
        dropped_indexes: r.dropped_indexes as i64,
    }
}

#[napi]
impl Overlay {
    /// Registers a table of plain Parquet files under `location` (a directory URL), recording
    /// each file's size, ETag, record count and SHA-256, and the schema with field ids.
    #[napi]
    pub async fn register_parquet_table(
        &self,
        name: String,
        location: String,
        options: Option<RegisterOptions>,
    ) -> Result<TableInfo> {
        let sel = match options {
            Some(RegisterOptions { files: Some(f), .. }) => ov::FileSelection::List(f),
            Some(RegisterOptions {
                prefix: Some(p), ..
            }) => ov::FileSelection::Prefix(p),
            _ => ov::FileSelection::Prefix(String::new()),
        };
        let t = self
            .writer()?
            .register_parquet_table(&name, &location, sel)
            .await
            .map_err(to_js)?;
        Ok(TableInfo {
            name: t.name,
            table_id: big(t.table_id),
            files: t.files as u32,
            rows: big(t.rows),
            fields: t
                .fields
                .into_iter()
                .map(|f| Field {
                    field_id: f.field_id,
                    name: f.name,
                    data_type: f.data_type,
                    key_type: f.key_type.map(|k| k.to_string()),
                    nullable: f.nullable,
                })
                .collect(),
        })
    }

    /// Defines an ordered index on `columns` (committed at once; `build` makes it ready).
    /// A column is a name (ascending, NULLS LAST) or `{ name, direction, nulls }`.
    #[napi]
    pub async fn create_index(
        &self,
        table: String,
        name: String,
        columns: Vec<Either<String, IndexColumn>>,
        options: Option<CreateIndexOptions>,
    ) -> Result<IndexInfo> {
        let opts = ov::IndexOptions {
            unique: options.and_then(|o| o.unique).unwrap_or(false),
        };
        let columns = columns
            .into_iter()
            .map(index_column)
            .collect::<Result<Vec<_>>>()?;
        let i = self
            .writer()?
            .create_index(&table, &name, &columns, opts)
            .await
            .map_err(to_js)?;
        Ok(IndexInfo {
            name: i.name,
            index_id: big(i.index_id),
            fields: i.fields,
            unique: i.unique,
            state: i.state.to_string(),
        })
    }

    /// Drops an index in one small catalog commit (a tombstone; artifacts await vacuum):
    /// lookups stop using it at once, the next publish omits it, the name is free again.
    /// Returns the dropped index's id.
    #[napi]
    pub async fn drop_index(&self, table: String, name: String) -> Result<BigInt> {
        Ok(big(self
            .writer()?
            .drop_index(&table, &name)
            .await
            .map_err(to_js)?))
    }

    /// Builds every missing or stale index blob of `table` and flips built indexes to ready.
    #[napi]
    pub async fn build(&self, table: String) -> Result<BuildReport> {
        let r = self.writer()?.build(&table, |_| {}).await.map_err(to_js)?;
        Ok(BuildReport {
            files_indexed: r.files_indexed as u32,
            entries: big(r.entries),
            bundles_written: r.bundles_written as u32,
            bytes_written: big(r.bytes_written),
            skipped: skipped(r.skipped),
        })
    }

    /// Writes the catalog head as a new immutable manifest version and moves `HEAD` to it.
    #[napi]
    pub async fn publish(&self) -> Result<PublishReport> {
        let p = self.writer()?.publish().await.map_err(to_js)?;
        Ok(PublishReport {
            version: big(p.version),
            path: p.path,
            bytes: big(p.bytes),
        })
    }

    /// Writer: re-checks every data file of `table` against the store (SHA-256 confirms
    /// changes; `deep` re-hashes every file). Read-only: pins the newest published version.
    #[napi]
    pub async fn refresh(
        &self,
        table: Option<String>,
        options: Option<RefreshOptions>,
    ) -> Result<RefreshReport> {
        let o = match &self.handle {
            Handle::Reader(r) => {
                let v = r.refresh().await.map_err(to_js)?;
                return Ok(RefreshReport {
                    checked: 0,
                    changed: vec![],
                    touched: vec![],
                    missing: vec![],
                    deletes_dropped: vec![],
                    unreadable: vec![],
                    version: Some(big(v)),
                });
            }
            Handle::Writer(o) => o.clone(),
        };
        let table = table.ok_or_else(|| {
            napi::Error::new(
                Status::InvalidArg,
                "E_INVALID: table must be a string".to_string(),
            )
        })?;
        let deep = options.and_then(|o| o.deep).unwrap_or(false);
        let r = if deep {
            o.refresh_deep(&table).await
        } else {
            o.refresh(&table).await
        }
        .map_err(to_js)?;
        Ok(RefreshReport {
            checked: r.checked as u32,
            changed: r.changed,
            touched: r.touched,
            missing: r.missing,
            deletes_dropped: r.deletes_dropped,
            unreadable: skipped(r.unreadable),
            version: None,
        })
    }

    /// Rows whose indexed columns equal `key` (one value per index column, or a single value
    /// for a one-column index), in the index's order.
    #[napi(ts_args_type = "table: string, index: string, key: unknown")]
    pub fn lookup<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
        key: Unknown<'_>,
    ) -> Result<PromiseRaw<'env, LookupResult>> {
        let values = key_values(env, key)?;
        let h = self.handle.clone();
        env.spawn_future(async move {
            Ok(result(
                read_verb!(&h, |o| o.lookup(&table, &index, &values).await).map_err(to_js)?,
            ))
        })
    }

    /// `index IN (keys)`: complete keys, deduplicated, in key order; keys with NULL match
    /// nothing.
    #[napi(ts_args_type = "table: string, index: string, keys: unknown[]")]
    pub fn lookup_many<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
        keys: Unknown<'_>,
    ) -> Result<PromiseRaw<'env, LookupResult>> {
        let keys = js_dense_items(env, keys, "keys")?
            .into_iter()
            .map(|k| key_values(env, k))
            .collect::<Result<Vec<_>>>()?;
        let h = self.handle.clone();
        env.spawn_future(async move {
            Ok(result(
                read_verb!(&h, |o| o.lookup_many(&table, &index, &keys).await).map_err(to_js)?,
            ))
        })
    }

    /// Rows between `lower` and `upper`, each `{ key, inclusive = true }` compared as a SQL
    /// row (`(a, b) >= (5, 10)`) or `null` for unbounded, in the index's order (or reversed).
    /// Shared leading values are an equality prefix; ranging over columns of mixed directions
    /// is refused (`E_REFUSED`).
    #[napi(
        ts_args_type = "table: string, index: string, lower: RangeBound | null | undefined, upper: RangeBound | null | undefined, options?: ScanOptions"
    )]
    pub fn range<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
        lower: Unknown<'_>,
        upper: Unknown<'_>,
        options: Option<ScanOptions>,
    ) -> Result<PromiseRaw<'env, LookupResult>> {
        let (lower, upper) = (value_bound(env, lower)?, value_bound(env, upper)?);
        let column = options.as_ref().and_then(|o| o.column.clone());
        let reverse = options.and_then(|o| o.reverse).unwrap_or(false);
        let h = self.handle.clone();
        env.spawn_future(async move {
            if let Some(c) = &column {
                read_verb!(&h, |o| o
                    .check_range_column(&table, &index, &lower, &upper, c)
                    .await)
                .map_err(to_js)?;
            }
            Ok(result(
                read_verb!(&h, |o| o
                    .range(&table, &index, lower.clone(), upper.clone(), reverse)
                    .await)
                .map_err(to_js)?,
            ))
        })
    }

    /// IS NULL over a leading run of columns: `null` = IS NULL, a value = equality,
    /// `undefined` = unconstrained (only after the last constrained column).
    #[napi(
        ts_args_type = "table: string, index: string, prefix: unknown[], options?: { reverse?: boolean }"
    )]
    pub fn nulls<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
        prefix: Unknown<'_>,
        options: Option<ScanOptions>,
    ) -> Result<PromiseRaw<'env, LookupResult>> {
        let mut items = Vec::new();
        for item in js_items(env, prefix, "prefix")? {
            items.push(match item {
                Some(v) if v.get_type()? != ValueType::Undefined => Some(js_value(v)?),
                _ => None, // undefined or a hole: unconstrained
            });
        }
        let reverse = options.and_then(|o| o.reverse).unwrap_or(false);
        let h = self.handle.clone();
        env.spawn_future(async move {
            Ok(result(
                read_verb!(&h, |o| o.nulls(&table, &index, &items, reverse).await)
                    .map_err(to_js)?,
            ))
        })
    }

    /// Where rows with stable ids `rowIds` are; files without a usable row-id summary list
    /// the ids that may be in them as candidates.
    #[napi]
    pub async fn locate(&self, table: String, row_ids: Vec<BigInt>) -> Result<LocateResult> {
        let ids = row_ids
            .iter()
            .map(|b| u64_arg(b, "a row id"))
            .collect::<Result<Vec<_>>>()?;
        let h = self.handle.clone();
        let r = read_verb!(&h, |o| o.locate(&table, &ids).await).map_err(to_js)?;
        Ok(LocateResult {
            rows: r
                .rows
                .into_iter()
                .map(|x| Row {
                    file: x.file,
                    position: big(x.position),
                    row_id: x.row_id.map(big),
                })
                .collect(),
            candidates: r
                .candidates
                .into_iter()
                .map(|c| Candidates {
                    file: c.file,
                    row_ids: c.row_ids.into_iter().map(big).collect(),
                })
                .collect(),
        })
    }

    /// Fetches `columns` of `rows` (as lookups return them) in the order given, reading only
    /// the pages that hold them, at the data files' recorded versions: `{ ipc, json }` where
    /// `ipc` is an Arrow IPC stream and `json` the rows as JSON (the facade's `fetchRows`
    /// turns it into plain objects).
    #[napi]
    pub async fn fetch_rows_raw(
        &self,
        table: String,
        rows: Vec<Row>,
        columns: Vec<String>,
    ) -> Result<FetchedRows> {
        let rows: Vec<skerry_core::query::RowRef> = rows
            .into_iter()
            .map(|r| {
                Ok(skerry_core::query::RowRef {
                    position: u64_arg(&r.position, "a row's position")?,
                    row_id: r
                        .row_id
                        .as_ref()
                        .map(|b| u64_arg(b, "a row's rowId"))
                        .transpose()?,
                    file: r.file,
                })
            })
            .collect::<Result<_>>()?;
        let h = self.handle.clone();
        let batch = read_verb!(&h, |o| o.fetch(&table, &rows, &columns).await).map_err(to_js)?;
        let ipc = skerry_core::query::to_ipc(&batch).map_err(to_js)?;
        let json = skerry_core::query::to_json_rows(&batch)
            .map_err(to_js)?
            .to_string();
        Ok(FetchedRows {
            ipc: ipc.into(),
            json,
        })
    }

    /// Answers `where` over `table` — indexes where the read gate accepts them, Parquet scans
    /// (statistics, page index) where not, delete masks applied — and fetches `columns` of
    /// the matching rows (first `limit` in file order, then position). The facade's `query`
    /// returns `{ ipc, rows, refs, stats }` and emits `warning` events for rejected indexes.
    #[napi(
        ts_args_type = "table: string, options?: { where?: Record<string, unknown>; columns?: string[]; limit?: number; verify?: boolean }"
    )]
    pub fn query_raw<'env>(
        &self,
        env: &'env Env,
        table: String,
        options: Option<Unknown<'_>>,
    ) -> Result<PromiseRaw<'env, QueryRaw>> {
        let q = js_query(env, options)?;
        let h = self.handle.clone();
        env.spawn_future(async move {
            let r = read_verb!(&h, |o| o.query(&table, &q).await).map_err(to_js)?;
            let ipc = skerry_core::query::to_ipc(&r.batch).map_err(to_js)?;
            let json = skerry_core::query::to_json_rows(&r.batch)
                .map_err(to_js)?
                .to_string();
            Ok(QueryRaw {
                ipc: ipc.into(),
                json,
                refs: r
                    .rows
                    .into_iter()
                    .map(|x| Row {
                        file: x.file,
                        position: big(x.position),
                        row_id: x.row_id.map(big),
                    })
                    .collect(),
                stats: query_stats(r.stats),
            })
        })
    }

    /// Files queued for repair because a query rejected their index of `index`.
    #[napi]
    pub async fn repairs(&self, table: String, index: String) -> Result<Vec<Repair>> {
        let r = self
            .writer()?
            .repairs(&table, &index)
            .await
            .map_err(to_js)?;
        Ok(r.into_iter()
            .map(|e| Repair {
                path: e.path,
                reason: e.reason,
                message: e.message,
            })
            .collect())
    }

    /// With `on`, every lookup answers every file by scanning it, ignoring indexes (the same
    /// answer; for benchmarks and debugging).
    #[napi]
    pub fn set_scan_only(&self, on: bool) {
        read_verb!(&self.handle, |o| o.set_scan_only(on));
    }

    /// Whether this overlay was opened read-only.
    #[napi(getter)]
    pub fn read_only(&self) -> bool {
        matches!(self.handle, Handle::Reader(_))
    }

    /// Registers more Parquet files of `table` (paths relative to its location), keeping
    /// every index whole in the same commit (see the README's lifecycle section).
    #[napi]
    pub async fn register_files(
        &self,
        table: String,
        files: Vec<String>,
    ) -> Result<RegisterReport> {
        let r = self
            .writer()?
            .register_files(&table, &files)
            .await
            .map_err(to_js)?;
        Ok(RegisterReport {
            files: r.files as i64,
            rows: r.rows as i64,
            entries: r.entries as i64,
            bundles_written: r.bundles_written as i64,
            poisoned: r.poisoned,
            attempts: r.attempts as i64,
        })
    }

    /// Records deleted rows by position and releases the unique claims naming them.
    #[napi]
    pub async fn register_deletes(
        &self,
        table: String,
        deletes: Vec<FileDeletes>,
    ) -> Result<DeleteReport> {
        let deletes = deletes
            .into_iter()
            .map(|d| {
                Ok(skerry_core::lifecycle::FileDeletes {
                    file: d.file,
                    positions: d.positions.into_iter().map(u64_of).collect::<Result<_>>()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let r = self
            .writer()?
            .register_deletes(&table, &deletes)
            .await
            .map_err(to_js)?;
        Ok(DeleteReport {
            rows_deleted: r.rows_deleted as i64,
            claims_removed: r.claims_removed as i64,
        })
    }

    /// One bounded, resumable step of building `index`.
    #[napi]
    pub async fn build_step(
        &self,
        table: String,
        index: String,
        options: Option<StepOptions>,
    ) -> Result<StepReport> {
        let mut opts = skerry_core::build::StepOptions::default();
        if let Some(o) = options {
            if let Some(n) = o.max_entries {
                opts.max_entries = n.max(0) as u64;
            }
            if let Some(n) = o.max_bytes {
                opts.max_bytes = n.max(0) as u64;
            }
        }
        let s = self
            .writer()?
            .build_step(&table, &index, opts)
            .await
            .map_err(to_js)?;
        Ok(StepReport {
            index: s.index,
            state: s.state.to_string(),
            done: s.done,
            step: s.step as i64,
            entries: s.entries as i64,
            entry_bytes: s.entry_bytes as i64,
            files_completed: s.files_completed,
            bundles_written: s.bundles_written as i64,
            bytes_written: s.bytes_written as i64,
            skipped: skipped(s.skipped),
            cursor: s.cursor.map(|c| CursorInfo {
                file: c.file,
                position: c.position as i64,
            }),
            rows_done: s.rows_done as i64,
            rows_total: s.rows_total as i64,
        })
    }

    /// The indexes of `table`, in id order.
    #[napi]
    pub async fn list_indexes(&self, table: String) -> Result<Vec<IndexInfo>> {
        let v = self.writer()?.list_indexes(&table).await.map_err(to_js)?;
        Ok(v.into_iter()
            .map(|i| IndexInfo {
                name: i.name,
                index_id: big(i.index_id),
                fields: i.fields,
                unique: i.unique,
                state: i.state.to_string(),
            })
            .collect())
    }

    /// Drops `name` and purges it: bundles rewritten without its blobs, records and claims
    /// reclaimed, unreferenced objects deleted.
    #[napi]
    pub async fn drop_index_purge(&self, table: String, name: String) -> Result<VacuumReport> {
        let r = self
            .writer()?
            .drop_index_purge(&table, &name)
            .await
            .map_err(to_js)?;
        Ok(vacuum_report(r))
    }

    /// Deletes manifests beyond the newest `retainVersions`, reclaims dropped indexes, and
    /// deletes objects nothing retained references.
    #[napi]
    pub async fn vacuum(&self, options: Option<VacuumOptions>) -> Result<VacuumReport> {
        let retain = options.and_then(|o| o.retain_versions).unwrap_or(1);
        let r = self
            .writer()?
            .vacuum(skerry_core::lifecycle::VacuumOptions {
                retain_versions: retain.max(0) as u64,
            })
            .await
            .map_err(to_js)?;
        Ok(vacuum_report(r))
    }

    /// Recomputes `index` from the live rows and compares; a clean pass records a certificate.
    #[napi]
    pub async fn verify(&self, table: String, index: String) -> Result<VerifyReport> {
        let r = self.writer()?.verify(&table, &index).await.map_err(to_js)?;
        Ok(VerifyReport {
            files: r.files as i64,
            files_unindexed: r.files_unindexed as i64,
            stored: r.stored as i64,
            expected: r.expected as i64,
            missing: r.missing as i64,
            dead: r.dead as i64,
            mismatched: r.mismatched as i64,
            certified: r.certified,
            repairs_queued: r.repairs_queued as i64,
        })
    }

    /// The certificate of `index`'s last clean verify, while it stands.
    #[napi]
    pub async fn certificate(&self, table: String, index: String) -> Result<Option<Certificate>> {
        let c = self
            .writer()?
            .certificate(&table, &index)
            .await
            .map_err(to_js)?;
        Ok(c.map(|c| Certificate {
            snapshot: c.snapshot as i64,
            generation: c.generation as i64,
            catalog_version: c.catalog_version as i64,
            entries: c.entries as i64,
        }))
    }

    /// Closes the catalog (waits for durability of everything committed); a read-only
    /// overlay has nothing to close.
    #[napi]
    pub async fn close(&self) -> Result<()> {
        match &self.handle {
            Handle::Writer(o) => o.close().await.map_err(to_js),
            Handle::Reader(_) => Ok(()),
        }
    }
}
