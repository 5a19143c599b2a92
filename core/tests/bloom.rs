//! Bloom indexes: files pruned for `=`/IN/IS NULL on a high-cardinality column with one range
//! read of the striped run for 100 files, the measured false-positive rate within 2× of the
//! configured one, answers equal to brute force (files stale, drifted, with deleted rows), and
//! damaged filters never changing an answer.

use std::sync::Arc;

mod support;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use skerry_core::admin::lifecycle::FileDeletes;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::IndexKind;
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
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

/// Rows of one file: (k, v); k is NULL in a few rows.
type Rows = Vec<(Option<String>, i64)>;

fn parquet(rows: &Rows) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int64, false),
    ]));
    let k: StringArray = rows.iter().map(|r| r.0.clone()).collect();
    let v: Int64Array = rows.iter().map(|r| Some(r.1)).collect();
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(k) as ArrayRef, Arc::new(v)]).unwrap();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

struct Table {
    dir: tempfile::TempDir,
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
    /// Live rows whose k is one of `keys` (`None`: IS NULL).
    fn count(&self, keys: &[Option<String>]) -> u64 {
        let mut n = 0;
        for (name, rows) in &self.files {
            let dead = self
                .deleted
                .iter()
                .find(|d| &d.0 == name)
                .map(|d| d.1.clone())
                .unwrap_or_default();
            for (p, r) in rows.iter().enumerate() {
                if keys.contains(&r.0) && !dead.contains(&(p as u64)) {
                    n += 1;
                }
            }
        }
        n
    }
}

/// Keys spread over the whole key space, so every file's statistics span nearly all of it
/// and only the filters can prune.
fn key(f: usize, i: usize) -> String {
    let mut z = (f as u64) * 1_000_003 + i as u64 + 0x9E3779B97F4A7C15;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    format!("{:016x}", z ^ (z >> 31))
}

async fn setup(files: usize, rows: usize, fpp: f64) -> (Table, Overlay) {
    let mut t = Table {
        dir: tempfile::tempdir().unwrap(),
        files: vec![],
        deleted: vec![],
    };
    std::fs::create_dir_all(t.data()).unwrap();
    for f in 0..files {
        let rows: Rows = (0..rows)
            .map(|i| ((i % 50 != 7).then(|| key(f, i)), (f * rows + i) as i64))
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
            "bloom_k",
            &["k".into()],
            IndexOptions {
                kind: IndexKind::Bloom,
                fpp: Some(fpp),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(info.kind, IndexKind::Bloom);
    o.build("t", |_| {}).await.unwrap();
    (t, o)
}

fn eq(k: &str) -> Query {
    Query {
        conditions: vec![Condition::new("k", Op::Eq(Value::String(k.into())))],
        columns: Some(vec!["v".into()]),
        ..Default::default()
    }
}

/// 100 files: a present key prunes 99 files with one overlay range read (the key's stripe),
/// and over 1,000 absent keys the files left to scan stay within 2× of the configured rate.
#[tokio::test]
async fn one_range_read_prunes_a_hundred_files_at_the_configured_rate() {
    let fpp = 0.01;
    let (t, o) = setup(100, 300, fpp).await;
    o.publish().await.unwrap();
    let url = format!("file://{}", t.dir.path().join("overlay").display());
    let reader = skerry_core::read::reader::OverlayReader::open(
        &url,
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    let want = key(42, 17);
    let r = reader.snapshot().query("t", &eq(&want)).await.unwrap();
    assert_eq!(r.rows.len(), 1, "{:?}", r.stats);
    assert_eq!(r.rows[0].file, "f042.parquet");
    assert_eq!(r.stats.index_kind.as_deref(), Some("bloom"));
    assert!(r.stats.files_pruned >= 95, "{:?}", r.stats);
    assert_eq!(r.stats.index_requests, 1, "one stripe read: {:?}", r.stats);
    assert!(r.stats.index_bytes <= 100 * 32 + 16, "{:?}", r.stats);
    // A wrong answer would show here: every file is scanned when forced.
    reader.set_scan_only(true);
    let scan = reader.snapshot().query("t", &eq(&want)).await.unwrap();
    reader.set_scan_only(false);
    assert_eq!(scan.rows, r.rows);
    // Without the filter every file is read and scanned; with it only the holding file.
    assert_eq!(scan.stats.files_scanned, 100, "{:?}", scan.stats);
    assert!(scan.stats.data_requests >= 100, "{:?}", scan.stats);
    assert!(r.stats.data_requests <= 4, "{:?}", r.stats);

    // The false-positive rate over absent keys (files not pruned / files tested).
    let (mut passed, mut tested) = (0u64, 0u64);
    for i in 0..1000 {
        let absent = key(7777, i);
        let c = reader.snapshot().count("t", &eq(&absent)).await.unwrap();
        assert_eq!(c.count, 0);
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats.rejections);
        passed += c.stats.files_scanned;
        tested += c.stats.files;
    }
    let rate = passed as f64 / tested as f64;
    assert!(
        rate <= 2.0 * fpp,
        "false-positive rate {rate} over {tested} file tests"
    );
    assert!(rate > 0.0, "a rate of exactly 0 means nothing was tested");
    println!("measured false-positive rate {rate:.4} (configured {fpp})");
    o.close().await.unwrap();
}

/// Random `=`, IN and IS NULL over files pruned by the run, by their own filter (a file
/// added after the run), stale (refreshed), drifted (rewritten behind the catalog) and with
/// deleted rows: counts and queries equal brute force, with and without `verify`.
#[tokio::test]
async fn bloom_answers_match_brute_force() {
    let (mut t, o) = setup(8, 120, 0.05).await;
    let mut r = Rng(0x2545F4914F6CDD1D);
    // f008: registered after the run was built; indexed on its own.
    let rows: Rows = (0..90)
        .map(|i| (Some(key(8, i)), 9000 + i as i64))
        .collect();
    t.write("f008.parquet", rows);
    o.register_files("t", &["f008.parquet".into()])
        .await
        .unwrap();
    // f001: rewritten and refreshed (its filter is stale until rebuilt).
    let rows: Rows = (0..60).map(|i| (Some(key(101, i)), i as i64)).collect();
    t.write("f001.parquet", rows);
    o.refresh("t").await.unwrap();
    // f002: deleted rows.
    let dead: Vec<u64> = (0..120).filter(|p| p % 4 == 1).collect();
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
    // f005: rewritten behind the catalog's back (drift) with other keys.
    let rows: Rows = (0..150).map(|i| (Some(key(105, i)), i as i64)).collect();
    t.write("f005.parquet", rows);

    let mut pruned = 0;
    for i in 0..120 {
        let pick = |r: &mut Rng| -> Option<String> {
            match r.below(10) {
                0 => None,
                1 => Some(key(5555, r.below(1000) as usize)),
                2 => Some(key(101 + 4 * r.below(2) as usize, r.below(160) as usize)),
                _ => Some(key(r.below(9) as usize, r.below(130) as usize)),
            }
        };
        let keys: Vec<Option<String>> = (0..1 + r.below(3)).map(|_| pick(&mut r)).collect();
        let op = if keys.len() == 1 {
            match &keys[0] {
                None => Op::IsNull,
                Some(k) => Op::Eq(Value::String(k.clone())),
            }
        } else if keys.iter().all(Option::is_some) {
            Op::In(
                keys.iter()
                    .map(|k| Value::String(k.clone().unwrap()))
                    .collect(),
            )
        } else {
            continue;
        };
        let q = Query {
            conditions: vec![Condition::new("k", op)],
            columns: Some(vec!["v".into()]),
            verify_files: true,
            ..Default::default()
        };
        let want = t.count(&keys);
        let c = o.count("t", &q).await.unwrap();
        assert_eq!(c.count, want, "#{i} {keys:?} {:?}", c.stats);
        let rows = o.query("t", &q).await.unwrap();
        assert_eq!(
            rows.rows.len() as u64,
            want,
            "#{i} {keys:?} {:?}",
            rows.stats
        );
        pruned += rows.stats.files_pruned;
        // The drifted file is never pruned by its stale filter under `verify`.
        assert!(
            rows.rows.iter().all(|x| x.file != "f005.parquet")
                || rows.stats.drifted.contains(&"f005.parquet".to_string())
        );
    }
    assert!(pruned > 300, "bloom pruned only {pruned} files");
    // Unverified counts of keys in unchanged files agree too.
    let k = key(3, 11);
    let c = o.count("t", &eq(&k)).await.unwrap();
    assert_eq!(c.count, 1);
    assert_eq!(c.stats.index_kind.as_deref(), Some("bloom"));
    // Lookups by a bloom index are refused: it names no rows.
    let e = o
        .lookup("t", "bloom_k", &[Value::String(k)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_UNSUPPORTED");
    // verify checks every live row's key passes the filter.
    o.build("t", |_| {}).await.unwrap();
    let v = o.verify("t", "bloom_k").await.unwrap();
    assert_eq!(v.missing, 0, "{v:?}");
    o.close().await.unwrap();
}

/// A damaged striped run or per-file filter never prunes a file that holds the key.
#[tokio::test]
async fn damaged_filters_never_change_an_answer() {
    let (t, o) = setup(6, 80, 0.01).await;
    let bundles = support::files_under(&t.dir.path().join("overlay").join("bundles"));
    assert!(bundles
        .iter()
        .any(|p| p.to_string_lossy().contains("/run-")));
    let mut o = o;
    let mut r = Rng(0x9E3779B97F4A7C15);
    let mut rejected = 0;
    for i in 0..40 {
        let path = &bundles[r.below(bundles.len() as u64) as usize];
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
        for f in 0..6 {
            let k = key(f, (i * 7 + f) % 80);
            let want = t.count(&[Some(k.clone())]);
            let c = o.count("t", &eq(&k)).await.unwrap();
            assert_eq!(
                c.count,
                want,
                "flip {i} at {at} of {}: {:?}",
                path.display(),
                c.stats
            );
            rejected += c.stats.rejections.len();
        }
        std::fs::write(path, &original).unwrap();
    }
    assert!(rejected > 0, "no damage was ever noticed");
    o.close().await.unwrap();
}

/// Bitmap and bloom indexes go through the lifecycle the ordered kind has: staged builds in
/// small steps (slices of one file merged), one bundle per file holding every kind, verify
/// certifying them, deleted rows, and drop with purge.
#[tokio::test]
async fn every_kind_through_the_lifecycle() {
    use skerry_core::admin::build::StepOptions;
    let (t, o) = setup(3, 200, 0.01).await;
    o.create_index(
        "t",
        "bm_v",
        &["v".into()],
        IndexOptions {
            kind: IndexKind::Bitmap,
            max_cardinality: Some(65_536),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    o.create_index("t", "ord_k", &["k".into()], IndexOptions::default())
        .await
        .unwrap();
    // Steps of 70 entries: every 200-row file is built in slices.
    let opts = StepOptions {
        max_entries: 70,
        max_bytes: 1 << 20,
    };
    let mut steps = 0;
    o.build_index("t", "bm_v", opts, |_| steps += 1)
        .await
        .unwrap();
    assert!(steps >= 9, "{steps} steps");
    o.build("t", |_| {}).await.unwrap();
    // Each data file's newest bundle generation holds every kind's blob (the whole-file
    // pass wrote it for ord_k, copying the others by range).
    let m = o.snapshot_manifest(1).await.unwrap();
    let tm = m.table("t").unwrap();
    let ord = tm.indexes.iter().find(|i| i.name == "ord_k").unwrap();
    use skerry_core::formats::puffin::{Limits, PuffinFooter};
    for e in &ord.files {
        let bytes =
            std::fs::read(t.dir.path().join("overlay").join(&e.lineage.bundle_path)).unwrap();
        let footer = PuffinFooter::parse_tail(&bytes, bytes.len() as u64, &Limits::default())
            .unwrap()
            .unwrap();
        let blob = |ty: &str| {
            footer
                .metadata
                .blobs
                .iter()
                .find(|b| b.blob_type == ty)
                .unwrap_or_else(|| panic!("{} lacks {ty}", e.lineage.bundle_path))
                .properties
                .clone()
        };
        blob("skerry-ordered-v1");
        // Each kind's facts, listable without the manifest.
        let bm = blob("skerry-bitmap-v1");
        assert_eq!(bm["skerry.cardinality"], "200", "{bm:?}");
        let bl = blob("skerry-bloom-v1");
        assert_eq!(bl["skerry.fpp"], "0.01", "{bl:?}");
        let blocks: u64 = bl["skerry.blocks"].parse().unwrap();
        assert_eq!(bl["skerry.bits"], (blocks * 256).to_string());
        assert!(bl["skerry.ndv"].parse::<u64>().unwrap() > 150, "{bl:?}");
    }
    let kinds: Vec<&str> = tm.indexes.iter().map(|i| i.kind().name()).collect();
    assert_eq!(kinds, ["bloom", "bitmap", "ordered"]);
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "f001.parquet".into(),
            positions: vec![3, 4, 5],
        }],
    )
    .await
    .unwrap();
    for ix in ["bloom_k", "bm_v", "ord_k"] {
        let v = o.verify("t", ix).await.unwrap();
        assert_eq!(
            (v.missing, v.mismatched, v.files_unindexed),
            (0, 0, 0),
            "{ix}: {v:?}"
        );
        assert!(v.certified, "{ix}: {v:?}");
    }
    // Counts through the bitmap see the deletes.
    let q = Query {
        conditions: vec![Condition::new(
            "v",
            Op::In(vec![
                Value::Int(203),
                Value::Int(204),
                Value::Int(205),
                Value::Int(206),
            ]),
        )],
        ..Default::default()
    };
    let c = o.count("t", &q).await.unwrap();
    assert_eq!(c.count, 1);
    assert_eq!(c.stats.index_kind.as_deref(), Some("bitmap"));
    // Drop and purge: the bundles no longer hold the dropped kinds' blobs.
    for ix in ["bloom_k", "bm_v"] {
        o.drop_index_purge("t", ix).await.unwrap();
    }
    let m = o.snapshot_manifest(2).await.unwrap();
    let names: Vec<&str> = m
        .table("t")
        .unwrap()
        .indexes
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, ["ord_k"]);
    let c = o.count("t", &q).await.unwrap();
    assert_eq!(c.count, 1);
    assert_eq!(c.stats.files_by_index, 0);
    let _ = t;
    o.close().await.unwrap();
}

/// Runs are tiers (RFC 0004) for bloom indexes: four appended files become a striped run of
/// their own (the first run is not written again); a key is pruned with one stripe per run
/// (two reads, in one round); answers equal brute force with a file rewritten under the first
/// run (its stale filter there skipped, so its new keys are found); enough appended rows
/// merge the runs into one.
#[tokio::test]
async fn appended_files_become_a_striped_run_of_their_own() {
    let (mut t, o) = setup(40, 100, 0.01).await;
    async fn runs_of(o: &Overlay) -> Vec<skerry_core::formats::manifest::TableRun> {
        let m = o.snapshot_manifest(0).await.unwrap();
        let ix = m.table("t").unwrap().index("bloom_k").unwrap();
        ix.table_runs().into_iter().cloned().collect()
    }
    let write = |t: &mut Table, f: usize, salt: usize| {
        let rows: Rows = (0..100)
            .map(|i| (Some(key(f + salt, i)), (f * 100 + i) as i64))
            .collect();
        t.write(&format!("f{f:03}.parquet"), rows);
    };
    let first = runs_of(&o).await;
    assert_eq!(first.len(), 1);
    for f in 40..44 {
        write(&mut t, f, 0);
    }
    let names: Vec<String> = (40..44).map(|f| format!("f{f:03}.parquet")).collect();
    o.register_files("t", &names).await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], first[0]);
    // f003 rewritten with other keys, then a build: its 100 rows are a quarter of the newer
    // run's, so they join it; the first run's stale filter of f003 is skipped (its new keys
    // are found, its old ones are not).
    write(&mut t, 3, 5000);
    o.refresh("t").await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], first[0]);
    assert!(
        now[1].files.iter().any(|f| f.path == "f003.parquet"),
        "{now:?}"
    );
    async fn check(o: &Overlay, t: &Table, k: String) -> skerry_core::read::plan::QueryStats {
        let want = t.count(&[Some(k.clone())]);
        let c = o.count("t", &eq(&k)).await.unwrap();
        assert_eq!(c.count, want, "{k}: {:?}", c.stats);
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats);
        c.stats
    }
    for (f, i) in [(0, 3), (3, 4), (5003, 4), (41, 9), (43, 99), (7777, 1)] {
        check(&o, &t, key(f, i)).await;
    }
    // Warm: a key present in an appended file prunes the other files with one stripe per run
    // (and the rewritten file's own filter).
    let k = key(42, 17);
    check(&o, &t, k.clone()).await;
    let st = check(&o, &t, k).await;
    assert!(st.files_pruned >= 40, "{st:?}");
    assert_eq!(st.files_by_run, 44, "{st:?}");
    assert!(st.index_requests <= 3, "{st:?}");
    // Eight more files: one run of every file.
    for f in 44..52 {
        write(&mut t, f, 0);
    }
    let names: Vec<String> = (44..52).map(|f| format!("f{f:03}.parquet")).collect();
    o.register_files("t", &names).await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(now[0].files.len(), 52);
    for (f, i) in [(0, 3), (5003, 4), (41, 9), (50, 1), (7777, 1)] {
        check(&o, &t, key(f, i)).await;
    }
    o.close().await.unwrap();
}

/// RFC 0004 (one copy, a first step): a merge of striped runs reads the runs it merges, not
/// the blobs of the files they cover — shown by deleting those blobs' bundles before the
/// merge — and leaves out the filter of a file rewritten since; every file answered by the
/// merged run, the rewritten file's new keys found and its old ones pruned.
#[tokio::test]
async fn a_merge_reads_the_runs_it_merges_not_their_files_blobs() {
    let (mut t, o) = setup(8, 100, 0.01).await;
    let m = o.snapshot_manifest(0).await.unwrap();
    let ix = m.table("t").unwrap().index("bloom_k").unwrap();
    let first: Vec<_> = ix.table_runs().into_iter().cloned().collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].files.len(), 8);
    for e in ix.file_entries() {
        std::fs::remove_file(t.dir.path().join("overlay").join(&e.lineage.bundle_path)).unwrap();
    }
    let write = |t: &mut Table, f: usize, salt: usize| {
        let rows: Rows = (0..100)
            .map(|i| (Some(key(f + salt, i)), (f * 100 + i) as i64))
            .collect();
        t.write(&format!("f{f:03}.parquet"), rows);
    };
    write(&mut t, 3, 5000);
    o.refresh("t").await.unwrap();
    for f in 8..16 {
        write(&mut t, f, 0);
    }
    let names: Vec<String> = (8..16).map(|f| format!("f{f:03}.parquet")).collect();
    o.register_files("t", &names).await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    let m = o.snapshot_manifest(0).await.unwrap();
    let now: Vec<_> = m
        .table("t")
        .unwrap()
        .index("bloom_k")
        .unwrap()
        .table_runs()
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(now.len(), 1, "{now:?}");
    let got = support::merged_run_files(&first[0], &now[0], "f003.parquet");
    assert_eq!(got.len(), 16);
    for (f, i) in [(0, 3), (3, 4), (5003, 4), (9, 9), (15, 99), (7777, 1)] {
        let k = key(f, i);
        let c = o.count("t", &eq(&k)).await.unwrap();
        assert_eq!(c.count, t.count(&[Some(k.clone())]), "{k}: {:?}", c.stats);
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats);
        assert_eq!(c.stats.files_by_run, 16, "{:?}", c.stats);
        // Every file but the one holding the key (if any) pruned, up to the filters' rate:
        // f003's old filter would hold (3, 4).
        assert!(c.stats.files_pruned >= 13, "{k}: {:?}", c.stats);
    }
    o.close().await.unwrap();
}
