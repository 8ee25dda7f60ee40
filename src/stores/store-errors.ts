/**
 * A store's failures as {@link StoreError}s, whatever store it is.
 *
 * The engine tells a store failure from anything else by its class: only for a `StoreError` does
 * it try the write of an answer in hand again, read a write back, or say which attempt was sent.
 * The built-in stores reject with one; a custom store may reject with its driver's own error
 * (ioredis: a plain `Error` "Command timed out", after Redis may have applied the command), which
 * would end a call whose order was created with that bare error. Such a rejection becomes a
 * `StoreError` naming the store and the method, the driver's error its `cause`. A refused argument
 * (`TypeError`, `RangeError`) and oncefetch's own errors pass unchanged; a fetch's network failure,
 * also a `TypeError`, does not (see `fetchFailed`).
 *
 * @internal
 * @module
 */
import { StoreError, isOnceError } from '../errors.js';
import type { OnceStore } from './contract.js';

/** One wrapper per store, so clients sharing a store share it (and count its users together). */
const wrappers = new WeakMap<OnceStore, OnceStore>();

type Method = Exclude<keyof OnceStore, 'name'>;

const refusal = (error: unknown): error is Error => error instanceof TypeError || error instanceof RangeError;

/**
 * A store over HTTP (a Redis or database REST API, a Durable Object) rejects with its fetch's
 * TypeError when the connection fails, after the write may have applied: a store failure, not a
 * refused argument. Node's and Bun's "fetch failed" (the socket error its `cause`), Chromium's
 * "Failed to fetch", Deno's "error sending request for url (…)" / "error sending request from … for …"
 * (no cause), Firefox's "NetworkError when attempting to fetch resource.", Safari's "Load failed",
 * React Native's (whatwg-fetch) "Network request failed"; and any TypeError carrying another
 * library's error as its cause.
 */
function fetchFailed(error: Error): boolean {
  return (
    /^(?:fetch failed|Failed to fetch|error sending request (?:for|from) |NetworkError when attempting to fetch resource|Load failed|Network request failed)/.test(error.message) ||
    (error.cause instanceof Error && !isOnceError(error.cause))
  );
}

export function withStoreErrors(store: OnceStore): OnceStore {
  let wrapped = wrappers.get(store);
  if (wrapped === undefined) {
    const method =
      <M extends Method>(name: M) =>
      (...args: Parameters<OnceStore[M]>): ReturnType<OnceStore[M]> =>
        new Promise((resolve) => resolve((store[name] as (...a: typeof args) => unknown)(...args))).catch((error: unknown) => {
          if (isOnceError(error) || (refusal(error) && !fetchFailed(error))) throw error;
          throw new StoreError(`${store.name}: ${name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
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
