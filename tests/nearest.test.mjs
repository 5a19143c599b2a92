// Vector k-NN from both targets (issue 19): over pyarrow-written Parquet (fixed_size_list and
// list<float32> columns), the addon and the wasm reader over HTTP return the same rows and
// bit-identical distances as a brute force written here (float32 arithmetic in the kernels'
// order) when nprobe and ef cover every vector — l2 and cosine indexes, `where` pre-filters, a file registered after the build
// (indexed by the registration), a rewritten and refreshed one (stale, so scanned), deleted
// rows, NULL and NaN vectors never returned; default-ef answers identical across targets;
// round trips reported cold and warm; wrong options are typed errors. Hybrid search: the
// fused ranking equals reciprocal rank fusion (k = 60), computed here, of the BM25 and vector
// rankings each target returns on its own.
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

const DIM = 16;
let root, server, addon, wasm, rows;
const deleted = new Map();
let registered = [];

let seed = 0x9e3779b9;
function rand() {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 2 ** 32;
}

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-nearest-'));
  const data = path.join(root, 'data/t');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), data, '5', '700', String(DIM), '7']);
  rows = JSON.parse(fs.readFileSync(path.join(data, 'rows.json'), 'utf8'));
  addon = await Overlay.open(`file://${root}/overlay`);
  registered = ['f0.parquet', 'f1.parquet', 'f2.parquet', 'f3.parquet'];
  await addon.registerParquetTable('t', `file://${data}`, { files: registered });
  const a = await addon.createIndex('t', 'emb_l2', ['emb'], { kind: 'vector', metric: 'l2' });
  assert.equal(a.kind, 'vector');
  await addon.createIndex('t', 'tags_cos', ['tags'], { kind: 'vector', metric: 'cosine', m: 12, efConstruction: 80 });
  await addon.createIndex('t', 'body_text', ['body'], { kind: 'fulltext' });
  await addon.build('t');
  // f4 after the build (scanned); f2 with deleted rows.
  await addon.registerFiles('t', ['f4.parquet']);
  registered.push('f4.parquet');
  // f3 rewritten by another writer run and refreshed: stale until rebuilt, so scanned; it
  // gets new row ids (after f4's), which order ties.
  const other = path.join(root, 'other');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), other, '4', '700', String(DIM), '8']);
  fs.copyFileSync(path.join(other, 'f3.parquet'), path.join(data, 'f3.parquet'));
  rows['f3.parquet'] = JSON.parse(fs.readFileSync(path.join(other, 'rows.json'), 'utf8'))['f3.parquet'];
  await addon.refresh('t');
  registered = ['f0.parquet', 'f1.parquet', 'f2.parquet', 'f4.parquet', 'f3.parquet'];
  const dead = [];
  for (let p = 0; p < 700; p += 4) dead.push(BigInt(p));
  await addon.registerDeletes('t', [{ file: 'f2.parquet', positions: dead }]);
  deleted.set('f2.parquet', new Set(dead.map(Number)));
  await addon.publish();
  server = await startRangeServer(root, { latencyMs: 5 });
  wasm = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data/t` } });
});

after(async () => {
  await addon?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

// The Rust kernels in float32: eight lanes, then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then
// the tail.
const f = Math.fround;
function sum(a, b, term) {
  const n = Math.min(a.length, b.length);
  const lanes = [0, 0, 0, 0, 0, 0, 0, 0];
  const whole = n - (n % 8);
  for (let i = 0; i < whole; i += 8) for (let l = 0; l < 8; l++) lanes[l] = f(lanes[l] + term(a[i + l], b[i + l]));
  let tail = 0;
  for (let i = whole; i < n; i++) tail = f(tail + term(a[i], b[i]));
  const r = f(f(f(lanes[0] + lanes[1]) + f(lanes[2] + lanes[3])) + f(f(lanes[4] + lanes[5]) + f(lanes[6] + lanes[7])));
  return f(r + tail);
}
const dot = (a, b) => sum(a, b, (x, y) => f(x * y));
const l2 = (a, b) => sum(a, b, (x, y) => { const d = f(x - y); return f(d * d); });
function distance(metric, q, v) {
  if (metric === 'l2') return l2(q, v);
  if (metric === 'dot') return -dot(q, v);
  const na = dot(q, q), nb = dot(v, v);
  if (na === 0 || nb === 0) return 1;
  return f(1 - f(dot(q, v) / f(f(Math.sqrt(na)) * f(Math.sqrt(nb)))));
}

function brute(metric, q, k, cats) {
  const all = [];
  for (const file of registered) {
    rows[file].forEach((r, p) => {
      if (r.emb === null || r.nan) return;
      if (deleted.get(file)?.has(p)) return;
      if (cats && !cats.includes(r.cat)) return;
      all.push({ file, position: p, d: distance(metric, q, r.emb), id: r.id });
    });
  }
  // Ties by row id: registration order, then position.
  const order = (x) => registered.indexOf(x.file) * 1e6 + x.position;
  all.sort((a, b) => a.d - b.d || order(a) - order(b));
  return all.slice(0, k);
}

function queryVector() {
  const file = registered[Math.floor(rand() * 4)];
  const r = rows[file][Math.floor(rand() * 700)];
  const base = r.emb && !r.nan ? r.emb : rows['f0.parquet'][1].emb;
  return base.map((x) => f(x + (rand() - 0.5) * 0.3));
}

const j = (x) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? Number(v) : v));
const shape = (r) => r.refs.map((x, i) => `${x.file}:${x.position}:${r.distances[i]}`);

test('addon and wasm equal an exact brute force (nprobe and ef covering every vector)', async () => {
  let byIndex = 0, scanned = 0;
  for (let i = 0; i < 30; i++) {
    const [index, metric, column] = i % 2 ? ['tags_cos', 'cosine', 'tags'] : ['emb_l2', 'l2', 'emb'];
    const k = 1 + Math.floor(rand() * 20);
    const vector = queryVector();
    const cats = i % 3 === 0 ? [1, 4] : null;
    const opts = { vector, k, nprobe: 65536, ef: 4000, columns: ['id', 'cat'] };
    if (i % 4 === 1) opts.index = index; else opts.column = column;
    if (cats) opts.where = { cat: { in: cats.map(BigInt) } };
    const want = brute(metric, vector, k, cats);
    for (const [who, r] of [['addon', await addon.nearest('t', opts)], ['wasm', await wasm.nearest('t', opts)]]) {
      assert.equal(r.metric, metric);
      assert.deepEqual(r.refs.map((x) => `${x.file}:${x.position}`), want.map((w) => `${w.file}:${w.position}`), `${who} ${i}`);
      assert.deepEqual(r.distances, want.map((w) => w.d), `${who} ${i}: distances`);
      assert.deepEqual(r.rows.map((x) => Number(x.id)), want.map((w) => w.id), `${who} ${i}: rows`);
      if (cats) for (const row of r.rows) assert.ok(cats.includes(Number(row.cat)));
      if (who === 'addon') { byIndex += r.stats.filesByIndex; scanned += r.stats.filesScanned; }
    }
  }
  assert.ok(byIndex > 0 && scanned > 0, `${byIndex} by index, ${scanned} scanned`);
});

test('default nprobe and ef: both targets give the same answer; rounds cold and warm', async () => {
  const fresh = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data/t` } });
  for (let i = 0; i < 10; i++) {
    const opts = { vector: queryVector(), k: 10, column: 'emb', columns: ['id'] };
    const a = await addon.nearest('t', opts);
    const w = await fresh.nearest('t', opts);
    assert.deepEqual(shape(w), shape(a));
    assert.equal(a.rows.length, 10);
    if (i === 0) {
      // Cold: the codebook with the directories, the probed partitions, the raw vectors.
      assert.equal(w.stats.rounds, 3, j(w.stats));
      assert.equal(w.stats.filesByIndex, 4);
      console.log(`nearest over HTTP, cold: ${w.stats.rounds} rounds, ${w.stats.requests} requests, ${w.stats.bytes} bytes; ${w.stats.evaluated} codes compared`);
      const again = await fresh.nearest('t', opts);
      assert.deepEqual(shape(again), shape(w));
      assert.equal(again.stats.indexRequests, 0, j(again.stats));
      assert.equal(again.stats.rounds, 0);
      console.log(`warm: ${again.stats.rounds} rounds, ${again.stats.requests} requests (data pages only)`);
    }
  }
  fresh.free();
});

test('hybrid search fuses BM25 and vector ranks by RRF (k = 60), the same on both targets', async () => {
  const key = (r) => `${r.file}:${r.position}`;
  const tie = (r) => [r.rowId === null || r.rowId === undefined ? Infinity : Number(r.rowId), registered.indexOf(r.file), Number(r.position)];
  const cmpTie = (a, b) => { const x = tie(a), y = tie(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; };
  let both = 0, textOnly = 0, vectorOnly = 0;
  for (let i = 0; i < 12; i++) {
    const k = 5 + (i % 3) * 5;
    const vector = queryVector();
    const query = ['harbor light', 'meadow stone', 'velvet', 'quarry iron deep'][i % 4];
    const base = { k, columns: ['id', 'cat'] };
    const cats = i % 3 === 0 ? [1, 4] : null;
    if (cats) base.where = { cat: { in: cats.map(BigInt) } };
    for (const who of [addon, wasm]) {
      const text = await who.search('t', { query, ...base });
      const near = await who.nearest('t', { vector, column: 'emb', ef: 200, ...base });
      const m = new Map();
      text.refs.forEach((r, j) => m.set(key(r), { ref: r, t: j + 1, id: text.rows[j].id, score: text.scores[j] }));
      near.refs.forEach((r, j) => {
        const e = m.get(key(r)) ?? { ref: r, id: near.rows[j].id };
        e.v = j + 1;
        e.d = near.distances[j];
        m.set(key(r), e);
      });
      const fused = (e) => (e.t ? 1 / (60 + e.t) : 0) + (e.v ? 1 / (60 + e.v) : 0);
      const want = [...m.values()].sort((a, b) => fused(b) - fused(a) || cmpTie(a.ref, b.ref)).slice(0, k);
      const h = await who.search('t', { query, vector, vectorColumn: 'emb', ef: 200, ...base });
      assert.deepEqual(h.refs.map(key), want.map((e) => key(e.ref)), `${i}`);
      assert.deepEqual(h.scores, want.map(fused));
      assert.deepEqual(h.rows.map((r) => r.id), want.map((e) => e.id));
      assert.equal(h.hybrid.rrfK, 60);
      assert.equal(h.hybrid.metric, 'l2');
      assert.deepEqual(h.hybrid.textRanks, want.map((e) => e.t ?? null));
      assert.deepEqual(h.hybrid.vectorRanks, want.map((e) => e.v ?? null));
      assert.deepEqual(h.hybrid.textScores, want.map((e) => e.score ?? null));
      assert.deepEqual(h.hybrid.distances, want.map((e) => e.d ?? null));
      if (cats) for (const r of h.rows) assert.ok(cats.includes(Number(r.cat)));
      for (const e of want) {
        if (e.t && e.v) both++;
        else if (e.t) textOnly++;
        else vectorOnly++;
      }
    }
  }
  // The data makes the two rankings overlap (words name the vectors' clusters) but not agree.
  assert.ok(both > 0 && textOnly > 0 && vectorOnly > 0, `${both} in both, ${textOnly} text only, ${vectorOnly} vector only`);
  const v = new Array(DIM).fill(0.5);
  for (const who of [addon, wasm]) {
    await assert.rejects(who.search('t', { query: 'harbor', ef: 10 }), (e) => e.code === 'E_INVALID' && /give a vector/.test(e.message));
    await assert.rejects(who.search('t', { query: 'harbor', vector: [1, 'a'] }), (e) => e.code === 'E_INVALID' && /search: vector\[1\]/.test(e.message));
    await assert.rejects(who.search('t', { query: 'harbor', vector: v, vectorIndex: 'body_text' }), (e) => e.code === 'E_INVALID' && /not vector/.test(e.message));
    await assert.rejects(who.search('t', { query: 'harbor', vector: v }), (e) => e.code === 'E_INVALID' && /several vector indexes/.test(e.message));
    await assert.rejects(who.search('t', { query: 'harbor', vector: [1, 2], vectorColumn: 'emb' }), (e) => e.code === 'E_INVALID' && /dimensions/.test(e.message));
  }
});

test('wrong options are typed errors on both targets, naming nearest', async () => {
  const cases = [
    [null, /nearest: options must be an object/],
    [{}, /vector must be an array/],
    [{ vector: 'x' }, /vector must be an array/],
    [{ vector: [1, 'a'] }, /vector\[1\]/],
    [{ vector: [1, 1e40] }, /vector\[1\]/],
    [{ vector: new Array(DIM).fill(0.5), k: 0 }, /k is an integer/],
    [{ vector: new Array(DIM).fill(0.5), k: 2.5 }, /k is an integer/],
    [{ vector: new Array(DIM).fill(0.5), ef: -1 }, /ef is an integer/],
    [{ vector: new Array(DIM).fill(0.5), nprobe: 0 }, /nprobe is an integer from 1 to 65536/],
    [{ vector: new Array(DIM).fill(0.5), nprobe: 65537 }, /nprobe is an integer from 1 to 65536/],
    [{ vector: new Array(DIM).fill(0.5), nprobe: '4' }, /nprobe is an integer/],
    [{ vector: new Array(DIM).fill(0.5), limit: 3 }, /counted by k/],
    [{ vector: new Array(DIM).fill(0.5), index: 7 }, /index must be a string/],
    [{ vector: new Array(DIM - 1).fill(0.5), column: 'emb' }, /dimensions/],
    [{ vector: new Array(DIM).fill(0.5) }, /several vector indexes/],
  ];
  for (const [opts, re] of cases) {
    for (const who of [addon, wasm]) {
      await assert.rejects(who.nearest('t', opts), (e) => e.code === 'E_INVALID' && re.test(e.message), JSON.stringify(opts));
    }
  }
  await assert.rejects(addon.nearest('t', { vector: new Array(DIM).fill(0.5), index: 'nope' }), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(wasm.nearest('t', { vector: new Array(DIM).fill(0.5), index: 'nope' }), (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(addon.createIndex('t', 'bad', ['emb'], { kind: 'vector', metric: 'manhattan' }), (e) => e.code === 'E_INVALID');
  await assert.rejects(addon.createIndex('t', 'bad', ['cat'], { kind: 'vector' }), (e) => e.code === 'E_INVALID');
  await assert.rejects(addon.createIndex('t', 'bad', ['emb'], { kind: 'vector', m: 'x' }), (e) => e.code === 'E_INVALID');
  await assert.rejects(addon.createIndex('t', 'bad', ['id'], { metric: 'l2' }), (e) => e.code === 'E_INVALID');
  // Out-of-range numbers name the value given (none is clamped first), and nothing is defined.
  for (const [opts, re] of [
    [{ m: 1 }, /m 1 is outside 2\.\.=64/],
    [{ m: 70000 }, /m 70000 is outside 2\.\.=64/],
    [{ efConstruction: 5 }, /efConstruction 5 is outside 8\.\.=2000/],
    [{ efConstruction: 4294967295 }, /efConstruction 4294967295 is outside 8\.\.=2000/],
    [{ unique: true }, /cannot be unique/],
  ]) {
    await assert.rejects(addon.createIndex('t', 'bad', ['emb'], { kind: 'vector', ...opts }), (e) => e.code === 'E_INVALID' && re.test(e.message), JSON.stringify(opts));
  }
  // Every option is typed once, in core (host::input::index_options), and named when wrong.
  for (const [opts, re] of [
    [{ kind: 5 }, /createIndex: options\.kind must be a string/],
    [{ kind: 'sparse' }, /unknown index kind "sparse" \(kinds: ordered, bitmap, bloom, fulltext, vector\)/],
    [{ kind: 'fulltext', positions: 'yes' }, /createIndex: options\.positions must be a boolean/],
    [{ kind: 'bloom', fpp: '0.1' }, /createIndex: options\.fpp must be a number/],
    [{ kind: 'bitmap', maxCardinality: -1 }, /createIndex: options\.maxCardinality must be an integer/],
    [{ kind: 'bitmap', fpp: 0.1 }, /fpp applies to bloom indexes, not bitmap/],
  ]) {
    await assert.rejects(addon.createIndex('t', 'bad', ['id'], opts), (e) => e.code === 'E_INVALID' && re.test(e.message), JSON.stringify(opts));
  }
  await assert.rejects(addon.createIndex('t', 'bad', ['id'], 5), (e) => e.code === 'E_INVALID' && /options must be an object/.test(e.message));
  assert.ok(!(await addon.listIndexes('t')).some((i) => i.name === 'bad'));
});

test('count, search and nearest emit one warning event per rejected index, as their answers list them, on both targets', async () => {
  // A bitmap index on cat, so a count answers from an index.
  await addon.createIndex('t', 'by_cat', ['cat'], { kind: 'bitmap' });
  await addon.build('t');
  await addon.publish();
  // f1 rewritten in place behind the catalog's back, with fewer rows: no blob of it describes
  // it any more, so each verb rejects them (drift) and scans the file.
  const third = path.join(root, 'third');
  execFileSync('python3', [path.join(import.meta.dirname, 'vector/make_vectors.py'), third, '2', '650', String(DIM), '9']);
  fs.copyFileSync(path.join(third, 'f1.parquet'), path.join(root, 'data/t/f1.parquet'));
  const fresh = await OverlayReader.open(`${server.url}/overlay`, { tables: { t: `${server.url}/data/t` } });
  const events = { addon: [], wasm: [] };
  const onAddon = (w) => events.addon.push(w);
  addon.on('warning', onAddon);
  fresh.on('warning', (w) => events.wasm.push(w));
  const vector = queryVector();
  const verbs = {
    count: (x) => x.count('t', { where: { cat: 3n }, verify: true }),
    search: (x) => x.search('t', { query: 'harbor light', k: 5, verify: true }),
    nearest: (x) => x.nearest('t', { vector, column: 'emb', k: 5, verify: true }),
  };
  try {
    for (const [who, side] of [['addon', addon], ['wasm', fresh]]) {
      for (const [verb, call] of Object.entries(verbs)) {
        const before = events[who].length;
        const r = await call(side);
        assert.ok(r.warnings.some((w) => w.file === 'f1.parquet' && w.table === 't'), `${who} ${verb}: ${j(r.warnings)}`);
        assert.deepEqual(events[who].slice(before), r.warnings, `${who} ${verb}: one event per warning`);
      }
    }
  } finally {
    addon.off('warning', onAddon);
    fresh.free();
  }
});
