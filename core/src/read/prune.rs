//! Statistics pruning: what a predicate leaves of a Parquet file, by row-group column
//! statistics and then by the page index.

use arrow_array::Array;
use parquet::file::metadata::ParquetMetaData;

use crate::datafile::{arrow_schema, intersect_ranges, value_at};
use crate::read::predicate::ColumnPredicate;
use crate::values::Value;

/// What statistics leave of a file for a predicate: the row groups to read and, within
/// them, the row ranges (absolute positions, sorted, disjoint) whose pages may match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub groups: Vec<usize>,
    pub ranges: Vec<std::ops::Range<u64>>,
    pub groups_total: u64,
    /// Row groups skipped by their column-chunk statistics.
    pub groups_pruned: u64,
    /// Row groups skipped because no page of theirs may match (page index).
    pub groups_pruned_by_pages: u64,
    /// Rows skipped within the groups read (page index).
    pub rows_pruned_by_pages: u64,
}

/// Judges every row group of `md` by the column statistics of the predicate's columns, then
/// every page of the groups left by the page index (when the file has one): only what the
/// statistics prove cannot match is pruned. `columns` pairs each column's predicate with its
/// top-level column in this file (`None`: the file lacks the column, so it reads as NULL).
/// Malformed or missing statistics prune nothing.
pub fn prune(md: &ParquetMetaData, columns: &[(Option<usize>, &ColumnPredicate)]) -> Pruned {
    use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
    let groups = md.row_groups();
    let indices: Vec<usize> = (0..groups.len()).collect();
    let schema = arrow_schema(md).ok();
    let descr = md.file_metadata().schema_descr();
    let mut starts = Vec::with_capacity(groups.len());
    let mut at = 0u64;
    for g in groups {
        starts.push(at);
        at = at.saturating_add(g.num_rows().max(0) as u64);
    }
    let rows = |g: usize| groups[g].num_rows().max(0) as u64;
    // Per column: a converter, when the column is in the file and its statistics readable.
    let converters: Vec<Option<StatisticsConverter<'_>>> = columns
        .iter()
        .map(|(root, _)| {
            let schema = schema.as_ref()?;
            let name = schema.field(*root.as_ref()?).name();
            StatisticsConverter::try_new(name, schema, descr)
                .ok()
                .map(|c| c.with_missing_null_counts_as_zero(false))
        })
        .collect();
    let mut out = Pruned {
        groups_total: groups.len() as u64,
        ..Default::default()
    };
    // Row-group statistics.
    let mut keep = vec![true; groups.len()];
    for ((root, pred), conv) in columns.iter().zip(&converters) {
        if root.is_none() {
            for (g, k) in keep.iter_mut().enumerate() {
                *k &= pred.may_match(&Value::Null, &Value::Null, Some(rows(g)), rows(g));
            }
            continue;
        }
        let Some(conv) = conv else { continue };
        let (Ok(mins), Ok(maxes), Ok(nulls)) = (
            conv.row_group_mins(groups.iter()),
            conv.row_group_maxes(groups.iter()),
            conv.row_group_null_counts(groups.iter()),
        ) else {
            continue;
        };
        if mins.len() != groups.len() || maxes.len() != groups.len() || nulls.len() != groups.len()
        {
            continue;
        }
        for (g, k) in keep.iter_mut().enumerate() {
            let (Ok(lo), Ok(hi)) = (value_at(mins.as_ref(), g), value_at(maxes.as_ref(), g)) else {
                continue;
            };
            let n = (!nulls.is_null(g)).then(|| nulls.value(g));
            *k &= pred.may_match(&lo, &hi, n, rows(g));
        }
    }
    let page_index = md.page_index();
    for g in 0..groups.len() {
        if !keep[g] {
            out.groups_pruned += 1;
            continue;
        }
        let whole = starts[g]..starts[g] + rows(g);
        let mut ranges = vec![whole.clone()];
        if let Some(pi) = page_index {
            for ((root, pred), conv) in columns.iter().zip(&converters) {
                let (Some(root), Some(conv)) = (root, conv) else {
                    continue;
                };
                let _ = root;
                let Some(col) = conv.parquet_column_index() else {
                    continue;
                };
                let Some(pages) = page_ranges(pi.as_ref(), g, col, &whole) else {
                    continue;
                };
                let one = &indices[g..g + 1];
                let (Ok(mins), Ok(maxes), Ok(nulls)) = (
                    conv.data_page_mins(pi.as_ref(), one),
                    conv.data_page_maxes(pi.as_ref(), one),
                    conv.data_page_null_counts(pi.as_ref(), one),
                ) else {
                    continue;
                };
                if mins.len() != pages.len()
                    || maxes.len() != pages.len()
                    || nulls.len() != pages.len()
                {
                    continue;
                }
                let mut kept: Vec<std::ops::Range<u64>> = Vec::new();
                for (p, r) in pages.iter().enumerate() {
                    let may = match (value_at(mins.as_ref(), p), value_at(maxes.as_ref(), p)) {
                        (Ok(lo), Ok(hi)) => {
                            let n = (!nulls.is_null(p)).then(|| nulls.value(p));
                            pred.may_match(&lo, &hi, n, r.end - r.start)
                        }
                        _ => true,
                    };
                    if may {
                        match kept.last_mut() {
                            Some(last) if last.end == r.start => last.end = r.end,
                            _ => kept.push(r.clone()),
                        }
                    }
                }
                ranges = intersect_ranges(&ranges, &kept);
            }
        }
        let selected: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        if selected == 0 {
            out.groups_pruned_by_pages += 1;
            continue;
        }
        out.rows_pruned_by_pages += rows(g) - selected;
        out.groups.push(g);
        out.ranges.extend(ranges);
    }
    out
}

/// The row ranges (absolute) of the pages of column `col` in group `g` from the offset
/// index; `None` when it is absent or inconsistent (never trusted past the group's rows).
fn page_ranges(
    pi: &dyn parquet::file::metadata::page_index::PageIndexProvider,
    g: usize,
    col: usize,
    whole: &std::ops::Range<u64>,
) -> Option<Vec<std::ops::Range<u64>>> {
    let locs = pi.offset_index(g, col)?.page_locations();
    let n = whole.end - whole.start;
    let firsts: Vec<u64> = locs
        .iter()
        .map(|l| u64::try_from(l.first_row_index).ok())
        .collect::<Option<_>>()?;
    if firsts.first() != Some(&0)
        || firsts.windows(2).any(|w| w[0] >= w[1])
        || firsts.last()? >= &n && n > 0
    {
        return None;
    }
    Some(
        firsts
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let end = firsts.get(i + 1).copied().unwrap_or(n);
                whole.start + f..whole.start + end
            })
            .collect(),
    )
}
