/**
 * `client.close({ waitMs })` stops the calls still running when `waitMs` runs out. A call stuck in a
 * store write before its send (the claim, or the write that opens a later attempt: `bounded` in
 * acquire.ts) listened only to its deadline, so it ran on until then (or until the store's own close
 * ended the write: a memory or custom store that hangs never does). Seen in the PostgreSQL
 * network-fault trial. Now it ends at the close with its StoreError, nothing sent, the write given up
 * on undone when it lands (within the close's 1 s grace). Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/index.js';
import { leaseOnly, storeOver } from '../helpers/store-over.js';
import { countingFetch, wait } from '../helpers/setup.js';

const URL_ = 'https://api.example.test/orders';
const order = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } };

/** A memory store whose claim waits `claimMs` (Infinity: never answers) and whose attempt-opening writes wait `openMs`; its close keeps the records. */
function slowStore(claimMs: number, openMs = 0) {
  const inner = memoryStore();
  const hold = (ms: number) => (ms === Infinity ? new Promise<never>(() => undefined) : wait(ms));
  const store = storeOver(inner, {
    claim: async (r) => {
      await hold(claimMs);
      return inner.claim(r);
    },
    compareAndSet: async (id, g, next: OperationRecord) => {
      const before = await inner.get(id);
      if (openMs > 0 && before !== undefined && next.attempts.length > before.attempts.length) await hold(openMs);
      return inner.compareAndSet(id, g, next);
    },
    close: async () => undefined,
  });
  return { store, inner };
}

it('a claim that never answers: close({ waitMs: 200 }) ends the call at waitMs (under 700 ms; the close within waitMs + 1 s) with a StoreError naming client.close(), 0 sends', async () => {
  const { store } = slowStore(Infinity);
  const { sends, fetch } = countingFetch();
  const client = createClient({ store, fetch, telemetry: false, retry: { deadlineMs: 8_000, budget: false } });
  const started = Date.now();
  const call = client.fetch(URL_, order).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  await wait(20);
  const closed = client.close({ waitMs: 200 });
  const outcome = await call;
  const endedAfterMs = Date.now() - started;
  await closed;
  expect(Date.now() - started).toBeLessThan(1_700);
  expect(sends.n).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 200 \}\) stopped this work/);
  expect(endedAfterMs).toBeLessThan(700);
}, 12_000);

it('a claim acknowledged 700 ms after the close stopped the call: the attempt it opened is closed as never sent and the lease released; the next call sends it once, same key', async () => {
  const { store, inner } = slowStore(900);
  const { sends, fetch } = countingFetch();
  const client = createClient({ store, fetch, telemetry: false, retry: { deadlineMs: 8_000, budget: false } });
  const started = Date.now();
  const call = client.fetch(URL_, order).catch((e: unknown) => e);
  await wait(20);
  await client.close({ waitMs: 200 });
  const outcome = await call;
  expect(Date.now() - started).toBeLessThan(1_500);
  expect(outcome).toBeInstanceOf(StoreError);
  expect(sends.n).toBe(0);
  const [rec] = await inner.list({ limit: 1 });
  expect(rec).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
  const next = createClient({ store: inner, fetch, telemetry: false, retry: { budget: false } });
  expect((await next.fetch(URL_, order)).status).toBe(201);
  expect(sends.n).toBe(1);
  expect((await next.get({ action: 'create-order', ref: 'A-17' }))?.key).toBe(rec?.key);
  await next.close();
}, 12_000);

it('the write that opens attempt 2 (after a 503) never answers: close({ waitMs: 200 }) ends the call at waitMs (under 700 ms), 1 send in all', async () => {
  const { store } = slowStore(0, Infinity);
  const { sends, fetch } = countingFetch(503);
  const client = createClient({ store, fetch, telemetry: false, retry: { deadlineMs: 8_000, baseDelayMs: 1, maxDelayMs: 5, budget: false } });
  const call = client.fetch(URL_, order).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  await wait(100);
  expect(sends.n).toBe(1);
  const started = Date.now();
  const closed = client.close({ waitMs: 200 });
  const outcome = await call;
  // (the call ends at the close; the close itself then keeps the store open up to 1 s for the undo of the hung write)
  expect(Date.now() - started).toBeLessThan(700);
  await closed;
  expect(Date.now() - started).toBeLessThan(1_700);
  expect(sends.n).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 200 \}\)/);
}, 12_000);

it('the renew before the send (the lease ran out during a slow claim) hangs, then lands 500 ms after close({ waitMs: 50 }): the call ends at the close, 0 sends; the attempt is closed as never sent, the lease released', async () => {
  const inner = memoryStore();
  let renewing = false;
  const store = storeOver(inner, {
    claim: async (r) => {
      const res = await inner.claim(r);
      await wait(150);
      return res;
    },
    compareAndSet: async (id, g, next) => {
      const before = await inner.get(id);
      const renew = leaseOnly(before, next) && next.lease !== null;
      const res = await inner.compareAndSet(id, g, next);
      if (renew && !renewing) {
        renewing = true;
        await wait(600);
      }
      return res;
    },
    close: async () => undefined,
  });
  const { sends, fetch } = countingFetch();
  const client = createClient({ store, fetch, leaseMs: 100, telemetry: false, retry: { deadlineMs: 8_000, budget: false } });
  const started = Date.now();
  const call = client.fetch(URL_, order).catch((e: unknown) => e);
  while (!renewing) await wait(5);
  const closed = client.close({ waitMs: 50 });
  const outcome = await call;
  expect(Date.now() - started).toBeLessThan(500);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 50 \}\)/);
  await closed;
  expect(sends.n).toBe(0);
  const [rec] = await inner.list({ limit: 1 });
  expect(rec).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
}, 12_000);
