//! A native [`RangeReader`] addressed by full URLs (`file:///…`, `s3://bucket/…`): how the
//! overlay reads data files that live wherever their table lives.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::{BoxFut, IoCounters, IoError, Location, ObjectMeta, ObjectStoreReader, RangeReader};

/// Reads objects by full URL, one [`ObjectStoreReader`] per scheme + authority.
pub struct UrlReader {
    options: Vec<(String, String)>,
    timeout: Option<std::time::Duration>,
    stores: Mutex<HashMap<String, Arc<ObjectStoreReader>>>,
    counters: IoCounters,
}

impl UrlReader {
    /// `options` are passed to every store opened (e.g. S3 endpoint and credentials).
    pub fn new(options: Vec<(String, String)>) -> Self {
        UrlReader {
            options,
            timeout: None,
            stores: Mutex::new(HashMap::new()),
            counters: IoCounters::default(),
        }
    }

    /// Every request of every store opened later fails [`IoError::Timeout`] past `timeout`.
    pub fn with_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The store for `url` and the location of the object inside it.
    pub fn resolve(&self, loc: &Location) -> Result<(Arc<ObjectStoreReader>, Location), IoError> {
        let parsed = url::Url::parse(&loc.path).map_err(|e| IoError::InvalidUrl {
            url: loc.path.to_string(),
            reason: e.to_string(),
        })?;
        let base = format!("{}://{}/", parsed.scheme(), parsed.authority());
        let store = {
            let mut stores = self.stores.lock().expect("url reader");
            match stores.get(&base) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(
                        ObjectStoreReader::from_url(&base, &self.options)?
                            .with_timeout(self.timeout),
                    );
                    stores.insert(base.clone(), s.clone());
                    s
                }
            }
        };
        let path = percent_decode(parsed.path().trim_start_matches('/'));
        let mut inner = Location::new(path);
        inner.version = loc.version.clone();
        Ok((store, inner))
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

impl RangeReader for UrlReader {
    fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let m = s.head(&l).await?;
            self.counters.record_request(0);
            Ok(m)
        })
    }
    fn read_range<'a>(
        &'a self,
        loc: &'a Location,
        range: Range<u64>,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let b = s.read_range(&l, range).await?;
            self.counters.record_request(b.len() as u64);
            Ok(b)
        })
    }
    fn read_suffix<'a>(
        &'a self,
        loc: &'a Location,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let r = s.read_suffix(&l, len).await?;
            self.counters.record_request(r.0.len() as u64);
            Ok(r)
        })
    }
    fn read_tail<'a>(
        &'a self,
        loc: &'a Location,
        expected_size: u64,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let r = s.read_tail(&l, expected_size, len).await?;
            self.counters.record_request(r.0.len() as u64);
            Ok(r)
        })
    }
    fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let b = s.read_all(&l).await?;
            self.counters.record_request(b.len() as u64);
            Ok(b)
        })
    }
    fn read_all_max<'a>(
        &'a self,
        loc: &'a Location,
        max: u64,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let b = s.read_all_max(&l, max).await?;
            self.counters.record_request(b.len() as u64);
            Ok(b)
        })
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}
