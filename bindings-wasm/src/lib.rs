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

    use js_sys::{Array, Function, Object, Reflect, Uint8Array};
    use serde::Serialize;
    use skerry_core::encoding::{Value, ValueBound};
    use skerry_core::io::{BoxFut, IoError, Location, ObjectMeta, RangeReader};
    use skerry_core::manifest::{self, Manifest};
    use skerry_core::planner::Query;
    use skerry_core::predicate::{Condition, Op};
    use skerry_core::query::{DirectoryCache, Lookup};
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    use crate::readers::{CallbackReader, FetchReader, Limits};

    /// Default limit on each request of a reader (`options.timeoutMs`).
    const DEFAULT_TIMEOUT_MS: f64 = 30_000.0;

    /// A Skerry error as a JS `Error` with `code` (the message carries no `E_X: ` prefix,
    /// as in the addon).
    fn js_err(e: skerry_core::Error) -> JsValue {
        let err = js_sys::Error::new(&e.to_string());
        let _ = Reflect::set(&err, &"code".into(), &e.code().into());
        err.into()
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

    /// An optional boolean option, or `E_INVALID`.
    fn flag(o: &JsValue, method: &str, name: &str) -> Result<bool, JsValue> {
        let v = get(o, name);
        if v.is_undefined() {
            return Ok(false);
        }
        v.as_bool()
            .ok_or_else(|| invalid(format!("{method}: options.{name} must be a boolean")))
    }

    /// A non-negative integer argument (a bigint, or a number up to 2^53) as a u64, or
    /// `E_INVALID` naming it: no sign or high bits are dropped.
    fn u64_arg(v: &JsValue, method: &str, name: &str) -> Result<u64, JsValue> {
        let bad = || {
            invalid(format!(
                "{method}: {name} must be an integer from 0 to 2^64-1"
            ))
        };
        if v.is_bigint() {
            let s: String = js_sys::BigInt::from(v.clone())
                .to_string(10)
                .map_err(|_| bad())?
                .into();
            return s.parse::<u64>().map_err(|_| bad());
        }
        match v.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0 => Ok(f as u64),
            _ => Err(bad()),
        }
    }

    /// The `table` and `index` arguments of `method`.
    fn table_index(
        table: &JsValue,
        index: &JsValue,
        method: &str,
    ) -> Result<(String, String), JsValue> {
        Ok((text(table, method, "table")?, text(index, method, "index")?))
    }

    /// A promise rejected with `e` (argument errors of promise-returning methods reject).
    fn rejected(e: JsValue) -> js_sys::Promise {
        js_sys::Promise::reject(&e)
    }

    fn key_value(v: &JsValue) -> Result<Value, JsValue> {
        if v.is_null() || v.is_undefined() {
            return Ok(Value::Null);
        }
        if let Some(b) = v.as_bool() {
            return Ok(Value::Bool(b));
        }
        if let Some(n) = v.as_f64() {
            return Ok(Value::Float64(n));
        }
        if let Some(s) = v.as_string() {
            return Ok(Value::String(s));
        }
        if v.is_bigint() {
            let s: String = js_sys::BigInt::from(v.clone())
                .to_string(10)
                .map_err(|e| JsValue::from(e))?
                .into();
            return match s.parse::<i64>() {
                Ok(i) => Ok(Value::Int(i)),
                Err(_) => s.parse::<u64>().map(Value::UInt).map_err(|_| {
                    js_err(skerry_core::Error::Key(
                        skerry_core::encoding::KeyError::InvalidType {
                            reason: "bigint key out of 64-bit range".into(),
                        },
                    ))
                }),
            };
        }
        if let Some(a) = v.dyn_ref::<Uint8Array>() {
            return Ok(Value::Binary(a.to_vec()));
        }
        Err(js_err(skerry_core::Error::Invalid(
            "a key value must be null, boolean, number, bigint, string or Uint8Array".into(),
        )))
    }

    /// JSON rows (see `skerry_core::query::to_json_rows`) as JS values, markers revived.
    fn json_to_js(v: &serde_json::Value) -> JsValue {
        use serde_json::Value as J;
        match v {
            J::Null => JsValue::NULL,
            J::Bool(b) => JsValue::from_bool(*b),
            J::Number(n) => JsValue::from_f64(n.as_f64().unwrap_or(f64::NAN)),
            J::String(s) => JsValue::from_str(s),
            J::Array(a) => a.iter().map(json_to_js).collect::<Array>().into(),
            J::Object(o) => {
                if let Some(J::String(b)) = o.get("$bigint") {
                    return js_sys::BigInt::new(&JsValue::from_str(b))
                        .map(JsValue::from)
                        .unwrap_or(JsValue::NULL);
                }
                if let Some(J::String(f)) = o.get("$float") {
                    return JsValue::from_f64(f.parse().unwrap_or(f64::NAN));
                }
                if let Some(J::String(h)) = o.get("$bytes") {
                    let bytes: Vec<u8> = (0..h.len() / 2)
                        .filter_map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).ok())
                        .collect();
                    return Uint8Array::from(bytes.as_slice()).into();
                }
                let out = Object::new();
                for (k, x) in o {
                    let _ = Reflect::set(&out, &k.into(), &json_to_js(x));
                }
                out.into()
            }
        }
    }

    fn key_values(v: &JsValue) -> Result<Vec<Value>, JsValue> {
        if Array::is_array(v) {
            Array::from(v).iter().map(|x| key_value(&x)).collect()
        } else {
            Ok(vec![key_value(v)?])
        }
    }

    fn value_bound(b: &JsValue) -> Result<ValueBound, JsValue> {
        if b.is_null() || b.is_undefined() {
            return Ok(ValueBound::Unbounded);
        }
        if !b.is_object() {
            return Err(js_err(skerry_core::Error::Invalid(
                "a bound is { key, inclusive } or null".into(),
            )));
        }
        let key = get(b, "key");
        if key.is_undefined() {
            return Err(js_err(skerry_core::Error::Invalid(
                "a bound needs a key".into(),
            )));
        }
        let values = key_values(&key)?;
        Ok(if get(b, "inclusive").as_bool().unwrap_or(true) {
            ValueBound::Included(values)
        } else {
            ValueBound::Excluded(values)
        })
    }

    fn to_js_result(r: skerry_core::query::LookupResult) -> Result<JsValue, JsValue> {
        let s = r.stats;
        let out = JsResult {
            rows: r
                .rows
                .into_iter()
                .map(|x| JsRow {
                    file: x.file,
                    position: x.position,
                    row_id: x.row_id,
                })
                .collect(),
            stats: JsStats {
                files: s.files as f64,
                files_by_index: s.files_by_index as f64,
                files_scanned: s.files_scanned as f64,
                files_pruned: s.files_pruned as f64,
                rejections: s
                    .rejections
                    .into_iter()
                    .map(|r| JsRejection {
                        message: r.to_string(),
                        reason: r.reason.code(),
                        data_file: r.data_file,
                        index_id: r.index_id,
                        bundle_path: r.bundle_path,
                    })
                    .collect(),
                drifted: s.drifted,
                index_requests: s.index_requests as f64,
                index_bytes: s.index_bytes as f64,
                data_requests: s.data_requests as f64,
                data_bytes: s.data_bytes as f64,
            },
        };
        // Counters are f64 (numbers); positions and row ids are u64 (bigints).
        let ser =
            serde_wasm_bindgen::Serializer::new().serialize_large_number_types_as_bigints(true);
        out.serialize(&ser)
            .map_err(|e| JsValue::from(js_sys::Error::new(&e.to_string())))
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct JsRow {
        file: String,
        position: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        row_id: Option<u64>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct JsRejection {
        data_file: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        index_id: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        bundle_path: Option<String>,
        reason: &'static str,
        message: String,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct JsStats {
        files: f64,
        files_by_index: f64,
        files_scanned: f64,
        files_pruned: f64,
        rejections: Vec<JsRejection>,
        drifted: Vec<String>,
        index_requests: f64,
        index_bytes: f64,
        data_requests: f64,
        data_bytes: f64,
    }

    #[derive(Serialize)]
    struct JsResult {
        rows: Vec<JsRow>,
        stats: JsStats,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct JsQueryStats {
        index: Option<String>,
        index_columns: Vec<String>,
        keys: f64,
        residual: Vec<String>,
        files: f64,
        files_by_index: f64,
        files_scanned: f64,
        files_pruned: f64,
        files_rejected: f64,
        rejections: Vec<JsRejection>,
        drifted: Vec<String>,
        row_groups: f64,
        row_groups_pruned: f64,
        rows_pruned_by_pages: f64,
        rows_scanned: f64,
        requests: f64,
        bytes: f64,
        cache_hits: f64,
        index_requests: f64,
        index_bytes: f64,
        data_requests: f64,
        data_bytes: f64,
        elapsed_ms: f64,
    }

    fn js_rejection(r: skerry_core::lineage::Rejection) -> JsRejection {
        JsRejection {
            message: r.to_string(),
            reason: r.reason.code(),
            data_file: r.data_file,
            index_id: r.index_id,
            bundle_path: r.bundle_path,
        }
    }

    fn js_query_stats(s: skerry_core::planner::QueryStats) -> JsQueryStats {
        JsQueryStats {
            index: s.index,
            index_columns: s.index_columns,
            keys: s.keys as f64,
            residual: s.residual,
            files: s.files as f64,
            files_by_index: s.files_by_index as f64,
            files_scanned: s.files_scanned as f64,
            files_pruned: s.files_pruned as f64,
            files_rejected: s.files_rejected as f64,
            rejections: s.rejections.into_iter().map(js_rejection).collect(),
            drifted: s.drifted,
            row_groups: s.row_groups as f64,
            row_groups_pruned: s.row_groups_pruned as f64,
            rows_pruned_by_pages: s.rows_pruned_by_pages as f64,
            rows_scanned: s.rows_scanned as f64,
            requests: s.requests as f64,
            bytes: s.bytes as f64,
            cache_hits: s.cache_hits as f64,
            index_requests: s.index_requests as f64,
            index_bytes: s.index_bytes as f64,
            data_requests: s.data_requests as f64,
            data_bytes: s.data_bytes as f64,
            elapsed_ms: s.elapsed_ms,
        }
    }

    /// `E_INVALID` for an argument the binding refuses, worded as the addon words it (no
    /// `invalid argument:` prefix).
    fn invalid(msg: impl Into<String>) -> JsValue {
        let err = js_sys::Error::new(&msg.into());
        let _ = Reflect::set(&err, &"code".into(), &"E_INVALID".into());
        err.into()
    }

    /// `where`: `{ column: value | null | { eq, in, lt, lte, gt, gte, between, isNull } }`,
    /// as the addon's `query`.
    fn where_conditions(w: &JsValue) -> Result<Vec<Condition>, JsValue> {
        if w.is_null() || w.is_undefined() {
            return Ok(vec![]);
        }
        if !w.is_object() || Array::is_array(w) {
            return Err(invalid("`where` must be an object of column conditions"));
        }
        let mut out = Vec::new();
        for k in Object::keys(w.unchecked_ref::<Object>()).iter() {
            let column = k.as_string().unwrap_or_default();
            let v = get(w, &column);
            if v.is_null() {
                out.push(Condition::new(&column, Op::IsNull));
                continue;
            }
            if !v.is_object() || Array::is_array(&v) || v.dyn_ref::<Uint8Array>().is_some() {
                out.push(Condition::new(&column, Op::Eq(key_value(&v)?)));
                continue;
            }
            let names = Object::keys(v.unchecked_ref::<Object>());
            if names.length() == 0 {
                return Err(invalid(format!("no condition given for column {column}")));
            }
            for n in names.iter() {
                let name = n.as_string().unwrap_or_default();
                let x = get(&v, &name);
                let list = |x: &JsValue, what: &str| -> Result<Vec<Value>, JsValue> {
                    if !Array::is_array(x) {
                        return Err(invalid(format!("{what} must be an array")));
                    }
                    Array::from(x).iter().map(|e| key_value(&e)).collect()
                };
                let op = match name.as_str() {
                    "eq" => Op::Eq(key_value(&x)?),
                    "lt" => Op::Lt(key_value(&x)?),
                    "lte" => Op::Le(key_value(&x)?),
                    "gt" => Op::Gt(key_value(&x)?),
                    "gte" => Op::Ge(key_value(&x)?),
                    "in" => Op::In(list(&x, "an IN list")?),
                    "between" => {
                        let mut b = list(&x, "between")?;
                        if b.len() != 2 {
                            return Err(invalid("between is [low, high]"));
                        }
                        let hi = b.pop().expect("two");
                        Op::Between(b.pop().expect("two"), hi)
                    }
                    "isNull" if x.as_bool() == Some(true) => Op::IsNull,
                    "isNull" => {
                        return Err(invalid("isNull takes `true` (IS NOT NULL is not supported)"))
                    }
                    other => {
                        return Err(invalid(format!(
                            "unknown operator {other} on {column} (eq, in, lt, lte, gt, gte, between, isNull)"
                        )))
                    }
                };
                out.push(Condition::new(&column, op));
            }
        }
        Ok(out)
    }

    fn js_query(options: &JsValue) -> Result<Query, JsValue> {
        let mut q = Query::default();
        if options.is_null() || options.is_undefined() {
            return Ok(q);
        }
        if !options.is_object() {
            return Err(invalid("query options must be an object"));
        }
        q.conditions = where_conditions(&get(options, "where"))?;
        let cols = get(options, "columns");
        if !(cols.is_null() || cols.is_undefined()) {
            if !Array::is_array(&cols) {
                return Err(invalid("columns must be an array of names"));
            }
            q.columns = Some(
                Array::from(&cols)
                    .iter()
                    .map(|c| {
                        c.as_string()
                            .ok_or_else(|| invalid("columns are names (strings)"))
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        let limit = get(options, "limit");
        if !(limit.is_null() || limit.is_undefined()) {
            match limit.as_f64() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 => {
                    q.limit = Some(n as u64)
                }
                _ => return Err(invalid("limit is a non-negative integer")),
            }
        }
        q.verify_files = get(options, "verify").as_bool().unwrap_or(false);
        Ok(q)
    }

    /// Reads data files only below the table locations this reader may use: the caller's
    /// (`options.tables`), or a manifest's when same-origin with the overlay or listed in
    /// `options.allowOrigins`. Anything else fails `E_INVALID_URL` without a request.
    struct ScopedReader {
        inner: Rc<dyn RangeReader>,
        /// Allowed prefixes, each ending in `/`.
        prefixes: RefCell<Vec<String>>,
    }

    impl ScopedReader {
        fn check(&self, loc: &Location) -> Result<(), IoError> {
            if self
                .prefixes
                .borrow()
                .iter()
                .any(|p| loc.path.starts_with(p.as_str()))
            {
                return Ok(());
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
        fn head<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<ObjectMeta, IoError>> {
            Box::pin(async move {
                self.check(loc)?;
                self.inner.head(loc).await
            })
        }
        fn read_range<'a>(
            &'a self,
            loc: &'a Location,
            range: std::ops::Range<u64>,
        ) -> BoxFut<'a, Result<bytes::Bytes, IoError>> {
            Box::pin(async move {
                self.check(loc)?;
                self.inner.read_range(loc, range).await
            })
        }
        fn read_suffix<'a>(
            &'a self,
            loc: &'a Location,
            len: u64,
        ) -> BoxFut<'a, Result<(bytes::Bytes, ObjectMeta), IoError>> {
            Box::pin(async move {
                self.check(loc)?;
                self.inner.read_suffix(loc, len).await
            })
        }
        fn read_all<'a>(&'a self, loc: &'a Location) -> BoxFut<'a, Result<bytes::Bytes, IoError>> {
            Box::pin(async move {
                self.check(loc)?;
                self.inner.read_all(loc).await
            })
        }
        fn counters(&self) -> &skerry_core::io::IoCounters {
            self.inner.counters()
        }
    }

    struct Inner {
        /// `warning` listeners (rejected indexes during queries).
        listeners: RefCell<Vec<Function>>,
        overlay: Rc<dyn RangeReader>,
        data: Rc<ScopedReader>,
        /// Origin of the overlay's base URL (`None` for a callback source).
        origin: Option<String>,
        /// Origins (`scheme://host[:port]`, lowercase) whose table locations a manifest may
        /// name.
        allow_origins: Vec<String>,
        manifest: RefCell<Rc<Manifest>>,
        dirs: DirectoryCache,
        scan_only: std::cell::Cell<bool>,
        /// Table name (lowercase) → data location override.
        tables: HashMap<String, String>,
    }

    impl Inner {
        fn lookup<'a>(&'a self, m: &'a Manifest) -> Lookup<'a> {
            Lookup {
                overlay: self.overlay.as_ref(),
                data: self.data.as_ref() as &dyn RangeReader,
                manifest: m,
                dirs: &self.dirs,
                scan_only: self.scan_only.get(),
            }
        }

        async fn load(&self) -> Result<(), JsValue> {
            let mut m = manifest::read_latest(self.overlay.as_ref())
                .await
                .map_err(js_err)?;
            let mut prefixes = Vec::new();
            for t in &mut m.tables {
                if let Some(loc) = self.tables.get(&skerry_core::names::fold(&t.name)) {
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
                prefixes.push(format!("{}/", t.location.trim_end_matches('/')));
            }
            *self.data.prefixes.borrow_mut() = prefixes;
            *self.manifest.borrow_mut() = Rc::new(m);
            self.dirs.clear();
            Ok(())
        }
    }

    #[wasm_bindgen(typescript_custom_section)]
    const QUERY_TYPES: &'static str = r#"
/** A key value: null, boolean, number, bigint, string or bytes. */
export type QueryValue = null | boolean | number | bigint | string | Uint8Array;
/** Conditions on one column: a bare value is `=`, `null` is IS NULL. */
export type ColumnCondition = QueryValue | {
  eq?: QueryValue; in?: QueryValue[]; lt?: QueryValue; lte?: QueryValue; gt?: QueryValue;
  gte?: QueryValue; between?: [QueryValue, QueryValue]; isNull?: true;
};
/** Options of `query` (see docs/query.md). */
export interface QueryOptions {
  where?: Record<string, ColumnCondition>;
  columns?: string[];
  limit?: number;
  verify?: boolean;
}
export interface QueryRejection { dataFile: string; indexId?: bigint; bundlePath?: string; reason: string; message: string }
export interface QueryStats {
  index?: string; indexColumns: string[]; keys: number; residual: string[];
  files: number; filesByIndex: number; filesScanned: number; filesPruned: number; filesRejected: number;
  rejections: QueryRejection[]; drifted: string[];
  rowGroups: number; rowGroupsPruned: number; rowsPrunedByPages: number; rowsScanned: number;
  requests: number; bytes: number; cacheHits: number;
  indexRequests: number; indexBytes: number; dataRequests: number; dataBytes: number; elapsedMs: number;
}
export interface QueryResult {
  /** Arrow IPC stream of the requested columns. */
  ipc: Uint8Array;
  rows: Array<Record<string, unknown>>;
  refs: Array<{ file: string; position: bigint; rowId?: bigint }>;
  stats: QueryStats;
}
/** A source of overlay bytes other than a URL: an R2 binding, signed URLs, custom auth. */
export interface ReadSource {
  readRange(path: string, offset: number, length: number): Promise<Uint8Array | null | undefined>;
  size?(path: string): Promise<number | null | undefined>;
}
/** Options of `OverlayReader.open`. */
export interface ReaderOptions {
  /** Table name → base URL (or callback path prefix) of its data files. */
  tables?: Record<string, string>;
  /**
   * Origins (`scheme://host[:port]`) whose table locations a manifest may name. A location
   * from the manifest is otherwise used only when same-origin with the overlay URL.
   */
  allowOrigins?: string[];
  /** Limit on each request, body included (default 30000; 0 = none): `E_TIMEOUT`. */
  timeoutMs?: number;
  /** Aborts every request in flight and to come: `E_ABORTED`. */
  signal?: AbortSignal;
}
/** The `warning` event: an index was rejected during a query (the file was scanned). */
export interface IndexWarning { table: string; index?: string; file: string; reason: string; message: string }
export interface OverlayReader {
  /**
   * Answers `where` over `table` as the addon's `query`: indexes where the read gate accepts
   * them, Parquet scans (statistics, page index) where not, delete masks applied, rows
   * fetched by page. Data files are checked by size and record count.
   */
  query(table: string, options?: QueryOptions): Promise<QueryResult>;
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
            #[wasm_bindgen(unchecked_param_type = "ReaderOptions | undefined")] options: JsValue,
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
            let (overlay, data, origin): (Rc<dyn RangeReader>, Rc<dyn RangeReader>, _) =
                if let Some(url) = source.as_string() {
                    let origin = skerry_core::io::path::origin(&url).ok_or_else(|| {
                        js_err(skerry_core::Error::Io(IoError::InvalidUrl {
                            url: url.chars().take(200).collect(),
                            reason: "the overlay's base must be an absolute URL".into(),
                        }))
                    })?;
                    (
                        Rc::new(FetchReader::new(url, limits.clone())),
                        Rc::new(FetchReader::new(String::new(), limits)),
                        Some(origin),
                    )
                } else if source.is_object() {
                    let read: Function = get(&source, "readRange").dyn_into().map_err(|_| {
                        invalid("OverlayReader.open: source.readRange must be a function")
                    })?;
                    let size = get(&source, "size");
                    let size: Option<Function> = if size.is_undefined() {
                        None
                    } else {
                        Some(size.dyn_into().map_err(|_| {
                            invalid("OverlayReader.open: source.size must be a function")
                        })?)
                    };
                    (
                        Rc::new(CallbackReader::new(
                            read.clone(),
                            size.clone(),
                            limits.clone(),
                        )),
                        Rc::new(CallbackReader::new(read, size, limits)),
                        None,
                    )
                } else {
                    return Err(invalid(
                        "OverlayReader.open: source must be a base URL or { readRange, size }",
                    ));
                };
            let mut tables = HashMap::new();
            let t = get(&options, "tables");
            if !t.is_undefined() {
                if !t.is_object() || Array::is_array(&t) {
                    return Err(invalid(
                        "OverlayReader.open: options.tables must be an object",
                    ));
                }
                for k in Object::keys(t.unchecked_ref::<Object>()).iter() {
                    let name = k.as_string().unwrap_or_default();
                    let url = get(&t, &name).as_string().ok_or_else(|| {
                        invalid(format!(
                            "OverlayReader.open: options.tables.{name} must be a string"
                        ))
                    })?;
                    tables.insert(skerry_core::names::fold(&name), url);
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
            let inner = Rc::new(Inner {
                listeners: RefCell::new(Vec::new()),
                overlay,
                data: Rc::new(ScopedReader {
                    inner: data,
                    prefixes: RefCell::new(Vec::new()),
                }),
                origin,
                allow_origins,
                manifest: RefCell::new(Rc::new(Manifest {
                    format_version: 1,
                    version: 0,
                    catalog_version: 0,
                    tables: vec![],
                })),
                dirs: DirectoryCache::default(),
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

        /// Re-reads `HEAD` and pins the newest published version.
        pub fn refresh(&self) -> js_sys::Promise {
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move {
                inner.load().await?;
                Ok(JsValue::from_f64(inner.manifest.borrow().version as f64))
            })
        }

        /// Rows whose indexed columns equal `key` (a value, or an array for composite keys):
        /// `{ rows: [{ file, position: bigint, rowId?: bigint }], stats }`.
        pub fn lookup(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(unchecked_param_type = "string")] index: JsValue,
            #[wasm_bindgen(unchecked_param_type = "unknown")] key: JsValue,
        ) -> js_sys::Promise {
            let (table, index) = match table_index(&table, &index, "lookup") {
                Ok(x) => x,
                Err(e) => return rejected(e),
            };
            self.run(move |inner| {
                Box::pin(async move {
                    let values = key_values(&key)?;
                    let m = inner.manifest.borrow().clone();
                    inner
                        .lookup(&m)
                        .lookup(&table, &index, &values)
                        .await
                        .map_err(js_err)
                })
            })
        }

        /// `index IN (keys)`: complete keys, deduplicated, in key order.
        #[wasm_bindgen(js_name = lookupMany)]
        pub fn lookup_many(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(unchecked_param_type = "string")] index: JsValue,
            #[wasm_bindgen(unchecked_param_type = "unknown[]")] keys: JsValue,
        ) -> js_sys::Promise {
            let (table, index) = match table_index(&table, &index, "lookupMany") {
                Ok(x) => x,
                Err(e) => return rejected(e),
            };
            self.run(move |inner| {
                Box::pin(async move {
                    if !Array::is_array(&keys) {
                        return Err(js_err(skerry_core::Error::Invalid(
                            "keys must be an array".into(),
                        )));
                    }
                    let keys = Array::from(&keys)
                        .iter()
                        .map(|k| key_values(&k))
                        .collect::<Result<Vec<_>, _>>()?;
                    let m = inner.manifest.borrow().clone();
                    inner
                        .lookup(&m)
                        .lookup_many(&table, &index, &keys)
                        .await
                        .map_err(js_err)
                })
            })
        }

        /// Rows between `lower` and `upper` (`{ key, inclusive = true }` or null), as the
        /// addon's `range`.
        pub fn range(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(unchecked_param_type = "string")] index: JsValue,
            #[wasm_bindgen(
                unchecked_param_type = "{ key: unknown; inclusive?: boolean } | null | undefined"
            )]
            lower: JsValue,
            #[wasm_bindgen(
                unchecked_param_type = "{ key: unknown; inclusive?: boolean } | null | undefined"
            )]
            upper: JsValue,
            #[wasm_bindgen(
                unchecked_param_type = "{ reverse?: boolean; column?: string } | undefined"
            )]
            options: JsValue,
        ) -> js_sys::Promise {
            let checked = table_index(&table, &index, "range").and_then(|ti| {
                options_object(&options, "range")?;
                let reverse = flag(&options, "range", "reverse")?;
                let c = get(&options, "column");
                let column = if c.is_undefined() {
                    None
                } else {
                    Some(text(&c, "range", "options.column")?)
                };
                Ok((ti, reverse, column))
            });
            let ((table, index), reverse, column) = match checked {
                Ok(x) => x,
                Err(e) => return rejected(e),
            };
            self.run(move |inner| {
                Box::pin(async move {
                    let (lo, hi) = (value_bound(&lower)?, value_bound(&upper)?);
                    let m = inner.manifest.borrow().clone();
                    if let Some(c) = column {
                        inner
                            .lookup(&m)
                            .check_range_column(&table, &index, &lo, &hi, &c)
                            .map_err(js_err)?;
                    }
                    inner
                        .lookup(&m)
                        .range(&table, &index, lo, hi, reverse)
                        .await
                        .map_err(js_err)
                })
            })
        }

        /// IS NULL over a leading run: `null` = IS NULL, a value = equality, `undefined` =
        /// unconstrained, as the addon's `nulls`.
        pub fn nulls(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(unchecked_param_type = "string")] index: JsValue,
            #[wasm_bindgen(unchecked_param_type = "unknown[]")] prefix: JsValue,
            #[wasm_bindgen(unchecked_param_type = "{ reverse?: boolean } | undefined")]
            options: JsValue,
        ) -> js_sys::Promise {
            let checked = table_index(&table, &index, "nulls").and_then(|ti| {
                options_object(&options, "nulls")?;
                Ok((ti, flag(&options, "nulls", "reverse")?))
            });
            let ((table, index), reverse) = match checked {
                Ok(x) => x,
                Err(e) => return rejected(e),
            };
            self.run(move |inner| {
                Box::pin(async move {
                    if !Array::is_array(&prefix) {
                        return Err(js_err(skerry_core::Error::Invalid(
                            "prefix must be an array".into(),
                        )));
                    }
                    let items = Array::from(&prefix)
                        .iter()
                        .map(|v| {
                            if v.is_undefined() {
                                Ok(None)
                            } else {
                                key_value(&v).map(Some)
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let m = inner.manifest.borrow().clone();
                    inner
                        .lookup(&m)
                        .nulls(&table, &index, &items, reverse)
                        .await
                        .map_err(js_err)
                })
            })
        }

        /// Where rows with stable ids `rowIds` (bigints or numbers) are: `{ rows, candidates }`.
        pub fn locate(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(unchecked_param_type = "Array<bigint | number>")] row_ids: JsValue,
        ) -> Result<JsValue, JsValue> {
            let table = text(&table, "locate", "table")?;
            if !Array::is_array(&row_ids) {
                return Err(js_err(skerry_core::Error::Invalid(
                    "rowIds must be an array".into(),
                )));
            }
            let mut ids = Vec::new();
            for v in Array::from(&row_ids).iter() {
                ids.push(u64_arg(&v, "locate", "a row id")?);
            }
            let m = self.inner.manifest.borrow().clone();
            let r = self.inner.lookup(&m).locate(&table, &ids).map_err(js_err)?;
            let ser =
                serde_wasm_bindgen::Serializer::new().serialize_large_number_types_as_bigints(true);
            r.serialize(&ser)
                .map_err(|e| JsValue::from(js_sys::Error::new(&e.to_string())))
        }

        /// Fetches `columns` of `rows` (as lookups return them) in order, reading only the pages
        /// holding them: `{ ipc: Uint8Array (Arrow IPC stream), rows: object[] }`. Data files
        /// are checked by size and record count against the manifest (`E_DRIFT`).
        #[wasm_bindgen(js_name = fetchRows)]
        pub fn fetch_rows(
            &self,
            #[wasm_bindgen(unchecked_param_type = "string")] table: JsValue,
            #[wasm_bindgen(
                unchecked_param_type = "Array<{ file: string; position: bigint | number }>"
            )]
            rows: JsValue,
            #[wasm_bindgen(unchecked_param_type = "string[]")] columns: JsValue,
        ) -> js_sys::Promise {
            let table = match text(&table, "fetchRows", "table") {
                Ok(t) => t,
                Err(e) => return rejected(e),
            };
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move {
                if !Array::is_array(&rows) || !Array::is_array(&columns) {
                    return Err(js_err(skerry_core::Error::Invalid(
                        "rows and columns must be arrays".into(),
                    )));
                }
                let mut refs = Vec::new();
                for r in Array::from(&rows).iter() {
                    let file = get(&r, "file").as_string().ok_or_else(|| {
                        js_err(skerry_core::Error::Invalid("a row needs a file".into()))
                    })?;
                    let position = u64_arg(&get(&r, "position"), "fetchRows", "a row's position")?;
                    refs.push(skerry_core::query::RowRef {
                        file,
                        position,
                        row_id: None,
                    });
                }
                let cols: Vec<String> = Array::from(&columns)
                    .iter()
                    .map(|c| text(&c, "fetchRows", "columns[]"))
                    .collect::<Result<_, _>>()?;
                let m = inner.manifest.borrow().clone();
                let batch = inner
                    .lookup(&m)
                    .fetch(&table, &refs, &cols, false)
                    .await
                    .map_err(js_err)?;
                let ipc = skerry_core::query::to_ipc(&batch).map_err(js_err)?;
                let json = skerry_core::query::to_json_rows(&batch).map_err(js_err)?;
                let out = Object::new();
                Reflect::set(
                    &out,
                    &"ipc".into(),
                    &Uint8Array::from(ipc.as_slice()).into(),
                )?;
                Reflect::set(&out, &"rows".into(), &json_to_js(&json))?;
                Ok(out.into())
            })
        }

        fn run(
            &self,
            f: impl FnOnce(
                    Rc<Inner>,
                ) -> std::pin::Pin<
                    Box<
                        dyn std::future::Future<
                            Output = Result<skerry_core::query::LookupResult, JsValue>,
                        >,
                    >,
                > + 'static,
        ) -> js_sys::Promise {
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move { to_js_result(f(inner).await?) })
        }

        /// Answers `where` over `table`, as the addon's `query`: `{ ipc: Uint8Array (Arrow IPC
        /// stream), rows: object[], refs: [{ file, position, rowId? }], stats }`. Data files
        /// are checked by size and record count (their ETags come from another server). Every
        /// rejected index calls the `warning` listeners with `{ table, index, file, reason,
        /// message }`.
        // Typed by the interface merged into `OverlayReader` in QUERY_TYPES (optional options).
        #[wasm_bindgen(skip_typescript)]
        pub fn query(&self, table: JsValue, options: Option<JsValue>) -> js_sys::Promise {
            let options = options.unwrap_or(JsValue::UNDEFINED);
            let table = match text(&table, "query", "table")
                .and_then(|t| options_object(&options, "query").map(|_| t))
            {
                Ok(t) => t,
                Err(e) => return rejected(e),
            };
            let inner = self.inner.clone();
            wasm_bindgen_futures::future_to_promise(async move {
                let t0 = js_sys::Date::now();
                let q = js_query(&options)?;
                let m = inner.manifest.borrow().clone();
                let mut r = inner.lookup(&m).query(&table, &q).await.map_err(js_err)?;
                r.stats.elapsed_ms = js_sys::Date::now() - t0;
                let listeners = inner.listeners.borrow().clone();
                for x in &r.stats.rejections {
                    let w = Object::new();
                    Reflect::set(&w, &"table".into(), &table.as_str().into())?;
                    if let Some(i) = &r.stats.index {
                        Reflect::set(&w, &"index".into(), &i.as_str().into())?;
                    }
                    Reflect::set(&w, &"file".into(), &x.data_file.as_str().into())?;
                    Reflect::set(&w, &"reason".into(), &x.reason.code().into())?;
                    Reflect::set(&w, &"message".into(), &x.to_string().into())?;
                    for f in &listeners {
                        let _ = f.call1(&JsValue::NULL, &w);
                    }
                }
                let ipc = skerry_core::query::to_ipc(&r.batch).map_err(js_err)?;
                let json = skerry_core::query::to_json_rows(&r.batch).map_err(js_err)?;
                let out = Object::new();
                Reflect::set(
                    &out,
                    &"ipc".into(),
                    &Uint8Array::from(ipc.as_slice()).into(),
                )?;
                Reflect::set(&out, &"rows".into(), &json_to_js(&json))?;
                let big = serde_wasm_bindgen::Serializer::new()
                    .serialize_large_number_types_as_bigints(true);
                let refs: Vec<JsRow> = r
                    .rows
                    .into_iter()
                    .map(|x| JsRow {
                        file: x.file,
                        position: x.position,
                        row_id: x.row_id,
                    })
                    .collect();
                let to_js = |e: serde_wasm_bindgen::Error| {
                    JsValue::from(js_sys::Error::new(&e.to_string()))
                };
                Reflect::set(&out, &"refs".into(), &refs.serialize(&big).map_err(to_js)?)?;
                // Counters are f64 (numbers); ids are u64 (bigints), as in lookups.
                Reflect::set(
                    &out,
                    &"stats".into(),
                    &js_query_stats(r.stats).serialize(&big).map_err(to_js)?,
                )?;
                Ok(out.into())
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

        /// Requests and bytes this reader has made: `{ overlay: {requests, bytes}, data: {…} }`.
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
}
