//! `registerRewrite` (RFC 0006): the owner of a Parquet table says that some files were
//! rewritten into others — a compaction, a re-sort — and the rewritten rows keep their row ids
//! in a column of the new files. Skerry checks the claim by the ids alone (as it checks an
//! Iceberg `replace`, `admin::moves`) and, when it holds, swaps the files in one commit and
//! carries the indexes' entries over from the old files' blobs instead of deriving them.
//!
//! A Parquet table's row ids are Skerry's own (a file's rows take the table's next ids when it
//! is registered; answers report them as `rowId`): a rewriter that keeps a row writes its id in
//! the row-id column (`_row_id` by default). A claim the ids do not bear out — an id no removed
//! file held, one held twice, a deleted row brought back, a live row left out, a row without
//! an id — is refused with the first failed check, and nothing changes.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::admin::catalog::RowIds;
use crate::admin::iceberg::MoveReport;
use crate::admin::lifecycle::{FileSetChange, RegisterReport};
use crate::admin::moves::{Lineage, Move, MoveMap};
use crate::admin::overlay::Overlay;
use crate::datafile;
use crate::error::{Error, Result};
use crate::io::{Location, RangeReader};

/// The row-id column a rewrite's files carry unless the call names another.
pub const DEFAULT_ROW_ID_COLUMN: &str = "_row_id";

/// What [`Overlay::register_rewrite`] did: the new files' registration, and the move (rows,
/// segments, entries carried and derived).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewriteReport {
    pub registered: RegisterReport,
    pub moved: MoveReport,
}

impl Overlay {
    /// Replaces files `removed` of Parquet table `table` with `added`, which hold exactly
    /// the removed files' live rows under the same row ids, read from each added file's
    /// `row_id_column` (a long column; default [`DEFAULT_ROW_ID_COLUMN`]; beside it the
    /// files hold the table's columns, after them when the files carry no field ids, whose
    /// columns are then numbered by position). In one commit the
    /// removed files leave and the added ones arrive with those ids; each index's entries of
    /// the added files are carried over from the removed files' blobs where they can be
    /// (ordered, bitmap, full text, vector), else derived as a registration derives them.
    /// `verify` certifies carried entries by rebuilding them from the new files.
    ///
    /// Errors: `E_NOT_FOUND` for a removed file the table does not have; `E_ALREADY_EXISTS`
    /// for an added one it has; `E_REFUSED` for an Iceberg-backed table (its rewrites arrive
    /// by `syncIceberg`), an added file without the column, and a claim the row ids do not
    /// bear out (the message names the first failed check); `E_INVALID` for empty or
    /// repeated lists and unsafe paths (a local link out of the table's directory is never
    /// read); read errors. On error nothing changes.
    pub async fn register_rewrite(
        &self,
        table: &str,
        removed: &[String],
        added: &[String],
        row_id_column: Option<&str>,
    ) -> Result<RewriteReport> {
        let column = row_id_column.unwrap_or(DEFAULT_ROW_ID_COLUMN);
        if removed.is_empty() || added.is_empty() {
            return Err(Error::Invalid(
                "registerRewrite: name the removed files and the added files".into(),
            ));
        }
        for p in removed.iter().chain(added) {
            crate::admin::overlay::check_data_path(p)?;
        }
        crate::admin::overlay::check_listed_once(removed)?;
        crate::admin::overlay::check_listed_once(added)?;
        if let Some(p) = removed.iter().find(|p| added.contains(p)) {
            return Err(Error::Invalid(format!(
                "registerRewrite: {p} is both removed and added"
            )));
        }
        let t = self.catalog.begin()?;
        let tr = self.catalog.table(&t, table).await?;
        let existing = self.catalog.files(&t, tr.table_id).await?;
        drop(t);
        if tr.iceberg.is_some() {
            return Err(Error::Refused(format!(
                "table {} follows an Iceberg table: its rewrites arrive by syncIceberg",
                tr.name
            )));
        }
        let sources: Vec<&crate::formats::manifest::FileEntry> = removed
            .iter()
            .map(|p| {
                existing
                    .iter()
                    .find(|f| &f.path == p)
                    .ok_or_else(|| Error::NotFound {
                        kind: "data file",
                        name: format!("{}/{p}", tr.name),
                    })
            })
            .collect::<Result<_>>()?;
        // The added files' row ids, from their column.
        let mut ids: HashMap<String, RowIds> = HashMap::new();
        let mut rows: HashMap<&str, u64> = HashMap::new();
        for p in added {
            let url = crate::io::path::join(&tr.location, p);
            crate::admin::overlay::check_local_containment(&tr.location, &url)?;
            let loc = Location::new(&url);
            let head = self.data.head(&loc).await?;
            let md = datafile::read_metadata(self.data.as_ref(), &loc, head.size).await?;
            let fields = datafile::fields(&datafile::arrow_schema(&md)?);
            let root = fields
                .iter()
                .position(|f| f.name == column)
                .ok_or_else(|| {
                    Error::Refused(format!(
                        "{p} has no row-id column {column}: a rewrite's files carry the rows' ids"
                    ))
                })?;
            let n = md.file_metadata().num_rows().max(0) as u64;
            let got = crate::admin::moves::read_ids(
                self.data.as_ref(),
                &loc,
                &md,
                root,
                None,
                n,
                |what| Error::Refused(format!("{p}: row-id column {column}: {what}")),
            )
            .await?;
            rows.insert(p.as_str(), n);
            ids.insert(p.clone(), got);
        }
        let masks: Vec<Option<roaring::RoaringTreemap>> =
            sources.iter().map(|f| f.deleted()).collect::<Result<_>>()?;
        let from: Vec<Lineage<'_>> = sources
            .iter()
            .zip(&masks)
            .map(|(f, m)| Lineage::of_file(f, m.as_ref()))
            .collect();
        let to: Vec<Lineage<'_>> = added
            .iter()
            .map(|p| Lineage {
                path: p,
                rows: rows[p.as_str()],
                start: ids[p].start,
                runs: ids[p].runs.as_ref(),
                deleted: None,
            })
            .collect();
        let map = MoveMap::of(&from, &to).map_err(|e| {
            Error::Refused(format!(
                "registerRewrite: the added files do not hold exactly the removed files' rows: {e}"
            ))
        })?;
        let mut moved = MoveReport {
            files: added.len() as u64,
            sources: removed.len() as u64,
            rows: map.rows,
            segments: map.segments() as u64,
            ..Default::default()
        };
        drop((from, to));
        let kept: HashSet<&String> = added.iter().collect();
        let change = FileSetChange {
            remove: removed.to_vec(),
            row_ids: ids.into_iter().filter(|(p, _)| kept.contains(p)).collect(),
            moved: Some(Move {
                map,
                sources: removed.to_vec(),
                outputs: added.to_vec(),
            }),
            extra_column: Some(column.to_string()),
            ..Default::default()
        };
        let registered = self.register_files_with(table, added, change).await?;
        moved.carried = registered.carried;
        moved.derived = registered.derived;
        Ok(RewriteReport { registered, moved })
    }
}
