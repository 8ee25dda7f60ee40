/**
 * The oncefetch error family. Every error carries a stable `code` so that a
 * `switch (err.code)` narrows exhaustively, forwards `cause`, and is branded so
 * that {@link isOnceError} works across two copies of the library.
 *
 * @module
 */

/**
 * The stable codes of {@link OnceError}: switch on them rather than on class
 * names or messages, which may change.
 *
 * @example
 * ```ts
 * const code: OnceErrorCode = err.code
 * if (code === 'RETRIES_EXHAUSTED' || code === 'DEADLINE_EXCEEDED') requeue(task) // resumable, same ref
 * ```
 */
export type OnceErrorCode =
  | 'IDEMPOTENCY_CONFLICT'
  | 'OPERATION_IN_FLIGHT'
  | 'AMBIGUOUS_OUTCOME'
  | 'RETRIES_EXHAUSTED'
  | 'DEADLINE_EXCEEDED'
  | 'OPERATION_CANCELLED'
  | 'OPERATION_FAILED'
  | 'VALUE_NOT_STORED'
  | 'STORE_ERROR';

/**
 * The scope of an operation as it appears in errors: never the key or a
 * secret, so it is safe to log and to pass to `client.explain()`.
 *
 * @example
 * ```ts
 * if (isOnceError(err) && err.scope) logger.warn({ ...err.scope, code: err.code }, err.message)
 * ```
 */
export interface ScopeLabel {
  tenant: string;
  action: string;
  ref: string;
}

const BRAND = Symbol.for('oncefetch.error');

/**
 * Options shared by every {@link OnceError} constructor; a custom store uses
 * them to report its failures as {@link StoreError}.
 *
 * @example
 * ```ts
 * throw new StoreError(`redis: GET ${id} failed`, { cause: err })
 * ```
 */
export interface OnceErrorOptions {
  /** the underlying error, forwarded as the standard `Error.cause` @default undefined */
  cause?: unknown;
  /** the operation concerned, copied to {@link OnceError.scope} @default undefined */
  scope?: ScopeLabel | undefined;
}

/**
 * Base class of every error oncefetch throws on purpose.
 *
 * @example
 * ```ts
 * try { await client.fetch(url, init) } catch (err) {
 *   if (isOnceError(err) && err.code === 'AMBIGUOUS_OUTCOME') escalate(err.scope)
 * }
 * ```
 */
export class OnceError extends Error {
  /** Stable machine-readable code. */
  readonly code: OnceErrorCode;
  /** The operation the error is about, when there is one. */
  readonly scope: ScopeLabel | undefined;

  constructor(code: OnceErrorCode, message: string, options: OnceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OnceError';
    this.code = code;
    this.scope = options.scope;
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/**
 * True for any {@link OnceError}, even one thrown by another copy of oncefetch.
 *
 * @example
 * ```ts
 * try { await client.run(spec, effect) } catch (err) {
 *   if (!isOnceError(err)) throw err
 *   switch (err.code) { case 'AMBIGUOUS_OUTCOME': escalate(err.scope); break; default: throw err }
 * }
 * ```
 */
export function isOnceError(value: unknown): value is OnceError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

function describe(scope: ScopeLabel | undefined): string {
  return scope === undefined ? 'operation' : `operation ${scope.tenant}/${scope.action}/${scope.ref}`;
}

/**
 * The same scope was used with a different payload (checked locally before any
 * send), or the provider reported that the key was reused with other content.
 * Never resolved by minting a new key: use a new `ref` for a new intent.
 *
 * @example
 * ```ts
 * try { await client.fetch(url, { method: 'POST', body, once: { action: 'create-order', ref: cart.id } }) } catch (err) {
 *   if (err instanceof IdempotencyConflictError) throw new Error(`cart ${cart.id} changed after checkout began`, { cause: err })
 *   throw err
 * }
 * ```
 */
export class IdempotencyConflictError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('IDEMPOTENCY_CONFLICT', message, options);
    this.name = 'IdempotencyConflictError';
  }
}

/**
 * Another owner (a process, a tab, a concurrent call) holds a live lease on
 * the operation and `inFlightWaitMs` ran out. Nothing was sent by this call;
 * calling again later replays the owner's result.
 *
 * @example
 * ```ts
 * try { await client.run(spec, effect) } catch (err) {
 *   if (err instanceof OperationInFlightError) return queue.retryLater(task, 30_000)
 *   throw err
 * }
 * ```
 */
export class OperationInFlightError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('OPERATION_IN_FLIGHT', message, options);
    this.name = 'OperationInFlightError';
  }
}

/**
 * The request may have reached the provider, and neither a lookup nor the
 * provider's deduplication can settle whether it did. The record stays
 * `ambiguous`; nothing is re-sent automatically. Hand it to a person (or
 * register a lookup for the action and call `client.recover()`).
 *
 * @example
 * ```ts
 * try { await client.fetch(url, init) } catch (err) {
 *   if (!(err instanceof AmbiguousOutcomeError) || !err.scope) throw err
 *   await openTicket(await client.explain(err.scope))
 * }
 * ```
 */
export class AmbiguousOutcomeError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('AMBIGUOUS_OUTCOME', message, options);
    this.name = 'AmbiguousOutcomeError';
  }
}

/**
 * Options of {@link RetriesExhaustedError} and {@link DeadlineExceededError},
 * e.g. to build one in a test double of a client.
 *
 * @example
 * ```ts
 * const err = new RetriesExhaustedError('provider asked for 10 min', { retryAfterMs: 600_000, attempts: 1 })
 * ```
 */
export interface StopErrorOptions extends OnceErrorOptions {
  /** The wait the provider asked for, when that is what stopped the loop. @default undefined */
  retryAfterMs?: number | undefined;
  /** Attempts made, counting from 1. @default undefined */
  attempts?: number | undefined;
}

/**
 * No attempt is left (attempt limit, retry budget, or a `Retry-After` beyond
 * `maxRetryAfterMs`). The record stays resumable with the same key: call
 * again later with the same scope. Its `cause` is what the last attempt threw
 * (a transport error, a `client.run` effect's error); none after a response.
 *
 * @example
 * ```ts
 * try { await client.fetch(url, init) } catch (err) {
 *   if (err instanceof RetriesExhaustedError) return scheduler.runIn(err.retryAfterMs ?? 60_000, task)
 *   throw err
 * }
 * ```
 */
export class RetriesExhaustedError extends OnceError {
  readonly retryAfterMs: number | undefined;
  readonly attempts: number | undefined;
  constructor(message: string, options: StopErrorOptions = {}) {
    super('RETRIES_EXHAUSTED', message, options);
    this.name = 'RetriesExhaustedError';
    this.retryAfterMs = options.retryAfterMs;
    this.attempts = options.attempts;
  }
}

/**
 * The overall deadline (`retry.deadlineMs`) would be passed. The record stays
 * resumable: a later call with the same scope continues with the same key.
 * When a wait before the next attempt would pass it, its `cause` is what the
 * last attempt threw, as for {@link RetriesExhaustedError}.
 *
 * @example
 * ```ts
 * try { await client.run(spec, effect) } catch (err) {
 *   if (isOnceError(err) && err.code === 'DEADLINE_EXCEEDED') return queue.retryLater(task)
 *   throw err
 * }
 * ```
 */
export class DeadlineExceededError extends OnceError {
  readonly retryAfterMs: number | undefined;
  readonly attempts: number | undefined;
  constructor(message: string, options: StopErrorOptions = {}) {
    super('DEADLINE_EXCEEDED', message, options);
    this.name = 'DeadlineExceededError';
    this.retryAfterMs = options.retryAfterMs;
    this.attempts = options.attempts;
  }
}

/**
 * The operation was cancelled (`client.cancel()` or `once.signal`) before
 * anything was sent; it will never be sent, and later calls with the same
 * scope reject the same way.
 *
 * @example
 * ```ts
 * try { await client.fetch(url, { method: 'POST', body, once: { action: 'refund', ref, signal } }) } catch (err) {
 *   if (err instanceof OperationCancelledError) return { refunded: false }
 *   throw err
 * }
 * ```
 */
export class OperationCancelledError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('OPERATION_CANCELLED', message, options);
    this.name = 'OperationCancelledError';
  }
}

/**
 * A `client.run()` effect failed terminally in an earlier call, or a
 * `client.fetch()` whose earlier terminal outcome was a thrown error rather
 * than a response (one `once.classify` made `terminal`). The original error
 * object is not kept; its message and status are.
 *
 * @example
 * ```ts
 * try { await client.run(spec, effect) } catch (err) {
 *   if (err instanceof OperationFailedError && err.status === 402) return markUnpaid(order)
 *   throw err
 * }
 * ```
 */
export class OperationFailedError extends OnceError {
  /** the status the failure carried, when it had one */
  readonly status: number | undefined;
  constructor(message: string, options: OnceErrorOptions & { status?: number | undefined } = {}) {
    super('OPERATION_FAILED', message, options);
    this.name = 'OperationFailedError';
    this.status = options.status;
  }
}

/**
 * A `client.run()` operation succeeded in an earlier call (or one of another client), but its value
 * was not stored: its JSON was longer than `maxStoredBodyBytes`. The effect is not run again and the
 * record stays `succeeded`. A call with a `lookup` asks it for the value first (within
 * `attemptTimeoutMs`); this error says it found none or failed (its error the `cause`). Read the value
 * from the provider, and raise `maxStoredBodyBytes` for later operations with values this large.
 * Never retry it under a new ref.
 *
 * @example
 * ```ts
 * try { return await client.run(spec, effect) } catch (err) {
 *   if (err instanceof ValueNotStoredError) return reports.getByRef(spec.ref) // it ran; fetch what it made
 *   throw err
 * }
 * ```
 */
export class ValueNotStoredError extends OnceError {
  /** the size of the value's JSON in UTF-8 bytes, as the record says */
  readonly bytes: number | undefined;
  constructor(message: string, options: OnceErrorOptions & { bytes?: number | undefined } = {}) {
    super('VALUE_NOT_STORED', message, options);
    this.name = 'ValueNotStoredError';
    this.bytes = options.bytes;
  }
}

/**
 * The store failed or returned something that is not a valid record. Raised
 * instead of treating the operation as absent, so nothing is silently re-sent.
 * Usually an operations problem (disk, locks, a newer schema), not a reason to
 * retry in a loop.
 *
 * @example
 * ```ts
 * try { await client.fetch(url, init) } catch (err) {
 *   if (err instanceof StoreError) alertOps(err.message, err.cause)
 *   throw err
 * }
 * ```
 */
export class StoreError extends OnceError {
  /**
   * Set when `purge` (the store's, or `client.purge()`) failed part-way: how many records it had
   * removed for good before it failed (0 when none). The store removes in pages, each committed on
   * its own; a page whose acknowledgment was lost may have gone too, uncounted. Undefined on the
   * errors of every other call (and from a custom store that does not set it).
   */
  readonly purged: number | undefined;
  constructor(message: string, options: StoreErrorOptions = {}) {
    super('STORE_ERROR', message, options);
    this.name = 'StoreError';
    this.purged = options.purged;
  }
}

/**
 * A {@link StoreError}: a superseded owner's late ambiguous end that the store failed to keep on the
 * record (as evidence on the new owner's record). The request may have reached the provider, and only
 * this call knows it: the call ends with this error and must not start over from the record (a
 * pending record would send again). Reconcile the operation (`client.recover()`, its lookup) before
 * anything else. (A late success the store failed to keep does not end the call: the call holds it,
 * follows the record without sending again, and keeps it there when it takes the record back.)
 *
 * @example
 * ```ts
 * try { await client.fetch(url, init) } catch (err) {
 *   if (err instanceof LateOutcomeNotKeptError) alertOps('an answer the store could not keep', err.scope)
 *   throw err
 * }
 * ```
 */
export class LateOutcomeNotKeptError extends StoreError {
  override name = 'LateOutcomeNotKeptError';
}

/**
 * Options of {@link StoreError}: a custom store's `purge` that fails part-way passes how many
 * records it had already removed.
 *
 * @example
 * ```ts
 * throw new StoreError(`redis: purge failed after ${removed} records`, { cause: err, purged: removed })
 * ```
 */
export interface StoreErrorOptions extends OnceErrorOptions {
  /** records a failed `purge` had removed before it failed @default undefined */
  purged?: number | undefined;
}

/** @internal */
export function scopeText(scope: ScopeLabel | undefined): string {
  return describe(scope);
}
