#!/usr/bin/env node
// napi-rs's per-platform layout at pack time: `npm pack` / `npm publish` of `skerry` declare
// every `skerry-<platform>` package (bindings-node/npm/*) as an optional dependency, pinned to
// this version; afterwards the repository's package.json is restored. The repository itself
// never declares them: they are not on the registry until released, and a workspace `npm ci`
// would refuse a lock file without them (decision 29).
//   node scripts/platform-deps.js add|remove
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const dir = path.join(__dirname, '..');
const file = path.join(dir, 'package.json');
const text = fs.readFileSync(file, 'utf8');
const pkg = JSON.parse(text);
const mode = process.argv[2];
if (mode === 'add') {
  const deps = {};
  for (const d of fs.readdirSync(path.join(dir, 'npm')).sort()) {
    const sub = JSON.parse(fs.readFileSync(path.join(dir, 'npm', d, 'package.json'), 'utf8'));
    if (sub.version !== pkg.version) throw new Error(`${sub.name} is at ${sub.version}, skerry at ${pkg.version}`);
    deps[sub.name] = pkg.version;
  }
  pkg.optionalDependencies = deps;
} else if (mode === 'remove') {
  delete pkg.optionalDependencies;
} else {
  console.error('usage: platform-deps.js add|remove');
  process.exit(2);
}
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n');
