//! [`RangeReader`]s for wasm: `fetch` with `Range` headers, and a JavaScript callback.
//!
//! Both bound what they buffer while reading (declared length first, then a running count),
//! never after, and give every request a deadline and the caller's `AbortSignal`
//! ([`Limits`]): a server that accepts and never answers fails `E_TIMEOUT`, an aborted
//! signal `E_ABORTED`, instead of a promise that never settles.

use std::ops::Range;

use bytes::Bytes;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use skerry_core::io::{
    check_range, path::check_relative, BoxFut, IoCounters, IoError, Location, ObjectMeta,
    RangeReader, Reply, Request as Req,
};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::RequestInit;

#[wasm_bindgen(inline_js = r#"
export function deadline(ms, user) {
  const c = new AbortController();
  let timer = null;
  let timedOut = false;
  if (ms > 0) timer = setTimeout(() => { timedOut = true; c.abort(); }, ms);
  let onAbort = null;
  if (user) {
    if (user.aborted) c.abort();
    else { onAbort = () => c.abort(); user.addEventListener('abort', onAbort, { once: true }); }
  }
  return {
    signal: c.signal,
    timedOut: () => timedOut,
    done: () => { if (timer !== null) clearTimeout(timer); timer = null; if (onAbort) user.removeEventListener('abort', onAbort); onAbort = null; },
    cancel: () => c.abort(),
  };
}
export function raceSignal(p, signal) {
  if (signal.aborted) return Promise.reject(Object.assign(new Error('aborted'), { name: 'AbortError' }));
  return new Promise((resolve, reject) => {
    const on = () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }));
    signal.addEventListener('abort', on, { once: true });
    Promise.resolve(p).then(
      (v) => { signal.removeEventListener('abort', on); resolve(v); },
      (e) => { signal.removeEventListener('abort', on); reject(e); });
  });
}
// `fetch(url, init)` with `Range` added to the caller's headers (`init` is the reader's own
// copy). Not `fetch(new Request(url, init))`: fetch builds a Request from its input again,
// and in Node each Request costs an AbortSignal linked to the caller's — two per range read,
// a third of a warm vector query's time in fetch (47 ranges).
export function fetchRange(url, init, range) {
  if (range !== undefined) {
    const user = init.headers;
    if (user === undefined || user === null) init.headers = { Range: range };
    else { const h = new Headers(user); h.set('Range', range); init.headers = h; }
  }
  return fetch(url, init);
}
// One request under `signal`: its status, the headers a reader uses and — for a 2xx answer
// when `limit` >= 0 — its body, read by readBody: one promise and one crossing into wasm per
// request.
export async function request(url, init, range, limit, truncate, signal) {
  const resp = await fetchRange(url, init, range);
  const h = resp.headers;
  const out = { status: resp.status, etag: h.get('ETag'), range: h.get('Content-Range'), length: h.get('Content-Length'), body: null };
  if (limit >= 0 && resp.status >= 200 && resp.status < 300) out.body = await raceSignal(readBody(resp, limit, truncate), signal);
  return out;
}
// Reads at most `limit` bytes of a response body. Past it: with `truncate`, the first
// `limit` bytes (the rest is cancelled); otherwise an error named TooLarge.
export async function readBody(resp, limit, truncate) {
  const declared = Number(resp.headers.get('content-length'));
  if (!truncate && Number.isFinite(declared) && declared > limit) {
    try { await resp.body?.cancel(); } catch {}
    throw Object.assign(new Error('too large'), { name: 'TooLarge' });
  }
  if (!resp.body) return new Uint8Array(0);
  const reader = resp.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (total + value.length > limit) {
      if (!truncate) {
        try { await reader.cancel(); } catch {}
        throw Object.assign(new Error('too large'), { name: 'TooLarge' });
      }
      chunks.push(value.subarray(0, limit - total));
      total = limit;
      try { await reader.cancel(); } catch {}
      break;
    }
    chunks.push(value);
    total += value.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) { out.set(c, at); at += c.length; }
  return out;
}
"#)]
extern "C" {
    type Deadline;
    fn deadline(ms: f64, user: &JsValue) -> Deadline;
    #[wasm_bindgen(method, getter)]
    fn signal(this: &Deadline) -> JsValue;
    #[wasm_bindgen(method, js_name = timedOut)]
    fn timed_out(this: &Deadline) -> bool;
    #[wasm_bindgen(method)]
    fn done(this: &Deadline);
    #[wasm_bindgen(method)]
    fn cancel(this: &Deadline);
    #[wasm_bindgen(js_name = raceSignal)]
    fn race_signal(p: &Promise, signal: &JsValue) -> Promise;
    #[wasm_bindgen(js_name = request)]
    fn js_request(
        url: &str,
        init: &RequestInit,
        range: Option<String>,
        limit: f64,
        truncate: bool,
        signal: &JsValue,
    ) -> Promise;
    /// What `request` resolves to.
    type Answer;
    #[wasm_bindgen(method, getter)]
    fn status(this: &Answer) -> u16;
    #[wasm_bindgen(method, getter)]
    fn etag(this: &Answer) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn range(this: &Answer) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn length(this: &Answer) -> Option<String>;
    #[wasm_bindgen(method, getter)]
    fn body(this: &Answer) -> Option<Uint8Array>;
}

/// Deadline and cancellation of every request a reader makes.
#[derive(Clone)]
pub struct Limits {
    /// Milliseconds a request (body included) may take; 0 = no limit.
    pub timeout_ms: f64,
    /// The caller's `AbortSignal` (or undefined).
    pub signal: JsValue,
}

/// Largest body a suffix read accepts from a server that ignored its `Range` header.
const MAX_IGNORED_RANGE_BODY: u64 = 64 << 20;

fn io_err(path: &str, e: JsValue) -> IoError {
    let message = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    IoError::Other {
        path: path.to_string(),
        message,
        source: None,
    }
}

fn error_name(e: &JsValue) -> String {
    js_sys::Reflect::get(e, &"name".into())
        .ok()
        .and_then(|n| n.as_string())
        .unwrap_or_default()
}

impl Limits {
    /// Runs `op` (which must pass `signal` to what it awaits) under this deadline.
    async fn run<T, F, Fut>(&self, path: &str, op: F) -> Result<T, IoError>
    where
        F: FnOnce(JsValue) -> Fut,
        Fut: std::future::Future<Output = Result<T, JsValue>>,
    {
        let mut d = Held {
            deadline: deadline(self.timeout_ms, &self.signal),
            ended: false,
        };
        let r = op(d.deadline.signal()).await;
        d.ended = true;
        let d = &d.deadline;
        r.map_err(|e| match error_name(&e).as_str() {
            "AbortError" | "TimeoutError" if d.timed_out() => IoError::Timeout {
                path: path.to_string(),
                ms: self.timeout_ms as u64,
            },
            "AbortError" | "TimeoutError" => IoError::Aborted {
                path: path.to_string(),
            },
            "TooLarge" => IoError::TooLarge {
                path: path.to_string(),
                max: 0,
            },
            // What fetch rejects with when the network or CORS refuses the request (the
            // reason is not visible to scripts).
            "TypeError" => {
                let mut err = io_err(path, e);
                if let IoError::Other { message, .. } = &mut err {
                    message.push_str(
                        " (network error; for a cross-origin server check CORS: \
                         Access-Control-Allow-Origin, Access-Control-Allow-Headers: Range, \
                         Access-Control-Expose-Headers: Content-Range, Content-Length, ETag)",
                    );
                }
                err
            }
            _ => io_err(path, e),
        })
    }
}

/// A request's deadline while the request runs. Dropped — the request ended, or its future
/// was dropped mid-flight because a sibling request of the same round failed — it clears its
/// timer and listener, and aborts the request it no longer waits for: a dropped request keeps
/// no timer that holds the host's event loop open for the whole timeout (a Node process that
/// met one network error lingered 30 s before exiting) and no connection busy.
struct Held {
    deadline: Deadline,
    ended: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.ended {
            self.deadline.cancel();
        }
        self.deadline.done();
    }
}

async fn await_signal(p: Promise, signal: &JsValue) -> Result<JsValue, JsValue> {
    JsFuture::from(race_signal(&p, signal)).await
}

/// Reads `base/path` with `fetch`, `path` being a safe relative path (checked again here),
/// or — with an empty base — a full URL the reader built itself.
pub struct FetchReader {
    base: String,
    limits: Limits,
    /// The caller's `RequestInit` fields (`headers`, `credentials`, `cache`, `mode`, …);
    /// `method` and `signal` are always the reader's.
    init: JsValue,
    counters: IoCounters,
}

/// A response and what was read of it.
struct Fetched {
    status: u16,
    meta_size: Option<u64>,
    etag: Option<String>,
    body: Bytes,
}

impl FetchReader {
    pub fn new(base: String, limits: Limits, init: JsValue) -> Self {
        FetchReader {
            base: base.trim_end_matches('/').to_string(),
            limits,
            init,
            counters: IoCounters::default(),
        }
    }

    fn url(&self, path: &str) -> Result<String, IoError> {
        if self.base.is_empty() {
            return Ok(path.to_string());
        }
        check_relative(path)?;
        Ok(skerry_core::io::path::join(&self.base, path))
    }

    /// One request: `body_limit` bounds the body (`truncate`: keep its first bytes).
    async fn request(
        &self,
        loc: &Location,
        method: &str,
        range: Option<String>,
        body_limit: Option<(u64, bool)>,
        accept_416: bool,
    ) -> Result<Fetched, IoError> {
        let url = self.url(&loc.path)?;
        let version = loc.version.clone();
        let path = loc.path.to_string();
        let user_init = self.init.clone();
        let range_header = range.clone();
        let r = self
            .limits
            .run(&loc.path, |signal| async move {
                let init = RequestInit::new();
                if user_init.is_object() {
                    js_sys::Object::assign(
                        init.unchecked_ref::<js_sys::Object>(),
                        user_init.unchecked_ref::<js_sys::Object>(),
                    );
                }
                init.set_method(method);
                js_sys::Reflect::set(&init, &"signal".into(), &signal)?;
                // The global `fetch` (browsers, Workers and Node all have one).
                let (limit, truncate) = match body_limit {
                    Some((limit, truncate)) => (limit as f64, truncate),
                    None => (-1.0, false),
                };
                let a: Answer =
                    JsFuture::from(js_request(&url, &init, range, limit, truncate, &signal))
                        .await?
                        .unchecked_into();
                let status = a.status();
                let etag = a.etag();
                let meta_size = a
                    .range()
                    .and_then(|cr| cr.rsplit('/').next().and_then(|s| s.parse().ok()))
                    .or_else(|| {
                        a.length()
                            .and_then(|s| s.parse().ok())
                            .filter(|_| status == 200)
                    });
                let body = match a.body() {
                    Some(b) => Bytes::from(b.to_vec()),
                    None => Bytes::new(),
                };
                Ok(Fetched {
                    status,
                    meta_size,
                    etag,
                    body,
                })
            })
            .await;
        let f = match r {
            Err(IoError::TooLarge { path, .. }) => {
                return Err(IoError::TooLarge {
                    path,
                    max: body_limit.map_or(0, |b| b.0),
                })
            }
            r => r?,
        };
        match f.status {
            200 | 206 => {}
            416 if accept_416 => return Ok(f),
            404 => return Err(IoError::NotFound { path }),
            416 => {
                return Err(IoError::Other {
                    path,
                    message: format!(
                        "HTTP 416 Range Not Satisfiable for {}: the object is shorter than \
                         the manifest says (it changed since it was published), or a cache \
                         between reader and server rewrote the range",
                        range_header.as_deref().unwrap_or("the request")
                    ),
                    source: None,
                })
            }
            s => {
                return Err(IoError::Other {
                    path,
                    message: format!("HTTP {s}"),
                    source: None,
                })
            }
        }
        match (&version, &f.etag) {
            (Some(want), Some(got)) if **want != *got => {
                return Err(IoError::Changed {
                    path,
                    expected: want.to_string(),
                })
            }
            // A content version is trusted only when every answer names it
            // (`content_versions`): one that does not is not known to be that version.
            (Some(want), None) if skerry_core::io::content_etag(want) => {
                return Err(IoError::Changed {
                    path,
                    expected: want.to_string(),
                })
            }
            _ => {}
        }
        Ok(f)
    }
}

impl FetchReader {
    async fn head_of(&self, loc: &Location) -> Result<ObjectMeta, IoError> {
        {
            let f = self.request(loc, "HEAD", None, None, false).await?;
            self.counters.record_request(0);
            Ok(ObjectMeta {
                size: f.meta_size.unwrap_or(0),
                version: f.etag,
            })
        }
    }

    async fn range_of(&self, loc: &Location, range: Range<u64>) -> Result<Bytes, IoError> {
        {
            check_range(loc, &range)?;
            let len = range.end - range.start;
            // A server that ignores Range answers 200 with the whole object: keep only what
            // reaches the range's end.
            let f = self
                .request(
                    loc,
                    "GET",
                    Some(format!("bytes={}-{}", range.start, range.end - 1)),
                    Some((range.end, true)),
                    false,
                )
                .await?;
            self.counters.record_request(f.body.len() as u64);
            let bytes = if f.status == 200 {
                if range.end > f.body.len() as u64 {
                    return Err(IoError::OutOfRange {
                        path: loc.path.to_string(),
                        start: range.start,
                        end: range.end,
                        size: f.body.len() as u64,
                    });
                }
                f.body.slice(range.start as usize..range.end as usize)
            } else {
                f.body
            };
            if bytes.len() as u64 != len {
                return Err(IoError::OutOfRange {
                    path: loc.path.to_string(),
                    start: range.start,
                    end: range.end,
                    size: 0,
                });
            }
            Ok(bytes)
        }
    }

    async fn suffix_of(&self, loc: &Location, len: u64) -> Result<(Bytes, ObjectMeta), IoError> {
        {
            let f = self
                .request(
                    loc,
                    "GET",
                    Some(format!("bytes=-{len}")),
                    Some((len.max(MAX_IGNORED_RANGE_BODY), false)),
                    false,
                )
                .await?;
            self.counters.record_request(f.body.len() as u64);
            let size = f.meta_size.unwrap_or(f.body.len() as u64);
            let body = if f.status == 200 && f.body.len() as u64 > len {
                f.body.slice(f.body.len() - len as usize..)
            } else if f.body.len() as u64 > len {
                return Err(IoError::OutOfRange {
                    path: loc.path.to_string(),
                    start: 0,
                    end: len,
                    size,
                });
            } else {
                f.body
            };
            Ok((
                body,
                ObjectMeta {
                    size,
                    version: f.etag,
                },
            ))
        }
    }

    /// Absolute ranges only: a suffix range (`bytes=-n`) behind a browser cache that holds
    /// part of the object becomes `bytes=<start>-n` and fails 416. The object's real size
    /// comes back in `Content-Range`; when it is not `expected_size` any more, the tail is
    /// read again at the real size (so the metadata describes the object as it is now).
    async fn tail_of(
        &self,
        loc: &Location,
        expected_size: u64,
        len: u64,
    ) -> Result<(Bytes, ObjectMeta), IoError> {
        {
            let mut size = expected_size;
            for _ in 0..2 {
                if size == 0 {
                    break;
                }
                let n = len.min(size);
                let f = self
                    .request(
                        loc,
                        "GET",
                        Some(format!("bytes={}-{}", size - n, size - 1)),
                        Some((n.max(MAX_IGNORED_RANGE_BODY), false)),
                        true,
                    )
                    .await?;
                self.counters.record_request(f.body.len() as u64);
                let meta = ObjectMeta {
                    size: f.meta_size.unwrap_or(if f.status == 200 {
                        f.body.len() as u64
                    } else {
                        size
                    }),
                    version: f.etag.clone(),
                };
                if f.status == 416 {
                    // `Content-Range: bytes */<size>` names the real size.
                    match f.meta_size {
                        Some(real) if real != size => {
                            size = real;
                            continue;
                        }
                        _ => {
                            return Err(IoError::Other {
                                path: loc.path.to_string(),
                                message: format!(
                                    "HTTP 416 Range Not Satisfiable for the last {n} bytes of a \
                                     {size}-byte object"
                                ),
                                source: None,
                            })
                        }
                    }
                }
                if f.status == 200 {
                    // The server ignored Range: the body is the whole object.
                    let body = &f.body;
                    let k = (len as usize).min(body.len());
                    return Ok((body.slice(body.len() - k..), meta));
                }
                if meta.size != size {
                    size = meta.size;
                    continue;
                }
                if f.body.len() as u64 != n {
                    return Err(IoError::OutOfRange {
                        path: loc.path.to_string(),
                        start: size - n,
                        end: size,
                        size: f.body.len() as u64,
                    });
                }
                return Ok((f.body, meta));
            }
            self.suffix_of(loc, len).await
        }
    }

    async fn all_of(&self, loc: &Location, max: u64) -> Result<Bytes, IoError> {
        {
            let f = self
                .request(loc, "GET", None, Some((max, false)), false)
                .await?;
            self.counters.record_request(f.body.len() as u64);
            Ok(f.body)
        }
    }
}

impl RangeReader for FetchReader {
    fn fetch<'a>(&'a self, loc: &'a Location, req: Req) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            Ok(match req {
                Req::Head => Reply::meta(self.head_of(loc).await?),
                Req::Range(r) => Reply::bytes(self.range_of(loc, r).await?),
                Req::Suffix(len) => {
                    let (b, m) = self.suffix_of(loc, len).await?;
                    Reply::tail(b, m)
                }
                Req::Tail { expected_size, len } => {
                    let (b, m) = self.tail_of(loc, expected_size, len).await?;
                    Reply::tail(b, m)
                }
                Req::All(max) => Reply::bytes(
                    self.all_of(
                        loc,
                        max.unwrap_or(skerry_core::formats::manifest::MAX_MANIFEST_NUMBER),
                    )
                    .await?,
                ),
            })
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    /// A pin that is a content hash ETag ([`skerry_core::io::content_etag`]) is checked
    /// against the ETag of every answer, and an answer without one fails: what it returned is
    /// that content. Servers whose ETags are modification times and sizes keep byte checks.
    fn content_versions(&self, loc: &Location) -> bool {
        loc.version
            .as_deref()
            .is_some_and(skerry_core::io::content_etag)
    }
}

/// Reads through `readRange(path, offset, length) => Promise<Uint8Array>` and
/// `size(path) => Promise<number>` (suffix and whole-object reads ask for the size first).
/// Either may also resolve to an object naming the object's version — `{ bytes, etag }` and
/// `{ size, etag }` (an R2 object's `httpEtag`) — and then reads pinned to a version are checked
/// against it, file metadata is kept between queries, and a content-hash ETag is a content
/// version ([`RangeReader::content_versions`]).
pub struct CallbackReader {
    read: Function,
    size: Option<Function>,
    limits: Limits,
    counters: IoCounters,
    /// `readRange` has named a version: from then on it must, for content versions.
    reads_name_versions: std::cell::Cell<bool>,
}

impl CallbackReader {
    pub fn new(read: Function, size: Option<Function>, limits: Limits) -> Self {
        CallbackReader {
            read,
            size,
            limits,
            counters: IoCounters::default(),
            reads_name_versions: std::cell::Cell::new(false),
        }
    }

    async fn call_read(
        &self,
        path: &str,
        start: u64,
        len: u64,
    ) -> Result<(Bytes, Option<String>), IoError> {
        let read = self.read.clone();
        let p = path.to_string();
        let v = self
            .limits
            .run(path, |signal| async move {
                let ret = read.call3(
                    &JsValue::NULL,
                    &p.as_str().into(),
                    &JsValue::from_f64(start as f64),
                    &JsValue::from_f64(len as f64),
                )?;
                await_signal(Promise::resolve(&ret), &signal).await
            })
            .await?;
        if v.is_null() || v.is_undefined() {
            return Err(IoError::NotFound {
                path: path.to_string(),
            });
        }
        // `{ bytes, etag }`: the bytes and the version they are of.
        let (v, etag) = if v.is_object()
            && !v.is_instance_of::<js_sys::ArrayBuffer>()
            && !js_sys::ArrayBuffer::is_view(&v)
        {
            (
                Reflect::get(&v, &"bytes".into()).unwrap_or(JsValue::UNDEFINED),
                etag_of(path, &v)?,
            )
        } else {
            (v, None)
        };
        // A Uint8Array (Buffer included), any other view, or an ArrayBuffer (what R2's
        // `arrayBuffer()` and `fetch` give).
        let a: Uint8Array = if v.is_instance_of::<Uint8Array>() {
            v.unchecked_into()
        } else if v.is_instance_of::<js_sys::ArrayBuffer>() {
            Uint8Array::new(&v)
        } else if js_sys::ArrayBuffer::is_view(&v) {
            let buf = Reflect::get(&v, &"buffer".into()).unwrap_or(JsValue::UNDEFINED);
            let off = Reflect::get(&v, &"byteOffset".into())
                .ok()
                .and_then(|x| x.as_f64())
                .unwrap_or(0.0);
            let n = Reflect::get(&v, &"byteLength".into())
                .ok()
                .and_then(|x| x.as_f64())
                .unwrap_or(0.0);
            Uint8Array::new_with_byte_offset_and_length(&buf, off as u32, n as u32)
        } else {
            return Err(IoError::Other {
                path: path.to_string(),
                message:
                    "readRange must resolve to a Uint8Array, an ArrayBuffer or { bytes, etag }"
                        .into(),
                source: None,
            });
        };
        // Checked before the bytes are copied into wasm memory.
        if a.length() as u64 != len {
            return Err(IoError::OutOfRange {
                path: path.to_string(),
                start,
                end: start.saturating_add(len),
                size: a.length() as u64,
            });
        }
        self.counters.record_request(a.length() as u64);
        if etag.is_some() {
            self.reads_name_versions.set(true);
        }
        Ok((Bytes::from(a.to_vec()), etag))
    }

    async fn call_size(&self, path: &str) -> Result<ObjectMeta, IoError> {
        let f = self
            .size
            .clone()
            .ok_or_else(|| IoError::Unsupported("this operation needs source.size(path)".into()))?;
        let p = path.to_string();
        let v = self
            .limits
            .run(path, |signal| async move {
                let ret = f.call1(&JsValue::NULL, &p.as_str().into())?;
                await_signal(Promise::resolve(&ret), &signal).await
            })
            .await?;
        if v.is_null() || v.is_undefined() {
            return Err(IoError::NotFound {
                path: path.to_string(),
            });
        }
        // `{ size, etag }`: the size and the version it is of.
        let (n, version) = if v.is_object() {
            (
                Reflect::get(&v, &"size".into()).unwrap_or(JsValue::UNDEFINED),
                etag_of(path, &v)?,
            )
        } else {
            (v, None)
        };
        let size = n
            .as_f64()
            .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= 9_007_199_254_740_992.0)
            .map(|n| n as u64)
            .ok_or_else(|| IoError::Other {
                path: path.to_string(),
                message: "size must resolve to a non-negative integer or { size, etag }".into(),
                source: None,
            })?;
        Ok(ObjectMeta { size, version })
    }
}

/// The `etag` a callback named (a string, or absent).
fn etag_of(path: &str, v: &JsValue) -> Result<Option<String>, IoError> {
    let e = Reflect::get(v, &"etag".into()).unwrap_or(JsValue::UNDEFINED);
    if e.is_null() || e.is_undefined() {
        return Ok(None);
    }
    e.as_string().map(Some).ok_or_else(|| IoError::Other {
        path: path.to_string(),
        message: "etag must be a string".into(),
        source: None,
    })
}

/// A read pinned to `want` whose answer named `got`: another version is `E_CHANGED`, and so is
/// no version at all when the pin is a content version and `strict` (the source's reads name
/// versions: what it returned is not known to be that content).
fn check_version(
    path: &str,
    want: Option<&str>,
    got: Option<&str>,
    strict: bool,
) -> Result<(), IoError> {
    match (want, got) {
        (Some(w), Some(g)) if w != g => Err(IoError::Changed {
            path: path.to_string(),
            expected: w.to_string(),
        }),
        (Some(w), None) if strict && skerry_core::io::content_etag(w) => Err(IoError::Changed {
            path: path.to_string(),
            expected: w.to_string(),
        }),
        _ => Ok(()),
    }
}

impl RangeReader for CallbackReader {
    fn fetch<'a>(&'a self, loc: &'a Location, req: Req) -> BoxFut<'a, Result<Reply, IoError>> {
        Box::pin(async move {
            let pin = loc.version.as_deref();
            let meta = || async {
                let m = self.call_size(&loc.path).await?;
                check_version(&loc.path, pin, m.version.as_deref(), false)?;
                Ok::<_, IoError>(m)
            };
            // Bytes `start..size` (none when `start` is the end), of the version pinned or
            // named by the size call (`known`).
            let from = |start: u64, size: u64, known: Option<String>| async move {
                if start >= size {
                    return Ok(Bytes::new());
                }
                let (b, etag) = self.call_read(&loc.path, start, size - start).await?;
                let strict = pin.is_some() && self.reads_name_versions.get();
                check_version(&loc.path, pin.or(known.as_deref()), etag.as_deref(), strict)?;
                Ok::<_, IoError>(b)
            };
            Ok(match req {
                Req::Range(range) => {
                    check_range(loc, &range)?;
                    Reply::bytes(from(range.start, range.end, None).await?)
                }
                Req::Head => Reply::meta(meta().await?),
                Req::Suffix(len) | Req::Tail { len, .. } => {
                    let m = meta().await?;
                    let bytes = from(m.size.saturating_sub(len), m.size, m.version.clone()).await?;
                    Reply::tail(bytes, m)
                }
                Req::All(max) => {
                    let m = meta().await?;
                    let max = max.unwrap_or(skerry_core::formats::manifest::MAX_MANIFEST_NUMBER);
                    if m.size > max {
                        return Err(IoError::TooLarge {
                            path: loc.path.to_string(),
                            max,
                        });
                    }
                    Reply::bytes(from(0, m.size, m.version.clone()).await?)
                }
            })
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    /// A pin that is a content hash ETag, once the source's `readRange` names versions (every
    /// read must then name the pinned one, [`check_version`]): the `etag` is its object's
    /// (R2's `httpEtag`, an MD5).
    fn content_versions(&self, loc: &Location) -> bool {
        self.reads_name_versions.get()
            && loc
                .version
                .as_deref()
                .is_some_and(skerry_core::io::content_etag)
    }
}
