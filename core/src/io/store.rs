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
}

/// An object-store failure as an I/O error, keeping the path it names (when it names one)
/// and the store's own message.
pub(crate) fn store_err(e: object_store::Error) -> IoError {
    use object_store::Error as E;
    if let E::NotFound { path, .. } = &e {
        return IoError::NotFound { path: path.clone() };
    }
    let path = match &e {
        E::AlreadyExists { path, .. }
        | E::Precondition { path, .. }
        | E::NotModified { path, .. }
        | E::PermissionDenied { path, .. }
        | E::Unauthenticated { path, .. } => path.clone(),
        _ => String::new(),
    };
    IoError::Other {
        path,
        message: e.to_string(),
        source: Source::new(e),
    }
}

/// The overlay's object store rooted at its prefix.
pub(crate) fn open_store(
    url: &str,
    options: &[(String, String)],
    create: bool,
) -> Result<Arc<dyn ObjectStore>, IoError> {
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
        return Ok(Arc::new(fs));
    }
    let r = ObjectStoreReader::from_url(url, options)?;
    if r.root().as_ref().is_empty() {
        Ok(r.store().clone())
    } else {
        Ok(Arc::new(PrefixStore::new(
            r.store().clone(),
            r.root().clone(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

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
        let e = Error::from(store_err(object_store::Error::PermissionDenied {
            path: "manifests/HEAD".into(),
            source: "no".into(),
        }));
        match &e {
            Error::Io(IoError::Other { path, source, .. }) => {
                assert_eq!(path, "manifests/HEAD");
                assert!(source.is_some());
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains("manifests/HEAD"));
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.retryable());
    }
}
