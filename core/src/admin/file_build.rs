//! One data file indexed for several indexes at once (`docs/catalog.md`, "Builds").
//!
//! [`index_file`] reads the file's footer (pinned to the recorded version), decodes the union
//! of the indexed columns once, encodes every row's key for each index into one flat buffer
//! per index ([`SortedEntries`]: no allocation per key), sorts, and writes each index's
//! ordered blob. It owns everything it touches, so a build runs files on separate tokio
//! tasks — both cores of a two-core machine — and joins their blobs into one bundle
//! generation per file.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::admin::catalog::IndexRecord;
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::codec::Codec;
use crate::formats::lineage::{self, IndexCategory, IndexFile, INDEX_FILE_FORMAT_VERSION};
use crate::formats::manifest::{FileEntry, IndexFileEntry, OrderedMeta};
use crate::index::ordered::{self, OrderedBlobWriter};
use crate::io::{Location, RangeReader, UrlReader};
use crate::values::Value;

/// The `(key, position)` entries of one index over one file, keys in one buffer.
#[derive(Default, Debug)]
pub struct SortedEntries {
    keys: Vec<u8>,
    /// (start of the key in `keys`, its length, row position).
    refs: Vec<(usize, u32, u64)>,
    sorted: bool,
}

impl SortedEntries {
    /// Entries for about `rows` rows.
    pub fn with_rows(rows: usize) -> Self {
        SortedEntries {
            keys: Vec::with_capacity(rows * 9),
            refs: Vec::with_capacity(rows),
            sorted: true,
        }
    }

    /// Appends the key of `values` for the row at `position`.
    pub fn push(
        &mut self,
        key: &crate::values::KeySchema,
        values: &[Value],
        position: u64,
    ) -> Result<()> {
        let start = self.keys.len();
        key.encode_into(&mut self.keys, values)?;
        self.refs
            .push((start, (self.keys.len() - start) as u32, position));
        self.sorted = false;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Encoded bytes, counting each entry's key plus 8 (the step budget's measure).
    pub fn entry_bytes(&self) -> u64 {
        self.keys.len() as u64 + 8 * self.refs.len() as u64
    }

    /// Sorts by (key, position): the order of a blob.
    ///
    /// Entries pushed in position order with few distinct keys (a region, a status, a day)
    /// are ranked instead: each distinct key sorted once, then a stable counting sort by rank
    /// keeps positions in order — no comparison of equal keys. Otherwise a comparison sort.
    pub fn sort(&mut self) {
        if !self.sort_by_rank() {
            let keys = &self.keys;
            self.refs.sort_unstable_by(|a, b| {
                keys[a.0..a.0 + a.1 as usize]
                    .cmp(&keys[b.0..b.0 + b.1 as usize])
                    .then(a.2.cmp(&b.2))
            });
        }
        self.sorted = true;
    }

    /// The ranking sort of [`SortedEntries::sort`]; `false` (nothing changed) when positions
    /// are not ascending or distinct keys exceed one in 16 entries (at least 256).
    fn sort_by_rank(&mut self) -> bool {
        let n = self.refs.len();
        let limit = (n / 16).max(256);
        if n < 1024 || self.refs.windows(2).any(|w| w[0].2 >= w[1].2) {
            return false;
        }
        let keys = &self.keys;
        let key = |r: &(usize, u32, u64)| &keys[r.0..r.0 + r.1 as usize];
        let mut ids: HashMap<&[u8], u32, BuildHasherDefault<FxHasher>> = HashMap::default();
        let mut of: Vec<u32> = Vec::with_capacity(n);
        for r in &self.refs {
            let next = ids.len() as u32;
            let id = *ids.entry(key(r)).or_insert(next);
            if ids.len() > limit {
                return false;
            }
            of.push(id);
        }
        // Rank of each id in key order, then counting sort (stable: positions stay ascending).
        let mut distinct: Vec<(&[u8], u32)> = ids.into_iter().collect();
        distinct.sort_unstable();
        let mut rank = vec![0u32; distinct.len()];
        for (r, (_, id)) in distinct.iter().enumerate() {
            rank[*id as usize] = r as u32;
        }
        let mut start = vec![0usize; distinct.len() + 1];
        for id in &of {
            start[rank[*id as usize] as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut out = vec![(0usize, 0u32, 0u64); n];
        for (r, id) in self.refs.iter().zip(&of) {
            let slot = &mut start[rank[*id as usize] as usize];
            out[*slot] = *r;
            *slot += 1;
        }
        self.refs = out;
        true
    }

    /// The entries in order (sorted once [`SortedEntries::sort`] ran).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.refs
            .iter()
            .map(|&(s, l, p)| (&self.keys[s..s + l as usize], p))
    }
}

/// Where an index's key columns sit among the decoded ones.
enum Pick {
    Run(std::ops::Range<usize>),
    Scattered(Vec<usize>),
}

/// What to index in one file.
#[derive(Clone, Debug)]
pub struct FileJob {
    /// The table's location (the file is `{location}/{path}`).
    pub location: String,
    pub file: FileEntry,
    pub indexes: Vec<IndexRecord>,
    /// The table snapshot the artifacts are built against.
    pub snapshot: i64,
    pub block_bytes: usize,
    /// Most encoded entry bytes (all indexes together) the file may produce; past it the job
    /// stops reading and reports [`FileOutcome::TooLarge`] (the build slices the file instead).
    pub max_bytes: u64,
}

/// One index's blob over the file.
#[derive(Debug)]
pub struct FileBlob {
    pub index_id: u64,
    pub artifact: IndexFileEntry,
    pub bytes: Vec<u8>,
    /// Under a unique index: two positions of the file whose live rows share a non-NULL key.
    pub duplicate: Option<(u64, u64)>,
    pub entry_count: u64,
    pub entry_bytes: u64,
}

#[derive(Debug)]
pub enum FileOutcome {
    Built(Vec<FileBlob>),
    /// More than [`FileJob::max_bytes`] of entries.
    TooLarge,
}

/// Indexes `job.file` for every index of the job: see the module docs. Data errors (file
/// unreadable, changed since registration: `E_IO`, `E_DRIFT`, `E_PARQUET`) are returned for
/// the caller to skip the file.
pub async fn index_file(data: Arc<UrlReader>, job: FileJob) -> Result<FileOutcome> {
    let f = &job.file;
    let url = format!("{}/{}", job.location, f.path);
    let mut loc = Location::new(&url);
    if let Some(v) = &f.etag {
        loc = loc.with_version(v);
    }
    let changed = |e: Error| match e {
        Error::Io(crate::io::IoError::Changed { .. }) => Error::Drift {
            path: f.path.clone(),
            detail: "version changed".into(),
        },
        other => other,
    };
    let md = datafile::read_metadata(data.as_ref() as &dyn RangeReader, &loc, f.size)
        .await
        .map_err(changed)?;
    if md.file_metadata().num_rows().max(0) as u64 != f.record_count {
        return Err(Error::Drift {
            path: f.path.clone(),
            detail: "record count changed".into(),
        });
    }
    // The union of the indexed fields, decoded once; each index picks its columns from it.
    let mut union: Vec<i32> = Vec::new();
    for ix in &job.indexes {
        for id in &ix.fields {
            if !union.contains(id) {
                union.push(*id);
            }
        }
    }
    let picks: Vec<Pick> = job
        .indexes
        .iter()
        .map(|ix| {
            let cols: Vec<usize> = ix
                .fields
                .iter()
                .map(|id| union.iter().position(|u| u == id).expect("in the union"))
                .collect();
            if cols.windows(2).all(|w| w[1] == w[0] + 1) && !cols.is_empty() {
                Pick::Run(cols[0]..cols[0] + cols.len())
            } else {
                Pick::Scattered(cols)
            }
        })
        .collect();
    let rows = f.record_count.min(1 << 24) as usize;
    let mut entries: Vec<SortedEntries> = job
        .indexes
        .iter()
        .map(|_| SortedEntries::with_rows(rows))
        .collect();
    let mut picked: Vec<Value> = Vec::new();
    let mut over = false;
    let mut total = 0u64;
    datafile::scan_values(data.as_ref(), &loc, &md, &union, |vals, position| {
        if over {
            return Ok(());
        }
        for ((ix, pick), e) in job.indexes.iter().zip(&picks).zip(&mut entries) {
            let before = e.entry_bytes();
            match pick {
                // Columns adjacent in the union (always so for one-column indexes): no copy.
                Pick::Run(r) => e.push(&ix.key, &vals[r.clone()], position)?,
                Pick::Scattered(cols) => {
                    picked.clear();
                    picked.extend(cols.iter().map(|&i| vals[i].clone()));
                    e.push(&ix.key, &picked, position)?;
                }
            }
            total += e.entry_bytes() - before;
        }
        if total > job.max_bytes {
            over = true;
        }
        Ok(())
    })
    .await
    .map_err(changed)?;
    if over {
        return Ok(FileOutcome::TooLarge);
    }
    let deleted = f.deleted()?;
    let mut out = Vec::with_capacity(job.indexes.len());
    for (ix, mut e) in job.indexes.iter().zip(entries) {
        e.sort();
        let (artifact, bytes) = blob_artifact(job.snapshot, f, ix, e.iter(), job.block_bytes)?;
        let (entry_count, entry_bytes) = (e.len() as u64, e.entry_bytes());
        let duplicate = if ix.unique {
            crate::admin::unique::first_duplicate(&ix.key, e.iter(), deleted.as_ref())?
        } else {
            None
        };
        out.push(FileBlob {
            index_id: ix.index_id,
            artifact,
            bytes,
            duplicate,
            entry_count,
            entry_bytes,
        });
    }
    Ok(FileOutcome::Built(out))
}

/// The blob of `ix` over `f` from its sorted entries, with its lineage (bundle placement
/// filled in when the bundle is written).
pub fn blob_artifact<'a>(
    snapshot: i64,
    f: &FileEntry,
    ix: &IndexRecord,
    entries: impl Iterator<Item = (&'a [u8], u64)>,
    block_bytes: usize,
) -> Result<(IndexFileEntry, Vec<u8>)> {
    let mut bw = OrderedBlobWriter::new(block_bytes);
    for (k, p) in entries {
        bw.push(k, p)?;
    }
    let blob = bw.finish();
    let lineage = IndexFile {
        format_version: INDEX_FILE_FORMAT_VERSION,
        index_id: ix.index_id,
        category: IndexCategory::Ordered,
        algorithm: "ordered-v1".into(),
        fields: ix.fields.clone(),
        source_path: f.path.clone(),
        source_snapshot_id: snapshot,
        source_sequence_number: snapshot,
        source_sha256: f.sha256.clone(),
        source_record_count: f.record_count,
        blob_sha256: lineage::sha256_hex(&blob.bytes),
        bundle_path: String::new(),
        blob_type: ordered::BLOB_TYPE.into(),
        blob_offset: 0,
        blob_length: blob.bytes.len() as u64,
        compression: Codec::None,
    };
    let meta = OrderedMeta {
        directory_offset: blob.directory.start,
        directory_length: blob.directory.end - blob.directory.start,
        directory_sha256: blob.directory_sha256.clone(),
        entries: blob.entries,
        min_key: blob.min_key.as_ref().map(hex::encode),
        max_key: blob.max_key.as_ref().map(hex::encode),
    };
    Ok((
        IndexFileEntry {
            file_id: f.file_id,
            lineage,
            ordered: meta,
        },
        blob.bytes,
    ))
}

/// The Fx hash (rustc's): keys of one file need speed, not DoS resistance.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for b in chunks.remainder() {
            self.add(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranking sort (few distinct keys) and the comparison sort (many) both order by
    /// (key, position), NULLs and empty keys included.
    #[test]
    fn both_sorts_order_like_owned_keys() {
        let key = KeySchema {
            columns: vec![KeyColumn::new(KeyType::String)],
        };
        for distinct in [3u64, 50, 5000] {
            let mut e = SortedEntries::with_rows(20_000);
            let mut owned = Vec::new();
            for p in 0..20_000u64 {
                let v = match (p * 7919) % distinct {
                    0 => Value::Null,
                    1 => Value::String(String::new()),
                    k => Value::String(format!("k{k}")),
                };
                e.push(&key, std::slice::from_ref(&v), p).unwrap();
                owned.push((key.encode(&[v]).unwrap(), p));
            }
            e.sort();
            owned.sort_unstable();
            let got: Vec<(Vec<u8>, u64)> = e.iter().map(|(k, p)| (k.to_vec(), p)).collect();
            assert_eq!(got, owned, "{distinct} distinct keys");
        }
    }
    use crate::values::{KeyColumn, KeySchema, KeyType};

    #[test]
    fn sorted_entries_order_like_owned_keys() {
        let key = KeySchema {
            columns: vec![KeyColumn::new(KeyType::String)],
        };
        let vals = ["b", "a", "", "ab", "b", "a"];
        let mut e = SortedEntries::with_rows(4);
        let mut owned = Vec::new();
        for (i, v) in vals.iter().enumerate() {
            let v = [Value::String((*v).into())];
            e.push(&key, &v, 10 - i as u64).unwrap();
            owned.push((key.encode(&v).unwrap(), 10 - i as u64));
        }
        e.push(&key, &[Value::Null], 99).unwrap();
        owned.push((key.encode(&[Value::Null]).unwrap(), 99));
        e.sort();
        owned.sort_unstable();
        let got: Vec<(Vec<u8>, u64)> = e.iter().map(|(k, p)| (k.to_vec(), p)).collect();
        assert_eq!(got, owned);
        assert_eq!(
            e.entry_bytes(),
            owned.iter().map(|(k, _)| k.len() as u64 + 8).sum::<u64>()
        );
    }
}
