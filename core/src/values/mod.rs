//! Values and schemas: what a key column is, what a value is, how values compare and how loose
//! host values become a column's type. Everything above builds on this layer; it depends on
//! nothing else in the crate.

pub mod names;
mod schema;
mod value;

pub use schema::FieldInfo;
pub use value::*;
