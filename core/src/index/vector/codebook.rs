//! `skerry-vector-codebook-v1` (RFC 0001): what a generation of a vector index is trained on
//! once and every partition-major blob of it is written against — the space (metric, Φ for
//! `dot`), `nlist` centroids in that space, and the 8-bit quantizer of the residuals to them.
//! One object per index generation, named with its SHA-256 by the manifest. Writer and
//! reader side by side; not yet written by builds.
//!
//! ```text
//! codebook = "SKCB" u8 version u8 metric u16 0
//!            u32 dim u32 space_dim u32 nlist u32 0
//!            u64 seed u64 sample (vectors trained on) f32 phi
//!            space_dim × f32 min, space_dim × f32 scale
//!            nlist × space_dim × f32 centroids
//! ```
//!
//! All little-endian. A reader checks the whole object against the manifest's SHA-256 and
//! its length against the counts before allocating.

use sha2::{Digest, Sha256};
use skerry_vector::ivf::Codebook as Centroids;
use skerry_vector::{Metric, Quantizer, Space};

use super::Cur;
use crate::index::blob::{check_sha256, BlobError};

pub const MAGIC: &[u8; 4] = b"SKCB";
pub const VERSION: u8 = 1;

/// A trained generation of a vector index.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorCodebook {
    pub space: Space,
    pub centroids: Centroids,
    /// Of the residuals to the centroids, in the space.
    pub quantizer: Quantizer,
    pub seed: u64,
    /// Vectors the centroids were trained on.
    pub sample: u64,
}

impl VectorCodebook {
    /// Trains on `sample` (`dim` floats per vector, every one finite): the space fitted to it,
    /// `nlist` centroids in the space, the quantizer fitted to each vector's residual to its
    /// centroid.
    pub fn train(
        metric: Metric,
        dim: usize,
        sample: &[f32],
        nlist: usize,
        seed: u64,
    ) -> VectorCodebook {
        let space = Space::fit(metric, dim, sample);
        let mut mapped = Vec::with_capacity(sample.len() + sample.len() / dim.max(1));
        for v in sample.chunks_exact(dim.max(1)) {
            space.data(v, &mut mapped);
        }
        let sd = space.graph_dim();
        let centroids = Centroids::train(&mapped, sd, nlist, seed);
        let mut residuals = Vec::with_capacity(mapped.len());
        for v in mapped.chunks_exact(sd.max(1)) {
            let c = centroids.assign(v) as usize;
            let at = &centroids.centroids[c * sd..(c + 1) * sd];
            residuals.extend(v.iter().zip(at).map(|(x, m)| x - m));
        }
        VectorCodebook {
            quantizer: Quantizer::fit(sd, &residuals),
            space,
            centroids,
            seed,
            sample: (sample.len() / dim.max(1)) as u64,
        }
    }

    /// The object's bytes and their SHA-256 (hex).
    pub fn write(&self) -> (Vec<u8>, String) {
        let sd = self.space.graph_dim();
        let mut o = Vec::new();
        o.extend_from_slice(MAGIC);
        o.extend_from_slice(&[VERSION, self.space.metric.code(), 0, 0]);
        for v in [
            self.space.dim as u32,
            sd as u32,
            self.centroids.nlist() as u32,
            0,
        ] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(&self.seed.to_le_bytes());
        o.extend_from_slice(&self.sample.to_le_bytes());
        o.extend_from_slice(&self.space.phi.to_le_bytes());
        for x in self
            .quantizer
            .min
            .iter()
            .chain(&self.quantizer.scale)
            .chain(&self.centroids.centroids)
        {
            o.extend_from_slice(&x.to_le_bytes());
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
        if head[0] != VERSION {
            return Err(BlobError::Corrupt("vector codebook version"));
        }
        let metric =
            Metric::from_code(head[1]).ok_or(BlobError::Corrupt("vector codebook metric"))?;
        let (dim, sd, nlist) = (c.u32()? as u64, c.u32()? as u64, c.u32()? as u64);
        c.u32()?;
        let (seed, sample, phi) = (c.u64()?, c.u64()?, c.f32()?);
        let want_sd = dim + u64::from(metric == Metric::Dot);
        let floats = nlist.checked_add(2).and_then(|n| n.checked_mul(sd));
        if sd != want_sd
            || floats.and_then(|f| f.checked_mul(4)) != Some((bytes.len() - c.at) as u64)
        {
            return Err(BlobError::Corrupt("vector codebook length"));
        }
        let sd = sd as usize;
        let mut f = |n: usize| -> Result<Vec<f32>, BlobError> { (0..n).map(|_| c.f32()).collect() };
        let min = f(sd)?;
        let scale = f(sd)?;
        let centroids = f(nlist as usize * sd)?;
        Ok(VectorCodebook {
            space: Space {
                metric,
                dim: dim as usize,
                phi,
            },
            centroids: Centroids { dim: sd, centroids },
            quantizer: Quantizer { min, scale },
            seed,
            sample,
        })
    }
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
        for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
            let v = sample(500, 6);
            let a = VectorCodebook::train(metric, 6, &v, 12, 3);
            assert_eq!(
                a,
                VectorCodebook::train(metric, 6, &v, 12, 3),
                "deterministic"
            );
            assert_eq!((a.centroids.nlist(), a.sample), (12, 500));
            assert_eq!(a.centroids.dim, 6 + usize::from(metric == Metric::Dot));
            let (bytes, sha) = a.write();
            assert_eq!(VectorCodebook::parse(&bytes, Some(&sha)).unwrap(), a);
        }
    }

    #[test]
    fn refuses_damage_without_panicking() {
        let (bytes, sha) = VectorCodebook::train(Metric::L2, 4, &sample(100, 4), 5, 1).write();
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
