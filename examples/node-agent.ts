/**
 * An agent that places orders through a faulty network, twice: with a naive
 * client (p-retry around fetch, a new key per attempt, nothing persisted) and
 * with oncefetch on a SQLite file. Effects are counted at the provider.
 *
 * Run: npm run example -- [--orders 40] [--seed 7] [--rate 0.35]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pRetry from 'p-retry';
import { createClient, isOnceError } from '../src/index.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import { startProvider } from '../src/testing/provider.js';
import type { Fault, Provider } from '../src/testing/provider.js';

const { values } = parseArgs({
  options: { orders: { type: 'string', default: '40' }, seed: { type: 'string', default: '7' }, rate: { type: 'string', default: '0.35' } },
});
const orders = Number(values.orders);
const seed = Number(values.seed);
const rate = Number(values.rate);
const ATTEMPT_TIMEOUT_MS = 150;

const kinds: Fault[] = [
  { kind: 'drop_after_commit' },
  { kind: 'delay_after_commit', delayMs: 400 },
  { kind: 'error_after_commit' },
  { kind: 'status_before_commit', status: 503, retryAfter: '0' },
  { kind: 'status_before_commit', status: 429, retryAfter: '0' },
  { kind: 'reset_before_commit' },
];

interface Tally {
  client: string;
  operations: number;
  requests: number;
  faults: number;
  effects: number;
  duplicates: number;
  failed: number;
}

function tally(client: string, provider: Provider, failed: number): Tally {
  let duplicates = 0;
  for (let i = 0; i < orders; i++) duplicates += Math.max(0, provider.effectsFor(`order-${i}`) - 1);
  const faults = Object.values(provider.faultsInjected).reduce((a, b) => a + b, 0);
  return { client, operations: orders, requests: provider.requests.length, faults, effects: provider.effects, duplicates, failed };
}

function body(i: number): string {
  return JSON.stringify({ ref: `order-${i}`, sku: 'A-17', qty: 1 + (i % 3) });
}

async function naive(provider: Provider): Promise<Tally> {
  let failed = 0;
  await Promise.all(
    Array.from({ length: orders }, (_, i) =>
      pRetry(
        async () => {
          const res = await fetch(`${provider.url}/orders`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
            body: body(i),
            signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
          });
          if (res.status >= 500 || res.status === 429) throw new Error(`status ${res.status}`);
          return res;
        },
        { retries: 4, minTimeout: 20, maxTimeout: 200 },
      ).catch(() => failed++),
    ),
  );
  return tally('naive (p-retry + fetch)', provider, failed);
}

async function once(provider: Provider, dir: string): Promise<Tally> {
  const client = createClient({
    store: sqliteStore({ path: join(dir, 'orders.db') }),
    tenant: 'demo',
    retry: { attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, baseDelayMs: 20, maxDelayMs: 200, budget: false },
    lookups: {
      'create-order': async ({ scope, signal }) => {
        const res = await fetch(`${provider.url}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
        if (res.status === 404) return null;
        if (!res.ok) throw new Error(`lookup answered ${res.status}`);
        return res;
      },
    },
  });
  let failed = 0;
  await Promise.all(
    Array.from({ length: orders }, (_, i) =>
      client
        .fetch(`${provider.url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(i),
          once: { action: 'create-order', ref: `order-${i}` },
        })
        .catch((err: unknown) => {
          failed++;
          if (!isOnceError(err)) throw err;
        }),
    ),
  );
  await client.close();
  return tally('oncefetch (SQLite)', provider, failed);
}

const dir = mkdtempSync(join(tmpdir(), 'oncefetch-example-'));
// One provider per client, from the same seed (the same fault sequence). Not one provider reset
// between them: a naive request the provider had not read yet when its call gave up would be read
// after the reset and counted as an effect of the oncefetch run.
const naiveProvider = await startProvider({ randomFaults: { seed, rate, kinds } });
const onceProvider = await startProvider({ randomFaults: { seed, rate, kinds } });
try {
  const a = await naive(naiveProvider);
  const b = await once(onceProvider, dir);
  console.table([a, b]);
  console.log(`oncefetch: ${b.effects} effects for ${orders} orders, ${b.duplicates} duplicates; naive: ${a.duplicates} duplicates`);
  process.exitCode = b.duplicates === 0 ? 0 : 1;
} finally {
  await naiveProvider.close();
  await onceProvider.close();
  rmSync(dir, { recursive: true, force: true });
}
