//! The columns of an Iceberg-backed table under schema evolution (`docs/iceberg.md`, "Schema
//! evolution"): the table's columns follow the upstream schema by field id, and each data file
//! must read as them.

use arrow_schema::DataType;

use crate::datafile;
use crate::error::{Error, Result};
use crate::formats::iceberg;
use crate::values::FieldInfo;

/// The table's columns at `schema` (an Iceberg schema), by field id in the schema's order and
/// named as it names them now (a rename keeps the column): typed as `old` (the table's
/// columns before) or else the first of `files` (data files' columns, newest first) that has
/// the field types it, widened where the schema widened it (int → long, float → double,
/// decimal precision); a primitive field no file holds yet is typed from its Iceberg type.
/// Nested fields no file holds are left out (nothing could read them).
pub(crate) fn evolve_fields(
    schema: &iceberg::metadata::Schema,
    old: &[FieldInfo],
    files: &[Vec<FieldInfo>],
) -> Vec<FieldInfo> {
    let mut out = Vec::with_capacity(schema.fields.len());
    for f in &schema.fields {
        let want = f.primitive().and_then(arrow_type);
        let base = old
            .iter()
            .find(|o| o.field_id == f.id)
            .or_else(|| {
                files
                    .iter()
                    .find_map(|ff| ff.iter().find(|x| x.field_id == f.id))
            })
            .cloned();
        let mut fi = match (base, &want) {
            (Some(b), _) => b,
            (None, Some(t)) => FieldInfo {
                field_id: f.id,
                name: f.name.clone(),
                data_type: t.to_string(),
                key_type: None,
                nullable: true,
            },
            (None, None) => continue,
        };
        fi.name = f.name.clone();
        if let (Some(t), Ok(have)) = (&want, fi.data_type.parse::<DataType>()) {
            let numeric = matches!(
                t,
                DataType::Int64 | DataType::Float64 | DataType::Decimal128(..)
            );
            if have != *t && numeric && datafile::widens(&have, t) {
                fi.data_type = t.to_string();
            }
        }
        if let Ok(t) = fi.data_type.parse::<DataType>() {
            fi.key_type = datafile::key_type(&arrow_schema::Field::new(&fi.name, t, true)).ok();
        }
        out.push(fi);
    }
    out
}

/// The Arrow type of an Iceberg primitive type (spec "Primitive Types"), as Skerry's Parquet
/// reader types it.
fn arrow_type(t: &str) -> Option<DataType> {
    use arrow_schema::TimeUnit::*;
    Some(match t {
        "boolean" => DataType::Boolean,
        "int" => DataType::Int32,
        "long" => DataType::Int64,
        "float" => DataType::Float32,
        "double" => DataType::Float64,
        "date" => DataType::Date32,
        "time" => DataType::Time64(Microsecond),
        "timestamp" => DataType::Timestamp(Microsecond, None),
        "timestamptz" => DataType::Timestamp(Microsecond, Some("+00:00".into())),
        "timestamp_ns" => DataType::Timestamp(Nanosecond, None),
        "timestamptz_ns" => DataType::Timestamp(Nanosecond, Some("+00:00".into())),
        "string" => DataType::Utf8,
        "binary" => DataType::Binary,
        "uuid" => DataType::FixedSizeBinary(16),
        t => {
            if let Some(n) = t.strip_prefix("fixed[").and_then(|r| r.strip_suffix(']')) {
                DataType::FixedSizeBinary(n.trim().parse().ok()?)
            } else if let Some(ps) = t.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
                let (p, s) = ps.split_once(',')?;
                DataType::Decimal128(p.trim().parse().ok()?, s.trim().parse().ok()?)
            } else {
                return None;
            }
        }
    })
}

/// A data file can join an Iceberg-backed table when each of its columns the table has (by
/// field id) reads as the table's type ([`datafile::widens`]); columns the table no longer
/// has (dropped) are ignored, columns it lacks read as NULL. Errors: `E_UNSUPPORTED`.
pub(crate) fn check_compatible(table: &[FieldInfo], file: &[FieldInfo], path: &str) -> Result<()> {
    for f in file {
        let Some(t) = table.iter().find(|t| t.field_id == f.field_id) else {
            continue;
        };
        let ok = match (
            f.data_type.parse::<DataType>(),
            t.data_type.parse::<DataType>(),
        ) {
            (Ok(a), Ok(b)) => datafile::widens(&a, &b),
            _ => f.data_type == t.data_type,
        };
        if !ok {
            return Err(Error::Unsupported(format!(
                "{path}: column {} (field id {}) is {} in the file and {} in the table",
                t.name, t.field_id, f.data_type, t.data_type
            )));
        }
    }
    Ok(())
}
