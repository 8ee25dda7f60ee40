/**
 * The in-memory store: tests and short-lived scripts (DESIGN §6).
 *
 * Records are kept as JSON text, so no caller can change stored state through
 * a reference, and every read is validated like in any other store. Each
 * method checks and writes without an `await` in between, which is what makes
 * `claim` and `compareAndSet` atomic in one JavaScript realm.
 *
 * @module
 */
import { checkKeys } from '../options.js';
import type { OperationRecord } from '../operation/record.js';
import { isTerminal } from '../operation/record.js';
import type { ClaimResult, CompareAndSetResult, ListQuery, OnceStore } from './contract.js';
import {
  checkCompareAndSet,
  checkPurgeNow,
  closedError,
  decodeRecord,
  encodeRecord,
  purgeable,
  readListed,
  resolveListQuery,
  type RecordColumns,
} from './common.js';

/** One stored record: its JSON text plus the columns queries filter on. */
interface Row extends RecordColumns {
  id: string;
  data: string;
}

const rowsOf = new WeakMap<OnceStore, Map<string, Row>>();

/**
 * Creates an in-memory {@link OnceStore}. Nothing survives the process. It takes no options: an
 * object with a key (`{ path }`, expecting a file) is a TypeError, not a store that forgets.
 *
 * @example
 * ```ts
 * const client = createClient({ tenant: 't1', store: memoryStore() });
 * ```
 */
export function memoryStore(options?: Record<string, never>): OnceStore {
  if (options !== undefined) checkKeys('memoryStore', 'options', options, []);
  // Its own name: it shares its records with no other store, so its records' Web Locks are shared with none either
  // (two tabs' or two clients' memory stores never wait on each other for one scope).
  const name = `memory:${Math.random().toString(36).slice(2, 10)}`;
  const rows = new Map<string, Row>();
  let closed = false;

  const open = (method: string): void => {
    if (closed) throw closedError(name, method);
  };
  const read = (row: Row): OperationRecord =>
    decodeRecord(row.data, row.id, row.generation, `${name} record ${row.id}`, { state: row.state, tenant: row.tenant, expiresAt: row.expiresAt });

  const store: OnceStore = {
    name,

    async claim(record: OperationRecord): Promise<ClaimResult> {
      open('claim');
      const { data, columns } = encodeRecord(record, 'claim');
      const existing = rows.get(record.id);
      if (existing !== undefined) return { created: false, record: read(existing) };
      const row: Row = { id: record.id, data, ...columns };
      rows.set(record.id, row);
      return { created: true, record: read(row) };
    },

    async get(id: string): Promise<OperationRecord | undefined> {
      open('get');
      const row = rows.get(id);
      return row === undefined ? undefined : read(row);
    },

    async compareAndSet(id: string, expectedGeneration: number, next: OperationRecord): Promise<CompareAndSetResult> {
      open('compareAndSet');
      checkCompareAndSet(id, expectedGeneration, next);
      const { data, columns } = encodeRecord(next, 'compareAndSet');
      const row = rows.get(id);
      if (row === undefined) return { ok: false, current: undefined };
      // Like SQLite's `UPDATE … WHERE generation = ?`, the check uses the
      // indexed column, not the (possibly corrupt) text.
      if (row.generation !== expectedGeneration) return { ok: false, current: read(row) };
      rows.set(id, { id, data, ...columns });
      return { ok: true };
    },

    async list(query?: ListQuery): Promise<OperationRecord[]> {
      open('list');
      const q = resolveListQuery(query);
      const states = q.states === undefined ? undefined : new Set(q.states);
      const matches: Row[] = [];
      for (const row of rows.values()) {
        if (states !== undefined && !states.has(row.state)) continue;
        if (q.tenant !== undefined && row.tenant !== q.tenant) continue;
        if (
          q.leaseExpiredBefore !== undefined &&
          row.leaseExpiresAt !== null &&
          !(row.leaseExpiresAt < q.leaseExpiredBefore)
        ) {
          continue;
        }
        matches.push(row);
      }
      matches.sort((a, b) => a.updatedAt - b.updatedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return readListed(matches.slice(0, q.limit), q, (row) => row.id, read);
    },

    async purge(now: number): Promise<number> {
      open('purge');
      checkPurgeNow(now);
      let count = 0;
      for (const row of [...rows.values()]) {
        if (!isTerminal(row.state) || !(row.expiresAt < now)) continue;
        // Only a row that reads as the expired terminal record its columns say: never evidence it cannot read.
        if (purgeable(row, read, now)) {
          rows.delete(row.id);
          count++;
        }
      }
      return count;
    },

    async close(): Promise<void> {
      closed = true;
    },
  };
  rowsOf.set(store, rows);
  return store;
}

/**
 * Test hook for the contract suite: replaces the stored text of an existing
 * record behind the store's back, leaving its indexed columns alone, as a
 * corrupt row in a database would.
 *
 * @internal
 */
export function corruptMemoryRecord(store: OnceStore, id: string, raw: string): void {
  const row = rowsOf.get(store)?.get(id);
  if (row === undefined) throw new Error(`corruptMemoryRecord: no record ${id} in this memory store`);
  row.data = raw;
}
