/**
 * `once.classify` is synchronous, so the `Response` it gets cannot be read there: a provider whose
 * answer is told by a code in the body (a payments trial: PayPal `details[].issue`, Adyen `errorCode`,
 * Square `errors[].code`) could not be classified by it. It gets the body's first 4 KiB as `bodyText`.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

const SCOPE = { action: 'charge', ref: 'B-1' };

function scripted(...answers: [number, string][]): { sent: { n: number }; fetch: typeof globalThis.fetch } {
  const sent = { n: 0 };
  const fetch: typeof globalThis.fetch = async () => {
    sent.n++;
    const [status, body] = answers.shift() ?? [201, '{"id":"p-1"}'];
    return new Response(body, { status, headers: { 'content-type': 'application/json' } });
  };
  return { sent, fetch };
}

describe('once.classify gets bodyText', () => {
  it('a provider code in the body (422 ORDER_LOCKED, not processed) is classified retryable from it: resent with the same key, 201', async () => {
    const { sent, fetch } = scripted([422, '{"errors":[{"code":"ORDER_LOCKED","detail":"try again"}]}']);
    const c = createClient({ store: memoryStore(), fetch, telemetry: false, retry: { baseDelayMs: 1, maxDelayMs: 1, budget: false } });
    const seen: (string | undefined)[] = [];
    const res = await c.fetch('https://pay.example.test/v2/payments', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"amount":100}',
      once: {
        ...SCOPE,
        classify: ({ bodyText }) => {
          seen.push(bodyText);
          return bodyText?.includes('"ORDER_LOCKED"') === true ? 'retryable' : undefined;
        },
      },
    });
    expect(res.status).toBe(201);
    expect(sent.n).toBe(2);
    expect(seen).toEqual(['{"errors":[{"code":"ORDER_LOCKED","detail":"try again"}]}', '{"id":"p-1"}']);
  });

  it('is the whole body, and is undefined for an error (no response)', async () => {
    const long = JSON.stringify({ pad: 'x'.repeat(10_000) });
    const { fetch } = scripted([201, long]);
    const c = createClient({ store: memoryStore(), fetch, telemetry: false });
    const seen: (string | undefined)[] = [];
    await c.fetch('https://pay.example.test/v2/payments', { method: 'POST', body: '{}', once: { ...SCOPE, ref: 'B-2', classify: ({ bodyText }) => (seen.push(bodyText), undefined) } });
    expect(seen[0]).toBe(long); // whole: a GraphQL `errors` may come after 4 KiB of `data`
    const failing = createClient({ store: memoryStore(), fetch: () => Promise.reject(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })), telemetry: false, retry: { maxAttempts: 1 } });
    const errs: (string | undefined)[] = [];
    await failing.fetch('https://pay.example.test/v2/payments', { method: 'POST', body: '{}', once: { ...SCOPE, ref: 'B-3', classify: ({ bodyText }) => (errs.push(bodyText), undefined) } }).catch(() => undefined);
    expect(errs).toEqual([undefined]);
  });
});
