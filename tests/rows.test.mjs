// Row objects and row references as the addon hands them over (decision 83: built in
// JavaScript from flat values): every column an own, enumerable property in the table's
// order — `__proto__` and `constructor` included, never the prototype —, values as the
// file holds them, and references with no key left undefined (an object of another shape is
// built property by property: a `rowId` the answer lacks stays absent).
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

const COLUMNS = [
  { name: 'id', type: 'int64' },
  { name: '__proto__', type: 'string' },
  { name: 'constructor', type: 'string' },
  { name: 'v', type: 'float64' },
];

test('rows: every column is an own property, in order, whatever its name', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rows-'));
  fs.mkdirSync(path.join(root, 'data'));
  const N = 40;
  const written = Array.from({ length: N }, (_, i) => [i, i % 5 === 0 ? null : `p${i}`, `c${i}`, i % 7 === 0 ? NaN : i / 4]);
  fs.writeFileSync(path.join(root, 'data', 'x.parquet'), writeParquet(COLUMNS, written, 16));
  const overlay = await Overlay.open(`file://${root}/overlay`);
  try {
    await overlay.registerParquetTable('t', `file://${root}/data`);
    await overlay.createIndex('t', 'by_id', ['id'], { unique: true });
    await overlay.build('t');
    await overlay.publish();
    const server = await startRangeServer(root);
    const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data` } });
    try {
      for (const side of [overlay, reader]) await check(side);
    } finally {
      reader.free();
      await server.close();
    }
  } finally {
    await overlay.close();
    fs.rmSync(root, { recursive: true, force: true });
  }

  async function check(side) {
    for (const columns of [COLUMNS.map((c) => c.name), ['v', '__proto__'], []]) {
      const r = await side.query('t', { where: { id: { gte: 0 } }, columns });
      assert.equal(r.rows.length, N);
      const byId = new Map();
      r.refs.forEach((ref, k) => byId.set(Number(ref.position), r.rows[k]));
      for (const [i, row] of byId) {
        assert.equal(Object.getPrototypeOf(row), Object.prototype);
        assert.deepEqual(Object.keys(row), columns);
        for (const c of columns) {
          const d = Object.getOwnPropertyDescriptor(row, c);
          assert.ok(d && d.enumerable && d.writable, `${c} is an own data property`);
          const want = written[i][COLUMNS.findIndex((x) => x.name === c)];
          if (Number.isNaN(want)) assert.ok(Number.isNaN(d.value));
          else assert.equal(d.value, want, `${c} of row ${i}`);
        }
      }
      assert.equal(JSON.stringify(Object.keys(Object.prototype)), '[]', 'Object.prototype untouched');
      // References: one per row, no key whose value is undefined.
      assert.equal(r.refs.length, N);
      for (const ref of r.refs) {
        assert.deepEqual(Object.keys(ref), ['file', 'position', 'rowId']);
        assert.equal(ref.file, 'x.parquet');
        assert.equal(typeof ref.position, 'bigint');
        assert.equal(typeof ref.rowId, 'bigint');
      }
      assert.deepEqual([...byId.keys()].sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i));
    }
  }
});
