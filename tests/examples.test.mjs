// The examples run in CI: each must exit 0 and say what it promises.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

test('examples/quickstart.mjs indexes, publishes, and the addon and wasm agree', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-qs-'));
  try {
    const out = execFileSync(process.execPath, [new URL('../examples/quickstart.mjs', import.meta.url).pathname, dir], { encoding: 'utf8' });
    assert.match(out, /150000 rows/);
    assert.match(out, /published\s+manifest v1/);
    assert.equal((out.match(/\[same;/g) || []).length, 3, out);
    assert.match(out, /index by_customer on \[customer\], residual \[amount\]/);
    assert.match(out, /\(same rows;/);
    assert.match(out, /The addon and wasm agree/);
    assert.ok(fs.existsSync(path.join(dir, 'overlay/manifests/HEAD')));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('examples/admin.ts type-checks against the published declarations and runs', () => {
  const root = new URL('..', import.meta.url).pathname;
  const tsc = path.join(root, 'node_modules/.bin/tsc');
  // Type errors fail here (noEmitOnError).
  execFileSync(tsc, ['-p', path.join(root, 'examples/tsconfig.json')], { encoding: 'utf8' });
  const out = execFileSync(process.execPath, [path.join(root, 'examples/dist/admin.mjs')], { encoding: 'utf8' });
  assert.match(out, /registered orders with 10000 rows/);
  assert.match(out, /index by_id is building/);
  assert.match(out, /published v1/);
  assert.match(out, /p0\.parquet@4242/);
  assert.match(out, /query: 5 rows via by_id, first order 4240/);
});

test('examples/fanout-bullmq/main.mjs builds through BullMQ workers and one committer', () => {
  const out = execFileSync(process.execPath, [new URL('../examples/fanout-bullmq/main.mjs', import.meta.url).pathname, '--files', '12', '--workers', '3'], { encoding: 'utf8' });
  assert.match(out, /^12 tasks, 3 workers: plan \d+ ms, build \d+ ms, commit \d+ ms$/m);
  assert.match(out, /committed 12 files \(48000 entries, 1 transactions\), refused 0/);
  // The non-unique index's run, written by a worker from a run task.
  assert.match(out, /^1 run tasks written by the workers in \d+ ms: committed 1 runs, refused 0$/m);
  assert.match(out, /by_id: ready/);
  assert.match(out, /by_customer: ready/);
  assert.match(out, /order 23993: \[\{"file":"part-0011\.parquet","position":1993\}\]/);
});
