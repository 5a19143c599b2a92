// Counts at table scale from the wasm reader over HTTP (issue "Full text and counts at
// lakehouse scale"): the same 200k rows in 10 and in 200 files under a bitmap index; a count
// trusts the published manifest (no request per data file) and reads the index's table run,
// so a warm count is at most 2 requests whatever the number of files, and requests and bytes
// per count, cold and warm, differ by at most 1.5× between the two tables — counted by the
// range server. The answers equal the addon's and a scan's. A query by the bitmap reads the
// run too: at most 2 index requests per value, whatever the number of files.
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

const ROWS = 200_000;
let root, server;
const overlays = {};

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-counts-'));
  for (const files of [10, 200]) {
    const dir = path.join(root, `data${files}`);
    fs.mkdirSync(dir, { recursive: true });
    const per = ROWS / files;
    for (let f = 0; f < files; f++) {
      fs.writeFileSync(path.join(dir, `p${String(f).padStart(3, '0')}.parquet`), sampleOrdersParquet(f * per, per, per, 'snappy'));
    }
    const o = await Overlay.open(`file://${root}/overlay${files}`);
    await o.registerParquetTable('orders', `file://${dir}`);
    await o.createIndex('orders', 'by_day', ['day'], { kind: 'bitmap' });
    await o.build('orders');
    await o.publish();
    overlays[files] = o;
  }
  server = await startRangeServer(root, { latencyMs: 20 });
});

after(async () => {
  for (const o of Object.values(overlays)) await o.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

// `day` is 19000 + id % 365 (a Date32: days since the epoch, as hosts spell dates).
const day = (k) => 19_000 + k;
const rowsOf = (ks) => ks.reduce((n, k) => n + Math.floor(ROWS / 365) + (k < ROWS % 365 ? 1 : 0), 0);

test('a count costs the same in 10 and in 200 files: warm ≤ 2 requests, within 1.5× cold and warm', async () => {
  const seen = {};
  for (const files of [10, 200]) {
    const reader = await OverlayReader.open(`${server.url}/overlay${files}`, { tables: { orders: `${server.url}/data${files}` } });
    server.reset();
    const first = await reader.count('orders', { where: { day: day(3) } });
    assert.equal(first.count, rowsOf([3]));
    const cold = { requests: server.stats.requests, bytes: server.stats.bytes, trips: server.stats.trips };
    assert.ok(cold.trips <= 4, `${files} files cold: ${JSON.stringify(server.stats.log)}`);
    assert.ok(!server.stats.log.some((l) => l.path.includes(`/data${files}/`)), `${files} files: a data file was touched`);
    let requests = 0, bytes = 0;
    const cases = [[7], [100, 200, 300], [364], [0, 1, 2, 3, 4, 5, 6]];
    for (const ks of cases) {
      const where = { day: ks.length === 1 ? day(ks[0]) : { in: ks.map(day) } };
      server.reset();
      const c = await reader.count('orders', { where });
      assert.equal(c.count, rowsOf(ks), `${files} files ${JSON.stringify(where)}`);
      assert.ok(server.stats.requests <= 2, `${files} files warm: ${JSON.stringify(server.stats.log)}`);
      requests += server.stats.requests;
      bytes += server.stats.bytes;
      const a = await overlays[files].count('orders', { where });
      assert.equal(a.count, c.count);
    }
    seen[files] = { cold, requests: requests / cases.length, bytes: bytes / cases.length };
    // A wrong count would show here: the scan agrees.
    const scan = await overlays[files].count('orders', { where: { day: day(7) }, verify: true });
    assert.equal(scan.count, rowsOf([7]));
  }
  console.log(`counts over HTTP: ${JSON.stringify(seen)}`);
  const within = (a, b) => b <= 1.5 * Math.max(a, 1) && a <= 1.5 * Math.max(b, 1);
  assert.ok(within(seen[10].cold.requests, seen[200].cold.requests), JSON.stringify(seen));
  assert.ok(within(seen[10].cold.bytes, seen[200].cold.bytes), JSON.stringify(seen));
  assert.ok(within(seen[10].requests, seen[200].requests), JSON.stringify(seen));
  assert.ok(within(seen[10].bytes, seen[200].bytes), JSON.stringify(seen));
});

test('a query by bitmap reads the index in the same few requests in 10 and in 200 files (2 per value)', async () => {
  const seen = {};
  for (const files of [10, 200]) {
    const reader = await OverlayReader.open(`${server.url}/overlay${files}`, { tables: { orders: `${server.url}/data${files}` } });
    await reader.count('orders', { where: { day: day(1) } }); // the manifest and the run's directory
    const index = () => server.stats.log.filter((l) => l.path.includes(`/overlay${files}/`));
    let requests = 0;
    for (const ks of [[7], [100, 200], [364]]) {
      const where = { day: ks.length === 1 ? day(ks[0]) : { in: ks.map(day) } };
      server.reset();
      const r = await reader.query('orders', { where, columns: [] });
      assert.equal(r.refs.length, rowsOf(ks), `${files} files ${JSON.stringify(where)}`);
      // Per value, one range of the run's files holding it and one of their bitmaps — not
      // one per file.
      assert.ok(index().length <= 2 * ks.length, `${files} files: ${JSON.stringify(index())}`);
      assert.equal(r.stats.filesByIndex + r.stats.filesPruned, files, JSON.stringify(r.stats));
      requests += index().length;
      const a = await overlays[files].query('orders', { where, columns: [] });
      assert.deepEqual(a.refs.map((x) => `${x.file}:${x.position}`).sort(), r.refs.map((x) => `${x.file}:${x.position}`).sort());
      assert.ok(a.stats.indexRequests <= 2 * ks.length, JSON.stringify(a.stats));
    }
    seen[files] = requests / 3;
  }
  console.log(`query by bitmap, index requests per query over HTTP: ${JSON.stringify(seen)}`);
  assert.equal(seen[10], seen[200]);
});
