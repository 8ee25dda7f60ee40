/**
 * A batching client (Apollo's BatchHttpLink, JSON-RPC batches) sends several operations in one
 * POST, a JSON array. Behind a retry of its own (Apollo's RetryLink, with jitter per operation),
 * the operations of a batch whose answer was lost come back regrouped: [A, B, C] is resent as
 * [A, B] and then [C]. Those payloads differ from the first, so the keyless-resend guard of
 * `client.wrap()` let them through, each as a new operation under a new key. Measured in a
 * GraphQL user trial (@apollo/client 4.3.8, RetryLink + BatchHttpLink, a dropped answer after
 * the commit): 6 orders for 3 mutations, and all three reported success. A keyless call is now
 * also refused when its body holds an element (or is itself the object) of a JSON-array body
 * whose outcome stayed unknown.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();

/** Commits each operation of a body (an array, or one object), then answers; the first request's answer is dropped (after `dropAfterMs`). */
async function batchServer(dropAfterMs = 0, drops = 1): Promise<{ url: string; orders: string[] }> {
  const orders: string[] = [];
  let requests = 0;
  const url = await serve((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { variables: { sku: string } } | { variables: { sku: string } }[];
      const ops = Array.isArray(body) ? body : [body];
      for (const op of ops) orders.push(op.variables.sku);
      if (requests++ < drops) return void setTimeout(() => req.socket.destroy(), dropAfterMs);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ops.map((op) => ({ data: { createOrder: { sku: op.variables.sku } } }))));
    });
  });
  return { url: `${url}/graphql`, orders };
}

const op = (sku: string): { query: string; variables: { sku: string } } => ({ query: 'mutation ($sku: String!) { createOrder(sku: $sku) { sku } }', variables: { sku } });
const post = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('client.wrap(): a keyless batch whose outcome is unknown, resent regrouped', () => {
  it('[A, B, C] dropped after the commit, then [A, B], [C] and C alone: all refused, 3 orders', async () => {
    const { url, orders } = await batchServer();
    const once = use(createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } }));
    const wrapped = once.wrap();
    await expect(wrapped(url, post([op('A'), op('B'), op('C')]))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const first = await wrapped(url, post([op('A'), op('B')])).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(TypeError);
    expect((first as TypeError).cause).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    await expect(wrapped(url, post([op('C')]))).rejects.toBeInstanceOf(TypeError);
    // variables in another key order are the same operation
    await expect(wrapped(url, post({ variables: { sku: 'C' }, query: op('C').query }))).rejects.toBeInstanceOf(TypeError);
    expect(orders).toEqual(['A', 'B', 'C']);
  });

  it('a batch that shares no operation with it is sent', async () => {
    const { url, orders } = await batchServer();
    const once = use(createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } }));
    const wrapped = once.wrap();
    await expect(wrapped(url, post([op('A'), op('B')]))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const res = await wrapped(url, post([op('D'), op('E')]));
    expect(res.status).toBe(200);
    expect(orders).toEqual(['A', 'B', 'D', 'E']);
  });

  // An SDK that races its fetch with a timer of its own (no abort) resends while the batch is still out: the same
  // payload waits for it, and so must a regrouped one (before: [A, B] sent at once, 5 orders for 3 mutations).
  it('[A, B, C] still out (its answer dropped 600 ms later), [A, B] and B alone meanwhile: they wait for it, then are refused; 3 orders', async () => {
    const { url, orders } = await batchServer(600);
    const once = use(createClient({ store: memoryStore(), retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 5 } }));
    const wrapped = once.wrap();
    const first = wrapped(url, post([op('A'), op('B'), op('C')])).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const regrouped = wrapped(url, post([op('A'), op('B')])).catch((e: unknown) => e);
    const alone = wrapped(url, post(op('B'))).catch((e: unknown) => e);
    expect(await first).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(await regrouped).toBeInstanceOf(TypeError);
    expect(((await regrouped) as TypeError).cause).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(await alone).toBeInstanceOf(TypeError);
    expect(orders).toEqual(['A', 'B', 'C']);
  });

  it('a batch sharing no operation with one still out is sent without waiting for it', async () => {
    const { url, orders } = await batchServer(600);
    const once = use(createClient({ store: memoryStore(), retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 5 } }));
    const wrapped = once.wrap();
    const first = wrapped(url, post([op('A'), op('B')])).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const startedAt = performance.now();
    const res = await wrapped(url, post([op('D'), op('E')]));
    expect(res.status).toBe(200);
    expect(performance.now() - startedAt).toBeLessThan(400);
    expect(await first).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(orders).toEqual(['A', 'B', 'D', 'E']);
  });

  // 5ec5f1f counted each element against the 1,000 payloads remembered: a batch of 1,000 pushed out every
  // earlier unknown payload (its resend sent: 2 orders of X), and one of 1,500 its own first 500 elements.
  it('an unknown 1,500-element batch keeps an earlier unknown payload and its own first elements refused', async () => {
    const { url, orders } = await batchServer(0, 2);
    const once = use(createClient({ store: memoryStore(), retry: { maxAttempts: 1 } }));
    const wrapped = once.wrap();
    await expect(wrapped(url, post(op('X')))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const skus = Array.from({ length: 1500 }, (_, i) => `S${i}`);
    await expect(wrapped(url, post(skus.map(op)))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    await expect(wrapped(url, post(op('X')))).rejects.toBeInstanceOf(TypeError);
    await expect(wrapped(url, post(skus.slice(0, 10).map(op)))).rejects.toBeInstanceOf(TypeError);
    expect(orders).toHaveLength(1 + 1500);
  });
});
