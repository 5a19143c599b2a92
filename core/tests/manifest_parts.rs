//! Split manifests (issue 14, manifest at scale): index lists larger than the part threshold
//! are published as parts beside the root manifest, read by a reader only when a read first
//! uses that index, verified by size and SHA-256, and kept or deleted with their manifest by
//! vacuum. Here the threshold is 0 so a small table splits every index with lists.

mod support;

use skerry_core::admin::lifecycle::VacuumOptions;
use skerry_core::admin::overlay::Overlay;
use skerry_core::admin::sample::customer_of;
use skerry_core::formats::manifest::{self, part_path, Manifest};
use skerry_core::io::ObjectStoreReader;
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::read::reader::OverlayReader;
use skerry_core::values::Value;

const FILES: i64 = 12;
const ROWS: i64 = 300;

struct Fx {
    dir: tempfile::TempDir,
    o: Overlay,
}

impl Fx {
    fn url(&self) -> String {
        format!("file://{}", self.dir.path().join("overlay").display())
    }
    fn overlay_file(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join("overlay").join(rel)
    }
}

async fn split_overlay() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let (_, o) = support::orders_overlay(
        dir.path(),
        FILES,
        ROWS,
        100,
        &[
            ("by_customer", "customer", false),
            ("by_id", "order_id", true),
        ],
    )
    .await;
    o.set_part_min_bytes(0);
    o.publish().await.unwrap();
    Fx { dir, o }
}

fn customer_eq(c: &str) -> Query {
    Query {
        conditions: vec![Condition::new("customer", Op::Eq(Value::String(c.into())))],
        columns: Some(vec!["order_id".into(), "customer".into()]),
        ..Default::default()
    }
}

/// The published root names a part per index and holds no lists; a reader opens it without
/// reading any part, reads one part when a lookup first uses its index (the other index's
/// part stays unread), and answers exactly as the writer (catalog, unsplit) does.
#[tokio::test]
async fn parts_are_read_on_first_use_and_answer_like_the_catalog() {
    let fx = split_overlay().await;
    let raw = std::fs::read(fx.overlay_file(&manifest::manifest_path(1))).unwrap();
    let root = Manifest::from_json(&raw).unwrap();
    assert_eq!(
        root.format_version, 2,
        "a split manifest is format version 2"
    );
    let t = &root.tables[0];
    for ix in &t.indexes {
        let p = ix.part.as_ref().expect("every index split at threshold 0");
        assert_eq!(p.path, part_path(1, t.table_id, ix.index_id));
        assert!(ix.files.is_empty() && ix.run.is_none());
        assert_eq!(p.files, FILES as u64);
        assert!(fx.overlay_file(&p.path).is_file());
        assert!(!ix.lists_ready());
        assert!(
            ix.file_entries().is_empty(),
            "unloaded part: nothing listed"
        );
    }
    // The unsplit document of the same version is what the parts add up to.
    let whole = fx.o.snapshot_manifest(1).await.unwrap();
    for (a, b) in whole.tables[0].indexes.iter().zip(&t.indexes) {
        let bytes = std::fs::read(fx.overlay_file(&b.part.as_ref().unwrap().path)).unwrap();
        b.attach(1, t, &bytes).unwrap();
        assert_eq!(b.file_entries(), a.files.as_slice());
        assert_eq!(b.table_run(), a.run.as_ref());
    }

    let r = OverlayReader::open(&fx.url(), Default::default())
        .await
        .unwrap();
    let pinned = r.pinned();
    assert!(pinned.tables[0].indexes.iter().all(|ix| !ix.lists_ready()));
    let writer = fx.o.snapshot().await.unwrap();
    let snap = r.snapshot();
    for id in [0, 7, ROWS + 3, FILES * ROWS - 1] {
        let key = [Value::Int(id)];
        let got = snap.lookup("orders", "by_id", &key).await.unwrap();
        let want = writer.lookup("orders", "by_id", &key).await.unwrap();
        assert_eq!(got.rows, want.rows, "by_id {id}");
        assert_eq!(got.rows.len(), 1, "by_id {id}");
        assert_eq!(
            got.stats.files_scanned, 0,
            "by_id {id} answered by the index"
        );
    }
    let ixs = &pinned.tables[0].indexes;
    let ready = |name: &str| ixs.iter().find(|i| i.name == name).unwrap().lists_ready();
    assert!(ready("by_id"), "by_id's part was read");
    assert!(
        !ready("by_customer"),
        "by_customer's part is read only when used"
    );

    // A query picks by_customer: its part is read, the answer is the writer's.
    for id in [1, 500, 2_222] {
        let c = customer_of(id).unwrap();
        let got = snap.query("orders", &customer_eq(&c)).await.unwrap();
        let want = writer.query("orders", &customer_eq(&c)).await.unwrap();
        assert_eq!(got.rows, want.rows, "customer {c}");
        assert_eq!(got.batch, want.batch, "customer {c}");
        assert!(!got.rows.is_empty());
        assert_eq!(got.stats.index.as_deref(), Some("by_customer"));
        assert_eq!(
            got.stats.files_scanned, 0,
            "customer {c} answered by the index"
        );
    }
    assert!(ready("by_customer"));
    // explain on a fresh reader reads the part it plans with.
    let cold = OverlayReader::open(&fx.url(), Default::default())
        .await
        .unwrap();
    let e = cold
        .snapshot()
        .explain("orders", &customer_eq(&customer_of(1).unwrap()))
        .await
        .unwrap();
    assert_eq!(e.index.as_deref(), Some("by_customer"));
    assert!(e
        .files
        .iter()
        .all(|f| !matches!(f.action, skerry_core::read::explain::FileAction::Scan)));
}

/// A part that is not the one the root recorded (other bytes, truncated, another index's)
/// is refused `E_MANIFEST` when first used; the root alone still opens.
#[tokio::test]
async fn a_tampered_part_is_refused() {
    let fx = split_overlay().await;
    let root =
        Manifest::from_json(&std::fs::read(fx.overlay_file(&manifest::manifest_path(1))).unwrap())
            .unwrap();
    let t = &root.tables[0];
    let by_id = t.indexes.iter().find(|i| i.name == "by_id").unwrap();
    let by_customer = t.indexes.iter().find(|i| i.name == "by_customer").unwrap();
    let path = fx.overlay_file(&by_id.part.as_ref().unwrap().path);
    let good = std::fs::read(&path).unwrap();
    let other = std::fs::read(fx.overlay_file(&by_customer.part.as_ref().unwrap().path)).unwrap();
    let mut flipped = good.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x01;
    let mut same_size_other = other.clone();
    same_size_other.resize(good.len(), b' ');
    for (label, bytes) in [
        ("one bit flipped", flipped),
        ("truncated", good[..good.len() - 10].to_vec()),
        ("another index's part", other),
        ("another part padded to size", same_size_other),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let r = OverlayReader::open(&fx.url(), Default::default())
            .await
            .unwrap();
        let e = r
            .snapshot()
            .lookup("orders", "by_id", &[Value::Int(5)])
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_MANIFEST", "{label}: {e}");
        // The attach check alone, too (what every reader runs).
        assert_eq!(
            by_id.attach(1, t, &bytes).unwrap_err().code(),
            "E_MANIFEST",
            "{label}"
        );
    }
    // A root naming a part outside manifests/, or keeping inline lists beside a part.
    let mut m = root.clone();
    m.tables[0].indexes[0].part.as_mut().unwrap().path = "bundles/x.json".into();
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
    let mut m = root.clone();
    m.tables[0].indexes[0].part.as_mut().unwrap().path = "manifests/../../x.json".into();
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
    let mut m = root.clone();
    m.tables[0].indexes[0].part.as_mut().unwrap().sha256 = "zz".into();
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
    let whole = fx.o.snapshot_manifest(1).await.unwrap();
    let mut m = root.clone();
    m.tables[0].indexes[0].files = whole.tables[0].indexes[0].files.clone();
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
}

/// Vacuum deletes the parts of the manifests it deletes and parts without a manifest (a
/// publish that failed before its root), keeps the parts of retained manifests, and the
/// bundles those parts reference.
#[tokio::test]
async fn vacuum_keeps_parts_with_their_manifest() {
    let fx = split_overlay().await;
    fx.o.publish().await.unwrap(); // version 2, its own parts
    let orphan = fx.overlay_file(&part_path(9, 1, 1));
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::write(&orphan, b"{}").unwrap();
    let parts_of = |v: u64| -> Vec<String> {
        let d = fx.overlay_file(&format!("manifests/{v:020}"));
        std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(parts_of(1).len(), 2);
    assert_eq!(parts_of(2).len(), 2);
    let report = fx.o.vacuum(VacuumOptions::now(1)).await.unwrap();
    assert_eq!(report.manifests, 1);
    assert!(parts_of(1).is_empty(), "version 1's parts went with it");
    assert_eq!(parts_of(2).len(), 2, "HEAD's parts stay");
    assert!(!orphan.exists(), "a part without a manifest is swept");
    // Everything the retained parts reference is still there: a reader answers from them.
    let r = OverlayReader::open(&fx.url(), Default::default())
        .await
        .unwrap();
    let reader = ObjectStoreReader::from_url(&fx.url(), &[]).unwrap();
    let m = manifest::read_latest(&reader).await.unwrap();
    assert_eq!(m.version, 2);
    for id in [3, FILES * ROWS - 2] {
        let got = r
            .snapshot()
            .lookup("orders", "by_id", &[Value::Int(id)])
            .await
            .unwrap();
        assert_eq!(got.rows.len(), 1);
        assert_eq!(got.stats.files_scanned, 0);
        assert!(
            got.stats.rejections.is_empty(),
            "{:?}",
            got.stats.rejections
        );
    }
}

/// Below the threshold nothing splits: the manifest stays format version 1, byte for byte
/// what an unsplit publish writes (the golden manifest test pins those bytes).
#[tokio::test]
async fn small_manifests_do_not_split() {
    let fx = split_overlay().await;
    let mut m = fx.o.snapshot_manifest(5).await.unwrap();
    let before = m.to_json();
    assert!(m.split_parts(manifest::PART_MIN_BYTES).is_empty());
    assert_eq!(m.format_version, 1);
    assert_eq!(m.to_json(), before);
    // At 0 every index with lists splits and the manifest becomes version 2.
    let parts = m.split_parts(0);
    assert_eq!(parts.len(), 2);
    assert_eq!(m.format_version, 2);
}

/// A manifest's tiers (RFC 0004) are checked like its run: tiers without the run they follow,
/// more than 16 runs, a tier path leaving the overlay or a tier naming a file twice are
/// `E_MANIFEST`; the same tiers after a run are accepted and read back as they were.
#[tokio::test]
async fn tiers_are_checked_like_runs() {
    let d = tempfile::tempdir().unwrap();
    let (_, o) =
        support::orders_overlay(d.path(), 8, 100, 50, &[("by_customer", "customer", false)]).await;
    let m = o.snapshot_manifest(1).await.unwrap();
    let run = m.tables[0].indexes[0]
        .run
        .clone()
        .expect("a run over 8 files");
    let with = |run: Option<manifest::TableRun>, tiers: Vec<manifest::TableRun>| {
        let mut m = m.clone();
        m.tables[0].indexes[0].run = run;
        m.tables[0].indexes[0].tiers = tiers;
        Manifest::from_json(&m.to_json())
    };
    let back = with(Some(run.clone()), vec![run.clone(), run.clone()]).unwrap();
    let ix = &back.tables[0].indexes[0];
    assert_eq!(ix.table_runs().len(), 3);
    assert_eq!(ix.tiers, vec![run.clone(), run.clone()]);
    let code = |r: Result<Manifest, skerry_core::error::Error>| r.unwrap_err().code();
    assert_eq!(code(with(None, vec![run.clone()])), "E_MANIFEST");
    assert_eq!(
        code(with(Some(run.clone()), vec![run.clone(); 16])),
        "E_MANIFEST"
    );
    let mut outside = run.clone();
    outside.bundle_path = "../elsewhere.puffin".into();
    assert_eq!(code(with(Some(run.clone()), vec![outside])), "E_MANIFEST");
    let mut twice = run.clone();
    twice.files.push(twice.files[0].clone());
    assert_eq!(code(with(Some(run.clone()), vec![twice])), "E_MANIFEST");
    // A reader covers each file by the newest run only: the same run listed three times
    // answers every file once, from the last.
    let t = &back.tables[0];
    let cov = t.tier_coverage(&ix.table_runs());
    assert!(cov[0].iter().chain(&cov[1]).all(Option::is_none));
    assert_eq!(cov[2].iter().flatten().count(), t.files.len());
    o.close().await.unwrap();
}
