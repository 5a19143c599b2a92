//! A byte-budgeted range cache in front of any [`RangeReader`].
//!
//! Entries are keyed by path + version + byte range. A read is a hit when one cached range of
//! the same object (same path, same version) contains it. Suffix and whole-object reads are
//! inserted too (as the ranges they cover), so a bundle opened by a suffix read serves later
//! reads inside that suffix without a request. Least recently used entries are evicted to
//! stay within the budget; an entry larger than the whole budget is never cached.
//!
//! Versionless locations are assumed immutable (see [`Location`]); to drop what is cached for
//! an object (an index was dropped, a file replaced) call [`CachedReader::invalidate`].

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::{check_range, BoxFut, IoCounters, IoError, Location, RangeReader, Reply, Request};

type ObjectKey = (Arc<str>, Option<Arc<str>>);

#[derive(Default)]
struct State {
    /// Per object: range start → (bytes, last-use tick).
    objects: HashMap<ObjectKey, BTreeMap<u64, (Bytes, u64)>>,
    /// Last-use tick → entry, for LRU eviction.
    lru: BTreeMap<u64, (ObjectKey, u64)>,
    tick: u64,
    bytes: u64,
}

impl State {
    fn lookup(&mut self, key: &ObjectKey, r: &Range<u64>) -> Option<Bytes> {
        let tick = self.tick + 1;
        let entries = self.objects.get_mut(key)?;
        // The cached range starting at or before r.start that reaches furthest.
        let (start, (bytes, used)) = entries
            .range_mut(..=r.start)
            .rev()
            .find(|(s, (b, _))| **s + b.len() as u64 >= r.end)?;
        let out = bytes.slice((r.start - start) as usize..(r.end - start) as usize);
        let (start, old) = (*start, *used);
        *used = tick;
        self.tick = tick;
        self.lru.remove(&old);
        self.lru.insert(tick, (key.clone(), start));
        Some(out)
    }

    fn insert(&mut self, key: ObjectKey, start: u64, bytes: Bytes, budget: u64) {
        let len = bytes.len() as u64;
        if len == 0 || len > budget {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        let entries = self.objects.entry(key.clone()).or_default();
        if let Some((old_bytes, old_tick)) = entries.insert(start, (bytes, tick)) {
            self.bytes -= old_bytes.len() as u64;
            self.lru.remove(&old_tick);
        }
        self.bytes += len;
        self.lru.insert(tick, (key, start));
        while self.bytes > budget {
            let Some((_, (k, s))) = self.lru.pop_first() else {
                break;
            };
            self.remove_entry(&k, s);
        }
    }

    fn remove_entry(&mut self, key: &ObjectKey, start: u64) {
        if let Some(entries) = self.objects.get_mut(key) {
            if let Some((b, _)) = entries.remove(&start) {
                self.bytes -= b.len() as u64;
            }
            if entries.is_empty() {
                self.objects.remove(key);
            }
        }
    }
}

/// Caches the byte ranges read through `inner`, within `budget` bytes.
pub struct CachedReader<R: ?Sized> {
    inner: Arc<R>,
    budget: u64,
    state: Mutex<State>,
    counters: IoCounters,
}

impl<R: RangeReader + ?Sized> CachedReader<R> {
    pub fn new(inner: Arc<R>, budget_bytes: u64) -> Self {
        CachedReader {
            inner,
            budget: budget_bytes,
            state: Mutex::new(State::default()),
            counters: IoCounters::default(),
        }
    }

    /// The wrapped reader (its counters are the requests that reached the store).
    pub fn inner(&self) -> &Arc<R> {
        &self.inner
    }

    /// Bytes currently cached.
    pub fn cached_bytes(&self) -> u64 {
        self.state.lock().expect("cache lock").bytes
    }

    /// Drops every cached range of `path` (all versions). Returns the bytes released.
    pub fn invalidate(&self, path: &str) -> u64 {
        let mut st = self.state.lock().expect("cache lock");
        let keys: Vec<ObjectKey> = st
            .objects
            .keys()
            .filter(|(p, _)| &**p == path)
            .cloned()
            .collect();
        let mut freed = 0;
        for k in keys {
            if let Some(entries) = st.objects.remove(&k) {
                for (_, (b, tick)) in entries {
                    freed += b.len() as u64;
                    st.lru.remove(&tick);
                }
            }
        }
        st.bytes -= freed;
        freed
    }

    fn key(loc: &Location) -> ObjectKey {
        (loc.path.clone(), loc.version.clone())
    }
}

impl<R: RangeReader + ?Sized> RangeReader for CachedReader<R> {
    fn fetch<'a>(&'a self, loc: &'a Location, req: Request) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            let key = Self::key(loc);
            let start = match &req {
                Request::Head => return self.inner.fetch(loc, req).await,
                Request::Range(range) => {
                    check_range(loc, range)?;
                    if let Some(b) = self.state.lock().expect("cache lock").lookup(&key, range) {
                        self.counters.record_hit();
                        return Ok(Reply::bytes(b));
                    }
                    Some(range.start)
                }
                Request::All(_) => Some(0),
                // Where a tail starts is known once it is read.
                Request::Suffix(_) | Request::Tail { .. } => None,
            };
            self.counters.record_miss();
            let reply = self.inner.fetch(loc, req).await?;
            self.counters.record_request(reply.bytes.len() as u64);
            let start = match (start, &reply.meta) {
                (Some(s), _) => s,
                (None, Some(m)) => m.size - reply.bytes.len() as u64,
                (None, None) => return Ok(reply),
            };
            self.state.lock().expect("cache lock").insert(
                key,
                start,
                reply.bytes.clone(),
                self.budget,
            );
            Ok(reply)
        })
    }

    fn coalesce_gap(&self) -> u64 {
        self.inner.coalesce_gap()
    }

    /// Bytes are kept by path and version: those of a content version are that content's.
    fn content_versions(&self, loc: &Location) -> bool {
        self.inner.content_versions(loc)
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}
