/**
 * What `client.cancel()` and `client.explain()` say, held to the provider's effect count.
 * Regressions found by an adversarial run: with `providerDedupes` an "absent" asked before
 * `settleMs` (enough for a same-key resend) was taken as proof that nothing was delivered, so a
 * cancel said `cancelled` while the held request then committed; and explain read an attempt only
 * cleared for a same-key resend as "no effect", with high confidence, or planned a new ref.
 * Memory store, the loopback provider.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
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

function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ store: memoryStore(), ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref } });

describe('cancel after an "absent" asked too early (providerDedupes and a lookup)', () => {
  it('is undecided, never cancelled; when the held request commits, the next call finds it and cancel says delivered', async () => {
    const ref = 'X-early';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 600, match: { ref } });
    const c = client({ providerDedupes: true, lookups: { 'create-order': lookupByRef(provider.url) }, retry: { maxAttempts: 1, attemptTimeoutMs: 150 } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const record = await c.get(scope);
    expect(record?.state).toBe('pending');
    expect(record?.evidence.some((e) => /^absent before settleMs/.test(e.detail))).toBe(true);

    expect(await c.cancel(scope, { waitMs: 100 })).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    await new Promise((r) => setTimeout(r, 800));
    expect(provider.effectsFor(ref)).toBe(1);
    // the cancel was only requested: the next call looks up (settled now), finds the order, sends nothing
    const res = await post(c, ref);
    expect(res.status).toBe(200);
    expect(await c.cancel(scope)).toEqual({ outcome: 'delivered', state: 'succeeded' });
    expect(provider.requests).toHaveLength(1);
  });
});

describe('explain after an attempt only cleared for a same-key resend', () => {
  it('a 500 after commit, then a 503: not "retryable, no effect" but unsettled, with the resend only where the provider dedupes', async () => {
    const ref = 'X-503';
    provider.faults([
      { kind: 'error_after_commit', status: 500, match: { ref } },
      { kind: 'status_before_commit', status: 503, match: { ref } },
    ]);
    const c = client({ providerDedupes: true, retry: { maxAttempts: 2 } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    expect(provider.effectsFor(ref)).toBe(1);
    const x = await c.explain({ action: 'create-order', ref });
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    expect(x?.handoff.effects).toBe('unknown');
    expect(x?.verification.join(' ')).not.toMatch(/no effect/);
    // under a policy with no dedupe and no lookup (the CLI's default) it escalates: nothing may resend it
    const strict = createClient({ store: c.store, telemetry: false });
    const y = await strict.explain({ action: 'create-order', ref });
    expect(y?.escalate).toBe(true);
    expect(y?.plan[0]).toMatch(/^Do not call again from a client without providerDedupes/);
  });

  // (before terminal-on-resend.test.ts's rule the 400 was returned and the record ended failed, explained as 'unknown';
  // now the record stays ambiguous, never resent, and the call ends AmbiguousOutcomeError, its cause the 400)
  it('a same-key resend refused with a 400: not a client error to fix under a new ref, but an unknown outcome', async () => {
    await provider.close();
    provider = await startProvider({ misbehave: { replayWithDifferentStatus: 400 } });
    const ref = 'X-400';
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const c = client({ providerDedupes: true, retry: { maxAttempts: 3 } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME', cause: { status: 400 } });
    expect(provider.effectsFor(ref)).toBe(1);
    const x = await c.explain({ action: 'create-order', ref });
    expect(x?.diagnosis.code).not.toBe('terminal_client_error');
    expect(x?.handoff.effects).toBe('unknown');
    expect(x?.escalate).toBe(true);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/send it with a new ref|needs a new ref/);
    expect(plan).toMatch(/^Do not send this intent again under a new ref or a new key: attempt 1 may have taken effect/m);
  });

  it('a cancel requested on an ambiguous record: the plan never counts on a same-key resend', async () => {
    const ref = 'X-cancel';
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const c = client({ providerDedupes: true, retry: { maxAttempts: 1 } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect((await c.cancel({ action: 'create-order', ref })).outcome).toBe('undecided');
    const x = await c.explain({ action: 'create-order', ref });
    expect(x?.escalate).toBe(true);
    expect(x?.escalation).toMatch(/a cancel was requested/);
    expect(x?.plan.join(' ')).not.toMatch(/the same key .* is resent/);
  });
});

// Regression: a superseded owner's late 201 after another owner's lookup said "absent". The engine
// reopens the record (ambiguous) and, from then on, never sends again: a lookup that finds the order
// settles it, an "absent" is refused. explain read the earlier "absent" as settling the attempt: it
// reported `effects: 0`, medium confidence, no escalation, and a plan saying "absent → the next call
// resends with the same key", which the engine would not do (and which, here, would be a duplicate).
describe("explain after a superseded owner's late success", () => {
  const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /**
   * A's request is held before its commit. B (its clock a minute ahead, so A's lease looks expired)
   * runs recover(): takeover, the lookup says absent (the order is not committed yet), the record goes
   * back to pending, nothing is sent. Then A's request commits and its 201 arrives late: kept as
   * evidence, the record reopened. A gives up there. The provider ignores keys: every POST that
   * commits is an effect, so a resend would be a duplicate.
   */
  async function lateSuccessAfterAbsent(ref: string) {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.fault({ kind: 'delay_before_commit', delayMs: 500, match: { ref } });
    const store = memoryStore();
    const lookups = { 'create-order': lookupByRef(provider.url) };
    const abortA = new AbortController();
    const a = client({
      store,
      owner: 'a',
      leaseMs: 200,
      lookups,
      onEvent: (e) => {
        if (e.type === 'late_evidence') abortA.abort(new Error('A gives up'));
      },
    });
    const first = a.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref }, signal: abortA.signal }).catch((e: unknown) => e);
    for (let i = 0; i < 100 && provider.requests.length === 0; i++) await tick(10);
    const b = client({ store, owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, lookups });
    expect(await b.recover()).toMatchObject({ absent: [{ ref }], stillAmbiguous: [] });
    expect((await b.get({ action: 'create-order', ref }))?.state).toBe('pending');
    await first;
    const record = await b.get({ action: 'create-order', ref });
    expect(record?.state).toBe('ambiguous');
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    expect(provider.effectsFor(ref)).toBe(1);
    return { store, b };
  }

  it('says the effect happened, escalates the contradicting "absent", and plans no resend: the engine then sends nothing', async () => {
    const ref = 'X-late';
    const scope = { action: 'create-order', ref };
    const { store, b } = await lateSuccessAfterAbsent(ref);

    const x = await b.explain(scope);
    expect(x?.handoff.effects).toBe(1);
    expect(x?.diagnosis.code).toBe('stale_lease');
    expect(x?.diagnosis.summary).toMatch(/got 201 late.*took effect/);
    expect(x?.diagnosis.evidence).toContainEqual(expect.stringMatching(/^contradiction: a lookup said absent .* but a superseded owner got 201 late/));
    expect(x?.confidence).toBe('low');
    expect(x?.escalate).toBe(true);
    expect(x?.escalation).toMatch(/Contradictory evidence: a lookup said absent .* 201 late/);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/the next call resends|is resent|resend with the same key/);
    expect(plan).toMatch(/found → succeeded/);
    expect(plan).toMatch(/absent → nothing is sent, it stays ambiguous/);
    expect(x?.verification.join('\n')).toMatch(/still ambiguous \(absent\)/);

    // The engine agrees. A lookup that still says absent (asked on B's clock, past the settle window
    // that counts from B's takeover): refused, nothing sent, still ambiguous.
    const stale = client({ store, owner: 'c', now: () => Date.now() + 60_000, settleMs: 0, lookups: { 'create-order': async () => null } });
    await expect(post(stale, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect((await stale.get(scope))?.state).toBe('ambiguous');
    expect(provider.requests).toHaveLength(1);
    // A lookup that finds the order: succeeded, nothing sent.
    const res = await post(b, ref);
    expect(res.status).toBe(200);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);

    // Then explain says so: one effect, nothing to do, no contradiction left to escalate.
    const y = await b.explain(scope);
    expect(y).toMatchObject({ state: 'succeeded', escalate: false, confidence: 'high', diagnosis: { code: 'succeeded' }, handoff: { effects: 1 } });
    expect(y?.diagnosis.evidence.filter((e) => e.startsWith('contradiction:'))).toEqual([]);
  });
});

// Regression: the race the README leaves open. A's request is held before its commit; B (its clock a
// minute ahead) takes over, its lookup says absent, B sends again and gets its own 201; then A's held
// request commits and its 201 arrives late. At a provider that ignores keys that is two effects.
// explain said effects 'unknown' but "Nothing to do", medium confidence, no escalation.
describe("explain after a superseded owner's late success beside the new owner's own", () => {
  it('escalates a possible duplicate, with low confidence; the engine replays and sends nothing more', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'X-dup';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 500, match: { ref } });
    const store = memoryStore();
    const lookups = { 'create-order': lookupByRef(provider.url) };
    const a = client({ store, owner: 'a', leaseMs: 200, lookups });
    // A's call: its late 201 is kept as evidence, then it follows the record and replays B's result
    const first = post(a, ref).catch((e: unknown) => e);
    for (let i = 0; i < 100 && provider.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const b = client({ store, owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, lookups });
    expect((await post(b, ref)).status).toBe(201);
    await first;
    const record = await b.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    expect(provider.effectsFor(ref)).toBe(2);

    const x = await b.explain(scope);
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    expect(x?.diagnosis.summary).toMatch(/^Attempt 2 got 201; attempt 1 got its answer late \(201, superseded owner a\): possible duplicate with attempt 2/);
    expect(x?.escalation).toMatch(/^Possible duplicate: check at the provider\./);
    expect(x?.plan[0]).toMatch(/^Possible duplicate: check at the provider for two effects for ref 'X-dup'/);
    expect(x?.plan.join('\n')).not.toMatch(/nothing to do/i);

    // What the plan says the engine does: later calls replay, nothing is sent.
    const again = await post(b, ref);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(provider.requests).toHaveLength(2);
  });
});

// Regression: the same race, but A's attempt times out before its held request commits: its late
// outcome is ambiguous, not a success. The provider ignores keys: two effects. explain said
// "exactly one effect", effects 1, high confidence, no escalation.
describe("explain after a superseded owner's late ambiguous end beside the new owner's 201", () => {
  it('escalates a possible duplicate, "1 or 2" effects; the engine replays and sends nothing more', async () => {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'X-dup-ambiguous';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 500, match: { ref } });
    const store = memoryStore();
    const lookups = { 'create-order': lookupByRef(provider.url) };
    const a = client({ store, owner: 'a', leaseMs: 200, lookups, retry: { maxAttempts: 1, attemptTimeoutMs: 300 } });
    // A's call: its attempt times out (kept as a late ambiguous outcome), then it follows the record and replays B's result
    const first = post(a, ref).catch((e: unknown) => e);
    for (let i = 0; i < 100 && provider.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const b = client({ store, owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, lookups });
    expect((await post(b, ref)).status).toBe(201);
    await first;
    await new Promise((r) => setTimeout(r, 600)); // A's held request commits
    const record = await b.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', detail: expect.stringMatching(/^late ambiguous outcome/) }));
    expect(provider.effectsFor(ref)).toBe(2);

    const x = await b.explain(scope);
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    expect(x?.diagnosis.summary).toMatch(/^Attempt 2 got 201; attempt 1 ended ambiguous late \(superseded owner a\): possible duplicate with attempt 2/);
    expect(x?.escalation).toMatch(/^Possible duplicate: check at the provider\. Attempt 1 ended ambiguous late and attempt 2 got 201 too/);
    expect(x?.verification[0]).toMatch(/^At the provider: 1 or 2 effect/);
    expect(x?.plan.join('\n')).not.toMatch(/nothing to do/i);

    // What the plan says the engine does: later calls replay, nothing is sent.
    const again = await post(b, ref);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(provider.requests).toHaveLength(2);
  });
});

// Regression: with a lookup registered and providerDedupes, the plan said "unknown → it stays
// ambiguous"; a call resends with the same key (client.recover() does leave it ambiguous).
describe('explain with a failing lookup and a provider that dedupes', () => {
  it('says a call resends with the same key, and the engine does; recover() leaves it ambiguous', async () => {
    const ref = 'X-unknown';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const store = memoryStore();
    // no lookup, no dedupe: the call stops ambiguous
    const first = client({ store, retry: { maxAttempts: 1 } });
    await expect(post(first, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect((await first.get(scope))?.state).toBe('ambiguous');
    const c = client({
      store,
      providerDedupes: true,
      lookups: {
        'create-order': async () => {
          throw new Error('lookup down');
        },
      },
    });

    const x = await c.explain(scope);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).toMatch(/unknown → a call resends with the same key …\w{4}, which the provider dedupes \(client\.recover\(\) leaves it ambiguous\)/);
    expect(plan).not.toMatch(/unknown → it stays ambiguous/);

    expect(await c.recover()).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [{ ref }] });
    expect((await c.get(scope))?.state).toBe('ambiguous');
    expect(provider.requests).toHaveLength(1);
    const res = await post(c, ref);
    expect(res.status).toBe(201);
    expect(provider.requests).toHaveLength(2);
    expect(provider.requests[1]?.key).toBe(provider.requests[0]?.key);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

// Regression: for a pending record whose evidence contradicts itself (a lookup said absent, then the
// provider answered 409 "in progress" for the key) the plan said "then run client.recover()", which
// takes only in_flight and ambiguous records: on this one it does nothing, and the next call sends.
describe('explain of a pending record with contradictory evidence', () => {
  it('advises only what acts: recover() skips it; the next call sends again with the same key, no lookup first', async () => {
    const ref = 'X-409';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 600, match: { ref } });
    let lookups = 0;
    const byRef = lookupByRef(provider.url);
    const c = client({
      settleMs: 0,
      lookups: {
        'create-order': (ctx) => {
          lookups++;
          return byRef(ctx);
        },
      },
      retry: { maxAttempts: 2, attemptTimeoutMs: 150 },
    });
    // attempt 1 times out while held; the lookup says absent (not committed yet); attempt 2 gets 409
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const record = await c.get(scope);
    expect(record?.state).toBe('pending');
    expect(record?.attempts.map((a) => a.status)).toEqual([null, 409]);

    const x = await c.explain(scope);
    expect(x?.diagnosis.evidence).toContainEqual(expect.stringMatching(/^contradiction: a lookup said absent .* 409/));
    expect(x?.escalate).toBe(true);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/then run client\.recover\(\)/);
    expect(plan).toMatch(/client\.recover\(\) skips a pending record; the next call sends again with key …\w{4}, no lookup first/);

    expect(await c.recover()).toEqual({ resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] });
    expect((await c.get(scope))?.generation).toBe(record?.generation);
    // once the held request has committed: the next call sends with the same key, asks no lookup, gets the replay
    await new Promise((r) => setTimeout(r, 700));
    const asked = lookups;
    const res = await post(c, ref);
    expect(res.status).toBe(201);
    expect(lookups).toBe(asked);
    expect(provider.requests).toHaveLength(3);
    expect(new Set(provider.requests.map((r) => r.key)).size).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

// Regression: a pending record with a cancel requested. The cancel lands while an attempt is on the
// wire (client.cancel with waitMs 0 records it and returns undecided); the attempt then gets a 503
// and the call stops. explain planned "Call again …: the same key … is reused" (retryable_backoff);
// the engine's next call re-applies the cancel before any send and sends nothing.
describe('explain of a pending record with a cancel requested', () => {
  /** A fetch that holds the `n`-th POST until the cancel is recorded, then forwards it to the provider. */
  function heldFetch(n: number) {
    let posts = 0;
    let held!: () => void;
    const reached = new Promise<void>((r) => (held = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      if (init?.method === 'POST' && ++posts === n) {
        held();
        await gate;
      }
      return globalThis.fetch(input, init);
    }) as typeof globalThis.fetch;
    return { fetch, reached, release };
  }

  it('a 503: the plan says the next call cancels and sends nothing, and it does', async () => {
    const ref = 'X-cancel-503';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const held = heldFetch(1);
    const c = client({ fetch: held.fetch, retry: { maxAttempts: 1 } });
    const call = post(c, ref).catch((e: unknown) => e);
    await held.reached;
    expect(await c.cancel(scope, { waitMs: 0 })).toEqual({ outcome: 'undecided', state: 'in_flight' });
    held.release();
    expect(await call).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    expect(record?.attempts.map((a) => a.status)).toEqual([503]);

    const x = await c.explain(scope);
    expect(x?.diagnosis.code).toBe('retryable_backoff');
    expect(x?.diagnosis.summary).toMatch(/A cancel was requested at \S+: the next call cancels it and sends nothing\.$/);
    expect(x?.plan[0]).toMatch(/^Nothing is sent: a cancel was requested at \S+; the next call with this ref \(or client\.cancel\(scope\)\) applies it and the operation ends cancelled\.$/);
    expect(x?.plan.join('\n')).not.toMatch(/^Call again|is reused|to send it/m);
    expect(x).toMatchObject({ escalate: false, handoff: { effects: 0 } });

    // The engine agrees: the next call sends nothing and the record ends cancelled.
    await expect(post(client({ store: c.store }), ref)).rejects.toMatchObject({ name: 'OperationCancelledError' });
    expect((await c.get(scope))?.state).toBe('cancelled');
    expect(provider.requests).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('after an attempt only cleared for a same-key resend: no resend; the next call looks it up and the effect found wins', async () => {
    const ref = 'X-cancel-dedupe';
    const scope = { action: 'create-order', ref };
    provider.faults([
      { kind: 'drop_after_commit', match: { ref } },
      { kind: 'status_before_commit', status: 503, match: { ref } },
    ]);
    const held = heldFetch(2);
    // providerDedupes, no lookup: attempt 1 is dropped after its commit, cleared for a same-key resend; attempt 2 is held
    const c = client({ fetch: held.fetch, providerDedupes: true, retry: { maxAttempts: 2 } });
    const call = post(c, ref).catch((e: unknown) => e);
    await held.reached;
    expect((await c.cancel(scope, { waitMs: 0 })).outcome).toBe('undecided');
    held.release();
    expect(await call).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    expect(record?.attempts.map((a) => a.class)).toEqual(['ambiguous', 'retryable']);
    expect(provider.effectsFor(ref)).toBe(1);

    const withLookup = client({ store: c.store, providerDedupes: true, lookups: { 'create-order': lookupByRef(provider.url) } });
    const x = await withLookup.explain(scope);
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).not.toMatch(/^Call again|key …\w{4} is resent|the resend cannot act twice/m);
    expect(plan).toMatch(/^Nothing is resent: a cancel was requested at \S+, but an attempt may have reached the provider; the next call with this ref re-applies the cancel, sends nothing and reconciles it/);
    expect(plan).toMatch(/found → succeeded \(delivery won over the cancel requested\); absent → cancelled, nothing is sent/);

    // The engine agrees: the next call sends nothing, looks it up, finds the order.
    expect((await post(withLookup, ref)).status).toBe(200);
    expect((await c.get(scope))?.state).toBe('succeeded');
    expect(provider.requests).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

// Regression: two superseded owners. A's request is held before its commit; B (its clock a minute
// ahead) takes over, its lookup says absent, B sends and its request is held too; C (two minutes
// ahead) takes over, its lookup says absent, C sends. Then A's and B's held requests commit and their
// 201s arrive late. The provider ignores keys: every commit is an effect. explain counted at most two
// sends: "1 or 2" beside C's 201 (three effects), and "1 effect", effects 1, beside C's 503 (two).
describe('explain after the late successes of two superseded owners', () => {
  async function threeOwners(ref: string, c503: boolean) {
    await provider.close();
    provider = await startProvider({ ignoreKeys: true });
    provider.faults([
      { kind: 'delay_before_commit', delayMs: 900, match: { ref } },
      { kind: 'delay_before_commit', delayMs: 500, match: { ref } },
      ...(c503 ? [{ kind: 'status_before_commit' as const, status: 503, match: { ref } }] : []),
    ]);
    const store = memoryStore();
    const lookups = { 'create-order': lookupByRef(provider.url) };
    const sent = async (n: number) => {
      for (let i = 0; i < 100 && provider.requests.length < n; i++) await new Promise((r) => setTimeout(r, 10));
    };
    const a = client({ store, owner: 'a', leaseMs: 200, lookups });
    const first = post(a, ref).catch((e: unknown) => e);
    await sent(1);
    const b = client({ store, owner: 'b', leaseMs: 200, now: () => Date.now() + 60_000, settleMs: 0, lookups });
    const second = post(b, ref).catch((e: unknown) => e);
    await sent(2);
    const c = client({ store, owner: 'c', now: () => Date.now() + 120_000, settleMs: 0, lookups, retry: { maxAttempts: 1 } });
    const third = await post(c, ref).catch((e: unknown) => e);
    await Promise.all([first, second]);
    const record = await c.get({ action: 'create-order', ref });
    expect(record?.attempts.map((x) => x.owner)).toEqual(['a', 'b', 'c']);
    expect(record?.evidence.filter((e) => e.kind === 'late_response' && e.status === 201).map((e) => e.owner).sort()).toEqual(['a', 'b']);
    return { c, third, record };
  }

  it("beside C's 201: up to three effects, and there are three; the engine replays and sends nothing more", async () => {
    const ref = 'X-three';
    const { c, third, record } = await threeOwners(ref, false);
    expect(third).toBeInstanceOf(Response);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(provider.effectsFor(ref)).toBe(3);

    const x = await c.explain({ action: 'create-order', ref });
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    expect(x?.verification[0]).toMatch(/^At the provider: 1, 2 or 3 effect .* Two would be a duplicate\./);
    expect(x?.plan[0]).toMatch(/^Possible duplicate: check at the provider for up to 3 effects for ref 'X-three' .* from attempts 1, 2 and 3/);
    expect(x?.escalation).toMatch(/3 sends may have acted \(attempts 1, 2 and 3\)/);

    const again = await post(c, ref);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(provider.requests).toHaveLength(3);
  });

  it("beside C's 503: not one effect but one or two, and there are two; escalated as a possible duplicate", async () => {
    const ref = 'X-two-late';
    const { c, third, record } = await threeOwners(ref, true);
    expect(third).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    // the late 201s reopened it; A's and B's calls, following the record, looked it up and found the order
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(provider.requests).toHaveLength(3);
    expect(provider.effectsFor(ref)).toBe(2);

    const x = await c.explain({ action: 'create-order', ref });
    expect(x).toMatchObject({ escalate: true, confidence: 'low', diagnosis: { code: 'succeeded' }, handoff: { effects: 'unknown' } });
    // B's late 201 (held the shorter) is the first one written
    expect(x?.escalation).toMatch(/Possible duplicate: check at the provider\. Attempt 2 got 201 late and attempt 1 may have acted too/);
    expect(x?.verification[0]).toMatch(/^At the provider: 1 or 2 effect/);
  });
});

// Regression: the same pending record with a cancel requested, explained once the key is past 90 %
// of the provider's retention. explain escalated "The key is stale: … a resend might act twice" and
// planned "Do not resend with key …" first; after a cancel the engine never resends: the next call
// re-applies the cancel and its lookup settles the record, whatever the key's age.
// And once client.cancel() re-applied the cancel (the record turns ambiguous, its last attempt a 503),
// explain said unknown, "No rule fits … decide by hand", escalated; client.recover() looks it up.
describe('explain of a record with a cancel requested, after an attempt only cleared for a same-key resend', () => {
  /** Attempt 1 dropped after its commit (cleared for a same-key resend: providerDedupes, no lookup); a cancel while attempt 2 is held; then a 503. */
  async function cancelledAfterResend(ref: string) {
    const scope = { action: 'create-order', ref };
    provider.faults([
      { kind: 'drop_after_commit', match: { ref } },
      { kind: 'status_before_commit', status: 503, match: { ref } },
    ]);
    let posts = 0;
    let reached!: () => void;
    const held = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      if (init?.method === 'POST' && ++posts === 2) {
        reached();
        await gate;
      }
      return globalThis.fetch(input, init);
    }) as typeof globalThis.fetch;
    const c = client({ fetch, providerDedupes: true, retry: { maxAttempts: 2 } });
    const call = post(c, ref).catch((e: unknown) => e);
    await held;
    expect((await c.cancel(scope, { waitMs: 0 })).outcome).toBe('undecided');
    release();
    expect(await call).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    expect(await c.get(scope)).toMatchObject({ state: 'pending', cancelRequestedAt: expect.any(Number) });
    expect(provider.effectsFor(ref)).toBe(1);
    return { c, scope };
  }

  it('a stale key: no escalation; the next call sends nothing and its lookup settles it', async () => {
    const ref = 'X-cancel-stale';
    const { c, scope } = await cancelledAfterResend(ref);
    // a client that sees the key as stale (a minute on, past 90 % of a one-second retention)
    const later = client({ store: c.store, now: () => Date.now() + 60_000, providerRetentionMs: 1_000, lookups: { 'create-order': lookupByRef(provider.url) } });
    const x = await later.explain(scope);
    expect(x?.handoff.retention.keyStale).toBe(true);
    expect(x?.escalate).toBe(false);
    expect(x?.plan.join('\n')).not.toMatch(/Do not resend with key/);
    expect(x?.plan.join('\n')).toMatch(/found → succeeded \(delivery won over the cancel requested\); absent → cancelled, nothing is sent/);

    // The engine agrees: the next call sends nothing, looks it up, finds the order.
    expect((await post(later, ref)).status).toBe(200);
    expect((await c.get(scope))?.state).toBe('succeeded');
    expect(provider.requests).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('the cancel re-applied (ambiguous, last attempt a 503): not "no rule fits"; recover() looks it up, sends nothing', async () => {
    const ref = 'X-cancel-again';
    const { c, scope } = await cancelledAfterResend(ref);
    expect(await c.cancel(scope)).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    const r = client({ store: c.store, lookups: { 'create-order': lookupByRef(provider.url) } });
    const x = await r.explain(scope);
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    expect(x?.escalate).toBe(false);
    expect(x?.plan[0]).toMatch(/^Look up first: run client\.recover\(\)/);
    expect(x?.plan[1]).toBe('found → succeeded (delivery won over the cancel requested); absent → cancelled, nothing is sent; unknown → it stays ambiguous: escalate then.');

    // The engine agrees: recover() looks it up and finds the order; nothing is sent.
    expect(await r.recover()).toMatchObject({ resolved: [{ ref }], absent: [], stillAmbiguous: [] });
    expect((await c.get(scope))?.state).toBe('succeeded');
    expect(provider.requests).toHaveLength(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

// Regression: a client.run() operation left ambiguous (its effect timed out after acting), explained
// by a client with a lookup registered under the same action. explain planned "Look up first: run
// client.recover()", no escalation; recover() leaves a client.run() operation ambiguous and a run()
// without its own lookup stops ambiguous again: nothing settles it but a person or a run() lookup.
describe('explain of a client.run() operation beside a registered lookup', () => {
  it('escalates and plans client.run()\'s own lookup; recover() and a plain run() indeed settle nothing', async () => {
    const ref = 'X-run';
    const scope = { action: 'charge', ref };
    let effects = 0;
    const effect = async ({ signal }: { signal: AbortSignal }) => {
      effects++;
      // acts, then hangs past the attempt timeout: the outcome is ambiguous
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
      return 'never';
    };
    const c = client({ lookups: { charge: lookupByRef(provider.url) }, retry: { maxAttempts: 1, attemptTimeoutMs: 50 } });
    await expect(c.run({ action: 'charge', ref, payload: { amount: 500 } }, effect)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(await c.get(scope)).toMatchObject({ state: 'ambiguous', request: null });

    const x = await c.explain(scope);
    expect(x?.escalate).toBe(true);
    expect(x?.plan.join('\n')).not.toMatch(/Look up first|the lookup registered/);
    expect(x?.plan.at(-1)).toMatch(/^Then call client\.run\(\) again with a lookup \(spec\.lookup\)/);

    // The engine agrees: recover() leaves it ambiguous; a run() without its own lookup sends nothing and stops ambiguous.
    expect(await c.recover()).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [{ ref }] });
    await expect(c.run({ action: 'charge', ref, payload: { amount: 500 } }, effect)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect((await c.get(scope))?.state).toBe('ambiguous');
    expect(effects).toBe(1);
    // its own lookup settles it
    expect(await c.run({ action: 'charge', ref, payload: { amount: 500 }, lookup: async () => ({ value: 'ch_1' }) }, effect)).toBe('ch_1');
    expect(effects).toBe(1);
  });
});

// Regression: explain was more cautious than the engine on two pending records. (a) After a 409 "in
// progress" and a 503 (no ambiguous attempt): "Do not call again from a client without
// providerDedupes", escalated, where such a call sends (only a dedupe-cleared attempt is reconciled
// first; a 409 shows the provider tracks the key). (b) A record only a dedupe cleared, under a policy
// with providerDedupes whose key is past 90 % of providerRetentionMs, with a lookup: only "Do not
// resend with key …", where the call sends nothing and asks the lookup.
describe('explain of a pending record says what the next call does', () => {
  it('(a) after a 409 "in progress" then a 503: call again; a client without providerDedupes sends, one effect', async () => {
    const ref = 'X-409-503';
    const scope = { action: 'create-order', ref };
    const c = client({ retry: { maxAttempts: 1 } });
    provider.setMisbehave({ conflictForever: { ref } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    provider.setMisbehave({});
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    await expect(post(c, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const record = await c.get(scope);
    expect(record).toMatchObject({ state: 'pending', attempts: [{ class: 'retryable', status: 409 }, { class: 'retryable', status: 503 }] });
    expect(provider.effectsFor(ref)).toBe(0);

    const x = await c.explain(scope);
    expect(x?.escalate).toBe(false);
    expect(x?.plan[0]).toMatch(/^Call again later with the same ref and payload: the provider answered 409/);
    expect(x?.plan.join('\n')).not.toMatch(/Do not call again/);
    // what the next call does: it sends (same key), no lookup first
    const sent = provider.requests.length;
    expect((await post(c, ref)).status).toBe(201);
    expect(provider.requests.length).toBe(sent + 1);
    expect(new Set(provider.requests.map((r) => r.key)).size).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('(b) cleared only by a dedupe, the key past the provider retention, a lookup: the plan is the lookup first, and the call sends nothing and finds it', async () => {
    const ref = 'X-stale-lookup';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const down = async (): Promise<Response | null> => {
      throw new Error('lookup down');
    };
    const d = client({ providerDedupes: true, lookups: { 'create-order': down }, retry: { maxAttempts: 1 } });
    await expect(post(d, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    expect((await d.get(scope))?.state).toBe('pending');
    expect(provider.effectsFor(ref)).toBe(1);
    const sent = provider.requests.length;

    const later = client({ store: d.store, providerDedupes: true, providerRetentionMs: 1_000, settleMs: 0, now: () => Date.now() + 60_000, lookups: { 'create-order': lookupByRef(provider.url) } });
    const x = await later.explain(scope);
    const plan = x?.plan.join('\n') ?? '';
    expect(plan).toMatch(/the next call sends nothing first, turns the record ambiguous and looks it up\.$/m);
    expect(plan).toMatch(/^Look up first: /m);
    expect(plan).toMatch(/^found → succeeded, later calls replay it/m);
    const res = await post(later, ref);
    expect(res.status).toBe(200);
    expect(await later.get(scope)).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(provider.requests.length).toBe(sent);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
