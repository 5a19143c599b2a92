//! Range-read I/O: object_store (file://, memory://), memory reader, cache, coalescing,
//! counters, versions and typed errors.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use skerry_core::io::*;

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// A file:// reader rooted at a fresh temp dir, with `obj.bin` written through the store.
async fn file_reader(bytes: &[u8]) -> (tempfile::TempDir, ObjectStoreReader) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let r = ObjectStoreReader::from_url(&url, &[]).unwrap();
    put(&r, "obj.bin", bytes).await;
    (dir, r)
}

async fn put(r: &ObjectStoreReader, path: &str, bytes: &[u8]) {
    r.store()
        .put(&r.resolve(path).unwrap(), PutPayload::from(bytes.to_vec()))
        .await
        .unwrap();
}

async fn exercise(r: &ObjectStoreReader, bytes: &[u8]) {
    let loc = Location::new("obj.bin");
    let n = bytes.len() as u64;
    let meta = r.head(&loc).await.unwrap();
    assert_eq!(meta.size, n);
    assert!(meta.version.is_some(), "the store reports an ETag");

    let before = r.stats();
    assert_eq!(
        &r.read_range(&loc, 10..1000).await.unwrap()[..],
        &bytes[10..1000]
    );
    let (tail, m) = r.read_suffix(&loc, 500).await.unwrap();
    assert_eq!(&tail[..], &bytes[bytes.len() - 500..]);
    assert_eq!(m.size, n);
    let (all_tail, _) = r.read_suffix(&loc, n * 2).await.unwrap();
    assert_eq!(
        &all_tail[..],
        bytes,
        "a suffix longer than the object is the whole object"
    );
    assert_eq!(&r.read_all(&loc).await.unwrap()[..], bytes);
    let s = r.stats().since(&before);
    assert_eq!(s.requests, 4);
    assert_eq!(s.bytes, 990 + 500 + n + n);

    // Versioned reads: the current version reads, a stale one is refused.
    let pinned = loc.clone().with_version(meta.version.clone().unwrap());
    assert_eq!(r.read_range(&pinned, 0..4).await.unwrap().len(), 4);
    let stale = loc.clone().with_version("not-the-etag");
    assert!(matches!(
        r.read_range(&stale, 0..4).await,
        Err(IoError::Changed { .. })
    ));
    assert!(matches!(
        r.read_suffix(&stale, 4).await,
        Err(IoError::Changed { .. })
    ));

    // Typed errors.
    assert!(matches!(
        r.read_range(&Location::new("missing"), 0..4).await,
        Err(IoError::NotFound { .. })
    ));
    assert!(matches!(
        r.head(&Location::new("missing")).await,
        Err(IoError::NotFound { .. })
    ));
    assert!(matches!(
        r.read_range(&loc, 5..5).await,
        Err(IoError::InvalidRange { .. })
    ));
    assert!(matches!(
        r.read_range(&loc, n - 2..n + 10).await,
        Err(IoError::OutOfRange { .. })
    ));
    assert!(
        matches!(r.read_range(&loc, n + 10..n + 20).await, Err(IoError::OutOfRange { size, .. }) if size == n)
    );
}

#[tokio::test]
async fn object_store_reader_on_local_disk() {
    let bytes = data(100_000);
    let (_dir, r) = file_reader(&bytes).await;
    exercise(&r, &bytes).await;
}

#[tokio::test]
async fn object_store_reader_in_memory() {
    let bytes = data(100_000);
    let r = ObjectStoreReader::from_url("memory:///overlay", &[]).unwrap();
    put(&r, "obj.bin", &bytes).await;
    exercise(&r, &bytes).await;
    // Locations resolve below the URL's root.
    assert_eq!(
        r.resolve("a/b.puffin").unwrap(),
        Path::from("overlay/a/b.puffin")
    );
}

#[tokio::test]
async fn rewriting_a_file_in_place_changes_its_version() {
    let (_dir, r) = file_reader(&data(5000)).await;
    let loc = Location::new("obj.bin");
    let v1 = r.head(&loc).await.unwrap().version.unwrap();
    // Same path, different bytes and size.
    put(&r, "obj.bin", &data(6000)).await;
    let v2 = r.head(&loc).await.unwrap().version.unwrap();
    assert_ne!(v1, v2);
    let pinned = loc.with_version(v1);
    assert!(matches!(
        r.read_range(&pinned, 0..10).await,
        Err(IoError::Changed { .. })
    ));
}

#[test]
fn bad_urls_are_typed_errors() {
    assert!(matches!(
        ObjectStoreReader::from_url("not a url", &[]),
        Err(IoError::InvalidUrl { .. })
    ));
    assert!(matches!(
        ObjectStoreReader::from_url("ftp://host/x", &[]),
        Err(IoError::InvalidUrl { .. })
    ));
    assert!(matches!(
        ObjectStoreReader::from_url("gs://bucket/x", &[]),
        Err(IoError::InvalidUrl { .. })
    ));
}

#[cfg(feature = "s3")]
#[test]
fn s3_urls_take_endpoint_and_credentials_from_options() {
    let opts = |k: &str, v: &str| (k.to_string(), v.to_string());
    let r = ObjectStoreReader::from_url(
        "s3://bucket/some/prefix",
        &[
            opts("aws_endpoint", "http://127.0.0.1:9"),
            opts("aws_allow_http", "true"),
            opts("aws_access_key_id", "k"),
            opts("aws_secret_access_key", "s"),
            opts("aws_region", "us-east-1"),
        ],
    )
    .unwrap();
    assert_eq!(r.resolve("x").unwrap(), Path::from("some/prefix/x"));
    let bad = ObjectStoreReader::from_url("s3://bucket/p", &[opts("no_such_option", "1")]);
    assert!(matches!(bad, Err(IoError::InvalidUrl { .. })));
}

#[test]
fn memory_reader_counts_and_versions() {
    let m = MemoryReader::new();
    let v1 = m.put("a", data(100));
    let loc = Location::new("a");
    block_on(m.read_range(&loc, 0..10)).unwrap();
    block_on(m.read_range(&loc, 50..60)).unwrap();
    assert_eq!(
        m.stats(),
        IoStats {
            requests: 2,
            bytes: 20,
            ..Default::default()
        }
    );
    let v2 = m.put("a", data(120));
    assert_ne!(v1, v2);
    assert!(matches!(
        block_on(m.read_range(&loc.clone().with_version(v1), 0..1)),
        Err(IoError::Changed { .. })
    ));
    assert!(block_on(m.read_range(&loc.with_version(v2), 0..1)).is_ok());
}

#[test]
#[allow(clippy::reversed_empty_ranges)] // an inverted range is part of what is tested
fn read_ranges_coalesces_near_ranges_into_one_request() {
    let m = MemoryReader::new();
    let bytes = data(1 << 20);
    m.put("f", bytes.clone());
    let loc = Location::new("f");
    // Three ranges within the gap of each other, given out of order: one request.
    let ranges = vec![20_000..30_000, 0..100, 1000..2000];
    let got = block_on(m.read_ranges(&loc, &ranges)).unwrap();
    for (r, g) in ranges.iter().zip(&got) {
        assert_eq!(&g[..], &bytes[r.start as usize..r.end as usize]);
    }
    assert_eq!(m.stats().requests, 1);
    assert_eq!(m.stats().bytes, 30_000);
    // Ranges farther apart than the gap: one request each.
    let far = vec![
        0..10,
        DEFAULT_COALESCE_GAP + 100..DEFAULT_COALESCE_GAP + 110,
        900_000..900_010,
    ];
    let got = block_on(m.read_ranges(&loc, &far)).unwrap();
    assert_eq!(got.iter().map(|b| b.len()).sum::<usize>(), 30);
    assert_eq!(m.stats().requests, 1 + 3);
    // Overlapping and duplicate ranges are served from one request.
    let dup = vec![100..200, 150..250, 100..200];
    let got = block_on(m.read_ranges(&loc, &dup)).unwrap();
    assert_eq!(&got[1][..], &bytes[150..250]);
    assert_eq!(m.stats().requests, 5);
    assert!(block_on(m.read_ranges(&loc, &[10..5])).is_err());
}

#[test]
fn cache_hits_contained_ranges_and_keys_on_version() {
    let m = Arc::new(MemoryReader::new());
    let v1 = m.put("f", data(10_000));
    let c = CachedReader::new(m.clone(), 1 << 20);
    let loc = Location::new("f").with_version(v1);
    block_on(c.read_range(&loc, 0..4000)).unwrap();
    // Inside the cached range: a hit, no request reaches the store.
    assert_eq!(
        &block_on(c.read_range(&loc, 100..200)).unwrap()[..],
        &data(10_000)[100..200]
    );
    block_on(c.read_range(&loc, 0..4000)).unwrap();
    assert_eq!(m.stats().requests, 1);
    let s = c.stats();
    assert_eq!((s.cache_hits, s.cache_misses, s.requests), (2, 1, 1));
    // Partly outside: a miss.
    block_on(c.read_range(&loc, 3000..5000)).unwrap();
    assert_eq!(m.stats().requests, 2);
    // A new version of the object is a different cache key (and the stale one is refused
    // by the store, not served from the cache's other key).
    let v2 = m.put("f", data(20_000));
    let loc2 = Location::new("f").with_version(v2);
    block_on(c.read_range(&loc2, 100..200)).unwrap();
    assert_eq!(m.stats().requests, 3);
    // Suffix reads populate the cache for later range reads inside them.
    let (_, meta) = block_on(c.read_suffix(&loc2, 1000)).unwrap();
    block_on(c.read_range(&loc2, meta.size - 500..meta.size)).unwrap();
    assert_eq!(m.stats().requests, 4);
    // Invalidation drops every version of the path.
    assert!(c.invalidate("f") > 0);
    assert_eq!(c.cached_bytes(), 0);
    block_on(c.read_range(&loc2, 100..200)).unwrap();
    assert_eq!(m.stats().requests, 5);
}

#[test]
fn cache_stays_within_its_budget_and_evicts_least_recently_used() {
    let m = Arc::new(MemoryReader::new());
    m.put("f", data(100_000));
    let c = CachedReader::new(m.clone(), 3000);
    let loc = Location::new("f");
    block_on(c.read_range(&loc, 0..1000)).unwrap(); // A
    block_on(c.read_range(&loc, 10_000..11_000)).unwrap(); // B
    block_on(c.read_range(&loc, 20_000..21_000)).unwrap(); // C
    assert_eq!(c.cached_bytes(), 3000);
    block_on(c.read_range(&loc, 0..10)).unwrap(); // touch A
    block_on(c.read_range(&loc, 30_000..31_000)).unwrap(); // D evicts B (least recently used)
    assert!(c.cached_bytes() <= 3000);
    let before = m.stats().requests;
    block_on(c.read_range(&loc, 0..1000)).unwrap(); // A still cached
    block_on(c.read_range(&loc, 20_000..21_000)).unwrap(); // C still cached
    assert_eq!(m.stats().requests, before);
    block_on(c.read_range(&loc, 10_000..11_000)).unwrap(); // B was evicted
    assert_eq!(m.stats().requests, before + 1);
    // Larger than the whole budget: served, never cached.
    block_on(c.read_range(&loc, 50_000..60_000)).unwrap();
    assert!(c.cached_bytes() <= 3000);
}

#[tokio::test]
async fn cache_works_over_object_store_as_a_trait_object() {
    let bytes = data(50_000);
    let (_dir, r) = file_reader(&bytes).await;
    let inner: Arc<dyn RangeReader> = Arc::new(r);
    let c = CachedReader::new(inner.clone(), 1 << 20);
    let loc = Location::new("obj.bin");
    let got = c.read_ranges(&loc, &[0..10, 100..110]).await.unwrap();
    assert_eq!(&got[1][..], &bytes[100..110]);
    c.read_range(&loc, 5..105).await.unwrap();
    assert_eq!(inner.stats().requests, 1);
    assert_eq!(c.stats().cache_hits, 1);
}

/// Local ranges up to `LOCAL_INLINE_MAX` are read in place, larger ones through the store:
/// the same bytes, the same version check (the store's own ETag), the same typed errors —
/// also when several ranges of one object are read from one open file.
#[tokio::test]
async fn local_reads_in_place_and_through_the_store_agree() {
    let n = (LOCAL_INLINE_MAX * 3) as usize;
    let bytes = data(n);
    let (dir, r) = file_reader(&bytes).await;
    let loc = Location::new("obj.bin");
    let v = r.head(&loc).await.unwrap().version.unwrap();
    let pinned = loc.clone().with_version(v.clone());
    for range in [
        0..LOCAL_INLINE_MAX,
        7..LOCAL_INLINE_MAX * 2 + 5,
        n as u64 - 3..n as u64,
    ] {
        let got = r.read_range(&pinned, range.clone()).await.unwrap();
        assert_eq!(&got[..], &bytes[range.start as usize..range.end as usize]);
    }
    // Several ranges: each merged range one request, the answers in input order.
    let ranges = [
        LOCAL_INLINE_MAX..LOCAL_INLINE_MAX + 8,
        0..10,
        20..30,
        n as u64 - 4..n as u64,
    ];
    let before = r.stats().requests;
    let got = r.read_ranges_gap(&pinned, &ranges, 16).await.unwrap();
    for (g, range) in got.iter().zip(&ranges) {
        assert_eq!(&g[..], &bytes[range.start as usize..range.end as usize]);
    }
    assert_eq!(r.stats().requests - before, 3, "0..10 and 20..30 share one");
    assert!(matches!(
        r.read_ranges_gap(&loc, &[0..4, n as u64 - 2..n as u64 + 1], 0)
            .await,
        Err(IoError::OutOfRange { size, .. }) if size == n as u64
    ));
    assert!(matches!(
        r.read_ranges_gap(&loc, &[8..4, 10..12], 0).await,
        Err(IoError::InvalidRange { .. })
    ));
    assert!(matches!(
        r.read_ranges_gap(&Location::new("missing.bin"), &[0..4, 10..12], 0)
            .await,
        Err(IoError::NotFound { .. })
    ));
    // A new modification time alone changes the version: refused in place and by the store.
    let f = std::fs::File::options()
        .write(true)
        .open(dir.path().join("obj.bin"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(90))
        .unwrap();
    drop(f);
    for range in [0..16, 0..LOCAL_INLINE_MAX * 2] {
        assert!(
            matches!(
                r.read_range(&pinned, range).await,
                Err(IoError::Changed { .. })
            ),
            "a stale pin is refused"
        );
    }
    assert!(
        matches!(
            r.read_ranges_gap(&pinned, &[0..4, 100..104], 0).await,
            Err(IoError::Changed { .. })
        ),
        "a stale pin is refused for several ranges too"
    );
    let now = r.head(&loc).await.unwrap().version.unwrap();
    assert_ne!(now, v);
    assert_eq!(
        r.read_range(&loc.clone().with_version(now), 0..16)
            .await
            .unwrap()
            .len(),
        16
    );
    // A directory is not an object.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    assert!(matches!(
        r.read_range(&Location::new("sub"), 0..4).await,
        Err(IoError::NotFound { .. })
    ));
}
