/**
 * Constant tables and small predicates on HTTP status codes and server hints.
 * No policy lives here beyond the tables; `classify.ts` combines them in one
 * readable order.
 *
 * @module
 */

/**
 * Statuses where the server says "not processed, try later" (DESIGN §4):
 * 408 Request Timeout, 425 Too Early, 429 Too Many Requests, 503 Service Unavailable.
 */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 503]);

/**
 * 5xx statuses whose outcome is unknown: the request may have had its effect.
 * Any 5xx not listed in {@link TERMINAL_SERVER_STATUSES} is treated the same way,
 * because "maybe processed" is the only safe reading of an unfamiliar server error
 * (507 Insufficient Storage, 508 Loop Detected, 511, vendor codes...).
 */
export const AMBIGUOUS_STATUSES: ReadonlySet<number> = new Set([500, 502, 504]);

/**
 * 5xx statuses that describe the request itself and will not change on resend:
 * 501 Not Implemented and 505 HTTP Version Not Supported. The server refused the
 * method or protocol before doing any work, so they are `terminal`, not `ambiguous`.
 */
export const TERMINAL_SERVER_STATUSES: ReadonlySet<number> = new Set([501, 505]);

/**
 * Statuses whose class depends on the body, so the engine must read (at most 4 KiB of) it:
 * 409 (request in progress?) and 400 / 417 / 422 (idempotency key mismatch?).
 */
export const BODY_STATUSES: ReadonlySet<number> = new Set([400, 409, 417, 422]);

/** Statuses that become `conflict` when the body carries {@link KEY_MISMATCH_SIGNAL}. */
export const KEY_MISMATCH_STATUSES: ReadonlySet<number> = new Set([400, 417, 422]);

/**
 * Marks a 409 as "a request with this key is still being processed" (IETF
 * idempotency-key draft: "A request is outstanding for this Idempotency-Key";
 * Stripe: `idempotency_key_in_use`). Matched against the body text, which includes a
 * problem+json `type`, `title` and `detail` when the body is a problem document.
 */
export const IN_PROGRESS_SIGNAL =
  /in[ _-]?progress|outstanding|being processed|idempotency[_-]key[_-]in[_-]use|concurrent/i;

/**
 * Marks a 422 as "a request with this key is still being processed", as payment providers say it
 * with 422 rather than 409 (PayPal: `PREVIOUS_REQUEST_IN_PROGRESS`; Adyen: errorCode 704, "request
 * already processed or in progress"). Narrower than {@link IN_PROGRESS_SIGNAL}: a 422 is a validation
 * answer first ("amount exceeds the outstanding balance" must stay terminal), so it needs "request"
 * followed by "in progress", in one sentence of one JSON string: a "request" of a key, an error type
 * or code before it (`request_id`, `INVALID_REQUEST_ERROR`, `invalid_request`) is not this answer.
 */
export const REQUEST_IN_PROGRESS_SIGNAL = /request[^."]{0,40}?in[ _-]?progress/i;

/**
 * Marks a 400 / 417 / 422 as "this key was already used with different content" (DynamoDB: IdempotentParameterMismatchException).
 * Deliberately conservative: it needs the word "idempotency" next to a reuse or
 * mismatch word, or a known provider code (Stripe `idempotency_error`, the IETF
 * draft's "Idempotency Key MUST not be reused across different payloads", PayPal's
 * `PAYPAL_REQUEST_ID_PREVIOUSLY_USED` and `DUPLICATE_REQUEST_ID`).
 * A body that does not match stays `terminal`, which also stops the loop; the only
 * cost of a miss is a less specific error.
 */
export const KEY_MISMATCH_SIGNAL =
  /idempotency[\s_-]*key.*(?:mismatch|reuse|reused|different|does not match|already used)|(?:mismatch|reuse|reused).*idempotency|idempotency_error|idempotency-key-is-being-reused|IdempotentParameterMismatch|request[_-]?id[_-]previously[_-]used|duplicate[_-]request[_-]id/i;

/** Longest body prefix the signals are matched against, in characters (bounds regex work). */
export const MAX_SIGNAL_BODY_CHARS = 4096;

/** True for 2xx. */
export function isSuccessStatus(status: number): boolean {
  return status >= 200 && status <= 299;
}

/**
 * True for an answer that says the provider acted: a 2xx, or 303 See Other ("done, look here", handed
 * back with `redirect: 'manual'`). A success as a response; thrown by an SDK, it took effect, its value lost.
 */
export function isDoneStatus(status: number): boolean {
  return isSuccessStatus(status) || status === 303;
}

/**
 * True for 3xx. `fetch` follows redirects, so a 3xx reaches the classifier only with
 * `redirect: 'manual'` (or an opaque redirect); it is never retried.
 */
export function isRedirectStatus(status: number): boolean {
  return status >= 300 && status <= 399;
}

/**
 * Set to `true` by the default Node transport on a response it reached through redirects that all
 * kept the request's method and body (307, 308; a 301 or 302 of a method other than POST): that
 * status is the request's own answer. A followed response without it may answer the GET a 303 (or a
 * 301/302 after a POST) made of the request, and says nothing of the request's effect.
 */
export const KEPT_METHOD: unique symbol = Symbol('oncefetch.keptMethod');

/** True for 4xx. */
export function isClientErrorStatus(status: number): boolean {
  return status >= 400 && status <= 499;
}

/** True for 5xx. */
export function isServerErrorStatus(status: number): boolean {
  return status >= 500 && status <= 599;
}

/**
 * The "should the client retry?" server hints, in the order they are read: `x-should-retry`
 * (Stainless convention) and `stripe-should-retry` (Stripe). Both mean the same: `true` retry
 * (same key), `false` do not.
 */
export const SHOULD_RETRY_HEADERS = ['x-should-retry', 'stripe-should-retry'] as const;

/**
 * Reads one "should retry" server hint (see {@link SHOULD_RETRY_HEADERS}).
 *
 * @param name - the header to read.
 * @returns `true` / `false` for the literal values (case-insensitive), `undefined` when
 * absent or anything else (including two values joined by `, `).
 *
 * @example
 * readShouldRetry(new Headers({ 'x-should-retry': 'true' }), 'x-should-retry'); // true
 */
export function readShouldRetry(headers: Headers, name: string): boolean | undefined {
  const value = headers.get(name)?.trim().toLowerCase();
  if (value === 'true') return true;
  if (value === 'false') return false;
  return undefined;
}

/**
 * Tests a body-text signal against the first {@link MAX_SIGNAL_BODY_CHARS} characters.
 *
 * @returns `false` when there is no body text.
 */
export function bodyMatches(signal: RegExp, bodyText: string | undefined): boolean {
  if (bodyText === undefined || bodyText === '') return false;
  return signal.test(bodyText.slice(0, MAX_SIGNAL_BODY_CHARS));
}
