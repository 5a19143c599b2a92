// A Worker's first request (issue 42): the example Worker (examples/worker), bundled as
// `wrangler deploy` would upload it (the release wasm), run in workerd through miniflare.
// A fresh workerd per run; timed separately: startup (workerd up, modules compiled — what a
// deploy's cold isolate pays before the first request), the first request (the reader opened
// at module scope: HEAD with the manifest inlined, then a point query of 6 columns), and a warm request on
// fresh keys. The read benchmark's pyarrow table (SKERRY_BENCH_ROWS rows, 2,000,000 by
// default, in 20 files) over the range server at 0 ms and at 20 ms per response; requests,
// bytes and sequential round trips counted by the server.
//
//   node bench/worker.mjs
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { startRangeServer } from '../scripts/range-server.mjs';
import { bundleExampleWorker } from '../scripts/worker-bundle.mjs';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');
const here = path.dirname(fileURLToPath(import.meta.url));

const ROWS = Number(process.env.SKERRY_BENCH_ROWS || 2_000_000);
const RUNS = Number(process.env.SKERRY_BENCH_RUNS || 7);
const COLUMNS = ['id', 'email', 'region', 'ts', 'amount', 'tag'];
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-wbench-'));
const data = path.join(dir, 'data', 't');
fs.mkdirSync(data, { recursive: true });
execFileSync('python3', [path.join(here, 'reads_data.py'), data, String(ROWS)], { stdio: 'inherit' });
const overlay = await Overlay.open(`file://${dir}/overlay`);
await overlay.registerParquetTable('t', `file://${data}`);
await overlay.createIndex('t', 'by_id', ['id'], { unique: true });
await overlay.build('t');
await overlay.publish();
await overlay.close();

const dist = path.join(dir, 'worker-dist');
const bundle = bundleExampleWorker(dist);
const wasmBytes = fs.statSync(bundle.wasm).size;
const { Miniflare } = await import('miniflare');

let seed = 4242;
const key = () => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return Math.floor((seed / 2 ** 31) * ROWS); };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const results = [];
for (const latencyMs of [0, 20]) {
  const server = await startRangeServer(dir, { latencyMs });
  const m = { startup: [], ping: [], first: [], warm: [], firstReq: [], firstBytes: [], firstTrips: [], warmReq: [], warmBytes: [] };
  for (let run = 0; run < RUNS; run++) {
    let t = performance.now();
    const mf = new Miniflare({
      modules: bundle.modules,
      modulesRoot: dist,
      compatibilityDate: '2026-04-01',
      bindings: { OVERLAY_URL: `${server.url}/overlay`, DATA_URL: `${server.url}/data` },
    });
    await mf.ready;
    m.startup.push(performance.now() - t);
    try {
      // A request the Worker answers without Skerry (405): what workerd and miniflare's
      // dispatch cost on their own on a fresh isolate.
      t = performance.now();
      await (await mf.dispatchFetch('http://worker.local/')).text();
      m.ping.push(performance.now() - t);
      for (const phase of ['first', 'warm']) {
        const id = key();
        server.reset();
        t = performance.now();
        const res = await mf.dispatchFetch('http://worker.local/', {
          method: 'POST',
          body: JSON.stringify({ source: 'url', tables: ['t'], calls: [['query', 't', { where: { id }, columns: COLUMNS }]] }),
        });
        const body = await res.json();
        const ms = performance.now() - t;
        if (res.status !== 200 || body[0]?.rows?.length !== 1) throw new Error(`${phase}: ${JSON.stringify(body).slice(0, 300)}`);
        m[phase].push(ms);
        m[`${phase}Req`].push(server.stats.requests);
        m[`${phase}Bytes`].push(server.stats.bytes);
        if (phase === 'first') m.firstTrips.push(server.stats.trips);
      }
    } finally {
      await mf.dispose();
    }
  }
  await server.close();
  results.push({ latencyMs, m });
}

const kib = (b) => `${(b / 1024).toFixed(0)} KiB`;
console.log(`\nworker bundle: ${path.basename(bundle.wasm)} ${(wasmBytes / 1024).toFixed(0)} KiB; ${ROWS} rows in 20 files; ${RUNS} fresh workerd runs each`);
console.log('\n| per response | startup (workerd, modules compiled) p50 | a request without Skerry first (405) p50 | then the first Skerry request p50: trips / requests / bytes / time | warm request p50: requests / bytes / time |');
console.log('|---|---|---|---|---|');
for (const { latencyMs, m } of results) {
  console.log(`| ${latencyMs} ms | ${median(m.startup).toFixed(0)} ms | ${median(m.ping).toFixed(1)} ms | ${median(m.firstTrips)} / ${median(m.firstReq)} / ${kib(median(m.firstBytes))} / ${median(m.first).toFixed(1)} ms | ${median(m.warmReq)} / ${kib(median(m.warmBytes))} / ${median(m.warm).toFixed(1)} ms |`);
}
console.log(`\n| goal (issue 42) | value |\n|---|---|\n| a Worker's first request ≤ 50 ms (0 ms per response) | ${median(results[0].m.first).toFixed(1)} ms |`);
fs.rmSync(dir, { recursive: true, force: true });
