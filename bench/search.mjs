// Full-text benchmark over HTTP (issue 41): Skerry's wasm reader (`skerry-wasm`, the build
// users install) answers 2-term top-10 `search`es (default options, refs and scores only) over
// a range server with 20 ms per response, on the layouts `bench/fulltext` built and kept — the
// same documents in 20 and in 200 files:
//
//   cargo run --release -p skerry-bench-fulltext -- --keep /tmp/skerry-ftbench
//   node bench/search.mjs /tmp/skerry-ftbench
//
// Per layout: cold (a new reader per query: open reads the manifest, which carries the run's
// small directory; the search reads the terms' blocks, their postings — a frequent term's
// skips — and then the frequent terms' blocks that can hold a result) and warm (one reader,
// warmed by the other queries of the set): time p50/p95, sequential round trips (counted by
// the server), requests and bytes per query (mean, and p50 / p95), and the ratio of the
// 200-file layout to the 20-file one. `SKERRY_BENCH_VERBOSE=1` prints each query.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startBenchServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { OverlayReader } = require('skerry-wasm');

const root = path.resolve(process.argv[2] || '/tmp/skerry-ftbench');
const spec = JSON.parse(fs.readFileSync(path.join(root, 'bench.json'), 'utf8'));
const LATENCY = 20;
const COLD = Number(process.env.SKERRY_BENCH_COLD || 20);
// The range server runs in its own process (a real one is another machine; see
// `startBenchServer`): the time measured is the reader's.
const server = await startBenchServer(root, { latencyMs: LATENCY });
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };

console.log(`${spec.docs} documents, 2-term top-10 searches (${spec.queries.length} queries); wasm over HTTP with ${LATENCY} ms per response (server ${server.where}); default options`);
console.log();
console.log('| layout | side | p50 | p95 | round trips | requests/query | bytes/query (mean) | bytes p50 / p95 |');
console.log('|---|---|---|---|---|---|---|---|');
const rows = {};
for (const files of spec.layouts) {
  const tables = { docs: `${server.url}/data-${files}` };
  const open = () => OverlayReader.open(`${server.url}/overlay-${files}`, { tables });
  const ask = (query) => ({ query, k: 10, columns: [] });
  const answers = [];
  const measure = async (label, queries, run) => {
    const ms = []; const each = []; let trips = 0, req = 0, bytes = 0;
    for (const q of queries) {
      await server.reset();
      const t = performance.now();
      const r = await run(q);
      ms.push(performance.now() - t);
      const st = await server.stats();
      answers.push(r.scores.map((s) => s.toFixed(9)).join(','));
      trips = Math.max(trips, st.trips); req += st.requests; bytes += st.bytes;
      each.push(st.bytes);
      if (process.env.SKERRY_BENCH_VERBOSE) console.log(`  ${label} ${files} "${q}": ${st.trips} trips, ${st.requests} requests, ${st.bytes} bytes, ${(performance.now() - t).toFixed(1)} ms`);
    }
    const n = queries.length;
    const row = { p50: pct(ms, 0.5), p95: pct(ms, 0.95), trips, requests: req / n, bytes: bytes / n };
    console.log(`| ${files} files | ${label} | ${row.p50.toFixed(1)} ms | ${row.p95.toFixed(1)} ms | ${row.trips} | ${row.requests.toFixed(2)} | ${(row.bytes / 1e3).toFixed(0)} KB | ${(pct(each, 0.5) / 1e3).toFixed(0)} / ${(pct(each, 0.95) / 1e3).toFixed(0)} KB |`);
    (rows[label] ||= {})[files] = row;
  };
  await measure('cold (open + search)', spec.queries.slice(0, COLD), async (q) => (await open()).search('docs', ask(q)));
  const reader = await open();
  for (const q of spec.queries) await reader.search('docs', ask(q));
  await measure('warm', spec.queries, (q) => reader.search('docs', ask(q)));
  (rows.answers ||= {})[files] = answers;
}
await server.close();
if (spec.layouts.length === 2) {
  const [a, b] = spec.layouts;
  console.log();
  console.log(`${b} files / ${a} files:`);
  for (const label of ['cold (open + search)', 'warm']) {
    const x = rows[label][a], y = rows[label][b];
    const r = (p, q) => (q === 0 && p === 0 ? '1.00' : (q / Math.max(p, 1e-9)).toFixed(2));
    console.log(`- ${label}: requests ${r(x.requests, y.requests)}×, bytes ${r(x.bytes, y.bytes)}×, p50 ${r(x.p50, y.p50)}×`);
  }
  // The same documents: the same scores, whatever the files.
  const same = rows.answers[a].every((s, i) => s === rows.answers[b][i]);
  console.log(`- scores identical in both layouts: ${same}`);
  if (!same) process.exitCode = 1;
}
