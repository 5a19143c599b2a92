//! The seam between a kind and the rest of Skerry: the [`Kind`] trait, and [`KINDS`], the
//! one registry of kinds. `admin/` and `read/` ask a kind what it answers, what it reads of
//! a row, how it checks its options and how it writes its blob — they do not match on kinds
//! (`docs/architecture.md`, "Adding an index kind").

use super::access::{positions_of, BlobAccess, KeyProbe, Positions};
use super::blob::BlobMeta;
use super::ordered::BlobError;
use super::spec::{IndexKind, IndexOptions, IndexSpec};
use crate::io::BoxFut;

/// What a read may ask of a kind's blobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answers {
    /// Names the rows (positions) of a key: `query`, `lookup`, `range`, `count` read them.
    pub rows: bool,
    /// Prunes files for `=`/IN without naming rows.
    pub prune: bool,
    /// Counts a key's rows from the blob's directory without reading positions.
    pub counts: bool,
    /// Answers `search` (BM25 over a text column).
    pub search: bool,
    /// Answers `nearest` (k nearest vectors).
    pub nearest: bool,
}

impl Answers {
    /// A kind this version does not know answers nothing (its files are scanned).
    pub const NOTHING: Answers = Answers {
        rows: false,
        prune: false,
        counts: false,
        search: false,
        nearest: false,
    };

    /// Why an index of these answers cannot serve a key lookup, for an error message.
    pub fn why_not_rows(self) -> &'static str {
        if self.rows {
            "it names rows"
        } else if self.search {
            "it answers search, not key lookups"
        } else if self.nearest {
            "it answers nearest, not key lookups"
        } else if self.prune {
            "it prunes files for query and count, it names no rows"
        } else {
            "this version of Skerry does not know its kind"
        }
    }
}

/// What a kind's build reads of each row: the shapes a build knows how to feed a writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// The canonical key of the index's columns (`docs/key-encoding.md`).
    Key,
    /// One string column's text, in chunks ([`super::fulltext::entries_of`]).
    Text,
    /// One vector column ([`super::vector::entry_of`]).
    Vector,
}

/// How a kind's per-file blobs combine into a table-wide run (`admin::runs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLayout {
    /// Entries of every covered file merged into one sorted run (ordered).
    Merged,
    /// Filters laid out stripe by stripe, so one range prunes every file (bloom).
    Striped,
    /// Codes of every covered file laid out partition by partition, raw vectors left in the
    /// files' blobs (vector; `admin::vector_run`).
    Partitioned,
    /// Every covered file's bitmaps value by value, so a count reads one range per value
    /// (bitmap; `admin::bitmap_run`).
    Stacked,
    /// Every covered file's postings merged term by term over the files' rows end to end, so
    /// a search reads one dictionary and one postings list per term (full text;
    /// `admin::fulltext_run`).
    Concatenated,
}

/// The data file a blob is written for, as a kind's writer needs to know it.
#[derive(Clone, Copy, Debug)]
pub struct BlobSource<'a> {
    /// The index's name (what errors name).
    pub index: &'a str,
    /// The data file's path (what errors name).
    pub path: &'a str,
    pub record_count: u64,
    /// Target bytes of a block of a block-structured blob.
    pub block_bytes: usize,
    /// Bytes the entries take, when known (a writer may reserve them).
    pub size_hint: usize,
    /// A vector index's trained codebook (`None` for other kinds, or before training).
    pub codebook: Option<&'a crate::index::vector::codebook::Trained>,
}

/// One source file of a move, as a kind's [`Kind::carry`] reads it (RFC 0006): the blob
/// holding its entries — its own, or the table run covering it — and where its rows went.
pub struct CarrySource<'a> {
    /// The whole blob: the file's per-file blob, or the run's.
    pub blob: &'a [u8],
    /// The blob's directory (relative to `blob`) and its SHA-256 as recorded.
    pub directory: std::ops::Range<u64>,
    pub directory_sha256: &'a str,
    /// `Some` when `blob` is a run: the file's ordinal in it and the run rows before it.
    pub run: Option<(u32, u64)>,
    /// The source file's rows.
    pub record_count: u64,
    /// The source's per-file facts (kept when a run holds its entries).
    pub meta: &'a BlobMeta,
    /// Every row of the source went to this output (none deleted, none elsewhere).
    pub whole: bool,
    /// Where row `position` of the source went in the output; `None`: not to this output.
    pub to: &'a dyn Fn(u64) -> Option<u64>,
}

/// What a kind is, as data: its names and what the rest of Skerry may ask of it.
#[derive(Clone, Copy, Debug)]
pub struct About {
    /// The kind's tag in definitions and manifests.
    pub tag: IndexKind,
    /// The kind as hosts spell it (`ordered`).
    pub name: &'static str,
    /// The Puffin blob type of its per-file blob.
    pub blob_type: &'static str,
    /// The lineage's algorithm and version of that blob (`ordered-v1`).
    pub algorithm: &'static str,
    /// What a read may ask of its blobs.
    pub answers: Answers,
    /// What its build reads of a row.
    pub input: Input,
    /// The `createIndex` options that belong to it, as hosts spell them (any other kind's
    /// option is refused naming this kind).
    pub options: &'static [&'static str],
    /// `None` when a unique definition of the kind can refuse duplicate keys; otherwise what
    /// follows "a {kind} index cannot be unique" in the refusal.
    pub refuses_unique: Option<&'static str>,
    /// How its blobs combine into a table-wide run, if they do.
    pub run: Option<RunLayout>,
    /// Whether `verify` certifies a blob by rebuilding it from the file and comparing bytes
    /// (kinds whose blob is not a set of key entries).
    pub verify_by_rebuild: bool,
}

impl About {
    /// A kind with no answers, options, runs or unique definitions, reading keys: what each
    /// kind's `About` starts from.
    pub const fn new(
        tag: IndexKind,
        name: &'static str,
        blob_type: &'static str,
        algorithm: &'static str,
    ) -> About {
        About {
            tag,
            name,
            blob_type,
            algorithm,
            answers: Answers::NOTHING,
            input: Input::Key,
            options: &[],
            refuses_unique: Some(""),
            run: None,
            verify_by_rebuild: false,
        }
    }
}

/// An index kind: what it is ([`About`]), how a definition of it is checked, and how its
/// per-file blob is written and read whole. Implemented once per kind, next to its layout;
/// registered once in [`KINDS`].
pub trait Kind: Sync {
    fn about(&self) -> &'static About;
    /// The definition `opts` asks for, its parameters checked and defaulted (`Err` is the
    /// `E_INVALID` message). Options of other kinds and `unique` are checked before.
    fn spec(&self, opts: &IndexOptions) -> Result<IndexSpec, String>;
    /// The blob of one data file from its entries — `(key, position)` sorted by key for
    /// [`Input::Key`], `(chunk, position)` for the others — and the facts the manifest
    /// records about it.
    fn write(
        &self,
        spec: &IndexSpec,
        src: &BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, BlobMeta)>;
    /// Calls `f(key, position)` for every entry of a whole blob (verify reads blobs whole);
    /// kinds without positions refuse. The entries must be exactly those the blob was
    /// written from: a move carries them over to the rows' new positions (RFC 0006).
    fn read_entries(&self, blob: &[u8], f: &mut dyn FnMut(&[u8], u64)) -> Result<(), BlobError> {
        let _ = (blob, f);
        Err(BlobError::Corrupt("this kind's blobs hold no key entries"))
    }
    /// For a kind whose blob holds what its input made of a row (full text: postings,
    /// vector: codes and raw vectors) rather than the input itself: output `src`'s blob from
    /// its move's `sources`, their rows mapped, nothing re-derived — the blob
    /// [`Kind::write`] writes from the output's input when the move is honest (RFC 0006).
    /// `Ok(None)` when this kind or this move cannot be carried (the caller derives it);
    /// errors when a source's blob does not decode. Kinds whose blob entries are the input
    /// ([`Kind::read_entries`]) are carried entry by entry instead.
    fn carry(
        &self,
        spec: &IndexSpec,
        src: &BlobSource<'_>,
        sources: &[CarrySource<'_>],
    ) -> Result<Option<(Vec<u8>, BlobMeta)>, BlobError> {
        let _ = (spec, src, sources);
        Ok(None)
    }
    /// For a kind whose blob is a filter of keys: how many of `keys` it excludes (each one
    /// a key of a live row, so any is a damaged filter). `None` for other kinds.
    fn excluded_keys(
        &self,
        blob: &[u8],
        keys: &mut dyn Iterator<Item = &[u8]>,
    ) -> Option<Result<u64, BlobError>> {
        let _ = (blob, keys);
        None
    }

    /// For a kind that names rows ([`Answers::rows`]): the `(key, position)` entries of the
    /// blob that `probe` selects, in key then position order; `None` when the blob's key
    /// bounds exclude every range (nothing read). A table run of the kind ([`RunLayout::Merged`])
    /// is read the same way.
    fn rows<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Result<Option<Vec<(Vec<u8>, u64)>>, BlobError>> {
        let _ = (blob, probe);
        Box::pin(async { Err(BlobError::Corrupt("this kind names no key's rows")) })
    }
    /// About how many entries [`Kind::rows`] would decode, from what is cheap to read (a
    /// directory); `None` when that cannot be had (the probe will reject the blob and say
    /// why). The planner compares indexes by it.
    fn estimate<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
    ) -> BoxFut<'a, Option<u64>> {
        let _ = (blob, probe);
        Box::pin(async { None })
    }
    /// For a count: the rows `probe` selects — only how many when `only_count` and the kind
    /// can tell without the positions ([`Answers::counts`]). By default the positions of
    /// [`Kind::rows`].
    fn positions<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
        only_count: bool,
    ) -> BoxFut<'a, Result<Option<Positions>, BlobError>> {
        let _ = only_count;
        Box::pin(async move { Ok(self.rows(blob, probe).await?.map(positions_of)) })
    }
    /// For a kind that prunes ([`Answers::prune`]): whether any of `keys` (canonical keys)
    /// may be in the blob's file — `false` only when none is.
    fn may_hold<'a>(
        &'a self,
        blob: &'a dyn BlobAccess,
        keys: &'a [Vec<u8>],
    ) -> BoxFut<'a, Result<bool, BlobError>> {
        let _ = (blob, keys);
        Box::pin(async { Ok(true) })
    }
    /// For a kind that prunes with a table run ([`RunLayout::Striped`]): per file of the
    /// run's `files`, whether any of `keys` may be in it.
    fn run_may_hold<'a>(
        &'a self,
        run: &'a dyn BlobAccess,
        files: u64,
        keys: &'a [Vec<u8>],
    ) -> BoxFut<'a, Result<Vec<bool>, BlobError>> {
        let _ = (run, keys);
        Box::pin(async move { Ok(vec![true; files as usize]) })
    }

    /// For a kind whose table run counts ([`RunLayout::Stacked`]): per ordinal of the run's
    /// covered files, what `want` asks of the rows `probe` selects there — or, when every
    /// file is asked how many, their total.
    fn run_positions<'a>(
        &'a self,
        run: &'a dyn BlobAccess,
        probe: KeyProbe<'a>,
        want: &'a [super::access::RunWant],
    ) -> BoxFut<'a, Result<super::access::RunPositions, BlobError>> {
        let _ = (run, probe, want);
        Box::pin(async { Err(BlobError::Corrupt("this kind's run counts no rows")) })
    }

    fn tag(&self) -> IndexKind {
        self.about().tag
    }
    fn name(&self) -> &'static str {
        self.about().name
    }
    fn blob_type(&self) -> &'static str {
        self.about().blob_type
    }
    fn algorithm(&self) -> &'static str {
        self.about().algorithm
    }
    fn answers(&self) -> Answers {
        self.about().answers
    }
    fn input(&self) -> Input {
        self.about().input
    }
    fn options(&self) -> &'static [&'static str] {
        self.about().options
    }
    fn refuses_unique(&self) -> Option<&'static str> {
        self.about().refuses_unique
    }
    fn run(&self) -> Option<RunLayout> {
        self.about().run
    }
    fn verify_by_rebuild(&self) -> bool {
        self.about().verify_by_rebuild
    }
}

/// Every kind this build knows, in the order hosts list them.
pub static KINDS: &[&dyn Kind] = &[
    &super::ordered::Ordered,
    &super::bitmap::Bitmap,
    &super::bloom::Bloom,
    &super::fulltext::Fulltext,
    &super::vector::Vector,
    #[cfg(feature = "test-kinds")]
    &super::valueset::Valueset,
];

/// Whether the kind writing blobs of `blob_type` drops a file's blob once a table run holds
/// its entries (RFC 0004 "the drop", decision 71): kinds with a run that `verify` certifies by
/// rebuilding the blob — a rebuild's SHA-256 against the dropped blob's recorded one then
/// certifies the file without the blob. Full text and vector: the large blobs. The key-entry
/// kinds (ordered, bitmap, bloom) keep theirs, which `verify` reads entry by entry.
pub fn drops_covered(blob_type: &str) -> bool {
    KINDS
        .iter()
        .any(|k| k.blob_type() == blob_type && k.run().is_some() && k.verify_by_rebuild())
}

/// The kind of `tag` (`None` for [`IndexKind::Unknown`]).
pub fn of(tag: IndexKind) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.tag() == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_each_kind_once() {
        for (i, k) in KINDS.iter().enumerate() {
            assert_eq!(of(k.tag()).unwrap().name(), k.name());
            assert_eq!(IndexKind::parse(k.name()).unwrap(), k.tag());
            for o in &KINDS[i + 1..] {
                assert_ne!(o.name(), k.name());
                assert_ne!(o.blob_type(), k.blob_type());
                assert!(o.options().iter().all(|n| !k.options().contains(n)));
            }
        }
        assert!(of(IndexKind::Unknown).is_none());
    }
}
