/**
 * Tests written to kill hand-made mutants of src/operation/record.ts that the other suites let
 * survive: transitions refused by the per-event "allowed from" table (a finished record taking an
 * acquire or a cancel, lookup_unknown off an ambiguous record, reconcile_first while in flight, an
 * attempt's end on a pending record); never_sent's checks (its attempt's id, owner, an open end) and
 * its late-not_sent note; renew with no lease, or under another holder; an attempt's generation and
 * the error it clears; the resume note bounded only by the attempt's own owner's stop; which late
 * outcome and which attempt count as a delivery still unsettled (the latest, not not_sent, not a 503,
 * a late outcome settling the attempts it answers); conflictAfterReach, answerUnsettled, refMinted,
 * inProgressAnswer, scopeOfId, parseRecord calling an invalid current-version record invalid (not
 * newer); cancelRequestedAt kept from the first cancel; and expiresAt: from retentionMs at
 * creation, moved to retentionMs after a late end, never earlier, never again once finished.
 */
import { describe, expect, it } from 'vitest';

import {
  IllegalTransitionError,
  answerUnsettled,
  applyEvent,
  conflictAfterReach,
  conflictUnsettled,
  deliveryUnresolved,
  inProgressAnswer,
  lateDeliveryUnsettled,
  parseRecord,
  refMinted,
  resendNeedsDedupe,
  scopeOfId,
} from '../../src/operation/record.js';
import type { OperationRecord, RecordEvent, RecordedClass } from '../../src/operation/record.js';

import { LEASE_MS, RETENTION_MS, T0, fresh, snapshot } from '../helpers/record-fixture.js';

const started: RecordEvent = { type: 'attempt_started', attemptId: 'a1' };
const finished = (cls: RecordedClass, status: number | null = null): RecordEvent => ({
  type: 'attempt_finished',
  class: cls,
  status,
  reason: cls,
  result: cls === 'success' ? snapshot : null,
});

/** Applies `events` in turn, one ms apart, all by owner o1 (its time and owner overridable per step). */
function drive(events: RecordEvent[], from: OperationRecord = fresh()): OperationRecord {
  return events.reduce((rec, e, i) => applyEvent(rec, e, T0 + i + 1, 'o1'), from);
}

describe('a new record', () => {
  it('is kept retentionMs from its creation, and leased leaseMs from it', () => {
    const rec = fresh();
    expect(rec.expiresAt).toBe(T0 + RETENTION_MS);
    expect(rec.lease).toEqual({ owner: 'o1', expiresAt: T0 + LEASE_MS });
  });
});

describe('record ids', () => {
  it('an id of three strings names a scope; four strings, or a non-string part, name none', () => {
    expect(scopeOfId(JSON.stringify(['t', 'a', 'r']))).toEqual({ tenant: 't', action: 'a', ref: 'r' });
    expect(scopeOfId(JSON.stringify(['t', 'a', 'r', 'extra']))).toBeUndefined();
    expect(scopeOfId(JSON.stringify(['t', 'a', 7]))).toBeUndefined();
    expect(scopeOfId(JSON.stringify([1, 2, 3]))).toBeUndefined();
  });
});

describe('parseRecord', () => {
  it('a record of the current schema version that is invalid is called invalid, not newer', () => {
    expect(() => parseRecord(JSON.stringify({ ...fresh(), state: 'done' }), 'test')).toThrow(/^test: stored record is invalid at "state"/);
  });
});

describe('events refused by the state a record is in', () => {
  it('a finished record takes no acquire: its lease, generation and evidence stay as they were', () => {
    const done = drive([started, finished('success', 201)]);
    expect(() => applyEvent(done, { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5_000 }, T0 + 50, 'o2')).toThrow(IllegalTransitionError);
    const failed = drive([started, finished('terminal', 400)]);
    expect(() => applyEvent(failed, { type: 'acquire', owner: 'o1', leaseExpiresAt: T0 + 5_000 }, T0 + 50, 'o1')).toThrow(IllegalTransitionError);
  });

  it('a finished record takes no cancel: cancelRequestedAt stays null', () => {
    const done = drive([started, finished('success', 201)]);
    expect(() => applyEvent(done, { type: 'cancel' }, T0 + 50, 'o1')).toThrow(IllegalTransitionError);
    const cancelled = drive([{ type: 'cancel' }]);
    expect(() => applyEvent(cancelled, { type: 'cancel' }, T0 + 50, 'o1')).toThrow(IllegalTransitionError);
  });

  it('a lookup_unknown is refused on a pending or in-flight record: only an ambiguous one is being reconciled', () => {
    expect(() => drive([{ type: 'lookup_unknown', detail: 'x' }])).toThrow(IllegalTransitionError);
    expect(() => drive([started, { type: 'lookup_unknown', detail: 'x' }])).toThrow(IllegalTransitionError);
  });

  it('reconcile_first is refused while an attempt is on the wire', () => {
    expect(() => drive([started, { type: 'reconcile_first', detail: 'x' }])).toThrow(IllegalTransitionError);
  });

  it('an attempt left open by a superseded owner cannot be finished once a lookup has cleared the record (pending)', () => {
    // o1 sent attempt 1; o2 took the lease over (ambiguous), a settled "absent" cleared it: pending, attempt 1 still open
    const taken = applyEvent(drive([started]), { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5_000 }, T0 + 10, 'o2');
    const cleared = applyEvent(taken, { type: 'lookup_absent', detail: 'x' }, T0 + 20, 'o2');
    expect(cleared.state).toBe('pending');
    expect(cleared.attempts.at(-1)?.finishedAt).toBeNull();
    for (const cls of ['retryable', 'ambiguous', 'not_sent'] as const) {
      expect(() => applyEvent(cleared, finished(cls), T0 + 30, 'o1')).toThrow(IllegalTransitionError);
    }
  });

  it('a renew with no lease held is refused, not turned into a lease for the caller', () => {
    const released = drive([{ type: 'release' }]);
    expect(released.lease).toBeNull();
    expect(() => applyEvent(released, { type: 'renew', leaseExpiresAt: T0 + 5_000 }, T0 + 10, 'o2')).toThrow(IllegalTransitionError);
  });
});

describe('the resume note of an open attempt', () => {
  it("a stop written by another owner does not bound the attempt's end: the next acquire still stamps the resume", () => {
    // o1 sent attempt 1 and released with it open; another owner's call stopped on the record, sending nothing
    const open = drive([started, { type: 'release' }]);
    const stoppedByOther = applyEvent(open, { type: 'stopped', code: 'STORE_ERROR', message: 'm' }, T0 + 10, 'o2');
    const resumed = applyEvent(stoppedByOther, { type: 'acquire', owner: 'o3', leaseExpiresAt: T0 + 5_000 }, T0 + 20, 'o3');
    expect(resumed.evidence.map((e) => [e.kind, e.detail.slice(0, 19)])).toEqual([
      ['stop', 'STORE_ERROR: m'],
      ['takeover', 'lease resumed by o3'],
    ]);
  });
});

describe('leases and generations written by an event', () => {
  it('a renew moves the expiry of the lease it finds and keeps its holder, whoever applies it', () => {
    const renewed = applyEvent(fresh(), { type: 'renew', leaseExpiresAt: T0 + 9_000 }, T0 + 10, 'o2');
    expect(renewed.lease).toEqual({ owner: 'o1', expiresAt: T0 + 9_000 });
  });

  it('an attempt carries the generation of the write that opened it', () => {
    const rec = drive([started]);
    expect(rec.attempts[0]?.generation).toBe(rec.generation);
    const second = drive([finished('retryable'), started], rec);
    expect(second.attempts.map((a) => a.generation)).toEqual([rec.generation, second.generation]);
  });
});

describe('attempts', () => {
  it("a new attempt clears the error an earlier call's stop left", () => {
    const stopped = drive([started, finished('retryable'), { type: 'stopped', code: 'RETRIES_EXHAUSTED', message: 'm' }]);
    expect(stopped.error).toEqual({ code: 'RETRIES_EXHAUSTED', message: 'm' });
    const resumed = drive([{ type: 'acquire', owner: 'o1', leaseExpiresAt: T0 + 5_000 }, { type: 'attempt_started', attemptId: 'a2' }], stopped);
    expect(resumed.error).toBeNull();
  });

  it('never_sent names the open attempt it closes: another id is refused', () => {
    const open = drive([started]);
    expect(() => applyEvent(open, { type: 'never_sent', attemptId: 'a-other', reason: 'gave up' }, T0 + 10, 'o1')).toThrow(IllegalTransitionError);
    expect(applyEvent(open, { type: 'never_sent', attemptId: 'a1', reason: 'gave up' }, T0 + 10, 'o1').attempts[0]?.class).toBe('not_sent');
  });
});

describe('never_sent', () => {
  const neverSent: RecordEvent = { type: 'never_sent', attemptId: 'a1', reason: 'gave up before the send' };
  const takeover: RecordEvent = { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5_000 };

  it('is refused for an attempt whose outcome is already recorded: a retryable answer is not rewritten as not_sent', () => {
    const answered = drive([started, finished('retryable', 503)]);
    expect(() => applyEvent(answered, neverSent, T0 + 10, 'o1')).toThrow(IllegalTransitionError);
  });

  it('is refused from an owner other than the one that opened the attempt', () => {
    const open = drive([started]);
    expect(() => applyEvent(open, neverSent, T0 + 10, 'o2')).toThrow(IllegalTransitionError);
  });

  it('by the lease holder writes no evidence; by a superseded owner it is noted as a late not_sent outcome', () => {
    const own = applyEvent(drive([started]), neverSent, T0 + 10, 'o1');
    expect(own).toMatchObject({ state: 'pending', evidence: [] });
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const late = applyEvent(taken, neverSent, T0 + 20, 'o1');
    expect(late.state).toBe('pending');
    expect(late.evidence.map((e) => [e.kind, e.owner, e.detail.slice(0, 21)])).toEqual([
      ['takeover', 'o2', 'lease taken over from'],
      ['late_response', 'o1', 'late not_sent outcome'],
    ]);
  });

  it('closing an attempt on a record a same-key resend decision already cleared (pending) leaves it pending', () => {
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const lateSuccess = applyEvent(taken, { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201 }, T0 + 20, 'o0');
    const cleared = applyEvent(lateSuccess, { type: 'resend_after_ambiguous', detail: 'the provider dedupes' }, T0 + 30, 'o2');
    expect(cleared.state).toBe('pending');
    expect(applyEvent(cleared, neverSent, T0 + 40, 'o1').state).toBe('pending');
  });

  it("after a takeover, with another superseded owner's late success unsettled, leaves the record ambiguous", () => {
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const lateSuccess = applyEvent(taken, { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201)', status: 201 }, T0 + 20, 'o0');
    const closed = applyEvent(lateSuccess, neverSent, T0 + 30, 'o1');
    expect(closed.state).toBe('ambiguous');
    expect(closed.attempts[0]).toMatchObject({ class: 'not_sent', finishedAt: T0 + 30 });
  });
});

describe('lookup_found', () => {
  it("notes a lookup's finding as a lookup, and a call's own success kept after a takeover as an attempt", () => {
    const ambiguous = drive([started, finished('ambiguous')]);
    const byLookup = applyEvent(ambiguous, { type: 'lookup_found', result: { ...snapshot, source: 'lookup', status: 200 }, detail: 'order found' }, T0 + 10, 'o1');
    expect(byLookup.evidence.map((e) => [e.kind, e.detail, e.status])).toEqual([['lookup', 'found: order found', 200]]);
    const own = applyEvent(ambiguous, { type: 'lookup_found', result: snapshot, detail: 'own success' }, T0 + 10, 'o1');
    expect(own.evidence.map((e) => [e.kind, e.detail, e.status])).toEqual([['attempt', 'found: own success', 201]]);
  });
});

describe("a superseded owner's late outcomes", () => {
  const takeover: RecordEvent = { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5_000 };
  const lateAmbiguous = (reopen: boolean): RecordEvent => ({ type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (timeout) from a superseded owner', status: null, reopen });

  it('the latest late delivery counts: a settled "absent" after an earlier one does not settle a later one', () => {
    // o1 sent attempt 1; o2 took over; o1's late ambiguous end landed; a settled "absent" cleared the record
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const cleared = drive([lateAmbiguous(false), { type: 'lookup_absent', detail: 'x' }], taken);
    expect(cleared.state).toBe('pending');
    expect(lateDeliveryUnsettled(cleared)).toBe(false);
    // then another late ambiguous end lands after that "absent" (without reopening, to read it on a pending record)
    const again = applyEvent(cleared, lateAmbiguous(false), T0 + 50, 'o3');
    expect(lateDeliveryUnsettled(again)).toBe(true);
    expect(deliveryUnresolved(again)).toBe(true);
    // so a cancel sends it back to reconciliation, not to cancelled
    expect(applyEvent(again, { type: 'cancel' }, T0 + 60, 'o2').state).toBe('ambiguous');
  });

  it("a superseded owner's late not_sent is no delivery: a cancel after it cancels", () => {
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const closed = applyEvent(taken, { type: 'never_sent', attemptId: 'a1', reason: 'gave up' }, T0 + 20, 'o1');
    expect(closed.evidence.at(-1)?.detail).toMatch(/^late not_sent outcome/);
    expect(lateDeliveryUnsettled(closed)).toBe(false);
    expect(applyEvent(closed, { type: 'cancel' }, T0 + 30, 'o2').state).toBe('cancelled');
  });
});

describe('a key conflict on a later attempt', () => {
  const takeover: RecordEvent = { type: 'acquire', owner: 'o2', leaseExpiresAt: T0 + 5_000 };

  it("after only a superseded owner's late not_sent, ends failed: nothing of ours reached the provider", () => {
    const taken = applyEvent(drive([started]), takeover, T0 + 10, 'o2');
    const closed = applyEvent(taken, { type: 'never_sent', attemptId: 'a1', reason: 'gave up' }, T0 + 20, 'o1');
    const rec = [{ type: 'attempt_started', attemptId: 'a2' } as const, finished('conflict', 409)].reduce((r, e, i) => applyEvent(r, e, T0 + 30 + i, 'o2'), closed);
    expect(rec.state).toBe('failed');
    expect(rec.error?.code).toBe('IDEMPOTENCY_CONFLICT');
  });

  it("after a superseded owner's late success written before the resend, is left ambiguous even when every earlier attempt of the list was not_sent", () => {
    const lateSuccess: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
    const rec = drive([started, finished('not_sent'), lateSuccess, { type: 'resend_after_ambiguous', detail: 'x' }, { type: 'attempt_started', attemptId: 'a2' }, finished('conflict', 409)]);
    expect(rec.attempts.map((a) => a.class)).toEqual(['not_sent', 'conflict']);
    expect(rec.state).toBe('ambiguous');
    expect(rec.error).toBeNull();
  });
});

describe('a terminal answer that is the late outcome of earlier attempts', () => {
  it('settles the attempts it answers: failed, not left ambiguous for them', () => {
    const resent = drive([started, finished('ambiguous'), { type: 'resend_after_ambiguous', detail: 'x' }, { type: 'attempt_started', attemptId: 'a2' }]);
    const refusal = (answers?: number[]): RecordEvent => ({ type: 'attempt_finished', class: 'terminal', status: 404, reason: 'status 404', result: { ...snapshot, status: 404 }, answers });
    expect(applyEvent(resent, refusal([1]), T0 + 50, 'o1').state).toBe('failed');
    // (answering nothing of attempt 1: its ambiguous end is still unsettled)
    expect(applyEvent(resent, refusal(), T0 + 50, 'o1').state).toBe('ambiguous');
  });
});

describe('answerUnsettled and conflictUnsettled', () => {
  it('hold only for an ambiguous record: a failed one ending in a key conflict or a terminal answer is settled', () => {
    const conflictFailed = drive([started, finished('conflict', 409)]);
    expect(conflictFailed.state).toBe('failed');
    expect(answerUnsettled(conflictFailed)).toBe(false);
    expect(conflictUnsettled(conflictFailed)).toBe(false);
    const terminalFailed = drive([started, finished('terminal', 400)]);
    expect(answerUnsettled(terminalFailed)).toBe(false);
    const conflictOnResend = drive([started, finished('retryable', 503), { type: 'attempt_started', attemptId: 'a2' }, finished('conflict', 409)]);
    expect(conflictOnResend.state).toBe('ambiguous');
    expect(conflictUnsettled(conflictOnResend)).toBe(true);
  });
});

describe('conflictAfterReach', () => {
  const lateSuccess: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
  const conflictOnResend = drive([started, finished('retryable', 500), { type: 'attempt_started', attemptId: 'a2' }, finished('conflict', 409)]);

  it('is undefined while the record is still ambiguous, and once a settled "absent" let the conflict stand', () => {
    expect(conflictOnResend.state).toBe('ambiguous');
    expect(conflictAfterReach(conflictOnResend)).toBeUndefined();
    const stood = applyEvent(conflictOnResend, { type: 'lookup_absent', detail: 'x' }, T0 + 50, 'o1');
    expect(stood.state).toBe('failed');
    expect(conflictAfterReach(stood)).toBeUndefined();
  });

  it('names the earlier attempt that may have acted on a failed record an earlier version ended at once; 0 for a superseded owner\'s', () => {
    // (as a version before the rule wrote it: failed on the conflict, no lookup)
    expect(conflictAfterReach({ ...conflictOnResend, state: 'failed' })).toBe(1);
    const afterLate = drive([started, finished('not_sent'), lateSuccess, { type: 'resend_after_ambiguous', detail: 'x' }, { type: 'attempt_started', attemptId: 'a2' }, finished('conflict', 409)]);
    expect(conflictAfterReach({ ...afterLate, state: 'failed' })).toBe(0);
  });
});

describe('retried answers that may still take effect', () => {
  it('a retried 503 acted on nothing: a cancel after it cancels; after a retried 502 it goes back to reconciliation', () => {
    expect(drive([started, finished('retryable', 503), { type: 'cancel' }]).state).toBe('cancelled');
    expect(drive([started, finished('retryable', 502), { type: 'cancel' }]).state).toBe('ambiguous');
    expect(drive([started, finished('retryable', 500), { type: 'cancel' }]).state).toBe('ambiguous');
  });

  it('"in progress" is a retryable 409 or 422 only: a key conflict or a terminal 409 is not', () => {
    expect(inProgressAnswer({ class: 'retryable', status: 409 })).toBe(true);
    expect(inProgressAnswer({ class: 'retryable', status: 422 })).toBe(true);
    expect(inProgressAnswer({ class: 'conflict', status: 409 })).toBe(false);
    expect(inProgressAnswer({ class: 'terminal', status: 422 })).toBe(false);
  });

  it('the latest attempt that may have acted decides: a settled "absent" after an earlier one does not clear a later one', () => {
    const rec = drive([
      started,
      finished('ambiguous'),
      { type: 'lookup_absent', detail: 'x' },
      { type: 'attempt_started', attemptId: 'a2' },
      finished('ambiguous'),
      { type: 'resend_after_ambiguous', detail: 'x' },
    ]);
    expect(rec.state).toBe('pending');
    expect(deliveryUnresolved(rec)).toBe(true);
    expect(applyEvent(rec, { type: 'cancel' }, T0 + 50, 'o1').state).toBe('ambiguous');
  });
});

describe('a record cleared for a send only by a same-key resend decision', () => {
  it("after a superseded owner's late success, needs the provider's dedupe: reconcile_first takes it back to ambiguous", () => {
    const lateSuccess: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
    const rec = drive([started, finished('retryable', 503), lateSuccess, { type: 'resend_after_ambiguous', detail: 'the provider dedupes' }]);
    expect(rec.state).toBe('pending');
    expect(resendNeedsDedupe(rec)).toBe(true);
    expect(applyEvent(rec, { type: 'reconcile_first', detail: 'no providerDedupes' }, T0 + 50, 'o1').state).toBe('ambiguous');
  });

  it("a retryable or not_sent answer to that resend leaves it ambiguous: the late delivery is still unsettled", () => {
    const lateSuccess: RecordEvent = { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true };
    const resent = drive([started, finished('retryable', 503), lateSuccess, { type: 'resend_after_ambiguous', detail: 'the provider dedupes' }, { type: 'attempt_started', attemptId: 'a2' }]);
    expect(applyEvent(resent, finished('retryable', 503), T0 + 50, 'o1').state).toBe('ambiguous');
    expect(applyEvent(resent, finished('not_sent'), T0 + 50, 'o1').state).toBe('ambiguous');
  });
});

describe('refMinted', () => {
  it('holds for a minted key that is its ref, not for a caller key that happens to equal the ref', () => {
    expect(refMinted({ keySource: 'minted', key: 'r-1', ref: 'r-1' })).toBe(true);
    expect(refMinted({ keySource: 'caller', key: 'r-1', ref: 'r-1' })).toBe(false);
    expect(refMinted({ keySource: 'minted', key: 'k-1', ref: 'r-1' })).toBe(false);
  });
});

describe('cancel requests', () => {
  it('cancelRequestedAt keeps the first request: a second cancel does not move it', () => {
    const rec = drive([started]);
    const first = applyEvent(rec, { type: 'cancel' }, T0 + 10, 'o1');
    const second = applyEvent(first, { type: 'cancel' }, T0 + 20, 'o1');
    expect(second.cancelRequestedAt).toBe(T0 + 10);
    expect(second.evidence.map((e) => e.kind)).toEqual(['cancel', 'cancel']);
  });
});

describe('retention of a finished record', () => {
  const longAfter = T0 + 10 * RETENTION_MS;

  it('a record finishing after its retention is kept retentionMs from its end, counted from its creation span, not its last write', () => {
    const open = drive([started]);
    const done = applyEvent(open, finished('success', 201), longAfter, 'o1');
    expect(done.expiresAt).toBe(longAfter + RETENTION_MS);
  });

  it('a record finished by an owner whose clock is behind its creation keeps its expiry: never moved earlier', () => {
    expect(drive([started, finished('success', 201)]).expiresAt).toBe(T0 + 2 + RETENTION_MS);
    const open = drive([started]);
    // another owner's clock, 5 s behind the creator's, writes the end
    const behind = applyEvent(open, finished('success', 201), T0 - 5_000, 'o1');
    expect(behind.expiresAt).toBe(T0 + RETENTION_MS);
  });

  it('evidence written on a finished record later does not extend its retention', () => {
    const done = applyEvent(drive([started]), finished('success', 201), longAfter, 'o1');
    const noted = applyEvent(done, { type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (timeout) from a superseded owner', status: null }, longAfter + 30_000, 'o2');
    expect(noted.state).toBe('succeeded');
    expect(noted.expiresAt).toBe(done.expiresAt);
    expect(noted.lease).toBeNull();
  });
});
