//! What Skerry reads of an Iceberg table it does not own: table metadata (JSON, maybe
//! gzipped), Avro manifest lists and manifests, and deletion vectors. The first byte picks
//! the decoder.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::formats::iceberg::{avro, deletes, metadata};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(json) = metadata::metadata_json(rest) {
                if let Ok(m) = metadata::TableMetadata::from_json(&json) {
                    let _ = m.current_schema();
                    if let Some(s) = m.current_snapshot() {
                        let _ = m.snapshot(s);
                    }
                }
            }
        }
        1 => {
            let _ = avro::read_container(rest, "fuzz", &[]);
        }
        2 => {
            let _ = avro::read_container(rest, "fuzz", &["data_file"]);
        }
        _ => {
            let rc = rest.len() as u64 * 8;
            let _ = deletes::decode_deletion_vector(rest, rc);
        }
    }
});
