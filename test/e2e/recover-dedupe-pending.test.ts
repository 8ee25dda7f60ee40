/**
 * `client.recover()` and a record a `providerDedupes` client cleared for a same-key resend, then left
 * `pending` (its call stopped before the resend). A call from a client that does not trust the
 * provider to dedupe reconciles such a record first (`reconcile_first`); recover() from such a
 * client does the same: it turns the record ambiguous and runs its lookup (it never sends).
 * Regression: recover() listed only `in_flight` and `ambiguous` records, so it skipped the record:
 * an empty report, the record left pending until its caller called again.
 * Memory and SQLite stores, the loopback provider (ignoring keys); effects counted at the provider.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { expectLeftPending, leftPendingWays, postOrder } from '../helpers/left-pending.js';
import { lookupByRef, tempDir } from '../helpers/setup.js';

let provider: Provider | undefined;
let tmp: ReturnType<typeof tempDir>;
const clients: OnceClient[] = [];

beforeEach(() => {
  tmp = tempDir();
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider?.close();
  provider = undefined;
  tmp.cleanup();
});

function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ telemetry: false, ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  clients.push(made);
  return made;
}

const post = (c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> => postOrder(provider, c, ref, signal);
const scope = (ref: string) => ({ tenant: 'default', action: 'create-order', ref });

type Kind = 'memory' | 'sqlite';
let stores = 0;
const makeStore = (kind: Kind): OnceStore => (kind === 'memory' ? memoryStore() : sqliteStore({ path: join(tmp.dir, `once-${++stores}.db`) }));

/** How a client with `providerDedupes` leaves the record pending after clearing it for a same-key resend. */
const LEFT_PENDING = leftPendingWays(() => provider, client);

async function leftPending(kind: Kind, how: keyof typeof LEFT_PENDING, ref: string): Promise<OnceStore> {
  const store = makeStore(kind);
  await LEFT_PENDING[how](store, ref);
  await expectLeftPending(store, provider, ref);
  return store;
}

/**
 * Starts the provider and leaves `ref` pending with no effect: the request reset before the commit,
 * the dedupe client (no lookup) aborted right after clearing it for a same-key resend.
 */
async function leftPendingUnsent(kind: Kind, ref: string): Promise<{ store: OnceStore; live: Provider }> {
  const live = await startProvider({ ignoreKeys: true });
  provider = live;
  const store = makeStore(kind);
  live.fault({ kind: 'reset_before_commit', match: { ref } });
  const abort = new AbortController();
  const reason = new Error('caller gave up');
  const d = client({ store, providerDedupes: true, onEvent: (e) => (e.type === 'lookup' ? abort.abort(reason) : undefined) });
  await expect(post(d, ref, abort.signal)).rejects.toBe(reason);
  expect((await store.get(JSON.stringify(['default', 'create-order', ref])))?.state).toBe('pending');
  expect(live.effectsFor(ref)).toBe(0);
  return { store, live };
}

describe.each(['memory', 'sqlite'] as const)('recover() and a record left pending for a dedupe resend (%s)', (kind) => {
  describe.each(Object.keys(LEFT_PENDING) as (keyof typeof LEFT_PENDING)[])('left by %s', (how) => {
    it('recover() from a client without providerDedupes, with a lookup: found, the record succeeded, nothing sent', async () => {
      provider = await startProvider({ ignoreKeys: true });
      const ref = 'RD-lookup';
      const store = await leftPending(kind, how, ref);
      const sent = provider.requests.length;
      const strict = client({ store, settleMs: 0, lookups: { 'create-order': lookupByRef(provider.url) } });
      // explain names recover() for it (it said "client.recover() skips a pending record")
      expect((await strict.explain({ action: 'create-order', ref }))?.plan.join('\n')).toMatch(/^Look up first: run client\.recover\(\) \(or call again with the same ref and payload\)/m);
      const report = await strict.recover();
      expect(report).toEqual({ resolved: [scope(ref)], absent: [], stillAmbiguous: [], resent: [], errors: [] });
      expect(await strict.get(scope(ref))).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
      expect(provider.requests.length).toBe(sent);
      expect(provider.effectsFor(ref)).toBe(1);
      // the next call replays it, from any client
      expect((await post(client({ store, providerDedupes: true }), ref)).status).toBe(200);
      expect(provider.requests.length).toBe(sent);
      expect(provider.effectsFor(ref)).toBe(1);
    });

    it('recover() from a client without providerDedupes and without a lookup: still ambiguous, reported, nothing sent', async () => {
      provider = await startProvider({ ignoreKeys: true });
      const ref = 'RD-none';
      const store = await leftPending(kind, how, ref);
      const sent = provider.requests.length;
      const strict = client({ store });
      const report = await strict.recover();
      expect(report).toEqual({ resolved: [], absent: [], stillAmbiguous: [scope(ref)], resent: [], errors: [] });
      expect(await strict.get(scope(ref))).toMatchObject({ state: 'ambiguous', lease: null });
      await expect(post(strict, ref)).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
      expect(provider.requests.length).toBe(sent);
      expect(provider.effectsFor(ref)).toBe(1);
    });

    it('recover() from a client that trusts the provider to dedupe leaves it pending for its caller (a same-key resend, which recover() cannot make)', async () => {
      provider = await startProvider();
      const ref = 'RD-trusting';
      const store = await leftPending(kind, how, ref);
      const sent = provider.requests.length;
      const d = client({ store, providerDedupes: true, lookups: { 'create-order': lookupByRef(provider.url) } });
      const report = await d.recover();
      expect(report).toEqual({ resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] });
      expect((await d.get(scope(ref)))?.state).toBe('pending');
      expect(provider.requests.length).toBe(sent);
    });
  });

  it('an "absent" the recovering lookup gives after settleMs clears the record for its caller: the next call sends once', async () => {
    const ref = 'RD-absent';
    const { store, live } = await leftPendingUnsent(kind, ref);
    const strict = client({ store, settleMs: 0, lookups: { 'create-order': lookupByRef(live.url) } });
    const report = await strict.recover();
    expect(report).toEqual({ resolved: [], absent: [scope(ref)], stillAmbiguous: [], resent: [], errors: [] });
    expect(await strict.get(scope(ref))).toMatchObject({ state: 'pending', lease: null });
    expect((await post(client({ store }), ref)).status).toBe(201);
    expect(live.effectsFor(ref)).toBe(1);
  });

  it('recover() from a client with providerDedupes whose key is past the provider retention: an early "absent" does not clear the record again', async () => {
    const ref = 'RD-stale-absent';
    const { store, live } = await leftPendingUnsent(kind, ref);
    // a minute later, the key past 90 % of a 1 s retention; an "absent" within settleMs of the attempt
    const later = client({ store, providerDedupes: true, providerRetentionMs: 1_000, settleMs: 120_000, now: () => Date.now() + 60_000, lookups: { 'create-order': lookupByRef(live.url) } });
    for (const _round of [1, 2]) {
      const report = await later.recover();
      // not `absent`: that would put it back to pending, cleared only by a dedupe this client does not trust, round after round
      expect(report).toEqual({ resolved: [], absent: [], stillAmbiguous: [scope(ref)], resent: [], errors: [] });
      expect(await later.get(scope(ref))).toMatchObject({ state: 'ambiguous', lease: null });
    }
    expect(live.requests.length).toBe(1);
    expect(live.effectsFor(ref)).toBe(0);
  });

  it('an ordinary pending record (retryable answers, nothing delivered) is neither taken nor counted toward limit', async () => {
    provider = await startProvider({ ignoreKeys: true });
    const store = makeStore(kind);
    // oldest first: two ordinary pending records (503s, attempts exhausted), then one left for a dedupe resend
    const strict = client({ store, settleMs: 0, retry: { maxAttempts: 1 }, lookups: { 'create-order': lookupByRef(provider.url) } });
    for (const ref of ['RD-503-a', 'RD-503-b']) {
      provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
      await expect(post(strict, ref)).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    }
    await LEFT_PENDING['attempts exhausted after a failed lookup'](store, 'RD-dedupe');
    const before = await Promise.all(['RD-503-a', 'RD-503-b'].map(async (ref) => strict.get(scope(ref))));
    expect(before.map((r) => r?.state)).toEqual(['pending', 'pending']);
    const report = await strict.recover({ limit: 1 });
    expect(report).toEqual({ resolved: [scope('RD-dedupe')], absent: [], stillAmbiguous: [], resent: [], errors: [] });
    // untouched: same generation
    const after = await Promise.all(['RD-503-a', 'RD-503-b'].map(async (ref) => strict.get(scope(ref))));
    expect(after.map((r) => r?.generation)).toEqual(before.map((r) => r?.generation));
    expect(provider.effects).toBe(1);
  });
});
