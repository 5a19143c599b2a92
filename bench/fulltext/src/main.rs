//! Full-text benchmark (issue 18): Skerry's `fulltext` index beside tantivy on one generated
//! corpus, in one process run — build time, index bytes, top-10 latency (p50/p95) over the
//! same queries — reported side by side and as ratios.
//!
//! Corpus: `--docs N` documents (default 2,000,000) of 20–80 words drawn Zipf(1) from a
//! 30,000-word vocabulary, written as Parquet in each layout of `--files` (default `20,200`:
//! the same documents in 20 and in 200 files), each layout its own overlay. Queries: 200 two-term OR
//! queries whose terms are drawn from the same distribution (`zipf`), and 200 whose terms
//! are drawn uniformly from the vocabulary (`uniform`). Both engines use BM25 (k1 1.2,
//! b 0.75); tantivy indexes from memory with 2 threads and 256 MB, Skerry builds from the
//! Parquet files. Skerry is searched through the read path users get (`OverlayReader`, with
//! its default read cache), cold (each query's first search) and warm, with the index's
//! requests and bytes per query; tantivy through a reloaded searcher.
//!
//!     cargo run --release -p skerry-bench-fulltext -- [--docs N] [--files 20,200] [--keep DIR]
//!
//! `--appends` then appends files of the last layout's size to its table — four of one file,
//! then 10 files, then 100 — building after each (RFC 0004's tiered runs): the build's time,
//! the bytes it wrote, the runs after it and the bytes of a whole run (what a build wrote when
//! every build rewrote the run), and after each the warm search's p50 and index requests and
//! bytes per query (the zipf set).
//!
//! `--keep DIR` leaves the data (`data-{files}`), the overlays (`overlay-{files}`) and
//! `bench.json` (the queries) in DIR for `bench/search.mjs`, the wasm reader over HTTP.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::IndexKind;
use skerry_core::read::reader::OverlayReader;
use skerry_core::read::search::Search;

const VOCAB: usize = 30_000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn vocabulary(r: &mut Rng) -> Vec<String> {
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(VOCAB);
    while out.len() < VOCAB {
        let len = 3 + (r.next() % 8) as usize;
        let w: String = (0..len)
            .map(|_| letters[(r.next() % 26) as usize] as char)
            .collect();
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

/// Cumulative Zipf(1) weights over the vocabulary's ranks.
fn zipf_cdf() -> Vec<f64> {
    let mut c = Vec::with_capacity(VOCAB);
    let mut sum = 0.0;
    for r in 1..=VOCAB {
        sum += 1.0 / r as f64;
        c.push(sum);
    }
    for x in &mut c {
        *x /= sum;
    }
    c
}

fn zipf(r: &mut Rng, cdf: &[f64]) -> usize {
    let u = r.unit();
    cdf.partition_point(|c| *c < u).min(VOCAB - 1)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let docs: usize = arg("--docs").map_or(2_000_000, |s| s.parse().expect("--docs N"));
    let layouts: Vec<usize> = arg("--files")
        .unwrap_or_else(|| "20,200".into())
        .split(',')
        .map(|s| s.parse().expect("--files 20,200"))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let keep = arg("--keep").map(std::path::PathBuf::from);
    let root = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&root).unwrap();
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let vocab = vocabulary(&mut r);
    let cdf = zipf_cdf();

    // The corpus, kept in memory for tantivy and written as Parquet for Skerry.
    let t0 = Instant::now();
    let mut texts: Vec<String> = Vec::with_capacity(docs);
    for _ in 0..docs {
        let n = 20 + (r.next() % 61) as usize;
        let mut s = String::with_capacity(n * 8);
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(&vocab[zipf(&mut r, &cdf)]);
        }
        texts.push(s);
    }
    let words: u64 = texts.iter().map(|t| t.split(' ').count() as u64).sum();
    println!(
        "corpus: {docs} documents, {words} words ({:.1} s to generate); layouts: {layouts:?} files",
        t0.elapsed().as_secs_f64()
    );
    let queries: Vec<(&str, Vec<String>)> = ["zipf", "uniform"]
        .into_iter()
        .map(|set| {
            let qs = (0..200)
                .map(|_| {
                    let mut pick = || match set {
                        "zipf" => vocab[zipf(&mut r, &cdf)].clone(),
                        _ => vocab[(r.next() % VOCAB as u64) as usize].clone(),
                    };
                    format!("{} {}", pick(), pick())
                })
                .collect();
            (set, qs)
        })
        .collect();

    // tantivy: the same documents from memory, 2 threads, 256 MB.
    use tantivy::query::QueryParser;
    use tantivy::schema::{Schema as TSchema, STORED, TEXT};
    let tdir = tmp.path().join("tantivy");
    std::fs::create_dir_all(&tdir).unwrap();
    let mut sb = TSchema::builder();
    let body = sb.add_text_field("body", TEXT);
    let id = sb.add_i64_field("id", STORED);
    let tschema = sb.build();
    let t0 = Instant::now();
    let index = tantivy::Index::create_in_dir(&tdir, tschema).unwrap();
    {
        let mut w: tantivy::IndexWriter = index.writer_with_num_threads(2, 256_000_000).unwrap();
        for (i, t) in texts.iter().enumerate() {
            w.add_document(tantivy::doc!(body => t.as_str(), id => i as i64))
                .unwrap();
        }
        w.commit().unwrap();
        w.wait_merging_threads().unwrap();
    }
    let tantivy_build = t0.elapsed().as_secs_f64();
    let tantivy_bytes = dir_bytes(&tdir);
    let treader = index.reader().unwrap();
    let searcher = treader.searcher();
    let qp = QueryParser::for_index(&index, vec![body]);

    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("body", DataType::Utf8, false),
    ]));
    for &files in &layouts {
        let per_file = docs.div_ceil(files.max(1));
        let data = root.join(format!("data-{files}"));
        std::fs::create_dir_all(&data).unwrap();
        let mut names = Vec::new();
        for (f, chunk) in texts.chunks(per_file).enumerate() {
            let first = (f * per_file) as i64;
            let ids: Int64Array = (0..chunk.len() as i64).map(|i| Some(first + i)).collect();
            let body: StringArray = chunk.iter().map(|s| Some(s.as_str())).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(ids) as ArrayRef, Arc::new(body)],
            )
            .unwrap();
            let name = format!("part-{f:04}.parquet");
            let file = std::fs::File::create(data.join(&name)).unwrap();
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            names.push(name);
        }

        // Skerry: register, define, build from the Parquet files.
        let overlay_dir = root.join(format!("overlay-{files}"));
        let url = format!("file://{}", overlay_dir.display());
        let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
        let t0 = Instant::now();
        o.register_parquet_table(
            "docs",
            &format!("file://{}", data.display()),
            FileSelection::List(names.clone()),
        )
        .await
        .unwrap();
        o.create_index(
            "docs",
            "body_text",
            &["body".into()],
            IndexOptions {
                kind: IndexKind::Fulltext,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        o.build("docs", |_| {}).await.unwrap();
        o.publish().await.unwrap();
        let skerry_build = t0.elapsed().as_secs_f64();
        // What the overlay keeps: the blobs a run took (decision 71) are deleted by a vacuum
        // (here without a grace period: nothing else reads this overlay).
        o.vacuum(skerry_core::admin::lifecycle::VacuumOptions {
            retain_versions: 1,
            grace_seconds: 0,
        })
        .await
        .unwrap();
        let skerry_bytes = dir_bytes(&overlay_dir.join("bundles"));
        let run_bytes: u64 = walk(&overlay_dir.join("bundles"))
            .into_iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("run-"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        o.close().await.unwrap();

        // The read path users get, with its default read cache.
        let reader = OverlayReader::open(&url, skerry_core::io::store::OpenOptions::default())
            .await
            .unwrap();
        // `BENCH_FULLTEXT_CACHE_BYTES`: another read cache, to find what a service should set.
        if let Some(n) = std::env::var("BENCH_FULLTEXT_CACHE_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            reader.snapshot().cache().set_budget(n);
            println!("(read cache {n} bytes)");
        }
        println!();
        println!("### {docs} documents in {files} files");
        println!();
        println!("| | Skerry | tantivy 0.27 | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| build | {skerry_build:.1} s | {tantivy_build:.1} s | {:.2}× |",
            skerry_build / tantivy_build
        );
        println!(
            "| index bytes (after vacuum: blobs of files no run holds + run) | {:.1} MB | {:.1} MB | {:.2}× |",
            skerry_bytes as f64 / 1e6,
            tantivy_bytes as f64 / 1e6,
            skerry_bytes as f64 / tantivy_bytes as f64
        );
        println!(
            "| index bytes (the run alone) | {:.1} MB | {:.1} MB | {:.2}× |",
            run_bytes as f64 / 1e6,
            tantivy_bytes as f64 / 1e6,
            run_bytes as f64 / tantivy_bytes as f64
        );
        for (set, queries) in &queries {
            measure(&reader, files, set, queries, &searcher, &qp).await;
        }
    }
    if args.iter().any(|a| a == "--appends") {
        let files = *layouts.last().expect("a layout");
        let per_file = docs.div_ceil(files.max(1));
        appends(
            &root,
            files,
            per_file,
            &schema,
            &vocab,
            &cdf,
            &mut r,
            &queries[0].1,
        )
        .await;
    }
    if let Some(k) = &keep {
        let qs: Vec<String> = queries
            .iter()
            .flat_map(|(_, q)| q.iter())
            .map(|q| format!("{q:?}"))
            .collect();
        std::fs::write(
            k.join("bench.json"),
            format!(
                "{{\"docs\": {docs}, \"layouts\": {layouts:?}, \"queries\": [{}]}}",
                qs.join(", ")
            ),
        )
        .unwrap();
        println!("\nkept in {}", k.display());
    }
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        if e.metadata().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// One query set on one layout: both engines warmed (and checked to agree on how many
/// results there are; Skerry's cold requests and bytes per query), then timed interleaved.
async fn measure(
    reader: &OverlayReader,
    files: usize,
    set: &str,
    queries: &[String],
    searcher: &tantivy::Searcher,
    qp: &tantivy::query::QueryParser,
) {
    use tantivy::collector::TopDocs;
    let ask = |q: &str| Search {
        query: q.to_string(),
        k: 10,
        columns: Some(vec![]),
        ..Default::default()
    };
    let (mut creq, mut cbytes) = (0u64, 0u64);
    for q in queries {
        let a = reader.snapshot().search("docs", &ask(q)).await.unwrap();
        creq += a.stats.index_requests;
        cbytes += a.stats.index_bytes;
        assert_eq!(
            a.stats.files_by_run, files as u64,
            "the run answers every file"
        );
        let tq = qp.parse_query(q).unwrap();
        let b = searcher
            .search(&tq, &TopDocs::with_limit(10).order_by_score())
            .unwrap();
        assert_eq!(a.rows.len(), b.len(), "{q}");
    }
    // `BENCH_FULLTEXT_PROFILE=1` (or `zipf`) profiles the zipf set, `uniform` the other.
    let profile = std::env::var("BENCH_FULLTEXT_PROFILE").ok();
    if profile.is_some_and(|p| p == set || (p == "1" && set == "zipf")) {
        // A long run of Skerry's searches alone, for a profiler.
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed().as_secs() < 30 {
            for q in queries {
                std::hint::black_box(reader.snapshot().search("docs", &ask(q)).await.unwrap());
            }
            n += queries.len() as u64;
        }
        eprintln!(
            "profile: {n} searches in {:.1} s, {:.1} µs each",
            t0.elapsed().as_secs_f64(),
            t0.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }
    let (mut ms, mut mt) = (Vec::new(), Vec::new());
    let (mut wreq, mut wbytes) = (0u64, 0u64);
    for q in queries {
        let s = ask(q);
        let t0 = Instant::now();
        let a = reader.snapshot().search("docs", &s).await.unwrap();
        ms.push(t0.elapsed().as_secs_f64() * 1e3);
        wreq += a.stats.index_requests;
        wbytes += a.stats.index_bytes;
        std::hint::black_box(a);
        let t0 = Instant::now();
        let tq = qp.parse_query(q).unwrap();
        let b = searcher
            .search(&tq, &TopDocs::with_limit(10).order_by_score())
            .unwrap();
        mt.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(b);
    }
    let (s50, t50) = (percentile(&mut ms, 0.5), percentile(&mut mt, 0.5));
    let (s95, t95) = (percentile(&mut ms, 0.95), percentile(&mut mt, 0.95));
    println!(
        "| top-10, 2 terms ({set}) p50 | {s50:.2} ms | {t50:.2} ms | {:.2}× |",
        s50 / t50
    );
    println!(
        "| top-10, 2 terms ({set}) p95 | {s95:.2} ms | {t95:.2} ms | {:.2}× |",
        s95 / t95
    );
    let n = queries.len() as f64;
    println!(
        "| ({set}) index requests / bytes per query, cold | {:.2} / {:.0} KB | | |",
        creq as f64 / n,
        cbytes as f64 / n / 1e3
    );
    println!(
        "| ({set}) index requests / bytes per query, warm | {:.2} / {:.0} KB | | |",
        wreq as f64 / n,
        wbytes as f64 / n / 1e3
    );
}

/// `--appends` (see the module docs).
#[allow(clippy::too_many_arguments)]
async fn appends(
    root: &std::path::Path,
    files: usize,
    per_file: usize,
    schema: &Arc<Schema>,
    vocab: &[String],
    cdf: &[f64],
    r: &mut Rng,
    queries: &[String],
) {
    let data = root.join(format!("data-{files}"));
    let overlay_dir = root.join(format!("overlay-{files}"));
    let bundles = overlay_dir.join("bundles");
    let url = format!("file://{}", overlay_dir.display());
    let mut next = files;
    let mut first_id = (files * per_file) as i64;
    println!();
    println!("### Appends to {files} files of {per_file} documents");
    println!();
    println!("| appended | build | bytes written | runs after | a whole run | files by run | p50 | requests / bytes per query |");
    println!("|---|---|---|---|---|---|---|---|");
    for group in [1usize, 1, 1, 1, 10, 100] {
        let mut names = Vec::new();
        for _ in 0..group {
            let texts: Vec<String> = (0..per_file)
                .map(|_| {
                    let n = 20 + (r.next() % 61) as usize;
                    (0..n)
                        .map(|_| vocab[zipf(r, cdf)].as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            let ids: Int64Array = (0..per_file as i64).map(|i| Some(first_id + i)).collect();
            first_id += per_file as i64;
            let body: StringArray = texts.iter().map(|s| Some(s.as_str())).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(ids) as ArrayRef, Arc::new(body)],
            )
            .unwrap();
            let name = format!("part-{next:04}.parquet");
            next += 1;
            let file = std::fs::File::create(data.join(&name)).unwrap();
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::SNAPPY)
                .build();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            names.push(name);
        }
        let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
        let before = dir_bytes(&bundles);
        let t0 = Instant::now();
        o.register_files("docs", &names).await.unwrap();
        o.build("docs", |_| {}).await.unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let wrote = dir_bytes(&bundles) - before;
        let m = o.snapshot_manifest(0).await.unwrap();
        let runs = m
            .table("docs")
            .unwrap()
            .index("body_text")
            .unwrap()
            .table_runs();
        let whole: u64 = runs.iter().map(|r| r.blob_length).sum();
        let nruns = runs.len();
        o.publish().await.unwrap();
        o.close().await.unwrap();
        let reader = OverlayReader::open(&url, skerry_core::io::store::OpenOptions::default())
            .await
            .unwrap();
        let ask = |q: &str| Search {
            query: q.to_string(),
            k: 10,
            columns: Some(vec![]),
            ..Default::default()
        };
        let mut by_run = 0;
        for q in queries {
            by_run = reader
                .snapshot()
                .search("docs", &ask(q))
                .await
                .unwrap()
                .stats
                .files_by_run;
        }
        let (mut ms, mut req, mut bytes) = (Vec::new(), 0u64, 0u64);
        for q in queries {
            let t0 = Instant::now();
            let a = reader.snapshot().search("docs", &ask(q)).await.unwrap();
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
            req += a.stats.index_requests;
            bytes += a.stats.index_bytes;
        }
        let n = queries.len() as f64;
        println!(
            "| {group} file{} | {secs:.2} s | {:.1} MB | {nruns} | {:.1} MB | {by_run} of {next} | {:.2} ms | {:.2} / {:.0} KB |",
            if group == 1 { "" } else { "s" },
            wrote as f64 / 1e6,
            whole as f64 / 1e6,
            percentile(&mut ms, 0.5),
            req as f64 / n,
            bytes as f64 / n / 1e3
        );
    }
}
