/**
 * `createClient`: thin wiring of options, store, engine and adapters. No
 * policy lives here.
 *
 * @module
 */
import { StoreError } from './errors.js';
import type { OnceStats } from './events.js';
import { Engine } from './engine/execute.js';
import type { OnceRequestInit } from './engine/fetch-operation.js';
import { onceFetch } from './engine/fetch-operation.js';
import type { RunContext, RunSpec } from './engine/run-operation.js';
import { onceRun } from './engine/run-operation.js';
import { applyEvent, isTerminal, recordId } from './operation/record.js';
import type { OperationRecord, Scope } from './operation/record.js';
import type { OnceClientOptions } from './options.js';
import { resolveOptions } from './options.js';
import type { OnceStore } from './stores/contract.js';

/** A scope, with the client's tenant when `tenant` is omitted. */
export type ScopeInput = { action: string; ref: string; tenant?: string };

/** Result of {@link OnceClient.cancel}. */
export interface CancelResult {
  /**
   * - `cancelled`: nothing was sent and nothing will be;
   * - `requested`: an attempt may be on the wire or its outcome is unknown: the
   *   cancel is recorded and the outcome decides (delivery keeps its result);
   * - `too_late`: the operation already ended (see `state`);
   * - `not_found`: no such operation.
   */
  outcome: 'cancelled' | 'requested' | 'too_late' | 'not_found';
  state: OperationRecord['state'] | undefined;
}

/** A once-only client. Create it with `createClient`. */
export interface OnceClient {
  /** fetch-compatible; POST and PATCH (or any call with `once`) are once-only */
  fetch(input: RequestInfo | URL, init?: OnceRequestInit): Promise<Response>;
  /** a plain `fetch` function with the same guarantee, to hand to other SDKs */
  wrap(): typeof globalThis.fetch;
  /** the same guarantee for any async side effect that takes an idempotency key */
  run<T>(spec: RunSpec<T>, effect: (ctx: RunContext) => Promise<T>): Promise<T>;
  /** the stored record of a scope */
  get(scope: ScopeInput): Promise<OperationRecord | undefined>;
  /** records a cancel (DESIGN §8) */
  cancel(scope: ScopeInput): Promise<CancelResult>;
  /** removes terminal records past their `expiresAt`; returns how many */
  purge(): Promise<number>;
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
}

/** @internal Builds a client on the given platform defaults. */
export function createClientWith(options: OnceClientOptions, platform: PlatformDefaults): OnceClient {
  const opts = resolveOptions(options, platform);
  const engine = new Engine(opts);
  const toScope = (s: ScopeInput): Scope => ({ tenant: s.tenant ?? opts.tenant, action: s.action, ref: s.ref });
  const client: OnceClient = {
    store: opts.store,
    fetch: (input, init) => onceFetch(engine, input, init),
    wrap: () => ((input: RequestInfo | URL, init?: RequestInit) => onceFetch(engine, input, init)) as typeof globalThis.fetch,
    run: (spec, effect) => onceRun(engine, spec, effect),
    get: (scope) => opts.store.get(recordId(toScope(scope))),
    cancel: (scope) => cancel(opts.store, recordId(toScope(scope)), opts.now, opts.owner),
    purge: () => opts.store.purge(opts.now()),
    stats: () => ({ ...engine.stats }),
    close: () => opts.store.close(),
  };
  return client;
}

async function cancel(store: OnceStore, id: string, now: () => number, owner: string): Promise<CancelResult> {
  for (let i = 0; i < 16; i++) {
    const record = await store.get(id);
    if (record === undefined) return { outcome: 'not_found', state: undefined };
    if (isTerminal(record.state)) {
      return { outcome: record.state === 'cancelled' ? 'cancelled' : 'too_late', state: record.state };
    }
    const next = applyEvent(record, { type: 'cancel' }, now(), owner);
    const res = await store.compareAndSet(id, record.generation, next);
    if (res.ok) return { outcome: next.state === 'cancelled' ? 'cancelled' : 'requested', state: next.state };
  }
  throw new StoreError(`${store.name}: record ${id} kept changing while cancelling`);
}
