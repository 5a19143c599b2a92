// Build benchmark (issue 13): what `build()` costs per index kind and uniqueness, side by side
// in one run. A table of SKERRY_BENCH_ROWS rows (2,000,000 by default; `--scale` for
// 10,000,000) in 100,000-row Parquet files with columns id (int64, unique), email (string,
// unique), region (50 values), day (date), amount (float64 with NULL, NaN, ±0).
//
// Every case runs in a fresh child process on a fresh overlay over the same data, so its peak
// RSS is its own: time of `build()` (registration and index creation excluded), peak RSS,
// bundle bytes, catalog bytes, bundle generations written per data file. Then the ratios the
// issue asks for, each beside its baseline from the same run:
//   unique / non-unique build time of the same column (goal ≤ 1.5×),
//   non-unique ordered build time per 2M rows (goal ≤ 0.6 s),
//   peak RSS of any build (goal ≤ 512 MiB at 10M rows),
//   generations per file after one build() of five indexes (goal 1).
//
// With SKERRY_BENCH_BASELINE (bench/baseline.mjs), each case is also built by the baseline's
// addon right after this build's, in the same run, and the now/baseline ratios are printed.
//
//   node bench/build.mjs [--scale]        (npm run bench builds the release addon first)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
// A `--child` run with SKERRY_BENCH_ADDON builds with that checkout's addon (the baseline).
const { Overlay, writeParquet } = require(process.env.SKERRY_BENCH_ADDON || 'skerry');

const PER_FILE = 100_000;
const REGIONS = Array.from({ length: 50 }, (_, i) => `region-${String(i).padStart(2, '0')}`);

/** Row `i` of the bench table (deterministic). */
function row(i) {
  // 7919 is prime and does not divide the row count's factors (2, 5): a permutation.
  const amount = i % 101 === 0 ? null : i % 103 === 0 ? NaN : i % 107 === 0 ? -0 : (i % 1000) * 1.25;
  return [i, `user-${String((i * 7919) % ROWS).padStart(9, '0')}@example.com`, REGIONS[i % 50], 19_000 + (i % 365), amount];
}
const COLUMNS = [
  { name: 'id', type: 'int64' },
  { name: 'email', type: 'string' },
  { name: 'region', type: 'string' },
  { name: 'day', type: 'date' },
  { name: 'amount', type: 'float64' },
];

const scale = process.argv.includes('--scale');
const ROWS = Number(process.env.SKERRY_BENCH_ROWS || (scale ? 10_000_000 : 2_000_000));

async function child(spec) {
  const { dir, indexes } = spec;
  const overlay = await Overlay.open(`file://${dir}/overlay`);
  await overlay.registerParquetTable('t', `file://${spec.data}`);
  for (const [name, cols, unique] of indexes) await overlay.createIndex('t', name, cols, { unique });
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  const report = await overlay.build('t');
  const ms = performance.now() - t0;
  // VmHWM: this process image's own high-water mark. (getrusage's maxRSS survives exec on
  // Linux: a child forked from the parent that generated the data would report the parent's.)
  let peak = process.resourceUsage().maxRSS * 1024;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) peak = Number(m[1]) * 1024;
  } catch {}
  const du = (p) => {
    let n = 0;
    if (!fs.existsSync(p)) return 0;
    for (const e of fs.readdirSync(p, { withFileTypes: true })) {
      const q = path.join(p, e.name);
      n += e.isDirectory() ? du(q) : fs.statSync(q).size;
    }
    return n;
  };
  const bundles = fs.existsSync(`${dir}/overlay/bundles`) ? fs.readdirSync(`${dir}/overlay/bundles`, { recursive: true }).filter((f) => f.endsWith('.puffin')) : [];
  // Table runs (one per index, `run-*.puffin`) apart from the per-file bundle generations.
  const runs = bundles.filter((f) => path.basename(f).startsWith('run-'));
  const top = fs.readdirSync(`${dir}/overlay`);
  const catalogBytes = top.filter((d) => !['bundles', 'staging', 'manifests', 'runs'].includes(d)).reduce((n, d) => n + du(path.join(`${dir}/overlay`, d)), 0);
  const files = Number(report.filesIndexed);
  process.stdout.write(JSON.stringify({
    ms, peak, rssBefore, entries: Number(report.entries), files,
    bundleFiles: bundles.length - runs.length, runs: runs.length, bundleBytes: du(`${dir}/overlay/bundles`), catalogBytes,
    layout: top,
  }));
}

/**
 * The peer: LanceDB (bench/package.json, installed by scripts/bench.sh) builds its BTREE (and
 * BITMAP) indexes over the same rows, appended in the same 100,000-row pieces (one fragment
 * each, as Skerry's files), from its own format — conversion not timed, as the issue measured.
 */
async function lanceChild(spec) {
  const lancedb = await import(path.join(path.dirname(fileURLToPath(import.meta.url)), 'node_modules/@lancedb/lancedb/dist/index.js'));
  const db = await lancedb.connect(`${spec.dir}/lance`);
  let t;
  for (let s = 0; s < ROWS; s += PER_FILE) {
    const rows = [];
    for (let i = s; i < Math.min(ROWS, s + PER_FILE); i++) {
      const r = row(i);
      rows.push({ id: r[0], email: r[1], region: r[2] });
    }
    if (!t) t = await db.createTable('t', rows);
    else await t.add(rows);
  }
  const out = {};
  for (const [col, kind] of spec.indexes) {
    const t0 = performance.now();
    await t.createIndex(col, { config: lancedb.Index[kind](), replace: true });
    out[`${col} ${kind}`] = performance.now() - t0;
  }
  process.stdout.write(JSON.stringify(out));
}

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
  process.exit(0);
}
if (process.argv[2] === '--lance') {
  await lanceChild(JSON.parse(process.argv[3]));
  process.exit(0);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-bbench-'));
const data = path.join(root, 'data');
fs.mkdirSync(data);
let t0 = performance.now();
const nfiles = Math.ceil(ROWS / PER_FILE);
let dataBytes = 0;
for (let f = 0; f < nfiles; f++) {
  const rows = [];
  for (let i = f * PER_FILE; i < Math.min(ROWS, (f + 1) * PER_FILE); i++) rows.push(row(i));
  const b = writeParquet(COLUMNS, rows, 25_000, 'snappy');
  dataBytes += b.length;
  fs.writeFileSync(path.join(data, `part-${String(f).padStart(4, '0')}.parquet`), b);
}
console.log(`data: ${ROWS} rows in ${nfiles} files, ${(dataBytes / 2 ** 20).toFixed(1)} MiB, written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

// Peer measured when the issue was filed: DuckDB PRIMARY KEY (ART) from Parquet 5.2 s.
const cases = [
  ['region', [['by_region', ['region'], false]]],
  ['id', [['by_id', ['id'], false]]],
  ['id unique', [['by_id', ['id'], true]]],
  ['email', [['by_email', ['email'], false]]],
  ['email unique', [['by_email', ['email'], true]]],
  ['five in one build()', [
    ['by_id', ['id'], true], ['by_email', ['email'], true], ['by_region', ['region'], false],
    ['by_day', ['day'], false], ['by_amount', ['amount'], false],
  ]],
];
const self = fileURLToPath(import.meta.url);
const results = {};
const baseResults = {};
const mib = (b) => (b / 2 ** 20).toFixed(1);
console.log('| case | build | peak RSS | bundle generations | runs | bundle + run bytes | catalog bytes | catalog B/key |');
console.log('|---|---|---|---|---|---|---|---|');
for (const [name, indexes] of cases) {
  const dir = fs.mkdtempSync(path.join(root, 'case-'));
  const out = execFileSync(process.execPath, [self, '--child', JSON.stringify({ dir, data, indexes })], { maxBuffer: 1 << 20 });
  const r = JSON.parse(out.toString());
  results[name] = r;
  console.log(`| ${name} | ${(r.ms / 1000).toFixed(2)} s | ${mib(r.peak)} MiB | ${r.bundleFiles} (${(r.bundleFiles / nfiles).toFixed(2)}/file) | ${r.runs} | ${mib(r.bundleBytes)} MiB | ${(r.catalogBytes / 1024).toFixed(0)} KiB | ${(r.catalogBytes / r.entries).toFixed(2)} |`);
  fs.rmSync(dir, { recursive: true, force: true });
  if (process.env.SKERRY_BENCH_BASELINE) {
    const bdir = fs.mkdtempSync(path.join(root, 'case-'));
    const env = { ...process.env, SKERRY_BENCH_ADDON: path.join(process.env.SKERRY_BENCH_BASELINE, 'bindings-node') };
    const out = execFileSync(process.execPath, [self, '--child', JSON.stringify({ dir: bdir, data, indexes })], { maxBuffer: 1 << 20, env });
    baseResults[name] = JSON.parse(out.toString());
    fs.rmSync(bdir, { recursive: true, force: true });
  }
}
if (process.env.SKERRY_BENCH_BASELINE) {
  console.log(`\nthis build vs the baseline (${process.env.SKERRY_BENCH_BASELINE}), each case right after the other:`);
  console.log('| case | build now | build base | time now/base | peak RSS now/base | bundle bytes now/base |');
  console.log('|---|---|---|---|---|---|');
  for (const [name, r] of Object.entries(results)) {
    const b = baseResults[name];
    console.log(`| ${name} | ${(r.ms / 1000).toFixed(2)} s | ${(b.ms / 1000).toFixed(2)} s | ${(r.ms / b.ms).toFixed(2)}× | ${(r.peak / b.peak).toFixed(2)}× | ${(r.bundleBytes / b.bundleBytes).toFixed(2)}× |`);
  }
}
// The peer in this run: LanceDB's BTREE per column (and BITMAP on region).
let lance = null;
const lanceDir = fs.mkdtempSync(path.join(root, 'lance-'));
try {
  const out = execFileSync(process.execPath, [self, '--lance', JSON.stringify({
    dir: lanceDir, indexes: [['id', 'btree'], ['email', 'btree'], ['region', 'btree'], ['region', 'bitmap']],
  })], { maxBuffer: 1 << 20, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SKERRY_BENCH_ROWS: String(ROWS) } });
  lance = JSON.parse(out.toString());
  console.log(`\nLanceDB 0.31 (same rows, ${nfiles} fragments): ` + Object.entries(lance).map(([k, ms]) => `${k} ${(ms / 1000).toFixed(2)} s`).join(', '));
} catch (e) {
  console.log(`\nLanceDB peer not run (npm install --prefix bench): ${String(e.stderr || e.message).split('\n')[0]}`);
}
fs.rmSync(lanceDir, { recursive: true, force: true });
const per2m = (r) => (r.ms / 1000) * (2_000_000 / ROWS);
const peak = Math.max(...Object.values(results).map((r) => r.peak));
console.log('\n| ratio | value | goal |');
console.log('|---|---|---|');
console.log(`| id: unique / non-unique | ${(results['id unique'].ms / results.id.ms).toFixed(2)}× | ≤ 1.5× |`);
console.log(`| email: unique / non-unique | ${(results['email unique'].ms / results.email.ms).toFixed(2)}× | ≤ 1.5× |`);
for (const k of ['region', 'id', 'email']) console.log(`| ${k} (non-unique) per 2M rows / 0.6 s | ${(per2m(results[k]) / 0.6).toFixed(2)}× (${per2m(results[k]).toFixed(2)} s) | ≤ 1× |`);
if (lance) {
  for (const k of ['region', 'id', 'email']) console.log(`| ${k}: Skerry build / LanceDB BTREE build (same rows, this run) | ${(results[k].ms / lance[`${k} btree`]).toFixed(2)}× | ≤ 1× |`);
  console.log(`| region: Skerry build / LanceDB BITMAP build | ${(results.region.ms / lance['region bitmap']).toFixed(2)}× | |`);
}
console.log(`| five indexes / sum of single builds | ${(results['five in one build()'].ms / ['id unique', 'email unique', 'region'].reduce((s, k) => s + results[k].ms, 0)).toFixed(2)}× (of id, email unique + region) | |`);
console.log(`| bundle generations per file, five indexes | ${(results['five in one build()'].bundleFiles / nfiles).toFixed(2)} | 1 |`);
console.log(`| peak RSS of any build / 512 MiB | ${(peak / (512 * 2 ** 20)).toFixed(2)}× (${mib(peak)} MiB at ${ROWS} rows) | ≤ 1× at 10M |`);
fs.rmSync(root, { recursive: true, force: true });
