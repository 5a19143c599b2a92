//! Hybrid search: `search(table, { query, vector, k })` fuses a BM25 ranking and a
//! nearest-neighbour ranking by reciprocal rank fusion (`docs/query.md`).
//!
//! Both rankings are computed in full by their own paths ([`Pinned::search`] without the
//! vector, [`Pinned::nearest`]), each to depth `k`, with the same `where`, `columns`,
//! `verify` and snapshot, concurrently. A row's fused score is
//!
//! ```text
//! score(row) = Σ over the rankings holding it  1 / (RRF_K + rank)      (rank from 1)
//! ```
//!
//! with [`RRF_K`] = 60 (Cormack, Clarke & Büttcher, 2009). Rows are ordered by score,
//! descending; equal scores by row id, then file order, then position — so the answer is a
//! function of the two rankings alone, the same on every target. A row in neither ranking's
//! first `k` is not a result.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::read::lookup::{Pinned, RowRef};
use crate::read::nearest::{Nearest, NearestResult};
use crate::read::search::{Hybrid, Search, SearchResult};

/// The rank constant of reciprocal rank fusion.
pub const RRF_K: f64 = 60.0;

/// The fused score of ranks (1-based) in the rankings holding a row.
pub fn rrf(ranks: &[Option<u32>]) -> f64 {
    ranks
        .iter()
        .flatten()
        .map(|&r| 1.0 / (RRF_K + f64::from(r)))
        .sum()
}

impl Pinned<'_> {
    /// Searches `table`'s full-text index (see [`crate::read::search`]). Errors: unknown table,
    /// index or column (`E_NOT_FOUND`), no full-text index or several without `index`
    /// (`E_INVALID`), `k` out of range or too many terms (`E_LIMIT`), data files that cannot
    /// be read (`E_IO`, `E_PARQUET`). A missing, rejected or drifted blob never fails a
    /// search: its file is scanned. With `s.vector`, a hybrid search
    /// ([`crate::read::hybrid`]), which also fails as [`Pinned::nearest`] does.
    pub async fn search(&self, table: &str, s: &Search) -> Result<SearchResult> {
        if s.vector.is_some() {
            return self.hybrid(table, s).await;
        }
        self.search_text(table, s).await
    }

    /// A hybrid search (see the module docs): `s.vector` is `Some`. Errors: those of
    /// [`Pinned::search`] and [`Pinned::nearest`].
    pub(crate) async fn hybrid(&self, table: &str, s: &Search) -> Result<SearchResult> {
        let start = (self.overlay.stats(), self.data.stats(), self.cache.hits());
        let vector = s
            .vector
            .clone()
            .ok_or_else(|| Error::Invalid("a hybrid search needs a vector".into()))?;
        let text = Search {
            vector: None,
            ..s.clone()
        };
        let near = Nearest {
            vector,
            k: s.k,
            nprobe: None,
            ef: s.ef,
            index: s.vector_index.clone(),
            column: s.vector_column.clone(),
            conditions: s.conditions.clone(),
            columns: s.columns.clone(),
            verify_files: s.verify_files,
            pin_versions: s.pin_versions,
            snapshot: s.snapshot,
        };
        let (mut t, n) =
            futures::future::try_join(self.search_text(table, &text), self.nearest(table, &near))
                .await?;
        // The two ran concurrently: the result's I/O counters are the whole call's.
        self.io_since(&mut t.stats, start);
        let files = &self.manifest.table(table)?.files;
        fuse(t, n, s.k, |path| {
            files
                .iter()
                .position(|f| f.path == path)
                .unwrap_or(usize::MAX)
        })
    }
}

/// The fused answer of the two rankings, `k` rows at most; `file_order` ranks a data file
/// path for ties between rows without row ids.
fn fuse(
    t: SearchResult,
    n: NearestResult,
    k: usize,
    file_order: impl Fn(&str) -> usize,
) -> Result<SearchResult> {
    struct Fused {
        row: RowRef,
        text: Option<(u32, usize)>,
        vector: Option<(u32, usize)>,
    }
    let mut by_row: HashMap<(String, u64), usize> = HashMap::new();
    let mut all: Vec<Fused> = Vec::new();
    for (list, rows) in [(0, &t.rows), (1, &n.rows)] {
        for (i, r) in rows.iter().enumerate() {
            let at = *by_row
                .entry((r.file.clone(), r.position))
                .or_insert_with(|| {
                    all.push(Fused {
                        row: r.clone(),
                        text: None,
                        vector: None,
                    });
                    all.len() - 1
                });
            let rank = (i + 1) as u32;
            if list == 0 {
                all[at].text = Some((rank, i));
            } else {
                all[at].vector = Some((rank, i));
            }
        }
    }
    let score = |f: &Fused| rrf(&[f.text.map(|x| x.0), f.vector.map(|x| x.0)]);
    let tie = |f: &Fused| {
        (
            f.row.row_id.unwrap_or(u64::MAX),
            file_order(&f.row.file),
            f.row.position,
        )
    };
    all.sort_by(|a, b| score(b).total_cmp(&score(a)).then(tie(a).cmp(&tie(b))));
    all.truncate(k);
    // The rows as the two searches read them: each result from the ranking that holds it
    // (the BM25 one first).
    let batches: Vec<&arrow_array::RecordBatch> = [&t.batch, &n.batch]
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .collect();
    let batch = match batches.as_slice() {
        [] => t.batch.clone(),
        _ => {
            let which = |list: usize| {
                let b = if list == 0 { &t.batch } else { &n.batch };
                batches
                    .iter()
                    .position(|x| std::ptr::eq(*x, b))
                    .expect("a ranking holding a result has rows")
            };
            let index: Vec<(usize, usize)> = all
                .iter()
                .map(|f| match (f.text, f.vector) {
                    (Some((_, i)), _) => (which(0), i),
                    (None, Some((_, i))) => (which(1), i),
                    (None, None) => unreachable!("every fused row is in a ranking"),
                })
                .collect();
            if batches.len() == 2 && batches[0].schema() != batches[1].schema() {
                return Err(Error::Invalid(
                    "hybrid search: the two rankings read the columns with different types".into(),
                ));
            }
            arrow_select::interleave::interleave_record_batch(&batches, &index)?
        }
    };
    let hybrid = Hybrid {
        text_ranks: all.iter().map(|f| f.text.map(|x| x.0)).collect(),
        text_scores: all.iter().map(|f| f.text.map(|x| t.scores[x.1])).collect(),
        vector_ranks: all.iter().map(|f| f.vector.map(|x| x.0)).collect(),
        distances: all
            .iter()
            .map(|f| f.vector.map(|x| n.distances[x.1]))
            .collect(),
        metric: n.metric,
        vector_stats: n.stats,
        vector_rounds: n.rounds,
        evaluated: n.evaluated,
    };
    Ok(SearchResult {
        scores: all.iter().map(score).collect(),
        rows: all.into_iter().map(|f| f.row).collect(),
        batch,
        bm25: t.bm25,
        stats: t.stats,
        rounds: t.rounds.max(n.rounds),
        hybrid: Some(hybrid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_scores_sum_reciprocal_ranks() {
        assert_eq!(rrf(&[Some(1), None]), 1.0 / 61.0);
        assert_eq!(rrf(&[Some(1), Some(3)]), 1.0 / 61.0 + 1.0 / 63.0);
        assert_eq!(rrf(&[None, None]), 0.0);
        // A row second in both outranks one first in only one.
        assert!(rrf(&[Some(2), Some(2)]) > rrf(&[Some(1), None]));
    }
}
