// The example Worker (examples/worker) bundled as `wrangler deploy` would upload it — the
// package's `workerd` entry with its .wasm module — and the miniflare modules that run it.
// Shared by tests/runtimes.test.mjs and bench/worker.mjs.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const repo = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Bundles the example Worker into `dist`; returns its miniflare `modules` and the wasm file. */
export function bundleExampleWorker(dist) {
  execFileSync(path.join(repo, 'node_modules/.bin/wrangler'), ['deploy', '--dry-run', '--config', path.join(repo, 'examples/worker/wrangler.toml'), '--outdir', dist], {
    cwd: repo,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1', NO_COLOR: '1' },
    stdio: 'pipe',
  });
  const wasm = fs.readdirSync(dist).filter((f) => f.endsWith('.wasm'));
  if (wasm.length !== 1) throw new Error(`bundle: ${fs.readdirSync(dist)}`);
  return {
    wasm: path.join(dist, wasm[0]),
    modules: [
      { type: 'ESModule', path: path.join(dist, 'worker.js') },
      { type: 'CompiledWasm', path: path.join(dist, wasm[0]) },
    ],
  };
}
