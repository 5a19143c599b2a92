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
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
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
    let rows = block_on(read_rows(&m, &loc, &md, &[612_345], &[0, 1])).unwrap();
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
    let rows = block_on(read_rows(&m, &loc, &md, &want, &[1, 0])).unwrap();
    let ids: Vec<i64> = rows.column(1).as_primitive::<Int64Type>().values().to_vec();
    assert_eq!(ids, want.iter().map(|&p| p as i64).collect::<Vec<_>>());
    assert_eq!(rows.schema().field(0).name(), "name");
    // Nothing requested: nothing read; a position past the end is a typed error.
    let before = m.stats();
    assert_eq!(
        block_on(read_rows(&m, &loc, &md, &[], &[0]))
            .unwrap()
            .num_rows(),
        0
    );
    assert_eq!(m.stats().since(&before).requests, 0);
    assert_eq!(
        block_on(read_rows(&m, &loc, &md, &[ROWS as u64], &[0]))
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
    let rows = block_on(read_rows(&m, &loc, &md, &[7, 500_001], &[0])).unwrap();
    assert_eq!(
        rows.column(0).as_primitive::<Int64Type>().values().to_vec(),
        vec![7, 500_001]
    );
}
