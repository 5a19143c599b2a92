// A Cloudflare Worker answering Skerry lookups and queries from a published overlay, read
// either over HTTP (`OVERLAY_URL`, `DATA_URL`) or through an R2 binding (`BUCKET`, with the
// overlay under `overlay/` and each table under `data/<table>/`).
//
// `import { OverlayReader } from 'skerry-wasm'` resolves, under wrangler's `workerd`
// condition, to an entry that imports the .wasm statically and initialises it: nothing to
// set up. The readers live at module scope, so later requests are served warm.
import { OverlayReader } from 'skerry-wasm';

const readers = new Map();

/** An R2 bucket (below `prefix`) as a Skerry read source. Each answer names the object's
 * version (`httpEtag`): the reader keeps file metadata between requests and checks every read
 * against it, and as R2's ETags are MD5s it does not fetch dictionary pages it holds again. */
function r2Source(bucket, prefix) {
  return {
    async readRange(path, offset, length) {
      const o = await bucket.get(prefix + path, { range: { offset, length } });
      return o ? { bytes: await o.arrayBuffer(), etag: o.httpEtag } : null; // null = no such object
    },
    async size(path) {
      const o = await bucket.head(prefix + path);
      return o ? { size: o.size, etag: o.httpEtag } : null;
    },
  };
}

async function reader(env, source, tables) {
  const key = `${source}:${tables.join(',')}`;
  if (!readers.has(key)) {
    const open =
      source === 'r2'
        ? OverlayReader.open(r2Source(env.BUCKET, 'overlay/'), {
            tables: Object.fromEntries(tables.map((t) => [t, r2Source(env.BUCKET, `data/${t}/`)])),
          })
        : OverlayReader.open(env.OVERLAY_URL, {
            tables: Object.fromEntries(tables.map((t) => [t, `${env.DATA_URL}/${t}`])),
          });
    // A failed open is not cached: the next request tries again.
    readers.set(key, open.catch((e) => { readers.delete(key); throw e; }));
  }
  return readers.get(key);
}

// JSON with bigints as "123n" (row positions and ids are bigints).
const json = (v, status = 200) =>
  new Response(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? Array.from(x) : x)), {
    status,
    headers: { 'content-type': 'application/json' },
  });

const VERBS = new Set(['lookup', 'lookupMany', 'range', 'nulls', 'locate', 'query']);

export default {
  // POST { source: 'url' | 'r2', tables: ['orders'], calls: [[verb, ...args], …] }
  // → [{ rows } | { error: { code, message } }, …]
  async fetch(request, env) {
    if (request.method !== 'POST') return json({ error: 'POST { source, tables, calls }' }, 405);
    const { source = 'url', tables = [], calls = [] } = await request.json();
    let r;
    try {
      r = await reader(env, source, tables);
    } catch (e) {
      return json({ error: { code: e.code, message: e.message } }, 502);
    }
    const out = [];
    for (const [verb, ...args] of calls) {
      if (!VERBS.has(verb)) {
        out.push({ error: { code: 'E_INVALID', message: `unknown verb ${verb}` } });
        continue;
      }
      try {
        const res = await r[verb](...args);
        out.push({ rows: res.rows, requests: res.stats?.requests, bytes: res.stats?.bytes });
      } catch (e) {
        out.push({ error: { code: e.code, message: e.message } });
      }
    }
    return json(out);
  },
};
