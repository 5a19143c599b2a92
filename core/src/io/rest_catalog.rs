//! An Iceberg REST catalog client (native, feature `s3`; issue 45): OAuth2 client credentials
//! or a bearer token, `GET /v1/config`, `loadTable` with vended credentials, and
//! `loadCredentials` to refresh them. Read-only toward the catalog: the only `POST` it ever
//! sends is to the OAuth2 token endpoint.
//!
//! Vended S3 credentials become stores of their own: [`RestCatalog::route`] mounts, in a
//! [`UrlReader`], one S3 store per vended prefix whose [`VendedS3`] credential provider asks
//! the catalog again before the credential expires. Reads of data and metadata under that
//! prefix then go through it; everything else keeps the overlay's own storage options.
//!
//! Errors: `E_AUTH` (the catalog or the store refused the credentials: 401/403, a revoked or
//! expired token), `E_NOT_FOUND` (no such table), `E_ICEBERG` (a malformed answer, another
//! 4xx), `E_IO` (5xx, the network; retryable), `E_TIMEOUT`. No message holds a secret.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredential};
use object_store::CredentialProvider;

use super::{IoError, ObjectStoreReader, UrlReader};
use crate::error::{Error, Result};
use crate::io::rest::{
    self, CatalogAccess, CatalogRef, ConfigAnswer, CredentialsAnswer, LoadTableAnswer,
    S3Credential, StorageCredential, TokenAnswer, MAX_ANSWER_BYTES,
};

/// A vended credential is asked for again this long before it expires, or at half its
/// remaining life when that is shorter.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// Limit on each catalog request when the overlay sets none (`OpenOptions::timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

struct Token {
    value: String,
    /// When to ask for a new one (client credentials only).
    renew_at: Option<Instant>,
}

/// A connection to one table of a REST catalog.
pub struct RestCatalog {
    access: CatalogAccess,
    http: reqwest::Client,
    prefix: Option<String>,
    token: tokio::sync::Mutex<Option<Token>>,
    timeout: Option<Duration>,
    /// Catalog requests made, and credentials fetched (the first and every refresh).
    requests: AtomicU64,
    vended: AtomicU64,
}

impl std::fmt::Debug for RestCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestCatalog")
            .field("table", &self.access.table)
            .finish_non_exhaustive()
    }
}

impl RestCatalog {
    /// Connects: a token from the OAuth2 endpoint when `access` has a client credential,
    /// then `GET /v1/config` (its `prefix` is used for table paths).
    pub async fn connect(access: CatalogAccess, timeout: Option<Duration>) -> Result<Arc<Self>> {
        access.table.check()?;
        // A catalog that never answers must not hang a mount, a sync or a credential refresh.
        let http = reqwest::Client::builder()
            .timeout(timeout.unwrap_or(DEFAULT_TIMEOUT))
            .build()
            .map_err(|e| Error::Invalid(format!("catalog: HTTP client: {e}")))?;
        let mut c = RestCatalog {
            access,
            http,
            prefix: None,
            token: tokio::sync::Mutex::new(None),
            timeout,
            requests: AtomicU64::new(0),
            vended: AtomicU64::new(0),
        };
        let mut url = format!("{}/v1/config", c.base());
        if let Some(w) = &c.access.table.warehouse {
            url.push_str("?warehouse=");
            url.push_str(
                &percent_encoding::utf8_percent_encode(w, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        let config: ConfigAnswer = rest::parse("config", &c.get(&url, false).await?)?;
        c.prefix = config.prefix();
        Ok(Arc::new(c))
    }

    /// The table this connection reaches.
    pub fn table(&self) -> &CatalogRef {
        &self.access.table
    }

    /// Catalog requests made so far (token requests included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Credentials fetched so far (`loadTable` with vended credentials, `loadCredentials`).
    pub fn credentials_fetched(&self) -> u64 {
        self.vended.load(Ordering::Relaxed)
    }

    fn base(&self) -> &str {
        self.access.table.uri.trim_end_matches('/')
    }

    /// `loadTable` asking for vended credentials.
    pub async fn load_table(&self) -> Result<LoadTableAnswer> {
        let url = self.access.table.table_url(self.prefix.as_deref());
        let a: LoadTableAnswer = rest::parse("loadTable", &self.get(&url, true).await?)?;
        if a.metadata_location.is_none() {
            return Err(Error::Iceberg(format!(
                "catalog {}: loadTable names no metadata-location",
                self.access.table.display()
            )));
        }
        self.vended.fetch_add(1, Ordering::Relaxed);
        Ok(a)
    }

    /// Fresh vended credentials: `loadCredentials`, or `loadTable` where the catalog does not
    /// have that endpoint (404/405/501 on it).
    pub async fn credentials(&self, location: &str) -> Result<Vec<StorageCredential>> {
        let url = format!(
            "{}/credentials",
            self.access.table.table_url(self.prefix.as_deref())
        );
        match self.get(&url, true).await {
            Ok(bytes) => {
                let a: CredentialsAnswer = rest::parse("loadCredentials", &bytes)?;
                self.vended.fetch_add(1, Ordering::Relaxed);
                Ok(a.storage_credentials)
            }
            Err(Error::NotFound { .. }) | Err(Error::Unsupported(_)) => {
                Ok(self.load_table().await?.credentials(location))
            }
            Err(e) => Err(e),
        }
    }

    /// `loadTable` with fresh vended credentials routed in `data` (see [`RestCatalog::route`]):
    /// the table's current metadata file, to read through them.
    pub async fn follow(self: &Arc<Self>, data: &UrlReader) -> Result<String> {
        let answer = self.load_table().await?;
        let metadata = answer.metadata_location.clone().unwrap_or_default();
        let location = answer
            .metadata
            .as_ref()
            .and_then(|m| m.location.clone())
            .or_else(|| {
                metadata
                    .rsplit_once("/metadata/")
                    .map(|(table, _)| table.to_string())
            })
            .ok_or_else(|| {
                Error::Iceberg(format!(
                    "catalog {}: loadTable names no table location",
                    self.access.table.display()
                ))
            })?;
        rest::check_remote("metadata file", &metadata)?;
        rest::check_remote("table location", &location)?;
        self.route(
            data,
            location.trim_end_matches('/'),
            &answer,
            data.options(),
        )?;
        Ok(metadata)
    }

    /// Mounts, in `data`, a store for each S3 credential `answer` vends for the table at
    /// `location`, each refreshing itself through this catalog; `storage` (the overlay's
    /// options) configures what the catalog does not (an endpoint, `aws_allow_http`). A table
    /// the catalog vends nothing for is read with `storage` alone. Returns the prefixes routed.
    pub fn route(
        self: &Arc<Self>,
        data: &UrlReader,
        location: &str,
        answer: &LoadTableAnswer,
        storage: &[(String, String)],
    ) -> Result<Vec<String>> {
        let mut routed = Vec::new();
        for cred in answer.credentials(location) {
            let s3 = S3Credential::from_config(&cred.prefix, &cred.config)?;
            let store = s3_store(self.clone(), location, &cred.prefix, s3, storage)?;
            data.route(
                &cred.prefix,
                Arc::new(
                    ObjectStoreReader::new(store, object_store::path::Path::from(""))
                        .with_timeout(self.timeout)
                        .with_content_versions(true),
                ),
            );
            routed.push(cred.prefix.clone());
        }
        Ok(routed)
    }

    async fn bearer(&self, renew: bool) -> Result<Option<String>> {
        let mut t = self.token.lock().await;
        if let Some(tok) = t.as_ref() {
            let due = tok.renew_at.is_some_and(|at| Instant::now() >= at);
            if !renew && !due {
                return Ok(Some(tok.value.clone()));
            }
        }
        if let Some(cred) = &self.access.credential {
            let tok = self.fetch_token(cred).await?;
            let value = tok.value.clone();
            *t = Some(tok);
            return Ok(Some(value));
        }
        Ok(self.access.token.clone())
    }

    async fn fetch_token(&self, credential: &str) -> Result<Token> {
        let (id, secret) = match credential.split_once(':') {
            Some((id, secret)) => (Some(id), secret),
            None => (None, credential),
        };
        let url = match &self.access.oauth2_server_uri {
            Some(u) => u.clone(),
            None => format!("{}/v1/oauth/tokens", self.base()),
        };
        let enc = |s: &str| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let mut body = String::from("grant_type=client_credentials");
        if let Some(id) = id {
            body.push_str(&format!("&client_id={}", enc(id)));
        }
        body.push_str(&format!("&client_secret={}", enc(secret)));
        body.push_str(&format!(
            "&scope={}",
            enc(self.access.scope.as_deref().unwrap_or("catalog"))
        ));
        let req = self
            .http
            .post(&url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        let started = Instant::now();
        let bytes = self.send(&url, req).await?;
        let a: TokenAnswer = rest::parse("token", &bytes)?;
        Ok(Token {
            value: a.access_token,
            renew_at: a.expires_in.map(|s| {
                let life = Duration::from_secs(s);
                started + life - (life / 10).min(Duration::from_secs(60))
            }),
        })
    }

    /// A `GET` with the bearer token (renewed once on a 401 when a client credential can
    /// renew it) and, for table endpoints, `X-Iceberg-Access-Delegation: vended-credentials`.
    async fn get(&self, url: &str, delegate: bool) -> Result<Vec<u8>> {
        let mut renewed = false;
        loop {
            let mut req = self.http.get(url);
            for (k, v) in &self.access.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            if delegate {
                req = req.header("X-Iceberg-Access-Delegation", "vended-credentials");
            }
            if let Some(tok) = self.bearer(false).await? {
                req = req.bearer_auth(tok);
            }
            match self.send(url, req).await {
                Err(Error::Auth(_)) if !renewed && self.access.credential.is_some() => {
                    self.bearer(true).await?;
                    renewed = true;
                }
                other => return other,
            }
        }
    }

    /// Sends `req`, reads at most [`MAX_ANSWER_BYTES`] of the answer, maps the status.
    async fn send(&self, url: &str, req: reqwest::RequestBuilder) -> Result<Vec<u8>> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        // The path only: a catalog URI may carry credentials in its query or user info.
        let shown = shown(url);
        let mut resp = req.send().await.map_err(|e| {
            if e.is_timeout() {
                Error::Io(IoError::Timeout {
                    path: shown.clone(),
                    ms: self.timeout.unwrap_or(DEFAULT_TIMEOUT).as_millis() as u64,
                })
            } else {
                Error::Io(IoError::Other {
                    path: shown.clone(),
                    message: format!("catalog request failed: {}", without_url(&e)),
                    source: None,
                })
            }
        })?;
        let status = resp.status().as_u16();
        if resp.content_length().is_some_and(|n| n > MAX_ANSWER_BYTES) {
            return Err(Error::Iceberg(format!(
                "catalog {shown}: answer larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    if (body.len() + c.len()) as u64 > MAX_ANSWER_BYTES {
                        return Err(Error::Iceberg(format!(
                            "catalog {shown}: answer larger than {MAX_ANSWER_BYTES} bytes"
                        )));
                    }
                    body.extend_from_slice(&c);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Error::Io(IoError::Other {
                        path: shown.clone(),
                        message: format!("catalog answer cut: {}", without_url(&e)),
                        source: None,
                    }))
                }
            }
        }
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let said = rest::parse::<rest::ErrorAnswer>("error", &body)
            .map(|a| format!("{}: {}", a.error.kind, a.error.message))
            .unwrap_or_else(|_| format!("status {status}"));
        let said: String = said.chars().take(300).collect();
        Err(match status {
            401 | 403 => Error::Auth(format!("catalog {shown}: {status} {said}")),
            404 => Error::NotFound {
                kind: "catalog table or endpoint",
                name: format!("{shown} ({said})"),
            },
            405 | 501 => Error::Unsupported(format!("catalog {shown}: {status} {said}")),
            408 | 429 | 500..=599 => Error::Io(IoError::Other {
                path: shown,
                message: format!("catalog answered {status}: {said}"),
                source: None,
            }),
            _ => Error::Iceberg(format!("catalog {shown}: {status} {said}")),
        })
    }
}

/// Connects each of `catalogs` (`OpenOptions::catalogs`) and routes its table's vended
/// credentials in `data`.
pub async fn connect_all(
    data: &UrlReader,
    catalogs: &[CatalogAccess],
    timeout: Option<Duration>,
) -> Result<Vec<Arc<RestCatalog>>> {
    let mut out = Vec::new();
    for access in catalogs {
        let c = RestCatalog::connect(access.clone(), timeout).await?;
        c.follow(data).await?;
        out.push(c);
    }
    Ok(out)
}

/// `url` without query or user info.
fn shown(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "<catalog URL>".to_string(),
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s.replace(u.as_str(), &shown(u.as_str()));
    }
    s
}

/// An S3 store for the objects under `prefix`, its credential refreshed through `catalog`.
fn s3_store(
    catalog: Arc<RestCatalog>,
    location: &str,
    prefix: &str,
    first: S3Credential,
    storage: &[(String, String)],
) -> Result<Arc<dyn object_store::ObjectStore>> {
    let bad = |m: String| Error::Iceberg(format!("catalog: vended prefix {prefix}: {m}"));
    let parsed = url::Url::parse(prefix).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "s3" | "s3a") {
        return Err(Error::Unsupported(format!(
            "catalog: credentials vended for {prefix}: only s3:// locations are read with vended credentials"
        )));
    }
    let bucket = parsed
        .host_str()
        .ok_or_else(|| bad("no bucket".into()))?
        .to_string();
    let mut b = AmazonS3Builder::new();
    for (k, v) in storage {
        // Keys and tokens come from the catalog; the rest of the overlay's settings apply.
        let key: AmazonS3ConfigKey = k
            .parse()
            .map_err(|e: object_store::Error| Error::Invalid(e.to_string()))?;
        if matches!(
            key,
            AmazonS3ConfigKey::AccessKeyId
                | AmazonS3ConfigKey::SecretAccessKey
                | AmazonS3ConfigKey::Token
                | AmazonS3ConfigKey::Bucket
        ) {
            continue;
        }
        b = b.with_config(key, v.clone());
    }
    b = b.with_bucket_name(bucket);
    if let Some(e) = &first.endpoint {
        b = b.with_endpoint(e.clone());
        if e.starts_with("http://") {
            b = b.with_allow_http(true);
        }
    }
    if let Some(r) = &first.region {
        b = b.with_region(r.clone());
    }
    if first.path_style {
        b = b.with_virtual_hosted_style_request(false);
    }
    let provider = VendedS3 {
        catalog,
        location: location.to_string(),
        prefix: prefix.to_string(),
        current: Mutex::new(Some(Current::of(first))),
    };
    let store = b
        .with_credentials(Arc::new(provider))
        .build()
        .map_err(|e| bad(e.to_string()))?;
    Ok(Arc::new(store))
}

struct Current {
    credential: Arc<AwsCredential>,
    refresh_at: Option<SystemTime>,
}

impl Current {
    fn of(c: S3Credential) -> Current {
        let refresh_at = c.expires_at_ms.map(|ms| {
            let expires = UNIX_EPOCH + Duration::from_millis(ms);
            let left = expires
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            expires - REFRESH_BEFORE.min(left / 2)
        });
        Current {
            credential: Arc::new(AwsCredential {
                key_id: c.access_key_id,
                secret_key: c.secret_access_key,
                token: c.session_token,
            }),
            refresh_at,
        }
    }
}

/// Vended S3 credentials of one prefix, asked for again through the catalog before they
/// expire ([`REFRESH_BEFORE`]).
pub struct VendedS3 {
    catalog: Arc<RestCatalog>,
    location: String,
    prefix: String,
    current: Mutex<Option<Current>>,
}

impl std::fmt::Debug for VendedS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendedS3")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl CredentialProvider for VendedS3 {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        {
            let cur = self.current.lock().expect("vended credential");
            if let Some(c) = cur.as_ref() {
                if c.refresh_at.is_none_or(|at| SystemTime::now() < at) {
                    return Ok(c.credential.clone());
                }
            }
        }
        let fail = |e: Error| match e {
            Error::Auth(m) => object_store::Error::Unauthenticated {
                path: self.prefix.clone(),
                source: m.into(),
            },
            e => object_store::Error::Generic {
                store: "Iceberg REST catalog",
                source: Box::new(e),
            },
        };
        let creds = self
            .catalog
            .credentials(&self.location)
            .await
            .map_err(fail)?;
        let pick = creds
            .iter()
            .find(|c| c.prefix == self.prefix)
            .or_else(|| rest::best(&creds, &self.prefix))
            .ok_or_else(|| {
                fail(Error::Auth(format!(
                    "catalog {}: no credential vended for {} any more",
                    self.catalog.table().display(),
                    self.prefix
                )))
            })?;
        let s3 = S3Credential::from_config(&pick.prefix, &pick.config).map_err(fail)?;
        let next = Current::of(s3);
        let cred = next.credential.clone();
        *self.current.lock().expect("vended credential") = Some(next);
        Ok(cred)
    }
}
