/**
 * Cancellation racing delivery, recovery after a call gave up, retention and
 * tenant isolation — against the real provider on a real SQLite file, effects
 * counted at the provider.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { AmbiguousOutcomeError, OperationCancelledError, RetriesExhaustedError, StoreError } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const open: OnceClient[] = [];

function client(options: OnceClientOptions = {}): OnceClient {
  const { client: c } = sqliteClient(join(tmp.dir, 'once.db'), { ...options, retry: { baseDelayMs: 5, maxDelayMs: 20, budget: false, ...options.retry } });
  open.push(c);
  return c;
}

function post(c: OnceClient, ref: string, extra: Record<string, unknown> = {}) {
  return c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref, ...extra } });
}

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
  await provider.close();
  tmp.cleanup();
});

describe('cancellation', () => {
  it('cancels an operation that was never delivered; later calls send nothing', async () => {
    provider.fault({ kind: 'status_before_commit', status: 503 });
    const a = client({ retry: { maxAttempts: 1 } });
    await expect(post(a, 'C-1')).rejects.toBeInstanceOf(RetriesExhaustedError);
    const result = await client().cancel({ action: 'create-order', ref: 'C-1' });
    expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    await expect(post(a, 'C-1')).rejects.toBeInstanceOf(OperationCancelledError);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(0);
  });

  it('a cancel during an attempt the provider refuses (503), the call then out of attempts: cancelled, not undecided; later calls send nothing', async () => {
    provider.fault({ kind: 'status_before_commit', status: 503 });
    let onWire!: () => void;
    const sent = new Promise<void>((r) => (onWire = r));
    const slow = (async (input: RequestInfo | URL, init?: RequestInit) => {
      onWire();
      await new Promise((r) => setTimeout(r, 150));
      return globalThis.fetch(input, init);
    }) as typeof globalThis.fetch;
    const a = client({ fetch: slow, retry: { maxAttempts: 1 } });
    const call = post(a, 'C-1b').catch((e: unknown) => e);
    await sent;
    const result = await client().cancel({ action: 'create-order', ref: 'C-1b' }, { waitMs: 2_000 });
    expect(await call).toBeInstanceOf(RetriesExhaustedError);
    expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    await expect(post(client(), 'C-1b')).rejects.toBeInstanceOf(OperationCancelledError);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(0);
  });

  it('once.signal aborted before the call: cancelled, nothing sent', async () => {
    const c = client();
    await expect(post(c, 'C-2', { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(OperationCancelledError);
    expect(provider.requests).toHaveLength(0);
    expect((await c.get({ action: 'create-order', ref: 'C-2' }))?.state).toBe('cancelled');
  });

  it('a cancel racing a delivery: every outcome is "cancelled, 0 effects" or "delivered, 1 effect"', async () => {
    const seen = { cancelled: 0, delivered: 0 };
    for (let i = 0; i < 30; i++) {
      const ref = `R-${i}`;
      // Even rounds: a 503 first, so the cancel can land in the retry window.
      if (i % 2 === 0) provider.fault({ kind: 'status_before_commit', status: 503, headers: { 'retry-after-ms': '80' }, match: { ref } });
      const owner = client();
      const canceller = client();
      const call = post(owner, ref).then(
        (res) => ({ delivered: true as const, status: res.status }),
        (err: unknown) => ({ delivered: false as const, err }),
      );
      // Cancel an operation that exists (a cancel of an unknown scope is 'not_found' and changes nothing).
      while ((await canceller.get({ action: 'create-order', ref })) === undefined) await new Promise((r) => setTimeout(r, 1));
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 60)));
      const cancel = await canceller.cancel({ action: 'create-order', ref }, { waitMs: 5000 });
      const outcome = await call;
      if (cancel.outcome === 'cancelled') {
        seen.cancelled++;
        expect(provider.effectsFor(ref)).toBe(0);
        expect(outcome.delivered).toBe(false);
        if (!outcome.delivered) expect(outcome.err).toBeInstanceOf(OperationCancelledError);
      } else {
        expect(cancel.outcome).toBe('delivered');
        seen.delivered++;
        expect(provider.effectsFor(ref)).toBe(1);
        expect(outcome).toEqual({ delivered: true, status: 201 });
      }
    }
    console.log(`cancel race over 30 rounds: ${seen.cancelled} cancelled (0 effects each), ${seen.delivered} delivered (1 effect each)`);
    expect(seen.cancelled + seen.delivered).toBe(30);
    expect(seen.cancelled).toBeGreaterThan(0);
    expect(seen.delivered).toBeGreaterThan(0);
  });
});

// Regression (found by an adversarial run): with providerDedupes and no lookup that can answer,
// an ambiguous record is cleared for a same-key resend (pending); a cancel then turned it into
// `cancelled`, and cancel() said so, while the provider had acted.
describe('cancellation after an ambiguous outcome nothing settled (providerDedupes, no lookup answer)', () => {
  it('a later cancel leaves the operation undecided and ambiguous; the next call does not resend, and does not say cancelled', async () => {
    provider.fault({ kind: 'drop_after_commit' });
    const a = client({ providerDedupes: true, retry: { maxAttempts: 1 } });
    const scope = { action: 'create-order', ref: 'C-amb' };
    await expect(post(a, 'C-amb')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(provider.effects).toBe(1);

    expect(await client().cancel(scope)).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    const again = await post(a, 'C-amb').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(AmbiguousOutcomeError);
    expect((again as Error).message).toMatch(/a cancel was requested; not resent/);
    expect(await client().cancel(scope)).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);

    // a lookup settles it: delivery won
    const found = await post(a, 'C-amb', { lookup: lookupByRef(provider.url) });
    expect(found.status).toBe(200);
    expect(await client().cancel(scope)).toEqual({ outcome: 'delivered', state: 'succeeded' });
    expect(provider.requests).toHaveLength(1);
  });

  it('a cancel while the attempt is on the wire and the answer is lost: never "cancelled" with the effect made', async () => {
    provider.fault({ kind: 'delay_after_commit', delayMs: 400 }); // committed; the answer comes after the attempt timeout
    const owner = client({ providerDedupes: true, retry: { attemptTimeoutMs: 100 } });
    const scope = { action: 'create-order', ref: 'C-wire' };
    const down = async (): Promise<never> => {
      throw new Error('lookup service down');
    };
    const call = post(owner, 'C-wire', { lookup: down }).then(
      (r) => ({ status: r.status }),
      (e: unknown) => ({ error: (e as Error).name }),
    );
    const other = client();
    while ((await other.get(scope)) === undefined) await new Promise((r) => setTimeout(r, 1));
    await new Promise((r) => setTimeout(r, 20));
    const cancelled = await other.cancel(scope, { waitMs: 3_000 });
    const outcome = await call;
    expect(provider.effects).toBe(1);
    expect(cancelled.outcome).not.toBe('cancelled');
    expect(outcome).toEqual({ error: 'AmbiguousOutcomeError' });
    expect((await other.get(scope))?.state).toBe('ambiguous');
    expect(provider.requests).toHaveLength(1);
  });
});

describe('recover()', () => {
  it('settles an ambiguous operation by lookup after the caller gave up, and the next call replays it', async () => {
    provider.fault({ kind: 'delay_after_commit', delayMs: 400 });
    const a = client({ retry: { attemptTimeoutMs: 100 } });
    await expect(post(a, 'V-1')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect((await a.get({ action: 'create-order', ref: 'V-1' }))?.state).toBe('ambiguous');
    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) } });
    const report = await b.recover();
    expect(report.resolved).toEqual([{ tenant: 'default', action: 'create-order', ref: 'V-1' }]);
    expect(report.stillAmbiguous).toEqual([]);
    const again = await post(b, 'V-1');
    expect(((await again.json()) as { id: string }).id).toBe(provider.orders[0]?.id);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);
  });

  it('marks an absent operation pending so its caller resends it once, with the same key', async () => {
    provider.fault({ kind: 'reset_before_commit' });
    const a = client();
    await expect(post(a, 'V-2')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const early = await client({ lookups: { 'create-order': lookupByRef(provider.url) }, settleMs: 60_000 }).recover();
    expect(early.stillAmbiguous).toHaveLength(1); // too soon after the attempt to trust "absent"
    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) }, settleMs: 0 });
    const report = await b.recover();
    expect(report.absent).toHaveLength(1);
    expect((await b.get({ action: 'create-order', ref: 'V-2' }))?.state).toBe('pending');
    expect((await post(b, 'V-2')).status).toBe(201);
    expect(provider.effects).toBe(1);
    expect(provider.requests.map((r) => r.key)).toEqual([provider.requests[0]?.key, provider.requests[0]?.key]);
  });

  it('leaves an operation ambiguous when no lookup is registered', async () => {
    provider.fault({ kind: 'error_after_commit' });
    const a = client();
    await expect(post(a, 'V-3')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const report = await client().recover();
    expect(report.stillAmbiguous).toHaveLength(1);
    expect(provider.requests).toHaveLength(1);
  });
});

// Regression (review): one row that is not a valid record made store.list reject, so recover()
// rejected as a whole and no other stale record was ever settled, at every startup.
describe('recover() and a corrupt row', () => {
  it('reports the corrupt row in errors, by id and scope, never resends it, and settles the others', async () => {
    provider.fault({ kind: 'delay_after_commit', delayMs: 400 });
    const a = client({ retry: { attemptTimeoutMs: 100 } });
    await expect(post(a, 'K-1')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    provider.fault({ kind: 'error_after_commit' });
    await expect(post(a, 'K-2')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const broken = await a.get({ action: 'create-order', ref: 'K-1' });
    const raw = new Database(join(tmp.dir, 'once.db'));
    raw.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run('{"truncated', broken?.id);
    raw.close();

    const b = client({ lookups: { 'create-order': lookupByRef(provider.url) } });
    const report = await b.recover();
    expect(report.resolved).toEqual([{ tenant: 'default', action: 'create-order', ref: 'K-2' }]);
    expect(report.errors).toEqual([{ id: broken?.id, scope: { tenant: 'default', action: 'create-order', ref: 'K-1' }, message: expect.stringMatching(/not valid JSON/) }]);
    // still there, still unreadable: a call with its ref fails with a StoreError and sends nothing
    await expect(post(b, 'K-1')).rejects.toBeInstanceOf(StoreError);
    expect((await b.recover()).errors).toHaveLength(1);
    expect(provider.requests).toHaveLength(2);
  });
});

// Regression (adversarial run): recover() listed every tenant's records and settled them with
// this client's lookups, which answer for its own account: another tenant's order, made at its
// own provider, was called absent there and sent again.
describe('recover() and tenants', () => {
  it("settles only its own tenant's records: another tenant's ambiguous order is left to that tenant", async () => {
    const other = await startProvider({ ignoreKeys: true });
    try {
      const t1 = client({ tenant: 't1', settleMs: 0, lookups: { 'create-order': lookupByRef(provider.url) } });
      const t2 = client({ tenant: 't2', settleMs: 0, retry: { maxAttempts: 1 }, lookups: { 'create-order': lookupByRef(other.url) } });
      const scope = { action: 'create-order', ref: 'T2-1' };
      other.fault({ kind: 'drop_after_commit' });
      const down = async (): Promise<never> => {
        throw new Error('lookup briefly down');
      };
      await expect(t2.fetch(`${other.url}/orders`, { ...orderInit('T2-1'), once: { ...scope, lookup: down } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
      expect(other.effectsFor('T2-1')).toBe(1);

      expect(await t1.recover()).toEqual({ resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] });
      expect(provider.lookups).toBe(0);
      expect((await t2.get(scope))?.state).toBe('ambiguous');

      // a client may name another tenant whose provider its lookups answer for: here t2's client
      expect(await t2.recover({ tenant: 't1' })).toEqual({ resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] });
      expect(await t2.recover()).toMatchObject({ resolved: [{ tenant: 't2', ref: 'T2-1' }] });
      expect((await t2.fetch(`${other.url}/orders`, { ...orderInit('T2-1'), once: scope })).headers.get('oncefetch-replayed')).toBe('true');
      expect(other.effectsFor('T2-1')).toBe(1);
      expect(other.requests).toHaveLength(1);
    } finally {
      await other.close();
    }
  });
});

describe('retention and tenants', () => {
  it('purge removes only terminal records past retentionMs', async () => {
    let now = Date.now();
    const c = client({ retentionMs: 1000, now: () => now });
    await post(c, 'P-1');
    provider.fault({ kind: 'status_before_commit', status: 503 });
    expect((await post(c, 'P-2')).status).toBe(201);
    provider.fault({ kind: 'error_after_commit' });
    await expect(post(c, 'P-3')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    now += 2000;
    expect(await c.purge()).toBe(2);
    expect(await c.get({ action: 'create-order', ref: 'P-1' })).toBeUndefined();
    expect((await c.get({ action: 'create-order', ref: 'P-3' }))?.state).toBe('ambiguous');
  });

  // Regression (adversarial run): an operation that finished after its retention was purgeable at
  // once; a purge then let a call still waiting for it claim the ref afresh and send again.
  it('an operation that finishes after its retention is kept retentionMs from then; a waiting call replays it', async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: 300 });
    const a = client({ retentionMs: 100 });
    const b = client({ retentionMs: 100 });
    const first = post(a, 'P-late');
    await new Promise((r) => setTimeout(r, 50));
    const waiting = post(b, 'P-late');
    expect((await first).status).toBe(201);
    const finished = await a.get({ action: 'create-order', ref: 'P-late' });
    expect(finished!.expiresAt - finished!.updatedAt).toBe(100);
    expect(await a.purge()).toBe(0);
    const res = await waiting;
    expect(res.headers.get('oncefetch-replayed')).toBe('true');
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
  });

  it('does not resend blindly once the key is older than the provider retention', async () => {
    let now = Date.now();
    provider.fault({ kind: 'error_after_commit' });
    const c = client({ providerDedupes: true, providerRetentionMs: 10_000, now: () => now, retry: { maxAttempts: 1 } });
    await expect(post(c, 'K-1')).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    now += 9_500;
    const err = await post(c, 'K-1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousOutcomeError);
    expect((err as Error).message).toMatch(/the key is 9500 ms old, past 90 % of providerRetentionMs \(10000 ms\)/);
    expect(provider.requests).toHaveLength(1);
  });

  it('the same ref under two tenants is two operations, with no replay across them', async () => {
    const c = client();
    const a = await post(c, 'T-1', { tenant: 'alpha' });
    const b = await post(c, 'T-1', { tenant: 'beta' });
    expect(b.headers.get('oncefetch-replayed')).toBeNull();
    expect(((await a.json()) as { id: string }).id).not.toBe(((await b.json()) as { id: string }).id);
    expect(provider.effects).toBe(2);
  });
});
