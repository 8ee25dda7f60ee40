/**
 * A record that one client's `providerDedupes` cleared for a same-key resend, then left `pending`
 * (its call stopped before the resend), met by another client. Only a client that trusts the
 * provider to dedupe (and whose key the provider still remembers) may send from such a record;
 * any other reconciles first: its lookup, else `AmbiguousOutcomeError` with nothing sent.
 * Regression: the other client sent at once, blind: a second effect at a provider that ignores keys.
 * Memory store, the loopback provider; effects counted at the provider.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { expectLeftPending, leftPendingWays, postOrder } from '../helpers/left-pending.js';
import { lookupByRef } from '../helpers/setup.js';

let provider: Provider | undefined;
const clients: OnceClient[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider?.close();
  provider = undefined;
});

function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ telemetry: false, ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> => postOrder(provider, c, ref, signal);

/** How a client with `providerDedupes` leaves the record pending after clearing it for a same-key resend. */
const LEFT_PENDING = leftPendingWays(() => provider, client);

async function leftPending(how: keyof typeof LEFT_PENDING, ref: string): Promise<OnceStore> {
  const store = memoryStore();
  await LEFT_PENDING[how](store, ref);
  await expectLeftPending(store, provider, ref);
  return store;
}

describe.each(Object.keys(LEFT_PENDING) as (keyof typeof LEFT_PENDING)[])('a record left pending by %s, at a provider that ignores keys', (how) => {
  it('a client without providerDedupes and without a lookup sends nothing: AmbiguousOutcomeError, the record ambiguous', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'D-strict';
    const store = await leftPending(how, ref);
    const sent = provider.requests.length;
    const strict = client({ store });
    // what explain says this client's next call does
    const x = await strict.explain({ action: 'create-order', ref });
    expect(x?.escalate).toBe(true);
    expect(x?.plan[0]).toMatch(/Such a call sends nothing: it turns the record ambiguous and ends with AmbiguousOutcomeError\.$/);
    await expect(post(strict, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(provider.requests.length).toBe(sent);
    expect(provider.effectsFor(ref)).toBe(1);
    expect((await strict.get({ action: 'create-order', ref }))?.state).toBe('ambiguous');
    // and again: still nothing sent
    await expect(post(strict, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a client without providerDedupes, with a lookup, looks it up first: found, nothing sent', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'D-lookup';
    const store = await leftPending(how, ref);
    const sent = provider.requests.length;
    const strict = client({ store, settleMs: 0, lookups: { 'create-order': lookupByRef(provider?.url ?? '') } });
    const x = await strict.explain({ action: 'create-order', ref });
    expect(x?.plan[0]).toMatch(/the next call from a client without providerDedupes sends nothing first, turns the record ambiguous and looks it up\.$/);
    expect(x?.plan.join('\n')).not.toMatch(/^Call again|^Do not call again/m);
    const res = await post(strict, ref);
    expect(res.status).toBe(200);
    expect(provider.requests.length).toBe(sent);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(await strict.get({ action: 'create-order', ref })).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
  });

  it('a client with providerDedupes whose key is past the provider retention sends nothing either', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'D-stale';
    const store = await leftPending(how, ref);
    const sent = provider.requests.length;
    const later = client({ store, providerDedupes: true, providerRetentionMs: 1_000, now: () => Date.now() + 60_000 });
    await expect(post(later, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(provider.requests.length).toBe(sent);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('the same config (providerDedupes) resends with the same key, as before: one effect at a provider that dedupes', async () => {
    provider = await startProvider();
    const ref = 'D-same';
    const store = await leftPending(how, ref);
    const sent = provider.requests.length;
    const again = client({ store, providerDedupes: true });
    expect((await post(again, ref)).status).toBe(201);
    expect(provider.requests.length).toBe(sent + 1);
    expect(new Set(provider.requests.map((r) => r.key)).size).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('the reverse: a record left ambiguous by a client without providerDedupes', () => {
  it('a client with providerDedupes resends it with the same key, as before', async () => {
    provider = await startProvider();
    const ref = 'D-reverse';
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const store = memoryStore();
    const strict = client({ store, retry: { maxAttempts: 3 } });
    await expect(post(strict, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect((await strict.get({ action: 'create-order', ref }))?.state).toBe('ambiguous');
    expect(provider.requests).toHaveLength(1);
    const d = client({ store, providerDedupes: true });
    expect((await post(d, ref)).status).toBe(201);
    expect(provider.requests).toHaveLength(2);
    expect(provider.requests[1]?.key).toBe(provider.requests[0]?.key);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a client without providerDedupes and without a lookup sends nothing again, as before', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'D-strict-strict';
    provider.fault({ kind: 'drop_after_commit', match: { ref } });
    const store = memoryStore();
    const strict = client({ store, retry: { maxAttempts: 3 } });
    await expect(post(strict, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    await expect(post(client({ store }), ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(provider.requests).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('a client with providerDedupes whose key is past the provider retention, on its own ambiguous attempt', () => {
  it('an early "absent" is not trusted for a resend: one wait for settleMs, then one more lookup (no lookup loop), one effect', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const ref = 'stale-early-absent';
    provider.fault({ kind: 'delay_before_commit', delayMs: 300, match: { ref } });
    const c = client({
      store: memoryStore(),
      providerDedupes: true,
      providerRetentionMs: 1, // every key is past 90 % of it: a same-key resend is not trusted
      settleMs: 600,
      lookups: { 'create-order': lookupByRef(provider.url) },
      retry: { maxAttempts: 3, attemptTimeoutMs: 100, deadlineMs: 5_000 },
    });
    const res = await post(c, ref);
    expect(res.status).toBe(200); // the lookup found the order the held request made
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.lookups).toBeLessThanOrEqual(2);
  });
});
