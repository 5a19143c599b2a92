//! Paths named by untrusted documents (manifests, `HEAD`, callers' file lists) are data, not
//! instructions: every one is checked once, here, before any reader joins it to a base.
//!
//! A safe relative path ([`check_relative`]):
//! - is 1 to [`MAX_PATH_BYTES`] bytes, has no control characters, no backslash, no `?` or
//!   `#` (which would end the path part of a URL);
//! - has no scheme (`http:`, `file:`, `s3:` …), does not start with `/` and holds no `//`;
//! - has no `.` or `..` segment;
//!
//! and all of that holds after each round of percent-decoding too (until decoding changes
//! nothing, at most [`MAX_DECODE_ROUNDS`] rounds), so `%2e%2e/`, `%252e%252e/`, `.%2E/` and
//! `%2F%2F` are refused like the plain forms. Joined to a base URL such a path can only name
//! something below that base.

use super::IoError;

/// Longest path accepted (bytes).
pub const MAX_PATH_BYTES: usize = 4096;
/// Rounds of percent-decoding a path is checked through.
pub const MAX_DECODE_ROUNDS: usize = 4;

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

fn check_form(original: &str, s: &str, raw: bool) -> Result<(), IoError> {
    if s.is_empty() {
        return Err(refuse(original, "empty"));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(refuse(original, "control character"));
    }
    if s.contains('\\') {
        return Err(refuse(original, "backslash"));
    }
    if raw && (s.contains('?') || s.contains('#')) {
        return Err(refuse(original, "'?' or '#'"));
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

/// Decodes `%XX` escapes (invalid escapes stay as they are); `None` when the result is not
/// UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Checks that `path` is a safe relative path (see the module docs) and returns it unchanged.
/// Errors: [`IoError::InvalidUrl`] saying why.
pub fn check_relative(path: &str) -> Result<&str, IoError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(refuse(path, "too long"));
    }
    check_form(path, path, true)?;
    if !path.contains('%') {
        // Nothing to decode: the checks above are the whole answer.
        return Ok(path);
    }
    let mut cur = path.to_string();
    for _ in 0..MAX_DECODE_ROUNDS {
        let Some(next) = percent_decode(&cur) else {
            return Err(refuse(path, "percent-escapes that are not UTF-8"));
        };
        if next == cur {
            return Ok(path);
        }
        check_form(path, &next, false)?;
        cur = next;
    }
    Err(refuse(path, "percent-encoded too many times"))
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
            "%2e%2e/x",
            "%2E%2E/x",
            ".%2e/x",
            "a/%2e%2e",
            "%252e%252e/x",
            "%25252e%25252e/x",
            "a%2f..%2fb",
            "a%2F%2Fb",
            "%2fetc/passwd",
            "http://127.0.0.1:9/evil.puffin",
            "https:%2f%2fevil",
            "file:///etc/passwd",
            "s3://bucket/x",
            "c:/x",
            "//host/x",
            "a//b",
            "a\\..\\b",
            "a%5c..%5cb",
            "a\0b",
            "a%00b",
            "a\nb",
            "x.parquet?y=1",
            "x#frag",
            "%ff%fe",
            "javascript:alert(1)",
        ] {
            assert!(check_relative(p).is_err(), "{p:?} was accepted");
        }
        assert!(check_relative(&"a/".repeat(3000)).is_err());
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
