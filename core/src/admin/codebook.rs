//! A vector index's codebook (RFC 0001, decision 54): trained once, by the first build that
//! sees a vector, on a sample of the table; written as an object under `codebooks/`, named
//! by its SHA-256 and recorded in the index's catalog record (so the published manifest,
//! every build step, fan-out worker and `verify` use the same one).
//!
//! The sample is deterministic: the table's files in path order (with the files a
//! registration is adding), the first `⌈S / files⌉` rows of each, where `S` =
//! max([`MIN_SAMPLE`], [`SAMPLE_PER_CENTROID`] · nlist) and nlist = 4·√rows. Only the vector
//! column of those rows is read. NULL and non-finite vectors, and vectors of another
//! dimension than the first one met, are not sampled (a table with vectors of several
//! dimensions poisons its index at the end of the build).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::admin::catalog::IndexRecord;
use crate::error::{Error, Result};
use crate::formats::manifest::CodebookRef;
use crate::index::kind::Input;
use crate::index::vector::codebook::{default_bits, Trained, VectorCodebook, MAX_BYTES};
use crate::index::vector::{vector_of_entry, MIN_SAMPLE, SAMPLE_PER_CENTROID, SEED};
use crate::io::{Location, ObjectStoreReader, RangeReader};

/// Codebooks loaded by a process (few: one per vector index), by SHA-256.
#[derive(Default)]
pub struct Codebooks {
    loaded: Mutex<HashMap<String, Arc<Trained>>>,
}

/// Codebooks a process keeps loaded at most (the oldest ones are dropped first).
const KEEP: usize = 16;

impl Codebooks {
    /// The codebook `c`, loaded from `reader` (the overlay store) once and checked against
    /// its SHA-256: `E_MANIFEST` when it is missing, too large or damaged.
    pub async fn load(&self, reader: &ObjectStoreReader, c: &CodebookRef) -> Result<Arc<Trained>> {
        if let Some(t) = self.loaded.lock().expect("codebooks").get(&c.sha256) {
            return Ok(t.clone());
        }
        if c.size > MAX_BYTES {
            return Err(Error::Manifest(format!(
                "codebook {} is {} bytes (at most {MAX_BYTES})",
                c.path, c.size
            )));
        }
        let bytes = reader
            .read_all_max(&Location::new(&c.path), c.size)
            .await
            .map_err(|e| Error::Manifest(format!("codebook {}: {e}", c.path)))?;
        let t = Trained::parse(&bytes, &c.sha256)
            .map_err(|e| Error::Manifest(format!("codebook {}: {e}", c.path)))?;
        let t = Arc::new(t);
        let mut m = self.loaded.lock().expect("codebooks");
        if m.len() >= KEEP {
            m.clear();
        }
        m.insert(c.sha256.clone(), t.clone());
        Ok(t)
    }

    /// The codebooks of `indexes` that have one, by index id.
    pub async fn of(
        &self,
        reader: &ObjectStoreReader,
        indexes: &[IndexRecord],
    ) -> Result<HashMap<u64, Arc<Trained>>> {
        let mut out = HashMap::new();
        for ix in indexes {
            if let Some(c) = &ix.codebook {
                out.insert(ix.index_id, self.load(reader, c).await?);
            }
        }
        Ok(out)
    }
}

/// Whether `ix` is a vector index (what needs a codebook).
pub(crate) fn is_vector(ix: &IndexRecord) -> bool {
    ix.kind().kind().is_some_and(|k| k.input() == Input::Vector)
}

/// What a training samples of a table of `rows` rows in `files` files: `nlist` and the rows
/// read from the start of each file (see the module docs).
pub(crate) fn sample_plan(rows: u64, files: usize) -> (usize, u64) {
    let nlist = skerry_vector::ivf::default_nlist(rows);
    let want = (SAMPLE_PER_CENTROID * nlist as u64)
        .max(MIN_SAMPLE)
        .min(rows);
    (nlist, want.div_ceil(files.max(1) as u64))
}

/// Where a codebook object is written: under `codebooks/`, named by its table, index and hash.
pub(crate) fn object_path(table_id: u64, index_id: u64, t: &Trained) -> CodebookRef {
    let sha = t.sha256();
    CodebookRef {
        path: format!("codebooks/{table_id}/{index_id}/{}.skcb", &sha[..32]),
        size: t.bytes.len() as u64,
        sha256: sha,
    }
}

/// The finite vectors of build entries (ascending by position), appended to `sample` when of
/// the dimension `dim` takes from the first one.
pub(crate) fn sample_entries(
    keys: &[(Vec<u8>, u64)],
    dim: &mut Option<usize>,
    sample: &mut Vec<f32>,
) {
    let mut vs: Vec<(u64, Vec<f32>)> = keys
        .iter()
        .filter_map(|(k, p)| vector_of_entry(k).map(|v| (*p, v)))
        .filter(|(_, v)| skerry_vector::finite(v))
        .collect();
    vs.sort_by_key(|v| v.0);
    for (_, v) in vs {
        if *dim.get_or_insert(v.len()) == v.len() {
            sample.extend_from_slice(&v);
        }
    }
}

/// Trains a codebook off the async runtime (seconds of CPU at millions of rows).
pub(crate) async fn train(
    metric: skerry_vector::Metric,
    dim: usize,
    sample: Vec<f32>,
    nlist: usize,
) -> Result<Trained> {
    let work = move || {
        Trained::new(VectorCodebook::train(
            metric,
            dim,
            &sample,
            nlist,
            SEED,
            default_bits(metric),
        ))
    };
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| Error::Invalid("codebook training panicked".into()))
}
