// The walking skeleton end to end: the Node addon indexes sample Parquet files into a local
// overlay and publishes it; the wasm reader answers the same lookups over HTTP range reads
// served by a real server on 127.0.0.1 (and through a readRange callback), with the same
// answers, few round trips, and right answers for drifted and corrupt files.
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

const FILES = [
  ['part-0.parquet', 0, 'snappy'],
  ['part-1.parquet', 4000, 'zstd'],
  ['part-2.parquet', 8000, 'lz4'],
];

let root, server, overlay, reader;

function customerOf(id) {
  return id % 97 === 13 ? null : `customer-${String((id * 7919) % 5000).padStart(5, '0')}`;
}

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-e2e-'));
  fs.mkdirSync(path.join(root, 'data/orders'), { recursive: true });
  for (const [name, first, codec] of FILES) {
    fs.writeFileSync(path.join(root, 'data/orders', name), sampleOrdersParquet(first, 4000, 1000, codec));
  }
  overlay = await Overlay.open(`file://${root}/overlay`);
  const t = await overlay.registerParquetTable('orders', `file://${root}/data/orders`);
  assert.equal(t.files, 3);
  assert.equal(t.rows, 12000n);
  await overlay.createIndex('orders', 'by_customer', ['customer']);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.createIndex('orders', 'by_customer_day', [{ name: 'customer', direction: 'desc', nulls: 'first' }, 'day']);
  const b = await overlay.build('orders');
  assert.equal(b.filesIndexed, 3);
  assert.equal(b.entries, 36000n);
  const p = await overlay.publish();
  assert.equal(p.version, 1n);
  server = await startRangeServer(root);
  reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data/orders` } });
});

after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

test('the addon and the wasm reader give the same answers', async () => {
  const keys = [['by_customer', 'customer-00042'], ['by_customer', customerOf(4321)], ['by_customer', customerOf(11999)], ['by_id', 0], ['by_id', 7777], ['by_id', 11999n]];
  for (const [index, key] of keys) {
    const a = await overlay.lookup('orders', index, key);
    const w = await reader.lookup('orders', index, key);
    assert.ok(a.rows.length > 0, `${index}=${key} finds rows`);
    assert.deepEqual(w.rows, a.rows, `${index}=${key}`);
    assert.equal(w.stats.filesScanned, 0);
    assert.equal(typeof w.rows[0].position, 'bigint');
    assert.equal(typeof a.rows[0].rowId, 'bigint');
  }
  // Every row of by_customer really holds the customer: recompute from the generator.
  const r = await reader.lookup('orders', 'by_customer', 'customer-00042');
  const base = { 'part-0.parquet': 0, 'part-1.parquet': 4000, 'part-2.parquet': 8000 };
  for (const row of r.rows) assert.equal(customerOf(base[row.file] + Number(row.position)), 'customer-00042');
  const expected = [];
  for (let id = 0; id < 12000; id++) if (customerOf(id) === 'customer-00042') expected.push(id);
  assert.deepEqual(r.rows.map((x) => Number(x.rowId)), expected);
});

test('composite keys with per-column direction and NULL placement', async () => {
  const id = 5555;
  const key = [customerOf(id), 19000 + (id % 365)];
  const a = await overlay.lookup('orders', 'by_customer_day', key);
  const w = await reader.lookup('orders', 'by_customer_day', key);
  assert.deepEqual(w.rows, a.rows);
  const expected = [];
  for (let i = 0; i < 12000; i++) if (customerOf(i) === key[0] && 19000 + (i % 365) === key[1]) expected.push(BigInt(i));
  assert.deepEqual(a.rows.map((r) => r.rowId), expected);
  assert.ok(expected.length >= 1);
  // Dates also as ISO strings; a partial key is a typed error.
  assert.deepEqual((await overlay.lookup('orders', 'by_customer_day', [key[0], '2022-02-08'])).rows, (await overlay.lookup('orders', 'by_customer_day', [key[0], 19031])).rows);
  await assert.rejects(overlay.lookup('orders', 'by_customer_day', [key[0]]), (e) => e.code === 'E_KEY');
  await assert.rejects(overlay.createIndex('orders', 'bad', [{ name: 'day', direction: 'sideways' }]), (e) => e.code === 'E_INVALID');
  await assert.rejects(overlay.createIndex('orders', 'twice', ['day', 'day']), (e) => e.code === 'E_INVALID');
  const info = await overlay.createIndex('orders', 'by_amount', ['amount']);
  assert.equal(info.state, 'building');
  assert.equal(await overlay.dropIndex('orders', 'by_amount'), info.indexId);
  await assert.rejects(overlay.dropIndex('orders', 'by_amount'), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(overlay.lookup('orders', 'by_amount', 1), (e) => e.code === 'E_NOT_FOUND');
});

test('IN, range and IS NULL: the addon and wasm agree with the generator', async () => {
  const both = async (method, ...args) => {
    const a = await overlay[method](...args);
    const w = await reader[method](...args);
    assert.deepEqual(w.rows, a.rows, `${method} ${JSON.stringify(args, (k, v) => (typeof v === 'bigint' ? `${v}n` : v))}`);
    return a.rows.map((r) => Number(r.rowId));
  };
  assert.deepEqual(await both('lookupMany', 'orders', 'by_id', [4242, 5, 5, 99999, null, 11000n]), [5, 4242, 11000]);
  assert.deepEqual(await both('lookupMany', 'orders', 'by_id', []), []);
  assert.deepEqual(await both('range', 'orders', 'by_id', { key: 100 }, { key: 105, inclusive: false }), [100, 101, 102, 103, 104]);
  // A range reads only files whose key bounds overlap it: the other two are pruned unread.
  for (const side of [overlay, reader]) {
    const r = await side.range('orders', 'by_id', { key: 100 }, { key: 105, inclusive: false });
    assert.equal(r.stats.filesPruned, 2);
    assert.equal(r.stats.filesByIndex, 1);
    assert.ok(r.stats.indexRequests <= 2, JSON.stringify(r.stats));
  }
  assert.deepEqual(await both('range', 'orders', 'by_id', { key: 11997, inclusive: false }, null, { reverse: true }), [11999, 11998]);

  // Equality on the DESC leading column + a range on the next one.
  const c = 'customer-00042';
  const got = await both('range', 'orders', 'by_customer_day', { key: [c, 19100] }, { key: [c] });
  const want = [];
  for (let id = 0; id < 12000; id++) if (customerOf(id) === c && 19000 + (id % 365) >= 19100) want.push([19000 + (id % 365), id]);
  want.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  assert.deepEqual(got, want.map((x) => x[1]));
  assert.ok(got.length > 0);

  // IS NULL: customer is NULL for every 97th order.
  const nulls = await both('nulls', 'orders', 'by_customer', [null]);
  const expected = [];
  for (let id = 0; id < 12000; id++) if (customerOf(id) === null) expected.push(id);
  assert.deepEqual(nulls, expected);
  assert.deepEqual(await both('nulls', 'orders', 'by_customer', [null], { reverse: true }), [...expected].reverse());

  // Refusals, typed on both sides.
  for (const side of [overlay, reader]) {
    await assert.rejects(side.range('orders', 'by_customer_day', { key: [c, 19000] }, { key: ['customer-00043', 19010] }), (e) => e.code === 'E_REFUSED');
    await assert.rejects(side.nulls('orders', 'by_customer_day', [undefined, 19000]), (e) => e.code === 'E_REFUSED');
    await assert.rejects(side.nulls('orders', 'by_customer_day', [c]), (e) => e.code === 'E_REFUSED');
    await assert.rejects(side.range('orders', 'by_id', { key: null }, null), (e) => e.code === 'E_REFUSED');
    // A bare range on the non-leading `day` column; fine with equality on `customer`.
    await assert.rejects(side.range('orders', 'by_customer_day', null, null, { column: 'day' }), (e) => e.code === 'E_REFUSED');
    await side.range('orders', 'by_customer_day', { key: [c, 19100] }, { key: [c] }, { column: 'day' });
  }
});

test('locate row ids from both', async () => {
  const a = await overlay.locate('orders', [4001n, 0n, 11999n, 12000n]);
  const w = await reader.locate('orders', [4001n, 0, 11999n, 12000n]);
  assert.deepEqual(w.rows, a.rows);
  assert.deepEqual(a.rows.map((r) => [r.file, r.position]), [['part-0.parquet', 0n], ['part-1.parquet', 1n], ['part-2.parquet', 3999n]]);
  assert.deepEqual(a.candidates, []);
});

test('rows by position: Arrow IPC and plain objects, the same from both', async () => {
  const { tableFromIPC } = await import('apache-arrow');
  const found = await overlay.lookup('orders', 'by_customer', 'customer-00042');
  const rows = [...found.rows].reverse(); // any order is kept
  const a = await overlay.fetchRows('orders', rows, ['order_id', 'customer', 'amount']);
  const w = await reader.fetchRows('orders', rows, ['order_id', 'customer', 'amount']);
  assert.deepEqual(w.rows, a.rows);
  assert.equal(a.rows.length, rows.length);
  a.rows.forEach((r, i) => {
    assert.equal(r.order_id, Number(rows[i].rowId));
    assert.equal(r.customer, 'customer-00042');
    assert.equal(r.amount, (Number(rows[i].rowId) % 1000) * 1.25);
  });
  for (const ipc of [a.ipc, w.ipc]) {
    const t = tableFromIPC(ipc);
    assert.equal(t.numRows, rows.length);
    assert.deepEqual(t.schema.fields.map((f) => f.name), ['order_id', 'customer', 'amount']);
    assert.deepEqual([...t.getChild('order_id')].map(Number), rows.map((r) => Number(r.rowId)));
  }
  await assert.rejects(overlay.fetchRows('orders', rows, ['nope']), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(reader.fetchRows('orders', rows, ['nope']), (e) => e.code === 'E_NOT_FOUND');
});

test('a value no row holds returns nothing, from both', async () => {
  for (const [index, key] of [['by_customer', 'customer-00042x'], ['by_customer', 'aaa'], ['by_id', 12000], ['by_id', -1]]) {
    assert.deepEqual((await overlay.lookup('orders', index, key)).rows, []);
    assert.deepEqual((await reader.lookup('orders', index, key)).rows, []);
  }
  assert.deepEqual((await reader.lookup('orders', 'by_customer', null)).rows, []);
});

test('a warm point lookup takes at most 2 range requests', async () => {
  await reader.lookup('orders', 'by_id', 5); // warms the manifest and directories
  server.reset();
  const r = await reader.lookup('orders', 'by_id', 4242);
  assert.equal(r.rows.length, 1);
  assert.ok(server.stats.requests <= 2, `requests: ${JSON.stringify(server.stats.log)}`);
  assert.ok(server.stats.log.every((l) => l.status === 206), 'only range reads');
  assert.equal(r.stats.filesPruned, 2, 'key bounds prune the other files');
  // Asked again, the block comes from the reader's cache: no request at all.
  server.reset();
  const again = await reader.lookup('orders', 'by_id', 4242);
  assert.deepEqual(again.rows, r.rows);
  assert.equal(server.stats.requests, 0, `requests: ${JSON.stringify(server.stats.log)}`);
});

test('typed errors from both sides', async () => {
  await assert.rejects(overlay.lookup('orders', 'nope', 1), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(reader.lookup('orders', 'nope', 1), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(overlay.lookup('orders', 'by_id', 'not a number'), (e) => e.code === 'E_KEY');
  await assert.rejects(reader.lookup('orders', 'by_id', 1.5), (e) => e.code === 'E_KEY');
  await assert.rejects(Overlay.open('ftp://nowhere/x'), (e) => e.code === 'E_INVALID_URL');
  await assert.rejects(OverlayReader.open(`${server.url}/no-overlay-here`, {}), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(overlay.registerParquetTable('orders', `file://${root}/data/orders`), (e) => e.code === 'E_EXISTS');
});

test('the readRange callback reader gives the same answers', async () => {
  const readRange = async (p, offset, length) => {
    const file = p.startsWith('file://') ? p.slice('file://'.length) : path.join(root, 'overlay', p);
    const fd = fs.openSync(file, 'r');
    try {
      const buf = Buffer.alloc(length);
      fs.readSync(fd, buf, 0, length, offset);
      return new Uint8Array(buf);
    } finally { fs.closeSync(fd); }
  };
  const size = async (p) => {
    const file = p.startsWith('file://') ? p.slice('file://'.length) : path.join(root, 'overlay', p);
    return fs.existsSync(file) ? fs.statSync(file).size : null;
  };
  const cb = await OverlayReader.open({ readRange, size }, { allowOrigins: ['file://'] });
  for (const key of ['customer-00042', customerOf(9001)]) {
    assert.deepEqual((await cb.lookup('orders', 'by_customer', key)).rows, (await overlay.lookup('orders', 'by_customer', key)).rows);
  }
});

// These two change files: they run last (the runner keeps file order with concurrency 1).
test('a data file rewritten in place is rejected and scanned, natively and from wasm', async () => {
  const key = customerOf(4500 + 17); // in part-1 before and after the rewrite
  fs.writeFileSync(path.join(root, 'data/orders/part-1.parquet'), sampleOrdersParquet(4500, 3000, 700, 'zstd'));
  const rep = await overlay.refresh('orders');
  assert.deepEqual(rep.changed, ['part-1.parquet']);
  const a = await overlay.lookup('orders', 'by_customer', key);
  assert.equal(a.stats.filesScanned, 1);
  assert.deepEqual(a.stats.rejections.map((r) => [r.dataFile, r.reason]), [['part-1.parquet', 'checksum']]);
  for (const row of a.rows) {
    const first = { 'part-0.parquet': 0, 'part-1.parquet': 4500, 'part-2.parquet': 8000 }[row.file];
    assert.equal(customerOf(first + Number(row.position)), key);
  }
  assert.ok(a.rows.some((r) => r.file === 'part-1.parquet'), 'the scan finds rows in the rewritten file');

  await overlay.publish();
  await reader.refresh();
  assert.equal(reader.version, 2);
  const w = await reader.lookup('orders', 'by_customer', key);
  assert.deepEqual(w.rows, a.rows);
  assert.equal(w.stats.filesScanned, 1);
  assert.deepEqual(w.stats.rejections.map((r) => r.reason), ['checksum']);
});

test('flipped blob bytes are rejected by their checksum and the file is scanned', async () => {
  const key = 'customer-00042';
  const before = await overlay.lookup('orders', 'by_customer', key);
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'overlay/manifests/00000000000000000002.json')));
  const ix = manifest.tables[0].indexes.find((i) => i.name === 'by_customer');
  // Corrupt the snappy and the lz4 file's blobs (part-1, zstd, is already rejected).
  for (const file of ['part-0.parquet', 'part-2.parquet']) {
    const entry = ix.files.find((f) => f.lineage.source_path === file);
    const bundle = path.join(root, 'overlay', entry.lineage.bundle_path);
    const bytes = fs.readFileSync(bundle);
    for (let off = entry.lineage.blob_offset; off < entry.lineage.blob_offset + entry.ordered.directory_offset; off += 61) bytes[off] ^= 0x5a;
    fs.writeFileSync(bundle, bytes);
  }
  const fresh = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data/orders` } });
  const w = await fresh.lookup('orders', 'by_customer', key);
  assert.deepEqual(w.rows, before.rows);
  // part-1 is still rejected from the previous test (rewritten, not rebuilt).
  assert.deepEqual(w.stats.rejections.map((r) => [r.dataFile, r.reason]), [
    ['part-0.parquet', 'blob_checksum'], ['part-1.parquet', 'checksum'], ['part-2.parquet', 'blob_checksum'],
  ]);
  // So wasm scanned snappy, zstd and lz4 Parquet.
  assert.equal(w.stats.filesScanned, 3);
  assert.ok(w.stats.dataRequests > 0);
});

test('explain and metrics, from the addon and the wasm reader', async () => {
  const where = { order_id: 1234 };
  for (const x of [overlay, reader]) {
    const e = await x.explain('orders', { where, columns: ['order_id', 'customer'] });
    assert.equal(e.index, 'by_id');
    assert.deepEqual(e.indexColumns, ['order_id']);
    // Key bounds prune part-2 (and part-1); once an earlier test has rewritten part-1, the
    // read gate rejects its index first and it is scanned (the reason says so).
    const files = JSON.stringify(e.files);
    assert.equal(e.files[0].action, 'index', files);
    assert.equal(e.files[2].action, 'prune', files);
    if (e.files[1].action === 'scan') assert.match(e.files[1].reason, /^checksum/, files);
    else assert.equal(e.files[1].action, 'prune', files);
    assert.ok(e.roundTrips >= 1 && e.roundTrips <= 4, JSON.stringify(e));
    // A predicate no index serves is scanned, and says why.
    const s = await x.explain('orders', { where: { amount: { gt: 10 } } });
    assert.equal(s.index, undefined);
    assert.match(s.reason, /no ready index/);
    assert.ok(s.files.every((f) => f.action === 'scan'));
    await assert.rejects(x.explain('orders', { where: { nope: 1 } }), (err) => err.code === 'E_NOT_FOUND');
    // Wrong JS types are typed errors, never a crash.
    for (const args of [[42, {}], ['orders', 'where'], ['orders', { where: { order_id: { gt: {} } } }]]) {
      await assert.rejects(async () => x.explain(...args), (err) => /^E_(INVALID|KEY)$/.test(err.code), JSON.stringify(args));
    }
  }
  const before = reader.metrics();
  const r = await reader.query('orders', { where, columns: ['order_id'] });
  assert.equal(r.rows.length, 1);
  const after = reader.metrics();
  assert.equal(after.reads.query, before.reads.query + 1);
  assert.equal(after.files.index, before.files.index + 1);
  assert.ok(after.requests.data > before.requests.data || after.cache.metadata.hits > before.cache.metadata.hits);
  assert.equal(typeof after.cache.budget, 'number');
  await overlay.query('orders', { where, columns: ['order_id'] });
  const text = await overlay.metrics();
  assert.match(text, /^# HELP skerry_reads_total /m);
  assert.match(text, /^skerry_reads_total\{verb="query"\} [1-9]\d*$/m);
  assert.match(text, /^skerry_builds_total [1-9]\d*$/m);
  assert.match(text, /^skerry_cache_hits_total\{tier="metadata"\} \d+$/m);
  // Every sample belongs to a declared family.
  const declared = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
  for (const line of text.split('\n').filter((l) => l && !l.startsWith('#'))) {
    assert.ok(declared.has(line.split(/[{ ]/)[0]), line);
  }
});
