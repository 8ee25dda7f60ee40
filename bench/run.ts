/**
 * `npm run bench`: one run, one loopback provider, every client side by side at
 * each concurrency; repeats interleaved so each repeat is a paired comparison;
 * medians and spread (min–max over repeats); ratios per repeat against each
 * baseline; then the retry-amplification simulation; then the browser part
 * (bench/browser.ts: real IndexedDB in headless Chromium, group commit against
 * one transaction per write, and the browser bundle size). Writes
 * `bench/results/latest.json` (and `browser.json` beside it).
 *
 *   npm run bench -- [--duration 500] [--warmup 500] [--repeats 9]
 *                    [--concurrency 1,16,64] [--only sqlite,ky] [--out file.json]
 *                    [--no-browser]
 *
 * @module
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { amplificationReport, formatAmplification } from './amplification.js';
import { formatRate, formatRatio, formatUs, runLoad, spread, startBenchProvider } from './harness.js';
import type { LoadResult, Spread } from './harness.js';
import { VARIANTS } from './variants.js';
import type { Instance } from './variants.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '500' },
    warmup: { type: 'string', default: '500' },
    repeats: { type: 'string', default: '9' },
    concurrency: { type: 'string', default: '1,16,64' },
    only: { type: 'string' },
    out: { type: 'string', default: fileURLToPath(new URL('./results/latest.json', import.meta.url)) },
    browser: { type: 'boolean', default: true },
  },
  allowNegative: true,
});
const durationMs = Number(values.duration);
const warmupMs = Number(values.warmup);
const repeats = Number(values.repeats);
const levels = values.concurrency.split(',').map(Number);
const only = values.only?.split(',').map((s) => s.trim().toLowerCase());
const variants = VARIANTS.filter((v) => only === undefined || only.some((o) => v.name.toLowerCase().includes(o)));
for (const [name, n] of [['duration', durationMs], ['warmup', warmupMs], ['repeats', repeats]] as const) {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`--${name} must be a non-negative number`);
}

const BASELINES = ['oncefetch transport', 'undici fetch', 'global fetch', 'p-retry + fetch', 'ky', 'got'];
const PEERS = ['p-retry + fetch', 'ky', 'got'];

type Cell = LoadResult[];
const results = new Map<string, Map<number, Cell>>();
const cell = (variant: string, c: number): Cell => {
  let byC = results.get(variant);
  if (byC === undefined) results.set(variant, (byC = new Map()));
  let list = byC.get(c);
  if (list === undefined) byC.set(c, (list = []));
  return list;
};

const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? 'unknown',
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  platform: `${process.platform} ${process.arch}`,
  loadAverageAtStart: loadavg().map((l) => Number(l.toFixed(2))),
  startedAt: new Date().toISOString(),
};

const dir = mkdtempSync(join(tmpdir(), 'oncefetch-bench-'));
const provider = await startBenchProvider();
const total = levels.length * repeats * variants.length;
let done = 0;
const startedAt = performance.now();
console.log(`oncefetch bench: ${variants.length} clients × c=${levels.join('/')} × ${repeats} interleaved rounds of ${durationMs} ms (after ${warmupMs} ms warm-up each)`);
console.log(`machine: ${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, load ${machine.loadAverageAtStart.join(' ')}`);
try {
  for (const c of levels) {
    // Every client is set up once per level and warmed; then short slices, interleaved and
    // rotated each round, so that a burst of machine noise hits every client alike.
    const instances: Instance[] = [];
    for (const variant of variants) instances.push(await variant.setup(provider.url, dir));
    try {
      for (const instance of instances) await runLoad(instance.send, c, warmupMs, 0);
      for (let r = 0; r < repeats; r++) {
        for (let k = 0; k < variants.length; k++) {
          const i = (k + r) % variants.length;
          const variant = variants[i]!;
          const result = await runLoad(instances[i]!.send, c, durationMs, 0);
          cell(variant.name, c)[r] = result;
          if (result.errors > 0) console.warn(`\n  ${variant.name} c=${c}: ${result.errors} errors, first: ${result.firstError}`);
          done++;
          process.stdout.write(`\r  ${done}/${total} slices, ${((performance.now() - startedAt) / 1000).toFixed(0)} s`);
        }
      }
    } finally {
      for (const instance of instances) await instance.close();
    }
  }
} finally {
  process.stdout.write('\n');
  const counted = await provider.stop();
  console.log(`provider: ${counted.requests} requests, ${counted.effects} effects, ${counted.replays} replays`);
  rmSync(dir, { recursive: true, force: true });
}

/** Per-repeat ratio of `a` to `b` (paired by repeat index). */
function ratio(a: string, b: string | ((r: number) => number), c: number, field: 'rps' | 'p50Us' | 'cpuUs' = 'rps'): Spread {
  const xs = results.get(a)?.get(c) ?? [];
  const out: number[] = [];
  xs.forEach((x, r) => {
    const denom = typeof b === 'function' ? b(r) : results.get(b)?.get(c)?.[r]?.[field];
    if (denom !== undefined && denom > 0) out.push(x[field] / denom);
  });
  return spread(out);
}

const bestPeer = (c: number) => (r: number): number =>
  Math.max(...PEERS.map((p) => results.get(p)?.get(c)?.[r]?.rps ?? 0));

const summary = variants.map((v) => ({
  name: v.name,
  kind: v.kind,
  byConcurrency: Object.fromEntries(
    levels.map((c) => {
      const runs = results.get(v.name)?.get(c) ?? [];
      return [
        c,
        {
          rps: spread(runs.map((x) => x.rps)),
          cpuUs: spread(runs.map((x) => x.cpuUs)),
          p50Us: spread(runs.map((x) => x.p50Us)),
          p99Us: spread(runs.map((x) => x.p99Us)),
          errors: runs.reduce((n, x) => n + x.errors, 0),
          vs: Object.fromEntries(BASELINES.filter((b) => b !== v.name && results.has(b)).map((b) => [b, ratio(v.name, b, c)])),
          vsBestPeer: ratio(v.name, bestPeer(c), c),
        },
      ];
    }),
  ),
}));

// The table: requests/s and latency, median (min–max) over repeats.
const lines: string[] = [];
lines.push(`| client | ${levels.map((c) => `c=${c} req/s`).join(' | ')} | ${levels.map((c) => `c=${c} p50 / p99`).join(' | ')} | ${levels.map((c) => `c=${c} CPU/req`).join(' | ')} |`);
lines.push(`|---|${levels.map(() => '---:').join('|')}|${levels.map(() => '---:').join('|')}|${levels.map(() => '---:').join('|')}|`);
for (const s of summary) {
  const rates = levels.map((c) => {
    const x = s.byConcurrency[c]!;
    return `${formatRate(x.rps.median)} (${formatRate(x.rps.min)}–${formatRate(x.rps.max)})`;
  });
  const lat = levels.map((c) => {
    const x = s.byConcurrency[c]!;
    return `${formatUs(x.p50Us.median)} / ${formatUs(x.p99Us.median)}`;
  });
  const cpu = levels.map((c) => formatUs(s.byConcurrency[c]!.cpuUs.median));
  lines.push(`| ${s.name} | ${rates.join(' | ')} | ${lat.join(' | ')} | ${cpu.join(' | ')} |`);
}
console.log('\nrequests/s median (min–max) over rounds; latency and client CPU per request: medians over rounds\n');
console.log(lines.join('\n'));

// Ratios against each baseline, paired per repeat.
const onceNames = summary.filter((s) => s.kind === 'oncefetch' || s.name === 'oncefetch transport').map((s) => s.name);
const ratioLines: string[] = [];
for (const c of levels) {
  const baselines = BASELINES.filter((b) => results.has(b));
  ratioLines.push(`| c=${c} | ${baselines.join(' | ')} | best peer |`);
  ratioLines.push(`|---|${baselines.map(() => '---:').join('|')}|---:|`);
  for (const name of onceNames) {
    const row = summary.find((s) => s.name === name)!.byConcurrency[c]!;
    ratioLines.push(`| ${name} | ${baselines.map((b) => (b === name ? '1' : formatRatio(row.vs[b]!))).join(' | ')} | ${formatRatio(row.vsBestPeer)} |`);
  }
  ratioLines.push('');
}
console.log('\nthroughput ratios, median (min–max) of per-repeat ratios\n');
console.log(ratioLines.join('\n'));

// The targets of the performance issue.
const has = (n: string): boolean => results.has(n);
const addedP50 = (name: string): Spread => {
  const xs = results.get(name)?.get(1) ?? [];
  const base = results.get('oncefetch transport')?.get(1) ?? [];
  return spread(xs.map((x, r) => x.p50Us - (base[r]?.p50Us ?? Number.NaN)));
};
const targets: Array<{ target: string; goal: string; measured: string; met: boolean | undefined; value: Spread }> = [];
if (levels.includes(16) && has('oncefetch sqlite')) {
  if (PEERS.some(has)) {
    const v = ratio('oncefetch sqlite', bestPeer(16), 16);
    targets.push({ target: 'default durable client vs best of ky/got/p-retry+fetch, c=16', goal: '≥ 2×', measured: formatRatio(v), met: v.median >= 2, value: v });
  }
  if (has('oncefetch transport')) {
    const v = ratio('oncefetch sqlite', 'oncefetch transport', 16);
    targets.push({ target: 'durable store overhead vs same transport, no persistence, c=16', goal: '≥ 0.8× (≤ 20 %)', measured: formatRatio(v), met: v.median >= 0.8, value: v });
    const cpu = ratio('oncefetch sqlite', 'oncefetch transport', 16, 'cpuUs');
    targets.push({ target: '  (client CPU per request, same pair, c=16)', goal: 'info', measured: formatRatio(cpu), met: undefined, value: cpu });
  }
}
if (levels.includes(16) && has('oncefetch sqlite') && has('oncefetch memory')) {
  // The other reading of "same transport, no persistence": the same client on the same transport with the memory store.
  const v = ratio('oncefetch sqlite', 'oncefetch memory', 16);
  targets.push({ target: '  (same pair against oncefetch with the memory store, c=16)', goal: 'info', measured: formatRatio(v), met: undefined, value: v });
  if (has('oncefetch sqlite power-loss')) {
    const p = ratio('oncefetch sqlite power-loss', 'oncefetch memory', 16);
    targets.push({ target: '  (power-loss-durable against oncefetch with the memory store, c=16)', goal: 'info', measured: formatRatio(p), met: undefined, value: p });
  }
}
if (levels.includes(16) && has('oncefetch sqlite power-loss') && has('oncefetch transport')) {
  const v = ratio('oncefetch sqlite power-loss', 'oncefetch transport', 16);
  targets.push({ target: 'power-loss-durable vs no persistence, c=16', goal: '≥ 0.7×', measured: formatRatio(v), met: v.median >= 0.7, value: v });
}
if (levels.includes(1) && has('oncefetch sqlite') && has('oncefetch transport')) {
  const v = addedP50('oncefetch sqlite');
  targets.push({ target: 'added p50 latency at c=1 (default durable)', goal: '≤ 150 µs', measured: `${formatUs(v.median)} (${formatUs(v.min)}–${formatUs(v.max)})`, met: v.median <= 150, value: v });
}
console.log('\ntargets (paired per repeat; median (min–max))\n');
type Target = (typeof targets)[number];
const formatTarget = (t: Target): string =>
  `  ${t.met === undefined ? '       ' : t.met ? 'MET    ' : 'NOT MET'}  ${t.target}: ${t.measured}${t.met === undefined ? '' : `, goal ${t.goal}`}`;
for (const t of targets) console.log(formatTarget(t));

const amplification = amplificationReport();
console.log(`\n${formatAmplification(amplification)}`);

// Last, the browser: real IndexedDB in headless Chromium and the bundle size (bench/browser.ts), in this report.
let browser: unknown;
if (values.browser) {
  console.log('\nbrowser (bench/browser.ts)\n');
  const browserOut = join(dirname(values.out), 'browser.json');
  const tsx = createRequire(import.meta.url).resolve('tsx/esm');
  const run = spawnSync(process.execPath, ['--import', tsx, fileURLToPath(new URL('./browser.ts', import.meta.url)), '--out', browserOut], { stdio: 'inherit' });
  if (run.status === 0 && existsSync(browserOut)) {
    browser = JSON.parse(readFileSync(browserOut, 'utf8')) as unknown;
    const ratio = (browser as { ratio?: Spread }).ratio;
    if (ratio !== undefined) {
      const target: Target = { target: 'IndexedDB group commit vs one transaction per write, c=16 (Chromium)', goal: '≥ 3×', measured: formatRatio(ratio), met: ratio.median >= 3, value: ratio };
      targets.push(target);
      console.log(formatTarget(target));
    }
  } else {
    console.log(`bench/browser.ts did not run (exit ${String(run.status)})`);
  }
}

const out = values.out;
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  `${JSON.stringify(
    {
      machine: { ...machine, loadAverageAtEnd: loadavg().map((l) => Number(l.toFixed(2))), seconds: Math.round((performance.now() - startedAt) / 1000) },
      settings: { durationMs, warmupMs, repeats, concurrency: levels, request: 'POST /orders, ~150-byte JSON body, Idempotency-Key' },
      summary,
      runs: Object.fromEntries([...results].map(([name, byC]) => [name, Object.fromEntries(byC)])),
      targets,
      amplification,
      browser,
      table: lines.join('\n'),
      ratios: ratioLines.join('\n'),
    },
    null,
    2,
  )}\n`,
);
console.log(`\nwrote ${out}`);
