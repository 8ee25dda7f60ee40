/**
 * Argument checks and read-back checks shared by the store implementations, so
 * every backend rejects the same programming errors the same way and treats the
 * same rows as corrupt.
 *
 * @internal
 * @module
 */
import { StoreError } from '../errors.js';
import { findLoneSurrogate } from '../operation/canonical-json.js';
import { isTerminal, parseRecord, recordId, type OperationRecord, type OperationState } from '../operation/record.js';
import { checkKeys } from '../options.js';
import { DEFAULT_LIST_LIMIT, type ListQuery } from './contract.js';

/** The columns a store indexes besides the record text. */
export interface RecordColumns {
  generation: number;
  state: OperationState;
  tenant: string;
  leaseExpiresAt: number | null;
  expiresAt: number;
  updatedAt: number;
}

/**
 * Validates a record a caller is about to write and returns its JSON text and
 * index columns. Writing an invalid record would leave a row that every later
 * read rejects, wedging the operation, so it is refused up front: it is a
 * programming error (`TypeError`), not a store failure.
 */
export function encodeRecord(record: OperationRecord, method: string): { data: string; columns: RecordColumns } {
  let valid: OperationRecord;
  try {
    valid = parseRecord(record, `${method}: record to write`);
  } catch (cause) {
    const message = cause instanceof Error ? cause.message : String(cause);
    throw new TypeError(`${message} (not written)`, { cause });
  }
  return {
    data: JSON.stringify(valid),
    columns: {
      generation: valid.generation,
      state: valid.state,
      tenant: valid.tenant,
      leaseExpiresAt: valid.lease === null ? null : valid.lease.expiresAt,
      expiresAt: valid.expiresAt,
      updatedAt: valid.updatedAt,
    },
  };
}

/** Rejects a compare-and-set that cannot be right whatever the store holds. */
export function checkCompareAndSet(id: string, expectedGeneration: number, next: OperationRecord): void {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('compareAndSet: id must be a non-empty string');
  if (!Number.isSafeInteger(expectedGeneration) || expectedGeneration < 0) {
    throw new RangeError('compareAndSet: expectedGeneration must be a non-negative integer');
  }
  if (next.id !== id) throw new TypeError(`compareAndSet: next.id ${next.id} differs from id ${id}`);
  if (!(next.generation > expectedGeneration)) {
    throw new TypeError(
      `compareAndSet: next.generation ${next.generation} must be greater than expectedGeneration ${expectedGeneration}`,
    );
  }
}

/** Parses a stored row and checks it belongs where it was found. */
export function decodeRecord(
  data: unknown,
  id: string,
  generation: number,
  where: string,
  columns?: { state: unknown; tenant: unknown; expiresAt: unknown },
): OperationRecord {
  const record = parseRecord(data, where);
  if (record.id !== id) throw new StoreError(`${where}: stored record carries another id (${record.id})`);
  // The id is derived from the scope: a record whose scope says otherwise is another operation's.
  if (recordId(record) !== id) throw new StoreError(`${where}: stored record's scope (${record.tenant}/${record.action}/${record.ref}) does not match its id`);
  // The columns that list and purge select on must say what the record says, or a purge could
  // delete a live record as terminal.
  if (columns !== undefined) {
    for (const [column, value] of [['state', record.state], ['tenant', record.tenant], ['expires_at', record.expiresAt]] as const) {
      // A text column goes through UTF-8, where each driver replaces a lone surrogate its own way:
      // such a tenant is compared by the record alone.
      if (column === 'tenant' && findLoneSurrogate(record.tenant) !== -1) continue;
      const stored = column === 'expires_at' ? Number(columns.expiresAt) : columns[column];
      if (stored !== value) throw new StoreError(`${where}: the row's ${column} column (${String(stored)}) disagrees with its record (${String(value)})`);
    }
  }
  if (record.generation !== generation) {
    throw new StoreError(
      `${where}: stored record has generation ${record.generation} but its row says ${generation}`,
    );
  }
  return record;
}

/**
 * Whether purge may delete this row: it reads as a terminal record that expired before `now`
 * (so a row that is not a valid record, evidence nobody can read, is never deleted).
 */
export function purgeable<Row>(row: Row, read: (row: Row) => OperationRecord, now: number): boolean {
  try {
    const record = read(row);
    return isTerminal(record.state) && record.expiresAt < now;
  } catch {
    return false;
  }
}

/** A {@link ListQuery} with defaults applied. */
export interface ResolvedListQuery {
  /** undefined = any state; an empty list matches nothing */
  states: readonly OperationState[] | undefined;
  leaseExpiredBefore: number | undefined;
  tenant: string | undefined;
  limit: number;
  onCorrupt: ListQuery['onCorrupt'];
}

const STATES: ReadonlySet<string> = new Set(['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled']);

/**
 * Validates a list query (a bad one is a `TypeError`/`RangeError` naming the field). Unknown keys
 * are refused, as in every options object: a misspelt filter (`state` for `states`) would
 * otherwise filter nothing and list every record.
 */
export function resolveListQuery(query: ListQuery | undefined): ResolvedListQuery {
  const q = query ?? {};
  checkKeys('list', 'query', q, ['states', 'leaseExpiredBefore', 'tenant', 'limit', 'onCorrupt']);
  let states: OperationState[] | undefined;
  if (q.states !== undefined) {
    if (!Array.isArray(q.states)) throw new TypeError('list: states must be an array of states');
    for (const state of q.states) {
      if (!STATES.has(state)) throw new TypeError(`list: unknown state ${JSON.stringify(state)} in states`);
    }
    states = [...new Set(q.states)];
  }
  if (q.leaseExpiredBefore !== undefined && !Number.isFinite(q.leaseExpiredBefore)) {
    throw new RangeError('list: leaseExpiredBefore must be a finite epoch ms');
  }
  if (q.tenant !== undefined && typeof q.tenant !== 'string') throw new TypeError('list: tenant must be a string');
  const limit = q.limit ?? DEFAULT_LIST_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError('list: limit must be a non-negative integer');
  if (q.onCorrupt !== undefined && typeof q.onCorrupt !== 'function') throw new TypeError('list: onCorrupt must be a function');
  return { states, leaseExpiredBefore: q.leaseExpiredBefore, tenant: q.tenant, limit, onCorrupt: q.onCorrupt };
}

/**
 * Reads the rows a list selected, in order. A row that is not a valid record rejects the list,
 * or, when the query has `onCorrupt`, is passed to it with its id and left out.
 */
export function readListed<Row>(rows: readonly Row[], q: ResolvedListQuery, idOf: (row: Row) => string, read: (row: Row) => OperationRecord): OperationRecord[] {
  const records: OperationRecord[] = [];
  for (const row of rows) {
    let record: OperationRecord;
    try {
      record = read(row);
    } catch (error) {
      if (q.onCorrupt === undefined || !(error instanceof StoreError)) throw error;
      q.onCorrupt({ id: idOf(row), error });
      continue;
    }
    records.push(record);
  }
  return records;
}

/** Validates the `now` of `purge`. */
export function checkPurgeNow(now: number): void {
  if (!Number.isFinite(now)) throw new RangeError('purge: now must be a finite epoch ms');
}

/**
 * The error of a `purge` that failed after removing `purged` records: a StoreError says how many
 * (message and {@link StoreError.purged}), with the same cause, so the caller can tell what is gone.
 * Anything else (a programming error) goes through as it is.
 */
export function purgeFailed(error: unknown, purged: number): unknown {
  if (!(error instanceof StoreError)) return error;
  const records = `${purged} expired record${purged === 1 ? '' : 's'}`;
  return new StoreError(`${error.message} (purge had removed ${records} before this)`, { cause: error.cause, scope: error.scope, purged });
}

/** The error a store raises for any call after `close()`. */
export function closedError(name: string, method: string): StoreError {
  return new StoreError(`${name}: ${method} called after close(); open a new store`);
}
