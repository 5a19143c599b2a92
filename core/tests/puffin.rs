//! Puffin writer/reader round trips, read counts, and hostile input.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use skerry_core::formats::codec::{self, Codec};
use skerry_core::formats::puffin::*;
use skerry_core::io::{block_on, Location, MemoryReader, RangeReader};

fn spec(blob_type: &str, field: i32) -> BlobSpec {
    let mut properties = BTreeMap::new();
    properties.insert("skerry.index-id".to_string(), field.to_string());
    BlobSpec {
        blob_type: blob_type.into(),
        fields: vec![field],
        snapshot_id: 42,
        sequence_number: 7,
        properties,
    }
}

fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 31) as u8).wrapping_add(seed) % 17)
        .collect()
}

/// A three-blob file (none / lz4 / zstd) and its blob payloads.
fn sample() -> (PuffinFile, Vec<Vec<u8>>) {
    let blobs = vec![payload(10_000, 1), payload(20_000, 2), payload(30_000, 3)];
    let mut w = PuffinWriter::new();
    w.set_property("skerry.table", "t");
    w.add_blob(spec("skerry-ordered-v1", 1), &blobs[0], Codec::None)
        .unwrap();
    w.add_blob(spec("skerry-ordered-v1", 2), &blobs[1], Codec::Lz4)
        .unwrap();
    w.add_blob(spec("skerry-bitmap-v1", 3), &blobs[2], Codec::Zstd)
        .unwrap();
    (w.finish(), blobs)
}

fn store(bytes: &[u8]) -> (MemoryReader, Location) {
    let r = MemoryReader::new();
    r.put("b.puffin", bytes.to_vec());
    (r, Location::new("b.puffin"))
}

#[test]
fn layout_is_spec_exact() {
    let (f, _) = sample();
    let b = &f.bytes;
    assert_eq!(&b[..4], b"PFA1");
    assert_eq!(&b[b.len() - 4..], b"PFA1");
    assert_eq!(
        &b[b.len() - 8..b.len() - 4],
        &[0, 0, 0, 0],
        "footer written uncompressed"
    );
    let payload_len = u32::from_le_bytes(b[b.len() - 12..b.len() - 8].try_into().unwrap()) as usize;
    let footer_start = b.len() - 16 - payload_len;
    assert_eq!(
        f.footer,
        FooterLocation {
            offset: footer_start as u64,
            length: payload_len as u64 + 16
        }
    );
    assert_eq!(&b[footer_start..footer_start + 4], b"PFA1");
    let json: serde_json::Value =
        serde_json::from_slice(&b[footer_start + 4..footer_start + 4 + payload_len]).unwrap();
    let blob0 = &json["blobs"][0];
    assert_eq!(blob0["type"], "skerry-ordered-v1");
    assert_eq!(blob0["fields"], serde_json::json!([1]));
    assert_eq!(blob0["snapshot-id"], 42);
    assert_eq!(blob0["sequence-number"], 7);
    assert_eq!(blob0["offset"], 4);
    assert!(
        blob0.get("compression-codec").is_none(),
        "uncompressed blobs omit the codec"
    );
    assert_eq!(json["blobs"][1]["compression-codec"], "lz4");
    assert_eq!(json["blobs"][2]["compression-codec"], "zstd");
    assert_eq!(blob0["properties"]["skerry.index-id"], "1");
    assert!(json["properties"]["created-by"]
        .as_str()
        .unwrap()
        .starts_with("skerry "));
    // Blobs are contiguous after the header magic.
    let m = &f.metadata.blobs;
    assert_eq!(m[1].offset, m[0].offset + m[0].length);
    assert_eq!(m[2].offset + m[2].length, f.footer.offset);
}

#[test]
fn open_with_one_suffix_read_and_read_blobs() {
    let (f, blobs) = sample();
    let (r, loc) = store(&f.bytes);
    let limits = Limits::default();
    let footer = block_on(PuffinFooter::open(
        &r,
        &loc,
        DEFAULT_SUFFIX_LEN,
        None,
        &limits,
    ))
    .unwrap();
    assert_eq!(r.stats().requests, 1, "one suffix read opens a bundle");
    assert_eq!(footer.metadata, f.metadata);
    assert_eq!(footer.location, f.footer);
    for (m, want) in footer.metadata.blobs.iter().zip(&blobs) {
        let before = r.stats().requests;
        assert_eq!(
            &block_on(footer.read_blob(&r, &loc, m, &limits)).unwrap(),
            want
        );
        assert_eq!(r.stats().requests, before + 1, "one range read per blob");
    }
}

#[test]
fn open_at_known_footer_location_is_one_read() {
    let (f, _) = sample();
    let (r, loc) = store(&f.bytes);
    let footer = block_on(PuffinFooter::read_at(
        &r,
        &loc,
        f.footer,
        &Limits::default(),
    ))
    .unwrap();
    assert_eq!(footer.metadata, f.metadata);
    let s = r.stats();
    assert_eq!(s.requests, 1);
    assert_eq!(s.bytes, f.footer.length, "reads exactly the footer");
}

#[test]
fn open_with_known_size_uses_a_range_read() {
    let (f, _) = sample();
    let (r, loc) = store(&f.bytes);
    let footer = block_on(PuffinFooter::open(
        &r,
        &loc,
        1024,
        Some(f.bytes.len() as u64),
        &Limits::default(),
    ))
    .unwrap();
    assert_eq!(footer.metadata, f.metadata);
    assert_eq!(r.stats().requests, 1);
}

#[test]
fn footer_larger_than_the_suffix_costs_exactly_two_reads() {
    let mut w = PuffinWriter::new();
    for i in 0..200 {
        let mut s = spec("skerry-ordered-v1", i);
        s.properties.insert("padding".into(), "x".repeat(100));
        w.add_blob(s, &[i as u8; 8], Codec::None).unwrap();
    }
    let f = w.finish();
    assert!(f.footer.length > 4096);
    let (r, loc) = store(&f.bytes);
    let footer = block_on(PuffinFooter::open(&r, &loc, 4096, None, &Limits::default())).unwrap();
    assert_eq!(footer.metadata.blobs.len(), 200);
    assert_eq!(r.stats().requests, 2);
}

#[test]
fn whole_file_in_the_suffix_checks_the_header_magic() {
    let (f, _) = sample();
    let mut bad = f.bytes.to_vec();
    bad[0] = b'X';
    let (r, loc) = store(&bad);
    let e = block_on(PuffinFooter::open(
        &r,
        &loc,
        1 << 20,
        None,
        &Limits::default(),
    ))
    .unwrap_err();
    assert_eq!(
        e,
        PuffinError::BadMagic {
            at: "start of file"
        }
    );
}

#[test]
fn adjacent_blobs_are_read_in_one_coalesced_request() {
    let (f, blobs) = sample();
    let (r, loc) = store(&f.bytes);
    let limits = Limits::default();
    let all: Vec<&BlobMetadata> = f.metadata.blobs.iter().collect();
    let got = block_on(read_blobs(&r, &loc, &[all[2], all[0], all[1]], &limits)).unwrap();
    assert_eq!(
        got,
        vec![blobs[2].clone(), blobs[0].clone(), blobs[1].clone()]
    );
    assert_eq!(r.stats().requests, 1);
}

#[test]
fn reads_lz4_compressed_footers() {
    // Build a file with an LZ4-frame footer by hand (Skerry never writes one).
    let (f, blobs) = sample();
    let json = serde_json::to_vec(&f.metadata).unwrap();
    let payload = codec::compress(Codec::Lz4, &json).unwrap();
    let mut bytes = f.bytes[..f.footer.offset as usize].to_vec();
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&payload);
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[FLAG_FOOTER_COMPRESSED, 0, 0, 0]);
    bytes.extend_from_slice(&MAGIC);
    let (r, loc) = store(&bytes);
    let footer = block_on(PuffinFooter::open(
        &r,
        &loc,
        DEFAULT_SUFFIX_LEN,
        None,
        &Limits::default(),
    ))
    .unwrap();
    assert_eq!(footer.metadata, f.metadata);
    let b = block_on(footer.read_blob(&r, &loc, &footer.metadata.blobs[1], &Limits::default()))
        .unwrap();
    assert_eq!(b, blobs[1]);
}

#[test]
fn stored_blobs_copy_verbatim_into_a_new_generation() {
    let (f, blobs) = sample();
    let m = &f.metadata.blobs[2];
    let stored = &f.bytes[m.range().start as usize..m.range().end as usize];
    let mut w = PuffinWriter::new();
    let copied = w
        .add_stored_blob(spec("skerry-bitmap-v1", 3), stored, m.codec().unwrap())
        .clone();
    let g = w.finish();
    assert_eq!(
        decode_blob(
            &copied,
            &g.bytes[copied.range().start as usize..copied.range().end as usize],
            &Limits::default()
        )
        .unwrap(),
        blobs[2]
    );
}

// ------------------------------------------------------------------ hostile input

fn open_bytes(bytes: &[u8], limits: &Limits) -> Result<PuffinFooter, PuffinError> {
    let (r, loc) = store(bytes);
    block_on(PuffinFooter::open(&r, &loc, 256, None, limits))
}

/// Replaces the footer payload of a valid file with `json`.
fn with_footer_json(json: &[u8]) -> Vec<u8> {
    let (f, _) = sample();
    let mut bytes = f.bytes[..f.footer.offset as usize].to_vec();
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(json);
    bytes.extend_from_slice(&(json.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 0]);
    bytes.extend_from_slice(&MAGIC);
    bytes
}

#[test]
fn hostile_files_fail_with_typed_errors() {
    let limits = Limits::default();
    let (f, _) = sample();
    let good = f.bytes.to_vec();

    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] = b'2';
    assert_eq!(
        open_bytes(&bad, &limits).unwrap_err(),
        PuffinError::BadMagic { at: "end of file" }
    );

    assert!(matches!(
        open_bytes(b"PFA1", &limits),
        Err(PuffinError::Truncated(_))
    ));
    assert!(matches!(
        open_bytes(b"", &limits),
        Err(PuffinError::Truncated(_))
    ));

    // Payload size pointing before the start of the file.
    let mut bad = good.clone();
    bad[n - 12..n - 8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        open_bytes(
            &bad,
            &Limits {
                max_footer_bytes: u64::MAX,
                ..limits
            }
        ),
        Err(PuffinError::Truncated(_))
    ));
    assert!(matches!(
        open_bytes(&bad, &limits),
        Err(PuffinError::FooterTooLarge { .. })
    ));

    // Payload size that does not land on the footer's magic.
    let mut bad = good.clone();
    let p = u32::from_le_bytes(bad[n - 12..n - 8].try_into().unwrap());
    bad[n - 12..n - 8].copy_from_slice(&(p - 1).to_le_bytes());
    assert_eq!(
        open_bytes(&bad, &limits).unwrap_err(),
        PuffinError::BadMagic {
            at: "start of footer"
        }
    );

    // Unknown flags.
    let mut bad = good.clone();
    bad[n - 7] = 1;
    assert!(matches!(
        open_bytes(&bad, &limits),
        Err(PuffinError::UnsupportedFlags { .. })
    ));

    // Compressed-footer flag over an uncompressed payload.
    let mut bad = good.clone();
    bad[n - 8] = FLAG_FOOTER_COMPRESSED;
    assert!(matches!(
        open_bytes(&bad, &limits),
        Err(PuffinError::Codec(_))
    ));

    assert!(matches!(
        open_bytes(&with_footer_json(b"{not json"), &limits),
        Err(PuffinError::MalformedFooter(_))
    ));
    assert!(matches!(
        open_bytes(&with_footer_json(b"{\"blobs\": 3}"), &limits),
        Err(PuffinError::MalformedFooter(_))
    ));

    let blob = |offset: u64, length: u64| {
        format!(
            r#"{{"blobs":[{{"type":"t","fields":[1],"snapshot-id":1,"sequence-number":1,"offset":{offset},"length":{length}}}]}}"#
        )
    };
    for (o, l) in [
        (0u64, 10u64),
        (4, 1 << 40),
        (u64::MAX - 1, 10),
        (f.footer.offset, 1),
    ] {
        let e = open_bytes(&with_footer_json(blob(o, l).as_bytes()), &limits).unwrap_err();
        assert!(
            matches!(e, PuffinError::BlobOutOfBounds { .. }),
            "{o}+{l}: {e:?}"
        );
    }

    let many = format!(
        r#"{{"blobs":[{}]}}"#,
        vec![
            r#"{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":1}"#;
            11
        ]
        .join(",")
    );
    let e = open_bytes(
        &with_footer_json(many.as_bytes()),
        &Limits {
            max_blobs: 10,
            ..limits
        },
    )
    .unwrap_err();
    assert_eq!(e, PuffinError::TooManyBlobs { count: 11, max: 10 });

    // Known-location open with a footer location that is wrong.
    let (r, loc) = store(&good);
    let wrong = FooterLocation {
        offset: f.footer.offset + 1,
        length: f.footer.length - 1,
    };
    assert!(block_on(PuffinFooter::read_at(&r, &loc, wrong, &limits)).is_err());
    let past_end = FooterLocation {
        offset: f.footer.offset,
        length: f.footer.length + 10,
    };
    assert!(block_on(PuffinFooter::read_at(&r, &loc, past_end, &limits)).is_err());
}

#[test]
fn blob_reads_are_bounded_and_typed() {
    let limits = Limits::default();
    // A zstd bomb: 64 MiB of zeros in a few KiB.
    let mut w = PuffinWriter::new();
    w.add_blob(spec("bomb", 1), &vec![0u8; 64 << 20], Codec::Zstd)
        .unwrap();
    let f = w.finish();
    let (r, loc) = store(&f.bytes);
    let footer = block_on(PuffinFooter::open(
        &r,
        &loc,
        DEFAULT_SUFFIX_LEN,
        None,
        &limits,
    ))
    .unwrap();
    let small = Limits {
        max_blob_decompressed: 1 << 20,
        ..limits
    };
    let e = block_on(footer.read_blob(&r, &loc, &footer.metadata.blobs[0], &small)).unwrap_err();
    assert!(
        matches!(e, PuffinError::Codec(codec::CodecError::TooLarge { .. })),
        "{e:?}"
    );

    // Stored size cap.
    let tiny = Limits {
        max_blob_bytes: 10,
        ..limits
    };
    let e = block_on(footer.read_blob(&r, &loc, &footer.metadata.blobs[0], &tiny)).unwrap_err();
    assert!(matches!(e, PuffinError::BlobTooLarge { .. }));

    // Unknown codec, and corrupt compressed bytes.
    let (g, _) = sample();
    let mut m = g.metadata.blobs[2].clone();
    m.compression_codec = Some("snappy".into());
    assert!(matches!(
        decode_blob(
            &m,
            &g.bytes[m.range().start as usize..m.range().end as usize],
            &limits
        ),
        Err(PuffinError::Codec(codec::CodecError::Unknown(_)))
    ));
    let m = &g.metadata.blobs[2];
    let mut stored = g.bytes[m.range().start as usize..m.range().end as usize].to_vec();
    stored.truncate(stored.len() / 2);
    assert!(decode_blob(m, &stored, &limits).is_err(), "truncated blob");
    // A blob this file does not list.
    let mut other = m.clone();
    other.offset += 1;
    let (r, loc) = store(&g.bytes);
    let footer = block_on(PuffinFooter::open(
        &r,
        &loc,
        DEFAULT_SUFFIX_LEN,
        None,
        &limits,
    ))
    .unwrap();
    assert_eq!(
        block_on(footer.read_blob(&r, &loc, &other, &limits)).unwrap_err(),
        PuffinError::UnknownBlob
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the reader.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300), suffix in 12u64..400) {
        let (r, loc) = store(&bytes);
        let _ = block_on(PuffinFooter::open(&r, &loc, suffix, None, &Limits::default()));
        let _ = PuffinFooter::parse_tail(&bytes, bytes.len() as u64, &Limits::default());
    }

    /// Arbitrary damage to a valid file never panics, and whatever still opens reads
    /// blobs without panicking either.
    #[test]
    fn damaged_files_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>(), truncate in any::<bool>()) {
        let (f, _) = sample();
        let mut bytes = f.bytes.to_vec();
        for (i, b) in flips {
            let i = i.index(bytes.len());
            bytes[i] = b;
        }
        if truncate {
            let n = cut.index(bytes.len());
            bytes.truncate(n);
        }
        let (r, loc) = store(&bytes);
        let limits = Limits::default();
        if let Ok(footer) = block_on(PuffinFooter::open(&r, &loc, 512, None, &limits)) {
            for m in &footer.metadata.blobs {
                let _ = block_on(footer.read_blob(&r, &loc, m, &limits));
            }
        }
    }
}

#[test]
fn readers_are_usable_as_trait_objects() {
    let (f, _) = sample();
    let r: Arc<dyn RangeReader> = Arc::new(MemoryReader::new());
    let m = MemoryReader::new();
    m.put("x", f.bytes.clone());
    drop(r);
    let r: Arc<dyn RangeReader> = Arc::new(m);
    let footer = block_on(PuffinFooter::open(
        &*r,
        &Location::new("x"),
        DEFAULT_SUFFIX_LEN,
        None,
        &Limits::default(),
    ))
    .unwrap();
    assert_eq!(footer.metadata.blobs.len(), 3);
}
