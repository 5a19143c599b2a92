//! A published manifest (JSON), validated, and every table's and index's accessors a reader
//! calls on it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::formats::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = Manifest::from_json(data) else {
        return;
    };
    let _ = m.validate();
    for t in &m.tables {
        for f in &t.files {
            let _ = f.deleted();
            let _ = f.live_rows();
            let _ = f.row_id_at(0);
            let _ = t.data_location(f);
        }
        for ix in &t.indexes {
            let _ = ix.kind();
            let _ = ix.listed_files();
            if let Some(run) = ix.table_run() {
                let _ = t.run_coverage(run);
            }
        }
    }
    // What it writes back parses again.
    let again = Manifest::from_json(&m.to_json());
    assert!(again.is_ok(), "{again:?}");
});
