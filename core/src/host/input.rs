//! Arguments from a JavaScript host, parsed once for both bindings.

use super::HostValue;
use crate::error::{Error, Result};
use crate::read::lookup::RowRef;
use crate::read::plan::Query;
use crate::read::predicate::{Condition, Op};
use crate::values::{KeyError, Value, ValueBound};

/// `E_INVALID` with `message`.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid(message.into())
}

/// A string argument, or `E_INVALID` naming it.
pub fn text(v: &HostValue, method: &str, name: &str) -> Result<String> {
    match v {
        HostValue::String(s) => Ok(s.clone()),
        _ => Err(invalid(format!("{method}: {name} must be a string"))),
    }
}

/// An optional options object (`undefined`/`null` or a plain object), or `E_INVALID`.
pub fn options<'a>(v: &'a HostValue, method: &str) -> Result<&'a HostValue> {
    match v {
        HostValue::Undefined | HostValue::Null | HostValue::Object(_) => Ok(v),
        _ => Err(invalid(format!("{method}: options must be an object"))),
    }
}

/// An optional boolean property of an options object (absent: `false`).
pub fn flag(o: &HostValue, method: &str, name: &str) -> Result<bool> {
    match o.get(name) {
        HostValue::Undefined => Ok(false),
        HostValue::Bool(b) => Ok(*b),
        _ => Err(invalid(format!(
            "{method}: options.{name} must be a boolean"
        ))),
    }
}

/// A non-negative integer (a bigint, or a number up to 2^53) as a u64, or `E_INVALID`
/// naming it: no sign or high bits are dropped.
pub fn u64_value(v: &HostValue, method: &str, name: &str) -> Result<u64> {
    let bad = || {
        invalid(format!(
            "{method}: {name} must be an integer from 0 to 2^64-1"
        ))
    };
    match v {
        HostValue::BigInt(Some(i)) => u64::try_from(*i).map_err(|_| bad()),
        HostValue::Number(f) if *f >= 0.0 && f.fract() == 0.0 && *f <= 9_007_199_254_740_992.0 => {
            Ok(*f as u64)
        }
        _ => Err(bad()),
    }
}

/// `createIndex`'s options (`undefined`/`null` for the defaults), every property checked
/// by type here and by the kind it belongs to in [`crate::index::IndexSpec::from_options`].
pub fn index_options(v: &HostValue) -> Result<crate::index::IndexOptions> {
    use crate::index::{analyzer::Tokenizer, vector::MetricName, IndexKind};
    const M: &str = "createIndex";
    let o = options(v, M)?;
    let word = |name: &str| -> Result<Option<String>> {
        match o.get(name) {
            HostValue::Undefined => Ok(None),
            HostValue::String(s) => Ok(Some(s.clone())),
            _ => Err(invalid(format!("{M}: options.{name} must be a string"))),
        }
    };
    let count = |name: &str| -> Result<Option<u64>> {
        match o.get(name) {
            HostValue::Undefined => Ok(None),
            v => u64_value(v, M, &format!("options.{name}")).map(Some),
        }
    };
    // A count past what the kind allows is the kind's "outside" error, not a type error.
    let small = |name: &str, range: &str| -> Result<Option<u16>> {
        count(name)?
            .map(|n| {
                u16::try_from(n).map_err(|_| invalid(format!("{name} {n} is outside {range}")))
            })
            .transpose()
    };
    Ok(crate::index::IndexOptions {
        unique: flag(o, M, "unique")?,
        kind: word("kind")?
            .map(|s| IndexKind::parse(&s))
            .transpose()?
            .unwrap_or_default(),
        max_cardinality: count("maxCardinality")?,
        fpp: match o.get("fpp") {
            HostValue::Undefined => None,
            HostValue::Number(n) => Some(*n),
            _ => return Err(invalid(format!("{M}: options.fpp must be a number"))),
        },
        tokenizer: word("tokenizer")?
            .map(|s| Tokenizer::parse(&s))
            .transpose()?,
        positions: match o.get("positions") {
            HostValue::Undefined => None,
            _ => Some(flag(o, M, "positions")?),
        },
        metric: word("metric")?.map(|s| MetricName::parse(&s)).transpose()?,
        m: small("m", "2..=64")?,
        ef_construction: small("efConstruction", "8..=2000")?,
    })
}

/// The elements of an array argument, or `E_INVALID` naming it.
pub fn array<'a>(v: &'a HostValue, method: &str, name: &str) -> Result<&'a [HostValue]> {
    match v {
        HostValue::Array(items) => Ok(items),
        HostValue::Other(what) if *what == super::TOO_LONG => {
            Err(invalid(format!("{method}: {name} is {what}")))
        }
        _ => Err(invalid(format!("{method}: {name} must be an array"))),
    }
}

/// A key value: `null`/`undefined`, boolean, number, bigint (within the 64-bit integer
/// range), string or bytes. The index column's type decides the final type.
pub fn key_value(v: &HostValue) -> Result<Value> {
    Ok(match v {
        HostValue::Undefined | HostValue::Null => Value::Null,
        HostValue::Bool(b) => Value::Bool(*b),
        HostValue::Number(n) => Value::Float64(*n),
        HostValue::String(s) => Value::String(s.clone()),
        HostValue::Bytes(b) => Value::Binary(b.clone()),
        HostValue::BigInt(Some(i)) if *i >= i64::MIN as i128 && *i <= i64::MAX as i128 => {
            Value::Int(*i as i64)
        }
        HostValue::BigInt(Some(i)) if *i >= 0 && *i <= u64::MAX as i128 => Value::UInt(*i as u64),
        HostValue::BigInt(_) => {
            return Err(KeyError::InvalidType {
                reason: "bigint key out of 64-bit range".into(),
            }
            .into())
        }
        other => {
            return Err(KeyError::InvalidType {
                reason: format!(
                    "a key value is null, boolean, number, bigint, string or Uint8Array, not {}",
                    other.type_name()
                ),
            }
            .into())
        }
    })
}

/// A key: one value, or an array of leading column values.
pub fn key_values(v: &HostValue) -> Result<Vec<Value>> {
    match v {
        HostValue::Array(items) => items.iter().map(key_value).collect(),
        other => Ok(vec![key_value(other)?]),
    }
}

/// The keys of `lookupMany`: an array of keys.
pub fn keys(v: &HostValue, method: &str) -> Result<Vec<Vec<Value>>> {
    array(v, method, "keys")?.iter().map(key_values).collect()
}

/// A range bound: `{ key, inclusive = true }`, or `null`/`undefined` for unbounded.
pub fn bound(v: &HostValue, method: &str, name: &str) -> Result<ValueBound> {
    match v {
        HostValue::Undefined | HostValue::Null => Ok(ValueBound::Unbounded),
        HostValue::Object(_) => {
            let key = v.get("key");
            if matches!(key, HostValue::Undefined) {
                return Err(invalid(format!("{method}: {name} needs a key")));
            }
            let values = key_values(key)?;
            let inclusive = match v.get("inclusive") {
                HostValue::Undefined => true,
                HostValue::Bool(b) => *b,
                _ => {
                    return Err(invalid(format!(
                        "{method}: {name}.inclusive must be a boolean"
                    )))
                }
            };
            Ok(if inclusive {
                ValueBound::Included(values)
            } else {
                ValueBound::Excluded(values)
            })
        }
        _ => Err(invalid(format!(
            "{method}: {name} must be {{ key, inclusive?: boolean }} or null"
        ))),
    }
}

/// Options of `range`: `{ reverse?: boolean, column?: string }`.
pub fn range_options(v: &HostValue, method: &str) -> Result<(bool, Option<String>)> {
    let o = options(v, method)?;
    let column = match o.get("column") {
        HostValue::Undefined => None,
        c => Some(text(c, method, "options.column")?),
    };
    Ok((flag(o, method, "reverse")?, column))
}

/// The prefix of `nulls`: `null` = IS NULL, a value = equality, `undefined` (or a hole) =
/// unconstrained.
pub fn nulls_prefix(v: &HostValue, method: &str) -> Result<Vec<Option<Value>>> {
    array(v, method, "prefix")?
        .iter()
        .map(|x| match x {
            HostValue::Undefined => Ok(None),
            x => key_value(x).map(Some),
        })
        .collect()
}

/// Row ids (bigints, or numbers up to 2^53).
pub fn row_ids(v: &HostValue, method: &str) -> Result<Vec<u64>> {
    array(v, method, "rowIds")?
        .iter()
        .map(|x| u64_value(x, method, "rowIds[]"))
        .collect()
}

/// Rows as lookups return them: `[{ file, position, rowId? }]`.
pub fn row_refs(v: &HostValue, method: &str) -> Result<Vec<RowRef>> {
    array(v, method, "rows")?
        .iter()
        .map(|r| {
            if !matches!(r, HostValue::Object(_)) {
                return Err(invalid(format!(
                    "{method}: rows are {{ file, position, rowId? }}"
                )));
            }
            Ok(RowRef {
                file: text(r.get("file"), method, "rows[].file")?,
                position: u64_value(r.get("position"), method, "rows[].position")?,
                row_id: match r.get("rowId") {
                    HostValue::Undefined | HostValue::Null => None,
                    x => Some(u64_value(x, method, "rows[].rowId")?),
                },
            })
        })
        .collect()
}

/// Column names.
pub fn columns(v: &HostValue, method: &str, name: &str) -> Result<Vec<String>> {
    array(v, method, name)?
        .iter()
        .map(|c| text(c, method, &format!("{name}[]")))
        .collect()
}

/// `where`: `{ column: value | null | { eq, in, lt, lte, gt, gte, between, isNull } }` — a
/// bare value is `=`, `null` is IS NULL.
pub fn where_conditions(w: &HostValue) -> Result<Vec<Condition>> {
    let props = match w {
        HostValue::Undefined | HostValue::Null => return Ok(vec![]),
        HostValue::Object(props) => props,
        _ => return Err(invalid("`where` must be an object of column conditions")),
    };
    let mut out = Vec::new();
    for (column, v) in props {
        let ops = match v {
            HostValue::Null => {
                out.push(Condition::new(column, Op::IsNull));
                continue;
            }
            HostValue::Object(ops) => ops,
            other => {
                out.push(Condition::new(column, Op::Eq(key_value(other)?)));
                continue;
            }
        };
        if ops.is_empty() {
            return Err(invalid(format!("no condition given for column {column}")));
        }
        for (name, x) in ops {
            let list = |what: &str| -> Result<Vec<Value>> {
                match x {
                    HostValue::Array(items) => items.iter().map(key_value).collect(),
                    HostValue::Other(t) if *t == super::TOO_LONG => {
                        Err(invalid(format!("{what} on {column} is {t}")))
                    }
                    _ => Err(invalid(format!("{what} must be an array"))),
                }
            };
            let op = match name.as_str() {
                "eq" => Op::Eq(key_value(x)?),
                "lt" => Op::Lt(key_value(x)?),
                "lte" => Op::Le(key_value(x)?),
                "gt" => Op::Gt(key_value(x)?),
                "gte" => Op::Ge(key_value(x)?),
                "in" => Op::In(list("an IN list")?),
                "between" => {
                    let mut b = list("between")?;
                    if b.len() != 2 {
                        return Err(invalid("between is [low, high]"));
                    }
                    let hi = b.pop().unwrap_or(Value::Null);
                    Op::Between(b.pop().unwrap_or(Value::Null), hi)
                }
                "isNull" if matches!(x, HostValue::Bool(true)) => Op::IsNull,
                "isNull" => {
                    return Err(invalid(
                        "isNull takes `true` (IS NOT NULL is not supported)",
                    ))
                }
                other => {
                    return Err(invalid(format!(
                        "unknown operator {other} on {column} (eq, in, lt, lte, gt, gte, between, isNull)"
                    )))
                }
            };
            out.push(Condition::new(column, op));
        }
    }
    Ok(out)
}

/// Options of `query`: `{ where?, columns?, limit?, verify? }`.
pub fn query(v: &HostValue) -> Result<Query> {
    query_of(v, "query")
}

/// A query's options as `method` (`query`, `count`, `search`) takes them; errors name it.
fn query_of(v: &HostValue, method: &str) -> Result<Query> {
    let o = options(v, method)?;
    let mut q = Query {
        conditions: where_conditions(o.get("where"))?,
        ..Query::default()
    };
    let cols = o.get("columns");
    if !cols.is_nullish() {
        q.columns = Some(columns(cols, method, "columns")?);
    }
    match o.get("limit") {
        HostValue::Undefined | HostValue::Null => {}
        HostValue::Number(n) if *n >= 0.0 && n.fract() == 0.0 && *n <= 9_007_199_254_740_991.0 => {
            q.limit = Some(*n as u64)
        }
        _ => {
            return Err(invalid(format!(
                "{method}: limit is a non-negative integer"
            )))
        }
    }
    q.verify_files = flag(o, method, "verify")?;
    q.snapshot = match o.get("snapshot") {
        HostValue::Undefined | HostValue::Null => None,
        HostValue::BigInt(Some(i)) => Some(
            i64::try_from(*i)
                .map_err(|_| invalid(format!("{method}: snapshot is out of the 64-bit range")))?,
        ),
        HostValue::Number(n) if n.fract() == 0.0 && n.abs() <= 9_007_199_254_740_991.0 => {
            Some(*n as i64)
        }
        HostValue::String(t) => Some(t.parse::<i64>().map_err(|_| {
            invalid(format!(
                "{method}: snapshot is a snapshot id (a bigint or its decimal string)"
            ))
        })?),
        _ => {
            return Err(invalid(format!(
                "{method}: snapshot is a snapshot id (a bigint or its decimal string)"
            )))
        }
    };
    Ok(q)
}

/// Options of `count`: `{ where?, verify?, snapshot? }` (a `query`'s, without `columns` and
/// `limit`, which do not apply to a count).
pub fn count(v: &HostValue) -> Result<Query> {
    let q = query_of(v, "count")?;
    if q.columns.is_some() || q.limit.is_some() {
        return Err(invalid(
            "count: options are { where, verify, snapshot } (columns and limit do not apply)",
        ));
    }
    Ok(q)
}

/// Longest `query` text a search accepts (bytes).
pub const MAX_SEARCH_TEXT: usize = 16 * 1024;

/// Options of `search`: `{ query, phrase?, operator?, k?, index?, where?, columns?, verify?,
/// snapshot? }`.
pub fn search(v: &HostValue) -> Result<crate::read::search::Search> {
    use crate::read::search::{Operator, Search, MAX_SEARCH_K};
    if !matches!(v, HostValue::Object(_)) {
        return Err(invalid(
            "search: options must be an object with a query string",
        ));
    }
    let text = match v.get("query") {
        HostValue::String(s) if s.len() <= MAX_SEARCH_TEXT => s.clone(),
        HostValue::String(_) => {
            return Err(invalid(format!(
                "search: options.query is longer than {MAX_SEARCH_TEXT} bytes"
            )))
        }
        _ => return Err(invalid("search: options.query must be a string")),
    };
    if !v.get("limit").is_nullish() {
        return Err(invalid("search: results are counted by k, not limit"));
    }
    let q = query_of(v, "search")?;
    let k = match v.get("k") {
        HostValue::Undefined | HostValue::Null => 10,
        HostValue::Number(n) if n.fract() == 0.0 && *n >= 1.0 && *n <= MAX_SEARCH_K as f64 => {
            *n as usize
        }
        _ => {
            return Err(invalid(format!(
                "search: k is an integer from 1 to {MAX_SEARCH_K}"
            )))
        }
    };
    let operator = match v.get("operator") {
        HostValue::Undefined | HostValue::Null => Operator::Or,
        HostValue::String(s) if s == "or" => Operator::Or,
        HostValue::String(s) if s == "and" => Operator::And,
        _ => return Err(invalid("search: operator is \"or\" or \"and\"")),
    };
    let name = |key: &str| -> Result<Option<String>> {
        match v.get(key) {
            HostValue::Undefined | HostValue::Null => Ok(None),
            HostValue::String(s) => Ok(Some(s.clone())),
            _ => Err(invalid(format!("search: {key} is an index name"))),
        }
    };
    let index = name("index")?;
    // Hybrid: a vector, and where its nearest rows come from.
    let vector = vector_of(v, "search")?;
    let vector_index = name("vectorIndex")?;
    let vector_column = match v.get("vectorColumn") {
        HostValue::Undefined | HostValue::Null => None,
        HostValue::String(s) => Some(s.clone()),
        _ => return Err(invalid("search: vectorColumn is a column name")),
    };
    let ef = match v.get("ef") {
        HostValue::Undefined | HostValue::Null => None,
        HostValue::Number(n)
            if n.fract() == 0.0 && *n >= 1.0 && *n <= crate::read::nearest::MAX_EF as f64 =>
        {
            Some(*n as usize)
        }
        _ => {
            return Err(invalid(format!(
                "search: ef is an integer from 1 to {}",
                crate::read::nearest::MAX_EF
            )))
        }
    };
    if vector.is_none() && (vector_index.is_some() || vector_column.is_some() || ef.is_some()) {
        return Err(invalid(
            "search: vectorIndex, vectorColumn and ef belong to a hybrid search: give a vector",
        ));
    }
    Ok(Search {
        query: text,
        phrase: flag(v, "search", "phrase")?,
        operator,
        k,
        index,
        conditions: q.conditions,
        columns: q.columns,
        verify_files: q.verify_files,
        pin_versions: false,
        snapshot: q.snapshot,
        vector,
        vector_index,
        vector_column,
        ef,
    })
}

/// `options.vector` of `verb`: `None` when absent; an array of finite numbers within
/// float32's range, at most [`crate::index::vector::MAX_DIM`] of them.
fn vector_of(v: &HostValue, verb: &str) -> Result<Option<Vec<f32>>> {
    match v.get("vector") {
        HostValue::Undefined | HostValue::Null => Ok(None),
        HostValue::Array(items) if items.len() <= crate::index::vector::MAX_DIM => {
            let mut out = Vec::with_capacity(items.len());
            for (i, x) in items.iter().enumerate() {
                match x {
                    HostValue::Number(n) if (*n as f32).is_finite() => out.push(*n as f32),
                    _ => {
                        return Err(invalid(format!(
                            "{verb}: vector[{i}] is not a finite number within float32's range"
                        )))
                    }
                }
            }
            Ok(Some(out))
        }
        HostValue::Array(_) => Err(invalid(format!(
            "{verb}: vector has more than {} dimensions",
            crate::index::vector::MAX_DIM
        ))),
        _ => Err(invalid(format!(
            "{verb}: options.vector must be an array of numbers"
        ))),
    }
}

/// Options of `nearest`: `{ vector, k?, ef?, column?, index?, where?, columns?, verify?,
/// snapshot? }`; `vector` an array of finite numbers (stored as float32).
pub fn nearest(v: &HostValue) -> Result<crate::read::nearest::Nearest> {
    use crate::read::nearest::{Nearest, MAX_EF, MAX_NEAREST_K};
    if !matches!(v, HostValue::Object(_)) {
        return Err(invalid(
            "nearest: options must be an object with a vector (an array of numbers)",
        ));
    }
    let vector = match vector_of(v, "nearest")? {
        Some(x) => x,
        None => {
            return Err(invalid(
                "nearest: options.vector must be an array of numbers",
            ))
        }
    };
    if !v.get("limit").is_nullish() {
        return Err(invalid("nearest: results are counted by k, not limit"));
    }
    let count = |name: &str, default: Option<usize>, max: usize| -> Result<Option<usize>> {
        match v.get(name) {
            HostValue::Undefined | HostValue::Null => Ok(default),
            HostValue::Number(n) if n.fract() == 0.0 && *n >= 1.0 && *n <= max as f64 => {
                Ok(Some(*n as usize))
            }
            _ => Err(invalid(format!(
                "nearest: {name} is an integer from 1 to {max}"
            ))),
        }
    };
    let k = count("k", Some(10), MAX_NEAREST_K)?.unwrap_or(10);
    let ef = count("ef", None, MAX_EF)?;
    let nprobe = count("nprobe", None, crate::read::nearest::MAX_NPROBE)?;
    let name = |key: &str| -> Result<Option<String>> {
        match v.get(key) {
            HostValue::Undefined | HostValue::Null => Ok(None),
            HostValue::String(s) => Ok(Some(s.clone())),
            _ => Err(invalid(format!("nearest: {key} must be a string"))),
        }
    };
    let index = name("index")?;
    let column = name("column")?;
    let q = query_of(v, "nearest")?;
    Ok(Nearest {
        vector,
        k,
        nprobe,
        ef,
        index,
        column,
        conditions: q.conditions,
        columns: q.columns,
        verify_files: q.verify_files,
        pin_versions: false,
        snapshot: q.snapshot,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(props: Vec<(&str, HostValue)>) -> HostValue {
        HostValue::Object(props.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    #[test]
    fn bigints_at_the_64_bit_limits() {
        let b = |i: i128| key_value(&HostValue::BigInt(Some(i)));
        assert_eq!(b(i64::MIN as i128).unwrap(), Value::Int(i64::MIN));
        assert_eq!(b(i64::MAX as i128).unwrap(), Value::Int(i64::MAX));
        assert_eq!(b(u64::MAX as i128).unwrap(), Value::UInt(u64::MAX));
        for bad in [i64::MIN as i128 - 1, u64::MAX as i128 + 1] {
            assert_eq!(b(bad).unwrap_err().code(), "E_KEY");
        }
        assert_eq!(
            key_value(&HostValue::BigInt(None)).unwrap_err().code(),
            "E_KEY"
        );
        assert_eq!(
            key_value(&HostValue::Other("function")).unwrap_err().code(),
            "E_KEY"
        );
    }

    #[test]
    fn where_shapes_and_errors() {
        let w = obj(vec![
            ("a", HostValue::Number(1.0)),
            ("b", HostValue::Null),
            (
                "c",
                obj(vec![(
                    "between",
                    HostValue::Array(vec![HostValue::Number(1.0), HostValue::Number(2.0)]),
                )]),
            ),
        ]);
        let c = where_conditions(&w).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].op, Op::IsNull);
        assert!(matches!(c[2].op, Op::Between(..)));
        for bad in [
            obj(vec![("a", obj(vec![]))]),
            obj(vec![("a", obj(vec![("like", HostValue::Null)]))]),
            obj(vec![("a", obj(vec![("in", HostValue::Number(1.0))]))]),
            obj(vec![("a", obj(vec![("isNull", HostValue::Bool(false))]))]),
            HostValue::Array(vec![]),
        ] {
            assert_eq!(where_conditions(&bad).unwrap_err().code(), "E_INVALID");
        }
    }

    #[test]
    fn u64_arguments_lose_nothing() {
        let u = |v: HostValue| u64_value(&v, "m", "x");
        assert_eq!(
            u(HostValue::BigInt(Some(u64::MAX as i128))).unwrap(),
            u64::MAX
        );
        assert!(u(HostValue::BigInt(Some(-1))).is_err());
        assert!(u(HostValue::Number(1.5)).is_err());
        assert!(u(HostValue::Number(-1.0)).is_err());
        assert!(u(HostValue::Number(2f64.powi(60))).is_err());
    }
}
