/**
 * `client.close()` behaves the same from the Node entry (src/index.ts) and the browser entry
 * (src/browser.ts, whose own `fetch` and `wrap` wrap the shared client's): a graceful wait for the
 * call in flight, no new work after it began, `waitMs` as the bound, one promise for two calls.
 * A scripted transport counts the sends; the records are read from the memory store as it closes.
 */
import { describe, expect, it } from 'vitest';
import * as browser from '../../src/browser.js';
import * as node from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';

const URL_ = 'https://api.example.test/orders';
const ACTION = 'create-order';

/** A client of `entry` on a memory store whose transport answers 201 after `delayMs`, counting sends. */
function setup(entry: typeof node | typeof browser, delayMs: number) {
  const sends: string[] = [];
  const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
    sends.push(String(init?.method));
    await new Promise((r) => setTimeout(r, delayMs));
    return new Response('{"id":"o-1"}', { status: 201, headers: { 'content-type': 'application/json' } });
  }) as typeof globalThis.fetch;
  const store: OnceStore = entry.memoryStore();
  /** the record states when the store was closed */
  const atClose: Record<string, string | undefined> = {};
  const close = store.close.bind(store);
  store.close = async () => {
    for (const ref of ['r1', 'r2']) atClose[ref] = (await store.get(recordId({ tenant: 'default', action: ACTION, ref })))?.state;
    return close();
  };
  const client: OnceClient = entry.createClient({ store, fetch, telemetry: false, leaseMs: 200 });
  const order = (ref: string): Promise<Response> => client.fetch(URL_, { method: 'POST', body: `{"ref":"${ref}"}`, once: { action: ACTION, ref } });
  return { client, order, sends, atClose };
}

const since = (t0: number): number => performance.now() - t0;

describe.each([
  ['node', node],
  ['browser', browser],
] as const)('client.close() from the %s entry', (_name, entry) => {
  it('waits for the call in flight: the 201 is returned and recorded before the store closes', async () => {
    const { client, order, sends, atClose } = setup(entry, 150);
    const call = order('r1');
    await new Promise((r) => setTimeout(r, 30));
    await client.close();
    expect((await call).status).toBe(201);
    expect(atClose['r1']).toBe('succeeded');
    expect(sends).toHaveLength(1);
  });

  it('new work after close() began rejects at once with a StoreError naming it; nothing sent, nothing recorded', async () => {
    const { client, order, sends, atClose } = setup(entry, 100);
    const call = order('r1');
    const closing = client.close();
    for (const late of [order('r2'), client.wrap()(URL_, { method: 'POST', body: '{"ref":"r2"}', headers: { 'Idempotency-Key': 'r2' } }), client.run({ action: ACTION, ref: 'r2' }, async () => 1)]) {
      await expect(late).rejects.toBeInstanceOf(entry.StoreError);
      await expect(late).rejects.toThrow(/called after client\.close\(\)/);
    }
    await closing;
    expect((await call).status).toBe(201);
    expect(sends).toHaveLength(1);
    expect(atClose['r2']).toBeUndefined();
  });

  it('waitMs bounds the wait: close() resolves near it; the call returns its 201 when it comes (unrecorded), sent once', async () => {
    const { client, order, sends, atClose } = setup(entry, 300);
    const t0 = performance.now();
    const call = order('r1');
    await new Promise((r) => setTimeout(r, 20));
    await client.close({ waitMs: 30 });
    expect(since(t0)).toBeLessThan(250);
    expect(atClose['r1']).toBe('in_flight');
    expect((await call).status).toBe(201);
    expect(sends).toHaveLength(1);
  });

  it('twice: one promise; a bad waitMs is a TypeError or RangeError naming it', async () => {
    const { client } = setup(entry, 0);
    await expect(client.close({ waitMs: -5 })).rejects.toThrow(new RangeError('client.close: option "waitMs" must be a non-negative integer of milliseconds, got -5'));
    await expect(client.close({ waitMs: null as unknown as number })).rejects.toThrow(TypeError);
    const first = client.close();
    expect(client.close({ waitMs: 10 })).toBe(first);
    await first;
  });
});
