//! Carrying a full-text index over a move (RFC 0006 step 3, decision 76): an output file's
//! blob written from its source files' postings — read from their per-file blobs or from the
//! table run that holds them — with every row mapped to its place in the output. Nothing is
//! tokenized: a posting keeps its term frequency, document length and word positions, which a
//! move does not change.
//!
//! The result is the blob [`FulltextWriter`] writes from the output's text, byte for byte,
//! when the move is honest (the output's rows hold the sources' values): the same terms,
//! postings in output row order, lengths, positions and statistics. One fact is not in the
//! postings: a document without a token (an empty or all-punctuation string) is counted by
//! the directory's `docs` but holds no posting, so where it went cannot be read back. The
//! caller learns how many such documents a source has ([`Gather::add`] returns the source's
//! rows *with* tokens, its blob's facts say its documents) and passes those that moved to
//! this output to [`Gather::finish`] — or, when it cannot tell, derives the output instead.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{
    block_positions, for_each_term, FulltextBlob, FulltextDirectory, FulltextWriter, TermAcc,
    BLOCK_DOCS,
};
use crate::index::analyzer::{Analyzer, Tokenizer};
use crate::index::blob::BlobError;

/// One source file of a move, as the blob holding its postings has them.
pub struct Source<'a> {
    /// The source's per-file blob, or the table run covering it, whole.
    pub blob: &'a [u8],
    /// The blob's directory (relative to `blob`).
    pub directory: Range<u64>,
    /// The directory's SHA-256 as the manifest (or run record) has it.
    pub directory_sha256: &'a str,
    /// The source file's rows in the blob: `0..record_count` in a per-file blob,
    /// `base..base + record_count` in a run (its rows follow the files before it).
    pub rows: Range<u64>,
    /// Where row `position` of the source file went in the output; `None` for a row that is
    /// not in this output (deleted, or moved to another).
    pub to: &'a dyn Fn(u64) -> Option<u64>,
}

/// One source file's rows in a blob holding its postings and others' (a run), for
/// [`Gather::add_parts`].
pub struct Part<'a> {
    /// The file's rows in the blob (as [`Source::rows`]).
    pub rows: Range<u64>,
    /// Where row `position` of the file went in the output (as [`Source::to`]).
    pub to: &'a dyn Fn(u64) -> Option<u64>,
}

/// An output's postings gathered source by source ([`Gather::add`]), then written
/// ([`Gather::finish`]). Memory: the output's postings and positions, and a length per row.
pub struct Gather {
    tokenizer: Tokenizer,
    positions: bool,
    rows: u64,
    /// Per term: (output row, tf, its first position in `pool`).
    terms: BTreeMap<Vec<u8>, Vec<(u32, u32, u32)>>,
    pool: Vec<u32>,
    /// Per output row: its document length (0: no posting yet).
    doc_len: Vec<u32>,
}

impl Gather {
    /// A gather for an output of `rows` rows, for an index analyzing with `tokenizer` and
    /// keeping positions or not. Errors when `rows` passes what a blob addresses.
    pub fn new(tokenizer: Tokenizer, positions: bool, rows: u64) -> Result<Gather, BlobError> {
        if rows > u64::from(u32::MAX) + 1 {
            return Err(BlobError::Corrupt("an output of more than 2^32 rows"));
        }
        Ok(Gather {
            tokenizer,
            positions,
            rows,
            terms: BTreeMap::new(),
            pool: Vec::new(),
            doc_len: vec![0; rows as usize],
        })
    }

    /// Gathers the postings of `s`'s rows that moved here. Returns how many of the source's
    /// rows (moved here or not) hold at least one token. Errors: as [`Gather::add_parts`].
    pub fn add(&mut self, s: &Source<'_>) -> Result<u64, BlobError> {
        let part = Part {
            rows: s.rows.clone(),
            to: s.to,
        };
        let with = self.add_parts(
            s.blob,
            s.directory.clone(),
            s.directory_sha256,
            std::slice::from_ref(&part),
        )?;
        Ok(with[0])
    }

    /// Gathers the postings of every part's rows that moved here from one blob, in one pass
    /// over its terms — a run holding many of a move's sources is decoded once per output,
    /// not once per source (decision 81). Returns, per part, how many of its rows (moved
    /// here or not) hold at least one token. Errors: the blob does not decode or fails a
    /// checksum, it was analyzed otherwise (tokenizer, positions), a part's rows fall outside
    /// the blob's or overlap another's, a row maps past the output or twice with different
    /// lengths.
    pub fn add_parts(
        &mut self,
        blob: &[u8],
        directory: Range<u64>,
        directory_sha256: &str,
        parts: &[Part<'_>],
    ) -> Result<Vec<u64>, BlobError> {
        let len = blob.len() as u64;
        let dir_bytes = blob
            .get(directory.start as usize..directory.end as usize)
            .ok_or(BlobError::Corrupt("range outside the blob"))?;
        let dir = FulltextDirectory::parse(dir_bytes, Some(directory_sha256), len)?;
        if dir.tokenizer != self.tokenizer || dir.positions != self.positions {
            return Err(BlobError::Corrupt("a source analyzed otherwise"));
        }
        // The parts in row order; each inside the blob's rows, none overlapping another.
        let mut ord: Vec<usize> = (0..parts.len()).collect();
        ord.sort_unstable_by_key(|&i| parts[i].rows.start);
        let mut below = 0u64;
        for &i in &ord {
            let r = &parts[i].rows;
            if r.start > r.end || r.end > dir.rows {
                return Err(BlobError::Corrupt("source rows outside the blob's"));
            }
            if r.start < below {
                return Err(BlobError::Corrupt("sources overlapping in the blob"));
            }
            below = r.end;
        }
        let ranges: Vec<Range<u64>> = ord.iter().map(|&i| parts[i].rows.clone()).collect();
        let tos: Vec<&dyn Fn(u64) -> Option<u64>> = ord.iter().map(|&i| parts[i].to).collect();
        // Per part (in row order): its rows holding a token, moved here or not.
        let mut with: Vec<Vec<u64>> = ranges
            .iter()
            .map(|r| vec![0u64; ((r.end - r.start) as usize).div_ceil(64)])
            .collect();
        let (mut rows, mut tfs, mut lens) =
            ([0u32; BLOCK_DOCS], [0u32; BLOCK_DOCS], [0u32; BLOCK_DOCS]);
        let mut kept: [Option<u32>; BLOCK_DOCS] = [None; BLOCK_DOCS];
        let mut list: Vec<(u32, u32, u32)> = Vec::new();
        let (terms, pool, doc_len, rows_out) = (
            &mut self.terms,
            &mut self.pool,
            &mut self.doc_len,
            self.rows,
        );
        let n_parts = ranges.len();
        for_each_term(blob, &dir, |term, p, pos_bytes, table| {
            list.clear();
            // Block `i` holds rows after block `i - 1`'s last up to its own last: a block
            // outside every part's rows is not decoded.
            let (mut below, mut j) = (0u64, 0usize);
            for i in 0..p.skips.len() {
                let last = u64::from(p.skips[i].last_row);
                let (start, end) = (below, last + 1);
                below = end;
                while j < n_parts && ranges[j].end <= start {
                    j += 1;
                }
                if j == n_parts {
                    break;
                }
                if ranges[j].start >= end {
                    continue;
                }
                let n = p.decode_with(i, &mut rows, &mut tfs, &mut lens, table)?;
                // Rows ascend within a block: the part holding one is at or after the last.
                let mut q = j;
                for k in 0..n {
                    kept[k] = None;
                    let row = u64::from(rows[k]);
                    while q < n_parts && ranges[q].end <= row {
                        q += 1;
                    }
                    if q == n_parts || row < ranges[q].start {
                        continue;
                    }
                    let at = (row - ranges[q].start) as usize;
                    with[q][at / 64] |= 1 << (at % 64);
                    let Some(out) = (tos[q])(at as u64) else {
                        continue;
                    };
                    if out >= rows_out {
                        return Err(BlobError::Corrupt("a row mapped past the output"));
                    }
                    let d = &mut doc_len[out as usize];
                    if *d != 0 && *d != lens[k] {
                        return Err(BlobError::Corrupt("a row of two lengths"));
                    }
                    *d = lens[k];
                    kept[k] = Some(out as u32);
                    list.push((out as u32, tfs[k], pool.len() as u32));
                }
                if let Some(pb) = pos_bytes {
                    // Positions of the kept postings, in the order they were pushed.
                    let mut j = list.len() - kept[..n].iter().filter(|k| k.is_some()).count();
                    block_positions(pb, &p, i, &tfs[..n], &lens[..n], |k, ps| {
                        if kept[k].is_some() {
                            list[j].2 = pool.len() as u32;
                            pool.extend_from_slice(ps);
                            j += 1;
                        }
                    })?;
                }
            }
            if !list.is_empty() {
                terms.entry(term).or_default().extend_from_slice(&list);
            }
            Ok(())
        })?;
        if self.pool.len() as u64 > u64::from(u32::MAX) {
            return Err(BlobError::Corrupt("positions past what a carry holds"));
        }
        // Back in the callers' order.
        let mut out = vec![0u64; parts.len()];
        for (q, &i) in ord.iter().enumerate() {
            out[i] = with[q].iter().map(|w| u64::from(w.count_ones())).sum();
        }
        Ok(out)
    }

    /// The output's blob: its gathered postings, and `empty_docs` documents without a token
    /// that moved here (counted, holding no posting). Errors: a row holds one term twice.
    pub fn finish(self, empty_docs: u64) -> Result<FulltextBlob, BlobError> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for (term, mut list) in self.terms {
            list.sort_unstable_by_key(|p| p.0);
            if list.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(BlobError::Corrupt("a row holds a term twice"));
            }
            let term = String::from_utf8(term)
                .map_err(|_| BlobError::Corrupt("a term that is not UTF-8"))?;
            let mut acc = TermAcc {
                term: term.into(),
                rows: Vec::with_capacity(list.len()),
                tfs: Vec::with_capacity(list.len()),
                positions: Vec::new(),
            };
            for (row, tf, at) in list {
                acc.rows.push(row);
                acc.tfs.push(tf);
                if self.positions {
                    let at = at as usize;
                    acc.positions
                        .extend_from_slice(&self.pool[at..at + tf as usize]);
                }
            }
            terms.push(acc);
        }
        drop(self.pool);
        let docs = self.doc_len.iter().filter(|l| **l > 0).count() as u64 + empty_docs;
        let tokens = self.doc_len.iter().map(|l| u64::from(*l)).sum();
        let w = FulltextWriter {
            analyzer: Analyzer::new(self.tokenizer),
            positions: self.positions,
            ids: Default::default(),
            terms,
            doc_len: self.doc_len,
            docs,
            tokens,
            next_row: self.rows,
            scratch: Vec::new(),
        };
        Ok(w.finish(self.rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::fulltext::run::{RunWriter, TermGather};
    use crate::index::fulltext::{read_all, FulltextWriter};

    use crate::index::fulltext::tests::sample_docs as docs;

    fn blob(d: &[Option<String>], positions: bool) -> FulltextBlob {
        let mut w = FulltextWriter::new(Tokenizer::default(), positions);
        for (i, t) in d.iter().enumerate() {
            w.add(i as u64, t.as_deref()).unwrap();
        }
        w.finish(d.len() as u64)
    }

    /// Two sources shuffled into one output: the carried blob is the blob written from the
    /// output's documents, byte for byte — from per-file blobs and from a run holding them.
    #[test]
    fn a_carried_blob_is_the_written_one() {
        for positions in [true, false] {
            let (a, b) = (docs(7, 300), docs(11, 200));
            // Output: every second row of A, all of B reversed, the other rows of A.
            let mut order: Vec<(usize, usize)> = (0..300).step_by(2).map(|p| (0, p)).collect();
            order.extend((0..200).rev().map(|p| (1, p)));
            order.extend((1..300).step_by(2).map(|p| (0, p)));
            let src = [&a, &b];
            let out_docs: Vec<Option<String>> =
                order.iter().map(|(s, p)| src[*s][*p].clone()).collect();
            let want = blob(&out_docs, positions);
            let to_of = |s: usize| {
                let order = order.clone();
                move |p: u64| {
                    order
                        .iter()
                        .position(|o| *o == (s, p as usize))
                        .map(|i| i as u64)
                }
            };
            let (ta, tb) = (to_of(0), to_of(1));
            // From per-file blobs.
            let (ba, bb) = (blob(&a, positions), blob(&b, positions));
            let mut g = Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap();
            // Documents without a token (whole sources: all of them moved here).
            let mut empty = 0;
            for (bl, to, n) in [
                (&ba, &ta as &dyn Fn(u64) -> Option<u64>, 300),
                (&bb, &tb, 200),
            ] {
                let with = g
                    .add(&Source {
                        blob: &bl.bytes,
                        directory: bl.directory.clone(),
                        directory_sha256: &bl.directory_sha256,
                        rows: 0..n,
                        to,
                    })
                    .unwrap();
                empty += bl.docs - with;
            }
            assert!(empty > 0, "the sample has empty documents");
            let got = g.finish(empty).unwrap();
            assert_eq!(got.bytes, want.bytes, "positions {positions}: from blobs");
            assert_eq!((got.docs, got.tokens), (want.docs, want.tokens));

            // From a run holding A then B (rows of B follow A's 300).
            let all: Vec<Option<String>> = a.iter().chain(b.iter()).cloned().collect();
            let whole = blob(&all, positions);
            let terms = read_all(&whole.bytes, whole.directory.clone()).unwrap();
            let mut w = RunWriter::new(positions, whole.docs, whole.tokens);
            let mut bytes = Vec::new();
            let mut gather = TermGather::default();
            for (term, list) in &terms {
                gather.clear();
                for p in list {
                    gather.rows.push(p.row);
                    gather.tfs.push(p.tf);
                    gather.lens.push(p.len);
                    gather.positions.extend_from_slice(&p.positions);
                }
                w.term(term, gather.as_ref());
                bytes.extend(w.take());
            }
            let tail = w.finish(Tokenizer::default(), all.len() as u64);
            bytes.extend_from_slice(&tail.bytes);
            let dir = tail.directory.clone();
            let mut g = Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap();
            for (rows, to) in [
                (0..300u64, &ta as &dyn Fn(u64) -> Option<u64>),
                (300..500, &tb),
            ] {
                g.add(&Source {
                    blob: &bytes,
                    directory: dir.clone(),
                    directory_sha256: &tail.directory_sha256,
                    rows,
                    to,
                })
                .unwrap();
            }
            let got = g.finish(empty).unwrap();
            assert_eq!(got.bytes, want.bytes, "positions {positions}: from a run");

            // The same run's two sources in one pass (listed out of row order): the same
            // blob, and each source's rows with a token counted as one at a time.
            let mut g = Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap();
            let parts = [
                Part {
                    rows: 300..500,
                    to: &tb,
                },
                Part {
                    rows: 0..300,
                    to: &ta,
                },
            ];
            let with = g
                .add_parts(&bytes, dir.clone(), &tail.directory_sha256, &parts)
                .unwrap();
            let (mut one_a, mut one_b) = (
                Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap(),
                Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap(),
            );
            let wa = one_a
                .add_parts(&bytes, dir.clone(), &tail.directory_sha256, &parts[1..])
                .unwrap();
            let wb = one_b
                .add_parts(&bytes, dir.clone(), &tail.directory_sha256, &parts[..1])
                .unwrap();
            assert_eq!(
                with,
                vec![wb[0], wa[0]],
                "per source, in the callers' order"
            );
            let got = g.finish(empty).unwrap();
            assert_eq!(
                got.bytes, want.bytes,
                "positions {positions}: one pass over a run"
            );

            // Parts that overlap, or pass the run's rows, are refused.
            let mut g = Gather::new(Tokenizer::default(), positions, order.len() as u64).unwrap();
            let overlapping = [
                Part {
                    rows: 0..300,
                    to: &ta,
                },
                Part {
                    rows: 299..499,
                    to: &tb,
                },
            ];
            assert!(g
                .add_parts(&bytes, dir.clone(), &tail.directory_sha256, &overlapping)
                .is_err());
            let past = [Part {
                rows: 300..501,
                to: &tb,
            }];
            assert!(g
                .add_parts(&bytes, dir.clone(), &tail.directory_sha256, &past)
                .is_err());
        }
    }

    /// Every flipped byte of a source is an error or a carry of other postings, never a
    /// panic (a source's bytes come from the store).
    #[test]
    fn flipped_bytes_never_panic() {
        let a = docs(3, 40);
        let ba = blob(&a, true);
        let id = |p: u64| Some(p);
        for at in 0..ba.bytes.len() {
            let mut b = ba.bytes.clone();
            b[at] ^= 0x5a;
            let mut g = Gather::new(Tokenizer::default(), true, 40).unwrap();
            let _ = g
                .add(&Source {
                    blob: &b,
                    directory: ba.directory.clone(),
                    directory_sha256: &ba.directory_sha256,
                    rows: 0..40,
                    to: &id,
                })
                .and_then(|_| g.finish(0));
        }
    }

    /// A document without a token holds no posting: the caller counts it in (`empty_docs`),
    /// and a source analyzed otherwise or a damaged directory is refused.
    #[test]
    fn empty_documents_and_mismatches() {
        let a: Vec<Option<String>> = vec![
            Some("x y".into()),
            Some("".into()),
            None,
            Some("!!".into()),
            Some("y".into()),
        ];
        let ba = blob(&a, true);
        let id = |p: u64| Some(p);
        let src = Source {
            blob: &ba.bytes,
            directory: ba.directory.clone(),
            directory_sha256: &ba.directory_sha256,
            rows: 0..5,
            to: &id,
        };
        let mut g = Gather::new(Tokenizer::default(), true, 5).unwrap();
        let with = g.add(&src).unwrap();
        assert_eq!((ba.docs, with), (4, 2));
        assert_eq!(g.finish(ba.docs - with).unwrap().bytes, ba.bytes);
        let mut g = Gather::new(Tokenizer::default(), false, 5).unwrap();
        assert!(g.add(&src).is_err(), "positions differ");
        let bad = Source {
            directory_sha256: "00",
            ..src
        };
        let mut g = Gather::new(Tokenizer::default(), true, 5).unwrap();
        assert!(g.add(&bad).is_err(), "directory checksum");
        let far = |p: u64| Some(p + 5);
        let past = Source { to: &far, ..bad };
        let past = Source {
            directory_sha256: &ba.directory_sha256,
            ..past
        };
        assert!(g.add(&past).is_err(), "a row past the output");
    }
}
