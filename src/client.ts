/**
 * `createClient`: thin wiring of options, store, engine and adapters. No
 * policy lives here.
 *
 * @module
 */
import { StoreError } from './errors.js';
import type { OnceStats } from './events.js';
import { Engine } from './engine/execute.js';
import { isOwned, waitWhileOwned } from './engine/wait.js';
import type { Exclusive } from './engine/execute.js';
import type { OnceRequestInit } from './engine/fetch-operation.js';
import { onceFetch } from './engine/fetch-operation.js';
import { wrappedFetch } from './engine/wrap.js';
import type { RunContext, RunSpec } from './engine/run-operation.js';
import { onceRun } from './engine/run-operation.js';
import { applyEvent, isTerminal, recordId } from './operation/record.js';
import type { OperationRecord, Scope } from './operation/record.js';
import type { OnceClientOptions } from './options.js';
import { resolveOptions } from './options.js';
import type { OnceStore } from './stores/contract.js';
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
 * happen at the provider; act on `delivered` as on a success.
 *
 * @example
 * ```ts
 * const { outcome } = await client.cancel({ action: 'refund', ref: ticket.id })
 * if (outcome === 'delivered') notify('the refund had already gone through')
 * ```
 */
export interface CancelResult {
  /**
   * - `cancelled`: nothing was delivered and nothing will be sent;
   * - `delivered`: delivery won (or the operation had already ended): its result is kept;
   * - `undecided`: the cancel is recorded, but an attempt's outcome is still unknown when the
   *   wait ended; the next call or `recover()` settles it (a lookup decides which won). With no
   *   lookup that can answer it stays undecided (`ambiguous`): after a cancel nothing is resent,
   *   not even with the same key to a provider that dedupes;
   * - `not_found`: no such operation.
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
  fetch(input: RequestInfo | URL, init?: OnceRequestInit): Promise<Response>;
  /**
   * a plain `fetch` function with the same guarantee, to hand to other SDKs; turn their own retries off
   * (a Stainless SDK's retry without an `Idempotency-Key`, `x-stainless-retry-count` ≥ 1, is refused unsent)
   */
  wrap(): typeof globalThis.fetch;
  /** the same guarantee for any async side effect that takes an idempotency key */
  run<T>(spec: RunSpec<T>, effect: (ctx: RunContext) => Promise<T>): Promise<T>;
  /** the stored record of a scope */
  get(scope: ScopeInput): Promise<OperationRecord | undefined>;
  /** records a cancel and reports whether cancellation or delivery won */
  cancel(scope: ScopeInput, options?: CancelOptions): Promise<CancelResult>;
  /**
   * reconciles the client tenant's (or `options.tenant`'s) `in_flight`/`ambiguous` records whose lease
   * expired, and `pending` ones that only a provider dedupe this client does not trust cleared for a
   * resend (up to `limit`, default 100; corrupt rows are reported in `errors`, not counted) with the registered `lookups`; a `client.run()` operation is left to its
   * next call's lookup
   */
  recover(options?: RecoverOptions): Promise<RecoveryReport>;
  /** removes terminal records past their `expiresAt`; returns how many */
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
  /** closes the store */
  close(): Promise<void>;
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
}

/** @internal Builds a client on the given platform defaults. */
export function createClientWith(options: OnceClientOptions, platform: PlatformDefaults): OnceClient {
  const opts = resolveOptions(options, platform);
  const engine = new Engine(opts, platform.exclusive, opts.telemetry ? platform.telemetry?.() : undefined);
  const toScope = (s: ScopeInput): Scope => ({ tenant: s.tenant ?? opts.tenant, action: s.action, ref: s.ref });
  const client: OnceClient = {
    store: opts.store,
    fetch: (input, init) => onceFetch(engine, input, init),
    wrap: () => ((input: RequestInfo | URL, init?: RequestInit) => wrappedFetch(engine, input, init)) as typeof globalThis.fetch,
    run: (spec, effect) => onceRun(engine, spec, effect),
    get: (scope) => opts.store.get(recordId(toScope(scope))),
    cancel: (scope, o) => cancel(engine, recordId(toScope(scope)), o?.waitMs ?? opts.inFlightWaitMs),
    recover: (o) => recover(engine, o),
    purge: () => opts.store.purge(opts.now()),
    explain: async (scope) => {
      const record = await opts.store.get(recordId(toScope(scope)));
      if (record === undefined) return undefined;
      // explain() loads its code on first use: a browser bundle splits it off the entry. It shares no
      // module with the entry (see Facts.terminal), so the split adds no shared chunk to the page load.
      const { explain, explainPolicy } = await import('./explain/explain.js');
      return explain(record, explainPolicy(opts, record.action, opts.now()));
    },
    stats: () => ({ ...engine.stats }),
    close: () => {
      engine.close();
      return opts.store.close();
    },
  };
  return client;
}

async function cancel(engine: Engine, id: string, waitMs: unknown): Promise<CancelResult> {
  // (as inFlightWaitMs, its default: a negative wait was taken as none)
  if (typeof waitMs !== 'number') throw new TypeError('client.cancel: option "waitMs" must be a non-negative integer of milliseconds');
  if (!Number.isSafeInteger(waitMs) || waitMs < 0) throw new RangeError(`client.cancel: option "waitMs" must be a non-negative integer of milliseconds, got ${waitMs}`);
  const { store, now, owner, random } = engine.opts;
  const startedAt = now();
  const settled = (record: OperationRecord): CancelResult => ({ outcome: record.state === 'cancelled' ? 'cancelled' : 'delivered', state: record.state });
  /** Records the cancel by compare-and-set (ordered against the owner's writes): the record it left, or undefined when gone. */
  const apply = async (): Promise<OperationRecord | undefined> => {
    for (let i = 0; ; i++) {
      const record = await store.get(id);
      if (record === undefined || isTerminal(record.state)) return record;
      const next = applyEvent(record, { type: 'cancel' }, now(), owner);
      if ((await store.compareAndSet(id, record.generation, next)).ok) return next;
      if (i > 16) throw new StoreError(`${store.name}: record ${id} kept changing while cancelling`);
    }
  };
  const first = await apply();
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
