//! Pruning files with bloom indexes (`docs/bloom-index.md`): for a predicate fixing a column
//! to a few values (`=`, IN, IS NULL), the files whose filter excludes every one of them hold
//! no match and are skipped. Files the index's striped run covers are tested with one range
//! read per key (one stripe holds that key's block of every file; neighbouring stripes
//! coalesce); other files through their own filter (its page hashes, read once
//! and cached, then one page per key). A filter that cannot be read or fails its checks prunes
//! nothing: its file is scanned, the rejection reported.

use std::collections::HashMap;

use crate::formats::lineage::{GateDecision, RejectReason, Rejection};
use crate::formats::manifest::{IndexFileEntry, IndexManifest, TableManifest};
use crate::index::bloom::{self, BloomPages};
use crate::io::Location;
use crate::read::lookup::{index_io, reaches, run_coverage, Lookup, FILE_WINDOW};
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
    pub rejections: Vec<Rejection>,
}

impl Lookup<'_> {
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
            rejections: vec![],
        };
        let ranges: Vec<ByteRange> = keys.iter().map(|k| ByteRange::prefix(k.clone())).collect();
        // 1. The striped run, for the files it still covers.
        let mut covered = vec![false; t.files.len()];
        if let Some(run) = ix.table_run() {
            let coverage = run_coverage(t, run);
            match self.probe_stripes(run, &keys).await {
                Ok(may) => {
                    for (ordinal, file) in coverage.iter().enumerate() {
                        if let Some(i) = *file {
                            covered[i] = true;
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
                    (*i, *e, self.probe_filter(e, keys).await)
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

    /// Per run ordinal: may any key be in that file? One coalesced read of the keys' stripes.
    async fn probe_stripes(
        &self,
        run: &crate::formats::manifest::TableRun,
        keys: &[Vec<u8>],
    ) -> Result<Vec<bool>, RejectReason> {
        let files = run.files.len() as u64;
        let corrupt = |m: &str| RejectReason::Corrupt {
            message: m.to_string(),
        };
        let blocks = run
            .ordered
            .blocks
            .ok_or_else(|| corrupt("a bloom run without blocks"))?;
        if blocks == 0
            || !blocks.is_power_of_two()
            || blocks > bloom::MAX_BLOCKS
            || bloom::stripe_range(blocks - 1, files)
                .end
                .checked_add(bloom::STRIPES_TRAILER_LEN)
                != Some(run.blob_length)
        {
            return Err(corrupt("bloom run size"));
        }
        let mut stripes: Vec<u64> = keys.iter().map(|k| bloom::block_of(k, blocks)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let spans: Vec<_> = stripes
            .iter()
            .map(|&b| {
                let r = bloom::stripe_range(b, files);
                run.blob_offset + r.start..run.blob_offset + r.end
            })
            .collect();
        let cached: Vec<Option<bytes::Bytes>> = spans
            .iter()
            .map(|r| self.cache.block(&run.bundle_path, r.start, r.end))
            .collect();
        let bundle = Location::new(&run.bundle_path);
        // One stripe per key (neighbouring stripes coalesce into one request).
        let gap = self.overlay.coalesce_gap();
        let fetched =
            crate::io::read_missing(self.overlay, &bundle, &spans, cached, gap, |r, b| {
                self.cache
                    .put_block(&run.bundle_path, r.start, r.end, b.clone())
            })
            .await
            .map_err(index_io)?;
        let mut may = vec![false; files as usize];
        for (b, bytes) in stripes.iter().zip(&fetched) {
            let blocks_of =
                bloom::stripe_blocks(bytes, *b, files).map_err(|e| RejectReason::Corrupt {
                    message: e.to_string(),
                })?;
            for k in keys.iter().filter(|k| bloom::block_of(k, blocks) == *b) {
                for (ordinal, block) in blocks_of.iter().enumerate() {
                    if !may[ordinal] && bloom::block_may_hold(block, k) {
                        may[ordinal] = true;
                    }
                }
            }
        }
        Ok(may)
    }

    /// May any key be in the file of `e`? Its page hashes (cached), then the keys' pages.
    async fn probe_filter(
        &self,
        e: &IndexFileEntry,
        keys: &[Vec<u8>],
    ) -> Result<bool, RejectReason> {
        let l = &e.lineage;
        let m = &e.ordered;
        let corrupt = |m: String| RejectReason::Corrupt { message: m };
        let blocks = m
            .blocks
            .ok_or_else(|| corrupt("a bloom filter without blocks".into()))?;
        if m.directory_offset
            .checked_add(m.directory_length)
            .is_none_or(|end| end > l.blob_length)
            || blocks.checked_mul(bloom::BLOCK as u64) != Some(m.directory_offset)
        {
            return Err(corrupt("bloom page directory outside the blob".into()));
        }
        let start = l.blob_offset + m.directory_offset;
        let span = start..start + m.directory_length;
        let bytes = match self.cache.block(&l.bundle_path, span.start, span.end) {
            Some(b) => b,
            None => {
                let b = self
                    .overlay
                    .read_range(&Location::new(&l.bundle_path), span.clone())
                    .await
                    .map_err(index_io)?;
                self.cache
                    .put_block(&l.bundle_path, span.start, span.end, b.clone());
                b
            }
        };
        let pages = BloomPages::parse(&bytes, &m.directory_sha256, blocks)
            .map_err(|e| corrupt(e.to_string()))?;
        let mut wanted: Vec<u64> = keys.iter().map(|k| bloom::block_of(k, blocks)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let spans: Vec<_> = wanted
            .iter()
            .map(|&b| {
                let r = pages.page_range(b);
                l.blob_offset + r.start..l.blob_offset + r.end
            })
            .collect();
        let cached: Vec<Option<bytes::Bytes>> = spans
            .iter()
            .map(|r| self.cache.block(&l.bundle_path, r.start, r.end))
            .collect();
        let gap = self.overlay.coalesce_gap();
        let fetched = crate::io::read_missing(
            self.overlay,
            &Location::new(&l.bundle_path),
            &spans,
            cached,
            gap,
            |r, b| {
                self.cache
                    .put_block(&l.bundle_path, r.start, r.end, b.clone())
            },
        )
        .await
        .map_err(index_io)?;
        for (b, page) in wanted.iter().zip(&fetched) {
            let block = pages.block(page, *b).map_err(|e| corrupt(e.to_string()))?;
            if keys
                .iter()
                .any(|k| bloom::block_of(k, blocks) == *b && bloom::block_may_hold(block, k))
            {
                return Ok(true);
            }
        }
        Ok(false)
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
