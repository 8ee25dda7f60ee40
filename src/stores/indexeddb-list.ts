/**
 * How the IndexedDB store's `list` reads: in its order (`updatedAt`, then key) through the
 * `[state, updatedAt]` index, one cursor per state, merged, stopping once `limit` rows are
 * selected; so `list({ limit: 10 })` reads about ten rows, not every row of the states asked for.
 * And how the store awaits its transactions (`completed`), this one and its writes' and purge's.
 *
 * @internal
 * @module
 */
import type { ResolvedListQuery } from './common.js';

/**
 * The first `q.limit` [key, row] pairs of `q.states` (every state when undefined) that `selects`
 * takes, in order, inside the transaction of `store`. When some row is not in the index (a row with
 * no state or `updatedAt` a key can hold: not written by oncefetch), only a read of every row can
 * place it: then every row is read and sorted by `updatedAt(row)`, then key.
 */
export function firstInOrder(
  store: IDBObjectStore,
  indexName: string,
  q: Pick<ResolvedListQuery, 'states' | 'limit'>,
  selects: (key: string, row: unknown) => boolean,
  updatedAt: (row: unknown) => number,
): Promise<[string, unknown][]> {
  const found: [string, unknown][] = [];
  if (q.limit === 0 || q.states?.length === 0) return Promise.resolve(found);
  const take = (key: string, row: unknown): void => {
    if (selects(key, row)) found.push([key, row]);
  };
  const index = store.index(indexName);
  const cmp = (a: IDBValidKey, b: IDBValidKey): number => indexedDB.cmp(a, b);
  const stateOf = (c: IDBCursor): IDBValidKey => (c.key as IDBValidKey[])[0]!;
  const order = (c: IDBCursor): IDBValidKey[] => [(c.key as IDBValidKey[])[1]!, c.primaryKey];

  const merge = (states: readonly IDBValidKey[]): void => {
    // heads[i]: state i's next entry; null past its last; undefined while its cursor moves
    const heads: Array<IDBCursorWithValue | null | undefined> = states.map(() => undefined);
    let moving = states.length;
    const next = (): void => {
      let at = -1;
      heads.forEach((head, i) => {
        if (head && (at === -1 || cmp(order(head), order(heads[at]!)) < 0)) at = i;
      });
      if (at === -1) return;
      const first = heads[at]!;
      take(String(first.primaryKey), first.value);
      if (found.length >= q.limit) return; // the transaction ends here: no row past the limit is read
      heads[at] = undefined;
      moving = 1;
      first.continue();
    };
    states.forEach((state, i) => {
      const walk = index.openCursor(IDBKeyRange.lowerBound([state]));
      walk.onsuccess = () => {
        const c = walk.result;
        heads[i] = c !== null && cmp(stateOf(c), state) === 0 ? c : null;
        if (--moving === 0) next();
      };
    });
  };

  /** Every state in the index, one key step each: from one state's first entry to the next state's. */
  const everyState = (then: (states: IDBValidKey[]) => void): void => {
    const states: IDBValidKey[] = [];
    const walk = index.openKeyCursor();
    walk.onsuccess = () => {
      const c = walk.result;
      if (c === null) return then(states);
      const state = stateOf(c);
      if (states.length > 0 && cmp(state, states[states.length - 1]!) === 0) return c.continue();
      states.push(state);
      const past: IDBValidKey = [state, []]; // after every number, date and string updatedAt
      if (cmp(past, c.key) > 0) c.continue(past);
      else c.continue();
    };
  };

  const readAll = (): void => {
    const keys = store.getAllKeys();
    const rows = store.getAll();
    rows.onsuccess = () => {
      const stateIn = (row: unknown): boolean =>
        q.states === undefined || (typeof row === 'object' && row !== null && q.states.includes((row as { state: never }).state));
      const entries = keys.result
        .map((key, i): [string, unknown] => [String(key), rows.result[i]])
        .filter(([, row]) => stateIn(row))
        .sort(([a, x], [b, y]) => updatedAt(x) - updatedAt(y) || (a < b ? -1 : a > b ? 1 : 0));
      for (const [key, row] of entries) {
        if (found.length >= q.limit) break;
        take(key, row);
      }
    };
  };

  const all = store.count();
  const indexed = index.count();
  indexed.onsuccess = () => {
    if (all.result !== indexed.result) readAll();
    else if (q.states !== undefined) merge(q.states);
    else everyState(merge);
  };
  return completed(store.transaction).then(() => found);
}

/**
 * Resolves once `tx` commits; rejects when it aborts, with its error, or, when it has none (aborted by
 * `abort()`: IndexedDB then leaves `tx.error` null), an AbortError that says so. idb-keyval's
 * `promisifyRequest` rejects with that null, which read as "failed (null)".
 */
export function completed(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    // (a request's error that is not handled aborts the transaction with it: that abort reports it)
    tx.onabort = () => reject(tx.error ?? new DOMException('the transaction was aborted before it completed, with no error (as abort() leaves it)', 'AbortError'));
  });
}
