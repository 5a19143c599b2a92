//! `dropIndex` cost against table size: the same drop on a table of 10 files and one of
//! 10,000 registered files (file:// overlay, SlateDB with fsync), side by side in one run.
//! A drop is one catalog commit of a constant number of keys whatever the table's size; the
//! summary prints both means and their ratio (the larger catalog costs a little more per
//! point read, not per file), and the 10,000-file drop must stay under 5 ms. The drop of an index built over all
//! 10,000 files (10,000 index-file records, left for vacuum) is timed once at the end.
//!
//! `cargo bench -p skerry-core --bench lifecycle`

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{parquet_from_rows, SampleCodec};
use skerry_core::values::{KeyType, Value};

struct Setup {
    _dir: tempfile::TempDir,
    overlay: Overlay,
}

fn setup(rt: &tokio::runtime::Runtime, files: usize) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cols = vec![("id".to_string(), KeyType::Int64)];
    for f in 0..files {
        let rows: Vec<Vec<Value>> = (0..4)
            .map(|i| vec![Value::Int((f * 4 + i) as i64)])
            .collect();
        let b = parquet_from_rows(&cols, &rows, 4, SampleCodec::None).unwrap();
        std::fs::write(data.join(format!("f{f:05}.parquet")), b).unwrap();
    }
    let overlay = rt.block_on(async {
        let o = Overlay::open(
            &format!("file://{}", dir.path().join("overlay").display()),
            OpenOptions::default(),
        )
        .await
        .unwrap();
        o.register_parquet_table(
            "t",
            &format!("file://{}", data.display()),
            FileSelection::Prefix(String::new()),
        )
        .await
        .unwrap();
        o
    });
    Setup { _dir: dir, overlay }
}

fn timed_drops(rt: &tokio::runtime::Runtime, o: &Overlay, iters: u64) -> Duration {
    rt.block_on(async {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            o.create_index("t", "ix", &["id".into()], IndexOptions::default())
                .await
                .unwrap();
            let t = Instant::now();
            o.drop_index("t", "ix").await.unwrap();
            total += t.elapsed();
        }
        total
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let small = setup(&rt, 10);
    let large = setup(&rt, 10_000);
    let mut g = c.benchmark_group("drop_index");
    g.sample_size(30);
    g.bench_function("10 files", |b| {
        b.iter_custom(|n| timed_drops(&rt, &small.overlay, n))
    });
    g.bench_function("10000 files", |b| {
        b.iter_custom(|n| timed_drops(&rt, &large.overlay, n))
    });
    g.finish();
    // Side-by-side summary from one more batch of each.
    let n = 50;
    let s = timed_drops(&rt, &small.overlay, n) / n as u32;
    let l = timed_drops(&rt, &large.overlay, n) / n as u32;
    println!(
        "drop_index mean: 10 files {:.3} ms, 10,000 files {:.3} ms, ratio {:.2}",
        s.as_secs_f64() * 1e3,
        l.as_secs_f64() * 1e3,
        l.as_secs_f64() / s.as_secs_f64()
    );
    // An index built over all 10,000 files, then dropped.
    let built = rt.block_on(async {
        let o = &large.overlay;
        o.create_index("t", "built", &["id".into()], IndexOptions::default())
            .await
            .unwrap();
        let b = Instant::now();
        o.build("t", |_| {}).await.unwrap();
        let build = b.elapsed();
        let t = Instant::now();
        o.drop_index("t", "built").await.unwrap();
        (build, t.elapsed())
    });
    println!(
        "drop_index of an index built over 10,000 files: {:.3} ms (its build took {:.1} s)",
        built.1.as_secs_f64() * 1e3,
        built.0.as_secs_f64()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
