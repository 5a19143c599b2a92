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
