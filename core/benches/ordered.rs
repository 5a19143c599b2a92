//! Ordered-index lookups on a 2M-row, 20-file table (sample `orders`), each beside a
//! full-column scan of the same files answering the same query in the same run.
//!
//! `cargo bench -p skerry-core --bench ordered` (set `SKERRY_BENCH_ROWS` to change the
//! size). Prints, per query shape, the rows found, range requests and index bytes read with
//! the index, the same with the scan, and the time ratio.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use skerry_core::formats::manifest::{self, Manifest};
use skerry_core::io::{ObjectStoreReader, UrlReader};
use skerry_core::read::cache::ReadCache;
use skerry_core::read::lookup::{LookupResult, Pinned};
use skerry_core::values::{Value, ValueBound};

#[path = "support/mod.rs"]
mod support;

struct Setup {
    _dir: tempfile::TempDir,
    reader: ObjectStoreReader,
    data: UrlReader,
    indexed: Manifest,
}

fn setup(rt: &tokio::runtime::Runtime) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (overlay_url, _) = support::orders_overlay(
        rt,
        dir.path(),
        &[
            ("by_id", &["order_id"], true),
            ("by_customer", &["customer"], false),
        ],
    );
    let reader = ObjectStoreReader::from_url(&overlay_url, &[]).unwrap();
    let indexed = rt.block_on(manifest::read_latest(&reader)).unwrap();
    Setup {
        _dir: dir,
        reader,
        data: UrlReader::new(vec![]),
        indexed,
    }
}

#[derive(Clone)]
enum Shape {
    Point(i64),
    In10(i64),
    Range(i64, i64),
    IsNull,
}

async fn run(l: &Pinned<'_>, s: &Shape) -> LookupResult {
    match s {
        Shape::Point(id) => l
            .lookup("orders", "by_id", &[Value::Int(*id)])
            .await
            .unwrap(),
        Shape::In10(first) => {
            let keys: Vec<Vec<Value>> = (0..10)
                .map(|i| vec![Value::Int(first + i * 99_991)])
                .collect();
            l.lookup_many("orders", "by_id", &keys).await.unwrap()
        }
        Shape::Range(lo, hi) => l
            .range(
                "orders",
                "by_id",
                ValueBound::Included(vec![Value::Int(*lo)]),
                ValueBound::Excluded(vec![Value::Int(*hi)]),
                false,
            )
            .await
            .unwrap(),
        Shape::IsNull => l
            .nulls("orders", "by_customer", &[Some(Value::Null)], false)
            .await
            .unwrap(),
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let s = setup(&rt);
    let shapes = [
        ("point", Shape::Point(1_234_567)),
        ("in10", Shape::In10(31_337)),
        ("range1000", Shape::Range(500_000, 501_000)),
        ("is_null", Shape::IsNull),
    ];
    let dirs = ReadCache::default();
    let indexed = Pinned {
        overlay: &s.reader,
        data: &s.data,
        manifest: &s.indexed,
        cache: &dirs,
        scan_only: false,
    };
    let no_dirs = ReadCache::default();
    // The baseline: the same queries answered by scanning every file's column.
    let scanned = Pinned {
        overlay: &s.reader,
        data: &s.data,
        manifest: &s.indexed,
        cache: &no_dirs,
        scan_only: true,
    };
    let mut summary = vec![];
    for (name, shape) in &shapes {
        // Warm the directories, then measure one query of each way for the report.
        let first = rt.block_on(run(&indexed, shape));
        let t = Instant::now();
        let a = rt.block_on(run(&indexed, shape));
        let ti = t.elapsed();
        let t = Instant::now();
        let b = rt.block_on(run(&scanned, shape));
        let ts = t.elapsed();
        assert_eq!(a.rows, b.rows, "{name}: index and scan disagree");
        assert_eq!(first.rows, a.rows);
        summary.push(format!(
            "summary {name}: {} rows | index: {} requests, {} bytes, {:.3} ms (cold {} requests, {} bytes) | scan: {} requests, {} bytes, {:.1} ms | scan/index time {:.0}x, bytes {:.0}x",
            a.rows.len(),
            a.stats.index_requests,
            a.stats.index_bytes,
            ti.as_secs_f64() * 1e3,
            first.stats.index_requests,
            first.stats.index_bytes,
            b.stats.data_requests,
            b.stats.data_bytes,
            ts.as_secs_f64() * 1e3,
            ts.as_secs_f64() / ti.as_secs_f64().max(1e-9),
            b.stats.data_bytes as f64 / a.stats.index_bytes.max(1) as f64,
        ));
    }
    let mut g = c.benchmark_group("ordered_2m_20_files");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, shape) in &shapes {
        g.bench_function(format!("{name}/index"), |b| {
            b.iter(|| rt.block_on(run(&indexed, shape)))
        });
        g.bench_function(format!("{name}/baseline_scan"), |b| {
            b.iter(|| rt.block_on(run(&scanned, shape)))
        });
    }
    g.finish();
    for line in summary {
        println!("{line}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
