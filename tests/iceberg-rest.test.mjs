// An Iceberg REST catalog from the addon (issue 45): pyiceberg's RestCatalog creates and
// appends through tests/iceberg/rest_catalog_server.py (moto with IAM authentication
// enforced: a key the catalog did not vend, or one it deleted at expiry, is refused); Skerry
// mounts by `{ catalog }`, indexes, queries, follows an append with syncIceberg, and a
// read-only process reads with `catalogs`. Wrong JS types are E_INVALID, a wrong secret
// E_AUTH, and no secret reaches the overlay's files.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { Overlay, BundleBuilder } = require('skerry');
const here = path.dirname(fileURLToPath(import.meta.url));

let server, info, state, dir;

before(async () => {
  state = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rest-'));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rest-overlay-'));
  server = spawn('python3', [path.join(here, 'iceberg/rest_catalog_server.py'), state], {
    env: { ...process.env, CRED_TTL: '3' },
    stdio: ['ignore', 'pipe', fs.openSync(path.join(state, 'server.err'), 'w')],
  });
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve);
    server.once('exit', (c) => reject(new Error(`REST catalog server exited ${c}`)));
  });
  info = JSON.parse(line);
});

after(() => {
  server?.kill();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(state, { recursive: true, force: true });
});

const write = (...args) => JSON.parse(execFileSync('python3', [
  path.join(here, 'iceberg/rest_writer.py'), info.uri, info.s3, info.admin.key, info.admin.secret, ...args,
]).toString()).ids;

const catalog = (credential) => ({ uri: info.uri, namespace: 'db', table: 'events', credential });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function filesUnder(d) {
  return fs.readdirSync(d, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile()).map((e) => path.join(e.parentPath ?? e.path, e.name));
}

test('a REST catalog table is mounted, synced and read with vended credentials', async () => {
  let want = write('create');
  const url = `file://${dir}`;
  const o = await Overlay.open(url);
  for (const bad of [{ catalog: { uri: info.uri, table: 'events' } }, { catalog: catalog(42) }, 42]) {
    await assert.rejects(o.mountIceberg('events', bad), (e) => e.code === 'E_INVALID', JSON.stringify(bad));
  }
  await assert.rejects(o.mountIceberg('events', { catalog: catalog('skerry:nope') }),
    (e) => e.code === 'E_AUTH' && !e.message.includes('nope'));
  await assert.rejects(o.mountIceberg('events', { catalog: { ...catalog('skerry:skerry-secret'), table: 'nope' } }),
    (e) => e.code === 'E_NOT_FOUND');
  await assert.rejects(o.mountIceberg('events', { catalog: { ...catalog('skerry:skerry-secret'), uri: 'file:///etc' } }),
    (e) => e.code === 'E_INVALID');
  await o.mountIceberg('events', { catalog: catalog('skerry:skerry-secret') });
  await o.createIndex('events', 'by_id', ['id'], { unique: true });
  await o.build('events');
  const ids = async (r) => r.rows.map((x) => Number(x.id)).sort((a, b) => a - b);
  const all = { columns: ['id'], limit: 100000 };
  assert.deepEqual(await ids(await o.query('events', all)), want);

  want = write('append', '300', '350');
  await sleep(3500); // every key vended so far has expired and been deleted
  const report = await o.syncIceberg('events');
  assert.equal(report.added.length, 1);
  // Fan-out workers connect with `catalogs` too (a new index: a task per data file).
  await o.createIndex('events', 'by_region', ['region'], { kind: 'bitmap' });
  const tasks = await o.planBuild('events');
  assert.ok(tasks.length >= 1);
  const builder = BundleBuilder.open(url, { catalogs: [catalog('skerry:skerry-secret')] });
  const commit = await o.commitBuild(await Promise.all(tasks.map((t) => builder.buildBundle(t))));
  assert.equal(commit.refused.length, 0, commit.refused.map((r) => r.reason).join());
  assert.deepEqual(await o.planBuild('events'), []);
  const c = await o.count('events', { where: { region: 'eu' } });
  assert.equal(c.count, want.filter((i) => i % 3 === 0).length);
  assert.equal(c.stats.index, 'by_region');
  await o.publish();
  const r = await o.query('events', { where: { id: 349 }, columns: ['id', 'region'] });
  assert.deepEqual(r.rows.map((x) => [Number(x.id), x.region]), [[349, 'us']]);
  assert.equal(r.stats.index, 'by_id');
  assert.deepEqual(await ids(await o.query('events', all)), want);

  // startSync follows the catalog too.
  want = write('append', '350', '355');
  const synced = new Promise((resolve) => o.on('sync', (e) => { if (e.report.added.length) resolve(e); }));
  o.startSync('events', { intervalMs: 200 });
  const ev = await synced;
  o.stopSync('events');
  assert.equal(Number(ev.report.rowsAdded), 5);
  assert.deepEqual(await ids(await o.query('events', all)), want);
  await o.close();

  // A read-only process: its own credentials from `catalogs`, refreshed as they expire.
  const ro = await Overlay.open(url, { readOnly: true, catalogs: [catalog('skerry:skerry-secret')] });
  assert.deepEqual(await ids(await ro.query('events', all)), want);
  await sleep(3500);
  assert.deepEqual(await ids(await ro.query('events', { where: { id: 10 }, columns: ['id'] })), [10]);
  await assert.rejects(Overlay.open(url, { readOnly: true, catalogs: [{ uri: info.uri }] }),
    (e) => e.code === 'E_INVALID');
  // A bearer token instead of client credentials (used as is), with extra headers.
  const tok = await (await fetch(`${info.uri}/v1/oauth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=skerry&client_secret=skerry-secret',
  })).json();
  const byToken = { uri: info.uri, namespace: ['db'], table: 'events', token: tok.access_token, headers: { 'x-trace': 'skerry-test' } };
  const rt = await Overlay.open(url, { readOnly: true, catalogs: [byToken] });
  assert.deepEqual(await ids(await rt.query('events', { where: { id: 11 }, columns: ['id'] })), [11]);
  await assert.rejects(Overlay.open(url, { readOnly: true, catalogs: [{ ...byToken, token: 'forged' }] }),
    (e) => e.code === 'E_AUTH' && !e.message.includes('forged'));

  const log = fs.readFileSync(path.join(state, 'requests.jsonl'), 'utf8').trim().split('\n').map(JSON.parse);
  const ours = log.filter((x) => x.client !== 'writer' && !x.path.startsWith('/_test/'));
  assert.ok(ours.some((x) => x.path.endsWith('/credentials')), 'a credential was refreshed');
  assert.ok(ours.some((x) => x.trace === 'skerry-test'), 'catalog headers are sent');
  for (const x of ours) {
    assert.ok(x.method === 'GET' || (x.method === 'POST' && x.path === '/v1/oauth/tokens'), `${x.method} ${x.path}`);
  }
  for (const f of filesUnder(dir)) {
    const bytes = fs.readFileSync(f);
    for (const secret of ['skerry-secret', 'writer-secret', info.admin.secret]) {
      assert.ok(!bytes.includes(secret), `${f} holds a secret`);
    }
  }
});

test('the CLI mounts and syncs a catalog table, its secret from the environment only', () => {
  const BIN = path.join(here, '../bindings-node/bin/skerry.js');
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-rest-cli-'));
  const cli = (env, ...args) => spawnSync(process.execPath, [BIN, ...args], {
    cwd, encoding: 'utf8', env: { ...process.env, SKERRY_OVERLAY: '', SKERRY_CATALOG_CREDENTIAL: '', ...env },
  });
  const secret = { SKERRY_CATALOG_CREDENTIAL: 'skerry:skerry-secret' };
  try {
    assert.equal(cli({}, 'init', `file://${path.join(cwd, 'overlay')}`).status, 0);
    const m = cli(secret, 'mount-iceberg', 'ev', '--catalog', info.uri, '--namespace', 'db', '--catalog-table', 'events', '--json');
    assert.equal(m.status, 0, m.stderr);
    const config = fs.readFileSync(path.join(cwd, 'skerry.json'), 'utf8');
    assert.deepEqual(JSON.parse(config).catalogs, [{ uri: info.uri, namespace: 'db', table: 'events' }]);
    assert.ok(!config.includes('skerry-secret'));
    const rows = Number(JSON.parse(m.stdout).rows);
    write('append', '360', '370');
    const s = cli(secret, 'sync', 'ev', '--json');
    assert.equal(s.status, 0, s.stderr);
    assert.equal(Number(JSON.parse(s.stdout).rowsAdded), 10);
    // Without the secret: refused, typed, exit 1.
    write('append', '370', '380');
    const refused = cli({}, 'sync', 'ev');
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /E_AUTH/);
    const bad = cli(secret, 'mount-iceberg', 'ev2', '--catalog', info.uri);
    assert.equal(bad.status, 2, bad.stderr);
    assert.ok(rows > 0);
  } finally {
    fs.rmSync(cwd, { recursive: true, force: true });
  }
});

test('the shipped addon keeps its overlay on s3:// (the s3 feature is in what ships)', async () => {
  const storage = {
    aws_endpoint: info.s3, aws_allow_http: 'true', aws_region: 'us-east-1',
    aws_access_key_id: info.admin.key, aws_secret_access_key: info.admin.secret,
  };
  const o = await Overlay.open('s3://lake/skerry-overlay', { storage });
  await o.mountIceberg('events', { catalog: catalog('skerry:skerry-secret') });
  await o.createIndex('events', 'by_id', ['id'], { unique: true });
  await o.build('events');
  await o.publish();
  await o.close();
  const ro = await Overlay.open('s3://lake/skerry-overlay', { storage, readOnly: true, catalogs: [catalog('skerry:skerry-secret')] });
  const r = await ro.query('events', { where: { id: 7n }, columns: ['id', 'region'] });
  assert.deepEqual(r.rows.map((x) => [Number(x.id), x.region]), [[7, 'us']]);
  assert.equal(r.stats.index, 'by_id');
  // A key S3 does not know (the admin key's signature is not checked by the test server).
  await assert.rejects(Overlay.open('s3://lake/skerry-overlay', { storage: { ...storage, aws_access_key_id: 'AKIANOSUCHKEY0000000' }, readOnly: true }),
    (e) => e.code === 'E_AUTH' && !e.retryable, 'a refused key is E_AUTH');
});
