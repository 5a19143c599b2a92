//! Core format benchmarks, each beside a baseline in the same run:
//!
//! - key encoding/decoding throughput vs. a naive non-order-preserving serialisation
//!   (little-endian integers, length-prefixed strings) of the same tuples;
//! - opening a Puffin bundle: known footer location, one suffix read, and the naive
//!   size-lookup + trailer + footer sequence — with the number of reads each costs.
//!
//! `cargo bench -p skerry-core --bench core` prints the read counts and criterion's timings;
//! the summary lines at the end give the ratios.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skerry_core::formats::codec::Codec;
use skerry_core::formats::puffin::{
    BlobSpec, FooterLocation, Limits, PuffinFooter, PuffinWriter, DEFAULT_SUFFIX_LEN,
};
use skerry_core::io::{block_on, Location, MemoryReader, RangeReader};
use skerry_core::values::{KeyColumn, KeySchema, KeyType, Value};

const N: usize = 10_000;

fn tuples() -> Vec<Vec<Value>> {
    (0..N)
        .map(|i| {
            vec![
                Value::String(format!("customer-{:06}", (i * 7919) % N)),
                Value::Int(i as i64 * 1_000_003 - 5_000_000),
                Value::Float64(i as f64 / 3.0),
            ]
        })
        .collect()
}

fn schema() -> KeySchema {
    KeySchema::new(vec![
        KeyColumn::new(KeyType::String),
        KeyColumn::new(KeyType::Int64).desc(),
        KeyColumn::new(KeyType::Float64),
    ])
    .unwrap()
}

/// The baseline: what serialising the same values costs without order preservation.
fn naive_encode(t: &[Value], out: &mut Vec<u8>) {
    for v in t {
        match v {
            Value::String(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Int(i) => out.extend_from_slice(&i.to_le_bytes()),
            Value::Float64(f) => out.extend_from_slice(&f.to_le_bytes()),
            _ => unreachable!(),
        }
    }
}

fn naive_decode(mut b: &[u8]) -> Vec<Value> {
    let len = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
    let s = String::from_utf8(b[4..4 + len].to_vec()).unwrap();
    b = &b[4 + len..];
    let i = i64::from_le_bytes(b[..8].try_into().unwrap());
    let f = f64::from_le_bytes(b[8..16].try_into().unwrap());
    vec![Value::String(s), Value::Int(i), Value::Float64(f)]
}

fn bench_encoding(c: &mut Criterion) {
    let s = schema();
    let ts = tuples();
    let encoded: Vec<Vec<u8>> = ts.iter().map(|t| s.encode(t).unwrap()).collect();
    let naive: Vec<Vec<u8>> = ts
        .iter()
        .map(|t| {
            let mut v = Vec::new();
            naive_encode(t, &mut v);
            v
        })
        .collect();

    let mut g = c.benchmark_group("key_encoding");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("encode/canonical", |b| {
        b.iter(|| {
            ts.iter()
                .map(|t| s.encode(black_box(t)).unwrap().len())
                .sum::<usize>()
        })
    });
    g.bench_function("encode/baseline_naive", |b| {
        b.iter(|| {
            ts.iter()
                .map(|t| {
                    let mut v = Vec::with_capacity(32);
                    naive_encode(black_box(t), &mut v);
                    v.len()
                })
                .sum::<usize>()
        })
    });
    g.bench_function("decode/canonical", |b| {
        b.iter(|| {
            encoded
                .iter()
                .map(|e| s.decode(black_box(e)).unwrap().len())
                .sum::<usize>()
        })
    });
    g.bench_function("decode/baseline_naive", |b| {
        b.iter(|| {
            naive
                .iter()
                .map(|e| naive_decode(black_box(e)).len())
                .sum::<usize>()
        })
    });
    g.finish();

    // Ratios from one timed pass each (criterion's numbers above are the precise ones).
    let time = |f: &mut dyn FnMut() -> usize| {
        let t = Instant::now();
        for _ in 0..20 {
            black_box(f());
        }
        t.elapsed().as_secs_f64() / 20.0
    };
    let enc = time(&mut || ts.iter().map(|t| s.encode(t).unwrap().len()).sum());
    let enc_base = time(&mut || {
        ts.iter()
            .map(|t| {
                let mut v = Vec::with_capacity(32);
                naive_encode(t, &mut v);
                v.len()
            })
            .sum()
    });
    let dec = time(&mut || encoded.iter().map(|e| s.decode(e).unwrap().len()).sum());
    let dec_base = time(&mut || naive.iter().map(|e| naive_decode(e).len()).sum());
    println!(
        "summary key_encoding: encode {:.1} M keys/s ({:.2}x naive), decode {:.1} M keys/s ({:.2}x naive); avg key {} bytes (naive {})",
        N as f64 / enc / 1e6,
        enc / enc_base,
        N as f64 / dec / 1e6,
        dec / dec_base,
        encoded.iter().map(Vec::len).sum::<usize>() / N,
        naive.iter().map(Vec::len).sum::<usize>() / N,
    );
}

fn bundle(blobs: usize, props_bytes: usize) -> (MemoryReader, Location, FooterLocation) {
    let mut w = PuffinWriter::new();
    for i in 0..blobs {
        let mut properties = BTreeMap::new();
        properties.insert("p".to_string(), "x".repeat(props_bytes));
        let spec = BlobSpec {
            blob_type: "skerry-ordered-v1".into(),
            fields: vec![i as i32],
            snapshot_id: 1,
            sequence_number: 1,
            properties,
        };
        w.add_blob(spec, &vec![i as u8; 4096], Codec::None).unwrap();
    }
    let f = w.finish();
    let r = MemoryReader::new();
    r.put("b.puffin", f.bytes);
    (r, Location::new("b.puffin"), f.footer)
}

/// The naive opener: size lookup, then the trailer, then the footer (what a reader does that
/// neither knows the layout nor uses suffix reads).
async fn naive_open(r: &MemoryReader, loc: &Location) -> usize {
    let size = r.head(loc).await.unwrap().size;
    let trailer = r.read_range(loc, size - 12..size).await.unwrap();
    let payload = u32::from_le_bytes(trailer[..4].try_into().unwrap()) as u64;
    let footer = r.read_range(loc, size - payload - 16..size).await.unwrap();
    let loc_f = FooterLocation {
        offset: size - payload - 16,
        length: payload + 16,
    };
    PuffinFooter::parse_footer(&footer, loc_f, &Limits::default())
        .unwrap()
        .metadata
        .blobs
        .len()
}

fn bench_open(c: &mut Criterion) {
    let limits = Limits::default();
    let (r, loc, footer) = bundle(5, 16);
    let (big, big_loc, _) = bundle(400, 200);

    // Read counts per mode.
    let count = |r: &MemoryReader, f: &mut dyn FnMut()| {
        let before = r.stats().requests;
        f();
        r.stats().requests - before
    };
    let known = count(&r, &mut || {
        block_on(PuffinFooter::read_at(&r, &loc, footer, &limits)).unwrap();
    });
    let suffix = count(&r, &mut || {
        block_on(PuffinFooter::open(
            &r,
            &loc,
            DEFAULT_SUFFIX_LEN,
            None,
            &limits,
        ))
        .unwrap();
    });
    let suffix_big = count(&big, &mut || {
        block_on(PuffinFooter::open(&big, &big_loc, 16 * 1024, None, &limits)).unwrap();
    });
    let naive = count(&r, &mut || {
        block_on(naive_open(&r, &loc));
    });
    println!(
        "summary open_bundle reads: known footer location {known}, suffix read {suffix}, \
         suffix smaller than footer {suffix_big}, baseline size+trailer+footer {naive}"
    );

    let mut g = c.benchmark_group("open_bundle");
    g.bench_function("known_footer_location", |b| {
        b.iter(|| block_on(PuffinFooter::read_at(&r, &loc, footer, &limits)).unwrap())
    });
    g.bench_function("suffix_read", |b| {
        b.iter(|| {
            block_on(PuffinFooter::open(
                &r,
                &loc,
                DEFAULT_SUFFIX_LEN,
                None,
                &limits,
            ))
            .unwrap()
        })
    });
    g.bench_function("baseline_naive_three_reads", |b| {
        b.iter(|| block_on(naive_open(&r, &loc)))
    });
    g.finish();
}

criterion_group!(benches, bench_encoding, bench_open);
criterion_main!(benches);
