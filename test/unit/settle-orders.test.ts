/**
 * The writes `settle` makes while it tries to record an answer in hand, against the lease renewals
 * running beside it (serialised by OwnedRecord), in every order: each write applied, failed (not
 * applied) or applied with its acknowledgement lost; another owner's takeover anywhere in between.
 * Whatever the order: no IllegalTransitionError (settle tries again only on a StoreError, so any other
 * error would escape it); a renewal or a try that finds the answer landed returns the landed record;
 * a lost lease is a LeaseLostError only after a takeover; the answer is never applied twice, and
 * never over another owner's record.
 */
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/errors.js';
import { LeaseLostError, OwnedRecord } from '../../src/engine/owned.js';
import { applyEvent } from '../../src/operation/record.js';
import type { OperationRecord, RecordEvent } from '../../src/operation/record.js';
import { memoryStore } from '../../src/stores/memory.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { claimSentByA } from '../helpers/sent-record.js';

const T0 = 1_900_000_000_000;
const snapshot = { kind: 'response' as const, source: 'attempt' as const, status: 201, statusText: 'Created', headers: [], body: '', bodyTruncated: false };
const answer: RecordEvent = { type: 'attempt_finished', class: 'success', status: 201, reason: 'success', result: snapshot };

type Store = 'ok' | 'fail' | 'lose';
type Op = { who: 'renew' | 'settle'; store: Store } | { who: 'takeover' };

/** The first write of each op follows `mode.next`; later ones (a landed write followed, evidence) go through. */
function faulty(inner: OnceStore): { store: OnceStore; mode: { next: Store } } {
  const mode = { next: 'ok' as Store };
  const store: OnceStore = {
    ...inner,
    compareAndSet: async (id, expected, next) => {
      const how = mode.next;
      mode.next = 'ok';
      if (how === 'fail') throw new StoreError('faulty: not applied');
      const res = await inner.compareAndSet(id, expected, next);
      if (how === 'lose' && res.ok) throw new StoreError('faulty: applied, its ack lost');
      return res;
    },
  };
  return { store, mode };
}

async function scenario(ops: Op[]): Promise<void> {
  let clock = T0;
  const now = (): number => ++clock;
  const inner = memoryStore();
  const record = await claimSentByA(inner, { ref: 'R', key: 'k', createdAt: now(), startedAt: now(), leaseMs: 100 });
  const { store, mode } = faulty(inner);
  const a = new OwnedRecord(record, store, 'A', now);
  const id = record.id;
  let takenOver: OperationRecord | undefined;
  let answered: OperationRecord | undefined;
  let settled = false;
  const trace = JSON.stringify(ops);
  for (const op of ops) {
    if (op.who === 'takeover') {
      const current = (await inner.get(id)) as OperationRecord;
      if (current.state !== 'in_flight') continue;
      const next = applyEvent(current, { type: 'acquire', owner: 'B', leaseExpiresAt: clock + 100 }, now(), 'B');
      if ((await inner.compareAndSet(id, current.generation, next)).ok) takenOver = next;
      continue;
    }
    // settle has returned (its answer recorded) or thrown (the lease lost): it writes no more
    if (op.who === 'settle' && settled) continue;
    // (renewing() asks for no renewal while the record holds no lease of ours: our answer landed)
    if (op.who === 'renew' && a.rec.lease?.owner !== 'A') continue;
    mode.next = op.store;
    const event: RecordEvent = op.who === 'settle' ? answer : { type: 'renew', leaseExpiresAt: clock + 100 };
    let result: OperationRecord | undefined;
    let error: unknown;
    try {
      result = await a.commit(event);
    } catch (e) {
      error = e;
    }
    if (op.who === 'settle' && !(error instanceof StoreError)) settled = true;
    // settle tries again only on a StoreError: anything else but a lost lease would escape it
    if (error !== undefined && !(error instanceof StoreError) && !(error instanceof LeaseLostError)) throw new Error(`${trace}: ${op.who} threw ${String(error)}`);
    if (error instanceof LeaseLostError && takenOver === undefined) throw new Error(`${trace}: ${op.who} lost a lease nobody took over`);
    const stored = (await inner.get(id)) as OperationRecord;
    if (result !== undefined && op.who === 'settle') {
      expect(result, trace).toMatchObject({ state: 'succeeded', result: { status: 201 } });
      expect(stored, trace).toEqual(result);
      answered ??= result;
    }
    // once recorded, the answer stays as it landed: never written twice
    if (answered !== undefined) expect(stored, trace).toEqual(answered);
    // after a takeover: the new owner's record, never A's answer applied over it
    if (takenOver !== undefined) {
      expect(stored, trace).toMatchObject({ state: takenOver.state, result: null, lease: takenOver.lease, attempts: takenOver.attempts });
    }
  }
  // settle's next try, when it has not returned yet, returns the answer that landed before any takeover
  const stored = (await inner.get(id)) as OperationRecord;
  if (stored.state === 'succeeded' && !settled) expect(await a.commit(answer), trace).toEqual(stored);
}

describe("settle's answer and the lease renewals beside it, in every order", () => {
  it('no IllegalTransitionError, no answer applied twice or over another owner, a lost lease only after a takeover', async () => {
    const steps: Op[] = [
      { who: 'renew', store: 'ok' },
      { who: 'renew', store: 'fail' },
      { who: 'renew', store: 'lose' },
      { who: 'settle', store: 'ok' },
      { who: 'settle', store: 'fail' },
      { who: 'settle', store: 'lose' },
      { who: 'takeover' },
    ];
    let runs = 0;
    const walk = async (ops: Op[], depth: number): Promise<void> => {
      if (depth === 0) {
        runs++;
        await scenario(ops);
        return;
      }
      for (const step of steps) await walk([...ops, step], depth - 1);
    };
    await walk([], 5);
    expect(runs).toBe(7 ** 5);
  });

  it('a renewal that finds the answer applied (its ack lost) returns the landed record; the answer tried again returns it too', async () => {
    // The reviewer's order: the renewal adopts the landed write first. Before the fix: the renewal
    // threw LeaseLostError, and the answer tried again an IllegalTransitionError.
    await scenario([{ who: 'settle', store: 'lose' }, { who: 'renew', store: 'ok' }, { who: 'settle', store: 'ok' }]);
    let clock = T0;
    const now = (): number => ++clock;
    const inner = memoryStore();
    const record = await claimSentByA(inner, { ref: 'R2', key: 'k', createdAt: now(), startedAt: now(), leaseMs: 100, request: null });
    const { store, mode } = faulty(inner);
    const a = new OwnedRecord(record, store, 'A', now);
    mode.next = 'lose';
    expect(await a.commit(answer).catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    const landed = await inner.get(record.id);
    expect(await a.commit({ type: 'renew', leaseExpiresAt: clock + 100 })).toEqual(landed);
    expect(await a.commit(answer)).toEqual(landed);
    expect(await inner.get(record.id)).toEqual(landed);
  });
});
