// The soak in the default suite (issue "Faults, soak and fuzzing"): tests/soak/soak.mjs for
// SKERRY_SOAK_MINUTES (2 here unless set; `SKERRY_SOAK_MINUTES=30 node tests/soak/soak.mjs`
// for the long run) — a writer SIGKILLed at random, a background Iceberg sync, 4 addon
// readers and a wasm reader checking every answer against an oracle of the version they
// pinned, vacuum every minute, store faults everywhere. Nothing may be wrong or lost, and
// everything must actually have happened.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runSoak } from './soak/soak.mjs';

test('a soak under faults and kills: no wrong answer, no lost commit, every index certified', { timeout: 30 * 60_000 }, async () => {
  const minutes = Number(process.env.SKERRY_SOAK_MINUTES ?? 2);
  const r = await runSoak({ minutes, log: (m) => console.log(`[soak] ${m}`) });
  console.log(JSON.stringify({ ...r, readers: r.readers.map((x) => ({ ...x, ops: JSON.stringify(x.ops), errors: JSON.stringify(x.errors) })) }));
  assert.deepEqual(r.wrongSamples, [], `${r.wrong} wrong answers`);
  assert.equal(r.wrong, 0);
  assert.equal(r.lostCommits, 0);
  assert.deepEqual(r.writer.failures, []);
  assert.deepEqual(r.writer.exits, [], 'the writer only stops when killed');
  assert.ok(r.writer.kills >= 1 && r.writer.starts === r.writer.kills + 1, `kills ${r.writer.kills}, starts ${r.writer.starts}`);
  assert.ok(r.writer.faults > 0 && r.rangeServerFaults > 0, 'faults were injected on both sides');
  assert.ok(r.writer.vacuums >= 1, 'vacuum ran');
  assert.ok(r.filesAcknowledged > 10 && r.finalFiles >= r.filesAcknowledged);
  assert.ok(r.upstream.exit === 0 && r.upstream.commits > 10, `upstream: ${JSON.stringify(r.upstream)}`);
  assert.equal(r.readers.length, 5);
  for (const x of r.readers) {
    assert.ok(!x.failed, x.failed);
    for (const kind of ['lookup', 'count', 'query', 'search', 'nearest', 'iceberg-count', 'iceberg-query']) {
      assert.ok((x.ops[kind] ?? 0) >= 10, `${x.mode} reader: ${kind} ${x.ops[kind]}`);
    }
    // What a reader may meet: store faults (E_IO), and objects of a version vacuum took
    // while it was pinned (E_NOT_FOUND). Never a manifest moving back (E_MANIFEST) or
    // anything untyped.
    for (const code of Object.keys(x.errors)) assert.ok(['E_IO', 'E_TIMEOUT', 'E_NOT_FOUND'].includes(code), `${x.mode}: ${code} ${JSON.stringify(x.errors)}`);
    assert.ok(x.unchecked < x.rounds / 4, `${x.mode}: ${x.unchecked} of ${x.rounds} rounds unchecked`);
    assert.ok(x.recall >= 0.9, `${x.mode}: recall ${x.recall}`);
  }
  assert.ok(r.readers.some((x) => x.mode === 'addon' && x.faults > 0), 'addon readers met faults');
  for (const [ix, v] of Object.entries(r.verify)) assert.ok(v.certified && v.missing === 0 && v.mismatched === 0, `${ix}: ${JSON.stringify(v)}`);
});
