'use strict';
// The public `skerry` API: the generated addon loader, argument checks for the writer verbs,
// events and the stepped build. Read verbs are parsed and answered by the addon through
// skerry-core's host boundary (the same code as skerry-wasm); every Skerry error arrives
// with `err.code` and `err.retryable` already set by the addon.
const native = require('../index.js');

// Answers' row objects are built here from the addon's flat values (row-major): one object
// literal per row, from a function compiled once per column list, which V8 builds far faster
// than napi sets properties one by one (decision 83). A column named `__proto__` is an own
// property, never the prototype.
const rowMakers = new Map();
function rowMaker(columns) {
  const key = JSON.stringify(columns);
  let make = rowMakers.get(key);
  if (make) return make;
  try {
    const props = columns.map((c, j) => `${c === '__proto__' ? `[${JSON.stringify(c)}]` : JSON.stringify(c)}: v[i + ${j}]`);
    make = new Function('v', 'i', `'use strict'; return { ${props.join(', ')} };`);
  } catch {
    // Code generation from strings disallowed (--disallow-code-generation-from-strings).
    make = (v, i) => {
      const o = {};
      columns.forEach((c, j) => { Object.defineProperty(o, c, { value: v[i + j], writable: true, enumerable: true, configurable: true }); });
      return o;
    };
  }
  if (rowMakers.size >= 256) rowMakers.clear();
  rowMakers.set(key, make);
  return make;
}
function makeRows(columns, values, count) {
  const make = rowMaker(columns);
  const rows = new Array(count);
  for (let r = 0, i = 0; r < count; r++, i += columns.length) rows[r] = make(values, i);
  return rows;
}
native.setRowFactory(makeRows);

// napi-rs statuses of a JavaScript value the addon could not convert (a writer verb's typed
// argument): a wrong argument type.
const NAPI_INVALID = new Set(['InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected',
  'FunctionExpected', 'NumberExpected', 'BooleanExpected', 'ArrayExpected',
  'BigintExpected', 'DateExpected', 'ArrayBufferExpected', 'DetachableArraybufferExpected']);

function napiInvalid(e) {
  if (e instanceof Error && NAPI_INVALID.has(e.code)) {
    e.message = `invalid argument (${e.code}): ${e.message}`;
    e.code = 'E_INVALID';
    e.retryable = false;
  }
  return e;
}

function invalid(message) {
  const e = new Error(message);
  e.code = 'E_INVALID';
  e.retryable = false;
  return e;
}

// A row position: a bigint from 0, or a number that is a non-negative safe integer (never a
// fraction, NaN or an infinity: those are E_INVALID, not rounded).
function isPosition(p) {
  return (typeof p === 'bigint' && p >= 0n) || (Number.isSafeInteger(p) && p >= 0);
}

// Argument checks, per public method: every wrong type is `E_INVALID` naming the argument,
// before the addon sees it. A spec is a type name, `?` for optional, or an object of
// option specs.
const is = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number',
  boolean: (v) => typeof v === 'boolean',
  bigint: (v) => typeof v === 'bigint',
  count: (v) => typeof v === 'number' && Number.isInteger(v) && v >= 0,
  function: (v) => typeof v === 'function',
  array: (v) => Array.isArray(v),
  object: (v) => v !== null && typeof v === 'object' && !Array.isArray(v),
  any: () => true,
  catalog: (v) => isCatalog(v),
  'string|catalogSource': (v) => typeof v === 'string' || (v !== null && typeof v === 'object' && !Array.isArray(v) && isCatalog(v.catalog)),
  catalogs: (v) => Array.isArray(v) && v.every(isCatalog),
  'string[]': (v) => Array.isArray(v) && v.every((x) => typeof x === 'string'),
  'bigint[]': (v) => Array.isArray(v) && v.every((x) => typeof x === 'bigint'),
  'string|column': (v) => typeof v === 'string' || (v !== null && typeof v === 'object'),
  bound: (v) => v === null || v === undefined || (typeof v === 'object' && !Array.isArray(v)
    && 'key' in v && (v.inclusive === undefined || typeof v.inclusive === 'boolean')),
  rows: (v) => Array.isArray(v) && v.every((r) => r !== null && typeof r === 'object'
    && typeof r.file === 'string' && typeof r.position === 'bigint'
    && (r.rowId === undefined || r.rowId === null || typeof r.rowId === 'bigint')),
  deletes: (v) => Array.isArray(v) && v.every((d) => d !== null && typeof d === 'object'
    && typeof d.file === 'string' && Array.isArray(d.positions) && d.positions.every(isPosition)),
};
// A REST catalog table and this process's credentials (`CatalogOptions`).
function isCatalog(c) {
  const str = (x) => x === undefined || typeof x === 'string';
  return c !== null && typeof c === 'object' && !Array.isArray(c)
    && typeof c.uri === 'string' && typeof c.table === 'string'
    && (typeof c.namespace === 'string' || (Array.isArray(c.namespace) && c.namespace.every((x) => typeof x === 'string')))
    && str(c.warehouse) && str(c.credential) && str(c.token) && str(c.scope) && str(c.oauth2ServerUri)
    && (c.headers === undefined || (c.headers !== null && typeof c.headers === 'object' && !Array.isArray(c.headers)
      && Object.values(c.headers).every((x) => typeof x === 'string')));
}
const CATALOG = '{ uri: string, namespace: string | string[], table: string, warehouse?, credential?, token?, scope?, headers?, oauth2ServerUri? }';
const WHAT = {
  catalog: CATALOG, catalogs: `an array of ${CATALOG}`, 'string|catalogSource': `a metadata URL or { catalog: ${CATALOG} }`,
  object: 'an object', 'string[]': 'an array of strings', 'bigint[]': 'an array of bigints', bound: '{ key, inclusive?: boolean } or null',
  rows: 'an array of { file: string, position: bigint, rowId?: bigint }', count: 'a non-negative integer',
  deletes: 'an array of { file: string, positions: (bigint | integer)[] } with positions from 0', 'string|column': 'a name or { name, direction, nulls }',
};
function check(method, name, spec, v) {
  const optional = typeof spec === 'string' && spec.endsWith('?');
  if (v === undefined && (optional || typeof spec === 'object')) return;
  if (typeof spec === 'object') {
    if (!is.object(v)) throw invalid(`${method}: ${name} must be an object`);
    for (const [k, sub] of Object.entries(spec)) check(method, `${name}.${k}`, `${sub.replace('?', '')}?`, v[k]);
    return;
  }
  const type = spec.replace('?', '');
  if (!is[type](v)) throw invalid(`${method}: ${name} must be ${WHAT[type] || `a ${type}`}`);
}
const SIGNATURES = {
  registerParquetTable: [['name', 'string'], ['location', 'string'], ['options', { files: 'string[]', prefix: 'string' }]],
  mountIceberg: [['name', 'string'], ['source', 'string|catalogSource']],
  connectCatalog: [['catalog', 'catalog']],
  syncIceberg: [['name', 'string'], ['options', { metadataUrl: 'string' }]],
  startSync: [['name', 'string'], ['options', { intervalMs: 'count', publish: 'boolean', catchUpSteps: 'count', maxEntries: 'count', maxBytes: 'count' }]],
  stopSync: [['name', 'string']],
  createIndex: [['table', 'string'], ['name', 'string'], ['columns', 'array'], ['options', 'object?']],
  dropIndex: [['table', 'string'], ['name', 'string'], ['options', { purge: 'boolean' }]],
  build: [['table', 'string'], ['options', { index: 'string', onProgress: 'function', maxEntries: 'count', maxBytes: 'count' }]],
  publish: [],
  refresh: [['table', 'string?'], ['options', { deep: 'boolean' }]],
  repairs: [['table', 'string'], ['index', 'string']],
  setScanOnly: [['on', 'boolean']],
  registerFiles: [['table', 'string'], ['files', 'string[]']],
  registerRewrite: [['table', 'string'], ['options', { removed: 'string[]', added: 'string[]', rowIdColumn: 'string' }]],
  registerDeletes: [['table', 'string'], ['deletes', 'deletes']],
  buildStep: [['table', 'string'], ['index', 'string'], ['options', { maxEntries: 'count', maxBytes: 'count' }]],
  listIndexes: [['table', 'string']],
  listTables: [],
  vacuum: [['options', { retainVersions: 'count', graceSeconds: 'count' }]],
  verify: [['table', 'string'], ['index', 'string']],
  certificate: [['table', 'string'], ['index', 'string']],
  planBuild: [['table', 'string'], ['options', { index: 'string', passEntries: 'count', runs: 'boolean' }]],
  commitBuild: [['receipts', 'string[]'], ['options', { runs: 'boolean' }]],
  close: [],
};
const SYNC = new Set(['setScanOnly', 'startSync']);
function checkArgs(method, args) {
  const sig = SIGNATURES[method];
  if (!sig) return;
  sig.forEach(([name, spec], i) => check(method, name, spec, args[i]));
  if (method === 'createIndex' && !args[2].every(is['string|column'])) {
    throw invalid(`createIndex: columns must be an array of ${WHAT['string|column']}`);
  }
  if (method === 'registerRewrite' && (args[1]?.removed === undefined || args[1]?.added === undefined)) {
    throw invalid('registerRewrite: options.removed and options.added are required');
  }
}

// Wraps a public method: arguments checked (a wrong one rejects the promise, or throws for
// the synchronous methods), errors get their code.
function guard(method, fn) {
  return function (...args) {
    try {
      checkArgs(method, args);
    } catch (e) {
      if (SYNC.has(method)) throw e;
      return Promise.reject(e);
    }
    return call(fn, this, args, SYNC.has(method));
  };
}

// Calls a native method: napi's own conversion failures become E_INVALID, and a
// promise-returning method that fails before its promise exists (a throwing getter on an
// argument) rejects instead of throwing.
function call(fn, self, args, sync) {
  let r;
  try {
    r = fn.apply(self, args);
  } catch (e) {
    if (sync) throw napiInvalid(e);
    return Promise.reject(napiInvalid(e));
  }
  return r && typeof r.then === 'function' ? r.catch((e) => { throw napiInvalid(e); }) : r;
}

for (const name of Object.getOwnPropertyNames(native.Overlay.prototype)) {
  const desc = Object.getOwnPropertyDescriptor(native.Overlay.prototype, name);
  const fn = desc.value;
  if (name === 'constructor' || typeof fn !== 'function') continue;
  const sync = SYNC.has(name);
  native.Overlay.prototype[name] = function (...args) { return call(fn, this, args, sync); };
}

// Events (`warning`: an index was rejected during a query) on a per-overlay emitter.
const { EventEmitter } = require('node:events');
const emitters = new WeakMap();
function emitter(o) {
  let e = emitters.get(o);
  if (!e) { e = new EventEmitter(); emitters.set(o, e); }
  return e;
}
const EVENTS = new Set(['warning', 'sync', 'progress']);
function checkListener(method, event, listener) {
  check(method, 'event', 'string', event);
  if (!EVENTS.has(event)) throw invalid(`${method}: unknown event ${event} (warning, sync, progress)`);
  check(method, 'listener', 'function', listener);
}
native.Overlay.prototype.on = function (event, listener) { checkListener('on', event, listener); emitter(this).on(event, listener); return this; };
native.Overlay.prototype.once = function (event, listener) { checkListener('once', event, listener); emitter(this).once(event, listener); return this; };
native.Overlay.prototype.off = function (event, listener) { checkListener('off', event, listener); emitter(this).off(event, listener); return this; };

// The table verbs answer with `warnings`, one per rejected index (its file was scanned
// instead; natively it is queued for repair); each also emits a `warning` event `{ table,
// index, file, reason, message }`. `query`: `{ ipc, rows, refs, stats, warnings }`; `count`:
// `{ count, stats, warnings }`; `search` (BM25 top-k): `{ ipc, rows, refs, scores, bm25,
// stats, warnings }`; `nearest` (k nearest vectors): `{ ipc, rows, refs, distances, metric,
// stats, warnings }`.
for (const verb of ['query', 'count', 'search', 'nearest']) {
  const nativeVerb = native.Overlay.prototype[verb];
  native.Overlay.prototype[verb] = async function (table, options) {
    const r = await nativeVerb.call(this, table, options);
    const e = emitters.get(this);
    if (e) for (const w of r.warnings) e.emit('warning', w);
    return r;
  };
}

const nativeBuild = native.Overlay.prototype.build;
const nativeDrop = native.Overlay.prototype.dropIndex;

/**
 * Builds the indexes of `table`. Without `index`, `maxEntries` or `maxBytes`: one native call
 * that reads each data file once and writes one bundle generation per file for all its
 * indexes; `onProgress` sees `{ phase, index, rowsDone, rowsTotal, file }` after every commit.
 * With them: that index only (or each in turn) in bounded steps of that size, `onProgress`
 * seeing every step's report (rows done/total, cursor). Steps that lost a race to another
 * builder (`E_CONFLICT`) are retried from the cursor by core.
 */
native.Overlay.prototype.build = async function (table, options) {
  if (!options) return nativeBuild.call(this, table);
  const { index, onProgress, maxEntries, maxBytes } = options;
  if (index === undefined && maxEntries === undefined && maxBytes === undefined) {
    if (!onProgress) return nativeBuild.call(this, table);
    // Every callback runs before the build resolves; the first one that threw is rethrown
    // after it (the build itself committed: what it indexed stays).
    let thrown = null;
    const report = await nativeBuild.call(this, table, (p) => {
      try {
        onProgress(p);
      } catch (e) {
        thrown ??= e;
      }
    });
    if (thrown) throw thrown;
    return report;
  }
  const names = index !== undefined
    ? [index]
    : (await this.listIndexes(table)).filter((i) => i.state !== 'poisoned').map((i) => i.name);
  const report = { filesIndexed: 0, entries: 0n, bundlesWritten: 0, bytesWritten: 0n, skipped: [] };
  const files = new Set();
  for (const name of names) {
    for (;;) {
      // Core retries a step that lost a race to another builder (from its cursor).
      const step = await this.buildStep(table, name, { maxEntries, maxBytes });
      report.entries += BigInt(step.entries);
      report.bundlesWritten += step.bundlesWritten;
      report.bytesWritten += BigInt(step.bytesWritten);
      for (const f of step.filesCompleted) files.add(f);
      for (const s of step.skipped) if (!report.skipped.some((x) => x.file === s.file)) report.skipped.push(s);
      if (onProgress) onProgress(step);
      if (step.done) break;
    }
  }
  report.filesIndexed = files.size;
  return report;
};

/**
 * Drops an index: one small catalog commit, returning its id. With `{ purge: true }` it is
 * also purged (bundles rewritten without it, records reclaimed, unreferenced
 * objects deleted) and the purge report is returned with `indexId`.
 */
native.Overlay.prototype.dropIndex = async function (table, name, options) {
  if (options && options.purge) return this.dropIndexPurge(table, name);
  return nativeDrop.call(this, table, name);
};

// Background sync of mounted Iceberg tables: one loop per overlay and table, never two runs
// at once. Each run syncs, then catches up index work a sync deferred (indexes `building` or
// `maintaining`) in at most `catchUpSteps` bounded build steps (default 4; `maxEntries` /
// `maxBytes` per step; 0 steps: no catch-up), emitting `progress` `{ table, index, step,
// rowsDone, rowsTotal, state, done, merged }` per step (`merged`: a merge-phase step's run, else null); publishes when something changed or coverage
// moved (unless `publish: false`), emits `sync` `{ table, report, published, pending }`
// (`pending`: indexes still catching up, whose next run follows at once), and emits `warning`
// for an index the run poisoned (`{ table, index, reason: 'poisoned', message }`) or a run
// that failed (`{ table, reason: 'sync-failed', code, message }`; the loop goes on). Timers
// are unref'd: a sync loop does not keep the process alive.
const syncLoops = new WeakMap();
native.Overlay.prototype.startSync = function (name, options) {
  const loops = syncLoops.get(this) ?? new Map();
  syncLoops.set(this, loops);
  if (loops.has(name)) {
    throw Object.assign(new Error(`startSync: table ${name} is already syncing`), { code: 'E_EXISTS' });
  }
  const intervalMs = options?.intervalMs ?? 60000;
  if (intervalMs < 10 || intervalMs > 2 ** 31 - 1) throw invalid('startSync: options.intervalMs must be from 10 to 2^31-1');
  const publish = options?.publish ?? true;
  const catchUpSteps = options?.catchUpSteps ?? 4;
  const stepOptions = {};
  if (options?.maxEntries !== undefined) stepOptions.maxEntries = options.maxEntries;
  if (options?.maxBytes !== undefined) stepOptions.maxBytes = options.maxBytes;
  const emit = (event, value) => { const e = emitters.get(this); if (e) e.emit(event, value); };
  const loop = { stopped: false, timer: null, running: null, runs: 0, pending: [] };
  // At most `catchUpSteps` build steps over the indexes still catching up; what moved, and
  // which indexes are left.
  const catchUp = async () => {
    let budget = catchUpSteps;
    let moved = false;
    const left = [];
    // Indexes still catching up, and those a budget left in their merge phase (ready by
    // then: their runs follow in steps of their own).
    const indexes = (await this.listIndexes(name)).filter((i) => i.state === 'building' || i.state === 'maintaining' || loop.pending.includes(i.name));
    for (const ix of indexes) {
      let done = false;
      while (budget > 0 && !done && !loop.stopped) {
        budget -= 1;
        try {
          const s = await this.buildStep(name, ix.name, stepOptions);
          done = s.done;
          if (s.filesCompleted.length > 0 || s.state !== ix.state) moved = true;
          if (s.merged) moved = true;
          emit('progress', { table: name, index: ix.name, step: s.step, entries: s.entries, rowsDone: s.rowsDone, rowsTotal: s.rowsTotal, state: s.state, done: s.done, merged: s.merged ?? null });
        } catch (e) {
          if (e.code === 'E_CONFLICT') continue; // another builder moved it; next step
          done = true;
          moved = true;
          emit('warning', { table: name, index: ix.name, reason: 'poisoned', code: e.code, message: `catch-up of ${name}.${ix.name}: ${e.message}` });
        }
      }
      if (!done) left.push(ix.name);
    }
    return { moved, left };
  };
  const run = async () => {
    try {
      const report = await this.syncIceberg(name);
      const changed = report.fromSnapshot !== report.snapshotId || report.added.length > 0 ||
        report.removed.length > 0 || report.masksChanged.length > 0;
      for (const index of report.poisoned) {
        emit('warning', { table: name, index, reason: 'poisoned', message: `sync poisoned index ${name}.${index}` });
      }
      const caught = catchUpSteps > 0 ? await catchUp() : { moved: false, left: [] };
      loop.pending = caught.left;
      const published = (changed || caught.moved) && publish ? await this.publish() : null;
      emit('sync', { table: name, report, published, pending: caught.left });
    } catch (e) {
      emit('warning', { table: name, reason: 'sync-failed', code: e.code, message: e.message });
    } finally {
      loop.runs += 1;
    }
  };
  const tick = () => {
    loop.timer = null;
    loop.running = run().then(() => {
      loop.running = null;
      if (!loop.stopped) {
        // Catching up: the next run at once (each is bounded); else after the interval.
        loop.timer = setTimeout(tick, loop.pending.length > 0 ? 0 : intervalMs);
        loop.timer.unref?.();
      }
    });
  };
  loops.set(name, loop);
  loop.timer = setTimeout(tick, 0);
  loop.timer.unref?.();
};

/** Stops `name`'s sync loop; resolves after a run in flight ends. False when none ran. */
native.Overlay.prototype.stopSync = async function (name) {
  const loops = syncLoops.get(this);
  const loop = loops?.get(name);
  if (!loop) return false;
  loop.stopped = true;
  if (loop.timer) clearTimeout(loop.timer);
  loops.delete(name);
  if (loop.running) await loop.running;
  return true;
};

const nativeClose = native.Overlay.prototype.close;
/** Closes the overlay, stopping its sync loops first. */
native.Overlay.prototype.close = async function () {
  const loops = syncLoops.get(this);
  if (loops) await Promise.all([...loops.keys()].map((n) => this.stopSync(n)));
  return nativeClose.call(this);
};

// Argument checks in front of every public method (the facade's own included).
for (const method of Object.keys(SIGNATURES)) {
  const fn = native.Overlay.prototype[method];
  if (typeof fn === 'function') native.Overlay.prototype[method] = guard(method, fn);
}

const OPEN = { storage: 'object', readOnly: 'boolean', timeoutMs: 'count', manifestPartBytes: 'count', catalogs: 'catalogs' };

class Overlay {
  /**
   * Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`,
   * `s3://bucket/prefix`. With `{ readOnly: true }`, a read-only view of the newest
   * published version that never fences the writer; `timeoutMs` bounds every read;
   * `manifestPartBytes` (writers) is the size past which an index's lists are published as a
   * manifest part (default 1 MiB).
   */
  static open(url, options) {
    try {
      check('Overlay.open', 'url', 'string', url);
      check('Overlay.open', 'options', OPEN, options);
      if (options && options.timeoutMs !== undefined && (options.timeoutMs < 1 || options.timeoutMs > 2 ** 32 - 1)) {
        throw invalid('Overlay.open: options.timeoutMs must be from 1 to 2^32-1');
      }
      if (options && options.manifestPartBytes !== undefined && options.manifestPartBytes > 2 ** 32 - 1) {
        throw invalid('Overlay.open: options.manifestPartBytes must be at most 2^32-1');
      }
    } catch (e) {
      return Promise.reject(e);
    }
    return call(native.openOverlay, undefined, [url, options]);
  }
}

const BUILDER_OPEN = { storage: 'object', timeoutMs: 'count', catalogs: 'catalogs' };

/**
 * Builds bundles from `planBuild`'s tasks in any process (a job system's worker): writes to
 * the overlay's object store and reads data files, never opens the catalog, so any number of
 * builders run beside the one writer that plans and commits (`docs/fanout.md`).
 */
class BundleBuilder {
  #native;
  constructor(native_) { this.#native = native_; }
  /** A builder for the overlay at `url` (the URL its writer opened); `storage` as `Overlay.open`. */
  static open(url, options) {
    check('BundleBuilder.open', 'url', 'string', url);
    check('BundleBuilder.open', 'options', BUILDER_OPEN, options);
    if (options && options.timeoutMs !== undefined && (options.timeoutMs < 1 || options.timeoutMs > 2 ** 32 - 1)) {
      throw invalid('BundleBuilder.open: options.timeoutMs must be from 1 to 2^32-1');
    }
    return new BundleBuilder(call(native.openBundleBuilder, undefined, [url, options], true));
  }
  /**
   * Builds one task (a JSON text from `planBuild`): indexes its data file and writes the
   * file's new bundle — or, for a run task (`planBuild(table, { runs: true })`), writes the
   * index's new run from the runs it merges and the new files' blobs. Resolves to the
   * receipt, a JSON text for `commitBuild`. Retrying a task is safe: it writes the same
   * bytes under the same name.
   */
  buildBundle(task) {
    try {
      check('buildBundle', 'task', 'string', task);
    } catch (e) {
      return Promise.reject(e);
    }
    return call(this.#native.buildBundle, this.#native, [task], false);
  }
}

function sampleOrdersParquet(firstId, rows, rowGroupRows = 1000, codec = 'snappy') {
  check('sampleOrdersParquet', 'firstId', 'number', firstId);
  check('sampleOrdersParquet', 'rows', 'number', rows);
  check('sampleOrdersParquet', 'rowGroupRows', 'number', rowGroupRows);
  check('sampleOrdersParquet', 'codec', 'string', codec);
  return call(native.sampleOrdersParquet, undefined, [firstId, rows, rowGroupRows, codec], true);
}

function writeParquet(columns, rows, rowGroupRows, codec) {
  check('writeParquet', 'columns', 'array', columns);
  check('writeParquet', 'rows', 'array', rows);
  check('writeParquet', 'rowGroupRows', 'count?', rowGroupRows);
  check('writeParquet', 'codec', 'string?', codec);
  return call(native.writeParquet, undefined, [columns, rows, rowGroupRows, codec], true);
}

/** Faults injected in this process under `SKERRY_FAULTS` (testing only; see docs/guarantees.md). */
function faultsInjected() {
  return native.faultsInjected();
}

module.exports = { Overlay, BundleBuilder, sampleOrdersParquet, writeParquet, faultsInjected };
