// Runs are tiers (RFC 0004, decision 64) from both targets: 20 pyarrow files indexed by every
// kind that has a table run (ordered, bitmap, full text, vector), then 4 more registered and
// built — a second run per index, the first left as it was — and a file under the first run
// rewritten and refreshed. The addon and the wasm reader over HTTP answer lookups, queries,
// counts, searches and nearest-neighbour searches from both runs (`filesByRun` covers every
// file a run answers) and give exactly what the addon gives when forced to scan.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';
import { readHead } from './support/head.mjs';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const DIM = 8;
let root, server, addon, wasm, rows;

const names = (from, to) => Array.from({ length: to - from }, (_, i) => `f${from + i}.parquet`);

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-tiers-'));
  const data = path.join(root, 'data/t');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), data, '24', '200', String(DIM), '11']);
  rows = JSON.parse(fs.readFileSync(path.join(data, 'rows.json'), 'utf8'));
  addon = await Overlay.open(`file://${root}/overlay`);
  await addon.registerParquetTable('t', `file://${data}`, { files: names(0, 20) });
  await addon.createIndex('t', 'by_id', ['id']);
  await addon.createIndex('t', 'by_cat', ['cat'], { kind: 'bitmap' });
  await addon.createIndex('t', 'body_text', ['body'], { kind: 'fulltext' });
  await addon.createIndex('t', 'emb_l2', ['emb'], { kind: 'vector', metric: 'l2' });
  await addon.build('t');
  const first = await runsOf();
  // Four more files (800 rows, under a quarter of the first runs' 4,000): a second run each.
  await addon.registerFiles('t', names(20, 24));
  await addon.build('t');
  const now = await runsOf();
  for (const ix of Object.keys(now)) {
    assert.equal(now[ix].length, 2, `${ix}: ${JSON.stringify(now[ix])}`);
    assert.equal(now[ix][0], first[ix][0], `${ix}: the first run is not written again`);
  }
  // f3 (under the first runs) rewritten by another writer with 40 rows and refreshed: its
  // own blob answers it after the next build (too few rows for a run of their own); the
  // first runs' entries of it are skipped.
  const other = path.join(root, 'other');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), other, '4', '40', String(DIM), '12']);
  rows['f3.parquet'] = JSON.parse(fs.readFileSync(path.join(other, 'rows.json'), 'utf8'))['f3.parquet'];
  fs.copyFileSync(path.join(other, 'f3.parquet'), path.join(data, 'f3.parquet'));
  await addon.refresh('t');
  await addon.build('t');
  await addon.publish();
  server = await startRangeServer(root, { latencyMs: 2 });
  wasm = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data/t` } });
});

after(async () => {
  await addon?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

/** Each index's runs (bundle paths, oldest first), from the published manifest's source. */
async function runsOf() {
  await addon.publish();
  const head = readHead(path.join(root, 'overlay/manifests/HEAD'));
  const m = JSON.parse(fs.readFileSync(path.join(root, 'overlay', head.path), 'utf8'));
  const out = {};
  for (const ix of m.tables[0].indexes) {
    out[ix.name] = [ix.run, ...(ix.tiers ?? [])].filter(Boolean).map((r) => r.bundle_path);
  }
  return out;
}

/** The same call from the addon, the wasm reader and the addon forced to scan. */
async function three(call) {
  const a = await call(addon);
  const w = await call(wasm);
  addon.setScanOnly(true);
  try {
    return [a, w, await call(addon)];
  } finally {
    addon.setScanOnly(false);
  }
}

const refs = (r) => (r.refs ?? r.rows).map((x) => `${x.file}:${x.position}`);

test('two runs per index answer every verb from both targets as a scan does', async () => {
  const ids = [5n, 199n, 300_007n, 2_000_150n, 2_300_001n, 2_200_100n, 1_900_000n];
  for (const id of ids) {
    const [a, w, s] = await three((x) => x.lookup('t', 'by_id', id));
    assert.deepEqual(refs(w), refs(a), `lookup ${id}`);
    assert.deepEqual(refs(a), refs(s), `lookup ${id}`);
    for (const r of [a, w]) assert.equal(r.stats.filesByRun, 23, JSON.stringify(r.stats));
  }
  for (const cat of [0n, 3n, 5n]) {
    const [a, w, s] = await three((x) => x.count('t', { where: { cat } }));
    assert.equal(a.count, s.count, `count ${cat}`);
    assert.equal(w.count, s.count, `count ${cat}`);
    for (const r of [a, w]) assert.equal(r.stats.filesByRun, 23, JSON.stringify(r.stats));
    const [qa, qw, qs] = await three((x) => x.query('t', { where: { cat, id: { lt: 1_500_000n } }, columns: ['id'] }));
    assert.deepEqual(refs(qw), refs(qa));
    assert.deepEqual(refs(qa).sort(), refs(qs).sort(), `query ${cat}`);
  }
  for (const query of ['harbor stone', 'lantern', 'quiet willow river']) {
    const [a, w, s] = await three((x) => x.search('t', { query, k: 15, columns: [] }));
    assert.deepEqual(refs(w), refs(a), query);
    assert.deepEqual(w.scores, a.scores, query);
    assert.deepEqual(refs(a), refs(s), query);
    for (let i = 0; i < a.scores.length; i++) assert.ok(Math.abs(a.scores[i] - s.scores[i]) < 1e-9, query);
    for (const r of [a, w]) assert.equal(r.stats.filesByRun, 23, JSON.stringify(r.stats));
  }
  for (const file of ['f0.parquet', 'f21.parquet', 'f9.parquet']) {
    const v = rows[file].find((r) => r.emb && !r.nan).emb.map((x) => Math.fround(x + 0.01));
    const opts = { vector: v, k: 12, nprobe: 65536, ef: 10000, column: 'emb', columns: ['id'] };
    const [a, w, s] = await three((x) => x.nearest('t', opts));
    assert.deepEqual(refs(w), refs(a), file);
    assert.deepEqual(w.distances, a.distances, file);
    assert.deepEqual(refs(a), refs(s), file);
    assert.deepEqual(a.distances, s.distances, file);
    for (const r of [a, w]) assert.equal(r.stats.filesByRun, 23, JSON.stringify(r.stats));
  }
});
