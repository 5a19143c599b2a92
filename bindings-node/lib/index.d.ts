// Public types of the `skerry` package. The shapes come from the addon's generated
// `index.d.ts` (napi-rs); this file adds the entry points of the facade.
import type { Overlay as NativeOverlay, OpenOptions, Row } from '../index';

export type {
  BuildReport, CreateIndexOptions, Field, IndexColumn, IndexInfo, LookupResult, LookupStats,
  Candidates, LocateResult, OpenOptions, PublishReport, RangeBound, RefreshReport, RegisterOptions, Rejection, Row,
  ScanOptions, SkippedFile, TableInfo, RegisterReport, FileDeletes, DeleteReport, StepOptions,
  StepReport, CursorInfo, VacuumReport, VacuumOptions, VerifyReport, Certificate, QueryStats,
  Repair, RefreshOptions,
} from '../index';
import type { QueryStats } from '../index';
import type { BuildReport, StepReport, VacuumReport } from '../index';

/** Stable error codes carried on `err.code`. */
export type SkerryErrorCode =
  | 'E_NOT_FOUND' | 'E_CHANGED' | 'E_INVALID_URL' | 'E_IO' | 'E_CORRUPT' | 'E_KEY_TOO_LARGE'
  | 'E_KEY' | 'E_PARQUET' | 'E_EXISTS' | 'E_INVALID' | 'E_UNSUPPORTED' | 'E_CATALOG'
  | 'E_CONFLICT' | 'E_CATALOG_FORMAT' | 'E_MANIFEST' | 'E_INDEX_NOT_READY' | 'E_DRIFT'
  | 'E_REFUSED' | 'E_CONSTRAINT' | 'E_LIMIT' | 'E_TIMEOUT' | 'E_ABORTED' | 'E_READ_ONLY';

/** Every rejection from Skerry is an `Error` with a stable `code`. */
export interface SkerryError extends Error { code: SkerryErrorCode }

/** Rows fetched by position: the Arrow IPC stream and plain objects. */
export interface Fetched { ipc: Buffer; rows: Array<Record<string, unknown>> }

/** A key value: null, boolean, number, bigint, string or bytes. */
export type QueryValue = null | boolean | number | bigint | string | Uint8Array;

/** Conditions on one column: a bare value is `=`, `null` is IS NULL. */
export type ColumnCondition = QueryValue | {
  eq?: QueryValue; in?: QueryValue[]; lt?: QueryValue; lte?: QueryValue; gt?: QueryValue;
  gte?: QueryValue; between?: [QueryValue, QueryValue]; isNull?: true;
};

/** Options of `Overlay.query` (and `OverlayReader.query` in `skerry-wasm`). */
export interface QueryOptions {
  /** ANDed conditions per column (omitted: every row). */
  where?: Record<string, ColumnCondition>;
  /** Columns to return, in order (default: every scalar column; `[]`: none, only refs). */
  columns?: string[];
  /** At most this many rows: the first in file order, then position. */
  limit?: number;
  /** HEAD every file an index answers "no rows" for, to catch out-of-band rewrites. */
  verify?: boolean;
}

/** What `query` returns. */
export interface QueryResult {
  /** Arrow IPC stream of the requested columns (read it with `apache-arrow`'s `tableFromIPC`). */
  ipc: Buffer;
  /** The same rows as plain objects. */
  rows: Array<Record<string, unknown>>;
  /** Where each row is. */
  refs: Row[];
  stats: QueryStats;
}

/** The `warning` event: an index was rejected during a query (the file was scanned). */
export interface IndexWarning { table: string; index?: string; file: string; reason: string; message: string }

export type Overlay = NativeOverlay & {
  /**
   * Answers `where` over `table` with indexes where the read gate accepts them and Parquet
   * scans where not; delete masks applied; rows fetched by page.
   */
  query(table: string, options?: QueryOptions): Promise<QueryResult>;
  on(event: 'warning', listener: (w: IndexWarning) => void): Overlay;
  once(event: 'warning', listener: (w: IndexWarning) => void): Overlay;
  off(event: 'warning', listener: (w: IndexWarning) => void): Overlay;
  /** Fetches `columns` of `rows` (as lookups return them), in order, reading only their pages. */
  fetchRows(table: string, rows: Row[], columns: string[]): Promise<Fetched>;
  /**
   * Builds `table`'s indexes (or only `index`) in bounded steps, calling `onProgress` after
   * each; steps that lost a race (`E_CONFLICT`) are retried from the cursor.
   */
  build(table: string, options?: BuildOptions): Promise<BuildReport>;
  /** Drops an index (returns its id); with `{ purge: true }` also purges it. */
  dropIndex(table: string, name: string): Promise<bigint>;
  dropIndex(table: string, name: string, options: { purge: true }): Promise<VacuumReport>;
};

/** Options of `Overlay.build`. */
export interface BuildOptions {
  index?: string;
  onProgress?: (step: StepReport) => void;
  maxEntries?: number;
  maxBytes?: number;
}
export declare const Overlay: {
  /**
   * Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`,
   * `s3://bucket/prefix`. With `{ readOnly: true }`: a read-only view of the newest published
   * version that never opens the catalog, so it never fences the writer (writer verbs fail
   * `E_READ_ONLY`; `refresh()` moves to the newest published version). `timeoutMs` bounds
   * every read of overlay objects and data files (`E_TIMEOUT`).
   */
  open(url: string, options?: OpenOptions): Promise<Overlay>;
};

/** A deterministic sample `orders` Parquet file (order_id, customer, amount, day). */
export declare function sampleOrdersParquet(firstId: number, rows: number, rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/** Writes rows (arrays of values, `null` = NULL) as a Parquet file with nullable columns. */
export declare function writeParquet(columns: Array<{ name: string; type: 'boolean' | 'int32' | 'int64' | 'float64' | 'string' | 'date' }>, rows: unknown[][], rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/** Moves a leading `E_CODE: ` of an error message onto `err.code`. */
export declare function withCode<E>(e: E): E;
