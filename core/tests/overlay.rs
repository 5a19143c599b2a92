//! The walking skeleton end to end, natively: SlateDB catalog on a real object store →
//! Parquet → Puffin bundles → published manifest → lookups behind the read gate, with
//! fallback scans for drifted, corrupt and unindexed files.

use std::path::Path;

use arrow_array::Array;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{customer_of, orders_parquet, SampleCodec};
use skerry_core::formats::manifest;
use skerry_core::io::{Location, ObjectStoreReader, RangeReader};
use skerry_core::read::cache::ReadCache;
use skerry_core::read::lookup::{Pinned, RowRef};
use skerry_core::values::Value;

mod support;
use skerry_core::Error;

struct Fixture {
    _dir: tempfile::TempDir,
    data: std::path::PathBuf,
    overlay_url: String,
    data_url: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data/orders");
    std::fs::create_dir_all(&data).unwrap();
    for (i, codec) in [SampleCodec::Snappy, SampleCodec::Zstd, SampleCodec::Lz4]
        .into_iter()
        .enumerate()
    {
        let bytes = orders_parquet(i as i64 * 3000, 3000, 1000, codec).unwrap();
        std::fs::write(data.join(format!("part-{i}.parquet")), bytes).unwrap();
    }
    Fixture {
        overlay_url: format!("file://{}", dir.path().join("overlay").display()),
        data_url: format!("file://{}", data.display()),
        data,
        _dir: dir,
    }
}

/// Brute force: the positions of every row whose `customer` equals `want`, per file, read
/// with parquet's own synchronous reader.
fn brute_force(dir: &Path, files: &[&str], want: &str) -> Vec<RowRef> {
    let mut out = vec![];
    let mut row_id = 0;
    for f in files {
        let file = std::fs::File::open(dir.join(f)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let mut pos = 0u64;
        for batch in reader {
            let batch = batch.unwrap();
            let col = batch.column_by_name("customer").unwrap();
            let col = col
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            for i in 0..batch.num_rows() {
                if col.is_valid(i) && col.value(i) == want {
                    out.push(RowRef {
                        file: f.to_string(),
                        position: pos,
                        row_id: Some(row_id + pos),
                    });
                }
                pos += 1;
            }
        }
        row_id += pos;
    }
    out
}

const FILES: [&str; 3] = ["part-0.parquet", "part-1.parquet", "part-2.parquet"];

async fn indexed(fx: &Fixture) -> Overlay {
    let mut o = Overlay::open(&fx.overlay_url, OpenOptions::default())
        .await
        .unwrap();
    o.set_block_bytes(1024);
    let t = o
        .register_parquet_table("orders", &fx.data_url, FileSelection::Prefix(String::new()))
        .await
        .unwrap();
    assert_eq!((t.files, t.rows), (3, 9000));
    assert_eq!(
        t.fields
            .iter()
            .map(|f| (f.field_id, f.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "order_id"), (2, "customer"), (3, "amount"), (4, "day")]
    );
    o.create_index(
        "orders",
        "by_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o
}

fn s(v: &str) -> Vec<Value> {
    vec![Value::String(v.into())]
}

#[tokio::test]
async fn index_publish_and_lookup() {
    let fx = fixture();
    let o = indexed(&fx).await;
    // Defined but not built: the raw accessor refuses it.
    let e = o
        .lookup("orders", "by_customer", &s("customer-00042"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INDEX_NOT_READY");

    let mut progress = vec![];
    let report = o
        .build("orders", |p| progress.push((p.done, p.total)))
        .await
        .unwrap();
    assert_eq!(report.files_indexed, 3);
    assert_eq!(report.entries, 9000);
    assert!(report.skipped.is_empty());
    // Progress counts rows, and only moves forward.
    assert_eq!(progress.last(), Some(&(9000, 9000)));
    assert!(progress.windows(2).all(|w| w[0].0 <= w[1].0));

    for want in [
        "customer-00042",
        customer_of(4321).unwrap().as_str(),
        customer_of(8999).unwrap().as_str(),
    ] {
        let r = o.lookup("orders", "by_customer", &s(want)).await.unwrap();
        assert_eq!(r.rows, brute_force(&fx.data, &FILES, want), "{want}");
        assert!(!r.rows.is_empty());
        assert_eq!(r.stats.files_scanned, 0, "all files answered by the index");
        assert_eq!(r.stats.data_requests, 0, "no data file was read");
        assert!(r.stats.rejections.is_empty());
    }
    // A value no row holds, one outside every file's key range, and NULL.
    assert!(o
        .lookup("orders", "by_customer", &s("customer-00042x"))
        .await
        .unwrap()
        .rows
        .is_empty());
    let r = o.lookup("orders", "by_customer", &s("aaa")).await.unwrap();
    assert!(r.rows.is_empty());
    assert_eq!(
        r.stats.files_pruned, 3,
        "key bounds prune every file without a read"
    );
    assert_eq!(r.stats.index_requests, 0);
    assert!(o
        .lookup("orders", "by_customer", &[Value::Null])
        .await
        .unwrap()
        .rows
        .is_empty());
    // Wrong type and unknown names are typed errors.
    assert_eq!(
        o.lookup("orders", "by_customer", &[Value::Int(1)])
            .await
            .unwrap_err()
            .code(),
        "E_KEY"
    );
    assert_eq!(
        o.lookup("orders", "nope", &s("x"))
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );
    assert_eq!(
        o.lookup("nope", "by_customer", &s("x"))
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );

    // Row ids → (file, position): every file's summary is a dense range here.
    let loc = o
        .locate("orders", &[2999, 3000, 0, 8999, 9000, 3000])
        .await
        .unwrap();
    let got: Vec<_> = loc
        .rows
        .iter()
        .map(|r| (r.file.as_str(), r.position, r.row_id))
        .collect();
    assert_eq!(
        got,
        vec![
            ("part-0.parquet", 0, Some(0)),
            ("part-0.parquet", 2999, Some(2999)),
            ("part-1.parquet", 0, Some(3000)),
            ("part-2.parquet", 2999, Some(8999))
        ]
    );
    assert!(loc.candidates.is_empty());

    // Publish, then answer from the published manifest through a plain reader.
    let p = o.publish().await.unwrap();
    assert_eq!(p.version, 1);
    let reader = ObjectStoreReader::from_url(&fx.overlay_url, &[]).unwrap();
    let m = manifest::read_latest(&reader).await.unwrap();
    assert_eq!(m.version, 1);
    let t = m.table("orders").unwrap();
    assert_eq!(t.files.len(), 3);
    assert_eq!(t.index("by_customer").unwrap().files.len(), 3);
    let dirs = ReadCache::default();
    let data = skerry_core::io::UrlReader::new(vec![]);
    let l = Pinned {
        overlay: &reader,
        data: &data,
        manifest: &m,
        cache: &dirs,
        scan_only: false,
    };
    let want = "customer-00042";
    let r = l.lookup("orders", "by_customer", &s(want)).await.unwrap();
    assert_eq!(r.rows, brute_force(&fx.data, &FILES, want));
    // Warm: directories cached, each file costs at most one (coalesced) block read.
    let r = l
        .lookup("orders", "by_customer", &s("customer-00043"))
        .await
        .unwrap();
    assert!(
        r.stats.index_requests <= r.stats.files_by_index,
        "{:?}",
        r.stats
    );
    // Dropping an index is one small commit; lookups stop using it at once, the next
    // publish omits it, and its name is free again.
    let dropped = o.drop_index("orders", "BY_CUSTOMER").await.unwrap();
    assert_eq!(
        o.lookup("orders", "by_customer", &s(want))
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );
    assert_eq!(
        o.drop_index("orders", "by_customer")
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );
    let again = o
        .create_index(
            "orders",
            "by_customer",
            &["customer".into()],
            IndexOptions::default(),
        )
        .await
        .unwrap();
    assert!(again.index_id > dropped, "ids are never reused");
    assert_eq!(
        again.state,
        skerry_core::formats::manifest::IndexState::Building
    );
    o.build("orders", |_| {}).await.unwrap();
    assert_eq!(
        o.lookup("orders", "by_customer", &s(want))
            .await
            .unwrap()
            .rows,
        brute_force(&fx.data, &FILES, want)
    );
    o.drop_index("orders", "by_customer").await.unwrap();
    assert_eq!(o.publish().await.unwrap().version, 2);
    let m2 = manifest::read_latest(&reader).await.unwrap();
    assert!(
        m2.table("orders").unwrap().indexes.is_empty(),
        "the published manifest omits dropped indexes"
    );
    assert_eq!(manifest::read_head(&reader).await.unwrap().version, 2);
    // The version-1 manifest still names the old index: a reader pinned to it keeps working
    // until vacuum (which honours retained versions) removes the bundles.
    assert_eq!(m.table("orders").unwrap().indexes.len(), 1);
    o.close().await.unwrap();
}

/// Decision 73: past 16 KiB `HEAD` is the same document zlib-compressed — a table of 120
/// files publishes one (moved forward by the next publish, which reads the old one back), a
/// reader opens it in one read to the manifest the file holds, at a fraction of the bytes.
#[tokio::test]
async fn a_large_head_is_compressed_and_still_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    support::write_orders(&data, 120, 10, 10);
    let (url, o) = support::orders_indexed(
        &dir.path().join("overlay"),
        &data,
        &[("by_id", "order_id", false)],
    )
    .await;
    o.build("orders", |_| {}).await.unwrap();
    let reader = ObjectStoreReader::from_url(&url, &[]).unwrap();
    let head_file = dir.path().join("overlay").join(manifest::HEAD_PATH);
    for version in [1, 2] {
        if version == 2 {
            o.drop_index("orders", "by_id").await.unwrap();
        }
        assert_eq!(o.publish().await.unwrap().version, version);
        let stored = std::fs::read(&head_file).unwrap();
        assert_eq!(stored[0], 0x78, "zlib (RFC 1950)");
        let json = manifest::Head::json(&stored).unwrap();
        assert!(
            json.len() > manifest::PLAIN_HEAD_BYTES && stored.len() * 3 < json.len(),
            "{} bytes of JSON stored in {}",
            json.len(),
            stored.len()
        );
        let head: manifest::Head = serde_json::from_slice(&json).unwrap();
        assert!(head.manifest.is_some());
        let before = reader.stats().requests;
        let m = manifest::read_latest(&reader).await.unwrap();
        assert_eq!(reader.stats().requests - before, 1, "HEAD alone");
        assert_eq!(m.version, version);
        let file = manifest::Manifest::from_json(
            &std::fs::read(dir.path().join("overlay").join(&head.path)).unwrap(),
        )
        .unwrap();
        assert_eq!(m, file);
        assert_eq!(m.tables[0].files.len(), 120);
    }
}

/// Decision 72: `HEAD` carries a small manifest, so a reader opens with one read; the inline
/// copy is validated like the file (a hostile one is refused), must be the version `HEAD`
/// names, and a `HEAD` without it (a large manifest, an older publisher) still opens by path.
#[tokio::test]
async fn head_inlines_a_small_manifest_and_a_reader_opens_in_one_read() {
    let fx = fixture();
    let o = indexed(&fx).await;
    o.build("orders", |_| {}).await.unwrap();
    o.publish().await.unwrap();
    let root = fx._dir.path().join("overlay");
    let head_file = root.join(manifest::HEAD_PATH);
    let head_bytes = std::fs::read(&head_file).unwrap();
    assert_eq!(head_bytes[0], b'{', "a small HEAD stays plain JSON");
    let head: serde_json::Value = serde_json::from_slice(&head_bytes).unwrap();
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(head["path"].as_str().unwrap())).unwrap())
            .unwrap();
    assert_eq!(
        head["manifest"], file,
        "HEAD inlines the document its path holds"
    );

    let reader = ObjectStoreReader::from_url(&fx.overlay_url, &[]).unwrap();
    let before = reader.stats().requests;
    let m = manifest::read_latest(&reader).await.unwrap();
    assert_eq!(reader.stats().requests - before, 1, "HEAD alone");
    assert_eq!(
        m,
        manifest::Manifest::from_json(&serde_json::to_vec(&file).unwrap()).unwrap()
    );

    let write = |v: &serde_json::Value| std::fs::write(&head_file, v.to_string()).unwrap();
    // A hostile inline manifest is refused as the file would be.
    let mut bad = head.clone();
    bad["manifest"]["tables"][0]["files"][0]["path"] = "../../elsewhere.parquet".into();
    write(&bad);
    let e = manifest::read_latest(&reader).await.unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST", "{e}");
    // Another version's document is refused.
    let mut other = head.clone();
    other["manifest"]["version"] = 7.into();
    write(&other);
    let e = manifest::read_latest(&reader).await.unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST", "{e}");
    assert!(e.to_string().contains("HEAD names version"), "{e}");
    // Not an object: refused.
    let mut junk = head.clone();
    junk["manifest"] = "not a manifest".into();
    write(&junk);
    assert_eq!(
        manifest::read_latest(&reader).await.unwrap_err().code(),
        "E_MANIFEST"
    );
    // zlib-compressed (what a publisher writes past 16 KiB, decision 73): the same manifest
    // in the same one read; a hostile document compressed is refused the same way.
    let zlib = |v: &serde_json::Value| {
        std::fs::write(
            &head_file,
            miniz_oxide::deflate::compress_to_vec_zlib(v.to_string().as_bytes(), 6),
        )
        .unwrap()
    };
    zlib(&head);
    let before = reader.stats().requests;
    assert_eq!(manifest::read_latest(&reader).await.unwrap(), m);
    assert_eq!(reader.stats().requests - before, 1, "compressed HEAD alone");
    zlib(&bad);
    let e = manifest::read_latest(&reader).await.unwrap_err();
    assert_eq!(e.code(), "E_MANIFEST", "{e}");
    // Without it (a manifest too large to inline, or an older publisher): by path, two reads.
    let mut pointer = head.clone();
    pointer.as_object_mut().unwrap().remove("manifest");
    write(&pointer);
    let before = reader.stats().requests;
    assert_eq!(manifest::read_latest(&reader).await.unwrap(), m);
    assert_eq!(reader.stats().requests - before, 2);
    // The next publish inlines again and moves HEAD past the pointer-only one.
    o.drop_index("orders", "by_customer").await.unwrap();
    assert_eq!(o.publish().await.unwrap().version, 2);
    let m2 = manifest::read_latest(&reader).await.unwrap();
    assert_eq!(m2.version, 2);
    let head2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&head_file).unwrap()).unwrap();
    assert_eq!(head2["manifest"]["version"], 2);
    o.close().await.unwrap();
}

#[tokio::test]
async fn drifted_file_is_rejected_and_scanned() {
    let fx = fixture();
    let o = indexed(&fx).await;
    o.build("orders", |_| {}).await.unwrap();
    let want = customer_of(3000 + 17).unwrap();
    let before = o.lookup("orders", "by_customer", &s(&want)).await.unwrap();
    assert!(before.rows.iter().any(|r| r.file == "part-1.parquet"));

    // Rows by position: the fetched customers are the looked-up one, in the given order.
    let cols = vec!["order_id".to_string(), "customer".to_string()];
    let batch = o.fetch("orders", &before.rows, &cols).await.unwrap();
    assert_eq!(batch.num_rows(), before.rows.len());
    let rows = skerry_core::read::lookup::to_values(&batch).unwrap();
    for (r, row) in before.rows.iter().zip(&rows) {
        assert_eq!(
            row[1],
            ("customer".to_string(), Value::String(want.clone()))
        );
        assert_eq!(
            row[0].1,
            Value::Int(r.row_id.unwrap() as i64),
            "order_id = row id in the sample"
        );
    }
    assert!(!skerry_core::read::lookup::to_ipc(&batch)
        .unwrap()
        .is_empty());
    assert_eq!(
        o.fetch("orders", &before.rows, &["nope".to_string()])
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );

    // Rewrite part-1 in place: same path, different rows (shifted ids).
    std::fs::write(
        fx.data.join("part-1.parquet"),
        orders_parquet(3000 + 500, 2500, 700, SampleCodec::Zstd).unwrap(),
    )
    .unwrap();
    // Before refresh, positions of the old version are never read from the new bytes.
    assert_eq!(
        o.fetch("orders", &before.rows, &cols)
            .await
            .unwrap_err()
            .code(),
        "E_CHANGED"
    );
    let rep = o.refresh("orders").await.unwrap();
    assert_eq!(rep.changed, vec!["part-1.parquet".to_string()]);
    assert!(rep.missing.is_empty());

    let r = o.lookup("orders", "by_customer", &s(&want)).await.unwrap();
    let mut expected = brute_force(&fx.data, &FILES, &want);
    // Row ids of the rewritten file are fresh (after every earlier row id).
    for row in &mut expected {
        if row.file == "part-1.parquet" {
            row.row_id = Some(9000 + row.position);
        } else if row.file == "part-2.parquet" {
            row.row_id = Some(6000 + row.position);
        }
    }
    assert_eq!(r.rows, expected);
    assert_eq!(r.stats.files_scanned, 1);
    assert_eq!(r.stats.rejections.len(), 1);
    assert_eq!(r.stats.rejections[0].data_file, "part-1.parquet");
    assert_eq!(r.stats.rejections[0].reason.code(), "checksum");

    // A rebuild re-indexes just that file; then nothing is scanned.
    let b = o.build("orders", |_| {}).await.unwrap();
    assert_eq!(b.files_indexed, 1);
    let r = o.lookup("orders", "by_customer", &s(&want)).await.unwrap();
    assert_eq!(r.rows, expected);
    assert_eq!(r.stats.files_scanned, 0);

    // A file rewritten but not yet refreshed cannot be built against stale facts.
    std::fs::write(
        fx.data.join("part-2.parquet"),
        orders_parquet(1, 10, 5, SampleCodec::Snappy).unwrap(),
    )
    .unwrap();
    o.create_index(
        "orders",
        "by_id",
        &["order_id".into()],
        IndexOptions::unique(),
    )
    .await
    .unwrap();
    let b = o.build("orders", |_| {}).await.unwrap();
    assert_eq!(b.skipped.len(), 1);
    assert_eq!(b.skipped[0].file, "part-2.parquet");
    assert_eq!(b.skipped[0].code, "E_DRIFT");
    // And a scan of it notices the drift.
    let r = o.lookup("orders", "by_customer", &s(&want)).await.unwrap();
    assert!(
        r.stats.drifted.is_empty(),
        "the index answered part-2 from its recorded version"
    );
    std::fs::remove_file(fx.data.join("part-0.parquet")).unwrap();
    let rep = o.refresh("orders").await.unwrap();
    assert_eq!(rep.missing, vec!["part-0.parquet".to_string()]);
    assert_eq!(rep.changed, vec!["part-2.parquet".to_string()]);
}

#[tokio::test]
async fn flipped_blob_bytes_are_rejected_by_checksum() {
    let fx = fixture();
    let o = indexed(&fx).await;
    o.build("orders", |_| {}).await.unwrap();
    let m = o.snapshot_manifest(0).await.unwrap();
    let entry = &m
        .table("orders")
        .unwrap()
        .index("by_customer")
        .unwrap()
        .files[0];
    let want = customer_of(7).unwrap();
    let bundle = fx.overlay_url.strip_prefix("file://").unwrap().to_string()
        + "/"
        + &entry.lineage.bundle_path;
    let mut bytes = std::fs::read(&bundle).unwrap();
    // Flip a byte in every block of the blob (the directory stays intact).
    for off in (entry.lineage.blob_offset
        ..entry.lineage.blob_offset + entry.ordered.directory_offset)
        .step_by(97)
    {
        bytes[off as usize] ^= 0x5A;
    }
    std::fs::write(&bundle, bytes).unwrap();
    let fresh = Overlay::open(&fx.overlay_url, OpenOptions::default()).await;
    // The catalog has a single writer: the old handle is fenced by the new one.
    let o2 = fresh.unwrap();
    let r = o2.lookup("orders", "by_customer", &s(&want)).await.unwrap();
    assert_eq!(r.rows, brute_force(&fx.data, &FILES, &want));
    let reasons: Vec<_> = r
        .stats
        .rejections
        .iter()
        .map(|r| (r.data_file.as_str(), r.reason.code()))
        .collect();
    assert_eq!(
        reasons,
        vec![(entry.lineage.source_path.as_str(), "blob_checksum")]
    );
    assert_eq!(r.stats.files_scanned, 1);
    drop(o);
}

#[tokio::test]
async fn catalog_survives_reopen_and_memory_overlays_work() {
    let fx = fixture();
    // No close(): every verb's commit must already be durable in the object store, which
    // is all a second handle (it fences the first) can see.
    let first = indexed(&fx).await;
    first.build("orders", |_| {}).await.unwrap();
    let o = Overlay::open(&fx.overlay_url, OpenOptions::default())
        .await
        .unwrap();
    assert_eq!(
        first.publish().await.unwrap_err().code(),
        "E_CATALOG",
        "a fenced writer cannot commit"
    );
    let head = ObjectStoreReader::from_url(&fx.overlay_url, &[]).unwrap();
    assert!(
        manifest::read_head(&head).await.is_err(),
        "nor write a manifest or move HEAD"
    );
    let want = "customer-00042";
    assert_eq!(
        o.lookup("orders", "by_customer", &s(want))
            .await
            .unwrap()
            .rows,
        brute_force(&fx.data, &FILES, want)
    );
    assert_eq!(
        o.register_parquet_table("ORDERS", &fx.data_url, FileSelection::List(vec![]))
            .await
            .unwrap_err()
            .code(),
        "E_EXISTS"
    );
    assert_eq!(
        o.create_index(
            "orders",
            "BY_CUSTOMER",
            &["day".into()],
            IndexOptions::default()
        )
        .await
        .unwrap_err()
        .code(),
        "E_EXISTS"
    );
    assert_eq!(
        o.create_index("orders", "x", &["nope".into()], IndexOptions::default())
            .await
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );

    let m = Overlay::open("memory:///", OpenOptions::default())
        .await
        .unwrap();
    m.register_parquet_table(
        "orders",
        &fx.data_url,
        FileSelection::List(vec!["part-2.parquet".into()]),
    )
    .await
    .unwrap();
    m.create_index(
        "orders",
        "by_customer",
        &["customer".into()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    m.build("orders", |_| {}).await.unwrap();
    let r = m.lookup("orders", "by_customer", &s(want)).await.unwrap();
    assert_eq!(
        r.rows.iter().map(|r| r.position).collect::<Vec<_>>(),
        brute_force(&fx.data, &["part-2.parquet"], want)
            .iter()
            .map(|r| r.position)
            .collect::<Vec<_>>()
    );
    assert!(
        m.reader()
            .read_all(&Location::new(manifest::HEAD_PATH))
            .await
            .is_err(),
        "nothing published yet"
    );
    assert!(matches!(
        Overlay::open("ftp://x/y", OpenOptions::default()).await,
        Err(Error::Io(_))
    ));
}
