//! Builds beyond one machine (`docs/fanout.md`, decision 48): a build is a plan, bundles
//! built anywhere, and one commit.
//!
//! - [`Overlay::plan_build`] (reads the catalog) gives one [`BuildTask`] per data file that
//!   lacks blobs: the file pinned to its recorded facts, the indexes it lacks, the blobs of
//!   its other indexes to carry over, and the bundle generation to write.
//! - [`BundleBuilder::build_bundle`] (any process; no catalog, so it never fences the
//!   committer's SlateDB writer) indexes the file, writes its new bundle object and returns a
//!   [`BuildReceipt`]. It is a function of the task and the data file's bytes: a retry writes
//!   the same bytes under the same name, and a name that already holds exactly those bytes is
//!   accepted, so retries are safe and idempotent.
//! - [`Overlay::commit_build`] (the single writer) checks each receipt in the transaction
//!   that commits it — the table's snapshot, the file's facts, each index (still there, not
//!   poisoned, its blob for the file still the one planned, no staged build moved), the
//!   carried blobs and the file's bundle generation did not move; the object exists with the
//!   receipt's size and SHA-256 — and commits the valid ones, [`BATCH_FILES`] per
//!   transaction; a stale receipt is refused with its reason, never committed.
//!
//! [`Overlay::build`] runs the same three parts in one process (its receipts are its own, so
//! it does not re-read the objects it just wrote, and any stale receipt fails its batch with
//! `E_CONFLICT`, retried).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::admin::build::{is_data_error, BATCH_FILES, FILE_PASS_ENTRIES, MAX_COMMIT_BYTES};
use crate::admin::catalog::*;
use crate::admin::file_build::{self, FileJob, FileOutcome};
use crate::admin::overlay::{open_store, store_err, OpenOptions, Overlay};
use crate::admin::overlay::{BuildReport, Progress};
use crate::error::{Error, Result};
use crate::formats::codec::Codec;
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexState};
use crate::formats::puffin::{BlobSpec, PuffinWriter};
use crate::io::{Location, ObjectStoreReader, RangeReader, UrlReader};
use futures::StreamExt;

/// The format of [`BuildTask`] and [`BuildReceipt`] this build writes and reads.
pub const TASK_FORMAT: u32 = 2;

/// Where an overlay keeps the key its plans sign tasks with (32 random bytes, written once,
/// create-only). Workers read it from the overlay store they write bundles to.
pub const TASK_KEY_PATH: &str = "keys/fanout-task.key";
const TASK_KEY_BYTES: usize = 32;

/// One data file's build, planned by the committer, run by any [`BundleBuilder`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildTask {
    /// [`TASK_FORMAT`]; a builder or committer refuses another.
    pub format: u32,
    pub table: TableRecord,
    /// The file at its recorded version, SHA-256 and row count.
    pub file: FileEntry,
    /// The indexes to build over the file, as planned.
    pub indexes: Vec<IndexRecord>,
    /// Each planned index's staged-build cursor at planning (`indexes` order).
    pub cursors: Vec<Option<BuildCursor>>,
    /// Each planned index's blob for the file at planning — one the gate no longer accepts —
    /// or none (`indexes` order): the commit replaces exactly that.
    pub replaces: Vec<Option<IndexFileEntry>>,
    /// The file's blobs of the table's other indexes, copied into the new bundle.
    pub carry: Vec<Carried>,
    /// The file's bundle when planned; the new one is the next generation.
    pub previous_bundle: Option<BundleRecord>,
    pub bundle_generation: u64,
    pub block_bytes: u64,
    /// Most entries (rows × indexes) derived in one pass over the file; a fan-out task over a
    /// larger file is built one index at a time (memory: one index's entries of the file).
    pub pass_entries: u64,
    /// The plan's token, for tasks planned for builders elsewhere ([`Overlay::plan_build`]):
    /// the bundle's name carries it (`…-g{generation}-{plan}.puffin`), so only retries of this
    /// task share the name, and they may find their own bytes already there. `build()`'s own
    /// tasks (none) write create-only and delete what they wrote when their commit loses a
    /// race — never an object a fan-out worker may share.
    pub plan: Option<String>,
    /// For `build()`'s own tasks (no `plan`): the batch attempt's token, in the bundle's name
    /// (`…-g{generation}-{attempt}.puffin`), so a bundle left behind by an attempt that
    /// failed midway (a store fault, a crash) never collides with the retry's — vacuum
    /// reclaims it. Absent in fan-out tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
    /// The file is an output of a recorded move (`mv/…`, RFC 0006): the worker carries its
    /// indexes' entries over from the move's sources (their blobs and runs, named here)
    /// instead of reading its columns, and derives only what the record cannot give. Planned
    /// for fan-out tasks only; a worker that does not know the field derives, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<crate::admin::moves::MoveRecord>,
    /// HMAC-SHA256 (hex) of the task without this field, under the overlay's task key
    /// ([`TASK_KEY_PATH`]): a worker builds only what this overlay's writer planned, so a
    /// task forged or altered on its way (another table location, another file, other
    /// carried blobs) is refused before any read. `build()`'s own tasks never leave the
    /// process and carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// A blob of another index carried into a file's new bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Carried {
    pub artifact: IndexFileEntry,
    /// A bloom index's configured false-positive rate (a property of its blob).
    pub fpp_ppm: Option<u32>,
}

impl BuildTask {
    /// The one name this task's bundle may have (`E_INVALID` for a plan token that is not
    /// 1–48 lowercase hex digits: a name never leaves the table's bundle folder).
    pub fn bundle_path(&self) -> Result<String> {
        let plan = match self.plan.as_ref().or(self.attempt.as_ref()) {
            None => String::new(),
            Some(p)
                if (1..=48).contains(&p.len())
                    && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                format!("-{p}")
            }
            Some(_) => {
                return Err(Error::Invalid(
                    "build task: plan must be 1 to 48 lowercase hex digits".into(),
                ))
            }
        };
        Ok(format!(
            "bundles/{}/{}-g{}{plan}.puffin",
            self.table.table_id, self.file.file_id, self.bundle_generation
        ))
    }

    /// Planned for builders elsewhere?
    fn fanout(&self) -> bool {
        self.plan.is_some()
    }

    /// The task's MAC under `key` (over its JSON without [`BuildTask::mac`]).
    fn mac_under(&self, key: &[u8]) -> String {
        let mut unsigned = self.clone();
        unsigned.mac = None;
        mac_of(
            &serde_json::to_vec(&unsigned).expect("a task serializes"),
            key,
        )
    }

    /// Every path the task names, checked before anything is read: the data file a safe
    /// object name below the table's location; the bundles it copies from and replaces in
    /// this table's bundle folder of the overlay. `E_INVALID` naming the path.
    fn check_paths(&self) -> Result<()> {
        crate::admin::overlay::check_data_path(&self.file.path)?;
        let bundle = |p: &str| check_bundle_path("build task", p, self.table.table_id);
        for c in &self.carry {
            bundle(&c.artifact.lineage.bundle_path)?;
        }
        for r in self.replaces.iter().flatten() {
            bundle(&r.lineage.bundle_path)?;
        }
        if let Some(b) = &self.previous_bundle {
            bundle(&b.path)?;
        }
        if let Some(m) = &self.moved {
            for a in &m.sources.artifacts {
                bundle(&a.lineage.bundle_path)?;
            }
            for (_, r) in &m.sources.runs {
                bundle(&r.bundle_path)?;
            }
        }
        Ok(())
    }
}

/// `E_INVALID` (naming `what` and the path) unless `p` is a safe object name directly in
/// table `table_id`'s bundle folder `bundles/{table_id}/` of the overlay.
pub(crate) fn check_bundle_path(what: &str, p: &str, table_id: u64) -> Result<()> {
    let folder = format!("bundles/{table_id}/");
    let below = p
        .strip_prefix(folder.as_str())
        .is_some_and(|name| !name.is_empty() && !name.contains('/'));
    if crate::io::path::check_relative(p).is_err() || !below {
        return Err(Error::Invalid(format!(
            "{what}: bundle {:?} is not in the table's bundle folder {folder}",
            p.chars().take(200).collect::<String>()
        )));
    }
    Ok(())
}

/// HMAC-SHA256 (lowercase hex) of a task's JSON `body` under the overlay's task `key`.
pub(crate) fn mac_of(body: &[u8], key: &[u8]) -> String {
    use hmac::Mac;
    let mut m = hmac::Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    m.update(body);
    hex::encode(m.finalize().into_bytes())
}

/// Constant-time equality of two MACs (hex).
pub(crate) fn same_mac(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// What a [`BundleBuilder`] did with a task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildReceipt {
    pub format: u32,
    pub task: BuildTask,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Outcome {
    /// The bundle object is written: what the catalog records for it.
    #[serde(rename_all = "camelCase")]
    Built {
        bundle: BundleRecord,
        /// Bytes and SHA-256 (hex) of the whole object.
        size: u64,
        sha256: String,
        /// The file's artifacts in the new bundle: the built indexes' and the carried ones.
        artifacts: Vec<IndexFileEntry>,
        /// Entries derived for the built indexes.
        entries: u64,
        /// How many of the task's indexes were carried over its move rather than derived.
        #[serde(default, skip_serializing_if = "is_zero")]
        carried: u64,
    },
    /// Two live rows of the file share a key under a unique index (positions in the file);
    /// nothing is written. The commit poisons the index.
    #[serde(rename_all = "camelCase")]
    Duplicate {
        index_id: u64,
        first: u64,
        second: u64,
    },
    /// `build()`'s own tasks only: the file needs more than one piece ([`FILE_PASS_ENTRIES`]
    /// entries or [`MAX_COMMIT_BYTES`] of keys), and `build()` indexes it in slices. (A
    /// fan-out task builds such a file one index at a time instead.)
    TooLarge,
    /// The data file could not be read at its recorded version (`code`, `message`).
    Unreadable { code: String, message: String },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A receipt [`Overlay::commit_build`] did not commit, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub file: String,
    pub reason: String,
}

/// What [`Overlay::commit_build`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitReport {
    /// Files whose new bundles are committed.
    pub committed: Vec<String>,
    /// Stale or unverifiable receipts (build them again from a new plan).
    pub refused: Vec<Refused>,
    /// Files left for a local `build()`: too large for one piece, or unreadable (with why).
    pub left: Vec<Refused>,
    pub entries: u64,
    pub bytes: u64,
    /// Catalog transactions the commit took.
    pub transactions: u64,
    /// Blobs the committed receipts carried over a move instead of deriving (decision 78).
    pub carried: u64,
}

/// Builds bundles from [`BuildTask`]s: the overlay's object store and the data files, no
/// catalog. Open one per worker process.
pub struct BundleBuilder {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) reader: Arc<ObjectStoreReader>,
    pub(crate) data: Arc<UrlReader>,
    /// `build()`'s own builder: its tasks never left the process, so they carry no MAC.
    pub(crate) trusted: bool,
    /// The overlay's task key, read on first use.
    pub(crate) key: tokio::sync::OnceCell<Vec<u8>>,
    /// Vector codebooks loaded so far (a worker builds many files against one).
    pub(crate) codebooks: Arc<crate::admin::codebook::Codebooks>,
    /// `OpenOptions::catalogs`, connected (credentials routed in `data`) before the first task.
    catalogs: Vec<crate::io::rest::CatalogAccess>,
    timeout: Option<std::time::Duration>,
    connected: tokio::sync::OnceCell<()>,
}

impl BundleBuilder {
    /// A builder writing to the overlay at `url` (the URL its committer opened), reading data
    /// with `options.storage` (credentials, endpoints).
    pub fn open(url: &str, options: OpenOptions) -> Result<BundleBuilder> {
        let opened = open_store(url, &options, true)?;
        let reader = Arc::new(opened.reader(options.timeout));
        Ok(BundleBuilder {
            store: opened.store,
            reader,
            data: Arc::new(UrlReader::new(options.storage).with_timeout(options.timeout)),
            trusted: false,
            key: tokio::sync::OnceCell::new(),
            codebooks: Default::default(),
            catalogs: options.catalogs,
            timeout: options.timeout,
            connected: tokio::sync::OnceCell::new(),
        })
    }

    /// Refuses (`E_INVALID`) a task this overlay's writer did not plan or that changed since:
    /// its MAC under the overlay's task key must match. Reads only that key.
    async fn check_signed(&self, task: &BuildTask) -> Result<()> {
        self.check_mac(task.mac.as_deref(), |key| task.mac_under(key))
            .await
    }

    /// Refuses (`E_INVALID`) a task whose `mac` is absent or is not `compute(key)` under the
    /// overlay's task key. Reads only that key (once per builder).
    pub(crate) async fn check_mac(
        &self,
        mac: Option<&str>,
        compute: impl Fn(&[u8]) -> String,
    ) -> Result<()> {
        let Some(mac) = mac else {
            return Err(Error::Invalid(
                "build task: not signed (plan tasks with planBuild)".into(),
            ));
        };
        let key = self
            .key
            .get_or_try_init(|| async {
                match self
                    .reader
                    .read_all_max(&Location::new(TASK_KEY_PATH), TASK_KEY_BYTES as u64)
                    .await
                {
                    Ok(k) if k.len() == TASK_KEY_BYTES => Ok(k.to_vec()),
                    Ok(_) => Err(Error::Invalid(format!(
                        "build task: the overlay's task key {TASK_KEY_PATH} is damaged"
                    ))),
                    Err(crate::io::IoError::NotFound { .. }) => Err(Error::Invalid(format!(
                        "build task: this overlay has planned no tasks (no {TASK_KEY_PATH})"
                    ))),
                    Err(e) => Err(e.into()),
                }
            })
            .await?;
        if !same_mac(mac, &compute(key)) {
            return Err(Error::Invalid(
                "build task: its signature does not match (forged or altered; plan again)".into(),
            ));
        }
        Ok(())
    }

    /// Indexes the task's file for its indexes and writes the file's new bundle (the carried
    /// blobs beside the new ones). A data file that cannot be read at its recorded version is
    /// an [`Outcome::Unreadable`] receipt; other failures (the overlay store, a task of
    /// another format, damage in a carried blob) are errors, and the task can be retried.
    pub async fn build_bundle(&self, task: &BuildTask) -> Result<BuildReceipt> {
        self.connected
            .get_or_try_init(|| async {
                #[cfg(feature = "s3")]
                crate::io::rest_catalog::connect_all(&self.data, &self.catalogs, self.timeout)
                    .await?;
                #[cfg(not(feature = "s3"))]
                if let Some(c) = self.catalogs.first() {
                    let _ = self.timeout;
                    return Err(crate::io::rest::no_client(&c.table));
                }
                Ok::<(), Error>(())
            })
            .await?;
        check_format(task.format)?;
        task.bundle_path()?;
        task.check_paths()?;
        if !self.trusted {
            self.check_signed(task).await?;
        }
        if task.indexes.is_empty()
            || task.indexes.len() != task.cursors.len()
            || task.indexes.len() != task.replaces.len()
        {
            return Err(Error::Invalid(
                "build task: indexes, cursors and replaces must be non-empty and of one length"
                    .into(),
            ));
        }
        let block_bytes = usize::try_from(task.block_bytes)
            .ok()
            .filter(|b| (256..=1 << 24).contains(b))
            .ok_or_else(|| Error::Invalid("build task: blockBytes out of range".into()))?;
        let codebooks = self.codebooks.of(&self.reader, &task.indexes).await?;
        let job = |indexes: Vec<IndexRecord>, max_bytes: u64| FileJob {
            location: task.table.location.clone(),
            file: task.file.clone(),
            indexes,
            snapshot: task.table.snapshot as i64,
            block_bytes,
            max_bytes,
            codebooks: codebooks.clone(),
        };
        let receipt = |outcome| BuildReceipt {
            format: TASK_FORMAT,
            task: task.clone(),
            outcome,
        };
        let unreadable = |e: Error| Outcome::Unreadable {
            code: e.code().to_string(),
            message: e.to_string(),
        };
        // An output of a recorded move: each index its record can give is carried over from
        // the move's sources (read from this overlay's store, SHA-256 checked), the rest derived.
        let mut fresh = Vec::with_capacity(task.indexes.len());
        let mut derive = task.indexes.clone();
        if let Some(rec) = &task.moved {
            let carrier = crate::admin::carry::Carrier {
                catalog: None,
                reader: &self.reader,
                codebooks: &self.codebooks,
                block_bytes,
            };
            let mut sources = crate::admin::moves::SourceBlobs::default();
            derive.clear();
            for ix in &task.indexes {
                match carrier
                    .carry_step(rec, &task.file, ix, &task.indexes, &mut sources)
                    .await?
                {
                    Some(crate::admin::carry::Carried::Entries(e)) => {
                        if ix.unique {
                            let dup = crate::admin::unique::first_duplicate(
                                &ix.key,
                                e.iter().map(|(k, p)| (k.as_slice(), *p)),
                                task.file.deleted()?.as_ref(),
                            )?;
                            if let Some((first, second)) = dup {
                                return Ok(receipt(Outcome::Duplicate {
                                    index_id: ix.index_id,
                                    first,
                                    second,
                                }));
                            }
                        }
                        let book = codebooks.get(&ix.index_id).map(|b| b.as_ref());
                        fresh.push(file_build::blob_artifact(
                            task.table.snapshot as i64,
                            &task.file,
                            ix,
                            e.iter().map(|(k, p)| (k.as_slice(), *p)),
                            block_bytes,
                            e.iter().map(|(k, _)| k.len() + 8).sum(),
                            book,
                        )?);
                    }
                    Some(crate::admin::carry::Carried::Blob(b, meta)) => {
                        let a = file_build::artifact_of(
                            task.table.snapshot as i64,
                            &task.file,
                            ix,
                            &b,
                            meta,
                        );
                        fresh.push((a, b));
                    }
                    None => derive.push(ix.clone()),
                }
            }
        }
        let carried = fresh.len() as u64;
        // One pass for every index when the file fits it; else (fan-out tasks) one index at
        // a time, each blob the same bytes a one-pass build makes.
        let one_pass =
            task.file.record_count.saturating_mul(derive.len() as u64) <= task.pass_entries;
        let mut blobs = Vec::new();
        let mut by_index = !one_pass;
        if derive.is_empty() {
            by_index = false;
        } else if one_pass {
            let all = job(derive.clone(), MAX_COMMIT_BYTES);
            match file_build::index_file(self.data.clone(), all).await {
                Ok(FileOutcome::Built(b)) => blobs = b,
                Ok(FileOutcome::TooLarge) => by_index = true,
                Err(e) if is_data_error(&e) => return Ok(receipt(unreadable(e))),
                Err(e) => return Err(e),
            }
        }
        if by_index {
            if !task.fanout() {
                return Ok(receipt(Outcome::TooLarge));
            }
            for ix in &derive {
                let one = job(vec![ix.clone()], u64::MAX);
                match file_build::index_file(self.data.clone(), one).await {
                    Ok(FileOutcome::Built(b)) => blobs.extend(b),
                    Ok(FileOutcome::TooLarge) => return Ok(receipt(Outcome::TooLarge)),
                    Err(e) if is_data_error(&e) => return Ok(receipt(unreadable(e))),
                    Err(e) => return Err(e),
                }
            }
        }
        let mut entries = 0;
        for b in blobs {
            if let Some((first, second)) = b.duplicate {
                return Ok(receipt(Outcome::Duplicate {
                    index_id: b.index_id,
                    first,
                    second,
                }));
            }
            entries += b.entry_count;
            fresh.push((b.artifact, b.bytes));
        }
        let written = self.write_bundle(task, fresh).await?;
        Ok(receipt(Outcome::Built {
            bundle: BundleRecord {
                path: task.bundle_path()?,
                generation: task.bundle_generation,
            },
            size: written.size,
            sha256: written.sha256,
            artifacts: written.artifacts,
            entries,
            carried,
        }))
    }

    /// Writes the task's bundle: `fresh` blobs and the carried ones.
    async fn write_bundle(
        &self,
        task: &BuildTask,
        fresh: Vec<(IndexFileEntry, Vec<u8>)>,
    ) -> Result<Written> {
        let mut pending: Vec<(IndexFileEntry, Vec<u8>, Option<u32>)> = fresh
            .into_iter()
            .map(|(e, b)| {
                let fpp = task
                    .indexes
                    .iter()
                    .find(|i| i.index_id == e.lineage.index_id)
                    .and_then(|i| i.spec.fpp_ppm());
                (e, b, fpp)
            })
            .collect();
        for c in &task.carry {
            let l = &c.artifact.lineage;
            if pending
                .iter()
                .any(|(e, _, _)| e.lineage.index_id == l.index_id)
            {
                continue;
            }
            let bytes = self
                .reader
                .read_range(&Location::new(&l.bundle_path), l.blob_range())
                .await?;
            pending.push((c.artifact.clone(), bytes.to_vec(), c.fpp_ppm));
        }
        self.write_object(
            &task.table,
            &task.file,
            &task.bundle_path()?,
            pending,
            task.fanout(),
        )
        .await
    }

    /// Writes the bundle object of data file `file` at `bundle_path`: the blobs of
    /// `pending` (artifact, bytes, a bloom index's false-positive rate) in index order, each
    /// artifact's lineage pointed at its place. With `fanout` the object's SHA-256 is
    /// computed (receipts carry it) and an object already holding exactly these bytes is
    /// accepted (a retried task); otherwise the put is create-only (`E_CONFLICT`).
    pub(crate) async fn write_object(
        &self,
        table: &TableRecord,
        file: &FileEntry,
        bundle_path: &str,
        mut pending: Vec<(IndexFileEntry, Vec<u8>, Option<u32>)>,
        fanout: bool,
    ) -> Result<Written> {
        pending.sort_by_key(|(e, _, _)| e.lineage.index_id);
        let mut w = PuffinWriter::new();
        w.set_property("skerry.table", table.name.clone());
        w.set_property("skerry.data-file", file.path.clone());
        // The blobs go out as they are (owned buffers, no copy into the file's bytes).
        let mut chunks: Vec<bytes::Bytes> = Vec::with_capacity(2 * pending.len() + 1);
        for (entry, bytes, fpp_ppm) in &mut pending {
            let mut props = std::collections::BTreeMap::new();
            props.insert(
                "skerry.index-id".to_string(),
                entry.lineage.index_id.to_string(),
            );
            props.insert(
                "skerry.directory-offset".to_string(),
                entry.ordered.directory_offset.to_string(),
            );
            props.insert(
                "skerry.directory-length".to_string(),
                entry.ordered.directory_length.to_string(),
            );
            if let Some(b) = entry.ordered.blocks {
                // A bloom filter's size, distinct keys and configured false-positive rate.
                props.insert("skerry.blocks".to_string(), b.to_string());
                props.insert("skerry.bits".to_string(), (b * 256).to_string());
                props.insert("skerry.ndv".to_string(), entry.ordered.entries.to_string());
                if let Some(ppm) = fpp_ppm {
                    props.insert(
                        "skerry.fpp".to_string(),
                        (f64::from(*ppm) / 1e6).to_string(),
                    );
                }
            }
            if let Some(n) = entry.ordered.values {
                // Readers listing the bundle see a bitmap's cardinality without the manifest.
                props.insert("skerry.cardinality".to_string(), n.to_string());
            }
            let spec = BlobSpec {
                blob_type: entry.lineage.blob_type.clone(),
                fields: entry.lineage.fields.clone(),
                snapshot_id: entry.lineage.source_snapshot_id,
                sequence_number: entry.lineage.source_sequence_number,
                properties: props,
            };
            let offset = w.position();
            let blob = std::mem::take(bytes);
            let length = blob.len() as u64;
            chunks.push(w.take_and_skip(length).into());
            chunks.push(blob.into());
            let m = w.record_blob(spec, offset, length, Codec::None);
            entry.lineage.bundle_path = bundle_path.to_string();
            entry.lineage.blob_offset = m.offset;
            entry.lineage.blob_length = m.length;
        }
        chunks.push(w.finish().bytes);
        let size = chunks.iter().map(|c| c.len() as u64).sum::<u64>();
        let sha256 = if fanout {
            let mut hash = Sha256::new();
            for c in &chunks {
                hash.update(c);
            }
            hex::encode(hash.finalize())
        } else {
            String::new()
        };
        self.put_once(bundle_path, PutPayload::from_iter(chunks), &sha256, fanout)
            .await?;
        Ok(Written {
            artifacts: pending.into_iter().map(|(e, _, _)| e).collect(),
            size,
            sha256,
        })
    }

    /// Create-only put of `path`; when it exists already, `E_CONFLICT` — unless `retry_safe`
    /// (a fan-out task, whose name only its own retries share) and it holds exactly these
    /// bytes.
    async fn put_once(
        &self,
        path: &str,
        bytes: PutPayload,
        sha256: &str,
        retry_safe: bool,
    ) -> Result<()> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self.store.put_opts(&Path::from(path), bytes, opts).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) if retry_safe => {
                match object_sha256(self.store.as_ref(), path).await? {
                    Some((_, have)) if have == sha256 => Ok(()),
                    _ => Err(Error::Conflict(format!(
                        "{path} was written by another task with other bytes"
                    ))),
                }
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                Err(Error::Conflict(format!("{path} was written concurrently")))
            }
            Err(e) => Err(store_err(e)),
        }
    }
}

/// A bundle written by [`BundleBuilder::write_object`].
pub(crate) struct Written {
    pub artifacts: Vec<IndexFileEntry>,
    pub size: u64,
    /// SHA-256 (hex) of the object; empty unless written for a fan-out task.
    pub sha256: String,
}

pub(crate) fn check_format(format: u32) -> Result<()> {
    if format != TASK_FORMAT {
        return Err(Error::Invalid(format!(
            "build task or receipt of format {format}; this build reads format {TASK_FORMAT}"
        )));
    }
    Ok(())
}

/// Each artifact of a receipt is what the bundle's own Puffin footer says is at its place:
/// a blob at exactly its offset and length, of its type, fields and snapshot, for its index
/// (`skerry.index-id`) with its directory (`skerry.directory-offset`/`-length`), stored
/// uncompressed as recorded — and the bytes there hash to its `blob_sha256`. Two artifacts'
/// places exchanged, or any one altered, fail here, not in a later query. `Err(why)`.
fn artifacts_in_footer(
    bytes: &[u8],
    artifacts: &[IndexFileEntry],
) -> std::result::Result<(), String> {
    use crate::formats::puffin::{Limits, PuffinFooter};
    let footer = match PuffinFooter::parse_tail(bytes, bytes.len() as u64, &Limits::default()) {
        Ok(Ok(f)) => f,
        Ok(Err(_)) => return Err("its Puffin footer is truncated".into()),
        Err(e) => return Err(format!("its Puffin footer is unreadable: {e}")),
    };
    for a in artifacts {
        let l = &a.lineage;
        let Some(b) = footer
            .metadata
            .blobs
            .iter()
            .find(|b| b.offset == l.blob_offset && b.length == l.blob_length)
        else {
            return Err(format!(
                "no blob at {}+{} for index {}",
                l.blob_offset, l.blob_length, l.index_id
            ));
        };
        let prop = |k: &str| b.properties.get(k).map(String::as_str);
        let index_id = l.index_id.to_string();
        let dir_offset = a.ordered.directory_offset.to_string();
        let dir_length = a.ordered.directory_length.to_string();
        let stored_as_recorded = b.codec().ok() == Some(l.compression);
        if b.blob_type != l.blob_type
            || b.fields != l.fields
            || b.snapshot_id != l.source_snapshot_id
            || b.sequence_number != l.source_sequence_number
            || prop("skerry.index-id") != Some(index_id.as_str())
            || prop("skerry.directory-offset") != Some(dir_offset.as_str())
            || prop("skerry.directory-length") != Some(dir_length.as_str())
            || !stored_as_recorded
        {
            return Err(format!(
                "the blob at {}+{} is not index {}'s as the receipt describes it",
                l.blob_offset, l.blob_length, l.index_id
            ));
        }
        let blob = usize::try_from(l.blob_offset)
            .ok()
            .zip(usize::try_from(l.blob_offset.saturating_add(l.blob_length)).ok())
            .and_then(|(s, e)| bytes.get(s..e))
            .ok_or_else(|| format!("index {}'s blob is outside the object", l.index_id))?;
        if hex::encode(Sha256::digest(blob)) != l.blob_sha256 {
            return Err(format!(
                "index {}'s blob does not hash to its lineage's SHA-256",
                l.index_id
            ));
        }
    }
    Ok(())
}

/// Size and SHA-256 (hex) of the object at `path`; `None` when there is none.
async fn object_sha256(store: &dyn ObjectStore, path: &str) -> Result<Option<(u64, String)>> {
    let got = match store.get(&Path::from(path)).await {
        Ok(g) => g,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(store_err(e)),
    };
    let mut stream = got.into_stream();
    let mut hash = Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(store_err)?;
        size += chunk.len() as u64;
        hash.update(&chunk);
    }
    Ok(Some((size, hex::encode(hash.finalize()))))
}

/// [`Overlay::plan_build`]'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlanOptions {
    /// Only this index (default: every live index of the table).
    pub index: Option<String>,
    /// Most entries (rows × indexes) a builder derives in one pass over a file (default
    /// [`FILE_PASS_ENTRIES`]); a larger file is built one index at a time, holding one
    /// index's entries of the file in memory.
    pub pass_entries: Option<u64>,
}

/// The catalog facts a plan is made from.
pub(crate) struct PlanState {
    pub tr: TableRecord,
    pub files: Vec<FileEntry>,
    pub indexes: Vec<IndexRecord>,
    pub arts: HashMap<u64, HashMap<u64, IndexFileEntry>>,
    pub cursors: HashMap<u64, Option<BuildCursor>>,
    pub bundles: HashMap<u64, BundleRecord>,
    /// Records of recorded moves, by output file id (fan-out tasks carry them).
    pub moves: HashMap<u64, crate::admin::moves::MoveRecord>,
}

impl Overlay {
    /// A [`BundleBuilder`] sharing this overlay's stores (what `build()` runs tasks with).
    pub(crate) fn bundle_builder(&self) -> BundleBuilder {
        BundleBuilder {
            store: self.store.clone(),
            reader: self.reader.clone(),
            data: self.data.clone(),
            trusted: true,
            key: tokio::sync::OnceCell::new(),
            codebooks: self.codebooks.clone(),
            // Shares the overlay's data reader: its catalog routes are already in it.
            catalogs: Vec::new(),
            timeout: None,
            connected: tokio::sync::OnceCell::new(),
        }
    }

    /// The tasks that bring `table`'s files up to date for its live indexes (or
    /// `opts.index`), for builders elsewhere: one per file lacking a blob, none for files a
    /// staged build is in the middle of. A file past `opts.pass_entries` is built by its
    /// worker one index at a time. Nothing is written.
    pub async fn plan_build(&self, table: &str, opts: &PlanOptions) -> Result<Vec<BuildTask>> {
        let state = self.plan_state(table).await?;
        if let Some(name) = &opts.index {
            if !state.indexes.iter().any(|i| &i.name == name) {
                // Unknown: the catalog's own error; poisoned: not buildable.
                let t = self.catalog.begin()?;
                let ix = self.catalog.index(&t, &state.tr, name).await?;
                return Err(Error::IndexNotReady {
                    index: format!("{table}.{}", ix.name),
                    state: format!("{:?}", ix.state).to_lowercase(),
                });
            }
        }
        let plan = crate::admin::build::attempt_token();
        let pass_entries = opts.pass_entries.unwrap_or(FILE_PASS_ENTRIES);
        if pass_entries == 0 {
            return Err(Error::Invalid(
                "planBuild: passEntries must be positive".into(),
            ));
        }
        let key = self.task_key().await?;
        let mut tasks = self.tasks_of(
            &state,
            opts.index.as_deref(),
            &HashSet::new(),
            Some(plan),
            pass_entries,
        );
        for t in &mut tasks {
            t.mac = Some(t.mac_under(&key));
        }
        Ok(tasks)
    }

    /// The overlay's task key ([`TASK_KEY_PATH`]): read, or drawn from the OS and written
    /// create-only the first time (a concurrent first writer's key wins, and is read).
    pub(crate) async fn task_key(&self) -> Result<Vec<u8>> {
        let loc = Location::new(TASK_KEY_PATH);
        for _ in 0..2 {
            match self.reader.read_all_max(&loc, TASK_KEY_BYTES as u64).await {
                Ok(k) if k.len() == TASK_KEY_BYTES => return Ok(k.to_vec()),
                Ok(_) => {
                    return Err(Error::Invalid(format!(
                        "the overlay's task key {TASK_KEY_PATH} is damaged"
                    )))
                }
                Err(crate::io::IoError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let mut key = vec![0u8; TASK_KEY_BYTES];
            getrandom::fill(&mut key)
                .map_err(|e| Error::Invalid(format!("no randomness for the task key: {e}")))?;
            let opts = PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            match self
                .store
                .put_opts(&Path::from(TASK_KEY_PATH), key.clone().into(), opts)
                .await
            {
                Ok(_) => return Ok(key),
                Err(object_store::Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(Error::Conflict(format!(
            "{TASK_KEY_PATH} was written concurrently"
        )))
    }

    /// The catalog facts a plan is made from (one read transaction).
    pub(crate) async fn plan_state(&self, table: &str) -> Result<PlanState> {
        // Vector indexes without a codebook get one first: every task carries it.
        self.ensure_codebooks(table, &[]).await?;
        let t = self.catalog.begin()?;
        let (tr, files, indexes) = self.catalog.table_files_live_indexes(&t, table).await?;
        let mut arts = HashMap::new();
        let mut cursors = HashMap::new();
        for ix in &indexes {
            arts.insert(
                ix.index_id,
                self.catalog.artifacts_by_file(&t, ix.index_id).await?,
            );
            cursors.insert(ix.index_id, t.get(&cursor_key(ix.index_id)).await?);
        }
        let mut bundles = HashMap::new();
        for f in &files {
            if let Some(b) = t
                .get::<BundleRecord>(&bundle_key(tr.table_id, f.file_id))
                .await?
            {
                bundles.insert(f.file_id, b);
            }
        }
        drop(t);
        let moves = self.carrier().move_records(tr.table_id).await?;
        Ok(PlanState {
            tr,
            files,
            indexes,
            arts,
            cursors,
            bundles,
            moves,
        })
    }

    /// Tasks from `state`: per file (not in `skip`), the indexes (all, or `only`) it lacks
    /// and no staged build is in the middle of — for `build()` (no `plan`) only files that fit
    /// one pass, for a fan-out plan every such file.
    pub(crate) fn tasks_of(
        &self,
        state: &PlanState,
        only: Option<&str>,
        skip: &HashSet<u64>,
        plan: Option<String>,
        pass_entries: u64,
    ) -> Vec<BuildTask> {
        state
            .files
            .iter()
            .filter(|f| !skip.contains(&f.file_id))
            .filter_map(|f| self.task_of(state, f, only, plan.as_ref(), pass_entries))
            .collect()
    }

    /// The task for one file of `state` ([`Overlay::tasks_of`]), `None` when it needs none.
    pub(crate) fn task_of(
        &self,
        state: &PlanState,
        f: &FileEntry,
        only: Option<&str>,
        plan: Option<&String>,
        pass_entries: u64,
    ) -> Option<BuildTask> {
        let PlanState {
            tr,
            indexes,
            arts,
            cursors,
            bundles,
            ..
        } = state;
        let mut pending = Vec::new();
        let mut carry = Vec::new();
        for ix in indexes {
            let art = arts[&ix.index_id].get(&f.file_id);
            if accepted(f, art, tr) {
                // A blob a run holds is not carried (no bundle holds it).
                carry.extend(art.filter(|a| !a.in_run).map(|a| Carried {
                    artifact: a.clone(),
                    fpp_ppm: ix.spec.fpp_ppm(),
                }));
                continue;
            }
            if only.is_some_and(|o| o != ix.name) {
                continue;
            }
            let staged = cursors[&ix.index_id].as_ref().is_some_and(|c| {
                c.file_id == f.file_id || c.skipped.iter().any(|(id, _)| *id == f.file_id)
            });
            if !staged {
                pending.push(ix.clone());
            }
        }
        // `build()` slices files past one pass itself; a fan-out task builds them one
        // index at a time.
        if pending.is_empty()
            || (plan.is_none() && f.record_count * pending.len() as u64 > FILE_PASS_ENTRIES)
        {
            return None;
        }
        let previous_bundle = bundles.get(&f.file_id).cloned();
        Some(BuildTask {
            format: TASK_FORMAT,
            table: tr.clone(),
            file: f.clone(),
            cursors: pending
                .iter()
                .map(|ix| cursors[&ix.index_id].clone())
                .collect(),
            replaces: pending
                .iter()
                .map(|ix| arts[&ix.index_id].get(&f.file_id).cloned())
                .collect(),
            indexes: pending,
            carry,
            bundle_generation: previous_bundle.as_ref().map_or(1, |b| b.generation + 1),
            previous_bundle,
            block_bytes: self.block_bytes as u64,
            pass_entries,
            plan: plan.cloned(),
            attempt: None,
            // `build()` carries recorded outputs in its own steps; a fan-out task carries its
            // file's record to the worker.
            moved: plan.and(state.moves.get(&f.file_id).cloned()),
            mac: None,
        })
    }

    /// Commits the receipts of [`BundleBuilder::build_bundle`]: each is checked in the
    /// transaction that commits it (module docs) and the valid ones are committed,
    /// [`BATCH_FILES`] per transaction; stale ones are refused with their reason. Then
    /// completed indexes are ready (a unique one after its cross-file check: poisoned and
    /// `E_CONSTRAINT` on a duplicate) and table runs are rebuilt. A receipt reporting a
    /// duplicate within its file poisons that index; the commit then returns `E_CONSTRAINT`
    /// after committing the rest.
    pub async fn commit_build(&self, receipts: &[BuildReceipt]) -> Result<CommitReport> {
        self.commit_build_with(receipts, true).await
    }

    /// [`Overlay::commit_build`]; with `runs` false the tier steps the committed files call
    /// for are not taken here but left to [`Overlay::plan_runs`] (workers write the runs) or
    /// the next build.
    pub async fn commit_build_with(
        &self,
        receipts: &[BuildReceipt],
        runs: bool,
    ) -> Result<CommitReport> {
        let mut report = CommitReport::default();
        let mut tables: Vec<String> = Vec::new();
        let mut duplicates = Vec::new();
        let mut built = Vec::new();
        for r in receipts {
            check_format(r.format)?;
            check_format(r.task.format)?;
            if !tables.contains(&r.task.table.name) {
                tables.push(r.task.table.name.clone());
            }
            match &r.outcome {
                Outcome::Built { carried, .. } => {
                    let carried = (*carried).min(r.task.indexes.len() as u64);
                    self.metrics
                        .record_derived(r.task.indexes.len() as u64 - carried);
                    self.metrics.record_carried(carried);
                    built.push(r)
                }
                Outcome::Duplicate { .. } => duplicates.push(r),
                Outcome::TooLarge => report.left.push(Refused {
                    file: r.task.file.path.clone(),
                    reason: "too large for one piece: a local build() slices it".into(),
                }),
                Outcome::Unreadable { message, .. } => report.left.push(Refused {
                    file: r.task.file.path.clone(),
                    reason: message.clone(),
                }),
            }
        }
        let batches = built.len().div_ceil(BATCH_FILES);
        for (i, batch) in built.chunks(BATCH_FILES).enumerate() {
            let _writing = self.writing.read().await;
            // Whether an index is now complete is judged once, with the last batch: each
            // judgement reads every file of the table.
            self.commit_receipts(batch, Check::Objects, i + 1 == batches, &mut report)
                .await?;
        }
        let mut first_error = None;
        for r in duplicates {
            let Outcome::Duplicate {
                index_id,
                first,
                second,
            } = &r.outcome
            else {
                continue;
            };
            let Some(ix) = r.task.indexes.iter().find(|i| i.index_id == *index_id) else {
                continue;
            };
            let e = self
                .poison_duplicate(&r.task.table, ix, &r.task.file, (*first, *second), &[])
                .await;
            first_error.get_or_insert(e);
        }
        for table in &tables {
            if let Err(e) = self.finish_committed(table, runs).await {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    /// After receipts are committed: unique indexes whose every file is covered are checked
    /// across files and flipped; with `runs`, the tier steps due are taken.
    async fn finish_committed(&self, table: &str, runs: bool) -> Result<()> {
        let t = self.catalog.begin()?;
        let (tr, _, indexes) = self.catalog.table_files_live_indexes(&t, table).await?;
        drop(t);
        for ix in indexes.iter().filter(|i| i.unique && i.state.catching_up()) {
            self.finish_unique(table, &ix.name).await?;
        }
        self.poison_mixed_dims(table).await?;
        if !runs {
            return Ok(());
        }
        self.build_runs(&tr).await
    }

    /// Checks `receipts` (each [`Outcome::Built`]) and commits the valid ones in one
    /// transaction. Under [`Check::AllOrNothing`] a stale receipt fails the whole batch with
    /// `E_CONFLICT` and nothing is committed. With `flip`, a non-unique index this commit
    /// completes turns ready (judging that reads every file of the table: callers pass it
    /// for their last batch only). The caller holds `writing` shared.
    pub(crate) async fn commit_receipts(
        &self,
        receipts: &[&BuildReceipt],
        check: Check,
        flip: bool,
        report: &mut CommitReport,
    ) -> Result<()> {
        let mut refused: HashSet<u64> = HashSet::new();
        if check == Check::Objects {
            // Before the transaction: objects never change once written (create-only).
            for r in receipts {
                if let Err(why) = self.check_object(r).await? {
                    refused.insert(r.task.file.file_id);
                    report.refused.push(Refused {
                        file: r.task.file.path.clone(),
                        reason: why,
                    });
                }
            }
        }
        let t = self.catalog.begin()?;
        let mut ok: Vec<&BuildReceipt> = Vec::new();
        let mut seen: HashSet<(u64, u64)> = HashSet::new();
        for r in receipts {
            if refused.contains(&r.task.file.file_id) {
                continue;
            }
            // Committed already (an earlier attempt of this call failed after its
            // transaction, or the receipt was handed in twice): every artifact the catalog
            // holds for it is this receipt's, so it is reported committed and nothing is
            // written — a retry converges to the same report instead of refusing its own work.
            if self.committed_already(&t, r).await? {
                report.committed.push(r.task.file.path.clone());
                continue;
            }
            let mut why = self.stale(&t, r).await?;
            // Two receipts for one file in one batch: the first is committed.
            if why.is_none() && !seen.insert((r.task.table.table_id, r.task.file.file_id)) {
                why = Some("another receipt for this file is committed with it".into());
            }
            match why {
                None => ok.push(r),
                Some(why) if check == Check::AllOrNothing => {
                    return Err(Error::Conflict(format!(
                        "another writer changed {} during the build: {why}",
                        r.task.table.name
                    )))
                }
                Some(why) => report.refused.push(Refused {
                    file: r.task.file.path.clone(),
                    reason: why,
                }),
            }
        }
        if ok.is_empty() {
            return Ok(());
        }
        // Per index: the files it now has a blob for.
        let mut built_for: HashMap<(u64, u64), (HashSet<u64>, bool)> = HashMap::new();
        for r in &ok {
            let Outcome::Built {
                bundle, artifacts, ..
            } = &r.outcome
            else {
                continue;
            };
            let tid = r.task.table.table_id;
            for a in artifacts {
                t.put(&artifact_key(a.lineage.index_id, a.file_id), a)?;
            }
            t.put(&bundle_key(tid, r.task.file.file_id), bundle)?;
            for ix in &r.task.indexes {
                built_for
                    .entry((tid, ix.index_id))
                    .or_insert_with(|| (HashSet::new(), ix.unique))
                    .0
                    .insert(r.task.file.file_id);
            }
        }
        for ((tid, index_id), (built, unique)) in &built_for {
            let Some(mut rec) = t.get::<IndexRecord>(&index_key(*tid, *index_id)).await? else {
                continue; // (checked by `stale`)
            };
            rec.generation += 1;
            let cursor: Option<BuildCursor> = t.get(&cursor_key(*index_id)).await?;
            let Some(tr) = t.get::<TableRecord>(&table_key(*tid)).await? else {
                continue;
            };
            // (Read only when it may flip the index: it costs a read of every file.)
            let complete = flip && cursor.is_none() && rec.state.catching_up() && !unique && {
                let files = self.catalog.files(&t, *tid).await?;
                let arts = self.catalog.artifacts_by_file(&t, *index_id).await?;
                files
                    .iter()
                    .all(|f| built.contains(&f.file_id) || accepted(f, arts.get(&f.file_id), &tr))
            };
            // (A unique index flips after the cross-file check: `finish_unique`.)
            if complete && rec.state.catching_up() && !unique {
                rec.state = IndexState::Ready;
            }
            t.put(&index_key(*tid, *index_id), &rec)?;
            t.delete(&certificate_key(*index_id))?;
        }
        t.bump_version().await?;
        t.commit().await?;
        self.invalidate();
        report.transactions += 1;
        for r in ok {
            if let Outcome::Built {
                size,
                entries,
                carried,
                ..
            } = &r.outcome
            {
                report.committed.push(r.task.file.path.clone());
                report.bytes += size;
                report.entries += entries;
                report.carried += (*carried).min(r.task.indexes.len() as u64);
            }
        }
        Ok(())
    }

    /// Whether every artifact `r` built is the one the catalog holds for its index and file
    /// now (the same bundle, blob and facts).
    async fn committed_already(&self, t: &Txn<'_>, r: &BuildReceipt) -> Result<bool> {
        let Outcome::Built {
            bundle, artifacts, ..
        } = &r.outcome
        else {
            return Ok(false);
        };
        if artifacts.is_empty() {
            return Ok(false);
        }
        for a in artifacts {
            let now: Option<IndexFileEntry> =
                t.get(&artifact_key(a.lineage.index_id, a.file_id)).await?;
            if !now.is_some_and(|n| n.lineage.bundle_path == bundle.path && &n == a) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Why `r` may not be committed now (`None`: it may), read in `t`.
    async fn stale(&self, t: &Txn<'_>, r: &BuildReceipt) -> Result<Option<String>> {
        let task = &r.task;
        let tid = task.table.table_id;
        let Outcome::Built {
            bundle, artifacts, ..
        } = &r.outcome
        else {
            return Ok(Some("not a built receipt".into()));
        };
        if task.indexes.is_empty()
            || task.indexes.len() != task.cursors.len()
            || task.indexes.len() != task.replaces.len()
        {
            return Ok(Some("the receipt does not match its task".into()));
        }
        let tr: Option<TableRecord> = t.get(&table_key(tid)).await?;
        let Some(tr) = tr.filter(|tr| tr.name == task.table.name) else {
            return Ok(Some("the table is gone".into()));
        };
        // (A newer table snapshot is fine: the receipt's artifacts pass the read gate under
        // the table as it is now, below.)
        if tr.location != task.table.location {
            return Ok(Some("the table moved to another location".into()));
        }
        let now: Option<FileEntry> = t.get(&file_key(tid, task.file.file_id)).await?;
        match now {
            None => return Ok(Some("the file left the table".into())),
            Some(f) if f != task.file => return Ok(Some(
                "the file changed since the task was planned (content, version, rows or deletes)"
                    .into(),
            )),
            Some(_) => {}
        }
        for ((ix, cursor), replaces) in task.indexes.iter().zip(&task.cursors).zip(&task.replaces) {
            // The same index (ids are never reused), not poisoned meanwhile, and its blob for
            // this file still the one the plan saw: other files' commits (this build's own
            // batches among them) move its generation without making this receipt stale.
            let rec: Option<IndexRecord> = t.get(&index_key(tid, ix.index_id)).await?;
            match rec {
                None => return Ok(Some(format!("index {} was dropped", ix.name))),
                Some(rec) if rec.state == IndexState::Poisoned => {
                    return Ok(Some(format!("index {} is poisoned", ix.name)))
                }
                Some(rec) if rec.fields != ix.fields || rec.kind() != ix.kind() => {
                    return Ok(Some("the receipt does not match its task".into()))
                }
                // A vector blob is written against the index's codebook: the one planned.
                Some(rec) if rec.codebook != ix.codebook => {
                    return Ok(Some(format!("the codebook of index {} changed", ix.name)))
                }
                Some(_) => {}
            }
            let now: Option<IndexFileEntry> =
                t.get(&artifact_key(ix.index_id, task.file.file_id)).await?;
            if &now != replaces {
                return Ok(Some(format!(
                    "the blob of index {} for this file changed (another build committed first)",
                    ix.name
                )));
            }
            let now: Option<BuildCursor> = t.get(&cursor_key(ix.index_id)).await?;
            if &now != cursor {
                return Ok(Some(format!("a staged build of {} moved", ix.name)));
            }
        }
        for c in &task.carry {
            let a = &c.artifact;
            let now: Option<IndexFileEntry> =
                t.get(&artifact_key(a.lineage.index_id, a.file_id)).await?;
            if now.as_ref() != Some(a) {
                return Ok(Some(format!(
                    "the blob of index {} carried into the bundle changed",
                    a.lineage.index_id
                )));
            }
        }
        let prev: Option<BundleRecord> = t.get(&bundle_key(tid, task.file.file_id)).await?;
        if prev != task.previous_bundle
            || task.bundle_generation != prev.as_ref().map_or(1, |b| b.generation + 1)
        {
            return Ok(Some("the file's bundle moved to another generation".into()));
        }
        // The receipt's own facts must be its task's.
        let expected: HashSet<u64> = task
            .indexes
            .iter()
            .map(|i| i.index_id)
            .chain(task.carry.iter().map(|c| c.artifact.lineage.index_id))
            .collect();
        let named: HashSet<u64> = artifacts.iter().map(|a| a.lineage.index_id).collect();
        let Ok(path) = task.bundle_path() else {
            return Ok(Some("the receipt does not match its task".into()));
        };
        if bundle.path != path
            || bundle.generation != task.bundle_generation
            || named.len() != artifacts.len()
            || artifacts.iter().any(|a| {
                a.file_id != task.file.file_id
                    || a.lineage.bundle_path != path
                    || !accepted(&task.file, Some(a), &tr)
            })
            || task.indexes.iter().any(|i| !named.contains(&i.index_id))
            || !named.is_subset(&expected)
        {
            return Ok(Some("the receipt does not match its task".into()));
        }
        Ok(None)
    }

    /// `Ok(Err(why))` when a receipt's object is missing or holds other bytes.
    async fn check_object(&self, r: &BuildReceipt) -> Result<std::result::Result<(), String>> {
        let Outcome::Built {
            bundle,
            size,
            sha256,
            ..
        } = &r.outcome
        else {
            return Ok(Err("not a built receipt".into()));
        };
        if r.task.bundle_path().ok().as_ref() != Some(&bundle.path) {
            return Ok(Err("the receipt does not match its task".into()));
        }
        let bytes = match self.store.get(&Path::from(bundle.path.as_str())).await {
            Ok(g) => g.bytes().await.map_err(store_err)?,
            Err(object_store::Error::NotFound { .. }) => {
                return Ok(Err(format!("{} does not exist", bundle.path)))
            }
            Err(e) => return Err(store_err(e)),
        };
        if bytes.len() as u64 != *size || hex::encode(Sha256::digest(&bytes)) != *sha256 {
            return Ok(Err(format!(
                "{} does not hold the receipt's bytes",
                bundle.path
            )));
        }
        let Outcome::Built { artifacts, .. } = &r.outcome else {
            unreachable!("matched above");
        };
        Ok(artifacts_in_footer(&bytes, artifacts).map_err(|why| format!("{}: {why}", bundle.path)))
    }
}

/// [`Overlay::build`]'s whole-file pass, planned once from one read of the catalog: the
/// tasks of the next batch are made from it as the pass goes (a build of N files reads the
/// catalog's file list once, not once per batch). Tasks stay valid across the pass's own
/// batches (each is checked against the catalog when committed); a conflict re-plans.
pub(crate) struct FilePass {
    state: PlanState,
    /// Index into `state.files` of the next file to plan.
    next: usize,
    rows_total: u64,
    rows_done: u64,
}

impl Overlay {
    /// Plans [`Overlay::build`]'s whole-file pass over `table`.
    pub(crate) async fn plan_file_pass(&self, table: &str) -> Result<FilePass> {
        let state = self.plan_state(table).await?;
        let (mut rows_total, mut rows_done) = (0u64, 0u64);
        for f in &state.files {
            rows_total += f.record_count * state.indexes.len() as u64;
            for ix in &state.indexes {
                if accepted(f, state.arts[&ix.index_id].get(&f.file_id), &state.tr) {
                    rows_done += f.record_count;
                }
            }
        }
        Ok(FilePass {
            state,
            next: 0,
            rows_total,
            rows_done,
        })
    }

    /// One batch of [`Overlay::build`]'s whole-file pass: indexes up to a batch of the
    /// pass's files (each for all its pending indexes, in parallel waves), writes one bundle
    /// generation per file and commits artifacts, bundles, unique claims and every involved
    /// index's generation in one transaction. `Ok(true)` when no file is left for the pass;
    /// `E_CONFLICT` when another writer moved an involved index or file meanwhile (nothing
    /// committed; the bundles written are deleted; the caller plans again).
    pub(crate) async fn build_files_batch(
        &self,
        pass: &mut FilePass,
        deferred: &mut HashSet<u64>,
        report: &mut BuildReport,
        done_files: &mut std::collections::BTreeSet<String>,
        on_progress: &mut impl FnMut(&Progress),
    ) -> Result<bool> {
        let _writing = self.writing.read().await;
        let mut tasks = Vec::new();
        // One token per batch attempt: its bundles' names are its own (`BuildTask::attempt`).
        let attempt = crate::admin::build::attempt_token();
        while tasks.len() < BATCH_FILES && pass.next < pass.state.files.len() {
            let f = &pass.state.files[pass.next];
            pass.next += 1;
            if deferred.contains(&f.file_id) {
                continue;
            }
            match self.task_of(&pass.state, f, None, None, FILE_PASS_ENTRIES) {
                Some(t) => tasks.push(BuildTask {
                    attempt: Some(attempt.clone()),
                    ..t
                }),
                // Files too large for one piece are left to the per-index pass.
                None => {
                    deferred.insert(f.file_id);
                }
            }
        }
        if tasks.is_empty() {
            return Ok(true);
        }
        let (rows_total, rows_done) = (pass.rows_total, pass.rows_done);
        // The pass's last batch judges whether its indexes are complete (once per pass).
        let last = pass.next >= pass.state.files.len();
        let tr = pass.state.tr.clone();

        // Build: a sliding window of tasks on their own tasks, each bundle written as it is
        // done while the others go on (no file waits for a slower one). The window holds up
        // to twice `parallel` files, so the cores stay busy while this task waits on a bundle
        // write, within the entries `parallel` of the largest files would hold.
        let parallel = std::thread::available_parallelism().map_or(1, |n| n.get());
        let builder = std::sync::Arc::new(self.bundle_builder());
        let mut receipts: Vec<BuildReceipt> = Vec::new();
        let mut written: Vec<String> = Vec::new();
        let mut queue = (0..tasks.len()).peekable();
        let mut running = futures::stream::FuturesUnordered::new();
        let entries_of = |i: usize| tasks[i].file.record_count * tasks[i].indexes.len() as u64;
        let budget = FILE_PASS_ENTRIES * parallel as u64;
        let mut in_flight = 0u64;
        let mut aborts: Vec<tokio::task::AbortHandle> = Vec::new();
        let spawn = |i: usize, aborts: &mut Vec<tokio::task::AbortHandle>| {
            let task = tasks[i].clone();
            let builder = builder.clone();
            let handle = tokio::spawn(async move { builder.build_bundle(&task).await });
            aborts.push(handle.abort_handle());
            async move { (i, handle.await) }
        };
        // When the batch fails: the tasks still running are aborted and awaited (none writes
        // after the batch returns), and what any of them wrote is deleted (best effort;
        // names are the attempt's own, so a leftover never blocks a retry).
        macro_rules! settle {
            () => {{
                for a in &aborts {
                    a.abort();
                }
                while let Some((_, res)) = running.next().await {
                    if let Ok(Ok(BuildReceipt {
                        outcome: Outcome::Built { bundle, .. },
                        ..
                    })) = res
                    {
                        written.push(bundle.path);
                    }
                }
            }};
        }
        loop {
            while let Some(&next) = queue.peek() {
                let fits = running.is_empty()
                    || (running.len() < 2 * parallel && in_flight + entries_of(next) <= budget);
                if !fits {
                    break;
                }
                queue.next();
                in_flight += entries_of(next);
                running.push(spawn(next, &mut aborts));
            }
            let Some((i, res)) = running.next().await else {
                break;
            };
            in_flight -= entries_of(i);
            let task = &tasks[i];
            let res = match res {
                Ok(r) => r,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            let receipt = match res {
                Ok(r) => r,
                Err(e) => {
                    settle!();
                    self.delete_objects(&written).await;
                    return Err(e);
                }
            };
            match &receipt.outcome {
                Outcome::Built { bundle, .. } => written.push(bundle.path.clone()),
                Outcome::Duplicate {
                    index_id,
                    first,
                    second,
                } => {
                    // Two rows of the file share a key: the index is poisoned, as a step
                    // would poison it, and the build fails.
                    settle!();
                    let ix = task
                        .indexes
                        .iter()
                        .find(|ix| ix.index_id == *index_id)
                        .expect("a planned index");
                    return Err(self
                        .poison_duplicate(&tr, ix, &task.file, (*first, *second), &written)
                        .await);
                }
                Outcome::TooLarge => {
                    deferred.insert(task.file.file_id);
                    continue;
                }
                Outcome::Unreadable { message, .. } => {
                    // Left to the per-index pass, which records the skip in each cursor.
                    tracing::warn!(target: "skerry::build", file = %task.file.path, "not indexed: {message}");
                    deferred.insert(task.file.file_id);
                    continue;
                }
            }
            receipts.push(receipt);
        }
        if receipts.is_empty() {
            return Ok(false); // every file of the batch was deferred
        }

        // Commit, unless another writer moved an involved index or file meanwhile.
        let mut committed = CommitReport::default();
        let refs: Vec<&BuildReceipt> = receipts.iter().collect();
        if let Err(e) = self
            .commit_receipts(&refs, Check::AllOrNothing, last, &mut committed)
            .await
        {
            self.delete_objects(&written).await;
            return Err(e);
        }
        let batch_rows: u64 = receipts
            .iter()
            .map(|r| r.task.file.record_count * r.task.indexes.len() as u64)
            .sum();
        // Every blob of the batch was derived from its file's rows (`build()`'s own tasks
        // carry none: recorded outputs go to the per-index steps).
        self.metrics
            .record_derived(receipts.iter().map(|r| r.task.indexes.len() as u64).sum());
        report.entries += committed.entries;
        report.bundles_written += committed.committed.len() as u64;
        report.bytes_written += committed.bytes;
        done_files.extend(committed.committed);
        pass.rows_done = rows_done + batch_rows;
        on_progress(&Progress {
            phase: "build".into(),
            done: pass.rows_done,
            total: rows_total,
            file: None,
        });
        Ok(false)
    }
}

/// How [`Overlay::commit_receipts`] checks receipts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Receipts from elsewhere: objects re-read and hashed, stale receipts refused one by one.
    Objects,
    /// This process's own receipts (`build()`): a stale one fails the batch (`E_CONFLICT`).
    AllOrNothing,
}
