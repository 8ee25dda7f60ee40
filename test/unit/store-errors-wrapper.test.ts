/** withStoreErrors (a26ae79) against the stores and errors it meets (a store over HTTP's fetch failures: store-foreign-errors), a class instance, a synchronous throw, client.store handed to a second client. Effects counted at a scripted fetch. */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceStore, OperationRecord } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch } from '../helpers/setup.js';

const call = (client: ReturnType<typeof createClient>, ref: string): Promise<unknown> =>
  client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref } }).then(
    (r) => r.status,
    (e: unknown) => e,
  );

// (it reached the caller as it was before store-bare-typeerror: the record is oncefetch's, so the refusal is the store's failure, not the caller's)
it("a store's own refusal of an argument (a TypeError without a foreign cause): a StoreError, the refusal its cause; nothing sent", async () => {
  const inner = memoryStore();
  const refusal = new TypeError('claim: record must have an id');
  const store = storeOver(inner, { claim: () => Promise.reject(refusal) });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false });
  const outcome = await call(client, 'R-1');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toContain(`${inner.name}: claim failed: claim: record must have an id`);
  expect((outcome as StoreError).cause).toBe(refusal);
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

// A driver's RangeError ("Invalid time value", a buffer offset out of range) after the send is the store's
// failure as a TypeError is: passed on bare, a caller reading it as "my bug, nothing happened" sends again.
it("a store whose write of the 201 rejects with a bare RangeError: a StoreError saying the request was sent, the RangeError its cause; 1 send", async () => {
  const inner = memoryStore();
  const refusal = new RangeError('Invalid time value');
  const store = storeOver(inner, {
    compareAndSet: (id, g, next) => ((next.attempts.at(-1)?.finishedAt ?? null) !== null ? Promise.reject(refusal) : inner.compareAndSet(id, g, next)),
  });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  const outcome = await call(client, 'RG-1');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/was sent/);
  expect((outcome as StoreError).cause).toBe(refusal);
  expect(sends.n).toBe(1);
  await client.close();
});

// oncefetch's own errors pass the wrapper unchanged: a store's StoreError keeps its fields (client.purge's
// `purged`, documented: how many it had removed before it failed) and its message.
it("client.purge() over a store whose purge fails part-way: the store's StoreError itself, its purged count kept", async () => {
  const inner = memoryStore();
  const partWay = new StoreError('purge failed on its second page (purge had removed 1000 expired records before this)', { purged: 1_000 });
  const store = storeOver(inner, { purge: () => Promise.reject(partWay) });
  const client = createClient({ store, fetch: countingFetch(201).fetch, telemetry: false });
  const error = await client.purge().then(() => undefined, (e: unknown) => e);
  expect(error).toBe(partWay);
  expect((error as StoreError).purged).toBe(1_000);
  await client.close();
});
