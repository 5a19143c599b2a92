// Skerry's build fan-out on BullMQ (docs/fanout.md): this process — the overlay's one writer —
// plans (`overlay.planBuild`: one task per data file), enqueues one job per task, worker
// processes (`worker.mjs`) build the bundles, and this process commits their receipts
// (`overlay.commitBuild`), which refuses any receipt the catalog moved past.
import { Queue } from 'bullmq';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/**
 * Builds `table`'s missing blobs through a BullMQ queue on `redisUrl` with `workers` worker
 * processes writing to the overlay at `overlayUrl`, then commits. Resolves `{ report, tasks,
 * jobs, exits, ms }`: the commit report, the number of tasks, per job its file and how many
 * times it was started and found stalled, how each worker process ended, and the time spent
 * planning, building and committing.
 *
 * `workerEnv(i)` adds environment variables to worker `i` (tests inject a crash with it).
 */
export async function fanoutBuild(overlay, table, { overlayUrl, redisUrl, workers = 2, queueName, workerEnv = () => ({}), timeoutMs = 600_000 }) {
  const { hostname, port } = new URL(redisUrl);
  const connection = { host: hostname, port: Number(port), maxRetriesPerRequest: null };
  const name = queueName ?? `skerry-build-${process.pid}-${Date.now()}`;
  const t0 = performance.now();
  const tasks = await overlay.planBuild(table);
  const t1 = performance.now();
  const queue = new Queue(name, { connection });
  // One job per file. Retries: a failed attempt (a store hiccup) runs again; a worker that
  // died mid-job leaves it stalled and BullMQ gives it to another worker.
  await queue.addBulk(tasks.map((task) => ({
    name: 'bundle',
    data: { task },
    opts: { attempts: 3, backoff: { type: 'fixed', delay: 100 }, removeOnComplete: false, removeOnFail: false },
  })));
  const exits = [];
  const procs = Array.from({ length: workers }, (_, i) => {
    const p = fork(WORKER, [overlayUrl, redisUrl, name], { env: { ...process.env, ...workerEnv(i) }, stdio: 'inherit' });
    p.on('exit', (code, signal) => exits.push({ worker: i, code, signal }));
    return p;
  });
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const c = await queue.getJobCounts('completed', 'failed');
      if (c.failed > 0) {
        const [failed] = await queue.getJobs(['failed'], 0, 0);
        throw new Error(`a build job failed for good: ${failed?.failedReason}`);
      }
      if (c.completed === tasks.length) break;
      if (Date.now() > deadline) throw new Error(`fan-out build timed out (${c.completed}/${tasks.length} done)`);
      if (exits.length === workers) throw new Error('every worker exited before the build was done');
      await new Promise((r) => setTimeout(r, 25));
    }
    const t2 = performance.now();
    const done = await queue.getJobs(['completed'], 0, -1);
    const report = await overlay.commitBuild(done.map((j) => j.returnvalue));
    const t3 = performance.now();
    const jobs = done.map((j) => ({ file: JSON.parse(j.data.task).file.path, started: j.attemptsStarted, stalled: j.stalledCounter }));
    return { report, tasks: tasks.length, jobs, exits, ms: { plan: t1 - t0, build: t2 - t1, commit: t3 - t2 } };
  } finally {
    await Promise.all(procs.map((p) => (p.exitCode !== null || p.signalCode !== null)
      ? null
      : new Promise((resolve) => { p.once('exit', resolve); p.kill('SIGTERM'); })));
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
  }
}
