/**
 * A call of a ref whose earlier write (given up on before its send) is still being undone waits for
 * that undo at the top of `acquire` (`awaitAbandon`), until the lease that write took would end. That
 * wait listened only to the call's deadline, so `client.close({ waitMs })` did not end it: the call
 * ran on until the lease's end. Now it ends at the close, with the close's StoreError, nothing sent,
 * as every other wait before the send does. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch, wait } from '../helpers/setup.js';

const URL_ = 'https://api.example.test/orders';
const order = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } };

it("a call waiting for an earlier call's undo (its claim never answers, given up on at its abort): close({ waitMs: 100 }) ends it within waitMs + 500 ms with the close's StoreError, 0 sends", async () => {
  const inner = memoryStore();
  let claims = 0;
  const store = storeOver(inner, {
    // (the first claim never answers, so the undo of the call that gave up on it never settles)
    claim: (r) => (++claims === 1 ? new Promise<never>(() => undefined) : inner.claim(r)),
    close: async () => undefined,
  });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, leaseMs: 6_000, telemetry: false, retry: { deadlineMs: 9_000, budget: false } });

  const abort = new AbortController();
  const first = client.fetch(URL_, { ...order, signal: abort.signal }).catch((e: unknown) => e);
  await wait(20);
  abort.abort(new Error('caller gave up'));
  expect(await first).toMatchObject({ message: 'caller gave up' });

  const second = client.fetch(URL_, order).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  await wait(50);
  expect(claims).toBe(1);
  const started = Date.now();
  const closed = client.close({ waitMs: 100 });
  const outcome = await second;
  const endedAfterMs = Date.now() - started;
  await closed;
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 100 \}\) stopped this work/);
  expect(endedAfterMs).toBeLessThan(600);
  expect(claims).toBe(1);
  expect(sends.n).toBe(0);
}, 15_000);

it('a graceful close (waitMs long enough) lets 20 calls waiting for the undo finish: 1 send, the rest replay, no listener warning', async () => {
  const inner = memoryStore();
  let claims = 0;
  const store = storeOver(inner, {
    // (the first claim answers late, after its call gave up: the undo then settles)
    claim: (r) => (++claims === 1 ? wait(300).then(() => inner.claim(r)) : inner.claim(r)),
  });
  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, leaseMs: 6_000, telemetry: false, retry: { deadlineMs: 9_000, budget: false } });
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(w.name + ': ' + w.message);
  process.on('warning', onWarning);
  try {
    const abort = new AbortController();
    const first = client.fetch(URL_, { ...order, signal: abort.signal }).catch((e: unknown) => e);
    await wait(20);
    abort.abort(new Error('caller gave up'));
    expect(await first).toMatchObject({ message: 'caller gave up' });
    const rest = Array.from({ length: 20 }, () => client.fetch(URL_, order).then((r) => r.status, (e: unknown) => e));
    await wait(50);
    expect(claims).toBe(1);
    const closed = client.close({ waitMs: 5_000 });
    const outcomes = await Promise.all(rest);
    await closed;
    expect(outcomes).toEqual(Array.from({ length: 20 }, () => 201));
    expect(sends.n).toBe(1);
    await wait(0);
    expect(warnings.filter((n) => n.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  } finally {
    process.off('warning', onWarning);
  }
}, 15_000);
