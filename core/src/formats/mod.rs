//! Skerry's byte formats, each a versioned contract with its own page in `docs/`:
//!
//! - [`key_encoding`]: canonical, order-preserving key bytes (`docs/key-encoding.md`);
//! - [`puffin`]: the Iceberg Puffin container, writer and reader (`docs/puffin.md`), with its
//!   bounded compression [`codec`]s;
//! - [`lineage`]: the `IndexFile` lineage record and the read gate (`docs/lineage.md`);
//! - [`manifest`]: the published read model (`docs/manifest.md`);
//! - [`rowset`]: row-id summaries and delete masks;
//! - [`iceberg`]: reading upstream Iceberg tables (metadata, manifest lists, manifests;
//!   `docs/iceberg.md`).
//!
//! Index blob formats live by kind in [`crate::index`].

pub mod codec;
pub mod iceberg;
pub mod key_encoding;
pub mod lineage;
pub mod manifest;
pub mod puffin;
pub mod rowset;
