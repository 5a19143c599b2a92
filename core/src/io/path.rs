//! Paths named by untrusted documents (manifests, `HEAD`, Iceberg metadata, build tasks,
//! callers' file lists) are data, not instructions: every one is checked once, here, before
//! any reader joins it to a base.
//!
//! A relative path is an **object name** relative to its base — the name as the writer's
//! FileIO or the object store sees it, never URL-encoded. `data/cat=x%2Fy/0.parquet` names a
//! directory literally called `cat=x%2Fy` (as pyiceberg and pyarrow write partition values),
//! not `cat=x/y`. A reader that needs a URL encodes every segment ([`join`]); a reader of
//! object names (object_store, a `readRange` callback) takes the name as it is.
//!
//! A safe relative path ([`check_relative`]), judged on that real name and on nothing
//! decoded from it:
//! - is 1 to [`MAX_PATH_BYTES`] bytes, has no control characters and no backslash;
//! - has no scheme (`http:`, `file:`, `s3:` …), does not start with `/` and holds no `//`;
//! - has no `.` or `..` segment.
//!
//! `%2e%2e` is then a name like any other: [`join`] turns it into `%252e%252e`, which a
//! server decodes once back to the literal name, below the base. Joined to a base URL by
//! [`join`], a safe path can only name something below that base.

use super::IoError;

/// Longest path accepted (bytes).
pub const MAX_PATH_BYTES: usize = 4096;

fn refuse(path: &str, why: &str) -> IoError {
    let shown: String = path.chars().take(200).collect();
    IoError::InvalidUrl {
        url: shown,
        reason: format!("not a safe relative path: {why}"),
    }
}

fn has_scheme(s: &str) -> bool {
    // RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" — and Windows drives (`c:`).
    let first_segment = s.split('/').next().unwrap_or("");
    match first_segment.find(':') {
        Some(i) => {
            let scheme = &first_segment[..i];
            scheme.is_empty()
                || (scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        }
        None => false,
    }
}

fn check_form(original: &str, s: &str) -> Result<(), IoError> {
    if s.is_empty() {
        return Err(refuse(original, "empty"));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(refuse(original, "control character"));
    }
    if s.contains('\\') {
        return Err(refuse(original, "backslash"));
    }
    if s.starts_with('/') || s.contains("//") {
        return Err(refuse(original, "absolute or '//'"));
    }
    if has_scheme(s) {
        return Err(refuse(original, "has a scheme"));
    }
    if s.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(refuse(original, "'.' or '..' segment"));
    }
    Ok(())
}

/// Checks that `path` is a safe relative path (see the module docs) and returns it unchanged.
/// Errors: [`IoError::InvalidUrl`] saying why.
pub fn check_relative(path: &str) -> Result<&str, IoError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(refuse(path, "too long"));
    }
    check_form(path, path)?;
    Ok(path)
}

/// Bytes of a path segment that a URL must carry percent-encoded: controls, space, the
/// characters that end or delimit a URL's path (`?`, `#`, `%` itself) and those RFC 3986
/// does not allow in a segment; every non-ASCII byte is encoded too.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']');

/// The URL of the object named `rel` below the URL `base`: each segment of `rel` percent-
/// encoded ([`SEGMENT`]), so decoding the URL's path once gives the object name back exactly.
pub fn join(base: &str, rel: &str) -> String {
    let base = base.trim_end_matches('/');
    let mut out = String::with_capacity(base.len() + 1 + rel.len() + rel.len() / 4);
    out.push_str(base);
    for (i, seg) in rel.split('/').enumerate() {
        if i > 0 || !base.is_empty() {
            out.push('/');
        }
        out.extend(percent_encoding::utf8_percent_encode(seg, SEGMENT));
    }
    out
}

/// The object name a URL path segment run encodes (one round of `%XX` decoding, as a server
/// does), or `None` when it is not UTF-8 — the inverse of [`join`]'s encoding.
pub fn decode_once(encoded: &str) -> Option<String> {
    percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// The origin (`scheme://authority`, lowercased) of an absolute URL, or `None` when `url` has
/// no `scheme://`.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    Some(format!("{}://{}", scheme, authority).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        for p in [
            "part-0.parquet",
            "year=2024/part-0.parquet",
            "bundles/1/2-g3.puffin",
            "manifests/00000000000000000001.json",
            "a%20b.parquet",
            "50%25.parquet",
            "x..y/z...parquet",
            "caf%C3%A9.parquet",
            "k=v:w/x.parquet",
            // Object names, not encodings (pyiceberg's quoted partition values).
            "data/cat=x%2Fy/0.parquet",
            "data/cat=%252e%252e/0.parquet",
            "data/%2e%2e/0.parquet",
            "data/q?x/h#1/0.parquet",
            "data/café/a b+c/0.parquet",
        ] {
            assert_eq!(check_relative(p).map_err(|e| e.to_string()), Ok(p), "{p}");
        }
    }

    #[test]
    fn refuses_every_escape() {
        for p in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./x",
            ".",
            "..",
            "http://127.0.0.1:9/evil.puffin",
            "https:%2f%2fevil",
            "file:///etc/passwd",
            "s3://bucket/x",
            "c:/x",
            "//host/x",
            "a//b",
            "a\\..\\b",
            "a\0b",
            "a\nb",
            "a\tb",
            "javascript:alert(1)",
        ] {
            assert!(check_relative(p).is_err(), "{p:?} was accepted");
        }
        assert!(check_relative(&"a/".repeat(3000)).is_err());
    }

    /// Names that look like escapes are names: joined to a base they stay below it, and one
    /// round of decoding (what a server or object_store does) gives the name back.
    #[test]
    fn joined_names_stay_below_their_base_and_decode_to_themselves() {
        let base = "https://h.example/t";
        for name in [
            "%2e%2e/x",
            "%252e%252e/x",
            "a%2f..%2fb",
            "a%2F%2Fb",
            "%2fetc/passwd",
            "a%5c..%5cb",
            "x.parquet?y=1",
            "x#frag",
            "cat=x%2Fy/0.parquet",
            "100%25/ü/a+b/c:d/e=f/0.parquet",
        ] {
            assert_eq!(check_relative(name).map_err(|e| e.to_string()), Ok(name));
            let url = join(base, name);
            let parsed = url::Url::parse(&url).unwrap();
            assert_eq!(parsed.host_str(), Some("h.example"), "{url}");
            assert!(parsed.path().starts_with("/t/"), "{url}");
            assert_eq!(parsed.query(), None, "{url}");
            assert_eq!(parsed.fragment(), None, "{url}");
            let segs: Vec<&str> = parsed.path().trim_start_matches("/t/").split('/').collect();
            assert_eq!(segs.len(), name.split('/').count(), "{url}");
            let back: Vec<String> = segs.iter().map(|s| decode_once(s).unwrap()).collect();
            assert_eq!(back.join("/"), name, "{url}");
        }
        assert_eq!(join("file:///w/t/", "a b/c"), "file:///w/t/a%20b/c");
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin("http://127.0.0.1:8080/a/b").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            origin("HTTPS://Example.com").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(origin("file:///x").as_deref(), Some("file://"));
        assert_eq!(origin("relative/x"), None);
    }
}
