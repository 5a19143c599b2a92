// Skerry's build fan-out on BullMQ, end to end: a sample table of many small Parquet files,
// a Redis server started here (Debian's `redis-server`), N worker processes building bundles,
// one committer. Prints the commit report, the time of each phase and a lookup.
//
//   node examples/fanout-bullmq/main.mjs [--files 40] [--workers 4] [--redis redis://host:port]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { startRedis } from './redis.mjs';
import { fanoutBuild } from './fanout.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');

const { values } = parseArgs({ options: { files: { type: 'string', default: '40' }, workers: { type: 'string', default: '4' }, redis: { type: 'string' } } });
const files = Number(values.files);
const rows = 2_000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-fanout-'));
fs.mkdirSync(path.join(dir, 'data'));
for (let i = 0; i < files; i++) {
  fs.writeFileSync(path.join(dir, 'data', `part-${String(i).padStart(4, '0')}.parquet`), sampleOrdersParquet(i * rows, rows, 500));
}
const overlayUrl = `file://${path.join(dir, 'overlay')}`;
const overlay = await Overlay.open(overlayUrl);
await overlay.registerParquetTable('orders', `file://${path.join(dir, 'data')}`);
await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
await overlay.createIndex('orders', 'by_customer', ['customer']);

const redis = values.redis ? { url: values.redis, stop: async () => {} } : await startRedis();
try {
  const r = await fanoutBuild(overlay, 'orders', { overlayUrl, redisUrl: redis.url, workers: Number(values.workers) });
  console.log(`${r.tasks} tasks, ${values.workers} workers: plan ${r.ms.plan.toFixed(0)} ms, build ${r.ms.build.toFixed(0)} ms, commit ${r.ms.commit.toFixed(0)} ms`);
  console.log(`committed ${r.report.committed.length} files (${r.report.entries} entries, ${r.report.transactions} transactions), refused ${r.report.refused.length}`);
  console.log(`${r.runTasks} run tasks written by the workers in ${r.ms.runsBuild.toFixed(0)} ms: committed ${r.runs.runs.length} runs, refused ${r.runs.refused.length}`);
  for (const ix of await overlay.listIndexes('orders')) console.log(`${ix.name}: ${ix.state}`);
  const hit = await overlay.lookup('orders', 'by_id', files * rows - 7);
  console.log(`order ${files * rows - 7}: ${JSON.stringify(hit.rows.map((x) => ({ file: x.file, position: Number(x.position) })))}`);
} finally {
  await redis.stop();
  await overlay.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
