//! Mounting a read-only Iceberg table as an overlay table (issue 16, first slice): the data
//! files of the table's current snapshot are registered like a Parquet table's, and the
//! upstream (metadata file, snapshot) is recorded. Nothing upstream is ever written.
//!
//! Not yet (each a typed refusal, never a wrong answer): snapshots with delete files
//! (merge-on-read), data files whose schemas differ (schema evolution), formats other than
//! Parquet, and following new snapshots (`sync`).

pub use crate::admin::catalog::IcebergSource;
use crate::admin::catalog::{table_key, TableRecord};
use crate::admin::overlay::{FileSelection, Overlay, TableInfo};
use crate::error::{Error, Result};
use crate::formats::iceberg::{self, metadata::MAX_METADATA_BYTES, TableMetadata};
use crate::io::{Location, ObjectStoreReader, RangeReader};

impl Overlay {
    /// Mounts the Iceberg table at `source` (`file://`, `s3://`, …) as table `name`, at its
    /// current snapshot. `source` is a metadata file (`….metadata.json`, `.gz.metadata.json`
    /// too) or the table's directory, whose newest metadata file is used
    /// ([`Overlay::locate_metadata`]): its live data files are registered (their
    /// facts read and checked against the manifests' record counts and sizes) and can be
    /// indexed, queried and published like any table. Errors: `E_ICEBERG` (malformed or
    /// escaping metadata, a data file that does not match its manifest entry),
    /// `E_UNSUPPORTED` (delete files, mixed schemas, non-Parquet files), `E_INVALID` (no
    /// snapshot), `E_EXISTS`, and the reads' errors.
    pub async fn mount_iceberg(&self, name: &str, source: &str) -> Result<TableInfo> {
        crate::values::names::check("table", name)?;
        let metadata_url = &self.locate_metadata(source).await?;
        let bytes = self
            .data
            .read_all_max(&Location::new(metadata_url), MAX_METADATA_BYTES)
            .await
            .map_err(|e| match e {
                crate::io::IoError::TooLarge { .. } => Error::Iceberg(format!(
                    "{metadata_url} is larger than {MAX_METADATA_BYTES} bytes"
                )),
                e => e.into(),
            })?;
        let meta = TableMetadata::from_json(&bytes)?;
        let snapshot_id = meta.current_snapshot().ok_or_else(|| {
            Error::Invalid(format!(
                "{metadata_url}: the table has no snapshot to mount"
            ))
        })?;
        let location = meta.location.trim_end_matches('/').to_string();
        let reader = self.rooted(&location)?;
        let files = iceberg::snapshot_files(&reader, &meta, snapshot_id).await?;
        if !files.deletes.is_empty() {
            return Err(Error::Unsupported(format!(
                "{name}: snapshot {snapshot_id} has {} delete files (merge-on-read); applying them is not implemented yet",
                files.deletes.len()
            )));
        }
        if let Some(f) = files.data.iter().find(|f| f.format != "PARQUET") {
            return Err(Error::Unsupported(format!(
                "{name}: {} is {}; only Parquet data files are read",
                f.path, f.format
            )));
        }
        let paths: Vec<String> = files.data.iter().map(|f| f.path.clone()).collect();
        let info = self
            .register_parquet_table(name, &location, FileSelection::List(paths))
            .await
            .map_err(|e| match e {
                Error::Invalid(m) if m.contains("different schema") => Error::Unsupported(format!(
                    "{name}: the snapshot's data files have different schemas (schema evolution is not mounted yet): {m}"
                )),
                e => e,
            })?;
        // The files' own facts must agree with their manifest entries.
        let t = self.catalog.begin()?;
        let registered = self.catalog.files(&t, info.table_id).await?;
        for f in &files.data {
            let Some(r) = registered.iter().find(|r| r.path == f.path) else {
                return Err(Error::Iceberg(format!("{} was not registered", f.path)));
            };
            if r.record_count != f.record_count || r.size != f.size {
                return Err(Error::Iceberg(format!(
                    "{}: {} rows and {} bytes, its manifest entry says {} rows and {} bytes",
                    f.path, r.record_count, r.size, f.record_count, f.size
                )));
            }
        }
        let mut rec: TableRecord = t
            .get(&table_key(info.table_id))
            .await?
            .ok_or_else(|| Error::catalog(format!("table {name} has no record")))?;
        rec.source = "iceberg".into();
        rec.iceberg = Some(IcebergSource {
            metadata_location: metadata_url.to_string(),
            location,
            snapshot_id,
            sequence_number: files.sequence_number,
            format_version: meta.format_version,
        });
        t.put(&table_key(info.table_id), &rec)?;
        t.commit().await?;
        Ok(info)
    }

    /// The metadata file `source` names: itself when it ends in `.metadata.json`; else, taking
    /// it as a table directory, `metadata/v<N>.metadata.json` where `metadata/version-hint.text`
    /// holds `N` (and that file exists), else the newest `*.metadata.json` in `metadata/`
    /// ([`crate::formats::iceberg::metadata::newest_metadata`]). Errors: `E_NOT_FOUND` when the
    /// directory holds no metadata file.
    pub async fn locate_metadata(&self, source: &str) -> Result<String> {
        if source.ends_with(".metadata.json") {
            return Ok(source.to_string());
        }
        let dir = format!("{}/metadata", source.trim_end_matches('/'));
        let r = self.rooted(&dir)?;
        if let Ok(hint) = r
            .read_all_max(&Location::new("version-hint.text"), 1024)
            .await
        {
            let v = String::from_utf8_lossy(&hint).trim().to_string();
            if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
                for n in [
                    format!("v{v}.metadata.json"),
                    format!("v{v}.gz.metadata.json"),
                ] {
                    if r.head(&Location::new(&n)).await.is_ok() {
                        return Ok(format!("{dir}/{n}"));
                    }
                }
            }
        }
        let listed = r
            .store()
            .list_with_delimiter(Some(r.root()))
            .await
            .map_err(crate::admin::overlay::store_err)?;
        let names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        match iceberg::metadata::newest_metadata(names.iter().map(String::as_str)) {
            Some(n) => Ok(format!("{dir}/{n}")),
            None => Err(Error::NotFound {
                kind: "Iceberg metadata file",
                name: dir,
            }),
        }
    }

    /// What table `name` was mounted from (`None` for a Parquet table).
    pub async fn iceberg_source(&self, name: &str) -> Result<Option<IcebergSource>> {
        let t = self.catalog.begin()?;
        Ok(self.catalog.table(&t, name).await?.iceberg)
    }

    /// A reader of the objects under `location` (paths relative to it), through the
    /// overlay's data-file stores and their options.
    fn rooted(&self, location: &str) -> Result<ObjectStoreReader> {
        let (store, inner) = self.data.resolve(&Location::new(format!("{location}/")))?;
        Ok(ObjectStoreReader::new(
            store.store().clone(),
            object_store::path::Path::from(inner.path.trim_end_matches('/')),
        ))
    }
}
