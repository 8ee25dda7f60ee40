/**
 * A provider's "this key was used with other content" (400 / 417 / 422 with the mismatch signal,
 * DESIGN §4) on a same-key resend, attempt ≥ 2 of one record. The local fingerprint matched (same
 * payload, same key): the provider's memory of the key is, above all, the trace of an earlier attempt
 * of ours that reached it, and may have taken effect (or it fingerprints something we vary). So the
 * conflict must not read as "the operation did not happen": it is reconciled first (a lookup: found →
 * succeeded; absent → the conflict stands), and without one the call ends AmbiguousOutcomeError, the
 * record ambiguous, never resent; explain never advises a new ref for it. Attempt 1's conflict (the
 * provider holds the key for another request) stays IdempotencyConflictError, record failed.
 *
 * Effects are counted at the loopback provider; a `fetch` wrapper turns the provider's answer to a
 * same-key resend into the mismatch bodies real providers send (Stripe's idempotency_error, the
 * IETF draft's problem document), the request itself still reaching the provider.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, IdempotencyConflictError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit } from '../helpers/setup.js';

let provider: Provider;
const clients: OnceClient[] = [];

beforeEach(async () => {
  provider = await startProvider();
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider.close();
});

const IETF_MISMATCH = {
  status: 422,
  contentType: 'application/problem+json',
  body: JSON.stringify({
    type: 'https://developer.example.com/idempotency/docs',
    title: 'Idempotency-Key is already used',
    detail: 'Idempotency Key MUST not be reused across different payloads of this operation.',
  }),
};
const STRIPE_MISMATCH = {
  status: 400,
  contentType: 'application/json',
  body: JSON.stringify({
    error: { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.' },
  }),
};
type Mismatch = typeof IETF_MISMATCH;

/**
 * A fetch that forwards every request to the provider, and answers the `from`th and later requests
 * carrying one key (a same-key resend: the provider saw the key before) with `mismatch` instead of
 * the provider's answer (a replay, say): the provider "fingerprints something we vary". With
 * `forward: false` those are refused without reaching the provider (nothing committed).
 */
function mismatchOnResend(mismatch: Mismatch, from = 2, forward = true): typeof fetch {
  const seen = new Map<string, number>();
  return async (input, init) => {
    const key = new Headers(init?.headers).get('idempotency-key');
    // counted before the send: an attempt given up on (its timeout) carried the key all the same
    const n = key === null ? 0 : (seen.get(key) ?? 0) + 1;
    if (key !== null) seen.set(key, n);
    if (key !== null && n >= from && !forward) return new Response(mismatch.body, { status: mismatch.status, headers: { 'content-type': mismatch.contentType } });
    const res = await fetch(input, init);
    if (key === null || n < from) return res;
    await res.arrayBuffer();
    return new Response(mismatch.body, { status: mismatch.status, headers: { 'content-type': mismatch.contentType } });
  };
}

function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ store: memoryStore(), telemetry: false, ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string, init: RequestInit = orderInit(ref)) => c.fetch(`${provider.url}/orders`, { ...init, once: { action: 'create-order', ref } });

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${String(value)}`);
    },
    (error: unknown) => error,
  );
}

const sentFor = (ref: string) => provider.requests.filter((r) => r.ref === ref);

describe.each([
  ['IETF 422', IETF_MISMATCH],
  ['Stripe 400 idempotency_error', STRIPE_MISMATCH],
])('a key mismatch (%s) answering a same-key resend after an ambiguous attempt', (_name, mismatch) => {
  it('without a lookup: AmbiguousOutcomeError, the record ambiguous, never resent; explain advises no new ref; a lookup later finds the one effect', async () => {
    const ref = `R-${mismatch.status}`;
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client({ providerDedupes: true, fetch: mismatchOnResend(mismatch), retry: { maxAttempts: 4 } });
    const error = await failure(post(c, ref));
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect(error).not.toBeInstanceOf(IdempotencyConflictError);
    expect(sentFor(ref)).toHaveLength(2); // the 500, then one resend: nothing after the mismatch
    expect(provider.effectsFor(ref)).toBe(1);
    const record = await c.get(scope);
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts.map((a) => a.class)).toEqual(['ambiguous', 'conflict']);
    expect(record?.error?.code).not.toBe('IDEMPOTENCY_CONFLICT');
    // the 500 and the conflict that left the record ambiguous; no conflict stood
    expect(c.stats()).toMatchObject({ ambiguous: 2, conflicts: 0 });

    const x = await c.explain(scope);
    expect(x?.diagnosis.code).not.toBe('payload_changed');
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/send it with a new ref|needs a new ref|Call again/);
    expect(plan).toMatch(/^Do not resend: /m);
    expect(plan).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1 may have taken effect/m);
    expect(x?.escalate).toBe(true);
    expect(x?.diagnosis.summary).toMatch(/key reused with other content|mismatch/);
    expect(x?.handoff.effects).toBe('unknown');

    // later calls and recover() send nothing more
    expect(await failure(post(c, ref))).toBeInstanceOf(AmbiguousOutcomeError);
    expect(await c.recover()).toMatchObject({ stillAmbiguous: [{ ref }] });
    expect(sentFor(ref)).toHaveLength(2);

    // a client with a lookup settles it: the one order, found, not sent again
    const d = client({ store: c.store, providerDedupes: true, fetch: mismatchOnResend(mismatch), lookups: { 'create-order': lookupByRef(provider.url) } });
    const res = await post(d, ref);
    expect(res.status).toBe(200);
    expect(await d.get(scope)).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(sentFor(ref)).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('a key mismatch on a resend, with a lookup', () => {
  it('an "absent" that came too early, then the held request committed: the mismatch is reconciled first, found, succeeded, one effect', async () => {
    const ref = 'R-found';
    const scope = { action: 'create-order', ref };
    // attempt 1 is held before commit past its timeout: ambiguous; the lookup says absent (settleMs 0)
    provider.fault({ kind: 'delay_before_commit', delayMs: 300, match: { ref } });
    let lookups = 0;
    const byRef = lookupByRef(provider.url);
    const lookup: typeof byRef = async (ctx) => {
      lookups++;
      // the resend goes out only once attempt 1 has committed
      if (lookups === 1) {
        const answer = await byRef(ctx);
        await new Promise((r) => setTimeout(r, 400));
        return answer;
      }
      return byRef(ctx);
    };
    const c = client({ settleMs: 0, fetch: mismatchOnResend(IETF_MISMATCH), lookups: { 'create-order': lookup }, retry: { maxAttempts: 3, attemptTimeoutMs: 100 } });
    const res = await post(c, ref);
    expect(res.status).toBe(200);
    expect(await c.get(scope)).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect((await c.get(scope))?.attempts.map((a) => a.class)).toEqual(['ambiguous', 'conflict']);
    expect(lookups).toBe(2);
    expect(sentFor(ref)).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
    // replayed from the store: nothing sent
    expect((await post(c, ref)).status).toBe(200);
    expect(sentFor(ref)).toHaveLength(2);
  });

  it('after a 503 (reached the provider, not processed): the lookup says absent, so the conflict stands: IdempotencyConflictError, failed, no effect', async () => {
    const ref = 'R-absent';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    let lookups = 0;
    const byRef = lookupByRef(provider.url);
    const c = client({ settleMs: 0, fetch: mismatchOnResend(STRIPE_MISMATCH, 2, false), lookups: { 'create-order': async (ctx) => (lookups++, byRef(ctx)) } });
    expect(await failure(post(c, ref))).toBeInstanceOf(IdempotencyConflictError);
    expect(lookups).toBe(1);
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(sentFor(ref)).toHaveLength(1); // the 503; the refused resend never reached it
    expect(provider.effectsFor(ref)).toBe(0);
    expect((await c.explain(scope))?.diagnosis.code).toBe('payload_changed');
    // counted once, in the call that let it stand (review)
    expect(c.stats().conflicts).toBe(1);
  });
});

describe('a key mismatch on a resend after a 503, the resend itself committed (the provider answered it with a mismatch all the same)', () => {
  it('reconciled first: the lookup finds the order, succeeded, one effect', async () => {
    const ref = 'R-503-found';
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const c = client({ settleMs: 0, fetch: mismatchOnResend(STRIPE_MISMATCH), lookups: { 'create-order': lookupByRef(provider.url) } });
    expect((await post(c, ref)).status).toBe(200);
    expect(await c.get({ action: 'create-order', ref })).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(sentFor(ref)).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('the conflict of attempt 1, and of a resend after attempts that never left: as before', () => {
  it('attempt 1: the provider holds the caller\'s key for another request: IdempotencyConflictError, failed, no lookup, payload_changed', async () => {
    const key = 'caller-key-0001';
    const withKey = (ref: string, qty: number): RequestInit => {
      const init = orderInit(ref, { qty });
      return { ...init, headers: { ...(init.headers as Record<string, string>), 'idempotency-key': key } };
    };
    let lookups = 0;
    const byRef = lookupByRef(provider.url);
    const c = client({ lookups: { 'create-order': async (ctx) => (lookups++, byRef(ctx)) } });
    expect((await post(c, 'K-1', withKey('K-1', 1))).status).toBe(201);
    expect(await failure(post(c, 'K-2', withKey('K-2', 2)))).toBeInstanceOf(IdempotencyConflictError);
    expect(lookups).toBe(0);
    const scope = { action: 'create-order', ref: 'K-2' };
    expect(await c.get(scope)).toMatchObject({ state: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    const x = await c.explain(scope);
    expect(x?.diagnosis.code).toBe('payload_changed');
    expect(x?.plan.join('\n')).toMatch(/may have taken effect: check at the provider before sending this intent under a new ref/);
    expect(provider.effects).toBe(1);
  });

  it('attempt 2 after a not_sent attempt 1: the conflict stands at once (no lookup asked), failed', async () => {
    const ref = 'R-not-sent';
    let calls = 0;
    const inner = mismatchOnResend(IETF_MISMATCH, 1);
    const refusedOnce: typeof fetch = async (input, init) => {
      if (++calls === 1) throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
      return inner(input, init);
    };
    let lookups = 0;
    const c = client({ fetch: refusedOnce, lookups: { 'create-order': async () => (lookups++, null) } });
    expect(await failure(post(c, ref))).toBeInstanceOf(IdempotencyConflictError);
    const record = await c.get({ action: 'create-order', ref });
    expect(record).toMatchObject({ state: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(record?.attempts.map((a) => a.class)).toEqual(['not_sent', 'conflict']);
    expect(lookups).toBe(0);
    expect(sentFor(ref)).toHaveLength(1);
  });
});

// Review: the conflict that stands counts as one (stats().conflicts, a 'conflict' event) in whichever
// call or recover() settles it, not only in the call whose resend got the mismatch.
describe('a key mismatch on a resend that a later call, or recover(), lets stand: counted as a conflict there', () => {
  const absentLookup = async (): Promise<null> => null;

  it.each(['a later call', 'recover()'])('%s: stats().conflicts 1 and one conflict event, beside the IdempotencyConflictError / failed record', async (by) => {
    const ref = `R-later-${by === 'recover()' ? 'recover' : 'call'}`;
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const c = client({ providerDedupes: true, fetch: mismatchOnResend(STRIPE_MISMATCH, 2, false), retry: { maxAttempts: 3 } });
    expect(await failure(post(c, ref))).toBeInstanceOf(AmbiguousOutcomeError);
    expect(await c.get(scope)).toMatchObject({ state: 'ambiguous' });
    expect(c.stats().conflicts).toBe(0);

    const events: string[] = [];
    const d = client({ store: c.store, settleMs: 0, fetch: mismatchOnResend(STRIPE_MISMATCH, 2, false), lookups: { 'create-order': absentLookup }, onEvent: (e) => void events.push(e.type) });
    if (by === 'recover()') expect(await d.recover()).toMatchObject({ absent: [{ ref }] });
    else expect(await failure(post(d, ref))).toBeInstanceOf(IdempotencyConflictError);
    expect(await d.get(scope)).toMatchObject({ state: 'failed', error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(d.stats().conflicts).toBe(1);
    expect(events.filter((t) => t === 'conflict')).toHaveLength(1);
    expect(sentFor(ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });
});

// Review: a record an earlier version ended failed at once on such a conflict (the order may exist at
// the provider) is terminal: later calls replay its IdempotencyConflictError without a send, and must
// not read as a plain conflict whose remedy is a new ref.
describe('a record an earlier version ended failed on a key mismatch that answered a same-key resend', () => {
  it('a later call replays IdempotencyConflictError, sends nothing, and says the earlier attempt may have taken effect: check before a new ref', async () => {
    const ref = 'R-legacy';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client({ providerDedupes: true, fetch: mismatchOnResend(STRIPE_MISMATCH) });
    expect(await failure(post(c, ref))).toBeInstanceOf(AmbiguousOutcomeError);
    const now = await c.get(scope);
    expect(now?.attempts.map((a) => a.class)).toEqual(['ambiguous', 'conflict']);
    if (now === undefined) throw new Error('no record');
    // as the previous state machine wrote it: failed at once, IDEMPOTENCY_CONFLICT
    const legacy = { ...now, state: 'failed' as const, lease: null, generation: now.generation + 1, error: { code: 'IDEMPOTENCY_CONFLICT', message: 'provider reported key reuse: idempotency key mismatch' } };
    expect((await c.store.compareAndSet(now.id, now.generation, legacy)).ok).toBe(true);

    const error = await failure(post(c, ref));
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    expect((error as Error).message).toMatch(/answered a same-key resend after attempt 1, which may have taken effect/);
    expect((error as Error).message).toMatch(/check at the provider before sending this intent under a new ref/);
    expect(sentFor(ref)).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
    // a conflict of attempt 1 keeps its plain message (see 'the conflict of attempt 1' above)
  });
});
