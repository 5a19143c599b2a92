//! What a `nearest` reads of one partition-major blob (`skerry-vector-ivf-v1`), through
//! [`BlobAccess`]: its directory (cached decoded), the partitions a query probes (one round
//! of coalesced, cached range reads), and the raw vectors of the candidates it re-ranks (one
//! more round). The engine (`read::nearest`) decides what to probe and merges the files.

use std::sync::Arc;

use super::codebook::{PartitionQuery, VectorCodebook};
use super::ivf::IvfDirectory;
use crate::index::access::{self, BlobAccess};
use crate::index::blob::BlobError;

/// A blob's directory, cached decoded; checked against the index's codebook (`sha`), the
/// metric and the blob's rows.
pub async fn directory(
    blob: &dyn BlobAccess,
    sha: Option<&[u8; 32]>,
    metric: u8,
) -> Result<Arc<IvfDirectory>, BlobError> {
    let d = access::directory(
        blob,
        |bytes, m| IvfDirectory::parse(bytes, Some(&m.directory_sha256), m.directory_offset),
        |d| 64 + d.partitions.len() as u64 * 40,
    )
    .await?;
    if d.entries > 0 {
        if sha != Some(&d.codes.codebook) {
            return Err(BlobError::Unusable(
                "the blob was written against another codebook".into(),
            ));
        }
        if d.codes.metric != metric {
            return Err(BlobError::Unusable(
                "the blob's metric is not the index's".into(),
            ));
        }
    }
    if blob.rows().is_some_and(|r| d.entries > r) {
        return Err(BlobError::Corrupt("more vectors than the file has rows"));
    }
    Ok(d)
}

/// One entry scored by its code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Approx {
    /// The approximate L2 distance in the codebook's space.
    pub score: f32,
    /// The entry's index in the blob (where its raw vector is).
    pub index: u64,
    pub ordinal: u32,
    pub position: u32,
}

/// The entries of partitions `probes` (those the blob holds) for which `keep(ordinal,
/// position)` holds, scored by `query(partition)` — what the query's distances to that
/// partition's codes are computed with (shared by every file) — appended to `out`. Reads the
/// partitions in one round (cached ranges are not read again). A position at or past the
/// file's rows is [`BlobError::Corrupt`].
#[allow(clippy::too_many_arguments)]
pub async fn candidates(
    blob: &dyn BlobAccess,
    dir: &IvfDirectory,
    book: &VectorCodebook,
    probes: &[u32],
    query: &(dyn Fn(usize, u32) -> Arc<PartitionQuery> + Sync),
    first: usize,
    keep: &(dyn Fn(u32, u32) -> bool + Sync),
    out: &mut Vec<Approx>,
) -> Result<(), BlobError> {
    let parts: Vec<(usize, &super::ivf::Partition)> = probes
        .iter()
        .enumerate()
        .filter_map(|(k, p)| dir.partition(*p).map(|x| (first + k, x)))
        .collect();
    if parts.is_empty() {
        return Ok(());
    }
    if dir.codes.code_bytes != book.code_bytes() || dir.codes.bits != book.bits {
        return Err(BlobError::Unusable(
            "the blob's codes are not the codebook's".into(),
        ));
    }
    let spans: Vec<_> = parts.iter().map(|(_, p)| dir.codes_range(p)).collect();
    let got = blob.read(&spans).await?;
    // At most every entry of the probed partitions (counts the directory bounded by the blob).
    out.reserve(parts.iter().map(|(_, p)| p.entries as usize).sum());
    let rows = blob.rows();
    for ((rank, p), bytes) in parts.iter().zip(got) {
        let pq = query(*rank, p.id);
        for f in dir.entries(p, &bytes)? {
            if rows.is_some_and(|r| u64::from(f.position) >= r) {
                return Err(BlobError::Corrupt(
                    "a vector's position past the file's rows",
                ));
            }
            if keep(f.ordinal, f.position) {
                out.push(Approx {
                    score: pq.distance(f.code),
                    index: f.index,
                    ordinal: f.ordinal,
                    position: f.position,
                });
            }
        }
    }
    Ok(())
}

/// Largest gap bridged between two raw vectors read for re-ranking: candidates of one
/// partition a few vectors apart share a request, distant ones do not drag the bytes between
/// them along (the reader's usual gap, 64 KiB, would read most of every probed partition's
/// raw vectors).
pub const RAW_GAP: u64 = 8 << 10;

/// The raw vectors of entries `indices`, each checked by its CRC-32, in one round.
pub async fn raws(
    blob: &dyn BlobAccess,
    dir: &IvfDirectory,
    indices: &[u64],
) -> Result<Vec<Vec<f32>>, BlobError> {
    if indices.iter().any(|i| *i >= dir.entries) {
        return Err(BlobError::Corrupt("a vector past the blob's entries"));
    }
    let spans: Vec<_> = indices.iter().map(|i| dir.raw_range(*i)).collect();
    let got = blob.read_near(&spans, RAW_GAP).await?;
    got.iter().map(|b| dir.raw(b)).collect()
}
