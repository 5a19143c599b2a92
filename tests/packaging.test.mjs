// What `npm pack` puts in the two tarballs: every file their entry points load (wasm-pack's
// own `*` .gitignore once left skerry-wasm's tarball with nothing but package.json).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

function packed(dir) {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: path.join(root, dir), encoding: 'utf8' });
  return JSON.parse(out)[0].files.map((f) => f.path);
}

test('skerry-wasm packs its Node and web builds, wasm and JS snippets', () => {
  const files = packed('bindings-wasm');
  for (const f of ['pkg/node/skerry_wasm.js', 'pkg/node/skerry_wasm_bg.wasm', 'pkg/node/skerry_wasm.d.ts', 'pkg/web/skerry_wasm.js', 'pkg/web/skerry_wasm_bg.wasm']) {
    assert.ok(files.includes(f), `${f} missing from ${JSON.stringify(files)}`);
  }
  for (const side of ['node', 'web']) {
    assert.ok(files.some((f) => f.startsWith(`pkg/${side}/snippets/`) && f.endsWith('.js')), `${side} snippets missing`);
  }
});

test('skerry packs the facade, the loader, its types and the addon', () => {
  const files = packed('bindings-node');
  for (const f of ['lib/index.js', 'lib/index.d.ts', 'index.js', 'index.d.ts']) assert.ok(files.includes(f), `${f} missing`);
  assert.ok(files.some((f) => f.endsWith('.node')), 'no .node addon');
});
