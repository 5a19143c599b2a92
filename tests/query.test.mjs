// Differential test of `query({ where, columns, limit })` from JavaScript: random predicates
// over random multi-file tables where files are answered by their index, stale (rewritten and
// refreshed, not rebuilt), drifted (rewritten in place behind the catalog's back) or have
// deleted rows. The addon and the wasm reader must both return exactly the rows a brute-force
// evaluation gives (file order, then position), with the requested columns' values, an Arrow
// IPC stream apache-arrow reads, and a `warning` event per rejected index.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { tableFromIPC } from 'apache-arrow';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const COLUMNS = [{ name: 'a', type: 'int32' }, { name: 'b', type: 'string' }, { name: 'c', type: 'float64' }, { name: 'd', type: 'int64' }];
const NAMES = COLUMNS.map((c) => c.name);
const json = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));
const STRINGS = ['', 'a', 'a\u0000', 'ab', 'b', 'é', 'z', '\u{1F600}'];
const FLOATS = [NaN, -0, 0, 1.5, -2, Infinity, -Infinity, 7.25];

function makeRng(seed) {
  let s = seed >>> 0 || 1;
  return (n) => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s % n; };
}

// SQL order of one column's values (floats: -0 = 0, NaN greatest; strings: UTF-8 bytes).
function cmpValue(col, x, y) {
  if (col === 'c') {
    const nx = Number.isNaN(x), ny = Number.isNaN(y);
    if (nx || ny) return nx === ny ? 0 : nx ? 1 : -1;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (col === 'b') return Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8'));
  return x < y ? -1 : x > y ? 1 : 0;
}

// Does value `v` of column `col` satisfy `op` (SQL: comparisons with NULL never hold)?
function holds(col, op, arg, v) {
  if (op === 'isNull') return v === null;
  const c = (x) => (v === null || x === null ? null : cmpValue(col, v, x));
  switch (op) {
    case 'eq': return c(arg) === 0;
    case 'in': return arg.some((x) => c(x) === 0);
    case 'lt': return c(arg) !== null && c(arg) < 0;
    case 'lte': return c(arg) !== null && c(arg) <= 0;
    case 'gt': return c(arg) !== null && c(arg) > 0;
    case 'gte': return c(arg) !== null && c(arg) >= 0;
    case 'between': return c(arg[0]) !== null && c(arg[0]) >= 0 && c(arg[1]) !== null && c(arg[1]) <= 0;
    default: throw new Error(op);
  }
}

test('query: addon and wasm match brute force over indexed, stale, drifted and deleted files', async () => {
  for (const seed of [7, 4242]) {
    const rnd = makeRng(seed * 2654435761);
    const value = (col) => {
      if (rnd(7) === 0) return null;
      if (col === 'a') return rnd(9) - 4;
      if (col === 'b') return STRINGS[rnd(STRINGS.length)];
      if (col === 'c') return FLOATS[rnd(FLOATS.length)];
      return rnd(1000);
    };
    const randomRows = (n) => Array.from({ length: n }, () => NAMES.map(value));
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-query-'));
    fs.mkdirSync(path.join(root, 'data'));
    const files = [];
    const write = (name, rows) => {
      fs.writeFileSync(path.join(root, 'data', name), writeParquet(COLUMNS, rows, 32, 'zstd'));
      const f = files.find((x) => x.name === name);
      if (f) f.rows = rows; else files.push({ name, rows, dead: new Set() });
    };
    for (let f = 0; f < 5; f++) write(`f${f}.parquet`, randomRows(80 + rnd(100)));

    const overlay = await Overlay.open(`file://${root}/overlay`);
    const server = await startRangeServer(root);
    try {
      await overlay.registerParquetTable('t', `file://${root}/data`);
      await overlay.createIndex('t', 'i_ab', [{ name: 'a', direction: rnd(2) ? 'desc' : 'asc' }, { name: 'b', nulls: rnd(2) ? 'first' : 'last' }]);
      await overlay.createIndex('t', 'i_d', ['d']);
      await overlay.build('t');
      // f1 stale: rewritten and refreshed (the catalog knows, the index is not rebuilt).
      write('f1.parquet', randomRows(61));
      await overlay.refresh('t');
      // f2: deleted rows.
      const dead = files[2].rows.map((_, i) => i).filter((i) => i % 4 === 1);
      await overlay.registerDeletes('t', [{ file: 'f2.parquet', positions: dead }]);
      dead.forEach((p) => files[2].dead.add(p));
      await overlay.publish();
      // f3 drifted: rewritten in place behind the catalog's back, with more rows.
      write('f3.parquet', randomRows(files[3].rows.length + 9));
      const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data` } });

      const warnings = { addon: [], wasm: [] };
      overlay.on('warning', (w) => warnings.addon.push(w));
      reader.on('warning', (w) => warnings.wasm.push(w));

      let compared = 0, byIndex = 0, drifted = 0;
      for (let i = 0; i < 50; i++) {
        const where = {};
        const conds = [];
        for (let k = 1 + rnd(3); k > 0; k--) {
          const col = NAMES[rnd(4)];
          // Integers go over as numbers or bigints alike.
          const v = () => { let x; do x = value(col); while (x === null && rnd(6)); return x !== null && (col === 'a' || col === 'd') && rnd(3) === 0 ? BigInt(x) : x; };
          const op = ['eq', 'eq', 'in', 'lt', 'lte', 'gt', 'gte', 'between', 'isNull'][rnd(9)];
          const arg = op === 'in' ? Array.from({ length: 1 + rnd(4) }, v) : op === 'between' ? [v(), v()] : op === 'isNull' ? true : v();
          conds.push({ col, op, arg });
          where[col] = { ...(where[col] || {}), [op]: arg };
        }
        // The last operator given per column wins in the object; evaluate what was sent.
        const sent = Object.entries(where).flatMap(([col, ops]) => Object.entries(ops).map(([op, arg]) => ({ col, op, arg })));
        const want = [];
        for (const f of files) {
          f.rows.forEach((row, pos) => {
            if (f.dead.has(pos)) return;
            if (sent.every(({ col, op, arg }) => holds(col, op, arg, row[NAMES.indexOf(col)]))) want.push({ file: f.name, pos, row });
          });
        }
        const limit = rnd(3) === 0 ? rnd(6) : undefined;
        const expect = limit === undefined ? want : want.slice(0, limit);
        for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
          const label = `seed ${seed} #${i} ${who} ${json(where)} limit ${limit}`;
          const before = warnings[who].length;
          const r = await side.query('t', { where, columns: ['d', 'b'], limit, verify: true });
          assert.deepEqual(r.refs.map((x) => [x.file, Number(x.position)]), expect.map((x) => [x.file, x.pos]), `${label} ${json(r.stats)}`);
          assert.deepEqual(r.rows.map((x) => [x.d, x.b]), expect.map((x) => [x.row[3], x.row[1]]), label);
          for (const x of r.rows) assert.deepEqual(Object.keys(x), ['d', 'b'], `${label}: columns in the order asked`);
          const table = tableFromIPC(r.ipc);
          assert.equal(table.numRows, expect.length, label);
          assert.deepEqual(table.schema.fields.map((f) => f.name), ['d', 'b'], label);
          // One warning per rejection; the drifted file is never answered by its index.
          assert.equal(warnings[who].length - before, r.stats.rejections.length, label);
          // The answer carries the same warnings the listeners were given.
          assert.deepEqual(r.warnings, warnings[who].slice(before), label);
          for (const x of r.stats.rejections) if (x.dataFile === 'f3.parquet') assert.equal(x.reason, 'drifted', label);
          if (r.stats.index !== null && r.stats.index !== undefined && (limit === undefined || r.stats.files === 5)) {
            assert.ok(r.stats.rejections.some((x) => x.dataFile === 'f3.parquet'), `${label}: f3 not rejected ${json(r.stats)}`);
            drifted++;
          }
          byIndex += r.stats.filesByIndex;
          compared += expect.length;
        }
      }
      assert.ok(compared > 200, `seed ${seed}: rows compared ${compared}`);
      assert.ok(byIndex > 20, `seed ${seed}: files answered by index ${byIndex}`);
      assert.ok(drifted > 5, `seed ${seed}: queries that met the drifted file through an index ${drifted}`);
      assert.ok(warnings.addon.every((w) => w.table === 't' && typeof w.reason === 'string' && w.file));
      // The addon queued the rejected files for repair; build drains them first.
      const queued = [...await overlay.repairs('t', 'i_ab'), ...await overlay.repairs('t', 'i_d')];
      assert.ok(queued.some((q) => q.path === 'f3.parquet' && q.reason === 'drifted'), JSON.stringify(queued));
      await overlay.build('t');
      assert.deepEqual([...await overlay.repairs('t', 'i_ab'), ...await overlay.repairs('t', 'i_d')], []);
      // Every file answered by the rebuilt index again (a range accessor: a query matching
      // most rows would rather scan, see `indexDeclined`).
      const healed = await overlay.range('t', 'i_d', { key: [0], inclusive: true }, null);
      assert.equal(healed.stats.rejections.length, 0, JSON.stringify(healed.stats));
      assert.equal(healed.stats.filesByIndex, 5);
      const all = await overlay.query('t', { where: { d: { gte: 0 } }, columns: [] });
      assert.equal(all.stats.rejections.length, 0, JSON.stringify(all.stats));
      assert.match(all.stats.indexDeclined ?? '', /a scan reads less/, JSON.stringify(all.stats));
    } finally {
      await overlay.close();
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  }
});

test('query: options are checked and errors are typed', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-query-'));
  fs.mkdirSync(path.join(root, 'data'));
  fs.writeFileSync(path.join(root, 'data', 'x.parquet'), writeParquet(COLUMNS, [[1, 'a', 1.5, 10], [2, null, 2.5, 20]]));
  const overlay = await Overlay.open(`file://${root}/overlay`);
  try {
    await overlay.registerParquetTable('t', `file://${root}/data`);
    await assert.rejects(overlay.query('t', { where: { nope: 1 } }), (e) => e.code === 'E_NOT_FOUND');
    await assert.rejects(overlay.query('t', { where: { d: 'ten' } }), (e) => e.code === 'E_KEY');
    await assert.rejects(overlay.query('t', { where: { d: { like: 1 } } }), (e) => e.code === 'E_INVALID' && /like/.test(e.message));
    await assert.rejects(overlay.query('t', { where: { d: { between: [1] } } }), (e) => e.code === 'E_INVALID');
    await assert.rejects(overlay.query('t', { limit: -1 }), (e) => e.code === 'E_INVALID');
    await assert.rejects(overlay.query('t', { columns: ['zz'] }), (e) => e.code === 'E_NOT_FOUND');
    await assert.rejects(overlay.query('nope', {}), (e) => e.code === 'E_NOT_FOUND');
    // No index: scanned; bare values are `=`, null is IS NULL; default columns are all.
    const r = await overlay.query('t', { where: { b: null } });
    assert.deepEqual(r.rows, [{ a: 2, b: null, c: 2.5, d: 20 }]);
    assert.equal(r.stats.index, undefined);
    assert.equal(r.stats.filesScanned, 1);
    assert.ok(r.stats.elapsedMs > 0 && r.stats.requests > 0 && r.stats.bytes > 0, JSON.stringify(r.stats));
    assert.deepEqual((await overlay.query('t', { where: { a: 1, d: { in: [10, 20] } } })).refs.map((x) => Number(x.position)), [0]);
    // bigints compare with int64 and int32 columns alike.
    assert.deepEqual((await overlay.query('t', { where: { d: { between: [15n, 25n] }, a: 2n } })).refs.map((x) => Number(x.position)), [1]);
    assert.deepEqual((await overlay.query('t', { where: { a: { gt: -5n, lt: 2n } } })).refs.map((x) => Number(x.position)), [0]);
    assert.deepEqual((await overlay.query('t', { where: { d: { gte: -(2n ** 63n) } } })).refs.length, 2);
    await assert.rejects(overlay.query('t', { where: { d: 2n ** 64n } }), (e) => e.code === 'E_KEY');
    assert.deepEqual((await overlay.query('t')).refs.length, 2);
  } finally {
    await overlay.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
});
