//! Counts at table scale (issue "Full text and counts at lakehouse scale"): a bitmap index's
//! table run answers a count of any number of files with one range read of the values' file
//! lists; the same rows in 10 and in 200 files cost the same requests and bytes; answers stay
//! exact over runs mixing covered, deleted, stale and new files and a damaged run.

use std::sync::Arc;

mod support;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use skerry_core::admin::lifecycle::FileDeletes;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::index::IndexKind;
use skerry_core::read::plan::{Query, QueryStats};
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value;

/// Rows of one file: (region, n).
type Rows = Vec<(String, i64)>;

fn parquet(rows: &Rows) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("region", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]));
    let r: StringArray = rows.iter().map(|x| Some(x.0.clone())).collect();
    let n: Int64Array = rows.iter().map(|x| Some(x.1)).collect();
    let batch =
        RecordBatch::try_new(schema.clone(), vec![Arc::new(r) as ArrayRef, Arc::new(n)]).unwrap();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// Row `i` of the table: a region of 50 (skewed: region 0 is common, 49 rare), n = i % 10.
fn row(i: usize) -> (String, i64) {
    let z = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    let region = (z % 50) * (z % 3) / 2; // uneven cardinalities
    (format!("r{region:02}"), (i % 10) as i64)
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
    /// Live rows with a region in `regions` and (when given) n in `ns`.
    fn count(&self, regions: &[String], ns: Option<&[i64]>) -> u64 {
        let mut c = 0;
        for (name, rows) in &self.files {
            let dead = self
                .deleted
                .iter()
                .find(|d| &d.0 == name)
                .map(|d| d.1.clone())
                .unwrap_or_default();
            for (p, r) in rows.iter().enumerate() {
                if regions.contains(&r.0)
                    && ns.is_none_or(|ns| ns.contains(&r.1))
                    && !dead.contains(&(p as u64))
                {
                    c += 1;
                }
            }
        }
        c
    }
}

/// `rows` rows in `files` files, a bitmap index on `region` and one on `n`, built.
async fn setup(rows: usize, files: usize) -> (Table, Overlay) {
    let mut t = Table {
        dir: tempfile::tempdir().unwrap(),
        files: vec![],
        deleted: vec![],
    };
    std::fs::create_dir_all(t.data()).unwrap();
    let per = rows / files;
    for f in 0..files {
        let rows: Rows = (f * per..(f + 1) * per).map(row).collect();
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
    for (name, col) in [("by_region", "region"), ("by_n", "n")] {
        o.create_index(
            "t",
            name,
            &[col.into()],
            IndexOptions {
                kind: IndexKind::Bitmap,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    o.build("t", |_| {}).await.unwrap();
    (t, o)
}

fn region(r: usize) -> String {
    format!("r{r:02}")
}

fn count_q(regions: &[String], ns: Option<&[i64]>) -> Query {
    let mut conditions = vec![Condition::new(
        "region",
        Op::In(regions.iter().map(|r| Value::String(r.clone())).collect()),
    )];
    if let Some(ns) = ns {
        conditions.push(Condition::new(
            "n",
            Op::In(ns.iter().map(|n| Value::Int(*n)).collect()),
        ));
    }
    Query {
        conditions,
        ..Default::default()
    }
}

/// Requests and bytes of the index store per warm count, over the 50 regions one at a time.
async fn warm_counts(t: &Table, o: &Overlay) -> (f64, f64, u64) {
    let (mut requests, mut bytes, mut most) = (0u64, 0u64, 0u64);
    // Warm: the run's directory read once.
    o.count("t", &count_q(&[region(0)], None)).await.unwrap();
    for r in 0..50 {
        let q = count_q(&[region(r)], None);
        let c = o.count("t", &q).await.unwrap();
        assert_eq!(c.count, t.count(&[region(r)], None), "r{r}: {:?}", c.stats);
        assert_eq!(c.stats.files_scanned, 0, "{:?}", c.stats);
        assert_eq!(c.stats.data_requests, 0, "{:?}", c.stats);
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats.rejections);
        requests += c.stats.index_requests;
        bytes += c.stats.index_bytes;
        most = most.max(c.stats.index_requests);
    }
    (requests as f64 / 50.0, bytes as f64 / 50.0, most)
}

/// The same 200k rows in 10 and in 200 files: a warm count costs at most 2 requests either
/// way (one range of the run), and requests and bytes per count differ by at most 1.5×. A
/// build without the run (per-file bitmaps) costs a request per file — what the run removes.
#[tokio::test]
async fn a_count_costs_the_same_whatever_the_file_count() {
    let (mut seen, mut cold) = (Vec::new(), Vec::new());
    for files in [10, 200] {
        let (t, o) = setup(200_000, files).await;
        let (requests, bytes, most) = warm_counts(&t, &o).await;
        println!(
            "{files} files: {requests:.2} requests, {bytes:.0} bytes per warm count (most {most})"
        );
        assert!(most <= 2, "{files} files: {most} requests");
        // Cold, from a fresh read-only reader of the published manifest: the run's directory.
        o.publish().await.unwrap();
        let reader = skerry_core::read::reader::OverlayReader::open(
            &format!("file://{}", t.dir.path().join("overlay").display()),
            skerry_core::io::store::OpenOptions::default(),
        )
        .await
        .unwrap();
        let c = reader
            .snapshot()
            .count("t", &count_q(&[region(5)], None))
            .await
            .unwrap();
        assert_eq!(c.count, t.count(&[region(5)], None));
        println!(
            "{files} files, cold: {} index requests, {} bytes",
            c.stats.index_requests, c.stats.index_bytes
        );
        assert!(c.stats.index_requests <= 2, "{:?}", c.stats);
        cold.push(c.stats.index_bytes as f64);
        // Per-file bitmaps alone (no run: what a count cost before) read a range per file.
        let scan_like = o
            .count(
                "t",
                &Query {
                    verify_files: true,
                    ..count_q(&[region(5)], None)
                },
            )
            .await
            .unwrap();
        assert!(
            scan_like.stats.requests >= files as u64,
            "{:?}",
            scan_like.stats
        );
        seen.push((requests, bytes));
        o.close().await.unwrap();
    }
    assert!(
        cold[1] <= 1.5 * cold[0] && cold[0] <= 1.5 * cold[1],
        "cold bytes {cold:?}"
    );
    let (a, b) = (seen[0], seen[1]);
    assert!(
        b.0 <= 1.5 * a.0.max(1.0) && a.0 <= 1.5 * b.0.max(1.0),
        "requests per count: {a:?} vs {b:?}"
    );
    assert!(
        b.1 <= 1.5 * a.1 && a.1 <= 1.5 * b.1,
        "bytes per count: {a:?} vs {b:?}"
    );
}

/// Exact over every kind of file a run may meet: covered, with deleted rows (positions from
/// the run), rewritten after the run was built (stale: its own blob, then the next build's
/// run), new (pending: its own blob), and with two columns (positions intersected); a run
/// damaged anywhere is rejected (`*`) and the files counted one by one — never a wrong count.
#[tokio::test]
async fn counts_through_a_run_are_exact_over_every_kind_of_file() {
    let (mut t, o) = setup(24_000, 12).await;
    let check =
        |t: &Table, st: &str, c: u64, regions: &[String], ns: Option<&[i64]>, s: &QueryStats| {
            assert_eq!(c, t.count(regions, ns), "{st} {regions:?} {ns:?}: {s:?}");
        };
    let cases: Vec<(Vec<String>, Option<Vec<i64>>)> = vec![
        (vec![region(0)], None),
        (vec![region(3), region(17), region(49)], None),
        (vec![region(1)], Some(vec![2, 5])),
        (vec!["absent".into()], None),
        ((0..50).map(region).collect(), Some(vec![9])),
    ];
    // Covered files only.
    for (regions, ns) in &cases {
        let c = o
            .count("t", &count_q(regions, ns.as_deref()))
            .await
            .unwrap();
        check(&t, "covered", c.count, regions, ns.as_deref(), &c.stats);
        assert_eq!(c.stats.files_scanned, 0, "{:?}", c.stats);
    }
    // Warm, a single-column count reads the run alone.
    let c = o.count("t", &count_q(&cases[1].0, None)).await.unwrap();
    assert!(c.stats.index_requests <= 1, "{:?}", c.stats);
    assert_eq!(
        c.stats.files_by_index + c.stats.files_pruned,
        12,
        "{:?}",
        c.stats
    );

    // Deleted rows in two files; f005 rewritten (stale until the next build); a new file.
    for f in ["f002.parquet", "f007.parquet"] {
        let dead: Vec<u64> = (0..2_000).filter(|p| p % 3 == 0).collect();
        o.register_deletes(
            "t",
            &[FileDeletes {
                file: f.into(),
                positions: dead.clone(),
            }],
        )
        .await
        .unwrap();
        t.deleted.push((f.into(), dead));
    }
    let rewritten: Rows = (90_000..91_500).map(row).collect();
    t.write("f005.parquet", rewritten);
    o.refresh("t").await.unwrap();
    t.write("f012.parquet", (50_000..52_000).map(row).collect());
    o.register_files("t", &["f012.parquet".into()])
        .await
        .unwrap();
    for stage in ["before the build", "after the build"] {
        for (regions, ns) in &cases {
            let c = o
                .count("t", &count_q(regions, ns.as_deref()))
                .await
                .unwrap();
            check(&t, stage, c.count, regions, ns.as_deref(), &c.stats);
            o.set_scan_only(true);
            let s = o
                .count("t", &count_q(regions, ns.as_deref()))
                .await
                .unwrap();
            o.set_scan_only(false);
            assert_eq!(s.count, c.count, "{stage}: scan {regions:?}");
        }
        o.build("t", |_| {}).await.unwrap();
    }

    // Damage the run: every flip is caught (the run is rejected, `*`) or harmless.
    o.publish().await.unwrap();
    let runs: Vec<_> = walk(&t.dir.path().join("overlay").join("bundles"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .collect();
    assert!(!runs.is_empty(), "no run was built");
    let url = format!("file://{}", t.dir.path().join("overlay").display());
    let mut caught = 0;
    let mut r = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..30 {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        let path = &runs[(r % runs.len() as u64) as usize];
        let original = std::fs::read(path).unwrap();
        let mut b = original.clone();
        let at = ((r >> 8) % b.len() as u64) as usize;
        b[at] ^= 1 << (r % 8);
        std::fs::write(path, &b).unwrap();
        // A fresh reader: nothing of the run cached.
        let reader = skerry_core::read::reader::OverlayReader::open(
            &url,
            skerry_core::io::store::OpenOptions::default(),
        )
        .await
        .unwrap();
        for (regions, ns) in &cases {
            let c = reader
                .snapshot()
                .count("t", &count_q(regions, ns.as_deref()))
                .await
                .unwrap();
            check(
                &t,
                &format!("flip {i} at {at}"),
                c.count,
                regions,
                ns.as_deref(),
                &c.stats,
            );
            if c.stats.rejections.iter().any(|x| x.data_file == "*") {
                caught += 1;
            }
        }
        std::fs::write(path, &original).unwrap();
    }
    assert!(caught > 0, "no flip of the run was ever noticed");
    o.close().await.unwrap();
}

/// The runs of `t`'s bitmap index `by_region` in the writer's view, oldest first.
async fn runs_of(o: &Overlay) -> Vec<skerry_core::formats::manifest::TableRun> {
    let m = o.snapshot_manifest(0).await.unwrap();
    let ix = m.table("t").unwrap().index("by_region").unwrap();
    ix.table_runs().into_iter().cloned().collect()
}

/// Files `f<lo>`..`f<hi>` of 1,000 rows each, registered and built; their names.
async fn append(t: &mut Table, o: &Overlay, files: std::ops::Range<usize>) -> Vec<String> {
    let mut names = Vec::new();
    for f in files {
        let name = format!("f{f:03}.parquet");
        t.write(&name, (f * 1000..(f + 1) * 1000).map(row).collect());
        names.push(name);
    }
    o.register_files("t", &names).await.unwrap();
    o.build("t", |_| {}).await.unwrap();
    names
}

/// Runs are tiers (RFC 0004) for bitmap indexes: four appended files become a run of their
/// own (the first run is not written again); a warm count reads one range per run; counts,
/// queries and two-column counts stay exact with a file rewritten under the first run (its
/// entries there skipped) and deleted rows in the newer run; enough appended rows merge the
/// runs into one.
#[tokio::test]
async fn appended_files_become_a_bitmap_run_of_their_own() {
    let (mut t, o) = setup(40_000, 40).await;
    let first = runs_of(&o).await;
    assert_eq!(first.len(), 1);
    let cases: Vec<(Vec<String>, Option<Vec<i64>>)> = vec![
        (vec![region(0)], None),
        (vec![region(3), region(17), region(49)], None),
        (vec![region(1)], Some(vec![2, 5])),
        ((0..50).map(region).collect(), Some(vec![9])),
    ];
    type Cases = [(Vec<String>, Option<Vec<i64>>)];
    async fn exact(t: &Table, o: &Overlay, runs: u64, by_run: u64, cases: &Cases) {
        for (regions, ns) in cases {
            let c = o
                .count("t", &count_q(regions, ns.as_deref()))
                .await
                .unwrap();
            let want = t.count(regions, ns.as_deref());
            assert_eq!(c.count, want, "{regions:?} {ns:?}: {:?}", c.stats);
            assert!(c.stats.rejections.is_empty(), "{:?}", c.stats);
            assert_eq!(c.stats.files_scanned, 0, "{:?}", c.stats);
        }
        // Warm: one range per run.
        let q = count_q(&[region(5)], None);
        o.count("t", &q).await.unwrap();
        let c = o.count("t", &q).await.unwrap();
        assert_eq!(c.count, t.count(&[region(5)], None));
        assert!(c.stats.index_requests <= runs, "{runs} runs: {:?}", c.stats);
        assert_eq!(c.stats.files_by_run, by_run, "{:?}", c.stats);
    }
    exact(&t, &o, 1, 40, &cases).await;
    let names = append(&mut t, &o, 40..44).await;
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], first[0]);
    assert_eq!(
        now[1]
            .files
            .iter()
            .map(|f| f.path.clone())
            .collect::<Vec<_>>(),
        names
    );
    exact(&t, &o, 2, 44, &cases).await;
    // Deleted rows in a file of the newer run; f003 rewritten; three more files: the four no
    // run covers merge with the newer run.
    let dead: Vec<u64> = (0..1_000).filter(|p| p % 4 == 1).collect();
    o.register_deletes(
        "t",
        &[FileDeletes {
            file: "f041.parquet".into(),
            positions: dead.clone(),
        }],
    )
    .await
    .unwrap();
    t.deleted.push(("f041.parquet".into(), dead));
    exact(&t, &o, 2, 44, &cases).await;
    t.write("f003.parquet", (70_000..71_000).map(row).collect());
    o.refresh("t").await.unwrap();
    append(&mut t, &o, 44..47).await;
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], first[0], "the first run is not written again");
    assert_eq!(now[1].files.len(), 8);
    exact(&t, &o, 2, 47, &cases).await;
    // A fresh reader of the published manifest agrees.
    o.publish().await.unwrap();
    let reader = skerry_core::read::reader::OverlayReader::open(
        &format!("file://{}", t.dir.path().join("overlay").display()),
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap();
    for (regions, ns) in &cases {
        let c = reader
            .snapshot()
            .count("t", &count_q(regions, ns.as_deref()))
            .await
            .unwrap();
        assert_eq!(c.count, t.count(regions, ns.as_deref()));
    }
    // Eight more files (8,000 rows): one run of every file.
    append(&mut t, &o, 47..55).await;
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(now[0].files.len(), 55);
    exact(&t, &o, 1, 55, &cases).await;
    o.close().await.unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
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

/// A damaged run is repaired alone: the newer of two runs is truncated, a count rejects it
/// (its files answered from their own blobs, exact) and queues its repair; the next build
/// withdraws that run only and forms a new one of its files — the older run, which covers
/// ten times the rows, is neither withdrawn nor written again.
#[tokio::test]
async fn a_damaged_run_is_rebuilt_alone() {
    let (mut t, o) = setup(40_000, 40).await;
    let first = runs_of(&o).await;
    append(&mut t, &o, 40..44).await;
    let runs = runs_of(&o).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    let damaged = t.dir.path().join("overlay").join(&runs[1].bundle_path);
    let bytes = std::fs::read(&damaged).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let q = count_q(&[region(7)], None);
    let c = o.count("t", &q).await.unwrap();
    assert_eq!(c.count, t.count(&[region(7)], None));
    let rejected: Vec<_> = c
        .stats
        .rejections
        .iter()
        .filter(|r| r.data_file == "*")
        .collect();
    assert_eq!(rejected.len(), 1, "{:?}", c.stats.rejections);
    assert_eq!(
        rejected[0].bundle_path.as_deref(),
        Some(runs[1].bundle_path.as_str())
    );
    let queued = o.repairs("t", "by_region").await.unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0].path, "*");
    assert_eq!(queued[0].run.as_deref(), Some(runs[1].bundle_path.as_str()));
    o.build("t", |_| {}).await.unwrap();
    assert!(o.repairs("t", "by_region").await.unwrap().is_empty());
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0], first[0], "the older run is kept as it was");
    assert_ne!(now[1].bundle_path, runs[1].bundle_path);
    assert_eq!(now[1].files, runs[1].files);
    for regions in [vec![region(7)], (0..50).map(region).collect()] {
        let c = o.count("t", &count_q(&regions, None)).await.unwrap();
        assert_eq!(c.count, t.count(&regions, None));
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats);
        assert_eq!(c.stats.files_by_run, 44, "{:?}", c.stats);
    }
    o.close().await.unwrap();
}

/// RFC 0004 (one copy, a first step): a merge of bitmap tiers reads the runs it merges, not
/// the blobs of the files they cover — shown by deleting those blobs' bundles before the
/// merge — and leaves out the bitmaps of a file rewritten since; counts through the merged run
/// are exact, every file answered by it.
#[tokio::test]
async fn a_merge_reads_the_runs_it_merges_not_their_files_blobs() {
    let (mut t, o) = setup(8_000, 8).await;
    let first = runs_of(&o).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].files.len(), 8);
    let m = o.snapshot_manifest(0).await.unwrap();
    let mut bundles: Vec<String> = ["by_region", "by_n"]
        .iter()
        .flat_map(|ix| m.table("t").unwrap().index(ix).unwrap().file_entries())
        .map(|e| e.lineage.bundle_path.clone())
        .collect();
    bundles.sort();
    bundles.dedup();
    assert_eq!(
        bundles.len(),
        8,
        "one bundle per file holds both indexes' blobs"
    );
    for b in &bundles {
        std::fs::remove_file(t.dir.path().join("overlay").join(b)).unwrap();
    }
    // f003 rewritten (its bitmaps in the run are stale), eight files appended: the nine no run
    // covers become a run, which merges with the first.
    t.write("f003.parquet", (70_000..71_000).map(row).collect());
    o.refresh("t").await.unwrap();
    append(&mut t, &o, 8..16).await;
    let now = runs_of(&o).await;
    assert_eq!(now.len(), 1, "{now:?}");
    let names = support::merged_run_files(&first[0], &now[0], "f003.parquet");
    assert_eq!(names.len(), 16);
    assert_eq!(names[7], "f003.parquet");
    assert_eq!(
        now[0].ordered.entries, 16_000,
        "positions: f003's old ones left out"
    );
    for (regions, ns) in [
        (vec![region(0)], None),
        (vec![region(3), region(17), region(49)], None),
        (vec![region(1)], Some(vec![2, 5])),
        ((0..50).map(region).collect(), Some(vec![9])),
    ] {
        let c = o
            .count("t", &count_q(&regions, ns.as_deref()))
            .await
            .unwrap();
        assert_eq!(
            c.count,
            t.count(&regions, ns.as_deref()),
            "{regions:?} {ns:?}"
        );
        assert!(c.stats.rejections.is_empty(), "{:?}", c.stats);
        assert_eq!(c.stats.files_scanned, 0, "{:?}", c.stats);
        assert_eq!(c.stats.files_by_run, 16, "{:?}", c.stats);
    }
    o.close().await.unwrap();
}
