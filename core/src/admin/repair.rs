//! The repair queue (native): files whose index a query rejected, kept in the catalog under
//! `q/{index}/{file}` until the next build of that index drains them first.
//!
//! A query never fails because an index was rejected — it scans the file — but the rejection
//! means the index no longer accelerates that file. [`Overlay::query`] queues it (once per
//! process per file and index; a failure to queue is logged, never raised), and
//! [`Overlay::build_step`] (hence `build()`) drains the queue before choosing work:
//!
//! - `drifted` (the file's bytes differ from the recorded facts): the file is re-checked as
//!   `refresh()` would (SHA-256 confirms the change; new facts, fresh row ids), so the read
//!   gate rejects the old index and the step rebuilds it;
//! - `blob_checksum`, `corrupt`, `missing`, `wrong_file`, `unsupported_format` (the catalog's
//!   index record is unusable): the record is withdrawn, so the file is unindexed and the
//!   step rebuilds it;
//! - `checksum`, `record_count` (the catalog already has new facts; the index is merely not
//!   rebuilt yet): nothing to undo — the step rebuilds it anyway;
//! - `verify` ([`Overlay::verify`] found entries missing or mismatched): the file is
//!   re-hashed (a rewrite its size and version hide gets new facts) and the record withdrawn,
//!   so the step rebuilds it from the rows as they are.
//!
//! Drifted files are re-checked *deeply* (every byte hashed): a query finds drift by reading
//! rows that no longer hold the indexed values, which a same-size in-place rewrite with its
//! modification time restored shows no other way.
//!
//! A rejected table run (file `*`, id 0, named by its bundle path) is withdrawn — that run
//! alone, the others keep answering their files — and formed again at the end of the build.
//! The files whose blobs it held (dropped, decision 71) lose their records with it, so the
//! step derives them again as files no run covers. `verify` queues a run this way too when
//! a file's rebuild differs from what a run holds of it.
//! Repaired files go first in the step's order. `future_snapshot` rejections are not queued:
//! they mean the reader is behind the index, not that the index is wrong.

use serde::{Deserialize, Serialize};

use crate::admin::catalog::*;
use crate::admin::overlay::Overlay;
use crate::error::Result;
use crate::formats::lineage::{RejectReason, Rejection};
use crate::formats::manifest::{IndexFileEntry, Manifest};

/// One queued repair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairEntry {
    pub index_id: u64,
    pub file_id: u64,
    /// The data file's path; `*` for a table run.
    pub path: String,
    /// For a table run: the damaged run's bundle path, the run its repair withdraws (none:
    /// every run of the index, as entries queued before runs were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The rejection's reason code (`drifted`, `blob_checksum`, …).
    pub reason: String,
    /// The rejection, as the warning event said it.
    pub message: String,
}

impl Overlay {
    /// Queues the files of `table` behind `rejections` (see the module docs).
    pub(crate) async fn enqueue_repairs(
        &self,
        m: &Manifest,
        table: &str,
        rejections: &[Rejection],
    ) -> Result<()> {
        let t = m.table(table)?;
        let mut todo = Vec::new();
        for r in rejections {
            if matches!(r.reason, RejectReason::FutureSnapshot { .. }) {
                continue;
            }
            let Some(index_id) = r.index_id else {
                continue;
            };
            // A table run (`*`) is file 0, named by its bundle: its repair withdraws that run
            // (every run when the rejection names none), and the build forms runs again.
            let run = match r.data_file == "*" {
                true => r.bundle_path.clone(),
                false => None,
            };
            let (file_id, path) = if r.data_file == "*" {
                (0, "*".to_string())
            } else {
                match t.files.iter().find(|f| f.path == r.data_file) {
                    Some(f) => (f.file_id, f.path.clone()),
                    None => continue,
                }
            };
            if self
                .queued
                .lock()
                .expect("repair set")
                .insert((index_id, file_id))
            {
                todo.push(RepairEntry {
                    index_id,
                    file_id,
                    path,
                    run,
                    reason: r.reason.code().to_string(),
                    message: r.to_string(),
                });
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        let txn = self.catalog.begin()?;
        for e in &todo {
            txn.put(&repair_key(e.index_id, e.file_id), e)?;
        }
        if let Err(err) = txn.commit().await {
            let mut q = self.queued.lock().expect("repair set");
            for e in &todo {
                q.remove(&(e.index_id, e.file_id));
            }
            return Err(err);
        }
        self.metrics.record_repairs_queued(todo.len() as u64);
        Ok(())
    }

    /// The queued repairs of `index` of `table`.
    pub async fn repairs(&self, table: &str, index: &str) -> Result<Vec<RepairEntry>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, index).await?;
        t.scan(&repair_prefix(ix.index_id)).await
    }

    /// Carries out and removes the queued repairs of `index`; returns the files repaired
    /// (their builds go first).
    pub(crate) async fn drain_repairs(&self, table: &str, index: &str) -> Result<Vec<u64>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let ix = self.catalog.index(&t, &tr, index).await?;
        let entries: Vec<RepairEntry> = t.scan(&repair_prefix(ix.index_id)).await?;
        drop(t);
        if entries.is_empty() {
            return Ok(vec![]);
        }
        let drifted: Vec<u64> = entries
            .iter()
            .filter(|e| e.file_id != 0 && (e.reason == "drifted" || e.reason == "verify"))
            .map(|e| e.file_id)
            .collect();
        if !drifted.is_empty() {
            // A file that can no longer join the table (a dropped indexed column) stays as it
            // is: the gate keeps rejecting it and `refresh()` reports why.
            if let Err(e) = self.refresh_files(table, Some(&drifted), true).await {
                tracing::warn!(target: "skerry::repair", "re-checking drifted files: {e}");
            }
        }
        let t = self.catalog.begin()?;
        let mut withdrawn = false;
        for e in &entries {
            if e.file_id == 0 {
                // Only the damaged run; the others keep answering their files.
                match &e.run {
                    Some(run) => {
                        let runs = t.runs(ix.index_id).await?;
                        let keep: Vec<_> = runs
                            .iter()
                            .filter(|r| &r.bundle_path != run)
                            .cloned()
                            .collect();
                        if keep.len() < runs.len() {
                            t.put_runs(ix.index_id, &keep).await?;
                        }
                    }
                    None => t.delete_runs(ix.index_id).await?,
                }
                withdrawn = true;
            } else if matches!(
                e.reason.as_str(),
                "blob_checksum"
                    | "corrupt"
                    | "missing"
                    | "wrong_file"
                    | "unsupported_format"
                    | "verify"
            ) {
                // A record whose blob a run holds (decision 71) was rejected by a reader of
                // an older manifest, whose bundle is gone: the run answers the file.
                let key = artifact_key(ix.index_id, e.file_id);
                let held = e.reason != "verify"
                    && t.get::<IndexFileEntry>(&key)
                        .await?
                        .is_some_and(|a| a.in_run);
                if !held {
                    t.delete(&key)?;
                    withdrawn = true;
                }
            }
            t.delete(&repair_key(ix.index_id, e.file_id))?;
        }
        if withdrawn {
            t.delete(&certificate_key(ix.index_id))?;
            t.bump_version().await?;
        }
        t.commit().await?;
        {
            let mut q = self.queued.lock().expect("repair set");
            for e in &entries {
                q.remove(&(e.index_id, e.file_id));
            }
        }
        self.invalidate();
        self.metrics.record_repairs_drained(entries.len() as u64);
        tracing::info!(target: "skerry::repair", index = %ix.name, files = entries.len(), "repairs drained");
        Ok(entries.into_iter().map(|e| e.file_id).collect())
    }
}
