// Trust holes, round 3 (issue 37), through the packages: each test reproduces one attack
// step for step and failed on 56f143e's behaviour. `core/tests/trust3.rs` covers the rest
// natively (deep refresh on a warm handle, long documents, forged tasks, swapped artifacts).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { icebergFixture, snapshotTree } from './iceberg/helpers.mjs';

const require = createRequire(import.meta.url);
const { Overlay, BundleBuilder, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');
const here = path.dirname(new URL(import.meta.url).pathname);
const code = (c) => (e) => { assert.equal(e.code, c, `${e.code}: ${e.message}`); return true; };

let fx;
before(async () => {
  fx = await icebergFixture('skerry-trust3-', 'make_partitioned.py', 'expected_partitioned.json');
});
after(async () => {
  await fx?.close();
});

test('item 1: a pyiceberg table partitioned by values that need quoting mounts and answers like pyiceberg (addon and wasm)', async () => {
  const { root, expected, overlay, server } = fx;
  const upstream = snapshotTree(path.join(root, 'warehouse'));
  // pyiceberg keeps the literal %XX in file_path: those are the objects' real names.
  assert.ok(expected.paths.some((p) => p.includes('cat=x%2Fy/')), expected.paths.join('\n'));
  assert.ok(expected.paths.some((p) => p.includes('cat=%252e%252e/')));
  const info = await overlay.mountIceberg('parted', expected.metadata_location);
  assert.equal(Number(info.rows), expected.rows);
  assert.equal(info.files, expected.paths.length);
  const ids = (rows) => rows.map((r) => Number(r.id)).sort((a, b) => a - b);
  // Scans first (no index), then by an index on the partition column.
  for (const [value, want] of Object.entries(expected.values)) {
    const a = await overlay.query('parted', { where: { cat: value }, columns: ['id', 'cat'], limit: 10000 });
    assert.deepEqual(ids(a.rows), want, `scan ${JSON.stringify(value)}`);
    assert.ok(a.rows.every((r) => r.cat === value));
  }
  await overlay.createIndex('parted', 'by_cat', ['cat']);
  await overlay.createIndex('parted', 'by_id', ['id'], { unique: true });
  await overlay.build('parted');
  await overlay.publish();
  const reader = await OverlayReader.open(`${server.url}/overlay`, {
    tables: { parted: `${server.url}/warehouse/db/parted` },
  });
  for (const [value, want] of Object.entries(expected.values)) {
    const opts = { where: { cat: value }, columns: ['id', 'cat', 'note'], limit: 10000 };
    const a = await overlay.query('parted', opts);
    assert.deepEqual(ids(a.rows), want, `addon ${JSON.stringify(value)}`);
    assert.equal(a.stats.index, 'by_cat');
    const w = await reader.query('parted', opts);
    assert.deepEqual(w.rows, a.rows, `wasm ${JSON.stringify(value)}`);
    assert.ok(w.rows.every((r) => r.note.endsWith(` of ${value}`)));
  }
  const r = await reader.query('parted', { where: { id: 7 }, columns: ['id', 'cat'] });
  const cat7 = Object.entries(expected.values).find(([, v]) => v.includes(7))[0];
  assert.deepEqual(r.rows.map((x) => [Number(x.id), x.cat]), [[7, cat7]]);
  // Nothing under the warehouse was written, and every request stayed below its base.
  assert.deepEqual(snapshotTree(path.join(root, 'warehouse')), upstream);
  const outside = server.stats.log.filter((x) => !x.path.startsWith('/overlay/') && !x.path.startsWith('/warehouse/db/parted/'));
  assert.deepEqual(outside, []);
  assert.ok(server.stats.log.every((x) => x.status !== 404), JSON.stringify(server.stats.log.filter((x) => x.status === 404)));
});

test('item 1: an Iceberg snapshot listing one data file twice is E_ICEBERG naming it', async () => {
  const { root } = fx;
  // The v2 table's manifest list names its one manifest twice: every file twice.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-dup-'));
  try {
    execFileSync('python3', [path.join(here, 'iceberg', 'make_partitioned.py'), dir], { stdio: 'pipe' });
    const exp = JSON.parse(fs.readFileSync(path.join(dir, 'expected_partitioned.json'), 'utf8'));
    // Rewrite the snapshot's manifest list with its entries doubled (pyiceberg's own writer):
    // every data file is then listed twice.
    execFileSync('python3', ['-c', `
import json, os, sys
from urllib.parse import urlparse
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list, write_manifest_list
meta = json.load(open(urlparse(sys.argv[1]).path))
snap = meta['snapshots'][-1]
path = urlparse(snap['manifest-list']).path
io = PyArrowFileIO()
entries = list(read_manifest_list(io.new_input(path)))
with write_manifest_list(format_version=2, output_file=io.new_output(path + '.doubled'), snapshot_id=snap['snapshot-id'], parent_snapshot_id=None, sequence_number=snap['sequence-number'], avro_compression='deflate') as w:
    w.add_manifests(entries + entries)
os.replace(path + '.doubled', path)
`, exp.metadata_location]);
    const o = await Overlay.open(`file://${dir}/overlay`);
    try {
      const e = await o.mountIceberg('dup', exp.metadata_location).then(() => null, (x) => x);
      assert.ok(e, 'refused');
      assert.equal(e.code, 'E_ICEBERG', e.message);
      assert.match(e.message, /more than once/);
    } finally {
      await o.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(root);
});

test('items 6, 7 and 10: positions are integers, files register once, short rows are refused', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-args-'));
  try {
    fs.mkdirSync(path.join(dir, 'data'));
    const cols = [{ name: 'id', type: 'int64' }, { name: 'name', type: 'string' }];
    const rows = Array.from({ length: 1000 }, (_, i) => [BigInt(i), `n${i}`]);
    fs.writeFileSync(path.join(dir, 'data/a.parquet'), writeParquet(cols, rows));
    // writeParquet: a row with too few or too many values is refused, never padded.
    assert.throws(() => writeParquet(cols, [[1n, 'x'], [2n]]), code('E_INVALID'));
    assert.throws(() => writeParquet(cols, [[1n, 'x', 'extra']]), code('E_INVALID'));
    const o = await Overlay.open(`file://${dir}/overlay`);
    try {
      await assert.rejects(o.registerParquetTable('t', `file://${dir}/data`, { files: ['a.parquet', 'a.parquet'] }), (e) => {
        assert.equal(e.code, 'E_INVALID');
        assert.match(e.message, /a\.parquet/);
        return true;
      });
      await o.registerParquetTable('t', `file://${dir}/data`, { files: ['a.parquet'] });
      await o.createIndex('t', 'by_id', ['id'], { unique: true });
      await o.build('t');
      for (const bad of [1.5, 2.9999, NaN, -1, Infinity, -0.5, 2 ** 53 + 2]) {
        await assert.rejects(o.registerDeletes('t', [{ file: 'a.parquet', positions: [bad] }]), code('E_INVALID'), String(bad));
        await assert.rejects(o.locate('t', [bad]), code('E_INVALID'), String(bad));
      }
      await assert.rejects(o.registerDeletes('t', [{ file: 'a.parquet', positions: [-1n] }]), code('E_INVALID'));
      // Nothing was deleted by the refused calls; whole numbers and bigints still work.
      assert.equal((await o.count('t', {})).count, 1000);
      await o.registerDeletes('t', [{ file: 'a.parquet', positions: [1, 2n] }]);
      assert.equal((await o.count('t', {})).count, 998);
      const left = await o.query('t', { where: { id: 1 }, columns: ['id'] });
      assert.equal(left.rows.length, 0);
      assert.equal((await o.query('t', { where: { id: 3 }, columns: ['id'] })).rows.length, 1);
    } finally {
      await o.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** A table of short documents in `n` files under `dir/data`, indexed, built, published. */
async function textOverlay(dir, docs, files) {
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  const cols = [{ name: 'id', type: 'int64' }, { name: 'body', type: 'string' }];
  const per = Math.ceil(docs.length / files);
  for (let f = 0; f < files; f++) {
    const rows = docs.slice(f * per, (f + 1) * per).map((d, i) => [BigInt(f * per + i), d]);
    fs.writeFileSync(path.join(dir, `data/t${f}.parquet`), writeParquet(cols, rows, 500, 'none'));
  }
  const o = await Overlay.open(`file://${dir}/overlay`);
  await o.registerParquetTable('docs', `file://${dir}/data`);
  await o.createIndex('docs', 'by_text', ['body'], { kind: 'fulltext' });
  await o.build('docs');
  await o.publish();
  return o;
}

test('items 8 and 9: one fold for the final sigma, and one order of summation (addon and wasm)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-text-'));
  const { startRangeServer } = await import('../scripts/range-server.mjs');
  const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];
  let seed = 11;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const docs = Array.from({ length: 6000 }, (_, i) => {
    if (i === 17) return 'ο σοφος λεγει';
    if (i === 18) return 'ΣΟΦΟΣ ΑΝΘΡΩΠΟΣ';
    return Array.from({ length: 3 + rnd(12) }, () => words[rnd(words.length)]).join(' ');
  });
  const o = await textOverlay(dir, docs, 3);
  const server = await startRangeServer(dir);
  try {
    const reader = await OverlayReader.open(`${server.url}/overlay`, { tables: { docs: `${server.url}/data` } });
    for (const q of ['ΣΟΦΟΣ', 'σοφος', 'Σοφος', 'σοφοσ']) {
      for (const r of [o, reader]) {
        const got = await r.search('docs', { query: q, k: 10, columns: ['id'] });
        assert.deepEqual(got.rows.map((x) => Number(x.id)).sort((a, b) => a - b), [17, 18], q);
      }
    }
    // The index and a scan give the same scores to the bit and the same ties at every k.
    let compared = 0;
    for (const q of ['alpha beta gamma', 'theta iota kappa alpha', 'delta epsilon zeta eta theta']) {
      for (const k of [1, 9, 10, 37]) {
        o.setScanOnly(false);
        const a = await o.search('docs', { query: q, k, columns: ['id'] });
        o.setScanOnly(true);
        const b = await o.search('docs', { query: q, k, columns: ['id'] });
        o.setScanOnly(false);
        const w = await reader.search('docs', { query: q, k, columns: ['id'] });
        assert.deepEqual(b.scores, a.scores, `${q} k=${k}`);
        assert.deepEqual(b.rows, a.rows, `${q} k=${k}`);
        assert.deepEqual(w.scores, a.scores, `wasm ${q} k=${k}`);
        assert.deepEqual(w.rows, a.rows, `wasm ${q} k=${k}`);
        compared += a.rows.length;
      }
    }
    assert.ok(compared > 100);
  } finally {
    await o.close();
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('item 4 through JSON: a task altered on its way is refused before the worker reads', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-task-'));
  try {
    fs.mkdirSync(path.join(dir, 'data'));
    fs.mkdirSync(path.join(dir, 'tenant-b'));
    const cols = [{ name: 'id', type: 'int64' }];
    fs.writeFileSync(path.join(dir, 'data/a.parquet'), writeParquet(cols, [[1n], [2n]]));
    fs.writeFileSync(path.join(dir, 'tenant-b/a.parquet'), writeParquet(cols, [[9n], [8n]]));
    const o = await Overlay.open(`file://${dir}/overlay`);
    try {
      await o.registerParquetTable('t', `file://${dir}/data`);
      await o.createIndex('t', 'by_id', ['id']);
      const [task] = await o.planBuild('t');
      const b = await BundleBuilder.open(`file://${dir}/overlay`);
      const forged = [
        (t) => { t.table.location = `file://${dir}/tenant-b`; },
        (t) => { t.file.path = '../tenant-b/a.parquet'; },
        (t) => { t.file.path = '%2e%2e/tenant-b/a.parquet'; },
        (t) => { delete t.mac; },
      ];
      for (const f of forged) {
        const t = JSON.parse(task);
        f(t);
        await assert.rejects(b.buildBundle(JSON.stringify(t)), code('E_INVALID'), f.toString());
      }
      assert.ok(!fs.existsSync(path.join(dir, 'overlay/bundles')) || fs.readdirSync(path.join(dir, 'overlay/bundles'), { recursive: true }).every((n) => !String(n).endsWith('.puffin')));
      const receipt = await b.buildBundle(task);
      const c = await o.commitBuild([receipt]);
      assert.equal(c.committed.length, 1);
    } finally {
      await o.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
