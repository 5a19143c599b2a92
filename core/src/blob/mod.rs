//! Index blob formats, one module per index kind (writer and reader side by side).

pub mod ordered;
