//! `skerry-vector-codebook-v1` (RFC 0001): what a generation of a vector index is trained on
//! once and every partition-major blob of it is written against — the space (metric, Φ for
//! `dot`), `nlist` centroids in that space, and the 8-bit quantizer of the residuals to them.
//! One object per index generation, named with its SHA-256 by the manifest. Writer and
//! reader side by side; not yet written by builds.
//!
//! ```text
//! codebook = "SKCB" u8 version u8 metric u8 bits u8 centroid_bits
//!            u32 dim u32 space_dim u32 nlist u32 groups
//!            u64 seed u64 sample (vectors trained on) f32 phi
//!            space_dim × f32 min, space_dim × f32 scale
//!            version 1 (centroid_bits 0):
//!              nlist × space_dim × f32 centroids
//!            version 2 (centroid_bits 8 or 16; decision 62):
//!              space_dim × f32 cmin, space_dim × f32 cstep
//!              nlist × space_dim × u8|u16 levels     centroid[d] = cmin[d] + cstep[d] · level
//!            groups × space_dim × f32 group centroids
//!            if groups > 0: (groups + 1) × u32 offsets (0 ascending to nlist; group g's
//!                           centroids are offsets[g]..offsets[g + 1])
//! ```
//!
//! Version 2 stores each centroid on a per-dimension grid, and the vectors are assigned and
//! coded against the centroids *as stored*: the grid moves a centroid by at most half a step,
//! which only shifts the residuals the quantizer is fitted to. 8 bits when a step is at most
//! half the residuals' standard deviation in every dimension, else 16 — a quarter or half of
//! the f32 centroids a cold reader fetches.
//!
//! `groups` is 0 for a flat codebook (at most 256 centroids) and `⌈√nlist⌉` or fewer for a
//! two-level one ([`skerry_vector::ivf::Codebook`]: a vector is assigned among the centroids
//! of its 3 nearest groups; a query probes by scanning every centroid).
//!
//! All little-endian. A reader checks the whole object against the manifest's SHA-256 and
//! its length against the counts before allocating.

use sha2::{Digest, Sha256};
use skerry_vector::ivf::Codebook as Centroids;
use skerry_vector::{Metric, Quantizer, Space};

use super::Cur;
use crate::index::blob::{check_sha256, BlobError};

pub const MAGIC: &[u8; 4] = b"SKCB";
/// The largest codebook object a reader fetches (65,536 centroids of 1,000 dimensions).
pub const MAX_BYTES: u64 = 256 << 20;
/// The version new codebooks are written in (a version 1 object, f32 centroids, still reads).
pub const VERSION: u8 = 2;

/// Centroids on a per-dimension grid (codebook version 2): `cmin[d] + cstep[d] · level`.
#[derive(Clone, Debug, PartialEq)]
pub struct CentroidGrid {
    /// 8 or 16.
    pub bits: u8,
    pub min: Vec<f32>,
    pub step: Vec<f32>,
    /// `nlist × space_dim` levels, each below `2^bits`.
    pub levels: Vec<u16>,
}

impl CentroidGrid {
    /// A centroid component from its level: the one expression writer and readers use.
    #[inline]
    fn value(min: f32, step: f32, level: u16) -> f32 {
        min + step * f32::from(level)
    }

    /// Places `centroids` (`dim` per centroid, every one finite) on a grid of 8 bits when a
    /// step is at most half of `sd[d]` (the residuals' standard deviation) in every dimension,
    /// else 16; `None` when a dimension's span is not a finite float.
    fn fit(centroids: &[f32], dim: usize, sd: &[f64]) -> Option<CentroidGrid> {
        let mut lo = vec![f32::INFINITY; dim];
        let mut hi = vec![f32::NEG_INFINITY; dim];
        for c in centroids.chunks_exact(dim.max(1)) {
            for d in 0..dim {
                lo[d] = lo[d].min(c[d]);
                hi[d] = hi[d].max(c[d]);
            }
        }
        let span: Vec<f32> = (0..dim)
            .map(|d| if lo[d] <= hi[d] { hi[d] - lo[d] } else { 0.0 })
            .collect();
        if span.iter().chain(&lo).any(|x| !x.is_finite()) && !centroids.is_empty() {
            return None;
        }
        let fine8 = (0..dim).all(|d| f64::from(span[d] / 255.0) <= 0.5 * sd[d]);
        let (bits, top) = if fine8 {
            (8u8, 255.0f32)
        } else {
            (16, 65535.0)
        };
        let step: Vec<f32> = span.iter().map(|s| s / top).collect();
        let min: Vec<f32> = (0..dim)
            .map(|d| if lo[d].is_finite() { lo[d] } else { 0.0 })
            .collect();
        let levels = centroids
            .chunks_exact(dim.max(1))
            .flat_map(|c| {
                let (min, step) = (&min, &step);
                (0..dim).map(move |d| {
                    if step[d] > 0.0 {
                        ((c[d] - min[d]) / step[d]).round().clamp(0.0, top) as u16
                    } else {
                        0
                    }
                })
            })
            .collect();
        Some(CentroidGrid {
            bits,
            min,
            step,
            levels,
        })
    }

    /// The centroids as stored.
    fn centroids(&self) -> Vec<f32> {
        let dim = self.min.len().max(1);
        self.levels
            .iter()
            .enumerate()
            .map(|(i, l)| Self::value(self.min[i % dim], self.step[i % dim], *l))
            .collect()
    }
}

/// Code width of new codebooks (decision 54: 4-bit residual codes lose no recall@10 after
/// exact re-ranking of 64 and halve the bytes a query reads).
pub const DEFAULT_BITS: u8 = 4;

/// Code width of a new codebook for `metric`: [`DEFAULT_BITS`], but 8 for `dot`. In `dot`'s
/// space a query sits far from every vector (`|q' − x'|² = |q|² + Φ² − 2 q·x`), so a code's
/// error weighs several times more against the gaps between the best inner products: at 2M ×
/// 64, 4-bit codes need `ef` 400 for recall@10 0.98 where 8-bit codes need `ef` 50
/// (decision 63).
pub fn default_bits(metric: Metric) -> u8 {
    if metric == Metric::Dot {
        8
    } else {
        DEFAULT_BITS
    }
}

/// A codebook with its object's SHA-256: what blobs are written against and name.
#[derive(Clone, Debug, PartialEq)]
pub struct Trained {
    pub book: VectorCodebook,
    pub sha: [u8; 32],
    /// The object's bytes (what is written to the store).
    pub bytes: Vec<u8>,
}

impl Trained {
    pub fn new(book: VectorCodebook) -> Trained {
        let (bytes, sha) = book.write();
        let mut h = [0u8; 32];
        hex::decode_to_slice(&sha, &mut h).expect("a SHA-256 in hex");
        Trained {
            book,
            sha: h,
            bytes,
        }
    }

    /// The object's SHA-256 in hex.
    pub fn sha256(&self) -> String {
        hex::encode(self.sha)
    }

    /// Parses an object checked against `sha256` (hex).
    pub fn parse(bytes: &[u8], sha256: &str) -> Result<Trained, BlobError> {
        let book = VectorCodebook::parse(bytes, Some(sha256))?;
        let mut h = [0u8; 32];
        hex::decode_to_slice(sha256, &mut h)
            .map_err(|_| BlobError::Corrupt("vector codebook hash"))?;
        Ok(Trained {
            book,
            sha: h,
            bytes: bytes.to_vec(),
        })
    }

    /// Bytes it holds in memory (what a cache charges).
    pub fn heap_bytes(&self) -> u64 {
        (self.bytes.len() * 2) as u64
    }
}

/// A query's distances to the codes of one partition.
pub enum PartitionQuery {
    Bits4(skerry_vector::NibbleQuery),
    Bits8(skerry_vector::QueryCodes),
}

impl PartitionQuery {
    /// The approximate L2 distance (in the space) to a code.
    pub fn distance(&self, code: &[u8]) -> f32 {
        match self {
            PartitionQuery::Bits4(q) => q.distance(code),
            PartitionQuery::Bits8(q) => q.distance(code),
        }
    }
}

/// A trained generation of a vector index.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorCodebook {
    /// Code width: 4 or 8.
    pub bits: u8,
    pub space: Space,
    pub centroids: Centroids,
    /// Where the centroids are stored on a grid (version 2); `None`: as f32 (version 1).
    pub grid: Option<CentroidGrid>,
    /// Of the residuals to the centroids, in the space.
    pub quantizer: Quantizer,
    pub seed: u64,
    /// Vectors the centroids were trained on.
    pub sample: u64,
}

impl VectorCodebook {
    /// Trains on `sample` (`dim` floats per vector, every one finite): the space fitted to it,
    /// `nlist` centroids in the space, the `bits`-wide quantizer (4 or 8; anything else is 4)
    /// fitted to each vector's residual to its centroid.
    pub fn train(
        metric: Metric,
        dim: usize,
        sample: &[f32],
        nlist: usize,
        seed: u64,
        bits: u8,
    ) -> VectorCodebook {
        let bits = if bits == 8 { 8 } else { 4 };
        let space = Space::fit(metric, dim, sample);
        let mut mapped = Vec::with_capacity(sample.len() + sample.len() / dim.max(1));
        for v in sample.chunks_exact(dim.max(1)) {
            space.data(v, &mut mapped);
        }
        let sd = space.graph_dim();
        let mut centroids = Centroids::train(&mapped, sd, nlist, seed);
        let residuals = |centroids: &Centroids| {
            let mut out = Vec::with_capacity(mapped.len());
            for v in mapped.chunks_exact(sd.max(1)) {
                let c = centroids.assign(v) as usize;
                let at = &centroids.centroids[c * sd..(c + 1) * sd];
                out.extend(v.iter().zip(at).map(|(x, m)| x - m));
            }
            out
        };
        // The centroids go on their grid first; the quantizer is fitted to the residuals to
        // the centroids as stored, which every blob is coded against.
        let spread = std_devs(&residuals(&centroids), sd);
        let grid = CentroidGrid::fit(&centroids.centroids, sd, &spread);
        if let Some(g) = &grid {
            centroids.centroids = g.centroids();
        }
        let residuals = residuals(&centroids);
        VectorCodebook {
            grid,
            bits,
            quantizer: if bits == 8 {
                Quantizer::fit(sd, &residuals)
            } else {
                Quantizer::fit4(sd, &residuals)
            },
            space,
            centroids,
            seed,
            sample: (sample.len() / dim.max(1)) as u64,
        }
    }

    /// Bytes of a code.
    pub fn code_bytes(&self) -> usize {
        let sd = self.space.graph_dim();
        if self.bits == 8 {
            sd
        } else {
            sd.div_ceil(2)
        }
    }

    /// Appends the code of `v` (in the space) in partition `p` — its residual to the
    /// centroid, quantized — to `out`.
    pub fn encode(&self, v: &[f32], p: u32, out: &mut Vec<u8>) {
        let sd = self.space.graph_dim();
        let c = &self.centroids.centroids[p as usize * sd..(p as usize + 1) * sd];
        let r: Vec<f32> = v.iter().zip(c).map(|(x, m)| x - m).collect();
        if self.bits == 8 {
            self.quantizer.encode(&r, out);
        } else {
            self.quantizer.encode4(&r, out);
        }
    }

    /// What the distances of `q` (in the space) to partition `p`'s codes are computed with.
    pub fn query(&self, q: &[f32], p: u32) -> PartitionQuery {
        let sd = self.space.graph_dim();
        let c = &self.centroids.centroids[p as usize * sd..(p as usize + 1) * sd];
        let r: Vec<f32> = q.iter().zip(c).map(|(x, m)| x - m).collect();
        if self.bits == 8 {
            PartitionQuery::Bits8(self.quantizer.query(&r))
        } else {
            PartitionQuery::Bits4(self.quantizer.query4(&r))
        }
    }

    /// The object's bytes and their SHA-256 (hex).
    pub fn write(&self) -> (Vec<u8>, String) {
        let sd = self.space.graph_dim();
        let mut o = Vec::new();
        o.extend_from_slice(MAGIC);
        let (version, cbits) = match &self.grid {
            Some(g) => (VERSION, g.bits),
            None => (1, 0),
        };
        o.extend_from_slice(&[version, self.space.metric.code(), self.bits, cbits]);
        for v in [
            self.space.dim as u32,
            sd as u32,
            self.centroids.nlist() as u32,
            self.centroids.groups.len().saturating_sub(1) as u32,
        ] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(&self.seed.to_le_bytes());
        o.extend_from_slice(&self.sample.to_le_bytes());
        o.extend_from_slice(&self.space.phi.to_le_bytes());
        for x in self.quantizer.min.iter().chain(&self.quantizer.scale) {
            o.extend_from_slice(&x.to_le_bytes());
        }
        match &self.grid {
            None => {
                for x in &self.centroids.centroids {
                    o.extend_from_slice(&x.to_le_bytes());
                }
            }
            Some(g) => {
                for x in g.min.iter().chain(&g.step) {
                    o.extend_from_slice(&x.to_le_bytes());
                }
                for l in &g.levels {
                    if g.bits == 8 {
                        o.push(*l as u8);
                    } else {
                        o.extend_from_slice(&l.to_le_bytes());
                    }
                }
            }
        }
        for x in &self.centroids.top {
            o.extend_from_slice(&x.to_le_bytes());
        }
        for g in &self.centroids.groups {
            o.extend_from_slice(&g.to_le_bytes());
        }
        let sha = hex::encode(Sha256::digest(&o));
        (o, sha)
    }

    /// Parses an object checked against `sha256` (the manifest's) when given. Never panics;
    /// allocates only what `bytes` holds.
    pub fn parse(bytes: &[u8], sha256: Option<&str>) -> Result<VectorCodebook, BlobError> {
        check_sha256(bytes, sha256, "vector codebook")?;
        let mut c = Cur { b: bytes, at: 0 };
        if c.take(4)? != MAGIC {
            return Err(BlobError::Corrupt("not a vector codebook"));
        }
        let head = c.take(4)?;
        let cbits = match (head[0], head[3]) {
            (1, 0) => 32u64,
            (2, b @ (8 | 16)) => u64::from(b),
            (1 | 2, _) => return Err(BlobError::Corrupt("vector codebook centroid width")),
            _ => return Err(BlobError::Corrupt("vector codebook version")),
        };
        let metric =
            Metric::from_code(head[1]).ok_or(BlobError::Corrupt("vector codebook metric"))?;
        let bits = head[2];
        if !matches!(bits, 4 | 8) {
            return Err(BlobError::Corrupt("vector codebook code width"));
        }
        let (dim, sd, nlist) = (c.u32()? as u64, c.u32()? as u64, c.u32()? as u64);
        let groups = c.u32()? as u64;
        let (seed, sample, phi) = (c.u64()?, c.u64()?, c.f32()?);
        let want_sd = dim + u64::from(metric == Metric::Dot);
        // f32 vectors besides the centroids: min and scale, the grid's cmin and cstep, the
        // group centroids; then the centroids at `cbits` a component, then the offsets.
        let vectors = if cbits == 32 { 2 } else { 4 };
        let floats = groups.checked_add(vectors).and_then(|n| n.checked_mul(sd));
        let centroid_bytes = nlist.checked_mul(sd).and_then(|n| n.checked_mul(cbits / 8));
        let offsets = if groups == 0 { 0 } else { groups + 1 };
        let len = floats
            .and_then(|f| f.checked_add(offsets))
            .and_then(|f| f.checked_mul(4))
            .and_then(|f| f.checked_add(centroid_bytes?));
        if sd != want_sd || groups > nlist || len != Some((bytes.len() - c.at) as u64) {
            return Err(BlobError::Corrupt("vector codebook length"));
        }
        let sd = sd as usize;
        let f = |c: &mut Cur, n: usize| -> Result<Vec<f32>, BlobError> {
            (0..n).map(|_| c.f32()).collect()
        };
        let min = f(&mut c, sd)?;
        let scale = f(&mut c, sd)?;
        let (grid, centroids) = if cbits == 32 {
            (None, f(&mut c, nlist as usize * sd)?)
        } else {
            let gmin = f(&mut c, sd)?;
            let step = f(&mut c, sd)?;
            if gmin.iter().any(|x| !x.is_finite())
                || step.iter().any(|x| !x.is_finite() || *x < 0.0)
            {
                return Err(BlobError::Corrupt("vector codebook centroid grid"));
            }
            let raw = c.take(nlist as usize * sd * (cbits / 8) as usize)?;
            let levels: Vec<u16> = if cbits == 8 {
                raw.iter().map(|b| u16::from(*b)).collect()
            } else {
                raw.chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                    .collect()
            };
            let g = CentroidGrid {
                bits: cbits as u8,
                min: gmin,
                step,
                levels,
            };
            let centroids = g.centroids();
            (Some(g), centroids)
        };
        let top = f(&mut c, groups as usize * sd)?;
        let offsets: Vec<u32> = (0..offsets).map(|_| c.u32()).collect::<Result<_, _>>()?;
        if !offsets.is_empty()
            && (offsets[0] != 0
                || offsets.last() != Some(&(nlist as u32))
                || offsets.windows(2).any(|w| w[0] >= w[1]))
        {
            return Err(BlobError::Corrupt("vector codebook groups"));
        }
        Ok(VectorCodebook {
            bits,
            space: Space {
                metric,
                dim: dim as usize,
                phi,
            },
            centroids: Centroids {
                dim: sd,
                centroids,
                top,
                groups: offsets,
            },
            grid,
            quantizer: Quantizer { min, scale },
            seed,
            sample,
        })
    }
}

/// Each dimension's standard deviation over `v` (`dim` per vector), summed in f64 in order.
fn std_devs(v: &[f32], dim: usize) -> Vec<f64> {
    let mut sum = vec![0f64; dim];
    let mut sq = vec![0f64; dim];
    let n = v.len().checked_div(dim).unwrap_or(0);
    for x in v.chunks_exact(dim.max(1)) {
        for d in 0..dim {
            let y = f64::from(x[d]);
            sum[d] += y;
            sq[d] += y * y;
        }
    }
    (0..dim)
        .map(|d| {
            if n == 0 {
                return 0.0;
            }
            let m = sum[d] / n as f64;
            (sq[d] / n as f64 - m * m).max(0.0).sqrt()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim)
            .map(|i| ((i * 7919 % 1000) as f32) / 100.0 - 5.0)
            .collect()
    }

    #[test]
    fn trains_writes_and_reads_back_every_metric() {
        for (metric, bits) in [(Metric::L2, 4), (Metric::Cosine, 8), (Metric::Dot, 4)] {
            let v = sample(500, 6);
            let a = VectorCodebook::train(metric, 6, &v, 12, 3, bits);
            assert_eq!(
                a,
                VectorCodebook::train(metric, 6, &v, 12, 3, bits),
                "deterministic"
            );
            assert_eq!(a.bits, bits);
            // A code's distance approximates the exact one in the space.
            let sd = a.space.graph_dim();
            let mut x = Vec::new();
            a.space.data(&v[..6], &mut x);
            let p = a.centroids.assign(&x);
            let mut code = Vec::new();
            a.encode(&x, p, &mut code);
            assert_eq!(code.len(), a.code_bytes());
            assert_eq!(code.len(), if bits == 8 { sd } else { sd.div_ceil(2) });
            let q = a.space.query(&v[6..12]);
            let approx = a.query(&q, p).distance(&code);
            let exact = skerry_vector::l2(&q, &x);
            assert!(
                (approx - exact).abs() <= 0.2 * exact + 0.5,
                "{approx} vs {exact}"
            );
            assert_eq!((a.centroids.nlist(), a.sample), (12, 500));
            assert_eq!(a.centroids.dim, 6 + usize::from(metric == Metric::Dot));
            let (bytes, sha) = a.write();
            assert_eq!(VectorCodebook::parse(&bytes, Some(&sha)).unwrap(), a);
        }
    }

    #[test]
    fn centroids_sit_on_a_grid_of_8_or_16_bits_and_version_1_still_reads() {
        // 3,000 distinct points (`sample` repeats itself: every centroid would be a point).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let v: Vec<f32> = (0..3_000 * 4)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 * 10.0 - 5.0
            })
            .collect();
        let a = VectorCodebook::train(Metric::L2, 4, &v, 300, 8, 4);
        let g = a.grid.as_ref().expect("version 2");
        assert_eq!(g.bits, 8, "steps small beside the residuals");
        // The centroids vectors are assigned to are the stored ones, and the grid is within
        // half a step of what k-means found.
        assert_eq!(a.centroids.centroids, g.centroids());
        let (bytes, sha) = a.write();
        assert_eq!(bytes[4], 2);
        assert_eq!(bytes[7], 8);
        let parsed = VectorCodebook::parse(&bytes, Some(&sha)).unwrap();
        assert_eq!(parsed, a);
        // A quarter of the f32 centroids' bytes (plus the grid's two vectors).
        let v1 = VectorCodebook {
            grid: None,
            ..a.clone()
        };
        let (old, old_sha) = v1.write();
        assert_eq!((old[4], old[7]), (1, 0));
        assert_eq!(
            old.len() - bytes.len(),
            a.centroids.centroids.len() * 3 - 2 * 4 * 4
        );
        assert_eq!(VectorCodebook::parse(&old, Some(&old_sha)).unwrap(), v1);
        // A width other than 8 or 16, or a grid width on version 1: refused.
        for (at, b) in [(7usize, 12u8), (7, 0), (4, 3)] {
            let mut bad = bytes.clone();
            bad[at] = b;
            assert!(VectorCodebook::parse(&bad, None).is_err(), "{at} {b}");
        }
        let mut bad = old.clone();
        bad[7] = 8;
        assert!(VectorCodebook::parse(&bad, None).is_err());
        // A dimension whose centroids span far more than its residuals spread: 16 bits, and

        let mut wide = Vec::new();
        for (i, x) in v.chunks_exact(4).enumerate() {
            let far = (i % 3) as f32 * 100.0 + (i % 7) as f32 * 1e-3;
            wide.extend_from_slice(&[x[0], far, x[2], x[3]]);
        }
        let w = VectorCodebook::train(Metric::L2, 4, &wide, 12, 8, 4);
        let g = w.grid.as_ref().unwrap();
        assert_eq!(g.bits, 16);
        assert!(g.step[1] <= 200.0 / 65535.0 + 1e-6, "{:?}", g.step);
        let (bytes, sha) = w.write();
        assert_eq!(VectorCodebook::parse(&bytes, Some(&sha)).unwrap(), w);
    }

    #[test]
    fn two_level_codebooks_round_trip_and_refuse_damage() {
        let v = sample(3_000, 4);
        let a = VectorCodebook::train(Metric::L2, 4, &v, 300, 8, 4);
        assert!(a.centroids.groups.len() > 2, "two-level");
        assert_eq!(a.centroids.top.len(), (a.centroids.groups.len() - 1) * 4);
        let (bytes, sha) = a.write();
        assert_eq!(VectorCodebook::parse(&bytes, Some(&sha)).unwrap(), a);
        // Offsets out of order, or not ending at nlist: refused even without a checksum.
        let offsets = bytes.len() - a.centroids.groups.len() * 4;
        let mut bad = bytes.clone();
        bad[offsets + 4..offsets + 8].copy_from_slice(&0u32.to_le_bytes());
        assert!(VectorCodebook::parse(&bad, None).is_err());
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(VectorCodebook::parse(&bad, None).is_err());
        // A group count larger than nlist.
        let mut bad = bytes.clone();
        bad[20..24].copy_from_slice(&1_000u32.to_le_bytes());
        assert!(VectorCodebook::parse(&bad, None).is_err());
    }

    #[test]
    fn refuses_damage_without_panicking() {
        let (bytes, sha) = VectorCodebook::train(Metric::L2, 4, &sample(100, 4), 5, 1, 8).write();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(VectorCodebook::parse(&bad, Some(&sha)).is_err(), "byte {i}");
            let _ = VectorCodebook::parse(&bad, None);
        }
        for n in 0..bytes.len() {
            assert!(
                VectorCodebook::parse(&bytes[..n], None).is_err(),
                "length {n}"
            );
        }
        // A count that claims more than the object holds.
        let mut big = bytes.clone();
        big[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(VectorCodebook::parse(&big, None).is_err());
    }
}
