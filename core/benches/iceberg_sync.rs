//! Sync cost follows the change (issue 16): an Iceberg table of 1,000 data files
//! (`tests/iceberg/make_wide.py`, pyiceberg `add_files`) gains a snapshot of 10 more files.
//! A mounted overlay (unique index on `id`, built) syncs to it — reading the metadata file,
//! the manifest list and the one new manifest, then the new files — beside, in the same run,
//! the baseline of mounting the new snapshot from scratch (every manifest, every file).
//! Reported: time of each, the ratio, and the upstream requests and bytes of each.
//!
//! `cargo bench -p skerry-core --bench iceberg_sync`; SKERRY_BENCH_ICEBERG_FILES (1,000) and
//! SKERRY_BENCH_ICEBERG_ADDED (10) to change the shape.

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::Value;
use skerry_core::admin::overlay::{IndexOptions, OpenOptions, Overlay};
use skerry_core::io::RangeReader;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn make_wide(dir: &Path, files: usize, added: usize) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/iceberg/make_wide.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir)
        .arg(files.to_string())
        .arg(added.to_string())
        .output()
        .expect("python3 with pyiceberg (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(dir.join("expected_wide.json")).unwrap()).unwrap()
}

/// A fresh overlay with the table mounted at `metadata` and a built unique index on `id`.
async fn mounted(dir: &Path, n: usize, metadata: &str) -> Overlay {
    let url = format!("file://{}", dir.join(format!("overlay-{n}")).display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    o.mount_iceberg("wide", metadata).await.unwrap();
    o.create_index("wide", "by_id", &["id".into()], IndexOptions::unique())
        .await
        .unwrap();
    o.build("wide", |_| {}).await.unwrap();
    o
}

fn bench(c: &mut Criterion) {
    let files = env("SKERRY_BENCH_ICEBERG_FILES", 1000);
    let added = env("SKERRY_BENCH_ICEBERG_ADDED", 10);
    let dir = tempfile::tempdir().unwrap();
    let w = make_wide(dir.path(), files, added);
    let (before, after) = (
        w["before"].as_str().unwrap().to_string(),
        w["after"].as_str().unwrap().to_string(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut n = 0usize;

    // One measured sync and one measured baseline mount, for the report.
    let o = rt.block_on(mounted(dir.path(), n, &before));
    n += 1;
    let reads0 = o.data_reader().counters().snapshot();
    let t = Instant::now();
    let r = rt.block_on(o.sync_iceberg("wide", Some(&after))).unwrap();
    let sync_ms = t.elapsed().as_secs_f64() * 1e3;
    let sync_all = o.data_reader().counters().snapshot().since(&reads0);
    assert_eq!(r.added.len(), added);
    assert_eq!(r.manifests_read, 1, "only the new manifest is read");
    let fresh = rt.block_on(async {
        let url = format!("file://{}", dir.path().join("overlay-full").display());
        Overlay::open(&url, OpenOptions::default()).await.unwrap()
    });
    let reads1 = fresh.data_reader().counters().snapshot();
    let t = Instant::now();
    let info = rt.block_on(fresh.mount_iceberg("wide", &after)).unwrap();
    let mount_ms = t.elapsed().as_secs_f64() * 1e3;
    let mount_all = fresh.data_reader().counters().snapshot().since(&reads1);
    assert_eq!(info.files as usize, files + added);
    println!(
        "iceberg sync: {added} files onto {files}: sync {sync_ms:.0} ms vs mounting the new snapshot {mount_ms:.0} ms ({:.1}x faster); \
         upstream metadata {} requests / {} bytes (metadata file, manifest list, {} manifest), \
         all reads of the sync {} requests / {} bytes vs the mount's {} requests / {} bytes ({:.1}x fewer requests, {:.1}x fewer bytes)",
        mount_ms / sync_ms,
        r.requests,
        r.bytes,
        r.manifests_read,
        sync_all.requests,
        sync_all.bytes,
        mount_all.requests,
        mount_all.bytes,
        mount_all.requests as f64 / sync_all.requests.max(1) as f64,
        mount_all.bytes as f64 / sync_all.bytes.max(1) as f64,
    );

    let mut g = c.benchmark_group("iceberg_sync");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function(format!("sync +{added} files onto {files}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let o = rt.block_on(mounted(dir.path(), n, &before));
                n += 1;
                let t = Instant::now();
                rt.block_on(o.sync_iceberg("wide", Some(&after))).unwrap();
                total += t.elapsed();
            }
            total
        })
    });
    g.bench_function(format!("mount {} files (baseline)", files + added), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let url = format!(
                    "file://{}",
                    dir.path().join(format!("overlay-{n}")).display()
                );
                n += 1;
                let o = rt
                    .block_on(Overlay::open(&url, OpenOptions::default()))
                    .unwrap();
                let t = Instant::now();
                rt.block_on(o.mount_iceberg("wide", &after)).unwrap();
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
