//! # skerry-vector
//!
//! The arithmetic of Skerry's vector index (`docs/vector-index.md`), apart from any byte
//! layout or I/O so it can be compiled optimized in every profile (tests build graphs of
//! 200,000 vectors):
//!
//! - [`Metric`] and [`exact`]: the distances results are ranked by, summed in a fixed lane
//!   order so every target computes the same bits;
//! - [`Space`]: the graph's space. Every metric is searched as L2 in a transformed space —
//!   cosine over unit vectors, dot over vectors augmented with `sqrt(Φ² − |x|²)` (Φ the
//!   largest norm of the file), whose L2 order is the inner product's;
//! - [`Quantizer`] and [`QueryCodes`]: 8 bits per dimension, offset and scale per dimension;
//! - [`build`]: HNSW (Malkov & Yashunin), deterministic: levels from a seeded hash of the
//!   node number, nodes inserted in order, ties broken by node number;
//! - [`Beam`]: the level-0 search as a resumable state machine that stops when it needs
//!   nodes whose data is not loaded, so a reader over byte ranges fetches them in batches;
//! - [`ivf`]: the coarse level of table-level runs (RFC 0001): a k-means [`ivf::Codebook`]
//!   that assigns vectors to partitions and picks the partitions a query probes.
//!
//! The public functions are deliberately not `#[inline]`: an inline function is compiled in
//! the crate that calls it, at that crate's optimization level, so callers in unoptimized
//! profiles would run the kernels unoptimized (decision 45).
//!
//! Nothing here panics on any input the reader can produce from a checked blob: node
//! numbers are checked by the caller against the node count before they reach [`Beam`].

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

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
        let mut table = vec![0f32; bytes * 256];
        for j in 0..bytes {
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
            for b in 0..256usize {
                table[j * 256 + b] = lo[b & 15] + hi[b >> 4];
            }
        }
        NibbleQuery { table, c }
    }
}

/// A query against 4-bit codes: `c + Σ table[j][code[j]]` approximates the L2 distance.
#[derive(Clone, Debug)]
pub struct NibbleQuery {
    table: Vec<f32>,
    c: f32,
}

impl NibbleQuery {
    pub fn distance(&self, code: &[u8]) -> f32 {
        let mut acc = [0f32; LANES];
        let n = code.len().min(self.table.len() / 256);
        let mut chunks = code[..n].chunks_exact(LANES);
        let mut j = 0;
        for c in &mut chunks {
            for l in 0..LANES {
                acc[l] += self.table[(j + l) * 256 + c[l] as usize];
            }
            j += LANES;
        }
        let mut tail = 0f32;
        for (k, b) in chunks.remainder().iter().enumerate() {
            tail += self.table[(j + k) * 256 + *b as usize];
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

/// What an HNSW graph is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Links per node above level 0 (level 0 keeps `2m`).
    pub m: usize,
    pub ef_construction: usize,
    pub seed: u64,
}

/// Highest level a node may reach.
pub const MAX_LEVEL: u8 = 16;

/// A built graph: node `i` is the `i`-th vector given to [`build`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    pub levels: Vec<u8>,
    pub entry: u32,
    pub max_level: u8,
    /// Level-0 links of every node, nearest first.
    pub level0: Vec<Vec<u32>>,
    /// Links above level 0: `upper[i][l - 1]` for node `i` at level `l ≥ 1`.
    pub upper: Vec<Vec<Vec<u32>>>,
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The level of node `i`: `⌊−ln(u)/ln(m)⌋`, `u` uniform in (0, 1] from a hash of the seed
/// and the node number.
pub fn level_of(seed: u64, i: u64, m: usize) -> u8 {
    let u = ((splitmix(seed ^ splitmix(i)) >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let l = -u.ln() / (m.max(2) as f64).ln();
    (l.floor() as u64).min(MAX_LEVEL as u64) as u8
}

/// A distance with a total order (ties by node number).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Near(f32, u32);
impl Eq for Near {}
impl PartialOrd for Near {
    fn partial_cmp(&self, o: &Near) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Near {
    fn cmp(&self, o: &Near) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

/// A visited set reused across searches: `mark[i] == epoch` means seen.
struct Visited {
    mark: Vec<u32>,
    epoch: u32,
}

impl Visited {
    fn new(n: usize) -> Visited {
        Visited {
            mark: vec![0; n],
            epoch: 0,
        }
    }

    fn next(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
        self.epoch
    }
}

/// Nodes inserted one by one before batches start (the graph is too small for batch-mates
/// not to see each other).
const SERIAL_NODES: usize = 1024;
/// Nodes whose searches run against the same graph (in parallel), then are linked in order.
/// A constant, so the graph does not depend on the number of threads.
pub const BUILD_BATCH: usize = 64;

struct Builder<'a> {
    v: &'a [f32],
    dim: usize,
    m: usize,
    m0: usize,
    ef_construction: usize,
    g: Graph,
}

/// What a node's insertion found: per level from its top (capped at the graph's) down to 0,
/// the nearest candidates, nearest first.
type Found = Vec<(u8, Vec<Near>)>;

impl Builder<'_> {
    #[inline]
    fn vec(&self, i: u32) -> &[f32] {
        let s = i as usize * self.dim;
        &self.v[s..s + self.dim]
    }

    #[inline]
    fn dist(&self, a: u32, b: u32) -> f32 {
        l2(self.vec(a), self.vec(b))
    }

    fn links(&self, i: u32, level: u8) -> &[u32] {
        if level == 0 {
            &self.g.level0[i as usize]
        } else {
            self.g.upper[i as usize]
                .get(level as usize - 1)
                .map_or(&[], |l| l.as_slice())
        }
    }

    fn links_mut(&mut self, i: u32, level: u8) -> &mut Vec<u32> {
        if level == 0 {
            &mut self.g.level0[i as usize]
        } else {
            &mut self.g.upper[i as usize][level as usize - 1]
        }
    }

    /// The `ef` nearest nodes to `q` at `level` reachable from `entry`, nearest first.
    fn search(&self, vis: &mut Visited, q: u32, entry: &[Near], ef: usize, level: u8) -> Vec<Near> {
        let epoch = vis.next();
        let mut cand: BinaryHeap<Reverse<Near>> = BinaryHeap::new();
        let mut res: BinaryHeap<Near> = BinaryHeap::new();
        for e in entry {
            vis.mark[e.1 as usize] = epoch;
            cand.push(Reverse(*e));
            res.push(*e);
        }
        while res.len() > ef {
            res.pop();
        }
        while let Some(Reverse(c)) = cand.pop() {
            if res.len() >= ef && res.peek().is_some_and(|w| c > *w) {
                break;
            }
            for &n in self.links(c.1, level) {
                if vis.mark[n as usize] == epoch {
                    continue;
                }
                vis.mark[n as usize] = epoch;
                let d = Near(self.dist(q, n), n);
                if res.len() < ef || res.peek().is_some_and(|w| d < *w) {
                    cand.push(Reverse(d));
                    res.push(d);
                    if res.len() > ef {
                        res.pop();
                    }
                }
            }
        }
        let mut out = res.into_vec();
        out.sort_unstable();
        out
    }

    /// Malkov's heuristic: from `cand` (nearest first, distances to `base`), keep a node
    /// only when it is nearer to `base` than to every node kept before it.
    fn select(&self, cand: &[Near], m: usize) -> Vec<u32> {
        let mut kept: Vec<u32> = Vec::with_capacity(m);
        for c in cand {
            if kept.len() >= m {
                break;
            }
            if kept.iter().all(|&k| c.0 < self.dist(c.1, k)) {
                kept.push(c.1);
            }
        }
        kept
    }

    /// The searches of node `i`'s insertion against the graph as it is (read only).
    fn find(&self, vis: &mut Visited, i: u32) -> Found {
        let level = self.g.levels[i as usize];
        let mut ep = vec![Near(self.dist(i, self.g.entry), self.g.entry)];
        let top = self.g.max_level;
        let mut l = top;
        while l > level {
            ep = self.search(vis, i, &ep, 1, l);
            l -= 1;
        }
        let mut found = Vec::new();
        let mut l = level.min(top) as i32;
        while l >= 0 {
            let lv = l as u8;
            let f = self.search(vis, i, &ep, self.ef_construction.max(self.m0), lv);
            ep = f.clone();
            found.push((lv, f));
            l -= 1;
        }
        found
    }

    /// Links node `i` from what its searches found, and `mates` (nodes of its batch linked
    /// before it, which the searches could not see).
    fn link(&mut self, i: u32, mut found: Found, mates: &[u32]) {
        let level = self.g.levels[i as usize];
        // Levels above the graph's top when the searches ran (found starts at the lower of
        // the node's level and that top): only batch-mates can be there.
        let searched = found.first().map_or(0, |f| f.0);
        if level > searched {
            let mut above: Found = (searched + 1..=level)
                .rev()
                .map(|l| (l, Vec::new()))
                .collect();
            above.append(&mut found);
            found = above;
        }
        for (lv, mut cand) in found {
            for &j in mates {
                if self.g.levels[j as usize] >= lv && !cand.iter().any(|c| c.1 == j) {
                    cand.push(Near(self.dist(i, j), j));
                }
            }
            cand.sort_unstable();
            let cap = if lv == 0 { self.m0 } else { self.m };
            let chosen = self.select(&cand, self.m);
            *self.links_mut(i, lv) = chosen.clone();
            for &n in &chosen {
                let mut list = std::mem::take(self.links_mut(n, lv));
                list.push(i);
                if list.len() > cap {
                    let mut c: Vec<Near> = list.iter().map(|&x| Near(self.dist(n, x), x)).collect();
                    c.sort_unstable();
                    list = self.select(&c, cap);
                }
                *self.links_mut(n, lv) = list;
            }
        }
        if level > self.g.max_level {
            self.g.entry = i;
            self.g.max_level = level;
        }
    }
}

/// The HNSW graph of `vectors` (graph-space, `dim` floats each), the same for the same
/// input and parameters whatever `threads` is. The first [`SERIAL_NODES`] nodes are inserted
/// one by one; then [`BUILD_BATCH`] nodes at a time search the graph as it stands (spread
/// over `threads` threads) and are linked in node order, each also considering the batch's
/// earlier nodes as neighbours.
pub fn build(vectors: &[f32], dim: usize, p: Params, threads: usize) -> Graph {
    let n = if dim == 0 { 0 } else { vectors.len() / dim };
    let m = p.m.max(2);
    let levels: Vec<u8> = (0..n as u64).map(|i| level_of(p.seed, i, m)).collect();
    let upper = levels
        .iter()
        .map(|&l| vec![Vec::new(); l as usize])
        .collect();
    let mut b = Builder {
        v: vectors,
        dim,
        m,
        m0: 2 * m,
        ef_construction: p.ef_construction.max(1),
        g: Graph {
            levels,
            entry: 0,
            max_level: 0,
            level0: vec![Vec::new(); n],
            upper,
        },
    };
    if n == 0 {
        return b.g;
    }
    b.g.max_level = b.g.levels[0];
    let threads = threads.clamp(1, BUILD_BATCH);
    let mut visited: Vec<Visited> = (0..threads).map(|_| Visited::new(n)).collect();
    let serial = n.min(SERIAL_NODES);
    for i in 1..serial as u32 {
        let f = b.find(&mut visited[0], i);
        b.link(i, f, &[]);
    }
    let mut start = serial;
    while start < n {
        let end = (start + BUILD_BATCH).min(n);
        let ids: Vec<u32> = (start as u32..end as u32).collect();
        let found: Vec<Found> = if threads == 1 {
            ids.iter().map(|&i| b.find(&mut visited[0], i)).collect()
        } else {
            let per = ids.len().div_ceil(threads);
            let frozen = &b;
            std::thread::scope(|sc| {
                let hs: Vec<_> = ids
                    .chunks(per)
                    .zip(visited.iter_mut())
                    .map(|(part, vis)| {
                        sc.spawn(move || {
                            part.iter()
                                .map(|&i| frozen.find(vis, i))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter()
                    .flat_map(|h| h.join().expect("a graph search thread panicked"))
                    .collect()
            })
        };
        for (k, f) in found.into_iter().enumerate() {
            b.link(ids[k], f, &ids[..k]);
        }
        start = end;
    }
    b.g
}

/// What a [`Beam`] reads a node's data through: its codes and level-0 links, `None` while
/// the block holding it is not loaded.
pub trait Nodes {
    fn node(&self, i: u32) -> Option<(&[u8], &[u32])>;
}

/// A level-0 best-first search with at most `ef` results, expanding up to `batch` of the
/// nearest unexpanded candidates at a time. [`Beam::run`] returns the nodes whose data it
/// needs next; the result does not depend on when data arrives, only on `ef` and `batch`.
pub struct Beam {
    ef: usize,
    batch: usize,
    /// The batch doubles after every expansion step up to this (equal to `batch`: fixed).
    max_batch: usize,
    visited: std::collections::HashSet<u32>,
    cand: BinaryHeap<Reverse<Near>>,
    /// Nearest `ef` of the allowed nodes seen.
    res: BinaryHeap<Near>,
    /// Seen, not yet measured (data not loaded when last asked).
    pending: Vec<u32>,
    /// Nodes measured.
    pub evaluated: u64,
    /// Nodes expanded.
    pub expanded: u64,
}

impl Beam {
    pub fn new(ef: usize, batch: usize, entry: u32) -> Beam {
        let mut visited = std::collections::HashSet::new();
        visited.insert(entry);
        Beam {
            ef: ef.max(1),
            batch: batch.max(1),
            max_batch: batch.max(1),
            visited,
            cand: BinaryHeap::new(),
            res: BinaryHeap::new(),
            pending: vec![entry],
            evaluated: 0,
            expanded: 0,
        }
    }

    /// The batch doubles after every expansion step, up to `max_batch`: a search over byte
    /// ranges then needs a logarithmic number of rounds to cover the beam's expansions.
    pub fn growing(mut self, max_batch: usize) -> Beam {
        self.max_batch = max_batch.max(self.batch);
        self
    }

    /// Searches until it needs data it has not got (returns those nodes, sorted) or is done
    /// (returns nothing). `allow` says which nodes may be results (all are traversed).
    pub fn run(&mut self, g: &dyn Nodes, q: &QueryCodes, allow: &dyn Fn(u32) -> bool) -> Vec<u32> {
        loop {
            let mut missing = Vec::new();
            for p in std::mem::take(&mut self.pending) {
                match g.node(p) {
                    None => missing.push(p),
                    Some((code, _)) => {
                        self.evaluated += 1;
                        let d = Near(q.distance(code), p);
                        let full = self.res.len() >= self.ef;
                        let near = !full || self.res.peek().is_some_and(|w| d < *w);
                        if near {
                            self.cand.push(Reverse(d));
                        }
                        if near && allow(p) {
                            self.res.push(d);
                            if self.res.len() > self.ef {
                                self.res.pop();
                            }
                        }
                    }
                }
            }
            if !missing.is_empty() {
                missing.sort_unstable();
                self.pending = missing.clone();
                return missing;
            }
            let mut took = 0;
            while took < self.batch {
                let Some(Reverse(c)) = self.cand.pop() else {
                    break;
                };
                if self.res.len() >= self.ef && self.res.peek().is_some_and(|w| c > *w) {
                    self.cand.clear();
                    break;
                }
                took += 1;
                self.expanded += 1;
                let Some((_, links)) = g.node(c.1) else {
                    continue;
                };
                for &n in links {
                    if self.visited.insert(n) {
                        self.pending.push(n);
                    }
                }
            }
            if took == 0 && self.pending.is_empty() {
                return Vec::new();
            }
            self.batch = (self.batch * 2).min(self.max_batch);
        }
    }

    /// The results, nearest first: `(approximate distance, node)`.
    pub fn results(&self) -> Vec<(f32, u32)> {
        let mut v: Vec<Near> = self.res.iter().copied().collect();
        v.sort_unstable();
        v.into_iter().map(|n| (n.0, n.1)).collect()
    }
}

/// Greedy descent through the upper levels: from `entry` to the nearest node at level 1
/// reachable by always moving to a nearer neighbour. `node(i, level)` gives a node's codes
/// and links at a level ≥ 1 (`None`: the graph is damaged there; the descent stops).
pub fn descend<'a>(
    q: &QueryCodes,
    entry: u32,
    max_level: u8,
    node: &dyn Fn(u32, u8) -> Option<(&'a [u8], &'a [u32])>,
) -> u32 {
    let mut cur = entry;
    let mut level = max_level;
    while level >= 1 {
        let Some((code, _)) = node(cur, level) else {
            return cur;
        };
        let mut best = Near(q.distance(code), cur);
        let mut steps = 0usize;
        loop {
            steps += 1;
            let mut moved = false;
            let Some((_, links)) = node(best.1, level) else {
                break;
            };
            for &n in links {
                if let Some((c, _)) = node(n, level) {
                    let d = Near(q.distance(c), n);
                    if d < best {
                        best = d;
                        moved = true;
                    }
                }
            }
            if !moved || steps > 1_000_000 {
                break;
            }
        }
        cur = best.1;
        level -= 1;
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

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

    struct All<'a>(&'a Graph, &'a [u8], usize);
    impl Nodes for All<'_> {
        fn node(&self, i: u32) -> Option<(&[u8], &[u32])> {
            let s = i as usize * self.2;
            Some((&self.1[s..s + self.2], &self.0.level0[i as usize]))
        }
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

    #[test]
    fn builds_are_deterministic_and_search_finds_neighbours() {
        let dim = 12;
        let n = 3000;
        let v = clustered(n, dim, 9);
        let p = Params {
            m: 8,
            ef_construction: 64,
            seed: 42,
        };
        let g = build(&v, dim, p, 1);
        assert_eq!(g, build(&v, dim, p, 1));
        // The graph does not depend on the threads building it.
        assert_eq!(g, build(&v, dim, p, 2));
        assert_eq!(g, build(&v, dim, p, 3));
        assert!(g.level0.iter().all(|l| !l.is_empty() && l.len() <= 16));
        let qz = Quantizer::fit(dim, &v);
        let mut codes = Vec::new();
        for x in v.chunks_exact(dim) {
            qz.encode(x, &mut codes);
        }
        let all = All(&g, &codes, dim);
        let mut hits = 0;
        for t in 0..50 {
            let q = &v[t * 37 * dim..t * 37 * dim + dim];
            let qc = qz.query(q);
            let up = |i: u32, l: u8| {
                let s = i as usize * dim;
                g.upper[i as usize]
                    .get(l as usize - 1)
                    .map(|x| (&codes[s..s + dim], x.as_slice()))
            };
            let e = descend(&qc, g.entry, g.max_level, &up);
            let mut b = Beam::new(32, 4, e);
            assert!(b.run(&all, &qc, &|_| true).is_empty());
            let got: Vec<u32> = b.results().iter().take(10).map(|r| r.1).collect();
            let mut ex: Vec<(f32, u32)> = (0..n as u32)
                .map(|i| (l2(q, &v[i as usize * dim..i as usize * dim + dim]), i))
                .collect();
            ex.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            hits += ex.iter().take(10).filter(|x| got.contains(&x.1)).count();
        }
        assert!(hits as f64 / 500.0 >= 0.9, "recall {}", hits as f64 / 500.0);
    }

    #[test]
    fn a_beam_pauses_for_missing_data_and_ends_the_same() {
        struct Some_<'a>(All<'a>, std::cell::RefCell<std::collections::HashSet<u32>>);
        impl Nodes for Some_<'_> {
            fn node(&self, i: u32) -> Option<(&[u8], &[u32])> {
                self.1
                    .borrow()
                    .contains(&i)
                    .then(|| self.0.node(i))
                    .flatten()
            }
        }
        let dim = 8;
        let v = clustered(1000, dim, 11);
        let g = build(
            &v,
            dim,
            Params {
                m: 6,
                ef_construction: 40,
                seed: 1,
            },
            2,
        );
        let qz = Quantizer::fit(dim, &v);
        let mut codes = Vec::new();
        for x in v.chunks_exact(dim) {
            qz.encode(x, &mut codes);
        }
        let qc = qz.query(&v[0..dim]);
        let mut full = Beam::new(20, 3, g.entry);
        assert!(full.run(&All(&g, &codes, dim), &qc, &|_| true).is_empty());
        let part = Some_(All(&g, &codes, dim), Default::default());
        let mut b = Beam::new(20, 3, g.entry);
        let mut rounds = 0;
        loop {
            let need = b.run(&part, &qc, &|_| true);
            if need.is_empty() {
                break;
            }
            rounds += 1;
            part.1.borrow_mut().extend(need);
        }
        assert!(rounds > 1);
        assert_eq!(b.results(), full.results());
        // A growing batch: the same answer whether data arrives all at once or round by
        // round, and fewer rounds than the fixed batch it starts from.
        let mut gfull = Beam::new(20, 3, g.entry).growing(48);
        assert!(gfull.run(&All(&g, &codes, dim), &qc, &|_| true).is_empty());
        let gpart = Some_(All(&g, &codes, dim), Default::default());
        let mut gb = Beam::new(20, 3, g.entry).growing(48);
        let mut grounds = 0;
        loop {
            let need = gb.run(&gpart, &qc, &|_| true);
            if need.is_empty() {
                break;
            }
            grounds += 1;
            gpart.1.borrow_mut().extend(need);
        }
        assert_eq!(gb.results(), gfull.results());
        assert_eq!(gb.evaluated, gfull.evaluated);
        assert!(
            grounds < rounds,
            "growing: {grounds} rounds, fixed: {rounds}"
        );
        assert!(gb.results()[0].1 == 0, "the query's own vector is found");
        // A filter keeps only allowed nodes.
        let mut f = Beam::new(20, 3, g.entry);
        f.run(&All(&g, &codes, dim), &qc, &|i| i % 2 == 0);
        assert!(f.results().iter().all(|r| r.1 % 2 == 0));
        assert_eq!(f.results().len(), 20);
    }
}
