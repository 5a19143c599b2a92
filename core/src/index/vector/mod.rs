//! The vector kind: `nearest` over one vector column, partition-major (RFC 0001,
//! decision 54, `docs/vector-index.md`).
//!
//! - [`codebook`]: `skerry-vector-codebook-v1`, trained once per index on a sample of the
//!   table — the space, the centroids (two-level above 256), the 4-bit residual quantizer.
//! - [`ivf`]: `skerry-vector-ivf-v1`, a file's (or a run's) vectors partition by partition:
//!   codes and positions, then the raw vectors for exact re-ranking.
//! - [`read`]: what a query reads of a blob, through [`super::access::BlobAccess`].
//!
//! A per-file blob is a function of the codebook and the file's vectors: `verify` rebuilds
//! it and compares bytes.

use serde::{Deserialize, Serialize};
use skerry_vector::Metric;

use crate::index::blob::BlobError;

pub mod carry;
pub mod codebook;
pub mod ivf;
pub mod read;

pub use ivf::BLOB_TYPE;
/// The blob type of the graph layout before partition-major blobs: such a blob is never
/// read (its file is scanned) and `build()` replaces it.
pub const OLD_BLOB_TYPE: &str = "skerry-vector-v1";
/// Kept in definitions for older manifests; partition-major indexes do not use it.
pub const DEFAULT_M: u16 = 16;
pub const DEFAULT_EF_CONSTRUCTION: u16 = 100;
/// A `dot` index's default: its graph (over norm-augmented vectors) needs a denser build to
/// reach the same recall (0.93 → 0.97 recall@10 at 200,000 clustered 64-d vectors).
pub const DEFAULT_EF_CONSTRUCTION_DOT: u16 = 200;

/// The default build-time candidate list of a metric.
pub fn default_ef_construction(metric: MetricName) -> u16 {
    match metric {
        MetricName::Dot => DEFAULT_EF_CONSTRUCTION_DOT,
        _ => DEFAULT_EF_CONSTRUCTION,
    }
}
/// Candidates a search re-ranks by their exact distance by default (`ef`; decision 62: at 2M
/// × 64, recall@10 is the probed partitions' own with 50 on clustered and on heavy-tailed
/// data, and the raw reads fall from ~80 to ~45 requests a query).
pub const DEFAULT_EF: usize = 50;
/// Partitions a search probes by default (`nprobe`; decision 54: recall@10 0.98 at 2M × 64
/// clustered vectors, 1.0 at 200k).
pub const DEFAULT_NPROBE: usize = 48;
/// Most partitions a search may probe.
pub const MAX_NPROBE: usize = 65_536;
/// The most vectors a codebook is trained on per centroid, and at least this many in all.
pub const SAMPLE_PER_CENTROID: u64 = 16;
pub const MIN_SAMPLE: u64 = 65_536;
/// Widest vectors indexed: a vector's build entry (`1 + 4·dim` bytes) must fit the
/// ordered writer's entry cap, which staged builds keep their slices in.
pub const MAX_DIM: usize = (crate::values::MAX_KEY_BYTES - 1) / 4;
/// The seed of every codebook (bundles are reproducible).
pub const SEED: u64 = 0x5ee7_5eed_0000_0001;

/// A vector index's definition: its metric (`m` and `efConstruction` are kept for manifests
/// written before partition-major blobs; nothing uses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorSpec {
    pub metric: MetricName,
    pub m: u16,
    pub ef_construction: u16,
}

impl Default for VectorSpec {
    fn default() -> VectorSpec {
        VectorSpec {
            metric: MetricName::L2,
            m: DEFAULT_M,
            ef_construction: DEFAULT_EF_CONSTRUCTION,
        }
    }
}

/// A metric as definitions and hosts spell it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricName {
    #[default]
    L2,
    Cosine,
    Dot,
}

impl MetricName {
    pub fn parse(s: &str) -> crate::error::Result<MetricName> {
        match s {
            "l2" => Ok(MetricName::L2),
            "cosine" => Ok(MetricName::Cosine),
            "dot" => Ok(MetricName::Dot),
            other => Err(crate::error::Error::Invalid(format!(
                "unknown metric {other:?} (metrics: l2, cosine, dot)"
            ))),
        }
    }

    pub fn metric(self) -> Metric {
        match self {
            MetricName::L2 => Metric::L2,
            MetricName::Cosine => Metric::Cosine,
            MetricName::Dot => Metric::Dot,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MetricName::L2 => "l2",
            MetricName::Cosine => "cosine",
            MetricName::Dot => "dot",
        }
    }
}

/// The little-endian bytes of a vector (how vector columns travel as values).
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The floats of little-endian bytes (`None` unless a whole number of floats).
pub fn from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    if b.len() % 4 != 0 {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// A vector's build entry: `[0]` for a row without one, else `[1]` and its floats'
/// little-endian bytes (what staged builds, registrations and verify carry as "keys").
pub fn entry_of(v: &crate::values::Value) -> Vec<u8> {
    match v {
        crate::values::Value::Binary(b) => {
            let mut e = Vec::with_capacity(1 + b.len());
            e.push(1);
            e.extend_from_slice(b);
            e
        }
        _ => vec![0],
    }
}

/// The vector of a build entry (`None`: no vector, or not whole floats).
pub fn vector_of_entry(e: &[u8]) -> Option<Vec<f32>> {
    match e.split_first() {
        Some((1, rest)) => from_bytes(rest),
        _ => None,
    }
}

/// A bounds-checked little-endian reader of a directory or codebook.
pub(crate) struct Cur<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) at: usize,
}

impl<'a> Cur<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], BlobError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or(BlobError::Corrupt("vector directory truncated"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, BlobError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, BlobError> {
        let s = self.take(8)?;
        Ok(u64::from_le_bytes(s.try_into().expect("8 bytes")))
    }
    pub(crate) fn f32(&mut self) -> Result<f32, BlobError> {
        Ok(f32::from_bits(self.u32()?))
    }
}

/// The vector kind ([`super::kind::Kind`]): k-nearest-neighbour `nearest` over one vector
/// column.
pub struct Vector;

static VECTOR: super::kind::About = super::kind::About {
    answers: super::kind::Answers {
        nearest: true,
        ..super::kind::Answers::NOTHING
    },
    input: super::kind::Input::Vector,
    options: &["metric", "m", "efConstruction"],
    verify_by_rebuild: true,
    run: Some(super::kind::RunLayout::Partitioned),
    ..super::kind::About::new(super::IndexKind::Vector, "vector", BLOB_TYPE, "ivf-tq4-v1")
};

impl super::kind::Kind for Vector {
    fn about(&self) -> &'static super::kind::About {
        &VECTOR
    }
    fn spec(&self, o: &super::IndexOptions) -> Result<super::IndexSpec, String> {
        if let Some(m) = o.m.filter(|m| !(2..=64).contains(m)) {
            return Err(format!("m {m} is outside 2..=64"));
        }
        if let Some(e) = o.ef_construction.filter(|e| !(8..=2000).contains(e)) {
            return Err(format!("efConstruction {e} is outside 8..=2000"));
        }
        let metric = o.metric.unwrap_or_default();
        Ok(super::IndexSpec::Vector(VectorSpec {
            metric,
            m: o.m.unwrap_or(DEFAULT_M),
            ef_construction: o.ef_construction.unwrap_or(default_ef_construction(metric)),
        }))
    }
    fn write(
        &self,
        spec: &super::IndexSpec,
        src: &super::kind::BlobSource<'_>,
        entries: &mut dyn Iterator<Item = (&[u8], u64)>,
    ) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
        let mut vs: Vec<(u64, Option<Vec<f32>>)> =
            entries.map(|(k, p)| (p, vector_of_entry(k))).collect();
        vs.sort_unstable_by_key(|v| v.0);
        write_blob(spec, src, &vs)
    }
    fn carry(
        &self,
        spec: &super::IndexSpec,
        src: &super::kind::BlobSource<'_>,
        sources: &[super::kind::CarrySource<'_>],
    ) -> Result<Option<(Vec<u8>, super::blob::BlobMeta)>, BlobError> {
        let Some(t) = src.codebook else {
            return Ok(None);
        };
        let metric = spec.vector().unwrap_or_default().metric.metric();
        // The output's dimension is its sources' (a file's blob records the dimension of
        // its vectors, finite or not; a file of NULLs none): sources of another dimension
        // than the codebook's derive.
        let mut dim = None;
        for d in sources.iter().filter_map(|s| s.meta.dim) {
            if d as usize != t.book.space.dim {
                return Ok(None);
            }
            dim = Some(d);
        }
        let c = codes_of(metric, t);
        let blob = carry::carry(
            &c,
            src.record_count,
            &sources
                .iter()
                .map(|s| carry::Source {
                    blob: s.blob,
                    directory_sha256: s.directory_sha256,
                    ordinal: s.run.map_or(0, |r| r.0),
                    to: s.to,
                })
                .collect::<Vec<_>>(),
        )?;
        let meta = super::blob::BlobMeta {
            dim,
            ..super::blob::BlobMeta::new(
                blob.directory.clone(),
                &blob.directory_sha256,
                blob.entries,
            )
        };
        Ok(Some((blob.bytes, meta)))
    }
}

/// The codes of blobs written against `t` for `metric`.
fn codes_of(metric: Metric, t: &codebook::Trained) -> ivf::Codes {
    let b = &t.book;
    ivf::Codes {
        metric: metric.code(),
        bits: b.bits,
        dim: b.space.dim,
        code_bytes: b.code_bytes(),
        codebook: t.sha,
    }
}

/// Why a file's vectors cannot be indexed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WriteError {
    #[error("vectors of {0} and {1} dimensions in one data file")]
    Ragged(usize, usize),
    #[error("vectors of {0} dimensions exceed the limit of {MAX_DIM}")]
    TooWide(usize),
    #[error("a data file of more than 2^32 rows with vectors")]
    TooMany,
    #[error("the index has no trained codebook (a build trains it first)")]
    NoCodebook,
    #[error("{0}")]
    Blob(#[from] BlobError),
}

/// The blob of one data file's vectors (`(position, vector)` by position; `None` for NULL)
/// against the index's codebook, and the facts the manifest records about it. Vectors
/// holding a NaN or an infinity are not indexed (never results). A file without vectors
/// needs no codebook.
pub fn write_blob(
    spec: &super::IndexSpec,
    src: &super::kind::BlobSource<'_>,
    vs: &[(u64, Option<Vec<f32>>)],
) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
    let metric = spec.vector().unwrap_or_default().metric.metric();
    let (blob, dim) = write(metric, src.codebook, vs).map_err(|e| {
        crate::error::Error::Invalid(format!("vector index {} over {}: {e}", src.index, src.path))
    })?;
    let meta = super::blob::BlobMeta {
        dim: dim.and_then(|d| u32::try_from(d).ok()),
        ..super::blob::BlobMeta::new(blob.directory.clone(), &blob.directory_sha256, blob.entries)
    };
    Ok((blob.bytes, meta))
}

/// The partition-major blob of `vs` against `book`, and the dimensions of its vectors.
pub fn write(
    metric: Metric,
    book: Option<&codebook::Trained>,
    vs: &[(u64, Option<Vec<f32>>)],
) -> Result<(ivf::IvfBlob, Option<usize>), WriteError> {
    let mut dim = None;
    for v in vs.iter().filter_map(|(_, v)| v.as_ref()) {
        if v.len() > MAX_DIM {
            return Err(WriteError::TooWide(v.len()));
        }
        match dim {
            None => dim = Some(v.len()),
            Some(d) if d != v.len() => return Err(WriteError::Ragged(d, v.len())),
            _ => {}
        }
    }
    let finite: Vec<(u32, &[f32])> = vs
        .iter()
        .filter_map(|(p, v)| v.as_deref().map(|v| (*p, v)))
        .filter(|(_, v)| skerry_vector::finite(v))
        .map(|(p, v)| {
            u32::try_from(p)
                .map(|p| (p, v))
                .map_err(|_| WriteError::TooMany)
        })
        .collect::<Result<_, _>>()?;
    let Some(t) = book else {
        if !finite.is_empty() {
            return Err(WriteError::NoCodebook);
        }
        let codes = ivf::Codes {
            metric: metric.code(),
            bits: codebook::DEFAULT_BITS,
            dim: dim.unwrap_or(0),
            code_bytes: 0,
            codebook: [0; 32],
        };
        return Ok((ivf::write(&codes, &[])?, dim));
    };
    let b = &t.book;
    if dim.is_some_and(|d| d != b.space.dim) {
        // Another dimension than the index's: an empty blob that says so (`dim`), which
        // poisons the index with the reason once the build or registration sees it.
        return Ok((ivf::write(&codes_of(metric, t), &[])?, dim));
    }
    // Each vector in the space, its partition and code; sorted by (partition, position).
    let mut mapped = Vec::with_capacity(b.space.graph_dim());
    let mut coded: Vec<(u32, u32, Vec<u8>)> = finite
        .iter()
        .map(|(p, v)| {
            mapped.clear();
            b.space.data(v, &mut mapped);
            let part = b.centroids.assign(&mapped);
            let mut code = Vec::with_capacity(b.code_bytes());
            b.encode(&mapped, part, &mut code);
            (part, *p, code)
        })
        .collect();
    let order: Vec<usize> = {
        let mut o: Vec<usize> = (0..coded.len()).collect();
        o.sort_unstable_by_key(|&i| (coded[i].0, coded[i].1));
        o
    };
    let entries: Vec<ivf::Entry<'_>> = order
        .iter()
        .map(|&i| ivf::Entry {
            partition: coded[i].0,
            ordinal: 0,
            position: coded[i].1,
            code: &coded[i].2,
            raw: finite[i].1,
        })
        .collect();
    let blob = ivf::write(&codes_of(metric, t), &entries)?;
    drop(entries);
    coded.clear();
    Ok((blob, dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64, dim: usize) -> Vec<(u64, Option<Vec<f32>>)> {
        (0..n)
            .map(|p| {
                let v: Vec<f32> = (0..dim)
                    .map(|d| ((p * 31 + d as u64 * 7) % 97) as f32 / 10.0)
                    .collect();
                match p % 11 {
                    3 => (p, None),
                    5 => (p, Some(vec![f32::NAN; dim])),
                    _ => (p, Some(v)),
                }
            })
            .collect()
    }

    fn trained(vs: &[(u64, Option<Vec<f32>>)], dim: usize, metric: Metric) -> codebook::Trained {
        let flat: Vec<f32> = vs
            .iter()
            .filter_map(|(_, v)| v.as_ref())
            .filter(|v| skerry_vector::finite(v))
            .flatten()
            .copied()
            .collect();
        codebook::Trained::new(codebook::VectorCodebook::train(
            metric, dim, &flat, 20, SEED, 4,
        ))
    }

    #[test]
    fn every_finite_vector_is_in_its_partition_once() {
        let vs = sample(500, 6);
        for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
            let t = trained(&vs, 6, metric);
            let (blob, dim) = write(metric, Some(&t), &vs).unwrap();
            assert_eq!(dim, Some(6));
            let again = write(metric, Some(&t), &vs).unwrap().0;
            assert_eq!(blob.bytes, again.bytes, "deterministic");
            let d = ivf::directory_of(&blob.bytes, Some(&blob.directory_sha256)).unwrap();
            assert_eq!(d.codes.codebook, t.sha);
            let mut seen = Vec::new();
            for p in &d.partitions {
                let r = d.codes_range(p);
                for f in d
                    .entries(p, &blob.bytes[r.start as usize..r.end as usize])
                    .unwrap()
                {
                    let rr = d.raw_range(f.index);
                    let raw = d
                        .raw(&blob.bytes[rr.start as usize..rr.end as usize])
                        .unwrap();
                    let want = vs[f.position as usize].1.as_ref().unwrap();
                    assert_eq!(&raw, want);
                    // In the partition the codebook assigns it to.
                    let mut m = Vec::new();
                    t.book.space.data(want, &mut m);
                    assert_eq!(t.book.centroids.assign(&m), p.id);
                    seen.push(f.position as u64);
                }
            }
            seen.sort_unstable();
            let want: Vec<u64> = vs
                .iter()
                .filter(|(_, v)| v.as_ref().is_some_and(|v| skerry_vector::finite(v)))
                .map(|(p, _)| *p)
                .collect();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn ragged_wide_and_untrained_vectors_are_refused() {
        let vs = sample(50, 4);
        let t = trained(&vs, 4, Metric::L2);
        let mut bad = vs.clone();
        bad[7].1 = Some(vec![1.0; 5]);
        assert!(matches!(
            write(Metric::L2, Some(&t), &bad),
            Err(WriteError::Ragged(4, 5))
        ));
        let wide = vec![(0, Some(vec![0.5; MAX_DIM + 1]))];
        assert!(matches!(
            write(Metric::L2, None, &wide),
            Err(WriteError::TooWide(_))
        ));
        assert!(matches!(
            write(Metric::L2, None, &vs),
            Err(WriteError::NoCodebook)
        ));
        // Another dimension than the codebook's: no entries, the file's dimension reported
        // (the index is poisoned by the build that sees it).
        let other = vec![(0, Some(vec![0.5; 3]))];
        let (b, dim) = write(Metric::L2, Some(&t), &other).unwrap();
        assert_eq!((b.entries, dim), (0, Some(3)));
        // No vector at all: an empty blob, with or without a codebook.
        let none = vec![(0, None), (1, Some(vec![f32::INFINITY; 4]))];
        for book in [None, Some(&t)] {
            let (b, _) = write(Metric::L2, book, &none).unwrap();
            assert_eq!(b.entries, 0);
        }
        let far = vec![(1u64 << 32, Some(vec![0.5; 4]))];
        assert!(matches!(
            write(Metric::L2, Some(&t), &far),
            Err(WriteError::TooMany)
        ));
    }
}
