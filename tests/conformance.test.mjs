// One table of cases, run unchanged against the Node addon and the wasm reader: both answer
// through skerry-core's host boundary, so every case must give identical rows (as plain
// objects and as Arrow IPC bytes), refs, stats fields, and — for every error path — the same
// `err.code`, `err.retryable` and message.
//
// The table has every key type the writer here produces — int64 and uint64 at their limits,
// decimals, strings, binary, floats (±0), booleans, dates and timestamps — with one index per
// column and a composite one.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
// SKERRY_TEST_KINDS names a build with the test-only kinds (`scripts/build.sh test-kinds`):
// the suite then runs against that addon and wasm, with the toy kind's table added.
const KINDS_BUILD = process.env.SKERRY_TEST_KINDS;
if (KINDS_BUILD) {
  const node = fs.readdirSync(KINDS_BUILD).find((f) => /^skerry\..*\.node$/.test(f));
  process.env.NAPI_RS_NATIVE_LIBRARY_PATH = path.join(KINDS_BUILD, node);
}
const { Overlay, writeParquet } = require('skerry');
const { OverlayReader } = require(KINDS_BUILD ? path.join(KINDS_BUILD, 'wasm/skerry_wasm.js') : 'skerry-wasm');
// Tables whose indexes only prune (bloom; with the test kinds, the toy `valueset` too): pruned
// files, scans for the rest, the same answers as table t.
const PRUNING = [['tb', 'bloom', { fpp: 0.001 }], ...(KINDS_BUILD ? [['tv', 'valueset', {}]] : [])];

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
const U64_MAX = 2n ** 64n - 1n;
const COLUMNS = [
  { name: 'i', type: 'int64' }, { name: 'u', type: 'uint64' }, { name: 'dec', type: 'decimal(20,2)' },
  { name: 's', type: 'string' }, { name: 'b', type: 'binary' }, { name: 'f', type: 'float64' },
  { name: 'flag', type: 'boolean' }, { name: 'd', type: 'date' }, { name: 'ts', type: 'timestamp' },
];
const ROWS = [
  [I64_MIN, 0n, '-99999999999999999.99', 'a', new Uint8Array([0]), -1.5, true, -719162, -(2n ** 62n)],
  [I64_MAX, U64_MAX, '99999999999999999.99', 'b', new Uint8Array([255, 255]), 0, false, 2932896, 2n ** 62n],
  [-(2n ** 53n) - 1n, 2n ** 63n, '123.45', 'é', new Uint8Array([1, 2, 3]), -0, true, 0, 0n],
  [2n ** 53n + 1n, 2n ** 63n - 1n, '-0.01', 'αβγ', new Uint8Array([]), 1e300, null, 19000, 1_700_000_000_000_000n],
  [0n, 5n, '0', '', new Uint8Array([9, 9]), 2.5, false, 1, -1n],
  [5n, 6n, '5', 'x', new Uint8Array([7]), 5, true, 2, 1n],
  [null, null, null, null, null, null, null, null, null],
  [7n, 7n, '7.07', 'x', new Uint8Array([7]), 7, true, 7, 7n],
];

let root, server, addon, wasm;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-conformance-'));
  fs.mkdirSync(path.join(root, 'data/t'), { recursive: true });
  fs.writeFileSync(path.join(root, 'data/t/part-0.parquet'), writeParquet(COLUMNS, ROWS.slice(0, 5), 2));
  fs.writeFileSync(path.join(root, 'data/t/part-1.parquet'), writeParquet(COLUMNS, ROWS.slice(5), 2));
  addon = await Overlay.open(`file://${root}/overlay`);
  await addon.registerParquetTable('t', `file://${root}/data/t`);
  for (const c of COLUMNS) await addon.createIndex('t', `by_${c.name}`, [c.name]);
  await addon.createIndex('t', 'by_s_i', ['s', { name: 'i', direction: 'desc' }]);
  // Bitmap indexes beside the ordered ones: the planner prefers them on ties, counts use them.
  for (const c of ['s', 'f', 'flag', 'd']) await addon.createIndex('t', `bm_${c}`, [c], { kind: 'bitmap' });
  await addon.build('t');
  // The same files as tables with pruning indexes only: they prune, scans answer.
  for (const [table, kind, options] of PRUNING) {
    await addon.registerParquetTable(table, `file://${root}/data/t`);
    for (const c of ['i', 's', 'b']) await addon.createIndex(table, `${kind}_${c}`, [c], { kind, ...options });
    await addon.build(table);
  }
  await addon.publish();
  server = await startRangeServer(root);
  const tables = { t: `${server.url}/data/t` };
  for (const [table] of PRUNING) tables[table] = `${server.url}/data/t`;
  wasm = await OverlayReader.open(`${server.url}/overlay`, { tables });
});

after(async () => {
  await addon?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

// Stats fields that depend only on the plan and the data (requests, bytes and timings depend
// on the transport: a local file store vs HTTP range reads).
const PLAN = ['index', 'indexKind', 'indexColumns', 'keys', 'residual', 'files', 'filesByIndex', 'filesScanned',
  'filesPruned', 'filesRejected', 'rejections', 'drifted', 'rowGroups', 'rowGroupsPruned',
  'rowsPrunedByPages', 'rowsScanned'];

function comparable(r) {
  if (r === undefined || r === null || typeof r !== 'object') return r;
  const out = { ...r };
  if (r.stats) {
    const keys = Object.keys(r.stats).sort();
    out.stats = { keys };
    for (const k of PLAN) if (k in r.stats) out.stats[k] = r.stats[k];
  }
  if (r.ipc) out.ipc = Buffer.from(r.ipc).toString('hex');
  return out;
}

async function outcome(f) {
  try {
    return { ok: comparable(await f()) };
  } catch (e) {
    return { err: { code: e.code, retryable: e.retryable, message: e.message, isError: e instanceof Error } };
  }
}

const q = (options) => (x) => x.query('t', options);
const cases = [];
const eq = (col, v) => cases.push([`${col} = ${typeof v === 'bigint' ? `${v}n` : JSON.stringify(v)}`, q({ where: { [col]: v } })]);
for (const v of [I64_MIN, I64_MAX, -(2n ** 53n) - 1n, 2n ** 53n + 1n, 0n, 0, 5, 7n, I64_MAX + 1n, I64_MIN - 1n, 2n ** 64n, 2n ** 200n, 1.5, '5', null]) eq('i', v);
for (const v of [0n, U64_MAX, 2n ** 63n, 2n ** 63n - 1n, 5, -1n, U64_MAX + 1n, -1]) eq('u', v);
for (const v of ['123.45', '-0.01', '99999999999999999.99', '-99999999999999999.99', '0', 5, 5n, '7.07', '1.234', 'abc', '1e3']) eq('dec', v);
for (const v of ['a', 'é', 'αβγ', '', 'x', 'nope', 5]) eq('s', v);
for (const v of [new Uint8Array([0]), new Uint8Array([255, 255]), new Uint8Array([]), new Uint8Array([7]), 'x']) eq('b', v);
for (const v of [-1.5, 0, -0, 1e300, 2.5, 5, NaN, Infinity]) eq('f', v);
for (const v of [true, false, 1]) eq('flag', v);
for (const v of [-719162, 2932896, 0, 19000, 7, '2022-01-08', 1.5]) eq('d', v);
for (const v of [-(2n ** 62n), 2n ** 62n, 0n, 1_700_000_000_000_000n, -1, 1, 7]) eq('ts', v);

// Every operator, on indexed and unindexed shapes, with columns and limits.
for (const [name, options] of Object.entries({
  'in': { where: { i: { in: [I64_MIN, 0n, 5, I64_MAX, 99] } } },
  'in empty': { where: { i: { in: [] } } },
  'lt': { where: { i: { lt: 0 } } },
  'lte': { where: { u: { lte: 2n ** 63n } } },
  'gt': { where: { dec: { gt: '0' } } },
  'gte': { where: { s: { gte: 'b' } } },
  'between': { where: { ts: { between: [-1, 2n ** 62n] } } },
  'between reversed': { where: { ts: { between: [5, -5] } } },
  'isNull': { where: { dec: { isNull: true } } },
  'bare null': { where: { s: null } },
  'two operators': { where: { i: { gt: -10, lte: 7 } } },
  'composite prefix + range': { where: { s: 'x', i: { lt: 7 } } },
  'residual on unindexed shape': { where: { f: { gt: 0 }, flag: true } },
  'columns subset': { where: { i: 5 }, columns: ['dec', 'b', 'ts'] },
  'no columns': { where: { i: 5 }, columns: [] },
  'limit': { where: { flag: true }, limit: 2 },
  'limit 0': { where: { flag: true }, limit: 0 },
  'every row': { limit: 100 },
  'verify': { where: { i: 5 }, verify: true },
})) cases.push([`query ${name}`, q(options)]);

// count: every `where` shape above, from indexes (bitmaps intersecting, ordered ones) or scans.
const WHERES = {
  'flag': { flag: true }, 'flag false': { flag: false }, 'flag null': { flag: null },
  's in': { s: { in: ['x', 'é', 'nope', ''] } }, 's range': { s: { gt: 'a', lte: 'x' } },
  'f ±0': { f: -0 }, 'f NaN': { f: NaN }, 'f isNull': { f: { isNull: true } },
  'flag and s': { flag: true, s: 'x' }, 'flag and d range': { flag: true, d: { between: [0, 19000] } },
  'flag and i (ordered)': { flag: true, i: { gt: 0 } }, 'unindexed pair (composite)': { s: 'x', i: { lt: 7 } },
  'dec (ordered)': { dec: { gt: '0' } }, 'none': undefined, 'empty in': { s: { in: [] } },
};
for (const [name, where] of Object.entries(WHERES)) cases.push([`count ${name}`, (x) => x.count('t', where ? { where } : undefined)]);
// Pruning-only tables: pruned files, scans for the rest, the same answers as table t.
for (const [table, kind] of PRUNING) {
  for (const [name, where] of Object.entries(WHERES)) {
    if (!where || 'flag' in where || 'f' in where || 'd' in where || 'dec' in where) continue;
    cases.push([`${kind} count ${name}`, (x) => x.count(table, { where })]);
    cases.push([`${kind} query ${name}`, (x) => x.query(table, { where, columns: ['i', 's'] })]);
  }
  for (const [name, where] of Object.entries({ 'i': { i: 5n }, 'i in': { i: { in: [I64_MAX, 0, 99] } }, 'b': { b: new Uint8Array([7]) }, 's absent': { s: 'nope' }, 's isNull': { s: null } })) {
    cases.push([`${kind} count ${name}`, (x) => x.count(table, { where })]);
    cases.push([`${kind} query ${name}`, (x) => x.query(table, { where, columns: ['i', 's'] })]);
  }
  cases.push([`${kind} lookup refused`, (x) => x.lookup(table, `${kind}_i`, 5n)]);
}
for (const [name, f] of Object.entries({
  'count with limit': (x) => x.count('t', { where: { flag: true }, limit: 1 }),
  'count with columns': (x) => x.count('t', { columns: ['i'] }),
  'count unknown column': (x) => x.count('t', { where: { nope: 1 } }),
  'count bad key': (x) => x.count('t', { where: { flag: 'yes' } }),
  'count table not a string': (x) => x.count(5),
})) cases.push([name, f]);

// Every error path of the read verbs.
for (const [name, f] of Object.entries({
  'unknown operator': q({ where: { i: { like: 1 } } }),
  'isNull false': q({ where: { i: { isNull: false } } }),
  'between of one': q({ where: { i: { between: [1] } } }),
  'in not an array': q({ where: { i: { in: 5 } } }),
  'empty condition': q({ where: { i: {} } }),
  'where not an object': q({ where: [1] }),
  'columns not an array': q({ columns: 'i' }),
  'column not a string': q({ columns: [5] }),
  'unknown column': q({ where: { nope: 1 } }),
  'unknown returned column': q({ columns: ['nope'] }),
  'limit negative': q({ limit: -1 }),
  'limit fractional': q({ limit: 1.5 }),
  'limit bigint': q({ limit: 5n }),
  'verify not boolean': q({ verify: 'yes' }),
  'options not an object': q('where'),
  'table not a string': (x) => x.query(5),
  'unknown table': (x) => x.query('nope', {}),
  'key is a function': q({ where: { i: () => 1 } }),
  'key is a symbol': q({ where: { i: Symbol('x') } }),
  'key is a Float64Array': q({ where: { b: new Float64Array([1]) } }),
  'deeply nested': q({ where: { i: { in: [[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]] } } }),
  'cyclic object': (() => { const o = { eq: 1 }; o.self = o; return q({ where: { i: o } }); })(),
  'sparse array of length 2^32-1': (x) => x.lookupMany('t', 'by_i', new Array(2 ** 32 - 1)),
  'in list too long': q({ where: { i: { in: new Array(2 ** 21).fill(1) } } }),
  'lookup': (x) => x.lookup('t', 'by_i', I64_MAX),
  'lookup composite': (x) => x.lookup('t', 'by_s_i', ['x', 7n]),
  'lookup prefix': (x) => x.lookup('t', 'by_s_i', ['x']),
  'lookup too many values': (x) => x.lookup('t', 'by_i', [1, 2]),
  'lookup bad key type': (x) => x.lookup('t', 'by_i', 'one'),
  'lookup out of range': (x) => x.lookup('t', 'by_u', -1n),
  'lookup unknown index': (x) => x.lookup('t', 'nope', 1),
  'lookup table not a string': (x) => x.lookup(1, 'by_i', 1),
  'lookupMany': (x) => x.lookupMany('t', 'by_u', [0n, U64_MAX, 7, 2n ** 63n]),
  'lookupMany not an array': (x) => x.lookupMany('t', 'by_u', 5),
  'range': (x) => x.range('t', 'by_dec', { key: '-0.01' }, { key: '123.45', inclusive: false }),
  'range reverse': (x) => x.range('t', 'by_i', null, { key: 0 }, { reverse: true }),
  'range column': (x) => x.range('t', 'by_s_i', { key: ['x', 0] }, { key: ['x'] }, { column: 'i' }),
  'range wrong column': (x) => x.range('t', 'by_s_i', { key: ['x', 0] }, { key: ['x'] }, { column: 's' }),
  'range bad bound': (x) => x.range('t', 'by_i', 5, null),
  'range inclusive not boolean': (x) => x.range('t', 'by_i', { key: 1, inclusive: 'yes' }, null),
  'range bound without key': (x) => x.range('t', 'by_i', {}, null),
  'range reverse not boolean': (x) => x.range('t', 'by_i', null, null, { reverse: 1 }),
  'nulls': (x) => x.nulls('t', 'by_dec', [null]),
  'nulls composite': (x) => x.nulls('t', 'by_s_i', [null, undefined], { reverse: true }),
  'nulls not an array': (x) => x.nulls('t', 'by_dec', null),
  'locate': (x) => x.locate('t', [0n, 3, 7n, U64_MAX]),
  'locate negative': (x) => x.locate('t', [-1n]),
  'locate too wide': (x) => x.locate('t', [2n ** 64n]),
  'locate fractional': (x) => x.locate('t', [1.5]),
  'locate not an array': (x) => x.locate('t', 5n),
  'fetchRows': (x) => x.fetchRows('t', [{ file: 'part-1.parquet', position: 2n }, { file: 'part-0.parquet', position: 0n }], ['i', 'u', 'dec', 'b', 'ts']),
  'fetchRows number position': (x) => x.fetchRows('t', [{ file: 'part-0.parquet', position: 1 }], ['i']),
  'fetchRows bad position': (x) => x.fetchRows('t', [{ file: 'part-0.parquet', position: -1n }], ['i']),
  'fetchRows past the end': (x) => x.fetchRows('t', [{ file: 'part-0.parquet', position: 99n }], ['i']),
  'fetchRows unknown file': (x) => x.fetchRows('t', [{ file: 'nope.parquet', position: 0n }], ['i']),
  'fetchRows escaping path': (x) => x.fetchRows('t', [{ file: '../x.parquet', position: 0n }], ['i']),
  'fetchRows rows not objects': (x) => x.fetchRows('t', [5], ['i']),
  'fetchRows columns not strings': (x) => x.fetchRows('t', [], [5]),
})) cases.push([name, f]);

test(`conformance: ${cases.length} cases answer identically from the addon and the wasm reader`, async (t) => {
  let oks = 0, errs = 0;
  const codes = new Set();
  for (const [name, f] of cases) {
    const a = await outcome(() => f(addon));
    const w = await outcome(() => f(wasm));
    assert.deepStrictEqual(w, a, name);
    if (a.ok) oks++;
    else { errs++; codes.add(a.err.code); assert.ok(a.err.isError && /^E_[A-Z_]+$/.test(a.err.code), `${name}: ${JSON.stringify(a.err)}`); }
  }
  // The suite exercises both answers and errors, of several kinds.
  assert.ok(oks >= 80 && errs >= 30, `${oks} answers, ${errs} errors`);
  for (const c of ['E_KEY', 'E_INVALID', 'E_NOT_FOUND', 'E_REFUSED']) assert.ok(codes.has(c), `no case raised ${c}: ${[...codes]}`);
  t.diagnostic(`${oks} answers and ${errs} errors (${[...codes].sort().join(', ')}) identical on both sides`);
});

test('conformance: count equals the rows a query returns, and bitmaps answer it without data reads', async () => {
  for (const side of [addon, wasm]) {
    for (const [name, where] of Object.entries(WHERES)) {
      const c = await side.count('t', where ? { where } : undefined);
      const r = await side.query('t', where ? { where, columns: [] } : { columns: [] });
      assert.equal(c.count, r.refs.length, name);
    }
    const c = await side.count('t', { where: { flag: true, s: { in: ['x', 'a'] } } });
    assert.equal(c.stats.indexKind, 'bitmap');
    assert.deepEqual(c.stats.indexColumns, ['flag', 's']);
    assert.equal(c.stats.filesScanned, 0);
    assert.equal(c.stats.dataBytes, 0);
    assert.equal(c.count, 3);
  }
  for (const side of [addon, wasm]) {
    for (const [table, kind] of PRUNING) {
      for (const where of [{ i: 5n }, { s: 'x' }, { s: { in: ['a', 'é', 'nope'] } }, { b: new Uint8Array([7]) }, { s: 'nope' }]) {
        const what = `${kind} ${JSON.stringify(where, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`;
        const pruned = await side.count(table, { where });
        const exact = await side.count('t', { where });
        assert.equal(pruned.count, exact.count, what);
        assert.equal(pruned.stats.indexKind, kind, what);
        // Files holding no match may be pruned (a bloom filter's false positives are scanned);
        // an exact set prunes exactly those.
        const files = new Set((await side.query('t', { where, columns: [] })).refs.map((r) => r.file));
        const q = await side.query(table, { where, columns: [] });
        if (kind === 'valueset') assert.equal(q.stats.filesPruned, 2 - files.size, what);
        else assert.ok(q.stats.filesPruned <= 2 - files.size, what);
      }
      // 's' = 'nope' is in no file: both files pruned, none read.
      const none = await side.query(table, { where: { s: 'nope' } });
      assert.equal(none.stats.filesPruned, 2);
      assert.equal(none.stats.dataRequests, 0);
    }
  }
  const ix = await addon.listIndexes('t');
  assert.equal(ix.find((i) => i.name === 'bm_flag').kind, 'bitmap');
  assert.equal(ix.find((i) => i.name === 'by_i').kind, 'ordered');
});

test('conformance: values cross losslessly as the documented JavaScript types', async () => {
  for (const side of [addon, wasm]) {
    const r = await side.query('t', { where: { i: { in: [I64_MIN, I64_MAX, 2n ** 53n + 1n, 5n] } }, columns: ['i', 'u', 'dec', 'b', 'f', 'ts', 'd', 'flag', 's'] });
    const byI = new Map(r.rows.map((x) => [x.i, x]));
    assert.deepEqual([...byI.keys()].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)), [I64_MIN, 5, 2n ** 53n + 1n, I64_MAX]);
    const max = byI.get(I64_MAX);
    assert.equal(max.u, U64_MAX);
    assert.deepEqual(max.dec, { unscaled: 9999999999999999999n, scale: 2 });
    assert.deepEqual(max.b, new Uint8Array([255, 255]));
    assert.ok(max.b instanceof Uint8Array);
    assert.equal(max.ts, 2n ** 62n);
    const five = byI.get(5);
    assert.equal(typeof five.i, 'number');
    assert.deepEqual(five.dec, { unscaled: 500n, scale: 2 });
    assert.equal(five.f, 5);
    assert.equal(five.ts, 1);
    assert.equal(five.flag, true);
    assert.ok(Object.is(byI.get(2n ** 53n + 1n).f, 1e300));
    // Ids are bigints, counters numbers.
    assert.equal(typeof r.refs[0].position, 'bigint');
    assert.equal(typeof r.stats.files, 'number');
  }
});

test('conformance: errors carry code and retryable as own properties, messages no code prefix', async () => {
  for (const side of [addon, wasm]) {
    const e = await side.query('t', { where: { i: { like: 1 } } }).catch((x) => x);
    assert.ok(e instanceof Error);
    assert.equal(e.code, 'E_INVALID');
    assert.equal(e.retryable, false);
    assert.ok(!/^E_/.test(e.message), e.message);
  }
});
