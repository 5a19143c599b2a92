//! Lookups over a pinned manifest, shared by native and wasm.
//!
//! Per data file of the table: the read gate accepts the file's index → the index answers
//! (after pruning by the blob's key bounds); the gate rejects, the blob fails its checksums,
//! or the file has no index → the file's column is scanned with the same predicate. The
//! answer is the same either way; [`LookupStats`] says how it was obtained.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::lineage::{GateDecision, ReadGate, RejectReason, Rejection};
use crate::formats::manifest::{
    FileEntry, IndexFileEntry, IndexManifest, Manifest, TableManifest, TableRun, RUN_POSITION_BITS,
};
use crate::formats::rowset::{locate, Located, PositionOf};
use crate::index::kind::RunLayout;
use crate::index::ordered::OrderedDirectory;
use crate::io::{IoStats, Location, ObjectMeta, RangeReader};
pub(crate) use crate::read::blob::{index_io, reaches, BlobRef, Blobs, Probe};
use crate::read::cache::ReadCache;
use crate::read::range::{ByteRange, RangeError};
use crate::values::{KeyError, KeySchema, Value, ValueBound};
use parquet::file::metadata::ParquetMetaData;
use roaring::RoaringTreemap;

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
    /// Of those, the files a table run answered.
    pub files_by_run: u64,
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

/// The answer of [`Pinned::locate`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocateResult {
    /// Rows found exactly (file, position, row id).
    pub rows: Vec<RowRef>,
    /// Files without a usable row-id summary, with the ids that may be in them.
    pub candidates: Vec<Candidates>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidates {
    pub file: String,
    pub row_ids: Vec<u64>,
}

/// One pinned manifest with the readers and the cache that answer from it: the read engine
/// every verb of a `Snapshot` runs on (lookups, queries, counts, searches, nearest).
pub struct Pinned<'a> {
    /// Reads the overlay (paths relative to its root).
    pub overlay: &'a dyn RangeReader,
    /// Reads data files (paths are full locations as [`TableManifest::data_location`] gives).
    pub data: &'a dyn RangeReader,
    pub manifest: &'a Manifest,
    /// The read handle's cache (directories, data file metadata, blocks).
    pub cache: &'a ReadCache,
    /// Answer every file by scanning it, ignoring indexes (benchmarks and debugging; the
    /// answer is the same).
    pub scan_only: bool,
}

/// How many files an accessor works on at once (each costs at most a directory read and one
/// coalesced block read).
pub const FILE_WINDOW: usize = 16;

/// Where the reads that follow a metadata read go: pinned to the version the metadata came
/// from when `pin` (the caller pins, or the metadata was cached), as the store reported it.
pub(crate) fn reads_at(loc: Location, meta: &ObjectMeta, pin: bool) -> Location {
    match (&meta.version, pin) {
        (Some(v), true) => loc.with_version(v),
        _ => loc,
    }
}

/// One file's contribution: matching (key, position) pairs and how they were found.
struct FileAnswer {
    entries: Vec<(Vec<u8>, u64)>,
    stats: LookupStats,
}

impl<'a> Pinned<'a> {
    /// The blob readers of this engine's overlay and cache.
    pub(crate) fn blobs(&self) -> Blobs<'a> {
        Blobs {
            overlay: self.overlay,
            cache: self.cache,
        }
    }
}

impl Pinned<'_> {
    /// Where rows `ids` (stable row ids) are: intersects them with every file's row-id
    /// summary, leaving out deleted rows. Files without a usable summary keep every id as a
    /// candidate (never a guessed position). Rows come in file order, then position.
    pub fn locate(&self, table: &str, ids: &[u64]) -> Result<LocateResult> {
        let t = self.manifest.table(table)?;
        let summaries: Vec<Option<Box<dyn PositionOf>>> =
            t.files.iter().map(|f| f.row_ids()).collect();
        let refs: Vec<Option<&dyn PositionOf>> = summaries.iter().map(|s| s.as_deref()).collect();
        let mut out = LocateResult::default();
        for (f, located) in t.files.iter().zip(locate(&refs, ids)) {
            match located {
                Located::Exact(found) => {
                    // Deleted rows are not there any more (a merge-on-read update leaves a
                    // row's id at a deleted position of the old file and a live one of the new).
                    let deleted = f.deleted()?;
                    let mut rows: Vec<RowRef> = found
                        .into_iter()
                        .filter(|(_, p)| !deleted.as_ref().is_some_and(|d| d.contains(*p)))
                        .map(|(id, position)| RowRef {
                            file: f.path.clone(),
                            position,
                            row_id: Some(id),
                        })
                        .collect();
                    rows.sort_by_key(|r| r.position);
                    out.rows.extend(rows);
                }
                Located::Candidates(ids) if !ids.is_empty() => out.candidates.push(Candidates {
                    file: f.path.clone(),
                    row_ids: ids,
                }),
                Located::Candidates(_) => {}
            }
        }
        Ok(out)
    }

    /// Fetches `columns` of `rows` (as lookups return them), in the order given, reading only
    /// the pages that hold them. With `pin_versions`, data files are read at the version the
    /// manifest recorded (a file rewritten since fails `E_CHANGED`, never returns other
    /// rows); without (a store whose ETags differ from the recorded ones, like a CDN in front
    /// of the files), size and record count are checked instead (`E_DRIFT`).
    pub async fn fetch(
        &self,
        table: &str,
        rows: &[RowRef],
        columns: &[String],
        pin_versions: bool,
    ) -> Result<arrow_array::RecordBatch> {
        let t = self.manifest.table(table)?;
        let fields = columns
            .iter()
            .map(|c| {
                t.fields
                    .iter()
                    .find(|f| f.name == *c)
                    .ok_or_else(|| Error::NotFound {
                        kind: "column",
                        name: format!("{}.{c}", t.name),
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        // Group by file, keeping each row's place in the answer.
        let mut order: Vec<&str> = Vec::new();
        let mut by_file: HashMap<&str, Vec<(usize, u64)>> = HashMap::new();
        for (i, r) in rows.iter().enumerate() {
            by_file.entry(r.file.as_str()).or_insert_with(|| {
                order.push(r.file.as_str());
                Vec::new()
            });
            by_file
                .get_mut(r.file.as_str())
                .expect("inserted")
                .push((i, r.position));
        }
        // Every file's rows in flight at once (at most FILE_WINDOW files): one round of reads
        // however many files the rows are in. The futures are collected first (as in `run`:
        // `Send` futures cannot name a higher-ranked closure).
        let by_file = &by_file;
        let fields = &fields[..];
        let mut reads = Vec::with_capacity(order.len());
        for &file in &order {
            reads.push(async move {
                let f = t
                    .files
                    .iter()
                    .find(|f| f.path == file)
                    .ok_or_else(|| Error::NotFound {
                        kind: "data file",
                        name: file.to_string(),
                    })?;
                // Refused before any read, naming the file as the caller did (not its location).
                if let Some(p) = by_file[file].iter().map(|(_, p)| *p).max() {
                    if p >= f.record_count {
                        return Err(Error::Invalid(format!(
                            "row position {p} is past the end of {} ({} rows)",
                            f.path, f.record_count
                        )));
                    }
                }
                let mut loc = Location::new(t.data_location(f));
                if pin_versions {
                    if let Some(v) = &f.etag {
                        loc = loc.with_version(v);
                    }
                }
                let (md, meta, cached) = self.file_metadata(f, &loc).await?;
                let loc = reads_at(loc, &meta, cached);
                let count = md.file_metadata().num_rows().max(0) as u64;
                if meta.size != f.size || count != f.record_count {
                    return Err(Error::Drift {
                        path: f.path.clone(),
                        detail: "size or record count differs from the manifest".into(),
                    });
                }
                let positions: Vec<u64> = by_file[file].iter().map(|(_, p)| *p).collect();
                datafile::read_rows_as(self.data, &loc, &md, &positions, fields, Some(self.cache))
                    .await
            });
        }
        let parts: Vec<arrow_array::RecordBatch> = {
            use futures::StreamExt;
            futures::stream::iter(reads)
                .buffered(FILE_WINDOW)
                .collect::<Vec<Result<_>>>()
                .await
                .into_iter()
                .collect::<Result<_>>()?
        };
        // answer index of each fetched row, in fetch order
        let place: Vec<usize> = order
            .iter()
            .flat_map(|file| by_file[file].iter().map(|(i, _)| *i))
            .collect();
        let schema = match parts.first() {
            Some(b) => b.schema(),
            None => {
                return Ok(arrow_array::RecordBatch::new_empty(std::sync::Arc::new(
                    arrow_schema::Schema::empty(),
                )))
            }
        };
        let all = arrow_select::concat::concat_batches(&schema, &parts)?;
        // fetch order -> answer order
        let mut inverse = vec![0u32; place.len()];
        for (k, &i) in place.iter().enumerate() {
            inverse[i] = k as u32;
        }
        let index = arrow_array::UInt32Array::from(inverse);
        let cols = all
            .columns()
            .iter()
            .map(|c| arrow_select::take::take(c.as_ref(), &index, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(arrow_array::RecordBatch::try_new(schema, cols)?)
    }

    /// A data file's metadata with its page index: from the read cache when an earlier read
    /// of the same recorded file (location, size, record count, ETag, SHA-256) left it there, else
    /// read — one request when the manifest records where the metadata starts. Returns the
    /// metadata, the size and version the store reported, and whether it came from the cache
    /// (reads using cached metadata must be pinned to that version, [`reads_at`]).
    pub(crate) async fn file_metadata(
        &self,
        f: &FileEntry,
        loc: &Location,
    ) -> Result<(Arc<ParquetMetaData>, ObjectMeta, bool)> {
        if let Some((md, meta)) = self.cache.metadata(&loc.path, f) {
            return Ok((md, meta, true));
        }
        let (md, meta) =
            datafile::read_metadata_from(self.data, loc, f.size, f.metadata_offset).await?;
        if meta.size == f.size && md.file_metadata().num_rows().max(0) as u64 == f.record_count {
            self.cache
                .put_metadata(&loc.path, f, md.clone(), meta.clone());
        }
        Ok((md, meta, false))
    }

    /// `index` of `table` when it is ready, with its lists loaded (a split manifest's part
    /// is read on first use).
    async fn ready_index<'m>(
        &'m self,
        table: &str,
        index: &str,
    ) -> Result<(&'m TableManifest, &'m IndexManifest)> {
        let (t, ix) = self.ready_header(table, index)?;
        self.load_part(t, ix).await?;
        Ok((t, ix))
    }

    /// `index` of `table` when it is ready (its lists possibly not loaded).
    fn ready_header<'m>(
        &'m self,
        table: &str,
        index: &str,
    ) -> Result<(&'m TableManifest, &'m IndexManifest)> {
        let t = self.manifest.table(table)?;
        let ix = t.index(index)?;
        if !ix.kind().has_positions() {
            let what = ix.kind().answers().why_not_rows();
            return Err(Error::Unsupported(format!(
                "index {}.{} is a {} index: {what}",
                t.name,
                ix.name,
                ix.kind()
            )));
        }
        if !ix.state.serves() {
            return Err(Error::IndexNotReady {
                index: format!("{}.{}", t.name, ix.name),
                state: ix.state.to_string(),
            });
        }
        Ok((t, ix))
    }

    /// Makes `ix`'s per-file entries and run available: a no-op unless the manifest split
    /// them into a part that is not loaded yet ([`crate::formats::manifest::load_part`]).
    pub async fn load_part(&self, t: &TableManifest, ix: &IndexManifest) -> Result<()> {
        crate::formats::manifest::load_part(self.overlay, self.manifest, t, ix).await
    }

    /// `index = key` (a full key) over every file of `table`. A key containing NULL matches
    /// nothing (`= NULL` is unknown). Refuses an index that is not ready.
    pub async fn lookup(&self, table: &str, index: &str, key: &[Value]) -> Result<LookupResult> {
        self.lookup_many(table, index, &[key.to_vec()]).await
    }

    /// `index IN (keys)`: complete keys, deduplicated, resolved under this one manifest with
    /// at most [`FILE_WINDOW`] files in flight. Keys containing NULL match nothing; an empty
    /// list returns nothing (after validating the index). Rows come in key order.
    pub async fn lookup_many(
        &self,
        table: &str,
        index: &str,
        keys: &[Vec<Value>],
    ) -> Result<LookupResult> {
        let (t, ix) = self.ready_index(table, index).await?;
        let mut encoded = Vec::with_capacity(keys.len());
        for k in keys {
            let k = ix.key.coerce(k.clone())?;
            let e = ix.key.encode(&k)?;
            if !k.iter().any(Value::is_null) {
                encoded.push(e);
            }
        }
        encoded.sort_unstable();
        encoded.dedup();
        let ranges = encoded.into_iter().map(ByteRange::prefix).collect();
        self.run(
            t,
            ix,
            Probe {
                ranges,
                filter: None,
            },
            false,
        )
        .await
    }

    /// `lower ≤ index ≤ upper` with SQL row-comparison bounds (see
    /// [`KeySchema::plan_range`]): rows in the index's stored order, or exactly the
    /// opposite with `reverse`. Refuses tuple windows over mixed directions.
    pub async fn range(
        &self,
        table: &str,
        index: &str,
        lower: ValueBound,
        upper: ValueBound,
        reverse: bool,
    ) -> Result<LookupResult> {
        let (t, ix) = self.ready_index(table, index).await?;
        let coerce = |b: ValueBound| -> Result<ValueBound> {
            Ok(match b {
                ValueBound::Included(v) => ValueBound::Included(ix.key.coerce(v)?),
                ValueBound::Excluded(v) => ValueBound::Excluded(ix.key.coerce(v)?),
                ValueBound::Unbounded => ValueBound::Unbounded,
            })
        };
        let plan = ix
            .key
            .plan_range(coerce(lower)?, coerce(upper)?)
            .map_err(range_err)?;
        let ranges = plan.bytes.into_iter().collect();
        self.run(
            t,
            ix,
            Probe {
                ranges,
                filter: Some(plan.filter),
            },
            reverse,
        )
        .await
    }

    /// Refuses a range meant for `column` that the index cannot serve as one: the column
    /// must be in the index and be the range column of the bounds (every earlier index
    /// column fixed by equality). A bare range on a non-leading column is `E_REFUSED`,
    /// never scanned wrong.
    pub fn check_range_column(
        &self,
        table: &str,
        index: &str,
        lower: &ValueBound,
        upper: &ValueBound,
        column: &str,
    ) -> Result<()> {
        let (t, ix) = self.ready_header(table, index)?;
        let field = t
            .fields
            .iter()
            .find(|f| f.name == column)
            .ok_or_else(|| Error::NotFound {
                kind: "column",
                name: format!("{}.{column}", t.name),
            })?;
        let j = ix
            .fields
            .iter()
            .position(|id| *id == field.field_id)
            .ok_or_else(|| {
                Error::Refused(format!("column {column} is not in index {}", ix.name))
            })?;
        match ix.key.range_column(lower, upper) {
            Some(r) if r == j => Ok(()),
            _ => Err(Error::Refused(format!(
                "a range on {column} (column {j} of index {}) needs `=` on every index column before it and bounds on {column}",
                ix.name
            ))),
        }
    }

    /// `IS NULL` over a leading run of columns (`Some(Null)` = IS NULL, `Some(v)` = `= v`,
    /// `None` = unconstrained after the last constrained column), in stored order or reversed.
    pub async fn nulls(
        &self,
        table: &str,
        index: &str,
        prefix: &[Option<Value>],
        reverse: bool,
    ) -> Result<LookupResult> {
        let (t, ix) = self.ready_index(table, index).await?;
        let vals: Vec<Value> = prefix
            .iter()
            .map(|v| v.clone().unwrap_or(Value::Null))
            .collect();
        let coerced = ix.key.coerce(vals)?;
        let prefix: Vec<Option<Value>> = prefix
            .iter()
            .zip(coerced)
            .map(|(orig, c)| orig.as_ref().map(|_| c))
            .collect();
        let range = ix.key.nulls_range(&prefix).map_err(range_err)?;
        self.run(
            t,
            ix,
            Probe {
                ranges: vec![range],
                filter: None,
            },
            reverse,
        )
        .await
    }

    async fn run(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        probe: Probe,
        reverse: bool,
    ) -> Result<LookupResult> {
        use futures::StreamExt;
        let (o0, d0) = (self.overlay.stats(), self.data.stats());
        let mut out = LookupResult::default();
        if probe.ranges.is_empty() {
            return Ok(out);
        }
        let by_file: HashMap<u64, &IndexFileEntry> =
            ix.file_entries().iter().map(|e| (e.file_id, e)).collect();
        let probe = &probe;
        // Files the table run covers are answered by one probe of the run.
        let (covered, mut all) = if self.scan_only {
            (vec![false; t.files.len()], vec![])
        } else {
            self.probe_run(t, ix, probe, &mut out.stats).await
        };
        // Futures collected first: a lazily mapped iterator would make the stream's item type
        // depend on a higher-ranked closure, which `Send` futures cannot express.
        let mut pending = Vec::with_capacity(t.files.len());
        let mut index_of = Vec::with_capacity(t.files.len());
        for (i, f) in t.files.iter().enumerate().filter(|(i, _)| !covered[*i]) {
            let entry = if self.scan_only {
                None
            } else {
                by_file.get(&f.file_id).copied()
            };
            pending.push(self.answer_file(t, ix, f, entry, probe));
            index_of.push(i);
        }
        let answers: Vec<Result<FileAnswer>> = futures::stream::iter(pending)
            .buffered(FILE_WINDOW)
            .collect()
            .await;
        for (i, a) in index_of.into_iter().zip(answers) {
            let a = a?;
            merge_stats(&mut out.stats, a.stats);
            all.extend(a.entries.into_iter().map(|(k, p)| (k, i, p)));
        }
        // Deleted rows are never an answer, whichever way their file was answered.
        let mut masks: HashMap<usize, Option<RoaringTreemap>> = HashMap::new();
        let mut bad = None;
        all.retain(|(_, i, p)| {
            let m = masks.entry(*i).or_insert_with(|| {
                t.files[*i].deleted().unwrap_or_else(|e| {
                    bad = Some(e);
                    None
                })
            });
            !m.as_ref().is_some_and(|m| m.contains(*p))
        });
        if let Some(e) = bad {
            return Err(e);
        }
        // The index's stored order across files: key, then file, then position.
        all.sort_unstable();
        if reverse {
            all.reverse();
        }
        out.rows = all
            .into_iter()
            .map(|(_, i, position)| {
                let f = &t.files[i];
                RowRef {
                    file: f.path.clone(),
                    position,
                    row_id: f.row_id_at(position),
                }
            })
            .collect();
        let (o1, d1) = (self.overlay.stats(), self.data.stats());
        let (o, d): (IoStats, IoStats) = (o1.since(&o0), d1.since(&d0));
        out.stats.index_requests = o.requests;
        out.stats.index_bytes = o.bytes;
        out.stats.data_requests = d.requests;
        out.stats.data_bytes = d.bytes;
        Ok(out)
    }

    /// One file: its index when the read gate accepts it and its blob verifies, else a scan.
    async fn answer_file(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        f: &FileEntry,
        entry: Option<&IndexFileEntry>,
        probe: &Probe,
    ) -> Result<FileAnswer> {
        let mut stats = LookupStats {
            files: 1,
            ..Default::default()
        };
        let decision = ReadGate::check(
            &f.path,
            entry.map(|e| &e.lineage),
            Some(&f.facts()),
            t.snapshot,
        );
        match (decision, entry) {
            (GateDecision::Accept, Some(e)) => match self.probe(ix, e, probe).await {
                Ok(Some(entries)) => {
                    stats.files_by_index = 1;
                    return Ok(FileAnswer { entries, stats });
                }
                Ok(None) => {
                    stats.files_pruned = 1;
                    return Ok(FileAnswer {
                        entries: vec![],
                        stats,
                    });
                }
                Err(r) => {
                    tracing::warn!(target: "skerry::gate", "{r}");
                    stats.rejections.push(r);
                }
            },
            (GateDecision::Reject(r), Some(_)) => {
                tracing::warn!(target: "skerry::gate", "{r}");
                stats.rejections.push(r);
            }
            _ => {}
        }
        stats.files_scanned = 1;
        let loc = Location::new(t.data_location(f));
        let entries =
            scan_entries(self.data, &loc, f, &ix.fields, &ix.key, probe, &mut stats).await?;
        Ok(FileAnswer { entries, stats })
    }

    /// Entries of one file's blob within the probe; `None` when the blob's key bounds
    /// exclude every range (no read).
    pub(crate) async fn probe(
        &self,
        ix: &IndexManifest,
        e: &IndexFileEntry,
        probe: &Probe,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>, Rejection> {
        let l = &e.lineage;
        let answer = match crate::index::kind::of(ix.kind()) {
            Some(kind) => {
                let blob = self.blobs().at(BlobRef::of(e));
                blob.rows(kind, &ix.key, probe).await
            }
            None => Err(RejectReason::Corrupt {
                message: format!("a {} index names no key's rows", ix.kind()),
            }),
        };
        answer.map_err(|reason| Rejection {
            data_file: l.source_path.clone(),
            index_id: Some(l.index_id),
            bundle_path: Some(l.bundle_path.clone()),
            reason,
        })
    }

    /// The run's blob, its inline directory (when the manifest carries one) parsed, verified
    /// and cached so that probing it reads no directory.
    pub(crate) fn run_blob<'r>(&self, run: &'r TableRun) -> BlobRef<'r> {
        if let Some(h) = &run.directory {
            let sha = &run.ordered.directory_sha256;
            if !self
                .cache
                .has_directory(&run.bundle_path, run.blob_offset, sha)
            {
                let parsed = hex::decode(h).ok().and_then(|bytes| {
                    OrderedDirectory::parse(&bytes, Some(sha), run.ordered.directory_offset).ok()
                });
                // An inline directory that does not verify is ignored: the bundle's is read.
                if let Some(d) = parsed {
                    let bytes = crate::index::ordered::read::directory_bytes(&d);
                    self.cache.put_directory(
                        &run.bundle_path,
                        run.blob_offset,
                        sha,
                        Arc::new(d),
                        bytes,
                    );
                }
            }
        }
        BlobRef {
            bundle_path: &run.bundle_path,
            offset: run.blob_offset,
            length: run.blob_length,
            ordered: &run.ordered,
            rows: None,
        }
    }

    /// At most how many index entries a probe of `ix` would decode over the files it
    /// answers, and the rows of those files — from directories alone (the run's, else each
    /// file's, read in parallel and cached). `None` when a directory cannot be had (the
    /// probe will reject it and report why).
    pub(crate) async fn estimate(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        probe: &Probe,
    ) -> Option<(u64, u64)> {
        let rows = |ids: &mut dyn Iterator<Item = u64>| -> u64 {
            let by_id: HashMap<u64, u64> = t
                .files
                .iter()
                .map(|f| (f.file_id, f.record_count))
                .collect();
            ids.filter_map(|id| by_id.get(&id))
                .fold(0u64, |a, n| a.saturating_add(*n))
        };
        let kind = crate::index::kind::of(ix.kind())?;
        let runs = merged_runs(ix);
        if !runs.is_empty() {
            let mut entries = 0u64;
            for run in &runs {
                let blob = self.blobs().at(self.run_blob(run));
                entries = entries.saturating_add(blob.estimate(kind, &ix.key, probe).await?);
            }
            let ids = runs.iter().flat_map(|r| r.files.iter().map(|f| f.file_id));
            let ids: std::collections::HashSet<u64> = ids.collect();
            return Some((entries, rows(&mut ids.into_iter())));
        }
        // A bitmap run's directory holds each value's table-wide cardinality: the estimate
        // reads no file's directory.
        let runs = match kind.run() == Some(RunLayout::Stacked) {
            true => ix.table_runs(),
            false => vec![],
        };
        if !runs.is_empty() {
            use crate::index::access::{KeyProbe, RunPositions, RunWant};
            let probe = KeyProbe {
                ranges: &probe.ranges,
                keep: None,
            };
            let totals = futures::future::join_all(runs.iter().map(|run| async move {
                let blob = self.blobs().at(self.run_blob(run));
                let want = vec![RunWant::Count; run.files.len()];
                match kind.run_positions(&blob, probe, &want).await {
                    Ok(RunPositions::Total(n)) => Some(n),
                    _ => None,
                }
            }))
            .await;
            if let Some(n) = totals
                .into_iter()
                .try_fold(0u64, |a, n| Some(a.saturating_add(n?)))
            {
                let ids = runs.iter().flat_map(|r| r.files.iter().map(|f| f.file_id));
                let ids: std::collections::HashSet<u64> = ids.collect();
                return Some((n, rows(&mut ids.into_iter())));
            }
        }
        let mut total = 0u64;
        for window in ix.file_entries().chunks(FILE_WINDOW) {
            let est = futures::future::join_all(window.iter().map(|e| async move {
                let blob = self.blobs().at(BlobRef::of(e));
                blob.estimate(kind, &ix.key, probe).await
            }))
            .await;
            for e in est {
                total = total.saturating_add(e?);
            }
        }
        Some((
            total,
            rows(&mut ix.file_entries().iter().map(|e| e.file_id)),
        ))
    }

    /// Answers the files the index's table runs cover with one probe of each run (in one
    /// round). Returns which files (indexes into `t.files`) they covered and their entries
    /// as (key, file index, position); an unusable run covers nothing (its files go the
    /// per-file way) and is reported.
    pub(crate) async fn probe_run(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        probe: &Probe,
        stats: &mut LookupStats,
    ) -> (Vec<bool>, Vec<(Vec<u8>, usize, u64)>) {
        let mut covered = vec![false; t.files.len()];
        let runs = merged_runs(ix);
        let coverage = t.tier_coverage(&runs);
        let got = futures::future::join_all(
            runs.iter()
                .zip(&coverage)
                .map(|(run, cov)| self.probe_one_run(t, ix, run, cov, probe)),
        )
        .await;
        let mut out = Vec::new();
        for (run, got) in runs.iter().zip(got) {
            match got {
                Ok((files, entries)) => {
                    for i in files {
                        covered[i] = true;
                        stats.files += 1;
                        stats.files_by_index += 1;
                        stats.files_by_run += 1;
                    }
                    out.extend(entries);
                }
                Err(reason) => stats
                    .rejections
                    .push(run_rejected(Some(run), ix.index_id, reason)),
            }
        }
        (covered, out)
    }

    /// One run of [`Pinned::probe_run`]: the files it answers (`ordinal_to_file`) and their
    /// entries; `Err` rejects the run.
    #[allow(clippy::type_complexity)]
    async fn probe_one_run(
        &self,
        t: &TableManifest,
        ix: &IndexManifest,
        run: &TableRun,
        ordinal_to_file: &[Option<usize>],
        probe: &Probe,
    ) -> std::result::Result<(Vec<usize>, Vec<(Vec<u8>, usize, u64)>), RejectReason> {
        if ordinal_to_file.iter().all(Option::is_none) {
            return Ok((vec![], vec![]));
        }
        let Some(kind) = crate::index::kind::of(ix.kind()) else {
            return Ok((vec![], vec![]));
        };
        let blob = self.blobs().at(self.run_blob(run));
        let entries = blob.rows(kind, &ix.key, probe).await?.unwrap_or_default();
        let mask = (1u64 << RUN_POSITION_BITS) - 1;
        let mut past_end = false;
        let out = entries
            .into_iter()
            .filter_map(|(k, tagged)| {
                let ordinal = (tagged >> RUN_POSITION_BITS) as usize;
                let i = (*ordinal_to_file.get(ordinal)?)?;
                let position = tagged & mask;
                if position >= t.files[i].record_count {
                    past_end = true;
                }
                Some((k, i, position))
            })
            .collect();
        if past_end {
            return Err(RejectReason::Corrupt {
                message: "an entry names a position past its file's rows".into(),
            });
        }
        Ok((ordinal_to_file.iter().flatten().copied().collect(), out))
    }
}

/// The index's table runs (oldest first) when they are sorted ones ([`RunLayout::Merged`]):
/// the runs lookups, ranges and queries probe (other layouts serve other verbs).
pub(crate) fn merged_runs(ix: &IndexManifest) -> Vec<&TableRun> {
    match crate::index::kind::of(ix.kind()).and_then(|k| k.run()) == Some(RunLayout::Merged) {
        true => ix.table_runs(),
        false => vec![],
    }
}

/// The rejection of a table run (`data_file: "*"`: every file it covers), logged as the read
/// gate logs a file's.
pub(crate) fn run_rejected(
    run: Option<&TableRun>,
    index_id: u64,
    reason: RejectReason,
) -> Rejection {
    let r = Rejection {
        data_file: "*".into(),
        index_id: Some(index_id),
        bundle_path: run.map(|r| r.bundle_path.clone()),
        reason,
    };
    tracing::warn!(target: "skerry::gate", "{r}");
    r
}

fn range_err(e: RangeError) -> Error {
    match e {
        RangeError::Key(k) => Error::Key(k),
        other => Error::Refused(other.to_string()),
    }
}

fn merge_stats(into: &mut LookupStats, s: LookupStats) {
    into.files += s.files;
    into.files_by_index += s.files_by_index;
    into.files_scanned += s.files_scanned;
    into.files_pruned += s.files_pruned;
    into.rejections.extend(s.rejections);
    into.drifted.extend(s.drifted);
}

/// Scans `fields` of one data file and returns the (key, position) pairs the probe selects —
/// the same answer the file's index would give.
async fn scan_entries(
    data: &dyn RangeReader,
    loc: &Location,
    f: &FileEntry,
    fields: &[i32],
    schema: &KeySchema,
    probe: &Probe,
    stats: &mut LookupStats,
) -> Result<Vec<(Vec<u8>, u64)>> {
    let (md, meta) = datafile::read_metadata_suffix(data, loc, Some(f.size)).await?;
    if meta.size != f.size || (f.etag.is_some() && meta.version.is_some() && meta.version != f.etag)
    {
        stats.drifted.push(f.path.clone());
    }
    let mut out = Vec::new();
    datafile::scan_values(data, loc, &md, fields, |vals, position| {
        let key = match schema.encode(vals) {
            Ok(k) => k,
            // Over the key size cap: equal to no encodable key (and never indexed).
            Err(KeyError::ValueTooLarge { .. } | KeyError::KeyTooLarge { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if probe.ranges.iter().any(|r| r.contains(&key))
            && probe.filter.as_ref().is_none_or(|flt| flt.matches(vals))
        {
            out.push((key, position));
        }
        Ok(())
    })
    .await?;
    Ok(out)
}

/// A record batch as an Arrow IPC stream (readable by `apache-arrow` and every Arrow library).
pub fn to_ipc(batch: &arrow_array::RecordBatch) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())?;
        w.write(batch)?;
        w.finish()?;
    }
    Ok(out)
}

/// A record batch as rows of (column name, value) — the plain-object convenience.
pub fn to_values(batch: &arrow_array::RecordBatch) -> Result<Vec<Vec<(String, Value)>>> {
    let names: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    (0..batch.num_rows())
        .map(|r| {
            names
                .iter()
                .zip(batch.columns())
                .map(|(n, c)| Ok((n.clone(), datafile::value_at(c.as_ref(), r)?)))
                .collect()
        })
        .collect()
}
