//! A fault-injecting [`ObjectStore`] (issue "Faults, soak and fuzzing"): wraps a real store
//! and makes chosen calls fail — on paths under chosen prefixes, by kind of call, at a seeded
//! random rate or at the `n`th call — so tests and the soak can show that every operation
//! either completes or fails typed, and that retrying converges without losing or doubling a
//! commit.
//!
//! Faults: a call that errors before touching the store (`put`, `get`, `head`, `delete`,
//! `list`, `copy`; an `object_store::Error::Generic`, which SlateDB's own retry layer retries
//! and Skerry reports as a retryable `E_IO`), and a torn multipart upload (a part or the
//! completion fails after parts were written: the object never appears).
//!
//! Not for production. A [`FaultPlan`] (parsed from text, e.g. the Node addon's
//! `SKERRY_FAULTS` environment variable) in [`crate::io::store::OpenOptions::faults`] wraps
//! the overlay's store — catalog (SlateDB) objects included — when it is opened.

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

impl Call {
    /// Every kind of call, in the order of [`FaultStore::injected`].
    pub const ALL: [Call; 7] = [
        Call::Put,
        Call::Multipart,
        Call::Get,
        Call::Head,
        Call::Delete,
        Call::List,
        Call::Copy,
    ];
}

/// Faults injected by every [`FaultStore`] of this process (for a soak's report).
static INJECTED: AtomicU64 = AtomicU64::new(0);

/// Faults injected by every [`FaultStore`] of this process so far.
pub fn injected_total() -> u64 {
    INJECTED.load(Ordering::Relaxed)
}

const CALLS: [(Call, &str); 7] = [
    (Call::Put, "put"),
    (Call::Multipart, "multipart"),
    (Call::Get, "get"),
    (Call::Head, "head"),
    (Call::Delete, "delete"),
    (Call::List, "list"),
    (Call::Copy, "copy"),
];

/// What to fail, as text: `rate=0.01,seed=7,calls=put+get+list,prefixes=bundles/+catalog/`.
/// `rate` (0–1, required) is the chance of a fault per eligible call; `seed` (default 1) seeds
/// it; `calls` (default all: `put`, `multipart`, `get`, `head`, `delete`, `list`, `copy`) and
/// `prefixes` (default every path; paths relative to the overlay's root) choose the eligible
/// calls; `delay` (ms, default 0) makes each eligible call but a list wait a random 0..delay
/// ms first (a slow store).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultPlan {
    pub rate: f64,
    pub seed: u64,
    pub calls: Vec<Call>,
    pub prefixes: Vec<String>,
    /// Each eligible call first waits a random 0..`delay_ms` ms (`delay=`, default 0).
    pub delay_ms: u64,
}

impl FaultPlan {
    /// Parses a plan; anything unknown or out of range is `E_INVALID` naming it.
    pub fn parse(text: &str) -> crate::error::Result<FaultPlan> {
        let bad = |m: String| crate::error::Error::Invalid(format!("fault plan {text:?}: {m}"));
        let mut plan = FaultPlan {
            rate: f64::NAN,
            seed: 1,
            calls: CALLS.iter().map(|c| c.0).collect(),
            prefixes: vec![String::new()],
            delay_ms: 0,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not key=value")))?;
            match k.trim() {
                "rate" => {
                    plan.rate = v
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|r| (0.0..=1.0).contains(r))
                        .ok_or_else(|| bad(format!("rate {v:?} is not a number from 0 to 1")))?
                }
                "seed" => {
                    plan.seed = v
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("seed {v:?} is not an unsigned integer")))?
                }
                "calls" => {
                    plan.calls = v
                        .split('+')
                        .map(|c| {
                            CALLS
                                .iter()
                                .find(|x| x.1 == c.trim())
                                .map(|x| x.0)
                                .ok_or_else(|| bad(format!("unknown call {c:?}")))
                        })
                        .collect::<crate::error::Result<_>>()?
                }
                "delay" => {
                    plan.delay_ms = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|ms| *ms <= 60_000)
                        .ok_or_else(|| {
                            bad(format!("delay {v:?} is not milliseconds up to 60000"))
                        })?
                }
                "prefixes" => plan.prefixes = v.split('+').map(|p| p.trim().to_string()).collect(),
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
        }
        if plan.rate.is_nan() {
            return Err(bad("rate is required".into()));
        }
        Ok(plan)
    }

    /// `inner` behind a [`FaultStore`] following this plan.
    pub fn wrap(&self, inner: Arc<dyn ObjectStore>) -> Arc<FaultStore> {
        let prefixes: Vec<&str> = self.prefixes.iter().map(String::as_str).collect();
        let s = FaultStore::new(inner, &prefixes, &self.calls, self.rate, self.seed);
        s.set_delay_ms(self.delay_ms);
        s
    }
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
    /// Each eligible call first waits a seeded random 0..`delay_ms` milliseconds.
    delay_ms: AtomicU64,
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
            delay_ms: AtomicU64::new(0),
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

    /// Every eligible call first waits a random 0..`ms` milliseconds (a slow store; with a
    /// reader's `timeout`, an `E_TIMEOUT`). 0: no wait.
    pub fn set_delay_ms(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::SeqCst);
    }

    /// The wait of an eligible call (see [`FaultStore::set_delay_ms`]).
    async fn pause(&self, call: Call, path: &Path) {
        let max = self.delay_ms.load(Ordering::SeqCst);
        if max == 0 || !self.on.load(Ordering::SeqCst) || !self.eligible(call, Some(path)) {
            return;
        }
        let ms = self.roll() % (max + 1);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }

    fn eligible(&self, call: Call, path: Option<&Path>) -> bool {
        self.calls.contains(&call)
            && match path {
                Some(p) => self
                    .prefixes
                    .iter()
                    .any(|x| p.as_ref().starts_with(x.as_str())),
                None => true,
            }
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
        if !self.on.load(Ordering::SeqCst) || !self.eligible(call, path) {
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
        let i = Call::ALL.iter().position(|c| *c == call).unwrap();
        self.injected[i].fetch_add(1, Ordering::SeqCst);
        INJECTED.fetch_add(1, Ordering::Relaxed);
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
        self.0.pause(Call::Put, location).await;
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
        self.0.pause(Call::Multipart, location).await;
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
        self.0.pause(call, location).await;
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
        self.0.pause(Call::Get, location).await;
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
        self.0.pause(Call::Copy, to).await;
        if self.0.fails(Call::Copy, Some(to)) {
            return Err(fault(Call::Copy, Some(to)));
        }
        self.0.inner.copy_opts(from, to, options).await
    }
}
