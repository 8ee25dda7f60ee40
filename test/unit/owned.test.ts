/**
 * OwnedRecord, the engine's writer: a superseded owner's late outcome is kept as evidence, and one
 * that shows the request reached the provider reopens a pending record; the current owner, whose
 * next event no longer applies to the reopened record, is told to start over (LeaseLostError),
 * never an IllegalTransitionError.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { LeaseLostError, OwnedRecord } from '../../src/engine/owned.js';
import { applyEvent, lateSuccess } from '../../src/operation/record.js';
import type { OperationRecord, RecordedClass } from '../../src/operation/record.js';
import { settledAt } from '../../src/reconcile/lookup.js';
import { memoryStore } from '../../src/stores/memory.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { claimSentByA } from '../helpers/sent-record.js';

const T0 = 1_900_000_000_000;
const snapshot = { kind: 'response' as const, source: 'attempt' as const, status: 201, statusText: 'Created', headers: [], body: '', bodyTruncated: false };

/** A record that A sent (attempt 1 open) and B took over and cleared for a resend (pending, B's lease). */
async function takenOver(): Promise<{ store: ReturnType<typeof memoryStore>; a: OwnedRecord; b: OwnedRecord; clock: { now: number } }> {
  const clock = { now: T0 };
  const now = (): number => clock.now++;
  const store = memoryStore();
  const record = await claimSentByA(store, { ref: 'R-1', key: 'k-1', createdAt: now(), startedAt: now(), leaseMs: 100 });
  const a = new OwnedRecord(record, store, 'A', now);
  clock.now += 1_000; // A's lease expires
  const taken = applyEvent(record, { type: 'acquire', owner: 'B', leaseExpiresAt: clock.now + 100 }, now(), 'B');
  expect((await store.compareAndSet(record.id, record.generation, taken)).ok).toBe(true);
  const b = new OwnedRecord(taken, store, 'B', now);
  await b.commit({ type: 'lookup_absent', detail: 'lookup reported no such operation' });
  expect(b.rec).toMatchObject({ state: 'pending', lease: { owner: 'B' } });
  return { store, a, b, clock };
}

const finished = (cls: RecordedClass): Parameters<OwnedRecord['commit']>[0] => ({
  type: 'attempt_finished',
  class: cls,
  status: cls === 'success' ? 201 : cls === 'retryable' ? 503 : null,
  reason: cls,
  result: cls === 'success' ? snapshot : null,
});

describe('OwnedRecord: a late outcome from a superseded owner', () => {
  it.each<[RecordedClass, 'ambiguous' | 'pending']>([
    ['success', 'ambiguous'],
    ['ambiguous', 'ambiguous'],
    ['retryable', 'pending'],
    ['not_sent', 'pending'],
    ['terminal', 'pending'],
  ])('%s: kept as evidence; the pending record becomes %s', async (cls, state) => {
    const { store, a, b } = await takenOver();
    const error = await a.commit(finished(cls)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    const stored = (await store.get(b.rec.id)) as OperationRecord;
    expect(stored.state).toBe(state);
    expect(stored.evidence.at(-1)).toMatchObject({ kind: 'late_response', owner: 'A', detail: expect.stringMatching(new RegExp(`^late ${cls} outcome`)) });
    // the late outcome is never applied: attempts, result and lease are B's
    expect(stored).toMatchObject({ attempts: b.rec.attempts, result: b.rec.result, lease: b.rec.lease });
  });

  it("the current owner's send after a reopen: LeaseLostError (start over and reconcile), nothing applied", async () => {
    const { store, a, b } = await takenOver();
    await a.commit(finished('success')).catch(() => undefined);
    const reopened = (await store.get(b.rec.id)) as OperationRecord;
    expect(reopened.state).toBe('ambiguous');
    const error = await b.commit({ type: 'attempt_started', attemptId: 'b-1' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).message).toMatch(/moved on under its owner \(now ambiguous\): attempt_started no longer applies/);
    expect(await store.get(b.rec.id)).toEqual(reopened);
  });
});

describe('OwnedRecord: two holders under one owner id', () => {
  it('a write from a view older than the last send is refused (LeaseLostError), never re-applied to the newer attempt', async () => {
    const { store, b } = await takenOver();
    // B's record is pending under B's lease. A second holder named B (another client configured
    // with the same owner) reads it, looks up (absent, say) and sends attempt 2, which ends ambiguous.
    const twin = new OwnedRecord((await store.get(b.rec.id)) as OperationRecord, store, 'B', () => T0 + 5_000);
    await twin.commit({ type: 'attempt_started', attemptId: 'b2' });
    await twin.commit(finished('ambiguous'));
    const sent = (await store.get(b.rec.id)) as OperationRecord;
    expect(sent).toMatchObject({ state: 'ambiguous', lease: { owner: 'B' } });
    // The first holder's stale decision about attempt 1 must not settle attempt 2.
    const error = await b.commit({ type: 'cancel' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    const after = (await store.get(b.rec.id)) as OperationRecord;
    expect(after).toMatchObject({ state: 'ambiguous', attempts: sent.attempts, cancelRequestedAt: null });
    expect(after.evidence.at(-1)).toMatchObject({ kind: 'stale_write', owner: 'B' });
  });
  // Regression: the record moved on under a lease with our name (the twin took it over: ambiguous), so
  // attempt_finished no longer applied and A's write threw before writing anything: a 201 the
  // provider gave A was lost without a trace, and an "absent" lookup could then clear the record.
  it("the first holder's late outcome on a record the twin took over is kept as evidence, never lost", async () => {
    const store = memoryStore();
    const record = await claimSentByA(store, { ref: 'R-2', key: 'k-2', createdAt: T0, startedAt: T0, leaseMs: 100 });
    const a = new OwnedRecord(record, store, 'A', () => T0 + 10);
    // the twin (same owner id) takes the record over while A's attempt is on the wire
    const taken = applyEvent(record, { type: 'acquire', owner: 'A', leaseExpiresAt: T0 + 200 }, T0 + 5, 'A');
    expect((await store.compareAndSet(record.id, record.generation, taken)).ok).toBe(true);
    expect(taken.state).toBe('ambiguous');
    const error = await a.commit(finished('success')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    const stored = (await store.get(record.id)) as OperationRecord;
    expect(stored).toMatchObject({ state: 'ambiguous', attempts: taken.attempts, result: null, lease: taken.lease });
    expect(stored.evidence.at(-1)).toMatchObject({ kind: 'late_response', owner: 'A', status: 201, detail: expect.stringMatching(/^late success outcome/) });
    expect(lateSuccess(stored)).toBe(true);
    // so an "absent" no longer clears it for a resend
    expect(applyEvent(stored, { type: 'lookup_absent', detail: 'no such order' }, T0 + 20, 'A').state).toBe('ambiguous');
  });
});

describe('OwnedRecord: its own write applied, the acknowledgement lost', () => {
  /** A store whose compare-and-set follows `script`: 'ok', 'lose' (applied, then throws) or 'fail' (throws, not applied). */
  function scripted(script: ('ok' | 'lose' | 'fail')[]): ReturnType<typeof memoryStore> {
    const inner = memoryStore();
    return {
      ...inner,
      claim: (record) => inner.claim(record),
      get: (id) => inner.get(id),
      compareAndSet: async (id, expected, next) => {
        const step = script.shift() ?? 'ok';
        if (step === 'fail') throw new StoreError('scripted: not applied');
        const res = await inner.compareAndSet(id, expected, next);
        if (step === 'lose') throw new StoreError('scripted: applied, ack lost');
        return res;
      },
    };
  }

  async function owning(script: ('ok' | 'lose' | 'fail')[]): Promise<{ store: ReturnType<typeof memoryStore>; a: OwnedRecord }> {
    const store = scripted(script);
    let t = T0;
    const record = await claimSentByA(store, { ref: 'R-3', key: 'k-3', createdAt: t, startedAt: t, leaseMs: 30_000 });
    return { store, a: new OwnedRecord(record, store, 'A', () => ++t) };
  }

  it('the same event tried again finds itself landed: returned, nothing written twice, no evidence', async () => {
    const { store, a } = await owning(['lose']);
    const event = finished('success');
    expect(await a.commit(event).catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    const landed = (await store.get(a.rec.id)) as OperationRecord;
    expect(landed.state).toBe('succeeded');
    expect(await a.commit(event)).toEqual(landed);
    expect(a.rec).toEqual(landed);
    expect(await store.get(a.rec.id)).toEqual(landed);
  });

  it('found landed after a later try failed too (its own ack lost, then a write not applied)', async () => {
    const { store, a } = await owning(['lose', 'fail']);
    const event = finished('success');
    expect(await a.commit(event).catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    expect(await a.commit(event).catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    const landed = (await store.get(a.rec.id)) as OperationRecord;
    expect(await a.commit(event)).toEqual(landed);
    expect(landed.evidence).toEqual([]);
  });

  it('another event applies on top of it; a record that is not exactly it is not adopted', async () => {
    const { store, a } = await owning(['lose']);
    expect(await a.commit(finished('retryable')).catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    expect(await a.commit({ type: 'release' })).toMatchObject({ state: 'pending', lease: null });
    expect(((await store.get(a.rec.id)) as OperationRecord).evidence).toEqual([]);
    expect(a.adopt({ ...a.rec, updatedAt: a.rec.updatedAt + 1 })).toBe(false);
    expect(a.adopt((await store.get(a.rec.id)) as OperationRecord)).toBe(true);
  });
});

describe('OwnedRecord: its record deleted under it (a row deleted by hand; in browsers, site data cleared)', () => {
  /** A SQLite store on one in-memory handle, and a way to delete a row behind the store's back. */
  function deletable(): { store: ReturnType<typeof sqliteStore>; remove: (id: string) => void; close: () => void } {
    const db = new Database(':memory:');
    const store = sqliteStore({ path: ':memory:', database: db });
    return { store, remove: (id) => db.prepare('DELETE FROM oncefetch_records WHERE id = ?').run(id), close: () => db.close() };
  }

  it('its next write puts it back as that write leaves it: the attempt, the key and the answer are not forgotten', async () => {
    const { store, remove, close } = deletable();
    let t = T0;
    const record = await claimSentByA(store, { ref: 'R-4', key: 'k-4', createdAt: t, startedAt: t, leaseMs: 30_000 });
    const a = new OwnedRecord(record, store, 'A', () => ++t);
    remove(record.id);
    expect(await store.get(record.id)).toBeUndefined();
    await a.commit({ type: 'renew', leaseExpiresAt: T0 + 60_000 });
    expect(await store.get(record.id)).toMatchObject({ state: 'in_flight', key: 'k-4', generation: record.generation + 1, lease: { owner: 'A', expiresAt: T0 + 60_000 } });
    remove(record.id);
    const done = await a.commit(finished('success'));
    expect(done).toMatchObject({ state: 'succeeded', key: 'k-4', result: { status: 201 } });
    expect(await store.get(record.id)).toEqual(done);
    expect(done.attempts).toEqual([expect.objectContaining({ id: 'a-1', class: 'success' })]);
    close();
  });

  it('a record claimed meanwhile under its id is not written over: the outcome is kept on it as evidence (LeaseLostError)', async () => {
    const { store, remove, close } = deletable();
    let t = T0;
    const record = await claimSentByA(store, { ref: 'R-5', key: 'k-5', createdAt: t, startedAt: t, leaseMs: 30_000 });
    const a = new OwnedRecord(record, store, 'A', () => ++t);
    remove(record.id);
    // another call's fresh record under the same id, held by B
    const fresh = await claimSentByA(store, { ref: 'R-5', key: 'k-other', createdAt: t, startedAt: t, leaseMs: 30_000 });
    const other = applyEvent(fresh, { type: 'acquire', owner: 'B', leaseExpiresAt: t + 30_000 }, ++t, 'B');
    expect((await store.compareAndSet(fresh.id, fresh.generation, other)).ok).toBe(true);
    const error = await a.commit(finished('success')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    const stored = (await store.get(record.id)) as OperationRecord;
    expect(stored).toMatchObject({ key: 'k-other', attempts: other.attempts, result: other.result, lease: other.lease });
    expect(stored.evidence.at(-1)).toMatchObject({ kind: 'late_response', owner: 'A', detail: expect.stringMatching(/^late success outcome/) });
    close();
  });
});

describe('settledAt: when an "absent" answer can be trusted', () => {
  const attempt = (startedAt: number, finishedAt: number | null) => ({ id: 'x', number: 1, generation: 1, owner: 'A', startedAt, finishedAt, class: null, status: null, reason: null });
  const evidence = (kind: OperationRecord['evidence'][number]['kind'], at: number) => ({ at, kind, generation: 2, owner: 'A', detail: '', status: null });

  it('settleMs after the last attempt ended, or after the last takeover of an attempt that never ended', () => {
    expect(settledAt({ attempts: [], evidence: [] }, 500)).toBe(0);
    expect(settledAt({ attempts: [attempt(1_000, 1_200)], evidence: [evidence('takeover', 5_000)] }, 500)).toBe(1_700);
    expect(settledAt({ attempts: [attempt(1_000, null)], evidence: [evidence('takeover', 5_000)] }, 500)).toBe(5_500);
  });

  it("and after a superseded owner's late response: its attempt was on the wire until then", () => {
    expect(settledAt({ attempts: [attempt(1_000, 1_200)], evidence: [evidence('late_response', 9_000)] }, 500)).toBe(9_500);
    expect(settledAt({ attempts: [attempt(1_000, null)], evidence: [evidence('late_response', 9_000), evidence('takeover', 5_000)] }, 500)).toBe(9_500);
    expect(settledAt({ attempts: [attempt(10_000, 10_200)], evidence: [evidence('late_response', 9_000)] }, 500)).toBe(10_700);
  });

  it('never later than settleMs after the record was read: stamps from a clock ahead of ours happened before the read', () => {
    expect(settledAt({ attempts: [attempt(61_000, 61_200)], evidence: [] }, 500, 2_000)).toBe(2_500);
    expect(settledAt({ attempts: [attempt(1_000, null)], evidence: [evidence('takeover', 65_000)] }, 500, 3_000)).toBe(3_500);
    expect(settledAt({ attempts: [attempt(1_000, 1_200)], evidence: [] }, 500, 3_000)).toBe(1_700); // earlier stamps: unchanged
  });
});
