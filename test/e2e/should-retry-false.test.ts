/**
 * A 500 that says "do not retry" (`stripe-should-retry: false`, `x-should-retry: false`) after the
 * provider committed the order: the hint says nothing of the effect, so the call
 * reconciles (a lookup finds the order) or ends ambiguous; it never records the operation `failed`
 * and returns the 500 as a final answer, on which a caller would place the order again under a new
 * ref. Counted at the loopback provider.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { eachProvider, lookupByRef, orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';
const env = eachProvider();

/** The provider's answers, with the hint added to every answer of status `status`. */
const hinted = (header: string, status = 500): typeof globalThis.fetch => async (input, init) => {
  const res = await globalThis.fetch(input, init);
  if (res.status !== status) return res;
  const headers = new Headers(res.headers);
  headers.set(header, 'false');
  return new Response(await res.arrayBuffer(), { status: res.status, statusText: res.statusText, headers });
};

function client(header: string, options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store: memoryStore(), fetch: hinted(header), settleMs: 20, ...options });
  env.track(c);
  return c;
}

const order = (c: OnceClient, ref: string): Promise<Response> => c.fetch(`${env.provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
const posts = (ref: string): number => env.provider.requests.filter((r) => r.ref === ref).length;

describe.each(['stripe-should-retry', 'x-should-retry'])('a 500 with %s: false after the order was committed', (header) => {
  it('with a lookup: the lookup finds the order, the call returns it; 1 effect, 1 POST', async () => {
    const ref = `H-${header}-1`;
    env.provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client(header, { lookups: { [ACTION]: lookupByRef(env.provider.url) } });
    const res = await order(c, ref);
    expect(res.status).toBe(200);
    expect(env.provider.effectsFor(ref)).toBe(1);
    expect(posts(ref)).toBe(1);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('succeeded');
  });

  it('without a lookup: AmbiguousOutcomeError, the record ambiguous (not failed), nothing resent; 1 effect, 1 POST', async () => {
    const ref = `H-${header}-2`;
    env.provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client(header);
    await expect(order(c, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const rec = await c.get({ action: ACTION, ref });
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.attempts.map((a) => [a.status, a.class, a.reason])).toEqual([[500, 'ambiguous', `status 500, ${header}: false`]]);
    // a second call with the same ref sends nothing blind either
    await expect(order(c, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(env.provider.effectsFor(ref)).toBe(1);
    expect(posts(ref)).toBe(1);
  });
});

describe.each(['stripe-should-retry', 'x-should-retry'])('a 409 "in progress" with %s: false (the first request still being processed)', (header) => {
  it('is no final answer: the first request commits later, the call ends with its 201, never the 409 recorded failed; 1 effect', async () => {
    const ref = `H409-${header}`;
    // attempt 1 is held at the provider past its timeout (ambiguous), then commits; the same-key resend meets the key in progress
    env.provider.fault({ kind: 'delay_before_commit', delayMs: 400, match: { ref } });
    const c = createClient({
      store: memoryStore(),
      fetch: hinted(header, 409),
      settleMs: 20,
      providerDedupes: true,
      retry: { attemptTimeoutMs: 150, maxAttempts: 10, baseDelayMs: 100, maxDelayMs: 100, deadlineMs: 10_000 },
    });
    env.track(c);
    const res = await order(c, ref).then(
      (r) => r.status,
      (e: unknown) => (e as { code?: string }).code,
    );
    const rec = await c.get({ action: ACTION, ref });
    expect(rec?.attempts.some((a) => a.status === 409)).toBe(true);
    expect({ res, state: rec?.state }).toEqual({ res: 201, state: 'succeeded' });
    expect(env.provider.effectsFor(ref)).toBe(1);
  });
});

/** The provider's answers, each 500 with `headers` added (a `Retry-After`, a hint). */
const with500Headers = (headers: Record<string, string>): typeof globalThis.fetch => async (input, init) => {
  const res = await globalThis.fetch(input, init);
  if (res.status !== 500) return res;
  const h = new Headers(res.headers);
  for (const [name, value] of Object.entries(headers)) h.set(name, value);
  return new Response(await res.arrayBuffer(), { status: res.status, statusText: res.statusText, headers: h });
};

// The call cannot wait for the Retry-After, and the 500's outcome is unknown: it asks the lookup before
// it stops (within what is left of the deadline), as when the attempts or the budget run out. Before, it
// stopped with AmbiguousOutcomeError unasked and only the next call looked the order up.
describe.each([
  ['no hint (the default class)', {}],
  ['x-should-retry: false', { 'x-should-retry': 'false' }],
  ['stripe-should-retry: false', { 'stripe-should-retry': 'false' }],
])('a 500 after the order was committed, %s, with a Retry-After the call cannot wait for', (_, hint) => {
  const stops = [
    ['over maxRetryAfterMs (1 h, the default cap 60 s)', {}, 'RETRIES_EXHAUSTED'],
    ['past the deadline (1 h, deadline 5 s, cap 2 h)', { deadlineMs: 5_000, maxRetryAfterMs: 7_200_000 }, 'DEADLINE_EXCEEDED'],
  ] as const;

  function setUp(ref: string, retry: OnceClientOptions['retry'], lookupFails = 0) {
    env.provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const seen = { lookups: 0 };
    const byRef = lookupByRef(env.provider.url);
    const c = createClient({
      store: memoryStore(),
      fetch: with500Headers({ ...hint, 'retry-after': '3600' }),
      settleMs: 20,
      lookups: { [ACTION]: (ctx) => (++seen.lookups <= lookupFails ? Promise.reject(new Error('lookup endpoint down')) : byRef(ctx)) },
      retry: { budget: false, ...retry },
    });
    env.track(c);
    return { c, seen };
  }

  it.each(stops)('%s: the lookup, asked once before the stop, finds the order; the call returns it, the record succeeded (never failed); 1 effect, 1 POST', async (_, retry, code) => {
    const ref = `RA-${Object.keys(hint).join('') || 'none'}-${code}`;
    const { c, seen } = setUp(ref, retry);
    const res = await order(c, ref);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ref });
    expect(seen.lookups).toBe(1);
    const rec = await c.get({ action: ACTION, ref });
    expect({ state: rec?.state, status: rec?.result?.status, source: rec?.result?.source, lease: rec?.lease }).toEqual({ state: 'succeeded', status: 200, source: 'lookup', lease: null });
    expect(rec?.attempts.map((a) => [a.status, a.class])).toEqual([[500, 'ambiguous']]);
    expect(env.provider.effectsFor(ref)).toBe(1);
    expect(posts(ref)).toBe(1);
    // the next call with the same ref replays it: no lookup, nothing sent
    expect((await order(c, ref)).status).toBe(200);
    expect(seen.lookups).toBe(1);
    expect(env.provider.effectsFor(ref)).toBe(1);
    expect(posts(ref)).toBe(1);
  });

  it.each(stops)('%s, the lookup failing: AmbiguousOutcomeError (its cause the lookup\'s error), the record stays ambiguous (never failed); the next call looks it up before any resend; 1 effect, 1 POST', async (_, retry, code) => {
    const ref = `RAF-${Object.keys(hint).join('') || 'none'}-${code}`;
    const { c, seen } = setUp(ref, retry, 1);
    const error = await order(c, ref).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'AMBIGUOUS_OUTCOME', cause: { message: 'lookup endpoint down' } });
    expect(seen.lookups).toBe(1);
    const rec = await c.get({ action: ACTION, ref });
    expect({ state: rec?.state, result: rec?.result, lease: rec?.lease }).toEqual({ state: 'ambiguous', result: null, lease: null });
    expect(rec?.attempts.map((a) => [a.status, a.class])).toEqual([[500, 'ambiguous']]);
    expect(posts(ref)).toBe(1);
    // the next call with the same ref reconciles first: the lookup finds the order, nothing is resent
    const res = await order(c, ref);
    expect(res.status).toBe(200);
    expect(seen.lookups).toBe(2);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('succeeded');
    expect(env.provider.effectsFor(ref)).toBe(1);
    expect(posts(ref)).toBe(1);
  });
});
