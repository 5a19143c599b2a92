// Random accessor calls — lookup, IN, range (with refusals) and IS NULL — on a multi-file
// table with NULLs, duplicates and a composite DESC/NULLS FIRST index: the addon and the
// wasm reader must both return exactly the rows a brute-force evaluation of the generator
// gives, in the index's order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const PER_FILE = 1500, FILES = 5, N = PER_FILE * FILES;
const customerOf = (id) => (id % 97 === 13 ? null : `customer-${String((id * 7919) % 5000).padStart(5, '0')}`);
const ROWS = Array.from({ length: N }, (_, id) => ({ id, file: `p${Math.floor(id / PER_FILE)}.parquet`, pos: id % PER_FILE, customer: customerOf(id), day: 19000 + (id % 365) }));

// Index definitions: columns with direction and NULL placement.
const INDEXES = {
  by_id: [{ col: 'id', desc: false, nullsFirst: false }],
  by_customer: [{ col: 'customer', desc: false, nullsFirst: false }],
  by_customer_day: [{ col: 'customer', desc: true, nullsFirst: true }, { col: 'day', desc: false, nullsFirst: false }],
};

const cmpVal = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
// The index's stored order: per column NULL placement, then direction; then file, position.
function indexOrder(spec) {
  return (x, y) => {
    for (const c of spec) {
      const a = x[c.col], b = y[c.col];
      if (a === null || b === null) {
        if (a === b) continue;
        return (a === null) === c.nullsFirst ? -1 : 1;
      }
      const o = cmpVal(a, b) * (c.desc ? -1 : 1);
      if (o) return o;
    }
    return cmpVal(x.file, y.file) || cmpVal(x.pos, y.pos);
  };
}
// SQL row comparison of a row's leading columns with a bound tuple; null when a NULL decides.
function rowCmp(row, spec, tuple) {
  for (let i = 0; i < tuple.length; i++) {
    const v = row[spec[i].col];
    if (v === null) return null;
    const o = cmpVal(v, tuple[i]);
    if (o) return o;
  }
  return 0;
}

let root, server, overlay, reader;
before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-acc-'));
  fs.mkdirSync(path.join(root, 'data'));
  for (let f = 0; f < FILES; f++) fs.writeFileSync(path.join(root, 'data', `p${f}.parquet`), sampleOrdersParquet(f * PER_FILE, PER_FILE, 500, ['snappy', 'zstd', 'lz4'][f % 3]));
  overlay = await Overlay.open(`file://${root}/overlay`);
  await overlay.registerParquetTable('orders', `file://${root}/data`);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.createIndex('orders', 'by_customer', ['customer']);
  await overlay.createIndex('orders', 'by_customer_day', [{ name: 'customer', direction: 'desc', nulls: 'first' }, 'day']);
  await overlay.build('orders');
  await overlay.publish();
  server = await startRangeServer(root);
  reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });
});
after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

let seed = 0x2545f491;
const rnd = (n) => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) % n; };
const randomValue = (col) => {
  if (rnd(8) === 0) return null;
  if (col === 'id') return rnd(N + 20) - 10;
  if (col === 'day') return 18990 + rnd(380);
  return customerOf(rnd(N));
};
const keyOf = (spec) => spec.map((c) => randomValue(c.col));

const expectRows = (spec, pred) => ROWS.filter(pred).sort(indexOrder(spec)).map((r) => [r.file, BigInt(r.pos)]);
const got = (res) => res.rows.map((r) => [r.file, r.position]);

test('random accessor calls match brute force from the addon and from wasm', async () => {
  let checked = 0, refused = 0;
  for (let i = 0; i < 160; i++) {
    const name = Object.keys(INDEXES)[rnd(3)];
    const spec = INDEXES[name];
    const kind = ['lookup', 'lookupMany', 'range', 'nulls'][rnd(4)];
    let args, want, refuse = false;
    if (kind === 'lookup') {
      const key = keyOf(spec);
      args = [key.length === 1 ? key[0] : key];
      want = key.includes(null) ? [] : expectRows(spec, (r) => spec.every((c, j) => r[c.col] === key[j]));
    } else if (kind === 'lookupMany') {
      const keys = Array.from({ length: rnd(5) }, () => keyOf(spec));
      args = [keys];
      want = expectRows(spec, (r) => keys.some((k) => !k.includes(null) && spec.every((c, j) => r[c.col] === k[j])));
    } else if (kind === 'range') {
      const bound = () => {
        if (rnd(4) === 0) return null;
        const len = 1 + rnd(spec.length);
        const key = spec.slice(0, len).map((c) => { let v; do v = randomValue(c.col); while (v === null && rnd(6)); return v; });
        return { key, inclusive: rnd(2) === 0 };
      };
      const lo = bound(), hi = bound();
      const reverse = rnd(2) === 0;
      args = [lo, hi, { reverse }];
      const lv = lo?.key ?? [], uv = hi?.key ?? [];
      const both = lo && hi;
      let p = 0;
      if (both) while (p < lv.length && p < uv.length && lv[p] === uv[p]) p++;
      const deepest = Math.max(lv.length, uv.length);
      const mixed = deepest > p + 1 && spec.slice(p, deepest).some((c) => c.desc !== spec[p].desc);
      refuse = mixed || lv.includes(null) || uv.includes(null);
      const nonNull = p < deepest ? p : !lo && !hi ? 0 : null;
      const ok = (row, b, lower) => {
        if (!b) return true;
        const o = rowCmp(row, spec, b.key);
        if (o === null) return false;
        return o === 0 ? b.inclusive : (o > 0) === lower;
      };
      want = expectRows(spec, (r) => ok(r, lo, true) && ok(r, hi, false) && (nonNull === null || r[spec[nonNull].col] !== null));
      if (reverse) want.reverse();
    } else {
      const n = 1 + rnd(spec.length);
      const prefix = spec.slice(0, n).map((c) => randomValue(c.col));
      prefix[rnd(n)] = null;
      const reverse = rnd(2) === 0;
      args = [prefix, { reverse }];
      want = expectRows(spec, (r) => prefix.every((v, j) => (v === null ? r[spec[j].col] === null : r[spec[j].col] === v)));
      if (reverse) want.reverse();
    }
    for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
      const label = `${who} ${kind} ${name} ${JSON.stringify(args)}`;
      if (refuse) {
        await assert.rejects(side[kind]('orders', name, ...args), (e) => e.code === 'E_REFUSED', label);
        refused++;
      } else {
        assert.deepEqual(got(await side[kind]('orders', name, ...args)), want, label);
        checked += want.length;
      }
    }
  }
  assert.ok(checked > 1000, `rows compared: ${checked}`);
  assert.ok(refused > 0, 'some tuple windows were refused');
});
