//! Differential test of the ordered-index accessors (lookup, IN, range, IS NULL) against a
//! brute-force evaluation of the same rows: random multi-file tables with NULLs, NaN, ±0.0,
//! NUL bytes, duplicates and composite keys in both directions and NULL placements; one file
//! drifted (answered by scanning) so both paths are compared.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use skerry_core::admin::overlay::{FileSelection, IndexColumn, IndexOptions, OpenOptions, Overlay};
use skerry_core::read::lookup::RowRef;
use skerry_core::values::{value_cmp, KeyColumn, KeySchema, KeyType, Value, ValueBound};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

const COLS: [&str; 3] = ["a", "b", "c"];
const TYPES: [KeyType; 3] = [KeyType::Int32, KeyType::String, KeyType::Float64];

fn random_value(r: &mut Rng, col: usize) -> Value {
    if r.below(6) == 0 {
        return Value::Null;
    }
    match col {
        0 => Value::Int(r.below(7) as i64 - 3),
        1 => Value::String(r.pick(&["", "a", "a\0", "ab", "b", "é"]).to_string()),
        _ => Value::Float64(r.pick(&[f64::NAN, -0.0, 0.0, 1.5, -2.0, f64::INFINITY])),
    }
}

fn rows(r: &mut Rng, n: usize) -> Vec<Vec<Value>> {
    (0..n)
        .map(|_| (0..3).map(|c| random_value(r, c)).collect())
        .collect()
}

fn parquet(rows: &[Vec<Value>]) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
        Field::new("c", DataType::Float64, true),
    ]));
    let a: Int32Array = rows
        .iter()
        .map(|r| {
            if let Value::Int(i) = r[0] {
                Some(i as i32)
            } else {
                None
            }
        })
        .collect();
    let b: StringArray = rows
        .iter()
        .map(|r| {
            if let Value::String(s) = &r[1] {
                Some(s.clone())
            } else {
                None
            }
        })
        .collect();
    let c: Float64Array = rows
        .iter()
        .map(|r| {
            if let Value::Float64(f) = r[2] {
                Some(f)
            } else {
                None
            }
        })
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(a) as ArrayRef, Arc::new(b), Arc::new(c)],
    )
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(40))
        .build();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// SQL row comparison on the leading values; None when a NULL decides.
fn row_cmp(t: &[Value], b: &[Value]) -> Option<Ordering> {
    for (x, y) in t.iter().zip(b) {
        if x.is_null() || y.is_null() {
            return None;
        }
        let o = value_cmp(x, y).unwrap();
        if o != Ordering::Equal {
            return Some(o);
        }
    }
    Some(Ordering::Equal)
}

struct Table {
    files: Vec<(String, Vec<Vec<Value>>)>,
}

impl Table {
    /// Rows (projected to `cols`) that satisfy `pred`, in the index's stored order.
    fn expect(
        &self,
        schema: &KeySchema,
        cols: &[usize],
        pred: impl Fn(&[Value]) -> bool,
    ) -> Vec<RowRef> {
        let mut hits = vec![];
        let mut row_id = 0u64;
        for (fi, (name, rows)) in self.files.iter().enumerate() {
            for (pos, row) in rows.iter().enumerate() {
                let t: Vec<Value> = cols.iter().map(|&c| row[c].clone()).collect();
                if pred(&t) {
                    hits.push((
                        schema.encode(&t).unwrap(),
                        fi,
                        pos as u64,
                        name.clone(),
                        row_id + pos as u64,
                    ));
                }
            }
            row_id += rows.len() as u64;
        }
        hits.sort_by(|x, y| (&x.0, x.1, x.2).cmp(&(&y.0, y.1, y.2)));
        hits.into_iter()
            .map(|(_, _, position, file, id)| RowRef {
                file,
                position,
                row_id: Some(id),
            })
            .collect()
    }
}

fn random_bound(r: &mut Rng, cols: &[usize]) -> ValueBound {
    let len = r.below(cols.len() as u64 + 1) as usize;
    if len == 0 || r.below(4) == 0 {
        return ValueBound::Unbounded;
    }
    let v: Vec<Value> = cols[..len]
        .iter()
        .map(|&c| loop {
            let x = random_value(r, c);
            if !x.is_null() || r.below(8) == 0 {
                break x;
            }
        })
        .collect();
    if r.below(2) == 0 {
        ValueBound::Included(v)
    } else {
        ValueBound::Excluded(v)
    }
}

fn bound_ok(t: &[Value], b: &ValueBound, lower: bool) -> bool {
    match b {
        ValueBound::Unbounded => true,
        ValueBound::Included(v) => match row_cmp(t, v) {
            Some(Ordering::Equal) => true,
            Some(o) => (o == Ordering::Greater) == lower,
            None => false,
        },
        ValueBound::Excluded(v) => {
            matches!(row_cmp(t, v), Some(o) if o != Ordering::Equal && (o == Ordering::Greater) == lower)
        }
    }
}

#[tokio::test]
async fn accessors_match_brute_force() {
    for seed in [
        0x9E3779B97F4A7C15u64,
        0xD1B54A32D192ED03,
        0x8CB92BA72F3D8DD7,
    ] {
        run(seed).await;
    }
}

async fn run(seed: u64) {
    let mut r = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("t");
    std::fs::create_dir_all(&data).unwrap();
    let mut table = Table { files: vec![] };
    for i in 0..4 {
        let n = 120 + r.below(60) as usize;
        let rs = rows(&mut r, n);
        std::fs::write(data.join(format!("f{i}.parquet")), parquet(&rs)).unwrap();
        table.files.push((format!("f{i}.parquet"), rs));
    }
    let mut o = Overlay::open("memory:///", OpenOptions::default())
        .await
        .unwrap();
    o.set_block_bytes(256); // many blocks, runs of equal keys across block boundaries
    let url = format!("file://{}", data.display());
    o.register_parquet_table("t", &url, FileSelection::Prefix(String::new()))
        .await
        .unwrap();

    // Three indexes: random directions and NULL placements.
    let defs: Vec<(String, Vec<usize>)> = vec![
        ("i_ab".into(), vec![0, 1]),
        ("i_c".into(), vec![2]),
        ("i_bac".into(), vec![1, 0, 2]),
    ];
    let mut schemas = vec![];
    for (name, cols) in &defs {
        let spec: Vec<IndexColumn> = cols
            .iter()
            .map(|&c| {
                let mut ic = IndexColumn::from(COLS[c]);
                if r.below(2) == 0 {
                    ic = ic.desc();
                }
                if r.below(2) == 0 {
                    ic = ic.nulls_first();
                }
                ic
            })
            .collect();
        schemas.push(
            KeySchema::new(
                spec.iter()
                    .zip(cols)
                    .map(|(s, &c)| KeyColumn {
                        ty: TYPES[c],
                        direction: s.direction,
                        nulls: s.nulls,
                    })
                    .collect(),
            )
            .unwrap(),
        );
        o.create_index("t", name, &spec, IndexOptions::default())
            .await
            .unwrap();
    }
    o.build("t", |_| {}).await.unwrap();

    // Drift one file: rewritten in place and refreshed, so its indexes are rejected and it
    // is answered by scanning.
    let rs = rows(&mut r, 90);
    std::fs::write(data.join("f2.parquet"), parquet(&rs)).unwrap();
    table.files[2].1 = rs;
    assert_eq!(
        o.refresh("t").await.unwrap().changed,
        vec!["f2.parquet".to_string()]
    );

    let mut checked = [0usize; 4];
    for ((name, cols), schema) in defs.iter().zip(&schemas) {
        for _ in 0..60 {
            // lookup: full key
            let key: Vec<Value> = cols.iter().map(|&c| random_value(&mut r, c)).collect();
            let got = o.lookup("t", name, &key).await.unwrap();
            let want = table.expect(schema, cols, |t| {
                t.iter()
                    .zip(&key)
                    .all(|(x, k)| !x.is_null() && !k.is_null() && x == k)
            });
            assert_eq!(strip_ids(&got.rows), strip_ids(&want), "{name} = {key:?}");
            if !key.iter().any(Value::is_null) {
                assert_eq!(got.stats.files_scanned, 1, "the drifted file is scanned");
                assert_eq!(got.stats.rejections.len(), 1);
            }
            checked[0] += want.len();

            // IN
            let keys: Vec<Vec<Value>> = (0..r.below(5))
                .map(|_| cols.iter().map(|&c| random_value(&mut r, c)).collect())
                .collect();
            let got = o.lookup_many("t", name, &keys).await.unwrap();
            let want = table.expect(schema, cols, |t| {
                keys.iter().any(|k| {
                    t.iter()
                        .zip(k)
                        .all(|(x, k)| !x.is_null() && !k.is_null() && x == k)
                })
            });
            assert_eq!(strip_ids(&got.rows), strip_ids(&want), "{name} IN {keys:?}");
            checked[1] += want.len();

            // range
            let (lo, hi) = (random_bound(&mut r, cols), random_bound(&mut r, cols));
            let reverse = r.below(2) == 0;
            let vals = |b: &ValueBound| match b {
                ValueBound::Included(v) | ValueBound::Excluded(v) => v.clone(),
                ValueBound::Unbounded => vec![],
            };
            let (lv, uv) = (vals(&lo), vals(&hi));
            let both = !lv.is_empty() && !uv.is_empty();
            let p = if both {
                lv.iter().zip(&uv).take_while(|(a, b)| a == b).count()
            } else {
                0
            };
            let deepest = lv.len().max(uv.len());
            let mixed = deepest > p + 1
                && schema.columns[p..deepest]
                    .iter()
                    .any(|c| c.direction != schema.columns[p].direction);
            let null_bound = lv.iter().chain(&uv).any(Value::is_null);
            match o.range("t", name, lo.clone(), hi.clone(), reverse).await {
                Err(e) => {
                    assert!(mixed || null_bound, "{name} {lo:?}..{hi:?} refused: {e}");
                    assert_eq!(e.code(), "E_REFUSED");
                    checked[3] += 1;
                }
                Ok(got) => {
                    assert!(
                        !mixed && !null_bound,
                        "{name} {lo:?}..{hi:?} should be refused"
                    );
                    let non_null = if p < deepest {
                        Some(p)
                    } else if lv.is_empty() && uv.is_empty() {
                        Some(0)
                    } else {
                        None
                    };
                    let mut want = table.expect(schema, cols, |t| {
                        bound_ok(t, &lo, true)
                            && bound_ok(t, &hi, false)
                            && non_null.is_none_or(|c| !t[c].is_null())
                    });
                    if reverse {
                        want.reverse();
                    }
                    assert_eq!(
                        strip_ids(&got.rows),
                        strip_ids(&want),
                        "{name} {lo:?}..{hi:?} reverse={reverse}"
                    );
                    checked[2] += want.len();
                }
            }

            // IS NULL over a leading run
            let n = 1 + r.below(cols.len() as u64) as usize;
            let mut prefix: Vec<Option<Value>> = cols[..n]
                .iter()
                .map(|&c| Some(random_value(&mut r, c)))
                .collect();
            let at = r.below(n as u64) as usize;
            prefix[at] = Some(Value::Null);
            let reverse = r.below(2) == 0;
            let got = o.nulls("t", name, &prefix, reverse).await.unwrap();
            let mut want = table.expect(schema, cols, |t| {
                prefix.iter().zip(t).all(|(p, x)| match p {
                    Some(Value::Null) => x.is_null(),
                    Some(v) => !x.is_null() && x == v,
                    None => true,
                })
            });
            if reverse {
                want.reverse();
            }
            assert_eq!(
                strip_ids(&got.rows),
                strip_ids(&want),
                "{name} nulls {prefix:?}"
            );
        }
    }
    assert!(
        checked[0] > 0 && checked[1] > 0 && checked[2] > 0,
        "queries found rows: {checked:?}"
    );
}

/// Row ids of the rewritten file differ from the brute force's numbering; compare the rest.
fn strip_ids(rows: &[RowRef]) -> Vec<(String, u64)> {
    rows.iter().map(|r| (r.file.clone(), r.position)).collect()
}

#[tokio::test]
async fn refusals_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.parquet"),
        parquet(&rows(&mut Rng(7), 50)),
    )
    .unwrap();
    let o = Overlay::open("memory:///", OpenOptions::default())
        .await
        .unwrap();
    o.register_parquet_table(
        "t",
        &format!("file://{}", dir.path().display()),
        FileSelection::Prefix(String::new()),
    )
    .await
    .unwrap();
    o.create_index(
        "t",
        "mixed",
        &[IndexColumn::from("a"), IndexColumn::from("b").desc()],
        IndexOptions::default(),
    )
    .await
    .unwrap();
    // Not built yet: every accessor refuses the building index.
    let e = o
        .range(
            "t",
            "mixed",
            ValueBound::Unbounded,
            ValueBound::Unbounded,
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "E_INDEX_NOT_READY");
    o.build("t", |_| {}).await.unwrap();
    // A tuple window across a (ASC) and b (DESC).
    let lo = ValueBound::Included(vec![Value::Int(-1), Value::String("a".into())]);
    let hi = ValueBound::Included(vec![Value::Int(2), Value::String("b".into())]);
    assert_eq!(
        o.range("t", "mixed", lo.clone(), hi, false)
            .await
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    assert_eq!(
        o.range("t", "mixed", lo, ValueBound::Unbounded, false)
            .await
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    // An equality prefix plus a range on the next column is fine in any direction.
    let lo = ValueBound::Excluded(vec![Value::Int(1), Value::String("a".into())]);
    let hi = ValueBound::Included(vec![Value::Int(1)]);
    o.range("t", "mixed", lo, hi, true).await.unwrap();
    // A bare range on a non-leading column is refused; with equality on the leading
    // column it is the range column.
    let on_b = ValueBound::Included(vec![Value::Int(0), Value::String("a".into())]);
    let snap = o.snapshot().await.unwrap();
    let bare = ValueBound::Included(vec![Value::Int(0)]);
    assert_eq!(
        snap.check_range_column("t", "mixed", &bare, &ValueBound::Unbounded, "b")
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    assert_eq!(
        snap.check_range_column(
            "t",
            "mixed",
            &ValueBound::Unbounded,
            &ValueBound::Unbounded,
            "b"
        )
        .unwrap_err()
        .code(),
        "E_REFUSED"
    );
    snap.check_range_column("t", "mixed", &on_b, &bare, "b")
        .unwrap();
    snap.check_range_column("t", "mixed", &bare, &ValueBound::Unbounded, "a")
        .unwrap();
    assert_eq!(
        snap.check_range_column("t", "mixed", &bare, &ValueBound::Unbounded, "c")
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    // IS NULL: a gap, and no IS NULL at all.
    assert_eq!(
        o.nulls("t", "mixed", &[None, Some(Value::Null)], false)
            .await
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    assert_eq!(
        o.nulls("t", "mixed", &[Some(Value::Int(1))], false)
            .await
            .unwrap_err()
            .code(),
        "E_REFUSED"
    );
    // Too many values; an empty IN list is valid and empty; IN on an unknown index is not.
    let long = ValueBound::Included(vec![
        Value::Int(1),
        Value::String("a".into()),
        Value::Int(3),
    ]);
    assert_eq!(
        o.range("t", "mixed", long, ValueBound::Unbounded, false)
            .await
            .unwrap_err()
            .code(),
        "E_KEY"
    );
    assert!(o
        .lookup_many("t", "mixed", &[])
        .await
        .unwrap()
        .rows
        .is_empty());
    assert_eq!(
        o.lookup_many("t", "nope", &[]).await.unwrap_err().code(),
        "E_NOT_FOUND"
    );
}
