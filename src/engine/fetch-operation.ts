/**
 * `client.fetch`: turns a fetch call into an {@link OperationSpec} — scope,
 * fingerprint over the exact bytes that will be sent, one attempt through the
 * transport with the key header, classification, and the lookup adapter.
 *
 * @module
 */
import type { ClassifyOverride } from '../classify/classify.js';
import { applyOverride, classifyError, classifyResponse, needsBody } from '../classify/classify.js';
import { isSuccessStatus, KEPT_METHOD } from '../classify/status.js';
import type { Classification } from '../classify/classify.js';
import { AmbiguousOutcomeError } from '../errors.js';
import { captureBody, readBody } from '../operation/body.js';
import { elementFingerprints, fingerprintRequest, normaliseUrl } from '../operation/fingerprint.js';
import { recordId } from '../operation/record.js';
import type { OperationRecord, Scope } from '../operation/record.js';
import { buildResponse, responseSnapshot } from '../operation/snapshot.js';
import type { LiveBody } from '../operation/snapshot.js';
import type { ResolvedOptions } from '../options.js';
import { checkKeys, checkStrings } from '../options.js';
import type { LookupFn, SnapshotLookup } from '../reconcile/lookup.js';
import type { AttemptContext, AttemptOutcome, Engine, OperationSpec } from './execute.js';
import { lateCalls } from './late-call.js';
import type { LateCalls } from './late-call.js';

/**
 * Per-call once-only options (`init.once`).
 *
 * @example
 * ```ts
 * await client.fetch(url, { method: 'POST', body, once: { action: 'create-order', ref: task.id, lookup } })
 * ```
 */
export interface OnceOptions {
  /** business action @default `${METHOD} ${origin}${path}` */
  action?: string;
  /** stable logical id; survives restarts @default the caller's Idempotency-Key, else a fresh UUID (once-only within this call and for recover()) */
  ref?: string;
  /** tenant @default the client's */
  tenant?: string;
  /** reconciliation after an ambiguous outcome @default the client's `lookups[action]`, when the call gives its ref (`ref`, or an `Idempotency-Key` header) */
  lookup?: LookupFn;
  /** override the default classification per call @default undefined (the built-in classification) */
  classify?: ClassifyOverride;
  /**
   * Aborting it cancels the operation (like `client.cancel`): before any send it ends
   * `cancelled` and the call rejects with `OperationCancelledError`; an attempt already on
   * the wire is not torn down — if it delivers, the call returns its response. A call that
   * joined a running one of the same client (same scope and payload) cancels that operation
   * so too, and ends as the call it joined does (its response, if delivery won).
   *
   * @default undefined
   */
  signal?: AbortSignal;
}

/**
 * `RequestInit` plus `once`: an options object, `true` for defaults, or
 * `false` to bypass oncefetch (a plain `fetch`, even for a POST).
 *
 * @example
 * ```ts
 * const init: OnceRequestInit = { method: 'POST', body, once: { action: 'create-order', ref: task.id } }
 * const res = await client.fetch(url, init)
 * await client.fetch(healthUrl, { method: 'POST', once: false }) // never once-only
 * ```
 */
export type OnceRequestInit = RequestInit & { once?: OnceOptions | boolean | undefined };

const PASSTHROUGH = ['redirect', 'credentials', 'mode', 'cache', 'referrer', 'referrerPolicy', 'integrity', 'keepalive', 'priority', 'dispatcher'] as const;

/** The request, normalised from `fetch(input, init)`. */
interface PlainRequest {
  url: string;
  method: string;
  headers: Headers;
  body: BodyInit | null | undefined;
  /** the Request whose own body is the body, read only by a once-only call */
  bodyOf?: Request | undefined;
  signal: AbortSignal | undefined;
  rest: Record<string, unknown>;
}

function plain(input: string | URL | Request, init: OnceRequestInit | undefined): PlainRequest {
  const rest: Record<string, unknown> = {};
  if (input instanceof Request) {
    for (const name of PASSTHROUGH) if (name in input) rest[name] = (input as unknown as Record<string, unknown>)[name];
    // As `new Request(input, init)`: init's headers replace the Request's; a null body or signal in
    // init keeps the Request's body but drops its signal.
    const headers = copyHeaders(init?.headers ?? input.headers);
    const bodyOf = init?.body == null && input.body !== null ? input : undefined;
    copyRest(init, rest);
    const signal = init?.signal === undefined ? input.signal : (init.signal ?? undefined);
    return { url: input.url, method: (init?.method ?? input.method).toUpperCase(), headers, body: init?.body ?? undefined, bodyOf, signal, rest };
  }
  copyRest(init, rest);
  const url = input instanceof URL ? input.href : String(input);
  return { url, method: (init?.method ?? 'GET').toUpperCase(), headers: copyHeaders(init?.headers), body: init?.body, signal: init?.signal ?? undefined, rest };
}

/** Headers copied entry by entry: a Headers class patched by a test tool (msw) copies another Headers only in part. */
function copyHeaders(headers: HeadersInit | undefined): Headers {
  return new Headers(headers instanceof Headers ? [...headers] : headers);
}

function copyRest(init: OnceRequestInit | undefined, rest: Record<string, unknown>): void {
  if (init === undefined) return;
  for (const name of PASSTHROUGH) if ((init as Record<string, unknown>)[name] !== undefined) rest[name] = (init as Record<string, unknown>)[name];
}

/** Secrets and framing are never part of a stored URL: keep origin and path only. */
function storedUrl(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}${u.search === '' ? '' : '?…'}`;
}

/** `client.fetch`: once-only when asked or by method, plain fetch otherwise. */
/**
 * `client.wrap()`'s memory of its calls with a minted ref whose outcome stayed unknown (see wrap.ts):
 * `enter` refuses a call of the same payload, again with no ref of its own, before anything is recorded.
 */
export interface UnknownOutcomes {
  /**
   * Waits while a call of this payload is running (under `signal`), then refuses this one if an earlier
   * call's outcome stayed unknown; else marks it running. The function returned ends that mark: called
   * once the call has ended, after `remember`. `retryCount`: a Stainless SDK's own retry (`x-stainless-retry-count`
   * ≥ 1), refused at once, its cause the earlier call's error when that call's outcome stayed unknown.
   */
  enter(id: string, method: string, signal: AbortSignal | undefined, retryCount?: string, elements?: () => Promise<string[]>): Promise<() => void>;
  /** `error`: what the call threw, the refusal's `cause`; `elements`: the ids of a JSON-array body's elements, each refused too */
  remember(id: string, error: unknown, elements?: readonly string[]): void;
}

export async function onceFetch(engine: Engine, input: string | URL | Request, init?: OnceRequestInit, unknown?: UnknownOutcomes, retryCount?: string): Promise<Response> {
  const opts = engine.opts;
  const req = plain(input, init);
  const callerKey = req.headers.get(opts.keyHeader) ?? undefined;
  const once = init?.once;
  const isOnce = once === false ? false : once !== undefined || callerKey !== undefined || opts.onceMethods.has(req.method);
  if (!isOnce) {
    const { once: _ignored, ...passthrough } = init ?? {};
    return opts.fetch(input, passthrough);
  }
  // Read (from a copy, under the cap) only now: a passed-through upload is not buffered first.
  if (req.bodyOf !== undefined) req.body = req.bodyOf.clone().body;
  const onceOptions: OnceOptions = checkOnce(once);
  const key = unquote(callerKey);
  checkKeyOnce(init?.headers, key, callerKey, opts.keyHeader);
  if (key === '') throw new TypeError(`client.fetch: the ${opts.keyHeader} header is empty; give it a non-empty key, or leave it out and oncefetch mints one`);
  const normalised = normaliseUrl(req.url); // an invalid URL, or one with credentials, is a TypeError here
  const u = new URL(normalised);
  checkSendable(req, u.protocol);
  const captured = await captureBody(req.body, opts.maxBodyBytes);
  // A browser refuses a keepalive body over 64 KiB with the "Failed to fetch" of a lost answer (Node ignores keepalive).
  if (req.rest['keepalive'] === true && browserFetch() && (captured.bytes?.byteLength ?? 0) > 65_536) {
    throw new TypeError('client.fetch: a browser refuses a keepalive request whose body is over 64 KiB');
  }
  const given = req.headers.get('content-type');
  if (typeof FormData !== 'undefined' && req.body instanceof FormData && given !== null && given !== captured.impliedContentType) {
    // A FormData body carries its own Content-Type, with the boundary it was serialised under.
    throw new TypeError(
      `client.fetch: a FormData body sets its own multipart Content-Type (with its boundary); remove the Content-Type header${input instanceof Request && !new Headers(init?.headers).has('content-type') ? ' (the Request carries one from its own body)' : ''}`,
    );
  }
  if (captured.impliedContentType !== undefined && !req.headers.has('content-type')) {
    req.headers.set('content-type', captured.impliedContentType);
  }
  const fingerprint = await fingerprintRequest({ method: req.method, url: normalised, body: captured.bytes, contentType: req.headers.get('content-type') });
  // A ref minted here (no `once.ref`, no key header) is minted as the key too, so the record tells it (`refMinted`).
  const mintedRef = onceOptions.ref === undefined && key === undefined ? globalThis.crypto.randomUUID() : undefined;
  const scope: Scope = {
    tenant: onceOptions.tenant ?? opts.tenant,
    action: onceOptions.action ?? `${req.method} ${u.origin}${u.pathname}`,
    ref: onceOptions.ref ?? key ?? (mintedRef as string),
  };
  const unknownId = mintedRef === undefined ? undefined : `${scope.tenant}\n${fingerprint}`;
  // A batch's elements, each an id as if sent alone: computed only when an unknown outcome is remembered, or to check against one.
  let elements: Promise<string[]> | undefined;
  const elementIds = (): Promise<string[]> =>
    (elements ??= elementFingerprints({ method: req.method, url: normalised, body: captured.bytes, contentType: req.headers.get('content-type') }).then((fps) => fps.map((fp) => `${scope.tenant}\n${fp}`)));
  const leave = unknownId === undefined ? undefined : await unknown?.enter(unknownId, req.method, req.signal, retryCount, elementIds);
  try {
    // A custom fetch may ignore its signal: its request, still out after its attempt ended, is the next attempt's.
    const calls = lateCalls(engine, scope, fingerprint, cancelBody);
    // An own property only: an action named 'constructor' or 'toString' has no lookup of Object.prototype's.
    // The engine asks the registered one about no ref oncefetch minted (`lookupOf`): the provider never saw it.
    const lookupFn: LookupFn | undefined = onceOptions.lookup ?? (Object.hasOwn(opts.lookups, scope.action) ? opts.lookups[scope.action] : undefined);
    const spec: OperationSpec = {
      scope,
      fingerprint,
      callerKey: key,
      mintedRef,
      request: { method: req.method, url: storedUrl(req.url) },
      signal: req.signal,
      cancelSignal: onceOptions.signal,
      lookup: lookupFn === undefined ? undefined : responseLookup(lookupFn, opts),
      lookupRegistered: onceOptions.lookup === undefined,
      send: (ctx) => sendAttempt(opts, req, captured.bytes, onceOptions.classify, calls, ctx),
    };
    const result = await engine.execute(spec).catch(async (error: unknown) => {
      const thrown = ownCause(error);
      // A record that may have taken effect (a store that cannot say counts as one): a keyless resend is refused.
      if (unknown !== undefined && unknownId !== undefined) {
        const open = await opts.store.get(recordId(scope)).then((r) => r !== undefined && mayHaveActed(r), () => true);
        if (open) unknown.remember(unknownId, thrown, await elementIds());
      }
      throw thrown;
    });
    // The operation ended: nothing is sent for it again, so no earlier request of it is waited for.
    calls.ended(result.record.key);
    return buildResponse(result.snapshot, result.live as LiveBody | undefined, result.replayed);
  } finally {
    leave?.();
  }
}

/**
 * Whether a record a call left may have taken effect: open (ambiguous, in flight), or pending again after an
 * attempt of unknown outcome (cleared for a same-key resend by the provider's dedupe, then out of attempts,
 * time or budget). A keyless resend of it would be a new key, which no dedupe ties to that attempt.
 */
function mayHaveActed(r: OperationRecord): boolean {
  return r.state === 'ambiguous' || r.state === 'in_flight' || (r.state === 'pending' && r.attempts.some((a) => a.class === 'ambiguous'));
}

/** A late response nobody takes: its body is cancelled, so its connection goes back to the pool. */
/**
 * Frees `res`'s body unread: cancelled; another fetch's body without `cancel()` (node-fetch's Node
 * stream, piped from the socket's message: destroying it would leave the message unread and the
 * socket taken) is read to its end. A cancel that throws frees nothing more.
 */
const cancelBody = (res: Response): void => {
  const body = res.body as { cancel?: () => unknown } | null | undefined;
  try {
    Promise.resolve(typeof body?.cancel === 'function' ? body.cancel() : res.arrayBuffer()).catch(() => undefined);
  } catch {
    // a shape's body whose cancel throws
  }
};

/**
 * Calls that joined one execution share its error; a body reads once. So each caller gets its own
 * copy of an ambiguous outcome whose cause is the response (a 500, say), with a clone of it: the
 * shared original is never read, so every clone can be (as each gets its own success Response).
 */
function ownCause(error: unknown): unknown {
  try {
    if (!(error instanceof AmbiguousOutcomeError && error.cause instanceof Response)) return error;
  } catch {
    return error; // a caller's abort reason, or a cause, whose prototype cannot be read (a revoked Proxy)
  }
  const own = new AmbiguousOutcomeError(error.message, { scope: error.scope, cause: error.cause.clone() });
  if (error.stack !== undefined) own.stack = error.stack;
  return own;
}

/** A caller's key, unquoted when it is an RFC 8941 string (`"..."`, with backslash escapes). */
function unquote(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  const m = /^"((?:[^"\\]|\\["\\])*)"$/.exec(key.trim());
  return m?.[1] === undefined ? key.trim() : m[1].replace(/\\(["\\])/g, '$1');
}

/**
 * The caller's key header given twice (two casings in an object, two entries, `Headers.append`): fetch
 * joins the values with ", " and the joined text would be the key, one nobody meant. Refused, equal
 * values too, before anything is recorded: by its entries when they can be read, else by the comma in
 * the joined value (outside an RFC 8941 quoted string), which any HTTP hop could split the same way.
 */
function checkKeyOnce(raw: HeadersInit | undefined, key: string | undefined, given: string | undefined, name: string): void {
  const where = `client.fetch: the ${name} header`;
  if (raw !== undefined && !(raw instanceof Headers)) {
    const pairs = (Symbol.iterator in raw ? [...(raw as Iterable<string[]>)] : Object.entries(raw)).filter((p) => String(p[0]).toLowerCase() === name.toLowerCase());
    if (pairs.length > 1) throw new TypeError(`${where} is given ${pairs.length} times (${pairs.map((p) => `${p[0]}: ${p[1]}`).join(', ')}): fetch would join them into one key. Give it once`);
  }
  if (key === given?.trim() && key?.includes(',') === true) {
    throw new TypeError(`${where} holds a comma (${key}), as a header given twice does (Headers.append). Give one key without a comma, or RFC 8941 quoted`);
  }
}

/** `key` as an RFC 8941 string: quoted, with backslash and double quote escaped. */
export function quoteKey(key: string): string {
  return `"${key.replace(/["\\]/g, '\\$&')}"`;
}

/** Every key of {@link OnceOptions} (wrap.ts reads `ref` too): any other is a misspelling, refused. */
const ONCE_KEYS = ['action', 'ref', 'tenant', 'lookup', 'classify', 'signal'];

/** `once` as given: `true`/`undefined` (defaults) or an options object with only its keys, whose fields have their types. */
function checkOnce(once: OnceOptions | boolean | undefined): OnceOptions {
  if (once === undefined || once === true) return {};
  if (typeof once !== 'object' || once === null) throw new TypeError(`client.fetch: once must be an options object, true or false, got ${once === null ? 'null' : typeof once}`);
  checkKeys('client.fetch', 'once', once, ONCE_KEYS);
  for (const name of ['tenant', 'action', 'ref'] as const) if (once[name] !== undefined) checkStrings('client.fetch', 'once', { [name]: once[name] });
  for (const name of ['lookup', 'classify'] as const) {
    if (once[name] !== undefined && typeof once[name] !== 'function') throw new TypeError(`client.fetch: once.${name} must be a function`);
  }
  const signal: unknown = once.signal;
  if (signal !== undefined && !(typeof signal === 'object' && signal !== null && typeof (signal as AbortSignal).aborted === 'boolean' && typeof (signal as AbortSignal).addEventListener === 'function')) {
    throw new TypeError('client.fetch: once.signal must be an AbortSignal');
  }
  return once;
}

/** Methods fetch refuses to send (Fetch standard, "forbidden method"). */
const FORBIDDEN_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);

/**
 * What fetch would refuse before sending, refused before anything is recorded: otherwise the
 * refusal would read as an attempt of unknown outcome and leave the ref ambiguous for good.
 */
function checkSendable(req: PlainRequest, protocol: string): void {
  if (protocol !== 'http:' && protocol !== 'https:') throw new TypeError(`client.fetch: a once-only request needs an http: or https: URL, got ${protocol}`);
  if (FORBIDDEN_METHODS.has(req.method)) throw new TypeError(`client.fetch: fetch does not send ${req.method} requests`);
  // A no-cors request drops every header that is not CORS-safelisted, the key among them, and its
  // response is opaque: it can be neither deduplicated nor classified.
  if (req.rest['mode'] === 'no-cors') throw new TypeError(`client.fetch: a once-only request cannot use mode 'no-cors' (the browser drops the key header and hides the response)`);
  if ((req.method === 'GET' || req.method === 'HEAD') && req.body !== undefined && req.body !== null) {
    throw new TypeError(`client.fetch: a ${req.method} request cannot have a body`);
  }
}

/** Adapts a user lookup (Response | null) to a stored snapshot. */
export function responseLookup(lookup: LookupFn, opts: ResolvedOptions): SnapshotLookup {
  return async (ctx) => {
    const res = await lookup(ctx);
    if (res === null) return null;
    // Another fetch's Response class (undici's, a polyfill's) fails `instanceof`: its shape is enough.
    const like = res as Partial<Response> | undefined;
    if (!(res instanceof Response || (typeof like?.status === 'number' && typeof like.arrayBuffer === 'function' && typeof like.headers?.forEach === 'function'))) {
      throw new TypeError('lookup must resolve to a Response (found) or null (absent)');
    }
    // Only a status a response can be replayed with (not Response.error()'s 0): else the record would
    // settle on a result every later call fails to rebuild.
    if (!Number.isInteger(res.status) || res.status < 200 || res.status > 599) {
      // (a browser's `redirect: 'manual'` hands back an opaque redirect, status 0: say so, as for a 3xx below)
      const why = like?.type === 'opaqueredirect' ? ' (an opaque redirect: a redirect the lookup did not follow)' : '';
      throw new TypeError(`lookup resolved to a Response with status ${String(res.status)}${why}: a found effect needs a status from 200 to 299`);
    }
    // A 4xx or 5xx is the lookup endpoint's own failure (a 500, a 401 of a wrong token, a wrong path's
    // 404), a 3xx a redirect it did not follow (`redirect: 'manual'`: a 302 to a login page), not the
    // effect: "found" would settle the record on it for good while nothing happened (measured: a 302,
    // `succeeded` with 0 orders). Unknown, as a throw; its body given up so its connection is freed.
    if (!isSuccessStatus(res.status)) {
      cancelBody(res);
      const why = res.status < 400 && res.status !== 304 ? ": a redirect the lookup did not follow (return the order's resource itself, checked to be the order and not a login page, or null for absent)" : '';
      throw new Error(`lookup resolved to a ${res.status} Response${why}; return null for absent, a Response only for a found effect (status 200–299), throw for unknown`);
    }
    // read through its reader: a lookup given up (the deadline, the caller's abort) cancels its source
    const body = await readBody(res, ctx.signal, (read) => {
      const giveUp = (): void => read.cancel(ctx.signal.reason);
      ctx.signal.addEventListener('abort', giveUp, { once: true });
      return () => ctx.signal.removeEventListener('abort', giveUp);
    });
    const snapshot = responseSnapshot(res, body, 'lookup', opts.sensitiveHeaders, opts.maxStoredBodyBytes);
    return typeof snapshot.statusText === 'string' ? snapshot : { ...snapshot, statusText: '' };
  };
}

/** `navigator.onLine` in a browser or worker; undefined elsewhere (Node). */
const onLine = (): boolean | undefined => (globalThis as { navigator?: { onLine?: boolean } }).navigator?.onLine;

/**
 * A browser's fetch: a page, a worker, an Electron renderer. jsdom and happy-dom give Node (or Bun)
 * a `navigator.onLine` too, but there Node's fetch sends (`process.versions.node`, which a renderer
 * with Node integration also has, beside `electron`, while its fetch is Chromium's).
 */
const browserFetch = (): boolean => {
  const v = (globalThis as { process?: { versions?: { node?: string; electron?: string } } }).process?.versions;
  return onLine() !== undefined && (v?.node === undefined || v.electron !== undefined);
};

/**
 * A rejected fetch's class. A browser rejects a CORS refusal (a preflight that does not allow the key
 * header) with the TypeError of a network failure; one that went offline while the request was out
 * (a phone losing its network) rejects with the same, and the CORS hint would mislead there.
 */
function rejected(error: unknown, keyHeader: string): Classification {
  const c = classifyError(error, 'awaiting_response');
  if (!browserFetch() || !c.reason.startsWith('unknown error: TypeError')) return c;
  const hint = onLine() === false ? 'the browser was offline when it failed: it may have been sent' : `or CORS: does the preflight allow ${keyHeader}?`;
  return { ...c, reason: `${c.reason} (${hint})` };
}

/** Media types of a 2xx passed through as it arrives: `text/event-stream`, and JSON lines (`application/x-ndjson`, `application/ndjson`, `application/jsonl`, `application/x-jsonl`, `application/x-jsonlines`, `application/jsonlines`, `application/stream+json`). */
const STREAMED = /^\s*(?:text\/event-stream|application\/(?:x-)?(?:ndjson|jsonl|jsonlines)|application\/stream\+json)\s*(?:;|$)/i;

/**
 * Streams handed to a caller: once collected unread, their abort listener is removed and their source
 * cancelled, as fetch's own Response is. (`release` reaches the stream only weakly: a held value that
 * reached it would keep it from ever being collected.)
 */
const unread = new FinalizationRegistry<(reason: string) => void>((release) => release('the response was garbage collected unread'));

/**
 * `body` for the live caller, a chunk per read; the caller's abort errors it and cancels the source.
 * Not a pipe: a pipe holds the body locked and reachable, so a transport's own collection of an
 * unread body (undici's fetch has one) never comes, and the connection stays open for good.
 * The abort listener reaches the stream's controller through a WeakRef: agents pass one signal to
 * every call, and a stream never read must not stay reachable from it, nor its listener stay on it.
 */
function passThrough(body: ReadableStream<Uint8Array>, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const token = {};
  let controllerRef: WeakRef<ReadableStreamDefaultController<Uint8Array>> | undefined;
  let listening = false;
  const settle = (): void => {
    unread.unregister(token);
    if (listening) {
      listening = false;
      signal?.removeEventListener('abort', onAbort);
    }
  };
  const release = (reason: unknown): void => {
    settle();
    reader.cancel(reason).catch(() => undefined);
  };
  function onAbort(): void {
    const reason: unknown = signal?.reason;
    controllerRef?.deref()?.error(reason);
    release(reason);
  }
  const stream = new ReadableStream<Uint8Array>(
    {
      start: (controller) => {
        if (signal === undefined) return;
        controllerRef = new WeakRef(controller);
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        listening = true;
      },
      pull: async (controller) => {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          settle();
          throw error;
        }
        if (next.done) {
          settle();
          controller.close();
        } else {
          controller.enqueue(next.value);
        }
      },
      cancel: (reason) => {
        settle();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  unread.register(stream, release, token);
  return stream;
}

const OPAQUE_REDIRECT = "opaque redirect: the provider answered with a redirect that redirect 'manual' hides in a browser; use redirect 'follow' for once-only calls";
const OPAQUE = "opaque response (status 0: mode 'no-cors', a service worker's): the provider's answer is hidden; it may have acted";
const NETWORK_ERROR = 'the fetch resolved with Response.error() (status 0); the request may have reached the provider';

/** The class of an outcome, by the caller's classify when it gives one; its error, when it throws, as `fault`. */
type Decide = (input: Parameters<typeof applyOverride>[1], computed: Classification) => { classification: Classification; fault?: unknown };

async function sendAttempt(
  opts: ResolvedOptions,
  req: PlainRequest,
  body: Uint8Array | undefined,
  override: ClassifyOverride | undefined,
  calls: LateCalls,
  ctx: AttemptContext,
): Promise<AttemptOutcome> {
  const headers = new Headers(req.headers);
  headers.set(opts.keyHeader, opts.quoteKey ? quoteKey(ctx.key) : ctx.key);
  // The caller's classify may throw (or return no class): the default stands, the error goes to the caller.
  const decide: Decide = (input, computed) => {
    try {
      return { classification: applyOverride(override, input, computed) };
    } catch (fault) {
      return { classification: computed, fault };
    }
  };
  // Offline, a browser fails every request with the "Failed to fetch" of a lost answer: do not send.
  if (onLine() === false) {
    return { classification: { class: 'not_sent', reason: 'offline (navigator.onLine is false)' }, snapshot: null, live: new TypeError('Failed to fetch: offline') };
  }
  // A fresh copy each attempt: exactly the caller's bytes, never a consumed stream. Not sent while an
  // earlier attempt's request is still out (a custom fetch that ignored its signal): its outcome is this attempt's.
  const settled = await calls.call(ctx, () => opts.fetch(req.url, { ...req.rest, method: req.method, headers, body: body?.slice() ?? null, signal: ctx.signal }));
  const outcome = 'error' in settled ? { ...decide({ error: settled.error }, rejected(settled.error, opts.keyHeader)), snapshot: null, live: settled.error, cause: settled.error } : await answered(opts, req, settled.value, override, decide, ctx);
  if (settled.late === true) {
    outcome.classification = { ...outcome.classification, reason: `late, the request of an earlier attempt: ${outcome.classification.reason}` };
    outcome.answers = settled.answers;
  }
  return outcome;
}

/**
 * `response`'s body, whole (see {@link readBody}). While it is read, giving the attempt up (its
 * timeout, the deadline, the caller's abort: `ctx.abandoned`) cancels its source with the abort's
 * reason, and the attempt ends ambiguous, saying so: the status came, the body did not end.
 */
async function readWhole(opts: ResolvedOptions, response: Response, ctx: AttemptContext): Promise<Uint8Array> {
  const bytes = await readBody(response, ctx.signal, (read) => {
    ctx.abandoned = (): AttemptOutcome => {
      const reason: unknown = ctx.signal.reason;
      read.cancel(reason);
      let said = 'aborted';
      try {
        said = reason instanceof Error ? reason.message : String(reason);
      } catch {
        // a reason that cannot be read (a revoked Proxy)
      }
      const why = `status ${response.status} came, but its body had not ended (${read.size} bytes read) when the attempt was given up: ${said}`;
      const snapshot = { ...responseSnapshot(response, new Uint8Array(0), 'attempt', opts.sensitiveHeaders, opts.maxStoredBodyBytes), bodyTruncated: true };
      return { classification: { class: 'ambiguous', reason: `reading body: ${why}` }, snapshot, live: reason, cause: new Error(why, { cause: reason }) };
    };
  });
  ctx.abandoned = undefined;
  return bytes;
}

/** The outcome of an attempt the provider answered with `response`. */
async function answered(
  opts: ResolvedOptions,
  req: PlainRequest,
  response: Response,
  override: ClassifyOverride | undefined,
  decide: Decide,
  ctx: AttemptContext,
): Promise<AttemptOutcome> {
  // A 2xx stream (server-sent events, or JSON lines as Ollama streams them) is handed over as it
  // arrives, never read whole first: its 2xx says the effect happened (success, headers stored, body
  // not: a replay is marked truncated), and a drop mid-stream reaches the caller's reader, never a
  // resend. The caller's abort still ends it. One declared empty (Content-Length: 0) is read whole
  // instead, so its snapshot holds the bytes that came, not the header: a custom fetch may say 0 and
  // give bytes. A passed-through stream's record is terminal (its lease released) before the stream is
  // read: storing what its end showed (empty, or short enough) would cost one more durable write per
  // stream, after the call returned, rewriting a terminal result (no state allows it today). Marked
  // in doubt is the safe side: a stream with no Content-Length stays marked, even when it was empty.
  // (`body` last: reading it makes a buffered response build a stream, ~10 µs a call)
  // Response.error() is how fetch says "network error" (a page's fetch rejects with a TypeError on it):
  // ended as that rejection, after the request may have left; no Response can be rebuilt with its status 0.
  if (response.type === 'error') {
    const error = new TypeError(`Failed to fetch: ${NETWORK_ERROR}`, { cause: response });
    return { ...decide({ error }, { class: 'ambiguous', reason: `network error: ${NETWORK_ERROR}` }), snapshot: null, live: error, cause: error };
  }
  if (override === undefined && isSuccessStatus(response.status) && STREAMED.test(response.headers.get('content-type') ?? '') && response.headers.get('content-length')?.trim() !== '0' && response.body !== null) {
    const stream = passThrough(response.body, req.signal);
    const snapshot = { ...responseSnapshot(response, new Uint8Array(0), 'attempt', opts.sensitiveHeaders, opts.maxStoredBodyBytes), bodyTruncated: true };
    const live: LiveBody = { bytes: new Uint8Array(0), stream, headers: response.headers, url: response.url, redirected: response.redirected };
    return { classification: { class: 'success', reason: `status ${response.status}, streamed` }, snapshot, live };
  }
  let bytes: Uint8Array;
  try {
    bytes = await readWhole(opts, response, ctx);
  } catch (error) {
    // The status came, the body broke off: the attempt records the status, with no result to replay.
    return { ...decide({ error }, classifyError(error, 'reading_body')), snapshot: null, status: response.status, live: error, cause: error };
  }
  const snapshot = responseSnapshot(response, bytes, 'attempt', opts.sensitiveHeaders, opts.maxStoredBodyBytes);
  const live: LiveBody = { bytes, headers: response.headers, url: response.url, redirected: response.redirected };
  // A browser hides a redirect under redirect 'manual', and any answer under mode 'no-cors' (status 0, no
  // headers, no body): the provider answered, maybe after acting (a 303, a 2xx), maybe not (a 307). Nothing to
  // classify, store or replay.
  const opaque = response.type === 'opaqueredirect' ? OPAQUE_REDIRECT : response.type === 'opaque' ? OPAQUE : undefined;
  if (opaque !== undefined) return { classification: { class: 'ambiguous', reason: opaque }, snapshot, live };
  const bodyText = needsBody(response.status) ? new TextDecoder().decode(bytes.subarray(0, 4096)) : undefined;
  let computed = classifyResponse({ status: response.status, headers: response.headers, bodyText }, opts.now());
  // After a redirect that may have made a GET of the request (a 303: "done, look here"; a 301/302
  // after a POST), the status is that GET's: the request's own answer was the redirect, maybe after
  // it acted. Retried, a 503 there acted again; recorded failed, a 404 there read as "no effect".
  if (response.redirected && computed.class !== 'success' && computed.class !== 'ambiguous' && req.method !== 'GET' && req.method !== 'HEAD' && (response as { [KEPT_METHOD]?: boolean })[KEPT_METHOD] !== true) {
    computed = { class: 'ambiguous', reason: `${computed.reason} after a redirect: the answer of the GET the ${req.method} may have become, not of the ${req.method}` };
  }
  // (a status no Response can carry, a polyfill's 1xx: classified, but none to hand to classify or as the cause)
  const rebuilt = response.status >= 200 && response.status <= 599;
  const outcome: AttemptOutcome = override === undefined || !rebuilt ? { classification: computed, snapshot, live } : { ...decide({ response: buildResponse(snapshot, live, false), bodyText: new TextDecoder().decode(bytes) }, computed), snapshot, live };
  // the response an ambiguous answer (a 5xx, say) came as: the cause the caller sees if it is never settled;
  // so is a terminal answer's (a 401) to a same-key resend after an attempt that may have taken effect.
  // Its body cut as the record's is: an error is held as long as the caller likes (a 100 MB error page)
  if (rebuilt && (outcome.classification.class === 'ambiguous' || outcome.classification.class === 'terminal')) outcome.cause = buildResponse(snapshot, live, false, opts.maxStoredBodyBytes);
  return outcome;
}
