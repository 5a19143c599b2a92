//! Rows fetched by position read only the pages that hold them (page index), in the
//! caller's order, from any codec.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use skerry_core::datafile::{read_metadata_with_page_index, read_rows};
use skerry_core::io::{block_on, Location, MemoryReader, RangeReader};

const ROWS: i64 = 1_000_000;

fn file(page_index: bool) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let ids: Vec<i64> = (0..ROWS).collect();
    let names: Vec<String> = ids
        .iter()
        .map(|i| format!("name-{:07}", (i * 7919) % ROWS))
        .collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(250_000))
        .set_data_page_row_count_limit(2_000)
        .set_write_batch_size(2_000)
        .set_offset_index_disabled(!page_index)
        .build();
    write(&batch, props)
}

fn write(batch: &RecordBatch, props: WriterProperties) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    out
}

#[test]
fn a_point_fetch_reads_only_its_pages() {
    let m = MemoryReader::new();
    m.put("f.parquet", file(true));
    let loc = Location::new("f.parquet");
    let (md, _) = block_on(read_metadata_with_page_index(&m, &loc, None)).unwrap();
    assert!(md.page_index().is_some(), "the writer wrote a page index");
    let chunk = md.row_group(2).column(0).compressed_size() as u64
        + md.row_group(2).column(1).compressed_size() as u64;

    // Every page of a dictionary-encoded chunk needs the chunk's dictionary page; beyond
    // those, only the data pages holding the row may be read.
    let dictionaries: u64 = (0..2)
        .map(|c| {
            let cc = md.row_group(2).column(c);
            cc.dictionary_page_offset()
                .map_or(0, |d| (cc.data_page_offset() - d) as u64)
        })
        .sum();
    let before = m.stats();
    let rows = block_on(read_rows(&m, &loc, &md, &[612_345], &[0, 1], None)).unwrap();
    let spent = m.stats().since(&before);
    assert_eq!(rows.num_rows(), 1);
    assert_eq!(rows.column(0).as_primitive::<Int64Type>().value(0), 612_345);
    assert_eq!(
        rows.column(1).as_string::<i32>().value(0),
        format!("name-{:07}", (612_345i64 * 7919) % ROWS)
    );
    let pages = spent.bytes - dictionaries;
    assert!(pages * 50 < chunk, "read {pages} bytes of data pages (+{dictionaries} of dictionaries) of a {chunk}-byte row group");
    assert!(
        spent.bytes * 3 < chunk,
        "read {} bytes of a {chunk}-byte row group",
        spent.bytes
    );
    assert!(
        spent.requests <= 4,
        "per column at most its dictionary page and one data page: {spent:?}"
    );

    // Several positions in several row groups, any order, duplicates kept, columns reordered.
    let want = [999_999u64, 3, 612_345, 3, 250_000];
    let rows = block_on(read_rows(&m, &loc, &md, &want, &[1, 0], None)).unwrap();
    let ids: Vec<i64> = rows.column(1).as_primitive::<Int64Type>().values().to_vec();
    assert_eq!(ids, want.iter().map(|&p| p as i64).collect::<Vec<_>>());
    assert_eq!(rows.schema().field(0).name(), "name");
    // Nothing requested: nothing read; a position past the end is a typed error.
    let before = m.stats();
    assert_eq!(
        block_on(read_rows(&m, &loc, &md, &[], &[0], None))
            .unwrap()
            .num_rows(),
        0
    );
    assert_eq!(m.stats().since(&before).requests, 0);
    assert_eq!(
        block_on(read_rows(&m, &loc, &md, &[ROWS as u64], &[0], None))
            .unwrap_err()
            .code(),
        "E_INVALID"
    );
}

#[test]
fn without_a_page_index_rows_are_still_right() {
    let m = MemoryReader::new();
    m.put("f.parquet", file(false));
    let loc = Location::new("f.parquet");
    let (md, _) = block_on(read_metadata_with_page_index(&m, &loc, None)).unwrap();
    let rows = block_on(read_rows(&m, &loc, &md, &[7, 500_001], &[0], None)).unwrap();
    assert_eq!(
        rows.column(0).as_primitive::<Int64Type>().values().to_vec(),
        vec![7, 500_001]
    );
}

/// A file of many types, dictionary-encoded where the writer chooses, with NULLs, several
/// row groups and small pages: the shapes the dictionary path must decode like the decoder.
fn varied(compression: Compression) -> Vec<u8> {
    varied_with(compression, false, true)
}

fn varied_with(compression: Compression, v2: bool, dictionary: bool) -> Vec<u8> {
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, Float64Array, Int32Array, ListArray, TimestampMicrosecondArray};
    let n = 20_000usize;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("small", DataType::Int32, true),
        Field::new("amount", DataType::Float64, true),
        Field::new(
            "ts",
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>())),
        Arc::new(StringArray::from(
            (0..n)
                .map(|i| (i % 13 != 0).then(|| format!("name-{:06}", (i * 7919) % n)))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| (i % 7 != 0).then_some((i % 50) as i32))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            (0..n)
                .map(|i| (i % 11 != 0).then_some(i as f64 * 0.25))
                .collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(
                (0..n)
                    .map(|i| (i % 5 != 0).then_some(1_700_000_000_000_000 + i as i64))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
            (0..n).map(|i| {
                (i % 9 != 0).then(|| {
                    (0..(i % 4))
                        .map(|j| Some((i + j) as i32 % 17))
                        .collect::<Vec<_>>()
                })
            }),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let props = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(6_000))
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(700)
        .set_dictionary_enabled(dictionary)
        .set_writer_version(match v2 {
            true => parquet::file::properties::WriterVersion::PARQUET_2_0,
            false => parquet::file::properties::WriterVersion::PARQUET_1_0,
        })
        .build();
    write(&batch, props)
}

/// Rows read with the handle's dictionary pages — a few rows picked out of their pages, more
/// decoded by page — equal rows decoded from the file alone, for every column shape, codec,
/// page version and encoding, cold and warm.
#[test]
fn cached_dictionaries_answer_like_the_file() {
    use skerry_core::read::cache::ReadCache;
    let variants = [
        (Compression::SNAPPY, false, true),
        (Compression::UNCOMPRESSED, false, true),
        (Compression::ZSTD(ZstdLevel::default()), false, true),
        (Compression::SNAPPY, true, true),
        (Compression::UNCOMPRESSED, true, false),
        (Compression::SNAPPY, false, false),
    ];
    for (codec, v2, dictionary) in variants {
        let m = MemoryReader::new();
        m.put("v.parquet", varied_with(codec, v2, dictionary));
        let loc = Location::new("v.parquet");
        let (md, _) = block_on(read_metadata_with_page_index(&m, &loc, None)).unwrap();
        let cache = ReadCache::with_budget(256 << 20);
        let mut seed = 7u64;
        let mut next = |k: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % k
        };
        let column_sets: [&[usize]; 9] = [
            &[0],
            &[1],
            &[0, 1, 2, 3, 4, 5],
            &[5, 4],
            &[3, 1],
            &[2],
            &[4],
            &[1, 2, 3, 4, 0],
            &[4, 3, 2],
        ];
        for round in 0..60 {
            let count = 1 + next(if round % 4 == 0 { 200 } else { 4 }) as usize;
            let positions: Vec<u64> = (0..count).map(|_| next(20_000)).collect();
            let roots = column_sets[round % column_sets.len()];
            let plain = block_on(read_rows(&m, &loc, &md, &positions, roots, None)).unwrap();
            for pass in 0..2 {
                let cached =
                    block_on(read_rows(&m, &loc, &md, &positions, roots, Some(&cache))).unwrap();
                assert_eq!(
                    plain, cached,
                    "{codec:?} v2 {v2} dictionary {dictionary} round {round} pass {pass}: {positions:?} {roots:?}"
                );
            }
        }
        let s = cache.stats();
        assert_eq!(
            s.dictionary.hits > 0 && s.dictionary.entries > 0,
            dictionary,
            "{codec:?}: {s:?}"
        );
    }
}

/// A dictionary page changed in place — same size, so the same ETag on many stores — is
/// never answered from the cached copy: the bytes fetched are compared before use.
#[test]
fn a_dictionary_rewritten_in_place_is_not_served_from_the_cache() {
    use skerry_core::read::cache::ReadCache;
    let bytes = varied(Compression::UNCOMPRESSED);
    let m = MemoryReader::new();
    m.put("v.parquet", bytes.clone());
    let loc = Location::new("v.parquet");
    let (md, _) = block_on(read_metadata_with_page_index(&m, &loc, None)).unwrap();
    let cache = ReadCache::with_budget(256 << 20);
    let names = |b: &RecordBatch| -> Vec<Option<String>> {
        b.column(0)
            .as_string::<i32>()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect()
    };
    let positions = [1u64, 2];
    let before = block_on(read_rows(&m, &loc, &md, &positions, &[1], Some(&cache))).unwrap();
    let (a, b) = (
        names(&before)[0].clone().unwrap(),
        names(&before)[1].clone().unwrap(),
    );
    assert_eq!(a.len(), b.len());
    // Swap the two values inside the (uncompressed) dictionary page; data pages unchanged.
    let mut changed = bytes.clone();
    let find =
        |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle).unwrap();
    let (i, j) = (find(&changed, a.as_bytes()), find(&changed, b.as_bytes()));
    for k in 0..a.len() {
        changed.swap(i + k, j + k);
    }
    assert_eq!(changed.len(), bytes.len());
    m.put("v.parquet", changed);
    let hits = cache.stats().dictionary.hits;
    let after = block_on(read_rows(&m, &loc, &md, &positions, &[1], Some(&cache))).unwrap();
    assert_eq!(
        names(&after),
        vec![Some(b.clone()), Some(a.clone())],
        "the file's new values"
    );
    assert_eq!(
        after,
        block_on(read_rows(&m, &loc, &md, &positions, &[1], None)).unwrap()
    );
    assert_eq!(
        cache.stats().dictionary.hits,
        hits,
        "the stale page was not used"
    );
    // The page now cached is the new one.
    let again = block_on(read_rows(&m, &loc, &md, &positions, &[1], Some(&cache))).unwrap();
    assert_eq!(names(&again), vec![Some(b), Some(a)]);
    assert_eq!(cache.stats().dictionary.hits, hits + 1);
}

/// Pinned to a content version (a store whose versions name one content, like S3's ETags or
/// this reader's never-reused counters), a dictionary page read at that version is used
/// without fetching it again; a read without a version still fetches and compares it, and
/// a same-size rewrite is a new version whose pages are fetched and decoded anew.
#[test]
fn at_a_content_version_a_cached_dictionary_is_not_fetched_again() {
    use skerry_core::read::cache::ReadCache;
    let bytes = varied(Compression::UNCOMPRESSED);
    let m = MemoryReader::new();
    let v1 = m.put("v.parquet", bytes.clone());
    let plain = Location::new("v.parquet");
    let at = |v: &str| Location::new("v.parquet").with_version(v);
    assert!(m.content_versions(&at(&v1)) && !m.content_versions(&plain));
    let (md, _) = block_on(read_metadata_with_page_index(&m, &plain, None)).unwrap();
    let cache = ReadCache::with_budget(256 << 20);
    let name_of = |b: &RecordBatch| b.column(0).as_string::<i32>().value(0).to_string();
    // Row 1 and its neighbours are in row group 0; its name column's dictionary page:
    let cc = md.row_group(0).column(1);
    let dict = (cc.data_page_offset() - cc.dictionary_page_offset().expect("dictionary")) as u64;
    assert!(
        dict > 1000,
        "a dictionary page worth not fetching: {dict} bytes"
    );
    let read = |loc: &Location, p: u64| {
        let before = m.stats();
        let b = block_on(read_rows(&m, loc, &md, &[p], &[1], Some(&cache))).unwrap();
        (name_of(&b), m.stats().since(&before))
    };

    let (first, cold) = read(&at(&v1), 1);
    let hits = cache.stats().dictionary.hits;
    let (second, warm) = read(&at(&v1), 2);
    assert_eq!(cache.stats().dictionary.hits, hits + 1);
    assert!(
        warm.bytes + dict <= cold.bytes,
        "the dictionary page ({dict} bytes) was fetched again: {warm:?} after {cold:?}"
    );
    // Without a version the page is fetched and compared (and still not decoded again).
    let (unpinned, spent) = read(&plain, 2);
    assert_eq!(unpinned, second);
    assert!(spent.bytes >= warm.bytes + dict, "{spent:?} vs {warm:?}");
    // Once a pinned read has matched the page's bytes, later ones at that version skip it.
    let (_, again) = read(&at(&v1), 3);
    assert!(again.bytes + dict <= cold.bytes, "{again:?}");

    // The same size, the dictionary's first two values swapped: a new version.
    let mut changed = bytes.clone();
    let find =
        |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle).unwrap();
    let (i, j) = (
        find(&changed, first.as_bytes()),
        find(&changed, second.as_bytes()),
    );
    assert_eq!(first.len(), second.len());
    for k in 0..first.len() {
        changed.swap(i + k, j + k);
    }
    assert_ne!(changed, bytes);
    let v2 = m.put("v.parquet", changed);
    assert_ne!(v1, v2);
    let e = block_on(read_rows(&m, &at(&v1), &md, &[1], &[1], Some(&cache))).unwrap_err();
    assert_eq!(e.code(), "E_CHANGED");
    let fresh = block_on(read_rows(&m, &at(&v2), &md, &[1, 2], &[1], None)).unwrap();
    let cached = block_on(read_rows(&m, &at(&v2), &md, &[1, 2], &[1], Some(&cache))).unwrap();
    assert_eq!(
        cached, fresh,
        "the page read at the old version was not used"
    );
    assert_ne!(
        name_of(&fresh),
        first,
        "the rewrite changed the row's value (else the test shows nothing)"
    );
}

/// Dictionary pages hold at most half the budget: they never evict the metadata and
/// directories every read needs.
#[test]
fn dictionaries_take_at_most_half_the_cache() {
    use skerry_core::read::cache::ReadCache;
    let m = MemoryReader::new();
    m.put("v.parquet", varied(Compression::UNCOMPRESSED));
    let loc = Location::new("v.parquet");
    let (md, _) = block_on(read_metadata_with_page_index(&m, &loc, None)).unwrap();
    let big = ReadCache::with_budget(256 << 20);
    let every: Vec<u64> = (0..20_000).step_by(1_000).collect();
    block_on(read_rows(&m, &loc, &md, &every, &[1, 2, 3, 4], Some(&big))).unwrap();
    let all = big.stats().dictionary.bytes;
    assert!(all > 0);
    let budget = all; // room for half of them
    let small = ReadCache::with_budget(budget);
    small.put_block("b", 0, 10, bytes::Bytes::from(vec![0u8; 10]));
    block_on(read_rows(
        &m,
        &loc,
        &md,
        &every,
        &[1, 2, 3, 4],
        Some(&small),
    ))
    .unwrap();
    let s = small.stats();
    assert!(
        s.dictionary.bytes <= budget / 2 && s.dictionary.entries > 0,
        "{s:?}"
    );
    assert_eq!(s.block.entries, 1, "the block stays: {s:?}");
}

/// Damage anywhere — pages, dictionaries, the page index, the footer — gives rows or an
/// error, never a panic (in wasm a panic kills the host), with and without the cache.
#[test]
fn damaged_files_never_panic_the_row_reader() {
    use skerry_core::read::cache::ReadCache;
    for (codec, v2) in [
        (Compression::UNCOMPRESSED, false),
        (Compression::SNAPPY, true),
    ] {
        let bytes = varied_with(codec, v2, true);
        let step = (bytes.len() / 600).max(1);
        // Every byte of the offset indexes (page locations: offsets, sizes, first rows), and
        // bytes evenly spread over the rest.
        let m = MemoryReader::new();
        m.put("v.parquet", bytes.clone());
        let (md, _) = block_on(read_metadata_with_page_index(
            &m,
            &Location::new("v.parquet"),
            None,
        ))
        .unwrap();
        let mut targets: Vec<usize> = (0..bytes.len()).step_by(step).collect();
        for g in md.row_groups() {
            for c in g.columns() {
                let r = c.offset_index_range().unwrap();
                targets.extend(r.start as usize..r.end as usize);
            }
        }
        let mut answered = 0;
        for at in targets {
            let mut b = bytes.clone();
            b[at] ^= 0x5a;
            let m = MemoryReader::new();
            m.put("v.parquet", b);
            let loc = Location::new("v.parquet");
            let Ok((md, _)) = block_on(read_metadata_with_page_index(&m, &loc, None)) else {
                continue;
            };
            let cache = ReadCache::with_budget(64 << 20);
            for roots in [&[0usize, 1, 2, 3, 4][..], &[1, 5]] {
                for _ in 0..2 {
                    let r = block_on(read_rows(
                        &m,
                        &loc,
                        &md,
                        &[3, 7_001, 19_998],
                        roots,
                        Some(&cache),
                    ));
                    answered += r.is_ok() as usize;
                }
            }
        }
        assert!(answered > 0, "some damage leaves rows readable");
    }
}
