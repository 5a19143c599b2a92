// Compaction benchmark (issue 43, RFC 0006): an upstream compaction of a format-version-3
// Iceberg table (written spec-exactly by tests/iceberg/make_v3.py's `db.v3big`, rows keeping
// their ids) — SKERRY_BENCH_ROWS rows (2,000,000 by default) in 20 files compacted into 4
// (`--scale`: 10,000,000 in 100 into 20), 64-dimension vectors and Zipf text — with five
// indexes: id unique (ordered), tag bitmap, id bloom, body full text, emb vector.
//
// Each case runs in a fresh child process on a fresh overlay, default options:
//   carry     mount the 20 files, build (not timed); then `syncIceberg` to the compaction
//             and `build()` until every index covers the outputs again: the move is carried
//             (timed; data and overlay bytes read; blobs carried and derived);
//   rebuild   the compacted snapshot mounted on its own and built: what deriving the outputs
//             costs (the baseline; the mount's file facts are the sync's too).
// Goal: carry ≥ 20× faster than rebuild, ≤ 5% of its data bytes read.
//
//   node bench/compaction.mjs [--scale] [--files 200]   (npm run bench builds the release addon first)
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
// `--files 200`: the same rows in 10× more files (compacted into 10× more outputs).
const many = process.argv.includes('--files') ? Number(process.argv[process.argv.indexOf('--files') + 1]) / 20 : 1;
const FILES = (scale ? 100 : 20) * many;
const OUTPUTS = (scale ? 20 : 4) * many;
if (!Number.isInteger(many) || many < 1) throw new Error('--files takes a multiple of 20');
const INDEXES = [
  ['by_id', ['id'], { unique: true }],
  ['by_tag', ['tag'], { kind: 'bitmap' }],
  ['id_bloom', ['id'], { kind: 'bloom' }],
  ['by_body', ['body'], { kind: 'fulltext' }],
  ['by_emb', ['emb'], { kind: 'vector' }],
];

/** The counters of the handle's Prometheus text this benchmark reports. */
async function counters(o) {
  const text = await o.metrics();
  const get = (name, label) => Number(new RegExp(`^skerry_${name}\\{${label}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return {
    dataBytes: get('bytes_total', 'target="data"'),
    dataRequests: get('requests_total', 'target="data"'),
    indexBytes: get('bytes_total', 'target="index"'),
    derived: get('blobs_written_total', 'from="rows"'),
    carried: get('blobs_written_total', 'from="move"'),
  };
}
const diff = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, b[k] - a[k]]));

async function child(spec) {
  const o = await Overlay.open(`file://${spec.dir}`);
  const out = {};
  if (spec.kind === 'carry') {
    await o.mountIceberg('t', spec.metadata[0]);
    for (const [name, cols, opts] of INDEXES) await o.createIndex('t', name, cols, opts);
    await o.build('t');
    const c0 = await counters(o);
    let t0 = performance.now();
    const r = await o.syncIceberg('t', { metadataUrl: spec.metadata[1] });
    out.syncMs = performance.now() - t0;
    out.moved = r.moved;
    out.pending = r.pending;
    t0 = performance.now();
    // Where the build's time goes: each progress event's phase or index, with its time.
    out.phases = [];
    await o.build('t', {
      onProgress: (p) => {
        const at = performance.now() - t0;
        const name = p.index ?? p.phase ?? '?';
        const last = out.phases[out.phases.length - 1];
        if (last && last.name === name) last.endMs = at;
        else out.phases.push({ name, startMs: at, endMs: at });
      },
    });
    out.buildMs = performance.now() - t0;
    out.ms = out.syncMs + out.buildMs;
    out.io = diff(c0, await counters(o));
  } else {
    const c0 = await counters(o);
    const t0 = performance.now();
    await o.mountIceberg('t', spec.metadata[1]);
    for (const [name, cols, opts] of INDEXES) await o.createIndex('t', name, cols, opts);
    await o.build('t');
    out.ms = performance.now() - t0;
    out.io = diff(c0, await counters(o));
  }
  out.states = (await o.listIndexes('t')).map((i) => i.state);
  for (const ix of ['by_id', 'by_body', 'by_emb']) {
    const v = await o.verify('t', ix);
    if (!v.certified) throw new Error(`${spec.kind}: ${ix} not certified: ${JSON.stringify(v)}`);
  }
  await o.close();
  process.stdout.write(JSON.stringify(out));
}

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
  process.exit(0);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-bench-compaction-'));
try {
  const here = path.dirname(fileURLToPath(import.meta.url));
  let t0 = performance.now();
  execFileSync('python3', [path.join(here, '../tests/iceberg/make_v3.py'), root], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      SKERRY_V3_BIG: '1',
      SKERRY_V3_BIG_ROWS: String(ROWS),
      SKERRY_V3_BIG_FILES: String(FILES),
      SKERRY_V3_BIG_OUTPUTS: String(OUTPUTS),
      SKERRY_V3_BIG_DIM: '64',
    },
  });
  const big = JSON.parse(fs.readFileSync(path.join(root, 'expected_v3.json'), 'utf8'))['db.v3big'];
  const metadata = big.snapshots.map((s) => s.metadata_location);
  console.log(`data: ${ROWS} rows in ${FILES} files, compacted into ${OUTPUTS} (v3, row ids kept), ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const run = (spec) => JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify(spec)], {
    encoding: 'utf8', maxBuffer: 1 << 24,
  }));
  const carry = run({ kind: 'carry', dir: path.join(root, 'o-carry'), metadata });
  const rebuild = run({ kind: 'rebuild', dir: path.join(root, 'o-rebuild'), metadata });
  const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;
  const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
  console.log(`indexes: ${INDEXES.map((i) => i[0]).join(', ')} (default options)`);
  console.log();
  console.log('| case | time | data read (requests) | overlay read | blobs derived / carried |');
  console.log('|---|---|---|---|---|');
  for (const [name, c] of [['carry (sync + build)', carry], ['rebuild (mount + build)', rebuild]]) {
    console.log(`| ${name} | ${s(c.ms)} | ${mb(c.io.dataBytes)} (${c.io.dataRequests}) | ${mb(c.io.indexBytes)} | ${c.io.derived} / ${c.io.carried} |`);
  }
  console.log();
  console.log(`carry's build, by progress event: ${carry.phases.map((p) => `${p.name} ${s(p.startMs)}–${s(p.endMs)}`).join('; ')}`);
  console.log(`carry: sync ${s(carry.syncMs)} (moved ${JSON.stringify(carry.moved)}; pending ${carry.pending.join(', ')}), build ${s(carry.buildMs)}`);
  console.log(`rebuild ÷ carry time: ${(rebuild.ms / carry.ms).toFixed(1)}× (goal ≥ 20×); carry's data bytes ÷ rebuild's: ${(100 * carry.io.dataBytes / rebuild.io.dataBytes).toFixed(1)}% (goal ≤ 5%)`);
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
