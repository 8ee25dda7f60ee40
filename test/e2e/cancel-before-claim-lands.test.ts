/**
 * `client.cancel(scope)` while this client's call of that scope is still claiming it (the claim's
 * write not yet applied): the cancel reaches the call (see `Engine.requestCancel`), which records it at
 * its next step and ends `cancelled`, nothing sent. Its result must say so, not `not_found` ("no such
 * operation") while the record ends `cancelled` and the call rejects `OperationCancelledError`.
 *
 * Effects are counted at a loopback provider that does not dedupe.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit, until, wait } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

/** A store whose claims are applied `ms` after they are asked for; `state.claiming` while one waits. */
function lateClaim(inner: OnceStore, ms: number): { store: OnceStore; state: { claiming: boolean } } {
  const state = { claiming: false };
  const store: OnceStore = {
    name: inner.name,
    claim: async (record) => {
      state.claiming = true;
      await wait(ms);
      state.claiming = false;
      return inner.claim(record);
    },
    compareAndSet: (id, expected, next) => inner.compareAndSet(id, expected, next),
    get: (id) => inner.get(id),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  return { store, state };
}

describe('client.cancel() before the claim of a call of this client lands', () => {
  it.each([undefined, 0])('says cancelled (waitMs %s), not not_found: the call ends cancelled before it was sent; 0 requests, 0 effects', async (waitMs) => {
    const { store, state } = lateClaim(memoryStore(), 200);
    const c: OnceClient = createClient({ store, telemetry: false, retry: { deadlineMs: 10_000, budget: false } });
    cleanups.push(() => c.close({ waitMs: 0 }));
    const ref = `claim-late-${String(waitMs)}`;
    const call = timed(c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }), 3_000);
    await until(() => state.claiming);
    const result = await c.cancel({ action: ACTION, ref }, waitMs === undefined ? undefined : { waitMs });
    const ended = await call;
    const rec = await c.get({ action: ACTION, ref });
    expect(ended.outcome).toBe('OperationCancelledError');
    expect(rec?.state).toBe('cancelled');
    if (waitMs === undefined) expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    // (no wait: the cancel reached the call and is recorded; what it says must not be "no such operation")
    else expect(result.outcome).not.toBe('not_found');
    expect(provider.requests.length).toBe(0);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('whose compareAndSet fails once (a store blip) during a Retry-After: 30 of a call of this client: says cancelled, as the call ends (it took the cancel and recorded it itself), not the blip; 1 request, 0 effects', async () => {
    const inner = memoryStore();
    const blip = { armed: false, hit: 0 };
    const store: OnceStore = {
      name: inner.name,
      claim: (record) => inner.claim(record),
      compareAndSet: async (id, expected, next) => {
        if (blip.armed && next.cancelRequestedAt !== null) {
          blip.armed = false;
          blip.hit++;
          throw new Error('connection reset');
        }
        return inner.compareAndSet(id, expected, next);
      },
      get: (id) => inner.get(id),
      list: (query) => inner.list(query),
      purge: (now) => inner.purge(now),
      close: () => inner.close(),
    };
    const c: OnceClient = createClient({ store, telemetry: false, retry: { deadlineMs: 60_000, budget: false } });
    cleanups.push(() => c.close({ waitMs: 0 }));
    const ref = 'cas-blip';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '30' });
    const call = timed(c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }), 3_000);
    await until(() => provider.requests.length === 1);
    await wait(50); // the 503 answered, the wait begun
    blip.armed = true;
    const result = await c.cancel({ action: ACTION, ref }).then(
      (r) => r,
      (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error)),
    );
    const ended = await call;
    expect(blip.hit).toBe(1);
    expect(ended.outcome).toBe('OperationCancelledError');
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('waits up to waitMs in all, the slow reads that found no record counted in it: a store read taking 1.5 s, waitMs 1.5 s, returns after about two reads (not two reads and waitMs more); the call ends cancelled, 0 requests', async () => {
    const inner = memoryStore();
    const { store: late, state } = lateClaim(inner, 5_000);
    const store: OnceStore = { ...late, get: async (id) => (state.claiming ? (await wait(1_500), inner.get(id)) : inner.get(id)) };
    const c: OnceClient = createClient({ store, telemetry: false, retry: { deadlineMs: 20_000, budget: false } });
    cleanups.push(() => c.close({ waitMs: 0 }));
    const ref = 'claim-slow-read';
    const call = timed(c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }), 10_000);
    await until(() => state.claiming);
    const started = performance.now();
    const result = await c.cancel({ action: ACTION, ref }, { waitMs: 1_500 });
    const cancelMs = performance.now() - started;
    console.log(`cancel with waitMs 1500 over 1500 ms reads returned ${result.outcome} after ${Math.round(cancelMs)} ms`);
    expect(result).toEqual({ outcome: 'undecided', state: undefined });
    expect(cancelMs).toBeGreaterThanOrEqual(2_900);
    expect(cancelMs).toBeLessThan(3_900);
    const ended = await call;
    expect(ended.outcome).toBe('OperationCancelledError');
    expect(provider.requests.length).toBe(0);
    expect(provider.effectsFor(ref)).toBe(0);
  }, 15_000);

  it('a cancel with no call running and no record is still not_found', async () => {
    const c: OnceClient = createClient({ store: memoryStore(), telemetry: false });
    cleanups.push(() => c.close({ waitMs: 0 }));
    expect(await c.cancel({ action: ACTION, ref: 'none' })).toEqual({ outcome: 'not_found', state: undefined });
  });
});
