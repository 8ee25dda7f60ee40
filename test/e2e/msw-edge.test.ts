/**
 * The network edge through msw: a client whose transport is the global fetch
 * (patched by msw at call time) against a handler that fails once with 503.
 * The handler counts orders it processes without deduplicating, so the count
 * is the number of business effects.
 */
import { http, HttpResponse } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REPLAYED_HEADER, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';

const API = 'https://provider.example.test';

const server = setupServer();

/** What the provider saw. */
let seen: { keys: (string | null)[]; bodies: string[]; orders: { id: string; key: string | null }[] };

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }));
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

beforeEach(() => {
  seen = { keys: [], bodies: [], orders: [] };
  let requests = 0;
  server.use(
    http.post(`${API}/orders`, async ({ request }) => {
      requests++;
      const key = request.headers.get('idempotency-key');
      seen.keys.push(key);
      seen.bodies.push(await request.text());
      if (requests === 1) return HttpResponse.json({ error: 'overloaded' }, { status: 503 });
      const order = { id: `ord_${seen.orders.length + 1}`, key };
      seen.orders.push(order);
      return HttpResponse.json({ id: order.id }, { status: 201 });
    }),
  );
});

function makeClient(): OnceClient {
  return createClient({
    store: memoryStore(),
    // resolved at call time, so msw's patched global is the one used
    fetch: (input, init) => globalThis.fetch(input, init),
    random: () => 0,
  });
}

const body = JSON.stringify({ sku: 'A-17', qty: 1 });

describe('msw edge', () => {
  it('client.fetch: a 503 then a 201 carry one Idempotency-Key and make exactly one order', async () => {
    const client = makeClient();
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body, once: { action: 'create-order', ref: 'T-1' } };
    const res = await client.fetch(`${API}/orders`, init);
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ id: 'ord_1' });
    expect(seen.keys).toHaveLength(2);
    expect(seen.keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.keys[1]).toBe(seen.keys[0]);
    expect(seen.bodies).toEqual([body, body]);
    expect(seen.orders).toHaveLength(1);
    // a repeat of the same operation is answered from the store: no request, no order
    const again = await client.fetch(`${API}/orders`, init);
    expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(await again.json()).toEqual({ id: 'ord_1' });
    expect(seen.keys).toHaveLength(2);
    expect(seen.orders).toHaveLength(1);
  });

  it('client.wrap() handed to code that calls it like a plain fetch behaves the same', async () => {
    const client = makeClient();
    // a third-party SDK that only knows `fetch`
    const sdk = (fetchImpl: typeof globalThis.fetch) => ({
      createOrder: async (order: string) => {
        const res = await fetchImpl(`${API}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: order });
        return { status: res.status, json: (await res.json()) as unknown };
      },
    });
    const result = await sdk(client.wrap()).createOrder(body);
    expect(result).toEqual({ status: 201, json: { id: 'ord_1' } });
    expect(seen.keys).toHaveLength(2);
    expect(seen.keys[1]).toBe(seen.keys[0]);
    expect(seen.keys[0]).not.toBeNull();
    expect(seen.orders).toHaveLength(1);
    expect(await client.store.list()).toEqual([expect.objectContaining({ state: 'succeeded', key: seen.keys[0] })]);
  });

  it('client.wrap() called with a Request object behaves the same', async () => {
    const client = makeClient();
    const wrapped = client.wrap();
    const res = await wrapped(new Request(`${API}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }));
    expect(res.status).toBe(201);
    expect(seen.keys).toHaveLength(2);
    expect(seen.keys[1]).toBe(seen.keys[0]);
    expect(seen.bodies).toEqual([body, body]);
    expect(seen.orders).toHaveLength(1);
  });

  // Regression (review): msw replaces the global Headers with a class that, given another Headers,
  // copies only what it recorded itself: a Request's Authorization never reached the provider.
  it("client.wrap() with a Request sends the Request's own headers", async () => {
    const headers: [string, string][][] = [];
    server.use(
      http.post(`${API}/echo`, ({ request }) => {
        headers.push([...request.headers].filter(([name]) => name !== 'idempotency-key'));
        return HttpResponse.json({ ok: true }, { status: 201 });
      }),
    );
    const request = () => new Request(`${API}/echo`, { method: 'POST', headers: { authorization: 'Bearer t', 'x-trace': 't1' }, body: 'hello' });
    expect((await fetch(request())).status).toBe(201);
    expect((await makeClient().wrap()(request())).status).toBe(201);
    expect(headers[1]).toEqual(headers[0]);
    expect(headers[1]).toContainEqual(['authorization', 'Bearer t']);
  });

  // Regression (review): with a Request input, init.headers were merged into the Request's (fetch
  // replaces them: a dropped Authorization was still sent) and init.body: null sent an empty body
  // (fetch keeps the Request's body: the effect was made with another payload).
  it('client.wrap() with a Request and an init that overrides parts of it sends what fetch sends', async () => {
    const echoed: { headers: [string, string][]; body: string }[] = [];
    server.use(
      http.post(`${API}/echo`, async ({ request }) => {
        echoed.push({ headers: [...request.headers].filter(([name]) => name !== 'idempotency-key'), body: await request.text() });
        return HttpResponse.json({ ok: true }, { status: 201 });
      }),
    );
    const request = () => new Request(`${API}/echo`, { method: 'POST', headers: { authorization: 'Bearer old', 'x-trace': 't1' }, body: 'hello' });
    const wrapped = makeClient().wrap();
    for (const init of [{ headers: { authorization: 'Bearer new' } }, { body: null }, { headers: new Headers(), body: 'other' }] as RequestInit[]) {
      expect((await fetch(request(), init)).status).toBe(201);
      expect((await wrapped(request(), init)).status).toBe(201);
      const [plain, once] = echoed.splice(0);
      expect(once).toEqual(plain);
    }
  });
});
