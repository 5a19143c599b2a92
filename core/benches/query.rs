//! `query` shapes on a 2M-row, 20-file table (sample `orders`), each answered with indexes
//! and by forced scans (statistics and page-index pruning still on) in the same run.
//!
//! `cargo bench -p skerry-core --features native --bench query` (`SKERRY_BENCH_ROWS` to
//! change the size). Prints, per shape, rows, requests, bytes and time each way and the
//! scan/index ratios; criterion then times both.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use skerry_core::formats::manifest::{self, Manifest};
use skerry_core::io::{ObjectStoreReader, UrlReader};
use skerry_core::read::cache::ReadCache;
use skerry_core::read::lookup::Pinned;
use skerry_core::read::plan::{Query, QueryResult};
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value;

#[path = "support/mod.rs"]
mod support;

fn setup(rt: &tokio::runtime::Runtime) -> (tempfile::TempDir, ObjectStoreReader, Manifest, i64) {
    let dir = tempfile::tempdir().unwrap();
    let (url, rows) = support::orders_overlay(
        rt,
        dir.path(),
        &[
            ("by_id", &["order_id"], true),
            ("by_customer", &["customer"], false),
            ("by_customer_day", &["customer", "day"], false),
        ],
    );
    let reader = ObjectStoreReader::from_url(&url, &[]).unwrap();
    let m = rt.block_on(manifest::read_latest(&reader)).unwrap();
    (dir, reader, m, rows as i64)
}

fn q(conditions: Vec<Condition>, limit: Option<u64>) -> Query {
    Query {
        conditions,
        columns: None,
        limit,
        verify_files: false,
        pin_versions: false,
        snapshot: None,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_dir, reader, m, rows) = setup(&rt);
    let data = UrlReader::new(vec![]);
    let int = Value::Int;
    let customer = || Condition::new("customer", Op::Eq(Value::String("customer-01234".into())));
    let shapes = [
        (
            "point",
            q(
                vec![Condition::new("order_id", Op::Eq(int(rows * 61 / 100)))],
                None,
            ),
        ),
        (
            "in10",
            q(
                vec![Condition::new(
                    "order_id",
                    Op::In((0..10).map(|i| int((31_337 + i * 99_991) % rows)).collect()),
                )],
                None,
            ),
        ),
        (
            "range1000",
            q(
                vec![
                    Condition::new("order_id", Op::Ge(int(rows / 4))),
                    Condition::new("order_id", Op::Lt(int(rows / 4 + 1000))),
                ],
                None,
            ),
        ),
        ("customer", q(vec![customer()], None)),
        (
            "customer_refs_only",
            Query {
                columns: Some(vec![]),
                ..q(vec![customer()], None)
            },
        ),
        (
            "customer_day_residual",
            q(
                vec![
                    customer(),
                    Condition::new("day", Op::Between(Value::Date(19_100), Value::Date(19_200))),
                    Condition::new("amount", Op::Gt(Value::Float64(500.0))),
                ],
                None,
            ),
        ),
        (
            "is_null_limit100",
            q(vec![Condition::new("customer", Op::IsNull)], Some(100)),
        ),
    ];
    let (dirs, no_dirs) = (ReadCache::default(), ReadCache::default());
    let indexed = Pinned {
        overlay: &reader,
        data: &data,
        manifest: &m,
        cache: &dirs,
        scan_only: false,
    };
    let scanned = Pinned {
        overlay: &reader,
        data: &data,
        manifest: &m,
        cache: &no_dirs,
        scan_only: true,
    };
    let run =
        |l: &Pinned<'_>, s: &Query| -> QueryResult { rt.block_on(l.query("orders", s)).unwrap() };
    let mut summary = vec![];
    for (name, shape) in &shapes {
        run(&indexed, shape); // warm the directories
        let t = Instant::now();
        let a = run(&indexed, shape);
        let ti = t.elapsed();
        let t = Instant::now();
        let b = run(&scanned, shape);
        let ts = t.elapsed();
        assert_eq!(a.rows, b.rows, "{name}: index and scan disagree");
        summary.push(format!(
            "summary {name}: {} rows via {:?} | index: {} requests, {} bytes, {:.2} ms | scan: {} requests, {} bytes, {:.1} ms | scan/index time {:.1}x, bytes {:.1}x",
            a.rows.len(),
            a.stats.index,
            a.stats.requests,
            a.stats.bytes,
            ti.as_secs_f64() * 1e3,
            b.stats.requests,
            b.stats.bytes,
            ts.as_secs_f64() * 1e3,
            ts.as_secs_f64() / ti.as_secs_f64().max(1e-9),
            b.stats.bytes as f64 / a.stats.bytes.max(1) as f64,
        ));
    }
    let mut g = c.benchmark_group("query_2m_20_files");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (name, shape) in &shapes {
        g.bench_function(format!("{name}/index"), |b| b.iter(|| run(&indexed, shape)));
        g.bench_function(format!("{name}/baseline_scan"), |b| {
            b.iter(|| run(&scanned, shape))
        });
    }
    g.finish();
    for line in summary {
        println!("{line}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
