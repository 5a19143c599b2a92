// Index administration scripted in TypeScript (ESM): register a table, define indexes, build,
// publish, and check answers — type-checked against the `skerry` package's declarations
// by the test suite (`tsc --noEmit`), and runnable after compiling with `tsc`.
import { Overlay, type IndexState, type LookupResult, type QueryResult, type SkerryError, sampleOrdersParquet } from 'skerry';
import type { OverlayReader, QueryResult as ReaderResult } from 'skerry-wasm';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The same question from the read-only wasm reader (type-checked against `skerry-wasm`). */
export async function ask(reader: OverlayReader): Promise<ReaderResult> {
  const all = await reader.query('orders'); // options are optional, as in the addon
  const at = await reader.locate('orders', [1n]); // a promise, as in the addon
  console.log(`${all.rows.length} rows; row 1 in ${at.rows[0]?.file}`);
  const r = await reader.query('orders', { where: { order_id: { in: [1n, 2n] } }, limit: 5 });
  reader.on('warning', (w) => console.warn(`${w.file}: ${w.reason}`));
  return r;
}

export async function administer(dir: string): Promise<LookupResult> {
  const data = path.join(dir, 'data');
  fs.mkdirSync(data, { recursive: true });
  fs.writeFileSync(path.join(data, 'p0.parquet'), sampleOrdersParquet(0, 10_000, 2_000, 'zstd'));

  const overlay = await Overlay.open(`file://${path.join(dir, 'overlay')}`);
  try {
    const table = await overlay.registerParquetTable('orders', `file://${data}`, { prefix: 'p' });
    const rows: bigint = table.rows;
    console.log(`registered ${table.name} with ${rows} rows`);
    const index = await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
    const state: IndexState = index.state;
    console.log(`index ${index.name} is ${state}`);
    const report = await overlay.build('orders');
    if (report.skipped.length > 0) throw new Error(`not indexed: ${report.skipped.map((s) => s.file).join(', ')}`);
    const { version } = await overlay.publish();
    console.log(`published v${version}`);
    try {
      await overlay.lookup('orders', 'missing_index', 1);
    } catch (e) {
      const err = e as SkerryError;
      if (err.code !== 'E_NOT_FOUND' || err.retryable) throw err;
    }
    const q: QueryResult = await overlay.query('orders', {
      where: { order_id: { between: [4_240n, 4_244n] } },
      columns: ['order_id', 'amount'],
    });
    console.log(`query: ${q.refs.length} rows via ${q.stats.index}, first order ${q.rows[0].order_id}`);
    return await overlay.lookup('orders', 'by_id', 4_242n);
  } finally {
    await overlay.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  administer(fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-admin-'))).then((r) => {
    console.log(r.rows.map((x) => `${x.file}@${x.position}`).join(', '));
  });
}
