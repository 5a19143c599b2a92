// Rewrites a data file in place the way an out-of-band writer can hide it: the first
// occurrences of two little-endian int64 values swapped (same inode, same size), the
// modification time restored — a time-and-size ETag does not change, a content hash does.
import assert from 'node:assert/strict';
import fs from 'node:fs';

export function swapInPlace(file, a, b) {
  const st = fs.statSync(file);
  const buf = fs.readFileSync(file);
  const at = (v) => { const n = Buffer.alloc(8); n.writeBigInt64LE(BigInt(v)); return buf.indexOf(n); };
  const i = at(a), j = at(b);
  assert.ok(i >= 0 && j >= 0);
  const tmp = Buffer.from(buf.subarray(i, i + 8));
  buf.copy(buf, i, j, j + 8);
  tmp.copy(buf, j);
  const fd = fs.openSync(file, 'r+');
  fs.writeSync(fd, buf, 0, buf.length, 0);
  fs.closeSync(fd);
  fs.utimesSync(file, Math.round(st.atimeMs) / 1000, Math.round(st.mtimeMs) / 1000);
}
