/**
 * The public surface shared by the Node entry (`index.ts`) and the browser
 * entry (`browser.ts`): every type, error and helper except the two
 * platform-specific factories, `createClient` and `wrapFetch`. One list, so the
 * two entries cannot drift apart.
 *
 * @module
 */
export type { CancelOptions, CancelResult, CloseOptions, OnceClient, ScopeInput } from './client.js';
export type { OnceClientOptions, RetryOptions } from './options.js';
export type { JitterMode, Random } from './backoff/backoff.js';
export type { RetryBudgetOptions } from './backoff/budget.js';
export type { RecoverOptions, RecoveryReport } from './reconcile/recover.js';
export type { OnceOptions, OnceRequestInit } from './engine/fetch-operation.js';
export type { RunContext, RunSpec } from './engine/run-operation.js';
export type { LookupContext, LookupFn } from './reconcile/lookup.js';
export type { Classification, ClassifyOverride, OutcomeClass } from './classify/classify.js';
export type { OnceEvent, OnceEventType, OnceStats } from './events.js';
export type {
  Confidence,
  Diagnosis,
  DiagnosisCode,
  ExplainPolicy,
  Explanation,
  Handoff,
  HandoffAttempt,
  HandoffLookup,
  HandoffRetention,
  HandoffRetryPolicy,
} from './explain/types.js';
export type { ClaimResult, CompareAndSetResult, CorruptRow, ListQuery, OnceStore } from './stores/contract.js';
export type {
  AttemptRecord,
  EvidenceRecord,
  OperationRecord,
  OperationState,
  RecordedClass,
  ResultSnapshot,
  Scope,
} from './operation/record.js';
export { memoryStore } from './stores/memory.js';
export { parseRecord } from './operation/record.js';
export { REPLAYED_HEADER, TRUNCATED_HEADER } from './operation/snapshot.js';
export {
  AmbiguousOutcomeError,
  DeadlineExceededError,
  IdempotencyConflictError,
  LateOutcomeNotKeptError,
  OnceError,
  OperationCancelledError,
  OperationFailedError,
  OperationInFlightError,
  RetriesExhaustedError,
  StoreError,
  ValueNotStoredError,
  isOnceError,
} from './errors.js';
export type { OnceErrorCode, OnceErrorOptions, ScopeLabel, StopErrorOptions, StoreErrorOptions } from './errors.js';
