//! A bounded reader of Avro object container files (Avro 1.11 spec, "Object Container
//! Files" and "Binary Encoding"), enough for Iceberg manifest lists and manifests: the
//! writer's schema from the header drives a generic decode into [`Value`]s.
//!
//! Why not `apache-avro`: its schema parser `unwrap`s on a schema name that fails validation
//! (found by this module's damage test), and its deflate codec inflates without a bound; in
//! the wasm reader a panic kills the host. This reader never panics on any input: every
//! length is checked against the bytes left, deflate blocks inflate under
//! [`MAX_INFLATED_BLOCK`] / [`MAX_INFLATED_FILE`], schemas nest at most [`MAX_DEPTH`] deep,
//! and a file decodes at most [`MAX_VALUES`] values.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Largest Avro block after inflating, and largest total of a file's inflated blocks.
pub const MAX_INFLATED_BLOCK: usize = 64 << 20;
pub const MAX_INFLATED_FILE: usize = 512 << 20;
/// Deepest schema nesting accepted.
pub const MAX_DEPTH: usize = 32;
/// Most values (of any type, nested ones included) one file may decode to.
pub const MAX_VALUES: u64 = 50_000_000;

/// A decoded datum. `int` and `long` are [`Value::Long`], `float` and `double`
/// [`Value::Double`], `bytes` and `fixed` [`Value::Bytes`]; a union decodes to its branch.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Bytes(Vec<u8>),
    Str(String),
    Enum(u32),
    Array(Vec<Value>),
    Map(Vec<(String, Value)>),
    Record(Vec<(String, Value)>),
}

/// A parsed writer schema.
#[derive(Clone, Debug)]
enum Schema {
    Null,
    Bool,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    Str,
    Fixed(usize),
    Enum(u32),
    Array(Box<Schema>),
    Map(Box<Schema>),
    Union(Vec<Schema>),
    Record(Vec<(String, Schema)>),
}

/// An Avro object container: its user metadata and its records.
#[derive(Debug)]
pub struct Container {
    pub metadata: HashMap<String, Vec<u8>>,
    pub records: Vec<Value>,
}

fn fail(what: &str, why: impl std::fmt::Display) -> Error {
    Error::Iceberg(format!("{what}: not a readable Avro file ({why})"))
}

/// A cursor over bytes that never reads past their end.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    what: &'a str,
}

impl<'a> Cursor<'a> {
    fn long(&mut self) -> Result<i64> {
        let (mut v, mut shift) = (0u64, 0u32);
        loop {
            let b = *self
                .b
                .get(self.at)
                .ok_or_else(|| fail(self.what, "truncated"))?;
            self.at += 1;
            if shift > 63 {
                return Err(fail(self.what, "varint too long"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| fail(self.what, "truncated"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn len(&mut self) -> Result<usize> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| fail(self.what, "negative length"))
    }

    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
}

/// Parses the writer schema JSON. Named types may be referenced after their definition.
fn parse_schema(json: &[u8], what: &str) -> Result<Schema> {
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| fail(what, format!("schema: {e}")))?;
    let mut named: HashMap<String, Schema> = HashMap::new();
    schema_of(&v, &mut named, 0, what)
}

fn schema_of(
    v: &serde_json::Value,
    named: &mut HashMap<String, Schema>,
    depth: usize,
    what: &str,
) -> Result<Schema> {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return Err(fail(what, "schema nests too deep"));
    }
    match v {
        J::String(name) => primitive(name)
            .or_else(|| named.get(name.as_str()).cloned())
            .or_else(|| {
                // A reference by short name to a type defined with a namespace.
                named
                    .iter()
                    .find(|(k, _)| k.rsplit('.').next() == Some(name.as_str()))
                    .map(|(_, s)| s.clone())
            })
            .ok_or_else(|| fail(what, format!("unknown type {name:?}"))),
        J::Array(branches) => Ok(Schema::Union(
            branches
                .iter()
                .map(|b| schema_of(b, named, depth + 1, what))
                .collect::<Result<_>>()?,
        )),
        J::Object(o) => {
            let t = o
                .get("type")
                .ok_or_else(|| fail(what, "a schema without a type"))?;
            let kind = match t {
                J::String(s) => s.as_str(),
                // {"type": {...}}: a wrapped schema.
                other => return schema_of(other, named, depth + 1, what),
            };
            let name = o.get("name").and_then(|n| n.as_str()).map(|n| {
                match o.get("namespace").and_then(|ns| ns.as_str()) {
                    Some(ns) if !ns.is_empty() && !n.contains('.') => format!("{ns}.{n}"),
                    _ => n.to_string(),
                }
            });
            let s = match kind {
                "record" | "error" => {
                    let fields = o
                        .get("fields")
                        .and_then(|f| f.as_array())
                        .ok_or_else(|| fail(what, "a record without fields"))?;
                    let mut out = Vec::with_capacity(fields.len().min(1024));
                    for f in fields {
                        let n = f
                            .get("name")
                            .and_then(|n| n.as_str())
                            .ok_or_else(|| fail(what, "a field without a name"))?;
                        let ty = f
                            .get("type")
                            .ok_or_else(|| fail(what, "a field without a type"))?;
                        out.push((n.to_string(), schema_of(ty, named, depth + 1, what)?));
                    }
                    Schema::Record(out)
                }
                "enum" => {
                    let n = o
                        .get("symbols")
                        .and_then(|s| s.as_array())
                        .ok_or_else(|| fail(what, "an enum without symbols"))?
                        .len();
                    Schema::Enum(u32::try_from(n).map_err(|_| fail(what, "enum"))?)
                }
                "array" => Schema::Array(Box::new(schema_of(
                    o.get("items")
                        .ok_or_else(|| fail(what, "an array without items"))?,
                    named,
                    depth + 1,
                    what,
                )?)),
                "map" => Schema::Map(Box::new(schema_of(
                    o.get("values")
                        .ok_or_else(|| fail(what, "a map without values"))?,
                    named,
                    depth + 1,
                    what,
                )?)),
                "fixed" => Schema::Fixed(
                    o.get("size")
                        .and_then(|s| s.as_u64())
                        .and_then(|s| usize::try_from(s).ok())
                        .filter(|&s| s <= 1 << 20)
                        .ok_or_else(|| fail(what, "a fixed without a size"))?,
                ),
                // A primitive with attributes (e.g. a logical type): the primitive.
                p => primitive(p).ok_or_else(|| fail(what, format!("unknown type {p:?}")))?,
            };
            if let Some(n) = name {
                named.insert(n, s.clone());
            }
            Ok(s)
        }
        _ => Err(fail(what, "a schema is not a string, array or object")),
    }
}

fn primitive(name: &str) -> Option<Schema> {
    Some(match name {
        "null" => Schema::Null,
        "boolean" => Schema::Bool,
        "int" => Schema::Int,
        "long" => Schema::Long,
        "float" => Schema::Float,
        "double" => Schema::Double,
        "bytes" => Schema::Bytes,
        "string" => Schema::Str,
        _ => return None,
    })
}

fn decode(c: &mut Cursor<'_>, s: &Schema, budget: &mut u64) -> Result<Value> {
    if *budget == 0 {
        return Err(fail(c.what, "too many values"));
    }
    *budget -= 1;
    Ok(match s {
        Schema::Null => Value::Null,
        Schema::Bool => match c.take(1)?[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => return Err(fail(c.what, format!("boolean byte {b}"))),
        },
        Schema::Int => {
            let v = c.long()?;
            i32::try_from(v).map_err(|_| fail(c.what, "int out of range"))?;
            Value::Long(v)
        }
        Schema::Long => Value::Long(c.long()?),
        Schema::Float => {
            let b = c.take(4)?;
            Value::Double(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        }
        Schema::Double => {
            let b = c.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Value::Double(f64::from_le_bytes(a))
        }
        Schema::Bytes => {
            let n = c.len()?;
            Value::Bytes(c.take(n)?.to_vec())
        }
        Schema::Fixed(n) => Value::Bytes(c.take(*n)?.to_vec()),
        Schema::Str => {
            let n = c.len()?;
            let b = c.take(n)?;
            Value::Str(
                std::str::from_utf8(b)
                    .map_err(|_| fail(c.what, "a string is not UTF-8"))?
                    .to_string(),
            )
        }
        Schema::Enum(n) => {
            let i = c.long()?;
            match u32::try_from(i) {
                Ok(i) if i < *n => Value::Enum(i),
                _ => return Err(fail(c.what, format!("enum index {i}"))),
            }
        }
        Schema::Union(branches) => {
            let i = c.long()?;
            let b = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| fail(c.what, format!("union branch {i}")))?;
            decode(c, b, budget)?
        }
        Schema::Record(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (n, fs) in fields {
                out.push((n.clone(), decode(c, fs, budget)?));
            }
            Value::Record(out)
        }
        Schema::Array(items) => {
            let mut out = Vec::new();
            for_blocks(c, budget, |c, budget| {
                out.push(decode(c, items, budget)?);
                Ok(())
            })?;
            Value::Array(out)
        }
        Schema::Map(values) => {
            let mut out = Vec::new();
            for_blocks(c, budget, |c, budget| {
                let n = c.len()?;
                let k = std::str::from_utf8(c.take(n)?)
                    .map_err(|_| fail(c.what, "a map key is not UTF-8"))?
                    .to_string();
                out.push((k, decode(c, values, budget)?));
                Ok(())
            })?;
            Value::Map(out)
        }
    })
}

/// The blocks of an array or map: counts until 0 (a negative count is followed by the
/// block's byte size). Item counts are bounded by the value budget.
fn for_blocks<'a>(
    c: &mut Cursor<'a>,
    budget: &mut u64,
    mut item: impl FnMut(&mut Cursor<'a>, &mut u64) -> Result<()>,
) -> Result<()> {
    loop {
        let mut n = c.long()?;
        if n == 0 {
            return Ok(());
        }
        if n < 0 {
            n = n.checked_neg().ok_or_else(|| fail(c.what, "block count"))?;
            c.long()?;
        }
        if n as u64 > *budget {
            return Err(fail(c.what, "too many values"));
        }
        for _ in 0..n {
            item(c, budget)?;
        }
    }
}

/// Reads an object container: the header (magic, metadata with `avro.schema` and
/// `avro.codec`, sync marker), then every block (`null` or `deflate` codec), checking each
/// block's sync marker and record count. Errors: `E_ICEBERG` naming `what`.
pub fn read_container(bytes: &[u8], what: &str) -> Result<Container> {
    let mut c = Cursor {
        b: bytes,
        at: 0,
        what,
    };
    if c.take(4).ok() != Some(b"Obj\x01".as_slice()) {
        return Err(fail(what, "no magic"));
    }
    let mut metadata = HashMap::new();
    let mut entries = 1u64 << 16; // header metadata entries
    for_blocks(&mut c, &mut entries, |c, _| {
        let n = c.len()?;
        let k = String::from_utf8_lossy(c.take(n)?).into_owned();
        let n = c.len()?;
        let v = c.take(n)?.to_vec();
        metadata.insert(k, v);
        Ok(())
    })?;
    let deflate = match metadata.get("avro.codec").map(Vec::as_slice) {
        None | Some(b"null") => false,
        Some(b"deflate") => true,
        Some(other) => {
            return Err(Error::Iceberg(format!(
                "{what}: Avro codec {:?} is not supported (null and deflate are)",
                String::from_utf8_lossy(other)
            )))
        }
    };
    let schema = parse_schema(
        metadata
            .get("avro.schema")
            .ok_or_else(|| fail(what, "no schema"))?,
        what,
    )?;
    let sync = c.take(16)?;
    let mut budget = MAX_VALUES;
    let mut inflated = 0usize;
    let mut records = Vec::new();
    while !c.done() {
        let count = c.long()?;
        if count < 0 || count as u64 > budget {
            return Err(fail(what, "block count"));
        }
        let size = c.len()?;
        let data = c.take(size)?;
        if c.take(16)? != sync {
            return Err(fail(what, "sync marker mismatch"));
        }
        let owned;
        let block = if deflate {
            owned = miniz_oxide::inflate::decompress_to_vec_with_limit(data, MAX_INFLATED_BLOCK)
                .map_err(|_| fail(what, "a deflate block does not inflate within bounds"))?;
            inflated += owned.len();
            if inflated > MAX_INFLATED_FILE {
                return Err(fail(what, "inflates past the bound"));
            }
            owned.as_slice()
        } else {
            data
        };
        let mut bc = Cursor {
            b: block,
            at: 0,
            what,
        };
        for _ in 0..count {
            records.push(decode(&mut bc, &schema, &mut budget)?);
        }
        if !bc.done() {
            return Err(fail(what, "bytes left after a block's records"));
        }
    }
    Ok(Container { metadata, records })
}
