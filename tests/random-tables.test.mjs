// Differential test from JavaScript: random multi-file tables (NULLs, NaN, ±0, unicode, NUL
// characters, duplicates), composite indexes with random directions and NULL placements,
// and random lookup / IN / range / IS NULL calls. The addon and the wasm reader must both
// return exactly what a brute-force evaluation of the same rows gives, in index order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const COLUMNS = [{ name: 'a', type: 'int32' }, { name: 'b', type: 'string' }, { name: 'c', type: 'float64' }];
const STRINGS = ['', 'a', 'a\u0000', 'ab', 'b', 'é', 'z', '\u{1F600}', '\uFFFD'];
const FLOATS = [NaN, -0, 0, 1.5, -2, Infinity, -Infinity];

function makeRng(seed) {
  let s = seed >>> 0 || 1;
  return (n) => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s % n; };
}

// Value order of one column: SQL order (floats: -0 = 0, NaN greatest; strings: UTF-8 bytes).
function cmpValue(col, x, y) {
  if (col === 'c') {
    const nx = Number.isNaN(x), ny = Number.isNaN(y);
    if (nx || ny) return nx === ny ? 0 : nx ? 1 : -1;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (col === 'b') return Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8'));
  return x < y ? -1 : x > y ? 1 : 0;
}
const eqValue = (col, x, y) => x !== null && y !== null && cmpValue(col, x, y) === 0;

function rowCmp(row, spec, tuple) {
  for (let i = 0; i < tuple.length; i++) {
    const v = row[spec[i].col];
    if (v === null || tuple[i] === null) return null;
    const o = cmpValue(spec[i].col, v, tuple[i]);
    if (o) return o;
  }
  return 0;
}

function order(spec) {
  return (x, y) => {
    for (const c of spec) {
      const a = x[c.col], b = y[c.col];
      if (a === null || b === null) {
        if (a === b) continue;
        return (a === null) === c.nullsFirst ? -1 : 1;
      }
      const o = cmpValue(c.col, a, b) * (c.desc ? -1 : 1);
      if (o) return o;
    }
    return x.file < y.file ? -1 : x.file > y.file ? 1 : x.pos - y.pos;
  };
}

test('random tables: addon and wasm match brute force', async () => {
  for (const seed of [11, 2024, 777]) {
    const rnd = makeRng(seed * 2654435761);
    const value = (col) => {
      if (rnd(6) === 0) return null;
      if (col === 'a') return rnd(7) - 3;
      if (col === 'b') return STRINGS[rnd(STRINGS.length)];
      return FLOATS[rnd(FLOATS.length)];
    };
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rand-'));
    fs.mkdirSync(path.join(root, 'data'));
    const rows = [];
    const nfiles = 3 + rnd(3);
    for (let f = 0; f < nfiles; f++) {
      const n = 60 + rnd(120);
      const file = `f${f}.parquet`;
      const data = [];
      for (let pos = 0; pos < n; pos++) {
        const r = { a: value('a'), b: value('b'), c: value('c'), file, pos };
        rows.push(r);
        data.push([r.a, r.b, r.c]);
      }
      fs.writeFileSync(path.join(root, 'data', file), writeParquet(COLUMNS, data, 25, ['snappy', 'zstd', 'lz4'][f % 3]));
    }
    const overlay = await Overlay.open(`file://${root}/overlay`);
    const server = await startRangeServer(root);
    try {
      await overlay.registerParquetTable('t', `file://${root}/data`);
      const indexes = {};
      for (const [name, cols] of [['i_ab', ['a', 'b']], ['i_c', ['c']], ['i_bca', ['b', 'c', 'a']]]) {
        const spec = cols.map((col) => ({ col, desc: rnd(2) === 0, nullsFirst: rnd(2) === 0 }));
        indexes[name] = spec;
        await overlay.createIndex('t', name, spec.map((c) => ({ name: c.col, direction: c.desc ? 'desc' : 'asc', nulls: c.nullsFirst ? 'first' : 'last' })));
      }
      await overlay.build('t');
      await overlay.publish();
      const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data` } });
      const expect = (spec, pred) => rows.filter(pred).sort(order(spec)).map((r) => [r.file, BigInt(r.pos)]);

      let compared = 0;
      for (let i = 0; i < 80; i++) {
        const name = Object.keys(indexes)[rnd(3)];
        const spec = indexes[name];
        const kind = ['lookup', 'lookupMany', 'range', 'nulls'][rnd(4)];
        let args, want, refuse = false;
        const key = () => spec.map((c) => value(c.col));
        const matches = (r, k) => spec.every((c, j) => eqValue(c.col, r[c.col], k[j]));
        if (kind === 'lookup') {
          const k = key();
          args = [k];
          want = expect(spec, (r) => matches(r, k));
        } else if (kind === 'lookupMany') {
          const ks = Array.from({ length: rnd(4) }, key);
          args = [ks];
          want = expect(spec, (r) => ks.some((k) => matches(r, k)));
        } else if (kind === 'range') {
          const bound = () => {
            if (rnd(4) === 0) return null;
            const k = spec.slice(0, 1 + rnd(spec.length)).map((c) => { let v; do v = value(c.col); while (v === null && rnd(5)); return v; });
            return { key: k, inclusive: rnd(2) === 0 };
          };
          const lo = bound(), hi = bound(), reverse = rnd(2) === 0;
          args = [lo, hi, { reverse }];
          const lv = lo?.key ?? [], uv = hi?.key ?? [];
          let p = 0;
          if (lo && hi) while (p < lv.length && p < uv.length && lv[p] !== null && uv[p] !== null && cmpValue(spec[p].col, lv[p], uv[p]) === 0) p++;
          const deepest = Math.max(lv.length, uv.length);
          refuse = lv.includes(null) || uv.includes(null) || (deepest > p + 1 && spec.slice(p, deepest).some((c) => c.desc !== spec[p].desc));
          const nonNull = p < deepest ? p : !lo && !hi ? 0 : null;
          const ok = (r, b, lower) => {
            if (!b) return true;
            const o = rowCmp(r, spec, b.key);
            return o === null ? false : o === 0 ? b.inclusive : (o > 0) === lower;
          };
          want = expect(spec, (r) => ok(r, lo, true) && ok(r, hi, false) && (nonNull === null || r[spec[nonNull].col] !== null));
          if (reverse) want.reverse();
        } else {
          const n = 1 + rnd(spec.length);
          const prefix = spec.slice(0, n).map((c) => value(c.col));
          prefix[rnd(n)] = null;
          const reverse = rnd(2) === 0;
          args = [prefix, { reverse }];
          want = expect(spec, (r) => prefix.every((v, j) => (v === null ? r[spec[j].col] === null : eqValue(spec[j].col, r[spec[j].col], v))));
          if (reverse) want.reverse();
        }
        for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
          const label = `seed ${seed} ${who} ${kind} ${name} ${JSON.stringify(spec)} ${JSON.stringify(args)}`;
          if (refuse) {
            await assert.rejects(side[kind]('t', name, ...args), (e) => e.code === 'E_REFUSED', label);
          } else {
            const res = await side[kind]('t', name, ...args);
            assert.deepEqual(res.rows.map((r) => [r.file, r.position]), want, label);
            compared += want.length;
          }
        }
      }
      assert.ok(compared > 100, `rows compared for seed ${seed}: ${compared}`);
    } finally {
      await overlay.close();
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  }
});

test('random tables: bitmap and bloom indexes — count and query from addon and wasm match brute force, deleted and drifted files included', async () => {
  for (const seed of [5, 99]) {
    const rnd = makeRng(seed * 40503);
    const value = (col) => {
      if (rnd(6) === 0) return null;
      if (col === 'a') return rnd(7) - 3;
      if (col === 'b') return STRINGS[rnd(STRINGS.length)];
      return FLOATS[rnd(FLOATS.length)];
    };
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rand-kinds-'));
    fs.mkdirSync(path.join(root, 'data'));
    const files = {};
    const write = (file, n) => {
      const rs = [];
      for (let pos = 0; pos < n; pos++) rs.push({ a: value('a'), b: value('b'), c: value('c'), file, pos });
      fs.writeFileSync(path.join(root, 'data', file), writeParquet(COLUMNS, rs.map((r) => [r.a, r.b, r.c]), 25));
      files[file] = rs;
    };
    for (let f = 0; f < 5; f++) write(`f${f}.parquet`, 60 + rnd(100));
    const overlay = await Overlay.open(`file://${root}/overlay`);
    const server = await startRangeServer(root);
    try {
      await overlay.registerParquetTable('t', `file://${root}/data`);
      await overlay.createIndex('t', 'bm_a', ['a'], { kind: 'bitmap' });
      await overlay.createIndex('t', 'bm_c', [{ name: 'c', direction: 'desc' }], { kind: 'bitmap' });
      await overlay.createIndex('t', 'bloom_b', ['b'], { kind: 'bloom', fpp: 0.05 });
      await overlay.build('t');
      const dead = new Set([1, 4, 9, 16, 25].map((p) => `f1.parquet@${p}`));
      await overlay.registerDeletes('t', [{ file: 'f1.parquet', positions: [1n, 4n, 9n, 16n, 25n] }]);
      await overlay.publish();
      // f3 rewritten behind the overlay's back (another row count: drifted). A count that
      // trusts the published manifest (no `verify`) counts the rows it records: f3's old ones.
      const recorded = { ...files };
      write('f3.parquet', files['f3.parquet'].length + 7);
      const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data` } });
      const rows = () => Object.values(files).flat().filter((r) => !dead.has(`${r.file}@${r.pos}`));

      const condition = () => {
        const col = ['a', 'b', 'c'][rnd(3)];
        const v = () => { let x; do x = value(col); while (x === null); return x; };
        switch (rnd(4)) {
          case 0: return [col, { isNull: true }, (x) => x === null];
          case 1: { const xs = [v(), v(), v()].slice(0, 1 + rnd(3)); return [col, { in: xs }, (x) => xs.some((y) => eqValue(col, x, y))]; }
          default: { const y = v(); return [col, y, (x) => eqValue(col, x, y)]; }
        }
      };
      let byIndex = 0, compared = 0;
      for (let i = 0; i < 50; i++) {
        const conds = Array.from({ length: 1 + rnd(2) }, condition);
        const where = {};
        for (const [col, c] of conds) where[col] = c; // a repeated column keeps the last
        const live = conds.filter(([col], j) => conds.findLastIndex(([c2]) => c2 === col) === j);
        const want = rows().filter((r) => live.every(([col, , ok]) => ok(r[col]))).map((r) => `${r.file}@${r.pos}`).sort();
        for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
          const label = `seed ${seed} ${who} ${JSON.stringify(where, (_, x) => (Number.isNaN(x) ? 'NaN' : Object.is(x, -0) ? '-0' : x))}`;
          const c = await side.count('t', { where, verify: true });
          assert.equal(c.count, want.length, `${label} count ${JSON.stringify(c.stats, (_, x) => (typeof x === 'bigint' ? `${x}n` : x))}`);
          byIndex += c.stats.filesByIndex + c.stats.filesPruned;
          // Trusting the manifest: through the bitmap runs (5 files), no data file touched.
          const trusted = Object.values(recorded).flat().filter((r) => !dead.has(`${r.file}@${r.pos}`) && live.every(([col, , ok]) => ok(r[col])));
          const t = await side.count('t', { where });
          if (live.every(([col]) => col !== 'b')) {
            assert.equal(t.count, trusted.length, `${label} trusted count ${JSON.stringify(t.stats, (_, x) => (typeof x === 'bigint' ? `${x}n` : x))}`);
            assert.equal(t.stats.dataRequests, 0, `${label} trusted count read data`);
            assert.equal(t.stats.rejections.length, 0, `${label} trusted count rejected`);
          }
          const q = await side.query('t', { where, columns: [], verify: true });
          assert.deepEqual(q.refs.map((r) => `${r.file}@${r.position}`).sort(), want, `${label} query`);
          compared += want.length;
        }
      }
      assert.ok(compared > 200, `rows compared for seed ${seed}: ${compared}`);
      assert.ok(byIndex > 100, `files answered or pruned by an index for seed ${seed}: ${byIndex}`);
    } finally {
      await overlay.close();
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  }
});
