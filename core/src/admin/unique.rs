//! Unique indexes without per-key catalog traffic (`docs/decisions.md` #31).
//!
//! The index is its own proof of uniqueness. Three checks, each over sorted entries:
//! - **within a file**, when its blob is built: adjacent equal keys in the sorted entries
//!   ([`first_duplicate`]);
//! - **across files**, once, when a building index would become ready: a streaming k-way
//!   merge of the blobs whose key spans overlap ([`Overlay::check_unique_across`]) — files
//!   with disjoint spans (ids written in order) are never read;
//! - **against new rows**, in the registration's transaction: each new key is looked up in
//!   the blocks of the registered files whose span can hold it ([`Overlay::probe_unique`]).
//!
//! A key with a NULL component never collides; deleted rows never collide. No claim is
//! written: every catalog commit bumps `m/version`, so SlateDB's conflict detection orders
//! any two commits of one writer, and a commit that lost re-runs its check on fresh reads;
//! a second writer process is fenced (one writer per catalog). The flip to ready commits only
//! if the table's snapshot and the index's generation are what the merge saw.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use roaring::RoaringTreemap;

use crate::admin::catalog::*;
use crate::admin::merge::{self, BlobAt, BlobStream, MergeInput};
use crate::admin::overlay::{Overlay, RUN_MIN_FILES};
use crate::error::{Error, Result};
use crate::formats::manifest::{FileEntry, IndexFileEntry, IndexState, TableRun};
use crate::values::KeySchema;

/// Times the flip to ready merges again after losing to a concurrent commit.
const FLIP_RETRIES: u32 = 16;

/// The name of a row in constraint errors: `path@position (row id N)`.
pub(crate) fn row_name(path: &str, id: RowIdentity) -> String {
    format!("{path}@{} (row id {})", id.position, id.row_id)
}

pub(crate) fn has_null(key: &KeySchema, k: &[u8]) -> Result<bool> {
    Ok(key.decode(k)?.iter().any(|v| v.is_null()))
}

/// The first pair of positions sharing a non-NULL key among live rows of sorted `entries`.
pub(crate) fn first_duplicate<'a>(
    key: &KeySchema,
    entries: impl Iterator<Item = (&'a [u8], u64)>,
    deleted: Option<&RoaringTreemap>,
) -> Result<Option<(u64, u64)>> {
    let mut prev: Option<(&[u8], u64)> = None;
    for (k, p) in entries {
        if deleted.is_some_and(|m| m.contains(p)) {
            continue;
        }
        if let Some((pk, pp)) = prev {
            if pk == k && !has_null(key, k)? {
                return Ok(Some((pp, p)));
            }
        }
        prev = Some((k, p));
    }
    Ok(None)
}

/// Groups of overlapping blobs with at least this many entries are checked in key ranges on
/// all cores.
const PARALLEL_CHECK_ENTRIES: u64 = 200_000;

/// The first two live entries of different inputs sharing a non-NULL key in the merge of
/// `inputs` (input `i` holds the blob of `members[i]`): `((input, position), (input,
/// position))`.
async fn first_shared(
    inputs: Vec<MergeInput>,
    members: Arc<Vec<Indexed>>,
    key: KeySchema,
) -> Result<Option<((usize, u64), (usize, u64))>> {
    // The last live entry: (key, input, position).
    let mut prev: Option<(Vec<u8>, usize, u64)> = None;
    let mut m = merge::Merge::new(inputs);
    while m.next().await? {
        let (k, p, s) = (m.key(), m.position(), m.input());
        if !members[s].live(p) {
            continue;
        }
        match &mut prev {
            Some((pk, ps, pp)) => {
                if pk.as_slice() == k && *ps != s && !has_null(&key, k)? {
                    return Ok(Some(((*ps, *pp), (s, p))));
                }
                pk.clear();
                pk.extend_from_slice(k);
                (*ps, *pp) = (s, p);
            }
            None => prev = Some((k.to_vec(), s, p)),
        }
    }
    Ok(None)
}

/// What a run written for a unique index checks ([`Overlay::write_run`]): the covered files
/// (in `covered` order) with their delete masks, the key schema (NULLs never collide) and the
/// index's name for the error.
pub(crate) struct UniqueCheck {
    pub members: Vec<Indexed>,
    pub key: KeySchema,
    pub index: String,
}

/// A registered file with its delete mask and the index's accepted artifact over it.
#[derive(Clone)]
pub(crate) struct Indexed {
    pub file: FileEntry,
    pub deleted: Option<RoaringTreemap>,
    pub artifact: IndexFileEntry,
}

impl Indexed {
    pub(crate) fn row(&self, position: u64) -> RowIdentity {
        RowIdentity {
            file_id: self.file.file_id,
            position,
            row_id: self.file.row_id_at(position).unwrap_or(0),
        }
    }
    pub(crate) fn live(&self, position: u64) -> bool {
        !self.deleted.as_ref().is_some_and(|m| m.contains(position))
    }
    fn span(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let o = &self.artifact.ordered;
        Some((
            hex::decode(o.min_key.as_ref()?).ok()?,
            hex::decode(o.max_key.as_ref()?).ok()?,
        ))
    }
}

/// The files of `tr` whose artifact of `index_id` the gate accepts, with their masks.
pub(crate) fn indexed(
    tr: &TableRecord,
    files: &[FileEntry],
    artifacts: &HashMap<u64, IndexFileEntry>,
) -> Result<Vec<Indexed>> {
    let mut out = Vec::new();
    for f in files {
        let a = artifacts.get(&f.file_id);
        if accepted(f, a, tr) {
            out.push(Indexed {
                deleted: f.deleted()?,
                file: f.clone(),
                artifact: a.expect("accepted").clone(),
            });
        }
    }
    Ok(out)
}

impl Overlay {
    fn constraint(
        tr: &TableRecord,
        ix: &IndexRecord,
        a: (&Indexed, u64),
        b: (&str, RowIdentity),
    ) -> Error {
        Error::Constraint {
            index: format!("{}.{}", tr.name, ix.name),
            existing: row_name(&a.0.file.path, a.0.row(a.1)),
            row: row_name(b.0, b.1),
        }
    }

    /// Fails [`Error::Constraint`] when two live rows of different files share a non-NULL
    /// key of `ix` (each file's own rows were checked when its blob was built). Only files
    /// whose key spans overlap are merged; memory is one chunk per merged blob.
    pub(crate) async fn check_unique_across(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        files: &[Indexed],
    ) -> Result<()> {
        let mut spans: Vec<(Vec<u8>, Vec<u8>, usize)> = files
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.span().map(|(lo, hi)| (lo, hi, i)))
            .collect();
        spans.sort();
        let mut group: Vec<usize> = Vec::new();
        let mut group_max: Vec<u8> = Vec::new();
        for (lo, hi, i) in spans {
            if !group.is_empty() && lo > group_max {
                self.merge_check(tr, ix, files, &group).await?;
                group.clear();
            }
            if group.is_empty() || hi > group_max {
                group_max = hi;
            }
            group.push(i);
        }
        self.merge_check(tr, ix, files, &group).await
    }

    /// Merges the blobs of `group` (files whose spans overlap), in key ranges on all cores
    /// for large groups, and fails on the first key two of their live rows share.
    async fn merge_check(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        files: &[Indexed],
        group: &[usize],
    ) -> Result<()> {
        if group.len() < 2 {
            return Ok(());
        }
        let ats: Vec<BlobAt<'_>> = group
            .iter()
            .map(|&i| {
                let a = &files[i].artifact;
                BlobAt {
                    bundle_path: &a.lineage.bundle_path,
                    blob_offset: a.lineage.blob_offset,
                    ordered: &a.ordered,
                }
            })
            .collect();
        let dirs = merge::read_directories(&self.reader, &ats).await?;
        let entries: u64 = group
            .iter()
            .map(|&i| files[i].artifact.ordered.entries)
            .sum();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let splits = if cores > 1 && entries >= PARALLEL_CHECK_ENTRIES {
            merge::split_keys(dirs.iter().map(|(_, d)| d), entries, cores)
        } else {
            Vec::new()
        };
        let n = splits.len() + 1;
        let chunk = merge::chunk_for(group.len() * n);
        let members: Arc<Vec<Indexed>> =
            Arc::new(group.iter().map(|&i| files[i].clone()).collect());
        let mut tasks = Vec::with_capacity(n);
        for part in 0..n {
            let lo = part.checked_sub(1).map(|i| splits[i].clone());
            let hi = splits.get(part).cloned();
            let mut inputs = Vec::with_capacity(group.len());
            for (&i, (loc, dir)) in group.iter().zip(&dirs) {
                inputs.push(MergeInput {
                    stream: BlobStream::open_range(
                        self.reader.clone(),
                        loc.clone(),
                        files[i].artifact.lineage.blob_offset,
                        dir.clone(),
                        chunk,
                        lo.clone(),
                        hi.clone(),
                    )
                    .await?,
                    map: Box::new(Some),
                });
            }
            tasks.push(tokio::spawn(first_shared(
                inputs,
                members.clone(),
                ix.key.clone(),
            )));
        }
        // Every range is checked; the first in key order that found a pair reports it.
        let mut found = None;
        for t in tasks {
            let r = match t.await {
                Ok(r) => r?,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            found = found.or(r);
        }
        match found {
            Some(((a, pa), (b, pb))) => Err(Self::constraint(
                tr,
                ix,
                (&members[a], pa),
                (&members[b].file.path, members[b].row(pb)),
            )),
            None => Ok(()),
        }
    }

    /// Fails [`Error::Constraint`] when a key of `new` (non-NULL keys of rows being
    /// registered, with their rows and file paths) is held twice among them or by a live row
    /// of `existing`. Reads, per existing file whose span can hold a new key, its directory and
    /// only the blocks that can hold them.
    pub(crate) async fn probe_unique(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        existing: &[Indexed],
        new: &mut [(Vec<u8>, RowIdentity)],
        paths: &HashMap<u64, String>,
    ) -> Result<()> {
        let name = |id: RowIdentity| paths.get(&id.file_id).map_or("?", |s| s.as_str());
        new.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.row_id.cmp(&b.1.row_id)));
        for w in new.windows(2) {
            if w[0].0 == w[1].0 && w[0].1 != w[1].1 {
                return Err(Error::Constraint {
                    index: format!("{}.{}", tr.name, ix.name),
                    existing: row_name(name(w[0].1), w[0].1),
                    row: row_name(name(w[1].1), w[1].1),
                });
            }
        }
        let (Some(lo), Some(hi)) = (new.first(), new.last()) else {
            return Ok(());
        };
        for f in existing {
            let Some((flo, fhi)) = f.span() else {
                continue;
            };
            if fhi < lo.0 || flo > hi.0 {
                continue;
            }
            let a = &f.artifact;
            let at = BlobAt {
                bundle_path: &a.lineage.bundle_path,
                blob_offset: a.lineage.blob_offset,
                ordered: &a.ordered,
            };
            let (loc, dir) = merge::read_directory(&self.reader, &at).await?;
            // The blocks that can hold a new key, then runs of consecutive ones per request.
            let mut wanted: Vec<usize> = Vec::new();
            for (k, _) in new.iter() {
                if k.as_slice() < flo.as_slice() || k.as_slice() > fhi.as_slice() {
                    continue;
                }
                wanted.extend(
                    dir.blocks_for(Bound::Included(k.as_slice()), Bound::Included(k.as_slice())),
                );
            }
            wanted.sort_unstable();
            wanted.dedup();
            let mut i = 0;
            while i < wanted.len() {
                let mut j = i + 1;
                while j < wanted.len() && wanted[j] == wanted[j - 1] + 1 {
                    j += 1;
                }
                let mut hit: Option<(u64, RowIdentity)> = None;
                merge::read_blocks(
                    &self.reader,
                    &loc,
                    f.artifact.lineage.blob_offset,
                    &dir.blocks[wanted[i]..=wanted[j - 1]],
                    |k, p| {
                        if hit.is_none() && f.live(p) {
                            if let Ok(n) = new.binary_search_by(|(nk, _)| nk.as_slice().cmp(k)) {
                                hit = Some((p, new[n].1));
                            }
                        }
                    },
                )
                .await?;
                if let Some((p, id)) = hit {
                    return Err(Self::constraint(tr, ix, (f, p), (name(id), id)));
                }
                i = j;
            }
        }
        Ok(())
    }

    /// Flips a building unique index to ready once every file is indexed and no two live
    /// rows share a key (the cross-file merge); a duplicate poisons it (`E_CONSTRAINT`).
    /// Returns the index's state after the call. A registration or build step committed
    /// between the merge and the flip makes it merge again (at most [`FLIP_RETRIES`] times).
    /// `e`, after poisoning `ix` when it is a constraint violation.
    async fn poison_on_constraint(
        &self,
        tr: &TableRecord,
        ix: &IndexRecord,
        e: Error,
    ) -> Result<Error> {
        if matches!(e, Error::Constraint { .. }) {
            self.poison(tr, ix).await?;
        }
        Ok(e)
    }

    pub(crate) async fn finish_unique(&self, table: &str, index: &str) -> Result<IndexState> {
        let mut attempts = 0;
        loop {
            let t = self.catalog.begin()?;
            let tr = self.catalog.table(&t, table).await?;
            let ix = self.catalog.index(&t, &tr, index).await?;
            if !ix.state.catching_up() || !ix.unique {
                return Ok(ix.state);
            }
            let files = self.catalog.files(&t, tr.table_id).await?;
            let artifacts: HashMap<u64, IndexFileEntry> =
                self.catalog.artifacts_by_file(&t, ix.index_id).await?;
            let cursor: Option<BuildCursor> = t.get(&cursor_key(ix.index_id)).await?;
            let previous: Vec<TableRun> = t.runs(ix.index_id).await?;
            drop(t);
            let live = indexed(&tr, &files, &artifacts)?;
            if cursor.is_some() || live.len() != files.len() {
                return Ok(IndexState::Building); // rows left to index, or files skipped
            }
            // The table run, written now, checks uniqueness in the same pass (equal keys meet
            // in its merge); without one (small tables, runs that cannot be made), the merge
            // of overlapping blobs checks it.
            let mut run = None;
            if live.len() >= RUN_MIN_FILES {
                let covered: Vec<(FileEntry, IndexFileEntry)> = live
                    .iter()
                    .map(|m| (m.file.clone(), m.artifact.clone()))
                    .collect();
                let check = UniqueCheck {
                    members: live.clone(),
                    key: ix.key.clone(),
                    index: format!("{}.{}", tr.name, ix.name),
                };
                run = match self
                    .run_writer(self.run_bundle_path(&tr, &ix).await?)
                    .write_run(
                        &tr,
                        &ix,
                        &covered,
                        &previous.iter().collect::<Vec<_>>(),
                        Some(check),
                    )
                    .await
                {
                    Ok(run) => run,
                    Err(e) => return Err(self.poison_on_constraint(&tr, &ix, e).await?),
                };
            }
            if run.is_none() {
                if let Err(e) = self.check_unique_across(&tr, &ix, &live).await {
                    return Err(self.poison_on_constraint(&tr, &ix, e).await?);
                }
            }
            let t = self.catalog.begin()?;
            let tr_now = self.catalog.table(&t, table).await?;
            let rec: Option<IndexRecord> = t.get(&index_key(tr.table_id, ix.index_id)).await?;
            let rec = rec.filter(|r| {
                tr_now.snapshot == tr.snapshot
                    && r.generation == ix.generation
                    && r.state.catching_up()
            });
            let committed = match rec {
                Some(mut rec) => {
                    rec.state = IndexState::Ready;
                    rec.generation += 1;
                    t.put(&index_key(tr.table_id, ix.index_id), &rec)?;
                    if let Some(run) = &run {
                        t.put_runs(ix.index_id, std::slice::from_ref(run)).await?;
                    }
                    t.delete(&certificate_key(ix.index_id))?;
                    t.bump_version().await?;
                    t.commit().await
                }
                None => Err(Error::Conflict(format!(
                    "{}.{} changed while its uniqueness was checked",
                    tr.name, ix.name
                ))),
            };
            if committed.is_err() {
                if let Some(run) = &run {
                    self.delete_objects(std::slice::from_ref(&run.bundle_path))
                        .await;
                }
            }
            match committed {
                Ok(()) => {
                    self.invalidate();
                    return Ok(IndexState::Ready);
                }
                Err(Error::Conflict(_)) if attempts < FLIP_RETRIES => attempts += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{KeyColumn, Value};

    #[test]
    fn first_duplicate_skips_nulls_and_deleted_rows() {
        let key = KeySchema {
            columns: vec![KeyColumn::new(crate::values::KeyType::Int64)],
        };
        let k = |v: Option<i64>| key.encode(&[v.map_or(Value::Null, Value::Int)]).unwrap();
        let mut e = vec![
            (k(Some(1)), 0),
            (k(Some(2)), 1),
            (k(None), 2),
            (k(None), 3),
            (k(Some(2)), 4),
            (k(Some(3)), 5),
        ];
        e.sort();
        let it = || e.iter().map(|(k, p)| (k.as_slice(), *p));
        assert_eq!(first_duplicate(&key, it(), None).unwrap(), Some((1, 4)));
        let mut mask = RoaringTreemap::new();
        mask.insert(4);
        assert_eq!(first_duplicate(&key, it(), Some(&mask)).unwrap(), None);
        mask.clear();
        mask.insert(1);
        assert_eq!(first_duplicate(&key, it(), Some(&mask)).unwrap(), None);
    }
}
