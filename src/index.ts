/**
 * oncefetch — one logical request, at most one business effect.
 *
 * The Node entry: `createClient()` defaults to the embedded SQLite store and
 * undici's fetch.
 *
 * @example
 * ```ts
 * import { createClient } from 'oncefetch'
 * const client = createClient({ tenant: 't1' })
 * const res = await client.fetch('https://api.example.com/orders', {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify(order),
 *   once: { action: 'create-order', ref: task.id, lookup: findOrderByRef },
 * })
 * ```
 *
 * @module
 */
import type { OnceClient } from './client.js';
import { createClientWith } from './client.js';
import { nodeDefaults } from './node-defaults.js';
import type { OnceClientOptions } from './options.js';

/**
 * Creates a once-only client. On Node the store defaults to SQLite at
 * `./.oncefetch/oncefetch.db` (or `$ONCEFETCH_DB`) and the transport to undici.
 *
 * @throws TypeError or RangeError naming a bad option.
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1', store: memoryStore() })
 * ```
 */
export function createClient(options: OnceClientOptions = {}): OnceClient {
  return createClientWith(options, nodeDefaults);
}

/**
 * A plain `fetch` with the once-only guarantee, for SDKs that take a `fetch`
 * option. Same options as {@link createClient}.
 *
 * @example
 * ```ts
 * const openai = new OpenAI({ fetch: wrapFetch(globalThis.fetch, { tenant: 't1' }), maxRetries: 0 })
 * ```
 */
export function wrapFetch(fetch: typeof globalThis.fetch, options: Omit<OnceClientOptions, 'fetch'> = {}): typeof globalThis.fetch {
  return createClient({ ...options, fetch }).wrap();
}

export type { CancelOptions, CancelResult, OnceClient, ScopeInput } from './client.js';
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
export type { ClaimResult, CompareAndSetResult, ListQuery, OnceStore } from './stores/contract.js';
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
export { REPLAYED_HEADER, TRUNCATED_HEADER } from './operation/snapshot.js';
export {
  AmbiguousOutcomeError,
  DeadlineExceededError,
  IdempotencyConflictError,
  OnceError,
  OperationCancelledError,
  OperationFailedError,
  OperationInFlightError,
  RetriesExhaustedError,
  StoreError,
  isOnceError,
} from './errors.js';
export type { OnceErrorCode, OnceErrorOptions, ScopeLabel, StopErrorOptions } from './errors.js';
