//! Testing keys against bloom filters through [`BlobAccess`]: one file's filter (its page
//! hashes, read once and cached, then one page per key, verified against its hash), or a
//! striped table run (one stripe per key holds that key's block of every file; neighbouring
//! stripes coalesce into one request).

use super::{
    block_may_hold, block_of, stripe_blocks, stripe_range, BloomPages, BLOCK, MAX_BLOCKS,
    STRIPES_TRAILER_LEN,
};
use crate::index::access::{directory, BlobAccess};
use crate::index::blob::BlobError;

/// May any of `keys` be in the file? `false` only when the filter excludes every one.
pub async fn may_hold(blob: &dyn BlobAccess, keys: &[Vec<u8>]) -> Result<bool, BlobError> {
    let m = blob.meta();
    let blocks = m
        .blocks
        .ok_or(BlobError::Corrupt("a bloom filter without blocks"))?;
    if blocks.checked_mul(BLOCK as u64) != Some(m.directory_offset) {
        return Err(BlobError::Corrupt("bloom page directory outside the blob"));
    }
    let pages = directory(
        blob,
        |bytes, m| BloomPages::parse(bytes, &m.directory_sha256, blocks),
        |p: &BloomPages| 64 + 16 * p.hashes.len() as u64,
    )
    .await?;
    let mut wanted: Vec<u64> = keys.iter().map(|k| block_of(k, blocks)).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let spans: Vec<_> = wanted.iter().map(|&b| pages.page_range(b)).collect();
    let fetched = blob.read(&spans).await?;
    for (b, page) in wanted.iter().zip(&fetched) {
        let block = pages.block(page, *b)?;
        if keys
            .iter()
            .any(|k| block_of(k, blocks) == *b && block_may_hold(block, k))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Per file of a striped run of `files` files: may any of `keys` be in it? One coalesced read
/// of the keys' stripes.
pub async fn run_may_hold(
    run: &dyn BlobAccess,
    files: u64,
    keys: &[Vec<u8>],
) -> Result<Vec<bool>, BlobError> {
    let blocks = run
        .meta()
        .blocks
        .ok_or(BlobError::Corrupt("a bloom run without blocks"))?;
    if blocks == 0
        || !blocks.is_power_of_two()
        || blocks > MAX_BLOCKS
        || stripe_range(blocks - 1, files)
            .end
            .checked_add(STRIPES_TRAILER_LEN)
            != Some(run.length())
    {
        return Err(BlobError::Corrupt("bloom run size"));
    }
    let mut stripes: Vec<u64> = keys.iter().map(|k| block_of(k, blocks)).collect();
    stripes.sort_unstable();
    stripes.dedup();
    let spans: Vec<_> = stripes.iter().map(|&b| stripe_range(b, files)).collect();
    let fetched = run.read(&spans).await?;
    let mut may = vec![false; files as usize];
    for (b, bytes) in stripes.iter().zip(&fetched) {
        let blocks_of = stripe_blocks(bytes, *b, files)?;
        for k in keys.iter().filter(|k| block_of(k, blocks) == *b) {
            for (ordinal, block) in blocks_of.iter().enumerate() {
                if !may[ordinal] && block_may_hold(block, k) {
                    may[ordinal] = true;
                }
            }
        }
    }
    Ok(may)
}
