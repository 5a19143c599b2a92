//! A native [`RangeReader`] addressed by full URLs (`file:///…`, `s3://bucket/…`): how the
//! overlay reads data files that live wherever their table lives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{
    BoxFut, IoCounters, IoError, Location, ObjectStoreReader, RangeReader, Reply, Request,
};

/// Reads objects by full URL, one [`ObjectStoreReader`] per scheme + authority.
pub struct UrlReader {
    options: Vec<(String, String)>,
    /// Stores for URL prefixes with credentials of their own (vended by a catalog), the
    /// longest covering prefix first in [`UrlReader::resolve`].
    routes: std::sync::RwLock<Vec<(String, Arc<ObjectStoreReader>)>>,
    timeout: Option<std::time::Duration>,
    stores: Mutex<HashMap<String, Arc<ObjectStoreReader>>>,
    counters: IoCounters,
}

impl UrlReader {
    /// `options` are passed to every store opened (e.g. S3 endpoint and credentials).
    pub fn new(options: Vec<(String, String)>) -> Self {
        UrlReader {
            options,
            routes: Default::default(),
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

    /// Reads objects under `prefix` (`s3://bucket/path`, a path boundary) through `store`,
    /// rooted at the bucket, instead of the store the options open; replaces an earlier route
    /// of the same prefix.
    pub fn route(&self, prefix: &str, store: Arc<ObjectStoreReader>) {
        let mut routes = self.routes.write().expect("url routes");
        routes.retain(|(p, _)| p != prefix);
        routes.push((prefix.to_string(), store));
    }

    /// The options every store opened by URL gets.
    pub fn options(&self) -> &[(String, String)] {
        &self.options
    }

    /// The store for `url` and the location of the object inside it.
    pub fn resolve(&self, loc: &Location) -> Result<(Arc<ObjectStoreReader>, Location), IoError> {
        let parsed = url::Url::parse(&loc.path).map_err(|e| IoError::InvalidUrl {
            url: loc.path.to_string(),
            reason: e.to_string(),
        })?;
        let base = format!("{}://{}/", parsed.scheme(), parsed.authority());
        let routed = {
            let routes = self.routes.read().expect("url routes");
            routes
                .iter()
                .filter(|(p, _)| crate::io::rest::covers(p, &loc.path))
                .max_by_key(|(p, _)| p.trim_end_matches('/').len())
                .map(|(_, s)| s.clone())
        };
        let store = if let Some(s) = routed {
            s
        } else {
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
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            let (s, l) = self.resolve(loc)?;
            let reply = s.fetch(&l, req).await?;
            self.counters.record_request(reply.bytes.len() as u64);
            Ok(reply)
        })
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
    fn content_versions(&self, loc: &Location) -> bool {
        self.resolve(loc).is_ok_and(|(s, l)| s.content_versions(&l))
    }
}
