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
/// Most values (of any type, nested ones included, skipped ones too) one file may hold: a
/// bound on decoding time.
pub const MAX_VALUES: u64 = 50_000_000;
/// Most values one file may decode into memory (skipped fields excluded): a bound on what
/// the decoded records occupy (~32 bytes each).
pub const MAX_KEPT_VALUES: u64 = 4_000_000;

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

/// What a file may still decode: all values (time), and values kept in memory.
struct Limits {
    values: u64,
    kept: u64,
}

impl Limits {
    fn count(&mut self, what: &str, keep: bool) -> Result<()> {
        if self.values == 0 || (keep && self.kept == 0) {
            return Err(fail(what, "too many values"));
        }
        self.values -= 1;
        if keep {
            self.kept -= 1;
        }
        Ok(())
    }
}

/// Decodes a datum; record fields named in `skip` (at any depth) are stepped over without
/// being kept, and are absent from their record.
fn decode(c: &mut Cursor<'_>, s: &Schema, lim: &mut Limits, skip: &[&str]) -> Result<Value> {
    lim.count(c.what, true)?;
    Ok(match s {
        Schema::Null => Value::Null,
        Schema::Bool => Value::Bool(read_bool(c)?),
        Schema::Int => Value::Long(read_int(c)?),
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
        Schema::Enum(n) => Value::Enum(read_enum(c, *n)?),
        Schema::Union(branches) => {
            let b = branch(c, branches)?;
            decode(c, b, lim, skip)?
        }
        Schema::Record(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (n, fs) in fields {
                if skip.contains(&n.as_str()) {
                    step_over(c, fs, lim)?;
                } else {
                    out.push((n.clone(), decode(c, fs, lim, skip)?));
                }
            }
            Value::Record(out)
        }
        Schema::Array(items) => {
            let mut out = Vec::new();
            for_blocks(c, lim, |c, lim| {
                out.push(decode(c, items, lim, skip)?);
                Ok(())
            })?;
            Value::Array(out)
        }
        Schema::Map(values) => {
            let mut out = Vec::new();
            for_blocks(c, lim, |c, lim| {
                let n = c.len()?;
                let k = std::str::from_utf8(c.take(n)?)
                    .map_err(|_| fail(c.what, "a map key is not UTF-8"))?
                    .to_string();
                out.push((k, decode(c, values, lim, skip)?));
                Ok(())
            })?;
            Value::Map(out)
        }
    })
}

/// Steps over a datum without keeping it (still checked and counted).
fn step_over(c: &mut Cursor<'_>, s: &Schema, lim: &mut Limits) -> Result<()> {
    lim.count(c.what, false)?;
    match s {
        Schema::Null => {}
        Schema::Bool => {
            read_bool(c)?;
        }
        Schema::Int => {
            read_int(c)?;
        }
        Schema::Long => {
            c.long()?;
        }
        Schema::Float => {
            c.take(4)?;
        }
        Schema::Double => {
            c.take(8)?;
        }
        Schema::Bytes | Schema::Str => {
            let n = c.len()?;
            c.take(n)?;
        }
        Schema::Fixed(n) => {
            c.take(*n)?;
        }
        Schema::Enum(n) => {
            read_enum(c, *n)?;
        }
        Schema::Union(branches) => {
            let b = branch(c, branches)?;
            step_over(c, b, lim)?
        }
        Schema::Record(fields) => {
            for (_, fs) in fields {
                step_over(c, fs, lim)?;
            }
        }
        Schema::Array(items) => for_blocks(c, lim, |c, lim| step_over(c, items, lim))?,
        Schema::Map(values) => for_blocks(c, lim, |c, lim| {
            let n = c.len()?;
            c.take(n)?;
            step_over(c, values, lim)
        })?,
    }
    Ok(())
}

fn read_bool(c: &mut Cursor<'_>) -> Result<bool> {
    match c.take(1)?[0] {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(fail(c.what, format!("boolean byte {b}"))),
    }
}

fn read_int(c: &mut Cursor<'_>) -> Result<i64> {
    let v = c.long()?;
    i32::try_from(v).map_err(|_| fail(c.what, "int out of range"))?;
    Ok(v)
}

fn read_enum(c: &mut Cursor<'_>, n: u32) -> Result<u32> {
    let i = c.long()?;
    match u32::try_from(i) {
        Ok(i) if i < n => Ok(i),
        _ => Err(fail(c.what, format!("enum index {i}"))),
    }
}

fn branch<'s>(c: &mut Cursor<'_>, branches: &'s [Schema]) -> Result<&'s Schema> {
    let i = c.long()?;
    usize::try_from(i)
        .ok()
        .and_then(|i| branches.get(i))
        .ok_or_else(|| fail(c.what, format!("union branch {i}")))
}

/// The blocks of an array or map: counts until 0 (a negative count is followed by the
/// block's byte size). Item counts are bounded by the value limit.
fn for_blocks<'a>(
    c: &mut Cursor<'a>,
    lim: &mut Limits,
    mut item: impl FnMut(&mut Cursor<'a>, &mut Limits) -> Result<()>,
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
        if n as u64 > lim.values {
            return Err(fail(c.what, "too many values"));
        }
        for _ in 0..n {
            item(c, lim)?;
        }
    }
}

/// Reads an object container: the header (magic, metadata with `avro.schema` and
/// `avro.codec`, sync marker), then every block (`null`, `deflate` or `zstandard` codec —
/// each block one zstd frame — inflated under the bounds), checking each
/// block's sync marker and record count. Record fields named in `skip` are checked but not
/// kept. Errors: `E_ICEBERG` naming `what`.
pub fn read_container(bytes: &[u8], what: &str, skip: &[&str]) -> Result<Container> {
    let mut c = Cursor {
        b: bytes,
        at: 0,
        what,
    };
    if c.take(4).ok() != Some(b"Obj\x01".as_slice()) {
        return Err(fail(what, "no magic"));
    }
    let mut metadata = HashMap::new();
    let mut header = Limits {
        values: 1 << 16,
        kept: 1 << 16,
    };
    for_blocks(&mut c, &mut header, |c, _| {
        let n = c.len()?;
        let k = String::from_utf8_lossy(c.take(n)?).into_owned();
        let n = c.len()?;
        let v = c.take(n)?.to_vec();
        metadata.insert(k, v);
        Ok(())
    })?;
    #[derive(PartialEq)]
    enum BlockCodec {
        Null,
        Deflate,
        Zstandard,
    }
    let codec = match metadata.get("avro.codec").map(Vec::as_slice) {
        None | Some(b"null") => BlockCodec::Null,
        Some(b"deflate") => BlockCodec::Deflate,
        Some(b"zstandard") => BlockCodec::Zstandard,
        Some(other) => {
            return Err(Error::Iceberg(format!(
                "{what}: Avro codec {:?} is not supported (null, deflate and zstandard are)",
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
    let mut lim = Limits {
        values: MAX_VALUES,
        kept: MAX_KEPT_VALUES,
    };
    let mut inflated = 0usize;
    let mut records = Vec::new();
    while !c.done() {
        let count = c.long()?;
        if count < 0 || count as u64 > lim.values {
            return Err(fail(what, "block count"));
        }
        let size = c.len()?;
        let data = c.take(size)?;
        if c.take(16)? != sync {
            return Err(fail(what, "sync marker mismatch"));
        }
        let owned;
        let block = match codec {
            BlockCodec::Null => data,
            BlockCodec::Deflate | BlockCodec::Zstandard => {
                owned = if codec == BlockCodec::Deflate {
                    miniz_oxide::inflate::decompress_to_vec_with_limit(data, MAX_INFLATED_BLOCK)
                        .map_err(|_| fail(what, "a deflate block does not inflate within bounds"))?
                } else {
                    crate::formats::codec::decompress(
                        crate::formats::codec::Codec::Zstd,
                        data,
                        MAX_INFLATED_BLOCK as u64,
                    )
                    .map_err(|_| {
                        fail(what, "a zstandard block does not decompress within bounds")
                    })?
                };
                inflated += owned.len();
                if inflated > MAX_INFLATED_FILE {
                    return Err(fail(what, "inflates past the bound"));
                }
                owned.as_slice()
            }
        };
        let mut bc = Cursor {
            b: block,
            at: 0,
            what,
        };
        for _ in 0..count {
            records.push(decode(&mut bc, &schema, &mut lim, skip)?);
        }
        if !bc.done() {
            return Err(fail(what, "bytes left after a block's records"));
        }
    }
    Ok(Container { metadata, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zigzag(v: i64, out: &mut Vec<u8>) {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let b = (u & 0x7f) as u8;
            u >>= 7;
            if u == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(b: &[u8], out: &mut Vec<u8>) {
        zigzag(b.len() as i64, out);
        out.extend(b);
    }

    /// A null-codec container of `schema` with one block of `count` records `body`.
    fn container(schema: &str, count: i64, body: &[u8]) -> Vec<u8> {
        let mut out = b"Obj\x01".to_vec();
        zigzag(2, &mut out);
        bytes(b"avro.schema", &mut out);
        bytes(schema.as_bytes(), &mut out);
        bytes(b"avro.codec", &mut out);
        bytes(b"null", &mut out);
        zigzag(0, &mut out);
        let sync = [7u8; 16];
        out.extend(sync);
        zigzag(count, &mut out);
        bytes(body, &mut out);
        out.extend(sync);
        out
    }

    const SCHEMA: &str = r#"{"type": "record", "name": "r", "fields": [
        {"name": "keep", "type": {"type": "array", "items": "int"}},
        {"name": "stats", "type": {"type": "map", "values": "long"}}]}"#;

    /// An array of `n` ones, then a map of `m` entries.
    fn record(n: i64, m: i64) -> Vec<u8> {
        let mut b = Vec::new();
        zigzag(n, &mut b);
        b.extend(std::iter::repeat_n(2u8, n as usize));
        zigzag(0, &mut b);
        if m > 0 {
            zigzag(m, &mut b);
            for i in 0..m {
                bytes(format!("k{i}").as_bytes(), &mut b);
                zigzag(i, &mut b);
            }
        }
        zigzag(0, &mut b);
        b
    }

    #[test]
    fn skipped_fields_are_checked_but_not_kept() {
        let c = container(SCHEMA, 1, &record(3, 5));
        let all = read_container(&c, "t", &[]).unwrap();
        let Value::Record(f) = &all.records[0] else {
            panic!()
        };
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].1, Value::Array(vec![Value::Long(1); 3]));
        let some = read_container(&c, "t", &["stats"]).unwrap();
        let Value::Record(f) = &some.records[0] else {
            panic!()
        };
        assert_eq!(f.len(), 1, "the skipped map is absent");
        // A skipped field is still checked: a truncated map fails.
        let mut bad = record(3, 5);
        bad.truncate(bad.len() - 3);
        let c = container(SCHEMA, 1, &bad);
        assert_eq!(
            read_container(&c, "t", &["stats"]).unwrap_err().code(),
            "E_ICEBERG"
        );
    }

    /// What a file keeps in memory is bounded while decoding: an array of more than
    /// MAX_KEPT_VALUES values fails, the same values in a skipped field do not.
    #[test]
    fn kept_values_are_bounded_while_decoding() {
        let n = MAX_KEPT_VALUES as i64 + 10;
        let c = container(SCHEMA, 1, &record(n, 0));
        let e = read_container(&c, "t", &[]).unwrap_err();
        assert!(e.to_string().contains("too many values"), "{e}");
        let c2 = container(
            r#"{"type": "record", "name": "r", "fields": [
                {"name": "stats", "type": {"type": "array", "items": "int"}},
                {"name": "x", "type": {"type": "map", "values": "long"}}]}"#,
            1,
            &record(n, 0),
        );
        assert_eq!(
            read_container(&c2, "t", &["stats"]).unwrap().records.len(),
            1
        );
        // A block claiming more records than the limit fails before decoding any.
        let c3 = container(SCHEMA, MAX_VALUES as i64 + 1, &record(1, 0));
        assert_eq!(
            read_container(&c3, "t", &[]).unwrap_err().code(),
            "E_ICEBERG"
        );
    }

    #[test]
    fn schemas_that_reference_themselves_or_nest_too_deep_are_refused() {
        let recursive = r#"{"type": "record", "name": "node", "fields": [
            {"name": "next", "type": ["null", "node"]}]}"#;
        let c = container(recursive, 1, &[0]);
        assert_eq!(
            read_container(&c, "t", &[]).unwrap_err().code(),
            "E_ICEBERG"
        );
        let mut deep = String::from("\"int\"");
        for _ in 0..40 {
            deep = format!(r#"{{"type": "array", "items": {deep}}}"#);
        }
        let c = container(&deep, 0, &[]);
        assert_eq!(
            read_container(&c, "t", &[]).unwrap_err().code(),
            "E_ICEBERG"
        );
    }
}
