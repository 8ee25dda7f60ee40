/**
 * The chaos run's count of how each key conflict on a resend ended (chaos/conflict-branches.ts),
 * read from a real client's events: the engine against the loopback provider, the chaos run's
 * mismatching transport in between (a ref it picks), one branch per scenario; then the sequences the
 * run should rarely see, from hand-written events.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { orderBody } from '../../chaos/call.js';
import { conflictBranches, type ConflictBranch } from '../../chaos/conflict-branches.js';
import { heldKeyFaults, mismatchesKey, mismatchingTransport } from '../../chaos/key-mismatch.js';
import type { RunPlan } from '../../chaos/plan.js';
import { AmbiguousOutcomeError, IdempotencyConflictError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClient, OnceEvent } from '../../src/index.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';

const plan: RunPlan = { seed: 20261130, ops: 1000, workers: 4, refs: 500, concurrency: 8, strictShare: 0.25, window: 6 };
const ACTION = 'create-order';

let provider: Provider;
let branches: ConflictBranch[];
const clients: OnceClient[] = [];

beforeEach(async () => {
  provider = await startProvider({ processingMs: 2 });
  branches = [];
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider.close();
});

const byRef: LookupFn = async ({ scope, signal }) => {
  const res = await fetch(`${provider.url}/orders?ref=${scope.ref}`, { signal });
  return res.status === 404 ? null : res;
};
const failing: LookupFn = async () => {
  throw new Error('lookup down');
};

function client(lookup: LookupFn | undefined): OnceClient {
  const made = createClient({
    store: memoryStore(),
    telemetry: false,
    fetch: mismatchingTransport(fetch, provider.url, plan, 0.5, () => undefined),
    providerDedupes: true,
    settleMs: 400,
    lookups: lookup === undefined ? {} : { [ACTION]: lookup },
    retry: { maxAttempts: 4, baseDelayMs: 5, maxDelayMs: 20, attemptTimeoutMs: 100, deadlineMs: 5_000, budget: false },
    onEvent: conflictBranches((b) => branches.push(b)),
  });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string) =>
  c.fetch(`${provider.url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: orderBody(ref), once: { action: ACTION, ref } });

const picked = Array.from({ length: 200 }, (_, i) => `D-${String(i).padStart(5, '0')}`).filter((r) => mismatchesKey(plan, r, 0.5));

describe('a key conflict on a resend, as the call that got it ended it', () => {
  it('found: the first attempt held past its timeout, the resend refused, the lookup finds the effect once it lands: succeeded', async () => {
    const ref = picked[0]!;
    provider.fault({ kind: 'delay_before_commit', delayMs: 250, match: { ref } });
    // (the lookup's answer: 200, the order)
    const res = await post(client(byRef), ref);
    expect(res.status).toBe(200);
    expect(branches).toEqual(['found']);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('absent: the key held without an effect (--crash-after-key), the settled lookup says absent: failed, the conflict standing', async () => {
    const faults = heldKeyFaults(plan, 0.5, 0.2);
    const ref = faults[0]!.match!.ref!;
    provider.fault(faults[0]!);
    await expect(post(client(byRef), ref)).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(branches).toEqual(['absent']);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('no_lookup: the resend the dedupe allowed refused, no lookup: AmbiguousOutcomeError, the record left ambiguous', async () => {
    const ref = picked[1]!;
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const c = client(undefined);
    await expect(post(c, ref)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(branches).toEqual(['no_lookup']);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('ambiguous');
  });

  it('unknown: the lookup fails: AmbiguousOutcomeError', async () => {
    const ref = picked[2]!;
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    await expect(post(client(failing), ref)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(branches).toEqual(['unknown']);
  });

  it('counts nothing for a call that met no conflict', async () => {
    const ref = picked[3]!;
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    expect((await post(client(byRef), ref)).ok).toBe(true);
    const other = Array.from({ length: 50 }, (_, i) => `D-${String(i).padStart(5, '0')}`).find((r) => !mismatchesKey(plan, r, 0.5))!;
    provider.fault({ kind: 'drop_after_commit', match: { ref: other } });
    expect((await post(client(undefined), other)).ok).toBe(true);
    expect(branches).toEqual([]);
  });
});

describe('sequences from hand-written events', () => {
  const scope = { tenant: 't', action: ACTION, ref: 'D-00001' };
  const ev = (e: Record<string, unknown>): OnceEvent => ({ scope, at: 0, ...e }) as unknown as OnceEvent;
  const run = (events: OnceEvent[]): [ConflictBranch, string][] => {
    const seen: [ConflictBranch, string][] = [];
    const listen = conflictBranches((b, ref) => seen.push([b, ref]));
    for (const e of events) listen(e);
    return seen;
  };
  const conflict = ev({ type: 'attempt_finished', attempt: 2, class: 'conflict', status: 422, reason: 'key mismatch' });

  it('a conflict that stands with no lookup is failed at once; an "absent" not followed by the conflict standing is other', () => {
    expect(run([conflict, ev({ type: 'conflict', reason: 'key mismatch' })])).toEqual([['at_once', 'D-00001']]);
    expect(run([conflict, ev({ type: 'lookup', outcome: 'absent' }), ev({ type: 'attempt_started', attempt: 3 })])).toEqual([['other', 'D-00001']]);
    expect(run([conflict, ev({ type: 'lookup', outcome: 'absent' }), ev({ type: 'conflict', reason: 'key mismatch' })])).toEqual([['absent', 'D-00001']]);
  });

  it('a call stopped in the settle wait (a deadline), or a second conflict before any answer, is other; other operations are apart', () => {
    expect(run([conflict, ev({ type: 'stopped', code: 'DEADLINE_EXCEEDED', message: '' })])).toEqual([['other', 'D-00001']]);
    expect(run([conflict, conflict, ev({ type: 'lookup', outcome: 'found' })])).toEqual([['other', 'D-00001'], ['found', 'D-00001']]);
    const elsewhere = { ...ev({ type: 'lookup', outcome: 'found' }), scope: { ...scope, ref: 'D-00002' } } as OnceEvent;
    expect(run([conflict, elsewhere, ev({ type: 'lookup', outcome: 'none' })])).toEqual([['no_lookup', 'D-00001']]);
    expect(run([ev({ type: 'lookup', outcome: 'found' }), ev({ type: 'conflict', reason: 'local' })])).toEqual([]);
  });
});
