//! `explain(table, query)`: the plan a `query` would follow, file by file, without reading a
//! data file or an index block — which index and why (or why none), which files the index
//! answers, which it prunes by key bounds, which are scanned and why, and the requests and
//! sequential round trips to expect with what the read handle has cached now.
//!
//! It may read index *directories* (as the query would, and cached for it) to estimate how
//! many rows the index names: that estimate is what decides between the index and a scan
//! ([`crate::read::plan::SCAN_SHARE`]).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::formats::lineage::{GateDecision, ReadGate};
use crate::formats::manifest::IndexFileEntry;
use crate::read::lookup::{merged_runs, reaches, Pinned};
use crate::read::plan::{choose, Query};
use crate::read::predicate::Predicate;

/// What a query would do with one data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FileAction {
    /// Answered by the index's table-wide run.
    Run,
    /// Answered by the file's own index blob.
    Index,
    /// Skipped: the index's key bounds for the file exclude every key.
    Prune,
    /// Scanned (statistics and page index prune inside it).
    Scan,
}

/// One file of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePlan {
    pub file: String,
    pub action: FileAction,
    /// Why (for scans and prunes; rejections name the read gate's reason code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the file's metadata (footer + page index) is in the read cache.
    pub metadata_cached: bool,
}

/// The plan of a query.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explain {
    /// The index the query would use (`None`: every file is scanned).
    pub index: Option<String>,
    /// Its kind (`ordered`, `bitmap`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_kind: Option<String>,
    /// Why that index, or why none.
    pub reason: String,
    /// The index columns that narrow the probe, the key prefixes probed, and the predicate
    /// columns checked on fetched rows.
    pub index_columns: Vec<String>,
    pub keys: u64,
    pub residual: Vec<String>,
    /// Upper estimate of the index entries the probe names, from directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_rows: Option<u64>,
    pub files: Vec<FilePlan>,
    /// Requests to the overlay (directories not cached, block reads) and to data files
    /// (metadata not cached, page reads) to expect, and how many sequential round trips.
    pub index_requests: u64,
    pub data_requests: u64,
    pub round_trips: u64,
}

impl Pinned<'_> {
    /// The plan of `q` over `table` (see the module docs). Errors as [`Pinned::query`] for
    /// the table, columns and values.
    pub async fn explain(&self, table: &str, q: &Query) -> Result<Explain> {
        let t = self.manifest.table(table)?;
        let pred = Predicate::bind(t, &q.conditions)?;
        if let Some(cols) = &q.columns {
            for c in cols {
                if !t.fields.iter().any(|f| f.name == *c) {
                    return Err(Error::NotFound {
                        kind: "column",
                        name: format!("{}.{c}", t.name),
                    });
                }
            }
        }
        let mut plan = if self.scan_only {
            None
        } else {
            choose(t, &pred)?
        };
        if let Some(p) = &plan {
            self.load_part(t, p.index).await?;
        }
        let mut reason = match (&plan, self.scan_only) {
            (_, true) => "scan-only mode".to_string(),
            (None, _) => "no ready index has a leading column the predicate fixes or ranges".into(),
            (Some(p), _) => format!(
                "{} serves {} leading column(s) ({} by equality{})",
                p.index.name,
                p.eq_columns + usize::from(p.range_column),
                p.eq_columns,
                if p.range_column { ", then a range" } else { "" }
            ),
        };
        let mut estimated_rows = None;
        let mut index_requests = 0u64;
        if let Some(p) = &plan {
            let (estimate, declined) = self.weigh(t, p, q, q.limit.is_none()).await;
            estimated_rows = estimate;
            if let Some(why) = declined {
                reason = why;
                plan = None;
            }
        }
        let (index_columns, keys, residual) = match &plan {
            Some(p) => (
                p.key_columns
                    .iter()
                    .take(p.eq_columns + usize::from(p.range_column))
                    .flatten()
                    .map(|c| pred.columns[*c].name.clone())
                    .collect(),
                p.ranges.len() as u64,
                p.residual
                    .iter()
                    .map(|c| pred.columns[*c].name.clone())
                    .collect(),
            ),
            None => (vec![], 0, vec![]),
        };
        // The runs answering files (each file by the newest covering it).
        let runs = plan
            .as_ref()
            .map(|p| merged_runs(p.index))
            .unwrap_or_default();
        let coverage = t.tier_coverage(&runs);
        let mut covered = vec![false; t.files.len()];
        for i in coverage.iter().flatten().flatten() {
            covered[*i] = true;
        }
        let by_file: std::collections::HashMap<u64, &IndexFileEntry> = plan
            .as_ref()
            .map(|p| {
                p.index
                    .file_entries()
                    .iter()
                    .map(|e| (e.file_id, e))
                    .collect()
            })
            .unwrap_or_default();
        let mut files = Vec::with_capacity(t.files.len());
        let (mut blob_reads, mut meta_reads, mut page_reads) = (0u64, 0u64, 0u64);
        let mut dirs_to_read = 0u64;
        for (i, f) in t.files.iter().enumerate() {
            let loc = t.data_location(f);
            let metadata_cached = self.cache.has_metadata(&loc, f);
            let entry: Option<&IndexFileEntry> = by_file.get(&f.file_id).copied();
            let (action, why) = match &plan {
                None => (FileAction::Scan, None),
                Some(p) => {
                    let reachable = entry.is_none_or(|e| reaches(&e.ordered, &p.ranges));
                    if covered[i] {
                        if reachable {
                            (FileAction::Run, None)
                        } else {
                            (
                                FileAction::Prune,
                                Some("the index's key bounds exclude every key".into()),
                            )
                        }
                    } else {
                        match entry {
                            None => (
                                FileAction::Scan,
                                Some("no index entry for the file (not built yet)".into()),
                            ),
                            Some(e) => match ReadGate::check(
                                &f.path,
                                Some(&e.lineage),
                                Some(&f.facts()),
                                t.snapshot,
                            ) {
                                GateDecision::Reject(r) => {
                                    (FileAction::Scan, Some(format!("{}: {r}", r.reason.code())))
                                }
                                GateDecision::Accept if !reachable => (
                                    FileAction::Prune,
                                    Some("the index's key bounds exclude every key".into()),
                                ),
                                GateDecision::Accept => {
                                    let cached = self.cache.has_directory(
                                        &e.lineage.bundle_path,
                                        e.lineage.blob_offset,
                                        &e.ordered.directory_sha256,
                                    );
                                    dirs_to_read += u64::from(!cached);
                                    blob_reads += 1;
                                    (FileAction::Index, None)
                                }
                            },
                        }
                    }
                }
            };
            if action != FileAction::Prune {
                meta_reads += u64::from(!metadata_cached);
                page_reads += 1;
            }
            files.push(FilePlan {
                file: f.path.clone(),
                action,
                reason: why,
                metadata_cached,
            });
        }
        let mut run_used = false;
        for (run, cov) in runs.iter().zip(&coverage) {
            let used = cov
                .iter()
                .flatten()
                .any(|i| files[*i].action == FileAction::Run);
            if !used {
                continue;
            }
            run_used = true;
            let dir_cached = run.directory.is_some()
                || self.cache.has_directory(
                    &run.bundle_path,
                    run.blob_offset,
                    &run.ordered.directory_sha256,
                );
            index_requests += u64::from(!dir_cached) + 1;
        }
        index_requests += dirs_to_read + blob_reads;
        // Directories, then blocks; metadata read alongside the blocks when the query
        // prefetches it, else after them; then pages.
        let index_trips = u64::from(index_requests > 0)
            + u64::from(dirs_to_read > 0 || (run_used && index_requests > 1));
        let round_trips = index_trips + u64::from(meta_reads > 0) + u64::from(page_reads > 0);
        // No index naming rows: a bloom index may prune files (its filters are read by the
        // query, one stripe per value, so the plan cannot say which).
        let bloom = match (&plan, self.scan_only) {
            (None, false) => crate::read::bloom::bloom_candidate(t, &pred)?.map(|(ix, _)| ix),
            _ => None,
        };
        if let Some(ix) = bloom {
            reason = format!(
                "{}: a bloom filter prunes the files whose filter excludes every value; the rest are scanned",
                ix.name
            );
            for f in files.iter_mut().filter(|f| f.action == FileAction::Scan) {
                f.reason
                    .get_or_insert_with(|| "unless its bloom filter excludes every value".into());
            }
            index_requests += 1;
        }
        Ok(Explain {
            index: plan
                .as_ref()
                .map(|p| p.index.name.clone())
                .or(bloom.map(|ix| ix.name.clone())),
            index_kind: plan
                .as_ref()
                .map(|p| p.index.kind().to_string())
                .or(bloom.map(|ix| ix.kind().to_string())),
            reason,
            index_columns,
            keys,
            residual,
            estimated_rows,
            files,
            index_requests,
            data_requests: meta_reads + page_reads,
            round_trips,
        })
    }
}
