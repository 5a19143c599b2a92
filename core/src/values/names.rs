//! Names of tables and indexes: one validation rule and one case-folding rule, shared by the
//! catalog (which keys names by their folded form) and the manifest (which readers search).

/// Longest table or index name (bytes).
pub const MAX_NAME_BYTES: usize = 255;

/// The form names are compared in: Unicode lowercase (`"Ärger"` and `"ärger"` are one name).
pub fn fold(name: &str) -> String {
    name.to_lowercase()
}

/// Whether `a` and `b` name the same table or index.
pub fn same(a: &str, b: &str) -> bool {
    a == b || fold(a) == fold(b)
}

/// A table or index name is 1 to [`MAX_NAME_BYTES`] bytes, has no control characters, no
/// `/` or `\`, and is not `.` or `..` (names appear in paths and keys). Errors: `E_INVALID`
/// naming `kind`.
pub fn check(kind: &str, name: &str) -> Result<(), NameError> {
    let why = if name.is_empty() || name.len() > MAX_NAME_BYTES {
        Some(format!("1 to {MAX_NAME_BYTES} bytes"))
    } else if name.chars().any(|c| c.is_control()) {
        Some("without control characters".to_string())
    } else if name.contains('/') || name.contains('\\') {
        Some("without '/' or '\\'".to_string())
    } else if name == "." || name == ".." || name.trim().is_empty() {
        Some("not '.', '..' or blank".to_string())
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(w) => Err(NameError(format!("{kind} names are {w}"))),
    }
}

/// A name [`check`] refuses, with why (`E_INVALID`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NameError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["orders", "by_id", "ärger", "Ärger", "a.b", "x y", "日本"] {
            check("index", ok).unwrap();
        }
        for bad in ["", "../x", "a/b", "a\\b", ".", "..", " ", "a\0b", "a\nb"] {
            assert_eq!(
                crate::error::Error::from(check("index", bad).unwrap_err()).code(),
                "E_INVALID",
                "{bad:?}"
            );
        }
        check("index", &"x".repeat(1 << 20)).unwrap_err();
        assert!(same("Ärger", "ärger"));
        assert!(same("ORDERS", "orders"));
        assert!(!same("orders", "order"));
    }
}
