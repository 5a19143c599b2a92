//! The Iceberg REST catalog protocol's messages, as Skerry reads them (issue 45): which table
//! of which catalog an overlay table follows ([`CatalogRef`], recorded without secrets), the
//! answers of `GET /v1/config`, `loadTable` and `loadCredentials`, and a vended S3 credential.
//! No I/O here: the HTTP client is `io::rest_catalog` (native, feature `s3`).
//!
//! Spec: `apache/iceberg` `open-api/rest-catalog-open-api.yaml`. Every answer is bounded
//! ([`MAX_ANSWER_BYTES`]) and parsed into exactly the fields used; anything else is ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest catalog answer read (a `loadTable` carries the whole table metadata).
pub const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// One table of one REST catalog — what an overlay records of where a mounted table comes
/// from. Never holds a secret: credentials are given to each process that connects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogRef {
    /// The catalog's base URI (`https://host/api/catalog`; `/v1/…` is appended).
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    /// Namespace levels (`["db"]`, `["sales", "eu"]`).
    pub namespace: Vec<String>,
    pub table: String,
}

impl CatalogRef {
    /// Checks the parts a request path is made of: an `http(s)` URI, a namespace of at least
    /// one non-empty level, a non-empty table name.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Invalid(format!("catalog: {m}")));
        if !(self.uri.starts_with("http://") || self.uri.starts_with("https://")) {
            return bad(format!("uri {:?} is not an http(s) URL", self.uri));
        }
        if self.namespace.is_empty() || self.namespace.iter().any(|l| l.is_empty()) {
            return bad(format!(
                "namespace {:?} needs non-empty levels",
                self.namespace
            ));
        }
        if self.table.is_empty() {
            return bad("table is empty".into());
        }
        Ok(())
    }

    /// `{uri}/v1/{prefix}/namespaces/{ns}/tables/{table}` (the spec's path parameters: levels
    /// joined by the unit separator, each part percent-encoded).
    pub fn table_url(&self, prefix: Option<&str>) -> String {
        let ns = self.namespace.join("\u{1f}");
        let mut u = format!("{}/v1/", self.uri.trim_end_matches('/'));
        if let Some(p) = prefix.filter(|p| !p.is_empty()) {
            u.push_str(&encode(p));
            u.push('/');
        }
        u.push_str("namespaces/");
        u.push_str(&encode(&ns));
        u.push_str("/tables/");
        u.push_str(&encode(&self.table));
        u
    }

    /// How messages name the table: `uri` `ns.table`.
    pub fn display(&self) -> String {
        format!("{} {}.{}", self.uri, self.namespace.join("."), self.table)
    }
}

/// How one process reaches a [`CatalogRef`]: the table, and the secrets that are never
/// recorded (not in the catalog, the manifest, messages or `Debug`).
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAccess {
    #[serde(flatten)]
    pub table: CatalogRef,
    /// OAuth2 client credentials, `client_id:client_secret` (or a bare secret).
    #[serde(default)]
    pub credential: Option<String>,
    /// A bearer token used as is (not renewed).
    #[serde(default)]
    pub token: Option<String>,
    /// The OAuth2 scope asked for (`catalog` when unset).
    #[serde(default)]
    pub scope: Option<String>,
    /// Extra headers sent with every catalog request.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The token endpoint, when not the catalog's own `/v1/oauth/tokens`.
    #[serde(default)]
    pub oauth2_server_uri: Option<String>,
}

impl std::fmt::Debug for CatalogAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogAccess")
            .field("table", &self.table)
            .field("credential", &self.credential.as_ref().map(|_| "…"))
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("scope", &self.scope)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Without the `s3` feature there is no catalog client: `E_UNSUPPORTED` for a catalog given.
#[cfg(not(feature = "s3"))]
pub fn no_client(c: &CatalogRef) -> Error {
    Error::Unsupported(format!(
        "REST catalog {}: needs skerry-core built with the `s3` feature",
        c.display()
    ))
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `GET /v1/config`'s answer: the catalog's settings, `overrides` over the client's over
/// `defaults`. Skerry uses `prefix`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigAnswer {
    #[serde(default)]
    pub defaults: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub overrides: BTreeMap<String, serde_json::Value>,
}

impl ConfigAnswer {
    /// The path prefix for table endpoints, if the catalog sets one.
    pub fn prefix(&self) -> Option<String> {
        let v = self
            .overrides
            .get("prefix")
            .or_else(|| self.defaults.get("prefix"))?;
        v.as_str().map(str::to_string)
    }
}

/// One vended credential: the storage settings for objects under `prefix`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
pub struct StorageCredential {
    pub prefix: String,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

impl std::fmt::Debug for StorageCredential {
    // Keys only: the values are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageCredential")
            .field("prefix", &self.prefix)
            .field("config", &self.config.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What Skerry reads of `loadTable`'s answer (`LoadTableResult`).
#[derive(Clone, Debug, Deserialize)]
pub struct LoadTableAnswer {
    #[serde(rename = "metadata-location")]
    pub metadata_location: Option<String>,
    /// Table-level settings; older catalogs vend S3 keys here (`s3.access-key-id`, …).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(rename = "storage-credentials", default)]
    pub storage_credentials: Vec<StorageCredential>,
    /// The table metadata's `location` (the rest of the metadata is read from its file).
    #[serde(default)]
    pub metadata: Option<MetadataHead>,
}

/// The one field of `loadTable`'s `metadata` read from the answer.
#[derive(Clone, Debug, Deserialize)]
pub struct MetadataHead {
    pub location: Option<String>,
}

impl LoadTableAnswer {
    /// The vended credentials: `storage-credentials`, or — from catalogs that predate it —
    /// the table `config`'s S3 keys, for the whole table location.
    pub fn credentials(&self, location: &str) -> Vec<StorageCredential> {
        if !self.storage_credentials.is_empty() {
            return self.storage_credentials.clone();
        }
        if self.config.contains_key("s3.access-key-id") {
            return vec![StorageCredential {
                prefix: location.to_string(),
                config: self.config.clone(),
            }];
        }
        Vec::new()
    }
}

/// `loadCredentials`' answer.
#[derive(Clone, Debug, Deserialize)]
pub struct CredentialsAnswer {
    #[serde(rename = "storage-credentials")]
    pub storage_credentials: Vec<StorageCredential>,
}

/// An OAuth2 token endpoint's answer.
#[derive(Clone, Deserialize)]
pub struct TokenAnswer {
    pub access_token: String,
    #[serde(default)]
    pub expires_in: Option<u64>,
}

/// The catalog's error model (`{"error": {message, type, code}}`), for messages.
#[derive(Clone, Debug, Deserialize)]
pub struct ErrorAnswer {
    pub error: ErrorModel,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ErrorModel {
    #[serde(default)]
    pub message: String,
    #[serde(rename = "type", default)]
    pub kind: String,
}

/// Parses a catalog answer of type `T` (a typed `E_ICEBERG` naming `what` otherwise).
pub fn parse<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Iceberg(format!("catalog {what}: malformed answer: {e}")))
}

/// Checks a location a catalog named (a metadata file, a table location): an object-store
/// URL, never this machine's files (`file://`) or memory — a catalog answers over the network
/// and must not make Skerry read local paths. `E_ICEBERG` otherwise.
pub fn check_remote(what: &str, url: &str) -> Result<()> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("s3" | "s3a" | "gs" | "abfs" | "abfss" | "http" | "https") => Ok(()),
        _ => Err(Error::Iceberg(format!(
            "catalog: the {what} it names, {url:?}, is not an object-store URL (s3, gs, abfs)"
        ))),
    }
}

/// The vended credential for `url`: the one whose prefix is the longest that `url` starts
/// with at a path boundary.
pub fn best<'a>(creds: &'a [StorageCredential], url: &str) -> Option<&'a StorageCredential> {
    creds
        .iter()
        .filter(|c| covers(&c.prefix, url))
        .max_by_key(|c| c.prefix.trim_end_matches('/').len())
}

/// Whether `url` lies under `prefix` (equal, or continuing after a `/`).
pub fn covers(prefix: &str, url: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    url == p || (url.starts_with(p) && url[p.len()..].starts_with('/'))
}

/// A vended S3 credential's settings (the spec's `s3.*` keys).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credential {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// When it stops working (Unix ms), if the catalog says.
    pub expires_at_ms: Option<u64>,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub path_style: bool,
}

impl std::fmt::Debug for S3Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Credential")
            .field("access_key_id", &"…")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish()
    }
}

impl S3Credential {
    /// Reads `s3.access-key-id`, `s3.secret-access-key`, `s3.session-token`,
    /// `s3.session-token-expires-at-ms`, `s3.endpoint`, `s3.region` (or `client.region`),
    /// `s3.path-style-access`. Errors (`E_UNSUPPORTED`) when the credential is not an S3 one.
    pub fn from_config(prefix: &str, c: &BTreeMap<String, String>) -> Result<S3Credential> {
        let (Some(id), Some(secret)) = (c.get("s3.access-key-id"), c.get("s3.secret-access-key"))
        else {
            let keys: Vec<&str> = c.keys().map(String::as_str).collect();
            return Err(Error::Unsupported(format!(
                "catalog: the credential vended for {prefix} is not an S3 key (settings {keys:?}); \
                 only S3 credentials are read"
            )));
        };
        let expires_at_ms = match c.get("s3.session-token-expires-at-ms") {
            None => None,
            Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                Error::Iceberg(format!(
                    "catalog: s3.session-token-expires-at-ms for {prefix} is not a number"
                ))
            })?),
        };
        Ok(S3Credential {
            access_key_id: id.clone(),
            secret_access_key: secret.clone(),
            session_token: c.get("s3.session-token").cloned(),
            expires_at_ms,
            endpoint: c.get("s3.endpoint").cloned(),
            region: c
                .get("s3.region")
                .or_else(|| c.get("client.region"))
                .cloned(),
            path_style: c
                .get("s3.path-style-access")
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(prefix: &str) -> StorageCredential {
        StorageCredential {
            prefix: prefix.into(),
            config: BTreeMap::new(),
        }
    }

    #[test]
    fn the_longest_matching_prefix_wins_at_a_path_boundary() {
        let creds = [
            cred("s3://lake"),
            cred("s3://lake/wh/db/"),
            cred("s3://lake/wh/d"),
        ];
        assert_eq!(
            best(&creds, "s3://lake/wh/db/events/a.parquet")
                .unwrap()
                .prefix,
            "s3://lake/wh/db/"
        );
        // `s3://lake/wh/d` is a string prefix of `…/db`, not a path prefix.
        assert_eq!(
            best(&creds, "s3://lake/wh/dx/a").unwrap().prefix,
            "s3://lake"
        );
        assert!(best(&creds, "s3://lakehouse/a").is_none());
        assert!(best(&creds, "s3://other/a").is_none());
    }

    #[test]
    fn table_urls_encode_their_parts() {
        let r = CatalogRef {
            uri: "http://h:1/api/".into(),
            warehouse: None,
            namespace: vec!["sales".into(), "eu west".into()],
            table: "orders/2".into(),
        };
        assert_eq!(
            r.table_url(Some("wh/1")),
            "http://h:1/api/v1/wh%2F1/namespaces/sales%1Feu%20west/tables/orders%2F2"
        );
        assert_eq!(
            r.table_url(None),
            "http://h:1/api/v1/namespaces/sales%1Feu%20west/tables/orders%2F2"
        );
        r.check().unwrap();
        let mut bad = r.clone();
        bad.uri = "file:///etc".into();
        assert_eq!(bad.check().unwrap_err().code(), "E_INVALID");
        let mut bad = r;
        bad.namespace = vec![];
        assert_eq!(bad.check().unwrap_err().code(), "E_INVALID");
    }

    #[test]
    fn s3_credentials_are_read_and_never_shown() {
        let mut c = BTreeMap::new();
        c.insert("s3.access-key-id".to_string(), "AKIA1".to_string());
        c.insert("s3.secret-access-key".to_string(), "hush".to_string());
        c.insert(
            "s3.session-token-expires-at-ms".to_string(),
            "1700000000000".to_string(),
        );
        c.insert("client.region".to_string(), "eu-west-1".to_string());
        let s = S3Credential::from_config("s3://lake", &c).unwrap();
        assert_eq!(s.expires_at_ms, Some(1_700_000_000_000));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert!(!format!("{s:?}").contains("hush") && !format!("{s:?}").contains("AKIA1"));
        let sc = StorageCredential {
            prefix: "s3://lake".into(),
            config: c.clone(),
        };
        assert!(!format!("{sc:?}").contains("hush"));
        c.insert(
            "s3.session-token-expires-at-ms".to_string(),
            "soon".to_string(),
        );
        assert_eq!(
            S3Credential::from_config("s3://lake", &c)
                .unwrap_err()
                .code(),
            "E_ICEBERG"
        );
        let mut gcs = BTreeMap::new();
        gcs.insert("gcs.oauth2.token".to_string(), "t".to_string());
        let e = S3Credential::from_config("gs://lake", &gcs).unwrap_err();
        assert_eq!(e.code(), "E_UNSUPPORTED");
        assert!(!e.to_string().contains("\"t\""));
    }

    #[test]
    fn a_catalog_cannot_point_at_local_files() {
        check_remote("metadata file", "s3://lake/wh/t/metadata/1.metadata.json").unwrap();
        for bad in [
            "file:///etc/passwd",
            "/etc/passwd",
            "memory://x",
            "FILE:///x",
            "x",
        ] {
            assert_eq!(
                check_remote("metadata file", bad).unwrap_err().code(),
                "E_ICEBERG",
                "{bad}"
            );
        }
    }

    #[test]
    fn access_never_shows_its_secrets() {
        let a = CatalogAccess {
            credential: Some("id:hush".into()),
            token: Some("tok-hush".into()),
            headers: vec![("X-Api-Key".into(), "key-hush".into())],
            ..Default::default()
        };
        let d = format!("{a:?}");
        assert!(!d.contains("hush"), "{d}");
        assert!(d.contains("X-Api-Key"));
    }

    #[test]
    fn answers_parse_or_fail_typed() {
        let a: LoadTableAnswer = parse(
            "loadTable",
            br#"{"metadata-location":"s3://l/m.json","metadata":{},"config":{"x":"y"},
                "storage-credentials":[{"prefix":"s3://l","config":{"s3.access-key-id":"k"}}]}"#,
        )
        .unwrap();
        assert_eq!(a.metadata_location.as_deref(), Some("s3://l/m.json"));
        assert_eq!(a.credentials("s3://l/t").len(), 1);
        let old: LoadTableAnswer = parse(
            "loadTable",
            br#"{"metadata-location":"s3://l/m.json","metadata":{},
                "config":{"s3.access-key-id":"k","s3.secret-access-key":"s"}}"#,
        )
        .unwrap();
        assert_eq!(old.credentials("s3://l/t")[0].prefix, "s3://l/t");
        assert_eq!(
            parse::<LoadTableAnswer>("loadTable", b"[1,2]")
                .unwrap_err()
                .code(),
            "E_ICEBERG"
        );
        let c: ConfigAnswer = parse(
            "config",
            br#"{"defaults":{"prefix":"a"},"overrides":{"prefix":"b"}}"#,
        )
        .unwrap();
        assert_eq!(c.prefix().as_deref(), Some("b"));
    }
}
