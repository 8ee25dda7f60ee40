/**
 * A call that finds another owner's live lease (a process SIGKILLed mid-request, restarted, and the same
 * ref sent again) waits for it within `inFlightWaitMs` and the call's deadline. When the deadline is the
 * tighter bound, the call must end with OperationInFlightError naming the owner and its lease, as it does
 * when `inFlightWaitMs` ends the wait: not with a bare "deadline of N ms passed", which does not say that
 * the call waited on a lease, whose, or until when (a user trial: a 15 s deadline against the default
 * 30 s lease after a restart gave only that). Real timers: the deadline's own timer and the wait's last
 * sleep end at the same moment, and the deadline's abort came first. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { OperationInFlightError, StoreError, createClient, memoryStore } from '../../src/index.js';
import { wait } from '../helpers/setup.js';
import { storeOver } from '../helpers/store-over.js';

it.each([400, 1_000, 2_000])('a wait on a live lease cut by a call deadline of %i ms says whose lease and until when', async (deadlineMs) => {
  const store = memoryStore();
  let effects = 0;
  let release: (() => void) | undefined;
  const fetchA = (async (_url: unknown, init?: RequestInit) =>
    new Promise<Response>((resolve, reject) => {
      init?.signal?.addEventListener('abort', () => reject(init.signal?.reason));
      release = () => {
        effects++;
        resolve(new Response('{"id":1}', { status: 201 }));
      };
    })) as typeof globalThis.fetch;
  const fetchB = (async () => {
    effects++;
    return new Response('{"id":2}', { status: 201 });
  }) as typeof globalThis.fetch;
  const a = createClient({ store, fetch: fetchA, telemetry: false });
  const b = createClient({ store, fetch: fetchB, telemetry: false, retry: { attemptTimeoutMs: 300, deadlineMs } });
  const init = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } };
  const pa = a.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  while (release === undefined) await wait(5);
  const outB = await b.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  expect(outB).toBeInstanceOf(OperationInFlightError);
  expect((outB as Error).message).toMatch(/is in flight under owner \S+ \(lease until \S+\); gave up waiting after \d+ ms \(the call's deadline\)/);
  release();
  expect(await pa).toBe(201);
  expect(effects).toBe(1);
  await a.close();
  await b.close();
}, 15_000);

// Only the deadline's cut of the wait reads as "gave up waiting" (above): a store read that fails while the call
// waits on the lease is a StoreError, as anywhere else, not an OperationInFlightError about a lease it could not read.
it('a store read that fails while the call waits on a live lease: a StoreError, not OperationInFlightError; nothing sent by the waiter', async () => {
  const store = memoryStore();
  let effects = 0;
  let release: (() => void) | undefined;
  const fetchA = (async (_url: unknown, init?: RequestInit) =>
    new Promise<Response>((resolve, reject) => {
      init?.signal?.addEventListener('abort', () => reject(init.signal?.reason));
      release = () => {
        effects++;
        resolve(new Response('{"id":1}', { status: 201 }));
      };
    })) as typeof globalThis.fetch;
  const fetchB = (async () => {
    effects++;
    return new Response('{"id":2}', { status: 201 });
  }) as typeof globalThis.fetch;
  let reads = 0;
  const broken = new Error('connection reset');
  const storeB = storeOver(store, { get: (id) => (++reads >= 2 ? Promise.reject(broken) : store.get(id)), close: async () => undefined });
  const a = createClient({ store, fetch: fetchA, telemetry: false });
  const b = createClient({ store: storeB, fetch: fetchB, telemetry: false, retry: { attemptTimeoutMs: 300, deadlineMs: 2_000 } });
  const init = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-18' } };
  const pa = a.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  while (release === undefined) await wait(5);
  const outB = await b.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  expect(reads).toBeGreaterThanOrEqual(2);
  expect(outB).toBeInstanceOf(StoreError);
  expect((outB as StoreError).cause).toBe(broken);
  release();
  expect(await pa).toBe(201);
  expect(effects).toBe(1);
  await b.close();
  await a.close();
}, 15_000);
