import fs from 'node:fs'; import path from 'node:path'; import os from 'node:os'; import crypto from 'node:crypto';
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cbp-'));
const data = path.join(root, 'data/orders'); fs.mkdirSync(data, { recursive: true });
for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(data, `part-${i}.parquet`), sampleOrdersParquet(i * 15000, 15000, 2500, 'snappy'));
const o = await Overlay.open(`file://${root}/overlay`);
await o.registerParquetTable('orders', `file://${data}`);
await o.createIndex('orders', 'by_customer', ['customer']);
await o.build('orders'); await o.publish(); await o.close();
const withEtag = process.argv[2] === 'etag';
const log = [];
const src = (dir) => ({
  async readRange(p, off, len) { const b = fs.readFileSync(path.join(dir, p)); log.push(['read', p, off, len]); const bytes = b.subarray(off, off + len); return withEtag ? { bytes, etag: `"${crypto.createHash('md5').update(b).digest('hex')}"` } : bytes; },
  async size(p) { let b; try { b = fs.readFileSync(path.join(dir, p)); } catch { return null; } log.push(['size', p]); return withEtag ? { size: b.length, etag: `"${crypto.createHash('md5').update(b).digest('hex')}"` } : b.length; },
});
const r = await OverlayReader.open(src(path.join(root, 'overlay')), { tables: { orders: src(data) } });
r.on('warning', (w) => console.log('warning', JSON.stringify(w)));
const q = { where: { customer: 'customer-00042', amount: { gt: 600 } }, columns: ['order_id', 'amount', 'day'] };
for (let i = 0; i < 3; i++) { log.length = 0; const res = await r.query('orders', q); console.log(i, res.rows.length, res.stats.requests, log.filter(l=>l[1].includes('part')).map(l => l.join(':')).join(' ')); }
fs.rmSync(root, { recursive: true, force: true });
