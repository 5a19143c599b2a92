// Helpers of the Iceberg tests in Node.
import fs from 'node:fs';
import path from 'node:path';

/** Every file under `dir` with its size and mtime (to prove nothing upstream changed). */
export function snapshotTree(dir) {
  const out = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = path.join(e.parentPath ?? e.path, e.name);
    const st = fs.statSync(p);
    out[p] = `${st.size}:${st.mtimeMs}`;
  }
  return out;
}

/**
 * The Iceberg tests' fixture: runs `script` (tests/iceberg/…) into a fresh temp dir, reads its
 * `expectedFile`, opens an overlay at `<root>/overlay` with the addon and serves the dir over
 * HTTP with range support. `close()` undoes all of it.
 */
export async function icebergFixture(prefix, script, expectedFile) {
  const { execFileSync } = await import('node:child_process');
  const os = await import('node:os');
  const { createRequire } = await import('node:module');
  const { startRangeServer } = await import('../../scripts/range-server.mjs');
  const { Overlay } = createRequire(import.meta.url)('skerry');
  const here = path.dirname(new URL(import.meta.url).pathname);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  execFileSync('python3', [path.join(here, script), root], { stdio: 'pipe' });
  const expected = JSON.parse(fs.readFileSync(path.join(root, expectedFile), 'utf8'));
  const overlay = await Overlay.open(`file://${root}/overlay`);
  const server = await startRangeServer(root);
  return {
    root, expected, overlay, server,
    async close() {
      await overlay.close();
      await server.close();
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
