#!/usr/bin/env node
// The `skerry` command line: index administration over the TypeScript API (`require('skerry')`).
// Exit codes: 0 done, 1 Skerry refused or failed (`error E_CODE: message` on stderr),
// 2 usage error, 3 `verify` found entries that do not match the data.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const CONFIG = 'skerry.json';
const VERSION = require('../package.json').version;

const GLOBAL = {
  overlay: { type: 'string', desc: '<url>   the overlay (default: $SKERRY_OVERLAY, then ./skerry.json from `skerry init`)' },
  storage: { type: 'string', multiple: true, desc: '<k=v>   an object_store setting, e.g. aws_endpoint=http://127.0.0.1:9000 (repeatable)' },
  json: { type: 'boolean', desc: '        print the result as JSON' },
  help: { type: 'boolean', short: 'h', desc: '        this help' },
};

const COMMANDS = {
  init: {
    usage: 'skerry init <overlay-url>',
    about: 'Create (or open) an overlay — file:///dir, s3://bucket/prefix, memory:// — and remember it in ./skerry.json.',
    args: ['url'],
    run: async (o, [url], flags) => {
      const overlay = await open(url, flags);
      await overlay.close();
      fs.writeFileSync(CONFIG, JSON.stringify({ overlay: url }, null, 2) + '\n');
      return { result: { overlay: url, config: path.resolve(CONFIG) }, text: `overlay ${url} (saved in ${CONFIG})` };
    },
    noOverlay: true,
  },
  register: {
    usage: 'skerry register <table> <location> [--files a.parquet,b.parquet | --prefix dir/]',
    about: 'Register a table of Parquet files: every *.parquet below <location>, or the listed files. For a table already registered, --files adds those files to it (indexed in the same commit); without --files it is E_EXISTS.',
    args: ['table', 'location'],
    options: {
      files: { type: 'string', desc: '<list>  comma-separated file paths relative to <location>' },
      prefix: { type: 'string', desc: '<dir>   only files below this prefix' },
    },
    run: async (o, [table, location], flags) => {
      const options = {};
      if (flags.files !== undefined) options.files = list(flags.files);
      if (flags.prefix !== undefined) options.prefix = flags.prefix;
      const tables = await o.listTables();
      const existing = tables.find((t) => t.name.toLowerCase() === table.toLowerCase());
      if (existing && options.files !== undefined) {
        const r = await o.registerFiles(existing.name, options.files);
        return { result: r, text: `table ${existing.name}: ${r.files} files added, ${r.rows} rows, ${r.entries} index entries` };
      }
      const t = await o.registerParquetTable(table, location, options);
      return { result: t, text: `table ${t.name}: ${t.files} files, ${t.rows} rows, ${t.fields.length} columns` };
    },
  },
  rewrite: {
    usage: 'skerry rewrite <table> --removed a.parquet,b.parquet --added c.parquet [--row-id-column _row_id]',
    about: 'Swap a rewrite of a Parquet table\'s files in (your compaction or re-sort): the added files hold exactly the removed files\' live rows, each with its row id (the rowId answers report) in the row-id column. Checked by the ids — refused with the first failed check, nothing changed — then committed at once, the indexes\' entries carried over instead of re-read.',
    args: ['table'],
    options: {
      removed: { type: 'string', desc: '<list>  comma-separated registered files the rewrite replaces' },
      added: { type: 'string', desc: '<list>  comma-separated files holding their rows' },
      'row-id-column': { type: 'string', desc: '<name>  the added files\' row-id column (default _row_id)' },
    },
    run: async (o, [table], flags) => {
      const options = { removed: list(flags.removed ?? ''), added: list(flags.added ?? '') };
      if (flags['row-id-column'] !== undefined) options.rowIdColumn = flags['row-id-column'];
      const r = await o.registerRewrite(table, options);
      const m = r.moved;
      return {
        result: r,
        text: `table ${table}: ${m.rows} rows of ${m.sources} files rewritten into ${m.files} (row ids checked), ${m.carried} index entries carried, ${m.derived} derived`,
      };
    },
  },
  'mount-iceberg': {
    usage: 'skerry mount-iceberg <table> <metadata-url>\n       skerry mount-iceberg <table> --catalog <uri> --namespace <ns> --catalog-table <name> [--warehouse <w>] [--scope <s>]',
    about: 'Mount a read-only Iceberg table at its current snapshot: <metadata-url> is its metadata file (…/metadata/00003-….metadata.json) or its table directory; or --catalog, a table of an Iceberg REST catalog read with the credentials it vends, the secret taken from $SKERRY_CATALOG_CREDENTIAL (client_id:client_secret) or $SKERRY_CATALOG_TOKEN, never from the command line. The catalog table (without secrets) is added to ./skerry.json when there is one, so later commands connect with the same variables. Upstream is never written.',
    args: ['table', 'metadata-url?'],
    options: {
      catalog: { type: 'string', desc: '<uri>   the REST catalog\'s base URI' },
      namespace: { type: 'string', desc: '<ns>    the table\'s namespace (levels split at dots)' },
      'catalog-table': { type: 'string', desc: '<name>  the table\'s name in the catalog' },
      warehouse: { type: 'string', desc: '<w>     the catalog warehouse' },
      scope: { type: 'string', desc: '<s>     the OAuth2 scope (default catalog)' },
    },
    run: async (o, [table, url], flags) => {
      let source = url;
      if (flags.catalog !== undefined) {
        if (url !== undefined) throw usage('mount-iceberg: give a <metadata-url> or --catalog, not both');
        if (flags.namespace === undefined || flags['catalog-table'] === undefined) {
          throw usage('mount-iceberg --catalog needs --namespace and --catalog-table');
        }
        const ref = { uri: flags.catalog, namespace: flags.namespace, table: flags['catalog-table'] };
        if (flags.warehouse !== undefined) ref.warehouse = flags.warehouse;
        if (flags.scope !== undefined) ref.scope = flags.scope;
        source = { catalog: withSecrets(ref) };
      } else if (url === undefined) {
        throw usage('mount-iceberg: give a <metadata-url> or --catalog <uri>');
      }
      const t = await o.mountIceberg(table, source);
      let saved = '';
      if (typeof source === 'object' && fs.existsSync(CONFIG)) {
        const c = readConfig();
        const ref = { ...source.catalog };
        delete ref.credential;
        delete ref.token;
        c.catalogs = (Array.isArray(c.catalogs) ? c.catalogs : []).filter((x) => !(x.uri === ref.uri
          && String(x.namespace) === String(ref.namespace) && x.table === ref.table));
        c.catalogs.push(ref);
        fs.writeFileSync(CONFIG, JSON.stringify(c, null, 2) + '\n');
        saved = ` (catalog table saved in ${CONFIG})`;
      }
      return { result: t, text: `table ${t.name} (iceberg): ${t.files} files, ${t.rows} rows, ${t.fields.length} columns${saved}` };
    },
  },
  sync: {
    usage: 'skerry sync <table> [--metadata <metadata-url>] [--wait]',
    about: 'Move a mounted Iceberg table to the upstream\'s current snapshot (the newest metadata file of its directory, or --metadata): added files registered and indexed, removed ones dropped, delete masks refreshed, in one commit. Index work too large for that commit is pending (those files are scanned meanwhile); --wait catches it up in bounded steps, with progress. Then publish.',
    args: ['table'],
    options: {
      metadata: { type: 'string', desc: '<url>   sync to this metadata file' },
      wait: { type: 'boolean', desc: '        catch pending index work up before returning (progress on stderr)' },
    },
    run: async (o, [table], flags) => {
      const r = await o.syncIceberg(table, flags.metadata !== undefined ? { metadataUrl: flags.metadata } : {});
      if (flags.wait && r.pending.length) {
        const progress = makeProgress(flags.json);
        try {
          await o.build(table, { onProgress: progress.step });
        } finally {
          progress.stop();
        }
        r.caughtUp = r.pending;
      }
      const same = r.fromSnapshot === r.snapshotId;
      const text = same
        ? `table ${table}: already at snapshot ${r.snapshotId}`
        : `table ${table}: snapshot ${r.fromSnapshot} -> ${r.snapshotId}: +${r.added.length} files (${r.rowsAdded} rows), -${r.removed.length} files, ${r.masksChanged.length} delete masks changed; read ${r.manifestsRead} manifests, ${r.deleteFilesRead} delete files (${r.requests} requests, ${r.bytes} bytes)` +
          (r.poisoned.length ? `; poisoned: ${r.poisoned.join(', ')}` : '') +
          (r.moved ? (r.moved.refused ? `; not a move: ${r.moved.refused}` : `; a move: ${r.moved.rows} rows of ${r.moved.sources} files into ${r.moved.files} (row ids checked), ` +
            (r.pending.length && !r.moved.carried && !r.moved.derived ? 'its index entries carried by the catch-up build' : `${r.moved.carried} index entries carried, ${r.moved.derived} derived`)) : '') +
          (r.caughtUp ? `; caught up: ${r.caughtUp.join(', ')}` : r.pending.length ? `; pending (scanned until built; \`skerry build ${table}\` or --wait): ${r.pending.join(', ')}` : '');
      return { result: r, text };
    },
  },
  index: {
    usage: 'skerry index create <table> <name> <column>... [--unique] [--kind ordered|bitmap|bloom|fulltext|vector] [--max-cardinality n] [--fpp p] [--tokenizer simple|english] [--no-positions] [--metric l2|cosine|dot] [--m n] [--ef-construction n]\n       skerry index drop <table> <name> [--purge]\n       skerry index list [<table>]',
    about: 'Define, drop or list indexes (ordered; bitmap for low-cardinality columns; bloom to prune files; fulltext for `skerry search`; vector for `skerry nearest`). A column may end in :desc and/or :nulls-first.',
    sub: {
      create: {
        args: ['table', 'name', 'column...'],
        options: {
          unique: { type: 'boolean', desc: '        refuse duplicate keys (E_CONSTRAINT)' },
          kind: { type: 'string', desc: '<kind>  ordered (default) | bitmap (few distinct values; counts) | bloom (prunes files) | fulltext (search) | vector (nearest)' },
          metric: { type: 'string', desc: '<name>  a vector index\'s distance: l2 (default) | cosine | dot' },
          m: { type: 'string', desc: '<n>     kept for older vector definitions (no effect)' },
          'ef-construction': { type: 'string', desc: '<n>     kept for older vector definitions (no effect)' },
          tokenizer: { type: 'string', desc: '<name>  a fulltext index\'s analyzer: simple (default) | english (stop words, stemming)' },
          'no-positions': { type: 'boolean', desc: '        a fulltext index without word positions (smaller; phrases are scanned)' },
          fpp: { type: 'string', desc: '<p>     a bloom filter\'s false-positive probability (default 0.01)' },
          'max-cardinality': { type: 'string', desc: '<n>     a bitmap\'s limit on distinct values per file (default 1000)' },
        },
        run: async (o, [table, name, ...columns], flags) => {
          const cols = columns.map(column);
          const options = { unique: !!flags.unique };
          if (flags.kind !== undefined) options.kind = flags.kind;
          if (flags.tokenizer !== undefined) options.tokenizer = flags.tokenizer;
          if (flags['no-positions']) options.positions = false;
          if (flags.metric !== undefined) options.metric = flags.metric;
          if (flags.m !== undefined) options.m = count(flags.m, '--m');
          if (flags['ef-construction'] !== undefined) options.efConstruction = count(flags['ef-construction'], '--ef-construction');
          if (flags['max-cardinality'] !== undefined) options.maxCardinality = count(flags['max-cardinality'], '--max-cardinality');
          if (flags.fpp !== undefined) {
            options.fpp = Number(flags.fpp);
            if (!Number.isFinite(options.fpp)) throw usage(`--fpp must be a number, not ${flags.fpp}`);
          }
          const i = await o.createIndex(table, name, cols, options);
          return { result: i, text: `${i.kind} index ${table}.${i.name} (${i.state}${i.unique ? ', unique' : ''}) — run \`skerry build ${table}\`` };
        },
      },
      drop: {
        args: ['table', 'name'],
        options: { purge: { type: 'boolean', desc: '        also rewrite bundles without it and delete what it leaves' } },
        run: async (o, [table, name], flags) => {
          const r = await o.dropIndex(table, name, flags.purge ? { purge: true } : undefined);
          return { result: r, text: flags.purge ? `dropped and purged ${table}.${name} (${r.bytes} bytes freed)` : `dropped ${table}.${name}` };
        },
      },
      list: {
        args: ['table?'],
        run: async (o, [table]) => {
          const tables = table ? [table] : (await o.listTables()).map((t) => t.name);
          const rows = [];
          for (const t of tables) {
            for (const i of await o.listIndexes(t)) rows.push({ table: t, index: i.name, kind: i.kind, state: i.state, unique: i.unique, fields: i.fields.join(',') });
          }
          return { result: rows, text: rows.length ? formatTable(rows) : '(no indexes)' };
        },
      },
    },
  },
  build: {
    usage: 'skerry build <table> [--index <name>] [--max-entries n] [--max-bytes n]',
    about: 'Build the table\'s indexes (or one) in bounded steps, with a progress bar on a terminal and one line per step otherwise.',
    args: ['table'],
    options: {
      index: { type: 'string', desc: '<name>  only this index' },
      'max-entries': { type: 'string', desc: '<n>     entries per step (bounds memory)' },
      'max-bytes': { type: 'string', desc: '<n>     entry bytes per step' },
    },
    run: async (o, [table], flags) => {
      const progress = makeProgress(flags.json);
      const options = { onProgress: progress.step };
      if (flags.index !== undefined) options.index = flags.index;
      if (flags['max-entries'] !== undefined) options.maxEntries = count(flags['max-entries'], '--max-entries');
      if (flags['max-bytes'] !== undefined) options.maxBytes = count(flags['max-bytes'], '--max-bytes');
      let r;
      try {
        r = await o.build(table, options);
      } finally {
        progress.stop();
      }
      return { result: r, text: `built ${table}: ${r.filesIndexed} files, ${r.entries} entries, ${r.bundlesWritten} bundles (${r.bytesWritten} bytes)${r.skipped.length ? `, ${r.skipped.length} files skipped` : ''} — run \`skerry publish\`` };
    },
  },
  plan: {
    usage: 'skerry plan <table> [--index <name>] [--pass-entries n] [--runs]',
    about: 'Plan a build for workers elsewhere: one task per data file lacking blobs, printed as JSON lines (one task per line) for `skerry build-bundle` on any machine. With --runs, one task per index whose runs a tier step is due for (after `skerry commit --no-runs`). Writes nothing.',
    args: ['table'],
    options: {
      index: { type: 'string', desc: '<name>  only this index' },
      'pass-entries': { type: 'string', desc: '<n>     entries (rows × indexes) a worker derives in one pass; larger files are built one index at a time' },
      runs: { type: 'boolean', desc: '        plan the tier steps\' runs (workers write them) instead of files' },
    },
    run: async (o, [table], flags) => {
      const options = {};
      if (flags.index !== undefined) options.index = flags.index;
      if (flags.runs) options.runs = true;
      if (flags['pass-entries'] !== undefined) options.passEntries = count(flags['pass-entries'], '--pass-entries');
      const tasks = await o.planBuild(table, options);
      if (flags.json) return { result: tasks.map((t) => JSON.parse(t)), text: null };
      return { result: tasks, text: tasks.join('\n') };
    },
  },
  'build-bundle': {
    usage: 'skerry build-bundle [<tasks.jsonl> | -]',
    about: 'Build the bundles of tasks from `skerry plan` (JSON lines from a file or stdin): reads the data files, writes each bundle to the overlay\'s store and prints one receipt per line for `skerry commit`. Never opens the catalog, so any number run beside the writer; a task built again writes the same bytes.',
    args: ['tasks?'],
    noOverlay: true,
    run: async (_, [file], flags) => {
      const { BundleBuilder } = require('../lib/index.js');
      const builder = BundleBuilder.open(overlayUrl(flags), storageOptions(flags));
      const receipts = [];
      for (const task of jsonLines(file, 'tasks')) receipts.push(await builder.buildBundle(task));
      if (flags.json) return { result: receipts.map((r) => JSON.parse(r)), text: null };
      return { result: receipts, text: receipts.join('\n') };
    },
  },
  commit: {
    usage: 'skerry commit [<receipts.jsonl> | -] [--no-runs]',
    about: 'Commit receipts from `skerry build-bundle` (JSON lines from a file or stdin): each is checked against the catalog and its bundle object; stale ones are refused with their reason (plan again). Then the tier steps due are taken (the runs written here) unless --no-runs leaves them to `skerry plan --runs` and workers; run receipts are committed as their index\'s new run. Then publish.',
    args: ['receipts?'],
    options: {
      'no-runs': { type: 'boolean', desc: '        leave the tier steps\' runs to `skerry plan --runs`' },
    },
    run: async (o, [file], flags) => {
      const r = await o.commitBuild(jsonLines(file, 'receipts'), flags['no-runs'] ? { runs: false } : undefined);
      const lines = [`committed ${r.committed.length} files (${r.entries} entries, ${r.bytes} bytes${r.carried ? `, ${r.carried} blobs carried over a move` : ''}) and ${r.runs.length} runs in ${r.transactions} transactions; refused ${r.refused.length}; left for a local build ${r.left.length}`];
      for (const x of r.refused) lines.push(`  refused ${x.file}: ${x.reason}`);
      for (const x of r.left) lines.push(`  left ${x.file}: ${x.reason}`);
      return { result: r, text: lines.join('\n') };
    },
  },
  publish: {
    usage: 'skerry publish',
    about: 'Publish the catalog as a new immutable manifest version (what readers and skerry-wasm see).',
    args: [],
    run: async (o) => {
      const r = await o.publish();
      return { result: r, text: `published version ${r.version} (${r.path}, ${r.bytes} bytes)` };
    },
  },
  refresh: {
    usage: 'skerry refresh [<table>] [--deep]',
    about: 'Check the registered files against the data (size, version; --deep re-hashes) and mark what changed.',
    args: ['table?'],
    options: { deep: { type: 'boolean', desc: '        re-hash every file' } },
    run: async (o, [table], flags) => {
      const tables = table ? [table] : (await o.listTables()).map((t) => t.name);
      const out = [];
      for (const t of tables) out.push({ table: t, ...(await o.refresh(t, { deep: !!flags.deep })) });
      return {
        result: out,
        text: out.map((r) => `${r.table}: ${r.checked} checked, ${r.changed.length} changed, ${r.missing.length} missing, ${r.unreadable.length} unreadable`).join('\n') || '(no tables)',
      };
    },
  },
  verify: {
    usage: 'skerry verify <table> [<index>]',
    about: 'Re-derive every index entry from the data and compare (exit 3 when something does not match or a file changed; such files are queued for repair by the next build).',
    args: ['table', 'index?'],
    run: async (o, [table, index]) => {
      const names = index ? [index] : (await o.listIndexes(table)).map((i) => i.name);
      const out = [];
      for (const n of names) out.push({ table, index: n, ...(await o.verify(table, n)) });
      const bad = out.some((r) => r.missing || r.dead || r.mismatched || r.repairsQueued);
      return {
        result: out,
        code: bad ? 3 : 0,
        text: out.map((r) => `${r.table}.${r.index}: ${r.files} files, ${r.stored}/${r.expected} entries, ${r.missing} missing, ${r.dead} dead, ${r.mismatched} mismatched${r.certified ? ', certified' : ''}${r.repairsQueued ? `, ${r.repairsQueued} repairs queued` : ''}`).join('\n') || '(no indexes)',
      };
    },
  },
  vacuum: {
    usage: 'skerry vacuum [--retain n] [--grace seconds]',
    about: 'Delete what no retained manifest version references (old bundles, manifests, dropped indexes), keeping objects younger than the grace period (in-flight fan-out bundles).',
    args: [],
    options: {
      retain: { type: 'string', desc: '<n>     published versions to keep (default 1)' },
      grace: { type: 'string', desc: '<s>     keep unreferenced objects younger than this many seconds (default 3600; 0: none)' },
    },
    run: async (o, args, flags) => {
      const opts = {};
      if (flags.retain !== undefined) opts.retainVersions = count(flags.retain, '--retain');
      if (flags.grace !== undefined) opts.graceSeconds = count(flags.grace, '--grace');
      const r = await o.vacuum(opts);
      return { result: r, text: `vacuumed: ${r.artifacts} artifacts, ${r.manifests} manifests, ${r.claims} claims, ${r.bytes} bytes${r.young ? `; kept ${r.young} unreferenced objects younger than the grace period (${r.youngBytes} bytes)` : ''}` };
    },
  },
  query: {
    usage: 'skerry query <table> [--where JSON] [--columns a,b] [--limit n] [--format table|json]',
    about: 'Answer a query from the published overlay (read-only: never fences a writer). Indexes where they hold, scans where not.',
    args: ['table'],
    options: {
      where: { type: 'string', desc: '<json>  e.g. \'{"customer":"customer-00042","amount":{"gt":600}}\'' },
      columns: { type: 'string', desc: '<list>  comma-separated columns to return' },
      limit: { type: 'string', desc: '<n>     at most n rows' },
      format: { type: 'string', desc: '<fmt>   table (default on a terminal) | json' },
      stats: { type: 'boolean', desc: '        print how the query was answered (stderr)' },
    },
    readOnly: true,
    run: async (o, [table], flags) => {
      const options = whereOption(flags);
      if (flags.columns !== undefined) options.columns = list(flags.columns);
      if (flags.limit !== undefined) options.limit = count(flags.limit, '--limit');
      const r = await o.query(table, options);
      const format = flags.format || (flags.json || !process.stdout.isTTY ? 'json' : 'table');
      if (!['table', 'json'].includes(format)) throw usage(`--format must be table or json, not ${format}`);
      if (flags.stats) {
        const s = r.stats;
        process.stderr.write(`${r.rows.length} rows; index ${s.index ?? '(none)'}; files ${s.files}: ${s.filesByIndex} by index, ${s.filesScanned} scanned, ${s.filesPruned} pruned, ${s.filesRejected} rejected; ${s.requests} requests, ${s.bytes} bytes, ${s.elapsedMs} ms\n`);
      }
      for (const w of r.warnings) process.stderr.write(`warning: ${w.message}\n`);
      return { result: r.rows, text: format === 'json' ? null : r.rows.length ? formatTable(r.rows) : '(no rows)' };
    },
  },
  search: {
    usage: 'skerry search <table> <text> [--phrase] [--and] [--k n] [--index name] [--where JSON] [--columns a,b] [--format table|json] [--stats]',
    about: 'BM25 top-k of a fulltext index from the published overlay, best first (a _score column leads each row).',
    args: ['table', 'text'],
    options: {
      phrase: { type: 'boolean', desc: '        the text is a phrase (its words in order)' },
      and: { type: 'boolean', desc: '        rows holding every word (default: any)' },
      k: { type: 'string', desc: '<n>     results (default 10)' },
      index: { type: 'string', desc: '<name>  the fulltext index (default: the table\'s only one)' },
      where: { type: 'string', desc: '<json>  a pre-filter, e.g. \'{"lang":"en"}\'' },
      columns: { type: 'string', desc: '<list>  comma-separated columns to return' },
      format: { type: 'string', desc: '<fmt>   table (default on a terminal) | json' },
      stats: { type: 'boolean', desc: '        print how the search was answered (stderr)' },
    },
    readOnly: true,
    run: async (o, [table, text], flags) => {
      const options = { ...whereOption(flags), query: text };
      if (flags.phrase) options.phrase = true;
      if (flags.and) options.operator = 'and';
      if (flags.k !== undefined) options.k = count(flags.k, '--k');
      if (flags.index !== undefined) options.index = flags.index;
      if (flags.columns !== undefined) options.columns = list(flags.columns);
      const r = await o.search(table, options);
      const format = flags.format || (flags.json || !process.stdout.isTTY ? 'json' : 'table');
      if (!['table', 'json'].includes(format)) throw usage(`--format must be table or json, not ${format}`);
      if (flags.stats) {
        const s = r.stats;
        process.stderr.write(`${r.rows.length} rows; index ${s.index}; terms ${r.bm25.terms.map((t) => `${t.term}:${t.df}`).join(' ') || '-'} over ${r.bm25.docs} documents; files ${s.files}: ${s.filesByIndex} by index, ${s.filesScanned} scanned, ${s.filesRejected} rejected; ${s.requests} requests, ${s.rounds} rounds, ${s.elapsedMs} ms\n`);
      }
      for (const w of r.warnings) process.stderr.write(`warning: ${w.message}\n`);
      const rows = r.rows.map((row, i) => ({ _score: Number(r.scores[i].toFixed(6)), ...row }));
      return { result: rows, text: format === 'json' ? null : rows.length ? formatTable(rows) : '(no rows)' };
    },
  },
  nearest: {
    usage: 'skerry nearest <table> <vector JSON> [--k n] [--nprobe n] [--ef n] [--column c] [--index name] [--where JSON] [--columns a,b] [--format table|json] [--stats]',
    about: 'The k rows nearest to a vector through a vector index of the published overlay, nearest first (a _distance column leads each row).',
    args: ['table', 'vector'],
    options: {
      k: { type: 'string', desc: '<n>     results (default 10)' },
      nprobe: { type: 'string', desc: '<n>     partitions probed, nearest first (default 48)' },
      ef: { type: 'string', desc: '<n>     candidates re-ranked exactly (default 100)' },
      column: { type: 'string', desc: '<name>  the vector column (default: the only vector index\'s)' },
      index: { type: 'string', desc: '<name>  the vector index' },
      where: { type: 'string', desc: '<json>  a pre-filter, e.g. \'{"lang":"en"}\'' },
      columns: { type: 'string', desc: '<list>  comma-separated columns to return' },
      format: { type: 'string', desc: '<fmt>   table (default on a terminal) | json' },
      stats: { type: 'boolean', desc: '        print how the search was answered (stderr)' },
    },
    readOnly: true,
    run: async (o, [table, text], flags) => {
      let vector;
      try {
        vector = JSON.parse(text);
      } catch {
        throw usage(`the vector must be a JSON array of numbers, not ${text}`);
      }
      if (!Array.isArray(vector)) throw usage(`the vector must be a JSON array of numbers, not ${text}`);
      const options = { ...whereOption(flags), vector };
      if (flags.k !== undefined) options.k = count(flags.k, '--k');
      if (flags.nprobe !== undefined) options.nprobe = count(flags.nprobe, '--nprobe');
      if (flags.ef !== undefined) options.ef = count(flags.ef, '--ef');
      if (flags.column !== undefined) options.column = flags.column;
      if (flags.index !== undefined) options.index = flags.index;
      if (flags.columns !== undefined) options.columns = list(flags.columns);
      const r = await o.nearest(table, options);
      const format = flags.format || (flags.json || !process.stdout.isTTY ? 'json' : 'table');
      if (!['table', 'json'].includes(format)) throw usage(`--format must be table or json, not ${format}`);
      if (flags.stats) {
        const s = r.stats;
        process.stderr.write(`${r.rows.length} rows; index ${s.index} (${r.metric}); files ${s.files}: ${s.filesByIndex} by index, ${s.filesScanned} scanned, ${s.filesPruned} pruned, ${s.filesRejected} rejected; ${s.evaluated} codes compared; ${s.requests} requests, ${s.rounds} rounds, ${s.elapsedMs} ms\n`);
      }
      for (const w of r.warnings) process.stderr.write(`warning: ${w.message}\n`);
      const rows = r.rows.map((row, i) => ({ _distance: r.distances[i], ...row }));
      return { result: rows, text: format === 'json' ? null : rows.length ? formatTable(rows) : '(no rows)' };
    },
  },
  count: {
    usage: 'skerry count <table> [--where JSON] [--stats]',
    about: 'Count the rows matching --where from the published overlay: from indexes alone when every column has one, scans otherwise.',
    args: ['table'],
    options: {
      where: { type: 'string', desc: '<json>  e.g. \'{"status":{"in":["paid","sent"]},"region":"eu"}\'' },
      stats: { type: 'boolean', desc: '        print how the count was answered (stderr)' },
    },
    readOnly: true,
    run: async (o, [table], flags) => {
      const options = whereOption(flags);
      const r = await o.count(table, options);
      if (flags.stats) {
        const s = r.stats;
        process.stderr.write(`index ${s.index ?? '(none)'}${s.indexKind ? ` (${s.indexKind})` : ''} on ${s.indexColumns.join(', ') || '-'}; files ${s.files}: ${s.filesByIndex} by index, ${s.filesScanned} scanned, ${s.filesPruned} pruned, ${s.filesRejected} rejected; ${s.requests} requests, ${s.bytes} bytes, ${s.elapsedMs} ms\n`);
      }
      for (const w of r.warnings) process.stderr.write(`warning: ${w.message}\n`);
      return { result: { count: r.count }, text: String(r.count) };
    },
  },
  stats: {
    usage: 'skerry stats [<table>]',
    about: 'Tables (files, rows) and their indexes (state, columns).',
    args: ['table?'],
    run: async (o, [table]) => {
      const tables = (await o.listTables()).filter((t) => !table || t.name === table.toLowerCase());
      if (table && tables.length === 0) throw Object.assign(new Error(`no table ${table}`), { code: 'E_NOT_FOUND' });
      const out = [];
      for (const t of tables) {
        const ix = await o.listIndexes(t.name);
        out.push({ table: t.name, files: t.files, rows: t.rows, columns: t.fields.length, indexes: ix.map((i) => `${i.name}(${i.state}${i.unique ? ',unique' : ''})`).join(' ') });
      }
      return { result: out, text: out.length ? formatTable(out) : '(no tables)' };
    },
  },
};

// `{ where }` from `--where JSON` (a usage error when it is not JSON).
function whereOption(flags) {
  if (flags.where === undefined) return {};
  try {
    return { where: JSON.parse(flags.where) };
  } catch (e) {
    throw usage(`--where is not JSON: ${e.message}`);
  }
}

function usage(message) {
  return Object.assign(new Error(message), { usage: true });
}

function list(s) {
  return s.split(',').map((x) => x.trim()).filter(Boolean);
}

function count(s, name) {
  if (!/^\d+$/.test(s)) throw usage(`${name} must be a non-negative integer`);
  return Number(s);
}

// `amount:desc:nulls-first` → { name, direction, nulls }.
function column(spec) {
  const [name, ...mods] = spec.split(':');
  if (!mods.length) return name;
  const c = { name };
  for (const m of mods) {
    if (m === 'desc' || m === 'asc') c.direction = m;
    else if (m === 'nulls-first' || m === 'nulls-last') c.nulls = m === 'nulls-first' ? 'first' : 'last';
    else throw usage(`unknown column modifier :${m} in ${spec} (asc, desc, nulls-first, nulls-last)`);
  }
  return c;
}

function cell(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object' && 'unscaled' in v && 'scale' in v) return decimal(v);
  if (typeof v === 'object') return JSON.stringify(v, replacer);
  return String(v);
}

function decimal({ unscaled, scale }) {
  const neg = unscaled < 0n;
  let s = (neg ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  if (scale > 0) s = `${s.slice(0, -scale)}.${s.slice(-scale)}`;
  return neg ? `-${s}` : s;
}

function replacer(_k, v) {
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (v && typeof v === 'object' && typeof v.unscaled === 'bigint') return decimal(v);
  return v;
}

function formatTable(rows) {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = rows.map((r) => cols.map((c) => cell(r[c])));
  const width = cols.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (vals) => vals.map((v, i) => v.padEnd(width[i])).join('  ').trimEnd();
  return [line(cols), line(width.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

// Progress of `build`: a bar per phase on a terminal, one line per commit otherwise. A whole
// build reports `{ phase, rowsDone, rowsTotal }` (phase `build` for the pass over all
// indexes, `build <index>` after it); a stepped one each step's report.
function makeProgress(quiet) {
  const tty = process.stderr.isTTY && !quiet;
  let bar = null;
  let current = null;
  return {
    step(s) {
      const label = s.phase ?? `build ${s.index}`;
      if (tty) {
        if (current !== label) {
          if (bar) bar.stop();
          const { SingleBar, Presets } = require('cli-progress');
          bar = new SingleBar({ format: `${label} [{bar}] {percentage}% | {value}/{total} rows`, stream: process.stderr, hideCursor: true }, Presets.shades_classic);
          bar.start(s.rowsTotal, 0);
          current = label;
        }
        bar.setTotal(s.rowsTotal);
        bar.update(s.rowsDone);
      } else if (!quiet) {
        const pct = s.rowsTotal ? Math.floor((100 * s.rowsDone) / s.rowsTotal) : 100;
        const step = s.step !== undefined ? `step ${s.step}, ` : '';
        process.stderr.write(`${label}: ${step}${s.rowsDone}/${s.rowsTotal} rows (${pct}%)${s.done ? `, ${s.state}` : ''}\n`);
      }
    },
    stop() {
      if (bar) bar.stop();
    },
  };
}

function readConfig() {
  try {
    return JSON.parse(fs.readFileSync(CONFIG, 'utf8'));
  } catch (e) {
    throw usage(`${CONFIG} is not JSON: ${e.message}`);
  }
}

// A catalog table with this process's secret: $SKERRY_CATALOG_CREDENTIAL or
// $SKERRY_CATALOG_TOKEN (never a file or the command line). Undefined without one.
function withSecrets(ref) {
  const c = { ...ref };
  if (process.env.SKERRY_CATALOG_CREDENTIAL) c.credential = process.env.SKERRY_CATALOG_CREDENTIAL;
  else if (process.env.SKERRY_CATALOG_TOKEN) c.token = process.env.SKERRY_CATALOG_TOKEN;
  return c;
}

function overlayUrl(flags) {
  if (flags.overlay) return flags.overlay;
  if (process.env.SKERRY_OVERLAY) return process.env.SKERRY_OVERLAY;
  if (fs.existsSync(CONFIG)) {
    const c = readConfig();
    if (typeof c.overlay === 'string') return c.overlay;
  }
  throw usage('no overlay: pass --overlay <url>, set SKERRY_OVERLAY, or run `skerry init <url>` here first');
}

function storageOptions(flags) {
  const options = {};
  if (flags.storage) {
    options.storage = {};
    for (const kv of flags.storage) {
      const i = kv.indexOf('=');
      if (i < 1) throw usage(`--storage takes key=value, not ${kv}`);
      options.storage[kv.slice(0, i)] = kv.slice(i + 1);
    }
  }
  return options;
}

function open(url, flags, readOnly) {
  const { Overlay } = require('../lib/index.js');
  const options = storageOptions(flags);
  if (readOnly) options.readOnly = true;
  // The catalog tables of ./skerry.json, connected when this process has a secret for them.
  if (fs.existsSync(CONFIG) && (process.env.SKERRY_CATALOG_CREDENTIAL || process.env.SKERRY_CATALOG_TOKEN)) {
    const c = readConfig();
    if (Array.isArray(c.catalogs) && c.catalogs.length) options.catalogs = c.catalogs.map(withSecrets);
  }
  return Overlay.open(url, options);
}

// The non-empty lines of `file` (stdin for none or `-`): one JSON text each.
function jsonLines(file, what) {
  let text;
  try {
    text = fs.readFileSync(file === undefined || file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw usage(`cannot read ${what} from ${file ?? 'stdin'}: ${e.message}`);
  }
  return text.split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
}

function optionsOf(spec) {
  const out = {};
  for (const [k, v] of Object.entries({ ...GLOBAL, ...(spec.options || {}) })) {
    out[k] = { type: v.type };
    if (v.short) out[k].short = v.short;
    if (v.multiple) out[k].multiple = true;
  }
  return out;
}

function optionLine(k, v) {
  const m = /^(<[^>]+>)?\s*(.*)$/.exec(v.desc);
  return `  ${`--${k}${m[1] ? ` ${m[1]}` : ''}`.padEnd(22)} ${m[2]}`;
}

function help(name, spec, sub) {
  const lines = [];
  if (!name) {
    lines.push(`skerry ${VERSION} — overlay indexes beside Parquet tables`, '', 'Usage: skerry <command> [options]', '', 'Commands:');
    const pad = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
    for (const [n, c] of Object.entries(COMMANDS)) lines.push(`  ${n.padEnd(pad)} ${c.about}`);
    lines.push('', 'Options:');
    for (const [k, v] of Object.entries(GLOBAL)) lines.push(optionLine(k, v));
    lines.push('', 'Run `skerry <command> --help` for a command. Exit codes: 0 done, 1 error (code on stderr), 2 usage, 3 verify found mismatches.');
    return lines.join('\n');
  }
  lines.push(`Usage: ${spec.usage}`, '', spec.about, '');
  const opts = { ...(sub ? sub.options : spec.options), ...(spec.sub && !sub ? Object.assign({}, ...Object.values(spec.sub).map((s) => s.options || {})) : {}) };
  if (Object.keys(opts).length) {
    lines.push('Options:');
    for (const [k, v] of Object.entries(opts)) lines.push(optionLine(k, v));
    lines.push('');
  }
  lines.push('Global options:');
  for (const [k, v] of Object.entries(GLOBAL)) lines.push(optionLine(k, v));
  return lines.join('\n');
}

async function main(argv) {
  if (argv[0] === '--version' || argv[0] === '-v') return void console.log(VERSION);
  const name = argv[0];
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return 0;
  }
  const cmd = COMMANDS[name];
  if (!cmd) throw usage(`unknown command ${name} (run skerry --help)`);
  let spec = cmd;
  let rest = argv.slice(1);
  if (cmd.sub) {
    if (rest[0] === undefined || rest[0] === '--help' || rest[0] === '-h') {
      console.log(help(name, cmd));
      return rest[0] === undefined ? 2 : 0;
    }
    spec = cmd.sub[rest[0]];
    if (!spec) throw usage(`unknown subcommand ${name} ${rest[0]} (${Object.keys(cmd.sub).join(', ')})`);
    rest = rest.slice(1);
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: optionsOf(spec), allowPositionals: true, strict: true });
  } catch (e) {
    throw usage(e.message);
  }
  const { values: flags, positionals } = parsed;
  if (flags.help) {
    console.log(help(name, cmd, cmd.sub ? spec : undefined));
    return 0;
  }
  const required = spec.args.filter((a) => !a.endsWith('?') && !a.endsWith('...')).length;
  const variadic = spec.args.some((a) => a.endsWith('...'));
  const max = variadic ? Infinity : spec.args.length;
  if (positionals.length < required + (variadic ? 1 : 0) || positionals.length > max) {
    const line = cmd.usage.split('\n').map((l) => l.trim()).find((l) => !cmd.sub || l.startsWith(`skerry ${name} ${argv[1]} `)) || cmd.usage;
    throw usage(`wrong arguments; expected: ${line}`);
  }
  let o = null;
  try {
    if (!cmd.noOverlay) o = await open(overlayUrl(flags), flags, cmd.readOnly);
    const out = await spec.run(o, positionals, flags);
    if (flags.json || out.text === null) console.log(JSON.stringify(out.result, replacer, 2));
    else console.log(out.text);
    return out.code || 0;
  } finally {
    if (o) await o.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code || 0;
  },
  (e) => {
    if (e && e.usage) {
      process.stderr.write(`usage error: ${e.message}\n`);
      process.exitCode = 2;
      return;
    }
    const code = e && e.code ? e.code : 'E_INTERNAL';
    process.stderr.write(`error ${code}: ${e && e.message ? e.message : e}\n`);
    process.exitCode = 1;
  },
);
