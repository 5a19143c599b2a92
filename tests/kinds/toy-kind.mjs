// The test-only toy kind `valueset` (core/src/index/valueset/: an exact set of a file's keys,
// which prunes files) through everything a kind takes part in, from an addon and a wasm
// reader built with the test kinds (`scripts/build.sh test-kinds`, named by
// SKERRY_TEST_KINDS): created (its options checked by the generic rules), built staged
// (`buildStep`) and by fan-out (`planBuild` → `BundleBuilder.buildBundle` → `commitBuild`),
// published, read by both surfaces, verified, dropped and vacuumed. Nothing outside the kind's
// folder knows it but the three places `docs/architecture.md` lists.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../../scripts/range-server.mjs';

const BUILD = process.env.SKERRY_TEST_KINDS;
assert.ok(BUILD, 'SKERRY_TEST_KINDS names the build with the test kinds (scripts/build.sh test-kinds)');
const require = createRequire(import.meta.url);
process.env.NAPI_RS_NATIVE_LIBRARY_PATH = path.join(BUILD, fs.readdirSync(BUILD).find((f) => /^skerry\..*\.node$/.test(f)));
const { Overlay, BundleBuilder, writeParquet } = require('skerry');
const { OverlayReader } = require(path.join(BUILD, 'wasm/skerry_wasm.js'));

const FILES = 4;
const ROWS = 300;
const COLUMNS = [{ name: 'id', type: 'int64' }, { name: 'color', type: 'string' }];
// File k holds ids k*ROWS.. and the colors `c{k}`, `shared` and NULL.
const rowsOf = (k) => Array.from({ length: ROWS }, (_, i) => [BigInt(k * ROWS + i), i % 3 === 0 ? `c${k}` : i % 3 === 1 ? 'shared' : null]);

let root, url, overlay, server;
before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-toy-kind-'));
  fs.mkdirSync(path.join(root, 'data'), { recursive: true });
  for (let k = 0; k < FILES; k++) fs.writeFileSync(path.join(root, `data/part-${k}.parquet`), writeParquet(COLUMNS, rowsOf(k), 100));
  url = `file://${root}/overlay`;
  overlay = await Overlay.open(url);
  await overlay.registerParquetTable('t', `file://${root}/data`);
  server = await startRangeServer(root);
});
after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const wasmReader = () => OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data` } });

test('valueset: the generic option rules apply to it', async () => {
  await assert.rejects(overlay.createIndex('t', 'bad', ['color'], { kind: 'valueset', fpp: 0.01 }),
    (e) => e.code === 'E_INVALID' && /fpp applies to bloom indexes, not valueset/.test(e.message));
  await assert.rejects(overlay.createIndex('t', 'bad', ['color'], { kind: 'valueset', unique: true }),
    (e) => e.code === 'E_INVALID' && /a valueset index cannot be unique/.test(e.message));
  await assert.rejects(overlay.createIndex('t', 'bad', ['color'], { kind: 'valuesets' }),
    (e) => e.code === 'E_INVALID' && /kinds: ordered, bitmap, bloom, fulltext, vector, valueset/.test(e.message));
});

test('valueset: built staged and by fan-out, published, read by the addon and the wasm reader, verified, dropped, vacuumed', async () => {
  const info = await overlay.createIndex('t', 'vs_color', ['color'], { kind: 'valueset' });
  assert.equal(info.kind, 'valueset');
  // Staged: bounded steps until done.
  const first = await overlay.buildStep('t', 'vs_color', { maxEntries: ROWS });
  assert.deepEqual([first.done, first.state], [false, 'building']);
  let steps = 1;
  for (let s = first; !s.done; steps++) s = await overlay.buildStep('t', 'vs_color', { maxEntries: ROWS });
  assert.ok(steps >= FILES, `${steps} steps`);
  // Fan-out: tasks built by a separate builder, receipts committed.
  await overlay.createIndex('t', 'vs_id', ['id'], { kind: 'valueset' });
  const tasks = await overlay.planBuild('t', { index: 'vs_id' });
  assert.equal(tasks.length, FILES);
  const builder = BundleBuilder.open(url);
  const receipts = await Promise.all(tasks.map((task) => builder.buildBundle(task)));
  const commit = await overlay.commitBuild(receipts);
  assert.equal(commit.committed.length, FILES, JSON.stringify(commit.refused));
  for (const ix of await overlay.listIndexes('t')) assert.deepEqual([ix.name, ix.kind, ix.state], [ix.name, 'valueset', 'ready']);
  await overlay.publish();

  const wasm = await wasmReader();
  try {
    for (const side of [overlay, wasm]) {
      // An exact set prunes exactly the files without the value: c2 is in part-2 alone.
      const c2 = await side.query('t', { where: { color: 'c2' }, columns: ['id'] });
      assert.equal(c2.rows.length, ROWS / 3);
      assert.ok(c2.refs.every((r) => r.file === 'part-2.parquet'));
      assert.deepEqual([c2.stats.index, c2.stats.indexKind, c2.stats.filesPruned, c2.stats.filesScanned], ['vs_color', 'valueset', FILES - 1, 1]);
      const shared = await side.count('t', { where: { color: { in: ['shared', 'c1', 'nope'] } } });
      assert.equal(shared.count, FILES * (ROWS / 3) + ROWS / 3);
      assert.equal(shared.stats.filesPruned, 0);
      const none = await side.query('t', { where: { color: 'nope' } });
      assert.deepEqual([none.rows.length, none.stats.filesPruned, none.stats.dataRequests], [0, FILES, 0]);
      const id = await side.query('t', { where: { id: { in: [5n, BigInt(3 * ROWS + 7)] } }, columns: ['id', 'color'] });
      assert.deepEqual(id.rows.map((r) => BigInt(r.id)).sort(), [5n, BigInt(3 * ROWS + 7)]);
      assert.equal(id.stats.filesPruned, FILES - 2);
      // It names no rows: a lookup through it is refused, the same way on both sides.
      await assert.rejects(side.lookup('t', 'vs_id', 5n), (e) => e.code === 'E_UNSUPPORTED' && /a valueset index: it prunes files for query and count, it names no rows/.test(e.message));
    }
  } finally {
    wasm.free();
  }

  for (const ix of ['vs_color', 'vs_id']) {
    const v = await overlay.verify('t', ix);
    assert.deepEqual([v.files, v.missing, v.mismatched, v.certified], [FILES, 0, 0, true], ix);
  }

  const purge = await overlay.dropIndex('t', 'vs_id', { purge: true });
  assert.deepEqual([purge.indexFiles, purge.droppedIndexes], [FILES, 1]);
  await overlay.publish();
  await overlay.publish();
  const vac = await overlay.vacuum({ retainVersions: 1, graceSeconds: 0 });
  assert.ok(vac.artifacts >= 1, JSON.stringify(vac));
  const after = await wasmReader();
  try {
    const q = await after.query('t', { where: { id: 5n }, columns: ['id'] });
    assert.deepEqual(q.rows.map((r) => BigInt(r.id)), [5n]);
    assert.deepEqual([q.stats.index, q.stats.indexRequests], [undefined, 0], 'the dropped index answers nothing');
    const c = await after.query('t', { where: { color: 'c3' }, columns: [] });
    assert.deepEqual([c.stats.indexKind, c.stats.filesPruned], ['valueset', FILES - 1]);
  } finally {
    after.free();
  }
});
