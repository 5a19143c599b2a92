// `manifests/HEAD` as a test reads it: plain JSON, or — past 16 KiB — zlib-compressed JSON
// (decision 73, `docs/manifest.md`).
import fs from 'node:fs';
import zlib from 'node:zlib';

/** The parsed `HEAD` object at `file`, inflated when compressed. */
export function readHead(file) {
  const bytes = fs.readFileSync(file);
  const json = bytes.toString('latin1').trimStart().startsWith('{') ? bytes : zlib.inflateSync(bytes);
  return JSON.parse(json.toString('utf8'));
}
