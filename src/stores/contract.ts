/**
 * The store contract (DESIGN §6). Every backend — memory, SQLite, IndexedDB,
 * PostgreSQL, or a third party's — implements this and passes the same
 * contract suite.
 *
 * @module
 */
import type { StoreError } from '../errors.js';
import type { OperationRecord, OperationState } from '../operation/record.js';

/**
 * Result of {@link OnceStore.claim}, as a custom store returns it.
 *
 * @example
 * ```ts
 * async claim(record: OperationRecord): Promise<ClaimResult> {
 *   const existing = this.rows.get(record.id)
 *   if (existing) return { created: false, record: existing }
 *   this.rows.set(record.id, record)
 *   return { created: true, record }
 * }
 * ```
 */
export interface ClaimResult {
  /** true when this call inserted the record; false when one already existed. */
  created: boolean;
  /** the stored record: the one passed in when created, otherwise the existing one. */
  record: OperationRecord;
}

/**
 * Result of {@link OnceStore.compareAndSet}. On a lost race, `current` is
 * the record that won (undefined if it is gone), so the caller need not read
 * it again.
 *
 * @example
 * ```ts
 * const res: CompareAndSetResult = await store.compareAndSet(id, seen.generation, next)
 * if (!res.ok) console.log('lost the race to generation', res.current?.generation)
 * ```
 */
export type CompareAndSetResult = { ok: true } | { ok: false; current: OperationRecord | undefined };

/**
 * A row {@link OnceStore.list} found but could not read as a record (see {@link ListQuery.onCorrupt}).
 *
 * @example
 * ```ts
 * await store.list({ onCorrupt: ({ id, error }) => console.warn(`unreadable record ${id}: ${error.message}`) })
 * ```
 */
export interface CorruptRow {
  /** the key the row is stored under */
  id: string;
  /** the error `get(id)` rejects with */
  error: StoreError;
}

/**
 * Filter of {@link OnceStore.list}; omitted fields do not filter. The built-in stores refuse
 * unknown keys with a `TypeError` naming them (a misspelt filter would list every record); a custom
 * store need not check its callers' queries (oncefetch itself passes only these keys).
 *
 * @example
 * ```ts
 * const stuck = await client.store.list({ states: ['ambiguous'], tenant: 't1', limit: 20 })
 * ```
 */
export interface ListQuery {
  /** only records in one of these states */
  states?: readonly OperationState[] | undefined;
  /** only records with no lease or a lease that expired before this epoch ms */
  leaseExpiredBefore?: number | undefined;
  /** only records of this tenant */
  tenant?: string | undefined;
  /** at most this many, oldest `updatedAt` first @default 100 */
  limit?: number | undefined;
  /**
   * Called with each row the filters select that cannot be read as a record (a `StoreError`,
   * as `get` would reject with), which is then left out instead of rejecting the whole list.
   * Such a row keeps its place in the order and counts toward `limit`. A store that does not
   * know this option keeps rejecting. @default undefined (a corrupt row rejects the list)
   */
  onCorrupt?: ((row: CorruptRow) => void) | undefined;
}

/**
 * A durable home for operation records.
 *
 * Rules every implementation keeps:
 * - `claim` is an atomic insert-if-absent keyed by `record.id`.
 * - `compareAndSet` replaces the record only when the stored `generation`
 *   equals `expectedGeneration`; `next.generation` is always greater.
 * - Everything read back is validated (`parseRecord`); a corrupt row rejects
 *   with `StoreError`, never resolves as absent (`list` passes it to
 *   `onCorrupt` instead, when the query gives one).
 * - A promise that resolves means the write is as durable as the store
 *   promises (SQLite: committed; PostgreSQL: committed).
 *
 * Prove a custom store with `describeStoreContract` from `oncefetch/testing`.
 *
 * @example
 * ```ts
 * const client = createClient({ store: sqliteStore({ path: './.oncefetch/agent.db' }) })
 * ```
 */
export interface OnceStore {
  /**
   * short name for diagnostics, e.g. `'sqlite:/path/db'`; in browsers it also names the Web Locks
   * of the store's records, so stores that share records share a name, and stores that do not
   * should not (`'indexeddb:<dbName>/<storeName>'`; `'indexeddb:/["<dbName>","<storeName>"]'`, JSON, when either has a `/`)
   */
  readonly name: string;
  /** insert-if-absent */
  claim(record: OperationRecord): Promise<ClaimResult>;
  /** the record with this id, or undefined when there is none */
  get(id: string): Promise<OperationRecord | undefined>;
  /** replace the record if its generation is still `expectedGeneration` */
  compareAndSet(id: string, expectedGeneration: number, next: OperationRecord): Promise<CompareAndSetResult>;
  /** records for recovery and inspection, oldest `updatedAt` first, ties by id; with `limit`, the first of that whole order */
  list(query?: ListQuery): Promise<OperationRecord[]>;
  /**
   * removes terminal records whose `expiresAt` is before `now`; returns how many. One that fails after
   * removing some rejects with a `StoreError` whose `purged` says how many (the built-in stores do)
   */
  purge(now: number): Promise<number>;
  /** releases resources; further calls reject */
  close(): Promise<void>;
}

/** Default `limit` of {@link OnceStore.list}. */
export const DEFAULT_LIST_LIMIT = 100;
