import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { OnceEvent } from '../../src/events.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { afterEach, beforeEach } from 'vitest';

/** A temporary directory, removed by `cleanup`. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'oncefetch-test-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A client on a SQLite file, recording its events. */
export function sqliteClient(path: string, options: OnceClientOptions = {}): { client: OnceClient; events: OnceEvent[] } {
  const events: OnceEvent[] = [];
  const client = createClient({
    store: sqliteStore({ path }),
    onEvent: (e) => events.push(e),
    ...options,
  });
  return { client, events };
}

/** A lookup against the loopback provider: found → the order, 404 → absent. */
export function lookupByRef(baseUrl: string) {
  return async ({ scope, signal }: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
    const res = await fetch(`${baseUrl}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    if (res.status === 404) return null;
    if (!res.ok) throw new Error(`lookup failed with ${res.status}`);
    return res;
  };
}

/** JSON POST init for an order. */
export function orderInit(ref: string, extra: Record<string, unknown> = {}): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ref, sku: 'A-17', qty: 1, ...extra }),
  };
}

/** Resolves after `ms`. */
export const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A fetch that answers its n-th call with `statuses[n]` (the last one from then on; 201 when none is
 * given), a JSON body `{"id":"o-1"}`, and counts its calls in `sends.n`: effects counted at the fetch.
 */
export function countingFetch(...statuses: number[]): { sends: { n: number }; fetch: typeof globalThis.fetch } {
  const sends = { n: 0 };
  const answers = statuses.length === 0 ? [201] : statuses;
  const fetch = (async () => {
    const status = answers[Math.min(sends.n, answers.length - 1)] ?? 201;
    sends.n++;
    return new Response('{"id":"o-1"}', { status, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  return { sends, fetch };
}

/** Resolves once `check` holds (asked every 10 ms); rejects after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await wait(10);
  }
}

/**
 * A loopback provider and a client on an SQLite file in a fresh temporary directory, made before
 * each test and closed after it (the directory removed). `options` gets the provider, for lookups
 * by its URL. The fields are the current test's.
 */
export function eachSqliteClient(options: (provider: Provider) => OnceClientOptions = () => ({})): { provider: Provider; client: OnceClient } {
  const env = {} as { provider: Provider; client: OnceClient };
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(async () => {
    tmp = tempDir();
    env.provider = await startProvider();
    env.client = sqliteClient(join(tmp.dir, 'once.db'), options(env.provider)).client;
  });
  afterEach(async () => {
    await env.client.close();
    await env.provider.close();
    tmp.cleanup();
  });
  return env;
}

/**
 * A loopback provider started before each test and closed after it, with the clients `track`ed
 * during the test closed first. The field is the current test's provider.
 */
export function eachProvider(): { provider: Provider; track: (client: OnceClient) => OnceClient } {
  const clients: OnceClient[] = [];
  const env = { track: (client: OnceClient): OnceClient => (clients.push(client), client) } as { provider: Provider; track: (client: OnceClient) => OnceClient };
  beforeEach(async () => {
    env.provider = await startProvider();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    await env.provider.close();
  });
  return env;
}
