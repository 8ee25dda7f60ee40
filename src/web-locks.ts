/**
 * Single flight across tabs with the Web Locks API: while one tab runs an
 * operation, the other tabs' calls of the same scope on the same store wait on a
 * lock instead of polling the store, and the lock goes away by itself when the
 * tab that holds it is closed or reloaded.
 *
 * The lock is an optimisation and a courtesy, not the guarantee: the store's
 * lease and compare-and-set still decide who may send. A tab that waited too
 * long for the lock (`inFlightWaitMs`) goes on without it and meets the lease.
 *
 * @module
 */
import { longTimeout } from './backoff/sleep.js';
import type { Exclusive } from './engine/execute.js';

/** The part of `navigator.locks` used here. */
export interface LockManagerLike {
  request<T>(name: string, options: { signal?: AbortSignal }, callback: () => Promise<T>): Promise<T>;
}

/** Prefix of every lock name; the rest is the key the engine gives (the store's name and the record id). */
export const LOCK_PREFIX = 'oncefetch:';

/**
 * An {@link Exclusive} on `navigator.locks`, or undefined where the API is
 * missing (insecure contexts, old browsers, Node).
 *
 * @example
 * ```ts
 * createClientWith(options, { ...defaults, exclusive: webLocks() })
 * ```
 */
export function webLocks(locks: LockManagerLike | undefined = navigatorLocks()): Exclusive | undefined {
  if (locks === undefined) return undefined;
  return async <T>(key: string, body: () => Promise<T>, wait: { signal: AbortSignal | undefined; maxWaitMs: number }): Promise<T> => {
    const { signal, maxWaitMs } = wait;
    signal?.throwIfAborted();
    const stopWaiting = new AbortController();
    const onAbort = (): void => stopWaiting.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const cancelTimer = longTimeout(() => stopWaiting.abort(new LockWaitTimeout()), maxWaitMs);
    let running: Promise<T> | undefined;
    try {
      return await locks.request(LOCK_PREFIX + key, { signal: stopWaiting.signal }, () => {
        cancelTimer();
        signal?.removeEventListener('abort', onAbort);
        // (a body that throws at once is running too: it ends with its error, never runs again without the lock)
        try {
          running = body();
        } catch (error) {
          running = Promise.reject(error as Error);
        }
        return running;
      });
    } catch {
      // Once the body runs, the call is the body: a lock taken from it (another context's `steal: true`)
      // rejects this request at once while the body goes on (it may be sending); it ends as the body does.
      if (running !== undefined) return running;
      if (signal?.aborted) throw signal.reason;
      // Another tab has held the lock for inFlightWaitMs (a LockWaitTimeout), or the Locks API refused
      // (an opaque origin's SecurityError, say): the lock only spares the waiting side its polling,
      // so go on without it; the store's lease and compare-and-set decide (wait for that tab, or take over).
      return body();
    } finally {
      cancelTimer();
      signal?.removeEventListener('abort', onAbort);
    }
  };
}

class LockWaitTimeout extends Error {
  constructor() {
    super('gave up waiting for the Web Lock');
    this.name = 'LockWaitTimeout';
  }
}

function navigatorLocks(): LockManagerLike | undefined {
  // happy-dom's navigator.locks is null
  const locks = (globalThis as { navigator?: { locks?: LockManagerLike | null } }).navigator?.locks;
  return typeof locks?.request === 'function' ? locks : undefined;
}
