//! Vector benchmark (issues 19 and 40): Skerry's `vector` index with the defaults users get —
//! the same rows in 20 files and in 200 — beside an exact brute force (and, with `--peer`,
//! `hnsw_rs`, a pure-Rust in-memory HNSW), in one process run: build time, index bytes,
//! recall@10, latency (p50/p95) and the index requests and bytes per query at several
//! `nprobe`, side by side and as ratios.
//!
//! Data: `--n N` vectors (default 2,000,000) of 64 dimensions around 64 Gaussian cluster
//! centres (the data shape), pyarrow-like Parquet files (snappy, row groups of
//! 65,536 rows), `--files A,B` layouts of the same rows (default `20,200`); `--queries Q`
//! (default 100) fresh vectors from the same clusters. The exact top-10 of every query is
//! computed here by brute force and is what recall is measured against. Skerry is searched
//! warm (codebook and directories cached by 20 other queries; each measured query's
//! partitions and raw vectors read for it, once), one query at a time, for positions only,
//! through the read path users get (`OverlayReader`, default cache), metric `--metric`
//! (default `l2`).
//!
//!     cargo run --release -p skerry-bench-vector -- [--n N] [--files 20,200] [--queries Q] [--metric l2] [--ef N] [--peer] [--keep DIR]
//!
//! `--keep DIR` leaves the data, the overlay and `bench.json` in DIR for `bench/vector.mjs`
//! (the wasm reader over HTTP).
//!
//! `--appends` then appends files of the last layout's size to its table — eight of one
//! file, then 10 files, then 100 — building after each (RFC 0004's tiered runs): the build's
//! time, the bytes it wrote, the runs after it and the bytes of a whole run (what a build
//! wrote when every build rewrote the run), and after each the defaults' recall, latency and
//! requests and bytes per query over the grown table.

use std::sync::Arc;
use std::time::Instant;

use anndists::dist::{DistCosine, DistL2, Distance};
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use hnsw_rs::hnsw::Hnsw;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::vector::{default_ef_construction, MetricName, DEFAULT_NPROBE};
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

fn write_files(dir: &std::path::Path, data: &[Vec<f32>], files: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let per = data.len().div_ceil(files);
    for (fi, chunk) in data.chunks(per).enumerate() {
        write_file(dir, fi, (fi * per) as i64, chunk);
    }
}

/// File `v<fi>.parquet` of `dir`: `chunk`'s vectors, ids from `first`.
fn write_file(dir: &std::path::Path, fi: usize, first: i64, chunk: &[Vec<f32>]) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "emb",
            DataType::FixedSizeList(item.clone(), DIM as i32),
            true,
        ),
    ]));
    let ids: Int64Array = (0..chunk.len() as i64).map(|i| Some(first + i)).collect();
    let flat: Float32Array = chunk.iter().flatten().map(|x| Some(*x)).collect();
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
    let file = std::fs::File::create(dir.join(format!("v{fi:05}.parquet"))).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// One layout's searches at one `nprobe`.
struct Row {
    files: usize,
    nprobe: usize,
    run: Run,
    requests: f64,
    bytes: f64,
    rounds: u64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--n", 2_000_000);
    let nq = arg(&args, "--queries", 100);
    let layouts: Vec<usize> = args
        .iter()
        .position(|a| a == "--files")
        .and_then(|i| args.get(i + 1))
        .map_or(vec![20, 200], |s| {
            s.split(',')
                .map(|x| x.parse().expect("--files A,B"))
                .collect()
        });
    let metric = args
        .iter()
        .position(|a| a == "--metric")
        .and_then(|i| args.get(i + 1))
        .map_or(MetricName::L2, |s| {
            MetricName::parse(s).expect("--metric l2|cosine|dot")
        });
    let with_peer = args.iter().any(|a| a == "--peer");
    // `--ef N`: candidates re-ranked exactly (default: the reader's, 100).
    let ef_override = args
        .iter()
        .position(|a| a == "--ef")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse::<usize>().expect("--ef N"));
    let mut r = Rng(0x5EED_0019_BE4C);
    let centres: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| (0..DIM).map(|_| r.unit() * 8.0 - 4.0).collect())
        .collect();
    let data: Vec<Vec<f32>> = (0..n).map(|_| r.vector(&centres)).collect();
    let queries: Vec<Vec<f32>> = (0..nq).map(|_| r.vector(&centres)).collect();
    let warmups: Vec<Vec<f32>> = (0..20).map(|_| r.vector(&centres)).collect();
    // `--keep DIR`: the data, the overlay and `bench.json` (queries, warm-ups, the exact
    // answers) stay in DIR, for `bench/vector.mjs` (the wasm reader over HTTP).
    let keep = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let root = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&root).unwrap();
    println!(
        "data: {n} × {DIM}-d float32 vectors in {CLUSTERS} clusters, {nq} queries, k = {K}, metric {}; 2 cores; default options",
        metric.name()
    );

    // The exact answers (and the brute force's own latency).
    let m = metric;
    let mut truth: Vec<Vec<u32>> = Vec::new();
    let mut exact_ms: Vec<f64> = Vec::new();
    for q in &queries {
        let t0 = Instant::now();
        let mut all: Vec<(f32, u32)> = data
            .iter()
            .enumerate()
            .map(|(i, v)| (exact(m.metric(), q, v), i as u32))
            .collect();
        all.select_nth_unstable_by(K, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        exact_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        truth.push(all[..K].iter().map(|x| x.1).collect());
    }
    let exact_p50 = percentile(&mut exact_ms, 0.5);

    let overlay_dir = root.join("overlay");
    let url = format!("file://{}", overlay_dir.display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let mut builds = Vec::new();
    let mut written = Vec::new();
    let mut bundles_before = 0u64;
    for &files in &layouts {
        let dir = root.join(format!("data{files}"));
        write_files(&dir, &data, files);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        written.push(names.len());
        let table = format!("t{files}");
        let t0 = Instant::now();
        o.register_parquet_table(
            &table,
            &format!("file://{}", dir.display()),
            FileSelection::List(names),
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
        let secs = t0.elapsed().as_secs_f64();
        // What the overlay keeps: the blobs the run took (decision 71) are deleted by a
        // vacuum (without a grace period: nothing else reads this overlay).
        o.publish().await.unwrap();
        o.vacuum(skerry_core::admin::lifecycle::VacuumOptions {
            retain_versions: 1,
            grace_seconds: 0,
        })
        .await
        .unwrap();
        let total =
            dir_bytes(&overlay_dir.join("bundles")) + dir_bytes(&overlay_dir.join("codebooks"));
        builds.push((files, secs, total - bundles_before));
        bundles_before = total;
    }
    o.publish().await.unwrap();
    o.close().await.unwrap();
    if keep.is_some() {
        let vecs = |vs: &[Vec<f32>]| {
            let rows: Vec<String> = vs
                .iter()
                .map(|v| {
                    format!(
                        "[{}]",
                        v.iter()
                            .map(|x| format!("{x:?}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .collect();
            format!("[{}]", rows.join(","))
        };
        let truth_json: Vec<String> = truth
            .iter()
            .map(|t| {
                format!(
                    "[{}]",
                    t.iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect();
        let layouts_json: Vec<String> = layouts
            .iter()
            .zip(&written)
            .map(|(f, w)| {
                format!(
                    "{{\"files\":{w},\"table\":\"t{f}\",\"data\":\"data{f}\",\"per\":{}}}",
                    n.div_ceil(*f)
                )
            })
            .collect();
        std::fs::write(
            root.join("bench.json"),
            format!(
                "{{\"n\":{n},\"k\":{K},\"metric\":\"{}\",\"layouts\":[{}],\"queries\":{},\"warmups\":{},\"truth\":[{}]}}",
                m.name(),
                layouts_json.join(","),
                vecs(&queries),
                vecs(&warmups),
                truth_json.join(",")
            ),
        )
        .unwrap();
        println!("kept in {}", root.display());
    }
    let peer = with_peer.then(|| {
        let t0 = Instant::now();
        let p = Peer::build(m.metric(), &data, default_ef_construction(m) as usize);
        (p, t0.elapsed().as_secs_f64())
    });

    let raw = (n * DIM * 4) as f64;
    println!();
    println!("| build | time | index bytes | × raw vectors |");
    println!("|---|---|---|---|");
    for (files, s, bytes) in &builds {
        println!(
            "| {n} vectors in {files} files | {s:.1} s | {:.1} MB | {:.2}× |",
            *bytes as f64 / 1e6,
            *bytes as f64 / raw
        );
    }
    if let Some((_, s)) = &peer {
        println!("| hnsw_rs 0.3 (m {M}, in memory) | {s:.1} s | | |");
    }
    println!();
    let mut rows: Vec<Row> = Vec::new();
    for (li, &files) in layouts.iter().enumerate() {
        let table = format!("t{files}");
        for nprobe in [16usize, 32, DEFAULT_NPROBE, 64, 96] {
            let reader = skerry_core::read::reader::OverlayReader::open(
                &url,
                skerry_core::io::store::OpenOptions::default(),
            )
            .await
            .unwrap();
            let search = |q: &[f32]| Nearest {
                vector: q.to_vec(),
                k: K,
                nprobe: Some(nprobe),
                ef: ef_override,
                columns: Some(vec![]),
                ..Default::default()
            };
            // A fresh reader per row (its cache is the default one), warm: codebook and
            // directories cached by other queries from the same clusters
            // (each measured query's partitions and raw vectors are its own).
            for q in &warmups {
                let a = reader.snapshot().nearest(&table, &search(q)).await.unwrap();
                assert_eq!(a.rows.len(), K);
                assert_eq!(
                    a.stats.files_by_index as usize, written[li],
                    "{:?}",
                    a.stats
                );
            }
            let (mut ts, mut hit, mut req, mut bytes, mut rounds) =
                (Vec::new(), 0, 0u64, 0u64, 0u64);
            for (qi, q) in queries.iter().enumerate() {
                let s = search(q);
                let t0 = Instant::now();
                let a = reader.snapshot().nearest(&table, &s).await.unwrap();
                ts.push(t0.elapsed().as_secs_f64() * 1e3);
                hit += hits(
                    &truth[qi],
                    a.rows.iter().map(|r| {
                        let f: usize = r.file[1..6].parse().unwrap();
                        (f * n.div_ceil(files)) as u64 + r.position
                    }),
                );
                req += a.stats.index_requests;
                bytes += a.stats.index_bytes;
                rounds = rounds.max(a.rounds);
            }
            rows.push(Row {
                files,
                nprobe,
                run: run(ts, hit, nq),
                requests: req as f64 / nq as f64,
                bytes: bytes as f64 / nq as f64,
                rounds,
            });
        }
    }
    println!("| files, nprobe | recall@10 | p50 | p95 | index requests/query | index bytes/query | max rounds | p50 / exact |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {}, {}{} | {:.3} | {:.3} ms | {:.3} ms | {:.1} | {:.0} KB | {} | {:.3}× |",
            r.files,
            r.nprobe,
            if r.nprobe == DEFAULT_NPROBE {
                " (default)"
            } else {
                ""
            },
            r.run.recall,
            r.run.p50,
            r.run.p95,
            r.requests,
            r.bytes / 1e3,
            r.rounds,
            r.run.p50 / exact_p50
        );
    }
    println!("exact brute force p50: {exact_p50:.1} ms");
    if layouts.len() == 2 {
        println!();
        println!(
            "| nprobe | requests {}→{} files | bytes {}→{} files |",
            layouts[0], layouts[1], layouts[0], layouts[1]
        );
        println!("|---|---|---|");
        for a in rows.iter().filter(|r| r.files == layouts[0]) {
            if let Some(b) = rows
                .iter()
                .find(|r| r.files == layouts[1] && r.nprobe == a.nprobe)
            {
                println!(
                    "| {} | {:.2}× | {:.2}× |",
                    a.nprobe,
                    b.requests / a.requests,
                    b.bytes / a.bytes
                );
            }
        }
    }
    if args.iter().any(|a| a == "--appends") {
        let files = *layouts.last().expect("a layout");
        appends(
            &url, &root, files, n, &data, &queries, &warmups, m, &mut r, &centres,
        )
        .await;
    }
    if let Some((p, _)) = &peer {
        println!();
        println!("| hnsw_rs ef | recall@10 | p50 | p95 |");
        println!("|---|---|---|---|");
        for ef in [32usize, 64, 100, 200] {
            let (mut ts, mut hit) = (Vec::new(), 0);
            for (qi, q) in queries.iter().enumerate() {
                let t0 = Instant::now();
                let b = p.search(q, ef);
                ts.push(t0.elapsed().as_secs_f64() * 1e3);
                hit += hits(&truth[qi], b.into_iter());
            }
            let r = run(ts, hit, nq);
            println!(
                "| {ef} | {:.3} | {:.3} ms | {:.3} ms |",
                r.recall, r.p50, r.p95
            );
        }
    }
}

/// `--appends`: files appended to table `t<files>` in groups, a build after each, then the
/// defaults' recall, latency and cost per query over the grown table (see the module docs).
#[allow(clippy::too_many_arguments)]
async fn appends(
    url: &str,
    root: &std::path::Path,
    files: usize,
    n: usize,
    data: &[Vec<f32>],
    queries: &[Vec<f32>],
    warmups: &[Vec<f32>],
    m: MetricName,
    r: &mut Rng,
    centres: &[Vec<f32>],
) {
    let table = format!("t{files}");
    let dir = root.join(format!("data{files}"));
    let bundles = root.join("overlay").join("bundles");
    let per = n.div_ceil(files);
    let mut all: Vec<Vec<f32>> = data.to_vec();
    let mut next = n.div_ceil(per);
    println!();
    println!("| appended | rows | build | bytes written | runs after | a whole run | recall@10 | p50 | requests/query | bytes/query |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for group in [1usize, 1, 1, 1, 1, 1, 1, 1, 10, 100] {
        let mut names = Vec::new();
        for _ in 0..group {
            let chunk: Vec<Vec<f32>> = (0..per).map(|_| r.vector(centres)).collect();
            write_file(&dir, next, (next * per) as i64, &chunk);
            names.push(format!("v{next:05}.parquet"));
            next += 1;
            all.extend(chunk);
        }
        let o = Overlay::open(url, OpenOptions::default()).await.unwrap();
        let before = dir_bytes(&bundles);
        let t0 = Instant::now();
        o.register_files(&table, &names).await.unwrap();
        o.build(&table, |_| {}).await.unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let wrote = dir_bytes(&bundles) - before;
        let man = o.snapshot_manifest(0).await.unwrap();
        let runs = man
            .table(&table)
            .unwrap()
            .index("emb_knn")
            .unwrap()
            .table_runs();
        let whole: u64 = runs.iter().map(|r| r.blob_length).sum();
        let nruns = runs.len();
        o.publish().await.unwrap();
        o.close().await.unwrap();
        let (recall, p50, req, bytes) = measure(url, &table, per, &all, queries, warmups, m).await;
        println!(
            "| {group} file{} | {} | {secs:.2} s | {:.1} MB | {nruns} | {:.1} MB | {recall:.3} | {p50:.2} ms | {req:.1} | {:.0} KB |",
            if group == 1 { "" } else { "s" },
            group * per,
            wrote as f64 / 1e6,
            whole as f64 / 1e6,
            bytes / 1e3
        );
    }
}

/// Recall@10, p50 latency, index requests and bytes per query of `table` (rows `per` to a
/// file) at the defaults, warm, against the exact answers over `all`.
async fn measure(
    url: &str,
    table: &str,
    per: usize,
    all: &[Vec<f32>],
    queries: &[Vec<f32>],
    warmups: &[Vec<f32>],
    m: MetricName,
) -> (f64, f64, f64, f64) {
    let truth: Vec<Vec<u32>> = queries
        .iter()
        .map(|q| {
            let mut d: Vec<(f32, u32)> = all
                .iter()
                .enumerate()
                .map(|(i, v)| (exact(m.metric(), q, v), i as u32))
                .collect();
            d.select_nth_unstable_by(K, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            d[..K].iter().map(|x| x.1).collect()
        })
        .collect();
    let reader = skerry_core::read::reader::OverlayReader::open(
        url,
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    let search = |q: &[f32]| Nearest {
        vector: q.to_vec(),
        k: K,
        columns: Some(vec![]),
        ..Default::default()
    };
    for q in warmups {
        reader.snapshot().nearest(table, &search(q)).await.unwrap();
    }
    let (mut ts, mut hit, mut req, mut bytes) = (Vec::new(), 0, 0u64, 0u64);
    for (qi, q) in queries.iter().enumerate() {
        let t0 = Instant::now();
        let a = reader.snapshot().nearest(table, &search(q)).await.unwrap();
        ts.push(t0.elapsed().as_secs_f64() * 1e3);
        hit += hits(
            &truth[qi],
            a.rows.iter().map(|r| {
                let f: usize = r.file[1..6].parse().unwrap();
                (f * per) as u64 + r.position
            }),
        );
        req += a.stats.index_requests;
        bytes += a.stats.index_bytes;
    }
    let nq = queries.len();
    let run = run(ts, hit, nq);
    (
        run.recall,
        run.p50,
        req as f64 / nq as f64,
        bytes as f64 / nq as f64,
    )
}
