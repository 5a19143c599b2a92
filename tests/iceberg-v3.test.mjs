// Iceberg format version 3 through the addon and the wasm reader (issue 16): the table of
// tests/iceberg/make_v3.py (deletion vectors, a compaction and an update that keep row ids in
// `_row_id`, row ids inherited from `first_row_id`; pyiceberg scans every snapshot back to the
// script's model) is mounted, indexed and synced snapshot by snapshot. At every snapshot the
// addon's answers and the wasm reader's (over HTTP, from the published manifest and the data
// files alone) hold the model's rows with the model's row ids, and `locate` finds each row by
// its id; random filters give exactly the ids pyiceberg's own filtered scans give, at every
// snapshot, in both; upstream is never written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { icebergFixture, snapshotTree } from './iceberg/helpers.mjs';

const require = createRequire(import.meta.url);
const { OverlayReader } = require('skerry-wasm');
const here = path.dirname(fileURLToPath(import.meta.url));

let fx, root, expected, overlay, server;

before(async () => {
  fx = await icebergFixture('skerry-v3-', 'make_v3.py', 'expected_v3.json');
  ({ root, expected, overlay, server } = fx);
});

after(async () => {
  await fx?.close();
});

/** `[id, region, qty, rowId]` of an answer, sorted like the model. */
function answer(r) {
  assert.equal(r.rows.length, r.refs.length);
  return r.rows
    .map((x, i) => [Number(x.id), x.region, Number(x.qty), Number(r.refs[i].rowId)])
    .sort((a, b) => a[0] - b[0] || a[3] - b[3]);
}
const model = (s) => [...s.rows].sort((a, b) => a[0] - b[0] || a[3] - b[3]);
const columns = ['id', 'region', 'qty'];

async function checkLocate(target, s, label) {
  const want = model(s);
  const ids = want.map((r) => BigInt(r[3]));
  const located = await target.locate('v3', ids);
  assert.deepEqual(located.candidates, [], label);
  assert.deepEqual(
    located.rows.map((r) => Number(r.rowId)).sort((a, b) => a - b),
    want.map((r) => r[3]).sort((a, b) => a - b),
    `${label}: locate`,
  );
}

test('a v3 table answers with its row ids and deletion vectors, in the addon and the wasm reader', async () => {
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  const snaps = expected['db.v3'].snapshots;
  await overlay.mountIceberg('v3', snaps[0].metadata_location);
  await overlay.createIndex('v3', 'by_id', ['id'], { unique: true });
  await overlay.build('v3');
  await overlay.publish();
  const reader = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { v3: `${server.url}/warehouse/db/v3` },
  });
  for (const [i, s] of snaps.entries()) {
    if (i > 0) {
      const r = await overlay.syncIceberg('v3', { metadataUrl: s.metadata_location });
      assert.deepEqual(r.poisoned, [], s.label);
      // The compaction (a `replace` keeping row ids) is recognised as a move: D holds A's
      // 388 live rows and B's 200 under their ids, and the unique index's entries of D are
      // carried over from A's and B's blobs, none derived. The `replace` that drops a row is
      // refused by its ids; the one that changes a value under the same ids is a move too
      // (the ids are the index's keys here, so its carried entries are right). Appends,
      // deletes and the update claim none.
      const moved = {
        3: { files: 1, sources: 2, rows: 588, segments: 5, carried: 588, derived: 0 },
        5: { files: 1, sources: 1, rows: 0, segments: 0, carried: 0, derived: 0, refused: '1 live rows of the removed files are in no added file' },
        6: { files: 1, sources: 1, rows: 588, segments: 4, carried: 588, derived: 0 },
      };
      assert.deepEqual(r.moved ?? null, moved[i] ?? null, `${s.label}: moved`);
      await overlay.publish();
      await reader.refresh();
    }
    const all = await overlay.query('v3', { where: { id: { gte: -1 } }, columns, limit: 10000 });
    assert.deepEqual(answer(all), model(s), `addon at ${s.label}`);
    const one = await overlay.query('v3', { where: { id: 620 }, columns });
    assert.deepEqual(answer(one), model(s).filter((r) => r[0] === 620), `addon id 620 at ${s.label}`);
    assert.equal(one.stats.filesScanned, 0, `${s.label}: answered by the index`);
    await checkLocate(overlay, s, `addon at ${s.label}`);
  }
  const last = snaps.at(-1);
  const w = await reader.query('v3', { columns, limit: 10000 });
  assert.deepEqual(answer(w), model(last), 'wasm');
  const byId = await reader.query('v3', { where: { id: { in: [100, 620, 621, 5001] } }, columns });
  assert.deepEqual(answer(byId), model(last).filter((r) => [100, 620, 621, 5001].includes(r[0])), 'wasm by id');
  await checkLocate(reader, last, 'wasm');
  // Pinned reads in the wasm reader: each snapshot with its own rows and row ids.
  for (const s of snaps) {
    const p = await reader.query('v3', { columns, limit: 10000, snapshot: s.snapshot_id });
    assert.deepEqual(answer(p), model(s), `wasm at ${s.label}`);
  }
  // Row 100 moved from A to D in the compaction and kept its row id.
  const before = model(snaps[2]).find((r) => r[0] === 100);
  const after = model(snaps[3]).find((r) => r[0] === 100);
  assert.equal(before[3], after[3]);
  const moved = await reader.query('v3', { where: { id: 100 }, columns, snapshot: snaps[3].snapshot_id });
  assert.equal(Number(moved.refs[0].rowId), before[3]);
  assert.match(moved.refs[0].file, /D\.parquet$/);
  // Differential: at every snapshot, random filters through the addon and the wasm reader
  // (pinned) give exactly the ids pyiceberg's scan(row_filter, snapshot_id) gave.
  let checked = 0;
  for (const s of snaps) {
    for (const { where, ids } of s.queries) {
      const label = `${s.label} ${JSON.stringify(where)}`;
      const opts = { where, columns: ['id'], limit: 10000, snapshot: s.snapshot_id };
      const a = await overlay.query('v3', opts);
      assert.deepEqual(a.rows.map((r) => Number(r.id)).sort((x, y) => x - y), ids, `addon ${label}`);
      const b = await reader.query('v3', opts);
      assert.deepEqual(b.rows.map((r) => Number(r.id)).sort((x, y) => x - y), ids, `wasm ${label}`);
      checked++;
    }
  }
  assert.equal(checked, snaps.length * 20);
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream, 'upstream unchanged');
});

test('a compaction carries full-text and vector entries over, and the wasm reader answers as the addon (issue 43)', async () => {
  // db.v3c: ten files compacted into two (their full-text and vector entries in table runs),
  // then the two into one (from their own blobs). Each sync carries every index's blobs —
  // the handle's counters: none derived from rows — and the wasm reader, over HTTP from the
  // published manifest, answers search and nearest exactly as the addon, with the model's
  // row ids.
  const snaps = expected['db.v3c'].snapshots;
  await overlay.mountIceberg('v3c', snaps[0].metadata_location);
  await overlay.createIndex('v3c', 'by_id', ['id'], { unique: true });
  await overlay.createIndex('v3c', 'by_tag', ['tag'], { kind: 'bitmap' });
  await overlay.createIndex('v3c', 'by_body', ['body'], { kind: 'fulltext' });
  await overlay.createIndex('v3c', 'by_emb', ['emb'], { kind: 'vector' });
  await overlay.build('v3c');
  await overlay.syncIceberg('v3c', { metadataUrl: snaps[1].metadata_location });
  await overlay.publish();
  const reader = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { v3c: `${server.url}/warehouse/db/v3c` },
  });
  const blobs = async () => {
    const text = await overlay.metrics();
    const get = (from) => Number(text.match(new RegExp(`^skerry_blobs_written_total\\{from="${from}"\\} (\\d+)$`, 'm'))[1]);
    return { rows: get('rows'), move: get('move') };
  };
  const rowIds = (r) => r.refs.map((x) => Number(x.rowId));
  for (const [i, outputs] of [[2, 2], [3, 1]]) {
    const s = snaps[i];
    const b0 = await blobs();
    const r = await overlay.syncIceberg('v3c', { metadataUrl: s.metadata_location });
    const b1 = await blobs();
    assert.equal(r.moved.rows, 593, s.label);
    assert.deepEqual([r.moved.carried, r.moved.derived], [4 * 593, 0], s.label);
    assert.deepEqual([b1.rows - b0.rows, b1.move - b0.move], [0, 4 * outputs], `${s.label}: blobs carried, none derived`);
    for (const ix of ['by_id', 'by_tag', 'by_body', 'by_emb']) {
      const v = await overlay.verify('v3c', ix);
      assert.ok(v.certified, `${s.label}: ${ix}: ${JSON.stringify(v)}`);
    }
    await overlay.publish();
    await reader.refresh();
    const byRowId = new Map(s.rows.map((r) => [r[4], r]));
    for (const query of ['amber', 'skerry tide', 'kelp orca', 'fjord']) {
      const a = await overlay.search('v3c', { query, k: 20, columns: ['id'] });
      const w = await reader.search('v3c', { query, k: 20, columns: ['id'] });
      assert.ok(a.rows.length > 0, query);
      assert.deepEqual([rowIds(w), w.scores], [rowIds(a), a.scores], `${s.label}: wasm search ${query}`);
      // Each result is the model's row under that id, holding a query word.
      a.rows.forEach((row, k) => {
        const m = byRowId.get(rowIds(a)[k]);
        assert.equal(Number(row.id), m[0]);
        assert.ok(query.split(' ').some((q) => m[2].split(' ').includes(q)), `${query}: ${m[2]}`);
      });
    }
    for (const c of [0, 2, 4, 8]) {
      const vector = Array.from({ length: 8 }, (_, d) => c + d * 0.1 - 0.3);
      const a = await overlay.nearest('v3c', { vector, k: 7, columns: ['id'] });
      const w = await reader.nearest('v3c', { vector, k: 7, columns: ['id'] });
      assert.equal(a.rows.length, 7);
      assert.deepEqual([rowIds(w), w.distances], [rowIds(a), a.distances], `${s.label}: wasm nearest`);
      for (const [k, row] of a.rows.entries()) assert.equal(Number(row.id), byRowId.get(rowIds(a)[k])[0]);
    }
  }
});

test('a warehouse the process cannot write (file mode) is mounted, synced, indexed and published', async (t) => {
  // Tests run as root, whom file modes do not stop: the work runs as `nobody`, who can read
  // the root-owned warehouse (made read-only for everyone too) but not write it.
  if (process.getuid?.() !== 0) return t.skip('needs root to switch to an unprivileged user');
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  execFileSync('chmod', ['-R', 'a-w', path.join(root, 'warehouse')]);
  fs.chmodSync(root, 0o755);
  const overlayDir = path.join(root, 'ro-overlay');
  fs.mkdirSync(overlayDir);
  fs.chownSync(overlayDir, 65534, 65534);
  // What `nobody` runs must not depend on where the checkout lives (a private clone, mode
  // 700, is closed to it): the child script and the installed `skerry` package (with its
  // addon) are staged world-readable beside the warehouse.
  const stage = path.join(root, 'ro-child');
  const pkg = path.dirname(require.resolve('skerry/package.json'));
  fs.cpSync(pkg, path.join(stage, 'node_modules', 'skerry'), {
    recursive: true,
    dereference: true,
    filter: (src) => !/[\\/](src|target|node_modules)$/.test(src),
  });
  fs.copyFileSync(path.join(here, 'iceberg', 'readonly-child.mjs'), path.join(stage, 'readonly-child.mjs'));
  execFileSync('chmod', ['-R', 'a+rX', stage]);
  try {
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath,
      path.join(stage, 'readonly-child.mjs'), path.join(root, 'expected_v3.json'), overlayDir], {
      encoding: 'utf8', cwd: stage,
    });
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.uid, 65534);
    assert.equal(report.writeRefused, 'EACCES', 'the warehouse is closed to the process');
    assert.deepEqual(report.counts, expected['db.v3'].snapshots.map((s) => s.ids));
  } finally {
    execFileSync('chmod', ['-R', 'u+w', path.join(root, 'warehouse')]);
  }
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream, 'upstream unchanged');
});
