//! Reading bitmap blobs (`skerry-bitmap-v1`, [`crate::index::bitmap`]): the directory (read
//! once per blob and cached), the values a probe selects, and their bitmaps — fetched in one
//! coalesced read, verified and decoded. A bitmap answers what an ordered blob answers (the
//! `(key, position)` entries of a probe) and, from its directory alone, how many rows hold
//! each selected value.

use std::ops::Bound;
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::formats::lineage::RejectReason;
use crate::formats::manifest::IndexManifest;
use crate::index::bitmap::{decode_bitmap, BitmapDirectory};
use crate::io::Location;
use crate::read::blob::{index_io, BlobRef, Blobs, Probe};

/// Most positions a probe of one bitmap blob expands into entries (a bound on what a query
/// allocates; larger answers are counted, or refused by the query's row limit first).
pub const MAX_EXPANDED_POSITIONS: u64 = 1 << 26;

impl Blobs<'_> {
    /// The blob's directory: cached, or read (one range request), verified against the
    /// manifest's SHA-256 and cached.
    pub(crate) async fn bitmap_directory(
        &self,
        b: &BlobRef<'_>,
    ) -> Result<Arc<BitmapDirectory>, RejectReason> {
        let m = b.ordered;
        if m.directory_offset
            .checked_add(m.directory_length)
            .is_none_or(|end| end > b.length)
        {
            return Err(RejectReason::Corrupt {
                message: "directory outside the blob".into(),
            });
        }
        let sha = &m.directory_sha256;
        if let Some(d) = self.cache.bitmap_directory(b.bundle_path, b.offset, sha) {
            return Ok(d);
        }
        let start = b
            .offset
            .checked_add(m.directory_offset)
            .ok_or_else(overflow)?;
        let end = start.checked_add(m.directory_length).ok_or_else(overflow)?;
        if start == end {
            return Err(RejectReason::Corrupt {
                message: "empty directory".into(),
            });
        }
        let bytes = self
            .overlay
            .read_range(&Location::new(b.bundle_path), start..end)
            .await
            .map_err(index_io)?;
        let d = BitmapDirectory::parse(&bytes, Some(sha), m.directory_offset)
            .map_err(|e| b.corrupt(e))?;
        if d.positions() != m.entries || b.rows.is_some_and(|n| m.entries > n) {
            return Err(RejectReason::Corrupt {
                message: "the directory's cardinalities disagree with the manifest".into(),
            });
        }
        let d = Arc::new(d);
        self.cache
            .put_bitmap_directory(b.bundle_path, b.offset, sha, d.clone());
        Ok(d)
    }

    /// Indices of the directory's values the probe selects (its byte ranges, then its filter
    /// on the decoded key), in key order; `None` when the blob's key bounds exclude every
    /// range (nothing read).
    pub(crate) async fn bitmap_values(
        &self,
        ix: &IndexManifest,
        b: &BlobRef<'_>,
        probe: &Probe,
    ) -> Result<Option<(Arc<BitmapDirectory>, Vec<usize>)>, RejectReason> {
        if b.ordered.min_key.is_none() && b.ordered.max_key.is_none() {
            return Ok(None); // an empty blob
        }
        if !crate::read::blob::reaches(b.ordered, &probe.ranges) {
            return Ok(None);
        }
        let dir = self.bitmap_directory(b).await?;
        let mut out = Vec::new();
        for r in &probe.ranges {
            let hi = match &r.end {
                Some(e) => Bound::Excluded(e.as_slice()),
                None => Bound::Unbounded,
            };
            out.extend(dir.values_in(Bound::Included(r.start.as_slice()), hi));
        }
        out.sort_unstable();
        out.dedup();
        if let Some(f) = &probe.filter {
            let mut kept = Vec::with_capacity(out.len());
            for i in out {
                let vals =
                    ix.key
                        .decode(&dir.values[i].key)
                        .map_err(|e| RejectReason::Corrupt {
                            message: format!("undecodable key: {e}"),
                        })?;
                if f.matches(&vals) {
                    kept.push(i);
                }
            }
            out = kept;
        }
        Ok(Some((dir, out)))
    }

    /// The bitmaps of `values` (indices into `dir`), in that order: cached blocks as they
    /// are, the rest in one coalesced read (then cached); each verified and decoded.
    pub(crate) async fn bitmaps(
        &self,
        b: &BlobRef<'_>,
        dir: &BitmapDirectory,
        values: &[usize],
    ) -> Result<Vec<RoaringBitmap>, RejectReason> {
        let spans: Vec<_> = values
            .iter()
            .map(|&i| {
                let v = &dir.values[i];
                let start = b.offset.checked_add(v.offset)?;
                Some(start..start.checked_add(v.length)?)
            })
            .collect::<Option<_>>()
            .ok_or_else(overflow)?;
        let cached: Vec<Option<bytes::Bytes>> = spans
            .iter()
            .map(|r| self.cache.block(b.bundle_path, r.start, r.end))
            .collect();
        let gap = self.overlay.coalesce_gap();
        let bundle = Location::new(b.bundle_path);
        let fetched =
            crate::io::read_missing(self.overlay, &bundle, &spans, cached, gap, |r, bytes| {
                self.cache
                    .put_block(b.bundle_path, r.start, r.end, bytes.clone())
            })
            .await
            .map_err(index_io)?;
        values
            .iter()
            .zip(&fetched)
            .map(|(&i, bytes)| {
                decode_bitmap(bytes, &dir.values[i], b.rows).map_err(|e| b.corrupt(e))
            })
            .collect()
    }

    /// The probe's entries from a bitmap blob, as an ordered blob would give them (key order,
    /// then position); `None` when the blob's key bounds exclude every range.
    pub(crate) async fn probe_bitmap(
        &self,
        ix: &IndexManifest,
        b: BlobRef<'_>,
        probe: &Probe,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>, RejectReason> {
        let Some((dir, values)) = self.bitmap_values(ix, &b, probe).await? else {
            return Ok(None);
        };
        let total: u64 = values.iter().map(|&i| dir.values[i].cardinality).sum();
        if total > MAX_EXPANDED_POSITIONS {
            return Err(RejectReason::Corrupt {
                message: format!(
                    "the probe names {total} positions, over the {MAX_EXPANDED_POSITIONS} one blob expands"
                ),
            });
        }
        let maps = self.bitmaps(&b, &dir, &values).await?;
        let mut entries = Vec::with_capacity(total as usize);
        for (&i, bm) in values.iter().zip(&maps) {
            let k = &dir.values[i].key;
            entries.extend(bm.iter().map(|p| (k.clone(), u64::from(p))));
        }
        Ok(Some(entries))
    }

    /// The entries a probe of a bitmap blob names, from its directory alone: the selected
    /// values' cardinalities (exact, unlike an ordered blob's block estimate). `None` when
    /// the directory cannot be had.
    pub(crate) async fn estimate_bitmap(
        &self,
        ix: &IndexManifest,
        b: &BlobRef<'_>,
        probe: &Probe,
    ) -> Option<u64> {
        match self.bitmap_values(ix, b, probe).await {
            Ok(None) => Some(0),
            Ok(Some((dir, values))) => {
                Some(values.iter().map(|&i| dir.values[i].cardinality).sum())
            }
            Err(_) => None,
        }
    }
}

fn overflow() -> RejectReason {
    RejectReason::Corrupt {
        message: "blob range overflows".into(),
    }
}
