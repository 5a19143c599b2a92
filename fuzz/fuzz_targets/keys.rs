//! Key decoding (`docs/key-encoding.md`): a schema of up to three columns picked by the first
//! bytes, then the rest decoded as a key, a prefix measured, and a decoded key encoded again
//! to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use skerry_core::values::{Direction, KeyColumn, KeySchema, KeyType, NullOrder};

fn ty(b: u8, p: u8) -> KeyType {
    match b % 22 {
        0 => KeyType::Boolean,
        1 => KeyType::Int8,
        2 => KeyType::Int16,
        3 => KeyType::Int32,
        4 => KeyType::Int64,
        5 => KeyType::UInt8,
        6 => KeyType::UInt16,
        7 => KeyType::UInt32,
        8 => KeyType::UInt64,
        9 => KeyType::Float32,
        10 => KeyType::Float64,
        11 => KeyType::Decimal {
            precision: 1 + p % 38,
            scale: p % (1 + p % 38),
        },
        12 => KeyType::String,
        13 => KeyType::Binary,
        14 => KeyType::Fixed(1 + u32::from(p % 32)),
        15 => KeyType::Uuid,
        16 => KeyType::Date,
        17 => KeyType::Time,
        18 => KeyType::Timestamp,
        19 => KeyType::TimestampTz,
        20 => KeyType::TimestampNs,
        _ => KeyType::TimestampTzNs,
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let n = 1 + (data[0] % 3) as usize;
    let head = &data[1..];
    if head.len() < 2 * n {
        return;
    }
    let columns = (0..n)
        .map(|i| KeyColumn {
            ty: ty(head[2 * i], head[2 * i + 1]),
            direction: if head[2 * i + 1] & 0x80 != 0 { Direction::Desc } else { Direction::Asc },
            nulls: if head[2 * i + 1] & 0x40 != 0 { NullOrder::First } else { NullOrder::Last },
        })
        .collect();
    let Ok(schema) = KeySchema::new(columns) else {
        return;
    };
    let key = &head[2 * n..];
    for k in 0..=n {
        let _ = schema.prefix_len(key, k);
    }
    if let Ok(values) = schema.decode(key) {
        let again = schema.encode(&values).expect("a decoded key encodes");
        assert_eq!(again, key, "decode then encode gives the same bytes");
    }
});
