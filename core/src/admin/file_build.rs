//! One data file indexed for several indexes at once (`docs/catalog.md`, "Builds").
//!
//! [`index_file`] reads the file's footer (pinned to the recorded version), decodes the union
//! of the indexed columns once, encodes every row's key for each index into one flat buffer
//! per index ([`SortedEntries`]: no allocation per key), sorts, and writes each index's
//! ordered blob. It owns everything it touches, so a build runs files on separate tokio
//! tasks — both cores of a two-core machine — and joins their blobs into one bundle
//! generation per file.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use crate::admin::catalog::IndexRecord;
use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::codec::Codec;
use crate::formats::lineage::{self, IndexFile, INDEX_FILE_FORMAT_VERSION};
use crate::formats::manifest::{FileEntry, IndexFileEntry, OrderedMeta};
use crate::index::fulltext;
use crate::index::kind::{BlobSource, Input};
use crate::io::{Location, RangeReader, UrlReader};
use crate::values::{KeyType, Value};
use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;

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

    /// Appends the one-column string or binary key `value` (`None`: NULL) of the row at
    /// `position`.
    pub fn push_bytes(
        &mut self,
        key: &crate::values::KeySchema,
        value: Option<&[u8]>,
        position: u64,
    ) -> Result<()> {
        self.push_encoded(position, |out| key.encode_bytes_into(out, value))
    }

    /// Appends the one-column int64 key `value` (`None`: NULL) of the row at `position`.
    pub fn push_i64(
        &mut self,
        key: &crate::values::KeySchema,
        value: Option<i64>,
        position: u64,
    ) -> Result<()> {
        self.push_encoded(position, |out| key.encode_i64_into(out, value))
    }

    /// Appends the key of `values` for the row at `position`.
    pub fn push(
        &mut self,
        key: &crate::values::KeySchema,
        values: &[Value],
        position: u64,
    ) -> Result<()> {
        self.push_encoded(position, |out| key.encode_into(out, values))
    }

    /// Appends the key `encode` writes (into the shared buffer) for the row at `position`.
    fn push_encoded(
        &mut self,
        position: u64,
        encode: impl FnOnce(&mut Vec<u8>) -> std::result::Result<(), crate::values::KeyError>,
    ) -> Result<()> {
        let start = self.keys.len();
        encode(&mut self.keys)?;
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
        if !self.sorted && !self.in_order() && !self.sort_by_rank() {
            self.sort_by_prefix();
        }
        self.sorted = true;
    }

    /// Are the entries in (key, position) order already (ids or timestamps written in
    /// order)? Stops at the first pair out of order.
    fn in_order(&self) -> bool {
        let key = |r: &(usize, u32, u64)| &self.keys[r.0..r.0 + r.1 as usize];
        self.refs
            .windows(2)
            .all(|w| (key(&w[0]), w[0].2) < (key(&w[1]), w[1].2))
    }

    /// Reserves room for `rows` entries in all, keys sized like those pushed so far (at
    /// most `max_bytes` of keys): one allocation instead of doublings and copies.
    pub fn reserve_rows(&mut self, rows: usize, max_bytes: usize) {
        let Some(per) = self.keys.len().checked_div(self.refs.len()) else {
            return;
        };
        let keys = rows.saturating_mul(per + 1).min(max_bytes);
        self.keys.reserve(keys.saturating_sub(self.keys.len()));
        self.refs.reserve(rows.saturating_sub(self.refs.len()));
    }

    /// The comparison sort of [`SortedEntries::sort`]: keys are compared by the eight bytes
    /// after the prefix all of them share (one integer comparison, cached per entry), and in
    /// full only when those are equal.
    fn sort_by_prefix(&mut self) {
        let keys = &self.keys;
        let key = |r: &(usize, u32, u64)| &keys[r.0..r.0 + r.1 as usize];
        let mut lcp = self.refs.first().map_or(0, |r| r.1 as usize);
        if let Some(first) = self.refs.first() {
            let f = key(first);
            for r in &self.refs[1..] {
                let k = key(r);
                lcp = lcp.min(k.len());
                while lcp > 0 && f[..lcp] != k[..lcp] {
                    lcp = f[..lcp].iter().zip(k).take_while(|(a, b)| a == b).count();
                }
                if lcp == 0 {
                    break;
                }
            }
        }
        let word = |k: &[u8]| {
            let mut b = [0u8; 8];
            let tail = &k[lcp.min(k.len())..];
            let n = tail.len().min(8);
            b[..n].copy_from_slice(&tail[..n]);
            u64::from_be_bytes(b)
        };
        // Radix sort on the words (stable, a byte a pass, passes where every word has the
        // same byte skipped), then each run of equal words by full key and position.
        let mut tagged: Vec<(u64, u32)> = self
            .refs
            .iter()
            .enumerate()
            .map(|(i, r)| (word(key(r)), i as u32))
            .collect();
        radix_sort_words(&mut tagged);
        let refs = &self.refs;
        let mut i = 0;
        while i < tagged.len() {
            let mut j = i + 1;
            while j < tagged.len() && tagged[j].0 == tagged[i].0 {
                j += 1;
            }
            if j - i > 1 {
                tagged[i..j].sort_unstable_by(|(_, a), (_, b)| {
                    let (a, b) = (&refs[*a as usize], &refs[*b as usize]);
                    key(a).cmp(key(b)).then(a.2.cmp(&b.2))
                });
            }
            i = j;
        }
        let sorted: Vec<(usize, u32, u64)> =
            tagged.iter().map(|&(_, i)| self.refs[i as usize]).collect();
        self.refs = sorted;
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
        let mut ids: HashMap<&[u8], u32, BuildHasherDefault<crate::index::FxHasher>> =
            HashMap::default();
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

/// Sorts `(word, index)` pairs by word, stably (LSD radix, one byte a pass; a pass where all
/// words share the byte is skipped).
fn radix_sort_words(v: &mut Vec<(u64, u32)>) {
    if v.len() < 64 {
        v.sort_by_key(|e| e.0);
        return;
    }
    let mut counts = vec![[0usize; 256]; 8];
    for (w, _) in v.iter() {
        for (b, c) in counts.iter_mut().enumerate() {
            c[((w >> (8 * b)) & 0xff) as usize] += 1;
        }
    }
    let mut scratch = vec![(0u64, 0u32); v.len()];
    for (b, c) in counts.iter().enumerate() {
        if c.contains(&v.len()) {
            continue; // every word has the same byte here
        }
        let mut start = [0usize; 256];
        let mut acc = 0;
        for (s, n) in start.iter_mut().zip(c) {
            *s = acc;
            acc += n;
        }
        for e in v.iter() {
            let d = ((e.0 >> (8 * b)) & 0xff) as usize;
            scratch[start[d]] = *e;
            start[d] += 1;
        }
        std::mem::swap(v, &mut scratch);
    }
}

/// How an index's keys come out of a decoded batch.
enum Plan {
    /// A one-column string or binary key: borrowed bytes of that batch column.
    Bytes(usize),
    /// A one-column int64 key: the integers of that batch column.
    Int64(usize),
    /// Any other key: values of these batch columns (`None`: a column the file lacks, NULL).
    Values(Vec<Option<usize>>),
    /// A vector index: the vectors of that batch column (`None`: a column the file lacks),
    /// collected in row order.
    Vector(Option<usize>),
    /// A fulltext index: the text of that batch column (`None`: a column the file lacks, no
    /// text), fed to the index's writer in row order (no sorted entries).
    Text(Option<usize>),
}

/// Feeds the strings of `a` (rows from `first`) to `w`; the text bytes fed, or `None` when
/// `a` is not a string array.
fn push_text(w: &mut fulltext::FulltextWriter, a: &dyn Array, first: u64) -> Result<Option<u64>> {
    let mut bytes = 0u64;
    macro_rules! each {
        ($arr:expr) => {{
            let arr = $arr;
            for row in 0..arr.len() {
                let v = (!arr.is_null(row)).then(|| arr.value(row));
                bytes += v.map_or(0, |s| s.len() as u64);
                w.add(first + row as u64, v).map_err(|_| Error::Limit {
                    what: "rows of a data file under a fulltext index",
                    count: first + row as u64 + 1,
                    limit: 1 << 32,
                    remedy: "split the data file",
                })?;
            }
        }};
    }
    match a.data_type() {
        DataType::Utf8 => each!(a.as_string::<i32>()),
        DataType::LargeUtf8 => each!(a.as_string::<i64>()),
        DataType::Utf8View => each!(a.as_string_view()),
        _ => return Ok(None),
    }
    Ok(Some(bytes))
}

/// Pushes the keys of a string or binary array (rows from `first`), `false` when `a` is
/// neither.
fn push_bytes(
    e: &mut SortedEntries,
    key: &crate::values::KeySchema,
    a: &dyn Array,
    first: u64,
) -> Result<bool> {
    macro_rules! each {
        ($arr:expr, $bytes:expr) => {{
            let arr = $arr;
            for row in 0..arr.len() {
                let v = (!arr.is_null(row)).then(|| $bytes(arr.value(row)));
                e.push_bytes(key, v, first + row as u64)?;
            }
        }};
    }
    match a.data_type() {
        DataType::Utf8 => each!(a.as_string::<i32>(), str::as_bytes),
        DataType::LargeUtf8 => each!(a.as_string::<i64>(), str::as_bytes),
        DataType::Utf8View => each!(a.as_string_view(), str::as_bytes),
        DataType::Binary => each!(a.as_binary::<i32>(), std::convert::identity),
        DataType::LargeBinary => each!(a.as_binary::<i64>(), std::convert::identity),
        DataType::BinaryView => each!(a.as_binary_view(), std::convert::identity),
        _ => return Ok(false),
    }
    Ok(true)
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
    /// The codebooks of the job's vector indexes, by index id.
    pub codebooks: HashMap<u64, Arc<crate::index::vector::codebook::Trained>>,
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
    let (loc, md) = open_pinned(data.as_ref(), &job.location, f).await?;
    let changed = drift_of(f);
    // The union of the indexed columns, decoded once; each index reads its columns from
    // the batches (a one-column string or binary key straight from the Arrow buffers).
    let file_fields = datafile::fields(&datafile::arrow_schema(&md)?);
    // A column the file does not have (added to an Iceberg table after the file was
    // written) is NULL in every row.
    let mut roots: Vec<usize> = Vec::new();
    for ix in &job.indexes {
        for id in &ix.fields {
            roots.extend(datafile::root_of(&file_fields, *id).ok());
        }
    }
    roots.sort_unstable();
    roots.dedup();
    let plans: Vec<Plan> = job
        .indexes
        .iter()
        .map(|ix| -> Result<Plan> {
            let cols: Vec<Option<usize>> = ix
                .fields
                .iter()
                .map(|id| {
                    datafile::root_of(&file_fields, *id)
                        .ok()
                        .map(|r| roots.binary_search(&r).expect("in the projection"))
                })
                .collect();
            match ix.kind().kind().map(|k| k.input()) {
                Some(Input::Vector) => return Ok(Plan::Vector(cols[0])),
                Some(Input::Text) => return Ok(Plan::Text(cols[0])),
                Some(Input::Key) | None => {}
            }
            if cols.iter().any(Option::is_none) {
                return Ok(Plan::Values(cols));
            }
            let cols: Vec<usize> = cols.into_iter().flatten().collect();
            let bytes_key = matches!(
                ix.key.columns.as_slice(),
                [c] if matches!(c.ty, KeyType::String | KeyType::Binary)
            );
            let int_key = matches!(ix.key.columns.as_slice(), [c] if c.ty == KeyType::Int64);
            Ok(if bytes_key {
                Plan::Bytes(cols[0])
            } else if int_key {
                Plan::Int64(cols[0])
            } else {
                Plan::Values(cols.into_iter().map(Some).collect())
            })
        })
        .collect::<Result<_>>()?;
    let rows = f.record_count.min(1 << 24) as usize;
    let mut entries: Vec<SortedEntries> = job
        .indexes
        .iter()
        .map(|_| SortedEntries::with_rows(rows))
        .collect();
    let mut writers: Vec<Option<fulltext::FulltextWriter>> = job
        .indexes
        .iter()
        .zip(&plans)
        .map(|(ix, p)| {
            matches!(p, Plan::Text(_)).then(|| {
                let spec = ix.spec.fulltext().unwrap_or_default();
                fulltext::FulltextWriter::new(spec.tokenizer, spec.positions)
            })
        })
        .collect();
    let mut text_bytes = 0u64;
    let mut vectors: Vec<Vec<(u64, Option<Vec<f32>>)>> =
        job.indexes.iter().map(|_| Vec::new()).collect();
    let mut vector_bytes = 0u64;
    let mut vals: Vec<Value> = Vec::new();
    let mut over = false;
    if roots.is_empty() {
        // No indexed column is in the file: every row's key is all NULLs (no text).
        for ((ix, e), w) in job.indexes.iter().zip(&mut entries).zip(&mut writers) {
            let nulls = vec![Value::Null; ix.fields.len()];
            for p in 0..f.record_count {
                match w {
                    Some(w) => w.add(p, None).map_err(|_| Error::Limit {
                        what: "rows of a data file under a fulltext index",
                        count: f.record_count,
                        limit: 1 << 32,
                        remedy: "split the data file",
                    })?,
                    None => e.push(&ix.key, &nulls, p)?,
                }
            }
        }
    }
    let scan = !roots.is_empty();
    datafile::scan_columns(data.as_ref(), &loc, &md, &roots, |batch, first| {
        if !scan {
            return Ok(());
        }
        if over {
            return Ok(());
        }
        let n = batch.num_rows();
        for ((((ix, plan), e), w), vs) in job
            .indexes
            .iter()
            .zip(&plans)
            .zip(&mut entries)
            .zip(&mut writers)
            .zip(&mut vectors)
        {
            match plan {
                Plan::Vector(c) => {
                    for row in 0..n {
                        let v = c.and_then(|c| datafile::vector_at(batch.column(c).as_ref(), row));
                        vector_bytes += v.as_ref().map_or(1, |v| 1 + 4 * v.len() as u64);
                        vs.push((first + row as u64, v));
                    }
                }
                Plan::Text(None) => {
                    let w = w.as_mut().expect("a text plan has a writer");
                    for row in 0..n {
                        w.add(first + row as u64, None).map_err(|_| Error::Limit {
                            what: "rows of a data file under a fulltext index",
                            count: f.record_count,
                            limit: 1 << 32,
                            remedy: "split the data file",
                        })?;
                    }
                }
                Plan::Text(Some(c)) => {
                    let w = w.as_mut().expect("a text plan has a writer");
                    let a = batch.column(*c).as_ref();
                    match push_text(w, a, first)? {
                        Some(b) => text_bytes += b,
                        None => {
                            // Not a string array after all: the general way.
                            for row in 0..n {
                                let v = datafile::value_at(a, row)?;
                                let s = match &v {
                                    Value::String(s) => Some(s.as_str()),
                                    _ => None,
                                };
                                w.add(first + row as u64, s).map_err(|_| Error::Limit {
                                    what: "rows of a data file under a fulltext index",
                                    count: f.record_count,
                                    limit: 1 << 32,
                                    remedy: "split the data file",
                                })?;
                            }
                        }
                    }
                }
                Plan::Bytes(c) => {
                    let a = batch.column(*c).as_ref();
                    if !push_bytes(e, &ix.key, a, first)? {
                        // Not a string or binary array after all: the general way.
                        for row in 0..n {
                            vals.clear();
                            vals.push(datafile::value_at(a, row)?);
                            e.push(&ix.key, &vals, first + row as u64)?;
                        }
                    }
                }
                Plan::Int64(c) => {
                    let a = batch.column(*c).as_ref();
                    match a.as_primitive_opt::<arrow_array::types::Int64Type>() {
                        Some(ints) => {
                            for row in 0..n {
                                let v = (!ints.is_null(row)).then(|| ints.value(row));
                                e.push_i64(&ix.key, v, first + row as u64)?;
                            }
                        }
                        // Another integer width: the general way (range checks included).
                        None => {
                            for row in 0..n {
                                vals.clear();
                                vals.push(datafile::value_at(a, row)?);
                                e.push(&ix.key, &vals, first + row as u64)?;
                            }
                        }
                    }
                }
                Plan::Values(cols) => {
                    for row in 0..n {
                        vals.clear();
                        for c in cols {
                            vals.push(match c {
                                Some(c) => datafile::value_at(batch.column(*c).as_ref(), row)?,
                                None => Value::Null,
                            });
                        }
                        e.push(&ix.key, &vals, first + row as u64)?;
                    }
                }
            }
        }
        if first == 0 {
            for e in &mut entries {
                e.reserve_rows(rows, job.max_bytes as usize);
            }
        }
        // Text held by fulltext writers counts like entries (their postings are smaller).
        if entries.iter().map(|e| e.entry_bytes()).sum::<u64>() + text_bytes + vector_bytes
            > job.max_bytes
        {
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
    // A file's vector graphs are built side by side (each blob is a function of its own
    // index's definition and the file's vectors, so the bytes do not depend on threads).
    let mut vector_blobs: Vec<Option<Result<(Vec<u8>, OrderedMeta)>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = job
            .indexes
            .iter()
            .zip(&plans)
            .zip(&vectors)
            .map(|((ix, plan), vs)| {
                matches!(plan, Plan::Vector(_)).then(|| {
                    let book = job.codebooks.get(&ix.index_id).map(|b| b.as_ref());
                    sc.spawn(move || {
                        crate::index::vector::write_blob(
                            &ix.spec,
                            &blob_source(ix, f, 0, 0, book),
                            vs,
                        )
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Invalid("a vector graph build panicked".into()))
                    })
                })
            })
            .collect()
    });
    for ((((ix, mut e), w), (vs, plan)), vb) in job
        .indexes
        .iter()
        .zip(entries)
        .zip(writers)
        .zip(vectors.into_iter().zip(&plans))
        .zip(vector_blobs.iter_mut())
    {
        if let Plan::Vector(_) = plan {
            let (bytes, meta) = vb.take().expect("a vector plan has a blob")?;
            let artifact = artifact_of(job.snapshot, f, ix, &bytes, meta);
            out.push(FileBlob {
                index_id: ix.index_id,
                artifact,
                bytes,
                duplicate: None,
                entry_count: vs.iter().filter(|v| v.1.is_some()).count() as u64,
                entry_bytes: vector_bytes,
            });
            continue;
        }
        if let Some(w) = w {
            let blob = w.finish(f.record_count);
            let postings = blob.postings;
            let (bytes, meta) = blob.into_parts();
            let artifact = artifact_of(job.snapshot, f, ix, &bytes, meta);
            out.push(FileBlob {
                index_id: ix.index_id,
                artifact,
                bytes,
                duplicate: None,
                entry_count: postings,
                entry_bytes: text_bytes,
            });
            continue;
        }
        e.sort();
        // About the blob's size: keys (compression makes them smaller) and positions.
        let hint = e.entry_bytes() as usize;
        let (artifact, bytes) =
            blob_artifact(job.snapshot, f, ix, e.iter(), job.block_bytes, hint, None)?;
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

/// A registered data file's location pinned to its recorded version, and its footer:
/// `E_DRIFT` when the file is at another version or holds another number of rows.
pub(crate) async fn open_pinned(
    data: &UrlReader,
    table_location: &str,
    f: &FileEntry,
) -> Result<(Location, Arc<parquet::file::metadata::ParquetMetaData>)> {
    let url = crate::io::path::join(table_location, &f.path);
    let mut loc = Location::new(&url);
    if let Some(v) = &f.etag {
        loc = loc.with_version(v);
    }
    let md = datafile::read_metadata(data as &dyn RangeReader, &loc, f.size)
        .await
        .map_err(drift_of(f))?;
    if md.file_metadata().num_rows().max(0) as u64 != f.record_count {
        return Err(Error::Drift {
            path: f.path.clone(),
            detail: "record count changed".into(),
        });
    }
    Ok((loc, md))
}

/// Maps "the object is at another version" to `E_DRIFT` for `f`; other errors pass.
pub(crate) fn drift_of(f: &FileEntry) -> impl Fn(Error) -> Error + '_ {
    move |e| match e {
        Error::Io(crate::io::IoError::Changed { .. }) => Error::Drift {
            path: f.path.clone(),
            detail: "version changed".into(),
        },
        other => other,
    }
}

/// The blob of `ix` over `f` from its sorted entries, with its lineage (bundle placement
/// filled in when the bundle is written).
pub fn blob_artifact<'a>(
    snapshot: i64,
    f: &FileEntry,
    ix: &IndexRecord,
    entries: impl Iterator<Item = (&'a [u8], u64)>,
    block_bytes: usize,
    size_hint: usize,
    codebook: Option<&crate::index::vector::codebook::Trained>,
) -> Result<(IndexFileEntry, Vec<u8>)> {
    let kind = ix.kind().kind().ok_or_else(|| {
        Error::Unsupported(format!(
            "index {} is of a kind this version of Skerry cannot build",
            ix.name
        ))
    })?;
    let src = blob_source(ix, f, block_bytes, size_hint, codebook);
    let mut entries = entries;
    let (bytes, meta) = kind.write(&ix.spec, &src, &mut entries)?;
    Ok((artifact_of(snapshot, f, ix, &bytes, meta), bytes))
}

/// What a kind's writer knows of `f` under `ix`.
fn blob_source<'a>(
    ix: &'a IndexRecord,
    f: &'a FileEntry,
    block_bytes: usize,
    size_hint: usize,
    codebook: Option<&'a crate::index::vector::codebook::Trained>,
) -> BlobSource<'a> {
    BlobSource {
        index: &ix.name,
        path: &f.path,
        record_count: f.record_count,
        block_bytes,
        size_hint,
        codebook,
    }
}

/// The manifest entry of `ix`'s blob `bytes` over `f`, with its lineage (bundle placement
/// filled in when the bundle is written).
pub(crate) fn artifact_of(
    snapshot: i64,
    f: &FileEntry,
    ix: &IndexRecord,
    bytes: &[u8],
    meta: OrderedMeta,
) -> IndexFileEntry {
    let lineage = IndexFile {
        format_version: INDEX_FILE_FORMAT_VERSION,
        index_id: ix.index_id,
        category: ix.kind(),
        algorithm: ix.kind().algorithm().into(),
        fields: ix.fields.clone(),
        source_path: f.path.clone(),
        source_snapshot_id: snapshot,
        source_sequence_number: snapshot,
        source_sha256: f.sha256.clone(),
        source_record_count: f.record_count,
        blob_sha256: lineage::sha256_hex(bytes),
        bundle_path: String::new(),
        blob_type: ix.kind().blob_type().into(),
        blob_offset: 0,
        blob_length: bytes.len() as u64,
        compression: Codec::None,
    };
    IndexFileEntry {
        file_id: f.file_id,
        lineage,
        ordered: meta,
        in_run: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys encoded from borrowed bytes are the keys of owned values, whatever the
    /// direction, NULL placement and content (zero bytes, empty, unicode).
    #[test]
    fn borrowed_bytes_encode_like_values() {
        use crate::values::{Direction, NullOrder};
        let samples: [Option<&str>; 6] = [
            None,
            Some(""),
            Some("a"),
            Some("a\0b"),
            Some("\0\0"),
            Some("éß✓"),
        ];
        for ty in [KeyType::String, KeyType::Binary] {
            for direction in [Direction::Asc, Direction::Desc] {
                for nulls in [NullOrder::First, NullOrder::Last] {
                    let key = KeySchema {
                        columns: vec![KeyColumn {
                            ty,
                            direction,
                            nulls,
                        }],
                    };
                    for v in samples {
                        let owned = match (v, ty) {
                            (None, _) => Value::Null,
                            (Some(s), KeyType::String) => Value::String(s.into()),
                            (Some(s), _) => Value::Binary(s.as_bytes().to_vec()),
                        };
                        let mut a = vec![7u8];
                        key.encode_bytes_into(&mut a, v.map(str::as_bytes)).unwrap();
                        let mut b = vec![7u8];
                        key.encode_into(&mut b, &[owned]).unwrap();
                        assert_eq!(a, b, "{ty:?} {direction:?} {nulls:?} {v:?}");
                    }
                }
            }
        }
        let two = KeySchema {
            columns: vec![
                KeyColumn::new(KeyType::String),
                KeyColumn::new(KeyType::Int64),
            ],
        };
        assert!(two.encode_bytes_into(&mut Vec::new(), Some(b"x")).is_err());
        assert!(two.encode_i64_into(&mut Vec::new(), Some(1)).is_err());

        // Plain integers, likewise.
        for direction in [Direction::Asc, Direction::Desc] {
            for nulls in [NullOrder::First, NullOrder::Last] {
                let key = KeySchema {
                    columns: vec![KeyColumn {
                        ty: KeyType::Int64,
                        direction,
                        nulls,
                    }],
                };
                for v in [
                    None,
                    Some(0),
                    Some(-1),
                    Some(1),
                    Some(i64::MIN),
                    Some(i64::MAX),
                    Some(1 << 40),
                ] {
                    let mut a = vec![7u8];
                    key.encode_i64_into(&mut a, v).unwrap();
                    let mut b = vec![7u8];
                    key.encode_into(&mut b, &[v.map_or(Value::Null, Value::Int)])
                        .unwrap();
                    assert_eq!(a, b, "{direction:?} {nulls:?} {v:?}");
                }
            }
        }
    }

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
