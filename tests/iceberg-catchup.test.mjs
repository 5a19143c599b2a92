// Following any upstream change (issue 38): a pyiceberg table grows by an append of 1.2M rows
// (with three indexes, 3.6 times what one catalog commit may index), then a copy-on-write
// delete, a schema change and another append, a rewrite of most files and an overwrite.
// Every sync succeeds; the files whose index work did not fit are scanned meanwhile, so
// answers equal pyiceberg's scan before the catch-up and after it, from the addon and from
// wasm; `startSync` catches up by itself in bounded steps, with progress events, and
// publishes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { icebergFixture, snapshotTree } from './iceberg/helpers.mjs';
import { readHead } from './support/head.mjs';

const require = createRequire(import.meta.url);
const { OverlayReader } = require('skerry-wasm');

let fx;
before(async () => {
  fx = await icebergFixture('skerry-catchup-', 'make_big_append.py', 'expected_big.json');
});
after(async () => {
  await fx?.close();
});

const INDEXES = ['by_id', 'by_region', 'by_email'];

/** Every recorded query of snapshot `s` answered like pyiceberg's scan (count, first ids). */
async function exact(r, s, who) {
  for (const q of s.queries) {
    const what = `${who} ${s.label} ${JSON.stringify(q.where)}`;
    const c = await r.count('grow', { where: q.where });
    assert.equal(Number(c.count), q.count, what);
    if (q.count <= 50) {
      const got = await r.query('grow', { where: q.where, columns: ['id'], limit: 100 });
      assert.deepEqual(got.rows.map((x) => Number(x.id)).sort((a, b) => a - b), q.ids, what);
    }
  }
}

async function states(o) {
  return Object.fromEntries((await o.listIndexes('grow')).map((i) => [i.name, i.state]));
}

test('syncs through an append far past one commit, a delete, a schema change; exact before and after the catch-up', async () => {
  const { root, expected, overlay, server } = fx;
  const [s1, s2, s3, s4, s5, s6] = expected.snapshots;
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  await overlay.mountIceberg('grow', s1.metadata_location);
  await overlay.createIndex('grow', 'by_id', ['id'], { unique: true });
  await overlay.createIndex('grow', 'by_region', ['region'], { kind: 'bitmap' });
  await overlay.createIndex('grow', 'by_email', ['email']);
  await overlay.build('grow');
  await exact(overlay, s1, 'addon');

  // The big append: the sync commits the table change; the index work is pending.
  const r2 = await overlay.syncIceberg('grow', { metadataUrl: s2.metadata_location });
  assert.equal(r2.added.length, s2.files - s1.files);
  assert.deepEqual([...r2.pending].sort(), [...INDEXES].sort());
  assert.deepEqual(await states(overlay), { by_id: 'maintaining', by_region: 'maintaining', by_email: 'maintaining' });
  await exact(overlay, s2, 'addon, pending');
  const plan = await overlay.query('grow', { where: { id: 700005 }, columns: ['id'] });
  assert.equal(plan.stats.index, 'by_id');
  assert.ok(plan.stats.filesScanned >= 1, 'pending files are scanned');
  await overlay.publish();
  const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { grow: `${server.url}/warehouse/db/grow` } });
  await exact(reader, s2, 'wasm, pending');

  // A copy-on-write delete while still pending.
  const r3 = await overlay.syncIceberg('grow', { metadataUrl: s3.metadata_location });
  assert.ok(r3.removed.length >= 1);
  await exact(overlay, s3, 'addon, pending');

  // The background loop syncs to the newest metadata file: the later ones are set aside
  // for now (restored, mtimes and all, below), so it meets the schema change and append.
  const metaDir = path.dirname(new URL(s4.metadata_location).pathname);
  const later = [s5, s6].map((s) => new URL(s.metadata_location).pathname);
  const aside = path.join(root, 'aside');
  fs.mkdirSync(aside);
  for (const m of later) fs.renameSync(m, path.join(aside, path.basename(m)));
  // Then it catches up in bounded steps, publishing as coverage moves.
  const progress = [];
  const syncs = [];
  overlay.on('progress', (p) => progress.push(p));
  const done = new Promise((resolve, reject) => {
    overlay.on('sync', (e) => {
      syncs.push(e);
      if (e.pending.length === 0) resolve();
    });
    overlay.on('warning', (w) => reject(new Error(`${w.reason}: ${w.message}`)));
  });
  overlay.startSync('grow', { intervalMs: 3600000, catchUpSteps: 2, maxEntries: 400000 });
  await done;
  await overlay.stopSync('grow');
  assert.ok(syncs.length >= 2, `catch-up spread over runs: ${syncs.length}`);
  assert.ok(syncs.every((e) => e.published !== null), 'each run published');
  assert.ok(progress.length >= 4, `progress events: ${progress.length}`);
  assert.ok(progress.every((p) => p.entries <= 400000), 'each step within its bound');
  assert.ok(progress.some((p) => p.done && p.state === 'ready'));
  // Runs are written in merge steps of their own, after the index turned ready (decision 74),
  // and the loop goes on stepping an index its budget left mid-merge.
  const merges = progress.filter((p) => p.merged);
  assert.ok(merges.length >= 1, JSON.stringify(progress));
  for (const m of merges) {
    assert.equal(m.state, 'ready');
    assert.equal(m.entries, 0);
    assert.ok(m.merged.files >= 4 && m.merged.runBytes > 0, JSON.stringify(m));
  }
  assert.ok(progress.every((p) => !p.merged || progress.indexOf(p) > progress.findIndex((q) => q.index === p.index && q.state === 'ready')));
  assert.deepEqual(await states(overlay), { by_id: 'ready', by_region: 'ready', by_email: 'ready' });
  await exact(overlay, s4, 'addon, caught up');
  const byIndex = await overlay.query('grow', { where: { id: 700005 }, columns: ['id'] });
  assert.equal(byIndex.stats.filesScanned, 0, 'no file scanned once caught up');
  for (const ix of INDEXES) {
    const v = await overlay.verify('grow', ix);
    assert.equal(v.missing, 0, ix);
    assert.equal(v.mismatched, 0, ix);
  }
  await reader.refresh();
  await exact(reader, s4, 'wasm, caught up');
  for (const m of later) fs.renameSync(path.join(aside, path.basename(m)), m);
  assert.equal(path.dirname(later[0]), metaDir);

  // A rewrite of most files (pending again: its new files do not fit one commit), then an
  // overwrite of everything; exact at each step, then caught up by a build.
  const r5 = await overlay.syncIceberg('grow', { metadataUrl: s5.metadata_location });
  assert.ok(r5.removed.length >= s5.files - 1, `most files rewritten: ${r5.removed.length}`);
  assert.deepEqual([...r5.pending].sort(), [...INDEXES].sort());
  await exact(overlay, s5, 'addon, rewrite pending');
  const r6 = await overlay.syncIceberg('grow', { metadataUrl: s6.metadata_location });
  assert.equal(r6.removed.length, s5.files);
  assert.deepEqual(r6.pending, [], 'a small overwrite is indexed in its commit');
  await exact(overlay, s6, 'addon, overwritten');
  await overlay.build('grow');
  assert.deepEqual(await states(overlay), { by_id: 'ready', by_region: 'ready', by_email: 'ready' });
  await exact(overlay, s6, 'addon, overwritten, built');
  await overlay.publish();
  await reader.refresh();
  await exact(reader, s6, 'wasm, overwritten');
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream, 'upstream unchanged');
});

/** (index, file, blob SHA-256) of every blob of table `grow` in `dir`'s published manifest. */
function publishedBlobs(dir) {
  const head = readHead(path.join(dir, 'manifests/HEAD'));
  const m = JSON.parse(fs.readFileSync(path.join(dir, head.path), 'utf8'));
  const t = m.tables.find((x) => x.name === 'grow');
  const byId = new Map(t.files.map((f) => [f.file_id, f.path]));
  const out = [];
  for (const ix of t.indexes) {
    assert.ok(Array.isArray(ix.files), 'an inline manifest');
    for (const a of ix.files) out.push(`${ix.name} ${byId.get(a.file_id)} ${a.lineage.blob_sha256}`);
  }
  return out.sort();
}

test('a catch-up SIGKILLed mid-way resumes on the next open, to the bundles of a direct build', async () => {
  const { root, expected } = fx;
  const { Overlay } = require('skerry');
  const [s1, s2] = expected.snapshots;
  const define = async (o) => {
    await o.createIndex('grow', 'by_id', ['id'], { unique: true });
    await o.createIndex('grow', 'by_region', ['region'], { kind: 'bitmap' });
    await o.createIndex('grow', 'by_email', ['email']);
  };
  const killedDir = path.join(root, 'killed');
  let o = await Overlay.open(`file://${killedDir}`);
  await o.mountIceberg('grow', s1.metadata_location);
  await define(o);
  await o.build('grow');
  const r = await o.syncIceberg('grow', { metadataUrl: s2.metadata_location });
  assert.equal(r.pending.length, 3);
  await o.close();
  // The catch-up, in a process killed (SIGKILL) after its third step.
  const child = path.join(root, 'catch-up-child.cjs');
  fs.writeFileSync(child, `
const { Overlay } = require(${JSON.stringify(require.resolve('skerry'))});
(async () => {
  const o = await Overlay.open(${JSON.stringify(`file://${killedDir}`)});
  let steps = 0;
  await o.build('grow', { maxEntries: 150000, onProgress: () => { if (++steps === 3) process.kill(process.pid, 'SIGKILL'); } });
  console.log('not killed');
})();
`);
  const { spawnSync } = await import('node:child_process');
  const c = spawnSync(process.execPath, [child], { encoding: 'utf8' });
  assert.equal(c.signal, 'SIGKILL', `${c.status} ${c.stdout} ${c.stderr}`);
  // The next open resumes.
  o = await Overlay.open(`file://${killedDir}`);
  const before = await o.listIndexes('grow');
  assert.ok(before.some((i) => i.state === 'maintaining'), 'killed before the end');
  await o.build('grow');
  assert.deepEqual((await o.listIndexes('grow')).map((i) => i.state), ['ready', 'ready', 'ready']);
  await o.publish();
  await o.close();
  // A direct build of the same snapshot.
  const directDir = path.join(root, 'direct');
  const d = await Overlay.open(`file://${directDir}`);
  await d.mountIceberg('grow', s2.metadata_location);
  await define(d);
  await d.build('grow');
  await d.publish();
  await d.close();
  const got = publishedBlobs(killedDir);
  assert.equal(got.length, 3 * s2.files);
  assert.deepEqual(got, publishedBlobs(directDir));
});
