/**
 * One store shared by clients of two copies of oncefetch: an app's client and the client of an SDK
 * built on oncefetch (its own copy: `vi.resetModules()` below loads a second one), the app handing its
 * store to the SDK. A store closes with the last client that uses it (shared-store-close.test.ts), but
 * each copy counted its clients apart: the app's `close()` closed the store under the SDK's call on the
 * wire, whose 201 came back as a StoreError ("compareAndSet called after close()"; the order made), its
 * record left in_flight, and every later call of the SDK failed ("claim called after close()") until a
 * restart. The copies now count a store's clients together. Orders counted at a loopback API that does
 * not dedupe keys.
 */
import { expect, it, vi } from 'vitest';
import * as A from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { ordersServer } from '../helpers/orders-server.js';

vi.resetModules();
const B = (await import('../../src/index.js')) as typeof A;
const env = eachTest();

it('the second copy is one (the premise of this file)', () => {
  expect(B.createClient).not.toBe(A.createClient);
});

async function slowOrders() {
  const orders = ordersServer({
    onPost: ({ res, ref }) =>
      setTimeout(() => {
        orders.create(ref);
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ ref }));
      }, 200),
    onGet: ({ res }) => res.writeHead(404).end(),
  });
  return { orders, url: await env.serve(orders.handler) };
}

const post = (client: OnceClient, url: string, ref: string): Promise<unknown> =>
  client
    .fetch(`${url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }), once: { action: 'create-order', ref } })
    .then((r) => r.status, (e: unknown) => e);

it.each([
  ["the app's (this copy's) store", A, B],
  ["the SDK's (the other copy's) store", B, A],
] as const)("%s: the app's client closes while the SDK's call is on the wire; the call gets its 201, later calls replay it, the last close closes the store; 1 order", async (_, owner, other) => {
  const { orders, url } = await slowOrders();
  const store: OnceStore = owner.memoryStore();
  let closes = 0;
  const close = store.close.bind(store);
  store.close = () => {
    closes++;
    return close();
  };
  const app = owner.createClient({ store, telemetry: false });
  const sdk = other.createClient({ store, telemetry: false });
  try {
    const call = post(sdk, url, 'Q-1');
    await new Promise((r) => setTimeout(r, 50));
    await app.close();
    expect(closes).toBe(0);
    expect(await call).toBe(201);
    expect(await post(sdk, url, 'Q-1')).toBe(201);
  } finally {
    await sdk.close();
  }
  expect(closes).toBe(1);
  expect(orders.created).toEqual(['Q-1']);
});
