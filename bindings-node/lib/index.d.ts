// Public types of the `skerry` package. The shapes come from the addon's generated
// `index.d.ts` (napi-rs); this file adds the entry points of the facade.
import type { Overlay as NativeOverlay, OpenOptions, Row } from '../index';

export type {
  BuildReport, CreateIndexOptions, Field, IndexColumn, IndexInfo, LookupResult, LookupStats,
  Candidates, LocateResult, OpenOptions, PublishReport, RangeBound, RefreshReport, RegisterOptions, Rejection, Row,
  ScanOptions, SkippedFile, TableInfo, RegisterReport, FileDeletes, DeleteReport, StepOptions,
  StepReport, CursorInfo, VacuumReport, VacuumOptions, VerifyReport, Certificate,
} from '../index';
import type { BuildReport, StepReport, VacuumReport } from '../index';

/** Stable error codes carried on `err.code`. */
export type SkerryErrorCode =
  | 'E_NOT_FOUND' | 'E_CHANGED' | 'E_INVALID_URL' | 'E_IO' | 'E_CORRUPT' | 'E_KEY_TOO_LARGE'
  | 'E_KEY' | 'E_PARQUET' | 'E_EXISTS' | 'E_INVALID' | 'E_UNSUPPORTED' | 'E_CATALOG'
  | 'E_CONFLICT' | 'E_CATALOG_FORMAT' | 'E_MANIFEST' | 'E_INDEX_NOT_READY' | 'E_DRIFT'
  | 'E_REFUSED' | 'E_CONSTRAINT' | 'E_LIMIT';

/** Every rejection from Skerry is an `Error` with a stable `code`. */
export interface SkerryError extends Error { code: SkerryErrorCode }

/** Rows fetched by position: the Arrow IPC stream and plain objects. */
export interface Fetched { ipc: Buffer; rows: Array<Record<string, unknown>> }

export type Overlay = NativeOverlay & {
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
  /** Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`, `s3://bucket/prefix`. */
  open(url: string, options?: OpenOptions): Promise<Overlay>;
};

/** A deterministic sample `orders` Parquet file (order_id, customer, amount, day). */
export declare function sampleOrdersParquet(firstId: number, rows: number, rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/** Writes rows (arrays of values, `null` = NULL) as a Parquet file with nullable columns. */
export declare function writeParquet(columns: Array<{ name: string; type: 'boolean' | 'int32' | 'int64' | 'float64' | 'string' | 'date' }>, rows: unknown[][], rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/** Moves a leading `E_CODE: ` of an error message onto `err.code`. */
export declare function withCode<E>(e: E): E;
