// Full-text search at table scale (issue "Full text and counts at lakehouse scale"): the same
// 200k documents in 10 and in 200 files under a fulltext index. The build merges the files'
// blobs into the index's table run, so a search reads one directory, the query terms' blocks
// and their postings whatever the number of files: requests and bytes per search — natively
// (the addon's stats) and from the wasm reader over HTTP (counted by the range server), cold
// and warm — differ by at most 1.5× between the two tables; a cold 2-term wasm search after
// open takes at most 4 sequential round trips. Answers agree between the tables, targets and
// a scan.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const { Overlay, writeParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const DOCS = 200_000;
const COLUMNS = [{ name: 'id', type: 'int64' }, { name: 'body', type: 'string' }];
let seed = 0x9e3779b9;
function rand() {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 2 ** 32;
}
// Zipf-like over 5,000 words; 5–30 words a document.
const word = () => `w${Math.floor(5000 ** rand())}`;
const docs = [];
for (let i = 0; i < DOCS; i++) {
  const n = 5 + Math.floor(rand() * 26);
  const w = [];
  for (let k = 0; k < n; k++) w.push(word());
  docs.push(w.join(' '));
}

let root, server;
const overlays = {};

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-search-scale-'));
  for (const files of [10, 200]) {
    const dir = path.join(root, `data${files}`);
    fs.mkdirSync(dir, { recursive: true });
    const per = DOCS / files;
    for (let f = 0; f < files; f++) {
      const rows = [];
      for (let i = f * per; i < (f + 1) * per; i++) rows.push([BigInt(i), docs[i]]);
      fs.writeFileSync(path.join(dir, `p${String(f).padStart(3, '0')}.parquet`), writeParquet(COLUMNS, rows, 2_000));
    }
    const o = await Overlay.open(`file://${root}/overlay${files}`);
    await o.registerParquetTable('docs', `file://${dir}`);
    await o.createIndex('docs', 'body_text', ['body'], { kind: 'fulltext' });
    await o.build('docs');
    await o.publish();
    overlays[files] = o;
  }
  server = await startRangeServer(root, { latencyMs: 20 });
});

after(async () => {
  for (const o of Object.values(overlays)) await o.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

// 2-term queries from frequent to rare words; the answers' ids only.
const QUERIES = ['w1 w2', 'w3 w40', 'w17 w250', 'w120 w900', 'w7 w3000', 'w55 w56'];
// A hit's document: its file's first document plus its position (files are `pNNN`, in order).
const ids = (r, files) => r.refs.map((x) => Number(x.file.match(/p(\d+)/)[1]) * (DOCS / files) + Number(x.position)).join(',')
  + '|' + r.scores.map((s) => s.toFixed(9)).join(',');

test('a search costs the same in 10 and in 200 files: within 1.5× natively and over HTTP, cold in ≤ 4 round trips', async () => {
  const seen = {};
  const answers = {};
  for (const files of [10, 200]) {
    const o = overlays[files];
    // Natively, warm after one search per query (the index's requests and bytes).
    let nreq = 0, nbytes = 0;
    for (const query of QUERIES) {
      const r = await o.search('docs', { query, k: 10, columns: ['id'] });
      assert.equal(r.stats.filesByRun, files, `${files} files: the run answers every file`);
      nreq += r.stats.indexRequests;
      nbytes += r.stats.indexBytes;
    }
    const reader = await OverlayReader.open(`${server.url}/overlay${files}`, { tables: { docs: `${server.url}/data${files}` } });
    // Each query's first search after open, then again (warm): the answer — places and
    // scores, with no request to a data file (the manifest is trusted, as `count` trusts it).
    let creq = 0, cbytes = 0, wreq = 0, wbytes = 0, trips = 0;
    answers[files] = [];
    for (const query of QUERIES) {
      server.reset();
      const r = await reader.search('docs', { query, k: 10, columns: [] });
      trips = Math.max(trips, server.stats.trips);
      assert.ok(server.stats.trips <= 4 && r.stats.rounds <= 4, `${files} files cold: ${server.stats.trips} trips ${JSON.stringify(server.stats.log)}`);
      assert.ok(!server.stats.log.some((l) => l.path.includes(`/data${files}/`)), `${files} files: a data file was touched`);
      creq += server.stats.requests;
      cbytes += server.stats.bytes;
      answers[files].push(ids(r, files));
      const a = await o.search('docs', { query, k: 10, columns: [] });
      assert.equal(ids(a, files), ids(r, files), `${files} files ${query}: the targets agree`);
    }
    for (const query of QUERIES) {
      server.reset();
      await reader.search('docs', { query, k: 10, columns: [] });
      wreq += server.stats.requests;
      wbytes += server.stats.bytes;
    }
    // The rows of the hits (a footer and a page per hit file: the spread of the hits, not the
    // index), reported beside.
    let rreq = 0, rbytes = 0;
    for (const query of QUERIES) {
      server.reset();
      const r = await reader.search('docs', { query, k: 10, columns: ['id'] });
      assert.equal(ids(r, files), answers[files][QUERIES.indexOf(query)]);
      rreq += server.stats.requests;
      rbytes += server.stats.bytes;
    }
    const n = QUERIES.length;
    seen[files] = {
      native: { requests: nreq / n, bytes: Math.round(nbytes / n) },
      wasmCold: { requests: creq / n, bytes: Math.round(cbytes / n), trips },
      wasmWarm: { requests: wreq / n, bytes: Math.round(wbytes / n) },
      withRows: { requests: rreq / n, bytes: Math.round(rbytes / n) },
    };
  }
  console.log(`search at 200k documents: ${JSON.stringify(seen)}`);
  // The same documents, the same answers (row ids, scores) whatever the files.
  assert.deepEqual(answers[10], answers[200]);
  // And a scan agrees.
  overlays[200].setScanOnly(true);
  const scan = await overlays[200].search('docs', { query: QUERIES[2], k: 10, columns: ['id'] });
  overlays[200].setScanOnly(false);
  assert.equal(scan.stats.filesScanned, 200);
  assert.equal(ids(scan, 200), answers[200][2]);
  const within = (a, b) => b <= 1.5 * Math.max(a, 1) && a <= 1.5 * Math.max(b, 1);
  for (const what of ['native', 'wasmCold', 'wasmWarm']) {
    for (const m of ['requests', 'bytes']) {
      assert.ok(within(seen[10][what][m], seen[200][what][m]), `${what} ${m}: ${JSON.stringify(seen)}`);
    }
  }
});
