/**
 * A bare 409 (no "in progress" words) to a key the caller supplied: another client may be sending the
 * same key (the payments trial: a second client with its own store got Stripe-style `lock_timeout` as a
 * 409 while the first one's request charged). explain must not plan a plain "send it with a new ref".
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { countingFetch } from '../helpers/setup.js';

const body = JSON.stringify({ amount: 500 });
const scope = { action: 'charge', ref: 'c-1' };

describe('explain: a 409 to a caller-supplied key', () => {
  it('plans a check at the provider before any new ref, and counts 0 or 1 effect', async () => {
    const { sends, fetch } = countingFetch(409);
    const client = createClient({ store: memoryStore(), fetch, telemetry: false });
    const res = await client.fetch('https://pay.example.test/charges', { method: 'POST', body, headers: { 'Idempotency-Key': 'k-c-1' }, once: scope });
    expect(res.status).toBe(409);
    expect(sends.n).toBe(1);
    const x = await client.explain(scope);
    expect(x?.diagnosis.code).toBe('terminal_client_error');
    expect(x?.plan.join(' ')).toMatch(/another request with this key was still being processed/);
    expect(x?.plan[0]).toMatch(/^Do not send it under a new ref before checking/);
    expect(x?.verification.join(' ')).toMatch(/0 or 1 effect/);
    await client.close();
  });

  it('keeps the plain refusal plan for a minted key (no other client can hold it)', async () => {
    const { fetch } = countingFetch(409);
    const client = createClient({ store: memoryStore(), fetch, telemetry: false });
    const res = await client.fetch('https://pay.example.test/charges', { method: 'POST', body, once: scope });
    expect(res.status).toBe(409);
    const x = await client.explain(scope);
    expect(x?.plan[0]).toMatch(/^Do not retry unchanged input/);
    await client.close();
  });
});
