/**
 * Property-based tests of the record state machine under several owners.
 *
 * 1. Raw actors: owners keep their own (possibly stale) copy of the record and
 *    apply random events with `applyEvent`, writing with `compareAndSet`: any
 *    interleaving of reads and writes. Checked after every step: `applyEvent`
 *    returns a state DESIGN §2 allows or throws an honest IllegalTransitionError;
 *    a write from a stale generation is always rejected and changes nothing;
 *    generations only grow; the key minted at the first claim never changes; and
 *    the record's own invariants hold (in_flight has an open attempt, terminal
 *    holds no lease, ...). The same on the SQLite store.
 * 2. Engine actors: `OwnedRecord` owners taking the lease as `acquire` does, and a
 *    canceller, run concurrently under fast-check's scheduler. Every accepted
 *    write is checked against the one before it: one generation up, a legal
 *    transition, written by the lease holder (or a takeover of an expired lease,
 *    or a cancel or evidence note), the same key, and a terminal record's state
 *    and result never change.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeaseLostError, OwnedRecord } from '../../src/engine/owned.js';
import { isOnceError } from '../../src/errors.js';
import { canonicalJson } from '../../src/operation/canonical-json.js';
import { IllegalTransitionError, applyEvent, isTerminal, newRecord } from '../../src/operation/record.js';
import type { OperationRecord, OperationState, RecordEvent, ResultSnapshot } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { memoryStore } from '../../src/stores/memory.js';
import { sqliteStore } from '../../src/stores/sqlite.js';

/**
 * DESIGN §2, written down independently of `record.ts`, plus one edge: pending -> ambiguous, on
 * evidence that reopens it (a superseded owner's late response shows that an earlier attempt
 * reached the provider after a lookup or a retryable answer had cleared the record for a resend),
 * or on a cancel of a record only cleared for a same-key resend (nothing proved no delivery).
 */
const LEGAL: Readonly<Record<OperationState, readonly OperationState[]>> = {
  pending: ['pending', 'in_flight', 'ambiguous', 'cancelled'],
  in_flight: ['in_flight', 'succeeded', 'failed', 'pending', 'ambiguous'],
  // (failed: only a settled "absent" after a key conflict on a resend, see checkApply)
  ambiguous: ['ambiguous', 'succeeded', 'pending', 'cancelled', 'failed'],
  succeeded: ['succeeded'],
  failed: ['failed'],
  cancelled: ['cancelled'],
};

const OWNERS = ['A', 'B', 'C'] as const;
type Owner = (typeof OWNERS)[number];
const T0 = 1_900_000_000_000;
const LEASE_MS = 50;
const SCOPE = { tenant: 't1', action: 'create-order', ref: 'R-1' };

function claimRecord(owner: string, key: string, now: number): OperationRecord {
  return newRecord({
    scope: SCOPE,
    key,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner,
    now,
    leaseMs: LEASE_MS,
    retentionMs: 3_600_000,
  });
}

const resultArb: fc.Arbitrary<ResultSnapshot> = fc
  .record({ status: fc.constantFrom(200, 201, 400, 409, 422), source: fc.constantFrom('attempt' as const, 'lookup' as const), tag: fc.nat({ max: 999 }) })
  .map(({ status, source, tag }) => ({
    kind: 'response',
    source,
    status,
    statusText: '',
    headers: [['x-tag', String(tag)]],
    body: btoa(`{"order":${tag}}`),
    bodyTruncated: false,
  }));

/** An event with the parts that depend on the moment it is applied left as offsets. */
type EventSpec =
  | { type: 'acquire'; leaseOffsetMs: number }
  | { type: 'renew'; leaseOffsetMs: number }
  | Exclude<RecordEvent, { type: 'acquire' } | { type: 'renew' }>;

/** Weighted towards the events that move a record forward, so that runs reach the terminal states. */
const eventArb: fc.Arbitrary<EventSpec> = fc.oneof(
  fc.record({ type: fc.constant('acquire' as const), leaseOffsetMs: fc.integer({ min: 1, max: 2 * LEASE_MS }) }),
  fc.record({ type: fc.constant('renew' as const), leaseOffsetMs: fc.integer({ min: 1, max: 2 * LEASE_MS }) }),
  fc.constant({ type: 'release' as const }),
  { weight: 3, arbitrary: fc.uuid().map((attemptId) => ({ type: 'attempt_started' as const, attemptId })) },
  { weight: 4, arbitrary: fc.oneof(
    resultArb.map((result) => ({ type: 'attempt_finished' as const, class: 'success' as const, status: result.status, reason: 'status', result })),
    fc.option(resultArb).map((result) => ({ type: 'attempt_finished' as const, class: 'terminal' as const, status: result?.status ?? null, reason: 'terminal', result })),
    fc.constantFrom('not_sent' as const, 'retryable' as const, 'ambiguous' as const, 'conflict' as const).map((cls) => ({
      type: 'attempt_finished' as const,
      class: cls,
      status: null,
      reason: cls,
      result: null,
    })),
  ) },
  { weight: 2, arbitrary: resultArb.map((result) => ({ type: 'lookup_found' as const, result, detail: 'found' })) },
  fc.constant({ type: 'lookup_absent' as const, detail: 'absent' }),
  fc.constant({ type: 'lookup_unknown' as const, detail: 'unknown' }),
  fc.constant({ type: 'resend_after_ambiguous' as const, detail: 'dedupes' }),
  fc.constantFrom('RETRIES_EXHAUSTED', 'AMBIGUOUS_OUTCOME', 'IDEMPOTENCY_CONFLICT').map((code) => ({ type: 'stopped' as const, code, message: code })),
  fc.constant({ type: 'cancel' as const }),
  // its attempt id is the writer's copy's last one (toEvent): the close of an attempt it opened and never sent
  fc.constant({ type: 'never_sent' as const, attemptId: '', reason: 'aborted before it was sent' }),
  fc.constant({ type: 'evidence' as const, kind: 'late_response' as const, detail: 'late', status: 201 }),
  fc.constant({ type: 'evidence' as const, kind: 'late_response' as const, detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true }),
  fc.constant({ type: 'evidence' as const, kind: 'late_response' as const, detail: 'late ambiguous outcome (TimeoutError) from a superseded owner', status: null, reopen: true }),
);

function toEvent(spec: EventSpec, owner: string, now: number, base: OperationRecord | undefined): RecordEvent {
  if (spec.type === 'acquire') return { type: 'acquire', owner, leaseExpiresAt: now + spec.leaseOffsetMs };
  if (spec.type === 'renew') return { type: 'renew', leaseExpiresAt: now + spec.leaseOffsetMs };
  if (spec.type === 'never_sent') return { ...spec, attemptId: base?.attempts.at(-1)?.id ?? 'none' };
  return spec;
}

/**
 * Checks one `applyEvent` call: a success lands in a legal state, one generation up,
 * with identity and history kept; a refusal is an IllegalTransitionError that says why.
 */
function checkApply(base: OperationRecord, event: RecordEvent, now: number, owner: string): OperationRecord | undefined {
  let next: OperationRecord;
  try {
    next = applyEvent(base, event, now, owner);
  } catch (error) {
    expect(error).toBeInstanceOf(IllegalTransitionError);
    const [, from, to, type] = /illegal transition (\w+) -> (\w+) on (\w+)/.exec((error as Error).message) ?? [];
    expect(from).toBe(base.state);
    expect(type).toBe(event.type);
    const last = base.attempts[base.attempts.length - 1];
    const because =
      !LEGAL[base.state].includes(to as OperationState) ||
      (event.type === 'renew' && base.lease === null) ||
      (event.type === 'attempt_started' && base.state !== 'pending') ||
      (event.type === 'attempt_finished' && (base.state !== 'in_flight' || last === undefined || last.finishedAt !== null)) ||
      // only the owner of the open last attempt closes it as never sent
      (event.type === 'never_sent' && (last?.id !== event.attemptId || last.finishedAt !== null || last.owner !== owner)) ||
      // DESIGN §2: only an ambiguous record is settled by a lookup or a same-key resend …
      (SETTLING.has(event.type) && base.state !== 'ambiguous') ||
      (event.type === 'lookup_unknown' && base.state !== 'ambiguous') ||
      // … a record a final answer to a resend left ambiguous (a key conflict, or a terminal answer after
      // an attempt that may have taken effect) is never resent (reconciled, or a person) …
      (event.type === 'resend_after_ambiguous' && base.state === 'ambiguous' && (last?.class === 'conflict' || last?.class === 'terminal')) ||
      // … and a terminal record takes nothing but evidence (and a lease release).
      (TERMINAL.has(base.state) && event.type !== 'evidence' && event.type !== 'release');
    expect(because, `refused ${from} -> ${to} on ${type} without a reason`).toBe(true);
    return undefined;
  }
  expect(LEGAL[base.state], `${base.state} -> ${next.state} on ${event.type}`).toContain(next.state);
  if (base.state === 'pending' && next.state === 'ambiguous') expect(event.type === 'cancel' || (event.type === 'evidence' && event.reopen === true), event.type).toBe(true);
  // a pending record is cancelled only when no attempt may have been delivered since the last "absent"
  if (event.type === 'cancel' && base.state === 'pending') expect(next.state).toBe(mayBeDelivered(base) ? 'ambiguous' : 'cancelled');
  // nothing goes back to pending (cleared for a send) past a late success, except for a same-key
  // resend (a deduplicating provider answers it with the original outcome)
  if (next.state === 'pending' && base.state !== 'pending' && event.type !== 'resend_after_ambiguous') {
    const lateSuccess = base.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith('late success'));
    expect(lateSuccess, `${base.state} -> pending on ${event.type} past a late success`).toBe(false);
  }
  if (event.type === 'evidence') expect(next.state).toBe(event.reopen === true && base.state === 'pending' ? 'ambiguous' : base.state);
  // ambiguous -> failed: only a settled "absent" after a key conflict on a resend, never past a late success
  if (base.state === 'ambiguous' && next.state === 'failed') {
    expect(event.type === 'lookup_absent' && base.attempts.at(-1)?.class === 'conflict', `ambiguous -> failed on ${event.type}`).toBe(true);
    expect(base.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith('late success')), 'ambiguous -> failed past a late success').toBe(false);
    expect(next.error?.code).toBe('IDEMPOTENCY_CONFLICT');
  }
  expect(next.generation).toBe(base.generation + 1);
  for (const field of ['id', 'key', 'keySource', 'fingerprint', 'tenant', 'action', 'ref', 'createdAt'] as const) {
    expect(next[field], field).toEqual(base[field]);
  }
  // expiry moves only when the record finishes, to no less than the retention from then
  const retention = base.expiresAt - base.createdAt;
  if (TERMINAL.has(next.state) && !TERMINAL.has(base.state)) expect(next.expiresAt).toBe(Math.max(base.expiresAt, now + retention));
  else expect(next.expiresAt, 'expiresAt').toBe(base.expiresAt);
  expect(next.evidence.slice(0, base.evidence.length)).toEqual(base.evidence); // evidence is only ever appended
  expect(next.attempts.slice(0, Math.max(0, base.attempts.length - 1))).toEqual(base.attempts.slice(0, -1)); // earlier attempts kept
  return next;
}

/**
 * Written apart from record.ts: a superseded owner's late success (never settled by an "absent"),
 * or a late ambiguous end or an attempt that may have landed (unfinished, ambiguous, 409) with no
 * later settled "absent" lookup.
 */
function mayBeDelivered(rec: OperationRecord): boolean {
  if (rec.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith('late success'))) return true;
  const lateAmbiguous = rec.evidence.filter((e) => e.kind === 'late_response' && e.detail.startsWith('late ambiguous'));
  const lastLate = lateAmbiguous[lateAmbiguous.length - 1];
  if (lastLate !== undefined && !rec.evidence.some((e) => e.kind === 'lookup' && /^absent:/.test(e.detail) && e.generation > lastLate.generation)) return true;
  const landed = rec.attempts.filter((a) => a.finishedAt === null || a.class === 'ambiguous' || a.class === 'success' || a.class === 'terminal' || a.class === 'conflict' || (a.class === 'retryable' && a.status === 409));
  const last = landed[landed.length - 1];
  if (last === undefined) return false;
  return !rec.evidence.some((e) => e.kind === 'lookup' && /^absent:/.test(e.detail) && e.generation > last.generation);
}

/** Invariants of any record a store holds. */
function checkRecord(rec: OperationRecord): void {
  rec.attempts.forEach((a, i) => expect(a.number).toBe(i + 1));
  const last = rec.attempts[rec.attempts.length - 1];
  if (rec.state === 'in_flight') expect(last?.finishedAt, 'in_flight has an open attempt').toBeNull();
  if (isTerminal(rec.state)) expect(rec.lease, 'a terminal record holds no lease').toBeNull();
  if (rec.state === 'succeeded') expect(rec.result, 'succeeded has a result').not.toBeNull();
  if (rec.state === 'cancelled') expect(rec.cancelRequestedAt).not.toBeNull();
}

type Step =
  | { op: 'claim'; owner: Owner }
  | { op: 'read'; owner: Owner }
  | { op: 'write'; owner: Owner; event: EventSpec }
  | { op: 'tick'; ms: number };

const ownerArb = fc.constantFrom(...OWNERS);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ op: fc.constant('claim' as const), owner: ownerArb }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('read' as const), owner: ownerArb }) },
  { weight: 8, arbitrary: fc.record({ op: fc.constant('write' as const), owner: ownerArb, event: eventArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 2 * LEASE_MS }) }) },
);

/**
 * Invariants beyond the transition table, checked by the strict properties below: `terminalOutcome`, a terminal record's result and error never change;
 * `settleOnlyAmbiguous`, the events that settle an ambiguity (lookup found / absent, resend
 * with the same key) apply only to an `ambiguous` record, as the edges of DESIGN §2 say.
 */
interface Strict {
  terminalOutcome?: boolean;
  settleOnlyAmbiguous?: boolean;
}

const SETTLING: ReadonlySet<RecordEvent['type']> = new Set(['lookup_found', 'lookup_absent', 'resend_after_ambiguous']);
const TERMINAL: ReadonlySet<OperationState> = new Set(['succeeded', 'failed', 'cancelled']);

/** Runs the steps; returns the terminal state the record reached, if any. */
async function runRawActors(store: OnceStore, steps: Step[], strict: Strict = {}): Promise<OperationState | undefined> {
  let now = T0;
  let mints = 0;
  let firstKey: string | undefined;
  let stored: OperationRecord | undefined; // what the store must hold
  let frozen: OperationRecord | undefined; // the record when it first became terminal
  const copies = new Map<Owner, OperationRecord>();
  const id = claimRecord('x', 'x', now).id;
  for (const step of steps) {
    now += 1;
    if (step.op === 'tick') now += step.ms;
    if (step.op === 'claim') {
      const { created, record } = await store.claim(claimRecord(step.owner, `key-${++mints}`, now));
      expect(created).toBe(stored === undefined);
      firstKey ??= record.key;
      expect(record.key, 'never a second key').toBe(firstKey);
      if (created) stored = record;
      copies.set(step.owner, record);
    }
    if (step.op === 'read') {
      const record = await store.get(id);
      if (record !== undefined) copies.set(step.owner, record);
    }
    if (step.op === 'write') {
      const base = copies.get(step.owner);
      if (base === undefined) continue;
      const next = checkApply(base, toEvent(step.event, step.owner, now, base), now, step.owner);
      if (next === undefined) continue;
      if (strict.settleOnlyAmbiguous === true && SETTLING.has(step.event.type)) {
        expect(base.state, `${step.event.type} settles an ambiguity`).toBe('ambiguous');
      }
      const before = stored;
      const res = await store.compareAndSet(id, base.generation, next);
      expect(res.ok, `CAS from generation ${base.generation} onto ${before?.generation}`).toBe(base.generation === before?.generation);
      if (res.ok) {
        stored = next;
        copies.set(step.owner, next);
      } else {
        expect(res.current).toEqual(before); // a stale write changes nothing and reports what is there
      }
    }
    const actual = await store.get(id);
    expect(actual).toEqual(stored);
    if (actual === undefined) continue;
    checkRecord(actual);
    expect(actual.key).toBe(firstKey);
    if (frozen !== undefined) {
      expect(actual.state, 'a terminal state never changes').toBe(frozen.state);
      if (strict.terminalOutcome === true) {
        expect(actual.result, 'a terminal result never changes').toEqual(frozen.result);
        expect(actual.error, 'a terminal error never changes').toEqual(frozen.error);
      }
    } else if (isTerminal(actual.state)) {
      frozen = actual;
    }
  }
  return frozen?.state;
}

const stepsArb = fc.array(stepArb, { minLength: 1, maxLength: 60 }).map((steps) => [{ op: 'claim', owner: 'A' } as Step, ...steps]);

describe('state machine: raw owners with stale copies, any interleaving of reads and writes', () => {
  it('memory store: legal states only, stale generations never write, one key, generations grow, terminal state stays', async () => {
    // Review: a same-key resend refused on a record a key conflict on a resend left ambiguous (39d05f8's
    // guard) is a refusal with a reason; the property's random runs seldom reach it: pinned here.
    const counterexamples: [Step[]][] = [
      [[
        { op: 'claim', owner: 'A' },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: 'a-1' } },
        { op: 'write', owner: 'A', event: { type: 'attempt_finished', class: 'ambiguous', status: null, reason: 'ambiguous', result: null } },
        { op: 'write', owner: 'A', event: { type: 'resend_after_ambiguous', detail: 'dedupes' } },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: 'a-2' } },
        { op: 'write', owner: 'A', event: { type: 'attempt_finished', class: 'conflict', status: null, reason: 'conflict', result: null } },
        { op: 'write', owner: 'A', event: { type: 'resend_after_ambiguous', detail: 'dedupes' } },
        { op: 'write', owner: 'A', event: { type: 'lookup_absent', detail: 'absent' } },
      ]],
      // CI (seed 1043787112, SQLite): a terminal answer that leaves the record ambiguous (a superseded
      // owner's late success before it, 815f0c4's `unsettledBefore`) refuses a same-key resend, as a
      // key conflict on a resend does: a refusal with a reason the oracle did not know.
      [[
        { op: 'claim', owner: 'A' },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: '00000000-0000-1000-8000-000000000000' } },
        { op: 'claim', owner: 'C' },
        { op: 'write', owner: 'C', event: { type: 'evidence', kind: 'late_response', detail: 'late success outcome (status 201) from a superseded owner', status: 201, reopen: true } },
        { op: 'write', owner: 'C', event: { type: 'attempt_finished', class: 'terminal', status: null, reason: 'terminal', result: null } },
        { op: 'write', owner: 'C', event: { type: 'resend_after_ambiguous', detail: 'dedupes' } },
      ]],
    ];
    const endings = new Map<OperationState | undefined, number>();
    await fc.assert(
      fc.asyncProperty(stepsArb, async (steps) => {
        const store = memoryStore();
        const ending = await runRawActors(store, steps);
        endings.set(ending, (endings.get(ending) ?? 0) + 1);
        await store.close();
      }),
      { numRuns: 300, examples: counterexamples },
    );
    // the runs reach the endings: not a vacuous pass
    expect(endings.get('succeeded')).toBeGreaterThan(0);
    expect(endings.get('cancelled')).toBeGreaterThan(0);
    expect(endings.get(undefined)).toBeGreaterThan(0);
  });

  it('SQLite store: the same', async () => {
    await fc.assert(
      fc.asyncProperty(stepsArb, async (steps) => {
        const db = new Database(':memory:');
        const store = sqliteStore({ path: ':memory:', database: db });
        try {
          await runRawActors(store, steps);
        } finally {
          await store.close();
          db.close();
        }
      }),
      { numRuns: 100 },
    );
  });

  // Regression (found by this property): a terminal record once took lookup_found / stopped and
  // changed its result or error. The first example is the shrunk counterexample.
  it("strict: a terminal record's result and error never change either", async () => {
    const r2 = { kind: 'response' as const, source: 'lookup' as const, status: 200, statusText: '', headers: [], body: '', bodyTruncated: false };
    const counterexamples: [Step[]][] = [
      [[
        { op: 'claim', owner: 'A' },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: 'a-1' } },
        { op: 'write', owner: 'A', event: { type: 'attempt_finished', class: 'success', status: 201, reason: 'status 201', result: { ...r2, source: 'attempt', status: 201 } } },
        { op: 'write', owner: 'A', event: { type: 'lookup_found', result: r2, detail: 'found' } },
      ]],
    ];
    await fc.assert(
      fc.asyncProperty(stepsArb, async (steps) => {
        const store = memoryStore();
        await runRawActors(store, steps, { terminalOutcome: true });
        await store.close();
      }),
      { numRuns: 300, examples: counterexamples },
    );
  });

  // Regression (found by this property): lookup_absent on an in_flight record once reopened it
  // for a second attempt with no reconciliation. The example is that counterexample.
  it('strict: only an ambiguous record can be settled by a lookup or a same-key resend', async () => {
    const counterexamples: [Step[]][] = [
      [[
        { op: 'claim', owner: 'A' },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: 'a-1' } },
        { op: 'write', owner: 'A', event: { type: 'lookup_absent', detail: 'absent' } },
        { op: 'write', owner: 'A', event: { type: 'attempt_started', attemptId: 'a-2' } },
      ]],
    ];
    await fc.assert(
      fc.asyncProperty(stepsArb, async (steps) => {
        const store = memoryStore();
        await runRawActors(store, steps, { settleOnlyAmbiguous: true });
        await store.close();
      }),
      { numRuns: 300, examples: counterexamples },
    );
  });
});

// ---------------------------------------------------------------------------------------------

type ActorStep = { op: 'acquire' } | { op: 'commit'; event: EventSpec } | { op: 'cancel' } | { op: 'sleep'; ms: number };

interface Write {
  writer: string;
  before: OperationRecord;
  after: OperationRecord;
}

/**
 * A store whose every call runs when the scheduler says, and that logs accepted writes
 * with their writer. The memory store's methods run synchronously when called, so the
 * shadow copy `history.current` is exactly what the store holds at that moment.
 */
function scheduledStore(inner: OnceStore, s: fc.Scheduler, writer: string, history: { current: OperationRecord; log: Write[] }): OnceStore {
  return {
    name: `${inner.name}/${writer}`,
    claim: s.scheduleFunction((r: OperationRecord) => inner.claim(r)),
    get: s.scheduleFunction((id: string) => inner.get(id)),
    compareAndSet: s.scheduleFunction((id: string, expected: number, next: OperationRecord) => {
      const before = history.current;
      const accepted = before.generation === expected;
      const result = inner.compareAndSet(id, expected, next); // runs now
      if (accepted) {
        history.log.push({ writer, before, after: next });
        history.current = next;
      }
      return result.then((res) => {
        expect(res.ok, `CAS from ${expected} onto ${before.generation}`).toBe(accepted);
        return res;
      });
    }),
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
}

/** Equal after a canonical JSON rendering (key order does not matter). */
function same(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** Checks one accepted write against the record it replaced. */
function checkWrite(w: Write, key: string): void {
  const { before, after, writer } = w;
  expect(after.generation).toBe(before.generation + 1);
  expect(after.key).toBe(key);
  expect(LEGAL[before.state]).toContain(after.state);
  if (isTerminal(before.state)) {
    expect(after.state).toBe(before.state);
    expect(after.result).toEqual(before.result);
  }
  checkRecord(after);
  const holder = before.lease?.owner === writer;
  const takeover = after.lease?.owner === writer && (before.lease === null || before.lease.expiresAt <= after.updatedAt);
  // a cancel or an evidence note: nothing else changes (pending may become cancelled, dropping its
  // lease, or be reopened to ambiguous by a late response)
  const core = (r: OperationRecord): unknown => {
    const { generation: _g, updatedAt: _u, evidence: _e, cancelRequestedAt: _c, state: _s, lease: _l, expiresAt: _x, ...rest } = r;
    return rest;
  };
  // expiry moves only when the record finishes (checked in full by checkApply)
  if (isTerminal(before.state) || !isTerminal(after.state)) expect(after.expiresAt).toBe(before.expiresAt);
  else expect(after.expiresAt).toBeGreaterThanOrEqual(before.expiresAt);
  const cancelled = before.state === 'pending' && after.state === 'cancelled';
  const reopened = before.state === 'pending' && after.state === 'ambiguous' && ['late_response', 'cancel'].includes(after.evidence.at(-1)?.kind ?? '');
  const note =
    same(core(before), core(after)) &&
    (after.state === before.state || cancelled || reopened) &&
    (same(after.lease, before.lease) || cancelled);
  // the owner of the open last attempt closing it as never sent, under another owner's lease: back to
  // pending (or still ambiguous), nothing else changes
  const opened = before.attempts.at(-1);
  const unsent =
    opened?.owner === writer &&
    opened.finishedAt === null &&
    same(after.attempts, [...before.attempts.slice(0, -1), { ...opened, finishedAt: after.updatedAt, class: 'not_sent', reason: after.attempts.at(-1)?.reason }]) &&
    same(after.lease, before.lease) &&
    (after.state === 'pending' || after.state === before.state);
  expect(holder || takeover || note || unsent, `${writer} wrote ${before.state} -> ${after.state} without holding the lease`).toBe(true);
}

const actorArb = fc.array(
  fc.oneof(
    { weight: 3, arbitrary: fc.constant<ActorStep>({ op: 'acquire' }) },
    { weight: 16, arbitrary: eventArb.map((event): ActorStep => ({ op: 'commit', event })) },
    { weight: 1, arbitrary: fc.constant<ActorStep>({ op: 'cancel' }) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 2 * LEASE_MS }).map((ms): ActorStep => ({ op: 'sleep', ms })) },
  ),
  { minLength: 1, maxLength: 14 },
);

describe('state machine: OwnedRecord owners and a canceller running concurrently', () => {
  it('every accepted write is one generation up, legal, by the lease holder (or a takeover, cancel or note), on the one key; terminal stays terminal', async () => {
    const reached = { succeeded: 0, failed: 0, cancelled: 0, takeover: 0 };
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(actorArb, { minLength: 2, maxLength: 3 }), async (s, scripts) => {
        const inner = memoryStore();
        let clock = T0;
        const now = (): number => clock++;
        const first = await inner.claim(claimRecord('A', 'the-key', now()));
        const id = first.record.id;
        const history = { current: first.record, log: [] as Write[] };

        const actor = async (name: string, script: ActorStep[], claimed?: OperationRecord): Promise<void> => {
          const store = scheduledStore(inner, s, name, history);
          // the claimer starts out holding the lease it claimed with
          let owned = claimed === undefined ? undefined : new OwnedRecord(claimed, store, name, now);
          for (const step of script) {
            try {
              if (step.op === 'sleep') clock += step.ms;
              if (step.op === 'acquire') {
                // as engine/acquire.ts: replay a terminal record, wait for a live lease, else take it
                const rec = await store.get(id);
                if (rec === undefined || isTerminal(rec.state)) continue;
                if (rec.lease !== null && rec.lease.owner !== name && rec.lease.expiresAt > now()) continue;
                const next = applyEvent(rec, { type: 'acquire', owner: name, leaseExpiresAt: now() + LEASE_MS }, now(), name);
                if ((await store.compareAndSet(id, rec.generation, next)).ok) owned = new OwnedRecord(next, store, name, now);
              }
              if (step.op === 'cancel') {
                // as client.cancel: recorded by CAS, without the lease
                const rec = await store.get(id);
                if (rec === undefined || isTerminal(rec.state)) continue;
                await store.compareAndSet(id, rec.generation, applyEvent(rec, { type: 'cancel' }, now(), name));
              }
              if (step.op === 'commit' && owned !== undefined) {
                const rec = await owned.commit(toEvent(step.event, name, now(), owned.rec));
                // as the engine: once it has stopped (lease released) or finished, it writes no more
                if (rec.lease?.owner !== name) owned = undefined;
              }
            } catch (error) {
              if (error instanceof LeaseLostError) owned = undefined;
              else if (!(error instanceof IllegalTransitionError) && !(isOnceError(error) && error.code === 'STORE_ERROR')) throw error;
            }
          }
        };

        const runs = scripts.map((script, i) => (i === 0 ? actor('A', script, first.record) : actor(`owner-${i}`, script)));
        await s.waitFor(Promise.all(runs));
        let previous = first.record;
        for (const w of history.log) {
          expect(w.before).toBe(previous); // the log is the store's history, in order
          checkWrite(w, 'the-key');
          previous = w.after;
        }
        expect(await inner.get(id)).toEqual(previous);
        for (const w of history.log) if (isTerminal(w.after.state) && !isTerminal(w.before.state)) reached[w.after.state as 'succeeded' | 'failed' | 'cancelled']++;
        if (history.log.some((w) => w.before.lease !== null && w.after.lease?.owner !== w.before.lease.owner && w.after.lease !== null)) reached.takeover++;
      }),
      { numRuns: 200 },
    );
    // the runs reach every ending and takeovers: not a vacuous pass
    // the runs reach the endings and takeovers: not a vacuous pass ('failed' is rarer and not required)
    expect(reached.succeeded).toBeGreaterThan(0);
    expect(reached.cancelled).toBeGreaterThan(0);
    expect(reached.takeover).toBeGreaterThan(0);
  });
});
