// The `skerry` CLI end to end, as a user drives it from a shell: init → register → index →
// build (progress lines; a bar on a terminal) → publish → query/stats → refresh/verify
// (exit 3 on a rewritten file) → drop → vacuum; exit codes and `error E_CODE` on stderr.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { readHead } from './support/head.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), '../bindings-node/bin/skerry.js');

let dir;
const skerry = (...args) => {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: dir, encoding: 'utf8', env: { ...process.env, SKERRY_OVERLAY: '' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const ok = (r) => {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.err}${r.out}`);
  return r;
};

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-cli-'));
  fs.mkdirSync(path.join(dir, 'data'));
  for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(dir, `data/part-${i}.parquet`), sampleOrdersParquet(i * 4000, 4000, 1000, 'none'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('help for every command; usage errors exit 2', () => {
  const top = ok(skerry('--help'));
  const commands = ['init', 'register', 'rewrite', 'index', 'build', 'plan', 'build-bundle', 'commit', 'publish', 'refresh', 'verify', 'vacuum', 'query', 'count', 'search', 'nearest', 'stats'];
  for (const c of commands) {
    assert.match(top.out, new RegExp(`^  ${c} `, 'm'), `${c} missing from --help`);
    const h = ok(skerry(c, '--help'));
    assert.match(h.out, new RegExp(`Usage: skerry ${c}`), `${c} --help`);
  }
  for (const sub of ['create', 'drop', 'list']) ok(skerry('index', sub, '--help'));
  assert.equal(skerry('--version').out.trim(), require('skerry/package.json').version);
  let r = skerry('frobnicate');
  assert.equal(r.code, 2);
  assert.match(r.err, /unknown command frobnicate/);
  r = skerry('stats');
  assert.equal(r.code, 2);
  assert.match(r.err, /no overlay: pass --overlay/);
  r = skerry('index', 'create', 'orders', '--overlay', 'memory://');
  assert.equal(r.code, 2);
  assert.match(r.err, /expected: skerry index create/);
  r = skerry('build', 'orders', '--bogus', '--overlay', 'memory://');
  assert.equal(r.code, 2);
  r = skerry('build', 'orders', '--max-entries', 'many', '--overlay', 'memory://');
  assert.equal(r.code, 2);
  assert.match(r.err, /--max-entries must be a non-negative integer/);
});

test('init, register, index, build, publish, query, stats, refresh, verify, drop, vacuum', async (t) => {
  const url = `file://${dir}/overlay`;
  ok(skerry('init', url));
  assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'skerry.json'), 'utf8')).overlay, url);

  let r = ok(skerry('register', 'orders', `file://${dir}/data`));
  assert.match(r.out, /table orders: 3 files, 12000 rows/);
  ok(skerry('index', 'create', 'orders', 'by_id', 'order_id', '--unique'));
  ok(skerry('index', 'create', 'orders', 'by_customer_day', 'customer', 'day:desc'));
  r = ok(skerry('index', 'list', '--json'));
  const listed = JSON.parse(r.out);
  assert.deepEqual(listed.map((i) => [i.index, i.state, i.unique]), [['by_id', 'building', true], ['by_customer_day', 'building', false]]);

  // Not a terminal: one progress line per step on stderr, the report on stdout.
  r = ok(skerry('build', 'orders', '--max-entries', '5000'));
  const lines = r.err.trim().split('\n');
  assert.ok(lines.length >= 4, `progress lines: ${r.err}`);
  assert.match(lines[0], /^build by_id: step 1, \d+\/12000 rows/);
  assert.match(lines.at(-1), /^build by_customer_day: step \d+, 12000\/12000 rows \(100%\), ready$/);
  assert.match(r.out, /built orders: 3 files, 24000 entries/);

  r = ok(skerry('publish'));
  assert.match(r.out, /published version 1/);

  // The CLI's query answers what the API answers.
  const o = await Overlay.open(url, { readOnly: true });
  const where = { customer: 'customer-00042', amount: { gt: 100 } };
  const api = await o.query('orders', { where, columns: ['order_id', 'customer', 'amount'] });
  await o.close();
  assert.ok(api.rows.length > 0);
  r = ok(skerry('query', 'orders', '--where', JSON.stringify(where), '--columns', 'order_id,customer,amount', '--format', 'json', '--stats'));
  assert.deepEqual(JSON.parse(r.out), api.rows);
  assert.match(r.err, /index by_customer_day; files 3: 3 by index/);
  r = ok(skerry('query', 'orders', '--where', '{"order_id": 4321}', '--columns', 'order_id,customer', '--format', 'table'));
  assert.match(r.out, /^order_id\s+customer\n-+\s+-+\n4321\s+customer-\d+\n$/);
  r = ok(skerry('query', 'orders', '--limit', '2', '--columns', 'order_id'));
  assert.equal(JSON.parse(r.out).length, 2);

  r = ok(skerry('stats', '--json'));
  assert.deepEqual(JSON.parse(r.out), [{ table: 'orders', files: 3, rows: 12000, columns: 4, indexes: 'by_id(ready,unique) by_customer_day(ready)' }]);

  r = ok(skerry('verify', 'orders'));
  assert.match(r.out, /orders\.by_id: 3 files, 12000\/12000 entries, 0 missing, 0 dead, 0 mismatched/);

  // A rewrite that keeps size and mtime: refresh --deep finds it, verify exits 3.
  const file = path.join(dir, 'data/part-1.parquet');
  const st = fs.statSync(file);
  const buf = fs.readFileSync(file);
  const at = (v) => { const n = Buffer.alloc(8); n.writeBigInt64LE(BigInt(v)); return buf.indexOf(n); };
  const i = at(4001), j = at(4002);
  assert.ok(i >= 0 && j >= 0);
  const tmp = Buffer.from(buf.subarray(i, i + 8));
  buf.copy(buf, i, j, j + 8);
  tmp.copy(buf, j);
  fs.writeFileSync(file, buf);
  fs.utimesSync(file, st.atime, st.mtime);
  r = skerry('verify', 'orders', 'by_id');
  assert.equal(r.code, 3, `verify: ${r.out}${r.err}`);
  assert.match(r.out, /[1-9]\d* (mismatched|repairs queued)/);
  r = ok(skerry('refresh', '--deep'));
  assert.match(r.out, /orders: 3 checked, 1 changed/);

  // Errors: the code on stderr, exit 1.
  r = skerry('query', 'nosuch');
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_NOT_FOUND: /);
  r = skerry('index', 'create', 'orders', 'by_id', 'order_id');
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_EXISTS: /);
  r = skerry('query', 'orders', '--where', '{not json');
  assert.equal(r.code, 2);

  ok(skerry('index', 'drop', 'orders', 'by_customer_day', '--purge'));
  r = ok(skerry('index', 'list', 'orders', '--json'));
  assert.deepEqual(JSON.parse(r.out).map((x) => x.index), ['by_id']);
  ok(skerry('publish'));
  r = ok(skerry('vacuum', '--json'));
  assert.ok(JSON.parse(r.out).manifests >= 1, r.out);
  // The purge's rewritten bundles left unreferenced just now are young: kept by default,
  // taken with `--grace 0`.
  ok(skerry('publish'));
  r = ok(skerry('vacuum', '--grace', '0', '--json'));
  assert.equal(JSON.parse(r.out).young, 0, r.out);
  r = skerry('vacuum', '--grace', 'soon');
  assert.equal(r.code, 2, r.err);
  assert.match(r.err, /--grace/);
  t.diagnostic(r.out.replace(/\s+/g, ' '));
});

test('build draws a progress bar on a terminal', { skip: !fs.existsSync('/usr/bin/script') && 'no script(1) for a pty' }, () => {
  const url = `file://${dir}/overlay-tty`;
  ok(skerry('register', 'orders', `file://${dir}/data`, '--overlay', url));
  ok(skerry('index', 'create', 'orders', 'by_day', 'day', '--overlay', url));
  // script(1) gives the command a pseudo-terminal.
  const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} build orders --max-entries 3000 --overlay ${url}`;
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /by_day \[[█░]+\] 100% \| 12000\/12000 rows/);
  assert.match(r.stdout, /built orders: 3 files, 12000 entries/);
});

test('bitmap indexes and count: --kind bitmap, a column over the limit fails E_LIMIT, count answers from the index', () => {
  const url = `file://${dir}/bitmap-overlay`;
  const at = ['--overlay', url];
  ok(skerry('register', 'orders', `file://${dir}/data`, ...at));
  let r = ok(skerry('index', 'create', 'orders', 'bm_day', 'day', '--kind', 'bitmap', ...at));
  assert.match(r.out, /^bitmap index orders\.bm_day/);
  // 5,000 customers: over a limit of 100.
  ok(skerry('index', 'create', 'orders', 'bm_customer', 'customer', '--kind', 'bitmap', '--max-cardinality', '100', ...at));
  r = skerry('index', 'create', 'orders', 'bad', 'day', '--kind', 'bloomish', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*unknown index kind/);
  r = skerry('build', 'orders', ...at);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /error E_LIMIT: .*bm_customer.*more than 100 distinct values.*ordered index/);
  r = ok(skerry('index', 'list', '--json', ...at));
  const listed = Object.fromEntries(JSON.parse(r.out).map((i) => [i.index, [i.kind, i.state]]));
  assert.deepEqual(listed, { bm_day: ['bitmap', 'ready'], bm_customer: ['bitmap', 'poisoned'] });
  ok(skerry('publish', ...at));
  // day = 19000 + id % 365 over ids 0..12000.
  const want = Array.from({ length: 12000 }, (_, id) => id).filter((id) => [10, 11, 300].includes(id % 365)).length;
  r = ok(skerry('count', 'orders', '--where', '{"day":{"in":[19010,19011,19300]}}', '--stats', ...at));
  assert.equal(r.out.trim(), String(want));
  assert.match(r.err, /index bm_day \(bitmap\) on day; files 3: 3 by index, 0 scanned/);
  r = ok(skerry('count', 'orders', '--json', ...at));
  assert.deepEqual(JSON.parse(r.out), { count: 12000 });
});

test('fulltext indexes and search: --kind fulltext, BM25 top-k best first with a _score column', () => {
  const url = `file://${dir}/fulltext-overlay`;
  const at = ['--overlay', url];
  ok(skerry('register', 'orders', `file://${dir}/data`, ...at));
  let r = ok(skerry('index', 'create', 'orders', 'customer_text', 'customer', '--kind', 'fulltext', '--tokenizer', 'english', ...at));
  assert.match(r.out, /^fulltext index orders\.customer_text/);
  r = skerry('index', 'create', 'orders', 'bad', 'amount', '--kind', 'fulltext', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*one string column/);
  r = skerry('index', 'create', 'orders', 'bad', 'customer', '--tokenizer', 'english', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*apply to fulltext indexes/);
  ok(skerry('build', 'orders', ...at));
  ok(skerry('publish', ...at));
  // The most frequent customer: "customer-NNNNN" is two terms, every match scores alike, so
  // ties go by file and position.
  const rows = JSON.parse(ok(skerry('query', 'orders', '--columns', 'customer', '--json', ...at)).out);
  const freq = new Map();
  for (const x of rows) if (x.customer !== null) freq.set(x.customer, (freq.get(x.customer) ?? 0) + 1);
  const [customer, n] = [...freq].sort((a, b) => b[1] - a[1])[0];
  assert.ok(n >= 3, `${customer}: ${n}`);
  const num = customer.split('-')[1];
  const all = JSON.parse(ok(skerry('query', 'orders', '--where', JSON.stringify({ customer }), '--columns', 'order_id', '--json', ...at)).out);
  r = ok(skerry('search', 'orders', num, '--k', '2', '--columns', 'order_id,customer', '--json', '--stats', ...at));
  const hits = JSON.parse(r.out);
  assert.deepEqual(hits.map((h) => String(h.order_id)), all.slice(0, 2).map((x) => String(x.order_id)));
  assert.ok(hits.every((h) => h.customer === customer && h._score > 0 && h._score === hits[0]._score));
  assert.match(r.err, new RegExp(`index customer_text; terms ${num}:${n} over ${rows.filter((x) => x.customer !== null).length} documents; files 3: 3 by index, 0 scanned`));
  r = ok(skerry('search', 'orders', `Customer ${num}`, '--phrase', '--k', '50', '--json', ...at));
  assert.equal(JSON.parse(r.out).length, n);
  r = ok(skerry('search', 'orders', `${num} customer`, '--phrase', '--json', ...at));
  assert.equal(JSON.parse(r.out).length, 0);
  r = skerry('search', 'orders', 'x', '--k', 'many', ...at);
  assert.equal(r.code, 2);
});

test('vector indexes and nearest: --kind vector, k rows nearest first with a _distance column, pre-filters, usage errors', () => {
  const url = `file://${dir}/vector-overlay`;
  const at = ['--overlay', url];
  const data = path.join(dir, 'vectors');
  // pyarrow-written: id, emb fixed_size_list<float32>[8], tags, cat, body; NULL and NaN vectors.
  execFileSync('python3', [path.join(path.dirname(fileURLToPath(import.meta.url)), 'vector/make_vectors.py'), data, '2', '300', '8', '3']);
  const rows = JSON.parse(fs.readFileSync(path.join(data, 'rows.json'), 'utf8'));
  ok(skerry('register', 'v', `file://${data}`, ...at));
  let r = ok(skerry('index', 'create', 'v', 'emb_l2', 'emb', '--kind', 'vector', '--metric', 'l2', '--m', '8', '--ef-construction', '40', ...at));
  assert.match(r.out, /^vector index v\.emb_l2/);
  r = skerry('index', 'create', 'v', 'bad', 'id', '--kind', 'vector', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*a vector index covers one fixed_size_list<float32>/);
  r = skerry('index', 'create', 'v', 'bad', 'emb', '--metric', 'cosine', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*metric, m and efConstruction apply to vector indexes/);
  r = skerry('index', 'create', 'v', 'bad', 'emb', '--kind', 'vector', '--metric', 'manhattan', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*manhattan/);
  r = skerry('index', 'create', 'v', 'bad', 'emb', '--kind', 'vector', '--m', '1', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*m 1 is outside 2\.\.=64/);
  ok(skerry('build', 'v', ...at));
  ok(skerry('publish', ...at));
  assert.match(ok(skerry('index', 'list', 'v', ...at)).out, /emb_l2.*vector/);

  // Every live vector, with squared L2 in float64 (the ranking's order; ties are improbable).
  const live = [];
  for (const file of ['f0.parquet', 'f1.parquet']) for (const x of rows[file]) if (x.emb !== null && !x.nan) live.push(x);
  const l2 = (a, b) => a.reduce((s, v, i) => s + (v - b[i]) ** 2, 0);
  const target = rows['f1.parquet'].find((x) => x.emb !== null && !x.nan && x.id % 7 === 3);
  r = ok(skerry('nearest', 'v', JSON.stringify(target.emb), '--k', '4', '--columns', 'id', '--json', '--stats', ...at));
  const hits = JSON.parse(r.out);
  const want = live.map((x) => [l2(target.emb, x.emb), x.id]).sort((a, b) => a[0] - b[0]).slice(0, 4);
  assert.deepEqual(hits.map((h) => Number(h.id)), want.map((w) => w[1]));
  assert.equal(hits[0]._distance, 0);
  for (let i = 1; i < hits.length; i++) assert.ok(hits[i]._distance >= hits[i - 1]._distance, JSON.stringify(hits));
  hits.forEach((h, i) => assert.ok(Math.abs(h._distance - want[i][0]) <= 1e-4 * Math.max(1, want[i][0]), `${h._distance} vs ${want[i][0]}`));
  assert.match(r.err, /^4 rows; index emb_l2 \(l2\); files 2: 2 by index, 0 scanned, 0 pruned, 0 rejected; \d+ codes compared/);
  // A pre-filter: k rows, every one matching, the nearest of those that match.
  r = ok(skerry('nearest', 'v', JSON.stringify(target.emb), '--k', '6', '--where', '{"cat":2}', '--columns', 'id,cat', '--json', ...at));
  const filtered = JSON.parse(r.out);
  const wantF = live.filter((x) => x.cat === 2).map((x) => [l2(target.emb, x.emb), x.id]).sort((a, b) => a[0] - b[0]).slice(0, 6);
  assert.deepEqual(filtered.map((h) => Number(h.id)), wantF.map((w) => w[1]));
  assert.ok(filtered.every((h) => Number(h.cat) === 2));
  // Usage and typed errors.
  r = skerry('nearest', 'v', 'not-json', ...at);
  assert.equal(r.code, 2);
  assert.match(r.err, /the vector must be a JSON array of numbers/);
  r = skerry('nearest', 'v', '{"a":1}', ...at);
  assert.equal(r.code, 2);
  r = skerry('nearest', 'v', JSON.stringify(target.emb), '--k', 'many', ...at);
  assert.equal(r.code, 2);
  r = skerry('nearest', 'v', '[1, 2]', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_INVALID: .*nearest: the query vector has 2 dimensions, column emb has 8/);
  r = skerry('nearest', 'v', JSON.stringify(target.emb), '--index', 'nope', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_NOT_FOUND/);
});

/** The CLI run in directory `d` with no SKERRY_OVERLAY: `(args, stdin) => { code, out, err }`. */
function inDir(d) {
  return (args, input) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { cwd: d, encoding: 'utf8', input, env: { ...process.env, SKERRY_OVERLAY: '' } });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };
}

test('plan, build-bundle and commit: a build split across processes through JSON lines, stale receipts refused', () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-cli-fanout-'));
  const run = inDir(d);
  try {
    fs.mkdirSync(path.join(d, 'data'));
    for (let i = 0; i < 3; i++) fs.writeFileSync(path.join(d, `data/p${i}.parquet`), sampleOrdersParquet(i * 1000, 1000, 250));
    ok(run(['init', `file://${path.join(d, 'overlay')}`]));
    ok(run(['register', 'orders', `file://${path.join(d, 'data')}`]));
    ok(run(['index', 'create', 'orders', 'by_id', 'order_id', '--unique']));
    // Files of 1,000 rows past a pass of 500 entries: each worker builds them index by index.
    const plan = ok(run(['plan', 'orders', '--pass-entries', '500']));
    const tasks = plan.out.trim().split('\n');
    assert.equal(tasks.length, 3);
    assert.ok(tasks.every((t) => JSON.parse(t).passEntries === 500));
    assert.deepEqual(tasks.map((t) => JSON.parse(t).file.path).sort(), ['p0.parquet', 'p1.parquet', 'p2.parquet']);
    // Two "machines": one builds from stdin, one from a file (a worker needs only the URL).
    fs.writeFileSync(path.join(d, 'b.jsonl'), tasks.slice(1).join('\n') + '\n');
    const url = `file://${path.join(d, 'overlay')}`;
    const r1 = ok(run(['build-bundle', '--overlay', url, '-'], tasks[0] + '\n'));
    const r2 = ok(run(['build-bundle', '--overlay', url, 'b.jsonl']));
    const receipts = [...r1.out.trim().split('\n'), ...r2.out.trim().split('\n')];
    assert.equal(receipts.length, 3);
    assert.ok(receipts.every((r) => JSON.parse(r).outcome.kind === 'built'));
    fs.writeFileSync(path.join(d, 'receipts.jsonl'), receipts.join('\n'));
    const c = ok(run(['commit', 'receipts.jsonl']));
    assert.match(c.out, /committed 3 files \(3000 entries/);
    assert.match(ok(run(['index', 'list', 'orders'])).out, /by_id.*ready/);
    ok(run(['publish']));
    assert.match(ok(run(['query', 'orders', '--where', '{"order_id": 2500}', '--columns', 'order_id', '--format', 'json'])).out, /2500/);
    // The same receipts again (a retried commit): reported committed, nothing written.
    const again = ok(run(['commit', '-'], receipts.join('\n')));
    assert.match(again.out, /committed 3 files \(0 entries, 0 bytes\) and 0 runs in 0 transactions; refused 0/);
    // A receipt that does not match its bundle's bytes: refused with the reason.
    const forged = JSON.parse(receipts[0]);
    forged.outcome.sha256 = '0'.repeat(64);
    const bad1 = ok(run(['commit', '-'], JSON.stringify(forged)));
    assert.match(bad1.out, /committed 0 files/);
    assert.match(bad1.out, /refused p0\.parquet: /);
    // Not a task: E_INVALID, exit 1.
    const bad = run(['build-bundle', '--overlay', url, '-'], '{"not":"a task"}\n');
    assert.equal(bad.code, 1);
    assert.match(bad.err, /error E_INVALID: .*buildBundle: not a build task/);
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

test('a compaction too large for its sync is carried by build-bundle workers (decision 78)', () => {
  // make_v3.py's db.v3big: 260,000 rows of two files compacted into one by a `replace` that
  // keeps row ids; under four indexes its carry is past the sync's commit, so the move is
  // recorded and `plan` hands the output's task the record.
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-cli-carry-'));
  const run = inDir(d);
  try {
    execFileSync('python3', [path.join(path.dirname(BIN), '../../tests/iceberg/make_v3.py'), d], {
      stdio: 'pipe', env: { ...process.env, SKERRY_V3_BIG: '1' },
    });
    const snaps = JSON.parse(fs.readFileSync(path.join(d, 'expected_v3.json'), 'utf8'))['db.v3big'].snapshots;
    const url = `file://${path.join(d, 'overlay')}`;
    ok(run(['init', url]));
    ok(run(['mount-iceberg', 'v3', snaps[0].metadata_location]));
    ok(run(['index', 'create', 'v3', 'by_id', 'id', '--unique']));
    ok(run(['index', 'create', 'v3', 'by_tag', 'tag', '--kind', 'bitmap']));
    ok(run(['index', 'create', 'v3', 'by_body', 'body', '--kind', 'fulltext']));
    ok(run(['index', 'create', 'v3', 'by_emb', 'emb', '--kind', 'vector']));
    ok(run(['build', 'v3']));
    const sync = JSON.parse(ok(run(['sync', 'v3', '--metadata', snaps[1].metadata_location, '--json'])).out);
    assert.equal(sync.pending.length, 4, JSON.stringify(sync));
    const tasks = ok(run(['plan', 'v3'])).out.trim().split('\n');
    assert.equal(tasks.length, 1);
    const task = JSON.parse(tasks[0]);
    assert.equal(task.moved?.output, task.file.path, 'the task holds the move record');
    // The output data file out of the worker's reach: it carries, it cannot derive.
    const file = path.join(new URL(task.table.location).pathname, task.file.path);
    fs.renameSync(file, `${file}.away`);
    let receipt;
    try {
      receipt = ok(run(['build-bundle', '--overlay', url, '-'], tasks[0] + '\n')).out;
    } finally {
      fs.renameSync(`${file}.away`, file);
    }
    const outcome = JSON.parse(receipt).outcome;
    assert.deepEqual([outcome.kind, outcome.carried, outcome.entries], ['built', 4, 0]);
    const c = ok(run(['commit', '-'], receipt));
    assert.match(c.out, /committed 1 files \(0 entries, \d+ bytes, 4 blobs carried over a move\)/);
    const v = ok(run(['verify', 'v3']));
    assert.equal(v.out.match(/certified/g)?.length, 4, v.out);
    ok(run(['publish']));
    assert.match(ok(run(['query', 'v3', '--where', '{"id": 130000}', '--columns', 'id', '--format', 'json'])).out, /130000/);
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

test('plan --runs: the table runs written by build-bundle workers, committed after commit --no-runs', () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-cli-runs-'));
  const run = inDir(d);
  try {
    fs.mkdirSync(path.join(d, 'data'));
    for (let i = 0; i < 5; i++) fs.writeFileSync(path.join(d, `data/p${i}.parquet`), sampleOrdersParquet(i * 1000, 1000, 250));
    const url = `file://${path.join(d, 'overlay')}`;
    ok(run(['init', url]));
    ok(run(['register', 'orders', `file://${path.join(d, 'data')}`]));
    ok(run(['index', 'create', 'orders', 'by_customer', 'customer']));
    const tasks = ok(run(['plan', 'orders'])).out;
    const receipts = ok(run(['build-bundle', '--overlay', url, '-'], tasks)).out;
    const c = ok(run(['commit', '--no-runs', '-'], receipts));
    assert.match(c.out, /committed 5 files \(5000 entries, \d+ bytes\) and 0 runs/);
    const runDir = () => fs.readdirSync(path.join(d, 'overlay/bundles', fs.readdirSync(path.join(d, 'overlay/bundles'))[0])).filter((f) => f.startsWith('run-'));
    assert.deepEqual(runDir(), [], 'no run yet');
    // One run task (the index's first run over the five files), written by a worker.
    const runTasks = ok(run(['plan', 'orders', '--runs'])).out.trim().split('\n');
    assert.equal(runTasks.length, 1);
    const t = JSON.parse(runTasks[0]);
    assert.equal(t.kind, 'run');
    assert.equal(t.files.length, 5);
    const runReceipt = ok(run(['build-bundle', '--overlay', url, '-'], runTasks[0] + '\n')).out;
    assert.equal(JSON.parse(runReceipt).kind, 'run');
    assert.equal(runDir().length, 1, 'the worker wrote the run');
    const c2 = ok(run(['commit', '-'], runReceipt));
    assert.match(c2.out, /and 1 runs in/);
    // Nothing is due any more; the same receipt again is refused (the runs moved on).
    assert.equal(ok(run(['plan', 'orders', '--runs'])).out.trim(), '');
    assert.match(ok(run(['commit', '-'], runReceipt)).out, /refused 1[\s\S]*runs changed since/);
    ok(run(['publish']));
    const head = readHead(path.join(d, 'overlay/manifests/HEAD'));
    const manifest = head.manifest ?? head;
    const ix = manifest.tables[0].indexes.find((i) => i.name === 'by_customer');
    assert.equal(ix.run?.files?.length, 5, JSON.stringify(Object.keys(head)));
    assert.equal(ix.run.bundlePath ?? ix.run.bundle_path, t.bundlePath);
    const q = run(['query', 'orders', '--where', '{"customer": "customer-00042"}', '--columns', 'order_id', '--json', '--stats']);
    assert.equal(q.code, 0, q.err);
    assert.ok(JSON.parse(q.out).length > 0);
    assert.match(q.err, /files 5: 5 by index, 0 scanned/);
  } finally {
    fs.rmSync(d, { recursive: true, force: true });
  }
});

test('register on an existing table: --files adds them (indexed in the same commit); without --files E_EXISTS', () => {
  const at = ['--overlay', `file://${dir}/overlay-register`];
  let r = ok(skerry('register', 'orders', `file://${dir}/data`, '--files', 'part-0.parquet', ...at));
  assert.match(r.out, /table orders: 1 files, 4000 rows/);
  ok(skerry('index', 'create', 'orders', 'by_id', 'order_id', '--unique', ...at));
  ok(skerry('build', 'orders', ...at));
  r = ok(skerry('register', 'orders', `file://${dir}/data`, '--files', 'part-1.parquet,part-2.parquet', ...at));
  assert.match(r.out, /table orders: 2 files added, 8000 rows, 8000 index entries/);
  ok(skerry('publish', ...at));
  r = ok(skerry('count', 'orders', '--where', '{"order_id": 9000}', ...at));
  assert.match(r.out, /^1\b/m);
  r = skerry('register', 'orders', `file://${dir}/data`, ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_EXISTS: /);
  r = skerry('register', 'orders', `file://${dir}/data`, '--files', 'part-1.parquet', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /^error E_EXISTS: /);
  r = ok(skerry('register', '--help'));
  assert.match(r.out, /--files adds those files/);
});

test('rewrite: a claim the row ids do not bear out is refused and changes nothing', () => {
  const at = ['--overlay', `file://${dir}/overlay-rewrite`];
  ok(skerry('register', 'orders', `file://${dir}/data`, '--files', 'part-0.parquet', ...at));
  ok(skerry('index', 'create', 'orders', 'by_id', 'order_id', '--unique', ...at));
  ok(skerry('build', 'orders', ...at));
  // part-1.parquet holds other rows and no row-id column: not a rewrite of part-0.
  let r = skerry('rewrite', 'orders', '--removed', 'part-0.parquet', '--added', 'part-1.parquet', ...at);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /^error E_REFUSED: .*no row-id column _row_id/);
  r = skerry('rewrite', 'orders', '--removed', 'part-0.parquet', '--added', 'part-1.parquet', '--row-id-column', 'order_id', ...at);
  assert.equal(r.code, 1, r.out + r.err);
  assert.match(r.err, /^error E_REFUSED: /);
  ok(skerry('publish', ...at));
  r = ok(skerry('count', 'orders', '--where', '{"order_id": {"gte": 0}}', ...at));
  assert.match(r.out, /^4000\b/m, 'part-0 still registered');
  r = skerry('rewrite', 'orders', '--added', 'part-1.parquet', ...at);
  assert.equal(r.code, 1);
  assert.match(r.err, /E_INVALID/);
});
