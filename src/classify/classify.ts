/**
 * Outcome classification (DESIGN §4): every response or thrown error becomes one
 * {@link OutcomeClass}. The tables live in `status.ts` and `network-error.ts`; this file
 * is the order in which they are consulted.
 *
 * @module
 */

import { parseRetryAfter } from '../backoff/retry-after.js';
import { classifyTransportError } from './network-error.js';
import {
  AMBIGUOUS_STATUSES,
  BODY_STATUSES,
  IN_PROGRESS_SIGNAL,
  REQUEST_IN_PROGRESS_SIGNAL,
  KEY_MISMATCH_SIGNAL,
  KEY_MISMATCH_STATUSES,
  RETRYABLE_STATUSES,
  SHOULD_RETRY_HEADERS,
  TERMINAL_SERVER_STATUSES,
  bodyMatches,
  isClientErrorStatus,
  isRedirectStatus,
  isServerErrorStatus,
  isDoneStatus,
  readShouldRetry,
} from './status.js';

/**
 * What one attempt's outcome means for the operation.
 *
 * - `success`: 2xx.
 * - `not_sent`: the request provably never left; retry with the same key.
 * - `retryable`: the server said "not processed, later"; retry after a delay, same key.
 * - `ambiguous`: the outcome is unknown; look the operation up before any resend.
 * - `terminal`: caller defect or a refusal that will not change; stop.
 * - `conflict`: the key was already used with other content; never mint a new key.
 *
 * @example
 * ```ts
 * // this API answers 404 until a just-created parent is visible: retry with the same key
 * const classify: ClassifyOverride = ({ response }): OutcomeClass | undefined => (response?.status === 404 ? 'retryable' : undefined)
 * ```
 */
export type OutcomeClass = 'success' | 'not_sent' | 'retryable' | 'ambiguous' | 'terminal' | 'conflict';

/**
 * The verdict on one attempt, as the default that a {@link ClassifyOverride}
 * (or `RunSpec.classify`) may keep or replace.
 *
 * @example
 * ```ts
 * // this API's 500 carries `code: 'card_declined'` when nothing was charged
 * const classify = (error: unknown, d: Classification): OutcomeClass | undefined =>
 *   d.class === 'ambiguous' && (error as { code?: unknown }).code === 'card_declined' ? 'terminal' : undefined
 * await client.run({ action: 'charge', ref: order.id, classify }, effect)
 * ```
 */
export interface Classification {
  /** The outcome class. */
  class: OutcomeClass;
  /** Short machine-ish reason, e.g. `'status 503'`, `'ECONNREFUSED'`, `'x-should-retry: true'`, `'stripe-should-retry: false'`, `'idempotency key mismatch'`. */
  reason: string;
  /** Wait the server asked for (`Retry-After` / `retry-after-ms`), only when valid. */
  retryAfterMs?: number | undefined;
}

/** What the engine knows about a response when classifying it. */
export interface ResponseFacts {
  /** The HTTP status. */
  status: number;
  /** The response headers. */
  headers: Headers;
  /** First <= 4 KiB of the body text; the engine supplies it only when {@link needsBody}(status) is true. */
  bodyText?: string | undefined;
}

/**
 * Where the attempt was when it threw.
 *
 * - `before_dispatch`: before `fetch` was called (nothing can have been sent).
 * - `awaiting_response`: `fetch` was called, no response yet.
 * - `reading_body`: the response arrived and reading its body failed.
 */
export type AttemptPhase = 'before_dispatch' | 'awaiting_response' | 'reading_body';

/**
 * The per-call override: return a class to replace the default, or `undefined` to keep it.
 *
 * @example
 * const classify: ClassifyOverride = ({ response }) =>
 *   response?.status === 404 ? 'retryable' : undefined;
 * // a provider code in the body (the override is synchronous: read `bodyText`, not the response)
 * const byCode: ClassifyOverride = ({ response, bodyText }) =>
 *   response?.status === 422 && bodyText?.includes('PREVIOUS_REQUEST_IN_PROGRESS') ? 'retryable' : undefined;
 * // a GraphQL server answers 200 with `errors`: only the body tells an internal error from data
 * const graphql: ClassifyOverride = ({ response, bodyText }) =>
 *   response?.ok === true && bodyText?.includes('"INTERNAL_SERVER_ERROR"') ? 'ambiguous' : undefined;
 */
export type ClassifyOverride = (input: {
  response?: Response | undefined;
  /**
   * With a response: its whole body, decoded as UTF-8 (read before `classify` is asked, which is
   * synchronous: it cannot await `response.text()`). Absent with `error`.
   */
  bodyText?: string | undefined;
  error?: unknown;
  default: Classification;
}) => OutcomeClass | undefined;

const OUTCOME_CLASSES: ReadonlySet<string> = new Set<OutcomeClass>([
  'success',
  'not_sent',
  'retryable',
  'ambiguous',
  'terminal',
  'conflict',
]);

function isOutcomeClass(value: unknown): value is OutcomeClass {
  return typeof value === 'string' && OUTCOME_CLASSES.has(value);
}

/**
 * True when classifying `status` depends on the body (400, 409, 417, 422), so the engine
 * should read its first 4 KiB and pass it as {@link ResponseFacts.bodyText}.
 */
export function needsBody(status: number): boolean {
  return BODY_STATUSES.has(status);
}

/**
 * Classifies a response. Order, first match wins:
 *
 * 1. 2xx → `success`; so is 303 See Other (`redirect: 'manual'`): "done, look here", the provider
 *    acted, whatever a hint says. (Recorded `failed`, it read as "no effect" and invited a new ref.)
 * 2. 400 / 417 / 422 whose body carries the key-mismatch signal → `conflict`. This is
 *    checked before the server hints: a reused key will never succeed, whatever the hint.
 * 3. `x-should-retry` or `stripe-should-retry`: `true` → `retryable`; `false` → `terminal`,
 *    but for a status whose outcome is unknown (rules 7 and 9: a 500, say; and a 409 "in
 *    progress", a request with this key still being processed), which stays `ambiguous`
 *    ("do not retry" is no word on the effect). When both are present and
 *    disagree, `false` wins (not resending is the safe side); the reason names the header
 *    that decided.
 * 4. Other 3xx → `terminal` (a redirect reaching us means `redirect: 'manual'`).
 * 5. 408, 425, 429, 503 → `retryable`.
 * 6. 409 → `retryable` with the "request in progress" signal, else `terminal`; 422 → `retryable`
 *    with the narrower "request … in progress" signal (PayPal, Adyen), else rule 8.
 * 7. 500, 502, 504 → `ambiguous`; 501, 505 → `terminal`; any other 5xx → `ambiguous`.
 * 8. Other 4xx → `terminal`.
 * 9. Anything else (1xx, out-of-range codes) → `ambiguous`: the outcome is unknown.
 *
 * For every non-2xx, a valid `Retry-After` / `retry-after-ms` is attached as
 * `retryAfterMs` without changing the class.
 *
 * @param now - current time, epoch ms, for HTTP-date `Retry-After`.
 *
 * @example
 * classifyResponse({ status: 503, headers: new Headers({ 'retry-after': '2' }) }, Date.now());
 * // { class: 'retryable', reason: 'status 503', retryAfterMs: 2000 }
 */
export function classifyResponse(facts: ResponseFacts, now: number): Classification {
  const { status, headers, bodyText } = facts;
  if (isDoneStatus(status)) return { class: 'success', reason: `status ${status}` };
  const verdict = classifyFailureStatus(status, headers, bodyText);
  const retryAfterMs = parseRetryAfter(headers, now);
  return retryAfterMs === undefined ? verdict : { ...verdict, retryAfterMs };
}

function classifyFailureStatus(status: number, headers: Headers, bodyText: string | undefined): Classification {
  if (KEY_MISMATCH_STATUSES.has(status) && bodyMatches(KEY_MISMATCH_SIGNAL, bodyText)) {
    return { class: 'conflict', reason: 'idempotency key mismatch' };
  }
  const hint = shouldRetryHint(headers);
  if (hint?.class === 'retryable') return hint;
  const verdict = classifyStatus(status, bodyText);
  // "Do not retry" says nothing of the effect: an answer whose outcome is
  // unknown (a 500: Stripe stores one once the endpoint began; a 409 "in progress": a request with
  // this key is being processed, its effect to come) stays ambiguous, for a lookup.
  if (hint === undefined) return verdict;
  const unknown = verdict.class === 'ambiguous' || (verdict.class === 'retryable' && (status === 409 || status === 422));
  return unknown ? { class: 'ambiguous', reason: `${verdict.reason}, ${hint.reason}` } : hint;
}

function classifyStatus(status: number, bodyText: string | undefined): Classification {
  const reason = `status ${status}`;
  if (isRedirectStatus(status)) return { class: 'terminal', reason };
  if (RETRYABLE_STATUSES.has(status)) return { class: 'retryable', reason };
  if (status === 409) {
    return bodyMatches(IN_PROGRESS_SIGNAL, bodyText)
      ? { class: 'retryable', reason: 'status 409 in progress' }
      : { class: 'terminal', reason };
  }
  if (status === 422 && bodyMatches(REQUEST_IN_PROGRESS_SIGNAL, bodyText)) return { class: 'retryable', reason: 'status 422 in progress' };
  if (AMBIGUOUS_STATUSES.has(status)) return { class: 'ambiguous', reason };
  if (TERMINAL_SERVER_STATUSES.has(status)) return { class: 'terminal', reason };
  if (isServerErrorStatus(status)) return { class: 'ambiguous', reason };
  if (isClientErrorStatus(status)) return { class: 'terminal', reason };
  return { class: 'ambiguous', reason };
}

/** The server's "should retry" hints: any `false` wins over a `true`; `undefined` when none is valid. */
function shouldRetryHint(headers: Headers): Classification | undefined {
  let retry: string | undefined;
  for (const name of SHOULD_RETRY_HEADERS) {
    const hint = readShouldRetry(headers, name);
    if (hint === false) return { class: 'terminal', reason: `${name}: false` };
    if (hint === true) retry ??= name;
  }
  return retry === undefined ? undefined : { class: 'retryable', reason: `${retry}: true` };
}

/**
 * Classifies an error thrown while making an attempt. See `network-error.ts` for the
 * code tables: `not_sent` needs proof (DNS / connect-phase code, or `before_dispatch`);
 * everything else, including any error while `reading_body`, is `ambiguous`.
 * Handles Node's `TypeError('fetch failed', { cause })` wrapping. Never throws.
 *
 * @example
 * classifyError(Object.assign(new Error('reset'), { code: 'ECONNRESET' }), 'awaiting_response');
 * // { class: 'ambiguous', reason: 'ECONNRESET' }
 */
export function classifyError(error: unknown, phase: AttemptPhase): Classification {
  return classifyTransportError(error, phase);
}

/**
 * Applies the user's per-call override to a computed classification.
 *
 * `undefined` from the override (or no override) keeps `computed` unchanged. A different
 * class replaces it with reason `'override: <original reason>'`; `retryAfterMs` is kept, since
 * the server's requested wait still applies. Errors thrown by the override propagate.
 *
 * @throws TypeError naming `classify` when the override returns something that is not an {@link OutcomeClass}.
 *
 * @example
 * applyOverride(() => 'terminal', { error }, { class: 'ambiguous', reason: 'ECONNRESET' });
 * // { class: 'terminal', reason: 'override: ECONNRESET' }
 */
export function applyOverride(
  override: ClassifyOverride | undefined,
  input: { response?: Response | undefined; bodyText?: string | undefined; error?: unknown },
  computed: Classification,
): Classification {
  if (override === undefined) return computed;
  return chosenClass(override({ ...input, default: computed }), computed, 'options.classify');
}

/**
 * A caller's choice of class over `computed`: `undefined` (or the same class) keeps it; another
 * class replaces it with reason `'override: <original reason>'`, keeping `retryAfterMs`.
 *
 * @throws TypeError naming `what` when `chosen` is not an {@link OutcomeClass}.
 */
export function chosenClass(chosen: unknown, computed: Classification, what: string): Classification {
  if (chosen === undefined || chosen === computed.class) return computed;
  if (!isOutcomeClass(chosen)) {
    const shown = typeof chosen === 'string' ? JSON.stringify(chosen) : typeof chosen;
    throw new TypeError(`${what} returned ${shown}; expected one of ${[...OUTCOME_CLASSES].join(', ')} or undefined`);
  }
  return { ...computed, class: chosen, reason: `override: ${computed.reason}` };
}
