//! Vector benchmark (issue 19): Skerry's `vector` index beside `hnsw_rs` (a pure-Rust HNSW)
//! and an exact brute force, on one generated data set, in one process run — build time,
//! index bytes, recall@10 and latency (p50/p95) at several `ef`, reported side by side and as
//! ratios.
//!
//! Data: `--n N` vectors (default 200,000) of 64 dimensions around 64 Gaussian cluster
//! centres (the data shape), one pyarrow-like Parquet file (snappy, row groups of
//! 65,536 rows); `--queries Q` (default 200) fresh vectors from the same clusters. The exact
//! top-10 of every query is computed here by brute force and is what recall is measured
//! against. Both engines build with m = 16 and Skerry's default `efConstruction` (100; 200 for
//! `dot`) on both cores; both are searched warm, one query at a time, for positions only
//! (Skerry's answers also re-check each result's distance from the row it reads by page).
//! Skerry is searched through the read path users get (`OverlayReader`).
//!
//!     cargo run --release -p skerry-bench-vector -- [--n N] [--queries Q]

use std::sync::Arc;
use std::time::Instant;

use anndists::dist::{DistCosine, DistL2, Distance};
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use hnsw_rs::hnsw::Hnsw;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::vector::{default_ef_construction, MetricName};
use skerry_core::index::IndexKind;
use skerry_core::read::nearest::Nearest;
use skerry_vector::{exact, Metric};

const DIM: usize = 64;
const CLUSTERS: usize = 64;
const K: usize = 10;
const M: usize = 16;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn gauss(&mut self) -> f32 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.7
    }
    fn vector(&mut self, centres: &[Vec<f32>]) -> Vec<f32> {
        let c = &centres[(self.next() % centres.len() as u64) as usize];
        c.iter().map(|x| x + self.gauss() * 0.4).collect()
    }
}

/// The peer's inner-product distance: `C − a · b`, the order of Skerry's `dot` metric
/// (anndists' `DistDot` is `1 − a · b` for unit vectors only, and hnsw_rs asserts distances
/// are not negative: `C` = 4 Φ², Φ the largest norm of the data, bounds every product of
/// data and query vectors drawn from the same clusters).
struct NegDot(f32);
impl Distance<f32> for NegDot {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (self.0 - a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()).max(0.0)
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    let Ok(dir) = std::fs::read_dir(p) else {
        return 0;
    };
    for e in dir {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse().unwrap_or_else(|_| panic!("{name} N")))
        .unwrap_or(default)
}

/// Recall of `got` (vector numbers) against the exact top-k `want`.
fn hits(want: &[u32], got: impl Iterator<Item = u64>) -> usize {
    got.filter(|g| want.contains(&(*g as u32))).count()
}

/// One engine's searches at one `ef`: (recall@10, p50 ms, p95 ms).
struct Run {
    recall: f64,
    p50: f64,
    p95: f64,
}

fn run(mut times: Vec<f64>, hit: usize, queries: usize) -> Run {
    Run {
        recall: hit as f64 / (queries * K) as f64,
        p50: percentile(&mut times, 0.5),
        p95: percentile(&mut times, 0.95),
    }
}

enum Peer {
    L2(Hnsw<'static, f32, DistL2>),
    Cosine(Hnsw<'static, f32, DistCosine>),
    Dot(Hnsw<'static, f32, NegDot>),
}

impl Peer {
    fn build(metric: Metric, data: &[Vec<f32>], efc: usize) -> Peer {
        let n = data.len();
        let items: Vec<(&[f32], usize)> = data
            .iter()
            .enumerate()
            .map(|(i, v)| (v.as_slice(), i))
            .collect();
        match metric {
            Metric::L2 => {
                let h = Hnsw::new(M, n, 16, efc, DistL2 {});
                h.parallel_insert_slice(&items);
                Peer::L2(h)
            }
            Metric::Cosine => {
                let h = Hnsw::new(M, n, 16, efc, DistCosine {});
                h.parallel_insert_slice(&items);
                Peer::Cosine(h)
            }
            Metric::Dot => {
                let phi2 = data
                    .iter()
                    .map(|v| v.iter().map(|x| x * x).sum::<f32>())
                    .fold(0.0f32, f32::max);
                let h = Hnsw::new(M, n, 16, efc, NegDot(4.0 * phi2));
                h.parallel_insert_slice(&items);
                Peer::Dot(h)
            }
        }
    }
    fn search(&self, q: &[f32], ef: usize) -> Vec<u64> {
        let r = match self {
            Peer::L2(h) => h.search(q, K, ef),
            Peer::Cosine(h) => h.search(q, K, ef),
            Peer::Dot(h) => h.search(q, K, ef),
        };
        r.iter().map(|n| n.d_id as u64).collect()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--n", 200_000);
    let nq = arg(&args, "--queries", 200);
    let mut r = Rng(0x5EED_0019_BE4C);
    let centres: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| (0..DIM).map(|_| r.unit() * 8.0 - 4.0).collect())
        .collect();
    let data: Vec<Vec<f32>> = (0..n).map(|_| r.vector(&centres)).collect();
    let queries: Vec<Vec<f32>> = (0..nq).map(|_| r.vector(&centres)).collect();

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir_all(&dir).unwrap();
    {
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "emb",
                DataType::FixedSizeList(item.clone(), DIM as i32),
                true,
            ),
        ]));
        let ids: Int64Array = (0..n as i64).map(Some).collect();
        let flat: Float32Array = data.iter().flatten().map(|x| Some(*x)).collect();
        let emb = FixedSizeListArray::new(item, DIM as i32, Arc::new(flat), None);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(ids) as ArrayRef, Arc::new(emb)],
        )
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .set_max_row_group_row_count(Some(65_536))
            .build();
        let file = std::fs::File::create(dir.join("vectors.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
    println!(
        "data: {n} × {DIM}-d float32 vectors in {CLUSTERS} clusters, {nq} queries, k = {K}, m = {M}; 2 cores"
    );

    let metrics = [MetricName::L2, MetricName::Cosine, MetricName::Dot];
    let overlay_dir = tmp.path().join("overlay");
    let url = format!("file://{}", overlay_dir.display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();

    // The exact answers (and the brute force's own latency), per metric.
    let mut truth: Vec<Vec<Vec<u32>>> = Vec::new();
    let mut exact_ms: Vec<Vec<f64>> = Vec::new();
    for m in metrics {
        let (mut t, mut ms) = (Vec::new(), Vec::new());
        for q in &queries {
            let t0 = Instant::now();
            let mut all: Vec<(f32, u32)> = data
                .iter()
                .enumerate()
                .map(|(i, v)| (exact(m.metric(), q, v), i as u32))
                .collect();
            all.select_nth_unstable_by(K, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
            t.push(all[..K].iter().map(|x| x.1).collect());
        }
        truth.push(t);
        exact_ms.push(ms);
    }

    let mut builds = Vec::new();
    let mut peers = Vec::new();
    let mut bundles_before = 0u64;
    for m in metrics {
        let efc = default_ef_construction(m);
        let table = format!("t_{}", m.name());
        let t0 = Instant::now();
        o.register_parquet_table(
            &table,
            &format!("file://{}", dir.display()),
            FileSelection::List(vec!["vectors.parquet".into()]),
        )
        .await
        .unwrap();
        o.create_index(
            &table,
            "emb_knn",
            &["emb".into()],
            IndexOptions {
                kind: IndexKind::Vector,
                metric: Some(m),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        o.build(&table, |_| {}).await.unwrap();
        let skerry_s = t0.elapsed().as_secs_f64();
        // Each table's build writes only its own bundles.
        let total = dir_bytes(&overlay_dir.join("bundles"));
        let skerry_bytes = total - bundles_before;
        bundles_before = total;
        let t0 = Instant::now();
        let peer = Peer::build(m.metric(), &data, efc as usize);
        let peer_s = t0.elapsed().as_secs_f64();
        builds.push((m, efc, skerry_s, skerry_bytes, peer_s));
        peers.push(peer);
    }
    o.publish().await.unwrap();
    o.close().await.unwrap();

    let reader = skerry_core::read::reader::OverlayReader::open(
        &url,
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    // Room for the whole index, as the peer holds its graph in memory.
    reader.snapshot().cache().set_budget(1 << 30);

    println!();
    println!("| build | Skerry | hnsw_rs 0.3 | ratio |");
    println!("|---|---|---|---|");
    for (m, efc, s, bytes, p) in &builds {
        println!(
            "| {} (efConstruction {efc}) | {s:.1} s, {:.1} MB | {p:.1} s | {:.2}× |",
            m.name(),
            *bytes as f64 / 1e6,
            s / p
        );
    }
    println!(
        "(raw vectors: {:.1} MB; Skerry's bundle holds them, 8-bit codes and the graph)",
        (n * DIM * 4) as f64 / 1e6
    );
    println!();
    println!("| metric, ef | Skerry recall@10 | p50 | p95 | hnsw_rs recall@10 | p50 | p95 | p50 ratio | exact p50 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (mi, m) in metrics.iter().enumerate() {
        let table = format!("t_{}", m.name());
        let search = |q: &[f32], ef: usize| Nearest {
            vector: q.to_vec(),
            k: K,
            ef: Some(ef),
            columns: Some(vec![]),
            ..Default::default()
        };
        let exact_p50 = percentile(&mut exact_ms[mi].clone(), 0.5);
        for ef in [32usize, 64, 100, 200] {
            // Warm both.
            for q in &queries {
                let a = reader
                    .snapshot()
                    .nearest(&table, &search(q, ef))
                    .await
                    .unwrap();
                assert_eq!(a.rows.len(), K);
                assert_eq!(a.stats.files_by_index, 1, "{:?}", a.stats);
                std::hint::black_box(peers[mi].search(q, ef));
            }
            let (mut ts, mut tp) = (Vec::new(), Vec::new());
            let (mut hs, mut hp) = (0, 0);
            for (qi, q) in queries.iter().enumerate() {
                let s = search(q, ef);
                let t0 = Instant::now();
                let a = reader.snapshot().nearest(&table, &s).await.unwrap();
                ts.push(t0.elapsed().as_secs_f64() * 1e3);
                hs += hits(&truth[mi][qi], a.rows.iter().map(|r| r.position));
                let t0 = Instant::now();
                let b = peers[mi].search(q, ef);
                tp.push(t0.elapsed().as_secs_f64() * 1e3);
                hp += hits(&truth[mi][qi], b.into_iter());
            }
            let (s, p) = (run(ts, hs, nq), run(tp, hp, nq));
            println!(
                "| {}, ef {ef}{} | {:.3} | {:.3} ms | {:.3} ms | {:.3} | {:.3} ms | {:.3} ms | {:.2}× | {exact_p50:.1} ms |",
                m.name(),
                if ef == skerry_core::index::vector::DEFAULT_EF { " (default)" } else { "" },
                s.recall,
                s.p50,
                s.p95,
                p.recall,
                p.p50,
                p.p95,
                s.p50 / p.p50
            );
        }
    }
}
