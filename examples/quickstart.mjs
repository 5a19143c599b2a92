// Skerry's main job on an embedded default: generate sample Parquet files, keep an overlay
// index beside them on local disk, publish it, and answer the same lookups natively (Node
// addon) and from WebAssembly over HTTP range reads.
//
//   node examples/quickstart.mjs [dir]      (default: ./skerry-quickstart)
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const dir = path.resolve(process.argv[2] || 'skerry-quickstart');
fs.rmSync(dir, { recursive: true, force: true });
const dataDir = path.join(dir, 'data/orders');
fs.mkdirSync(dataDir, { recursive: true });

// 1. Sample data: three Parquet files, 50,000 orders each, in three codecs.
const codecs = ['snappy', 'zstd', 'lz4'];
for (let i = 0; i < 3; i++) {
  fs.writeFileSync(path.join(dataDir, `part-${i}.parquet`), sampleOrdersParquet(i * 50_000, 50_000, 10_000, codecs[i]));
}
console.log(`sample data      ${dataDir} (3 Parquet files, 150,000 orders)`);

// 2. An overlay on local disk: SlateDB catalog, one Puffin bundle per data file.
const overlay = await Overlay.open(`file://${path.join(dir, 'overlay')}`);
const table = await overlay.registerParquetTable('orders', `file://${dataDir}`);
console.log(`registered       ${table.name}: ${table.files} files, ${table.rows} rows, columns ${table.fields.map((f) => f.name).join(', ')}`);
await overlay.createIndex('orders', 'by_customer', ['customer']);
await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
let t0 = performance.now();
const built = await overlay.build('orders');
console.log(`built            ${built.entries} index entries in ${built.bundlesWritten} bundles (${built.bytesWritten} bytes) in ${(performance.now() - t0).toFixed(0)} ms`);
const published = await overlay.publish();
console.log(`published        manifest v${published.version} (${published.path})`);

// 3. Serve the folder over HTTP (Range requests) and open it read-only from wasm.
const server = await startRangeServer(dir);
const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data/orders` } });

const show = (rows) => rows.slice(0, 3).map((r) => `${r.file}@${r.position}`).join(' ') + (rows.length > 3 ? ` … (${rows.length} rows)` : ` (${rows.length} rows)`);
console.log('\nlookup                               addon (native)                          wasm (HTTP range reads)');
let mismatches = 0;
for (const [index, key] of [['by_id', 123_456], ['by_customer', 'customer-00042'], ['by_customer', 'nobody']]) {
  const a = await overlay.lookup('orders', index, key);
  server.reset();
  t0 = performance.now();
  const w = await reader.lookup('orders', index, key);
  const ms = performance.now() - t0;
  const same = JSON.stringify(a.rows, (k, v) => (typeof v === 'bigint' ? String(v) : v)) === JSON.stringify(w.rows, (k, v) => (typeof v === 'bigint' ? String(v) : v));
  if (!same) mismatches++;
  console.log(`${`${index} = ${JSON.stringify(key)}`.padEnd(36)} ${show(a.rows).padEnd(40)} ${show(w.rows)}  [${same ? 'same' : 'DIFFERENT'}; ${server.stats.requests} requests, ${server.stats.bytes} bytes, ${ms.toFixed(1)} ms]`);
}

// 4. A question of the table, not of an index: the planner picks by_customer, reads the
// amount of its rows by page (a residual condition), and fetches the requested columns.
const question = { where: { customer: 'customer-00042', amount: { gt: 600 } }, columns: ['order_id', 'amount'] };
const qa = await overlay.query('orders', question);
server.reset();
t0 = performance.now();
const qw = await reader.query('orders', question);
const qms = performance.now() - t0;
const sameQuery = JSON.stringify(qa.rows) === JSON.stringify(qw.rows);
if (!sameQuery) mismatches++;
console.log(`\nquery ${JSON.stringify(question.where)}`);
console.log(`  ${qa.rows.length} rows, first ${JSON.stringify(qa.rows[0])}; index ${qa.stats.index} on [${qa.stats.indexColumns}], residual [${qa.stats.residual}]; ` +
  `files by index ${qa.stats.filesByIndex}, scanned ${qa.stats.filesScanned}, pruned ${qa.stats.filesPruned}`);
console.log(`  wasm: (${sameQuery ? 'same rows' : 'DIFFERENT rows'}; ${server.stats.requests} requests, ${server.stats.bytes} bytes, ${qms.toFixed(1)} ms)`);

await overlay.close();
await server.close();
if (mismatches) {
  console.error(`\n${mismatches} lookups differ between the addon and wasm`);
  process.exit(1);
}
console.log(`\nThe addon and wasm agree. Overlay and data are in ${dir}.`);
