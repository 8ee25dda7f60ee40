/**
 * A ref whose operation was cancelled before any send stays cancelled: every later call with it
 * rejects with `OperationCancelledError`. The call that did not cancel (React StrictMode's second
 * effect run, after the first run's cleanup aborted `once.signal`; a user's retry) must be told
 * that it met an earlier cancel, that nothing was delivered, and that sending it now takes a new ref.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore, OperationCancelledError } from '../../src/index.js';

describe('a cancelled ref met by a later call', () => {
  it('StrictMode-like: the first call is aborted at once, the second (not aborted) and a third are told the ref stays cancelled', async () => {
    let sends = 0;
    const fetch = (async () => {
      sends++;
      return new Response('{"id":"o-1"}', { status: 201 });
    }) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch, telemetry: false });
    const place = (signal?: AbortSignal): Promise<Response> =>
      client.fetch('http://provider.test/orders', { method: 'POST', body: '{"item":"teapot"}', once: { action: 'place-order', ref: 'o-1', ...(signal === undefined ? {} : { signal }) } });
    const ac = new AbortController();
    const first = place(ac.signal);
    ac.abort();
    const second = place();
    const [a, b] = await Promise.allSettled([first, second]);
    const third = await place().then(() => undefined, (e: unknown) => e);
    expect(sends).toBe(0);
    expect(a.status).toBe('rejected');
    const own = (a as PromiseRejectedResult).reason as Error;
    expect(own).toBeInstanceOf(OperationCancelledError);
    expect(own.message).toBe('operation default/place-order/o-1 was cancelled before it was sent');
    for (const e of [(b as PromiseRejectedResult).reason, third]) {
      expect(e).toBeInstanceOf(OperationCancelledError);
      expect((e as Error).message).toBe(
        'operation default/place-order/o-1 was cancelled earlier, with nothing delivered; a cancelled ref stays cancelled and is not sent again: to send it now, use a new ref',
      );
    }
    await client.close();
  });
});

describe('the cancelling call that had sent', () => {
  it('a cancel requested while attempt 1 (a 500, nothing created) is out, settled by a lookup: the call is told it was cancelled after its attempts, not "before it was sent"; 1 POST, 0 effects', async () => {
    let posts = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const fetch = (async () => {
      posts++;
      await gate;
      return new Response('oops', { status: 500 });
    }) as typeof globalThis.fetch;
    const scope = { action: 'place-order', ref: 'o-2' };
    const client = createClient({ store: memoryStore(), fetch, random: () => 0, settleMs: 0, telemetry: false, retry: { budget: false, baseDelayMs: 1, maxDelayMs: 1 } });
    const place = () => client.fetch('http://provider.test/orders', { method: 'POST', body: '{"item":"teapot"}', once: { ...scope, lookup: async () => null } });
    const call = place().then(() => undefined, (e: unknown) => e);
    while (posts === 0) await new Promise((r) => setTimeout(r, 5));
    const cancel = client.cancel(scope);
    await new Promise((r) => setTimeout(r, 20));
    release();
    expect(await cancel).toMatchObject({ state: 'cancelled' });
    const own = (await call) as Error;
    expect(posts).toBe(1);
    expect(own).toBeInstanceOf(OperationCancelledError);
    expect(own.message).toBe('operation default/place-order/o-2 was cancelled after its attempts, with nothing delivered');
    await client.close();
  });
});
