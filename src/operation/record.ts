/**
 * The operation record, its schema, and the one place that knows which state
 * transitions are legal (DESIGN §2). Every write goes through {@link applyEvent},
 * which bumps `generation`: the generation is the record's version and the
 * fencing token that every store's compare-and-set checks.
 *
 * @module
 */
import * as z from 'zod/mini';
import { StoreError } from '../errors.js';
import { issueText } from '../validation.js';
import { isExactRecord } from './record-shape.js';

/** Version of the persisted record layout. */
export const SCHEMA_VERSION = 1;

/**
 * The states of an operation (DESIGN §2). `succeeded`, `failed` and
 * `cancelled` are terminal: later calls replay them and never send.
 *
 * @example
 * ```ts
 * const state: OperationState | undefined = (await client.get({ action: 'create-order', ref: task.id }))?.state
 * if (state === 'ambiguous') await client.recover()
 * ```
 */
export type OperationState = 'pending' | 'in_flight' | 'ambiguous' | 'succeeded' | 'failed' | 'cancelled';

/**
 * Outcome classes recorded on attempts (the {@link OutcomeClass} values, as
 * stored).
 *
 * @example
 * ```ts
 * const classes: (RecordedClass | null)[] = record.attempts.map((a) => a.class) // null: outcome never seen
 * ```
 */
export type RecordedClass = 'success' | 'not_sent' | 'retryable' | 'ambiguous' | 'terminal' | 'conflict';

/** States that end an operation: replayed forever after, never sent again. */
export const TERMINAL_STATES: readonly OperationState[] = ['succeeded', 'failed', 'cancelled'];

/** True for `succeeded`, `failed` and `cancelled`. */
export function isTerminal(state: OperationState): boolean {
  return state === 'succeeded' || state === 'failed' || state === 'cancelled';
}

/**
 * Identity of one business intent: the same scope is the same operation, in
 * any process, after any restart.
 *
 * @example
 * ```ts
 * const scope: Scope = { tenant: 't1', action: 'create-order', ref: 'cart-8812' }
 * const record = await client.get(scope)
 * ```
 */
export interface Scope {
  /** whose operation it is; separates customers sharing one store */
  tenant: string;
  /** what kind of effect, e.g. `'create-order'`; selects the registered lookup */
  action: string;
  /** your stable id of this one intent, e.g. a task or cart id */
  ref: string;
}

/** The store id of a scope: unambiguous for any strings (no separator collisions). */
export function recordId(scope: Scope): string {
  return JSON.stringify([scope.tenant, scope.action, scope.ref]);
}

const stateSchema = z.enum(['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled']);
const classSchema = z.enum(['success', 'not_sent', 'retryable', 'ambiguous', 'terminal', 'conflict']);
const int = z.int().check(z.nonnegative());
const status = z.nullable(z.int());

const attemptSchema = z.object({
  id: z.string().check(z.minLength(1)),
  number: z.int().check(z.positive()),
  generation: int,
  owner: z.string(),
  startedAt: int,
  finishedAt: z.nullable(int),
  class: z.nullable(classSchema),
  status,
  reason: z.nullable(z.string()),
});

const evidenceSchema = z.object({
  at: int,
  kind: z.enum(['attempt', 'lookup', 'late_response', 'stale_write', 'takeover', 'cancel', 'stop']),
  generation: int,
  owner: z.string(),
  detail: z.string(),
  status,
});

const resultSchema = z.object({
  kind: z.enum(['response', 'value']),
  source: z.enum(['attempt', 'lookup']),
  status: z.int(),
  statusText: z.string(),
  headers: z.array(z.tuple([z.string(), z.string()])),
  /** base64 of the (possibly capped) body for responses; JSON text for values */
  body: z.string(),
  bodyTruncated: z.boolean(),
});

const recordSchema = z.object({
  schemaVersion: z.literal(SCHEMA_VERSION),
  id: z.string().check(z.minLength(1)),
  tenant: z.string(),
  action: z.string(),
  ref: z.string(),
  key: z.string().check(z.minLength(1)),
  keySource: z.enum(['minted', 'caller']),
  fingerprint: z.string().check(z.regex(/^[0-9a-f]{64}$/)),
  request: z.nullable(z.object({ method: z.string(), url: z.string() })),
  state: stateSchema,
  generation: int,
  lease: z.nullable(z.object({ owner: z.string(), expiresAt: int })),
  createdAt: int,
  updatedAt: int,
  expiresAt: int,
  attempts: z.array(attemptSchema),
  evidence: z.array(evidenceSchema),
  result: z.nullable(resultSchema),
  error: z.nullable(z.object({ code: z.string(), message: z.string() })),
  cancelRequestedAt: z.nullable(int),
});

/** @internal The record schema itself, for tests that hold the fast pre-check to it. */
export const RECORD_SCHEMA = recordSchema;

/**
 * One transport try. Numbered from 1; kept forever in the record.
 *
 * @example
 * ```ts
 * const last: AttemptRecord | undefined = record.attempts.at(-1)
 * if (last && last.finishedAt === null) console.log(`attempt ${last.number} by ${last.owner}: outcome never recorded`)
 * ```
 */
export type AttemptRecord = z.infer<typeof attemptSchema>;
/**
 * What was observed, kept and never used to overwrite a newer decision (a
 * late response after a takeover, a stale write, a lookup answer).
 *
 * @example
 * ```ts
 * const late: EvidenceRecord[] = record.evidence.filter((e) => e.kind === 'late_response')
 * ```
 */
export type EvidenceRecord = z.infer<typeof evidenceSchema>;
/**
 * The stored outcome that terminal records replay. `body` is base64 for a
 * response and JSON text for a `client.run()` value; it may be capped
 * (`bodyTruncated`).
 *
 * @example
 * ```ts
 * const result: ResultSnapshot | null = record.result
 * if (result?.source === 'lookup') console.log(`settled by a lookup: status ${result.status}`)
 * ```
 */
export type ResultSnapshot = z.infer<typeof resultSchema>;
/**
 * The durable record of one operation: what stores keep and `client.get()`
 * returns. Read it to inspect; only the engine writes it.
 *
 * @example
 * ```ts
 * const record: OperationRecord | undefined = await client.get({ action: 'create-order', ref: task.id })
 * console.log(record?.state, record?.attempts.length, record?.result?.status)
 * ```
 */
export type OperationRecord = z.infer<typeof recordSchema>;

/**
 * Validates a value read back from a store. A corrupt or foreign row is a
 * {@link StoreError}, never "absent": treating it as absent would re-send.
 */
export function parseRecord(raw: unknown, where: string): OperationRecord {
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch (cause) {
      throw new StoreError(`${where}: stored record is not valid JSON`, { cause });
    }
  }
  // Exactly a valid record (the common case) needs no zod pass; anything else gets the schema's verdict.
  if (isExactRecord(value, SCHEMA_VERSION)) return value;
  const parsed = recordSchema.safeParse(value, { error: issueText });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue === undefined ? '' : issue.path.join('.');
    throw new StoreError(`${where}: stored record is invalid at "${path}": ${issue?.message ?? 'unknown'}`, {
      cause: parsed.error,
    });
  }
  return parsed.data;
}

/** Input of {@link newRecord}. */
export interface NewRecordInput {
  scope: Scope;
  key: string;
  keySource: 'minted' | 'caller';
  fingerprint: string;
  request: { method: string; url: string } | null;
  owner: string;
  now: number;
  leaseMs: number;
  retentionMs: number;
}

/** A fresh `pending` record, leased to its creator, generation 1. */
export function newRecord(input: NewRecordInput): OperationRecord {
  return {
    schemaVersion: SCHEMA_VERSION,
    id: recordId(input.scope),
    tenant: input.scope.tenant,
    action: input.scope.action,
    ref: input.scope.ref,
    key: input.key,
    keySource: input.keySource,
    fingerprint: input.fingerprint,
    request: input.request,
    state: 'pending',
    generation: 1,
    lease: { owner: input.owner, expiresAt: input.now + input.leaseMs },
    createdAt: input.now,
    updatedAt: input.now,
    expiresAt: input.now + input.retentionMs,
    attempts: [],
    evidence: [],
    result: null,
    error: null,
    cancelRequestedAt: null,
  };
}

/** Everything that can happen to a record. */
export type RecordEvent =
  | { type: 'acquire'; owner: string; leaseExpiresAt: number }
  | { type: 'renew'; leaseExpiresAt: number }
  | { type: 'release' }
  | { type: 'attempt_started'; attemptId: string }
  | {
      type: 'attempt_finished';
      class: RecordedClass;
      status: number | null;
      reason: string;
      result: ResultSnapshot | null;
    }
  | { type: 'lookup_found'; result: ResultSnapshot; detail: string }
  | { type: 'lookup_absent'; detail: string }
  | { type: 'lookup_unknown'; detail: string }
  | { type: 'resend_after_ambiguous'; detail: string }
  | { type: 'stopped'; code: string; message: string }
  | { type: 'cancel' }
  | { type: 'evidence'; kind: EvidenceRecord['kind']; detail: string; status: number | null };

const NEXT: Readonly<Record<OperationState, readonly OperationState[]>> = {
  pending: ['pending', 'in_flight', 'cancelled'],
  in_flight: ['in_flight', 'succeeded', 'failed', 'pending', 'ambiguous'],
  ambiguous: ['ambiguous', 'succeeded', 'pending', 'cancelled'],
  succeeded: ['succeeded'],
  failed: ['failed'],
  cancelled: ['cancelled'],
};

const LIVE: readonly OperationState[] = ['pending', 'in_flight', 'ambiguous'];

/**
 * The states each event may be applied in, where that is narrower than "any": a send starts only
 * from `pending` (never a second attempt while one may be on the wire); only an open attempt can
 * finish; only an `ambiguous` record is settled by a lookup or a same-key resend; and a terminal
 * record takes nothing but evidence, so its result and error never change.
 */
const ALLOWED_FROM: Partial<Record<RecordEvent['type'], readonly OperationState[]>> = {
  acquire: LIVE,
  renew: LIVE,
  attempt_started: ['pending'],
  attempt_finished: ['in_flight'],
  lookup_found: ['ambiguous'],
  lookup_absent: ['ambiguous'],
  lookup_unknown: ['ambiguous'],
  resend_after_ambiguous: ['ambiguous'],
  stopped: LIVE,
  cancel: LIVE,
};

/** Thrown for a transition the state machine does not allow: always a bug. */
export class IllegalTransitionError extends Error {
  constructor(from: OperationState, to: OperationState, event: RecordEvent['type']) {
    super(`oncefetch bug: illegal transition ${from} -> ${to} on ${event}`);
    this.name = 'IllegalTransitionError';
  }
}

function targetState(record: OperationRecord, event: RecordEvent): OperationState {
  switch (event.type) {
    case 'acquire':
      // A new owner cannot know whether an in-flight attempt reached the provider.
      return record.state === 'in_flight' ? 'ambiguous' : record.state;
    case 'attempt_started':
      return 'in_flight';
    case 'attempt_finished':
      switch (event.class) {
        case 'success':
          return 'succeeded';
        case 'terminal':
        case 'conflict':
          return 'failed';
        case 'not_sent':
        case 'retryable':
          return 'pending';
        case 'ambiguous':
          return 'ambiguous';
      }
      break;
    case 'lookup_found':
      return 'succeeded';
    case 'lookup_absent':
      return record.cancelRequestedAt === null ? 'pending' : 'cancelled';
    case 'resend_after_ambiguous':
      return 'pending';
    case 'cancel':
      return record.state === 'pending' ? 'cancelled' : record.state;
    case 'renew':
    case 'release':
    case 'lookup_unknown':
    case 'stopped':
    case 'evidence':
      return record.state;
  }
}

/**
 * Applies one event and returns the next record (the input is not mutated).
 * The result has `generation + 1`: write it with
 * `store.compareAndSet(id, record.generation, next)`.
 *
 * @throws IllegalTransitionError when the event is not legal in the current state.
 */
export function applyEvent(record: OperationRecord, event: RecordEvent, now: number, owner: string): OperationRecord {
  const to = targetState(record, event);
  if (!NEXT[record.state].includes(to)) throw new IllegalTransitionError(record.state, to, event.type);
  const from = ALLOWED_FROM[event.type];
  if (from !== undefined && !from.includes(record.state)) throw new IllegalTransitionError(record.state, to, event.type);
  const next: OperationRecord = {
    ...record,
    state: to,
    generation: record.generation + 1,
    updatedAt: now,
    attempts: record.attempts,
    evidence: record.evidence,
  };
  const note = (kind: EvidenceRecord['kind'], detail: string, status: number | null = null): void => {
    next.evidence = [...next.evidence, { at: now, kind, generation: next.generation, owner, detail, status }];
  };
  switch (event.type) {
    case 'acquire':
      next.lease = { owner: event.owner, expiresAt: event.leaseExpiresAt };
      if (record.lease !== null && record.lease.owner !== event.owner) {
        note('takeover', `lease taken over from ${record.lease.owner} (state was ${record.state})`);
      }
      break;
    case 'renew':
      if (next.lease === null) throw new IllegalTransitionError(record.state, to, event.type);
      next.lease = { owner: next.lease.owner, expiresAt: event.leaseExpiresAt };
      break;
    case 'release':
      next.lease = null;
      break;
    case 'attempt_started':
      next.attempts = [
        ...record.attempts,
        {
          id: event.attemptId,
          number: record.attempts.length + 1,
          generation: next.generation,
          owner,
          startedAt: now,
          finishedAt: null,
          class: null,
          status: null,
          reason: null,
        },
      ];
      next.error = null;
      break;
    case 'attempt_finished': {
      const last = record.attempts[record.attempts.length - 1];
      if (last === undefined || last.finishedAt !== null) throw new IllegalTransitionError(record.state, to, event.type);
      next.attempts = [
        ...record.attempts.slice(0, -1),
        { ...last, finishedAt: now, class: event.class, status: event.status, reason: event.reason },
      ];
      if (event.result !== null) next.result = event.result;
      if (event.class === 'conflict') {
        next.error = { code: 'IDEMPOTENCY_CONFLICT', message: `provider reported key reuse: ${event.reason}` };
      } else if (event.class === 'terminal' && event.result === null) {
        next.error = { code: 'OPERATION_FAILED', message: event.reason };
      }
      break;
    }
    case 'lookup_found':
      next.result = event.result;
      note('lookup', `found: ${event.detail}`, event.result.status);
      break;
    case 'lookup_absent':
      note('lookup', `absent: ${event.detail}`);
      break;
    case 'lookup_unknown':
      note('lookup', `unknown: ${event.detail}`);
      break;
    case 'resend_after_ambiguous':
      note('lookup', `resend with the same key: ${event.detail}`);
      break;
    case 'stopped':
      // The call gave up; release the lease so another call or recover() can resume at once.
      next.error = { code: event.code, message: event.message };
      next.lease = null;
      note('stop', `${event.code}: ${event.message}`);
      break;
    case 'cancel':
      next.cancelRequestedAt = record.cancelRequestedAt ?? now;
      note('cancel', record.state === 'pending' ? 'cancelled before any send' : `cancel requested while ${record.state}`);
      break;
    case 'evidence':
      note(event.kind, event.detail, event.status);
      break;
  }
  if (isTerminal(to)) next.lease = null;
  return next;
}
