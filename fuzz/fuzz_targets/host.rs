//! The host boundary: what a JavaScript caller passes to a read verb (`ReadCall::parse`), as
//! a tree of host values built from the input, for every verb.
#![no_main]
use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use skerry_core::host::verbs::ReadCall;
use skerry_core::host::HostValue;

const METHODS: &[&str] = &[
    "lookup", "lookupMany", "range", "nulls", "locate", "fetchRows", "query", "explain", "count",
    "search", "nearest", "nope",
];
const NAMES: &[&str] = &[
    "where", "columns", "k", "vector", "query", "limit", "order", "verify", "nprobe", "ef",
    "index", "column", "op", "value", "from", "to", "lower", "upper", "inclusive", "snapshot",
    "eq", "in", "gt", "lt", "prefix", "rows", "position", "file", "rowId", "fields", "mode",
];

fn value(u: &mut Unstructured, depth: u32) -> Result<HostValue> {
    let pick = if depth >= 4 { u.int_in_range(0..=6)? } else { u.int_in_range(0..=8)? };
    Ok(match pick {
        0 => HostValue::Undefined,
        1 => HostValue::Null,
        2 => HostValue::Bool(bool::arbitrary(u)?),
        3 => HostValue::Number(f64::arbitrary(u)?),
        4 => HostValue::BigInt(Option::<i128>::arbitrary(u)?),
        5 => HostValue::String(if bool::arbitrary(u)? {
            NAMES[u.choose_index(NAMES.len())?].to_string()
        } else {
            String::arbitrary(u)?
        }),
        6 => HostValue::Bytes(Vec::<u8>::arbitrary(u)?),
        7 => {
            let n = u.int_in_range(0..=6)?;
            HostValue::Array((0..n).map(|_| value(u, depth + 1)).collect::<Result<_>>()?)
        }
        _ => {
            let n = u.int_in_range(0..=6)?;
            HostValue::Object(
                (0..n)
                    .map(|_| Ok((NAMES[u.choose_index(NAMES.len())?].to_string(), value(u, depth + 1)?)))
                    .collect::<Result<_>>()?,
            )
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(m) = u.choose_index(METHODS.len()) else {
        return;
    };
    let n = u.int_in_range(0..=4).unwrap_or(0);
    let args: Vec<HostValue> = (0..n).filter_map(|_| value(&mut u, 0).ok()).collect();
    let _ = ReadCall::parse(METHODS[m], &args);
});
