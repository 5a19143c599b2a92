//! The host boundary: the one place where JavaScript-shaped input is parsed and every
//! answer is shaped for a JavaScript host, shared by the Node addon and the wasm reader.
//!
//! A binding only adapts its own value type to [`HostValue`] and back (napi `Unknown`,
//! wasm-bindgen `JsValue`); everything about *what* an argument means — keys, bounds,
//! `where`, options, row references — and every field of every result lives here, so the two
//! bindings cannot disagree.
//!
//! Contract:
//! - Parsing never panics and fails with a typed [`Error`](crate::Error): a malformed
//!   argument is `E_INVALID` naming it (`"{method}: {name} must be …"`), a value that cannot
//!   be a key is `E_KEY`.
//! - Rows cross as one Arrow IPC stream plus plain rows built directly from the record batch
//!   ([`output::rows`]): integers beyond ±2^53 as bigints, decimals as
//!   `{ unscaled: bigint, scale }`, binary as bytes. There is no second (JSON) row encoding.
//! - Ids (`position`, `rowId`, `indexId`) are bigints; counters are numbers.

pub mod input;
pub mod output;
pub mod verbs;

pub use verbs::{Answer, ReadCall, READ_VERBS};

/// A JavaScript value as both bindings see it.
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    /// `undefined`, and an array hole.
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    /// A bigint; `None` when it does not fit an `i128`.
    BigInt(Option<i128>),
    String(String),
    /// A `Uint8Array` (or Node `Buffer`).
    Bytes(Vec<u8>),
    Array(Vec<HostValue>),
    /// A plain object's own enumerable properties, in order.
    Object(Vec<(String, HostValue)>),
    /// Output only: rows of named columns (each row an object with these keys). The names
    /// are built once by the binding, not per row.
    Rows {
        columns: Vec<String>,
        rows: Vec<Vec<HostValue>>,
    },
    /// Anything else (a function, symbol, or a value nested deeper than [`MAX_DEPTH`]), by
    /// type name.
    Other(&'static str),
}

/// How deep a binding follows nested arrays and objects (a cyclic object ends here).
pub const MAX_DEPTH: usize = 16;

/// Longest array a binding converts (as many as a query may return rows); a longer one —
/// or a sparse array with a huge `length` — is [`HostValue::Other`] without being walked.
pub const MAX_ITEMS: usize = 1 << 20;

/// What a binding reports for an array longer than [`MAX_ITEMS`].
pub const TOO_LONG: &str = "an array longer than 1048576 elements";

impl HostValue {
    /// A property of an object (`Undefined` when absent or not an object).
    pub fn get(&self, key: &str) -> &HostValue {
        match self {
            HostValue::Object(props) => props
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or(&HostValue::Undefined),
            _ => &HostValue::Undefined,
        }
    }

    pub fn is_nullish(&self) -> bool {
        matches!(self, HostValue::Undefined | HostValue::Null)
    }

    /// The JavaScript type name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            HostValue::Undefined => "undefined",
            HostValue::Null => "null",
            HostValue::Bool(_) => "boolean",
            HostValue::Number(_) => "number",
            HostValue::BigInt(_) => "bigint",
            HostValue::String(_) => "string",
            HostValue::Bytes(_) => "Uint8Array",
            HostValue::Array(_) => "array",
            HostValue::Object(_) | HostValue::Rows { .. } => "object",
            HostValue::Other(t) => t,
        }
    }

    /// An object from `(name, value)` pairs.
    pub fn object<const N: usize>(props: [(&str, HostValue); N]) -> HostValue {
        HostValue::Object(props.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A counter as a number.
    pub fn count(n: u64) -> HostValue {
        HostValue::Number(n as f64)
    }

    /// An id as a bigint.
    pub fn id(n: u64) -> HostValue {
        HostValue::BigInt(Some(n as i128))
    }

    pub fn string(s: impl Into<String>) -> HostValue {
        HostValue::String(s.into())
    }

    pub fn strings(v: Vec<String>) -> HostValue {
        HostValue::Array(v.into_iter().map(HostValue::String).collect())
    }

    /// `Some(x)` as `f(x)`, `None` as `undefined` (the property is then left out).
    pub fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> HostValue) -> HostValue {
        v.map_or(HostValue::Undefined, f)
    }
}
