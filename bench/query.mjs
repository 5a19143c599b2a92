// End-to-end `query` benchmark: a sample `orders` table (2M rows in 20 Parquet files by
// default; SKERRY_BENCH_ROWS and SKERRY_BENCH_FILES to change them) with indexes on order_id, customer and
// (customer, day), queried per shape with indexes and with forced scans (statistics and page
// index pruning still on) in the same run, from the Node addon and from the wasm reader over
// HTTP range reads. Reports requests, bytes and the median wall time of SKERRY_BENCH_RUNS
// (5) timed runs per shape and the scan/index ratios; checks both ways return the same rows.
// With SKERRY_BENCH_BASELINE (bench/baseline.mjs) every shape also runs through a baseline
// build, interleaved, with now/baseline ratios.
//
//   node bench/query.mjs            (npm run bench runs it after building)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';
import { baseline, sideBySide } from './baseline.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const ROWS = Number(process.env.SKERRY_BENCH_ROWS || 2_000_000);
const FILES = Number(process.env.SKERRY_BENCH_FILES || 20);
const perFile = Math.floor(ROWS / FILES);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-qbench-'));
const data = path.join(dir, 'data');
fs.mkdirSync(data, { recursive: true });

let t0 = performance.now();
for (let i = 0; i < FILES; i++) {
  fs.writeFileSync(path.join(data, `p${String(i).padStart(3, '0')}.parquet`), sampleOrdersParquet(i * perFile, perFile, 100_000, 'snappy'));
}
const overlay = await Overlay.open(`file://${dir}/overlay`);
await overlay.registerParquetTable('orders', `file://${data}`);
await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
await overlay.createIndex('orders', 'by_customer', ['customer']);
await overlay.createIndex('orders', 'by_customer_day', ['customer', 'day']);
const built = await overlay.build('orders');
await overlay.publish();
console.log(`setup: ${perFile * FILES} rows in ${FILES} files, ${built.entries} entries, ${built.bytesWritten} bundle bytes, ${((performance.now() - t0) / 1000).toFixed(1)} s`);

const server = await startRangeServer(dir);
const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });

const id = (f) => Math.floor(ROWS * f);
const shapes = {
  point: { where: { order_id: id(0.61) } },
  in10: { where: { order_id: { in: Array.from({ length: 10 }, (_, i) => (31_337 + i * 99_991) % ROWS) } } },
  range1000: { where: { order_id: { gte: id(0.25), lt: id(0.25) + 1000 } } },
  // 100,000 rows with every column: what materialising rows as JS objects costs.
  range100k: { where: { order_id: { gte: id(0.4), lt: id(0.4) + 100_000 } } },
  customer: { where: { customer: 'customer-01234' } },
  'customer refs only': { where: { customer: 'customer-01234' }, columns: [] },
  'customer+day+residual': { where: { customer: 'customer-01234', day: { between: [19100, 19200] }, amount: { gt: 500 } } },
  'is_null limit 100': { where: { customer: null }, limit: 100 },
  'unindexed limit 10': { where: { amount: 1.25 }, limit: 10 },
};

// Timed runs per shape after one warm-up (manifest, directories); the median is reported.
const RUNS = Number(process.env.SKERRY_BENCH_RUNS || 5);

async function measure(side, options, scanOnly) {
  side.setScanOnly(scanOnly);
  await side.query('orders', options);
  const times = [];
  let r;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    r = await side.query('orders', options);
    times.push(performance.now() - t);
  }
  side.setScanOnly(false);
  times.sort((a, b) => a - b);
  return { r, ms: times[Math.floor(times.length / 2)] };
}

const key = (r) => r.refs.map((x) => `${x.file}@${x.position}`).join(',');
const out = [];
for (const [name, options] of Object.entries(shapes)) {
  for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
    const idx = await measure(side, options, false);
    const scan = await measure(side, options, true);
    if (key(idx.r) !== key(scan.r)) throw new Error(`${name}/${who}: index and scan disagree`);
    const s = idx.r.stats, c = scan.r.stats;
    out.push({
      query: name, via: who, rows: idx.r.refs.length, index: s.index ?? '-',
      'idx req': s.requests, 'idx bytes': s.bytes, 'idx ms': +idx.ms.toFixed(2),
      'scan req': c.requests, 'scan bytes': c.bytes, 'scan ms': +scan.ms.toFixed(1),
      'scan/idx time': +(scan.ms / Math.max(idx.ms, 0.01)).toFixed(1),
      'scan/idx bytes': +(c.bytes / Math.max(s.bytes, 1)).toFixed(1),
    });
  }
}
console.table(out);
// With SKERRY_BENCH_BASELINE: every shape through this build and the baseline's, read-only
// handles on the same published overlay.
const base = baseline();
if (base) {
  const url = `file://${dir}/overlay`;
  const nowRo = await Overlay.open(url, { readOnly: true });
  const baseRo = await base.Overlay.open(url, { readOnly: true });
  const baseWasm = await base.OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });
  console.log(`this build vs the baseline (${base.dir}), same run:`);
  console.table(await sideBySide([['addon', nowRo, baseRo], ['wasm', reader, baseWasm]],
    Object.entries(shapes).map(([name, options]) => [name, (x) => x.query('orders', options)])));
  await nowRo.close();
  await baseRo.close();
}
await overlay.close();
await server.close();
fs.rmSync(dir, { recursive: true, force: true });
