// A soak reader process (tests/soak/soak.mjs): pins the newest published version, asks every
// index kind of both tables, and checks each answer against the oracle of the state that
// version holds (oracle.mjs) — the addon read-only (under `SKERRY_FAULTS`), or the wasm
// reader over HTTP (the range server injects faults).
//
//   node tests/soak/reader.mjs ROOT addon|wasm SEED [BASE_URL]
//
// stdout: {type:'wrong', …} for each wrong answer, {type:'final', …} on SIGTERM.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { PoolOracle, LedgerOracle, REGIONS } from './oracle.mjs';

const require = createRequire(import.meta.url);
const [root, mode, seedText, base] = process.argv.slice(2);
let seed = Number(seedText) | 1;
const rand = (m) => {
  seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5;
  return (seed >>> 0) % m;
};
const say = (o) => process.stdout.write(`${JSON.stringify(o, (k, v) => (typeof v === 'bigint' ? Number(v) : v))}\n`);
const pool = new PoolOracle(path.join(root, 'data/t'));
const ledger = new LedgerOracle(path.join(root, 'ledger.jsonl'));
const stats = { rounds: 0, ops: {}, wrong: 0, errors: {}, unchecked: 0, recall: { sum: 0, n: 0 }, versions: 0 };
const fds = () => fs.readdirSync('/proc/self/fd').length;
const start = { fds: 0 };
let stopping = false;
process.on('SIGTERM', () => { stopping = true; });

async function open() {
  if (mode === 'wasm') {
    const { OverlayReader } = require('skerry-wasm');
    return OverlayReader.open(`${base}/overlay`, { tables: { t: `${base}/data/t`, ice: `${base}/warehouse/db/ice` } });
  }
  const { Overlay } = require('skerry');
  return Overlay.open(`file://${root}/overlay`, { readOnly: true });
}

const version = async (r) => Number(mode === 'wasm' ? r.version : (await r.refresh()).version);

/** The pinned version's state: files of `t` and the synced sequence number of `ice`. */
function stateOf(v) {
  const file = path.join(root, 'overlay/manifests', `${String(v).padStart(20, '0')}.json`);
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null; // vacuumed since: this round is not checked
  }
  const m = JSON.parse(text);
  const t = m.tables.find((x) => x.name === 't');
  // Snapshot ids are 64-bit: read the only Iceberg table's from the text, not the parse.
  const snap = /"upstream"\s*:\s*\{\s*"snapshot_id"\s*:\s*(\d+)/.exec(text);
  return { files: t.files.map((f) => f.path).sort(), snapshot: snap ? snap[1] : null };
}

function wrong(kind, v, detail) {
  stats.wrong++;
  say({ type: 'wrong', mode, kind, version: v, detail });
}

const places = (r) => (r.refs ?? r.rows).map((x) => `${x.file}:${x.position}`).sort();
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const close = (a, b) => Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(b));

async function ask(kind, f) {
  stats.ops[kind] = (stats.ops[kind] ?? 0) + 1;
  try {
    return { ok: await f() };
  } catch (e) {
    const code = e instanceof Error && typeof e.code === 'string' ? e.code : 'UNTYPED';
    stats.errors[code] = (stats.errors[code] ?? 0) + 1;
    if (code === 'UNTYPED') wrong(kind, null, `untyped error ${e}`);
    return { err: code };
  }
}

async function round(r) {
  let v;
  try {
    v = await version(r);
  } catch (e) {
    stats.errors[e.code ?? 'UNTYPED'] = (stats.errors[e.code ?? 'UNTYPED'] ?? 0) + 1;
    return;
  }
  const state = stateOf(v);
  if (!state) { stats.unchecked++; return; }
  const n = state.files.length;
  if (!same(state.files, pool.names.slice(0, n))) wrong('manifest', v, `files ${state.files.join(',')}`);
  stats.versions = Math.max(stats.versions, v);
  const top = Math.min(pool.names.length, n + 2);

  // ordered (unique): a row, a deleted row or one of a file not registered yet
  const id = rand(top) * 10000 + rand(pool.rows);
  const l = await ask('lookup', () => r.lookup('t', 'by_id', BigInt(id)));
  if (l.ok && !same(places(l.ok), pool.lookup(id, n))) wrong('lookup', v, { id, got: places(l.ok) });

  // bitmap
  const cat = `c${rand(12)}`;
  const c = await ask('count', () => r.count('t', { where: { cat } }));
  if (c.ok && c.ok.count !== pool.count('cat', cat, n)) wrong('count', v, { cat, got: c.ok.count, want: pool.count('cat', cat, n) });

  // bloom (pruning) + scan
  const tag = `t${rand(2000)}`;
  const q = await ask('query', () => r.query('t', { where: { tag }, columns: ['id'] }));
  if (q.ok && !same(places(q.ok), pool.where('tag', tag, n))) wrong('query', v, { tag, got: places(q.ok) });

  // fulltext
  const terms = [`w${rand(40)}`, `w${rand(40)}`].filter((x, i, a) => a.indexOf(x) === i);
  const operator = rand(2) ? 'or' : 'and';
  const s = await ask('search', () => r.search('t', { query: terms.join(' '), operator, k: 10, columns: [] }));
  if (s.ok) {
    const want = pool.search(terms, operator, n);
    const score = new Map(want.map((h) => [h.place, h.score]));
    const got = (s.ok.refs ?? s.ok.rows).map((x) => `${x.file}:${x.position}`);
    const bad = got.length !== Math.min(10, want.length)
      || got.some((p, i) => !score.has(p) || !close(s.ok.scores[i], score.get(p)) || !close(s.ok.scores[i], want[i].score));
    if (bad) wrong('search', v, { terms, operator, got: got.map((p, i) => [p, s.ok.scores[i]]), want: want.slice(0, 10) });
  }

  // vector
  const probe = pool.pool[pool.names[rand(top)]].emb[rand(pool.rows)];
  if (probe) {
    const vec = probe.map((x) => x + (rand(100) - 50) / 100);
    const nn = await ask('nearest', () => r.nearest('t', { vector: vec, k: 10, column: 'emb', columns: [] }));
    if (nn.ok) {
      const want = pool.nearest(vec, n);
      const d2 = new Map(want.map((h) => [h.place, h.d2]));
      const got = (nn.ok.refs ?? nn.ok.rows).map((x) => `${x.file}:${x.position}`);
      const dist = (p) => (d2.has(p) ? Math.sqrt(d2.get(p)) : NaN);
      const bad = got.length !== Math.min(10, want.length)
        || got.some((p, i) => !d2.has(p) || !(close(nn.ok.distances[i], d2.get(p)) || close(nn.ok.distances[i], dist(p))))
        || nn.ok.distances.some((d, i) => i > 0 && d < nn.ok.distances[i - 1]);
      if (bad) wrong('nearest', v, { got: got.map((p, i) => [p, nn.ok.distances[i]]), want: want.slice(0, 10) });
      const truth = new Set(want.slice(0, 10).map((h) => h.place));
      stats.recall.sum += got.filter((p) => truth.has(p)).length / Math.max(1, truth.size);
      stats.recall.n++;
    }
  }

  // the Iceberg table at the sequence number this version synced
  if (state.snapshot !== null) {
    const ids = ledger.ids(state.snapshot);
    if (!ids) { stats.unchecked++; return; }
    const region = REGIONS[rand(5)];
    const ic = await ask('iceberg-count', () => r.count('ice', { where: { region } }));
    let want = 0;
    for (const i of ids) if (REGIONS[i % 5] === region) want++;
    if (ic.ok && ic.ok.count !== want) wrong('iceberg-count', v, { snapshot: state.snapshot, region, got: ic.ok.count, want });
    const max = ledger.ops.reduce((m, o) => Math.max(m, o.hi), 1);
    const key = rand(max + 200);
    const iq = await ask('iceberg-query', () => r.query('ice', { where: { id: BigInt(key) }, columns: ['id'] }));
    if (iq.ok) {
      const got = iq.ok.rows.map((x) => Number(x.id));
      if (!same(got, ids.has(key) ? [key] : [])) wrong('iceberg-query', v, { snapshot: state.snapshot, key, got });
    }
  }
}

let r;
for (;;) {
  try { r = await open(); break; } catch (e) {
    stats.errors[e.code ?? 'UNTYPED'] = (stats.errors[e.code ?? 'UNTYPED'] ?? 0) + 1;
    await new Promise((res) => setTimeout(res, 200));
  }
}
start.fds = fds();
// Once a minute: RSS, the JS heap in use (the oracle's share is there), the rest of the
// process outside the JS heap (the addon's native memory, or the wasm reader's linear memory
// and buffers) and open handles — MB, MB, MB, count.
const samples = { rss: [], heap: [], native: [], fds: [] };
const sample = () => {
  const m = process.memoryUsage();
  samples.rss.push(Math.round(m.rss / 1e6));
  samples.heap.push(Math.round(m.heapUsed / 1e6));
  samples.native.push(Math.round((m.rss - m.heapTotal) / 1e6));
  samples.fds.push(fds());
};
sample();
let lastSample = Date.now();
while (!stopping) {
  if (mode === 'wasm' && stats.rounds > 0) {
    try { await r.refresh(); } catch (e) { stats.errors[e.code ?? 'UNTYPED'] = (stats.errors[e.code ?? 'UNTYPED'] ?? 0) + 1; }
  }
  await round(r);
  stats.rounds++;
  if (Date.now() - lastSample >= 60_000) {
    lastSample = Date.now();
    sample();
  }
  await new Promise((res) => setTimeout(res, 150 + rand(200)));
}
say({ type: 'final', mode, stats, memory: (sample(), samples), fds: { start: start.fds, end: fds() }, faults: mode === 'addon' ? require('skerry').faultsInjected() : null });
