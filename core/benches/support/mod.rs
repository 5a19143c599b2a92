//! The benchmarks' shared table: the sample `orders` data in [`FILES`] Parquet files
//! (`SKERRY_BENCH_ROWS` rows, 2M by default), registered, indexed and published in a fresh
//! overlay on local disk.

use std::path::Path;
use std::time::Instant;

use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};

pub const FILES: usize = 20;

/// Rows of the table (`SKERRY_BENCH_ROWS`, default 2,000,000).
pub fn bench_rows() -> usize {
    std::env::var("SKERRY_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000)
}

/// Writes the table under `dir/data`, indexes it with `indexes` (name, columns, unique) in an
/// overlay at `dir/overlay`, builds and publishes. Returns the overlay URL and the rows.
pub fn orders_overlay(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    indexes: &[(&str, &[&str], bool)],
) -> (String, usize) {
    let per_file = bench_rows() / FILES;
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let t = Instant::now();
    for i in 0..FILES {
        let bytes = orders_parquet(
            (i * per_file) as i64,
            per_file,
            100_000,
            SampleCodec::Snappy,
        )
        .unwrap();
        std::fs::write(data.join(format!("p{i:02}.parquet")), bytes).unwrap();
    }
    let overlay_url = format!("file://{}", dir.join("overlay").display());
    rt.block_on(async {
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
        for (name, cols, unique) in indexes {
            let cols: Vec<_> = cols.iter().map(|c| (*c).into()).collect();
            o.create_index(
                "orders",
                name,
                &cols,
                IndexOptions {
                    unique: *unique,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
        let b = o.build("orders", |_| {}).await.unwrap();
        o.publish().await.unwrap();
        println!(
            "setup: {} rows in {FILES} files, {} index entries, {} bundle bytes, {:.1} s",
            per_file * FILES,
            b.entries,
            b.bytes_written,
            t.elapsed().as_secs_f64()
        );
        o.close().await.unwrap();
    });
    (overlay_url, per_file * FILES)
}
