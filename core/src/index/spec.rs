//! An index definition, spelled once: [`IndexKind`] names what is built per data file,
//! [`IndexSpec`] is the kind with its parameters, and [`IndexOptions`] is what a user asks
//! for (`createIndex`'s options), turned into a spec by the kind ([`IndexSpec::from_options`]).
//!
//! The catalog record, the published manifest and the lineage all carry the same spec. On
//! the wire a spec is *flat* — `kind` (absent: ordered), then the parameters of that kind
//! under the names they have always had (`max_cardinality`, `fpp_ppm`, `fulltext`,
//! `vector`) — so documents written before the spec existed read unchanged and a reader that
//! predates a parameter ignores it (`docs/manifest.md`).

use serde::{Deserialize, Serialize};

use super::analyzer::Tokenizer;
use super::fulltext::FulltextSpec;
use super::vector::{MetricName, VectorSpec};
use super::{bitmap, bloom, kind};
use crate::error::{Error, Result};

/// What an index definition builds per data file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Sorted keys → positions in blocks ([`super::ordered`]).
    #[default]
    Ordered,
    /// Distinct keys → Roaring bitmaps of positions ([`super::bitmap`]).
    Bitmap,
    /// A split-block bloom filter of the keys ([`super::bloom`]): prunes files for `=`/IN,
    /// names no positions.
    Bloom,
    /// An inverted index of a text column's terms ([`super::fulltext`]): answers `search`,
    /// names no key's rows.
    Fulltext,
    /// An HNSW graph over 8-bit codes of a vector column ([`super::vector`]): answers
    /// `nearest`.
    Vector,
    /// The test-only toy kind, an exact set of a file's keys ([`super::valueset`]).
    #[cfg(feature = "test-kinds")]
    Valueset,
    /// A kind written by a newer version: read past (never planned, never built), so a
    /// manifest naming it still serves every other index.
    #[serde(other)]
    Unknown,
}

impl IndexKind {
    /// Parses a kind as hosts spell it (`E_INVALID` names the kinds there are).
    pub fn parse(s: &str) -> Result<IndexKind> {
        kind::KINDS
            .iter()
            .find(|k| k.name() == s)
            .map(|k| k.tag())
            .ok_or_else(|| {
                let names: Vec<&str> = kind::KINDS.iter().map(|k| k.name()).collect();
                Error::Invalid(format!(
                    "unknown index kind {s:?} (kinds: {})",
                    names.join(", ")
                ))
            })
    }

    /// The kind's behaviour ([`kind::Kind`]); `None` for [`IndexKind::Unknown`].
    pub fn kind(self) -> Option<&'static dyn kind::Kind> {
        kind::of(self)
    }

    pub fn name(self) -> &'static str {
        self.kind().map_or("unknown", |k| k.name())
    }

    /// Puffin blob type of the kind's per-file blob.
    pub fn blob_type(self) -> &'static str {
        self.kind().map_or("unknown", |k| k.blob_type())
    }

    /// The lineage's algorithm of the kind's blob.
    pub fn algorithm(self) -> &'static str {
        self.kind().map_or("unknown", |k| k.algorithm())
    }

    pub fn is_ordered(&self) -> bool {
        *self == IndexKind::Ordered
    }

    /// What a read may ask of the kind's blobs (nothing, for a kind this version does not
    /// know).
    pub fn answers(self) -> kind::Answers {
        self.kind().map_or(kind::Answers::NOTHING, |k| k.answers())
    }

    /// Whether the kind's blobs name the rows of a key (a bloom filter only prunes; a
    /// full-text index names the rows of terms, not of the column's values).
    pub fn has_positions(self) -> bool {
        self.answers().rows
    }

    /// Calls `f(key, position)` for every entry of a whole blob of a kind with positions
    /// (verify reads blobs whole).
    pub fn read_entries(
        self,
        blob: &[u8],
        f: &mut dyn FnMut(&[u8], u64),
    ) -> std::result::Result<(), super::ordered::BlobError> {
        match self.kind() {
            Some(k) => k.read_entries(blob, f),
            None => Err(super::ordered::BlobError::Corrupt(
                "an index kind this version does not know",
            )),
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An index definition's kind with its parameters — the one spelling of a definition that
/// the catalog, the manifest, the lineage and every host share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "SpecFields", from = "SpecFields")]
pub enum IndexSpec {
    #[default]
    Ordered,
    /// `max_cardinality`: distinct keys a data file may hold.
    Bitmap {
        max_cardinality: u64,
    },
    /// `fpp_ppm`: the filter's false-positive probability, in parts per million.
    Bloom {
        fpp_ppm: u32,
    },
    Fulltext(FulltextSpec),
    Vector(VectorSpec),
    /// A kind without parameters — or, as [`IndexKind::Unknown`], one written by a newer
    /// version (its parameters are not kept).
    Plain(IndexKind),
}

impl IndexSpec {
    pub fn kind(&self) -> IndexKind {
        match self {
            IndexSpec::Ordered => IndexKind::Ordered,
            IndexSpec::Bitmap { .. } => IndexKind::Bitmap,
            IndexSpec::Bloom { .. } => IndexKind::Bloom,
            IndexSpec::Fulltext(_) => IndexKind::Fulltext,
            IndexSpec::Vector(_) => IndexKind::Vector,
            IndexSpec::Plain(k) => *k,
        }
    }

    /// A full-text definition's analyzer and positions.
    pub fn fulltext(&self) -> Option<FulltextSpec> {
        match self {
            IndexSpec::Fulltext(s) => Some(*s),
            _ => None,
        }
    }

    /// A vector definition's metric and graph parameters.
    pub fn vector(&self) -> Option<VectorSpec> {
        match self {
            IndexSpec::Vector(s) => Some(*s),
            _ => None,
        }
    }

    /// A bloom definition's false-positive probability.
    pub fn fpp_ppm(&self) -> Option<u32> {
        match self {
            IndexSpec::Bloom { fpp_ppm } => Some(*fpp_ppm),
            _ => None,
        }
    }

    /// What `opts` asks for, checked by its kind: `E_INVALID` for an option of another kind,
    /// a value out of range, or `unique` on a kind that cannot refuse duplicates.
    pub fn from_options(opts: &IndexOptions) -> Result<IndexSpec> {
        let Some(k) = opts.kind.kind() else {
            return Err(Error::Unsupported(
                "an index kind this version of Skerry does not know".into(),
            ));
        };
        // Options of other kinds first: they say the most about a mistaken call.
        for other in kind::KINDS.iter().filter(|o| o.tag() != opts.kind) {
            let names = other.options();
            if names.iter().any(|n| opts.is_set(n)) {
                let verb = if names.len() == 1 { "applies" } else { "apply" };
                return Err(Error::Invalid(format!(
                    "{} {verb} to {} indexes, not {}",
                    list(names),
                    other.name(),
                    k.name()
                )));
            }
        }
        if opts.unique {
            if let Some(why) = k.refuses_unique() {
                return Err(Error::Invalid(format!(
                    "a {} index cannot be unique{why}",
                    k.name()
                )));
            }
        }
        k.spec(opts).map_err(Error::Invalid)
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The flat form of an [`IndexSpec`] on the wire (see the module docs).
#[derive(Serialize, Deserialize)]
struct SpecFields {
    #[serde(default, skip_serializing_if = "IndexKind::is_ordered")]
    kind: IndexKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_cardinality: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fpp_ppm: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fulltext: Option<FulltextSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vector: Option<VectorSpec>,
}

impl From<IndexSpec> for SpecFields {
    fn from(s: IndexSpec) -> SpecFields {
        SpecFields {
            kind: s.kind(),
            max_cardinality: match s {
                IndexSpec::Bitmap { max_cardinality } => Some(max_cardinality),
                _ => None,
            },
            fpp_ppm: s.fpp_ppm(),
            fulltext: s.fulltext(),
            vector: s.vector(),
        }
    }
}

impl From<SpecFields> for IndexSpec {
    fn from(f: SpecFields) -> IndexSpec {
        match f.kind {
            IndexKind::Ordered => IndexSpec::Ordered,
            IndexKind::Bitmap => IndexSpec::Bitmap {
                max_cardinality: f.max_cardinality.unwrap_or(bitmap::DEFAULT_MAX_CARDINALITY),
            },
            IndexKind::Bloom => IndexSpec::Bloom {
                fpp_ppm: f.fpp_ppm.unwrap_or(bloom::DEFAULT_FPP_PPM),
            },
            IndexKind::Fulltext => IndexSpec::Fulltext(f.fulltext.unwrap_or_default()),
            IndexKind::Vector => IndexSpec::Vector(f.vector.unwrap_or_default()),
            other => IndexSpec::Plain(other),
        }
    }
}

/// Options of `createIndex`: the kind and the parameters a user may set (each checked by
/// the kind it belongs to, [`super::kind::Kind::options`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexOptions {
    #[serde(default)]
    pub unique: bool,
    /// What to build per data file (default ordered).
    #[serde(default)]
    pub kind: IndexKind,
    /// A bitmap index's limit on distinct keys per data file (default
    /// [`bitmap::DEFAULT_MAX_CARDINALITY`], at most [`bitmap::MAX_CARDINALITY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cardinality: Option<u64>,
    /// A bloom index's false-positive probability (default [`bloom::DEFAULT_FPP`]; between
    /// 0.000001 and 0.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fpp: Option<f64>,
    /// A full-text index's tokenizer (default `simple`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Tokenizer>,
    /// Whether a full-text index keeps word positions for phrase queries (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<bool>,
    /// A vector index's metric (default `l2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<MetricName>,
    /// A vector index's links per node (default 16, 2..=64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<u16>,
    /// A vector index's build-time candidate list (default 100; 200 for `dot`; 8..=2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ef_construction: Option<u16>,
}

impl IndexOptions {
    /// An ordered index refusing duplicate keys.
    pub fn unique() -> IndexOptions {
        IndexOptions {
            unique: true,
            ..Default::default()
        }
    }

    /// Whether the option a host spells `name` is set.
    pub fn is_set(&self, name: &str) -> bool {
        match name {
            "maxCardinality" => self.max_cardinality.is_some(),
            "fpp" => self.fpp.is_some(),
            "tokenizer" => self.tokenizer.is_some(),
            "positions" => self.positions.is_some(),
            "metric" => self.metric.is_some(),
            "m" => self.m.is_some(),
            "efConstruction" => self.ef_construction.is_some(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_form_reads_what_records_always_held() {
        // Written before the spec existed (a catalog record's fields).
        let old = r#"{"kind":"bitmap","max_cardinality":50}"#;
        let s: IndexSpec = serde_json::from_str(old).unwrap();
        assert_eq!(
            s,
            IndexSpec::Bitmap {
                max_cardinality: 50
            }
        );
        assert_eq!(serde_json::to_string(&s).unwrap(), old);
        let s: IndexSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(s, IndexSpec::Ordered);
        assert_eq!(serde_json::to_string(&s).unwrap(), "{}");
        let s: IndexSpec = serde_json::from_str(r#"{"kind":"ordered"}"#).unwrap();
        assert_eq!(s, IndexSpec::Ordered);
        let s: IndexSpec = serde_json::from_str(
            r#"{"kind":"fulltext","fulltext":{"tokenizer":"english","positions":false}}"#,
        )
        .unwrap();
        assert_eq!(s.fulltext().unwrap().tokenizer, Tokenizer::English);
        let s: IndexSpec = serde_json::from_str(r#"{"kind":"sparse","sparse":{"x":1}}"#).unwrap();
        assert_eq!(s, IndexSpec::Plain(IndexKind::Unknown));
        // A manifest of before the spec carried no bloom fpp: the default is assumed.
        let s: IndexSpec = serde_json::from_str(r#"{"kind":"bloom"}"#).unwrap();
        assert_eq!(s.fpp_ppm(), Some(bloom::DEFAULT_FPP_PPM));
    }

    #[test]
    fn the_previous_reader_reads_the_new_form() {
        // The fields a reader of the previous version knew (`IndexManifest` before the spec);
        // like it, this struct ignores what it does not know.
        #[derive(serde::Deserialize)]
        struct Previous {
            #[serde(default)]
            kind: IndexKind,
            fulltext: Option<FulltextSpec>,
            vector: Option<VectorSpec>,
        }
        for spec in [
            IndexSpec::Ordered,
            IndexSpec::Bitmap {
                max_cardinality: 50,
            },
            IndexSpec::Bloom { fpp_ppm: 1_000 },
            IndexSpec::Fulltext(FulltextSpec {
                tokenizer: Tokenizer::English,
                positions: false,
            }),
            IndexSpec::Vector(VectorSpec::default()),
        ] {
            let json = serde_json::to_string(&spec).unwrap();
            let old: Previous = serde_json::from_str(&json).unwrap();
            assert_eq!(old.kind, spec.kind(), "{json}");
            assert_eq!(old.fulltext, spec.fulltext(), "{json}");
            assert_eq!(old.vector, spec.vector(), "{json}");
            assert_eq!(serde_json::from_str::<IndexSpec>(&json).unwrap(), spec);
        }
    }

    #[test]
    fn options_of_another_kind_are_refused_by_name() {
        let e = IndexSpec::from_options(&IndexOptions {
            m: Some(8),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid argument: metric, m and efConstruction apply to vector indexes, not ordered"
        );
        let e = IndexSpec::from_options(&IndexOptions {
            kind: IndexKind::Ordered,
            fpp: Some(0.1),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("fpp applies to bloom indexes"));
    }
}
