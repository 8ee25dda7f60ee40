/**
 * The chaos run's history: what every call did, as seen by its caller, and
 * what the providers did (their effect and request logs). The checker reads
 * only these types, so a history can be written by hand in a unit test.
 *
 * Outcomes, precisely:
 * - `ok`: `client.fetch` returned a 2xx `Response`; `orderId` is the `id` in its body.
 *   Claim: the ref has exactly one effect, and it is this order.
 * - `fail`: the call ended (an error, or a non-2xx `Response`) and the record, read right
 *   after (`checkedAt`, taken before the read), claims that **no attempt with the ref's key can
 *   have taken effect** (claim `none`, see {@link Claim}): no record; `cancelled`; `failed` (a
 *   4xx: not executed; or a key conflict, `IDEMPOTENCY_CONFLICT`, which on a resend the engine
 *   lets stand only after a settled "absent": `--key-mismatch` injects them, and an engine that
 *   failed the record at once, an earlier attempt's effect there or to come, breaks rule 3); or
 *   `pending` where every attempt that may have been delivered (ambiguous, unfinished, or answered
 *   409 "in progress") was settled by an "absent" lookup trusted only after `settleMs`. Claim: the
 *   ref had no effect at `checkedAt`.
 * - `indeterminate`: everything else — `AmbiguousOutcomeError`; a deadline, exhausted retries
 *   or `OperationInFlightError` while an attempt may have been delivered (an ambiguous or
 *   unfinished attempt, a record `in_flight`/`ambiguous`, a 409); a `StoreError` (`--store-faults`)
 *   after which the record does not prove "no effect" as above; a record that could not be
 *   read; a process SIGKILLed during the call (`code: 'KILLED'`). No claim: the final recovery
 *   must settle the ref (a `reconciled` entry), and that truth is checked.
 *
 * @module
 */

/**
 * Every state a record can be read in, plus `absent` (no record), `unreadable` (the read
 * failed) and `unobserved` (the process died before it could read).
 */
export type ObservedState = 'pending' | 'in_flight' | 'ambiguous' | 'succeeded' | 'failed' | 'cancelled' | 'absent' | 'unreadable' | 'unobserved';

/** Who made a call: a worker process (`w0`, `w1`, …) or the final recovery (`final`). */
interface CallBase {
  /** operation number: the schedule's index, then the final recovery's calls after it; a burst's calls `2 × ops + n` (n: the burst's number, from 0) */
  op: number;
  worker: string;
  /** which life of the worker process (0 first, +1 after each SIGKILL and restart) */
  incarnation: number;
  ref: string;
  /** epoch ms */
  at: number;
}

/** A call started. */
export interface InvokeEntry extends CallBase {
  type: 'invoke';
  /** a restarted worker's call of an operation its SIGKILLed last life had under way (see the worker) */
  redelivered?: true;
  /** one of the calls several processes make of one ref at the same moment (a burst, see the fleet) */
  burst?: true;
}

/** A call returned a 2xx response. */
export interface OkEntry extends CallBase {
  type: 'ok';
  status: number;
  /** the order id in the body; null when the body carried none (a violation) */
  orderId: string | null;
  replayed: boolean;
}

/** A call ended with no effect possible for its ref (see the module doc). */
export interface FailEntry extends CallBase {
  type: 'fail';
  /** the error's `code`, `HTTP_<status>` for a non-2xx response, or `GAVE_UP` for a call its caller aborted (see the worker) */
  code: string;
  state: ObservedState;
  /** taken before the record was read: the ref had no effect at this time */
  checkedAt: number;
}

/** A call ended without a provable outcome. */
export interface IndeterminateEntry extends CallBase {
  type: 'indeterminate';
  /** the error's `code`, `HTTP_<status>`, `UNEXPECTED`, or `KILLED` for a call cut by SIGKILL */
  code: string;
  state: ObservedState;
}

/**
 * What a record read by the final recovery says about the provider:
 * - `one`: `succeeded`: exactly one effect, already there, the stored order;
 * - `none`: no attempt with the key can have taken effect: no record, `cancelled`, `failed`, or
 *   `pending` where every attempt that may have been delivered was followed by an "absent" lookup
 *   from an owner that trusts "absent" only `settleMs` after the attempt (`providerDedupes: false`),
 *   and no later attempt may have been delivered;
 * - `resend`: `pending` after an "absent" that an owner relying on the provider's dedupe trusted at
 *   once (the design: a same-key resend is safe): no claim about the effect;
 * - `unsettled`: still `in_flight` or `ambiguous`, or unreadable.
 */
export type Claim = 'one' | 'none' | 'resend' | 'unsettled';

/** The final recovery's reading of a ref: after `recover()`, and again after its own calls. */
export interface ReconciledEntry {
  type: 'reconciled';
  phase: 'after_recover' | 'after_calls';
  ref: string;
  /** epoch ms, taken before the read */
  at: number;
  state: ObservedState;
  claim: Claim;
  /** the order id in the stored result, for `succeeded` */
  orderId: string | null;
}

/** One call's outcome. */
export type OutcomeEntry = OkEntry | FailEntry | IndeterminateEntry;

/** One line of the history. */
export type HistoryEntry = InvokeEntry | OutcomeEntry | ReconciledEntry;

/** One business effect at a provider: an order it created. */
export interface EffectEntry {
  id: string;
  ref: string | undefined;
  /** epoch ms, the provider's clock (the same machine's as the workers') */
  createdAt: number;
}

/** One `POST /orders` the provider received. */
export interface RequestEntry {
  ref: string | undefined;
  key: string | undefined;
}

/** What the checker reads. */
export interface CheckInput {
  history: readonly HistoryEntry[];
  /** every provider's orders (ids are compared per ref, so two providers may reuse them) */
  effects: readonly EffectEntry[];
  /** every provider's `POST /orders`, to check one key per ref; optional */
  requests?: readonly RequestEntry[];
}

/** The rule a violation breaks. */
export type ViolationKind =
  | 'ok_without_effect'
  | 'ok_wrong_order'
  | 'duplicate_effect'
  | 'fail_with_effect'
  | 'unreconciled'
  | 'reconciled_wrong'
  | 'missing_outcome'
  | 'orphan_outcome'
  | 'key_reminted';

/** One broken rule, about one ref. */
export interface Violation {
  kind: ViolationKind;
  ref: string;
  /** the operation concerned, when there is one */
  op?: number;
  detail: string;
}

/** What the checker found. */
export interface CheckResult {
  violations: Violation[];
  refs: number;
  effects: number;
  /** sum over refs of max(0, effects − 1) */
  duplicates: number;
  ok: number;
  fail: number;
  indeterminate: number;
  /** indeterminate calls whose ref the final recovery settled, to 1 effect or to 0 */
  reconciled: { toOne: number; toZero: number };
  /** refs read `pending` (claim `resend`) after recover() whose effect had in fact already landed */
  resendWithEffect: number;
}
