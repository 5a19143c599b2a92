// Iceberg-backed overlays in the real runtimes (issue 16, first slice): a table written by
// pyiceberg (tests/iceberg/make_tables.py) is mounted through the addon, indexed, queried,
// published, and answered by the wasm reader over HTTP from the manifest and the data files
// alone — the same rows as the addon, the rows the table holds. Upstream is never written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { icebergFixture, snapshotTree } from './iceberg/helpers.mjs';

const require = createRequire(import.meta.url);
const { OverlayReader } = require('skerry-wasm');
const here = path.dirname(fileURLToPath(import.meta.url));

let fx, root, expected, overlay, server;

before(async () => {
  fx = await icebergFixture('skerry-iceberg-', 'make_tables.py', 'expected.json');
  ({ root, expected, overlay, server } = fx);
});

after(async () => {
  await fx?.close();
});

const region = (i) => ['eu', 'us', 'ap'][i % 3];

test('a mounted pyiceberg table is indexed, queried and read by the wasm reader over HTTP', async () => {
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  const t = expected['db.parted'];
  const info = await overlay.mountIceberg('parted', t.metadata_location);
  assert.equal(Number(info.rows), t.snapshots.at(-1).rows);
  await overlay.createIndex('parted', 'by_id', ['id'], { unique: true });
  await overlay.createIndex('parted', 'by_region', ['region']);
  await overlay.build('parted');
  const want = Array.from({ length: 900 }, (_, i) => i).filter((i) => region(i) === 'eu');
  const a = await overlay.query('parted', { where: { region: 'eu' }, columns: ['id', 'region', 'qty'] });
  assert.deepEqual(a.rows.map((r) => Number(r.id)).sort((x, y) => x - y), want);
  assert.ok(a.rows.every((r) => r.region === 'eu' && Number(r.qty) === Number(r.id) % 7));
  assert.equal(a.stats.index, 'by_region');
  await overlay.publish();

  const reader = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { parted: `${server.url}/warehouse/db/parted` },
  });
  const w = await reader.query('parted', { where: { region: 'eu' }, columns: ['id', 'region', 'qty'] });
  assert.deepEqual(w.rows, a.rows);
  for (const [id, found] of [[5, true], [4, false], [899, true]]) {
    const r = await reader.query('parted', { where: { id }, columns: ['id', 'region'] });
    assert.deepEqual(r.rows.map((x) => Number(x.id)), found ? [id] : [], `id ${id}`);
  }
  // Nothing under the warehouse was written.
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream);
});

test('an evolved table mounts by field id; what cannot be mounted is a typed refusal', async () => {
  // db.events added `note`, renamed `qty` to `quantity` and widened it to long.
  const info = await overlay.mountIceberg('events', expected['db.events'].metadata_location);
  assert.deepEqual(info.fields.map((f) => f.name), ['id', 'region', 'quantity', 'note']);
  const r = await overlay.query('events', { where: { quantity: 3 }, columns: ['id', 'quantity', 'note'], limit: 10000 });
  const want = Array.from({ length: 1700 }, (_, i) => i + 100).filter((i) => i % 7 === 3);
  assert.deepEqual(r.rows.map((x) => Number(x.id)).sort((a, b) => a - b), want);
  assert.ok(r.rows.every((x) => (Number(x.id) < 1500 ? x.note === null : x.note === 'n')));
  const missing = await overlay.mountIceberg('nope', `file://${root}/none.metadata.json`).then(() => null, (e) => e);
  assert.equal(missing?.code, 'E_NOT_FOUND', String(missing));
  for (const bad of [undefined, 42, {}]) {
    const e = await overlay.mountIceberg('x', bad).then(() => null, (x) => x);
    assert.equal(e?.code, 'E_INVALID', `${bad}: ${e}`);
  }
  assert.deepEqual((await overlay.listTables()).map((t) => t.name), ['events', 'parted']);
});

test('the CLI mounts a table by its directory (newest metadata file)', async () => {
  const { spawnSync } = await import('node:child_process');
  const bin = path.join(here, '../bindings-node/bin/skerry.js');
  const dir = expected['db.v1'].location;
  const run = (...args) => spawnSync(process.execPath, [bin, ...args, '--overlay', `file://${root}/cli-overlay`], { encoding: 'utf8' });
  const r = run('mount-iceberg', 'v1', dir, '--json');
  assert.equal(r.status, 0, r.stderr);
  const t = JSON.parse(r.stdout);
  assert.equal(t.name, 'v1');
  assert.equal(Number(t.rows), 300);
  const missing = run('mount-iceberg', 'none', `file://${root}/nowhere`);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /E_NOT_FOUND/);
});
