import { describe, expect, it, vi } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { IllegalTransitionError, applyEvent, parseRecord } from '../../src/operation/record.js';
import type { OperationRecord, OperationState, RecordEvent } from '../../src/operation/record.js';
import { settledAt } from '../../src/reconcile/lookup.js';

import { T0, fresh, snapshot } from '../helpers/record-fixture.js';

const started: RecordEvent = { type: 'attempt_started', attemptId: 'a1' };
const finished = (cls: 'success' | 'terminal' | 'not_sent' | 'retryable' | 'ambiguous' | 'conflict'): RecordEvent => ({
  type: 'attempt_finished',
  class: cls,
  status: cls === 'success' ? 201 : null,
  reason: cls,
  result: cls === 'success' || cls === 'terminal' ? snapshot : null,
});

/** A superseded owner's late success, as `keepAsEvidence` writes it. */
const lateDelivery: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome', status: 201, reopen: true };

function drive(events: RecordEvent[]): OperationRecord {
  return events.reduce((rec, e, i) => applyEvent(rec, e, T0 + i + 1, 'o1'), fresh());
}

describe('state machine', () => {
  it.each<[string, RecordEvent[], OperationState]>([
    ['send', [started], 'in_flight'],
    ['2xx', [started, finished('success')], 'succeeded'],
    ['terminal 4xx', [started, finished('terminal')], 'failed'],
    ['provider conflict', [started, finished('conflict')], 'failed'],
    ['provider conflict after attempts that never left', [started, finished('not_sent'), started, finished('conflict')], 'failed'],
    // a key conflict answering a resend: the provider saw the key before, from an attempt that may have acted
    ['provider conflict on a resend after an ambiguous attempt', [started, finished('ambiguous'), { type: 'resend_after_ambiguous', detail: 'x' }, started, finished('conflict')], 'ambiguous'],
    ['provider conflict on a resend after an "absent"', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }, started, finished('conflict')], 'ambiguous'],
    ['provider conflict on a resend after a retryable answer', [started, finished('retryable'), started, finished('conflict')], 'ambiguous'],
    ['provider conflict on a resend, then found', [started, finished('retryable'), started, finished('conflict'), { type: 'lookup_found', result: snapshot, detail: 'x' }], 'succeeded'],
    ['provider conflict on a resend, then a settled "absent": the conflict stands', [started, finished('retryable'), started, finished('conflict'), { type: 'lookup_absent', detail: 'x' }], 'failed'],
    ['provider conflict on a resend, then an "absent" asked before settleMs: nothing settled', [started, finished('retryable'), started, finished('conflict'), { type: 'lookup_absent', detail: 'x', settled: false }], 'ambiguous'],
    ['provider conflict on a resend, a cancel, then a settled "absent"', [started, finished('retryable'), started, finished('conflict'), { type: 'cancel' }, { type: 'lookup_absent', detail: 'x' }], 'cancelled'],
    ['not sent', [started, finished('not_sent')], 'pending'],
    ['retryable', [started, finished('retryable')], 'pending'],
    ['ambiguous', [started, finished('ambiguous')], 'ambiguous'],
    ['lookup found', [started, finished('ambiguous'), { type: 'lookup_found', result: snapshot, detail: 'x' }], 'succeeded'],
    ['lookup absent', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }], 'pending'],
    ['lookup unknown', [started, finished('ambiguous'), { type: 'lookup_unknown', detail: 'x' }], 'ambiguous'],
    ['cancel before send', [{ type: 'cancel' }], 'cancelled'],
    ['cancel on the wire is only recorded', [started, { type: 'cancel' }], 'in_flight'],
    ['cancel then absent', [started, { type: 'cancel' }, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }], 'cancelled'],
    ['cancel then delivery: delivery wins', [started, { type: 'cancel' }, finished('success')], 'succeeded'],
    ['takeover of in_flight', [started, { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5000 }], 'ambiguous'],
    ['late delivery reopens absent', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }, lateDelivery], 'ambiguous'],
    ['late delivery reopens retryable', [started, finished('retryable'), lateDelivery], 'ambiguous'],
    ['late delivery, ambiguous record', [started, finished('ambiguous'), lateDelivery], 'ambiguous'],
    ['late delivery, in flight', [started, lateDelivery], 'in_flight'],
    ['late delivery, succeeded', [started, finished('success'), lateDelivery], 'succeeded'],
    ['late delivery, cancelled', [{ type: 'cancel' }, lateDelivery], 'cancelled'],
    ['late evidence without reopen', [started, finished('retryable'), { ...lateDelivery, reopen: false }], 'pending'],
    ['cancel after a retryable answer', [started, finished('retryable'), { type: 'cancel' }], 'cancelled'],
    ['cancel after not sent', [started, finished('not_sent'), { type: 'cancel' }], 'cancelled'],
    ['cancel after absent', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }, { type: 'cancel' }], 'cancelled'],
    ['cancel when only cleared for a same-key resend', [started, finished('ambiguous'), { type: 'resend_after_ambiguous', detail: 'x' }, { type: 'cancel' }], 'ambiguous'],
    ['cancel, then an "absent" asked before settleMs: not cancelled', [started, finished('ambiguous'), { type: 'cancel' }, { type: 'lookup_absent', detail: 'x', settled: false }], 'pending'],
    ['cancel after an "absent" asked before settleMs: back to ambiguous', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x', settled: false }, { type: 'cancel' }], 'ambiguous'],
    ['cancel after 409 in progress', [started, { type: 'attempt_finished', class: 'retryable', status: 409, reason: 'status 409 in progress', result: null }, { type: 'cancel' }], 'ambiguous'],
    ['cancel after a send a lookup had cleared, then a retryable answer', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }, started, finished('retryable'), { type: 'cancel' }], 'cancelled'],
    ['reconcile first when only cleared for a same-key resend', [started, finished('ambiguous'), { type: 'resend_after_ambiguous', detail: 'x' }, { type: 'reconcile_first', detail: 'x' }], 'ambiguous'],
    ['reconcile first after an "absent" asked before settleMs', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x', settled: false }, { type: 'reconcile_first', detail: 'x' }], 'ambiguous'],
    ['reconcile first when a retryable answer followed a same-key resend', [started, finished('ambiguous'), { type: 'resend_after_ambiguous', detail: 'x' }, started, finished('retryable'), { type: 'reconcile_first', detail: 'x' }], 'ambiguous'],
  ])('%s → %s', (_name, events, state) => {
    expect(drive(events).state).toBe(state);
  });

  it.each<[string, RecordEvent[]]>([
    ['a second send while one is on the wire', [started, started]],
    ['a send from ambiguous without reconciliation', [started, finished('ambiguous'), started]],
    ['a same-key resend after a key conflict on a resend', [started, finished('retryable'), started, finished('conflict'), { type: 'resend_after_ambiguous', detail: 'x' }]],
    ['a send after a key conflict on a resend', [started, finished('retryable'), started, finished('conflict'), started]],
    ['finishing an attempt that never started', [finished('success')]],
    ['anything moving a terminal record', [started, finished('success'), started]],
    ['lookup result on a pending record', [{ type: 'lookup_found', result: snapshot, detail: 'x' }]],
    // reconcile_first only where a provider's dedupe was all that cleared the record for a send
    ['reconcile first on a record nothing was sent for', [{ type: 'reconcile_first', detail: 'x' }]],
    ['reconcile first after a settled "absent"', [started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }, { type: 'reconcile_first', detail: 'x' }]],
    ['reconcile first after a 409 "in progress" alone', [started, { type: 'attempt_finished', class: 'retryable', status: 409, reason: 'status 409 in progress', result: null }, { type: 'reconcile_first', detail: 'x' }]],
    ['reconcile first on an ambiguous record', [started, finished('ambiguous'), { type: 'reconcile_first', detail: 'x' }]],
  ])('rejects %s', (_name, events) => {
    expect(() => drive(events)).toThrow(IllegalTransitionError);
  });

  it('a new record starts at a random generation: 1 above a multiple of 2^20, with room for 2^52 more writes', () => {
    // so a record deleted and claimed afresh does not start again where its earlier life did
    // (test/e2e/record-deleted.test.ts): a stale owner's compare-and-set matches nothing on it
    const generations = Array.from({ length: 1_000 }, () => fresh().generation);
    // 32 random bits: two of 1000 draws repeat about once in 8,600 runs, three in about 4e12
    expect(new Set(generations).size).toBeGreaterThanOrEqual(998);
    for (const g of generations) {
      expect(g % 2 ** 20).toBe(1);
      expect(Number.isSafeInteger(g + 2 ** 52)).toBe(true);
    }
    expect(Math.max(...generations)).toBeGreaterThan(2 ** 40);
  });

  it('draws the random words of new generations from crypto.getRandomValues, 256 to a call (one call costs ~7 µs in Node, whatever its size)', () => {
    const draw = vi.spyOn(globalThis.crypto, 'getRandomValues');
    try {
      const generations = Array.from({ length: 1_000 }, () => fresh().generation);
      // at most ceil(1000 / 256) refills, whatever the pool held before; one call per record without it
      expect(draw.mock.calls.length).toBeGreaterThanOrEqual(3);
      expect(draw.mock.calls.length).toBeLessThanOrEqual(4);
      // every word drawn is used once: 1000 records, 1000 generations, none repeated from the pool
      expect(new Set(generations).size).toBeGreaterThanOrEqual(998);
    } finally {
      draw.mockRestore();
    }
  });

  it('bumps the generation on every write and never changes the key', () => {
    const rec = drive([started, finished('retryable'), started, finished('success')]);
    // four writes after the claim: the low 20 bits count from 1 (firstGeneration)
    expect(rec.generation % 2 ** 20).toBe(5);
    expect(rec.key).toBe('k-1');
    expect(rec.attempts.map((a) => [a.number, a.class])).toEqual([
      [1, 'retryable'],
      [2, 'success'],
    ]);
  });

  it('keeps the takeover as evidence and hands the lease to the new owner', () => {
    const rec = drive([started, { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5000 }]);
    expect(rec.lease).toEqual({ owner: 'o2', expiresAt: T0 + 5000 });
    expect(rec.evidence.map((e) => e.kind)).toEqual(['takeover']);
  });

  it("a resume under the same owner (or with no lease) of an open attempt stamps it once, as a takeover: settledAt counts from there", () => {
    const open = drive([started]);
    const resume = { type: 'acquire', owner: 'o1', leaseExpiresAt: T0 + 5000 } as const;
    // (a restarted process under the same owner id: its lease read as its own)
    const resumed = applyEvent(open, resume, T0 + 100, 'o1');
    expect(resumed.state).toBe('ambiguous');
    expect(resumed.evidence).toEqual([
      expect.objectContaining({ kind: 'takeover', at: T0 + 100, owner: 'o1', detail: expect.stringMatching(/^lease resumed by o1 with attempt 1's end never recorded/) }),
    ]);
    expect(settledAt(resumed, 500)).toBe(T0 + 600);
    // once: a later acquisition (the next call, recover()) does not move the window again, or an "absent" asked right after it never settles
    const released = applyEvent(resumed, { type: 'release' }, T0 + 200, 'o1');
    const again = applyEvent(released, { type: 'acquire', owner: 'o1#recover', leaseExpiresAt: T0 + 5000 }, T0 + 300, 'o1#recover');
    expect(again.evidence.map((e) => e.kind)).toEqual(['takeover']);
    expect(settledAt(again, 500)).toBe(T0 + 600);
    // with no lease (released with the attempt open, no stop note), by another owner as well
    const bare = applyEvent(applyEvent(open, { type: 'release' }, T0 + 50, 'o1'), { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5000 }, T0 + 100, 'o2');
    expect(bare.evidence.map((e) => [e.kind, e.detail.slice(0, 19)])).toEqual([['takeover', 'lease resumed by o2']]);
    // nothing to stamp: the attempt's end recorded, or its owner's stop bounds it (8e75406), or none started
    expect(applyEvent(drive([started, finished('ambiguous')]), resume, T0 + 100, 'o1').evidence).toEqual([]);
    const stopped = drive([started, { type: 'stopped', code: 'STORE_ERROR', message: 'm' }]);
    expect(applyEvent(stopped, resume, T0 + 100, 'o1').evidence.map((e) => e.kind)).toEqual(['stop']);
    expect(applyEvent(fresh(), resume, T0 + 100, 'o1').evidence).toEqual([]);
    // another owner's takeover of a live lease: its own note, as before
    expect(applyEvent(open, { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5000 }, T0 + 100, 'o2').evidence.map((e) => e.detail)).toEqual(['lease taken over from o1 (state was in_flight)']);
  });

  it("only the first bound of an open attempt's end moves settledAt: a later call of its owner that stops does not push the window again", () => {
    // o1's call sent attempt 1, the store failed the write of its end, the call stopped (8e75406): bounded at T0 + 100
    const open = drive([started]);
    const stop = { type: 'stopped', code: 'STORE_ERROR', message: 'the end could not be recorded' } as const;
    let rec = applyEvent(open, stop, T0 + 100, 'o1');
    expect(settledAt(rec, 500)).toBe(T0 + 600);
    // the same client (owner o1) calls again every 300 ms with a deadline shorter than the window: each takes the
    // free lease, hears an unsettled "absent" and stops; none of them sent anything
    for (let i = 1; i <= 5; i++) {
      rec = applyEvent(rec, { type: 'acquire', owner: 'o1', leaseExpiresAt: T0 + 100_000 }, T0 + 100 + 300 * i, 'o1');
      rec = applyEvent(rec, { type: 'stopped', code: 'AMBIGUOUS_OUTCOME', message: 'absent, not settled' }, T0 + 110 + 300 * i, 'o1');
    }
    expect(settledAt(rec, 500)).toBe(T0 + 600);
    // the same after a resume note (108b44c): the restarted process's own stops do not move it past the resume
    const resumed = applyEvent(open, { type: 'acquire', owner: 'o1', leaseExpiresAt: T0 + 100_000 }, T0 + 100, 'o1');
    const stoppedLater = applyEvent(resumed, { type: 'stopped', code: 'AMBIGUOUS_OUTCOME', message: 'absent, not settled' }, T0 + 400, 'o1');
    expect(settledAt(stoppedLater, 500)).toBe(T0 + 600);
  });

  it('an attempt whose end was recorded: settledAt counts from that end; a later stop or takeover by a call that sent nothing does not move it, a late response does', () => {
    // attempt 1 started at T0 + 1 and ended ambiguous (a timeout) at T0 + 2, its end recorded
    const ended = drive([started, finished('ambiguous')]);
    expect(settledAt(ended, 500)).toBe(T0 + 502);
    // its owner's call stops later; or another owner (recover()) takes the expired lease over later still: neither sent anything
    const stopped = applyEvent(ended, { type: 'stopped', code: 'AMBIGUOUS_OUTCOME', message: 'absent, not settled' }, T0 + 3_000, 'o1');
    expect(stopped.evidence.map((e) => e.kind)).toEqual(['stop']);
    expect(settledAt(stopped, 500)).toBe(T0 + 502);
    const taken = applyEvent(ended, { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 100_000 }, T0 + 5_000, 'o2');
    expect(taken.evidence.map((e) => e.kind)).toEqual(['takeover']);
    expect(settledAt(taken, 500)).toBe(T0 + 502);
    // (a superseded owner's late response was on the wire until it was written: it does)
    expect(settledAt(applyEvent(taken, lateDelivery, T0 + 6_000, 'o-late'), 500)).toBe(T0 + 6_500);
  });

  it('a reopened record keeps its lease, result and attempts; the late response is evidence', () => {
    const absent = drive([started, finished('ambiguous'), { type: 'lookup_absent', detail: 'x' }]);
    const reopened = applyEvent(absent, lateDelivery, T0 + 10, 'o-late');
    expect(reopened).toMatchObject({ state: 'ambiguous', lease: absent.lease, result: absent.result, attempts: absent.attempts, generation: absent.generation + 1 });
    expect(reopened.evidence.at(-1)).toMatchObject({ kind: 'late_response', owner: 'o-late', status: 201 });
    // reconciled like any ambiguous record: no send before a lookup or a same-key resend decision
    expect(() => applyEvent(reopened, started, T0 + 11, 'o1')).toThrow(IllegalTransitionError);
  });

  it('releases the lease on terminal states and when a call stops', () => {
    expect(drive([started, finished('success')]).lease).toBeNull();
    expect(drive([started, finished('retryable'), { type: 'stopped', code: 'RETRIES_EXHAUSTED', message: 'm' }]).lease).toBeNull();
  });

  it('does not mutate its input', () => {
    const rec = fresh();
    const copy = structuredClone(rec);
    applyEvent(rec, started, T0 + 1, 'o1');
    expect(rec).toEqual(copy);
  });
});

describe('parseRecord', () => {
  it('round-trips a valid record', () => {
    const rec = drive([started, finished('success')]);
    expect(parseRecord(JSON.stringify(rec), 'test')).toEqual(rec);
  });

  it.each([
    ['malformed JSON', '{"schemaVersion":1,'],
    ['a foreign object', JSON.stringify({ hello: 'world' })],
    ['a newer schema', JSON.stringify({ ...fresh(), schemaVersion: 2 })],
    ['an unknown state', JSON.stringify({ ...fresh(), state: 'done' })],
  ])('rejects %s as a StoreError, never as absent', (_name, raw) => {
    let caught: unknown;
    try {
      parseRecord(raw, 'test');
    } catch (e) {
      caught = e;
    }
    expect(isOnceError(caught) && caught.code).toBe('STORE_ERROR');
  });

  // A rollback, or an old process left running in a rolling deploy, meets records a newer oncefetch
  // wrote: the error must say so (and what to do), not read as a corrupt row.
  it.each([
    ['JSON text', (r: object) => JSON.stringify(r)],
    ['a parsed value', (r: object) => r],
  ])('names a newer record schema version and says to upgrade (%s)', (_name, encode) => {
    expect(() => parseRecord(encode({ ...fresh(), schemaVersion: 3, fieldOfVersion3: true }), 'test')).toThrow(
      /^test: stored record has schema version 3, written by a newer oncefetch \(this one reads 1\): upgrade oncefetch/,
    );
  });

  it('still calls an unknown schema version that is not newer invalid', () => {
    expect(() => parseRecord(JSON.stringify({ ...fresh(), schemaVersion: 0 }), 'test')).toThrow(/invalid at "schemaVersion"/);
    expect(() => parseRecord(JSON.stringify({ ...fresh(), schemaVersion: '2' }), 'test')).toThrow(/invalid at "schemaVersion"/);
  });
});

describe('a provider key conflict', () => {
  it('on attempt 1 ends failed with IDEMPOTENCY_CONFLICT; on a resend after an attempt that may have acted, no error until reconciled', () => {
    expect(drive([started, finished('conflict')]).error?.code).toBe('IDEMPOTENCY_CONFLICT');
    const resend = drive([started, finished('retryable'), started, finished('conflict')]);
    expect(resend.error).toBeNull();
    expect(resend.attempts.map((a) => a.class)).toEqual(['retryable', 'conflict']);
  });

  it('on a resend, then a settled "absent": failed with IDEMPOTENCY_CONFLICT, the lookup noted as absent', () => {
    const rec = drive([started, finished('retryable'), started, finished('conflict'), { type: 'lookup_absent', detail: 'lookup reported no such operation' }]);
    expect(rec.error?.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(rec.evidence.at(-1)?.detail).toBe('absent: lookup reported no such operation');
  });
});

describe('a terminal answer to a same-key resend', () => {
  const resend: RecordEvent = { type: 'resend_after_ambiguous', detail: 'the provider dedupes by key' };
  const absent: RecordEvent = { type: 'lookup_absent', detail: 'lookup reported no such operation' };
  const refusal: RecordEvent = { type: 'attempt_finished', class: 'terminal', status: 401, reason: 'status 401', result: { ...snapshot, status: 401, statusText: 'Unauthorized' } };
  const thrown: RecordEvent = { type: 'attempt_finished', class: 'terminal', status: null, reason: 'TypeError: refused', result: null };

  it.each<[string, RecordEvent[], OperationState]>([
    ['on attempt 1', [started, refusal], 'failed'],
    ['after a 503 (acted on nothing)', [started, finished('retryable'), started, refusal], 'failed'],
    ['after an attempt that never left', [started, finished('not_sent'), started, refusal], 'failed'],
    ['after an ambiguous attempt cleared only for a same-key resend', [started, finished('ambiguous'), resend, started, refusal], 'ambiguous'],
    ['after an ambiguous attempt a settled "absent" cleared', [started, finished('ambiguous'), absent, started, refusal], 'failed'],
    ['after an "absent" asked before settleMs', [started, finished('ambiguous'), { ...absent, settled: false }, started, refusal], 'ambiguous'],
    ['after a superseded owner\'s late delivery (reopened, then a resend)', [started, finished('retryable'), lateDelivery, resend, started, refusal], 'ambiguous'],
  ])('%s → %s', (_name, events, state) => {
    const rec = drive(events);
    expect(rec.state).toBe(state);
    expect(rec.result?.status).toBe(401);
    expect(rec.error).toBeNull();
  });

  it('left ambiguous: never resent with the same key; a settled "absent" lets the 401 stand (failed, its result kept); "found" succeeds', () => {
    const rec = drive([started, finished('ambiguous'), resend, started, refusal]);
    expect(() => applyEvent(rec, resend, T0 + 99, 'o1')).toThrow(IllegalTransitionError);
    const stood = applyEvent(rec, absent, T0 + 99, 'o1');
    expect(stood).toMatchObject({ state: 'failed', error: null, result: { status: 401, source: 'attempt' } });
    expect(applyEvent(rec, { ...absent, settled: false }, T0 + 99, 'o1').state).toBe('ambiguous');
    const found = applyEvent(rec, { type: 'lookup_found', result: { ...snapshot, source: 'lookup', status: 200 }, detail: 'order found' }, T0 + 99, 'o1');
    expect(found).toMatchObject({ state: 'succeeded', result: { status: 200, source: 'lookup' } });
  });

  it('a thrown error classified terminal: no error until reconciled, then OPERATION_FAILED when a settled "absent" lets it stand', () => {
    const rec = drive([started, finished('ambiguous'), resend, started, thrown]);
    expect(rec).toMatchObject({ state: 'ambiguous', error: null, result: null });
    expect(applyEvent(rec, absent, T0 + 99, 'o1')).toMatchObject({ state: 'failed', error: { code: 'OPERATION_FAILED', message: 'TypeError: refused' } });
    expect(drive([started, thrown])).toMatchObject({ state: 'failed', error: { code: 'OPERATION_FAILED' } });
  });
});
