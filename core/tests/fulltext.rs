//! Full-text search: BM25 top-k equal (scores to 1e-6) to a brute force over the same
//! analyzer and table statistics — terms, OR/AND, phrases, `where` pre-filters — over files
//! indexed, unindexed (added after the build), stale (refreshed), drifted (rewritten behind
//! the catalog) and with deleted rows; both tokenizers; damaged blobs never change an
//! answer; the lifecycle (staged builds, verify, drop) carries the kind.

mod support;

use std::collections::HashMap;

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use skerry_core::admin::lifecycle::FileDeletes;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::analyzer::{Analyzer, Tokenizer};
use skerry_core::index::IndexKind;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::read::search::{Operator, Search};
use skerry_core::values::Value;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Rows of one file: (id, body, cat).
type Rows = Vec<(i64, Option<String>, i64)>;

const WORDS: [&str; 24] = [
    "the", "of", "and", "Running", "runs", "ran", "Grüße", "STRASSE", "straße", "naïve", "café",
    "日本", "über", "can't", "3.5", "x-ray", "a", "to", "in", "quick", "brown", "fox", "jumps",
    "lazy",
];

/// A Zipf-like word: rank r with probability about 1/r over the vocabulary.
fn word(r: &mut Rng) -> String {
    let u = (r.below(1 << 20) as f64 + 0.5) / (1u64 << 20) as f64;
    let rank = (300f64.powf(u) as usize).saturating_sub(1);
    if rank < WORDS.len() {
        WORDS[rank].to_string()
    } else {
        format!("w{rank}")
    }
}

fn doc(r: &mut Rng) -> Option<String> {
    match r.below(20) {
        0 => None,
        1 => Some(String::new()),
        _ => {
            let n = 1 + r.below(30);
            let mut s = String::new();
            for i in 0..n {
                if i > 0 {
                    s.push_str([" ", ", ", ". ", " — ", "\n"][r.below(5) as usize]);
                }
                let w = word(r);
                s.push_str(&if r.below(7) == 0 { w.to_uppercase() } else { w });
            }
            Some(s)
        }
    }
}

fn parquet(rows: &Rows) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("body", DataType::Utf8, true),
        Field::new("cat", DataType::Int64, false),
    ]));
    let id: Int64Array = rows.iter().map(|r| Some(r.0)).collect();
    let body: StringArray = rows.iter().map(|r| r.1.clone()).collect();
    let cat: Int64Array = rows.iter().map(|r| Some(r.2)).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(id) as ArrayRef, Arc::new(body), Arc::new(cat)],
    )
    .unwrap();
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(64))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

struct Table {
    dir: tempfile::TempDir,
    /// In registration order (the manifest's file order).
    files: Vec<(String, Rows)>,
    deleted: Vec<(String, Vec<u64>)>,
}

impl Table {
    fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("t")
    }
    fn write(&mut self, name: &str, rows: Rows) {
        std::fs::write(self.data().join(name), parquet(&rows)).unwrap();
        match self.files.iter_mut().find(|f| f.0 == name) {
            Some(f) => f.1 = rows,
            None => self.files.push((name.into(), rows)),
        }
    }

    /// Brute force: every row analyzed, the table's statistics over every non-NULL row, the
    /// matching live rows scored, best first (ties: file order, then position).
    /// `row_id(file, position)`: the row's id as the catalog assigned it (ties go by it).
    fn search(
        &self,
        tok: Tokenizer,
        s: &Search,
        row_id: &dyn Fn(&str, u64) -> u64,
    ) -> (Vec<(String, u64, f64)>, u64, u64) {
        let mut a = Analyzer::new(tok);
        let q = a.terms(&s.query);
        let mut terms: Vec<String> = Vec::new();
        for (t, _) in &q {
            if !terms.contains(t) {
                terms.push(t.clone());
            }
        }
        let first = q.first().map(|x| x.1).unwrap_or(0);
        let phrase: Vec<(usize, u32)> = q
            .iter()
            .map(|(t, p)| (terms.iter().position(|x| x == t).unwrap(), p - first))
            .collect();
        let (mut docs, mut tokens) = (0u64, 0u64);
        let mut df = vec![0u64; terms.len()];
        // (file, position, len, per-term positions)
        let mut analyzed = Vec::new();
        for (fi, (name, rows)) in self.files.iter().enumerate() {
            for (p, row) in rows.iter().enumerate() {
                let Some(text) = &row.1 else { continue };
                docs += 1;
                let ts = a.terms(text);
                tokens += ts.len() as u64;
                let mut pos: Vec<Vec<u32>> = vec![vec![]; terms.len()];
                for (t, at) in &ts {
                    if let Some(i) = terms.iter().position(|x| x == t) {
                        pos[i].push(*at);
                    }
                }
                for (i, ps) in pos.iter().enumerate() {
                    df[i] += u64::from(!ps.is_empty());
                }
                analyzed.push((fi, name.clone(), p as u64, ts.len() as u32, pos, row.2));
            }
        }
        let avg = tokens as f64 / docs.max(1) as f64;
        let mut out: Vec<(usize, String, u64, f64)> = Vec::new();
        for (fi, name, p, len, pos, cat) in analyzed {
            let dead = self.deleted.iter().any(|d| d.0 == name && d.1.contains(&p));
            if dead || terms.is_empty() {
                continue;
            }
            if let Some(Condition { op, .. }) = s.conditions.first() {
                let ok = match op {
                    Op::Eq(Value::Int(v)) => cat == *v,
                    Op::In(vs) => vs.contains(&Value::Int(cat)),
                    _ => unreachable!(),
                };
                if !ok {
                    continue;
                }
            }
            let present = pos.iter().filter(|p| !p.is_empty()).count();
            let and = s.phrase || s.operator == Operator::And;
            if present == 0 || (and && present < terms.len()) {
                continue;
            }
            if s.phrase {
                let (t0, o0) = phrase[0];
                let hit = pos[t0].iter().any(|&p0| {
                    p0 >= o0 && phrase.iter().all(|&(t, o)| pos[t].contains(&(p0 - o0 + o)))
                });
                if !hit {
                    continue;
                }
            }
            let mut score = 0.0;
            for (i, ps) in pos.iter().enumerate() {
                if !ps.is_empty() {
                    // BM25 written out here, not the crate's: k1 = 1.2, b = 0.75, Lucene's idf.
                    let (n, d, tf) = (docs as f64, df[i] as f64, ps.len() as f64);
                    let idf = (1.0 + (n - d + 0.5) / (d + 0.5)).ln();
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * f64::from(len) / avg));
                }
            }
            out.push((fi, name, p, score));
        }
        out.sort_by(|a, b| {
            b.3.total_cmp(&a.3)
                .then(row_id(&a.1, a.2).cmp(&row_id(&b.1, b.2)))
                .then(a.0.cmp(&b.0))
                .then(a.2.cmp(&b.2))
        });
        out.truncate(s.k);
        (
            out.into_iter().map(|(_, n, p, s)| (n, p, s)).collect(),
            docs,
            tokens,
        )
    }
}

async fn setup(seed: u64, files: usize, rows: usize, tok: Tokenizer) -> (Table, Overlay, Rng) {
    setup_with(seed, files, rows, tok, doc).await
}

/// A document of 20 to 80 words drawn Zipf-like over 3,000 (`z0` the most frequent, in 98%
/// of the documents): lengths spread like prose, so a block's best saturation varies.
fn long_doc(r: &mut Rng) -> Option<String> {
    let n = 20 + r.below(61);
    let words: Vec<String> = (0..n)
        .map(|_| {
            let u = (r.below(1 << 20) as f64 + 0.5) / (1u64 << 20) as f64;
            format!("z{}", (3000f64.powf(u) as usize).saturating_sub(1))
        })
        .collect();
    Some(words.join(" "))
}

async fn setup_with(
    seed: u64,
    files: usize,
    rows: usize,
    tok: Tokenizer,
    gen: fn(&mut Rng) -> Option<String>,
) -> (Table, Overlay, Rng) {
    let mut t = Table {
        dir: tempfile::tempdir().unwrap(),
        files: vec![],
        deleted: vec![],
    };
    std::fs::create_dir_all(t.data()).unwrap();
    let mut r = Rng(seed);
    for f in 0..files {
        let rows: Rows = (0..rows)
            .map(|i| ((f * rows + i) as i64, gen(&mut r), r.below(5) as i64))
            .collect();
        t.write(&format!("f{f:03}.parquet"), rows);
    }
    let o = Overlay::open(
        &format!("file://{}", t.dir.path().join("overlay").display()),
        OpenOptions::default(),
    )
    .await
    .unwrap();
    let names = t.files.iter().map(|f| f.0.clone()).collect();
    o.register_parquet_table(
        "t",
        &format!("file://{}", t.data().display()),
        FileSelection::List(names),
    )
    .await
    .unwrap();
    let info = o
        .create_index(
            "t",
            "body_text",
            &["body".into()],
            IndexOptions {
                kind: IndexKind::Fulltext,
                tokenizer: Some(tok),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(info.kind, IndexKind::Fulltext);
    o.build("t", |_| {}).await.unwrap();
    (t, o, r)
}

/// f006: 90 rows registered after the build (outside the run; registering indexes it).
async fn add_pending(t: &mut Table, o: &Overlay, r: &mut Rng) {
    let rows: Rows = (0..90)
        .map(|i| (6000 + i, doc(r), r.below(5) as i64))
        .collect();
    t.write("f006.parquet", rows);
    o.register_files("t", &["f006.parquet".into()])
        .await
        .unwrap();
}

/// [`check`]s `s` (simple tokenizer) and searches it with a cold reader of the published
/// overlay, whose answer must be the checked one to the bit; the cold answer.
async fn check_cold(
    t: &Table,
    o: &Overlay,
    s: &Search,
    what: &str,
) -> skerry_core::read::search::SearchResult {
    check(t, o, Tokenizer::Simple, s, what).await;
    let got = support::open_reader(&t.dir.path().join("overlay"))
        .await
        .snapshot()
        .search("t", s)
        .await
        .unwrap();
    let want = o.search("t", s).await.unwrap();
    assert_eq!(
        (&got.rows, &got.scores),
        (&want.rows, &want.scores),
        "{what} {s:?}"
    );
    got
}

/// A query drawn from the corpus: 1–3 words, a phrase of 2–3 consecutive words of a document,
/// or a word no document holds.
fn pick(t: &Table, r: &mut Rng) -> Search {
    let mut s = Search {
        k: [1, 5, 10, 50][r.below(4) as usize],
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    match r.below(6) {
        0 | 1 => {
            s.query = (0..1 + r.below(3))
                .map(|_| word(r))
                .collect::<Vec<_>>()
                .join(" ");
        }
        2 => {
            s.query = format!("{} {}", word(r), word(r));
            s.operator = Operator::And;
        }
        3 | 4 => {
            let (_, rows) = &t.files[r.below(t.files.len() as u64) as usize];
            let text = rows[r.below(rows.len() as u64) as usize]
                .1
                .clone()
                .unwrap_or_default();
            let words: Vec<&str> = text.split_whitespace().collect();
            let n = 2 + r.below(2) as usize;
            let at = if words.len() > n {
                r.below((words.len() - n) as u64) as usize
            } else {
                0
            };
            s.query = words[at.min(words.len())..(at + n).min(words.len())].join(" ");
            s.phrase = true;
        }
        _ => s.query = "zzzabsent".into(),
    }
    if r.below(4) == 0 {
        s.conditions = vec![Condition::new("cat", Op::Eq(Value::Int(r.below(5) as i64)))];
    }
    s
}

async fn check(t: &Table, o: &Overlay, tok: Tokenizer, s: &Search, what: &str) -> u64 {
    let got = o.search("t", s).await.unwrap();
    let m = o.snapshot().await.unwrap().manifest().clone();
    let files = &m.table("t").unwrap().files;
    let row_id = |name: &str, p: u64| {
        files
            .iter()
            .find(|f| f.path == name)
            .and_then(|f| f.row_id_at(p))
            .unwrap_or(u64::MAX)
    };
    let (want, docs, tokens) = t.search(tok, s, &row_id);
    assert_eq!(got.bm25.docs, docs, "{what} {s:?}");
    assert_eq!(got.bm25.tokens, tokens, "{what} {s:?}");
    let got_rows: Vec<(String, u64)> = got
        .rows
        .iter()
        .map(|r| (r.file.clone(), r.position))
        .collect();
    let want_rows: Vec<(String, u64)> = want.iter().map(|w| (w.0.clone(), w.1)).collect();
    assert_eq!(got_rows, want_rows, "{what} {s:?}\n{:?}", got.stats);
    for (g, w) in got.scores.iter().zip(&want) {
        assert!(
            (g - w.2).abs() < 1e-6,
            "{what} score {g} vs {} for {s:?}",
            w.2
        );
    }
    // The fetched ids are the rows'.
    assert_eq!(got.batch.num_rows(), got_rows.len());
    if got_rows.is_empty() {
        return got.stats.files_by_index;
    }
    let ids = got
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    for (i, (name, p)) in got_rows.iter().enumerate() {
        let rows = &t.files.iter().find(|f| &f.0 == name).unwrap().1;
        assert_eq!(ids.value(i), rows[*p as usize].0);
    }
    got.stats.files_by_index
}

async fn differential(tok: Tokenizer, seed: u64) {
    let (mut t, o, mut r) = setup(seed, 6, 150, tok).await;
    // Everything indexed.
    let mut by_index = 0;
    for _ in 0..60 {
        let s = pick(&t, &mut r);
        by_index += check(&t, &o, tok, &s, "indexed").await;
    }
    assert!(by_index > 0, "no file was answered from its blob");
    // The build merged the six files' blobs into the table run: a search reads it alone.
    let s = pick(&t, &mut r);
    assert_eq!(o.search("t", &s).await.unwrap().stats.files_by_run, 6);
    // f006: registered after the build (outside the run).
    add_pending(&mut t, &o, &mut r).await;
    // f002: deleted rows.
    let dead: Vec<u64> = (0..150).filter(|p| p % 3 == 1).collect();
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "f002.parquet".into(),
            positions: dead.clone(),
        }],
    )
    .await
    .unwrap();
    t.deleted.push(("f002.parquet".into(), dead));
    // The run still answers its six files (deleted rows filtered), f006 its own blob beside it.
    for _ in 0..40 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "run, pending and deleted").await;
        let got = o.search("t", &s).await.unwrap();
        assert_eq!(got.stats.files_by_run, 6, "{s:?}");
        // (A registration indexes its files: f006 answers from its own blob.)
        assert_eq!(got.stats.files_by_index, 7, "{s:?} {:?}", got.stats);
    }
    // f001: rewritten and refreshed (its blob is stale and the run leaves it out: its share
    // is subtracted from the run's statistics, it is scanned, the run answers the other five).
    let rows: Rows = (0..70)
        .map(|i| (1000 + i, doc(&mut r), r.below(5) as i64))
        .collect();
    t.write("f001.parquet", rows);
    o.refresh("t").await.unwrap();
    let mut scanned = 0;
    for _ in 0..60 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "mixed").await;
        let got = o.search("t", &s).await.unwrap();
        scanned += got.stats.files_scanned;
        assert_eq!(got.stats.files_by_run, 5, "{s:?} {:?}", got.stats);
    }
    assert!(scanned > 0);
    // Rebuilt: f001 gets a blob. The two files no run covers (f001, f006: fewer than
    // RUN_MIN_FILES, under a quarter of the run's rows) answer by their own blobs — RFC 0004's
    // delta — beside the run's five; the run is not written again.
    o.build("t", |_| {}).await.unwrap();
    for _ in 0..30 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "rebuilt, a delta of two").await;
        let got = o.search("t", &s).await.unwrap();
        assert_eq!(got.stats.files_by_run, 5, "{s:?}");
        assert_eq!(got.stats.files_scanned, 0, "{s:?}");
    }
    // Two small files more: the four no run covers become a second run (180 rows, under a
    // quarter of the first run's 750 live ones): two runs answer every file, the statistics
    // summed over both, f001's stale share subtracted from the first.
    for (name, first) in [("f007.parquet", 7000), ("f008.parquet", 8000)] {
        let rows: Rows = (0..10)
            .map(|i| (first + i, doc(&mut r), r.below(5) as i64))
            .collect();
        t.write(name, rows);
        o.register_files("t", &[name.into()]).await.unwrap();
    }
    o.build("t", |_| {}).await.unwrap();
    let m = o.snapshot_manifest(0).await.unwrap();
    let runs = m
        .table("t")
        .unwrap()
        .index("body_text")
        .unwrap()
        .table_runs()
        .len();
    assert_eq!(runs, 2);
    for _ in 0..30 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "two runs").await;
        let got = o.search("t", &s).await.unwrap();
        assert_eq!(got.stats.files_by_run, 9, "{s:?}");
    }
    // Deleted rows in a file of the second run.
    let dead: Vec<u64> = (0..90).filter(|p| p % 4 == 3).collect();
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "f006.parquet".into(),
            positions: dead.clone(),
        }],
    )
    .await
    .unwrap();
    t.deleted.push(("f006.parquet".into(), dead));
    for _ in 0..20 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "two runs, deleted rows").await;
    }
    // f003: removed from the table (the run leaves it out, its share subtracted).
    std::fs::remove_file(t.data().join("f003.parquet")).unwrap();
    t.files.retain(|f| f.0 != "f003.parquet");
    o.refresh("t").await.unwrap();
    for _ in 0..30 {
        let s = pick(&t, &mut r);
        check(&t, &o, tok, &s, "removed file").await;
        let got = o.search("t", &s).await.unwrap();
        assert_eq!(got.stats.files_by_run, 8, "{s:?}");
    }
    // f004: rewritten behind the catalog (drift): `verify` confirms every file.
    let rows: Rows = (0..150)
        .map(|i| (4000 + i, doc(&mut r), r.below(5) as i64))
        .collect();
    t.write("f004.parquet", rows);
    for _ in 0..30 {
        let mut s = pick(&t, &mut r);
        s.verify_files = true;
        check(&t, &o, tok, &s, "drifted").await;
    }
    // Forced scans agree (the same statistics, the same scores).
    o.set_scan_only(true);
    for _ in 0..10 {
        let mut s = pick(&t, &mut r);
        s.verify_files = true;
        check(&t, &o, tok, &s, "scan-only").await;
    }
    o.set_scan_only(false);
    o.close().await.unwrap();
}

#[tokio::test]
async fn simple_search_matches_brute_force() {
    differential(Tokenizer::Simple, 0x2545F4914F6CDD1D).await;
}

#[tokio::test]
async fn english_search_matches_brute_force() {
    differential(Tokenizer::English, 0x9E3779B97F4A7C15).await;
}

/// Many postings per term (blocks skipped by MaxScore) and a where over most rows: still the
/// brute force's answer; a one-term query reads the directory, one term block and the
/// postings — three rounds cold, none warm.
#[tokio::test]
async fn large_files_and_rounds() {
    let (t, o, mut r) = setup(0x51_7CC1_B727_220A, 3, 3000, Tokenizer::Simple).await;
    o.publish().await.unwrap();
    let reader = support::open_reader(&t.dir.path().join("overlay")).await;
    let s = Search {
        query: "quick w40".into(),
        k: 10,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    let cold = reader.snapshot().search("t", &s).await.unwrap();
    assert_eq!(cold.rounds, 3, "{:?}", cold.stats);
    assert_eq!(cold.stats.files_by_index, 3);
    let warm = reader.snapshot().search("t", &s).await.unwrap();
    assert_eq!(warm.rounds, 0);
    assert_eq!(warm.stats.index_requests, 0, "{:?}", warm.stats);
    assert_eq!(warm.rows, cold.rows);
    for _ in 0..40 {
        let s = pick(&t, &mut r);
        check(&t, &o, Tokenizer::Simple, &s, "large").await;
    }
    let mut s = Search {
        query: "the of and quick".into(),
        k: 20,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    check(&t, &o, Tokenizer::Simple, &s, "frequent").await;
    s.conditions = vec![Condition::new(
        "cat",
        Op::In(vec![Value::Int(1), Value::Int(3)]),
    )];
    check(&t, &o, Tokenizer::Simple, &s, "frequent where").await;
    o.close().await.unwrap();
}

/// A table run's frequent terms are read by block (their postings pass 32 KiB here): the
/// rare terms' documents give a floor, and only the frequent terms' blocks that can still hold
/// a result are read — in one more round (three in all: the run's small directory comes with
/// the manifest), a fraction of the bytes — with every answer the brute force's: OR, AND,
/// phrases, `where`, deleted rows, a pending file, damaged blocks.
/// Frequent terms in documents of 20 to 80 words, every term read by block from its block
/// impacts: a term alone reads its skips and a few blocks; pairs and triples of frequent
/// terms (where at this size the blocks that may hold a result lie too scattered to read
/// apart, so the postings are read whole after the skips) answer exactly — k 1, 10 and 50,
/// against the brute force.
#[tokio::test]
async fn frequent_terms_by_impacts_match_brute_force() {
    let (t, o, _) = setup_with(0x5851_F42D_4C95_7F2D, 4, 20000, Tokenizer::Simple, long_doc).await;
    o.publish().await.unwrap();
    let overlay_dir = t.dir.path().join("overlay");
    let ask = |query: &str, k: usize| Search {
        query: query.into(),
        k,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    let alone = support::open_reader(&overlay_dir)
        .await
        .snapshot()
        .search("t", &ask("z0", 10))
        .await
        .unwrap();
    let mut and = ask("z0", 10);
    and.operator = Operator::And;
    let whole = support::open_reader(&overlay_dir)
        .await
        .snapshot()
        .search("t", &and)
        .await
        .unwrap();
    assert_eq!((alone.rounds, whole.rounds), (3, 2));
    assert!(
        alone.stats.index_bytes * 3 < whole.stats.index_bytes,
        "by impacts {} vs whole {}",
        alone.stats.index_bytes,
        whole.stats.index_bytes
    );
    for query in [
        "z0", "z1", "z0 z1", "z0 z3", "z1 z2", "z0 z5", "z0 z1 z2", "z2 z40",
    ] {
        for k in [1, 10, 50] {
            let s = ask(query, k);
            let got = check_cold(&t, &o, &s, "impacts, frequent terms").await;
            assert!(got.rounds <= 3, "{query}: {:?}", got.stats);
        }
    }
}

#[tokio::test]
async fn frequent_terms_read_by_block_match_brute_force() {
    let (mut t, o, mut r) = setup(0x3C6E_F372_FE94_F82B, 4, 36000, Tokenizer::Simple).await;
    o.publish().await.unwrap();
    let overlay_dir = t.dir.path().join("overlay");
    let open = || support::open_reader(&overlay_dir);
    let q = |query: &str| Search {
        query: query.into(),
        k: 10,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    // "the" alone with `and`: nothing gives a floor, so its postings are read whole.
    let mut and_the = q("the");
    and_the.operator = Operator::And;
    let whole = open().await.snapshot().search("t", &and_the).await.unwrap();
    assert_eq!(whole.stats.files_by_run, 4);
    assert_eq!(whole.rounds, 2, "{:?}", whole.stats);
    // With `or`, its block impacts give the floor: its skips, then the few blocks that can
    // hold a top-10 document — well under half of its postings.
    let alone = open()
        .await
        .snapshot()
        .search("t", &q("the"))
        .await
        .unwrap();
    assert_eq!(alone.rounds, 3, "{:?}", alone.stats);
    assert!(
        alone.stats.index_bytes * 2 < whole.stats.index_bytes,
        "by block {} vs whole {}",
        alone.stats.index_bytes,
        whole.stats.index_bytes
    );
    check(&t, &o, Tokenizer::Simple, &q("the"), "impacts, one term").await;
    // Every term frequent: the impacts' floor and the others' block bounds over the same
    // rows decide which blocks to read, in one more round. Here (documents of 1 to 30
    // words, every block holding a short one) no block can be ruled out, so the terms are
    // read whole after their skips: a round more than `and`, and not a byte more — the rest
    // of each term's postings after the skip section this search already holds.
    // (Each word alone with `and` reads its term block and its postings whole.)
    let mut alone_whole = HashMap::new();
    for word in ["the", "of", "and"] {
        let mut and = q(word);
        and.operator = Operator::And;
        let w = open().await.snapshot().search("t", &and).await.unwrap();
        assert_eq!(w.rounds, 2, "{word}: {:?}", w.stats);
        alone_whole.insert(word, w.stats.index_bytes);
    }
    for query in ["the of", "the of and", "of and"] {
        let got = open()
            .await
            .snapshot()
            .search("t", &q(query))
            .await
            .unwrap();
        assert_eq!(got.rounds, 3, "{query}: {:?}", got.stats);
        let mut and = q(query);
        and.operator = Operator::And;
        let both = open().await.snapshot().search("t", &and).await.unwrap();
        assert_eq!(
            got.stats.index_bytes, both.stats.index_bytes,
            "{query}: skips, then the rest, vs whole"
        );
        // The skips are read once: no more than each word's postings read whole.
        let whole_sum: u64 = query.split(' ').map(|w| alone_whole[w]).sum();
        assert!(
            got.stats.index_bytes <= whole_sum,
            "{query}: {} read, {whole_sum} with each word's postings whole",
            got.stats.index_bytes
        );
        for k in [1, 10, 100] {
            let s = Search { k, ..q(query) };
            check(&t, &o, Tokenizer::Simple, &s, "impacts, all frequent").await;
        }
    }
    // With a rarer word: its skips, then (here, for the best document) a few of its blocks.
    let best = |query: &str| Search { k: 1, ..q(query) };
    let cold = open()
        .await
        .snapshot()
        .search("t", &best("the w150"))
        .await
        .unwrap();
    assert_eq!(cold.rounds, 3, "{:?}", cold.stats);
    check(
        &t,
        &o,
        Tokenizer::Simple,
        &best("the w150"),
        "by block, k 1",
    )
    .await;
    // What "the" costs beside the directory, term block and "w150"'s postings: under half
    // of its postings read whole.
    let rare = open()
        .await
        .snapshot()
        .search("t", &best("w150"))
        .await
        .unwrap();
    let (by_block, whole_postings) = (
        cold.stats.index_bytes - rare.stats.index_bytes,
        whole.stats.index_bytes - rare.stats.index_bytes,
    );
    assert!(
        by_block * 2 < whole_postings,
        "by block {by_block} vs whole {whole_postings}"
    );
    check(&t, &o, Tokenizer::Simple, &q("the w150"), "by block").await;
    let mut and = q("the of w60");
    and.operator = Operator::And;
    let got = open().await.snapshot().search("t", &and).await.unwrap();
    assert_eq!(got.rounds, 3, "{:?}", got.stats);
    check(&t, &o, Tokenizer::Simple, &and, "and by block").await;
    // Warm, the blocks read are cached: the same search reads nothing. A search needing
    // other blocks of "the" reads it whole (one round); then nothing again.
    let reader = open().await;
    let first = reader
        .snapshot()
        .search("t", &best("the w150"))
        .await
        .unwrap();
    assert_eq!(first.rounds, 3, "{:?}", first.stats);
    let warm = reader
        .snapshot()
        .search("t", &best("the w150"))
        .await
        .unwrap();
    assert_eq!((warm.rounds, warm.stats.index_requests), (0, 0));
    assert_eq!((&warm.rows, &warm.scores), (&first.rows, &first.scores));
    let other = reader.snapshot().search("t", &q("the w150")).await.unwrap();
    assert_eq!(other.rounds, 1, "{:?}", other.stats);
    assert!(other.stats.index_bytes > by_block, "{:?}", other.stats);
    for query in [q("the w150"), best("the w150")] {
        let warm = reader.snapshot().search("t", &query).await.unwrap();
        assert_eq!((warm.rounds, warm.stats.index_requests), (0, 0));
    }
    // A cache too small to hold "the" whole among other entries (its postings take over
    // 1/32 of it): a search needing other blocks reads those blocks, not the postings, and
    // answers the same; then nothing again.
    let small = open().await;
    small.snapshot().cache().set_budget(1 << 20);
    small
        .snapshot()
        .search("t", &best("the w150"))
        .await
        .unwrap();
    let more = small.snapshot().search("t", &q("the w150")).await.unwrap();
    assert_eq!(more.rounds, 1, "{:?}", more.stats);
    assert!(
        more.stats.index_bytes * 2 < whole_postings,
        "blocks {} vs whole {whole_postings}",
        more.stats.index_bytes
    );
    let want = o.search("t", &q("the w150")).await.unwrap();
    assert_eq!((&more.rows, &more.scores), (&want.rows, &want.scores));
    let again = small.snapshot().search("t", &q("the w150")).await.unwrap();
    assert_eq!((again.rounds, again.stats.index_requests), (0, 0));
    for _ in 0..15 {
        let s = pick(&t, &mut r);
        check(&t, &o, Tokenizer::Simple, &s, "run by block").await;
    }
    // Deleted rows, `where`, and a pending file: the floor counts only kept run rows and
    // bars the pending file's documents too.
    let dead: Vec<u64> = (0..12000).filter(|p| p % 4 != 0).collect();
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "f001.parquet".into(),
            positions: dead.clone(),
        }],
    )
    .await
    .unwrap();
    t.deleted.push(("f001.parquet".into(), dead));
    let rows: Rows = (0..400)
        .map(|i| (90_000 + i, doc(&mut r), r.below(5) as i64))
        .collect();
    t.write("f009.parquet", rows);
    o.register_files("t", &["f009.parquet".into()])
        .await
        .unwrap();
    for _ in 0..10 {
        let s = pick(&t, &mut r);
        check(&t, &o, Tokenizer::Simple, &s, "deleted, pending").await;
    }
    for k in [1, 50] {
        for query in ["the w150", "of and w40 w90"] {
            let mut s = q(query);
            s.k = k;
            check(&t, &o, Tokenizer::Simple, &s, "fixed").await;
            s.conditions = vec![Condition::new("cat", Op::Eq(Value::Int(2)))];
            check(&t, &o, Tokenizer::Simple, &s, "fixed where").await;
        }
    }
    // The run's directory rides in the published manifest (so a cold search reads none);
    // one altered there no longer matches its SHA-256 and is ignored: the bundle's is read,
    // one round more, the same answer.
    let head_bytes = std::fs::read(t.dir.path().join("overlay/manifests/HEAD")).unwrap();
    let head: serde_json::Value =
        serde_json::from_slice(&skerry_core::formats::manifest::Head::json(&head_bytes).unwrap())
            .unwrap();
    let mpath = t
        .dir
        .path()
        .join("overlay")
        .join(head["path"].as_str().unwrap());
    let published = std::fs::read(&mpath).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&published).unwrap();
    let inline = v["tables"][0]["indexes"][0]["run"]["directory"]
        .as_str()
        .expect("an inline run directory")
        .to_string();
    let before = open()
        .await
        .snapshot()
        .search("t", &best("w150"))
        .await
        .unwrap();
    assert_eq!(before.rounds, 2, "{:?}", before.stats);
    let mut bad = inline.into_bytes();
    bad[100] = if bad[100] == b'0' { b'1' } else { b'0' };
    v["tables"][0]["indexes"][0]["run"]["directory"] = String::from_utf8(bad).unwrap().into();
    let overlay = t.dir.path().join("overlay");
    support::serve_published(&overlay, v.to_string().as_bytes());
    let after = open()
        .await
        .snapshot()
        .search("t", &best("w150"))
        .await
        .unwrap();
    assert_eq!(after.rounds, 3, "{:?}", after.stats);
    assert_eq!((&after.rows, &after.scores), (&before.rows, &before.scores));
    support::serve_published(&overlay, &published);
    // Damaged blocks of "the" (its skips intact): each block is refused when read, never
    // decoded — the run is left for the files' own blobs, and the answer stays exact.
    o.publish().await.unwrap();
    let m = o.snapshot().await.unwrap().manifest().clone();
    let run = m.table("t").unwrap().indexes[0]
        .table_run()
        .expect("a table run")
        .clone();
    let path = t.dir.path().join("overlay").join(&run.bundle_path);
    let original = std::fs::read(&path).unwrap();
    let blob = &original[run.blob_offset as usize..(run.blob_offset + run.blob_length) as usize];
    let d0 = run.ordered.directory_offset as usize;
    let dir = skerry_core::index::fulltext::FulltextDirectory::parse(
        &blob[d0..d0 + run.ordered.directory_length as usize],
        None,
        run.blob_length,
    )
    .unwrap();
    assert!(dir.checked && dir.interleaved);
    let tb = &dir.blocks[dir.block_of(b"the").unwrap()];
    let e = skerry_core::index::fulltext::parse_term_block(
        &blob[tb.offset as usize..(tb.offset + tb.length) as usize],
        tb,
        &dir,
        run.blob_length,
    )
    .unwrap()
    .into_iter()
    .find(|e| e.term == b"the")
    .unwrap();
    let blocks =
        run.blob_offset + e.postings.start + e.skips.unwrap().0..run.blob_offset + e.postings.end;
    // And damaged groups of the run's length table, where "the" (in most documents) finds
    // its lengths: refused when read beside its blocks, the answer as exact.
    assert!(
        e.shared_lengths,
        "\"the\" takes its lengths from the length table"
    );
    let lt = dir.lengths.as_ref().expect("a length table");
    let table = run.blob_offset + lt.offset..run.blob_offset + lt.offset + lt.length;
    for (what, range) in [("blocks", blocks), ("length table", table)] {
        let mut damaged = original.clone();
        for x in &mut damaged[range.start as usize..range.end as usize] {
            *x ^= 0x55;
        }
        std::fs::write(&path, &damaged).unwrap();
        let reader = open().await;
        let got = reader.snapshot().search("t", &q("the w150")).await.unwrap();
        assert!(
            got.stats.rejections.iter().any(|r| r.data_file == "*"),
            "{what}: {:?}",
            got.stats
        );
        let want = o.search("t", &q("the w150")).await.unwrap();
        assert_eq!(got.rows.len(), 10);
        assert_eq!(
            got.rows
                .iter()
                .map(|r| (&r.file, r.position))
                .collect::<Vec<_>>(),
            want.rows
                .iter()
                .map(|r| (&r.file, r.position))
                .collect::<Vec<_>>(),
            "{what}"
        );
        check(&t, &o, Tokenizer::Simple, &q("the w150"), "damaged").await;
        std::fs::write(&path, &original).unwrap();
    }
    o.close().await.unwrap();
}

/// A flipped byte anywhere in a bundle never changes an answer: the blob is rejected (its
/// file scanned) or the damage is outside what the search reads.
/// The drop (decision 71): once the run holds six files' entries, their blobs are gone —
/// their bundles withdrawn by the build itself, nothing deleted here — and the published
/// manifest lists no entry for them, only the pending file's, inline beside the run. A search
/// answers the six from the run, and so does one under `verify_files` once a HEAD confirms
/// each, answering like the catalog. A format-3 manifest (a covered part, as earlier versions
/// wrote) still reads, and its hostile shapes are refused `E_MANIFEST`.
#[tokio::test]
async fn covered_files_have_no_blob_and_are_answered_by_the_run_or_scanned() {
    let (mut t, o, mut r) = setup(0x6A09_E667_F3BC_C908, 6, 150, Tokenizer::Simple).await;
    o.set_part_min_bytes(1 << 30);
    let overlay_dir = t.dir.path().join("overlay");
    let bundle_files = |dir: &std::path::Path| support::files_under(&dir.join("bundles"));
    let before = bundle_files(&overlay_dir);
    add_pending(&mut t, &o, &mut r).await;
    o.publish().await.unwrap();
    let m = o.snapshot().await.unwrap().manifest().clone();
    let ix = m.table("t").unwrap().index("body_text").unwrap();
    let run = ix.table_run().expect("a run");
    assert_eq!(run.files.len(), 6);
    let listed: Vec<u64> = ix.file_entries().iter().map(|e| e.file_id).collect();
    assert_eq!(
        listed.len(),
        1,
        "only the pending file has a blob: {listed:?}"
    );
    assert!(run.files.iter().all(|rf| !listed.contains(&rf.file_id)));
    // The catalog keeps the six records (gate facts, the dropped blob's SHA-256), marked.
    let held = o.catalog_keys("a/").await.unwrap();
    assert_eq!(held, 7);
    // A vacuum with no grace deletes the covered files' old bundles: nothing names them.
    support::vacuum_now(&o).await;
    let after = bundle_files(&overlay_dir);
    for b in &before {
        let live = run
            .bundle_path
            .ends_with(&*b.file_name().unwrap().to_string_lossy());
        assert_eq!(after.contains(b), live, "{b:?}");
    }
    // The run bundle and the pending file's bundle are all that is left.
    assert_eq!(after.len(), 2, "{after:?}");
    for _ in 0..25 {
        let s = pick(&t, &mut r);
        let got = check_cold(&t, &o, &s, "covered files").await;
        assert_eq!(got.stats.files_by_run, 6, "{s:?}");
    }
    let mut s = pick(&t, &mut r);
    s.verify_files = true;
    let got = support::open_reader(&overlay_dir)
        .await
        .snapshot()
        .search("t", &s)
        .await
        .unwrap();
    let want = o.search("t", &s).await.unwrap();
    // `verify` confirms the six with a HEAD each, then the run answers them.
    assert_eq!(got.stats.files_by_run, 6, "{:?}", got.stats);
    assert_eq!(got.stats.files_scanned, 0, "{:?}", got.stats);
    assert!(got.stats.rejections.is_empty(), "{:?}", got.stats);
    assert_eq!((&got.rows, &got.scores), (&want.rows, &want.scores));
    // A format-3 root (an earlier writer's: the run in the root, entries in a covered part)
    // reads; its hostile shapes are refused `E_MANIFEST`: a version-2 root with a run beside
    // a part, a part naming a file the root lists, a part with a run of its own.
    use sha2::Digest;
    use skerry_core::formats::manifest::{part_path, IndexPart, Manifest, PartRef};
    let mut m3 = Manifest::clone(&m);
    m3.format_version = 3;
    let (tid, iid) = (m3.tables[0].table_id, m3.tables[0].indexes[0].index_id);
    let part_of = |p: &IndexPart| {
        let bytes = serde_json::to_vec(p).unwrap();
        let r = PartRef {
            path: part_path(m3.version, tid, iid),
            size: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
            files: p.files.len() as u64,
        };
        (bytes, r)
    };
    let good = IndexPart {
        format_version: 3,
        version: m3.version,
        table_id: tid,
        index_id: iid,
        files: m3.tables[0].indexes[0].files.clone(),
        run: None,
        tiers: vec![],
    };
    let (good_bytes, good_ref) = part_of(&good);
    m3.tables[0].indexes[0].files.clear();
    m3.tables[0].indexes[0].part = Some(good_ref.clone());
    let root = Manifest::from_json(&m3.to_json()).unwrap();
    let ixm = &root.tables[0].indexes[0];
    assert!(ixm.covered_part());
    ixm.attach(root.version, &root.tables[0], &good_bytes)
        .unwrap();
    assert_eq!(ixm.file_entries().len(), 1);
    let mut v2 = m3.clone();
    v2.format_version = 2;
    assert_eq!(
        Manifest::from_json(&v2.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
    let mut twice = m3.clone();
    twice.tables[0].indexes[0].files = good.files.clone();
    let root2 = Manifest::from_json(&twice.to_json()).unwrap();
    let e = root2.tables[0].indexes[0]
        .attach(root2.version, &root2.tables[0], &good_bytes)
        .unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST", "{e}");
    let mut with_run = good.clone();
    with_run.run = m3.tables[0].indexes[0].run.clone();
    let (bytes, r4) = part_of(&with_run);
    let mut m4 = m3.clone();
    m4.tables[0].indexes[0].part = Some(r4);
    let root4 = Manifest::from_json(&m4.to_json()).unwrap();
    let e = root4.tables[0].indexes[0]
        .attach(root4.version, &root4.tables[0], &bytes)
        .unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST", "{e}");
}

#[tokio::test]
async fn damaged_blobs_never_change_an_answer() {
    let (t, o, mut r) = setup(0xD1B5_4A32_D192_ED03, 4, 200, Tokenizer::Simple).await;
    let bundles = support::files_under(&t.dir.path().join("overlay").join("bundles"));
    assert!(!bundles.is_empty());
    // Every other flip lands in the table run's bundle.
    let run = bundles
        .iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("run-"))
        .expect("four files get a table run")
        .clone();
    let mut o = o;
    let mut rejected = 0;
    let mut run_rejected = 0;
    for i in 0..40 {
        let path = match i % 2 {
            0 => &run,
            _ => &bundles[r.below(bundles.len() as u64) as usize],
        };
        let original = std::fs::read(path).unwrap();
        let mut b = original.clone();
        let at = r.below(b.len() as u64) as usize;
        b[at] ^= 1 + r.below(255) as u8;
        std::fs::write(path, &b).unwrap();
        o.close().await.unwrap();
        o = Overlay::open(
            &format!("file://{}", t.dir.path().join("overlay").display()),
            OpenOptions::default(),
        )
        .await
        .unwrap();
        for _ in 0..3 {
            let s = pick(&t, &mut r);
            check(&t, &o, Tokenizer::Simple, &s, &format!("flip {i} at {at}")).await;
            let got = o.search("t", &s).await.unwrap();
            rejected += got.stats.rejections.len();
            run_rejected += got
                .stats
                .rejections
                .iter()
                .filter(|r| r.data_file == "*")
                .count();
        }
        std::fs::write(path, &original).unwrap();
    }
    assert!(rejected > 0, "no damage was ever noticed");
    assert!(run_rejected > 0, "no damage to the run was ever noticed");
    // A run naming one file twice would count its documents twice: the manifest is refused.
    let m = o.snapshot().await.unwrap().manifest().clone();
    let mut v: serde_json::Value = serde_json::to_value(&*m).unwrap();
    let run = v["tables"][0]["indexes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find_map(|ix| ix.get_mut("run").filter(|r| !r.is_null()))
        .expect("a fulltext run in the manifest");
    let first = run["files"][0].clone();
    run["files"][1] = first;
    let e =
        skerry_core::formats::manifest::Manifest::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(e.to_string().contains("names a file twice"), "{e}");
    o.close().await.unwrap();
}

/// Staged builds in small steps, verify, phrases without positions (scanned), typed errors.
#[tokio::test]
async fn lifecycle_and_errors() {
    use skerry_core::admin::build::StepOptions;
    let (t, o, mut r) = setup(0x1234_5678_9ABC_DEF1, 3, 200, Tokenizer::Simple).await;
    o.create_index(
        "t",
        "nopos",
        &["body".into()],
        IndexOptions {
            kind: IndexKind::Fulltext,
            positions: Some(false),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    loop {
        let rep = o
            .build_step(
                "t",
                "nopos",
                StepOptions {
                    max_entries: 70,
                    max_bytes: 1 << 20,
                },
            )
            .await
            .unwrap();
        if rep.done {
            break;
        }
    }
    let v = o.verify("t", "nopos").await.unwrap();
    assert_eq!(v.mismatched + v.missing, 0, "{v:?}");
    let v = o.verify("t", "body_text").await.unwrap();
    assert_eq!(v.mismatched + v.missing, 0, "{v:?}");
    for _ in 0..30 {
        let mut s = pick(&t, &mut r);
        s.index = Some("nopos".into());
        check(&t, &o, Tokenizer::Simple, &s, "nopos").await;
        let words = Analyzer::new(Tokenizer::Simple).terms(&s.query).len();
        let got = o.search("t", &s).await.unwrap();
        if s.phrase && words > 1 {
            // No positions: a phrase is answered by scanning every file.
            assert!(got.stats.index_declined.is_some(), "{:?}", got.stats);
            assert_eq!(got.stats.files_by_index, 0);
        } else if !s.query.is_empty() {
            assert!(got.stats.files_by_index > 0, "{s:?} {:?}", got.stats);
        }
    }
    // A manifest naming a kind this version does not know still parses: that index is read
    // past, the others serve.
    let m = o.snapshot().await.unwrap().manifest().clone();
    let json = serde_json::to_string(&*m).unwrap();
    assert!(json.contains("\"kind\":\"fulltext\""));
    let newer = json.replace("\"kind\":\"fulltext\"", "\"kind\":\"hologram\"");
    let parsed = skerry_core::formats::manifest::Manifest::from_json(newer.as_bytes()).unwrap();
    let kinds: Vec<IndexKind> = parsed.tables[0].indexes.iter().map(|i| i.kind()).collect();
    assert!(kinds.iter().all(|k| *k == IndexKind::Unknown), "{kinds:?}");
    // Two fulltext indexes: an unnamed search is ambiguous.
    let e = o
        .search(
            "t",
            &Search {
                query: "fox".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
    let e = o
        .search(
            "t",
            &Search {
                query: "fox".into(),
                k: 0,
                index: Some("nopos".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_LIMIT", "{e}");
    // A fulltext index covers one string column; key lookups on it are refused.
    let e = o
        .create_index(
            "t",
            "bad",
            &["cat".into()],
            IndexOptions {
                kind: IndexKind::Fulltext,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
    let e = o
        .lookup("t", "nopos", &[Value::String("fox".into())])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_UNSUPPORTED", "{e}");
    // A corrupted blob is caught by verify and queued.
    o.drop_index("t", "nopos").await.unwrap();
    let e = o
        .search(
            "t",
            &Search {
                query: "fox".into(),
                index: Some("nopos".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_NOT_FOUND", "{e}");
    o.close().await.unwrap();
}

/// RFC 0004 (one copy): a merge of full-text tiers reads the runs it merges, not the blobs
/// of the files they cover — those blobs are gone once a run holds them (decision 71), their
/// bundles vacuumed before the merge — and leaves out the postings and statistics of a file rewritten since (its rows in
/// the middle of the run: every later row moves); searches through the merged run are exact
/// (BM25 statistics, rows, scores), every file answered by it.
#[tokio::test]
async fn a_merge_reads_the_runs_it_merges_not_their_files_blobs() {
    let (mut t, o, mut r) = setup(0x7E57, 8, 100, Tokenizer::Simple).await;
    let m = o.snapshot_manifest(0).await.unwrap();
    let ix = m.table("t").unwrap().index("body_text").unwrap();
    let first: Vec<_> = ix.table_runs().into_iter().cloned().collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].files.len(), 8);
    // The covered files' blobs went with the build (decision 71): none is listed, and a
    // vacuum without grace deletes their bundles before the merge.
    assert!(ix.file_entries().is_empty());
    o.publish().await.unwrap();
    support::vacuum_now(&o).await;
    let dir = t
        .dir
        .path()
        .join("overlay")
        .join(first[0].bundle_path.rsplit_once('/').unwrap().0);
    assert_eq!(
        std::fs::read_dir(dir).unwrap().count(),
        1,
        "only the run's bundle"
    );
    // f003 rewritten with other documents and another row count, eight files appended.
    let rows: Rows = (0..70)
        .map(|i| (30_000 + i, doc(&mut r), r.below(5) as i64))
        .collect();
    t.write("f003.parquet", rows);
    o.refresh("t").await.unwrap();
    let names: Vec<String> = (8..16)
        .map(|f| {
            let rows: Rows = (0..100)
                .map(|i| ((f * 100 + i) as i64, doc(&mut r), r.below(5) as i64))
                .collect();
            let name = format!("f{f:03}.parquet");
            t.write(&name, rows);
            name
        })
        .collect();
    o.register_files("t", &names).await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    let m = o.snapshot_manifest(0).await.unwrap();
    let ix = m.table("t").unwrap().index("body_text").unwrap();
    let now: Vec<_> = ix.table_runs().into_iter().cloned().collect();
    assert_eq!(now.len(), 1, "{now:?}");
    let got = support::merged_run_files(&first[0], &now[0], "f003.parquet");
    assert_eq!(got.len(), 16);
    for i in 0..40 {
        let s = pick(&t, &mut r);
        let by_index = check(&t, &o, Tokenizer::Simple, &s, &format!("merged {i}")).await;
        let g = o.search("t", &s).await.unwrap();
        assert!(g.stats.rejections.is_empty(), "{:?}", g.stats);
        assert_eq!(g.stats.files_scanned, 0, "{s:?}: {:?}", g.stats);
        assert!(by_index <= 16);
    }
    o.close().await.unwrap();
}
