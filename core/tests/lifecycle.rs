//! The catalog lifecycle (issue 5): unique indexes and their races, file and delete
//! registration, commit bounds, staged builds (resume, two builders, poisoning, writers
//! during a build, byte-identical to one-shot), drop with purge, vacuum, verify and its
//! certificate, schema refusals, catalog format check — on `file://` and `memory://`.

use futures::StreamExt;
use object_store::path::Path;
use skerry_core::admin::build::{StepOptions, MAX_COMMIT_BYTES, MAX_COMMIT_ENTRIES};
use skerry_core::admin::lifecycle::{FileDeletes, VacuumOptions};
use skerry_core::admin::overlay::{
    FileSelection, IndexOptions, OpenOptions, Overlay, FILES_PER_COMMIT,
};
use skerry_core::admin::sample::{parquet_from_rows, SampleCodec};
use skerry_core::formats::manifest::IndexState;
#[allow(unused_imports)]
use skerry_core::read::lookup::Pinned;
use skerry_core::values::{KeyType, Value};

mod support;

struct Data {
    dir: tempfile::TempDir,
}

impl Data {
    fn new() -> Data {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("t")).unwrap();
        Data { dir }
    }
    fn url(&self) -> String {
        format!("file://{}", self.dir.path().join("t").display())
    }
    fn overlay_url(&self, name: &str) -> String {
        format!("file://{}", self.dir.path().join(name).display())
    }
    /// Writes `name` with columns id (int64), email (string), customer (string).
    fn write(&self, name: &str, rows: &[(i64, Option<&str>, &str)], group: usize) {
        let cols = vec![
            ("id".to_string(), KeyType::Int64),
            ("email".to_string(), KeyType::String),
            ("customer".to_string(), KeyType::String),
        ];
        let rows: Vec<Vec<Value>> = rows
            .iter()
            .map(|(id, e, c)| {
                vec![
                    Value::Int(*id),
                    e.map_or(Value::Null, |e| Value::String(e.into())),
                    Value::String((*c).into()),
                ]
            })
            .collect();
        let b = parquet_from_rows(&cols, &rows, group, SampleCodec::Zstd).unwrap();
        std::fs::write(self.dir.path().join("t").join(name), b).unwrap();
    }
    /// Rows `first..first+n`: unique emails (every 10th NULL), customers with repeats.
    fn write_range(&self, name: &str, first: i64, n: i64, group: usize) {
        let emails: Vec<String> = (first..first + n).map(|i| format!("u{i}@x")).collect();
        let customers: Vec<String> = (first..first + n).map(|i| format!("c{}", i % 37)).collect();
        let rows: Vec<(i64, Option<&str>, &str)> = (0..n as usize)
            .map(|k| {
                let i = first + k as i64;
                (
                    i,
                    (i % 10 != 3).then_some(emails[k].as_str()),
                    customers[k].as_str(),
                )
            })
            .collect();
        self.write(name, &rows, group);
    }
}

fn s(v: &str) -> Vec<Value> {
    vec![Value::String(v.into())]
}

async fn open(url: &str) -> Overlay {
    let mut o = Overlay::open(url, OpenOptions::default()).await.unwrap();
    o.set_block_bytes(1024);
    o
}

async fn table(o: &Overlay, d: &Data, files: &[&str]) {
    o.register_parquet_table(
        "t",
        &d.url(),
        FileSelection::List(files.iter().map(|f| f.to_string()).collect()),
    )
    .await
    .unwrap();
}

fn unique() -> IndexOptions {
    IndexOptions::unique()
}

fn paths(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Uniqueness, duplicates within and across registrations, NULLs, deletes freeing keys —
/// on local disk and in memory.
#[tokio::test]
async fn unique_claims_registrations_and_deletes() {
    for store in ["file", "memory"] {
        let d = Data::new();
        d.write_range("a.parquet", 0, 200, 64);
        let url = if store == "file" {
            d.overlay_url("overlay")
        } else {
            "memory://".to_string()
        };
        let o = open(&url).await;
        table(&o, &d, &["a.parquet"]).await;
        o.create_index("t", "by_email", &["email".into()], unique())
            .await
            .unwrap();
        // Names are unique case-insensitively per table.
        let e = o
            .create_index("t", "BY_EMAIL", &["id".into()], unique())
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_EXISTS");
        o.build("t", |_| {}).await.unwrap();
        // The index is its own proof of uniqueness: no per-key catalog entries.
        assert_eq!(o.catalog_keys("c/").await.unwrap(), 0, "{store}");
        let r = o.lookup("t", "by_email", &s("u42@x")).await.unwrap();
        assert_eq!(
            r.rows.iter().map(|r| r.position).collect::<Vec<_>>(),
            vec![42]
        );

        // A duplicate against a live row fails the whole registration, naming both rows
        // and the index, never the value.
        d.write(
            "dup.parquet",
            &[(1000, Some("new@x"), "c"), (1001, Some("u42@x"), "c")],
            10,
        );
        let e = o
            .register_files("t", &paths(&["dup.parquet"]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("t.by_email") && msg.contains("a.parquet@42"),
            "{msg}"
        );
        assert!(msg.contains("dup.parquet@1"), "{msg}");
        assert!(!msg.contains("u42@x"), "the value never appears: {msg}");
        assert!(o
            .lookup("t", "by_email", &s("new@x"))
            .await
            .unwrap()
            .rows
            .is_empty());
        let r = o.lookup("t", "by_email", &s("u42@x")).await.unwrap();
        assert_eq!(r.rows.len(), 1, "nothing of the failed registration landed");

        // A duplicate inside one registration fails too.
        d.write(
            "self.parquet",
            &[(2000, Some("twice@x"), "c"), (2001, Some("twice@x"), "c")],
            10,
        );
        let e = o
            .register_files("t", &paths(&["self.parquet"]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_CONSTRAINT");

        // NULLs never collide; new keys are claimed and answered by the new file's index.
        d.write(
            "ok.parquet",
            &[
                (3000, None, "c"),
                (3001, None, "c"),
                (3002, Some("fresh@x"), "c"),
            ],
            10,
        );
        let rep = o
            .register_files("t", &paths(&["ok.parquet"]))
            .await
            .unwrap();
        assert_eq!((rep.files, rep.rows, rep.entries), (1, 3, 3));
        let r = o.lookup("t", "by_email", &s("fresh@x")).await.unwrap();
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].file, "ok.parquet");
        assert_eq!(r.stats.files_scanned, 0, "the registered file came indexed");
        assert_eq!(r.rows[0].position, 2);
        assert_eq!(
            o.catalog_keys("c/").await.unwrap(),
            0,
            "registrations claim nothing"
        );
        let e = o
            .register_files("t", &paths(&["ok.parquet"]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_EXISTS");

        // Deleting the row frees its key; answers drop it.
        let rep = o
            .register_deletes(
                "t",
                &[FileDeletes {
                    file: "a.parquet".into(),
                    positions: vec![42, 42, 43],
                }],
            )
            .await
            .unwrap();
        assert_eq!(rep.rows_deleted, 2);
        assert!(o
            .lookup("t", "by_email", &s("u42@x"))
            .await
            .unwrap()
            .rows
            .is_empty());
        let rep = o
            .register_files("t", &paths(&["dup.parquet"]))
            .await
            .unwrap();
        assert_eq!(rep.files, 1, "the value is free again");
        let r = o.lookup("t", "by_email", &s("u42@x")).await.unwrap();
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].file, "dup.parquet");
        // Deleting the old row again touches nothing; the new row keeps the value.
        let rep = o
            .register_deletes(
                "t",
                &[FileDeletes {
                    file: "a.parquet".into(),
                    positions: vec![42],
                }],
            )
            .await
            .unwrap();
        assert_eq!(rep.rows_deleted, 0);
        let r = o.lookup("t", "by_email", &s("u42@x")).await.unwrap();
        assert_eq!(
            r.rows.iter().map(|r| r.file.as_str()).collect::<Vec<_>>(),
            vec!["dup.parquet"]
        );
        let e = o
            .register_deletes(
                "t",
                &[FileDeletes {
                    file: "a.parquet".into(),
                    positions: vec![200],
                }],
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_INVALID");
        o.close().await.unwrap();
    }
}

/// N registrations racing for one value: exactly one commits, the rest fail E_CONSTRAINT
/// (after SlateDB's write-write conflict and a retry); distinct values all commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_registrations() {
    let d = Data::new();
    d.write_range("base.parquet", 0, 50, 64);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &["base.parquet"]).await;
    o.create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    const N: usize = 6;
    for i in 0..N {
        let own = format!("own{i}@x");
        d.write(
            &format!("same-{i}.parquet"),
            &[
                (100 + i as i64, Some(own.as_str()), "c"),
                (200 + i as i64, Some("contested@x"), "c"),
            ],
            10,
        );
        let mine = format!("distinct{i}@x");
        d.write(
            &format!("distinct-{i}.parquet"),
            &[(300 + i as i64, Some(mine.as_str()), "c")],
            10,
        );
    }
    let races: Vec<_> = (0..N)
        .map(|i| {
            let p = vec![format!("same-{i}.parquet")];
            let o = &o;
            async move { o.register_files("t", &p).await }
        })
        .collect();
    let results = futures::future::join_all(races).await;
    let ok: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
    assert_eq!(ok.len(), 1, "exactly one registration commits: {results:?}");
    for r in results.iter().filter(|r| r.is_err()) {
        assert_eq!(r.as_ref().unwrap_err().code(), "E_CONSTRAINT");
    }
    let r = o.lookup("t", "by_email", &s("contested@x")).await.unwrap();
    assert_eq!(r.rows.len(), 1);

    let races: Vec<_> = (0..N)
        .map(|i| {
            let p = vec![format!("distinct-{i}.parquet")];
            let o = &o;
            async move { o.register_files("t", &p).await }
        })
        .collect();
    let results = futures::future::join_all(races).await;
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    let attempts: u64 = results.iter().map(|r| r.as_ref().unwrap().attempts).sum();
    // Each commits after at least one attempt; how many retries the interleaving forces
    // depends on timing, so only the floor is asserted.
    assert!(attempts >= N as u64);
    for i in 0..N {
        let r = o
            .lookup("t", "by_email", &s(&format!("distinct{i}@x")))
            .await
            .unwrap();
        assert_eq!(r.rows.len(), 1);
    }
    o.close().await.unwrap();
}

/// A registration whose index work exceeds one commit's bounds still registers its files
/// (issue 38): the work is deferred — the indexes are `maintaining`, the files scanned, the
/// answers exact — and a build catches up to the bundles a direct build writes. Step
/// budgets above the bounds are refused.
#[tokio::test]
async fn registrations_above_the_commit_bounds_defer_their_index_work() {
    assert_eq!(MAX_COMMIT_ENTRIES, 1_000_000);
    assert_eq!(MAX_COMMIT_BYTES, 64 << 20);
    let d = Data::new();
    d.write_range("a.parquet", 0, 10, 64);
    // 1,700,001 rows × 3 indexes = 5,100,003 entries: over 5 times one commit's bound.
    write_ids(&d, "big.parquet", 1_700_001, |i| {
        (1000 + i, if i == 77 { "c77" } else { "c" })
    });
    let cols = big_columns();
    // 70,000 distinct 1 KB strings: over 64 MiB of encoded entries.
    let long: Vec<Vec<Value>> = (0..70_000)
        .map(|i| {
            vec![
                Value::Int(2_000_000 + i),
                Value::Null,
                Value::String(format!("{i:0>1000}")),
            ]
        })
        .collect();
    let b = parquet_from_rows(&cols, &long, 10_000, SampleCodec::Zstd).unwrap();
    std::fs::write(d.dir.path().join("t/wide.parquet"), b).unwrap();

    let direct = open(&d.overlay_url("direct")).await;
    let o = open(&d.overlay_url("overlay")).await;
    table(&direct, &d, &["a.parquet", "big.parquet", "wide.parquet"]).await;
    table(&o, &d, &["a.parquet"]).await;
    for o in [&direct, &o] {
        o.create_index("t", "by_id", &["id".into()], unique())
            .await
            .unwrap();
        o.create_index(
            "t",
            "by_customer",
            &["customer".into()],
            IndexOptions::default(),
        )
        .await
        .unwrap();
        o.create_index("t", "by_email", &["email".into()], IndexOptions::default())
            .await
            .unwrap();
        o.build("t", |_| {}).await.unwrap();
    }
    let bundles_before = count(&o, "bundles").await;
    for file in ["big.parquet", "wide.parquet"] {
        let r = o.register_files("t", &paths(&[file])).await.unwrap();
        let all = ["by_id", "by_customer", "by_email"]
            .map(String::from)
            .to_vec();
        assert_eq!(r.pending, all, "{file}");
        assert_eq!(r.bundles_written, 0);
        for ix in ["by_id", "by_customer", "by_email"] {
            let rec = o.index_record("t", ix).await.unwrap();
            assert_eq!(rec.state, IndexState::Maintaining, "{file} {ix}");
        }
        // Pending files are scanned: answers are exact meanwhile.
        assert_eq!(hits(&o, "by_id", Value::Int(1000 + 77)).await, 1);
        assert_eq!(
            hits(&o, "by_customer", Value::String("c77".into())).await,
            1
        );
        let wide = usize::from(file == "wide.parquet");
        assert_eq!(hits(&o, "by_id", Value::Int(2_000_005)).await, wide);
    }
    assert_eq!(
        count(&o, "bundles").await,
        bundles_before,
        "no bundle in the registration"
    );
    // Catch-up: a build covers the pending files and flips both indexes to ready.
    o.build("t", |_| {}).await.unwrap();
    for ix in ["by_id", "by_customer", "by_email"] {
        assert_eq!(
            o.index_record("t", ix).await.unwrap().state,
            IndexState::Ready,
            "{ix}"
        );
        let v = o.verify("t", ix).await.unwrap();
        assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true), "{ix}");
    }
    assert_eq!(
        blobs(&o).await,
        blobs(&direct).await,
        "caught up = built directly"
    );
    assert_eq!(hits(&o, "by_id", Value::Int(1000 + 77)).await, 1);
    // A step budget above the bound is refused.
    let e = o
        .build_step(
            "t",
            "by_id",
            StepOptions {
                max_entries: MAX_COMMIT_ENTRIES + 1,
                max_bytes: 1 << 20,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_LIMIT");
    o.close().await.unwrap();
}

/// A duplicate key that arrives with deferred index work (no claim could be checked in the
/// registration's commit) is found by the catch-up: the unique index is poisoned with
/// `E_CONSTRAINT` naming both files, and answers stay exact through scans.
#[tokio::test]
async fn a_duplicate_in_deferred_work_poisons_the_unique_index_at_catch_up() {
    let d = Data::new();
    d.write_range("a.parquet", 0, 10, 64);
    // 1,000,001 rows under one unique index; id 5 is also in a.parquet.
    write_ids(&d, "dup.parquet", 1_000_001, |i| {
        (if i == 123_456 { 5 } else { 1000 + i }, "c")
    });
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &["a.parquet"]).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    let r = o
        .register_files("t", &paths(&["dup.parquet"]))
        .await
        .unwrap();
    assert_eq!(r.pending, vec!["by_id".to_string()]);
    assert_eq!(
        hits(&o, "by_id", Value::Int(5)).await,
        2,
        "both rows, one scanned"
    );
    build_poisons_by_id(&o, "a.parquet", "dup.parquet").await;
    let q = skerry_core::read::plan::Query {
        conditions: vec![skerry_core::read::predicate::Condition::new(
            "id",
            skerry_core::read::predicate::Op::Eq(Value::Int(5)),
        )],
        ..Default::default()
    };
    assert_eq!(o.count("t", &q).await.unwrap().count, 2);
}

/// The columns of [`write_ids`]' files: id, email (NULL), customer.
fn big_columns() -> Vec<(String, KeyType)> {
    vec![
        ("id".to_string(), KeyType::Int64),
        ("email".to_string(), KeyType::String),
        ("customer".to_string(), KeyType::String),
    ]
}

/// Writes `t/{name}`: `n` rows, row `i` with the id and customer `row(i)` gives, email NULL.
fn write_ids(d: &Data, name: &str, n: i64, row: impl Fn(i64) -> (i64, &'static str)) {
    let rows: Vec<Vec<Value>> = (0..n)
        .map(|i| {
            let (id, c) = row(i);
            vec![Value::Int(id), Value::Null, Value::String(c.into())]
        })
        .collect();
    let b = parquet_from_rows(&big_columns(), &rows, 100_000, SampleCodec::Zstd).unwrap();
    std::fs::write(d.dir.path().join("t").join(name), b).unwrap();
}

/// `build` of table `t` fails `E_CONSTRAINT` naming `first` and `second` (the rows sharing a
/// key), and `by_id` is poisoned.
async fn build_poisons_by_id(o: &Overlay, first: &str, second: &str) {
    let e = o.build("t", |_| {}).await.unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    let msg = e.to_string();
    assert!(msg.contains(first) && msg.contains(second), "{msg}");
    assert_eq!(
        o.index_record("t", "by_id").await.unwrap().state,
        IndexState::Poisoned
    );
}

/// Rows `ix` of table `t` finds for `v`.
async fn hits(o: &Overlay, ix: &str, v: Value) -> usize {
    o.lookup("t", ix, &[v]).await.unwrap().rows.len()
}

/// (index, file, blob SHA-256) of every index blob of table `t`.
async fn blobs(o: &Overlay) -> Vec<(String, String, String)> {
    let m = o.snapshot_manifest(0).await.unwrap();
    let t = m.table("t").unwrap();
    let mut out = Vec::new();
    for ix in &t.indexes {
        for a in &ix.files {
            let f = t.files.iter().find(|f| f.file_id == a.file_id).unwrap();
            out.push((
                ix.name.clone(),
                f.path.clone(),
                a.lineage.blob_sha256.clone(),
            ));
        }
    }
    out.sort();
    out
}

async fn count(o: &Overlay, prefix: &str) -> usize {
    o.store()
        .list(Some(&Path::from(prefix)))
        .collect::<Vec<_>>()
        .await
        .len()
}

/// Three files of 3,000 rows (row groups of 500), a unique index on id and a plain one on
/// customer.
fn three_files(d: &Data) {
    for i in 0..3 {
        d.write_range(&format!("p{i}.parquet"), i * 3000, 3000, 500);
    }
}

const THREE: [&str; 3] = ["p0.parquet", "p1.parquet", "p2.parquet"];

async fn define(o: &Overlay) {
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    o.create_index(
        "t",
        "by_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
}

/// A build step reads only the row groups holding the rows it indexes: once its byte budget
/// is spent it stops reading. (A step's range runs to the end of its file when the entry
/// bound allows, and steps used to read that whole range — the file's rest at every step,
/// quadratic in the steps: 9× the column for a 500k-row vector index.) Counted through the
/// range reader against a one-shot build of the same file, which reads each column once.
#[tokio::test]
async fn build_steps_read_only_the_row_groups_they_index() {
    let d = Data::new();
    d.write_range("big.parquet", 0, 20_000, 1_000);
    let one = open(&d.overlay_url("one")).await;
    table(&one, &d, &["big.parquet"]).await;
    one.create_index("t", "by_email", &["email".into()], IndexOptions::default())
        .await
        .unwrap();
    let before = one.snapshot().await.unwrap().metrics().data_io.bytes;
    one.build("t", |_| {}).await.unwrap();
    let once = one.snapshot().await.unwrap().metrics().data_io.bytes - before;

    let staged = open(&d.overlay_url("staged")).await;
    table(&staged, &d, &["big.parquet"]).await;
    staged
        .create_index("t", "by_email", &["email".into()], IndexOptions::default())
        .await
        .unwrap();
    let before = staged.snapshot().await.unwrap().metrics().data_io.bytes;
    // The entry bound past the file, the byte budget about one row group's keys.
    let opts = StepOptions {
        max_entries: 1_000_000,
        max_bytes: 16 << 10,
    };
    let mut steps = 0;
    loop {
        let s = staged.build_step("t", "by_email", opts).await.unwrap();
        steps += 1;
        if s.done {
            break;
        }
        assert!(steps < 200, "the build ends");
    }
    let stepped = staged.snapshot().await.unwrap().metrics().data_io.bytes - before;
    assert!(steps >= 10, "{steps} steps");
    // Every step (and the one pass) opens the file: its tail read, and the footer's rest when
    // the footer is larger. The rest is column data.
    let file = std::fs::read(d.dir.path().join("t/big.parquet")).unwrap();
    let n = file.len();
    let footer = u32::from_le_bytes(file[n - 8..n - 4].try_into().unwrap()) as u64 + 8;
    let open_cost = (n as u64)
        .min(skerry_core::datafile::FOOTER_PREFETCH)
        .max(footer);
    let column_once = once - open_cost;
    let column_stepped = stepped - steps * open_cost;
    // Each step reads the row groups its rows are in (a boundary group twice): a small
    // multiple of one pass over the column, not the rest of the file at every step.
    assert!(
        column_stepped < 3 * column_once,
        "{steps} steps read {column_stepped} bytes of column; one pass reads {column_once}"
    );
    // The same index either way.
    for k in ["u0@x", "u9999@x", "u19999@x"] {
        assert_eq!(
            staged
                .lookup("t", "by_email", &s(k))
                .await
                .unwrap()
                .rows
                .len(),
            one.lookup("t", "by_email", &s(k)).await.unwrap().rows.len(),
            "{k}"
        );
    }
}

/// A staged build in small steps writes the same bundles as a one-shot build;
/// it is refused by raw accessors until the last step flips it to ready; its cursor and
/// progress only move forward; a build killed mid-way resumes and covers every row once.
#[tokio::test]
async fn staged_build_resumes_and_matches_one_shot() {
    let d = Data::new();
    three_files(&d);
    let one = open(&d.overlay_url("one")).await;
    table(&one, &d, &THREE).await;
    define(&one).await;
    one.build("t", |_| {}).await.unwrap();

    let url = d.overlay_url("staged");
    let staged = open(&url).await;
    table(&staged, &d, &THREE).await;
    define(&staged).await;
    let opts = StepOptions {
        max_entries: 700,
        max_bytes: 1 << 20,
    };
    let mut seen = vec![];
    for _ in 0..4 {
        let s = staged.build_step("t", "by_id", opts).await.unwrap();
        assert!(!s.done);
        assert_eq!(s.state, IndexState::Building);
        assert_eq!(s.entries, 700);
        seen.push((s.step, s.rows_done));
    }
    // The fifth step finishes p0 (200 rows) and leaves p1, which does not fit, to the next.
    let c = staged.build_step("t", "by_id", opts).await.unwrap();
    seen.push((c.step, c.rows_done));
    assert_eq!(
        (c.entries, c.files_completed.clone(), c.cursor),
        (200, vec!["p0.parquet".to_string()], None)
    );
    let c = staged.build_step("t", "by_id", opts).await.unwrap();
    seen.push((c.step, c.rows_done));
    assert_eq!(
        c.cursor.as_ref().map(|c| (c.file.as_str(), c.position)),
        Some(("p1.parquet", 700))
    );
    let e = staged
        .lookup("t", "by_id", &[Value::Int(5)])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INDEX_NOT_READY");
    assert!(count(&staged, "staging").await > 0, "slices are staged");
    // Killed: the handle goes away without closing; a new one resumes from the cursor.
    drop(staged);
    let staged = open(&url).await;
    let mut progress = vec![];
    let r = staged
        .build_index("t", "by_id", opts, |s| progress.push((s.step, s.rows_done)))
        .await
        .unwrap();
    seen.extend(progress);
    assert!(
        seen.windows(2)
            .all(|w| w[1].0 == w[0].0 + 1 && w[1].1 >= w[0].1),
        "steps and rows only move forward: {seen:?}"
    );
    assert_eq!(seen.last().unwrap().1, 9000);
    assert!(r.entries > 0);
    staged
        .build_index("t", "by_customer", opts, |_| {})
        .await
        .unwrap();
    assert_eq!(
        staged.index_record("t", "by_id").await.unwrap().state,
        IndexState::Ready
    );
    assert_eq!(
        count(&staged, "staging").await,
        0,
        "segments merged and removed"
    );
    // Every row exactly once, and byte-identical to the one-shot build.
    let v = staged.verify("t", "by_id").await.unwrap();
    assert_eq!(
        (v.stored, v.expected, v.missing, v.mismatched),
        (9000, 9000, 0, 0)
    );
    assert_eq!(
        staged.bundles("t").await.unwrap(),
        one.bundles("t").await.unwrap(),
        "bundles are byte-identical"
    );
    // Neither writes per-key catalog entries (the index proves uniqueness).
    assert_eq!(staged.catalog_keys("c/").await.unwrap(), 0);
    assert_eq!(one.catalog_keys("c/").await.unwrap(), 0);
    let r = staged
        .lookup("t", "by_id", &[Value::Int(4321)])
        .await
        .unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(
        (r.rows[0].file.as_str(), r.rows[0].position),
        ("p1.parquet", 1321)
    );
    one.close().await.unwrap();
    staged.close().await.unwrap();
}

/// Two builders of one index serialize: every step number is committed once, the result
/// covers every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_builders_serialize() {
    let d = Data::new();
    three_files(&d);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    define(&o).await;
    let opts = StepOptions {
        max_entries: 400,
        max_bytes: 1 << 20,
    };
    let (mut a, mut b) = (vec![], vec![]);
    let (ra, rb) = futures::join!(
        o.build_index("t", "by_id", opts, |s| a.push(s.step)),
        o.build_index("t", "by_id", opts, |s| b.push(s.step)),
    );
    ra.unwrap();
    rb.unwrap();
    let mut all: Vec<u64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    let committed: Vec<u64> = all
        .iter()
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // A builder that found nothing left reports the last step again without committing.
    let n = *committed.last().unwrap();
    assert_eq!(committed, (1..=n).collect::<Vec<_>>(), "a: {a:?} b: {b:?}");
    assert!(a.windows(2).all(|w| w[0] <= w[1]) && b.windows(2).all(|w| w[0] <= w[1]));
    let v = o.verify("t", "by_id").await.unwrap();
    assert_eq!(
        (v.stored, v.expected, v.missing, v.mismatched),
        (9000, 9000, 0, 0)
    );
    assert_eq!(o.catalog_keys("c/").await.unwrap(), 0);
    o.close().await.unwrap();
}

/// A duplicate under a unique index poisons the build: typed error, state poisoned,
/// accessors and further steps refused.
#[tokio::test]
async fn duplicate_poisons_a_unique_build() {
    let d = Data::new();
    three_files(&d);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    o.create_index("t", "u_customer", &["customer".into()], unique())
        .await
        .unwrap();
    let opts = StepOptions {
        max_entries: 20,
        max_bytes: 1 << 20,
    };
    // The first 20 rows hold distinct customers (c0..c19): that step commits.
    let first = o.build_step("t", "u_customer", opts).await.unwrap();
    assert!(!first.done);
    assert_eq!(first.state, IndexState::Building);
    let e = o
        .build_index("t", "u_customer", opts, |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    assert!(e.to_string().contains("t.u_customer"));
    assert_eq!(
        o.index_record("t", "u_customer").await.unwrap().state,
        IndexState::Poisoned
    );
    assert_eq!(o.catalog_keys("c/").await.unwrap(), 0);
    let e = o.lookup("t", "u_customer", &s("c1")).await.unwrap_err();
    assert_eq!(e.code(), "E_INDEX_NOT_READY");
    let e = o.build_step("t", "u_customer", opts).await.unwrap_err();
    assert_eq!(e.code(), "E_INDEX_NOT_READY");
    // build() leaves poisoned indexes alone; dropping frees the name.
    o.build("t", |_| {}).await.unwrap();
    o.drop_index("t", "u_customer").await.unwrap();
    o.create_index(
        "t",
        "u_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("t", |_| {}).await.unwrap();
    assert_eq!(
        o.lookup("t", "u_customer", &s("c1"))
            .await
            .unwrap()
            .rows
            .len(),
        9000 / 37 + 1
    );
    o.close().await.unwrap();
}

/// Across files, uniqueness is checked once, when the index would become ready: a key two
/// live rows of different files share poisons it, naming both rows; deleted rows and NULLs
/// never collide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_across_files_is_checked_at_the_flip() {
    let d = Data::new();
    d.write_range("a.parquet", 0, 100, 25);
    d.write_range("b.parquet", 50, 10, 5); // ids 50..60: inside a's span
    d.write_range("c.parquet", 1000, 100, 25); // a span of its own
    let files = ["a.parquet", "b.parquet", "c.parquet"];
    let o = open(&d.overlay_url("one")).await;
    table(&o, &d, &files).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    build_poisons_by_id(&o, "a.parquet@50", "b.parquet@0").await;
    o.close().await.unwrap();

    // The same files with a's rows 50..60 (and 10) deleted: no live duplicate, ready.
    let o = open(&d.overlay_url("two")).await;
    table(&o, &d, &files).await;
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "a.parquet".into(),
            positions: (50..60).chain([10]).collect(),
        }],
    )
    .await
    .unwrap();
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    // Emails repeat across a and b too, but only where a's rows are deleted; NULLs (every
    // 10th) never collide.
    o.create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    for ix in ["by_id", "by_email"] {
        assert_eq!(
            o.index_record("t", ix).await.unwrap().state,
            IndexState::Ready,
            "{ix}"
        );
    }
    let r = o.lookup("t", "by_id", &[Value::Int(55)]).await.unwrap();
    assert_eq!(
        r.rows
            .iter()
            .map(|r| (r.file.as_str(), r.position))
            .collect::<Vec<_>>(),
        vec![("b.parquet", 5)]
    );
    // A ready index refuses a new file clashing with c, found by looking the key up.
    d.write(&"late.parquet".to_string(), &[(1042, None, "c")], 10);
    let e = o
        .register_files("t", &paths(&["late.parquet"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT");
    assert!(e.to_string().contains("c.parquet@42"), "{e}");
    // ... and one clashing with a deleted row only is welcome.
    d.write(&"reuse.parquet".to_string(), &[(10, None, "c")], 10);
    o.register_files("t", &paths(&["reuse.parquet"]))
        .await
        .unwrap();
    assert_eq!(o.catalog_keys("c/").await.unwrap(), 0);
    o.close().await.unwrap();
}

/// A large group of overlapping files is checked in key ranges on both cores: the pair
/// reported is the one with the lowest key whichever range finds it first, and deleted rows
/// do not collide in any range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_check_across_large_overlaps_runs_in_ranges() {
    let d = Data::new();
    let evens: Vec<(i64, Option<&str>, &str)> = (0..150_000).map(|i| (2 * i, None, "c")).collect();
    let mut odds: Vec<(i64, Option<&str>, &str)> =
        (0..150_000).map(|i| (2 * i + 1, None, "c")).collect();
    // Two keys a's rows hold too: one high (second range), one low (first range).
    odds.push((250_000, None, "c"));
    odds.push((10, None, "c"));
    d.write("a.parquet", &evens, 50_000);
    d.write("b.parquet", &odds, 50_000);
    let files = ["a.parquet", "b.parquet"];
    let o = open(&d.overlay_url("one")).await;
    table(&o, &d, &files).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    let e = o.build("t", |_| {}).await.unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("a.parquet@5") && msg.contains("b.parquet@150001"),
        "{msg}"
    );
    o.close().await.unwrap();

    // Without the low pair (a's row deleted), the high one is found in its range.
    let o = open(&d.overlay_url("two")).await;
    table(&o, &d, &files).await;
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "a.parquet".into(),
            positions: vec![5],
        }],
    )
    .await
    .unwrap();
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    let e = o.build("t", |_| {}).await.unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("a.parquet@125000") && msg.contains("b.parquet@150000"),
        "{msg}"
    );
    o.close().await.unwrap();

    // Both of a's rows deleted: ready.
    let o = open(&d.overlay_url("three")).await;
    table(&o, &d, &files).await;
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "a.parquet".into(),
            positions: vec![5, 125_000],
        }],
    )
    .await
    .unwrap();
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    assert_eq!(
        o.index_record("t", "by_id").await.unwrap().state,
        IndexState::Ready
    );
    let r = o
        .lookup("t", "by_id", &[Value::Int(250_000)])
        .await
        .unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(r.rows[0].file, "b.parquet");
    o.close().await.unwrap();
}

/// With a table run to write (four files or more), uniqueness across files is checked by the
/// run's own merge, in key ranges on both cores: the lowest shared key is reported, the index
/// poisoned, no run recorded or left behind; deleted rows and NULLs never collide, and the
/// run of the index that becomes ready answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_check_rides_on_the_run_merge() {
    let d = Data::new();
    let rows = |ids: Vec<i64>| -> Vec<(i64, Option<&'static str>, &'static str)> {
        ids.into_iter()
            .map(|i| (i, (i % 10 == 3).then_some("x@x"), "c"))
            .collect()
    };
    // Evens and odds below and above 150,000: two overlapping pairs; b0 and b1 also hold one
    // id each that a0 and a1 hold (10 at a0@5, 250,000 at a1@50,000). Email "x@x" repeats in
    // every file but only on rows with id % 10 == 3, NULL elsewhere.
    let mut b0: Vec<i64> = (0..75_000).map(|i| 2 * i + 1).collect();
    b0.push(10);
    let mut b1: Vec<i64> = (75_000..150_000).map(|i| 2 * i + 1).collect();
    b1.push(250_000);
    d.write(
        "a0.parquet",
        &rows((0..75_000).map(|i| 2 * i).collect()),
        25_000,
    );
    d.write(
        "a1.parquet",
        &rows((75_000..150_000).map(|i| 2 * i).collect()),
        25_000,
    );
    d.write("b0.parquet", &rows(b0), 25_000);
    d.write("b1.parquet", &rows(b1), 25_000);
    let files = ["a0.parquet", "a1.parquet", "b0.parquet", "b1.parquet"];
    let runs_left = |name: &str| -> usize {
        let dir = d.dir.path().join(name).join("bundles");
        walk(&dir)
            .iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("run-"))
            .count()
    };

    let o = open(&d.overlay_url("one")).await;
    table(&o, &d, &files).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    let e = o.build("t", |_| {}).await.unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("a0.parquet@5 ") && msg.contains("b0.parquet@75000"),
        "{msg}"
    );
    assert_eq!(
        o.index_record("t", "by_id").await.unwrap().state,
        IndexState::Poisoned
    );
    o.close().await.unwrap();
    assert_eq!(runs_left("one"), 0);

    // a0's row deleted: the pair in the upper range is found.
    let o = open(&d.overlay_url("two")).await;
    table(&o, &d, &files).await;
    let del = |positions: Vec<u64>| FileDeletes {
        file: "a0.parquet".into(),
        positions,
    };
    o.register_deletes("t", &[del(vec![5])]).await.unwrap();
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    let msg = o.build("t", |_| {}).await.unwrap_err().to_string();
    assert!(
        msg.contains("a1.parquet@50000") && msg.contains("b1.parquet@75000"),
        "{msg}"
    );
    o.close().await.unwrap();

    // Both rows deleted (a1's too): by_id becomes ready with its run. A unique email is
    // poisoned: "x@x" repeats on live rows (the NULLs around it never collide).
    let o = open(&d.overlay_url("three")).await;
    table(&o, &d, &files).await;
    o.register_deletes(
        "t",
        &[
            del(vec![5]),
            FileDeletes {
                file: "a1.parquet".into(),
                positions: vec![50_000],
            },
        ],
    )
    .await
    .unwrap();
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    assert_eq!(
        o.index_record("t", "by_id").await.unwrap().state,
        IndexState::Ready
    );
    let m = o.snapshot_manifest(0).await.unwrap();
    let run = m.tables[0].indexes[0].run.clone().expect("a run");
    assert_eq!(run.ordered.entries, 300_002);
    assert_eq!(runs_left("three"), 1);
    for (id, file, pos) in [
        (250_000i64, "b1.parquet", 75_000u64),
        (10, "b0.parquet", 75_000),
        (299_999, "b1.parquet", 74_999),
    ] {
        let r = o.lookup("t", "by_id", &[Value::Int(id)]).await.unwrap();
        assert_eq!(
            r.rows
                .iter()
                .map(|x| (x.file.as_str(), x.position))
                .collect::<Vec<_>>(),
            vec![(file, pos)],
            "{id}"
        );
        assert_eq!(r.stats.files_scanned, 0);
    }
    o.create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    let e = o.build("t", |_| {}).await.unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    o.close().await.unwrap();
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A table run grows by merging: after a registration, the next build merges the previous
/// run with the new file's blob only (the covered files keep their ordinals), and the run
/// answers every file's keys.
#[tokio::test]
async fn runs_merge_incrementally() {
    let d = Data::new();
    for i in 0..4 {
        d.write_range(&format!("p{i}.parquet"), i * 1000, 1000, 250);
    }
    d.write_range("new.parquet", 50_000, 1000, 250);
    let o = open(&d.overlay_url("overlay")).await;
    table(
        &o,
        &d,
        &["p0.parquet", "p1.parquet", "p2.parquet", "p3.parquet"],
    )
    .await;
    o.create_index(
        "t",
        "by_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("t", |_| {}).await.unwrap();
    let run_of = |m: &skerry_core::formats::manifest::Manifest| {
        m.tables[0].indexes[0].run.clone().expect("a run")
    };
    let first = run_of(&o.snapshot_manifest(0).await.unwrap());
    assert_eq!(first.files.len(), 4);
    assert_eq!(first.ordered.entries, 4000);

    o.register_files("t", &paths(&["new.parquet"]))
        .await
        .unwrap();
    let before = o.overlay_reads();
    o.build("t", |_| {}).await.unwrap();
    let read = o.overlay_reads().since(&before);
    let second = run_of(&o.snapshot_manifest(0).await.unwrap());
    assert_ne!(second.bundle_path, first.bundle_path);
    assert_eq!(second.ordered.entries, 5000);
    assert_eq!(
        second
            .files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        vec![
            "p0.parquet",
            "p1.parquet",
            "p2.parquet",
            "p3.parquet",
            "new.parquet"
        ],
        "covered files keep their ordinals; the new one comes last"
    );
    // The previous run and the new blob: a directory and one chunk each. Re-reading every
    // file's blob would take ten.
    assert!(read.requests <= 4, "{read:?}");
    let r = o.lookup("t", "by_customer", &s("c5")).await.unwrap();
    let files: std::collections::BTreeSet<&str> = r.rows.iter().map(|r| r.file.as_str()).collect();
    assert_eq!(files.len(), 5, "{files:?}");
    let expected = (0..4000)
        .chain(50_000..51_000)
        .filter(|i| i % 37 == 5)
        .count();
    assert_eq!(r.rows.len(), expected);
    assert_eq!(r.stats.files_scanned, 0);
    o.close().await.unwrap();
}

/// Files with key spans of their own (ids written in order) make their run by copying blocks
/// (positions mapped), on both cores; a registration beyond them, large enough to merge into
/// the run (RFC 0004: a quarter of its rows), extends it the same way, and one that overlaps
/// them falls back to the merge. Every id answers from the run, ranges across file boundaries
/// in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_ordered_keys_concatenate() {
    use skerry_core::values::ValueBound;
    let d = Data::new();
    for i in 0..4 {
        d.write_range(&format!("p{i}.parquet"), i * 60_000, 60_000, 20_000);
    }
    d.write_range("after.parquet", 500_000, 60_000, 20_000);
    d.write_range("overlap.parquet", 59_990, 75_000, 25_000);
    let mut o = open(&d.overlay_url("overlay")).await;
    o.set_run_part_bytes(4096);
    table(
        &o,
        &d,
        &["p0.parquet", "p1.parquet", "p2.parquet", "p3.parquet"],
    )
    .await;
    o.create_index("t", "by_id", &["id".into()], IndexOptions::default())
        .await
        .unwrap();
    let ids = |r: &skerry_core::read::lookup::LookupResult| -> Vec<(String, u64)> {
        r.rows
            .iter()
            .map(|x| (x.file.clone(), x.position))
            .collect()
    };
    let range = |lo: i64, hi: i64, reverse: bool| {
        let o = &o;
        async move {
            o.range(
                "t",
                "by_id",
                ValueBound::Included(vec![Value::Int(lo)]),
                ValueBound::Included(vec![Value::Int(hi)]),
                reverse,
            )
            .await
            .unwrap()
        }
    };
    let at = |f: &str, p: u64| (f.to_string(), p);
    let run_entries = || async {
        o.snapshot_manifest(0).await.unwrap().tables[0].indexes[0]
            .run
            .clone()
            .expect("a run")
            .ordered
            .entries
    };

    o.build("t", |_| {}).await.unwrap();
    assert_eq!(run_entries().await, 240_000);
    for id in [0i64, 59_999, 60_000, 119_999, 180_000, 239_999] {
        let r = o.lookup("t", "by_id", &[Value::Int(id)]).await.unwrap();
        let f = format!("p{}.parquet", id / 60_000);
        assert_eq!(ids(&r), vec![at(&f, (id % 60_000) as u64)], "{id}");
        assert_eq!(r.stats.files_scanned, 0);
    }
    let r = range(59_998, 60_001, false).await;
    let want = vec![
        at("p0.parquet", 59_998),
        at("p0.parquet", 59_999),
        at("p1.parquet", 0),
        at("p1.parquet", 1),
    ];
    assert_eq!(ids(&r), want);
    assert_eq!(r.stats.files_scanned, 0);
    let r = range(59_998, 60_001, true).await;
    assert_eq!(ids(&r), want.iter().rev().cloned().collect::<Vec<_>>());

    // Beyond the run: the previous run and the new file concatenate.
    o.register_files("t", &paths(&["after.parquet"]))
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    assert_eq!(run_entries().await, 300_000);
    let r = range(239_999, 500_001, false).await;
    assert_eq!(
        ids(&r),
        vec![
            at("p3.parquet", 59_999),
            at("after.parquet", 0),
            at("after.parquet", 1)
        ]
    );
    assert_eq!(r.stats.files_scanned, 0);

    // Overlapping p0 and p1: merged.
    o.register_files("t", &paths(&["overlap.parquet"]))
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    assert_eq!(run_entries().await, 375_000);
    let r = range(59_999, 60_000, false).await;
    assert_eq!(
        ids(&r),
        vec![
            at("p0.parquet", 59_999),
            at("overlap.parquet", 9),
            at("p1.parquet", 0),
            at("overlap.parquet", 10),
        ]
    );
    assert_eq!(r.stats.files_scanned, 0);
    o.close().await.unwrap();
}

/// A large run is merged in key ranges on both cores and joined: every key answered by the
/// run, equal keys that straddle the split included, in order — also when the second range
/// holds back (more parts than it may keep while the first is written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_runs_merge_in_parallel_ranges() {
    let d = Data::new();
    for i in 0..4 {
        d.write_range(&format!("p{i}.parquet"), i * 60_000, 60_000, 20_000);
    }
    let mut o = open(&d.overlay_url("overlay")).await;
    // Parts of 4 KiB: the second range fills what it may hold and waits for the first.
    o.set_run_part_bytes(4096);
    table(
        &o,
        &d,
        &["p0.parquet", "p1.parquet", "p2.parquet", "p3.parquet"],
    )
    .await;
    o.create_index(
        "t",
        "by_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("t", |_| {}).await.unwrap();
    let run = o.snapshot_manifest(0).await.unwrap().tables[0].indexes[0]
        .run
        .clone()
        .expect("a run");
    assert_eq!(run.ordered.entries, 240_000);
    for c in 0..37 {
        let r = o
            .lookup("t", "by_customer", &s(&format!("c{c}")))
            .await
            .unwrap();
        let want = (0..240_000).filter(|i| i % 37 == c).count();
        assert_eq!(r.rows.len(), want, "c{c}");
        assert_eq!(r.stats.files_scanned, 0);
        assert!(r.rows.iter().all(|x| {
            let id = ["p0.parquet", "p1.parquet", "p2.parquet", "p3.parquet"]
                .iter()
                .position(|f| *f == x.file)
                .unwrap() as u64
                * 60_000
                + x.position;
            id % 37 == c as u64
        }));
    }
    o.close().await.unwrap();
}

/// Files registered while a unique index builds are maintained in it; a duplicate they bring
/// poisons the build instead of failing the writer.
#[tokio::test]
async fn writers_during_a_build() {
    let d = Data::new();
    three_files(&d);
    d.write_range("new.parquet", 10_000, 100, 50);
    d.write(&"clash.parquet".to_string(), &[(5, Some("x@x"), "c")], 10);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    let opts = StepOptions {
        max_entries: 1000,
        max_bytes: 1 << 20,
    };
    o.build_step("t", "by_id", opts).await.unwrap();
    let rep = o
        .register_files("t", &paths(&["new.parquet"]))
        .await
        .unwrap();
    assert!(rep.poisoned.is_empty());
    assert_eq!(rep.entries, 100);
    o.build_index("t", "by_id", opts, |_| {}).await.unwrap();
    let v = o.verify("t", "by_id").await.unwrap();
    assert_eq!((v.files, v.stored, v.missing), (4, 9100, 0));
    assert!(v.certified);
    let r = o.lookup("t", "by_id", &[Value::Int(10_042)]).await.unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(r.stats.files_scanned, 0);

    // A ready unique index refuses the duplicate outright.
    let e = o
        .register_files("t", &paths(&["clash.parquet"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT");
    // While a unique index builds, the same file registers and poisons that build instead.
    o.drop_index("t", "by_id").await.unwrap();
    o.create_index("t", "by_id2", &["id".into()], unique())
        .await
        .unwrap();
    o.build_step("t", "by_id2", opts).await.unwrap();
    // The clashing row (id 5) sits in a file the build has not finished: the registration
    // lands (a building index is maintained), and the build cannot become ready.
    let rep = o
        .register_files("t", &paths(&["clash.parquet"]))
        .await
        .unwrap();
    assert_eq!(rep.files, 1);
    let e = o
        .build_index("t", "by_id2", opts, |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("p0.parquet@5") && msg.contains("clash.parquet@0"),
        "{msg}"
    );
    assert_eq!(
        o.index_record("t", "by_id2").await.unwrap().state,
        IndexState::Poisoned
    );
    // When the clashing row is already indexed, the registration poisons the build at once.
    d.write(&"clash2.parquet".to_string(), &[(7, Some("y@x"), "c")], 10);
    o.create_index("t", "by_id3", &["id".into()], unique())
        .await
        .unwrap();
    o.build_step(
        "t",
        "by_id3",
        StepOptions {
            max_entries: 3000,
            max_bytes: 1 << 20,
        },
    )
    .await
    .unwrap();
    let rep = o
        .register_files("t", &paths(&["clash2.parquet"]))
        .await
        .unwrap();
    assert_eq!(rep.poisoned, vec!["by_id3".to_string()]);
    assert_eq!(
        o.index_record("t", "by_id3").await.unwrap().state,
        IndexState::Poisoned
    );
    assert_eq!(o.catalog_keys("c/").await.unwrap(), 0);
    o.close().await.unwrap();
}

/// Drop with purge rewrites bundles without the blob, reclaims records and deletes what
/// nothing references; vacuum keeps what retained manifests reference.
#[tokio::test]
async fn drop_purge_and_vacuum() {
    let d = Data::new();
    three_files(&d);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    define(&o).await;
    o.build("t", |_| {}).await.unwrap();
    let before = count(&o, "bundles").await;
    let rep = o.drop_index_purge("t", "by_id").await.unwrap();
    assert_eq!(rep.index_files, 3);
    assert_eq!(rep.claims, 0, "no claims to reclaim");
    assert!(rep.artifacts >= 3, "{rep:?}");
    assert!(rep.bytes > 0);
    assert!(count(&o, "bundles").await <= before);
    for (_, b) in o.bundles("t").await.unwrap() {
        let footer = skerry_core::formats::puffin::PuffinFooter::parse_tail(
            &b,
            b.len() as u64,
            &Default::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            footer.metadata.blobs.len(),
            1,
            "only by_customer's blob is left"
        );
    }
    let r = o.lookup("t", "by_customer", &s("c3")).await.unwrap();
    assert_eq!(r.stats.files_by_index + r.stats.files_pruned, 3);
    assert_eq!(r.rows.len(), 9000 / 37 + 1);
    o.close().await.unwrap();
}

/// One `build()` of three indexes reads each file once and writes ONE bundle generation per
/// data file holding all three blobs; vacuum then finds nothing unreferenced, and every
/// object left under `bundles/` is the current bundle of a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_build_of_three_indexes_writes_one_generation_per_file() {
    let d = Data::new();
    three_files(&d);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    define(&o).await;
    o.create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    let mut progress = vec![];
    let rep = o
        .build("t", |p| progress.push((p.phase.clone(), p.done, p.total)))
        .await
        .unwrap();
    assert_eq!(
        (rep.files_indexed, rep.bundles_written, rep.entries),
        (3, 3, 27_000)
    );
    // The whole-file pass reports rows × indexes; then each index's flip to ready.
    let pass: Vec<_> = progress.iter().filter(|p| p.0 == "build").collect();
    assert_eq!(
        pass.last().map(|p| (p.1, p.2)),
        Some((27_000, 27_000)),
        "{progress:?}"
    );
    assert!(pass.windows(2).all(|w| w[1].1 >= w[0].1));
    assert!(progress.iter().all(|p| p.1 <= p.2));
    let listed: std::collections::BTreeSet<String> = o
        .store()
        .list(Some(&Path::from("bundles")))
        .map(|m| m.unwrap().location.to_string())
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect();
    assert_eq!(listed.len(), 3, "one generation per file: {listed:?}");
    assert!(
        listed
            .iter()
            .all(|p| p.contains("-g1-") && p.ends_with(".puffin")),
        "{listed:?}"
    );
    for (_, b) in o.bundles("t").await.unwrap() {
        let footer = skerry_core::formats::puffin::PuffinFooter::parse_tail(
            &b,
            b.len() as u64,
            &Default::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(footer.metadata.blobs.len(), 3, "all three indexes in it");
    }
    for ix in ["by_id", "by_customer", "by_email"] {
        assert_eq!(
            o.index_record("t", ix).await.unwrap().state,
            IndexState::Ready
        );
        let v = o.verify("t", ix).await.unwrap();
        assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true), "{ix}");
    }
    assert_eq!(
        o.catalog_keys("c/").await.unwrap(),
        0,
        "no per-key catalog entries"
    );
    o.publish().await.unwrap();
    let vac = o.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!(vac.artifacts, 0, "the build left no garbage: {vac:?}");
    let after: std::collections::BTreeSet<String> = o
        .store()
        .list(Some(&Path::from("bundles")))
        .map(|m| m.unwrap().location.to_string())
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect();
    assert_eq!(after, listed);
    assert_eq!(count(&o, "staging").await, 0);
    let r = o.lookup("t", "by_email", &s("u4321@x")).await.unwrap();
    assert_eq!(
        r.rows
            .iter()
            .map(|r| (r.file.as_str(), r.position))
            .collect::<Vec<_>>(),
        vec![("p1.parquet", 1321)]
    );
    o.close().await.unwrap();
}

/// verify recomputes entries; a clean pass certifies; steps, writes and changes meanwhile
/// withdraw or prevent the certificate.
#[tokio::test]
async fn verify_and_certificate() {
    let d = Data::new();
    three_files(&d);
    d.write_range("more.parquet", 20_000, 10, 10);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &THREE).await;
    define(&o).await;
    o.build("t", |_| {}).await.unwrap();
    let v = o.verify("t", "by_customer").await.unwrap();
    assert_eq!(
        (
            v.files,
            v.stored,
            v.expected,
            v.missing,
            v.dead,
            v.mismatched,
            v.certified
        ),
        (3, 9000, 9000, 0, 0, 0, true)
    );
    let c = o.certificate("t", "by_customer").await.unwrap().unwrap();
    assert_eq!(c.entries, 9000);
    // Deleted rows: their entries are dead (answers leave them out); still clean.
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "p2.parquet".into(),
            positions: vec![0, 1, 2],
        }],
    )
    .await
    .unwrap();
    assert!(
        o.certificate("t", "by_customer").await.unwrap().is_none(),
        "writes withdraw it"
    );
    let v = o.verify("t", "by_customer").await.unwrap();
    assert_eq!(
        (v.expected, v.dead, v.missing, v.certified),
        (8997, 3, 0, true)
    );
    // The table moved while verify ran: nothing recorded.
    let v = o
        .verify_with_pause("t", "by_customer", async {
            o.register_files("t", &paths(&["more.parquet"]))
                .await
                .unwrap();
        })
        .await
        .unwrap();
    assert!(!v.certified);
    assert!(o.certificate("t", "by_customer").await.unwrap().is_none());
    // A file rewritten in place: refresh records new facts, its blob no longer passes the
    // gate, verify reports it unindexed and its rows missing; the rebuild step fixes it.
    d.write_range("p1.parquet", 50_000, 3000, 500);
    let r = o.refresh("t").await.unwrap();
    assert_eq!(r.changed, vec!["p1.parquet".to_string()]);
    let v = o.verify("t", "by_customer").await.unwrap();
    assert_eq!(
        (v.files_unindexed, v.missing, v.certified),
        (1, 3000, false)
    );
    o.verify("t", "by_id").await.unwrap();
    let s1 = o
        .build_step("t", "by_customer", StepOptions::default())
        .await
        .unwrap();
    assert_eq!(s1.files_completed, vec!["p1.parquet".to_string()]);
    assert!(s1.merged.is_none());
    // The rewritten file leaves the run: the tier step follows in a merge step of its own.
    assert!(!s1.done);
    let s2 = o
        .build_step("t", "by_customer", StepOptions::default())
        .await
        .unwrap();
    assert!(
        s2.done && s2.merged.is_some() && s2.files_completed.is_empty(),
        "{s2:?}"
    );
    let v = o.verify("t", "by_customer").await.unwrap();
    assert!(v.certified, "{v:?}");
    // A step of the index withdraws its certificate.
    let gen = o.index_record("t", "by_customer").await.unwrap().generation;
    assert!(
        o.certificate("t", "by_customer")
            .await
            .unwrap()
            .unwrap()
            .generation
            == gen
    );
    // A certificate made for an index whose definition moved meanwhile is not recorded.
    let v = o
        .verify_with_pause("t", "by_customer", async {
            o.drop_index("t", "by_customer").await.unwrap();
            o.create_index(
                "t",
                "by_customer",
                &["customer".into()],
                IndexOptions::default(),
            )
            .await
            .unwrap();
        })
        .await
        .unwrap();
    assert!(!v.certified);
    assert!(o.certificate("t", "by_customer").await.unwrap().is_none());
    o.close().await.unwrap();
}

/// Files that drop or retype an indexed column are refused (registration and refresh);
/// index columns are held by field id.
#[tokio::test]
async fn indexed_columns_cannot_be_dropped_or_retyped() {
    let d = Data::new();
    let write = |name: &str, cols: Vec<(String, KeyType)>| {
        let rows: Vec<Vec<Value>> = (0..3)
            .map(|i| {
                cols.iter()
                    .map(|(_, t)| match t {
                        KeyType::Int64 => Value::Int(i),
                        _ => Value::String(format!("v{i}")),
                    })
                    .collect()
            })
            .collect();
        let b = parquet_from_rows(&cols, &rows, 10, SampleCodec::Zstd).unwrap();
        std::fs::write(d.dir.path().join("t").join(name), b).unwrap();
    };
    let full = || {
        vec![
            ("id".to_string(), KeyType::Int64),
            ("customer".to_string(), KeyType::String),
            ("email".to_string(), KeyType::String),
        ]
    };
    write("a.parquet", full());
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &["a.parquet"]).await;
    o.create_index("t", "by_email", &["email".into()], IndexOptions::default())
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    write("b.parquet", full());
    o.register_files("t", &paths(&["b.parquet"])).await.unwrap();
    // No email column.
    write(
        "dropped.parquet",
        vec![
            ("id".into(), KeyType::Int64),
            ("customer".into(), KeyType::String),
        ],
    );
    let e = o
        .register_files("t", &paths(&["dropped.parquet"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_REFUSED", "{e}");
    assert!(e.to_string().contains("by_email"));
    // email as int64.
    let mut retyped = full();
    retyped[2].1 = KeyType::Int64;
    write("retyped.parquet", retyped);
    let e = o
        .register_files("t", &paths(&["retyped.parquet"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_REFUSED", "{e}");
    // A registered file rewritten without the column: refresh refuses it (reported, left as
    // it was; the other files are still refreshed).
    std::fs::copy(
        d.dir.path().join("t/dropped.parquet"),
        d.dir.path().join("t/a.parquet"),
    )
    .unwrap();
    let r = o.refresh("t").await.unwrap();
    assert_eq!(r.unreadable.len(), 1);
    assert_eq!(r.unreadable[0].file, "a.parquet");
    assert_eq!(r.unreadable[0].code, "E_REFUSED");
    assert!(r.changed.is_empty() && r.touched.is_empty());
    o.close().await.unwrap();
}

/// Index columns are held by field id: a file whose writer renamed the column (same field
/// id) joins the table and is indexed.
#[tokio::test]
async fn a_renamed_column_keeps_its_field_id() {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let d = Data::new();
    let write = |name: &str, email_col: &str, first: i64| {
        let field = |n: &str, t: DataType, id: &str| {
            Field::new(n, t, true).with_metadata(std::collections::HashMap::from([(
                "PARQUET:field_id".to_string(),
                id.to_string(),
            )]))
        };
        let schema = std::sync::Arc::new(Schema::new(vec![
            field("id", DataType::Int64, "7"),
            field(email_col, DataType::Utf8, "9"),
        ]));
        let ids: Vec<i64> = (first..first + 5).collect();
        let emails: Vec<String> = ids.iter().map(|i| format!("u{i}@x")).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                std::sync::Arc::new(Int64Array::from(ids)) as ArrayRef,
                std::sync::Arc::new(StringArray::from(emails)) as ArrayRef,
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        std::fs::write(d.dir.path().join("t").join(name), out).unwrap();
    };
    write("a.parquet", "email", 0);
    write("b.parquet", "mail", 100);
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &["a.parquet"]).await;
    let ix = o
        .create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    assert_eq!(ix.fields, vec![9]);
    o.build("t", |_| {}).await.unwrap();
    o.register_files("t", &paths(&["b.parquet"])).await.unwrap();
    let r = o.lookup("t", "by_email", &s("u102@x")).await.unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(
        (r.rows[0].file.as_str(), r.rows[0].position),
        ("b.parquet", 2)
    );
    assert_eq!(r.stats.files_scanned, 0);
    o.close().await.unwrap();
}

/// A catalog written in another format version is refused at open.
#[tokio::test]
async fn catalog_format_is_checked_at_open() {
    let d = Data::new();
    let dir = d.dir.path().join("overlay");
    let o = open(&d.overlay_url("overlay")).await;
    o.close().await.unwrap();
    drop(o);
    let store: std::sync::Arc<dyn object_store::ObjectStore> =
        std::sync::Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
    let db = slatedb::Db::builder("catalog", store)
        .build()
        .await
        .unwrap();
    db.put(b"m/format", b"2").await.unwrap();
    db.close().await.unwrap();
    let e = Overlay::open(&d.overlay_url("overlay"), OpenOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), "E_CATALOG_FORMAT");
    assert!(e.to_string().contains("version 2"), "{e}");
}

mod vacuum_property {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Build,
        Publish,
        Recreate,
        Rewrite(usize),
        Delete(usize, u64),
        Vacuum(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Build),
            Just(Op::Publish),
            Just(Op::Recreate),
            (0usize..3).prop_map(Op::Rewrite),
            (0usize..3, 0u64..300).prop_map(|(f, p)| Op::Delete(f, p)),
            (1u64..4).prop_map(Op::Vacuum),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// Whatever happened before, vacuum never deletes anything a retained manifest (or
        /// the catalog) references, and every retained manifest still answers lookups.
        #[test]
        fn vacuum_keeps_what_retained_manifests_reference(ops in prop::collection::vec(op(), 1..10), retain in 1u64..4) {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                let d = Data::new();
                for i in 0..3 {
                    d.write_range(&format!("p{i}.parquet"), i * 300, 300, 100);
                }
                let o = open("memory://").await;
                table(&o, &d, &THREE).await;
                o.create_index("t", "by_customer", &["customer".into()], IndexOptions::default()).await.unwrap();
                o.build("t", |_| {}).await.unwrap();
                o.publish().await.unwrap();
                let mut generation = 0;
                for op in ops.iter().chain(std::iter::once(&Op::Vacuum(retain))) {
                    match op {
                        Op::Build => { o.build("t", |_| {}).await.unwrap(); }
                        Op::Publish => { o.publish().await.unwrap(); }
                        Op::Recreate => {
                            o.drop_index("t", "by_customer").await.unwrap();
                            o.create_index("t", "by_customer", &["customer".into()], IndexOptions::default()).await.unwrap();
                        }
                        Op::Rewrite(f) => {
                            generation += 1;
                            d.write_range(&format!("p{f}.parquet"), 10_000 * generation, 300, 100);
                            o.refresh("t").await.unwrap();
                        }
                        Op::Delete(f, p) => {
                            o.register_deletes("t", &[FileDeletes { file: format!("p{f}.parquet"), positions: vec![*p] }]).await.unwrap();
                        }
                        Op::Vacuum(k) => {
                            o.vacuum(VacuumOptions::now(*k)).await.unwrap();
                            check(&o, *k).await;
                        }
                    }
                }
                o.close().await.unwrap();
            });
        }
    }

    async fn check(o: &Overlay, retain: u64) {
        use skerry_core::io::{Location, RangeReader};
        let mut versions = vec![];
        let mut l = o.store().list(Some(&Path::from("manifests")));
        while let Some(m) = l.next().await {
            let p = m.unwrap().location.to_string();
            if p.ends_with(".json") {
                versions.push(p);
            }
        }
        assert!(versions.len() as u64 <= retain);
        let reader = o.reader();
        let dirs = skerry_core::read::cache::ReadCache::default();
        for p in versions {
            let b = reader.read_all(&Location::new(&p)).await.unwrap();
            let m = skerry_core::formats::manifest::Manifest::from_json(&b).unwrap();
            for t in &m.tables {
                for ix in &t.indexes {
                    for a in &ix.files {
                        reader
                            .head(&Location::new(&a.lineage.bundle_path))
                            .await
                            .unwrap();
                    }
                    if let Some(r) = &ix.run {
                        reader.head(&Location::new(&r.bundle_path)).await.unwrap();
                    }
                }
            }
            let lk = Pinned {
                overlay: reader.as_ref(),
                data: o.data_reader().as_ref(),
                manifest: &m,
                cache: &dirs,
                scan_only: false,
            };
            if m.table("t")
                .unwrap()
                .index("by_customer")
                .is_ok_and(|i| i.state == IndexState::Ready)
            {
                let r = lk.lookup("t", "by_customer", &s("c5")).await.unwrap();
                // Gate rejections (files rewritten since) scan instead; a missing bundle
                // would be an I/O error, never a silent gap.
                assert!(r.stats.files == 3, "{:?}", r.stats);
            }
        }
    }
}

/// The lifecycle on `s3://` against a real S3-compatible server the test starts itself on
/// 127.0.0.1: moto's standalone server (`moto_server`, from PyPI; `scripts/setup.sh`
/// installs it), which implements conditional writes (`If-None-Match`, `If-Match`) as S3
/// does — SlateDB's fencing and the HEAD pointer rely on them.
#[cfg(feature = "s3")]
mod s3 {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lifecycle_on_s3() {
        let moto = crate::support::Moto::start(&["skerry"]);
        let storage = crate::support::s3_storage(&moto.endpoint());
        let d = Data::new();
        three_files(&d);
        d.write("dup.parquet", &[(42, Some("x@x"), "c")], 10);
        for i in 0..3 {
            d.write(
                &format!("race-{i}.parquet"),
                &[(70_000, Some("x@x"), "contested")],
                10,
            );
        }
        let url = "s3://skerry/overlay";
        let mut o = Overlay::open(
            url,
            OpenOptions {
                storage: storage.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        o.set_block_bytes(1024);
        table(&o, &d, &THREE).await;
        define(&o).await;
        let opts = StepOptions {
            max_entries: 2000,
            max_bytes: 1 << 20,
        };
        o.build_step("t", "by_id", opts).await.unwrap();
        // Reopening fences the first handle; the new one resumes the staged build.
        let o2 = Overlay::open(
            url,
            OpenOptions {
                storage,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        drop(o);
        let o = o2;
        o.build_index("t", "by_id", opts, |_| {}).await.unwrap();
        o.build("t", |_| {}).await.unwrap();
        let e = o
            .register_files("t", &paths(&["dup.parquet"]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_CONSTRAINT");
        let races: Vec<_> = (0..3)
            .map(|i| {
                let p = vec![format!("race-{i}.parquet")];
                let o = &o;
                async move { o.register_files("t", &p).await }
            })
            .collect();
        let results = futures::future::join_all(races).await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        let rep = o
            .register_deletes(
                "t",
                &[FileDeletes {
                    file: "p0.parquet".into(),
                    positions: vec![42],
                }],
            )
            .await
            .unwrap();
        assert_eq!(rep.rows_deleted, 1);
        o.register_files("t", &paths(&["dup.parquet"]))
            .await
            .unwrap();
        let v = o.verify("t", "by_id").await.unwrap();
        assert!(v.certified, "{v:?}");
        assert_eq!(v.dead, 1);
        for _ in 0..3 {
            o.publish().await.unwrap();
        }
        let purge = o.drop_index_purge("t", "by_customer").await.unwrap();
        assert_eq!(purge.index_files, 5);
        let vac = o.vacuum(VacuumOptions::now(2)).await.unwrap();
        assert_eq!(vac.manifests, 1);
        let r = o.lookup("t", "by_id", &[Value::Int(42)]).await.unwrap();
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].file, "dup.parquet");
        o.close().await.unwrap();
    }
}

/// The catalog's write-ahead-log objects under `overlay`, with their sizes.
fn wal_objects(overlay: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    std::fs::read_dir(overlay.join("catalog/wal"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| Some((e.file_name().into_string().ok()?, e.metadata().ok()?.len())))
                .collect()
        })
        .unwrap_or_default()
}

/// Sizes of the write-ahead-log objects under `overlay` that `before` did not list.
fn wal_written(
    overlay: &std::path::Path,
    before: &std::collections::BTreeMap<String, u64>,
) -> Vec<u64> {
    wal_objects(overlay)
        .into_iter()
        .filter(|(k, _)| !before.contains_key(k))
        .map(|(_, v)| v)
        .collect()
}

/// Issue 38: more files than one commit holds — a plain `registerFiles` onto an indexed table
/// and a new table — register in bounded commits (no catalog write-ahead object holds them
/// all); the indexes defer the work and answers stay exact; a new table is named only by its
/// last commit and leaves nothing for vacuum.
#[tokio::test]
async fn many_files_register_in_bounded_commits() {
    let n = FILES_PER_COMMIT + 808;
    let d = Data::new();
    d.write_range("a.parquet", 0, 10, 64);
    std::fs::create_dir_all(d.dir.path().join("t/m")).unwrap();
    let cols = big_columns();
    for i in 0..n as i64 {
        let rows = vec![
            vec![
                Value::Int(10_000 + 2 * i),
                Value::Null,
                Value::String(format!("c{}", i % 7)),
            ],
            vec![
                Value::Int(10_001 + 2 * i),
                Value::Null,
                Value::String("c".into()),
            ],
        ];
        let b = parquet_from_rows(&cols, &rows, 64, SampleCodec::Zstd).unwrap();
        std::fs::write(d.dir.path().join(format!("t/m/{i:05}.parquet")), b).unwrap();
    }
    let names: Vec<String> = (0..n).map(|i| format!("m/{i:05}.parquet")).collect();
    let overlay = d.dir.path().join("overlay");
    let o = open(&d.overlay_url("overlay")).await;
    table(&o, &d, &["a.parquet"]).await;
    o.create_index("t", "by_id", &["id".into()], unique())
        .await
        .unwrap();
    for (name, col) in [("by_customer", "customer"), ("by_email", "email")] {
        o.create_index("t", name, &[col.into()], IndexOptions::default())
            .await
            .unwrap();
    }
    o.build("t", |_| {}).await.unwrap();

    let c3 = hits(&o, "by_customer", Value::String("c3".into())).await;
    let before = wal_objects(&overlay);
    let r = o.register_files("t", &names).await.unwrap();
    let written = wal_written(&overlay, &before);
    let (total, largest) = (written.iter().sum::<u64>(), *written.iter().max().unwrap());
    eprintln!(
        "registerFiles of {n}: {} commits, {total} WAL bytes, largest {largest}",
        r.commits
    );
    assert_eq!((r.files, r.rows, r.commits), (n as u64, 2 * n as u64, 2));
    assert_eq!(r.pending, paths(&["by_id", "by_customer", "by_email"]));
    // No commit held more than a part's share of the file records (one commit of all n
    // files would write about n/FILES_PER_COMMIT ≈ 1.1 times that).
    let bounded =
        |largest: u64, total: u64| largest * (n as u64) * 20 < total * FILES_PER_COMMIT as u64 * 21;
    assert!(bounded(largest, total), "{largest} of {total}");
    for ix in ["by_id", "by_customer", "by_email"] {
        assert_eq!(
            o.index_record("t", ix).await.unwrap().state,
            IndexState::Maintaining
        );
    }
    // Exact while pending (scanned), for a file of each part.
    assert_eq!(hits(&o, "by_id", Value::Int(10_001)).await, 1);
    assert_eq!(
        hits(&o, "by_id", Value::Int(10_000 + 2 * (n as i64 - 1))).await,
        1
    );
    assert_eq!(
        hits(&o, "by_customer", Value::String("c3".into())).await,
        c3 + (0..n).filter(|i| i % 7 == 3).count()
    );
    // Registered once: a second registration of one of them is refused.
    let e = o.register_files("t", &names[n - 1..]).await.unwrap_err();
    assert_eq!(e.code(), "E_EXISTS", "{e}");
    // Catch-up covers them.
    o.build("t", |_| {}).await.unwrap();
    for ix in ["by_id", "by_customer", "by_email"] {
        assert_eq!(
            o.index_record("t", ix).await.unwrap().state,
            IndexState::Ready
        );
    }
    assert_eq!(
        hits(&o, "by_id", Value::Int(10_000 + 2 * (n as i64 - 1))).await,
        1
    );
    let v = o.verify("t", "by_id").await.unwrap();
    assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true));

    // A new table of as many files: written in parts, named by the last commit.
    let before = wal_objects(&overlay);
    let u = o
        .register_parquet_table("u", &d.url(), FileSelection::Prefix("m/".into()))
        .await
        .unwrap();
    assert_eq!((u.files, u.rows), (n as u64, 2 * n as u64));
    let written = wal_written(&overlay, &before);
    let (total, largest) = (written.iter().sum::<u64>(), *written.iter().max().unwrap());
    assert!(written.len() >= 3 && bounded(largest, total), "{written:?}");
    let m = o.snapshot_manifest(0).await.unwrap();
    assert_eq!(m.table("u").unwrap().files.len(), n);
    let e = o
        .register_parquet_table("u", &d.url(), FileSelection::Prefix("m/".into()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_EXISTS");
    // Two registrations of one new name at once: one names the table, the other fails
    // `E_EXISTS` (at its first commit, or at its last, then removing what it staged).
    let location = d.url();
    let register = || o.register_parquet_table("w", &location, FileSelection::Prefix("m/".into()));
    let (a, b) = tokio::join!(register(), register());
    let codes: Vec<&str> = [&a, &b]
        .iter()
        .map(|r| r.as_ref().map_or_else(|e| e.code(), |_| "ok"))
        .collect();
    assert!(
        codes.contains(&"ok") && codes.contains(&"E_EXISTS"),
        "{codes:?}"
    );
    let v = o.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!(
        v.staged_tables, 0,
        "no registration left its records behind"
    );
    let m = o.snapshot_manifest(0).await.unwrap();
    assert_eq!(m.table("w").unwrap().files.len(), n);
}

/// `registerRewrite` (issue 43, RFC 0006): a Parquet table's owner rewrites two files into
/// one (rows reordered, deleted rows left out), each kept row carrying its row id in
/// `_row_id`. The claim is checked by the ids — a row left out, an id twice, a missing
/// column, an unknown file are refused and change nothing — and, when it holds, the files
/// swap in one commit and both indexes' entries are carried over (none derived); the rows
/// keep their ids, `verify` certifies, and the unique index still refuses a duplicate.
#[tokio::test]
async fn a_rewrite_of_parquet_files_carries_their_entries() {
    use skerry_core::read::plan::Query;
    use skerry_core::read::predicate::{Condition, Op};
    let d = Data::new();
    d.write_range("a.parquet", 0, 100, 32);
    d.write_range("b.parquet", 100, 150, 32);
    let o = open(&d.overlay_url("o")).await;
    table(&o, &d, &["a.parquet", "b.parquet"]).await;
    o.create_index("t", "by_email", &["email".into()], unique())
        .await
        .unwrap();
    let bitmap = IndexOptions {
        kind: skerry_core::index::IndexKind::Bitmap,
        ..Default::default()
    };
    o.create_index("t", "by_customer", &["customer".into()], bitmap)
        .await
        .unwrap();
    o.build("t", |_| {}).await.unwrap();
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "a.parquet".into(),
            positions: vec![3, 4, 50],
        }],
    )
    .await
    .unwrap();
    // Every live row: (id, email, customer, row id).
    let all = || async {
        let r = o
            .query(
                "t",
                &Query {
                    conditions: vec![Condition::new("id", Op::Ge(Value::Int(i64::MIN)))],
                    columns: Some(vec!["id".into(), "email".into(), "customer".into()]),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        use arrow_array::cast::AsArray;
        use arrow_array::Array;
        let b = &r.batch;
        let (id, email, customer) = (
            b.column(0).as_primitive::<arrow_array::types::Int64Type>(),
            b.column(1).as_string::<i32>(),
            b.column(2).as_string::<i32>(),
        );
        let mut rows: Vec<(i64, Option<String>, String, u64)> = (0..b.num_rows())
            .map(|i| {
                (
                    id.value(i),
                    (!email.is_null(i)).then(|| email.value(i).to_string()),
                    customer.value(i).to_string(),
                    r.rows[i].row_id.unwrap(),
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let before = all().await;
    assert_eq!(before.len(), 247);
    // The rewrite's file: b's rows then a's live ones, with their row ids after the table's
    // columns.
    let write = |name: &str, rows: &[(i64, Option<String>, String, u64)], ids: bool| {
        let mut cols = vec![
            ("id".to_string(), KeyType::Int64),
            ("email".to_string(), KeyType::String),
            ("customer".to_string(), KeyType::String),
        ];
        if ids {
            cols.push(("_row_id".to_string(), KeyType::Int64));
        }
        let rows: Vec<Vec<Value>> = rows
            .iter()
            .map(|(id, e, c, rid)| {
                let mut v = vec![
                    Value::Int(*id),
                    e.clone().map_or(Value::Null, Value::String),
                    Value::String(c.clone()),
                ];
                if ids {
                    v.push(Value::Int(*rid as i64));
                }
                v
            })
            .collect();
        let b = parquet_from_rows(&cols, &rows, 40, SampleCodec::Zstd).unwrap();
        std::fs::write(d.dir.path().join("t").join(name), b).unwrap();
    };
    let mut moved: Vec<_> = before.iter().filter(|r| r.0 >= 100).cloned().collect();
    moved.extend(before.iter().filter(|r| r.0 < 100).cloned());
    write("c.parquet", &moved, true);
    write("short.parquet", &moved[1..], true);
    let mut twice = moved.clone();
    twice[5].3 = twice[6].3;
    write("twice.parquet", &twice, true);
    write("noids.parquet", &moved, false);
    // A link in the table's directory to a file outside it is refused, never read.
    let outside = d.dir.path().join("outside.parquet");
    std::fs::copy(d.dir.path().join("t").join("c.parquet"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, d.dir.path().join("t").join("link.parquet")).unwrap();
    let ab = paths(&["a.parquet", "b.parquet"]);
    for (added, removed, code) in [
        ("link.parquet", &ab, "E_INVALID"),
        ("short.parquet", &ab, "E_REFUSED"),
        ("twice.parquet", &ab, "E_REFUSED"),
        ("noids.parquet", &ab, "E_REFUSED"),
        (
            "c.parquet",
            &paths(&["a.parquet", "zz.parquet"]),
            "E_NOT_FOUND",
        ),
        ("a.parquet", &ab, "E_INVALID"),
    ] {
        let read = o.snapshot().await.unwrap().metrics().data_io.requests;
        let e = o
            .register_rewrite("t", removed, &paths(&[added]), None)
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{added}: {e}");
        if added == "link.parquet" {
            let now = o.snapshot().await.unwrap().metrics().data_io.requests;
            assert_eq!(now, read, "the link was not read");
        }
        assert_eq!(all().await, before, "{added}: nothing changed");
    }
    let m0 = o.snapshot().await.unwrap().metrics();
    let r = o
        .register_rewrite("t", &ab, &paths(&["c.parquet"]), None)
        .await
        .unwrap();
    let m1 = o.snapshot().await.unwrap().metrics();
    assert_eq!(
        (
            r.moved.files,
            r.moved.sources,
            r.moved.rows,
            r.moved.segments
        ),
        (1, 2, 247, 4)
    );
    assert_eq!((r.moved.carried, r.moved.derived), (2 * 247, 0));
    assert_eq!(
        (
            m1.blobs_derived - m0.blobs_derived,
            m1.blobs_carried - m0.blobs_carried
        ),
        (0, 2)
    );
    // The same rows under the same ids, now all in c.
    assert_eq!(all().await, before);
    let r = o.lookup("t", "by_email", &s("u120@x")).await.unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(
        (r.rows[0].file.as_str(), r.rows[0].position),
        ("c.parquet", 20)
    );
    for ix in ["by_email", "by_customer"] {
        let v = o.verify("t", ix).await.unwrap();
        assert!(v.certified && v.mismatched == 0, "{ix}: {v:?}");
    }
    // The carried unique index still holds its keys: a new file repeating one is refused.
    d.write_range("dup.parquet", 120, 1, 32);
    let e = o
        .register_files("t", &paths(&["dup.parquet"]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT");
}
