//! Reading real Iceberg tables (issue 16, first slice): tables written by pyiceberg 0.12
//! (`tests/iceberg/make_tables.py`: format v1 and v2, appends, a copy-on-write delete, schema
//! evolution, an identity-partitioned table) are read by Skerry's Iceberg reader, which must
//! list, for every snapshot, exactly the data files pyiceberg's own scan plans — and refuse
//! manifests that are truncated, corrupt or point outside the table.

use std::path::PathBuf;

use serde_json::Value;
use skerry_core::formats::iceberg::{self, FileContent, TableMetadata};
use skerry_core::io::ObjectStoreReader;

mod support;

/// Runs the pyiceberg script into a fresh directory.
fn make_tables() -> (tempfile::TempDir, Value) {
    support::python_tables("make_tables.py", "expected.json")
}

fn local(uri: &str) -> PathBuf {
    PathBuf::from(uri.strip_prefix("file://").expect("a file:// location"))
}

#[tokio::test]
async fn every_snapshot_lists_the_files_pyiceberg_plans() {
    let (_dir, expected) = make_tables();
    for (name, t) in expected
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("db."))
    {
        let meta_bytes = std::fs::read(local(t["metadata_location"].as_str().unwrap())).unwrap();
        let meta = TableMetadata::from_json(&meta_bytes).unwrap();
        assert_eq!(
            meta.format_version as u64,
            t["format_version"].as_u64().unwrap()
        );
        assert_eq!(meta.location, t["location"].as_str().unwrap());
        assert_eq!(
            meta.current_snapshot(),
            t["current_snapshot_id"].as_i64(),
            "{name}"
        );
        // The current schema by field id (after renames and promotions).
        let schema = meta.current_schema().unwrap();
        let got: Vec<(i64, String)> = schema
            .fields
            .iter()
            .map(|f| (f.id as i64, f.name.clone()))
            .collect();
        let want: Vec<(i64, String)> = t["schema_fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f[0].as_i64().unwrap(), f[1].as_str().unwrap().to_string()))
            .collect();
        assert_eq!(got, want, "{name} schema");
        let reader = ObjectStoreReader::from_url(&meta.location, &[]).unwrap();
        let snaps = t["snapshots"].as_array().unwrap();
        assert!(snaps.len() >= 2, "{name}");
        for s in snaps {
            let id = s["snapshot_id"].as_i64().unwrap();
            let files = iceberg::snapshot_files(&reader, &meta, id).await.unwrap();
            assert_eq!(
                files.sequence_number,
                s["sequence_number"].as_i64().unwrap()
            );
            let mut got: Vec<(String, u64, u64)> = files
                .data
                .iter()
                .map(|f| {
                    assert_eq!(f.content, FileContent::Data);
                    assert_eq!(f.format, "PARQUET");
                    assert!(f.sequence_number <= files.sequence_number);
                    (
                        format!("{}/{}", meta.location, f.path),
                        f.record_count,
                        f.size,
                    )
                })
                .collect();
            got.sort();
            let want: Vec<(String, u64, u64)> = s["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["path"].as_str().unwrap().to_string(),
                        f["record_count"].as_u64().unwrap(),
                        f["size"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{name} snapshot {id}");
            // pyiceberg deletes copy-on-write: no delete files, and the rows add up.
            assert!(files.deletes.is_empty());
            let rows: u64 = files.data.iter().map(|f| f.record_count).sum();
            assert_eq!(rows, s["rows"].as_u64().unwrap(), "{name} snapshot {id}");
            // Each file's size is the object's size.
            for f in &files.data {
                let p = local(&format!("{}/{}", meta.location, f.path));
                assert_eq!(std::fs::metadata(p).unwrap().len(), f.size);
            }
            assert!(
                files.requests >= 2,
                "the manifest list and at least one manifest"
            );
        }
        // A snapshot the table does not have (expired): a typed error.
        let e = iceberg::snapshot_files(&reader, &meta, 12345)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_NOT_FOUND");
    }
}

/// Data files inherit the data sequence number of the snapshot that added them: in
/// `db.events`, the file of the first append keeps sequence number 1 through later snapshots
/// while the rewritten file gets the overwrite's.
#[tokio::test]
async fn added_files_inherit_their_snapshots_sequence_number() {
    let (_dir, expected) = make_tables();
    let t = &expected["db.events"];
    let meta = TableMetadata::from_json(
        &std::fs::read(local(t["metadata_location"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let reader = ObjectStoreReader::from_url(&meta.location, &[]).unwrap();
    let snaps = t["snapshots"].as_array().unwrap();
    let last = iceberg::snapshot_files(
        &reader,
        &meta,
        snaps.last().unwrap()["snapshot_id"].as_i64().unwrap(),
    )
    .await
    .unwrap();
    let mut seqs: Vec<(i64, u64)> = last
        .data
        .iter()
        .map(|f| (f.sequence_number, f.record_count))
        .collect();
    seqs.sort();
    // Second append (500 rows, seq 2), the rewrite of the first file by the delete (900 rows,
    // seq 3), the last append (300 rows, seq 4).
    assert_eq!(seqs, vec![(2, 500), (3, 900), (4, 300)]);
    for f in &last.data {
        let added_by = snaps
            .iter()
            .find(|s| s["snapshot_id"].as_i64() == Some(f.snapshot_id))
            .expect("added by a snapshot of the table");
        assert_eq!(
            added_by["sequence_number"].as_i64(),
            Some(f.sequence_number)
        );
    }
}

/// Manifests are untrusted input: truncated or bit-flipped Avro, a manifest of another length
/// than the list records, and paths outside the table are typed `E_ICEBERG` errors (never a
/// panic, never a read outside the table).
#[tokio::test]
async fn corrupt_or_escaping_manifests_are_refused() {
    let (_dir, expected) = make_tables();
    let t = &expected["db.events"];
    let meta_path = local(t["metadata_location"].as_str().unwrap());
    let meta_text = std::fs::read_to_string(&meta_path).unwrap();
    let meta = TableMetadata::from_json(meta_text.as_bytes()).unwrap();
    let reader = ObjectStoreReader::from_url(&meta.location, &[]).unwrap();
    let current = meta.current_snapshot().unwrap();
    let list_uri = meta
        .snapshot(current)
        .unwrap()
        .manifest_list
        .clone()
        .unwrap();
    let list_path = local(&list_uri);
    let list = std::fs::read(&list_path).unwrap();

    // Every manifest of the current snapshot: truncate / flip each in turn.
    let metadata_dir = list_path.parent().unwrap().to_path_buf();
    let manifests: Vec<PathBuf> = std::fs::read_dir(&metadata_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.ends_with(".avro") && !n.starts_with("snap-")
        })
        .collect();
    assert!(!manifests.is_empty());
    let intact = iceberg::snapshot_files(&reader, &meta, current)
        .await
        .unwrap();
    let mut refused = std::collections::BTreeMap::new();
    for m in &manifests {
        let good = std::fs::read(m).unwrap();
        for (label, bad) in [
            ("truncated", good[..good.len() * 2 / 3].to_vec()),
            ("header only", good[..40.min(good.len())].to_vec()),
            ("flipped", {
                let mut b = good.clone();
                let at = b.len() - 30;
                b[at] ^= 0xff;
                b
            }),
        ] {
            std::fs::write(m, &bad).unwrap();
            match iceberg::snapshot_files(&reader, &meta, current).await {
                // A manifest of an older snapshot only: the current one does not read it.
                Ok(f) => assert_eq!(f.data, intact.data, "{label} {m:?}"),
                Err(e) => {
                    assert_eq!(e.code(), "E_ICEBERG", "{label} {m:?}: {e}");
                    *refused.entry(label).or_insert(0) += 1;
                }
            }
            std::fs::write(m, &good).unwrap();
        }
    }
    // Every kind of damage to a manifest the current snapshot reads was refused.
    assert_eq!(refused.len(), 3, "{refused:?}");

    // The manifest list: truncated, and pointing outside the table.
    std::fs::write(&list_path, &list[..list.len() / 2]).unwrap();
    let e = iceberg::snapshot_files(&reader, &meta, current)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_ICEBERG", "{e}");
    std::fs::write(&list_path, &list).unwrap();
    for outside in [
        "file:///etc/passwd",
        "file:///tmp/other/snap.avro",
        "../x.avro",
    ] {
        let evil = meta_text.replace(&list_uri, outside);
        let m = TableMetadata::from_json(evil.as_bytes()).unwrap();
        let e = iceberg::snapshot_files(&reader, &m, current)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "E_ICEBERG", "{outside}: {e}");
    }
    // Intact again: reads.
    assert!(!iceberg::snapshot_files(&reader, &meta, current)
        .await
        .unwrap()
        .data
        .is_empty());
}

/// Zstandard-compressed manifests (db.zstd) decode, and no damage to one makes the reader
/// panic or allocate past its bounds: with every 5th byte flipped in turn the reader answers
/// (Avro has no checksums: some flips still decode) or fails with a typed error
/// (`E_ICEBERG`; `E_NOT_FOUND` when the flip renamed a manifest).
#[tokio::test]
async fn damaged_zstandard_manifests_never_panic() {
    let (_dir, expected) = make_tables();
    let t = &expected["db.zstd"];
    let meta_text =
        std::fs::read_to_string(local(t["metadata_location"].as_str().unwrap())).unwrap();
    let meta = TableMetadata::from_json(meta_text.as_bytes()).unwrap();
    let reader = ObjectStoreReader::from_url(&meta.location, &[]).unwrap();
    let current = meta.current_snapshot().unwrap();
    let intact = iceberg::snapshot_files(&reader, &meta, current)
        .await
        .unwrap();
    assert_eq!(intact.data.iter().map(|f| f.record_count).sum::<u64>(), 500);
    let dir = local(&format!("{}/metadata", meta.location));
    let mut refused = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let m = e.unwrap().path();
        if !m.to_str().unwrap().ends_with(".avro") {
            continue;
        }
        let good = std::fs::read(&m).unwrap();
        for at in (0..good.len()).step_by(5) {
            let mut bad = good.clone();
            bad[at] ^= 0x5a;
            std::fs::write(&m, &bad).unwrap();
            match iceberg::snapshot_files(&reader, &meta, current).await {
                // Avro has no checksums: a flip may still decode (a schema name, a value).
                Ok(_) => {}
                // A flipped path in the list names a manifest that does not exist.
                Err(e) => {
                    assert!(
                        ["E_ICEBERG", "E_NOT_FOUND"].contains(&e.code()),
                        "{m:?} byte {at}: {e}"
                    );
                    refused += 1;
                }
            }
        }
        std::fs::write(&m, &good).unwrap();
    }
    assert!(refused > 0);
}

/// Mounting (issue 16, first slice): a pyiceberg table's current snapshot becomes an overlay
/// table that indexes, queries and publishes like a Parquet table; what the first slice does
/// not handle yet is a typed refusal that writes nothing.
#[tokio::test]
async fn a_mounted_table_answers_like_its_rows() {
    use skerry_core::admin::overlay::{IndexOptions, OpenOptions, Overlay};
    use skerry_core::read::plan::Query;
    use skerry_core::read::predicate::{Condition, Op};
    use skerry_core::values::Value as V;

    let (dir, expected) = make_tables();
    let overlay_url = format!("file://{}", dir.path().join("overlay").display());
    let o = Overlay::open(&overlay_url, OpenOptions::default())
        .await
        .unwrap();
    let parted = &expected["db.parted"];
    let info = o
        .mount_iceberg("parted", parted["metadata_location"].as_str().unwrap())
        .await
        .unwrap();
    let current = parted["snapshots"].as_array().unwrap().last().unwrap();
    assert_eq!(info.rows, current["rows"].as_u64().unwrap());
    assert_eq!(
        info.files as usize,
        current["files"].as_array().unwrap().len()
    );
    let src = o.iceberg_source("parted").await.unwrap().unwrap();
    assert_eq!(
        src.snapshot_id,
        parted["current_snapshot_id"].as_i64().unwrap()
    );
    assert_eq!(
        src.sequence_number,
        current["sequence_number"].as_i64().unwrap()
    );
    assert_eq!(src.format_version, 2);

    o.create_index("parted", "by_id", &["id".into()], IndexOptions::unique())
        .await
        .unwrap();
    o.create_index(
        "parted",
        "by_region",
        &["region".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("parted", |_| {}).await.unwrap();
    // The table's rows (make_tables.py): ids 0..900, region eu/us/ap by id % 3, `us` deleted.
    let region = |i: i64| ["eu", "us", "ap"][(i % 3) as usize];
    let q = |c: Condition| Query {
        conditions: vec![c],
        columns: Some(vec!["id".into(), "region".into()]),
        ..Default::default()
    };
    let ids = |r: &skerry_core::read::plan::QueryResult| -> Vec<i64> {
        let a = r
            .batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        let mut v: Vec<i64> = a.values().to_vec();
        v.sort();
        v
    };
    let eu = o
        .query(
            "parted",
            &q(Condition::new("region", Op::Eq(V::String("eu".into())))),
        )
        .await
        .unwrap();
    assert_eq!(
        ids(&eu),
        (0..900).filter(|i| region(*i) == "eu").collect::<Vec<_>>()
    );
    assert_eq!(eu.stats.index.as_deref(), Some("by_region"));
    assert_eq!(eu.stats.files_scanned, 0);
    for (id, found) in [(5i64, true), (4, false), (899, true), (900, false)] {
        let r = o
            .query("parted", &q(Condition::new("id", Op::Eq(V::Int(id)))))
            .await
            .unwrap();
        assert_eq!(ids(&r), if found { vec![id] } else { vec![] }, "id {id}");
    }
    // Published: a read-only reader answers the same from the manifest and the data files.
    o.publish().await.unwrap();
    let reader = skerry_core::read::reader::OverlayReader::open(&overlay_url, Default::default())
        .await
        .unwrap();
    let r = reader
        .snapshot()
        .query(
            "parted",
            &q(Condition::new("region", Op::Eq(V::String("eu".into())))),
        )
        .await
        .unwrap();
    assert_eq!(ids(&r), ids(&eu));

    // Format version 1.
    let v1 = &expected["db.v1"];
    let info = o
        .mount_iceberg("v1", v1["metadata_location"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(info.rows, 300);

    // By table directory: the newest metadata file; gzip-compressed metadata; a
    // version-hint.text that names v2 beside a newer-numbered decoy that is not JSON.
    let parted_dir = parted["location"].as_str().unwrap();
    o.mount_iceberg("parted_dir", parted_dir).await.unwrap();
    let src = o.iceberg_source("parted_dir").await.unwrap().unwrap();
    assert_eq!(
        src.metadata_location,
        parted["metadata_location"].as_str().unwrap()
    );
    let dirs = &expected["dirs"];
    let gz = o
        .mount_iceberg("gz", dirs["gz"]["dir"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(gz.rows, 300);
    assert!(o
        .iceberg_source("gz")
        .await
        .unwrap()
        .unwrap()
        .metadata_location
        .ends_with("00001-copy.gz.metadata.json"));
    let hint = o
        .mount_iceberg("hint", dirs["hint"]["dir"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(hint.rows, 600);
    assert!(o
        .iceberg_source("hint")
        .await
        .unwrap()
        .unwrap()
        .metadata_location
        .ends_with("/metadata/v2.metadata.json"));
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("metadata")).unwrap();
    let e = o
        .mount_iceberg("empty", &format!("file://{}", empty.display()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_NOT_FOUND", "{e}");

    // Refusals write nothing: a missing metadata file, a manifest list outside the table.
    let events = expected["db.events"]["metadata_location"].as_str().unwrap();
    let e = o
        .mount_iceberg("nope", &format!("{events}.missing"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_NOT_FOUND", "{e}");
    let text = std::fs::read_to_string(local(events)).unwrap();
    let meta = TableMetadata::from_json(text.as_bytes()).unwrap();
    let list = meta
        .snapshot(meta.current_snapshot().unwrap())
        .unwrap()
        .manifest_list
        .clone()
        .unwrap();
    let evil = dir.path().join("evil.metadata.json");
    std::fs::write(&evil, text.replace(&list, "file:///etc/passwd")).unwrap();
    let e = o
        .mount_iceberg("evil", &format!("file://{}", evil.display()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_ICEBERG", "{e}");
    let names: Vec<String> = o
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["gz", "hint", "parted", "parted_dir", "v1"]);
}

/// Schema evolution by field id (spec "Schema Evolution"): db.events added `note`, renamed
/// `qty` to `quantity` and promoted it int -> long before its last append, so its files hold
/// three shapes of the table. Mounted, it has the current schema's columns; old files answer
/// NULL for `note`, their `qty` is `quantity` (widened to long); indexes on the renamed and
/// the added column answer like a scan.
#[tokio::test]
async fn an_evolved_table_reads_by_field_id() {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use skerry_core::admin::overlay::{IndexOptions, OpenOptions, Overlay};
    use skerry_core::read::plan::Query;
    use skerry_core::read::predicate::{Condition, Op};
    use skerry_core::values::Value as V;

    let (dir, expected) = make_tables();
    let url = format!("file://{}", dir.path().join("overlay").display());
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let events = expected["db.events"]["metadata_location"].as_str().unwrap();
    let info = o.mount_iceberg("events", events).await.unwrap();
    let names: Vec<(i32, &str, &str)> = info
        .fields
        .iter()
        .map(|f| (f.field_id, f.name.as_str(), f.data_type.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (1, "id", "Int64"),
            (2, "region", "Utf8"),
            (3, "quantity", "Int64"),
            (4, "note", "Utf8")
        ]
    );
    // make_tables.py: ids 0..1500 then 1500..1800 (with note "n"), ids < 100 deleted.
    let all = |c: Vec<Condition>| Query {
        conditions: c,
        columns: Some(vec!["id".into(), "quantity".into(), "note".into()]),
        ..Default::default()
    };
    let check = |r: &skerry_core::read::plan::QueryResult, want: &[i64], label: &str| {
        let b = &r.batch;
        assert_eq!(b.schema().field(1).name(), "quantity");
        let ids = b.column(0).as_primitive::<arrow_array::types::Int64Type>();
        let qty = b.column(1).as_primitive::<arrow_array::types::Int64Type>();
        let note = b.column(2).as_string::<i32>();
        let mut got: Vec<i64> = Vec::new();
        for i in 0..b.num_rows() {
            let id = ids.value(i);
            got.push(id);
            assert_eq!(qty.value(i), id % 7, "{label}: quantity of {id}");
            assert_eq!(note.is_null(i), id < 1500, "{label}: note of {id}");
        }
        got.sort();
        assert_eq!(got, want, "{label}");
    };
    let every: Vec<i64> = (100..1800).collect();
    check(
        &o.query("events", &all(vec![])).await.unwrap(),
        &every,
        "scan",
    );
    o.create_index(
        "events",
        "by_qty",
        &["quantity".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.create_index(
        "events",
        "by_note",
        &["note".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("events", |_| {}).await.unwrap();
    let q3 = o
        .query(
            "events",
            &all(vec![Condition::new("quantity", Op::Eq(V::Int(3)))]),
        )
        .await
        .unwrap();
    let want3: Vec<i64> = every.iter().copied().filter(|i| i % 7 == 3).collect();
    check(&q3, &want3, "quantity = 3");
    let noted = o
        .query(
            "events",
            &all(vec![Condition::new("note", Op::Eq(V::String("n".into())))]),
        )
        .await
        .unwrap();
    check(&noted, &(1500..1800).collect::<Vec<_>>(), "note = n");
    let no_note = o
        .query("events", &all(vec![Condition::new("note", Op::IsNull)]))
        .await
        .unwrap();
    check(&no_note, &(100..1500).collect::<Vec<_>>(), "note IS NULL");
    // An index whose only column most files lack: their rows are NULL keys in it.
    o.mount_iceberg("events2", events).await.unwrap();
    o.create_index(
        "events2",
        "by_note",
        &["note".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    let built = o.build("events2", |_| {}).await.unwrap();
    assert!(built.skipped.is_empty(), "{:?}", built.skipped);
    assert_eq!(built.entries, 1700, "one entry per row, NULL or not");
    for (c, want) in [
        (
            Condition::new("note", Op::IsNull),
            (100..1500).collect::<Vec<_>>(),
        ),
        (
            Condition::new("note", Op::Eq(V::String("n".into()))),
            (1500..1800).collect(),
        ),
    ] {
        let r = o.query("events2", &all(vec![c])).await.unwrap();
        check(&r, &want, "events2");
    }
    // The same through the published manifest and a read-only reader.
    o.publish().await.unwrap();
    let reader = skerry_core::read::reader::OverlayReader::open(&url, Default::default())
        .await
        .unwrap();
    let r = reader
        .snapshot()
        .query(
            "events",
            &all(vec![Condition::new("quantity", Op::Eq(V::Int(3)))]),
        )
        .await
        .unwrap();
    check(&r, &want3, "reader: quantity = 3");
}
