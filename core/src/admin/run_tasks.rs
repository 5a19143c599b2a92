//! Run tasks: a tier step's run written by a fan-out worker (`docs/fanout.md`, "Run tasks").
//!
//! The committer plans them ([`Overlay::plan_runs`]: one per index whose tier rule calls for a
//! step, signed like a file's task), any [`BundleBuilder`] writes the run
//! ([`BundleBuilder::build_run`]: reads the runs it merges and the delta's blobs from the
//! overlay store, writes one run bundle, no catalog), and the committer takes the step
//! ([`Overlay::commit_runs`]) only while the index's runs are still the ones the task was
//! planned against — a step another build took meanwhile refuses the receipt, and the run
//! object is left to vacuum. The run a worker writes is the run `build()` writes from the
//! same inputs (the same writer, [`RunWriter`]).

use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::admin::catalog::*;
use crate::admin::fanout::{check_bundle_path, check_format, BundleBuilder, Refused, TASK_FORMAT};
use crate::admin::overlay::{store_err, Overlay, RUN_PART_BYTES};
use crate::admin::runs::RunWriter;
use crate::error::{Error, Result};
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexState, TableRun};

/// The `kind` of a run task and of its receipt (a file's task has none).
pub const RUN_KIND: &str = "run";

/// One tier step's run, planned by the committer ([`Overlay::plan_runs`]), written by any
/// [`BundleBuilder`] ([`BundleBuilder::build_run`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTask {
    /// [`TASK_FORMAT`].
    pub format: u32,
    /// [`RUN_KIND`]: tells a run task from a file's.
    pub kind: String,
    pub table: TableRecord,
    pub index: IndexRecord,
    /// The index's runs when planned, oldest first: the commit takes the step only while
    /// they are still these.
    pub runs: Vec<TableRun>,
    /// Indexes into `runs`: those kept as they are and those merged into the new run.
    pub keep: Vec<usize>,
    pub merge: Vec<usize>,
    /// The files the new run covers (the merged runs' files they still answer and the
    /// delta's, in table order) and their artifacts, as the gate accepted them when planned.
    pub files: Vec<FileEntry>,
    pub artifacts: Vec<IndexFileEntry>,
    /// `bundles/{tableId}/run-{indexId}-g{generation}-{plan}.puffin`.
    pub bundle_path: String,
    /// Ordered-index block size (256 B – 16 MiB).
    pub block_bytes: u64,
    /// The plan's token (1–48 lowercase hex digits), the bundle name's last part.
    pub plan: String,
    /// HMAC-SHA256 (hex) of the task without this field, under the overlay's task key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// What a [`BundleBuilder`] did with a [`RunTask`]: the run written (its record, for the
/// commit), or `None` when it cannot be made (an input damaged or of another layout: the
/// runs and blobs there keep answering).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReceipt {
    pub format: u32,
    /// [`RUN_KIND`].
    pub kind: String,
    pub task: RunTask,
    pub run: Option<TableRun>,
}

/// What [`Overlay::commit_runs`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCommitReport {
    /// Run bundles committed (each its index's new run).
    pub committed: Vec<String>,
    /// Receipts not committed, by run bundle, and why (plan again).
    pub refused: Vec<Refused>,
}

impl RunTask {
    /// The task's MAC under `key` (over its JSON without [`RunTask::mac`]).
    pub(crate) fn mac_under(&self, key: &[u8]) -> String {
        let mut unsigned = self.clone();
        unsigned.mac = None;
        crate::admin::fanout::mac_of(
            &serde_json::to_vec(&unsigned).expect("a task serializes"),
            key,
        )
    }

    /// Refuses (`E_INVALID`) a task whose shape or paths do not hold, before anything is read:
    /// its kind and format; the bundle it writes named as planned, in the table's bundle
    /// folder; the runs and blobs it reads in that folder too; its step's indexes in range.
    pub(crate) fn check(&self) -> Result<()> {
        check_format(self.format)?;
        let bad = |m: String| Err(Error::Invalid(format!("run task: {m}")));
        if self.kind != RUN_KIND {
            return bad(format!("kind must be {RUN_KIND:?}"));
        }
        if !(1..=48).contains(&self.plan.len())
            || !self
                .plan
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return bad("plan must be 1 to 48 lowercase hex digits".into());
        }
        let folder = format!("bundles/{}/", self.table.table_id);
        let named = self
            .bundle_path
            .strip_prefix(&format!("{folder}run-{}-g", self.index.index_id))
            .and_then(|rest| rest.strip_suffix(&format!("-{}.puffin", self.plan)))
            .is_some_and(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
        if !named {
            return bad(format!(
                "bundle {:?} is not a run bundle of index {} in {folder}",
                self.bundle_path.chars().take(200).collect::<String>(),
                self.index.index_id
            ));
        }
        let inside = |p: &str| check_bundle_path("run task", p, self.table.table_id);
        for r in &self.runs {
            inside(&r.bundle_path)?;
        }
        for a in &self.artifacts {
            inside(&a.lineage.bundle_path)?;
        }
        if self.files.is_empty() || self.files.len() != self.artifacts.len() {
            return bad("files and artifacts must be non-empty and of one length".into());
        }
        let mut seen = vec![false; self.runs.len()];
        for &i in self.keep.iter().chain(&self.merge) {
            if i >= self.runs.len() || std::mem::replace(&mut seen[i], true) {
                return bad("keep and merge must name distinct runs".into());
            }
        }
        if !(256..=1 << 24).contains(&self.block_bytes) {
            return bad("blockBytes out of range".into());
        }
        Ok(())
    }
}

impl Overlay {
    /// The run tasks of `table` (or of its index `index`): one per ready index whose tier
    /// rule calls for a run — the files no run covers written as one, runs merged by size
    /// (`docs/ordered-index.md`, "Table runs") — for [`BundleBuilder::build_run`] anywhere.
    /// Plan them after the file receipts are committed (`commit_build_with` and `runs:
    /// false`, or the runs are taken by the commit itself). Nothing is written but, the first
    /// time, the overlay's task key.
    pub async fn plan_runs(&self, table: &str, index: Option<&str>) -> Result<Vec<RunTask>> {
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let only = match index {
            Some(name) => Some(self.catalog.index(&t, &tr, name).await?.index_id),
            None => None,
        };
        drop(t);
        let (tr, steps) = self.due_tiers(&tr, only).await?;
        let plan = crate::admin::build::attempt_token();
        let key = self.task_key().await?;
        let mut tasks = Vec::new();
        for (ix, runs, step) in steps {
            if step.inputs.is_empty() {
                continue; // only drops runs that answer nothing: the next commit or build does
            }
            let (files, artifacts) = step.inputs.iter().cloned().unzip();
            let mut task = RunTask {
                format: TASK_FORMAT,
                kind: RUN_KIND.into(),
                bundle_path: crate::admin::runs::run_bundle_name(&tr, &ix, &runs, &plan),
                table: tr.clone(),
                index: ix,
                runs,
                keep: step.step.keep.clone(),
                merge: step.step.merge.clone(),
                files,
                artifacts,
                block_bytes: self.block_bytes as u64,
                plan: plan.clone(),
                mac: None,
            };
            task.mac = Some(task.mac_under(&key));
            tasks.push(task);
        }
        Ok(tasks)
    }

    /// Commits run receipts ([`BundleBuilder::build_run`]): each is checked — its task signed
    /// by this overlay, the run written where the task named it and covering exactly the
    /// task's files, its object present and long enough, the index still ready with the runs
    /// the task was planned against — and its step taken (the kept runs and the new one, the
    /// covered files' blobs shed, decision 71). The others are refused with their reason; a
    /// refused run's object is left to vacuum.
    pub async fn commit_runs(&self, receipts: &[RunReceipt]) -> Result<RunCommitReport> {
        let mut report = RunCommitReport::default();
        let key = self.task_key().await?;
        for r in receipts {
            check_format(r.format)?;
            let task = &r.task;
            task.check()?;
            let signed = task
                .mac
                .as_deref()
                .is_some_and(|m| crate::admin::fanout::same_mac(m, &task.mac_under(&key)));
            if !signed {
                return Err(Error::Invalid(
                    "run receipt: its task's signature does not match (forged or altered; plan again)"
                        .into(),
                ));
            }
            let refuse = |reason: String| Refused {
                file: task.bundle_path.clone(),
                reason,
            };
            let Some(run) = &r.run else {
                report.refused.push(refuse(
                    "the worker could not make the run (an input damaged or of another layout)"
                        .into(),
                ));
                continue;
            };
            if let Err(reason) = self.check_run_object(task, run).await? {
                report.refused.push(refuse(reason));
                continue;
            }
            let _writing = self.writing.read().await;
            let t = self.catalog.begin()?;
            let ix: Option<IndexRecord> = t
                .get(&index_key(task.table.table_id, task.index.index_id))
                .await?;
            if !ix.is_some_and(|ix| ix.state == IndexState::Ready) {
                report.refused.push(refuse(
                    "the index is no longer ready (dropped or rebuilding)".into(),
                ));
                continue;
            }
            let now = t.runs(task.index.index_id).await?;
            let paths = |rs: &[TableRun]| -> Vec<String> {
                rs.iter().map(|r| r.bundle_path.clone()).collect()
            };
            if paths(&now) != paths(&task.runs) {
                report.refused.push(refuse(
                    "the index's runs changed since the task was planned".into(),
                ));
                continue;
            }
            let mut next: Vec<TableRun> = task.keep.iter().map(|&i| task.runs[i].clone()).collect();
            next.push(run.clone());
            let marked = t.put_runs(task.index.index_id, &next).await?;
            t.bump_version().await?;
            t.commit().await?;
            drop(_writing);
            let mut marked = marked;
            // One bundle rewrite per file, whatever the number of its blobs the run holds.
            marked.sort_unstable();
            marked.dedup();
            self.shed_covered(&task.table, &marked).await?;
            report.committed.push(task.bundle_path.clone());
        }
        Ok(report)
    }

    /// Whether `run` is what `task` asked for and its object holds it: `Ok(Err(reason))`
    /// when not.
    async fn check_run_object(
        &self,
        task: &RunTask,
        run: &TableRun,
    ) -> Result<std::result::Result<(), String>> {
        if run.bundle_path != task.bundle_path {
            return Ok(Err(format!(
                "the run is at {:?}, not where its task named it",
                run.bundle_path.chars().take(200).collect::<String>()
            )));
        }
        let mut want: Vec<(u64, &str)> = task
            .files
            .iter()
            .map(|f| (f.file_id, f.sha256.as_str()))
            .collect();
        let mut got: Vec<(u64, &str)> = run
            .files
            .iter()
            .map(|f| (f.file_id, f.sha256.as_str()))
            .collect();
        want.sort_unstable();
        got.sort_unstable();
        if want != got {
            return Ok(Err("the run does not cover exactly its task's files".into()));
        }
        let end = run.blob_offset.checked_add(run.blob_length);
        let path = object_store::path::Path::from(run.bundle_path.as_str());
        match self.store.head(&path).await {
            Ok(meta) if end.is_some_and(|e| e <= meta.size) => Ok(Ok(())),
            Ok(meta) => Ok(Err(format!(
                "the run object holds {} bytes, fewer than its blob's end",
                meta.size
            ))),
            Err(object_store::Error::NotFound { .. }) => {
                Ok(Err("the run object is not in the overlay store".into()))
            }
            Err(e) => Err(store_err(e)),
        }
    }
}

impl BundleBuilder {
    /// Writes the run of a [`RunTask`] to the overlay store: the runs it merges and the
    /// delta's blobs read from there, one run bundle written under the task's name (a retry
    /// writes it again). Refuses (`E_INVALID`, before any read) a task this overlay did not
    /// plan or whose paths leave the table's bundle folder. `run: None` in the receipt when
    /// an input is damaged or of another layout.
    pub async fn build_run(&self, task: &RunTask) -> Result<RunReceipt> {
        task.check()?;
        if !self.trusted {
            self.check_mac(task.mac.as_deref(), |key| task.mac_under(key))
                .await?;
        }
        let writer = RunWriter {
            store: self.store.clone(),
            reader: self.reader.clone(),
            block_bytes: task.block_bytes as usize,
            part_bytes: RUN_PART_BYTES,
            path: task.bundle_path.clone(),
        };
        let inputs: Vec<(FileEntry, IndexFileEntry)> = task
            .files
            .iter()
            .cloned()
            .zip(task.artifacts.iter().cloned())
            .collect();
        let previous: Vec<&TableRun> = task.merge.iter().map(|&i| &task.runs[i]).collect();
        let run = writer
            .write_tier(&task.table, &task.index, &inputs, &previous)
            .await?;
        Ok(RunReceipt {
            format: TASK_FORMAT,
            kind: RUN_KIND.into(),
            task: task.clone(),
            run,
        })
    }
}
