'use strict';
// The public `skerry` API: the generated addon loader plus error codes.
//
// Every failure the addon reports starts with a stable code (`E_NOT_FOUND: ...`); this
// facade moves it onto `err.code` (async napi functions cannot set it themselves) and
// strips it from the message.
const native = require('../index.js');

const CODE = /^(E_[A-Z_]+): /;

function withCode(e) {
  if (e instanceof Error) {
    const m = CODE.exec(e.message);
    if (m) {
      e.code = m[1];
      e.message = e.message.slice(m[0].length);
    }
  }
  return e;
}

function call(fn, self, args) {
  let r;
  try {
    r = fn.apply(self, args);
  } catch (e) {
    throw withCode(e);
  }
  return r && typeof r.then === 'function' ? r.catch((e) => { throw withCode(e); }) : r;
}

for (const name of Object.getOwnPropertyNames(native.Overlay.prototype)) {
  const fn = native.Overlay.prototype[name];
  if (name === 'constructor' || typeof fn !== 'function') continue;
  native.Overlay.prototype[name] = function (...args) { return call(fn, this, args); };
}

// Plain objects from the addon's JSON rows: integers past ±2^53 become bigints, non-finite
// floats numbers, binary Uint8Arrays, decimals { unscaled: bigint, scale }.
function revive(key, v) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    if ('$bigint' in v) return BigInt(v.$bigint);
    if ('$float' in v) return Number(v.$float);
    if ('$bytes' in v) return Uint8Array.from(Buffer.from(v.$bytes, 'hex'));
    if ('$decimal' in v) return { unscaled: BigInt(v.$decimal), scale: v.scale };
  }
  return v;
}

/**
 * Fetches `columns` of `rows` (as lookups return them), in order: `{ ipc, rows }` with the
 * Arrow IPC stream and the rows as plain objects.
 */
native.Overlay.prototype.fetchRows = async function (table, rows, columns) {
  const r = await this.fetchRowsRaw(table, rows, columns);
  return { ipc: r.ipc, rows: JSON.parse(r.json, revive) };
};

// Events (`warning`: an index was rejected during a query) on a per-overlay emitter.
const { EventEmitter } = require('node:events');
const emitters = new WeakMap();
function emitter(o) {
  let e = emitters.get(o);
  if (!e) { e = new EventEmitter(); emitters.set(o, e); }
  return e;
}
native.Overlay.prototype.on = function (event, listener) { emitter(this).on(event, listener); return this; };
native.Overlay.prototype.once = function (event, listener) { emitter(this).once(event, listener); return this; };
native.Overlay.prototype.off = function (event, listener) { emitter(this).off(event, listener); return this; };

/**
 * Answers `where` over `table`: `{ ipc, rows, refs, stats }` — the Arrow IPC stream of the
 * requested `columns`, the same rows as plain objects, where each row is, and how the query
 * was answered. Every rejected index emits a `warning` event `{ table, index, file, reason,
 * message }` (the file was scanned instead; natively it is queued for repair).
 */
native.Overlay.prototype.query = async function (table, options) {
  const r = await this.queryRaw(table, options);
  const e = emitters.get(this);
  if (e) {
    for (const x of r.stats.rejections) {
      e.emit('warning', { table, index: r.stats.index, file: x.dataFile, reason: x.reason, message: x.message });
    }
  }
  return { ipc: r.ipc, rows: JSON.parse(r.json, revive), refs: r.refs, stats: r.stats };
};

const nativeBuild = native.Overlay.prototype.build;
const nativeDrop = native.Overlay.prototype.dropIndex;

/**
 * Builds indexes of `table` in bounded steps. With `index`, only that one; `onProgress(step)`
 * sees every step's report (rows done/total, cursor). Steps that lost a race to another
 * builder (`E_CONFLICT`) are retried from the cursor. Without options, one native call.
 */
native.Overlay.prototype.build = async function (table, options) {
  if (!options) return nativeBuild.call(this, table);
  const { index, onProgress, maxEntries, maxBytes } = options;
  const names = index !== undefined
    ? [index]
    : (await this.listIndexes(table)).filter((i) => i.state !== 'poisoned').map((i) => i.name);
  const report = { filesIndexed: 0, entries: 0n, bundlesWritten: 0, bytesWritten: 0n, skipped: [] };
  const files = new Set();
  for (const name of names) {
    let conflicts = 0;
    for (;;) {
      let step;
      try {
        step = await this.buildStep(table, name, { maxEntries, maxBytes });
      } catch (e) {
        if (e.code === 'E_CONFLICT' && conflicts++ < 16) continue;
        throw e;
      }
      conflicts = 0;
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
 * also purged (bundles rewritten without it, records and claims reclaimed, unreferenced
 * objects deleted) and the purge report is returned with `indexId`.
 */
native.Overlay.prototype.dropIndex = async function (table, name, options) {
  if (options && options.purge) return this.dropIndexPurge(table, name);
  return nativeDrop.call(this, table, name);
};

class Overlay {
  /**
   * Opens (creating when absent) the overlay at `url`: `file:///dir`, `memory://`,
   * `s3://bucket/prefix`.
   */
  static open(url, options) {
    return call(native.openOverlay, undefined, [url, options]);
  }
}

function sampleOrdersParquet(firstId, rows, rowGroupRows = 1000, codec = 'snappy') {
  return call(native.sampleOrdersParquet, undefined, [firstId, rows, rowGroupRows, codec]);
}

function writeParquet(columns, rows, rowGroupRows, codec) {
  return call(native.writeParquet, undefined, [columns, rows, rowGroupRows, codec]);
}

module.exports = { Overlay, sampleOrdersParquet, writeParquet, withCode, revive };
