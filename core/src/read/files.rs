//! The per-file part that `search` and `nearest` share: which rows of each data file the
//! `where` pre-filter keeps, and whether a file is answered from its index blob or scanned —
//! no blob for the file, the read gate rejects it ([`IndexFileEntry::gate`]), or a read of
//! it failed a check and the verb forced a scan ([`Files::force_scan`]). Delete masks stay
//! with the file ([`crate::formats::manifest::FileEntry::deleted`]); [`Files::keeps`] applies
//! both.
//!
//! A verb opens [`Files`] once, asks it per file, and on a failed blob read forces the file
//! to a scan and runs again: every path through it ends in the index's answer or the
//! scan's, never in neither.

use std::collections::{HashMap, HashSet};

use roaring::RoaringTreemap;

use crate::error::Result;
use crate::formats::lineage::{GateDecision, Rejection};
use crate::formats::manifest::{IndexFileEntry, IndexManifest, TableManifest};
use crate::read::lookup::Pinned;
use crate::read::predicate::Condition;

/// How a verb answers one file.
pub(crate) enum Source<'m> {
    /// From the index blob (the gate accepted it).
    Index(&'m IndexFileEntry),
    /// By scanning the file; with why, when the file had a blob the gate rejected.
    Scan(Option<Rejection>),
}

/// What a verb reads of each file of a table (see the module docs).
pub(crate) struct Files<'m> {
    t: &'m TableManifest,
    /// Rows the pre-filter keeps, by file index (`None`: no `where`).
    allowed: Option<HashMap<usize, RoaringTreemap>>,
    /// Blob entries by file id (empty when the verb scans).
    entries: HashMap<u64, &'m IndexFileEntry>,
    /// The index, whose covered part ([`IndexManifest::covered_part`]) was left unread
    /// (`Some`: [`Files::load_covered`] reads it when the run stops answering).
    unread: Option<&'m IndexManifest>,
    /// Files a failed blob read sent to a scan.
    forced: HashSet<usize>,
    /// Whether the verb reads the index at all (`FileOptions::use_blobs`).
    use_index: bool,
}

/// What the pre-filter and the index choice need to know of a verb's call.
pub(crate) struct FileOptions<'a> {
    /// The `where` conditions (empty: every row).
    pub conditions: &'a [Condition],
    pub verify_files: bool,
    pub pin_versions: bool,
    /// Whether blobs may be used at all (not scan-only, not poisoned, …).
    pub use_blobs: bool,
    /// Whether the verb answers the files the index's table run covers from the run: a
    /// covered part (their entries alone) is then not read.
    pub by_run: bool,
}

impl<'m> Files<'m> {
    /// Runs the pre-filter (a `query` of the conditions that returns positions only) and
    /// loads the index's file entries when `o.use_blobs`.
    pub(crate) async fn open(
        l: &Pinned<'_>,
        table: &str,
        t: &'m TableManifest,
        ix: &'m IndexManifest,
        o: FileOptions<'_>,
    ) -> Result<Files<'m>> {
        // `where` answered first into each file's matching positions (no row limit: a
        // filter keeping millions of rows is a bitmap per file).
        let allowed = if o.conditions.is_empty() {
            None
        } else {
            Some(
                l.matching_positions(table, o.conditions, o.verify_files, o.pin_versions)
                    .await?,
            )
        };
        let unread =
            (o.use_blobs && o.by_run && ix.covered_part() && !ix.lists_ready()).then_some(ix);
        let entries = if o.use_blobs {
            if unread.is_none() {
                l.load_part(t, ix).await?;
            }
            ix.file_entries().iter().map(|e| (e.file_id, e)).collect()
        } else {
            HashMap::new()
        };
        Ok(Files {
            t,
            allowed,
            entries,
            unread,
            forced: HashSet::new(),
            use_index: o.use_blobs,
        })
    }

    /// Reads the covered part left unread ([`FileOptions::by_run`]) once the run no longer
    /// answers the files it covers, so they are answered by their own blobs.
    pub(crate) async fn load_covered(&mut self, l: &Pinned<'_>) -> Result<()> {
        if let Some(ix) = self.unread.take() {
            l.load_part(self.t, ix).await?;
            self.entries = ix.file_entries().iter().map(|e| (e.file_id, e)).collect();
        }
        Ok(())
    }

    /// The pre-filter's rows of file `i`: `None` without a `where`, `Some(None)` when it
    /// keeps no row of the file, `Some(Some(rows))` otherwise.
    pub(crate) fn allow(&self, i: usize) -> Option<Option<&RoaringTreemap>> {
        self.allowed.as_ref().map(|m| m.get(&i))
    }

    /// Whether a `where` pre-filters the rows.
    pub(crate) fn filtered(&self) -> bool {
        self.allowed.is_some()
    }

    /// Whether `row` of file `i` is answerable: not deleted, and kept by the pre-filter.
    pub(crate) fn keeps(&self, i: usize, deleted: Option<&RoaringTreemap>, row: u64) -> bool {
        !deleted.is_some_and(|d| d.contains(row))
            && self
                .allow(i)
                .is_none_or(|a| a.is_some_and(|a| a.contains(row)))
    }

    /// File `i`'s blob entry, unless it has none or was forced to a scan.
    pub(crate) fn entry(&self, i: usize) -> Option<&'m IndexFileEntry> {
        if self.forced.contains(&i) {
            return None;
        }
        self.entries.get(&self.t.files[i].file_id).copied()
    }

    /// How file `i` is answered: from its blob when it has one the read gate accepts.
    pub(crate) fn source(&self, i: usize) -> Source<'m> {
        match self.entry(i) {
            None => Source::Scan(None),
            Some(e) => match e.gate(&self.t.files[i], self.t.snapshot) {
                GateDecision::Accept => Source::Index(e),
                GateDecision::Reject(r) => Source::Scan(Some(r)),
            },
        }
    }

    /// Whether a table run whose facts of file `i` match the file's may answer it: the verb
    /// reads the index, the file was not forced to a scan, and a blob entry it still has (a
    /// file whose blob the run holds has none, decision 71) is one the gate accepts.
    pub(crate) fn by_run(&self, i: usize) -> bool {
        self.use_index
            && !self.forced.contains(&i)
            && match self.entries.get(&self.t.files[i].file_id) {
                None => true,
                Some(_) => matches!(self.source(i), Source::Index(_)),
            }
    }

    /// The bundle of file `i`'s blob entry, forced or not (what a rejection names).
    pub(crate) fn bundle_path(&self, i: usize) -> Option<String> {
        self.entries
            .get(&self.t.files[i].file_id)
            .map(|e| e.lineage.bundle_path.clone())
    }

    /// Sends file `i` to a scan from now on (a read of its blob failed a check).
    pub(crate) fn force_scan(&mut self, i: usize) {
        self.forced.insert(i);
    }

    /// Whether file `i` was sent to a scan.
    pub(crate) fn forced(&self, i: usize) -> bool {
        self.forced.contains(&i)
    }
}
