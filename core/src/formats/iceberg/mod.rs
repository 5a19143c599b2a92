//! Reading Apache Iceberg tables, read-only (`docs/iceberg.md`): table metadata JSON
//! ([`metadata`]) and the Avro manifest lists and manifests of a snapshot ([`manifests`]).
//! The same code runs natively and on wasm32; it reads through a [`crate::io::RangeReader`]
//! rooted at the table's location, and every path the metadata names must lie under that
//! location ([`relative_to`]) — Skerry never follows a manifest outside the table it mounted.

/// Avro object containers, decoded by Skerry itself (decision 38); public for the fuzz targets.
pub mod avro;
pub mod deletes;
pub mod manifests;
pub mod metadata;

pub use manifests::{
    snapshot_files, snapshot_files_since, FileContent, LiveFile, ManifestFiles, SnapshotFiles,
};
pub use metadata::TableMetadata;

use crate::error::{Error, Result};

/// `file:/x` (as Java writers spell it) and `file:///x` name the same file.
fn normalize(uri: &str) -> std::borrow::Cow<'_, str> {
    match uri.strip_prefix("file:") {
        Some(rest) if rest.starts_with('/') && !rest.starts_with("//") => {
            format!("file://{rest}").into()
        }
        _ => uri.into(),
    }
}

/// `uri` as a path relative to the table `location`, checked to be a safe relative path
/// ([`crate::io::path::check_relative`]). Errors: `E_ICEBERG` when it is elsewhere.
pub fn relative_to(location: &str, uri: &str) -> Result<String> {
    let base = normalize(location);
    let base = base.trim_end_matches('/');
    let uri = normalize(uri);
    let rel = uri
        .strip_prefix(base)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(|| {
            Error::Iceberg(format!(
                "{} is outside the table location {base}",
                uri.chars().take(300).collect::<String>()
            ))
        })?;
    crate::io::path::check_relative(rel)
        .map(str::to_string)
        .map_err(|e| Error::Iceberg(format!("path in table metadata: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_table() {
        let loc = "file:///w/db/t";
        assert_eq!(
            relative_to(loc, "file:///w/db/t/data/a.parquet").unwrap(),
            "data/a.parquet"
        );
        assert_eq!(
            relative_to("file:/w/db/t/", "file:/w/db/t/m/x.avro").unwrap(),
            "m/x.avro"
        );
        assert_eq!(
            relative_to("s3://b/t", "s3://b/t/d/1.parquet").unwrap(),
            "d/1.parquet"
        );
        // Names, not encodings: a partition directory pyiceberg named `%2e%2e` is that.
        assert_eq!(
            relative_to(loc, "file:///w/db/t/data/%2e%2e/%2e%2e/x").unwrap(),
            "data/%2e%2e/%2e%2e/x"
        );
        assert_eq!(
            relative_to(loc, "file:///w/db/t/data/cat=x%2Fy/0.parquet").unwrap(),
            "data/cat=x%2Fy/0.parquet"
        );
        for bad in [
            "file:///w/db/other/a.parquet",
            "file:///w/db/t2/a.parquet",
            "file:///w/db/t/../other/a.parquet",
            "s3://b/t/d/1.parquet",
            "file:///w/db/t",
            "file:///w/db/t//etc/passwd",
            "/w/db/t/a.parquet",
        ] {
            assert_eq!(
                relative_to(loc, bad).unwrap_err().code(),
                "E_ICEBERG",
                "{bad}"
            );
        }
    }
}
