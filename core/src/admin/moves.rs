//! Moves (RFC 0006, `docs/rfcs/0006-compaction-carry-over.md`): a change set whose added
//! files hold exactly the rows of the files it removed, known by row lineage — the first
//! step of carrying index entries over a compaction instead of deriving them again.
//!
//! A change set is a move when **the engine says so** ([`replace_chain`]: every snapshot
//! after the synced one is a `replace`) and **the ids match** ([`MoveMap::of`]: the added
//! files' row ids are exactly the removed files' live row ids — none twice, none missing,
//! none new, no deleted row brought back). Anything less certain is not a move and is
//! derived as before; [`NotAMove`] says which check failed.
//!
//! The [`MoveMap`] says, for every row of every added file (an *output*), which removed file
//! (a *source*) and position it came from, as runs of consecutive positions ([`Segment`]), in
//! both orders: by output position (what an output's entries are written in) and by source
//! position (what a source's entries are read in).

use std::fmt;

use crate::admin::catalog::RowIds;
use crate::error::{Error, Result};
use crate::formats::iceberg::metadata::TableMetadata;
use crate::formats::rowset::IdRuns;
use crate::io::{Location, RangeReader};

/// Most runs a file's row ids are kept as (beyond, the file reports no row ids:
/// `admin::iceberg` says why).
pub const MAX_ROW_ID_RUNS: usize = 1 << 20;

/// The row ids of a data file of `rows` rows from its row-id column (root column `root` of
/// `md`, a long column): a row's id is its value, or — NULL — `start + position` when the
/// file has a `start` (Iceberg's inheritance), else none. As runs, or one start when they are
/// dense; none at all when they fragment into more than [`MAX_ROW_ID_RUNS`] runs. Errors
/// (through `bad`): a column that is not a long, a negative or repeated id.
pub(crate) async fn read_ids<R: RangeReader + ?Sized>(
    data: &R,
    loc: &Location,
    md: &std::sync::Arc<parquet::file::metadata::ParquetMetaData>,
    root: usize,
    start: Option<u64>,
    rows: u64,
    bad: impl Fn(String) -> Error,
) -> Result<RowIds> {
    let mut runs = IdRuns::default();
    let mut fragmented = false;
    crate::datafile::scan_columns(data, loc, md, &[root], |batch, first| {
        use arrow_array::Array;
        let col = batch
            .column(0)
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .ok_or_else(|| bad("not a long column".into()))?;
        if fragmented {
            return Ok(());
        }
        for i in 0..col.len() {
            let p = first + i as u64;
            let id = if col.is_null(i) {
                start.map(|s| s + p)
            } else {
                let v = col.value(i);
                Some(u64::try_from(v).map_err(|_| bad(format!("{v} is negative")))?)
            };
            if let Some(id) = id {
                runs.push(p, id);
            }
        }
        fragmented = runs.len() > MAX_ROW_ID_RUNS;
        Ok(())
    })
    .await?;
    if fragmented {
        return Ok(RowIds::default());
    }
    runs.validate(rows).map_err(|e| bad(e.to_string()))?;
    Ok(match runs.dense(rows) {
        Some(s) => RowIds {
            start: Some(s),
            runs: None,
        },
        None if runs.is_empty() => RowIds::default(),
        None => RowIds {
            start: None,
            runs: Some(runs),
        },
    })
}

/// A data file's row ids, as the catalog keeps them: `start + position` (inherited), or
/// explicit runs (`IdRuns`), or none.
#[derive(Clone, Debug)]
pub struct Lineage<'a> {
    pub path: &'a str,
    pub rows: u64,
    pub start: Option<u64>,
    pub runs: Option<&'a IdRuns>,
    /// Deleted positions (sources only: an output with deleted rows is not a move).
    pub deleted: Option<&'a roaring::RoaringTreemap>,
}

impl<'a> Lineage<'a> {
    /// A registered file's lineage: its rows and row ids as the catalog has them, and its
    /// deleted rows (`deleted`, decoded from its mask).
    pub fn of_file(
        f: &'a crate::formats::manifest::FileEntry,
        deleted: Option<&'a roaring::RoaringTreemap>,
    ) -> Lineage<'a> {
        Lineage {
            path: &f.path,
            rows: f.record_count,
            start: f.row_id_start,
            runs: f.row_id_runs.as_ref(),
            deleted,
        }
    }
}

impl Lineage<'_> {
    /// `(position, first id, count)` runs covering the file's rows with ids.
    fn id_runs(&self) -> Result<Vec<(u64, u64, u64)>, NotAMove> {
        match (self.runs, self.start) {
            (Some(r), _) => {
                r.validate(self.rows).map_err(|e| NotAMove::BadIds {
                    file: self.path.to_string(),
                    reason: e.to_string(),
                })?;
                Ok(r.0.clone())
            }
            (None, Some(_)) if self.rows == 0 => Ok(Vec::new()),
            (None, Some(s)) => {
                if s.checked_add(self.rows).is_none_or(|e| e > i64::MAX as u64) {
                    return Err(NotAMove::BadIds {
                        file: self.path.to_string(),
                        reason: "row ids overflow".into(),
                    });
                }
                Ok(vec![(0, s, self.rows)])
            }
            (None, None) => Err(NotAMove::NoLineage {
                file: self.path.to_string(),
            }),
        }
    }
}

/// Why a change set is not a move (it is then derived, as any change).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotAMove {
    /// A snapshot after the synced one is not a `replace` (or has no operation).
    Operation { snapshot: i64, operation: String },
    /// The synced snapshot is not an ancestor of the new one (a rollback, an expired chain).
    NotADescendant { from: i64, to: i64 },
    /// The table has no row lineage (format version below 3).
    NoTableLineage { format_version: u8 },
    /// Files were only added, or only removed.
    NothingMoved,
    /// A kept file's deleted rows changed in the same change set.
    MasksChanged { file: String },
    /// A file whose rows have no ids.
    NoLineage { file: String },
    /// A file whose id runs are malformed.
    BadIds { file: String, reason: String },
    /// An added file's row with no id.
    RowWithoutId { file: String, position: u64 },
    /// An added file's row whose id no removed file held.
    NewId { file: String, id: u64 },
    /// An added file's row whose id was a deleted row of a removed file.
    DeletedRowBack { file: String, id: u64 },
    /// An added file with deleted rows.
    OutputDeletes { file: String },
    /// An id held twice (by two removed files, or two added rows).
    IdTwice { id: u64 },
    /// Live rows of the removed files that no added file holds.
    RowsMissing { rows: u64 },
}

impl fmt::Display for NotAMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAMove::Operation {
                snapshot,
                operation,
            } => write!(f, "snapshot {snapshot} is an {operation:?}, not a replace"),
            NotAMove::NotADescendant { from, to } => {
                write!(f, "snapshot {to} does not descend from snapshot {from}")
            }
            NotAMove::NoTableLineage { format_version } => {
                write!(
                    f,
                    "a format version {format_version} table has no row lineage"
                )
            }
            NotAMove::NothingMoved => write!(f, "files were not both removed and added"),
            NotAMove::MasksChanged { file } => {
                write!(f, "the deleted rows of {file} changed too")
            }
            NotAMove::NoLineage { file } => write!(f, "the rows of {file} have no row ids"),
            NotAMove::BadIds { file, reason } => write!(f, "row ids of {file}: {reason}"),
            NotAMove::RowWithoutId { file, position } => {
                write!(f, "row {position} of {file} has no row id")
            }
            NotAMove::NewId { file, id } => {
                write!(f, "{file} holds row id {id}, which no removed file held")
            }
            NotAMove::DeletedRowBack { file, id } => {
                write!(
                    f,
                    "{file} holds row id {id}, a deleted row of a removed file"
                )
            }
            NotAMove::OutputDeletes { file } => write!(f, "{file} has deleted rows"),
            NotAMove::IdTwice { id } => write!(f, "row id {id} is held twice"),
            NotAMove::RowsMissing { rows } => {
                write!(
                    f,
                    "{rows} live rows of the removed files are in no added file"
                )
            }
        }
    }
}

/// Checks that every snapshot after `from` up to `to` (following parents from `to`) is a
/// `replace`. A walk longer than the table's snapshots, or one that never meets `from`, is
/// [`NotAMove::NotADescendant`].
pub fn replace_chain(meta: &TableMetadata, from: i64, to: i64) -> Result<(), NotAMove> {
    if meta.format_version < 3 {
        return Err(NotAMove::NoTableLineage {
            format_version: meta.format_version,
        });
    }
    let not_descendant = NotAMove::NotADescendant { from, to };
    if from == to {
        return Err(NotAMove::NothingMoved);
    }
    // The snapshots after `from`, newest first; ancestry first, then their operations.
    let mut chain = Vec::new();
    let mut at = to;
    while at != from {
        if chain.len() >= meta.snapshots.len() {
            return Err(not_descendant);
        }
        let s = meta.snapshot(at).map_err(|_| not_descendant.clone())?;
        chain.push(s);
        at = s.parent_snapshot_id.ok_or_else(|| not_descendant.clone())?;
    }
    match chain
        .iter()
        .rev()
        .find(|s| s.operation() != Some("replace"))
    {
        Some(s) => Err(NotAMove::Operation {
            snapshot: s.snapshot_id,
            operation: s.operation().unwrap_or("(none)").to_string(),
        }),
        None => Ok(()),
    }
}

/// Rows `position .. position + count` of output `output` are rows `source_position ..` of
/// source `source` (indexes into the slices [`MoveMap::of`] was given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    pub output: u32,
    pub position: u64,
    pub source: u32,
    pub source_position: u64,
    pub count: u64,
}

/// Where every row of a move's outputs came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveMap {
    /// By (output, position), covering every output row once.
    by_output: Vec<Segment>,
    /// The same segments by (source, source position).
    by_source: Vec<Segment>,
    /// Rows moved.
    pub rows: u64,
}

impl MoveMap {
    /// The move from `sources` (the removed files, with their deleted rows) to `outputs` (the
    /// added files), or why it is not one. Memory is the files' id runs and the segments
    /// (at most one per id run of either side, plus one per source boundary).
    pub fn of(sources: &[Lineage<'_>], outputs: &[Lineage<'_>]) -> Result<MoveMap, NotAMove> {
        if sources.is_empty() || outputs.is_empty() {
            return Err(NotAMove::NothingMoved);
        }
        // Every source id run, by first id: (first id, count, source, position).
        let mut ids: Vec<(u64, u64, u32, u64)> = Vec::new();
        let mut live = 0u64;
        for (i, s) in sources.iter().enumerate() {
            let runs = s.id_runs()?;
            let with_ids: u64 = runs.iter().map(|r| r.2).sum();
            if with_ids != s.rows {
                // A source row without an id could have moved unseen.
                return Err(NotAMove::NoLineage {
                    file: s.path.to_string(),
                });
            }
            let deleted = s.deleted.map_or(0, |d| d.range_cardinality(0..s.rows));
            live += s.rows - deleted;
            ids.extend(runs.iter().map(|&(p, id, n)| (id, n, i as u32, p)));
        }
        ids.sort_unstable();
        for w in ids.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                return Err(NotAMove::IdTwice { id: w[1].0 });
            }
        }
        let mut by_output = Vec::new();
        let mut rows = 0u64;
        for (o, out) in outputs.iter().enumerate() {
            if out.deleted.is_some_and(|d| !d.is_empty()) {
                return Err(NotAMove::OutputDeletes {
                    file: out.path.to_string(),
                });
            }
            let runs = out.id_runs()?;
            let mut next = 0u64;
            for &(p, id, n) in &runs {
                if p != next {
                    return Err(NotAMove::RowWithoutId {
                        file: out.path.to_string(),
                        position: next,
                    });
                }
                next = p + n;
                let (mut at, mut id, mut left) = (p, id, n);
                while left > 0 {
                    let k = ids.partition_point(|r| r.0 <= id);
                    let Some(&(first, count, source, sp)) = k.checked_sub(1).map(|k| &ids[k])
                    else {
                        return Err(NotAMove::NewId {
                            file: out.path.to_string(),
                            id,
                        });
                    };
                    if id - first >= count {
                        return Err(NotAMove::NewId {
                            file: out.path.to_string(),
                            id,
                        });
                    }
                    let m = left.min(first + count - id);
                    let source_position = sp + (id - first);
                    if let Some(d) = sources[source as usize].deleted {
                        let hit = d.range_cardinality(source_position..source_position + m);
                        if hit > 0 {
                            let first_deleted = (source_position..source_position + m)
                                .find(|q| d.contains(*q))
                                .unwrap_or(source_position);
                            return Err(NotAMove::DeletedRowBack {
                                file: out.path.to_string(),
                                id: id + (first_deleted - source_position),
                            });
                        }
                    }
                    by_output.push(Segment {
                        output: o as u32,
                        position: at,
                        source,
                        source_position,
                        count: m,
                    });
                    at += m;
                    id += m;
                    left -= m;
                }
            }
            if next != out.rows {
                return Err(NotAMove::RowWithoutId {
                    file: out.path.to_string(),
                    position: next,
                });
            }
            rows += out.rows;
        }
        let mut by_source = by_output.clone();
        by_source.sort_unstable_by_key(|s| (s.source, s.source_position));
        for w in by_source.windows(2) {
            if w[0].source == w[1].source
                && w[0].source_position + w[0].count > w[1].source_position
            {
                let s = &sources[w[1].source as usize];
                let id = s
                    .runs
                    .and_then(|r| r.id_at(w[1].source_position))
                    .or_else(|| s.start.map(|x| x + w[1].source_position))
                    .unwrap_or(0);
                return Err(NotAMove::IdTwice { id });
            }
        }
        // Injective, no deleted row, no new id: a bijection onto the live rows exactly when
        // the counts agree.
        if rows != live {
            return Err(NotAMove::RowsMissing {
                rows: live.saturating_sub(rows),
            });
        }
        Ok(MoveMap {
            by_output,
            by_source,
            rows,
        })
    }

    /// The map of a move recorded for one output ([`MoveRecord`]): `segments` of output 0,
    /// checked to cover its positions once and no source row twice (`None` otherwise).
    pub fn from_segments(mut segments: Vec<Segment>) -> Option<MoveMap> {
        segments.sort_unstable_by_key(|s| s.position);
        let mut next = 0u64;
        for s in &segments {
            if s.output != 0 || s.position != next || s.count == 0 {
                return None;
            }
            next = s.position.checked_add(s.count)?;
            s.source_position.checked_add(s.count)?;
        }
        let mut by_source = segments.clone();
        by_source.sort_unstable_by_key(|s| (s.source, s.source_position));
        if by_source.windows(2).any(|w| {
            w[0].source == w[1].source && w[0].source_position + w[0].count > w[1].source_position
        }) {
            return None;
        }
        Some(MoveMap {
            by_output: segments,
            by_source,
            rows: next,
        })
    }

    /// The segments of output `o`, by position (they cover its rows once).
    pub fn output(&self, o: u32) -> &[Segment] {
        let a = self.by_output.partition_point(|s| s.output < o);
        let b = self.by_output.partition_point(|s| s.output <= o);
        &self.by_output[a..b]
    }

    /// The segments of source `s`, by source position (its live rows, each once).
    pub fn source(&self, s: u32) -> &[Segment] {
        let a = self.by_source.partition_point(|x| x.source < s);
        let b = self.by_source.partition_point(|x| x.source <= s);
        &self.by_source[a..b]
    }

    /// Where row `position` of source `s` went: (output, position); `None` for a deleted row.
    pub fn target(&self, s: u32, position: u64) -> Option<(u32, u64)> {
        let segs = self.source(s);
        let i = segs
            .partition_point(|x| x.source_position <= position)
            .checked_sub(1)?;
        let g = &segs[i];
        (position - g.source_position < g.count)
            .then(|| (g.output, g.position + (position - g.source_position)))
    }

    /// Segments in all (a measure of how fragmented the move is).
    pub fn segments(&self) -> usize {
        self.by_output.len()
    }
}

/// A move as a sync hands it to the registration: its map, and the paths of its sources
/// and outputs in the map's order.
#[derive(Clone, Debug)]
pub struct Move {
    pub map: MoveMap,
    pub sources: Vec<String>,
    pub outputs: Vec<String>,
}

/// Entries of the sources' blobs, read once per (index, source) while a move's outputs are
/// written: `None` when a source's blob cannot give them (missing, stale, damaged, or of a
/// kind that does not hold its entries), which makes its outputs derive that index.
pub type SourceEntries = std::collections::HashMap<(u64, u32), Option<Vec<(Vec<u8>, u64)>>>;

/// Where a source file's entries are for a whole-blob carry: its own blob, or the table run
/// holding it (`run`: the file's ordinal and first run row).
#[derive(Clone, Debug)]
pub struct SourcePlace {
    pub bundle_path: String,
    /// The blob's (or run's) bytes in the bundle.
    pub range: std::ops::Range<u64>,
    /// The blob's SHA-256, when it has its own (a run is checked by its directory and CRCs).
    pub sha256: Option<String>,
    /// Its directory, relative to the blob, and the directory's SHA-256.
    pub directory: std::ops::Range<u64>,
    pub directory_sha256: String,
    pub run: Option<(u32, u64)>,
}

/// What a carry reads of a move's sources, as the registration that recorded the move saw
/// them (the sources leave the catalog in that commit): their file entries in the move's
/// source order, their blobs the read gate accepted then (uncompressed), and the runs that
/// held the entries of those whose blobs a run holds, by index.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceFacts {
    pub files: Vec<crate::formats::manifest::FileEntry>,
    pub artifacts: Vec<crate::formats::manifest::IndexFileEntry>,
    pub runs: Vec<(u64, crate::formats::manifest::TableRun)>,
}

impl SourceFacts {
    /// The facts of `sources` only (indexes into `files`), renumbered in that order.
    pub fn of(&self, sources: &[u32]) -> SourceFacts {
        let files: Vec<_> = sources
            .iter()
            .filter_map(|s| self.files.get(*s as usize).cloned())
            .collect();
        let ids: std::collections::HashSet<u64> = files.iter().map(|f| f.file_id).collect();
        SourceFacts {
            artifacts: self
                .artifacts
                .iter()
                .filter(|a| ids.contains(&a.file_id))
                .cloned()
                .collect(),
            runs: self
                .runs
                .iter()
                .filter(|(_, r)| r.files.iter().any(|f| ids.contains(&f.file_id)))
                .cloned()
                .collect(),
            files,
        }
    }

    /// Every overlay object the facts name (the sources' bundles and runs): kept by vacuum
    /// while a carry may read them.
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        self.artifacts
            .iter()
            .filter(|a| !a.in_run)
            .map(|a| a.lineage.bundle_path.as_str())
            .chain(self.runs.iter().map(|(_, r)| r.bundle_path.as_str()))
    }
}

/// A move whose outputs were registered before their entries were carried (the work did not
/// fit the registration's commit): per output file, its rows' segments (output 0, sources
/// numbered as in `sources.files`) and its sources' facts. Catalog record
/// `mv/<table id>/<output file id>`; the build's steps carry from it, and `vacuum` drops it
/// once every index of the output has a blob (RFC 0006, "the staged carry").
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MoveRecord {
    pub output: String,
    pub segments: Vec<Segment>,
    pub sources: SourceFacts,
}

impl MoveRecord {
    /// The record of output `o` of `mv`.
    pub fn of(mv: &Move, o: u32, facts: &SourceFacts) -> MoveRecord {
        let sources = mv.sources_of(o);
        let at = |s: u32| sources.iter().position(|x| *x == s).unwrap_or(0) as u32;
        MoveRecord {
            output: mv.outputs.get(o as usize).cloned().unwrap_or_default(),
            segments: mv
                .map
                .output(o)
                .iter()
                .map(|g| Segment {
                    output: 0,
                    source: at(g.source),
                    ..*g
                })
                .collect(),
            sources: facts.of(&sources),
        }
    }

    /// The move it records (`None` when its segments do not cover the output once).
    pub fn to_move(&self) -> Option<Move> {
        Some(Move {
            map: MoveMap::from_segments(self.segments.clone())?,
            sources: self.sources.files.iter().map(|f| f.path.clone()).collect(),
            outputs: vec![self.output.clone()],
        })
    }
}

/// Source blobs and runs read whole for a move, by (bundle path, offset): `None` when one
/// could not be read or failed its SHA-256 (its outputs derive).
pub type SourceBlobs = std::collections::HashMap<(String, u64), Option<bytes::Bytes>>;

impl Move {
    /// The sources output `o` takes rows from (ascending).
    pub fn sources_of(&self, o: u32) -> Vec<u32> {
        let mut s: Vec<u32> = self.map.output(o).iter().map(|g| g.source).collect();
        s.sort_unstable();
        s.dedup();
        s
    }

    /// Output `o`'s entries of one index, carried: each source entry `(key, position)` whose
    /// row moved to `o`, at its position there; sorted as a build sorts them. `None` unless
    /// every source of `o` gave its entries and the result holds exactly one entry per row
    /// of `o` (`rows`) — a kind whose blobs hold one entry per row (ordered, bitmap).
    pub fn carry(
        &self,
        o: u32,
        rows: u64,
        index_id: u64,
        sources: &SourceEntries,
    ) -> Option<Vec<(Vec<u8>, u64)>> {
        let mut out: Vec<(Vec<u8>, u64)> = Vec::with_capacity(rows.min(1 << 24) as usize);
        for s in self.sources_of(o) {
            let entries = sources.get(&(index_id, s))?.as_ref()?;
            for (k, p) in entries {
                if let Some((to, at)) = self.map.target(s, *p) {
                    if to == o {
                        out.push((k.clone(), at));
                    }
                }
            }
        }
        if out.len() as u64 != rows {
            return None;
        }
        out.sort_unstable();
        // One entry per row: positions 0..rows each once.
        let mut seen = vec![false; rows as usize];
        for (_, p) in &out {
            if std::mem::replace(seen.get_mut(*p as usize)?, true) {
                return None;
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roaring::RoaringTreemap;

    fn dense<'a>(path: &'a str, start: u64, rows: u64) -> Lineage<'a> {
        Lineage {
            path,
            rows,
            start: Some(start),
            runs: None,
            deleted: None,
        }
    }

    fn explicit<'a>(path: &'a str, runs: &'a IdRuns, rows: u64) -> Lineage<'a> {
        Lineage {
            path,
            rows,
            start: None,
            runs: Some(runs),
            deleted: None,
        }
    }

    /// Every live source row lands at exactly one output row with the same id, and back.
    fn check_bijection(m: &MoveMap, sources: &[Lineage<'_>], outputs: &[Lineage<'_>]) {
        let id_of = |l: &Lineage<'_>, p: u64| {
            l.runs
                .map(|r| r.id_at(p).unwrap())
                .unwrap_or_else(|| l.start.unwrap() + p)
        };
        let mut seen = 0;
        for (o, out) in outputs.iter().enumerate() {
            let mut next = 0;
            for s in m.output(o as u32) {
                assert_eq!(s.position, next);
                for k in 0..s.count {
                    let src = &sources[s.source as usize];
                    assert_eq!(
                        id_of(out, s.position + k),
                        id_of(src, s.source_position + k)
                    );
                    assert!(!src
                        .deleted
                        .is_some_and(|d| d.contains(s.source_position + k)));
                    assert_eq!(
                        m.target(s.source, s.source_position + k),
                        Some((o as u32, s.position + k))
                    );
                }
                next += s.count;
                seen += s.count;
            }
            assert_eq!(next, out.rows);
        }
        assert_eq!(seen, m.rows);
    }

    fn table(version: u8, ops: &[&str]) -> TableMetadata {
        // Snapshots 1.. with parents in a line, operations `ops`.
        let snaps: Vec<String> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| {
                let parent = if i == 0 {
                    String::new()
                } else {
                    format!(r#""parent-snapshot-id": {i},"#)
                };
                format!(
                    r#"{{"snapshot-id": {}, {parent} "timestamp-ms": 1, "sequence-number": {},
                        "summary": {{"operation": "{op}"}}, "manifest-list": "m{i}.avro"}}"#,
                    i + 1,
                    i + 1
                )
            })
            .collect();
        let json = format!(
            r#"{{"format-version": {version}, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
              "location": "s3://b/t", "last-sequence-number": 9, "last-updated-ms": 1,
              "last-column-id": 1, "current-schema-id": 0, "next-row-id": 0,
              "schemas": [{{"type": "struct", "schema-id": 0, "fields": [{{"id": 1, "name": "x", "required": true, "type": "long"}}]}}],
              "default-spec-id": 0, "partition-specs": [{{"spec-id": 0, "fields": []}}],
              "last-partition-id": 999, "default-sort-order-id": 0, "sort-orders": [],
              "properties": {{}}, "current-snapshot-id": {},
              "snapshots": [{}], "snapshot-log": [], "metadata-log": []}}"#,
            ops.len(),
            snaps.join(",")
        );
        TableMetadata::from_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn only_a_chain_of_replaces_is_a_move() {
        let t = table(3, &["append", "append", "replace", "replace"]);
        assert_eq!(replace_chain(&t, 2, 4), Ok(()));
        assert_eq!(replace_chain(&t, 3, 4), Ok(()));
        assert_eq!(
            replace_chain(&t, 1, 4),
            Err(NotAMove::Operation {
                snapshot: 2,
                operation: "append".into()
            })
        );
        assert_eq!(replace_chain(&t, 4, 4), Err(NotAMove::NothingMoved));
        // Not an ancestor (a rollback to an older snapshot), or unknown.
        assert_eq!(
            replace_chain(&t, 4, 3),
            Err(NotAMove::NotADescendant { from: 4, to: 3 })
        );
        assert_eq!(
            replace_chain(&t, 99, 4),
            Err(NotAMove::NotADescendant { from: 99, to: 4 })
        );
        let mixed = table(3, &["append", "replace", "overwrite", "replace"]);
        assert_eq!(
            replace_chain(&mixed, 1, 4),
            Err(NotAMove::Operation {
                snapshot: 3,
                operation: "overwrite".into()
            })
        );
        assert_eq!(
            replace_chain(&table(2, &["append", "replace"]), 1, 2),
            Err(NotAMove::NoTableLineage { format_version: 2 })
        );
    }

    #[test]
    fn entries_carry_to_the_rows_new_positions_and_nothing_less() {
        // A (ids 0..4, position 1 deleted) and B (ids 4..6) into D: ids 5, 4, 0, 2, 3.
        let mut del = RoaringTreemap::new();
        del.insert(1);
        let a = Lineage {
            deleted: Some(&del),
            ..dense("A", 0, 4)
        };
        let b = dense("B", 4, 2);
        let d_ids = IdRuns::from_ids([5, 4, 0, 2, 3].map(Some)).unwrap();
        let d = explicit("D", &d_ids, 5);
        let mv = Move {
            map: MoveMap::of(&[a, b], &[d]).unwrap(),
            sources: vec!["A".into(), "B".into()],
            outputs: vec!["D".into()],
        };
        let key = |s: &str| s.as_bytes().to_vec();
        let mut src: SourceEntries = Default::default();
        // Blobs hold every position, deleted ones too.
        src.insert(
            (7, 0),
            Some(vec![
                (key("a0"), 0),
                (key("a1"), 1),
                (key("a2"), 2),
                (key("a3"), 3),
            ]),
        );
        src.insert((7, 1), Some(vec![(key("b0"), 0), (key("b1"), 1)]));
        assert_eq!(
            mv.carry(0, 5, 7, &src),
            Some(vec![
                (key("a0"), 2),
                (key("a2"), 3),
                (key("a3"), 4),
                (key("b0"), 1),
                (key("b1"), 0)
            ])
        );
        // A source that could not give its entries, one entry short, one twice: derive.
        assert_eq!(mv.carry(0, 5, 8, &src), None);
        src.insert(
            (9, 0),
            Some(vec![(key("a0"), 0), (key("a2"), 2), (key("a3"), 3)]),
        );
        src.insert((9, 1), Some(vec![(key("b0"), 0)]));
        assert_eq!(mv.carry(0, 5, 9, &src), None);
        src.insert((10, 0), Some(vec![(key("a0"), 0), (key("a2"), 2)]));
        src.insert(
            (10, 1),
            Some(vec![(key("b0"), 0), (key("b1"), 1), (key("bx"), 1)]),
        );
        assert_eq!(mv.carry(0, 5, 10, &src), None);
        src.insert((11, 0), None);
        src.insert((11, 1), Some(vec![(key("b0"), 0), (key("b1"), 1)]));
        assert_eq!(mv.carry(0, 5, 11, &src), None);
    }

    #[test]
    fn a_compaction_keeping_ids_is_a_move_and_maps_every_row() {
        // A: ids 0..400 with 3, 7 and 50..60 deleted; B: ids 400..600. D holds A's live rows
        // then B's, ids kept (as make_v3.py's compaction).
        let mut del = RoaringTreemap::new();
        del.insert(3);
        del.insert(7);
        del.insert_range(50..60);
        let a = Lineage {
            deleted: Some(&del),
            ..dense("A", 0, 400)
        };
        let b = dense("B", 400, 200);
        let live_a: Vec<u64> = (0..400).filter(|p| !del.contains(*p)).collect();
        let d_ids =
            IdRuns::from_ids(live_a.iter().map(|&p| Some(p)).chain((400..600).map(Some))).unwrap();
        let d = explicit("D", &d_ids, 388 + 200);
        let m = MoveMap::of(&[a.clone(), b.clone()], std::slice::from_ref(&d)).unwrap();
        assert_eq!(m.rows, 588);
        check_bijection(&m, &[a, b], &[d]);
        assert_eq!(m.target(0, 3), None, "a deleted row goes nowhere");
        assert_eq!(m.target(0, 8), Some((0, 6)));
        assert_eq!(m.target(1, 0), Some((0, 388)));
        // A's four live runs (0..3, 4..7, 8..50, 60..400) and B's: five segments.
        assert_eq!(m.segments(), 5);
    }

    #[test]
    fn rows_split_and_shuffled_over_outputs_map_back() {
        // Two sources, three outputs taking interleaved slices in another order.
        let s0 = dense("s0", 1000, 300);
        let s1 = dense("s1", 5000, 100);
        let o0 = IdRuns::from_ids((1200..1300).chain(5000..5050).map(Some)).unwrap();
        let o1 = IdRuns::from_ids((1000..1200).map(Some)).unwrap();
        let o2 = IdRuns::from_ids((5050..5100).rev().map(Some)).unwrap();
        let outs = [
            explicit("o0", &o0, 150),
            explicit("o1", &o1, 200),
            explicit("o2", &o2, 50),
        ];
        let m = MoveMap::of(&[s0.clone(), s1.clone()], &outs).unwrap();
        check_bijection(&m, &[s0, s1], &outs);
        assert_eq!(m.rows, 400);
    }

    #[test]
    fn anything_less_than_an_exact_move_is_refused() {
        let a = dense("A", 0, 100);
        let b = dense("B", 100, 100);
        let srcs = [a.clone(), b.clone()];
        // One row missing.
        let short = IdRuns::from_ids((0..199).map(Some)).unwrap();
        assert_eq!(
            MoveMap::of(&srcs, &[explicit("D", &short, 199)]),
            Err(NotAMove::RowsMissing { rows: 1 })
        );
        // A new id.
        let new = IdRuns::from_ids((0..199).chain([7000]).map(Some)).unwrap();
        assert_eq!(
            MoveMap::of(&srcs, &[explicit("D", &new, 200)]),
            Err(NotAMove::NewId {
                file: "D".into(),
                id: 7000
            })
        );
        // An id in two outputs.
        let x = IdRuns::from_ids((0..100).map(Some)).unwrap();
        let y = IdRuns::from_ids((99..200).map(Some)).unwrap();
        assert_eq!(
            MoveMap::of(&srcs, &[explicit("X", &x, 100), explicit("Y", &y, 101)]),
            Err(NotAMove::IdTwice { id: 99 })
        );
        // A deleted source row brought back.
        let mut del = RoaringTreemap::new();
        del.insert(42);
        let a_del = Lineage {
            deleted: Some(&del),
            ..a.clone()
        };
        let all = IdRuns::from_ids((0..200).map(Some)).unwrap();
        assert_eq!(
            MoveMap::of(&[a_del, b.clone()], &[explicit("D", &all, 200)]),
            Err(NotAMove::DeletedRowBack {
                file: "D".into(),
                id: 42
            })
        );
        // An output row without an id; an output without lineage; sources holding one id twice.
        let gap = IdRuns(vec![(0, 0, 100), (101, 100, 99)]);
        assert_eq!(
            MoveMap::of(&srcs, &[explicit("D", &gap, 200)]),
            Err(NotAMove::RowWithoutId {
                file: "D".into(),
                position: 100
            })
        );
        let none = Lineage {
            start: None,
            ..dense("D", 0, 200)
        };
        assert_eq!(
            MoveMap::of(&srcs, &[none]),
            Err(NotAMove::NoLineage { file: "D".into() })
        );
        assert_eq!(
            MoveMap::of(&[a.clone(), dense("B", 50, 100)], &[dense("D", 0, 150)]),
            Err(NotAMove::IdTwice { id: 50 })
        );
        // An output with deleted rows; nothing on one side.
        let mut od = RoaringTreemap::new();
        od.insert(0);
        let with_del = Lineage {
            deleted: Some(&od),
            ..dense("D", 0, 200)
        };
        assert_eq!(
            MoveMap::of(&srcs, &[with_del]),
            Err(NotAMove::OutputDeletes { file: "D".into() })
        );
        assert_eq!(
            MoveMap::of(&[], &[dense("D", 0, 1)]),
            Err(NotAMove::NothingMoved)
        );
        // The exact move passes.
        assert!(MoveMap::of(&srcs, &[dense("D", 0, 200)]).is_ok());
    }

    #[test]
    fn hostile_runs_are_refused_not_trusted() {
        // Runs past the file, overflowing ids.
        let past = IdRuns(vec![(0, 0, 500)]);
        assert!(matches!(
            MoveMap::of(&[dense("A", 0, 100)], &[explicit("D", &past, 100)]),
            Err(NotAMove::BadIds { .. })
        ));
        let over = IdRuns(vec![(0, u64::MAX - 1, 10)]);
        assert!(matches!(
            MoveMap::of(&[explicit("A", &over, 10)], &[dense("D", 0, 10)]),
            Err(NotAMove::BadIds { .. })
        ));
        assert!(matches!(
            MoveMap::of(&[dense("A", u64::MAX - 5, 10)], &[dense("D", 0, 10)]),
            Err(NotAMove::BadIds { .. })
        ));
    }
}
