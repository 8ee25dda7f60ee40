/**
 * `client.run`: the once-only guarantee for any async side effect that takes
 * an idempotency key (a provider SDK call), with the same engine as fetch.
 *
 * @module
 */
import { longTimeout, untilAborted } from '../backoff/sleep.js';
import type { Classification, OutcomeClass } from '../classify/classify.js';
import { chosenClass, classifyError, classifyResponse } from '../classify/classify.js';
import { isDoneStatus } from '../classify/status.js';
import { parseRetryAfter } from '../backoff/retry-after.js';
import { OperationFailedError, ValueNotStoredError } from '../errors.js';
import { fingerprintPayload } from '../operation/fingerprint.js';
import type { ResultSnapshot, Scope } from '../operation/record.js';
import { errorSnapshot, unstoredBytes, valueSnapshot } from '../operation/snapshot.js';
import type { LookupContext, SnapshotLookup } from '../reconcile/lookup.js';
import type { AttemptContext, AttemptOutcome, Engine } from './execute.js';
import { lateCalls } from './late-call.js';
import { checkKeys, checkStrings } from '../options.js';

/**
 * What `client.run` needs to know about the effect.
 *
 * @example
 * ```ts
 * const charge = await client.run(
 *   { action: 'charge', ref: order.id, payload: { amount: 500, currency: 'eur' } },
 *   ({ key }) => stripe.paymentIntents.create({ amount: 500, currency: 'eur' }, { idempotencyKey: key }),
 * )
 * ```
 */
export interface RunSpec<T> {
  /** business action */
  action: string;
  /** stable logical id */
  ref: string;
  /** tenant @default the client's */
  tenant?: string;
  /** adopt this key instead of minting one; an empty string is a `TypeError` */
  key?: string;
  /** what the effect does, as JSON: its canonical form is fingerprinted @default null */
  payload?: unknown;
  /** reconciliation: `{ value }` when the effect happened (the call returns its JSON form, as a replay does), `null` when it did not, throw when unknown (anything else counts as unknown) */
  lookup?: (ctx: LookupContext) => Promise<{ value: T } | null>;
  /**
   * classify an error thrown by the effect; `undefined` keeps the default (any other value is a `TypeError` to the caller).
   * The default never says `not_sent` (a connect error is ambiguous: an SDK's own retry may have followed a request
   * that left); return `'not_sent'` for it only when the effect makes one request
   */
  classify?: (error: unknown, defaultClass: Classification) => OutcomeClass | undefined;
  /** aborts waits and the effect's signal */
  signal?: AbortSignal;
}

/**
 * What the effect of `client.run` receives. Pass `key` and `signal` through
 * to the provider call: the key is the same on every attempt.
 *
 * @example
 * ```ts
 * await client.run({ action: 'send-invoice', ref: invoice.id }, ({ key, signal }: RunContext) =>
 *   billing.invoices.send(invoice.id, { idempotencyKey: key, signal }))
 * ```
 */
export interface RunContext {
  /** pass this to the provider as its idempotency key */
  key: string;
  /** attempt number, counting from 1 */
  attempt: number;
  /**
   * aborts on the attempt timeout, the deadline or the caller's abort; an effect that goes on after it
   * is not called again for the operation by this client until it settles, and what it settles with
   * is the next attempt's outcome (not when it threw by the abort: it honoured the signal, and the next
   * attempt calls it; nor when it settled over `settleMs` before a later call of the operation began)
   */
  signal: AbortSignal;
  /** the operation this attempt belongs to, e.g. for logs */
  scope: Scope;
}

/**
 * `error[key]`, or undefined when it cannot be read (a getter that throws, a revoked Proxy): what
 * reading a thrown value throws must not be classified in place of the value the effect threw.
 */
function field(error: unknown, key: string): unknown {
  try {
    return (error as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/**
 * `error.$metadata[key]` of an AWS SDK v3 (smithy) error, which carries no `status`: its HTTP status is
 * `$metadata.httpStatusCode`, and `$metadata.attempts` the number of requests the SDK's own retries made.
 */
function awsMetadata(error: object, key: 'httpStatusCode' | 'attempts'): unknown {
  const metadata = field(error, '$metadata');
  return typeof metadata === 'object' && metadata !== null ? field(metadata, key) : undefined;
}

function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const first = field(error, 'status');
  const second = typeof first === 'number' ? first : field(error, 'statusCode');
  const status = typeof second === 'number' ? second : awsMetadata(error, 'httpStatusCode');
  return typeof status === 'number' && Number.isInteger(status) && status >= 100 && status <= 599 ? status : undefined;
}

/**
 * AWS error codes (an AWS SDK v3 error's `name`) that answer a 400 for a request not processed, "later":
 * the SDK's own throttling codes, and DynamoDB's TransactionInProgressException (a request under this
 * ClientRequestToken is still running: a 409 "in progress"). By status alone they would be terminal.
 */
const AWS_RETRYABLE_CODES: ReadonlySet<string> = new Set([
  'BandwidthLimitExceeded',
  'EC2ThrottledException',
  'LimitExceededException',
  'PriorRequestNotComplete',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'RequestThrottledException',
  'SlowDown',
  'ThrottledException',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'TransactionInProgressException',
]);

/** An AWS SDK v3 error whose `name` (or `$retryable.throttling`) says "throttled, not processed". */
function awsRetryable(error: object): string | undefined {
  if (awsMetadata(error, 'httpStatusCode') === undefined) return undefined;
  const name = field(error, 'name');
  if (typeof name === 'string' && AWS_RETRYABLE_CODES.has(name)) return name;
  const retryable = field(error, '$retryable');
  return typeof retryable === 'object' && retryable !== null && field(retryable, 'throttling') === true ? 'throttling' : undefined;
}

function headersOf(error: unknown): Headers {
  const own = field(error, 'headers');
  // (an AWS SDK v3 error keeps its response, headers included, in `$response`)
  const response = own === undefined ? field(error, '$response') : undefined;
  const raw = typeof response === 'object' && response !== null ? field(response, 'headers') : own;
  try {
    if (raw instanceof Headers) return raw;
    if (typeof raw === 'object' && raw !== null) return new Headers(raw as Record<string, string>);
  } catch {
    // unusable headers: classify on the status alone
  }
  return new Headers();
}

/**
 * Default classification of an error thrown by an effect: by its HTTP status when it has one (`status`,
 * `statusCode`, or an AWS SDK v3 error's `$metadata.httpStatusCode`; a 2xx or a 303 is ambiguous: it
 * acted; an AWS SDK error's answer after the SDK's own retries is ambiguous unless a conflict), else as a transport error, but never `not_sent`: a connect error at the end of an
 * effect is proof about its last request only, and an SDK's own retry (or a second call) may have
 * followed a first request that left (`spec.classify` can say `not_sent` for an effect of one request).
 */
export function classifyEffectError(error: unknown, now: number): Classification {
  const verdict = classifyThrown(error, now);
  // An AWS SDK v3 error says how many requests the SDK's own retries made (`$metadata.attempts`, 3 by
  // default): the answer describes the last one only, and an earlier one may have acted (a PutItem that
  // committed behind a 500, then ConditionalCheckFailedException on the SDK's retry).
  const requests = typeof error === 'object' && error !== null ? awsMetadata(error, 'attempts') : undefined;
  if (typeof requests === 'number' && requests > 1 && (verdict.class === 'terminal' || verdict.class === 'retryable')) {
    return { class: 'ambiguous', reason: `${verdict.reason} after ${requests} requests (the SDK's own retries): an earlier one may have acted` };
  }
  return verdict;
}

function classifyThrown(error: unknown, now: number): Classification {
  const status = statusOf(error);
  if (status === undefined) {
    const c = classifyError(error, 'awaiting_response');
    return c.class === 'not_sent' ? { class: 'ambiguous', reason: `${c.reason}, thrown by the effect: an earlier request of it may have left` } : c;
  }
  // Thrown after a 2xx (an answer the SDK could not read), or a 303 See Other ("done, look here": an
  // SDK that throws on any non-2xx): it took effect, and its value is lost. (classifyResponse calls a
  // 303 a success: the engine would return this error's message object as the effect's value.)
  if (isDoneStatus(status)) return { class: 'ambiguous', reason: `error after status ${status}` };
  const throttled = status === 400 ? awsRetryable(error as object) : undefined;
  if (throttled !== undefined) {
    const retryAfterMs = parseRetryAfter(headersOf(error), now);
    return { class: 'retryable', reason: `status 400 ${throttled}`, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  }
  // SDK errors carry the provider's error type beside the message (Stripe: type/rawType
  // `idempotency_error`, code): the key-mismatch and in-progress signals may only be there.
  // (AWS SDK v3: the error code is the `name`, IdempotentParameterMismatchException for a reused token)
  const bodyText = ['message', 'type', 'rawType', 'code', 'name']
    .map((key) => field(error, key))
    .filter((v): v is string => typeof v === 'string')
    .join(' ');
  return classifyResponse({ status, headers: headersOf(error), bodyText }, now);
}

/** What a thrown value said: its `message` (an Error or a plain object), else its text, else `fallback`. */
function messageOf(error: unknown, fallback: string): string {
  try {
    const message = (error as { message?: unknown } | null | undefined)?.message;
    return typeof message === 'string' ? message : String(error);
  } catch {
    return fallback; // a throwing getter, or an object String() cannot convert (no prototype)
  }
}

function toJson(value: unknown): string {
  try {
    // JSON.stringify gives undefined, not text, for a function, a symbol or a toJSON returning undefined.
    return JSON.stringify(value) ?? 'null';
  } catch {
    // The effect happened; an unserialisable result (a BigInt, a cycle) must not undo that. Replays get null.
    return 'null';
  }
}

/** A `spec.lookup` answer: `{ value }` (found) or null (absent); anything else is no answer, a TypeError. */
function lookupAnswer(answer: unknown): { value: unknown } | null {
  if (answer === null) return null;
  if (typeof answer !== 'object' || !Object.hasOwn(answer, 'value')) throw new TypeError('spec.lookup must resolve to { value } (found) or null (absent)');
  return answer as { value: unknown };
}

/**
 * The JSON a lookup found for a value snapshot it made, by that snapshot object: a concurrent call
 * that joined the call whose lookup found it shares its record (and this object), never a store's copy.
 */
const foundJson = new WeakMap<ResultSnapshot, string>();

/**
 * A later call's lookup for a value its record did not store, bounded by `attemptTimeoutMs`, the call's
 * deadline (`deadlineAt`), the client's close and the caller's signal (whose abort rejects with its reason): `{ value }` found, `none` for `null`, else `{ error }` (failed, too slow, or no answer).
 */
async function askForValue(
  engine: Engine,
  signal: AbortSignal | undefined,
  deadlineAt: number,
  lookup: (signal: AbortSignal) => Promise<unknown>,
): Promise<{ value: unknown } | { error: unknown } | { none: true }> {
  const { attemptTimeoutMs, deadlineMs } = engine.opts.retry;
  const left = deadlineAt - engine.opts.now();
  const limit = left < attemptTimeoutMs ? `the call's deadlineMs (${deadlineMs} ms)` : `attemptTimeoutMs (${attemptTimeoutMs} ms)`;
  const stop = new AbortController();
  // (chained past the platform's timer limit, where a plain setTimeout fires after 1 ms)
  const cancelTimer = longTimeout(() => stop.abort(new Error(`the lookup took longer than ${limit}`)), Math.min(attemptTimeoutMs, left));
  const onAbort = (): void => stop.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  // (a client.close() whose waitMs ran out stops it, as it stops the calls still running)
  const unhook = engine.whenClosed((reason) => stop.abort(reason));
  try {
    signal?.throwIfAborted();
    // (anything but { value } or null is not an answer: a failure, as reconciliation takes it)
    const answer = lookupAnswer(await untilAborted(lookup(stop.signal), stop.signal));
    return answer === null ? { none: true } : { value: answer.value };
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    return { error };
  } finally {
    cancelTimer();
    unhook();
    signal?.removeEventListener('abort', onAbort);
  }
}

/** `client.run`. */
/** Every key of {@link RunSpec}: any other is a misspelling, refused. */
const SPEC_KEYS = ['action', 'ref', 'tenant', 'key', 'payload', 'lookup', 'classify', 'signal'];

export async function onceRun<T>(engine: Engine, spec: RunSpec<T>, effect: (ctx: RunContext) => Promise<T>): Promise<T> {
  checkKeys('client.run', 'spec', spec, SPEC_KEYS);
  const scope: Scope = { tenant: spec.tenant ?? engine.opts.tenant, action: spec.action, ref: spec.ref };
  checkStrings('client.run', 'spec', { ...scope });
  if (spec.key !== undefined && (typeof spec.key !== 'string' || spec.key === '')) throw new TypeError('client.run: spec.key must be a non-empty string (or left out: oncefetch mints one)');
  if (typeof effect !== 'function') throw new TypeError('client.run: effect must be a function');
  const fingerprint = await fingerprintPayload(spec.payload ?? null);
  const cap = engine.opts.maxStoredBodyBytes;
  const userLookup = spec.lookup;
  // what this call's own lookup found, for this call alone when the record cannot hold it
  let found: { json: string; snapshot: ResultSnapshot } | undefined;
  const lookup: SnapshotLookup | undefined =
    userLookup === undefined
      ? undefined
      : async (ctx) => {
          // (anything but { value } or null is not an answer: reconciled as "unknown", never as found or absent)
          const answer = lookupAnswer(await userLookup(ctx));
          if (answer === null) return null;
          const json = toJson(answer.value);
          found = { json, snapshot: valueSnapshot(json, 200, 'lookup', cap) };
          if (found.snapshot.bodyTruncated) foundJson.set(found.snapshot, json);
          return found.snapshot;
        };
  const calls = lateCalls(engine, scope, fingerprint);
  const send = async (ctx: AttemptContext): Promise<AttemptOutcome> => {
    const settled = await calls.call(ctx, () => effect({ key: ctx.key, attempt: ctx.attempt, signal: ctx.signal, scope }));
    const late = settled.late === true ? 'late, the effect of an earlier attempt: ' : '';
    if ('value' in settled) {
      const value = settled.value as T;
      return { classification: { class: 'success', reason: `${late}effect resolved` }, snapshot: valueSnapshot(toJson(value), 200, 'attempt', cap), live: { value }, answers: settled.answers };
    }
    const error = settled.error;
    const computed = classifyEffectError(error, engine.opts.now());
    if (late !== '') computed.reason = late + computed.reason;
    let classification = computed;
    let fault: unknown;
    try {
      classification = spec.classify === undefined ? computed : chosenClass(spec.classify(error, computed), computed, 'spec.classify');
    } catch (thrown) {
      fault = thrown; // the default stands; the caller gets its classify's error
    }
    const snapshot = errorSnapshot(messageOf(error, computed.reason), statusOf(error) ?? 0, cap);
    return { classification, snapshot, live: { error }, fault, cause: error, thrown: error, answers: settled.answers };
  };
  // (the deadline execute starts, which also bounds the lookup asked for a value not stored)
  const deadlineAt = engine.opts.now() + engine.opts.retry.deadlineMs;
  const result = await engine.execute({ scope, fingerprint, callerKey: spec.key, request: null, send, lookup, signal: spec.signal });
  // The operation ended: nothing is sent for it again, so no earlier call of the effect is waited for.
  calls.ended(result.record.key);
  const live = result.live as { value: T } | { error: unknown } | undefined;
  if (result.record.state === 'failed') {
    if (live !== undefined && 'error' in live) throw live.error;
    let said: string | undefined;
    try {
      said = (JSON.parse(result.snapshot.body) as { error?: string }).error;
    } catch {
      said = '(its message was not stored: maxStoredBodyBytes is too small for any)'; // an empty body
    }
    throw new OperationFailedError(`operation ${scope.tenant}/${scope.action}/${scope.ref} failed earlier: ${said ?? 'unknown error'}`, {
      scope,
      status: result.snapshot.status === 0 ? undefined : result.snapshot.status,
    });
  }
  if (live !== undefined && 'value' in live) return live.value;
  const snapshot = result.snapshot;
  // (a value not stored: not a failed run's cut message that the caller's classify called a success)
  const bytes = unstoredBytes(snapshot);
  if (bytes !== undefined) {
    // This call's own lookup found the value the record could not hold (or the lookup of the call it
    // joined): its JSON form, as a replay gives.
    if (!result.replayed && found !== undefined && found.snapshot.body === snapshot.body) return JSON.parse(found.json) as T;
    const joined = foundJson.get(snapshot);
    if (joined !== undefined) return JSON.parse(joined) as T;
    // A later call: its lookup, if it has one, is asked for the value (as reconciliation asks the provider).
    const { record } = result;
    const asked = userLookup === undefined ? undefined : await askForValue(engine, spec.signal, deadlineAt, async (signal) => userLookup({ scope, key: record.key, record, signal }));
    if (asked !== undefined && 'value' in asked) return JSON.parse(toJson(asked.value)) as T;
    const said = asked === undefined ? ' Read the value from the provider (e.g. with a lookup for this action)' : ` Its lookup, asked for it, ${'error' in asked ? 'failed' : 'found none'}: read the value from the provider`;
    throw new ValueNotStoredError(
      `operation ${scope.tenant}/${scope.action}/${scope.ref} succeeded earlier, but its value (${bytes} bytes of JSON) was larger than ` +
        `maxStoredBodyBytes and was not stored; the effect was not run again.${said}, and raise maxStoredBodyBytes so that later values this large are stored.`,
      { scope, bytes, cause: asked !== undefined && 'error' in asked ? asked.error : undefined },
    );
  }
  return JSON.parse(snapshot.body) as T;
}
