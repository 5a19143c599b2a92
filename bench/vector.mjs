// Vector benchmark over HTTP (issue 40): Skerry's wasm reader (`skerry-wasm`, the build users
// install) answers `nearest` (k = 10, default options, positions only) over a range server
// with 20 ms per response, cold (open + one query) and warm (codebook and directories cached
// by other queries), on the table `bench/vector` built and kept:
//
//   cargo run --release -p skerry-bench-vector -- --keep /tmp/skerry-vbench [--files 20,200]
//   node bench/vector.mjs /tmp/skerry-vbench
//
// Per layout (the same rows in 20 and in 200 files): time p50/p95, sequential round trips
// (counted by the server), requests and bytes per query, recall@10 against the exact answers
// the Rust bench computed (the Rust bench itself measures the native side).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startBenchServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { OverlayReader } = require('skerry-wasm');

const root = path.resolve(process.argv[2] || '/tmp/skerry-vbench');
const spec = JSON.parse(fs.readFileSync(path.join(root, 'bench.json'), 'utf8'));
const LATENCY = 20;
const COLD = Number(process.env.SKERRY_BENCH_COLD || 10);
// The range server runs in its own process (a real one is another machine; see
// `startBenchServer`): the time measured is the reader's.
const server = await startBenchServer(root, { latencyMs: LATENCY });
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };

function recall(layout, truth, rows) {
  const got = new Set(rows.map((r) => Number(r.file.slice(1, 6)) * layout.per + Number(r.position)));
  return truth.filter((t) => got.has(t)).length;
}

console.log(`${spec.n} × 64-d vectors, k = ${spec.k}, metric ${spec.metric}; wasm over HTTP with ${LATENCY} ms per response (server ${server.where}); default options`);
console.log();
console.log('| layout | side | recall@10 | p50 | p95 | round trips | requests/query | bytes/query |');
console.log('|---|---|---|---|---|---|---|---|');
for (const layout of spec.layouts) {
  const tables = { [layout.table]: `${server.url}/${layout.data}` };
  const open = () => OverlayReader.open(`${server.url}/overlay`, { tables });
  const ask = (v) => ({ vector: v, k: spec.k, columns: [] });
  const measure = async (label, run) => {
    const ms = []; let trips = 0, req = 0, bytes = 0, hit = 0;
    const n = label.startsWith('wasm cold') ? COLD : spec.queries.length;
    for (let i = 0; i < n; i++) {
      await server.reset();
      const t = performance.now();
      const r = await run(spec.queries[i]);
      ms.push(performance.now() - t);
      const st = await server.stats();
      trips = Math.max(trips, st.trips); req += st.requests; bytes += st.bytes;
      if (r.refs.length !== spec.k) throw new Error(`${label}: ${r.refs.length} results`);
      hit += recall(layout, spec.truth[i], r.refs);
    }
    const row = { label, recall: hit / (n * spec.k), p50: pct(ms, 0.5), p95: pct(ms, 0.95), trips, requests: req / n, bytes: bytes / n };
    console.log(`| ${layout.files} files | ${label} | ${row.recall.toFixed(3)} | ${row.p50.toFixed(1)} ms | ${row.p95.toFixed(1)} ms | ${row.trips} | ${row.requests.toFixed(1)} | ${(row.bytes / 1e3).toFixed(0)} KB |`);
    return row;
  };
  // Cold: a new reader per query (open reads the manifest; the query the codebook, the run's
  // directory, the probed partitions and the candidates' raw vectors).
  await measure('wasm cold (open + query)', async (v) => (await open()).nearest(layout.table, ask(v)));
  // Warm: one reader, warmed by other queries from the same clusters.
  const reader = await open();
  for (const v of spec.warmups) await reader.nearest(layout.table, ask(v));
  await measure('wasm warm', (v) => reader.nearest(layout.table, ask(v)));
}
await server.close();
