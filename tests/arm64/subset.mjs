// The conformance subset an addon build must answer identically on every platform (issue 45):
// run by tests/arm64.test.mjs with the x64 addon in Node, and with the linux-arm64-gnu addon in
// an arm64 Node under qemu-user, on the same pyarrow-written files. Prints one JSON document:
// per case the rows (bigints as strings), the Arrow IPC bytes' SHA-256, scores or distances,
// refs — or the error's code, retryable flag and message. Timing stats are left out.
//
//   node tests/arm64/subset.mjs DATA_DIR OVERLAY_DIR
// (the addon: `require('skerry')`, or the file NAPI_RS_NATIVE_LIBRARY_PATH names)
import crypto from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const { Overlay, writeParquet } = require(path.join(here, '../../bindings-node/lib/index.js'));
const [data, dir] = process.argv.slice(2);

const plain = (v) => JSON.parse(JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : x)));
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const out = { arch: process.arch, cases: {} };

async function answer(name, fn) {
  try {
    const r = await fn();
    const c = {};
    if (r && typeof r === 'object') {
      for (const k of ['rows', 'refs', 'scores', 'distances', 'count', 'positions', 'found']) if (k in r) c[k] = plain(r[k]);
      if (r.ipc) c.ipc = sha(r.ipc);
      if (r.stats) c.index = r.stats.index ?? null;
      if (Buffer.isBuffer(r)) c.bytes = sha(r);
    } else {
      c.value = plain(r);
    }
    out.cases[name] = c;
  } catch (e) {
    out.cases[name] = { code: e.code ?? null, retryable: e.retryable ?? null, message: e.message };
  }
}

const o = await Overlay.open(`file://${dir}`);
await o.registerParquetTable('t', `file://${data}`, { files: ['f0.parquet', 'f1.parquet', 'f2.parquet'] });
await o.createIndex('t', 'by_id', ['id'], { unique: true });
await o.createIndex('t', 'by_cat', ['cat'], { kind: 'bitmap' });
await o.createIndex('t', 'id_bloom', ['id'], { kind: 'bloom' });
await o.createIndex('t', 'body_text', ['body'], { kind: 'fulltext' });
await o.createIndex('t', 'emb_l2', ['emb'], { kind: 'vector', metric: 'l2' });
await o.build('t');
await o.publish();

await answer('point', () => o.query('t', { where: { id: 100007n }, columns: ['id', 'cat', 'body'] }));
await answer('range', () => o.query('t', { where: { id: { gte: 5n, lt: 40n } }, columns: ['id', 'cat'] }));
await answer('bitmap', () => o.query('t', { where: { cat: 3n }, columns: ['id'], limit: 50 }));
await answer('count', () => o.count('t', { where: { cat: 2n } }));
await answer('lookup', () => o.lookup('t', 'by_id', [200005n]));
await answer('search', () => o.search('t', { query: 'harbor stone', k: 10, columns: ['id'] }));
await answer('phrase', () => o.search('t', { query: '"quiet river"', k: 10, columns: [] }));
await answer('nearest', () => o.nearest('t', { vector: Array.from({ length: 8 }, (_, i) => (i % 3) - 1), k: 7, column: 'emb', columns: ['id'] }));
await answer('filtered nearest', () => o.nearest('t', { vector: Array.from({ length: 8 }, () => 0.5), k: 5, column: 'emb', where: { cat: 1n }, columns: ['id', 'cat'] }));
await answer('writeParquet', () => writeParquet([{ name: 'a', type: 'int64' }, { name: 's', type: 'string' }], [[1n, 'x'], [null, 'ü']]));
// Error paths: the same code, retryable flag and message.
await answer('unknown table', () => o.query('nope', { where: { id: 1n } }));
await answer('unknown column', () => o.query('t', { where: { nope: 1n } }));
await answer('bad kind', () => o.createIndex('t', 'bad', ['id'], { kind: 'hash' }));
await answer('bad vector', () => o.nearest('t', { vector: [1, 2], k: 3, column: 'emb' }));
await answer('bad url', () => o.registerParquetTable('u', 'ftp://x/y'));
await answer('wrong type', () => o.query('t', { where: { id: 'seven' } }));
await answer('verify', () => o.verify('t', 'by_id').then((r) => ({ found: r.certified })));
await o.close();
process.stdout.write(JSON.stringify(out));
