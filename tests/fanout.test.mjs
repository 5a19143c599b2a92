// Builds beyond one machine (docs/fanout.md) on a real job system: BullMQ on a Redis server
// (Debian's redis-server, started here), 4 worker processes building bundles from the plan,
// one committer. The result must equal a local build() — byte for byte, lookup for lookup —
// with a worker killed mid-job (its job retried, no file duplicated or lost), and a receipt
// made stale between build and commit must be refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRedis } from '../examples/fanout-bullmq/redis.mjs';
import { fanoutBuild } from '../examples/fanout-bullmq/fanout.mjs';

const require = createRequire(import.meta.url);
const { Overlay, BundleBuilder, sampleOrdersParquet } = require('skerry');

const FILES = 200;
const ROWS = 300;

function setup(files = FILES) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-fanout-'));
  const data = path.join(dir, 'data');
  fs.mkdirSync(data);
  for (let i = 0; i < files; i++) {
    fs.writeFileSync(path.join(data, `part-${String(i).padStart(4, '0')}.parquet`), sampleOrdersParquet(i * ROWS, ROWS, 100));
  }
  return { dir, data };
}

async function open(dir, name, data) {
  const url = `file://${path.join(dir, name)}`;
  const o = await Overlay.open(url);
  await o.registerParquetTable('orders', `file://${data}`);
  await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await o.createIndex('orders', 'by_customer', ['customer']);
  return { url, o };
}

/** Per data file id, its bundle's bytes (runs left out; names differ by plan, bytes may not). */
function bundles(dir, name) {
  const root = path.join(dir, name, 'bundles');
  const out = new Map();
  for (const t of fs.readdirSync(root)) {
    for (const f of fs.readdirSync(path.join(root, t))) {
      if (f.startsWith('run-')) continue;
      const m = /^(\d+)-g(\d+)(-[0-9a-f]+)?\.puffin$/.exec(f);
      assert.ok(m, f);
      out.set(`${t}/${m[1]}`, [...(out.get(`${t}/${m[1]}`) ?? []), fs.readFileSync(path.join(root, t, f))]);
    }
  }
  return out;
}

/** Per index id, its run bundles' bytes (names differ by their attempt token). */
function runBundles(dir, name) {
  const root = path.join(dir, name, 'bundles');
  const out = new Map();
  for (const t of fs.readdirSync(root)) {
    for (const f of fs.readdirSync(path.join(root, t))) {
      const m = /^run-(\d+)-g\d+-[0-9a-f]+\.puffin$/.exec(f);
      if (m) out.set(m[1], [...(out.get(m[1]) ?? []), fs.readFileSync(path.join(root, t, f))]);
    }
  }
  return out;
}

test('200 files built by 4 BullMQ workers (one killed mid-job) equal a local build', { timeout: 300_000 }, async () => {
  const { dir, data } = setup();
  const redis = await startRedis();
  try {
    const fan = await open(dir, 'fanout', data);
    // Worker 1 dies (SIGKILL) right after writing its 3rd bundle, before reporting it.
    const r = await fanoutBuild(fan.o, 'orders', {
      overlayUrl: fan.url,
      redisUrl: redis.url,
      workers: 4,
      workerEnv: (i) => ({ SKERRY_EXAMPLE_LOCK_MS: '1500', SKERRY_EXAMPLE_STALLED_MS: '500', ...(i === 1 ? { SKERRY_EXAMPLE_CRASH_ON_JOB: '3' } : {}) }),
    });
    assert.equal(r.tasks, FILES);
    assert.equal(r.report.committed.length, FILES, JSON.stringify(r.report.refused));
    assert.deepEqual(r.report.refused, []);
    assert.equal(r.report.entries, BigInt(2 * FILES * ROWS));
    // Every file once: none lost, none twice.
    assert.equal(new Set(r.report.committed).size, FILES);
    assert.equal(new Set(r.jobs.map((j) => j.file)).size, FILES);
    // The killed worker's job was found stalled and run again.
    assert.ok(r.exits.some((e) => e.worker === 1 && e.signal === 'SIGKILL'), JSON.stringify(r.exits));
    const retried = r.jobs.filter((j) => j.stalled > 0 || j.started > 1);
    assert.equal(retried.length, 1, JSON.stringify(retried));
    for (const ix of await fan.o.listIndexes('orders')) assert.equal(ix.state, 'ready', ix.name);

    const local = await open(dir, 'local', data);
    await local.o.build('orders');
    // Byte-identical bundles, one per file in each.
    const a = bundles(dir, 'local');
    const b = bundles(dir, 'fanout');
    assert.equal(a.size, FILES);
    assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort());
    for (const [k, [bytes]] of a) {
      assert.equal(b.get(k).length, 1, `one bundle of ${k} (the retried job wrote the same name)`);
      assert.ok(bytes.equals(b.get(k)[0]), `bundle of ${k} differs`);
    }
    // The table runs: the unique index's written as it turned ready (its cross-file check),
    // the other's by a worker from a run task — each byte for byte the local build's.
    assert.equal(r.runTasks, 1);
    assert.equal(r.runs.runs.length, 1, JSON.stringify(r.runs.refused));
    assert.deepEqual(r.runs.refused, []);
    const ra = runBundles(dir, 'local');
    const rb = runBundles(dir, 'fanout');
    assert.equal(ra.size, 2);
    assert.deepEqual([...rb.keys()].sort(), [...ra.keys()].sort());
    for (const [k, [bytes]] of ra) {
      assert.equal(rb.get(k).length, 1, `one run of index ${k}`);
      assert.ok(bytes.equals(rb.get(k)[0]), `run of index ${k} differs`);
    }
    // The same answers, from the indexes.
    for (const [ix, key] of [['by_id', 0], ['by_id', 31_337], ['by_id', FILES * ROWS - 1], ['by_id', FILES * ROWS], ['by_customer', 'customer-00042'], ['by_customer', 'nobody']]) {
      const x = await local.o.lookup('orders', ix, key);
      const y = await fan.o.lookup('orders', ix, key);
      assert.equal(y.stats.filesScanned, 0, `${ix} ${key} answered by the index`);
      const rows = (res) => res.rows.map((row) => `${row.file}@${row.position}`).sort();
      assert.deepEqual(rows(y), rows(x), `${ix} ${key}`);
    }
    assert.equal((await fan.o.lookup('orders', 'by_id', 31_337)).rows.length, 1);
    for (const ix of ['by_id', 'by_customer']) {
      const v = await fan.o.verify('orders', ix);
      assert.equal(v.missing + v.mismatched, 0, ix);
    }
    await local.o.close();
    await fan.o.close();
  } finally {
    await redis.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a receipt made stale by a file rewrite between build and commit is refused; a new plan completes it', async () => {
  const { dir, data } = setup(4);
  try {
    const { url, o } = await open(dir, 'o', data);
    const tasks = await o.planBuild('orders');
    assert.equal(tasks.length, 4);
    assert.ok(tasks.every((t) => typeof t === 'string'));
    const builder = BundleBuilder.open(url);
    const receipts = await Promise.all(tasks.map((t) => builder.buildBundle(t)));
    // Built again (a retry): the same receipt.
    assert.equal(await builder.buildBundle(tasks[2]), receipts[2]);
    fs.writeFileSync(path.join(data, 'part-0001.parquet'), sampleOrdersParquet(90_000, ROWS, 100));
    assert.deepEqual((await o.refresh('orders')).changed, ['part-0001.parquet']);
    const report = await o.commitBuild(receipts);
    assert.deepEqual(report.committed.sort(), ['part-0000.parquet', 'part-0002.parquet', 'part-0003.parquet']);
    assert.equal(report.refused.length, 1);
    assert.equal(report.refused[0].file, 'part-0001.parquet');
    assert.match(report.refused[0].reason, /file changed/);
    assert.equal((await o.listIndexes('orders')).find((i) => i.name === 'by_id').state, 'building');
    // Committed again (a retry): the three committed are reported so and nothing is written;
    // the rewritten file's receipt is still stale.
    const again = await o.commitBuild(receipts);
    assert.deepEqual(again.committed.sort(), ['part-0000.parquet', 'part-0002.parquet', 'part-0003.parquet']);
    assert.equal(again.refused.length, 1);
    assert.equal(again.refused[0].file, 'part-0001.parquet');
    assert.equal(again.transactions, 0);
    // What is left, planned again and built: ready, and the rewritten file's rows answer.
    const left = await o.planBuild('orders');
    assert.equal(left.length, 1);
    assert.equal(JSON.parse(left[0]).file.path, 'part-0001.parquet');
    const done = await o.commitBuild([await builder.buildBundle(left[0])]);
    assert.deepEqual(done.committed, ['part-0001.parquet']);
    for (const ix of await o.listIndexes('orders')) assert.equal(ix.state, 'ready', ix.name);
    assert.deepEqual((await o.lookup('orders', 'by_id', 90_005)).rows.map((r) => [r.file, Number(r.position)]), [['part-0001.parquet', 5]]);
    assert.equal((await o.lookup('orders', 'by_id', ROWS + 5)).rows.length, 0);
    // Wrong types and damaged texts are E_INVALID.
    await assert.rejects(o.commitBuild(['{"format":1}']), (e) => e.code === 'E_INVALID');
    await assert.rejects(o.commitBuild('nope'), (e) => e.code === 'E_INVALID');
    await assert.rejects(builder.buildBundle({ task: 1 }), (e) => e.code === 'E_INVALID');
    await assert.rejects(builder.buildBundle('{'), (e) => e.code === 'E_INVALID' && /not a build task/.test(e.message));
    await assert.rejects(o.planBuild('orders', { index: 'nope' }), (e) => e.code === 'E_NOT_FOUND');
    await assert.rejects(o.planBuild('orders', { passEntries: 0 }), (e) => e.code === 'E_INVALID');
    await assert.rejects(o.planBuild('orders', { passEntries: 1.5 }), (e) => e.code === 'E_INVALID');
    assert.throws(() => BundleBuilder.open(42), (e) => e.code === 'E_INVALID');
    await o.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
