//! An Iceberg table behind a REST catalog with vended credentials (issue 45): pyiceberg's own
//! `RestCatalog` creates the table and appends through the catalog
//! (`tests/iceberg/rest_catalog_server.py`, moto with IAM authentication enforced); Skerry
//! mounts it through the catalog, indexes it, follows three upstream commits, and reads with
//! credentials that the catalog deletes when they expire — so every read after an expiry
//! shows a refresh. A revoked client gets `E_AUTH` and writes nothing; the catalog's log shows
//! Skerry never called an endpoint that writes; no secret reaches the overlay's objects.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use skerry_core::admin::overlay::{OpenOptions, Overlay};
use skerry_core::io::rest::{CatalogAccess, CatalogRef};
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value as V;
use support::sorted_ids as ids;

/// Vended keys live this long; the reaper deletes them then (a waiting test adds 2 s, so a
/// loaded machine still sees them deleted).
const CRED_TTL_S: u64 = 4;

struct RestServer {
    child: Child,
    uri: String,
    s3: String,
    admin: (String, String),
    state: PathBuf,
}

impl RestServer {
    fn start(state: &Path) -> RestServer {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/iceberg/rest_catalog_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(state)
            .env("CRED_TTL", CRED_TTL_S.to_string())
            .stdout(Stdio::piped())
            // Its log (moto's requests too), kept beside the request log for a failing run.
            .stderr(std::fs::File::create(state.join("server.err")).unwrap())
            .spawn()
            .expect("python3 with pyiceberg and moto (scripts/setup.sh)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let j: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("REST catalog server did not start ({e}): {line:?}"));
        RestServer {
            uri: j["uri"].as_str().unwrap().into(),
            s3: j["s3"].as_str().unwrap().into(),
            admin: (
                j["admin"]["key"].as_str().unwrap().into(),
                j["admin"]["secret"].as_str().unwrap().into(),
            ),
            child,
            state: state.to_path_buf(),
        }
    }

    /// pyiceberg's RestCatalog writes through the catalog; the ids after the change.
    fn write(&self, args: &[&str]) -> Vec<i64> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/iceberg/rest_writer.py");
        let out = Command::new("python3")
            .arg(script)
            .args([&self.uri, &self.s3, &self.admin.0, &self.admin.1])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "rest_writer.py {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    }

    fn call(&self, method: &str, path: &str) -> serde_json::Value {
        let url = format!("{}{path}", self.uri);
        let out = Command::new("python3")
            .args([
                "-c",
                "import sys,urllib.request as u;r=u.Request(sys.argv[2],method=sys.argv[1]);print(u.urlopen(r).read().decode())",
                method,
                &url,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{method} {path}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The vended keys so far: (key, deleted).
    fn vended(&self) -> Vec<(String, bool)> {
        self.call("GET", "/_test/vended")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["key"].as_str().unwrap().to_string(),
                    v["deleted"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.state.join("requests.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for RestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn access(server: &RestServer, credential: &str) -> CatalogAccess {
    CatalogAccess {
        table: CatalogRef {
            uri: server.uri.clone(),
            warehouse: None,
            namespace: vec!["db".into()],
            table: "events".into(),
        },
        credential: Some(credential.into()),
        ..Default::default()
    }
}

fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_table_is_mounted_synced_and_read_with_vended_credentials_that_expire() {
    let state = tempfile::tempdir().unwrap();
    let server = RestServer::start(state.path());
    let mut want = server.write(&["create"]);
    let overlay_dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", overlay_dir.path().display());

    // Wrong secret: E_AUTH, nothing mounted.
    let o = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let e = o
        .mount_iceberg_catalog("events", access(&server, "skerry:wrong-secret"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_AUTH", "{e}");
    assert!(!e.to_string().contains("wrong-secret"), "{e}");
    assert!(o.list_tables().await.unwrap().is_empty());

    // No storage options at all: the catalog vends the endpoint, region and keys.
    o.mount_iceberg_catalog("events", access(&server, "skerry:skerry-secret"))
        .await
        .unwrap();
    let src = o.iceberg_source("events").await.unwrap().unwrap();
    assert_eq!(src.catalog.as_ref().unwrap().table, "events");
    let all = support::index_ids_and_publish(&o, "events").await;
    let one = |id: i64| Query {
        conditions: vec![Condition::new("id", Op::Eq(V::Int(id)))],
        columns: Some(vec!["id".into(), "region".into()]),
        ..Default::default()
    };
    assert_eq!(ids(&o.query("events", &all).await.unwrap()), want);

    // Three upstream commits, each followed through the catalog; every other one after the
    // credentials vended so far have expired (and been deleted by the catalog).
    let mut snapshots = vec![src.snapshot_id];
    for (i, step) in [
        vec!["append", "300", "400"],
        vec!["delete", "50"],
        vec!["append", "400", "450"],
    ]
    .iter()
    .enumerate()
    {
        want = server.write(step);
        if i % 2 == 0 {
            tokio::time::sleep(Duration::from_secs(CRED_TTL_S + 2)).await;
            let vended = server.vended();
            assert!(
                vended.iter().all(|(_, deleted)| *deleted),
                "every key vended so far expired: {vended:?}"
            );
        }
        let report = o.sync_iceberg("events", None).await.unwrap();
        assert_ne!(report.snapshot_id, *snapshots.last().unwrap(), "{step:?}");
        snapshots.push(report.snapshot_id);
        o.build("events", |_| {}).await.unwrap();
        o.publish().await.unwrap();
        assert_eq!(
            ids(&o.query("events", &all).await.unwrap()),
            want,
            "{step:?}"
        );
        let last = *want.last().unwrap();
        let r = o.query("events", &one(last)).await.unwrap();
        assert_eq!(ids(&r), vec![last]);
        assert_eq!(r.stats.index.as_deref(), Some("by_id"));
    }
    let vended = server.vended();
    assert!(
        vended.len() >= 3 && vended.iter().filter(|(_, d)| *d).count() >= 2,
        "credentials were refreshed as they expired: {vended:?}"
    );

    // A reader in another process gets its own vended credentials at open.
    tokio::time::sleep(Duration::from_secs(CRED_TTL_S + 2)).await;
    let reader = skerry_core::read::reader::OverlayReader::open(
        &url,
        OpenOptions {
            catalogs: vec![access(&server, "skerry:skerry-secret")],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        ids(&reader.snapshot().query("events", &all).await.unwrap()),
        want
    );
    // Its key expires (and is deleted) while it is open: the next read asks the catalog for
    // a new one (`loadCredentials`) and answers.
    let refreshes = |log: &[serde_json::Value]| {
        log.iter()
            .filter(|r| r["path"].as_str().unwrap().ends_with("/credentials"))
            .count()
    };
    let before = refreshes(&server.log());
    tokio::time::sleep(Duration::from_secs(CRED_TTL_S + 2)).await;
    let last = *want.last().unwrap();
    assert_eq!(
        ids(&reader.snapshot().query("events", &one(last)).await.unwrap()),
        vec![last]
    );
    assert!(
        refreshes(&server.log()) > before,
        "the reader refreshed its credential"
    );

    // No secret, token or vended key in any overlay object (catalog, manifests, bundles).
    let keys: Vec<String> = server.vended().into_iter().map(|(k, _)| k).collect();
    for (path, bytes) in files_under(overlay_dir.path()) {
        for secret in ["skerry-secret", "writer-secret", server.admin.1.as_str()]
            .into_iter()
            .chain(keys.iter().map(String::as_str))
        {
            assert!(
                !contains(&bytes, secret),
                "{} holds a secret",
                path.display()
            );
        }
    }

    // Revoked: the next sync is refused, and nothing is written.
    server.call("POST", "/_test/revoke?client=skerry");
    server.write(&["append", "450", "460"]);
    let before = files_under(overlay_dir.path());
    let e = o.sync_iceberg("events", None).await.unwrap_err();
    assert_eq!(e.code(), "E_AUTH", "{e}");
    assert!(!e.to_string().contains("skerry-secret"), "{e}");
    assert_eq!(
        o.iceberg_source("events")
            .await
            .unwrap()
            .unwrap()
            .snapshot_id,
        *snapshots.last().unwrap()
    );
    let after = files_under(overlay_dir.path());
    assert_eq!(
        before.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        after.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        "a refused sync wrote nothing"
    );
    // Its data cannot be read any more either: typed, not an I/O error to retry.
    let e = o.query("events", &one(100)).await.unwrap_err();
    assert_eq!(e.code(), "E_AUTH", "{e}");

    // Read-only toward the catalog: Skerry's requests are GETs and token requests only.
    let log = server.log();
    let skerry: Vec<_> = log.iter().filter(|r| r["client"] != "writer").collect();
    assert!(skerry.len() > 8, "{} catalog requests", skerry.len());
    for r in &skerry {
        let (m, p) = (r["method"].as_str().unwrap(), r["path"].as_str().unwrap());
        assert!(
            m == "GET" || (m == "POST" && p == "/v1/oauth/tokens") || p.starts_with("/_test/"),
            "Skerry called {m} {p}"
        );
    }
    assert!(skerry
        .iter()
        .any(|r| r["path"].as_str().unwrap().ends_with("/credentials")));

    // A writer that was given no credentials cannot follow the table (it fences `o`: last).
    drop(o);
    let other = Overlay::open(&url, OpenOptions::default()).await.unwrap();
    let e = other.sync_iceberg("events", None).await.unwrap_err();
    assert_eq!(e.code(), "E_AUTH", "{e}");
    assert!(e.to_string().contains("connectCatalog"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_that_never_answers_is_a_timeout_not_a_hang() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming() {
            held.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let o = Overlay::open(
        &format!("file://{}", dir.path().display()),
        OpenOptions {
            timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let access = CatalogAccess {
        table: CatalogRef {
            uri: format!("http://127.0.0.1:{port}"),
            warehouse: None,
            namespace: vec!["db".into()],
            table: "events".into(),
        },
        token: Some("t".into()),
        ..Default::default()
    };
    let e = o.mount_iceberg_catalog("events", access).await.unwrap_err();
    assert_eq!(e.code(), "E_TIMEOUT", "{e}");
    assert!(e.retryable());
}
