/**
 * The operation record, its schema, and the one place that knows which state
 * transitions are legal (DESIGN §2). Every write goes through {@link applyEvent},
 * which bumps `generation`: the generation is the record's version and the
 * fencing token that every store's compare-and-set checks.
 *
 * @module
 */
import { StoreError } from '../errors.js';
import * as s from '../schema.js';

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

/** The scope a record id names (the inverse of {@link recordId}), or undefined for an id that names none. */
export function scopeOfId(id: string): Scope | undefined {
  try {
    const parts: unknown = JSON.parse(id);
    if (Array.isArray(parts) && parts.length === 3 && parts.every((p) => typeof p === 'string')) {
      const [tenant, action, ref] = parts as [string, string, string];
      return { tenant, action, ref };
    }
  } catch {
    // not JSON: not an id oncefetch wrote
  }
  return undefined;
}

const STATES: readonly OperationState[] = ['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled'];
const CLASSES: readonly RecordedClass[] = ['success', 'not_sent', 'retryable', 'ambiguous', 'terminal', 'conflict'];
const EVIDENCE_KINDS: readonly EvidenceRecord['kind'][] = ['attempt', 'lookup', 'late_response', 'stale_write', 'takeover', 'cancel', 'stop'];

/**
 * One transport try. Numbered from 1; kept forever in the record.
 *
 * @example
 * ```ts
 * const last: AttemptRecord | undefined = record.attempts.at(-1)
 * if (last && last.finishedAt === null) console.log(`attempt ${last.number} by ${last.owner}: outcome never recorded`)
 * ```
 */
export interface AttemptRecord {
  /** unique id of this try */
  id: string;
  /** 1 for the first try of the operation, across calls and owners */
  number: number;
  /** record generation that opened it */
  generation: number;
  /** lease owner that sent it */
  owner: string;
  /** epoch ms, before the request was handed to the transport */
  startedAt: number;
  /** epoch ms; null while its outcome is unknown */
  finishedAt: number | null;
  /** outcome class; null while unknown */
  class: RecordedClass | null;
  /** HTTP status, when a response arrived */
  status: number | null;
  /** why it was classified so, e.g. `status 503` or `ECONNRESET` */
  reason: string | null;
}

/**
 * What was observed, kept and never used to overwrite a newer decision (a
 * late response after a takeover, a stale write, a lookup answer).
 *
 * @example
 * ```ts
 * const late: EvidenceRecord[] = record.evidence.filter((e) => e.kind === 'late_response')
 * ```
 */
export interface EvidenceRecord {
  /** epoch ms */
  at: number;
  kind: 'attempt' | 'lookup' | 'late_response' | 'stale_write' | 'takeover' | 'cancel' | 'stop';
  /** record generation it was written with */
  generation: number;
  /** who observed it */
  owner: string;
  detail: string;
  /** HTTP status, when there was one */
  status: number | null;
}

/**
 * The stored outcome that terminal records replay. `body` is base64 for a
 * response and JSON text for a `client.run()` value; it may be capped
 * (`bodyTruncated`): a response body cut, a failed run's message cut, a run's
 * value not stored at all (the body then says its size, and is not JSON).
 *
 * @example
 * ```ts
 * const result: ResultSnapshot | null = record.result
 * if (result?.source === 'lookup') console.log(`settled by a lookup: status ${result.status}`)
 * ```
 */
export interface ResultSnapshot {
  kind: 'response' | 'value';
  /** the attempt's own response, or what a lookup found */
  source: 'attempt' | 'lookup';
  status: number;
  statusText: string;
  /** stored headers, sensitive ones left out */
  headers: Array<[string, string]>;
  /** base64 of the (possibly capped) body for responses; JSON text for values */
  body: string;
  bodyTruncated: boolean;
}

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
export interface OperationRecord {
  /** version of the persisted layout (1) */
  schemaVersion: typeof SCHEMA_VERSION;
  /** store id of the scope: the JSON array `[tenant, action, ref]` */
  id: string;
  tenant: string;
  action: string;
  ref: string;
  /** the idempotency key every attempt carries */
  key: string;
  /** minted by oncefetch, or given by the caller (its key header, or `key` in `client.run()`) */
  keySource: 'minted' | 'caller';
  /** SHA-256 (hex) of the request (method, URL, canonical body), or of `client.run()`'s canonical input */
  fingerprint: string;
  /** method and URL as stored: origin and path only (a query string shows as `?…`); null for `client.run()` */
  request: { method: string; url: string } | null;
  state: OperationState;
  /**
   * version and fencing token, bumped by one by every write; a new record starts at a random
   * generation (a large number), so a record deleted and claimed afresh does not repeat the
   * generations of its earlier life (short of 32 random bits repeating)
   */
  generation: number;
  /** who may write it, until when (epoch ms); null when nobody holds it */
  lease: { owner: string; expiresAt: number } | null;
  createdAt: number;
  updatedAt: number;
  /**
   * epoch ms after which `purge` may delete it (once terminal): `retentionMs` after it was
   * created, moved to `retentionMs` after it finished when it finished later than that
   */
  expiresAt: number;
  attempts: AttemptRecord[];
  evidence: EvidenceRecord[];
  /** what terminal calls replay */
  result: ResultSnapshot | null;
  /** why it stopped or failed */
  error: { code: string; message: string } | null;
  /** epoch ms of the first cancel request */
  cancelRequestedAt: number | null;
}

const nat = s.int(0);
const status = s.nullable(s.int());

/** The record schema: the definition of a valid record (held to a zod oracle in test/unit/schema-oracle.test.ts). */
export const RECORD_CHECK: s.Check<OperationRecord> = s.obj({
  schemaVersion: s.oneOf([SCHEMA_VERSION]),
  id: s.str(1),
  tenant: s.str(),
  action: s.str(),
  ref: s.str(),
  key: s.str(1),
  keySource: s.oneOf(['minted', 'caller']),
  fingerprint: s.str(0, /^[0-9a-f]{64}$/),
  request: s.nullable(s.obj({ method: s.str(), url: s.str() })),
  state: s.oneOf(STATES),
  generation: nat,
  lease: s.nullable(s.obj({ owner: s.str(), expiresAt: nat })),
  createdAt: nat,
  updatedAt: nat,
  expiresAt: nat,
  attempts: s.arr(
    s.obj({
      id: s.str(1),
      number: s.int(1),
      generation: nat,
      owner: s.str(),
      startedAt: nat,
      finishedAt: s.nullable(nat),
      class: s.nullable(s.oneOf(CLASSES)),
      status,
      reason: s.nullable(s.str()),
    }),
  ),
  evidence: s.arr(s.obj({ at: nat, kind: s.oneOf(EVIDENCE_KINDS), generation: nat, owner: s.str(), detail: s.str(), status })),
  result: s.nullable(
    s.obj({
      kind: s.oneOf(['response', 'value']),
      source: s.oneOf(['attempt', 'lookup']),
      status: s.int(),
      statusText: s.str(),
      headers: s.arr(s.stringPair),
      body: s.str(),
      bodyTruncated: s.bool,
    }),
  ),
  error: s.nullable(s.obj({ code: s.str(), message: s.str() })),
  cancelRequestedAt: s.nullable(nat),
});

/** The exact-shape pre-check, once a Node entry point has installed it ({@link usePrecheck}). */
let precheck: ((value: unknown, schemaVersion: number) => value is OperationRecord) | undefined;

/**
 * Puts a pre-check in front of the record schema: `true` must mean "exactly a
 * valid record" (the schema would return it unchanged), `false` "ask the
 * schema". Node's entry points install `isExactRecord` (record-shape.ts), which
 * saves about a microsecond per record on the hot path; the browser entry does
 * not load it (2 kB minified, against IndexedDB reads of a millisecond).
 *
 * @internal
 */
export function usePrecheck(check: (value: unknown, schemaVersion: number) => value is OperationRecord): void {
  precheck = check;
}

/** The installed pre-check, for tests. @internal */
export function installedPrecheck(): typeof precheck {
  return precheck;
}

/**
 * Validates a value read back from a store (the record's JSON text, or the parsed value) against
 * the record schema and returns the record. A corrupt or foreign row is a {@link StoreError}, never
 * "absent": treating it as absent would re-send. A custom store calls it on every read, then checks
 * that the record's `id` is the id it was stored under and that `JSON.stringify([tenant, action,
 * ref])` equals that id (the contract suite checks both).
 *
 * @example
 * ```ts
 * const text = await redis.hget(`oncefetch:rec:${id}`, 'data')
 * const record = text === null ? undefined : parseRecord(text, `redis get ${id}`)
 * ```
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
  // Exactly a valid record (the common case) skips the generic checks; anything else gets the schema's verdict.
  if (precheck?.(value, SCHEMA_VERSION) === true) return value;
  const parsed = RECORD_CHECK(value);
  // A newer oncefetch's record (a rollback, or an old process in a rolling deploy): say so, not "invalid".
  const version = parsed instanceof s.Issue && s.isPlainObject(value) ? value['schemaVersion'] : undefined;
  if (typeof version === 'number' && Number.isSafeInteger(version) && version > SCHEMA_VERSION) {
    throw new StoreError(
      `${where}: stored record has schema version ${version}, written by a newer oncefetch (this one reads ${SCHEMA_VERSION}): upgrade oncefetch`,
    );
  }
  if (parsed instanceof s.Issue) throw new StoreError(`${where}: stored record is invalid at "${parsed.path.join('.')}": ${parsed.message}`);
  return parsed;
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

/**
 * The generation a new record starts at: a random multiple of 2^20, plus 1 (at most about 2^52, so
 * 2^52 writes more stay safe integers). Like TCP's initial sequence number: a record deleted and
 * claimed afresh (a row deleted by hand, a browser's site data cleared) does not start again where
 * its earlier life did, so a stale owner's compare-and-set at a generation of that life matches
 * nothing on the new one, short of 32 random bits repeating. Within one life the generation still
 * goes up by one per write, and the low 20 bits count those writes (from 1).
 */
export function firstGeneration(): number {
  if (generationsLeft === 0) {
    globalThis.crypto.getRandomValues(generationPool);
    generationsLeft = generationPool.length;
  }
  return generationPool[--generationsLeft]! * 2 ** 20 + 1;
}

/**
 * Random words for {@link firstGeneration}, drawn 256 at a time: one `getRandomValues` call costs
 * about as much for 1 KiB as for 4 bytes (7 µs in Node 20 here, a tenth of a call's CPU), as
 * `randomUUID()` buffers its own. Each word is used once.
 */
const generationPool = new Uint32Array(256);
let generationsLeft = 0;

/** A fresh `pending` record, leased to its creator, at {@link firstGeneration}. */
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
    generation: firstGeneration(),
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
      /**
       * A late outcome (see late-call.ts): the numbers of the earlier attempts whose call this is, the
       * first the one whose request it answers, the others attempts that only waited for it and sent
       * nothing. Their outcome is this one: a terminal answer then settles them, and is no refusal of
       * a resend that says nothing of them (see `unsettledBefore`).
       * @default undefined (the attempt's own request)
       */
      answers?: readonly number[] | undefined;
    }
  | {
      /**
       * The owner that opened attempt `attemptId` never handed it to the transport (its call gave up
       * before the send): closed `not_sent`, under a newer owner's lease too (a takeover read it as
       * possibly sent). Only that owner can know it, so only it writes this, for its open last attempt.
       */
      type: 'never_sent';
      attemptId: string;
      reason: string;
    }
  | {
      /**
       * Settles an `ambiguous` record as `succeeded` with `result`: a lookup's finding, or (`result.source`
       * 'attempt') the success of a call's own attempt whose write had lost the lease to another owner.
       */
      type: 'lookup_found';
      result: ResultSnapshot;
      detail: string;
    }
  | {
      type: 'lookup_absent';
      detail: string;
      /**
       * false when the lookup was asked before `settleMs` had passed (trusted at once only because
       * the provider dedupes): enough for a same-key resend, no proof that nothing was delivered.
       * @default true
       */
      settled?: boolean;
      /**
       * the record's generation as the asker read it before asking: a superseded owner's late
       * response written after that (a higher generation) makes this "absent" too early to settle
       * anything, whoever writes it. Generations, not times: the two owners' clocks may differ.
       * @default undefined (not compared)
       */
      askedGeneration?: number;
    }
  | { type: 'lookup_unknown'; detail: string }
  | { type: 'resend_after_ambiguous'; detail: string }
  | {
      /**
       * A `pending` record that only a provider's dedupe cleared for a send ({@link resendNeedsDedupe}),
       * met by a call that does not trust it (no `providerDedupes`, or the key past the provider's
       * retention): back to `ambiguous`, to be reconciled before any send. Noted as a `stop`.
       */
      type: 'reconcile_first';
      detail: string;
    }
  | { type: 'stopped'; code: string; message: string }
  | { type: 'cancel' }
  | {
      type: 'evidence';
      kind: EvidenceRecord['kind'];
      detail: string;
      status: number | null;
      /**
       * The evidence shows that an earlier attempt reached the provider (a superseded owner's late
       * success or ambiguous outcome): a `pending` record, which a lookup or a retryable outcome had
       * cleared for a resend, goes back to `ambiguous`, to be reconciled before any send.
       */
      reopen?: boolean;
    };

const NEXT: Readonly<Record<OperationState, readonly OperationState[]>> = {
  pending: ['pending', 'in_flight', 'ambiguous', 'cancelled'],
  in_flight: ['in_flight', 'succeeded', 'failed', 'pending', 'ambiguous'],
  // (failed: only a provider's key conflict on a resend, which a settled "absent" left standing)
  ambiguous: ['ambiguous', 'succeeded', 'pending', 'cancelled', 'failed'],
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
  never_sent: LIVE,
  lookup_found: ['ambiguous'],
  lookup_absent: ['ambiguous'],
  lookup_unknown: ['ambiguous'],
  resend_after_ambiguous: ['ambiguous'],
  reconcile_first: ['pending'],
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
          // A refusal of a same-key resend (a 401 checked before the provider's dedupe, a 404, a 422) says
          // nothing of an earlier attempt that may have taken effect: reconciled, never final at once.
          return unsettledBefore(record, event.answers) ? 'ambiguous' : 'failed';
        case 'conflict':
          // On a resend the provider's "key used with other content" says above all that it saw the key
          // before: an earlier attempt of ours may have taken effect. Reconciled, never final at once.
          return reachedBefore(record) ? 'ambiguous' : 'failed';
        case 'not_sent':
        case 'retryable':
          // This attempt acted on nothing; a superseded owner's late delivery still has to be settled.
          return lateDeliveryUnsettled(record) ? 'ambiguous' : 'pending';
        case 'ambiguous':
          return 'ambiguous';
      }
      break;
    case 'never_sent':
      // back to where the attempt found it (pending), unless a superseded owner's late delivery is unsettled
      return record.state !== 'pending' && lateDeliveryUnsettled(record) ? 'ambiguous' : 'pending';
    case 'lookup_found':
      return 'succeeded';
    case 'lookup_absent':
      // A superseded owner's late success showed delivery: an "absent" contradicts it, settles nothing;
      // and one asked before a late response landed came too early to settle anything.
      if (lateSuccess(record) || lateSince(record, event.askedGeneration)) return 'ambiguous';
      // A key conflict on a resend: no effect of an earlier attempt, so the conflict stands (nothing is
      // resent after it); an "absent" asked before settleMs proves nothing and settles nothing.
      // So does a terminal answer to a resend (see `unsettledBefore`).
      if (answerUnsettled(record)) return event.settled === false ? 'ambiguous' : record.cancelRequestedAt === null ? 'failed' : 'cancelled';
      // Only a settled "absent" proves that nothing was delivered, which is what cancelled means.
      return record.cancelRequestedAt === null || event.settled === false ? 'pending' : 'cancelled';
    case 'resend_after_ambiguous':
      return 'pending';
    case 'reconcile_first':
      // only where a dedupe was all that cleared it (refused below otherwise)
      return 'ambiguous';
    case 'cancel':
      // A pending record is cancelled only when no attempt can have been delivered; one that was
      // merely cleared for a same-key resend goes back to reconciliation, and is never resent.
      if (record.state !== 'pending') return record.state;
      return deliveryUnresolved(record) ? 'ambiguous' : 'cancelled';
    case 'evidence':
      return event.reopen === true && record.state === 'pending' ? 'ambiguous' : record.state;
    case 'renew':
    case 'release':
    case 'lookup_unknown':
    case 'stopped':
      return record.state;
  }
}

/**
 * Whether `record`'s ref was minted by oncefetch for one `client.fetch` call (no `once.ref`, no key
 * header), which mints it as the key too: the provider never saw it, so a lookup by ref can only say
 * "absent" (`recover()` asks no registered lookup about it).
 */
export function refMinted(record: Pick<OperationRecord, 'key' | 'keySource' | 'ref'>): boolean {
  return record.keySource === 'minted' && record.key === record.ref;
}

/**
 * Whether attempt `a` got "a request with this key is still being processed": a retryable 409 (the
 * IETF draft, Stripe), or a retryable 422 (PayPal `PREVIOUS_REQUEST_IN_PROGRESS`, Adyen 704). An earlier
 * request with the key may take effect, unlike after a 503 or a 429.
 */
export function inProgressAnswer(a: Pick<AttemptRecord, 'class' | 'status'>): boolean {
  return a.class === 'retryable' && (a.status === 409 || a.status === 422);
}

/**
 * Whether attempt `a` was retried on the provider's word though it may take effect: "in progress"
 * ({@link inProgressAnswer}), or a 5xx other than 503 that a should-retry hint (or a `classify`
 * override) made retryable: its outcome is unknown (Stripe stores a 500 once the endpoint began).
 */
export function retriedUnknown(a: Pick<AttemptRecord, 'class' | 'status'>): boolean {
  return inProgressAnswer(a) || (a.class === 'retryable' && a.status != null && a.status >= 500 && a.status !== 503);
}

/**
 * Whether an attempt of `record` may have reached the provider with nothing since proving it did
 * not: an attempt that never finished, ended ambiguous, or was retried though it may take effect
 * ({@link retriedUnknown}: "in progress", a hinted 5xx), not followed by a lookup that found it absent.
 */
export function deliveryUnresolved(record: Pick<OperationRecord, 'attempts' | 'evidence'>): boolean {
  if (lateDeliveryUnsettled(record)) return true;
  const risky = record.attempts.findLast((a) => a.finishedAt === null || !(a.class === 'not_sent' || (a.class === 'retryable' && !retriedUnknown(a))));
  return risky !== undefined && !settledAbsentAfter(record, risky.generation);
}

/**
 * Whether a `pending` record was cleared for a send only because the provider dedupes: an attempt
 * that never finished or ended ambiguous with no settled "absent" after it (a same-key resend after
 * `resend_after_ambiguous`, or an "absent" asked before `settleMs`), or a superseded owner's late
 * delivery nothing settled. Only a call that trusts the provider to dedupe (`providerDedupes`, the
 * key within its retention) may send from it; any other reconciles first (`reconcile_first`).
 * `deliveryUnresolved` without its 409s: a 409 "in progress" shows that the provider tracks the key.
 */
export function resendNeedsDedupe(record: Pick<OperationRecord, 'attempts' | 'evidence'>): boolean {
  if (lateDeliveryUnsettled(record)) return true;
  const unsure = record.attempts.findLast((a) => a.finishedAt === null || !(a.class === 'not_sent' || a.class === 'retryable'));
  return unsure !== undefined && !settledAbsentAfter(record, unsure.generation);
}

/**
 * Whether an attempt of `record` before its last one may have reached the provider (any outcome but
 * `not_sent`, or none recorded), or a superseded owner's late response written before the last one
 * started says one did. Asked when the
 * last attempt gets a provider's key conflict: then the provider's memory of the key is, above all,
 * the trace of that earlier attempt of ours, which may have taken effect.
 */
export function reachedBefore(record: Pick<OperationRecord, 'attempts' | 'evidence'>): boolean {
  const last = record.attempts.at(-1);
  if (last === undefined) return false;
  // (evidence written before the last attempt started: what its outcome answers, read the same after)
  return (
    record.attempts.slice(0, -1).some((a) => a.class !== 'not_sent') ||
    record.evidence.some((e) => e.generation < last.generation && e.kind === 'late_response' && !e.detail.startsWith('late not_sent'))
  );
}

/**
 * Whether an attempt before the last one may have taken effect with nothing settling it since ({@link deliveryUnresolved}
 * over the earlier attempts: one that never finished, ended ambiguous or got 409 "in progress", no settled "absent"
 * after it; or a superseded owner's late delivery nothing settled). Asked when the last attempt, a same-key resend,
 * gets a terminal answer: the provider refused the resend (a 401 checked before its dedupe, as Stripe does; a 404;
 * a 422), which says nothing of the earlier attempt. A 503 or 429 before it acted on nothing. `answered`: the
 * earlier attempts a late outcome is the answer of (their call's, see `attempt_finished`), which it settles.
 */
export function unsettledBefore(record: Pick<OperationRecord, 'attempts' | 'evidence'>, answered: readonly number[] = []): boolean {
  const earlier = record.attempts.slice(0, -1);
  return deliveryUnresolved({ attempts: answered.length === 0 ? earlier : earlier.filter((a) => !answered.includes(a.number)), evidence: record.evidence });
}

/**
 * Whether `record` is `ambiguous` on a final answer to a resend: a provider's key conflict after an attempt
 * that may have reached it ({@link reachedBefore}), or a terminal answer after one that may have taken effect
 * ({@link unsettledBefore}). Reconciled by a lookup (found: succeeded; a settled "absent": the answer stands,
 * `failed`), never resent, not even where the provider dedupes.
 */
export function answerUnsettled(record: Pick<OperationRecord, 'state' | 'attempts'>): boolean {
  const last = record.attempts.at(-1)?.class;
  return record.state === 'ambiguous' && (last === 'conflict' || last === 'terminal');
}

/** Whether `record` is `ambiguous` on a provider's key conflict that answered a resend (see {@link answerUnsettled}). */
export function conflictUnsettled(record: Pick<OperationRecord, 'state' | 'attempts'>): boolean {
  return answerUnsettled(record) && record.attempts.at(-1)?.class === 'conflict';
}

/**
 * For a `failed` record whose key conflict answered a resend ({@link reachedBefore}) with no settled
 * "absent" after it (as a version before this rule ended it, at once): the earlier attempt that may
 * have taken effect (its number; 0 for a superseded owner's), else undefined. Such a record is
 * terminal and replays its conflict, but must not read as "did not happen".
 */
export function conflictAfterReach(record: Pick<OperationRecord, 'state' | 'attempts' | 'evidence'>): number | undefined {
  const last = record.attempts.at(-1);
  if (record.state !== 'failed' || last?.class !== 'conflict' || !reachedBefore(record) || settledAbsentAfter(record, last.generation)) return undefined;
  return record.attempts.slice(0, -1).findLast((a) => a.class !== 'not_sent')?.number ?? 0;
}

/** The evidence `keepAsEvidence` writes for a superseded owner's late success or ambiguous end. */
const LATE_DELIVERY = /^late (success|ambiguous) outcome/;

const isLateDelivery = (e: EvidenceRecord): boolean => e.kind === 'late_response' && LATE_DELIVERY.test(e.detail);

/** Whether a settled "absent" lookup was written after generation `generation`. */
function settledAbsentAfter(record: Pick<OperationRecord, 'evidence'>, generation: number): boolean {
  return record.evidence.some((e) => e.kind === 'lookup' && e.generation > generation && e.detail.startsWith('absent:'));
}

/** Whether a superseded owner's late success or ambiguous end was written after generation `asked`. */
function lateSince(record: Pick<OperationRecord, 'evidence'>, asked: number | undefined): boolean {
  return asked !== undefined && record.evidence.some((e) => e.generation > asked && isLateDelivery(e));
}

/**
 * Whether a superseded owner's attempt got a success late: the effect happened, so no "absent"
 * settles the record (`lookup_absent` leaves it `ambiguous`): a lookup that finds it does, or, where
 * the provider dedupes, a same-key resend (`resend_after_ambiguous`, then the send), whose 2xx is the
 * provider's replay.
 */
export function lateSuccess(record: Pick<OperationRecord, 'evidence'>): boolean {
  return record.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith('late success outcome'));
}

/**
 * Whether a superseded owner's late response showed that its attempt reached the provider (a late
 * success, or an ambiguous end) and no settled "absent" came after it. Such a record is not
 * cleared for a send, whatever its own later attempts were told.
 */
export function lateDeliveryUnsettled(record: Pick<OperationRecord, 'evidence'>): boolean {
  if (lateSuccess(record)) return true;
  const late = record.evidence.findLast(isLateDelivery);
  return late !== undefined && !settledAbsentAfter(record, late.generation);
}

/**
 * How a `takeover` note written by an acquisition that took no lease from another owner begins (a
 * restart under the same owner id, a lease released with the attempt open): the last attempt was
 * open, nothing bounded its end, and the note marks when it could last have been on the wire
 * (settledAt counts from it). A new evidence kind would make the record unreadable to earlier
 * versions (record-shape); `takeover` is one they read, and count from. explain's facts.ts reads
 * this prefix as a resume, not another owner's takeover; `oncefetch show` prints its kind as `resume`.
 */
export const RESUMED = 'lease resumed by';

/**
 * Whether evidence `e` bounds when attempt `last`, left open, could last have been on the wire: a
 * takeover (or resume) note after it, or a stop by its own owner (`settledAt` counts the settle window
 * from it; an acquire with no such bound writes the resume note).
 */
export const boundsOpen = (e: EvidenceRecord, last: AttemptRecord): boolean =>
  e.generation > last.generation && (e.kind === 'takeover' || (e.kind === 'stop' && e.owner === last.owner));

/** Whether the last attempt is open with nothing after it that bounds when it left its process (see `boundsOpen`). */
function openUnbounded(record: Pick<OperationRecord, 'attempts' | 'evidence'>): boolean {
  const last = record.attempts.at(-1);
  return last?.finishedAt === null && !record.evidence.some((e) => boundsOpen(e, last));
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
  if (event.type === 'reconcile_first' && !resendNeedsDedupe(record)) throw new IllegalTransitionError(record.state, to, event.type);
  // a key conflict on a resend is never resent: reconciled by a lookup, or left ambiguous
  if (event.type === 'resend_after_ambiguous' && answerUnsettled(record)) throw new IllegalTransitionError(record.state, to, event.type);
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
      } else if (openUnbounded(record)) {
        // Its sender is gone (restarted under the same owner id) or stopped without a note: it was on the wire at most
        // until now. The `takeover` kind, which settledAt counts from and every version reads (see RESUMED).
        note('takeover', `${RESUMED} ${event.owner} with attempt ${record.attempts.length}'s end never recorded (a restarted process under the same owner, or a call that left it open)`);
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
      if (event.class === 'conflict' && to === 'failed') {
        // no attempt of this record reached the provider before: the key's earlier request is another's (a key
        // another client or store sent, or one key given to two intents), and it may have charged
        next.error = {
          code: 'IDEMPOTENCY_CONFLICT',
          message: `provider reported key reuse: ${event.reason}; this request was not processed, but an earlier request under this key, with other content, may have taken effect (sent by another client or store, or the key given to two intents): if this is the same intent, check at the provider before sending it under a new ref; use a new ref for a new intent`,
        };
      } else if (event.class === 'terminal' && event.result === null && to === 'failed') {
        next.error = { code: 'OPERATION_FAILED', message: event.reason };
      }
      break;
    }
    case 'never_sent': {
      const last = record.attempts.at(-1);
      if (last?.id !== event.attemptId || last.finishedAt !== null || last.owner !== owner) throw new IllegalTransitionError(record.state, to, event.type);
      next.attempts = [...record.attempts.slice(0, -1), { ...last, finishedAt: now, class: 'not_sent', reason: event.reason }];
      if (record.lease?.owner !== owner) note('late_response', `late not_sent outcome (${event.reason}): attempt ${last.number} was never sent, closed by its owner`);
      break;
    }
    case 'lookup_found':
      next.result = event.result;
      // (an attempt's own success, kept by the call that got it after a takeover: no lookup's finding)
      note(event.result.source === 'lookup' ? 'lookup' : 'attempt', `found: ${event.detail}`, event.result.status);
      break;
    case 'lookup_absent':
      if (to === 'failed') {
        const last = record.attempts.at(-1);
        const reason = last?.reason ?? 'key conflict';
        // a terminal answer stands as `attempt_finished` would have left it at once: its result, or (none) OPERATION_FAILED
        next.error =
          last?.class === 'conflict'
            ? { code: 'IDEMPOTENCY_CONFLICT', message: `provider reported key reuse: ${reason} (on a resend; a lookup then found no effect of an earlier attempt)` }
            : record.result === null
              ? { code: 'OPERATION_FAILED', message: reason }
              : null;
      }
      note(
        'lookup',
        to === 'ambiguous'
          ? lateSuccess(record) || lateSince(record, event.askedGeneration)
            ? `absent, contradicted by a superseded owner's late response: ${event.detail}`
            : `unknown: absent before settleMs, after a ${record.attempts.at(-1)?.class === 'conflict' ? 'key conflict' : 'terminal answer'} on a resend (no proof that nothing was delivered): ${event.detail}`
          : event.settled === false
            ? `absent before settleMs (a same-key resend is safe; no proof that nothing was delivered): ${event.detail}`
            : `absent: ${event.detail}`,
      );
      break;
    case 'lookup_unknown':
      note('lookup', `unknown: ${event.detail}`);
      break;
    case 'resend_after_ambiguous':
      note('lookup', `resend with the same key: ${event.detail}`);
      break;
    case 'reconcile_first':
      note('stop', `not sent: ${event.detail}`);
      break;
    case 'stopped':
      // The call gave up; release the lease so another call or recover() can resume at once.
      next.error = { code: event.code, message: event.message };
      next.lease = null;
      note('stop', `${event.code}: ${event.message}`);
      break;
    case 'cancel':
      next.cancelRequestedAt = record.cancelRequestedAt ?? now;
      note(
        'cancel',
        to === 'cancelled'
          ? 'cancelled before any send'
          : record.state === 'pending'
            ? 'cancel requested; an earlier attempt may have been delivered: reconcile, never resend'
            : `cancel requested while ${record.state}`,
      );
      break;
    case 'evidence':
      note(event.kind, event.detail, event.status);
      break;
  }
  if (isTerminal(to)) {
    next.lease = null;
    // A record that finished after its retention would be purgeable at once, and a call still
    // waiting for it would claim the ref afresh and send again: keep it `retentionMs` from now.
    if (!isTerminal(record.state)) next.expiresAt = Math.max(record.expiresAt, now + (record.expiresAt - record.createdAt));
  }
  return next;
}
