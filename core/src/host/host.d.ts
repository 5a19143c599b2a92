// Types of the host boundary (`skerry_core::host`), shared verbatim by the `skerry` addon and
// the `skerry-wasm` reader: every read verb takes and returns exactly these shapes on both.

/** A key value: null, boolean, number, bigint (within the 64-bit integer range), string or bytes. */
export type KeyValue = null | boolean | number | bigint | string | Uint8Array;
/** A decimal cell: the unscaled integer and the column's scale (value = unscaled × 10^-scale). */
export interface Decimal { unscaled: bigint; scale: number }
/** A range bound: a value, or an array of leading column values; inclusive by default. */
export interface RangeBound { key: KeyValue | KeyValue[]; inclusive?: boolean }
/** Options of `range`. */
export interface RangeOptions {
  reverse?: boolean;
  /** The column the bounds range over; refused (`E_REFUSED`) unless it is the column after the bounds' equality prefix. */
  column?: string;
}
/** Where a row is: its data file (relative to the table location), position, and stable id where the table has one. */
export interface RowRef { file: string; position: bigint; rowId?: bigint }
/** Why the read gate rejected an index (the file was scanned instead). */
export type RejectReason = 'missing' | 'checksum' | 'record_count' | 'future_snapshot' | 'blob_checksum'
  | 'wrong_file' | 'unsupported_format' | 'corrupt' | 'drifted';
export interface Rejection { dataFile: string; indexId?: bigint; bundlePath?: string; reason: RejectReason; message: string }
/** How a lookup was answered. */
export interface LookupStats {
  files: number; filesByIndex: number; filesByRun: number; filesScanned: number;
  filesPruned: number; rejections: Rejection[]; drifted: string[];
  indexRequests: number; indexBytes: number; dataRequests: number; dataBytes: number;
}
export interface LookupResult { rows: RowRef[]; stats: LookupStats }
export interface LocateResult { rows: RowRef[]; candidates: Array<{ file: string; rowIds: bigint[] }> }
/** A cell of a fetched row: integers beyond ±2^53 (and int64 timestamps there) are bigints. */
export type Cell = null | boolean | number | bigint | string | Uint8Array | Decimal;
export type Row = Record<string, Cell>;
/** Fetched rows: the Arrow IPC stream and the same rows as plain objects. */
export interface FetchedRows { ipc: Uint8Array; rows: Row[] }
/** Conditions on one column: a bare value is `=`, `null` is IS NULL. */
export type ColumnCondition = KeyValue | {
  eq?: KeyValue; in?: KeyValue[]; lt?: KeyValue; lte?: KeyValue; gt?: KeyValue;
  gte?: KeyValue; between?: [KeyValue, KeyValue]; isNull?: true;
};
/** Options of `query` (see docs/query.md). */
export interface QueryOptions {
  where?: Record<string, ColumnCondition>;
  /** Columns to return, in order (default: every column of a scalar type). */
  columns?: string[];
  limit?: number;
  /** Confirm files the index answers "no rows" for with a HEAD request. */
  verify?: boolean;
  /**
   * An Iceberg-backed table: answer at this upstream snapshot id (a bigint, or its decimal
   * string), one the overlay synced and published. `E_NOT_FOUND` when it never was, or its
   * overlay version was vacuumed.
   */
  snapshot?: bigint | string;
}
export interface QueryStats {
  index?: string;
  /** The chosen index's kind: what answered the files in `filesByIndex`. */
  indexKind?: IndexKind;
  indexColumns: string[]; keys: number; residual: string[];
  files: number; filesByIndex: number; filesScanned: number; filesPruned: number; filesRejected: number;
  /** Of `filesByIndex`, the files a `search` answered from the index's table run. */
  filesByRun: number;
  rejections: Rejection[]; drifted: string[];
  rowGroups: number; rowGroupsPruned: number; rowsPrunedByPages: number; rowsScanned: number;
  requests: number; bytes: number; cacheHits: number;
  indexRequests: number; indexBytes: number; dataRequests: number; dataBytes: number; elapsedMs: number;
  /** Why the usable index was not used: a scan was expected to read less. */
  indexDeclined?: string;
}
/** Read cache counters of one tier. */
export interface CacheTier { hits: number; misses: number; entries: number; bytes: number }
/** A reader's counters (`metrics()` of the wasm reader; the addon returns Prometheus text). */
export interface Metrics {
  reads: Record<'lookup' | 'lookupMany' | 'range' | 'nulls' | 'fetchRows' | 'query' | 'count' | 'search', number>;
  requests: { index: number; data: number };
  bytes: { index: number; data: number };
  cache: { budget: number; directory: CacheTier; metadata: CacheTier; block: CacheTier; dictionary: CacheTier };
  files: { index: number; scanned: number; pruned: number; rejected: number; drifted: number };
  /** Rejected indexes by reason code. */
  rejections: Record<string, number>;
  /** Queries that scanned because the index would have read more. */
  indexDeclined: number;
  repairs: { queued: number; drained: number };
  builds: number;
  buildProgress: { done: number; total: number };
  /** Per-file index blobs written: derived from their data file's rows (columns read, text
   * tokenized, vectors coded), or carried over an upstream compaction from the blobs of the
   * files the rows came from (nothing of the rows read). The read-only reader writes none. */
  blobs: { derived: number; carried: number };
}
/** One data file in an `explain` plan. */
export interface FilePlan {
  file: string;
  /** `run`/`index`: answered by the index; `prune`: skipped by its key bounds; `scan`. */
  action: 'run' | 'index' | 'prune' | 'scan';
  /** Why it is pruned or scanned (a rejected index names the read gate's reason code). */
  reason?: string;
  /** Whether its footer and page index are in the reader's cache. */
  metadataCached: boolean;
}
/** The plan of a query (`explain`), computed without reading data or index blocks. */
export interface Explain {
  index?: string;
  indexKind?: IndexKind;
  /** Why that index, or why none (e.g. a scan is expected to read less). */
  reason: string;
  indexColumns: string[]; keys: number; residual: string[];
  /** Upper estimate of the rows the index names, from its directories. */
  estimatedRows?: number;
  files: FilePlan[];
  /** Requests to expect (overlay, data files) and sequential round trips, given what is cached. */
  indexRequests: number; dataRequests: number; roundTrips: number;
}
export interface QueryResult {
  /** Arrow IPC stream of the requested columns. */
  ipc: Uint8Array;
  rows: Row[];
  refs: RowRef[];
  stats: QueryStats;
  /** One per rejected index (also emitted as `warning` events). */
  warnings: IndexWarning[];
}
/** The `warning` event: an index was rejected during a query (the file was scanned). */
export interface IndexWarning { table: string; index?: string; file: string; reason: RejectReason; message: string }
/** Options of `count`: a query's `where`, `verify` and `snapshot` (`columns` and `limit` do not apply). */
export interface CountOptions {
  where?: Record<string, ColumnCondition>;
  /** Confirm every file counted from an index (zero or not) with a HEAD request; without, the published manifest's file versions are trusted and no data file is touched. */
  verify?: boolean;
  snapshot?: bigint | string;
}
/** The answer of `count`: the live rows matching, and how they were counted (`filesByIndex`: from indexes alone). */
export interface CountResult { count: number; stats: QueryStats; warnings: IndexWarning[] }
/** What an index builds per data file: `ordered` (sorted keys → positions), `bitmap` (distinct values → position bitmaps), `bloom` (a filter that prunes files), `fulltext` (terms → rows, for `search`) or `vector` (4-bit codes partition by partition against a codebook trained on the table, for `nearest`). */
export type IndexKind = 'ordered' | 'bitmap' | 'bloom' | 'fulltext' | 'vector';
/** Options of `createIndex` (each checked by the kind it belongs to: another kind's option is `E_INVALID`). */
export interface CreateIndexOptions {
  /** Refuse duplicate keys (ordered indexes only). */
  unique?: boolean;
  /**
   * `ordered` (default: equality, IN, ranges, IS NULL on any key) | `bitmap` (equality, IN, IS NULL and counts on
   * low-cardinality columns) | `bloom` (prunes files for equality and IN on high-cardinality columns) | `fulltext`
   * (BM25 `search` over one string column) | `vector` (`nearest` over one vector column).
   */
  kind?: IndexKind;
  /** A bitmap index's limit on distinct values per data file (default 1000, at most 65536); a file over it fails the build with `E_LIMIT` and poisons the index. */
  maxCardinality?: number;
  /** A bloom index's false-positive probability per file (default 0.01, 0.000001..=0.5). */
  fpp?: number;
  /** A fulltext index's analyzer (default `simple`). */
  tokenizer?: Tokenizer;
  /** Whether a fulltext index keeps word positions for phrase queries (default true). */
  positions?: boolean;
  /** A vector index's metric (default `l2`). */
  metric?: Metric;
  /** Kept for definitions written before partition-major vector indexes (2..=64): checked, recorded, without effect. */
  m?: number;
  /** Kept for definitions written before partition-major vector indexes (8..=2000): checked, recorded, without effect. */
  efConstruction?: number;
}
/** A vector index's distance: `l2` (squared Euclidean), `cosine` (1 − cos) or `dot` (−a·b); smaller is nearer. */
export type Metric = 'l2' | 'cosine' | 'dot';
/** Options of `nearest`. */
export interface NearestOptions {
  /** The query vector: finite numbers, as many as the column's vectors have (stored as float32). */
  vector: number[];
  /** Results wanted (default 10, at most 10000). */
  k?: number;
  /** Partitions probed, nearest centroid first (default 48, at most 65536): more is slower and nearer to exact. A `where` keeping a share s of a file probes that file's nprobe / s nearest. */
  nprobe?: number;
  /** Candidates re-ranked by their exact distance, over all files (default 50, at least `k`, at most 10000). */
  ef?: number;
  /** The vector column (default: the table's only vector index's). */
  column?: string;
  /** The vector index (default: the one on `column`, or the table's only one). */
  index?: string;
  /** A pre-filter: only rows matching it are results (k rows are returned when k rows match). */
  where?: Record<string, ColumnCondition>;
  /** Columns of the results, in order (default: every column of a scalar type). */
  columns?: string[];
  /** Confirm every file answered from its blob with a HEAD request. */
  verify?: boolean;
  snapshot?: bigint | string;
}
/** The answer of `nearest`: rows nearest first (ties: the smaller row id), with their exact distances. */
export interface NearestResult {
  ipc: Uint8Array;
  rows: Row[];
  refs: RowRef[];
  distances: number[];
  metric: Metric;
  /** `rounds`: sequential rounds of index reads that went to the store (codebook and directories, partitions, raw vectors); `evaluated`: vectors compared by their codes. */
  stats: QueryStats & { rounds: number; evaluated: number };
  warnings: IndexWarning[];
}
/** A fulltext index's analyzer: `simple` (Unicode words, lowercased) or `english` (also drops English stop words and stems). */
export type Tokenizer = 'simple' | 'english';
/** Options of `search`. */
export interface SearchOptions {
  /** The text searched for, analyzed as the index analyzes its column. */
  query: string;
  /** The query is a phrase: its words at consecutive positions (stop words keep their place). */
  phrase?: boolean;
  /** `or` (default): rows holding any term; `and`: rows holding every term. */
  operator?: 'or' | 'and';
  /** Results wanted (default 10, at most 10000). */
  k?: number;
  /** The fulltext index (default: the table's only one). */
  index?: string;
  /** A pre-filter: only rows matching it are scored. */
  where?: Record<string, ColumnCondition>;
  /** Columns of the results, in order (default: every column of a scalar type). */
  columns?: string[];
  /** Confirm every file answered from its blob with a HEAD request. */
  verify?: boolean;
  snapshot?: bigint | string;
  /** Hybrid search: the rows nearest to this vector (to depth `k`) are fused with the BM25 ranking (to depth `k`) by reciprocal rank fusion, score = Σ 1/(60 + rank); ties by row id. */
  vector?: number[];
  /** The vector index of a hybrid search (default: the one on `vectorColumn`, or the table's only one). */
  vectorIndex?: string;
  vectorColumn?: string;
  /** Candidates re-ranked exactly for the vector ranking (as `nearest`'s `ef`). */
  ef?: number;
}
/** How each result of a hybrid search ranked in the two rankings fused (`null`: not in that ranking's first `k`). */
export interface HybridRanks {
  /** The rank constant (60). */
  rrfK: number;
  textRanks: (number | null)[];
  textScores: (number | null)[];
  vectorRanks: (number | null)[];
  distances: (number | null)[];
  metric: Metric;
  /** The vector search's own statistics (`stats` are the BM25 search's, with the whole call's I/O). */
  vectorStats: QueryStats & { rounds: number; evaluated: number };
}
/** The table-wide statistics a search scored with (BM25, k1 = 1.2, b = 0.75). */
export interface Bm25Stats {
  /** Rows with a non-NULL value (deleted rows included, as in Lucene). */
  docs: number;
  tokens: number;
  avgLen: number;
  /** The query's distinct analyzed terms and their document frequencies. */
  terms: { term: string; df: number }[];
}
/** The answer of `search`: rows best first (ties: the smaller row id; file order, then position without one), with their scores. */
export interface SearchResult {
  ipc: Uint8Array;
  rows: Row[];
  refs: RowRef[];
  /** BM25 scores; in a hybrid search the fused scores. */
  scores: number[];
  bm25: Bm25Stats;
  /** `rounds`: sequential rounds of index reads the slowest file needed. */
  stats: QueryStats & { rounds: number };
  warnings: IndexWarning[];
  /** Present for a hybrid search (`vector` given). */
  hybrid?: HybridRanks;
}
/** Lifecycle state of an index. */
export type IndexState = 'building' | 'ready' | 'maintaining' | 'poisoned';
/** Every `err.code` Skerry raises. */
export type ErrorCode = 'E_NOT_FOUND' | 'E_CHANGED' | 'E_INVALID_URL' | 'E_TIMEOUT' | 'E_ABORTED' | 'E_IO'
  | 'E_CORRUPT' | 'E_KEY_TOO_LARGE' | 'E_KEY' | 'E_PARQUET' | 'E_EXISTS' | 'E_INVALID' | 'E_UNSUPPORTED'
  | 'E_CATALOG' | 'E_CONFLICT' | 'E_CATALOG_FORMAT' | 'E_MANIFEST' | 'E_INDEX_NOT_READY' | 'E_DRIFT'
  | 'E_REFUSED' | 'E_CONSTRAINT' | 'E_LIMIT' | 'E_READ_ONLY' | 'E_ICEBERG' | 'E_AUTH'
  /** skerry-wasm's web entry: a reader opened before `init()` / `initSync()`. */
  | 'E_NOT_INITIALISED';
/** A Skerry error: `code` is stable; `retryable` says whether the same call may succeed when retried unchanged. */
export interface SkerryError extends Error { code: ErrorCode; retryable: boolean }

/**
 * The read verbs, as both surfaces expose them: the addon's `Overlay` and the wasm reader's
 * `OverlayReader` (each binding's methods come from `skerry_core::with_read_verbs!`, the one
 * list of their names and arguments).
 */
export interface ReadVerbs {
  /**
   * Rows whose indexed columns equal `key` (one value per index column, or a single value
   * for a one-column index), in the index's order.
   */
  lookup(table: string, index: string, key: KeyValue | KeyValue[]): Promise<LookupResult>;
  /** `index IN (keys)`: complete keys, deduplicated, in key order; keys with NULL match nothing. */
  lookupMany(table: string, index: string, keys: Array<KeyValue | KeyValue[]>): Promise<LookupResult>;
  /**
   * Rows between `lower` and `upper`, each `{ key, inclusive = true }` compared as a SQL row
   * (`(a, b) >= (5, 10)`) or `null` for unbounded, in the index's order (or reversed). Shared
   * leading values are an equality prefix; ranging over columns of mixed directions is refused
   * (`E_REFUSED`).
   */
  range(table: string, index: string, lower: RangeBound | null | undefined, upper: RangeBound | null | undefined, options?: RangeOptions): Promise<LookupResult>;
  /**
   * IS NULL over a leading run of columns: `null` = IS NULL, a value = equality, `undefined` =
   * unconstrained (only after the last constrained column).
   */
  nulls(table: string, index: string, prefix: Array<KeyValue | undefined>, options?: { reverse?: boolean }): Promise<LookupResult>;
  /**
   * Where rows with stable ids `rowIds` are; files without a usable row-id summary list the
   * ids that may be in them as candidates.
   */
  locate(table: string, rowIds: Array<bigint | number>): Promise<LocateResult>;
  /**
   * Fetches `columns` of `rows` (as lookups return them) in the order given, reading only the
   * pages that hold them, at the data files' recorded versions: `{ ipc, rows }`, the Arrow IPC
   * stream and the same rows as plain objects.
   */
  fetchRows(table: string, rows: RowRef[], columns: string[]): Promise<FetchedRows>;
  /**
   * Answers `where` over `table` — indexes where the read gate accepts them, Parquet scans
   * (statistics, page index) where not, delete masks applied — and fetches `columns` of the
   * matching rows (first `limit` in file order, then position). Every rejected index is a
   * `warning` event.
   */
  query(table: string, options?: QueryOptions): Promise<QueryResult>;
  /**
   * How many live rows of `table` match `where`: from indexes alone when every `where` column
   * has a ready one-column index (bitmaps intersect), by scanning otherwise — the same count
   * either way.
   */
  count(table: string, options?: CountOptions): Promise<CountResult>;
  /**
   * BM25 top-k of `table`'s fulltext index: `{ ipc, rows, refs, scores, bm25, stats, warnings }`,
   * best first. Files without an accepted blob are scanned with the same analyzer and
   * statistics; `where` is a pre-filter; deleted rows never score.
   */
  search(table: string, options: SearchOptions): Promise<SearchResult>;
  /**
   * The `k` rows nearest to a vector through `table`'s vector index: `{ ipc, rows, refs,
   * distances, metric, stats, warnings }`, nearest first. Files without an accepted blob are
   * scanned exactly; `where` is a pre-filter; deleted rows are never results.
   */
  nearest(table: string, options: NearestOptions): Promise<NearestResult>;
  /**
   * The plan `query(table, options)` would follow, file by file, without reading data or index
   * blocks: the index and why (or why none), files answered by the index, pruned or scanned
   * (and why), and the requests and round trips to expect.
   */
  explain(table: string, options?: QueryOptions): Promise<Explain>;
}
