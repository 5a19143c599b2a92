//! The IndexFile record and the read gate.

use sha2::{Digest, Sha256};
use skerry_core::formats::codec::Codec;
use skerry_core::formats::lineage::*;
use skerry_core::io::{block_on, Location, MemoryReader, RangeReader};

fn facts() -> DataFileFacts {
    DataFileFacts {
        path: "data/part-0.parquet".into(),
        sha256: "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef".into(),
        record_count: 1000,
    }
}

fn index_file() -> IndexFile {
    serde_json::from_str(include_str!("fixtures/index-file-v1-full.json")).unwrap()
}

const ACTIVE: ActiveSnapshot = ActiveSnapshot {
    snapshot_id: 9,
    sequence_number: 5,
};

fn reason(d: GateDecision) -> RejectReason {
    match d {
        GateDecision::Reject(r) => r.reason,
        GateDecision::Accept => panic!("expected a rejection"),
    }
}

#[test]
fn older_records_still_deserialize() {
    let min: IndexFile =
        serde_json::from_str(include_str!("fixtures/index-file-v1-minimal.json")).unwrap();
    assert_eq!(
        min.format_version, 1,
        "a record without format_version is version 1"
    );
    assert_eq!(min.source_sequence_number, 0);
    assert_eq!(min.compression, Codec::None);
    assert_eq!(min.fields, vec![1, 3]);
    let full = index_file();
    assert_eq!(full.compression, Codec::Zstd);
    assert_eq!(full.category, IndexCategory::Ordered);
    assert_eq!(full.blob_range(), 4..816);
    // Round trip.
    let back: IndexFile = serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
    assert_eq!(back, full);
    // A category from a newer writer still parses (and is gated like any other).
    let newer =
        include_str!("fixtures/index-file-v1-full.json").replace("\"ordered\"", "\"hologram\"");
    assert_eq!(
        serde_json::from_str::<IndexFile>(&newer).unwrap().category,
        IndexCategory::Unknown
    );
}

#[test]
fn gate_accepts_a_matching_index() {
    assert_eq!(
        ReadGate::check(
            "data/part-0.parquet",
            Some(&index_file()),
            Some(&facts()),
            ACTIVE
        ),
        GateDecision::Accept
    );
    // Same snapshot is not the future; case of the hex digest does not matter.
    let mut f = facts();
    f.sha256 = f.sha256.to_uppercase();
    let same = ActiveSnapshot {
        snapshot_id: 3,
        sequence_number: 3,
    };
    assert!(
        ReadGate::check("data/part-0.parquet", Some(&index_file()), Some(&f), same).is_accept()
    );
}

#[test]
fn gate_rejects_with_each_reason() {
    let file = "data/part-0.parquet";
    assert_eq!(
        reason(ReadGate::check(file, None, Some(&facts()), ACTIVE)),
        RejectReason::Missing
    );
    assert_eq!(
        reason(ReadGate::check(file, Some(&index_file()), None, ACTIVE)),
        RejectReason::Missing
    );

    let mut f = facts();
    f.sha256 = "00".repeat(32);
    assert_eq!(
        reason(ReadGate::check(file, Some(&index_file()), Some(&f), ACTIVE)),
        RejectReason::Checksum {
            expected: "00".repeat(32),
            found: index_file().source_sha256
        }
    );

    let mut f = facts();
    f.record_count = 999;
    assert_eq!(
        reason(ReadGate::check(file, Some(&index_file()), Some(&f), ACTIVE)),
        RejectReason::RecordCount {
            expected: 999,
            found: 1000
        }
    );

    let old = ActiveSnapshot {
        snapshot_id: 1,
        sequence_number: 2,
    };
    assert_eq!(
        reason(ReadGate::check(
            file,
            Some(&index_file()),
            Some(&facts()),
            old
        )),
        RejectReason::FutureSnapshot {
            index_sequence: 3,
            active_sequence: 2,
            index_snapshot: 3,
            active_snapshot: 1
        }
    );

    let mut ix = index_file();
    ix.source_path = "data/part-1.parquet".into();
    assert!(matches!(
        reason(ReadGate::check(file, Some(&ix), Some(&facts()), ACTIVE)),
        RejectReason::WrongFile { .. }
    ));

    let mut ix = index_file();
    ix.format_version = MAX_READABLE_FORMAT_VERSION + 1;
    assert!(matches!(
        reason(ReadGate::check(file, Some(&ix), Some(&facts()), ACTIVE)),
        RejectReason::UnsupportedFormat { .. }
    ));

    // A checksum mismatch wins over a record-count mismatch (content is the stronger fact).
    let mut f = facts();
    f.sha256 = "11".repeat(32);
    f.record_count = 1;
    assert_eq!(
        reason(ReadGate::check(file, Some(&index_file()), Some(&f), ACTIVE)).code(),
        "checksum"
    );
}

#[test]
fn rejections_carry_what_the_warning_needs() {
    let mut f = facts();
    f.record_count = 999;
    let GateDecision::Reject(r) =
        ReadGate::check("data/part-0.parquet", Some(&index_file()), Some(&f), ACTIVE)
    else {
        panic!()
    };
    assert_eq!(r.index_id, Some(7));
    assert_eq!(r.data_file, "data/part-0.parquet");
    assert_eq!(r.bundle_path.as_deref(), Some("bundles/t/part-0.g1.puffin"));
    assert_eq!(r.reason.code(), "record_count");
    assert_eq!(
        r.to_string(),
        "Index bundles/t/part-0.g1.puffin rejected for data/part-0.parquet: record count mismatch (expected 999, got 1000)"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["reason"], "record_count");
    assert_eq!(json["expected"], 999);
}

#[test]
fn blob_checksum_detects_flipped_bytes() {
    let blob = b"some stored blob bytes".to_vec();
    let mut ix = index_file();
    ix.blob_sha256 = sha256_hex(&blob);
    ix.blob_length = blob.len() as u64;
    assert!(ReadGate::check_blob(&ix, &blob).is_accept());
    let mut flipped = blob.clone();
    flipped[3] ^= 0x01;
    assert_eq!(
        reason(ReadGate::check_blob(&ix, &flipped)).code(),
        "blob_checksum"
    );
    assert_eq!(
        reason(ReadGate::check_blob(&ix, &blob[1..])).code(),
        "blob_checksum"
    );
}

#[test]
fn streaming_sha256_uses_bounded_reads() {
    let bytes: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 256) as u8).collect();
    let m = MemoryReader::new();
    m.put("big.parquet", bytes.clone());
    let loc = Location::new("big.parquet");
    let (digest, size) = block_on(sha256_object(&m, &loc, None, 64 * 1024)).unwrap();
    assert_eq!(digest, hex::encode(Sha256::digest(&bytes)));
    assert_eq!(size, bytes.len() as u64);
    let s = m.stats();
    // One head + ceil(size / chunk) reads, none larger than the chunk.
    assert_eq!(s.requests, 1 + (bytes.len() as u64).div_ceil(64 * 1024));
    assert_eq!(s.bytes, bytes.len() as u64);
    // With the size known no head is needed; an empty object hashes to the empty digest.
    m.put("empty", Vec::new());
    let (d, _) = block_on(sha256_object(&m, &Location::new("empty"), Some(0), 1024)).unwrap();
    assert_eq!(d, hex::encode(Sha256::digest(b"")));
    // A file changed during hashing is detected through its pinned version.
    let pinned = Location::new("big.parquet").with_version("1");
    m.put("big.parquet", bytes);
    assert!(block_on(sha256_object(&m, &pinned, None, 64 * 1024)).is_err());
}

/// Decision 77: the footer digest is SHA-256 over a domain, the size and the footer — never
/// the whole-file SHA-256 of the same bytes, and changed by the size or any footer byte.
#[test]
fn footer_digest_binds_size_and_every_footer_byte() {
    use skerry_core::formats::lineage::{footer_digest, sha256_hex, FOOTER_DIGEST_DOMAIN};
    let footer = b"\x15\x02\x19\x2c metadata \x0c\x00\x00\x00PAR1".to_vec();
    let d = footer_digest(4096, &footer);
    assert_eq!(d.len(), 64);
    assert_eq!(d, footer_digest(4096, &footer), "deterministic");
    assert_ne!(
        d,
        sha256_hex(&footer),
        "domain-separated from a whole-file hash"
    );
    assert_ne!(d, footer_digest(4097, &footer), "the size is bound");
    for i in 0..footer.len() {
        let mut f = footer.clone();
        f[i] ^= 1;
        assert_ne!(d, footer_digest(4096, &f), "byte {i} is bound");
    }
    let mut whole = FOOTER_DIGEST_DOMAIN.to_vec();
    whole.extend_from_slice(&4096u64.to_le_bytes());
    whole.extend_from_slice(&footer);
    assert_eq!(d, sha256_hex(&whole), "the documented layout");
}
