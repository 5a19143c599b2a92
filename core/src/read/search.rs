//! `search(table, { query, phrase, operator, k, where, columns })`: BM25 top-k over a
//! full-text index's column (`docs/fulltext-index.md`, `docs/query.md`).
//!
//! 1. The query is analyzed with the index's analyzer into distinct terms (a phrase keeps
//!    each word's offset from the first).
//! 2. `where`, when given, is answered first ([`Pinned::query`]: indexes or scans) into the
//!    set of rows a result may come from — a pre-filter, never a post-filter.
//! 3. Every data file contributes its statistics: a file whose blob passes the read gate
//!    through its directory (documents, terms) and the term blocks of the query's terms
//!    (document frequencies, where its postings are), then its postings (and positions for a
//!    phrase), all checked against their CRC-32s; a file without an accepted blob is scanned
//!    with the same analyzer. The table's statistics are the sums: document count (rows with
//!    a non-NULL value), average document length, each term's document frequency — so a
//!    score does not depend on which files are indexed.
//! 4. Scores: BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5))), summed over
//!    the query's distinct terms a document holds. `or` (default) takes documents holding any
//!    term, `and` all of them, a phrase the terms at their offsets (scored like `and`).
//!    Deleted rows and rows outside `where` never score; they count in the statistics, as a
//!    deleted document does in Lucene's until its segment is rewritten.
//! 5. Exact top-k by score, ties by row id (file order then position without one): files
//!    in order, each scored document-at-a-time with block-max MaxScore (terms whose bounds
//!    cannot lift a document past the k-th score are only probed for the documents the
//!    others find; blocks whose bounds cannot are skipped undecoded).
//! 6. The hits' files are confirmed against the manifest (a changed file answered from its
//!    blob is scanned and the search starts over) and their rows read by page.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::formats::lineage::{RejectReason, Rejection};
use crate::formats::manifest::{FileEntry, IndexState, TableManifest, TableRun};
use crate::index::analyzer::Analyzer;
use crate::index::fulltext::lengths::{LengthSource, LengthTable, RowTable, GROUP_ROWS};
use crate::index::fulltext::{
    block_positions, check_positions, parse_term_block, FulltextDirectory, FulltextSpec, Postings,
    TermEntry, BLOCK_DOCS,
};
use crate::io::Location;
use crate::read::files::{FileOptions, Files, Source};
use crate::read::lookup::{index_io, reads_at, run_rejected, BlobRef, Pinned, RowRef, FILE_WINDOW};
use crate::read::plan::{Query, QueryStats};
use crate::read::predicate::Condition;
use crate::read::ranked::{abs, assemble, reject_drifted};

pub use crate::index::fulltext::{B, K1};
/// Most results a search returns.
pub const MAX_SEARCH_K: usize = 10_000;
/// Most distinct terms a query may hold.
pub const MAX_QUERY_TERMS: usize = 64;

/// How a query's terms combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    #[default]
    Or,
    And,
}

/// A search of a table's full-text index.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    pub query: String,
    /// The query is a phrase: its terms, in order, at consecutive word positions (dropped
    /// stop words keep their place).
    pub phrase: bool,
    pub operator: Operator,
    /// Results wanted (1..=[`MAX_SEARCH_K`]).
    pub k: usize,
    /// The full-text index (`None`: the table's only one).
    pub index: Option<String>,
    /// A pre-filter: only rows matching every condition are scored.
    pub conditions: Vec<Condition>,
    /// Columns of the results (`None`: every column of a scalar type).
    pub columns: Option<Vec<String>>,
    pub verify_files: bool,
    pub pin_versions: bool,
    /// An Iceberg-backed table: search at this published upstream snapshot.
    pub snapshot: Option<i64>,
    /// A hybrid search: this vector's nearest rows are fused with the BM25 ranking
    /// ([`crate::read::hybrid`]).
    pub vector: Option<Vec<f32>>,
    /// The vector index of a hybrid search (`None`: the one on `vector_column`, or the
    /// table's only one).
    pub vector_index: Option<String>,
    pub vector_column: Option<String>,
    /// Its candidates per file (see [`crate::read::nearest::Nearest::ef`]).
    pub ef: Option<usize>,
}

impl Search {
    /// What [`Pinned::drift`] needs to know of the search: whether versions are pinned.
    fn drift_query(&self) -> Query {
        Query {
            pin_versions: self.pin_versions,
            ..Default::default()
        }
    }
}

impl Default for Search {
    fn default() -> Search {
        Search {
            query: String::new(),
            phrase: false,
            operator: Operator::Or,
            k: 10,
            index: None,
            conditions: vec![],
            columns: None,
            verify_files: false,
            pin_versions: false,
            snapshot: None,
            vector: None,
            vector_index: None,
            vector_column: None,
            ef: None,
        }
    }
}

/// The table-wide statistics a search scored with.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bm25Stats {
    /// Rows with a non-NULL value, deleted ones included.
    pub docs: u64,
    /// Terms over those documents.
    pub tokens: u64,
    pub avg_len: f64,
    /// The query's distinct terms (analyzed) and their document frequencies.
    pub terms: Vec<TermStat>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TermStat {
    pub term: String,
    pub df: u64,
}

/// The answer of [`Pinned::search`]: rows best first.
#[derive(Clone, Debug)]
pub struct SearchResult {
    pub rows: Vec<RowRef>,
    pub scores: Vec<f64>,
    pub batch: arrow_array::RecordBatch,
    pub bm25: Bm25Stats,
    /// `index`/`index_kind` the full-text index; `keys` the query's terms;
    /// `files_by_index` files answered from blobs, `files_scanned` the others; `rounds` in
    /// [`SearchResult::rounds`].
    pub stats: QueryStats,
    /// Sequential rounds of overlay reads (directory, term blocks, postings) the slowest
    /// file needed: what a search costs in round trips over HTTP, besides the rows' pages.
    pub rounds: u64,
    /// A hybrid search: each result's places in the two rankings fused (`scores` are then
    /// the fused scores).
    pub hybrid: Option<Hybrid>,
}

/// BM25 of one term in one document.
#[inline]
pub fn bm25(idf: f64, tf: u32, len: u32, avg_len: f64) -> f64 {
    bm25_norm(idf, tf, norm(len, avg_len))
}

/// BM25's length normalization of a document of `len` terms.
#[inline]
fn norm(len: u32, avg_len: f64) -> f64 {
    K1 * (1.0 - B + B * f64::from(len) / avg_len)
}

#[inline]
fn bm25_norm(idf: f64, tf: u32, norm: f64) -> f64 {
    let tf = f64::from(tf);
    idf * (tf * (K1 + 1.0)) / (tf + norm)
}

/// [`norm`] of the lengths below this, computed once per search.
const NORM_TABLE: usize = 1024;

/// A table run's term whose postings pass this many bytes is read by block: its skips first,
/// then only the blocks that can hold a top document ([`Pinned::run_blocks`]).
pub const BY_BLOCK_BYTES: u64 = 32 * 1024;

/// When every query term of a run passes [`BY_BLOCK_BYTES`], the smallest is still read
/// whole — to give the others a floor — if its postings are at most this.
pub const FLOOR_TERM_BYTES: u64 = 512 * 1024;

/// Merged reads of postings blocks of one search at most (shared among its terms read by
/// block, 8 each at least), after bridging every gap up to [`BLOCK_GAP`]: past that, the
/// smallest gaps are bridged.
const BLOCK_REQUESTS: usize = 32;

/// Gaps between blocks read that are always bridged (about what a request costs).
const BLOCK_GAP: u64 = 4096;

/// BM25's inverse document frequency (Lucene's, never negative). The logarithm is `libm`'s
/// on every target: the addon and the wasm reader score bit for bit alike.
pub fn idf(docs: u64, df: u64) -> f64 {
    let (n, df) = (docs as f64, df as f64);
    libm::log(1.0 + (n - df + 0.5) / (df + 0.5))
}

/// The analyzed query: distinct terms, and for a phrase each word's term and offset.
pub struct Analyzed {
    pub terms: Vec<String>,
    pub phrase: Vec<(usize, u32)>,
}

/// Analyzes `text` as a search of an index of `spec` does.
pub fn analyze_query(spec: &FulltextSpec, text: &str) -> Result<Analyzed> {
    let mut a = Analyzer::new(spec.tokenizer);
    let mut terms: Vec<String> = Vec::new();
    let mut phrase = Vec::new();
    let mut first: Option<u32> = None;
    a.analyze(text, |t, p| {
        let i = match terms.iter().position(|x| x == t) {
            Some(i) => i,
            None => {
                terms.push(t.to_string());
                terms.len() - 1
            }
        };
        let f = *first.get_or_insert(p);
        phrase.push((i, p - f));
    });
    if terms.len() > MAX_QUERY_TERMS {
        return Err(Error::Limit {
            what: "distinct terms in a search",
            count: terms.len() as u64,
            limit: MAX_QUERY_TERMS as u64,
            remedy: "search for fewer words",
        });
    }
    Ok(Analyzed { terms, phrase })
}

/// One file's contribution, loaded.
enum Loaded {
    /// From its blob: statistics and, per query term, its entry and postings.
    Indexed {
        docs: u64,
        tokens: u64,
        terms: Vec<Option<TermData>>,
    },
    /// Answered by the index's table run (its statistics are the run's).
    InRun,
    /// Scanned: statistics and the documents holding a query term.
    Scanned {
        docs: u64,
        tokens: u64,
        df: Vec<u64>,
        hits: Vec<ScanDoc>,
    },
}

/// What [`Pinned::load_all`] loaded: every file's contribution (by index in the table), the
/// run's (`Err`: it failed a check, its files unloaded) and the rounds it took.
struct Loads {
    files: Vec<Loaded>,
    /// Per run searched (as given), its load.
    runs: Vec<std::result::Result<Option<Loaded>, RejectReason>>,
    rounds: u64,
}

/// The index's table run as a search reads it: for each of its files (by ordinal) the file in
/// the table it answers for, where each one's rows start in the run, and what the files it no
/// longer answers for hold (subtracted from the run's statistics).
struct TextRun<'m> {
    run: &'m TableRun,
    /// Per ordinal: the file's index in the table, `None` when the run no longer answers it
    /// (rewritten, removed, or sent to a scan during the search).
    files: Vec<Option<usize>>,
    /// Per ordinal, its first run row; then the run's rows.
    bases: Vec<u64>,
    /// The documents and tokens of the ordinals it no longer answers.
    gone: (u64, u64),
}

impl<'m> TextRun<'m> {
    /// The index's run when a search can answer from it: its rows fit its u32 postings and it
    /// still covers a file. A file it covers that is no longer in the table as the run
    /// recorded it (path, SHA-256, record count) or was sent to a scan is left out: its rows
    /// never score and its share of the statistics is subtracted — its documents and tokens
    /// from the run's record of it, each term's documents counted in its rows of the run's
    /// postings ([`TextRun::subtract`]) — while the file, if still listed, answers by its own
    /// blob or a scan. `None` when no file is covered, or a left-out file's share is unknown.
    /// `coverage` is the run's [`TableManifest::tier_coverage`]: a file a newer run answers
    /// is left out of this one.
    fn usable(
        run: &'m TableRun,
        coverage: &[Option<usize>],
        files: &Files<'_>,
    ) -> Option<TextRun<'m>> {
        let cov: Vec<Option<usize>> = coverage
            .iter()
            .copied()
            .map(|i| i.filter(|i| !files.forced(*i)))
            .collect();
        if cov.iter().all(Option::is_none) {
            return None;
        }
        let mut bases = Vec::with_capacity(run.files.len() + 1);
        let mut at = 0u64;
        let mut gone = (0u64, 0u64);
        for (rf, c) in run.files.iter().zip(&cov) {
            bases.push(at);
            at = at.checked_add(rf.record_count)?;
            if c.is_none() {
                let s = rf.text?;
                gone = (gone.0.checked_add(s.docs)?, gone.1.checked_add(s.tokens)?);
            }
        }
        bases.push(at);
        (at <= crate::index::fulltext::run::MAX_RUN_ROWS).then_some(TextRun {
            run,
            files: cov,
            bases,
            gone,
        })
    }

    /// The files it answers for (indexes in the table).
    fn covered(&self) -> impl Iterator<Item = usize> + '_ {
        self.files.iter().flatten().copied()
    }

    /// Whether it answers for every file it covers (nothing is subtracted, so a search may
    /// read its frequent terms by block).
    fn answers_all(&self) -> bool {
        self.files.iter().all(Option::is_some)
    }

    fn blob(&self) -> BlobRef<'m> {
        BlobRef {
            bundle_path: &self.run.bundle_path,
            offset: self.run.blob_offset,
            length: self.run.blob_length,
            ordered: &self.run.ordered,
            rows: self.bases.last().copied(),
        }
    }

    /// The table file (`None`: one it no longer answers) and position of run row `row`.
    fn place(&self, row: u64) -> (Option<usize>, u64) {
        let o = self.bases[..self.files.len()]
            .partition_point(|b| *b <= row)
            .saturating_sub(1);
        (self.files[o], row - self.bases[o])
    }

    /// The run's statistics less the files it no longer answers: documents, tokens and each
    /// query term's documents (`terms` as loaded from the run).
    fn subtract(
        &self,
        docs: u64,
        tokens: u64,
        terms: &[Option<TermData>],
    ) -> std::result::Result<(u64, u64, Vec<u64>), crate::index::ordered::BlobError> {
        use crate::index::ordered::BlobError;
        let docs = docs.checked_sub(self.gone.0).ok_or(BlobError::Corrupt(
            "the run's documents disagree with its files",
        ))?;
        let tokens = tokens.checked_sub(self.gone.1).ok_or(BlobError::Corrupt(
            "the run's tokens disagree with its files",
        ))?;
        let mut df = Vec::with_capacity(terms.len());
        for td in terms {
            let Some(td) = td else {
                df.push(0);
                continue;
            };
            let mut n = td.entry.df;
            for (o, f) in self.files.iter().enumerate() {
                if f.is_none() {
                    n = n.saturating_sub(td.postings.count_in(self.bases[o]..self.bases[o + 1])?);
                }
            }
            df.push(n);
        }
        Ok((docs, tokens, df))
    }
}

struct TermData {
    entry: TermEntry,
    /// Whole, or (a table run's frequent term) its skips alone, with the blocks read so far
    /// in `blocks`.
    postings: Arc<Postings>,
    positions: Option<bytes::Bytes>,
    /// Postings read by block ([`Postings::whole`] false): the blocks read, checked, by
    /// index. A block not read holds no document that can reach the search's floor (or, for
    /// `and`, no candidate): [`Pinned::run_blocks`] read every other.
    blocks: HashMap<usize, bytes::Bytes>,
    /// Read by block, its skips found in the cache: an earlier search read the term by
    /// block, so this one reads it whole if it needs a block not cached.
    seen: bool,
    /// Read by block, the skip section's bytes as this search read them (checked): a term
    /// then read whole reads only what follows them ([`Pinned::run_blocks`]).
    skip_bytes: Option<bytes::Bytes>,
    /// A term whose blocks carry no lengths ([`TermEntry::shared_lengths`]): the run's length
    /// table — where it is, and what of it this search holds: the whole table for postings
    /// read whole, the groups of the blocks read for postings read by block.
    table: Option<Arc<LengthTable>>,
    lengths: LengthsView,
}

/// The lengths of a run's length table a search holds, decoded and checked.
#[derive(Default)]
struct LengthsView {
    whole: Option<Arc<RowTable>>,
    groups: HashMap<usize, Arc<[u32]>>,
}

impl LengthSource for LengthsView {
    fn lengths_of(&self, rows: &[u32], out: &mut [u32]) -> BlobResult<()> {
        use crate::index::ordered::BlobError;
        if let Some(w) = &self.whole {
            return w.lengths_of(rows, out);
        }
        let mut at: Option<(usize, &[u32])> = None;
        for (o, &r) in out.iter_mut().zip(rows) {
            let g = r as usize / GROUP_ROWS;
            let group = match at {
                Some((k, v)) if k == g => v,
                _ => {
                    let v = &self
                        .groups
                        .get(&g)
                        .ok_or(BlobError::Corrupt("a length group not read"))?[..];
                    at = Some((g, v));
                    v
                }
            };
            *o = *group
                .get(r as usize % GROUP_ROWS)
                .ok_or(BlobError::Corrupt("row past the run's length table"))?;
        }
        Ok(())
    }
}

struct ScanDoc {
    row: u64,
    len: u32,
    /// Per query term: term frequency (0: absent).
    tfs: Vec<u32>,
    /// Per query term: positions (phrases only).
    positions: Vec<Vec<u32>>,
}

/// A candidate result: ordered best first (higher score, then the smaller row id, then
/// earlier file and row for rows without one) — the heap keeps the worst on top.
#[derive(Clone, Copy, Debug)]
struct Hit {
    score: f64,
    /// The row's table-wide id (`u64::MAX`: none).
    row_id: u64,
    file: usize,
    row: u64,
}

impl PartialEq for Hit {
    fn eq(&self, o: &Hit) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Hit {}
impl PartialOrd for Hit {
    fn partial_cmp(&self, o: &Hit) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Hit {
    /// "Better" is smaller: a max-heap of hits has the worst kept hit on top.
    fn cmp(&self, o: &Hit) -> Ordering {
        o.score
            .total_cmp(&self.score)
            .then(self.row_id.cmp(&o.row_id))
            .then(self.file.cmp(&o.file))
            .then(self.row.cmp(&o.row))
    }
}

/// The k best hits so far.
struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
}

impl TopK {
    /// Scores below this cannot enter (a score equal to it enters if its row id is smaller).
    fn threshold(&self) -> f64 {
        if self.heap.len() < self.k {
            f64::NEG_INFINITY
        } else {
            self.heap.peek().map_or(f64::NEG_INFINITY, |h| h.score)
        }
    }

    fn offer(&mut self, h: Hit) {
        if self.heap.len() < self.k {
            self.heap.push(h);
        } else if h < *self.heap.peek().expect("full") {
            self.heap.pop();
            self.heap.push(h);
        }
    }
}

/// Slack on score bounds: a bound computed term by term may round below the sum it bounds.
const SLACK: f64 = 1.0 + 1e-9;

/// The bar a partial sum is held to while pruning: a little below the heap's threshold, so a
/// document whose score (summed in the canonical order, [`canonical_score`]) ties it is never
/// dropped because another order of summation rounded one ulp lower. The heap decides.
#[inline]
fn loose(theta: f64) -> f64 {
    theta - theta.abs() * 1e-9
}

/// A document's score: its terms' contributions summed in query-term order, on every path
/// (index, scan, any order the cursors were visited in), so equal scores are equal to the
/// bit and ties break by row id whatever files are indexed (attack round 3, item 9).
fn canonical_score(parts: &mut [(usize, f64)]) -> f64 {
    parts.sort_unstable_by_key(|p| p.0);
    parts.iter().map(|p| p.1).sum()
}

impl Pinned<'_> {
    /// The BM25 ranking of [`Pinned::search`].
    pub(crate) async fn search_text(&self, table: &str, s: &Search) -> Result<SearchResult> {
        let (o0, d0, h0) = (self.overlay.stats(), self.data.stats(), self.cache.hits());
        let t = self.manifest.table(table)?;
        if s.k == 0 || s.k > MAX_SEARCH_K {
            return Err(Error::Limit {
                what: "search k",
                count: s.k as u64,
                limit: MAX_SEARCH_K as u64,
                remedy: "ask for between 1 and 10000 results",
            });
        }
        let ix = match &s.index {
            Some(name) => {
                let ix = t.index(name)?;
                if !ix.kind().answers().search {
                    return Err(Error::Invalid(format!(
                        "index {}.{name} is a {} index, not fulltext",
                        t.name,
                        ix.kind()
                    )));
                }
                ix
            }
            None => {
                let all: Vec<_> = t
                    .indexes
                    .iter()
                    .filter(|i| i.kind().answers().search)
                    .collect();
                crate::read::ranked::the_one(&t.name, &all, "fulltext", "name one in `index`")?
            }
        };
        let spec = ix.spec.fulltext().ok_or_else(|| {
            Error::Manifest(format!("fulltext index {} has no analyzer", ix.name))
        })?;
        let field = *ix
            .fields
            .first()
            .ok_or_else(|| Error::Manifest(format!("fulltext index {} has no column", ix.name)))?;
        let out_columns: Vec<String> = match &s.columns {
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
        let q = analyze_query(&spec, &s.query)?;
        let mut stats = QueryStats {
            index: Some(ix.name.clone()),
            index_kind: Some(ix.kind().to_string()),
            index_columns: t
                .fields
                .iter()
                .filter(|f| f.field_id == field)
                .map(|f| f.name.clone())
                .collect(),
            keys: q.terms.len() as u64,
            ..Default::default()
        };
        let use_blobs = !self.scan_only
            && ix.state != IndexState::Poisoned
            && (!s.phrase || spec.positions || q.phrase.len() < 2);
        if !use_blobs && !self.scan_only && ix.state != IndexState::Poisoned {
            stats.index_declined = Some("the index keeps no positions: phrases are scanned".into());
        }
        // The index's table runs (RFC 0004 tiers, oldest and largest first), each while it
        // holds (a failed check turns it off for this search); a file is answered by the
        // newest run covering it.
        let table_runs: Vec<&TableRun> = match use_blobs
            && crate::index::kind::of(ix.kind()).and_then(|k| k.run())
                == Some(crate::index::kind::RunLayout::Concatenated)
        {
            true => ix.table_runs(),
            false => vec![],
        };
        let mut coverages = t.tier_coverage(&table_runs);
        // Under `verify`, a run answers the files a HEAD confirms; a drifted one is left out
        // (its share subtracted, as for any file a run no longer answers) and scanned.
        if s.verify_files {
            let q = (ix.index_id, s.pin_versions);
            self.confirm_covered(t, &table_runs, &mut coverages, q, &mut stats)
                .await?;
        }
        let mut files = Files::open(
            self,
            table,
            t,
            ix,
            FileOptions {
                conditions: &s.conditions,
                verify_files: s.verify_files,
                pin_versions: s.pin_versions,
                use_blobs,
                // The runs answer their files: their own entries are read only if the first
                // (whose files' entries a covered part holds) stops.
                by_run: !table_runs.is_empty(),
            },
        )
        .await?;
        let mut run_off = vec![false; table_runs.len()];
        // A run failing a check is reported against every file (`*`), then left for the search.
        let run_rejected =
            |r: usize, reason| run_rejected(Some(table_runs[r]), ix.index_id, reason);
        loop {
            // The runs searched (by index in `table_runs`).
            let runs: Vec<(usize, TextRun<'_>)> = table_runs
                .iter()
                .enumerate()
                .filter(|(r, _)| !run_off[*r])
                .filter_map(|(r, run)| Some((r, TextRun::usable(run, &coverages[r], &files)?)))
                .collect();
            if runs.first().is_none_or(|(r, _)| *r != 0) {
                // The files the first run covered answer by their own entries.
                files.load_covered(self).await?;
            }
            // Load every file's statistics and postings.
            let mut fstats = QueryStats::default();
            let text_runs: Vec<&TextRun<'_>> = runs.iter().map(|(_, r)| r).collect();
            let loads = self
                .load_all(t, &files, &spec, field, &q, s, &text_runs, &mut fstats)
                .await?;
            let mut from_runs: Vec<Option<Loaded>> = Vec::with_capacity(runs.len());
            let mut failed = false;
            for ((r, _), l) in runs.iter().zip(loads.runs) {
                match l {
                    Ok(l) => from_runs.push(l),
                    Err(reason) => {
                        stats.rejections.push(run_rejected(*r, reason));
                        run_off[*r] = true;
                        failed = true;
                    }
                }
            }
            if failed {
                continue;
            }
            let (loaded, mut rounds) = (loads.files, loads.rounds);
            // Table statistics.
            let mut docs = 0u64;
            let mut tokens = 0u64;
            let mut df = vec![0u64; q.terms.len()];
            // Each run's share: its statistics less the files it no longer answers.
            let mut failed = false;
            for ((ri, r), l) in runs.iter().zip(&from_runs) {
                let Some(Loaded::Indexed {
                    docs: d,
                    tokens: n,
                    terms,
                }) = l
                else {
                    continue;
                };
                match r.subtract(*d, *n, terms) {
                    Ok((d, n, f)) => {
                        docs += d;
                        tokens += n;
                        for (x, y) in df.iter_mut().zip(f) {
                            *x += y;
                        }
                    }
                    Err(e) => {
                        stats
                            .rejections
                            .push(run_rejected(*ri, r.blob().corrupt(e)));
                        run_off[*ri] = true;
                        failed = true;
                    }
                }
            }
            if failed {
                continue;
            }
            for l in &loaded {
                match l {
                    Loaded::Indexed {
                        docs: d,
                        tokens: n,
                        terms,
                    } => {
                        docs += d;
                        tokens += n;
                        for (i, td) in terms.iter().enumerate() {
                            if let Some(td) = td {
                                df[i] += td.entry.df;
                            }
                        }
                    }
                    Loaded::Scanned {
                        docs: d,
                        tokens: n,
                        df: f,
                        ..
                    } => {
                        docs += d;
                        tokens += n;
                        for (i, x) in f.iter().enumerate() {
                            df[i] += x;
                        }
                    }
                    Loaded::InRun => {}
                }
            }
            let avg_len = if docs == 0 {
                1.0
            } else {
                tokens as f64 / docs as f64
            };
            let idfs: Vec<f64> = df.iter().map(|d| idf(docs, *d)).collect();
            let norms = self.cache.norms(avg_len, || {
                (0..NORM_TABLE as u32).map(|l| norm(l, avg_len)).collect()
            });
            let mut top = TopK {
                k: s.k,
                heap: BinaryHeap::new(),
            };
            // Each source sets how its documents become hits.
            let unplaced = |score: f64, row: u64| Hit {
                score,
                row_id: u64::MAX,
                file: usize::MAX,
                row,
            };
            let base = Scorer {
                q: &q,
                idfs: &idfs,
                avg_len,
                // A one-word phrase is its term.
                phrase: s.phrase && q.phrase.len() > 1,
                and: s.operator == Operator::And || s.phrase,
                norms: &norms,
                hit: &unplaced,
                floor: f64::NEG_INFINITY,
            };
            let mut retry = None;
            // A score the k-th result reaches, once the run's plan knows one.
            let mut floor = f64::NEG_INFINITY;
            if !q.terms.is_empty() && docs > 0 {
                // The runs first, the oldest (largest) first: it holds most documents, so its
                // k-th score bars the other runs' and the files'.
                let mut failed = false;
                for ((ri, r), l) in runs.iter().zip(from_runs.iter_mut()) {
                    let Some(Loaded::Indexed { terms, .. }) = l else {
                        continue;
                    };
                    let ri = *ri;
                    let deleted: HashMap<usize, roaring::RoaringTreemap> = r
                        .covered()
                        .map(|i| Ok(t.files[i].deleted()?.map(|d| (i, d))))
                        .collect::<Result<Vec<_>>>()?
                        .into_iter()
                        .flatten()
                        .collect();
                    // Rows of a file the run no longer answers never score (`hit` is asked
                    // only for rows `keep` keeps). When the run answers every file it covers,
                    // none has deletes and no `where` filters, every row it holds is kept
                    // (the postings' rows are below its rows, checked as they are parsed).
                    let all = r.answers_all() && deleted.is_empty() && !files.filtered();
                    let keep = |d: u64| {
                        all || match r.place(d) {
                            (Some(i), row) => files.keeps(i, deleted.get(&i), row),
                            (None, _) => false,
                        }
                    };
                    let hit = |score: f64, d: u64| {
                        let (i, row) = r.place(d);
                        Hit {
                            score,
                            row_id: i
                                .and_then(|i| t.files[i].row_id_at(row))
                                .unwrap_or(u64::MAX),
                            file: i.unwrap_or(usize::MAX),
                            row,
                        }
                    };
                    let mut sc = Scorer {
                        hit: &hit,
                        floor,
                        ..base
                    };
                    // Its frequent terms read by block (the first run's only): the blocks that
                    // may hold a result.
                    let plan = match sc.plan_blocks(terms, s.k, &Keep { row: &keep, all }) {
                        Ok(p) => p,
                        Err(e) => {
                            stats.rejections.push(run_rejected(ri, r.blob().corrupt(e)));
                            run_off[ri] = true;
                            failed = true;
                            break;
                        }
                    };
                    if let Some(plan) = plan {
                        let rows = r.bases.last().copied().unwrap_or(0);
                        match self.run_blocks(r.blob(), rows, terms, &plan).await {
                            Ok(read) => rounds += u64::from(read),
                            Err(reason) => {
                                stats.rejections.push(run_rejected(ri, reason));
                                run_off[ri] = true;
                                failed = true;
                                break;
                            }
                        }
                        floor = floor.max(plan.floor);
                        sc.floor = floor;
                    }
                    if let Err(e) = sc.score_indexed(terms, &keep, &mut top) {
                        stats.rejections.push(run_rejected(ri, r.blob().corrupt(e)));
                        run_off[ri] = true;
                        failed = true;
                        break;
                    }
                }
                if failed {
                    continue;
                }
                for (i, (f, l)) in t.files.iter().zip(&loaded).enumerate() {
                    if matches!(l, Loaded::InRun) {
                        continue;
                    }
                    let deleted = f.deleted()?;
                    if let Some(None) = files.allow(i) {
                        continue; // `where` keeps no row of the file
                    }
                    let keep = |row: u64| files.keeps(i, deleted.as_ref(), row);
                    let hit = |score: f64, row: u64| Hit {
                        score,
                        row_id: f.row_id_at(row).unwrap_or(u64::MAX),
                        file: i,
                        row,
                    };
                    let sc = Scorer {
                        hit: &hit,
                        floor,
                        ..base
                    };
                    match l {
                        Loaded::Scanned { hits, .. } => sc.score_scanned(hits, &keep, &mut top),
                        Loaded::Indexed { terms, .. } => {
                            if let Err(e) = sc.score_indexed(terms, &keep, &mut top) {
                                retry = Some((i, e));
                                break;
                            }
                        }
                        Loaded::InRun => {}
                    }
                }
            }
            if let Some((i, e)) = retry {
                // A blob whose checked bytes still do not decode: its file is scanned and
                // the search starts over, so the statistics stay the scan's.
                let f = &t.files[i];
                stats.rejections.push(Rejection {
                    data_file: f.path.clone(),
                    index_id: Some(ix.index_id),
                    bundle_path: files.bundle_path(i),
                    reason: RejectReason::Corrupt {
                        message: e.to_string(),
                    },
                });
                files.force_scan(i);
                continue;
            }
            let mut hits = top.heap.into_vec();
            hits.sort();
            // The files of the hits: confirmed against the manifest (a file answered from
            // its blob that changed is scanned and the search starts over), then their rows
            // read by page.
            let fields: Vec<&crate::values::FieldInfo> = out_columns
                .iter()
                .filter_map(|c| t.fields.iter().find(|f| f.name == *c))
                .collect();
            // No columns asked for: the answer is the hits' places, and the published manifest
            // is trusted for their files as `lookup` and `count` trust it (`verify` confirms
            // every file with a HEAD first) — no request to a data file.
            let confirm = !fields.is_empty() || s.verify_files;
            let mut order: Vec<usize> = Vec::new();
            for h in hits.iter().filter(|_| confirm) {
                if !order.contains(&h.file) {
                    order.push(h.file);
                }
            }
            let mut parts = Vec::new();
            let mut place: Vec<usize> = if confirm {
                Vec::new()
            } else {
                (0..hits.len()).collect()
            };
            let mut changed = None;
            // Metadata of every hit file at once, then their rows at once.
            let metas = futures::future::join_all(order.iter().map(|&fi| async move {
                let f = &t.files[fi];
                let loc = Location::new(t.data_location(f));
                let m = self.file_metadata(f, &loc).await;
                (fi, loc, m)
            }))
            .await;
            let mut reads = Vec::new();
            for (fi, loc, m) in metas {
                let f = &t.files[fi];
                let (md, meta, cached) = m?;
                let nrows = md.file_metadata().num_rows().max(0) as u64;
                let qq = s.drift_query();
                if Self::drift(f, &meta, Some(nrows), &qq).is_some() {
                    if matches!(loaded[fi], Loaded::Indexed { .. } | Loaded::InRun) {
                        changed = Some(fi);
                        break;
                    }
                    if !fstats.drifted.contains(&f.path) {
                        fstats.drifted.push(f.path.clone());
                    }
                }
                let loc = reads_at(loc, &meta, s.pin_versions || cached);
                let wanted: Vec<(usize, u64)> = hits
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.file == fi)
                    .map(|(i, h)| (i, h.row))
                    .collect();
                if wanted.iter().any(|w| w.1 >= nrows) {
                    changed = Some(fi);
                    break;
                }
                place.extend(wanted.iter().map(|w| w.0));
                reads.push((loc, md, wanted));
            }
            if changed.is_none() && !fields.is_empty() {
                let fields = &fields;
                let got =
                    futures::future::join_all(reads.iter().map(|(loc, md, wanted)| async move {
                        let positions: Vec<u64> = wanted.iter().map(|w| w.1).collect();
                        crate::datafile::read_rows_as(
                            self.data,
                            loc,
                            md,
                            &positions,
                            fields,
                            Some(self.cache),
                        )
                        .await
                    }))
                    .await;
                for g in got {
                    parts.push(g?);
                }
            }
            if let Some(fi) = changed {
                let f = &t.files[fi];
                reject_drifted(
                    &mut stats,
                    f,
                    files.forced(fi),
                    ix.index_id,
                    files.bundle_path(fi),
                    "size or record count differs from the manifest",
                )?;
                files.force_scan(fi);
                continue;
            }
            let batch = assemble(parts, &place, &fields)?;
            stats.add(fstats);
            stats.files_rejected = stats.rejections.len() as u64;
            let rows: Vec<RowRef> = hits
                .iter()
                .map(|h| {
                    let f = &t.files[h.file];
                    RowRef {
                        file: f.path.clone(),
                        position: h.row,
                        row_id: f.row_id_at(h.row),
                    }
                })
                .collect();
            self.io_since(&mut stats, (o0, d0, h0));
            return Ok(SearchResult {
                scores: hits.iter().map(|h| h.score).collect(),
                rows,
                batch,
                bm25: Bm25Stats {
                    docs,
                    tokens,
                    avg_len: if docs == 0 { 0.0 } else { avg_len },
                    terms: q
                        .terms
                        .iter()
                        .zip(&df)
                        .map(|(t, d)| TermStat {
                            term: t.clone(),
                            df: *d,
                        })
                        .collect(),
                },
                stats,
                rounds,
                hybrid: None,
            });
        }
    }

    /// Every file's statistics and postings, and the table run's when `run` is given (the
    /// files it covers are then [`Loaded::InRun`]). Blobs the read gate accepts and the run
    /// are read in rounds shared by all — directories (with a HEAD of the data file under
    /// `verify`), the query terms' blocks, their postings and positions — so a search costs
    /// three sequential reads however many files it spans; files without an accepted blob
    /// are scanned meanwhile, and a blob whose bytes fail a check is rejected and its file
    /// scanned. A run that fails a check is reported in [`Loads::run`], its files not loaded.
    #[allow(clippy::too_many_arguments)]
    async fn load_all(
        &self,
        t: &TableManifest,
        files: &Files<'_>,
        spec: &FulltextSpec,
        field: i32,
        q: &Analyzed,
        s: &Search,
        runs: &[&TextRun<'_>],
        st: &mut QueryStats,
    ) -> Result<Loads> {
        use futures::StreamExt;
        const WIDTH: usize = 4 * FILE_WINDOW;
        let n = t.files.len();
        st.files = n as u64;
        let reject = |i: usize, reason| Rejection {
            data_file: t.files[i].path.clone(),
            index_id: files.entry(i).map(|e| e.lineage.index_id),
            bundle_path: files.entry(i).map(|e| e.lineage.bundle_path.clone()),
            reason,
        };
        let mut in_run = vec![false; n];
        for r in runs {
            for i in r.covered() {
                in_run[i] = true;
            }
        }
        let mut to_scan: Vec<usize> = Vec::new();
        // Slots: file `i` at `i`, run `j` at `n + j`.
        let mut blobs: Vec<(usize, BlobRef<'_>)> = Vec::new();
        for i in 0..n {
            if in_run[i] {
                continue;
            }
            match files.source(i) {
                Source::Scan(rejection) => {
                    st.rejections.extend(rejection);
                    to_scan.push(i);
                }
                Source::Index(e) => blobs.push((i, BlobRef::of(e))),
            }
        }
        for (j, r) in runs.iter().enumerate() {
            self.run_text_directory(r.run);
            blobs.push((n + j, r.blob()));
        }
        let scan = |i: usize| self.scan_text(t, &t.files[i], spec, field, q, s);
        let pipeline = async {
            let mut rounds = 0u64;
            let mut rejected: Vec<(usize, RejectReason)> = Vec::new();
            // Round 1: directories (and HEADs under `verify`).
            let futs: Vec<_> = blobs
                .iter()
                .map(|&(i, b)| async move {
                    let head = async {
                        if !s.verify_files || i >= n {
                            return Ok(None);
                        }
                        let f = &t.files[i];
                        let meta = self.data.head(&Location::new(t.data_location(f))).await?;
                        let qq = s.drift_query();
                        Ok::<_, Error>(Self::drift(f, &meta, None, &qq))
                    };
                    let (dir, drift) =
                        futures::future::join(self.text_directory(b, spec), head).await;
                    (i, b, dir, drift)
                })
                .collect();
            let got: Vec<_> = futures::stream::iter(futs).buffered(WIDTH).collect().await;
            let mut stage: Vec<(usize, BlobRef<'_>, Arc<FulltextDirectory>)> = Vec::new();
            for (i, b, dir, drift) in got {
                match (dir, drift?) {
                    (_, Some(detail)) => {
                        rejected.push((i, RejectReason::Drifted { detail }));
                    }
                    (Ok((d, read)), None) => {
                        rounds = rounds.max(u64::from(read));
                        stage.push((i, b, d));
                    }
                    (Err(r), None) => rejected.push((i, r)),
                }
            }
            // Round 2: the terms' blocks.
            let futs: Vec<_> = stage
                .into_iter()
                .map(|(i, b, d)| async move {
                    let r = self.text_terms(b, &d, q).await;
                    (i, b, d, r)
                })
                .collect();
            let got: Vec<_> = futures::stream::iter(futs).buffered(WIDTH).collect().await;
            let mut stage2 = Vec::new();
            let mut read2 = false;
            for (i, b, d, r) in got {
                match r {
                    Ok((found, read)) => {
                        read2 |= read;
                        stage2.push((i, b, d, found));
                    }
                    Err(r) => rejected.push((i, r)),
                }
            }
            // Round 3: postings and positions.
            let futs: Vec<_> = stage2
                .into_iter()
                .map(|(i, b, d, found)| async move {
                    let phrase = s.phrase && q.phrase.len() > 1;
                    // The first run's frequent terms by block, when nothing is subtracted from
                    // it.
                    let by_block =
                        (i == n && !phrase && runs.first().is_some_and(|r| r.answers_all()))
                            .then_some(if s.operator == Operator::And {
                                Combine::And
                            } else {
                                Combine::Or
                            });
                    let r = self.text_postings(b, &d, found, phrase, by_block).await;
                    (i, d, r)
                })
                .collect();
            let got: Vec<_> = futures::stream::iter(futs).buffered(WIDTH).collect().await;
            let mut done: Vec<(usize, Loaded)> = Vec::new();
            let mut read3 = false;
            for (i, d, r) in got {
                match r {
                    Ok((terms, read)) => {
                        read3 |= read;
                        done.push((
                            i,
                            Loaded::Indexed {
                                docs: d.docs,
                                tokens: d.tokens,
                                terms,
                            },
                        ));
                    }
                    Err(r) => rejected.push((i, r)),
                }
            }
            rounds += u64::from(read2) + u64::from(read3);
            Ok::<_, Error>((done, rejected, rounds))
        };
        let scan_futs: Vec<_> = to_scan
            .iter()
            .map(|&i| async move { (i, scan(i).await) })
            .collect();
        let scans = futures::stream::iter(scan_futs)
            .buffered(FILE_WINDOW)
            .collect::<Vec<_>>();
        let (indexed, scanned) = futures::future::join(pipeline, scans).await;
        let (done, rejected, rounds) = indexed?;
        let mut out: Vec<Option<Loaded>> =
            (0..n).map(|i| in_run[i].then_some(Loaded::InRun)).collect();
        let mut from_runs: Vec<std::result::Result<Option<Loaded>, RejectReason>> =
            (0..runs.len()).map(|_| Ok(None)).collect();
        for (i, l) in done {
            if i >= n {
                let covered = runs[i - n].covered().count() as u64;
                st.files_by_index += covered;
                st.files_by_run += covered;
                from_runs[i - n] = Ok(Some(l));
                continue;
            }
            st.files_by_index += 1;
            out[i] = Some(l);
        }
        for (i, r) in scanned {
            let (l, fs) = r?;
            st.add(QueryStats { files: 0, ..fs });
            out[i] = Some(l);
        }
        for (i, reason) in rejected {
            if i >= n {
                from_runs[i - n] = Err(reason);
                continue;
            }
            if let RejectReason::Drifted { .. } = &reason {
                if !st.drifted.contains(&t.files[i].path) {
                    st.drifted.push(t.files[i].path.clone());
                }
            }
            st.rejections.push(reject(i, reason));
            let (l, fs) = scan(i).await?;
            st.add(QueryStats { files: 0, ..fs });
            out[i] = Some(l);
        }
        Ok(Loads {
            files: out
                .into_iter()
                .map(|l| l.expect("every file loaded"))
                .collect(),
            runs: from_runs,
            rounds,
        })
    }

    /// A file scanned with the index's analyzer: its statistics and the documents holding a
    /// query term.
    async fn scan_text(
        &self,
        t: &TableManifest,
        f: &FileEntry,
        spec: &FulltextSpec,
        field: i32,
        q: &Analyzed,
        s: &Search,
    ) -> Result<(Loaded, QueryStats)> {
        let mut st = QueryStats::default();
        let loc = Location::new(t.data_location(f));
        let (md, meta, cached) = self.file_metadata(f, &loc).await?;
        let nrows = md.file_metadata().num_rows().max(0) as u64;
        let qq = s.drift_query();
        if Self::drift(f, &meta, Some(nrows), &qq).is_some() {
            st.drifted.push(f.path.clone());
        }
        let loc = reads_at(loc, &meta, s.pin_versions || cached);
        let mut a = Analyzer::new(spec.tokenizer);
        let (mut docs, mut tokens) = (0u64, 0u64);
        let mut df = vec![0u64; q.terms.len()];
        let mut hits = Vec::new();
        let mut tfs = vec![0u32; q.terms.len()];
        let mut positions: Vec<Vec<u32>> = vec![Vec::new(); q.terms.len()];
        let mut scanned = 0u64;
        crate::datafile::scan_values_range(self.data, &loc, &md, &[field], None, |vals, row| {
            scanned += 1;
            let text = match vals.first() {
                Some(crate::values::Value::String(s)) => s.as_str(),
                _ => return Ok(()),
            };
            docs += 1;
            tfs.iter_mut().for_each(|x| *x = 0);
            positions.iter_mut().for_each(Vec::clear);
            let mut len = 0u32;
            a.analyze(text, |term, p| {
                len += 1;
                if let Some(i) = q.terms.iter().position(|x| x == term) {
                    tfs[i] += 1;
                    if s.phrase {
                        positions[i].push(p);
                    }
                }
            });
            tokens += u64::from(len);
            if tfs.iter().any(|x| *x > 0) {
                for (d, x) in df.iter_mut().zip(&tfs) {
                    *d += u64::from(*x > 0);
                }
                hits.push(ScanDoc {
                    row,
                    len,
                    tfs: tfs.clone(),
                    positions: if s.phrase { positions.clone() } else { vec![] },
                });
            }
            Ok(())
        })
        .await?;
        st.files_scanned = 1;
        st.rows_scanned = scanned;
        Ok((
            Loaded::Scanned {
                docs,
                tokens,
                df,
                hits,
            },
            st,
        ))
    }

    /// Caches the run's inline directory (when the manifest carries one and it verifies
    /// against the manifest's SHA-256), so [`Pinned::text_directory`] reads none; one that does
    /// not verify is ignored and the bundle's is read.
    fn run_text_directory(&self, run: &TableRun) {
        let Some(h) = &run.directory else {
            return;
        };
        let sha = &run.ordered.directory_sha256;
        if self
            .cache
            .text_directory(&run.bundle_path, run.blob_offset, sha)
            .is_some()
        {
            return;
        }
        let parsed = hex::decode(h)
            .ok()
            .and_then(|bytes| FulltextDirectory::parse(&bytes, Some(sha), run.blob_length).ok());
        if let Some(d) = parsed {
            self.cache
                .put_text_directory(&run.bundle_path, run.blob_offset, sha, Arc::new(d));
        }
    }

    /// The blob's directory, checked against the manifest and the index definition; whether
    /// it was read (not cached).
    async fn text_directory(
        &self,
        b: BlobRef<'_>,
        spec: &FulltextSpec,
    ) -> std::result::Result<(Arc<FulltextDirectory>, bool), RejectReason> {
        let m = b.ordered;
        let bundle = b.bundle_path;
        let text = m.text.ok_or_else(|| RejectReason::Corrupt {
            message: "a fulltext entry without statistics".into(),
        })?;
        let mut read = false;
        let dir = match self
            .cache
            .text_directory(bundle, b.offset, &m.directory_sha256)
        {
            Some(d) => d,
            None => {
                if m.directory_offset
                    .checked_add(m.directory_length)
                    .is_none_or(|x| x > b.length)
                {
                    return Err(RejectReason::Corrupt {
                        message: "directory outside the blob".into(),
                    });
                }
                let (start, end) = abs(b.offset, m.directory_offset, m.directory_length)?;
                read = true;
                let bytes = self
                    .overlay
                    .read_range(&Location::new(bundle), start..end)
                    .await
                    .map_err(index_io)?;
                let d = FulltextDirectory::parse(&bytes, Some(&m.directory_sha256), b.length)
                    .map_err(|err| b.corrupt(err))?;
                let d = Arc::new(d);
                self.cache
                    .put_text_directory(bundle, b.offset, &m.directory_sha256, d.clone());
                d
            }
        };
        if dir.tokenizer != spec.tokenizer
            || dir.positions != spec.positions
            || dir.docs != text.docs
            || dir.tokens != text.tokens
            || b.rows.is_some_and(|r| r != dir.rows)
        {
            return Err(RejectReason::Corrupt {
                message: "the blob's directory disagrees with the index definition".into(),
            });
        }
        Ok((dir, read))
    }

    /// The query terms' entries (`None`: the file lacks the term), from the blocks the
    /// blob's term bounds admit (cached parsed, else read in one coalesced request); whether
    /// anything was read.
    async fn text_terms(
        &self,
        b: BlobRef<'_>,
        dir: &FulltextDirectory,
        q: &Analyzed,
    ) -> std::result::Result<(Vec<Option<TermEntry>>, bool), RejectReason> {
        let m = b.ordered;
        let bundle = b.bundle_path;
        let min = m.min_key.as_deref().and_then(|h| hex::decode(h).ok());
        let max = m.max_key.as_deref().and_then(|h| hex::decode(h).ok());
        let mut want: Vec<Option<usize>> = Vec::with_capacity(q.terms.len());
        for term in &q.terms {
            let tb = term.as_bytes();
            let inside = min.as_deref().is_some_and(|lo| tb >= lo)
                && max.as_deref().is_some_and(|hi| tb <= hi);
            want.push(if inside { dir.block_of(tb) } else { None });
        }
        let mut blocks: HashMap<usize, Arc<Vec<TermEntry>>> = HashMap::new();
        let mut missing: Vec<usize> = Vec::new();
        for i in want.iter().flatten() {
            if blocks.contains_key(i) || missing.contains(i) {
                continue;
            }
            let r = &dir.blocks[*i];
            let (s0, s1) = abs(b.offset, r.offset, r.length)?;
            match self.cache.term_block(bundle, s0, s1) {
                Some(tb) => {
                    blocks.insert(*i, tb);
                }
                None => missing.push(*i),
            }
        }
        let read = !missing.is_empty();
        if read {
            let ranges: Vec<std::ops::Range<u64>> = missing
                .iter()
                .map(|i| {
                    let r = &dir.blocks[*i];
                    abs(b.offset, r.offset, r.length).map(|(a, z)| a..z)
                })
                .collect::<std::result::Result<_, _>>()?;
            let got = self
                .overlay
                .read_ranges(&Location::new(bundle), &ranges)
                .await
                .map_err(index_io)?;
            for ((i, bytes), rg) in missing.iter().zip(got).zip(&ranges) {
                let tb = parse_term_block(&bytes, &dir.blocks[*i], dir, b.length)
                    .map_err(|err| b.corrupt(err))?;
                let tb = Arc::new(tb);
                self.cache
                    .put_term_block(bundle, rg.start, rg.end, tb.clone());
                blocks.insert(*i, tb);
            }
        }
        let found = q
            .terms
            .iter()
            .zip(&want)
            .map(|(term, w)| {
                w.and_then(|i| {
                    let tb = &blocks[&i];
                    tb.binary_search_by(|e| e.term.as_slice().cmp(term.as_bytes()))
                        .ok()
                        .map(|j| tb[j].clone())
                })
            })
            .collect();
        Ok((found, read))
    }

    /// Reads the blocks `plan` names of the run's terms read by block, in one round: each
    /// term's blocks (those not cached) in at most [`BLOCK_REQUESTS`] merged requests shared
    /// among the terms ([`merge_reads`]) — or its postings whole when the merged reads would
    /// take more than half their bytes. Each block is checked
    /// against its skip's CRC-32 before it is kept, and cached. Whether anything was read.
    async fn run_blocks(
        &self,
        b: BlobRef<'_>,
        rows: u64,
        terms: &mut [Option<TermData>],
        plan: &RunPlan,
    ) -> std::result::Result<bool, RejectReason> {
        use crate::index::ordered::BlobError;
        let bundle = b.bundle_path;
        let cap = (BLOCK_REQUESTS / plan.need.len().max(1)).max(8);
        // Merged reads, each with the term it serves and its blocks (`None`: the whole
        // postings — read from the end of its skip section when this search holds the
        // section's bytes, which then lead the postings parsed and checked whole).
        let mut reads: Vec<(std::ops::Range<u64>, usize, Option<Vec<usize>>)> = Vec::new();
        // Terms whose lengths are the run's length table's: the groups their blocks' rows
        // fall in, or the whole table for a term read whole — read in the same round.
        let mut table: Option<Arc<LengthTable>> = None;
        let mut groups: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
        let mut table_whole = false;
        for (t, blocks) in &plan.need {
            let Some(td) = terms[*t].as_mut() else {
                continue;
            };
            if let Some(lt) = &td.table {
                table = Some(lt.clone());
                for &i in blocks {
                    if i < td.postings.skips.len() {
                        let r = td.postings.block_rows(i);
                        let (g0, g1) = (
                            *r.start() as usize / GROUP_ROWS,
                            *r.end() as usize / GROUP_ROWS,
                        );
                        groups.extend(g0..=g1);
                    }
                }
            }
            let e = &td.entry;
            let (p0, p1) = abs(
                b.offset,
                e.postings.start,
                e.postings.end - e.postings.start,
            )?;
            let skips = &td.postings.skips;
            let mut wanted: Vec<(usize, std::ops::Range<u64>)> = Vec::new();
            for &i in blocks {
                let s = skips
                    .get(i)
                    .ok_or_else(|| b.corrupt(BlobError::Corrupt("no such block")))?;
                let (a, z) = (p0 + s.start as u64, p0 + s.end as u64);
                match self.cache.block(bundle, a, z) {
                    Some(by) => {
                        td.blocks.insert(i, by);
                    }
                    None => wanted.push((i, a..z)),
                }
            }
            if wanted.is_empty() {
                continue;
            }
            let merged = merge_reads(wanted.iter().map(|w| w.1.clone()).collect(), cap);
            let bytes: u64 = merged.iter().map(|m| m.end - m.start).sum();
            // Whole when most of it is wanted — or when an earlier search read it by block
            // too and the cache can hold it whole among others (at most 1/WHOLE_SHARE of
            // it): a reader that keeps asking for the term then holds it whole, and its later
            // searches read nothing, as without blocks. A term too large for that stays read
            // by block, its blocks cached alone: read whole, a few such terms would evict
            // each other and every warm search would read megabytes again.
            let holdable = p1 - p0 <= self.cache.budget() / WHOLE_SHARE;
            if bytes * 2 > p1 - p0 || td.seen && holdable {
                table_whole |= td.table.is_some();
                match self.cache.postings(bundle, p0, p1) {
                    Some(p) => {
                        td.postings = p;
                        td.blocks.clear();
                    }
                    None => {
                        let held = match (&td.skip_bytes, e.skips) {
                            (Some(sb), Some((len, _))) if sb.len() as u64 == len => len,
                            _ => 0,
                        };
                        reads.push((p0 + held..p1, *t, None));
                    }
                }
                continue;
            }
            for m in merged {
                let inside: Vec<usize> = wanted
                    .iter()
                    .filter(|w| w.1.start >= m.start && w.1.end <= m.end)
                    .map(|w| w.0)
                    .collect();
                reads.push((m, *t, Some(inside)));
            }
        }
        // The length table's part: cached, or read beside the blocks.
        let mut whole_lengths: Option<Arc<RowTable>> = None;
        let mut loaded: HashMap<usize, Arc<[u32]>> = HashMap::new();
        let mut table_reads: Vec<std::ops::Range<usize>> = Vec::new();
        let mut whole_at = None;
        if let Some(lt) = &table {
            if table_whole {
                let (a, z) = abs(b.offset, lt.offset, lt.length)?;
                whole_lengths = self.cache.row_table(bundle, a, z);
                if whole_lengths.is_none() {
                    whole_at = Some(a..z);
                }
            }
            if !table_whole {
                for &g in &groups {
                    let r = lt.group_range(g).ok_or_else(|| {
                        b.corrupt(BlobError::Corrupt("block past the length table"))
                    })?;
                    let (a, z) = abs(b.offset, r.start, r.end - r.start)?;
                    match self.cache.lengths(bundle, a, z) {
                        Some(l) => {
                            loaded.insert(g, l);
                        }
                        // Groups up to BLOCK_GAP apart are read as one range, as blocks
                        // are: fewer requests in the round for a few bytes more.
                        None => match table_reads.last_mut() {
                            Some(last)
                                if lt
                                    .group_range(last.end)
                                    .is_some_and(|gap| r.start - gap.start <= BLOCK_GAP) =>
                            {
                                last.end = g + 1
                            }
                            _ => table_reads.push(g..g + 1),
                        },
                    }
                }
            }
        }
        let mut ranges: Vec<std::ops::Range<u64>> = reads.iter().map(|r| r.0.clone()).collect();
        let n_reads = ranges.len();
        if let Some(w) = &whole_at {
            ranges.push(w.clone());
        }
        if let Some(lt) = &table {
            for gs in &table_reads {
                let r = lt.groups_range(gs.clone()).expect("groups of the table");
                let (a, z) = abs(b.offset, r.start, r.end - r.start)?;
                ranges.push(a..z);
            }
        }
        if ranges.is_empty() {
            self.give_lengths(terms, plan, whole_lengths, &loaded);
            return Ok(false);
        }
        let mut got = self
            .overlay
            .read_ranges_gap(&Location::new(bundle), &ranges, 0)
            .await
            .map_err(index_io)?;
        let table_got = got.split_off(n_reads.min(got.len()));
        if let Some(lt) = &table {
            let mut it = table_got.into_iter();
            if let Some(w) = &whole_at {
                let by = it.next().unwrap_or_default();
                let l = Arc::new(lt.decode_rows(&by).map_err(|err| b.corrupt(err))?);
                self.cache.put_row_table(bundle, w.start, w.end, l.clone());
                whole_lengths = Some(l);
            }
            for (gs, by) in table_reads.iter().zip(it) {
                let r0 = lt
                    .group_range(gs.start)
                    .expect("a group of the table")
                    .start;
                for g in gs.clone() {
                    let r = lt.group_range(g).expect("a group of the table");
                    let (a, z) = ((r.start - r0) as usize, (r.end - r0) as usize);
                    let part = by
                        .get(a..z)
                        .ok_or_else(|| b.corrupt(BlobError::Corrupt("length groups cut short")))?;
                    let l: Arc<[u32]> = lt
                        .decode_group(g, part)
                        .map_err(|err| b.corrupt(err))?
                        .0
                        .into();
                    let (ga, gz) = abs(b.offset, r.start, r.end - r.start)?;
                    self.cache.put_lengths(bundle, ga, gz, l.clone());
                    loaded.insert(g, l);
                }
            }
        }
        self.give_lengths(terms, plan, whole_lengths, &loaded);
        if n_reads == 0 {
            return Ok(true);
        }
        for ((r, t, blocks), by) in reads.into_iter().zip(got) {
            let td = terms[t].as_mut().expect("planned");
            let Some(blocks) = blocks else {
                let (p0, _) = abs(
                    b.offset,
                    td.entry.postings.start,
                    td.entry.postings.end - td.entry.postings.start,
                )?;
                // The skip section this search read leads the rest (checked whole below).
                let by = match (r.start > p0, &td.skip_bytes) {
                    (true, Some(sb)) => {
                        let mut whole = Vec::with_capacity(sb.len() + by.len());
                        whole.extend_from_slice(sb);
                        whole.extend_from_slice(&by);
                        bytes::Bytes::from(whole)
                    }
                    _ => by,
                };
                let p = Postings::parse(by, &td.entry, rows).map_err(|err| b.corrupt(err))?;
                let p = Arc::new(p);
                self.cache.put_postings(bundle, p0, r.end, p.clone());
                // The whole postings supersede the skips and blocks cached before.
                if let Some((len, _)) = td.entry.skips {
                    self.cache.forget(bundle, p0, p0 + len);
                }
                for i in td.blocks.keys() {
                    let s = &td.postings.skips[*i];
                    self.cache
                        .forget(bundle, p0 + s.start as u64, p0 + s.end as u64);
                }
                td.postings = p;
                td.blocks.clear();
                continue;
            };
            let (p0, _) = abs(
                b.offset,
                td.entry.postings.start,
                td.entry.postings.end - td.entry.postings.start,
            )?;
            for i in blocks {
                let s = td.postings.skips[i];
                let (a, z) = (p0 + s.start as u64, p0 + s.end as u64);
                let block = by.slice((a - r.start) as usize..(z - r.start) as usize);
                td.postings
                    .check_block(i, &block)
                    .map_err(|err| b.corrupt(err))?;
                self.cache.put_block(bundle, a, z, block.clone());
                td.blocks.insert(i, block);
            }
        }
        Ok(true)
    }

    /// Hands the length table's lengths a search read or found cached ([`Pinned::run_blocks`])
    /// to the planned terms that take theirs from it.
    fn give_lengths(
        &self,
        terms: &mut [Option<TermData>],
        plan: &RunPlan,
        whole: Option<Arc<RowTable>>,
        groups: &HashMap<usize, Arc<[u32]>>,
    ) {
        for (t, _) in &plan.need {
            let Some(td) = terms[*t].as_mut() else {
                continue;
            };
            if td.table.is_none() {
                continue;
            }
            if whole.is_some() {
                td.lengths.whole.clone_from(&whole);
            }
            for (g, l) in groups {
                td.lengths.groups.insert(*g, l.clone());
            }
        }
    }

    /// Which of a run's query terms `found` to read by block: those whose postings pass
    /// [`BY_BLOCK_BYTES`] (with checked blocks, not cached whole) — when a floor can be
    /// known: for [`Combine::Or`] from their block impacts (every large term has them), or
    /// from another term read whole: one under
    /// [`BY_BLOCK_BYTES`] or cached, else the smallest when under [`FLOOR_TERM_BYTES`].
    /// `None`: every term whole (a floor would be unknown, and every block read a round
    /// later).
    fn by_block(
        &self,
        b: BlobRef<'_>,
        found: &[Option<TermEntry>],
        how: Combine,
    ) -> Option<Vec<usize>> {
        // Per term found: its postings' bytes, and whether it may be read by block.
        let terms: Vec<(usize, u64, bool)> = found
            .iter()
            .enumerate()
            .filter_map(|(x, te)| {
                let te = te.as_ref()?;
                let n = te.postings.end - te.postings.start;
                let cached = abs(b.offset, te.postings.start, n)
                    .map(|(p0, p1)| self.cache.postings(b.bundle_path, p0, p1).is_some())
                    .unwrap_or(true);
                Some((x, n, te.skips.is_some() && !cached && n > BY_BLOCK_BYTES))
            })
            .collect();
        let mut large: Vec<usize> = terms.iter().filter(|t| t.2).map(|t| t.0).collect();
        if large.is_empty() {
            return None;
        }
        // The floor comes from whole terms of at most FLOOR_TERM_BYTES (a term cached whole
        // but larger only bounds), or for `or` from the block impacts of every term; without
        // either, the smallest large term, when small enough.
        let impacts = how == Combine::Or
            && large
                .iter()
                .all(|x| found[*x].as_ref().is_some_and(|e| e.impacts.is_some()));
        // With impacts, every large term is read by block: a mid-frequency term read by block
        // beside a frequent one reads less than read whole for its documents' exact scores
        // (`bench/search.mjs`: 579 → 290 KB for "uypr kkymhdmd").
        if !impacts && !terms.iter().any(|t| !t.2 && t.1 <= FLOOR_TERM_BYTES) {
            let (x, n, _) = *terms.iter().filter(|t| t.2).min_by_key(|t| t.1)?;
            if n > FLOOR_TERM_BYTES || large.len() < 2 {
                return None;
            }
            large.retain(|t| *t != x);
        }
        Some(large)
    }

    /// The terms' postings (and positions for a phrase), checked against their CRC-32s and
    /// cached parsed; whether anything was read. With `by_block` (a table run, checked
    /// blocks), the terms [`Pinned::by_block`] picks are read as their skips alone, their
    /// blocks left to [`Pinned::run_blocks`].
    async fn text_postings(
        &self,
        b: BlobRef<'_>,
        dir: &FulltextDirectory,
        found: Vec<Option<TermEntry>>,
        phrase: bool,
        by_block: Option<Combine>,
    ) -> std::result::Result<(Vec<Option<TermData>>, bool), RejectReason> {
        let bundle = b.bundle_path;
        let mut fetch: Vec<std::ops::Range<u64>> = Vec::new();
        let by_block = by_block.and_then(|how| self.by_block(b, &found, how));
        // The postings range each term is read as: whole, or its skip section.
        let mut span: Vec<Option<(u64, u64, bool)>> = Vec::with_capacity(found.len());
        for (x, te) in found.iter().enumerate() {
            let Some(te) = te else {
                span.push(None);
                continue;
            };
            let (p0, p1) = abs(
                b.offset,
                te.postings.start,
                te.postings.end - te.postings.start,
            )?;
            let (p0, p1, whole) = match (te.skips, &by_block) {
                (Some((len, _)), Some(terms)) if terms.contains(&x) => (p0, p0 + len, false),
                _ => (p0, p1, true),
            };
            span.push(Some((p0, p1, whole)));
            if self.cache.postings(bundle, p0, p1).is_none() {
                fetch.push(p0..p1);
            }
            if phrase {
                if let Some((r, _)) = &te.positions {
                    let (a, z) = abs(b.offset, r.start, r.end - r.start)?;
                    if a < z && self.cache.block(bundle, a, z).is_none() {
                        fetch.push(a..z);
                    }
                }
            }
        }
        // Shared lengths of postings read whole: the run's whole length table, in this round.
        let shared_whole = found.iter().zip(&span).any(|(te, sp)| {
            te.as_ref().is_some_and(|e| e.shared_lengths) && sp.is_some_and(|s| s.2)
        });
        let mut whole_lengths: Option<Arc<RowTable>> = None;
        let mut table_at = None;
        if let (true, Some(t)) = (shared_whole, &dir.lengths) {
            let (a, z) = abs(b.offset, t.offset, t.length)?;
            whole_lengths = self.cache.row_table(bundle, a, z);
            if whole_lengths.is_none() {
                fetch.push(a..z);
                table_at = Some((a, z));
            }
        }
        let mut got: HashMap<(u64, u64), bytes::Bytes> = HashMap::new();
        let read = !fetch.is_empty();
        if read {
            fetch.sort_by_key(|r| r.start);
            fetch.dedup();
            let bytes = self
                .overlay
                .read_ranges(&Location::new(bundle), &fetch)
                .await
                .map_err(index_io)?;
            for (r, by) in fetch.iter().zip(bytes) {
                got.insert((r.start, r.end), by);
            }
        }
        if let (Some((a, z)), Some(t)) = (table_at, &dir.lengths) {
            let by = got.get(&(a, z)).cloned().unwrap_or_default();
            let l = Arc::new(t.decode_rows(&by).map_err(|err| b.corrupt(err))?);
            self.cache.put_row_table(bundle, a, z, l.clone());
            whole_lengths = Some(l);
        }
        let mut terms = Vec::with_capacity(found.len());
        for (te, span) in found.into_iter().zip(span) {
            let (Some(te), Some((p0, p1, whole))) = (te, span) else {
                terms.push(None);
                continue;
            };
            let cached = self.cache.postings(bundle, p0, p1);
            let seen = !whole && cached.is_some();
            let mut skip_bytes = None;
            let postings = match cached {
                Some(p) => p,
                None => {
                    let by = got.get(&(p0, p1)).cloned().unwrap_or_default();
                    let p = if whole {
                        Postings::parse(by, &te, dir.rows)
                    } else {
                        skip_bytes = Some(by.clone());
                        Postings::parse_skips(by, &te, dir.rows)
                    };
                    let p = Arc::new(p.map_err(|err| b.corrupt(err))?);
                    self.cache.put_postings(bundle, p0, p1, p.clone());
                    p
                }
            };
            let positions = match (&te.positions, phrase) {
                (Some((r, crc)), true) => {
                    let (a, z) = abs(b.offset, r.start, r.end - r.start)?;
                    let by = match self.cache.block(bundle, a, z) {
                        Some(x) => x,
                        None => {
                            let by = got.get(&(a, z)).cloned().unwrap_or_default();
                            check_positions(&by, *crc).map_err(|err| b.corrupt(err))?;
                            self.cache.put_block(bundle, a, z, by.clone());
                            by
                        }
                    };
                    Some(by)
                }
                _ => None,
            };
            let shared = te.shared_lengths;
            terms.push(Some(TermData {
                entry: te,
                postings,
                positions,
                blocks: HashMap::new(),
                seen,
                skip_bytes,
                table: dir.lengths.clone().filter(|_| shared),
                lengths: LengthsView {
                    whole: whole_lengths.clone().filter(|_| shared),
                    groups: HashMap::new(),
                },
            }));
        }
        Ok((terms, read))
    }
}

/// How each result of a hybrid search ranked in the two rankings it was fused from.
#[derive(Clone, Debug)]
pub struct Hybrid {
    /// The row's place in the BM25 ranking (1-based; `None`: not in its first `k`).
    pub text_ranks: Vec<Option<u32>>,
    /// Its BM25 score there.
    pub text_scores: Vec<Option<f64>>,
    /// The row's place in the nearest-neighbour ranking (1-based; `None`: not in its first
    /// `k`).
    pub vector_ranks: Vec<Option<u32>>,
    /// Its exact distance there.
    pub distances: Vec<Option<f64>>,
    /// The vector index's metric.
    pub metric: &'static str,
    /// The nearest-neighbour search's own statistics (the result's `stats` are the BM25
    /// search's, with the I/O counters of the whole call; the two searches run concurrently,
    /// so these counters may include reads of the other).
    pub vector_stats: QueryStats,
    pub vector_rounds: u64,
    pub evaluated: u64,
}

struct Scorer<'a> {
    q: &'a Analyzed,
    idfs: &'a [f64],
    avg_len: f64,
    phrase: bool,
    /// Every term must be present (`and`, phrases).
    and: bool,
    /// [`norm`] by document length, below [`NORM_TABLE`].
    norms: &'a [f64],
    /// The hit of a document (a row of the file, or of the run) with its score.
    hit: &'a (dyn Fn(f64, u64) -> Hit + Sync),
    /// A score the k-th result is known to reach ([`RunPlan::floor`]; `-inf`: none):
    /// documents that cannot reach it are pruned from the start.
    floor: f64,
}

/// Whether some start position puts every phrase word at its offset.
fn phrase_matches(phrase: &[(usize, u32)], positions: &[&[u32]]) -> bool {
    let Some(&(t0, o0)) = phrase.first() else {
        return false;
    };
    positions[t0].iter().any(|&p| {
        let Some(start) = p.checked_sub(o0) else {
            return false;
        };
        phrase.iter().all(|&(t, o)| {
            start
                .checked_add(o)
                .is_some_and(|want| positions[t].binary_search(&want).is_ok())
        })
    })
}

/// A term's postings, read block by block: a block is decoded only when a document in it is
/// wanted, and then its rows alone until one of them is scored; moving past blocks reads
/// their skips alone.
struct Cursor<'p> {
    term: usize,
    p: &'p Postings,
    /// The blocks read, when the postings were read by block ([`TermData::blocks`]).
    blocks: &'p HashMap<usize, bytes::Bytes>,
    /// The run's lengths, for postings whose blocks carry none ([`TermData::lengths`]).
    lengths: &'p LengthsView,
    norms: &'p [f64],
    positions: Option<&'p [u8]>,
    idf: f64,
    avg_len: f64,
    /// Bound of any document's score for the term.
    ub: f64,
    /// The current block (`skips.len()`: exhausted).
    block: usize,
    /// Whether the current block's rows are decoded.
    decoded: bool,
    /// Whether its term frequencies and lengths are too ([`Cursor::complete`]): a probe for a
    /// document the block does not hold (most are) decodes its rows alone.
    full: bool,
    /// Where the current block's term frequencies start in its bytes.
    rest_at: usize,
    /// The first row wanted in the current block (until it is decoded).
    target: u32,
    n: usize,
    i: usize,
    rows: [u32; BLOCK_DOCS],
    tfs: [u32; BLOCK_DOCS],
    lens: [u32; BLOCK_DOCS],
    /// Decoded positions of the current block (phrases), by posting.
    pos: Option<Vec<Vec<u32>>>,
    /// The block [`Cursor::bound_at`] last looked at (documents asked about only grow).
    shallow: usize,
    /// The last block bound computed, by block (a cursor asks for its block's bound once per
    /// document it scores: four divisions each, where the answer changes once per block).
    bound: std::cell::Cell<(usize, f64)>,
}

const DONE: u64 = u64::MAX;
type BlobResult<T> = std::result::Result<T, crate::index::ordered::BlobError>;

impl<'p> Cursor<'p> {
    fn new(term: usize, td: &'p TermData, idf: f64, avg_len: f64, norms: &'p [f64]) -> Cursor<'p> {
        Cursor {
            term,
            p: &td.postings,
            blocks: &td.blocks,
            lengths: &td.lengths,
            norms,
            positions: td.positions.as_deref(),
            idf,
            avg_len,
            ub: bm25(idf, td.entry.max_tf, td.entry.min_len, avg_len) * SLACK,
            block: 0,
            decoded: false,
            full: false,
            rest_at: 0,
            target: 0,
            n: 0,
            i: 0,
            rows: [0; BLOCK_DOCS],
            tfs: [0; BLOCK_DOCS],
            lens: [0; BLOCK_DOCS],
            pos: None,
            shallow: 0,
            bound: std::cell::Cell::new((usize::MAX, 0.0)),
        }
    }

    /// Block `i`'s score bound ([`block_bound`]), computed once while it is asked for.
    #[inline]
    fn bound_of(&self, i: usize) -> f64 {
        let (at, b) = self.bound.get();
        if at == i {
            return b;
        }
        let b = block_bound(self.p, i, self.idf, self.avg_len, None);
        self.bound.set((i, b));
        b
    }

    fn exhausted(&self) -> bool {
        self.block >= self.p.skips.len()
    }

    /// The bytes of block `i` (`None`: not read, for it holds nothing that can reach the
    /// floor — [`TermData`]).
    fn block_bytes(&self, i: usize) -> BlobResult<Option<&'p [u8]>> {
        if !self.p.whole {
            return Ok(self.blocks.get(&i).map(|b| &b[..]));
        }
        let p: &'p Postings = self.p;
        p.skips
            .get(i)
            .and_then(|s| p.bytes.get(s.start..s.end))
            .map(Some)
            .ok_or(crate::index::ordered::BlobError::Corrupt(
                "postings block outside the postings",
            ))
    }

    /// Decodes the current block's rows when they are not, positioned at the first row at or
    /// past the target (the next block when none is).
    #[inline]
    fn ensure(&mut self) -> BlobResult<()> {
        match self.decoded || self.exhausted() {
            true => Ok(()),
            false => self.decode_rows(),
        }
    }

    /// [`Cursor::ensure`]'s work, apart so that the check it mostly ends at is inlined.
    #[inline(never)]
    fn decode_rows(&mut self) -> BlobResult<()> {
        while !self.decoded && !self.exhausted() {
            (self.n, self.rest_at) = match self.block_bytes(self.block)? {
                Some(b) => {
                    if !self.p.whole {
                        self.p.check_block(self.block, b)?;
                    }
                    self.p.decode_rows(self.block, b, &mut self.rows)?
                }
                None => (0, 0),
            };
            self.full = false;
            self.pos = None;
            self.i = self.rows[..self.n].partition_point(|r| *r < self.target);
            if self.i < self.n {
                self.decoded = true;
            } else {
                self.block += 1;
            }
        }
        Ok(())
    }

    /// Decodes the rest of the current block (decoded: [`Cursor::ensure`]) when it is not:
    /// its term frequencies and lengths, checking the whole block.
    #[inline]
    fn complete(&mut self) -> BlobResult<()> {
        match self.decoded && !self.full {
            true => self.decode_rest(),
            false => Ok(()),
        }
    }

    /// [`Cursor::complete`]'s work, apart so that the check it mostly ends at is inlined.
    #[inline(never)]
    fn decode_rest(&mut self) -> BlobResult<()> {
        let b = self
            .block_bytes(self.block)?
            .ok_or(crate::index::ordered::BlobError::Corrupt("block not read"))?;
        if self.p.shared_lengths {
            self.lengths
                .lengths_of(&self.rows[..self.n], &mut self.lens[..self.n])?;
        }
        self.p.decode_rest(
            self.block,
            b,
            self.rest_at,
            self.n,
            &mut self.tfs,
            &mut self.lens,
        )?;
        self.full = true;
        Ok(())
    }

    fn doc(&mut self) -> BlobResult<u64> {
        self.ensure()?;
        Ok(if self.exhausted() {
            DONE
        } else {
            u64::from(self.rows[self.i])
        })
    }

    /// Past the current document (which [`Cursor::doc`] decoded).
    fn next(&mut self) {
        self.i += 1;
        if self.i >= self.n {
            self.block += 1;
            self.decoded = false;
            self.target = 0;
        }
    }

    /// To the first posting at or past `row`, decoding nothing.
    fn seek(&mut self, row: u64) {
        if self.exhausted() {
            return;
        }
        let r = u32::try_from(row).unwrap_or(u32::MAX);
        if self.p.skips[self.block].last_row >= r {
            if self.decoded {
                while self.rows[self.i] < r {
                    self.i += 1;
                }
            } else {
                self.target = self.target.max(r);
            }
            return;
        }
        match self.p.block_of(r) {
            Some(b) => {
                self.block = b;
                self.decoded = false;
                self.target = r;
            }
            None => self.block = self.p.skips.len(),
        }
    }

    /// The current block's last row and score bound.
    fn block_bound(&self) -> Option<(u32, f64)> {
        self.p
            .skips
            .get(self.block)
            .map(|s| (s.last_row, self.bound_of(self.block)))
    }

    /// The bound of the block that would hold `row` (0 when none does); `row` never
    /// decreases between calls.
    fn bound_at(&mut self, row: u64) -> f64 {
        let skips = &self.p.skips;
        while self.shallow < skips.len() && u64::from(skips[self.shallow].last_row) < row {
            self.shallow += 1;
        }
        match self.shallow < skips.len() {
            true => self.bound_of(self.shallow),
            false => 0.0,
        }
    }

    /// The current document's score (decoding the rest of its block when it is not).
    fn score(&mut self) -> BlobResult<f64> {
        self.complete()?;
        Ok(self.score_at(self.i))
    }

    /// The score of the `k`-th posting of the block, decoded whole ([`Cursor::complete`]).
    #[inline]
    fn score_at(&self, k: usize) -> f64 {
        let len = self.lens[k];
        let n = match self.norms.get(len as usize) {
            Some(n) => *n,
            None => norm(len, self.avg_len),
        };
        bm25_norm(self.idf, self.tfs[k], n)
    }

    fn positions(&mut self) -> BlobResult<&[u32]> {
        self.complete()?;
        if self.pos.is_none() {
            let bytes = self
                .positions
                .ok_or(crate::index::ordered::BlobError::Corrupt("no positions"))?;
            let mut all = vec![Vec::new(); self.n];
            block_positions(
                bytes,
                self.p,
                self.block,
                &self.tfs[..self.n],
                &self.lens[..self.n],
                |k, ps| {
                    all[k] = ps.to_vec();
                },
            )?;
            self.pos = Some(all);
        }
        Ok(&self.pos.as_ref().expect("decoded")[self.i])
    }
}

/// Completes the score of document `d` (`score` from the essential terms) with the
/// non-essential terms `low` (bounds ascending, summing to `rest`), highest bound first. The
/// score is at most `score + bound + rest` at every step: once that cannot reach `theta`, the
/// document is dropped (`None`) without decoding more blocks.
fn probe_rest(
    low: &mut [Cursor<'_>],
    d: u64,
    parts: &mut Vec<(usize, f64)>,
    mut score: f64,
    mut rest: f64,
    theta: f64,
) -> BlobResult<Option<f64>> {
    for c in low.iter_mut().rev() {
        rest -= c.ub;
        if score + c.bound_at(d) + rest < theta {
            return Ok(None);
        }
        c.seek(d);
        if c.doc()? == d {
            let x = c.score()?;
            score += x;
            parts.push((c.term, x));
        }
    }
    Ok((score >= theta).then(|| canonical_score(parts)))
}

/// `spans` (ascending, disjoint) merged into at most `cap` reads with the fewest bytes: gaps
/// up to [`BLOCK_GAP`] are bridged, then the smallest others while the reads pass `cap`.
fn merge_reads(spans: Vec<std::ops::Range<u64>>, cap: usize) -> Vec<std::ops::Range<u64>> {
    let spans = crate::io::coalesce_ranges(&spans, BLOCK_GAP);
    let cap = cap.max(1);
    if spans.len() <= cap {
        return spans;
    }
    let mut gaps: Vec<(u64, usize)> = spans
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].start.saturating_sub(w[0].end), i))
        .collect();
    gaps.sort_unstable();
    let mut bridge = vec![false; spans.len()];
    for (_, i) in &gaps[..spans.len() - cap] {
        bridge[*i] = true;
    }
    let mut out: Vec<std::ops::Range<u64>> = Vec::with_capacity(cap);
    let mut open = true;
    for (i, s) in spans.into_iter().enumerate() {
        match out.last_mut() {
            Some(last) if !open => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
        open = !bridge[i];
    }
    out
}

/// Which rows of a run may be results: `row` says for one; `all` that every row of the run
/// may (no deleted rows, no `where`).
struct Keep<'a> {
    row: &'a dyn Fn(u64) -> bool,
    all: bool,
}

/// How a search's terms combine, as far as reading a run by block goes: `Or` may take its
/// floor from block impacts (any document of a term scores at least its share), `And` not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    And,
    Or,
}

/// Rows a block may span for its impact to count toward a floor ([`Scorer::impact_floor`]):
/// every row of it is checked kept, so the document the impact proves is a kept one.
const FLOOR_SPAN_ROWS: u32 = 4096;
/// Rows [`Scorer::impact_floor`] checks at most per term.
const FLOOR_CHECK_ROWS: u64 = 1 << 16;
/// A term read by block is read whole once a second search asks for blocks not cached
/// only when its postings take at most this share of the read cache's budget
/// ([`Pinned::run_blocks`]).
const WHOLE_SHARE: u64 = 32;
/// Passes [`Scorer::plan_blocks`] makes at most, each ruling out blocks by the others' blocks
/// still in.
const PLAN_PASSES: usize = 4;

/// What a search reads of its table run's terms read by block ([`Scorer::plan_blocks`]).
struct RunPlan {
    /// A score that the run's k-th best kept document is known to reach (`-inf`: unknown) —
    /// the k-th largest of the documents' scores over the terms read whole alone, each at
    /// most its full score, or of a term's block impacts' lower ends. No document below it
    /// can be a result.
    floor: f64,
    /// Per query term read by block: the blocks that may hold a result.
    need: Vec<(usize, Vec<usize>)>,
}

impl Scorer<'_> {
    /// The blocks of `terms` read by block that may hold a result of the run, and the floor
    /// the scorer may start from; `None` when every term was read whole.
    ///
    /// The terms read whole (the rare ones) are decoded first — those of at most
    /// [`FLOOR_TERM_BYTES`]: a larger one read whole (cached) only bounds, as a by-block term
    /// does, so a search never decodes a frequent term twice. With `and`, a result holds
    /// every term: a block is read when it may hold a row holding every whole term (all when
    /// none is whole). Otherwise the floor is the better of the k-th best score of the kept
    /// documents over the whole terms, and per term the k-th best lower end of its blocks'
    /// impacts ([`Scorer::impact_floor`]). A document scores at most its whole terms' exact
    /// score, plus the bound of the block of each by-block term that would hold it (its
    /// impact's upper end, or `max_tf` at `min_len` when closer), plus for every other term
    /// not read whole the largest bound of its blocks over the same rows — so a block `B` of
    /// term `e` is read when that sum can reach the floor for a document in `B`: one holding
    /// no whole term (`bound(B) + rest(B)`) or one of the whole terms' documents in its rows.
    /// A block not read then holds nothing that can be a result, which the scorer relies on
    /// ([`Cursor::ensure`] passes it by).
    fn plan_blocks(
        &self,
        terms: &[Option<TermData>],
        k: usize,
        keep: &Keep<'_>,
    ) -> BlobResult<Option<RunPlan>> {
        let (keep, all_kept) = (keep.row, keep.all);
        let by_block: Vec<usize> = (0..terms.len())
            .filter(|t| terms[*t].as_ref().is_some_and(|d| !d.postings.whole))
            .collect();
        if by_block.is_empty() {
            return Ok(None);
        }
        // The floor's terms: read whole and at most FLOOR_TERM_BYTES (decoded here). A larger
        // one read whole (cached) only bounds, like a term read by block.
        let small = |d: &TermData| {
            d.postings.whole && d.entry.postings.end - d.entry.postings.start <= FLOOR_TERM_BYTES
        };
        let whole: Vec<usize> = (0..terms.len())
            .filter(|t| terms[*t].as_ref().is_some_and(small))
            .collect();
        let bounding: Vec<usize> = (0..terms.len())
            .filter(|t| terms[*t].as_ref().is_some_and(|d| !small(d)))
            .collect();
        let every = |t: usize| {
            let n = terms[t].as_ref().map_or(0, |d| d.postings.skips.len());
            (t, (0..n).collect::<Vec<usize>>())
        };
        let all = RunPlan {
            floor: f64::NEG_INFINITY,
            need: by_block.iter().map(|t| every(*t)).collect(),
        };
        // The whole terms' postings: (row, term, score, document length), by row then term.
        let mut posts: Vec<(u32, usize, f64, u32)> = Vec::new();
        let (mut rows, mut tfs, mut lens) =
            ([0u32; BLOCK_DOCS], [0u32; BLOCK_DOCS], [0u32; BLOCK_DOCS]);
        for &t in &whole {
            let td = terms[t].as_ref().expect("whole");
            let p = &td.postings;
            for i in 0..p.skips.len() {
                let n = p.decode_with(i, &mut rows, &mut tfs, &mut lens, &td.lengths)?;
                for j in 0..n {
                    let norm = match self.norms.get(lens[j] as usize) {
                        Some(x) => *x,
                        None => norm(lens[j], self.avg_len),
                    };
                    posts.push((rows[j], t, bm25_norm(self.idfs[t], tfs[j], norm), lens[j]));
                }
            }
        }
        posts.sort_unstable_by_key(|p| (p.0, p.1));
        // Per kept row: its score over the whole terms (summed in query-term order, as a
        // document's score is), how many of them it holds, and its length.
        let mut docs: Vec<(u32, f64, usize, u32)> = Vec::new();
        let mut i = 0;
        while i < posts.len() {
            let row = posts[i].0;
            let mut j = i;
            let mut score = 0.0;
            while j < posts.len() && posts[j].0 == row {
                score += posts[j].2;
                j += 1;
            }
            if keep(u64::from(row)) {
                docs.push((row, score, j - i, posts[i].3));
            }
            i = j;
        }
        if self.and {
            if whole.is_empty() {
                return Ok(Some(all));
            }
            let need = by_block
                .iter()
                .map(|&e| {
                    let p = &terms[e].as_ref().expect("by block").postings;
                    let mut want: Vec<usize> = docs
                        .iter()
                        .filter(|d| d.2 == whole.len())
                        .filter_map(|d| p.block_of(d.0))
                        .collect();
                    want.dedup();
                    (e, want)
                })
                .collect();
            return Ok(Some(RunPlan {
                floor: f64::NEG_INFINITY,
                need,
            }));
        }
        let mut floor = f64::NEG_INFINITY;
        if docs.len() >= k {
            let mut scores: Vec<f64> = docs.iter().map(|d| d.1).collect();
            let (_, kth, _) = scores.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
            floor = *kth;
        }
        for (t, td) in terms.iter().enumerate() {
            if let Some(td) = td {
                floor = floor.max(self.impact_floor(t, &td.postings, k, keep, all_kept));
            }
        }
        if floor == f64::NEG_INFINITY {
            return Ok(Some(all));
        }
        let theta = loose(floor);
        // Every term not decoded here: its blocks' rows and bounds, to bound the others'
        // blocks over the same rows.
        let spans: Vec<(usize, Vec<(u32, u32, f64)>)> = bounding
            .iter()
            .map(|&t| {
                let p = &terms[t].as_ref().expect("a term").postings;
                let bounds = (0..p.skips.len())
                    .map(|i| {
                        let r = p.block_rows(i);
                        (*r.start(), *r.end(), self.block_bound(t, p, i, None))
                    })
                    .collect();
                (t, bounds)
            })
            .collect();
        // Which blocks of each such term may hold a result: first every one; then, pass by
        // pass, those whose bound (or a whole-term document's score with it) plus the other
        // terms' largest bounds over the same rows — among *their* blocks that may hold a
        // result — can reach the floor. A result's block of each term it holds stays in every
        // pass (its bound and the others' blocks holding it reach its score), so each pass
        // only drops blocks no result is in.
        let mut want: Vec<Vec<bool>> = spans.iter().map(|s| vec![true; s.1.len()]).collect();
        for _ in 0..PLAN_PASSES {
            let mut changed = false;
            for x in 0..spans.len() {
                let (e, own) = (spans[x].0, &spans[x].1);
                let p = &terms[e].as_ref().expect("a term").postings;
                let others = (0..spans.len())
                    .filter(|y| *y != x)
                    .map(|y| (spans[y].1.as_slice(), want[y].as_slice()));
                let rest = rest_over(own, others);
                let mut next: Vec<bool> = (0..own.len())
                    .map(|i| own[i].2 + rest[i] >= theta)
                    .collect();
                for d in &docs {
                    if let Some(i) = p.block_of(d.0) {
                        // The document's own length (its whole terms' postings hold it)
                        // bounds closer than the block's shortest.
                        if !next[i] && d.1 + self.block_bound(e, p, i, Some(d.3)) + rest[i] >= theta
                        {
                            next[i] = true;
                        }
                    }
                }
                // Never more than the pass before (bounds only tighten).
                for (n, w) in next.iter_mut().zip(&want[x]) {
                    *n &= *w;
                }
                changed |= next != want[x];
                want[x] = next;
            }
            if !changed {
                break;
            }
        }
        let need = by_block
            .iter()
            .map(|&e| {
                let x = spans
                    .iter()
                    .position(|s| s.0 == e)
                    .expect("a by-block term bounds");
                (e, (0..want[x].len()).filter(|i| want[x][*i]).collect())
            })
            .collect();
        Ok(Some(RunPlan { floor, need }))
    }

    fn block_bound(&self, t: usize, p: &Postings, i: usize, len: Option<u32>) -> f64 {
        block_bound(p, i, self.idfs[t], self.avg_len, len)
    }

    /// A score `k` kept documents of term `t` reach, from its block impacts (`-inf` without
    /// them or fewer than `k` blocks found whole kept): each block's impact proves a
    /// document in its rows scoring at least the lower end for `t` alone — at least that in
    /// all, since every term adds — and blocks are disjoint, so the k-th largest lower end
    /// over blocks whose every row is kept (deleted and `where` rows are not; spans checked
    /// up to [`FLOOR_SPAN_ROWS`], [`FLOOR_CHECK_ROWS`] in all) is a floor of the k-th result.
    fn impact_floor(
        &self,
        t: usize,
        p: &Postings,
        k: usize,
        keep: &dyn Fn(u64) -> bool,
        all_kept: bool,
    ) -> f64 {
        let mut lows: Vec<(f64, usize)> = (0..p.skips.len())
            .filter_map(|i| p.impact_range(i, self.avg_len).map(|(lo, _)| (lo, i)))
            .collect();
        if k == 0 || lows.len() < k {
            return f64::NEG_INFINITY;
        }
        lows.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        let (mut found, mut checked) = (0usize, 0u64);
        for (lo, i) in lows {
            let kept = all_kept || {
                let r = p.block_rows(i);
                let span = r.end() - r.start() + 1;
                if span > FLOOR_SPAN_ROWS {
                    continue;
                }
                checked += u64::from(span);
                if checked > FLOOR_CHECK_ROWS {
                    break;
                }
                r.clone().all(|row| keep(u64::from(row)))
            };
            if kept {
                found += 1;
                if found == k {
                    // Below the true scores by far more than any rounding of theirs.
                    return self.idfs[t] * (K1 + 1.0) * lo * (1.0 - 1e-9);
                }
            }
        }
        f64::NEG_INFINITY
    }
}

/// Block `i` of postings `p` of a term of `idf`: a bound of its documents' scores for the
/// term (of a document of length `len` when given) under a mean length of `avg_len` —
/// `max_tf` at `min_len` (or `len`), or the upper end of the block's impact when closer.
fn block_bound(p: &Postings, i: usize, idf: f64, avg_len: f64, len: Option<u32>) -> f64 {
    let s = &p.skips[i];
    let b = bm25(
        idf,
        s.max_tf,
        len.map_or(s.min_len, |l| l.max(s.min_len)),
        avg_len,
    );
    let b = match p.impact_range(i, avg_len) {
        Some((_, hi)) => b.min(idf * (K1 + 1.0) * hi),
        None => b,
    };
    b * SLACK
}

/// For each block of one term (`blocks`: rows and bound, ascending), the sum over the
/// `others` terms (their blocks, and which of them may hold a result) of the largest bound
/// among those blocks over the same rows (0 for a term with none there): what the other
/// terms can add to a result in the block.
fn rest_over<'a>(
    blocks: &[(u32, u32, f64)],
    others: impl Iterator<Item = (&'a [(u32, u32, f64)], &'a [bool])>,
) -> Vec<f64> {
    let mut rest = vec![0.0f64; blocks.len()];
    for (o, live) in others {
        let mut j = 0;
        for (i, &(lo, hi, _)) in blocks.iter().enumerate() {
            while j < o.len() && o[j].1 < lo {
                j += 1;
            }
            let mut m = 0.0f64;
            let mut x = j;
            while x < o.len() && o[x].0 <= hi {
                if live[x] {
                    m = m.max(o[x].2);
                }
                x += 1;
            }
            rest[i] += m;
        }
    }
    rest
}

impl Scorer<'_> {
    fn score_scanned(&self, hits: &[ScanDoc], keep: &dyn Fn(u64) -> bool, top: &mut TopK) {
        for d in hits {
            if self.and && d.tfs.contains(&0) {
                continue;
            }
            if self.phrase {
                let ps: Vec<&[u32]> = d.positions.iter().map(Vec::as_slice).collect();
                if !phrase_matches(&self.q.phrase, &ps) {
                    continue;
                }
            }
            if !keep(d.row) {
                continue;
            }
            let mut score = 0.0;
            for (t, tf) in d.tfs.iter().enumerate() {
                if *tf > 0 {
                    score += bm25(self.idfs[t], *tf, d.len, self.avg_len);
                }
            }
            top.offer((self.hit)(score, d.row));
        }
    }

    fn score_indexed(
        &self,
        terms: &[Option<TermData>],
        keep: &dyn Fn(u64) -> bool,
        top: &mut TopK,
    ) -> BlobResult<()> {
        if self.and && terms.iter().any(Option::is_none) {
            return Ok(()); // a term the file does not hold
        }
        let mut cursors: Vec<Cursor> = terms
            .iter()
            .enumerate()
            .filter_map(|(t, td)| {
                td.as_ref()
                    .map(|td| Cursor::new(t, td, self.idfs[t], self.avg_len, self.norms))
            })
            .collect();
        if cursors.is_empty() {
            return Ok(());
        }
        // Hits of this file collect in a heap of their own, merged when the file is done (a
        // blob that fails mid-way leaves the results untouched); the bar is the better of the
        // two heaps'.
        let mut local = TopK {
            k: top.k,
            heap: BinaryHeap::new(),
        };
        let bar = |local: &TopK| top.threshold().max(local.threshold()).max(self.floor);
        if self.and {
            // Lead with the rarest term, probe the others; a lead block whose bound (with the
            // others' bounds) cannot beat the bar is skipped undecoded.
            cursors.sort_by_key(|c| c.p.df);
            let rest: f64 = cursors[1..].iter().map(|c| c.ub).sum();
            let mut parts: Vec<(usize, f64)> = Vec::with_capacity(cursors.len());
            loop {
                let theta = loose(bar(&local));
                let Some((last, bound)) = cursors[0].block_bound() else {
                    break;
                };
                if bound + rest < theta {
                    cursors[0].seek(u64::from(last) + 1);
                    continue;
                }
                let d = cursors[0].doc()?;
                if d == DONE {
                    break;
                }
                if keep(d) && cursors[0].score()? + rest >= theta {
                    let mut all = true;
                    for c in cursors[1..].iter_mut() {
                        c.seek(d);
                        if c.doc()? != d {
                            all = false;
                            break;
                        }
                    }
                    if all && self.phrase {
                        let mut ps: Vec<Vec<u32>> = vec![Vec::new(); self.q.terms.len()];
                        for c in cursors.iter_mut() {
                            ps[c.term] = c.positions()?.to_vec();
                        }
                        let refs: Vec<&[u32]> = ps.iter().map(Vec::as_slice).collect();
                        all = phrase_matches(&self.q.phrase, &refs);
                    }
                    if all {
                        parts.clear();
                        for c in cursors.iter_mut() {
                            parts.push((c.term, c.score()?));
                        }
                        let score = canonical_score(&mut parts);
                        if score >= theta {
                            local.offer((self.hit)(score, d));
                        }
                    }
                }
                cursors[0].next();
            }
        } else {
            // MaxScore: terms by bound ascending; the lowest ones whose bounds sum to at most
            // the bar are non-essential (probed only for documents the others find).
            cursors.sort_by(|a, b| a.ub.total_cmp(&b.ub));
            let n = cursors.len();
            let mut prefix = vec![0.0; n + 1];
            for (i, c) in cursors.iter().enumerate() {
                prefix[i + 1] = prefix[i] + c.ub;
            }
            let mut first_essential = 0usize;
            let mut parts: Vec<(usize, f64)> = Vec::with_capacity(n);
            loop {
                let theta = loose(bar(&local));
                while first_essential < n && prefix[first_essential + 1] < theta {
                    first_essential += 1;
                }
                if first_essential == n {
                    break; // no document can beat the bar
                }
                // Block-max: the essential cursors' current blocks, up to the first of them
                // to end, bounded with the non-essential terms: skipped undecoded when the
                // bound cannot beat the bar.
                let mut upto = u32::MAX;
                let mut bound = prefix[first_essential];
                let mut live_blocks = false;
                for c in &cursors[first_essential..] {
                    if let Some((last, b)) = c.block_bound() {
                        live_blocks = true;
                        upto = upto.min(last);
                        bound += b;
                    }
                }
                if !live_blocks {
                    break;
                }
                if bound < theta {
                    for c in cursors[first_essential..].iter_mut() {
                        c.seek(u64::from(upto) + 1);
                    }
                    continue;
                }
                if first_essential + 1 == n {
                    // One essential term: its block scored in a tight loop, the others probed
                    // only for postings whose own score could lift them past the bar.
                    let (low, high) = cursors.split_at_mut(first_essential);
                    let c = &mut high[0];
                    c.ensure()?;
                    if c.exhausted() {
                        break;
                    }
                    c.complete()?;
                    let rest_all = prefix[first_essential];
                    let mut theta = theta;
                    for k in c.i..c.n {
                        let s0 = c.score_at(k);
                        if s0 + rest_all < theta {
                            continue;
                        }
                        let d = u64::from(c.rows[k]);
                        if !keep(d) {
                            continue;
                        }
                        parts.clear();
                        parts.push((c.term, s0));
                        if let Some(score) = probe_rest(low, d, &mut parts, s0, rest_all, theta)? {
                            local.offer((self.hit)(score, d));
                            theta = loose(bar(&local));
                        }
                    }
                    c.i = c.n - 1;
                    c.next();
                    continue;
                }
                let mut d = DONE;
                for c in cursors[first_essential..].iter_mut() {
                    d = d.min(c.doc()?);
                }
                if d == DONE {
                    break;
                }
                let mut score = 0.0;
                let live = keep(d);
                parts.clear();
                for c in cursors[first_essential..].iter_mut() {
                    if c.doc()? == d {
                        if live {
                            let x = c.score()?;
                            score += x;
                            parts.push((c.term, x));
                        }
                        c.next();
                    }
                }
                if !live {
                    continue;
                }
                let rest = prefix[first_essential];
                if score + rest < theta {
                    continue;
                }
                let low = &mut cursors[..first_essential];
                if let Some(score) = probe_rest(low, d, &mut parts, score, rest, theta)? {
                    local.offer((self.hit)(score, d));
                }
            }
        }
        for h in local.heap {
            top.offer(h);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Block reads: gaps up to `BLOCK_GAP` always bridged, then the smallest others until the
    /// reads fit the cap; every block inside exactly one read.
    #[test]
    fn block_reads_bridge_the_smallest_gaps() {
        let spans = |v: &[(u64, u64)]| v.iter().map(|&(a, z)| a..z).collect::<Vec<_>>();
        // A gap of 4096 is bridged, 4097 is not.
        let s = spans(&[(0, 100), (4196, 4300), (8397, 8500)]);
        assert_eq!(merge_reads(s, 8), spans(&[(0, 4300), (8397, 8500)]));
        // Cap 2 over gaps of 10k, 50k, 20k: the 10k and 20k ones are bridged.
        let s = spans(&[
            (0, 200),
            (10_200, 10_400),
            (60_400, 60_600),
            (80_600, 80_800),
        ]);
        let got = merge_reads(s.clone(), 2);
        assert_eq!(got, spans(&[(0, 10_400), (60_400, 80_800)]));
        for b in &s {
            assert_eq!(
                got.iter()
                    .filter(|m| m.start <= b.start && b.end <= m.end)
                    .count(),
                1
            );
        }
        assert_eq!(merge_reads(s.clone(), 1), spans(&[(0, 80_800)]));
        assert_eq!(merge_reads(s.clone(), 4), s);
    }

    #[test]
    fn phrase_offsets_match_and_miss() {
        let phrase = [(0usize, 0u32), (1, 1), (0, 2)];
        assert!(phrase_matches(&phrase, &[&[3, 5], &[4]]));
        assert!(!phrase_matches(&phrase, &[&[3, 6], &[4]]));
        assert!(!phrase_matches(&phrase, &[&[], &[4]]));
    }

    #[test]
    fn hits_order_best_first_then_row_id_then_file_then_row() {
        let hit = |score, row_id, file, row| Hit {
            score,
            row_id,
            file,
            row,
        };
        let mut v = vec![
            hit(1.0, u64::MAX, 0, 5),
            hit(2.0, u64::MAX, 1, 0),
            hit(1.0, u64::MAX, 0, 2),
            hit(1.0, 7, 3, 9),
            hit(1.0, 3, 4, 0),
        ];
        v.sort();
        assert_eq!(
            v.iter().map(|h| (h.file, h.row)).collect::<Vec<_>>(),
            [(1, 0), (4, 0), (3, 9), (0, 2), (0, 5)]
        );
    }

    #[test]
    fn idf_and_bm25_follow_lucene() {
        assert!((idf(10, 1) - (1.0f64 + 9.5 / 1.5).ln()).abs() < 1e-12);
        let s = bm25(1.0, 2, 10, 10.0);
        assert!((s - 2.0 * 2.2 / (2.0 + 1.2)).abs() < 1e-12);
    }
}
