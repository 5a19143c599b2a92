// Run by tests/iceberg-v3.test.mjs as an unprivileged user who can read the warehouse but
// not write it (file mode): mounts, indexes, builds, publishes, syncs and queries the v3
// table, and proves the warehouse really is closed to it. Prints a JSON report.
//   node readonly-child.mjs <expected_v3.json> <overlay dir>
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Overlay } = require('skerry');
const [expectedPath, overlayDir] = process.argv.slice(2);
const expected = JSON.parse(fs.readFileSync(expectedPath, 'utf8'))['db.v3'];
const snaps = expected.snapshots;
const warehouse = new URL(expected.location).pathname;
let writeRefused = null;
try {
  fs.writeFileSync(path.join(warehouse, 'data', 'intruder'), 'x');
} catch (e) {
  writeRefused = e.code;
}
const o = await Overlay.open(`file://${overlayDir}`);
const counts = [];
await o.mountIceberg('v3', snaps[0].metadata_location);
await o.createIndex('v3', 'by_id', ['id'], { unique: true });
await o.build('v3');
await o.publish();
for (const [i, s] of snaps.entries()) {
  if (i > 0) {
    await o.syncIceberg('v3', { metadataUrl: s.metadata_location });
    await o.publish();
  }
  const r = await o.query('v3', { columns: ['id'], limit: 10000 });
  counts.push(r.rows.map((x) => Number(x.id)).sort((a, b) => a - b));
}
await o.close();
console.log(JSON.stringify({ uid: process.getuid(), writeRefused, counts }));
