//! Trust holes, round 3 (issue 37), natively: each test reproduces one attack step for step
//! and failed on `56f143e`'s behaviour. The Node suite's `tests/trust3.test.mjs` covers the
//! same items through the addon and the wasm reader.

use std::path::Path;

mod support;

use skerry_core::admin::build::StepOptions;
use skerry_core::admin::fanout::{BuildReceipt, BuildTask, BundleBuilder, Outcome, PlanOptions};
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, parquet_from_rows, SampleCodec};
use skerry_core::formats::manifest::{self, IndexState};
use skerry_core::index::IndexKind;
use skerry_core::io::ObjectStoreReader;
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::read::search::Search;
use skerry_core::values::{KeyType, Value};

fn url(p: &Path) -> String {
    format!("file://{}", p.display())
}

async fn open(p: &Path) -> Overlay {
    Overlay::open(&url(p), OpenOptions::default())
        .await
        .unwrap()
}

fn id_eq(v: i64) -> Query {
    Query {
        conditions: vec![Condition::new("order_id", Op::Eq(Value::Int(v)))],
        columns: Some(vec!["order_id".into()]),
        ..Default::default()
    }
}

/// Item 1 (Parquet side): a path is the object's name. `%30.parquet` is a file of that name,
/// not `0.parquet`; a symbolic link inside the table that leads out of it is refused.
#[tokio::test]
async fn paths_are_object_names_and_links_stay_inside() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(data.join("cat=x%2Fy")).unwrap();
    std::fs::write(
        data.join("0.parquet"),
        orders_parquet(0, 10, 10, SampleCodec::None).unwrap(),
    )
    .unwrap();
    std::fs::write(
        data.join("%30.parquet"),
        orders_parquet(100, 30, 10, SampleCodec::None).unwrap(),
    )
    .unwrap();
    std::fs::write(
        data.join("cat=x%2Fy/p.parquet"),
        orders_parquet(200, 20, 10, SampleCodec::None).unwrap(),
    )
    .unwrap();
    let o = open(&d.path().join("o")).await;
    let t = o
        .register_parquet_table(
            "orders",
            &url(&data),
            FileSelection::List(vec!["%30.parquet".into(), "cat=x%2Fy/p.parquet".into()]),
        )
        .await
        .unwrap();
    assert_eq!(
        t.rows, 50,
        "the literal %30.parquet (30 rows) and cat=x%2Fy/p.parquet (20)"
    );
    o.create_index(
        "orders",
        "by_id",
        &["order_id".into()],
        IndexOptions::unique(),
    )
    .await
    .unwrap();
    o.build("orders", |_| {}).await.unwrap();
    for (id, n) in [(105, 1), (215, 1), (5, 0)] {
        assert_eq!(
            o.query("orders", &id_eq(id))
                .await
                .unwrap()
                .batch
                .num_rows(),
            n,
            "{id}"
        );
    }
    // Listing finds the same names.
    let all = o
        .register_parquet_table("listed", &url(&data), FileSelection::Prefix(String::new()))
        .await
        .unwrap();
    assert_eq!((all.files, all.rows), (3, 60));

    // A link inside the table to a file outside it.
    std::fs::create_dir_all(d.path().join("outside")).unwrap();
    std::fs::write(
        d.path().join("outside/secret.parquet"),
        orders_parquet(900, 5, 5, SampleCodec::None).unwrap(),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        d.path().join("outside/secret.parquet"),
        data.join("link.parquet"),
    )
    .unwrap();
    let e = o
        .register_files("orders", &["link.parquet".into()])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
    assert!(e.to_string().contains("outside the table location"), "{e}");
    let e = o
        .register_parquet_table("linked", &url(&data), FileSelection::Prefix(String::new()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
}

/// Swaps two int64 values in place and restores the mtime: same size, same local ETag.
fn swap_in_place(file: &Path, a: i64, b: i64) {
    let mtime = std::fs::metadata(file).unwrap().modified().unwrap();
    let mut buf = std::fs::read(file).unwrap();
    let at = |buf: &[u8], v: i64| {
        let n = v.to_le_bytes();
        buf.windows(8).position(|w| w == n).unwrap()
    };
    let (i, j) = (at(&buf, a), at(&buf, b));
    let tmp: [u8; 8] = buf[i..i + 8].try_into().unwrap();
    buf.copy_within(j..j + 8, i);
    buf[j..j + 8].copy_from_slice(&tmp);
    std::fs::write(file, &buf).unwrap();
    let f = std::fs::File::options().write(true).open(file).unwrap();
    f.set_modified(mtime).unwrap();
}

/// The customers of the rows whose `order_id` is `id`.
async fn customers(o: &Overlay, id: i64) -> Vec<String> {
    use arrow_array::Array;
    let q = Query {
        conditions: vec![Condition::new("order_id", Op::Eq(Value::Int(id)))],
        columns: Some(vec!["customer".into()]),
        ..Default::default()
    };
    let r = o.query("orders", &q).await.unwrap();
    let c = r.batch.column(0);
    let c = c
        .as_any()
        .downcast_ref::<arrow_array::StringArray>()
        .unwrap();
    (0..c.len()).map(|i| c.value(i).to_string()).collect()
}

/// Item 2: after `refresh_deep` finds a same-size rewrite (mtime restored), `query` and
/// `count` on the same warm handle answer the new rows, as a fresh handle does.
#[tokio::test]
async fn a_warm_handle_answers_the_new_rows_after_a_deep_refresh() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("part-0.parquet");
    std::fs::write(
        &file,
        orders_parquet(25000, 5000, 1000, SampleCodec::None).unwrap(),
    )
    .unwrap();
    let handle = |dir: &'static str| {
        let (d, data) = (d.path().join(dir), data.clone());
        async move {
            let indexes = [("by_id", "order_id", true)];
            let (_, o) = support::orders_indexed(&d, &data, &indexes).await;
            o.build("orders", |_| {}).await.unwrap();
            o
        }
    };
    let both = |id: i64, customer: &str| Query {
        conditions: vec![
            Condition::new("order_id", Op::Eq(Value::Int(id))),
            Condition::new("customer", Op::Eq(Value::String(customer.into()))),
        ],
        ..Default::default()
    };
    let o = handle("o").await;
    // Neighbours (one page, its statistics stay true), of different customers.
    let (a, b) = (25001, 25002);
    let ca = customers(&o, a).await;
    let cb = customers(&o, b).await;
    assert_ne!(ca, cb);
    // Warm: footer, pages and index blocks cached, counts answered.
    for _ in 0..2 {
        assert_eq!(o.count("orders", &both(a, &ca[0])).await.unwrap().count, 1);
        assert_eq!(customers(&o, a).await, ca);
    }
    swap_in_place(&file, a, b);
    let r = o.refresh_deep("orders").await.unwrap();
    assert_eq!(r.changed, vec!["part-0.parquet".to_string()]);
    // And a rewrite of other orders of the same size (so other statistics and footer).
    let size = std::fs::metadata(&file).unwrap().len();
    let (first, other) = (26_000..200_000)
        .step_by(1000)
        .map(|f| (f, orders_parquet(f, 5000, 1000, SampleCodec::None).unwrap()))
        .find(|(_, b)| b.len() as u64 == size)
        .expect("a same-size file of other orders");
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::fs::write(&file, &other).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let r = o.refresh_deep("orders").await.unwrap();
    assert_eq!(r.changed, vec!["part-0.parquet".to_string()]);
    let fresh = handle("fresh").await;
    for id in [a, b] {
        assert_eq!(
            customers(&o, id).await,
            customers(&fresh, id).await,
            "query {id}"
        );
    }
    for id in [25003, first + 3] {
        let n = usize::from(id == first + 3);
        assert_eq!(customers(&o, id).await.len(), n, "query {id}");
        let q = id_eq(id);
        assert_eq!(
            o.count("orders", &q).await.unwrap().count,
            n as u64,
            "count {id}"
        );
    }
}

/// Documents of 1 KiB to 1 MiB (some chunks split inside a character).
fn long_docs(n: usize) -> Vec<Vec<Value>> {
    (0..n)
        .map(|i| {
            let len = 1024usize << (i % 11); // 1 KiB .. 1 MiB
            let words = ["lorem", "ipsum", "σοφος", "dolor", "ü", "amet"];
            let mut s = String::with_capacity(len + 16);
            let mut k = i;
            while s.len() < len {
                s.push_str(words[k % words.len()]);
                s.push(' ');
                k = k.wrapping_mul(31).wrapping_add(7);
            }
            vec![
                Value::Int(i as i64),
                if i % 13 == 5 {
                    Value::Null
                } else {
                    Value::String(s)
                },
            ]
        })
        .collect()
}

/// The blob SHA-256 of each file's fulltext blob in `o`'s published manifest.
async fn fulltext_blobs(o: &Overlay, dir: &Path) -> Vec<(String, String)> {
    o.publish().await.unwrap();
    let reader = ObjectStoreReader::from_url(&url(dir), &[]).unwrap();
    let m = manifest::read_latest(&reader).await.unwrap();
    let t = m.table("docs").unwrap();
    let ix = t.index("by_text").unwrap();
    let mut out: Vec<(String, String)> = ix
        .files
        .iter()
        .map(|a| {
            let f = t.files.iter().find(|f| f.file_id == a.file_id).unwrap();
            (f.path.clone(), a.lineage.blob_sha256.clone())
        })
        .collect();
    out.sort();
    out
}

/// Item 3: a fulltext index over documents of 1 KiB–1 MiB builds one-shot, stepped, by
/// `register_files` and by fan-out, to identical blobs; a value an index cannot hold poisons
/// that index with its reason instead of leaving it `building`.
#[tokio::test]
async fn long_documents_build_every_way_to_the_same_blobs() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cols = vec![
        ("id".to_string(), KeyType::Int64),
        ("body".to_string(), KeyType::String),
    ];
    for (i, n) in [(0, 24), (1, 30)] {
        let rows = long_docs(n);
        std::fs::write(
            data.join(format!("d{i}.parquet")),
            parquet_from_rows(&cols, &rows, 8, SampleCodec::Snappy).unwrap(),
        )
        .unwrap();
    }
    let text = IndexOptions {
        kind: IndexKind::Fulltext,
        ..Default::default()
    };
    let setup = |name: &'static str, files: Option<Vec<String>>| {
        let data = data.clone();
        let dir = d.path().join(name);
        let text = text.clone();
        async move {
            let o = open(&dir).await;
            let sel = match files {
                Some(f) => FileSelection::List(f),
                None => FileSelection::Prefix(String::new()),
            };
            o.register_parquet_table("docs", &url(&data), sel)
                .await
                .unwrap();
            o.create_index("docs", "by_text", &["body".into()], text)
                .await
                .unwrap();
            (dir, o)
        }
    };
    // One-shot.
    let (d1, o1) = setup("one", None).await;
    o1.build("docs", |_| {}).await.unwrap();
    let want = fulltext_blobs(&o1, &d1).await;
    assert_eq!(want.len(), 2);
    // Stepped, in small steps (documents cross step boundaries).
    let (d2, o2) = setup("stepped", None).await;
    let steps = StepOptions {
        max_entries: 7,
        max_bytes: 300_000,
    };
    let r = o2
        .build_index("docs", "by_text", steps, |_| {})
        .await
        .unwrap();
    assert_eq!(r.files_indexed, 2);
    assert_eq!(fulltext_blobs(&o2, &d2).await, want);
    // Registration into an indexed table.
    let (d3, o3) = setup("registered", Some(vec!["d0.parquet".into()])).await;
    o3.build("docs", |_| {}).await.unwrap();
    o3.register_files("docs", &["d1.parquet".into()])
        .await
        .unwrap();
    assert_eq!(fulltext_blobs(&o3, &d3).await, want);
    // Fan-out, one index at a time (passEntries below the file's rows).
    let (d4, o4) = setup("fanout", None).await;
    let tasks = o4
        .plan_build(
            "docs",
            &PlanOptions {
                pass_entries: Some(4),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let b = BundleBuilder::open(&url(&d4), OpenOptions::default()).unwrap();
    let mut receipts = Vec::new();
    for t in &tasks {
        receipts.push(b.build_bundle(t).await.unwrap());
    }
    let c = o4.commit_build(&receipts).await.unwrap();
    assert_eq!(c.committed.len(), 2, "{c:?}");
    assert_eq!(fulltext_blobs(&o4, &d4).await, want);
    // Searches answer from the index, like a scan.
    let s = Search {
        query: "σοφος lorem".into(),
        k: 10,
        ..Default::default()
    };
    let by_index = o1.search("docs", &s).await.unwrap();
    assert_eq!(by_index.stats.files_scanned, 0);
    o1.set_scan_only(true);
    let scanned = o1.search("docs", &s).await.unwrap();
    assert_eq!(by_index.rows, scanned.rows);
    assert_eq!(by_index.scores, scanned.scores);

    // An ordered index over the long text cannot hold its values: poisoned with the reason,
    // the table's other index still built.
    let (d5, o5) = setup("poisoned", None).await;
    o5.create_index("docs", "by_body", &["body".into()], IndexOptions::default())
        .await
        .unwrap();
    let e = o5.build("docs", |_| {}).await.unwrap_err();
    assert_eq!(e.code(), "E_KEY_TOO_LARGE", "{e}");
    let rec = o5.index_record("docs", "by_body").await.unwrap();
    assert_eq!(rec.state, IndexState::Poisoned);
    assert!(
        rec.reason
            .as_deref()
            .unwrap_or("")
            .contains("bytes exceeds"),
        "{rec:?}"
    );
    assert_eq!(
        o5.index_record("docs", "by_text").await.unwrap().state,
        IndexState::Ready
    );
    assert_eq!(fulltext_blobs(&o5, &d5).await, want);
    // Stepped alike.
    let (_, o6) = setup("poisoned-steps", None).await;
    o6.create_index("docs", "by_body", &["body".into()], IndexOptions::default())
        .await
        .unwrap();
    let e = o6
        .build_index("docs", "by_body", StepOptions::default(), |_| {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_KEY_TOO_LARGE", "{e}");
    assert_eq!(
        o6.index_record("docs", "by_body").await.unwrap().state,
        IndexState::Poisoned
    );
}

/// The sample orders under `d/data` (4 files) with two indexes, unbuilt, in `d/o`.
async fn planned(d: &Path) -> (String, Overlay, Vec<BuildTask>) {
    let data = d.join("data");
    support::write_orders(&data, 4, 1000, 250);
    let (u, o) = support::orders_indexed(
        &d.join("o"),
        &data,
        &[
            ("by_id", "order_id", true),
            ("by_customer", "customer", false),
        ],
    )
    .await;
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    (u, o, tasks)
}

/// Bundle objects under `dir`.
fn bundles_in(dir: &Path) -> usize {
    let puffin = |e: &walkdir_lite::Entry| e.name.ends_with(".puffin");
    walkdir_lite::files(dir)
        .iter()
        .filter(|e| puffin(e))
        .count()
}

/// Files below a directory (no symlinks followed).
mod walkdir_lite {
    pub struct Entry {
        pub name: String,
    }
    pub fn files(dir: &std::path::Path) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => todo.push(e.path()),
                    _ => out.push(Entry {
                        name: e.file_name().to_string_lossy().into_owned(),
                    }),
                }
            }
        }
        out
    }
}

/// Item 4: a forged or altered task (another location, an escaping or renamed path, other
/// carried bundles, no or a wrong signature) is refused before any read or write.
#[tokio::test]
async fn forged_tasks_are_refused_before_any_read() {
    let d = tempfile::tempdir().unwrap();
    let (u, _o, tasks) = planned(d.path()).await;
    // Another tenant's table, readable by the worker.
    let other = d.path().join("tenant-b");
    support::write_orders(&other, 1, 1000, 250);
    let b = BundleBuilder::open(&u, OpenOptions::default()).unwrap();
    let before = bundles_in(&d.path().join("o"));
    let t0 = tasks[0].clone();
    let forgeries: Vec<(&str, Box<dyn Fn(&mut BuildTask)>)> = vec![
        (
            "another location",
            Box::new(move |t| t.table.location = url(&other)),
        ),
        (
            "an escaping path",
            Box::new(|t| t.file.path = "../tenant-b/p000.parquet".into()),
        ),
        (
            "an encoded name",
            Box::new(|t| t.file.path = "%2e%2e/tenant-b/p000.parquet".into()),
        ),
        (
            "another file",
            Box::new(|t| t.file.path = "p001.parquet".into()),
        ),
        ("an unsigned task", Box::new(|t| t.mac = None)),
        (
            "another signature",
            Box::new(|t| t.mac = Some("00".repeat(32))),
        ),
        (
            "a carried bundle elsewhere",
            Box::new(|t| {
                t.previous_bundle = serde_json::from_value(
                    serde_json::json!({"path": "../../tenant-b/x.puffin", "generation": 1}),
                )
                .unwrap()
            }),
        ),
        ("another table id", Box::new(|t| t.table.table_id += 1)),
    ];
    for (what, forge) in &forgeries {
        let mut t = t0.clone();
        forge(&mut t);
        let e = b.build_bundle(&t).await.unwrap_err();
        assert_eq!(e.code(), "E_INVALID", "{what}: {e}");
    }
    assert_eq!(
        bundles_in(&d.path().join("o")),
        before,
        "nothing was written"
    );
    // The genuine task builds.
    let r = b.build_bundle(&t0).await.unwrap();
    assert!(matches!(r.outcome, Outcome::Built { .. }));
    // A builder of another overlay (another key) refuses this overlay's tasks.
    let (u2, _o2, _) = planned(&d.path().join("second")).await;
    let b2 = BundleBuilder::open(&u2, OpenOptions::default()).unwrap();
    assert_eq!(b2.build_bundle(&t0).await.unwrap_err().code(), "E_INVALID");
}

/// Item 5: a receipt whose artifacts were exchanged or altered (object size and SHA-256
/// unchanged) is refused at commit by the bundle's own footer; the genuine one commits.
#[tokio::test]
async fn swapped_or_altered_artifacts_are_refused_at_commit() {
    let d = tempfile::tempdir().unwrap();
    let (u, o, tasks) = planned(d.path()).await;
    let b = BundleBuilder::open(&u, OpenOptions::default()).unwrap();
    let receipt = b.build_bundle(&tasks[0]).await.unwrap();
    type Alter = Box<dyn Fn(&mut Vec<skerry_core::formats::manifest::IndexFileEntry>)>;
    let alterations: Vec<(&str, Alter)> = vec![
        (
            "swapped places",
            Box::new(|a| {
                let (x, y) = (a[0].lineage.clone(), a[1].lineage.clone());
                a[0].lineage.blob_offset = y.blob_offset;
                a[0].lineage.blob_length = y.blob_length;
                a[1].lineage.blob_offset = x.blob_offset;
                a[1].lineage.blob_length = x.blob_length;
            }),
        ),
        (
            "swapped places and hashes",
            Box::new(|a| {
                let (x, y) = (a[0].lineage.clone(), a[1].lineage.clone());
                a[0].lineage.blob_offset = y.blob_offset;
                a[0].lineage.blob_length = y.blob_length;
                a[0].lineage.blob_sha256 = y.blob_sha256.clone();
                a[1].lineage.blob_offset = x.blob_offset;
                a[1].lineage.blob_length = x.blob_length;
                a[1].lineage.blob_sha256 = x.blob_sha256.clone();
            }),
        ),
        (
            "another hash",
            Box::new(|a| a[0].lineage.blob_sha256 = "00".repeat(32)),
        ),
        (
            "another directory",
            Box::new(|a| a[0].ordered.directory_offset += 1),
        ),
        (
            "another type",
            Box::new(|a| a[1].lineage.blob_type = "skerry-bitmap-v1".into()),
        ),
        (
            "a shorter blob",
            Box::new(|a| a[1].lineage.blob_length -= 1),
        ),
    ];
    for (what, alter) in &alterations {
        let mut r: BuildReceipt = receipt.clone();
        let Outcome::Built { artifacts, .. } = &mut r.outcome else {
            panic!("built");
        };
        assert_eq!(artifacts.len(), 2);
        alter(artifacts);
        let c = o.commit_build(&[r]).await.unwrap();
        assert!(c.committed.is_empty(), "{what}: {c:?}");
        assert_eq!(c.refused.len(), 1, "{what}: {c:?}");
    }
    let c = o.commit_build(&[receipt]).await.unwrap();
    assert_eq!(c.committed.len(), 1, "{c:?}");
}

/// Item 7: a file listed twice is refused (naming it), never counted twice.
#[tokio::test]
async fn a_file_listed_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    support::write_orders(&data, 2, 1000, 250);
    let o = open(&d.path().join("o")).await;
    let e = o
        .register_parquet_table(
            "orders",
            &url(&data),
            FileSelection::List(vec!["p000.parquet".into(), "p000.parquet".into()]),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID");
    assert!(e.to_string().contains("p000.parquet"), "{e}");
    o.register_parquet_table(
        "orders",
        &url(&data),
        FileSelection::List(vec!["p000.parquet".into()]),
    )
    .await
    .unwrap();
    let e = o
        .register_files("orders", &["p001.parquet".into(), "p001.parquet".into()])
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID");
    assert!(e.to_string().contains("p001.parquet"), "{e}");
    let q = Query::default();
    assert_eq!(o.count("orders", &q).await.unwrap().count, 1000);
}

/// Item 9: BM25 scores are summed in one canonical order on every path, so the index and a
/// scan give the same scores to the bit and the same ties (by row id) at every `k`.
#[tokio::test]
async fn search_scores_are_identical_by_index_and_by_scan() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let words = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    ];
    let cols = vec![
        ("id".to_string(), KeyType::Int64),
        ("body".to_string(), KeyType::String),
    ];
    let mut seed = 7u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for f in 0..3 {
        let rows: Vec<Vec<Value>> = (0..2000)
            .map(|i| {
                let n = 3 + (next() % 12) as usize;
                let body: Vec<&str> = (0..n)
                    .map(|_| words[(next() % words.len() as u64) as usize])
                    .collect();
                vec![Value::Int(f * 10_000 + i), Value::String(body.join(" "))]
            })
            .collect();
        std::fs::write(
            data.join(format!("t{f}.parquet")),
            parquet_from_rows(&cols, &rows, 500, SampleCodec::None).unwrap(),
        )
        .unwrap();
    }
    let o = open(&d.path().join("o")).await;
    o.register_parquet_table("docs", &url(&data), FileSelection::Prefix(String::new()))
        .await
        .unwrap();
    let text = IndexOptions {
        kind: IndexKind::Fulltext,
        ..Default::default()
    };
    o.create_index("docs", "by_text", &["body".into()], text)
        .await
        .unwrap();
    o.build("docs", |_| {}).await.unwrap();
    let queries = [
        "alpha beta gamma",
        "theta iota kappa alpha",
        "delta epsilon zeta eta theta",
        "gamma alpha",
        "kappa beta eta delta",
    ];
    let mut compared = 0;
    for q in queries {
        for k in [1, 9, 10, 37, 100] {
            let s = Search {
                query: q.into(),
                k,
                ..Default::default()
            };
            o.set_scan_only(false);
            let a = o.search("docs", &s).await.unwrap();
            assert_eq!(a.stats.files_scanned, 0);
            o.set_scan_only(true);
            let b = o.search("docs", &s).await.unwrap();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.scores), bits(&b.scores), "{q} k={k}");
            assert_eq!(a.rows, b.rows, "{q} k={k}");
            compared += a.rows.len();
        }
    }
    assert!(compared > 500, "{compared}");
}

/// A Parquet file of `n` rows: `id` and `emb`, a `list<float32>` of `dim` values per row.
fn list_vectors(first: i64, n: usize, dim: usize) -> Vec<u8> {
    use arrow_array::builder::{Float32Builder, ListBuilder};
    use std::sync::Arc;
    let mut emb = ListBuilder::new(Float32Builder::new());
    for i in 0..n {
        for k in 0..dim {
            emb.values().append_value((i * 7 + k) as f32 * 0.25);
        }
        emb.append(true);
    }
    let emb = emb.finish();
    let schema = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("emb", arrow_array::Array::data_type(&emb).clone(), true),
    ]));
    let ids = arrow_array::Int64Array::from_iter_values(first..first + n as i64);
    let batch =
        arrow_array::RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(emb)])
            .unwrap();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// Item 10: a vector index over files of different dimensions is poisoned with the reason
/// (by `build`, by a stepped build and by a registration that brings another dimension),
/// never `ready` while every `nearest` fails.
#[tokio::test]
async fn a_vector_index_over_mixed_dimensions_is_poisoned() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("a.parquet"), list_vectors(0, 50, 4)).unwrap();
    std::fs::write(data.join("b.parquet"), list_vectors(50, 50, 8)).unwrap();
    let vector = IndexOptions {
        kind: IndexKind::Vector,
        ..Default::default()
    };
    for (name, stepped) in [("one", false), ("steps", true)] {
        let o = open(&d.path().join(name)).await;
        o.register_parquet_table("v", &url(&data), FileSelection::Prefix(String::new()))
            .await
            .unwrap();
        o.create_index("v", "by_emb", &["emb".into()], vector.clone())
            .await
            .unwrap();
        let e = if stepped {
            o.build_index("v", "by_emb", StepOptions::default(), |_| {})
                .await
                .unwrap_err()
        } else {
            o.build("v", |_| {}).await.unwrap_err()
        };
        assert_eq!(e.code(), "E_INVALID", "{e}");
        let rec = o.index_record("v", "by_emb").await.unwrap();
        assert_eq!(rec.state, IndexState::Poisoned, "{name}");
        let reason = rec.reason.unwrap_or_default();
        assert!(
            reason.contains("different dimensions") && reason.contains("4 in a.parquet"),
            "{reason}"
        );
    }
    // One dimension: ready; a registration bringing another poisons it (and says so).
    let o = open(&d.path().join("registered")).await;
    o.register_parquet_table(
        "v",
        &url(&data),
        FileSelection::List(vec!["a.parquet".into()]),
    )
    .await
    .unwrap();
    o.create_index("v", "by_emb", &["emb".into()], vector)
        .await
        .unwrap();
    o.build("v", |_| {}).await.unwrap();
    assert_eq!(
        o.index_record("v", "by_emb").await.unwrap().state,
        IndexState::Ready
    );
    let r = o.register_files("v", &["b.parquet".into()]).await.unwrap();
    assert_eq!(r.poisoned, vec!["by_emb".to_string()]);
    assert_eq!(
        o.index_record("v", "by_emb").await.unwrap().state,
        IndexState::Poisoned
    );
}
