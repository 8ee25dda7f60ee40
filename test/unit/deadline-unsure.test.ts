/**
 * A call whose deadline cuts off a write after the send, the record left `pending` with an earlier
 * attempt that may have taken effect (a 500 cleared for a same-key resend only by providerDedupes),
 * ends with the deadline's DeadlineExceededError, "the record stays resumable". As every resumable
 * stop does (`unsure`, d57fb5e, de49541), it must say that an earlier attempt may have taken effect:
 * a caller (a queue's dead-letter handler) must not read "resumable" as "nothing happened" and send
 * it again under a new ref. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { wait } from '../helpers/setup.js';


async function run(first: number, slowOpen = false): Promise<{ sends: number; effects: number; outcome: unknown; state: string | undefined; classes: (string | null)[] | undefined }> {
  const inner = memoryStore();
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const res = await inner.compareAndSet(id, g, next);
      // the second attempt's outcome (or, slowOpen, the write that opens it) is acknowledged after the call's deadline
      if (next.attempts.length === 2 && (next.attempts[1]?.finishedAt === null) === slowOpen) await wait(1_500);
      return res;
    },
    close: async () => undefined,
  });
  let sends = 0;
  let effects = 0;
  const fetch = (async () => {
    sends++;
    if (sends === 1) {
      if (first === 500) effects++; // the provider acted, then answered 500
      return new Response('first', { status: first });
    }
    return new Response('busy', { status: 503, headers: { 'retry-after': '0' } });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, providerDedupes: true, telemetry: false, retry: { deadlineMs: 1_000, baseDelayMs: 1, maxDelayMs: 1, budget: false } });
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  await wait(1_700);
  const [rec] = await inner.list({ limit: 1 });
  await client.close();
  await inner.close();
  return { sends, effects, outcome, state: rec?.state, classes: rec?.attempts.map((a) => a.class) };
}

it('a 500 (1 effect), resent on dedupe, a 503 whose write the deadline cuts: the error says an earlier attempt may have taken effect', async () => {
  const { sends, effects, outcome, state, classes } = await run(500);
  expect({ sends, effects }).toEqual({ sends: 2, effects: 1 });
  expect({ state, classes }).toEqual({ state: 'pending', classes: ['ambiguous', 'retryable'] });
  expect(outcome).toBeInstanceOf(DeadlineExceededError);
  expect((outcome as Error).message).toMatch(/the record stays resumable; an earlier attempt may have taken effect: call again with the same ref/);
  expect((outcome as Error).cause).toBeInstanceOf(DeadlineExceededError);
}, 10_000);

it('a 500 (1 effect), the write that opens the resend acknowledged past the deadline (not sent): the same', async () => {
  const { sends, effects, outcome, state, classes } = await run(500, true);
  expect({ sends, effects }).toEqual({ sends: 1, effects: 1 });
  expect(state).toBe('pending');
  expect(classes?.[0]).toBe('ambiguous');
  expect(outcome).toBeInstanceOf(DeadlineExceededError);
  expect((outcome as Error).message).toMatch(/the record stays resumable; an earlier attempt may have taken effect: call again with the same ref/);
}, 10_000);

it('a 503 then a 503 whose write the deadline cuts (0 effects): resumable, nothing more said', async () => {
  const { sends, effects, outcome, state, classes } = await run(503);
  expect({ sends, effects }).toEqual({ sends: 2, effects: 0 });
  expect({ state, classes }).toEqual({ state: 'pending', classes: ['retryable', 'retryable'] });
  expect(outcome).toBeInstanceOf(DeadlineExceededError);
  expect((outcome as Error).message).toMatch(/the record stays resumable$/);
}, 10_000);
