//! [`RangeReader`] over the `object_store` crate (native only): `file://`, `memory://` and,
//! with the `s3` feature, `s3://` (endpoint and credentials from options or the environment,
//! so any S3-compatible server works).

use std::ops::Range;
use std::sync::Arc;

use ::object_store::path::Path;
use ::object_store::{GetOptions, GetRange, ObjectStore};
use bytes::Bytes;

use super::{
    check_range, BoxFut, IoCounters, IoError, Location, ObjectMeta, RangeReader, Reply, Request,
};

/// Largest range of a local file read in place on the calling task (see
/// [`ObjectStoreReader::from_url`]); larger ones go through the store's blocking pool.
pub const LOCAL_INLINE_MAX: u64 = 1 << 20;

/// Reads objects below `root` of an [`ObjectStore`].
#[derive(Debug, Clone)]
pub struct ObjectStoreReader {
    store: Arc<dyn ObjectStore>,
    /// The same store when it is the local file system (`file://`).
    local: Option<Arc<::object_store::local::LocalFileSystem>>,
    root: Path,
    counters: Arc<IoCounters>,
    /// Limit on each request, body included ([`IoError::Timeout`] past it).
    timeout: Option<std::time::Duration>,
    /// The store's versions name one content ([`RangeReader::content_versions`]).
    content_versions: bool,
}

impl ObjectStoreReader {
    /// A reader over `store`, resolving locations below `root`.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        ObjectStoreReader {
            store,
            local: None,
            root,
            counters: Arc::new(IoCounters::default()),
            timeout: None,
            content_versions: false,
        }
    }

    /// Declares that `store`'s versions name one content and that it honours `If-Match` on
    /// reads ([`RangeReader::content_versions`]): S3-compatible stores, whose ETags hash the
    /// content, and `object_store`'s in-memory store, whose ETags are never reused. Readers
    /// made by [`ObjectStoreReader::from_url`] say so themselves; a reader over any other
    /// store (a wrapper, the local file system) does not unless told.
    pub fn with_content_versions(mut self, yes: bool) -> Self {
        self.content_versions = yes;
        self
    }

    /// A reader over the local file system `store` (whose own prefix, if any, maps paths to
    /// files), resolving locations below `root`: ranges up to [`LOCAL_INLINE_MAX`] are read in
    /// place on the calling task, the rest through the store.
    pub fn local(store: Arc<::object_store::local::LocalFileSystem>, root: Path) -> Self {
        ObjectStoreReader {
            local: Some(store.clone()),
            ..Self::new(store, root)
        }
    }

    /// The time limit of each request, if any.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout
    }

    /// Fails every request that has not completed (body included) within `timeout` with
    /// [`IoError::Timeout`] instead of waiting for ever. Needs a tokio runtime with timers.
    pub fn with_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    async fn timed<T>(
        &self,
        loc: &Location,
        f: impl std::future::Future<Output = Result<T, IoError>>,
    ) -> Result<T, IoError> {
        match self.timeout {
            None => f.await,
            Some(d) => tokio::time::timeout(d, f).await.unwrap_or_else(|_| {
                Err(IoError::Timeout {
                    path: loc.path.to_string(),
                    ms: d.as_millis() as u64,
                })
            }),
        }
    }

    /// Opens `file:///dir`, `memory://` or `s3://bucket/prefix` (the last with the `s3`
    /// feature). `options` are object_store configuration keys (`aws_endpoint`,
    /// `aws_access_key_id`, `aws_allow_http`, …); for `s3://` the `AWS_*` environment is read
    /// first and `options` override it.
    pub fn from_url(url: &str, options: &[(String, String)]) -> Result<Self, IoError> {
        let invalid = |reason: String| IoError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|_| invalid("not a local path".into()))?;
                let store = Arc::new(::object_store::local::LocalFileSystem::new());
                let root = Path::from_absolute_path(&dir).map_err(|e| invalid(e.to_string()))?;
                Ok(Self::local(store, root))
            }
            "memory" => {
                let root = Path::parse(parsed.path()).map_err(|e| invalid(e.to_string()))?;
                Ok(
                    Self::new(Arc::new(::object_store::memory::InMemory::new()), root)
                        .with_content_versions(true),
                )
            }
            #[cfg(feature = "s3")]
            "s3" | "s3a" => {
                use ::object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                let mut b = AmazonS3Builder::from_env().with_url(url);
                for (k, v) in options {
                    let key: AmazonS3ConfigKey = k
                        .parse()
                        .map_err(|e: ::object_store::Error| invalid(e.to_string()))?;
                    b = b.with_config(key, v.clone());
                }
                let store = b.build().map_err(|e| invalid(e.to_string()))?;
                let root = Path::parse(parsed.path()).map_err(|e| invalid(e.to_string()))?;
                Ok(Self::new(Arc::new(store), root).with_content_versions(true))
            }
            #[cfg(not(feature = "s3"))]
            "s3" | "s3a" => {
                let _ = options;
                Err(IoError::Unsupported(
                    "s3:// needs skerry-core built with the `s3` feature".into(),
                ))
            }
            other => Err(invalid(format!(
                "unsupported scheme {other:?} (file, memory, s3)"
            ))),
        }
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store path of `path` (relative to the root).
    pub fn resolve(&self, path: &str) -> Result<Path, IoError> {
        let rel = Path::parse(path).map_err(|e| IoError::Other {
            path: path.to_string(),
            message: e.to_string(),
            source: super::Source::new(e),
        })?;
        Ok(self.root.parts().chain(rel.parts()).collect())
    }

    fn opts(loc: &Location, range: Option<GetRange>) -> GetOptions {
        GetOptions {
            if_match: loc.version.as_deref().map(str::to_string),
            range,
            ..Default::default()
        }
    }
}

fn map_err(loc: &Location, e: ::object_store::Error) -> IoError {
    match e {
        ::object_store::Error::NotFound { .. } => IoError::NotFound {
            path: loc.path.to_string(),
        },
        ::object_store::Error::Precondition { .. } => IoError::Changed {
            path: loc.path.to_string(),
            expected: loc.version.as_deref().unwrap_or("").to_string(),
        },
        other => match super::store::store_err(other) {
            // Refused credentials, directly or through a credential provider.
            IoError::Denied { message, .. } => IoError::Denied {
                path: loc.path.to_string(),
                message,
            },
            IoError::Other {
                message, source, ..
            } => IoError::Other {
                path: loc.path.to_string(),
                message,
                source,
            },
            e => e,
        },
    }
}

/// A local file opened to be read in place: a small `pread` from the page cache costs less
/// than the two hops through tokio's blocking pool that `LocalFileSystem::get_opts` and its
/// payload take (a point query makes several such reads in sequence, a vector search a hundred
/// at once). Same answers and errors as the store: the version pin is checked against the
/// store's own ETag of the file (`"{inode:x}-{mtime µs:x}-{size:x}"`, object_store 0.14's
/// `local.rs`), a range past the end is [`IoError::OutOfRange`].
#[cfg(unix)]
struct LocalFile<'l> {
    file: std::fs::File,
    size: u64,
    loc: &'l Location,
}

#[cfg(unix)]
impl<'l> LocalFile<'l> {
    fn open(file: &std::path::Path, loc: &'l Location) -> Result<LocalFile<'l>, IoError> {
        use std::os::unix::fs::MetadataExt;
        let not_found = || IoError::NotFound {
            path: loc.path.to_string(),
        };
        let f = std::fs::File::open(file).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => not_found(),
            _ => Self::other(loc, e),
        })?;
        let md = f.metadata().map_err(|e| Self::other(loc, e))?;
        if md.is_dir() {
            return Err(not_found());
        }
        if let Some(want) = loc.version.as_deref() {
            let mtime = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::SystemTime::UNIX_EPOCH).ok())
                .unwrap_or_default()
                .as_micros();
            let etag = format!("\"{:x}-{mtime:x}-{:x}\"", md.ino(), md.len());
            if want != "*" && !want.split(',').any(|w| w.trim() == etag) {
                return Err(IoError::Changed {
                    path: loc.path.to_string(),
                    expected: want.to_string(),
                });
            }
        }
        Ok(LocalFile {
            file: f,
            size: md.len(),
            loc,
        })
    }

    fn other(loc: &Location, e: std::io::Error) -> IoError {
        IoError::Other {
            path: loc.path.to_string(),
            message: e.to_string(),
            source: super::Source::new(e),
        }
    }

    /// The bytes of `range` (a positioned read: the file's offset is not used).
    fn read(&self, range: Range<u64>) -> Result<Bytes, IoError> {
        use std::os::unix::fs::FileExt;
        if range.end > self.size {
            return Err(super::past_end(self.loc, &range, self.size));
        }
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        match self.file.read_exact_at(&mut buf, range.start) {
            Ok(()) => {}
            // Shorter than its metadata said: it changed while being read.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(super::past_end(self.loc, &range, self.size))
            }
            Err(e) => return Err(Self::other(self.loc, e)),
        }
        Ok(Bytes::from(buf))
    }
}

fn meta(m: &::object_store::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        size: m.size,
        version: m.e_tag.clone().or_else(|| m.version.clone()),
    }
}

impl ObjectStoreReader {
    async fn head_of(&self, loc: &Location) -> Result<ObjectMeta, IoError> {
        self.timed(loc, async move {
            let path = self.resolve(&loc.path)?;
            let opts = GetOptions {
                head: true,
                ..Self::opts(loc, None)
            };
            let r = self
                .store
                .get_opts(&path, opts)
                .await
                .map_err(|e| map_err(loc, e))?;
            self.counters.record_request(0);
            Ok(meta(&r.meta))
        })
        .await
    }

    async fn range_of(&self, loc: &Location, range: Range<u64>) -> Result<Bytes, IoError> {
        self.timed(loc, async move {
            check_range(loc, &range)?;
            let path = self.resolve(&loc.path)?;
            #[cfg(unix)]
            if let Some(fs) = &self.local {
                if range.end - range.start <= LOCAL_INLINE_MAX {
                    let file = fs.path_to_filesystem(&path).map_err(|e| map_err(loc, e))?;
                    let bytes = LocalFile::open(&file, loc)?.read(range)?;
                    self.counters.record_request(bytes.len() as u64);
                    return Ok(bytes);
                }
            }
            let opts = Self::opts(loc, Some(GetRange::Bounded(range.clone())));
            let r = match self.store.get_opts(&path, opts).await {
                Ok(r) => r,
                Err(
                    e @ (::object_store::Error::NotFound { .. }
                    | ::object_store::Error::Precondition { .. }),
                ) => return Err(map_err(loc, e)),
                Err(e) => {
                    // A range starting past the end: report it as such, with the real size.
                    let head = GetOptions {
                        head: true,
                        ..Self::opts(loc, None)
                    };
                    if let Ok(h) = self.store.get_opts(&path, head).await {
                        if range.start >= h.meta.size {
                            let size = h.meta.size;
                            return Err(super::past_end(loc, &range, size));
                        }
                    }
                    return Err(map_err(loc, e));
                }
            };
            // A store that ignored `If-Match` still names the version it answered with.
            if let (Some(want), Some(got)) = (loc.version.as_deref(), meta(&r.meta).version) {
                if want != "*" && !want.split(',').any(|w| w.trim() == got) {
                    return Err(IoError::Changed {
                        path: loc.path.to_string(),
                        expected: want.to_string(),
                    });
                }
            }
            let size = r.meta.size;
            let bytes = r.bytes().await.map_err(|e| map_err(loc, e))?;
            self.counters.record_request(bytes.len() as u64);
            if bytes.len() as u64 != range.end - range.start {
                return Err(super::past_end(loc, &range, size));
            }
            Ok(bytes)
        })
        .await
    }

    async fn suffix_of(&self, loc: &Location, len: u64) -> Result<Reply, IoError> {
        self.timed(loc, async move {
            let path = self.resolve(&loc.path)?;
            let opts = Self::opts(loc, Some(GetRange::Suffix(len)));
            let r = self
                .store
                .get_opts(&path, opts)
                .await
                .map_err(|e| map_err(loc, e))?;
            let m = meta(&r.meta);
            let bytes = r.bytes().await.map_err(|e| map_err(loc, e))?;
            self.counters.record_request(bytes.len() as u64);
            Ok(Reply::tail(bytes, m))
        })
        .await
    }

    async fn all_of(&self, loc: &Location, max: u64) -> Result<Bytes, IoError> {
        self.timed(loc, async move {
            let path = self.resolve(&loc.path)?;
            let r = self
                .store
                .get_opts(&path, Self::opts(loc, None))
                .await
                .map_err(|e| map_err(loc, e))?;
            // The store declares the size before the body is read.
            if r.meta.size > max {
                return Err(IoError::TooLarge {
                    path: loc.path.to_string(),
                    max,
                });
            }
            let bytes = r.bytes().await.map_err(|e| map_err(loc, e))?;
            self.counters.record_request(bytes.len() as u64);
            if bytes.len() as u64 > max {
                return Err(IoError::TooLarge {
                    path: loc.path.to_string(),
                    max,
                });
            }
            Ok(bytes)
        })
        .await
    }
}

/// Attempts of a read that fails with a transient store error ([`IoError::Other`]: not a
/// missing or changed object, a bad range or a timeout) before the error is returned. A
/// build or a merge reads hundreds of objects; without this, one transient failure in any
/// of them failed the whole operation, and at a steady fault rate a big enough one never
/// completed (found by the soak, `tests/soak/`). HTTP stores' clients retry too (object_store's
/// `RetryConfig`); local disk and wrapped stores did not.
pub const READ_ATTEMPTS: u32 = 4;

/// The wait before retry `attempt` (1-based) of a read: 20, 80, 320 ms.
fn read_backoff(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_millis(20 << (2 * (attempt - 1)).min(8))
}

impl ObjectStoreReader {
    async fn fetch_once(&self, loc: &Location, req: Request) -> Result<Reply, IoError> {
        match req {
            Request::Head => Ok(Reply::meta(self.head_of(loc).await?)),
            Request::Range(r) => Ok(Reply::bytes(self.range_of(loc, r).await?)),
            Request::Suffix(len) | Request::Tail { len, .. } => self.suffix_of(loc, len).await,
            Request::All(max) => Ok(Reply::bytes(
                self.all_of(loc, max.unwrap_or(u64::MAX)).await?,
            )),
        }
    }
}

impl RangeReader for ObjectStoreReader {
    /// One read, retried up to [`READ_ATTEMPTS`] times in all while it fails with a transient
    /// store error (reads are idempotent); every other error is returned at once.
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            let mut attempt = 1;
            loop {
                match self.fetch_once(loc, req.clone()).await {
                    Err(IoError::Other { .. }) if attempt < READ_ATTEMPTS => {
                        tokio::time::sleep(read_backoff(attempt)).await;
                        attempt += 1;
                    }
                    r => return r,
                }
            }
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn content_versions(&self, loc: &Location) -> bool {
        self.content_versions && self.local.is_none() && loc.version.is_some()
    }

    /// On the local file system, small merged ranges are read in place from one open file
    /// (a request each, as counted); elsewhere as every reader does.
    fn read_ranges_gap<'a>(
        &'a self,
        loc: &'a Location,
        ranges: &'a [Range<u64>],
        max_gap: u64,
    ) -> BoxFut<'a, Result<Vec<Bytes>, IoError>> {
        Box::pin(async move {
            #[cfg(unix)]
            if let Some(fs) = &self.local {
                for r in ranges {
                    check_range(loc, r)?;
                }
                let merged = super::coalesce_ranges(ranges, max_gap);
                if merged.len() > 1 && merged.iter().all(|m| m.end - m.start <= LOCAL_INLINE_MAX) {
                    let merged = &merged;
                    let fetched = self
                        .timed(loc, async move {
                            let path = self.resolve(&loc.path)?;
                            let file = fs.path_to_filesystem(&path).map_err(|e| map_err(loc, e))?;
                            let f = LocalFile::open(&file, loc)?;
                            let mut out = Vec::with_capacity(merged.len());
                            for m in merged {
                                let bytes = f.read(m.clone())?;
                                self.counters.record_request(bytes.len() as u64);
                                out.push(bytes);
                            }
                            Ok(out)
                        })
                        .await?;
                    return Ok(super::slice_merged(ranges, merged, &fetched));
                }
            }
            super::read_ranges_each(self, loc, ranges, max_gap).await
        })
    }
}
