//! Manifest parse time at scale (issue 14): a cold reader parses the published manifest
//! before its first answer. The document of a table with FILES data files and 5 ordered
//! indexes (every file indexed, lineage per file and index, as `publish()` writes it) is
//! built from the golden manifest's entries and parsed (serde + validation) —
//! `Manifest::from_json`, beside a plain `serde_json::Value` parse of the same bytes (the
//! floor of any JSON manifest) in the same run.
//!
//! Then the same table as `publish()` writes it at that size: a root (files, index headers)
//! parsed at open, and one part per index parsed when a query first uses the index.
//!
//! `cargo bench -p skerry-core --bench manifest`; SKERRY_BENCH_FILES (10,000) to change it.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::Value;
use skerry_core::formats::manifest::{self, Manifest};

const INDEXES: usize = 5;

fn document(files: usize) -> Vec<u8> {
    let golden: Value =
        serde_json::from_slice(include_bytes!("../tests/golden/bundles.manifest.json")).unwrap();
    let mut m = golden.clone();
    let t = &mut m["tables"][0];
    let file0 = t["files"][0].clone();
    let ix0 = t["indexes"][0].clone();
    let entry0 = ix0["files"][0].clone();
    t["location"] = Value::from("https://data.example.com/orders");
    t["files"] = Value::Array(
        (0..files)
            .map(|i| {
                let mut f = file0.clone();
                f["file_id"] = Value::from(i as u64 + 1);
                f["path"] = Value::from(format!(
                    "date=2026-01-{:02}/part-{i:06}.parquet",
                    i % 28 + 1
                ));
                f["row_id_start"] = Value::from(i as u64 * 2500);
                f
            })
            .collect(),
    );
    t["indexes"] = Value::Array(
        (0..INDEXES)
            .map(|k| {
                let mut ix = ix0.clone();
                ix["index_id"] = Value::from(1_000 + k as u64);
                ix["name"] = Value::from(format!("ix_{k}"));
                ix["files"] = Value::Array(
                    (0..files)
                        .map(|i| {
                            let mut e = entry0.clone();
                            e["file_id"] = Value::from(i as u64 + 1);
                            e["lineage"]["index_id"] = Value::from(1_000 + k as u64);
                            e["lineage"]["source_path"] = Value::from(format!(
                                "date=2026-01-{:02}/part-{i:06}.parquet",
                                i % 28 + 1
                            ));
                            e["lineage"]["bundle_path"] =
                                Value::from(format!("bundles/1/{}-g1.puffin", i + 1));
                            e
                        })
                        .collect(),
                );
                ix
            })
            .collect(),
    );
    serde_json::to_vec(&m).unwrap()
}

fn bench(c: &mut Criterion) {
    let files: usize = std::env::var("SKERRY_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let doc = document(files);
    let m = Manifest::from_json(&doc).unwrap();
    assert_eq!(m.tables[0].files.len(), files);
    assert_eq!(m.tables[0].indexes.len(), INDEXES);
    // As `publish()` writes it at this size: the root (files and index headers) and one
    // part per index, read when a query first uses that index.
    let mut split = Manifest::from_json(&doc).unwrap();
    let parts = split.split_parts(manifest::PART_MIN_BYTES);
    assert_eq!(
        parts.len(),
        INDEXES,
        "every index's lists are over the part threshold"
    );
    let root = split.to_json();
    let mut g = c.benchmark_group("manifest");
    g.sample_size(10);
    g.bench_function(
        format!("from_json {files} files x {INDEXES} indexes"),
        |b| b.iter(|| black_box(Manifest::from_json(black_box(&doc)).unwrap())),
    );
    g.bench_function(
        format!("serde_json::Value {files} files x {INDEXES} indexes"),
        |b| b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&doc)).unwrap())),
    );
    g.bench_function(format!("open split root {files} files"), |b| {
        b.iter(|| black_box(Manifest::from_json(black_box(&root)).unwrap()))
    });
    g.finish();
    let time = |f: &dyn Fn()| {
        let mut best = f64::MAX;
        for _ in 0..11 {
            let t = Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
        }
        best
    };
    let parse = time(&|| {
        black_box(Manifest::from_json(&doc).unwrap());
    });
    let floor = time(&|| {
        black_box(serde_json::from_slice::<Value>(&doc).unwrap());
    });
    let open = time(&|| {
        black_box(Manifest::from_json(&root).unwrap());
    });
    let m = Manifest::from_json(&root).unwrap();
    let t = &m.tables[0];
    let first_use = time(&|| {
        let fresh = Manifest::from_json(&root).unwrap();
        let t = &fresh.tables[0];
        let t0 = Instant::now();
        t.indexes[0].attach(fresh.version, t, &parts[0].1).unwrap();
        black_box(t0.elapsed());
    }) - open;
    t.indexes[0].attach(m.version, t, &parts[0].1).unwrap();
    assert_eq!(t.indexes[0].file_entries().len(), files);
    println!(
        "split: root {:.1} MiB opens in {open:.1} ms (goal <= 10 ms: {:.2}x of the goal, {:.1}x faster than whole); first use of an index reads a {:.1} MiB part, +{first_use:.1} ms",
        root.len() as f64 / (1 << 20) as f64,
        open / 10.0,
        parse / open,
        parts[0].1.len() as f64 / (1 << 20) as f64,
    );
    println!(
        "manifest of {files} files x {INDEXES} indexes: {:.1} MiB, parse {parse:.1} ms (goal <= 10 ms: {:.2}x), serde_json::Value floor {floor:.1} ms",
        doc.len() as f64 / (1 << 20) as f64,
        parse / 10.0
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
