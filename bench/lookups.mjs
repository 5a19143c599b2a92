// End-to-end lookup benchmark: a sample `orders` table (2M rows in 20 Parquet files by
// default; SKERRY_BENCH_ROWS to change it) indexed by the Node addon, then point, IN-10,
// range and IS NULL queries answered with the index and by scanning every file (the same
// run, same process), from the addon and from the wasm reader over HTTP range reads.
// Reports range requests, bytes and wall time per query and the scan/index ratios.
//
//   node bench/lookups.mjs            (npm run bench runs it after building)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const ROWS = Number(process.env.SKERRY_BENCH_ROWS || 2_000_000);
const FILES = 20;
const perFile = Math.floor(ROWS / FILES);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-bench-'));
const data = path.join(dir, 'data');
fs.mkdirSync(data, { recursive: true });

let t0 = performance.now();
for (let i = 0; i < FILES; i++) {
  fs.writeFileSync(path.join(data, `p${String(i).padStart(2, '0')}.parquet`), sampleOrdersParquet(i * perFile, perFile, 100_000, 'snappy'));
}
const overlay = await Overlay.open(`file://${dir}/overlay`);
await overlay.registerParquetTable('orders', `file://${data}`);
await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
await overlay.createIndex('orders', 'by_customer', ['customer']);
const built = await overlay.build('orders');
await overlay.publish();
console.log(`setup: ${perFile * FILES} rows in ${FILES} files, ${built.entries} entries, ${built.bytesWritten} bundle bytes, ${((performance.now() - t0) / 1000).toFixed(1)} s`);

const server = await startRangeServer(dir);
const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });

const shapes = {
  point: (s) => s.lookup('orders', 'by_id', Math.floor(ROWS * 0.61)),
  in10: (s) => s.lookupMany('orders', 'by_id', Array.from({ length: 10 }, (_, i) => (31_337 + i * 99_991) % ROWS)),
  range1000: (s) => s.range('orders', 'by_id', { key: Math.floor(ROWS / 4) }, { key: Math.floor(ROWS / 4) + 1000, inclusive: false }),
  is_null: (s) => s.nulls('orders', 'by_customer', [null]),
};

async function measure(side, query, scanOnly) {
  side.setScanOnly(scanOnly);
  await query(side); // warm: manifest, directories
  server.reset();
  const t = performance.now();
  const r = await query(side);
  const ms = performance.now() - t;
  side.setScanOnly(false);
  return { r, ms, http: { requests: server.stats.requests, bytes: server.stats.bytes } };
}

const rows = [];
for (const [name, query] of Object.entries(shapes)) {
  for (const [who, side] of [['addon', overlay], ['wasm', reader]]) {
    const idx = await measure(side, query, false);
    const scan = await measure(side, query, true);
    const same = JSON.stringify(idx.r.rows, (k, v) => (typeof v === 'bigint' ? String(v) : v)) === JSON.stringify(scan.r.rows, (k, v) => (typeof v === 'bigint' ? String(v) : v));
    if (!same) throw new Error(`${name}/${who}: index and scan disagree`);
    const reqI = who === 'wasm' ? idx.http.requests : idx.r.stats.indexRequests;
    const bytesI = who === 'wasm' ? idx.http.bytes : idx.r.stats.indexBytes;
    const reqS = who === 'wasm' ? scan.http.requests : scan.r.stats.dataRequests;
    const bytesS = who === 'wasm' ? scan.http.bytes : scan.r.stats.dataBytes;
    rows.push({ query: name, via: who, rows: idx.r.rows.length, index_requests: reqI, index_bytes: bytesI, index_ms: +idx.ms.toFixed(2), scan_requests: reqS, scan_bytes: bytesS, scan_ms: +scan.ms.toFixed(1), 'scan/index time': +(scan.ms / Math.max(idx.ms, 0.01)).toFixed(0), 'scan/index bytes': +(bytesS / Math.max(bytesI, 1)).toFixed(0) });
  }
}
console.table(rows);
await overlay.close();
await server.close();
fs.rmSync(dir, { recursive: true, force: true });
