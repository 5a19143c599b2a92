//! Counters of a handle's reads, repairs and builds, rendered as Prometheus text
//! (`overlay.metrics()` in Node) or as one object (`reader.metrics()` in wasm).
//!
//! [`Metrics`] lives on the handle beside its [`ReadCache`](crate::read::cache::ReadCache);
//! every snapshot of the handle records into it. A [`MetricsReport`] adds what the handle's
//! readers and cache count themselves (requests, bytes, cache hits and misses per tier).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::io::IoStats;
use crate::read::cache::{CacheStats, Tier};
use crate::read::lookup::LookupStats;
use crate::read::plan::QueryStats;

/// The read verbs counted by [`Metrics`].
pub const VERBS: [&str; 8] = [
    "lookup",
    "lookupMany",
    "range",
    "nulls",
    "fetchRows",
    "query",
    "count",
    "search",
];

/// A handle's counters (see the module docs). All methods are cheap and never fail.
#[derive(Default)]
pub struct Metrics {
    reads: [AtomicU64; VERBS.len()],
    files_by_index: AtomicU64,
    files_scanned: AtomicU64,
    files_pruned: AtomicU64,
    files_rejected: AtomicU64,
    files_drifted: AtomicU64,
    index_declined: AtomicU64,
    rejections: Mutex<BTreeMap<String, u64>>,
    repairs_queued: AtomicU64,
    repairs_drained: AtomicU64,
    builds: AtomicU64,
    build_done: AtomicU64,
    build_total: AtomicU64,
    blobs_derived: AtomicU64,
    blobs_carried: AtomicU64,
}

/// Every counter at one moment (see [`Metrics::report`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsReport {
    /// Reads by verb, in [`VERBS`] order.
    pub reads: Vec<(&'static str, u64)>,
    pub files_by_index: u64,
    pub files_scanned: u64,
    pub files_pruned: u64,
    pub files_rejected: u64,
    pub files_drifted: u64,
    /// Queries that declined a usable index for a scan.
    pub index_declined: u64,
    /// Rejected indexes by the read gate's reason code.
    pub rejections: Vec<(String, u64)>,
    pub repairs_queued: u64,
    pub repairs_drained: u64,
    /// `build()` calls finished, and the progress of the running (or last) one.
    pub builds: u64,
    pub build_done: u64,
    pub build_total: u64,
    /// Per-file blobs written from their data file's rows (columns read, text tokenized,
    /// vectors coded: builds, registrations, syncs, verify's rebuilds), and blobs carried
    /// over a move from the blobs of the files the rows came from (RFC 0006), nothing read
    /// of the rows.
    pub blobs_derived: u64,
    pub blobs_carried: u64,
    /// Requests and bytes to the overlay (`index`) and to data files (`data`).
    pub index_io: IoStats,
    pub data_io: IoStats,
    pub cache: CacheStats,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    fn read(&self, verb: &str) {
        if let Some(i) = VERBS.iter().position(|v| *v == verb) {
            add(&self.reads[i], 1);
        }
    }

    fn rejected<'a>(&self, codes: impl Iterator<Item = &'a str>) {
        let mut m = self.rejections.lock().unwrap_or_else(|p| p.into_inner());
        for c in codes {
            *m.entry(c.to_string()).or_default() += 1;
        }
    }

    /// Counts one lookup-style read (`lookup`, `lookupMany`, `range`, `nulls`).
    pub fn record_lookup(&self, verb: &str, s: &LookupStats) {
        self.read(verb);
        add(&self.files_by_index, s.files_by_index);
        add(&self.files_scanned, s.files_scanned);
        add(&self.files_pruned, s.files_pruned);
        add(&self.files_rejected, s.rejections.len() as u64);
        add(&self.files_drifted, s.drifted.len() as u64);
        self.rejected(s.rejections.iter().map(|r| r.reason.code()));
    }

    /// Counts a `fetchRows`.
    pub fn record_fetch(&self) {
        self.read("fetchRows");
    }

    /// Counts a `query`.
    pub fn record_query(&self, s: &QueryStats) {
        self.record_answer("query", s);
    }

    /// Counts a `count`.
    pub fn record_count(&self, s: &QueryStats) {
        self.record_answer("count", s);
    }

    /// Counts a `search`.
    pub fn record_search(&self, s: &QueryStats) {
        self.record_answer("search", s);
    }

    pub fn record_nearest(&self, s: &QueryStats) {
        self.record_answer("nearest", s);
    }

    fn record_answer(&self, verb: &str, s: &QueryStats) {
        self.read(verb);
        add(&self.files_by_index, s.files_by_index);
        add(&self.files_scanned, s.files_scanned);
        add(&self.files_pruned, s.files_pruned);
        add(&self.files_rejected, s.files_rejected);
        add(&self.files_drifted, s.drifted.len() as u64);
        add(&self.index_declined, u64::from(s.index_declined.is_some()));
        self.rejected(s.rejections.iter().map(|r| r.reason.code()));
    }

    /// Counts files queued for repair, and drained by a build.
    pub fn record_repairs_queued(&self, n: u64) {
        add(&self.repairs_queued, n);
    }
    pub fn record_repairs_drained(&self, n: u64) {
        add(&self.repairs_drained, n);
    }

    /// The running build's progress (rows or files done of total, as its phase counts).
    pub fn build_progress(&self, done: u64, total: u64) {
        self.build_done.store(done, Ordering::Relaxed);
        self.build_total.store(total, Ordering::Relaxed);
    }

    /// Counts a finished `build()`.
    pub fn record_build(&self) {
        add(&self.builds, 1);
    }

    /// Counts blobs written from their file's rows.
    pub fn record_derived(&self, n: u64) {
        add(&self.blobs_derived, n);
    }

    /// Counts blobs carried over a move.
    pub fn record_carried(&self, n: u64) {
        add(&self.blobs_carried, n);
    }

    /// Every counter, with the handle's I/O and cache counters.
    pub fn report(&self, index_io: IoStats, data_io: IoStats, cache: CacheStats) -> MetricsReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsReport {
            reads: VERBS
                .iter()
                .zip(&self.reads)
                .map(|(v, c)| (*v, get(c)))
                .collect(),
            files_by_index: get(&self.files_by_index),
            files_scanned: get(&self.files_scanned),
            files_pruned: get(&self.files_pruned),
            files_rejected: get(&self.files_rejected),
            files_drifted: get(&self.files_drifted),
            index_declined: get(&self.index_declined),
            rejections: self
                .rejections
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            repairs_queued: get(&self.repairs_queued),
            repairs_drained: get(&self.repairs_drained),
            builds: get(&self.builds),
            build_done: get(&self.build_done),
            build_total: get(&self.build_total),
            blobs_derived: get(&self.blobs_derived),
            blobs_carried: get(&self.blobs_carried),
            index_io,
            data_io,
            cache,
        }
    }
}

impl MetricsReport {
    /// The report in the Prometheus text exposition format (version 0.0.4): `skerry_*`
    /// counters and gauges with `# HELP` and `# TYPE` lines.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
            let _ = writeln!(out, "# HELP skerry_{name} {help}");
            let _ = writeln!(out, "# TYPE skerry_{name} {kind}");
            for (labels, v) in samples {
                let _ = writeln!(out, "skerry_{name}{labels} {v}");
            }
        };
        let label = |k: &str, v: &str| format!("{{{k}=\"{}\"}}", escape(v));
        family(
            "reads_total",
            "counter",
            "Reads answered, by verb.",
            &self
                .reads
                .iter()
                .map(|(v, n)| (label("verb", v), *n))
                .collect::<Vec<_>>(),
        );
        family(
            "requests_total",
            "counter",
            "Range requests that reached the store, by target (index: the overlay; data: data files).",
            &[
                (label("target", "index"), self.index_io.requests),
                (label("target", "data"), self.data_io.requests),
            ],
        );
        family(
            "bytes_total",
            "counter",
            "Bytes read from the store, by target.",
            &[
                (label("target", "index"), self.index_io.bytes),
                (label("target", "data"), self.data_io.bytes),
            ],
        );
        let tiers = [
            Tier::Directory,
            Tier::Metadata,
            Tier::Block,
            Tier::Dictionary,
        ];
        let tier = |f: &dyn Fn(Tier) -> u64| {
            tiers
                .iter()
                .map(|t| (label("tier", t.name()), f(*t)))
                .collect::<Vec<_>>()
        };
        family(
            "cache_hits_total",
            "counter",
            "Read cache hits, by tier.",
            &tier(&|t| self.cache.tier(t).hits),
        );
        family(
            "cache_misses_total",
            "counter",
            "Read cache misses, by tier.",
            &tier(&|t| self.cache.tier(t).misses),
        );
        family(
            "cache_bytes",
            "gauge",
            "Bytes held by the read cache, by tier.",
            &tier(&|t| self.cache.tier(t).bytes),
        );
        family(
            "cache_budget_bytes",
            "gauge",
            "The read cache's byte budget.",
            &[(String::new(), self.cache.budget)],
        );
        family(
            "files_total",
            "counter",
            "Data files considered by reads, by how they were answered.",
            &[
                (label("how", "index"), self.files_by_index),
                (label("how", "scanned"), self.files_scanned),
                (label("how", "pruned"), self.files_pruned),
                (label("how", "rejected"), self.files_rejected),
            ],
        );
        family(
            "files_rejected_total",
            "counter",
            "Indexes the read gate rejected, by reason.",
            &self
                .rejections
                .iter()
                .map(|(r, n)| (label("reason", r), *n))
                .collect::<Vec<_>>(),
        );
        family(
            "files_drifted_total",
            "counter",
            "Data files seen to differ from their recorded facts.",
            &[(String::new(), self.files_drifted)],
        );
        family(
            "index_declined_total",
            "counter",
            "Queries that scanned because the index would have read more.",
            &[(String::new(), self.index_declined)],
        );
        family(
            "repairs_total",
            "counter",
            "Files queued for repair by reads, and drained by builds.",
            &[
                (label("state", "queued"), self.repairs_queued),
                (label("state", "drained"), self.repairs_drained),
            ],
        );
        family(
            "builds_total",
            "counter",
            "build() calls finished.",
            &[(String::new(), self.builds)],
        );
        family(
            "blobs_written_total",
            "counter",
            "Per-file index blobs written, derived from their file's rows or carried over a move.",
            &[
                (label("from", "rows"), self.blobs_derived),
                (label("from", "move"), self.blobs_carried),
            ],
        );
        family(
            "build_progress",
            "gauge",
            "Progress of the running (or last) build, as its phase counts.",
            &[
                (label("of", "done"), self.build_done),
                (label("of", "total"), self.build_total),
            ],
        );
        out
    }
}

/// A label value escaped for the text format (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_has_help_type_and_samples() {
        let m = Metrics::default();
        m.record_query(&QueryStats {
            files_by_index: 2,
            files_scanned: 1,
            index_declined: Some("x".into()),
            ..Default::default()
        });
        m.record_repairs_queued(3);
        let r = m.report(
            IoStats {
                requests: 5,
                bytes: 700,
                ..Default::default()
            },
            IoStats::default(),
            CacheStats::default(),
        );
        let text = r.prometheus();
        assert!(
            text.contains("# TYPE skerry_reads_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("skerry_reads_total{verb=\"query\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("skerry_files_total{how=\"index\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("skerry_requests_total{target=\"index\"} 5\n"),
            "{text}"
        );
        assert!(
            text.contains("skerry_bytes_total{target=\"index\"} 700\n"),
            "{text}"
        );
        assert!(text.contains("skerry_index_declined_total 1\n"), "{text}");
        assert!(
            text.contains("skerry_repairs_total{state=\"queued\"} 3\n"),
            "{text}"
        );
        // Every sample line belongs to a family declared before it.
        let mut declared = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(declared.contains(name), "{line}");
            }
        }
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
