/**
 * A stop while an earlier attempt's outcome is unknown asks the lookup first (scheduleRetry's `end`).
 * When the record was cleared for a same-key resend only by the provider's dedupe, `end` first writes
 * `reconcile_first` (pending -> ambiguous). Here the call's deadline passes while that write is
 * pending (a store slow to acknowledge it): the record ends ambiguous, so the caller must not be told
 * "the record stays resumable" by a bare DeadlineExceededError. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { wait } from '../helpers/setup.js';

const SCOPE = { action: 'create-order', ref: 'A-17' };

it("a deadline that passes while end()'s reconcile_first write is pending: AmbiguousOutcomeError (record ambiguous), not a bare 'resumable' DeadlineExceededError; 1 effect, 2 POSTs", async () => {
  const inner = memoryStore();
  let slowWrites = 0;
  // reconcile_first applied at once, acknowledged 1.5 s later (past the 1 s deadline)
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const res = await inner.compareAndSet(id, g, next);
      if (next.evidence.at(-1)?.detail.includes('no retry can be made')) {
        slowWrites++;
        await wait(1_500);
      }
      return res;
    },
  });
  let effects = 0;
  let posts = 0;
  const steps = [
    () => {
      effects++;
      return new Response('oops', { status: 500 });
    },
    () => new Response('busy', { status: 503, headers: { 'retry-after': '5' } }),
  ];
  const fetch = (async () => {
    posts++;
    const step = steps.shift();
    if (step === undefined) throw new Error('unexpected POST');
    return step();
  }) as typeof globalThis.fetch;
  let lookups = 0;
  // the first lookup (before the resend) fails: the provider's dedupe clears the resend
  const lookup: LookupFn = async () => {
    lookups++;
    throw new Error('lookup down');
  };
  const client = createClient({ store, fetch, random: () => 0, settleMs: 0, providerDedupes: true, telemetry: false, retry: { deadlineMs: 1_000, budget: false } });
  const error: unknown = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { ...SCOPE, lookup } }).catch((e: unknown) => e);
  await wait(1_700);
  const record = await client.get(SCOPE);
  expect(slowWrites).toBe(1);
  expect({ effects, posts, lookups }).toEqual({ effects: 1, posts: 2, lookups: 1 });
  expect(record?.state).toBe('ambiguous');
  expect(error).toBeInstanceOf(AmbiguousOutcomeError);
  expect((error as Error).message).not.toMatch(/stays resumable$/);
  // the stop as it was decided, its cause; the lease released
  expect((error as Error).cause).toMatchObject({ code: 'DEADLINE_EXCEEDED', message: expect.stringMatching(/^waiting 5000 ms would leave under 100 ms of the deadline/) });
  expect(record?.lease).toBeNull();
  await client.close();
}, 10_000);

it("the last attempt's own unknown outcome (a 500, Retry-After past the deadline), the lookup's settled \"absent\" whose write the deadline cuts off: the stop's own DeadlineExceededError (record pending), not an AmbiguousOutcomeError; 0 effects, 1 POST, 1 lookup", async () => {
  const inner = memoryStore();
  let slowWrites = 0;
  // the "absent" applied at once, acknowledged 1.5 s later (past the 1 s deadline)
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const res = await inner.compareAndSet(id, g, next);
      if (next.evidence.at(-1)?.detail.startsWith('absent')) {
        slowWrites++;
        await wait(1_500);
      }
      return res;
    },
  });
  let posts = 0;
  // a 500 that created nothing (0 effects)
  const fetch = (async () => {
    posts++;
    return new Response('oops', { status: 500, headers: { 'retry-after': '5' } });
  }) as typeof globalThis.fetch;
  let lookups = 0;
  const lookup: LookupFn = async () => {
    lookups++;
    return null;
  };
  const client = createClient({ store, fetch, random: () => 0, settleMs: 0, telemetry: false, retry: { deadlineMs: 1_000, budget: false } });
  const error: unknown = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { ...SCOPE, lookup } }).catch((e: unknown) => e);
  await wait(1_700);
  const record = await client.get(SCOPE);
  expect(slowWrites).toBe(1);
  expect({ posts, lookups }).toEqual({ posts: 1, lookups: 1 });
  expect(record).toMatchObject({ state: 'pending', lease: null });
  expect(error).not.toBeInstanceOf(AmbiguousOutcomeError);
  expect(error).toBeInstanceOf(DeadlineExceededError);
  expect((error as Error).message).toMatch(/^waiting 5000 ms would leave under 100 ms of the deadline/);
  await client.close();
}, 10_000);

it.each([
  ['a Retry-After past the deadline', { deadlineMs: 1_000 }, '5'],
  ['a Retry-After over maxRetryAfterMs', { maxRetryAfterMs: 1_000 }, '5'],
  ['the attempts used up', { maxAttempts: 1 }, undefined],
] as const)('%s after a 500 (no lookup, providerDedupes): the AmbiguousOutcomeError does not say the record stays resumable (it is ambiguous); 1 POST', async (_name, retry, retryAfter) => {
  let posts = 0;
  const fetch = (async () => {
    posts++;
    return new Response('oops', { status: 500, headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter } });
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, random: () => 0, settleMs: 0, providerDedupes: true, telemetry: false, retry: { budget: false, ...retry } });
  const error: unknown = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: SCOPE }).catch((e: unknown) => e);
  expect(posts).toBe(1);
  expect((await client.get(SCOPE))?.state).toBe('ambiguous');
  expect(error).toBeInstanceOf(AmbiguousOutcomeError);
  expect((error as Error).message).not.toMatch(/resumable/);
  await client.close();
});
