//! [`Snapshot`]: the owned read handle every read surface wraps — the Node addon (writer or
//! read-only), the native [`crate::read::reader::OverlayReader`] and the wasm reader.
//!
//! A snapshot is one pinned manifest with the readers that reach its overlay and data files,
//! a shared directory cache, and an optional [`RejectionSink`] told about every index the
//! read gate rejects (the native writer queues those files for repair). It is cheap to
//! create (a few `Arc` clones) and owns everything it reads through, so a binding can move
//! it into a future and drop it when the answer is shaped.

use std::sync::Arc;

use arrow_array::RecordBatch;

use crate::error::{Error, Result};
use crate::formats::lineage::Rejection;
use crate::formats::manifest::Manifest;
use crate::io::{BoxFut, MaybeSend, MaybeSync, RangeReader};
use crate::read::cache::ReadCache;
use crate::read::lookup::{LocateResult, LookupResult, Pinned, RowRef};
use crate::read::metrics::{Metrics, MetricsReport};
use crate::read::plan::{Query, QueryResult};
use crate::values::{Value, ValueBound};

/// Told about the indexes a read rejected (the file was answered by scanning instead).
/// Implementations must not fail the read: they log what they cannot do.
pub trait RejectionSink: MaybeSend + MaybeSync {
    fn rejected<'a>(
        &'a self,
        manifest: &'a Manifest,
        table: &'a str,
        rejections: &'a [Rejection],
    ) -> BoxFut<'a, ()>;
}

/// One pinned manifest and what it takes to answer reads from it.
#[derive(Clone)]
pub struct Snapshot {
    overlay: Arc<dyn RangeReader>,
    data: Arc<dyn RangeReader>,
    manifest: Arc<Manifest>,
    cache: Arc<ReadCache>,
    scan_only: bool,
    pin_versions: bool,
    sink: Option<Arc<dyn RejectionSink>>,
    metrics: Option<Arc<Metrics>>,
}

impl Snapshot {
    /// A snapshot of `manifest`, reading the overlay through `overlay` (paths relative to its
    /// root) and data files through `data` (full locations).
    pub fn new(
        overlay: Arc<dyn RangeReader>,
        data: Arc<dyn RangeReader>,
        manifest: Arc<Manifest>,
        cache: Arc<ReadCache>,
    ) -> Snapshot {
        Snapshot {
            overlay,
            data,
            manifest,
            cache,
            scan_only: false,
            pin_versions: false,
            sink: None,
            metrics: None,
        }
    }

    /// Answer every file by scanning it, ignoring indexes (the same answer; benchmarks).
    pub fn with_scan_only(mut self, on: bool) -> Snapshot {
        self.scan_only = on;
        self
    }

    /// Read data files at the versions the manifest recorded (`E_DRIFT` otherwise); native
    /// stores report versions (ETags) the manifest can be held to.
    pub fn with_pinned_versions(mut self, on: bool) -> Snapshot {
        self.pin_versions = on;
        self
    }

    pub fn with_sink(mut self, sink: Arc<dyn RejectionSink>) -> Snapshot {
        self.sink = Some(sink);
        self
    }

    /// Counts every read of this snapshot into the handle's `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Snapshot {
        self.metrics = Some(metrics);
        self
    }

    /// The handle's counters with its readers' requests and bytes and its cache's tiers
    /// (empty counters when the snapshot was made without [`Snapshot::with_metrics`]).
    pub fn metrics(&self) -> MetricsReport {
        let none = Metrics::default();
        self.metrics.as_deref().unwrap_or(&none).report(
            self.overlay.stats(),
            self.data.stats(),
            self.cache.stats(),
        )
    }

    pub fn manifest(&self) -> &Arc<Manifest> {
        &self.manifest
    }

    pub fn version(&self) -> u64 {
        self.manifest.version
    }

    fn pinned(&self) -> Pinned<'_> {
        Pinned {
            overlay: self.overlay.as_ref(),
            data: self.data.as_ref(),
            manifest: &self.manifest,
            cache: &self.cache,
            scan_only: self.scan_only,
        }
    }

    async fn tell(&self, table: &str, rejections: &[Rejection]) {
        if let (Some(sink), false) = (&self.sink, rejections.is_empty()) {
            sink.rejected(&self.manifest, table, rejections).await;
        }
    }

    async fn told(&self, verb: &str, table: &str, r: Result<LookupResult>) -> Result<LookupResult> {
        let r = r?;
        if let Some(m) = &self.metrics {
            m.record_lookup(verb, &r.stats);
        }
        self.tell(table, &r.stats.rejections).await;
        Ok(r)
    }

    /// Rows whose indexed columns equal `key` (see [`Pinned::lookup`]).
    pub async fn lookup(&self, table: &str, index: &str, key: &[Value]) -> Result<LookupResult> {
        let r = self.pinned().lookup(table, index, key).await;
        self.told("lookup", table, r).await
    }

    /// `index IN (keys)` (see [`Pinned::lookup_many`]).
    pub async fn lookup_many(
        &self,
        table: &str,
        index: &str,
        keys: &[Vec<Value>],
    ) -> Result<LookupResult> {
        let r = self.pinned().lookup_many(table, index, keys).await;
        self.told("lookupMany", table, r).await
    }

    /// `lower ≤ index ≤ upper` (see [`Pinned::range`]); with `column`, refused
    /// (`E_REFUSED`) unless the bounds range over that column.
    pub async fn range(
        &self,
        table: &str,
        index: &str,
        lower: ValueBound,
        upper: ValueBound,
        reverse: bool,
        column: Option<&str>,
    ) -> Result<LookupResult> {
        let view = self.pinned();
        if let Some(c) = column {
            view.check_range_column(table, index, &lower, &upper, c)?;
        }
        let r = view.range(table, index, lower, upper, reverse).await;
        self.told("range", table, r).await
    }

    /// `E_REFUSED` unless `lower`/`upper` range over `column` of `index` (see
    /// [`Pinned::check_range_column`]).
    pub fn check_range_column(
        &self,
        table: &str,
        index: &str,
        lower: &ValueBound,
        upper: &ValueBound,
        column: &str,
    ) -> Result<()> {
        self.pinned()
            .check_range_column(table, index, lower, upper, column)
    }

    /// `IS NULL` over a leading run of columns (see [`Pinned::nulls`]).
    pub async fn nulls(
        &self,
        table: &str,
        index: &str,
        prefix: &[Option<Value>],
        reverse: bool,
    ) -> Result<LookupResult> {
        let r = self.pinned().nulls(table, index, prefix, reverse).await;
        self.told("nulls", table, r).await
    }

    /// Where rows with stable ids `ids` are (see [`Pinned::locate`]).
    pub fn locate(&self, table: &str, ids: &[u64]) -> Result<LocateResult> {
        self.pinned().locate(table, ids)
    }

    /// `columns` of `rows`, in order (see [`Pinned::fetch`]).
    pub async fn fetch(
        &self,
        table: &str,
        rows: &[RowRef],
        columns: &[String],
    ) -> Result<RecordBatch> {
        let r = self
            .pinned()
            .fetch(table, rows, columns, self.pin_versions)
            .await;
        let r = match self.changed(r) {
            Some(r) => r,
            None => {
                self.pinned()
                    .fetch(table, rows, columns, self.pin_versions)
                    .await
            }
        };
        if let (Some(m), Ok(_)) = (&self.metrics, &r) {
            m.record_fetch();
        }
        r
    }

    /// `None` (ask again) when `r` failed because a data file changed under a version a
    /// read was pinned to — a file rewritten since its metadata was cached: the cached
    /// metadata is dropped so the second attempt reads the files as they are (and reports
    /// drift). A second `E_CHANGED` is returned (the file changed during the read).
    fn changed<T>(&self, r: Result<T>) -> Option<Result<T>> {
        match r {
            Err(crate::error::Error::Io(crate::io::IoError::Changed { .. })) => {
                self.cache.forget_metadata();
                None
            }
            r => Some(r),
        }
    }

    /// The read handle's cache.
    pub fn cache(&self) -> &Arc<ReadCache> {
        &self.cache
    }

    /// For a query pinned to upstream snapshot `snapshot` of the Iceberg-backed `table`: `None`
    /// when this manifest holds it (or nothing is pinned), else a snapshot of the manifest
    /// version that held it ([`crate::formats::manifest::Upstream::history`]). Errors:
    /// `E_NOT_FOUND` for a snapshot the overlay never published, or whose version was
    /// vacuumed; `E_INVALID` for a table that is not Iceberg-backed.
    async fn at_upstream(&self, table: &str, snapshot: Option<i64>) -> Result<Option<Snapshot>> {
        let Some(want) = snapshot else {
            return Ok(None);
        };
        let t = self.manifest.table(table)?;
        let Some(up) = &t.upstream else {
            return Err(Error::Invalid(format!(
                "table {table} is not Iceberg-backed: it has no upstream snapshots"
            )));
        };
        if up.snapshot_id == want {
            return Ok(None);
        }
        let gone = |detail: String| Error::NotFound {
            kind: "upstream snapshot",
            name: format!("{table}@{want}: {detail}"),
        };
        let Some(h) = up.history.iter().rev().find(|h| h.snapshot_id == want) else {
            return Err(gone(
                "the overlay never published it (sync and publish to read it)".into(),
            ));
        };
        let m = match crate::formats::manifest::read_version(self.overlay.as_ref(), h.version).await
        {
            Ok(m) => m,
            Err(Error::Io(crate::io::IoError::NotFound { .. })) => {
                return Err(gone(format!(
                    "manifest version {} that held it was vacuumed",
                    h.version
                )))
            }
            Err(e) => return Err(e),
        };
        let held = m.table(table)?.upstream.as_ref().map(|u| u.snapshot_id);
        if held != Some(want) {
            return Err(Error::Manifest(format!(
                "manifest version {} holds {table}@{held:?}, not {want}",
                h.version
            )));
        }
        // Data locations as this snapshot reads them (a reader may have mapped a table's
        // location to where it can read it; an Iceberg table's location never moves — a sync
        // refuses another table's metadata).
        let mut m = m;
        for t in &mut m.tables {
            if let Some(now) = self
                .manifest
                .tables
                .iter()
                .find(|x| x.table_id == t.table_id)
            {
                t.location = now.location.clone();
            }
        }
        Ok(Some(Snapshot {
            manifest: Arc::new(m),
            ..self.clone()
        }))
    }

    /// The plan `q` over `table` would follow (see [`crate::read::explain`]).
    pub async fn explain(&self, table: &str, q: &Query) -> Result<crate::read::explain::Explain> {
        self.pinned().explain(table, q).await
    }

    /// Counts the rows of `table` matching `q` (see [`crate::read::count`]).
    pub async fn count(&self, table: &str, q: &Query) -> Result<crate::read::count::CountResult> {
        self.answer::<CountVerb>(table, q).await
    }

    /// Searches `table`'s full-text index (see [`crate::read::search`]).
    pub async fn search(
        &self,
        table: &str,
        s: &crate::read::search::Search,
    ) -> Result<crate::read::search::SearchResult> {
        self.answer::<SearchVerb>(table, s).await
    }

    /// The rows of `table` nearest to a vector (see [`crate::read::nearest`]).
    pub async fn nearest(
        &self,
        table: &str,
        n: &crate::read::nearest::Nearest,
    ) -> Result<crate::read::nearest::NearestResult> {
        self.answer::<NearestVerb>(table, n).await
    }

    /// Answers `q` over `table` (see [`crate::read::plan`]). Natively the wall time is in the
    /// stats; the wasm reader measures it with the host's clock.
    pub async fn query(&self, table: &str, q: &Query) -> Result<QueryResult> {
        self.answer::<QueryVerb>(table, q).await
    }

    /// The one path every table verb takes ([`Verb`]): a call pinned to an upstream snapshot
    /// runs against the manifest version that held it; data versions are pinned when the
    /// handle pins them; a read that met a data file rewritten under a cached version runs
    /// once more ([`Snapshot::changed`]); the wall time (natively), the rejections (told to
    /// the sink) and the metrics are recorded once, here.
    fn answer<'s, V: Verb>(
        &'s self,
        table: &'s str,
        call: &'s V::Call,
    ) -> BoxFut<'s, Result<V::Answer>> {
        Box::pin(async move {
            if let Some(pinned) = self.at_upstream(table, call.upstream()).await? {
                let call = call.at_upstream(None);
                return pinned.answer::<V>(table, &call).await;
            }
            let call = call.pinning(self.pin_versions);
            #[cfg(not(target_arch = "wasm32"))]
            let t0 = std::time::Instant::now();
            let r = V::run(&self.pinned(), table, &call).await;
            let mut r = match self.changed(r) {
                Some(r) => r?,
                None => V::run(&self.pinned(), table, &call).await?,
            };
            #[cfg(not(target_arch = "wasm32"))]
            {
                V::stats(&mut r).elapsed_ms = t0.elapsed().as_secs_f64() * 1e3;
            }
            self.tell(table, &V::stats(&mut r).rejections).await;
            let more = V::more_rejections(&r);
            self.tell(table, &more).await;
            if let Some(m) = &self.metrics {
                V::record(m, V::stats(&mut r));
            }
            Ok(r)
        })
    }
}

/// What the verb path ([`Snapshot::answer`]) needs of a call: its upstream pin and its data
/// version pin.
pub(crate) trait Call: Clone + MaybeSend + MaybeSync {
    fn upstream(&self) -> Option<i64>;
    fn at_upstream(&self, snapshot: Option<i64>) -> Self;
    /// The call with data versions pinned when it asks or `pin` is set.
    fn pinning(&self, pin: bool) -> Self;
}

macro_rules! call {
    ($t:ty) => {
        impl Call for $t {
            fn upstream(&self) -> Option<i64> {
                self.snapshot
            }
            fn at_upstream(&self, snapshot: Option<i64>) -> Self {
                Self {
                    snapshot,
                    ..self.clone()
                }
            }
            fn pinning(&self, pin: bool) -> Self {
                Self {
                    pin_versions: self.pin_versions || pin,
                    ..self.clone()
                }
            }
        }
    };
}
call!(Query);
call!(crate::read::search::Search);
call!(crate::read::nearest::Nearest);

/// A table verb as the verb path runs it: the engine call, and where its answer keeps its
/// stats and how the metrics count it.
pub(crate) trait Verb {
    type Call: Call;
    type Answer: MaybeSend;
    fn run<'a>(
        l: &'a Pinned<'a>,
        table: &'a str,
        call: &'a Self::Call,
    ) -> BoxFut<'a, Result<Self::Answer>>;
    fn stats(a: &mut Self::Answer) -> &mut crate::read::plan::QueryStats;
    fn record(m: &Metrics, s: &crate::read::plan::QueryStats);
    /// Rejections the answer holds besides its stats' (a hybrid search's vector half).
    fn more_rejections(a: &Self::Answer) -> Vec<Rejection> {
        let _ = a;
        Vec::new()
    }
}

/// A [`Verb`]: its marker, call and answer types, the engine method and the metrics
/// counter.
macro_rules! verb {
    ($verb:ident, $call:ty, $answer:ty, $method:ident, $record:ident $(, $more:item)?) => {
        struct $verb;

        impl Verb for $verb {
            type Call = $call;
            type Answer = $answer;
            fn run<'a>(
                l: &'a Pinned<'a>,
                table: &'a str,
                call: &'a Self::Call,
            ) -> BoxFut<'a, Result<Self::Answer>> {
                Box::pin(l.$method(table, call))
            }
            fn stats(a: &mut Self::Answer) -> &mut crate::read::plan::QueryStats {
                &mut a.stats
            }
            fn record(m: &Metrics, s: &crate::read::plan::QueryStats) {
                m.$record(s)
            }
            $($more)?
        }
    };
}

verb!(
    CountVerb,
    Query,
    crate::read::count::CountResult,
    count,
    record_count
);
verb!(QueryVerb, Query, QueryResult, query, record_query);
verb!(
    NearestVerb,
    crate::read::nearest::Nearest,
    crate::read::nearest::NearestResult,
    nearest,
    record_nearest
);
verb!(
    SearchVerb,
    crate::read::search::Search,
    crate::read::search::SearchResult,
    search,
    record_search,
    fn more_rejections(a: &Self::Answer) -> Vec<Rejection> {
        a.hybrid
            .as_ref()
            .map(|h| h.vector_stats.rejections.clone())
            .unwrap_or_default()
    }
);
