//! Iceberg table metadata (`*.metadata.json`), format versions 1, 2 and 3: the fields Skerry
//! reads, parsed with serde and checked (spec: "Table Metadata", "Snapshots", "Schemas").
//! Unknown fields are ignored, as the spec asks of readers.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Newest table format version this build reads.
pub const MAX_FORMAT_VERSION: u8 = 3;
/// Largest metadata file read.
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

fn bad(what: impl Into<String>) -> Error {
    Error::Iceberg(what.into())
}

/// A table metadata file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TableMetadata {
    pub format_version: u8,
    #[serde(default)]
    pub table_uuid: Option<String>,
    /// The table's base location: every manifest and data file Skerry reads must be under it.
    pub location: String,
    #[serde(default)]
    pub last_sequence_number: i64,
    #[serde(default)]
    pub last_updated_ms: i64,
    #[serde(default)]
    pub current_schema_id: Option<i32>,
    #[serde(default)]
    pub schemas: Vec<Schema>,
    /// Format version 1's single schema (when `schemas` is absent).
    #[serde(default)]
    pub schema: Option<Schema>,
    #[serde(default)]
    pub default_spec_id: Option<i32>,
    #[serde(default)]
    pub partition_specs: Vec<PartitionSpec>,
    /// `-1` or absent: no snapshot.
    #[serde(default)]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    #[serde(default)]
    pub refs: BTreeMap<String, SnapshotRef>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// Format version 3: the first row id the next snapshot assigns.
    #[serde(default)]
    pub next_row_id: Option<i64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    pub snapshot_id: i64,
    #[serde(default)]
    pub parent_snapshot_id: Option<i64>,
    /// Absent in format version 1 (read as 0, per the spec).
    #[serde(default)]
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    /// The manifest list (every version-2+ snapshot has one).
    #[serde(default)]
    pub manifest_list: Option<String>,
    /// Format version 1 snapshots may list manifests inline instead.
    #[serde(default)]
    pub manifests: Option<Vec<String>>,
    #[serde(default)]
    pub summary: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub schema_id: Option<i32>,
    /// Format version 3: the first row id assigned to rows added by this snapshot.
    #[serde(default)]
    pub first_row_id: Option<i64>,
}

impl Snapshot {
    /// `summary.operation` (`append`, `overwrite`, `delete`, `replace`).
    pub fn operation(&self) -> Option<&str> {
        self.summary.get("operation").and_then(|v| v.as_str())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SnapshotRef {
    pub snapshot_id: i64,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Schema {
    #[serde(default)]
    pub schema_id: i32,
    pub fields: Vec<Field>,
}

/// A schema field. `field_type` is the spec's JSON type: a string for primitives (`long`,
/// `string`, `decimal(9,2)`, …) or an object for `struct`, `list` and `map`.
#[derive(Clone, Debug, Deserialize)]
pub struct Field {
    pub id: i32,
    pub name: String,
    pub required: bool,
    #[serde(rename = "type")]
    pub field_type: serde_json::Value,
    #[serde(default)]
    pub doc: Option<String>,
}

impl Field {
    /// The primitive type name (`None` for nested types).
    pub fn primitive(&self) -> Option<&str> {
        self.field_type.as_str()
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionSpec {
    pub spec_id: i32,
    pub fields: Vec<PartitionField>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionField {
    pub source_id: i32,
    #[serde(default)]
    pub field_id: Option<i32>,
    pub name: String,
    pub transform: String,
}

/// The newest metadata file among the names in a table's `metadata/` directory: the highest
/// version of `v<N>.metadata.json` (Hadoop tables) or `<NNNNN>-<uuid>.metadata.json`
/// (catalog tables), either optionally `.gz.metadata.json`. `None` when there is none.
pub fn newest_metadata<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .filter_map(|n| metadata_version(n).map(|v| (v, n)))
        .max()
        .map(|(_, n)| n)
}

/// The version a metadata file name carries (see [`newest_metadata`]).
pub fn metadata_version(name: &str) -> Option<u64> {
    let stem = name
        .strip_suffix(".gz.metadata.json")
        .or_else(|| name.strip_suffix(".metadata.json"))?;
    let digits = match stem.strip_prefix('v') {
        Some(rest) => rest,
        None => stem.split('-').next()?,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A metadata file's JSON: as is, or gunzipped when it is gzip (`.gz.metadata.json`),
/// inflating at most [`MAX_METADATA_BYTES`]. Errors: `E_ICEBERG`.
pub fn metadata_json(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>> {
    if bytes.get(..2) != Some(&[0x1f, 0x8b][..]) {
        return Ok(bytes.into());
    }
    // RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS, optional FEXTRA / FNAME / FCOMMENT / FHCRC,
    // then raw deflate, then CRC32 and ISIZE.
    let bad_gz = || bad("gzip-compressed metadata is malformed");
    if bytes.len() < 18 || bytes[2] != 8 {
        return Err(bad_gz());
    }
    let flags = bytes[3];
    let mut at = 10usize;
    if flags & 0x04 != 0 {
        let n = bytes.get(at..at + 2).ok_or_else(bad_gz)?;
        at += 2 + u16::from_le_bytes([n[0], n[1]]) as usize;
    }
    for bit in [0x08, 0x10] {
        if flags & bit != 0 {
            let nul = bytes.get(at..).and_then(|r| r.iter().position(|&b| b == 0));
            at += nul.ok_or_else(bad_gz)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    let body = bytes.get(at..bytes.len() - 8).ok_or_else(bad_gz)?;
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_METADATA_BYTES as usize)
        .map_err(|_| bad("gzip-compressed metadata does not inflate within bounds"))?;
    Ok(out.into())
}

impl TableMetadata {
    /// Parses and checks a metadata file: a supported format version, a location, snapshot
    /// ids unique, the current snapshot and every ref naming a snapshot that exists, a
    /// manifest list (or v1 manifests) per snapshot. Errors: `E_ICEBERG`.
    pub fn from_json(bytes: &[u8]) -> Result<TableMetadata> {
        let bytes = metadata_json(bytes)?;
        let m: TableMetadata =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("table metadata: {e}")))?;
        if m.format_version == 0 || m.format_version > MAX_FORMAT_VERSION {
            return Err(bad(format!(
                "table format version {} is not supported (this build reads 1 to {MAX_FORMAT_VERSION})",
                m.format_version
            )));
        }
        if m.location.is_empty() {
            return Err(bad("table metadata has no location"));
        }
        let mut ids = std::collections::HashSet::new();
        for s in &m.snapshots {
            if !ids.insert(s.snapshot_id) {
                return Err(bad(format!("snapshot {} is listed twice", s.snapshot_id)));
            }
            if s.manifest_list.is_none() && s.manifests.is_none() {
                return Err(bad(format!(
                    "snapshot {} has neither a manifest list nor manifests",
                    s.snapshot_id
                )));
            }
            if s.sequence_number < 0 {
                return Err(bad(format!(
                    "snapshot {}: negative sequence number",
                    s.snapshot_id
                )));
            }
        }
        if let Some(c) = m.current_snapshot() {
            if !ids.contains(&c) {
                return Err(bad(format!(
                    "current snapshot {c} is not among the snapshots"
                )));
            }
        }
        for (name, r) in &m.refs {
            if !ids.contains(&r.snapshot_id) {
                return Err(bad(format!(
                    "ref {name} names snapshot {} which is not among the snapshots",
                    r.snapshot_id
                )));
            }
        }
        Ok(m)
    }

    /// The current snapshot's id (`None` for a table without snapshots; the spec writes
    /// `-1` or omits it).
    pub fn current_snapshot(&self) -> Option<i64> {
        match self.refs.get("main") {
            Some(r) => Some(r.snapshot_id),
            None => self.current_snapshot_id.filter(|&id| id != -1),
        }
    }

    /// Snapshot `id`. Errors: `E_NOT_FOUND` (e.g. expired).
    pub fn snapshot(&self, id: i64) -> Result<&Snapshot> {
        self.snapshots
            .iter()
            .find(|s| s.snapshot_id == id)
            .ok_or_else(|| Error::NotFound {
                kind: "snapshot",
                name: id.to_string(),
            })
    }

    /// The schema with `id`, or the current schema (format version 1: the single `schema`).
    pub fn schema_by_id(&self, id: Option<i32>) -> Result<&Schema> {
        let want = id.or(self.current_schema_id);
        match want {
            Some(id) => self
                .schemas
                .iter()
                .find(|s| s.schema_id == id)
                .or(self.schema.as_ref().filter(|s| s.schema_id == id)),
            None => self.schema.as_ref().or(self.schemas.last()),
        }
        .ok_or_else(|| bad(format!("schema {want:?} is not in the table metadata")))
    }

    /// The current schema.
    pub fn current_schema(&self) -> Result<&Schema> {
        self.schema_by_id(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = r#"{
      "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
      "location": "s3://bucket/test/location", "last-sequence-number": 34,
      "last-updated-ms": 1602638573590, "last-column-id": 3, "current-schema-id": 1,
      "schemas": [
        {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "required": true, "type": "long"}]},
        {"type": "struct", "schema-id": 1, "identifier-field-ids": [1, 2], "fields": [
          {"id": 1, "name": "x", "required": true, "type": "long"},
          {"id": 2, "name": "y", "required": true, "type": "long", "doc": "comment"},
          {"id": 3, "name": "z", "required": true, "type": "long"}]}],
      "default-spec-id": 0,
      "partition-specs": [{"spec-id": 0, "fields": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}]}],
      "last-partition-id": 1000, "default-sort-order-id": 3, "sort-orders": [],
      "properties": {}, "current-snapshot-id": 3055729675574597004,
      "snapshots": [
        {"snapshot-id": 3051729675574597004, "timestamp-ms": 1515100955770, "sequence-number": 0,
         "summary": {"operation": "append"}, "manifest-list": "s3://a/b/1.avro"},
        {"snapshot-id": 3055729675574597004, "parent-snapshot-id": 3051729675574597004,
         "timestamp-ms": 1555100955770, "sequence-number": 1,
         "summary": {"operation": "append"}, "manifest-list": "s3://a/b/2.avro", "schema-id": 1}],
      "snapshot-log": [], "metadata-log": []
    }"#;

    #[test]
    fn reads_the_spec_example() {
        let m = TableMetadata::from_json(V2.as_bytes()).unwrap();
        assert_eq!(m.format_version, 2);
        assert_eq!(m.current_snapshot(), Some(3055729675574597004));
        let s = m.snapshot(3055729675574597004).unwrap();
        assert_eq!(s.sequence_number, 1);
        assert_eq!(s.operation(), Some("append"));
        let schema = m.current_schema().unwrap();
        assert_eq!(schema.fields.len(), 3);
        assert_eq!(schema.fields[1].primitive(), Some("long"));
        assert_eq!(m.schema_by_id(Some(0)).unwrap().fields.len(), 1);
        assert_eq!(m.snapshot(7).unwrap_err().code(), "E_NOT_FOUND");
    }

    #[test]
    fn finds_the_newest_metadata_file() {
        let names = [
            "00002-aa.metadata.json",
            "00010-bb.metadata.json",
            "00009-cc.gz.metadata.json",
            "version-hint.text",
            "snap-1-0-x.avro",
            "x.metadata.json",
        ];
        assert_eq!(newest_metadata(names), Some("00010-bb.metadata.json"));
        assert_eq!(
            newest_metadata([
                "v1.metadata.json",
                "v12.gz.metadata.json",
                "v9.metadata.json"
            ]),
            Some("v12.gz.metadata.json")
        );
        assert_eq!(newest_metadata(["a.avro", "vx.metadata.json"]), None);
    }

    #[test]
    fn gzip_metadata_is_inflated_bounded() {
        // gzip of the spec example with an FNAME field (as `gzip` writes it).
        let deflated = miniz_oxide::deflate::compress_to_vec(V2.as_bytes(), 6);
        let mut gz = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 3];
        gz.extend(b"m.json\0");
        gz.extend(&deflated);
        gz.extend([0u8; 8]); // CRC32 and ISIZE are not needed to inflate
        let m = TableMetadata::from_json(&gz).unwrap();
        assert_eq!(m.format_version, 2);
        for bad in [
            &gz[..12],
            &gz[..gz.len() - 20],
            &[0x1f, 0x8b, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
        ] {
            assert_eq!(
                TableMetadata::from_json(bad).unwrap_err().code(),
                "E_ICEBERG"
            );
        }
    }

    #[test]
    fn refuses_what_it_cannot_trust() {
        let cases = [
            V2.replace("\"format-version\": 2", "\"format-version\": 4"),
            V2.replace(
                "\"current-snapshot-id\": 3055729675574597004",
                "\"current-snapshot-id\": 5",
            ),
            V2.replace(
                "3051729675574597004, \"timestamp-ms\"",
                "3055729675574597004, \"timestamp-ms\"",
            ),
            V2.replace("\"manifest-list\": \"s3://a/b/1.avro\"", "\"x\": 1"),
            V2.replace(
                "\"location\": \"s3://bucket/test/location\"",
                "\"location\": \"\"",
            ),
            V2[..V2.len() / 2].to_string(),
            "[]".to_string(),
        ];
        for c in cases {
            assert_eq!(
                TableMetadata::from_json(c.as_bytes()).unwrap_err().code(),
                "E_ICEBERG",
                "{c}"
            );
        }
    }
}
