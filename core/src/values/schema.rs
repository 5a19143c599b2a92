//! The columns of a table as Skerry records them: field id, name, type and key type.

use serde::{Deserialize, Serialize};

use super::KeyType;

/// One top-level column of a table, identified by its Iceberg field id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldInfo {
    pub field_id: i32,
    pub name: String,
    /// Arrow type, as text (for display).
    pub data_type: String,
    /// The key type when the column can be indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<KeyType>,
    pub nullable: bool,
}
