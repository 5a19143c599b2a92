//! Carrying an output file's index entries over a move (RFC 0006, decisions 75 and 76): from
//! the blobs of the files its rows came from — their own blobs, or the table runs holding
//! them — instead of from its columns. Used where an output's blobs are written: the
//! registration that commits the move (`admin::lifecycle`, when the work fits its commit)
//! and the build's steps (`admin::build`, from the move's [`MoveRecord`] when it did not).
//!
//! Two ways, by kind: a kind whose input is the key has its sources' `(key, position)` entries
//! mapped to the output's rows and handed to its writer as a build's would be — read from its own
//! blobs when they hold them ([`Kind::read_entries`]: ordered, bitmap), else from those of an index
//! on the same key that holds them (a bloom filter's, decision 80); a kind whose blob holds what
//! the input made of a row ([`Kind::carry`]: full text, vector) writes the output's blob from the
//! sources' blobs directly. Either way the blob is the one a build writes from the output's rows
//! when the move is honest, which `verify` certifies by rebuilding it. Anything short — a source
//! without a blob the read gate accepted, a blob that fails its SHA-256 or does not decode, a kind
//! that declines — leaves the index to be derived.
//!
//! [`Kind::read_entries`]: crate::index::kind::Kind::read_entries
//! [`Kind::carry`]: crate::index::kind::Kind::carry

use std::collections::HashMap;

use crate::admin::catalog::{
    accepted, artifact_key, move_prefix, Catalog, IndexRecord, TableRecord,
};
use crate::admin::codebook::Codebooks;
use crate::admin::moves::{Move, MoveRecord, SourceBlobs, SourceEntries, SourceFacts};
use crate::error::Result;
use crate::formats::codec::Codec;
use crate::formats::lineage;
use crate::formats::manifest::{FileEntry, IndexFileEntry, OrderedMeta};
use crate::index::kind::Input;
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// An output's entries of one index carried over a move: `(key, position)` entries for its
/// writer (ordered, bitmap), or its finished blob and the facts the manifest records of it
/// (full text, vector).
pub(crate) enum Carried {
    Entries(Vec<(Vec<u8>, u64)>),
    Blob(Vec<u8>, OrderedMeta),
}

/// What a carry reads with: an overlay's catalog, store and codebooks
/// (`Overlay::carrier`); a fan-out worker's has no catalog (its task holds the move's record)
/// and only carries ([`Carrier::carry_step`]).
pub(crate) struct Carrier<'a> {
    pub catalog: Option<&'a Catalog>,
    pub reader: &'a ObjectStoreReader,
    pub codebooks: &'a Codebooks,
    pub block_bytes: usize,
}

impl Carrier<'_> {
    /// The catalog, for what only the committer reads (a worker's carrier has none).
    fn catalog(&self) -> Result<&Catalog> {
        self.catalog.ok_or_else(|| {
            crate::error::Error::Invalid(
                "carry: the move's sources are read by the committer".into(),
            )
        })
    }

    /// A build step's carry of output `f`'s entries of `ix` from its move's record; `None`
    /// when they must be derived.
    pub(crate) async fn carry_step(
        &self,
        rec: &MoveRecord,
        f: &FileEntry,
        ix: &IndexRecord,
        siblings: &[IndexRecord],
        blobs: &mut SourceBlobs,
    ) -> Result<Option<Carried>> {
        let Some(mv) = rec.to_move().filter(|m| m.outputs[0] == f.path) else {
            return Ok(None);
        };
        // Entries read for this record only: its sources are numbered its own way.
        let mut entries = SourceEntries::default();
        if let Some(e) = self
            .carried_entries(&mv, &rec.sources, f, ix, siblings, &mut entries)
            .await?
        {
            return Ok(Some(Carried::Entries(e)));
        }
        Ok(self
            .carried_blob(&mv, &rec.sources, f, ix, blobs)
            .await?
            .map(|(b, m)| Carried::Blob(b, m)))
    }

    /// What carrying `mv` reads of its sources, from the catalog as it is now (before the
    /// commit that drops them): their entries among `existing`, their blobs of `indexes`
    /// the read gate accepts (uncompressed), and the runs holding those a run holds.
    pub(crate) async fn source_facts(
        &self,
        tr: &TableRecord,
        existing: &[FileEntry],
        mv: &Move,
        indexes: &[IndexRecord],
    ) -> Result<SourceFacts> {
        let files: Vec<FileEntry> = mv
            .sources
            .iter()
            .filter_map(|p| existing.iter().find(|f| &f.path == p).cloned())
            .collect();
        let t = self.catalog()?.begin()?;
        let mut facts = SourceFacts::default();
        for ix in indexes {
            let mut in_run = false;
            for f in &files {
                let a: Option<IndexFileEntry> =
                    t.get(&artifact_key(ix.index_id, f.file_id)).await?;
                if let Some(a) =
                    a.filter(|a| a.lineage.compression == Codec::None && accepted(f, Some(a), tr))
                {
                    in_run |= a.in_run;
                    facts.artifacts.push(a);
                }
            }
            if in_run {
                for r in t.runs(ix.index_id).await? {
                    if r.files
                        .iter()
                        .any(|rf| files.iter().any(|f| f.file_id == rf.file_id))
                    {
                        facts.runs.push((ix.index_id, r));
                    }
                }
            }
        }
        facts.files = files;
        Ok(facts)
    }

    /// The moves recorded for `table`'s outputs whose entries are still to be carried, by
    /// output file id (records that do not decode are left out: their outputs derive).
    pub(crate) async fn move_records(&self, table_id: u64) -> Result<HashMap<u64, MoveRecord>> {
        let t = self.catalog()?.begin()?;
        let mut out = HashMap::new();
        for (key, rec) in t
            .scan_limit::<MoveRecord>(&move_prefix(table_id), usize::MAX)
            .await?
        {
            if let Some(id) = key.rsplit('/').next().and_then(|s| s.parse().ok()) {
                out.insert(id, rec);
            }
        }
        Ok(out)
    }

    /// Output `f`'s `(key, position)` entries of `ix` carried over `mv`, sorted as a build
    /// sorts them, or `None` when they must be derived: `f` is not an output, the kind's
    /// input is not the key, or no index can give them (see the module docs). Sources' entries
    /// are read once per index into `cache`.
    ///
    /// The entries are every key kind's input, the same for every index on the same key
    /// (decision 80): they come from `ix`'s own source blobs when its kind holds them
    /// (ordered, bitmap), else from a *donor* among `siblings` — an index of the table on the
    /// same fields with the same key schema whose kind holds them. A bloom filter, which
    /// names no positions, is so carried from an ordered or bitmap index on its column, and
    /// written by its own writer from the entries a build would have given it.
    pub(crate) async fn carried_entries(
        &self,
        mv: &Move,
        facts: &SourceFacts,
        f: &FileEntry,
        ix: &IndexRecord,
        siblings: &[IndexRecord],
        cache: &mut SourceEntries,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>> {
        let Some(o) = mv.outputs.iter().position(|p| *p == f.path) else {
            return Ok(None);
        };
        let o = o as u32;
        if !ix.kind().kind().is_some_and(|k| k.input() == Input::Key) {
            return Ok(None);
        }
        for d in donors(ix, siblings) {
            if let Some(e) = self.donor_entries(mv, facts, f, o, d, cache).await? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// Output `o`'s entries carried from donor `d`'s source blobs, or `None` when a source's
    /// blob of `d` cannot give them.
    async fn donor_entries(
        &self,
        mv: &Move,
        facts: &SourceFacts,
        f: &FileEntry,
        o: u32,
        d: &IndexRecord,
        cache: &mut SourceEntries,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>> {
        for s in mv.sources_of(o) {
            if cache.contains_key(&(d.index_id, s)) {
                continue;
            }
            let a = mv
                .sources
                .get(s as usize)
                .and_then(|p| facts.files.iter().find(|f| &f.path == p))
                .and_then(|src| {
                    facts
                        .artifacts
                        .iter()
                        .find(|a| a.lineage.index_id == d.index_id && a.file_id == src.file_id)
                });
            let got = match a.filter(|a| !a.in_run) {
                Some(a) => self.source_entries(a, d).await?,
                None => None,
            };
            cache.insert((d.index_id, s), got);
        }
        Ok(mv.carry(o, f.record_count, d.index_id, cache))
    }

    /// Every `(key, position)` entry of the blob `a` records, read whole and checked; `None`
    /// when it cannot be read back.
    async fn source_entries(
        &self,
        a: &IndexFileEntry,
        ix: &IndexRecord,
    ) -> Result<Option<Vec<(Vec<u8>, u64)>>> {
        let blob = match self
            .reader
            .read_range(
                &Location::new(&a.lineage.bundle_path),
                a.lineage.blob_range(),
            )
            .await
        {
            Ok(b) => b,
            Err(_) => return Ok(None),
        };
        if lineage::sha256_hex(&blob) != a.lineage.blob_sha256 {
            return Ok(None);
        }
        let mut out = Vec::new();
        match ix
            .kind()
            .read_entries(&blob, &mut |k, p| out.push((k.to_vec(), p)))
        {
            Ok(()) => Ok(Some(out)),
            Err(_) => Ok(None),
        }
    }

    /// Output `f`'s blob of `ix` carried whole over `mv` ([`crate::index::kind::Kind::carry`]:
    /// full text, vector), with the facts its manifest entry records; `None` when it must be
    /// derived (see the module docs). Source blobs and runs are read whole, once for every
    /// output (`cache`).
    pub(crate) async fn carried_blob(
        &self,
        mv: &Move,
        facts: &SourceFacts,
        f: &FileEntry,
        ix: &IndexRecord,
        cache: &mut SourceBlobs,
    ) -> Result<Option<(Vec<u8>, OrderedMeta)>> {
        use crate::admin::moves::SourcePlace;
        let Some(o) = mv.outputs.iter().position(|p| *p == f.path) else {
            return Ok(None);
        };
        let o = o as u32;
        let Some(kind) = ix.kind().kind() else {
            return Ok(None);
        };
        if kind.input() == Input::Key {
            return Ok(None);
        }
        // Per source: (its place in the move, the file, its artifact, where its entries are).
        let mut found = Vec::new();
        for s in mv.sources_of(o) {
            let Some(src) = mv
                .sources
                .get(s as usize)
                .and_then(|p| facts.files.iter().find(|f| &f.path == p))
            else {
                return Ok(None);
            };
            let Some(a) = facts
                .artifacts
                .iter()
                .find(|a| a.lineage.index_id == ix.index_id && a.file_id == src.file_id)
            else {
                return Ok(None);
            };
            let place = if a.in_run {
                // The run holding the file: its blob, the file's ordinal and first run row.
                let held = facts
                    .runs
                    .iter()
                    .filter(|(i, _)| *i == ix.index_id)
                    .find_map(|(_, r)| {
                        let k = r.files.iter().position(|rf| {
                            rf.file_id == src.file_id
                                && rf.sha256 == a.lineage.source_sha256
                                && rf.sequence_number == a.lineage.source_sequence_number
                        })?;
                        let base = r.files[..k].iter().map(|rf| rf.record_count).sum::<u64>();
                        Some((r, k as u32, base))
                    });
                let Some((r, k, base)) = held else {
                    return Ok(None);
                };
                SourcePlace {
                    bundle_path: r.bundle_path.clone(),
                    range: r.blob_offset..r.blob_offset + r.blob_length,
                    sha256: None,
                    directory: r.ordered.directory_offset
                        ..r.ordered.directory_offset + r.ordered.directory_length,
                    directory_sha256: r.ordered.directory_sha256.clone(),
                    run: Some((k, base)),
                }
            } else {
                SourcePlace {
                    bundle_path: a.lineage.bundle_path.clone(),
                    range: a.lineage.blob_range(),
                    sha256: Some(a.lineage.blob_sha256.clone()),
                    directory: a.ordered.directory_offset
                        ..a.ordered.directory_offset + a.ordered.directory_length,
                    directory_sha256: a.ordered.directory_sha256.clone(),
                    run: None,
                }
            };
            found.push((s, src, a, place));
        }
        for (_, _, _, place) in &found {
            let key = (place.bundle_path.clone(), place.range.start);
            if cache.contains_key(&key) {
                continue;
            }
            let got = match self
                .reader
                .read_range(&Location::new(&place.bundle_path), place.range.clone())
                .await
            {
                Ok(b)
                    if place
                        .sha256
                        .as_ref()
                        .is_none_or(|h| lineage::sha256_hex(&b) == *h) =>
                {
                    Some(b)
                }
                _ => None,
            };
            cache.insert(key, got);
        }
        let book = match &ix.codebook {
            Some(c) => Some(self.codebooks.load(self.reader, c).await?),
            None => None,
        };
        let maps: Vec<_> = found
            .iter()
            .map(|(s, _, _, _)| {
                let s = *s;
                move |p: u64| mv.map.target(s, p).filter(|t| t.0 == o).map(|t| t.1)
            })
            .collect();
        let mut list = Vec::with_capacity(found.len());
        for ((s, src, a, place), to) in found.iter().zip(&maps) {
            let Some(Some(blob)) = cache.get(&(place.bundle_path.clone(), place.range.start))
            else {
                return Ok(None);
            };
            let segs = mv.map.source(*s);
            list.push(crate::index::kind::CarrySource {
                blob,
                directory: place.directory.clone(),
                directory_sha256: &place.directory_sha256,
                run: place.run,
                record_count: src.record_count,
                meta: &a.ordered,
                whole: segs.iter().all(|g| g.output == o)
                    && segs.iter().map(|g| g.count).sum::<u64>() == src.record_count,
                to,
            });
        }
        let bs = crate::index::kind::BlobSource {
            index: &ix.name,
            path: &f.path,
            record_count: f.record_count,
            block_bytes: self.block_bytes,
            size_hint: 0,
            codebook: book.as_deref(),
        };
        Ok(kind.carry(&ix.spec, &bs, &list).ok().flatten())
    }
}

/// The indexes whose source blobs may give `ix`'s entries, in the order tried: `ix` itself
/// when its kind's blobs hold positions, then every other index of `siblings` on the same
/// fields and key schema whose kind's blobs hold them and that is not poisoned (each once).
fn donors<'a>(ix: &'a IndexRecord, siblings: &'a [IndexRecord]) -> Vec<&'a IndexRecord> {
    let holds = |r: &IndexRecord| {
        r.kind()
            .kind()
            .is_some_and(|k| k.input() == Input::Key && k.answers().rows)
    };
    let mut out: Vec<&IndexRecord> = Vec::new();
    if holds(ix) {
        out.push(ix);
    }
    for r in siblings {
        if r.index_id != ix.index_id
            && r.table_id == ix.table_id
            && r.fields == ix.fields
            && r.key == ix.key
            && r.state != crate::formats::manifest::IndexState::Poisoned
            && holds(r)
            && !out.iter().any(|o| o.index_id == r.index_id)
        {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::manifest::IndexState;
    use crate::index::IndexSpec;
    use crate::{Direction, KeyColumn, KeySchema, KeyType};

    fn record(index_id: u64, fields: &[i32], spec: IndexSpec, desc: bool) -> IndexRecord {
        let mut col = KeyColumn::new(KeyType::Int64);
        if desc {
            col.direction = Direction::Desc;
        }
        IndexRecord {
            index_id,
            table_id: 1,
            name: format!("ix{index_id}"),
            fields: fields.to_vec(),
            key: KeySchema {
                columns: vec![col; fields.len()],
            },
            unique: false,
            spec,
            codebook: None,
            state: IndexState::Ready,
            generation: 0,
            reason: None,
        }
    }

    /// Decision 80: a bloom filter's entries come from an index on the same fields and key
    /// whose blobs hold them; never from itself, another bloom, other fields, a key encoded
    /// otherwise (descending), another table or a poisoned index; an ordered index gives its
    /// own first.
    #[test]
    fn donors_hold_the_same_entries() {
        let bloom = IndexSpec::Bloom { fpp_ppm: 10_000 };
        let bitmap = IndexSpec::Bitmap {
            max_cardinality: 1000,
        };
        let b = record(1, &[1], bloom, false);
        let table = [
            b.clone(),
            record(2, &[1], bloom, false), // another bloom: no entries
            record(3, &[2], IndexSpec::Ordered, false), // another column
            record(4, &[1], IndexSpec::Ordered, true), // the column descending
            record(5, &[1, 2], IndexSpec::Ordered, false), // a wider key
            record(6, &[1], bitmap, false),
            record(7, &[1], IndexSpec::Ordered, false),
            record(7, &[1], IndexSpec::Ordered, false), // listed twice
            IndexRecord {
                state: IndexState::Poisoned,
                ..record(9, &[1], IndexSpec::Ordered, false)
            },
        ];
        let ids = |ix: &IndexRecord| {
            donors(ix, &table)
                .iter()
                .map(|r| r.index_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&b), vec![6, 7]);
        assert_eq!(ids(&table[6]), vec![7, 6], "its own entries first");
        assert_eq!(
            ids(&table[3]),
            vec![4],
            "only its own: no other key encoded alike"
        );
        let mut other_table = record(8, &[1], IndexSpec::Ordered, false);
        other_table.table_id = 2;
        assert_eq!(donors(&b, std::slice::from_ref(&other_table)).len(), 0);
    }
}
