// A Skerry bundle-building worker: takes build tasks from a BullMQ queue, builds each data
// file's bundle — or, for a run task, writes an index's table run — with a `BundleBuilder`
// (no catalog: any number of these run beside the one overlay writer) and returns the receipt
// as the job's result.
//
//   node worker.mjs <overlay url> <redis url> <queue name>
//
// `SKERRY_EXAMPLE_CRASH_ON_JOB=n` (tests): the process kills itself with SIGKILL after
// building its n-th job's bundle and before reporting it — the worst moment to die. BullMQ
// finds the job stalled and runs it again elsewhere; the retry writes the same bytes under the
// same name and is accepted.
import { Worker } from 'bullmq';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { BundleBuilder } = require('skerry');

const [overlayUrl, redisUrl, queueName] = process.argv.slice(2);
if (!queueName) {
  console.error('usage: node worker.mjs <overlay url> <redis url> <queue name>');
  process.exit(2);
}
const crashOn = Number(process.env.SKERRY_EXAMPLE_CRASH_ON_JOB || 0);
const builder = BundleBuilder.open(overlayUrl);
const { hostname, port } = new URL(redisUrl);
let jobs = 0;

const worker = new Worker(
  queueName,
  async (job) => {
    const receipt = await builder.buildBundle(job.data.task);
    jobs += 1;
    if (jobs === crashOn) process.kill(process.pid, 'SIGKILL');
    return receipt;
  },
  {
    connection: { host: hostname, port: Number(port), maxRetriesPerRequest: null },
    concurrency: 1,
    // A dead worker's job is found stalled after its lock lapses and is run again.
    lockDuration: Number(process.env.SKERRY_EXAMPLE_LOCK_MS || 30_000),
    stalledInterval: Number(process.env.SKERRY_EXAMPLE_STALLED_MS || 30_000),
  },
);
worker.on('error', (e) => console.error(`worker ${process.pid}: ${e.message}`));
const stop = async () => {
  await worker.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.send?.({ ready: process.pid });
