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
    use skerry_core::io::RangeReader;
    use skerry_core::manifest::{self, Manifest};
    use skerry_core::planner::Query;
    use skerry_core::predicate::{Condition, Op};
    use skerry_core::query::{DirectoryCache, Lookup};
    use wasm_bindgen::prelude::*;
    use wasm_bindgen::JsCast;

    use crate::readers::{CallbackReader, FetchReader};

    fn js_err(e: skerry_core::Error) -> JsValue {
        let err = js_sys::Error::new(&format!("{}: {e}", e.code()));
        let _ = Reflect::set(&err, &"code".into(), &e.code().into());
        err.into()
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
                    js_err(skerry_core::Error::Invalid(
                        "bigint key out of 64-bit range".into(),
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

    fn invalid(msg: impl Into<String>) -> JsValue {
        js_err(skerry_core::Error::Invalid(msg.into()))
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

    struct Inner {
        /// `warning` listeners (rejected indexes during queries).
        listeners: RefCell<Vec<Function>>,
        overlay: Rc<dyn RangeReader>,
        data: Rc<dyn RangeReader>,
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
                data: self.data.as_ref(),
                manifest: m,
                dirs: &self.dirs,
                scan_only: self.scan_only.get(),
            }
        }

        async fn load(&self) -> Result<(), JsValue> {
            let mut m = manifest::read_latest(self.overlay.as_ref())
                .await
                .map_err(js_err)?;
            for t in &mut m.tables {
                if let Some(loc) = self.tables.get(&t.name.to_lowercase()) {
                    t.location = loc.clone();
                }
            }
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
        pub async fn open(source: JsValue, options: JsValue) -> Result<OverlayReader, JsValue> {
            let overlay: Rc<dyn RangeReader> = if let Some(url) = source.as_string() {
                Rc::new(FetchReader::new(url))
            } else if source.is_object() {
                let read: Function = get(&source, "readRange").dyn_into().map_err(|_| {
                    js_err(skerry_core::Error::Invalid(
                        "source.readRange must be a function".into(),
                    ))
                })?;
                let size: Option<Function> = get(&source, "size").dyn_into().ok();
                Rc::new(CallbackReader::new(read, size))
            } else {
                return Err(js_err(skerry_core::Error::Invalid(
                    "source must be a base URL or { readRange, size }".into(),
                )));
            };
            let data: Rc<dyn RangeReader> = if source.is_object() {
                let read: Function = get(&source, "readRange").dyn_into()?;
                let size: Option<Function> = get(&source, "size").dyn_into().ok();
                Rc::new(CallbackReader::new(read, size))
            } else {
                Rc::new(FetchReader::new(String::new()))
            };
            let mut tables = HashMap::new();
            let t = get(&options, "tables");
            if t.is_object() {
                for k in Object::keys(t.unchecked_ref::<Object>()).iter() {
                    if let (Some(name), Some(url)) = (
                        k.as_string(),
                        get(&t, &k.as_string().unwrap_or_default()).as_string(),
                    ) {
                        tables.insert(name.to_lowercase(), url);
                    }
                }
            }
            let inner = Rc::new(Inner {
                listeners: RefCell::new(Vec::new()),
                overlay,
                data,
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
        pub fn set_scan_only(&self, on: bool) {
            self.inner.scan_only.set(on);
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
        pub fn lookup(&self, table: String, index: String, key: JsValue) -> js_sys::Promise {
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
        pub fn lookup_many(&self, table: String, index: String, keys: JsValue) -> js_sys::Promise {
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
            table: String,
            index: String,
            lower: JsValue,
            upper: JsValue,
            options: JsValue,
        ) -> js_sys::Promise {
            self.run(move |inner| {
                Box::pin(async move {
                    let (lo, hi) = (value_bound(&lower)?, value_bound(&upper)?);
                    let reverse = get(&options, "reverse").as_bool().unwrap_or(false);
                    let m = inner.manifest.borrow().clone();
                    if let Some(c) = get(&options, "column").as_string() {
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
            table: String,
            index: String,
            prefix: JsValue,
            options: JsValue,
        ) -> js_sys::Promise {
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
                    let reverse = get(&options, "reverse").as_bool().unwrap_or(false);
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
        pub fn locate(&self, table: String, row_ids: JsValue) -> Result<JsValue, JsValue> {
            if !Array::is_array(&row_ids) {
                return Err(js_err(skerry_core::Error::Invalid(
                    "rowIds must be an array".into(),
                )));
            }
            let mut ids = Vec::new();
            for v in Array::from(&row_ids).iter() {
                match key_value(&v)? {
                    Value::Int(i) if i >= 0 => ids.push(i as u64),
                    Value::UInt(u) => ids.push(u),
                    Value::Float64(f) if f >= 0.0 && f.fract() == 0.0 => ids.push(f as u64),
                    _ => {
                        return Err(js_err(skerry_core::Error::Invalid(
                            "row ids are non-negative integers".into(),
                        )))
                    }
                }
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
            table: String,
            rows: JsValue,
            columns: JsValue,
        ) -> js_sys::Promise {
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
                    let position = match key_value(&get(&r, "position"))? {
                        Value::Int(i) if i >= 0 => i as u64,
                        Value::UInt(u) => u,
                        Value::Float64(f) if f >= 0.0 && f.fract() == 0.0 => f as u64,
                        _ => {
                            return Err(js_err(skerry_core::Error::Invalid(
                                "a row needs a position".into(),
                            )))
                        }
                    };
                    refs.push(skerry_core::query::RowRef {
                        file,
                        position,
                        row_id: None,
                    });
                }
                let cols: Vec<String> = Array::from(&columns)
                    .iter()
                    .filter_map(|c| c.as_string())
                    .collect();
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
        pub fn query(&self, table: String, options: Option<JsValue>) -> js_sys::Promise {
            let options = options.unwrap_or(JsValue::UNDEFINED);
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
            #[wasm_bindgen(unchecked_param_type = "'warning'")] event: String,
            #[wasm_bindgen(unchecked_param_type = "(w: IndexWarning) => void")] listener: Function,
        ) -> Result<(), JsValue> {
            if event != "warning" {
                return Err(invalid(format!("unknown event {event} (warning)")));
            }
            self.inner.listeners.borrow_mut().push(listener);
            Ok(())
        }

        /// Removes a listener added with `on`.
        pub fn off(&self, event: String, listener: Function) {
            if event == "warning" {
                self.inner
                    .listeners
                    .borrow_mut()
                    .retain(|f| !JsValue::from(f.clone()).eq(&JsValue::from(listener.clone())));
            }
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
