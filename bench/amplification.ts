/**
 * Retry amplification, simulated on a deterministic virtual clock with the
 * real retry budget (`src/backoff/budget.ts`), the real backoff function and
 * the real client defaults (`resolveOptions`). Two questions:
 *
 * 1. 1,000 logical operations against a provider that fails 100 % (503): how
 *    many attempts per operation do oncefetch's defaults make, against p-retry's
 *    and ky's documented defaults?
 * 2. 100 clients contending for one resource (one write at a time): how many
 *    calls, and how long until all have succeeded, with full jitter against no
 *    jitter (and decorrelated)?
 *
 * Run alone: `npm run bench:amplification`. `npm run bench` runs it too.
 *
 * @module
 */
import { fileURLToPath } from 'node:url';
import { backoffDelay } from '../src/backoff/backoff.js';
import type { JitterMode } from '../src/backoff/backoff.js';
import type { RetryBudget } from '../src/backoff/budget.js';
import { resolveOptions } from '../src/options.js';
import { memoryStore } from '../src/stores/memory.js';
import { mulberry32 } from '../src/testing/provider-faults.js';


/** A min-heap of timed events: the virtual clock's agenda. */
class Agenda<T> {
  private readonly items: Array<{ at: number; seq: number; value: T }> = [];
  private seq = 0;
  get size(): number {
    return this.items.length;
  }
  push(at: number, value: T): void {
    const items = this.items;
    items.push({ at, seq: this.seq++, value });
    for (let i = items.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!before(items[i]!, items[p]!)) break;
      [items[i], items[p]] = [items[p]!, items[i]!];
      i = p;
    }
  }
  pop(): { at: number; value: T } | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    items[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < items.length && before(items[l]!, items[m]!)) m = l;
      if (r < items.length && before(items[r]!, items[m]!)) m = r;
      if (m === i) break;
      [items[i], items[m]] = [items[m]!, items[i]!];
      i = m;
    }
    return top;
  }
}

function before(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** The retry policy of the oncefetch engine, as the simulation replays it. */
export interface EnginePolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  jitter: JitterMode;
  budget: RetryBudget | undefined;
}

/** The engine's defaults, taken from the real option resolver. */
export function defaultEnginePolicy(): EnginePolicy {
  const opts = resolveOptions({ store: memoryStore(), fetch: globalThis.fetch }, { store: memoryStore, fetch: () => globalThis.fetch });
  const { maxAttempts, baseDelayMs, maxDelayMs, deadlineMs, attemptTimeoutMs, jitter, budget } = opts.retry;
  return { maxAttempts, baseDelayMs, maxDelayMs, deadlineMs, attemptTimeoutMs, jitter, budget };
}

/** Outcome of {@link simulateFailingProvider}. */
export interface FailingProviderRun {
  operations: number;
  attempts: number;
  attemptsPerOperation: number;
  /** virtual time until the last operation gave up, ms */
  elapsedMs: number;
}

/**
 * `operations` calls, one every `arrivalEveryMs` (0: all at once), against a
 * provider that answers every attempt with 503. Same order as the engine: the
 * call pays into the budget on entry; after a failed attempt the delay is
 * drawn, the deadline checked (the wait must leave the next attempt
 * `min(attemptTimeoutMs, deadlineMs / 10)`), and only then a budget token spent.
 */
export function simulateFailingProvider(policy: EnginePolicy, operations: number, arrivalEveryMs: number, seed = 1): FailingProviderRun {
  const random = mulberry32(seed);
  const agenda = new Agenda<{ op: number; attempt: number; startedAt: number }>();
  for (let op = 0; op < operations; op++) agenda.push(op * arrivalEveryMs, { op, attempt: 0, startedAt: op * arrivalEveryMs });
  let attempts = 0;
  let now = 0;
  for (let e = agenda.pop(); e !== undefined; e = agenda.pop()) {
    now = e.at;
    const { op, startedAt } = e.value;
    if (e.value.attempt === 0) policy.budget?.recordRequest();
    const attempt = e.value.attempt + 1;
    attempts++; // it fails: 503
    if (attempt >= policy.maxAttempts) continue;
    const delayMs = backoffDelay(policy.jitter, attempt, policy, random);
    const floorMs = Math.min(policy.attemptTimeoutMs, policy.deadlineMs / 10);
    if (now + delayMs + floorMs - startedAt > policy.deadlineMs) continue;
    if (policy.budget !== undefined && !policy.budget.tryRetry()) continue;
    agenda.push(now + delayMs, { op, attempt, startedAt });
  }
  return { operations, attempts, attemptsPerOperation: attempts / operations, elapsedMs: now };
}

/** Attempts per operation of a fixed-count retry policy under 100 % failure, and its total wait. */
function fixedPolicy(retries: number, delayMs: (retry: number) => number): { attemptsPerOperation: number; waitPerOperationMs: number } {
  let wait = 0;
  for (let r = 1; r <= retries; r++) wait += delayMs(r);
  return { attemptsPerOperation: 1 + retries, waitPerOperationMs: wait };
}

/** Outcome of {@link simulateContention}. */
export interface ContentionRun {
  jitter: JitterMode;
  clients: number;
  calls: number;
  /** virtual time until the last client succeeded, ms */
  completionMs: number;
  /** median time until a client succeeded, ms */
  medianCompletionMs: number;
}

/**
 * `clients` start together and each must make one write to a shared resource
 * that takes `serviceMs`: a call arriving while the resource is busy fails
 * (a conflict, learnt after `rttMs`) and retries after the engine's backoff.
 * Attempts are unlimited here, as in the classic jitter study: the question is
 * how much work and time contention costs.
 */
export function simulateContention(jitter: JitterMode, clients: number, baseDelayMs: number, maxDelayMs: number, seed = 1, serviceMs = 10, rttMs = 1): ContentionRun {
  const random = mulberry32(seed);
  const agenda = new Agenda<{ client: number; attempt: number; previousDelayMs: number | undefined }>();
  for (let c = 0; c < clients; c++) agenda.push(0, { client: c, attempt: 0, previousDelayMs: undefined });
  let busyUntil = -Infinity;
  let calls = 0;
  const completions: number[] = [];
  for (let e = agenda.pop(); e !== undefined; e = agenda.pop()) {
    calls++;
    const { client, previousDelayMs } = e.value;
    const attempt = e.value.attempt + 1;
    if (e.at >= busyUntil) {
      busyUntil = e.at + serviceMs;
      completions.push(e.at + serviceMs);
      continue;
    }
    const delayMs = backoffDelay(jitter, attempt, { baseDelayMs, maxDelayMs }, random, previousDelayMs);
    agenda.push(e.at + rttMs + delayMs, { client, attempt, previousDelayMs: delayMs });
  }
  completions.sort((a, b) => a - b);
  return {
    jitter,
    clients,
    calls,
    completionMs: completions[completions.length - 1] ?? 0,
    medianCompletionMs: completions[Math.floor(completions.length / 2)] ?? 0,
  };
}

/** Everything `npm run bench` prints about amplification. */
export interface AmplificationReport {
  failingProvider: Array<{ client: string; attemptsPerOperation: number; note: string }>;
  contention: ContentionRun[];
  budgetDefaults: { attemptsPerOperation: number; target: number; met: boolean };
}

/** Runs both simulations with the current defaults. */
export function amplificationReport(): AmplificationReport {
  const operations = 1000;
  const steady = simulateFailingProvider(defaultEnginePolicy(), operations, 1);
  const burst = simulateFailingProvider(defaultEnginePolicy(), operations, 0);
  const noBudget = simulateFailingProvider({ ...defaultEnginePolicy(), budget: undefined }, operations, 1);
  const allAtOnceWorst = Math.max(steady.attemptsPerOperation, burst.attemptsPerOperation);
  // p-retry 7 defaults: retries 10, factor 2, minTimeout 1000 ms, no randomisation.
  const pRetry = fixedPolicy(10, (r) => 1000 * 2 ** (r - 1));
  // ky 1 defaults: limit 2, only GET/PUT/HEAD/DELETE/OPTIONS/TRACE, on 408/413/429/500/502/503/504,
  // delay 0.3 s · 2^(n-1). A POST is never retried.
  const kyIdempotent = fixedPolicy(2, (r) => 300 * 2 ** (r - 1));
  const policy = defaultEnginePolicy();
  const contention = (['none', 'full', 'decorrelated'] as const).map((j) => simulateContention(j, 100, policy.baseDelayMs, policy.maxDelayMs));
  return {
    failingProvider: [
      { client: 'oncefetch defaults (budget), 1 call/ms', attemptsPerOperation: steady.attemptsPerOperation, note: `maxAttempts ${policy.maxAttempts}, shared retry budget` },
      { client: 'oncefetch defaults (budget), all at once', attemptsPerOperation: burst.attemptsPerOperation, note: 'same, 1,000 calls at t=0' },
      { client: 'oncefetch, budget: false', attemptsPerOperation: noBudget.attemptsPerOperation, note: `maxAttempts ${policy.maxAttempts} per call, nothing shared` },
      { client: 'p-retry defaults', attemptsPerOperation: pRetry.attemptsPerOperation, note: `retries 10; ${(pRetry.waitPerOperationMs / 1000).toFixed(0)} s of waits per call` },
      { client: 'ky defaults, POST', attemptsPerOperation: 1, note: 'ky never retries POST by default' },
      { client: 'ky defaults, GET/PUT/DELETE', attemptsPerOperation: kyIdempotent.attemptsPerOperation, note: `limit 2 on 503; ${(kyIdempotent.waitPerOperationMs / 1000).toFixed(1)} s of waits per call` },
    ],
    contention,
    budgetDefaults: { attemptsPerOperation: allAtOnceWorst, target: 1.1, met: allAtOnceWorst <= 1.1 + 1e-9 },
  };
}

/** Two small tables. */
export function formatAmplification(report: AmplificationReport): string {
  const out: string[] = [];
  out.push('retry amplification: 1,000 operations, provider fails 100 % (503), virtual clock\n');
  out.push('| client | attempts per operation | |');
  out.push('|---|---:|---|');
  for (const row of report.failingProvider) out.push(`| ${row.client} | ${row.attemptsPerOperation.toFixed(3)} | ${row.note} |`);
  out.push(`\n${report.budgetDefaults.met ? 'MET    ' : 'NOT MET'}  default budget ≤ ${report.budgetDefaults.target} attempts per operation: ${report.budgetDefaults.attemptsPerOperation.toFixed(3)}`);
  out.push('\ncontention: 100 clients, one shared resource (10 ms per write), backoff base/max from the defaults, unlimited attempts\n');
  out.push('| jitter | calls | all done after | median client done after |');
  out.push('|---|---:|---:|---:|');
  for (const r of report.contention) {
    out.push(`| ${r.jitter} | ${r.calls} | ${(r.completionMs / 1000).toFixed(1)} s | ${(r.medianCompletionMs / 1000).toFixed(1)} s |`);
  }
  return out.join('\n');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(formatAmplification(amplificationReport()));
}
