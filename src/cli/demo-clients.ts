/**
 * The two clients the demo compares, each placing orders against the
 * loopback provider:
 * - naive: p-retry around fetch with a new key per attempt, nothing persisted;
 * - oncefetch: on an SQLite file, with a lookup registered for the action.
 *
 * @module
 */
import pRetry from 'p-retry';
import { createClient, isOnceError } from '../index.js';
import type { OnceClient, OnceEvent, OnceStats } from '../index.js';
import { sqliteStore } from '../stores/sqlite.js';
import { ATTEMPT_TIMEOUT_MS, DEMO_ACTION, SETTLE_MS, lookupByRef, orderBody, orderRef } from './demo-orders.js';

/** Runs `fn(1..n)` with at most `concurrency` at a time; `onDone` after each. */
export async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>, onDone: (done: number) => void): Promise<void> {
  let next = 1;
  let done = 0;
  const lane = async (): Promise<void> => {
    while (next <= n) {
      const i = next++;
      await fn(i);
      onDone(++done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, lane));
}

/** One naive order: a fresh key per attempt, so the provider cannot tell a retry from a new order. */
export async function naiveOrder(url: string, i: number, attemptTimeoutMs = ATTEMPT_TIMEOUT_MS): Promise<number> {
  return pRetry(
    async () => {
      const res = await fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': globalThis.crypto.randomUUID() },
        body: orderBody(i),
        signal: AbortSignal.timeout(attemptTimeoutMs),
      });
      await res.arrayBuffer();
      if (res.status >= 500 || res.status === 429) throw new Error(`status ${res.status}`);
      return res.status;
    },
    { retries: 4, minTimeout: 20, maxTimeout: 200 },
  );
}

/** What a phase reports besides the provider's counters. */
export interface PhaseOutcome {
  /** calls that ended with an error, by error code (or name) */
  errors: Record<string, number>;
  failed: number;
  elapsedMs: number;
}

function countError(out: PhaseOutcome, error: unknown): void {
  out.failed++;
  const code = isOnceError(error) ? error.code : error instanceof Error ? error.name : 'Error';
  out.errors[code] = (out.errors[code] ?? 0) + 1;
}

/** Places orders 1..n through the naive client. */
export async function runNaive(url: string, n: number, concurrency: number, onDone: (done: number) => void): Promise<PhaseOutcome> {
  const out: PhaseOutcome = { errors: {}, failed: 0, elapsedMs: 0 };
  const started = Date.now();
  await pool(n, concurrency, (i) => naiveOrder(url, i).then(() => undefined, (e: unknown) => countError(out, e)), onDone);
  out.elapsedMs = Date.now() - started;
  return out;
}

/** The demo's oncefetch client on an SQLite file. */
export function onceClient(
  url: string,
  storePath: string,
  tenant: string,
  leaseMs: number,
  onEvent?: (e: OnceEvent) => void,
  attemptTimeoutMs = ATTEMPT_TIMEOUT_MS,
): OnceClient {
  return createClient({
    store: sqliteStore({ path: storePath }),
    tenant,
    leaseMs,
    settleMs: SETTLE_MS,
    retry: { attemptTimeoutMs, baseDelayMs: 20, maxDelayMs: 200, budget: false },
    lookups: { [DEMO_ACTION]: lookupByRef(url) },
    ...(onEvent === undefined ? {} : { onEvent }),
  });
}

/** One order through oncefetch: its ref is its identity, across retries and restarts. */
export async function onceOrder(client: OnceClient, url: string, i: number): Promise<number> {
  const res = await client.fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: orderBody(i),
    once: { action: DEMO_ACTION, ref: orderRef(i) },
  });
  await res.arrayBuffer();
  return res.status;
}

/** How the restarted oncefetch client handled the order the crashed one left in flight. */
export interface CrashRecovery {
  ref: string;
  waited: boolean;
  tookOver: boolean;
  lookup: string | null;
  state: string | null;
}

/** Places orders 1..n through a new oncefetch client: the restart after the crash. */
export async function runOnce(
  url: string,
  storePath: string,
  tenant: string,
  n: number,
  concurrency: number,
  crashRef: string,
  onDone: (done: number) => void,
): Promise<PhaseOutcome & { stats: OnceStats; recovery: CrashRecovery }> {
  const recovery: CrashRecovery = { ref: crashRef, waited: false, tookOver: false, lookup: null, state: null };
  const client = onceClient(url, storePath, tenant, 1_000, (e) => {
    if (e.scope.ref !== crashRef) return;
    if (e.type === 'waiting') recovery.waited = true;
    if (e.type === 'takeover') recovery.tookOver = true;
    if (e.type === 'lookup') recovery.lookup ??= e.outcome;
  });
  const out: PhaseOutcome = { errors: {}, failed: 0, elapsedMs: 0 };
  const started = Date.now();
  try {
    await pool(n, concurrency, (i) => onceOrder(client, url, i).then(() => undefined, (e: unknown) => countError(out, e)), onDone);
    out.elapsedMs = Date.now() - started;
    recovery.state = (await client.get({ action: DEMO_ACTION, ref: crashRef }))?.state ?? null;
    return { ...out, stats: client.stats(), recovery };
  } finally {
    await client.close();
  }
}
