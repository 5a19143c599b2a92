//! An Iceberg table on an S3-compatible server, read through read-only credentials (issue
//! 16: upstream is never written): pyiceberg writes `s3://lake/wh/db/events` to moto; Skerry
//! reaches the same server through a proxy that refuses every write to bucket `lake` (what
//! read-only credentials do) while its overlay lives in bucket `skerry`. Mount, index, build,
//! publish, sync through every snapshot, pinned and current queries, and a read-only reader
//! all run; the proxy must have forwarded reads of `lake` and refused no write.

mod support;

use std::sync::atomic::Ordering::Relaxed;

use skerry_core::admin::overlay::{OpenOptions, Overlay};
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value as V;
use support::{s3_storage, Moto, ReadOnlyProxy};

use support::sorted_ids as ids;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_table_is_followed_through_read_only_credentials() {
    let moto = Moto::start(&["lake", "skerry"]);
    let dir = tempfile::tempdir().unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/iceberg/make_s3.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .arg(moto.endpoint())
        .output()
        .expect("python3 with pyiceberg and s3fs (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "make_s3.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected_s3.json")).unwrap())
            .unwrap();
    let snaps = expected["snapshots"].as_array().unwrap();
    let want = |s: &serde_json::Value| -> Vec<i64> {
        s["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };

    let proxy = ReadOnlyProxy::start(moto.port, "lake");
    // The proxy refuses writes to the warehouse bucket (checked, so the test means it).
    let probe = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name("lake")
        .with_endpoint(proxy.endpoint())
        .with_allow_http(true)
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_region("us-east-1")
        .build()
        .unwrap();
    use object_store::ObjectStoreExt;
    assert!(probe
        .put(&"wh/probe".into(), bytes::Bytes::from_static(b"x").into())
        .await
        .is_err());
    assert_eq!(proxy.refused.load(Relaxed), 1);
    proxy.refused.store(0, Relaxed);

    let storage = s3_storage(&proxy.endpoint());
    let url = "s3://skerry/overlay";
    let o = Overlay::open(
        url,
        OpenOptions {
            storage: storage.clone(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // By table directory: the newest metadata file is listed; here the first snapshot's.
    o.mount_iceberg("events", snaps[0]["metadata_location"].as_str().unwrap())
        .await
        .unwrap();
    let all = support::index_ids_and_publish(&o, "events").await;
    assert_eq!(
        ids(&o.query("events", &all).await.unwrap()),
        want(&snaps[0])
    );
    for s in &snaps[1..] {
        o.sync_iceberg("events", Some(s["metadata_location"].as_str().unwrap()))
            .await
            .unwrap();
        o.publish().await.unwrap();
        assert_eq!(
            ids(&o.query("events", &all).await.unwrap()),
            want(s),
            "{}",
            s["label"]
        );
    }
    // Nothing newer: the directory's newest metadata file is the synced one.
    let again = o.sync_iceberg("events", None).await.unwrap();
    assert!(again.added.is_empty() && again.removed.is_empty());
    let reader = skerry_core::read::reader::OverlayReader::open(
        url,
        OpenOptions {
            storage,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for s in snaps {
        let pinned = Query {
            snapshot: Some(s["snapshot_id"].as_str().unwrap().parse().unwrap()),
            ..all.clone()
        };
        assert_eq!(
            ids(&reader.snapshot().query("events", &pinned).await.unwrap()),
            want(s),
            "pinned {}",
            s["label"]
        );
    }
    let one = Query {
        conditions: vec![Condition::new("id", Op::Eq(V::Int(1050)))],
        ..all.clone()
    };
    let r = reader.snapshot().query("events", &one).await.unwrap();
    assert_eq!(ids(&r), vec![1050]);
    assert_eq!(r.stats.index.as_deref(), Some("by_id"));
    // The warehouse was read through the proxy, and never written.
    assert!(
        proxy.reads.load(Relaxed) > 10,
        "{} reads",
        proxy.reads.load(Relaxed)
    );
    assert_eq!(
        proxy.refused.load(Relaxed),
        0,
        "a write to the warehouse was attempted"
    );
}
