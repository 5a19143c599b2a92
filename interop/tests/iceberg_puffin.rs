//! Puffin interoperability with an independent implementation: iceberg-rust's
//! `iceberg::puffin` reads the bundles Skerry writes, and Skerry reads the files iceberg-rust
//! writes (uncompressed and LZ4-compressed footers; blobs uncompressed, LZ4 and zstd).

use std::collections::{BTreeMap, HashMap};

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, PuffinReader, PuffinWriter};
use skerry_core::formats::codec::Codec;
use skerry_core::formats::puffin::{self as sp, BlobSpec, Limits, PuffinFooter};
use skerry_core::io::{Location, ObjectStoreReader, RangeReader};

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i / 7) as u8).wrapping_mul(seed)).collect()
}

fn blob_spec(t: &str, field: i32, snapshot: i64, seq: i64, props: &[(&str, &str)]) -> BlobSpec {
    BlobSpec {
        blob_type: t.into(),
        fields: vec![field],
        snapshot_id: snapshot,
        sequence_number: seq,
        properties: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[tokio::test]
async fn iceberg_rust_reads_skerry_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skerry.puffin");
    let blobs = [payload(50_000, 3), payload(1_000, 5)];

    let mut w = sp::PuffinWriter::new();
    w.set_property("skerry.table", "orders");
    w.add_blob(
        blob_spec("skerry-ordered-v1", 1, 101, 11, &[("skerry.index-id", "7")]),
        &blobs[0],
        Codec::Zstd,
    )
    .unwrap();
    w.add_blob(
        blob_spec("skerry-bloom-v1", 2, 101, 11, &[]),
        &blobs[1],
        Codec::None,
    )
    .unwrap();
    let file = w.finish();
    std::fs::write(&path, &file.bytes).unwrap();

    let io = FileIO::new_with_fs();
    let reader = PuffinReader::new(io.new_input(path.to_str().unwrap()).unwrap());
    let meta = reader.file_metadata().await.unwrap().clone();
    assert_eq!(meta.blobs().len(), 2);
    assert!(meta.properties()["created-by"].starts_with("skerry "));
    assert_eq!(meta.properties()["skerry.table"], "orders");

    let m0 = &meta.blobs()[0];
    assert_eq!(m0.blob_type(), "skerry-ordered-v1");
    assert_eq!(m0.fields(), &[1]);
    assert_eq!(m0.snapshot_id(), 101);
    assert_eq!(m0.sequence_number(), 11);
    assert!(matches!(m0.compression_codec(), CompressionCodec::Zstd(_)));
    assert_eq!(m0.properties()["skerry.index-id"], "7");
    assert_eq!(meta.blobs()[1].compression_codec(), CompressionCodec::None);

    for (m, want) in meta.blobs().iter().zip(&blobs) {
        let b = reader.blob(m).await.unwrap();
        assert_eq!(b.data(), &want[..], "{}", m.blob_type());
        assert_eq!(b.fields(), m.fields());
    }
}

async fn write_with_iceberg(
    path: &str,
    compress_footer: bool,
    blobs: &[(Vec<u8>, CompressionCodec)],
) {
    let io = FileIO::new_with_fs();
    let out = io.new_output(path).unwrap();
    let mut props = HashMap::new();
    props.insert(
        "created-by".to_string(),
        "iceberg-rust interop test".to_string(),
    );
    let mut w = PuffinWriter::new(&out, props, compress_footer)
        .await
        .unwrap();
    for (i, (data, codec)) in blobs.iter().enumerate() {
        let mut p = HashMap::new();
        p.insert("n".to_string(), i.to_string());
        let blob = Blob::builder()
            .r#type(format!("test-blob-{i}"))
            .fields(vec![i as i32 + 10])
            .snapshot_id(1000 + i as i64)
            .sequence_number(i as i64)
            .data(data.clone())
            .properties(p)
            .build();
        w.add(blob, *codec).await.unwrap();
    }
    w.close().await.unwrap();
}

#[tokio::test]
async fn skerry_reads_iceberg_rust_files() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = vec![
        (payload(40_000, 7), CompressionCodec::None),
        (payload(40_000, 11), CompressionCodec::zstd_default()),
        (payload(10, 13), CompressionCodec::None),
    ];
    let name = "iceberg.puffin";
    let full = dir.path().join(name);
    write_with_iceberg(full.to_str().unwrap(), false, &blobs).await;

    let reader =
        ObjectStoreReader::from_url(&format!("file://{}", dir.path().display()), &[]).unwrap();
    let loc = Location::new(name);
    let limits = Limits::default();
    let footer = PuffinFooter::open(&reader, &loc, sp::DEFAULT_SUFFIX_LEN, None, &limits)
        .await
        .unwrap();
    assert_eq!(reader.counters().snapshot().requests, 1, "one suffix read");
    assert_eq!(
        footer.metadata.properties["created-by"],
        "iceberg-rust interop test"
    );
    assert_eq!(footer.metadata.blobs.len(), 3);
    for (i, (m, (want, _))) in footer.metadata.blobs.iter().zip(&blobs).enumerate() {
        assert_eq!(m.blob_type, format!("test-blob-{i}"));
        assert_eq!(m.fields, vec![i as i32 + 10]);
        assert_eq!(m.snapshot_id, 1000 + i as i64);
        assert_eq!(m.sequence_number, i as i64);
        let expected: BTreeMap<String, String> = [("n".to_string(), i.to_string())].into();
        assert_eq!(m.properties, expected);
        let got = footer.read_blob(&reader, &loc, m, &limits).await.unwrap();
        assert_eq!(&got, want, "blob {i}");
    }
    assert_eq!(footer.metadata.blobs[1].codec().unwrap(), Codec::Zstd);
    // All three blobs in one coalesced request.
    let all: Vec<_> = footer.metadata.blobs.iter().collect();
    let before = reader.counters().snapshot().requests;
    let got = sp::read_blobs(&reader, &loc, &all, &limits).await.unwrap();
    assert_eq!(got[2], blobs[2].0);
    assert_eq!(reader.counters().snapshot().requests, before + 1);
}

/// Why Skerry writes footers uncompressed and blobs uncompressed or zstd: iceberg-rust (like
/// the Java reader) does not handle LZ4. If this starts failing, LZ4 became interoperable and
/// docs/puffin.md should say so.
#[tokio::test]
async fn iceberg_rust_does_not_handle_lz4() {
    let dir = tempfile::tempdir().unwrap();
    let io = FileIO::new_with_fs();
    let out = io
        .new_output(dir.path().join("x.puffin").to_str().unwrap())
        .unwrap();
    let mut w = PuffinWriter::new(&out, HashMap::new(), false)
        .await
        .unwrap();
    let blob = Blob::builder()
        .r#type("t".into())
        .fields(vec![])
        .snapshot_id(1)
        .sequence_number(1)
        .data(vec![1; 100])
        .properties(HashMap::new())
        .build();
    assert!(w.add(blob, CompressionCodec::Lz4).await.is_err());

    // And it cannot read an LZ4 blob Skerry could write.
    let mut sw = sp::PuffinWriter::new();
    sw.add_blob(blob_spec("t", 1, 1, 1, &[]), &payload(1000, 3), Codec::Lz4)
        .unwrap();
    let path = dir.path().join("lz4.puffin");
    std::fs::write(&path, &sw.finish().bytes).unwrap();
    let reader = PuffinReader::new(io.new_input(path.to_str().unwrap()).unwrap());
    let meta = reader.file_metadata().await.unwrap().clone();
    assert!(reader.blob(&meta.blobs()[0]).await.is_err());
}
