//! Golden vectors and property tests of the canonical key encoding.

use std::cmp::Ordering;

use proptest::prelude::*;
use skerry_core::formats::key_encoding::*;
use skerry_core::values::*;

// ---------------------------------------------------------------- golden vectors

fn parse_column(spec: &str) -> KeyColumn {
    let mut parts = spec.split(':');
    let ty: KeyType = parts
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut col = KeyColumn::new(ty);
    for p in parts {
        col = match p {
            "asc" => col,
            "desc" => col.desc(),
            "first" => col.nulls_first(),
            "last" => col.nulls_last(),
            other => panic!("bad column option {other}"),
        };
    }
    col
}

fn parse_value(ty: KeyType, v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    if v.is_null() {
        return Value::Null;
    }
    let hex_bytes = |s: &str| hex::decode(s.strip_prefix("0x").expect("0x-prefixed hex")).unwrap();
    let float = |v: &J| -> f64 {
        match v {
            J::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "-NaN" => -f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "-0.0" => -0.0,
                other => panic!("bad float {other}"),
            },
            J::Number(n) => n.as_f64().unwrap(),
            _ => panic!("bad float"),
        }
    };
    match ty {
        KeyType::Boolean => Value::Bool(v.as_bool().unwrap()),
        KeyType::Int8 | KeyType::Int16 | KeyType::Int32 | KeyType::Int64 => {
            Value::Int(v.as_i64().unwrap())
        }
        KeyType::UInt8 | KeyType::UInt16 | KeyType::UInt32 | KeyType::UInt64 => {
            Value::UInt(v.as_u64().unwrap())
        }
        KeyType::Float32 => Value::Float32(float(v) as f32),
        KeyType::Float64 => Value::Float64(float(v)),
        KeyType::Decimal { .. } => Value::Decimal(v.as_str().unwrap().parse().unwrap()),
        KeyType::String => Value::String(v.as_str().unwrap().to_string()),
        KeyType::Binary | KeyType::Fixed(_) | KeyType::Uuid => {
            Value::Binary(hex_bytes(v.as_str().unwrap()))
        }
        KeyType::Date => Value::Date(v.as_i64().unwrap() as i32),
        KeyType::Time => Value::Time(v.as_i64().unwrap()),
        KeyType::Timestamp
        | KeyType::TimestampTz
        | KeyType::TimestampNs
        | KeyType::TimestampTzNs => Value::Timestamp(v.as_i64().unwrap()),
    }
}

struct Vector {
    line: usize,
    schema: KeySchema,
    values: Vec<Value>,
    bytes: Vec<u8>,
}

fn golden() -> Vec<(String, Vec<Vector>)> {
    let text = include_str!("golden/key-encoding.txt");
    let mut groups: Vec<(String, Vec<Vector>)> = vec![("preamble".into(), vec![])];
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if let Some(h) = line.strip_prefix("## ") {
            groups.push((h.to_string(), vec![]));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split(" | ").collect();
        assert_eq!(parts.len(), 3, "line {line_no}: {line}");
        let schema =
            KeySchema::new(parts[0].split_whitespace().map(parse_column).collect()).unwrap();
        let json: Vec<serde_json::Value> = serde_json::from_str(parts[1]).unwrap();
        let values = schema
            .columns
            .iter()
            .zip(&json)
            .map(|(c, v)| parse_value(c.ty, v))
            .collect();
        let bytes = hex::decode(parts[2].split_whitespace().collect::<String>()).unwrap();
        groups.last_mut().unwrap().1.push(Vector {
            line: line_no,
            schema,
            values,
            bytes,
        });
    }
    groups
}

#[test]
fn golden_vectors_encode_and_decode() {
    let groups = golden();
    let total: usize = groups.iter().map(|g| g.1.len()).sum();
    assert!(total >= 60, "golden file lost vectors: {total}");
    for (_, vectors) in &groups {
        for v in vectors {
            let enc = v
                .schema
                .encode(&v.values)
                .unwrap_or_else(|e| panic!("line {}: {e}", v.line));
            assert_eq!(
                hex::encode(&enc),
                hex::encode(&v.bytes),
                "encode, line {}",
                v.line
            );
            let dec = v
                .schema
                .decode(&v.bytes)
                .unwrap_or_else(|e| panic!("line {}: {e}", v.line));
            // Canonical equality: -0.0 == +0.0, NaN == NaN.
            assert_eq!(dec, v.values, "decode, line {}", v.line);
            // And re-encoding the decoded value is byte-identical (canonical form).
            assert_eq!(
                v.schema.encode(&dec).unwrap(),
                v.bytes,
                "re-encode, line {}",
                v.line
            );
        }
    }
}

#[test]
fn golden_ordered_groups_are_in_declared_order() {
    let mut checked = 0;
    for (name, vectors) in golden().iter().filter(|(n, _)| n.starts_with("ordered")) {
        for w in vectors.windows(2) {
            assert!(
                w[0].bytes < w[1].bytes,
                "{name}: line {} !< line {}",
                w[0].line,
                w[1].line
            );
            assert_eq!(
                tuple_cmp(&w[0].schema, &w[0].values, &w[1].values),
                Ordering::Less,
                "{name}: line {}",
                w[0].line
            );
            checked += 1;
        }
    }
    assert!(checked >= 8);
}

#[test]
fn malformed_keys_are_typed_errors() {
    let s = KeySchema::new(vec![
        KeyColumn::new(KeyType::String),
        KeyColumn::new(KeyType::Int32),
    ])
    .unwrap();
    let good = s
        .encode(&[Value::String("ab".into()), Value::Int(3)])
        .unwrap();
    for cut in 0..good.len() {
        assert!(
            s.decode(&good[..cut]).is_err(),
            "prefix of {cut} bytes decoded"
        );
    }
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        s.decode(&trailing),
        Err(KeyError::TrailingBytes { extra: 1 })
    );
    assert!(matches!(
        s.decode(&[0x07]),
        Err(KeyError::Malformed { column: 0, .. })
    ));
    // 00 followed by neither ff nor 01 inside a string.
    assert!(matches!(
        s.decode(&[0x01, 0x61, 0x00, 0x05]),
        Err(KeyError::Malformed {
            reason: "bad escape",
            ..
        })
    ));
    // Invalid UTF-8 in a string column.
    assert!(matches!(
        s.decode(&[0x01, 0xff, 0x00, 0x01, 0x02]),
        Err(KeyError::Malformed {
            reason: "invalid UTF-8",
            ..
        })
    ));
    // A NULL flag that does not match the column's placement.
    assert!(s.decode(&[0x00]).is_err());
}

// ---------------------------------------------------------------- property tests

fn key_type() -> impl Strategy<Value = KeyType> {
    prop_oneof![
        Just(KeyType::Boolean),
        Just(KeyType::Int8),
        Just(KeyType::Int16),
        Just(KeyType::Int32),
        Just(KeyType::Int64),
        Just(KeyType::UInt8),
        Just(KeyType::UInt16),
        Just(KeyType::UInt32),
        Just(KeyType::UInt64),
        Just(KeyType::Float32),
        Just(KeyType::Float64),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p))
            .prop_map(|(precision, scale)| KeyType::Decimal { precision, scale }),
        Just(KeyType::String),
        Just(KeyType::Binary),
        (1u32..=8).prop_map(KeyType::Fixed),
        Just(KeyType::Uuid),
        Just(KeyType::Date),
        Just(KeyType::Time),
        Just(KeyType::Timestamp),
        Just(KeyType::TimestampTz),
        Just(KeyType::TimestampNs),
        Just(KeyType::TimestampTzNs),
    ]
}

fn float64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(0.0),
        Just(-0.0),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::from_bits(0x7FF0_0000_0000_0001)), // signalling NaN payload
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(-f64::MIN_POSITIVE),
        (-1000i32..1000).prop_map(|i| i as f64 / 8.0),
    ]
}

fn float32() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<f32>(),
        Just(0.0f32),
        Just(-0.0f32),
        Just(f32::NAN),
        Just(-f32::NAN),
        (-100i32..100).prop_map(|i| i as f32 / 4.0)
    ]
}

/// Short strings over a small alphabet including NUL and multi-byte characters, so
/// prefixes, escapes and ties are frequent.
fn small_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just('\0'),
            Just('a'),
            Just('b'),
            Just('é'),
            Just('\u{10FFFF}'),
            Just('\u{1}'),
            Just('ÿ')
        ],
        0..5,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn small_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            Just(0u8),
            Just(1u8),
            Just(0xFFu8),
            Just(0x61u8),
            any::<u8>()
        ],
        0..5,
    )
}

fn value_of(ty: KeyType) -> BoxedStrategy<Value> {
    match ty {
        KeyType::Boolean => any::<bool>().prop_map(Value::Bool).boxed(),
        KeyType::Int8 => any::<i8>().prop_map(|v| Value::Int(v as i64)).boxed(),
        KeyType::Int16 => any::<i16>().prop_map(|v| Value::Int(v as i64)).boxed(),
        KeyType::Int32 => prop_oneof![any::<i32>(), -3i32..3]
            .prop_map(|v| Value::Int(v as i64))
            .boxed(),
        KeyType::Int64 => prop_oneof![any::<i64>(), -3i64..3, Just(i64::MIN), Just(i64::MAX)]
            .prop_map(Value::Int)
            .boxed(),
        KeyType::UInt8 => any::<u8>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        KeyType::UInt16 => any::<u16>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        KeyType::UInt32 => any::<u32>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        KeyType::UInt64 => prop_oneof![any::<u64>(), 0u64..3, Just(u64::MAX)]
            .prop_map(Value::UInt)
            .boxed(),
        KeyType::Float32 => float32().prop_map(Value::Float32).boxed(),
        KeyType::Float64 => float64().prop_map(Value::Float64).boxed(),
        KeyType::Decimal { precision, .. } => {
            let max = 10i128.pow(precision as u32) - 1;
            prop_oneof![-max..=max, -3i128..3, Just(max), Just(-max)]
                .prop_map(Value::Decimal)
                .boxed()
        }
        KeyType::String => small_string().prop_map(Value::String).boxed(),
        KeyType::Binary => small_bytes().prop_map(Value::Binary).boxed(),
        KeyType::Fixed(n) => {
            prop::collection::vec(prop_oneof![Just(0u8), Just(0xFF), any::<u8>()], n as usize)
                .prop_map(Value::Binary)
                .boxed()
        }
        KeyType::Uuid => prop::collection::vec(any::<u8>(), 16)
            .prop_map(Value::Binary)
            .boxed(),
        KeyType::Date => prop_oneof![any::<i32>(), -3i32..3]
            .prop_map(Value::Date)
            .boxed(),
        KeyType::Time => (0i64..86_400_000_000).prop_map(Value::Time).boxed(),
        KeyType::Timestamp
        | KeyType::TimestampTz
        | KeyType::TimestampNs
        | KeyType::TimestampTzNs => prop_oneof![any::<i64>(), -3i64..3]
            .prop_map(Value::Timestamp)
            .boxed(),
    }
}

fn column() -> impl Strategy<Value = KeyColumn> {
    (key_type(), any::<bool>(), any::<bool>()).prop_map(|(ty, desc, first)| {
        let c = KeyColumn::new(ty);
        let c = if desc { c.desc() } else { c };
        if first {
            c.nulls_first()
        } else {
            c
        }
    })
}

fn nullable(ty: KeyType) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 4 => value_of(ty)].boxed()
}

/// A schema and two tuples of it.
fn schema_and_pair() -> impl Strategy<Value = (KeySchema, Vec<Value>, Vec<Value>)> {
    prop::collection::vec(column(), 1..4).prop_flat_map(|cols| {
        let a: Vec<BoxedStrategy<Value>> = cols.iter().map(|c| nullable(c.ty)).collect();
        let b: Vec<BoxedStrategy<Value>> = cols.iter().map(|c| nullable(c.ty)).collect();
        (Just(KeySchema::new(cols).unwrap()), a, b)
    })
}

/// One type and two values of it (non-null).
fn type_and_pair() -> impl Strategy<Value = (KeyType, Value, Value)> {
    key_type().prop_flat_map(|t| (Just(t), value_of(t), value_of(t)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// For every type: byte order == SQL order, byte equality == canonical equality,
    /// and DESC reverses it.
    #[test]
    fn order_preserving_for_every_type((ty, a, b) in type_and_pair()) {
        let asc = KeySchema::new(vec![KeyColumn::new(ty)]).unwrap();
        let desc = KeySchema::new(vec![KeyColumn::new(ty).desc()]).unwrap();
        let sql = value_cmp(&a, &b).unwrap();
        let (ea, eb) = (asc.encode(&[a.clone()]).unwrap(), asc.encode(&[b.clone()]).unwrap());
        prop_assert_eq!(ea.cmp(&eb), sql);
        let (da, db) = (desc.encode(&[a.clone()]).unwrap(), desc.encode(&[b.clone()]).unwrap());
        prop_assert_eq!(da.cmp(&db), sql.reverse());
    }

    /// decode(encode(k)) == k (canonically) for every type, direction and placement.
    #[test]
    fn round_trip((schema, a, _b) in schema_and_pair()) {
        let enc = schema.encode(&a).unwrap();
        let dec = schema.decode(&enc).unwrap();
        prop_assert_eq!(&dec, &a);
        prop_assert_eq!(schema.encode(&dec).unwrap(), enc);
    }

    /// Mixed-direction composites with NULLs: byte order == declared tuple order.
    #[test]
    fn composite_order_with_directions_and_nulls((schema, a, b) in schema_and_pair()) {
        let (ea, eb) = (schema.encode(&a).unwrap(), schema.encode(&b).unwrap());
        prop_assert_eq!(ea.cmp(&eb), tuple_cmp(&schema, &a, &b));
    }

    /// A prefix encoding matches exactly the keys that extend it.
    #[test]
    fn prefix_encoding_matches_extensions((schema, a, b) in schema_and_pair(), n in 0usize..4) {
        let n = n.min(schema.columns.len());
        let prefix = schema.encode_prefix(&a[..n]).unwrap();
        let eb = schema.encode(&b).unwrap();
        let same_prefix = (0..n).all(|i| a[i] == b[i]);
        prop_assert_eq!(eb.starts_with(&prefix), same_prefix);
        if let Some(end) = prefix_end(&prefix) {
            prop_assert_eq!(eb >= prefix && eb < end, same_prefix);
        }
    }

    /// The decoder never panics on arbitrary bytes.
    #[test]
    fn decode_never_panics(cols in prop::collection::vec(column(), 1..4), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let schema = KeySchema::new(cols).unwrap();
        let _ = schema.decode(&bytes);
        let _ = schema.prefix_len(&bytes, 2);
    }
}
