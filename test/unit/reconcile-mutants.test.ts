/**
 * Tests written to kill hand-made mutants of src/reconcile/lookup.ts and src/reconcile/recover.ts
 * that the other suites let survive: the settle window's boundary in recover(), which records
 * recover() picks (state, lease, order, limit), and how it reports and releases what it settled.
 * Records are written straight into a memory store; recover() runs under a clock the test sets.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';
import { settledAt } from '../../src/reconcile/lookup.js';
import { claimSentByA } from '../helpers/sent-record.js';

const T = 1_700_000_000_000;
const SETTLE_MS = 500;
const ACTION = 'create-order';

const clients: OnceClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});

function client(store: OnceStore, at: () => number, options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store, tenant: 't', owner: 'B', now: at, settleMs: SETTLE_MS, leaseMs: 1_000, telemetry: false, ...options });
  clients.push(c);
  return c;
}

async function put(store: OnceStore, before: OperationRecord, after: OperationRecord): Promise<OperationRecord> {
  expect((await store.compareAndSet(before.id, before.generation, after)).ok).toBe(true);
  return after;
}

/** A's record of `ref`: its attempt sent at T, ended ambiguous (a 500) at `finishedAt`, the lease released. */
async function ambiguousEnded(store: OnceStore, ref: string, finishedAt: number): Promise<OperationRecord> {
  const rec = await claimSentByA(store, { ref, key: `k-${ref}`, createdAt: T, startedAt: T, leaseMs: 1_000 });
  const ended = applyEvent(rec, { type: 'attempt_finished', class: 'ambiguous', status: 500, reason: 'a 500', result: null }, finishedAt, 'A');
  const released = applyEvent(ended, { type: 'release' }, finishedAt, 'A');
  expect(released.state).toBe('ambiguous');
  return put(store, rec, released);
}

/** A record of `tenant`/`action`/`ref` whose attempt went out at T and ended ambiguous at T + 100 (`request: null`: a client.run() record). */
async function ambiguousOf(store: OnceStore, o: { tenant?: string; action?: string; ref: string; request?: null; owner?: string; end?: number }): Promise<OperationRecord> {
  const owner = o.owner ?? 'A';
  const made = newRecord({
    scope: { tenant: o.tenant ?? 't', action: o.action ?? ACTION, ref: o.ref },
    key: `k-${o.ref}`,
    keySource: 'caller',
    fingerprint: 'f'.repeat(64),
    request: o.request === null ? null : { method: 'POST', url: 'http://127.0.0.1/orders' },
    owner,
    now: T,
    leaseMs: 1_000,
    retentionMs: 600_000,
  });
  const { record } = await store.claim(applyEvent(made, { type: 'attempt_started', attemptId: 'a-1' }, T, owner));
  const end = o.end ?? T + 100;
  const ended = applyEvent(record, { type: 'attempt_finished', class: 'ambiguous', status: 500, reason: 'a 500', result: null }, end, owner);
  return put(store, record, applyEvent(ended, { type: 'release' }, end, owner));
}

const LATER = T + 100 + SETTLE_MS + 1_000;
const found = (): Promise<Response> => Promise.resolve(new Response('{"id":"o-1"}', { status: 200, headers: { 'content-type': 'application/json' } }));

/** A lookup that counts its calls and answers `answer`. */
/** The record as recover() left it: still ambiguous, its lease released. */
async function leftAmbiguousUnleased(store: OnceStore, id: string): Promise<OperationRecord | undefined> {
  const left = await store.get(id);
  expect(left?.state).toBe('ambiguous');
  expect(left?.lease).toBeNull();
  return left;
}

function counting(answer: () => Promise<Response | null>): { calls: number; fn: () => Promise<Response | null> } {
  const c = { calls: 0, fn: async () => (c.calls++, answer()) };
  return c;
}

describe('recover(): the settle window of an "absent" answer', () => {
  it('an "absent" asked exactly settleMs after the attempt ended is trusted: back to pending, reported absent', async () => {
    const store = memoryStore();
    const rec = await ambiguousEnded(store, 'S-1', T + 100);
    const lookup = counting(async () => null);
    const report = await client(store, () => T + 100 + SETTLE_MS, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(1);
    expect(report.absent.map((s) => s.ref)).toEqual(['S-1']);
    expect(report.stillAmbiguous).toEqual([]);
    expect((await store.get(rec.id))?.state).toBe('pending');
  });

  it('an "absent" asked 1 ms before the window closes is not trusted: still ambiguous, nothing cleared for a resend', async () => {
    const store = memoryStore();
    const rec = await ambiguousEnded(store, 'S-2', T + 100);
    const lookup = counting(async () => null);
    const report = await client(store, () => T + 100 + SETTLE_MS - 1, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(1);
    expect(report.absent).toEqual([]);
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['S-2']);
    await leftAmbiguousUnleased(store, rec.id);
  });
});

describe('recover(): what each answer leaves, and what it reports', () => {
  it('a lookup that throws: still ambiguous, its reason noted on the record as "unknown", counted as a lookup, the lease released', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'U-1' });
    const c = client(store, () => LATER, { lookups: { [ACTION]: () => Promise.reject(new Error('lookup down')) } });
    const report = await c.recover();
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['U-1']);
    const left = await leftAmbiguousUnleased(store, rec.id);
    expect(left?.evidence.filter((e) => e.kind === 'lookup').map((e) => e.detail)).toEqual(['unknown: recover: lookup failed: lookup down']);
    expect(c.stats().lookups).toBe(1);
  });

  it('a lookup that finds it: the record succeeds and is reported resolved, not absent', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'F-1' });
    const c = client(store, () => LATER, { lookups: { [ACTION]: found } });
    const report = await c.recover();
    expect(report.resolved.map((s) => s.ref)).toEqual(['F-1']);
    expect(report.absent).toEqual([]);
    expect((await store.get(rec.id))?.state).toBe('succeeded');
    expect(c.stats().lookups).toBe(1);
  });

  it.each([
    ['no lookup registered for the action', 'N-1', ACTION, 'other'],
    ["an action named like an Object.prototype member ('constructor'), only another action's lookup registered", 'N-2', 'constructor', ACTION],
  ])('%s: still ambiguous, not asked, no lookup counted or noted', async (_name, ref, action, registered) => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref, action });
    const c = client(store, () => LATER, { lookups: { [registered]: found } });
    const report = await c.recover();
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual([ref]);
    expect(c.stats().lookups).toBe(0);
    expect((await store.get(rec.id))?.evidence.filter((e) => e.kind === 'lookup')).toEqual([]);
  });

  it("a client.run() record (no request) is not looked up by the action's registered Response lookup", async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'R-1', request: null });
    const lookup = counting(async () => null);
    const report = await client(store, () => LATER, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(0);
    expect(report.absent).toEqual([]);
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['R-1']);
    expect((await store.get(rec.id))?.state).toBe('ambiguous');
  });

  it("the lookup is asked with the record's key and scope, and the record as recover() holds it", async () => {
    const store = memoryStore();
    await ambiguousOf(store, { ref: 'C-1' });
    const seen: { key: string; ref: string; owner: string | undefined; aborted: boolean }[] = [];
    const lookup = async (ctx: { key: string; scope: { ref: string }; record: Readonly<OperationRecord>; signal: AbortSignal }): Promise<Response | null> => {
      seen.push({ key: ctx.key, ref: ctx.scope.ref, owner: ctx.record.lease?.owner, aborted: ctx.signal.aborted });
      return null;
    };
    await client(store, () => LATER, { lookups: { [ACTION]: lookup } }).recover();
    expect(seen).toEqual([{ key: 'k-C-1', ref: 'C-1', owner: 'B/recover', aborted: false }]);
  });
});

describe('recover(): which records it picks', () => {
  it('a record under a live lease of another owner is left alone: no lookup, no report, its lease kept', async () => {
    const store = memoryStore();
    const rec = await claimSentByA(store, { ref: 'L-1', key: 'k-L-1', createdAt: T, startedAt: T, leaseMs: 1_000 });
    const lookup = counting(async () => null);
    const report = await client(store, () => T + 500, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(0);
    expect(report).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [], errors: [] });
    const left = await store.get(rec.id);
    expect(left?.state).toBe('in_flight');
    expect(left?.lease?.owner).toBe('A');
  });

  it("an option tenant is the tenant recovered; without it, only the client's own", async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'T-1', tenant: 't' });
    const other = client(store, () => LATER, { tenant: 'x', lookups: { [ACTION]: found } });
    expect((await other.recover()).resolved).toEqual([]);
    expect((await store.get(rec.id))?.state).toBe('ambiguous');
    expect((await other.recover({ tenant: 't' })).resolved.map((s) => s.ref)).toEqual(['T-1']);
    expect((await store.get(rec.id))?.state).toBe('succeeded');
  });

  it("a row of another tenant that a store's list() hands back all the same is not settled", async () => {
    const inner = memoryStore();
    const rec = await ambiguousOf(inner, { ref: 'X-1', tenant: 'u' });
    const store: OnceStore = Object.assign(Object.create(inner) as OnceStore, {
      list: (q: Parameters<OnceStore['list']>[0]) => inner.list({ ...q, tenant: 'u' }),
    });
    const lookup = counting(found);
    const report = await client(store, () => LATER, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(0);
    expect(report.resolved).toEqual([]);
    expect((await inner.get(rec.id))?.state).toBe('ambiguous');
  });

  it('without a limit, more than one record is settled in one call (the default is 100)', async () => {
    const store = memoryStore();
    for (const ref of ['D-1', 'D-2', 'D-3']) await ambiguousOf(store, { ref });
    const report = await client(store, () => LATER, { lookups: { [ACTION]: found } }).recover();
    expect(report.resolved.map((s) => s.ref).sort()).toEqual(['D-1', 'D-2', 'D-3']);
  });

  it('limit 0 is allowed and settles nothing', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'Z-1' });
    const report = await client(store, () => LATER, { lookups: { [ACTION]: found } }).recover({ limit: 0 });
    expect(report).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [], errors: [] });
    expect((await store.get(rec.id))?.state).toBe('ambiguous');
  });
});

describe('recover(): aborting', () => {
  it('an already aborted signal: recover() rejects before asking any lookup, the record untouched', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'A-1' });
    const lookup = counting(found);
    const ac = new AbortController();
    ac.abort(new Error('stop now'));
    await expect(client(store, () => LATER, { lookups: { [ACTION]: lookup.fn } }).recover({ signal: ac.signal })).rejects.toThrow('stop now');
    expect(lookup.calls).toBe(0);
    const left = await store.get(rec.id);
    expect(left?.state).toBe('ambiguous');
    expect(left?.generation).toBe(rec.generation);
  });

  it('aborted while its lookup runs: recover() rejects with the reason (not an error entry), the lease released', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'A-2' });
    const ac = new AbortController();
    const lookup = async (): Promise<Response | null> => {
      ac.abort(new Error('shutting down'));
      return new Promise<never>(() => undefined);
    };
    await expect(client(store, () => LATER, { lookups: { [ACTION]: lookup } }).recover({ signal: ac.signal })).rejects.toThrow('shutting down');
    await leftAmbiguousUnleased(store, rec.id);
  });
});

describe('recover(): takeovers', () => {
  it("only another owner's lease counts as a takeover: a lease of recover()'s own owner does not", async () => {
    const store = memoryStore();
    await ambiguousOf(store, { ref: 'O-1' });
    const own = await claimSentByA(store, { ref: 'O-2', key: 'k-O-2', createdAt: T, startedAt: T, leaseMs: 1_000 });
    const mine = applyEvent(own, { type: 'acquire', owner: 'B/recover', leaseExpiresAt: T + 50 }, T + 10, 'B/recover');
    await put(store, own, mine);
    const c = client(store, () => LATER, { lookups: { [ACTION]: found } });
    const report = await c.recover();
    expect(report.resolved.map((s) => s.ref).sort()).toEqual(['O-1', 'O-2']);
    expect(c.stats().takeovers).toBe(0);
  });

  it("another owner's expired lease is a takeover", async () => {
    const store = memoryStore();
    await claimSentByA(store, { ref: 'O-3', key: 'k-O-3', createdAt: T, startedAt: T, leaseMs: 1_000 });
    const c = client(store, () => LATER, { lookups: { [ACTION]: found } });
    expect((await c.recover()).resolved.map((s) => s.ref)).toEqual(['O-3']);
    expect(c.stats().takeovers).toBe(1);
  });
});

describe('recover(): an early "absent" trusted only because the provider dedupes', () => {
  it('clears the record for a same-key resend only: a client that does not trust the dedupe makes it ambiguous again and looks it up', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'P-1' });
    const early = client(store, () => T + 110, { providerDedupes: true, lookups: { [ACTION]: async () => null } });
    expect((await early.recover()).absent.map((s) => s.ref)).toEqual(['P-1']);
    const cleared = await store.get(rec.id);
    expect(cleared?.state).toBe('pending');
    expect(cleared?.evidence.at(-1)?.detail).toMatch(/^absent before settleMs/);
    const lookup = counting(() => Promise.reject(new Error('lookup down')));
    const strict = client(store, () => LATER, { owner: 'C', lookups: { [ACTION]: lookup.fn } });
    const report = await strict.recover();
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['P-1']);
    expect(lookup.calls).toBe(1);
    expect((await store.get(rec.id))?.state).toBe('ambiguous');
  });
});

/** A `pending` record of `ref` that only a provider's dedupe cleared: an early "absent" taken by a client with `providerDedupes`. */
async function clearedByDedupe(store: OnceStore, ref: string): Promise<OperationRecord> {
  const rec = await ambiguousOf(store, { ref });
  const early = client(store, () => T + 110, { owner: 'D', providerDedupes: true, lookups: { [ACTION]: async () => null } });
  expect((await early.recover()).absent.map((s) => s.ref)).toEqual([ref]);
  return rec;
}

/** A plain `pending` record of `ref` (claimed at `at`, nothing sent), its lease expired by LATER. */
async function plainPending(store: OnceStore, ref: string, at: number): Promise<OperationRecord> {
  const made = newRecord({ scope: { tenant: 't', action: ACTION, ref }, key: `k-${ref}`, keySource: 'caller', fingerprint: 'f'.repeat(64), request: { method: 'POST', url: 'http://127.0.0.1/orders' }, owner: 'A', now: at, leaseMs: 1_000, retentionMs: 600_000 });
  return (await store.claim(made)).record;
}

describe('recover(): order and reach of what it settles', () => {
  it('with a limit, the oldest record is settled first, a dedupe-cleared pending one included', async () => {
    const store = memoryStore();
    const older = await clearedByDedupe(store, 'P-2');
    const newer = await ambiguousOf(store, { ref: 'Q-2', end: T + 300 });
    const strict = client(store, () => LATER, { lookups: { [ACTION]: () => Promise.reject(new Error('lookup down')) } });
    const report = await strict.recover({ limit: 1 });
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['P-2']);
    expect((await store.get(older.id))?.state).toBe('ambiguous');
    expect((await store.get(newer.id))?.generation).toBe(newer.generation);
  });

  it('plain pending records listed ahead of a dedupe-cleared one do not hold it back', async () => {
    const store = memoryStore();
    await plainPending(store, 'W-1', T - 20);
    await plainPending(store, 'W-2', T - 10);
    const rec = await clearedByDedupe(store, 'P-3');
    const strict = client(store, () => LATER, { lookups: { [ACTION]: () => Promise.reject(new Error('lookup down')) } });
    const report = await strict.recover({ limit: 1 });
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['P-3']);
    expect((await store.get(rec.id))?.state).toBe('ambiguous');
  });

  it("the lease recover() takes lasts leaseMs: another recover() a moment later does not take the record during the lookup", async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'G-1' });
    const second = counting(found);
    let inner: Awaited<ReturnType<OnceClient['recover']>> | undefined;
    const lookup = async (): Promise<Response | null> => {
      inner = await client(store, () => LATER + 1, { owner: 'E', lookups: { [ACTION]: second.fn } }).recover();
      return found();
    };
    const report = await client(store, () => LATER, { lookups: { [ACTION]: lookup } }).recover();
    expect(second.calls).toBe(0);
    expect(inner?.resolved).toEqual([]);
    expect(report.resolved.map((s) => s.ref)).toEqual(['G-1']);
    expect((await store.get(rec.id))?.state).toBe('succeeded');
  });
});

describe('settledAt: the window counts from the last attempt', () => {
  it('of two attempts, the later one decides: an early first attempt does not open the window sooner', () => {
    const attempt = (n: number, startedAt: number, finishedAt: number) => ({ id: `a-${n}`, number: n, generation: n, owner: 'A', startedAt, finishedAt, class: null, status: null, reason: null });
    expect(settledAt({ attempts: [attempt(1, 1_000, 1_100), attempt(2, 4_000, 4_300)], evidence: [] }, 500)).toBe(4_800);
  });
});

describe('recover(): the record taken from it during its lookup', () => {
  it("its takeover's compare-and-set refused (someone else got there first): the record is skipped, no lookup asked, nothing reported", async () => {
    const inner = memoryStore();
    const rec = await ambiguousOf(inner, { ref: 'K-0' });
    const store: OnceStore = Object.assign(Object.create(inner) as OnceStore, {
      compareAndSet: () => Promise.resolve({ ok: false as const, current: rec }),
    });
    const lookup = counting(found);
    const report = await client(store, () => LATER, { lookups: { [ACTION]: lookup.fn } }).recover();
    expect(lookup.calls).toBe(0);
    expect(report).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [], errors: [] });
    expect((await inner.get(rec.id))?.generation).toBe(rec.generation);
  });

  it('left pending and released by another owner meanwhile: reported as an error of a record taken, not as absent', async () => {
    const store = memoryStore();
    const rec = await ambiguousOf(store, { ref: 'K-1' });
    const lookup = async (): Promise<Response | null> => {
      // another process, its clock far ahead: recover()'s lease has expired for it; its lookup says absent
      const ahead = client(store, () => LATER + 3_600_000, { owner: 'E', lookups: { [ACTION]: async () => null } });
      expect((await ahead.recover()).absent.map((s) => s.ref)).toEqual(['K-1']);
      return found();
    };
    const report = await client(store, () => LATER, { lookups: { [ACTION]: lookup } }).recover();
    expect(report.absent).toEqual([]);
    expect(report.resolved).toEqual([]);
    expect(report.errors.map((e) => [e.scope?.ref, e.message])).toEqual([['K-1', 'taken by another owner meanwhile']]);
    const left = await store.get(rec.id);
    expect(left?.state).toBe('pending');
    expect(left?.lease).toBeNull();
  });
});

/** `inner`, counting its list() calls that ask for pending records. */
function countingPendingLists(inner: OnceStore): { store: OnceStore; pendingLists: () => number } {
  let pendingLists = 0;
  const store: OnceStore = Object.assign(Object.create(inner) as OnceStore, {
    list: (q: Parameters<OnceStore['list']>[0]) => {
      if (q?.states?.includes('pending') === true) pendingLists++;
      return inner.list(q);
    },
  });
  return { store, pendingLists: () => pendingLists };
}

describe('recover(): reading past records it leaves out', () => {
  it('past many plain pending records, each round asks for at least twice as many rows: a few list() calls, not one per record', async () => {
    const inner = memoryStore();
    for (let i = 0; i < 40; i++) await plainPending(inner, `W-${String(i).padStart(2, '0')}`, T - 1_000 + i);
    const rec = await clearedByDedupe(inner, 'P-4');
    const { store, pendingLists } = countingPendingLists(inner);
    const strict = client(store, () => LATER, { lookups: { [ACTION]: () => Promise.reject(new Error('lookup down')) } });
    const report = await strict.recover({ limit: 1 });
    expect(report.stillAmbiguous.map((s) => s.ref)).toEqual(['P-4']);
    expect((await inner.get(rec.id))?.state).toBe('ambiguous');
    expect(pendingLists()).toBeLessThanOrEqual(7);
  });

  it('stops reading once it has limit records to settle, though more pending records follow', async () => {
    const inner = memoryStore();
    await plainPending(inner, 'V-0', T - 1_000);
    await clearedByDedupe(inner, 'P-5');
    for (let i = 1; i <= 6; i++) await plainPending(inner, `V-${i}`, T + 200 + i);
    const { store, pendingLists } = countingPendingLists(inner);
    const strict = client(store, () => LATER, { lookups: { [ACTION]: () => Promise.reject(new Error('lookup down')) } });
    expect((await strict.recover({ limit: 1 })).stillAmbiguous.map((s) => s.ref)).toEqual(['P-5']);
    expect(pendingLists()).toBe(2);
  });
});
