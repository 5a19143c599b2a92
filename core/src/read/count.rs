//! `count(table, { where })`: how many live rows match, answered from indexes alone when every
//! predicate column has a ready one-column index (bitmap or ordered), else by scanning.
//!
//! Per data file: every column's index must pass the read gate for the file. Then each
//! column's matching positions come from its index — a bitmap's directory alone when the
//! file has one column and no deleted rows (the selected values' cardinalities), else the
//! bitmaps or ordered entries as position sets — and the sets intersect, deleted rows leave,
//! and what remains is counted — no data file is touched: the published manifest's file
//! versions are trusted, as `query` trusts them for "no rows", and only `verify: true`
//! confirms each file with a HEAD (its size and, when versions are pinned, its version
//! against the manifest). A file whose index is missing, rejected or drifted is scanned, so
//! the count equals a scan's of the files the manifest records. Without `where`, a file's
//! count is the live rows the manifest records.

use std::collections::HashMap;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::formats::lineage::{GateDecision, RejectReason, Rejection};
use crate::formats::manifest::{FileEntry, IndexFileEntry, TableManifest};
use crate::index::access::{KeyProbe, Positions, RunPositions, RunWant};
use crate::index::kind::RunLayout;
use crate::io::Location;
use crate::read::lookup::{reads_at, BlobRef, Pinned, FILE_WINDOW};
use crate::read::plan::{plan_index, IndexPlan, Query, QueryStats};
use crate::read::predicate::Predicate;

/// The answer of [`Pinned::count`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountResult {
    pub count: u64,
    /// How it was answered: `index`/`index_kind` name the first column's index (all of
    /// them are in `index_columns`), `files_by_index` the files answered without a scan.
    pub stats: QueryStats,
}

/// What a column's table run answered ([`Pinned::count_run`]).
struct FromRun {
    /// The rows matching in all of `done` (indexes in `t.files`): each of those files is done.
    count: u64,
    done: Vec<usize>,
    /// Per file (by index in `t.files`), its answer where a run covers it.
    per_file: Vec<Option<Positions>>,
}

/// One predicate column's index plan and its entries by file.
struct ColumnIndex<'m> {
    plan: IndexPlan<'m>,
    /// Position of the column in the predicate.
    column: usize,
    by_file: HashMap<u64, &'m IndexFileEntry>,
}

impl Pinned<'_> {
    /// Counts the live rows of `table` matching `q.conditions` (`q.columns` and `q.limit` do
    /// not apply; `q.verify_files` also confirms files counted as zero). Errors as
    /// [`Pinned::query`]; a missing, rejected or drifted index never fails a count.
    pub async fn count(&self, table: &str, q: &Query) -> Result<CountResult> {
        let (o0, d0, h0) = (self.overlay.stats(), self.data.stats(), self.cache.hits());
        let t = self.manifest.table(table)?;
        let pred = Predicate::bind(t, &q.conditions)?;
        let mut stats = QueryStats::default();
        let mut count = 0u64;
        let columns = if self.scan_only {
            None
        } else if pred.columns.is_empty() {
            Some(vec![])
        } else {
            self.column_indexes(t, &pred).await?
        };
        if let Some(cols) = columns.as_ref().filter(|c| !c.is_empty()) {
            let first = &cols[0].plan;
            stats.index = Some(first.index.name.clone());
            stats.index_kind = Some(first.index.kind().to_string());
            stats.index_columns = cols
                .iter()
                .map(|c| pred.columns[c.column].name.clone())
                .collect();
            stats.keys = cols.iter().map(|c| c.plan.ranges.len() as u64).sum();
        }
        // Some column without an index naming rows: a bloom index may still prune files.
        let bloom = match &columns {
            None => self.bloom_prune(t, &pred).await?,
            Some(_) => None,
        };
        // Columns whose index has a bitmap run: the files it covers answered by one probe
        // (under `verify` each file is confirmed on its own instead).
        let mut ran: Vec<Vec<Option<Positions>>> = vec![];
        let mut done = vec![false; t.files.len()];
        if let Some(cols) = columns
            .as_deref()
            .filter(|c| !c.is_empty() && !q.verify_files)
        {
            for c in cols {
                let r = self.count_run(t, &pred, cols.len(), c, &mut stats).await?;
                if c.column == cols[0].column {
                    stats.files_by_run +=
                        (r.done.len() + r.per_file.iter().filter(|p| p.is_some()).count()) as u64;
                }
                count += r.count;
                stats.files += r.done.len() as u64;
                stats.files_by_index += r.done.len() as u64;
                for i in r.done {
                    done[i] = true;
                }
                ran.push(r.per_file);
            }
        }
        let mut pruned = vec![false; t.files.len()];
        if let Some(b) = bloom {
            if let Some(ix) = b.index {
                stats.index = Some(ix.name.clone());
                stats.index_kind = Some(ix.kind().to_string());
            }
            stats.rejections.extend(b.rejections);
            stats.files_by_run += b.by_run;
            pruned = b.pruned;
        }
        // At most FILE_WINDOW files left to count in flight (the files a run answered take no
        // place in a window: what is left costs one round per FILE_WINDOW files, wherever they
        // are).
        let todo: Vec<usize> = (0..t.files.len()).filter(|&i| !done[i]).collect();
        for window in todo.chunks(FILE_WINDOW) {
            let answers = futures::future::join_all(window.iter().map(|&i| (i, &t.files[i])).map(
                |(i, f)| {
                    let from_run: Vec<Option<Positions>> = ran
                        .iter_mut()
                        .map(|r| r.get_mut(i).and_then(Option::take))
                        .collect();
                    self.count_file(t, &pred, columns.as_deref(), f, q, pruned[i], from_run)
                },
            ))
            .await;
            for a in answers {
                let (n, st) = a?;
                count += n;
                stats.add(st);
            }
        }
        self.io_since(&mut stats, (o0, d0, h0));
        Ok(CountResult { count, stats })
    }

    /// For every predicate column, the ready one-column index that serves it (a bitmap
    /// before an ordered one, then by name), its lists loaded; `None` when a column has none.
    async fn column_indexes<'m>(
        &self,
        t: &'m TableManifest,
        pred: &Predicate,
    ) -> Result<Option<Vec<ColumnIndex<'m>>>> {
        let mut out = Vec::with_capacity(pred.columns.len());
        for (i, c) in pred.columns.iter().enumerate() {
            let one = Predicate {
                columns: vec![c.clone()],
            };
            let mut best: Option<IndexPlan<'m>> = None;
            for ix in t.indexes.iter().filter(|ix| {
                ix.state.serves()
                    && ix.kind().has_positions()
                    && ix.fields.as_slice() == [c.field_id]
            }) {
                let Some(p) = plan_index(ix, &one)? else {
                    continue;
                };
                let rank = |p: &IndexPlan| (!p.index.kind().answers().counts, p.index.name.clone());
                if best.as_ref().is_none_or(|b| rank(&p) < rank(b)) {
                    best = Some(p);
                }
            }
            let Some(plan) = best else {
                return Ok(None);
            };
            self.load_part(t, plan.index).await?;
            let by_file = plan
                .index
                .file_entries()
                .iter()
                .map(|e| (e.file_id, e))
                .collect();
            out.push(ColumnIndex {
                plan,
                column: i,
                by_file,
            });
        }
        Ok(Some(out))
    }

    /// The answers of column `c`'s table run (a bitmap run: [`RunLayout::Stacked`]) for the
    /// files it covers, by index in `t.files` — how many rows match, or their positions when
    /// the file has deleted rows or the predicate other columns (`columns`); `None` for the
    /// files it does not cover, all `None` (reported) when the run is unusable. When every
    /// file of the run is covered and only how many is asked: their total.
    async fn count_run(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        columns: usize,
        c: &ColumnIndex<'_>,
        stats: &mut QueryStats,
    ) -> Result<FromRun> {
        let mut out = FromRun {
            count: 0,
            done: vec![],
            per_file: (0..t.files.len()).map(|_| None).collect(),
        };
        let ix = c.plan.index;
        let Some(kind) = crate::index::kind::of(ix.kind()) else {
            return Ok(out);
        };
        if kind.run() != Some(RunLayout::Stacked) {
            return Ok(out);
        }
        // Every run (tier) answering a file, each file by the newest covering it; their
        // ranges read in one round.
        let runs = ix.table_runs();
        let coverages = t.tier_coverage(&runs);
        let mut asks = Vec::new();
        for (run, coverage) in runs.iter().zip(coverages) {
            if coverage.iter().all(Option::is_none) {
                continue;
            }
            let mut want = Vec::with_capacity(coverage.len());
            for i in &coverage {
                want.push(match i {
                    None => RunWant::Skip,
                    Some(i) => {
                        let f = &t.files[*i];
                        if columns > 1 || f.deleted()?.is_some() {
                            RunWant::Set {
                                rows: f.record_count,
                            }
                        } else {
                            RunWant::Count
                        }
                    }
                });
            }
            asks.push((*run, coverage, want));
        }
        let keep = crate::read::predicate::column_keep(ix, &pred.columns[c.column]);
        let probe = KeyProbe {
            ranges: &c.plan.ranges,
            keep: Some(&keep),
        };
        let got = futures::future::join_all(asks.iter().map(|(run, _, want)| async move {
            let blob = self.blobs().at(self.run_blob(run));
            kind.run_positions(&blob, probe, want)
                .await
                .map_err(|err| blob.reject(err))
        }))
        .await;
        for ((run, coverage, want), got) in asks.into_iter().zip(got) {
            match got {
                Ok(RunPositions::Total(n)) if want.iter().all(|w| *w == RunWant::Count) => {
                    out.count += n;
                    out.done.extend(coverage.into_iter().flatten());
                }
                Ok(RunPositions::PerFile(answers)) if answers.len() == coverage.len() => {
                    for (i, a) in coverage.iter().zip(answers) {
                        if let Some(i) = i {
                            out.per_file[*i] = a;
                        }
                    }
                }
                Ok(_) => {}
                Err(reason) => {
                    let r = crate::read::lookup::run_rejected(Some(run), ix.index_id, reason);
                    stats.rejections.push(r);
                }
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    async fn count_file(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        columns: Option<&[ColumnIndex<'_>]>,
        f: &FileEntry,
        q: &Query,
        bloom_excluded: bool,
        from_run: Vec<Option<Positions>>,
    ) -> Result<(u64, QueryStats)> {
        let mut st = QueryStats {
            files: 1,
            ..Default::default()
        };
        if bloom_excluded {
            // A bloom filter excludes every value: confirmed by a HEAD under `verify`.
            let unchanged = !q.verify_files || {
                let meta = self.data.head(&Location::new(t.data_location(f))).await?;
                Self::drift(f, &meta, None, q).is_none()
            };
            if unchanged {
                st.files_pruned = 1;
                return Ok((0, st));
            }
        }
        if let Some(cols) = columns {
            match self.count_by_index(t, pred, cols, f, from_run).await? {
                Ok(n) => {
                    // The published manifest's facts are trusted, as `query` trusts them for
                    // "no rows": a HEAD confirms the file only under `verify`.
                    if !q.verify_files {
                        if n == 0 {
                            st.files_pruned = 1;
                        } else {
                            st.files_by_index = 1;
                        }
                        return Ok((n, st));
                    }
                    let loc = Location::new(t.data_location(f));
                    let meta = self.data.head(&loc).await?;
                    match Self::drift(f, &meta, None, q) {
                        None => {
                            if n == 0 {
                                st.files_pruned = 1;
                            } else {
                                st.files_by_index = 1;
                            }
                            return Ok((n, st));
                        }
                        Some(detail) => {
                            st.drifted.push(f.path.clone());
                            // Without `where` no index was involved: the file is scanned.
                            if let Some(c) = cols.first() {
                                st.files_rejected += 1;
                                st.rejections.push(Rejection {
                                    data_file: f.path.clone(),
                                    index_id: Some(c.plan.index.index_id),
                                    bundle_path: c
                                        .by_file
                                        .get(&f.file_id)
                                        .map(|e| e.lineage.bundle_path.clone()),
                                    reason: RejectReason::Drifted { detail },
                                });
                            }
                        }
                    }
                }
                Err(r) => {
                    st.files_rejected += 1;
                    st.rejections.push(r);
                }
            }
        }
        let loc = Location::new(t.data_location(f));
        let (md, meta, cached) = self.file_metadata(f, &loc).await?;
        let rows = md.file_metadata().num_rows().max(0) as u64;
        if Self::drift(f, &meta, Some(rows), q).is_some() && !st.drifted.contains(&f.path) {
            st.drifted.push(f.path.clone());
        }
        let loc = reads_at(loc, &meta, q.pin_versions || cached);
        let hits = self.scan_file(pred, f, md, loc, st).await?;
        Ok((hits.positions.len() as u64, hits.stats))
    }

    /// The file's count from its indexes, or why they cannot give it (the file is scanned).
    async fn count_by_index(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        cols: &[ColumnIndex<'_>],
        f: &FileEntry,
        mut from_run: Vec<Option<Positions>>,
    ) -> Result<Result<u64, Rejection>> {
        if cols.is_empty() {
            // No `where`: the live rows the manifest records.
            return Ok(Ok(f.live_rows()?));
        }
        let deleted = f.deleted()?;
        let mut sets: Vec<RoaringTreemap> = Vec::with_capacity(cols.len());
        for (n, c) in cols.iter().enumerate() {
            // The column's table run covers the file: its answer, as the file's blob would
            // give it.
            match from_run.get_mut(n).and_then(Option::take) {
                Some(Positions::Count(k)) => return Ok(Ok(k)),
                Some(Positions::Set(set)) if set.is_empty() => return Ok(Ok(0)),
                Some(Positions::Set(set)) => {
                    sets.push(set);
                    continue;
                }
                None => {}
            }
            let ix = c.plan.index;
            let reject = |reason| Rejection {
                data_file: f.path.clone(),
                index_id: Some(ix.index_id),
                bundle_path: c
                    .by_file
                    .get(&f.file_id)
                    .map(|e| e.lineage.bundle_path.clone()),
                reason,
            };
            let Some(e) = c.by_file.get(&f.file_id) else {
                return Ok(Err(reject(RejectReason::Missing)));
            };
            if let GateDecision::Reject(r) = e.gate(f, t.snapshot) {
                return Ok(Err(r));
            }
            let Some(kind) = crate::index::kind::of(ix.kind()) else {
                return Ok(Err(reject(RejectReason::Corrupt {
                    message: format!("a {} index names no key's rows", ix.kind()),
                })));
            };
            let keep = crate::read::predicate::column_keep(ix, &pred.columns[c.column]);
            let probe = KeyProbe {
                ranges: &c.plan.ranges,
                keep: Some(&keep),
            };
            let blob = self.blobs().at(BlobRef::of(e));
            let only_count = cols.len() == 1 && deleted.is_none();
            let set = match kind.positions(&blob, probe, only_count).await {
                Ok(None) => return Ok(Ok(0)),
                Ok(Some(Positions::Count(n))) => return Ok(Ok(n)),
                Ok(Some(Positions::Set(set))) => set,
                Err(err) => return Ok(Err(reject(blob.reject(err)))),
            };
            if set.is_empty() {
                return Ok(Ok(0));
            }
            sets.push(set);
        }
        let mut it = sets.into_iter();
        let mut acc = it.next().unwrap_or_default();
        for s in it {
            acc &= s;
        }
        if let Some(d) = &deleted {
            acc -= d;
        }
        Ok(Ok(acc.len()))
    }
}
