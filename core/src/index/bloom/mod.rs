//! The bloom index blobs: a per-file split-block bloom filter (`skerry-bloom-v1`) over the
//! canonical keys of a data file, and the table-wide **striped** filter (`skerry-bloom-stripes-v1`)
//! that lays every covered file's filter out so one range read prunes them all.
//!
//! The filters are Parquet's SBBF ([`parquet::bloom_filter::Sbbf`], reused as is): blocks of
//! eight little-endian `u32` words, a key's 64-bit xxHash (seed 0) of its canonical bytes
//! picks block `((h >> 32) × blocks) >> 32` and, from `h as u32`, one bit per word. A filter
//! is a power-of-two number of blocks sized from the file's distinct keys and the
//! definition's false-positive probability.
//!
//! Per-file layout (integers little-endian):
//!
//! ```text
//! Blob    = Bitset Pages Trailer
//! Bitset  = blocks × 32 bytes
//! Pages   = ⌈blocks / 64⌉ × hash[16]      (SHA-256[..16] of each 2 KiB page of the bitset)
//! Trailer = u64 ndv  u32 blocks  u8 version(=1)  u8 flags(=0)  u16 reserved(=0)  "SKF1"
//! ```
//!
//! Striped layout, for `n` files padded to the same `blocks` (a filter of fewer blocks is
//! widened by repeating each block: with multiplicative block selection, block `j` of a
//! filter of `m` blocks holds exactly what blocks `j·k … j·k+k−1` of one of `m·k` blocks would,
//! so the answers are unchanged):
//!
//! ```text
//! Blob     = Stripe₀ … Stripe_{blocks−1} Trailer
//! Stripe_b = block b of file 0 ‖ … ‖ block b of file n−1 ‖ hash[16]
//!            (hash = SHA-256(u64 b ‖ the n blocks)[..16])
//! Trailer  = u32 files  u32 blocks  u8 version(=1)  u8 flags(=0)  u16 reserved(=0)  "SKS1"
//! ```
//!
//! A key's stripe is the same for every file, so pruning `n` files for one key reads one
//! `32·n + 16`-byte range. Every byte read is verified (a page or stripe against its hash, the
//! page hashes against the manifest's SHA-256); a damaged filter is rejected and its file
//! scanned, never pruned. `docs/bloom-index.md` documents the formats.

use std::ops::Range;

use parquet::bloom_filter::Sbbf;
use sha2::{Digest, Sha256};

use crate::index::ordered::BlobError;

pub mod read;

/// Puffin blob type of the per-file filter.
pub const BLOB_TYPE: &str = "skerry-bloom-v1";
/// Puffin blob type of the striped table-wide filter.
pub const STRIPES_BLOB_TYPE: &str = "skerry-bloom-stripes-v1";
pub const MAGIC: [u8; 4] = *b"SKF1";
pub const STRIPES_MAGIC: [u8; 4] = *b"SKS1";
pub const VERSION: u8 = 1;
pub const TRAILER_LEN: u64 = 20;
pub const STRIPES_TRAILER_LEN: u64 = 16;
/// Bytes per block.
pub const BLOCK: usize = 32;
/// Blocks per verified page of a per-file filter.
pub const PAGE_BLOCKS: usize = 64;
/// False-positive probability of a definition that names none.
pub const DEFAULT_FPP: f64 = 0.01;
/// Most blocks one filter may have (128 MiB, Parquet's cap).
pub const MAX_BLOCKS: u64 = (128 << 20) / BLOCK as u64;

/// The 64-bit hash of a canonical key.
pub fn hash(key: &[u8]) -> u64 {
    twox_hash::XxHash64::oneshot(0, key)
}

/// The block of a filter of `blocks` blocks that holds `key`.
pub fn block_of(key: &[u8], blocks: u64) -> u64 {
    ((hash(key) >> 32).saturating_mul(blocks)) >> 32
}

/// Whether the 32-byte `block` (the one [`block_of`] names) may hold `key`: `false` is
/// certain absence.
pub fn block_may_hold(block: &[u8], key: &[u8]) -> bool {
    // A one-block filter selects block 0 and tests the key's bits in it: exactly the test
    // of that block in the full filter.
    Sbbf::new(block).check(key)
}

/// A written per-file filter and the facts the manifest records.
#[derive(Clone, Debug)]
pub struct BloomBlob {
    pub bytes: Vec<u8>,
    /// The page hashes' range in the blob (the "directory" a reader verifies first).
    pub pages: Range<u64>,
    pub pages_sha256: String,
    pub ndv: u64,
    pub blocks: u64,
    pub min_key: Option<Vec<u8>>,
    pub max_key: Option<Vec<u8>>,
}

fn hash16(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()[..16].try_into().expect("16 bytes")
}

/// Writes the filter of the distinct `keys` (in ascending order, repeats allowed) at false
/// positive probability `fpp`.
pub fn write<'a>(keys: impl IntoIterator<Item = &'a [u8]> + Clone, fpp: f64) -> BloomBlob {
    let mut ndv = 0u64;
    let mut prev: Option<&[u8]> = None;
    for k in keys.clone() {
        if prev != Some(k) {
            ndv += 1;
        }
        prev = Some(k);
    }
    let mut f = Sbbf::new_with_ndv_fpp(ndv.max(1), fpp).expect("fpp checked by the definition");
    let (mut min, mut max): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    for k in keys {
        f.insert(k);
        if min.is_none_or(|m| k < m) {
            min = Some(k);
        }
        if max.is_none_or(|m| k > m) {
            max = Some(k);
        }
    }
    let mut bytes = Vec::with_capacity(f.num_blocks() * BLOCK + 64);
    f.write_bitset(&mut bytes).expect("vec write");
    let blocks = f.num_blocks() as u64;
    let pages_at = bytes.len() as u64;
    let hashes: Vec<[u8; 16]> = bytes
        .chunks(PAGE_BLOCKS * BLOCK)
        .map(|p| hash16(&[p]))
        .collect();
    for h in &hashes {
        bytes.extend_from_slice(h);
    }
    let pages = pages_at..bytes.len() as u64;
    let pages_sha256 = hex::encode(Sha256::digest(&bytes[pages_at as usize..]));
    bytes.extend_from_slice(&ndv.to_le_bytes());
    bytes.extend_from_slice(&(blocks as u32).to_le_bytes());
    bytes.extend_from_slice(&[VERSION, 0, 0, 0]);
    bytes.extend_from_slice(&MAGIC);
    BloomBlob {
        bytes,
        pages,
        pages_sha256,
        ndv,
        blocks,
        min_key: min.map(<[u8]>::to_vec),
        max_key: max.map(<[u8]>::to_vec),
    }
}

/// The page-hash directory of a per-file filter of `blocks` blocks, verified against the
/// manifest's SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BloomPages {
    pub blocks: u64,
    pub hashes: Vec<[u8; 16]>,
}

impl BloomPages {
    pub fn parse(bytes: &[u8], sha256_hex: &str, blocks: u64) -> Result<BloomPages, BlobError> {
        if !hex::encode(Sha256::digest(bytes)).eq_ignore_ascii_case(sha256_hex) {
            return Err(BlobError::Checksum("bloom pages"));
        }
        if blocks == 0 || blocks > MAX_BLOCKS || !blocks.is_power_of_two() {
            return Err(BlobError::Corrupt("bloom block count"));
        }
        let pages = blocks.div_ceil(PAGE_BLOCKS as u64);
        if bytes.len() as u64 != pages * 16 {
            return Err(BlobError::Corrupt("bloom page directory length"));
        }
        Ok(BloomPages {
            blocks,
            hashes: bytes
                .chunks_exact(16)
                .map(|c| c.try_into().expect("16 bytes"))
                .collect(),
        })
    }

    /// The bitset range (relative to the blob) of the page holding `block`.
    pub fn page_range(&self, block: u64) -> Range<u64> {
        let page = block / PAGE_BLOCKS as u64;
        let start = page * (PAGE_BLOCKS * BLOCK) as u64;
        let end = (start + (PAGE_BLOCKS * BLOCK) as u64).min(self.blocks * BLOCK as u64);
        start..end
    }

    /// Verifies the page holding `block` and returns the block's 32 bytes from it.
    pub fn block<'p>(&self, page: &'p [u8], block: u64) -> Result<&'p [u8], BlobError> {
        let r = self.page_range(block);
        let i = (block / PAGE_BLOCKS as u64) as usize;
        if page.len() as u64 != r.end - r.start || hash16(&[page]) != self.hashes[i] {
            return Err(BlobError::Checksum("bloom page"));
        }
        let at = ((block - r.start / BLOCK as u64) as usize) * BLOCK;
        Ok(&page[at..at + BLOCK])
    }
}

/// The bitset of a whole per-file blob, verified page by page (build of stripes, verify).
pub fn bitset(blob: &[u8]) -> Result<&[u8], BlobError> {
    let len = blob.len() as u64;
    if len < TRAILER_LEN {
        return Err(BlobError::Corrupt("shorter than its trailer"));
    }
    let t = &blob[(len - TRAILER_LEN) as usize..];
    if t[16..20] != MAGIC || t[12] != VERSION {
        return Err(BlobError::Corrupt("bad bloom trailer"));
    }
    let blocks = u64::from(u32::from_le_bytes(t[8..12].try_into().expect("4 bytes")));
    if blocks == 0 || blocks > MAX_BLOCKS || !blocks.is_power_of_two() {
        return Err(BlobError::Corrupt("bloom block count"));
    }
    let bits = blocks * BLOCK as u64;
    let pages = blocks.div_ceil(PAGE_BLOCKS as u64) * 16;
    if bits + pages + TRAILER_LEN != len {
        return Err(BlobError::Corrupt("bloom blob length"));
    }
    let (bitset, rest) = blob.split_at(bits as usize);
    for (page, h) in bitset
        .chunks(PAGE_BLOCKS * BLOCK)
        .zip(rest.chunks_exact(16))
    {
        if hash16(&[page])[..] != *h {
            return Err(BlobError::Checksum("bloom page"));
        }
    }
    Ok(bitset)
}

/// Writes the striped filter of `bitsets` (one per covered file, in ordinal order; each a
/// power-of-two number of blocks), every file widened to the largest block count.
pub fn write_stripes(bitsets: &[&[u8]]) -> Result<Vec<u8>, BlobError> {
    let blocks = bitsets
        .iter()
        .map(|b| (b.len() / BLOCK) as u64)
        .max()
        .unwrap_or(1)
        .max(1);
    for b in bitsets {
        let n = (b.len() / BLOCK) as u64;
        if b.len() % BLOCK != 0 || n == 0 || !n.is_power_of_two() || n > MAX_BLOCKS {
            return Err(BlobError::Corrupt("bloom bitset"));
        }
    }
    let n = bitsets.len();
    let mut out = Vec::with_capacity(blocks as usize * (n * BLOCK + 16) + 16);
    for b in 0..blocks {
        let start = out.len();
        for bits in bitsets {
            let own = (bits.len() / BLOCK) as u64;
            // Block b of the widened filter is block b / (blocks / own) of the file's.
            let j = (b / (blocks / own)) as usize * BLOCK;
            out.extend_from_slice(&bits[j..j + BLOCK]);
        }
        let h = hash16(&[&b.to_le_bytes(), &out[start..]]);
        out.extend_from_slice(&h);
    }
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&(blocks as u32).to_le_bytes());
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&STRIPES_MAGIC);
    Ok(out)
}

/// The filters of the files `keep` names (by ordinal: `Some` kept, in ordinal order) out of
/// a whole striped blob, each as widened there (`blocks` blocks): the trailer checked against
/// `trailer_sha256` (the manifest's), every stripe against its hash. Widening one of them
/// again gives what widening the file's own filter gives (block `b` of `n` is block
/// `b / (n / own)` of the file's either way), so a merge of runs stripes them as it stripes
/// files' own filters.
pub fn unstripe<T>(
    blob: &[u8],
    trailer_sha256: &str,
    keep: &[Option<T>],
) -> Result<Vec<Vec<u8>>, BlobError> {
    let len = blob.len() as u64;
    if len < STRIPES_TRAILER_LEN {
        return Err(BlobError::Corrupt("shorter than its trailer"));
    }
    let t = &blob[(len - STRIPES_TRAILER_LEN) as usize..];
    crate::index::blob::check_sha256(t, Some(trailer_sha256), "bloom stripes trailer")?;
    let (files, blocks) = parse_stripes_trailer(t, len)?;
    if files != keep.len() as u64 {
        return Err(BlobError::Corrupt("bloom stripes file count"));
    }
    let kept: Vec<usize> = (0..keep.len()).filter(|&o| keep[o].is_some()).collect();
    let mut out: Vec<Vec<u8>> = kept
        .iter()
        .map(|_| Vec::with_capacity(blocks as usize * BLOCK))
        .collect();
    for b in 0..blocks {
        let r = stripe_range(b, files);
        let blocks_of = stripe_blocks(&blob[r.start as usize..r.end as usize], b, files)?;
        for (k, &o) in kept.iter().enumerate() {
            out[k].extend_from_slice(blocks_of[o]);
        }
    }
    Ok(out)
}

/// The byte range of stripe `b` in a striped blob of `files` files.
pub fn stripe_range(b: u64, files: u64) -> Range<u64> {
    let len = files * BLOCK as u64 + 16;
    b * len..(b + 1) * len
}

/// Verifies stripe `b` and returns its blocks (file ordinal order).
pub fn stripe_blocks(bytes: &[u8], b: u64, files: u64) -> Result<Vec<&[u8]>, BlobError> {
    let body = files as usize * BLOCK;
    if bytes.len() != body + 16 {
        return Err(BlobError::Corrupt("stripe length"));
    }
    if hash16(&[&b.to_le_bytes(), &bytes[..body]])[..] != bytes[body..] {
        return Err(BlobError::Checksum("bloom stripe"));
    }
    Ok(bytes[..body].chunks_exact(BLOCK).collect())
}

/// The striped blob's trailer: (files, blocks).
pub fn parse_stripes_trailer(t: &[u8], blob_len: u64) -> Result<(u64, u64), BlobError> {
    if t.len() as u64 != STRIPES_TRAILER_LEN || t[12..16] != STRIPES_MAGIC || t[8] != VERSION {
        return Err(BlobError::Corrupt("bad bloom stripes trailer"));
    }
    let files = u64::from(u32::from_le_bytes(t[0..4].try_into().expect("4 bytes")));
    let blocks = u64::from(u32::from_le_bytes(t[4..8].try_into().expect("4 bytes")));
    if blocks == 0
        || !blocks.is_power_of_two()
        || blocks > MAX_BLOCKS
        || stripe_range(blocks - 1, files).end + STRIPES_TRAILER_LEN != blob_len
    {
        return Err(BlobError::Corrupt("bloom stripes length"));
    }
    Ok((files, blocks))
}

/// The default false-positive probability in parts per million (as definitions store it).
pub const DEFAULT_FPP_PPM: u32 = 10_000;

/// The bloom kind ([`super::kind::Kind`]): prunes files for `=`/IN on high-cardinality keys.
pub struct Bloom;

static BLOOM: super::kind::About = super::kind::About {
    answers: super::kind::Answers {
        prune: true,
        ..super::kind::Answers::NOTHING
    },
    options: &["fpp"],
    refuses_unique: Some(" (it cannot name the rows holding a key)"),
    run: Some(super::kind::RunLayout::Striped),
    ..super::kind::About::new(super::IndexKind::Bloom, "bloom", BLOB_TYPE, "bloom-v1")
};

impl super::kind::Kind for Bloom {
    fn about(&self) -> &'static super::kind::About {
        &BLOOM
    }
    fn spec(&self, o: &super::IndexOptions) -> Result<super::IndexSpec, String> {
        match o.fpp {
            None => Ok(super::IndexSpec::Bloom {
                fpp_ppm: DEFAULT_FPP_PPM,
            }),
            Some(p) if (0.000_001..=0.5).contains(&p) => Ok(super::IndexSpec::Bloom {
                fpp_ppm: (p * 1e6).round() as u32,
            }),
            Some(p) => Err(format!("fpp {p} is outside 0.000001..=0.5")),
        }
    }
    fn write(
        &self,
        spec: &super::IndexSpec,
        _: &super::kind::BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
        let mut keys: Vec<&[u8]> = Vec::new();
        for (k, _) in entries {
            if keys.last() != Some(&k) {
                keys.push(k);
            }
        }
        let fpp = f64::from(spec.fpp_ppm().unwrap_or(DEFAULT_FPP_PPM)) / 1e6;
        let blob = write(keys.iter().copied(), fpp);
        let meta = super::blob::BlobMeta {
            blocks: Some(blob.blocks),
            ..super::blob::BlobMeta::new(blob.pages.clone(), &blob.pages_sha256, blob.ndv)
        }
        .with_keys(&blob.min_key, &blob.max_key);
        Ok((blob.bytes, meta))
    }
    fn excluded_keys(
        &self,
        blob: &[u8],
        keys: &mut dyn Iterator<Item = &[u8]>,
    ) -> Option<Result<u64, BlobError>> {
        Some(bitset(blob).map(|bits| {
            let filter = Sbbf::new(bits);
            keys.filter(|k| !filter.check(*k)).count() as u64
        }))
    }
    fn may_hold<'a>(
        &'a self,
        blob: &'a dyn crate::index::access::BlobAccess,
        keys: &'a [Vec<u8>],
    ) -> crate::io::BoxFut<'a, Result<bool, BlobError>> {
        Box::pin(async move { read::may_hold(blob, keys).await })
    }
    fn run_may_hold<'a>(
        &'a self,
        run: &'a dyn crate::index::access::BlobAccess,
        files: u64,
        keys: &'a [Vec<u8>],
    ) -> crate::io::BoxFut<'a, Result<Vec<bool>, BlobError>> {
        Box::pin(async move { read::run_may_hold(run, files, keys).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u64, salt: u64) -> Vec<Vec<u8>> {
        let mut k: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("k{salt}-{i:08}").into_bytes())
            .collect();
        k.sort();
        k
    }

    #[test]
    fn no_false_negatives_and_the_configured_rate() {
        let ks = keys(20_000, 1);
        let b = write(ks.iter().map(|k| k.as_slice()), 0.01);
        assert_eq!(b.ndv, 20_000);
        let bits = bitset(&b.bytes).unwrap();
        let pages = BloomPages::parse(
            &b.bytes[b.pages.start as usize..b.pages.end as usize],
            &b.pages_sha256,
            b.blocks,
        )
        .unwrap();
        let may = |k: &[u8]| {
            let blk = block_of(k, b.blocks);
            let r = pages.page_range(blk);
            let block = pages
                .block(&bits[r.start as usize..r.end as usize], blk)
                .unwrap();
            block_may_hold(block, k)
        };
        assert!(ks.iter().all(|k| may(k)));
        let absent = keys(20_000, 2);
        let fp = absent.iter().filter(|k| may(k)).count() as f64 / 20_000.0;
        assert!(fp < 0.02, "false positive rate {fp}");
        // Parquet's own check agrees.
        let whole = Sbbf::new(bits);
        assert!(ks.iter().all(|k| whole.check(k.as_slice())));
    }

    /// Five files' filters of 200, 400, … 3,200 keys (block counts 1× to 16×).
    fn five_filters() -> Vec<BloomBlob> {
        (0..5)
            .map(|f| {
                let ks = keys(200 * (1 << f), f);
                write(ks.iter().map(|k| k.as_slice()), 0.01)
            })
            .collect()
    }

    #[test]
    fn stripes_answer_like_each_file_and_catch_damage() {
        let files = five_filters();
        let bits: Vec<&[u8]> = files.iter().map(|b| bitset(&b.bytes).unwrap()).collect();
        let s = write_stripes(&bits).unwrap();
        let len = s.len() as u64;
        let (n, blocks) =
            parse_stripes_trailer(&s[(len - STRIPES_TRAILER_LEN) as usize..], len).unwrap();
        assert_eq!(n, 5);
        for f in 0..5u64 {
            for probe in keys(300, f).iter().chain(keys(300, 99).iter()) {
                let own = Sbbf::new(bits[f as usize]).check(probe.as_slice());
                let b = block_of(probe, blocks);
                let r = stripe_range(b, n);
                let got = stripe_blocks(&s[r.start as usize..r.end as usize], b, n).unwrap();
                assert_eq!(block_may_hold(got[f as usize], probe), own);
            }
        }
        // Any flipped byte of a stripe is caught; a stripe read at another index too.
        let r = stripe_range(3, n);
        for at in r.clone() {
            let mut d = s.clone();
            d[at as usize] ^= 0x10;
            assert!(stripe_blocks(&d[r.start as usize..r.end as usize], 3, n).is_err());
        }
        assert!(stripe_blocks(&s[r.start as usize..r.end as usize], 4, n).is_err());
    }

    /// A run's filters taken out of its stripes (some left out) and striped again stripe
    /// exactly as the files' own filters do; damage, a wrong trailer hash or file count is an
    /// error.
    #[test]
    fn unstriped_filters_stripe_again_like_the_files_own() {
        let files = five_filters();
        let bits: Vec<&[u8]> = files.iter().map(|b| bitset(&b.bytes).unwrap()).collect();
        let first = write_stripes(&bits[..3]).unwrap();
        let sha = |s: &[u8]| {
            crate::formats::lineage::sha256_hex(&s[s.len() - STRIPES_TRAILER_LEN as usize..])
        };
        let keep = [Some(()), None, Some(())];
        let out = unstripe(&first, &sha(&first), &keep).unwrap();
        assert_eq!(out.len(), 2);
        let mut again: Vec<&[u8]> = out.iter().map(Vec::as_slice).collect();
        again.extend(&bits[3..]);
        let mut direct = vec![bits[0], bits[2]];
        direct.extend(&bits[3..]);
        assert_eq!(
            write_stripes(&again).unwrap(),
            write_stripes(&direct).unwrap()
        );
        assert!(unstripe(&first, &"0".repeat(64), &keep).is_err());
        assert!(unstripe(&first, &sha(&first), &keep[..2]).is_err());
        for at in [0, 40, first.len() / 2] {
            let mut d = first.clone();
            d[at] ^= 0x10;
            assert!(unstripe(&d, &sha(&d), &keep).is_err(), "flip at {at}");
        }
        for cut in 0..first.len() {
            let t = &first[..cut];
            if t.len() as u64 >= STRIPES_TRAILER_LEN {
                assert!(unstripe(t, &sha(t), &keep).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn damaged_filters_are_errors_never_panics() {
        let ks = keys(3_000, 7);
        let b = write(ks.iter().map(|k| k.as_slice()), 0.05);
        for at in 0..b.bytes.len() {
            let mut d = b.bytes.clone();
            d[at] ^= 0x01;
            if let Ok(bits) = bitset(&d) {
                // Only the trailer's ndv and reserved bytes go unread.
                assert_eq!(bits, bitset(&b.bytes).unwrap(), "flip at {at}");
            }
        }
        for cut in 0..b.bytes.len() {
            assert!(bitset(&b.bytes[..cut]).is_err());
        }
        assert!(BloomPages::parse(&[0; 16], &"0".repeat(64), 64).is_err());
        let s = write_stripes(&[bitset(&b.bytes).unwrap()]).unwrap();
        for cut in 0..s.len() as u64 {
            let t = &s[..cut as usize];
            if t.len() as u64 >= STRIPES_TRAILER_LEN {
                let _ = parse_stripes_trailer(&t[t.len() - STRIPES_TRAILER_LEN as usize..], cut);
            }
        }
    }
}
