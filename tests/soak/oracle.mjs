// The soak's oracle (tests/soak/soak.mjs): what the tables hold at the state a reader pinned,
// computed from the pool's sidecar and the upstream writer's ledger — never from Skerry.
//
// Parquet table `t`: event 0 registers the pool's first file; event i (i ≥ 1) registers file
// i and deletes, in file i − 2, the positions p with p ≡ i (mod 17). A published version
// holding n files therefore holds files 0..n−1 and the deletes of events 2..n−1 — the
// writer publishes only between whole events. Iceberg table `ice`: the ledger's operations up
// to the sequence number the version synced.
import fs from 'node:fs';
import path from 'node:path';

export const REGIONS = ['eu', 'us', 'ap', 'sa', 'af'];
const K1 = 1.2;
const B = 0.75;

/** Positions of file `j` deleted once `n` files are registered. */
export function deletedPositions(j, rows, n) {
  const out = [];
  if (j + 2 < n) for (let p = (j + 2) % 17; p < rows; p += 17) out.push(p);
  return out;
}

export class PoolOracle {
  constructor(dataDir) {
    this.pool = JSON.parse(fs.readFileSync(path.join(dataDir, 'pool.json'), 'utf8'));
    this.names = Object.keys(this.pool).sort();
    this.rows = this.pool[this.names[0]].id.length;
    // Per file: term frequencies and length of each document (NULL body: none).
    this.docs = this.names.map((f) => this.pool[f].body.map((b) => {
      if (b === null) return null;
      const words = b.split(' ').filter(Boolean);
      const tf = new Map();
      for (const w of words) tf.set(w, (tf.get(w) ?? 0) + 1);
      return { tf, len: words.length };
    }));
  }

  /** Whether row `pos` of file `j` is live once `n` files are registered. */
  live(j, pos, n) {
    return j < n && pos < this.rows && !(j + 2 < n && pos % 17 === (j + 2) % 17);
  }

  *liveRows(n) {
    for (let j = 0; j < n; j++) for (let p = 0; p < this.rows; p++) if (this.live(j, p, n)) yield [j, p];
  }

  place(j, p) {
    return `${this.names[j]}:${p}`;
  }

  lookup(id, n) {
    const j = Math.floor(id / 10000);
    const p = id % 10000;
    return j < this.names.length && this.live(j, p, n) ? [this.place(j, p)] : [];
  }

  count(column, value, n) {
    let c = 0;
    for (const [j, p] of this.liveRows(n)) if (this.pool[this.names[j]][column][p] === value) c++;
    return c;
  }

  where(column, value, n) {
    const out = [];
    for (const [j, p] of this.liveRows(n)) if (this.pool[this.names[j]][column][p] === value) out.push(this.place(j, p));
    return out.sort();
  }

  /** BM25 of every live document matching `terms` (`or` / `and`): [{place, score}], best first. */
  search(terms, operator, n) {
    let docs = 0;
    let tokens = 0;
    const df = new Map(terms.map((t) => [t, 0]));
    // Table-wide statistics count deleted rows too (docs/fulltext-index.md).
    for (let j = 0; j < n; j++) {
      for (const d of this.docs[j]) {
        if (!d) continue;
        docs++;
        tokens += d.len;
        for (const t of terms) if (d.tf.has(t)) df.set(t, df.get(t) + 1);
      }
    }
    const avg = tokens / docs;
    const idf = new Map(terms.map((t) => [t, Math.log(1 + (docs - df.get(t) + 0.5) / (df.get(t) + 0.5))]));
    const hits = [];
    for (const [j, p] of this.liveRows(n)) {
      const d = this.docs[j][p];
      if (!d) continue;
      const held = terms.filter((t) => d.tf.has(t));
      if (held.length === 0 || (operator === 'and' && held.length < terms.length)) continue;
      let s = 0;
      for (const t of held) {
        const tf = d.tf.get(t);
        s += (idf.get(t) * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * d.len) / avg));
      }
      hits.push({ place: this.place(j, p), score: s });
    }
    return hits.sort((x, y) => y.score - x.score);
  }

  /** Squared-L2 and L2 distance of every live row with a vector: [{place, d2}], nearest first. */
  nearest(v, n) {
    const out = [];
    for (const [j, p] of this.liveRows(n)) {
      const e = this.pool[this.names[j]].emb[p];
      if (!e) continue;
      let d2 = 0;
      for (let i = 0; i < e.length; i++) d2 += (e[i] - v[i]) ** 2;
      out.push({ place: this.place(j, p), d2 });
    }
    return out.sort((x, y) => x.d2 - y.d2);
  }
}

/** The Iceberg table's ids at an upstream snapshot, from the upstream writer's ledger. */
export class LedgerOracle {
  constructor(file) {
    this.file = file;
    this.ops = [];
    this.cache = new Map();
  }

  reload() {
    const text = fs.existsSync(this.file) ? fs.readFileSync(this.file, 'utf8') : '';
    this.ops = text.split('\n').filter((l) => l.endsWith('}')).map((l) => JSON.parse(l));
  }

  /**
   * The live ids at upstream snapshot `snapshot` (its id as a decimal string), or null when
   * the ledger has not recorded that commit yet.
   */
  ids(snapshot) {
    if (this.cache.has(snapshot)) return this.cache.get(snapshot);
    if (!this.ops.some((o) => o.snapshot === snapshot)) this.reload();
    const at = this.ops.findIndex((o) => o.snapshot === snapshot);
    if (at < 0) return null;
    const seq = this.ops[at].seq;
    const live = new Set();
    for (const o of this.ops) {
      if (o.seq > seq) break;
      for (let i = o.lo; i < o.hi; i++) (o.op === 'append' ? live.add(i) : live.delete(i));
    }
    if (this.cache.size > 64) this.cache.clear();
    this.cache.set(snapshot, live);
    return live;
  }
}
