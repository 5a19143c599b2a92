//! Probing an ordered blob through [`BlobAccess`]: its directory (read once and cached), the
//! blocks a probe's ranges can touch, fetched in one coalesced round, each scanned and
//! checked against the directory's hash. The same reader answers a merged table run.

use std::ops::Bound;
use std::sync::Arc;

use super::{scan_block, OrderedDirectory};
use crate::index::access::{directory, BlobAccess, KeyProbe};
use crate::index::blob::{BlobError, ByteRange};

/// The parsed directory's size in the read cache.
pub fn directory_bytes(d: &OrderedDirectory) -> u64 {
    64 + d.max_key.len() as u64
        + d.blocks
            .iter()
            .map(|b| 64 + b.first_key.len() as u64)
            .sum::<u64>()
}

/// The blob's directory (cached, or read and verified) and the blocks the probe's ranges can
/// touch, in order, with the ranges that reach the blob at all; `None` when the blob's key
/// bounds exclude every range (nothing read).
#[allow(clippy::type_complexity)]
async fn wanted_blocks<'p>(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'p>,
) -> Result<Option<(Arc<OrderedDirectory>, Vec<usize>, Vec<&'p ByteRange>)>, BlobError> {
    let Some((min, max)) = blob.meta().key_bounds()? else {
        return Ok(None); // empty blob
    };
    let live: Vec<&ByteRange> = probe
        .ranges
        .iter()
        .filter(|r| r.meets(&min, &max))
        .collect();
    if live.is_empty() {
        return Ok(None);
    }
    let dir = directory(
        blob,
        |bytes, m| OrderedDirectory::parse(bytes, Some(&m.directory_sha256), m.directory_offset),
        directory_bytes,
    )
    .await?;
    let mut wanted: Vec<usize> = live
        .iter()
        .flat_map(|r| {
            let hi = match &r.end {
                Some(e) => Bound::Excluded(e.as_slice()),
                None => Bound::Unbounded,
            };
            dir.blocks_for(Bound::Included(r.start.as_slice()), hi)
        })
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    Ok(Some((dir, wanted, live)))
}

/// About how many entries a probe of the blob matches, from the directory alone: the entries
/// of every block that lies wholly inside a probed range, and one for each block a range only
/// enters (a point key is one entry, not its block's). `None` when the directory cannot be
/// had.
pub async fn estimate(blob: &dyn BlobAccess, probe: &KeyProbe<'_>) -> Option<u64> {
    let (dir, wanted, live) = match wanted_blocks(blob, probe).await {
        Ok(None) => return Some(0),
        Ok(Some(w)) => w,
        Err(_) => return None,
    };
    let inside = |i: usize| {
        let first = dir.blocks[i].first_key.as_slice();
        let last_bound = dir.blocks.get(i + 1).map(|n| n.first_key.as_slice());
        live.iter().any(|r| {
            first >= r.start.as_slice()
                && match (&r.end, last_bound) {
                    (None, _) => true,
                    (Some(end), Some(next)) => next <= end.as_slice(),
                    (Some(end), None) => dir.max_key.as_slice() < end.as_slice(),
                }
        })
    };
    Some(
        wanted
            .iter()
            .map(|&i| if inside(i) { dir.blocks[i].entries } else { 1 })
            .fold(0u64, u64::saturating_add),
    )
}

/// The probe's `(key, position)` entries, in key then position order; `None` when the blob's
/// key bounds exclude every range (nothing read).
pub async fn rows(
    blob: &dyn BlobAccess,
    probe: &KeyProbe<'_>,
) -> Result<Option<Vec<(Vec<u8>, u64)>>, BlobError> {
    let Some((dir, wanted, live)) = wanted_blocks(blob, probe).await? else {
        return Ok(None);
    };
    let spans: Vec<_> = wanted
        .iter()
        .map(|&i| &dir.blocks[i])
        .map(|k| Some(k.offset..k.offset.checked_add(k.length)?))
        .collect::<Option<_>>()
        .ok_or(BlobError::Corrupt("blob range overflows"))?;
    // Cached blocks are served as they are (each is verified against the directory's hash
    // when scanned); the rest in one coalesced read, then cached.
    let fetched = blob.read(&spans).await?;
    let rows = blob.rows();
    let mut entries = Vec::new();
    let mut bad = None;
    let mut bad_position = false;
    for (&i, bytes) in wanted.iter().zip(&fetched) {
        scan_block(bytes, &dir.blocks[i], |k, p| {
            if rows.is_some_and(|n| p >= n) {
                bad_position = true;
                return false;
            }
            if live.iter().any(|r| r.contains(k)) {
                match probe.keep.map_or(Ok(true), |f| f(k)) {
                    Ok(true) => entries.push((k.to_vec(), p)),
                    Ok(false) => {}
                    Err(e) => bad = Some(e),
                }
            }
            true
        })?;
    }
    if let Some(e) = bad {
        return Err(BlobError::Unusable(format!("undecodable key: {e}")));
    }
    if bad_position {
        return Err(BlobError::Unusable(
            "an entry names a position past the file's rows".into(),
        ));
    }
    Ok(Some(entries))
}
