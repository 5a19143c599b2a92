//! `valueset`: the test-only toy kind — the exact set of a data file's distinct keys, which
//! prunes files for `=`/IN like a bloom filter but with no false positives. It exists to show
//! that a kind lives in one folder: everything it is (its layout, writer and reader side by
//! side, its read hook and its verify hook) is here, and outside this folder it is named in
//! exactly three places (`docs/architecture.md`, "Adding an index kind"; checked by
//! `core/tests/architecture.rs`). Built only with the `test-kinds` feature.
//!
//! Layout (`skerry-valueset-v1`), all integers little-endian:
//!
//! ```text
//! keys:    for each distinct key, ascending: varint length, key bytes
//! trailer: u64 keys-section length, u32 key count, "SKVS"
//! ```
//!
//! The manifest records the keys section as the blob's directory (offset 0, its length and
//! SHA-256), the key count as `entries`, and the smallest and largest key.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::access::{directory, BlobAccess};
use super::blob::{BlobError, BlobMeta};
use super::kind::{About, Answers, BlobSource, Kind};
use super::ordered::{get_bytes, get_varint, put_varint, MAX_KEY_BYTES};
use super::{IndexKind, IndexOptions, IndexSpec};
use crate::io::BoxFut;

pub const BLOB_TYPE: &str = "skerry-valueset-v1";
const MAGIC: &[u8; 4] = b"SKVS";
pub const TRAILER_LEN: usize = 16;

/// A file's distinct keys, ascending.
#[derive(Debug, PartialEq, Eq)]
pub struct KeySet(pub Vec<Vec<u8>>);

impl KeySet {
    /// Parses a keys section of `count` keys, verified against `sha256_hex` first; the
    /// allocation is bounded by the input (every key takes at least one byte).
    pub fn parse(bytes: &[u8], sha256_hex: Option<&str>, count: u64) -> Result<KeySet, BlobError> {
        super::blob::check_sha256(bytes, sha256_hex, "value set")?;
        if count > bytes.len() as u64 {
            return Err(BlobError::Corrupt("value set count"));
        }
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(count as usize);
        let mut pos = 0usize;
        for _ in 0..count {
            let len = get_varint(bytes, &mut pos)?;
            if len > MAX_KEY_BYTES as u64 {
                return Err(BlobError::KeyTooLarge(len as usize));
            }
            let k = get_bytes(bytes, &mut pos, len)?;
            if keys.last().is_some_and(|last| last.as_slice() >= k) {
                return Err(BlobError::Unsorted(keys.len() as u64));
            }
            keys.push(k.to_vec());
        }
        if pos != bytes.len() {
            return Err(BlobError::Corrupt("value set length"));
        }
        Ok(KeySet(keys))
    }

    pub fn holds(&self, key: &[u8]) -> bool {
        self.0.binary_search_by(|k| k.as_slice().cmp(key)).is_ok()
    }

    fn bytes(&self) -> u64 {
        64 + self.0.iter().map(|k| 24 + k.len() as u64).sum::<u64>()
    }
}

/// The blob of sorted `keys` (duplicates collapse) and its facts.
pub fn write<'k>(keys: impl Iterator<Item = &'k [u8]>) -> Result<(Vec<u8>, BlobMeta), BlobError> {
    let mut out = Vec::new();
    let mut count = 0u64;
    let (mut min, mut last): (Option<Vec<u8>>, Option<&[u8]>) = (None, None);
    for k in keys {
        match last {
            Some(l) if l == k => continue,
            Some(l) if l > k => return Err(BlobError::Unsorted(count)),
            _ => {}
        }
        if k.len() > MAX_KEY_BYTES {
            return Err(BlobError::KeyTooLarge(k.len()));
        }
        put_varint(&mut out, k.len() as u64);
        out.extend_from_slice(k);
        min.get_or_insert_with(|| k.to_vec());
        last = Some(k);
        count += 1;
    }
    let max = last.map(<[u8]>::to_vec);
    let section = out.len() as u64;
    let sha = hex::encode(Sha256::digest(&out));
    let count32 = u32::try_from(count).map_err(|_| BlobError::Corrupt("value set count"))?;
    out.extend_from_slice(&section.to_le_bytes());
    out.extend_from_slice(&count32.to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok((
        out,
        BlobMeta::new(0..section, &sha, count).with_keys(&min, &max),
    ))
}

/// The key set of a whole blob (verify reads blobs whole): its trailer, then its keys.
pub fn read_whole(blob: &[u8]) -> Result<KeySet, BlobError> {
    let t = blob
        .len()
        .checked_sub(TRAILER_LEN)
        .map(|at| &blob[at..])
        .ok_or(BlobError::Corrupt("value set trailer"))?;
    if &t[12..16] != MAGIC {
        return Err(BlobError::Corrupt("bad value set magic"));
    }
    let section = u64::from_le_bytes(t[0..8].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(t[8..12].try_into().expect("4 bytes"));
    if section != (blob.len() - TRAILER_LEN) as u64 {
        return Err(BlobError::Corrupt("value set length"));
    }
    KeySet::parse(&blob[..section as usize], None, u64::from(count))
}

pub struct Valueset;

static VALUESET: About = About {
    answers: Answers {
        prune: true,
        ..Answers::NOTHING
    },
    refuses_unique: Some(" (it cannot name the rows holding a key)"),
    ..About::new(IndexKind::Valueset, "valueset", BLOB_TYPE, "valueset-v1")
};

impl Kind for Valueset {
    fn about(&self) -> &'static About {
        &VALUESET
    }
    fn spec(&self, _: &IndexOptions) -> Result<IndexSpec, String> {
        Ok(IndexSpec::Plain(IndexKind::Valueset))
    }
    fn write(
        &self,
        _: &IndexSpec,
        _: &BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, BlobMeta)> {
        Ok(write(entries.map(|(k, _)| k))?)
    }
    fn excluded_keys(
        &self,
        blob: &[u8],
        keys: &mut dyn Iterator<Item = &[u8]>,
    ) -> Option<Result<u64, BlobError>> {
        Some(read_whole(blob).map(|set| keys.filter(|k| !set.holds(k)).count() as u64))
    }
    fn may_hold<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        keys: &'a [Vec<u8>],
    ) -> BoxFut<'a, Result<bool, BlobError>> {
        Box::pin(async move {
            let set: Arc<KeySet> = directory(
                blob,
                |bytes, m| KeySet::parse(bytes, Some(&m.directory_sha256), m.entries),
                KeySet::bytes,
            )
            .await?;
            Ok(keys.iter().any(|k| set.holds(k)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let keys: Vec<&[u8]> = vec![b"a", b"a", b"bc", b"d", b"d", b"zz"];
        let (blob, meta) = write(keys.into_iter()).unwrap();
        assert_eq!(meta.entries, 4);
        assert_eq!(meta.min_key.as_deref(), Some("61"));
        assert_eq!(meta.max_key.as_deref(), Some("7a7a"));
        let set = read_whole(&blob).unwrap();
        assert_eq!(
            set.0,
            vec![b"a".to_vec(), b"bc".to_vec(), b"d".to_vec(), b"zz".to_vec()]
        );
        assert!(set.holds(b"bc") && !set.holds(b"b") && !set.holds(b"zzz"));
        let section = &blob[..meta.directory_length as usize];
        assert_eq!(
            KeySet::parse(section, Some(&meta.directory_sha256), 4).unwrap(),
            set
        );
        // Every flipped byte is refused, never a panic.
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x41;
            let parsed = KeySet::parse(&bad[..section.len()], Some(&meta.directory_sha256), 4);
            assert!(i >= section.len() || parsed.is_err(), "byte {i}");
            let _ = read_whole(&bad);
        }
        assert!(KeySet::parse(section, None, u64::MAX).is_err());
        assert!(read_whole(&blob[1..]).is_err());
        assert!(write([b"b".as_slice(), b"a".as_slice()].into_iter()).is_err());
    }

    /// The three places outside this folder, each shown: the tag (`IndexKind::Valueset` in
    /// `index/spec.rs`), the registry line (`index/kind.rs`) and the module line
    /// (`index/mod.rs`, without which nothing here would be compiled).
    #[test]
    fn the_three_places() {
        assert_eq!(IndexKind::parse("valueset").unwrap(), IndexKind::Valueset);
        let k = super::super::kind::of(IndexKind::Valueset).expect("registered");
        assert_eq!(k.blob_type(), BLOB_TYPE);
        let spec = IndexSpec::from_options(&IndexOptions {
            kind: IndexKind::Valueset,
            ..IndexOptions::default()
        })
        .unwrap();
        let wire = serde_json::to_string(&spec).unwrap();
        assert_eq!(wire, r#"{"kind":"valueset"}"#);
        assert_eq!(serde_json::from_str::<IndexSpec>(&wire).unwrap(), spec);
    }
}
