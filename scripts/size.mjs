#!/usr/bin/env node
// `npm run size`: min+gzip of the browser entry (src/browser.ts, IndexedDB store
// included) as a browser bundler would ship it: code-split like any bundler
// does with dynamic imports, so `client.explain()`, which loads its code on
// first use, is a lazy chunk, printed apart. The
// budget is for the entry chunk, what a page loads to use oncefetch. Fails
// over the budget, or when a Node-only module (node:*, better-sqlite3,
// undici, pg) got into any chunk.
//
//   node scripts/size.mjs            size, budget check, the ten largest inputs
//   node scripts/size.mjs --json     the same as one JSON line
/* global process, console, URL */
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const BUDGET_BYTES = 12 * 1024;
const root = fileURLToPath(new URL('..', import.meta.url));
const json = process.argv.includes('--json');

const result = await build({
  entryPoints: [`${root}src/browser.ts`],
  absWorkingDir: root,
  bundle: true,
  write: false,
  outdir: `${root}.size-out`,
  splitting: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  metafile: true,
  logLevel: 'error',
});
const gzip = (bytes) => gzipSync(bytes, { level: 9 }).byteLength;
const entryPath = Object.entries(result.metafile.outputs).find(([, o]) => o.entryPoint !== undefined)?.[0];
const entryFile = result.outputFiles.find((f) => f.path.endsWith(`/${entryPath?.split('/').pop()}`));
if (entryFile === undefined) throw new Error('size: esbuild produced no entry chunk');
const minBytes = entryFile.contents.byteLength;
const gzipBytes = gzip(entryFile.contents);
/** Chunks loaded on demand (dynamic imports); shared chunks the entry imports count with the entry. */
const entryImports = new Set((result.metafile.outputs[entryPath].imports ?? []).filter((i) => i.kind === 'import-statement').map((i) => i.path));
let lazyMin = 0;
let lazyGzip = 0;
const lazy = [];
let sharedMin = 0;
let sharedGzip = 0;
for (const file of result.outputFiles) {
  if (file === entryFile) continue;
  const rel = Object.keys(result.metafile.outputs).find((o) => file.path.endsWith(`/${o.split('/').pop()}`));
  const inputs = Object.keys(result.metafile.outputs[rel]?.inputs ?? {}).map((p) => p.replace(/^src\//, ''));
  if (entryImports.has(rel)) {
    sharedMin += file.contents.byteLength;
    sharedGzip += gzip(file.contents);
  } else {
    lazyMin += file.contents.byteLength;
    lazyGzip += gzip(file.contents);
    lazy.push({ inputs, minBytes: file.contents.byteLength, gzipBytes: gzip(file.contents) });
  }
}
const initialMin = minBytes + sharedMin;
const initialGzip = gzipBytes + sharedGzip;

/** Minified bytes per package (node_modules) or per source file. */
const byInput = new Map();
for (const output of Object.values(result.metafile.outputs)) {
  for (const [path, { bytesInOutput }] of Object.entries(output.inputs)) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
    const key = m ? m[1] : path;
    byInput.set(key, (byInput.get(key) ?? 0) + bytesInOutput);
  }
}
const nodeOnly = [...byInput.keys()].filter((k) => /^(node:|better-sqlite3|undici|pg$|pg-)/.test(k));
const largest = [...byInput].sort((a, b) => b[1] - a[1]).slice(0, 10);
const ok = initialGzip <= BUDGET_BYTES && nodeOnly.length === 0;

if (json) {
  console.log(JSON.stringify({ entry: 'src/browser.ts', minBytes: initialMin, gzipBytes: initialGzip, budgetBytes: BUDGET_BYTES, ok, lazyMinBytes: lazyMin, lazyGzipBytes: lazyGzip, lazy, nodeOnly, largest }));
} else {
  console.log(`browser entry (src/browser.ts + IndexedDB store): ${initialMin} B min, ${initialGzip} B min+gzip (budget ${BUDGET_BYTES} B)`);
  console.log(`loaded on demand: ${lazyMin} B min, ${lazyGzip} B min+gzip in ${lazy.length} chunk(s):`);
  for (const chunk of lazy) console.log(`  ${String(chunk.gzipBytes).padStart(7)} B min+gzip  ${chunk.inputs.join(', ')}`);
  console.log('largest inputs, minified bytes (entry and lazy chunks):');
  for (const [name, bytes] of largest) console.log(`  ${String(bytes).padStart(7)}  ${name}`);
  if (nodeOnly.length > 0) console.error(`Node-only modules in the browser bundle: ${nodeOnly.join(', ')}`);
  if (initialGzip > BUDGET_BYTES) console.error(`over budget by ${initialGzip - BUDGET_BYTES} B`);
}
process.exitCode = ok ? 0 : 1;
