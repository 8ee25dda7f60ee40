/**
 * Payment providers that answer "a request with this key is still being processed" with a 422, not
 * the IETF draft's 409: PayPal (`PREVIOUS_REQUEST_IN_PROGRESS`) and Adyen (errorCode 704, "request
 * already processed or in progress"). Such an answer is "not processed, later", like a 409 "in
 * progress": the same key is sent again and the provider replays the first request's outcome. Before,
 * it was a terminal 422, recorded `failed` and replayed for good while the first request committed
 * (a payments trial: the second client got a 422 its explain called a caller defect, "send the fixed
 * request with a new ref", with the charge made). PayPal's "request id already used for another
 * request" (`PAYPAL_REQUEST_ID_PREVIOUSLY_USED`) is its key-mismatch answer: a conflict.
 * Counted at the loopback provider.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { eachProvider, orderInit, wait } from '../helpers/setup.js';

const ACTION = 'charge';
const env = eachProvider();

const PAYPAL_IN_PROGRESS = JSON.stringify({
  name: 'UNPROCESSABLE_ENTITY',
  message: 'The requested action could not be performed, semantically incorrect, or failed business validation.',
  details: [{ issue: 'PREVIOUS_REQUEST_IN_PROGRESS', description: 'A previous request on this resource is currently in progress. Please wait for sometime and try again.' }],
});
const ADYEN_IN_PROGRESS = JSON.stringify({ status: 422, errorCode: '704', message: 'request already processed or in progress', errorType: 'validation' });
const PAYPAL_REUSED = JSON.stringify({
  name: 'UNPROCESSABLE_ENTITY',
  details: [{ issue: 'PAYPAL_REQUEST_ID_PREVIOUSLY_USED', description: 'The PayPal-Request-ID has already been used for another request.' }],
});

/** The provider's answers, its 409 "in progress" (or 422 mismatch) rewritten as `status` with `body`. */
const rewrite = (from: number, body: string): typeof globalThis.fetch => async (input, init) => {
  const res = await globalThis.fetch(input, init);
  if (res.status !== from) return res;
  await res.arrayBuffer();
  return new Response(body, { status: 422, headers: { 'content-type': 'application/json' } });
};

function client(fetch: typeof globalThis.fetch): OnceClient {
  const c = createClient({ store: memoryStore(), fetch, settleMs: 20, retry: { baseDelayMs: 100, maxDelayMs: 200, maxAttempts: 10, deadlineMs: 10_000, budget: false } });
  env.track(c);
  return c;
}

const charge = (c: OnceClient, ref: string, key: string, extra: Record<string, unknown> = {}): Promise<number | string> => {
  const init = orderInit(ref, extra);
  return c
    .fetch(`${env.provider.url}/orders`, { ...init, headers: { ...(init.headers as Record<string, string>), 'Idempotency-Key': key }, once: { action: ACTION, ref } })
    .then(
      (r) => r.status,
      (e: unknown) => (e as { code?: string }).code ?? String(e),
    );
};

describe.each([
  ['PayPal PREVIOUS_REQUEST_IN_PROGRESS', PAYPAL_IN_PROGRESS],
  ['Adyen 704 "request already processed or in progress"', ADYEN_IN_PROGRESS],
])('a 422 %s while the first request with the key is being processed', (_, body) => {
  it('is retried with the same key and gets the first request\'s outcome: 201, the record succeeded (not a failed 422); 1 effect', async () => {
    const ref = `IP-${body.length}`;
    env.provider.fault({ kind: 'delay_before_commit', delayMs: 400, match: { ref } });
    // two machines (own stores), one caller-supplied key: the second meets the key in progress
    const first = charge(client(globalThis.fetch), ref, `k-${ref}`);
    await wait(100);
    const second = client(rewrite(409, body));
    const got = await charge(second, ref, `k-${ref}`);
    const rec = await second.get({ action: ACTION, ref });
    expect({ first: await first, second: got, state: rec?.state }).toEqual({ first: 201, second: 201, state: 'succeeded' });
    expect(rec?.attempts.some((a) => a.status === 422 && a.class === 'retryable')).toBe(true);
    expect(env.provider.effectsFor(ref)).toBe(1);
  });
});

describe('a 422 PayPal PAYPAL_REQUEST_ID_PREVIOUSLY_USED (the key used with another payload)', () => {
  it('is a key conflict: IdempotencyConflictError, never a terminal 422 to send again under a new ref; 1 effect', async () => {
    const ref = 'REUSED-1';
    expect(await charge(client(globalThis.fetch), ref, `k-${ref}`)).toBe(201);
    const got = await charge(client(rewrite(422, PAYPAL_REUSED)), ref, `k-${ref}`, { qty: 2 });
    expect(got).toBe('IDEMPOTENCY_CONFLICT');
    expect(env.provider.effectsFor(ref)).toBe(1);
  });
});
