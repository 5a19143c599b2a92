// Round trips of the wasm reader over HTTP (issue 14), counted by the range server as
// sequential depth with a 40 ms delay per response, so requests issued together overlap even
// on a loaded machine: a cold reader (HEAD + manifest + query) answers a point query in at
// most 4, a warm one in 2;
// IN-10 and a 1,000-row range over several files and row groups in at most 3 (2 once the
// files' metadata is cached). The same answers as the addon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startRangeServer } from '../scripts/range-server.mjs';
import { swapInPlace } from './support/rewrite.mjs';

const require = createRequire(import.meta.url);
const { Overlay, sampleOrdersParquet } = require('skerry');
const { OverlayReader } = require('skerry-wasm');

const FILES = 6;
const PER = 20_000;
let root, server, overlay;

before(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-trips-'));
  fs.mkdirSync(path.join(root, 'data'), { recursive: true });
  for (let f = 0; f < FILES; f++) {
    fs.writeFileSync(path.join(root, 'data', `p${f}.parquet`), sampleOrdersParquet(f * PER, PER, 5_000, 'snappy'));
  }
  overlay = await Overlay.open(`file://${root}/overlay`);
  await overlay.registerParquetTable('orders', `file://${root}/data`);
  await overlay.createIndex('orders', 'by_id', ['order_id'], { unique: true });
  await overlay.build('orders');
  await overlay.publish();
  server = await startRangeServer(root, { latencyMs: 40 });
});

after(async () => {
  await overlay?.close();
  await server?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const open = () => OverlayReader.open(`${server.url}/overlay`, { tables: { orders: `${server.url}/data` } });
const columns = ['order_id', 'customer', 'amount', 'day'];
const ids = (r) => r.rows.map((x) => Number(x.order_id));

async function same(reader, options) {
  const w = await reader.query('orders', { ...options, columns });
  const a = await overlay.query('orders', { ...options, columns });
  assert.deepEqual(w.rows, a.rows);
  return w;
}

test('a cold reader answers a point query in 4 round trips, a warm one in 2', async () => {
  server.reset();
  const reader = await open();
  const r = await same(reader, { where: { order_id: 3 * PER + 77 } });
  assert.deepEqual(ids(r), [3 * PER + 77]);
  const coldTrips = server.stats.trips;
  assert.ok(coldTrips <= 4, `cold: ${coldTrips} trips: ${JSON.stringify(server.stats.log)}`);
  for (const id of [3 * PER + 15_001, 3 * PER + 9, 3 * PER + 4_321]) {
    server.reset();
    const w = await reader.query('orders', { where: { order_id: id }, columns });
    assert.deepEqual(ids(w), [id]);
    assert.ok(server.stats.trips <= 2, `warm ${id}: ${server.stats.trips} trips: ${JSON.stringify(server.stats.log)}`);
    assert.ok(w.stats.indexBytes <= 64 * 1024, JSON.stringify(w.stats));
  }
});

test('IN-10 and a 1,000-row range fan out: 3 round trips, 2 with metadata cached', async () => {
  const reader = await open();
  await reader.query('orders', { where: { order_id: 1 }, columns }); // manifest read, one file's metadata
  const keys = Array.from({ length: 10 }, (_, k) => k * 11_987 + 5);
  server.reset();
  let r = await same(reader, { where: { order_id: { in: keys } } });
  assert.deepEqual(ids(r), keys);
  assert.ok(server.stats.trips <= 3, `IN-10: ${server.stats.trips} trips: ${JSON.stringify(server.stats.log)}`);
  const keys2 = keys.map((k) => k + 3);
  server.reset();
  r = await same(reader, { where: { order_id: { in: keys2 } } });
  assert.deepEqual(ids(r), keys2);
  assert.ok(server.stats.trips <= 2, `IN-10 warm: ${server.stats.trips} trips`);
  // 1,000 rows across a file boundary.
  const lo = 2 * PER - 400;
  server.reset();
  r = await same(reader, { where: { order_id: { gte: lo, lt: lo + 1000 } } });
  assert.deepEqual(ids(r), Array.from({ length: 1000 }, (_, k) => lo + k));
  assert.ok(server.stats.trips <= 3, `range: ${server.stats.trips} trips: ${JSON.stringify(server.stats.log)}`);
  assert.equal(r.stats.index, 'by_id');
});

// The rows of keys spread over many files are read in one round, not one round per 16 files
// walked: files the index rules out cost no read and no place in the window of files in
// flight. 48 files, ten keys in files 0, 5, …, 45 (three windows of 16 files apart).
test('IN over keys in 48 files: the rows come in one round, wherever the files are', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-wide-'));
  fs.mkdirSync(path.join(dir, 'data'));
  const N = 48, per = 2_000;
  for (let f = 0; f < N; f++) {
    fs.writeFileSync(path.join(dir, 'data', `p${String(f).padStart(2, '0')}.parquet`), sampleOrdersParquet(f * per, per, 500, 'snappy'));
  }
  const o = await Overlay.open(`file://${dir}/overlay`);
  const s = await startRangeServer(dir, { latencyMs: 40 });
  try {
    await o.registerParquetTable('orders', `file://${dir}/data`);
    await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
    await o.build('orders');
    await o.publish();
    const reader = await OverlayReader.open(`${s.url}/overlay`, { tables: { orders: `${s.url}/data` } });
    const keysAt = (shift) => Array.from({ length: 10 }, (_, k) => k * 5 * per + 17 + shift);
    for (const [shift, most] of [[0, 3], [1, 2]]) {
      // The first IN meets its ten files (metadata and rows); the second reads rows only.
      const keys = keysAt(shift);
      s.reset();
      const w = await reader.query('orders', { where: { order_id: { in: keys } }, columns });
      const a = await o.query('orders', { where: { order_id: { in: keys } }, columns });
      assert.deepEqual(ids(w), keys);
      assert.deepEqual(w.rows, a.rows);
      assert.ok(s.stats.trips <= most, `IN-10 over ${N} files (${shift ? 'warm' : 'first'}): ${s.stats.trips} trips: ${JSON.stringify(s.stats.log)}`);
    }
    // `fetchRows` of rows in ten files the reader has not met (files 2, 7, …, 47), in an order
    // that is not the files': each file's metadata, then its rows — two rounds for all ten;
    // one once their metadata is held.
    const refs = Array.from({ length: 10 }, (_, k) => ({ file: `p${String(47 - 5 * k).padStart(2, '0')}.parquet`, position: 100 + k }));
    for (const most of [2, 1]) {
      s.reset();
      const w = await reader.fetchRows('orders', refs, columns);
      const a = await o.fetchRows('orders', refs, columns);
      assert.deepEqual(w.rows, a.rows);
      assert.deepEqual(ids(w), refs.map((r, k) => (47 - 5 * k) * per + 100 + k));
      assert.ok(s.stats.trips <= most, `fetchRows over 10 files: ${s.stats.trips} trips: ${JSON.stringify(s.stats.log)}`);
    }
  } finally {
    await s.close();
    await o.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 42: where the server's ETag is a content hash (S3, R2, GCS; here the range server's
// `etag: 'md5'`), a warm reader pinned to it uses the dictionary pages it already holds
// without fetching them again; where the ETag is modification time and size, every read
// fetches them to compare. A same-size rewrite is a new content hash: the pinned reads fail,
// and the answer comes from the file as it is now.
test('content-hash ETags: dictionary pages are not fetched again, and a same-size rewrite is caught', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skerry-etag-'));
  fs.mkdirSync(path.join(dir, 'data'));
  const file = path.join(dir, 'data', 'p0.parquet');
  fs.writeFileSync(file, sampleOrdersParquet(0, PER, 5_000, 'none'));
  const o = await Overlay.open(`file://${dir}/overlay`);
  const servers = {};
  try {
    await o.registerParquetTable('orders', `file://${dir}/data`);
    await o.createIndex('orders', 'by_id', ['order_id'], { unique: true });
    await o.build('orders');
    await o.publish();
    servers.strong = await startRangeServer(dir, { etag: 'md5' });
    servers.weak = await startRangeServer(dir);
    const readers = {};
    const bytes = {};
    for (const [kind, s] of Object.entries(servers)) {
      readers[kind] = await OverlayReader.open(`${s.url}/overlay`, { tables: { orders: `${s.url}/data` } });
      bytes[kind] = [];
      // Four rows of one row group: the first read meets the file, the second is pinned to
      // its ETag, from the third on the dictionary pages are held at that version.
      for (const id of [101, 1_102, 2_103, 3_104]) {
        s.reset();
        const r = await readers[kind].query('orders', { where: { order_id: id }, columns });
        assert.deepEqual(ids(r), [id]);
        bytes[kind].push(s.stats.bytes);
      }
    }
    const head = await fetch(`${servers.strong.url}/data/p0.parquet`, { method: 'HEAD' });
    assert.match(head.headers.get('etag'), /^"[0-9a-f]{32}"$/);
    for (const k of [2, 3]) {
      assert.ok(bytes.strong[k] * 2 < bytes.weak[k], `bytes per query: ${JSON.stringify(bytes)}`);
    }

    // Same size, ids 101 and 102 swapped in place, modification time restored.
    swapInPlace(file, 101, 102);
    for (const id of [101, 102]) {
      const r = await readers.strong.query('orders', { where: { order_id: id }, columns });
      assert.deepEqual(ids(r), [id], `order ${id}`);
      assert.equal(r.stats.rejections[0]?.reason, 'drifted');
    }
  } finally {
    for (const s of Object.values(servers)) await s.close();
    await o.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
