//! Pruning files with indexes that answer `prune` (bloom, `docs/bloom-index.md`): for a
//! predicate fixing a column to a few values (`=`, IN, IS NULL), the files whose filter
//! excludes every one of them hold no match and are skipped. Files the index's table run
//! covers are tested through the run ([`crate::index::Kind::run_may_hold`]: for bloom, one
//! range read per key), other files through their own blob ([`crate::index::Kind::may_hold`]).
//! A filter that cannot be read or fails its checks prunes nothing: its file is scanned, the
//! rejection reported.

use std::collections::HashMap;

use crate::formats::lineage::{GateDecision, RejectReason, Rejection};
use crate::formats::manifest::{IndexFileEntry, IndexManifest, TableManifest};
use crate::read::lookup::{reaches, BlobRef, Pinned, FILE_WINDOW};
use crate::read::predicate::Predicate;
use crate::read::range::ByteRange;
use crate::values::KeyError;

/// Most keys one prune tests (a longer IN list prunes nothing: it would read more than the
/// scans it saves).
pub const MAX_BLOOM_KEYS: usize = 256;

/// What a bloom index pruned.
#[derive(Debug, Default)]
pub struct BloomPrune<'m> {
    pub index: Option<&'m IndexManifest>,
    /// Per `t.files` index: no key can be in the file.
    pub pruned: Vec<bool>,
    /// Files a table run answered for (pruned or not).
    pub by_run: u64,
    pub rejections: Vec<Rejection>,
}

impl Pinned<'_> {
    /// The files of `t` a ready one-column bloom index excludes for `pred`, or `None` when
    /// no bloom index applies (no predicate column fixed to at most [`MAX_BLOOM_KEYS`] values
    /// has one).
    pub(crate) async fn bloom_prune<'m>(
        &self,
        t: &'m TableManifest,
        pred: &Predicate,
    ) -> crate::error::Result<Option<BloomPrune<'m>>> {
        if self.scan_only {
            return Ok(None);
        }
        let Some((ix, keys)) = bloom_candidate(t, pred)? else {
            return Ok(None);
        };
        self.prune_with(t, ix, keys).await.map(Some)
    }

    async fn prune_with<'m>(
        &self,
        t: &'m TableManifest,
        ix: &'m IndexManifest,
        keys: Vec<Vec<u8>>,
    ) -> crate::error::Result<BloomPrune<'m>> {
        self.load_part(t, ix).await?;
        let mut out = BloomPrune {
            index: Some(ix),
            pruned: vec![false; t.files.len()],
            by_run: 0,
            rejections: vec![],
        };
        let ranges: Vec<ByteRange> = keys.iter().map(|k| ByteRange::prefix(k.clone())).collect();
        // 1. The striped runs (one stripe each, in one round), each for the files it
        // answers: those it still covers and no newer run does.
        let mut covered = vec![false; t.files.len()];
        let runs = ix.table_runs();
        let coverages = t.tier_coverage(&runs);
        let probed =
            futures::future::join_all(runs.iter().zip(&coverages).map(|(run, coverage)| async {
                match coverage.iter().any(Option::is_some) {
                    true => self.probe_stripes(ix, run, &keys).await,
                    false => Ok(vec![]), // it answers no file
                }
            }))
            .await;
        for ((run, coverage), got) in runs.iter().zip(&coverages).zip(probed) {
            match got {
                Ok(may) => {
                    for (ordinal, file) in coverage.iter().enumerate() {
                        if let Some(i) = *file {
                            covered[i] = true;
                            out.by_run += 1;
                            out.pruned[i] = !may[ordinal];
                        }
                    }
                }
                Err(reason) => out.rejections.push(Rejection {
                    data_file: run.bundle_path.clone(),
                    index_id: Some(ix.index_id),
                    bundle_path: Some(run.bundle_path.clone()),
                    reason,
                }),
            }
        }
        // 2. Each other file's own filter.
        let by_file: HashMap<u64, &IndexFileEntry> =
            ix.file_entries().iter().map(|e| (e.file_id, e)).collect();
        let todo: Vec<(usize, &IndexFileEntry)> = t
            .files
            .iter()
            .enumerate()
            .filter(|(i, _)| !covered[*i])
            .filter_map(|(i, f)| {
                let e = by_file.get(&f.file_id)?;
                matches!(e.gate(f, t.snapshot), GateDecision::Accept).then_some((i, *e))
            })
            .collect();
        for window in todo.chunks(FILE_WINDOW) {
            let answers = futures::future::join_all(window.iter().map(|(i, e)| {
                let (keys, ranges) = (&keys, &ranges);
                async move {
                    if !reaches(&e.ordered, ranges) {
                        return (*i, *e, Ok(false));
                    }
                    (*i, *e, self.probe_filter(ix, e, keys).await)
                }
            }))
            .await;
            for (i, e, a) in answers {
                match a {
                    Ok(may) => out.pruned[i] = !may,
                    Err(reason) => out.rejections.push(Rejection {
                        data_file: t.files[i].path.clone(),
                        index_id: Some(ix.index_id),
                        bundle_path: Some(e.lineage.bundle_path.clone()),
                        reason,
                    }),
                }
            }
        }
        Ok(out)
    }

    /// Per run ordinal: may any key be in that file? The kind reads its run.
    async fn probe_stripes(
        &self,
        ix: &IndexManifest,
        run: &crate::formats::manifest::TableRun,
        keys: &[Vec<u8>],
    ) -> Result<Vec<bool>, RejectReason> {
        let files = run.files.len() as u64;
        let Some(kind) = crate::index::kind::of(ix.kind()) else {
            return Ok(vec![true; files as usize]);
        };
        let blob = self.blobs().at(BlobRef {
            bundle_path: &run.bundle_path,
            offset: run.blob_offset,
            length: run.blob_length,
            ordered: &run.ordered,
            rows: None,
        });
        kind.run_may_hold(&blob, files, keys)
            .await
            .map_err(|err| blob.reject(err))
    }

    /// May any key be in the file of `e`? Its kind's filter says.
    async fn probe_filter(
        &self,
        ix: &IndexManifest,
        e: &IndexFileEntry,
        keys: &[Vec<u8>],
    ) -> Result<bool, RejectReason> {
        let Some(kind) = crate::index::kind::of(ix.kind()) else {
            return Ok(true);
        };
        let blob = self.blobs().at(BlobRef::of(e));
        kind.may_hold(&blob, keys)
            .await
            .map_err(|err| blob.reject(err))
    }
}

/// The ready one-column bloom index of the first predicate column fixed to at most
/// [`MAX_BLOOM_KEYS`] values (`=`, IN, IS NULL) that has one, with those values' canonical
/// keys; `None` when no bloom index applies.
pub(crate) fn bloom_candidate<'m>(
    t: &'m TableManifest,
    pred: &Predicate,
) -> crate::error::Result<Option<(&'m IndexManifest, Vec<Vec<u8>>)>> {
    let mut chosen = None;
    'columns: for c in &pred.columns {
        let Some(values) = c.fixed() else { continue };
        if values.len() > MAX_BLOOM_KEYS {
            continue;
        }
        for ix in t.indexes.iter().filter(|ix| {
            ix.state.serves() && ix.kind().answers().prune && ix.fields.as_slice() == [c.field_id]
        }) {
            let mut keys = Vec::with_capacity(values.len());
            for v in &values {
                let v = if v.is_null() {
                    v.clone()
                } else {
                    ix.key.coerce(vec![v.clone()])?.remove(0)
                };
                match ix.key.encode(&[v]) {
                    Ok(k) => keys.push(k),
                    // Too large to be indexed: no row holds it.
                    Err(KeyError::ValueTooLarge { .. } | KeyError::KeyTooLarge { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            keys.sort();
            keys.dedup();
            chosen = Some((ix, keys));
            break 'columns;
        }
    }
    Ok(chosen)
}
