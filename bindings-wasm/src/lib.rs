//! Skerry's read-only WebAssembly reader (`skerry-wasm`): opens a published overlay over HTTP
//! range reads or a JavaScript `readRange` callback and answers lookups with the same core
//! planner the Node addon uses. Translation only: JS values in, JS values out.

#[cfg(target_arch = "wasm32")]
mod readers;

#[cfg(target_arch = "wasm32")]
mod api {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;
    use std::sync::Arc;

    use js_sys::{Array, Function, Object, Reflect, Uint8Array};
    use skerry_core::formats::manifest::{self, Manifest};
    use skerry_core::host::{HostValue, ReadCall, MAX_DEPTH, MAX_ITEMS, TOO_LONG};
    use skerry_core::io::{BoxFut, IoError, Location, RangeReader};
    use skerry_core::read::cache::ReadCache;
    use skerry_core::Snapshot;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    use crate::readers::{CallbackReader, FetchReader, Limits};

    /// Default limit on each request of a reader (`options.timeoutMs`).
    const DEFAULT_TIMEOUT_MS: f64 = 30_000.0;

    /// A Skerry error as a JS `Error` with `code` and `retryable`, as the addon raises it.
    fn js_err(e: skerry_core::Error) -> JsValue {
        let err = js_sys::Error::new(&e.to_string());
        let _ = Reflect::set(&err, &"code".into(), &e.code().into());
        let _ = Reflect::set(&err, &"retryable".into(), &e.retryable().into());
        err.into()
    }

    /// `E_INVALID` for an argument of a reader-only option.
    fn invalid(msg: impl Into<String>) -> JsValue {
        js_err(skerry_core::Error::Invalid(msg.into()))
    }

    /// A string argument, or `E_INVALID` naming it.
    fn text(v: &JsValue, method: &str, name: &str) -> Result<String, JsValue> {
        v.as_string()
            .ok_or_else(|| invalid(format!("{method}: {name} must be a string")))
    }

    /// An optional options object, or `E_INVALID`.
    fn options_object(v: &JsValue, method: &str) -> Result<(), JsValue> {
        if v.is_undefined() || v.is_null() || (v.is_object() && !Array::is_array(v)) {
            Ok(())
        } else {
            Err(invalid(format!("{method}: options must be an object")))
        }
    }

    /// A JavaScript value as the host boundary sees it (arrays and objects followed
    /// [`MAX_DEPTH`] levels deep).
    fn from_js(v: &JsValue, depth: usize) -> Result<HostValue, JsValue> {
        if v.is_undefined() {
            return Ok(HostValue::Undefined);
        }
        if v.is_null() {
            return Ok(HostValue::Null);
        }
        if let Some(b) = v.as_bool() {
            return Ok(HostValue::Bool(b));
        }
        if let Some(n) = v.as_f64() {
            return Ok(HostValue::Number(n));
        }
        if let Some(s) = v.as_string() {
            return Ok(HostValue::String(s));
        }
        if v.is_bigint() {
            let text: Option<String> = js_sys::BigInt::from(v.clone())
                .to_string(10)
                .ok()
                .map(Into::into);
            return Ok(HostValue::BigInt(text.and_then(|t| t.parse::<i128>().ok())));
        }
        if v.is_function() {
            return Ok(HostValue::Other("function"));
        }
        if v.is_symbol() {
            return Ok(HostValue::Other("symbol"));
        }
        if !v.is_object() {
            return Ok(HostValue::Other("an unsupported value"));
        }
        if depth >= MAX_DEPTH {
            return Ok(HostValue::Other("a value nested too deeply"));
        }
        if Array::is_array(v) {
            let a = v.unchecked_ref::<Array>();
            if a.length() as usize > MAX_ITEMS {
                return Ok(HostValue::Other(TOO_LONG));
            }
            return Ok(HostValue::Array(
                a.iter()
                    .map(|x| from_js(&x, depth + 1))
                    .collect::<Result<_, _>>()?,
            ));
        }
        if let Some(a) = v.dyn_ref::<Uint8Array>() {
            return Ok(HostValue::Bytes(a.to_vec()));
        }
        if js_sys::ArrayBuffer::is_view(v) {
            return Ok(HostValue::Other("a typed array other than Uint8Array"));
        }
        let o = v.unchecked_ref::<Object>();
        // A throwing getter fails the call with its own error, as in the addon.
        let mut props = Vec::new();
        for k in Object::keys(o).iter() {
            let x = Reflect::get(v, &k)?;
            props.push((k.as_string().unwrap_or_default(), from_js(&x, depth + 1)?));
        }
        Ok(HostValue::Object(props))
    }

    /// Sets `o[k] = v` as an own data property: a `__proto__` key too (`Reflect.set` would set the
    /// prototype instead — a column of that name would replace a row's prototype).
    fn put(o: &Object, k: &JsValue, v: &JsValue) {
        if k.as_string().as_deref() == Some("__proto__") {
            let d = Object::new();
            for (name, x) in [
                ("value", v.clone()),
                ("writable", JsValue::TRUE),
                ("enumerable", JsValue::TRUE),
                ("configurable", JsValue::TRUE),
            ] {
                let _ = Reflect::set(&d, &JsValue::from_str(name), &x);
            }
            let _ = Reflect::define_property(o, k, &d);
        } else {
            let _ = Reflect::set(o, k, v);
        }
    }

    /// A shaped answer as JavaScript values.
    fn to_js(v: HostValue) -> JsValue {
        match v {
            HostValue::Undefined | HostValue::Other(_) => JsValue::UNDEFINED,
            HostValue::Null => JsValue::NULL,
            HostValue::Bool(b) => JsValue::from_bool(b),
            HostValue::Number(n) => JsValue::from_f64(n),
            HostValue::BigInt(i) => js_sys::BigInt::from(i.unwrap_or(0)).into(),
            HostValue::String(s) => JsValue::from_str(&s),
            HostValue::Bytes(b) => Uint8Array::from(b.as_slice()).into(),
            HostValue::Array(items) => items.into_iter().map(to_js).collect::<Array>().into(),
            HostValue::Object(props) => {
                let out = Object::new();
                for (k, x) in props {
                    if !matches!(x, HostValue::Undefined) {
                        put(&out, &JsValue::from_str(&k), &to_js(x));
                    }
                }
                out.into()
            }
            HostValue::Rows { columns, rows } => {
                let keys: Vec<JsValue> = columns.iter().map(|c| JsValue::from_str(c)).collect();
                let out = Array::new_with_length(rows.len() as u32);
                for (i, row) in rows.into_iter().enumerate() {
                    let obj = Object::new();
                    for (k, x) in keys.iter().zip(row) {
                        put(&obj, k, &to_js(x));
                    }
                    out.set(i as u32, obj.into());
                }
                out.into()
            }
        }
    }

    /// Reads data files only below the table locations this reader may use: the caller's
    /// (`options.tables`), or a manifest's when same-origin with the overlay or listed in
    /// `options.allowOrigins`. Anything else fails `E_INVALID_URL` without a request. A table
    /// given its own source (`options.tables.orders = { readRange, size }`) is read through
    /// it, with paths relative to the table (`part-0.parquet`).
    struct ScopedReader {
        /// The reader of tables without their own source (fetch, or the overlay's callback).
        default: Arc<dyn RangeReader>,
        /// Tables with their own source: folded name → reader.
        own: HashMap<String, Arc<dyn RangeReader>>,
        /// Allowed prefixes (each ending in `/`) and the table source they route to.
        prefixes: RefCell<Vec<(String, Option<String>)>>,
        counters: skerry_core::io::IoCounters,
    }

    /// Location prefix of a table read through its own source.
    const OWN_SOURCE: &str = "skerry-table:";

    impl ScopedReader {
        fn route(&self, loc: &Location) -> Result<(Arc<dyn RangeReader>, Location), IoError> {
            for (p, own) in self.prefixes.borrow().iter() {
                if let Some(rest) = loc.path.strip_prefix(p.as_str()) {
                    return Ok(match own.as_ref().and_then(|t| self.own.get(t)) {
                        Some(r) => {
                            // The table's own source is asked for object names (the
                            // location's encoded path decoded once), only below it.
                            let name =
                                skerry_core::io::path::decode_once(rest).ok_or_else(|| {
                                    IoError::InvalidUrl {
                                        url: rest.chars().take(200).collect(),
                                        reason: "percent-escapes that are not UTF-8".into(),
                                    }
                                })?;
                            skerry_core::io::path::check_relative(&name)?;
                            let mut l = Location::new(name);
                            l.version = loc.version.clone();
                            (r.clone(), l)
                        }
                        // A relative location is a callback source's own namespace: it is
                        // asked for object names, as a table's own source is.
                        None if skerry_core::io::path::origin(p).is_none() => {
                            let name =
                                skerry_core::io::path::decode_once(&loc.path).ok_or_else(|| {
                                    IoError::InvalidUrl {
                                        url: loc.path.chars().take(200).collect(),
                                        reason: "percent-escapes that are not UTF-8".into(),
                                    }
                                })?;
                            let mut l = Location::new(name);
                            l.version = loc.version.clone();
                            (self.default.clone(), l)
                        }
                        None => (self.default.clone(), loc.clone()),
                    });
                }
            }
            Err(IoError::InvalidUrl {
                url: loc.path.chars().take(200).collect(),
                reason: "outside the table locations this reader may read (pass \
                         options.tables, or list the origin in options.allowOrigins)"
                    .into(),
            })
        }
    }

    impl RangeReader for ScopedReader {
        fn fetch<'a>(
            &'a self,
            loc: &'a Location,
            req: skerry_core::io::Request,
        ) -> BoxFut<'a, Result<skerry_core::io::Reply, IoError>> {
            Box::pin(async move {
                let (r, l) = self.route(loc)?;
                let reply = r.fetch(&l, req).await?;
                self.counters.record_request(reply.bytes.len() as u64);
                Ok(reply)
            })
        }
        fn counters(&self) -> &skerry_core::io::IoCounters {
            &self.counters
        }
        fn content_versions(&self, loc: &Location) -> bool {
            self.route(loc).is_ok_and(|(r, l)| r.content_versions(&l))
        }
    }

    struct Inner {
        /// `warning` listeners (rejected indexes during queries).
        listeners: RefCell<Vec<Function>>,
        overlay: Arc<dyn RangeReader>,
        data: Arc<ScopedReader>,
        /// Origin of the overlay's base URL (`None` for a callback source).
        origin: Option<String>,
        /// Origins (`scheme://host[:port]`, lowercase) whose table locations a manifest may
        /// name.
        allow_origins: Vec<String>,
        manifest: RefCell<Arc<Manifest>>,
        cache: Arc<ReadCache>,
        metrics: Arc<skerry_core::read::metrics::Metrics>,
        scan_only: std::cell::Cell<bool>,
        /// Table name (lowercase) → data location override.
        tables: HashMap<String, String>,
    }

    impl Inner {
        /// The read handle of the pinned version.
        fn snapshot(&self) -> Snapshot {
            Snapshot::new(
                self.overlay.clone(),
                self.data.clone(),
                self.manifest.borrow().clone(),
                self.cache.clone(),
            )
            .with_scan_only(self.scan_only.get())
            .with_metrics(self.metrics.clone())
        }

        async fn load(&self) -> Result<(), JsValue> {
            let mut m = manifest::read_latest(self.overlay.as_ref())
                .await
                .map_err(js_err)?;
            let mut prefixes = Vec::new();
            for t in &mut m.tables {
                let folded = skerry_core::values::names::fold(&t.name);
                if self.data.own.contains_key(&folded) {
                    t.location = format!("{OWN_SOURCE}{folded}");
                    prefixes.push((format!("{}/", t.location), Some(folded)));
                    continue;
                }
                if let Some(loc) = self.tables.get(&folded) {
                    t.location = loc.clone();
                } else {
                    // A location named by the manifest is data: used only when it is
                    // same-origin with the overlay or its origin is allowed.
                    let o = skerry_core::io::path::origin(&t.location);
                    let allowed = match &o {
                        Some(o) => {
                            self.origin.as_ref() == Some(o) || self.allow_origins.contains(o)
                        }
                        // A relative location names paths of a callback source's own
                        // namespace (never of a fetch source, whose base is a URL).
                        None => {
                            self.origin.is_none()
                                && skerry_core::io::path::check_relative(&t.location).is_ok()
                        }
                    };
                    if !allowed {
                        continue;
                    }
                }
                prefixes.push((format!("{}/", t.location.trim_end_matches('/')), None));
            }
            *self.data.prefixes.borrow_mut() = prefixes;
            *self.manifest.borrow_mut() = Arc::new(m);
            Ok(())
        }
    }

    #[wasm_bindgen(typescript_custom_section)]
    const HOST_TYPES: &'static str = include_str!("../../core/src/host/host.d.ts");

    #[wasm_bindgen(typescript_custom_section)]
    const READER_TYPES: &'static str = r#"
/** The read verbs (`ReadVerbs`) are the reader's methods. */
export interface OverlayReader extends ReadVerbs {}
/** A source of overlay bytes other than a URL: an R2 binding, signed URLs, custom auth. */
export interface ReadSource {
  /**
   * `length` bytes from `offset`; `null`/`undefined` = no such object (`E_NOT_FOUND`). With the
   * object's version (`{ bytes, etag }`, e.g. an R2 object's `httpEtag`), file metadata is kept
   * between queries and reads are checked against it; an MD5 ETag also spares dictionary pages
   * already held (`docs/guarantees.md`, "Versions"). Name it from both calls or neither.
   */
  readRange(path: string, offset: number, length: number): Promise<Uint8Array | ArrayBuffer | { bytes: Uint8Array | ArrayBuffer; etag?: string } | null | undefined>;
  size?(path: string): Promise<number | { size: number; etag?: string } | null | undefined>;
}
/** The `fetch` options a reader passes on (a subset of `RequestInit`, typed here so no DOM lib is needed). */
export interface FetchOptions {
  headers?: Record<string, string> | Array<[string, string]>;
  credentials?: 'omit' | 'same-origin' | 'include';
  cache?: 'default' | 'no-store' | 'reload' | 'no-cache' | 'force-cache' | 'only-if-cached';
  mode?: 'cors' | 'no-cors' | 'same-origin';
  referrerPolicy?: string;
  integrity?: string;
  keepalive?: boolean;
}
/** Options of `OverlayReader.open`. */
export interface ReaderOptions {
  /**
   * Table name → where its data files are: a base URL (or, for a callback source, a path
   * prefix), or the table's own `{ readRange, size }` source, which is then asked for paths
   * relative to the table (`part-0.parquet`).
   */
  tables?: Record<string, string | ReadSource>;
  /**
   * Options of every `fetch` the reader makes (URL sources): `headers`, `credentials`,
   * `cache`, `mode`, `referrerPolicy`, … `method`, `signal` and `Range` are the reader's.
   */
  fetch?: FetchOptions;
  /**
   * Origins (`scheme://host[:port]`) whose table locations a manifest may name. A location
   * from the manifest is otherwise used only when same-origin with the overlay URL.
   */
  allowOrigins?: string[];
  /** Limit on each request, body included (default 30000; 0 = none): `E_TIMEOUT`. */
  timeoutMs?: number;
  /** Aborts every request in flight and to come: `E_ABORTED`. */
  signal?: AbortSignal;
  /**
   * The read cache's budget in bytes (directories, Parquet metadata, index blocks, postings,
   * data files' dictionary pages; default 64 MiB, 0 caches nothing).
   */
  cacheBytes?: number;
}
"#;

    /// A read-only view of a published overlay.
    #[wasm_bindgen]
    pub struct OverlayReader {
        inner: Rc<Inner>,
    }

    fn get(o: &JsValue, k: &str) -> JsValue {
        Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED)
    }

    /// A `{ readRange, size }` object as a reader.
    fn callback_source(
        v: &JsValue,
        what: &str,
        limits: &Limits,
    ) -> Result<CallbackReader, JsValue> {
        let read: Function = get(v, "readRange").dyn_into().map_err(|_| {
            invalid(format!(
                "OverlayReader.open: {what}.readRange must be a function"
            ))
        })?;
        let size = get(v, "size");
        let size: Option<Function> = if size.is_undefined() {
            None
        } else {
            Some(size.dyn_into().map_err(|_| {
                invalid(format!(
                    "OverlayReader.open: {what}.size must be a function"
                ))
            })?)
        };
        Ok(CallbackReader::new(read, size, limits.clone()))
    }

    #[wasm_bindgen]
    impl OverlayReader {
        /// Opens the newest published version of an overlay.
        ///
        /// `source` is the overlay's base URL (read with `fetch` + `Range`), or an object
        /// `{ readRange(path, offset, length): Promise<Uint8Array>, size(path): Promise<number> }`
        /// (an R2 binding, signed URLs, custom auth). `options.tables` maps table names to the
        /// base URL (or callback path prefix) of their data files when the manifest's location
        /// is not reachable from here.
        pub async fn open(
            #[wasm_bindgen(unchecked_param_type = "string | ReadSource")] source: JsValue,
            #[wasm_bindgen(unchecked_optional_param_type = "ReaderOptions")] options: JsValue,
        ) -> Result<OverlayReader, JsValue> {
            options_object(&options, "OverlayReader.open")?;
            let timeout = get(&options, "timeoutMs");
            let timeout_ms = if timeout.is_undefined() {
                DEFAULT_TIMEOUT_MS
            } else {
                timeout
                    .as_f64()
                    .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= 2_147_483_647.0)
                    .ok_or_else(|| {
                        invalid("OverlayReader.open: options.timeoutMs must be an integer from 0 (no limit) to 2^31-1")
                    })?
            };
            let signal = get(&options, "signal");
            if !signal.is_undefined()
                && !(signal.is_object()
                    && Reflect::has(&signal, &"aborted".into()).unwrap_or(false))
            {
                return Err(invalid(
                    "OverlayReader.open: options.signal must be an AbortSignal",
                ));
            }
            let limits = Limits { timeout_ms, signal };
            let fetch_init = get(&options, "fetch");
            if !fetch_init.is_undefined()
                && (!fetch_init.is_object() || Array::is_array(&fetch_init))
            {
                return Err(invalid(
                    "OverlayReader.open: options.fetch must be an object of fetch options (headers, credentials, cache, mode, …)",
                ));
            }
            let (overlay, data, origin): (Arc<dyn RangeReader>, Arc<dyn RangeReader>, _) =
                if let Some(url) = source.as_string() {
                    let origin = skerry_core::io::path::origin(&url).ok_or_else(|| {
                        js_err(skerry_core::Error::Io(IoError::InvalidUrl {
                            url: url.chars().take(200).collect(),
                            reason: "the overlay's base must be an absolute URL".into(),
                        }))
                    })?;
                    (
                        Arc::new(FetchReader::new(url, limits.clone(), fetch_init.clone())),
                        Arc::new(FetchReader::new(
                            String::new(),
                            limits.clone(),
                            fetch_init.clone(),
                        )),
                        Some(origin),
                    )
                } else if source.is_object() {
                    let r: Arc<dyn RangeReader> =
                        Arc::new(callback_source(&source, "source", &limits)?);
                    (r.clone(), r, None)
                } else {
                    return Err(invalid(
                        "OverlayReader.open: source must be a base URL or { readRange, size }",
                    ));
                };
            let mut tables = HashMap::new();
            let mut own: HashMap<String, Arc<dyn RangeReader>> = HashMap::new();
            let t = get(&options, "tables");
            if !t.is_undefined() {
                if !t.is_object() || Array::is_array(&t) {
                    return Err(invalid(
                        "OverlayReader.open: options.tables must be an object",
                    ));
                }
                for k in Object::keys(t.unchecked_ref::<Object>()).iter() {
                    let name = k.as_string().unwrap_or_default();
                    let v = get(&t, &name);
                    let folded = skerry_core::values::names::fold(&name);
                    if let Some(url) = v.as_string() {
                        tables.insert(folded, url);
                    } else if v.is_object() {
                        let what = format!("options.tables.{name}");
                        own.insert(folded, Arc::new(callback_source(&v, &what, &limits)?));
                    } else {
                        return Err(invalid(format!(
                            "OverlayReader.open: options.tables.{name} must be a base URL or {{ readRange, size }}"
                        )));
                    }
                }
            }
            let mut allow_origins = Vec::new();
            let a = get(&options, "allowOrigins");
            if !a.is_undefined() {
                let bad = || {
                    invalid("OverlayReader.open: options.allowOrigins must be an array of origins (scheme://host[:port])")
                };
                if !Array::is_array(&a) {
                    return Err(bad());
                }
                for v in Array::from(&a).iter() {
                    let o = v
                        .as_string()
                        .and_then(|s| skerry_core::io::path::origin(&s))
                        .ok_or_else(bad)?;
                    allow_origins.push(o);
                }
            }
            let c = get(&options, "cacheBytes");
            let cache_bytes = if c.is_undefined() {
                skerry_core::read::cache::DEFAULT_CACHE_BYTES
            } else {
                match c.as_f64() {
                    Some(n) if n.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&n) => {
                        n as u64
                    }
                    _ => {
                        return Err(invalid(
                            "OverlayReader.open: options.cacheBytes must be an integer from 0 to 2^53-1",
                        ))
                    }
                }
            };
            let inner = Rc::new(Inner {
                listeners: RefCell::new(Vec::new()),
                overlay,
                data: Arc::new(ScopedReader {
                    default: data,
                    own,
                    prefixes: RefCell::new(Vec::new()),
                    counters: Default::default(),
                }),
                origin,
                allow_origins,
                manifest: RefCell::new(Arc::new(Manifest {
                    format_version: 1,
                    version: 0,
                    catalog_version: 0,
                    tables: vec![],
                })),
                cache: Arc::new(ReadCache::with_budget(cache_bytes)),
                metrics: Arc::new(skerry_core::read::metrics::Metrics::default()),
                scan_only: std::cell::Cell::new(false),
                tables,
            });
            inner.load().await?;
            Ok(OverlayReader { inner })
        }

        /// The pinned manifest version.
        #[wasm_bindgen(getter)]
        pub fn version(&self) -> f64 {
            self.inner.manifest.borrow().version as f64
        }

        /// With `true`, lookups answer every file by scanning it, ignoring indexes (the same
        /// answer; for benchmarks and debugging).
        #[wasm_bindgen(js_name = setScanOnly)]
        pub fn set_scan_only(
            &self,
            #[wasm_bindgen(unchecked_param_type = "boolean")] on: JsValue,
        ) -> Result<(), JsValue> {
            let on = on
                .as_bool()
                .ok_or_else(|| invalid("setScanOnly: on must be a boolean"))?;
            self.inner.scan_only.set(on);
            Ok(())
        }

        /// Re-reads `HEAD` and pins the newest published version (resolves to its number).
        #[wasm_bindgen(unchecked_return_type = "Promise<number>")]
        pub fn refresh(&self) -> js_sys::Promise {
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move {
                inner.load().await?;
                Ok(JsValue::from_f64(inner.manifest.borrow().version as f64))
            })
        }

        /// A read verb: arguments adapted here; parsed, answered and shaped by the host
        /// boundary (the same code as the addon); `warning` listeners called for a query's
        /// rejected indexes.
        fn read(&self, verb: &'static str, args: &[&JsValue]) -> js_sys::Promise {
            let args: Vec<HostValue> = match args.iter().map(|a| from_js(a, 0)).collect() {
                Ok(a) => a,
                Err(e) => return js_sys::Promise::reject(&e),
            };
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move {
                let call = ReadCall::parse(verb, &args).map_err(js_err)?;
                let snapshot = inner.snapshot();
                let answer = call
                    .run(&snapshot, Some(js_sys::Date::now))
                    .await
                    .map_err(js_err)?;
                let listeners = inner.listeners.borrow().clone();
                for w in answer.warnings {
                    let w = to_js(w);
                    for f in &listeners {
                        let _ = f.call1(&JsValue::NULL, &w);
                    }
                }
                Ok(to_js(answer.value))
            })
        }

        /// Adds a listener: `warning` (an index was rejected during a query; the file was
        /// scanned instead).
        pub fn on(
            &self,
            #[wasm_bindgen(unchecked_param_type = "'warning'")] event: JsValue,
            #[wasm_bindgen(unchecked_param_type = "(w: IndexWarning) => void")] listener: JsValue,
        ) -> Result<(), JsValue> {
            let event = text(&event, "on", "event")?;
            let listener: Function = listener
                .dyn_into()
                .map_err(|_| invalid("on: listener must be a function"))?;
            if event != "warning" {
                return Err(invalid(format!("unknown event {event} (warning)")));
            }
            self.inner.listeners.borrow_mut().push(listener);
            Ok(())
        }

        /// Removes a listener added with `on`.
        pub fn off(
            &self,
            #[wasm_bindgen(unchecked_param_type = "'warning'")] event: JsValue,
            #[wasm_bindgen(unchecked_param_type = "(w: IndexWarning) => void")] listener: JsValue,
        ) -> Result<(), JsValue> {
            let event = text(&event, "off", "event")?;
            let listener: Function = listener
                .dyn_into()
                .map_err(|_| invalid("off: listener must be a function"))?;
            if event == "warning" {
                self.inner
                    .listeners
                    .borrow_mut()
                    .retain(|f| !JsValue::from(f.clone()).eq(&JsValue::from(listener.clone())));
            }
            Ok(())
        }

        /// This reader's counters (the addon's `metrics()` as one object): reads by verb,
        /// requests and bytes, cache tiers, files by how they were answered, rejections by
        /// reason.
        #[wasm_bindgen(unchecked_return_type = "Metrics")]
        pub fn metrics(&self) -> JsValue {
            to_js(skerry_core::host::output::metrics(
                &self.inner.snapshot().metrics(),
            ))
        }

        /// Requests and bytes this reader has made: `{ overlay: {requests, bytes}, data: {…} }`.
        #[wasm_bindgen(
            unchecked_return_type = "{ overlay: { requests: number; bytes: number }; data: { requests: number; bytes: number } }"
        )]
        pub fn io(&self) -> JsValue {
            let (o, d) = (self.inner.overlay.stats(), self.inner.data.stats());
            let out = Object::new();
            for (name, s) in [("overlay", o), ("data", d)] {
                let x = Object::new();
                let _ = Reflect::set(&x, &"requests".into(), &(s.requests as f64).into());
                let _ = Reflect::set(&x, &"bytes".into(), &(s.bytes as f64).into());
                let _ = Reflect::set(&out, &name.into(), &x);
            }
            out.into()
        }
    }

    /// The read verbs (`skerry_core::with_read_verbs!`, the one list of them): each hands
    /// its arguments to the host boundary. Their TypeScript and docs are `ReadVerbs` in
    /// `host.d.ts` (the class declaration merges with it).
    macro_rules! read_verbs {
        ($($name:ident $js:tt ($($arg:ident),*);)*) => {
            #[wasm_bindgen]
            impl OverlayReader {
                $(
                    #[wasm_bindgen(js_name = $js, skip_typescript)]
                    pub fn $name(&self, $($arg: JsValue),*) -> js_sys::Promise {
                        self.read($js, &[$(&$arg),*])
                    }
                )*
            }
        };
    }
    skerry_core::with_read_verbs!(read_verbs);
}
