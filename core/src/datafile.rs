//! Parquet data files read through [`RangeReader`] with parquet's sans-IO push decoders, so
//! the same code runs natively and in wasm: footer metadata, schema with Iceberg field ids,
//! and projected columns in bounded batches with their row positions.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, RowGroups, RowSelection};
use parquet::arrow::push_decoder::ParquetPushDecoderBuilder;
use parquet::arrow::{
    parquet_to_arrow_field_levels, parquet_to_arrow_schema, ProjectionMask,
    PARQUET_FIELD_ID_META_KEY,
};
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataPushDecoder, RowGroupMetaData,
};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::DecodeResult;

use crate::error::{Error, Result};
use crate::io::{Location, ObjectMeta, RangeReader};

mod point;
use crate::values::{FieldInfo, KeyType, Value};

/// Speculative tail read that usually fetches the whole footer at once.
pub const FOOTER_PREFETCH: u64 = 64 * 1024;
/// Largest total of pages [`read_rows`] fetches up front (in one round of parallel
/// requests); a larger selection is fetched row group by row group as the decoder asks.
pub const MAX_ROWS_PREFETCH: u64 = 64 << 20;
/// Rows per decoded batch (bounds memory while scanning).
pub const BATCH_ROWS: usize = 8192;

/// Reads a file's Parquet metadata: one speculative tail read, more only if the footer is
/// larger.
pub async fn read_metadata<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    size: u64,
) -> Result<Arc<ParquetMetaData>> {
    let tail = FOOTER_PREFETCH.min(size);
    if tail == 0 {
        return Err(Error::parquet(format!("{} is empty", loc.path)));
    }
    let bytes = r.read_range(loc, size - tail..size).await?;
    decode_metadata(r, loc, size, bytes, PageIndexPolicy::Skip).await
}

/// A file's metadata as registration reads it: the decoded footer, where its metadata region
/// starts (see [`metadata_offset`]) and its [`crate::formats::lineage::footer_digest`].
pub struct Located {
    pub metadata: Arc<ParquetMetaData>,
    pub metadata_offset: u64,
    pub footer_digest: String,
}

/// [`read_metadata`], where the file's metadata region starts and the digest of its footer.
/// The footer's bytes come from the same tail read unless the footer is larger than it (then
/// one more range, bounded by the file).
pub async fn read_metadata_located<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    size: u64,
) -> Result<Located> {
    let tail = FOOTER_PREFETCH.min(size);
    if tail < 8 {
        return Err(Error::parquet(format!(
            "{} is too short for Parquet",
            loc.path
        )));
    }
    let bytes = r.read_range(loc, size - tail..size).await?;
    if (bytes.len() as u64) < 8 {
        return Err(Error::parquet(format!(
            "{} is too short for Parquet",
            loc.path
        )));
    }
    let footer_len = u32::from_le_bytes(
        bytes[bytes.len() - 8..bytes.len() - 4]
            .try_into()
            .expect("4 bytes"),
    ) as u64;
    let md = decode_metadata(r, loc, size, bytes.clone(), PageIndexPolicy::Skip).await?;
    // Decoded, so the footer fits in the file.
    let footer_start = size.saturating_sub(8 + footer_len);
    let footer_digest = if 8 + footer_len <= bytes.len() as u64 {
        let at = bytes.len() - (8 + footer_len) as usize;
        crate::formats::lineage::footer_digest(size, &bytes[at..])
    } else {
        let footer = r.read_range(loc, footer_start..size).await?;
        if footer.len() as u64 != size - footer_start {
            return Err(Error::parquet(format!("{}: short footer read", loc.path)));
        }
        crate::formats::lineage::footer_digest(size, &footer)
    };
    Ok(Located {
        metadata_offset: metadata_offset(&md, footer_start),
        metadata: md,
        footer_digest,
    })
}

/// Where a file's metadata region starts: the lowest offset of its column and offset
/// indexes that lie before the footer (writers put the page index just before it), else the
/// footer's start.
pub fn metadata_offset(md: &ParquetMetaData, footer_start: u64) -> u64 {
    md.row_groups()
        .iter()
        .flat_map(|g| g.columns())
        .flat_map(|c| [c.column_index_offset(), c.offset_index_offset()])
        .flatten()
        .filter_map(|o| u64::try_from(o).ok())
        .filter(|o| *o < footer_start)
        .min()
        .unwrap_or(footer_start)
}

/// Largest metadata region read in one request from a recorded offset; a larger one (or a
/// manifest claiming one) is read the probing way.
pub const MAX_METADATA_READ: u64 = 8 << 20;

/// Reads a file's metadata with its page index, in ONE request when `metadata_offset` (the
/// start of its metadata region, as the manifest records it) is known: `[offset, size)` of a
/// file expected to be `size` bytes. Returns the metadata and the file's size and version as
/// the store reports them now.
pub async fn read_metadata_from<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    size: u64,
    metadata_offset: Option<u64>,
) -> Result<(Arc<ParquetMetaData>, ObjectMeta)> {
    let len = match metadata_offset {
        Some(o) if o < size && size - o <= MAX_METADATA_READ => (size - o).max(8),
        _ => FOOTER_PREFETCH,
    };
    let (tail, meta) = r.read_tail(loc, size, len).await?;
    if meta.size == 0 || tail.len() as u64 > meta.size {
        return Err(Error::parquet(format!("{} is empty", loc.path)));
    }
    Ok((
        decode_metadata(r, loc, meta.size, tail, PageIndexPolicy::Optional).await?,
        meta,
    ))
}

/// Reads a file's metadata when its size is unknown (or must be confirmed): ONE suffix read
/// that also reports the file's current size and version.
///
/// `expected_size` (the size the manifest records, when known) lets readers ask for an
/// absolute range instead of a suffix; the metadata returned is still the file's as it is now.
pub async fn read_metadata_suffix<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    expected_size: Option<u64>,
) -> Result<(Arc<ParquetMetaData>, ObjectMeta)> {
    suffix_metadata(r, loc, expected_size, PageIndexPolicy::Skip).await
}

/// Reads a file's metadata with its page index (offset and column indexes, when the file
/// has them): one suffix read for the footer, one coalesced read for the page index.
pub async fn read_metadata_with_page_index<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    expected_size: Option<u64>,
) -> Result<(Arc<ParquetMetaData>, ObjectMeta)> {
    suffix_metadata(r, loc, expected_size, PageIndexPolicy::Optional).await
}

async fn suffix_metadata<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    expected_size: Option<u64>,
    policy: PageIndexPolicy,
) -> Result<(Arc<ParquetMetaData>, ObjectMeta)> {
    let (tail, meta) = match expected_size {
        Some(size) if size > 0 => r.read_tail(loc, size, FOOTER_PREFETCH).await?,
        _ => r.read_suffix(loc, FOOTER_PREFETCH).await?,
    };
    if meta.size == 0 || tail.len() as u64 > meta.size {
        return Err(Error::parquet(format!("{} is empty", loc.path)));
    }
    Ok((
        decode_metadata(r, loc, meta.size, tail, policy).await?,
        meta,
    ))
}

/// Runs the metadata push decoder from the file's last bytes (`tail`), fetching whatever
/// else it asks for with coalesced range reads.
async fn decode_metadata<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    size: u64,
    tail: Bytes,
    policy: PageIndexPolicy,
) -> Result<Arc<ParquetMetaData>> {
    let mut dec = ParquetMetaDataPushDecoder::try_new(size)?.with_page_index_policy(policy);
    dec.push_ranges(vec![size - tail.len() as u64..size], vec![tail])?;
    loop {
        match dec.try_decode()? {
            DecodeResult::NeedsData(ranges) => {
                let bytes = r.read_ranges(loc, &ranges).await?;
                dec.push_ranges(ranges, bytes)?;
            }
            DecodeResult::Data(md) => {
                check_page_index(&md)?;
                return Ok(Arc::new(md));
            }
            DecodeResult::Finished => return Err(Error::parquet("no metadata")),
        }
    }
}

/// Refuses an offset index whose pages do not tile their column chunk in row order: each
/// page inside the chunk and after the previous one, first rows increasing from 0 within
/// the row group (never decreasing). Parquet's readers trust these numbers (a damaged index overflows their
/// arithmetic), and Skerry plans reads by them.
fn check_page_index(md: &ParquetMetaData) -> Result<()> {
    let Some(pi) = md.page_index() else {
        return Ok(());
    };
    for (g, rg) in md.row_groups().iter().enumerate() {
        let rows = rg.num_rows().max(0) as u64;
        for (c, cc) in rg.columns().iter().enumerate() {
            let Some(oi) = pi.offset_index(g, c) else {
                continue;
            };
            let (start, len) = cc.byte_range();
            let end = start.saturating_add(len);
            let bad = |what: &str| {
                Err(Error::parquet(format!(
                    "damaged page index: row group {g}, column {c}: {what}"
                )))
            };
            let (mut at, mut row) = (start, None::<u64>);
            for (i, p) in oi.page_locations().iter().enumerate() {
                let (Ok(offset), Ok(size), Ok(first)) = (
                    u64::try_from(p.offset),
                    u64::try_from(p.compressed_page_size),
                    u64::try_from(p.first_row_index),
                ) else {
                    return bad("negative number");
                };
                if offset < at || size == 0 || offset.saturating_add(size) > end {
                    return bad("page outside its chunk or out of order");
                }
                if (i == 0 && first != 0)
                    || row.is_some_and(|r| first < r)
                    || (first >= rows && rows > 0)
                {
                    return bad("first rows out of order");
                }
                at = offset + size;
                row = Some(first);
            }
        }
    }
    Ok(())
}

/// A column chunk's dictionary page, decompressed, kept between reads by a read handle
/// ([`DictionaryPages`]) with the exact bytes it was decoded from (page header and compressed
/// body): a later read uses it only when the bytes it fetched for that page are the same, so
/// a file rewritten in place — even one that keeps its size, modification time and ETag —
/// never answers from another file's dictionary. Read at a content version
/// ([`crate::io::RangeReader::content_versions`]), it also names that version, and a later
/// read pinned to the same version uses it without fetching it at all.
pub struct DictionaryPage {
    raw: Bytes,
    page: Page,
    /// The content version of the file it was last read at, if any.
    version: std::sync::Mutex<Option<Arc<str>>>,
    /// Where each value starts in the page (computed on first use by a point read).
    offsets: std::sync::OnceLock<Option<Vec<u32>>>,
    /// Values are length-prefixed (BYTE_ARRAY): a point read keeps their offsets.
    prefixed: bool,
}

impl DictionaryPage {
    /// Whether this page was decoded from exactly `raw` (its header and compressed body).
    pub fn is_for(&self, raw: &[u8]) -> bool {
        self.raw.as_ref() == raw
    }

    /// Whether this page was read at the content version `version` of its file.
    pub fn is_at(&self, version: &str) -> bool {
        self.version
            .lock()
            .is_ok_and(|v| v.as_deref() == Some(version))
    }

    /// Records that a read at the content version `version` fetched exactly this page's
    /// bytes: later reads at that version may use it without fetching it.
    fn stamp(&self, version: &Arc<str>) {
        if let Ok(mut v) = self.version.lock() {
            *v = Some(version.clone());
        }
    }

    /// Bytes held (raw, decompressed, and the values' offsets a point read computes).
    pub fn heap_bytes(&self) -> u64 {
        let values = match &self.page {
            Page::DictionaryPage { num_values, .. } if self.prefixed => *num_values as usize,
            _ => 0,
        };
        (self.raw.len() + self.page.buffer().len() + 4 * values) as u64
    }

    fn new(raw: Bytes, page: Page, prefixed: bool, version: Option<Arc<str>>) -> DictionaryPage {
        DictionaryPage {
            raw,
            page,
            version: std::sync::Mutex::new(version),
            offsets: std::sync::OnceLock::new(),
            prefixed,
        }
    }

    /// The page's values with their offsets, for a column whose values are `w` wide; `None`
    /// when the dictionary is not PLAIN or does not parse.
    fn values(&self, w: point::Width) -> Option<point::Dictionary<'_>> {
        let Page::DictionaryPage {
            buf,
            num_values,
            encoding,
            ..
        } = &self.page
        else {
            return None;
        };
        if !matches!(
            encoding,
            parquet::basic::Encoding::PLAIN | parquet::basic::Encoding::PLAIN_DICTIONARY
        ) {
            return None;
        }
        let offsets = self
            .offsets
            .get_or_init(|| point::plain_offsets(buf, *num_values as usize, w));
        Some(point::Dictionary {
            buf,
            count: *num_values as usize,
            offsets: offsets.as_deref()?,
        })
    }
}

/// Where [`read_rows`] keeps decompressed dictionary pages between reads (the read handle's
/// cache implements it), by file location and the page's offset. An implementation may drop
/// or keep entries as it likes.
pub trait DictionaryPages: Send + Sync {
    /// The page at `offset` of `location`, only if it was decoded from exactly the bytes
    /// `raw` ([`DictionaryPage::is_for`]) — the bytes this read fetched for it.
    fn dictionary(&self, location: &str, offset: u64, raw: &[u8]) -> Option<Arc<DictionaryPage>>;
    /// The page at `offset` of `location`, only if it was read at the content version
    /// `version` ([`DictionaryPage::is_at`]); a read pinned to that version then need not
    /// fetch it.
    fn dictionary_at(
        &self,
        location: &str,
        offset: u64,
        version: &str,
    ) -> Option<Arc<DictionaryPage>>;
    fn put_dictionary(&self, location: &str, offset: u64, page: Arc<DictionaryPage>);
    /// Whether a page of `bytes` ([`DictionaryPage::heap_bytes`]) would be kept at all
    /// (a read makes no copy for a page that would not be).
    fn would_keep(&self, bytes: u64) -> bool;
}

/// Fetches the rows at `positions` (any order, duplicates allowed) of the top-level columns
/// `roots`, returned in the order of `positions`. Only the row groups holding them are read,
/// and with a page index only the pages holding them (ranges coalesced).
///
/// With `dicts`, one dictionary page decompressed by an earlier read of the same bytes is not
/// decompressed again. Pages are still fetched and compared byte for byte, unless `loc` is
/// pinned to a content version (`r.content_versions(loc)`): a page read at that very version
/// is then used without fetching it (the other pages' reads, pinned, prove the version).
pub async fn read_rows<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    positions: &[u64],
    roots: &[usize],
    dicts: Option<&dyn DictionaryPages>,
) -> Result<RecordBatch> {
    let mut wanted: Vec<u64> = positions.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let total: u64 = md
        .row_groups()
        .iter()
        .map(|g| g.num_rows().max(0) as u64)
        .sum();
    if let Some(&last) = wanted.last() {
        if last >= total {
            return Err(Error::Invalid(format!(
                "row position {last} is past the end of {} ({total} rows)",
                loc.path
            )));
        }
    }
    // Row groups holding the positions, with the positions as ranges within each.
    let mut groups: Vec<(usize, Vec<std::ops::Range<usize>>)> = Vec::new();
    let (mut start, mut i) = (0u64, 0usize);
    for (g, rg) in md.row_groups().iter().enumerate() {
        let n = rg.num_rows().max(0) as u64;
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        while i < wanted.len() && wanted[i] < start + n {
            let at = (wanted[i] - start) as usize;
            match ranges.last_mut() {
                Some(last) if last.end == at => last.end += 1,
                _ => ranges.push(at..at + 1),
            }
            i += 1;
        }
        if !ranges.is_empty() {
            groups.push((g, ranges));
        }
        start += n;
    }
    let file_schema = arrow_schema(md)?;
    let schema = Arc::new(file_schema.project(roots)?);
    let mut sorted_roots = roots.to_vec();
    sorted_roots.sort_unstable();
    if groups.is_empty() {
        return Ok(RecordBatch::new_empty(schema));
    }
    // The positions rebased onto the concatenation of the selected row groups.
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    let mut selected_rows = 0usize;
    for (g, rs) in &groups {
        ranges.extend(
            rs.iter()
                .map(|r| r.start + selected_rows..r.end + selected_rows),
        );
        selected_rows += md.row_group(*g).num_rows().max(0) as usize;
    }
    let selection = RowSelection::from_consecutive_ranges(ranges.into_iter(), selected_rows);
    let mask = ProjectionMask::roots(md.file_metadata().schema_descr(), roots.iter().copied());
    let mut dec = ParquetPushDecoderBuilder::try_new_decoder(md.clone())?
        .with_projection(mask.clone())
        .with_row_groups(groups.iter().map(|g| g.0).collect())
        .with_row_selection(selection)
        .with_batch_size(BATCH_ROWS)
        .build()?;
    // Every page the decoder will ask for (dictionary and data pages of each projected column
    // in each row group), fetched at once in parallel requests: one round trip, whatever the
    // number of row groups.
    let gap = r.coalesce_gap().min(crate::io::PAGE_COALESCE_GAP);
    // Dictionary pages held at the content version this read is pinned to are not fetched.
    let version = match (dicts, &loc.version) {
        (Some(_), Some(v)) if r.content_versions(loc) => Some(v.clone()),
        _ => None,
    };
    let mut held: HeldDictionaries = HashMap::new();
    let plan: Vec<std::ops::Range<u64>> = dec.scan_plan().map(|p| p.range).collect();
    let planned: Vec<std::ops::Range<u64>> = dec
        .scan_plan()
        .filter(|p| {
            let (Some(d), Some(v)) = (dicts, &version) else {
                return true;
            };
            if p.kind != parquet::arrow::push_decoder::PageKind::Dictionary
                || p.row_group >= md.num_row_groups()
                || p.column >= md.row_group(p.row_group).num_columns()
            {
                return true;
            }
            let start = md.row_group(p.row_group).column(p.column).byte_range().0;
            match d.dictionary_at(&loc.path, start, v) {
                Some(page) => {
                    held.insert((p.row_group, p.column), page);
                    false
                }
                None => true,
            }
        })
        .map(|p| p.range)
        .collect();
    let planned_bytes: u64 = planned.iter().map(|p| p.end - p.start).sum();
    let prefetched = if planned_bytes <= MAX_ROWS_PREFETCH {
        // Held dictionary pages are left out of the requests the whole plan would make; one
        // between two pages of a request is still read when it is no larger than the gap a
        // reader bridges by default (a request more — a Worker's subrequests are counted —
        // for less is not worth it).
        let merged = match held.is_empty() {
            true => crate::io::coalesce_ranges(&planned, gap),
            false => crate::io::spans_within(
                &crate::io::coalesce_ranges(&plan, gap),
                &planned,
                r.coalesce_gap().min(crate::io::DEFAULT_COALESCE_GAP),
            ),
        };
        let got = r.read_ranges_gap(loc, &merged, 0).await?;
        merged.into_iter().zip(got).collect::<Vec<_>>()
    } else {
        vec![]
    };
    let mut batches = Vec::new();
    // Every page is in hand and the file has a page index: decode from the fetched bytes with
    // the handle's dictionaries. Anything this path cannot do (a page the plan did not name)
    // is left to the decoder below, which fetches what it lacks.
    let fast = match dicts {
        Some(d)
            if !prefetched.is_empty()
                && md.page_index().is_some_and(|p| p.has_offset_indexes()) =>
        {
            decode_with_dictionaries(
                md,
                &file_schema,
                &loc.path,
                &groups,
                &mask,
                &prefetched,
                (d, &held, version.as_ref()),
            )
            .ok()
        }
        _ => None,
    };
    match fast {
        Some(b) => batches = b,
        None => loop {
            match dec.try_decode()? {
                DecodeResult::NeedsData(ranges) => {
                    let have: Vec<Option<Bytes>> = ranges
                        .iter()
                        .map(|want| {
                            prefetched
                                .iter()
                                .find(|(have, _)| have.start <= want.start && want.end <= have.end)
                                .map(|(have, b)| {
                                    b.slice(
                                        (want.start - have.start) as usize
                                            ..(want.end - have.start) as usize,
                                    )
                                })
                        })
                        .collect();
                    let bytes =
                        crate::io::read_missing(r, loc, &ranges, have, gap, |_, _| {}).await?;
                    dec.push_ranges(ranges, bytes)?;
                }
                DecodeResult::Data(b) => batches.push(b),
                DecodeResult::Finished => break,
            }
        },
    }
    let found = arrow_select::concat::concat_batches(
        &batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| schema.clone()),
        &batches,
    )?;
    // Back to the caller's order (and column order), repeating duplicates.
    let index: arrow_array::UInt32Array = positions
        .iter()
        .map(|p| {
            wanted
                .binary_search(p)
                .expect("wanted holds every position") as u32
        })
        .collect();
    let columns = roots
        .iter()
        .map(|r| {
            let c = sorted_roots.binary_search(r).expect("projected");
            arrow_select::take::take(found.column(c).as_ref(), &index, None)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The selected rows of each row group in `groups`, decoded by parquet's array readers from
/// the bytes already fetched, with dictionary pages from (and into) `dicts`.
fn decode_with_dictionaries(
    md: &ParquetMetaData,
    hint: &Schema,
    location: &str,
    groups: &[(usize, Vec<std::ops::Range<usize>>)],
    mask: &ProjectionMask,
    fetched: &[(std::ops::Range<u64>, Bytes)],
    (dicts, held, version): (&dyn DictionaryPages, &HeldDictionaries, Option<&Arc<str>>),
) -> Result<Vec<RecordBatch>> {
    let levels = parquet_to_arrow_field_levels(
        md.file_metadata().schema_descr(),
        mask.clone(),
        Some(hint.fields()),
    )?;
    let bytes = Fetched(Arc::new(fetched.to_vec()));
    let mut out = Vec::new();
    for (g, ranges) in groups {
        let rows = md.row_group(*g).num_rows().max(0) as usize;
        let mut pages = RowGroupPages {
            md,
            group: *g,
            rows,
            bytes: bytes.clone(),
            dicts,
            held,
            version,
            location,
            picked: None,
        };
        // A few rows: picked out of their pages (values and levels found by walking runs,
        // dictionaries not decoded), then decoded by parquet from one small PLAIN page per
        // column — unless some column is beyond what picking handles.
        let wanted: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
        if wanted.len() <= PICK_MAX_ROWS {
            let picked: Option<Vec<(usize, Page)>> =
                (0..md.file_metadata().schema_descr().num_columns())
                    .filter(|&c| mask.leaf_included(c))
                    .map(|c| pages.pick(c, &wanted).map(|p| (c, p)))
                    .collect();
            pages.picked = picked.map(|p| (wanted.len(), p));
        }
        let selection = match pages.picked {
            Some(_) => None,
            None => Some(RowSelection::from_consecutive_ranges(
                ranges.iter().cloned(),
                rows,
            )),
        };
        let reader = ParquetRecordBatchReader::try_new_with_row_groups(
            &levels, &pages, BATCH_ROWS, selection,
        )?;
        for b in reader {
            out.push(b?);
        }
    }
    Ok(out)
}

/// Byte ranges of one file fetched for a read, as parquet's page readers ask for them.
#[derive(Clone)]
struct Fetched(Arc<Vec<(std::ops::Range<u64>, Bytes)>>);

impl Fetched {
    fn get(&self, start: u64, len: Option<usize>) -> parquet::errors::Result<Bytes> {
        let i = self.0.partition_point(|(r, _)| r.start <= start);
        let missing = || {
            parquet::errors::ParquetError::General(format!(
                "bytes at {start} were not fetched for this read"
            ))
        };
        let (r, b) = i.checked_sub(1).map(|i| &self.0[i]).ok_or_else(missing)?;
        let from = (start - r.start) as usize;
        let to = match len {
            Some(n) => from.checked_add(n).ok_or_else(missing)?,
            None => b.len(),
        };
        if from > b.len() || to > b.len() {
            return Err(missing());
        }
        Ok(b.slice(from..to))
    }
}

impl Length for Fetched {
    fn len(&self) -> u64 {
        self.0.last().map_or(0, |(r, _)| r.end)
    }
}

impl ChunkReader for Fetched {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.get(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.get(start, Some(length))
    }
}

/// Dictionary pages a read did not fetch, by row group and leaf column.
type HeldDictionaries = HashMap<(usize, usize), Arc<DictionaryPage>>;

/// One row group of a file, its pages served from [`Fetched`] bytes.
struct RowGroupPages<'a> {
    md: &'a ParquetMetaData,
    group: usize,
    rows: usize,
    bytes: Fetched,
    dicts: &'a dyn DictionaryPages,
    /// Dictionary pages not fetched: held at the content version this read is pinned to.
    held: &'a HeldDictionaries,
    /// The content version this read is pinned to, if any (pages decoded now are kept at it).
    version: Option<&'a Arc<str>>,
    location: &'a str,
    /// The rows picked, and each projected leaf column's PLAIN page of them.
    picked: Option<(usize, Vec<(usize, Page)>)>,
}

/// Largest number of rows of one row group [`read_rows`] picks out of their pages rather
/// than decoding the pages whole.
const PICK_MAX_ROWS: usize = 64;

impl RowGroupPages<'_> {
    /// Leaf column `i`'s page reader over the fetched bytes and its dictionary page: from
    /// the cache when cached for the same bytes, else decoded (and offered to the cache).
    fn column(
        &self,
        i: usize,
    ) -> parquet::errors::Result<(SerializedPageReader<Fetched>, Option<Arc<DictionaryPage>>)> {
        let meta = self.md.row_group(self.group).column(i);
        let locations = self
            .md
            .page_index()
            .and_then(|p| p.offset_index(self.group, i))
            .map(|o| o.page_locations().clone())
            .ok_or_else(|| parquet::errors::ParquetError::General("no offset index".to_string()))?;
        let first = locations.first().map(|l| l.offset.max(0) as u64);
        let mut inner = SerializedPageReader::new(
            Arc::new(self.bytes.clone()),
            meta,
            self.rows,
            Some(locations),
        )?;
        // With an offset index, a dictionary page is what lies between the chunk's start and
        // its first data page (as parquet's page reader infers it).
        if !inner.supports_deferred_dictionary() {
            return Ok((inner, None));
        }
        if let Some(d) = self.held.get(&(self.group, i)) {
            inner.skip_next_page()?;
            return Ok((inner, Some(d.clone())));
        }
        let start = meta.byte_range().0;
        let end = first.unwrap_or(start);
        // A first page before the chunk's start is a damaged offset index.
        let len = end.checked_sub(start).ok_or_else(|| {
            parquet::errors::ParquetError::General("page before its column chunk".to_string())
        })?;
        let raw = self.bytes.get(start, Some(usize::try_from(len)?))?;
        if let Some(c) = self.dicts.dictionary(self.location, start, &raw) {
            if let Some(v) = self.version {
                c.stamp(v);
            }
            inner.skip_next_page()?;
            return Ok((inner, Some(c)));
        }
        let page = inner.get_next_page()?.ok_or_else(|| {
            parquet::errors::ParquetError::General("no dictionary page".to_string())
        })?;
        if !page.is_dictionary_page() {
            return Err(parquet::errors::ParquetError::General(
                "expected a dictionary page".to_string(),
            ));
        }
        let prefixed = meta.column_type() == parquet::basic::Type::BYTE_ARRAY;
        let d = DictionaryPage::new(raw, page, prefixed, self.version.cloned());
        let keep = self.dicts.would_keep(d.heap_bytes());
        // A copy: a slice would keep the whole fetched range alive.
        let d = Arc::new(DictionaryPage {
            raw: match keep {
                true => Bytes::copy_from_slice(&d.raw),
                false => Bytes::new(),
            },
            ..d
        });
        if keep {
            self.dicts.put_dictionary(self.location, start, d.clone());
        }
        Ok((inner, Some(d)))
    }

    /// The rows `wanted` (ascending, within the row group) of leaf column `i` as one PLAIN
    /// page, or `None` when the column or its pages are beyond [`point`].
    fn pick(&self, i: usize, wanted: &[usize]) -> Option<Page> {
        let meta = self.md.row_group(self.group).column(i);
        let descr = meta.column_descr();
        if descr.max_rep_level() != 0 || descr.max_def_level() > 1 {
            return None;
        }
        let w = point::Width::of(descr.physical_type(), descr.type_length())?;
        let firsts: Vec<usize> = self
            .md
            .page_index()?
            .offset_index(self.group, i)?
            .page_locations()
            .iter()
            .map(|l| l.first_row_index.max(0) as usize)
            .collect();
        let (mut inner, dict) = self.column(i).ok()?;
        let dict = match &dict {
            Some(d) => Some(d.values(w)?),
            None => None,
        };
        let mut values = Vec::with_capacity(wanted.len());
        let mut k = 0;
        for (j, &first) in firsts.iter().enumerate() {
            let end = firsts.get(j + 1).copied().unwrap_or(self.rows);
            let from = k;
            while k < wanted.len() && wanted[k] < end {
                k += 1;
            }
            if from == k {
                if k == wanted.len() {
                    break;
                }
                inner.skip_next_page().ok()?;
                continue;
            }
            let page = inner.get_next_page().ok()??;
            // Rows and values differ only with repetition; a page index whose row numbers do
            // not increase is damaged. Either way the general decoder answers.
            if page.num_values() as usize != end.checked_sub(first)? {
                return None;
            }
            let rows = wanted[from..k]
                .iter()
                .map(|r| r.checked_sub(first))
                .collect::<Option<Vec<usize>>>()?;
            point::pick(
                &page,
                &rows,
                descr.max_def_level(),
                w,
                dict.as_ref(),
                &mut values,
            )?;
        }
        (values.len() == wanted.len()).then(|| point::plain_page(&values, descr.max_def_level()))
    }
}

impl RowGroups for RowGroupPages<'_> {
    fn num_rows(&self) -> usize {
        match &self.picked {
            Some((n, _)) => *n,
            None => self.rows,
        }
    }

    fn column_chunks(&self, i: usize) -> parquet::errors::Result<Box<dyn PageIterator>> {
        if let Some((n, pages)) = &self.picked {
            let page = pages
                .iter()
                .find(|(c, _)| *c == i)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| {
                    parquet::errors::ParquetError::General(format!("column {i} not picked"))
                })?;
            return Ok(Box::new(OneChunk(Some(Box::new(OnePage {
                page: Some(page),
                rows: *n,
            })))));
        }
        let (inner, dict) = self.column(i)?;
        let reader = DictionaryFirst {
            inner,
            pending: dict.is_some(),
            dict: dict.map(|d| d.page.clone()),
            deferred: false,
        };
        Ok(Box::new(OneChunk(Some(Box::new(reader)))))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(std::iter::once(self.md.row_group(self.group)))
    }

    fn metadata(&self) -> &ParquetMetaData {
        self.md
    }
}

/// A column chunk's pages: its dictionary page (already decompressed) first, then the data
/// pages of the inner reader, whose own dictionary page has been consumed.
struct DictionaryFirst {
    inner: SerializedPageReader<Fetched>,
    dict: Option<Page>,
    /// The dictionary is the next page.
    pending: bool,
    /// The dictionary was skipped and may be asked for later.
    deferred: bool,
}

impl PageReader for DictionaryFirst {
    fn get_next_page(&mut self) -> parquet::errors::Result<Option<Page>> {
        if self.pending {
            self.pending = false;
            return Ok(self.dict.clone());
        }
        self.inner.get_next_page()
    }

    fn peek_next_page(&mut self) -> parquet::errors::Result<Option<PageMetadata>> {
        if self.pending {
            return Ok(Some(PageMetadata {
                num_rows: None,
                num_levels: None,
                is_dict: true,
            }));
        }
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> parquet::errors::Result<()> {
        if self.pending {
            self.pending = false;
            self.deferred = true;
            return Ok(());
        }
        self.inner.skip_next_page()
    }

    fn supports_deferred_dictionary(&self) -> bool {
        self.dict.is_some()
    }

    fn take_deferred_dictionary(&mut self) -> parquet::errors::Result<Option<Page>> {
        if std::mem::take(&mut self.deferred) {
            return Ok(self.dict.clone());
        }
        Ok(None)
    }

    fn at_record_boundary(&mut self) -> parquet::errors::Result<bool> {
        self.inner.at_record_boundary()
    }
}

impl Iterator for DictionaryFirst {
    type Item = parquet::errors::Result<Page>;
    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

/// One page of `rows` rows, then nothing (the picked rows of a column).
struct OnePage {
    page: Option<Page>,
    rows: usize,
}

impl PageReader for OnePage {
    fn get_next_page(&mut self) -> parquet::errors::Result<Option<Page>> {
        Ok(self.page.take())
    }

    fn peek_next_page(&mut self) -> parquet::errors::Result<Option<PageMetadata>> {
        Ok(self.page.as_ref().map(|_| PageMetadata {
            num_rows: Some(self.rows),
            num_levels: Some(self.rows),
            is_dict: false,
        }))
    }

    fn skip_next_page(&mut self) -> parquet::errors::Result<()> {
        self.page = None;
        Ok(())
    }

    fn at_record_boundary(&mut self) -> parquet::errors::Result<bool> {
        Ok(true)
    }
}

impl Iterator for OnePage {
    type Item = parquet::errors::Result<Page>;
    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

/// The one column chunk of a [`RowGroupPages`].
struct OneChunk(Option<Box<dyn PageReader>>);

impl Iterator for OneChunk {
    type Item = parquet::errors::Result<Box<dyn PageReader>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.take().map(Ok)
    }
}

impl PageIterator for OneChunk {}

/// The arrow schema of a file.
pub fn arrow_schema(md: &ParquetMetaData) -> Result<Schema> {
    let fm = md.file_metadata();
    Ok(parquet_to_arrow_schema(
        fm.schema_descr(),
        fm.key_value_metadata(),
    )?)
}

/// Top-level fields with their field ids: from the Parquet field ids when every column has
/// one, else assigned 1, 2, … in column order.
pub fn fields(schema: &Schema) -> Vec<FieldInfo> {
    let ids: Vec<Option<i32>> = schema
        .fields()
        .iter()
        .map(|f| {
            f.metadata()
                .get(PARQUET_FIELD_ID_META_KEY)
                .and_then(|v| v.parse().ok())
        })
        .collect();
    let all = ids.iter().all(Option::is_some);
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| FieldInfo {
            field_id: if all {
                ids[i].expect("checked")
            } else {
                i as i32 + 1
            },
            name: f.name().clone(),
            data_type: type_name(f.data_type()),
            key_type: key_type(f).ok(),
            nullable: f.is_nullable(),
        })
        .collect()
}

/// `t` as catalogs record a column's type: its text, with the metadata of nested fields
/// (an Iceberg writer's element field ids) left out — arrow's text of a field's metadata does
/// not parse back, and nothing of Skerry's reads it.
pub fn type_name(t: &DataType) -> String {
    fn bare(f: &Field) -> std::sync::Arc<Field> {
        std::sync::Arc::new(Field::new(f.name(), strip(f.data_type()), f.is_nullable()))
    }
    fn strip(t: &DataType) -> DataType {
        match t {
            DataType::List(f) => DataType::List(bare(f)),
            DataType::LargeList(f) => DataType::LargeList(bare(f)),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(bare(f), *n),
            DataType::Struct(fs) => DataType::Struct(fs.iter().map(|f| bare(f)).collect()),
            DataType::Map(f, sorted) => DataType::Map(bare(f), *sorted),
            other => other.clone(),
        }
    }
    strip(t).to_string()
}

/// The key type of an arrow field, when it can be indexed.
pub fn key_type(f: &Field) -> Result<KeyType> {
    let unsupported = || {
        Error::Unsupported(format!(
            "column {} of type {} cannot be indexed",
            f.name(),
            f.data_type()
        ))
    };
    Ok(match f.data_type() {
        DataType::Boolean => KeyType::Boolean,
        DataType::Int8 => KeyType::Int8,
        DataType::Int16 => KeyType::Int16,
        DataType::Int32 => KeyType::Int32,
        DataType::Int64 => KeyType::Int64,
        DataType::UInt8 => KeyType::UInt8,
        DataType::UInt16 => KeyType::UInt16,
        DataType::UInt32 => KeyType::UInt32,
        DataType::UInt64 => KeyType::UInt64,
        DataType::Float32 => KeyType::Float32,
        DataType::Float64 => KeyType::Float64,
        DataType::Decimal128(p, s) if *s >= 0 && (*s as u8) <= *p => KeyType::Decimal {
            precision: *p,
            scale: *s as u8,
        },
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => KeyType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => KeyType::Binary,
        DataType::FixedSizeBinary(16) if f.extension_type_name() == Some("arrow.uuid") => {
            KeyType::Uuid
        }
        DataType::FixedSizeBinary(n) if *n > 0 => KeyType::Fixed(*n as u32),
        DataType::Date32 => KeyType::Date,
        DataType::Time64(TimeUnit::Microsecond) => KeyType::Time,
        DataType::Timestamp(TimeUnit::Microsecond, None) => KeyType::Timestamp,
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => KeyType::TimestampTz,
        DataType::Timestamp(TimeUnit::Nanosecond, None) => KeyType::TimestampNs,
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => KeyType::TimestampTzNs,
        DataType::Dictionary(_, v) => {
            key_type(&Field::new(f.name(), (**v).clone(), f.is_nullable()))?
        }
        _ => return Err(unsupported()),
    })
}

/// The value at `row` of an arrow array, as a key [`Value`].
/// Whether a column of this (displayed) Arrow type can carry a vector index:
/// `fixed_size_list<float32>`, `list<float32>` or `large_list<float32>`.
pub fn is_vector_type(data_type: &str) -> bool {
    data_type.parse::<DataType>().is_ok_and(|t| vector_item(&t))
}

fn vector_item(t: &DataType) -> bool {
    match t {
        DataType::FixedSizeList(f, _) | DataType::List(f) | DataType::LargeList(f) => {
            *f.data_type() == DataType::Float32
        }
        _ => false,
    }
}

/// The vector of row `row` of a float32 list array (`None`: NULL or not such an array).
pub fn vector_at(a: &dyn Array, row: usize) -> Option<Vec<f32>> {
    if a.is_null(row) {
        return None;
    }
    let items = match a.data_type() {
        DataType::FixedSizeList(..) => a.as_fixed_size_list().value(row),
        DataType::List(_) => a.as_list::<i32>().value(row),
        DataType::LargeList(_) => a.as_list::<i64>().value(row),
        _ => return None,
    };
    let f = items.as_primitive_opt::<Float32Type>()?;
    // A NULL component makes the vector unusable: NaN (never indexed, never a neighbour).
    Some(
        (0..f.len())
            .map(|i| if f.is_null(i) { f32::NAN } else { f.value(i) })
            .collect(),
    )
}

pub fn value_at(a: &dyn Array, row: usize) -> Result<Value> {
    if a.is_null(row) {
        return Ok(Value::Null);
    }
    if vector_item(a.data_type()) {
        // Vector columns travel as their floats' little-endian bytes (vector indexes only;
        // they have no key type, so no predicate names them).
        return Ok(match vector_at(a, row) {
            Some(v) => Value::Binary(crate::index::vector::to_bytes(&v)),
            None => Value::Null,
        });
    }
    Ok(match a.data_type() {
        DataType::Boolean => Value::Bool(a.as_boolean().value(row)),
        DataType::Int8 => Value::Int(a.as_primitive::<Int8Type>().value(row) as i64),
        DataType::Int16 => Value::Int(a.as_primitive::<Int16Type>().value(row) as i64),
        DataType::Int32 => Value::Int(a.as_primitive::<Int32Type>().value(row) as i64),
        DataType::Int64 => Value::Int(a.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::UInt(a.as_primitive::<UInt8Type>().value(row) as u64),
        DataType::UInt16 => Value::UInt(a.as_primitive::<UInt16Type>().value(row) as u64),
        DataType::UInt32 => Value::UInt(a.as_primitive::<UInt32Type>().value(row) as u64),
        DataType::UInt64 => Value::UInt(a.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => Value::Float32(a.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Value::Float64(a.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(..) => Value::Decimal(a.as_primitive::<Decimal128Type>().value(row)),
        DataType::Utf8 => Value::String(a.as_string::<i32>().value(row).to_string()),
        DataType::LargeUtf8 => Value::String(a.as_string::<i64>().value(row).to_string()),
        DataType::Utf8View => Value::String(a.as_string_view().value(row).to_string()),
        DataType::Binary => Value::Binary(a.as_binary::<i32>().value(row).to_vec()),
        DataType::LargeBinary => Value::Binary(a.as_binary::<i64>().value(row).to_vec()),
        DataType::BinaryView => Value::Binary(a.as_binary_view().value(row).to_vec()),
        DataType::FixedSizeBinary(_) => Value::Binary(a.as_fixed_size_binary().value(row).to_vec()),
        DataType::Date32 => Value::Date(a.as_primitive::<Date32Type>().value(row)),
        DataType::Time64(TimeUnit::Microsecond) => {
            Value::Time(a.as_primitive::<Time64MicrosecondType>().value(row))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Value::Timestamp(a.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Value::Timestamp(a.as_primitive::<TimestampNanosecondType>().value(row))
        }
        DataType::Dictionary(..) => {
            let d = a.as_any_dictionary();
            let keys = d.normalized_keys();
            value_at(d.values().as_ref(), keys[row])?
        }
        other => {
            return Err(Error::Unsupported(format!(
                "cannot read {other} values as keys"
            )))
        }
    })
}

/// Whether values of type `from` read as type `to` without loss, as Iceberg's schema
/// evolution allows (spec "Schema Evolution": int → long, float → double, a decimal's
/// precision widened at the same scale); the same type too.
pub fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    match (from, to) {
        (a, b) if a == b => true,
        (Int8 | Int16 | Int32, Int64) | (Int8 | Int16, Int32) | (Int8, Int16) => true,
        (Float32, Float64) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (Dictionary(_, v), to) => widens(v, to),
        _ => false,
    }
}

/// List array `a` with element field `f` (the same type but for the field's name or
/// metadata).
fn relabel<O: arrow_array::OffsetSizeTrait>(
    a: &ArrayRef,
    f: &arrow_schema::FieldRef,
) -> Option<ArrayRef> {
    let l = a.as_list::<O>();
    arrow_array::GenericListArray::<O>::try_new(
        f.clone(),
        l.offsets().clone(),
        l.values().clone(),
        l.nulls().cloned(),
    )
    .ok()
    .map(|l| Arc::new(l) as ArrayRef)
}

/// `a` as type `to` ([`widens`] must allow it). Errors: `E_UNSUPPORTED` otherwise.
pub fn conform(a: ArrayRef, to: &DataType) -> Result<ArrayRef> {
    use DataType::*;
    if a.data_type() == to {
        return Ok(a);
    }
    let widen_int = |a: &dyn Array| -> Option<ArrayRef> {
        let out: Int64Array = match a.data_type() {
            Int8 => a.as_primitive::<Int8Type>().unary(|v| v as i64),
            Int16 => a.as_primitive::<Int16Type>().unary(|v| v as i64),
            Int32 => a.as_primitive::<Int32Type>().unary(|v| v as i64),
            _ => return None,
        };
        Some(Arc::new(out))
    };
    let out: Option<ArrayRef> = match (a.data_type(), to) {
        (Int8 | Int16 | Int32, Int64) => widen_int(a.as_ref()),
        (Int8 | Int16, Int32) => {
            let w = widen_int(a.as_ref()).expect("an int");
            Some(Arc::new(
                w.as_primitive::<Int64Type>()
                    .unary::<_, Int32Type>(|v| v as i32),
            ))
        }
        (Int8, Int16) => Some(Arc::new(
            a.as_primitive::<Int8Type>()
                .unary::<_, Int16Type>(|v| v as i16),
        )),
        (Float32, Float64) => Some(Arc::new(
            a.as_primitive::<Float32Type>()
                .unary::<_, Float64Type>(|v| v as f64),
        )),
        (Decimal128(p1, s1), Decimal128(p2, s2)) if s1 == s2 && p1 <= p2 => Some(Arc::new(
            a.as_primitive::<Decimal128Type>()
                .clone()
                .with_precision_and_scale(*p2, *s2)?,
        )),
        (Dictionary(..), to) => {
            let d = a.as_any_dictionary();
            let values = arrow_select::take::take(d.values().as_ref(), d.keys(), None)?;
            return conform(values, to);
        }
        (Utf8 | LargeUtf8 | Utf8View, Utf8) => Some(Arc::new(
            (0..a.len())
                .map(|i| match value_at(a.as_ref(), i) {
                    Ok(Value::String(s)) => Some(s),
                    _ => None,
                })
                .collect::<StringArray>(),
        )),
        (Binary | LargeBinary | BinaryView, Binary) => Some(Arc::new(
            (0..a.len())
                .map(|i| match value_at(a.as_ref(), i) {
                    Ok(Value::Binary(b)) => Some(b),
                    _ => None,
                })
                .collect::<BinaryArray>(),
        )),
        // The same list but for its element field's name or metadata (an Iceberg writer's
        // element field id, which [`type_name`] leaves out of the table's types).
        (List(_), List(f)) if a.data_type().equals_datatype(to) => relabel::<i32>(&a, f),
        (LargeList(_), LargeList(f)) if a.data_type().equals_datatype(to) => relabel::<i64>(&a, f),
        (FixedSizeList(..), FixedSizeList(f, n)) if a.data_type().equals_datatype(to) => {
            let l = a.as_fixed_size_list();
            arrow_array::FixedSizeListArray::try_new(
                f.clone(),
                *n,
                l.values().clone(),
                l.nulls().cloned(),
            )
            .ok()
            .map(|l| Arc::new(l) as ArrayRef)
        }
        _ => None,
    };
    out.ok_or_else(|| {
        Error::Unsupported(format!(
            "a column of type {} cannot be read as {to}",
            a.data_type()
        ))
    })
}

/// The columns `fields` (a table's columns, by field id) of the rows `positions` of one
/// file, in that order, as the table types them: a column the file does not have (added to
/// the table after the file was written) reads as NULL; a narrower type is widened
/// ([`conform`]); names are the table's.
pub async fn read_rows_as<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    positions: &[u64],
    fields: &[&FieldInfo],
    dicts: Option<&dyn DictionaryPages>,
) -> Result<RecordBatch> {
    let file_fields = self::fields(&arrow_schema(md)?);
    let roots: Vec<Option<usize>> = fields
        .iter()
        .map(|f| root_of(&file_fields, f.field_id).ok())
        .collect();
    let mut present: Vec<usize> = roots.iter().flatten().copied().collect();
    present.sort_unstable();
    present.dedup();
    let batch = if present.is_empty() {
        None
    } else {
        Some(read_rows(r, loc, md, positions, &present, dicts).await?)
    };
    let n = positions.len();
    if fields.is_empty() {
        return Ok(RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
        )?);
    }
    let mut out_fields = Vec::with_capacity(fields.len());
    let mut columns = Vec::with_capacity(fields.len());
    for (f, root) in fields.iter().zip(&roots) {
        let ty = f.data_type.parse::<DataType>().ok();
        let col = match (root, &batch) {
            (Some(r), Some(b)) => {
                let a = b.column(present.binary_search(r).expect("present")).clone();
                match &ty {
                    Some(t) => conform(a, t)?,
                    None => a,
                }
            }
            _ => arrow_array::new_null_array(ty.as_ref().unwrap_or(&DataType::Null), n),
        };
        out_fields.push(Field::new(&f.name, col.data_type().clone(), true));
        columns.push(col);
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(out_fields)),
        columns,
    )?)
}

/// Decodes the top-level columns `roots` of every row group, in row order, calling
/// `on_batch(batch, first_row_position)` per bounded batch. Column chunks are fetched with
/// coalesced range reads.
pub async fn scan_columns<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    roots: &[usize],
    on_batch: impl FnMut(&RecordBatch, u64) -> Result<()>,
) -> Result<()> {
    scan_columns_range(r, loc, md, roots, None, on_batch).await
}

/// [`scan_columns`] over the rows `range` only (row positions within the file): row groups
/// outside it are not read, and rows outside it within the first and last are skipped.
pub async fn scan_columns_range<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    roots: &[usize],
    range: Option<std::ops::Range<u64>>,
    mut on_batch: impl FnMut(&RecordBatch, u64) -> Result<()>,
) -> Result<()> {
    scan_columns_until(r, loc, md, roots, range, |b, p| {
        on_batch(b, p).map(|()| true)
    })
    .await
}

/// [`scan_columns_range`] that stops — reading nothing more — as soon as `on_batch` returns
/// `false`: a caller that has what it wants (a build step at its byte budget) does not read
/// the rest of its range.
pub async fn scan_columns_until<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    roots: &[usize],
    range: Option<std::ops::Range<u64>>,
    mut on_batch: impl FnMut(&RecordBatch, u64) -> Result<bool>,
) -> Result<()> {
    let mask = ProjectionMask::roots(md.file_metadata().schema_descr(), roots.iter().copied());
    let mut builder = ParquetPushDecoderBuilder::try_new_decoder(md.clone())?
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS);
    let mut position = 0u64;
    if let Some(range) = &range {
        if range.is_empty() {
            return Ok(());
        }
        let (mut start, mut groups, mut selected) = (0u64, Vec::new(), 0u64);
        let mut first = None;
        for (g, rg) in md.row_groups().iter().enumerate() {
            let n = rg.num_rows().max(0) as u64;
            if start < range.end && start + n > range.start {
                first.get_or_insert(start);
                groups.push(g);
                selected += n;
            }
            start += n;
        }
        let Some(first) = first else {
            return Ok(());
        };
        let skip = (range.start - first) as usize;
        let take = (range.end.min(first + selected) - range.start) as usize;
        let sel = RowSelection::from_consecutive_ranges(
            std::iter::once(skip..skip + take),
            selected as usize,
        );
        builder = builder.with_row_groups(groups).with_row_selection(sel);
        position = range.start;
    }
    let mut dec = builder.build()?;
    loop {
        match dec.try_decode()? {
            DecodeResult::NeedsData(ranges) => {
                let bytes: Vec<Bytes> = r.read_ranges(loc, &ranges).await?;
                dec.push_ranges(ranges, bytes)?;
            }
            DecodeResult::Data(batch) => {
                if !on_batch(&batch, position)? {
                    return Ok(());
                }
                position += batch.num_rows() as u64;
            }
            DecodeResult::Finished => return Ok(()),
        }
    }
}

/// Calls `f(values, position)` for every row of the file, with `values` the columns
/// `field_ids` (in that order) — the one place that maps field ids to a projection.
pub async fn scan_values<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    field_ids: &[i32],
    f: impl FnMut(&[Value], u64) -> Result<()>,
) -> Result<()> {
    scan_values_range(r, loc, md, field_ids, None, f).await
}

/// [`scan_values`] over the rows `range` only.
pub async fn scan_values_range<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    field_ids: &[i32],
    range: Option<std::ops::Range<u64>>,
    mut f: impl FnMut(&[Value], u64) -> Result<()>,
) -> Result<()> {
    scan_values_until(r, loc, md, field_ids, range, |v, p| f(v, p).map(|()| true)).await
}

/// [`scan_values_range`] that stops — reading no further row group — once `f` returns
/// `false` (the row it returned `false` for is the last it sees).
pub async fn scan_values_until<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    field_ids: &[i32],
    range: Option<std::ops::Range<u64>>,
    mut f: impl FnMut(&[Value], u64) -> Result<bool>,
) -> Result<()> {
    let file_fields = fields(&arrow_schema(md)?);
    // A column the file does not have (added to an Iceberg table after the file was
    // written) reads as NULL.
    let roots: Vec<Option<usize>> = field_ids
        .iter()
        .map(|id| root_of(&file_fields, *id).ok())
        .collect();
    let mut sorted: Vec<usize> = roots.iter().flatten().copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() && !field_ids.is_empty() {
        let total: u64 = md
            .row_groups()
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .sum();
        let range = range.unwrap_or(0..total);
        let nulls = vec![Value::Null; field_ids.len()];
        for p in range.start..range.end.min(total) {
            if !f(&nulls, p)? {
                break;
            }
        }
        return Ok(());
    }
    // Batch columns come in projection order (ascending root index); map key columns to them.
    let cols: Vec<Option<usize>> = roots
        .iter()
        .map(|r| r.map(|r| sorted.binary_search(&r).expect("present")))
        .collect();
    let mut vals = Vec::with_capacity(cols.len());
    scan_columns_until(r, loc, md, &sorted, range, |batch, first| {
        for row in 0..batch.num_rows() {
            vals.clear();
            for c in &cols {
                vals.push(match c {
                    Some(c) => value_at(batch.column(*c).as_ref(), row)?,
                    None => Value::Null,
                });
            }
            if !f(&vals, first + row as u64)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .await
}

/// The intersection of two sorted lists of disjoint ranges.
pub fn intersect_ranges(
    a: &[std::ops::Range<u64>],
    b: &[std::ops::Range<u64>],
) -> Vec<std::ops::Range<u64>> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].start.max(b[j].start), a[i].end.min(b[j].end));
        if s < e {
            out.push(s..e);
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Decodes the top-level columns `roots` of the rows `ranges` (absolute positions, sorted,
/// disjoint, all inside `groups`), calling `on_batch(batch, positions)` with each bounded
/// batch and the position of each of its rows. With a page index only the pages holding
/// the rows are fetched (coalesced range reads).
pub async fn scan_selected<R: RangeReader + ?Sized>(
    r: &R,
    loc: &Location,
    md: &Arc<ParquetMetaData>,
    roots: &[usize],
    groups: &[usize],
    ranges: &[std::ops::Range<u64>],
    mut on_batch: impl FnMut(&RecordBatch, &[u64]) -> Result<()>,
) -> Result<()> {
    if groups.is_empty() || ranges.is_empty() {
        return Ok(());
    }
    // Absolute start of every group, and of each selected group within the selection.
    let mut starts = Vec::with_capacity(md.num_row_groups());
    let mut at = 0u64;
    for g in md.row_groups() {
        starts.push(at);
        at += g.num_rows().max(0) as u64;
    }
    let mut base = Vec::with_capacity(groups.len()); // (abs start, abs end, selection offset)
    let mut selected = 0u64;
    for &g in groups {
        let n = md.row_group(g).num_rows().max(0) as u64;
        base.push((starts[g], starts[g] + n, selected));
        selected += n;
    }
    let mut rel = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (s, _, off) = base
            .iter()
            .find(|(s, e, _)| r.start >= *s && r.end <= *e)
            .ok_or_else(|| {
                Error::Invalid(format!("rows {r:?} are not inside the selected row groups"))
            })?;
        rel.push((off + r.start - s) as usize..(off + r.end - s) as usize);
    }
    let selection = RowSelection::from_consecutive_ranges(rel.into_iter(), selected as usize);
    let mask = ProjectionMask::roots(md.file_metadata().schema_descr(), roots.iter().copied());
    let mut dec = ParquetPushDecoderBuilder::try_new_decoder(md.clone())?
        .with_projection(mask)
        .with_row_groups(groups.to_vec())
        .with_row_selection(selection)
        .with_batch_size(BATCH_ROWS)
        .build()?;
    // Positions of the selected rows, handed out batch by batch.
    let (mut ri, mut off) = (0usize, 0u64);
    let mut positions = Vec::with_capacity(BATCH_ROWS);
    loop {
        match dec.try_decode()? {
            DecodeResult::NeedsData(want) => {
                let bytes: Vec<Bytes> = r.read_ranges(loc, &want).await?;
                dec.push_ranges(want, bytes)?;
            }
            DecodeResult::Data(batch) => {
                positions.clear();
                while positions.len() < batch.num_rows() {
                    let Some(range) = ranges.get(ri) else {
                        return Err(Error::parquet(format!(
                            "{} decoded more rows than were selected",
                            loc.path
                        )));
                    };
                    let take = (range.end - range.start - off)
                        .min((batch.num_rows() - positions.len()) as u64);
                    positions.extend(range.start + off..range.start + off + take);
                    off += take;
                    if off == range.end - range.start {
                        ri += 1;
                        off = 0;
                    }
                }
                on_batch(&batch, &positions)?;
            }
            DecodeResult::Finished => return Ok(()),
        }
    }
}

/// Index of the top-level column with `field_id` in `fields`.
pub fn root_of(fields: &[FieldInfo], field_id: i32) -> Result<usize> {
    fields
        .iter()
        .position(|f| f.field_id == field_id)
        .ok_or_else(|| Error::NotFound {
            kind: "column with field id",
            name: field_id.to_string(),
        })
}

#[cfg(test)]
mod tests {
    /// A list column written by an Iceberg writer (its element field carries a field id):
    /// its recorded type parses back, and a float list is a vector column.
    #[test]
    fn nested_field_metadata_is_left_out_of_type_names() {
        let element = Field::new("element", DataType::Float32, true).with_metadata(HashMap::from(
            [(PARQUET_FIELD_ID_META_KEY.to_string(), "5".to_string())],
        ));
        let t = DataType::List(std::sync::Arc::new(element));
        assert!(
            t.to_string().parse::<DataType>().is_err(),
            "arrow's own text does not parse"
        );
        let name = type_name(&t);
        assert_eq!(name.parse::<DataType>().unwrap(), {
            DataType::List(std::sync::Arc::new(Field::new(
                "element",
                DataType::Float32,
                true,
            )))
        });
        assert!(is_vector_type(&name));
        assert_eq!(type_name(&DataType::Int64), "Int64");
    }
    use std::collections::HashMap;

    use super::*;

    fn with_id(name: &str, dt: DataType, id: Option<i32>) -> Field {
        let f = Field::new(name, dt, true);
        match id {
            Some(id) => f.with_metadata(HashMap::from([(
                PARQUET_FIELD_ID_META_KEY.to_string(),
                id.to_string(),
            )])),
            None => f,
        }
    }

    #[test]
    fn field_ids_come_from_parquet_when_every_column_has_one() {
        let s = Schema::new(vec![
            with_id("a", DataType::Int64, Some(7)),
            with_id("b", DataType::Utf8, Some(3)),
        ]);
        let f = fields(&s);
        assert_eq!(
            f.iter()
                .map(|f| (f.field_id, f.key_type))
                .collect::<Vec<_>>(),
            vec![(7, Some(KeyType::Int64)), (3, Some(KeyType::String))]
        );
        // Missing on any column: assigned in column order.
        let s = Schema::new(vec![
            with_id("a", DataType::Int64, Some(7)),
            with_id("b", DataType::Utf8, None),
        ]);
        assert_eq!(
            fields(&s).iter().map(|f| f.field_id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        // Unindexable types have no key type.
        let s = Schema::new(vec![with_id(
            "l",
            DataType::List(Arc::new(Field::new("x", DataType::Int32, true))),
            None,
        )]);
        assert_eq!(fields(&s)[0].key_type, None);
    }

    #[test]
    fn parquet_field_ids_survive_a_round_trip() {
        use arrow_array::{Int64Array, RecordBatch};
        let schema = Arc::new(Schema::new(vec![with_id("id", DataType::Int64, Some(42))]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2, 3]))],
        )
        .unwrap();
        let mut buf = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let m = crate::io::MemoryReader::new();
        m.put("f.parquet", buf.clone());
        let md = crate::io::block_on(read_metadata(
            &m,
            &Location::new("f.parquet"),
            buf.len() as u64,
        ))
        .unwrap();
        assert_eq!(fields(&arrow_schema(&md).unwrap())[0].field_id, 42);
        assert_eq!(md.file_metadata().num_rows(), 3);
    }
}
