//! `skerry-vector-v1`: an HNSW graph over 8-bit codes of one data file's vectors, laid out
//! for byte-range reads (`docs/vector-index.md` has the byte layout).
//!
//! ```text
//! blob      = level-0 blocks ‖ raw vectors ‖ directory ‖ u64 directory_offset ‖ "SKV1"
//! directory = "SKVD" u8 version u8 metric u16 0
//!             u32 dim u32 graph_dim u16 m u16 ef_construction u16 block_nodes u16 0
//!             u64 rows u32 nodes u32 entry u8 max_level u8 0 u16 0 f32 phi
//!             graph_dim × f32 min, graph_dim × f32 scale
//!             u32 skipped_len, skipped (a portable RoaringTreemap of positions without a vector)
//!             u32 upper_nodes, per node (ascending): u32 node u8 level code[graph_dim]
//!                                                  level × (u8 degree, degree × u32)
//!             u32 blocks, per block: u64 offset u32 length u32 crc32
//!             u64 raw_offset u64 raw_length
//! block     = per node (block_nodes consecutive nodes): code[graph_dim] u32 raw_crc32
//!                                                      u8 degree degree × u32
//! raw       = per node: dim × f32 (little-endian), the vector as the file holds it
//! ```
//!
//! Node `i` is the `i`-th row of the file with a finite vector (NULLs and vectors holding a
//! NaN or an infinity are `skipped`); its position is the `i`-th position not in `skipped`.
//! All integers little-endian. A reader checks the directory against the manifest's SHA-256,
//! each block against its CRC-32 and each raw vector against the CRC-32 beside its code;
//! every count is bounded by the blob's length before anything is allocated.

use std::ops::Range;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skerry_vector::{Metric, Params, Quantizer, Space};

use crate::index::ordered::BlobError;

pub mod codebook;
pub mod ivf;

pub const BLOB_TYPE: &str = "skerry-vector-v1";
pub const MAGIC: &[u8; 4] = b"SKV1";
pub const DIRECTORY_MAGIC: &[u8; 4] = b"SKVD";
pub const VERSION: u8 = 1;
/// Nodes per level-0 block (one range read).
pub const BLOCK_NODES: usize = 64;
/// Links per node above level 0 by default (level 0 keeps twice as many).
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
/// Candidates a search keeps by default (before exact re-ranking).
pub const DEFAULT_EF: usize = 100;
/// Widest vectors indexed: a vector's build entry (`1 + 4·dim` bytes) must fit the
/// ordered writer's entry cap, which staged builds keep their slices in.
pub const MAX_DIM: usize = (crate::values::MAX_KEY_BYTES - 1) / 4;
/// The seed of every graph (bundles are reproducible).
pub const SEED: u64 = 0x5ee7_5eed_0000_0001;

/// A vector index's definition: its metric and graph parameters.
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

/// A written blob and the facts the manifest records about it.
#[derive(Clone, Debug)]
pub struct VectorBlob {
    pub bytes: Vec<u8>,
    pub directory: Range<u64>,
    pub directory_sha256: String,
    pub nodes: u64,
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
}

/// Threads a graph build searches with (the graph does not depend on them): the machine's
/// cores natively, one in wasm (which has no threads).
fn build_threads() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        1
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Writes the blob of a file of `rows` rows whose vectors are `vectors`
/// (`(position, vector)`, positions ascending; `None` for NULL).
pub fn write(
    spec: &VectorSpec,
    rows: u64,
    vectors: &[(u64, Option<Vec<f32>>)],
) -> Result<VectorBlob, WriteError> {
    let mut dim = None;
    let mut skipped = RoaringTreemap::new();
    let mut flat: Vec<f32> = Vec::new();
    let mut seen = 0u64;
    for (p, v) in vectors {
        while seen < *p {
            skipped.insert(seen);
            seen += 1;
        }
        seen = p + 1;
        match v {
            Some(v) if skerry_vector::finite(v) => {
                match dim {
                    None => {
                        if v.len() > MAX_DIM {
                            return Err(WriteError::TooWide(v.len()));
                        }
                        dim = Some(v.len());
                    }
                    Some(d) if d != v.len() => return Err(WriteError::Ragged(d, v.len())),
                    _ => {}
                }
                flat.extend_from_slice(v);
            }
            _ => {
                skipped.insert(*p);
            }
        }
    }
    while seen < rows {
        skipped.insert(seen);
        seen += 1;
    }
    let dim = dim.unwrap_or(0);
    let n = if dim == 0 { 0 } else { flat.len() / dim };
    if n > u32::MAX as usize {
        return Err(WriteError::TooMany);
    }
    let metric = spec.metric.metric();
    let space = Space::fit(metric, dim, &flat);
    let gd = if n == 0 { 0 } else { space.graph_dim() };
    let mut gv: Vec<f32> = Vec::with_capacity(n * gd);
    for v in flat.chunks_exact(dim.max(1)).take(n) {
        space.data(v, &mut gv);
    }
    let graph = skerry_vector::build(
        &gv,
        gd,
        Params {
            m: spec.m as usize,
            ef_construction: spec.ef_construction as usize,
            seed: SEED,
        },
        build_threads(),
    );
    let q = Quantizer::fit(gd, &gv);
    let mut codes: Vec<u8> = Vec::with_capacity(n * gd);
    for v in gv.chunks_exact(gd.max(1)).take(n) {
        q.encode(v, &mut codes);
    }
    drop(gv);
    let code = |i: usize| &codes[i * gd..(i + 1) * gd];
    let raw_of = |i: usize| &flat[i * dim..(i + 1) * dim];

    let mut out: Vec<u8> = Vec::new();
    // Level-0 blocks.
    let mut blocks: Vec<(u64, u32, u32)> = Vec::new();
    let mut start = 0usize;
    while start < n {
        let end = (start + BLOCK_NODES).min(n);
        let b0 = out.len();
        for i in start..end {
            out.extend_from_slice(code(i));
            out.extend_from_slice(&crc32fast::hash(&to_bytes(raw_of(i))).to_le_bytes());
            let links = &graph.level0[i];
            out.push(links.len() as u8);
            for l in links {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
        blocks.push((
            b0 as u64,
            (out.len() - b0) as u32,
            crc32fast::hash(&out[b0..]),
        ));
        start = end;
    }
    // Raw vectors.
    let raw_offset = out.len() as u64;
    for x in flat.iter().take(n * dim) {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let raw_length = out.len() as u64 - raw_offset;
    // Directory.
    let d0 = out.len();
    out.extend_from_slice(DIRECTORY_MAGIC);
    out.push(VERSION);
    out.push(metric.code());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(gd as u32).to_le_bytes());
    out.extend_from_slice(&spec.m.to_le_bytes());
    out.extend_from_slice(&spec.ef_construction.to_le_bytes());
    out.extend_from_slice(&(BLOCK_NODES as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&graph.entry.to_le_bytes());
    out.push(graph.max_level);
    out.push(0);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&space.phi.to_le_bytes());
    for x in q.min.iter().chain(&q.scale) {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let mut sk = Vec::new();
    skipped
        .serialize_into(&mut sk)
        .expect("writing to a vector");
    out.extend_from_slice(&(sk.len() as u32).to_le_bytes());
    out.extend_from_slice(&sk);
    let upper: Vec<usize> = (0..n).filter(|&i| graph.levels[i] > 0).collect();
    out.extend_from_slice(&(upper.len() as u32).to_le_bytes());
    for &i in &upper {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.push(graph.levels[i]);
        out.extend_from_slice(code(i));
        for links in &graph.upper[i] {
            out.push(links.len() as u8);
            for l in links {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    for (o, l, c) in &blocks {
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
        out.extend_from_slice(&c.to_le_bytes());
    }
    out.extend_from_slice(&raw_offset.to_le_bytes());
    out.extend_from_slice(&raw_length.to_le_bytes());
    let d1 = out.len();
    let sha = hex::encode(Sha256::digest(&out[d0..d1]));
    out.extend_from_slice(&(d0 as u64).to_le_bytes());
    out.extend_from_slice(MAGIC);
    Ok(VectorBlob {
        bytes: out,
        directory: d0 as u64..d1 as u64,
        directory_sha256: sha,
        nodes: n as u64,
    })
}

/// A node above level 0: its codes and links per level.
#[derive(Clone, Debug, PartialEq)]
pub struct UpperNode {
    pub level: u8,
    pub code: Vec<u8>,
    pub links: Vec<Vec<u32>>,
}

/// Where a level-0 block is in the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    pub offset: u64,
    pub length: u32,
    pub crc32: u32,
}

/// A parsed, checked directory.
#[derive(Clone, Debug)]
pub struct VectorDirectory {
    pub metric: Metric,
    pub dim: usize,
    pub graph_dim: usize,
    pub m: u16,
    pub ef_construction: u16,
    pub block_nodes: usize,
    pub rows: u64,
    pub nodes: u32,
    pub entry: u32,
    pub max_level: u8,
    pub space: Space,
    pub quantizer: Quantizer,
    pub skipped: RoaringTreemap,
    pub upper: std::collections::HashMap<u32, UpperNode>,
    pub blocks: Vec<BlockRef>,
    pub raw: Range<u64>,
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BlobError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or(BlobError::Corrupt("vector directory truncated"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, BlobError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, BlobError> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, BlobError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, BlobError> {
        let s = self.take(8)?;
        Ok(u64::from_le_bytes(s.try_into().expect("8 bytes")))
    }
    fn f32(&mut self) -> Result<f32, BlobError> {
        Ok(f32::from_bits(self.u32()?))
    }
    fn left(&self) -> usize {
        self.b.len() - self.at
    }
}

impl VectorDirectory {
    /// Parses the directory `bytes` of a blob of `blob_length` bytes, checked against
    /// `sha256` when given. Never panics; allocates only what `bytes` can hold.
    pub fn parse(
        bytes: &[u8],
        sha256: Option<&str>,
        blob_length: u64,
    ) -> Result<VectorDirectory, BlobError> {
        super::blob::check_sha256(bytes, sha256, "vector directory")?;
        let mut c = Cur { b: bytes, at: 0 };
        if c.take(4)? != DIRECTORY_MAGIC {
            return Err(BlobError::Corrupt("not a vector directory"));
        }
        if c.u8()? != VERSION {
            return Err(BlobError::Corrupt("unknown vector directory version"));
        }
        let metric = Metric::from_code(c.u8()?).ok_or(BlobError::Corrupt("unknown metric"))?;
        c.u16()?;
        let dim = c.u32()? as usize;
        let graph_dim = c.u32()? as usize;
        let m = c.u16()?;
        let ef_construction = c.u16()?;
        let block_nodes = c.u16()? as usize;
        c.u16()?;
        let rows = c.u64()?;
        let nodes = c.u32()?;
        let entry = c.u32()?;
        let max_level = c.u8()?;
        c.u8()?;
        c.u16()?;
        let phi = c.f32()?;
        let want_gd = if nodes == 0 {
            0
        } else {
            dim + usize::from(metric == Metric::Dot)
        };
        if dim > MAX_DIM
            || graph_dim != want_gd
            || (nodes > 0 && (dim == 0 || entry >= nodes || block_nodes == 0))
            || m < 2
            || m > 127
            || max_level > skerry_vector::MAX_LEVEL
            || u64::from(nodes) > rows
            || !phi.is_finite()
        {
            return Err(BlobError::Corrupt("vector directory header out of range"));
        }
        let mut min = Vec::with_capacity(graph_dim.min(c.left() / 4));
        for _ in 0..graph_dim {
            min.push(c.f32()?);
        }
        let mut scale = Vec::with_capacity(graph_dim.min(c.left() / 4));
        for _ in 0..graph_dim {
            scale.push(c.f32()?);
        }
        if min.iter().chain(&scale).any(|x| !x.is_finite()) || scale.iter().any(|s| *s < 0.0) {
            return Err(BlobError::Corrupt("vector quantizer out of range"));
        }
        let sk_len = c.u32()? as usize;
        let skipped = RoaringTreemap::deserialize_from(c.take(sk_len)?)
            .map_err(|_| BlobError::Corrupt("vector skipped rows"))?;
        if skipped.len() + u64::from(nodes) != rows || skipped.max().is_some_and(|x| x >= rows) {
            return Err(BlobError::Corrupt(
                "vector skipped rows disagree with the rows",
            ));
        }
        let m0 = 2 * m as usize;
        let n_upper = c.u32()? as usize;
        if n_upper > nodes as usize || n_upper > c.left() / (5 + graph_dim).max(1) {
            return Err(BlobError::Corrupt("vector upper levels out of range"));
        }
        let mut upper = std::collections::HashMap::with_capacity(n_upper);
        let mut last: Option<u32> = None;
        for _ in 0..n_upper {
            let node = c.u32()?;
            let level = c.u8()?;
            if node >= nodes || last.is_some_and(|l| node <= l) || level == 0 || level > max_level {
                return Err(BlobError::Corrupt("vector upper node out of range"));
            }
            last = Some(node);
            let code = c.take(graph_dim)?.to_vec();
            let mut links = Vec::with_capacity(level as usize);
            for _ in 0..level {
                let deg = c.u8()? as usize;
                if deg > m as usize {
                    return Err(BlobError::Corrupt("vector upper degree out of range"));
                }
                let raw = c.take(deg * 4)?;
                let l: Vec<u32> = raw
                    .chunks_exact(4)
                    .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                    .collect();
                if l.iter().any(|x| *x >= nodes) {
                    return Err(BlobError::Corrupt("vector link out of range"));
                }
                links.push(l);
            }
            upper.insert(node, UpperNode { level, code, links });
        }
        // Every upper link must name a node that has the level.
        for u in upper.values() {
            for (li, l) in u.links.iter().enumerate() {
                let lv = li as u8 + 1;
                if l.iter().any(|x| upper.get(x).is_none_or(|t| t.level < lv)) {
                    return Err(BlobError::Corrupt("vector upper link to a lower node"));
                }
            }
        }
        if nodes > 0 && max_level > 0 && upper.get(&entry).is_none_or(|u| u.level != max_level) {
            return Err(BlobError::Corrupt(
                "vector entry point is not at the top level",
            ));
        }
        let n_blocks = c.u32()? as usize;
        let want_blocks = if nodes == 0 {
            0
        } else {
            (nodes as usize).div_ceil(block_nodes)
        };
        if n_blocks != want_blocks || n_blocks > c.left() / 16 {
            return Err(BlobError::Corrupt("vector block count"));
        }
        let mut blocks = Vec::with_capacity(n_blocks);
        let per_node_min = graph_dim as u64 + 5;
        for b in 0..n_blocks {
            let offset = c.u64()?;
            let length = c.u32()?;
            let crc32 = c.u32()?;
            let count = block_nodes.min(nodes as usize - b * block_nodes) as u64;
            let max = count * (per_node_min + 4 * m0 as u64);
            if offset
                .checked_add(u64::from(length))
                .is_none_or(|e| e > blob_length)
                || u64::from(length) < count * per_node_min
                || u64::from(length) > max
            {
                return Err(BlobError::Corrupt("vector block outside the blob"));
            }
            blocks.push(BlockRef {
                offset,
                length,
                crc32,
            });
        }
        let raw_offset = c.u64()?;
        let raw_length = c.u64()?;
        if raw_offset
            .checked_add(raw_length)
            .is_none_or(|e| e > blob_length)
            || raw_length != u64::from(nodes) * dim as u64 * 4
        {
            return Err(BlobError::Corrupt("vector raw region outside the blob"));
        }
        if c.left() != 0 {
            return Err(BlobError::Corrupt("bytes after the vector directory"));
        }
        Ok(VectorDirectory {
            metric,
            dim,
            graph_dim,
            m,
            ef_construction,
            block_nodes,
            rows,
            nodes,
            entry,
            max_level,
            space: Space { metric, dim, phi },
            quantizer: Quantizer { min, scale },
            skipped,
            upper,
            blocks,
            raw: raw_offset..raw_offset + raw_length,
        })
    }

    /// The node of a row position (`None`: the row has no vector).
    pub fn node_of(&self, position: u64) -> Option<u32> {
        if position >= self.rows || self.skipped.contains(position) {
            return None;
        }
        let below = if position == 0 {
            0
        } else {
            self.skipped.rank(position - 1)
        };
        u32::try_from(position - below).ok()
    }

    /// The row position of a node.
    pub fn position_of(&self, node: u32) -> u64 {
        if self.skipped.is_empty() {
            return u64::from(node);
        }
        // The smallest p with p − skipped_below(p) = node, p not skipped: binary search on
        // the count of kept rows up to p.
        let (mut lo, mut hi) = (u64::from(node), self.rows.saturating_sub(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let kept = mid + 1 - self.skipped.rank(mid);
            if kept > u64::from(node) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The bytes `node`'s raw vector occupies in the blob.
    pub fn raw_range(&self, node: u32) -> Range<u64> {
        let s = self.raw.start + u64::from(node) * self.dim as u64 * 4;
        s..s + self.dim as u64 * 4
    }

    /// Approximate bytes held in memory (for the cache's budget).
    pub fn heap_bytes(&self) -> u64 {
        let upper: usize = self
            .upper
            .values()
            .map(|u| 48 + u.code.len() + u.links.iter().map(|l| 24 + 4 * l.len()).sum::<usize>())
            .sum();
        (256 + upper + self.blocks.len() * 16 + self.graph_dim * 8 + self.skipped.serialized_size())
            as u64
    }
}

/// A parsed, checked level-0 block.
#[derive(Clone, Debug)]
pub struct Level0Block {
    pub first: u32,
    pub graph_dim: usize,
    pub codes: Vec<u8>,
    pub raw_crc: Vec<u32>,
    /// `links[starts[i]..starts[i + 1]]` are node `first + i`'s links.
    pub starts: Vec<u32>,
    pub links: Vec<u32>,
}

impl Level0Block {
    /// Parses block `b` of `dir` from its bytes.
    pub fn parse(dir: &VectorDirectory, b: usize, bytes: &[u8]) -> Result<Level0Block, BlobError> {
        let r = dir
            .blocks
            .get(b)
            .ok_or(BlobError::Corrupt("vector block number"))?;
        if bytes.len() != r.length as usize {
            return Err(BlobError::Corrupt("vector block length"));
        }
        if crc32fast::hash(bytes) != r.crc32 {
            return Err(BlobError::Checksum("vector block"));
        }
        let first = (b * dir.block_nodes) as u32;
        let count = dir.block_nodes.min((dir.nodes - first) as usize);
        let gd = dir.graph_dim;
        let m0 = 2 * dir.m as usize;
        let mut c = Cur { b: bytes, at: 0 };
        let mut codes = Vec::with_capacity(count * gd);
        let mut raw_crc = Vec::with_capacity(count);
        let mut starts = Vec::with_capacity(count + 1);
        let mut links = Vec::with_capacity(count * m0);
        starts.push(0u32);
        for _ in 0..count {
            codes.extend_from_slice(c.take(gd)?);
            raw_crc.push(c.u32()?);
            let deg = c.u8()? as usize;
            if deg > m0 {
                return Err(BlobError::Corrupt("vector degree out of range"));
            }
            for _ in 0..deg {
                let l = c.u32()?;
                if l >= dir.nodes {
                    return Err(BlobError::Corrupt("vector link out of range"));
                }
                links.push(l);
            }
            starts.push(links.len() as u32);
        }
        if c.left() != 0 {
            return Err(BlobError::Corrupt("bytes after a vector block's nodes"));
        }
        Ok(Level0Block {
            first,
            graph_dim: gd,
            codes,
            raw_crc,
            starts,
            links,
        })
    }

    /// Node `i`'s codes and links (`i` in this block).
    pub fn node(&self, i: u32) -> Option<(&[u8], &[u32])> {
        let k = i.checked_sub(self.first)? as usize;
        if k + 1 >= self.starts.len() {
            return None;
        }
        let code = &self.codes[k * self.graph_dim..(k + 1) * self.graph_dim];
        let l = &self.links[self.starts[k] as usize..self.starts[k + 1] as usize];
        Some((code, l))
    }

    pub fn heap_bytes(&self) -> u64 {
        (64 + self.codes.len() + 4 * (self.raw_crc.len() + self.starts.len() + self.links.len()))
            as u64
    }
}

/// Node `node`'s raw vector from its bytes, checked against the CRC-32 its block records.
pub fn parse_raw(block: &Level0Block, node: u32, bytes: &[u8]) -> Result<Vec<f32>, BlobError> {
    let k = node
        .checked_sub(block.first)
        .map(|k| k as usize)
        .filter(|k| *k < block.raw_crc.len())
        .ok_or(BlobError::Corrupt("vector node outside its block"))?;
    if crc32fast::hash(bytes) != block.raw_crc[k] {
        return Err(BlobError::Checksum("vector"));
    }
    from_bytes(bytes).ok_or(BlobError::Corrupt("vector length"))
}

/// The directory range of a whole blob, from its trailer.
pub fn directory_range(blob: &[u8]) -> Result<Range<usize>, BlobError> {
    if blob.len() < 12 || &blob[blob.len() - 4..] != MAGIC {
        return Err(BlobError::Corrupt("not a vector blob"));
    }
    let at = blob.len() - 12;
    let d0 = u64::from_le_bytes(blob[at..at + 8].try_into().expect("8 bytes"));
    if d0 > at as u64 {
        return Err(BlobError::Corrupt("vector directory offset"));
    }
    Ok(d0 as usize..at)
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
    ..super::kind::About::new(super::IndexKind::Vector, "vector", BLOB_TYPE, "hnsw-tq8-v1")
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
}

/// The blob of one data file's vectors (by position, in order), and the facts the manifest
/// records about it.
pub fn write_blob(
    spec: &super::IndexSpec,
    src: &super::kind::BlobSource<'_>,
    vs: &[(u64, Option<Vec<f32>>)],
) -> crate::error::Result<(Vec<u8>, super::blob::BlobMeta)> {
    {
        let spec = spec.vector().unwrap_or_default();
        let blob = write(&spec, src.record_count, vs).map_err(|e| {
            crate::error::Error::Invalid(format!(
                "vector index {} over {}: {e}",
                src.index, src.path
            ))
        })?;
        let meta = super::blob::BlobMeta {
            dim: vs
                .iter()
                .find_map(|(_, v)| v.as_ref())
                .and_then(|v| u32::try_from(v.len()).ok()),
            ..super::blob::BlobMeta::new(blob.directory.clone(), &blob.directory_sha256, blob.nodes)
        };
        Ok((blob.bytes, meta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64, dim: usize) -> Vec<(u64, Option<Vec<f32>>)> {
        (0..n)
            .map(|p| {
                if p % 17 == 5 {
                    (p, None)
                } else {
                    let v: Vec<f32> = (0..dim)
                        .map(|d| ((p * 31 + d as u64 * 7) % 97) as f32 / 10.0 - (p % 3) as f32)
                        .collect();
                    (p, Some(v))
                }
            })
            .collect()
    }

    fn parsed(b: &VectorBlob) -> VectorDirectory {
        let d = &b.bytes[b.directory.start as usize..b.directory.end as usize];
        VectorDirectory::parse(d, Some(&b.directory_sha256), b.bytes.len() as u64).unwrap()
    }

    #[test]
    fn round_trip_every_node_and_position() {
        for metric in [MetricName::L2, MetricName::Cosine, MetricName::Dot] {
            let spec = VectorSpec {
                metric,
                ..Default::default()
            };
            let mut rows = sample(700, 9);
            rows[10].1.as_mut().unwrap()[3] = f32::NAN;
            let b = write(&spec, 720, &rows).unwrap();
            assert_eq!(b, write(&spec, 720, &rows).unwrap(), "deterministic");
            let d = parsed(&b);
            assert_eq!(
                directory_range(&b.bytes).unwrap(),
                b.directory.start as usize..b.directory.end as usize
            );
            let kept: Vec<&(u64, Option<Vec<f32>>)> = rows
                .iter()
                .filter(|r| r.1.as_ref().is_some_and(|v| skerry_vector::finite(v)))
                .collect();
            assert_eq!(d.nodes as usize, kept.len());
            assert_eq!(d.rows, 720);
            for (i, r) in kept.iter().enumerate() {
                assert_eq!(d.position_of(i as u32), r.0);
                assert_eq!(d.node_of(r.0), Some(i as u32));
                let blk = i / d.block_nodes;
                let br = d.blocks[blk];
                let bb = &b.bytes[br.offset as usize..br.offset as usize + br.length as usize];
                let block = Level0Block::parse(&d, blk, bb).unwrap();
                let rr = d.raw_range(i as u32);
                let raw = parse_raw(
                    &block,
                    i as u32,
                    &b.bytes[rr.start as usize..rr.end as usize],
                )
                .unwrap();
                assert_eq!(&raw, r.1.as_ref().unwrap());
                assert!(block.node(i as u32).is_some_and(|(_, l)| !l.is_empty()));
            }
            for p in [5u64, 10, 700, 719] {
                assert_eq!(d.node_of(p), None);
            }
        }
    }

    impl PartialEq for VectorBlob {
        fn eq(&self, o: &VectorBlob) -> bool {
            self.bytes == o.bytes && self.directory_sha256 == o.directory_sha256
        }
    }

    #[test]
    fn ragged_and_wide_vectors_are_refused() {
        let spec = VectorSpec::default();
        let rows = vec![(0, Some(vec![1.0, 2.0])), (1, Some(vec![1.0]))];
        assert_eq!(
            write(&spec, 2, &rows).unwrap_err(),
            WriteError::Ragged(2, 1)
        );
        let rows = vec![(0, Some(vec![0.5; MAX_DIM + 1]))];
        assert_eq!(
            write(&spec, 1, &rows).unwrap_err(),
            WriteError::TooWide(MAX_DIM + 1)
        );
        // No vector at all: an empty graph that still parses.
        let b = write(&spec, 3, &[(0, None), (1, None), (2, None)]).unwrap();
        assert_eq!(parsed(&b).nodes, 0);
    }

    #[test]
    fn damaged_directories_and_blocks_are_errors_never_panics() {
        let b = write(&VectorSpec::default(), 300, &sample(300, 5)).unwrap();
        let dir = &b.bytes[b.directory.start as usize..b.directory.end as usize];
        let len = b.bytes.len() as u64;
        for i in 0..dir.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut d = dir.to_vec();
                d[i] ^= flip;
                // With the checksum: always refused.
                assert!(VectorDirectory::parse(&d, Some(&b.directory_sha256), len).is_err());
                // Without it: an error or a directory whose every bound still holds.
                if let Ok(p) = VectorDirectory::parse(&d, None, len) {
                    assert!(p.entry < p.nodes.max(1));
                    assert!(p.raw.end <= len);
                }
            }
        }
        for cut in 0..dir.len() {
            assert!(VectorDirectory::parse(&dir[..cut], None, len).is_err());
        }
        let d = parsed(&b);
        let br = d.blocks[0];
        let bb = &b.bytes[br.offset as usize..br.offset as usize + br.length as usize];
        for i in 0..bb.len() {
            let mut x = bb.to_vec();
            x[i] ^= 0x10;
            assert!(Level0Block::parse(&d, 0, &x).is_err());
        }
        assert!(Level0Block::parse(&d, 0, &bb[..bb.len() - 1]).is_err());
        assert!(Level0Block::parse(&d, 99, bb).is_err());
    }
}
