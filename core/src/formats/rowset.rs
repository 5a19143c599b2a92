//! Row-id summaries of data files ("file-row sets"): the cheapest exact description of the
//! stable row ids one immutable file holds, and where each sits.
//!
//! - `Dense`: ids `start .. start + count` at positions `0 .. count` (files registered
//!   through Skerry: `row_id_start + position`).
//! - `Roaring`: a 64-bit Roaring set, when it is smaller than the raw ids.
//! - `Sorted`: a sorted `u64` vector, when fragmentation makes Roaring larger.
//!
//! For the sparse shapes the id's rank is its position when the file's ids ascend in file
//! order; otherwise (a permuted file) a rank-indexed permutation of `u32` positions rides
//! beside the set. [`locate`] intersects requested ids with every file's summary; a file
//! with no (or an undecodable) summary keeps every requested id as a candidate — never a
//! guessed position.

use roaring::RoaringTreemap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowSetError {
    #[error("row id {0} appears twice in one file")]
    Duplicate(u64),
    #[error("a file of {0} rows is too large for a positions array")]
    TooManyRows(usize),
    #[error("corrupt row set: {0}")]
    Corrupt(&'static str),
}

/// The row ids of one data file.
#[derive(Clone, Debug, PartialEq)]
pub enum RowSet {
    Dense {
        start: u64,
        count: u64,
    },
    Roaring {
        ids: RoaringTreemap,
        positions: Option<Vec<u32>>,
    },
    Sorted {
        ids: Vec<u64>,
        positions: Option<Vec<u32>>,
    },
}

impl RowSet {
    /// The summary of a file whose rows carry `ids` in file order, in the smallest
    /// representation.
    pub fn from_ids(ids: &[u64]) -> Result<RowSet, RowSetError> {
        if ids.len() > u32::MAX as usize {
            return Err(RowSetError::TooManyRows(ids.len()));
        }
        let ascending = ids.windows(2).all(|w| w[0] < w[1]);
        if ascending
            && ids
                .first()
                .zip(ids.last())
                .is_some_and(|(a, b)| b - a + 1 == ids.len() as u64)
        {
            return Ok(RowSet::Dense {
                start: ids[0],
                count: ids.len() as u64,
            });
        }
        if ids.is_empty() {
            return Ok(RowSet::Dense { start: 0, count: 0 });
        }
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        if !ascending {
            order.sort_unstable_by_key(|&p| ids[p as usize]);
        }
        let sorted: Vec<u64> = order.iter().map(|&p| ids[p as usize]).collect();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(RowSetError::Duplicate(w[0]));
        }
        let positions = if ascending { None } else { Some(order) };
        let mut bitmap =
            RoaringTreemap::from_sorted_iter(sorted.iter().copied()).expect("sorted, distinct");
        bitmap.optimize();
        if (bitmap.serialized_size() as u64) < 8 * sorted.len() as u64 {
            Ok(RowSet::Roaring {
                ids: bitmap,
                positions,
            })
        } else {
            Ok(RowSet::Sorted {
                ids: sorted,
                positions,
            })
        }
    }

    /// Number of rows.
    pub fn len(&self) -> u64 {
        match self {
            RowSet::Dense { count, .. } => *count,
            RowSet::Roaring { ids, .. } => ids.len(),
            RowSet::Sorted { ids, .. } => ids.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of row `id` in the file, if the file holds it.
    pub fn position_of(&self, id: u64) -> Option<u64> {
        let (rank, positions) = match self {
            RowSet::Dense { start, count } => {
                return (id >= *start && id - start < *count).then(|| id - start)
            }
            RowSet::Roaring { ids, positions } => {
                if !ids.contains(id) {
                    return None;
                }
                (ids.rank(id) - 1, positions)
            }
            RowSet::Sorted { ids, positions } => (ids.binary_search(&id).ok()? as u64, positions),
        };
        match positions {
            None => Some(rank),
            Some(p) => p.get(rank as usize).map(|&x| x as u64),
        }
    }

    /// Bytes of the encoded summary (what "smallest" compares).
    pub fn encoded_len(&self) -> usize {
        self.encode().len()
    }

    /// `tag u8 | body`: 0 dense (`start u64, count u64`), 1 roaring (`len u32, bitmap,
    /// perm`), 2 sorted (`n u32, ids u64×n, perm`); `perm` = `u8 0` or `u8 1, u32×n`. LE.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let perm = |out: &mut Vec<u8>, p: &Option<Vec<u32>>| match p {
            None => out.push(0),
            Some(p) => {
                out.push(1);
                p.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
            }
        };
        match self {
            RowSet::Dense { start, count } => {
                out.push(0);
                out.extend_from_slice(&start.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
            }
            RowSet::Roaring { ids, positions } => {
                out.push(1);
                out.extend_from_slice(&(ids.serialized_size() as u32).to_le_bytes());
                ids.serialize_into(&mut out).expect("writing to a Vec");
                perm(&mut out, positions);
            }
            RowSet::Sorted { ids, positions } => {
                out.push(2);
                out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
                ids.iter()
                    .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
                perm(&mut out, positions);
            }
        }
        out
    }

    /// Decodes and validates an encoded summary (never panics; allocation bounded by the
    /// input's length).
    pub fn decode(b: &[u8]) -> Result<RowSet, RowSetError> {
        let corrupt = RowSetError::Corrupt;
        let take = |pos: &mut usize, n: usize| -> Result<&[u8], RowSetError> {
            let end = pos
                .checked_add(n)
                .filter(|e| *e <= b.len())
                .ok_or(corrupt("truncated"))?;
            let s = &b[*pos..end];
            *pos = end;
            Ok(s)
        };
        let u32_at = |pos: &mut usize| -> Result<u32, RowSetError> {
            Ok(u32::from_le_bytes(take(pos, 4)?.try_into().expect("4")))
        };
        let u64_at = |pos: &mut usize| -> Result<u64, RowSetError> {
            Ok(u64::from_le_bytes(take(pos, 8)?.try_into().expect("8")))
        };
        let mut pos = 1usize;
        let set = match b.first().ok_or(corrupt("empty"))? {
            0 => {
                let (start, count) = (u64_at(&mut pos)?, u64_at(&mut pos)?);
                start
                    .checked_add(count)
                    .ok_or(corrupt("dense range overflows"))?;
                RowSet::Dense { start, count }
            }
            1 => {
                let len = u32_at(&mut pos)? as usize;
                let ids = RoaringTreemap::deserialize_from(take(&mut pos, len)?)
                    .map_err(|_| corrupt("bad roaring bitmap"))?;
                let n = ids.len() as usize;
                let positions = Self::perm(b, &mut pos, n)?;
                RowSet::Roaring { ids, positions }
            }
            2 => {
                let n = u32_at(&mut pos)? as usize;
                let raw = take(&mut pos, n.checked_mul(8).ok_or(corrupt("count"))?)?;
                let ids: Vec<u64> = raw
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
                    .collect();
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(corrupt("ids not strictly ascending"));
                }
                let positions = Self::perm(b, &mut pos, n)?;
                RowSet::Sorted { ids, positions }
            }
            _ => return Err(corrupt("unknown tag")),
        };
        if pos != b.len() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(set)
    }

    fn perm(b: &[u8], pos: &mut usize, n: usize) -> Result<Option<Vec<u32>>, RowSetError> {
        let flag = *b.get(*pos).ok_or(RowSetError::Corrupt("truncated"))?;
        *pos += 1;
        match flag {
            0 => Ok(None),
            1 => {
                let len = n.checked_mul(4).ok_or(RowSetError::Corrupt("count"))?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= b.len())
                    .ok_or(RowSetError::Corrupt("truncated"))?;
                let p: Vec<u32> = b[*pos..end]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
                    .collect();
                *pos = end;
                // A permutation of 0..n.
                let mut seen = vec![false; n];
                for &x in &p {
                    let slot = seen
                        .get_mut(x as usize)
                        .ok_or(RowSetError::Corrupt("position out of range"))?;
                    if std::mem::replace(slot, true) {
                        return Err(RowSetError::Corrupt("position repeated"));
                    }
                }
                Ok(Some(p))
            }
            _ => Err(RowSetError::Corrupt("bad permutation flag")),
        }
    }
}

/// Row ids a data file carries explicitly — an Iceberg v3 file whose `_row_id` column keeps
/// the ids of rows a compaction moved — as runs `(position, first id, count)`: rows
/// `position .. position + count` have ids `first id .. first id + count`. Runs ascend by
/// position and do not overlap; positions no run covers have no known id. Ids are distinct
/// within the file ([`IdRuns::validate`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct IdRuns(pub Vec<(u64, u64, u64)>);

impl IdRuns {
    /// The runs of a file whose row at position `p` has id `ids[p]` (`None`: no id).
    /// Errors: an id twice.
    pub fn from_ids(ids: impl IntoIterator<Item = Option<u64>>) -> Result<IdRuns, RowSetError> {
        let mut runs = IdRuns::default();
        for (p, id) in ids.into_iter().enumerate() {
            if let Some(id) = id {
                runs.push(p as u64, id);
            }
        }
        runs.check_distinct()?;
        Ok(runs)
    }

    /// Appends the row at `position` (past every position pushed before) with id `id`;
    /// [`IdRuns::validate`] checks the result.
    pub fn push(&mut self, position: u64, id: u64) {
        match self.0.last_mut() {
            Some((rp, rid, n))
                if rp.checked_add(*n) == Some(position) && rid.checked_add(*n) == Some(id) =>
            {
                *n += 1
            }
            _ => self.0.push((position, id, 1)),
        }
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Some(start)` when the runs are the one dense range `start ..` over all `rows`.
    pub fn dense(&self, rows: u64) -> Option<u64> {
        match self.0[..] {
            [(0, start, n)] if n == rows => Some(start),
            [] if rows == 0 => Some(0),
            _ => None,
        }
    }

    /// Checks the runs against a file of `rows` rows: non-empty runs ascending by position,
    /// inside the file, ids within `i64` and distinct.
    pub fn validate(&self, rows: u64) -> Result<(), RowSetError> {
        let corrupt = RowSetError::Corrupt;
        let mut end = 0u64;
        for &(p, id, n) in &self.0 {
            if n == 0 {
                return Err(corrupt("empty run"));
            }
            if p < end {
                return Err(corrupt("runs overlap or are out of order"));
            }
            end = p.checked_add(n).ok_or(corrupt("run past the file"))?;
            if end > rows {
                return Err(corrupt("run past the file"));
            }
            if id.checked_add(n).is_none_or(|e| e > i64::MAX as u64) {
                return Err(corrupt("row ids overflow"));
            }
        }
        self.check_distinct()
    }

    fn check_distinct(&self) -> Result<(), RowSetError> {
        let by_id = self.by_id();
        for w in by_id.0.windows(2) {
            if w[0].1.saturating_add(w[0].2) > w[1].1 {
                return Err(RowSetError::Duplicate(w[1].1));
            }
        }
        Ok(())
    }

    /// The id of the row at `position`.
    pub fn id_at(&self, position: u64) -> Option<u64> {
        let i = self.0.partition_point(|r| r.0 <= position).checked_sub(1)?;
        let (p, id, n) = self.0[i];
        // Checked: an unvalidated (hostile) run must not overflow.
        (position - p < n)
            .then(|| id.checked_add(position - p))
            .flatten()
    }

    /// The runs ordered by id, to find positions of ids ([`IdIndex::position_of`]).
    pub fn by_id(&self) -> IdIndex {
        let mut v = self.0.clone();
        v.sort_unstable_by_key(|r| r.1);
        IdIndex(v)
    }
}

/// [`IdRuns`] ordered by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdIndex(Vec<(u64, u64, u64)>);

impl IdIndex {
    pub fn position_of(&self, id: u64) -> Option<u64> {
        let i = self.0.partition_point(|r| r.1 <= id).checked_sub(1)?;
        let (p, first, n) = self.0[i];
        (id - first < n)
            .then(|| p.checked_add(id - first))
            .flatten()
    }
}

/// A file's row-id summary, whichever shape it has.
pub trait PositionOf {
    /// The position of row `id` in the file, if the file holds it.
    fn position_of(&self, id: u64) -> Option<u64>;
}

impl PositionOf for RowSet {
    fn position_of(&self, id: u64) -> Option<u64> {
        RowSet::position_of(self, id)
    }
}

impl PositionOf for IdIndex {
    fn position_of(&self, id: u64) -> Option<u64> {
        IdIndex::position_of(self, id)
    }
}

/// Where requested row ids are in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// Exactly these (id, position) pairs, in requested-id order.
    Exact(Vec<(u64, u64)>),
    /// The file has no usable summary: every requested id may be in it.
    Candidates(Vec<u64>),
}

/// Intersects `requested` ids (deduplicated, ascending) with every file's summary.
pub fn locate(files: &[Option<&dyn PositionOf>], requested: &[u64]) -> Vec<Located> {
    let mut ids = requested.to_vec();
    ids.sort_unstable();
    ids.dedup();
    files
        .iter()
        .map(|s| match s {
            None => Located::Candidates(ids.clone()),
            Some(s) => Located::Exact(
                ids.iter()
                    .filter_map(|&id| s.position_of(id).map(|p| (id, p)))
                    .collect(),
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ids: &[u64]) -> RowSet {
        let s = RowSet::from_ids(ids).unwrap();
        for (pos, &id) in ids.iter().enumerate() {
            assert_eq!(s.position_of(id), Some(pos as u64), "{s:?} id {id}");
        }
        assert_eq!(s.len(), ids.len() as u64);
        assert_eq!(RowSet::decode(&s.encode()).unwrap(), s);
        s
    }

    #[test]
    fn chooses_the_smallest_exact_shape() {
        assert!(matches!(
            check(&(100..1100).collect::<Vec<_>>()),
            RowSet::Dense {
                start: 100,
                count: 1000
            }
        ));
        // Runs with gaps: Roaring beats 8 bytes per id.
        let runs: Vec<u64> = (0..50).flat_map(|r| r * 10_000..r * 10_000 + 200).collect();
        assert!(matches!(
            check(&runs),
            RowSet::Roaring {
                positions: None,
                ..
            }
        ));
        // Widely scattered ids: the sorted vector is smaller.
        let scattered: Vec<u64> = (0..200u64).map(|i| i * 0x1_0000_0001_u64).collect();
        assert!(matches!(
            check(&scattered),
            RowSet::Sorted {
                positions: None,
                ..
            }
        ));
        // Contiguous but permuted: not dense (positions would be wrong) — a set + permutation.
        let mut perm: Vec<u64> = (0..500).collect();
        perm.reverse();
        let s = check(&perm);
        assert!(matches!(
            s,
            RowSet::Roaring {
                positions: Some(_),
                ..
            } | RowSet::Sorted {
                positions: Some(_),
                ..
            }
        ));
        // Ids not in the file.
        assert_eq!(s.position_of(500), None);
        assert_eq!(RowSet::from_ids(&[3, 1, 3]), Err(RowSetError::Duplicate(3)));
    }

    #[test]
    fn random_permutations_locate_exactly() {
        let mut seed = 0x243F6A8885A308D3u64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..200 {
            let n = (rnd() % 300) as usize;
            let base = rnd() % 1_000_000;
            let mut ids: Vec<u64> = (0..n as u64)
                .map(|i| base + i * (1 + case % 3) + (rnd() % 2) * (case % 5))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if case % 2 == 0 {
                for i in (1..ids.len()).rev() {
                    let j = (rnd() % (i as u64 + 1)) as usize;
                    ids.swap(i, j);
                }
            }
            let s = check(&ids);
            let probe: Vec<u64> = (0..50)
                .map(|_| base + rnd() % (4 * n as u64 + 10))
                .collect();
            let Located::Exact(found) = &locate(&[Some(&s as &dyn PositionOf)], &probe)[0] else {
                panic!()
            };
            for &(id, pos) in found {
                assert_eq!(ids[pos as usize], id);
            }
            let expect = probe
                .iter()
                .filter(|id| ids.contains(id))
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            assert_eq!(found.len(), expect);
        }
    }

    #[test]
    fn a_missing_summary_keeps_every_id_a_candidate() {
        let s = RowSet::Dense {
            start: 10,
            count: 5,
        };
        let got = locate(&[Some(&s as &dyn PositionOf), None], &[12, 99, 12]);
        assert_eq!(
            got,
            vec![
                Located::Exact(vec![(12, 2)]),
                Located::Candidates(vec![12, 99])
            ]
        );
    }

    #[test]
    fn hostile_encodings_are_typed_errors() {
        let good = RowSet::from_ids(&[5, 1, 9, 3]).unwrap().encode();
        for cut in 0..good.len() {
            assert!(RowSet::decode(&good[..cut]).is_err());
        }
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] = 200; // a position out of range
        assert!(RowSet::decode(&bad).is_err());
        assert!(
            RowSet::decode(&[2, 0xFF, 0xFF, 0xFF, 0xFF]).is_err(),
            "a huge count with no bytes"
        );
        assert!(
            RowSet::decode(&[0, 255, 255, 255, 255, 255, 255, 255, 255, 2, 0, 0, 0, 0, 0, 0, 0])
                .is_err(),
            "overflowing dense range"
        );
        let mut seed = 7u64;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 33) as u8
                })
                .collect();
            let _ = RowSet::decode(&bytes);
        }
    }

    #[test]
    fn id_runs_round_trip_ids_both_ways() {
        // A compaction of two files (ids 100.. and 500..) minus deleted rows, plus new rows
        // without ids, then new rows with inherited ids.
        let mut ids: Vec<Option<u64>> = Vec::new();
        ids.extend((100..110).filter(|i| i % 4 != 0).map(Some));
        ids.extend((500..505).map(Some));
        ids.extend([None, None]);
        ids.extend((900..903).map(Some));
        let runs = IdRuns::from_ids(ids.clone()).unwrap();
        runs.validate(ids.len() as u64).unwrap();
        let index = runs.by_id();
        for (p, id) in ids.iter().enumerate() {
            assert_eq!(runs.id_at(p as u64), *id, "position {p}");
            if let Some(id) = id {
                assert_eq!(index.position_of(*id), Some(p as u64), "id {id}");
            }
        }
        for missing in [0, 99, 100, 104, 110, 499, 505, 899, 903, u64::MAX] {
            assert_eq!(index.position_of(missing), None, "id {missing}");
        }
        assert_eq!(runs.id_at(ids.len() as u64), None);
        assert_eq!(runs.dense(ids.len() as u64), None);
        let json = serde_json::to_string(&runs).unwrap();
        assert_eq!(serde_json::from_str::<IdRuns>(&json).unwrap(), runs);
        let dense = IdRuns::from_ids((7..17).map(Some)).unwrap();
        assert_eq!((dense.len(), dense.dense(10)), (1, Some(7)));
        assert_eq!(dense.dense(11), None);
    }

    #[test]
    fn id_runs_refuse_duplicates_and_bad_shapes() {
        assert_eq!(
            IdRuns::from_ids([Some(5), Some(6), Some(1), Some(6)]),
            Err(RowSetError::Duplicate(6))
        );
        let bad = |runs: Vec<(u64, u64, u64)>, rows: u64| IdRuns(runs).validate(rows).is_err();
        assert!(bad(vec![(0, 0, 0)], 5), "empty run");
        assert!(bad(vec![(0, 0, 3), (2, 10, 1)], 5), "overlap");
        assert!(bad(vec![(3, 0, 1), (0, 10, 1)], 5), "out of order");
        assert!(bad(vec![(4, 0, 2)], 5), "past the file");
        assert!(bad(vec![(0, u64::MAX - 1, 1)], 5), "overflow");
        assert!(bad(vec![(0, 0, 3), (3, 2, 1)], 5), "an id twice");
        assert!(!bad(vec![(0, 0, 3), (3, 3, 1)], 5));
        assert!(!bad(vec![(0, 10, 1), (1, 0, 2)], 5));
    }
}
