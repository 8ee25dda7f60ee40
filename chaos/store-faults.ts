/**
 * `--store-faults RATE`: each worker wraps the shared store so that a seeded
 * fraction of its calls misbehave, in one of three ways:
 *
 * - `reject`: a `StoreError` before the call reaches the store (nothing written);
 * - `lost_ack`: the call reaches the store, then a `StoreError` (a `claim` that created,
 *   a `compareAndSet` that applied, a `purge` that removed: the write stands but its
 *   acknowledgement is lost; a write that changed nothing counts as `reject`);
 * - `slow`: up to `maxSlowMs` before the call reaches the store, then its real answer.
 *
 * Half the rejections and lost acknowledgements come at once, half after up to `maxSlowMs`
 * (a store slow to fail: a connection timeout, a query_timeout after COMMIT).
 *
 * Reads (`get`, `list`) are rejected or slow; writes (`claim`, `compareAndSet`, `purge`)
 * any of the three. `close` is passed through. Deterministic from the run's seed, the
 * worker's id and its incarnation (the order of calls still varies with process timing).
 *
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreError } from '../src/index.js';
import type { OnceStore } from '../src/index.js';
import { mulberry32 } from './plan.js';

/** How the workers' stores misbehave. */
export interface StoreFaults {
  /** fraction of store calls that misbehave (0 = the store is not wrapped) */
  rate: number;
  /** the longest a `slow` call waits before it reaches the store */
  maxSlowMs: number;
}

export const STORE_FAULT_KINDS = ['reject', 'lost_ack', 'slow'] as const;
export type StoreFaultKind = (typeof STORE_FAULT_KINDS)[number];

/** The store methods that get faults. */
export type StoreMethod = 'claim' | 'get' | 'compareAndSet' | 'list' | 'purge';

/**
 * `inner` with faults drawn from `seed` at `faults.rate`; `onFault` hears each one
 * (for a `lost_ack`, once the write is known to have been applied).
 *
 * @example
 * ```ts
 * const store = faultyStore(sqliteStore({ path }), { rate: 0.05, maxSlowMs: 300 }, seed, (kind, method) => counts[kind]++)
 * ```
 */
export function faultyStore(inner: OnceStore, faults: StoreFaults, seed: number, onFault: (kind: StoreFaultKind, method: StoreMethod) => void): OnceStore {
  const random = mulberry32(seed);
  /** The fault of the next call, if any: writes can lose their acknowledgement, reads cannot. */
  const draw = (write: boolean): { kind: StoreFaultKind; delayMs: number } | undefined => {
    const roll = random();
    const pick = random();
    const delayMs = Math.floor(random() * faults.maxSlowMs);
    const atOnce = random() < 0.5;
    if (roll >= faults.rate) return undefined;
    const kinds: readonly StoreFaultKind[] = write ? STORE_FAULT_KINDS : ['reject', 'slow'];
    const kind = kinds[Math.floor(pick * kinds.length)] ?? 'slow';
    return { kind, delayMs: kind !== 'slow' && atOnce ? 0 : delayMs };
  };
  const call = async <T>(method: StoreMethod, what: string, run: () => Promise<T>, applied?: (result: T) => boolean): Promise<T> => {
    const fault = draw(applied !== undefined);
    if (fault === undefined) return run();
    if (fault.kind === 'reject') {
      onFault('reject', method);
      if (fault.delayMs > 0) await sleep(fault.delayMs);
      throw new StoreError(`chaos: ${method} ${what} failed (injected; not applied)`);
    }
    if (fault.kind === 'slow') {
      onFault('slow', method);
      await sleep(fault.delayMs);
      return run();
    }
    const result = await run();
    const wrote = applied?.(result) === true;
    onFault(wrote ? 'lost_ack' : 'reject', method);
    if (fault.delayMs > 0) await sleep(fault.delayMs);
    throw new StoreError(`chaos: ${method} ${what}: acknowledgement lost (injected; ${wrote ? 'the write was applied' : 'nothing changed'})`);
  };
  return {
    name: inner.name,
    claim: (record) => call('claim', record.id, () => inner.claim(record), (r) => r.created),
    get: (id) => call('get', id, () => inner.get(id)),
    compareAndSet: (id, expected, next) => call('compareAndSet', `${id}@${expected}`, () => inner.compareAndSet(id, expected, next), (r) => r.ok),
    list: (query) => call('list', '', () => inner.list(query)),
    purge: (now) => call('purge', '', () => inner.purge(now), (n) => n > 0),
    close: () => inner.close(),
  };
}

/**
 * `inner` with every `claim` answered `delayMs` late (after it was applied): a store whose
 * acknowledgements take a network's time to come back. A call that finds the record existing
 * acts on it that much later, so the calls of a burst (see the worker) all read the record
 * before any of them writes it, and race compare-and-set on the same generation.
 */
export function lateClaims(inner: OnceStore, delayMs: number): OnceStore {
  return {
    name: inner.name,
    claim: async (record) => {
      const result = await inner.claim(record);
      await sleep(delayMs);
      return result;
    },
    get: (id) => inner.get(id),
    compareAndSet: (id, expected, next) => inner.compareAndSet(id, expected, next),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
}
