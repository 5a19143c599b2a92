//! A vector index's codebook object, and a partition-major blob: its directory, every
//! partition's codes (CRC-32 recomputed from the input so decoding is reached) and raw
//! vectors.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::index::vector::codebook::VectorCodebook;
use skerry_core::index::vector::ivf;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        if let Ok(book) = VectorCodebook::parse(rest, None) {
            // What a parsed codebook is used for must not panic either.
            let sd = book.space.graph_dim();
            let q = vec![0.5f32; sd];
            if book.centroids.nlist() > 0 {
                let _ = book.query(&q, 0).distance(&vec![0u8; book.code_bytes()]);
            }
        }
        return;
    }
    let Ok(dir) = ivf::directory_of(rest, None) else {
        return;
    };
    for p in dir.partitions.iter().take(256) {
        let mut p = p.clone();
        let r = dir.codes_range(&p);
        let Some(bytes) = rest.get(r.start as usize..r.end.min(rest.len() as u64) as usize) else {
            continue;
        };
        p.codes_crc32 = crc32fast::hash(bytes);
        if let Ok(found) = dir.entries(&p, bytes) {
            for (i, f) in found.enumerate().take(1024) {
                std::hint::black_box(&f);
                let rr = dir.raw_range(i as u64);
                if let Some(raw) = rest.get(rr.start as usize..rr.end.min(rest.len() as u64) as usize) {
                    let _ = dir.raw(raw);
                }
            }
        }
    }
});
