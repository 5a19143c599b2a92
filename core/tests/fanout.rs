//! Builds beyond one machine (`core/src/admin/fanout.rs`): plan → build bundles anywhere
//! (separate `BundleBuilder` handles, no catalog) → one commit equals a local `build()`;
//! retries are idempotent; stale, forged and duplicated receipts are refused.

use std::path::Path;

mod support;

use skerry_core::admin::fanout::{
    BuildReceipt, BuildTask, BundleBuilder, Outcome, PlanOptions, TASK_FORMAT,
};
use skerry_core::admin::overlay::{OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};
use skerry_core::formats::manifest::IndexState;
use skerry_core::values::Value;

const FILES: i64 = 6;
const ROWS: i64 = 2_000;

fn write_data(dir: &Path) {
    support::write_orders(dir, FILES, ROWS, 500);
}

/// An overlay at `dir/name` over the data in `data`, with a unique index on `order_id` and
/// one on `customer`, nothing built.
async fn overlay(dir: &Path, name: &str, data: &Path) -> (String, Overlay) {
    let indexes = [
        ("by_id", "order_id", true),
        ("by_customer", "customer", false),
    ];
    support::orders_indexed(&dir.join(name), data, &indexes).await
}

/// The sample data under `d/data`, built locally in `d/local`, and an unbuilt overlay over it
/// in `d/fanout` (its URL and it).
async fn local_and_fanout(d: &Path) -> (Overlay, String, Overlay) {
    let data = d.join("data");
    write_data(&data);
    let (_, local) = overlay(d, "local", &data).await;
    local.build("orders", |_| {}).await.unwrap();
    let (url, o) = overlay(d, "fanout", &data).await;
    (local, url, o)
}

/// Both indexes are ready, and `verify` finds every entry and certifies them.
async fn ready_and_exact(o: &Overlay) {
    for ix in ["by_id", "by_customer"] {
        assert_eq!(
            o.index_record("orders", ix).await.unwrap().state,
            IndexState::Ready
        );
        let v = o.verify("orders", ix).await.unwrap();
        assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true), "{ix}");
    }
}

/// Builds every task on its own builder handle (as separate workers would), in parallel.
async fn build_all(url: &str, tasks: &[BuildTask]) -> Vec<BuildReceipt> {
    on_workers(url, tasks, |b, t| async move {
        b.build_bundle(&t).await.unwrap()
    })
    .await
}

/// Runs `work` for every task on a builder handle of its own, in parallel, each task and
/// receipt through JSON (as they travel between processes).
async fn on_workers<T, R, F, Fut>(url: &str, tasks: &[T], work: F) -> Vec<R>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    R: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    F: Fn(BundleBuilder, T) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = R> + Send,
{
    let mut handles = Vec::new();
    for task in tasks {
        let wire = serde_json::to_string(task).unwrap();
        let url = url.to_string();
        handles.push(tokio::spawn(async move {
            let task: T = serde_json::from_str(&wire).unwrap();
            let b = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
            let r = work(b, task).await;
            serde_json::from_str::<R>(&serde_json::to_string(&r).unwrap()).unwrap()
        }));
    }
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

async fn answers(o: &Overlay) -> Vec<(String, Vec<(String, u64)>)> {
    let mut out = Vec::new();
    for (ix, key) in [
        ("by_id", Value::Int(0)),
        ("by_id", Value::Int(4_321)),
        ("by_id", Value::Int(FILES * ROWS - 1)),
        ("by_id", Value::Int(FILES * ROWS)),
        ("by_customer", Value::String("customer-00042".into())),
        ("by_customer", Value::String("customer-04999".into())),
        ("by_customer", Value::String("nobody".into())),
    ] {
        let r = o.lookup("orders", ix, &[key.clone()]).await.unwrap();
        assert_eq!(
            r.stats.files_scanned, 0,
            "{ix} {key:?} answered by the index"
        );
        let mut rows: Vec<(String, u64)> =
            r.rows.into_iter().map(|r| (r.file, r.position)).collect();
        rows.sort();
        out.push((format!("{ix} {key:?}"), rows));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_build_commit_equals_a_local_build() {
    let d = tempfile::tempdir().unwrap();
    let (local, url, o) = local_and_fanout(d.path()).await;

    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    assert_eq!(tasks.len(), FILES as usize, "one task per file");
    assert!(tasks
        .iter()
        .all(|t| t.indexes.len() == 2 && t.format == TASK_FORMAT));
    // Planning wrote nothing.
    assert!(!d.path().join("fanout/bundles").exists());

    let receipts = build_all(&url, &tasks).await;
    assert!(receipts
        .iter()
        .all(|r| matches!(r.outcome, Outcome::Built { .. })));
    // Nothing is visible before the commit.
    assert_eq!(
        o.index_record("orders", "by_id").await.unwrap().state,
        IndexState::Building
    );
    let report = o.commit_build(&receipts).await.unwrap();
    assert_eq!(report.committed.len(), FILES as usize, "{report:?}");
    assert!(
        report.refused.is_empty() && report.left.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.entries, 2 * (FILES * ROWS) as u64);
    ready_and_exact(&o).await;
    // Byte-identical bundles, the same answers.
    let a = local.bundles("orders").await.unwrap();
    let b = o.bundles("orders").await.unwrap();
    assert_eq!(a.len(), FILES as usize);
    assert_eq!(
        a.iter().map(|(f, b)| (f, b)).collect::<Vec<_>>(),
        b.iter().map(|(f, b)| (f, b)).collect::<Vec<_>>(),
        "bundles built elsewhere are the local build's bytes"
    );
    assert!(b.iter().all(|(_, bytes)| !bytes.is_empty()));
    let (x, y) = (answers(&local).await, answers(&o).await);
    assert_eq!(x, y);
    assert_eq!(x[1].1.len(), 1, "order 4321 found");
    assert!(
        x[4].1.len() > 1,
        "a repeated customer found in several rows"
    );
    // Nothing left to plan.
    assert!(o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_idempotent_and_each_file_commits_once() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    write_data(&data);
    let (url, o) = overlay(d.path(), "o", &data).await;
    let tasks = o
        .plan_build(
            "orders",
            &PlanOptions {
                index: Some("by_customer".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(tasks
        .iter()
        .all(|t| t.indexes.len() == 1 && t.indexes[0].name == "by_customer"));
    // A task built twice (a worker died after writing, the job ran again): same receipt.
    let first = build_all(&url, &tasks).await;
    let again = build_all(&url, &tasks).await;
    assert_eq!(first, again);
    // Both copies handed in: each file commits once.
    let all: Vec<BuildReceipt> = first.iter().chain(&again).cloned().collect();
    let report = o.commit_build(&all).await.unwrap();
    assert_eq!(report.committed.len(), FILES as usize);
    assert_eq!(report.refused.len(), FILES as usize, "{report:?}");
    assert_eq!(
        o.index_record("orders", "by_customer").await.unwrap().state,
        IndexState::Ready
    );
    // Handed in again later (a retry of a commit that failed after its transaction): the
    // same files reported committed, nothing written again.
    let before = o.index_record("orders", "by_customer").await.unwrap();
    let report = o.commit_build(&first).await.unwrap();
    assert_eq!(report.committed.len(), FILES as usize, "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(report.transactions, 0, "{report:?}");
    assert_eq!(
        o.index_record("orders", "by_customer").await.unwrap(),
        before
    );

    // The unique index is still unbuilt; its plan carries the customer blobs.
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    assert!(tasks
        .iter()
        .all(|t| t.indexes.len() == 1 && t.carry.len() == 1 && t.bundle_generation == 2));
    let report = o
        .commit_build(&build_all(&url, &tasks).await)
        .await
        .unwrap();
    assert_eq!(report.committed.len(), FILES as usize);
    ready_and_exact(&o).await;
    answers(&o).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_and_forged_receipts_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    write_data(&data);
    let (url, o) = overlay(d.path(), "o", &data).await;
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    let mut receipts = build_all(&url, &tasks).await;
    let path_of = |r: &BuildReceipt| r.task.file.path.clone();

    // p000 is rewritten (other orders) and refreshed between build and commit.
    std::fs::write(
        data.join("p000.parquet"),
        orders_parquet(100_000, ROWS as usize, 500, SampleCodec::Snappy).unwrap(),
    )
    .unwrap();
    let refreshed = o.refresh("orders").await.unwrap();
    assert_eq!(refreshed.changed, vec!["p000.parquet".to_string()]);
    // p001's receipt claims other bytes; p002's object is gone; p003's points elsewhere.
    let by_file = |rs: &mut Vec<BuildReceipt>, f: &str| -> usize {
        rs.iter().position(|r| r.task.file.path == f).unwrap()
    };
    let i = by_file(&mut receipts, "p001.parquet");
    if let Outcome::Built { sha256, .. } = &mut receipts[i].outcome {
        *sha256 = "00".repeat(32);
    }
    let i = by_file(&mut receipts, "p002.parquet");
    if let Outcome::Built { bundle, .. } = &receipts[i].outcome {
        std::fs::remove_file(d.path().join("o").join(&bundle.path)).unwrap();
    }
    let i = by_file(&mut receipts, "p003.parquet");
    if let Outcome::Built { bundle, .. } = &mut receipts[i].outcome {
        bundle.path = "../../elsewhere.puffin".into();
    }
    let report = o.commit_build(&receipts).await.unwrap();
    let reason = |f: &str| {
        report
            .refused
            .iter()
            .find(|r| r.file == f)
            .map(|r| r.reason.clone())
            .unwrap_or_default()
    };
    assert!(
        reason("p000.parquet").contains("file changed"),
        "{report:?}"
    );
    assert!(
        reason("p001.parquet").contains("does not hold"),
        "{report:?}"
    );
    assert!(
        reason("p002.parquet").contains("does not exist"),
        "{report:?}"
    );
    assert!(
        reason("p003.parquet").contains("does not match"),
        "{report:?}"
    );
    assert_eq!(report.refused.len(), 4);
    let mut committed = report.committed.clone();
    committed.sort();
    assert_eq!(
        committed,
        vec!["p004.parquet".to_string(), "p005.parquet".to_string()]
    );
    assert!(receipts
        .iter()
        .all(|r| path_of(r) != "p000.parquet" || !committed.contains(&path_of(r))));
    // Not complete: still building, and nothing it answers is wrong.
    assert_eq!(
        o.index_record("orders", "by_customer").await.unwrap().state,
        IndexState::Building
    );
    // A task of another format is refused outright.
    let mut t = tasks[0].clone();
    t.format = TASK_FORMAT + 1;
    let b = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
    let e = b.build_bundle(&t).await.unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
    // A plan token that would lead the bundle's name out of its folder.
    let mut t = tasks[0].clone();
    t.plan = Some("../../x".into());
    let e = b.build_bundle(&t).await.unwrap_err();
    assert_eq!(e.code(), "E_INVALID", "{e}");
    assert!(!d.path().join("x.puffin").exists());
    // A new plan covers what is left; then the index is exact (p000's new content too).
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    assert_eq!(tasks.len(), 4);
    let report = o
        .commit_build(&build_all(&url, &tasks).await)
        .await
        .unwrap();
    assert_eq!(report.committed.len(), 4, "{report:?}");
    ready_and_exact(&o).await;
    let r = o
        .lookup("orders", "by_id", &[Value::Int(100_005)])
        .await
        .unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(
        (r.rows[0].file.as_str(), r.rows[0].position),
        ("p000.parquet", 5)
    );
    assert!(o
        .lookup("orders", "by_id", &[Value::Int(5)])
        .await
        .unwrap()
        .rows
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_across_receipts_poison_the_unique_index_at_commit() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    write_data(&data);
    // p005 repeats p004's first orders.
    std::fs::write(
        data.join("p005.parquet"),
        orders_parquet(4 * ROWS, ROWS as usize, 500, SampleCodec::Snappy).unwrap(),
    )
    .unwrap();
    let (url, o) = overlay(d.path(), "o", &data).await;
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    let receipts = build_all(&url, &tasks).await;
    let e = o.commit_build(&receipts).await.unwrap_err();
    assert_eq!(e.code(), "E_CONSTRAINT", "{e}");
    assert!(
        e.to_string().contains("p004.parquet") && e.to_string().contains("p005.parquet"),
        "{e}"
    );
    assert_eq!(
        o.index_record("orders", "by_id").await.unwrap().state,
        IndexState::Poisoned
    );
    // The other index committed and is exact.
    assert_eq!(
        o.index_record("orders", "by_customer").await.unwrap().state,
        IndexState::Ready
    );
    let v = o.verify("orders", "by_customer").await.unwrap();
    assert_eq!((v.missing, v.mismatched), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_past_one_pass_are_built_one_index_at_a_time_to_the_same_bytes() {
    let d = tempfile::tempdir().unwrap();
    let (local, url, o) = local_and_fanout(d.path()).await;
    // 2,000 rows × 2 indexes = 4,000 entries per file, past a pass of 3,000.
    let tasks = o
        .plan_build(
            "orders",
            &PlanOptions {
                pass_entries: Some(3_000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tasks.len(), FILES as usize);
    assert!(tasks.iter().all(|t| t.pass_entries == 3_000));
    let receipts = build_all(&url, &tasks).await;
    assert!(receipts.iter().all(
        |r| matches!(r.outcome, Outcome::Built { entries, .. } if entries == 2 * ROWS as u64)
    ));
    let report = o.commit_build(&receipts).await.unwrap();
    assert_eq!(report.committed.len(), FILES as usize, "{report:?}");
    assert_eq!(
        local.bundles("orders").await.unwrap(),
        o.bundles("orders").await.unwrap(),
        "one index at a time writes the one-pass bytes"
    );
    assert_eq!(answers(&local).await, answers(&o).await);
    let e = o
        .plan_build(
            "orders",
            &PlanOptions {
                pass_entries: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID");
}

/// Issue 38: index work a registration deferred (more entries than one commit holds) is
/// pending coverage that `plan_build` hands to workers: their receipts commit, the
/// `maintaining` indexes flip to ready and answer like a local build, from the index.
#[tokio::test]
async fn fanout_workers_catch_up_a_deferred_registration() {
    let d = tempfile::tempdir().unwrap();
    let (local, url, o) = local_and_fanout(d.path()).await;
    o.build("orders", |_| {}).await.unwrap();
    // 520,000 rows × 2 indexes: past the 1,000,000 entries one commit may index.
    let big = FILES * ROWS;
    std::fs::write(
        d.path().join("data/p999.parquet"),
        orders_parquet(big, 520_000, 65_536, SampleCodec::Snappy).unwrap(),
    )
    .unwrap();
    let files = vec!["p999.parquet".to_string()];
    let r = o.register_files("orders", &files).await.unwrap();
    assert_eq!(
        r.pending,
        vec!["by_id".to_string(), "by_customer".to_string()]
    );
    assert_eq!(
        o.index_record("orders", "by_id").await.unwrap().state,
        IndexState::Maintaining
    );
    local.register_files("orders", &files).await.unwrap();
    local.build("orders", |_| {}).await.unwrap();

    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    assert!(!tasks.is_empty());
    assert!(
        tasks.iter().all(|t| t.file.path == "p999.parquet"),
        "only the pending file is planned"
    );
    let report = o
        .commit_build(&build_all(&url, &tasks).await)
        .await
        .unwrap();
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    ready_and_exact(&o).await;
    let key = Value::Int(big + 123_456);
    for ov in [&o, &local] {
        let r = ov.lookup("orders", "by_id", &[key.clone()]).await.unwrap();
        assert_eq!((r.rows.len(), r.stats.files_scanned), (1, 0));
    }
}

/// A vacuum between the workers' bundles and the commit (a cron job, a background sync)
/// keeps them: unreferenced objects younger than the grace period (default 1 hour) are
/// counted as `young`, not deleted, and the commit then succeeds with every receipt. With no
/// grace period the same vacuum takes the bundles and the receipts are refused (nothing
/// wrong is committed) — what the grace period is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacuum_during_fan_out_keeps_the_workers_bundles() {
    use skerry_core::admin::lifecycle::VacuumOptions;
    let d = tempfile::tempdir().unwrap();
    let (local, url, o) = local_and_fanout(d.path()).await;
    o.publish().await.unwrap();
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    let receipts = build_all(&url, &tasks).await;
    let v = o.vacuum(VacuumOptions::default()).await.unwrap();
    assert_eq!(v.artifacts, 0, "{v:?}");
    assert_eq!(v.young, FILES as u64, "one bundle per file kept: {v:?}");
    assert!(v.young_bytes > 0);
    let report = o.commit_build(&receipts).await.unwrap();
    assert_eq!(report.committed.len(), FILES as usize, "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    ready_and_exact(&o).await;
    assert_eq!(answers(&local).await, answers(&o).await);
    // Committed, the bundles are referenced: a vacuum with no grace keeps them.
    o.publish().await.unwrap();
    let v = o.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!((v.artifacts, v.young), (0, 0), "{v:?}");
    ready_and_exact(&o).await;

    // Without the grace period the bundles of a build still in flight are taken, and the
    // commit refuses their receipts rather than committing what is gone.
    let (url2, o2) = overlay(d.path(), "fanout2", &d.path().join("data")).await;
    let tasks = o2
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    let receipts = build_all(&url2, &tasks).await;
    let v = o2.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!(v.artifacts, FILES as u64, "{v:?}");
    let report = o2.commit_build(&receipts).await;
    match report {
        Ok(r) => assert!(r.committed.is_empty(), "{r:?}"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    assert_ne!(
        o2.index_record("orders", "by_id").await.unwrap().state,
        IndexState::Ready
    );
}

/// Vacuum while four workers build (issue "Faults, soak and fuzzing"): four worker tasks
/// build the plan's files concurrently while vacuums with the default grace period run
/// beside them, again and again; every receipt then commits, and the index answers as a
/// local build's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vacuums_during_a_four_worker_fan_out_take_nothing_in_flight() {
    use skerry_core::admin::lifecycle::VacuumOptions;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let (local, url, o) = local_and_fanout(d.path()).await;
    o.publish().await.unwrap();
    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    assert!(tasks.len() >= 4, "{} tasks", tasks.len());
    let o = Arc::new(o);
    let building = Arc::new(AtomicBool::new(true));
    // Vacuums, one after another, for as long as the workers build.
    let vacuums = {
        let (o, building) = (o.clone(), building.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            let mut young = 0u64;
            while building.load(Ordering::SeqCst) || n == 0 {
                let v = o.vacuum(VacuumOptions::default()).await.unwrap();
                young = young.max(v.young);
                n += 1;
                tokio::task::yield_now().await;
            }
            (n, young)
        })
    };
    // Four workers, each taking every fourth task.
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let mine: Vec<BuildTask> = tasks.iter().skip(w).step_by(4).cloned().collect();
            let url = url.clone();
            tokio::spawn(async move {
                let b = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
                let mut out = Vec::new();
                for t in &mine {
                    out.push(b.build_bundle(t).await.unwrap());
                    tokio::task::yield_now().await;
                }
                out
            })
        })
        .collect();
    let mut receipts = Vec::new();
    for w in workers {
        receipts.extend(w.await.unwrap());
    }
    building.store(false, Ordering::SeqCst);
    let (vacuumed, young) = vacuums.await.unwrap();
    println!("{vacuumed} vacuums during the build, up to {young} young objects kept");
    assert!(vacuumed >= 1);
    // One more after every bundle is written: all of them young, none taken.
    let v = o.vacuum(VacuumOptions::default()).await.unwrap();
    assert_eq!(v.young, tasks.len() as u64, "{v:?}");
    let report = o.commit_build(&receipts).await.unwrap();
    assert_eq!(report.committed.len(), tasks.len(), "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    ready_and_exact(&o).await;
    assert_eq!(answers(&local).await, answers(&o).await);
}

/// Run tasks (`docs/fanout.md`, "Run tasks"): with the file receipts committed and the runs
/// left (`commit_build_with(.., false)`), `plan_runs` hands each index's tier step to a worker
/// (`BundleBuilder::build_run`, a handle of its own, the task through JSON) and `commit_runs`
/// takes them. The runs equal a local `build()`'s blob for blob (ordered, bitmap, bloom and
/// full text), the answers and `verify` hold; tampered tasks are refused before any write,
/// a stale receipt and one whose object is gone are refused at the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_written_by_workers_and_equal_a_local_build() {
    use skerry_core::admin::run_tasks::{RunReceipt, RunTask};
    use skerry_core::formats::manifest::TableRun;
    use skerry_core::index::spec::{IndexKind, IndexOptions};
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("data");
    write_data(&data);
    async fn more(o: &Overlay) {
        for (name, column, kind) in [
            ("bm_day", "day", IndexKind::Bitmap),
            ("bl_customer", "customer", IndexKind::Bloom),
            ("ft_customer", "customer", IndexKind::Fulltext),
        ] {
            o.create_index(
                "orders",
                name,
                &[column.into()],
                IndexOptions {
                    kind,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }
    }
    let (_, local) = overlay(d.path(), "local", &data).await;
    more(&local).await;
    local.build("orders", |_| {}).await.unwrap();
    let (url, o) = overlay(d.path(), "fanout", &data).await;
    more(&o).await;
    async fn runs_of(o: &Overlay, ix: &str) -> Vec<TableRun> {
        let m = o.snapshot_manifest(0).await.unwrap();
        m.table("orders")
            .unwrap()
            .index(ix)
            .unwrap()
            .table_runs()
            .into_iter()
            .cloned()
            .collect()
    }
    let tiered = ["by_customer", "bm_day", "bl_customer", "ft_customer"];

    let tasks = o
        .plan_build("orders", &PlanOptions::default())
        .await
        .unwrap();
    let receipts = build_all(&url, &tasks).await;
    let c = o.commit_build_with(&receipts, false).await.unwrap();
    assert_eq!(c.committed.len(), FILES as usize);
    for ix in tiered {
        assert!(
            runs_of(&o, ix).await.is_empty(),
            "{ix}: the commit took no step"
        );
    }

    let tasks: Vec<RunTask> = o.plan_runs("orders", None).await.unwrap();
    let mut planned: Vec<&str> = tasks.iter().map(|t| t.index.name.as_str()).collect();
    planned.sort();
    let mut want = tiered.to_vec();
    want.sort();
    // (The unique index's run is written with its cross-file check as it turns ready.)
    assert_eq!(planned, want);
    assert!(tasks
        .iter()
        .all(|t| t.files.len() == FILES as usize && t.merge.is_empty()));

    // Tampered tasks: refused before anything is written.
    let worker = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
    let bundles = || support::files_under(&d.path().join("fanout/bundles")).len();
    let before = bundles();
    let mut escape = tasks[0].clone();
    escape.bundle_path = escape.bundle_path.replace("bundles/", "bundles/../../");
    let mut forged = tasks[0].clone();
    forged.files.pop();
    forged.artifacts.pop();
    let mut outside = tasks[0].clone();
    outside.artifacts[0].lineage.bundle_path = "keys/fanout-task.key".into();
    for (what, t) in [("escape", escape), ("forged", forged), ("outside", outside)] {
        let e = worker.build_run(&t).await.unwrap_err();
        assert_eq!(e.code(), "E_INVALID", "{what}: {e}");
    }
    assert_eq!(bundles(), before, "a refused task writes nothing");

    // Each task on a worker of its own, through JSON.
    let run_receipts: Vec<RunReceipt> = on_workers(&url, &tasks, |b, t: RunTask| async move {
        b.build_run(&t).await.unwrap()
    })
    .await;
    assert!(run_receipts.iter().all(|r| r.run.is_some()));
    // Nothing is committed until the committer takes the receipts.
    for ix in tiered {
        assert!(runs_of(&o, ix).await.is_empty());
    }
    let report = o.commit_runs(&run_receipts).await.unwrap();
    assert_eq!(report.committed.len(), tiered.len(), "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    for ix in tiered {
        let (a, b) = (runs_of(&local, ix).await, runs_of(&o, ix).await);
        assert_eq!(a.len(), 1, "{ix}");
        assert_eq!(b.len(), 1, "{ix}");
        // The same run: blob, directory and files (only the bundle's name differs).
        assert_eq!(a[0].blob_length, b[0].blob_length, "{ix}");
        assert_eq!(a[0].ordered, b[0].ordered, "{ix}");
        assert_eq!(a[0].files, b[0].files, "{ix}");
        let v = o.verify("orders", ix).await.unwrap();
        assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true), "{ix}");
    }
    ready_and_exact(&o).await;
    assert_eq!(answers(&local).await, answers(&o).await);

    // The same receipts again: the runs moved on since their tasks were planned.
    let again = o.commit_runs(&run_receipts).await.unwrap();
    assert!(again.committed.is_empty());
    assert_eq!(again.refused.len(), tiered.len());
    assert!(
        again.refused.iter().all(|r| r.reason.contains("changed")),
        "{again:?}"
    );

    // A receipt whose run object is gone, and one naming another run's object: refused.
    let names: Vec<String> = (0..4)
        .map(|n| format!("p{:03}.parquet", FILES + n))
        .collect();
    for (n, name) in names.iter().enumerate() {
        std::fs::write(
            data.join(name),
            orders_parquet(
                (FILES + n as i64) * ROWS,
                ROWS as usize,
                500,
                SampleCodec::Snappy,
            )
            .unwrap(),
        )
        .unwrap();
    }
    o.register_files("orders", &names).await.unwrap();
    let tasks = o.plan_runs("orders", Some("bm_day")).await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(
        tasks[0].merge,
        vec![0],
        "the four new files merge with the run"
    );
    let r = worker.build_run(&tasks[0]).await.unwrap();
    let mut moved = r.clone();
    let run = moved.run.as_mut().unwrap();
    run.bundle_path = runs_of(&o, "bm_day").await[0].bundle_path.clone();
    let gone = r.clone();
    std::fs::remove_file(d.path().join("fanout").join(&r.task.bundle_path)).unwrap();
    let c = o.commit_runs(&[moved, gone]).await.unwrap();
    assert!(c.committed.is_empty(), "{c:?}");
    assert!(
        c.refused[0].reason.contains("not where its task named it"),
        "{c:?}"
    );
    assert!(
        c.refused[1].reason.contains("not in the overlay store"),
        "{c:?}"
    );
    // Built again, it commits: one run over the ten files.
    let r = worker.build_run(&tasks[0]).await.unwrap();
    let c = o.commit_runs(&[r]).await.unwrap();
    assert_eq!(c.committed.len(), 1, "{c:?}");
    let runs = runs_of(&o, "bm_day").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].files.len(), FILES as usize + 4);
    let v = o.verify("orders", "bm_day").await.unwrap();
    assert_eq!((v.missing, v.mismatched, v.certified), (0, 0, true));
}
