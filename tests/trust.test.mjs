// Trust holes (issue 11) end to end: wrong rows after in-place rewrites, hostile manifests
// against the wasm build (a canary server must see nothing), bounded and timed reads, typed
// errors for every wrong argument of both packages, and read-only readers in other processes
// that never fence the writer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import zlib from 'node:zlib';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';
import { swapInPlace } from './support/rewrite.mjs';
import { readHead } from './support/head.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

let root, server, overlay, reader;
const OPEN = () => OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data/orders` } });

/** A server that records every request and answers 404: nothing may ever reach it. */
async function startCanary() {
  const seen = [];
  const s = http.createServer((req, res) => { seen.push(req.url); res.writeHead(404); res.end(); });
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${s.address().port}`, seen, close: () => new Promise((r) => { s.closeAllConnections(); s.close(r); }) };
}

/** Swaps the first occurrences of two little-endian int64 values in place; keeps the mtime. */
const code = (c) => (e) => { assert.equal(e.code, c, `${e.code}: ${e.message}`); return true; };

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-trust-'));
  fs.mkdirSync(path.join(root, 'data/orders'), { recursive: true });
  fs.mkdirSync(path.join(root, 'data/outside'), { recursive: true });
  fs.writeFileSync(path.join(root, 'data/orders/part-0.parquet'), sampleOrdersParquet(25000, 5000, 1000, 'none'));
  fs.writeFileSync(path.join(root, 'data/orders/part-1.parquet'), sampleOrdersParquet(30000, 5000, 1000, 'none'));
  fs.writeFileSync(path.join(root, 'data/outside/secret.parquet'), sampleOrdersParquet(0, 10, 10, 'none'));
  // Whole-second mtimes, so a rewrite can restore them exactly (utimes takes seconds).
  const t = Math.floor(Date.now() / 1000) - 3600;
  for (const f of ['part-0', 'part-1']) fs.utimesSync(path.join(root, `data/orders/${f}.parquet`), t, t);
  overlay = await Overlay.open(`file://${root}/overlay`);
  await overlay.registerParquetTable('orders', `file://${root}/data/orders`);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.createIndex('orders', 'by_customer', ['customer']);
  await overlay.build('orders');
  await overlay.publish();
  server = await startRangeServer(root);
  reader = await OPEN();
});

after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

test('defect 7: bigints convert losslessly or fail E_INVALID', async () => {
  const ok = await overlay.locate('orders', [5n]);
  assert.equal(ok.rows[0].position, 5n);
  await assert.rejects(overlay.locate('orders', [-5n]), code('E_INVALID'));
  await assert.rejects(overlay.locate('orders', [18446744073709551621n]), code('E_INVALID'));
  await assert.rejects(overlay.locate('orders', [2n ** 64n]), code('E_INVALID'));
  await assert.rejects(overlay.fetchRows('orders', [{ file: 'part-0.parquet', position: -3n }], ['order_id']), code('E_INVALID'));
  await assert.rejects(overlay.fetchRows('orders', [{ file: 'part-0.parquet', position: 2n ** 64n + 3n }], ['order_id']), code('E_INVALID'));
  await assert.rejects(overlay.registerDeletes('orders', [{ file: 'part-0.parquet', positions: [-3n] }]), code('E_INVALID'));
  const f = await overlay.fetchRows('orders', [{ file: 'part-0.parquet', position: 3n }], ['order_id']);
  assert.equal(f.rows[0].order_id, 25003);
  // The wasm reader converts the same way.
  for (const bad of [-5n, 18446744073709551621n, 2n ** 64n, 1.5, -1]) {
    await assert.rejects(reader.locate('orders', [bad]), code('E_INVALID'), String(bad));
    await assert.rejects(reader.fetchRows('orders', [{ file: 'part-0.parquet', position: bad }], ['order_id']), code('E_INVALID'), String(bad));
  }
  assert.equal((await reader.locate('orders', [5n])).rows[0].position, 5n);
});

test('defect 8: sample generation validates its arguments', () => {
  for (const args of [[0, -1, 10, 'none'], [0, 1.5, 10, 'none'], [0, 10, 0, 'none'], [0, 1e9, 10, 'none'], [0.5, 1, 1, 'none'], [0, 10, 10, 'brotli']]) {
    assert.throws(() => sampleOrdersParquet(...args), code('E_INVALID'), JSON.stringify(args));
  }
  assert.throws(() => sampleOrdersParquet('0', 10), code('E_INVALID'));
  assert.ok(sampleOrdersParquet(0, 0, 10, 'none').length > 0);
});

test('defect 9: registered paths never leave the table location', async () => {
  for (const p of ['../outside/secret.parquet', 'a/../../outside/secret.parquet', '/etc/passwd', 'file:///etc/passwd']) {
    await assert.rejects(overlay.registerFiles('orders', [p]), code('E_INVALID'), p);
    await assert.rejects(overlay.registerParquetTable('x', `file://${root}/data/orders`, { files: [p] }), code('E_INVALID'), p);
  }
  // Names, not encodings (round 3, item 1): objects literally so named below the table,
  // which do not exist — the file outside is never read.
  for (const p of ['%2e%2e/outside/secret.parquet', '%2E%2e/outside/secret.parquet', '%252e%252e/outside/secret.parquet']) {
    await assert.rejects(overlay.registerFiles('orders', [p]), code('E_NOT_FOUND'), p);
    await assert.rejects(overlay.registerParquetTable('x', `file://${root}/data/orders`, { files: [p] }), code('E_NOT_FOUND'), p);
  }
  assert.equal((await overlay.query('orders', { where: { order_id: 5 } })).rows.length, 0);
});

test('defect 10: every wrong argument type is E_INVALID naming the argument (addon)', async () => {
  const cases = [
    [() => overlay.lookup(123, 'by_id', 1), /table/],
    [() => overlay.lookup('orders', 7, 1), /index/],
    [() => overlay.lookupMany('orders', 'by_id', 5), /keys/],
    [() => overlay.range('orders', 'by_id', { key: 1, inclusive: 'yes' }, null), /lower/],
    [() => overlay.range('orders', 'by_id', null, null, { reverse: 1 }), /reverse/],
    [() => overlay.nulls('orders', 'by_customer', 'x'), /prefix/],
    [() => overlay.locate('orders', ['5']), /rowIds/],
    [() => overlay.locate('orders', 5n), /rowIds/],
    [() => overlay.createIndex('orders', 'x', 'order_id'), /columns/],
    [() => overlay.createIndex('orders', 'x', [5]), /columns/],
    [() => overlay.createIndex('orders', 'x', ['day'], { unique: 'no' }), /unique/],
    [() => overlay.registerParquetTable('x', 5), /location/],
    [() => overlay.registerFiles('orders', 'a.parquet'), /files/],
    [() => overlay.registerDeletes('orders', [{ file: 5, positions: [] }]), /deletes/],
    [() => overlay.query(null), /table/],
    [() => overlay.query('orders', 'where'), /options/],
    [() => overlay.query('orders', { limit: -1 }), /limit/],
    [() => overlay.query('orders', { columns: 'order_id' }), /columns/],
    [() => overlay.fetchRows('orders', [{ file: 'part-0.parquet', position: '3' }], ['order_id']), /rows/],
    [() => overlay.build('orders', { onProgress: 5 }), /onProgress/],
    [() => overlay.buildStep('orders', 'by_id', { maxEntries: -5 }), /maxEntries/],
    [() => overlay.vacuum({ retainVersions: 'all' }), /retainVersions/],
    [() => overlay.verify('orders'), /index/],
    [() => overlay.dropIndex('orders', {}), /name/],
    [() => overlay.refresh('orders', { deep: 'yes' }), /deep/],
    [() => Overlay.open(5), /url/],
    [() => Overlay.open('memory://', { readOnly: 'true' }), /readOnly/],
  ];
  for (const [f, names] of cases) {
    await assert.rejects(f, (e) => e.code === 'E_INVALID' && names.test(e.message) && !/^E_/.test(e.message), f.toString());
  }
  assert.throws(() => overlay.setScanOnly('yes'), code('E_INVALID'));
  assert.throws(() => overlay.on('warning', 5), (e) => e.code === 'E_INVALID' && /listener/.test(e.message));
  assert.throws(() => overlay.on('warn', () => {}), code('E_INVALID'));
  assert.throws(() => overlay.off(5, () => {}), code('E_INVALID'));
});

// A callback source may name the version it read (`{ bytes, etag }`, `{ size, etag }`): what
// is not a buffer, a size or a string is a typed error, and an answer of another version than
// the one asked for is E_CHANGED, never bytes of two versions mixed.
test('a callback source that names versions: bad shapes are typed errors, another version is E_CHANGED', async () => {
  const data = path.join(root, 'data/orders');
  const bytesOf = (p) => fs.readFileSync(path.join(data, p));
  const source = (shape) => ({
    readRange: async (p, off, len) => shape.read(bytesOf(p).subarray(off, off + len)),
    size: async (p) => (fs.existsSync(path.join(data, p)) ? shape.size(bytesOf(p).length) : null),
  });
  const ask = async (shape) => {
    const r = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: source(shape) } });
    return r.query('orders', { where: { order_id: 25001 }, columns: ['order_id', 'customer'] });
  };
  const good = await ask({ read: (b) => ({ bytes: b, etag: '"9b2cf535f27731c974343645a3985328"' }), size: (n) => ({ size: n, etag: '"9b2cf535f27731c974343645a3985328"' }) });
  assert.deepEqual(good.rows.map((x) => Number(x.order_id)), [25001]);
  for (const [shape, message] of [
    [{ read: () => ({ bytes: 'x' }), size: (n) => n }, /readRange must resolve/],
    [{ read: (b) => ({ bytes: b, etag: 5 }), size: (n) => n }, /etag must be a string/],
    [{ read: (b) => b, size: () => ({ size: -1 }) }, /size must resolve/],
    [{ read: (b) => b, size: (n) => ({ size: n, etag: {} }) }, /etag must be a string/],
  ]) {
    await assert.rejects(ask(shape), (e) => typeof e.code === 'string' && message.test(e.message), message.toString());
  }
  // The size names one version, the bytes another (the object changed between the two).
  await assert.rejects(ask({ read: (b) => ({ bytes: b, etag: '"b"' }), size: (n) => ({ size: n, etag: '"a"' }) }), code('E_CHANGED'));
});

test('defect 10: every wrong argument type is E_INVALID naming the argument (wasm)', async () => {
  const cases = [
    [() => reader.lookup(123, 'by_id', 1), /table/],
    [() => reader.lookup('orders', 7, 1), /index/],
    [() => reader.lookupMany('orders', 'by_id', 5), /keys/],
    [() => reader.range('orders', 'by_id', null, null, { reverse: 1 }), /reverse/],
    [() => reader.range('orders', 'by_id', null, null, { column: 5 }), /column/],
    [() => reader.nulls('orders', 'by_customer', [null], 'x'), /options/],
    [() => reader.query(5), /table/],
    [() => reader.query('orders', 'where'), /options/],
    [() => reader.fetchRows(5, [], []), /table/],
    [() => reader.fetchRows('orders', [{ file: 'part-0.parquet', position: 1n }], [5]), /columns/],
    [() => OverlayReader.open(5, {}), /source/],
    [() => OverlayReader.open(`${server.url}/overlay`, 'x'), /options/],
    [() => OverlayReader.open(`${server.url}/overlay`, { tables: { orders: 5 } }), /tables/],
    [() => OverlayReader.open(`${server.url}/overlay`, { timeoutMs: -1 }), /timeoutMs/],
    [() => OverlayReader.open(`${server.url}/overlay`, { signal: 'x' }), /signal/],
    [() => OverlayReader.open(`${server.url}/overlay`, { allowOrigins: ['not an origin'] }), /allowOrigins/],
    [() => OverlayReader.open({ readRange: 5 }, {}), /readRange/],
  ];
  for (const [f, names] of cases) {
    await assert.rejects(f, (e) => e.code === 'E_INVALID' && names.test(e.message) && !/^E_/.test(e.message), f.toString());
  }
  assert.throws(() => reader.setScanOnly('yes'), code('E_INVALID'));
  await assert.rejects(reader.locate(5, [1n]), code('E_INVALID'));
  assert.throws(() => reader.on('warning', 5), code('E_INVALID'));
  // An argument whose getter throws: the promise rejects with that error on both sides.
  for (const side of [overlay, reader]) {
    const boom = new Error('boom');
    const p = side.query('orders', { get where() { throw boom; } });
    assert.ok(p instanceof Promise);
    await assert.rejects(p, (e) => e === boom);
  }
  // Same codes and messages for the same mistakes on both sides.
  for (const [a, w] of [
    [() => overlay.query('orders', { where: { order_id: { like: 1 } } }), () => reader.query('orders', { where: { order_id: { like: 1 } } })],
    [() => overlay.lookup('orders', 'nope', 1), () => reader.lookup('orders', 'nope', 1)],
  ]) {
    const ea = await a().then(() => null, (e) => e);
    const ew = await w().then(() => null, (e) => e);
    assert.equal(ea.code, ew.code);
    assert.equal(ea.message, ew.message);
  }
});

test('defect 11: bigints in writeParquet, unicode names, missing locations, partial refresh', async () => {
  const bytes = writeParquet([{ name: 'id', type: 'int64' }, { name: 'n', type: 'int32' }], [[5n, 1n], [2n ** 62n, 2]], 10, 'none');
  assert.ok(bytes.length > 0);
  assert.throws(() => writeParquet([{ name: 'id', type: 'int64' }], [[2n ** 63n]]), code('E_INVALID'));
  await overlay.createIndex('orders', 'Ärger', ['day']);
  await overlay.build('orders');
  for (const n of ['ärger', 'Ärger', 'ÄRGER']) await overlay.lookup('orders', n, 19100);
  await overlay.publish();
  const r = await OPEN();
  await r.lookup('orders', 'ärger', 19100);
  for (const bad of ['', '../x', 'a/b', 'x'.repeat(1 << 20)]) {
    await assert.rejects(overlay.createIndex('orders', bad, ['day']), code('E_INVALID'));
  }
  await assert.rejects(overlay.registerParquetTable('ghost', `file://${root}/no/such/dir`), code('E_NOT_FOUND'));
  await overlay.dropIndex('orders', 'ärger');
  await overlay.build('orders');
});

test('defect 1: a same-size in-place rewrite never yields a wrong row (addon and wasm)', async () => {
  const file = path.join(root, 'data/orders/part-0.parquet');
  swapInPlace(file, 25001, 25002);
  const warnings = [];
  overlay.on('warning', (w) => warnings.push(w));
  const fresh = await OPEN();
  const wasmWarnings = [];
  fresh.on('warning', (w) => wasmWarnings.push(w));
  for (const side of [overlay, fresh]) {
    for (const id of [25001, 25002]) {
      const q = await side.query('orders', { where: { order_id: id }, columns: ['order_id'] });
      assert.deepEqual(q.rows.map((x) => Number(x.order_id)), [id], `order ${id}`);
      assert.equal(q.stats.rejections[0]?.reason, 'drifted');
    }
  }
  assert.ok(warnings.some((w) => w.reason === 'drifted' && w.file === 'part-0.parquet'));
  assert.ok(wasmWarnings.some((w) => w.reason === 'drifted'));
  assert.equal((await overlay.repairs('orders', 'by_id'))[0].reason, 'drifted');
  assert.deepEqual((await overlay.refresh('orders')).changed, []);
  const v = await overlay.verify('orders', 'by_id');
  assert.equal(v.mismatched, 2);
  assert.ok(v.repairsQueued >= 1);
  await overlay.build('orders');
  const healed = await overlay.query('orders', { where: { order_id: 25001 }, columns: ['order_id'] });
  assert.deepEqual(healed.rows.map((x) => Number(x.order_id)), [25001]);
  assert.equal(healed.stats.rejections.length, 0);
  swapInPlace(file, 25001, 25002);
  assert.deepEqual((await overlay.refresh('orders', { deep: true })).changed, ['part-0.parquet']);
  await overlay.build('orders');
  await overlay.publish();
});

test('defect 2: touch + refresh keeps delete masks', async () => {
  await overlay.registerDeletes('orders', [{ file: 'part-1.parquet', positions: [17n] }]);
  const file = path.join(root, 'data/orders/part-1.parquet');
  const t = new Date(Date.now() + 60_000);
  fs.utimesSync(file, t, t);
  const r = await overlay.refresh('orders');
  assert.deepEqual(r.touched, ['part-1.parquet']);
  assert.deepEqual(r.deletesDropped, []);
  assert.equal((await overlay.query('orders', { where: { order_id: 30017 } })).rows.length, 0);
  assert.equal((await overlay.lookup('orders', 'by_id', 30017)).rows.length, 0);
  overlay.setScanOnly(true);
  assert.equal((await overlay.query('orders', { where: { order_id: 30017 } })).rows.length, 0);
  overlay.setScanOnly(false);
  await overlay.publish();
});

/** Every numeric leaf path of a JSON value. */
function numericPaths(v, at = [], out = []) {
  if (typeof v === 'number') out.push(at);
  else if (Array.isArray(v)) v.forEach((x, i) => numericPaths(x, [...at, i], out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) numericPaths(x, [...at, k], out);
  return out;
}
function setPath(v, p, raw) {
  let cur = v;
  for (const k of p.slice(0, -1)) cur = cur[k];
  cur[p[p.length - 1]] = raw;
}

test('hostile manifests against the wasm build: no request leaves the base, no trap, typed errors', async (t) => {
  const canary = await startCanary();
  const head = readHead(path.join(root, 'overlay/manifests/HEAD'));
  const mpath = path.join(root, 'overlay', head.path);
  const original = fs.readFileSync(mpath, 'utf8');
  const good = JSON.parse(original);
  const results = { typed: 0, answered: 0, codes: {} };
  const evil = [
    `${canary.url}/evil.puffin`, `//127.0.0.1:${new URL(canary.url).port}/evil`, '../../other-tenant/x.puffin',
    '%2e%2e/%2e%2e/x', '%2E%2E/x', '.%2e/x', '%252e%252e/x', 'a/../../x', '..%2fx', '..%5cx', 'a\\..\\x',
    'https://169.254.169.254/latest/meta-data', '/etc/passwd', 'file:///etc/passwd', 'manifests/HEAD?x', 'x#y',
  ];
  const mutations = [];
  for (const e of evil) {
    mutations.push([(m) => { m.tables[0].files[0].path = e; }]);
    mutations.push([(m) => { for (const ix of m.tables[0].indexes) for (const f of ix.files) f.lineage.bundle_path = e; }]);
    // The manifest's own location is used only without options.tables.
    mutations.push([(m) => { m.tables[0].location = e; }, {}]);
  }
  mutations.push([(m) => { m.tables[0].location = `${canary.url}/data/orders`; }, {}]);
  mutations.push([(m) => { m.tables[0].location = `${canary.url}/data/orders`; }, { allowOrigins: [`${server.url}`] }]);
  // Same-origin with the overlay: the manifest's location is used (and answers).
  let sameOrigin = 0;
  mutations.push([(m) => { m.tables[0].location = `${server.url}/data/orders`; sameOrigin++; }, {}]);
  // Extreme numbers in every numeric field (raw JSON text, so u64::MAX stays exact).
  const EXTREMES = ['18446744073709551615', '9223372036854775807', '9007199254740993', '4294967295', '0', '-1', '1e400'];
  const nums = numericPaths(good);
  assert.ok(nums.length > 20);
  // HEAD carries a small manifest (decision 72): each document is served both ways — inlined
  // in HEAD (raw text, as a hostile publisher could write it) and by HEAD's path.
  const hpath = path.join(root, 'overlay/manifests/HEAD');
  const originalHead = fs.readFileSync(hpath);
  assert.ok(head.manifest, 'HEAD inlines the manifest');
  const pointer = JSON.stringify({ version: head.version, path: head.path });
  let inline = false;
  const serve = (text) => {
    fs.writeFileSync(mpath, text);
    fs.writeFileSync(hpath, inline ? `${pointer.slice(0, -1)},"manifest":${text}}` : pointer);
  };
  const check = async (text, options = { tables: { orders: `${server.url}/data/orders` } }) => {
    inline = !inline;
    serve(text);
    let r;
    try {
      r = await OverlayReader.open(`${server.url}/overlay`, options);
    } catch (e) {
      assert.ok(!(e instanceof WebAssembly.RuntimeError), `trap: ${e.stack}`);
      assert.match(e.code ?? '', /^E_[A-Z_]+$/, `${e.message}`);
      results.typed++;
      results.codes[e.code] = e.message;
      return;
    }
    for (const op of [
      () => r.lookup('orders', 'by_id', 25001),
      () => r.query('orders', { where: { order_id: 30001 } }),
      () => r.query('orders', { where: { customer: 'customer-00042' }, limit: 3 }),
      () => r.fetchRows('orders', [{ file: 'part-1.parquet', position: 3n }], ['order_id']),
    ]) {
      try {
        await op();
        results.answered++;
      } catch (e) {
        assert.ok(!(e instanceof WebAssembly.RuntimeError), `trap: ${e.stack}`);
        assert.match(e.code ?? '', /^E_[A-Z_]+$/, `${e.message}`);
        results.typed++;
        results.codes[e.code] = e.message;
      }
    }
  };
  server.reset();
  try {
    for (const [mut, options] of mutations) {
      const m = JSON.parse(original);
      mut(m);
      await check(JSON.stringify(m), options);
    }
    for (const p of nums) {
      for (const x of EXTREMES) {
        const m = JSON.parse(original);
        const marker = '"__N__"';
        setPath(m, p, '__N__');
        await check(JSON.stringify(m).replace(marker, x));
      }
    }
    // Deeply nested and truncated documents.
    await check('['.repeat(100000) + ']'.repeat(100000));
    await check(original.slice(0, original.length / 2));
    await check('{"format_version": 99}');
  } finally {
    fs.writeFileSync(mpath, original);
    fs.writeFileSync(hpath, originalHead);
  }
  assert.deepEqual(canary.seen, [], 'the canary server was reached');
  const outside = server.stats.log.filter((x) => !x.path.startsWith('/overlay/') && !x.path.startsWith('/data/orders/'));
  assert.deepEqual(outside, [], 'a request left the overlay base');
  t.diagnostic(`cases: ${mutations.length + nums.length * EXTREMES.length + 3}, typed errors: ${results.typed}, answers: ${results.answered}, codes: ${Object.keys(results.codes).join(' ')}, requests: ${server.stats.requests}`);
  assert.ok(results.typed > 100 && results.answered > 100, JSON.stringify(results));
  assert.ok(server.stats.log.some((x) => x.path.startsWith('/data/orders/')), 'data files were read');
  assert.equal(sameOrigin, 1);
  serve(JSON.stringify({ ...good, tables: [{ ...good.tables[0], location: `${server.url}/data/orders` }] }));
  const same = await OverlayReader.open(`${server.url}/overlay`, {});
  assert.deepEqual((await same.query('orders', { where: { order_id: 30001 }, columns: ['order_id'] })).rows.map((x) => Number(x.order_id)), [30001]);
  fs.writeFileSync(mpath, original);
  fs.writeFileSync(hpath, originalHead);
  const blocked = await OverlayReader.open(`${server.url}/overlay`, {});
  await assert.rejects(blocked.query('orders', { where: { order_id: 30001 } }), code('E_INVALID_URL'));
  await canary.close();
});

test('defect 5: HEAD and manifests are bounded while streaming', async (t) => {
  let sent = 0;
  let mode = 'declared';
  let fixed = null;
  // An endless body (kept under backpressure), with a declared length or chunked.
  const endless = (req, res, declared) => {
    res.writeHead(200, declared ? { 'Content-Length': String(declared) } : {});
    const chunk = Buffer.alloc(1 << 20, 32);
    const pump = () => {
      while (!res.destroyed && sent < 2 ** 31) {
        sent += chunk.length;
        if (!res.write(chunk)) break;
      }
      if (!res.destroyed && sent < 2 ** 31) res.once('drain', pump);
    };
    pump();
    req.on('close', () => res.destroy());
  };
  const s = http.createServer((req, res) => {
    const head = req.url.endsWith('/manifests/HEAD');
    if (mode === 'head') return endless(req, res, 0);
    if (mode === 'fixed' && head) { res.writeHead(200); res.end(fixed); return; }
    if (head) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ version: 1, path: 'manifests/00000000000000000001.json' }));
      return;
    }
    endless(req, res, mode === 'declared' ? 1.5 * 2 ** 30 : 0);
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${s.address().port}/o`;
  const rss0 = process.memoryUsage().rss;
  await assert.rejects(OverlayReader.open(url, {}), (e) => e.code === 'E_MANIFEST' && /larger than 268435456/.test(e.message));
  assert.ok(sent < 64 << 20, `sent ${sent} bytes before the declared length was refused`);
  mode = 'head';
  sent = 0;
  await assert.rejects(OverlayReader.open(url, {}), (e) => e.code === 'E_MANIFEST' && /larger than 262144/.test(e.message));
  assert.ok(sent < 64 << 20, `HEAD: sent ${sent} bytes`);
  // A compressed HEAD (decision 73) is inflated under a bound: a deflate bomb and a stream
  // that is neither JSON nor zlib are E_MANIFEST, memory bounded by the 2 MiB of JSON.
  for (const [body, pattern] of [
    [zlib.deflateSync(Buffer.alloc(64 << 20, 32), { level: 9 }), /inflates past 2097152/],
    [Buffer.from([0x78, 0x9c, 1, 2, 3, 4]), /neither JSON nor zlib/],
    [Buffer.from('<html>not a manifest</html>'), /neither JSON nor zlib/],
  ]) {
    mode = 'fixed';
    fixed = body;
    const rss = process.memoryUsage().rss;
    await assert.rejects(OverlayReader.open(url, {}), (e) => e.code === 'E_MANIFEST' && pattern.test(e.message), `${body.length}-byte HEAD`);
    assert.ok(process.memoryUsage().rss - rss < 256 << 20, 'bounded while inflating');
  }
  mode = 'chunked';
  sent = 0;
  await assert.rejects(OverlayReader.open(url, {}), (e) => e.code === 'E_MANIFEST' && /larger than 268435456/.test(e.message));
  assert.ok(sent < (256 << 20) + (64 << 20), `chunked: sent ${sent} bytes`);
  const grew = process.memoryUsage().rss - rss0;
  t.diagnostic(`chunked manifest: ${sent} bytes sent before refusal, RSS grew ${grew} bytes`);
  assert.ok(grew < 1 << 30, `RSS grew ${grew} bytes`);
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

test('timeouts and abort signals settle every request', async () => {
  const held = [];
  const s = http.createServer((req) => { held.push(req); }); // accepts, never answers
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${s.address().port}/overlay`;
  const t0 = Date.now();
  await assert.rejects(OverlayReader.open(url, { timeoutMs: 300 }), code('E_TIMEOUT'));
  assert.ok(Date.now() - t0 < 5000);
  const c = new AbortController();
  setTimeout(() => c.abort(), 100);
  await assert.rejects(OverlayReader.open(url, { signal: c.signal, timeoutMs: 0 }), code('E_ABORTED'));
  // A callback source that never settles.
  await assert.rejects(OverlayReader.open({ readRange: () => new Promise(() => {}), size: () => new Promise(() => {}) }, { timeoutMs: 200 }), code('E_TIMEOUT'));
  assert.ok(held.length >= 2);
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
});

test('read-only reader processes serve beside the writer without fencing it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-mp-'));
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'data/p0.parquet'), sampleOrdersParquet(0, 2000, 500, 'snappy'));
  const url = `file://${dir}/overlay`;
  const w = await Overlay.open(url);
  await w.registerParquetTable('orders', `file://${dir}/data`);
  await w.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await w.build('orders');
  await w.publish();
  const script = `
    const { Overlay } = require(${JSON.stringify(require.resolve('skerry'))});
    (async () => {
      const r = await Overlay.open(process.argv[1], { readOnly: true });
      let versions = new Set(), queries = 0;
      const deadline = Date.now() + 60000;
      for (;;) {
        const { version } = await r.refresh();
        versions.add(Number(version));
        // Version v has files p0..p(v-1), each of 2000 orders: every id below 2000*v is found.
        const v = Number(version);
        for (const id of [0, 1999, 2000 * v - 1, 2000 * v]) {
          const q = await r.query('orders', { where: { order_id: id }, columns: ['order_id'] });
          const want = id < 2000 * v ? [id] : [];
          if (JSON.stringify(q.rows.map((x) => Number(x.order_id))) !== JSON.stringify(want)) throw new Error('v' + v + ' id ' + id + ': ' + JSON.stringify(q.rows));
          queries++;
        }
        if (v >= 4 || Date.now() > deadline) break;
      }
      let e;
      try { await r.publish(); } catch (x) { e = x.code; }
      await r.close();
      process.stdout.write(JSON.stringify({ versions: [...versions], queries, publish: e, readOnly: r.readOnly }));
    })().catch((e) => { process.stderr.write(String(e && e.stack || e)); process.exit(1); });
  `;
  const readers = Array.from({ length: 4 }, () => {
    const p = spawn(process.execPath, ['-e', script, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    return new Promise((resolve) => p.on('exit', (c) => resolve({ c, out, err })));
  });
  for (let v = 2; v <= 4; v++) {
    const name = `p${v - 1}.parquet`;
    fs.writeFileSync(path.join(dir, 'data', name), sampleOrdersParquet(2000 * (v - 1), 2000, 500, 'snappy'));
    await w.registerFiles('orders', [name]);
    await w.build('orders');
    await w.publish();
    await new Promise((r) => setTimeout(r, 200));
  }
  const done = await Promise.all(readers);
  for (const d of done) {
    assert.equal(d.c, 0, d.err);
    const r = JSON.parse(d.out);
    assert.ok(r.versions.includes(4), d.out);
    assert.ok(r.queries >= 4);
    assert.equal(r.publish, 'E_READ_ONLY');
    assert.equal(r.readOnly, true);
  }
  // The writer was never fenced.
  await w.createIndex('orders', 'by_day', ['day']);
  await w.build('orders');
  assert.equal((await w.publish()).version, 5n);
  await w.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
