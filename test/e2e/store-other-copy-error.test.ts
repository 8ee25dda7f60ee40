/**
 * A custom store that rejects with a `StoreError` of another copy of oncefetch: a store package with
 * its own `oncefetch` dependency, or one bundled apart from the app. The README tells store authors
 * to reject with a `StoreError` (a corrupt row, a call after `close()`, `parseRecord`'s refusal), and
 * says that the client takes any other rejection as a `StoreError` of its own, "so a call whose answer
 * could not be recorded still says it was sent". withStoreErrors let every branded `OnceError`
 * through (`isOnceError` is true across copies) while the engine tells a store failure by its class
 * (`instanceof StoreError`, this copy's): another copy's StoreError after the send was tried once, not
 * read back, and reached the caller bare ("redis: EVALSHA timed out"), which by StoreError's own
 * contract reads as "nothing was sent": a caller who then sends again under a new ref makes a second
 * effect. Effects counted at a loopback provider that does not dedupe.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore, OperationRecord } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { storeOver } from '../helpers/store-over.js';

let provider!: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

// A second instance of the errors module (vite keys modules by URL, query included): its StoreError
// is a class of its own, branded as oncefetch's, as another copy's is.
const otherCopyPath = '../../src/errors.js?other-copy';
const otherCopy = (await import(/* @vite-ignore */ otherCopyPath)) as typeof import('../../src/errors.js');

const finishes = (next: OperationRecord): boolean => (next.attempts.at(-1)?.finishedAt ?? null) !== null;
const timedOut = (): Error => new otherCopy.StoreError('redis: EVALSHA timed out');

const post = (client: OnceClient, ref: string): Promise<unknown> =>
  client
    .fetch(`${provider.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }), once: { action: 'create-order', ref } })
    .then((r) => r.status, (e: unknown) => e);

/** A caller who takes a store failure that does not say its request was sent at its word ("nothing was sent") and sends the intent again under a new ref. */
async function carefulCaller(client: OnceClient, ref: string): Promise<unknown> {
  const outcome = await post(client, ref);
  if (outcome instanceof Error && !/was sent/.test(outcome.message)) await post(client, `${ref}-again`);
  return outcome;
}

function clientOn(store: OnceStore): OnceClient {
  const client = createClient({ store, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  cleanups.push(() => client.close());
  return client;
}

it('the module copy is a second one (the premise of this file)', () => {
  expect(otherCopy.StoreError).not.toBe(StoreError);
  expect(new otherCopy.StoreError('x')).not.toBeInstanceOf(StoreError);
});

it("a store that fails every write of the 201 with another copy's StoreError: the caller is told the request was sent (this copy's StoreError, the original its cause); 1 effect, not resent under a new ref", async () => {
  const inner = memoryStore();
  let writes = 0;
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (!finishes(next)) return inner.compareAndSet(id, g, next);
      writes++;
      throw timedOut();
    },
  });
  const client = clientOn(store);
  const outcome = await carefulCaller(client, 'O-1');
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/attempt 1 was sent \(answered 201\) and its outcome could not be recorded: call again with the same ref, never a new one/);
  expect((outcome as StoreError).cause).toBeInstanceOf(otherCopy.StoreError);
  expect(writes).toBeGreaterThan(1); // tried again, as a blip of this copy's StoreError is
  expect(provider.effects).toBe(1);
});

it.each([
  ['applied, then reported failed', true],
  ['not applied', false],
])("the write of the 201 fails once with another copy's StoreError (%s): the call gets its 201 and the record ends succeeded, as with this copy's; 1 effect", async (_, applies) => {
  const inner = memoryStore();
  let failed = 0;
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (!finishes(next) || failed++ > 0) return inner.compareAndSet(id, g, next);
      if (applies) await inner.compareAndSet(id, g, next);
      throw timedOut();
    },
  });
  const client = clientOn(store);
  expect(await carefulCaller(client, 'O-2')).toBe(201);
  expect(provider.effects).toBe(1);
  expect((await inner.list())[0]?.state).toBe('succeeded');
});

it("a purge that fails part-way with another copy's StoreError: this copy's StoreError, its purged count kept", async () => {
  const inner = memoryStore();
  const store = storeOver(inner, { purge: () => Promise.reject(new otherCopy.StoreError('redis: purge failed', { purged: 3 })) });
  const client = clientOn(store);
  const outcome = await client.purge().catch((e: unknown) => e);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).purged).toBe(3);
  expect((outcome as StoreError).message).toContain('redis: purge failed');
});
