#!/usr/bin/env node
// `npm run size`: min+gzip of the browser entry (src/browser.ts, IndexedDB store
// included) as a browser bundler would ship it. Fails over the budget, or when
// a Node-only module (node:*, better-sqlite3, undici, pg) got into the bundle.
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
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  metafile: true,
  logLevel: 'error',
});
const code = result.outputFiles[0].contents;
const minBytes = code.byteLength;
const gzipBytes = gzipSync(code, { level: 9 }).byteLength;

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
const ok = gzipBytes <= BUDGET_BYTES && nodeOnly.length === 0;

if (json) {
  console.log(JSON.stringify({ entry: 'src/browser.ts', minBytes, gzipBytes, budgetBytes: BUDGET_BYTES, ok, nodeOnly, largest }));
} else {
  console.log(`browser entry (src/browser.ts + IndexedDB store): ${minBytes} B min, ${gzipBytes} B min+gzip (budget ${BUDGET_BYTES} B)`);
  console.log('largest inputs, minified bytes:');
  for (const [name, bytes] of largest) console.log(`  ${String(bytes).padStart(7)}  ${name}`);
  if (nodeOnly.length > 0) console.error(`Node-only modules in the browser bundle: ${nodeOnly.join(', ')}`);
  if (gzipBytes > BUDGET_BYTES) console.error(`over budget by ${gzipBytes - BUDGET_BYTES} B`);
}
process.exitCode = ok ? 0 : 1;
