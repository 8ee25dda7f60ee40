/**
 * Test stores built over another store: a test gives only the methods it changes (a slow claim, a
 * failing write, a close that keeps the records) and the rest pass to the store underneath.
 */
import type { OnceStore, OperationRecord } from '../../src/index.js';

/**
 * A store with `inner`'s name whose methods are `own`'s where given, otherwise `inner`'s (`close`
 * included: it closes `inner` unless `own.close` is given, e.g. `async () => undefined` to keep
 * `inner`'s records readable after the client closes).
 */
export function storeOver(inner: OnceStore, own: Partial<Omit<OnceStore, 'name'>>): OnceStore {
  return {
    name: inner.name,
    claim: own.claim ?? ((r) => inner.claim(r)),
    compareAndSet: own.compareAndSet ?? ((id, g, next) => inner.compareAndSet(id, g, next)),
    get: own.get ?? ((id) => inner.get(id)),
    list: own.list ?? ((q) => inner.list(q)),
    purge: own.purge ?? ((n) => inner.purge(n)),
    close: own.close ?? (() => inner.close()),
  };
}

/**
 * Whether the write from `before` to `next` changes only the lease (a renew or a take-back): same
 * state, same attempts, as many evidence entries. False when there was no record before.
 */
export function leaseOnly(before: OperationRecord | undefined, next: OperationRecord): boolean {
  return before !== undefined && before.state === next.state && JSON.stringify(before.attempts) === JSON.stringify(next.attempts) && before.evidence.length === next.evidence.length;
}
