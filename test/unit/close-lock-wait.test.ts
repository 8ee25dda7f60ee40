/**
 * `client.close({ waitMs })` stops the calls still running when its wait runs out (README, Usage:
 * "any other call rejects ... and sends nothing more"). A call waiting on another tab's Web Lock was
 * not stopped: only its deadline or its caller's abort ended that wait, so it stayed pending after
 * close() had resolved and the store was closed, up to `inFlightWaitMs` (30 s by default), then ran
 * its claim on the closed store. Found by a user trial in Chromium (tab B waiting behind tab A,
 * B's client closed with waitMs 100: close resolved at 0.3 s, B's call rejected 2.7 s later, when
 * A released the lock). Two "tabs" on one memory store and one fake LockManager, as in
 * engine-timeouts.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createClientWith } from '../../src/client.js';
import { StoreError, memoryStore } from '../../src/index.js';
import { webLocks } from '../../src/web-locks.js';
import { fakeLocks } from '../helpers/fake-locks.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'CL-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('client.close({ waitMs }) and a call waiting on the cross-tab lock', () => {
  it('rejects the waiting call with the close reason when waitMs runs out, sending nothing', async () => {
    const store = memoryStore();
    const platform = { store: () => store, fetch: () => never as typeof globalThis.fetch, exclusive: webLocks(fakeLocks()) };
    let sendsA = 0;
    let sendsB = 0;
    const tabA = createClientWith(
      { store, fetch: () => (sendsA++, never<Response>()), random: () => 0, retry: { attemptTimeoutMs: 60_000, budget: false } },
      platform,
    );
    const tabB = createClientWith(
      { store, fetch: async () => (sendsB++, new Response('{}', { status: 201 })), random: () => 0, inFlightWaitMs: 20_000, retry: { budget: false } },
      platform,
    );
    try {
      void tabA.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch(() => undefined);
      while ((await tabA.get(SCOPE))?.state !== 'in_flight') await tick(5);
      const waiting = tabB.fetch(URL_ORDERS, { ...post, once: SCOPE }).then(
        () => 'resolved',
        (e: unknown) => e,
      );
      await tick(50);
      const started = Date.now();
      await tabB.close({ waitMs: 50 });
      const outcome = await Promise.race([waiting, tick(1_500).then(() => 'still pending 1.5 s after close()')]);
      expect(outcome).toBeInstanceOf(StoreError);
      expect((outcome as StoreError).message).toMatch(/close\(\{ waitMs: 50 \}\)/);
      expect(Date.now() - started).toBeLessThan(1_500);
      expect({ sendsA, sendsB }).toEqual({ sendsA: 1, sendsB: 0 });
    } finally {
      await tabA.close({ waitMs: 0 });
    }
  });

  it('close() without waitMs still lets the waiting call finish: it replays the other tab\'s answer', async () => {
    const store = memoryStore();
    const platform = { store: () => store, fetch: () => never as typeof globalThis.fetch, exclusive: webLocks(fakeLocks()) };
    let sends = 0;
    const answerLater = async (): Promise<Response> => {
      sends++;
      await tick(300);
      return new Response('{"id":1}', { status: 201 });
    };
    const tabA = createClientWith({ store, fetch: answerLater, random: () => 0, retry: { budget: false } }, platform);
    const tabB = createClientWith({ store, fetch: answerLater, random: () => 0, inFlightWaitMs: 20_000, retry: { budget: false } }, platform);
    try {
      const first = tabA.fetch(URL_ORDERS, { ...post, once: SCOPE });
      while ((await tabA.get(SCOPE))?.state !== 'in_flight') await tick(5);
      const waiting = tabB.fetch(URL_ORDERS, { ...post, once: SCOPE });
      await tick(50);
      const closed = tabB.close();
      const res = await waiting;
      await closed;
      expect({ status: res.status, replayed: res.headers.get('oncefetch-replayed'), first: (await first).status, sends }).toEqual({
        status: 201,
        replayed: 'true',
        first: 201,
        sends: 1,
      });
    } finally {
      await tabA.close({ waitMs: 0 });
    }
  });
});
