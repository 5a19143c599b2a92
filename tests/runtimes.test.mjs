// The wasm reader in the runtimes it ships for, from the examples a user would copy:
// - examples/worker/ bundled by wrangler (as `wrangler deploy` does, resolving the package's
//   `workerd` entry) and run in workerd through miniflare, over fetch AND an R2 binding;
// - examples/browser/ in headless Chromium (Debian's), page and data on different origins,
//   the HTTP cache on, the reader re-opened so it meets a warm, partial cache.
// Every answer is checked against the Node addon's answer to the same call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { startRangeServer } from '../scripts/range-server.mjs';
import { bundleExampleWorker } from '../scripts/worker-bundle.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

const CALLS = [
  ['lookup', 'orders', 'by_id', 1234],
  ['lookup', 'orders', 'by_customer', 'customer-00042'],
  ['lookupMany', 'orders', 'by_id', [5, 17, 20000, 44999, 99999999]],
  ['range', 'orders', 'by_id', { key: 100 }, { key: 110, inclusive: false }],
  ['nulls', 'orders', 'by_customer', [null]],
  ['query', 'orders', { where: { customer: 'customer-00042', amount: { gt: 600 } }, columns: ['order_id', 'amount', 'day'] }],
  ['query', 'orders', { where: { order_id: { in: [5, 15001, 29999, 44000] } }, columns: ['order_id', 'customer'] }],
  ['query', 'orders', { where: { day: { between: [19100, 19101] } }, columns: ['order_id'], limit: 50 }],
  ['lookup', 'orders', 'no_such_index', 1],
];

const plain = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? Array.from(x) : x)));

let root, overlay, server, expected;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-runtimes-'));
  const data = path.join(root, 'data/orders');
  fs.mkdirSync(data, { recursive: true });
  const codecs = ['snappy', 'zstd', 'lz4'];
  for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(data, `part-${i}.parquet`), sampleOrdersParquet(i * 15000, 15000, 2500, codecs[i]));
  overlay = await Overlay.open(`file://${root}/overlay`);
  await overlay.registerParquetTable('orders', `file://${data}`);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.createIndex('orders', 'by_customer', ['customer']);
  await overlay.build('orders');
  await overlay.publish();
  expected = [];
  for (const [verb, ...args] of CALLS) {
    try {
      expected.push(plain({ rows: (await overlay[verb](...args)).rows }));
    } catch (e) {
      expected.push({ error: { code: e.code } });
    }
  }
  // Not vacuous: the calls find rows, and the last one fails.
  assert.ok(expected.slice(0, -1).every((r) => r.rows && r.rows.length > 0), JSON.stringify(expected).slice(0, 500));
  assert.equal(expected.at(-1).error.code, 'E_NOT_FOUND');
  server = await startRangeServer(root, { cache: true });
});

after(async () => {
  await overlay?.close();
  await server?.close();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

/** Compares answers (rows, or the error code) with the addon's. */
function assertSame(got, label) {
  assert.equal(got.length, expected.length, `${label}: ${JSON.stringify(got).slice(0, 300)}`);
  got.forEach((g, i) => {
    if (expected[i].error) assert.equal(g.error?.code, expected[i].error.code, `${label} ${CALLS[i][0]}: ${JSON.stringify(g)}`);
    else assert.deepEqual(g.rows, expected[i].rows, `${label} ${JSON.stringify(CALLS[i])}: ${JSON.stringify(g).slice(0, 300)}`);
  });
}

test('examples/worker: bundled by wrangler, in workerd via miniflare, over fetch and R2', async (t) => {
  const { Miniflare } = await import('miniflare');
  const dist = path.join(root, 'worker-dist');
  // What `wrangler deploy` would upload: the package's `workerd` entry with its .wasm module
  // (exactly one, or the helper throws).
  const { modules } = bundleExampleWorker(dist);
  const mf = new Miniflare({
    modules,
    modulesRoot: dist,
    compatibilityDate: '2026-04-01',
    r2Buckets: ['BUCKET'],
    bindings: { OVERLAY_URL: `${server.url}/overlay`, DATA_URL: `${server.url}/data` },
  });
  try {
    const bucket = await mf.getR2Bucket('BUCKET');
    const walk = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
    for (const f of [...walk(path.join(root, 'overlay')), ...walk(path.join(root, 'data'))]) {
      const rel = path.relative(root, f);
      await bucket.put(rel, new Uint8Array(fs.readFileSync(f)));
    }
    const spent = {};
    for (const source of ['url', 'r2']) {
      server.reset();
      const res = await mf.dispatchFetch('http://worker.local/', { method: 'POST', body: JSON.stringify({ source, tables: ['orders'], calls: CALLS }) });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assertSame(body, `worker (${source})`);
      if (source === 'url') assert.ok(server.stats.requests > 0, 'the url source read over HTTP');
      else assert.equal(server.stats.requests, 0, 'the R2 source made no HTTP request');
      // Warm: the reader at module scope answers again, the same.
      const again = await (await mf.dispatchFetch('http://worker.local/', { method: 'POST', body: JSON.stringify({ source, tables: ['orders'], calls: CALLS }) })).json();
      assertSame(again, `worker (${source}, warm)`);
      const sum = (rs, k) => rs.reduce((n, r) => n + (r[k] ?? 0), 0);
      spent[source] = { first: { requests: sum(body, 'requests'), bytes: sum(body, 'bytes') }, warm: { requests: sum(again, 'requests'), bytes: sum(again, 'bytes') } };
      t.diagnostic(`${source}: ${CALLS.length} calls answered as the addon did`);
    }
    t.diagnostic(`query requests and bytes: ${JSON.stringify(spent)}`);
    // The R2 source names each object's version (`httpEtag`): the reader keeps the data files'
    // metadata between requests as it does over HTTP (without versions every query read each
    // footer again: 50 requests here), and as R2's ETags are MD5s — content versions — it does
    // not fetch the dictionary pages it holds, which the URL source (a time-and-size ETag)
    // fetches and compares.
    assert.ok(spent.r2.warm.requests <= spent.url.warm.requests, JSON.stringify(spent));
    assert.ok(spent.r2.warm.bytes < spent.url.warm.bytes * 0.9, JSON.stringify(spent));
  } finally {
    await mf.dispose();
  }
});

test('examples/browser: headless Chromium, cross-origin data, HTTP cache on', async (t) => {
  const { chromium } = await import('playwright-core');
  // The page on one origin (127.0.0.1), overlay and data on another (localhost).
  const pages = await startRangeServer(repo);
  const dataOrigin = server.url.replace('127.0.0.1', 'localhost');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  try {
    const page = await browser.newPage();
    const logs = [];
    page.on('console', (m) => logs.push(m.text()));
    page.on('pageerror', (e) => logs.push(String(e)));
    await page.goto(`${pages.url}/examples/browser/index.html?overlay=${encodeURIComponent(`${dataOrigin}/overlay`)}&data=${encodeURIComponent(`${dataOrigin}/data`)}`);
    await page.waitForFunction(() => window.skerryReady === true, null, { timeout: 60000 }).catch((e) => {
      throw new Error(`${e.message}\n${logs.join('\n')}`);
    });
    server.reset();
    const first = await page.evaluate((calls) => window.skerryExample.run(['orders'], calls), CALLS);
    assertSame(first, 'chromium');
    const cold = server.stats.requests;
    assert.ok(cold > 0);
    // Only absolute ranges: a suffix range is what a partially cached object turns into 416.
    for (const r of server.stats.log) assert.ok(!r.range || /^bytes=\d+-\d+$/.test(r.range), `a non-absolute range: ${JSON.stringify(r)}`);
    // A second reader in the same page meets the cache holding parts of every file it read.
    server.reset();
    const second = await page.evaluate(async (calls) => {
      const { OverlayReader } = window.skerryExample;
      const u = new URL(location.href);
      const reader = await OverlayReader.open(u.searchParams.get('overlay'), { tables: { orders: `${u.searchParams.get('data')}/orders` } });
      const out = [];
      for (const [verb, ...args] of calls) {
        try {
          const res = await reader[verb](...args);
          out.push(JSON.parse(JSON.stringify({ rows: res.rows }, (k, x) => (typeof x === 'bigint' ? `${x}n` : x))));
        } catch (e) {
          out.push({ error: { code: e.code, message: e.message } });
        }
      }
      return out;
    }, CALLS);
    assertSame(second, 'chromium (second reader, warm cache)');
    t.diagnostic(`requests: first reader ${cold}, second reader ${server.stats.requests} (the rest came from Chromium's cache)`);
    assert.ok(server.stats.requests < cold, `the HTTP cache served nothing: ${server.stats.requests} vs ${cold}`);
    // The form does what the page says.
    await page.fill('input[name=customer]', 'customer-00042');
    await page.click('button');
    await page.waitForFunction(() => document.getElementById('out').textContent.includes('order_id'), null, { timeout: 30000 });
  } finally {
    await browser.close();
    await pages.close();
  }
});

test('wasm in Node: fetch options reach the server; bad options are E_INVALID', async () => {
  const { OverlayReader } = require('skerry-wasm');
  server.reset();
  const r = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { orders: `${server.url}/data/orders` },
    fetch: { headers: { authorization: 'Bearer t0ken' }, cache: 'no-store' },
  });
  const got = await r.query('orders', { where: { order_id: 1234 }, columns: ['order_id'] });
  assert.deepEqual(got.rows, [{ order_id: 1234 }]);
  assert.ok(server.stats.log.length >= 3);
  for (const l of server.stats.log) assert.equal(l.authorization, 'Bearer t0ken', JSON.stringify(l));
  for (const bad of [5, 'x', [1]]) {
    await assert.rejects(OverlayReader.open(`${server.url}/overlay`, { fetch: bad }), (e) => e.code === 'E_INVALID' && /options\.fetch/.test(e.message));
  }
  await assert.rejects(OverlayReader.open(`${server.url}/overlay`, { tables: { orders: 7 } }), (e) => e.code === 'E_INVALID' && /options\.tables\.orders/.test(e.message));
  await assert.rejects(OverlayReader.open(`${server.url}/overlay`, { tables: { orders: { readRange: 1 } } }), (e) => e.code === 'E_INVALID' && /options\.tables\.orders\.readRange/.test(e.message));
});

test('a data file that shrank after publishing: the absolute tail read is refused (416), re-read at its real size, and the file scanned', async () => {
  const { OverlayReader } = require('skerry-wasm');
  const file = path.join(root, 'data/orders/part-2.parquet');
  // 1,000 rows instead of 15,000: far shorter than the 64 KiB tail the manifest's size implies.
  fs.writeFileSync(file, sampleOrdersParquet(30000, 1000, 500, 'snappy'));
  const call = ['orders', { where: { order_id: { in: [5, 30500, 31000, 44000] } }, columns: ['order_id', 'customer'] }];
  const native = await overlay.query(...call);
  server.reset();
  const r = await OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data/orders` } });
  const wasm = await r.query(...call);
  assert.deepEqual(wasm.rows, native.rows);
  // Rows of the new file are found by scanning it; the row past its end is gone.
  assert.deepEqual(wasm.rows.map((x) => x.order_id), [5, 30500]);
  assert.ok(wasm.stats.drifted.includes('part-2.parquet'), JSON.stringify(wasm.stats, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
  const tails = server.stats.log.filter((l) => l.path.endsWith('part-2.parquet'));
  assert.ok(tails.some((l) => l.status === 416), `no 416 seen: ${JSON.stringify(tails)}`);
  for (const l of server.stats.log) assert.ok(!l.range || /^bytes=\d+-\d+$/.test(l.range), JSON.stringify(l));
});

test('skerry-wasm/web: a reader opened before init() is refused E_NOT_INITIALISED, then works', async () => {
  const web = await import('skerry-wasm/web');
  const url = `${server.url}/overlay`;
  await assert.rejects(web.OverlayReader.open(url), (e) => e.code === 'E_NOT_INITIALISED' && /init\(\)/.test(e.message) && /initSync/.test(e.message));
  web.initSync({ module: fs.readFileSync(path.join(repo, 'bindings-wasm/pkg/web/skerry_wasm_bg.wasm')) });
  const r = await web.OverlayReader.open(url, { tables: { orders: `${server.url}/data/orders` } });
  assert.equal((await r.lookup('orders', 'by_id', 5)).rows.length, 1);
});
