/**
 * A final non-2xx that `client.wrap()` returns reaches stripe-node with `stripe-should-retry: false`.
 * stripe-node retries a 409 and any 5xx by itself (`maxNetworkRetries`) unless that header says
 * not to, and reads no `x-should-retry`: each retry came back to the wrapped fetch, which replayed
 * the stored answer (measured in a user trial: a terminal 409, 2 replays and about 1 s of the SDK's
 * backoff before the same StripeAPIError).
 */
import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();

describe('stripe-node through client.wrap(): a final non-2xx', () => {
  it.each([409, 501])('%s: the SDK throws it at once, no retry replayed', async (status) => {
    let posts = 0;
    const origin = await serve((_req, res) => {
      posts++;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { type: 'invalid_request_error', message: 'no' } }));
    });
    const replays: string[] = [];
    const once = use(createClient({ store: memoryStore(), onEvent: (e) => void (e.type === 'replay' && replays.push(e.type)) }));
    const stripe = new Stripe('sk_test_loopback', {
      host: '127.0.0.1',
      port: Number(new URL(origin).port),
      protocol: 'http',
      maxNetworkRetries: 2,
      httpClient: Stripe.createFetchHttpClient(once.wrap()),
    });
    const error: unknown = await stripe.paymentIntents.create({ amount: 500, currency: 'eur' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ statusCode: status });
    expect(posts).toBe(1);
    expect(replays).toEqual([]);
  });
});
