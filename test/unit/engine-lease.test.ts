/**
 * The lease is renewed while an attempt is on the wire, and a store error on one renewal does not
 * end the renewals: only a lost lease does. Memory store, fake timers; effects are counted as calls
 * of the injected fetch.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { REPLAYED_HEADER, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions, OnceStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/operation/record.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'L-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };
const created = (): Response => new Response('{"id":"o-1"}', { status: 201 });

const realSetImmediate = globalThis.setImmediate;
async function settle(): Promise<void> {
  for (let i = 0; i < 25; i++) await new Promise<void>((resolve) => realSetImmediate(resolve));
}

/** Tracks a promise without awaiting it (and keeps its rejection handled). */
function track<T>(promise: Promise<T>) {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let value: T | undefined;
  let reason: unknown;
  promise.then(
    (v) => ((state = 'resolved'), (value = v)),
    (e: unknown) => ((state = 'rejected'), (reason = e)),
  );
  return { state: () => state, value: () => value, reason: () => reason };
}

/** Advances fake time by `ms` in 10 ms steps, letting real I/O (WebCrypto) settle in between. */
async function advance(ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    await settle();
    await vi.advanceTimersByTimeAsync(10);
  }
  await settle();
}

/** A memory store whose compare-and-sets fail (a store blip) while `failWhen` says so. */
function flaky() {
  const inner = memoryStore();
  let failWhen = (_next: OperationRecord): boolean => false;
  const failed: OperationRecord[] = [];
  const store: OnceStore = {
    name: 'flaky',
    claim: (r) => inner.claim(r),
    get: (id) => inner.get(id),
    compareAndSet: async (id, g, next) => {
      if (failWhen(next)) {
        failed.push(next);
        throw new Error('store blip');
      }
      return inner.compareAndSet(id, g, next);
    },
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  return { store, failed, fail: (when: (next: OperationRecord) => boolean) => void (failWhen = when) };
}

/** A fetch whose answers the test hands out; counts calls. */
function heldFetch() {
  const pending: ((r: Response) => void)[] = [];
  let calls = 0;
  const fetch = ((): Promise<Response> => {
    calls++;
    return new Promise<Response>((resolve) => pending.push(resolve));
  }) as typeof globalThis.fetch;
  return { fetch, calls: () => calls, answer: (r: Response) => pending.shift()?.(r) };
}

function makeClient(store: OnceStore, fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  return createClient({ store, fetch, now: () => Date.now(), random: () => 0.5, leaseMs: 300, ...options, retry: { budget: false, ...options.retry } });
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

describe('lease renewal during a send', () => {
  it('one renewal the store fails does not stop the next ones: the lease holds through a long send, a second client waits and replays, one effect', async () => {
    const { store, failed, fail } = flaky();
    const provider = heldFetch();
    const a = makeClient(store, provider.fetch, { owner: 'a' });
    const first = track(a.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    for (let i = 0; i < 200 && provider.calls() === 0; i++) await settle();
    expect(provider.calls()).toBe(1);
    // the first renewal (at 100 ms, a third of leaseMs) fails; the ones after it are let through
    fail((next) => next.lease?.owner === 'a' && failed.length === 0);
    await advance(1_000); // three times leaseMs on the wire
    expect(failed).toHaveLength(1);
    const held = await store.get(JSON.stringify(['default', SCOPE.action, SCOPE.ref]));
    expect(held?.lease?.owner).toBe('a');
    expect(held?.lease?.expiresAt).toBeGreaterThan(Date.now());
    // another process on the same store waits for the live lease instead of taking the record over
    const b = makeClient(store, provider.fetch, { owner: 'b', inFlightWaitMs: 10_000 });
    const second = track(b.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await advance(200);
    expect(second.state()).toBe('pending');
    provider.answer(created());
    await advance(2_000);
    expect(first.state()).toBe('resolved');
    expect(first.value()?.status).toBe(201);
    expect(second.state(), String(second.reason())).toBe('resolved');
    expect(second.value()?.status).toBe(201);
    expect(second.value()?.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(provider.calls()).toBe(1);
  });
});
