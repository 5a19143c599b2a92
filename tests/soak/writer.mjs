// The soak's writer process (tests/soak/soak.mjs): registers the pool's files one event at a
// time (with deletes, see oracle.mjs), builds, publishes, vacuums every minute, and keeps
// `startSync` following the Iceberg table — all under `SKERRY_FAULTS`. The orchestrator
// SIGKILLs it at random and starts it again; it then resumes from what the catalog holds.
//
//   node tests/soak/writer.mjs ROOT POOL_FILES
//
// With SOAK_TRACE=1 each verb is written to stderr as it starts (the soak keeps the writer's
// stderr in ROOT/writer.log).
//
// stdout: one JSON line per event ({type:'ack', n, version} after each publish, {type:'start',
// n} when it opened the catalog) and a final {type:'final', …} on SIGTERM.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { deletedPositions } from './oracle.mjs';

const require = createRequire(import.meta.url);
const { Overlay, faultsInjected } = require('skerry');

const [root, poolFiles] = [process.argv[2], Number(process.argv[3])];
const dataDir = path.join(root, 'data/t');
const names = fs.readdirSync(dataDir).filter((f) => f.endsWith('.parquet')).sort().slice(0, poolFiles);
const rows = JSON.parse(fs.readFileSync(path.join(dataDir, 'pool.json'), 'utf8'))[names[0]].id.length;
const say = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
const stats = { events: 0, publishes: 0, builds: 0, vacuums: 0, syncs: 0, retries: {}, failures: [], vacuumed: { manifests: 0, artifacts: 0, bytes: 0 } };
let stopping = false;
// At once, before any await: a SIGTERM during startup (the soak's end right after a restart)
// must still end with the final report, not the signal's default exit.
process.on('SIGTERM', () => { stopping = true; });

/** Runs `f` until it succeeds; every failure must be a typed Error (counted by code). */
async function retry(what, f) {
  if (process.env.SOAK_TRACE) process.stderr.write(`${new Date().toISOString()} ${what}\n`);
  for (let attempt = 0; ; attempt++) {
    try {
      return await f();
    } catch (e) {
      if (!(e instanceof Error) || typeof e.code !== 'string') {
        stats.failures.push(`${what}: untyped ${e}`);
        throw e;
      }
      stats.retries[e.code] = (stats.retries[e.code] ?? 0) + 1;
      if (!e.retryable) stats.failures.push(`${what}: ${e.code} (not retryable) ${e.message}`);
      if (attempt > 200) throw e;
      await new Promise((r) => setTimeout(r, 50 + 10 * Math.min(attempt, 20)));
    }
  }
}

async function tryCreate(overlay, table, name, cols, options) {
  await retry(`createIndex ${name}`, async () => {
    try {
      await overlay.createIndex(table, name, cols, options);
    } catch (e) {
      if (e.code !== 'E_EXISTS') throw e;
    }
  });
}

function newestMetadata() {
  const dir = path.join(root, 'warehouse/db/ice/metadata');
  const m = fs.readdirSync(dir).filter((f) => f.endsWith('.metadata.json')).sort();
  return `file://${dir}/${m[m.length - 1]}`;
}

const overlay = await retry('open', () => Overlay.open(`file://${root}/overlay`));
let tables = await retry('listTables', () => overlay.listTables());
if (!tables.some((t) => t.name === 't')) {
  await retry('register', async () => {
    try {
      await overlay.registerParquetTable('t', `file://${dataDir}`, { files: [names[0]] });
    } catch (e) {
      if (e.code !== 'E_EXISTS') throw e;
    }
  });
}
await tryCreate(overlay, 't', 'by_id', ['id'], { unique: true });
await tryCreate(overlay, 't', 'by_cat', ['cat'], { kind: 'bitmap' });
await tryCreate(overlay, 't', 'by_tag', ['tag'], { kind: 'bloom' });
await tryCreate(overlay, 't', 'body_text', ['body'], { kind: 'fulltext' });
await tryCreate(overlay, 't', 'emb_l2', ['emb'], { kind: 'vector', metric: 'l2' });
tables = await retry('listTables', () => overlay.listTables());
if (!tables.some((t) => t.name === 'ice')) {
  await retry('mountIceberg', async () => {
    try {
      await overlay.mountIceberg('ice', newestMetadata());
    } catch (e) {
      if (e.code !== 'E_EXISTS') throw e;
    }
  });
}
await tryCreate(overlay, 'ice', 'by_id', ['id'], { unique: true });
await tryCreate(overlay, 'ice', 'by_region', ['region'], { kind: 'bitmap' });

tables = await retry('listTables', () => overlay.listTables());
let n = tables.find((t) => t.name === 't').files;
say({ type: 'start', n });

overlay.on('warning', (w) => {
  stats.retries[`sync:${w.code ?? w.reason}`] = (stats.retries[`sync:${w.code ?? w.reason}`] ?? 0) + 1;
});
overlay.on('sync', () => { stats.syncs++; });
overlay.startSync('ice', { intervalMs: 2000, publish: false });

/** Event `i`'s deletes (file i − 2, positions ≡ i mod 17); idempotent. */
async function deletesOf(i) {
  if (i < 2) return;
  const positions = deletedPositions(i - 2, rows, i + 1);
  await retry(`registerDeletes ${i}`, () => overlay.registerDeletes('t', [{ file: names[i - 2], positions }]));
}

// A kill between an event's two commits leaves its deletes out: redo them before publishing.
await deletesOf(n - 1);
// Vacuum once a minute of the soak, across restarts (the stamp file's time).
const stamp = path.join(root, 'vacuumed-at');
const lastVacuum = () => (fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0);
if (!fs.existsSync(stamp)) fs.writeFileSync(stamp, '');
while (!stopping) {
  if (n < names.length) {
    await retry(`registerFiles ${n}`, async () => {
      try {
        await overlay.registerFiles('t', [names[n]]);
      } catch (e) {
        // A retry of a registration that committed before its reply was lost.
        if (e.code !== 'E_EXISTS') throw e;
      }
    });
    n++;
    await deletesOf(n - 1);
    stats.events++;
  }
  await retry('build', () => overlay.build('t'));
  stats.builds++;
  const p = await retry('publish', () => overlay.publish());
  stats.publishes++;
  say({ type: 'ack', n, version: Number(p.version), faults: faultsInjected() });
  if (Date.now() - lastVacuum() > 60_000) {
    const v = await retry('vacuum', () => overlay.vacuum({ retainVersions: 3, graceSeconds: 30 }));
    stats.vacuums++;
    stats.vacuumed.manifests += v.manifests;
    stats.vacuumed.artifacts += v.artifacts;
    stats.vacuumed.bytes += v.bytes;
    fs.writeFileSync(stamp, '');
    say({ type: 'vacuum', manifests: v.manifests, artifacts: v.artifacts, bytes: v.bytes, young: v.young });
  }
  await new Promise((r) => setTimeout(r, 700));
}
await overlay.stopSync('ice');
await overlay.close();
say({ type: 'final', stats, faults: faultsInjected(), rss: process.memoryUsage().rss });
