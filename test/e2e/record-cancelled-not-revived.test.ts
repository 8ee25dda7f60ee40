/**
 * A record cancelled while its owner waits out a 503's Retry-After (nothing delivered: `cancel()`
 * answers `cancelled`, "nothing will be sent") is terminal; once its retention has passed,
 * `purge()` removes it, as designed. The owner's next write then finds no record: the write-back
 * (src/engine/owned.ts) must not re-insert its pending record and send, after a confirmed
 * cancellation. Counted at a loopback provider (503 + Retry-After: 1 first, 201 after).
 *
 * A retention shorter than the wait is unusual, but allowed (`retentionMs` is any positive value).
 *
 * The cancel comes from another client on the same store (as from another process): the owner learns
 * of it at its next write, after the wait. A cancel by the owner's own client ends the wait at once
 * (see cancel-joined-and-local.test.ts): the call ends cancelled before any purge, nothing to write back.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { orderInit, until, wait } from '../helpers/setup.js';

const { serve, use } = eachTest();

/** A provider whose first answer is a 503 with Retry-After: 1, then 201s; its requests and effects (orders created). */
async function provider(): Promise<{ url: string; seen: { requests: number; effects: number } }> {
  const seen = { requests: 0, effects: 0 };
  const url = await serve((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.requests++;
      if (seen.requests === 1) {
        res.writeHead(503, { 'retry-after': '1' }).end();
        return;
      }
      seen.effects++;
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"o-1"}');
    });
  });
  return { url, seen };
}

/** The order of `scope.ref` through `c`: its status, or the name of the error it ended with. */
const placeOrder = (c: OnceClient, url: string, scope: { action: string; ref: string }): Promise<number | string> =>
  c.fetch(`${url}/orders`, { ...orderInit(scope.ref), once: scope }).then(
    (r) => r.status,
    (e: unknown) => (e as Error).name,
  );

describe('write-back after a cancel and a purge', () => {
  it('the owner does not send after a confirmed cancellation whose record was purged', async () => {
    const { url, seen } = await provider();
    const store = memoryStore();
    const options = { store, retentionMs: 100, random: () => 0, retry: { budget: false, maxAttempts: 3, deadlineMs: 10_000 } } as const;
    const c = use(createClient(options));
    const other = use(createClient(options));
    const scope = { action: 'create-order', ref: 'R3-C1' };
    const call = placeOrder(c, url, scope);
    await until(async () => (await c.get(scope))?.attempts.length === 1 && (await c.get(scope))?.state === 'pending');
    expect((await other.cancel(scope)).outcome).toBe('cancelled');
    await wait(150);
    expect(await c.purge()).toBe(1);
    const outcome = await call;
    await wait(100);
    expect(seen).toEqual({ effects: 0, requests: 1 });
    expect(outcome).toBe('StoreError'); // 'vanished while owned', as before the write-back
  });

  it("cancelled by the owner's own client: its wait ends at once, the call ends cancelled, nothing sent after a purge", async () => {
    const { url, seen } = await provider();
    const c = use(createClient({ store: memoryStore(), retentionMs: 100, random: () => 0, retry: { budget: false, maxAttempts: 3, deadlineMs: 10_000 } }));
    const scope = { action: 'create-order', ref: 'R3-C2' };
    const call = placeOrder(c, url, scope);
    await until(async () => (await c.get(scope))?.attempts.length === 1 && (await c.get(scope))?.state === 'pending');
    expect((await c.cancel(scope)).outcome).toBe('cancelled');
    await wait(150);
    await c.purge();
    const outcome = await call;
    await wait(1_100); // past the Retry-After: nothing goes out
    expect(seen).toEqual({ effects: 0, requests: 1 });
    expect(outcome).toBe('OperationCancelledError');
  });
});
