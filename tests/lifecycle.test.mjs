// The catalog lifecycle from Node: registerFiles / registerDeletes with unique claims (and a
// race), staged builds with progress, drop with purge, vacuum, verify and its certificate.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Overlay, writeParquet } = require('skerry');

const COLUMNS = [{ name: 'id', type: 'int64' }, { name: 'email', type: 'string' }];

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-lifecycle-'));
  const data = path.join(dir, 'data');
  fs.mkdirSync(data);
  const write = (name, rows, group = 250) =>
    fs.writeFileSync(path.join(data, name), writeParquet(COLUMNS, rows, group, 'zstd'));
  const range = (first, n) =>
    Array.from({ length: n }, (_, i) => [first + i, (first + i) % 10 === 3 ? null : `u${first + i}@x`]);
  return { dir, data, write, range, url: `file://${path.join(dir, 'overlay')}`, dataUrl: `file://${data}` };
}

test('registerFiles keeps a unique index whole; duplicates and races fail with E_CONSTRAINT', async () => {
  const s = setup();
  s.write('a.parquet', s.range(0, 1000));
  const overlay = await Overlay.open(s.url);
  await overlay.registerParquetTable('t', s.dataUrl, { files: ['a.parquet'] });
  await overlay.createIndex('t', 'by_email', ['email'], { unique: true });
  const steps = [];
  const built = await overlay.build('t', { index: 'by_email', maxEntries: 300, onProgress: (p) => steps.push(p) });
  assert.equal(built.entries, 1000n);
  assert.ok(steps.length >= 4, 'several bounded steps');
  assert.deepEqual(steps.map((p) => p.step), steps.map((_, i) => i + 1), 'steps only move forward');
  assert.ok(steps.slice(0, -1).every((p) => !p.done && p.state === 'building'));
  assert.equal(steps.at(-1).state, 'ready');
  assert.equal(steps.at(-1).rowsDone, 1000);
  assert.ok(steps.some((p) => p.cursor && p.cursor.file === 'a.parquet' && p.cursor.position === 300));

  s.write('dup.parquet', [[5000, 'new@x'], [5001, 'u42@x']]);
  await assert.rejects(overlay.registerFiles('t', ['dup.parquet']), (e) => {
    assert.equal(e.code, 'E_CONSTRAINT');
    assert.match(e.message, /t\.by_email/);
    assert.match(e.message, /a\.parquet@42/);
    assert.doesNotMatch(e.message, /u42@x/);
    return true;
  });
  assert.equal((await overlay.lookup('t', 'by_email', 'new@x')).rows.length, 0, 'nothing landed');

  // Four writers race for one value: exactly one commits.
  for (let i = 0; i < 4; i++) s.write(`race-${i}.parquet`, [[6000 + i, 'contested@x']]);
  const results = await Promise.allSettled([0, 1, 2, 3].map((i) => overlay.registerFiles('t', [`race-${i}.parquet`])));
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
  for (const r of results.filter((r) => r.status === 'rejected')) assert.equal(r.reason.code, 'E_CONSTRAINT');
  assert.equal((await overlay.lookup('t', 'by_email', 'contested@x')).rows.length, 1);

  // Deleting the row frees its key; answers leave it out; the value registers again.
  const d = await overlay.registerDeletes('t', [{ file: 'a.parquet', positions: [42n, 44] }]);
  assert.deepEqual(d, { rowsDeleted: 2 });
  assert.equal((await overlay.lookup('t', 'by_email', 'u42@x')).rows.length, 0);
  const r = await overlay.registerFiles('t', ['dup.parquet']);
  assert.equal(r.files, 1);
  const found = await overlay.lookup('t', 'by_email', 'u42@x');
  assert.deepEqual(found.rows.map((x) => x.file), ['dup.parquet']);
  assert.equal(found.stats.filesScanned, 0, 'the registered file came indexed');
  await assert.rejects(overlay.registerDeletes('t', [{ file: 'a.parquet', positions: [-1] }]), (e) => e.code === 'E_INVALID');
  await overlay.close();
});

test('build() reads each file once for all indexes: one bundle per file, progress per commit', async () => {
  const s = setup();
  for (let i = 0; i < 3; i++) s.write(`p${i}.parquet`, s.range(i * 500, 500));
  const overlay = await Overlay.open(s.url);
  await overlay.registerParquetTable('t', s.dataUrl);
  await overlay.createIndex('t', 'by_email', ['email'], { unique: true });
  await overlay.createIndex('t', 'by_id', ['id']);
  await overlay.createIndex('t', 'by_both', ['email', 'id']);
  const seen = [];
  const r = await overlay.build('t', { onProgress: (p) => seen.push(p) });
  assert.equal(r.bundlesWritten, 3);
  assert.equal(r.entries, 4500n);
  const bundles = fs.readdirSync(path.join(s.dir, 'overlay', 'bundles'), { recursive: true }).filter((f) => f.endsWith('.puffin'));
  assert.equal(bundles.length, 3, `one generation per file: ${bundles}`);
  assert.ok(seen.length >= 1);
  // Progress is delivered before build() resolves, in order, rows counted once per index.
  const pass = seen.filter((p) => p.phase === 'build');
  assert.deepEqual(pass.at(-1), { phase: 'build', rowsDone: 4500, rowsTotal: 4500 });
  for (const i of await overlay.listIndexes('t')) assert.equal(i.state, 'ready', i.name);
  assert.deepEqual((await overlay.lookup('t', 'by_email', 'u742@x')).rows.map((x) => [x.file, x.position]), [['p1.parquet', 242n]]);
  // A throwing callback neither kills the process nor loses the build: its error is
  // rethrown once the build committed.
  await overlay.createIndex('t', 'by_id2', ['id']);
  await assert.rejects(overlay.build('t', { onProgress: () => { throw new Error('boom'); } }), /boom/);
  assert.equal((await overlay.listIndexes('t')).find((i) => i.name === 'by_id2').state, 'ready');
  await overlay.close();
});

test('verify certifies; dropIndex purges; vacuum keeps retained manifests', async () => {
  const s = setup();
  for (let i = 0; i < 3; i++) s.write(`p${i}.parquet`, s.range(i * 500, 500));
  const overlay = await Overlay.open(s.url);
  await overlay.registerParquetTable('t', s.dataUrl, { prefix: '' });
  await overlay.createIndex('t', 'by_id', ['id'], { unique: true });
  await overlay.createIndex('t', 'by_email', ['email']);
  await assert.rejects(overlay.lookup('t', 'by_id', 5), (e) => e.code === 'E_INDEX_NOT_READY');
  const step = await overlay.buildStep('t', 'by_id', { maxEntries: 200 });
  assert.deepEqual([step.done, step.entries, step.state], [false, 200, 'building']);
  await overlay.build('t');
  const v = await overlay.verify('t', 'by_id');
  assert.deepEqual(v, { files: 3, filesUnindexed: 0, stored: 1500, expected: 1500, missing: 0, dead: 0, mismatched: 0, certified: true, repairsQueued: 0 });
  assert.equal((await overlay.certificate('t', 'by_id')).entries, 1500);
  await overlay.registerDeletes('t', [{ file: 'p1.parquet', positions: [0] }]);
  assert.equal(await overlay.certificate('t', 'by_id'), null, 'writes withdraw the certificate');

  await overlay.publish();
  const purge = await overlay.dropIndex('t', 'by_email', { purge: true });
  assert.equal(purge.indexFiles, 3);
  assert.equal(purge.droppedIndexes, 1);
  await overlay.publish();
  await overlay.publish();
  // Within the grace period (default 1 hour) the unreferenced bundles are young: kept.
  const young = await overlay.vacuum({ retainVersions: 2 });
  assert.equal(young.manifests, 1);
  assert.equal(young.artifacts, 0, JSON.stringify(young));
  assert.ok(young.young >= 1 && young.youngBytes > 0, JSON.stringify(young));
  await overlay.publish();
  const vac = await overlay.vacuum({ retainVersions: 3, graceSeconds: 0 });
  assert.equal(vac.manifests, 0);
  assert.equal(vac.young, 0);
  assert.ok(vac.artifacts >= 1, 'the bundles only the first manifest referenced are gone');
  const left = fs.readdirSync(path.join(s.dir, 'overlay', 'manifests')).filter((f) => f.endsWith('.json'));
  assert.equal(left.length, 3);
  assert.deepEqual((await overlay.lookup('t', 'by_id', 742)).rows.map((x) => [x.file, x.position]), [['p1.parquet', 242n]]);
  await assert.rejects(overlay.vacuum({ retainVersions: 0 }), (e) => e.code === 'E_INVALID');
  await overlay.close();
});

test('registerRewrite swaps a rewrite of Parquet files in, carrying their entries by row id', async () => {
  const s = setup();
  s.write('a.parquet', s.range(0, 200));
  s.write('b.parquet', s.range(200, 100));
  const overlay = await Overlay.open(s.url);
  await overlay.registerParquetTable('t', s.dataUrl, { files: ['a.parquet', 'b.parquet'] });
  await overlay.createIndex('t', 'by_email', ['email'], { unique: true });
  await overlay.createIndex('t', 'by_text', ['email'], { kind: 'fulltext' });
  await overlay.build('t');
  await overlay.registerDeletes('t', [{ file: 'a.parquet', positions: [3, 150] }]);
  const all = async () => {
    const r = await overlay.query('t', { where: { id: { gte: 0 } }, columns: ['id', 'email'], limit: 1000 });
    return r.rows.map((x, i) => [Number(x.id), x.email, Number(r.refs[i].rowId), r.refs[i].file]).sort((x, y) => x[0] - y[0]);
  };
  const before = await all();
  assert.equal(before.length, 298);
  // The rewrite: b's rows, then a's live ones, each with its row id in `_row_id`.
  const moved = [...before.filter((r) => r[0] >= 200), ...before.filter((r) => r[0] < 200)];
  const cols = [...COLUMNS, { name: '_row_id', type: 'int64' }];
  const write = (name, rows) =>
    fs.writeFileSync(path.join(s.data, name), writeParquet(cols, rows.map((r) => [r[0], r[1], r[2]]), 64, 'zstd'));
  write('c.parquet', moved);
  write('short.parquet', moved.slice(1));
  await assert.rejects(overlay.registerRewrite('t', { removed: ['a.parquet', 'b.parquet'], added: ['short.parquet'] }), (e) => {
    assert.equal(e.code, 'E_REFUSED');
    assert.match(e.message, /in no added file/);
    return true;
  });
  for (const bad of [undefined, { removed: ['a.parquet'] }, { removed: 'a.parquet', added: ['c.parquet'] }]) {
    await assert.rejects(overlay.registerRewrite('t', bad), (e) => e.code === 'E_INVALID', JSON.stringify(bad));
  }
  assert.deepEqual(await all(), before, 'nothing changed');
  const r = await overlay.registerRewrite('t', { removed: ['a.parquet', 'b.parquet'], added: ['c.parquet'] });
  assert.deepEqual(
    [r.moved.files, r.moved.sources, r.moved.rows, r.moved.carried, r.moved.derived],
    [1, 2, 298, 2 * 298, 0],
  );
  assert.equal(r.registered.files, 1);
  const after = await all();
  assert.deepEqual(after.map((x) => x.slice(0, 3)), before.map((x) => x.slice(0, 3)), 'the same rows under the same ids');
  assert.ok(after.every((x) => x[3] === 'c.parquet'));
  const hit = await overlay.search('t', { query: 'u250', columns: ['id'] });
  assert.deepEqual(hit.rows.map((x) => Number(x.id)), [250]);
  assert.equal(hit.refs[0].file, 'c.parquet');
  for (const ix of ['by_email', 'by_text']) assert.ok((await overlay.verify('t', ix)).certified, ix);
  await overlay.close();
});
