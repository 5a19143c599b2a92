//! The predicates of [`crate::read::plan`] queries: an AND of conditions (`=`, IN, `<`, `<=`,
//! `>`, `>=`, BETWEEN, IS NULL) on a table's columns.
//!
//! Semantics are SQL's under `WHERE`: a comparison with NULL is unknown and never matches
//! (`= NULL`, `IN (NULL)`, `< NULL` match nothing; IS NULL is the only way to ask for NULLs);
//! values compare in the order of `docs/key-encoding.md` (`-0.0 = +0.0`, NaN greatest and
//! equal to itself, strings and binary by bytes). A predicate is bound to a table first
//! ([`Predicate::bind`]): columns are resolved to field ids and every value is coerced to its
//! column's type, so evaluation compares values of one variant.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::formats::manifest::TableManifest;
use crate::values::{value_cmp, KeyColumn, KeySchema, KeyType, Value};

/// One comparison of a column with constants.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Eq(Value),
    In(Vec<Value>),
    Lt(Value),
    Le(Value),
    Gt(Value),
    Ge(Value),
    /// `low <= column <= high`.
    Between(Value, Value),
    IsNull,
}

/// `column op`; a query's conditions are ANDed.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub column: String,
    pub op: Op,
}

impl Condition {
    pub fn new(column: impl Into<String>, op: Op) -> Condition {
        Condition {
            column: column.into(),
            op,
        }
    }
}

/// Most values one IN list may hold (a bound on what one query allocates).
pub const MAX_IN_VALUES: usize = 65_536;

/// The conditions on one column, coerced to its type.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnPredicate {
    pub field_id: i32,
    pub name: String,
    pub ty: KeyType,
    pub ops: Vec<Op>,
}

/// A predicate bound to a table: one entry per constrained column, in first-mention order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Predicate {
    pub columns: Vec<ColumnPredicate>,
}

impl Predicate {
    /// Resolves `conditions` against `t`'s columns and coerces their values. Unknown columns
    /// are `E_NOT_FOUND`, columns that cannot be compared (lists, structs) `E_UNSUPPORTED`,
    /// values that do not convert to the column's type `E_KEY`, IN lists over
    /// [`MAX_IN_VALUES`] `E_LIMIT`.
    pub fn bind(t: &TableManifest, conditions: &[Condition]) -> Result<Predicate> {
        let mut out = Predicate::default();
        for c in conditions {
            let field = t
                .fields
                .iter()
                .find(|f| f.name == c.column)
                .ok_or_else(|| Error::NotFound {
                    kind: "column",
                    name: format!("{}.{}", t.name, c.column),
                })?;
            let ty = field.key_type.ok_or_else(|| {
                Error::Unsupported(format!(
                    "column {} of type {} cannot be compared",
                    field.name, field.data_type
                ))
            })?;
            let schema = KeySchema::new(vec![KeyColumn::new(ty)])?;
            let one = |v: Value| -> Result<Value> {
                if v.is_null() {
                    return Ok(Value::Null);
                }
                Ok(schema.coerce(vec![v])?.remove(0))
            };
            let op = match &c.op {
                Op::Eq(v) => Op::Eq(one(v.clone())?),
                Op::In(vs) => {
                    if vs.len() > MAX_IN_VALUES {
                        return Err(Error::Limit {
                            what: "IN list values",
                            count: vs.len() as u64,
                            limit: MAX_IN_VALUES as u64,
                            remedy: "split the list over several queries",
                        });
                    }
                    Op::In(vs.iter().cloned().map(one).collect::<Result<_>>()?)
                }
                Op::Lt(v) => Op::Lt(one(v.clone())?),
                Op::Le(v) => Op::Le(one(v.clone())?),
                Op::Gt(v) => Op::Gt(one(v.clone())?),
                Op::Ge(v) => Op::Ge(one(v.clone())?),
                Op::Between(a, b) => Op::Between(one(a.clone())?, one(b.clone())?),
                Op::IsNull => Op::IsNull,
            };
            match out
                .columns
                .iter_mut()
                .find(|p| p.field_id == field.field_id)
            {
                Some(p) => p.ops.push(op),
                None => out.columns.push(ColumnPredicate {
                    field_id: field.field_id,
                    name: field.name.clone(),
                    ty,
                    ops: vec![op],
                }),
            }
        }
        Ok(out)
    }

    pub fn field_ids(&self) -> Vec<i32> {
        self.columns.iter().map(|c| c.field_id).collect()
    }

    /// Does a row match? `values[i]` is the value of `self.columns[i]`.
    pub fn matches(&self, values: &[Value]) -> bool {
        self.columns.iter().zip(values).all(|(c, v)| c.matches(v))
    }
}

fn cmp(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    value_cmp(a, b)
}

/// Does `v` satisfy `op` (SQL: unknown is false)?
pub fn op_matches(op: &Op, v: &Value) -> bool {
    use Ordering::*;
    match op {
        Op::IsNull => v.is_null(),
        Op::Eq(x) => cmp(v, x) == Some(Equal),
        Op::In(xs) => xs.iter().any(|x| cmp(v, x) == Some(Equal)),
        Op::Lt(x) => cmp(v, x) == Some(Less),
        Op::Le(x) => matches!(cmp(v, x), Some(Less | Equal)),
        Op::Gt(x) => cmp(v, x) == Some(Greater),
        Op::Ge(x) => matches!(cmp(v, x), Some(Greater | Equal)),
        Op::Between(a, b) => {
            matches!(cmp(v, a), Some(Greater | Equal)) && matches!(cmp(v, b), Some(Less | Equal))
        }
    }
}

impl ColumnPredicate {
    /// Does `v` satisfy every condition on this column?
    pub fn matches(&self, v: &Value) -> bool {
        self.ops.iter().all(|op| op_matches(op, v))
    }

    /// The values this column is fixed to by equality, when it is: `IS NULL` → `[NULL]`;
    /// `=` / IN → the listed values that satisfy every condition on the column (deduplicated;
    /// empty when they contradict). `None` when no equality constrains it.
    pub fn fixed(&self) -> Option<Vec<Value>> {
        if self.ops.iter().any(|o| matches!(o, Op::IsNull)) {
            return Some(if self.matches(&Value::Null) {
                vec![Value::Null]
            } else {
                vec![]
            });
        }
        let first = self.ops.iter().find_map(|o| match o {
            Op::Eq(v) => Some(vec![v.clone()]),
            Op::In(vs) => Some(vs.clone()),
            _ => None,
        })?;
        let mut out: Vec<Value> = first.into_iter().filter(|v| self.matches(v)).collect();
        out.sort_by(|a, b| value_cmp(a, b).unwrap_or(Ordering::Equal));
        out.dedup_by(|a, b| value_cmp(a, b) == Some(Ordering::Equal));
        Some(out)
    }

    /// The tightest `[lower, upper]` the range conditions allow, or `None` when the column
    /// has no range condition. Exclusivity is kept; the bounds never admit NULL.
    pub fn bounds(&self) -> Option<(Bound<Value>, Bound<Value>)> {
        let (mut lo, mut hi): (Bound<Value>, Bound<Value>) = (Bound::Unbounded, Bound::Unbounded);
        let mut any = false;
        let tighter_lo = |cur: &Bound<Value>, new: &Bound<Value>| -> bool {
            match (cur, new) {
                (Bound::Unbounded, _) => true,
                (_, Bound::Unbounded) => false,
                (
                    Bound::Included(a) | Bound::Excluded(a),
                    Bound::Included(b) | Bound::Excluded(b),
                ) => match value_cmp(b, a) {
                    Some(Ordering::Greater) => true,
                    Some(Ordering::Equal) => matches!(new, Bound::Excluded(_)),
                    _ => false,
                },
            }
        };
        let tighter_hi = |cur: &Bound<Value>, new: &Bound<Value>| -> bool {
            match (cur, new) {
                (Bound::Unbounded, _) => true,
                (_, Bound::Unbounded) => false,
                (
                    Bound::Included(a) | Bound::Excluded(a),
                    Bound::Included(b) | Bound::Excluded(b),
                ) => match value_cmp(b, a) {
                    Some(Ordering::Less) => true,
                    Some(Ordering::Equal) => matches!(new, Bound::Excluded(_)),
                    _ => false,
                },
            }
        };
        for op in &self.ops {
            let (l, h) = match op {
                Op::Lt(v) => (None, Some(Bound::Excluded(v.clone()))),
                Op::Le(v) => (None, Some(Bound::Included(v.clone()))),
                Op::Gt(v) => (Some(Bound::Excluded(v.clone())), None),
                Op::Ge(v) => (Some(Bound::Included(v.clone())), None),
                Op::Between(a, b) => (
                    Some(Bound::Included(a.clone())),
                    Some(Bound::Included(b.clone())),
                ),
                _ => continue,
            };
            any = true;
            for (new, cur, tighter) in [(l, &mut lo, true), (h, &mut hi, false)] {
                if let Some(new) = new {
                    // A NULL bound compares with nothing and is skipped here: the bounds
                    // stay a superset, and evaluation (which rejects every row) is exact.
                    let t = if tighter {
                        tighter_lo(cur, &new)
                    } else {
                        tighter_hi(cur, &new)
                    };
                    if t {
                        *cur = new;
                    }
                }
            }
        }
        any.then_some((lo, hi))
    }

    /// May a group of rows (a row group or a page) whose non-NULL values lie in
    /// `[min, max]` (`Value::Null` = unknown) with `nulls` NULLs (`None` = unknown) of `rows`
    /// hold a match? `false` only when statistics prove none can. Float columns are never
    /// pruned by value (writers leave NaN out of min/max; NaN sorts greatest here).
    pub fn may_match(&self, min: &Value, max: &Value, nulls: Option<u64>, rows: u64) -> bool {
        let all_null = nulls == Some(rows) && rows > 0;
        let float = matches!(self.ty, KeyType::Float32 | KeyType::Float64);
        self.ops.iter().all(|op| {
            if matches!(op, Op::IsNull) {
                return nulls != Some(0);
            }
            if all_null {
                return false;
            }
            if float || min.is_null() || max.is_null() {
                return true;
            }
            use Ordering::*;
            let c = |a: &Value, b: &Value| value_cmp(a, b);
            // `None` from a type mismatch means "cannot tell": keep.
            let within = |v: &Value| {
                !(matches!(c(v, min), Some(Less)) || matches!(c(v, max), Some(Greater)))
            };
            match op {
                Op::Eq(v) => v.is_null() || within(v),
                Op::In(vs) => vs.iter().any(|v| !v.is_null() && within(v)),
                Op::Lt(v) => !matches!(c(min, v), Some(Greater | Equal)),
                Op::Le(v) => !matches!(c(min, v), Some(Greater)),
                Op::Gt(v) => !matches!(c(max, v), Some(Less | Equal)),
                Op::Ge(v) => !matches!(c(max, v), Some(Less)),
                Op::Between(a, b) => {
                    !matches!(c(max, a), Some(Less)) && !matches!(c(min, b), Some(Greater))
                }
                Op::IsNull => unreachable!("handled above"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(ops: Vec<Op>) -> ColumnPredicate {
        ColumnPredicate {
            field_id: 1,
            name: "a".into(),
            ty: KeyType::Int64,
            ops,
        }
    }

    #[test]
    fn coerced_values_take_the_decoded_variant() {
        let one = |ty, v| {
            KeySchema::new(vec![KeyColumn::new(ty)])
                .unwrap()
                .coerce(vec![v])
        };
        // JavaScript bigints arrive as UInt (positive) or Int: a signed column decodes Int.
        assert_eq!(
            one(KeyType::Int64, Value::UInt(5)).unwrap(),
            vec![Value::Int(5)]
        );
        assert_eq!(
            one(KeyType::UInt64, Value::Int(5)).unwrap(),
            vec![Value::UInt(5)]
        );
        assert!(one(KeyType::UInt64, Value::Int(-5)).is_err());
        assert!(one(KeyType::Int64, Value::UInt(u64::MAX)).is_err());
        assert_eq!(
            one(KeyType::Timestamp, Value::UInt(7)).unwrap(),
            vec![Value::Timestamp(7)]
        );
        assert_eq!(
            one(KeyType::Float32, Value::Int(3)).unwrap(),
            vec![Value::Float32(3.0)]
        );
        let c = col(vec![Op::Eq(
            one(KeyType::Int64, Value::UInt(9)).unwrap().remove(0),
        )]);
        assert!(c.matches(&Value::Int(9)));
    }

    #[test]
    fn null_never_compares() {
        for op in [
            Op::Eq(Value::Int(1)),
            Op::In(vec![Value::Int(1)]),
            Op::Lt(Value::Int(1)),
            Op::Ge(Value::Int(1)),
            Op::Between(Value::Int(0), Value::Int(9)),
        ] {
            assert!(!op_matches(&op, &Value::Null), "{op:?}");
        }
        assert!(!op_matches(&Op::Eq(Value::Null), &Value::Null));
        assert!(op_matches(&Op::IsNull, &Value::Null));
        assert!(!op_matches(&Op::IsNull, &Value::Int(0)));
    }

    #[test]
    fn fixed_values_intersect_and_respect_ranges() {
        let c = col(vec![
            Op::In(vec![
                Value::Int(5),
                Value::Int(1),
                Value::Int(5),
                Value::Int(9),
            ]),
            Op::Lt(Value::Int(9)),
        ]);
        assert_eq!(c.fixed(), Some(vec![Value::Int(1), Value::Int(5)]));
        let c = col(vec![Op::Eq(Value::Int(1)), Op::Eq(Value::Int(2))]);
        assert_eq!(c.fixed(), Some(vec![]));
        assert_eq!(col(vec![Op::IsNull]).fixed(), Some(vec![Value::Null]));
        assert_eq!(col(vec![Op::Gt(Value::Int(1))]).fixed(), None);
    }

    #[test]
    fn bounds_keep_the_tightest() {
        let c = col(vec![
            Op::Gt(Value::Int(1)),
            Op::Ge(Value::Int(3)),
            Op::Between(Value::Int(0), Value::Int(10)),
            Op::Lt(Value::Int(10)),
        ]);
        assert_eq!(
            c.bounds(),
            Some((
                Bound::Included(Value::Int(3)),
                Bound::Excluded(Value::Int(10))
            ))
        );
        assert_eq!(col(vec![Op::Eq(Value::Int(1))]).bounds(), None);
    }

    #[test]
    fn statistics_prune_only_what_cannot_match() {
        let (lo, hi) = (Value::Int(10), Value::Int(20));
        let may = |ops: Vec<Op>, nulls: Option<u64>| col(ops).may_match(&lo, &hi, nulls, 100);
        assert!(!may(vec![Op::Eq(Value::Int(9))], Some(0)));
        assert!(may(vec![Op::Eq(Value::Int(10))], Some(0)));
        assert!(!may(vec![Op::Lt(Value::Int(10))], Some(0)));
        assert!(may(vec![Op::Le(Value::Int(10))], Some(0)));
        assert!(!may(vec![Op::Gt(Value::Int(20))], Some(0)));
        assert!(may(vec![Op::Ge(Value::Int(20))], Some(0)));
        assert!(!may(
            vec![Op::In(vec![Value::Int(1), Value::Int(21)])],
            Some(0)
        ));
        assert!(!may(vec![Op::IsNull], Some(0)));
        assert!(
            may(vec![Op::IsNull], None),
            "unknown null count keeps the group"
        );
        assert!(!col(vec![Op::Eq(Value::Int(1))]).may_match(
            &Value::Null,
            &Value::Null,
            Some(100),
            100
        ));
        assert!(col(vec![Op::Eq(Value::Int(1))]).may_match(&Value::Null, &Value::Null, None, 100));
        // Floats are never pruned by value.
        let f = ColumnPredicate {
            ty: KeyType::Float64,
            ..col(vec![Op::Gt(Value::Float64(5.0))])
        };
        assert!(f.may_match(&Value::Float64(0.0), &Value::Float64(1.0), Some(0), 100));
    }
}

/// The exact condition of one predicate column on a key of its one-column index: the plan's
/// ranges are a superset (exclusive bounds widen), so each key is checked.
pub(crate) fn column_keep<'a>(
    ix: &'a crate::formats::manifest::IndexManifest,
    cp: &'a ColumnPredicate,
) -> impl Fn(&[u8]) -> std::result::Result<bool, String> + Send + Sync + 'a {
    move |k: &[u8]| {
        ix.key
            .decode(k)
            .map(|v| cp.matches(&v[0]))
            .map_err(|e| e.to_string())
    }
}
