/**
 * `npm run bench:browser` (and the last part of `npm run bench`): real
 * IndexedDB in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): operations/s of oncefetch's `indexedDbStore()` at c=16
 * with group commit (the default) against one transaction per write
 * (`groupCommit: false`); then the browser bundle size (`scripts/size.mjs`).
 * Prints a table and writes `bench/results/browser.json`.
 *
 *   npm run bench:browser -- [--concurrency 16] [--duration 2000] [--rounds 3]
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { formatRate, spread } from './harness.js';

const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '16' },
    duration: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    out: { type: 'string', default: fileURLToPath(new URL('./results/browser.json', import.meta.url)) },
  },
});
const concurrency = Number(values.concurrency);
const ms = Number(values.duration);
const rounds = Number(values.rounds);
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`bench:browser: no Chromium at ${CHROMIUM} (set CHROMIUM_PATH); not run`);
  process.exit(0);
}

const bundle = await build({
  entryPoints: [fileURLToPath(new URL('./browser-page.ts', import.meta.url))],
  bundle: true,
  write: false,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  logLevel: 'error',
});
const script = bundle.outputFiles[0]!.text;
const server = createServer((req, res) => {
  if (req.url === '/page.js') {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(script);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><meta charset="utf-8"><script type="module" src="/page.js"></script>');
});
await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking'],
});
let results: Record<string, number[]>;
let version: string;
try {
  version = browser.version();
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => typeof (window as unknown as { __runBench?: unknown }).__runBench === 'function');
  results = await page.evaluate(([c, d, r]) => (window as unknown as { __runBench: (c: number, d: number, r: number) => Promise<Record<string, number[]>> }).__runBench(c, d, r), [concurrency, ms, rounds] as const);
} finally {
  await browser.close();
  server.close();
}

const perOp = spread(results['per-op'] ?? []);
const grouped = spread(results['grouped'] ?? []);
const ratios = spread((results['grouped'] ?? []).map((g, i) => g / (results['per-op']?.[i] ?? Number.NaN)));
console.log(`real IndexedDB, headless Chromium ${version}, c=${concurrency}, durability 'strict'; an operation = claim + compare-and-set through indexedDbStore()\n`);
console.log('| writes | operations/s, median (min–max) |');
console.log('|---|---:|');
console.log(`| one transaction per write (groupCommit: false) | ${formatRate(perOp.median)} (${formatRate(perOp.min)}–${formatRate(perOp.max)}) |`);
console.log(`| group commit (the default: one transaction per task) | ${formatRate(grouped.median)} (${formatRate(grouped.min)}–${formatRate(grouped.max)}) |`);
console.log(`\ngroup commit vs one transaction per write: ${ratios.median.toFixed(2)}× (${ratios.min.toFixed(2)}–${ratios.max.toFixed(2)}), target ≥ 3×: ${ratios.median >= 3 ? 'met' : 'NOT met'}`);

let size: { minBytes?: number; gzipBytes?: number; budgetBytes?: number; ok?: boolean; lazyGzipBytes?: number } | undefined;
const root = fileURLToPath(new URL('..', import.meta.url));
let sizeOut = '';
try {
  sizeOut = execFileSync(process.execPath, ['scripts/size.mjs', '--json'], { cwd: root, encoding: 'utf8' });
} catch (error) {
  // size.mjs exits 1 over its budget, still printing the measurement
  sizeOut = String((error as { stdout?: unknown }).stdout ?? '');
}
try {
  size = JSON.parse(sizeOut.trim().split('\n').pop() ?? '') as typeof size;
  console.log(`\nbrowser bundle (src/browser.ts with the IndexedDB store, scripts/size.mjs): ${size?.minBytes} B min, ${size?.gzipBytes} B min+gzip (budget ${size?.budgetBytes} B: ${size?.ok === true ? 'within' : 'over'}); explain() loads ${size?.lazyGzipBytes} B min+gzip more on first use`);
} catch {
  console.log('\nbrowser bundle size: scripts/size.mjs gave no measurement');
}

mkdirSync(fileURLToPath(new URL('./results/', import.meta.url)), { recursive: true });
writeFileSync(values.out, `${JSON.stringify({ chromium: version, concurrency, durationMs: ms, rounds, results, perOp, grouped, ratio: ratios, bundle: size }, null, 2)}\n`);
console.log(`wrote ${values.out}`);
