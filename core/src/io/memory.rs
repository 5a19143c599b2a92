//! An in-memory [`RangeReader`]: objects held as `Bytes`, each `put` a new version.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::RwLock;

use bytes::Bytes;

use super::{check_range, BoxFut, IoCounters, IoError, Location, ObjectMeta, RangeReader};

/// Objects in memory. Versions are `"1"`, `"2"`, … per path, bumped by every [`put`].
///
/// [`put`]: MemoryReader::put
#[derive(Debug, Default)]
pub struct MemoryReader {
    objects: RwLock<HashMap<String, (Bytes, u64)>>,
    counters: IoCounters,
}

impl MemoryReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `bytes` at `path` and returns the new version.
    pub fn put(&self, path: &str, bytes: impl Into<Bytes>) -> String {
        let mut objects = self.objects.write().expect("memory reader lock");
        let version = objects.get(path).map(|(_, v)| v + 1).unwrap_or(1);
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
    fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
        Box::pin(async move {
            let (bytes, version) = self.get(loc)?;
            self.counters.record_request(0);
            Ok(ObjectMeta {
                size: bytes.len() as u64,
                version: Some(version),
            })
        })
    }

    fn read_range<'a>(
        &'a self,
        loc: &'a Location,
        range: Range<u64>,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            check_range(loc, &range)?;
            let (bytes, _) = self.get(loc)?;
            let size = bytes.len() as u64;
            if range.end > size {
                return Err(super::past_end(loc, &range, size));
            }
            self.counters.record_request(range.end - range.start);
            Ok(bytes.slice(range.start as usize..range.end as usize))
        })
    }

    fn read_suffix<'a>(
        &'a self,
        loc: &'a Location,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            let (bytes, version) = self.get(loc)?;
            let size = bytes.len() as u64;
            let start = size.saturating_sub(len);
            self.counters.record_request(size - start);
            Ok((
                bytes.slice(start as usize..),
                ObjectMeta {
                    size,
                    version: Some(version),
                },
            ))
        })
    }

    fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let (bytes, _) = self.get(loc)?;
            self.counters.record_request(bytes.len() as u64);
            Ok(bytes)
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}
