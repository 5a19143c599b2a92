//! napi values ⇄ [`HostValue`], and Skerry errors as JavaScript errors with `code` and
//! `retryable` set here (for sync and async functions alike).

use std::future::Future;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::{check_status, sys};
use skerry_core::host::{HostValue, MAX_DEPTH, MAX_ITEMS, TOO_LONG};

/// A JavaScript value as the host boundary sees it. Arrays and objects are followed
/// [`MAX_DEPTH`] levels deep; holes are `undefined`.
pub fn from_js(env: &Env, v: Unknown<'_>) -> Result<HostValue> {
    value(env, v, 0)
}

fn value(env: &Env, v: Unknown<'_>, depth: usize) -> Result<HostValue> {
    Ok(match v.get_type()? {
        ValueType::Undefined => HostValue::Undefined,
        ValueType::Null => HostValue::Null,
        ValueType::Boolean => HostValue::Bool(v.coerce_to_bool()?),
        ValueType::Number => HostValue::Number(v.coerce_to_number()?.get_double()?),
        ValueType::String => {
            HostValue::String(v.coerce_to_string()?.into_utf8()?.as_str()?.to_string())
        }
        ValueType::BigInt => {
            let b: BigInt = unsafe { BigInt::from_napi_value(env.raw(), v.raw())? };
            HostValue::BigInt(bigint(&b))
        }
        ValueType::Object if depth >= MAX_DEPTH => HostValue::Other("a value nested too deeply"),
        ValueType::Object if v.is_array()? => {
            let arr: Array = unsafe { Array::from_napi_value(env.raw(), v.raw())? };
            if arr.len() as usize > MAX_ITEMS {
                return Ok(HostValue::Other(TOO_LONG));
            }
            let mut items = Vec::with_capacity(arr.len().min(1 << 16) as usize);
            for i in 0..arr.len() {
                items.push(match arr.get::<Unknown>(i)? {
                    Some(x) => value(env, x, depth + 1)?,
                    None => HostValue::Undefined,
                });
            }
            HostValue::Array(items)
        }
        ValueType::Object if v.is_buffer()? || v.is_typedarray()? => {
            match unsafe { Uint8Array::from_napi_value(env.raw(), v.raw()) } {
                Ok(a) => HostValue::Bytes(a.to_vec()),
                Err(_) => HostValue::Other("a typed array other than Uint8Array"),
            }
        }
        ValueType::Object => {
            let o: Object = unsafe { Object::from_napi_value(env.raw(), v.raw())? };
            let mut props = Vec::new();
            for k in Object::keys(&o)? {
                let x: Unknown = o.get_named_property(&k)?;
                props.push((k, value(env, x, depth + 1)?));
            }
            HostValue::Object(props)
        }
        ValueType::Function => HostValue::Other("function"),
        ValueType::Symbol => HostValue::Other("symbol"),
        _ => HostValue::Other("an unsupported value"),
    })
}

/// A bigint's value, or `None` beyond ±(2^127 - 1).
fn bigint(b: &BigInt) -> Option<i128> {
    if b.words.iter().skip(2).any(|w| *w != 0) {
        return None;
    }
    let lo = b.words.first().copied().unwrap_or(0) as u128;
    let hi = b.words.get(1).copied().unwrap_or(0) as u128;
    let magnitude = i128::try_from(lo | (hi << 64)).ok()?;
    Some(if b.sign_bit { -magnitude } else { magnitude })
}

thread_local! {
    /// The function `lib/index.js` registers to build row objects ([`set_row_factory`]), with
    /// the env it belongs to.
    static ROW_FACTORY: std::cell::Cell<Option<(usize, sys::napi_ref)>> =
        const { std::cell::Cell::new(None) };
}

/// Registers `f(columns, values, count)`, which builds `count` row objects from `values`
/// (row-major, `columns.len()` a row). Rows are then built by it in JavaScript — one object
/// literal per row, compiled once per column list — instead of a property set through napi
/// for every cell (decision 83: 1.5 ms of a 1,000-row, 6-column answer).
///
/// # Safety
/// `env` and `f` must be the current call's.
pub unsafe fn set_row_factory(env: sys::napi_env, f: sys::napi_value) -> Result<()> {
    let mut r = ptr::null_mut();
    check_status!(sys::napi_create_reference(env, f, 1, &mut r))?;
    if let Some((old_env, old)) = ROW_FACTORY.with(|c| c.replace(Some((env as usize, r)))) {
        if old_env == env as usize {
            sys::napi_delete_reference(env, old);
        }
    }
    Ok(())
}

/// The registered row factory of `env`, if any.
unsafe fn row_factory(env: sys::napi_env) -> Option<sys::napi_value> {
    let (e, r) = ROW_FACTORY.with(|c| c.get())?;
    if e != env as usize {
        return None;
    }
    let mut f = ptr::null_mut();
    (sys::napi_get_reference_value(env, r, &mut f) == sys::Status::napi_ok && !f.is_null())
        .then_some(f)
}

/// A shaped answer, turned into JavaScript values when it reaches the JS thread.
pub struct Js(pub HostValue);

impl ToNapiValue for Js {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        to_raw(env, val.0)
    }
}

unsafe fn string(env: sys::napi_env, s: &str) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    check_status!(sys::napi_create_string_utf8(
        env,
        s.as_ptr().cast(),
        s.len() as isize,
        &mut out
    ))?;
    Ok(out)
}

unsafe fn set(
    env: sys::napi_env,
    obj: sys::napi_value,
    key: sys::napi_value,
    v: HostValue,
) -> Result<()> {
    let v = to_raw(env, v)?;
    check_status!(sys::napi_set_property(env, obj, key, v))
}

unsafe fn to_raw_array(env: sys::napi_env, items: Vec<HostValue>) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    check_status!(sys::napi_create_array_with_length(
        env,
        items.len(),
        &mut out
    ))?;
    for (i, x) in items.into_iter().enumerate() {
        let x = to_raw(env, x)?;
        check_status!(sys::napi_set_element(env, out, i as u32, x))?;
    }
    Ok(out)
}

/// Whether every item is an object with the first one's keys, in its order, none of them
/// `undefined` (an object leaves such a key out, a row would not).
fn one_shape(items: &[HostValue]) -> bool {
    let Some(HostValue::Object(first)) = items.first() else {
        return false;
    };
    items.iter().all(|x| match x {
        HostValue::Object(props) => {
            props.len() == first.len()
                && props
                    .iter()
                    .zip(first)
                    .all(|((k, v), (k0, _))| k == k0 && !matches!(v, HostValue::Undefined))
        }
        _ => false,
    })
}

/// `rows` (cells in `columns`' order) built by the registered row factory `f`.
unsafe fn call_factory(
    env: sys::napi_env,
    f: sys::napi_value,
    columns: Vec<String>,
    rows: Vec<Vec<HostValue>>,
) -> Result<sys::napi_value> {
    let mut cols = ptr::null_mut();
    check_status!(sys::napi_create_array_with_length(
        env,
        columns.len(),
        &mut cols
    ))?;
    for (j, c) in columns.iter().enumerate() {
        check_status!(sys::napi_set_element(env, cols, j as u32, string(env, c)?))?;
    }
    let width = columns.len();
    let count = rows.len();
    let mut values = ptr::null_mut();
    check_status!(sys::napi_create_array_with_length(
        env,
        count * width,
        &mut values
    ))?;
    let mut at = 0u32;
    for row in rows {
        // A row short of cells gives `undefined` for the rest; extra cells are dropped (as
        // properties set one by one did).
        let mut cells = row.into_iter();
        for _ in 0..width {
            let x = to_raw(env, cells.next().unwrap_or(HostValue::Undefined))?;
            check_status!(sys::napi_set_element(env, values, at, x))?;
            at += 1;
        }
    }
    let mut n = ptr::null_mut();
    check_status!(sys::napi_create_double(env, count as f64, &mut n))?;
    let mut this = ptr::null_mut();
    check_status!(sys::napi_get_undefined(env, &mut this))?;
    let args = [cols, values, n];
    let mut out = ptr::null_mut();
    check_status!(sys::napi_call_function(
        env,
        this,
        f,
        args.len(),
        args.as_ptr(),
        &mut out
    ))?;
    Ok(out)
}

unsafe fn to_raw(env: sys::napi_env, v: HostValue) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    match v {
        HostValue::Undefined | HostValue::Other(_) => {
            check_status!(sys::napi_get_undefined(env, &mut out))?
        }
        HostValue::Null => check_status!(sys::napi_get_null(env, &mut out))?,
        HostValue::Bool(b) => check_status!(sys::napi_get_boolean(env, b, &mut out))?,
        HostValue::Number(f) => check_status!(sys::napi_create_double(env, f, &mut out))?,
        HostValue::BigInt(i) => {
            let i = i.unwrap_or(0);
            let m = i.unsigned_abs();
            let words = [m as u64, (m >> 64) as u64];
            let n = if words[1] == 0 { 1 } else { 2 };
            check_status!(sys::napi_create_bigint_words(
                env,
                (i < 0) as i32,
                n,
                words.as_ptr(),
                &mut out
            ))?
        }
        HostValue::String(s) => out = string(env, &s)?,
        HostValue::Bytes(b) => out = Uint8Array::to_napi_value(env, Uint8Array::new(b))?,
        // A long array of objects of one shape (`refs`: `{ file, position, rowId }` a row) is
        // built as rows are.
        HostValue::Array(items) if items.len() >= 16 && one_shape(&items) => {
            if let Some(f) = row_factory(env) {
                let HostValue::Object(first) = &items[0] else {
                    unreachable!("one_shape")
                };
                let columns: Vec<String> = first.iter().map(|(k, _)| k.clone()).collect();
                let rows = items
                    .into_iter()
                    .map(|x| match x {
                        HostValue::Object(props) => props.into_iter().map(|(_, v)| v).collect(),
                        _ => unreachable!("one_shape"),
                    })
                    .collect();
                out = call_factory(env, f, columns, rows)?;
            } else {
                out = to_raw_array(env, items)?;
            }
        }
        HostValue::Array(items) => out = to_raw_array(env, items)?,
        HostValue::Object(props) => {
            check_status!(sys::napi_create_object(env, &mut out))?;
            for (k, x) in props {
                if !matches!(x, HostValue::Undefined) {
                    set(env, out, string(env, &k)?, x)?;
                }
            }
        }
        HostValue::Rows { columns, rows } if row_factory(env).is_some() => {
            let f = row_factory(env).expect("checked");
            out = call_factory(env, f, columns, rows)?;
        }
        HostValue::Rows { columns, rows } => {
            let keys = columns
                .iter()
                .map(|c| string(env, c))
                .collect::<Result<Vec<_>>>()?;
            check_status!(sys::napi_create_array_with_length(
                env,
                rows.len(),
                &mut out
            ))?;
            for (i, row) in rows.into_iter().enumerate() {
                let mut obj = ptr::null_mut();
                check_status!(sys::napi_create_object(env, &mut obj))?;
                for (k, x) in keys.iter().zip(row) {
                    set(env, obj, *k, x)?;
                }
                check_status!(sys::napi_set_element(env, out, i as u32, obj))?;
            }
        }
    }
    Ok(out)
}

/// `e` as a JavaScript `Error` whose `code` is [`skerry_core::Error::code`] and `retryable`
/// [`skerry_core::Error::retryable`]; the message carries no code.
pub fn js_error(env: &Env, e: &skerry_core::Error) -> napi::Error {
    let made = unsafe {
        (|| -> Result<napi::Error> {
            let raw = env.raw();
            let (code, msg) = (string(raw, e.code())?, string(raw, &e.to_string())?);
            let mut err = ptr::null_mut();
            check_status!(sys::napi_create_error(raw, code, msg, &mut err))?;
            let mut retry = ptr::null_mut();
            check_status!(sys::napi_get_boolean(raw, e.retryable(), &mut retry))?;
            check_status!(sys::napi_set_named_property(
                raw,
                err,
                c"retryable".as_ptr(),
                retry
            ))?;
            Ok(napi::Error::from(Unknown::from_napi_value(raw, err)?))
        })()
    };
    made.unwrap_or_else(|x| x)
}

/// Runs `fut` on the runtime; its error rejects the promise as a [`js_error`].
pub fn run<'env, T, F>(env: &'env Env, fut: F) -> Result<PromiseRaw<'env, T>>
where
    T: 'static + Send + ToNapiValue,
    F: 'static + Send + Future<Output = skerry_core::Result<T>>,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, r| {
        r.map_err(|e| js_error(env, &e))
    })
}
