//! A Puffin file's footer found from its tail, then every blob it lists decoded (checksums,
//! codecs, lengths), under tight limits so a hostile length cannot make the fuzzer allocate.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::formats::puffin::{decode_blob, Limits, PuffinFooter};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_footer_bytes: 1 << 20,
        max_footer_payload: 4 << 20,
        max_blobs: 10_000,
        max_blob_bytes: 1 << 20,
        max_blob_decompressed: 4 << 20,
    };
    if let Ok(Ok(footer)) = PuffinFooter::parse_tail(data, data.len() as u64, &limits) {
        for b in &footer.metadata.blobs {
            let r = b.range();
            if let Some(stored) = data.get(r.start as usize..r.end.min(usize::MAX as u64) as usize) {
                let _ = decode_blob(b, stored, &limits);
            }
        }
    }
});
