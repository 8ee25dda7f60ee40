/**
 * Client options: what users pass ({@link OnceClientOptions}), their
 * validation, and the resolved form with every default applied.
 *
 * @module
 */
import type { JitterMode, Random } from './backoff/backoff.js';
import type { RetryBudget, RetryBudgetOptions } from './backoff/budget.js';
import { BUDGET_DEFAULTS, createRetryBudget } from './backoff/budget.js';
import type { OnceEvent } from './events.js';
import type { LookupFn } from './reconcile/lookup.js';
import type { OnceStore } from './stores/contract.js';
import * as s from './schema.js';

const SECOND = 1000;
const HOUR = 3600 * SECOND;

/**
 * Retry policy. Attempts count from 1.
 *
 * @example
 * ```ts
 * createClient({ retry: { maxAttempts: 4, baseDelayMs: 100, deadlineMs: 30_000, budget: false } })
 * ```
 */
export interface RetryOptions {
  /** transport attempts per call, the first included @default 5 */
  maxAttempts?: number;
  /** base of the exponential backoff @default 200 */
  baseDelayMs?: number;
  /** cap of one backoff delay @default 10000 */
  maxDelayMs?: number;
  /** timeout of one attempt, response body included @default 30000 */
  attemptTimeoutMs?: number;
  /**
   * one deadline across all attempts, waits, lookups and the store's writes of a call (a write begun after it
   * gets at most 1 s more); no retry starts with less than `min(attemptTimeoutMs, deadlineMs / 10)` of it left
   * @default 120000
   */
  deadlineMs?: number;
  /** a `Retry-After` beyond this stops the call with `RetriesExhaustedError` @default 60000 */
  maxRetryAfterMs?: number;
  /** jitter strategy @default 'full' */
  jitter?: JitterMode;
  /** retry budget shared by the client's calls; `false` disables it @default { ratio: 0.09, reserve: 10, maxTokens: 100 } */
  budget?: RetryBudgetOptions | false;
}

/**
 * Options of `createClient`.
 *
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1', retry: { maxAttempts: 4 }, providerDedupes: true })
 * ```
 */
export interface OnceClientOptions {
  /** where records live @default SQLite at `./.oncefetch/oncefetch.db` on Node (or `$ONCEFETCH_DB`); IndexedDB (`oncefetch`) in browsers */
  store?: OnceStore;
  /** tenant of every operation unless the call names one @default 'default' */
  tenant?: string;
  /** the transport @default a fetch-compatible transport on undici's `request` on Node (it asks for no compression; `accept-encoding` requests go through undici's fetch, which decodes); the page's `fetch` in browsers. A custom fetch should honour the `signal` it is given; one that does not keeps its request out after the attempt ended (timeout, deadline, abort): this client then sends nothing more for the operation while that request is out, and its late response is the next attempt's outcome */
  fetch?: typeof globalThis.fetch;
  /** request header that carries the key @default 'Idempotency-Key' */
  keyHeader?: string;
  /** send the key as an RFC 8941 sf-string (`"…"`), as the IETF draft specifies @default false */
  quoteKey?: boolean;
  /** retry policy @default `{}`: every {@link RetryOptions} field at its own default */
  retry?: RetryOptions;
  /** how long records are kept for replay after they finished (succeeded, failed or cancelled); unfinished records are never purged @default 86400000 (24 h) */
  retentionMs?: number;
  /** how long the provider remembers a key; no automatic resend past it minus 10 % @default 86400000 (24 h) */
  providerRetentionMs?: number;
  /** owner lease; renewed every third of it while an attempt is on the wire, during lookups and while an answer in hand is being recorded @default 30000 */
  leaseMs?: number;
  /** longest wait for another owner's live operation before `OperationInFlightError` @default 30000 */
  inFlightWaitMs?: number;
  /** the provider deduplicates by key, so a resend after an unresolved ambiguity is safe @default false */
  providerDedupes?: boolean;
  /**
   * How long after it was sent a request may still take effect at the provider (its
   * processing limit). A lookup asked sooner than this after the ambiguous attempt ended (for
   * an attempt that never ended: after the takeover, or after a superseded owner's late
   * response) that answers "absent" is not trusted: the engine waits and looks again, so a
   * request still being processed is never resent next to itself. Not needed when `providerDedupes` is true (a
   * resend with the same key is deduplicated). @default 5000
   */
  settleMs?: number;
  /**
   * lookups per action, used by `client.fetch` (and `wrap()`) calls without their own and by
   * `recover()`; an action with none ends an unsettled ambiguity with `AmbiguousOutcomeError`
   * (unless `providerDedupes`). A `client.run()` operation uses only its spec's `lookup`, and a call
   * whose ref oncefetch minted (no `once.ref`, no `Idempotency-Key` header) only its own: the
   * provider never saw that ref, so a lookup by ref could only say "absent".
   * @default {}
   */
  lookups?: Record<string, LookupFn>;
  /** response header names left out of stored results (beyond Set-Cookie, Set-Cookie2, Authorization, Cookie, Proxy-Authorization); request headers are never stored @default [] */
  sensitiveHeaders?: string[];
  /** largest request body buffered for fingerprinting and resending (a larger one is a `RangeError`) @default 1048576 */
  maxBodyBytes?: number;
  /**
   * largest result stored for replay, in bytes: a longer response body is stored truncated and marked; a
   * `client.run()` value whose JSON is longer is not stored (its caller gets it; later calls ask their
   * `lookup` for it, or throw `ValueNotStoredError`), and a failed run's error message is cut to fit @default 1048576
   */
  maxStoredBodyBytes?: number;
  /** methods that are once-only without a `once` option @default ['POST', 'PATCH'] */
  onceMethods?: string[];
  /** receives every {@link OnceEvent}; exceptions it throws are ignored @default undefined (no listener) */
  onEvent?: (event: OnceEvent) => void;
  /**
   * a span per call and a span event per {@link OnceEvent} through `@opentelemetry/api`, when it is
   * installed; Node entry only (a browser finds the API by name only through an import map, so the
   * browser entry has no bridge and ignores this) @default true
   */
  telemetry?: boolean;
  /**
   * owner id of this client in leases and evidence: give each live client its own (a process
   * restarted with its predecessor's id resumes that one's records without waiting out their
   * leases). `client.recover()` works as `<owner>/recover`. @default a random UUID
   */
  owner?: string;
  /** clock, for tests @default Date.now */
  now?: () => number;
  /** randomness in [0, 1) for jitter, for tests @default Math.random */
  random?: Random;
}

/** {@link OnceClientOptions} with every default applied. */
export interface ResolvedOptions {
  store: OnceStore;
  tenant: string;
  fetch: typeof globalThis.fetch;
  keyHeader: string;
  quoteKey: boolean;
  retry: Required<Omit<RetryOptions, 'budget'>> & { budget: RetryBudget | undefined };
  retentionMs: number;
  providerRetentionMs: number;
  leaseMs: number;
  inFlightWaitMs: number;
  providerDedupes: boolean;
  settleMs: number;
  lookups: Record<string, LookupFn>;
  sensitiveHeaders: ReadonlySet<string>;
  maxBodyBytes: number;
  maxStoredBodyBytes: number;
  onceMethods: ReadonlySet<string>;
  onEvent: ((event: OnceEvent) => void) | undefined;
  telemetry: boolean;
  owner: string;
  now: () => number;
  random: Random;
}

const ms = s.int(0);
const positiveMs = s.int(1);
const nonEmpty = s.str(1);
/**
 * A tenant is a text column of the PostgreSQL store, which cannot hold a NUL: the other stores kept one,
 * so it is refused for all before anything is recorded (an action and a ref travel JSON-escaped, kept by every store).
 */
export const NO_NUL = 'must not contain a NUL character (PostgreSQL cannot store one)';
const fn = s.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function');
const nonNegative = s.num(0);

const budgetObject = s.obj({ ratio: s.optional(s.num(0, 1)), reserve: s.optional(nonNegative), maxTokens: s.optional(nonNegative) }, true);
/** `false`, or the budget's fields; a field out of range or an unknown key is named, anything else gets one message. */
const budget: s.Check<unknown> = (v) => {
  const r = v === false ? v : budgetObject(v);
  return r instanceof s.Issue && r.kind === 'type' ? new s.Issue('must be false or { ratio?, reserve?, maxTokens? } of numbers') : r;
};

/** The methods of the store contract ({@link OnceStore}), all required. */
const STORE_METHODS = ['claim', 'get', 'compareAndSet', 'list', 'purge', 'close'] as const;
/**
 * A store object with every method of the contract, and a name. One missing was accepted, and failed later, far
 * from its cause (`client.close()`: StoreError "close failed: store[name] is not a function").
 */
const store: s.Check<OnceStore> = (v) => {
  const missing = STORE_METHODS.filter((m) => typeof (v as Partial<OnceStore> | null)?.[m] !== 'function');
  if (typeof v !== 'object' || missing.length === STORE_METHODS.length) return new s.Issue('must be a store object (memoryStore(), sqliteStore({ path }), …), not a path');
  if (missing.length > 0) return new s.Issue(`is missing ${missing.join('(), ')}() (see the store contract, OnceStore)`);
  // (it starts every StoreError's message and, in browsers, names the Web Locks of its records)
  const { name } = v as { name?: unknown };
  return typeof name === 'string' && name !== '' ? (v as OnceStore) : new s.Issue("needs a name, a non-empty string such as 'mystore:orders' (see the store contract, OnceStore)");
};

const optionsCheck = s.obj(
  {
    store: s.optional(store),
    tenant: s.optional(s.str(1, /^[^\0]*$/, NO_NUL)),
    fetch: s.optional(fn),
    keyHeader: s.optional(s.str(0, /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name')),
    quoteKey: s.optional(s.bool),
    retry: s.optional(
      s.obj(
        {
          maxAttempts: s.optional(s.int(1, 100)),
          baseDelayMs: s.optional(ms),
          maxDelayMs: s.optional(ms),
          attemptTimeoutMs: s.optional(positiveMs),
          deadlineMs: s.optional(positiveMs),
          maxRetryAfterMs: s.optional(ms),
          jitter: s.optional(s.oneOf(['full', 'decorrelated', 'none'])),
          budget: s.optional(budget),
        },
        true,
      ),
    ),
    retentionMs: s.optional(positiveMs),
    providerRetentionMs: s.optional(positiveMs),
    leaseMs: s.optional(s.int(100)),
    inFlightWaitMs: s.optional(ms),
    providerDedupes: s.optional(s.bool),
    settleMs: s.optional(ms),
    lookups: s.optional(s.dict(fn)),
    sensitiveHeaders: s.optional(s.arr(nonEmpty)),
    maxBodyBytes: s.optional(positiveMs),
    maxStoredBodyBytes: s.optional(ms),
    onceMethods: s.optional(s.arr(nonEmpty)),
    onEvent: s.optional(fn),
    telemetry: s.optional(s.bool),
    owner: s.optional(nonEmpty),
    now: s.optional(fn),
    random: s.optional(fn),
  },
  true,
);

/** What a value is, for a message: `null`, `an array` or its `typeof`. */
const got = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);

/** Throws a TypeError naming `what` of `where` unless `value` is an object (not null, not an array). */
export function checkObject(where: string, what: string, value: unknown): asserts value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError(`${where}: ${what} must be an object, got ${got(value)}`);
}

/** Throws a TypeError naming `<what>.<field>` of `where` for the first of `fields` that is not a non-empty string (a tenant, nor one with a NUL: {@link NO_NUL}). */
export function checkStrings(where: string, what: string, fields: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value !== 'string' || value === '') throw new TypeError(`${where}: ${what}.${name} must be a non-empty string`);
    if (name === 'tenant' && value.includes('\0')) throw new TypeError(`${where}: ${what}.tenant ${NO_NUL}`);
  }
}

/**
 * Throws a TypeError naming `what` of `where` unless `value` is an object whose own keys are all
 * `known`, as createClient's options are checked: a misspelt key must not pass silently (`once:
 * { reff }` minted a new ref per call, so each call made its own effect).
 */
export function checkKeys(where: string, what: string, value: unknown, known: readonly string[]): void {
  checkObject(where, what, value);
  const issue = s.unknownKeys(value, (k) => known.includes(k));
  if (issue !== undefined) throw new TypeError(`${where}: ${what} ${issue.message}`);
}

/** Throws a TypeError or RangeError naming the first bad option; `undefined` is no options. */
export function validateOptions(options: unknown, where: string): void {
  if (options === undefined) return;
  checkObject(where, 'options', options);
  const issue = optionsCheck(options);
  if (!(issue instanceof s.Issue)) return;
  const path = issue.path.join('.');
  const message = `${where}: ${path === '' ? 'options' : `option "${path}"`} ${issue.message}`;
  throw issue.kind === 'range' ? new RangeError(message) : new TypeError(message);
}

/**
 * `wrapFetch(fetch, options)` as createClient's options; a TypeError naming wrapFetch when `fetch`
 * is not a function, `options` not an object (a spread would take null or 5 for no options), or
 * `options.fetch` a second transport (one of the two would be dropped silently).
 */
export function wrapOptions(fetch: unknown, options: unknown): OnceClientOptions {
  if (typeof fetch !== 'function') throw new TypeError(`wrapFetch: fetch must be a function, got ${got(fetch)}`);
  if (options !== undefined) checkObject('wrapFetch', 'options', options);
  if (options?.fetch !== undefined) {
    throw new TypeError('wrapFetch: fetch is given twice, as the first argument and as option "fetch"');
  }
  return { ...options, fetch: fetch as typeof globalThis.fetch };
}

/** Applies the defaults; `store` and `fetch` come from the platform entry. `where` names the caller in errors. */
export function resolveOptions(
  options: OnceClientOptions,
  platform: { store: () => OnceStore; fetch: () => typeof globalThis.fetch },
  where = 'createClient',
): ResolvedOptions {
  validateOptions(options, where);
  const retry = options.retry ?? {};
  const maxDelayMs = retry.maxDelayMs ?? 10 * SECOND;
  const baseDelayMs = retry.baseDelayMs ?? 200;
  if (baseDelayMs > maxDelayMs) {
    throw new RangeError(`${where}: option "retry.baseDelayMs" must not exceed "retry.maxDelayMs"`);
  }
  // (each field alone is checked above; the pair here, defaults included, so the message names the options)
  if (retry.budget !== undefined && retry.budget !== false) {
    const reserve = retry.budget.reserve ?? BUDGET_DEFAULTS.reserve;
    const maxTokens = retry.budget.maxTokens ?? BUDGET_DEFAULTS.maxTokens;
    if (reserve > maxTokens) {
      throw new RangeError(`${where}: option "retry.budget.reserve" (${reserve}) must not exceed "retry.budget.maxTokens" (${maxTokens})`);
    }
  }
  const sensitive = ['authorization', 'cookie', 'proxy-authorization', 'set-cookie', 'set-cookie2'];
  for (const h of options.sensitiveHeaders ?? []) sensitive.push(h.toLowerCase());
  return {
    store: options.store ?? platform.store(),
    tenant: options.tenant ?? 'default',
    fetch: options.fetch ?? platform.fetch(),
    keyHeader: options.keyHeader ?? 'Idempotency-Key',
    quoteKey: options.quoteKey ?? false,
    retry: {
      maxAttempts: retry.maxAttempts ?? 5,
      baseDelayMs,
      maxDelayMs,
      attemptTimeoutMs: retry.attemptTimeoutMs ?? 30 * SECOND,
      deadlineMs: retry.deadlineMs ?? 120 * SECOND,
      maxRetryAfterMs: retry.maxRetryAfterMs ?? 60 * SECOND,
      jitter: retry.jitter ?? 'full',
      budget: retry.budget === false ? undefined : createRetryBudget(retry.budget ?? {}),
    },
    retentionMs: options.retentionMs ?? 24 * HOUR,
    providerRetentionMs: options.providerRetentionMs ?? 24 * HOUR,
    leaseMs: options.leaseMs ?? 30 * SECOND,
    inFlightWaitMs: options.inFlightWaitMs ?? 30 * SECOND,
    providerDedupes: options.providerDedupes ?? false,
    settleMs: options.settleMs ?? 5 * SECOND,
    lookups: options.lookups ?? {},
    sensitiveHeaders: new Set(sensitive),
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    maxStoredBodyBytes: options.maxStoredBodyBytes ?? 1024 * 1024,
    onceMethods: new Set((options.onceMethods ?? ['POST', 'PATCH']).map((m) => m.toUpperCase())),
    onEvent: options.onEvent,
    telemetry: options.telemetry ?? true,
    owner: options.owner ?? globalThis.crypto.randomUUID(),
    now: options.now ?? Date.now,
    random: options.random ?? Math.random,
  };
}
