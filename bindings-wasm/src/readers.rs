//! [`RangeReader`]s for wasm: `fetch` with `Range` headers, and a JavaScript callback.

use std::ops::Range;

use bytes::Bytes;
use js_sys::{Function, Promise, Uint8Array};
use skerry_core::io::{
    check_range, BoxFut, IoCounters, IoError, Location, ObjectMeta, RangeReader,
};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Request, RequestInit, Response};

#[wasm_bindgen]
extern "C" {
    // The global `fetch` (browsers, Workers and Node all have one; there is no `window` in
    // Workers or Node).
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(req: &Request) -> Promise;
}

fn io_err(path: &str, e: JsValue) -> IoError {
    let message = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    IoError::Other {
        path: path.to_string(),
        message,
    }
}

/// Reads `base/path` (or `path` itself when it is an absolute URL) with `fetch`.
pub struct FetchReader {
    base: String,
    counters: IoCounters,
}

impl FetchReader {
    pub fn new(base: String) -> Self {
        FetchReader {
            base: base.trim_end_matches('/').to_string(),
            counters: IoCounters::default(),
        }
    }

    fn url(&self, path: &str) -> String {
        if path.contains("://") || self.base.is_empty() {
            path.to_string()
        } else {
            format!("{}/{}", self.base, path)
        }
    }

    async fn send(
        &self,
        loc: &Location,
        method: &str,
        range: Option<String>,
    ) -> Result<Response, IoError> {
        let url = self.url(&loc.path);
        let init = RequestInit::new();
        init.set_method(method);
        let req = Request::new_with_str_and_init(&url, &init).map_err(|e| io_err(&url, e))?;
        if let Some(r) = range {
            req.headers()
                .set("Range", &r)
                .map_err(|e| io_err(&url, e))?;
        }
        let resp: Response = JsFuture::from(global_fetch(&req))
            .await
            .map_err(|e| io_err(&url, e))?
            .dyn_into()
            .map_err(|e| io_err(&url, e))?;
        match resp.status() {
            200 | 206 => {}
            404 => {
                return Err(IoError::NotFound {
                    path: loc.path.to_string(),
                })
            }
            416 => {
                return Err(IoError::OutOfRange {
                    path: loc.path.to_string(),
                    start: 0,
                    end: 0,
                    size: 0,
                })
            }
            s => {
                return Err(IoError::Other {
                    path: loc.path.to_string(),
                    message: format!("HTTP {s}"),
                })
            }
        }
        if let (Some(want), Ok(Some(got))) = (&loc.version, resp.headers().get("ETag")) {
            if **want != *got {
                return Err(IoError::Changed {
                    path: loc.path.to_string(),
                    expected: want.to_string(),
                });
            }
        }
        Ok(resp)
    }

    async fn body(resp: &Response, path: &str) -> Result<Bytes, IoError> {
        let buf = JsFuture::from(resp.array_buffer().map_err(|e| io_err(path, e))?)
            .await
            .map_err(|e| io_err(path, e))?;
        Ok(Bytes::from(Uint8Array::new(&buf).to_vec()))
    }

    fn meta(resp: &Response, len: u64) -> ObjectMeta {
        let h = resp.headers();
        let size = h
            .get("Content-Range")
            .ok()
            .flatten()
            .and_then(|cr| cr.rsplit('/').next().and_then(|s| s.parse().ok()))
            .or_else(|| {
                if resp.status() == 200 {
                    Some(len)
                } else {
                    None
                }
            })
            .unwrap_or(len);
        ObjectMeta {
            size,
            version: h.get("ETag").ok().flatten(),
        }
    }
}

impl RangeReader for FetchReader {
    fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
        Box::pin(async move {
            let resp = self.send(loc, "HEAD", None).await?;
            self.counters.record_request(0);
            let len = resp
                .headers()
                .get("Content-Length")
                .ok()
                .flatten()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            Ok(ObjectMeta {
                size: len,
                version: resp.headers().get("ETag").ok().flatten(),
            })
        })
    }

    fn read_range<'a>(
        &'a self,
        loc: &'a Location,
        range: Range<u64>,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            check_range(loc, &range)?;
            let resp = self
                .send(
                    loc,
                    "GET",
                    Some(format!("bytes={}-{}", range.start, range.end - 1)),
                )
                .await?;
            let status = resp.status();
            let body = Self::body(&resp, &loc.path).await?;
            self.counters.record_request(body.len() as u64);
            // 200: the server ignored Range and sent everything.
            let bytes = if status == 200 {
                if range.end > body.len() as u64 {
                    return Err(IoError::OutOfRange {
                        path: loc.path.to_string(),
                        start: range.start,
                        end: range.end,
                        size: body.len() as u64,
                    });
                }
                body.slice(range.start as usize..range.end as usize)
            } else {
                body
            };
            if bytes.len() as u64 != range.end - range.start {
                return Err(IoError::OutOfRange {
                    path: loc.path.to_string(),
                    start: range.start,
                    end: range.end,
                    size: 0,
                });
            }
            Ok(bytes)
        })
    }

    fn read_suffix<'a>(
        &'a self,
        loc: &'a Location,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            let resp = self.send(loc, "GET", Some(format!("bytes=-{len}"))).await?;
            let status = resp.status();
            let body = Self::body(&resp, &loc.path).await?;
            self.counters.record_request(body.len() as u64);
            let meta = Self::meta(&resp, body.len() as u64);
            let bytes = if status == 200 && body.len() as u64 > len {
                body.slice(body.len() - len as usize..)
            } else {
                body
            };
            Ok((bytes, meta))
        })
    }

    fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let resp = self.send(loc, "GET", None).await?;
            let body = Self::body(&resp, &loc.path).await?;
            self.counters.record_request(body.len() as u64);
            Ok(body)
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}

/// Reads through `readRange(path, offset, length) => Promise<Uint8Array>` and
/// `size(path) => Promise<number>` (suffix and whole-object reads ask for the size first).
pub struct CallbackReader {
    read: Function,
    size: Option<Function>,
    counters: IoCounters,
}

impl CallbackReader {
    pub fn new(read: Function, size: Option<Function>) -> Self {
        CallbackReader {
            read,
            size,
            counters: IoCounters::default(),
        }
    }

    async fn call_read(&self, path: &str, start: u64, len: u64) -> Result<Bytes, IoError> {
        let p = self
            .read
            .call3(
                &JsValue::NULL,
                &path.into(),
                &JsValue::from_f64(start as f64),
                &JsValue::from_f64(len as f64),
            )
            .map_err(|e| io_err(path, e))?;
        let v = JsFuture::from(Promise::resolve(&p))
            .await
            .map_err(|e| io_err(path, e))?;
        if v.is_null() || v.is_undefined() {
            return Err(IoError::NotFound {
                path: path.to_string(),
            });
        }
        let a: Uint8Array = v.dyn_into().map_err(|_| IoError::Other {
            path: path.to_string(),
            message: "readRange must resolve to a Uint8Array".into(),
        })?;
        self.counters.record_request(a.length() as u64);
        Ok(Bytes::from(a.to_vec()))
    }

    async fn call_size(&self, path: &str) -> Result<u64, IoError> {
        let f = self
            .size
            .as_ref()
            .ok_or_else(|| IoError::Unsupported("this operation needs source.size(path)".into()))?;
        let p = f
            .call1(&JsValue::NULL, &path.into())
            .map_err(|e| io_err(path, e))?;
        let v = JsFuture::from(Promise::resolve(&p))
            .await
            .map_err(|e| io_err(path, e))?;
        if v.is_null() || v.is_undefined() {
            return Err(IoError::NotFound {
                path: path.to_string(),
            });
        }
        v.as_f64()
            .filter(|n| *n >= 0.0)
            .map(|n| n as u64)
            .ok_or_else(|| IoError::Other {
                path: path.to_string(),
                message: "size must resolve to a number".into(),
            })
    }
}

impl RangeReader for CallbackReader {
    fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
        Box::pin(async move {
            Ok(ObjectMeta {
                size: self.call_size(&loc.path).await?,
                version: None,
            })
        })
    }

    fn read_range<'a>(
        &'a self,
        loc: &'a Location,
        range: Range<u64>,
    ) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            check_range(loc, &range)?;
            let b = self
                .call_read(&loc.path, range.start, range.end - range.start)
                .await?;
            if b.len() as u64 != range.end - range.start {
                return Err(IoError::OutOfRange {
                    path: loc.path.to_string(),
                    start: range.start,
                    end: range.end,
                    size: 0,
                });
            }
            Ok(b)
        })
    }

    fn read_suffix<'a>(
        &'a self,
        loc: &'a Location,
        len: u64,
    ) -> BoxFut<'a, Result<(Bytes, ObjectMeta), IoError>> {
        Box::pin(async move {
            let size = self.call_size(&loc.path).await?;
            let start = size.saturating_sub(len);
            let b = if size == 0 {
                Bytes::new()
            } else {
                self.call_read(&loc.path, start, size - start).await?
            };
            Ok((
                b,
                ObjectMeta {
                    size,
                    version: None,
                },
            ))
        })
    }

    fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<Bytes, IoError>> {
        Box::pin(async move {
            let size = self.call_size(&loc.path).await?;
            if size == 0 {
                return Ok(Bytes::new());
            }
            self.call_read(&loc.path, 0, size).await
        })
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}
