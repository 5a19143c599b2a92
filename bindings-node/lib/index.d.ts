// Public types of the `skerry` package. The shapes come from the addon's generated
// `index.d.ts` (napi-rs); this file adds the entry points of the facade.
import type { Overlay as NativeOverlay, OpenOptions, IndexWarning, BuildProgress, ReadVerbs } from '../index';

export type {
  BuildReport, BuildProgress, CreateIndexOptions, Field, IndexColumn, IndexInfo, LookupResult, LookupStats,
  LocateResult, OpenOptions, PublishReport, RangeBound, RangeOptions, RefreshReport, RegisterOptions, Rejection, RowRef,
  SkippedFile, TableInfo, RegisterReport, FileDeletes, DeleteReport, SyncOptions, SyncReport, StepOptions,
  StepReport, CursorInfo, VacuumReport, VacuumOptions, VerifyReport, Certificate, QueryStats,
  Repair, RefreshOptions, KeyValue, Decimal, Cell, Row, FetchedRows, ColumnCondition, QueryOptions,
  QueryResult, IndexWarning, IndexState, RejectReason, ErrorCode, SkerryError, Explain, FilePlan,
  Metrics, CacheTier, CountOptions, CountResult, IndexKind, SearchOptions, SearchResult, Bm25Stats, Tokenizer,
  Metric, NearestOptions, NearestResult, PlanOptions, CommitReport, RefusedFile, ReadVerbs,
  CatalogOptions, MountSource,
} from '../index';
import type { BuildReport, StepReport, VacuumReport } from '../index';

/** @deprecated use `ErrorCode`. */
export type SkerryErrorCode = import('../index').ErrorCode;

/** The addon's overlay: its native methods, the read verbs (`ReadVerbs`), and the facade's. */
export type Overlay = NativeOverlay & ReadVerbs & {
  on(event: 'warning', listener: (w: IndexWarning | SyncWarning) => void): Overlay;
  once(event: 'warning', listener: (w: IndexWarning | SyncWarning) => void): Overlay;
  off(event: 'warning', listener: (w: IndexWarning | SyncWarning) => void): Overlay;
  on(event: 'sync', listener: (e: SyncEvent) => void): Overlay;
  once(event: 'sync', listener: (e: SyncEvent) => void): Overlay;
  off(event: 'sync', listener: (e: SyncEvent) => void): Overlay;
  on(event: 'progress', listener: (p: SyncProgress) => void): Overlay;
  once(event: 'progress', listener: (p: SyncProgress) => void): Overlay;
  off(event: 'progress', listener: (p: SyncProgress) => void): Overlay;
  /**
   * Syncs the mounted Iceberg table `name` in the background: at once, then `intervalMs`
   * (default 60 s) after each run ends; publishes when a run changed something (unless
   * `publish: false`). Each run emits `sync`; a poisoned index or a failed run emits
   * `warning` (the loop goes on). Throws `E_EXISTS` when `name` is already syncing. Timers do
   * not keep the process alive; `close()` stops every loop.
   */
  startSync(name: string, options?: { intervalMs?: number; publish?: boolean; catchUpSteps?: number; maxEntries?: number; maxBytes?: number }): void;
  /** Stops `name`'s loop; resolves after a run in flight ends (false when none ran). */
  stopSync(name: string): Promise<boolean>;
  /**
   * Builds `table`'s indexes: by default each data file is read once and gets one new bundle
   * generation for all its indexes (`onProgress` sees a `BuildProgress` after every commit).
   * With `index`, `maxEntries` or `maxBytes`: that index (or each in turn) in bounded,
   * resumable steps, `onProgress` seeing each `StepReport`. Steps that lost a race
   * (`E_CONFLICT`) are retried from the cursor.
   */
  build(table: string, options?: BuildOptions): Promise<BuildReport>;
  /** Drops an index (returns its id); with `{ purge: true }` also purges it. */
  dropIndex(table: string, name: string): Promise<bigint>;
  dropIndex(table: string, name: string, options: { purge: true }): Promise<VacuumReport>;
};

/** A run of a background sync (`startSync`). */
export interface SyncEvent {
  table: string;
  report: import('../index').SyncReport;
  /** The publish that followed, when the run changed something or coverage moved. */
  published: import('../index').PublishReport | null;
  /** Indexes still catching up deferred work (the next run follows at once). */
  pending: string[];
}

/** One catch-up build step of a background sync (`startSync`'s `progress` event). */
export interface SyncProgress {
  table: string;
  index: string;
  step: number;
  /** Entries this step derived (at most its `maxEntries`). */
  entries: number;
  rowsDone: number;
  rowsTotal: number;
  state: import('../index').IndexState;
  /** Nothing left to index or merge for this index. */
  done: boolean;
  /** A step of the merge phase (every row indexed): the run it wrote; `null` otherwise. */
  merged: import('../index').MergeReport | null;
}

/** A background sync's problem: an index it poisoned, or a run that failed. */
export interface SyncWarning {
  table: string;
  reason: 'poisoned' | 'sync-failed';
  index?: string;
  code?: string;
  message: string;
}

/** Options of `Overlay.build`. */
export interface BuildOptions {
  index?: string;
  /** A `BuildProgress` per commit of a whole build; a `StepReport` per step of a stepped one. */
  onProgress?: (progress: BuildProgress | StepReport) => void;
  maxEntries?: number;
  maxBytes?: number;
}
export declare const Overlay: {
  /**
   * Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`,
   * `s3://bucket/prefix`. With `{ readOnly: true }`: a read-only view of the newest published
   * version that never opens the catalog, so it never fences the writer (writer verbs fail
   * `E_READ_ONLY`; `refresh()` moves to the newest published version). `timeoutMs` bounds
   * every read of overlay objects and data files (`E_TIMEOUT`). `manifestPartBytes` (writers):
   * an index's per-file lists larger than this are published as a separate manifest part,
   * read by readers on first use (default 1 MiB; 0 splits every index).
   */
  open(url: string, options?: OpenOptions): Promise<Overlay>;
};

/**
 * Builds bundles from `planBuild`'s tasks in any process (a job system's worker): writes to
 * the overlay's object store and reads data files, never opens the catalog, so any number of
 * builders run beside the one writer that plans (`overlay.planBuild`) and commits
 * (`overlay.commitBuild`). See `docs/fanout.md`.
 */
export declare class BundleBuilder {
  private constructor();
  /** A builder for the overlay at `url` (the URL its writer opened). */
  static open(url: string, options?: { storage?: Record<string, string>; timeoutMs?: number }): BundleBuilder;
  /**
   * Builds one task (a JSON text from `planBuild`): indexes its data file, writes the file's
   * new bundle — or, for a run task (`planBuild(table, { runs: true })`), the index's new run
   * — and resolves to the receipt (a JSON text for `commitBuild`). Safe to retry.
   */
  buildBundle(task: string): Promise<string>;
}

/** A deterministic sample `orders` Parquet file (order_id, customer, amount, day). */
export declare function sampleOrdersParquet(firstId: number, rows: number, rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/** Writes rows (arrays of values, `null` = NULL) as a Parquet file with nullable columns. */
export declare function writeParquet(columns: Array<{ name: string; type: 'boolean' | 'int32' | 'int64' | 'float64' | 'string' | 'date' }>, rows: unknown[][], rowGroupRows?: number, codec?: 'snappy' | 'lz4' | 'zstd' | 'none'): Buffer;

/**
 * Not for production: faults injected so far in this process by the `SKERRY_FAULTS` fault
 * plan (`rate=0.01,seed=7,calls=put+get,prefixes=bundles/+catalog/`), which wraps the store
 * of every overlay and bundle builder the process opens. 0 without it. See the soak
 * (`tests/soak/`) and `docs/guarantees.md`.
 */
export declare function faultsInjected(): number;
