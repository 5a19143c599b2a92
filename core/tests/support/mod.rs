//! Shared setup of the integration tests that need the sample `orders` table in an overlay.
#![allow(dead_code)]

pub mod faults;

use std::path::Path;

use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::admin::sample::{orders_parquet, SampleCodec};

/// Writes the sample `orders` table — `files` Parquet files (`p000.parquet`, …) of `rows`
/// orders each, ids consecutive from 0, row groups of `row_group_rows` — under `dir/data`,
/// opens an overlay at `dir/overlay`, registers the table, creates `indexes` (name, column,
/// unique) and builds them (nothing published). Returns the overlay's URL and the overlay.
pub async fn orders_overlay(
    dir: &Path,
    files: i64,
    rows: i64,
    row_group_rows: usize,
    indexes: &[(&str, &str, bool)],
) -> (String, Overlay) {
    let data = dir.join("data");
    write_orders(&data, files, rows, row_group_rows);
    let (overlay_url, o) = orders_indexed(&dir.join("overlay"), &data, indexes).await;
    o.build("orders", |_| {}).await.unwrap();
    (overlay_url, o)
}

/// Opens an overlay at `overlay` (a directory), registers the `orders` files under `data` and
/// creates `indexes` (name, column, unique), nothing built. Returns the overlay's URL and it.
pub async fn orders_indexed(
    overlay: &Path,
    data: &Path,
    indexes: &[(&str, &str, bool)],
) -> (String, Overlay) {
    let overlay_url = format!("file://{}", overlay.display());
    let o = Overlay::open(&overlay_url, OpenOptions::default())
        .await
        .unwrap();
    o.register_parquet_table(
        "orders",
        &format!("file://{}", data.display()),
        FileSelection::Prefix(String::new()),
    )
    .await
    .unwrap();
    for (name, column, unique) in indexes {
        o.create_index(
            "orders",
            name,
            &[(*column).into()],
            IndexOptions {
                unique: *unique,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    (overlay_url, o)
}

/// Writes the sample `orders` table under `data`: `files` Parquet files (`p000.parquet`, …) of
/// `rows` orders each, ids consecutive from 0, row groups of `row_group_rows`.
pub fn write_orders(data: &Path, files: i64, rows: i64, row_group_rows: usize) {
    std::fs::create_dir_all(data).unwrap();
    for i in 0..files {
        std::fs::write(
            data.join(format!("p{i:03}.parquet")),
            orders_parquet(i * rows, rows as usize, row_group_rows, SampleCodec::Snappy).unwrap(),
        )
        .unwrap();
    }
}

/// Runs the Python script `tests/iceberg/<script>` (pyiceberg, installed by setup.sh) into a
/// fresh directory and returns it with the JSON it wrote there as `<expected>`.
pub fn python_tables(script: &str, expected: &str) -> (tempfile::TempDir, serde_json::Value) {
    python_tables_with(script, expected, &[])
}

/// [`python_tables`] with environment variables for the script.
pub fn python_tables_with(
    script: &str,
    expected: &str,
    envs: &[(&str, String)],
) -> (tempfile::TempDir, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/iceberg")
        .join(script);
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("python3 runs (setup.sh installs pyiceberg[sql-sqlite,pyarrow])");
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json = std::fs::read(dir.path().join(expected)).unwrap();
    (dir, serde_json::from_slice(&json).unwrap())
}

/// moto's standalone S3-compatible server (`moto_server`, PyPI; `scripts/setup.sh` installs
/// it) on a free port of 127.0.0.1, killed when dropped.
pub struct Moto {
    child: std::process::Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Starts the server and creates `buckets`.
    pub fn start(buckets: &[&str]) -> Moto {
        use std::io::{Read, Write};
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server (pip install 'moto[server]'; scripts/setup.sh does)");
        let moto = Moto { child, port };
        let put = |bucket: &str| -> Option<String> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            write!(
                s,
                "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .ok()?;
            let mut out = String::new();
            s.read_to_string(&mut out).ok()?;
            Some(out)
        };
        for _ in 0..200 {
            if let Some(out) = put(buckets.first().copied().unwrap_or("skerry")) {
                assert!(out.starts_with("HTTP/1.1 200"), "{out}");
                for b in buckets.iter().skip(1) {
                    let out = put(b).unwrap();
                    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
                }
                return moto;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("moto_server did not start on port {port}");
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Storage options of an `s3://` store at `endpoint` (moto accepts any credentials).
pub fn s3_storage(endpoint: &str) -> Vec<(String, String)> {
    [
        ("aws_endpoint", endpoint.to_string()),
        ("aws_allow_http", "true".into()),
        ("aws_access_key_id", "test".into()),
        ("aws_secret_access_key", "test".into()),
        ("aws_region", "us-east-1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// An HTTP proxy in front of an S3-compatible server that makes one bucket read-only, as
/// read-only credentials would: any request but GET and HEAD under `/<bucket>` is refused
/// `403 AccessDenied` and counted; everything else is forwarded (one request per
/// connection).
pub struct ReadOnlyProxy {
    pub port: u16,
    /// Write attempts refused, and reads forwarded, under the read-only bucket.
    pub refused: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl ReadOnlyProxy {
    pub fn start(upstream: u16, bucket: &str) -> ReadOnlyProxy {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::Ordering::Relaxed;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let reads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (r1, r2) = (refused.clone(), reads.clone());
        let prefix = format!("/{bucket}");
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(client) = conn else { continue };
                let (refused, reads, prefix) = (r1.clone(), r2.clone(), prefix.clone());
                std::thread::spawn(move || -> std::io::Result<()> {
                    let mut rd = BufReader::new(client.try_clone()?);
                    let mut head = Vec::new();
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if rd.read_line(&mut line)? == 0 {
                            return Ok(());
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if !lower.starts_with("connection:") {
                            head.push(line);
                        }
                    }
                    let mut body = vec![0u8; length];
                    rd.read_exact(&mut body)?;
                    let mut first = head.first().cloned().unwrap_or_default().into_bytes();
                    first.truncate(first.len().min(4096));
                    let first = String::from_utf8_lossy(&first).to_string();
                    let mut parts = first.split_whitespace();
                    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let ours = path == prefix
                        || path.starts_with(&format!("{prefix}/"))
                        || path.starts_with(&format!("{prefix}?"));
                    let mut client = client;
                    if ours && method != "GET" && method != "HEAD" {
                        refused.fetch_add(1, Relaxed);
                        let msg = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>read-only credentials</Message></Error>";
                        write!(
                            client,
                            "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
                            msg.len()
                        )?;
                        return Ok(());
                    }
                    if ours {
                        reads.fetch_add(1, Relaxed);
                    }
                    let mut up = std::net::TcpStream::connect(("127.0.0.1", upstream))?;
                    for h in &head {
                        up.write_all(h.as_bytes())?;
                    }
                    up.write_all(b"Connection: close\r\n\r\n")?;
                    up.write_all(&body)?;
                    std::io::copy(&mut up, &mut client)?;
                    Ok(())
                });
            }
        });
        ReadOnlyProxy {
            port,
            refused,
            reads,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// The first column of a query's answer as sorted ids (an Int64 column).
pub fn sorted_ids(r: &skerry_core::read::plan::QueryResult) -> Vec<i64> {
    let a = r
        .batch
        .column(0)
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .unwrap();
    let mut v: Vec<i64> = a.values().to_vec();
    v.sort();
    v
}

/// A read-only reader of the published overlay at `dir` (default options): what a service
/// opens, each call a new reader with a cold cache.
pub async fn open_reader(dir: &Path) -> skerry_core::read::reader::OverlayReader {
    skerry_core::read::reader::OverlayReader::open(
        &format!("file://{}", dir.display()),
        skerry_core::io::store::OpenOptions::default(),
    )
    .await
    .unwrap()
}

/// Gives `table` a unique ordered index `by_id` on `id`, builds and publishes it; returns the
/// query of every row's `id` (the mounted Iceberg tables' tests).
pub async fn index_ids_and_publish(o: &Overlay, table: &str) -> skerry_core::read::plan::Query {
    o.create_index(table, "by_id", &["id".into()], IndexOptions::unique())
        .await
        .unwrap();
    o.build(table, |_| {}).await.unwrap();
    o.publish().await.unwrap();
    skerry_core::read::plan::Query {
        columns: Some(vec!["id".into()]),
        limit: Some(100_000),
        ..Default::default()
    }
}

/// The files of a run `now` that merged the run `first` after its file `rewritten` changed
/// (RFC 0004, decision 69): checked to begin with `first`'s other files in their order —
/// a merge keeps a merged run's files' order and leaves a changed file's old entries out.
pub fn merged_run_files(
    first: &skerry_core::formats::manifest::TableRun,
    now: &skerry_core::formats::manifest::TableRun,
    rewritten: &str,
) -> Vec<String> {
    let names: Vec<String> = now.files.iter().map(|f| f.path.clone()).collect();
    let kept: Vec<String> = first
        .files
        .iter()
        .map(|f| f.path.clone())
        .filter(|p| p != rewritten)
        .collect();
    assert_eq!(
        names[..kept.len()],
        kept[..],
        "the merged run's files keep their order"
    );
    names
}

/// Every file under `dir`, at any depth (a test's view of the objects an overlay stored).
#[allow(dead_code)]
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Vacuums `o` keeping only the newest manifest and no young objects: what nothing
/// references any more is deleted now (the blobs a run took, decision 71, among them).
#[allow(dead_code)]
pub async fn vacuum_now(o: &Overlay) {
    o.vacuum(skerry_core::admin::lifecycle::VacuumOptions {
        retain_versions: 1,
        grace_seconds: 0,
    })
    .await
    .unwrap();
}

/// Serves `manifest` (JSON text) as the published version of the overlay at `overlay_dir`,
/// the way a publisher writes it: the file `HEAD` names, and `HEAD` itself with the document
/// inlined when it fits (decision 72) — so a test that alters the published manifest is read
/// whichever way a reader opens.
#[allow(dead_code)]
pub fn serve_published(overlay_dir: &Path, manifest: &[u8]) {
    use skerry_core::formats::manifest::{Head, HEAD_PATH};
    let head_file = overlay_dir.join(HEAD_PATH);
    let head: Head =
        serde_json::from_slice(&Head::json(&std::fs::read(&head_file).unwrap()).unwrap()).unwrap();
    std::fs::write(overlay_dir.join(&head.path), manifest).unwrap();
    std::fs::write(&head_file, Head::body(head.version, &head.path, manifest)).unwrap();
}
