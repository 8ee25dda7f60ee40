/**
 * A 422 "in progress" (PayPal `PREVIOUS_REQUEST_IN_PROGRESS`, Adyen 704) says what a 409 "in progress"
 * says: a request with this key is being processed and may still take effect. So a stop after it
 * says the earlier attempt may have taken effect, and a terminal answer to the same-key resend after
 * it (a 401 checked before the provider's idempotency layer) is reconciled, never recorded `failed`.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'charge', ref: 'P-1' };
const PAYPAL_IN_PROGRESS = { name: 'UNPROCESSABLE_ENTITY', details: [{ issue: 'PREVIOUS_REQUEST_IN_PROGRESS', description: 'A previous request on this resource is currently in progress.' }] };

function scripted(...answers: [number, unknown][]): { sent: string[]; fetch: typeof globalThis.fetch } {
  const sent: string[] = [];
  const fetch: typeof globalThis.fetch = async (_input, init) => {
    sent.push(new Headers(init?.headers).get('idempotency-key') ?? '');
    const [status, body] = answers.shift() ?? [201, { id: 'o-1' }];
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  };
  return { sent, fetch };
}

const client = (fetch: typeof globalThis.fetch) =>
  createClient({ store: memoryStore(), fetch, settleMs: 0, telemetry: false, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1, budget: false } });
const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"amount":100}', once: SCOPE };

describe('a 422 "in progress"', () => {
  it('attempts used on it: RetriesExhaustedError saying an earlier attempt may have taken effect; one key', async () => {
    const { sent, fetch } = scripted([422, PAYPAL_IN_PROGRESS], [422, PAYPAL_IN_PROGRESS]);
    const c = client(fetch);
    const error = await c.fetch(URL_ORDERS, init).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    expect((error as Error).message).toMatch(/an earlier attempt may have taken effect: call again with the same ref, never a new one/);
    expect(new Set(sent).size).toBe(1);
    expect((await c.get(SCOPE))?.state).toBe('pending');
  });

  it('then a 401 on the same-key resend: not recorded failed; no lookup, so AmbiguousOutcomeError and the record ambiguous', async () => {
    const { sent, fetch } = scripted([422, PAYPAL_IN_PROGRESS], [401, { error: 'unauthorized' }]);
    const c = client(fetch);
    await expect(c.fetch(URL_ORDERS, init)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(sent).toHaveLength(2);
    expect((await c.get(SCOPE))?.state).toBe('ambiguous');
  });

  it('explain calls it "in progress" and never advises a new ref', async () => {
    const { fetch } = scripted([422, PAYPAL_IN_PROGRESS], [422, PAYPAL_IN_PROGRESS]);
    const c = client(fetch);
    await c.fetch(URL_ORDERS, init).catch(() => undefined);
    const x = await c.explain(SCOPE);
    expect(x?.diagnosis.code).toBe('concurrent_duplicates');
    expect(x?.diagnosis.summary).toMatch(/got 422 "in progress"/);
    expect(x?.plan.join(' ')).not.toMatch(/new ref/);
  });

  // explain's lazy chunk restates record.ts's deliveryUnresolved (facts.ts `risky`): it must count the 422 as the 409
  it('then a 503: explain names the earlier 422 "in progress" as unresolved, as it does a 409', async () => {
    const { fetch } = scripted([422, PAYPAL_IN_PROGRESS], [503, { error: 'unavailable' }]);
    const c = client(fetch);
    await c.fetch(URL_ORDERS, init).catch(() => undefined);
    const x = await c.explain(SCOPE);
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    expect(x?.diagnosis.summary).toMatch(/Attempt 1 got 422 "in progress"/);
  });

  it('then a 503 and a cancel: the record is ambiguous (the 422 may take effect) and explain says why, not "no rule fits"', async () => {
    const { sent, fetch } = scripted([422, PAYPAL_IN_PROGRESS], [503, { error: 'unavailable' }]);
    const c = client(fetch);
    await c.fetch(URL_ORDERS, init).catch(() => undefined);
    await c.cancel(SCOPE);
    expect((await c.get(SCOPE))?.state).toBe('ambiguous');
    const x = await c.explain(SCOPE);
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    expect(x?.plan.join(' ')).toMatch(/Do not resend/);
    expect(sent).toHaveLength(2);
  });
});
