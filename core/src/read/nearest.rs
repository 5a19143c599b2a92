//! `nearest(table, { vector, k, nprobe, ef, column, index, where, columns })`: the `k` rows
//! whose vectors are nearest to a query vector (`docs/vector-index.md`, `docs/query.md`).
//!
//! 1. `where`, when given, is answered first ([`Pinned::query`]) into the rows a result may
//!    come from — a pre-filter applied to every entry read.
//! 2. The index's codebook (cached) orders its partitions by the query's distance to their
//!    centroids. The table run (`admin::vector_run`), for the files it still covers, and
//!    every other data file whose blob passes the read gate read their directory (cached),
//!    then their `nprobe` nearest partitions in one round of range reads — more when a
//!    pre-filter keeps a share `s` of the vectors (`nprobe / s`), and doubling while a blob
//!    gives fewer than `k` allowed entries — and score their 4-bit codes. Files without an
//!    accepted blob are scanned and every row's exact distance computed. A run that fails a
//!    check is rejected and its files go their own way.
//! 3. The best `ef` entries of all files by code are re-ranked by their exact distance from
//!    the full-precision vectors stored beside the codes (each checked by its CRC-32), in one
//!    more round; the exact global top-k, ties by row id (then file, then position). Deleted
//!    rows and rows outside `where` are never results; rows whose vector is NULL or holds a
//!    NaN or an infinity never are either.
//! 4. The results' rows are read by page together with their vectors, and each result's
//!    distance is computed again from the row as read: a result whose distance differs
//!    rejects that file's blob as drifted, the file is scanned and the search starts over.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use roaring::RoaringTreemap;
use skerry_vector::Metric;

use crate::error::{Error, Result};
use crate::formats::lineage::{RejectReason, Rejection};
use crate::formats::manifest::{
    CodebookRef, FileEntry, IndexFileEntry, IndexState, TableManifest, TableRun,
};
use crate::index::vector::codebook::{PartitionQuery, Trained};
use crate::index::vector::ivf::IvfDirectory;
use crate::index::vector::{self, read::Approx};
use crate::io::{IoStats, Location};
use crate::read::files::{FileOptions, Files, Source};
use crate::read::lookup::{index_io, reads_at, run_rejected, BlobRef, Pinned, RowRef, FILE_WINDOW};
use crate::read::plan::{Query, QueryStats};
use crate::read::predicate::Condition;
use crate::read::ranked::{assemble, reject_drifted};

/// Most results a nearest-neighbour search returns.
pub const MAX_NEAREST_K: usize = 10_000;
/// Most candidates a search may re-rank (`ef`).
pub const MAX_EF: usize = 10_000;
pub use crate::index::vector::{DEFAULT_NPROBE, MAX_NPROBE};

/// A nearest-neighbour search.
#[derive(Clone, Debug, PartialEq)]
pub struct Nearest {
    pub vector: Vec<f32>,
    /// Results wanted (1..=[`MAX_NEAREST_K`]).
    pub k: usize,
    /// Partitions probed (default [`DEFAULT_NPROBE`], 1..=[`MAX_NPROBE`]).
    pub nprobe: Option<usize>,
    /// Candidates re-ranked by their exact distance (default [`vector::DEFAULT_EF`], at
    /// least `k`).
    pub ef: Option<usize>,
    /// The vector index (`None`: the one on `column`, or the table's only one).
    pub index: Option<String>,
    pub column: Option<String>,
    /// A pre-filter: only rows matching every condition are results.
    pub conditions: Vec<Condition>,
    /// Columns of the results (`None`: every column of a scalar type).
    pub columns: Option<Vec<String>>,
    pub verify_files: bool,
    pub pin_versions: bool,
    /// An Iceberg-backed table: search at this published upstream snapshot.
    pub snapshot: Option<i64>,
}

/// Where a candidate's raw vector is read from: a run (by index into the index's runs, oldest
/// first) or a file's own blob (by index into the table's files). Runs sort first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum RawsOf {
    Run(usize),
    File(usize),
}

impl Default for Nearest {
    fn default() -> Nearest {
        Nearest {
            vector: vec![],
            k: 10,
            nprobe: None,
            ef: None,
            index: None,
            column: None,
            conditions: vec![],
            columns: None,
            verify_files: false,
            pin_versions: false,
            snapshot: None,
        }
    }
}

/// The answer of [`Pinned::nearest`]: rows nearest first.
#[derive(Clone, Debug)]
pub struct NearestResult {
    pub rows: Vec<RowRef>,
    /// Each row's exact distance under the index's metric (squared L2, `1 − cos`, `−dot`).
    pub distances: Vec<f64>,
    pub batch: arrow_array::RecordBatch,
    pub metric: &'static str,
    pub stats: QueryStats,
    /// Sequential rounds of overlay reads (codebook, directories, partitions, widening,
    /// raw vectors) that went to the store, besides the rows' pages.
    pub rounds: u64,
    /// Vectors whose distance to the query was computed from codes.
    pub evaluated: u64,
}

/// One candidate: its exact distance and where it is.
#[derive(Clone, Copy, Debug)]
struct Cand {
    dist: f32,
    row_id: u64,
    file: usize,
    row: u64,
}

impl Cand {
    fn key(&self) -> (u64, usize, u64) {
        (self.row_id, self.file, self.row)
    }
}

fn order(a: &Cand, b: &Cand) -> Ordering {
    a.dist.total_cmp(&b.dist).then(a.key().cmp(&b.key()))
}

/// What one file contributed: exact candidates (a scan) or scored entries of its blob.
struct FileAnswer {
    cands: Vec<Cand>,
    approx: Vec<Approx>,
    dir: Option<Arc<IvfDirectory>>,
    indexed: bool,
    /// Sequential rounds of overlay reads (directory, partitions) that went to the store.
    rounds: u64,
    stats: QueryStats,
}

impl FileAnswer {
    /// A file the table run answers (its entries come with the run's).
    fn by_run() -> FileAnswer {
        FileAnswer {
            cands: vec![],
            approx: vec![],
            dir: None,
            indexed: true,
            rounds: 0,
            stats: QueryStats::default(),
        }
    }

    fn scanned(cands: Vec<Cand>, stats: QueryStats) -> FileAnswer {
        FileAnswer {
            cands,
            approx: vec![],
            dir: None,
            indexed: false,
            rounds: 0,
            stats,
        }
    }
}

/// Whether a phase of reads went to the store.
fn read_since(now: IoStats, then: &IoStats) -> u64 {
    u64::from(now.requests > then.requests)
}

impl Pinned<'_> {
    /// The `k` rows of `table` nearest to `n.vector` (see the module docs). Errors: unknown
    /// table, index or column (`E_NOT_FOUND`); no vector index, several without `index`, a
    /// query vector that is empty, not finite or of another dimension (`E_INVALID`); `k` or
    /// `ef` out of range (`E_LIMIT`); data files that cannot be read (`E_IO`, `E_PARQUET`).
    /// A missing, rejected or drifted blob never fails a search: its file is scanned.
    pub async fn nearest(&self, table: &str, n: &Nearest) -> Result<NearestResult> {
        let (o0, d0, h0) = (self.overlay.stats(), self.data.stats(), self.cache.hits());
        let t = self.manifest.table(table)?;
        if n.k == 0 || n.k > MAX_NEAREST_K {
            return Err(Error::Limit {
                what: "nearest k",
                count: n.k as u64,
                limit: MAX_NEAREST_K as u64,
                remedy: "ask for between 1 and 10000 results",
            });
        }
        let ef = n.ef.unwrap_or(vector::DEFAULT_EF).max(n.k);
        if ef > MAX_EF {
            return Err(Error::Limit {
                what: "nearest ef",
                count: ef as u64,
                limit: MAX_EF as u64,
                remedy: "ask for at most 10000 candidates",
            });
        }
        let nprobe = n.nprobe.unwrap_or(DEFAULT_NPROBE);
        if nprobe == 0 || nprobe > MAX_NPROBE {
            return Err(Error::Limit {
                what: "nearest nprobe",
                count: nprobe as u64,
                limit: MAX_NPROBE as u64,
                remedy: "probe between 1 and 65536 partitions",
            });
        }
        let vectors: Vec<_> = t
            .indexes
            .iter()
            .filter(|i| i.kind().answers().nearest)
            .collect();
        let ix =
            match (&n.index, &n.column) {
                (Some(name), _) => {
                    let ix = t.index(name)?;
                    if !ix.kind().answers().nearest {
                        return Err(Error::Invalid(format!(
                            "index {}.{name} is a {} index, not vector",
                            t.name,
                            ix.kind()
                        )));
                    }
                    ix
                }
                (None, Some(col)) => {
                    let f = t.fields.iter().find(|f| f.name == *col).ok_or_else(|| {
                        Error::NotFound {
                            kind: "column",
                            name: format!("{}.{col}", t.name),
                        }
                    })?;
                    let on: Vec<_> = vectors
                        .iter()
                        .filter(|i| i.fields.first() == Some(&f.field_id))
                        .collect();
                    match on.as_slice() {
                        [one] => **one,
                        [] => {
                            return Err(Error::Invalid(format!(
                                "column {}.{col} has no vector index",
                                t.name
                            )))
                        }
                        _ => {
                            return Err(Error::Invalid(format!(
                                "column {}.{col} has several vector indexes: name one in `index`",
                                t.name
                            )))
                        }
                    }
                }
                (None, None) => crate::read::ranked::the_one(
                    &t.name,
                    &vectors,
                    "vector",
                    "name one in `index` or `column`",
                )?,
            };
        let spec = ix
            .spec
            .vector()
            .ok_or_else(|| Error::Manifest(format!("vector index {} has no metric", ix.name)))?;
        let metric = spec.metric.metric();
        let field = *ix
            .fields
            .first()
            .ok_or_else(|| Error::Manifest(format!("vector index {} has no column", ix.name)))?;
        let vfield = t
            .fields
            .iter()
            .find(|f| f.field_id == field)
            .ok_or_else(|| Error::Manifest(format!("vector index {} names no column", ix.name)))?;
        if n.vector.is_empty() || n.vector.len() > vector::MAX_DIM {
            return Err(Error::Invalid(format!(
                "nearest: the query vector has {} dimensions (1..={})",
                n.vector.len(),
                vector::MAX_DIM
            )));
        }
        if !skerry_vector::finite(&n.vector) {
            return Err(Error::Invalid(
                "nearest: the query vector holds a NaN or an infinity".into(),
            ));
        }
        if let Ok(arrow_schema::DataType::FixedSizeList(_, d)) =
            vfield.data_type.parse::<arrow_schema::DataType>()
        {
            if d as usize != n.vector.len() {
                return Err(Error::Invalid(format!(
                    "nearest: the query vector has {} dimensions, column {} has {d}",
                    n.vector.len(),
                    vfield.name
                )));
            }
        }
        let out_columns: Vec<String> = match &n.columns {
            Some(c) => c.clone(),
            None => t
                .fields
                .iter()
                .filter(|f| f.key_type.is_some())
                .map(|f| f.name.clone())
                .collect(),
        };
        for c in &out_columns {
            if !t.fields.iter().any(|f| f.name == *c) {
                return Err(Error::NotFound {
                    kind: "column",
                    name: format!("{}.{c}", t.name),
                });
            }
        }
        let mut stats = QueryStats {
            index: Some(ix.name.clone()),
            index_kind: Some(ix.kind().to_string()),
            index_columns: vec![vfield.name.clone()],
            keys: 1,
            ..Default::default()
        };
        let use_blobs = !self.scan_only && ix.state != IndexState::Poisoned;
        let mut files = Files::open(
            self,
            table,
            t,
            ix,
            FileOptions {
                conditions: &n.conditions,
                verify_files: n.verify_files,
                pin_versions: n.pin_versions,
                use_blobs,
                by_run: false,
            },
        )
        .await?;
        let fields: Vec<&crate::values::FieldInfo> = out_columns
            .iter()
            .filter_map(|c| t.fields.iter().find(|f| f.name == *c))
            .collect();
        // The codebook, once per search (cached): a codebook that cannot be read rejects
        // every blob (their files are scanned).
        // The blobs' directories are fetched in the same round (cached; checked against the
        // codebook when each file is probed).
        // The index's table runs (RFC 0004 tiers): by ordinal, the file each still covers,
        // each file answered by the newest that covers it; under `verify` only the files a
        // HEAD confirms.
        let all_runs: Vec<&TableRun> = match use_blobs {
            true => ix.table_runs(),
            false => vec![],
        };
        let mut tier_cov: Vec<Vec<Option<usize>>> = t.tier_coverage(&all_runs);
        if n.verify_files {
            let q = (ix.index_id, n.pin_versions);
            self.confirm_covered(t, &all_runs, &mut tier_cov, q, &mut stats)
                .await?;
        }
        let mut by_run = vec![false; t.files.len()];
        for i in tier_cov.iter().flatten().flatten() {
            by_run[*i] = true;
        }
        let o_start = self.overlay.stats();
        let book = async {
            match &ix.codebook {
                Some(c) if use_blobs => self.codebook(c).await.map(Some),
                _ => Ok(None),
            }
        };
        let prefetch = async {
            use futures::StreamExt;
            let entries: Vec<&IndexFileEntry> = (0..t.files.len())
                .filter(|i| !by_run[*i])
                .filter_map(|i| match files.source(i) {
                    Source::Index(e) if e.lineage.blob_type == vector::BLOB_TYPE => Some(e),
                    _ => None,
                })
                .collect();
            let run_dirs = all_runs.iter().map(|r| self.blobs().at(self.run_blob(r)));
            let futs: Vec<_> = entries
                .into_iter()
                .map(|e| self.blobs().at(BlobRef::of(e)))
                .chain(run_dirs)
                .map(|blob| async move {
                    let _ = vector::read::directory(&blob, None, 0).await;
                })
                .collect();
            futures::stream::iter(futs)
                .buffer_unordered(FILE_WINDOW)
                .collect::<Vec<()>>()
                .await
        };
        let (book, _): (std::result::Result<Option<Arc<Trained>>, RejectReason>, _) =
            futures::future::join(book, prefetch).await;
        let mut rounds = read_since(self.overlay.stats(), &o_start);
        // The partitions in the order a query probes them: nearest centroid first.
        let q_space = book
            .as_ref()
            .ok()
            .and_then(|b| b.as_ref())
            .filter(|b| b.book.space.dim == n.vector.len())
            .map(|b| b.book.space.query(&n.vector));
        let order_all: Vec<u32> = match (&book, &q_space) {
            (Ok(Some(b)), Some(q)) => b.book.centroids.probe(q, b.book.centroids.nlist()),
            _ => vec![],
        };
        // The query's tables for its `nprobe` nearest partitions, shared by every file (a
        // file probing further computes the others itself).
        let tables: Vec<Arc<PartitionQuery>> = match (&book, &q_space) {
            (Ok(Some(b)), Some(q)) => order_all
                .iter()
                .take(nprobe)
                .map(|p| Arc::new(b.book.query(q, *p)))
                .collect(),
            _ => vec![],
        };
        // The runs still answering (a damaged one is dropped for the rest of the search).
        let mut runs: Vec<Option<&TableRun>> = all_runs.iter().copied().map(Some).collect();
        loop {
            let mut fstats = QueryStats {
                files: t.files.len() as u64,
                ..Default::default()
            };
            let mut rejections: Vec<Rejection> = Vec::new();
            let (book, q_space, order_all, tables) = (&book, &q_space, &order_all, &tables);
            let probe = Probe {
                book,
                q: q_space.as_deref(),
                order: order_all,
                tables,
                nprobe,
                k: n.k,
            };
            // The run's directory (cached), checked against the codebook; the files it
            // answers: those it covers unchanged that may be answered by a run
            // (`Files::by_run`: most have no blob of their own, decision 71), and of which
            // `where` keeps a row.
            // By file: the run answering it; by run: its ordinals' files it answers.
            let mut in_run: Vec<Option<usize>> = vec![None; t.files.len()];
            let mut ordinals: Vec<Vec<Option<u32>>> = vec![vec![]; runs.len()];
            let mut run_dirs: Vec<Option<Arc<IvfDirectory>>> = vec![None; runs.len()];
            let dirs_got = futures::future::join_all(runs.iter().map(|r| async move {
                match r {
                    Some(r) => Some(self.run_directory(r, &probe, metric, n).await),
                    None => None,
                }
            }))
            .await;
            for (ri, got) in dirs_got.into_iter().enumerate() {
                match got {
                    None => {}
                    Some(Ok(d)) => {
                        ordinals[ri] = vec![None; t.files.len()];
                        for (o, i) in tier_cov[ri].iter().enumerate() {
                            let Some(i) = *i else { continue };
                            if files.by_run(i) && !matches!(files.allow(i), Some(None)) {
                                in_run[i] = Some(ri);
                                ordinals[ri][i] = Some(o as u32);
                            }
                        }
                        run_dirs[ri] = Some(d);
                    }
                    Some(Err(reason)) => {
                        stats
                            .rejections
                            .push(run_rejected(runs[ri].take(), ix.index_id, reason));
                    }
                }
            }
            fstats.files_by_run = in_run.iter().flatten().count() as u64;
            let (in_run, ordinals, run_dirs) = (&in_run, &ordinals, &run_dirs);
            let futs: Vec<_> = t
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let allow = files.allow(i);
                    let source = files.source(i);
                    async move {
                        if in_run[i].is_some() {
                            // Answered by the run, probed once for all its files below.
                            return Ok((i, Some(FileAnswer::by_run()), None));
                        }
                        if let Some(None) = allow {
                            return Ok((i, None, None)); // `where` keeps no row of the file
                        }
                        let allow = allow.flatten();
                        let deleted = f.deleted()?;
                        let scan = || self.scan_vectors(t, i, f, field, metric, n, allow, &deleted);
                        let e = match source {
                            Source::Scan(rejection) => {
                                return Ok((i, Some(scan().await?), rejection))
                            }
                            Source::Index(e) => e,
                        };
                        match self
                            .probe_file(t, f, e, metric, n, probe, allow, &deleted)
                            .await?
                        {
                            Ok(a) => Ok::<_, Error>((i, Some(a), None)),
                            Err(reason) => Ok((
                                i,
                                Some(scan().await?),
                                Some(Rejection {
                                    data_file: f.path.clone(),
                                    index_id: Some(ix.index_id),
                                    bundle_path: Some(e.lineage.bundle_path.clone()),
                                    reason,
                                }),
                            )),
                        }
                    }
                })
                .collect();
            use futures::StreamExt;
            let by_files = futures::stream::iter(futs)
                .buffered(FILE_WINDOW)
                .collect::<Vec<_>>();
            let files_ref = &files;
            let by_the_runs =
                futures::future::join_all(runs.iter().enumerate().map(|(ri, r)| async move {
                    match (r, &run_dirs[ri]) {
                        (Some(r), Some(d)) => Some(
                            self.probe_vector_run(t, d, r, files_ref, &ordinals[ri], probe)
                                .await,
                        ),
                        _ => None,
                    }
                }));
            let (got, from_runs) = futures::future::join(by_files, by_the_runs).await;
            let mut run_rounds = 0;
            let mut run_approx: Vec<(Approx, usize)> = Vec::new();
            let mut damaged_run = false;
            for (ri, from_run) in from_runs.into_iter().enumerate() {
                match from_run {
                    None => {}
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Ok((a, r)))) => {
                        run_approx.extend(a);
                        run_rounds = run_rounds.max(r);
                    }
                    Some(Ok(Err(reason))) => {
                        // A damaged run: every file it answered goes its own way, from
                        // the top.
                        stats
                            .rejections
                            .push(run_rejected(runs[ri].take(), ix.index_id, reason));
                        damaged_run = true;
                    }
                }
            }
            if damaged_run {
                continue;
            }
            // Directories and partitions (and widening): the slowest file's rounds.
            let mut probed_rounds = 0;
            let mut all: Vec<Cand> = Vec::new();
            let mut indexed: HashSet<usize> = HashSet::new();
            let mut approx: Vec<(Approx, usize)> = Vec::new();
            let mut dirs: Vec<Option<Arc<IvfDirectory>>> = vec![None; t.files.len()];
            let mut evaluated = run_approx.len() as u64;
            approx.extend(run_approx);
            probed_rounds = probed_rounds.max(run_rounds);
            for g in got {
                let (i, a, r) = g?;
                if let Some(r) = r {
                    if let RejectReason::Drifted { .. } = &r.reason {
                        if !fstats.drifted.contains(&t.files[i].path) {
                            fstats.drifted.push(t.files[i].path.clone());
                        }
                    }
                    rejections.push(r);
                }
                match a {
                    None => fstats.files_pruned += 1,
                    Some(a) => {
                        if a.indexed {
                            fstats.files_by_index += 1;
                            indexed.insert(i);
                        }
                        evaluated += a.approx.len() as u64;
                        probed_rounds = probed_rounds.max(a.rounds);
                        fstats.add(QueryStats {
                            files: 0,
                            ..a.stats
                        });
                        all.extend(a.cands);
                        approx.extend(a.approx.into_iter().map(|x| (x, i)));
                        dirs[i] = a.dir;
                    }
                }
            }
            // The best `ef` entries of every blob by code, re-ranked exactly from their raw
            // vectors: one round, a batch per blob (the run's, or a file's own).
            // Keyed once (a key per comparison would look each row id up again and again).
            let r = ef.min(approx.len());
            if r > 0 && r < approx.len() {
                let mut keyed: Vec<((u32, u64, usize, u32), u32)> = approx
                    .iter()
                    .enumerate()
                    .map(|(k, x)| {
                        let row_id = t.files[x.1]
                            .row_id_at(u64::from(x.0.position))
                            .unwrap_or(u64::MAX);
                        let score = skerry_vector::ordered_bits(x.0.score);
                        ((score, row_id, x.1, x.0.position), k as u32)
                    })
                    .collect();
                keyed.select_nth_unstable_by(r - 1, |a, b| a.0.cmp(&b.0));
                approx = keyed[..r]
                    .iter()
                    .map(|(_, k)| approx[*k as usize])
                    .collect();
            }
            // By blob the raw vectors are read from: a file's own (`RawsOf::File`), or a run's
            // for every file it answers: (source, entry indexes, (file, position)).
            type Group = (RawsOf, Vec<u64>, Vec<(usize, u32)>);
            let mut groups: Vec<Group> = Vec::new();
            let source = |fi: usize| in_run[fi].map_or(RawsOf::File(fi), RawsOf::Run);
            approx.sort_by_key(|x| (source(x.1), x.0.index));
            for (a, fi) in &approx {
                match groups.last_mut() {
                    Some(last) if last.0 == source(*fi) => {
                        last.1.push(a.index);
                        last.2.push((*fi, a.position));
                    }
                    _ => groups.push((source(*fi), vec![a.index], vec![(*fi, a.position)])),
                }
            }
            let raw_phase = self.overlay.stats();
            let raws = futures::future::join_all(groups.iter().map(|(src, idx, _)| {
                let (at, dir) = match src {
                    RawsOf::File(fi) => (
                        BlobRef::of(files.entry(*fi).expect("an indexed file has an entry")),
                        dirs[*fi].clone().expect("an indexed file has a directory"),
                    ),
                    RawsOf::Run(ri) => (
                        self.run_blob(runs[*ri].expect("a run answering files")),
                        run_dirs[*ri].clone().expect("the run's directory"),
                    ),
                };
                async move {
                    let blob = self.blobs().at(at);
                    vector::read::raws(&blob, &dir, idx)
                        .await
                        .map_err(|err| blob.reject(err))
                }
            }))
            .await;
            let raw_rounds = read_since(self.overlay.stats(), &raw_phase);
            let mut damaged: Option<(RawsOf, RejectReason)> = None;
            for ((src, _, at), got) in groups.iter().zip(raws) {
                match got {
                    Err(reason) => {
                        damaged = Some((*src, reason));
                        break;
                    }
                    Ok(vs) => {
                        for (v, (fi, p)) in vs.iter().zip(at) {
                            let row = u64::from(*p);
                            all.push(Cand {
                                dist: skerry_vector::exact(metric, &n.vector, v),
                                row_id: t.files[*fi].row_id_at(row).unwrap_or(u64::MAX),
                                file: *fi,
                                row,
                            });
                        }
                    }
                }
            }
            match damaged {
                // A damaged raw vector: that blob is rejected — a file's (the file is then
                // scanned) or the run's (its files go their own way) — and the search
                // starts over.
                Some((RawsOf::File(fi), reason)) => {
                    stats.rejections.push(Rejection {
                        data_file: t.files[fi].path.clone(),
                        index_id: Some(ix.index_id),
                        bundle_path: files.bundle_path(fi),
                        reason,
                    });
                    files.force_scan(fi);
                    continue;
                }
                Some((RawsOf::Run(ri), reason)) => {
                    stats
                        .rejections
                        .push(run_rejected(runs[ri].take(), ix.index_id, reason));
                    continue;
                }
                None => {}
            }
            rounds += probed_rounds + raw_rounds;
            all.sort_by(order);
            all.truncate(n.k);
            // The results' rows, with their vectors: every distance computed again. Asked for
            // no column, the answer is the results' places and distances (computed from the
            // index's CRC-checked copies of the vectors): the published manifest is trusted
            // for their files as `search`, `lookup` and `count` trust it — no request to a
            // data file — unless `verify` asks that each be confirmed.
            let recheck = !fields.is_empty();
            let confirm = recheck || n.verify_files;
            let mut read_fields = fields.clone();
            let extra = !read_fields.iter().any(|f| f.field_id == field);
            if extra {
                read_fields.push(vfield);
            }
            let vcol = read_fields
                .iter()
                .position(|f| f.field_id == field)
                .expect("the vector column is read");
            let mut order_files: Vec<usize> = Vec::new();
            for c in all.iter().filter(|_| confirm) {
                if !order_files.contains(&c.file) {
                    order_files.push(c.file);
                }
            }
            let metas = futures::future::join_all(order_files.iter().map(|&fi| async move {
                let f = &t.files[fi];
                let loc = Location::new(t.data_location(f));
                let m = self.file_metadata(f, &loc).await;
                (fi, loc, m)
            }))
            .await;
            let mut reads = Vec::new();
            let mut place = Vec::new();
            let mut changed: Option<usize> = None;
            let qq = Query {
                pin_versions: n.pin_versions,
                ..Default::default()
            };
            for (fi, loc, m) in metas {
                let f = &t.files[fi];
                let (md, meta, cached) = m?;
                let nrows = md.file_metadata().num_rows().max(0) as u64;
                let wanted: Vec<(usize, u64)> = all
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.file == fi)
                    .map(|(i, c)| (i, c.row))
                    .collect();
                if Self::drift(f, &meta, Some(nrows), &qq).is_some()
                    || wanted.iter().any(|w| w.1 >= nrows)
                {
                    changed = Some(fi);
                    break;
                }
                let loc = reads_at(loc, &meta, n.pin_versions || cached);
                place.extend(wanted.iter().map(|w| w.0));
                reads.push((fi, loc, md, wanted));
            }
            let mut parts = Vec::new();
            if changed.is_none() && recheck {
                let rf = &read_fields;
                let got = futures::future::join_all(reads.iter().map(
                    |(_, loc, md, wanted)| async move {
                        let positions: Vec<u64> = wanted.iter().map(|w| w.1).collect();
                        crate::datafile::read_rows_as(
                            self.data,
                            loc,
                            md,
                            &positions,
                            rf,
                            Some(self.cache),
                        )
                        .await
                    },
                ))
                .await;
                for ((fi, _, _, wanted), g) in reads.iter().zip(got) {
                    let batch = g?;
                    let col = batch.column(vcol);
                    for (k, (ci, _)) in wanted.iter().enumerate() {
                        let again = crate::datafile::vector_at(col.as_ref(), k)
                            .filter(|v| v.len() == n.vector.len() && skerry_vector::finite(v))
                            .map(|v| skerry_vector::exact(metric, &n.vector, &v));
                        if again.map(f32::to_bits) != Some(all[*ci].dist.to_bits()) {
                            changed = Some(*fi);
                            break;
                        }
                    }
                    if changed.is_some() {
                        break;
                    }
                    parts.push(batch);
                }
            }
            if let Some(fi) = changed {
                let f = &t.files[fi];
                reject_drifted(
                    &mut stats,
                    f,
                    !indexed.contains(&fi),
                    ix.index_id,
                    files.bundle_path(fi),
                    "a result's vector differs from the row read",
                )?;
                files.force_scan(fi);
                continue;
            }
            let mut batch = if recheck {
                assemble(parts, &place, &read_fields)?
            } else {
                assemble(parts, &(0..all.len()).collect::<Vec<_>>(), &[])?
            };
            if recheck && extra {
                batch.remove_column(batch.num_columns() - 1);
            }
            stats.rejections.extend(rejections);
            stats.add(fstats);
            stats.files_rejected = stats.rejections.len() as u64;
            let rows: Vec<RowRef> = all
                .iter()
                .map(|c| {
                    let f = &t.files[c.file];
                    RowRef {
                        file: f.path.clone(),
                        position: c.row,
                        row_id: f.row_id_at(c.row),
                    }
                })
                .collect();
            self.io_since(&mut stats, (o0, d0, h0));
            return Ok(NearestResult {
                distances: all.iter().map(|c| f64::from(c.dist)).collect(),
                rows,
                batch,
                metric: spec.metric.name(),
                stats,
                rounds,
                evaluated,
            });
        }
    }

    /// A file scanned: every row's exact distance, the file's top k.
    #[allow(clippy::too_many_arguments)]
    async fn scan_vectors(
        &self,
        t: &TableManifest,
        i: usize,
        f: &FileEntry,
        field: i32,
        metric: Metric,
        n: &Nearest,
        allow: Option<&RoaringTreemap>,
        deleted: &Option<RoaringTreemap>,
    ) -> Result<FileAnswer> {
        let mut st = QueryStats::default();
        let loc = Location::new(t.data_location(f));
        let (md, meta, cached) = self.file_metadata(f, &loc).await?;
        let nrows = md.file_metadata().num_rows().max(0) as u64;
        let qq = Query {
            pin_versions: n.pin_versions,
            ..Default::default()
        };
        if Self::drift(f, &meta, Some(nrows), &qq).is_some() {
            st.drifted.push(f.path.clone());
        }
        let loc = reads_at(loc, &meta, n.pin_versions || cached);
        let mut top: Vec<Cand> = Vec::new();
        let mut scanned = 0u64;
        let mut wrong_dim: Option<usize> = None;
        crate::datafile::scan_values_range(self.data, &loc, &md, &[field], None, |vals, row| {
            scanned += 1;
            if deleted.as_ref().is_some_and(|d| d.contains(row))
                || allow.is_some_and(|a| !a.contains(row))
            {
                return Ok(());
            }
            let Some(crate::values::Value::Binary(b)) = vals.first() else {
                return Ok(());
            };
            let Some(v) = vector::from_bytes(b) else {
                return Ok(());
            };
            if !skerry_vector::finite(&v) {
                return Ok(());
            }
            if v.len() != n.vector.len() {
                wrong_dim.get_or_insert(v.len());
                return Ok(());
            }
            top.push(Cand {
                dist: skerry_vector::exact(metric, &n.vector, &v),
                row_id: f.row_id_at(row).unwrap_or(u64::MAX),
                file: i,
                row,
            });
            if top.len() >= 4 * n.k.max(256) {
                top.sort_by(order);
                top.truncate(n.k);
            }
            Ok(())
        })
        .await?;
        if let Some(d) = wrong_dim {
            return Err(Error::Invalid(format!(
                "nearest: the query vector has {} dimensions, {} holds vectors of {d}",
                n.vector.len(),
                f.path
            )));
        }
        top.sort_by(order);
        top.truncate(n.k);
        st.files_scanned = 1;
        st.rows_scanned = scanned;
        Ok(FileAnswer::scanned(top, st))
    }

    /// The table run's directory (cached), checked against the codebook, the metric and
    /// the run's file list.
    async fn run_directory(
        &self,
        run: &TableRun,
        p: &Probe<'_>,
        metric: Metric,
        n: &Nearest,
    ) -> std::result::Result<Arc<IvfDirectory>, RejectReason> {
        let book = match p.book {
            Ok(Some(b)) => b,
            Ok(None) => {
                return Err(RejectReason::Corrupt {
                    message: "the index has no codebook for its run".into(),
                })
            }
            Err(reason) => return Err(reason.clone()),
        };
        let blob = self.blobs().at(self.run_blob(run));
        let d = vector::read::directory(&blob, Some(&book.sha), metric.code())
            .await
            .map_err(|err| blob.reject(err))?;
        if d.entries > 0 && d.codes.dim != n.vector.len() {
            return Err(RejectReason::Corrupt {
                message: "the vector run's dimensions are not the query's".into(),
            });
        }
        Ok(d)
    }

    /// The entries of every file the run answers (`in_run`: its ordinal), scored by code:
    /// the probed partitions read once for all of them (see the module docs), deleted rows
    /// and rows outside `where` skipped. `Err(reason)` rejects the run.
    async fn probe_vector_run(
        &self,
        t: &TableManifest,
        dir: &IvfDirectory,
        run: &TableRun,
        files: &Files<'_>,
        in_run: &[Option<u32>],
        p: Probe<'_>,
    ) -> Result<std::result::Result<(Vec<(Approx, usize)>, u64), RejectReason>> {
        let mut file_of: Vec<Option<usize>> = vec![None; run.files.len()];
        let mut deleted: Vec<Option<RoaringTreemap>> = vec![None; run.files.len()];
        let (mut entries, mut allowed) = (0u64, 0u64);
        for (i, o) in in_run.iter().enumerate() {
            let Some(o) = o else { continue };
            let o = *o as usize;
            file_of[o] = Some(i);
            deleted[o] = t.files[i].deleted()?;
            // The file's rows stand for its vectors (NULLs are few).
            let rows = t.files[i].record_count;
            entries += rows;
            allowed += match files.allow(i) {
                Some(Some(a)) => a.len(),
                _ => rows,
            };
        }
        let mut out: Vec<Approx> = Vec::new();
        if entries == 0 || dir.entries == 0 {
            return Ok(Ok((vec![], 0)));
        }
        let (Some(book), Some(q)) = (p.book.as_ref().ok().and_then(|b| b.as_ref()), p.q) else {
            return Ok(Err(RejectReason::Corrupt {
                message: "the index has no codebook for its run".into(),
            }));
        };
        let blob = self.blobs().at(self.run_blob(run));
        let keep = |ordinal: u32, position: u32| {
            file_of
                .get(ordinal as usize)
                .copied()
                .flatten()
                .is_some_and(|i| {
                    files.keeps(i, deleted[ordinal as usize].as_ref(), u64::from(position))
                })
        };
        let share = allowed as f64 / entries as f64;
        let rounds = match self
            .probe_blob(&blob, dir, book, q, &p, share, &keep, &mut out)
            .await
        {
            Ok(r) => r,
            Err(err) => return Ok(Err(blob.reject(err))),
        };
        let mut got = Vec::with_capacity(out.len());
        for a in out {
            let i = file_of[a.ordinal as usize].expect("kept entries are of answered files");
            if u64::from(a.position) >= t.files[i].record_count {
                return Ok(Err(RejectReason::Corrupt {
                    message: "a run entry names a position past its file's rows".into(),
                }));
            }
            got.push((a, i));
        }
        Ok(Ok((got, rounds)))
    }

    /// The index's codebook, cached by its path and SHA-256.
    async fn codebook(&self, c: &CodebookRef) -> std::result::Result<Arc<Trained>, RejectReason> {
        if let Some(t) = self
            .cache
            .directory(&c.path, 0, &c.sha256)
            .and_then(|p| p.downcast::<Trained>().ok())
        {
            return Ok(t);
        }
        if c.size > crate::index::vector::codebook::MAX_BYTES {
            return Err(RejectReason::Corrupt {
                message: format!("the codebook is {} bytes", c.size),
            });
        }
        let bytes = self
            .overlay
            .read_range(&Location::new(&c.path), 0..c.size)
            .await
            .map_err(index_io)?;
        let t = Trained::parse(&bytes, &c.sha256).map_err(|e| RejectReason::Corrupt {
            message: format!("codebook {}: {e}", c.path),
        })?;
        let t = Arc::new(t);
        self.cache
            .put_directory(&c.path, 0, &c.sha256, t.clone(), t.heap_bytes());
        Ok(t)
    }

    /// One file's entries through its blob, scored by code: its directory, then its nearest
    /// partitions (see the module docs). `Err(reason)` rejects the blob (the file is then
    /// scanned).
    #[allow(clippy::too_many_arguments)]
    async fn probe_file(
        &self,
        t: &TableManifest,
        f: &FileEntry,
        e: &IndexFileEntry,
        metric: Metric,
        n: &Nearest,
        p: Probe<'_>,
        allow: Option<&RoaringTreemap>,
        deleted: &Option<RoaringTreemap>,
    ) -> Result<std::result::Result<FileAnswer, RejectReason>> {
        if e.lineage.blob_type != vector::BLOB_TYPE {
            return Ok(Err(RejectReason::Corrupt {
                message: format!(
                    "a {} blob (written by an older Skerry): build() replaces it",
                    e.lineage.blob_type
                ),
            }));
        }
        if n.verify_files {
            let meta = self.data.head(&Location::new(t.data_location(f))).await?;
            let qq = Query {
                pin_versions: n.pin_versions,
                ..Default::default()
            };
            if let Some(detail) = Self::drift(f, &meta, None, &qq) {
                return Ok(Err(RejectReason::Drifted { detail }));
            }
        }
        let book = match p.book {
            Ok(b) => b.as_ref(),
            Err(reason) => return Ok(Err(reason.clone())),
        };
        let blob = self.blobs().at(BlobRef::of(e));
        let before = self.overlay.stats();
        let dir = match vector::read::directory(&blob, book.map(|b| &b.sha), metric.code()).await {
            Ok(d) => d,
            Err(err) => return Ok(Err(blob.reject(err))),
        };
        let mut answer = FileAnswer {
            cands: vec![],
            approx: vec![],
            dir: Some(dir.clone()),
            indexed: true,
            rounds: read_since(self.overlay.stats(), &before),
            stats: QueryStats::default(),
        };
        if dir.entries == 0 {
            return Ok(Ok(answer));
        }
        if dir.codes.dim != n.vector.len() {
            return Err(Error::Invalid(format!(
                "nearest: the query vector has {} dimensions, {} holds vectors of {}",
                n.vector.len(),
                f.path,
                dir.codes.dim
            )));
        }
        let (Some(book), Some(q)) = (book, p.q) else {
            return Ok(Err(RejectReason::Corrupt {
                message: "the index has no codebook for its vectors".into(),
            }));
        };
        let share = allow.map_or(1.0, |a| a.len() as f64 / dir.entries.max(1) as f64);
        let keep = |_: u32, position: u32| {
            let pos = u64::from(position);
            !deleted.as_ref().is_some_and(|d| d.contains(pos))
                && allow.is_none_or(|a| a.contains(pos))
        };
        match self
            .probe_blob(&blob, &dir, book, q, &p, share, &keep, &mut answer.approx)
            .await
        {
            Ok(r) => answer.rounds += r,
            Err(err) => return Ok(Err(blob.reject(err))),
        }
        Ok(Ok(answer))
    }

    /// Scores the entries `keep` allows of one blob (a file's or the run), appended to `out`:
    /// its `nprobe` nearest partitions, `nprobe / share` when a pre-filter keeps a `share` of
    /// its vectors, then twice as far while it gave fewer than `k`. Returns the rounds of reads
    /// that went to the store.
    #[allow(clippy::too_many_arguments)]
    async fn probe_blob(
        &self,
        blob: &dyn crate::index::access::BlobAccess,
        dir: &IvfDirectory,
        book: &Trained,
        q: &[f32],
        p: &Probe<'_>,
        share: f64,
        keep: &(dyn Fn(u32, u32) -> bool + Sync),
        out: &mut Vec<Approx>,
    ) -> std::result::Result<u64, crate::index::blob::BlobError> {
        let share = share.min(1.0).max(1e-9);
        let mut want = ((p.nprobe as f64 / share).ceil() as usize).min(p.order.len());
        let (mut done, mut rounds) = (0usize, 0u64);
        loop {
            let upto = want.min(p.order.len());
            let probes = &p.order[done..upto];
            let before = self.overlay.stats();
            let query = |rank: usize, part: u32| match p.tables.get(rank) {
                Some(t) => t.clone(),
                None => Arc::new(book.book.query(q, part)),
            };
            vector::read::candidates(blob, dir, &book.book, probes, &query, done, keep, out)
                .await?;
            rounds += read_since(self.overlay.stats(), &before);
            done = upto;
            // Fewer than k allowed entries: the next partitions too, doubling.
            if out.len() >= p.k || done >= p.order.len() {
                return Ok(rounds);
            }
            want = (done * 2).max(done + 1);
        }
    }
}

/// What every file's probe shares: the codebook, the query in its space, the partitions in
/// probe order, `nprobe` and `k`.
#[derive(Clone, Copy)]
struct Probe<'a> {
    book: &'a std::result::Result<Option<Arc<Trained>>, RejectReason>,
    q: Option<&'a [f32]>,
    order: &'a [u32],
    /// The query's tables for `order`'s first partitions.
    tables: &'a [Arc<PartitionQuery>],
    nprobe: usize,
    k: usize,
}
