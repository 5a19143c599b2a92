// The soak (issue "Faults, soak and fuzzing"): for SKERRY_SOAK_MINUTES (default 2) a writer
// registers, deletes, builds, publishes and vacuums a Parquet table while `startSync` follows
// a pyiceberg table receiving appends and copy-on-write deletes; 4 read-only addon processes
// and a wasm reader over HTTP query every index kind of both tables and check each answer
// against an oracle of the version they pinned; the writer is SIGKILLed at random and
// restarted; store faults are injected everywhere (SKERRY_FAULTS in the writer and the addon
// readers — catalog objects included — and 503s / resets from the range server for the wasm
// reader). It ends with a report (stdout, and ROOT/report.json): operations by kind, faults
// injected, wrong answers, lost commits, RSS and open-handle growth, the final verify.
//
//   SKERRY_SOAK_MINUTES=30 node tests/soak/soak.mjs [--keep]
//
// Exit status 1 when an answer was wrong, a commit was lost, or a check failed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { startRangeServer } from '../../scripts/range-server.mjs';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));

function child(script, args, env = {}, logFile = null) {
  const p = spawn(process.execPath, [path.join(here, script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  p.lines = [];
  p.stderrTail = '';
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try { p.lines.push(JSON.parse(line)); } catch { p.lines.push({ type: 'text', line }); }
      p.emit('line', p.lines[p.lines.length - 1]);
    }
  });
  p.stderr.on('data', (d) => {
    p.stderrTail = (p.stderrTail + d).slice(-4000);
    if (logFile) fs.appendFileSync(logFile, d);
  });
  p.done = new Promise((r) => p.on('exit', (code, signal) => r({ code, signal })));
  return p;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function runSoak({ minutes = 2, keep = false, log = () => {} } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-soak-'));
  const seconds = minutes * 60;
  // The table grows for about the first half of the run, then holds still (the readers' RSS
  // in the second half shows growth that is not the table's).
  const poolFiles = Math.min(2000, Math.ceil(seconds / 3) + 20);
  log(`soak in ${root}: ${minutes} min, pool of ${poolFiles} files`);
  execFileSync('python3', [path.join(here, 'make_pool.py'), path.join(root, 'data/t'), String(poolFiles), '400', '11']);
  const upstream = spawn('python3', [path.join(here, 'iceberg_writer.py'), root, String(seconds + 120)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let upstreamErr = '';
  upstream.stderr.on('data', (d) => { upstreamErr = (upstreamErr + d).slice(-4000); });
  const upstreamDone = new Promise((r) => upstream.on('exit', (code) => r(code)));
  while (!fs.existsSync(path.join(root, 'ledger.jsonl'))) await sleep(100);

  const seed = Number(process.env.SKERRY_SOAK_SEED ?? Date.now() % 100000);
  const faults = (s) => `rate=${process.env.SKERRY_SOAK_FAULT_RATE ?? 0.01},seed=${s}`;
  const report = {
    minutes, seed, root,
    writer: { starts: 0, kills: 0, acks: 0, faults: 0, vacuums: 0, vacuumed: { manifests: 0, artifacts: 0, bytes: 0 }, lastRetries: {}, failures: [], exits: [] },
    readers: [], wrong: 0, wrongSamples: [], lostCommits: 0,
  };
  let acked = 0;
  let writer;
  // Faults injected, per writer incarnation (the last ack of each).
  const faultsBy = {};
  const startWriter = () => {
    report.writer.starts++;
    writer = child('writer.mjs', [root, String(poolFiles)], { SKERRY_FAULTS: faults(seed * 7 + report.writer.starts) }, path.join(root, 'writer.log'));
    writer.on('line', (l) => {
      if (l.type === 'start' && l.n < acked) {
        report.lostCommits++;
        log(`LOST: the writer restarted at ${l.n} files, ${acked} were acknowledged`);
      }
      if (l.type === 'ack') {
        acked = Math.max(acked, l.n);
        report.writer.acks++;
        faultsBy[report.writer.starts] = l.faults;
      }
      if (l.type === 'vacuum') {
        report.writer.vacuums++;
        for (const k of ['manifests', 'artifacts', 'bytes']) report.writer.vacuumed[k] += l[k];
      }
    });
    return writer;
  };
  startWriter();
  while (!writer.lines.some((l) => l.type === 'ack')) {
    if (writer.exitCode !== null) throw new Error(`writer exited before publishing: ${writer.stderrTail}`);
    await sleep(100);
  }
  const server = await startRangeServer(root, { latencyMs: 2 });
  server.setFaults(Number(process.env.SKERRY_SOAK_FAULT_RATE ?? 0.01), seed);
  const readers = [];
  for (let i = 0; i < 4; i++) readers.push(child('reader.mjs', [root, 'addon', String(seed + i + 1)], { SKERRY_FAULTS: faults(seed * 13 + i) }));
  readers.push(child('reader.mjs', [root, 'wasm', String(seed + 99), server.url]));

  const t0 = Date.now();
  let nextKill = t0 + 15_000 + (seed % 30_000);
  let lastLog = t0;
  while (Date.now() - t0 < seconds * 1000) {
    await sleep(250);
    server.stats.log.length = 0;
    if (writer.exitCode !== null || writer.signalCode !== null) {
      report.writer.exits.push({ code: writer.exitCode, stderr: writer.stderrTail.slice(-600) });
      log(`writer exited on its own (${writer.exitCode}): ${writer.stderrTail.slice(-300)}`);
      startWriter();
    } else if (Date.now() > nextKill) {
      writer.kill('SIGKILL');
      await writer.done;
      report.writer.kills++;
      startWriter();
      nextKill = Date.now() + 20_000 + ((seed * report.writer.kills * 7919) % 40_000);
    }
    if (Date.now() - lastLog > 60_000) {
      lastLog = Date.now();
      log(`${Math.round((Date.now() - t0) / 1000)} s: ${acked} files acknowledged, ${report.writer.kills} kills, ${readers.reduce((s, r) => s + r.lines.filter((l) => l.type === 'wrong').length, 0)} wrong`);
    }
  }

  // Stop: readers and the writer report, the upstream stops.
  for (const r of readers) r.kill('SIGTERM');
  writer.kill('SIGTERM');
  fs.writeFileSync(path.join(root, 'stop'), '');
  const ends = await Promise.all([...readers, writer].map((p) => Promise.race([p.done, sleep(120_000).then(() => 'timeout')])));
  await upstreamDone;
  await server.close();
  const fin = writer.lines.find((l) => l.type === 'final');
  if (fin) {
    Object.assign(report.writer, { lastRetries: fin.stats.retries, failures: fin.stats.failures });
  } else {
    report.writer.failures.push(`no final report (${JSON.stringify(ends.at(-1))}): ${writer.stderrTail.slice(-600)}`);
  }
  report.writer.faults = Object.values(faultsBy).reduce((a, b) => a + b, 0);
  report.filesAcknowledged = acked;
  for (const r of readers) {
    const f = r.lines.find((l) => l.type === 'final');
    const wrongs = r.lines.filter((l) => l.type === 'wrong');
    report.wrong += wrongs.length;
    report.wrongSamples.push(...wrongs.slice(0, 3));
    report.readers.push(f ? { mode: f.mode, rounds: f.stats.rounds, ops: f.stats.ops, errors: f.stats.errors, unchecked: f.stats.unchecked, recall: f.stats.recall.n ? f.stats.recall.sum / f.stats.recall.n : null, newestVersion: f.stats.versions, memoryByMinute: f.memory, fds: f.fds, faults: f.faults }
      : { failed: `no final report: ${r.stderrTail.slice(-600)}` });
  }
  report.upstream = { exit: await upstreamDone, commits: fs.readFileSync(path.join(root, 'ledger.jsonl'), 'utf8').split('\n').filter(Boolean).length, stderr: upstreamErr.includes('Traceback') ? upstreamErr.slice(-600) : undefined };
  report.rangeServerFaults = server.stats.faults;

  // The end state: verify certifies every index; vacuum says what it could not reclaim.
  const { Overlay } = require('skerry');
  const o = await Overlay.open(`file://${root}/overlay`);
  const sync = await o.syncIceberg('ice');
  await o.build('t');
  await o.publish();
  report.verify = {};
  for (const [t, ix] of [['t', 'by_id'], ['t', 'by_cat'], ['t', 'by_tag'], ['t', 'body_text'], ['t', 'emb_l2'], ['ice', 'by_id'], ['ice', 'by_region']]) {
    const v = await o.verify(t, ix);
    report.verify[`${t}.${ix}`] = { certified: v.certified, files: v.files, missing: v.missing, dead: v.dead, mismatched: v.mismatched };
  }
  const vac = await o.vacuum({ retainVersions: 1, graceSeconds: 0 });
  report.finalVacuum = { artifacts: vac.artifacts, bytes: vac.bytes, manifests: vac.manifests, young: vac.young };
  report.finalSync = { snapshot: String(sync.snapshotId) };
  const tables = await o.listTables();
  report.finalFiles = tables.find((x) => x.name === 't').files;
  if (report.finalFiles < acked) report.lostCommits++;
  await o.close();
  if (!keep) fs.rmSync(root, { recursive: true, force: true });
  return report;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const minutes = Number(process.env.SKERRY_SOAK_MINUTES ?? 2);
  const report = await runSoak({ minutes, keep: process.argv.includes('--keep'), log: (m) => console.error(`[soak] ${m}`) });
  const text = JSON.stringify(report, null, 2);
  console.log(text);
  const ok = report.wrong === 0 && report.lostCommits === 0 && report.writer.failures.length === 0
    && report.readers.every((r) => !r.failed && Object.keys(r.errors).every((c) => ['E_IO', 'E_TIMEOUT', 'E_NOT_FOUND'].includes(c)))
    && Object.values(report.verify).every((v) => v.certified);
  process.exit(ok ? 0 : 1);
}
