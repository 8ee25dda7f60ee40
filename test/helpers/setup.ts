import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { OnceEvent } from '../../src/events.js';
import { sqliteStore } from '../../src/stores/sqlite.js';

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

/** Resolves once `check` holds (asked every 10 ms); rejects after `timeoutMs`. */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await wait(10);
  }
}
