/**
 * Web Lock names are `oncefetch:` + the store's name + ' ' + the record id, so that clients of two
 * stores never wait on each other (src/engine/execute.ts, src/web-locks.ts; the store contract says
 * stores that do not share records should not share a name). Every `memoryStore()` was named
 * 'memory': two clients of two memory stores (two tabs, or two clients in one page) waited on each
 * other's lock for one scope although they share no record, up to `inFlightWaitMs`.
 * A fake LockManager (one holder per name), as in engine-timeouts.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createClientWith } from '../../src/client.js';
import { memoryStore } from '../../src/index.js';
import { webLocks } from '../../src/web-locks.js';
import { fakeLocks } from '../helpers/fake-locks.js';

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const SCOPE = { action: 'create-order', ref: 'R3-L1' };
const post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ref":"R3-L1"}' };
const URL_ORDERS = 'http://127.0.0.1:9/orders';

describe('Web Lock names of memory stores', () => {
  it('two clients of two memory stores do not wait on each other for one scope', async () => {
    const names: string[] = [];
    const exclusive = webLocks(fakeLocks(names));
    const storeA = memoryStore();
    const storeB = memoryStore();
    const a = createClientWith({ store: storeA, fetch: () => never<Response>(), random: () => 0, retry: { attemptTimeoutMs: 60_000, budget: false } }, { store: () => storeA, fetch: () => never as typeof fetch, exclusive });
    const b = createClientWith({ store: storeB, inFlightWaitMs: 1_000, fetch: async () => new Response('{}', { status: 201 }), random: () => 0, retry: { budget: false } }, { store: () => storeB, fetch: () => never as typeof fetch, exclusive });
    try {
      void a.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch(() => undefined);
      while ((await a.get(SCOPE))?.state !== 'in_flight') await tick(5);
      const started = Date.now();
      const res = await b.fetch(URL_ORDERS, { ...post, once: SCOPE });
      const waited = Date.now() - started;
      expect(res.status).toBe(201);
      expect({ waited: waited < 500, names: new Set(names).size }).toEqual({ waited: true, names: 2 });
    } finally {
      await a.close({ waitMs: 0 });
      await b.close({ waitMs: 0 });
    }
  });
});
