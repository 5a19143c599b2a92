//! Format stability: the Puffin bundles and the published manifest written for a fixed table
//! and fixed index definitions are byte-for-byte what `tests/golden/bundles.txt` records
//! (SHA-256 per object). Refactors must not change them; a deliberate format change updates
//! the golden file (`SKERRY_BLESS=1 cargo test --test golden_bundles`) and says so.
//!
//! Object names carry a per-attempt token, so the bundles are compared by content (sorted
//! hashes) and the manifest after replacing each bundle path by its content hash.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};
use skerry_core::admin::overlay::{FileSelection, IndexColumn, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test]
async fn bundles_and_manifest_are_byte_stable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for (i, codec) in [SampleCodec::Snappy, SampleCodec::Zstd]
        .into_iter()
        .enumerate()
    {
        let bytes = orders_parquet(i as i64 * 2500, 2500, 700, codec).unwrap();
        std::fs::write(data.join(format!("part-{i}.parquet")), bytes).unwrap();
    }
    let overlay_dir = dir.path().join("overlay");
    let mut o = Overlay::open(
        &format!("file://{}", overlay_dir.display()),
        OpenOptions::default(),
    )
    .await
    .unwrap();
    o.set_block_bytes(2048);
    o.register_parquet_table(
        "orders",
        &format!("file://{}", data.display()),
        FileSelection::Prefix(String::new()),
    )
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
    o.create_index(
        "orders",
        "by_customer_day",
        &[
            IndexColumn::from("customer").nulls_first(),
            IndexColumn::from("day").desc(),
        ],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    o.build("orders", |_| {}).await.unwrap();
    let published = o.publish().await.unwrap();
    o.close().await.unwrap();

    // Every object that is not the catalog's own (SlateDB) state.
    let mut files = vec![];
    files_under(&overlay_dir, &mut files);
    let mut bundles: BTreeMap<String, String> = BTreeMap::new(); // relative path -> hash
    let mut manifest = None;
    for f in &files {
        let rel = f
            .strip_prefix(&overlay_dir)
            .unwrap()
            .to_string_lossy()
            .to_string();
        if rel.ends_with(".puffin") {
            bundles.insert(rel, sha(&std::fs::read(f).unwrap()));
        } else if rel == published.path {
            manifest = Some(String::from_utf8(std::fs::read(f).unwrap()).unwrap());
        }
    }
    assert!(!bundles.is_empty(), "no bundles written: {files:?}");
    let mut manifest = manifest.expect("published manifest on disk");
    // Bundle paths embed an attempt token: name them by content instead. The table's
    // location is a temp dir and local ETags carry inode and mtime: placeholders.
    let parsed: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let mut volatile = vec![];
    for t in parsed["tables"].as_array().unwrap() {
        volatile.push((t["location"].as_str().unwrap().to_string(), "LOCATION"));
        for f in t["files"].as_array().unwrap() {
            if let Some(e) = f["etag"].as_str() {
                volatile.push((serde_json::to_string(e).unwrap(), "\"ETAG\""));
            }
        }
    }
    for (from, to) in volatile {
        manifest = manifest.replace(&from, to);
    }
    for (path, hash) in &bundles {
        manifest = manifest.replace(path.as_str(), &format!("bundle:{hash}"));
    }
    let mut lines: Vec<String> = bundles.values().map(|h| format!("bundle {h}")).collect();
    lines.sort();
    lines.push(format!("manifest {}", sha(manifest.as_bytes())));
    let got = lines.join("\n") + "\n";

    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/bundles.txt");
    if std::env::var_os("SKERRY_BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
        std::fs::write(golden.with_extension("manifest.json"), &manifest).unwrap();
    }
    let want = std::fs::read_to_string(&golden)
        .expect("tests/golden/bundles.txt (SKERRY_BLESS=1 writes it)");
    assert_eq!(
        got, want,
        "bundle or manifest bytes changed (normalised manifest:\n{manifest})"
    );
}
