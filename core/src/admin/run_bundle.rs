//! What every table run's bundle shares, whatever the kind (`admin::runs`,
//! `admin::vector_run`): its inputs ([`Input`]: files' blobs and the earlier runs it merges),
//! the multipart upload it is streamed into ([`Sink`]), the facts it records about each
//! covered file and the generation in its name. Pure of the overlay's
//! verbs, so the kinds' run writers depend on it and not on each other.

use object_store::WriteMultipart;

use crate::error::Result;
use crate::formats::manifest::*;
use crate::formats::puffin::PuffinWriter;

/// One input of a run (vector, bitmap, bloom, full text; RFC 0004 tiers): a file's own blob (`map` = its ordinal
/// in the run) or an earlier run of the index (`map`: its ordinals to the new run's; `None`
/// leaves the file out). Inputs come in the order of their new ordinals, each input's
/// ascending, so a run writer taking them in turn writes every value's files in order.
pub(crate) struct Input {
    pub(crate) bundle_path: String,
    pub(crate) blob_offset: u64,
    /// The blob's length.
    pub(crate) length: u64,
    pub(crate) meta: OrderedMeta,
    pub(crate) map: Vec<Option<u32>>,
    /// Rows of each file by old ordinal (0 for a file left out): what its entries' positions
    /// are checked against.
    pub(crate) rows: Vec<u64>,
    /// An earlier run (else a file's own blob).
    pub(crate) run: bool,
    /// An earlier run's files, by old ordinal (its record of each; empty for a blob).
    pub(crate) files: Vec<RunFile>,
}

impl Input {
    /// A covered file's own blob, as ordinal `ordinal` of the run.
    pub(crate) fn blob((f, a): &(FileEntry, IndexFileEntry), ordinal: u32) -> Input {
        Input {
            bundle_path: a.lineage.bundle_path.clone(),
            blob_offset: a.lineage.blob_offset,
            length: a.lineage.blob_length,
            meta: a.ordered.clone(),
            map: vec![Some(ordinal)],
            rows: vec![f.record_count],
            run: false,
            files: Vec::new(),
        }
    }

    /// The bytes `r` of its blob (relative to the blob's start).
    pub(crate) async fn read(
        &self,
        reader: &crate::io::ObjectStoreReader,
        r: std::ops::Range<u64>,
    ) -> Result<bytes::Bytes> {
        use crate::io::RangeReader;
        let o = self.blob_offset;
        Ok(reader
            .read_range(
                &crate::io::Location::new(&self.bundle_path),
                o.saturating_add(r.start)..o.saturating_add(r.end),
            )
            .await?)
    }

    /// Its directory's bytes, where the manifest places them (each kind checks them against
    /// `meta.directory_sha256` as it parses them).
    pub(crate) async fn directory(
        &self,
        reader: &crate::io::ObjectStoreReader,
    ) -> Result<bytes::Bytes> {
        let m = &self.meta;
        let end = m.directory_offset.saturating_add(m.directory_length);
        self.read(reader, m.directory_offset..end).await
    }

    /// Every ordinal kept: its bytes are copied as they are.
    pub(crate) fn keeps_all(&self) -> bool {
        self.map.iter().all(Option::is_some)
    }
}

/// What a run records about a covered file: the read gate's facts its blob was built on.
pub(crate) fn run_file(f: &FileEntry, a: &IndexFileEntry) -> RunFile {
    let l = &a.lineage;
    RunFile {
        file_id: f.file_id,
        path: f.path.clone(),
        sha256: l.source_sha256.clone(),
        record_count: l.source_record_count,
        snapshot_id: l.source_snapshot_id,
        sequence_number: l.source_sequence_number,
        text: None,
    }
}

/// Where finished blocks of the run go: the Puffin file being uploaded in parts, at most
/// [`PARTS_IN_FLIGHT`] at a time while the merge goes on.
pub(crate) struct Sink {
    pub(crate) pw: PuffinWriter,
    pub(crate) upload: WriteMultipart,
}

/// Upload parts of a run in flight at once (memory: this many parts).
const PARTS_IN_FLIGHT: usize = 2;

impl Sink {
    /// Uploads the file's pending bytes, then `bytes` (owned: no copy).
    pub(crate) async fn put(&mut self, bytes: Vec<u8>) -> Result<()> {
        let head = self.pw.take_and_skip(bytes.len() as u64);
        for b in [head, bytes] {
            if !b.is_empty() {
                self.upload.put(b.into());
            }
        }
        self.upload
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(|e| crate::io::store::store_err(e).into())
    }
}

/// Consecutive pieces of `sizes` (bytes each), cut so each piece holds about `limit` bytes:
/// the chunks a run is streamed in (a piece larger than `limit` stands alone).
pub(crate) fn chunks(
    sizes: impl IntoIterator<Item = u64>,
    limit: u64,
) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut acc = 0u64;
    for (i, n) in sizes.into_iter().enumerate() {
        match out.last_mut() {
            Some(c) if acc + n <= limit || acc == 0 => {
                c.end = i + 1;
                acc += n;
            }
            _ => {
                out.push(i..i + 1);
                acc = n;
            }
        }
    }
    out
}

/// The generation in a run's name: `run-{index}-g{generation}[-{token}].puffin`.
pub(crate) fn run_generation(path: &str) -> u64 {
    path.rsplit("-g")
        .next()
        .map(|g| g.trim_end_matches(".puffin"))
        .and_then(|g| g.split('-').next())
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{chunks, run_generation};

    #[test]
    fn chunks_hold_about_the_limit() {
        assert_eq!(chunks([3, 3, 3, 3, 3], 7), vec![0..2, 2..4, 4..5]);
        assert_eq!(chunks([10, 1, 1], 5), vec![0..1, 1..3]);
        assert_eq!(chunks([0, 0], 5), vec![0..2]);
        assert!(chunks(std::iter::empty(), 5).is_empty());
    }

    #[test]
    fn run_names_parse_old_and_new() {
        assert_eq!(run_generation("bundles/1/run-5-g3.puffin"), 3);
        assert_eq!(run_generation("bundles/1/run-5-g12-18ab3f.puffin"), 12);
        assert_eq!(run_generation("bundles/1/run-5.puffin"), 0);
    }
}
