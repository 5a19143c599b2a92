//! Trust holes (issue 11), natively: rewrites that keep a file's size and version, delete
//! masks across refreshes, paths that leave their base, hostile manifest numbers, bounded
//! reads, orphaned staging segments, names, partial refreshes, read-only readers that never
//! fence the writer, and timeouts. Each test failed before its fix.

mod support;

use std::path::{Path, PathBuf};

use arrow_array::{Array, Int64Array};
use object_store::{ObjectStore, ObjectStoreExt};
use skerry_core::admin::lifecycle::FileDeletes;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};
use skerry_core::formats::manifest::{self, Manifest};
use skerry_core::io::{Location, ObjectStoreReader, RangeReader};
use skerry_core::read::cache::ReadCache;
use skerry_core::read::lookup::Pinned;
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::read::reader::OverlayReader;
use skerry_core::values::Value;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    /// Two uncompressed sample files: orders 25000..30000 and 30000..35000.
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let f = Fixture { dir };
        std::fs::create_dir_all(f.data()).unwrap();
        for (i, first) in [25000, 30000].into_iter().enumerate() {
            let b = orders_parquet(first, 5000, 1000, SampleCodec::None).unwrap();
            std::fs::write(f.file(i), b).unwrap();
        }
        f
    }
    fn data(&self) -> PathBuf {
        self.dir.path().join("data/orders")
    }
    fn file(&self, i: usize) -> PathBuf {
        self.data().join(format!("part-{i}.parquet"))
    }
    fn data_url(&self) -> String {
        format!("file://{}", self.data().display())
    }
    fn overlay_url(&self) -> String {
        format!("file://{}", self.dir.path().join("overlay").display())
    }
    async fn overlay(&self) -> Overlay {
        let o = Overlay::open(&self.overlay_url(), OpenOptions::default())
            .await
            .unwrap();
        index_orders(&o, &self.data_url()).await;
        o
    }
}

/// Registers the files under `data_url` as `orders`, with a unique index `by_id` built.
async fn index_orders(o: &Overlay, data_url: &str) {
    o.register_parquet_table("orders", data_url, FileSelection::Prefix("".into()))
        .await
        .unwrap();
    o.create_index(
        "orders",
        "by_id",
        &["order_id".into()],
        IndexOptions::unique(),
    )
    .await
    .unwrap();
    o.build("orders", |_| {}).await.unwrap();
}

fn id_eq(v: i64) -> Query {
    Query {
        conditions: vec![Condition::new("order_id", Op::Eq(Value::Int(v)))],
        columns: Some(vec!["order_id".into()]),
        ..Default::default()
    }
}

fn ids(r: &skerry_core::read::plan::QueryResult) -> Vec<i64> {
    let c = r.batch.column(0);
    let c = c.as_any().downcast_ref::<Int64Array>().unwrap();
    (0..c.len()).map(|i| c.value(i)).collect()
}

/// Swaps the first occurrences of two little-endian int64 values in a file, in place (same
/// inode, same size), and restores its modification time: the local store's ETag
/// (inode-mtime-size) does not change.
fn swap_in_place(path: &Path, a: i64, b: i64) {
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let find = |bytes: &[u8], v: i64| {
        let needle = v.to_le_bytes();
        bytes.windows(8).position(|w| w == needle).unwrap()
    };
    let (i, j) = (find(&bytes, a), find(&bytes, b));
    for k in 0..8 {
        bytes.swap(i + k, j + k);
    }
    std::fs::write(path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// A new modification time, the same bytes: the local store's ETag changes.
fn touch(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

async fn etag(o: &Overlay, f: &Fixture, i: usize) -> Option<String> {
    let url = format!("{}/part-{i}.parquet", f.data_url());
    o.data_reader()
        .head(&Location::new(url))
        .await
        .unwrap()
        .version
}

/// Issue 42: on a store whose versions name one content (S3: the ETag hashes the bytes), a
/// dictionary page read once is used by later reads pinned to that ETag without fetching it
/// again; a same-size rewrite is a new ETag, so those reads fail (`If-Match`) and the query
/// answers from the file as it is now, never from the pages of the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_s3_a_dictionary_is_reused_by_etag_and_an_overwrite_is_caught() {
    let moto = support::Moto::start(&["lake", "skerry"]);
    let storage = support::s3_storage(&moto.endpoint());
    let lake = ObjectStoreReader::from_url("s3://lake", &storage).unwrap();
    let mut part0 = Vec::new();
    // One row group per file: its customer dictionary (~90 KB) is larger than the gap a
    // request bridges, so a read that holds it does not fetch it.
    for (i, first) in [25000, 30000].into_iter().enumerate() {
        let b = orders_parquet(first, 5000, 5000, SampleCodec::None).unwrap();
        if i == 0 {
            part0 = b.clone();
        }
        lake.store()
            .put(
                &format!("orders/part-{i}.parquet").into(),
                bytes::Bytes::from(b).into(),
            )
            .await
            .unwrap();
    }
    let o = Overlay::open(
        "s3://skerry/overlay",
        OpenOptions {
            storage: storage.clone(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    index_orders(&o, "s3://lake/orders").await;
    let loc = Location::new("s3://lake/orders/part-0.parquet");
    assert!(o
        .data_reader()
        .content_versions(&loc.clone().with_version("\"x\"")));
    let row = |v: i64| Query {
        conditions: vec![Condition::new("order_id", Op::Eq(Value::Int(v)))],
        columns: Some(vec!["order_id".into(), "customer".into(), "amount".into()]),
        ..Default::default()
    };
    // Bytes read from the lake by one query.
    let spent = |o: &Overlay| o.data_reader().stats().bytes;
    let mut read = Vec::new();
    for v in [25001, 25002, 25003, 25004] {
        let before = spent(&o);
        let r = o.query("orders", &row(v)).await.unwrap();
        assert_eq!(ids(&r), vec![v]);
        read.push(spent(&o) - before);
    }
    // The build left every file's metadata cached, so reads are pinned to the ETag: the
    // first fetches and decodes the row group's dictionary pages, the next ones fetch data
    // pages (and a small dictionary between two of them, as the gap a request bridges).
    let md = parquet::file::reader::SerializedFileReader::new(bytes::Bytes::from(part0.clone()))
        .unwrap();
    use parquet::file::reader::FileReader;
    let dicts: u64 = (0..3)
        .map(|c| {
            let cc = md.metadata().row_group(0).column(c);
            (cc.data_page_offset() - cc.dictionary_page_offset().unwrap()) as u64
        })
        .sum();
    for k in 1..4 {
        assert!(
            read[k] + dicts / 2 <= read[0],
            "bytes per query: {read:?}, dictionary pages: {dicts}"
        );
    }

    // Rewritten in place, same size: ids 25001 and 25002 change places.
    let tag = o.data_reader().head(&loc).await.unwrap().version;
    let find = |b: &[u8], v: i64| b.windows(8).position(|w| w == v.to_le_bytes()).unwrap();
    let (i, j) = (find(&part0, 25001), find(&part0, 25002));
    for k in 0..8 {
        part0.swap(i + k, j + k);
    }
    lake.store()
        .put(
            &"orders/part-0.parquet".into(),
            bytes::Bytes::from(part0).into(),
        )
        .await
        .unwrap();
    assert_ne!(o.data_reader().head(&loc).await.unwrap().version, tag);
    for (v, pos) in [(25001, 2), (25002, 1)] {
        let r = o.query("orders", &row(v)).await.unwrap();
        assert_eq!(ids(&r), vec![v], "query for {v} returned another row");
        assert_eq!(r.rows[0].position, pos);
        assert_eq!(r.stats.drifted, vec!["part-0.parquet".to_string()]);
    }
}

/// Defect 1: a same-size in-place rewrite with its mtime restored keeps the ETag; the index
/// then names rows holding other values. Queries re-check the predicate on every row an index
/// names: the file is rejected as drifted, scanned, queued for repair; verify queues it too;
/// the next build re-hashes it and heals the index; `refresh_deep` finds such rewrites.
#[tokio::test]
async fn same_size_rewrite_is_caught_by_the_recheck() {
    let f = Fixture::new();
    let o = f.overlay().await;
    let before = o.query("orders", &id_eq(25001)).await.unwrap();
    assert_eq!(ids(&before), vec![25001]);
    assert_eq!(before.rows[0].position, 1);

    let tag = etag(&o, &f, 0).await;
    swap_in_place(&f.file(0), 25001, 25002);
    assert_eq!(etag(&o, &f, 0).await, tag, "the rewrite must keep the ETag");

    for v in [25001, 25002] {
        let r = o.query("orders", &id_eq(v)).await.unwrap();
        assert_eq!(ids(&r), vec![v], "query for {v} returned another row");
        assert_eq!(r.stats.files_rejected, 1);
        assert_eq!(r.stats.rejections[0].reason.code(), "drifted");
        assert_eq!(r.stats.drifted, vec!["part-0.parquet".to_string()]);
    }
    // With a limit, the rows confirmed first are the ones returned: still only true rows,
    // in file order then position.
    let q = Query {
        conditions: vec![Condition::new(
            "order_id",
            Op::In(vec![
                Value::Int(25001),
                Value::Int(25002),
                Value::Int(30001),
            ]),
        )],
        columns: Some(vec!["order_id".into()]),
        limit: Some(2),
        ..Default::default()
    };
    let r = o.query("orders", &q).await.unwrap();
    assert_eq!(ids(&r), vec![25002, 25001]);
    assert_eq!(
        r.rows.iter().map(|x| x.position).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let repairs = o.repairs("orders", "by_id").await.unwrap();
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0].reason, "drifted");

    // A shallow refresh cannot see it; verify does, and queues the file.
    let shallow = o.refresh("orders").await.unwrap();
    assert!(shallow.changed.is_empty() && shallow.touched.is_empty());
    let v = o.verify("orders", "by_id").await.unwrap();
    assert_eq!(v.mismatched, 2);
    assert_eq!(v.repairs_queued, 1);
    assert!(!v.certified);

    // The build drains the queue: deep re-check, new facts, rebuilt index.
    o.build("orders", |_| {}).await.unwrap();
    assert!(o.repairs("orders", "by_id").await.unwrap().is_empty());
    for (v, pos) in [(25001, 2), (25002, 1)] {
        let r = o.query("orders", &id_eq(v)).await.unwrap();
        assert_eq!(ids(&r), vec![v]);
        assert_eq!(r.rows[0].position, pos);
        assert!(r.stats.rejections.is_empty(), "{:?}", r.stats.rejections);
        assert_eq!(r.stats.files_by_index + r.stats.files_pruned, 2);
    }
    let v = o.verify("orders", "by_id").await.unwrap();
    assert_eq!((v.mismatched, v.missing, v.repairs_queued), (0, 0, 0));
    assert!(v.certified);

    // refresh_deep re-hashes files whose size and version look unchanged.
    swap_in_place(&f.file(0), 25001, 25002);
    assert!(o.refresh("orders").await.unwrap().changed.is_empty());
    let deep = o.refresh_deep("orders").await.unwrap();
    assert_eq!(deep.changed, vec!["part-0.parquet".to_string()]);
    assert_eq!(deep.checked, 2);
}

/// Row 25017 (position 17 of part-0, deleted) is in no answer.
async fn gone(o: &Overlay) {
    let q = id_eq(25017);
    assert!(o.query("orders", &q).await.unwrap().rows.is_empty());
    let l = o
        .lookup("orders", "by_id", &[Value::Int(25017)])
        .await
        .unwrap();
    assert!(l.rows.is_empty());
    o.set_scan_only(true);
    assert!(o.query("orders", &q).await.unwrap().rows.is_empty());
    o.set_scan_only(false);
}

/// Defect 2: a touched file (same bytes, new version) keeps its delete mask through refresh;
/// a changed file's mask is reported as dropped, never dropped silently.
#[tokio::test]
async fn refresh_keeps_delete_masks_of_unchanged_files() {
    let f = Fixture::new();
    let o = f.overlay().await;
    o.register_deletes(
        "orders",
        &[FileDeletes {
            file: "part-0.parquet".into(),
            positions: vec![17],
        }],
    )
    .await
    .unwrap();
    gone(&o).await;

    // touch: a new mtime, the same bytes.
    touch(&f.file(0));
    let r = o.refresh("orders").await.unwrap();
    assert_eq!(r.touched, vec!["part-0.parquet".to_string()]);
    assert!(r.deletes_dropped.is_empty());
    gone(&o).await;
    o.publish().await.unwrap();

    // New content with the same row count: the mask named rows of the old content.
    std::fs::write(
        f.file(0),
        orders_parquet(90000, 5000, 1000, SampleCodec::Snappy).unwrap(),
    )
    .unwrap();
    let r = o.refresh("orders").await.unwrap();
    assert_eq!(r.changed, vec!["part-0.parquet".to_string()]);
    assert_eq!(r.deletes_dropped, vec!["part-0.parquet".to_string()]);
    let r = o.query("orders", &id_eq(90017)).await.unwrap();
    assert_eq!(ids(&r), vec![90017]);
}

/// Decision 77: a plain Parquet table's files stay bound by their whole bytes (they may be
/// rewritten in place, and `refresh` tells a touched file from a changed one by that digest);
/// only Iceberg data files are bound by their footer (`core/tests/iceberg_v3.rs`).
#[tokio::test]
async fn parquet_files_are_bound_by_their_whole_bytes() {
    use skerry_core::formats::lineage::{footer_digest, sha256_hex, Binding};
    let f = Fixture::new();
    let o = f.overlay().await;
    let snap = o.snapshot().await.unwrap();
    let t = &snap.manifest().tables[0];
    assert!(!t.files.is_empty());
    for e in &t.files {
        let bytes = std::fs::read(f.data().join(&e.path)).unwrap();
        assert_eq!(e.binding, Binding::Whole, "{}", e.path);
        assert_eq!(e.sha256, sha256_hex(&bytes), "{}", e.path);
        let n = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
        let footer = &bytes[bytes.len() - 8 - n as usize..];
        assert_ne!(e.sha256, footer_digest(e.size, footer));
    }
    // Absent from the manifest's JSON when whole (files written before decision 77 read the same).
    let json = snap.manifest().to_json();
    assert!(!String::from_utf8_lossy(&json).contains("\"binding\""));
}

/// Defect 9 and 11: data paths are safe relative object names (escapes refused by the real
/// name); a missing table
/// location is not an empty table; index names are validated; names fold one way.
#[tokio::test]
async fn paths_names_and_locations() {
    let f = Fixture::new();
    let o = f.overlay().await;
    std::fs::create_dir_all(f.dir.path().join("data/outside")).unwrap();
    std::fs::write(
        f.dir.path().join("data/outside/secret.parquet"),
        orders_parquet(0, 10, 10, SampleCodec::None).unwrap(),
    )
    .unwrap();
    // Names that look like escapes are names (attack round 3, item 1): objects literally so
    // called below the table, which do not exist — never the file outside. Real escapes are
    // refused before any read.
    let cases = [
        ("%2e%2e/outside/secret.parquet", "E_NOT_FOUND"),
        ("%2E%2E/outside/secret.parquet", "E_NOT_FOUND"),
        (".%2e/outside/secret.parquet", "E_NOT_FOUND"),
        ("%252e%252e/outside/secret.parquet", "E_NOT_FOUND"),
        ("../outside/secret.parquet", "E_INVALID"),
        ("a/../../outside/secret.parquet", "E_INVALID"),
        ("/etc/passwd", "E_INVALID"),
        ("file:///etc/passwd", "E_INVALID"),
        ("a\\..\\..\\outside\\secret.parquet", "E_INVALID"),
    ];
    for (p, code) in cases {
        let e = o
            .register_files("orders", &[p.to_string()])
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{p}: {e}");
        let e = o
            .register_parquet_table("t2", &f.data_url(), FileSelection::List(vec![p.into()]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{p}: {e}");
    }
    let missing = format!("file://{}", f.dir.path().join("nowhere").display());
    let e = o
        .register_parquet_table("t3", &missing, FileSelection::Prefix("".into()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_NOT_FOUND");

    for bad in ["", "../x", "a/b", ".."] {
        let e = o
            .create_index("orders", bad, &["customer".into()], Default::default())
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_INVALID", "{bad:?}");
    }
    let e = o
        .create_index(
            "orders",
            &"x".repeat(1 << 20),
            &["customer".into()],
            Default::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID");

    o.create_index("orders", "Ärger", &["customer".into()], Default::default())
        .await
        .unwrap();
    o.build("orders", |_| {}).await.unwrap();
    for name in ["ärger", "Ärger", "ÄRGER"] {
        o.lookup("orders", name, &[Value::String("customer-00001".into())])
            .await
            .unwrap();
    }
    let e = o
        .create_index("orders", "ärger", &["day".into()], Default::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_EXISTS");
}

/// Defect 11: one unreadable file does not fail a refresh; it is reported, the rest refreshed.
#[tokio::test]
async fn refresh_reports_unreadable_files_and_refreshes_the_rest() {
    let f = Fixture::new();
    let o = f.overlay().await;
    let len = std::fs::metadata(f.file(1)).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(f.file(1))
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    touch(&f.file(0));
    let r = o.refresh("orders").await.unwrap();
    assert_eq!(r.touched, vec!["part-0.parquet".to_string()]);
    assert_eq!(r.unreadable.len(), 1);
    assert_eq!(r.unreadable[0].file, "part-1.parquet");
    assert_eq!(r.unreadable[0].code, "E_PARQUET");
}

/// Defect 6: a step killed after writing its staging segment and before committing left an
/// object no later step may collide with. The orphan below sits at the name a killed first
/// step used to write; every later build resumes.
#[tokio::test]
async fn orphaned_staging_segment_does_not_block_resume() {
    let f = Fixture::new();
    let o = Overlay::open(&f.overlay_url(), OpenOptions::default())
        .await
        .unwrap();
    let t = o
        .register_parquet_table("orders", &f.data_url(), FileSelection::Prefix("".into()))
        .await
        .unwrap();
    let ix = o
        .create_index(
            "orders",
            "by_id",
            &["order_id".into()],
            IndexOptions::unique(),
        )
        .await
        .unwrap();
    let m = o.snapshot_manifest(0).await.unwrap();
    let file_id = m.tables[0].files[0].file_id;
    for name in [
        format!("{file_id}-0-s1.seg"),
        format!("{file_id}-0-s1-0.seg"),
    ] {
        let p = format!("staging/{}/{}/{name}", t.table_id, ix.index_id);
        o.store()
            .put(&object_store::path::Path::from(p), vec![1u8, 2, 3].into())
            .await
            .unwrap();
    }
    let opts = skerry_core::admin::build::StepOptions {
        max_entries: 1500,
        max_bytes: 1 << 20,
    };
    loop {
        let s = o.build_step("orders", "by_id", opts).await.unwrap();
        if s.done {
            break;
        }
    }
    let v = o.verify("orders", "by_id").await.unwrap();
    assert!(v.certified && v.missing == 0 && v.mismatched == 0);
    // Orphans are unreferenced objects: vacuum deletes them.
    o.vacuum(skerry_core::admin::lifecycle::VacuumOptions::now(1))
        .await
        .unwrap();
    let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(
        o.store()
            .list(Some(&object_store::path::Path::from("staging"))),
    )
    .await;
    assert!(left.is_empty(), "{left:?}");
}

/// Numbers every manifest field may be set to by an attacker.
const EXTREMES: [u64; 7] = [
    0,
    1,
    u32::MAX as u64,
    1 << 53,
    (1 << 53) + 1,
    i64::MAX as u64,
    u64::MAX,
];

/// Every numeric leaf of a JSON document, as a path of keys/indices.
fn numeric_paths(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        serde_json::Value::Number(_) => out.push(at.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(i.to_string());
                numeric_paths(x, at, out);
                at.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                at.push(k.clone());
                numeric_paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn set_path(v: &mut serde_json::Value, path: &[String], n: u64) {
    let mut cur = v;
    for k in path {
        cur = match cur {
            serde_json::Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
            serde_json::Value::Object(o) => o.get_mut(k).unwrap(),
            _ => unreachable!(),
        };
    }
    *cur = serde_json::Value::from(n);
}

/// Defect 4: every numeric field of a real manifest set to each extreme value: parsing fails
/// `E_MANIFEST`, or every lookup and query over it answers or fails with a typed error — no
/// overflow panic (tests run with overflow checks). The same manifest unvalidated (as a
/// careless embedder might build one) goes through the read path too.
#[tokio::test]
async fn extreme_manifest_numbers_never_panic() {
    let f = Fixture::new();
    let o = f.overlay().await;
    o.publish().await.unwrap();
    let reader = ObjectStoreReader::from_url(&f.overlay_url(), &[]).unwrap();
    let good = manifest::read_latest(&reader).await.unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&good.to_json()).unwrap();
    // One file's row ids as runs (Iceberg v3 lineage), so their numbers are attacked too.
    let file = &mut json["tables"][0]["files"][0];
    let rows = file["record_count"].as_u64().unwrap();
    file.as_object_mut().unwrap().remove("row_id_start");
    file["row_id_runs"] = serde_json::json!([[0, 7, 2], [2, 100, rows - 2]]);
    Manifest::from_json(&serde_json::to_vec(&json).unwrap()).unwrap();
    let mut paths = vec![];
    numeric_paths(&json, &mut vec![], &mut paths);
    assert!(paths.len() > 20, "{}", paths.len());
    let (mut parsed, mut refused) = (0, 0);
    for p in &paths {
        for n in EXTREMES {
            let mut m = json.clone();
            set_path(&mut m, p, n);
            let bytes = serde_json::to_vec(&m).unwrap();
            let checked = Manifest::from_json(&bytes);
            match &checked {
                Ok(_) => parsed += 1,
                Err(e) => {
                    assert!(
                        matches!(e.code(), "E_MANIFEST"),
                        "{p:?}={n}: {e} ({})",
                        e.code()
                    );
                    refused += 1;
                }
            }
            // Unvalidated too: serde alone.
            let Ok(raw) = serde_json::from_slice::<Manifest>(&bytes) else {
                continue;
            };
            let dirs = ReadCache::default();
            let l = Pinned {
                overlay: &reader,
                data: o.data_reader().as_ref(),
                manifest: &raw,
                cache: &dirs,
                scan_only: false,
            };
            for r in [
                l.lookup("orders", "by_id", &[Value::Int(25001)]).await,
                l.query("orders", &id_eq(30001)).await.map(|r| {
                    skerry_core::read::lookup::LookupResult {
                        rows: r.rows,
                        stats: Default::default(),
                    }
                }),
            ] {
                if let Err(e) = r {
                    assert!(e.code().starts_with("E_"), "{p:?}={n}: {e}");
                }
            }
        }
    }
    assert!(parsed > 0 && refused > 0, "{parsed} {refused}");
}

/// Defects 3 and 5 natively: hostile paths in a published manifest or HEAD are refused at
/// parse time; HEAD and manifests are bounded while read (the store's declared size first).
#[tokio::test]
async fn manifests_are_validated_and_bounded() {
    let f = Fixture::new();
    let o = f.overlay().await;
    o.publish().await.unwrap();
    let reader = ObjectStoreReader::from_url(&f.overlay_url(), &[]).unwrap();
    let good = manifest::read_latest(&reader).await.unwrap();
    for bad in [
        "http://127.0.0.1:9/evil.puffin",
        "../../other-tenant/x.puffin",
        "/abs/x.puffin",
        "a//b.puffin",
    ] {
        let mut m = good.clone();
        m.tables[0].indexes[0].files[0].lineage.bundle_path = bad.into();
        assert_eq!(
            Manifest::from_json(&m.to_json()).unwrap_err().code(),
            "E_MANIFEST"
        );
        let mut m = good.clone();
        m.tables[0].files[0].path = bad.into();
        assert_eq!(
            Manifest::from_json(&m.to_json()).unwrap_err().code(),
            "E_MANIFEST"
        );
    }
    // Row id runs (Iceberg v3 lineage) are validated: never beside row_id_start, ascending
    // and inside the file, ids distinct and below 2^63.
    use skerry_core::formats::rowset::IdRuns;
    let rows = good.tables[0].files[0].record_count;
    for (runs, start, ok) in [
        (vec![(0, 10, rows)], None, true),
        (vec![(0, 500, 3), (5, 1 << 40, rows - 5)], None, true),
        (vec![(0, 10, rows)], Some(0), false),
        (vec![(0, 10, 3), (2, 100, 1)], None, false),
        (vec![(0, 10, rows + 1)], None, false),
        (vec![(0, 10, 3), (3, 11, 1)], None, false),
        (vec![(0, u64::MAX - 1, 2)], None, false),
        (vec![(0, 10, 0)], None, false),
    ] {
        let mut m = good.clone();
        m.tables[0].files[0].row_id_runs = Some(IdRuns(runs.clone()));
        m.tables[0].files[0].row_id_start = start;
        let parsed = Manifest::from_json(&m.to_json());
        assert_eq!(parsed.is_ok(), ok, "{runs:?} beside {start:?}: {parsed:?}");
        if let Err(e) = parsed {
            assert_eq!(e.code(), "E_MANIFEST");
        }
    }
    // HEAD pointing anywhere but manifests/ is refused.
    let head_path = f.dir.path().join("overlay/manifests/HEAD");
    for bad in [
        "../catalog/x",
        "manifests/../x",
        "manifests/%2e%2e/x",
        "http://x/y",
    ] {
        std::fs::write(
            &head_path,
            serde_json::json!({"version": 1, "path": bad}).to_string(),
        )
        .unwrap();
        let e = manifest::read_latest(&reader).await.unwrap_err();
        assert_eq!(e.code(), "E_MANIFEST", "{bad}");
    }
    // Oversized HEAD: refused from the declared size, before its body is read.
    std::fs::write(
        &head_path,
        vec![b' '; (manifest::MAX_HEAD_BYTES + 1) as usize],
    )
    .unwrap();
    let e = manifest::read_latest(&reader).await.unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST");
    assert!(e.to_string().contains("larger than"), "{e}");
    let e = reader
        .read_all_max(&Location::new("manifests/HEAD"), 10)
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        skerry_core::io::IoError::TooLarge { max: 10, .. }
    ));
}

/// Hardening: read-only readers never fence the writer; they see what is published and move
/// to newer versions on refresh.
#[tokio::test]
async fn read_only_readers_do_not_fence_the_writer() {
    let f = Fixture::new();
    let o = f.overlay().await;
    o.publish().await.unwrap();
    let r1 = OverlayReader::open(&f.overlay_url(), OpenOptions::default())
        .await
        .unwrap();
    let r2 = OverlayReader::open(&f.overlay_url(), OpenOptions::default())
        .await
        .unwrap();
    assert_eq!(r1.version(), 1);
    assert_eq!(
        ids(&r1.snapshot().query("orders", &id_eq(30002)).await.unwrap()),
        vec![30002]
    );
    // The writer goes on: a new file, built and published.
    std::fs::write(
        f.data().join("part-2.parquet"),
        orders_parquet(40000, 100, 50, SampleCodec::Zstd).unwrap(),
    )
    .unwrap();
    o.register_files("orders", &["part-2.parquet".into()])
        .await
        .unwrap();
    o.publish().await.unwrap();
    assert!(r2
        .snapshot()
        .query("orders", &id_eq(40001))
        .await
        .unwrap()
        .rows
        .is_empty());
    assert_eq!(r2.refresh().await.unwrap(), 2);
    assert_eq!(
        ids(&r2.snapshot().query("orders", &id_eq(40001)).await.unwrap()),
        vec![40001]
    );
    let l = r2
        .snapshot()
        .lookup("orders", "by_id", &[Value::Int(40002)])
        .await
        .unwrap();
    assert_eq!(l.rows.len(), 1);
    // The writer was never fenced.
    o.create_index("orders", "by_day", &["day".into()], Default::default())
        .await
        .unwrap();
    o.build("orders", |_| {}).await.unwrap();
    o.publish().await.unwrap();
    assert_eq!(r1.refresh().await.unwrap(), 3);
    // Nothing published yet: E_NOT_FOUND.
    let empty = format!("file://{}", f.dir.path().join("empty").display());
    std::fs::create_dir_all(f.dir.path().join("empty")).unwrap();
    let e = OverlayReader::open(&empty, OpenOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), "E_NOT_FOUND");
}

/// Hardening: a store that accepts connections and never answers fails `E_TIMEOUT` within
/// the limit instead of hanging.
#[cfg(feature = "s3")]
#[tokio::test]
async fn reads_time_out_against_a_server_that_never_answers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = held.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().take(64).flatten() {
            h.lock().unwrap().push(s); // accepted, never answered
        }
    });
    let storage = vec![
        (
            "aws_endpoint".to_string(),
            format!("http://127.0.0.1:{port}"),
        ),
        ("aws_allow_http".to_string(), "true".to_string()),
        ("aws_access_key_id".to_string(), "x".to_string()),
        ("aws_secret_access_key".to_string(), "y".to_string()),
        ("aws_region".to_string(), "us-east-1".to_string()),
    ];
    let t0 = std::time::Instant::now();
    let e = OverlayReader::open(
        "s3://bucket/overlay",
        OpenOptions {
            storage,
            timeout: Some(std::time::Duration::from_millis(300)),
            ..Default::default()
        },
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.code(), "E_TIMEOUT", "{e}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    assert!(
        !held.lock().unwrap().is_empty(),
        "the server saw no connection"
    );
}
