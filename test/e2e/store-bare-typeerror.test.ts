/**
 * A custom store whose driver rejects with a bare TypeError, no cause: porsager/postgres rejects
 * with "TypeError: Cannot read properties of null (reading 'write')" when its socket is gone, and
 * any store bug does the same. withStoreErrors let such a TypeError through as an argument refusal,
 * so the write of an attempt's outcome after the send (a 201 in hand) ended the call with that bare
 * TypeError: no retry of the write, no read back, nothing saying the request was sent. A caller who
 * reads a TypeError as "my bug, nothing happened" and sends again under a new ref makes a second
 * effect. Effects counted at a loopback provider that does not dedupe.
 */
import { describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore, OperationRecord } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { storeOver } from '../helpers/store-over.js';
import { claimSentByA } from '../helpers/sent-record.js';

let provider!: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

const finishes = (next: OperationRecord): boolean => (next.attempts.at(-1)?.finishedAt ?? null) !== null;
const socketGone = (): TypeError => new TypeError("Cannot read properties of null (reading 'write')");

const post = (client: OnceClient, ref: string): Promise<unknown> =>
  client
    .fetch(`${provider.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }), once: { action: 'create-order', ref } })
    .then((r) => r.status, (e: unknown) => e);

/** A caller who reads a TypeError as "my bug, nothing happened" and sends the intent again under a new ref. */
async function naiveCaller(client: OnceClient, ref: string): Promise<unknown> {
  const outcome = await post(client, ref);
  if (outcome instanceof TypeError) await post(client, `${ref}-again`);
  return outcome;
}

function clientOn(store: OnceStore): OnceClient {
  const client = createClient({ store, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  cleanups.push(() => client.close());
  return client;
}

it.each([
  ['applied, then a bare TypeError, once', true],
  ['not applied, a bare TypeError, once', false],
])('the write of the 201 after the send: %s: the call gets its 201, as with a StoreError; 1 effect', async (_, applies) => {
  const inner = memoryStore();
  let failed = 0;
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (!finishes(next) || failed++ > 0) return inner.compareAndSet(id, g, next);
      if (applies) await inner.compareAndSet(id, g, next);
      throw socketGone();
    },
  });
  const client = clientOn(store);
  expect(await naiveCaller(client, 'T-1')).toBe(201);
  expect(provider.effects).toBe(1);
  expect((await inner.list())[0]?.state).toBe('succeeded');
});

it("a store that fails every write of the 201 with a bare TypeError: the caller is told the request was sent (a StoreError), not a bare TypeError; 1 effect, not resent under a new ref", async () => {
  const inner = memoryStore();
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (finishes(next)) throw socketGone();
      return inner.compareAndSet(id, g, next);
    },
  });
  const client = clientOn(store);
  const outcome = await naiveCaller(client, 'T-2');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/attempt 1 was sent \(answered 201\) and its outcome could not be recorded: call again with the same ref, never a new one/);
  expect((outcome as StoreError).cause).toBeInstanceOf(TypeError);
  expect(provider.effects).toBe(1);
});

it('the write of the 201 applied, then it and the read back both fail with a bare TypeError: told the request was sent; 1 effect', async () => {
  const inner = memoryStore();
  let broken = false;
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (broken) throw socketGone();
      const res = await inner.compareAndSet(id, g, next);
      if (finishes(next)) {
        broken = true;
        throw socketGone();
      }
      return res;
    },
    get: async (id) => {
      if (broken) throw socketGone();
      return inner.get(id);
    },
  });
  const client = clientOn(store);
  const outcome = await naiveCaller(client, 'T-3');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/was sent/);
  expect(provider.effects).toBe(1);
});

describe("the client's other store calls: a bare TypeError from the store is a StoreError, the TypeError its cause", () => {
  it('client.get, client.explain (get) and client.cancel (get, compareAndSet)', async () => {
    const inner = memoryStore();
    let broken = false;
    const store = storeOver(inner, {
      get: async (id) => {
        if (broken) throw socketGone();
        return inner.get(id);
      },
      compareAndSet: async (id, g, next) => {
        if (broken) throw socketGone();
        return inner.compareAndSet(id, g, next);
      },
    });
    const client = clientOn(store);
    const scope = { action: 'create-order', ref: 'T-4' };
    broken = true;
    for (const [what, call] of [
      ['get', () => client.get(scope)],
      ['explain', () => client.explain(scope)],
      ['cancel', () => client.cancel(scope)],
    ] as const) {
      const outcome = await call().then(() => undefined, (e: unknown) => e);
      expect(outcome, what).toBeInstanceOf(StoreError);
      expect((outcome as StoreError).cause, what).toBeInstanceOf(TypeError);
    }
    expect(provider.effects).toBe(0);
  });

  it("client.recover(): its takeover's compareAndSet applied, then a bare TypeError: the lease it took is released, not left until it expires", async () => {
    const inner = memoryStore();
    const T0 = Date.now() - 120_000;
    const stale = await claimSentByA(inner, { ref: 'T-5', key: 'k-5', createdAt: T0, startedAt: T0, leaseMs: 1_000 });
    let failed = 0;
    const store = storeOver(inner, {
      compareAndSet: async (id, g, next) => {
        const res = await inner.compareAndSet(id, g, next);
        if (failed++ === 0) throw socketGone(); // the takeover, applied, its reply lost
        return res;
      },
    });
    const client = createClient({ store, tenant: stale.tenant, telemetry: false });
    cleanups.push(() => client.close());
    const report = await client.recover();
    expect(report.errors.map((e) => e.scope?.ref)).toEqual(['T-5']);
    expect((await inner.get(stale.id))?.lease).toBeNull();
  });
});

it("a built-in store refusing the record of the 201 as one it cannot write (a TypeError, \"not written\"): oncefetch's own record, so the caller is told the request was sent; 1 effect", async () => {
  const inner = memoryStore();
  // (as an engine bug would leave it: a record the store's read-back check refuses)
  const store = storeOver(inner, { compareAndSet: (id, g, next) => inner.compareAndSet(id, g, finishes(next) ? { ...next, key: '' } : next) });
  const client = clientOn(store);
  const outcome = await naiveCaller(client, 'T-6');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/\(not written\); attempt 1 was sent \(answered 201\) and its outcome could not be recorded: call again with the same ref, never a new one/);
  expect((outcome as StoreError).cause).toBeInstanceOf(TypeError);
  expect(provider.effects).toBe(1);
});
