/**
 * A body whose reader is not the platform's (a polyfill's, a test double's, a Response-like shape a
 * custom fetch or a lookup resolves to) may throw from its `cancel()` at once, or return no promise.
 * Giving such a read up (an attempt's timeout, a lookup at the call's deadline) runs inside an abort
 * listener: a throw there is an uncaught exception (it ends a Node process), and, for an attempt, it
 * stops the engine's own listener before it rejects, so the call hangs for as long as the body
 * trickles. Regression: `readBody`'s cancel let it throw. The give-up stands, the call ends, and the
 * read stops at its next chunk instead of filling memory for nobody. Memory store, injected fetch,
 * real short timers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClientOptions } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'CT-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const cancels = {
  'throws at once': (): never => {
    throw new Error('cancel refused');
  },
  'returns no promise': (): undefined => undefined,
};

/** A Response-like answer whose body's reader trickles a chunk every 5 ms, forever; its cancel is `cancel`. */
function answer(status: number, cancel: () => unknown) {
  const seen = { reads: 0, cancels: 0 };
  const reader = {
    read: async () => {
      seen.reads++;
      await tick(5);
      return { done: false, value: new TextEncoder().encode(' ') };
    },
    cancel: () => {
      seen.cancels++;
      return cancel();
    },
    releaseLock: () => undefined,
  };
  const res = {
    status,
    statusText: '',
    headers: new Headers({ 'content-type': 'application/json' }),
    bodyUsed: false,
    body: { getReader: () => reader },
    url: '',
    redirected: false,
    type: 'basic',
    arrayBuffer: async () => new ArrayBuffer(0),
  };
  return { res: res as unknown as Response, seen };
}

let uncaught: unknown[] = [];
const onUncaught = (error: unknown): void => void uncaught.push(error);
beforeEach(() => {
  uncaught = [];
  process.prependListener('uncaughtException', onUncaught);
});
afterEach(() => {
  process.removeListener('uncaughtException', onUncaught);
});

/** `p`, or 'hung' when it has not settled within `ms`. */
const within = <T,>(p: Promise<T>, ms: number): Promise<T | 'hung'> => Promise.race([p, tick(ms).then(() => 'hung' as const)]);

const client = (fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) =>
  createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, maxAttempts: 1, ...options.retry } });

describe("a body reader whose cancel misbehaves, when the read is given up", () => {
  for (const [how, cancel] of Object.entries(cancels)) {
    it(`an attempt's (cancel ${how}), at the attempt timeout: the call ends ambiguous, nothing uncaught, the read stops`, async () => {
      const { res, seen } = answer(200, cancel);
      const c = client((async () => res) as typeof globalThis.fetch, { retry: { attemptTimeoutMs: 60 } });
      const error = await within(c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e), 1_000);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect(seen.cancels).toBe(1);
      await tick(30);
      const reads = seen.reads;
      await tick(30);
      expect({ uncaught, readsAfter: seen.reads - reads }).toEqual({ uncaught: [], readsAfter: 0 });
      expect((await c.get(SCOPE))?.attempts.map((a) => [a.class, a.status])).toEqual([['ambiguous', 200]]);
      await within(c.close(), 1_000);
    });

    it(`a lookup's (cancel ${how}), at the call's deadline: the call ends ambiguous (the deadline's error its cause), nothing uncaught, the read stops`, async () => {
      const { res, seen } = answer(200, cancel);
      const c = client((async () => new Response('{"error":"oops"}', { status: 500 })) as typeof globalThis.fetch, { retry: { deadlineMs: 200 } });
      const lookup: LookupFn = async () => res;
      const error = await within(c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup } }).catch((e: unknown) => e), 1_000);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect((error as Error).cause).toBeInstanceOf(DeadlineExceededError);
      await tick(30);
      expect(seen.cancels).toBe(1);
      const reads = seen.reads;
      await tick(30);
      expect({ uncaught, readsAfter: seen.reads - reads }).toEqual({ uncaught: [], readsAfter: 0 });
      expect((await c.get(SCOPE))?.state).toBe('ambiguous');
      await within(c.close(), 1_000);
    });
  }
});
