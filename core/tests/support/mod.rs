//! Shared setup of the integration tests that need the sample `orders` table in an overlay.
#![allow(dead_code)]

use std::path::Path;

use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};

/// Writes the sample `orders` table — `files` Parquet files (`p000.parquet`, …) of `rows`
/// orders each, ids consecutive from 0, row groups of `row_group_rows` — under `dir/data`,
/// opens an overlay at `dir/overlay`, registers the table, creates `indexes` (name, column,
/// unique) and builds them (nothing published). Returns the overlay's URL and the overlay.
pub async fn orders_overlay(
    dir: &Path,
    files: i64,
    rows: i64,
    row_group_rows: usize,
    indexes: &[(&str, &str, bool)],
) -> (String, Overlay) {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    for i in 0..files {
        std::fs::write(
            data.join(format!("p{i:03}.parquet")),
            orders_parquet(i * rows, rows as usize, row_group_rows, SampleCodec::Snappy).unwrap(),
        )
        .unwrap();
    }
    let overlay_url = format!("file://{}", dir.join("overlay").display());
    let o = Overlay::open(&overlay_url, OpenOptions::default())
        .await
        .unwrap();
    o.register_parquet_table(
        "orders",
        &format!("file://{}", data.display()),
        FileSelection::Prefix(String::new()),
    )
    .await
    .unwrap();
    for (name, column, unique) in indexes {
        o.create_index(
            "orders",
            name,
            &[(*column).into()],
            IndexOptions { unique: *unique },
        )
        .await
        .unwrap();
    }
    o.build("orders", |_| {}).await.unwrap();
    (overlay_url, o)
}

/// Runs the Python script `tests/iceberg/<script>` (pyiceberg, installed by setup.sh) into a
/// fresh directory and returns it with the JSON it wrote there as `<expected>`.
pub fn python_tables(script: &str, expected: &str) -> (tempfile::TempDir, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/iceberg")
        .join(script);
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .output()
        .expect("python3 runs (setup.sh installs pyiceberg[sql-sqlite,pyarrow])");
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json = std::fs::read(dir.path().join(expected)).unwrap();
    (dir, serde_json::from_slice(&json).unwrap())
}
