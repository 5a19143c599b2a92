//! Store faults (issue "Faults, soak and fuzzing"): the overlay's object store fails calls at
//! random — puts, torn multipart uploads, gets, HEADs, deletes, lists of bundles, staged
//! segments, manifests and `HEAD` — while a table is built, published, read and vacuumed.
//! Every call either completes or fails with a typed, retryable error; retrying converges to
//! what a fault-free overlay builds; nothing published is lost or wrong; no answer is wrong.

use std::sync::Arc;

mod support;

use object_store::ObjectStore;
use skerry_core::admin::lifecycle::VacuumOptions;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::error::Error;
use skerry_core::index::IndexKind;
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value;
use support::faults::{sweep, Call, FaultStore, Faulty};

const FILES: i64 = 8;
const ROWS: i64 = 1_500;

/// An overlay over `data` at `dir`, through `store`, with a unique ordered index on
/// `order_id`, an ordered one on `customer` and a bitmap on `day`.
async fn overlay(store: Arc<dyn ObjectStore>, data: &std::path::Path) -> Overlay {
    let o = Overlay::open_with_store(store, OpenOptions::default())
        .await
        .unwrap();
    register_and_index(&o, data).await;
    o
}

/// Registers `orders` from `data` and creates its three indexes, each step retried while it
/// fails typed and retryable (a step whose reply a fault lost is found done: `E_EXISTS`).
async fn register_and_index(o: &Overlay, data: &std::path::Path) {
    let location = format!("file://{}", data.display());
    until_ok("register", || {
        exists_ok(o.register_parquet_table(
            "orders",
            &location,
            FileSelection::Prefix(String::new()),
        ))
    })
    .await;
    for (name, col, unique, kind) in [
        ("by_id", "order_id", true, IndexKind::Ordered),
        ("by_customer", "customer", false, IndexKind::Ordered),
        ("by_day", "day", false, IndexKind::Bitmap),
    ] {
        let columns = [col.into()];
        until_ok("createIndex", || {
            exists_ok(o.create_index(
                "orders",
                name,
                &columns,
                IndexOptions {
                    unique,
                    kind,
                    ..Default::default()
                },
            ))
        })
        .await;
    }
}

/// `f`'s outcome with `E_EXISTS` as success: the retry of a step that had committed.
async fn exists_ok<T>(f: impl std::future::Future<Output = Result<T, Error>>) -> Result<(), Error> {
    match f.await {
        Err(Error::AlreadyExists { .. }) => Ok(()),
        r => r.map(|_| ()),
    }
}

/// `verify` certifies each of `indexes` of `orders`: no entry missing or mismatched.
async fn certified(o: &Overlay, indexes: &[&str]) {
    for ix in indexes {
        let v = o.verify("orders", ix).await.unwrap();
        assert_eq!(
            (v.missing, v.mismatched, v.certified),
            (0, 0, true),
            "{ix}: {v:?}"
        );
    }
}

/// A local store in `dir/name` (created).
fn local_store(dir: &std::path::Path, name: &str) -> Arc<dyn ObjectStore> {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    Arc::new(object_store::local::LocalFileSystem::new_with_prefix(p).unwrap())
}

/// Retries `f` until it succeeds: every failure must be typed and retryable. Returns the
/// result and how many attempts failed.
async fn until_ok<T, F, Fut>(what: &str, mut f: F) -> (T, u32)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut failed = 0;
    loop {
        match f().await {
            Ok(v) => return (v, failed),
            Err(e) => {
                assert!(
                    e.retryable(),
                    "{what}: a fault surfaced as a non-retryable {}: {e}",
                    e.code()
                );
                failed += 1;
                if std::env::var("TRACE").is_ok() {
                    println!("{what} attempt {failed}: {e}");
                }
                assert!(failed < 200, "{what} never converged: {e}");
            }
        }
    }
}

fn queries() -> Vec<Query> {
    let q = |c: Vec<Condition>| Query {
        conditions: c,
        ..Default::default()
    };
    vec![
        q(vec![Condition::new("order_id", Op::Eq(Value::Int(4_321)))]),
        q(vec![Condition::new(
            "customer",
            Op::Eq(Value::String("customer-00042".into())),
        )]),
        q(vec![Condition::new("day", Op::Eq(Value::Date(19_100)))]),
        q(vec![
            Condition::new(
                "day",
                Op::In(vec![Value::Date(19_001), Value::Date(19_300)]),
            ),
            Condition::new("order_id", Op::Lt(Value::Int(5_000))),
        ]),
    ]
}

/// Asks `f` `rounds` times: each answer must be `want`, each failure typed and retryable.
/// Returns (exact answers, failures).
async fn exact_or_typed<T, F, Fut>(rounds: usize, want: &T, mut f: F) -> (u32, u32)
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let (mut exact, mut failed) = (0, 0);
    for _ in 0..rounds {
        match f().await {
            Ok(got) => {
                assert_eq!(&got, want, "an answer under faults is wrong");
                exact += 1;
            }
            Err(e) => {
                assert!(e.retryable(), "{}: {e}", e.code());
                failed += 1;
            }
        }
    }
    (exact, failed)
}

/// Counts and row positions of every query.
async fn answers(o: &Overlay) -> Result<Vec<(u64, Vec<(String, u64)>)>, Error> {
    let mut out = Vec::new();
    for q in queries() {
        let c = o.count("orders", &q).await?;
        let r = o
            .query(
                "orders",
                &Query {
                    columns: Some(vec!["order_id".into()]),
                    ..q.clone()
                },
            )
            .await?;
        let mut rows: Vec<(String, u64)> = r
            .rows
            .iter()
            .map(|x| (x.file.clone(), x.position))
            .collect();
        rows.sort();
        out.push((c.count, rows));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_publish_read_and_vacuum_converge_under_store_faults() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    support::write_orders(&data, FILES, ROWS, 500);
    let local = |name: &str| local_store(d.path(), name);

    // The reference: the same table built and published without faults.
    let clean = overlay(local("clean"), &data).await;
    clean.build("orders", |_| {}).await.unwrap();
    clean.publish().await.unwrap();
    let want = answers(&clean).await.unwrap();
    assert!(want.iter().all(|(n, rows)| *n == rows.len() as u64));
    assert!(want[2].0 > 0 && want[3].0 > 0, "{want:?}");

    // The faulty overlay: its bundles, staged segments, manifests and HEAD fail at random
    // (the SlateDB catalog's own objects do not: its durability is SlateDB's).
    let faults = FaultStore::new(
        local("faulty"),
        &["bundles/", "staging/", "manifests/", "HEAD", "codebooks/"],
        &Call::ALL,
        0.0,
        0x5EED,
    );
    let o = overlay(Arc::new(Faulty(faults.clone())), &data).await;
    // 10%: a build writes a bundle per file and then the runs, so most attempts meet a
    // fault; before bundles were named per attempt, one left behind by a failed attempt made
    // every retry conflict (this test never converged).
    faults.set_rate(
        std::env::var("RATE")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0.1),
    );
    let (_, build_failures) = until_ok("build", || o.build("orders", |_| {})).await;
    let mut publish_failures = 0;
    for _ in 0..5 {
        publish_failures += until_ok("publish", || o.publish()).await.1;
    }
    println!(
        "build failed {build_failures}×, publish {publish_failures}×, {} faults injected",
        faults.total()
    );

    // Reads under faults: an answer is exact or a typed error, never wrong (a blob that
    // cannot be read is rejected and its file scanned). Nothing cached: every read goes to
    // the store (and most faults are absorbed by the reader's retries, decision 66).
    o.set_cache_bytes(0);
    let before_reads = faults.total();
    let (exact, failed) = exact_or_typed(20, &want, || answers(&o)).await;
    println!(
        "reads under faults: {exact} exact, {failed} failed typed; {} faults injected",
        faults.total()
    );
    assert!(exact > 0);
    assert!(faults.total() > before_reads, "no read met a fault");

    // Vacuum under faults converges and takes nothing a retained manifest references.
    let (_, vacuum_failures) = until_ok("vacuum", || o.vacuum(VacuumOptions::now(1))).await;
    println!("vacuum failed {vacuum_failures}×");

    // Faults off: the overlay is what the clean one is — indexes ready and certified by
    // verify, the same bundles' answers, from the writer and from a fresh reader of what
    // was published.
    faults.set_on(false);
    certified(&o, &["by_id", "by_customer", "by_day"]).await;
    assert_eq!(answers(&o).await.unwrap(), want);
    let reader = skerry_core::read::reader::OverlayReader::open(
        &format!("file://{}", d.path().join("faulty").display()),
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    for (q, (n, rows)) in queries().iter().zip(&want) {
        let c = reader.snapshot().count("orders", q).await.unwrap();
        assert_eq!(c.count, *n, "{q:?}");
        let r = reader
            .snapshot()
            .query(
                "orders",
                &Query {
                    columns: Some(vec![]),
                    ..q.clone()
                },
            )
            .await
            .unwrap();
        let mut got: Vec<(String, u64)> = r
            .rows
            .iter()
            .map(|x| (x.file.clone(), x.position))
            .collect();
        got.sort();
        assert_eq!(&got, rows, "{q:?}");
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats.rejections);
    }
    // Nothing half-written is referenced, nothing referenced is missing: a last vacuum
    // reclaims only unreferenced objects, and answers stay.
    o.publish().await.unwrap();
    o.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!(answers(&o).await.unwrap(), want);
    o.close().await.unwrap();
    clean.close().await.unwrap();
}

/// Writes `p<i>.parquet` of the sample orders (`ROWS` rows from id `first`) into `data`.
fn write_part(data: &std::path::Path, i: i64, first: i64) -> String {
    use skerry_core::admin::sample::{orders_parquet, SampleCodec};
    let name = format!("p{i:03}.parquet");
    let bytes = orders_parquet(first, ROWS as usize, 500, SampleCodec::Snappy).unwrap();
    std::fs::write(data.join(&name), bytes).unwrap();
    name
}

/// Every writer verb under store faults (issue "Faults, soak and fuzzing", the per-verb
/// matrix): `registerFiles`, `registerDeletes`, `refresh`, `build` (with RFC 0004's tier
/// steps: appended files become a run of their own), `planBuild` and `commitBuild` (a
/// fan-out's receipts committed while the overlay's store fails), `publish` and `vacuum` each
/// complete or fail typed and retryable, and retrying converges. Afterwards the overlay
/// answers exactly as the same history applied without faults, `verify` certifies every
/// index, and a fresh reader of what was published agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_writer_verb_converges_under_store_faults() {
    use skerry_core::admin::fanout::{BundleBuilder, PlanOptions};
    use skerry_core::admin::lifecycle::FileDeletes;
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    support::write_orders(&data, FILES, ROWS, 500);
    let local = |name: &str| local_store(d.path(), name);
    let clean = overlay(local("clean"), &data).await;
    let faults = FaultStore::new(
        local("faulty"),
        &[
            "bundles/",
            "staging/",
            "manifests/",
            "HEAD",
            "codebooks/",
            "keys/",
        ],
        &Call::ALL,
        0.0,
        0xFA17,
    );
    let o = overlay(Arc::new(Faulty(faults.clone())), &data).await;
    let mut failures: Vec<(&str, (u32, u64))> = Vec::new();

    // build: every file indexed, a run per index.
    clean.build("orders", |_| {}).await.unwrap();
    failures.push((
        "build",
        sweep("build", &faults, || o.build("orders", |_| {}))
            .await
            .1,
    ));

    // registerFiles + build: four appended files, a second run per index.
    let added: Vec<String> = (FILES..FILES + 4)
        .map(|i| write_part(&data, i, i * ROWS))
        .collect();
    clean.register_files("orders", &added).await.unwrap();
    clean.build("orders", |_| {}).await.unwrap();
    failures.push((
        "registerFiles",
        sweep("registerFiles", &faults, || {
            o.register_files("orders", &added)
        })
        .await
        .1,
    ));
    failures.push((
        "build",
        sweep("build", &faults, || o.build("orders", |_| {}))
            .await
            .1,
    ));

    // registerDeletes.
    let deletes = vec![FileDeletes {
        file: "p002.parquet".into(),
        positions: (0..ROWS as u64).filter(|p| p % 7 == 3).collect(),
    }];
    clean.register_deletes("orders", &deletes).await.unwrap();
    failures.push((
        "registerDeletes",
        sweep("registerDeletes", &faults, || {
            o.register_deletes("orders", &deletes)
        })
        .await
        .1,
    ));

    // refresh after a rewrite, then build.
    write_part(&data, 5, 700_000);
    clean.refresh("orders").await.unwrap();
    clean.build("orders", |_| {}).await.unwrap();
    failures.push((
        "refresh",
        sweep("refresh", &faults, || o.refresh("orders")).await.1,
    ));
    failures.push((
        "build",
        sweep("build", &faults, || o.build("orders", |_| {}))
            .await
            .1,
    ));

    // planBuild + workers + commitBuild: a new index on `amount`, its files built by workers
    // (their own store, no faults) and committed through the faulty one.
    let by_amount = IndexOptions::default();
    for ov in [&clean, &o] {
        ov.create_index("orders", "by_amount", &["amount".into()], by_amount.clone())
            .await
            .unwrap();
    }
    clean.build("orders", |_| {}).await.unwrap();
    let plan = PlanOptions::default();
    let (tasks, f) = sweep("planBuild", &faults, || o.plan_build("orders", &plan)).await;
    failures.push(("planBuild", f));
    let url = format!("file://{}", d.path().join("faulty").display());
    let mut receipts = Vec::new();
    for task in &tasks {
        let b = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
        receipts.push(b.build_bundle(task).await.unwrap());
    }
    let (report, f) = sweep("commitBuild", &faults, || o.commit_build(&receipts)).await;
    failures.push(("commitBuild", f));
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(report.committed.len(), tasks.len(), "{report:?}");
    assert!(tasks.len() as i64 > FILES, "{} tasks", tasks.len());

    // publish and vacuum.
    clean.publish().await.unwrap();
    failures.push(("publish", sweep("publish", &faults, || o.publish()).await.1));
    failures.push((
        "vacuum",
        sweep("vacuum", &faults, || o.vacuum(VacuumOptions::now(1)))
            .await
            .1,
    ));
    println!(
        "failed attempts per verb: {failures:?}; {} faults injected",
        faults.total()
    );
    // Every verb that calls the overlay's objects met a fault at each of its calls and
    // converged: a read's fault is retried inside the reader (`READ_ATTEMPTS`), a write's
    // reaches the caller. `registerDeletes` and `refresh` write only the catalog (SlateDB,
    // whose durability is its own) and read only data files: they make no call to fault.
    for (verb, (failed, injected)) in &failures {
        match *verb {
            "registerDeletes" | "refresh" => assert_eq!(*injected, 0, "{verb}: {failures:?}"),
            "publish" | "commitBuild" | "registerFiles" => {
                assert!(*failed > 0, "{verb}'s writes met no fault: {failures:?}")
            }
            _ => assert!(*injected > 0, "{verb} met no fault: {failures:?}"),
        }
    }

    // Faults off: the same answers as the clean history, every index certified, the same
    // from a fresh reader of what was published.
    faults.set_on(false);
    let want = answers(&clean).await.unwrap();
    assert_eq!(answers(&o).await.unwrap(), want);
    for ix in ["by_id", "by_customer", "by_day", "by_amount"] {
        let v = o.verify("orders", ix).await.unwrap();
        assert_eq!(
            (v.missing, v.mismatched, v.certified),
            (0, 0, true),
            "{ix}: {v:?}"
        );
        assert_eq!(
            o.index_record("orders", ix).await.unwrap().state,
            clean.index_record("orders", ix).await.unwrap().state,
            "{ix}"
        );
    }
    o.publish().await.unwrap();
    let reader = skerry_core::read::reader::OverlayReader::open(
        &url,
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    for (q, (n, _)) in queries().iter().zip(&want) {
        let c = reader.snapshot().count("orders", q).await.unwrap();
        assert_eq!(c.count, *n, "{q:?}");
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats.rejections);
    }
    o.close().await.unwrap();
    clean.close().await.unwrap();
}

/// Every read verb under store faults, natively (the wasm reader's are in
/// `tests/read-faults.test.mjs`): over pyarrow files with text and vectors indexed by every
/// kind that has a table run, `lookup`, `range`, `query`, `count`, `search` and `nearest`
/// answer exactly what the same overlay answers without faults, or fail typed and retryable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_verb_is_exact_or_typed_under_store_faults() {
    use skerry_core::index::vector::MetricName;
    use skerry_core::read::nearest::Nearest;
    use skerry_core::read::search::Search;
    use skerry_core::values::ValueBound;
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    let status = std::process::Command::new("python3")
        .args(["../tests/vector/make_vectors.py"])
        .arg(&data)
        .args(["8", "300", "8", "31"])
        .status()
        .unwrap();
    assert!(status.success());
    let root = d.path().join("overlay");
    std::fs::create_dir_all(&root).unwrap();
    let local: Arc<dyn ObjectStore> =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&root).unwrap());
    let faults = FaultStore::new(
        local,
        &["bundles/", "manifests/", "HEAD", "codebooks/"],
        &[Call::Get, Call::Head, Call::List],
        0.0,
        0x4EAD,
    );
    let o = Overlay::open_with_store(Arc::new(Faulty(faults.clone())), OpenOptions::default())
        .await
        .unwrap();
    o.register_parquet_table(
        "t",
        &format!("file://{}", data.display()),
        FileSelection::Prefix(String::new()),
    )
    .await
    .unwrap();
    for (name, col, kind) in [
        ("by_id", "id", IndexKind::Ordered),
        ("by_cat", "cat", IndexKind::Bitmap),
        ("body_text", "body", IndexKind::Fulltext),
        ("emb_l2", "emb", IndexKind::Vector),
    ] {
        let opts = IndexOptions {
            kind,
            metric: (kind == IndexKind::Vector).then_some(MetricName::L2),
            ..Default::default()
        };
        o.create_index("t", name, &[col.into()], opts)
            .await
            .unwrap();
    }
    o.build("t", |_| {}).await.unwrap();
    o.publish().await.unwrap();
    // Every verb, shaped for comparison.
    type Shape = Vec<String>;
    async fn all(o: &Overlay) -> Result<Vec<Shape>, Error> {
        let refs = |rows: &[skerry_core::read::lookup::RowRef]| -> Shape {
            rows.iter()
                .map(|r| format!("{}:{}", r.file, r.position))
                .collect()
        };
        let mut out = Vec::new();
        out.push(refs(
            &o.lookup("t", "by_id", &[Value::Int(200_017)]).await?.rows,
        ));
        let lo = ValueBound::Included(vec![Value::Int(300_010)]);
        let hi = ValueBound::Excluded(vec![Value::Int(300_090)]);
        out.push(refs(&o.range("t", "by_id", lo, hi, false).await?.rows));
        let q = Query {
            conditions: vec![Condition::new("cat", Op::Eq(Value::Int(3)))],
            columns: Some(vec!["id".into()]),
            ..Default::default()
        };
        out.push(refs(&o.query("t", &q).await?.rows));
        out.push(vec![o.count("t", &q).await?.count.to_string()]);
        let s = Search {
            query: "harbor stone".into(),
            k: 10,
            columns: Some(vec![]),
            ..Default::default()
        };
        let r = o.search("t", &s).await?;
        let mut shape = refs(&r.rows);
        shape.extend(r.scores.iter().map(|x| x.to_bits().to_string()));
        out.push(shape);
        let n = Nearest {
            vector: vec![0.5, -1.0, 2.0, 0.0, 1.5, -0.5, 3.0, 1.0],
            k: 10,
            columns: Some(vec!["id".into()]),
            ..Default::default()
        };
        let r = o.nearest("t", &n).await?;
        let mut shape = refs(&r.rows);
        shape.extend(r.distances.iter().map(|x| x.to_bits().to_string()));
        out.push(shape);
        Ok(out)
    }
    let want = all(&o).await.unwrap();
    assert!(want.iter().all(|s| !s.is_empty()), "{want:?}");
    // Nothing cached: every read goes to the store.
    o.set_cache_bytes(0);
    faults.set_rate(0.15);
    let (exact, failed) = exact_or_typed(15, &want, || all(&o)).await;
    println!(
        "reads under faults: {exact} exact, {failed} failed typed; {} faults injected",
        faults.total()
    );
    assert!(exact > 0 && faults.total() > 0);
    o.close().await.unwrap();
}

/// The catalog's own objects under faults (issue "Faults, soak and fuzzing"): SlateDB's
/// manifests, WAL and SSTs under `catalog/` fail at random — a quarter of every kind of call
/// — while the overlay is opened, a table registered and indexed, built, appended to,
/// deleted from, published and vacuumed. Every verb completes or fails typed and retryable (SlateDB's own
/// retry layer absorbs most: a fault it gives up on reaches the caller as a retryable
/// error); nothing is lost: afterwards the overlay answers exactly as the same history
/// without faults and `verify` certifies every index, also after the catalog is reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_objects_under_store_faults() {
    use skerry_core::admin::lifecycle::FileDeletes;
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    support::write_orders(&data, FILES, ROWS, 500);
    let local = |name: &str| local_store(d.path(), name);
    let clean = overlay(local("clean"), &data).await;
    let faults = FaultStore::new(local("faulty"), &["catalog/"], &Call::ALL, 0.25, 0xCA7A);
    let store: Arc<dyn ObjectStore> = Arc::new(Faulty(faults.clone()));
    // Opening (SlateDB's manifest, WAL replay) and the set-up verbs meet faults too.
    let (o, _) = until_ok("open", || {
        Overlay::open_with_store(store.clone(), OpenOptions::default())
    })
    .await;
    register_and_index(&o, &data).await;
    let mut failed = 0;
    clean.build("orders", |_| {}).await.unwrap();
    failed += until_ok("build", || o.build("orders", |_| {})).await.1;
    let added: Vec<String> = (FILES..FILES + 4)
        .map(|i| write_part(&data, i, i * ROWS))
        .collect();
    clean.register_files("orders", &added).await.unwrap();
    failed += until_ok("registerFiles", || {
        exists_ok(o.register_files("orders", &added))
    })
    .await
    .1;
    let deletes = vec![FileDeletes {
        file: "p003.parquet".into(),
        positions: (0..ROWS as u64).filter(|p| p % 5 == 1).collect(),
    }];
    clean.register_deletes("orders", &deletes).await.unwrap();
    failed += until_ok("registerDeletes", || o.register_deletes("orders", &deletes))
        .await
        .1;
    clean.build("orders", |_| {}).await.unwrap();
    failed += until_ok("build", || o.build("orders", |_| {})).await.1;
    clean.publish().await.unwrap();
    failed += until_ok("publish", || o.publish()).await.1;
    failed += until_ok("vacuum", || o.vacuum(VacuumOptions::now(1)))
        .await
        .1;
    let injected = faults.total();
    println!("catalog faults: {injected} injected, {failed} reached a verb");
    assert!(injected > 0, "no catalog call met a fault");

    let want = answers(&clean).await.unwrap();
    faults.set_on(false);
    assert_eq!(answers(&o).await.unwrap(), want);
    certified(&o, &["by_id", "by_customer", "by_day"]).await;
    // Nothing committed was lost: the catalog reopened (WAL replayed, faults on again) holds
    // the same table and answers the same.
    o.close().await.unwrap();
    faults.set_on(true);
    let (o, _) = until_ok("reopen", || {
        Overlay::open_with_store(store.clone(), OpenOptions::default())
    })
    .await;
    faults.set_on(false);
    assert_eq!(answers(&o).await.unwrap(), want);
    o.close().await.unwrap();
    clean.close().await.unwrap();
}

/// The soak's switch: `OpenOptions::faults` (the addon's `SKERRY_FAULTS`) wraps the store an
/// overlay opens by URL — here every put under `manifests/` fails, so a publish fails typed
/// and retryable while the build (bundles, catalog) goes through; the same overlay reopened
/// without the plan publishes. A slow store (`delay`) meets a reader's deadline as a
/// retryable `E_TIMEOUT`. A malformed plan is `E_INVALID`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_plan_wraps_the_store_an_overlay_opens() {
    use skerry_core::io::faults::FaultPlan;
    let d = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.path().join("overlay").display());
    let data = d.path().join("data");
    support::write_orders(&data, 2, 300, 100);
    let plan =
        FaultPlan::parse("rate=1, seed=3, calls=put+multipart, prefixes=manifests/").unwrap();
    let o = Overlay::open(
        &url,
        OpenOptions {
            faults: Some(plan),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    register_and_index(&o, &data).await;
    o.build("orders", |_| {}).await.unwrap();
    let before = skerry_core::io::faults::injected_total();
    let e = o.publish().await.unwrap_err();
    assert!(e.retryable(), "{}: {e}", e.code());
    assert_eq!(e.code(), "E_IO", "{e}");
    assert!(skerry_core::io::faults::injected_total() > before);
    o.close().await.unwrap();
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let v = o.publish().await.unwrap().version;
    let r = skerry_core::read::reader::OverlayReader::open(&url, Default::default())
        .await
        .unwrap();
    assert_eq!(r.version(), v);
    o.close().await.unwrap();
    // A slow store: `HEAD` (carrying the manifest, decision 72) answers after 0–300 ms, the
    // reader waits 150 ms. An open is `E_TIMEOUT` (retryable) or succeeds; retrying converges.
    // (A retry is a new open, so a new store: each attempt its own seed. Attempts go on until
    // both outcomes were seen: one seed alone may be fast.)
    let (mut timeouts, mut reader) = (0, None);
    for seed in 0..200 {
        let slow =
            FaultPlan::parse(&format!("rate=0,seed={seed},delay=300,prefixes=manifests/")).unwrap();
        match skerry_core::read::reader::OverlayReader::open(
            &url,
            OpenOptions {
                timeout: Some(std::time::Duration::from_millis(150)),
                faults: Some(slow),
                ..Default::default()
            },
        )
        .await
        {
            Ok(r) => {
                reader.get_or_insert(r);
            }
            Err(e) => {
                assert_eq!((e.code(), e.retryable()), ("E_TIMEOUT", true), "{e}");
                timeouts += 1;
            }
        }
        if timeouts > 0 && reader.is_some() {
            break;
        }
    }
    let reader = reader.expect("never opened");
    assert_eq!(reader.version(), v);
    assert!(timeouts > 0, "no call was slower than the deadline");
    for bad in [
        "",
        "seed=1",
        "rate=2",
        "rate=0.1,calls=put+fly",
        "rate=0.1,when=now",
        "rate",
    ] {
        let e = FaultPlan::parse(bad).unwrap_err();
        assert_eq!(e.code(), "E_INVALID", "{bad:?}: {e}");
    }
}

/// The soak's finding (decision 66): a build that forms table runs reads every file's blobs
/// and the runs it merges — here 48 files' worth — and with 5% of those reads failing, a
/// build that fails whenever one read does almost never completes (0.95^reads). Reads are
/// retried inside the reader, so the build completes at its first attempt, and every index
/// verifies clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_reading_many_objects_completes_under_a_steady_read_fault_rate() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    support::write_orders(&data, 48, 200, 100);
    let faults = FaultStore::new(
        local_store(d.path(), "overlay"),
        &["bundles/"],
        &[Call::Get, Call::Head],
        0.0,
        0xB111D,
    );
    let o = overlay(Arc::new(Faulty(faults.clone())), &data).await;
    o.build("orders", |_| {}).await.unwrap();
    // Four more files: a second run; eight more: the runs merge, reading the first one whole.
    for (i, range) in [(0, 48..52), (1, 52..60)] {
        let added: Vec<String> = range.map(|f| write_part(&data, f, f * ROWS)).collect();
        o.register_files("orders", &added).await.unwrap();
        faults.set_rate(0.05);
        let before = faults.total();
        let (_, failed) = until_ok("build", || o.build("orders", |_| {})).await;
        faults.set_rate(0.0);
        println!(
            "build {i}: {} faults injected, {failed} failed attempts",
            faults.total() - before
        );
        assert!(faults.total() > before, "build {i} met no fault");
        assert_eq!(failed, 0, "build {i} failed on a read fault");
    }
    certified(&o, &["by_id", "by_customer", "by_day"]).await;
    o.close().await.unwrap();
}
