// What users install: the `npm pack` tarballs of `skerry`, its platform package and
// `skerry-wasm`, installed into a fresh app and used from CommonJS, ES modules and strict
// TypeScript (`nodenext`), plus the CLI from the installed package; the shipped addon is
// stripped and the wasm is at most 1.5 MB gzipped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const PLATFORM = 'linux-x64-gnu';
const PLATFORMS = ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc'];

function packed(dir) {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: path.join(root, dir), encoding: 'utf8' });
  return JSON.parse(out)[0].files.map((f) => f.path);
}

test('skerry-wasm packs its Node and web builds, the runtime entries, README and LICENSE', () => {
  const files = packed('bindings-wasm');
  for (const f of ['pkg/node/skerry_wasm.js', 'pkg/node/skerry_wasm_bg.wasm', 'pkg/node/skerry_wasm.d.ts', 'pkg/web/skerry_wasm.js', 'pkg/web/skerry_wasm_bg.wasm', 'pkg/web/package.json', 'web.mjs', 'web.d.mts', 'worker.mjs', 'worker.d.mts', 'README.md', 'LICENSE']) {
    assert.ok(files.includes(f), `${f} missing from ${JSON.stringify(files)}`);
  }
  for (const side of ['node', 'web']) {
    assert.ok(files.some((f) => f.startsWith(`pkg/${side}/snippets/`) && f.endsWith('.js')), `${side} snippets missing`);
  }
  // Workers bundle a .wasm import only when the specifier ends in .wasm.
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'bindings-wasm/package.json'), 'utf8'));
  assert.ok(Object.keys(pkg.exports).some((k) => k.endsWith('.wasm')));
  assert.ok(pkg.exports['.'].workerd && pkg.exports['.'].browser && pkg.exports['.'].node);
});

test('skerry packs the facade, the loader, the CLI, types, README and LICENSE — the addon ships per platform', () => {
  const files = packed('bindings-node');
  for (const f of ['lib/index.js', 'lib/index.d.ts', 'index.js', 'index.d.ts', 'bin/skerry.js', 'README.md', 'LICENSE']) assert.ok(files.includes(f), `${f} missing`);
  assert.ok(!files.some((f) => f.endsWith('.node')), 'the addon belongs in skerry-<platform>');
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'bindings-node/package.json'), 'utf8'));
  // Declared at pack time only (decision 29): the workspace's `npm ci` needs a lock file
  // without packages the registry does not have yet.
  assert.equal(pkg.optionalDependencies, undefined);
  for (const t of PLATFORMS) {
    const sub = JSON.parse(fs.readFileSync(path.join(root, `bindings-node/npm/${t}/package.json`), 'utf8'));
    assert.equal(sub.name, `skerry-${t}`);
    assert.equal(sub.version, pkg.version);
    assert.ok(sub.os && sub.cpu, `${t}: os/cpu`);
  }
  assert.deepEqual(packed(`bindings-node/npm/${PLATFORM}`).sort(), ['LICENSE', 'README.md', `skerry.${PLATFORM}.node`, 'package.json'].sort());
});

test('the shipped addon is stripped', () => {
  const file = path.join(root, `bindings-node/npm/${PLATFORM}/skerry.${PLATFORM}.node`);
  const sections = execFileSync('readelf', ['-S', '-W', file], { encoding: 'utf8' });
  assert.ok(!/\.symtab\b/.test(sections), 'a symbol table');
  assert.ok(!/\.debug_/.test(sections), 'debug info');
});

test('the wasm is at most 1.5 MB gzipped (release build through wasm-opt -Oz)', (t) => {
  const wasm = fs.readFileSync(path.join(root, 'bindings-wasm/pkg/web/skerry_wasm_bg.wasm'));
  const gz = zlib.gzipSync(wasm, { level: 9 }).length;
  t.diagnostic(`skerry_wasm_bg.wasm: ${wasm.length} bytes, ${gz} gzipped`);
  assert.ok(gz <= 1.5e6, `${gz} bytes gzipped (build with scripts/build.sh wasm --release)`);
  // No name section left (a megabyte of function names before wasm-opt).
  const mod = new WebAssembly.Module(wasm);
  assert.deepEqual(WebAssembly.Module.customSections(mod, 'name'), []);
});

let app;

before(() => {
  app = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-app-'));
});
after(() => {
  if (app) fs.rmSync(app, { recursive: true, force: true });
});

function npmPack(dir) {
  // With scripts: skerry's prepack declares the platform packages (postpack restores).
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', app], { cwd: path.join(root, dir), encoding: 'utf8' });
  return path.join(app, JSON.parse(out)[0].filename);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: app, encoding: 'utf8', timeout: 300_000, ...opts });
  return r;
}

test('the tarballs install into a fresh app and work from CommonJS, ESM, TypeScript and the CLI', async (t) => {
  const skerry = npmPack('bindings-node');
  const addon = npmPack(`bindings-node/npm/${PLATFORM}`);
  const wasm = npmPack('bindings-wasm');
  const examples = JSON.parse(fs.readFileSync(path.join(root, 'examples/package.json'), 'utf8'));
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
    name: 'fresh-app',
    private: true,
    dependencies: { skerry: `file:${skerry}`, 'skerry-wasm': `file:${wasm}` },
    devDependencies: { typescript: examples.devDependencies.typescript, '@types/node': examples.devDependencies['@types/node'] },
    // The platform package comes from its tarball here (from the registry once published).
    overrides: { [`skerry-${PLATFORM}`]: `file:${addon}` },
  }, null, 2));
  const inst = run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error']);
  assert.equal(inst.status, 0, `npm install: ${inst.stderr}`);
  assert.ok(fs.existsSync(path.join(app, `node_modules/skerry-${PLATFORM}/skerry.${PLATFORM}.node`)), 'the platform package was not installed');
  const installed = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/skerry/package.json'), 'utf8'));
  for (const t of PLATFORMS) assert.equal(installed.optionalDependencies?.[`skerry-${t}`], installed.version, `skerry-${t} not declared in the tarball`);
  // The other platforms' packages are not installed here (os/cpu, or not on the registry).
  for (const t of PLATFORMS.filter((x) => x !== PLATFORM)) assert.ok(!fs.existsSync(path.join(app, `node_modules/skerry-${t}`)), t);
  assert.equal(JSON.parse(fs.readFileSync(path.join(root, 'bindings-node/package.json'), 'utf8')).optionalDependencies, undefined, 'postpack restored package.json');
  // Nothing of the workspace leaks in: the packages resolve inside the app.
  assert.ok(fs.realpathSync(path.join(app, 'node_modules/skerry')).startsWith(fs.realpathSync(app)));

  // Sample data, written by the installed package.
  const body = (mod) => `
const fs = require('node:fs');
const path = require('node:path');
async function main({ Overlay, sampleOrdersParquet }, { OverlayReader }, dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'data/part-0.parquet'), sampleOrdersParquet(0, 3000, 1000, 'snappy'));
  const o = await Overlay.open('file://' + path.join(dir, 'overlay'));
  await o.registerParquetTable('orders', 'file://' + path.join(dir, 'data'));
  await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await o.build('orders');
  await o.publish();
  const native = await o.query('orders', { where: { order_id: 1234 }, columns: ['order_id', 'customer'] });
  await o.close();
  const file = (p) => path.join(dir, p.startsWith('data/') ? '' : 'overlay', p);
  const source = {
    readRange: async (p, off, len) => { const fd = fs.openSync(file(p), 'r'); const b = Buffer.alloc(len); fs.readSync(fd, b, 0, len, off); fs.closeSync(fd); return b.buffer.slice(b.byteOffset, b.byteOffset + len); },
    size: async (p) => (fs.existsSync(file(p)) ? fs.statSync(file(p)).size : null),
  };
  const r = await OverlayReader.open(source, { tables: { orders: 'data' } });
  const wasm = await r.query('orders', { where: { order_id: 1234 }, columns: ['order_id', 'customer'] });
  console.log(JSON.stringify({ mod: '${mod}', native: native.rows, wasm: wasm.rows }));
}
`;
  fs.writeFileSync(path.join(app, 'cjs.cjs'), `${body('cjs')}\nmain(require('skerry'), require('skerry-wasm'), path.join(__dirname, 'cjs-data')).catch((e) => { console.error(e); process.exit(1); });\n`);
  fs.writeFileSync(path.join(app, 'esm.mjs'), `import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\n${body('esm').replace("const fs = require('node:fs');\nconst path = require('node:path');", "import fs from 'node:fs';\nimport path from 'node:path';")}\nimport * as skerry from 'skerry';\nimport { OverlayReader } from 'skerry-wasm';\nawait main(skerry, { OverlayReader }, path.join(import.meta.dirname, 'esm-data'));\n`);
  for (const f of ['cjs.cjs', 'esm.mjs']) {
    const r = run('node', [f]);
    assert.equal(r.status, 0, `${f}: ${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1));
    assert.deepEqual(out.native, [{ order_id: 1234, customer: out.native[0].customer }]);
    assert.deepEqual(out.wasm, out.native, `${f}: wasm and addon differ`);
    t.diagnostic(`${f}: ${JSON.stringify(out.native)}`);
  }

  // Strict TypeScript with nodenext, against the installed declarations; the README's calls.
  fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true, types: ['node'], lib: ['es2022'] },
    files: ['check.mts', 'check.cts'],
  }));
  // A browser project: the DOM lib, no Node types.
  fs.writeFileSync(path.join(app, 'tsconfig.web.json'), JSON.stringify({
    compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true, types: [], lib: ['es2022', 'dom'] },
    files: ['web.mts'],
  }));
  fs.writeFileSync(path.join(app, 'check.mts'), `
import { Overlay, type LookupResult, type QueryResult, type ErrorCode, type SkerryError } from 'skerry';
import { OverlayReader, type ReadSource, type ReaderOptions } from 'skerry-wasm';
const o = await Overlay.open('memory://');
const tables = await o.listTables();
const n: number = tables.length;
const q: QueryResult = await o.query('orders', { where: { order_id: 1 }, columns: ['order_id'] });
const id: bigint = q.refs[0].position;
const source: ReadSource = { readRange: async (p, off, len) => new ArrayBuffer(len), size: async () => 0 };
const versioned: ReadSource = { readRange: async (p, off, len) => ({ bytes: new Uint8Array(len), etag: '"e"' }), size: async () => ({ size: 0, etag: '"e"' }) };
const options: ReaderOptions = { tables: { orders: source, versioned, other: 'https://x/data' }, fetch: { credentials: 'include', headers: { a: 'b' } }, timeoutMs: 10 };
const r = await OverlayReader.open(source);
const r2 = await OverlayReader.open('https://x/overlay', options);
const l: LookupResult = await r.lookup('orders', 'by_id', 1);
const pos: bigint = l.rows[0].position;
await r.range('orders', 'by_id', { key: 1 }, { key: 2 });
await r.nulls('orders', 'by_id', [null]);
await r2.query('orders');
try { await r.lookup('orders', 'x', 1); } catch (e) { const c: ErrorCode = (e as SkerryError).code; void c; }
const served: number = r.io().overlay.requests + r.io().data.bytes;
const pinned: number = await r2.refresh();
void n; void id; void pos; void served; void pinned;
`);
  fs.writeFileSync(path.join(app, 'check.cts'), `
import skerry = require('skerry');
import wasm = require('skerry-wasm');
async function f(): Promise<number> {
  const o = await skerry.Overlay.open('memory://');
  const r = await wasm.OverlayReader.open('https://x/overlay');
  const res = await r.lookup('t', 'i', 'k');
  return res.rows.length + (await o.listIndexes('t')).length;
}
void f;
`);
  fs.writeFileSync(path.join(app, 'web.mts'), `
import init, { initSync, OverlayReader } from 'skerry-wasm/web';
await init();
initSync({ module: new Uint8Array(0) });
const r = await OverlayReader.open('https://x/overlay', { fetch: { cache: 'no-store' } });
const hits: number = (await r.lookupMany('t', 'i', ['a', 'b'])).rows.length;
void hits;
`);
  const tsc = run(path.join(app, 'node_modules/.bin/tsc'), ['-p', '.']);
  assert.equal(tsc.status, 0, `tsc: ${tsc.stdout}${tsc.stderr}`);
  const tscWeb = run(path.join(app, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.web.json']);
  assert.equal(tscWeb.status, 0, `tsc (web): ${tscWeb.stdout}${tscWeb.stderr}`);
  // The checker is not asleep: a wrong type is an error.
  fs.writeFileSync(path.join(app, 'bad.mts'), `import { OverlayReader } from 'skerry-wasm';\nconst r = await OverlayReader.open('u');\nconst s: string = (await r.lookup('t', 'i', 1)).rows;\nvoid s;\n`);
  const bad = run(path.join(app, 'node_modules/.bin/tsc'), ['--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--noEmit', '--types', 'node', 'bad.mts']);
  assert.notEqual(bad.status, 0, 'tsc accepted a wrong type');

  // The CLI from the installed package.
  const help = run(path.join(app, 'node_modules/.bin/skerry'), ['--help']);
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /Usage: skerry <command>/);
});
