//! Range planning over an ordered key encoding: SQL row-comparison bounds and IS NULL prefixes
//! turned into one byte range of an index plus the exact filter for the keys in it.

use std::cmp::Ordering;

use crate::values::*;

/// Why a range or IS NULL request cannot be served from an ordered index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("a bound has {found} values but the index has {columns} columns")]
    TooLong { found: usize, columns: usize },
    #[error("the bounds span columns {from}..{to} of mixed directions: no single byte range of the index holds that tuple window; constrain the leading columns by equality and range only the next one")]
    MixedDirections { from: usize, to: usize },
    #[error("a range bound cannot hold NULL (comparisons with NULL are unknown); ask IS NULL with nulls()")]
    NullBound,
    #[error(
        "IS NULL needs a leading run of `= value` / `IS NULL` columns with at least one IS NULL"
    )]
    NoNullInPrefix,
    #[error("column {column} is unconstrained but a later column is constrained: a gap is not a prefix of the index")]
    Gap { column: usize },
    #[error(transparent)]
    Key(#[from] KeyError),
}

use crate::index::blob::prefix_end;
pub use crate::index::blob::ByteRange;

/// The exact predicate of a range, evaluated on decoded key values.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeFilter {
    pub lower: ValueBound,
    pub upper: ValueBound,
    /// A column that must not be NULL (the range column: comparisons never match NULL).
    pub non_null: Option<usize>,
}

/// SQL row comparison of the leading `b.len()` values of `t` with `b`; `None` when a NULL
/// decides it (unknown).
fn row_cmp(t: &[Value], b: &[Value]) -> Option<Ordering> {
    for (x, y) in t.iter().zip(b) {
        if x.is_null() {
            return None;
        }
        match value_cmp(x, y)? {
            Ordering::Equal => continue,
            o => return Some(o),
        }
    }
    Some(Ordering::Equal)
}

impl RangeFilter {
    pub fn matches(&self, t: &[Value]) -> bool {
        let lower = match &self.lower {
            ValueBound::Unbounded => true,
            ValueBound::Included(b) => {
                matches!(row_cmp(t, b), Some(Ordering::Greater | Ordering::Equal))
            }
            ValueBound::Excluded(b) => matches!(row_cmp(t, b), Some(Ordering::Greater)),
        };
        let upper = match &self.upper {
            ValueBound::Unbounded => true,
            ValueBound::Included(b) => {
                matches!(row_cmp(t, b), Some(Ordering::Less | Ordering::Equal))
            }
            ValueBound::Excluded(b) => matches!(row_cmp(t, b), Some(Ordering::Less)),
        };
        lower
            && upper
            && self
                .non_null
                .is_none_or(|c| t.get(c).is_some_and(|v| !v.is_null()))
    }
}

/// How to serve a range: a byte range holding every match (`None`: nothing can match) and
/// the exact filter for the keys in it.
#[derive(Clone, Debug, PartialEq)]
pub struct RangePlan {
    pub bytes: Option<ByteRange>,
    pub filter: RangeFilter,
}

impl KeySchema {
    /// Plans `lower ≤ key ≤ upper` (each bound a leading tuple, SQL row comparison). The
    /// values both bounds share are an equality prefix; the next column is the range
    /// column, and open sides stop at its NULLs (comparisons never match NULL; IS NULL is
    /// [`KeySchema::nulls_range`]). A tuple window — bounds that go on past the range column —
    /// is served only when all its columns share one direction, else
    /// [`RangeError::MixedDirections`]: it would not be one byte range.
    pub fn plan_range(
        &self,
        lower: ValueBound,
        upper: ValueBound,
    ) -> Result<RangePlan, RangeError> {
        let n = self.columns.len();
        let (l, u) = (lower.values(), upper.values());
        for v in [l, u] {
            if v.len() > n {
                return Err(RangeError::TooLong {
                    found: v.len(),
                    columns: n,
                });
            }
        }
        let both = lower.is_bounded() && upper.is_bounded();
        let p = if both {
            l.iter().zip(u).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        let deepest = l.len().max(u.len());
        if deepest > p + 1 {
            let d = self.columns[p].direction;
            if self.columns[p..deepest].iter().any(|c| c.direction != d) {
                return Err(RangeError::MixedDirections {
                    from: p,
                    to: deepest - 1,
                });
            }
        }
        let non_null = if p < deepest {
            Some(p)
        } else if !lower.is_bounded() && !upper.is_bounded() {
            Some(0).filter(|_| n > 0)
        } else {
            None
        };
        if l.iter().chain(u).any(Value::is_null) {
            return Err(RangeError::NullBound);
        }
        let filter = RangeFilter {
            lower: lower.clone(),
            upper: upper.clone(),
            non_null,
        };
        let prefix = self.encode_prefix(&l[..p.min(l.len())])?;
        if p == deepest && both {
            // Pure equality on the leading p columns.
            let strict = matches!(lower, ValueBound::Excluded(_))
                || matches!(upper, ValueBound::Excluded(_));
            let bytes = if strict {
                None
            } else {
                Some(ByteRange::prefix(prefix))
            };
            return Ok(RangePlan { bytes, filter });
        }
        let desc = self
            .columns
            .get(p)
            .is_some_and(|c| c.direction == Direction::Desc);
        let (first, last) = if desc {
            (&upper, &lower)
        } else {
            (&lower, &upper)
        };
        let start = if first.is_bounded() {
            self.encode_prefix(first.values())?
        } else {
            prefix.clone()
        };
        let end = if last.is_bounded() {
            prefix_end(&self.encode_prefix(last.values())?)
        } else {
            prefix_end(&prefix)
        };
        if end.as_ref().is_some_and(|e| start >= *e) {
            return Ok(RangePlan {
                bytes: None,
                filter,
            });
        }
        Ok(RangePlan {
            bytes: Some(ByteRange { start, end }),
            filter,
        })
    }

    /// The range column of `lower ≤ key ≤ upper`: the first column after the values both
    /// bounds share (`None` when the bounds fix every column they name).
    pub fn range_column(&self, lower: &ValueBound, upper: &ValueBound) -> Option<usize> {
        let (l, u) = (lower.values(), upper.values());
        let p = if lower.is_bounded() && upper.is_bounded() {
            l.iter().zip(u).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        let deepest = l.len().max(u.len());
        if p < deepest || (!lower.is_bounded() && !upper.is_bounded()) {
            Some(p).filter(|p| *p < self.columns.len())
        } else {
            None
        }
    }

    /// The byte range of `IS NULL` over a leading run of columns: `Some(Value::Null)` is
    /// IS NULL, `Some(v)` is `= v`, `None` is unconstrained — allowed only after the last
    /// constrained column. At least one IS NULL is required. The range is exact.
    pub fn nulls_range(&self, prefix: &[Option<Value>]) -> Result<ByteRange, RangeError> {
        let last = prefix
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        if let Some(column) = prefix[..last].iter().position(Option::is_none) {
            return Err(RangeError::Gap { column });
        }
        if last > self.columns.len() {
            return Err(RangeError::TooLong {
                found: last,
                columns: self.columns.len(),
            });
        }
        let vals: Vec<Value> = prefix[..last].iter().flatten().cloned().collect();
        if !vals.iter().any(Value::is_null) {
            return Err(RangeError::NoNullInPrefix);
        }
        Ok(ByteRange::prefix(self.encode_prefix(&vals)?))
    }
}
