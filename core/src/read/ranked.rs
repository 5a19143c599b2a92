//! What the ranked verbs (`search`, `nearest`) share once their winners are known: the
//! winners' rows put back in answer order, a winner's file found changed, and checked ranges
//! inside a blob.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::lineage::{RejectReason, Rejection};
use crate::formats::manifest::{FileEntry, IndexManifest};
use crate::read::plan::QueryStats;

/// The rows read file by file (`parts`), in answer order (`place[k]`: the answer index of
/// the k-th row read).
pub(crate) fn assemble(
    parts: Vec<arrow_array::RecordBatch>,
    place: &[usize],
    fields: &[&crate::values::FieldInfo],
) -> Result<arrow_array::RecordBatch> {
    if fields.is_empty() {
        return Ok(arrow_array::RecordBatch::try_new_with_options(
            Arc::new(arrow_schema::Schema::empty()),
            vec![],
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(place.len())),
        )?);
    }
    let Some(first) = parts.first() else {
        let schema = arrow_schema::Schema::new(
            fields
                .iter()
                .map(|f| arrow_schema::Field::new(&f.name, arrow_schema::DataType::Null, true))
                .collect::<Vec<_>>(),
        );
        return Ok(arrow_array::RecordBatch::new_empty(Arc::new(schema)));
    };
    let schema = first.schema();
    let all = arrow_select::concat::concat_batches(&schema, &parts)?;
    let mut inverse = vec![0u32; place.len()];
    for (k, &i) in place.iter().enumerate() {
        inverse[i] = k as u32;
    }
    let index = arrow_array::UInt32Array::from(inverse);
    let cols = all
        .columns()
        .iter()
        .map(|c| arrow_select::take::take(c.as_ref(), &index, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(arrow_array::RecordBatch::try_new_with_options(
        schema,
        cols,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(place.len())),
    )?)
}

fn overflow() -> RejectReason {
    RejectReason::Corrupt {
        message: "offset overflow".into(),
    }
}

/// `blob_offset + offset .. + length`, checked.
pub(crate) fn abs(
    blob_offset: u64,
    offset: u64,
    length: u64,
) -> std::result::Result<(u64, u64), RejectReason> {
    let a = blob_offset.checked_add(offset).ok_or_else(overflow)?;
    let z = a.checked_add(length).ok_or_else(overflow)?;
    Ok((a, z))
}

/// A winner's file `f` changed under the answer (its rows as read disagree with what its
/// blob said). A file that was `scanned` changed again while it was searched: `E_DRIFT`.
/// Otherwise its blob is rejected as drifted (recorded in `stats`, `detail` saying why) and
/// the caller scans that file and starts over.
pub(crate) fn reject_drifted(
    stats: &mut QueryStats,
    f: &FileEntry,
    scanned: bool,
    index_id: u64,
    bundle_path: Option<String>,
    detail: &str,
) -> Result<()> {
    if scanned {
        return Err(Error::Drift {
            path: f.path.clone(),
            detail: "the file changed while it was searched".into(),
        });
    }
    stats.rejections.push(Rejection {
        data_file: f.path.clone(),
        index_id: Some(index_id),
        bundle_path,
        reason: RejectReason::Drifted {
            detail: detail.into(),
        },
    });
    if !stats.drifted.contains(&f.path) {
        stats.drifted.push(f.path.clone());
    }
    Ok(())
}

/// The one index of `kind` among `candidates` of table `table`: none or several is
/// `E_INVALID`, the latter naming them and how to choose (`choose`, e.g. "name one in
/// `index`").
pub(crate) fn the_one<'m>(
    table: &str,
    candidates: &[&'m IndexManifest],
    kind: &str,
    choose: &str,
) -> Result<&'m IndexManifest> {
    match candidates {
        [one] => Ok(*one),
        [] => Err(Error::Invalid(format!(
            "table {table} has no {kind} index to search"
        ))),
        many => Err(Error::Invalid(format!(
            "table {table} has several {kind} indexes ({}): {choose}",
            many.iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
