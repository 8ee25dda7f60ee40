/**
 * A 500 after the provider acted, carrying `x-should-retry: true` (Stainless APIs send it; Stripe stores a
 * 500 once the endpoint began), is retried with the same key on the provider's word, but its outcome is
 * unknown. A cancel while the retry waits must not end "cancelled after its attempts, with nothing
 * delivered" (the third review: 1 effect at the provider, explain planning a new ref for a new intent).
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { wait } from '../helpers/setup.js';

const scope = { action: 'charge', ref: 'h-1' };

function actingFetch(status: number, hint: Record<string, string>) {
  const effects = { n: 0, sends: 0 };
  const fetch = (async () => {
    effects.sends++;
    effects.n++; // the provider acts, then answers the status
    return new Response('{"error":"internal"}', { status, headers: { 'content-type': 'application/json', ...hint } });
  }) as typeof globalThis.fetch;
  return { effects, fetch };
}

describe('a cancel after a hinted 5xx retry', () => {
  it('500 with x-should-retry: true, then once.signal aborted during the wait: not "nothing delivered"', async () => {
    const { effects, fetch } = actingFetch(500, { 'x-should-retry': 'true' });
    const client = createClient({ store: memoryStore(), fetch, telemetry: false, retry: { baseDelayMs: 20_000, maxDelayMs: 20_000, jitter: 'none' } });
    const cancel = new AbortController();
    const call = client.fetch('https://api.example.test/charges', { method: 'POST', body: '{"amount":5}', once: { ...scope, signal: cancel.signal } });
    const settled = call.then(
      (r) => ({ ok: r.status }),
      (e: unknown) => ({ error: e as Error & { code?: string } }),
    );
    await wait(200);
    cancel.abort();
    const out = await settled;
    expect(effects.n).toBe(1);
    expect(effects.sends).toBe(1);
    expect('error' in out && out.error.code).not.toBe('OPERATION_CANCELLED');
    expect('error' in out && out.error.message).not.toMatch(/nothing delivered/);
    const record = await client.get(scope);
    expect(record?.state).not.toBe('cancelled');
    const x = await client.explain(scope);
    expect(x?.plan.join(' ')).not.toMatch(/Nothing to do: nothing was delivered/);
    await client.close();
  });

  it('a 503 with the same hint still cancels (not processed)', async () => {
    const { fetch } = actingFetch(503, { 'x-should-retry': 'true' });
    const client = createClient({ store: memoryStore(), fetch, telemetry: false, retry: { baseDelayMs: 20_000, maxDelayMs: 20_000, jitter: 'none' } });
    const cancel = new AbortController();
    const call = client.fetch('https://api.example.test/charges', { method: 'POST', body: '{"amount":5}', once: { ...scope, ref: 'h-2', signal: cancel.signal } });
    const settled = call.catch((e: unknown) => e as Error & { code?: string });
    await wait(200);
    cancel.abort();
    expect(await settled).toMatchObject({ code: 'OPERATION_CANCELLED' });
    expect((await client.get({ ...scope, ref: 'h-2' }))?.state).toBe('cancelled');
    await client.close();
  });
});
