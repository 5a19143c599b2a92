//! The full-text index's table run: every covered file's postings in one
//! `skerry-fulltext-v1` blob whose rows are the covered files' rows end to end — run row
//! `base[ordinal] + position`, `base` the sum of the record counts of the files before it
//! (the manifest's run records them, so a reader needs nothing more to map a row back).
//!
//! One term dictionary, one set of statistics (documents, tokens, df per term) and one
//! postings list per term for the whole table: a search reads a directory, the query terms'
//! blocks and their postings — three ranges whatever the number of files, where per-file
//! blobs take three per file. The layout is the per-file blob's (`docs/fulltext-index.md`)
//! with directory flag bit 1 ("interleaved") set: each term's positions directly follow its
//! postings, `positions_start` is 0 and positions offsets are from the blob's start, so the
//! run streams out term by term with nothing held back but the term blocks; and bit 2
//! ("checked blocks"): each term entry records its skip section's length and CRC-32 and each
//! skip its block's CRC-32, so a search may read a frequent term's skips, then only the
//! blocks that can still hold a top document; and bit 3 ("block impacts"): each skip records
//! its block's best BM25 saturation against the run's mean length, which bounds the block
//! closely and proves a floor for the k-th score before any block is read.
//!
//! [`RunWriter`] writes it a term at a time (a build merges the files' blobs into it,
//! `admin::fulltext_run`); the per-file readers read it unchanged.

use std::ops::Range;

use sha2::{Digest, Sha256};

use super::lengths::{self, RowLengths};
use super::{
    encode_term, DictWriter, DirectoryFacts, EntryFacts, ImpactRef, Layout, TermPostingsRef, MAGIC,
};
use crate::index::analyzer::Tokenizer;

/// Rows a run addresses at most (its postings hold rows as u32).
pub const MAX_RUN_ROWS: u64 = u32::MAX as u64;

/// A run directory of at most this many bytes rides in the manifest (`TableRun::directory`,
/// hex), so a cold search reads no directory: a few KiB for tens of thousands of terms, and
/// the manifest every reader loads stays small for dictionaries of millions.
pub const INLINE_DIRECTORY_MAX: u64 = 32 << 10;

/// Writes a run term by term (terms ascending), handing its bytes out as they are made.
pub struct RunWriter {
    positions: bool,
    /// The run's documents and tokens (its directory's; the impacts' reference).
    stats: ImpactRef,
    dict: DictWriter,
    /// Bytes made and not yet taken.
    pending: Vec<u8>,
    /// Blob offset of `pending`'s first byte.
    taken: u64,
    postings: u64,
    scratch: Vec<u8>,
    /// Terms in at least `1/alpha` of the documents take their lengths from the run's length
    /// table (0: no table).
    alpha: u8,
    /// Every row's length, from the terms holding it.
    lengths: RowLengths,
    /// Whether a term took its lengths from the table (else none is written).
    shared: bool,
}

/// The end of a run: its term blocks and directory (to be written after every term), and the
/// facts the manifest records.
#[derive(Clone, Debug)]
pub struct RunTail {
    pub bytes: Vec<u8>,
    pub directory: Range<u64>,
    pub directory_sha256: String,
    pub docs: u64,
    pub tokens: u64,
    pub terms: u64,
    pub postings: u64,
    pub min_term: Option<Vec<u8>>,
    pub max_term: Option<Vec<u8>>,
}

impl RunWriter {
    /// A run over rows holding `docs` documents of `tokens` terms (the covered files' sums,
    /// known before any term: every skip's impact is computed against their mean).
    pub fn new(positions: bool, docs: u64, tokens: u64) -> RunWriter {
        RunWriter::with_alpha(positions, docs, tokens, lengths::DEFAULT_ALPHA)
    }

    /// [`RunWriter::new`] whose terms in at least `1/alpha` of the documents take their
    /// lengths from a length table (`0`: every term keeps its own, no table).
    pub fn with_alpha(positions: bool, docs: u64, tokens: u64, alpha: u8) -> RunWriter {
        RunWriter {
            alpha,
            lengths: RowLengths::default(),
            shared: false,
            positions,
            stats: ImpactRef { docs, tokens },
            dict: DictWriter::new(positions, true),
            pending: MAGIC.to_vec(),
            taken: 0,
            postings: 0,
            scratch: Vec::new(),
        }
    }

    /// Adds `term` (greater than every term before) with its postings over the run's rows.
    /// `t.rows` must be ascending and non-empty.
    pub fn term(&mut self, term: &[u8], t: TermPostingsRef<'_>) {
        debug_assert!(!t.rows.is_empty());
        let at = self.taken + self.pending.len() as u64;
        self.scratch.clear();
        let df = t.rows.len() as u64;
        let shared_lengths = lengths::shared(self.alpha, df, self.stats.docs);
        self.shared |= shared_lengths;
        if self.alpha > 0 {
            for (r, l) in t.rows.iter().zip(t.lens) {
                self.lengths.set(*r, *l);
            }
        }
        let code = encode_term(
            t,
            Layout {
                positions: self.positions,
                checked: true,
                impacts: Some(self.stats),
                compact: true,
                lean: true,
                shared_lengths,
            },
            &mut self.pending,
            &mut self.scratch,
        );
        let p_end = self.taken + self.pending.len() as u64;
        let postings_crc = crc32fast::hash(&self.pending[(at - self.taken) as usize..]);
        self.pending.extend_from_slice(&self.scratch);
        self.postings += t.rows.len() as u64;
        self.dict.add(
            term,
            &EntryFacts {
                df: t.rows.len() as u64,
                max_tf: code.max_tf,
                min_len: code.min_len,
                skips: code.skips,
                postings: at..p_end,
                postings_crc,
                positions: p_end..p_end + self.scratch.len() as u64,
                positions_crc: crc32fast::hash(&self.scratch),
            },
        );
    }

    /// Bytes made so far (to stream out once they are many).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes the bytes made so far.
    pub fn take(&mut self) -> Vec<u8> {
        self.taken += self.pending.len() as u64;
        std::mem::take(&mut self.pending)
    }

    /// Ends the run over `rows` rows: what remains to write (the pending bytes, the term
    /// blocks, the directory) and the run's facts.
    pub fn finish(mut self, tokenizer: Tokenizer, rows: u64) -> RunTail {
        let ImpactRef { docs, tokens } = self.stats;
        let bounds = self.dict.bounds();
        let terms = self.dict.terms();
        let mut bytes = std::mem::take(&mut self.pending);
        // The length table, after the postings, when a term's lengths are in it.
        let table = self
            .shared
            .then(|| self.lengths.write(self.alpha, rows, self.taken, &mut bytes));
        drop(std::mem::take(&mut self.lengths));
        let facts = DirectoryFacts {
            tokenizer,
            positions: self.positions,
            interleaved: true,
            checked: true,
            impacts: true,
            compact: true,
            lean: true,
            lengths: table,
            rows,
            docs,
            tokens,
            positions_start: 0,
        };
        let directory = self.dict.finish(&facts, self.taken, &mut bytes);
        let d = (directory.start - self.taken) as usize..(directory.end - self.taken) as usize;
        let directory_sha256 = hex::encode(Sha256::digest(&bytes[d]));
        let (min_term, max_term) = match bounds {
            Some((a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
        RunTail {
            bytes,
            directory,
            directory_sha256,
            docs,
            tokens,
            terms,
            postings: self.postings,
            min_term,
            max_term,
        }
    }
}

/// The rows of one term across files, gathered for [`RunWriter::term`]: postings appended a
/// file at a time (files in ordinal order, so run rows stay ascending).
#[derive(Default)]
pub struct TermGather {
    pub rows: Vec<u32>,
    pub tfs: Vec<u32>,
    pub lens: Vec<u32>,
    pub positions: Vec<u32>,
}

impl TermGather {
    pub fn clear(&mut self) {
        self.rows.clear();
        self.tfs.clear();
        self.lens.clear();
        self.positions.clear();
    }

    pub fn as_ref(&self) -> TermPostingsRef<'_> {
        TermPostingsRef {
            rows: &self.rows,
            tfs: &self.tfs,
            lens: &self.lens,
            positions: &self.positions,
        }
    }

    /// Appends every posting of a file's term (`p`, its positions bytes `positions` when
    /// kept; `table`: its blob's length table read whole, empty without one), its rows
    /// shifted by `base`. Errors when a block does not decode, positions disagree, or a row
    /// passes the run's rows.
    pub fn append(
        &mut self,
        p: &super::Postings,
        positions: Option<&[u8]>,
        table: &[u32],
        base: u32,
    ) -> Result<(), super::BlobError> {
        let mut rows = [0u32; super::BLOCK_DOCS];
        let mut tfs = [0u32; super::BLOCK_DOCS];
        let mut lens = [0u32; super::BLOCK_DOCS];
        for i in 0..p.skips.len() {
            let n = p.decode_with(i, &mut rows, &mut tfs, &mut lens, table)?;
            for r in &rows[..n] {
                let r = r
                    .checked_add(base)
                    .ok_or(super::BlobError::Corrupt("run row out of range"))?;
                self.rows.push(r);
            }
            self.tfs.extend_from_slice(&tfs[..n]);
            self.lens.extend_from_slice(&lens[..n]);
            if let Some(pb) = positions {
                let out = &mut self.positions;
                super::block_positions(pb, p, i, &tfs[..n], &lens[..n], |_, ps| {
                    out.extend_from_slice(ps);
                })?;
            }
        }
        Ok(())
    }

    /// Appends the postings of a term of an earlier run (`p`, its positions bytes
    /// `positions` when kept) whose rows `row` maps to this run's (`None`: the row's file is
    /// left out, its posting and positions dropped). Rows must map in increasing order.
    /// Errors as [`append`](Self::append).
    pub fn append_mapped(
        &mut self,
        p: &super::Postings,
        positions: Option<&[u8]>,
        table: &[u32],
        row: impl Fn(u32) -> Option<u32>,
    ) -> Result<(), super::BlobError> {
        let mut rows = [0u32; super::BLOCK_DOCS];
        let mut tfs = [0u32; super::BLOCK_DOCS];
        let mut lens = [0u32; super::BLOCK_DOCS];
        let mut kept = [None; super::BLOCK_DOCS];
        for i in 0..p.skips.len() {
            let n = p.decode_with(i, &mut rows, &mut tfs, &mut lens, table)?;
            for k in 0..n {
                kept[k] = row(rows[k]);
                if let Some(r) = kept[k] {
                    if self.rows.last().is_some_and(|l| *l >= r) {
                        return Err(super::BlobError::Corrupt("run rows out of order"));
                    }
                    self.rows.push(r);
                    self.tfs.push(tfs[k]);
                    self.lens.push(lens[k]);
                }
            }
            if let Some(pb) = positions {
                let out = &mut self.positions;
                super::block_positions(pb, p, i, &tfs[..n], &lens[..n], |k, ps| {
                    if kept[k].is_some() {
                        out.extend_from_slice(ps);
                    }
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::fulltext::{read_all, FulltextWriter, Postings};

    use crate::index::fulltext::tests::sample_docs as docs;

    /// A run merged from per-file blobs reads back exactly as one blob written over the
    /// files' documents end to end: same terms, rows, tfs, lengths and positions.
    #[test]
    fn run_of_files_equals_one_blob_of_their_rows() {
        for positions in [true, false] {
            let files: Vec<Vec<Option<String>>> =
                (0..5).map(|i| docs(i + 1, 40 + 90 * i as usize)).collect();
            let blobs: Vec<_> = files
                .iter()
                .map(|d| {
                    let mut w = FulltextWriter::new(Tokenizer::Simple, positions);
                    for (i, t) in d.iter().enumerate() {
                        w.add(i as u64, t.as_deref()).unwrap();
                    }
                    w.finish(d.len() as u64)
                })
                .collect();
            // The reference: every document in one blob.
            let mut one = FulltextWriter::new(Tokenizer::Simple, positions);
            let mut row = 0u64;
            for d in &files {
                for t in d {
                    one.add(row, t.as_deref()).unwrap();
                    row += 1;
                }
            }
            let one = one.finish(row);
            // The run, merged term by term from the files' blobs.
            let per: Vec<_> = blobs
                .iter()
                .map(|b| read_all(&b.bytes, b.directory.clone()).unwrap())
                .collect();
            let mut terms: Vec<Vec<u8>> = per.iter().flatten().map(|(t, _)| t.clone()).collect();
            terms.sort();
            terms.dedup();
            let (docs, tokens) = blobs
                .iter()
                .fold((0, 0), |a, b| (a.0 + b.docs, a.1 + b.tokens));
            let mut w = RunWriter::new(positions, docs, tokens);
            let mut out = Vec::new();
            let mut g = TermGather::default();
            for term in &terms {
                g.clear();
                let mut base = 0u32;
                for (f, b) in per.iter().zip(&blobs) {
                    if let Some((_, list)) = f.iter().find(|(t, _)| t == term) {
                        for p in list {
                            g.rows.push(base + p.row);
                            g.tfs.push(p.tf);
                            g.lens.push(p.len);
                            g.positions.extend_from_slice(&p.positions);
                        }
                    }
                    base += b.rows as u32;
                }
                w.term(term, g.as_ref());
                if w.pending() > 300 {
                    out.extend(w.take());
                }
            }
            let tail = w.finish(Tokenizer::Simple, row);
            out.extend_from_slice(&tail.bytes);
            let run = read_all(&out, tail.directory.clone()).unwrap();
            assert_eq!(run, read_all(&one.bytes, one.directory.clone()).unwrap());
            assert_eq!(tail.terms, one.terms);
            assert_eq!(tail.postings, one.postings);
            assert_eq!((tail.min_term, tail.max_term), (one.min_term, one.max_term));
            let d = &out[tail.directory.start as usize..];
            assert_eq!(hex::encode(Sha256::digest(d)), tail.directory_sha256);
            let dir = super::super::FulltextDirectory::parse(
                d,
                Some(&tail.directory_sha256),
                out.len() as u64,
            )
            .unwrap();
            assert!(dir.interleaved && dir.positions == positions);
            assert_eq!((dir.rows, dir.docs, dir.tokens), (row, docs, tokens));
            // TermGather::append reproduces the files' postings shifted by their bases.
            let e = {
                let r = &dir.blocks[0];
                let tb = &out[r.offset as usize..(r.offset + r.length) as usize];
                super::super::parse_term_block(tb, r, &dir, out.len() as u64).unwrap()[0].clone()
            };
            let p = Postings::parse(
                bytes::Bytes::copy_from_slice(
                    &out[e.postings.start as usize..e.postings.end as usize],
                ),
                &e,
                dir.rows,
            )
            .unwrap();
            let pos = e
                .positions
                .as_ref()
                .map(|(r, _)| &out[r.start as usize..r.end as usize]);
            let table = dir
                .lengths
                .as_ref()
                .map(|t| t.read_all(&out).unwrap())
                .unwrap_or_default();
            let mut g = TermGather::default();
            g.append(&p, pos, &table, 7).unwrap();
            let want = &run[0].1;
            assert_eq!(g.rows, want.iter().map(|p| p.row + 7).collect::<Vec<_>>());
            assert_eq!(g.tfs, want.iter().map(|p| p.tf).collect::<Vec<_>>());
            assert!(
                g.append(&p, pos, &table, u32::MAX).is_err(),
                "rows past 2^32 are refused"
            );
        }
    }

    /// One file's blob (no positions) and the run written from it alone: the blob, the run's
    /// bytes and its parsed directory.
    fn one_file_run(
        d: &[Option<String>],
    ) -> (
        super::super::FulltextBlob,
        Vec<u8>,
        super::super::FulltextDirectory,
    ) {
        let (blob, out, dir, _) = one_file_run_at(d);
        (blob, out, dir)
    }

    /// [`one_file_run`], with the directory's range in the run.
    fn one_file_run_at(
        d: &[Option<String>],
    ) -> (
        super::super::FulltextBlob,
        Vec<u8>,
        super::super::FulltextDirectory,
        Range<u64>,
    ) {
        let mut one = FulltextWriter::new(Tokenizer::Simple, false);
        for (i, t) in d.iter().enumerate() {
            one.add(i as u64, t.as_deref()).unwrap();
        }
        let blob = one.finish(d.len() as u64);
        let (out, directory) = run_of(&blob, lengths::DEFAULT_ALPHA);
        let dir = super::super::FulltextDirectory::parse(
            &out[directory.start as usize..],
            None,
            out.len() as u64,
        )
        .unwrap();
        (blob, out, dir, directory)
    }

    /// The run written from one file's blob alone with `alpha`: its bytes and directory range.
    fn run_of(blob: &super::super::FulltextBlob, alpha: u8) -> (Vec<u8>, Range<u64>) {
        let mut w = RunWriter::with_alpha(false, blob.docs, blob.tokens, alpha);
        let mut g = TermGather::default();
        for (term, list) in &read_all(&blob.bytes, blob.directory.clone()).unwrap() {
            g.clear();
            for p in list {
                g.rows.push(p.row);
                g.tfs.push(p.tf);
                g.lens.push(p.len);
            }
            w.term(term, g.as_ref());
        }
        let mut out = w.take();
        let tail = w.finish(Tokenizer::Simple, blob.rows);
        out.extend_from_slice(&tail.bytes);
        let d = &out[tail.directory.start as usize..];
        assert_eq!(hex::encode(Sha256::digest(d)), tail.directory_sha256);
        (out, tail.directory)
    }

    /// Checked blocks: a term's skip section parses alone, each block read alone decodes to
    /// what the whole postings hold, and a damaged skip section or block is refused by its
    /// CRC-32 — every byte of either, never a panic.
    #[test]
    fn checked_blocks_read_alone_equal_the_whole() {
        let d = docs(7, 3000);
        let (_, out, dir) = one_file_run(&d);
        assert!(dir.checked);
        let table = dir.lengths.as_ref().unwrap().read_all(&out).unwrap();
        let mut seen_many = false;
        for r in &dir.blocks {
            let tb = &out[r.offset as usize..(r.offset + r.length) as usize];
            for e in super::super::parse_term_block(tb, r, &dir, out.len() as u64).unwrap() {
                let all = &out[e.postings.start as usize..e.postings.end as usize];
                let (len, _) = e.skips.expect("a checked entry records its skips");
                let whole =
                    Postings::parse(bytes::Bytes::copy_from_slice(all), &e, dir.rows).unwrap();
                let skips = Postings::parse_skips(
                    bytes::Bytes::copy_from_slice(&all[..len as usize]),
                    &e,
                    dir.rows,
                )
                .unwrap();
                assert!(whole.whole && !skips.whole);
                assert_eq!(whole.skips, skips.skips);
                seen_many |= skips.skips.len() > 3;
                let mut a = ([0u32; 128], [0u32; 128], [0u32; 128]);
                let mut b = ([0u32; 128], [0u32; 128], [0u32; 128]);
                for (i, sk) in skips.skips.iter().enumerate() {
                    let block = &all[sk.start..sk.end];
                    let n = whole
                        .decode_with(i, &mut a.0, &mut a.1, &mut a.2, &table[..])
                        .unwrap();
                    let m = skips
                        .decode_block_with(i, block, &mut b.0, &mut b.1, &mut b.2, &table[..])
                        .unwrap();
                    assert_eq!(
                        (n, &a.0[..n], &a.1[..n], &a.2[..n]),
                        (m, &b.0[..m], &b.1[..m], &b.2[..m])
                    );
                    assert!(skips.decode(i, &mut b.0, &mut b.1, &mut b.2).is_err());
                    for k in 0..block.len() {
                        let mut bad = block.to_vec();
                        bad[k] ^= 0x21;
                        assert!(skips
                            .decode_block_with(i, &bad, &mut b.0, &mut b.1, &mut b.2, &table[..])
                            .is_err());
                    }
                    assert!(skips
                        .decode_block_with(i, &block[1..], &mut b.0, &mut b.1, &mut b.2, &table[..])
                        .is_err());
                }
                for k in 0..len as usize {
                    let mut bad = all[..len as usize].to_vec();
                    bad[k] ^= 0x40;
                    assert!(Postings::parse_skips(bytes::Bytes::from(bad), &e, dir.rows).is_err());
                }
                assert!(Postings::parse_skips(
                    bytes::Bytes::copy_from_slice(&all[..len as usize - 1]),
                    &e,
                    dir.rows
                )
                .is_err());
            }
        }
        assert!(seen_many, "some term spans several blocks");
    }

    /// Block impacts: under the run's own statistics and others (a mean length half and
    /// twice as long), no posting of a block saturates above its range's upper end and one
    /// reaches its lower end; an impact that disagrees with its block is refused on decode.
    #[test]
    fn block_impacts_bound_every_block_and_are_reached() {
        let d = docs(11, 2500);
        let (blob, out, dir) = one_file_run(&d);
        assert!(dir.checked && dir.impacts);
        let table = dir.lengths.as_ref().unwrap().read_all(&out).unwrap();
        let avg = blob.tokens as f64 / blob.docs as f64;
        let (mut blocks, mut tight) = (0, 0);
        for r in &dir.blocks {
            let tb = &out[r.offset as usize..(r.offset + r.length) as usize];
            for e in super::super::parse_term_block(tb, r, &dir, out.len() as u64).unwrap() {
                let all = &out[e.postings.start as usize..e.postings.end as usize];
                let p = Postings::parse(bytes::Bytes::copy_from_slice(all), &e, dir.rows).unwrap();
                let mut x = ([0u32; 128], [0u32; 128], [0u32; 128]);
                for i in 0..p.skips.len() {
                    let n = p
                        .decode_with(i, &mut x.0, &mut x.1, &mut x.2, &table[..])
                        .unwrap();
                    for a in [avg, avg * 0.5, avg * 2.0, avg * 1.01] {
                        let (lo, hi) = p.impact_range(i, a).unwrap();
                        let best = (0..n)
                            .map(|j| super::super::saturation(x.1[j], x.2[j], a))
                            .fold(0.0, f64::max);
                        assert!(best <= hi && best >= lo, "{best} outside {lo}..{hi}");
                        if a == avg {
                            tight += usize::from(hi - best < 1.0 / p.impact_scale());
                        }
                    }
                    blocks += 1;
                    let mut lying = p.clone();
                    lying.skips[i].impact = if p.skips[i].impact > 1 {
                        p.skips[i].impact - 1
                    } else {
                        2
                    };
                    assert!(lying
                        .decode_with(i, &mut x.0, &mut x.1, &mut x.2, &table[..])
                        .is_err());
                }
            }
        }
        assert!(blocks > 50 && tight == blocks, "{tight} of {blocks}");
    }

    /// A run whose terms in an eighth of the documents or more take their lengths from its
    /// length table: the directory says so (bit 6, its facts after the block references),
    /// those terms' blocks are smaller, and a directory whose flag disagrees with its bytes
    /// is refused. A writer with `alpha` 0 writes no table and the same postings otherwise.
    #[test]
    fn dense_terms_take_their_lengths_from_the_table() {
        let d = docs(5, 3000);
        let (blob, out, dir, dir_at) = one_file_run_at(&d);
        let t = dir.lengths.as_ref().expect("a length table");
        assert_eq!(t.alpha, lengths::DEFAULT_ALPHA);
        assert_eq!(t.rows(), blob.rows);
        let table = t.read_all(&out).unwrap();
        // The table holds each row's length as the blob's postings do.
        for (_, list) in &read_all(&blob.bytes, blob.directory.clone()).unwrap() {
            for p in list {
                assert_eq!(table[p.row as usize], p.len);
            }
        }
        let mut shared = 0;
        for r in &dir.blocks {
            let tb = &out[r.offset as usize..(r.offset + r.length) as usize];
            for e in super::super::parse_term_block(tb, r, &dir, out.len() as u64).unwrap() {
                assert_eq!(e.shared_lengths, e.df * 8 >= dir.docs, "{:?}", e.term);
                shared += usize::from(e.shared_lengths);
            }
        }
        assert!(shared > 0);
        // Without the table: the same terms and postings, more bytes.
        let (plain, plain_at) = run_of(&blob, 0);
        let pd = &plain[plain_at.start as usize..];
        let pdir = super::super::FulltextDirectory::parse(pd, None, plain.len() as u64).unwrap();
        assert!(pdir.lengths.is_none());
        assert_eq!(
            read_all(&plain, plain_at.clone()).unwrap(),
            read_all(&out, dir_at.clone()).unwrap()
        );
        assert!(out.len() < plain.len(), "{} vs {}", out.len(), plain.len());
        // A flag that disagrees with the directory's bytes is refused.
        let d0 = dir_at.start as usize;
        let mut bad = out[d0..].to_vec();
        bad[6] &= !64;
        assert!(super::super::FulltextDirectory::parse(&bad, None, out.len() as u64).is_err());
        let mut bad = pd.to_vec();
        bad[6] |= 64;
        assert!(super::super::FulltextDirectory::parse(&bad, None, plain.len() as u64).is_err());
        let mut bad = out[d0..].to_vec();
        bad[6] &= !32;
        assert!(super::super::FulltextDirectory::parse(&bad, None, out.len() as u64).is_err());
    }

    #[test]
    fn an_empty_run_reads_back_empty() {
        let w = RunWriter::new(true, 0, 0);
        let tail = w.finish(Tokenizer::Simple, 10);
        // The magic was still pending: the tail is the whole blob.
        let out = &tail.bytes;
        assert!(read_all(out, tail.directory.clone()).unwrap().is_empty());
        assert_eq!(tail.terms, 0);
        assert!(tail.min_term.is_none());
    }
}
