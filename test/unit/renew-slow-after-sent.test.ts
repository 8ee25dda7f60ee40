/**
 * The renew before a resend (sendOnce) that lands with its lease run out ends the call with a StoreError.
 * When an earlier attempt of the record was sent and may have taken effect (a 500, cleared for a same-key
 * resend only by providerDedupes), its message must not say "nothing was sent": a caller would read it as
 * "safe under a new ref". Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { wait } from '../helpers/setup.js';


async function run(status: number): Promise<{ sends: number; outcome: unknown; classes: (string | null)[] | undefined }> {
  const inner = memoryStore();
  let slow = false;
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      const res = await inner.compareAndSet(id, g, next);
      if (slow) await wait(150);
      return res;
    },
    close: async () => undefined,
  });
  let sends = 0;
  let effects = 0;
  const fetch = (async () => {
    sends++;
    effects++; // the provider acts, then answers 500
    slow = true;
    return new Response('oops', { status });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, leaseMs: 100, providerDedupes: true, telemetry: false, retry: { deadlineMs: 5_000, baseDelayMs: 1, maxDelayMs: 1, budget: false } });
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  slow = false;
  const [rec] = await inner.list({ limit: 1 });
  await client.close();
  await inner.close();
  expect(effects).toBe(sends);
  return { sends, outcome, classes: rec?.attempts.map((a) => a.class) };
}

it('after a 500 (1 effect, providerDedupes): the StoreError says this attempt was not sent, and that the earlier one may have taken effect', async () => {
  const { sends, outcome, classes } = await run(500);
  expect(sends).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect(classes).toEqual(['ambiguous', 'not_sent']);
  const message = (outcome as Error).message;
  expect(message).toMatch(/leaseMs 100 ms/);
  expect(message).not.toMatch(/nothing was sent/);
  expect(message).toMatch(/this attempt was not sent; an earlier attempt may have taken effect: call again with the same ref/);
}, 10_000);

it('after a 503 (nothing done): this attempt was not sent, no "may have taken effect"', async () => {
  const { sends, outcome, classes } = await run(503);
  expect(sends).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect(classes).toEqual(['retryable', 'not_sent']);
  const message = (outcome as Error).message;
  expect(message).toMatch(/leaseMs 100 ms\) had run out; this attempt was not sent\. Raise leaseMs/);
}, 10_000);
