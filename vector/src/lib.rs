//! # skerry-vector
//!
//! The arithmetic of Skerry's vector index (`docs/vector-index.md`), apart from any byte
//! layout or I/O so it can be compiled optimized in every profile (tests train and assign
//! 200,000 vectors):
//!
//! - [`Metric`] and [`exact`]: the distances results are ranked by, summed in a fixed lane
//!   order so every target computes the same bits;
//! - [`Space`]: the index's space. Every metric is searched as L2 in a transformed space —
//!   cosine over unit vectors, dot over vectors augmented with `sqrt(Φ² − |x|²)` (Φ the
//!   largest norm of the file), whose L2 order is the inner product's;
//! - [`Quantizer`]: per-dimension offset and scale, 8 bits ([`QueryCodes`]) or 4 bits over
//!   ±2.5σ ([`NibbleQuery`], a table per code byte);
//! - [`ivf`]: the coarse level (RFC 0001): a k-means [`ivf::Codebook`], two-level above 256
//!   centroids, that assigns vectors to partitions and orders them for a query.
//!
//! The public functions are deliberately not `#[inline]`: an inline function is compiled in
//! the crate that calls it, at that crate's optimization level, so callers in unoptimized
//! profiles would run the kernels unoptimized (decision 45).
//!
//! Nothing here panics on any input the reader can produce from a checked blob.

pub mod ivf;

/// How two vectors' distance is measured. Smaller is nearer for every metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Squared Euclidean distance.
    L2,
    /// `1 − cos(a, b)`; 1 when either vector is all zeros.
    Cosine,
    /// `−(a · b)`.
    Dot,
}

impl Metric {
    pub fn code(self) -> u8 {
        match self {
            Metric::L2 => 0,
            Metric::Cosine => 1,
            Metric::Dot => 2,
        }
    }

    pub fn from_code(c: u8) -> Option<Metric> {
        match c {
            0 => Some(Metric::L2),
            1 => Some(Metric::Cosine),
            2 => Some(Metric::Dot),
            _ => None,
        }
    }
}

const LANES: usize = 8;

/// `Σ aᵢ·bᵢ`, eight lanes then a fixed pairwise sum: the same bits on every target.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    reduce(acc) + tail
}

/// `Σ (aᵢ − bᵢ)²`, summed like [`dot`].
pub fn l2(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..LANES {
            let d = x[l] - y[l];
            acc[l] += d * d;
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        let d = x - y;
        tail += d * d;
    }
    reduce(acc) + tail
}

#[inline]
fn reduce(a: [f32; LANES]) -> f32 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// The distance results are ranked by (see [`Metric`]).
pub fn exact(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    match metric {
        Metric::L2 => l2(a, b),
        Metric::Dot => -dot(a, b),
        Metric::Cosine => {
            let (na, nb) = (dot(a, a), dot(b, b));
            if na == 0.0 || nb == 0.0 {
                1.0
            } else {
                1.0 - dot(a, b) / (na.sqrt() * nb.sqrt())
            }
        }
    }
}

/// Whether every component is finite (a vector with a NaN or an infinity is never indexed
/// and never a neighbour).
pub fn finite(v: &[f32]) -> bool {
    v.iter().all(|x| x.is_finite())
}

/// The space a file's graph lives in: the metric's transform into L2.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Space {
    pub metric: Metric,
    /// Dimensions of the data.
    pub dim: usize,
    /// Dot only: the largest norm of the file's vectors (Φ).
    pub phi: f32,
}

impl Space {
    /// The space of `vectors` (`dim` floats each) under `metric`.
    pub fn fit(metric: Metric, dim: usize, vectors: &[f32]) -> Space {
        let phi = match metric {
            Metric::Dot => vectors
                .chunks_exact(dim.max(1))
                .map(|v| dot(v, v))
                .fold(0f32, f32::max)
                .sqrt(),
            _ => 0.0,
        };
        Space { metric, dim, phi }
    }

    /// Dimensions of the graph's vectors.
    pub fn graph_dim(&self) -> usize {
        self.dim + usize::from(self.metric == Metric::Dot)
    }

    /// A data vector in the graph's space, appended to `out`.
    pub fn data(&self, v: &[f32], out: &mut Vec<f32>) {
        match self.metric {
            Metric::L2 => out.extend_from_slice(v),
            Metric::Cosine => {
                let n = dot(v, v).sqrt();
                if n == 0.0 {
                    out.extend(v.iter().map(|_| 0.0));
                } else {
                    out.extend(v.iter().map(|x| x / n));
                }
            }
            Metric::Dot => {
                out.extend_from_slice(v);
                let rest = self.phi * self.phi - dot(v, v);
                out.push(rest.max(0.0).sqrt());
            }
        }
    }

    /// A query vector in the graph's space.
    pub fn query(&self, q: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.graph_dim());
        match self.metric {
            Metric::Dot => {
                out.extend_from_slice(q);
                out.push(0.0);
            }
            _ => self.data(q, &mut out),
        }
        out
    }
}

/// 8-bit scalar quantization: component `d` of a vector is `min[d] + scale[d] · code[d]`,
/// `scale[d] = (max[d] − min[d]) / 255` over the file's (graph-space) vectors.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantizer {
    pub min: Vec<f32>,
    pub scale: Vec<f32>,
}

impl Quantizer {
    pub fn fit(dim: usize, vectors: &[f32]) -> Quantizer {
        let mut lo = vec![f32::INFINITY; dim];
        let mut hi = vec![f32::NEG_INFINITY; dim];
        for v in vectors.chunks_exact(dim.max(1)) {
            for d in 0..dim {
                lo[d] = lo[d].min(v[d]);
                hi[d] = hi[d].max(v[d]);
            }
        }
        let mut scale = vec![0f32; dim];
        for d in 0..dim {
            if !lo[d].is_finite() {
                lo[d] = 0.0;
                hi[d] = 0.0;
            }
            scale[d] = (hi[d] - lo[d]) / 255.0;
            if !scale[d].is_finite() {
                scale[d] = 0.0;
            }
        }
        Quantizer { min: lo, scale }
    }

    /// The codes of `v`, appended to `out`.
    pub fn encode(&self, v: &[f32], out: &mut Vec<u8>) {
        for (d, x) in v.iter().enumerate() {
            let s = self.scale[d];
            let c = if s > 0.0 {
                ((x - self.min[d]) / s).round().clamp(0.0, 255.0)
            } else {
                0.0
            };
            out.push(c as u8);
        }
    }

    /// What a query's distances to codes are computed with.
    pub fn query(&self, q: &[f32]) -> QueryCodes {
        let dim = self.min.len();
        let mut w = vec![0f32; dim];
        let mut t = vec![0f32; dim];
        let mut c = 0f32;
        for d in 0..dim {
            let s = self.scale[d];
            let x = q.get(d).copied().unwrap_or(0.0) - self.min[d];
            if s > 0.0 {
                w[d] = s * s;
                t[d] = x / s;
            } else {
                c += x * x;
            }
        }
        QueryCodes { w, t, c }
    }
}

/// Standard deviations either side of a dimension's mean that 4-bit codes cover (decision
/// 54: residuals to a centroid cluster near 0, so 16 levels over ±2.5σ lose less than 16
/// over the full range an outlier stretches).
pub const NIBBLE_CLIP: f64 = 2.5;

impl Quantizer {
    /// A 4-bit quantizer of `vectors`: per dimension 16 levels over mean ± [`NIBBLE_CLIP`] σ,
    /// sums in f64 in order (the same bits on every target). Values outside clamp.
    pub fn fit4(dim: usize, vectors: &[f32]) -> Quantizer {
        let n = vectors.len().checked_div(dim).unwrap_or(0);
        let mut mean = vec![0f64; dim];
        let mut sq = vec![0f64; dim];
        for v in vectors.chunks_exact(dim.max(1)) {
            for d in 0..dim {
                let x = f64::from(v[d]);
                mean[d] += x;
                sq[d] += x * x;
            }
        }
        let mut min = vec![0f32; dim];
        let mut scale = vec![0f32; dim];
        if n > 0 {
            for d in 0..dim {
                let m = mean[d] / n as f64;
                let sd = (sq[d] / n as f64 - m * m).max(0.0).sqrt();
                let (lo, s) = (
                    (m - NIBBLE_CLIP * sd) as f32,
                    (2.0 * NIBBLE_CLIP * sd / 15.0) as f32,
                );
                if lo.is_finite() && s.is_finite() {
                    min[d] = lo;
                    scale[d] = s;
                }
            }
        }
        Quantizer { min, scale }
    }

    /// The 4-bit codes of `v`, two dimensions a byte (dimension `2j` in the low nibble),
    /// `⌈dim/2⌉` bytes appended to `out`.
    pub fn encode4(&self, v: &[f32], out: &mut Vec<u8>) {
        let level = |d: usize| -> u8 {
            let (s, x) = (self.scale[d], v.get(d).copied().unwrap_or(0.0));
            if s > 0.0 {
                ((x - self.min[d]) / s).round().clamp(0.0, 15.0) as u8
            } else {
                0
            }
        };
        let dim = self.min.len();
        for j in 0..dim.div_ceil(2) {
            let hi = if 2 * j + 1 < dim { level(2 * j + 1) } else { 0 };
            out.push(level(2 * j) | hi << 4);
        }
    }

    /// What a query's distances to 4-bit codes are computed with: a table of each byte's 256
    /// values per byte position.
    pub fn query4(&self, q: &[f32]) -> NibbleQuery {
        let dim = self.min.len();
        let mut c = 0f32;
        let part = |d: usize, level: u8| -> f32 {
            let x = q.get(d).copied().unwrap_or(0.0) - self.min[d];
            let s = self.scale[d];
            if s > 0.0 {
                let e = x - s * f32::from(level);
                e * e
            } else {
                0.0
            }
        };
        for d in 0..dim {
            if self.scale[d] <= 0.0 {
                let x = q.get(d).copied().unwrap_or(0.0) - self.min[d];
                c += x * x;
            }
        }
        let bytes = dim.div_ceil(2);
        let mut table = vec![[0f32; 256]; bytes];
        for (j, t) in table.iter_mut().enumerate() {
            let mut lo = [0f32; 16];
            let mut hi = [0f32; 16];
            for l in 0..16u8 {
                lo[l as usize] = part(2 * j, l);
                hi[l as usize] = if 2 * j + 1 < dim {
                    part(2 * j + 1, l)
                } else {
                    0.0
                };
            }
            // Byte `b` = `h << 4 | l`: row `h` is `lo` shifted by `hi[h]` (vectorizes).
            for (h, row) in t.chunks_exact_mut(16).enumerate() {
                for (t, l) in row.iter_mut().zip(&lo) {
                    *t = l + hi[h];
                }
            }
        }
        NibbleQuery { table, c }
    }
}

/// A query against 4-bit codes: `c + Σ table[j][code[j]]` approximates the L2 distance.
#[derive(Clone, Debug)]
pub struct NibbleQuery {
    /// Per code byte, its 256 values.
    table: Vec<[f32; 256]>,
    c: f32,
}

impl NibbleQuery {
    pub fn distance(&self, code: &[u8]) -> f32 {
        let mut acc = [0f32; LANES];
        let n = code.len().min(self.table.len());
        // Byte `j` looks up row `j`, a 256-value array: no index is checked in the loop.
        let mut codes = code[..n].chunks_exact(LANES);
        let mut rows = self.table[..n].chunks_exact(LANES);
        for (c, t) in (&mut codes).zip(&mut rows) {
            for l in 0..LANES {
                acc[l] += t[l][c[l] as usize];
            }
        }
        let mut tail = 0f32;
        for (b, t) in codes.remainder().iter().zip(rows.remainder()) {
            tail += t[*b as usize];
        }
        self.c + reduce(acc) + tail
    }
}

/// A query against 8-bit codes: `c + Σ w[d]·(t[d] − code[d])²` approximates the L2
/// distance in the graph's space.
#[derive(Clone, Debug)]
pub struct QueryCodes {
    w: Vec<f32>,
    t: Vec<f32>,
    c: f32,
}

impl QueryCodes {
    pub fn distance(&self, code: &[u8]) -> f32 {
        let n = code.len().min(self.w.len());
        let (w, t, code) = (&self.w[..n], &self.t[..n], &code[..n]);
        let mut acc = [0f32; LANES];
        let mut cw = w.chunks_exact(LANES);
        let mut ct = t.chunks_exact(LANES);
        let mut cc = code.chunks_exact(LANES);
        for ((w, t), c) in (&mut cw).zip(&mut ct).zip(&mut cc) {
            for l in 0..LANES {
                let d = t[l] - c[l] as f32;
                acc[l] += w[l] * d * d;
            }
        }
        let mut tail = 0f32;
        for ((w, t), c) in cw
            .remainder()
            .iter()
            .zip(ct.remainder())
            .zip(cc.remainder())
        {
            let d = t - *c as f32;
            tail += w * d * d;
        }
        self.c + reduce(acc) + tail
    }
}

/// `x`'s bits turned so that unsigned order is [`f32::total_cmp`]'s order (negative values
/// flipped whole, the others' sign bit set).
#[inline]
pub fn ordered_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_bits_order_like_total_cmp() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            1.0000001,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
            -f32::NAN,
        ];
        for a in xs {
            for b in xs {
                assert_eq!(
                    ordered_bits(a).cmp(&ordered_bits(b)),
                    a.total_cmp(&b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut next = || {
            s = splitmix(s);
            (s >> 11) as f32 / (1u64 << 53) as f32
        };
        let centres: Vec<f32> = (0..16 * dim).map(|_| next() * 10.0 - 5.0).collect();
        let mut v = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let c = (next() * 16.0) as usize % 16;
            for d in 0..dim {
                v.push(centres[c * dim + d] + (next() - 0.5));
            }
        }
        v
    }

    #[test]
    fn distances_follow_their_definitions() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let b = [0.5f32; 9];
        let d: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
        assert!((l2(&a, &b) - d).abs() < 1e-4);
        assert_eq!(exact(Metric::Dot, &a, &b), -dot(&a, &b));
        assert_eq!(exact(Metric::Cosine, &a, &[0.0; 9]), 1.0);
        assert!(exact(Metric::Cosine, &a, &a).abs() < 1e-6);
    }

    #[test]
    fn dot_is_l2_in_the_augmented_space() {
        let v = clustered(200, 7, 3);
        let s = Space::fit(Metric::Dot, 7, &v);
        let q = &v[0..7];
        let qs = s.query(q);
        let mut by_dot: Vec<(f32, usize)> = (0..200)
            .map(|i| (-dot(q, &v[i * 7..i * 7 + 7]), i))
            .collect();
        let mut by_l2: Vec<(f32, usize)> = (0..200)
            .map(|i| {
                let mut g = Vec::new();
                s.data(&v[i * 7..i * 7 + 7], &mut g);
                (l2(&qs, &g), i)
            })
            .collect();
        by_dot.sort_by(|a, b| a.0.total_cmp(&b.0));
        by_l2.sort_by(|a, b| a.0.total_cmp(&b.0));
        let top_dot: Vec<usize> = by_dot.iter().take(10).map(|x| x.1).collect();
        let top_l2: Vec<usize> = by_l2.iter().take(10).map(|x| x.1).collect();
        assert_eq!(top_dot, top_l2);
    }

    #[test]
    fn quantized_distances_track_exact_ones() {
        let v = clustered(500, 16, 5);
        let qz = Quantizer::fit(16, &v);
        let q = qz.query(&v[0..16]);
        for i in 0..500 {
            let x = &v[i * 16..i * 16 + 16];
            let mut c = Vec::new();
            qz.encode(x, &mut c);
            let e = l2(&v[0..16], x);
            let a = q.distance(&c);
            // Each component is off by at most half a step.
            let bound: f32 = (0..16)
                .map(|d| {
                    let h = qz.scale[d] / 2.0;
                    2.0 * (v[d] - x[d]).abs() * h + h * h
                })
                .sum();
            assert!(
                (a - e).abs() <= bound * 1.001 + 1e-4,
                "{a} vs {e} (bound {bound})"
            );
        }
    }

    #[test]
    fn four_bit_codes_track_exact_distances() {
        let dim = 13;
        let v = clustered(2_000, dim, 1);
        let q4 = Quantizer::fit4(dim, &v);
        let mut codes = Vec::new();
        for x in v.chunks_exact(dim) {
            q4.encode4(x, &mut codes);
        }
        assert_eq!(codes.len(), 2_000 * 7);
        // Decoded values sit within half a level of the clipped input.
        let q = &v[..dim];
        let nq = q4.query4(q);
        let mut err = 0f64;
        let mut total = 0f64;
        for (x, c) in v.chunks_exact(dim).zip(codes.chunks_exact(7)) {
            let approx = nq.distance(c);
            let exact = l2(q, x);
            err += f64::from((approx - exact).abs());
            total += f64::from(exact);
            // By construction the table is the distance to the decoded vector.
            let decoded: Vec<f32> = (0..dim)
                .map(|d| q4.min[d] + q4.scale[d] * f32::from((c[d / 2] >> (4 * (d % 2))) & 15))
                .collect();
            assert!((approx - l2(q, &decoded)).abs() <= 1e-3 * (1.0 + approx));
        }
        assert!(err / total < 0.25, "mean relative error {}", err / total);
        assert_eq!(Quantizer::fit4(3, &[]).scale, vec![0.0; 3]);
    }
}
