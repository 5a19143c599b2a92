//! The partition-major vector index's arithmetic at scale, without I/O (RFC 0001): training
//! and assignment time, and recall@10 and bytes per query at several `nprobe`, on the
//! vector benchmark's data shape (64-d vectors around 64 Gaussian centres, `bench/vector`).
//!
//! Each query probes its `nprobe` nearest partitions, scores their 8-bit residual codes
//! asymmetrically, re-ranks the best `R` by exact distance, and is compared with the exact
//! top-10 by brute force. Bytes are what a reader fetches: each probed partition's entries
//! (`dim` code bytes + 12) and `R` raw vectors.
//!
//! `BOUNDS=1` also compares, at nprobe 48, re-ranking a fixed `ef` by code with re-ranking
//! every entry whose lower bound can reach the k-th upper bound, for several bound widths
//! (decision 62 with 4-bit codes; `BITS=8` for 8-bit codes, decision 82); `HEAVY=1` makes
//! every fourth dimension heavy-tailed.
//!
//! `LAYOUT=1` (4-bit codes; `NPROBE`, default 48) counts the requests of the re-ranking round
//! (`ef` 50 raw vectors, gaps bridged) with each partition's entries in arrival order or
//! ordered by sub-cluster (`docs/vector-index.md`, "Why a warm query makes ~45 requests").
//!
//!     cargo run --release -p skerry-vector --example ivf_scale -- [N] [QUERIES] [SAMPLE_PER_CENTROID] [NLIST]

use std::time::Instant;

use skerry_vector::ivf::{default_nlist, Codebook};
use skerry_vector::{l2, Quantizer};

const DIM: usize = 64;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn gauss(&mut self) -> f32 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.7
    }
    fn vector(&mut self, centres: &[Vec<f32>], out: &mut Vec<f32>) {
        let c = &centres[(self.next() % centres.len() as u64) as usize];
        let heavy = std::env::var("HEAVY").is_ok();
        for (d, x) in c.iter().enumerate() {
            let mut g = self.gauss();
            if heavy && d % 4 == 0 {
                // Heavy-tailed dimensions: a Gaussian over a random scale (Student-t-like).
                g /= self.unit().max(0.02).sqrt();
            }
            out.push(x + g * 0.4);
        }
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let n = args.first().copied().unwrap_or(2_000_000);
    let nq = args.get(1).copied().unwrap_or(100);
    let per = args.get(2).copied().unwrap_or(16);
    let mut r = Rng(0x5EED_0019_BE4C);
    let centres: Vec<Vec<f32>> = (0..64)
        .map(|_| (0..DIM).map(|_| r.unit() * 8.0 - 4.0).collect())
        .collect();
    let mut data = Vec::with_capacity(n * DIM);
    for _ in 0..n {
        r.vector(&centres, &mut data);
    }
    let mut queries = Vec::with_capacity(nq * DIM);
    for _ in 0..nq {
        r.vector(&centres, &mut queries);
    }
    let nlist = match args.get(3) {
        Some(x) => *x,
        None => default_nlist(n as u64),
    };
    let sample_n = (per * nlist).max(65_536).min(n);
    let stride = n / sample_n;
    let sample: Vec<f32> = (0..sample_n)
        .flat_map(|i| {
            data[i * stride * DIM..(i * stride + 1) * DIM]
                .iter()
                .copied()
        })
        .collect();
    let t = Instant::now();
    let book = Codebook::train(&sample, DIM, nlist, 7);
    let train_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let assigned: Vec<u32> = std::thread::scope(|sc| {
        let half = n / 2;
        let (a, b) = data.split_at(half * DIM);
        let ha = sc.spawn(|| {
            a.chunks_exact(DIM)
                .map(|v| book.assign(v))
                .collect::<Vec<_>>()
        });
        let hb = sc.spawn(|| {
            b.chunks_exact(DIM)
                .map(|v| book.assign(v))
                .collect::<Vec<_>>()
        });
        let mut x = ha.join().unwrap();
        x.extend(hb.join().unwrap());
        x
    });
    let assign_s = t.elapsed().as_secs_f64();
    let nl = book.nlist();
    let mut members: Vec<Vec<u32>> = vec![vec![]; nl];
    for (i, p) in assigned.iter().enumerate() {
        members[*p as usize].push(i as u32);
    }
    let mut residuals = Vec::with_capacity(n * DIM);
    for (i, v) in data.chunks_exact(DIM).enumerate() {
        let c = &book.centroids[assigned[i] as usize * DIM..][..DIM];
        residuals.extend(v.iter().zip(c).map(|(x, m)| x - m));
    }
    let bits: u32 = std::env::var("BITS")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(4);
    let quant = if bits == 4 {
        Quantizer::fit4(DIM, &residuals)
    } else {
        Quantizer::fit(DIM, &residuals)
    };
    let mut codes = Vec::with_capacity(n * DIM);
    for v in residuals.chunks_exact(DIM) {
        if bits == 4 {
            quant.encode4(v, &mut codes);
        } else {
            quant.encode(v, &mut codes);
        }
    }
    let code_bytes = if bits == 4 { DIM / 2 } else { DIM };
    drop(residuals);
    let sizes: Vec<usize> = members.iter().map(Vec::len).collect();
    println!(
        "n {n} nlist {nl} (asked {nlist}, {} groups) sample {sample_n}: train {train_s:.1} s, assign {assign_s:.1} s; partition sizes max {} median {}",
        book.groups.len().saturating_sub(1),
        sizes.iter().max().unwrap(),
        { let mut s = sizes.clone(); s.sort(); s[s.len() / 2] }
    );
    // Exact top-10.
    let truth: Vec<Vec<u32>> = queries
        .chunks_exact(DIM)
        .map(|q| {
            let mut d: Vec<(f32, u32)> = data
                .chunks_exact(DIM)
                .enumerate()
                .map(|(i, x)| (l2(q, x), i as u32))
                .collect();
            d.select_nth_unstable_by(9, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            d[..10].iter().map(|x| x.1).collect()
        })
        .collect();
    if std::env::var("BOUNDS").is_ok() {
        // The query's distances to a partition's codes, at either width.
        let table = |rq: &[f32]| -> Box<dyn Fn(&[u8]) -> f32> {
            if bits == 4 {
                let q = quant.query4(rq);
                Box::new(move |c| q.distance(c))
            } else {
                let q = quant.query(rq);
                Box::new(move |c| q.distance(c))
            }
        };
        // RFC 0003 experiment: per-entry reconstruction error, candidates whose lower bound
        // can reach the k-th upper bound, for several widths t (1 = triangle inequality).
        let mut eps = Vec::with_capacity(n);
        for (i, v) in data.chunks_exact(DIM).enumerate() {
            let c = &book.centroids[assigned[i] as usize * DIM..][..DIM];
            let code = &codes[i * code_bytes..][..code_bytes];
            let mut e2 = 0f32;
            for d in 0..DIM {
                let l = if bits == 4 {
                    (code[d / 2] >> (4 * (d % 2))) & 15
                } else {
                    code[d]
                };
                let rec = c[d] + quant.min[d] + quant.scale[d] * f32::from(l);
                e2 += (v[d] - rec) * (v[d] - rec);
            }
            eps.push(e2.sqrt());
        }
        let mut es = eps.clone();
        es.sort_by(f32::total_cmp);
        println!(
            "eps p50 {:.3} p99 {:.3} max {:.3}",
            es[n / 2],
            es[n * 99 / 100],
            es[n - 1]
        );
        for nprobe in [48usize] {
            for ef in [30usize, 50, 100] {
                let mut hit = 0;
                for (q, want) in queries.chunks_exact(DIM).zip(&truth) {
                    let probed = book.probe(q, nprobe);
                    let mut cands: Vec<(f32, u32)> = Vec::new();
                    for p in &probed {
                        let c = &book.centroids[*p as usize * DIM..][..DIM];
                        let rq: Vec<f32> = q.iter().zip(c).map(|(x, m)| x - m).collect();
                        let qc = table(&rq);
                        for i in &members[*p as usize] {
                            cands.push((qc(&codes[*i as usize * code_bytes..][..code_bytes]), *i));
                        }
                    }
                    cands.select_nth_unstable_by(ef - 1, |a, b| a.0.total_cmp(&b.0));
                    let mut exact: Vec<(f32, u32)> = cands[..ef]
                        .iter()
                        .map(|c| (l2(q, &data[c.1 as usize * DIM..][..DIM]), c.1))
                        .collect();
                    exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    hit += exact[..10].iter().filter(|x| want.contains(&x.1)).count();
                }
                println!(
                    "fixed ef {ef}: recall@10 {:.3}",
                    hit as f64 / (10 * nq) as f64
                );
            }
            for t in [1.0f32, 0.5, 0.375, 0.25, 0.1875, 0.125] {
                let (mut hit, mut cnt, mut maxc) = (0usize, 0usize, 0usize);
                for (q, want) in queries.chunks_exact(DIM).zip(&truth) {
                    let probed = book.probe(q, nprobe);
                    let mut cands: Vec<(f32, f32, u32)> = Vec::new();
                    for p in &probed {
                        let c = &book.centroids[*p as usize * DIM..][..DIM];
                        let rq: Vec<f32> = q.iter().zip(c).map(|(x, m)| x - m).collect();
                        let qc = table(&rq);
                        for i in &members[*p as usize] {
                            let s = qc(&codes[*i as usize * code_bytes..][..code_bytes]).max(0.0);
                            let e = eps[*i as usize];
                            let mid = s + e * e;
                            let w = 2.0 * t * s.sqrt() * e;
                            cands.push((mid - w, mid + w, *i));
                        }
                    }
                    let mut ubs: Vec<f32> = cands.iter().map(|c| c.1).collect();
                    ubs.select_nth_unstable_by(9, f32::total_cmp);
                    let u = ubs[9];
                    let mut exact: Vec<(f32, u32)> = cands
                        .iter()
                        .filter(|c| c.0 <= u)
                        .map(|c| (l2(q, &data[c.2 as usize * DIM..][..DIM]), c.2))
                        .collect();
                    cnt += exact.len();
                    maxc = maxc.max(exact.len());
                    exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    hit += exact[..10.min(exact.len())]
                        .iter()
                        .filter(|x| want.contains(&x.1))
                        .count();
                }
                println!(
                    "bounds t {t:.3} nprobe {nprobe}: recall@10 {:.3}, candidates mean {:.1} max {maxc}",
                    hit as f64 / (10 * nq) as f64,
                    cnt as f64 / nq as f64
                );
            }
        }
    }
    if std::env::var("LAYOUT").is_ok() && bits == 4 {
        layout_experiment(&data, &queries, &book, &members, &codes, &quant, &truth);
        return;
    }
    for rerank in [64usize] {
        for nprobe in [16usize, 24, 32, 48, 64] {
            let (mut hit, mut coarse, mut bytes, mut us) = (0, 0, 0u64, 0f64);
            for (qv, want) in queries.chunks_exact(DIM).zip(&truth) {
                let t = Instant::now();
                let q = qv;
                let probed = book.probe(q, nprobe);
                let mut cands: Vec<(f32, u32)> = Vec::new();
                for p in &probed {
                    let c = &book.centroids[*p as usize * DIM..][..DIM];
                    let rq: Vec<f32> = q.iter().zip(c).map(|(x, m)| x - m).collect();
                    if bits == 4 {
                        let qc = quant.query4(&rq);
                        for i in &members[*p as usize] {
                            cands.push((
                                qc.distance(&codes[*i as usize * code_bytes..][..code_bytes]),
                                *i,
                            ));
                        }
                    } else {
                        let qc = quant.query(&rq);
                        for i in &members[*p as usize] {
                            cands.push((
                                qc.distance(&codes[*i as usize * code_bytes..][..code_bytes]),
                                *i,
                            ));
                        }
                    }
                    bytes += members[*p as usize].len() as u64 * (code_bytes as u64 + 4);
                }
                let r = rerank.min(cands.len());
                if r > 0 {
                    cands.select_nth_unstable_by(r - 1, |a, b| {
                        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                    });
                }
                let mut exact: Vec<(f32, u32)> = cands[..r]
                    .iter()
                    .map(|(_, i)| (l2(q, &data[*i as usize * DIM..][..DIM]), *i))
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                us += t.elapsed().as_secs_f64() * 1e6;
                bytes += r as u64 * (DIM as u64 * 4 + 4);
                hit += exact[..10.min(exact.len())]
                    .iter()
                    .filter(|x| want.contains(&x.1))
                    .count();
                coarse += want
                    .iter()
                    .filter(|w| probed.contains(&assigned[**w as usize]))
                    .count();
            }
            println!(
                "R {rerank:>3} nprobe {nprobe:>3}: recall@10 {:.3} (coarse {:.3}), {:.0} KB/query, {:.0} µs/query (arithmetic only)",
                hit as f64 / (10 * nq) as f64,
                coarse as f64 / (10 * nq) as f64,
                bytes as f64 / nq as f64 / 1e3,
                us / nq as f64
            );
        }
    }
}

/// `LAYOUT=1`: how many range requests the re-ranking round of a query makes (its `ef` = 50
/// best entries by 4-bit code over nprobe 48 partitions, each raw vector 260 bytes), with gaps
/// up to `G` bridged, when each partition's entries sit in arrival order (today: file by
/// file, unrelated to where they lie) or ordered by sub-cluster (k-means of `S` entries a
/// cluster within the partition, clusters chained nearest-first) — what a layout keeping a
/// query's candidates together would save (issue 40's warm wasm target).
#[allow(clippy::too_many_arguments)]
fn layout_experiment(
    data: &[f32],
    queries: &[f32],
    book: &Codebook,
    members: &[Vec<u32>],
    codes: &[u8],
    quant: &Quantizer,
    truth: &[Vec<u32>],
) {
    const RAW: u64 = 4 * DIM as u64 + 4;
    const EF: usize = 50;
    let nprobe: usize = std::env::var("NPROBE")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(48);
    let code_bytes = DIM / 2;
    let nq = truth.len();
    // Per layout: each entry's slot within its partition.
    let arrival: Vec<u32> = {
        let mut slot = vec![0u32; data.len() / DIM];
        for m in members {
            for (k, i) in m.iter().enumerate() {
                slot[*i as usize] = k as u32;
            }
        }
        slot
    };
    let clustered = |per: usize| -> Vec<u32> {
        let mut slot = vec![0u32; data.len() / DIM];
        let mut rng = Rng(0xC1A5);
        for m in members {
            if m.is_empty() {
                continue;
            }
            let k = m.len().div_ceil(per).max(1);
            // Lloyd's k-means, 6 rounds, seeded by random members.
            let mut cent: Vec<f32> = (0..k)
                .flat_map(|_| {
                    let i = m[(rng.next() % m.len() as u64) as usize] as usize;
                    data[i * DIM..(i + 1) * DIM].to_vec()
                })
                .collect();
            let mut of = vec![0usize; m.len()];
            for _ in 0..6 {
                for (j, i) in m.iter().enumerate() {
                    let v = &data[*i as usize * DIM..][..DIM];
                    of[j] = (0..k)
                        .min_by(|a, b| {
                            l2(v, &cent[a * DIM..][..DIM])
                                .total_cmp(&l2(v, &cent[b * DIM..][..DIM]))
                        })
                        .unwrap();
                }
                let mut sum = vec![0f32; k * DIM];
                let mut cnt = vec![0usize; k];
                for (j, i) in m.iter().enumerate() {
                    cnt[of[j]] += 1;
                    for d in 0..DIM {
                        sum[of[j] * DIM + d] += data[*i as usize * DIM + d];
                    }
                }
                for c in 0..k {
                    if cnt[c] > 0 {
                        for d in 0..DIM {
                            cent[c * DIM + d] = sum[c * DIM + d] / cnt[c] as f32;
                        }
                    }
                }
            }
            // Clusters chained nearest-first from cluster 0.
            let mut order = vec![0usize];
            let mut left: Vec<usize> = (1..k).collect();
            while !left.is_empty() {
                let last = *order.last().unwrap();
                let (at, _) = left
                    .iter()
                    .enumerate()
                    .min_by(|a, b| {
                        l2(&cent[last * DIM..][..DIM], &cent[*a.1 * DIM..][..DIM])
                            .total_cmp(&l2(&cent[last * DIM..][..DIM], &cent[*b.1 * DIM..][..DIM]))
                    })
                    .unwrap();
                order.push(left.remove(at));
            }
            let mut rank = vec![0usize; k];
            for (r, c) in order.iter().enumerate() {
                rank[*c] = r;
            }
            let mut js: Vec<usize> = (0..m.len()).collect();
            js.sort_by_key(|&j| (rank[of[j]], j));
            for (s, j) in js.iter().enumerate() {
                slot[m[*j] as usize] = s as u32;
            }
        }
        slot
    };
    let mut layouts: Vec<(String, Vec<u32>)> = vec![("arrival".into(), arrival)];
    for per in [16usize, 32, 64] {
        let t = Instant::now();
        layouts.push((format!("sub-clusters of {per}"), clustered(per)));
        println!(
            "layout by sub-clusters of {per}: {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    // Partition p's raw vectors start at `base[p]` (partitions in id order).
    let mut base = vec![0u64; members.len() + 1];
    for (p, m) in members.iter().enumerate() {
        base[p + 1] = base[p] + m.len() as u64 * RAW;
    }
    let part_of: Vec<u32> = {
        let mut v = vec![0u32; data.len() / DIM];
        for (p, m) in members.iter().enumerate() {
            for i in m {
                v[*i as usize] = p as u32;
            }
        }
        v
    };
    let cands: Vec<Vec<u32>> = queries
        .chunks_exact(DIM)
        .map(|q| {
            let mut c: Vec<(f32, u32)> = Vec::new();
            for p in book.probe(q, nprobe) {
                let cc = &book.centroids[p as usize * DIM..][..DIM];
                let rq: Vec<f32> = q.iter().zip(cc).map(|(x, m)| x - m).collect();
                let qc = quant.query4(&rq);
                for i in &members[p as usize] {
                    c.push((
                        qc.distance(&codes[*i as usize * code_bytes..][..code_bytes]),
                        *i,
                    ));
                }
            }
            c.select_nth_unstable_by(EF - 1, |a, b| a.0.total_cmp(&b.0));
            c[..EF].iter().map(|x| x.1).collect()
        })
        .collect();
    let recall = cands
        .iter()
        .zip(queries.chunks_exact(DIM))
        .zip(truth)
        .map(|((c, q), want)| {
            let mut e: Vec<(f32, u32)> = c
                .iter()
                .map(|i| (l2(q, &data[*i as usize * DIM..][..DIM]), *i))
                .collect();
            e.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            e[..10].iter().filter(|x| want.contains(&x.1)).count()
        })
        .sum::<usize>() as f64
        / (10 * nq) as f64;
    let probed: usize = queries
        .chunks_exact(DIM)
        .map(|q| {
            book.probe(q, nprobe)
                .iter()
                .map(|p| members[*p as usize].len())
                .sum::<usize>()
        })
        .sum();
    println!(
        "nprobe {nprobe}, ef {EF}: recall@10 {recall:.3}, {:.0} entries probed per query",
        probed as f64 / nq as f64
    );
    for (name, slot) in &layouts {
        for gap in [0u64, 8 << 10, 16 << 10, 32 << 10, 64 << 10] {
            let (mut reqs, mut bytes) = (0u64, 0u64);
            for c in &cands {
                let mut spans: Vec<u64> = c
                    .iter()
                    .map(|i| {
                        base[part_of[*i as usize] as usize] + u64::from(slot[*i as usize]) * RAW
                    })
                    .collect();
                spans.sort_unstable();
                let mut cur: Option<(u64, u64)> = None;
                for a in spans {
                    match cur {
                        Some((s, e)) if a <= e + gap => cur = Some((s, (a + RAW).max(e))),
                        _ => {
                            if let Some((s, e)) = cur {
                                reqs += 1;
                                bytes += e - s;
                            }
                            cur = Some((a, a + RAW));
                        }
                    }
                }
                if let Some((s, e)) = cur {
                    reqs += 1;
                    bytes += e - s;
                }
            }
            println!(
                "{name:>22}, gap {:>3} KiB: {:.1} requests, {:.1} KB per query",
                gap >> 10,
                reqs as f64 / nq as f64,
                bytes as f64 / nq as f64 / 1e3
            );
        }
    }
}
