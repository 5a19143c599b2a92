//! Answers shaped for a JavaScript host, once for both bindings.

use arrow_array::RecordBatch;

use super::HostValue;
use crate::error::Result;
use crate::formats::lineage::Rejection;
use crate::read::lookup::{LocateResult, LookupResult, LookupStats, RowRef};
use crate::read::plan::{QueryResult, QueryStats};
use crate::values::Value;

/// Integers within ±2^53 are numbers; beyond, bigints.
fn int(v: i128) -> HostValue {
    const SAFE: i128 = 1 << 53;
    if v.abs() <= SAFE {
        HostValue::Number(v as f64)
    } else {
        HostValue::BigInt(Some(v))
    }
}

/// One value of a fetched row.
fn cell(v: Value, scale: i8) -> HostValue {
    match v {
        Value::Null => HostValue::Null,
        Value::Bool(b) => HostValue::Bool(b),
        Value::Int(i) => int(i as i128),
        Value::UInt(u) => int(u as i128),
        Value::Float32(f) => HostValue::Number(f as f64),
        Value::Float64(f) => HostValue::Number(f),
        Value::Decimal(d) => HostValue::object([
            ("unscaled", HostValue::BigInt(Some(d))),
            ("scale", HostValue::Number(scale as f64)),
        ]),
        Value::String(s) => HostValue::String(s),
        Value::Binary(b) => HostValue::Bytes(b),
        Value::Date(d) => HostValue::Number(d as f64),
        Value::Time(t) | Value::Timestamp(t) => int(t as i128),
    }
}

/// The rows of `batch` as plain rows: integers beyond ±2^53 as bigints, floats as numbers
/// (NaN and infinities included), decimals `{ unscaled: bigint, scale }`, binary as bytes,
/// dates as days, times and timestamps in their unit.
pub fn rows(batch: &RecordBatch) -> Result<HostValue> {
    let schema = batch.schema();
    let scales: Vec<i8> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            arrow_schema::DataType::Decimal128(_, s) => *s,
            _ => 0,
        })
        .collect();
    // Cell by cell (not through `to_values`, which names every cell: a String per value).
    let rows = (0..batch.num_rows())
        .map(|r| {
            batch
                .columns()
                .iter()
                .zip(&scales)
                .map(|(c, s)| Ok(cell(crate::datafile::value_at(c.as_ref(), r)?, *s)))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(HostValue::Rows {
        columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
        rows,
    })
}

/// `{ file, position, rowId? }`.
pub fn row_ref(r: RowRef) -> HostValue {
    HostValue::object([
        ("file", HostValue::String(r.file)),
        ("position", HostValue::id(r.position)),
        ("rowId", HostValue::opt(r.row_id, HostValue::id)),
    ])
}

fn refs(v: Vec<RowRef>) -> HostValue {
    HostValue::Array(v.into_iter().map(row_ref).collect())
}

/// `{ dataFile, indexId?, bundlePath?, reason, message }`.
pub fn rejection(r: Rejection) -> HostValue {
    HostValue::object([
        ("dataFile", HostValue::string(r.data_file.clone())),
        ("indexId", HostValue::opt(r.index_id, HostValue::id)),
        (
            "bundlePath",
            HostValue::opt(r.bundle_path.clone(), HostValue::String),
        ),
        ("reason", HostValue::string(r.reason.code())),
        ("message", HostValue::string(r.to_string())),
    ])
}

fn rejections(v: Vec<Rejection>) -> HostValue {
    HostValue::Array(v.into_iter().map(rejection).collect())
}

/// How a lookup was answered.
pub fn lookup_stats(s: LookupStats) -> HostValue {
    HostValue::object([
        ("files", HostValue::count(s.files)),
        ("filesByIndex", HostValue::count(s.files_by_index)),
        ("filesByRun", HostValue::count(s.files_by_run)),
        ("filesScanned", HostValue::count(s.files_scanned)),
        ("filesPruned", HostValue::count(s.files_pruned)),
        ("rejections", rejections(s.rejections)),
        ("drifted", HostValue::strings(s.drifted)),
        ("indexRequests", HostValue::count(s.index_requests)),
        ("indexBytes", HostValue::count(s.index_bytes)),
        ("dataRequests", HostValue::count(s.data_requests)),
        ("dataBytes", HostValue::count(s.data_bytes)),
    ])
}

/// `{ rows: [{ file, position, rowId? }], stats }`.
pub fn lookup_result(r: LookupResult) -> HostValue {
    HostValue::object([("rows", refs(r.rows)), ("stats", lookup_stats(r.stats))])
}

/// `{ rows, candidates: [{ file, rowIds }] }`.
pub fn locate_result(r: LocateResult) -> HostValue {
    HostValue::object([
        ("rows", refs(r.rows)),
        (
            "candidates",
            HostValue::Array(
                r.candidates
                    .into_iter()
                    .map(|c| {
                        HostValue::object([
                            ("file", HostValue::String(c.file)),
                            (
                                "rowIds",
                                HostValue::Array(
                                    c.row_ids.into_iter().map(HostValue::id).collect(),
                                ),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

/// How a query was answered (every field of [`QueryStats`]).
pub fn query_stats(s: QueryStats) -> HostValue {
    HostValue::object([
        ("index", HostValue::opt(s.index, HostValue::String)),
        ("indexKind", HostValue::opt(s.index_kind, HostValue::String)),
        ("indexColumns", HostValue::strings(s.index_columns)),
        ("keys", HostValue::count(s.keys)),
        ("residual", HostValue::strings(s.residual)),
        ("files", HostValue::count(s.files)),
        ("filesByIndex", HostValue::count(s.files_by_index)),
        ("filesByRun", HostValue::count(s.files_by_run)),
        ("filesScanned", HostValue::count(s.files_scanned)),
        ("filesPruned", HostValue::count(s.files_pruned)),
        ("filesRejected", HostValue::count(s.files_rejected)),
        ("rejections", rejections(s.rejections)),
        ("drifted", HostValue::strings(s.drifted)),
        ("rowGroups", HostValue::count(s.row_groups)),
        ("rowGroupsPruned", HostValue::count(s.row_groups_pruned)),
        (
            "rowsPrunedByPages",
            HostValue::count(s.rows_pruned_by_pages),
        ),
        ("rowsScanned", HostValue::count(s.rows_scanned)),
        ("requests", HostValue::count(s.requests)),
        ("bytes", HostValue::count(s.bytes)),
        ("cacheHits", HostValue::count(s.cache_hits)),
        ("indexRequests", HostValue::count(s.index_requests)),
        ("indexBytes", HostValue::count(s.index_bytes)),
        ("dataRequests", HostValue::count(s.data_requests)),
        ("dataBytes", HostValue::count(s.data_bytes)),
        ("elapsedMs", HostValue::Number(s.elapsed_ms)),
        (
            "indexDeclined",
            HostValue::opt(s.index_declined, HostValue::String),
        ),
    ])
}

/// `{ index?, reason, indexColumns, keys, residual, estimatedRows?, files: [{ file, action,
/// reason?, metadataCached }], indexRequests, dataRequests, roundTrips }`.
pub fn explain(e: crate::read::explain::Explain) -> HostValue {
    use crate::read::explain::FileAction;
    let files = e
        .files
        .into_iter()
        .map(|f| {
            let action = match f.action {
                FileAction::Run => "run",
                FileAction::Index => "index",
                FileAction::Prune => "prune",
                FileAction::Scan => "scan",
            };
            HostValue::object([
                ("file", HostValue::String(f.file)),
                ("action", HostValue::string(action)),
                ("reason", HostValue::opt(f.reason, HostValue::String)),
                ("metadataCached", HostValue::Bool(f.metadata_cached)),
            ])
        })
        .collect();
    HostValue::object([
        ("index", HostValue::opt(e.index, HostValue::String)),
        ("indexKind", HostValue::opt(e.index_kind, HostValue::String)),
        ("reason", HostValue::String(e.reason)),
        ("indexColumns", HostValue::strings(e.index_columns)),
        ("keys", HostValue::count(e.keys)),
        ("residual", HostValue::strings(e.residual)),
        (
            "estimatedRows",
            HostValue::opt(e.estimated_rows, HostValue::count),
        ),
        ("files", HostValue::Array(files)),
        ("indexRequests", HostValue::count(e.index_requests)),
        ("dataRequests", HostValue::count(e.data_requests)),
        ("roundTrips", HostValue::count(e.round_trips)),
    ])
}

/// A handle's counters as one object (the wasm reader's `metrics()`; the addon renders the
/// same report as Prometheus text). See [`crate::read::metrics`].
pub fn metrics(r: &crate::read::metrics::MetricsReport) -> HostValue {
    use crate::read::cache::{Tier, TierStats};
    let pairs = |v: Vec<(String, u64)>| {
        HostValue::Object(
            v.into_iter()
                .map(|(k, n)| (k, HostValue::count(n)))
                .collect(),
        )
    };
    let tier = |t: &TierStats| {
        HostValue::object([
            ("hits", HostValue::count(t.hits)),
            ("misses", HostValue::count(t.misses)),
            ("entries", HostValue::count(t.entries)),
            ("bytes", HostValue::count(t.bytes)),
        ])
    };
    HostValue::object([
        (
            "reads",
            pairs(r.reads.iter().map(|(v, n)| (v.to_string(), *n)).collect()),
        ),
        (
            "requests",
            HostValue::object([
                ("index", HostValue::count(r.index_io.requests)),
                ("data", HostValue::count(r.data_io.requests)),
            ]),
        ),
        (
            "bytes",
            HostValue::object([
                ("index", HostValue::count(r.index_io.bytes)),
                ("data", HostValue::count(r.data_io.bytes)),
            ]),
        ),
        (
            "cache",
            HostValue::object([
                ("budget", HostValue::count(r.cache.budget)),
                ("directory", tier(r.cache.tier(Tier::Directory))),
                ("metadata", tier(r.cache.tier(Tier::Metadata))),
                ("block", tier(r.cache.tier(Tier::Block))),
                ("dictionary", tier(r.cache.tier(Tier::Dictionary))),
            ]),
        ),
        (
            "files",
            HostValue::object([
                ("index", HostValue::count(r.files_by_index)),
                ("scanned", HostValue::count(r.files_scanned)),
                ("pruned", HostValue::count(r.files_pruned)),
                ("rejected", HostValue::count(r.files_rejected)),
                ("drifted", HostValue::count(r.files_drifted)),
            ]),
        ),
        ("rejections", pairs(r.rejections.clone())),
        ("indexDeclined", HostValue::count(r.index_declined)),
        (
            "repairs",
            HostValue::object([
                ("queued", HostValue::count(r.repairs_queued)),
                ("drained", HostValue::count(r.repairs_drained)),
            ]),
        ),
        ("builds", HostValue::count(r.builds)),
        (
            "buildProgress",
            HostValue::object([
                ("done", HostValue::count(r.build_done)),
                ("total", HostValue::count(r.build_total)),
            ]),
        ),
        (
            "blobs",
            HostValue::object([
                ("derived", HostValue::count(r.blobs_derived)),
                ("carried", HostValue::count(r.blobs_carried)),
            ]),
        ),
    ])
}

/// The `warning` events of a query: one `{ table, index?, file, reason, message }` per
/// rejected index.
pub fn warnings(table: &str, s: &QueryStats) -> Vec<HostValue> {
    s.rejections
        .iter()
        .map(|r| {
            HostValue::object([
                ("table", HostValue::string(table)),
                ("index", HostValue::opt(s.index.clone(), HostValue::String)),
                ("file", HostValue::string(r.data_file.clone())),
                ("reason", HostValue::string(r.reason.code())),
                ("message", HostValue::string(r.to_string())),
            ])
        })
        .collect()
}

/// `{ ipc, rows }`: the Arrow IPC stream of `batch` and its rows.
pub fn batch(batch: &RecordBatch) -> Result<HostValue> {
    Ok(HostValue::object([
        ("ipc", HostValue::Bytes(crate::read::lookup::to_ipc(batch)?)),
        ("rows", rows(batch)?),
    ]))
}

/// `{ ipc, rows, refs, stats, warnings }`, and the `warning` events it raises (the same
/// warnings, for the host's listeners).
/// `{ count, stats, warnings }` of a count, and its warnings.
pub fn count_result(
    table: &str,
    r: crate::read::count::CountResult,
) -> (HostValue, Vec<HostValue>) {
    let warnings = warnings(table, &r.stats);
    let out = HostValue::object([
        ("count", HostValue::count(r.count)),
        ("stats", query_stats(r.stats)),
        ("warnings", HostValue::Array(warnings.clone())),
    ]);
    (out, warnings)
}

pub fn search_result(
    table: &str,
    r: crate::read::search::SearchResult,
) -> Result<(HostValue, Vec<HostValue>)> {
    let mut warnings = warnings(table, &r.stats);
    let mut stats = query_stats(r.stats);
    if let HostValue::Object(props) = &mut stats {
        props.push(("rounds".into(), HostValue::count(r.rounds)));
    }
    let hybrid = match r.hybrid {
        None => None,
        Some(h) => {
            warnings.extend(self::warnings(table, &h.vector_stats));
            let mut vstats = query_stats(h.vector_stats);
            if let HostValue::Object(props) = &mut vstats {
                props.push(("rounds".into(), HostValue::count(h.vector_rounds)));
                props.push(("evaluated".into(), HostValue::count(h.evaluated)));
            }
            // A row missing from one ranking is `null` there (an array slot, not an absent
            // property).
            let rank = |r: Vec<Option<u32>>| {
                HostValue::Array(
                    r.into_iter()
                        .map(|x| x.map_or(HostValue::Null, |x| HostValue::Number(f64::from(x))))
                        .collect(),
                )
            };
            let num = |r: Vec<Option<f64>>| {
                HostValue::Array(
                    r.into_iter()
                        .map(|x| x.map_or(HostValue::Null, HostValue::Number))
                        .collect(),
                )
            };
            Some(HostValue::object([
                ("rrfK", HostValue::Number(crate::read::hybrid::RRF_K)),
                ("textRanks", rank(h.text_ranks)),
                ("textScores", num(h.text_scores)),
                ("vectorRanks", rank(h.vector_ranks)),
                ("distances", num(h.distances)),
                ("metric", HostValue::string(h.metric)),
                ("vectorStats", vstats),
            ]))
        }
    };
    let bm25 = HostValue::object([
        ("docs", HostValue::count(r.bm25.docs)),
        ("tokens", HostValue::count(r.bm25.tokens)),
        ("avgLen", HostValue::Number(r.bm25.avg_len)),
        (
            "terms",
            HostValue::Array(
                r.bm25
                    .terms
                    .into_iter()
                    .map(|t| {
                        HostValue::object([
                            ("term", HostValue::String(t.term)),
                            ("df", HostValue::count(t.df)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    let out = HostValue::object([
        (
            "ipc",
            HostValue::Bytes(crate::read::lookup::to_ipc(&r.batch)?),
        ),
        ("rows", rows(&r.batch)?),
        ("refs", refs(r.rows)),
        (
            "scores",
            HostValue::Array(r.scores.into_iter().map(HostValue::Number).collect()),
        ),
        ("bm25", bm25),
        ("stats", stats),
        ("warnings", HostValue::Array(warnings.clone())),
    ]);
    let out = match (out, hybrid) {
        (HostValue::Object(mut props), Some(h)) => {
            props.push(("hybrid".into(), h));
            HostValue::Object(props)
        }
        (out, _) => out,
    };
    Ok((out, warnings))
}

pub fn nearest_result(
    table: &str,
    r: crate::read::nearest::NearestResult,
) -> Result<(HostValue, Vec<HostValue>)> {
    let warnings = warnings(table, &r.stats);
    let mut stats = query_stats(r.stats);
    if let HostValue::Object(props) = &mut stats {
        props.push(("rounds".into(), HostValue::count(r.rounds)));
        props.push(("evaluated".into(), HostValue::count(r.evaluated)));
    }
    let out = HostValue::object([
        (
            "ipc",
            HostValue::Bytes(crate::read::lookup::to_ipc(&r.batch)?),
        ),
        ("rows", rows(&r.batch)?),
        ("refs", refs(r.rows)),
        (
            "distances",
            HostValue::Array(r.distances.into_iter().map(HostValue::Number).collect()),
        ),
        ("metric", HostValue::String(r.metric.into())),
        ("stats", stats),
        ("warnings", HostValue::Array(warnings.clone())),
    ]);
    Ok((out, warnings))
}

pub fn query_result(table: &str, r: QueryResult) -> Result<(HostValue, Vec<HostValue>)> {
    let warnings = warnings(table, &r.stats);
    let out = HostValue::object([
        (
            "ipc",
            HostValue::Bytes(crate::read::lookup::to_ipc(&r.batch)?),
        ),
        ("rows", rows(&r.batch)?),
        ("refs", refs(r.rows)),
        ("stats", query_stats(r.stats)),
        ("warnings", HostValue::Array(warnings.clone())),
    ]);
    Ok((out, warnings))
}
