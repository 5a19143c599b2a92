//! Every index kind's per-file blob and table run as a reader decodes them from bytes it
//! did not write: the ordered and bitmap blobs' entries, the bloom bitset and stripes, the
//! full-text blob's terms and postings, a bitmap run's directory and file lists, and the
//! row-set summaries. The first byte picks the decoder; checksums that gate a structure are
//! recomputed from the input so the fuzzer reaches what lies behind them.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::formats::rowset::RowSet;
use skerry_core::index::{bitmap, bloom, fulltext, ordered};

/// The 16-byte truncated SHA-256 the bitmap kinds check their sections by.
fn hash16(b: &[u8]) -> [u8; 16] {
    use sha2::Digest;
    sha2::Sha256::digest(b)[..16].try_into().unwrap()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map(|x| u64::from_le_bytes(x.try_into().unwrap()))
        .unwrap_or(0)
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 8 {
        0 => {
            let _ = ordered::read_entries(rest, |k, p| {
                std::hint::black_box((k, p));
            });
        }
        1 => {
            let _ = bitmap::read_entries(rest, |k, p| {
                std::hint::black_box((k, p));
            });
        }
        2 => {
            let _ = bloom::bitset(rest);
        }
        3 => {
            let (b, files) = (u64_at(rest, 0) % 64, u64_at(rest, 8) % 64);
            let _ = bloom::stripe_blocks(rest.get(16..).unwrap_or(&[]), b, files);
        }
        4 => {
            // The directory's range from the first 16 bytes, the blob after them.
            let (start, len) = (u64_at(rest, 0) % 4096, u64_at(rest, 8) % 4096);
            let blob = rest.get(16..).unwrap_or(&[]);
            let _ = fulltext::read_all(blob, start..start.saturating_add(len));
            // The compact blocks' decoders, on bytes no checksum vouches for.
            fulltext::fuzz_compact_codecs(rest);
        }
        5 => {
            // A bitmap run: trailer, directory, each value's file list and bitmaps.
            let Ok((dir, _, files)) = bitmap::run::parse_trailer(rest, rest.len() as u64) else {
                return;
            };
            let Some(d) = rest.get(dir.start as usize..dir.end.min(rest.len() as u64) as usize)
            else {
                return;
            };
            if let Ok(run) = bitmap::run::RunDirectory::parse(d, None, dir.start, files.min(1 << 16)) {
                for v in run.values.iter().take(64) {
                    let r = v.files_range();
                    let Some(b) = rest.get(r.start as usize..r.end.min(rest.len() as u64) as usize)
                    else {
                        continue;
                    };
                    let mut v = v.clone();
                    v.hash = hash16(b);
                    if let Ok(fs) = bitmap::run::parse_files(b, &v, files.min(1 << 16)) {
                        for f in fs.iter().take(64) {
                            let r = f.range.clone();
                            if let Some(x) = rest.get(r.start as usize..r.end.min(rest.len() as u64) as usize) {
                                let mut f = f.clone();
                                f.hash = hash16(x);
                                let _ = bitmap::run::decode(x, &f, 1 << 20);
                            }
                        }
                    }
                }
            }
        }
        6 => {
            if let Ok(r) = RowSet::decode(rest) {
                std::hint::black_box(r);
            }
        }
        _ => {
            let _ = ordered::Trailer::parse(rest, rest.len() as u64);
            let _ = bitmap::parse_trailer(rest, rest.len() as u64);
            let _ = bloom::parse_stripes_trailer(rest, rest.len() as u64);
            let _ = ordered::OrderedDirectory::parse(rest, None, rest.len() as u64);
            let _ = bitmap::BitmapDirectory::parse(rest, None, rest.len() as u64);
            let _ = fulltext::FulltextDirectory::parse(rest, None, rest.len() as u64 * 2);
        }
    }
});
