//! Index kinds, one module each: the blob layout (writer and reader side by side) and what a
//! read asks of it. [`Kind`] is the seam and [`KINDS`] the one registry: a definition is an
//! [`IndexSpec`] (its kind and parameters, spelled once for catalog, manifest and lineage),
//! the build asks the kind to write its blob from the file's entries, the manifest carries
//! the spec so readers decode the blob the kind wrote, and the planner asks the kind what it
//! answers. `ordered` (`docs/ordered-index.md`) serves `=`, IN, ranges and IS NULL on any
//! key; `bitmap` (`docs/bitmap-index.md`) serves the same on low-cardinality keys and answers
//! counts from its directory; `bloom` (`docs/bloom-index.md`) prunes files for `=`/IN on
//! high-cardinality keys, striped so one range read prunes every file of a table;
//! `fulltext` (`docs/fulltext-index.md`) answers BM25 searches over a text column;
//! `vector` (`docs/vector-index.md`) answers k-nearest-neighbour searches over a vector column.

pub mod access;
pub mod analyzer;
pub mod bitmap;
pub mod blob;
pub mod bloom;
pub mod fulltext;
pub mod kind;
pub mod ordered;
pub mod spec;
#[cfg(feature = "test-kinds")]
pub mod valueset;
pub mod vector;

pub use kind::{Kind, KINDS};
pub use spec::{IndexKind, IndexOptions, IndexSpec};

/// The Fx hash (rustc's): the keys and terms of one file need speed, not DoS resistance.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for b in chunks.remainder() {
            self.add(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
