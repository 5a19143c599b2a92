//! Parquet written by another writer (pyarrow), the ways pipelines write it: data page v1 and
//! v2, dictionary on, off and falling back to plain mid-chunk, snappy / zstd / lz4 / gzip /
//! none, small pages with a page index, no statistics, unicode and empty strings, NULLs, NaN
//! and ±0. For every variant, every query through the indexes returns exactly the rows
//! pyarrow's own compute finds (`tests/parquet/pyarrow_variants.py`), and so does a forced
//! scan.

use std::path::Path;

use serde_json::Value as J;
use skerry_core::admin::overlay::{FileSelection, IndexOptions, OpenOptions, Overlay};
use skerry_core::read::plan::Query;
use skerry_core::read::predicate::{Condition, Op};
use skerry_core::values::Value;

fn value(col: &str, v: &J) -> Value {
    match col {
        "word" | "uniq" => Value::String(v.as_str().unwrap().to_string()),
        "f" => Value::Float64(v.as_f64().unwrap()),
        "ts" => Value::Timestamp(v.as_i64().unwrap()),
        _ => Value::Int(v.as_i64().unwrap()),
    }
}

fn condition(p: &[J]) -> Condition {
    let col = p[0].as_str().unwrap();
    let op = match p[1].as_str().unwrap() {
        "eq" => Op::Eq(value(col, &p[2])),
        "in" => Op::In(
            p[2].as_array()
                .unwrap()
                .iter()
                .map(|v| value(col, v))
                .collect(),
        ),
        "between" => Op::Between(value(col, &p[2]), value(col, &p[3])),
        "lt" => Op::Lt(value(col, &p[2])),
        "ge" => Op::Ge(value(col, &p[2])),
        "gt" => Op::Gt(value(col, &p[2])),
        "null" => Op::IsNull,
        o => panic!("op {o}"),
    };
    Condition::new(col, op)
}

#[tokio::test]
async fn every_pyarrow_variant_answers_like_pyarrow() {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/parquet/pyarrow_variants.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .output()
        .expect("python3 runs (setup.sh installs pyarrow with pyiceberg)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: J =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).unwrap()).unwrap();
    let overlay_url = format!("file://{}", dir.path().join("overlay").display());
    let o = Overlay::open(&overlay_url, OpenOptions::default())
        .await
        .unwrap();
    for variant in expected["variants"].as_array().unwrap() {
        let v = variant.as_str().unwrap();
        let loc = format!("file://{}", dir.path().join(v).display());
        o.register_parquet_table(v, &loc, FileSelection::Prefix(String::new()))
            .await
            .unwrap_or_else(|e| panic!("{v}: register: {e}"));
        o.create_index(v, "by_id", &["id".into()], IndexOptions::unique())
            .await
            .unwrap();
        for c in ["word", "uniq", "n32", "f", "ts"] {
            o.create_index(v, &format!("by_{c}"), &[c.into()], IndexOptions::default())
                .await
                .unwrap();
        }
        let b = o
            .build(v, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{v}: build: {e}"));
        assert!(b.skipped.is_empty(), "{v}: skipped {:?}", b.skipped);
        for q in expected["queries"].as_array().unwrap() {
            let p = q["predicate"].as_array().unwrap();
            let want: Vec<i64> = q["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            let query = Query {
                conditions: vec![condition(p)],
                columns: Some(vec!["id".into()]),
                ..Default::default()
            };
            for scan in [false, true] {
                o.set_scan_only(scan);
                let r = o
                    .query(v, &query)
                    .await
                    .unwrap_or_else(|e| panic!("{v} {p:?} scan={scan}: {e}"));
                let ids = r
                    .batch
                    .column(0)
                    .as_any()
                    .downcast_ref::<arrow_array::Int64Array>()
                    .unwrap();
                let mut got: Vec<i64> = ids.values().to_vec();
                got.sort();
                assert_eq!(got, want, "{v} {p:?} scan={scan}");
                if !scan {
                    assert!(r.stats.index.is_some(), "{v} {p:?}: an index serves it");
                }
            }
            o.set_scan_only(false);
        }
    }
}
