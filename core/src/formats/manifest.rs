//! The published read model: an immutable manifest version per publish, and the `HEAD`
//! pointer to the newest. Readers pin one version for a whole query. `docs/manifest.md`
//! documents the JSON.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::formats::lineage::{ActiveSnapshot, DataFileFacts, IndexFile};
use crate::io::{Location, RangeReader};
use crate::values::FieldInfo;
use crate::values::KeySchema;

/// Newest manifest format version this build reads: 1, 2 when some index lists are split
/// out into parts ([`PartRef`]; a version-1 reader would otherwise see those indexes empty
/// and scan every file), 3 when an index keeps its run in the root and only the entries of
/// the files the run answers in a part ([`COVERED_PART_MIN_BYTES`]). Writers write 1 unless
/// they split.
pub const MANIFEST_FORMAT_VERSION: u32 = FORMAT_VERSION_COVERED;
/// The format version of a manifest that holds all its lists inline.
pub const FORMAT_VERSION_WHOLE: u32 = 1;
/// The format version of a manifest with parts (and of the parts).
pub const FORMAT_VERSION_SPLIT: u32 = 2;
/// The format version of a manifest with a covered part (and of that part): a version-2
/// reader would refuse its run beside a part, so it refuses the version instead.
pub const FORMAT_VERSION_COVERED: u32 = 3;
/// Path of the pointer to the newest manifest, relative to the overlay root.
pub const HEAD_PATH: &str = "manifests/HEAD";
/// Largest manifest object a reader accepts.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
/// Largest `HEAD` object a reader accepts, and the largest a publisher writes with the
/// manifest inlined ([`Head::body`]).
pub const MAX_HEAD_BYTES: u64 = 256 << 10;
/// A `HEAD` whose JSON passes this many bytes is stored zlib-compressed (decision 73).
pub const PLAIN_HEAD_BYTES: usize = 16 << 10;
/// Largest JSON a compressed `HEAD` holds: a publisher inlines no larger manifest, and a
/// reader inflates no further (a deflate bomb fails `E_MANIFEST` having allocated at most
/// this).
pub const MAX_HEAD_JSON_BYTES: u64 = 2 << 20;
/// Largest size, offset, length or count a manifest may state (2^53, JavaScript's exact
/// integer range — far beyond any real object): sums of a few such values never overflow.
pub const MAX_MANIFEST_NUMBER: u64 = 1 << 53;

/// Path of manifest `version`, relative to the overlay root.
pub fn manifest_path(version: u64) -> String {
    format!("manifests/{version:020}.json")
}

/// `manifests/HEAD`: the newest version and its manifest's path — and, when the two fit in
/// [`MAX_HEAD_BYTES`], the manifest itself (`manifest`, the same document the path holds),
/// so a reader opens with one read instead of two (decision 72).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub version: u64,
    pub path: String,
    /// The manifest of `version`, inlined (absent when too large), parsed with `HEAD` in
    /// one pass and checked by [`read_latest`] like the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Box<Manifest>>,
}

impl Head {
    /// The `HEAD` object for manifest `version` at `path` whose document is `manifest_json`:
    /// the manifest inlined — as JSON up to [`PLAIN_HEAD_BYTES`], zlib-compressed JSON
    /// (RFC 1950) above, when that fits in [`MAX_HEAD_BYTES`] and the JSON in
    /// [`MAX_HEAD_JSON_BYTES`] (decision 73) — else the pointer alone. Written by hand around
    /// the manifest's bytes (no second serialization).
    pub fn body(version: u64, path: &str, manifest_json: &[u8]) -> Vec<u8> {
        let pointer = serde_json::to_string(&Head {
            version,
            path: path.to_string(),
            manifest: None,
        })
        .expect("head serializes");
        let inlined = pointer.len() + manifest_json.len() + ",\"manifest\":".len();
        if inlined as u64 > MAX_HEAD_JSON_BYTES {
            return pointer.into_bytes();
        }
        let mut out = Vec::with_capacity(inlined);
        out.extend_from_slice(&pointer.as_bytes()[..pointer.len() - 1]);
        out.extend_from_slice(b",\"manifest\":");
        out.extend_from_slice(manifest_json);
        out.push(b'}');
        if out.len() <= PLAIN_HEAD_BYTES {
            return out;
        }
        let z = miniz_oxide::deflate::compress_to_vec_zlib(&out, 6);
        if z.len() as u64 > MAX_HEAD_BYTES {
            return pointer.into_bytes();
        }
        z
    }

    /// The JSON of a `HEAD` object as read: the bytes themselves when they are JSON (they
    /// begin with `{`, after any whitespace), else inflated as zlib (RFC 1950) to at most
    /// [`MAX_HEAD_JSON_BYTES`]. Errors: `E_MANIFEST` for neither, a corrupt stream or one
    /// that inflates past the bound — refused while inflating, never allocated whole.
    pub fn json(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'{') {
            return Ok(std::borrow::Cow::Borrowed(bytes));
        }
        miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(bytes, MAX_HEAD_JSON_BYTES as usize)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| match e.status {
                miniz_oxide::inflate::TINFLStatus::HasMoreOutput => {
                    Error::Manifest(format!("HEAD inflates past {MAX_HEAD_JSON_BYTES} bytes"))
                }
                _ => Error::Manifest(
                    "HEAD is neither JSON nor zlib-compressed JSON (or the stream is damaged)"
                        .into(),
                ),
            })
    }
}

/// One published version of an overlay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub version: u64,
    /// Catalog version the manifest was published from.
    pub catalog_version: u64,
    pub tables: Vec<TableManifest>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableManifest {
    pub table_id: u64,
    pub name: String,
    /// URL of the directory data file paths are relative to.
    pub location: String,
    pub snapshot: ActiveSnapshot,
    pub fields: Vec<FieldInfo>,
    pub files: Vec<FileEntry>,
    pub indexes: Vec<IndexManifest>,
    /// An Iceberg-backed table: the upstream snapshot this version holds, and the versions
    /// holding earlier synced snapshots (pinned reads, `docs/manifest.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Upstream>,
}

/// The upstream Iceberg snapshot a table manifest holds, and where earlier ones are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    pub snapshot_id: i64,
    /// Earlier synced snapshots, oldest first: each with the newest manifest version that
    /// held it (vacuum may have deleted it since).
    #[serde(default)]
    pub history: Vec<UpstreamVersion>,
}

/// An upstream snapshot and the manifest version that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamVersion {
    pub snapshot_id: i64,
    pub version: u64,
}

/// A data file and the facts the read gate compares against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub file_id: u64,
    pub path: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    pub record_count: u64,
    /// The digest [`FileEntry::binding`] names: the whole file's SHA-256, or for an Iceberg
    /// data file the SHA-256 of its size and footer (`docs/lineage.md`). Lowercase hex.
    pub sha256: String,
    /// What `sha256` digests; absent means the whole file (decision 77).
    #[serde(
        default,
        skip_serializing_if = "crate::formats::lineage::Binding::is_whole"
    )]
    pub binding: crate::formats::lineage::Binding,
    /// Stable row id of position 0 (row id = row_id_start + position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_id_start: Option<u64>,
    /// Row ids the file carries explicitly (an Iceberg v3 file whose `_row_id` column keeps
    /// the ids of rows a compaction moved): `[position, first id, count]` runs
    /// (`docs/manifest.md`). When present it is the file's whole row-id map and
    /// `row_id_start` is absent, so a reader that does not know this field reports no row
    /// ids for the file rather than wrong ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_id_runs: Option<crate::formats::rowset::IdRuns>,
    /// Deleted row positions: a Roaring treemap in its portable serialization, hex-encoded
    /// (`docs/manifest.md`). Every answer leaves these rows out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletes: Option<String>,
    /// Where the file's Parquet metadata starts: its page index (column and offset indexes)
    /// when it has one, else its footer. `[metadata_offset, size)` holds everything a reader
    /// needs before it reads pages, so a cold read of it is one exact range request instead
    /// of a suffix probe and a page-index read. Absent for files registered before it was
    /// recorded (readers then probe the suffix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_offset: Option<u64>,
}

/// Largest delete mask a reader decodes (hex characters).
pub const MAX_DELETE_MASK_HEX: usize = 128 << 20;

impl FileEntry {
    /// The stable row id of the row at `position`, when the file's rows have ids.
    pub fn row_id_at(&self, position: u64) -> Option<u64> {
        match &self.row_id_runs {
            Some(runs) => runs.id_at(position),
            None => self.row_id_start.and_then(|s| s.checked_add(position)),
        }
    }

    /// The file's row-id summary for [`crate::formats::rowset::locate`]; `None` when its
    /// rows have no known ids.
    pub fn row_ids(&self) -> Option<Box<dyn crate::formats::rowset::PositionOf>> {
        use crate::formats::rowset::RowSet;
        match (&self.row_id_runs, self.row_id_start) {
            (Some(runs), _) => Some(Box::new(runs.by_id())),
            (None, Some(start)) => Some(Box::new(RowSet::Dense {
                start,
                count: self.record_count,
            })),
            (None, None) => None,
        }
    }

    /// The file's delete mask, decoded and bounded (`None` when no row is deleted).
    pub fn deleted(&self) -> Result<Option<roaring::RoaringTreemap>> {
        let Some(h) = &self.deletes else {
            return Ok(None);
        };
        if h.len() > MAX_DELETE_MASK_HEX {
            return Err(Error::Manifest(format!(
                "{}: delete mask larger than {MAX_DELETE_MASK_HEX} hex characters",
                self.path
            )));
        }
        let bytes = hex::decode(h)
            .map_err(|e| Error::Manifest(format!("{}: delete mask: {e}", self.path)))?;
        let mask = roaring::RoaringTreemap::deserialize_from(&bytes[..])
            .map_err(|e| Error::Manifest(format!("{}: delete mask: {e}", self.path)))?;
        if mask.max().is_some_and(|m| m >= self.record_count) {
            return Err(Error::Manifest(format!(
                "{}: delete mask names a position past the file's {} rows",
                self.path, self.record_count
            )));
        }
        Ok(Some(mask))
    }

    /// Encodes `mask` as [`FileEntry::deletes`].
    pub fn set_deleted(&mut self, mask: &roaring::RoaringTreemap) {
        if mask.is_empty() {
            self.deletes = None;
        } else {
            let mut b = Vec::with_capacity(mask.serialized_size());
            mask.serialize_into(&mut b).expect("vec write");
            self.deletes = Some(hex::encode(b));
        }
    }

    /// Rows not deleted.
    pub fn live_rows(&self) -> Result<u64> {
        Ok(self.record_count - self.deleted()?.map_or(0, |m| m.len()))
    }

    pub fn facts(&self) -> DataFileFacts {
        DataFileFacts {
            path: self.path.clone(),
            sha256: self.sha256.clone(),
            record_count: self.record_count,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexState {
    Building,
    Ready,
    Maintaining,
    Poisoned,
}

impl IndexState {
    /// Answers queries: `ready`, or `maintaining` (complete but for files whose index work a
    /// registration or sync deferred — those files are scanned until caught up).
    pub fn serves(self) -> bool {
        matches!(self, IndexState::Ready | IndexState::Maintaining)
    }

    /// Has files left for the staged build path, which flips it to `ready` when done.
    pub fn catching_up(self) -> bool {
        matches!(self, IndexState::Building | IndexState::Maintaining)
    }
}

impl std::fmt::Display for IndexState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IndexState::Building => "building",
            IndexState::Ready => "ready",
            IndexState::Maintaining => "maintaining",
            IndexState::Poisoned => "poisoned",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexManifest {
    pub index_id: u64,
    pub name: String,
    /// Indexed columns by field id, in key order.
    pub fields: Vec<i32>,
    pub key: KeySchema,
    pub unique: bool,
    /// The kind of blob each file's entry points to, with the kind's parameters: flat, as
    /// `kind` (absent: ordered) and the kind's fields ([`crate::index::IndexSpec`]). A
    /// reader that does not know `kind` reads a bitmap blob as an ordered one, fails its
    /// directory checks and scans: slower, never wrong.
    #[serde(flatten)]
    pub spec: crate::index::IndexSpec,
    /// A vector index's trained codebook (`docs/vector-index.md`): what its blobs are
    /// written against and its queries probe with. Absent before the first build that saw a
    /// vector, and for every other kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codebook: Option<CodebookRef>,
    pub state: IndexState,
    /// Per data file that has the index: where its blob is and what prunes it. Empty when
    /// the lists live in a [`IndexManifest::part`]; readers go through
    /// [`IndexManifest::file_entries`], which sees either.
    pub files: Vec<IndexFileEntry>,
    /// The table-wide sorted run of this index, when built (many-file tables). Readers go
    /// through [`IndexManifest::table_run`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<TableRun>,
    /// Runs written after `run` (RFC 0004, "Runs are tiers"), oldest first: each covers files
    /// that arrived or changed since the runs before it were written. A file is answered by
    /// the newest run whose facts it still matches ([`TableManifest::tier_coverage`]). A
    /// reader that knows only `run` answers these files from their own blobs: slower, never
    /// wrong. Readers go through [`IndexManifest::table_runs`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<TableRun>,
    /// Where `files` and `run` are when the manifest splits them out of the root document
    /// (large tables: see [`PART_MIN_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<PartRef>,
    /// The part once read and verified ([`IndexManifest::attach`]): set once per pinned
    /// manifest, shared by every snapshot of it.
    #[serde(skip)]
    pub loaded: std::sync::OnceLock<std::sync::Arc<IndexPart>>,
}

/// Where a vector index's codebook object is (relative to the overlay root, under
/// `codebooks/`), bound by its size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodebookRef {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// An index's lists split out of the root manifest: an object beside it, named by the
/// version (`manifests/<version>/<table id>-<index id>.json`), bound to the root by its size
/// and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRef {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Entries in the part's `files` (what listings show without reading it).
    pub files: u64,
}

/// The document a [`PartRef`] names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPart {
    pub format_version: u32,
    pub version: u64,
    pub table_id: u64,
    pub index_id: u64,
    pub files: Vec<IndexFileEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<TableRun>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<TableRun>,
}

/// An index whose `files` and `run` serialize to more than this many bytes is published
/// as a part ([`PartRef`]): the root of a 10,000-file table then holds its file list and
/// index headers, and each index's lists are read when a query first uses that index.
pub const PART_MIN_BYTES: usize = 1 << 20;

/// A full-text index with a table run keeps the entries of the files its run answers in a
/// part beside the root once they serialize to more than this (and its run, at most
/// [`PART_MIN_BYTES`], in the root): a search answered by the run never reads them — at 200
/// files they were 175 KB of a 269 KB manifest every cold search read. The other files'
/// entries (new, rewritten since the run) stay inline.
pub const COVERED_PART_MIN_BYTES: usize = 8 << 10;

/// Path of the part holding index `index_id` of table `table_id` in manifest `version`.
pub fn part_path(version: u64, table_id: u64, index_id: u64) -> String {
    format!("manifests/{version:020}/{table_id}-{index_id}.json")
}

impl IndexManifest {
    /// The kind of the index's blobs.
    pub fn kind(&self) -> crate::index::IndexKind {
        self.spec.kind()
    }

    /// Per data file that has the index. For a split index whose part is not loaded yet
    /// this is only the entries kept inline (none, or with a covered part those of the files
    /// its run does not answer) — the others are then answered by scanning (the same
    /// answer, slower): readers load parts ([`crate::read::lookup::Pinned::load_part`])
    /// before planning, unless the run answers those files.
    pub fn file_entries(&self) -> &[IndexFileEntry] {
        match (&self.part, self.loaded.get()) {
            (Some(_), Some(p)) => &p.files,
            _ => &self.files,
        }
    }

    /// The table-wide run (see [`IndexManifest::file_entries`] for split indexes).
    pub fn table_run(&self) -> Option<&TableRun> {
        self.run
            .as_ref()
            .or_else(|| self.loaded.get().and_then(|p| p.run.as_ref()))
    }

    /// Every run of the index, oldest first: [`IndexManifest::table_run`] and the tiers
    /// written after it (see [`IndexManifest::file_entries`] for split indexes).
    pub fn table_runs(&self) -> Vec<&TableRun> {
        let tiers = match (&self.run, self.loaded.get()) {
            (None, Some(p)) => &p.tiers,
            _ => &self.tiers,
        };
        self.table_run().into_iter().chain(tiers).collect()
    }

    /// Points this index at `part` (serialized as `bytes`) of manifest `version`: the part's
    /// path and bytes, for the publisher to write before the root.
    fn refer_part(
        &mut self,
        version: u64,
        table_id: u64,
        part: &IndexPart,
        bytes: Vec<u8>,
    ) -> (String, Vec<u8>) {
        use sha2::Digest;
        let path = part_path(version, table_id, self.index_id);
        self.part = Some(PartRef {
            path: path.clone(),
            size: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
            files: part.files.len() as u64,
        });
        (path, bytes)
    }

    /// Whether the part holds only the entries of files the run (kept in the root)
    /// answers ([`COVERED_PART_MIN_BYTES`]): a read answering those files from the run needs
    /// no part.
    pub fn covered_part(&self) -> bool {
        self.part.is_some() && self.run.is_some()
    }

    /// Whether the index's lists are at hand (inline, or the part loaded).
    pub fn lists_ready(&self) -> bool {
        self.part.is_none() || self.loaded.get().is_some()
    }

    /// How many data files the index lists (without reading a part).
    pub fn listed_files(&self) -> u64 {
        match &self.part {
            Some(p) => p.files + self.files.len() as u64,
            None => self.files.len() as u64,
        }
    }

    /// Verifies and attaches the bytes of this index's part: the size and SHA-256 the root
    /// recorded, the same version, table and index, and the checks of
    /// [`Manifest::validate`]. Errors: `E_MANIFEST`.
    pub fn attach(&self, version: u64, table: &TableManifest, bytes: &[u8]) -> Result<()> {
        let Some(r) = &self.part else {
            return Ok(());
        };
        let what = format!("index {}.{}: part {}", table.name, self.name, r.path);
        if bytes.len() as u64 != r.size {
            return Err(Error::Manifest(format!(
                "{what} is {} bytes, the manifest says {}",
                bytes.len(),
                r.size
            )));
        }
        use sha2::Digest;
        if hex::encode(sha2::Sha256::digest(bytes)) != r.sha256.to_ascii_lowercase() {
            return Err(Error::Manifest(format!("{what}: SHA-256 mismatch")));
        }
        let mut p: IndexPart =
            serde_json::from_slice(bytes).map_err(|e| Error::Manifest(format!("{what}: {e}")))?;
        if p.format_version > MANIFEST_FORMAT_VERSION
            || p.version != version
            || p.table_id != table.table_id
            || p.index_id != self.index_id
            || p.files.len() as u64 != r.files
        {
            return Err(Error::Manifest(format!(
                "{what} belongs to another manifest, table or index"
            )));
        }
        if self.covered_part() {
            // The covered files' entries join the inline ones; the run stays the root's.
            if p.run.is_some() || !p.tiers.is_empty() {
                return Err(Error::Manifest(format!(
                    "{what} holds a run beside the root's"
                )));
            }
            let mut seen: std::collections::HashSet<u64> =
                self.files.iter().map(|e| e.file_id).collect();
            if let Some(e) = p.files.iter().find(|e| !seen.insert(e.file_id)) {
                return Err(Error::Manifest(format!(
                    "{what} lists file id {} the root lists too",
                    e.file_id
                )));
            }
            p.files.extend(self.files.iter().cloned());
            let runs: Vec<&TableRun> = self.run.iter().chain(&self.tiers).collect();
            validate_lists(&table.name, &self.name, &p.files, &runs)?;
        } else {
            if !self.tiers.is_empty() || p.run.is_none() && !p.tiers.is_empty() {
                return Err(Error::Manifest(format!(
                    "{what}: tiers without the run they follow, or beside the root's"
                )));
            }
            let runs: Vec<&TableRun> = p.run.iter().chain(&p.tiers).collect();
            validate_lists(&table.name, &self.name, &p.files, &runs)?;
        }
        let _ = self.loaded.set(std::sync::Arc::new(p));
        Ok(())
    }
}

/// A table-wide sorted run: every covered file's entries in one ordered blob
/// (`skerry-ordered-v1`) whose positions are `ordinal << 40 | position`, so a point key
/// resolves across all covered files with one block read. A covered file whose facts no
/// longer match `files[ordinal]` is answered by its own blob or a scan instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRun {
    pub bundle_path: String,
    pub blob_offset: u64,
    pub blob_length: u64,
    pub ordered: OrderedMeta,
    /// Covered files, by ordinal.
    pub files: Vec<RunFile>,
    /// The blob's directory bytes (hex), when at most [`INLINE_DIRECTORY_MAX`] bytes: a
    /// reader that has the manifest then needs no request to find a key's block (verified
    /// against `ordered.directory_sha256` like a directory read from the bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
}

/// Most runs (the run and its tiers) an index lists: the build keeps at most
/// `MAX_TIERS` (`admin::runs`); a manifest naming more is refused.
pub const MAX_RUNS: usize = 16;

/// Largest run directory a manifest carries inline ([`TableRun::directory`]).
pub const INLINE_DIRECTORY_MAX: u64 = 256 << 10;

/// What a run knows about a covered file (the read gate's facts at build time).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    pub file_id: u64,
    pub path: String,
    pub sha256: String,
    pub record_count: u64,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    /// A full-text run's statistics of the file (what a search subtracts from the run's
    /// when the file changed since the run was built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextStats>,
}

/// Bits of a run position that hold the row position (the rest hold the file ordinal).
pub const RUN_POSITION_BITS: u32 = 40;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexFileEntry {
    pub file_id: u64,
    pub lineage: IndexFile,
    pub ordered: OrderedMeta,
    /// The blob was dropped (RFC 0004 "the drop", decision 71): a table run covering the
    /// file holds its entries. The record keeps the blob's lineage — the gate facts the build
    /// and readiness read, and `blob_sha256`, what `verify` compares a rebuild with — but no
    /// bundle holds the blob any more. Catalog only: a manifest lists no such entry, so a
    /// reader answers the file from its run or scans it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_run: bool,
}

impl IndexFileEntry {
    /// The read gate's decision on this blob for data file `f` as the manifest lists it now,
    /// at the table's `snapshot` ([`crate::formats::lineage::ReadGate::check`]).
    pub fn gate(
        &self,
        f: &FileEntry,
        snapshot: crate::formats::lineage::ActiveSnapshot,
    ) -> crate::formats::lineage::GateDecision {
        crate::formats::lineage::ReadGate::check(
            &f.path,
            Some(&self.lineage),
            Some(&f.facts()),
            snapshot,
        )
    }
}

/// The facts a reader needs of a blob without reading it (defined beside the kinds that
/// write them, [`crate::index::blob::BlobMeta`]).
pub use crate::index::blob::{BlobMeta as OrderedMeta, TextStats};

impl Manifest {
    pub fn table(&self, name: &str) -> Result<&TableManifest> {
        self.tables
            .iter()
            .find(|t| crate::values::names::same(&t.name, name))
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: name.to_string(),
            })
    }

    /// Parses and validates a manifest.
    pub fn from_json(bytes: &[u8]) -> Result<Manifest> {
        serde_json::from_slice::<Manifest>(bytes)
            .map_err(|e| Error::Manifest(e.to_string()))?
            .checked()
    }

    /// A parsed manifest, refused when its format version is newer than this reader's or
    /// [`Manifest::validate`] fails: what [`Manifest::from_json`] and an inlined copy in
    /// `HEAD` ([`read_latest`]) both go through.
    fn checked(self) -> Result<Manifest> {
        let m = self;
        if m.format_version > MANIFEST_FORMAT_VERSION {
            return Err(Error::Manifest(format!(
                "format version {} is newer than supported {MANIFEST_FORMAT_VERSION}",
                m.format_version
            )));
        }
        m.validate()?;
        Ok(m)
    }

    /// Checks what a reader would otherwise trust blindly: every path is a safe relative path
    /// ([`crate::io::path::check_relative`]: no scheme, no `..` in any encoding, …) and every
    /// size, offset, length and count is at most [`MAX_MANIFEST_NUMBER`] and consistent
    /// (ranges inside their blobs, row ids without overflow). Errors: `E_MANIFEST` naming the
    /// field.
    pub fn validate(&self) -> Result<()> {
        fn bad(what: String) -> Error {
            Error::Manifest(what)
        }
        let (path, num) = (check_path, check_num);
        for t in &self.tables {
            let tn = &t.name;
            for f in &t.files {
                path(&f.path, &format!("table {tn}: data file path"))?;
                num(f.size, "data file size")?;
                num(f.record_count, "data file record count")?;
                if f.metadata_offset
                    .is_some_and(|o| o.saturating_add(8) > f.size)
                {
                    return Err(bad(format!(
                        "{}: metadata offset past the file's footer",
                        f.path
                    )));
                }
                if let Some(runs) = &f.row_id_runs {
                    if runs.len() as u64 > f.record_count || f.row_id_start.is_some() {
                        return Err(bad(format!("{}: malformed row id runs", f.path)));
                    }
                    runs.validate(f.record_count)
                        .map_err(|e| bad(format!("{}: row id runs: {e}", f.path)))?;
                }
                if let Some(s) = f.row_id_start {
                    if s.checked_add(f.record_count)
                        .is_none_or(|end| end > i64::MAX as u64)
                    {
                        return Err(bad(format!("{}: row ids overflow", f.path)));
                    }
                }
            }
            for ix in &t.indexes {
                if ix.run.is_none() && !ix.tiers.is_empty() {
                    return Err(bad(format!(
                        "index {tn}.{}: tiers without the run they follow",
                        ix.name
                    )));
                }
                let runs: Vec<&TableRun> = ix.run.iter().chain(&ix.tiers).collect();
                validate_lists(tn, &ix.name, &ix.files, &runs)?;
                if let Some(p) = &ix.part {
                    let what = format!("index {tn}.{}: part", ix.name);
                    path(&p.path, &what)?;
                    // A part replaces the inline lists, or (format 3) holds the entries of
                    // the files the run kept inline answers.
                    let covered = ix.run.is_some() && self.format_version >= FORMAT_VERSION_COVERED;
                    if !p.path.starts_with("manifests/")
                        || !covered && (!ix.files.is_empty() || ix.run.is_some())
                    {
                        return Err(bad(format!(
                            "{what} must be under manifests/ and replace the inline lists"
                        )));
                    }
                    if p.size > MAX_MANIFEST_BYTES {
                        return Err(bad(format!(
                            "{what} is larger than {MAX_MANIFEST_BYTES} bytes"
                        )));
                    }
                    num(p.files, &what)?;
                    if p.sha256.len() != 64 || !p.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(bad(format!("{what}: sha256 is not 64 hex digits")));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("manifest serializes")
    }

    /// Moves every index's lists that serialize to more than `min_bytes` (normally
    /// [`PART_MIN_BYTES`]) into a part, returning the parts' (path, bytes) for the publisher
    /// to write before the root; the manifest becomes format version 2 when it splits
    /// anything. A full-text index with a run of at most [`PART_MIN_BYTES`] (or `min_bytes`,
    /// when larger) keeps it in the root and
    /// moves only the entries of the files it answers, once they pass the smaller of
    /// `min_bytes` and [`COVERED_PART_MIN_BYTES`] (format version 3).
    pub fn split_parts(&mut self, min_bytes: usize) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let version = self.version;
        let mut covered_any = false;
        for t in &mut self.tables {
            let coverage: Vec<Option<std::collections::HashSet<u64>>> = t
                .indexes
                .iter()
                .map(|ix| {
                    // Runs whose readers answer covered files from the run alone and read
                    // their entries only when it stops (full text's, `read::search`).
                    let layout = crate::index::kind::of(ix.kind()).and_then(|k| k.run());
                    let run = ix.run.as_ref().filter(|_| {
                        ix.part.is_none()
                            && layout == Some(crate::index::kind::RunLayout::Concatenated)
                    })?;
                    let ids = t
                        .run_coverage(run)
                        .into_iter()
                        .flatten()
                        .map(|i| t.files[i].file_id)
                        .collect();
                    Some(ids)
                })
                .collect();
            for (ix, covered) in t.indexes.iter_mut().zip(coverage) {
                if ix.part.is_some() {
                    continue;
                }
                if let Some(ids) = covered {
                    let run_bytes = serde_json::to_vec(&(&ix.run, &ix.tiers))
                        .expect("runs serialize")
                        .len();
                    let (inside, inline): (Vec<IndexFileEntry>, Vec<IndexFileEntry>) =
                        std::mem::take(&mut ix.files)
                            .into_iter()
                            .partition(|e| ids.contains(&e.file_id));
                    let part = IndexPart {
                        format_version: FORMAT_VERSION_COVERED,
                        version,
                        table_id: t.table_id,
                        index_id: ix.index_id,
                        files: inside,
                        run: None,
                        tiers: vec![],
                    };
                    let bytes = serde_json::to_vec(&part).expect("part serializes");
                    if run_bytes <= min_bytes.max(PART_MIN_BYTES)
                        && bytes.len() > min_bytes.min(COVERED_PART_MIN_BYTES)
                        && !part.files.is_empty()
                    {
                        ix.files = inline;
                        out.push(ix.refer_part(version, t.table_id, &part, bytes));
                        covered_any = true;
                        continue;
                    }
                    // Not worth a covered part: back in file order, as they were.
                    let order: std::collections::HashMap<u64, usize> = t
                        .files
                        .iter()
                        .enumerate()
                        .map(|(i, f)| (f.file_id, i))
                        .collect();
                    let mut all = part.files;
                    all.extend(inline);
                    all.sort_by_key(|e| order.get(&e.file_id).copied().unwrap_or(usize::MAX));
                    ix.files = all;
                }
                let part = IndexPart {
                    format_version: FORMAT_VERSION_SPLIT,
                    version,
                    table_id: t.table_id,
                    index_id: ix.index_id,
                    files: std::mem::take(&mut ix.files),
                    run: ix.run.take(),
                    tiers: std::mem::take(&mut ix.tiers),
                };
                let bytes = serde_json::to_vec(&part).expect("part serializes");
                if bytes.len() <= min_bytes || part.files.is_empty() && part.run.is_none() {
                    ix.files = part.files;
                    ix.run = part.run;
                    ix.tiers = part.tiers;
                    continue;
                }
                out.push(ix.refer_part(version, t.table_id, &part, bytes));
            }
        }
        if covered_any {
            self.format_version = FORMAT_VERSION_COVERED;
        } else if !out.is_empty() {
            self.format_version = FORMAT_VERSION_SPLIT;
        }
        out
    }
}

/// `E_MANIFEST` naming `what` unless `p` is a safe relative path.
fn check_path(p: &str, what: &str) -> Result<()> {
    crate::io::path::check_relative(p)
        .map(|_| ())
        .map_err(|e| Error::Manifest(format!("{what}: {e}")))
}

/// `E_MANIFEST` naming `what` unless `n` ≤ [`MAX_MANIFEST_NUMBER`].
fn check_num(n: u64, what: &str) -> Result<()> {
    if n > MAX_MANIFEST_NUMBER {
        return Err(Error::Manifest(format!("{what} {n} is out of range")));
    }
    Ok(())
}

/// The checks of [`Manifest::validate`] on one index's lists (inline or from a part).
fn validate_lists(
    table: &str,
    index: &str,
    files: &[IndexFileEntry],
    runs: &[&TableRun],
) -> Result<()> {
    fn bad(what: String) -> Error {
        Error::Manifest(what)
    }
    let (path, num) = (check_path, check_num);
    let ordered = |o: &OrderedMeta, blob_len: u64, what: &str| -> Result<()> {
        num(o.directory_offset, what)?;
        num(o.directory_length, what)?;
        num(o.entries, what)?;
        if o.directory_offset + o.directory_length > blob_len {
            return Err(bad(format!("{what}: directory outside the blob")));
        }
        Ok(())
    };
    let what = format!("index {table}.{index}");
    for e in files {
        let l = &e.lineage;
        path(&l.bundle_path, &what)?;
        num(l.blob_offset, &what)?;
        num(l.blob_length, &what)?;
        num(l.source_record_count, &what)?;
        ordered(&e.ordered, l.blob_length, &what)?;
    }
    if runs.len() > MAX_RUNS {
        return Err(bad(format!("{what}: more than {MAX_RUNS} runs")));
    }
    for r in runs {
        path(&r.bundle_path, &what)?;
        num(r.blob_offset, &what)?;
        num(r.blob_length, &what)?;
        ordered(&r.ordered, r.blob_length, &what)?;
        if r.directory.as_ref().is_some_and(|d| {
            d.len() as u64 != 2 * r.ordered.directory_length
                || r.ordered.directory_length > INLINE_DIRECTORY_MAX
        }) {
            return Err(bad(format!(
                "{what}: inline run directory is not its directory's length"
            )));
        }
        if r.files.len() as u64 > 1 << (64 - RUN_POSITION_BITS) {
            return Err(bad(format!("{what}: run covers too many files")));
        }
        let mut seen = std::collections::HashSet::with_capacity(r.files.len());
        for rf in &r.files {
            if rf.record_count > 1 << RUN_POSITION_BITS {
                return Err(bad(format!("{what}: run file record count")));
            }
            // A file listed twice would be answered (and a run's statistics counted) twice.
            if !seen.insert(rf.file_id) {
                return Err(bad(format!(
                    "{what}: the run names a file twice (file id {})",
                    rf.file_id
                )));
            }
        }
    }
    Ok(())
}

impl TableManifest {
    pub fn index(&self, name: &str) -> Result<&IndexManifest> {
        self.indexes
            .iter()
            .find(|i| crate::values::names::same(&i.name, name))
            .ok_or_else(|| Error::NotFound {
                kind: "index",
                name: format!("{}.{}", self.name, name),
            })
    }

    /// For each of `runs` (oldest first), [`TableManifest::run_coverage`] with every file
    /// answered by one run only: the newest that still covers it.
    pub fn tier_coverage(&self, runs: &[&TableRun]) -> Vec<Vec<Option<usize>>> {
        let mut taken = vec![false; self.files.len()];
        let mut out: Vec<Vec<Option<usize>>> = runs
            .iter()
            .rev()
            .map(|r| {
                let mut cov = self.run_coverage(r);
                for c in &mut cov {
                    if let Some(i) = *c {
                        if std::mem::replace(&mut taken[i], true) {
                            *c = None;
                        }
                    }
                }
                cov
            })
            .collect();
        out.reverse();
        out
    }

    /// For each ordinal of `run`, the index in `files` of the file it still covers: the
    /// file's current facts (path, SHA-256, record count) equal the run's and its snapshot is
    /// not in the future; `None` for an ordinal whose file drifted or left the table.
    pub fn run_coverage(&self, run: &TableRun) -> Vec<Option<usize>> {
        // Every search asks this, so it stays cheap at thousands of files: a run lists its
        // files mostly in the table's order, so each is looked for first just after the one
        // before; the map by id is built only when that misses.
        let mut by_id: Option<std::collections::HashMap<u64, usize>> = None;
        let mut next = 0usize;
        run.files
            .iter()
            .map(|rf| {
                let i = match self.files.get(next) {
                    Some(f) if f.file_id == rf.file_id => next,
                    _ => *by_id
                        .get_or_insert_with(|| {
                            let mut m = std::collections::HashMap::with_capacity(self.files.len());
                            for (i, f) in self.files.iter().enumerate() {
                                m.insert(f.file_id, i);
                            }
                            m
                        })
                        .get(&rf.file_id)?,
                };
                next = i + 1;
                let f = &self.files[i];
                (f.record_count == rf.record_count
                    && rf.sequence_number <= self.snapshot.sequence_number
                    && f.path == rf.path
                    && (f.sha256 == rf.sha256 || f.sha256.eq_ignore_ascii_case(&rf.sha256)))
                .then_some(i)
            })
            .collect()
    }

    /// Full location (URL) of a data file: the table's location and the file's object name,
    /// each segment percent-encoded ([`crate::io::path::join`]).
    pub fn data_location(&self, f: &FileEntry) -> String {
        crate::io::path::join(&self.location, &f.path)
    }
}

/// Reads `HEAD`: the newest version, its manifest's path and, when inlined, the manifest.
pub async fn read_head<R: RangeReader + ?Sized>(r: &R) -> Result<Head> {
    let bytes = read_small(r, HEAD_PATH, MAX_HEAD_BYTES).await?;
    let head: Head = serde_json::from_slice(&Head::json(&bytes)?)
        .map_err(|e| Error::Manifest(format!("HEAD: {e}")))?;
    // One object directly in manifests/ (a manifest version's name), nothing below it.
    let in_manifests = head
        .path
        .strip_prefix("manifests/")
        .is_some_and(|name| !name.contains('/'));
    if crate::io::path::check_relative(&head.path).is_err() || !in_manifests {
        return Err(Error::Manifest(format!(
            "HEAD points outside manifests/: {:?}",
            head.path.chars().take(200).collect::<String>()
        )));
    }
    Ok(head)
}

/// Reads the manifest `HEAD` names — inlined in `HEAD` (one read), else from its path (two);
/// both bounded while read, the manifest validated ([`Manifest::validate`]) either way.
pub async fn read_latest<R: RangeReader + ?Sized>(r: &R) -> Result<Manifest> {
    let head = read_head(r).await?;
    let m = match head.manifest {
        Some(inline) => inline.checked()?,
        None => Manifest::from_json(&read_small(r, &head.path, MAX_MANIFEST_BYTES).await?)?,
    };
    if m.version != head.version {
        return Err(Error::Manifest(format!(
            "HEAD names version {} but the manifest is {}",
            head.version, m.version
        )));
    }
    Ok(m)
}

/// Reads manifest `version` (published, not vacuumed). Errors: `E_NOT_FOUND` when it is
/// gone, `E_MANIFEST` when malformed or not that version.
pub async fn read_version<R: RangeReader + ?Sized>(r: &R, version: u64) -> Result<Manifest> {
    let m =
        Manifest::from_json(&read_small(r, &manifest_path(version), MAX_MANIFEST_BYTES).await?)?;
    if m.version != version {
        return Err(Error::Manifest(format!(
            "{} holds version {}",
            manifest_path(version),
            m.version
        )));
    }
    Ok(m)
}

/// Reads and attaches the part of `ix` (in `table` of `m`) unless its lists are at hand
/// ([`IndexManifest::lists_ready`]): one read of at most the size the root recorded, then
/// [`IndexManifest::attach`]'s checks. Errors: `E_MANIFEST`, or the read's.
pub async fn load_part<R: RangeReader + ?Sized>(
    r: &R,
    m: &Manifest,
    table: &TableManifest,
    ix: &IndexManifest,
) -> Result<()> {
    let Some(p) = ix.part.as_ref().filter(|_| !ix.lists_ready()) else {
        return Ok(());
    };
    let bytes = read_small(r, &p.path, p.size).await?;
    ix.attach(m.version, table, &bytes)
}

/// Reads `HEAD` or a manifest, bounded by [`MAX_MANIFEST_BYTES`] while reading.
async fn read_small<R: RangeReader + ?Sized>(r: &R, path: &str, max: u64) -> Result<bytes::Bytes> {
    match r.read_all_max(&Location::new(path), max).await {
        Ok(b) => Ok(b),
        Err(crate::io::IoError::TooLarge { .. }) => Err(Error::Manifest(format!(
            "{path} is larger than {max} bytes"
        ))),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's coverage is, ordinal by ordinal, the table file with its id whose path,
    /// SHA-256 (any case) and record count are the run's, at a sequence number not past the
    /// table's — whatever order the run lists its files in, with files drifted, gone and
    /// listed out of order among them.
    #[test]
    fn run_coverage_finds_each_file_by_id_in_any_order() {
        let file = |id: u64, rows: u64| {
            serde_json::json!({"file_id": id, "path": format!("d/{id}.parquet"), "size": 9,
                "record_count": rows, "sha256": format!("{id:064x}").replace('a', "A")})
        };
        let files: Vec<_> = (0..40u64).map(|i| file(100 + i, 10 + i)).collect();
        let table: TableManifest = serde_json::from_value(serde_json::json!({
            "table_id": 1, "name": "t", "location": "file:///x",
            "snapshot": {"snapshot_id": 1, "sequence_number": 5},
            "fields": [], "files": files, "indexes": []
        }))
        .unwrap();
        // The run's view: in table order, then shuffled; some facts changed.
        let mut order: Vec<u64> = (0..40).collect();
        order.swap(3, 17);
        order[20..30].reverse();
        let run_file = |i: u64| {
            let id = 100 + i;
            let rows = if i == 7 { 99 } else { 10 + i }; // drifted: another record count
            let path = if i == 11 {
                "d/other.parquet".into()
            } else {
                format!("d/{id}.parquet")
            };
            let seq = if i == 13 { 6 } else { 5 }; // built from a snapshot past the table's
            let id = if i == 19 { 999 } else { id }; // gone from the table
            serde_json::json!({"file_id": id, "path": path, "sha256": format!("{:064x}", 100 + i),
                "record_count": rows, "snapshot_id": 1, "sequence_number": seq})
        };
        let run: TableRun = serde_json::from_value(serde_json::json!({
            "bundle_path": "b", "blob_offset": 0, "blob_length": 1,
            "ordered": {"directory_offset": 0, "directory_length": 0,
                "directory_sha256": "", "entries": 0},
            "files": order.iter().map(|i| run_file(*i)).collect::<Vec<_>>()
        }))
        .unwrap();
        let want: Vec<Option<usize>> = order
            .iter()
            .map(|&i| (![7, 11, 13, 19].contains(&i)).then_some(i as usize))
            .collect();
        assert_eq!(table.run_coverage(&run), want);
        assert_eq!(table.tier_coverage(&[&run]), vec![want]);
    }

    #[test]
    fn head_inlines_what_fits_and_points_to_the_rest() {
        let small = br#"{"format_version":1,"version":3,"catalog_version":1,"tables":[]}"#;
        let parse =
            |body: &[u8]| -> Head { serde_json::from_slice(&Head::json(body).unwrap()).unwrap() };
        // Small: plain JSON.
        let body = Head::body(3, &manifest_path(3), small);
        assert_eq!(body[0], b'{');
        let head: Head = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (head.version, head.path.as_str()),
            (3, "manifests/00000000000000000003.json")
        );
        assert_eq!(head.manifest.unwrap().checked().unwrap().version, 3);
        // A valid manifest of `n` bytes: the small one with `filler` before its last brace.
        let sized = |n: usize, filler: &dyn Fn(usize) -> u8| {
            let mut m = small[..small.len() - 1].to_vec();
            m.extend_from_slice(br#","x":""#);
            let k = m.len();
            m.extend((k..n - 2).map(filler));
            m.extend_from_slice(b"\"}");
            m
        };
        let spaces = |_: usize| b' ';
        // Past PLAIN_HEAD_BYTES: zlib, read back to the same manifest.
        let pointer_len = Head::body(3, &manifest_path(3), b"").len() - b",\"manifest\":".len();
        let plain_max = PLAIN_HEAD_BYTES - pointer_len - b",\"manifest\":".len();
        assert_eq!(
            Head::body(3, &manifest_path(3), &sized(plain_max, &spaces)).len(),
            PLAIN_HEAD_BYTES
        );
        let body = Head::body(3, &manifest_path(3), &sized(plain_max + 1, &spaces));
        assert_eq!(body[0], 0x78, "zlib");
        assert!(body.len() < 1024);
        assert_eq!(parse(&body).manifest.unwrap().checked().unwrap().version, 3);
        // Up to MAX_HEAD_JSON_BYTES of JSON inlined; one byte more, the pointer alone.
        let json_max = MAX_HEAD_JSON_BYTES as usize - pointer_len - b",\"manifest\":".len();
        let body = Head::body(3, &manifest_path(3), &sized(json_max, &spaces));
        assert_eq!(Head::json(&body).unwrap().len() as u64, MAX_HEAD_JSON_BYTES);
        assert!(parse(&body).manifest.is_some());
        let body = Head::body(3, &manifest_path(3), &sized(json_max + 1, &spaces));
        assert!(body.len() < 100 && parse(&body).manifest.is_none());
        // JSON that does not compress into MAX_HEAD_BYTES: the pointer alone.
        let x = std::cell::Cell::new(0x2545_f491_u32);
        let noise = |_: usize| {
            let mut v = x.get();
            v ^= v << 13;
            v ^= v >> 17;
            v ^= v << 5;
            x.set(v);
            b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[v as usize % 62]
        };
        let body = Head::body(3, &manifest_path(3), &sized(400 << 10, &noise));
        assert!(body.len() < 100 && parse(&body).manifest.is_none());
    }

    /// A `HEAD` that is neither JSON nor zlib, or inflates past its bound, is `E_MANIFEST`.
    #[test]
    fn head_refuses_garbage_and_deflate_bombs() {
        for bad in [&b""[..], b"\x00\x01\x02", b"x\x9c\x00garbage", b"[1]"] {
            assert!(
                matches!(Head::json(bad), Err(Error::Manifest(_))),
                "{bad:?}"
            );
        }
        let bomb = miniz_oxide::deflate::compress_to_vec_zlib(
            &vec![b' '; MAX_HEAD_JSON_BYTES as usize + 1],
            9,
        );
        assert!(bomb.len() < 8 << 10);
        match Head::json(&bomb) {
            Err(Error::Manifest(m)) => assert!(m.contains("inflates past"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Exactly the bound inflates.
        let ok = miniz_oxide::deflate::compress_to_vec_zlib(
            &vec![b' '; MAX_HEAD_JSON_BYTES as usize],
            9,
        );
        assert_eq!(Head::json(&ok).unwrap().len() as u64, MAX_HEAD_JSON_BYTES);
    }
}
