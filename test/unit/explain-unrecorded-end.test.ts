/**
 * An attempt whose end was never recorded (`finishedAt: null`), and how the record got past it:
 * explain's summary says which of three things happened, read from the first note after the attempt
 * that bounds its end (record.ts `boundsOpen`), not "the lease was taken over" for all three:
 * - another owner took the lease over (`takeover`, "lease taken over from …");
 * - the same owner id resumed it after a restart (`takeover` kind, "lease resumed by <same owner>", 108b44c);
 * - its own owner stopped without recording the end (a failed store write: `stop`, lease released),
 *   and a later call took the record up (no note: nothing to take over).
 * Records built with the real state machine; the later call ends as the engine's does without a
 * lookup (lookup unknown, stopped), so the record is ambiguous under no lease.
 */
import { describe, expect, it } from 'vitest';
import { explain } from '../../src/explain/explain.js';
import { applyEvent } from '../../src/operation/record.js';
import type { OperationRecord, RecordEvent } from '../../src/operation/record.js';
import { explainPolicy, startedRecord } from '../helpers/explain-policy.js';

const T0 = 1_700_000_000_000;
const STORE_STOP = { type: 'stopped', code: 'STORE_ERROR', message: 'attempt 1 was sent and its outcome is unknown (it may have taken effect) and could not be recorded' } as const;

/** `events` applied in order, 10 ms apart, each by its owner. */
function drive(events: [RecordEvent, string][]): OperationRecord {
  let t = T0 + 10;
  return events.reduce((r, [e, owner]) => applyEvent(r, e, (t += 10), owner), startedRecord('A-17', '123e4567-e89b-12d3-a456-426614174abc', T0));
}
const acquire = (owner: string): [RecordEvent, string] => [{ type: 'acquire', owner, leaseExpiresAt: T0 + 30_000 }, owner];
/** the later call: no lookup answers, it stops (releasing its lease) */
const unresolved = (owner: string): [RecordEvent, string][] => [
  [{ type: 'lookup_unknown', detail: 'no lookup registered' }, owner],
  [{ type: 'stopped', code: 'AMBIGUOUS_OUTCOME', message: 'attempt 1 may have taken effect' }, owner],
];
const summary = (r: OperationRecord): string => explain(r, explainPolicy(T0 + 60_000)).diagnosis.summary;

describe('an attempt whose end was never recorded: the summary says how the record got past it', () => {
  it('another owner took the lease over: named', () => {
    const r = drive([acquire('b'), ...unresolved('b')]);
    expect(r.evidence[0]?.detail).toMatch(/^lease taken over from a/);
    expect(summary(r)).toBe('Attempt 1 never recorded an outcome: its owner a stopped and the lease was taken over by b; it may have reached the provider.');
  });

  it('the same owner id resumed it after a restart: no takeover', () => {
    const r = drive([acquire('a'), ...unresolved('a')]);
    expect(r.evidence[0]?.detail).toMatch(/^lease resumed by a/);
    expect(summary(r)).toBe(
      'Attempt 1 never recorded an outcome: its owner a stopped with it on the wire and resumed the record under the same owner id (a restart), with no takeover; it may have reached the provider.',
    );
  });

  it('its owner stopped without recording the end (a store write failed), then a later call took it up: no takeover', () => {
    const stopped = drive([[STORE_STOP, 'a']]);
    // no later call yet: still in_flight, the lease released (not expired, and no owner "?")
    expect(stopped.state).toBe('in_flight');
    expect(summary(stopped)).toBe('Attempt 1 never recorded an outcome: its owner a stopped without recording its end (STORE_ERROR) and released the lease; it may have reached the provider.');
    expect(explain(stopped, explainPolicy(T0 + 60_000, { lookupRegistered: true })).plan[0]).toMatch(/^Take it over: a released its lease;/);
    for (const next of ['b', 'a']) {
      const r = drive([[STORE_STOP, 'a'], acquire(next), ...unresolved(next)]);
      expect(r.evidence.map((e) => e.kind)).toEqual(['stop', 'lookup', 'stop']);
      expect(summary(r)).toBe(
        'Attempt 1 never recorded an outcome: its owner a stopped without recording its end (STORE_ERROR) and released the lease, and a later call continued; it may have reached the provider.',
      );
    }
  });

  it('its owner released the lease with the attempt open (no stop note), then another owner resumed it: no takeover', () => {
    const r = drive([[{ type: 'release' }, 'a'], acquire('b'), ...unresolved('b')]);
    expect(r.evidence[0]?.detail).toMatch(/^lease resumed by b/);
    expect(summary(r)).toBe('Attempt 1 never recorded an outcome: its owner a released the lease without recording its end, and a later call (b) resumed the record with no takeover; it may have reached the provider.');
  });
});
