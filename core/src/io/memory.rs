//! An in-memory [`RangeReader`]: objects held as `Bytes`, each `put` a new version.

use std::collections::HashMap;
use std::sync::RwLock;

use bytes::Bytes;

use super::{
    at_most, check_range, BoxFut, IoCounters, IoError, Location, ObjectMeta, RangeReader, Reply,
    Request,
};

/// Objects in memory. Versions are `"1"`, `"2"`, …, one per [`put`] and never repeated — not
/// for a path deleted and written again, nor by another `MemoryReader` of the process (two
/// may share a read cache) — so a version names one content ([`RangeReader::content_versions`]).
///
/// [`put`]: MemoryReader::put
#[derive(Debug, Default)]
pub struct MemoryReader {
    objects: RwLock<HashMap<String, (Bytes, u64)>>,
    counters: IoCounters,
}

/// The last version any [`MemoryReader`] gave out.
static LAST_VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl MemoryReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `bytes` at `path` and returns the new version.
    pub fn put(&self, path: &str, bytes: impl Into<Bytes>) -> String {
        let mut objects = self.objects.write().expect("memory reader lock");
        let version = LAST_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        objects.insert(path.to_string(), (bytes.into(), version));
        version.to_string()
    }

    pub fn delete(&self, path: &str) -> bool {
        self.objects
            .write()
            .expect("memory reader lock")
            .remove(path)
            .is_some()
    }

    fn get(&self, loc: &Location) -> Result<(Bytes, String), IoError> {
        let objects = self.objects.read().expect("memory reader lock");
        let (bytes, version) = objects.get(&*loc.path).ok_or_else(|| IoError::NotFound {
            path: loc.path.to_string(),
        })?;
        let version = version.to_string();
        if let Some(expected) = &loc.version {
            if **expected != *version {
                return Err(IoError::Changed {
                    path: loc.path.to_string(),
                    expected: expected.to_string(),
                });
            }
        }
        Ok((bytes.clone(), version))
    }
}

impl RangeReader for MemoryReader {
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            if let Request::Range(r) = &req {
                check_range(loc, r)?;
            }
            let (bytes, version) = self.get(loc)?;
            let size = bytes.len() as u64;
            let meta = ObjectMeta {
                size,
                version: Some(version),
            };
            let reply = match req {
                Request::Head => Reply::meta(meta),
                Request::Range(r) if r.end > size => return Err(super::past_end(loc, &r, size)),
                Request::Range(r) => Reply::bytes(bytes.slice(r.start as usize..r.end as usize)),
                Request::Suffix(len) | Request::Tail { len, .. } => {
                    Reply::tail(bytes.slice(size.saturating_sub(len) as usize..), meta)
                }
                Request::All(max) => Reply::bytes(at_most(loc, bytes, max)?),
            };
            self.counters.record_request(reply.bytes.len() as u64);
            Ok(reply)
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    /// Every read checks the pin, and versions are never reused.
    fn content_versions(&self, loc: &Location) -> bool {
        loc.version.is_some()
    }
}
