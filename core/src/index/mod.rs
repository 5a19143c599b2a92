//! Index kinds, one module each: the blob layout (writer and reader side by side) and what a
//! read asks of it. `ordered` is the first kind (`docs/ordered-index.md`); the kind trait
//! arrives with the second.

pub mod ordered;
