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

  it('a same-key resend refused with a 400: not a client error to fix under a new ref, but unknown', async () => {
    await provider.close();
    provider = await startProvider({ misbehave: { replayWithDifferentStatus: 400 } });
    const ref = 'X-400';
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const c = client({ providerDedupes: true, retry: { maxAttempts: 3 } });
    expect((await post(c, ref)).status).toBe(400);
    expect(provider.effectsFor(ref)).toBe(1);
    const x = await c.explain({ action: 'create-order', ref });
    expect(x?.diagnosis.code).toBe('unknown');
    expect(x?.escalate).toBe(true);
    expect(x?.plan.join(' ')).not.toMatch(/new ref/);
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
