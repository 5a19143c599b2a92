// Same-run comparison with a baseline build. SKERRY_BENCH_BASELINE names a checkout whose
// addon and wasm reader are built (`scripts/bench-baseline.sh <rev>` makes one from any
// commit, release builds like what ships). A benchmark then answers each case from both
// builds on the same published overlay, interleaved run by run so that machine load falls on
// both alike, checks that they agree, and reports requests, bytes and median times with the
// now/baseline ratios.
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The baseline's `skerry` and `skerry-wasm` modules, or `null` when none is named. */
export function baseline() {
  const dir = process.env.SKERRY_BENCH_BASELINE;
  if (!dir) return null;
  const skerry = require(path.join(dir, 'bindings-node'));
  const wasm = require(path.join(dir, 'bindings-wasm/pkg/node/skerry_wasm.js'));
  return { dir, Overlay: skerry.Overlay, OverlayReader: wasm.OverlayReader };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const answer = (r) => JSON.stringify(r.count !== undefined ? r.count : r.refs, (_, v) => (typeof v === 'bigint' ? `${v}` : v));

/**
 * Runs every case on each `[via, now, base]` pair: one warm-up each, then `runs` timed runs
 * alternating which build goes first. Throws when the two builds answer differently.
 */
export async function sideBySide(pairs, cases, runs = Number(process.env.SKERRY_BENCH_RUNS || 7)) {
  const rows = [];
  for (const [name, f] of cases) {
    for (const [via, now, base] of pairs) {
      let rn = await f(now);
      let rb = await f(base);
      const ms = { now: [], base: [] };
      for (let i = 0; i < runs; i++) {
        const order = i % 2 ? [['base', base], ['now', now]] : [['now', now], ['base', base]];
        for (const [who, side] of order) {
          const t = performance.now();
          const r = await f(side);
          ms[who].push(performance.now() - t);
          if (who === 'now') rn = r; else rb = r;
        }
      }
      if (answer(rn) !== answer(rb)) throw new Error(`${name}/${via}: the build and the baseline disagree`);
      const [tn, tb] = [median(ms.now), median(ms.base)];
      rows.push({
        case: name, via,
        'req now': rn.stats.requests, 'req base': rb.stats.requests,
        'bytes now': rn.stats.bytes, 'bytes base': rb.stats.bytes,
        'ms now': +tn.toFixed(2), 'ms base': +tb.toFixed(2),
        'time now/base': +(tn / Math.max(tb, 0.001)).toFixed(2),
        'bytes now/base': +(rn.stats.bytes / Math.max(rb.stats.bytes, 1)).toFixed(2),
      });
    }
  }
  return rows;
}
