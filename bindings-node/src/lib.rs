//! Skerry's Node.js addon: adapts napi values to `skerry-core`'s host boundary
//! (`skerry_core::host`) and back. Every read verb is parsed and shaped there, once for this
//! addon and the wasm reader; writer verbs translate their typed options here. Errors are
//! JavaScript errors with `code` and `retryable` set from Rust (`js.rs`).

#![deny(clippy::all)]

mod js;

use std::sync::Arc;

use js::{from_js, js_error, run, Js};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use skerry_core::admin::overlay as ov;
use skerry_core::host::{self, HostValue, ReadCall};
use skerry_core::Error as CoreError;

fn big(v: u64) -> BigInt {
    BigInt::from(v)
}

/// Options of `Overlay.open`.
#[napi(object)]
pub struct OpenOptions {
    /// object_store settings, e.g. `{ aws_endpoint: "http://127.0.0.1:9000", aws_allow_http: "true" }`.
    pub storage: Option<std::collections::HashMap<String, String>>,
    /// Open read-only: answer from the newest *published* manifest without opening the
    /// catalog, so any number of reader processes serve beside one writer without fencing it.
    /// Writer verbs fail `E_READ_ONLY`; `refresh()` moves to the newest published version.
    pub read_only: Option<bool>,
    /// Limit on each read of overlay objects and data files (`E_TIMEOUT` past it).
    pub timeout_ms: Option<u32>,
    /// Writers: publish an index's per-file lists as a separate part of the manifest when
    /// they exceed this many bytes (default 1 MiB; 0 splits every index), so readers of large
    /// tables parse only what a read uses (`docs/manifest.md`).
    pub manifest_part_bytes: Option<u32>,
    /// The read cache's budget in bytes (directories, Parquet metadata, index blocks,
    /// postings and data files' dictionary pages; default 256 MiB, 0 caches nothing). A full-text index wants its frequent
    /// terms' postings to stay: size it to the index (`docs/fulltext-index.md`).
    pub cache_bytes: Option<f64>,
    /// Iceberg REST catalog tables this process reads with the credentials their catalog
    /// vends (connected at open, refreshed before they expire; never recorded).
    pub catalogs: Option<Vec<CatalogOptions>>,
}

/// One table of an Iceberg REST catalog and this process's credentials for it
/// (`docs/iceberg.md`, "REST catalogs"). Secrets stay in this process: the overlay records
/// only `uri`, `warehouse`, `namespace` and `table`.
#[napi(object)]
pub struct CatalogOptions {
    /// The catalog's base URI (`/v1/...` is appended).
    pub uri: String,
    pub warehouse: Option<String>,
    /// `"db"`, `"sales.eu"` (levels split at dots) or `["sales", "eu"]`.
    pub namespace: Either<String, Vec<String>>,
    pub table: String,
    /// OAuth2 client credentials, `clientId:clientSecret`.
    pub credential: Option<String>,
    /// A bearer token, used as is.
    pub token: Option<String>,
    /// The OAuth2 scope (default `catalog`).
    pub scope: Option<String>,
    /// Extra headers for every catalog request.
    pub headers: Option<std::collections::HashMap<String, String>>,
    /// The token endpoint, when not the catalog's `/v1/oauth/tokens`.
    pub oauth2_server_uri: Option<String>,
}

fn catalog_access(c: CatalogOptions) -> skerry_core::io::rest::CatalogAccess {
    use skerry_core::io::rest::{CatalogAccess, CatalogRef};
    CatalogAccess {
        table: CatalogRef {
            uri: c.uri,
            warehouse: c.warehouse,
            namespace: match c.namespace {
                Either::A(s) => s.split('.').map(str::to_string).collect(),
                Either::B(v) => v,
            },
            table: c.table,
        },
        credential: c.credential,
        token: c.token,
        scope: c.scope,
        headers: c
            .headers
            .map(|h| {
                let mut v: Vec<_> = h.into_iter().collect();
                v.sort();
                v
            })
            .unwrap_or_default(),
        oauth2_server_uri: c.oauth2_server_uri,
    }
}

/// Where `mountIceberg` mounts from, when not a metadata URL.
#[napi(object)]
pub struct MountSource {
    /// A table of an Iceberg REST catalog, read with the credentials it vends.
    pub catalog: CatalogOptions,
}

/// Which files `registerParquetTable` records.
#[napi(object)]
pub struct RegisterOptions {
    /// Paths relative to the location. Default: every `*.parquet` below it.
    pub files: Option<Vec<String>>,
    /// Only files whose relative path starts with this.
    pub prefix: Option<String>,
}

#[napi(object)]
pub struct Field {
    pub field_id: i32,
    pub name: String,
    pub data_type: String,
    /// The key type when the column can be indexed.
    pub key_type: Option<String>,
    pub nullable: bool,
}

#[napi(object)]
pub struct TableInfo {
    pub name: String,
    pub table_id: BigInt,
    pub files: u32,
    pub rows: BigInt,
    pub fields: Vec<Field>,
}

fn table_info(t: ov::TableInfo) -> TableInfo {
    TableInfo {
        name: t.name,
        table_id: big(t.table_id),
        files: t.files as u32,
        rows: big(t.rows),
        fields: t
            .fields
            .into_iter()
            .map(|f| Field {
                field_id: f.field_id,
                name: f.name,
                data_type: f.data_type,
                key_type: f.key_type.map(|k| k.to_string()),
                nullable: f.nullable,
            })
            .collect(),
    }
}

/// One index column with its order.
#[napi(object)]
pub struct IndexColumn {
    pub name: String,
    /// `asc` (default) | `desc`
    pub direction: Option<String>,
    /// `last` (default) | `first`
    pub nulls: Option<String>,
}

#[napi(object)]
pub struct IndexInfo {
    pub name: String,
    pub index_id: BigInt,
    pub fields: Vec<i32>,
    pub unique: bool,
    #[napi(ts_type = "IndexKind")]
    pub kind: String,
    #[napi(ts_type = "IndexState")]
    pub state: String,
    /// Why a poisoned index was poisoned, when recorded (an upstream schema change).
    pub reason: Option<String>,
}

#[napi(object)]
pub struct SkippedFile {
    pub file: String,
    pub code: String,
    pub message: String,
}

/// Options of `planBuild`.
#[napi(object)]
pub struct PlanOptions {
    /// Only this index (default: every live index of the table).
    pub index: Option<String>,
    /// Most entries (rows × indexes) a worker derives in one pass over a file (default
    /// 2,000,000); a larger file is built one index at a time (the worker holds one index's
    /// entries of the file).
    pub pass_entries: Option<f64>,
    /// Plan the tier steps' runs instead of files (`docs/fanout.md`, "Run tasks"): one task per
    /// index whose runs a step is due for, after the file receipts are committed with
    /// `commitBuild(receipts, { runs: false })`.
    pub runs: Option<bool>,
}

/// Options of `commitBuild`.
#[napi(object)]
pub struct CommitOptions {
    /// Take the tier steps the committed files call for (write the runs here; default
    /// true). `false` leaves them to `planBuild(table, { runs: true })` and workers.
    pub runs: Option<bool>,
}

/// A file `commitBuild` did not commit, and why.
#[napi(object)]
pub struct RefusedFile {
    pub file: String,
    pub reason: String,
}

/// What `commitBuild` did.
#[napi(object)]
pub struct CommitReport {
    /// Files whose new bundles are committed.
    pub committed: Vec<String>,
    /// Stale or unverifiable receipts (build them again from a new plan).
    pub refused: Vec<RefusedFile>,
    /// Files left for a local `build()`: too large for one piece, or unreadable.
    pub left: Vec<RefusedFile>,
    pub entries: BigInt,
    pub bytes: BigInt,
    /// Catalog transactions the commit took.
    pub transactions: u32,
    /// Blobs the committed receipts carried over a move (an output of a compaction, its
    /// entries taken from the sources' blobs) instead of deriving from the file.
    pub carried: u32,
    /// Run bundles committed from run receipts (each its index's new run); refused run
    /// receipts are in `refused`, by run bundle.
    pub runs: Vec<String>,
}

#[napi(object)]
pub struct BuildReport {
    pub files_indexed: u32,
    pub entries: BigInt,
    pub bundles_written: u32,
    pub bytes_written: BigInt,
    pub skipped: Vec<SkippedFile>,
}

#[napi(object)]
pub struct PublishReport {
    pub version: BigInt,
    pub path: String,
    pub bytes: BigInt,
}

#[napi(object)]
pub struct RefreshReport {
    pub checked: u32,
    pub changed: Vec<String>,
    pub touched: Vec<String>,
    pub missing: Vec<String>,
    /// Changed files whose delete masks no longer apply (dropped; register them again).
    pub deletes_dropped: Vec<String>,
    /// Files that could not be read (left as they were), with why.
    pub unreadable: Vec<SkippedFile>,
    /// For a read-only overlay: the published version now pinned.
    pub version: Option<BigInt>,
}

/// Options of `refresh`.
#[napi(object)]
pub struct RefreshOptions {
    /// Re-hash every file (finds rewrites that keep size and version).
    pub deep: Option<bool>,
}

/// A file queued for repair.
#[napi(object)]
pub struct Repair {
    /// Data file path (`*` for a table run of the index).
    pub path: String,
    /// For a table run: the damaged run's bundle path (its repair withdraws that run alone).
    pub run: Option<String>,
    /// The rejection's reason code.
    #[napi(ts_type = "RejectReason")]
    pub reason: String,
    pub message: String,
}

/// A column of `writeParquet`.
#[napi(object)]
pub struct ParquetColumn {
    pub name: String,
    /// `boolean` | `int32` | `int64` | `float64` | `string` | `date`
    #[napi(js_name = "type")]
    pub ty: String,
}

/// What `registerFiles` did.
#[napi(object)]
pub struct RegisterReport {
    pub files: i64,
    pub rows: i64,
    pub entries: i64,
    pub bundles_written: i64,
    /// Building unique indexes the new rows broke (now `poisoned`).
    pub poisoned: Vec<String>,
    /// Indexes whose work over the new files did not fit one commit: the files are scanned
    /// until a build covers them (a ready index is `maintaining` meanwhile).
    pub pending: Vec<String>,
    pub attempts: i64,
    /// Commits the registration took: 1, or one per 8,192 files of a registration of more
    /// (each a registration of its own, in list order).
    pub commits: i64,
}

impl From<skerry_core::admin::lifecycle::RegisterReport> for RegisterReport {
    fn from(r: skerry_core::admin::lifecycle::RegisterReport) -> Self {
        RegisterReport {
            files: i(r.files),
            rows: i(r.rows),
            entries: i(r.entries),
            bundles_written: i(r.bundles_written),
            poisoned: r.poisoned,
            pending: r.pending,
            attempts: i(r.attempts),
            commits: i(r.commits),
        }
    }
}

/// What `registerRewrite` replaces.
#[napi(object)]
pub struct RewriteOptions {
    /// Registered files the rewrite replaces.
    pub removed: Vec<String>,
    /// The files holding their live rows (paths relative to the table's location).
    pub added: Vec<String>,
    /// The added files' column of row ids (default `_row_id`).
    pub row_id_column: Option<String>,
}

/// What `registerRewrite` did: the added files' registration and the move.
#[napi(object)]
pub struct RewriteReport {
    pub registered: RegisterReport,
    pub moved: MoveReport,
}

/// Rows of one data file to delete, by position.
#[napi(object)]
pub struct FileDeletes {
    pub file: String,
    pub positions: Vec<Either<BigInt, f64>>,
}

#[napi(object)]
pub struct SyncOptions {
    /// The metadata file to sync to (default: the newest in the table's directory).
    pub metadata_url: Option<String>,
}

/// What `syncIceberg` did. Snapshot ids are bigints (Iceberg ids use all 64 bits).
#[napi(object)]
pub struct SyncReport {
    pub from_snapshot: BigInt,
    pub snapshot_id: BigInt,
    pub metadata_location: String,
    /// Data files registered, and dropped.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Data files whose delete mask changed.
    pub masks_changed: Vec<String>,
    pub rows_added: i64,
    /// Manifests read (the rest were known from the last sync), delete files read.
    pub manifests_read: i64,
    pub delete_files_read: i64,
    /// Requests to and bytes from the upstream table's metadata and delete files.
    pub requests: i64,
    pub bytes: i64,
    /// Unique indexes an upstream duplicate poisoned.
    pub poisoned: Vec<String>,
    /// Indexes whose work over the added files did not fit the sync's commit: the files are
    /// scanned until a build (or `startSync`'s catch-up) covers them.
    pub pending: Vec<String>,
    /// Set when the change claims to move rows (files removed and added under `replace`
    /// snapshots only, on a table with row lineage): the rows the added files hold of the
    /// removed files', checked by row id — or why the ids do not bear the claim out.
    pub moved: Option<MoveReport>,
}

/// A change of files that claimed to move rows, as its row ids bear it out (RFC 0006).
#[napi(object)]
pub struct MoveReport {
    /// Files added (the move's outputs) and removed (its sources).
    pub files: i64,
    pub sources: i64,
    /// Rows the added files hold, each a live row of a removed file under the same id.
    pub rows: i64,
    /// Runs of consecutive rows moved together.
    pub segments: i64,
    /// Index entries of the added files (rows, for full text and vector) carried over from
    /// the removed files' blobs or runs, and derived from the added files' columns (bloom,
    /// and any index whose sources could not give them). Both 0 when the work was left
    /// `pending`: the build carries it later from the move's record.
    pub carried: i64,
    pub derived: i64,
    /// Why the change is not a move: the first check the row ids failed.
    pub refused: Option<String>,
}

impl From<skerry_core::admin::iceberg::MoveReport> for MoveReport {
    fn from(m: skerry_core::admin::iceberg::MoveReport) -> Self {
        let n = |x: u64| x as i64;
        MoveReport {
            files: n(m.files),
            sources: n(m.sources),
            rows: n(m.rows),
            segments: n(m.segments),
            carried: n(m.carried),
            derived: n(m.derived),
            refused: m.refused,
        }
    }
}

#[napi(object)]
pub struct DeleteReport {
    /// Rows newly deleted (already-deleted positions are not counted).
    pub rows_deleted: i64,
}

/// Progress of `build`: `phase` is `build` for the pass that indexes whole files for all
/// their indexes at once (rows counted once per index), `build <index>` for what one index
/// then builds in slices or flips; `index` names that index.
#[napi(object)]
pub struct BuildProgress {
    pub phase: String,
    pub index: Option<String>,
    pub rows_done: i64,
    pub rows_total: i64,
    pub file: Option<String>,
}

/// A progress callback, called on the JS thread and not awaited.
type ProgressFn = napi::threadsafe_function::ThreadsafeFunction<
    BuildProgress,
    napi::threadsafe_function::UnknownReturnValue,
    BuildProgress,
    Status,
    false,
>;

/// Bounds of one `buildStep` (defaults 1,000,000 entries, 8 MiB).
#[napi(object)]
pub struct StepOptions {
    pub max_entries: Option<i64>,
    pub max_bytes: Option<i64>,
}

#[napi(object)]
pub struct CursorInfo {
    pub file: String,
    pub position: i64,
}

/// What one build step did.
#[napi(object)]
pub struct StepReport {
    pub index: String,
    #[napi(ts_type = "IndexState")]
    pub state: String,
    pub done: bool,
    pub step: i64,
    pub entries: i64,
    pub entry_bytes: i64,
    pub files_completed: Vec<String>,
    pub bundles_written: i64,
    pub bytes_written: i64,
    pub skipped: Vec<SkippedFile>,
    pub cursor: Option<CursorInfo>,
    pub rows_done: i64,
    pub rows_total: i64,
    /// A step of the merge phase (every row indexed): the tier step it took.
    pub merged: Option<MergeReport>,
}

/// One merge of a staged build: the run it wrote (`runBytes`, 0 when it only dropped runs
/// answering nothing), the runs it merged into it, the files and rows that run covers, and
/// the index's runs after it.
#[napi(object)]
pub struct MergeReport {
    pub runs_merged: i64,
    pub files: i64,
    pub rows: i64,
    pub run_bytes: i64,
    pub runs: i64,
}

/// What vacuum (or a purging drop) removed.
#[napi(object)]
pub struct VacuumReport {
    pub artifacts: i64,
    pub bytes: i64,
    pub manifests: i64,
    pub claims: i64,
    pub index_files: i64,
    pub dropped_indexes: i64,
    /// Table registrations that died midway whose file records were reclaimed.
    pub staged_tables: i64,
    /// Unreferenced objects kept for being younger than the grace period, and their bytes.
    pub young: i64,
    pub young_bytes: i64,
}

#[napi(object)]
pub struct VacuumOptions {
    /// Published manifest versions to keep (default 1).
    pub retain_versions: Option<i64>,
    /// Unreferenced objects younger than this many seconds are kept (default 3600): a
    /// fan-out worker's bundle or a build step's segment still to be committed survives.
    /// 0 reclaims everything unreferenced.
    pub grace_seconds: Option<i64>,
}

#[napi(object)]
pub struct VerifyReport {
    pub files: i64,
    pub files_unindexed: i64,
    pub stored: i64,
    pub expected: i64,
    pub missing: i64,
    pub dead: i64,
    pub mismatched: i64,
    pub certified: bool,
    /// Files queued for repair (drained by the next build of the index).
    pub repairs_queued: i64,
}

#[napi(object)]
pub struct Certificate {
    pub snapshot: i64,
    pub generation: i64,
    pub catalog_version: i64,
    pub entries: i64,
}

fn index_column(c: Either<String, IndexColumn>) -> skerry_core::Result<ov::IndexColumn> {
    use skerry_core::values::{Direction, NullOrder};
    let invalid = |what: &str, v: &str| CoreError::Invalid(format!("{what} must be {v}"));
    Ok(match c {
        Either::A(name) => ov::IndexColumn::from(name),
        Either::B(c) => ov::IndexColumn {
            name: c.name,
            direction: match c.direction.as_deref() {
                None | Some("asc") => Direction::Asc,
                Some("desc") => Direction::Desc,
                Some(_) => return Err(invalid("direction", "'asc' or 'desc'")),
            },
            nulls: match c.nulls.as_deref() {
                None | Some("last") => NullOrder::Last,
                Some("first") => NullOrder::First,
                Some(_) => return Err(invalid("nulls", "'first' or 'last'")),
            },
        },
    })
}

/// An overlay: catalog, bundles and manifests under one object-store prefix.
#[napi]
pub struct Overlay {
    handle: Handle,
}

/// A writer (catalog + publish) or a read-only view of the published overlay.
#[derive(Clone)]
enum Handle {
    Writer(Arc<ov::Overlay>),
    Reader(Arc<skerry_core::read::reader::OverlayReader>),
}

impl Handle {
    /// The read handle every read verb is answered from.
    async fn snapshot(&self) -> skerry_core::Result<skerry_core::Snapshot> {
        match self {
            Handle::Writer(o) => o.snapshot_with_repairs().await,
            Handle::Reader(r) => Ok(r.snapshot()),
        }
    }
}

impl Overlay {
    /// The writer, or `E_READ_ONLY` for a read-only overlay.
    fn writer(&self) -> skerry_core::Result<Arc<ov::Overlay>> {
        match &self.handle {
            Handle::Writer(o) => Ok(o.clone()),
            Handle::Reader(_) => Err(CoreError::ReadOnly),
        }
    }

    /// A read verb: arguments adapted here, parsed, answered and shaped by the host boundary.
    fn read<'env>(
        &self,
        env: &'env Env,
        verb: &'static str,
        args: Vec<Unknown<'_>>,
    ) -> Result<PromiseRaw<'env, Js>> {
        let args = args
            .into_iter()
            .map(|a| from_js(env, a))
            .collect::<Result<Vec<HostValue>>>()?;
        let h = self.handle.clone();
        run(env, async move {
            let call = ReadCall::parse(verb, &args)?;
            // A query's warnings are in its answer; the facade emits them as events.
            Ok(Js(call.run(&h.snapshot().await?, None).await?.value))
        })
    }
}

/// The read verbs (`skerry_core::with_read_verbs!`, the one list of them): each hands its
/// arguments to the host boundary. Their TypeScript and docs are `ReadVerbs` in `host.d.ts`.
macro_rules! read_verbs {
    ($($name:ident $js:tt ($($arg:ident),*);)*) => {
        #[napi]
        impl Overlay {
            $(
                #[napi(js_name = $js, skip_typescript)]
                pub fn $name<'env>(
                    &self,
                    env: &'env Env,
                    $($arg: Unknown<'_>),*
                ) -> Result<PromiseRaw<'env, Js>> {
                    self.read(env, $js, vec![$($arg),*])
                }
            )*
        }
    };
}
skerry_core::with_read_verbs!(read_verbs);

/// A JavaScript bigint as a u64, losslessly: negative or wider values are `E_INVALID`
/// naming `what`.
fn u64_arg(b: &BigInt, what: &str) -> skerry_core::Result<u64> {
    let (negative, v, lossless) = b.get_u64();
    if (negative && v != 0) || !lossless {
        return Err(CoreError::Invalid(format!(
            "{what} must be a bigint from 0 to 2^64-1"
        )));
    }
    Ok(v)
}

fn i(n: u64) -> i64 {
    n as i64
}

/// Not for production: the `SKERRY_FAULTS` fault plan (`io::faults::FaultPlan`), when set,
/// for every overlay and bundle builder this process opens (the soak, `docs/guarantees.md`).
fn env_faults() -> skerry_core::Result<Option<skerry_core::io::faults::FaultPlan>> {
    match std::env::var("SKERRY_FAULTS") {
        Ok(text) if !text.trim().is_empty() => {
            skerry_core::io::faults::FaultPlan::parse(&text).map(Some)
        }
        _ => Ok(None),
    }
}

/// Internal (`lib/index.js` calls it once): the function that builds answers' row objects
/// from flat values, `(columns, values, count) => rows`.
#[napi(ts_args_type = "factory: (columns: string[], values: unknown[], count: number) => object[]")]
pub fn set_row_factory(env: Env, factory: Unknown<'_>) -> Result<()> {
    if factory.get_type()? != ValueType::Function {
        return Err(Error::new(
            Status::InvalidArg,
            "setRowFactory: a function is required",
        ));
    }
    unsafe { js::set_row_factory(env.raw(), factory.raw()) }
}

/// Faults injected in this process so far under `SKERRY_FAULTS` (0 without it).
#[napi]
pub fn faults_injected() -> f64 {
    skerry_core::io::faults::injected_total() as f64
}

/// Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`, `s3://bucket/prefix`.
#[napi(ts_return_type = "Promise<Overlay>")]
pub fn open_overlay<'env>(
    env: &'env Env,
    url: String,
    options: Option<OpenOptions>,
) -> Result<PromiseRaw<'env, Overlay>> {
    let (storage, read_only, timeout_ms, part_bytes, cache_bytes, catalogs) = match options {
        Some(o) => (
            o.storage,
            o.read_only.unwrap_or(false),
            o.timeout_ms,
            o.manifest_part_bytes,
            o.cache_bytes,
            o.catalogs,
        ),
        None => (None, false, None, None, None, None),
    };
    if let Some(n) = cache_bytes {
        if n.fract() != 0.0 || !(0.0..=9_007_199_254_740_991.0).contains(&n) {
            return Err(js_error(
                env,
                &CoreError::Invalid(
                    "open: options.cacheBytes must be an integer from 0 to 2^53-1".into(),
                ),
            ));
        }
    }
    let opts = ov::OpenOptions {
        storage: storage.map(|m| m.into_iter().collect()).unwrap_or_default(),
        timeout: timeout_ms.map(|ms| std::time::Duration::from_millis(ms as u64)),
        faults: env_faults().map_err(|e| js_error(env, &e))?,
        catalogs: catalogs
            .unwrap_or_default()
            .into_iter()
            .map(catalog_access)
            .collect(),
    };
    run(env, async move {
        let handle = if read_only {
            let r = skerry_core::read::reader::OverlayReader::open(&url, opts).await?;
            if let Some(n) = cache_bytes {
                r.snapshot().cache().set_budget(n as u64);
            }
            Handle::Reader(Arc::new(r))
        } else {
            let o = ov::Overlay::open(&url, opts).await?;
            if let Some(n) = part_bytes {
                o.set_part_min_bytes(n as usize);
            }
            if let Some(n) = cache_bytes {
                o.set_cache_bytes(n as u64);
            }
            Handle::Writer(Arc::new(o))
        };
        Ok(Overlay { handle })
    })
}

/// Writes a deterministic sample `orders` Parquet file (columns `order_id`, `customer`,
/// `amount`, `day`) with orders `firstId .. firstId + rows`. `codec`: snappy | lz4 | zstd | none.
#[napi]
pub fn sample_orders_parquet(
    env: &Env,
    first_id: f64,
    rows: f64,
    row_group_rows: f64,
    codec: String,
) -> Result<Buffer> {
    let made = (|| {
        let int = |v: f64, what: &str, lo: f64, hi: f64| {
            if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
                return Err(CoreError::Invalid(format!(
                    "{what} must be an integer from {lo} to {hi}"
                )));
            }
            Ok(v)
        };
        let rows = int(rows, "rows", 0.0, 10_000_000.0)? as usize;
        let row_group_rows = int(row_group_rows, "rowGroupRows", 1.0, 10_000_000.0)? as usize;
        let first_id = int(first_id, "firstId", -(2f64.powi(53)), 2f64.powi(53))? as i64;
        let c = skerry_core::admin::sample::SampleCodec::parse(&codec)
            .ok_or_else(|| CoreError::Invalid(format!("unknown codec {codec:?}")))?;
        skerry_core::admin::sample::orders_parquet(first_id, rows, row_group_rows, c)
    })();
    made.map(Buffer::from).map_err(|e| js_error(env, &e))
}

/// Writes rows (arrays of values, `null` for NULL) as a Parquet file with nullable columns —
/// arbitrary test data (NaN, ±0, unicode, NULLs) without another Parquet writer.
#[napi(
    ts_args_type = "columns: ParquetColumn[], rows: unknown[][], rowGroupRows?: number, codec?: string"
)]
pub fn write_parquet(
    env: &Env,
    columns: Vec<ParquetColumn>,
    rows: Unknown<'_>,
    row_group_rows: Option<u32>,
    codec: Option<String>,
) -> Result<Buffer> {
    let rows = from_js(env, rows)?;
    let made = (|| {
        let cols = columns
            .into_iter()
            .map(|c| c.ty.parse().map(|t| (c.name, t)).map_err(CoreError::Key))
            .collect::<skerry_core::Result<Vec<_>>>()?;
        let rows = host::input::array(&rows, "writeParquet", "rows")?
            .iter()
            .map(host::input::key_values)
            .collect::<skerry_core::Result<Vec<_>>>()?;
        // A row is one value per column: a short or long one is refused, never padded.
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != cols.len()) {
            return Err(CoreError::Invalid(format!(
                "writeParquet: rows[{i}] has {} values for {} columns",
                r.len(),
                cols.len()
            )));
        }
        let codec =
            skerry_core::admin::sample::SampleCodec::parse(codec.as_deref().unwrap_or("snappy"))
                .ok_or_else(|| CoreError::Invalid("unknown codec".into()))?;
        skerry_core::admin::sample::parquet_from_rows(
            &cols,
            &rows,
            row_group_rows.unwrap_or(1000) as usize,
            codec,
        )
    })();
    made.map(Buffer::from).map_err(|e| js_error(env, &e))
}

fn skipped(v: Vec<ov::Skipped>) -> Vec<SkippedFile> {
    v.into_iter()
        .map(|s| SkippedFile {
            file: s.file,
            code: s.code,
            message: s.message,
        })
        .collect()
}

/// A row position: a bigint, or a number that is a non-negative integer up to 2^53 (a
/// fraction, NaN, an infinity or a negative number is `E_INVALID`, never rounded).
fn u64_of(v: Either<BigInt, f64>) -> skerry_core::Result<u64> {
    match v {
        Either::A(b) => u64_arg(&b, "a position"),
        Either::B(n) => skerry_core::host::input::u64_value(
            &skerry_core::host::HostValue::Number(n),
            "registerDeletes",
            "a position",
        ),
    }
}

fn vacuum_report(r: skerry_core::admin::lifecycle::VacuumReport) -> VacuumReport {
    VacuumReport {
        artifacts: i(r.artifacts),
        bytes: i(r.bytes),
        manifests: i(r.manifests),
        claims: i(r.claims),
        index_files: i(r.index_files),
        dropped_indexes: i(r.dropped_indexes),
        staged_tables: i(r.staged_tables),
        young: i(r.young),
        young_bytes: i(r.young_bytes),
    }
}

fn index_info(i: ov::IndexInfo) -> IndexInfo {
    IndexInfo {
        name: i.name,
        index_id: big(i.index_id),
        fields: i.fields,
        unique: i.unique,
        kind: i.kind.to_string(),
        state: i.state.to_string(),
        reason: None,
    }
}

#[napi]
impl Overlay {
    /// Registers a table of plain Parquet files under `location` (a directory URL), recording
    /// each file's size, ETag, record count and SHA-256, and the schema with field ids.
    #[napi(ts_return_type = "Promise<TableInfo>")]
    pub fn register_parquet_table<'env>(
        &self,
        env: &'env Env,
        name: String,
        location: String,
        options: Option<RegisterOptions>,
    ) -> Result<PromiseRaw<'env, TableInfo>> {
        let sel = match options {
            Some(RegisterOptions { files: Some(f), .. }) => ov::FileSelection::List(f),
            Some(RegisterOptions {
                prefix: Some(p), ..
            }) => ov::FileSelection::Prefix(p),
            _ => ov::FileSelection::Prefix(String::new()),
        };
        let w = self.writer();
        run(env, async move {
            let t = w?.register_parquet_table(&name, &location, sel).await?;
            Ok(table_info(t))
        })
    }

    /// Mounts a read-only Iceberg table as table `name`, at the current snapshot of the
    /// metadata file `metadataUrl` (`file://…/metadata/00003-….metadata.json`, `s3://…`) or
    /// of the newest metadata file of a table directory: its live Parquet data files are
    /// registered, its delete files (position, equality, deletion vectors) resolved into
    /// delete masks, and it can be indexed, queried and published. Upstream is never written.
    /// Not yet: data files of different schemas fail `E_UNSUPPORTED`; malformed metadata or
    /// delete files `E_ICEBERG`.
    ///
    /// `source` may instead be `{ catalog: { uri, warehouse, namespace, table, credential |
    /// token, scope, headers } }`: the table of an Iceberg REST catalog, loaded with vended
    /// credentials (refreshed before they expire); `syncIceberg` and `startSync` then follow
    /// the catalog's current metadata. Only `GET`s reach the catalog (and the OAuth2 token
    /// request). Errors `E_AUTH` for refused credentials; secrets are never recorded.
    #[napi(ts_return_type = "Promise<TableInfo>")]
    pub fn mount_iceberg<'env>(
        &self,
        env: &'env Env,
        name: String,
        source: Either<String, MountSource>,
    ) -> Result<PromiseRaw<'env, TableInfo>> {
        let w = self.writer();
        run(env, async move {
            let t = match source {
                Either::A(url) => w?.mount_iceberg(&name, &url).await?,
                Either::B(m) => {
                    w?.mount_iceberg_catalog(&name, catalog_access(m.catalog))
                        .await?
                }
            };
            Ok(table_info(t))
        })
    }

    /// Connects this process to a REST catalog table (as `open`'s `catalogs` does): its
    /// vended credentials are used for the table's objects, and a sync of a table mounted
    /// from it asks it. Resolves to the table's current metadata file.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn connect_catalog<'env>(
        &self,
        env: &'env Env,
        catalog: CatalogOptions,
    ) -> Result<PromiseRaw<'env, String>> {
        let w = self.writer();
        run(env, async move {
            Ok(w?.connect_catalog(catalog_access(catalog)).await?)
        })
    }

    /// Moves the mounted Iceberg table `name` to the upstream's current snapshot (the newest
    /// metadata file of its directory, or `options.metadataUrl`): reads only the manifests it
    /// has not seen, registers added data files (indexes kept whole), drops removed ones and
    /// refreshes delete masks, in one commit. An upstream duplicate under a unique index
    /// poisons it (`poisoned`). Publish to move readers.
    #[napi(ts_return_type = "Promise<SyncReport>")]
    pub fn sync_iceberg<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: Option<SyncOptions>,
    ) -> Result<PromiseRaw<'env, SyncReport>> {
        let w = self.writer();
        let source = options.and_then(|o| o.metadata_url);
        run(env, async move {
            let r = w?.sync_iceberg(&name, source.as_deref()).await?;
            Ok(SyncReport {
                from_snapshot: BigInt::from(r.from_snapshot),
                snapshot_id: BigInt::from(r.snapshot_id),
                metadata_location: r.metadata_location,
                added: r.added,
                removed: r.removed,
                masks_changed: r.masks_changed,
                rows_added: r.rows_added as i64,
                manifests_read: r.manifests_read as i64,
                delete_files_read: r.delete_files_read as i64,
                requests: r.requests as i64,
                bytes: r.bytes as i64,
                poisoned: r.poisoned,
                pending: r.pending,
                moved: r.moved.map(MoveReport::from),
            })
        })
    }

    /// The registered tables, in name order, with their file and row counts.
    #[napi(ts_return_type = "Promise<TableInfo[]>")]
    pub fn list_tables<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<TableInfo>>> {
        let w = self.writer();
        run(env, async move {
            Ok(w?
                .list_tables()
                .await?
                .into_iter()
                .map(table_info)
                .collect())
        })
    }

    /// Defines an index on `columns` (committed at once; `build` makes it ready): ordered by
    /// default, or `{ kind: 'bitmap' }` for a low-cardinality column.
    /// A column is a name (ascending, NULLS LAST) or `{ name, direction, nulls }`.
    #[napi(ts_return_type = "Promise<IndexInfo>")]
    pub fn create_index<'env>(
        &self,
        env: &'env Env,
        table: String,
        name: String,
        columns: Vec<Either<String, IndexColumn>>,
        #[napi(ts_arg_type = "CreateIndexOptions | undefined | null")] options: Option<Unknown<'_>>,
    ) -> Result<PromiseRaw<'env, IndexInfo>> {
        let opts = match options {
            Some(o) => skerry_core::host::input::index_options(&from_js(env, o)?),
            None => Ok(ov::IndexOptions::default()),
        };
        let columns = columns
            .into_iter()
            .map(index_column)
            .collect::<skerry_core::Result<Vec<_>>>();
        let w = self.writer();
        run(env, async move {
            let i = w?.create_index(&table, &name, &columns?, opts?).await?;
            Ok(index_info(i))
        })
    }

    /// Drops an index in one small catalog commit (a tombstone; artifacts await vacuum):
    /// lookups stop using it at once, the next publish omits it, the name is free again.
    /// Returns the dropped index's id.
    #[napi(ts_return_type = "Promise<bigint>")]
    pub fn drop_index<'env>(
        &self,
        env: &'env Env,
        table: String,
        name: String,
    ) -> Result<PromiseRaw<'env, BigInt>> {
        let w = self.writer();
        run(
            env,
            async move { Ok(big(w?.drop_index(&table, &name).await?)) },
        )
    }

    /// Builds every missing or stale index blob of `table` and flips built indexes to ready:
    /// each data file is read once and gets one new bundle generation for all its indexes.
    /// `onProgress` (called on the JS thread, never awaited) sees rows done and total after
    /// every commit.
    // The callback is the facade's (`build(table, { onProgress })`, lib/index.js): not typed
    // here, so TypeScript shows one way to pass it.
    #[napi(
        ts_args_type = "table: string",
        ts_return_type = "Promise<BuildReport>"
    )]
    pub fn build<'env>(
        &self,
        env: &'env Env,
        table: String,
        on_progress: Option<ProgressFn>,
    ) -> Result<PromiseRaw<'env, BuildReport>> {
        let w = self.writer();
        run(env, async move {
            // Progress goes through a channel to a forwarder that awaits each JS call, and
            // the build resolves only after the forwarder drained it: every callback runs
            // before `build()` resolves, in order. A throwing callback cannot kill the
            // process (`call_async_catch`); the facade rethrows its error after the build.
            let (tx, mut rx) = futures::channel::mpsc::unbounded::<BuildProgress>();
            let built = async move {
                let r = w?
                    .build(&table, |p| {
                        let _ = tx.unbounded_send(BuildProgress {
                            phase: p.phase.clone(),
                            index: p.phase.strip_prefix("build ").map(str::to_string),
                            rows_done: p.done as i64,
                            rows_total: p.total as i64,
                            file: p.file.clone(),
                        });
                    })
                    .await;
                drop(tx);
                r
            };
            let forward = async move {
                use futures::StreamExt;
                while let Some(p) = rx.next().await {
                    if let Some(f) = &on_progress {
                        let _ = f.call_async_catch(p).await;
                    }
                }
            };
            let (r, ()) = futures::join!(built, forward);
            let r = r?;
            Ok(BuildReport {
                files_indexed: r.files_indexed as u32,
                entries: big(r.entries),
                bundles_written: r.bundles_written as u32,
                bytes_written: big(r.bytes_written),
                skipped: skipped(r.skipped),
            })
        })
    }

    /// Writes the catalog head as a new immutable manifest version and moves `HEAD` to it.
    #[napi(ts_return_type = "Promise<PublishReport>")]
    pub fn publish<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, PublishReport>> {
        let w = self.writer();
        run(env, async move {
            let p = w?.publish().await?;
            Ok(PublishReport {
                version: big(p.version),
                path: p.path,
                bytes: big(p.bytes),
            })
        })
    }

    /// Writer: re-checks every data file of `table` against the store (SHA-256 confirms
    /// changes; `deep` re-hashes every file). Read-only: pins the newest published version.
    #[napi(ts_return_type = "Promise<RefreshReport>")]
    pub fn refresh<'env>(
        &self,
        env: &'env Env,
        table: Option<String>,
        options: Option<RefreshOptions>,
    ) -> Result<PromiseRaw<'env, RefreshReport>> {
        let h = self.handle.clone();
        let deep = options.and_then(|o| o.deep).unwrap_or(false);
        run(env, async move {
            let o = match h {
                Handle::Reader(r) => {
                    let v = r.refresh().await?;
                    return Ok(RefreshReport {
                        checked: 0,
                        changed: vec![],
                        touched: vec![],
                        missing: vec![],
                        deletes_dropped: vec![],
                        unreadable: vec![],
                        version: Some(big(v)),
                    });
                }
                Handle::Writer(o) => o,
            };
            let table = table
                .ok_or_else(|| CoreError::Invalid("refresh: table must be a string".into()))?;
            let r = if deep {
                o.refresh_deep(&table).await
            } else {
                o.refresh(&table).await
            }?;
            Ok(RefreshReport {
                checked: r.checked as u32,
                changed: r.changed,
                touched: r.touched,
                missing: r.missing,
                deletes_dropped: r.deletes_dropped,
                unreadable: skipped(r.unreadable),
                version: None,
            })
        })
    }

    /// This handle's counters in the Prometheus text format: reads by verb, requests and
    /// bytes (index, data), read cache hits, misses and bytes per tier, files answered by
    /// index / scanned / pruned / rejected (by reason), repairs queued and drained, builds and
    /// the running build's progress.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn metrics<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, String>> {
        let h = self.handle.clone();
        run(env, async move {
            Ok(h.snapshot().await?.metrics().prometheus())
        })
    }

    /// Files queued for repair because a query rejected their index of `index`.
    #[napi(ts_return_type = "Promise<Repair[]>")]
    pub fn repairs<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
    ) -> Result<PromiseRaw<'env, Vec<Repair>>> {
        let w = self.writer();
        run(env, async move {
            let r = w?.repairs(&table, &index).await?;
            Ok(r.into_iter()
                .map(|e| Repair {
                    path: e.path,
                    run: e.run,
                    reason: e.reason,
                    message: e.message,
                })
                .collect())
        })
    }

    /// With `on`, every lookup answers every file by scanning it, ignoring indexes (the same
    /// answer; for benchmarks and debugging).
    #[napi]
    pub fn set_scan_only(&self, on: bool) {
        match &self.handle {
            Handle::Writer(o) => o.set_scan_only(on),
            Handle::Reader(r) => r.set_scan_only(on),
        }
    }

    /// Whether this overlay was opened read-only.
    #[napi(getter)]
    pub fn read_only(&self) -> bool {
        matches!(self.handle, Handle::Reader(_))
    }

    /// Registers more Parquet files of `table` (paths relative to its location), keeping
    /// every index whole in the same commit (see the README's lifecycle section).
    #[napi(ts_return_type = "Promise<RegisterReport>")]
    pub fn register_files<'env>(
        &self,
        env: &'env Env,
        table: String,
        files: Vec<String>,
    ) -> Result<PromiseRaw<'env, RegisterReport>> {
        let w = self.writer();
        run(env, async move {
            Ok(RegisterReport::from(
                w?.register_files(&table, &files).await?,
            ))
        })
    }

    /// Replaces files of a Parquet table with their rewrite (a compaction, a re-sort): the
    /// added files hold exactly the removed files' live rows, each with its row id in
    /// `rowIdColumn` (default `_row_id`). Checked by the ids (`E_REFUSED` naming the first
    /// failed check, nothing changed); the indexes' entries are carried over, not derived.
    #[napi(ts_return_type = "Promise<RewriteReport>")]
    pub fn register_rewrite<'env>(
        &self,
        env: &'env Env,
        table: String,
        options: RewriteOptions,
    ) -> Result<PromiseRaw<'env, RewriteReport>> {
        let w = self.writer();
        run(env, async move {
            let r = w?
                .register_rewrite(
                    &table,
                    &options.removed,
                    &options.added,
                    options.row_id_column.as_deref(),
                )
                .await?;
            Ok(RewriteReport {
                registered: RegisterReport::from(r.registered),
                moved: MoveReport::from(r.moved),
            })
        })
    }

    /// Records deleted rows by position (their keys are free again under unique indexes).
    #[napi(ts_return_type = "Promise<DeleteReport>")]
    pub fn register_deletes<'env>(
        &self,
        env: &'env Env,
        table: String,
        deletes: Vec<FileDeletes>,
    ) -> Result<PromiseRaw<'env, DeleteReport>> {
        let deletes = deletes
            .into_iter()
            .map(|d| {
                Ok(skerry_core::admin::lifecycle::FileDeletes {
                    file: d.file,
                    positions: d
                        .positions
                        .into_iter()
                        .map(u64_of)
                        .collect::<skerry_core::Result<_>>()?,
                })
            })
            .collect::<skerry_core::Result<Vec<_>>>();
        let w = self.writer();
        run(env, async move {
            let r = w?.register_deletes(&table, &deletes?).await?;
            Ok(DeleteReport {
                rows_deleted: i(r.rows_deleted),
            })
        })
    }

    /// One bounded, resumable step of building `index`; a step that lost a race to another
    /// builder is retried from its cursor in core (`E_CONFLICT` only after 16 in a row).
    #[napi(ts_return_type = "Promise<StepReport>")]
    pub fn build_step<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
        options: Option<StepOptions>,
    ) -> Result<PromiseRaw<'env, StepReport>> {
        let mut opts = skerry_core::admin::build::StepOptions::default();
        if let Some(o) = options {
            if let Some(n) = o.max_entries {
                opts.max_entries = n.max(0) as u64;
            }
            if let Some(n) = o.max_bytes {
                opts.max_bytes = n.max(0) as u64;
            }
        }
        let w = self.writer();
        run(env, async move {
            let s = w?.build_step_retrying(&table, &index, opts).await?;
            Ok(StepReport {
                index: s.index,
                state: s.state.to_string(),
                done: s.done,
                step: i(s.step),
                entries: i(s.entries),
                entry_bytes: i(s.entry_bytes),
                files_completed: s.files_completed,
                bundles_written: i(s.bundles_written),
                bytes_written: i(s.bytes_written),
                skipped: skipped(s.skipped),
                cursor: s.cursor.map(|c| CursorInfo {
                    file: c.file,
                    position: i(c.position),
                }),
                rows_done: i(s.rows_done),
                rows_total: i(s.rows_total),
                merged: s.merged.map(|m| MergeReport {
                    runs_merged: i(m.runs_merged),
                    files: i(m.files),
                    rows: i(m.rows),
                    run_bytes: i(m.run_bytes),
                    runs: i(m.runs),
                }),
            })
        })
    }

    /// The indexes of `table`, in id order.
    #[napi(ts_return_type = "Promise<IndexInfo[]>")]
    pub fn list_indexes<'env>(
        &self,
        env: &'env Env,
        table: String,
    ) -> Result<PromiseRaw<'env, Vec<IndexInfo>>> {
        let w = self.writer();
        run(env, async move {
            Ok(w?
                .list_indexes(&table)
                .await?
                .into_iter()
                .map(|i| IndexInfo {
                    kind: i.kind().to_string(),
                    name: i.name,
                    index_id: big(i.index_id),
                    fields: i.fields,
                    unique: i.unique,
                    state: i.state.to_string(),
                    reason: i.reason,
                })
                .collect())
        })
    }

    /// Drops `name` and purges it: bundles rewritten without its blobs, records reclaimed,
    /// unreferenced objects deleted.
    #[napi(ts_return_type = "Promise<VacuumReport>")]
    pub fn drop_index_purge<'env>(
        &self,
        env: &'env Env,
        table: String,
        name: String,
    ) -> Result<PromiseRaw<'env, VacuumReport>> {
        let w = self.writer();
        run(env, async move {
            Ok(vacuum_report(w?.drop_index_purge(&table, &name).await?))
        })
    }

    /// Deletes manifests beyond the newest `retainVersions`, reclaims dropped indexes, and
    /// deletes objects nothing retained references that are older than `graceSeconds`.
    #[napi(ts_return_type = "Promise<VacuumReport>")]
    pub fn vacuum<'env>(
        &self,
        env: &'env Env,
        options: Option<VacuumOptions>,
    ) -> Result<PromiseRaw<'env, VacuumReport>> {
        let retain = options
            .as_ref()
            .and_then(|o| o.retain_versions)
            .unwrap_or(1);
        let grace = options.as_ref().and_then(|o| o.grace_seconds).map_or(
            skerry_core::admin::lifecycle::DEFAULT_VACUUM_GRACE_SECONDS,
            |g| g.max(0) as u64,
        );
        let w = self.writer();
        run(env, async move {
            let r = w?
                .vacuum(skerry_core::admin::lifecycle::VacuumOptions {
                    retain_versions: retain.max(0) as u64,
                    grace_seconds: grace,
                })
                .await?;
            Ok(vacuum_report(r))
        })
    }

    /// Recomputes `index` from the live rows and compares; a clean pass records a certificate.
    #[napi(ts_return_type = "Promise<VerifyReport>")]
    pub fn verify<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
    ) -> Result<PromiseRaw<'env, VerifyReport>> {
        let w = self.writer();
        run(env, async move {
            let r = w?.verify(&table, &index).await?;
            Ok(VerifyReport {
                files: i(r.files),
                files_unindexed: i(r.files_unindexed),
                stored: i(r.stored),
                expected: i(r.expected),
                missing: i(r.missing),
                dead: i(r.dead),
                mismatched: i(r.mismatched),
                certified: r.certified,
                repairs_queued: i(r.repairs_queued),
            })
        })
    }

    /// The certificate of `index`'s last clean verify, while it stands.
    #[napi(ts_return_type = "Promise<Certificate | null>")]
    pub fn certificate<'env>(
        &self,
        env: &'env Env,
        table: String,
        index: String,
    ) -> Result<PromiseRaw<'env, Option<Certificate>>> {
        let w = self.writer();
        run(env, async move {
            let c = w?.certificate(&table, &index).await?;
            Ok(c.map(|c| Certificate {
                snapshot: i(c.snapshot),
                generation: i(c.generation),
                catalog_version: i(c.catalog_version),
                entries: i(c.entries),
            }))
        })
    }

    /// Plans a build for workers elsewhere (`docs/fanout.md`): one task per data file
    /// lacking blobs, each a JSON text to hand to `BundleBuilder.buildBundle` in any process;
    /// with `runs: true`, one run task per index whose tier rule calls for a run instead.
    /// Nothing is written.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn plan_build<'env>(
        &self,
        env: &'env Env,
        table: String,
        options: Option<PlanOptions>,
    ) -> Result<PromiseRaw<'env, Vec<String>>> {
        let w = self.writer();
        let (index, pass_entries, runs) = match options {
            Some(o) => (o.index, o.pass_entries, o.runs.unwrap_or(false)),
            None => (None, None, false),
        };
        if let Some(n) = pass_entries {
            if n.fract() != 0.0 || !(1.0..=9_007_199_254_740_991.0).contains(&n) {
                return Err(js_error(
                    env,
                    &CoreError::Invalid(
                        "planBuild: options.passEntries must be an integer from 1 to 2^53-1".into(),
                    ),
                ));
            }
        }
        let opts = skerry_core::admin::fanout::PlanOptions {
            index,
            pass_entries: pass_entries.map(|n| n as u64),
        };
        let json = |t: serde_json::Result<String>| t.map_err(|e| CoreError::Invalid(e.to_string()));
        run(env, async move {
            let w = w?;
            if runs {
                let tasks = w.plan_runs(&table, opts.index.as_deref()).await?;
                return tasks
                    .iter()
                    .map(|t| json(serde_json::to_string(t)))
                    .collect();
            }
            let tasks = w.plan_build(&table, &opts).await?;
            tasks
                .iter()
                .map(|t| json(serde_json::to_string(t)))
                .collect()
        })
    }

    /// Commits receipts (JSON texts from `buildBundle`): each is checked against the catalog
    /// and its object; valid ones are committed, stale ones refused with their reason. Then
    /// the tier steps the committed files call for are taken (unless `runs: false`); run
    /// receipts are committed as their index's new run while its runs are still the ones
    /// the task was planned against.
    #[napi(ts_return_type = "Promise<CommitReport>")]
    pub fn commit_build<'env>(
        &self,
        env: &'env Env,
        receipts: Vec<String>,
        options: Option<CommitOptions>,
    ) -> Result<PromiseRaw<'env, CommitReport>> {
        let w = self.writer();
        let take_runs = options.and_then(|o| o.runs).unwrap_or(true);
        run(env, async move {
            let mut files = Vec::new();
            let mut runs = Vec::new();
            for (i, r) in receipts.iter().enumerate() {
                let bad = |e: serde_json::Error| {
                    CoreError::Invalid(format!("commitBuild: receipts[{i}] is not a receipt: {e}"))
                };
                if is_run(r) {
                    runs.push(serde_json::from_str(r).map_err(bad)?);
                } else {
                    files.push(serde_json::from_str(r).map_err(bad)?);
                }
            }
            let w = w?;
            // A commit of run receipts alone takes no further step (it is the step).
            let mut r = if files.is_empty() && !runs.is_empty() {
                skerry_core::admin::fanout::CommitReport::default()
            } else {
                w.commit_build_with(&files, take_runs).await?
            };
            let done = w.commit_runs(&runs).await?;
            r.refused.extend(done.refused);
            let run_bundles = done.committed;
            let refused = |v: Vec<skerry_core::admin::fanout::Refused>| {
                v.into_iter()
                    .map(|r| RefusedFile {
                        file: r.file,
                        reason: r.reason,
                    })
                    .collect()
            };
            Ok(CommitReport {
                committed: r.committed,
                refused: refused(r.refused),
                left: refused(r.left),
                entries: big(r.entries),
                bytes: big(r.bytes),
                transactions: r.transactions as u32,
                carried: r.carried as u32,
                runs: run_bundles,
            })
        })
    }

    /// Closes the catalog (waits for durability of everything committed); a read-only
    /// overlay has nothing to close.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let h = self.handle.clone();
        run(env, async move {
            match h {
                Handle::Writer(o) => o.close().await,
                Handle::Reader(_) => Ok(()),
            }
        })
    }
}

/// Is this task or receipt (JSON) a run's (`"kind": "run"` at its top level)? A text that
/// is not a JSON object is not: it then fails as a file's.
fn is_run(json: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| {
        v.get("kind").and_then(|k| k.as_str()) == Some(skerry_core::admin::run_tasks::RUN_KIND)
    })
}

/// Builds bundles from `planBuild`'s tasks in any process: the overlay's object store and the
/// data files, no catalog (it never fences the overlay's writer). Safe to retry: a task built
/// again writes the same bytes under the same name.
#[napi]
pub struct BundleBuilder {
    inner: Arc<skerry_core::admin::fanout::BundleBuilder>,
}

/// Opens a bundle builder for the overlay at `url` (the URL its writer opened).
#[napi]
pub fn open_bundle_builder(
    env: &Env,
    url: String,
    options: Option<OpenOptions>,
) -> Result<BundleBuilder> {
    let (storage, timeout_ms, catalogs) = match options {
        Some(o) => (o.storage, o.timeout_ms, o.catalogs),
        None => (None, None, None),
    };
    let opts = ov::OpenOptions {
        storage: storage.map(|m| m.into_iter().collect()).unwrap_or_default(),
        timeout: timeout_ms.map(|ms| std::time::Duration::from_millis(ms as u64)),
        faults: env_faults().map_err(|e| js_error(env, &e))?,
        catalogs: catalogs
            .unwrap_or_default()
            .into_iter()
            .map(catalog_access)
            .collect(),
    };
    let inner = skerry_core::admin::fanout::BundleBuilder::open(&url, opts)
        .map_err(|e| js_error(env, &e))?;
    Ok(BundleBuilder {
        inner: Arc::new(inner),
    })
}

#[napi]
impl BundleBuilder {
    /// Builds one task (a JSON text from `planBuild`): indexes the data file and writes its
    /// bundle — or, for a run task (`"kind": "run"`, from `planBuild(table, { runs: true })`),
    /// writes the index's new run; resolves to the receipt (a JSON text for `commitBuild`).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn build_bundle<'env>(
        &self,
        env: &'env Env,
        task: String,
    ) -> Result<PromiseRaw<'env, String>> {
        let b = self.inner.clone();
        run(env, async move {
            let bad = |e: serde_json::Error| {
                CoreError::Invalid(format!("buildBundle: not a build task: {e}"))
            };
            if is_run(&task) {
                let task: skerry_core::admin::run_tasks::RunTask =
                    serde_json::from_str(&task).map_err(bad)?;
                let r = b.build_run(&task).await?;
                return serde_json::to_string(&r).map_err(|e| CoreError::Invalid(e.to_string()));
            }
            let task: skerry_core::admin::fanout::BuildTask =
                serde_json::from_str(&task).map_err(bad)?;
            let r = b.build_bundle(&task).await?;
            serde_json::to_string(&r).map_err(|e| CoreError::Invalid(e.to_string()))
        })
    }
}
