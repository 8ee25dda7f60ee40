/**
 * A terminal answer to a same-key resend after an unsettled attempt, which a settled "absent" then lets
 * stand (terminal-on-resend.test.ts): the call that got it returns (or throws) that answer as it came,
 * as a terminal answer to a first attempt is returned, not the stored copy a later call replays: a
 * client.run caller gets its effect's own error (its type, its fields), not an OperationFailedError
 * saying it "failed earlier"; a fetch caller gets the whole body, not the copy cut at
 * maxStoredBodyBytes. No network: the effect and the fetch are fakes.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore, TRUNCATED_HEADER } from '../../src/index.js';

class AuthError extends Error {
  status = 401;
  type = 'authentication_error';
}

const retry = { budget: false as const, baseDelayMs: 1, maxDelayMs: 1, maxAttempts: 4 };

describe('a terminal answer to a resend, let stand by a settled "absent": the live caller gets it as it came', () => {
  it('client.run: the effect\'s own error is thrown, not OperationFailedError "failed earlier"', async () => {
    let calls = 0;
    let lookups = 0;
    const client = createClient({ store: memoryStore(), telemetry: false, providerDedupes: true, settleMs: 0, retry });
    const spec = {
      action: 'charge',
      ref: 'live-401',
      payload: { amount: 5 },
      // first answer unknown (the engine then resends under the same key), then absent
      lookup: async () => {
        if (++lookups === 1) throw new Error('lookup endpoint down');
        return null;
      },
    };
    const effect = async (): Promise<{ id: string }> => {
      if (++calls === 1) throw Object.assign(new Error('internal error'), { status: 500 });
      throw new AuthError('Invalid API key provided');
    };
    const error = await client.run(spec, effect).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(calls).toBe(2);
    expect(lookups).toBe(2);
    expect((await client.get(spec))?.state).toBe('failed');
    expect(error).toBeInstanceOf(AuthError);
    await client.close();
  });

  it('client.fetch: the whole 401 body, not the stored copy cut at maxStoredBodyBytes', async () => {
    let requests = 0;
    const big = JSON.stringify({ error: 'invalid api key', detail: 'x'.repeat(4_000) });
    const fake: typeof fetch = async () =>
      ++requests === 1 ? new Response('{"error":"internal"}', { status: 500 }) : new Response(big, { status: 401, headers: { 'content-type': 'application/json' } });
    let lookups = 0;
    const client = createClient({
      store: memoryStore(),
      telemetry: false,
      providerDedupes: true,
      settleMs: 0,
      maxStoredBodyBytes: 1_024,
      fetch: fake,
      retry,
      lookups: {
        'create-order': async () => {
          if (++lookups === 1) throw new Error('lookup endpoint down');
          return null;
        },
      },
    });
    const scope = { action: 'create-order', ref: 'live-fetch-401' };
    const res = await client.fetch('http://127.0.0.1:9/orders', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sku":"a"}', once: scope });
    expect(requests).toBe(2);
    expect(lookups).toBe(2);
    expect((await client.get(scope))?.state).toBe('failed');
    expect(res.status).toBe(401);
    expect(res.headers.get(TRUNCATED_HEADER)).toBeNull();
    expect(await res.text()).toBe(big);
    await client.close();
  });
});
