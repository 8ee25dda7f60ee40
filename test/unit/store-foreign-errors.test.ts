/**
 * A custom store may reject with its driver's own error instead of a StoreError (ioredis rejects a
 * command that timed out with a plain Error "Command timed out", after Redis may have applied it).
 * The engine tells a store failure by its class: it tries the write of an answer in hand again,
 * reads it back, and says which attempt was sent, only for a StoreError. Found in a Redis store
 * trial: the same applied-but-unacknowledged write of a 201 returned the 201 as a StoreError, and
 * rejected with the bare "Command timed out" as a plain Error, the order created. Effects counted
 * at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch } from '../helpers/setup.js';

const finishes = (next: OperationRecord): boolean => (next.attempts.at(-1)?.finishedAt ?? null) !== null;
const call = (client: ReturnType<typeof createClient>, ref: string): Promise<unknown> =>
  client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );

it("a plain Error, or a store over HTTP's fetch failure (a TypeError), from compareAndSet after the send, the write applied: the call gets its 201, as with a StoreError", async () => {
  const failures = [
    () => new StoreError('redis: Command timed out'),
    () => new Error('Command timed out'),
    () => new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) }),
    () => new TypeError('Failed to fetch'),
    // Deno's fetch (no cause), and React Native's (whatwg-fetch): a store over HTTP there (a Redis REST API from Deno Deploy, say)
    () => new TypeError('error sending request from 10.0.0.2:41498 for https://redis.example.test/pipeline (10.0.0.9:443): client error (SendRequest): connection closed before message completed'),
    () => new TypeError('Network request failed'),
  ];
  for (const make of failures) {
    const inner = memoryStore();
    let failed = 0;
    const store = storeOver(inner, {
      compareAndSet: async (id, g, next) => {
        const res = await inner.compareAndSet(id, g, next);
        if (finishes(next) && failed++ === 0) throw make(); // applied, its reply lost
        return res;
      },
    });
    const { sends, fetch } = countingFetch(201);
    const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
    expect(await call(client, 'A-17'), `${make().constructor.name}: ${make().message}`).toBe(201);
    expect(sends.n).toBe(1);
    expect((await inner.list())[0]?.state).toBe('succeeded');
    expect(client.store).toBe(store); // the store the caller passed
    await client.close();
  }
});

it('a plain Error from the claim is a StoreError with the store error as its cause; nothing sent', async () => {
  const inner = memoryStore();
  const cause = new Error('connect ECONNREFUSED 127.0.0.1:6379');
  const store = storeOver(inner, { claim: () => Promise.reject(cause) });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false });
  const outcome = await call(client, 'B-1');
  expect(sends.n).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toContain('ECONNREFUSED');
  expect((outcome as StoreError).cause).toBe(cause);
  await client.close();
});

it('two clients sharing one custom store: the first close leaves it open for the second', async () => {
  const inner = memoryStore();
  let closes = 0;
  const store = storeOver(inner, { close: async () => void closes++ });
  const { fetch } = countingFetch(201, 201);
  const a = createClient({ store, fetch, telemetry: false });
  const b = createClient({ store, fetch, telemetry: false });
  await a.close();
  expect(closes).toBe(0);
  expect(await call(b, 'C-1')).toBe(201);
  await b.close();
  expect(closes).toBe(1);
});
