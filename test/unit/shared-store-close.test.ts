/**
 * Clients that share one store (the README's "one client per endpoint (they can share a store)", a
 * SaaS with a client per tenant): one client's `close()` must not close the store under the others.
 * Regression (user trial, multi-tenant SaaS): tenant t1's client closed the shared store while
 * tenant t2's call was on the wire; that call's 201 came back as a `StoreError` ("compareAndSet
 * called after close()"), its record left `in_flight`, and every later t2 call failed ("claim
 * called after close()") until the process restarted. The store now closes with the last client.
 */
import { describe, expect, it } from 'vitest';
import * as browser from '../../src/browser.js';
import * as node from '../../src/index.js';
import type { OnceStore } from '../../src/index.js';

const URL_ = 'https://api.example.test/payments';

describe.each([
  ['node', node],
  ['browser', browser],
] as const)('clients sharing a store (%s entry)', (_name, entry) => {
  it("one client's close() leaves the store open for the others; the last one closes it", async () => {
    let sends = 0;
    const fetch = (async () => {
      sends++;
      await new Promise((r) => setTimeout(r, 100));
      return new Response('{"id":"p-1"}', { status: 201, headers: { 'content-type': 'application/json' } });
    }) as typeof globalThis.fetch;
    const store: OnceStore = entry.memoryStore();
    let storeClosed = 0;
    const close = store.close.bind(store);
    store.close = () => {
      storeClosed++;
      return close();
    };
    const t1 = entry.createClient({ tenant: 't1', store, fetch, telemetry: false });
    const t2 = entry.createClient({ tenant: 't2', store, fetch, telemetry: false });
    const pay = (client: typeof t1, ref: string) => client.fetch(URL_, { method: 'POST', body: `{"ref":"${ref}"}`, once: { action: 'pay', ref } });

    expect((await pay(t1, 'a')).status).toBe(201);
    const inFlight = pay(t2, 'b');
    await new Promise((r) => setTimeout(r, 20));
    await t1.close();
    expect(storeClosed).toBe(0);
    const res = await inFlight;
    expect(res.status).toBe(201);
    expect((await t2.get({ action: 'pay', ref: 'b' }))?.state).toBe('succeeded');
    // t2 goes on working on the shared store
    expect((await pay(t2, 'c')).status).toBe(201);
    expect(sends).toBe(3);
    // the closed client still refuses new work
    await expect(pay(t1, 'd')).rejects.toThrow(/called after client.close\(\)/);
    await t2.close();
    expect(storeClosed).toBe(1);
  });
});

describe("close({ waitMs }) of one client of a shared store: the stopped call's error", () => {
  it('does not say the store was closed while another client keeps it open (and does when it was)', async () => {
    let sends = 0;
    // a 503 asking for 5 s: the call waits in its backoff when close({ waitMs: 0 }) stops it
    const fetch = (async () => {
      sends++;
      return new Response('busy', { status: 503, headers: { 'retry-after': '5' } });
    }) as typeof globalThis.fetch;
    const store: OnceStore = node.memoryStore();
    let storeClosed = 0;
    const close = store.close.bind(store);
    store.close = () => {
      storeClosed++;
      return close();
    };
    const t1 = node.createClient({ tenant: 't1', store, fetch, telemetry: false, retry: { budget: false } });
    const t2 = node.createClient({ tenant: 't2', store, fetch, telemetry: false, retry: { budget: false } });
    const waiting = (client: typeof t1) => client.fetch(URL_, { method: 'POST', body: '{}', once: { action: 'pay', ref: 'x' } }).then(
        (res) => new Error(`resolved with ${res.status}`),
        (e: unknown) => e as Error,
      );

    const first = waiting(t1);
    await new Promise((r) => setTimeout(r, 50));
    await t1.close({ waitMs: 0 });
    const shared = await first;
    expect(shared.message).toMatch(/stopped this work when its wait ran out/);
    expect(storeClosed).toBe(0);
    expect(shared.message).not.toMatch(/closed the store/);

    const last = waiting(t2);
    await new Promise((r) => setTimeout(r, 50));
    await t2.close({ waitMs: 0 });
    expect((await last).message).toMatch(/stopped this work when its wait ran out, and closed the store/);
    expect(storeClosed).toBe(1);
    expect(sends).toBe(2);
  });
});
