//! The coarse level of the table-level vector index (RFC 0001, `docs/rfcs/0001-vector-runs.md`):
//! a [`Codebook`] of `nlist` centroids trained by k-means on a sample of the table, which
//! assigns every vector to the partition of its nearest centroid and tells a query which
//! partitions to probe.
//!
//! Training is deterministic — the same sample, `nlist` and seed give the same centroid bits
//! on every target, because `verify` rebuilds blobs and compares bytes:
//! - k-means++ initialisation, each pick drawn from a seeded hash;
//! - a fixed number of Lloyd iterations, sums in f64 in sample order;
//! - an emptied cluster reseeded with the sample vector farthest from its centroid (lowest
//!   index on ties).
//!
//! Distances are [`crate::l2`] in the index's graph space ([`crate::Space`]), so every metric
//! is partitioned as L2, as the graph is searched today.

use crate::{l2, splitmix};

/// `nlist` centroids of `dim` dimensions, row-major, in groups: a codebook of more than
/// [`FLAT_MAX`] centroids is two-level — `top` holds one centroid per group and group `g`'s
/// centroids are `groups[g]..groups[g + 1]`, so assigning a vector scans the top level and
/// the sub-centroids of its [`ASSIGN_GROUPS`] nearest groups instead of every centroid.
#[derive(Clone, Debug, PartialEq)]
pub struct Codebook {
    pub dim: usize,
    pub centroids: Vec<f32>,
    /// The groups' centroids (empty: one flat group).
    pub top: Vec<f32>,
    /// Offsets of each group's centroids in `centroids` (`top`'s count + 1; empty when flat).
    pub groups: Vec<u32>,
}

/// Lloyd iterations a training runs (enough for the partitions to settle on a sample).
pub const ITERATIONS: usize = 12;
/// Most centroids trained and scanned flat; more are trained in `⌈√nlist⌉` groups.
pub const FLAT_MAX: usize = 256;
/// Groups whose sub-centroids an assignment scans.
pub const ASSIGN_GROUPS: usize = 3;

/// `k` centroids (fewer when `n` is smaller) of the `n` vectors `at(i)` by k-means++ and
/// [`ITERATIONS`] Lloyd iterations, deterministic for a seed.
fn kmeans<'s>(
    n: usize,
    at: impl Fn(usize) -> &'s [f32],
    dim: usize,
    k: usize,
    seed: u64,
) -> Vec<f32> {
    let k = k.min(n);
    if k == 0 {
        return vec![];
    }
    // k-means++: the first pick uniform, each next one with probability ∝ its distance to
    // the nearest pick so far.
    let mut centroids = Vec::with_capacity(k * dim);
    let mut rng = seed;
    let mut uniform = || {
        rng = splitmix(rng);
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    let first = ((uniform() * n as f64) as usize).min(n - 1);
    centroids.extend_from_slice(at(first));
    let mut near: Vec<f64> = (0..n).map(|i| f64::from(l2(at(i), at(first)))).collect();
    while centroids.len() < k * dim {
        let total: f64 = near.iter().sum();
        let pick = if total > 0.0 {
            let mut target = uniform() * total;
            let mut chosen = n - 1;
            for (i, d) in near.iter().enumerate() {
                if target < *d {
                    chosen = i;
                    break;
                }
                target -= d;
            }
            chosen
        } else {
            // Every vector sits on a pick: duplicates fill the rest.
            (centroids.len() / dim) % n
        };
        centroids.extend_from_slice(at(pick));
        for (i, d) in near.iter_mut().enumerate() {
            *d = d.min(f64::from(l2(at(i), at(pick))));
        }
    }
    let nearest = |cs: &[f32], v: &[f32]| -> u32 { nearest_of(cs, dim, v).1 };
    // Lloyd.
    let mut assigned = vec![0u32; n];
    for _ in 0..ITERATIONS {
        let mut sums = vec![0f64; k * dim];
        let mut counts = vec![0u64; k];
        for (i, a) in assigned.iter_mut().enumerate() {
            let c = nearest(&centroids, at(i));
            *a = c;
            counts[c as usize] += 1;
            for (s, x) in sums[c as usize * dim..][..dim].iter_mut().zip(at(i)) {
                *s += f64::from(*x);
            }
        }
        for c in 0..k {
            if counts[c] > 0 {
                for d in 0..dim {
                    centroids[c * dim + d] = (sums[c * dim + d] / counts[c] as f64) as f32;
                }
            }
        }
        // An emptied cluster takes the vector farthest from its own centroid.
        for c in 0..k {
            if counts[c] == 0 {
                let far = (0..n)
                    .map(|i| {
                        let a = assigned[i] as usize;
                        (l2(at(i), &centroids[a * dim..(a + 1) * dim]), i)
                    })
                    .fold((f32::NEG_INFINITY, 0), |b, x| if x.0 > b.0 { x } else { b })
                    .1;
                centroids[c * dim..(c + 1) * dim].copy_from_slice(at(far));
                assigned[far] = c as u32;
            }
        }
    }
    centroids
}

/// The nearest of the centroids `cs` (`dim` floats each) to `v`: its distance and number
/// (the lowest number on ties).
fn nearest_of(cs: &[f32], dim: usize, v: &[f32]) -> (f32, u32) {
    let mut best = (f32::INFINITY, 0u32);
    for (c, x) in cs.chunks_exact(dim.max(1)).enumerate() {
        let d = l2(v, x);
        if d < best.0 {
            best = (d, c as u32);
        }
    }
    best
}

impl Codebook {
    /// Partitions the codebook holds.
    pub fn nlist(&self) -> usize {
        self.centroids.len().checked_div(self.dim).unwrap_or(0)
    }

    fn centroid(&self, c: usize) -> &[f32] {
        &self.centroids[c * self.dim..(c + 1) * self.dim]
    }

    /// Trains about `nlist` centroids (fewer when the sample holds fewer vectors) on `sample`
    /// (`dim` floats per vector, every one finite) with `seed`. Up to [`FLAT_MAX`] they are
    /// one k-means; beyond, `⌈√nlist⌉` group centroids are trained first and each group's
    /// share of the sample gets its own k-means, with centroids in proportion to its size —
    /// O(sample · √nlist) instead of O(sample · nlist).
    pub fn train(sample: &[f32], dim: usize, nlist: usize, seed: u64) -> Codebook {
        let n = sample.len().checked_div(dim).unwrap_or(0);
        let at = |i: usize| &sample[i * dim..(i + 1) * dim];
        let k = nlist.min(n);
        if k <= FLAT_MAX {
            return Codebook {
                dim,
                centroids: kmeans(n, at, dim, k, seed),
                top: vec![],
                groups: vec![],
            };
        }
        let g = (k as f64).sqrt().ceil() as usize;
        let top = kmeans(n, at, dim, g, seed);
        let g = top.len() / dim;
        let mut members: Vec<Vec<usize>> = vec![vec![]; g];
        for i in 0..n {
            members[nearest_of(&top, dim, at(i)).1 as usize].push(i);
        }
        // Each group trained on its own, both cores at once (the bits do not depend on it).
        let share =
            |m: &Vec<usize>| ((k as f64 * m.len() as f64 / n as f64).round() as usize).max(1);
        let train_group = |j: usize| -> Vec<f32> {
            let m = &members[j];
            kmeans(
                m.len(),
                |i| at(m[i]),
                dim,
                share(m),
                splitmix(seed ^ (j as u64 + 1)),
            )
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8);
        let mut trained: Vec<Vec<f32>> = vec![vec![]; g];
        std::thread::scope(|sc| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let train_group = &train_group;
                    sc.spawn(move || {
                        (t..g)
                            .step_by(threads)
                            .map(|j| (j, train_group(j)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                for (j, c) in h.join().expect("a k-means thread panicked") {
                    trained[j] = c;
                }
            }
        });
        let mut centroids = Vec::with_capacity(k * dim);
        let mut groups = vec![0u32];
        let mut kept_top = Vec::with_capacity(top.len());
        for (j, c) in trained.into_iter().enumerate() {
            if c.is_empty() {
                continue; // a group no sample vector is nearest to
            }
            centroids.extend_from_slice(&c);
            kept_top.extend_from_slice(&top[j * dim..(j + 1) * dim]);
            groups.push((centroids.len() / dim) as u32);
        }
        Codebook {
            dim,
            centroids,
            top: kept_top,
            groups,
        }
    }

    /// The partition of `v`: its nearest centroid (the lowest number on ties) — among the
    /// centroids of its [`ASSIGN_GROUPS`] nearest groups when the codebook is two-level.
    pub fn assign(&self, v: &[f32]) -> u32 {
        if self.groups.len() < 2 {
            return nearest_of(&self.centroids, self.dim, v).1;
        }
        let dim = self.dim;
        let mut near: Vec<(f32, usize)> = self
            .top
            .chunks_exact(dim.max(1))
            .enumerate()
            .map(|(g, c)| (l2(v, c), g))
            .collect();
        let take = ASSIGN_GROUPS.min(near.len());
        near.select_nth_unstable_by(take - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut best = (f32::INFINITY, u32::MAX);
        for &(_, g) in &near[..take] {
            let (a, b) = (self.groups[g] as usize, self.groups[g + 1] as usize);
            let (d, c) = nearest_of(&self.centroids[a * dim..b * dim], dim, v);
            let c = a as u32 + c;
            if d < best.0 || (d == best.0 && c < best.1) {
                best = (d, c);
            }
        }
        best.1
    }

    /// The `nprobe` partitions nearest to `q`, nearest first (ties by number): every centroid
    /// scanned, so a query's probes are exact.
    pub fn probe(&self, q: &[f32], nprobe: usize) -> Vec<u32> {
        // (distance, centroid) as one integer that orders like `total_cmp`, then the number.
        let mut d: Vec<u64> = (0..self.nlist())
            .map(|c| u64::from(crate::ordered_bits(l2(q, self.centroid(c)))) << 32 | c as u64)
            .collect();
        let n = nprobe.min(d.len());
        if n == 0 {
            return vec![];
        }
        if n < d.len() {
            d.select_nth_unstable(n - 1);
            d.truncate(n);
        }
        d.sort_unstable();
        d.into_iter().map(|k| k as u32).collect()
    }
}

/// The default number of partitions for a table of `n` vectors: `4·√n`, at least 1 and at most
/// 65,536 (RFC 0001: a few hundred vectors per partition).
pub fn default_nlist(n: u64) -> usize {
    ((4.0 * (n as f64).sqrt()).round() as usize).clamp(1, 65_536)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` vectors around `centres` random centres in [-5, 5)^dim, noise ±`spread`/2.
    fn clustered(n: usize, dim: usize, centres: usize, spread: f32, seed: u64) -> Vec<f32> {
        let mut s = seed;
        let mut next = || {
            s = splitmix(s);
            (s >> 11) as f32 / (1u64 << 53) as f32
        };
        let c: Vec<f32> = (0..centres * dim).map(|_| next() * 10.0 - 5.0).collect();
        let mut v = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let k = (next() * centres as f32) as usize % centres;
            for d in 0..dim {
                v.push(c[k * dim + d] + (next() - 0.5) * spread);
            }
        }
        v
    }

    #[test]
    fn training_is_deterministic_and_finds_planted_clusters() {
        let dim = 16;
        let v = clustered(4_000, dim, 8, 0.5, 7);
        let a = Codebook::train(&v, dim, 8, 42);
        let b = Codebook::train(&v, dim, 8, 42);
        assert_eq!(a.nlist(), 8);
        assert_eq!(
            a.centroids.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.centroids.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        // Every vector sits within its cluster's noise of its centroid: the 8 planted
        // clusters were found, one centroid each.
        let worst = v
            .chunks_exact(dim)
            .map(|x| l2(x, a.centroid(a.assign(x) as usize)))
            .fold(0f32, f32::max);
        assert!(worst < dim as f32 * 0.25 * 0.25 * 2.0, "worst {worst}");
        // Another seed: the same partitions up to numbering.
        let c = Codebook::train(&v, dim, 8, 43);
        let mut pairs: Vec<(u32, u32)> = v
            .chunks_exact(dim)
            .map(|x| (a.assign(x), c.assign(x)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), 8);
    }

    #[test]
    fn small_degenerate_and_empty_samples() {
        assert_eq!(Codebook::train(&[], 4, 8, 1).nlist(), 0);
        assert!(Codebook::train(&[], 4, 8, 1).probe(&[0.0; 4], 3).is_empty());
        let one = [1.0f32, 2.0];
        let b = Codebook::train(&one, 2, 8, 1);
        assert_eq!((b.nlist(), b.assign(&one)), (1, 0));
        // Every vector equal: k centroids all on it, assignments to the first.
        let same = vec![3.0f32; 40];
        let b = Codebook::train(&same, 4, 4, 9);
        assert_eq!(b.nlist(), 4);
        assert_eq!(b.assign(&[3.0; 4]), 0);
        assert_eq!(b.probe(&[3.0; 4], 9), vec![0, 1, 2, 3]);
    }

    #[test]
    fn two_level_training_assigns_almost_exactly() {
        let (dim, n) = (8, 12_000);
        let v = clustered(n, dim, 40, 2.0, 3);
        let a = Codebook::train(&v, dim, 600, 21);
        assert_eq!(a, Codebook::train(&v, dim, 600, 21), "deterministic");
        let groups = a.groups.len() - 1;
        assert!((20..=25).contains(&groups), "{groups} groups");
        assert!(
            (540..=660).contains(&a.nlist()),
            "about nlist centroids: {}",
            a.nlist()
        );
        assert_eq!(a.groups[0], 0);
        assert_eq!(*a.groups.last().unwrap() as usize, a.nlist());
        assert!(a.groups.windows(2).all(|w| w[0] < w[1]));
        // Assignment through the groups finds the exact nearest centroid nearly always, and
        // otherwise one almost as near.
        let mut exact = 0;
        for x in v.chunks_exact(dim) {
            let (d, c) = nearest_of(&a.centroids, dim, x);
            let got = a.assign(x);
            if got == c {
                exact += 1;
            } else {
                assert!(l2(x, a.centroid(got as usize)) <= d * 1.5 + 1e-3);
            }
        }
        assert!(exact as f64 >= 0.97 * n as f64, "{exact} of {n} exact");
    }

    /// Recall of the coarse level alone: the share of each query's exact 10 nearest that lie
    /// in its probed partitions, on clustered data with more partitions than clusters.
    #[test]
    fn probing_a_few_partitions_keeps_the_nearest() {
        let (dim, n) = (32, 20_000);
        let v = clustered(n, dim, 64, 2.0, 11);
        let nlist = default_nlist(n as u64);
        assert_eq!(nlist, 566);
        let book = Codebook::train(&v[..8_000 * dim], dim, nlist, 5);
        let part: Vec<u32> = v.chunks_exact(dim).map(|x| book.assign(x)).collect();
        let queries = clustered(50, dim, 64, 2.0, 11 ^ 0xabc);
        let mut found = [0usize; 3];
        for q in queries.chunks_exact(dim) {
            let mut d: Vec<(f32, usize)> = v
                .chunks_exact(dim)
                .enumerate()
                .map(|(i, x)| (l2(q, x), i))
                .collect();
            d.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for (j, nprobe) in [1usize, 8, 32].into_iter().enumerate() {
                let probed = book.probe(q, nprobe);
                found[j] += d[..10]
                    .iter()
                    .filter(|(_, i)| probed.contains(&part[*i]))
                    .count();
            }
        }
        let recall = found.map(|f| f as f64 / 500.0);
        eprintln!("coarse recall@10 at nprobe 1, 8, 32 of {nlist}: {recall:?}");
        assert!(
            recall[0] <= recall[1] && recall[1] <= recall[2],
            "{recall:?}"
        );
        assert!(
            recall[2] >= 0.95,
            "recall@10 of the coarse level at nprobe 32: {recall:?}"
        );
    }
}
