// Following an Iceberg table through the addon, the CLI and the wasm reader (issue 16):
// merge-on-read tables (tests/iceberg/make_mor.py: position and equality delete files
// committed through pyiceberg's writers, a copy-on-write rewrite, appends) are mounted at
// their first snapshot and synced snapshot by snapshot; every answer holds the rows the table
// holds at that snapshot, the wasm reader over HTTP answers the same from the published
// manifest (delete masks included) and the data files alone, and upstream is never written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { icebergFixture, snapshotTree } from './iceberg/helpers.mjs';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');
const { OverlayReader } = require('skerry-wasm');
const here = path.dirname(fileURLToPath(import.meta.url));

let fx, root, expected, overlay, server;

before(async () => {
  fx = await icebergFixture('skerry-mor-', 'make_mor.py', 'expected_mor.json');
  ({ root, expected, overlay, server } = fx);
});

after(async () => {
  await fx?.close();
});

const sorted = (rows) => rows.map((r) => Number(r.id)).sort((x, y) => x - y);

test('a table synced snapshot by snapshot answers like each snapshot, in the addon and the wasm reader', async () => {
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  const snaps = expected['db.mor'].snapshots;
  await overlay.mountIceberg('mor', snaps[0].metadata_location);
  await overlay.createIndex('mor', 'by_id', ['id'], { unique: true });
  await overlay.createIndex('mor', 'by_region', ['region']);
  await overlay.build('mor');
  await overlay.publish();
  for (const s of snaps.slice(1)) {
    const r = await overlay.syncIceberg('mor', { metadataUrl: s.metadata_location });
    await overlay.publish();
    assert.equal(typeof r.snapshotId, 'bigint');
    assert.equal(r.snapshotId, BigInt(s.snapshot_id), s.label); // snapshot_id is a string in the JSON
    const all = await overlay.query('mor', { columns: ['id'], limit: 10000 });
    assert.deepEqual(sorted(all.rows), s.ids, s.label);
    const ap = await overlay.query('mor', { where: { region: 'ap' }, columns: ['id'], limit: 10000 });
    assert.deepEqual(sorted(ap.rows), s.ids.filter((i) => i % 3 === 2), `${s.label}: region ap`);
  }
  const last = snaps.at(-1);
  assert.deepEqual((await overlay.listIndexes('mor')).find((i) => i.name === 'by_id').state, 'poisoned');
  await overlay.publish();
  const reader = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { mor: `${server.url}/warehouse/db/mor` },
  });
  const w = await reader.query('mor', { columns: ['id'], limit: 10000 });
  assert.deepEqual(sorted(w.rows), last.ids);
  const ap = await reader.query('mor', { where: { region: 'ap' }, columns: ['id'], limit: 10000 });
  assert.deepEqual(sorted(ap.rows), last.ids.filter((i) => i % 3 === 2));
  // Pinned reads in the wasm reader: every published snapshot, by bigint or decimal string.
  for (const [i, s] of snaps.entries()) {
    const snapshot = i % 2 ? BigInt(s.snapshot_id) : s.snapshot_id;
    const p = await reader.query('mor', { columns: ['id'], limit: 10000, snapshot });
    assert.deepEqual(sorted(p.rows), s.ids, `wasm at ${s.label}`);
  }
  const a = await overlay.query('mor', { columns: ['id'], limit: 10000, snapshot: BigInt(snaps[2].snapshot_id) });
  assert.deepEqual(sorted(a.rows), snaps[2].ids, 'addon at a pinned snapshot');
  for (const [snapshot, code] of [[42n, 'E_NOT_FOUND'], ['x', 'E_INVALID'], [1.5, 'E_INVALID'], [2n ** 70n, 'E_INVALID']]) {
    const e = await reader.query('mor', { snapshot }).then(() => null, (x) => x);
    assert.equal(e?.code, code, `${snapshot}: ${e}`);
  }
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream);
});

test('syncIceberg refuses what it cannot sync with typed errors', async () => {
  await overlay.registerParquetTable('plain', `file://${root}/warehouse/db/mor/data`, { files: [] });
  const notIceberg = await overlay.syncIceberg('plain').then(() => null, (e) => e);
  assert.equal(notIceberg?.code, 'E_NOT_FOUND', String(notIceberg));
  const missing = await overlay.syncIceberg('nope').then(() => null, (e) => e);
  assert.equal(missing?.code, 'E_NOT_FOUND', String(missing));
  for (const args of [[42], ['mor', { metadataUrl: 7 }], ['mor', 'x']]) {
    const e = await overlay.syncIceberg(...args).then(() => null, (x) => x);
    assert.equal(e?.code, 'E_INVALID', `${JSON.stringify(args)}: ${e}`);
  }
  // Another table's metadata file is refused.
  const other = expected['db.mor_parted'].snapshots[0].metadata_location;
  const wrong = await overlay.syncIceberg('mor', { metadataUrl: other }).then(() => null, (e) => e);
  assert.equal(wrong?.code, 'E_ICEBERG', String(wrong));
});

test('the CLI syncs a mounted table to the newest metadata file of its directory', async () => {
  const bin = path.join(here, '../bindings-node/bin/skerry.js');
  const t = expected['db.mor_parted'];
  const run = (...args) => spawnSync(process.execPath, [bin, ...args, '--overlay', `file://${root}/cli-overlay`], { encoding: 'utf8' });
  let r = run('mount-iceberg', 'parted', t.snapshots[0].metadata_location, '--json');
  assert.equal(r.status, 0, r.stderr);
  r = run('sync', 'parted', '--json');
  assert.equal(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(String(report.snapshotId), String(t.snapshots.at(-1).snapshot_id));
  assert.equal(report.masksChanged.length, 2, JSON.stringify(report));
  r = run('sync', 'parted');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /already at snapshot/);
  const o = await Overlay.open(`file://${root}/cli-overlay`);
  try {
    const all = await o.query('parted', { columns: ['id'], limit: 10000 });
    assert.deepEqual(sorted(all.rows), t.snapshots.at(-1).ids);
  } finally {
    await o.close();
  }
});

test('an upstream schema change that drops an indexed column poisons the index, with the reason', async () => {
  const snaps = expected['db.evolve'].snapshots;
  await overlay.mountIceberg('evolve', snaps[0].metadata_location);
  await overlay.createIndex('evolve', 'by_region', ['region']);
  await overlay.build('evolve');
  const r = await overlay.syncIceberg('evolve', { metadataUrl: snaps[2].metadata_location });
  assert.deepEqual(r.poisoned, ['by_region']);
  const ix = (await overlay.listIndexes('evolve')).find((i) => i.name === 'by_region');
  assert.equal(ix.state, 'poisoned');
  assert.match(ix.reason, /dropped/);
  const all = await overlay.query('evolve', { columns: ['id', 'quantity', 'note'], limit: 10000 });
  assert.deepEqual(sorted(all.rows), snaps[2].ids);
  assert.ok(all.rows.every((x) => (Number(x.id) < 300 ? x.note === null : typeof x.note === 'string')));
});

test('startSync follows the upstream in the background, publishes, and reports problems as warnings', async () => {
  const t = expected['db.mor_parted'];
  const o = await Overlay.open(`file://${root}/worker-overlay`);
  try {
    await o.mountIceberg('parted', t.snapshots[0].metadata_location);
    await o.publish();
    const events = [];
    const warnings = [];
    o.on('sync', (e) => events.push(e));
    o.on('warning', (w) => warnings.push(w));
    o.startSync('parted', { intervalMs: 20 });
    assert.throws(() => o.startSync('parted'), (e) => e.code === 'E_EXISTS');
    assert.throws(() => o.startSync('parted2', { intervalMs: 'x' }), (e) => e.code === 'E_INVALID');
    const deadline = Date.now() + 20000;
    while (events.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(await o.stopSync('parted'), true);
    assert.equal(await o.stopSync('parted'), false);
    assert.ok(events.length >= 3, `${events.length} runs`);
    // The first run moved to the newest snapshot and published; later runs found nothing new.
    assert.equal(String(events[0].report.snapshotId), String(t.snapshots.at(-1).snapshot_id));
    assert.ok(events[0].published && typeof events[0].published.version !== 'undefined');
    assert.ok(events.slice(1).every((e) => e.published === null && e.report.added.length === 0));
    const n = events.length;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(events.length, n, 'no run after stopSync');
    const reader = await OverlayReader.open(`${server.url}/worker-overlay`, {
      tables: { parted: `${server.url}/warehouse/db/mor_parted` },
    });
    const all = await reader.query('parted', { columns: ['id'], limit: 10000 });
    assert.deepEqual(sorted(all.rows), t.snapshots.at(-1).ids);
    // A run that fails is a warning and the loop goes on.
    await o.registerParquetTable('plain', `file://${root}/warehouse/db/mor/data`, { files: [] });
    o.startSync('plain', { intervalMs: 20 });
    while (warnings.filter((w) => w.reason === 'sync-failed').length < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(warnings.filter((w) => w.table === 'plain' && w.code === 'E_NOT_FOUND').length >= 2, JSON.stringify(warnings));
  } finally {
    await o.close(); // stops the remaining loop
  }
});
