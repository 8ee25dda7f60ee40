/**
 * A store slower than the lease (every lease-only write, and the claim, acknowledged after the lease
 * it sets has run out): the renew before the send (`sendOnce`) comes back with its lease expired
 * again. Spinning on it sent nothing but wrote until the call's deadline and ended with a bare
 * DeadlineExceededError; one renew that lands expired is enough to know: the call ends at once with a
 * StoreError that names leaseMs, nothing sent, the attempt closed as never sent; the next call sends it once.
 * Effects counted at a scripted fetch; writes counted at the store.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { leaseOnly, storeOver } from '../helpers/store-over.js';
import { wait } from '../helpers/setup.js';


it('a renew acknowledged after its own lease ran out: StoreError naming leaseMs at once, 0 sends, attempt closed never sent', async () => {
  const inner = memoryStore();
  let renews = 0;
  const store = storeOver(inner, {
    claim: async (r) => {
      const res = await inner.claim(r);
      await wait(130);
      return res;
    },
    compareAndSet: async (id, g, next) => {
      const before = await inner.get(id);
      const res = await inner.compareAndSet(id, g, next);
      const renew = leaseOnly(before, next);
      if (renew) {
        renews++;
        await wait(130);
      }
      return res;
    },
    // (the records stay for the next client's call below)
    close: async () => undefined,
  });
  let sends = 0;
  const fetch = (async () => {
    sends++;
    return new Response('{}', { status: 201 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, leaseMs: 100, telemetry: false, retry: { deadlineMs: 3_000, budget: false } });
  const started = Date.now();
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  const endedAfterMs = Date.now() - started;
  const [rec] = await inner.list({ limit: 1 });
  expect(sends).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/leaseMs 100 ms.*nothing was sent/);
  expect(endedAfterMs).toBeLessThan(1_500);
  expect(renews).toBeLessThanOrEqual(2);
  expect(rec).toMatchObject({ state: 'pending', attempts: [{ class: 'not_sent' }] });
  // (a lease already run out is not released: moot, see `letGo`)
  expect(rec?.lease === null || (rec?.lease?.expiresAt ?? 0) <= Date.now()).toBe(true);
  await client.close();
  // the next call, on a store as fast as it should be, sends it once, with the same key
  const next = createClient({ store: inner, fetch, leaseMs: 100, telemetry: false, retry: { budget: false } });
  const res = await next.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } });
  expect(res.status).toBe(201);
  expect(sends).toBe(1);
  expect((await next.get({ action: 'create-order', ref: 'A-17' }))?.key).toBe(rec?.key);
  await next.close();
  await inner.close();
}, 10_000);
