/**
 * `createClient`: thin wiring of options, store, engine and adapters. No
 * policy lives here.
 *
 * @module
 */
import { MAX_TIMER_MS, longTimeout, sleep, untilAborted } from './backoff/sleep.js';
import { StoreError } from './errors.js';
import type { OnceStats } from './events.js';
import { LET_GO_WAIT_MS, awaitAbandon } from './engine/acquire.js';
import { Engine } from './engine/execute.js';
import { isOwned, waitWhileOwned } from './engine/wait.js';
import type { Exclusive } from './engine/execute.js';
import type { OnceRequestInit } from './engine/fetch-operation.js';
import { onceFetch } from './engine/fetch-operation.js';
import { wrappedFetch } from './engine/wrap.js';
import type { RunContext, RunSpec } from './engine/run-operation.js';
import { onceRun } from './engine/run-operation.js';
import { isTerminal, recordId } from './operation/record.js';
import type { OperationRecord, Scope } from './operation/record.js';
import type { OnceClientOptions } from './options.js';
import { checkKeys, checkObject, checkStrings, resolveOptions } from './options.js';
import { isPlainObject } from './schema.js';
import type { OnceStore } from './stores/contract.js';
import { withStoreErrors } from './stores/store-errors.js';
import type { RecoverOptions, RecoveryReport } from './reconcile/recover.js';
import { recover } from './reconcile/recover.js';
import type { Explanation } from './explain/types.js';
import type { Telemetry } from './telemetry.js';

/**
 * A scope, with the client's tenant when `tenant` is omitted: how you name an
 * operation to `get`, `cancel` and `explain` after the call that made it.
 *
 * @example
 * ```ts
 * const scope: ScopeInput = { action: 'create-order', ref: task.id }
 * const record = await client.get(scope)
 * ```
 */
export type ScopeInput = { action: string; ref: string; tenant?: string };

/**
 * Result of {@link OnceClient.cancel}. Only `cancelled` means nothing will
 * happen at the provider; `delivered` means the operation ended before the cancel could stop it:
 * `state` `succeeded` is a success, `failed` a terminal answer (a 400, say) that the provider refused.
 *
 * @example
 * ```ts
 * const { outcome, state } = await client.cancel({ action: 'refund', ref: ticket.id })
 * if (outcome === 'delivered' && state === 'succeeded') notify('the refund had already gone through')
 * ```
 */
export interface CancelResult {
  /**
   * - `cancelled`: nothing was delivered and nothing will be sent;
   * - `delivered`: delivery won (or the operation had already ended): its result is kept; `state`
   *   says how it ended (`succeeded`, or `failed` on a terminal answer such as a 400);
   * - `undecided`: the cancel is recorded, but an attempt's outcome is still unknown when the
   *   wait ended; the next call or `recover()` settles it (a lookup decides which won). With no
   *   lookup that can answer it stays undecided (`ambiguous`): after a cancel nothing is resent,
   *   not even with the same key to a provider that dedupes; `state` is undefined when a call of
   *   this client was still claiming the operation as the wait ended (the cancel reached it: it sends
   *   nothing, unless it finds the operation already delivered or on the wire elsewhere);
   * - `not_found`: no such operation (nor a call of this client claiming it).
   */
  outcome: 'cancelled' | 'delivered' | 'undecided' | 'not_found';
  /** the record's state when the cancel returned */
  state: OperationRecord['state'] | undefined;
}

/**
 * Options of {@link OnceClient.cancel}.
 *
 * @example
 * ```ts
 * await client.cancel({ action: 'refund', ref: ticket.id }, { waitMs: 2_000 })
 * ```
 */
export interface CancelOptions {
  /** how long to wait for an attempt on the wire to decide @default the client's inFlightWaitMs */
  waitMs?: number;
}

/**
 * Options of {@link OnceClient.close}.
 *
 * @example
 * ```ts
 * process.once('SIGTERM', () => void client.close({ waitMs: 20_000 }).finally(() => process.exit(0)))
 * ```
 */
export interface CloseOptions {
  /**
   * the longest wait for the work already started to end by itself; then it is stopped and the store
   * closed, at most 1 s later (a call stopped before its send records that attempt as never sent
   * first) @default none: as long as that work takes (each call ends by its own deadline, `retry.deadlineMs`)
   */
  waitMs?: number;
}

/**
 * A once-only client. Create it with `createClient`.
 *
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1' })
 * const res = await client.fetch(url, { method: 'POST', body, once: { action: 'create-order', ref: task.id } })
 * const { replays, ambiguous, attemptsPerOperation } = client.stats()
 * await client.close()
 * ```
 */
export interface OnceClient {
  /** fetch-compatible; POST and PATCH (or any call with `once` or an `Idempotency-Key` header) are once-only */
  fetch(input: string | URL | Request, init?: OnceRequestInit): Promise<Response>;
  /**
   * a plain `fetch` function with the same guarantee, to hand to other SDKs; turn their own retries off
   * (a Stainless SDK's retry without an `Idempotency-Key`, `x-stainless-retry-count` ≥ 1, is refused unsent).
   * It takes `once` options per call as `client.fetch` does, typed too: an SDK's `fetch` option can add them
   */
  wrap(): ((input: string | URL | Request, init?: OnceRequestInit) => Promise<Response>) & typeof globalThis.fetch;
  /**
   * the same guarantee for any async side effect that takes an idempotency key; turn the SDK's own retries off
   * inside it (a thrown error describes its last try only)
   */
  run<T>(spec: RunSpec<T>, effect: (ctx: RunContext) => Promise<T>): Promise<T>;
  /** the stored record of a scope */
  get(scope: ScopeInput): Promise<OperationRecord | undefined>;
  /**
   * records a cancel and reports whether cancellation or delivery won; a call of this client running the
   * operation ends its wait before a retry at once (as its own `once.signal` would)
   */
  cancel(scope: ScopeInput, options?: CancelOptions): Promise<CancelResult>;
  /**
   * reconciles the client tenant's (or `options.tenant`'s) `in_flight`/`ambiguous` records whose lease
   * expired, and `pending` ones that only a provider dedupe this client does not trust cleared for a
   * resend (up to `limit`, default 100; corrupt rows are reported in `errors`, not counted) with the registered `lookups`; a `client.run()` operation is left to its
   * next call's lookup
   */
  recover(options?: RecoverOptions): Promise<RecoveryReport>;
  /**
   * removes terminal records past their `expiresAt`; returns how many. A store that fails part-way
   * rejects with a `StoreError` whose `purged` says how many it had already removed
   */
  purge(): Promise<number>;
  /**
   * the structured hand-off of an operation (diagnosis, plan, verification, hand-off, confidence,
   * escalation) under this client's policy; undefined when there is no such operation
   */
  explain(scope: ScopeInput): Promise<Explanation | undefined>;
  /** counters since the client was created */
  stats(): OnceStats;
  /** the store in use */
  readonly store: OnceStore;
  /**
   * Shuts the client down gracefully, then closes the store (a store other open clients share is
   * closed by the last of them to close, not under their calls; one given to `wrapFetch` too, whose
   * client has no `close()`, is never closed by oncefetch: call its `close()` yourself). At once, every method that does work
   * (`fetch`, a `wrap()`ped fetch, `run`, `get`, `cancel`, `recover`, `purge`, `explain`) called from
   * then on rejects with a `StoreError` naming `client.close()`, before anything is recorded or sent.
   * Then it waits for the work already started to end by itself: calls in flight (and the calls that
   * joined them), `cancel()` and `recover()` in progress, and the writes a call left going in the
   * background (an outcome's write its deadline cut off, until its lease's end; the undo of a write
   * before the send that failed or was given up on, at most 1 s more, as the call itself waits for it).
   * A call in flight thus returns and records what the provider answered, which a new client replays.
   * Each call is bounded by its own deadline (`retry.deadlineMs`), a cancel by its `waitMs`, a
   * `recover()` by its lookups (each bounded by `retry.deadlineMs`, or its `signal`); `waitMs` bounds the whole wait.
   *
   * When `waitMs` runs out first, the rest is stopped and the store closed: a call that holds the
   * provider's answer (now, or when it comes) returns it, unrecorded, as at its deadline; a call that
   * holds none rejects (a `StoreError`, or an `AmbiguousOutcomeError` when its outcome is unknown) and
   * sends nothing more. A call stopped after recording an attempt but before sending it (or while the
   * store had yet to acknowledge that record) first records the attempt as never sent, the lease
   * released: the store stays open for that up to 1 s more, and the next call sends it once, with the
   * same key, without a lookup. What such a call left unrecorded, the next call with the same ref (in
   * any client) reconciles first (a lookup, or `AmbiguousOutcomeError`), never resending blind.
   *
   * Calling it again returns the same promise (a shorter `waitMs` given then ends the wait sooner).
   * Do not await it inside a call of this client (its `run()` effect, a lookup, its `fetch` transport):
   * it waits for that call, which waits for it, until the attempt times out and ends ambiguous.
   *
   * @throws TypeError or RangeError (as a rejection) naming `waitMs` when it is not a non-negative integer.
   */
  close(options?: CloseOptions): Promise<void>;
}

/** Where the platform entry supplies its defaults. */
export interface PlatformDefaults {
  store: () => OnceStore;
  fetch: () => typeof globalThis.fetch;
  /** cross-tab or cross-process exclusion per record id (the browser entry: Web Locks) */
  exclusive?: Exclusive | undefined;
  /**
   * the OpenTelemetry bridge, used unless `telemetry: false` (the Node entry;
   * the browser entry has none: a browser finds the API by name only through
   * an import map)
   */
  telemetry?: (() => Telemetry) | undefined;
  /** `false` where the `oncefetch` command cannot run (the browser entry): `explain()` then suggests no command */
  cli?: false | undefined;
}

/**
 * Keys, owners and attempt ids come from `crypto.randomUUID()`, fingerprints (in browsers) from
 * `crypto.subtle`; a page not served over https or from localhost has neither. Said here, rather
 * than as "randomUUID is not a function" at the first use.
 */
function checkCrypto(where = 'createClient'): void {
  const c = globalThis.crypto as Partial<Crypto> | undefined;
  const missing = [typeof c?.randomUUID === 'function' ? '' : 'crypto.randomUUID()', c?.subtle ? '' : 'crypto.subtle (WebCrypto)'].filter(Boolean);
  if (missing.length === 0) return;
  throw new TypeError(
    `${where}: ${missing.join(' and ')} missing; oncefetch needs a secure context (https, or http on localhost), where browsers expose both` +
      ((globalThis as { isSecureContext?: boolean }).isSecureContext === false ? ': this page is not one (isSecureContext is false)' : ''),
  );
}

/**
 * How many open clients use each store (the store as given). Clients may share one (a client per tenant
 * or per endpoint): one client's `close()` must not close it under the others' calls (a call on the wire
 * would get a `StoreError` for the provider's 2xx, its record left `in_flight`), so the last one closes
 * it. Counted for every copy of oncefetch in the realm together (an app handing its store to an SDK built
 * on its own copy): one map, found by a registered symbol.
 */
const storeUsers: WeakMap<OnceStore, number> = ((globalThis as { [k: symbol]: WeakMap<OnceStore, number> | undefined })[Symbol.for('oncefetch.storeUsers')] ??= new WeakMap());

/** This client no longer uses `store` (as given; `wrapped` is this copy's wrapper of it): closes it when no other open client does. */
async function releaseStore(store: OnceStore, wrapped: OnceStore): Promise<void> {
  const users = (storeUsers.get(store) ?? 1) - 1;
  if (users > 0) {
    storeUsers.set(store, users);
    return;
  }
  storeUsers.delete(store);
  await wrapped.close();
}

/** @internal Builds a client on the given platform defaults; `where` (createClient, wrapFetch) names the caller in option errors. */
export function createClientWith(options: OnceClientOptions, platform: PlatformDefaults, where?: string): OnceClient {
  checkCrypto(where);
  const resolved = resolveOptions(options, platform, where);
  // the engine and the client's own calls see every store failure as a StoreError (see store-errors.ts)
  const opts = { ...resolved, store: withStoreErrors(resolved.store) };
  const engine = new Engine(opts, platform.exclusive, opts.telemetry ? platform.telemetry?.() : undefined);
  storeUsers.set(resolved.store, (storeUsers.get(resolved.store) ?? 0) + 1);
  /**
   * A TypeError naming `client.<method>` for a scope that is not one. Other keys are let through: a
   * run spec, a record, an error's `scope` or a recovery report's entry each names its scope.
   */
  const toScope = (method: string, s: ScopeInput): Scope => {
    checkObject(`client.${method}`, 'scope', s);
    const scope = { tenant: s.tenant ?? opts.tenant, action: s.action, ref: s.ref };
    checkStrings(`client.${method}`, 'scope', scope);
    return scope;
  };
  const shutdown = shutdownOf(engine, resolved.store);
  const { admit } = shutdown;
  const client: OnceClient = {
    store: resolved.store,
    fetch: (input, init) => admit('fetch', () => onceFetch(engine, input, init)),
    wrap: () => ((input: string | URL | Request, init?: OnceRequestInit) => admit('wrap', () => wrappedFetch(engine, input, init))) as ReturnType<OnceClient['wrap']>,
    run: (spec, effect) => admit('run', () => onceRun(engine, spec, effect)),
    // (async: a bad scope rejects, as every other method's bad argument does)
    get: (scope) => admit('get', async () => opts.store.get(recordId(toScope('get', scope)))),
    cancel: (scope, o) =>
      admit('cancel', async () => {
        const id = recordId(toScope('cancel', scope));
        checkWaitOptions('cancel', o);
        return cancel(engine, id, o?.waitMs ?? opts.inFlightWaitMs);
      }),
    recover: (o) => admit('recover', () => recover(engine, o)),
    purge: (filter?: unknown) =>
      admit('purge', async () => {
        // No filter: one given (`{ tenant }`) was ignored without a word, every tenant's records purged.
        const keys = isPlainObject(filter) ? Object.keys(filter) : [];
        if (keys.length > 0) throw new TypeError(`client.purge takes no filter (it purges every tenant's expired records); got ${keys.join(', ')}`);
        return opts.store.purge(opts.now());
      }),
    explain: (scope) =>
      admit('explain', async () => {
        const record = await opts.store.get(recordId(toScope('explain', scope)));
        if (record === undefined) return undefined;
        // explain() loads its code on first use: a browser bundle splits it off the entry. It shares no
        // module with the entry (see Facts.terminal), so the split adds no shared chunk to the page load.
        const { explain, explainPolicy } = await import('./explain/explain.js');
        return explain(record, explainPolicy(opts, record.action, opts.now(), platform.cli));
      }),
    stats: () => ({ ...engine.stats }),
    close: (o) => shutdown.close(o),
  };
  return client;
}

/**
 * `client.close()`: no new work once it is called (`admit` rejects it), then a wait for the work
 * already started (the client's calls in progress, the cancel writes of joined calls in `cancelling`,
 * then the engine's background writes in `abandoning`), bounded by `waitMs`; then the engine's
 * `closed` signal, the never_sent of the attempts it stopped before their send (at most
 * LET_GO_WAIT_MS), and the store's close.
 */
/**
 * A signal for each of `n` waits, each aborted with `signal` through one listener on it (a Node
 * AbortSignal warns past 10 listeners: a close waiting for many undos printed it); `off` removes it.
 */
function fanOut(signal: AbortSignal, n: number): { signals: AbortSignal[]; off: () => void } {
  const each = Array.from({ length: n }, () => new AbortController());
  const abort = (): void => each.forEach((c) => c.abort(signal.reason));
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  return { signals: each.map((c) => c.signal), off: () => signal.removeEventListener('abort', abort) };
}

function shutdownOf(engine: Engine, store: OnceStore): { admit: <T>(method: string, start: () => Promise<T>) => Promise<T>; close: (options: CloseOptions | undefined) => Promise<void> } {
  /** the client's calls in progress */
  const work = new Set<Promise<unknown>>();
  /** aborted when a close()'s `waitMs` runs out */
  const stop = new AbortController();
  /** the timers of the `waitMs` given, cleared once the wait is over */
  const timers: (() => void)[] = [];
  /** the first close()'s promise */
  let closing: Promise<void> | undefined;
  let waited = false;
  /** the background entries given their LET_GO_WAIT_MS */
  const graced = new WeakSet<object>();

  /** Resolves once no work of the client is left; rejects when `stop` aborts first. */
  const drained = async (): Promise<void> => {
    for (;;) {
      stop.signal.throwIfAborted();
      // (then the cancel writes of joined calls' once.signal, which may outlive both calls: see `cancelling`)
      const busy = work.size > 0 ? work : engine.cancelling;
      if (busy.size > 0) {
        // (a cancel write's bound is an unref'd timer, so that it holds no process after a close that
        // stopped waiting for it; while this close waits for it, the process stays up: a store hung on
        // nothing the process waits for would have it exit under the close, the code after never run)
        const hold = busy === work ? undefined : setTimeout(() => undefined, MAX_TIMER_MS);
        try {
          await untilAborted(Promise.allSettled(busy), stop.signal);
        } finally {
          clearTimeout(hold);
        }
        continue;
      }
      // The writes the calls left going in the background: what a call learned after its send, until
      // its lease's end (as a later call waits for it); the undo of a write before the send, at most
      // LET_GO_WAIT_MS (as its own call waits for it: a store that keeps failing must not hold the close).
      const left = [...engine.abandoning].filter(([, entry]) => !graced.has(entry));
      if (left.length === 0) return;
      const { signals, off } = fanOut(stop.signal, left.length);
      try {
        await Promise.all(
          left.map(([id, entry], i) => {
            const signal = signals[i]!;
            if (engine.afterSend.has(entry)) return awaitAbandon(engine, id, signal);
            // Graced once its wait has run (done, or LET_GO_WAIT_MS): a wait that `waitMs` cut short leaves
            // it to `undone`, which keeps the store open for it after the engine's close (at most LET_GO_WAIT_MS).
            return undoneWithin(entry, signal, LET_GO_WAIT_MS).then(() => void graced.add(entry));
          }),
        );
      } finally {
        off();
      }
    }
  };

  /**
   * After the engine's close, before the store's: the calls it stopped between the write that opened
   * their attempt and its send close that attempt as never sent (see `Engine.unsent`), a write still
   * pending finishing first; then the undo writes before a send not yet given their LET_GO_WAIT_MS
   * (an abort's, a release's). At most LET_GO_WAIT_MS in all, as a call waits for its own undo; nothing
   * after a graceful wait, which left none.
   */
  const undone = async (): Promise<void> => {
    const cap = new AbortController();
    const timer = setTimeout(() => cap.abort(), LET_GO_WAIT_MS);
    try {
      await untilAborted(engine.unsentSettled(), cap.signal);
      const left = [...engine.abandoning].filter(([, entry]) => !engine.afterSend.has(entry) && !graced.has(entry));
      await untilAborted(Promise.all(left.map(([, entry]) => entry.done)), cap.signal);
    } catch {
      // (the bound: the store closes; what was not written, the next call reconciles first)
    } finally {
      clearTimeout(timer);
    }
  };

  /**
   * Waits for an undo before the send (an abort's, a release's) to settle, at most `capMs`: past the end
   * of the lease its write took too (unlike `awaitAbandon`), since a write acknowledged after that end is
   * still ours to undo (compare-and-set on its generation: a takeover meanwhile makes the undo a no-op),
   * and the store is about to close under it.
   */
  const undoneWithin = async (entry: { done: Promise<unknown> }, signal: AbortSignal, capMs: number): Promise<void> => {
    const cap = new AbortController();
    try {
      await untilAborted(Promise.race([entry.done, sleep(capMs, cap.signal).catch(() => undefined)]), signal);
    } finally {
      cap.abort();
    }
  };

  const shutdown = async (): Promise<void> => {
    // (waitMs ran out: what is still running is stopped by the engine's close)
    await drained().catch(() => undefined);
    waited = true;
    for (const clear of timers) clear();
    engine.close(stop.signal.aborted ? (stop.signal.reason as StoreError) : undefined);
    await undone();
    await releaseStore(store, engine.opts.store);
  };

  return {
    // A synchronous throw of `start` (a bad argument) stays one.
    admit: (method, start) => {
      if (closing !== undefined) return Promise.reject(new StoreError(`client.${method}: called after client.close(); nothing was recorded or sent. Use a new client.`));
      const foreign = otherRequest(engine, method);
      if (foreign !== undefined) return Promise.reject(foreign);
      const running = start();
      work.add(running);
      const done = (): void => void work.delete(running);
      running.then(done, done);
      return running;
    },
    close: (given) => {
      // Passed as an event handler (`process.on('SIGTERM', client.close)`, a page's `pagehide`), it gets
      // the signal's name or the event: no options. A plain object is options, checked.
      const options = isPlainObject(given) ? (given as CloseOptions) : undefined;
      // (a rejection, as cancel's)
      try {
        checkWaitOptions('close', options);
      } catch (error) {
        return Promise.reject(error as Error);
      }
      const waitMs = options?.waitMs;
      if (waitMs !== undefined) {
        // (each close()'s bound counts from that call; the first to run out stops the wait)
        // (a store other open clients share stays open for them, see `releaseStore`: not said closed)
        const shared = (storeUsers.get(store) ?? 1) > 1;
        const reason = new StoreError(`client.close({ waitMs: ${waitMs} }) stopped this work when its wait ran out${shared ? '' : ', and closed the store'}`);
        if (waitMs === 0) stop.abort(reason);
        else if (!waited) timers.push(longTimeout(() => stop.abort(reason), waitMs));
      }
      return (closing ??= shutdown());
    },
  };
}

/**
 * Cloudflare Workers (workerd) bind each AbortController to the request that made it: from another
 * request's handler even reading `signal.aborted` throws ("Cannot perform I/O on behalf of a different
 * request"). A client kept across requests (`client ??= createClient()` at module scope) would fail each
 * call with that bare error; say what to do instead, before anything is recorded.
 */
function otherRequest(engine: Engine, method: string): TypeError | undefined {
  try {
    void engine.closed.aborted;
    return undefined;
  } catch (cause) {
    return new TypeError(
      `client.${method}: this client was created while handling another request, and this runtime (Cloudflare Workers) ` +
        "lets no request use another's objects: create the client inside the handler, one per request, on a store whose " +
        'records outlive the request (D1, a Durable Object); nothing was recorded or sent',
      { cause },
    );
  }
}

/** Throws a TypeError or RangeError naming `client.<method>` unless `options` is undefined or `{ waitMs? }` with a valid `waitMs`. */
function checkWaitOptions(method: string, options: unknown): void {
  if (options === undefined) return;
  checkKeys(`client.${method}`, 'options', options, ['waitMs']);
  const { waitMs } = options as CloseOptions;
  if (waitMs !== undefined) checkWaitMs(method, waitMs);
}

/** Throws a TypeError or RangeError naming option `waitMs` of `client.<method>` unless it is a non-negative integer. */
function checkWaitMs(method: string, waitMs: unknown): asserts waitMs is number {
  const message = `client.${method}: option "waitMs" must be a non-negative integer of milliseconds`;
  if (typeof waitMs !== 'number') throw new TypeError(message);
  if (!Number.isSafeInteger(waitMs) || waitMs < 0) throw new RangeError(`${message}, got ${waitMs}`);
}

async function cancel(engine: Engine, id: string, waitMs: unknown): Promise<CancelResult> {
  // (as inFlightWaitMs, its default: a negative wait was taken as none)
  checkWaitMs('cancel', waitMs);
  const { store, now, random } = engine.opts;
  const startedAt = now();
  const settled = (record: OperationRecord): CancelResult => ({ outcome: record.state === 'cancelled' ? 'cancelled' : 'delivered', state: record.state });
  /** Records the cancel (a call of this client running it ends its wait before a retry at once): the record it left, or undefined when gone. */
  const apply = (): Promise<OperationRecord | undefined> => engine.requestCancel(id);
  const call = engine.runningCall(id);
  // (a write that failed here still reached that call: answered as it ends, below)
  let first = await apply().catch((error: unknown) => {
    if (call === undefined) throw error;
    return undefined;
  });
  if (first === undefined && call !== undefined) {
    // A call of this client whose claim had not landed (or whose record this write failed to mark): the
    // cancel reached it (see requestCancel) and it records it at its next step. Waited for (up to waitMs),
    // never told "not_found".
    const cap = new AbortController();
    await Promise.race([call.catch(() => undefined), sleep(Math.max(0, waitMs - (now() - startedAt)), cap.signal).catch(() => undefined)]);
    cap.abort();
    first = await apply();
    if (first === undefined && engine.running(id)) return { outcome: 'undecided', state: undefined };
  }
  if (first === undefined) return { outcome: 'not_found', state: undefined };
  if (isTerminal(first.state)) return settled(first);
  // An attempt may be out: its owner's outcome decides. Nobody working on it (the call stopped
  // ambiguous), or the wait ending, leaves it undecided for the next call or recover().
  let last = await waitWhileOwned(store, id, { now, random, maxWaitMs: waitMs - (now() - startedAt) });
  // The owner stopped with the record cleared for a send (a 503, attempts used up): nothing pending
  // was delivered, so the cancel decides now, as the next call would.
  if (last?.state === 'pending' && !isOwned(last, now())) last = await apply();
  if (last === undefined) return { outcome: 'not_found', state: undefined };
  return isTerminal(last.state) ? settled(last) : { outcome: 'undecided', state: last.state };
}
