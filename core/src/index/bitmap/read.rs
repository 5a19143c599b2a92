//! Probing a bitmap blob through [`BlobAccess`]: the directory (read once per blob and
//! cached), the values a probe selects, and their bitmaps — fetched in one coalesced read,
//! verified and decoded. A bitmap answers what an ordered blob answers (the `(key, position)`
//! entries of a probe) and, from its directory alone, how many rows hold each selected value.

use std::ops::Bound;
use std::sync::Arc;

use roaring::{RoaringBitmap, RoaringTreemap};

use super::run::{self, RunDirectory};
use super::{decode_bitmap, BitmapDirectory};
use crate::index::access::{directory, BlobAccess, KeyProbe, Positions, RunPositions, RunWant};
use crate::index::blob::BlobError;

/// Most positions a probe of one bitmap blob expands into entries (a bound on what a query
/// allocates; larger answers are counted, or refused by the query's row limit first).
pub const MAX_EXPANDED_POSITIONS: u64 = 1 << 26;

/// The blob's directory: cached, or read (one range request), verified against the
/// manifest's SHA-256, checked against its cardinalities and cached.
async fn bitmap_directory(blob: &dyn BlobAccess) -> Result<Arc<BitmapDirectory>, BlobError> {
    let rows = blob.rows();
    directory(
        blob,
        |bytes, m| {
            if bytes.is_empty() {
                return Err(BlobError::Corrupt("empty directory"));
            }
            let d = BitmapDirectory::parse(bytes, Some(&m.directory_sha256), m.directory_offset)?;
            if d.positions() != m.entries || rows.is_some_and(|n| m.entries > n) {
                return Err(BlobError::Unusable(
                    "the directory's cardinalities disagree with the manifest".into(),
                ));
            }
            Ok(d)
        },
        |d: &BitmapDirectory| {
            64 + d
                .values
                .iter()
                .map(|v| 64 + v.key.len() as u64)
                .sum::<u64>()
        },
    )
    .await
}

/// Indices of the directory's values the probe selects (its byte ranges, then its exact
/// condition on the key), in key order; `None` when the blob's key bounds exclude every
/// range (nothing read).
async fn selected(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'_>,
) -> Result<Option<(Arc<BitmapDirectory>, Vec<usize>)>, BlobError> {
    let m = blob.meta();
    if m.min_key.is_none() && m.max_key.is_none() {
        return Ok(None); // an empty blob
    }
    if !m.reaches(probe.ranges) {
        return Ok(None);
    }
    let dir = bitmap_directory(blob).await?;
    let mut out = Vec::new();
    for r in probe.ranges {
        let hi = match &r.end {
            Some(e) => Bound::Excluded(e.as_slice()),
            None => Bound::Unbounded,
        };
        out.extend(dir.values_in(Bound::Included(r.start.as_slice()), hi));
    }
    out.sort_unstable();
    out.dedup();
    if probe.keep.is_some() {
        let mut kept = Vec::with_capacity(out.len());
        for i in out {
            if probe.wants(&dir.values[i].key)? {
                kept.push(i);
            }
        }
        out = kept;
    }
    Ok(Some((dir, out)))
}

/// The bitmaps of `values` (indices into `dir`), in that order: cached blocks as they are,
/// the rest in one coalesced read (then cached); each verified and decoded.
async fn bitmaps(
    blob: &dyn BlobAccess,
    dir: &BitmapDirectory,
    values: &[usize],
) -> Result<Vec<RoaringBitmap>, BlobError> {
    let spans: Vec<_> = values
        .iter()
        .map(|&i| {
            let v = &dir.values[i];
            Some(v.offset..v.offset.checked_add(v.length)?)
        })
        .collect::<Option<_>>()
        .ok_or(BlobError::Corrupt("blob range overflows"))?;
    let fetched = blob.read(&spans).await?;
    values
        .iter()
        .zip(&fetched)
        .map(|(&i, bytes)| decode_bitmap(bytes, &dir.values[i], blob.rows()))
        .collect()
}

/// The probe's entries, as an ordered blob would give them (key order, then position);
/// `None` when the blob's key bounds exclude every range.
pub async fn rows(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'_>,
) -> Result<Option<Vec<(Vec<u8>, u64)>>, BlobError> {
    let Some((dir, values)) = selected(blob, probe).await? else {
        return Ok(None);
    };
    let total: u64 = values.iter().map(|&i| dir.values[i].cardinality).sum();
    if total > MAX_EXPANDED_POSITIONS {
        return Err(BlobError::Unusable(format!(
            "the probe names {total} positions, over the {MAX_EXPANDED_POSITIONS} one blob expands"
        )));
    }
    let maps = bitmaps(blob, &dir, &values).await?;
    let mut entries = Vec::with_capacity(total as usize);
    for (&i, bm) in values.iter().zip(&maps) {
        let k = &dir.values[i].key;
        entries.extend(bm.iter().map(|p| (k.clone(), u64::from(p))));
    }
    Ok(Some(entries))
}

/// The entries a probe names, from the directory alone: the selected values' cardinalities
/// (exact, unlike an ordered blob's block estimate). `None` when the directory cannot be had.
pub async fn estimate(blob: &dyn BlobAccess, probe: &KeyProbe<'_>) -> Option<u64> {
    match selected(blob, probe).await {
        Ok(None) => Some(0),
        Ok(Some((dir, values))) => Some(values.iter().map(|&i| dir.values[i].cardinality).sum()),
        Err(_) => None,
    }
}

/// The rows a probe selects: their count from the directory alone when `only_count` (a
/// blob's values hold disjoint rows), else their positions, unioned.
pub async fn positions(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'_>,
    only_count: bool,
) -> Result<Option<Positions>, BlobError> {
    let Some((dir, values)) = selected(blob, probe).await? else {
        return Ok(None);
    };
    if only_count {
        let n = values.iter().map(|&i| dir.values[i].cardinality).sum();
        return Ok(Some(Positions::Count(n)));
    }
    let mut all = RoaringBitmap::new();
    for m in bitmaps(blob, &dir, &values).await? {
        all |= m;
    }
    Ok(Some(Positions::Set(RoaringTreemap::from_bitmaps([(
        0u32, all,
    )]))))
}

/// A table run's directory (`files` covered files): cached, or read (one range request),
/// verified against the manifest's SHA-256 and its positions, and cached.
async fn run_directory(run: &dyn BlobAccess, files: u64) -> Result<Arc<RunDirectory>, BlobError> {
    directory(
        run,
        |bytes, m| {
            let d =
                RunDirectory::parse(bytes, Some(&m.directory_sha256), m.directory_offset, files)?;
            if d.values.iter().map(|v| v.cardinality).sum::<u64>() != m.entries {
                return Err(BlobError::Unusable(
                    "the run's cardinalities disagree with the manifest".into(),
                ));
            }
            Ok(d)
        },
        |d: &RunDirectory| {
            64 + d
                .values
                .iter()
                .map(|v| 80 + v.key.len() as u64)
                .sum::<u64>()
        },
    )
    .await
}

/// Per covered file of a table run (by ordinal, `want.len()` of them), what `want` asks of
/// the rows `probe` selects. When every file is asked how many: their total from the
/// directory alone (nothing more read). Otherwise one coalesced read of the selected values'
/// file lists (how many rows each file holds), then — only for files whose positions are
/// wanted — one of their bitmaps; files holding no selected value get `Count(0)` or an empty
/// set.
pub async fn run_positions(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'_>,
    want: &[RunWant],
) -> Result<RunPositions, BlobError> {
    let files = want.len() as u64;
    let total = want.iter().all(|w| *w == RunWant::Count);
    let mut out: Vec<Option<Positions>> = want
        .iter()
        .map(|w| match w {
            RunWant::Skip => None,
            RunWant::Count => Some(Positions::Count(0)),
            RunWant::Set { .. } => Some(Positions::Set(RoaringTreemap::new())),
        })
        .collect();
    let m = blob.meta();
    if m.min_key.is_none() && m.max_key.is_none() || !m.reaches(probe.ranges) {
        return Ok(if total {
            RunPositions::Total(0)
        } else {
            RunPositions::PerFile(out)
        });
    }
    let dir = run_directory(blob, files).await?;
    let mut values = Vec::new();
    for r in probe.ranges {
        let hi = match &r.end {
            Some(e) => Bound::Excluded(e.as_slice()),
            None => Bound::Unbounded,
        };
        values.extend(dir.values_in(Bound::Included(r.start.as_slice()), hi));
    }
    values.sort_unstable();
    values.dedup();
    let mut kept = Vec::with_capacity(values.len());
    for i in values {
        if probe.wants(&dir.values[i].key)? {
            kept.push(i);
        }
    }
    if total {
        return Ok(RunPositions::Total(
            kept.iter().map(|&i| dir.values[i].cardinality).sum(),
        ));
    }
    let spans: Vec<_> = kept.iter().map(|&i| dir.values[i].files_range()).collect();
    let lists = blob.read(&spans).await?;
    let mut sets: Vec<run::FileBitmap> = Vec::new();
    for (&i, bytes) in kept.iter().zip(&lists) {
        for f in run::parse_files(bytes, &dir.values[i], files)? {
            match (&mut out[f.ordinal as usize], want[f.ordinal as usize]) {
                (Some(Positions::Count(n)), RunWant::Count) => *n += f.cardinality,
                (Some(Positions::Set(_)), RunWant::Set { .. }) => sets.push(f),
                _ => {}
            }
        }
    }
    if sets.is_empty() {
        return Ok(RunPositions::PerFile(out));
    }
    let total: u64 = sets.iter().map(|f| f.cardinality).sum();
    if total > MAX_EXPANDED_POSITIONS {
        return Err(BlobError::Unusable(format!(
            "the probe names {total} positions, over the {MAX_EXPANDED_POSITIONS} one run expands"
        )));
    }
    let spans: Vec<_> = sets.iter().map(|f| f.range.clone()).collect();
    let maps = blob.read(&spans).await?;
    let mut by_file: Vec<Option<RoaringBitmap>> = vec![None; want.len()];
    for (f, bytes) in sets.iter().zip(&maps) {
        let RunWant::Set { rows } = want[f.ordinal as usize] else {
            continue;
        };
        let bm = run::decode(bytes, f, rows)?;
        *by_file[f.ordinal as usize].get_or_insert_with(RoaringBitmap::new) |= bm;
    }
    for (o, bm) in by_file.into_iter().enumerate() {
        if let Some(bm) = bm {
            out[o] = Some(Positions::Set(RoaringTreemap::from_bitmaps([(0u32, bm)])));
        }
    }
    Ok(RunPositions::PerFile(out))
}
