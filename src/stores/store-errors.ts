/**
 * A store's failures as {@link StoreError}s, whatever store it is.
 *
 * The engine tells a store failure from anything else by its class: only for a `StoreError` does
 * it try the write of an answer in hand again, read a write back, or say which attempt was sent.
 * The built-in stores reject with one; a custom store may reject with its driver's own error
 * (ioredis: a plain `Error` "Command timed out", after Redis may have applied the command), which
 * would end a call whose order was created with that bare error. Any rejection that is not an
 * error of this copy of oncefetch becomes a `StoreError` naming the store and the method, the
 * original its `cause`: a `TypeError` too, and another copy's `StoreError` (a store package with its
 * own `oncefetch` dependency), which the engine, telling a store failure by this copy's class, would
 * otherwise pass on bare after the send, as "nothing was sent". Every argument the wrapped store is given is one oncefetch built (a record, an
 * id from a checked scope, a list query from checked `recover` options, the clock's `now`); a
 * caller's own arguments are refused before (`client.purge`'s filter, `recover`'s options), and
 * `client.store` and the CLI use the store unwrapped. So a `TypeError` here is the store's failure,
 * not the caller's: porsager/postgres rejects with "Cannot read properties of null (reading
 * 'write')" once its socket is gone, a store over HTTP with its fetch's "fetch failed" (after the
 * write may have applied), and a built-in store's refusal of a record (`encodeRecord`: "not
 * written") is oncefetch's bug. Passed on bare after a send, a caller reading it as "my bug, nothing
 * happened" would send again under a new ref: a second effect.
 *
 * @internal
 * @module
 */
import { OnceError, StoreError, isOnceError } from '../errors.js';
import type { OnceStore } from './contract.js';

/** One wrapper per store, so clients sharing a store share it (and count its users together). */
const wrappers = new WeakMap<OnceStore, OnceStore>();

type Method = Exclude<keyof OnceStore, 'name'>;

export function withStoreErrors(store: OnceStore): OnceStore {
  let wrapped = wrappers.get(store);
  if (wrapped === undefined) {
    const method =
      <M extends Method>(name: M) =>
      (...args: Parameters<OnceStore[M]>): ReturnType<OnceStore[M]> =>
        new Promise((resolve) => resolve((store[name] as (...a: typeof args) => unknown)(...args))).catch((error: unknown) => {
          if (error instanceof OnceError) throw error;
          // (another copy's StoreError too: branded as oncefetch's, but not this copy's class, by which
          // the engine tells a store failure; the count of records its failed purge removed is kept)
          const purged = isOnceError(error) ? (error as StoreError).purged : undefined;
          throw new StoreError(`${store.name}: ${name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error, purged });
        }) as ReturnType<OnceStore[M]>;
    wrapped = {
      name: store.name,
      claim: method('claim'),
      get: method('get'),
      compareAndSet: method('compareAndSet'),
      list: method('list'),
      purge: method('purge'),
      close: method('close'),
    };
    wrappers.set(store, wrapped);
  }
  return wrapped;
}
