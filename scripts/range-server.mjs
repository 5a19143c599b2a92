// A static file server on 127.0.0.1 that honours `Range` (bytes=a-b, a-, -n), sends ETags,
// CORS headers and application/wasm, and counts every request and byte it serves, so tests
// can assert how many round trips a reader made.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

const SMALL_READ = 4 << 20;
const TYPES = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html', '.json': 'application/json' };

// With `{ cache: true }` responses are cacheable (`Cache-Control: max-age`, `Last-Modified`),
// and `If-None-Match` / `If-Range` are honoured, so a browser's HTTP cache takes part.
// `{ etag: 'md5' }` sends the content's MD5 as the ETag, as S3, R2 and GCS do (a content
// version: a rewrite of the same size changes it); by default the ETag is inode, size and
// modification time, as nginx-like servers make it (a same-size rewrite that restores the
// time keeps it). `{ latencyMs }` delays every response (a network round trip). `stats.trips` counts
// sequential round trips: a request that arrives after another one was answered is one trip
// deeper than it; requests in flight together share a trip. `setFaults(rate, seed)` makes
// that share of GET and HEAD requests fail — a 503, or the connection reset before any
// byte — chosen by a seeded generator (`stats.faults` counts them).
//
// `{ connections: n }` answers at most `n` requests at once, the rest waiting in arrival order
// and their latency starting when their turn comes: what a Cloudflare Worker in production
// sees (six subrequests waiting for headers per invocation, the seventh queued — a limit
// workerd and miniflare do not enforce locally), or a browser's six connections per origin
// over HTTP/1.1.
export async function startRangeServer(root, { cache = false, latencyMs = 0, etag: etagKind = 'stat', connections = 0 } = {}) {
  // MD5s by file identity and change time (which no rewrite can restore).
  const md5s = new Map();
  const md5Of = (fd, st) => {
    const id = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    let h = md5s.get(id);
    if (!h) {
      const hash = crypto.createHash('md5');
      const buf = Buffer.allocUnsafe(1 << 20);
      for (let at = 0; at < st.size;) {
        const n = fs.readSync(fd, buf, 0, buf.length, at);
        if (n === 0) break;
        hash.update(buf.subarray(0, n));
        at += n;
      }
      h = hash.digest('hex');
      md5s.set(id, h);
    }
    return h;
  };
  const stats = { requests: 0, bytes: 0, trips: 0, faults: 0, log: [] };
  let faultRate = 0;
  let rng = 1;
  const roll = () => {
    rng ^= rng << 13; rng >>>= 0;
    rng ^= rng >>> 17;
    rng ^= rng << 5; rng >>>= 0;
    return rng / 2 ** 32;
  };
  let answered = 0; // deepest trip answered so far
  const server = http.createServer((req, res) => {
    const depth = answered + 1;
    req.depth = depth;
    stats.trips = Math.max(stats.trips, depth);
    res.on('finish', () => { answered = Math.max(answered, depth); });
    const go = () => {
      if (latencyMs > 0) setTimeout(() => serve(req, res), latencyMs);
      else serve(req, res);
    };
    if (connections > 0) admit(res, go);
    else go();
  });
  // At most `connections` requests answered at once; the others wait in arrival order.
  let busy = 0;
  const waiting = [];
  const admit = (res, go) => {
    const release = () => {
      if (res.released) return;
      res.released = true;
      busy--;
      const next = waiting.shift();
      if (next) { busy++; next(); }
    };
    res.on('finish', release);
    res.on('close', release);
    if (busy < connections) { busy++; go(); } else waiting.push(go);
  };
  function serve(req, res) {
    const url = new URL(req.url, 'http://x');
    const file = path.join(root, decodeURIComponent(url.pathname));
    const cors = {
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Allow-Headers': 'Range, If-Match',
      'Access-Control-Expose-Headers': 'Content-Range, Content-Length, Accept-Ranges, ETag',
    };
    if (req.method === 'OPTIONS') { res.writeHead(204, cors); res.end(); return; }
    if (faultRate > 0 && roll() < faultRate) {
      stats.faults++;
      if (roll() < 0.5) { res.writeHead(503, cors); res.end('injected fault'); } else req.socket.destroy();
      return;
    }
    // One open file per request: stat and read through it (a file replaced meanwhile is
    // served whole from the version opened).
    let fd = null;
    let st = null;
    try {
      if (file.startsWith(root)) { fd = fs.openSync(file, 'r'); st = fs.fstatSync(fd); }
    } catch { fd = null; }
    if (fd === null || !st.isFile()) {
      if (fd !== null) fs.closeSync(fd);
      stats.requests++; stats.log.push({ method: req.method, path: url.pathname, status: 404 });
      res.writeHead(404, cors); res.end(); return;
    }
    res.on('close', () => { if (fd !== null) { fs.closeSync(fd); fd = null; } });
    const size = st.size;
    const etag = etagKind === 'md5'
      ? `"${md5Of(fd, st)}"`
      : `"${st.ino.toString(16)}-${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
    const headers = { ...cors, 'Accept-Ranges': 'bytes', ETag: etag, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream' };
    if (cache) {
      headers['Cache-Control'] = 'public, max-age=600';
      headers['Last-Modified'] = st.mtime.toUTCString();
      if (!req.headers.range && req.headers['if-none-match'] === etag) {
        stats.requests++; stats.log.push({ method: req.method, path: url.pathname, status: 304 });
        res.writeHead(304, headers); res.end(); return;
      }
    }
    let start = 0, end = size - 1, status = 200;
    // A stale If-Range validator: the whole (new) object instead of the range.
    const range = req.headers['if-range'] && req.headers['if-range'] !== etag ? undefined : req.headers.range;
    if (range) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(range);
      if (!m || (m[1] === '' && m[2] === '')) { res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` }); res.end(); return; }
      if (m[1] === '') { start = Math.max(0, size - Number(m[2])); }
      else { start = Number(m[1]); end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1); }
      if (start >= size || start > end) {
        stats.requests++; stats.log.push({ method: req.method, path: url.pathname, range, status: 416 });
        res.writeHead(416, { ...headers, 'Content-Range': `bytes */${size}` }); res.end(); return;
      }
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
    }
    const len = end - start + 1;
    headers['Content-Length'] = String(req.method === 'HEAD' ? size : len);
    stats.requests++;
    stats.log.push({ method: req.method, path: url.pathname, range: req.headers.range || null, status, authorization: req.headers.authorization || null, depth: req.depth });
    res.writeHead(status, headers);
    if (req.method === 'HEAD') { res.end(); return; }
    stats.bytes += len;
    if (len <= SMALL_READ) {
      // Small ranges (most of a reader's) in one positioned read.
      const buf = Buffer.allocUnsafe(len);
      let got = 0;
      while (got < len) {
        const n = fs.readSync(fd, buf, got, len - got, start + got);
        if (n === 0) break;
        got += n;
      }
      res.end(got === len ? buf : buf.subarray(0, got));
    } else {
      const stream = fs.createReadStream(null, { fd, start, end, autoClose: false });
      stream.on('error', () => res.destroy());
      stream.pipe(res);
    }
  }
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    reset() { stats.requests = 0; stats.bytes = 0; stats.trips = 0; answered = 0; stats.log.length = 0; },
    setFaults(rate, seed = 0x5eed) { faultRate = rate; rng = seed >>> 0 || 1; },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}

// The same server in a child process, for benchmarks: the reader's process then spends no
// time serving (a real server is another machine), and its measured time is its own.
// `stats()` and `reset()` are asynchronous (one IPC message each, outside what is timed).
export async function startRangeServerProcess(root, options = {}) {
  const { fork } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const child = fork(fileURLToPath(import.meta.url), ['--serve', root, JSON.stringify(options)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map();
  let next = 0;
  const ask = (op) => new Promise((resolve) => { const id = next++; waiting.set(id, resolve); child.send({ id, op }); });
  const ready = new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`range server exited (${code})`)));
    child.on('message', (m) => {
      if (m.url) resolve(m.url);
      else { waiting.get(m.id)?.(m.value); waiting.delete(m.id); }
    });
  });
  const url = await ready;
  return {
    url,
    stats: () => ask('stats'),
    reset: () => ask('reset'),
    close: () => new Promise((resolve) => { child.removeAllListeners('exit'); child.once('exit', resolve); child.kill(); }),
  };
}

if (process.argv[2] === '--serve' && process.send) {
  const { fileURLToPath } = await import('node:url');
  if (path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
    const s = await startRangeServer(path.resolve(process.argv[3]), JSON.parse(process.argv[4] || '{}'));
    process.on('message', (m) => {
      if (m.op === 'reset') s.reset();
      process.send({ id: m.id, value: m.op === 'stats' ? { requests: s.stats.requests, bytes: s.stats.bytes, trips: s.stats.trips, log: s.stats.log } : null });
    });
    process.send({ url: s.url });
  }
}

// What the HTTP benchmarks serve from: the range server in its own process, or with
// `SKERRY_BENCH_SERVER=inproc` in the reader's (its serving time then counts in every
// query's, as in the benchmarks before stop 56). Either way `stats()` and `reset()` are async.
// `SKERRY_BENCH_CONNECTIONS=6`: six requests answered at a time (`connections` above — a
// Worker in production, a browser over HTTP/1.1); `where` says so.
export async function startBenchServer(root, options = {}) {
  const connections = Number(process.env.SKERRY_BENCH_CONNECTIONS || 0);
  const opts = { ...options, connections };
  const limit = connections ? `, ${connections} requests at a time` : '';
  if (process.env.SKERRY_BENCH_SERVER === 'inproc') {
    const s = await startRangeServer(root, opts);
    return { url: s.url, where: `in the reader's process${limit}`, stats: async () => s.stats, reset: async () => s.reset(), close: s.close };
  }
  return { ...(await startRangeServerProcess(root, opts)), where: `in its own process${limit}` };
}
