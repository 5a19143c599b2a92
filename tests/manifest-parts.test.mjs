// Split manifests in the real runtimes (issue 14, manifest at scale): a writer opened with
// `manifestPartBytes: 0` publishes every index's lists as parts beside the root; the wasm
// reader over HTTP opens the root only (HEAD + manifest), reads an index's part the first
// time a query uses that index (one request), answers exactly as the addon does, and refuses
// a part whose bytes are not the ones the root recorded (E_MANIFEST).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const FILES = 4;
const PER = 5_000;
let root, server, overlay;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-parts-'));
  fs.mkdirSync(path.join(root, 'data'), { recursive: true });
  for (let f = 0; f < FILES; f++) {
    fs.writeFileSync(path.join(root, 'data', `p${f}.parquet`), sampleOrdersParquet(f * PER, PER, 1_000, 'snappy'));
  }
  overlay = await Overlay.open(`file://${root}/overlay`, { manifestPartBytes: 0 });
  await overlay.registerParquetTable('orders', `file://${root}/data`);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.createIndex('orders', 'by_customer', ['customer']);
  await overlay.build('orders');
  await overlay.publish();
  server = await startRangeServer(root);
});

after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const open = () => OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });
const columns = ['order_id', 'customer', 'amount'];
const partPaths = () => {
  const dir = fs.readdirSync(path.join(root, 'overlay', 'manifests')).find((n) => /^\d{20}$/.test(n));
  return fs.readdirSync(path.join(root, 'overlay', 'manifests', dir)).map((n) => `/overlay/manifests/${dir}/${n}`);
};

test('the wasm reader reads a part on first use of its index and answers like the addon', async () => {
  const parts = partPaths();
  assert.equal(parts.length, 2, 'one part per index');
  server.reset();
  const reader = await open();
  const opened = server.stats.log.map((l) => l.path);
  assert.ok(opened.every((p) => !parts.includes(p)), `open reads no part: ${JSON.stringify(opened)}`);
  // The root rides in HEAD (decision 72): one request opens the reader.
  assert.equal(opened.length, 1, JSON.stringify(opened));
  assert.match(opened[0], /\/manifests\/HEAD$/);

  server.reset();
  const id = 2 * PER + 17;
  const w = await reader.query('orders', { where: { order_id: id }, columns });
  const a = await overlay.query('orders', { where: { order_id: id }, columns });
  assert.deepEqual(w.rows, a.rows);
  assert.deepEqual(w.rows.map((r) => Number(r.order_id)), [id]);
  assert.equal(w.stats.index, 'by_id');
  assert.equal(w.stats.filesScanned, 0);
  const read = server.stats.log.map((l) => l.path).filter((p) => parts.includes(p));
  assert.equal(read.length, 1, `one part read: ${JSON.stringify(server.stats.log)}`);

  // The same index again: its part is not read again.
  server.reset();
  await reader.query('orders', { where: { order_id: id + 1 }, columns });
  assert.ok(server.stats.log.every((l) => !parts.includes(l.path)), JSON.stringify(server.stats.log));

  // Another index: its own part, once.
  server.reset();
  const c = a.rows[0].customer;
  const wc = await reader.query('orders', { where: { customer: c }, columns });
  const ac = await overlay.query('orders', { where: { customer: c }, columns });
  assert.deepEqual(wc.rows, ac.rows);
  assert.ok(wc.rows.length >= 1);
  assert.equal(wc.stats.index, 'by_customer');
  assert.equal(server.stats.log.filter((l) => parts.includes(l.path)).length, 1);
});

test('a part that is not the one the root recorded is refused E_MANIFEST', async () => {
  const [first] = partPaths();
  const file = path.join(root, first);
  const good = fs.readFileSync(file);
  try {
    const bad = Buffer.from(good);
    bad[bad.length >> 1] ^= 1;
    fs.writeFileSync(file, bad);
    // Whichever index the flipped part belongs to, one of these two queries uses it.
    const reader = await open();
    const errs = await Promise.all([{ order_id: 3 }, { customer: 'customer-00001' }].map((where) =>
      reader.query('orders', { where, columns }).then(() => null, (e) => e.code)));
    assert.deepEqual(errs.filter(Boolean), ['E_MANIFEST']);
  } finally {
    fs.writeFileSync(file, good);
  }
});

test('manifestPartBytes is checked like every option', async () => {
  for (const bad of [-1, 1.5, '0', 2 ** 33]) {
    const err = await Overlay.open(`file://${root}/other`, { manifestPartBytes: bad }).then(() => null, (e) => e);
    assert.ok(err, `${bad} is refused`);
    assert.ok(['E_INVALID', 'ERR_INVALID_ARG_TYPE'].includes(err.code), `${bad}: ${err.code} ${err.message}`);
  }
});

// Decision 73: past 16 KiB HEAD is zlib-compressed JSON. 150 files make a HEAD of ~50 KB of
// JSON; the wasm reader opens it in one request, at a third of the bytes, and answers as the
// addon does.
test('a compressed HEAD opens the wasm reader in one request', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-head-'));
  try {
    fs.mkdirSync(path.join(dir, 'data'));
    for (let f = 0; f < 150; f++) fs.writeFileSync(path.join(dir, 'data', `p${String(f).padStart(3, '0')}.parquet`), sampleOrdersParquet(f * 10, 10, 10, 'snappy'));
    const o = await Overlay.open(`file://${dir}/overlay`);
    await o.registerParquetTable('orders', `file://${dir}/data`);
    await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
    await o.build('orders');
    await o.publish();
    const stored = fs.readFileSync(path.join(dir, 'overlay/manifests/HEAD'));
    assert.equal(stored[0], 0x78, 'zlib');
    const json = zlib.inflateSync(stored);
    assert.ok(json.length > 16 << 10 && stored.length * 3 < json.length, `${json.length} bytes of JSON in ${stored.length}`);
    assert.ok(JSON.parse(json).manifest, 'the manifest inlined');
    const s = await startRangeServer(dir);
    try {
      const r = await OverlayReader.open(`${s.url}/overlay`, { tables: { orders: `${s.url}/data` } });
      assert.deepEqual(s.stats.log.map((l) => l.path), ['/overlay/manifests/HEAD']);
      assert.equal(s.stats.bytes, stored.length);
      const q = { where: { order_id: { in: [5, 777, 1499] } }, columns: ['order_id', 'customer'] };
      const w = await r.query('orders', q);
      const a = await o.query('orders', q);
      assert.deepEqual(w.rows, a.rows);
      assert.deepEqual(w.rows.map((x) => Number(x.order_id)).sort((x, y) => x - y), [5, 777, 1499]);
    } finally {
      await s.close();
      await o.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
