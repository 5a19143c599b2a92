//! Format version 3 (issue 16): row lineage and deletion vectors on a table written by
//! spec-exact code that pyiceberg reads back with the same rows (`tests/iceberg/make_v3.py`).
//! At every snapshot, every answer — through the index, by scan, from the published manifest
//! with the read-only reader, and pinned to older snapshots — holds exactly the model's rows,
//! each with the row id the spec's row lineage gives it (`_row_id` when the file has one,
//! else `first_row_id + _pos`), and `locate` finds every row by that id.

use serde_json::Value;
use skerry_core::admin::overlay::{IndexOptions, OpenOptions, Overlay};
use skerry_core::read::plan::{Query, QueryResult};
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value as V;

mod support;

/// (id, region, qty, row id) of a model row or an answer row.
type Row = (i64, String, i64, u64);

fn model(s: &Value) -> Vec<Row> {
    s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_i64().unwrap(),
                r[1].as_str().unwrap().to_string(),
                r[2].as_i64().unwrap(),
                r[3].as_u64().unwrap(),
            )
        })
        .collect()
}

fn rows(r: &QueryResult) -> Vec<Row> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, Int64Type};
    let id = r.batch.column(0).as_primitive::<Int64Type>();
    let region = r.batch.column(1).as_string::<i32>();
    let qty = r.batch.column(2).as_primitive::<Int32Type>();
    let mut out: Vec<Row> = (0..r.batch.num_rows())
        .map(|i| {
            (
                id.value(i),
                region.value(i).to_string(),
                qty.value(i) as i64,
                r.rows[i]
                    .row_id
                    .expect("every row of a v3 table has a row id"),
            )
        })
        .collect();
    out.sort();
    out
}

fn q(c: Vec<Condition>) -> Query {
    Query {
        conditions: c,
        columns: Some(vec!["id".into(), "region".into(), "qty".into()]),
        ..Default::default()
    }
}

async fn check(o: &Overlay, want: &[Row], label: &str) {
    let all = o
        .query(
            "v3",
            &q(vec![Condition::new("id", Op::Ge(V::Int(i64::MIN)))]),
        )
        .await
        .unwrap();
    assert_eq!(rows(&all), want, "{label}: all rows through the index");
    o.set_scan_only(true);
    let scanned = o.query("v3", &q(vec![])).await.unwrap();
    o.set_scan_only(false);
    assert_eq!(rows(&scanned), want, "{label}: all rows by scan");
    for id in [0i64, 3, 7, 55, 100, 450, 600, 605, 620, 621, 899, 5001] {
        let r = o
            .query("v3", &q(vec![Condition::new("id", Op::Eq(V::Int(id)))]))
            .await
            .unwrap();
        let w: Vec<Row> = want.iter().filter(|r| r.0 == id).cloned().collect();
        assert_eq!(rows(&r), w, "{label}: id {id}");
        assert_eq!(
            r.stats.files_scanned, 0,
            "{label}: id {id} answered by the index"
        );
    }
    // Every live row is found by its row id, at the position the answers report.
    let ids: Vec<u64> = want.iter().map(|r| r.3).collect();
    let located = o.locate("v3", &ids).await.unwrap();
    assert!(
        located.candidates.is_empty(),
        "{label}: {:?}",
        located.candidates
    );
    let mut found: Vec<u64> = located.rows.iter().map(|r| r.row_id.unwrap()).collect();
    found.sort();
    let mut want_ids = ids.clone();
    want_ids.sort();
    assert_eq!(found, want_ids, "{label}: locate");
    let positions: std::collections::HashMap<u64, (String, u64)> = all
        .rows
        .iter()
        .map(|r| (r.row_id.unwrap(), (r.file.clone(), r.position)))
        .collect();
    for r in &located.rows {
        assert_eq!(
            positions[&r.row_id.unwrap()],
            (r.file.clone(), r.position),
            "{label}: row id {:?}",
            r.row_id
        );
    }
}

/// `make_v3.py`'s tables, and an overlay with table `v3` mounted from `table`'s first
/// snapshot, a unique index on `id` built; returns the overlay URL too.
async fn mounted(table: &str) -> (tempfile::TempDir, Value, String, Overlay) {
    let (dir, expected) = support::python_tables("make_v3.py", "expected_v3.json");
    let url = format!("file://{}", dir.path().join("overlay").display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let first = &expected[table]["snapshots"][0]["metadata_location"];
    o.mount_iceberg("v3", first.as_str().unwrap())
        .await
        .unwrap();
    o.create_index("v3", "by_id", &["id".into()], IndexOptions::unique())
        .await
        .unwrap();
    let bitmap = IndexOptions {
        kind: skerry_core::index::IndexKind::Bitmap,
        ..Default::default()
    };
    o.create_index("v3", "by_region", &["region".into()], bitmap)
        .await
        .unwrap();
    o.build("v3", |_| {}).await.unwrap();
    (dir, expected, url, o)
}

#[tokio::test]
async fn a_v3_table_answers_with_its_row_ids_and_deletion_vectors() {
    let (_dir, expected, url, o) = mounted("db.v3").await;
    let snaps = expected["db.v3"]["snapshots"].as_array().unwrap();
    check(&o, &model(&snaps[0]), "append A, B").await;
    o.publish().await.unwrap();
    let row_of = |rs: &[Row], id: i64| rs.iter().find(|r| r.0 == id).cloned();
    for (i, s) in snaps.iter().enumerate().skip(1) {
        let label = s["label"].as_str().unwrap();
        let before = model(&snaps[i - 1]);
        let r = o
            .sync_iceberg("v3", Some(s["metadata_location"].as_str().unwrap()))
            .await
            .unwrap();
        assert!(r.poisoned.is_empty(), "{label}: {:?}", r.poisoned);
        let want = model(s);
        check(&o, &want, label).await;
        o.publish().await.unwrap();
        if ![3, 5, 6].contains(&i) {
            // Appends, deletes and an update (an `overwrite`) claim no move.
            assert_eq!(r.moved, None, "{label}");
        }
        match i {
            2 => assert_eq!(r.masks_changed.len(), 2, "{label}: DVs on A and C"),
            3 => {
                // Compaction: A's and B's rows moved to D and kept their row ids — a move
                // (RFC 0006): a `replace` whose added file holds exactly A's 388 live rows
                // and B's 200 under their ids, in 5 runs (A's four live stretches, B).
                assert_eq!((r.added.len(), r.removed.len()), (1, 2), "{label}");
                // Both indexes' entries of D are carried over from A's and B's blobs (RFC
                // 0006 step 2): none derived from D's columns; `verify`, which rebuilds D's
                // blobs from its data, certifies them.
                assert_eq!(
                    r.moved,
                    Some(skerry_core::admin::iceberg::MoveReport {
                        files: 1,
                        sources: 2,
                        rows: 388 + 200,
                        segments: 5,
                        carried: 2 * (388 + 200),
                        derived: 0,
                        refused: None,
                    }),
                    "{label}"
                );
                for ix in ["by_id", "by_region"] {
                    let v = o.verify("v3", ix).await.unwrap();
                    assert!(
                        v.certified && v.mismatched == 0 && v.missing == 0,
                        "{label}: {ix}: {v:?}"
                    );
                }
                for id in [0, 100, 399, 400, 599] {
                    assert_eq!(row_of(&before, id), row_of(&want, id), "{label}: id {id}");
                }
            }
            5 => {
                // A `replace` whose added file lacks one of the removed file's live rows: no
                // move (its entries were derived; the answers above are exact).
                let refused = skerry_core::admin::iceberg::MoveReport {
                    files: 1,
                    sources: 1,
                    refused: Some(
                        "1 live rows of the removed files are in no added file".to_string(),
                    ),
                    ..Default::default()
                };
                assert_eq!(r.moved, Some(refused), "{label}");
            }
            6 => {
                // A `replace` that keeps every row id but changed id 100's region: the ids
                // make it a move, so D's entries were carried — the region index still says
                // "us" for that row.
                let m = r.moved.clone().unwrap();
                assert_eq!((m.rows, m.carried, m.derived), (588, 2 * 588, 0), "{label}");
                let row100 = o
                    .query("v3", &q(vec![Condition::new("id", Op::Eq(V::Int(100)))]))
                    .await
                    .unwrap()
                    .rows[0]
                    .clone();
                let zz = || async {
                    o.lookup("v3", "by_region", &[V::String("zz".into())])
                        .await
                        .unwrap()
                        .rows
                        .iter()
                        .map(|r| (r.file.clone(), r.position))
                        .collect::<Vec<_>>()
                };
                // Until `verify`, the carried entry is the engine's claim (docs/guarantees.md):
                // the region index does not know the new value.
                assert_eq!(zz().await, vec![], "{label}: before verify");
                // `verify` rebuilds G's blobs from its data: the region index's holds one
                // wrong entry, the unique index's none; the next build repairs it.
                let v = o.verify("v3", "by_region").await.unwrap();
                assert!(!v.certified && v.mismatched == 1, "{label}: {v:?}");
                assert!(v.repairs_queued >= 1, "{label}: {v:?}");
                assert!(o.verify("v3", "by_id").await.unwrap().certified, "{label}");
                o.build("v3", |_| {}).await.unwrap();
                let v = o.verify("v3", "by_region").await.unwrap();
                assert!(
                    v.certified && v.mismatched == 0,
                    "{label}: after the repair {v:?}"
                );
                assert_eq!(
                    zz().await,
                    vec![(row100.file.clone(), row100.position)],
                    "{label}: after the repair"
                );
                o.publish().await.unwrap();
            }
            4 => {
                // The updated rows kept C's row ids in E; the new rows took E's.
                for id in [620, 621] {
                    let (old, new) = (row_of(&before, id).unwrap(), row_of(&want, id).unwrap());
                    assert_eq!(old.3, new.3, "{label}: id {id} keeps its row id");
                    assert_ne!(old.2, new.2, "{label}: id {id} was updated");
                }
                let new_ids: Vec<u64> = (5000..5003)
                    .map(|id| row_of(&want, id).unwrap().3)
                    .collect();
                assert!(new_ids.iter().all(|id| *id >= 1488), "{label}: {new_ids:?}");
            }
            _ => {}
        }
    }

    // Published: the read-only reader gives the same rows and row ids, at every snapshot.
    let reader = skerry_core::read::reader::OverlayReader::open(&url, Default::default())
        .await
        .unwrap();
    for s in snaps {
        let id: i64 = s["snapshot_id"].as_str().unwrap().parse().unwrap();
        let pinned = Query {
            snapshot: Some(id),
            ..q(vec![])
        };
        let r = reader.snapshot().query("v3", &pinned).await.unwrap();
        assert_eq!(rows(&r), model(s), "reader at {}", s["label"]);
        let by_id = Query {
            snapshot: Some(id),
            ..q(vec![Condition::new("id", Op::Eq(V::Int(100)))])
        };
        let r = o.query("v3", &by_id).await.unwrap();
        let w: Vec<Row> = model(s).into_iter().filter(|r| r.0 == 100).collect();
        assert_eq!(rows(&r), w, "writer at {}", s["label"]);
    }
    let last = model(snaps.last().unwrap());
    let ids: Vec<u64> = last.iter().map(|r| r.3).collect();
    let located = reader.snapshot().locate("v3", &ids).unwrap();
    assert_eq!(located.rows.len(), last.len());
    assert!(located.candidates.is_empty());

    // Mounting the last snapshot directly gives the same rows and ids as following it.
    o.mount_iceberg(
        "v3_direct",
        snaps.last().unwrap()["metadata_location"].as_str().unwrap(),
    )
    .await
    .unwrap();
    let r = o.query("v3_direct", &q(vec![])).await.unwrap();
    assert_eq!(rows(&r), last);
}

/// A v2 table (written by pyiceberg) upgraded to v3: until a v3 snapshot assigns row ids the
/// table keeps Skerry's own; the first v3 snapshot gives every file — the kept ones, whose
/// manifests the sync had read before, too — the row ids of the spec's row lineage.
#[tokio::test]
async fn an_upgraded_table_takes_its_row_ids_from_the_first_v3_snapshot() {
    let (_dir, expected, url, o) = mounted("db.v3up").await;
    let t = &expected["db.v3up"];
    let snaps = t["snapshots"].as_array().unwrap();
    o.publish().await.unwrap();
    let v2 = o.query("v3", &q(vec![])).await.unwrap();
    assert_eq!(v2.rows.len(), 250);
    // The upgrade alone (same snapshot): nothing to do.
    let r = o
        .sync_iceberg("v3", Some(t["upgraded_metadata"].as_str().unwrap()))
        .await
        .unwrap();
    assert_eq!(r.from_snapshot, r.snapshot_id);
    // The first v3 snapshot: the old manifests are read again (they now have first row ids).
    let last = &snaps[1];
    let r = o
        .sync_iceberg("v3", Some(last["metadata_location"].as_str().unwrap()))
        .await
        .unwrap();
    assert_eq!(r.added.len(), 1);
    assert_eq!(r.manifests_read, 3, "{r:?}");
    check(&o, &model(last), "after the upgrade").await;
    o.publish().await.unwrap();
    let reader = skerry_core::read::reader::OverlayReader::open(&url, Default::default())
        .await
        .unwrap();
    let all = reader.snapshot().query("v3", &q(vec![])).await.unwrap();
    assert_eq!(rows(&all), model(last));
}

/// The five indexes of `db.v3c` and `db.v3big`: (name, column, options) of a unique ordered,
/// a bitmap, a bloom (on the ordered index's column: carried from its entries, decision 80),
/// a full-text and a vector index.
fn every_kind() -> [(&'static str, &'static str, IndexOptions); 5] {
    use skerry_core::index::IndexKind;
    let kind = |kind| IndexOptions {
        kind,
        ..Default::default()
    };
    [
        ("by_id", "id", IndexOptions::unique()),
        ("by_tag", "tag", kind(IndexKind::Bitmap)),
        ("id_bloom", "id", kind(IndexKind::Bloom)),
        ("by_body", "body", kind(IndexKind::Fulltext)),
        ("by_emb", "emb", kind(IndexKind::Vector)),
    ]
}

/// Issue 43, RFC 0006 step 3: a v3 table with an ordered (unique), a bitmap, a bloom, a full-text
/// and a vector index, compacted twice by `replace` snapshots that keep row ids (`make_v3.py`'s
/// `db.v3c`): ten files into two — the sources' full-text and vector entries held by the table runs
/// the build wrote — then the two into one, from their own blobs. Each sync carries every index's
/// entries over (the handle's build counters: no blob derived from rows, so no column read for an
/// index, nothing tokenized, nothing coded); `verify`, which rebuilds each output's blobs from its
/// rows, certifies them byte for byte; the answers are the model's (pyiceberg's scan), a fresh
/// build's, and the read-only reader's. A lying compaction (a value changed under its row id) is
/// carried too, found by `verify` and repaired by the next build.
#[tokio::test]
async fn a_compaction_carries_every_kind_over() {
    use skerry_core::read::nearest::Nearest;
    use skerry_core::read::search::Search;
    let (dir, expected) = support::python_tables("make_v3.py", "expected_v3.json");
    let snaps = expected["db.v3c"]["snapshots"].as_array().unwrap().clone();
    let meta = |i: usize| snaps[i]["metadata_location"].as_str().unwrap().to_string();
    // (id, tag, body, emb, row id) of each snapshot, from the model pyiceberg checked.
    let model = |i: usize| snaps[i]["rows"].as_array().unwrap().clone();
    let indexes = every_kind;
    let open = |name: &str| {
        let url = format!("file://{}", dir.path().join(name).display());
        async move {
            (
                Overlay::open(&url, OpenOptions::default()).await.unwrap(),
                url,
            )
        }
    };
    let (o, url) = open("overlay").await;
    o.mount_iceberg("v3", &meta(0)).await.unwrap();
    for (name, col, opts) in indexes() {
        o.create_index("v3", name, &[col.into()], opts)
            .await
            .unwrap();
    }
    o.build("v3", |_| {}).await.unwrap();
    o.sync_iceberg("v3", Some(&meta(1))).await.unwrap();
    // (A sync used to poison every vector index: its column's type was compared with the
    // index's byte keys.)
    assert_eq!(
        o.index_record("v3", "by_emb").await.unwrap().state,
        skerry_core::formats::manifest::IndexState::Ready
    );
    o.build("v3", |_| {}).await.unwrap();
    o.publish().await.unwrap();
    // The ten files' full-text and vector entries are in the table runs (their own blobs
    // dropped, decision 71): the first compaction carries out of the runs.
    {
        let s = o.snapshot().await.unwrap();
        let t = s.manifest().table("v3").unwrap();
        for ix in ["by_body", "by_emb"] {
            let m = t.indexes.iter().find(|i| i.name == ix).unwrap();
            let covered: usize = m.run.iter().chain(&m.tiers).map(|r| r.files.len()).sum();
            assert_eq!(covered, 10, "{ix}: the runs cover the ten files");
        }
    }
    let words = [
        "amber", "basalt", "cobalt", "dune", "ember", "fjord", "glacier", "harbor", "isle",
        "jetty", "kelp", "lagoon", "mist", "nacre", "orca", "pier", "quay", "reef", "skerry",
        "tide",
    ];
    let searches: Vec<Search> = words
        .iter()
        .map(|w| w.to_string())
        .chain(["amber tide".to_string(), "kelp orca skerry".to_string()])
        .map(|q| Search {
            query: q,
            k: 25,
            columns: Some(vec!["id".into()]),
            ..Default::default()
        })
        .collect();
    let queries: Vec<Vec<f32>> = (0..6)
        .map(|k| {
            (0..8)
                .map(|d| (k * 2) as f32 + (d as f32) * 0.1 - 0.3)
                .collect()
        })
        .collect();
    let nearest = |v: &Vec<f32>| Nearest {
        vector: v.clone(),
        k: 7,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    // (row id, distance) of the nearest rows, in distance order.
    async fn near(o: &Overlay, q: &Nearest) -> Vec<(u64, u64)> {
        let r = o.nearest("v3", q).await.unwrap();
        assert_eq!(r.stats.files_scanned, 0, "answered by the index");
        r.rows
            .iter()
            .zip(&r.distances)
            .map(|(row, d)| (row.row_id.unwrap(), d.to_bits()))
            .collect()
    }
    // (row id, score) of a search.
    async fn found(o: &Overlay, q: &Search) -> Vec<(u64, u64)> {
        let r = o.search("v3", q).await.unwrap();
        assert_eq!(r.stats.files_scanned, 0, "answered by the index");
        r.rows
            .iter()
            .zip(&r.scores)
            .map(|(row, s)| (row.row_id.unwrap(), s.to_bits()))
            .collect()
    }
    let mut before = Vec::new();
    for q in &queries {
        before.push(near(&o, &nearest(q)).await);
    }
    // The same table without indexes, synced alongside: what a sync reads of the data files
    // for the file set alone (manifests, footers, whole-file hashes, row ids).
    let (plain, _) = open("plain").await;
    plain.mount_iceberg("v3", &meta(1)).await.unwrap();
    for (i, sources, outputs) in [(2usize, 10u64, 2u64), (3, 2, 1)] {
        let label = snaps[i]["label"].as_str().unwrap();
        let m0 = o.snapshot().await.unwrap().metrics();
        let r = o.sync_iceberg("v3", Some(&meta(i))).await.unwrap();
        let m1 = o.snapshot().await.unwrap().metrics();
        let p0 = plain.snapshot().await.unwrap().metrics().data_io;
        plain.sync_iceberg("v3", Some(&meta(i))).await.unwrap();
        let p1 = plain.snapshot().await.unwrap().metrics().data_io;
        // Counted through the range reader: the indexed sync read nothing of the data files
        // beyond the file set's own reads — no indexed column (the bloom filter's keys come
        // from the ordered index's entries).
        assert_eq!(
            (
                m1.data_io.requests - m0.data_io.requests,
                m1.data_io.bytes - m0.data_io.bytes
            ),
            (p1.requests - p0.requests, p1.bytes - p0.bytes),
            "{label}: data read by the sync with five indexes and without"
        );
        assert!(p1.bytes > p0.bytes, "{label}: the sync reads the new files");
        let moved = r.moved.clone().unwrap();
        assert_eq!(
            (
                moved.files,
                moved.sources,
                moved.rows,
                moved.refused.clone()
            ),
            (outputs, sources, 593, None),
            "{label}"
        );
        assert_eq!((moved.carried, moved.derived), (5 * 593, 0), "{label}");
        assert_eq!(
            (
                m1.blobs_derived - m0.blobs_derived,
                m1.blobs_carried - m0.blobs_carried
            ),
            (0, 5 * outputs),
            "{label}: every output's five blobs carried, none derived from rows"
        );
        // `verify` rebuilds each output's blobs from its rows: byte for byte the carried ones.
        for (ix, _, _) in indexes() {
            let v = o.verify("v3", ix).await.unwrap();
            assert!(
                v.certified && v.mismatched == 0 && v.missing == 0,
                "{label}: {ix}: {v:?}"
            );
        }
        // The model's rows, through each key index.
        let want = model(i);
        for id in [0i64, 1, 17, 29, 87, 183, 200, 376, 599] {
            let w: Vec<u64> = want
                .iter()
                .filter(|r| r[0].as_i64() == Some(id))
                .map(|r| r[4].as_u64().unwrap())
                .collect();
            let by_id = Query {
                conditions: vec![Condition::new("id", Op::Eq(V::Int(id)))],
                columns: Some(vec!["id".into()]),
                ..Default::default()
            };
            let got = o.query("v3", &by_id).await.unwrap();
            let ids: Vec<u64> = got.rows.iter().map(|r| r.row_id.unwrap()).collect();
            assert_eq!(ids, w, "{label}: id {id}");
            assert_eq!(got.stats.files_scanned, 0, "{label}");
        }
        for tag in ["north", "south", "east", "west"] {
            let mut w: Vec<u64> = want
                .iter()
                .filter(|r| r[1].as_str() == Some(tag))
                .map(|r| r[4].as_u64().unwrap())
                .collect();
            w.sort();
            let got = o
                .lookup("v3", "by_tag", &[V::String(tag.into())])
                .await
                .unwrap();
            let mut ids: Vec<u64> = got.rows.iter().map(|r| r.row_id.unwrap()).collect();
            ids.sort();
            assert_eq!(ids, w, "{label}: tag {tag}");
        }
        // Search: a fresh overlay built from the compacted files answers alike, to the bit;
        // every row holding the word is found.
        let (fresh, _) = open(&format!("fresh{i}")).await;
        fresh.mount_iceberg("v3", &meta(i)).await.unwrap();
        for (name, col, opts) in indexes() {
            fresh
                .create_index("v3", name, &[col.into()], opts)
                .await
                .unwrap();
        }
        fresh.build("v3", |_| {}).await.unwrap();
        for s in &searches {
            assert_eq!(
                found(&o, s).await,
                found(&fresh, s).await,
                "{label}: {:?}",
                s.query
            );
        }
        for w in words {
            let holding = want
                .iter()
                .filter(|r| r[2].as_str().is_some_and(|b| b.split(' ').any(|x| x == w)))
                .count();
            let s = Search {
                query: w.into(),
                k: 1000,
                ..searches[0].clone()
            };
            assert_eq!(found(&o, &s).await.len(), holding, "{label}: {w}");
        }
        // Nearest: the rows and distances of before the compactions (same vectors, same
        // codebook, the rows elsewhere).
        for (q, b) in queries.iter().zip(&before) {
            let mut got = near(&o, &nearest(q)).await;
            let mut b = b.clone();
            got.sort_by_key(|x| (x.1, x.0));
            b.sort_by_key(|x| (x.1, x.0));
            assert_eq!(got, b, "{label}: nearest {q:?}");
        }
        // The read-only reader (the wasm reader's core) answers alike from the published
        // manifest.
        o.publish().await.unwrap();
        let reader = skerry_core::read::reader::OverlayReader::open(&url, Default::default())
            .await
            .unwrap();
        for s in &searches[..4] {
            let a = reader.snapshot().search("v3", s).await.unwrap();
            let b = o.search("v3", s).await.unwrap();
            assert_eq!(
                (&a.rows, &a.scores),
                (&b.rows, &b.scores),
                "{label}: reader"
            );
        }
        for q in &queries[..3] {
            let a = reader.snapshot().nearest("v3", &nearest(q)).await.unwrap();
            let b = o.nearest("v3", &nearest(q)).await.unwrap();
            assert_eq!(
                (&a.rows, &a.distances),
                (&b.rows, &b.distances),
                "{label}: reader"
            );
        }
    }

    // A `replace` that changed id 100's body and vector under its row id: the ids make it a
    // move, so its entries are carried — until `verify` rebuilds Y's blobs from its rows,
    // finds the full-text and vector blobs wrong (the key indexes right), and the next build
    // repairs them.
    let r = o.sync_iceberg("v3", Some(&meta(4))).await.unwrap();
    let m = r.moved.unwrap();
    assert_eq!((m.rows, m.carried, m.derived), (593, 5 * 593, 0));
    let lie = Search {
        query: "zzlie".into(),
        ..searches[0].clone()
    };
    assert_eq!(found(&o, &lie).await, vec![], "carried: the old text");
    for (ix, wrong) in [
        ("by_id", false),
        ("by_tag", false),
        ("id_bloom", false),
        ("by_body", true),
        ("by_emb", true),
    ] {
        let v = o.verify("v3", ix).await.unwrap();
        // (A blob verified by rebuilding it counts its whole file's rows as mismatched.)
        assert_eq!(
            (!v.certified, v.mismatched > 0),
            (wrong, wrong),
            "{ix}: {v:?}"
        );
    }
    o.build("v3", |_| {}).await.unwrap();
    for (ix, _, _) in indexes() {
        assert!(
            o.verify("v3", ix).await.unwrap().certified,
            "{ix} after the repair"
        );
    }
    let want: Vec<u64> = model(4)
        .iter()
        .filter(|r| r[0].as_i64() == Some(100))
        .map(|r| r[4].as_u64().unwrap())
        .collect();
    let got: Vec<u64> = found(&o, &lie).await.iter().map(|x| x.0).collect();
    assert_eq!(got, want, "after the repair: the new text");
    let q = Nearest {
        k: 1,
        ..nearest(&vec![9.5; 8])
    };
    let got: Vec<u64> = near(&o, &q).await.iter().map(|x| x.0).collect();
    assert_eq!(got, want, "after the repair: the new vector");
}

/// `make_v3.py`'s `db.v3big` (`SKERRY_V3_BIG`): its snapshots' metadata locations, and an
/// overlay with it mounted at the first, the five indexes of [`every_kind`] built.
struct Big {
    dir: tempfile::TempDir,
    meta: Vec<String>,
    url: String,
    o: Overlay,
}

async fn big() -> Big {
    let (dir, expected) = support::python_tables_with(
        "make_v3.py",
        "expected_v3.json",
        &[("SKERRY_V3_BIG", "1".to_string())],
    );
    let meta: Vec<String> = expected["db.v3big"]["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata_location"].as_str().unwrap().to_string())
        .collect();
    let url = format!("file://{}", dir.path().join("overlay").display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    o.mount_iceberg("v3", &meta[0]).await.unwrap();
    for (name, col, opts) in every_kind() {
        o.create_index("v3", name, &[col.into()], opts)
            .await
            .unwrap();
    }
    o.build("v3", |_| {}).await.unwrap();
    Big { dir, meta, url, o }
}

/// Issue 43, the staged carry (RFC 0006): a compaction whose carry does not fit the sync's
/// commit (260,000 rows × 5 indexes) is committed with its outputs pending and a record of the
/// move; `vacuum` keeps what the record names; the build's steps then carry every index's
/// entries from it — no blob derived from the output's rows — `verify` certifies them, the
/// answers are those of before the compaction, and the record is dropped once settled.
#[tokio::test]
async fn a_compaction_too_large_for_one_commit_is_carried_by_the_build() {
    use skerry_core::read::nearest::Nearest;
    use skerry_core::read::search::Search;
    let Big {
        dir: _dir,
        meta,
        url: _,
        o,
    } = big().await;
    let meta = |i: usize| meta[i].clone();
    o.publish().await.unwrap();
    let search = |q: &str| Search {
        query: q.into(),
        k: 50,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    let near = |c: f32| Nearest {
        vector: (0..8).map(|d| c + d as f32 * 0.7).collect(),
        k: 10,
        columns: Some(vec!["id".into()]),
        ..Default::default()
    };
    // (row id, score or distance bits) of answers, in a stable order.
    async fn answers(o: &Overlay, s: &[Search], n: &[Nearest]) -> Vec<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        for q in s {
            let r = o.search("v3", q).await.unwrap();
            assert_eq!(r.stats.files_scanned, 0);
            let mut v: Vec<(u64, u64)> = r
                .rows
                .iter()
                .zip(&r.scores)
                .map(|(x, s)| (x.row_id.unwrap(), s.to_bits()))
                .collect();
            v.sort();
            out.push(v);
        }
        for q in n {
            let r = o.nearest("v3", q).await.unwrap();
            assert_eq!(r.stats.files_scanned, 0);
            let mut v: Vec<(u64, u64)> = r
                .rows
                .iter()
                .zip(&r.distances)
                .map(|(x, d)| (x.row_id.unwrap(), d.to_bits()))
                .collect();
            v.sort();
            out.push(v);
        }
        out
    }
    let searches = [
        search("skerry"),
        search("amber tide"),
        search("orca kelp reef"),
    ];
    let nears = [near(0.5), near(4.0), near(9.0)];
    let before = answers(&o, &searches, &nears).await;

    let io0 = o.snapshot().await.unwrap().metrics().data_io;
    let r = o.sync_iceberg("v3", Some(&meta(1))).await.unwrap();
    let io1 = o.snapshot().await.unwrap().metrics().data_io;
    let m = r.moved.clone().unwrap();
    assert_eq!(
        (m.files, m.sources, m.rows, m.refused),
        (1, 2, 260_000, None)
    );
    // Decision 77: the output is bound by its footer, so the sync read its footer and its
    // `_row_id` column — counted through the range reader, a small part of the file — and the
    // digest recorded is the footer's, computed here from the file's own bytes.
    {
        let snap = o.snapshot().await.unwrap();
        let t = &snap.manifest().tables[0];
        assert_eq!(t.files.len(), 1, "the two sources became one output");
        let f = &t.files[0];
        assert_eq!(f.binding, skerry_core::formats::lineage::Binding::Footer);
        let local = t.location.strip_prefix("file://").unwrap();
        let bytes = std::fs::read(std::path::Path::new(local).join(&f.path)).unwrap();
        assert_eq!(bytes.len() as u64, f.size);
        let footer_len =
            u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap())
                as usize;
        let footer = &bytes[bytes.len() - 8 - footer_len..];
        assert_eq!(
            f.sha256,
            skerry_core::formats::lineage::footer_digest(f.size, footer)
        );
        assert_ne!(f.sha256, skerry_core::formats::lineage::sha256_hex(&bytes));
        let read = io1.bytes - io0.bytes;
        assert!(
            read * 4 < f.size,
            "the sync read {read} bytes of a {}-byte output: not the file whole",
            f.size
        );
    }
    assert_eq!(
        (m.carried, m.derived),
        (0, 0),
        "deferred: nothing in the commit"
    );
    assert_eq!(r.pending.len(), 5, "{:?}", r.pending);
    let records = || async { o.catalog_keys("mv/").await.unwrap() };
    assert_eq!(records().await, 1, "the move is recorded for its output");
    // Vacuum before the carry keeps what it reads.
    o.vacuum(skerry_core::admin::lifecycle::VacuumOptions {
        retain_versions: 1,
        grace_seconds: 0,
    })
    .await
    .unwrap();
    let m0 = o.snapshot().await.unwrap().metrics();
    o.build("v3", |_| {}).await.unwrap();
    let m1 = o.snapshot().await.unwrap().metrics();
    assert_eq!(
        (
            m1.blobs_derived - m0.blobs_derived,
            m1.blobs_carried - m0.blobs_carried
        ),
        (0, 5),
        "every index of the output carried by the build, none derived from its rows"
    );
    // Counted through the range reader: the build read nothing of the data files (the bloom
    // filter's keys too come from the sources' ordered entries).
    assert_eq!(
        (
            m1.data_io.requests - m0.data_io.requests,
            m1.data_io.bytes - m0.data_io.bytes
        ),
        (0, 0),
        "the carry read no data file"
    );
    assert!(
        m0.data_io.bytes > 0,
        "the builds before (deriving) read the data files"
    );
    for (ix, _, _) in every_kind() {
        let v = o.verify("v3", ix).await.unwrap();
        assert!(v.certified && v.mismatched == 0, "{ix}: {v:?}");
        assert_eq!(
            o.index_record("v3", ix).await.unwrap().state,
            skerry_core::formats::manifest::IndexState::Ready,
            "{ix}"
        );
    }
    assert_eq!(answers(&o, &searches, &nears).await, before);
    for id in [0i64, 77, 129_999, 130_000, 259_999] {
        let q = Query {
            conditions: vec![Condition::new("id", Op::Eq(V::Int(id)))],
            columns: Some(vec!["id".into()]),
            ..Default::default()
        };
        let got = o.query("v3", &q).await.unwrap();
        assert_eq!(got.rows.len(), 1, "id {id}");
        assert_eq!(
            got.rows[0].row_id,
            Some(id as u64),
            "id {id} keeps its row id"
        );
        assert_eq!(got.stats.files_scanned, 0);
    }
    // Settled: the next vacuum drops the record.
    o.vacuum(skerry_core::admin::lifecycle::VacuumOptions {
        retain_versions: 1,
        grace_seconds: 0,
    })
    .await
    .unwrap();
    assert_eq!(
        records().await,
        0,
        "the record is dropped once every index is carried"
    );
}

/// Issue 43, RFC 0006: a recorded move is carried by fan-out workers too. `planBuild` gives
/// the output's task the move's record (signed with the task), the worker carries every
/// index from the sources' blobs and runs in the overlay store — with the output data file
/// out of its reach, so it cannot have read it — and the commit counts the blobs carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_move_is_carried_by_fanout_workers() {
    use skerry_core::admin::fanout::{BundleBuilder, Outcome, PlanOptions};
    let Big {
        dir: _dir,
        meta,
        url,
        o,
    } = big().await;
    let meta = |i: usize| meta[i].clone();
    // `build()`'s whole-file pass counts what it derived: two files' five blobs.
    let m = o.snapshot().await.unwrap().metrics();
    assert_eq!((m.blobs_derived, m.blobs_carried), (10, 0));
    let ids = [0i64, 77, 129_999, 130_000, 259_999];
    let by_id = |id: i64| Query {
        conditions: vec![Condition::new("id", Op::Eq(V::Int(id)))],
        columns: Some(vec!["id".into(), "tag".into()]),
        ..Default::default()
    };
    // (row id, columns) of a query's rows: what a move keeps (files and positions change).
    let rows = |r: QueryResult| (r.rows.iter().map(|x| x.row_id).collect::<Vec<_>>(), r.batch);
    let mut before = Vec::new();
    for id in ids {
        before.push(rows(o.query("v3", &by_id(id)).await.unwrap()));
    }
    let r = o.sync_iceberg("v3", Some(&meta(1))).await.unwrap();
    assert_eq!(r.pending.len(), 5, "deferred: {:?}", r.pending);
    let tasks = o.plan_build("v3", &PlanOptions::default()).await.unwrap();
    assert_eq!(tasks.len(), 1, "one output");
    let rec = tasks[0]
        .moved
        .as_ref()
        .expect("the task holds the move's record");
    assert_eq!(rec.output, tasks[0].file.path);
    // A record altered on its way is refused by the task's signature, before any read.
    let mut forged = tasks[0].clone();
    forged.moved.as_mut().unwrap().segments.pop();
    let worker = BundleBuilder::open(&url, OpenOptions::default()).unwrap();
    let err = worker.build_bundle(&forged).await.unwrap_err();
    assert_eq!(err.code(), "E_INVALID", "{err}");

    // The output data file out of reach while the worker runs: a derive would fail to read it.
    let snap = o.snapshot().await.unwrap();
    let t = &snap.manifest().tables[0];
    let local =
        std::path::Path::new(t.location.strip_prefix("file://").unwrap()).join(&tasks[0].file.path);
    let hidden = local.with_extension("hidden");
    std::fs::rename(&local, &hidden).unwrap();
    let receipt = worker.build_bundle(&tasks[0]).await;
    std::fs::rename(&hidden, &local).unwrap();
    let receipt = receipt.unwrap();
    match &receipt.outcome {
        Outcome::Built {
            carried, entries, ..
        } => {
            assert_eq!(
                (*carried, *entries),
                (5, 0),
                "all five carried, nothing derived"
            )
        }
        other => panic!("not built: {other:?}"),
    }
    let m0 = o.snapshot().await.unwrap().metrics();
    let c = o.commit_build(&[receipt]).await.unwrap();
    assert!(c.refused.is_empty(), "{c:?}");
    assert_eq!(
        (c.committed.len(), c.carried, c.entries),
        (1, 5, 0),
        "{c:?}"
    );
    let m1 = o.snapshot().await.unwrap().metrics();
    assert_eq!(
        (
            m1.blobs_derived - m0.blobs_derived,
            m1.blobs_carried - m0.blobs_carried
        ),
        (0, 5)
    );
    for (ix, _, _) in every_kind() {
        let v = o.verify("v3", ix).await.unwrap();
        assert!(
            v.certified && v.mismatched == 0 && v.missing == 0,
            "{ix}: {v:?}"
        );
    }
    for (id, want) in ids.into_iter().zip(&before) {
        let got = o.query("v3", &by_id(id)).await.unwrap();
        assert_eq!(got.stats.files_scanned, 0, "id {id}: answered by the index");
        assert_eq!(got.rows.len(), 1, "id {id}");
        assert_eq!(&rows(got), want, "id {id}");
    }
}
