//! Lookups over a pinned manifest, shared by native and wasm.
//!
//! Per data file of the table: the read gate accepts the file's index → the index answers
//! (after pruning by the blob's key bounds); the gate rejects, the blob fails its checksums,
//! or the file has no index → the file's column is scanned with the same predicate. The
//! answer is the same either way; [`LookupStats`] says how it was obtained.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::blob::ordered::{in_bounds, scan_block, BlobError, OrderedDirectory};
use crate::datafile;
use crate::encoding::{KeySchema, Value};
use crate::error::{Error, Result};
use crate::io::{IoStats, Location, RangeReader};
use crate::lineage::{GateDecision, ReadGate, RejectReason, Rejection};
use crate::manifest::{
    FileEntry, IndexFileEntry, IndexManifest, IndexState, Manifest, TableManifest,
};

/// One matching row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RowRef {
    /// Data file path, relative to the table location.
    pub file: String,
    /// Row position within the file.
    pub position: u64,
    /// Stable row id, where the table has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row_id: Option<u64>,
}

/// How a lookup was answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupStats {
    pub files: u64,
    /// Files answered by their index.
    pub files_by_index: u64,
    /// Files answered by scanning the data file.
    pub files_scanned: u64,
    /// Files skipped because their index's key bounds exclude the key.
    pub files_pruned: u64,
    /// Why indexes were not used (file, index, reason).
    pub rejections: Vec<Rejection>,
    /// Data files whose size or version differs from the recorded facts (seen while scanning).
    pub drifted: Vec<String>,
    /// Requests and bytes to the overlay (manifests, bundles).
    pub index_requests: u64,
    pub index_bytes: u64,
    /// Requests and bytes to data files.
    pub data_requests: u64,
    pub data_bytes: u64,
}

/// The rows that match, in file order then index order, and how they were found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupResult {
    pub rows: Vec<RowRef>,
    pub stats: LookupStats,
}

/// Parsed block directories, keyed by bundle path + blob offset (bundles are immutable).
#[derive(Default)]
pub struct DirectoryCache {
    dirs: Mutex<HashMap<(String, u64), Arc<OrderedDirectory>>>,
}

impl DirectoryCache {
    pub fn clear(&self) {
        self.dirs.lock().expect("directory cache").clear();
    }
    fn get(&self, k: &(String, u64)) -> Option<Arc<OrderedDirectory>> {
        self.dirs.lock().expect("directory cache").get(k).cloned()
    }
    fn put(&self, k: (String, u64), d: Arc<OrderedDirectory>) {
        self.dirs.lock().expect("directory cache").insert(k, d);
    }
}

/// Answers lookups from one pinned manifest.
pub struct Lookup<'a> {
    /// Reads the overlay (paths relative to its root).
    pub overlay: &'a dyn RangeReader,
    /// Reads data files (paths are full locations as [`TableManifest::data_location`] gives).
    pub data: &'a dyn RangeReader,
    pub manifest: &'a Manifest,
    pub dirs: &'a DirectoryCache,
}

impl Lookup<'_> {
    /// `index = key` over every file of `table`. A key containing NULL matches nothing
    /// (`= NULL` is unknown). Refuses an index that is not ready.
    pub async fn lookup(&self, table: &str, index: &str, key: &[Value]) -> Result<LookupResult> {
        let t = self.manifest.table(table)?;
        let ix = t.index(index)?;
        if ix.state != IndexState::Ready {
            return Err(Error::IndexNotReady {
                index: format!("{}.{}", t.name, ix.name),
                state: ix.state.to_string(),
            });
        }
        let key = ix.key.coerce(key.to_vec())?;
        let encoded = ix.key.encode(&key)?;
        let (o0, d0) = (self.overlay.stats(), self.data.stats());
        let mut out = LookupResult::default();
        if key.iter().any(Value::is_null) {
            return Ok(out);
        }
        let by_file: HashMap<u64, &IndexFileEntry> =
            ix.files.iter().map(|e| (e.file_id, e)).collect();
        for f in &t.files {
            out.stats.files += 1;
            let entry = by_file.get(&f.file_id).copied();
            let decision = ReadGate::check(
                &f.path,
                entry.map(|e| &e.lineage),
                Some(&f.facts()),
                t.snapshot,
            );
            let positions = match (decision, entry) {
                (GateDecision::Accept, Some(e)) => match self.probe(e, &encoded).await {
                    Ok(Some(p)) => {
                        out.stats.files_by_index += 1;
                        Some(p)
                    }
                    Ok(None) => {
                        out.stats.files_pruned += 1;
                        Some(vec![])
                    }
                    Err(r) => {
                        tracing::warn!(target: "skerry::gate", "{r}");
                        out.stats.rejections.push(r);
                        None
                    }
                },
                (GateDecision::Reject(r), _) => {
                    if entry.is_some() {
                        tracing::warn!(target: "skerry::gate", "{r}");
                        out.stats.rejections.push(r);
                    }
                    None
                }
                (GateDecision::Accept, None) => None,
            };
            let positions = match positions {
                Some(p) => p,
                None => {
                    out.stats.files_scanned += 1;
                    self.scan(t, ix, f, &encoded, &mut out.stats).await?
                }
            };
            out.rows
                .extend(positions.into_iter().map(|position| RowRef {
                    file: f.path.clone(),
                    position,
                    row_id: f.row_id_start.map(|s| s + position),
                }));
        }
        let (o1, d1) = (self.overlay.stats(), self.data.stats());
        let (o, d): (IoStats, IoStats) = (o1.since(&o0), d1.since(&d0));
        out.stats.index_requests = o.requests;
        out.stats.index_bytes = o.bytes;
        out.stats.data_requests = d.requests;
        out.stats.data_bytes = d.bytes;
        Ok(out)
    }

    /// Positions of `key` in one file's blob; `None` when the key bounds prune the file.
    async fn probe(&self, e: &IndexFileEntry, key: &[u8]) -> Result<Option<Vec<u64>>, Rejection> {
        let l = &e.lineage;
        let reject = |reason: RejectReason| Rejection {
            data_file: l.source_path.clone(),
            index_id: Some(l.index_id),
            bundle_path: Some(l.bundle_path.clone()),
            reason,
        };
        let corrupt = |err: BlobError| match err {
            BlobError::Checksum(what) => reject(RejectReason::BlobChecksum {
                expected: e.ordered.directory_sha256.clone(),
                found: format!("{what} bytes differ"),
            }),
            other => reject(RejectReason::Corrupt {
                message: other.to_string(),
            }),
        };
        let unhex = |h: &Option<String>| h.as_deref().map(hex::decode).transpose();
        let (min, max) = match (unhex(&e.ordered.min_key), unhex(&e.ordered.max_key)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                return Err(reject(RejectReason::Corrupt {
                    message: "key bounds are not hex".into(),
                }))
            }
        };
        match (min, max) {
            (Some(min), Some(max)) if key < min.as_slice() || key > max.as_slice() => {
                return Ok(None)
            }
            (None, _) | (_, None) => return Ok(None), // empty blob
            _ => {}
        }
        let dir_end = e
            .ordered
            .directory_offset
            .checked_add(e.ordered.directory_length);
        if dir_end.is_none_or(|end| end > l.blob_length) {
            return Err(reject(RejectReason::Corrupt {
                message: "directory outside the blob".into(),
            }));
        }
        let bundle = Location::new(&l.bundle_path);
        let cache_key = (l.bundle_path.clone(), l.blob_offset);
        let dir = match self.dirs.get(&cache_key) {
            Some(d) => d,
            None => {
                let start = l.blob_offset + e.ordered.directory_offset;
                let bytes = match self
                    .overlay
                    .read_range(&bundle, start..start + e.ordered.directory_length)
                    .await
                {
                    Ok(b) => b,
                    Err(err) => return Err(index_io(l, err)),
                };
                let d = OrderedDirectory::parse(
                    &bytes,
                    Some(&e.ordered.directory_sha256),
                    e.ordered.directory_offset,
                )
                .map_err(corrupt)?;
                let d = Arc::new(d);
                self.dirs.put(cache_key, d.clone());
                d
            }
        };
        let blocks = &dir.blocks[dir.blocks_for(Bound::Included(key), Bound::Included(key))];
        let ranges: Vec<_> = blocks
            .iter()
            .map(|b| l.blob_offset + b.offset..l.blob_offset + b.offset + b.length)
            .collect();
        let fetched = match self.overlay.read_ranges(&bundle, &ranges).await {
            Ok(f) => f,
            Err(err) => return Err(index_io(l, err)),
        };
        let mut positions = Vec::new();
        for (b, bytes) in blocks.iter().zip(&fetched) {
            scan_block(bytes, b, |k, p| {
                if in_bounds(k, Bound::Included(key), Bound::Included(key)) {
                    positions.push(p);
                }
                k <= key
            })
            .map_err(corrupt)?;
        }
        Ok(Some(positions))
    }

    /// Positions of `key` found by scanning the data file's indexed columns.
    async fn scan(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        f: &FileEntry,
        key: &[u8],
        stats: &mut LookupStats,
    ) -> Result<Vec<u64>> {
        let loc = Location::new(t.data_location(f));
        scan_file(self.data, &loc, f, &ix.fields, &ix.key, key, stats).await
    }
}

/// A bundle that cannot be read (deleted by a vacuum, unreachable) is a rejection, not a
/// failed query: the file is scanned instead.
fn index_io(l: &crate::lineage::IndexFile, err: crate::io::IoError) -> Rejection {
    Rejection {
        data_file: l.source_path.clone(),
        index_id: Some(l.index_id),
        bundle_path: Some(l.bundle_path.clone()),
        reason: match err {
            crate::io::IoError::NotFound { .. } => RejectReason::Missing,
            other => RejectReason::Corrupt {
                message: other.to_string(),
            },
        },
    }
}

/// Scans `fields` of one data file and returns the positions whose encoded key equals `key`.
pub async fn scan_file(
    data: &dyn RangeReader,
    loc: &Location,
    f: &FileEntry,
    fields: &[i32],
    schema: &KeySchema,
    key: &[u8],
    stats: &mut LookupStats,
) -> Result<Vec<u64>> {
    let (md, meta) = datafile::read_metadata_suffix(data, loc).await?;
    if meta.size != f.size || (f.etag.is_some() && meta.version.is_some() && meta.version != f.etag)
    {
        stats.drifted.push(f.path.clone());
    }
    let mut out = Vec::new();
    datafile::scan_values(data, loc, &md, fields, |vals, position| {
        if !vals.iter().any(Value::is_null) && schema.encode(vals)? == key {
            out.push(position);
        }
        Ok(())
    })
    .await?;
    Ok(out)
}
