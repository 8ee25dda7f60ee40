/** withStoreErrors (a26ae79) against the stores and errors it meets: a store over HTTP, a class instance, a synchronous throw, client.store handed to a second client. Effects counted at a scripted fetch. */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceStore, OperationRecord } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch } from '../helpers/setup.js';

const finishes = (next: OperationRecord): boolean => (next.attempts.at(-1)?.finishedAt ?? null) !== null;
const call = (client: ReturnType<typeof createClient>, ref: string): Promise<unknown> =>
  client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );

it('a store over HTTP whose fetch fails after the write applied (a TypeError): the call gets its 201, as with a StoreError', async () => {
  const failures = [
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
    expect(await call(client, 'A-17'), make().message).toBe(201);
    expect(sends.n).toBe(1);
    expect((await inner.list())[0]?.state).toBe('succeeded');
    await client.close();
  }
});

it("a store's own refusal of an argument (a TypeError without a foreign cause) still reaches the caller as it is", async () => {
  const inner = memoryStore();
  const refusal = new TypeError('claim: record must have an id');
  const store = storeOver(inner, { claim: () => Promise.reject(refusal) });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false });
  expect(await call(client, 'R-1')).toBe(refusal);
  expect(sends.n).toBe(0);
  await client.close();
});

class ClassStore implements OnceStore {
  #inner = memoryStore();
  closes = 0;
  get name(): string {
    return this.#inner.name;
  }
  claim(r: OperationRecord) {
    return this.#inner.claim(r);
  }
  get(id: string) {
    return this.#inner.get(id);
  }
  compareAndSet(id: string, g: number, n: OperationRecord) {
    return this.#inner.compareAndSet(id, g, n);
  }
  list(q?: Parameters<OnceStore['list']>[0]) {
    return this.#inner.list(q);
  }
  purge(now: number) {
    return this.#inner.purge(now);
  }
  async close() {
    this.closes++;
    return this.#inner.close();
  }
}

it('a class-instance store (prototype methods, private fields, a getter name) works through the wrapper', async () => {
  const store = new ClassStore();
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false });
  expect(await call(client, 'K-1')).toBe(201);
  expect(await call(client, 'K-1')).toBe(201);
  expect(sends.n).toBe(1);
  expect((await client.get({ action: 'create-order', ref: 'K-1' }))?.state).toBe('succeeded');
  await client.close();
  expect(store.closes).toBe(1);
});

it('a store that throws synchronously from claim: a StoreError, nothing sent', async () => {
  const inner = memoryStore();
  const store = storeOver(inner, {
    claim: () => {
      throw new Error('sync boom');
    },
  });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false });
  const outcome = await call(client, 'S-1');
  expect(sends.n).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  await client.close();
});

it('client.store passed to a second client shares the count: the last close closes it once', async () => {
  const inner = memoryStore();
  let closes = 0;
  const store = storeOver(inner, { close: async () => void closes++ });
  const { fetch } = countingFetch(201, 201);
  const a = createClient({ store, fetch, telemetry: false });
  const b = createClient({ store: a.store, fetch, telemetry: false });
  await a.close();
  expect(closes).toBe(0);
  expect(await call(b, 'C-1')).toBe(201);
  await b.close();
  expect(closes).toBe(1);
  // a third client after both closed: the store is closed, a new client on it closes it again on its close
});
