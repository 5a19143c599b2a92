// Reads under network faults from the wasm reader (issue "Faults, soak and fuzzing", the
// read verbs on the second target): the range server fails a seeded share of requests — a
// 503 or a connection reset — while the reader opens the overlay and answers lookups,
// ranges, queries, counts, searches and nearest-neighbour searches. Every call either
// answers exactly what the addon answers (which reads the same overlay without faults) or
// throws an Error with a `code` and `retryable: true`; retrying converges; and the reader
// leaves no request timer running once the calls are done.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

let root, server, addon, rows;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-read-faults-'));
  const data = path.join(root, 'data/t');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), data, '6', '300', '8', '21']);
  rows = JSON.parse(fs.readFileSync(path.join(data, 'rows.json'), 'utf8'));
  addon = await Overlay.open(`file://${root}/overlay`);
  await addon.registerParquetTable('t', `file://${data}`);
  await addon.createIndex('t', 'by_id', ['id']);
  await addon.createIndex('t', 'by_cat', ['cat'], { kind: 'bitmap' });
  await addon.createIndex('t', 'body_text', ['body'], { kind: 'fulltext' });
  await addon.createIndex('t', 'emb_l2', ['emb'], { kind: 'vector', metric: 'l2' });
  await addon.build('t');
  await addon.publish();
  server = await startRangeServer(root, { latencyMs: 1 });
});

after(async () => {
  await addon?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const places = (r) => (r.refs ?? r.rows).map((x) => `${x.file}:${x.position}`);

/** Calls `f` until it answers; every failure must be a typed, retryable Error. */
async function untilOk(what, f, failures) {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      return await f();
    } catch (e) {
      assert.ok(e instanceof Error, `${what}: ${e}`);
      assert.equal(typeof e.code, 'string', `${what}: ${e.message}`);
      assert.equal(e.retryable, true, `${what}: ${e.code} ${e.message} is not retryable`);
      failures.push(e.code);
    }
  }
  assert.fail(`${what} never converged`);
}

test('every read verb of the wasm reader answers exactly or fails typed and retryable under network faults', async () => {
  const failures = [];
  server.setFaults(0.15, 0x2545f491);
  const open = () => OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data/t` } });
  for (let round = 0; round < 3; round++) {
    // A fresh reader each round: cold reads (manifest, directories, blocks) meet faults too.
    const wasm = await untilOk('open', open, failures);
    const v = rows['f2.parquet'].find((r) => r.emb && !r.nan).emb;
    const calls = [
      ['lookup', (x) => x.lookup('t', 'by_id', 200_017n), (r) => places(r)],
      ['range', (x) => x.range('t', 'by_id', { key: 100_000n }, { key: 100_050n }), (r) => places(r)],
      ['query', (x) => x.query('t', { where: { cat: 3n }, columns: ['id'] }), (r) => places(r)],
      ['count', (x) => x.count('t', { where: { cat: { in: [1n, 4n] } } }), (r) => r.count],
      ['search', (x) => x.search('t', { query: 'harbor stone', k: 10, columns: [] }), (r) => [places(r), r.scores]],
      ['nearest', (x) => x.nearest('t', { vector: v, k: 10, column: 'emb', columns: ['id'] }), (r) => [places(r), r.distances]],
    ];
    for (const [what, call, shape] of calls) {
      const want = shape(await call(addon));
      const got = shape(await untilOk(what, () => call(wasm), failures));
      assert.deepEqual(got, want, `${what}, round ${round}`);
    }
    wasm.free();
  }
  server.setFaults(0);
  // A request dropped mid-flight (a sibling of its round failed) leaves no timer behind: a
  // leaked request deadline kept the process alive for the whole timeout after the reads.
  await new Promise((r) => setImmediate(r));
  const timers = process.getActiveResourcesInfo().filter((x) => x === 'Timeout').length;
  assert.equal(timers, 0, `${timers} timers left by the reader`);
  console.log(`${server.stats.faults} faults injected; ${failures.length} typed failures: ${[...new Set(failures)].join(', ')}`);
  assert.ok(server.stats.faults > 0 && failures.length > 0, `${server.stats.faults} faults, ${failures.length} failures`);
});
