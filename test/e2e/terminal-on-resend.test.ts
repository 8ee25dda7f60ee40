/**
 * A terminal answer (401, 404, 422…) to a same-key resend, after an earlier attempt that may have
 * taken effect and that nothing settled (an ambiguous 500 after commit, cleared for the resend only
 * because the provider dedupes). The provider checks auth (or routing, or validation) before its
 * dedupe, as Stripe does: the 401 says nothing of the earlier attempt, which acted. Recorded `failed`
 * at once, it read as "did not happen" and invited the same order under a new ref (a second effect).
 * So it is handled as a key conflict on a resend is: the record `ambiguous`, reconciled at once by
 * the lookup (found → succeeded; a settled "absent" → failed, the 4xx standing and returned), without
 * one AmbiguousOutcomeError (its cause the 4xx Response), and never resent. A terminal answer to the
 * first attempt, or to a resend after attempts that did not act (a 503), stays `failed` at once.
 *
 * Effects are counted at the loopback provider; a `fetch` wrapper answers the `from`th and later
 * requests carrying one key with the 4xx without forwarding them (refused before the dedupe).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
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

/** Answers the `from`th and later requests with one key by `status`, never forwarding them. */
function refuseFrom(status: number, from = 2): typeof fetch {
  const seen = new Map<string, number>();
  return async (input, init) => {
    const key = new Headers(init?.headers).get('idempotency-key');
    const n = key === null ? 0 : (seen.get(key) ?? 0) + 1;
    if (key !== null) seen.set(key, n);
    if (key !== null && n >= from) return new Response(JSON.stringify({ error: { type: 'refused', status } }), { status, headers: { 'content-type': 'application/json' } });
    return fetch(input, init);
  };
}

function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ store: memoryStore(), telemetry: false, ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref } });

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${String(value)}`);
    },
    (error: unknown) => error,
  );
}

const sentFor = (ref: string) => provider.requests.filter((r) => r.ref === ref);

/** A lookup by ref whose first answer is a failure (unknown): with providerDedupes the engine then resends under the same key. */
function failingFirst(counter: { n: number }) {
  const byRef = lookupByRef(provider.url);
  return async (ctx: Parameters<typeof byRef>[0]) => {
    if (++counter.n === 1) throw new Error('lookup endpoint down');
    return byRef(ctx);
  };
}

describe.each([401, 404, 422])('a %i answering a same-key resend after a 500 that committed (providerDedupes)', (status) => {
  it('without a lookup: AmbiguousOutcomeError (cause: the 4xx Response), record ambiguous, never resent; explain has a rule; a lookup later finds the one effect', async () => {
    const ref = `T-${status}`;
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client({ providerDedupes: true, fetch: refuseFrom(status), retry: { maxAttempts: 4 } });
    const error = await failure(post(c, ref));
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    const cause = (error as AmbiguousOutcomeError).cause;
    expect(cause).toBeInstanceOf(Response);
    expect((cause as Response).status).toBe(status);
    expect(provider.effectsFor(ref)).toBe(1);
    const record = await c.get(scope);
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['ambiguous:500', `terminal:${status}`]);
    expect(c.stats()).toMatchObject({ ambiguous: 2 });

    const x = await c.explain(scope);
    expect(x?.diagnosis.code).not.toBe('unknown');
    expect(x?.diagnosis.code).not.toBe('terminal_client_error');
    expect(x?.diagnosis.summary).not.toMatch(/No rule fits/);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/send it with a new ref|needs a new ref|Call again/);
    expect(plan).toMatch(/^Do not resend: /m);
    expect(plan).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1 may have taken effect/m);
    expect(x?.handoff.effects).toBe('unknown');

    // later calls and recover() send nothing more (the refusal reached nothing, the 500 is all the provider saw)
    expect(await failure(post(c, ref))).toBeInstanceOf(AmbiguousOutcomeError);
    expect(await c.recover()).toMatchObject({ stillAmbiguous: [{ ref }] });
    expect(sentFor(ref)).toHaveLength(1);

    // a client with a lookup settles it: the one order, found, not sent again
    const d = client({ store: c.store, providerDedupes: true, fetch: refuseFrom(status), lookups: { 'create-order': lookupByRef(provider.url) } });
    const res = await post(d, ref);
    expect(res.status).toBe(200); // the lookup's answer (the order, GET by ref)
    expect(await d.get(scope)).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(sentFor(ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('a 401 answering a same-key resend, with a lookup registered (providerDedupes)', () => {
  it('the earlier attempt committed: reconciled at once, found → succeeded with the lookup\'s result, one effect, no third send', async () => {
    const ref = 'T-found';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const lookups = { n: 0 };
    const c = client({ settleMs: 0, providerDedupes: true, fetch: refuseFrom(401), lookups: { 'create-order': failingFirst(lookups) }, retry: { maxAttempts: 4 } });
    const res = await post(c, ref);
    expect(res.status).toBe(200); // the lookup's answer (the order, GET by ref)
    expect(lookups.n).toBe(2);
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['ambiguous:500', 'terminal:401']);
    expect(provider.effectsFor(ref)).toBe(1);
    expect((await post(c, ref)).status).toBe(200);
    expect(sentFor(ref)).toHaveLength(1);
    expect((await c.explain(scope))?.diagnosis.code).toBe('succeeded');
  });

  it('the earlier attempt did not commit: a settled "absent" lets the 401 stand: failed, the 401 returned and replayed, no effect', async () => {
    const ref = 'T-absent';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'status_before_commit', status: 500, match: { ref } });
    const lookups = { n: 0 };
    const c = client({ settleMs: 0, providerDedupes: true, fetch: refuseFrom(401), lookups: { 'create-order': failingFirst(lookups) }, retry: { maxAttempts: 4 } });
    const res = await post(c, ref);
    expect(res.status).toBe(401);
    expect(lookups.n).toBe(2);
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'failed', result: { source: 'attempt', status: 401 } });
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['ambiguous:500', 'terminal:401']);
    expect(provider.effectsFor(ref)).toBe(0);
    expect((await post(c, ref)).status).toBe(401);
    expect(sentFor(ref)).toHaveLength(1);
    expect(lookups.n).toBe(2);
    expect((await c.explain(scope))?.diagnosis.code).toBe('terminal_client_error');
  });
});

describe('controls: a terminal answer that follows nothing unsettled stays failed at once, no lookup asked', () => {
  it('attempt 1 answered 401: failed, the 401 returned', async () => {
    const ref = 'T-first';
    const lookups = { n: 0 };
    const byRef = lookupByRef(provider.url);
    const c = client({ providerDedupes: true, fetch: refuseFrom(401, 1), lookups: { 'create-order': async (ctx) => (lookups.n++, byRef(ctx)) } });
    expect((await post(c, ref)).status).toBe(401);
    expect(await c.get({ action: 'create-order', ref })).toMatchObject({ state: 'failed', result: { status: 401 } });
    expect(lookups.n).toBe(0);
    expect(provider.effectsFor(ref)).toBe(0);
    expect((await c.explain({ action: 'create-order', ref }))?.diagnosis.code).toBe('terminal_client_error');
  });

  it('a resend after a 503 (not processed) answered 401: failed at once', async () => {
    const ref = 'T-503';
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const lookups = { n: 0 };
    const byRef = lookupByRef(provider.url);
    const c = client({ fetch: refuseFrom(401), lookups: { 'create-order': async (ctx) => (lookups.n++, byRef(ctx)) } });
    expect((await post(c, ref)).status).toBe(401);
    const record = await c.get({ action: 'create-order', ref });
    expect(record).toMatchObject({ state: 'failed', result: { status: 401 } });
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['retryable:503', 'terminal:401']);
    expect(lookups.n).toBe(0);
    expect(provider.effectsFor(ref)).toBe(0);
  });
});

// A record an earlier version ended failed at once on such a 401 is terminal and replays the 401; explain warns.
describe('a record an earlier version ended failed on a 401 that answered a same-key resend after an unsettled attempt', () => {
  it('explain is not "No rule fits": it says attempt 1 may have taken effect, check before a new ref', async () => {
    const ref = 'T-legacy';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'error_after_commit', status: 500, match: { ref } });
    const c = client({ providerDedupes: true, fetch: refuseFrom(401) });
    expect(await failure(post(c, ref))).toBeInstanceOf(AmbiguousOutcomeError);
    const now = await c.get(scope);
    if (now === undefined) throw new Error('no record');
    const legacy = { ...now, state: 'failed' as const, lease: null, error: null, generation: now.generation + 1, evidence: now.evidence.filter((e) => e.kind !== 'stop') };
    expect((await c.store.compareAndSet(now.id, now.generation, legacy)).ok).toBe(true);
    expect((await post(c, ref)).status).toBe(401);
    const x = await c.explain(scope);
    expect(x?.diagnosis.summary).not.toMatch(/No rule fits/);
    expect(x?.diagnosis.summary).toMatch(/attempt 1 .*may have taken effect/);
    expect(x?.escalate).toBe(true);
    expect(x?.plan.join('\n')).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1/m);
    expect(sentFor(ref)).toHaveLength(1);
  });
});
