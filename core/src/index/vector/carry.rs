//! Carrying a vector index over a move (RFC 0006 step 3, decision 76): an output file's
//! partition-major blob written from its source files' entries — read from their per-file
//! blobs or from the table run that holds them — each entry keeping its partition, code and
//! raw vector, its position mapped to the output's. Nothing is assigned or coded: a move does
//! not change a vector, and the codebook is the index's.
//!
//! The result is the blob [`super::write`] writes from the output's vectors, byte for byte,
//! when the move is honest and every source was coded against the same codebook (checked:
//! a source of another codebook, metric, width or dimension is refused).

use super::ivf::{self, Codes, IvfBlob, RunWriter};
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
    // Sources held by the same blob (a run) share its directory and are scanned in one pass
    // over its partitions — each partition's CRC-32 checked once, not once per source
    // (decision 81). `dir_of[k]`: source `k`'s directory in `dirs`.
    let mut dirs: Vec<ivf::IvfDirectory> = Vec::new();
    let mut dir_of = vec![usize::MAX; sources.len()];
    for first in 0..sources.len() {
        if dir_of[first] != usize::MAX {
            continue;
        }
        let a = &sources[first];
        let d = ivf::directory_of(a.blob, Some(a.directory_sha256))?;
        if d.codes != *c {
            return Err(BlobError::Corrupt("a source coded otherwise"));
        }
        // The group's sources by ordinal.
        let mut group: Vec<(u32, usize)> = Vec::new();
        for (k, s) in sources.iter().enumerate().skip(first) {
            if dir_of[k] == usize::MAX
                && std::ptr::eq(s.blob, a.blob)
                && s.directory_sha256 == a.directory_sha256
            {
                dir_of[k] = dirs.len();
                group.push((s.ordinal, k));
            }
        }
        group.sort_unstable();
        for p in &d.partitions {
            let r = d.codes_range(p);
            let bytes = a
                .blob
                .get(r.start as usize..r.end as usize)
                .ok_or(BlobError::Corrupt("partition outside the blob"))?;
            let mut first = p.first;
            let entry_len = c.code_bytes + 4;
            for run in d.file_runs(p, bytes)? {
                let at = group.partition_point(|g| g.0 < run.ordinal);
                for &(_, k) in group[at..].iter().take_while(|g| g.0 == run.ordinal) {
                    let to = sources[k].to;
                    for (j, e) in bytes[run.bytes.clone()].chunks_exact(entry_len).enumerate() {
                        let position =
                            u32::from_le_bytes(e[c.code_bytes..].try_into().expect("4 bytes"));
                        if let Some(out) = to(u64::from(position)) {
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
    // Each output row once, whatever partition its entries came in.
    let mut seen = vec![0u64; (rows as usize).div_ceil(64)];
    for g in &got {
        let (w, b) = (g.1 as usize / 64, 1u64 << (g.1 % 64));
        if seen[w] & b != 0 {
            return Err(BlobError::Corrupt("a row moved twice"));
        }
        seen[w] |= b;
    }
    // Written as a run of one file (ordinal 0), which is a per-file blob's layout: each
    // partition's codes and positions, then the raw vectors copied as the sources hold them
    // (floats and CRC-32, checked as they pass).
    let raw_len = c.dim * 4 + 4;
    let mut out = Vec::with_capacity(got.len() * (c.code_bytes + 4 + raw_len) + 1024);
    let mut w = RunWriter::new(*c);
    let mut entries = Vec::new();
    let mut k = 0;
    while k < got.len() {
        let id = got[k].0;
        entries.clear();
        while k < got.len() && got[k].0 == id {
            let (_, position, s, i) = got[k];
            entries.extend_from_slice(code_of(sources[s].blob, &dirs[dir_of[s]], i)?);
            entries.extend_from_slice(&position.to_le_bytes());
            k += 1;
        }
        out.extend_from_slice(&w.partition(id, &[(0, &entries)])?);
    }
    for &(_, _, s, i) in &got {
        let r = dirs[dir_of[s]].raw_range(i);
        let raw = sources[s]
            .blob
            .get(r.start as usize..r.end as usize)
            .ok_or(BlobError::Corrupt("raw vector outside the blob"))?;
        w.raws(raw)?;
        out.extend_from_slice(raw);
    }
    let tail = w.finish()?;
    out.extend_from_slice(&tail.bytes);
    Ok(IvfBlob { bytes: out, ..tail })
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
        // The same rows twice (a source listed twice): refused.
        let twice = [
            Source { ..src },
            Source {
                blob: &ba.bytes,
                directory_sha256: &ba.directory_sha256,
                ordinal: 0,
                to: &first,
            },
        ];
        assert!(carry(&c, 100, &twice).is_err());
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
