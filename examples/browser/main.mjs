// The browser example: `init()` loads the wasm next to the module, then one reader (kept for
// the page's lifetime) answers lookups and queries with HTTP range reads.
import init, { OverlayReader } from 'skerry-wasm';

const params = new URLSearchParams(location.search);
const overlayUrl = params.get('overlay');
const dataUrl = params.get('data');
const out = document.getElementById('out');

await init();

const readers = new Map();
/** A reader of `tables` (their data under `data/<table>`), opened once. */
function reader(tables) {
  const key = tables.join(',');
  if (!readers.has(key)) {
    readers.set(key, OverlayReader.open(overlayUrl, {
      tables: Object.fromEntries(tables.map((t) => [t, `${dataUrl}/${t}`])),
    }));
  }
  return readers.get(key);
}

const plain = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? Array.from(x) : x)));

/** Runs `[verb, ...args]` calls; what the test harness (and the form) use. */
async function run(tables, calls) {
  const r = await reader(tables);
  const results = [];
  for (const [verb, ...args] of calls) {
    try {
      const res = await r[verb](...args);
      results.push(plain({ rows: res.rows, requests: res.stats?.requests }));
    } catch (e) {
      results.push({ error: { code: e.code, message: e.message } });
    }
  }
  return results;
}
window.skerryExample = { run, OverlayReader };

document.getElementById('ask').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const customer = new FormData(ev.target).get('customer');
  const [res] = await run(['orders'], [['query', 'orders', { where: { customer }, columns: ['order_id', 'amount'] }]]);
  out.textContent = JSON.stringify(res, null, 2);
});
out.textContent = overlayUrl ? 'ready' : 'pass ?overlay=…&data=… in the URL';
window.skerryReady = true;
