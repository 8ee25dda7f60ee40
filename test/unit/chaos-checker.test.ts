/**
 * The chaos run's checker on hand-made histories: a clean one passes, and each
 * way a history can contradict the providers' effect logs is flagged. Also the
 * rule that decides which failed calls may be reported as `fail`.
 */
import { describe, expect, it } from 'vitest';
import { claimOf } from '../../chaos/call.js';
import { check, parseHistory } from '../../chaos/checker.js';
import type { Claim, EffectEntry, HistoryEntry, ObservedState, ViolationKind } from '../../chaos/history.js';
import type { OperationRecord } from '../../src/index.js';

/** A small history builder: calls by worker, with times in ms from 0. */
function call(op: number, ref: string, at: number, worker = 'w0') {
  const base = { op, worker, incarnation: 0, ref };
  return {
    invoke: (): HistoryEntry => ({ type: 'invoke', ...base, at }),
    ok: (orderId: string | null, end = at + 10): HistoryEntry => ({ type: 'ok', ...base, at: end, status: 201, orderId, replayed: false }),
    fail: (checkedAt = at + 10, code = 'RETRIES_EXHAUSTED'): HistoryEntry => ({ type: 'fail', ...base, at: checkedAt + 1, code, state: 'pending', checkedAt }),
    indeterminate: (end = at + 10, code = 'AMBIGUOUS_OUTCOME'): HistoryEntry => ({ type: 'indeterminate', ...base, at: end, code, state: 'ambiguous' }),
  };
}

function truth(ref: string, at: number, claim: Claim, orderId: string | null = null, phase: 'after_recover' | 'after_calls' = 'after_recover'): HistoryEntry {
  const state: ObservedState = claim === 'one' ? 'succeeded' : claim === 'unsettled' ? 'ambiguous' : 'pending';
  return { type: 'reconciled', phase, ref, at, state, claim, orderId };
}

function order(id: string, ref: string, createdAt: number): EffectEntry {
  return { id, ref, createdAt };
}

function kinds(history: HistoryEntry[], effects: EffectEntry[]): ViolationKind[] {
  return check({ history, effects }).violations.map((v) => v.kind);
}

describe('the chaos checker', () => {
  it('passes a history that agrees with the effect log, and counts it', () => {
    const a = call(0, 'A', 0);
    const a2 = call(1, 'A', 5, 'w1');
    const b = call(2, 'B', 0);
    const c = call(3, 'C', 0);
    const cFinal = call(10, 'C', 500, 'final');
    const d = call(4, 'D', 0);
    const dFinal = call(11, 'D', 500, 'final');
    const e = call(5, 'E', 0);
    const eLater = call(6, 'E', 100, 'w1');
    const history = [
      a.invoke(), a2.invoke(), a.ok('ord_1', 20), a2.ok('ord_1', 30),
      b.invoke(), b.fail(),
      c.invoke(), c.indeterminate(), truth('C', 400, 'one', 'ord_2'), cFinal.invoke(), cFinal.ok('ord_2'), truth('C', 600, 'one', 'ord_2', 'after_calls'),
      d.invoke(), d.indeterminate(), truth('D', 400, 'none'), dFinal.invoke(), dFinal.ok('ord_3'), truth('D', 600, 'one', 'ord_3', 'after_calls'),
      // a fail before anyone created the order; a later call created and returned it
      e.invoke(), e.fail(50), eLater.invoke(), eLater.ok('ord_4', 120),
    ];
    const effects = [order('ord_1', 'A', 10), order('ord_2', 'C', 5), order('ord_3', 'D', 505), order('ord_4', 'E', 110)];
    const result = check({ history, effects, requests: [{ ref: 'A', key: 'k1' }, { ref: 'A', key: 'k1' }] });
    expect(result.violations).toEqual([]);
    expect(result).toMatchObject({ refs: 5, effects: 4, duplicates: 0, ok: 5, fail: 2, indeterminate: 2, reconciled: { toOne: 1, toZero: 1 } });
  });

  it('flags an ok with no effect', () => {
    const a = call(0, 'A', 0);
    expect(kinds([a.invoke(), a.ok('ord_1')], [])).toEqual(['ok_without_effect']);
  });

  it('flags an ok for a ref with two effects: a duplicate', () => {
    const a = call(0, 'A', 0);
    const result = check({ history: [a.invoke(), a.ok('ord_1')], effects: [order('ord_1', 'A', 5), order('ord_2', 'A', 6)] });
    expect(result.violations.map((v) => v.kind).sort()).toEqual(['duplicate_effect', 'ok_wrong_order']);
    expect(result.duplicates).toBe(1);
  });

  it("flags an ok whose order id is not the provider's order for the ref", () => {
    const a = call(0, 'A', 0);
    expect(kinds([a.invoke(), a.ok('ord_9')], [order('ord_1', 'A', 5)])).toEqual(['ok_wrong_order']);
    expect(kinds([a.invoke(), a.ok(null)], [order('ord_1', 'A', 5)])).toEqual(['ok_wrong_order']);
  });

  it('flags one of two oks that disagree on the order id', () => {
    const a = call(0, 'A', 0);
    const b = call(1, 'A', 0, 'w1');
    expect(kinds([a.invoke(), b.invoke(), a.ok('ord_1'), b.ok('ord_2')], [order('ord_1', 'A', 5)])).toEqual(['ok_wrong_order']);
  });

  it('flags a fail with an effect and no call that returned it', () => {
    const a = call(0, 'A', 0);
    expect(kinds([a.invoke(), a.fail(10)], [order('ord_1', 'A', 50)])).toEqual(['fail_with_effect']);
  });

  it('flags a fail whose ref already had its effect when the record was read, even if a later call returned it', () => {
    const a = call(0, 'A', 0);
    const b = call(1, 'A', 100, 'w1');
    const history = [a.invoke(), a.fail(40), b.invoke(), b.ok('ord_1', 110)];
    expect(kinds(history, [order('ord_1', 'A', 30)])).toEqual(['fail_with_effect']);
  });

  it('flags an indeterminate call whose ref has two effects', () => {
    const a = call(0, 'A', 0);
    const history = [a.invoke(), a.indeterminate(), truth('A', 400, 'one', 'ord_1')];
    const result = check({ history, effects: [order('ord_1', 'A', 5), order('ord_2', 'A', 300)] });
    expect(result.violations.map((v) => v.kind).sort()).toEqual(['duplicate_effect', 'reconciled_wrong']);
    expect(result.duplicates).toBe(1);
  });

  describe('an indeterminate call not reconciled to the truth', () => {
    const a = call(0, 'A', 0);
    const later = call(9, 'A', 500, 'final');

    it('never read by the final recovery', () => {
      expect(kinds([a.invoke(), a.indeterminate()], [order('ord_1', 'A', 5)])).toEqual(['unreconciled']);
    });

    it('left ambiguous, or only "safe to resend"', () => {
      expect(kinds([a.invoke(), a.indeterminate(), truth('A', 400, 'unsettled')], [])).toEqual(['unreconciled']);
      expect(kinds([a.invoke(), a.indeterminate(), truth('A', 400, 'resend')], [])).toEqual(['unreconciled']);
    });

    it('read as succeeded while the provider has no effect', () => {
      expect(kinds([a.invoke(), a.indeterminate(), truth('A', 400, 'one', 'ord_1')], [])).toEqual(['reconciled_wrong']);
    });

    it('read as succeeded with another order than the provider has', () => {
      expect(kinds([a.invoke(), a.indeterminate(), truth('A', 400, 'one', 'ord_7')], [order('ord_1', 'A', 5)])).toEqual(['reconciled_wrong']);
    });

    it('read as "no effect" while the effect was there, before any later call', () => {
      const history = [a.invoke(), a.indeterminate(), truth('A', 400, 'none'), later.invoke(), later.ok('ord_1')];
      expect(kinds(history, [order('ord_1', 'A', 450)])).toEqual(['reconciled_wrong']);
    });
  });

  it('flags a call without an outcome and an outcome without a call', () => {
    const a = call(0, 'A', 0);
    const b = call(1, 'B', 0);
    expect(kinds([a.invoke(), b.ok('ord_1')], [order('ord_1', 'B', 5)]).sort()).toEqual(['missing_outcome', 'orphan_outcome']);
  });

  it('flags a ref whose requests carried two keys', () => {
    const result = check({ history: [], effects: [], requests: [{ ref: 'A', key: 'k1' }, { ref: 'A', key: 'k2' }] });
    expect(result.violations.map((v) => v.kind)).toEqual(['key_reminted']);
  });

  it('reads JSON lines, skipping a line torn by SIGKILL', () => {
    const a = call(0, 'A', 0);
    const text = `${JSON.stringify(a.invoke())}\n${JSON.stringify(a.ok('ord_1')).slice(0, 20)}`;
    expect(parseHistory(text)).toEqual([a.invoke()]);
  });
});

describe('what a record claims about its effect (the line between fail and indeterminate)', () => {
  const base = {
    schemaVersion: 1, id: 'x', tenant: 't', action: 'a', ref: 'A', key: 'k', keySource: 'minted', fingerprint: '0'.repeat(64), request: null,
    generation: 9, lease: null, createdAt: 0, updatedAt: 0, expiresAt: 1, result: null, error: null, cancelRequestedAt: null, evidence: [],
  } as const;
  type Attempt = OperationRecord['attempts'][number];
  const attempt = (n: number, cls: Attempt['class'], status: number | null = null, finished = true): Attempt => ({
    id: `a${n}`, number: n, generation: n * 2, owner: 'w1-d', startedAt: n, finishedAt: finished ? n + 1 : null, class: cls, status, reason: null,
  });
  const absentBy = (owner: string, generation: number): OperationRecord['evidence'][number] => ({ at: 50, kind: 'lookup', generation, owner, detail: 'absent: lookup reported no such operation', status: null });
  const rec = (state: OperationRecord['state'], attempts: Attempt[], evidence: OperationRecord['evidence'] = []): OperationRecord => ({ ...base, state, attempts, evidence });

  it.each<[string, OperationRecord | undefined, Claim]>([
    ['no record', undefined, 'none'],
    ['succeeded', rec('succeeded', [attempt(1, 'success', 201)]), 'one'],
    ['failed (a 4xx)', rec('failed', [attempt(1, 'terminal', 400)]), 'none'],
    ['cancelled', rec('cancelled', []), 'none'],
    ['pending after 503s and a refused connection', rec('pending', [attempt(1, 'retryable', 503), attempt(2, 'not_sent')]), 'none'],
    ['pending after a 409 "in progress"', rec('pending', [attempt(1, 'retryable', 409)]), 'resend'],
    ['pending after an unfinished attempt', rec('pending', [attempt(1, null, null, false)]), 'resend'],
    ['pending after ambiguous + absent from an owner that waits settleMs', rec('pending', [attempt(1, 'ambiguous')], [absentBy('w1-d', 3)]), 'none'],
    ['pending after ambiguous + absent from an owner relying on dedupe', rec('pending', [attempt(1, 'ambiguous')], [absentBy('w0-d', 3)]), 'resend'],
    ['pending after ambiguous + absent from a later life of an owner relying on dedupe', rec('pending', [attempt(1, 'ambiguous')], [absentBy('w0#2-d', 3)]), 'resend'],
    ['pending after ambiguous + absent from the recover() of a later life relying on dedupe', rec('pending', [attempt(1, 'ambiguous')], [absentBy('w2#1-d/recover', 3)]), 'resend'],
    ['pending after ambiguous + absent from a later life of an owner that waits settleMs', rec('pending', [attempt(1, 'ambiguous')], [absentBy('w1#3-d', 3)]), 'none'],
    ['pending after an absent older than the last ambiguous attempt', rec('pending', [attempt(1, 'ambiguous'), attempt(2, 'ambiguous')], [absentBy('w1-d', 3)]), 'resend'],
    ['ambiguous', rec('ambiguous', [attempt(1, 'ambiguous')]), 'unsettled'],
    ['in flight', rec('in_flight', [attempt(1, null, null, false)]), 'unsettled'],
  ])('%s → %s', (_name, record, claim) => {
    expect(claimOf(record)).toBe(claim);
  });
});
