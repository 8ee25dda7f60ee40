/**
 * The oncefetch error family. Every error carries a stable `code` so that a
 * `switch (err.code)` narrows exhaustively, forwards `cause`, and is branded so
 * that {@link isOnceError} works across two copies of the library.
 *
 * @module
 */

/** The stable codes of {@link OnceError}. */
export type OnceErrorCode =
  | 'IDEMPOTENCY_CONFLICT'
  | 'OPERATION_IN_FLIGHT'
  | 'AMBIGUOUS_OUTCOME'
  | 'RETRIES_EXHAUSTED'
  | 'DEADLINE_EXCEEDED'
  | 'OPERATION_CANCELLED'
  | 'OPERATION_FAILED'
  | 'STORE_ERROR';

/** The scope of an operation as it appears in errors: never the key or a secret. */
export interface ScopeLabel {
  tenant: string;
  action: string;
  ref: string;
}

const BRAND = Symbol.for('oncefetch.error');

/** Options shared by every {@link OnceError} constructor. */
export interface OnceErrorOptions {
  cause?: unknown;
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
 */
export class IdempotencyConflictError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('IDEMPOTENCY_CONFLICT', message, options);
    this.name = 'IdempotencyConflictError';
  }
}

/** Another owner holds a live lease on the operation and the wait budget ran out. */
export class OperationInFlightError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('OPERATION_IN_FLIGHT', message, options);
    this.name = 'OperationInFlightError';
  }
}

/**
 * The request may have reached the provider, and neither a lookup nor the
 * provider's deduplication can settle whether it did. The record stays
 * `ambiguous`; nothing is re-sent automatically.
 */
export class AmbiguousOutcomeError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('AMBIGUOUS_OUTCOME', message, options);
    this.name = 'AmbiguousOutcomeError';
  }
}

/** Options of errors that stop the attempt loop early because of a wait. */
export interface StopErrorOptions extends OnceErrorOptions {
  /** The wait the provider asked for, when that is what stopped the loop. */
  retryAfterMs?: number | undefined;
  /** Attempts made, counting from 1. */
  attempts?: number | undefined;
}

/**
 * No attempt is left (attempt limit, retry budget, or a `Retry-After` beyond
 * `maxRetryAfterMs`). The record stays resumable with the same key.
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

/** The overall deadline (`retry.deadlineMs`) would be passed. The record stays resumable. */
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

/** The operation was cancelled before anything was sent; it will never be sent. */
export class OperationCancelledError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('OPERATION_CANCELLED', message, options);
    this.name = 'OperationCancelledError';
  }
}

/**
 * A `client.run()` effect failed terminally in an earlier call. The original
 * error object is not kept; its message and status are.
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
 * The store failed or returned something that is not a valid record. Raised
 * instead of treating the operation as absent, so nothing is silently re-sent.
 */
export class StoreError extends OnceError {
  constructor(message: string, options: OnceErrorOptions = {}) {
    super('STORE_ERROR', message, options);
    this.name = 'StoreError';
  }
}

/** @internal */
export function scopeText(scope: ScopeLabel | undefined): string {
  return describe(scope);
}
