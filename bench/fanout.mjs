// Build fan-out benchmark (issue 20): a table of many Parquet files built through BullMQ (on a
// Redis server started here) by 1, 2 and 4 worker processes and one committer, beside a local
// `build()` of the same table in the same run. Reports per run the time to plan, build and
// commit, the total, the ratio to the local build, and the committer's cost per file (the
// commit re-reads and hashes each bundle object, checks each receipt in its transaction and
// commits in batches of 64 files).
//
// This machine has 2 cores: more than 2 workers only add processes competing for them, so the
// curve shows the split's overhead and the scaling up to the core count, not beyond.
//
//   node bench/fanout.mjs [--files 200] [--rows 10000]   (npm run bench builds release first)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { startRedis } from '../examples/fanout-bullmq/redis.mjs';
import { fanoutBuild } from '../examples/fanout-bullmq/fanout.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');

const { values } = parseArgs({ options: { files: { type: 'string', default: '200' }, rows: { type: 'string', default: '10000' } } });
const FILES = Number(values.files);
const ROWS = Number(values.rows);
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-fanout-bench-'));
const data = path.join(root, 'data');
fs.mkdirSync(data);
for (let i = 0; i < FILES; i++) {
  fs.writeFileSync(path.join(data, `part-${String(i).padStart(4, '0')}.parquet`), sampleOrdersParquet(i * ROWS, ROWS, 2_500));
}
console.log(`data: ${FILES} files × ${ROWS} rows (${FILES * ROWS} rows); indexes: by_id (unique), by_customer\n`);

async function fresh(name) {
  const url = `file://${path.join(root, name)}`;
  const o = await Overlay.open(url);
  await o.registerParquetTable('orders', `file://${data}`);
  await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await o.createIndex('orders', 'by_customer', ['customer']);
  return { url, o };
}

const local = await fresh('local');
let t0 = performance.now();
await local.o.build('orders');
const localMs = performance.now() - t0;
await local.o.close();

const redis = await startRedis();
const rows = [];
try {
  for (const workers of [1, 2, 4]) {
    const { url, o } = await fresh(`fanout-${workers}`);
    t0 = performance.now();
    const r = await fanoutBuild(o, 'orders', { overlayUrl: url, redisUrl: redis.url, workers });
    const total = performance.now() - t0;
    if (r.report.committed.length !== FILES) throw new Error(`committed ${r.report.committed.length} of ${FILES}: ${JSON.stringify(r.report.refused.slice(0, 3))}`);
    rows.push({ workers, ...r.ms, total, txns: r.report.transactions });
    await o.close();
  }
} finally {
  await redis.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
console.log('| build | plan | workers build | commit | total | ÷ local build() | commit per file |');
console.log('|---|---|---|---|---|---|---|');
console.log(`| local build() | | | | ${(localMs / 1000).toFixed(2)} s | 1.00× | |`);
for (const r of rows) {
  console.log(`| BullMQ, ${r.workers} worker${r.workers > 1 ? 's' : ''} | ${r.plan.toFixed(0)} ms | ${(r.build / 1000).toFixed(2)} s | ${r.commit.toFixed(0)} ms (${r.txns} txns) | ${(r.total / 1000).toFixed(2)} s | ${(r.total / localMs).toFixed(2)}× | ${(r.commit / FILES).toFixed(2)} ms |`);
}
const [one, , four] = rows;
console.log(`\nworkers build, 1 → 2 workers: ${(rows[0].build / rows[1].build).toFixed(2)}× faster; 1 → 4: ${(one.build / four.build).toFixed(2)}× (2 cores)`);
