//! [`ReadCache`]: what a read handle keeps between reads — parsed block directories, data
//! files' Parquet metadata (footer and page index) and index blocks — under one byte budget,
//! least recently used first out.
//!
//! It lives on the read handle (the addon's `Overlay`, the read-only reader, the wasm
//! reader) and every [`crate::read::Snapshot`] of it shares it, so a Worker that keeps its
//! reader at module scope answers later requests warm, across `refresh()`.
//!
//! Nothing cached can be served stale, because every key names the exact bytes it holds:
//! - a directory by bundle path, blob offset **and the directory's SHA-256** from the
//!   manifest (a rebuilt blob has another hash, so another key);
//! - an index block by bundle path and byte range; bundles are never rewritten in place, and
//!   every block is verified against its hash in the (verified) directory on every use;
//! - a data file's decompressed dictionary page by location and offset, served only for the
//!   exact bytes (header and compressed body) it was decoded from, which a read fetches and
//!   compares — or, without fetching, to a read pinned to the very content version it was
//!   read at, where the store's versions name one content (`RangeReader::content_versions`);
//!   dictionary pages hold at most half the budget;
//! - a data file's metadata by location, the size, record count and ETag the manifest
//!   recorded, and it is cached only when the store reported a version (ETag) for it. Reads
//!   answered from cached metadata are pinned to that version, so a file rewritten since
//!   fails the read (`E_CHANGED`) instead of returning other rows; the snapshot then drops
//!   cached metadata and answers again from the files as they are (see
//!   [`crate::read::Snapshot`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use parquet::file::metadata::ParquetMetaData;
use serde::Serialize;

use crate::datafile::{DictionaryPage, DictionaryPages};
use crate::formats::manifest::FileEntry;
use crate::index::access::Part;
use crate::io::ObjectMeta;

/// The default byte budget of the wasm reader's cache (browsers and Workers have little
/// memory).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
/// The default byte budget of a native read handle's cache (the addon's `Overlay` and
/// read-only reader): room for the dictionary pages of the row groups a service reads, which
/// make a point read ~30% faster when they stay (decision 46).
pub const DEFAULT_NATIVE_CACHE_BYTES: u64 = 256 << 20;

/// What a cache entry is, for the per-tier counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    Directory,
    Metadata,
    Block,
    Dictionary,
}

const TIERS: [Tier; 4] = [
    Tier::Directory,
    Tier::Metadata,
    Tier::Block,
    Tier::Dictionary,
];

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Directory => "directory",
            Tier::Metadata => "metadata",
            Tier::Block => "block",
            Tier::Dictionary => "dictionary",
        }
    }
    fn slot(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Directory {
        bundle: Arc<str>,
        offset: u64,
        sha256: Arc<str>,
    },
    Metadata {
        location: Arc<str>,
        size: u64,
        rows: u64,
        etag: Option<Arc<str>>,
        /// The file's recorded content hash: a same-size rewrite under a weak version (local
        /// mtime ETag restored) that a refresh or verify recorded is another file here.
        sha256: Arc<str>,
    },
    Block {
        bundle: Arc<str>,
        start: u64,
        end: u64,
    },
    Dictionary {
        location: Arc<str>,
        offset: u64,
    },
}

impl Key {
    fn tier(&self) -> Tier {
        match self {
            Key::Directory { .. } => Tier::Directory,
            Key::Metadata { .. } => Tier::Metadata,
            Key::Block { .. } => Tier::Block,
            Key::Dictionary { .. } => Tier::Dictionary,
        }
    }
}

#[derive(Clone)]
enum Entry {
    /// A blob's decoded directory, of the type its kind's reader parsed it into.
    Directory(Part),
    Metadata(Arc<ParquetMetaData>, ObjectMeta),
    Block(Bytes),
    TextDirectory(Arc<crate::index::fulltext::FulltextDirectory>),
    TermBlock(Arc<Vec<crate::index::fulltext::TermEntry>>),
    Postings(Arc<crate::index::fulltext::Postings>),
    /// Document lengths of a group of a run's length table, decoded and checked.
    Lengths(Arc<[u32]>),
    /// A run's whole length table, decoded and checked.
    RowTable(Arc<crate::index::fulltext::lengths::RowTable>),
    Dictionary(Arc<DictionaryPage>),
}

#[derive(Default)]
struct Lru {
    entries: HashMap<Key, (Entry, u64, u64)>, // entry, bytes, last-use tick
    by_use: BTreeMap<u64, Key>,
    tick: u64,
    bytes: u64,
}

impl Lru {
    fn touch(&mut self, k: &Key) -> Option<Entry> {
        self.tick += 1;
        let tick = self.tick;
        let (e, _, used) = self.entries.get_mut(k)?;
        let old = std::mem::replace(used, tick);
        let e = e.clone();
        if let Some(key) = self.by_use.remove(&old) {
            self.by_use.insert(tick, key);
        }
        Some(e)
    }

    fn remove(&mut self, k: &Key) {
        if let Some((_, bytes, used)) = self.entries.remove(k) {
            self.bytes -= bytes;
            self.by_use.remove(&used);
        }
    }

    fn insert(&mut self, k: Key, e: Entry, bytes: u64, budget: u64) {
        if bytes > budget / 4 {
            return; // one entry never takes more than a quarter of the budget
        }
        self.remove(&k);
        // Dictionary pages are the largest entries and the least reused (one per row group
        // and column read): they may hold at most half the budget, so they never push out
        // the metadata and directories every read needs.
        if k.tier() == Tier::Dictionary {
            let mut held: u64 = self
                .entries
                .iter()
                .filter(|(k, _)| k.tier() == Tier::Dictionary)
                .map(|(_, (_, b, _))| *b)
                .sum();
            while held + bytes > budget / 2 {
                let Some(old) = self
                    .by_use
                    .values()
                    .find(|k| k.tier() == Tier::Dictionary)
                    .cloned()
                else {
                    break;
                };
                held -= self.entries.get(&old).map_or(0, |e| e.1);
                self.remove(&old);
            }
        }
        self.tick += 1;
        self.by_use.insert(self.tick, k.clone());
        self.entries.insert(k, (e, bytes, self.tick));
        self.bytes += bytes;
        while self.bytes > budget {
            let Some((_, old)) = self.by_use.pop_first() else {
                break;
            };
            if let Some((_, b, _)) = self.entries.remove(&old) {
                self.bytes -= b;
            }
        }
    }
}

/// Counters of one tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TierStats {
    pub hits: u64,
    pub misses: u64,
    /// Entries and bytes held now.
    pub entries: u64,
    pub bytes: u64,
}

/// A snapshot of the cache's counters, per tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStats {
    pub budget: u64,
    pub directory: TierStats,
    pub metadata: TierStats,
    pub block: TierStats,
    pub dictionary: TierStats,
}

impl CacheStats {
    pub fn tier(&self, t: Tier) -> &TierStats {
        match t {
            Tier::Directory => &self.directory,
            Tier::Metadata => &self.metadata,
            Tier::Block => &self.block,
            Tier::Dictionary => &self.dictionary,
        }
    }
    /// Hits over every tier.
    pub fn hits(&self) -> u64 {
        self.directory.hits + self.metadata.hits + self.block.hits + self.dictionary.hits
    }
}

/// The read handle's cache (see the module docs). Cheap to share behind an `Arc`; safe to use
/// from many reads at once.
pub struct ReadCache {
    budget: AtomicU64,
    lru: Mutex<Lru>,
    hits: [AtomicU64; 4],
    misses: [AtomicU64; 4],
    /// The last BM25 length-norm table a search made, by the mean length it was made for
    /// (bits): searches of an unchanged table share one instead of each dividing a
    /// thousand times. Not counted in the budget (8 KiB).
    norms: Mutex<Option<(u64, Arc<[f64]>)>>,
}

impl Default for ReadCache {
    fn default() -> Self {
        ReadCache::with_budget(DEFAULT_CACHE_BYTES)
    }
}

impl ReadCache {
    /// A cache holding at most `budget` bytes (0 caches nothing).
    pub fn with_budget(budget: u64) -> ReadCache {
        ReadCache {
            budget: AtomicU64::new(budget),
            lru: Mutex::default(),
            hits: Default::default(),
            misses: Default::default(),
            norms: Mutex::default(),
        }
    }

    /// The norm table for mean length `avg_len`: the one made last when it was made for the
    /// same mean (to the bit), else `make`'s, kept for the next search.
    pub fn norms(&self, avg_len: f64, make: impl FnOnce() -> Vec<f64>) -> Arc<[f64]> {
        let bits = avg_len.to_bits();
        let mut held = self.norms.lock().unwrap_or_else(|e| e.into_inner());
        match &*held {
            Some((b, t)) if *b == bits => t.clone(),
            _ => {
                let t: Arc<[f64]> = make().into();
                *held = Some((bits, t.clone()));
                t
            }
        }
    }

    /// Changes the budget, evicting down to it.
    pub fn set_budget(&self, budget: u64) {
        self.budget.store(budget, Ordering::Relaxed);
        let mut lru = self.lock();
        while lru.bytes > budget {
            let Some((_, old)) = lru.by_use.pop_first() else {
                break;
            };
            if let Some((_, b, _)) = lru.entries.remove(&old) {
                lru.bytes -= b;
            }
        }
    }

    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Drops everything (counters are kept).
    pub fn clear(&self) {
        *self.lock() = Lru::default();
    }

    /// Hits over every tier since the cache was created.
    pub fn hits(&self) -> u64 {
        self.hits.iter().map(|h| h.load(Ordering::Relaxed)).sum()
    }

    /// Counters and occupancy per tier.
    pub fn stats(&self) -> CacheStats {
        let lru = self.lock();
        let mut held = [(0u64, 0u64); 4];
        for (k, (_, b, _)) in &lru.entries {
            let h = &mut held[k.tier().slot()];
            h.0 += 1;
            h.1 += b;
        }
        let tier = |t: Tier| TierStats {
            hits: self.hits[t.slot()].load(Ordering::Relaxed),
            misses: self.misses[t.slot()].load(Ordering::Relaxed),
            entries: held[t.slot()].0,
            bytes: held[t.slot()].1,
        };
        let mut s = CacheStats {
            budget: self.budget(),
            ..Default::default()
        };
        for t in TIERS {
            let v = tier(t);
            match t {
                Tier::Directory => s.directory = v,
                Tier::Metadata => s.metadata = v,
                Tier::Block => s.block = v,
                Tier::Dictionary => s.dictionary = v,
            }
        }
        s
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        // A panic while holding the lock leaves a consistent map (every method restores the
        // invariants before it could panic), so a poisoned lock is still usable.
        self.lru.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, k: &Key) -> Option<Entry> {
        let e = self.lock().touch(k);
        let slot = k.tier().slot();
        match e {
            Some(_) => self.hits[slot].fetch_add(1, Ordering::Relaxed),
            None => self.misses[slot].fetch_add(1, Ordering::Relaxed),
        };
        e
    }

    fn put(&self, k: Key, e: Entry, bytes: u64) {
        let budget = self.budget();
        self.lock().insert(k, e, bytes, budget);
    }

    /// The decoded directory of the blob at `offset` in `bundle` whose bytes hash to
    /// `sha256` (of whatever type its kind's reader parsed it into).
    pub fn directory(&self, bundle: &str, offset: u64, sha256: &str) -> Option<Part> {
        match self.get(&dir_key(bundle, offset, sha256)) {
            Some(Entry::Directory(d)) => Some(d),
            _ => None,
        }
    }

    /// Whether [`ReadCache::directory`] would answer (not counted as a hit or miss).
    pub fn has_directory(&self, bundle: &str, offset: u64, sha256: &str) -> bool {
        self.lock()
            .entries
            .contains_key(&dir_key(bundle, offset, sha256))
    }

    /// Keeps a decoded directory of about `bytes` in memory.
    pub fn put_directory(&self, bundle: &str, offset: u64, sha256: &str, d: Part, bytes: u64) {
        self.put(dir_key(bundle, offset, sha256), Entry::Directory(d), bytes);
    }

    /// A data file's metadata (with its page index) and the size and version the store
    /// reported when it was read, for the facts the manifest recorded about `f` (location,
    /// size, record count, ETag and content hash: a file whose recorded hash moved never
    /// meets the metadata of its old content).
    pub fn metadata(
        &self,
        location: &str,
        f: &FileEntry,
    ) -> Option<(Arc<ParquetMetaData>, ObjectMeta)> {
        match self.get(&meta_key(location, f)) {
            Some(Entry::Metadata(md, meta)) => Some((md, meta)),
            _ => None,
        }
    }

    /// Whether [`ReadCache::metadata`] would answer (not counted as a hit or miss).
    pub fn has_metadata(&self, location: &str, f: &FileEntry) -> bool {
        self.lock().entries.contains_key(&meta_key(location, f))
    }

    /// Caches a data file's metadata; ignored unless `meta` carries a version (reads from
    /// cached metadata are pinned to it).
    pub fn put_metadata(
        &self,
        location: &str,
        f: &FileEntry,
        md: Arc<ParquetMetaData>,
        meta: ObjectMeta,
    ) {
        if meta.version.is_none() {
            return;
        }
        let bytes = md.memory_size() as u64;
        self.put(meta_key(location, f), Entry::Metadata(md, meta), bytes);
    }

    /// Drops every cached data file metadata (a read found a file changed under its cached
    /// version).
    pub fn forget_metadata(&self) {
        let mut lru = self.lock();
        let stale: Vec<Key> = lru
            .entries
            .keys()
            .filter(|k| k.tier() == Tier::Metadata)
            .cloned()
            .collect();
        for k in &stale {
            lru.remove(k);
        }
    }

    /// The parsed full-text directory of the blob at `offset` in `bundle` (keyed like
    /// [`ReadCache::directory`]).
    pub fn text_directory(
        &self,
        bundle: &str,
        offset: u64,
        sha256: &str,
    ) -> Option<Arc<crate::index::fulltext::FulltextDirectory>> {
        match self.get(&dir_key(bundle, offset, sha256)) {
            Some(Entry::TextDirectory(d)) => Some(d),
            _ => None,
        }
    }

    pub fn put_text_directory(
        &self,
        bundle: &str,
        offset: u64,
        sha256: &str,
        d: Arc<crate::index::fulltext::FulltextDirectory>,
    ) {
        let bytes = 64
            + d.blocks
                .iter()
                .map(|b| 64 + b.first.len() as u64)
                .sum::<u64>();
        self.put(
            dir_key(bundle, offset, sha256),
            Entry::TextDirectory(d),
            bytes,
        );
    }

    /// A parsed, checked term block at `start..end` of `bundle`.
    pub fn term_block(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
    ) -> Option<Arc<Vec<crate::index::fulltext::TermEntry>>> {
        match self.get(&block_key(bundle, start, end)) {
            Some(Entry::TermBlock(b)) => Some(b),
            _ => None,
        }
    }

    pub fn put_term_block(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
        b: Arc<Vec<crate::index::fulltext::TermEntry>>,
    ) {
        let bytes = (end - start) + 64 * b.len() as u64;
        self.put(block_key(bundle, start, end), Entry::TermBlock(b), bytes);
    }

    /// Parsed, checked postings at `start..end` of `bundle`.
    pub fn postings(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
    ) -> Option<Arc<crate::index::fulltext::Postings>> {
        match self.get(&block_key(bundle, start, end)) {
            Some(Entry::Postings(p)) => Some(p),
            _ => None,
        }
    }

    pub fn put_postings(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
        p: Arc<crate::index::fulltext::Postings>,
    ) {
        let bytes = (end - start) + 48 * p.skips.len() as u64;
        self.put(block_key(bundle, start, end), Entry::Postings(p), bytes);
    }

    /// Decoded lengths of a group of a run's length table at `start..end` of `bundle`.
    pub fn lengths(&self, bundle: &str, start: u64, end: u64) -> Option<Arc<[u32]>> {
        match self.get(&block_key(bundle, start, end)) {
            Some(Entry::Lengths(l)) => Some(l),
            _ => None,
        }
    }

    pub fn put_lengths(&self, bundle: &str, start: u64, end: u64, l: Arc<[u32]>) {
        let bytes = 32 + 4 * l.len() as u64;
        self.put(block_key(bundle, start, end), Entry::Lengths(l), bytes);
    }

    /// A run's whole length table at `start..end` of `bundle`, decoded.
    pub fn row_table(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
    ) -> Option<Arc<crate::index::fulltext::lengths::RowTable>> {
        match self.get(&block_key(bundle, start, end)) {
            Some(Entry::RowTable(t)) => Some(t),
            _ => None,
        }
    }

    pub fn put_row_table(
        &self,
        bundle: &str,
        start: u64,
        end: u64,
        t: Arc<crate::index::fulltext::lengths::RowTable>,
    ) {
        let bytes = t.bytes();
        self.put(block_key(bundle, start, end), Entry::RowTable(t), bytes);
    }

    /// Drops what is cached at `start..end` of `bundle` (bytes or parsed postings), if
    /// anything: an entry another one now supersedes.
    pub fn forget(&self, bundle: &str, start: u64, end: u64) {
        self.lru
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&Key::Block {
                bundle: Arc::from(bundle),
                start,
                end,
            });
    }

    /// The bytes `start..end` of `bundle`, when cached.
    pub fn block(&self, bundle: &str, start: u64, end: u64) -> Option<Bytes> {
        match self.get(&Key::Block {
            bundle: Arc::from(bundle),
            start,
            end,
        }) {
            Some(Entry::Block(b)) => Some(b),
            _ => None,
        }
    }

    pub fn put_block(&self, bundle: &str, start: u64, end: u64, bytes: Bytes) {
        let n = bytes.len() as u64;
        self.put(
            Key::Block {
                bundle: Arc::from(bundle),
                start,
                end,
            },
            Entry::Block(bytes),
            n,
        );
    }
}

/// Decompressed dictionary pages of data files, each served only for the very bytes it was
/// decoded from (the bytes the read fetched), so no key can serve a page of another file.
impl DictionaryPages for ReadCache {
    fn dictionary(&self, location: &str, offset: u64, raw: &[u8]) -> Option<Arc<DictionaryPage>> {
        // A page decoded from other bytes (the file changed in place) counts as a miss.
        let found = match self.lock().touch(&dict_key(location, offset)) {
            Some(Entry::Dictionary(d)) if d.is_for(raw) => Some(d),
            _ => None,
        };
        let slot = Tier::Dictionary.slot();
        match found {
            Some(_) => self.hits[slot].fetch_add(1, Ordering::Relaxed),
            None => self.misses[slot].fetch_add(1, Ordering::Relaxed),
        };
        found
    }

    fn dictionary_at(
        &self,
        location: &str,
        offset: u64,
        version: &str,
    ) -> Option<Arc<DictionaryPage>> {
        // Kept at another version (or at none): the page is fetched, and its miss counted
        // when the fetched bytes are looked up.
        let found = match self.lock().touch(&dict_key(location, offset)) {
            Some(Entry::Dictionary(d)) if d.is_at(version) => Some(d),
            _ => None,
        };
        if found.is_some() {
            self.hits[Tier::Dictionary.slot()].fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    fn put_dictionary(&self, location: &str, offset: u64, page: Arc<DictionaryPage>) {
        let bytes = page.heap_bytes();
        self.put(dict_key(location, offset), Entry::Dictionary(page), bytes);
    }

    fn would_keep(&self, bytes: u64) -> bool {
        bytes <= self.budget() / 4
    }
}

fn dict_key(location: &str, offset: u64) -> Key {
    Key::Dictionary {
        location: Arc::from(location),
        offset,
    }
}

fn block_key(bundle: &str, start: u64, end: u64) -> Key {
    Key::Block {
        bundle: Arc::from(bundle),
        start,
        end,
    }
}

fn dir_key(bundle: &str, offset: u64, sha256: &str) -> Key {
    Key::Directory {
        bundle: Arc::from(bundle),
        offset,
        sha256: Arc::from(sha256.to_ascii_lowercase()),
    }
}

fn meta_key(location: &str, f: &FileEntry) -> Key {
    Key::Metadata {
        location: Arc::from(location),
        size: f.size,
        rows: f.record_count,
        etag: f.etag.as_deref().map(Arc::from),
        sha256: Arc::from(f.sha256.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_evicted_least_recently_used_first_within_the_budget() {
        let c = ReadCache::with_budget(400);
        c.put_block("b", 0, 100, Bytes::from(vec![1u8; 100]));
        c.put_block("b", 100, 200, Bytes::from(vec![2u8; 100]));
        c.put_block("b", 200, 300, Bytes::from(vec![3u8; 100]));
        assert!(c.block("b", 0, 100).is_some()); // now most recent
        c.put_block("b", 300, 400, Bytes::from(vec![4u8; 100]));
        c.put_block("b", 400, 500, Bytes::from(vec![5u8; 100]));
        // 100..200 was the least recently used: evicted to stay within 400 bytes.
        assert!(c.block("b", 100, 200).is_none());
        assert_eq!(c.block("b", 0, 100).unwrap()[0], 1);
        assert!(c.block("b", 400, 500).is_some());
        let s = c.stats();
        assert!(s.block.bytes <= 400, "{s:?}");
        assert_eq!(s.block.entries, 4);
        assert_eq!(s.block.misses, 1);
        assert_eq!(s.block.hits, 3);
        // An entry over a quarter of the budget is never cached; a zero budget caches nothing.
        c.put_block("b", 0, 101, Bytes::from(vec![0u8; 101]));
        assert!(c.block("b", 0, 101).is_none());
        c.set_budget(0);
        assert_eq!(c.stats().block.entries, 0);
        c.put_block("b", 0, 1, Bytes::from_static(b"x"));
        assert!(c.block("b", 0, 1).is_none());
    }

    #[test]
    fn directories_are_keyed_by_their_hash() {
        let c = ReadCache::default();
        let d = Arc::new(crate::index::ordered::OrderedDirectory {
            blocks: vec![],
            max_key: vec![1],
        });
        c.put_directory("x.puffin", 4, "AB", d, 80);
        assert!(c.directory("x.puffin", 4, "ab").is_some());
        assert!(c.directory("x.puffin", 4, "cd").is_none());
        assert!(c.directory("x.puffin", 5, "ab").is_none());
    }
}
