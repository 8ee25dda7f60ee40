/**
 * Benchmark plumbing: the provider child process, a closed-loop load generator
 * with per-request latencies, and the small statistics the report needs.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

/** A running provider child. */
export interface BenchProvider {
  readonly url: string;
  /** closes the child's stdin and returns what it counted */
  stop(): Promise<{ requests: number; effects: number; replays: number }>;
}

/** Starts `bench/provider.ts` in a child process (tsx loader) and waits for its port. */
export async function startBenchProvider(): Promise<BenchProvider> {
  const tsx = createRequire(import.meta.url).resolve('tsx/esm');
  const script = fileURLToPath(new URL('./provider.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', tsx, script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const iterator = lines[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true) throw new Error('bench provider exited before listening');
  const { port } = JSON.parse(first.value) as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      child.stdin.end();
      const last = await iterator.next();
      lines.close();
      if (last.done === true) return { requests: -1, effects: -1, replays: -1 };
      return JSON.parse(last.value) as { requests: number; effects: number; replays: number };
    },
  };
}

/** What one measured run produced. */
export interface LoadResult {
  requests: number;
  /** client process CPU (user + system) per completed request, µs */
  cpuUs: number;
  errors: number;
  firstError: string | undefined;
  seconds: number;
  rps: number;
  p50Us: number;
  p99Us: number;
}

/** Request numbers never repeat within a process: a client reused across slices never sees an old ref again. */
let seq = 0;

/**
 * Closed loop: `concurrency` workers each send, await, and send again until
 * the time is up. A warm-up of the same shape runs first and is not counted.
 */
export async function runLoad(
  send: (i: number) => Promise<unknown>,
  concurrency: number,
  durationMs: number,
  warmupMs: number,
): Promise<LoadResult> {
  const loop = async (untilMs: number, latencies: number[] | undefined, errors: { n: number; first: string | undefined }): Promise<void> => {
    while (performance.now() < untilMs) {
      const t0 = performance.now();
      try {
        await send(seq++);
      } catch (error) {
        errors.n++;
        errors.first ??= error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        continue;
      }
      latencies?.push(performance.now() - t0);
    }
  };
  const warmErrors = { n: 0, first: undefined as string | undefined };
  if (warmupMs > 0) {
    const warmUntil = performance.now() + warmupMs;
    await Promise.all(Array.from({ length: concurrency }, () => loop(warmUntil, undefined, warmErrors)));
  }
  const latencies: number[] = [];
  const errors = { n: 0, first: warmErrors.first };
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const until = started + durationMs;
  await Promise.all(Array.from({ length: concurrency }, () => loop(until, latencies, errors)));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: latencies.length,
    cpuUs: latencies.length === 0 ? Number.NaN : (cpu.user + cpu.system) / latencies.length,
    errors: errors.n,
    firstError: errors.first,
    seconds,
    rps: latencies.length / seconds,
    p50Us: percentile(sorted, 0.5) * 1000,
    p99Us: percentile(sorted, 0.99) * 1000,
  };
}

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}

/** Median, min and max of a sample. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(values: readonly number[]): Spread {
  const sorted = [...values].filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN };
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** `1.23k` style for request rates. */
export function formatRate(rps: number): string {
  if (!Number.isFinite(rps)) return '—';
  return rps >= 1000 ? `${(rps / 1000).toFixed(2)}k` : rps.toFixed(0);
}

/** Microseconds, or milliseconds above 10 ms. */
export function formatUs(us: number): string {
  if (!Number.isFinite(us)) return '—';
  return us >= 10_000 ? `${(us / 1000).toFixed(1)} ms` : `${us.toFixed(0)} µs`;
}

/** `0.85× (0.80–0.91)` */
export function formatRatio(s: Spread): string {
  if (!Number.isFinite(s.median)) return '—';
  return `${s.median.toFixed(2)}× (${s.min.toFixed(2)}–${s.max.toFixed(2)})`;
}
