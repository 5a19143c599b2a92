//! Manifest lists and manifests (Avro object container files; spec: "Manifests", "Manifest
//! Lists", "Sequence Number Inheritance", "Row Lineage"): the live data and delete files of a
//! snapshot, with the sequence numbers, snapshot ids and first row ids they inherit.

use futures::StreamExt;

use super::avro::Value as AvroValue;
use super::metadata::{Snapshot, TableMetadata};
use super::relative_to;
use crate::error::{Error, Result};
use crate::io::{Location, RangeReader};

/// Largest manifest list read.
pub const MAX_MANIFEST_LIST_BYTES: u64 = 64 << 20;
/// Largest manifest read.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
/// Manifests read at once.
const MANIFEST_READS: usize = 8;

fn bad(what: impl Into<String>) -> Error {
    Error::Iceberg(what.into())
}

/// What a file holds (the spec's `content`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FileContent {
    Data,
    PositionDeletes,
    EqualityDeletes,
}

/// A live (not deleted) file of a snapshot, as its manifest entry and inheritance give it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LiveFile {
    /// Relative to the table location (checked: never outside it).
    pub path: String,
    pub content: FileContent,
    /// `PARQUET`, `AVRO`, `ORC` or `PUFFIN` (deletion vectors), as written.
    pub format: String,
    pub record_count: u64,
    pub size: u64,
    pub partition_spec_id: i32,
    /// The partition tuple, in a canonical text form: two files are in the same partition
    /// exactly when their specs and these strings are equal (spec: equality deletes apply
    /// within their partition).
    #[serde(default)]
    pub partition: String,
    /// The data sequence number (inherited from the manifest for ADDED entries).
    pub sequence_number: i64,
    pub file_sequence_number: i64,
    /// The snapshot that added the file.
    pub snapshot_id: i64,
    /// Format version 3: the row id of the file's first row (inherited per the spec's row
    /// lineage rules); `None` before version 3.
    pub first_row_id: Option<i64>,
    /// Delete files: the one data file they apply to, when the writer recorded it (relative).
    pub referenced_data_file: Option<String>,
    /// Deletion vectors: the blob's range in the Puffin file.
    pub content_offset: Option<i64>,
    pub content_size_in_bytes: Option<i64>,
    /// Equality delete files: the field ids of the equality columns.
    pub equality_ids: Vec<i32>,
}

/// The live files of one snapshot.
#[derive(Clone, Debug, Default)]
pub struct SnapshotFiles {
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub data: Vec<LiveFile>,
    pub deletes: Vec<LiveFile>,
    /// Manifests read (each one request) plus the manifest list.
    pub requests: u64,
    /// Bytes those requests returned.
    pub bytes: u64,
    /// Every manifest of the snapshot with its live files (those read and those `known`).
    pub manifests: Vec<ManifestFiles>,
}

/// The live files one manifest contributes to a snapshot. Manifests are immutable and a
/// manifest list entry's inherited values (sequence number, first row id) are fixed when the
/// manifest is first committed, so a manifest read once never needs reading again.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ManifestFiles {
    /// As the manifest list names it.
    pub path: String,
    /// The first row id the manifest list gives it (format version 3). A manifest committed
    /// before a table's upgrade to version 3 has none, and is given one by the first snapshot
    /// after: a known manifest is reused only when this matches too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row_id: Option<i64>,
    pub files: Vec<LiveFile>,
}

/// One Avro record, read by field name. Optional fields are unions with null, and writers
/// differ in which fields they write: every accessor unwraps unions and treats an absent
/// field and null alike.
struct Record<'a> {
    fields: &'a [(String, AvroValue)],
    what: &'a str,
}

impl<'a> Record<'a> {
    fn new(v: &'a AvroValue, what: &'a str) -> Result<Record<'a>> {
        match unwrap(v) {
            Some(AvroValue::Record(fields)) => Ok(Record { fields, what }),
            _ => Err(bad(format!("{what}: a record was expected"))),
        }
    }

    fn get(&self, name: &str) -> Option<&'a AvroValue> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| unwrap(v))
    }

    fn long(&self, name: &str) -> Result<Option<i64>> {
        use AvroValue as V;
        match self.get(name) {
            None => Ok(None),
            Some(V::Long(v)) => Ok(Some(*v)),
            Some(_) => Err(bad(format!("{}: {name} is not an integer", self.what))),
        }
    }

    fn required_long(&self, name: &str) -> Result<i64> {
        self.long(name)?
            .ok_or_else(|| bad(format!("{}: {name} is missing", self.what)))
    }

    fn string(&self, name: &str) -> Result<Option<&'a str>> {
        use AvroValue as V;
        match self.get(name) {
            None => Ok(None),
            Some(V::Str(s)) => Ok(Some(s)),
            Some(_) => Err(bad(format!("{}: {name} is not a string", self.what))),
        }
    }

    fn required_string(&self, name: &str) -> Result<&'a str> {
        self.string(name)?
            .ok_or_else(|| bad(format!("{}: {name} is missing", self.what)))
    }

    fn record(&self, name: &str) -> Result<Record<'a>> {
        match self.get(name) {
            Some(v) => Record::new(v, self.what),
            None => Err(bad(format!("{}: {name} is missing", self.what))),
        }
    }

    fn ints(&self, name: &str) -> Result<Vec<i32>> {
        use AvroValue as V;
        match self.get(name) {
            None => Ok(vec![]),
            Some(V::Array(items)) => items
                .iter()
                .map(|v| match unwrap(v) {
                    Some(V::Long(i)) => i32::try_from(*i)
                        .map_err(|_| bad(format!("{}: {name} out of range", self.what))),
                    _ => Err(bad(format!("{}: {name} holds a non-int", self.what))),
                })
                .collect(),
            Some(_) => Err(bad(format!("{}: {name} is not an array", self.what))),
        }
    }
}

/// `v`, or `None` for null (unions decode to their branch).
fn unwrap(v: &AvroValue) -> Option<&AvroValue> {
    match v {
        AvroValue::Null => None,
        v => Some(v),
    }
}

/// The records of an Avro object container, and its user metadata.
fn avro_records(bytes: &[u8], what: &str) -> Result<super::avro::Container> {
    super::avro::read_container(bytes, what, SKIPPED_FIELDS)
}

/// Fields of manifest lists and manifests Skerry does not use (yet): checked while decoding
/// but not kept, so a manifest's per-column statistics cost no memory.
const SKIPPED_FIELDS: &[&str] = &[
    "partitions",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "distinct_counts",
    "lower_bounds",
    "upper_bounds",
    "key_metadata",
    "split_offsets",
];

/// A manifest as the list (or a version-1 snapshot's inline list) names it.
struct ManifestRef {
    path: String,
    length: Option<u64>,
    spec_id: Option<i32>,
    content: i32,
    sequence_number: i64,
    added_snapshot_id: i64,
    first_row_id: Option<i64>,
}

fn non_negative(v: i64, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| bad(format!("{what} is negative ({v})")))
}

/// Reads the manifests of `snapshot_id` and returns its live data and delete files.
/// `r` reads paths relative to `meta.location`; every path the metadata names must be under
/// it. Errors: `E_NOT_FOUND` for an unknown (expired) snapshot, `E_ICEBERG` for anything
/// malformed, the reads' errors.
pub async fn snapshot_files<R: RangeReader + ?Sized>(
    r: &R,
    meta: &TableMetadata,
    snapshot_id: i64,
) -> Result<SnapshotFiles> {
    snapshot_files_since(r, meta, snapshot_id, &[]).await
}

/// [`snapshot_files`] reading only the manifests not in `known` (the manifests of a snapshot
/// read before, [`SnapshotFiles::manifests`]): the manifest list plus what changed since.
pub async fn snapshot_files_since<R: RangeReader + ?Sized>(
    r: &R,
    meta: &TableMetadata,
    snapshot_id: i64,
    known: &[ManifestFiles],
) -> Result<SnapshotFiles> {
    let snap = meta.snapshot(snapshot_id)?;
    let mut out = SnapshotFiles {
        snapshot_id,
        sequence_number: snap.sequence_number,
        ..Default::default()
    };
    let refs = manifest_refs(r, meta, snap, &mut out.requests, &mut out.bytes).await?;
    let known: std::collections::HashMap<&str, &ManifestFiles> =
        known.iter().map(|m| (m.path.as_str(), m)).collect();
    let reads = futures::stream::iter(refs.into_iter().map(|m| {
        let cached = known
            .get(m.path.as_str())
            .filter(|k| k.first_row_id == m.first_row_id)
            .map(|k| (*k).clone());
        async move {
            if let Some(k) = cached {
                return Ok::<_, Error>((k, 0u64));
            }
            let (files, n) = read_manifest(r, meta, &m).await?;
            Ok((
                ManifestFiles {
                    path: m.path,
                    first_row_id: m.first_row_id,
                    files,
                },
                n,
            ))
        }
    }))
    .buffered(MANIFEST_READS);
    let read: Vec<Result<_>> = reads.collect().await;
    for x in read {
        let (m, n) = x?;
        if n > 0 {
            out.requests += 1;
            out.bytes += n;
        }
        for f in &m.files {
            if f.content == FileContent::Data {
                out.data.push(f.clone());
            } else {
                out.deletes.push(f.clone());
            }
        }
        out.manifests.push(m);
    }
    // A live data file is in the snapshot once: listed twice (in one manifest or two), its
    // rows would count twice.
    let mut seen = std::collections::HashSet::with_capacity(out.data.len());
    if let Some(f) = out.data.iter().find(|f| !seen.insert(f.path.as_str())) {
        return Err(bad(format!(
            "snapshot {snapshot_id} lists data file {} more than once",
            f.path.chars().take(300).collect::<String>()
        )));
    }
    Ok(out)
}

/// The live files of one manifest, and the bytes read.
async fn read_manifest<R: RangeReader + ?Sized>(
    r: &R,
    meta: &TableMetadata,
    m: &ManifestRef,
) -> Result<(Vec<LiveFile>, u64)> {
    let v1 = meta.format_version == 1;
    let loc = Location::new(relative_to(&meta.location, &m.path)?);
    let max = m
        .length
        .unwrap_or(MAX_MANIFEST_BYTES)
        .min(MAX_MANIFEST_BYTES);
    let bytes = r.read_all_max(&loc, max).await.map_err(|e| match e {
        crate::io::IoError::TooLarge { .. } => bad(format!(
            "manifest {} is larger than the {max} bytes the manifest list records",
            m.path
        )),
        e => e.into(),
    })?;
    if m.length.is_some_and(|l| l != bytes.len() as u64) {
        return Err(bad(format!(
            "manifest {} is {} bytes, the manifest list says {}",
            m.path,
            bytes.len(),
            m.length.unwrap_or(0)
        )));
    }
    let super::avro::Container {
        records: entries,
        metadata: avro_meta,
    } = avro_records(&bytes, &m.path)?;
    let spec_id = match m.spec_id {
        Some(id) => id,
        None => avro_meta
            .get("partition-spec-id")
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    };
    let mut out = Vec::new();
    // Row lineage: ADDED/EXISTING data files without a first row id take the manifest's
    // first row id plus the rows of such files before them in the manifest.
    let mut next_row_id = m.first_row_id;
    for v in &entries {
        let e = Record::new(v, &m.path)?;
        let status = e.required_long("status")?;
        if !(0..=2).contains(&status) {
            return Err(bad(format!("{}: entry status {status}", m.path)));
        }
        if status == 2 {
            continue; // DELETED
        }
        let added = status == 1;
        let inherit = |own: Option<i64>, what: &str| -> Result<i64> {
            match own {
                Some(v) => Ok(v),
                None if added || v1 => Ok(m.sequence_number),
                None => Err(bad(format!(
                    "{}: an EXISTING entry without a {what}",
                    m.path
                ))),
            }
        };
        let sequence_number = if v1 {
            0
        } else {
            inherit(e.long("sequence_number")?, "sequence number")?
        };
        let file_sequence_number = if v1 {
            0
        } else {
            inherit(e.long("file_sequence_number")?, "file sequence number")?
        };
        let d = e.record("data_file")?;
        let content = match d.long("content")?.unwrap_or(0) {
            0 => FileContent::Data,
            1 => FileContent::PositionDeletes,
            2 => FileContent::EqualityDeletes,
            c => return Err(bad(format!("{}: file content {c}", m.path))),
        };
        if (content == FileContent::Data) != (m.content == 0) {
            return Err(bad(format!(
                "{}: a {content:?} file in a manifest of content {}",
                m.path, m.content
            )));
        }
        let record_count = non_negative(d.required_long("record_count")?, "record count")?;
        let mut first_row_id = None;
        if meta.format_version >= 3 && content == FileContent::Data {
            first_row_id = match (d.long("first_row_id")?, next_row_id) {
                (Some(v), _) => Some(v),
                (None, Some(n)) => {
                    next_row_id = Some(
                        n.checked_add(record_count as i64)
                            .ok_or_else(|| bad(format!("{}: row ids overflow", m.path)))?,
                    );
                    Some(n)
                }
                (None, None) => None,
            };
        }
        out.push(LiveFile {
            path: relative_to(&meta.location, d.required_string("file_path")?)?,
            content,
            format: d.required_string("file_format")?.to_ascii_uppercase(),
            record_count,
            size: non_negative(d.required_long("file_size_in_bytes")?, "file size")?,
            partition_spec_id: spec_id,
            partition: d
                .get("partition")
                .map(|p| format!("{p:?}"))
                .unwrap_or_default(),
            sequence_number,
            file_sequence_number,
            snapshot_id: e.long("snapshot_id")?.unwrap_or(m.added_snapshot_id),
            first_row_id,
            referenced_data_file: d
                .string("referenced_data_file")?
                .map(|p| relative_to(&meta.location, p))
                .transpose()?,
            content_offset: d.long("content_offset")?,
            content_size_in_bytes: d.long("content_size_in_bytes")?,
            equality_ids: d.ints("equality_ids")?,
        });
    }
    Ok((out, bytes.len() as u64))
}

/// The manifests of `snap`: its manifest list, or a version-1 snapshot's inline list.
async fn manifest_refs<R: RangeReader + ?Sized>(
    r: &R,
    meta: &TableMetadata,
    snap: &Snapshot,
    requests: &mut u64,
    bytes_read: &mut u64,
) -> Result<Vec<ManifestRef>> {
    let Some(list) = &snap.manifest_list else {
        let paths = snap.manifests.as_deref().unwrap_or_default();
        return Ok(paths
            .iter()
            .map(|p| ManifestRef {
                path: p.clone(),
                length: None,
                spec_id: None,
                content: 0,
                sequence_number: 0,
                added_snapshot_id: snap.snapshot_id,
                first_row_id: None,
            })
            .collect());
    };
    let loc = Location::new(relative_to(&meta.location, list)?);
    let bytes = r
        .read_all_max(&loc, MAX_MANIFEST_LIST_BYTES)
        .await
        .map_err(|e| match e {
            crate::io::IoError::TooLarge { .. } => bad(format!(
                "manifest list {list} is larger than {MAX_MANIFEST_LIST_BYTES} bytes"
            )),
            e => e.into(),
        })?;
    *requests += 1;
    *bytes_read += bytes.len() as u64;
    let records = avro_records(&bytes, list)?.records;
    records
        .iter()
        .map(|v| {
            let m = Record::new(v, list)?;
            let content = m.long("content")?.unwrap_or(0);
            if !(0..=1).contains(&content) {
                return Err(bad(format!("{list}: manifest content {content}")));
            }
            Ok(ManifestRef {
                length: m
                    .long("manifest_length")?
                    .map(|l| non_negative(l, "manifest length"))
                    .transpose()?,
                path: m.required_string("manifest_path")?.to_string(),
                spec_id: Some(
                    i32::try_from(m.long("partition_spec_id")?.unwrap_or(0))
                        .map_err(|_| bad(format!("{list}: partition spec id")))?,
                ),
                content: content as i32,
                // Format version 1 has no sequence numbers (0); version 2+ lists always do.
                sequence_number: match (meta.format_version, m.long("sequence_number")?) {
                    (1, _) => 0,
                    (_, Some(s)) => s,
                    (_, None) => {
                        return Err(bad(format!("{list}: a manifest without a sequence number")))
                    }
                },
                added_snapshot_id: m.long("added_snapshot_id")?.unwrap_or(snap.snapshot_id),
                first_row_id: m.long("first_row_id")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::avro::MAX_INFLATED_BLOCK;
    use super::*;
    use apache_avro::types::Value as V;

    const SCHEMA: &str = r#"{"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int"},
        {"name": "snapshot_id", "type": ["null", "long"]},
        {"name": "data_file", "type": {"type": "record", "name": "r2", "fields": [
            {"name": "file_path", "type": "string"},
            {"name": "file_format", "type": "string"},
            {"name": "record_count", "type": "long"},
            {"name": "file_size_in_bytes", "type": "long"}]}}]}"#;

    fn container(codec: apache_avro::Codec, rows: usize) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
        for i in 0..rows {
            w.append(V::Record(vec![
                ("status".into(), V::Int(1)),
                ("snapshot_id".into(), V::Union(1, Box::new(V::Long(7)))),
                (
                    "data_file".into(),
                    V::Record(vec![
                        (
                            "file_path".into(),
                            V::String(format!("file:///t/data/{i}.parquet")),
                        ),
                        ("file_format".into(), V::String("PARQUET".into())),
                        ("record_count".into(), V::Long(i as i64)),
                        ("file_size_in_bytes".into(), V::Long(100 + i as i64)),
                    ]),
                ),
            ]))
            .unwrap();
        }
        w.into_inner().unwrap()
    }

    #[test]
    fn reads_records_through_unions() {
        let bytes = container(apache_avro::Codec::Deflate(Default::default()), 3);
        let records = avro_records(&bytes, "m").unwrap().records;
        assert_eq!(records.len(), 3);
        let r = Record::new(&records[2], "m").unwrap();
        assert_eq!(r.long("snapshot_id").unwrap(), Some(7));
        assert_eq!(
            r.long("sequence_number").unwrap(),
            None,
            "absent reads as null"
        );
        let d = r.record("data_file").unwrap();
        assert_eq!(
            d.required_string("file_path").unwrap(),
            "file:///t/data/2.parquet"
        );
        assert_eq!(d.required_long("record_count").unwrap(), 2);
        assert_eq!(
            d.required_long("file_path").unwrap_err().code(),
            "E_ICEBERG",
            "a string is not a long"
        );
    }

    /// Every truncation and every single-byte change of a container is an answer or a typed
    /// error — never a panic, never an unbounded allocation.
    #[test]
    fn damaged_containers_never_panic() {
        for codec in [
            apache_avro::Codec::Null,
            apache_avro::Codec::Deflate(Default::default()),
        ] {
            let bytes = container(codec, 40);
            for cut in 0..bytes.len() {
                if let Err(e) = avro_records(&bytes[..cut], "m") {
                    assert_eq!(e.code(), "E_ICEBERG");
                }
            }
            for at in 0..bytes.len() {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut b = bytes.clone();
                    b[at] ^= flip;
                    if let Err(e) = avro_records(&b, "m") {
                        assert_eq!(e.code(), "E_ICEBERG");
                    }
                }
            }
        }
    }

    /// A block that inflates past the bound is refused before the decoder inflates it, and a
    /// codec this build does not read is named.
    #[test]
    fn deflate_bombs_and_unknown_codecs_are_refused() {
        let good = container(apache_avro::Codec::Null, 1);
        // Header (magic, metadata, sync) of a one-record null-codec file, with its codec
        // rewritten to deflate, then one block inflating to MAX_INFLATED_BLOCK + 1 bytes.
        let sync = &good[good.len() - 16..];
        let header_end = good
            .windows(16)
            .position(|w| w == sync)
            .expect("the sync marker ends the header")
            + 16;
        let header = String::from_utf8_lossy(&good[..header_end]).into_owned();
        assert!(header.contains("avro.codec"));
        let mut bomb = good[..header_end].to_vec();
        // The codec's value follows its key (the metadata map's order varies).
        let codec_value =
            |b: &[u8]| b.windows(10).position(|w| w == b"avro.codec").unwrap() + 10 + 1;
        let at = codec_value(&bomb);
        assert_eq!(&bomb[at..at + 4], b"null");
        // "null" and "deflate" differ in length: rebuild the value with its length prefix.
        assert_eq!(bomb[at - 1], 8, "zigzag length 4");
        bomb.splice(at - 1..at + 4, [14u8].into_iter().chain(*b"deflate"));
        let zeros = vec![0u8; MAX_INFLATED_BLOCK + 1];
        let compressed = miniz_oxide::deflate::compress_to_vec(&zeros, 6);
        let zigzag = |v: i64| -> Vec<u8> {
            let mut u = ((v << 1) ^ (v >> 63)) as u64;
            let mut out = vec![];
            loop {
                let b = (u & 0x7f) as u8;
                u >>= 7;
                if u == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
            out
        };
        bomb.extend(zigzag(1));
        bomb.extend(zigzag(compressed.len() as i64));
        bomb.extend(&compressed);
        bomb.extend(sync);
        let e = avro_records(&bomb, "m").unwrap_err();
        assert_eq!(e.code(), "E_ICEBERG");
        assert!(e.to_string().contains("within bounds"), "{e}");

        let mut snappy = good.clone();
        let at = codec_value(&snappy);
        snappy.splice(at - 1..at + 4, [12u8].into_iter().chain(*b"snappy"));
        let e = avro_records(&snappy, "m").unwrap_err();
        assert!(e.to_string().contains("snappy"), "{e}");
    }
}
