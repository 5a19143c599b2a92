// Index kinds benchmark: a 2M-row table (20 Parquet files; SKERRY_BENCH_ROWS and SKERRY_BENCH_FILES to change them)
// with a 50-value `region` column and a unique `email` string, indexed in the same run as
//  - a bitmap index on region, an ordered index on region (each in its own overlay over the
//    same files) and none (forced scans, statistics and page-index pruning still on):
//    build time and bundle bytes, then `count` and `=` (refs only) latency, requests and
//    bytes, with the ratios to the bitmap;
//  - a bloom filter on email vs no index: `=` on a present and an absent email — requests,
//    bytes and time with the filters pruning files vs every file scanned.
// From the Node addon and the wasm reader (HTTP range reads). Checks every way answers the
// same. With SKERRY_BENCH_BASELINE (bench/baseline.mjs) the verbs also run through a baseline
// build, interleaved, with now/baseline ratios.
//
//   node bench/kinds.mjs            (scripts/bench.sh runs it after building)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';
import { baseline, sideBySide } from './baseline.mjs';

const require = createRequire(import.meta.url);
const { Overlay, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const ROWS = Number(process.env.SKERRY_BENCH_ROWS || 2_000_000);
const RUNS = Number(process.env.SKERRY_BENCH_RUNS || 7);
const FILES = Number(process.env.SKERRY_BENCH_FILES || 20);
const VALUES = 50;
const perFile = Math.floor(ROWS / FILES);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-bmbench-'));
const data = path.join(dir, 'data');
fs.mkdirSync(data, { recursive: true });

const COLUMNS = [{ name: 'id', type: 'int64' }, { name: 'region', type: 'string' }, { name: 'amount', type: 'float64' }, { name: 'email', type: 'string' }];
// A unique address per row, spread over the key space (every file's statistics span it).
const email = (id) => `${((id * 2654435761) % 4294967291).toString(16).padStart(8, '0')}-${id}@example.com`;
const region = (id) => `region-${String((id * 2654435761) % VALUES).padStart(2, '0')}`;
for (let f = 0; f < FILES; f++) {
  const rows = [];
  for (let i = 0; i < perFile; i++) {
    const id = f * perFile + i;
    rows.push([BigInt(id), region(id), (id % 1000) * 1.25, email(id)]);
  }
  fs.writeFileSync(path.join(data, `p${String(f).padStart(3, '0')}.parquet`), writeParquet(COLUMNS, rows, 100_000, 'snappy'));
}

const kinds = {};
for (const kind of ['bitmap', 'ordered', 'bloom']) {
  const url = `file://${dir}/${kind}`;
  const o = await Overlay.open(url);
  await o.registerParquetTable('t', `file://${data}`);
  if (kind === 'bloom') await o.createIndex('t', 'by_email', ['email'], { kind, fpp: 0.01 });
  else await o.createIndex('t', 'by_region', ['region'], { kind });
  const t0 = performance.now();
  const built = await o.build('t');
  const ms = performance.now() - t0;
  await o.publish();
  kinds[kind] = { overlay: o, buildMs: ms, bytes: Number(built.bytesWritten) };
}
console.log(`${perFile * FILES} rows in ${FILES} files, ${VALUES} regions`);
console.table(Object.entries(kinds).filter(([k]) => k !== 'bloom').map(([k, v]) => ({
  kind: k, 'build ms': Math.round(v.buildMs), 'bundle bytes': v.bytes,
  'vs bitmap (time)': +(v.buildMs / kinds.bitmap.buildMs).toFixed(2),
  'vs bitmap (bytes)': +(v.bytes / kinds.bitmap.bytes).toFixed(2),
})));

const server = await startRangeServer(dir);
for (const kind of Object.keys(kinds)) {
  kinds[kind].reader = await OverlayReader.open(`${server.url}/${kind}`, { tables: { t: `${server.url}/data` } });
}

async function measure(side, f, scanOnly) {
  side.setScanOnly(scanOnly);
  const first = await f(side);
  const times = [];
  let r;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    r = await f(side);
    times.push(performance.now() - t);
  }
  side.setScanOnly(false);
  times.sort((a, b) => a - b);
  return { r, first, ms: times[Math.floor(times.length / 2)] };
}

const where = { region: 'region-07' };
const verbs = {
  'count =': (x) => x.count('t', { where }),
  'count IN 3': (x) => x.count('t', { where: { region: { in: ['region-01', 'region-02', 'region-03'] } } }),
  '= refs only': (x) => x.query('t', { where, columns: [] }),
};
const answer = (r) => (r.count !== undefined ? r.count : r.refs.length);
const out = [];
const bloomOut = [];
for (const [name, options] of Object.entries({
  'email = present': { where: { email: email(Math.floor(ROWS * 0.61)) }, columns: ['id'] },
  // An address no row has, inside every file's statistics.
  'email = absent': { where: { email: email(ROWS + 12_345) }, columns: ['id'] },
  'email IN 5': { where: { email: { in: [1, 2, 3, 4, 5].map((i) => email(i * 377_777 % ROWS)) } }, columns: ['id'] },
})) {
  for (const via of ['addon', 'wasm']) {
    const side = via === 'addon' ? kinds.bloom.overlay : kinds.bloom.reader;
    const q = (x) => x.query('t', options);
    const bloom = await measure(side, q, false);
    const scan = await measure(side, q, true);
    if (bloom.r.refs.length !== scan.r.refs.length) throw new Error(`${name}/${via}: bloom and scan disagree`);
    const b = bloom.r.stats, c = scan.r.stats, cold = bloom.first.stats;
    bloomOut.push({
      query: name, via, rows: bloom.r.refs.length, 'files pruned': b.filesPruned,
      'first idx req': cold.indexRequests, 'first idx bytes': cold.indexBytes,
      'warm idx req': b.indexRequests, 'bloom data req': b.dataRequests,
      'bloom data bytes': b.dataBytes, 'bloom ms': +bloom.ms.toFixed(2),
      'scan req': c.requests, 'scan bytes': c.bytes, 'scan ms': +scan.ms.toFixed(2),
      'scan/bloom req': +(c.requests / Math.max(b.requests, 1)).toFixed(1),
      'scan/bloom bytes': +(c.bytes / Math.max(b.bytes, 1)).toFixed(1),
      'scan/bloom time': +(scan.ms / Math.max(bloom.ms, 0.01)).toFixed(1),
    });
  }
}
for (const [name, f] of Object.entries(verbs)) {
  for (const via of ['addon', 'wasm']) {
    const side = (kind) => (via === 'addon' ? kinds[kind].overlay : kinds[kind].reader);
    const bm = await measure(side('bitmap'), f, false);
    const ord = await measure(side('ordered'), f, false);
    const scan = await measure(side('bitmap'), f, true);
    if (answer(bm.r) !== answer(ord.r) || answer(bm.r) !== answer(scan.r)) {
      throw new Error(`${name}/${via}: bitmap ${answer(bm.r)}, ordered ${answer(ord.r)}, scan ${answer(scan.r)}`);
    }
    const row = { verb: name, via, rows: answer(bm.r) };
    for (const [k, m] of [['bitmap', bm], ['ordered', ord], ['scan', scan]]) {
      row[`${k} ms`] = +m.ms.toFixed(2);
      row[`${k} req`] = m.r.stats.requests;
      row[`${k} bytes`] = m.r.stats.bytes;
    }
    row['ordered/bitmap time'] = +(ord.ms / Math.max(bm.ms, 0.01)).toFixed(1);
    row['scan/bitmap time'] = +(scan.ms / Math.max(bm.ms, 0.01)).toFixed(1);
    row['scan/bitmap bytes'] = +(scan.r.stats.bytes / Math.max(bm.r.stats.bytes, 1)).toFixed(1);
    out.push(row);
  }
}
console.table(out);
console.log(`bloom filter on email (${kinds.bloom.bytes} bundle bytes, built in ${Math.round(kinds.bloom.buildMs)} ms) vs scanning every file:`);
console.table(bloomOut);
// With SKERRY_BENCH_BASELINE: each kind's verbs through this build and the baseline's,
// read-only handles on the same published overlays.
const base = baseline();
if (base) {
  const cases = [];
  const pairs = {};
  for (const kind of Object.keys(kinds)) {
    const url = `file://${dir}/${kind}`;
    const tables = { t: `${server.url}/data` };
    pairs[kind] = [
      ['addon', await Overlay.open(url, { readOnly: true }), await base.Overlay.open(url, { readOnly: true })],
      ['wasm', kinds[kind].reader, await base.OverlayReader.open(`${server.url}/${kind}`, { tables })],
    ];
  }
  const rows = [];
  for (const kind of ['bitmap', 'ordered']) {
    rows.push(...await sideBySide(pairs[kind], Object.entries(verbs).map(([n, f]) => [`${kind} ${n}`, f])));
  }
  rows.push(...await sideBySide(pairs.bloom, [
    ['bloom email = absent', (x) => x.query('t', { where: { email: email(ROWS + 12_345) }, columns: ['id'] })],
    ['bloom email IN 5', (x) => x.query('t', { where: { email: { in: [1, 2, 3, 4, 5].map((i) => email(i * 377_777 % ROWS)) } }, columns: ['id'] })],
  ]));
  console.log(`this build vs the baseline (${base.dir}), same run:`);
  console.table(rows);
  for (const p of Object.values(pairs)) for (const [via, now, b] of p) if (via === 'addon') { await now.close(); await b.close(); }
}
for (const k of Object.values(kinds)) await k.overlay.close();
await server.close();
fs.rmSync(dir, { recursive: true, force: true });
