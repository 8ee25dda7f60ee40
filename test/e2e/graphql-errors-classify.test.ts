/**
 * A GraphQL server answers HTTP 200 with `{"errors":[...]}` for failures of its own, an internal
 * error after the resolver committed included. Only the body tells them apart, and
 * `once.classify` is synchronous: it could not read the `Response` it was handed (`.json()` is a
 * promise). Measured in a GraphQL user trial (Apollo Client, graphql-request, urql through
 * `client.wrap()`): a `SERVICE_UNAVAILABLE` answered before any order was recorded `succeeded`,
 * and every later call with the key replayed that error (0 orders, the order never placed); an
 * `INTERNAL_SERVER_ERROR` after the commit was recorded `succeeded` as well. `classify` is now
 * handed the body it already read, as `bodyText`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { ClassifyOverride } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();

/** A GraphQL endpoint whose createOrder answers, in turn, with each of `script` ('ok', 'unavailable' before the commit, 'internal' after it). */
async function graphqlServer(...script: ('ok' | 'unavailable' | 'internal')[]): Promise<{ url: string; orders: string[] }> {
  const orders: string[] = [];
  const url = await serve((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      const step = script.shift() ?? 'ok';
      res.writeHead(200, { 'content-type': 'application/graphql-response+json' });
      if (step === 'unavailable') return res.end(JSON.stringify({ errors: [{ message: 'try later', extensions: { code: 'SERVICE_UNAVAILABLE' } }] }));
      orders.push(String(req.headers['idempotency-key']));
      if (step === 'internal') return res.end(JSON.stringify({ data: null, errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }));
      res.end(JSON.stringify({ data: { createOrder: { id: String(orders.length) } } }));
    });
  });
  return { url: `${url}/graphql`, orders };
}

/** GraphQL error codes: SERVICE_UNAVAILABLE was not processed, INTERNAL_SERVER_ERROR may have been. */
const classify: ClassifyOverride = ({ bodyText }) => {
  const codes = ((bodyText === undefined ? {} : JSON.parse(bodyText)) as { errors?: { extensions?: { code?: string } }[] }).errors?.map((e) => e.extensions?.code) ?? [];
  if (codes.includes('INTERNAL_SERVER_ERROR')) return 'ambiguous';
  if (codes.includes('SERVICE_UNAVAILABLE')) return 'retryable';
  return undefined;
};

const mutation = (key: string): RequestInit & { once: { classify: ClassifyOverride } } => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', 'Idempotency-Key': key },
  body: JSON.stringify({ query: 'mutation ($input: OrderInput!) { createOrder(input: $input) { id } }', variables: { input: { sku: 'a', qty: 1 } } }),
  once: { classify },
});

describe('once.classify reads a GraphQL body (HTTP 200 with errors)', () => {
  it('SERVICE_UNAVAILABLE classed retryable: resent with the same key, 1 order, data returned', async () => {
    const { url, orders } = await graphqlServer('unavailable', 'ok');
    const once = use(createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } }));
    const res = await once.wrap()(url, mutation('order-1'));
    expect(await res.json()).toEqual({ data: { createOrder: { id: '1' } } });
    expect(orders).toEqual(['order-1']);
    expect((await once.get({ action: `POST ${new URL(url).origin}/graphql`, ref: 'order-1' }))?.attempts).toHaveLength(2);
  });

  it('INTERNAL_SERVER_ERROR after the commit classed ambiguous: not resent, record ambiguous, 1 order', async () => {
    const { url, orders } = await graphqlServer('internal', 'ok');
    const once = use(createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } }));
    await expect(once.wrap()(url, mutation('order-2'))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    await expect(once.wrap()(url, mutation('order-2'))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(orders).toEqual(['order-2']);
    expect((await once.get({ action: `POST ${new URL(url).origin}/graphql`, ref: 'order-2' }))?.state).toBe('ambiguous');
  });

  it('an error (no body) gives classify no text', async () => {
    const seen: unknown[] = [];
    const once = use(createClient({ store: memoryStore(), retry: { maxAttempts: 1 } }));
    await expect(
      once.fetch('http://127.0.0.1:1/graphql', { ...mutation('order-3'), once: { classify: ({ bodyText }) => (seen.push(bodyText), 'terminal') } }),
    ).rejects.toBeDefined();
    expect(seen).toEqual([undefined]);
  });
});
