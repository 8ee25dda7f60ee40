/**
 * A call whose own attempt got a 201 while another owner had taken its record over (its success's
 * write lost the lease: it holds the success, see `Engine.held`) takes the record back and records
 * that success as a lookup's "found" would (`settleOwn` in execute.ts). When the store fails that
 * write, the StoreError must say the request was sent and took effect: the README's StoreError row
 * reads "nothing was sent ... unless the failed write came after the send, which the error says".
 * It was a bare "mem: down". Effects counted at a scripted fetch; the takeover is simulated by
 * handing the record's lease to a dead owner, expired, while the request is out.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';

it("a held 201 whose write fails after the call took its record back: the StoreError says the request was sent and took effect, the store's cause kept", async () => {
  const inner = memoryStore();
  let tookBack = false;
  const cause = new Error('connection reset');
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      // (once the call took the record back from the dead owner, every write of a success fails)
      if (tookBack && next.state === 'succeeded') throw new StoreError('mem: failed while updating record x: connection reset', { cause });
      const before = await inner.get(id);
      if (before?.lease?.owner === 'dead' && next.lease !== null && next.lease.owner !== 'dead') tookBack = true;
      return inner.compareAndSet(id, g, next);
    },
  });
  let sends = 0;
  const fetch = (async () => {
    sends++;
    // while the request is out, another owner takes the record over and dies (its lease expired)
    const rec = (await inner.list({ limit: 1 }))[0]!;
    await inner.compareAndSet(rec.id, rec.generation, { ...rec, generation: rec.generation + 1, lease: { owner: 'dead', expiresAt: Date.now() - 1 } });
    return new Response('{"id":"o-1"}', { status: 201, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, budget: false } });
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).catch((e: unknown) => e);
  expect(tookBack).toBe(true);
  expect(sends).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(
    /^mem: failed while updating record x: connection reset; this call's request was sent \(answered 201\) and took effect, and that could not be recorded: call again with the same ref, never a new one$/,
  );
  expect((outcome as StoreError).cause).toBe(cause);
  expect((outcome as StoreError).scope).toEqual({ tenant: 'default', action: 'create-order', ref: 'A-17' });
  await client.close();
});
