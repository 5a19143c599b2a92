//! Reads at the physical limit (issue 14): sequential round trips and bytes of a `query`
//! over a table of 64 KiB pages, counted by a recording reader in front of the overlay and
//! the data files, warm and cold — and the read cache never serving stale blocks or
//! metadata.
//!
//! Round trips are counted as dependency depth: a request that starts after another one
//! finished is one trip deeper than it; requests issued together (in parallel) share a trip.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::formats::manifest::{self, Manifest};
use skerry_core::io::{
    BoxFut, IoCounters, IoError, Location, ObjectStoreReader, RangeReader, Reply, Request,
    UrlReader,
};
use skerry_core::read::cache::ReadCache;
use skerry_core::read::plan::{Query, QueryResult};
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::read::Snapshot;
use skerry_core::values::Value;

const FILES: i64 = 4;
const ROWS: i64 = 50_000;
const GROUP: usize = 25_000;
const PAGE: usize = 64 * 1024;
const COLUMNS: [&str; 6] = ["id", "email", "region", "amount", "qty", "note"];

/// Dependency depth of requests, shared by the readers of one snapshot.
#[derive(Default)]
struct Trips {
    finished: AtomicU64,
    deepest: AtomicU64,
}

impl Trips {
    fn reset(&self) {
        self.finished.store(0, Ordering::SeqCst);
        self.deepest.store(0, Ordering::SeqCst);
    }
    fn count(&self) -> u64 {
        self.deepest.load(Ordering::SeqCst)
    }
}

/// Returns `Pending` once: requests issued together all start before any finishes.
struct YieldOnce(bool);
impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

struct Recording<R> {
    inner: R,
    trips: Arc<Trips>,
}

impl<R: RangeReader> Recording<R> {
    async fn track<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        let depth = self.trips.finished.load(Ordering::SeqCst) + 1;
        self.trips.deepest.fetch_max(depth, Ordering::SeqCst);
        YieldOnce(false).await;
        let out = f.await;
        self.trips.finished.fetch_max(depth, Ordering::SeqCst);
        out
    }
}

impl<R: RangeReader> RangeReader for Recording<R> {
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(self.track(self.inner.fetch(loc, req)))
    }
    fn counters(&self) -> &IoCounters {
        self.inner.counters()
    }
}

fn email(i: i64) -> String {
    format!("user-{:09}@example.com", (i * 7919) % (FILES * ROWS))
}

/// One data file: ids `first..first + ROWS`, 2 row groups, 64 KiB pages, snappy, page index.
fn write_file(first: i64) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("email", DataType::Utf8, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, true),
        Field::new("qty", DataType::Int32, false),
        Field::new("note", DataType::Utf8, false),
    ]));
    let ids: Vec<i64> = (first..first + ROWS).collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(StringArray::from_iter_values(ids.iter().map(|&i| email(i)))),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("region-{:02}", i % 50)),
        )),
        Arc::new(Float64Array::from_iter(
            ids.iter()
                .map(|&i| (i % 101 != 0).then_some((i % 1000) as f64 * 1.25)),
        )),
        Arc::new(Int32Array::from_iter_values(
            ids.iter().map(|&i| (i % 7) as i32),
        )),
        Arc::new(StringArray::from_iter_values(ids.iter().map(|&i| {
            format!(
                "note {i:08} {:x}",
                (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            )
        }))),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(GROUP))
        .set_data_page_size_limit(PAGE)
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    overlay: Arc<Overlay>,
    overlay_url: String,
    data: std::path::PathBuf,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for f in 0..FILES {
        std::fs::write(data.join(format!("part-{f}.parquet")), write_file(f * ROWS)).unwrap();
    }
    let overlay_url = format!("file://{}", dir.path().join("overlay").display());
    let overlay = Overlay::open(&overlay_url, OpenOptions::default())
        .await
        .unwrap();
    overlay
        .register_parquet_table(
            "t",
            &format!("file://{}", data.display()),
            FileSelection::Prefix(String::new()),
        )
        .await
        .unwrap();
    overlay
        .create_index("t", "by_id", &["id".into()], IndexOptions::unique())
        .await
        .unwrap();
    overlay
        .create_index(
            "t",
            "by_region",
            &["region".into()],
            IndexOptions::default(),
        )
        .await
        .unwrap();
    overlay.build("t", |_| {}).await.unwrap();
    overlay.publish().await.unwrap();
    Fixture {
        _dir: dir,
        overlay: Arc::new(overlay),
        overlay_url,
        data,
    }
}

/// A reader of the published overlay whose every request is recorded.
struct Reader {
    overlay: Arc<Recording<ObjectStoreReader>>,
    data: Arc<Recording<UrlReader>>,
    trips: Arc<Trips>,
    cache: Arc<ReadCache>,
}

impl Reader {
    fn new(fx: &Fixture) -> Reader {
        let trips = Arc::new(Trips::default());
        Reader {
            overlay: Arc::new(Recording {
                inner: ObjectStoreReader::from_url(&fx.overlay_url, &[]).unwrap(),
                trips: trips.clone(),
            }),
            data: Arc::new(Recording {
                inner: UrlReader::new(vec![]),
                trips: trips.clone(),
            }),
            trips,
            cache: Arc::new(ReadCache::default()),
        }
    }

    async fn open(&self) -> Manifest {
        manifest::read_latest(self.overlay.as_ref()).await.unwrap()
    }

    /// Runs `op` over the six columns, checks that its rows are `want` and that it took at
    /// most `most` sequential round trips.
    async fn answers(
        &self,
        snap: &Snapshot,
        op: Op,
        want: &[i64],
        most: u64,
        what: &str,
    ) -> QueryResult {
        self.trips.reset();
        let r = snap.query("t", &query(op)).await.unwrap();
        check_rows(&r, want);
        let n = self.trips.count();
        assert!(n <= most, "{what}: {n} round trips, {:?}", r.stats);
        r
    }

    fn snapshot(&self, m: &Manifest) -> Snapshot {
        Snapshot::new(
            self.overlay.clone(),
            self.data.clone(),
            Arc::new(m.clone()),
            self.cache.clone(),
        )
    }
}

/// A reader of the fixture's published overlay and a snapshot of its newest version.
async fn opened(fx: &Fixture) -> (Reader, Snapshot) {
    let rd = Reader::new(fx);
    let m = rd.open().await;
    let snap = rd.snapshot(&m);
    (rd, snap)
}

fn query(op: Op) -> Query {
    Query {
        conditions: vec![Condition::new("id", op)],
        columns: Some(COLUMNS.iter().map(|c| c.to_string()).collect()),
        limit: None,
        verify_files: false,
        pin_versions: false,
        snapshot: None,
    }
}

fn any_of(ids: &[i64]) -> Op {
    Op::In(ids.iter().map(|&i| Value::Int(i)).collect())
}

fn ids(r: &QueryResult) -> Vec<i64> {
    let c = r.batch.column(0);
    let a = c.as_any().downcast_ref::<Int64Array>().unwrap();
    a.values().to_vec()
}

fn check_rows(r: &QueryResult, want: &[i64]) {
    assert_eq!(ids(r), want);
    let e = r.batch.column(1);
    let e = e.as_any().downcast_ref::<StringArray>().unwrap();
    for (k, id) in want.iter().enumerate() {
        assert_eq!(e.value(k), email(*id));
    }
}

/// Bytes of the pages holding row `id` in every requested column (the data page with the
/// row, and the column chunk's dictionary page), from the file's own page index.
fn page_bytes(fx: &Fixture, id: i64) -> u64 {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::ReadOptionsBuilder;
    let file = std::fs::File::open(fx.data.join(format!("part-{}.parquet", id / ROWS))).unwrap();
    let r = SerializedFileReader::new_with_options(
        file,
        ReadOptionsBuilder::new().with_page_index().build(),
    )
    .unwrap();
    let md = r.metadata();
    let pos = (id % ROWS) as usize;
    let g = pos / GROUP;
    let row = (pos % GROUP) as i64;
    let rg = md.row_group(g);
    let pi = md.page_index_for_row_group(g);
    let mut total = 0u64;
    for c in 0..COLUMNS.len() {
        let locs = pi.offset_index(c).unwrap().page_locations();
        let p = locs.iter().rposition(|l| l.first_row_index <= row).unwrap();
        total += locs[p].compressed_page_size as u64;
        let cc = rg.column(c);
        if let Some(d) = cc.dictionary_page_offset() {
            total += (locs[0].offset - d) as u64;
        }
    }
    total
}

#[tokio::test]
async fn a_warm_point_query_is_two_round_trips_and_the_pages_of_its_row() {
    let fx = fixture().await;
    let (rd, snap) = opened(&fx).await;
    // Warm up: one query per file leaves the run's directory and every file's metadata cached.
    for f in 0..FILES {
        let r = snap
            .query("t", &query(Op::Eq(Value::Int(f * ROWS + 1))))
            .await
            .unwrap();
        check_rows(&r, &[f * ROWS + 1]);
    }
    for id in [7, ROWS + 30_001, 2 * ROWS + 12_345, FILES * ROWS - 1] {
        rd.trips.reset();
        let r = snap
            .query("t", &query(Op::Eq(Value::Int(id))))
            .await
            .unwrap();
        check_rows(&r, &[id]);
        let s = &r.stats;
        assert!(
            rd.trips.count() <= 2,
            "point {id}: {} round trips, {s:?}",
            rd.trips.count()
        );
        assert!(s.index_requests <= 1, "point {id}: {s:?}");
        assert!(s.index_bytes <= 64 * 1024, "point {id}: {s:?}");
        let pages = page_bytes(&fx, id);
        // Pages of other rows are read only where they sit in a gap of at most 8 KiB
        // between two wanted pages (one request instead of two).
        let gaps = COLUMNS.len() as u64 * skerry_core::io::PAGE_COALESCE_GAP;
        assert!(
            s.data_bytes <= pages + gaps,
            "point {id}: read {} data bytes, the pages holding the row are {pages}: {s:?}",
            s.data_bytes
        );
        assert!(s.bytes <= 64 * 1024 + pages, "point {id}: {s:?}");
    }
}

#[tokio::test]
async fn in_lists_and_ranges_fan_out_in_parallel() {
    let fx = fixture().await;
    let (rd, snap) = opened(&fx).await;
    // The run's directory cached, the metadata of one file of four.
    snap.query("t", &query(Op::Eq(Value::Int(1))))
        .await
        .unwrap();
    // IN-10 over every file and both row groups of each: block, metadata, pages.
    let want: Vec<i64> = (0..10).map(|k| k * 19_997 + 3).collect();
    rd.answers(&snap, any_of(&want), &want, 3, "IN-10, metadata cold")
        .await;
    // Warm: block and pages.
    let want: Vec<i64> = (0..10).map(|k| k * 19_997 + 11).collect();
    rd.answers(&snap, any_of(&want), &want, 2, "IN-10 warm")
        .await;
    // 1,000 rows across a file boundary and a row group boundary.
    let (lo, hi) = (ROWS - 500, ROWS + 500);
    let between = Op::Between(Value::Int(lo), Value::Int(hi - 1));
    let want: Vec<i64> = (lo..hi).collect();
    let r = rd.answers(&snap, between, &want, 2, "range warm").await;
    assert_eq!(r.stats.index.as_deref(), Some("by_id"), "{:?}", r.stats);
    // Each file's bytes are the pages holding the rows, not the row groups.
    assert!(r.stats.data_bytes < 2 * 1024 * 1024, "{:?}", r.stats);
}

#[tokio::test]
async fn a_cold_reader_opens_and_answers_a_point_in_few_round_trips() {
    let fx = fixture().await;
    let rd = Reader::new(&fx);
    rd.trips.reset();
    let m = rd.open().await;
    let snap = rd.snapshot(&m);
    let id = 2 * ROWS + 777;
    let r = snap
        .query("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    check_rows(&r, &[id]);
    // HEAD with the manifest inlined (decision 72; carrying the run's directory), the block
    // with the metadata of the file the key can be in (by its key bounds), the pages.
    assert!(
        rd.trips.count() <= 3,
        "cold point: {} trips, {:?}",
        rd.trips.count(),
        r.stats
    );
    assert_eq!(r.stats.index_requests, 1, "{:?}", r.stats);

    // A cold reader's IN-10 over every file: HEAD (the manifest inlined) + 3.
    let rd = Reader::new(&fx);
    rd.trips.reset();
    let m = rd.open().await;
    let snap = rd.snapshot(&m);
    let want: Vec<i64> = (0..10).map(|k| k * 19_997 + 5).collect();
    // (answers() resets the count: add the trip of HEAD.)
    let opened = rd.trips.count();
    assert_eq!(opened, 1);
    rd.answers(&snap, any_of(&want), &want, 4 - opened, "cold IN-10")
        .await;

    // A cold reader's 1,000-row range across a file and a row group boundary: HEAD (the
    // manifest inlined) + 3 (block with the two files' metadata, pages).
    let rd = Reader::new(&fx);
    rd.trips.reset();
    let m = rd.open().await;
    let snap = rd.snapshot(&m);
    let opened = rd.trips.count();
    let (lo, hi) = (2 * ROWS - 300, 2 * ROWS + 700);
    let want: Vec<i64> = (lo..hi).collect();
    let between = Op::Between(Value::Int(lo), Value::Int(hi - 1));
    assert_eq!(opened, 1);
    rd.answers(&snap, between, &want, 4 - opened, "cold range")
        .await;
}

#[tokio::test]
async fn the_read_cache_never_serves_stale_metadata_or_blocks() {
    let fx = fixture().await;
    let (rd, snap) = opened(&fx).await;
    let v1 = snap.version();
    let id = ROWS + 5;
    let r = snap
        .query("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    check_rows(&r, &[id]);
    assert!(rd.cache.stats().metadata.entries >= 1);

    // A data file rewritten in place (same size, other rows) under the pinned manifest: the
    // cached metadata is not trusted (its reads are pinned to the version it came from), the
    // file is read as it is now and reported drifted; the answer holds only rows that match.
    let path = fx.data.join("part-1.parquet");
    let original = std::fs::read(&path).unwrap();
    std::fs::write(&path, write_file(9 * ROWS)).unwrap();
    let r = snap
        .query("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    assert!(
        ids(&r).is_empty(),
        "a rewritten file never answers from cached metadata: {:?}",
        r.stats
    );
    assert!(
        !r.stats.drifted.is_empty() || r.stats.files_rejected > 0,
        "{:?}",
        r.stats
    );
    std::fs::write(&path, &original).unwrap();

    // refresh after a rewrite: the overlay re-registers the file (new facts, new key) and the
    // reader's next version answers from the new rows.
    std::fs::write(&path, write_file(9 * ROWS)).unwrap();
    fx.overlay.refresh("t").await.unwrap();
    fx.overlay.build("t", |_| {}).await.unwrap();
    fx.overlay.publish().await.unwrap();
    let m2 = rd.open().await;
    assert!(m2.version > v1);
    let snap2 = rd.snapshot(&m2);
    let r = snap2
        .query("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    assert!(ids(&r).is_empty(), "{:?}", r.stats);
    let moved = 9 * ROWS + 5;
    let r = snap2
        .query("t", &query(Op::Eq(Value::Int(moved))))
        .await
        .unwrap();
    assert_eq!(ids(&r), vec![moved], "{:?}", r.stats);
    assert_eq!(
        r.stats.files_scanned, 0,
        "answered by the rebuilt index: {:?}",
        r.stats
    );

    // dropIndex, then an index of the same name over another column: the new version's
    // blocks and directory are never the old ones.
    fx.overlay.drop_index("t", "by_id").await.unwrap();
    fx.overlay
        .create_index("t", "by_id", &["email".into()], IndexOptions::default())
        .await
        .unwrap();
    fx.overlay.build("t", |_| {}).await.unwrap();
    fx.overlay.publish().await.unwrap();
    let m3 = rd.open().await;
    let snap3 = rd.snapshot(&m3);
    for id in [3, 9 * ROWS + 5, 2 * ROWS + 40_000] {
        let q = Query {
            conditions: vec![Condition::new("email", Op::Eq(Value::String(email(id))))],
            ..query(Op::IsNull)
        };
        let r = snap3.query("t", &q).await.unwrap();
        assert_eq!(ids(&r), vec![id], "{:?}", r.stats);
        assert_eq!(r.stats.index.as_deref(), Some("by_id"));
        assert!(r.stats.rejections.is_empty(), "{:?}", r.stats.rejections);
    }
}

#[tokio::test]
async fn a_query_matching_most_rows_reads_no_more_than_a_scan() {
    let fx = fixture().await;
    let regions: Vec<Value> = (0..45)
        .map(|i| Value::String(format!("region-{i:02}")))
        .collect();
    let q = Query {
        conditions: vec![Condition::new("region", Op::In(regions))],
        ..query(Op::IsNull)
    };
    let run = |scan_only: bool| {
        let q = q.clone();
        let fx = &fx;
        async move {
            let rd = Reader::new(fx);
            let m = rd.open().await;
            let snap = rd.snapshot(&m).with_scan_only(scan_only);
            snap.query("t", &q).await.unwrap()
        }
    };
    let scan = run(true).await;
    let r = run(false).await;
    assert_eq!(ids(&r), ids(&scan));
    assert_eq!(ids(&r).len() as i64, FILES * ROWS * 45 / 50);
    assert!(
        r.stats.bytes <= scan.stats.bytes,
        "index {:?} read more than a scan {:?}",
        r.stats,
        scan.stats
    );
    assert!(
        r.stats
            .index_declined
            .as_deref()
            .is_some_and(|d| d.starts_with("by_region")),
        "{:?}",
        r.stats
    );
    // A selective IN on the same index still uses it.
    let q = Query {
        conditions: vec![
            Condition::new("region", Op::In(vec![Value::String("region-07".into())])),
            Condition::new("id", Op::Lt(Value::Int(2_000))),
        ],
        ..query(Op::IsNull)
    };
    let rd = Reader::new(&fx);
    let m = rd.open().await;
    let r = rd.snapshot(&m).query("t", &q).await.unwrap();
    assert_eq!(
        ids(&r),
        (0..2_000).filter(|i| i % 50 == 7).collect::<Vec<i64>>()
    );
}

#[tokio::test]
async fn explain_names_the_plan_without_reading_data() {
    use skerry_core::read::explain::FileAction;
    let fx = fixture().await;
    let (rd, snap) = opened(&fx).await;
    let id = 3 * ROWS + 10;
    let before = (rd.overlay.stats(), rd.data.stats());
    let e = snap
        .explain("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    // Nothing read: the run's directory is in the manifest.
    assert_eq!(rd.overlay.stats().since(&before.0).requests, 0);
    assert_eq!(rd.data.stats().since(&before.1).requests, 0);
    assert_eq!(e.index.as_deref(), Some("by_id"), "{e:?}");
    assert_eq!(e.index_columns, vec!["id".to_string()]);
    assert_eq!(e.keys, 1);
    let actions: Vec<FileAction> = e.files.iter().map(|f| f.action).collect();
    assert_eq!(
        actions,
        vec![
            FileAction::Prune,
            FileAction::Prune,
            FileAction::Prune,
            FileAction::Run
        ],
        "{e:?}"
    );
    assert!(e.files.iter().all(|f| !f.metadata_cached));
    // Cold: the block, the metadata, the pages.
    assert_eq!(
        (e.index_requests, e.data_requests, e.round_trips),
        (1, 2, 3),
        "{e:?}"
    );
    // After the query, the metadata is cached: block and pages.
    let r = snap
        .query("t", &query(Op::Eq(Value::Int(id))))
        .await
        .unwrap();
    check_rows(&r, &[id]);
    let e = snap
        .explain("t", &query(Op::Eq(Value::Int(id + 1))))
        .await
        .unwrap();
    assert!(e.files[3].metadata_cached);
    assert_eq!((e.data_requests, e.round_trips), (1, 2), "{e:?}");

    // A predicate most rows match: the index is declined, every file scanned, and why.
    let regions: Vec<Value> = (0..45)
        .map(|i| Value::String(format!("region-{i:02}")))
        .collect();
    let q = Query {
        conditions: vec![Condition::new("region", Op::In(regions))],
        ..query(Op::IsNull)
    };
    let e = snap.explain("t", &q).await.unwrap();
    assert_eq!(e.index, None);
    assert!(e.reason.contains("a scan reads less"), "{e:?}");
    assert!(e.files.iter().all(|f| f.action == FileAction::Scan));
    // No usable index at all.
    let q = Query {
        conditions: vec![Condition::new("qty", Op::Eq(Value::Int(3)))],
        ..query(Op::IsNull)
    };
    let e = snap.explain("t", &q).await.unwrap();
    assert_eq!(e.index, None);
    assert!(e.reason.starts_with("no ready index"), "{e:?}");
    // Unknown columns fail as the query would.
    let q = Query {
        columns: Some(vec!["nope".into()]),
        ..query(Op::Eq(Value::Int(1)))
    };
    assert_eq!(
        snap.explain("t", &q).await.unwrap_err().code(),
        "E_NOT_FOUND"
    );
}

#[tokio::test]
async fn metrics_count_reads_cache_tiers_repairs_and_builds() {
    let fx = fixture().await;
    let snap = fx.overlay.snapshot_with_repairs().await.unwrap();
    for id in [5, 6, ROWS + 7] {
        let r = snap
            .query("t", &query(Op::Eq(Value::Int(id))))
            .await
            .unwrap();
        check_rows(&r, &[id]);
    }
    snap.lookup("t", "by_id", &[Value::Int(9)]).await.unwrap();
    let m = snap.metrics();
    assert_eq!(m.reads.iter().find(|(v, _)| *v == "query").unwrap().1, 3);
    assert_eq!(m.reads.iter().find(|(v, _)| *v == "lookup").unwrap().1, 1);
    assert_eq!(m.builds, 1);
    assert!(m.build_total > 0 && m.build_done == m.build_total, "{m:?}");
    // The second query of file 0 found its metadata cached; the first did not.
    assert!(
        m.cache.metadata.hits >= 1 && m.cache.metadata.misses >= 1,
        "{m:?}"
    );
    assert!(m.data_io.requests > 0 && m.data_io.bytes > 0, "{m:?}");
    let text = m.prometheus();
    assert!(
        text.contains("skerry_reads_total{verb=\"query\"} 3\n"),
        "{text}"
    );
    assert!(text.contains("skerry_builds_total 1\n"), "{text}");

    // A drifted file: its rejection is counted by reason and queued for repair, and the next
    // build drains it.
    std::fs::write(fx.data.join("part-2.parquet"), write_file(9 * ROWS)).unwrap();
    let snap = fx.overlay.snapshot_with_repairs().await.unwrap();
    let id = 2 * ROWS + 3;
    let q = Query {
        verify_files: true,
        ..query(Op::Eq(Value::Int(id)))
    };
    let r = snap.query("t", &q).await.unwrap();
    assert!(ids(&r).is_empty(), "{:?}", r.stats);
    let m = snap.metrics();
    assert!(m.files_drifted >= 1, "{m:?}");
    assert!(
        m.rejections
            .iter()
            .any(|(code, n)| code == "drifted" && *n >= 1),
        "{m:?}"
    );
    assert!(m.repairs_queued >= 1, "{m:?}");
    fx.overlay.refresh("t").await.unwrap();
    fx.overlay.build("t", |_| {}).await.unwrap();
    let m = fx.overlay.snapshot().await.unwrap().metrics();
    assert_eq!(m.builds, 2);
    assert!(m.repairs_drained >= 1, "{m:?}");
    assert!(m
        .prometheus()
        .contains("skerry_repairs_total{state=\"drained\"}"));
}

#[tokio::test]
async fn hostile_metadata_offsets_and_inline_directories_are_refused_or_not_trusted() {
    let fx = fixture().await;
    let rd = Reader::new(&fx);
    let good = rd.open().await;
    // Out of bounds: refused at parse time.
    let mut m = good.clone();
    let size = m.tables[0].files[0].size;
    m.tables[0].files[0].metadata_offset = Some(size - 7);
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );
    let mut m = good.clone();
    let run = by_id_run(&mut m);
    let dir = run.directory.clone().expect("an inline directory");
    run.directory = Some(dir[2..].to_string());
    assert_eq!(
        Manifest::from_json(&m.to_json()).unwrap_err().code(),
        "E_MANIFEST"
    );

    // In bounds but wrong: a metadata offset that cuts the page index (or spans the whole
    // file) and an inline directory of the right length whose bytes do not hash to the
    // recorded SHA-256 — the answers stay right; the bundle's directory is read instead.
    let id = 2 * ROWS + 4_242;
    for (offset, flip) in [(Some(size - 8), true), (Some(0), false), (None, true)] {
        let mut m = good.clone();
        for f in &mut m.tables[0].files {
            f.metadata_offset = offset.map(|o| o.min(f.size - 8));
        }
        if flip {
            let d = by_id_run(&mut m).directory.as_mut().unwrap();
            let flipped = if d.starts_with('0') { "1" } else { "0" };
            d.replace_range(0..1, flipped);
        }
        let m = Manifest::from_json(&m.to_json()).unwrap();
        let rd = Reader::new(&fx);
        let snap = rd.snapshot(&m);
        let r = snap
            .query("t", &query(Op::Eq(Value::Int(id))))
            .await
            .unwrap();
        check_rows(&r, &[id]);
        assert!(r.stats.rejections.is_empty(), "{:?}", r.stats);
        if flip {
            // Directory + block from the bundle.
            assert_eq!(r.stats.index_requests, 2, "{:?}", r.stats);
        }
    }
}

fn by_id_run(m: &mut Manifest) -> &mut skerry_core::formats::manifest::TableRun {
    m.tables[0]
        .indexes
        .iter_mut()
        .find(|i| i.name == "by_id")
        .and_then(|i| i.run.as_mut())
        .expect("a run over 4 files")
}
