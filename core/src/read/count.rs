//! `count(table, { where })`: how many live rows match, answered from indexes alone when every
//! predicate column has a ready one-column index (bitmap or ordered), else by scanning.
//!
//! Per data file: every column's index must pass the read gate for the file. Then each
//! column's matching positions come from its index — a bitmap's directory alone when the
//! file has one column and no deleted rows (the selected values' cardinalities), else the
//! bitmaps or ordered entries as position sets — and the sets intersect, deleted rows leave,
//! and what remains is counted. A file with a non-zero count is confirmed with a HEAD (its
//! size and, when versions are pinned, its version against the manifest) — no Parquet byte is
//! read; a file whose index is missing, rejected or drifted is scanned, so the count always
//! equals a scan's. Without `where`, a file's count is the live rows the manifest records,
//! confirmed by the same HEAD.

use std::collections::HashMap;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::formats::lineage::{GateDecision, RejectReason, Rejection};
use crate::formats::manifest::{FileEntry, IndexFileEntry, TableManifest};
use crate::index::access::{KeyProbe, Positions};
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
        let mut pruned = vec![false; t.files.len()];
        if let Some(b) = bloom {
            if let Some(ix) = b.index {
                stats.index = Some(ix.name.clone());
                stats.index_kind = Some(ix.kind().to_string());
            }
            stats.rejections.extend(b.rejections);
            pruned = b.pruned;
        }
        for (w, window) in t.files.chunks(FILE_WINDOW).enumerate() {
            let answers = futures::future::join_all(window.iter().enumerate().map(|(j, f)| {
                let excluded = pruned[w * FILE_WINDOW + j];
                self.count_file(t, &pred, columns.as_deref(), f, q, excluded)
            }))
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

    async fn count_file(
        &self,
        t: &TableManifest,
        pred: &Predicate,
        columns: Option<&[ColumnIndex<'_>]>,
        f: &FileEntry,
        q: &Query,
        bloom_excluded: bool,
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
            match self.count_by_index(t, pred, cols, f).await? {
                Ok(n) => {
                    if n == 0 && !q.verify_files {
                        st.files_pruned = 1;
                        return Ok((0, st));
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
    ) -> Result<Result<u64, Rejection>> {
        if cols.is_empty() {
            // No `where`: the live rows the manifest records (confirmed by the HEAD).
            return Ok(Ok(f.live_rows()?));
        }
        let deleted = f.deleted()?;
        let mut sets: Vec<RoaringTreemap> = Vec::with_capacity(cols.len());
        for c in cols {
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
            let cp = &pred.columns[c.column];
            let Some(kind) = crate::index::kind::of(ix.kind()) else {
                return Ok(Err(reject(RejectReason::Corrupt {
                    message: format!("a {} index names no key's rows", ix.kind()),
                })));
            };
            // The plan's ranges are a superset (exclusive bounds widen): each key is checked
            // against the column's conditions.
            let keep = |k: &[u8]| {
                ix.key
                    .decode(k)
                    .map(|v| cp.matches(&v[0]))
                    .map_err(|e| e.to_string())
            };
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
