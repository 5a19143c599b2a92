//! `query({ where, columns, limit })`: questions asked of a table, not of an index, answered
//! completely on both targets from one pinned manifest (`docs/query.md`).
//!
//! 1. **Index choice** ([`choose`]): among the table's ready indexes, the one with the longest
//!    usable leading prefix — columns fixed by `=` / IN / IS NULL, then at most one range
//!    column. Independent IN lists expand into full key prefixes up to
//!    [`MAX_KEY_COMBINATIONS`]; every condition on an index column is then evaluated exactly
//!    on the decoded key, and conditions on other columns are *residual*, evaluated on the
//!    rows fetched by position.
//! 2. **Per data file** (in manifest order, [`FILE_WINDOW`] at a time): the read gate
//!    accepts the file's index (or the table run covers it) → the index answers; it rejects,
//!    the blob fails its checksums, or there is no index → the file is scanned with the same
//!    predicate: row groups and pages whose statistics exclude it are skipped, only the
//!    predicate's columns are decoded, and rows are evaluated one by one. Delete masks apply
//!    to every answer.
//! 3. **Rows** are fetched by position through the page index (only the pages holding
//!    them), in file order then position, up to `limit`.
//!
//! An index answer that names rows is always confirmed against the data file (its footer is
//! read anyway to fetch them): a file whose size, version (natively) or record count differs
//! from the manifest *drifted*, its index is rejected and the file is scanned as it is now. An
//! index answer of "no rows" is trusted on the manifest's facts unless
//! [`Query::verify_files`] asks for one HEAD per such file.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::RecordBatch;
use parquet::file::metadata::ParquetMetaData;
use serde::{Deserialize, Serialize};

use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::key_encoding::prefix_end;
use crate::formats::lineage::{GateDecision, ReadGate, RejectReason, Rejection};
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexManifest, TableManifest};
use crate::io::{IoStats, Location, ObjectMeta};
use crate::read::lookup::{reaches, reads_at, LookupStats, Pinned, Probe, RowRef, FILE_WINDOW};
use crate::read::predicate::{Condition, Predicate};
use crate::read::range::ByteRange;
use crate::values::{Direction, KeyError, Value};

/// Most full key prefixes one query expands its IN lists into.
pub const MAX_KEY_COMBINATIONS: usize = 4096;

/// Most rows one answer holds (a query matching more fails `E_LIMIT` unless it has a
/// `limit`, which may not exceed this either): bounds what a query allocates.
pub const MAX_QUERY_ROWS: u64 = 1_000_000;

/// A query scans instead of using its index when the index's blocks to read hold more than
/// 1/`SCAN_SHARE` of the rows the index answers (fewer when a `limit` caps them): pages hold
/// many rows each, so at that share nearly every page of the needed columns would be
/// fetched by position anyway, after the index's blocks.
pub const SCAN_SHARE: u64 = 8;

/// A query reads the metadata of at most this many candidate files while it probes the
/// index ([`Pinned::prefetch_candidates`])…
pub const PREFETCH_FILES: usize = 4;
/// …or of any number whose metadata regions total at most this.
pub const PREFETCH_BYTES: u64 = 1 << 20;

/// A question asked of a table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query {
    /// ANDed conditions (empty: every row).
    pub conditions: Vec<Condition>,
    /// Columns to return, in this order. `None`: every column of a scalar type.
    pub columns: Option<Vec<String>>,
    /// At most this many rows (the first in file order, then position); at most
    /// [`MAX_QUERY_ROWS`].
    pub limit: Option<u64>,
    /// Confirm every file the index answers "no rows" for (and, in a `count`, every file
    /// counted from an index) with a HEAD request (size and version) before trusting it;
    /// without, such files are trusted on the published manifest's facts.
    pub verify_files: bool,
    /// Compare data-file versions (ETags) with the recorded ones: natively, where data files
    /// are read from the store that recorded them. Readers behind another server (wasm over a
    /// CDN) compare size and record count only.
    pub pin_versions: bool,
    /// An Iceberg-backed table: answer at this upstream snapshot, one the overlay synced and
    /// published (`None`: the snapshot the manifest holds). See [`crate::read::snapshot`].
    pub snapshot: Option<i64>,
}

/// How a query was answered.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryStats {
    /// The index chosen (`None`: no index could serve the predicate; every file was scanned).
    pub index: Option<String>,
    /// Its kind (`ordered`, `bitmap`): what answered the files counted in `files_by_index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_kind: Option<String>,
    /// The index columns that narrowed the probe (its usable leading prefix).
    pub index_columns: Vec<String>,
    /// Key prefixes probed (IN lists expanded).
    pub keys: u64,
    /// Columns evaluated on rows fetched by position (not in the index).
    pub residual: Vec<String>,
    /// Files considered (a `limit` may stop before the last).
    pub files: u64,
    pub files_by_index: u64,
    /// Of `files_by_index`, those a `search` answered from the index's table run (one
    /// dictionary and one postings list per term for all of them).
    #[serde(default)]
    pub files_by_run: u64,
    pub files_scanned: u64,
    /// Files skipped whole: the index's key bounds or the file's statistics exclude the
    /// predicate.
    pub files_pruned: u64,
    /// Files whose index was rejected (they were scanned); why is in `rejections`.
    pub files_rejected: u64,
    pub rejections: Vec<Rejection>,
    /// Files whose bytes differ from the manifest's facts (seen while reading them).
    pub drifted: Vec<String>,
    /// Row groups of scanned files, and those skipped by statistics or the page index.
    pub row_groups: u64,
    pub row_groups_pruned: u64,
    /// Rows skipped inside the row groups read, by the page index.
    pub rows_pruned_by_pages: u64,
    /// Rows decoded and evaluated by scans.
    pub rows_scanned: u64,
    /// Range requests and bytes, overlay and data together, and cache hits.
    pub requests: u64,
    pub bytes: u64,
    pub cache_hits: u64,
    pub index_requests: u64,
    pub index_bytes: u64,
    pub data_requests: u64,
    pub data_bytes: u64,
    /// Wall time, filled in by the caller that owns a clock (0 when none did).
    pub elapsed_ms: f64,
    /// Why the index that could serve the predicate was not used, when a scan was expected to
    /// read less (see [`SCAN_SHARE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_declined: Option<String>,
}

impl QueryStats {
    pub(crate) fn add(&mut self, s: QueryStats) {
        self.files += s.files;
        self.files_by_index += s.files_by_index;
        self.files_by_run += s.files_by_run;
        self.files_scanned += s.files_scanned;
        self.files_pruned += s.files_pruned;
        self.files_rejected += s.files_rejected;
        self.rejections.extend(s.rejections);
        // A set of files: a file found drifted twice (a HEAD under `verify`, then its scan)
        // is listed once.
        for d in s.drifted {
            if !self.drifted.contains(&d) {
                self.drifted.push(d);
            }
        }
        self.row_groups += s.row_groups;
        self.row_groups_pruned += s.row_groups_pruned;
        self.rows_pruned_by_pages += s.rows_pruned_by_pages;
        self.rows_scanned += s.rows_scanned;
    }
}

/// The rows that match: where they are, their columns, and how they were found.
#[derive(Clone, Debug)]
pub struct QueryResult {
    pub rows: Vec<RowRef>,
    /// The requested columns of `rows`, in the same order.
    pub batch: RecordBatch,
    pub stats: QueryStats,
}

/// How an index serves a predicate.
#[derive(Clone, Debug)]
pub struct IndexPlan<'m> {
    pub index: &'m IndexManifest,
    /// Leading index columns fixed by equality.
    pub eq_columns: usize,
    /// Whether the next index column is ranged.
    pub range_column: bool,
    /// Byte ranges of the index holding every match (a superset; keys are then evaluated).
    pub ranges: Vec<ByteRange>,
    /// For each index column, the predicate column constraining it.
    pub key_columns: Vec<Option<usize>>,
    /// Predicate columns the index does not hold.
    pub residual: Vec<usize>,
}

impl IndexPlan<'_> {
    fn usable(&self) -> usize {
        self.eq_columns + usize::from(self.range_column)
    }
}

/// Picks the ready index with the longest usable leading prefix for `pred` (ties: more
/// equality columns, then fewer key prefixes, then a bitmap over an ordered index, then the
/// name), or `None` when no index can narrow it.
pub fn choose<'m>(t: &'m TableManifest, pred: &Predicate) -> Result<Option<IndexPlan<'m>>> {
    let mut best: Option<IndexPlan<'m>> = None;
    for ix in t
        .indexes
        .iter()
        .filter(|i| i.state.serves() && i.kind().has_positions())
    {
        let Some(plan) = plan_index(ix, pred)? else {
            continue;
        };
        let better = match &best {
            None => true,
            Some(b) => {
                // Equal otherwise, a bitmap reads less than an ordered blob: a value's
                // positions as one compressed bitmap, found in a directory of values.
                let k = |p: &IndexPlan| {
                    (
                        p.usable(),
                        p.eq_columns,
                        std::cmp::Reverse(p.ranges.len()),
                        p.index.kind().answers().counts,
                    )
                };
                k(&plan) > k(b) || (k(&plan) == k(b) && plan.index.name < b.index.name)
            }
        };
        if better {
            best = Some(plan);
        }
    }
    Ok(best)
}

pub(crate) fn plan_index<'m>(
    ix: &'m IndexManifest,
    pred: &Predicate,
) -> Result<Option<IndexPlan<'m>>> {
    if ix.fields.len() != ix.key.columns.len() {
        return Ok(None);
    }
    let key_columns: Vec<Option<usize>> = ix
        .fields
        .iter()
        .map(|id| pred.columns.iter().position(|c| c.field_id == *id))
        .collect();
    let residual: Vec<usize> = (0..pred.columns.len())
        .filter(|i| !key_columns.contains(&Some(*i)))
        .collect();
    let mut combos: Vec<Vec<Value>> = vec![vec![]];
    let mut eq = 0;
    let mut range = None;
    for (j, c) in key_columns.iter().enumerate() {
        let Some(c) = c.map(|c| &pred.columns[c]) else {
            break;
        };
        if let Some(set) = c.fixed() {
            let n = combos.len().saturating_mul(set.len());
            if j > 0 && n > MAX_KEY_COMBINATIONS {
                break;
            }
            let coerced: Vec<Value> = set
                .into_iter()
                .map(|v| {
                    if v.is_null() {
                        Ok(v)
                    } else {
                        Ok(crate::values::KeySchema::new(vec![ix.key.columns[j]])?
                            .coerce(vec![v])?
                            .remove(0))
                    }
                })
                .collect::<Result<_>>()?;
            combos = combos
                .into_iter()
                .flat_map(|p| {
                    coerced.iter().map(move |v| {
                        let mut p = p.clone();
                        p.push(v.clone());
                        p
                    })
                })
                .collect();
            eq += 1;
            continue;
        }
        if let Some(b) = c.bounds() {
            range = Some((j, b));
        }
        break;
    }
    if eq == 0 && range.is_none() {
        return Ok(None);
    }
    // A value too large to encode equals no indexed key (such rows are never indexed).
    let encode = |vals: &[Value]| -> Result<Option<Vec<u8>>> {
        match ix.key.encode_prefix(vals) {
            Ok(b) => Ok(Some(b)),
            Err(KeyError::ValueTooLarge { .. } | KeyError::KeyTooLarge { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    };
    let mut ranges = Vec::with_capacity(combos.len());
    for p in &combos {
        let Some(prefix) = encode(p)? else { continue };
        let Some((j, (lo, hi))) = &range else {
            ranges.push(ByteRange::prefix(prefix));
            continue;
        };
        let desc = ix.key.columns[*j].direction == Direction::Desc;
        let (first, last) = if desc { (hi, lo) } else { (lo, hi) };
        let with = |b: &Bound<Value>| -> Result<Option<Option<Vec<u8>>>> {
            match b {
                Bound::Included(v) | Bound::Excluded(v) if !v.is_null() => {
                    let mut vals = p.clone();
                    vals.push(v.clone());
                    Ok(encode(&vals)?.map(Some))
                }
                _ => Ok(Some(None)),
            }
        };
        // Exclusive bounds are widened to inclusive (keys are evaluated afterwards).
        let start = match with(first)? {
            Some(Some(b)) => b,
            Some(None) => prefix.clone(),
            None => prefix.clone(), // an oversized bound: widen to the prefix
        };
        let end = match with(last)? {
            Some(Some(b)) => prefix_end(&b),
            _ => prefix_end(&prefix),
        };
        if end.as_ref().is_some_and(|e| start >= *e) {
            continue;
        }
        ranges.push(ByteRange { start, end });
    }
    ranges.sort_by(|a, b| a.start.cmp(&b.start));
    Ok(Some(IndexPlan {
        index: ix,
        eq_columns: eq,
        range_column: range.is_some(),
        ranges,
        key_columns,
        residual,
    }))
}

/// One file's contribution.
pub(crate) struct FileHits {
    pub(crate) positions: Vec<u64>,
    /// The file's metadata and pinned location, when the query read them.
    read: Option<(Arc<ParquetMetaData>, Location)>,
    /// The requested columns of `positions`, when the re-check already read them.
    rows: Option<RecordBatch>,
    pub(crate) stats: QueryStats,
    /// `positions` came from the index and are not re-checked yet ([`Pinned::confirm`]);
    /// `read` holds the file's metadata and pinned location.
    pending: bool,
}

impl FileHits {
    /// A file skipped whole (by key bounds or a filter): no rows, nothing read.
    fn pruned() -> FileHits {
        FileHits {
            positions: Vec::new(),
            read: None,
            rows: None,
            stats: QueryStats {
                files: 1,
                files_pruned: 1,
                ..Default::default()
            },
            pending: false,
        }
    }
}

impl Pinned<'_> {
    /// Answers `q` over `table` (see the module docs). Errors: unknown table or column
    /// (`E_NOT_FOUND`), values of the wrong type (`E_KEY`), uncomparable columns
    /// (`E_UNSUPPORTED`), data files that cannot be read (`E_IO`, `E_PARQUET`). A rejected or
    /// missing index never fails a query.
    pub async fn query(&self, table: &str, q: &Query) -> Result<QueryResult> {
        self.run_query(table, q, None).await
    }

    /// The positions of every row of `table` matching `conditions`, by file index, with no
    /// row limit and no row built: the pre-filter of `nearest` and `search` (a `where` that
    /// keeps millions of rows is a bitmap per file, not a list of [`RowRef`]s). Rows the
    /// index names are re-checked as for [`Pinned::query`].
    pub(crate) async fn matching_positions(
        &self,
        table: &str,
        conditions: &[crate::read::predicate::Condition],
        verify_files: bool,
        pin_versions: bool,
    ) -> Result<HashMap<usize, roaring::RoaringTreemap>> {
        let q = Query {
            conditions: conditions.to_vec(),
            columns: Some(vec![]),
            limit: None,
            verify_files,
            pin_versions,
            snapshot: None,
        };
        let mut out = HashMap::new();
        self.run_query(table, &q, Some(&mut out)).await?;
        Ok(out)
    }

    /// [`Pinned::query`], or with `positions` the matching positions gathered there instead
    /// of rows (no [`MAX_QUERY_ROWS`] limit: nothing per row is built).
    async fn run_query(
        &self,
        table: &str,
        q: &Query,
        mut positions: Option<&mut HashMap<usize, roaring::RoaringTreemap>>,
    ) -> Result<QueryResult> {
        let (o0, d0, h0) = (self.overlay.stats(), self.data.stats(), self.cache.hits());
        let t = self.manifest.table(table)?;
        let pred = Predicate::bind(t, &q.conditions)?;
        // Refused without a limit above this many rows (never for `positions`).
        let capped = q.limit.is_none() && positions.is_none();
        if q.limit.is_some_and(|l| l > MAX_QUERY_ROWS) {
            return Err(Error::Limit {
                what: "query limit",
                count: q.limit.unwrap_or_default(),
                limit: MAX_QUERY_ROWS,
                remedy: "ask for fewer rows per query",
            });
        }
        let out_fields: Vec<&crate::values::FieldInfo> = match &q.columns {
            Some(cols) => cols
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
                .collect::<Result<_>>()?,
            None => t.fields.iter().filter(|f| f.key_type.is_some()).collect(),
        };
        let mut plan = if self.scan_only {
            None
        } else {
            choose(t, &pred)?
        };
        if let Some(p) = &plan {
            self.load_part(t, p.index).await?;
        }
        let mut stats = QueryStats::default();
        // Never worse than a scan (see [`SCAN_SHARE`]).
        if let Some(p) = &plan {
            if let (_, Some(why)) = self.weigh(t, p, q, capped).await {
                stats.index_declined = Some(why);
                plan = None;
            }
        }
        if let Some(p) = &plan {
            stats.index = Some(p.index.name.clone());
            stats.index_kind = Some(p.index.kind().to_string());
            stats.index_columns = p
                .key_columns
                .iter()
                .take(p.usable())
                .flatten()
                .map(|c| pred.columns[*c].name.clone())
                .collect();
            stats.keys = p.ranges.len() as u64;
            stats.residual = p
                .residual
                .iter()
                .map(|c| pred.columns[*c].name.clone())
                .collect();
        }
        // Without an index naming rows, a bloom index may still prune files for `=`/IN.
        let bloom = match &plan {
            None => self.bloom_prune(t, &pred).await?,
            Some(_) => None,
        };
        let bloom_pruned: Vec<bool> = match &bloom {
            Some(b) => {
                if let Some(ix) = b.index {
                    stats.index = Some(ix.name.clone());
                    stats.index_kind = Some(ix.kind().to_string());
                    stats.index_columns = ix
                        .fields
                        .iter()
                        .filter_map(|id| t.fields.iter().find(|f| f.field_id == *id))
                        .map(|f| f.name.clone())
                        .collect();
                }
                stats.rejections.extend(b.rejections.iter().cloned());
                stats.files_by_run += b.by_run;
                b.pruned.clone()
            }
            None => vec![false; t.files.len()],
        };
        let probe = plan.as_ref().map(|p| Probe {
            ranges: p.ranges.clone(),
            filter: None,
        });
        // The table run answers the files it covers with one probe.
        let mut run_hits: HashMap<usize, Vec<(Vec<u8>, u64)>> = HashMap::new();
        let mut covered = vec![false; t.files.len()];
        if let (Some(p), Some(probe)) = (&plan, &probe) {
            if !p.ranges.is_empty() {
                let mut ls = LookupStats::default();
                // The metadata of the few files the keys can be in is read while the index
                // is probed, so their pages can be fetched as soon as the index answers.
                let prefetch = futures::future::join_all(
                    self.prefetch_candidates(t, p, probe)
                        .into_iter()
                        .map(|f| async move {
                            let loc = Location::new(t.data_location(f));
                            // A failure here is met again (and reported) by the file's read.
                            let _ = self.file_metadata(f, &loc).await;
                        }),
                );
                let ((c, entries), _) =
                    futures::future::join(self.probe_run(t, p.index, probe, &mut ls), prefetch)
                        .await;
                covered = c;
                stats.rejections.extend(ls.rejections);
                stats.files_by_run += ls.files_by_run;
                for (k, i, pos) in entries {
                    run_hits.entry(i).or_default().push((k, pos));
                }
            }
        }
        // A bitmap index's table run names the positions of every file it covers in one
        // range per value (docs/bitmap-index.md).
        let mut run_positions: HashMap<usize, Vec<u64>> = HashMap::new();
        if let Some(p) = &plan {
            if !p.ranges.is_empty() {
                for (i, ps) in self.bitmap_run_positions(t, &pred, p, &mut stats).await {
                    covered[i] = true;
                    stats.files_by_run += 1;
                    run_positions.insert(i, ps);
                }
            }
        }
        let by_file: HashMap<u64, &IndexFileEntry> = plan
            .as_ref()
            .map(|p| {
                p.index
                    .file_entries()
                    .iter()
                    .map(|e| (e.file_id, e))
                    .collect()
            })
            .unwrap_or_default();
        let limit = q.limit.unwrap_or(u64::MAX);
        let mut hits: Vec<(usize, FileHits)> = Vec::new();
        let mut found = 0u64;
        // What each file costs before its rows: nothing when the index rules it out without
        // a read — a bloom filter, key bounds the read gate accepts (both pruned here, without
        // a future per file: a query over 100,000s of files walks them in one cheap pass), or a
        // table run that names no row of it.
        let pruned_here: Vec<bool> = t
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if q.verify_files {
                    return false;
                }
                if bloom_pruned[i] {
                    return true;
                }
                match (covered[i], by_file.get(&f.file_id), probe.as_ref()) {
                    (false, Some(e), Some(probe)) => {
                        !crate::read::lookup::reaches(&e.ordered, &probe.ranges)
                            && matches!(
                                ReadGate::check(
                                    &f.path,
                                    Some(&e.lineage),
                                    Some(&f.facts()),
                                    t.snapshot
                                ),
                                GateDecision::Accept
                            )
                    }
                    _ => false,
                }
            })
            .collect();
        let reads = |i: usize| {
            !pruned_here[i]
                && (q.verify_files
                    || !covered[i]
                    || match run_positions.get(&i) {
                        Some(ps) => !ps.is_empty(),
                        None => run_hits.get(&i).is_some_and(|h| !h.is_empty()),
                    })
        };
        // Files are answered in order, at most FILE_WINDOW of those that read anything in
        // flight at once: keys spread over many files cost one round of reads, not one per
        // FILE_WINDOW files walked.
        let mut windows: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut start, mut reading) = (0, 0);
        for i in 0..t.files.len() {
            if reads(i) {
                reading += 1;
            }
            if reading == FILE_WINDOW || i + 1 == t.files.len() {
                windows.push(start..i + 1);
                (start, reading) = (i + 1, 0);
            }
        }
        for window in windows {
            if found >= limit {
                break;
            }
            let mut pruned: Vec<(usize, FileHits)> = Vec::new();
            let (pred, plan_ref, probe_ref) = (&pred, plan.as_ref(), probe.as_ref());
            let futs = window.clone().filter_map(|i| {
                let f = &t.files[i];
                if pruned_here[i] {
                    pruned.push((i, FileHits::pruned()));
                    return None;
                }
                let answer = if let Some(ps) = run_positions.remove(&i) {
                    Answer::RunPositions(ps, by_file.get(&f.file_id).copied())
                } else if covered[i] {
                    Answer::Run(
                        run_hits.remove(&i).unwrap_or_default(),
                        by_file.get(&f.file_id).copied(),
                    )
                } else if let Some(e) = by_file.get(&f.file_id) {
                    Answer::Entry(e)
                } else {
                    Answer::Scan
                };
                let bloom_says_none = bloom_pruned[i];
                Some(async move {
                    if bloom_says_none {
                        // `verify`: a file the filter excludes is confirmed by a HEAD.
                        let meta = match self.data.head(&Location::new(t.data_location(f))).await {
                            Ok(m) => m,
                            Err(e) => return (i, Err(e.into())),
                        };
                        if Self::drift(f, &meta, None, q).is_none() {
                            return (i, Ok(FileHits::pruned()));
                        }
                    }
                    (
                        i,
                        self.query_file(t, pred, plan_ref, probe_ref, f, answer, q)
                            .await,
                    )
                })
            });
            let answers = futures::future::join_all(futs.collect::<Vec<_>>()).await;
            let mut slots = Vec::with_capacity(window.len());
            for (i, a) in answers {
                slots.push((i, Some(a?)));
            }
            slots.extend(pruned.into_iter().map(|(i, h)| (i, Some(h))));
            slots.sort_unstable_by_key(|s| s.0);
            // Index answers are confirmed (their rows re-checked) only for the files the
            // limit still needs: in file order, in parallel batches whose index counts reach
            // it.
            let mut k = 0;
            while k < slots.len() && found < limit {
                let need = limit - found;
                let (mut j, mut optimistic) = (k, 0u64);
                while j < slots.len() && optimistic < need {
                    optimistic += slots[j].1.as_ref().map_or(0, |h| h.positions.len() as u64);
                    j += 1;
                }
                // Refused before any row is read: confirming never adds rows an index named.
                if capped && found.saturating_add(optimistic) > MAX_QUERY_ROWS {
                    return Err(Error::Limit {
                        what: "rows matching a query without a limit",
                        count: found.saturating_add(optimistic),
                        limit: MAX_QUERY_ROWS,
                        remedy: "pass a limit, or narrow `where`",
                    });
                }
                let (plan, pred, out_fields) = (plan.as_ref(), &pred, &out_fields[..]);
                let batch = (k..j).map(|x| {
                    let h = slots[x].1.take().expect("each slot is confirmed once");
                    let f = &t.files[slots[x].0];
                    async move {
                        match plan {
                            Some(p) => self.confirm(pred, p, f, h, out_fields, need).await,
                            None => Ok(h),
                        }
                    }
                });
                let done = futures::future::join_all(batch.collect::<Vec<_>>()).await;
                for (x, h) in (k..j).zip(done) {
                    let h = h?;
                    found += h.positions.len() as u64;
                    hits.push((slots[x].0, h));
                    if found >= limit {
                        break;
                    }
                }
                k = j;
            }
            if capped && found > MAX_QUERY_ROWS {
                return Err(Error::Limit {
                    what: "rows matching a query without a limit",
                    count: found,
                    limit: MAX_QUERY_ROWS,
                    remedy: "pass a limit, or narrow `where`",
                });
            }
        }
        // Rows in file order then position, up to the limit.
        let mut rows = Vec::new();
        let mut left = limit;
        let mut parts = Vec::new();
        let mut reads = Vec::new();
        for (i, mut h) in hits {
            stats.add(std::mem::take(&mut h.stats));
            if left == 0 || h.positions.is_empty() {
                continue;
            }
            if let Some(out) = positions.as_deref_mut() {
                out.entry(i)
                    .or_default()
                    .extend(h.positions.iter().copied());
                continue;
            }
            h.positions.truncate(left.min(usize::MAX as u64) as usize);
            left -= h.positions.len() as u64;
            let f = &t.files[i];
            rows.extend(h.positions.iter().map(|&position| RowRef {
                file: f.path.clone(),
                position,
                row_id: f.row_id_at(position),
            }));
            reads.push((f, h.positions, h.read, h.rows));
        }
        let fetched =
            futures::future::join_all(reads.into_iter().map(|(f, positions, read, rows)| async {
                match rows {
                    // Already read by the re-check: the first `positions.len()` rows.
                    Some(b) => Ok(b.slice(0, positions.len())),
                    None => {
                        self.fetch_positions(t, f, positions, read, &out_fields, q)
                            .await
                    }
                }
            }))
            .await;
        for b in fetched {
            parts.push(b?);
        }
        let batch = assemble(&out_fields, parts)?;
        for r in &stats.rejections {
            tracing::warn!(target: "skerry::gate", "{r}");
        }
        self.io_since(&mut stats, (o0, d0, h0));
        Ok(QueryResult { rows, batch, stats })
    }

    /// Fills `stats`' request, byte and cache-hit counters with what this handle did since
    /// `start` (overlay stats, data stats, cache hits).
    pub(crate) fn io_since(&self, stats: &mut QueryStats, start: (IoStats, IoStats, u64)) {
        let (o0, d0, h0) = start;
        let (o1, d1) = (self.overlay.stats(), self.data.stats());
        let (o, d): (IoStats, IoStats) = (o1.since(&o0), d1.since(&d0));
        stats.index_requests = o.requests;
        stats.index_bytes = o.bytes;
        stats.data_requests = d.requests;
        stats.data_bytes = d.bytes;
        stats.requests = o.requests + d.requests;
        stats.bytes = o.bytes + d.bytes;
        stats.cache_hits = o.cache_hits + d.cache_hits + (self.cache.hits() - h0);
    }

    /// The index's estimate of the entries it would name (from directories), and why a scan
    /// should answer instead, when the entries to read exceed 1/[`SCAN_SHARE`] of the rows the
    /// index answers (fewer when a `limit` caps them). An answer a query without a limit must
    /// refuse (over [`MAX_QUERY_ROWS`]; `capped`: the query is refused there) keeps the index:
    /// it is refused from the index's count, before any row is read.
    pub(crate) async fn weigh(
        &self,
        t: &TableManifest,
        p: &IndexPlan<'_>,
        q: &Query,
        capped: bool,
    ) -> (Option<u64>, Option<String>) {
        if p.ranges.is_empty() {
            return (None, None);
        }
        let probe = Probe {
            ranges: p.ranges.clone(),
            filter: None,
        };
        let Some((entries, rows)) = self.estimate(t, p.index, &probe).await else {
            return (None, None);
        };
        let wanted = entries.min(q.limit.unwrap_or(u64::MAX));
        let refusable = capped && entries > MAX_QUERY_ROWS;
        let why = (rows > 0 && wanted.saturating_mul(SCAN_SHARE) > rows && !refusable).then(|| {
            format!(
                "{}: its blocks name up to {entries} of {rows} rows; a scan reads less",
                p.index.name
            )
        });
        (Some(entries), why)
    }

    /// The files whose metadata a query reads while it probes the index: those the probe's
    /// key ranges can reach by the manifest's per-file key bounds (or without an index entry:
    /// they are scanned), when they are few — at most [`PREFETCH_FILES`], or any number whose
    /// metadata regions total at most [`PREFETCH_BYTES`] — and not cached yet.
    fn prefetch_candidates<'t>(
        &self,
        t: &'t TableManifest,
        plan: &IndexPlan<'_>,
        probe: &Probe,
    ) -> Vec<&'t FileEntry> {
        let by_file: HashMap<u64, &IndexFileEntry> = plan
            .index
            .file_entries()
            .iter()
            .map(|e| (e.file_id, e))
            .collect();
        let reachable = |e: &IndexFileEntry| reaches(&e.ordered, &probe.ranges);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for f in &t.files {
            if by_file.get(&f.file_id).is_some_and(|e| !reachable(e)) {
                continue;
            }
            let loc = t.data_location(f);
            if self.cache.has_metadata(&loc, f) {
                continue;
            }
            bytes = bytes.saturating_add(
                f.metadata_offset
                    .map_or(datafile::FOOTER_PREFETCH, |o| f.size.saturating_sub(o)),
            );
            out.push(f);
        }
        if out.len() <= PREFETCH_FILES || bytes <= PREFETCH_BYTES {
            out
        } else {
            vec![]
        }
    }

    /// Under `verify`: confirms with a HEAD each — one round, in parallel — the files
    /// `coverage` gives to the table runs `runs` (as [`TableManifest::tier_coverage`] gives
    /// them). A file whose size (or, with `pin_versions`, version) is not the manifest's is
    /// taken from its run (`None`) and reported in `stats` as that run's rejection and a
    /// drifted file, so it is scanned; the others are answered by the run as without
    /// `verify`. A file whose blob a run holds (decision 71) has no blob of its own to be
    /// confirmed through. `(index_id, pin_versions)`: the index, and whether a version change
    /// is drift too.
    pub(crate) async fn confirm_covered(
        &self,
        t: &TableManifest,
        runs: &[&crate::formats::manifest::TableRun],
        coverage: &mut [Vec<Option<usize>>],
        (index_id, pin_versions): (u64, bool),
        stats: &mut QueryStats,
    ) -> Result<()> {
        use futures::StreamExt;
        let covered: Vec<(usize, usize)> = coverage
            .iter()
            .enumerate()
            .flat_map(|(r, cov)| cov.iter().flatten().map(move |&i| (r, i)))
            .collect();
        let q = Query {
            pin_versions,
            ..Default::default()
        };
        let futs: Vec<_> = covered
            .iter()
            .map(|&(r, i)| {
                let f = &t.files[i];
                let q = &q;
                async move {
                    let meta = self.data.head(&Location::new(t.data_location(f))).await?;
                    Ok::<_, Error>(Self::drift(f, &meta, None, q).map(|d| (r, i, d)))
                }
            })
            .collect();
        let heads: Vec<Result<Option<(usize, usize, String)>>> = futures::stream::iter(futs)
            .buffer_unordered(4 * FILE_WINDOW)
            .collect()
            .await;
        let mut out = Vec::new();
        for h in heads {
            let Some((r, i, detail)) = h? else { continue };
            for c in coverage[r].iter_mut() {
                if *c == Some(i) {
                    *c = None;
                }
            }
            out.push(Rejection {
                data_file: t.files[i].path.clone(),
                index_id: Some(index_id),
                bundle_path: Some(runs[r].bundle_path.clone()),
                reason: RejectReason::Drifted { detail },
            });
        }
        out.sort_by(|a, b| a.data_file.cmp(&b.data_file));
        stats.add(QueryStats {
            drifted: out.iter().map(|r| r.data_file.clone()).collect(),
            rejections: out,
            ..Default::default()
        });
        Ok(())
    }

    /// What differs between the store's view of a data file and the manifest's facts.
    pub(crate) fn drift(
        f: &FileEntry,
        meta: &ObjectMeta,
        rows: Option<u64>,
        q: &Query,
    ) -> Option<String> {
        if meta.size != f.size {
            return Some(format!("size {} is not the recorded {}", meta.size, f.size));
        }
        if let Some(n) = rows.filter(|n| *n != f.record_count) {
            return Some(format!("{n} rows, not the recorded {}", f.record_count));
        }
        if q.pin_versions {
            if let (Some(now), Some(was)) = (&meta.version, &f.etag) {
                if now != was {
                    return Some(format!("version {now} is not the recorded {was}"));
                }
            }
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    /// The positions a bitmap index's table run ([`RunLayout::Stacked`]) names for the files
    /// it covers (by index in `t.files`), keys matched against the plan's column; nothing
    /// for an index of another layout, and nothing (reported) when the run is unusable —
    /// its files then go the per-file way.
    async fn bitmap_run_positions(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        p: &IndexPlan<'_>,
        stats: &mut QueryStats,
    ) -> Vec<(usize, Vec<u64>)> {
        use crate::index::access::{KeyProbe, Positions, RunPositions, RunWant};
        use crate::index::kind::RunLayout;
        let ix = p.index;
        let (Some(kind), Some(Some(column))) = (
            crate::index::kind::of(ix.kind()),
            p.key_columns.first().copied(),
        ) else {
            return vec![];
        };
        if kind.run() != Some(RunLayout::Stacked) || ix.fields.len() != 1 {
            return vec![];
        }
        let keep = crate::read::predicate::column_keep(ix, &pred.columns[column]);
        let probe = KeyProbe {
            ranges: &p.ranges,
            keep: Some(&keep),
        };
        // Every run (tier), each file by the newest covering it, in one round.
        let runs = ix.table_runs();
        let coverages = t.tier_coverage(&runs);
        let got = futures::future::join_all(runs.iter().zip(&coverages).map(
            |(run, coverage)| async move {
                let want: Vec<RunWant> = coverage
                    .iter()
                    .map(|i| match i {
                        Some(i) => RunWant::Set {
                            rows: t.files[*i].record_count,
                        },
                        None => RunWant::Skip,
                    })
                    .collect();
                if want.iter().all(|w| *w == RunWant::Skip) {
                    return Ok(None);
                }
                let blob = self.blobs().at(self.run_blob(run));
                match kind.run_positions(&blob, probe, &want).await {
                    Ok(r) => Ok(Some(r)),
                    Err(err) => Err(blob.reject(err)),
                }
            },
        ))
        .await;
        let mut out = Vec::new();
        for ((run, coverage), got) in runs.iter().zip(&coverages).zip(got) {
            match got {
                Ok(Some(RunPositions::PerFile(answers))) if answers.len() == coverage.len() => out
                    .extend(
                        coverage
                            .iter()
                            .zip(answers)
                            .filter_map(|(i, a)| match (i, a) {
                                (Some(i), Some(Positions::Set(ps))) => {
                                    Some((*i, ps.into_iter().collect()))
                                }
                                _ => None,
                            }),
                    ),
                Ok(_) => {}
                Err(reason) => {
                    let r = crate::read::lookup::run_rejected(Some(run), ix.index_id, reason);
                    stats.rejections.push(r);
                }
            }
        }
        out
    }

    async fn query_file(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        plan: Option<&IndexPlan<'_>>,
        probe: Option<&Probe>,
        f: &FileEntry,
        answer: Answer<'_>,
        q: &Query,
    ) -> Result<FileHits> {
        let mut st = QueryStats {
            files: 1,
            ..Default::default()
        };
        let loc = Location::new(t.data_location(f));
        let deleted = f.deleted()?;
        let live = |p: &u64| !deleted.as_ref().is_some_and(|m| m.contains(*p));
        let reject = |st: &mut QueryStats, r: Rejection| {
            st.files_rejected += 1;
            st.rejections.push(r);
        };
        let rejection = |ix: &IndexManifest, e: Option<&IndexFileEntry>, reason| Rejection {
            data_file: f.path.clone(),
            index_id: Some(ix.index_id),
            bundle_path: e.map(|e| e.lineage.bundle_path.clone()),
            reason,
        };
        let own_entry = match &answer {
            Answer::Run(_, e) | Answer::RunPositions(_, e) => *e,
            Answer::Entry(e) => Some(*e),
            Answer::Scan => None,
        };
        // 1. The index's entries for this file, when it may answer.
        let mut entries: Option<(Vec<(Vec<u8>, u64)>, bool)> = None; // (entries, pruned)
        let mut given: Option<Vec<u64>> = None;
        if let (Some(plan), Some(probe)) = (plan, probe) {
            match answer {
                Answer::Run(e, _) => entries = Some((e, false)),
                Answer::RunPositions(ps, _) => given = Some(ps),
                Answer::Entry(e) => match e.gate(f, t.snapshot) {
                    GateDecision::Accept => match self.probe(plan.index, e, probe).await {
                        Ok(Some(v)) => entries = Some((v, false)),
                        Ok(None) => entries = Some((vec![], true)),
                        Err(r) => reject(&mut st, r),
                    },
                    GateDecision::Reject(r) => reject(&mut st, r),
                },
                Answer::Scan => {}
            }
        }
        let mut read: Option<(Arc<ParquetMetaData>, ObjectMeta, bool)> = None;
        // (positions, pruned, an undecodable key)
        let named = match (entries, plan) {
            (Some((entries, pruned)), Some(plan)) => {
                let mut positions = Vec::new();
                let mut bad = None;
                for (k, pos) in &entries {
                    match plan.index.key.decode(k) {
                        Ok(vals) => {
                            let ok =
                                plan.key_columns.iter().enumerate().all(|(j, c)| {
                                    c.is_none_or(|c| pred.columns[c].matches(&vals[j]))
                                });
                            if ok && live(pos) {
                                positions.push(*pos);
                            }
                        }
                        Err(e) => bad = Some(e),
                    }
                }
                Some((positions, pruned, bad))
            }
            // A file the run names no position in is skipped whole, as by key bounds.
            (None, Some(_)) => given.map(|ps| {
                let none = ps.is_empty();
                (ps.into_iter().filter(live).collect(), none, None)
            }),
            _ => None,
        };
        if let (Some((mut positions, pruned, bad)), Some(plan)) = (named, plan) {
            let ix = plan.index;
            positions.sort_unstable();
            positions.dedup();
            let by_index = |st: &mut QueryStats| {
                if pruned {
                    st.files_pruned = 1
                } else {
                    st.files_by_index = 1
                }
            };
            let entry = own_entry;
            if let Some(e) = bad {
                reject(
                    &mut st,
                    rejection(
                        ix,
                        entry,
                        RejectReason::Corrupt {
                            message: format!("undecodable key: {e}"),
                        },
                    ),
                );
            } else if positions.is_empty() && !q.verify_files {
                by_index(&mut st);
                return Ok(FileHits {
                    positions,
                    read: None,
                    rows: None,
                    stats: st,
                    pending: false,
                });
            } else if positions.is_empty() {
                let meta = self.data.head(&loc).await?;
                match Self::drift(f, &meta, None, q) {
                    None => {
                        by_index(&mut st);
                        return Ok(FileHits {
                            positions,
                            read: None,
                            rows: None,
                            stats: st,
                            pending: false,
                        });
                    }
                    Some(detail) => {
                        st.drifted.push(f.path.clone());
                        reject(
                            &mut st,
                            rejection(ix, entry, RejectReason::Drifted { detail }),
                        );
                    }
                }
            } else {
                let (md, meta, cached) = self.file_metadata(f, &loc).await?;
                let rows = md.file_metadata().num_rows().max(0) as u64;
                match Self::drift(f, &meta, Some(rows), q) {
                    None => {
                        // The rows are re-checked by `confirm`, for as many files as the
                        // limit needs.
                        st.files_by_index = 1;
                        return Ok(FileHits {
                            positions,
                            read: Some((md, reads_at(loc, &meta, q.pin_versions || cached))),
                            rows: None,
                            stats: st,
                            pending: true,
                        });
                    }
                    Some(detail) => {
                        st.drifted.push(f.path.clone());
                        reject(
                            &mut st,
                            rejection(ix, entry, RejectReason::Drifted { detail }),
                        );
                        read = Some((md, meta, cached));
                    }
                }
            }
        }
        // 2. A scan of the file as it is now.
        let (md, meta, cached) = match read {
            Some(r) => r,
            None => {
                let (md, meta, cached) = self.file_metadata(f, &loc).await?;
                let rows = md.file_metadata().num_rows().max(0) as u64;
                if Self::drift(f, &meta, Some(rows), q).is_some() {
                    st.drifted.push(f.path.clone());
                }
                (md, meta, cached)
            }
        };
        let loc = reads_at(loc, &meta, q.pin_versions || cached);
        self.scan_file(pred, f, md, loc, st).await
    }

    /// Re-checks a pending index answer ([`Pinned::recheck`]); a file whose rows no longer
    /// hold their indexed values is rejected as drifted and scanned. Without residual
    /// conditions every named row must match, so only the first `need` are read.
    #[allow(clippy::too_many_arguments)]
    async fn confirm(
        &self,
        pred: &Predicate,
        plan: &IndexPlan<'_>,
        f: &FileEntry,
        mut h: FileHits,
        out_fields: &[&crate::values::FieldInfo],
        need: u64,
    ) -> Result<FileHits> {
        if !h.pending {
            return Ok(h);
        }
        let (md, loc) = h.read.clone().expect("a pending answer carries its read");
        let mut positions = std::mem::take(&mut h.positions);
        if plan.residual.is_empty() && positions.len() as u64 > need {
            positions.truncate(need.min(usize::MAX as u64) as usize);
        }
        match self
            .recheck(&md, &loc, pred, plan, positions, out_fields)
            .await?
        {
            Ok((positions, rows)) => Ok(FileHits {
                positions,
                rows,
                pending: false,
                ..h
            }),
            Err(detail) => {
                let mut st = std::mem::take(&mut h.stats);
                st.files_by_index = 0;
                st.drifted.push(f.path.clone());
                st.files_rejected += 1;
                st.rejections.push(Rejection {
                    data_file: f.path.clone(),
                    index_id: Some(plan.index.index_id),
                    bundle_path: answer_entry(plan, f).map(|e| e.lineage.bundle_path.clone()),
                    reason: RejectReason::Drifted { detail },
                });
                self.scan_file(pred, f, md, loc, st).await
            }
        }
    }

    /// Scans one file (its metadata read, its location pinned) with the predicate: row
    /// groups and pages pruned by statistics, predicate columns decoded, rows evaluated.
    pub(crate) async fn scan_file(
        &self,
        pred: &Predicate,
        f: &FileEntry,
        md: Arc<ParquetMetaData>,
        loc: Location,
        mut st: QueryStats,
    ) -> Result<FileHits> {
        let deleted = f.deleted()?;
        let live = |p: &u64| !deleted.as_ref().is_some_and(|m| m.contains(*p));
        let file_fields = datafile::fields(&datafile::arrow_schema(&md)?);
        let roots: Vec<Option<usize>> = pred
            .columns
            .iter()
            .map(|c| datafile::root_of(&file_fields, c.field_id).ok())
            .collect();
        let pairs: Vec<_> = roots.iter().copied().zip(pred.columns.iter()).collect();
        let pruned = crate::read::prune::prune(&md, &pairs);
        st.row_groups = pruned.groups_total;
        st.row_groups_pruned = pruned.groups_pruned + pruned.groups_pruned_by_pages;
        st.rows_pruned_by_pages = pruned.rows_pruned_by_pages;
        if pruned.groups.is_empty() {
            st.files_pruned = 1;
            return Ok(FileHits {
                positions: vec![],
                read: Some((md, loc)),
                rows: None,
                stats: st,
                pending: false,
            });
        }
        st.files_scanned = 1;
        st.rows_scanned = pruned.ranges.iter().map(|r| r.end - r.start).sum();
        let mut present: Vec<usize> = roots.iter().flatten().copied().collect();
        present.sort_unstable();
        present.dedup();
        let cols: Vec<Option<usize>> = roots
            .iter()
            .map(|r| r.map(|r| present.binary_search(&r).expect("present")))
            .collect();
        let mut positions = Vec::new();
        if present.is_empty() {
            // No predicate column is in the file: every row sees NULLs (or there is no
            // predicate at all).
            if pred.matches(&vec![Value::Null; pred.columns.len()]) {
                for r in &pruned.ranges {
                    positions.extend((r.start..r.end).filter(|p| live(p)));
                }
            }
        } else {
            let mut vals = Vec::with_capacity(cols.len());
            datafile::scan_selected(
                self.data,
                &loc,
                &md,
                &present,
                &pruned.groups,
                &pruned.ranges,
                |batch, pos| {
                    for (row, p) in pos.iter().enumerate() {
                        vals.clear();
                        for c in &cols {
                            vals.push(match c {
                                Some(c) => datafile::value_at(batch.column(*c).as_ref(), row)?,
                                None => Value::Null,
                            });
                        }
                        if pred.matches(&vals) && live(p) {
                            positions.push(*p);
                        }
                    }
                    Ok(())
                },
            )
            .await?;
        }
        Ok(FileHits {
            positions,
            read: Some((md, loc)),
            rows: None,
            stats: st,
            pending: false,
        })
    }

    /// Reads every predicate column of `positions` (only the pages holding them) — and the
    /// requested `out` columns in the same pass, when the file has them all — and keeps the
    /// rows that match, with their `out` columns. `Err(detail)` when a row fails a condition
    /// on an index column: the index named a row that does not hold the indexed value, so the
    /// file drifted.
    #[allow(clippy::type_complexity)]
    async fn recheck(
        &self,
        md: &Arc<ParquetMetaData>,
        loc: &Location,
        pred: &Predicate,
        plan: &IndexPlan<'_>,
        positions: Vec<u64>,
        out: &[&crate::values::FieldInfo],
    ) -> Result<std::result::Result<(Vec<u64>, Option<RecordBatch>), String>> {
        let file_fields = datafile::fields(&datafile::arrow_schema(md)?);
        let roots: Vec<Option<usize>> = pred
            .columns
            .iter()
            .map(|c| datafile::root_of(&file_fields, c.field_id).ok())
            .collect();
        let out_roots: Option<Vec<usize>> = out
            .iter()
            .map(|x| datafile::root_of(&file_fields, x.field_id).ok())
            .collect();
        let mut present: Vec<usize> = roots.iter().flatten().copied().collect();
        if let Some(o) = &out_roots {
            present.extend(o);
        }
        present.sort_unstable();
        present.dedup();
        let batch = if present.is_empty() {
            None
        } else {
            Some(
                datafile::read_rows(self.data, loc, md, &positions, &present, Some(self.cache))
                    .await?,
            )
        };
        let keyed: Vec<bool> = (0..pred.columns.len())
            .map(|c| plan.key_columns.contains(&Some(c)))
            .collect();
        let mut kept = Vec::with_capacity(positions.len());
        let mut out_positions = Vec::with_capacity(positions.len());
        for (row, p) in positions.into_iter().enumerate() {
            let mut ok = true;
            for (c, r) in roots.iter().enumerate() {
                let v = match (r, &batch) {
                    (Some(r), Some(b)) => {
                        let k = present.binary_search(r).expect("present");
                        datafile::value_at(b.column(k).as_ref(), row)?
                    }
                    _ => Value::Null,
                };
                if !pred.columns[c].matches(&v) {
                    if keyed[c] {
                        return Ok(Err(format!(
                            "row {p} does not hold the value its index entry names (column {})",
                            pred.columns[c].name
                        )));
                    }
                    ok = false;
                }
            }
            if ok {
                kept.push(row as u32);
                out_positions.push(p);
            }
        }
        let rows = match (out_roots, &batch) {
            (Some(o), Some(b)) if !o.is_empty() => {
                let index = arrow_array::UInt32Array::from(kept);
                let mut fields = Vec::with_capacity(o.len());
                let mut columns = Vec::with_capacity(o.len());
                for r in &o {
                    let k = present.binary_search(r).expect("present");
                    fields.push(b.schema().field(k).clone());
                    columns.push(arrow_select::take::take(
                        b.column(k).as_ref(),
                        &index,
                        None,
                    )?);
                }
                Some(RecordBatch::try_new(
                    Arc::new(arrow_schema::Schema::new(fields)),
                    columns,
                )?)
            }
            _ => None,
        };
        Ok(Ok((out_positions, rows)))
    }

    /// The `fields` of `positions` of one file, reusing the metadata the query read.
    async fn fetch_positions(
        &self,
        t: &TableManifest,
        f: &FileEntry,
        positions: Vec<u64>,
        read: Option<(Arc<ParquetMetaData>, Location)>,
        fields: &[&crate::values::FieldInfo],
        q: &Query,
    ) -> Result<RecordBatch> {
        let (md, loc) = match read {
            Some(r) => r,
            None => {
                let loc = Location::new(t.data_location(f));
                let (md, meta, cached) = self.file_metadata(f, &loc).await?;
                (md, reads_at(loc, &meta, q.pin_versions || cached))
            }
        };
        datafile::read_rows_as(self.data, &loc, &md, &positions, fields, Some(self.cache)).await
    }
}

/// How a file may be answered.
enum Answer<'a> {
    /// The table run covers it: these are its entries within the probe (and its own index
    /// entry, when it has one).
    Run(Vec<(Vec<u8>, u64)>, Option<&'a IndexFileEntry>),
    /// A bitmap table run covers it: the positions it names (keys already matched).
    RunPositions(Vec<u64>, Option<&'a IndexFileEntry>),
    /// Its own index file.
    Entry(&'a IndexFileEntry),
    Scan,
}

fn answer_entry<'m>(plan: &IndexPlan<'m>, f: &FileEntry) -> Option<&'m IndexFileEntry> {
    plan.index
        .file_entries()
        .iter()
        .find(|e| e.file_id == f.file_id)
}

/// One batch of the answer: the parts (one per file, in order) under one schema whose
/// fields are nullable (files may differ in nullability).
fn assemble(fields: &[&crate::values::FieldInfo], parts: Vec<RecordBatch>) -> Result<RecordBatch> {
    use arrow_schema::{DataType, Field, Schema};
    // The table's names, and its types where they parse (else the first part's).
    let schema = match parts.first() {
        Some(b) => Schema::new(
            b.schema()
                .fields()
                .iter()
                .zip(fields)
                .map(|(f, t)| {
                    let ty = t
                        .data_type
                        .parse::<DataType>()
                        .ok()
                        .filter(|ty| datafile::widens(f.data_type(), ty))
                        .unwrap_or_else(|| f.data_type().clone());
                    Field::new(&t.name, ty, true)
                })
                .collect::<Vec<_>>(),
        ),
        None => Schema::new(
            fields
                .iter()
                .map(|f| {
                    Field::new(
                        &f.name,
                        f.data_type.parse::<DataType>().unwrap_or(DataType::Null),
                        true,
                    )
                })
                .collect::<Vec<_>>(),
        ),
    };
    let schema = Arc::new(schema);
    if fields.is_empty() {
        let n = parts.iter().map(|p| p.num_rows()).sum();
        return Ok(RecordBatch::try_new_with_options(
            schema,
            vec![],
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?);
    }
    // Every part as the table types its columns (files written before a column was widened
    // hold the narrower type: `datafile::conform`).
    let parts = parts
        .into_iter()
        .map(|p| {
            let columns = p
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(a, f)| datafile::conform(a.clone(), f.data_type()))
                .collect::<Result<Vec<_>>>()?;
            Ok(RecordBatch::try_new_with_options(
                schema.clone(),
                columns,
                &arrow_array::RecordBatchOptions::new().with_row_count(Some(p.num_rows())),
            )?)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut columns = Vec::with_capacity(fields.len());
    for c in 0..fields.len() {
        let arrays: Vec<&dyn arrow_array::Array> =
            parts.iter().map(|p| p.column(c).as_ref()).collect();
        if arrays.is_empty() {
            columns.push(arrow_array::new_empty_array(schema.field(c).data_type()));
            continue;
        }
        columns.push(arrow_select::concat::concat(&arrays).map_err(|e| {
            Error::Unsupported(format!(
                "column {} has different types in different files: {e}",
                fields[c].name
            ))
        })?);
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}
