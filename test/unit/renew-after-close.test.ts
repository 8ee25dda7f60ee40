/**
 * The write that takes a run-out lease back before the send (`sendOnce`'s renew loop) stops at the
 * client's close: a store slower than the lease (every lease-only write acknowledged after the lease
 * it sets has run out) has the loop write again and again until the call's deadline; after
 * `client.close()` it must not go on writing to the store, and the call ends with the close's reason,
 * its attempt closed as never sent. Effects counted at a scripted fetch; writes counted at the store.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { leaseOnly, storeOver } from '../helpers/store-over.js';
import { wait } from '../helpers/setup.js';


it("close() while the lease is being taken back from a store slower than the lease: no write but the attempt's close after it, the close's reason at once; 0 sends", async () => {
  const inner = memoryStore();
  const closing = { at: undefined as number | undefined };
  const afterClose: string[] = [];
  // applied at once, acknowledged 150 ms later (lease 100 ms): the claim (which opens attempt 1) and every lease-only write
  const store = storeOver(inner, {
    claim: async (r) => {
      const res = await inner.claim(r);
      await wait(150);
      return res;
    },
    compareAndSet: async (id, g, next) => {
      const before = await inner.get(id);
      const res = await inner.compareAndSet(id, g, next);
      const renew = leaseOnly(before, next);
      if (closing.at !== undefined) afterClose.push(renew ? 'renew' : next.state);
      if (renew) await wait(150);
      return res;
    },
    // (the store stays readable for the check below)
    close: async () => undefined,
  });
  let sends = 0;
  const fetch = (async () => {
    sends++;
    return new Response('{}', { status: 201 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, leaseMs: 100, telemetry: false, retry: { deadlineMs: 5_000, budget: false } });
  const started = Date.now();
  const call = client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  // the claim is acknowledged at 150 ms, its lease run out at 100: the renew loop runs
  await wait(200);
  await client.close({ waitMs: 10 });
  closing.at = Date.now();
  const outcome = await call;
  const endedAfterMs = Date.now() - started;
  await wait(500);
  const [rec] = await inner.list({ limit: 1 });
  expect(sends).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  expect(endedAfterMs).toBeLessThan(1_500);
  // at most the renew in flight at the close, then the attempt closed never sent and the lease released
  expect(afterClose.filter((w) => w === 'renew').length).toBeLessThanOrEqual(1);
  expect(rec).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
}, 10_000);
