//! Opening an overlay's object store from its URL (native): `file://`, `memory://`, `s3://`.

use std::sync::Arc;

use object_store::prefix::PrefixStore;
use object_store::ObjectStore;

use super::{IoError, ObjectStoreReader, Source};

/// Options for opening an overlay (`Overlay::open`, `OverlayReader::open`).
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// object_store configuration (S3 endpoint, credentials, …) for the overlay and for data
    /// files.
    pub storage: Vec<(String, String)>,
    /// Limit on each read Skerry makes of overlay objects and data files (`E_TIMEOUT` past
    /// it); `None` waits as long as the store does. Catalog (SlateDB) traffic is not
    /// covered: configure the store's own client timeouts for that.
    pub timeout: Option<std::time::Duration>,
    /// Not for production: wraps the overlay's store (catalog included; data files not) in a
    /// [`crate::io::faults::FaultStore`] following this plan — the soak's `SKERRY_FAULTS`.
    pub faults: Option<crate::io::faults::FaultPlan>,
    /// Iceberg REST catalog tables this process reads with the catalog's vended credentials
    /// (feature `s3`): each is connected at open, its credentials routed for the data and
    /// metadata under the table, and refreshed before they expire. Never recorded anywhere.
    pub catalogs: Vec<crate::io::rest::CatalogAccess>,
}

/// An object-store failure as an I/O error, keeping the path it names (when it names one)
/// and the store's own message.
pub(crate) fn store_err(e: object_store::Error) -> IoError {
    use object_store::Error as E;
    if let E::NotFound { path, .. } = &e {
        return IoError::NotFound { path: path.clone() };
    }
    if let E::PermissionDenied { path, source } | E::Unauthenticated { path, source } = &e {
        return IoError::Denied {
            path: path.clone(),
            message: source.to_string(),
        };
    }
    // A credential provider's refusal arrives wrapped (the S3 client's own error around it).
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
    while let Some(c) = cause {
        if let Some(E::PermissionDenied { path, source } | E::Unauthenticated { path, source }) =
            c.downcast_ref::<object_store::Error>()
        {
            return IoError::Denied {
                path: path.clone(),
                message: source.to_string(),
            };
        }
        cause = c.source();
    }
    let path = match &e {
        E::AlreadyExists { path, .. }
        | E::Precondition { path, .. }
        | E::NotModified { path, .. } => path.clone(),
        _ => String::new(),
    };
    IoError::Other {
        path,
        message: e.to_string(),
        source: Source::new(e),
    }
}

/// An overlay's object store rooted at its prefix, and the same store as the local file
/// system when the overlay is on local disk (`file://`): its reader then reads small ranges in
/// place ([`ObjectStoreReader::local`]) instead of through the store's blocking pool.
#[derive(Clone, Debug)]
pub(crate) struct OverlayStore {
    pub store: Arc<dyn ObjectStore>,
    pub local: Option<Arc<object_store::local::LocalFileSystem>>,
}

impl OverlayStore {
    /// A store of any kind (a wrapper, a custom client): read through its own `get`.
    pub fn of(store: Arc<dyn ObjectStore>) -> OverlayStore {
        OverlayStore { store, local: None }
    }

    /// The reader of the overlay's objects, each request limited to `timeout`.
    pub fn reader(&self, timeout: Option<std::time::Duration>) -> ObjectStoreReader {
        let root = object_store::path::Path::from("");
        match &self.local {
            Some(fs) => ObjectStoreReader::local(fs.clone(), root),
            None => ObjectStoreReader::new(self.store.clone(), root),
        }
        .with_timeout(timeout)
    }
}

/// The overlay's object store rooted at its prefix (behind `options.faults` when set).
pub(crate) fn open_store(
    url: &str,
    options: &OpenOptions,
    create: bool,
) -> Result<OverlayStore, IoError> {
    let at = open_plain(url, &options.storage, create)?;
    Ok(match &options.faults {
        Some(plan) => OverlayStore::of(Arc::new(crate::io::faults::Faulty(plan.wrap(at.store)))),
        None => at,
    })
}

fn open_plain(
    url: &str,
    options: &[(String, String)],
    create: bool,
) -> Result<OverlayStore, IoError> {
    let parsed = url::Url::parse(url).map_err(|e| IoError::InvalidUrl {
        url: url.into(),
        reason: e.to_string(),
    })?;
    if parsed.scheme() == "file" {
        let dir = parsed.to_file_path().map_err(|_| IoError::InvalidUrl {
            url: url.into(),
            reason: "not a local path".into(),
        })?;
        if create {
            std::fs::create_dir_all(&dir).map_err(|e| IoError::Other {
                path: dir.display().to_string(),
                message: e.to_string(),
                source: Source::new(e),
            })?;
        } else if !dir.is_dir() {
            return Err(IoError::NotFound {
                path: dir.display().to_string(),
            });
        }
        let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)
            .map_err(store_err)?
            .with_fsync(true);
        let fs = Arc::new(fs);
        return Ok(OverlayStore {
            store: fs.clone(),
            local: Some(fs),
        });
    }
    let r = ObjectStoreReader::from_url(url, options)?;
    if r.root().as_ref().is_empty() {
        Ok(OverlayStore::of(r.store().clone()))
    } else {
        Ok(OverlayStore::of(Arc::new(PrefixStore::new(
            r.store().clone(),
            r.root().clone(),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// A `file://` overlay's own objects are read in place like data files (the reader knows
    /// the local file system); any other store through its own `get`.
    #[test]
    fn a_local_overlay_is_read_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let at = open_store(&url, &OpenOptions::default(), true).unwrap();
        assert!(at.local.is_some());
        std::fs::write(dir.path().join("HEAD"), b"0123456789").unwrap();
        let r = at.reader(None);
        let got = crate::io::block_on(crate::io::RangeReader::read_range(
            &r,
            &crate::io::Location::new("HEAD"),
            2..6,
        ))
        .unwrap();
        assert_eq!(&got[..], b"2345");
        assert!(open_store("memory:///", &OpenOptions::default(), true)
            .unwrap()
            .local
            .is_none());
    }

    #[test]
    fn store_errors_keep_their_path_and_source() {
        assert_eq!(
            Error::from(store_err(object_store::Error::NotFound {
                path: "manifests/HEAD".into(),
                source: "gone".into(),
            }))
            .code(),
            "E_NOT_FOUND"
        );
        // Refused credentials are `E_AUTH`, not retried.
        for denied in [
            object_store::Error::PermissionDenied {
                path: "manifests/HEAD".into(),
                source: "no".into(),
            },
            object_store::Error::Unauthenticated {
                path: "manifests/HEAD".into(),
                source: "expired".into(),
            },
        ] {
            let e = Error::from(store_err(denied));
            assert_eq!(e.code(), "E_AUTH");
            assert!(!e.retryable());
            assert!(e.to_string().contains("manifests/HEAD"));
        }
        let e = Error::from(store_err(object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        }));
        match &e {
            Error::Io(IoError::Other { path, source, .. }) => {
                assert_eq!(path, "");
                assert!(source.is_some());
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("connection reset"));
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.retryable());
    }
}
