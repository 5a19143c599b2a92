// Skerry's build fan-out on BullMQ (docs/fanout.md): this process — the overlay's one writer —
// plans (`overlay.planBuild`: one task per data file), enqueues one job per task, worker
// processes (`worker.mjs`) build the bundles, and this process commits their receipts
// (`overlay.commitBuild`), which refuses any receipt the catalog moved past. Then the table
// runs the new files call for go the same way: planned (`planBuild(table, { runs: true })`:
// one task per index), written by the workers, committed.
import { Queue } from 'bullmq';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('./worker.mjs', import.meta.url));

/**
 * Builds `table`'s missing blobs, then its due table runs, through a BullMQ queue on
 * `redisUrl` with `workers` worker processes writing to the overlay at `overlayUrl`, committing
 * after each phase. Resolves `{ report, runs, tasks, runTasks, jobs, exits, ms }`: the commit
 * report of the files and of the runs, the number of tasks of each phase, per file job its
 * file and how many times it was started and found stalled, how each worker process ended,
 * and the time spent planning, building and committing (`runs`: the run phase's).
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
  // One job per task. Retries: a failed attempt (a store hiccup) runs again; a worker that
  // died mid-job leaves it stalled and BullMQ gives it to another worker.
  const enqueue = (kind, list) => queue.addBulk(list.map((task) => ({
    name: kind,
    data: { task },
    opts: { attempts: 3, backoff: { type: 'fixed', delay: 100 }, removeOnComplete: false, removeOnFail: false },
  })));
  await enqueue('bundle', tasks);
  const exits = [];
  const procs = Array.from({ length: workers }, (_, i) => {
    const p = fork(WORKER, [overlayUrl, redisUrl, name], { env: { ...process.env, ...workerEnv(i) }, stdio: 'inherit' });
    p.on('exit', (code, signal) => exits.push({ worker: i, code, signal }));
    return p;
  });
  const deadline = Date.now() + timeoutMs;
  // Waits until `total` jobs (of every phase so far) are done; the completed jobs of `kind`.
  const waitFor = async (kind, total) => {
    for (;;) {
      const c = await queue.getJobCounts('completed', 'failed');
      if (c.failed > 0) {
        const [failed] = await queue.getJobs(['failed'], 0, 0);
        throw new Error(`a build job failed for good: ${failed?.failedReason}`);
      }
      if (c.completed === total) break;
      if (Date.now() > deadline) throw new Error(`fan-out build timed out (${c.completed}/${total} done)`);
      if (exits.length === workers) throw new Error('every worker exited before the build was done');
      await new Promise((r) => setTimeout(r, 25));
    }
    return (await queue.getJobs(['completed'], 0, -1)).filter((j) => j.name === kind);
  };
  try {
    const done = await waitFor('bundle', tasks.length);
    const t2 = performance.now();
    // The runs are left to the workers too (the next phase).
    const report = await overlay.commitBuild(done.map((j) => j.returnvalue), { runs: false });
    const t3 = performance.now();
    const runTasks = await overlay.planBuild(table, { runs: true });
    await enqueue('run', runTasks);
    const ran = await waitFor('run', tasks.length + runTasks.length);
    const t4 = performance.now();
    const runs = await overlay.commitBuild(ran.map((j) => j.returnvalue));
    const t5 = performance.now();
    const jobs = done.map((j) => ({ file: JSON.parse(j.data.task).file.path, started: j.attemptsStarted, stalled: j.stalledCounter }));
    return {
      report, runs, tasks: tasks.length, runTasks: runTasks.length, jobs, exits,
      ms: { plan: t1 - t0, build: t2 - t1, commit: t3 - t2, runs: t5 - t3, runsBuild: t4 - t3 },
    };
  } finally {
    await Promise.all(procs.map((p) => (p.exitCode !== null || p.signalCode !== null)
      ? null
      : new Promise((resolve) => { p.once('exit', resolve); p.kill('SIGTERM'); })));
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
  }
}
