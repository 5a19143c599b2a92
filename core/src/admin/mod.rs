//! Native administration (feature `native`): the SlateDB [`catalog`], the [`overlay`] verbs
//! (register, create/drop index, publish, refresh), mounting read-only [`iceberg`] tables, [`build`] in bounded steps,
//! [`lifecycle`] (new files, deletes, vacuum, verify), the [`repair`] queue, and [`sample`]
//! data for examples and tests.

pub(crate) mod bitmap_run;
pub mod build;
pub(crate) mod carry;
pub(crate) mod catalog;
pub mod codebook;
pub mod fanout;
pub mod file_build;
pub(crate) mod fulltext_run;
pub mod iceberg;
pub mod lifecycle;
pub(crate) mod merge;
pub mod moves;
pub mod overlay;
pub mod repair;
pub mod rewrite;
pub(crate) mod run_bundle;
pub mod run_tasks;
pub(crate) mod runs;
pub mod sample;
pub(crate) mod schema;
pub(crate) mod unique;
pub(crate) mod vector_run;

pub use catalog::IndexRecord;
