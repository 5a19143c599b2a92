// Sync benchmark (issue 38): an ordinary upstream append that does not fit one commit's index
// work. A pyiceberg table (bench/sync_data.py) of SKERRY_BENCH_ROWS rows (2,000,000 by
// default in 20 files; `--scale`: 10,000,000 in 100 files) receives an append of as many rows
// in as many files, with five indexes (id unique, email, region bitmap, customer, amount).
//
// Each case runs in a fresh child process on a fresh overlay, so its peak RSS is its own:
//   sync     mount snapshot 1, build its indexes (not timed), then `syncIceberg` to the
//            append: time until the sync commits (goal ≤ 5 s), then `build()` until full
//            coverage (the catch-up; goal ≤ 1.2× the direct build), peak RSS (goal ≤ 512 MiB);
//   direct   the appended files alone registered as a Parquet table and built with the same
//            indexes: the baseline of the catch-up.
//
//   node bench/sync.mjs [--scale]        (npm run bench builds the release addon first)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');

const scale = process.argv.includes('--scale');
const ROWS = Number(process.env.SKERRY_BENCH_ROWS || (scale ? 10_000_000 : 2_000_000));
const FILES = Number(process.env.SKERRY_BENCH_FILES || (scale ? 100 : 20));
const INDEXES = [
  ['by_id', ['id'], { unique: true }],
  ['by_email', ['email'], {}],
  ['by_region', ['region'], { kind: 'bitmap' }],
  ['by_customer', ['customer'], {}],
  ['by_amount', ['amount'], {}],
];

function peakRss() {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : process.resourceUsage().maxRSS * 1024;
}

async function child(spec) {
  const o = await Overlay.open(`file://${spec.dir}`);
  const out = {};
  if (spec.kind === 'sync') {
    await o.mountIceberg('t', spec.metadata[0]);
    for (const [name, cols, opts] of INDEXES) await o.createIndex('t', name, cols, opts);
    await o.build('t');
    let t0 = performance.now();
    const r = await o.syncIceberg('t', { metadataUrl: spec.metadata[1] });
    out.syncMs = performance.now() - t0;
    out.added = r.added.length;
    out.rowsAdded = Number(r.rowsAdded);
    out.pending = r.pending;
    const q = await o.query('t', { where: { id: spec.rows + 12345 }, columns: ['id'] });
    out.pendingAnswer = q.rows.length;
    out.pendingScanned = q.stats.filesScanned;
    t0 = performance.now();
    await o.build('t');
    out.catchUpMs = performance.now() - t0;
    out.states = (await o.listIndexes('t')).map((i) => i.state);
  } else {
    await o.registerParquetTable('t', spec.location, { files: spec.appended });
    for (const [name, cols, opts] of INDEXES) await o.createIndex('t', name, cols, opts);
    const t0 = performance.now();
    await o.build('t');
    out.buildMs = performance.now() - t0;
  }
  await o.close();
  out.peakRss = peakRss();
  process.stdout.write(JSON.stringify(out));
}

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
  process.exit(0);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-bench-sync-'));
try {
  const here = path.dirname(fileURLToPath(import.meta.url));
  let t0 = performance.now();
  execFileSync('python3', [path.join(here, 'sync_data.py'), root, String(ROWS), String(FILES)], { stdio: 'inherit' });
  const data = JSON.parse(fs.readFileSync(path.join(root, 'sync.json'), 'utf8'));
  console.log(`data: ${ROWS} + ${ROWS} rows in ${FILES} + ${FILES} files (pyiceberg), ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const run = (spec) => JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify(spec)], {
    encoding: 'utf8', maxBuffer: 1 << 24,
  }));
  const sync = run({ kind: 'sync', dir: path.join(root, 'o-sync'), metadata: data.metadata, rows: ROWS });
  const direct = run({ kind: 'direct', dir: path.join(root, 'o-direct'), location: data.location, appended: data.appended });
  const mib = (b) => `${(b / 1048576).toFixed(0)} MiB`;
  console.log(`sync of the append (${sync.added} files, ${sync.rowsAdded} rows, 5 indexes): commits in ${(sync.syncMs / 1000).toFixed(2)} s (goal ≤ 5 s); pending: ${sync.pending.join(', ')}`);
  console.log(`  meanwhile a point query on a pending row: ${sync.pendingAnswer} row, ${sync.pendingScanned} files scanned`);
  console.log(`  catch-up build(): ${(sync.catchUpMs / 1000).toFixed(2)} s; states after: ${sync.states.join(', ')}; peak RSS ${mib(sync.peakRss)} (goal ≤ 512 MiB)`);
  console.log(`direct build() of the appended files: ${(direct.buildMs / 1000).toFixed(2)} s; peak RSS ${mib(direct.peakRss)}`);
  console.log(`catch-up ÷ direct build: ${(sync.catchUpMs / direct.buildMs).toFixed(2)}× (goal ≤ 1.2×)`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
