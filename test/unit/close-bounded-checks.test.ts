/**
 * Checks of 1207ef1 (`bounded()`, a store write before the send, ends at the client's close) and
 * de14474/0fc6149 (the extended outcome-write StoreError), found sound in review: a graceful close
 * lets a slow claim and a slow attempt-2 open finish (the close signal fires only once the wait is
 * over or `waitMs` ran out); no close hook left live over 10,000 calls; no unhandled rejection from a
 * write acknowledged after the close and after the store closed; a takeover cut by the close undone
 * when it lands; a not_sent attempt not called sent; a joined caller gets the extended error.
 * Effects counted at a scripted fetch; memory store wrappers.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/index.js';
import { Engine } from '../../src/engine/execute.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch, wait } from '../helpers/setup.js';

const URL_ = 'https://api.example.test/orders';
const order = (ref = 'A-17') => ({ method: 'POST', body: '{}', once: { action: 'create-order', ref } });

const unhandled: unknown[] = [];
const onUnhandled = (e: unknown): void => void unhandled.push(e);
beforeAll(() => void process.on('unhandledRejection', onUnhandled));
afterAll(() => void process.off('unhandledRejection', onUnhandled));

/** claim waits claimMs; a CAS that opens an attempt waits openMs; a CAS that takes the lease from another owner waits takeMs; store close is real when realClose */
function slowStore(o: { claimMs?: number; openMs?: number; takeMs?: number; realClose?: boolean }) {
  const inner = memoryStore();
  let closed = false;
  const hold = (ms: number) => (ms === Infinity ? new Promise<never>(() => undefined) : wait(ms));
  const store = storeOver(inner, {
    claim: async (r) => {
      if (o.claimMs) await hold(o.claimMs);
      if (closed) throw new StoreError('mem: closed');
      return inner.claim(r);
    },
    compareAndSet: async (id, g, next: OperationRecord) => {
      const before = await inner.get(id);
      if (o.openMs && before !== undefined && next.attempts.length > before.attempts.length) await hold(o.openMs);
      if (o.takeMs && before?.lease !== null && before?.lease?.owner !== next.lease?.owner && next.lease !== null) await hold(o.takeMs);
      if (closed) throw new StoreError('mem: closed');
      return inner.compareAndSet(id, g, next);
    },
    get: async (id) => {
      if (closed) throw new StoreError('mem: closed');
      return inner.get(id);
    },
    close: async () => {
      if (o.realClose) closed = true;
    },
  });
  return { store, inner };
}

it('P1 graceful close() (no waitMs) during a claim acknowledged 500 ms later: the call finishes, 201, 1 send, succeeded', async () => {
  const { store, inner } = slowStore({ claimMs: 500 });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false, retry: { budget: false } });
  const call = client.fetch(URL_, order()).then((r) => r.status, (e: unknown) => e);
  await wait(20);
  await client.close();
  expect(await call).toBe(201);
  expect(sends.n).toBe(1);
  expect((await inner.list({ limit: 1 }))[0]?.state).toBe('succeeded');
});

it('P2 close({ waitMs: 5000 }) during a claim (400 ms) and an attempt-2 open (400 ms) after a 503: 201, 2 sends', async () => {
  const { store, inner } = slowStore({ claimMs: 400, openMs: 400 });
  const { sends, fetch } = countingFetch(503, 201);
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 2, budget: false, baseDelayMs: 1, maxDelayMs: 2 } });
  const call = client.fetch(URL_, order()).then((r) => r.status, (e: unknown) => e);
  await wait(20);
  await client.close({ waitMs: 5_000 });
  expect(await call).toBe(201);
  expect(sends.n).toBe(2);
  expect((await inner.list({ limit: 1 }))[0]?.state).toBe('succeeded');
});

it('P3 10,000 calls (some retried, some joined): no whenClosed hook left live', async () => {
  let live = 0;
  const orig = Engine.prototype.whenClosed;
  const spy = vi.spyOn(Engine.prototype, 'whenClosed').mockImplementation(function (this: Engine, fn) {
    live++;
    let on = true;
    const un = orig.call(this, fn);
    return () => {
      if (on) live--;
      on = false;
      un();
    };
  });
  try {
    const { sends, fetch } = countingFetch(201);
    let n = 0;
    const flaky = (async (...a: Parameters<typeof fetch>) => (n++ % 7 === 0 ? new Response('', { status: 503 }) : fetch(...a))) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch: flaky, telemetry: false, retry: { maxAttempts: 3, budget: false, baseDelayMs: 1, maxDelayMs: 1 } });
    for (let i = 0; i < 10_000; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => client.fetch(URL_, order(`R-${i + j - (j % 2)}`)).then((r) => r.status, (e: unknown) => e)));
    }
    expect(live).toBe(0);
    expect(sends.n).toBeGreaterThan(4_000);
    await client.close();
  } finally {
    spy.mockRestore();
  }
}, 60_000);

it('P4 a claim acknowledged after close({ waitMs: 100 }) and after the store closed (1.5 s later): the call ends at the close, 0 sends, no unhandled rejection', async () => {
  const before = unhandled.length;
  const { store } = slowStore({ claimMs: 1_500, realClose: true });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false, retry: { budget: false } });
  const t0 = Date.now();
  const call = client.fetch(URL_, order()).then((r) => r.status, (e: unknown) => e);
  await wait(20);
  const closed = client.close({ waitMs: 100 });
  const outcome = await call;
  expect(Date.now() - t0).toBeLessThan(700);
  expect(outcome).toBeInstanceOf(StoreError);
  await closed;
  await wait(2_000);
  expect(sends.n).toBe(0);
  expect(unhandled.slice(before)).toEqual([]);
}, 10_000);

it('P5 a takeover of an expired record, its CAS hung, cut by close({ waitMs: 100 }): ends at the close, 0 sends; the late CAS is undone (lease released); the next client sends once', async () => {
  const before = unhandled.length;
  const { store, inner } = slowStore({ takeMs: 600 });
  // a record left pending by a 503, then its lease set to a dead owner's, expired
  const first = countingFetch(503);
  const a = createClient({ store, fetch: first.fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  await a.fetch(URL_, order()).catch(() => undefined);
  await a.close();
  const rec = (await inner.list({ limit: 1 }))[0]!;
  const dead = { ...rec, generation: rec.generation + 1, lease: { owner: 'dead', expiresAt: Date.now() - 1_000 } };
  expect((await inner.compareAndSet(rec.id, rec.generation, dead)).ok).toBe(true);

  const { sends, fetch } = countingFetch(201);
  const b = createClient({ store, fetch, telemetry: false, retry: { budget: false } });
  const t0 = Date.now();
  const call = b.fetch(URL_, order()).then((r) => r.status, (e: unknown) => e);
  await wait(20);
  const closed = b.close({ waitMs: 100 });
  const outcome = await call;
  const ended = Date.now() - t0;
  await closed;
  await wait(800);
  expect(outcome).toBeInstanceOf(StoreError);
  expect(ended).toBeLessThan(500);
  expect(sends.n).toBe(0);
  const after = (await inner.list({ limit: 1 }))[0]!;
  expect(after.lease).toBeNull();
  expect(after.state).toBe('pending');
  const c = createClient({ store, fetch, telemetry: false, retry: { budget: false } });
  expect(await c.fetch(URL_, order()).then((r) => r.status)).toBe(201);
  expect(sends.n).toBe(1);
  expect(first.sends.n + sends.n).toBe(2);
  expect(unhandled.slice(before)).toEqual([]);
  await c.close();
}, 10_000);

it('P6 a not_sent attempt (ECONNREFUSED) whose outcome write fails: the StoreError does not say it was sent', async () => {
  const inner = memoryStore();
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const last = next.attempts.at(-1);
      if (last !== undefined && last.finishedAt !== null) throw new StoreError('mem: down');
      return inner.compareAndSet(id, g, next);
    },
  });
  let tries = 0;
  const fetch = (async () => {
    tries++;
    throw Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  const outcome = await client.fetch(URL_, order()).catch((e: unknown) => e);
  expect(tries).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).not.toMatch(/was sent/);
  await client.close();
});

it('P7 a caller that joined the call whose outcome write failed gets the same extended StoreError', async () => {
  const inner = memoryStore();
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const last = next.attempts.at(-1);
      if (last !== undefined && last.finishedAt !== null && last.class !== 'not_sent') throw new StoreError('mem: down');
      return inner.compareAndSet(id, g, next);
    },
  });
  const sends = { n: 0 };
  const fetch = (async () => {
    sends.n++;
    await wait(100);
    return new Response('{"id":"o-1"}', { status: 201, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  const one = client.fetch(URL_, order()).catch((e: unknown) => e);
  await wait(20);
  const two = client.fetch(URL_, order()).catch((e: unknown) => e);
  const [e1, e2] = await Promise.all([one, two]);
  expect(sends.n).toBe(1);
  expect((e1 as Error).message).toMatch(/attempt 1 was sent \(answered 201\)/);
  expect((e2 as Error).message).toMatch(/attempt 1 was sent \(answered 201\)/);
  await client.close();
});
