//! A fault-injecting [`ObjectStore`] for tests (issue "Faults, soak and fuzzing"): wraps a
//! real store and makes chosen calls fail — on paths under chosen prefixes, by kind of call,
//! at a seeded random rate — so a test can show that every operation either completes or
//! fails typed, and that retrying converges without losing or doubling a commit.
//!
//! Faults: a call that errors before touching the store (`put`, `get`, `head`, `delete`,
//! `list`, `copy`), and a torn multipart upload (a part or the completion fails after parts
//! were written: the object never appears).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// Which calls may fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Put,
    Multipart,
    Get,
    Head,
    Delete,
    List,
    Copy,
}

/// A store whose calls fail as its plan says.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    /// Paths under these prefixes may fail (others never do).
    prefixes: Vec<String>,
    calls: Vec<Call>,
    /// Probability of a fault per eligible call, in millionths.
    rate_ppm: AtomicU64,
    rng: Mutex<u64>,
    on: AtomicBool,
    /// When set (`n` > 0): only the `n`th eligible call from [`FaultStore::fail_nth`] fails.
    nth: AtomicU64,
    seen: AtomicU64,
    /// Faults injected so far, per call kind (in `Call` order).
    pub injected: [AtomicU64; 7],
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

impl FaultStore {
    /// Wraps `inner`: calls of the kinds `calls` on paths under `prefixes` fail with
    /// probability `rate` (seeded by `seed`) while the store is on.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        prefixes: &[&str],
        calls: &[Call],
        rate: f64,
        seed: u64,
    ) -> Arc<FaultStore> {
        Arc::new(FaultStore {
            inner,
            prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
            calls: calls.to_vec(),
            rate_ppm: AtomicU64::new((rate * 1e6) as u64),
            rng: Mutex::new(seed | 1),
            on: AtomicBool::new(true),
            nth: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            injected: Default::default(),
        })
    }

    /// Faults on or off (off: a plain pass-through).
    pub fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }

    /// From now on, the `n`th eligible call fails and no other (`n` = 0: back to the rate).
    pub fn fail_nth(&self, n: u64) {
        self.seen.store(0, Ordering::SeqCst);
        self.nth.store(n, Ordering::SeqCst);
    }

    pub fn set_rate(&self, rate: f64) {
        self.rate_ppm.store((rate * 1e6) as u64, Ordering::SeqCst);
    }

    /// Faults injected so far.
    pub fn total(&self) -> u64 {
        self.injected.iter().map(|x| x.load(Ordering::SeqCst)).sum()
    }

    fn roll(&self) -> u64 {
        let mut r = self.rng.lock().unwrap();
        *r ^= *r << 13;
        *r ^= *r >> 7;
        *r ^= *r << 17;
        *r % 1_000_000
    }

    /// Whether this call fails (and counts it).
    fn fails(&self, call: Call, path: Option<&Path>) -> bool {
        if !self.on.load(Ordering::SeqCst) || !self.calls.contains(&call) {
            return false;
        }
        let eligible = match path {
            Some(p) => self
                .prefixes
                .iter()
                .any(|x| p.as_ref().starts_with(x.as_str())),
            None => true,
        };
        if !eligible {
            return false;
        }
        let nth = self.nth.load(Ordering::SeqCst);
        if nth > 0 {
            if self.seen.fetch_add(1, Ordering::SeqCst) + 1 != nth {
                return false;
            }
        } else if self.roll() >= self.rate_ppm.load(Ordering::SeqCst) {
            return false;
        }
        let i = [
            Call::Put,
            Call::Multipart,
            Call::Get,
            Call::Head,
            Call::Delete,
            Call::List,
            Call::Copy,
        ]
        .iter()
        .position(|c| *c == call)
        .unwrap();
        self.injected[i].fetch_add(1, Ordering::SeqCst);
        true
    }
}

fn fault(call: Call, path: Option<&Path>) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultStore",
        source: format!(
            "injected fault: {call:?} {}",
            path.map_or(String::new(), |p| p.to_string())
        )
        .into(),
    }
}

/// A multipart upload that may tear: a part or the completion fails; the object then never
/// appears (the inner upload is aborted).
#[derive(Debug)]
struct FaultUpload {
    inner: Box<dyn MultipartUpload>,
    store: Arc<FaultStore>,
    path: Path,
}

#[async_trait]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        if self.store.fails(Call::Multipart, Some(&self.path)) {
            let e = fault(Call::Multipart, Some(&self.path));
            return Box::pin(async move { Err(e) });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        if self.store.fails(Call::Multipart, Some(&self.path)) {
            let _ = self.inner.abort().await;
            return Err(fault(Call::Multipart, Some(&self.path)));
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

/// The store as the overlay sees it: an `Arc<FaultStore>` behind `ObjectStore`.
#[derive(Debug, Clone)]
pub struct Faulty(pub Arc<FaultStore>);

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.0.fails(Call::Put, Some(location)) {
            return Err(fault(Call::Put, Some(location)));
        }
        self.0.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if self.0.fails(Call::Multipart, Some(location)) {
            return Err(fault(Call::Multipart, Some(location)));
        }
        let inner = self.0.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultUpload {
            inner,
            store: self.0.clone(),
            path: location.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let call = if options.head { Call::Head } else { Call::Get };
        if self.0.fails(call, Some(location)) {
            return Err(fault(call, Some(location)));
        }
        self.0.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        if self.0.fails(Call::Get, Some(location)) {
            return Err(fault(Call::Get, Some(location)));
        }
        self.0.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let store = self.0.clone();
        locations
            .then(move |p| {
                let store = store.clone();
                async move {
                    let p = p?;
                    if store.fails(Call::Delete, Some(&p)) {
                        return Err(fault(Call::Delete, Some(&p)));
                    }
                    store.inner.delete(&p).await.map(|_| p)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        if self.0.fails(Call::List, prefix) {
            let e = fault(Call::List, prefix);
            return futures::stream::once(async move { Err(e) }).boxed();
        }
        self.0.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        if self.0.fails(Call::List, prefix) {
            return Err(fault(Call::List, prefix));
        }
        self.0.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        if self.0.fails(Call::Copy, Some(to)) {
            return Err(fault(Call::Copy, Some(to)));
        }
        self.0.inner.copy_opts(from, to, options).await
    }
}

/// Runs `f` with a fault at its first store call, then — after each typed, retryable failure
/// — again with the fault one call later, until it succeeds past the armed call: a fault at
/// every call of the verb's path (as its retries take it). Returns the result and the
/// failures it reported and the faults injected.
pub async fn sweep<T, F, Fut>(what: &str, faults: &FaultStore, mut f: F) -> (T, (u32, u64))
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, skerry_core::error::Error>>,
{
    let mut failed = 0;
    let start = faults.total();
    for n in 1.. {
        faults.fail_nth(n);
        match f().await {
            // Past the armed call, or a fault absorbed (a best-effort delete): done.
            Ok(v) => {
                faults.fail_nth(0);
                return (v, (failed, faults.total() - start));
            }
            Err(e) => {
                assert!(
                    e.retryable(),
                    "{what}: a fault at call {n} surfaced as a non-retryable {}: {e}",
                    e.code()
                );
                failed += 1;
            }
        }
        assert!(n < 2_000, "{what} never converged");
    }
    unreachable!()
}
