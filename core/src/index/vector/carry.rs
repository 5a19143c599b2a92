//! Carrying a vector index over a move (RFC 0006 step 3, decision 76): an output file's
//! partition-major blob written from its source files' entries — read from their per-file
//! blobs or from the table run that holds them — each entry keeping its partition, code and
//! raw vector, its position mapped to the output's. Nothing is assigned or coded: a move does
//! not change a vector, and the codebook is the index's.
//!
//! The result is the blob [`super::write`] writes from the output's vectors, byte for byte,
//! when the move is honest and every source was coded against the same codebook (checked:
//! a source of another codebook, metric, width or dimension is refused).

use super::ivf::{self, Codes, Entry, IvfBlob};
use crate::index::blob::BlobError;

/// One source file of a move, as the blob holding its entries has them.
pub struct Source<'a> {
    /// The source's per-file blob, or the table run covering it, whole.
    pub blob: &'a [u8],
    /// The directory's SHA-256 as the manifest (or run record) has it.
    pub directory_sha256: &'a str,
    /// The source file's ordinal in the blob: 0 in a per-file blob, its place in a run's
    /// file table.
    pub ordinal: u32,
    /// Where row `position` of the source file went in the output; `None` for a row that is
    /// not in this output.
    pub to: &'a dyn Fn(u64) -> Option<u64>,
}

/// The blob of an output of `rows` rows from `sources`, against codes `c` (the index's).
/// Errors: a source's blob does not decode or fails a checksum, was coded otherwise, or a
/// row maps past the output or twice.
pub fn carry(c: &Codes, rows: u64, sources: &[Source<'_>]) -> Result<IvfBlob, BlobError> {
    // (partition, output position, source, entry index)
    let mut got: Vec<(u32, u32, usize, u64)> = Vec::new();
    let mut dirs = Vec::with_capacity(sources.len());
    for (k, s) in sources.iter().enumerate() {
        let d = ivf::directory_of(s.blob, Some(s.directory_sha256))?;
        if d.codes != *c {
            return Err(BlobError::Corrupt("a source coded otherwise"));
        }
        for p in &d.partitions {
            let r = d.codes_range(p);
            let bytes = s
                .blob
                .get(r.start as usize..r.end as usize)
                .ok_or(BlobError::Corrupt("partition outside the blob"))?;
            let mut first = p.first;
            let entry_len = c.code_bytes + 4;
            for run in d.file_runs(p, bytes)? {
                if run.ordinal == s.ordinal {
                    for (j, e) in bytes[run.bytes.clone()].chunks_exact(entry_len).enumerate() {
                        let position =
                            u32::from_le_bytes(e[c.code_bytes..].try_into().expect("4 bytes"));
                        if let Some(out) = (s.to)(u64::from(position)) {
                            if out >= rows || out > u64::from(u32::MAX) {
                                return Err(BlobError::Corrupt("a row mapped past the output"));
                            }
                            got.push((p.id, out as u32, k, first + j as u64));
                        }
                    }
                }
                first += u64::from(run.entries);
            }
        }
        dirs.push(d);
    }
    got.sort_unstable_by_key(|g| (g.0, g.1));
    if got.windows(2).any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1)) {
        return Err(BlobError::Corrupt("a row moved twice"));
    }
    let mut raws = Vec::with_capacity(got.len());
    let mut codes = Vec::with_capacity(got.len() * c.code_bytes);
    for &(_, _, k, i) in &got {
        let (s, d) = (&sources[k], &dirs[k]);
        let r = d.raw_range(i);
        let raw = s
            .blob
            .get(r.start as usize..r.end as usize)
            .ok_or(BlobError::Corrupt("raw vector outside the blob"))?;
        raws.push(d.raw(raw)?);
        // The entry's code: its partition's bytes, after the file runs, at its place.
        codes.extend_from_slice(code_of(s.blob, d, i)?);
    }
    let entries: Vec<Entry<'_>> = got
        .iter()
        .zip(&raws)
        .enumerate()
        .map(|(n, (g, raw))| Entry {
            partition: g.0,
            ordinal: 0,
            position: g.1,
            code: &codes[n * c.code_bytes..(n + 1) * c.code_bytes],
            raw,
        })
        .collect();
    ivf::write(c, &entries)
}

/// The code of entry `i` of a blob with directory `d`.
fn code_of<'b>(blob: &'b [u8], d: &ivf::IvfDirectory, i: u64) -> Result<&'b [u8], BlobError> {
    let at = d.partitions.partition_point(|p| p.first <= i);
    let p = at
        .checked_sub(1)
        .map(|a| &d.partitions[a])
        .filter(|p| i < p.first + u64::from(p.entries))
        .ok_or(BlobError::Corrupt("no such entry"))?;
    let entry_len = (d.codes.code_bytes + 4) as u64;
    let start = p.offset + u64::from(p.runs) * 8 + (i - p.first) * entry_len;
    blob.get(start as usize..start as usize + d.codes.code_bytes)
        .ok_or(BlobError::Corrupt("code outside the blob"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::vector::codebook::{Trained, VectorCodebook};
    use skerry_vector::Metric;

    fn vectors(seed: u64, n: u64, dim: usize) -> Vec<(u64, Option<Vec<f32>>)> {
        let mut x = seed;
        (0..n)
            .map(|p| {
                let v: Vec<f32> = (0..dim)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((x >> 40) % 1000) as f32 / 100.0
                    })
                    .collect();
                (p, (p % 13 != 5).then_some(v))
            })
            .collect()
    }

    /// Two sources shuffled into one output: the carried blob is the blob written from the
    /// output's vectors, byte for byte; a source coded against another codebook is refused.
    #[test]
    fn a_carried_blob_is_the_written_one() {
        let dim = 8;
        let (a, b) = (vectors(3, 400, dim), vectors(5, 250, dim));
        let sample: Vec<f32> = a
            .iter()
            .chain(&b)
            .filter_map(|v| v.1.clone())
            .flatten()
            .collect();
        let book = Trained::new(VectorCodebook::train(Metric::L2, dim, &sample, 16, 9, 4));
        let blob = |vs: &[(u64, Option<Vec<f32>>)]| {
            super::super::write(Metric::L2, Some(&book), vs).unwrap().0
        };
        // Output: B's rows, then A's odd rows reversed, then A's even rows.
        let mut order: Vec<(usize, u64)> = (0..250).map(|p| (1, p)).collect();
        order.extend((1..400u32).step_by(2).rev().map(|p| (0, u64::from(p))));
        order.extend((0..400).step_by(2).map(|p| (0, p)));
        let src = [&a, &b];
        let out: Vec<(u64, Option<Vec<f32>>)> = order
            .iter()
            .enumerate()
            .map(|(i, (s, p))| (i as u64, src[*s][*p as usize].1.clone()))
            .collect();
        let want = blob(&out);
        let to_of = |s: usize| {
            let order = order.clone();
            move |p: u64| order.iter().position(|o| *o == (s, p)).map(|i| i as u64)
        };
        let (ta, tb) = (to_of(0), to_of(1));
        let (ba, bb) = (blob(&a), blob(&b));
        let c = ivf::directory_of(&want.bytes, None).unwrap().codes;
        let got = carry(
            &c,
            order.len() as u64,
            &[
                Source {
                    blob: &ba.bytes,
                    directory_sha256: &ba.directory_sha256,
                    ordinal: 0,
                    to: &ta,
                },
                Source {
                    blob: &bb.bytes,
                    directory_sha256: &bb.directory_sha256,
                    ordinal: 0,
                    to: &tb,
                },
            ],
        )
        .unwrap();
        assert_eq!(got.bytes, want.bytes);
        // Only A's first 100 rows, to an output of 100.
        let first = |p: u64| (p < 100).then_some(p);
        let part = carry(
            &c,
            100,
            &[Source {
                blob: &ba.bytes,
                directory_sha256: &ba.directory_sha256,
                ordinal: 0,
                to: &first,
            }],
        )
        .unwrap();
        assert_eq!(part.bytes, blob(&a[..100]).bytes);
        // Refusals: another codebook, a wrong directory checksum, a row past the output.
        let other = Codes {
            codebook: [7; 32],
            ..c
        };
        let src = Source {
            blob: &ba.bytes,
            directory_sha256: &ba.directory_sha256,
            ordinal: 0,
            to: &first,
        };
        assert!(carry(&other, 100, std::slice::from_ref(&src)).is_err());
        assert!(carry(&c, 50, std::slice::from_ref(&src)).is_err());
        let bad = Source {
            directory_sha256: "00",
            ..src
        };
        assert!(carry(&c, 100, &[bad]).is_err());
        // Every flipped byte is an error or a carry, never a panic.
        let small = blob(&a[..30]);
        for at in 0..small.bytes.len() {
            let mut b = small.bytes.clone();
            b[at] ^= 0x5a;
            let _ = carry(
                &c,
                30,
                &[Source {
                    blob: &b,
                    directory_sha256: &small.directory_sha256,
                    ordinal: 0,
                    to: &|p| Some(p),
                }],
            );
        }
    }
}
