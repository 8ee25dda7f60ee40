/**
 * The SQLite store, `oncefetch/sqlite`: the default store on Node (DESIGN §6).
 *
 * One file shared by any number of processes: WAL, `busy_timeout`, an atomic
 * `INSERT … ON CONFLICT DO NOTHING` for `claim` and `UPDATE … WHERE generation = ?`
 * for `compareAndSet`. The file and its `-wal`/`-shm` companions are mode 0600
 * because records hold result bodies.
 *
 * Group commit: the writes issued while the event loop runs one turn (every
 * `claim` and `compareAndSet` of that turn) are applied in order, each with its
 * own insert-if-absent or compare-and-set, inside one `BEGIN IMMEDIATE … COMMIT`;
 * each promise resolves only after that commit. Concurrent calls thus share one
 * transaction (and, in `'power-loss'` mode, one fsync) instead of paying one each.
 *
 * better-sqlite3 is loaded on the first call of {@link sqliteStore}, so
 * importing this module costs nothing until a store is opened. It is an
 * optional dependency of oncefetch: when it is missing (or its native binding
 * is), {@link sqliteStore} throws a `StoreError` saying how to install it.
 *
 * @module
 */
import type { OperationRecord } from '../operation/record.js';
import type { ClaimResult, CompareAndSetResult, ListQuery, OnceStore } from './contract.js';
import {
  checkCompareAndSet,
  checkPurgeNow,
  closedError,
  decodeRecord,
  encodeRecord,
  purgeFailed,
  readListed,
  resolveListQuery,
  type RecordColumns,
  type ResolvedListQuery,
} from './common.js';
import { createGroupCommit } from './sqlite-batch.js';
import type { GroupCommit } from './sqlite-batch.js';
import { TERMINAL_SQL, openDatabase, resolveOptions, storeError } from './sqlite-open.js';
import { installRecordPrecheck } from '../operation/record-shape.js';
import type { SqliteDatabase, SqliteStatement } from './sqlite-handle.js';

export type { SqliteDatabase, SqliteStatement } from './sqlite-handle.js';

// Node entry point: the exact-shape pre-check in front of the record schema (record.ts, usePrecheck).
installRecordPrecheck();

type Database = SqliteDatabase;
type Statement = SqliteStatement;

/**
 * Options of {@link sqliteStore}. Point every process that must share
 * operations at the same `path`.
 *
 * @example
 * ```ts
 * const store = sqliteStore({ path: '/var/lib/agent/oncefetch.db', durability: 'power-loss', busyTimeoutMs: 10_000 })
 * ```
 */
export interface SqliteStoreOptions {
  /**
   * The database file, created with its parent directory when missing
   * (directory 0700, file 0600). `':memory:'` gives a private, non-durable
   * database. When {@link SqliteStoreOptions.database} is given, `path` only
   * names the store in messages.
   */
  path: string;
  /**
   * What a resolved write survives.
   * - `'process'`: WAL with `synchronous=NORMAL`: survives a crash of the
   *   process, not of the machine; about 5× cheaper per commit.
   * - `'power-loss'`: WAL with `synchronous=FULL`: a write that lets a send
   *   start (a record entering `in_flight`) or records a cancellation is
   *   fsynced before its promise resolves. Other writes (an attempt's outcome,
   *   a lease renewal) are committed at once and reach the disk with the next
   *   fsync: losing one to a power cut leaves the earlier, durable state
   *   (`in_flight`), which a restart reconciles with the same key, as for any
   *   crash after a send. Concurrent writes share one fsync (group commit).
   *
   * @default 'process'
   */
  durability?: 'process' | 'power-loss' | undefined;
  /**
   * How long a write waits for another connection's lock before failing
   * with a `StoreError` (SQLite `busy_timeout`).
   *
   * @default 5000
   */
  busyTimeoutMs?: number | undefined;
  /**
   * An already open better-sqlite3 handle (`new Database(file)`) to use
   * instead of opening `path`.
   * The store sets its pragmas and schema on it but leaves its file modes
   * alone and does not close it on `close()`.
   *
   * @default undefined (open `path`)
   */
  database?: SqliteDatabase | undefined;
}

const PURGE_BATCH = 1000;

interface RecordRow {
  id: string;
  generation: number;
  state: unknown;
  tenant: unknown;
  expires_at: unknown;
  data: unknown;
}

interface Statements {
  insert: Statement;
  select: Statement;
  update: Statement;
  purgeBatch: Statement;
  list: Map<string, Statement>;
}

function prepare(db: Database): Statements {
  return {
    insert: db.prepare(
      `INSERT INTO oncefetch_records (id, generation, state, tenant, lease_expires_at, expires_at, updated_at, data)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    select: db.prepare('SELECT id, generation, state, tenant, expires_at, data FROM oncefetch_records WHERE id = ?'),
    update: db.prepare(
      `UPDATE oncefetch_records
       SET generation = ?, state = ?, tenant = ?, lease_expires_at = ?, expires_at = ?, updated_at = ?, data = ?
       WHERE id = ? AND generation = ?`,
    ),
    // DELETE … LIMIT needs a compile-time option; a bounded subquery does not. A row is deleted only
    // when its text is JSON naming the id, generation, state and expiry its columns hold: never a
    // row that cannot be read as the record it claims to be.
    purgeBatch: db.prepare(
      `DELETE FROM oncefetch_records WHERE id IN (
         SELECT id FROM oncefetch_records WHERE state IN (${TERMINAL_SQL}) AND expires_at < ?
           AND CASE WHEN json_valid(data) THEN json_extract(data, '$.state') = state AND json_extract(data, '$.id') = id
             AND json_extract(data, '$.generation') = generation AND json_extract(data, '$.expiresAt') = expires_at END
           LIMIT ${PURGE_BATCH})`,
    ),
    list: new Map(),
  };
}

/** One statement per query shape, prepared the first time that shape is used. */
function listStatement(db: Database, cache: Map<string, Statement>, q: ResolvedListQuery): Statement {
  const shape = `${q.states?.length ?? '*'}|${q.leaseExpiredBefore !== undefined}|${q.tenant !== undefined}`;
  let statement = cache.get(shape);
  if (statement === undefined) {
    const where: string[] = [];
    if (q.states !== undefined) where.push(`state IN (${q.states.map(() => '?').join(', ')})`);
    if (q.leaseExpiredBefore !== undefined) where.push('(lease_expires_at IS NULL OR lease_expires_at < ?)');
    if (q.tenant !== undefined) where.push('tenant = ?');
    statement = db.prepare(
      `SELECT id, generation, state, tenant, expires_at, data FROM oncefetch_records
       ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
       ORDER BY updated_at ASC, id ASC LIMIT ?`,
    );
    cache.set(shape, statement);
  }
  return statement;
}

/**
 * Writes that must reach the disk before they resolve in `'power-loss'` mode:
 * a record entering `in_flight` lets a send start; a cancellation is an
 * acknowledgment the caller acts on. Losing any other write to a power cut
 * leaves an earlier durable state that recovery handles like any crash.
 */
function gatesSend(record: OperationRecord): boolean {
  return record.state === 'in_flight' || record.cancelRequestedAt !== null;
}

function columnValues(c: RecordColumns): unknown[] {
  return [c.generation, c.state, c.tenant, c.leaseExpiresAt, c.expiresAt, c.updatedAt];
}

/**
 * Opens (creating when missing) an SQLite {@link OnceStore}. Safe to share
 * between processes. Throws a `StoreError` when the file is not a database,
 * fails `PRAGMA quick_check`, or was written by a newer schema, and when
 * better-sqlite3 (an optional dependency) or its native binding is missing.
 *
 * @example
 * ```ts
 * import { sqliteStore } from 'oncefetch/sqlite';
 * const store = sqliteStore({ path: '.oncefetch/state.db' });
 * ```
 */
export function sqliteStore(options: SqliteStoreOptions): OnceStore {
  const resolved = resolveOptions(options);
  const { path } = resolved;
  const name = `sqlite:${path}`;
  const ownsHandle = options.database === undefined;
  const db = openDatabase(resolved, options.database);
  let statements: Statements;
  let batch: GroupCommit;
  try {
    statements = prepare(db);
    batch = createGroupCommit({ db, powerLoss: resolved.synchronous === 'FULL', toError: (cause, action) => storeError(cause, path, action, resolved.busyTimeoutMs) });
  } catch (cause) {
    if (ownsHandle && db.open) db.close();
    throw storeError(cause, path, 'preparing statements', resolved.busyTimeoutMs);
  }
  const { insert, select, update, purgeBatch } = statements;
  let closed = false;

  /** Runs `body` unless closed; every failure becomes a StoreError naming cause and path. */
  const guard = <T>(method: string, action: string, body: () => T): T => {
    if (closed) throw closedError(name, method);
    try {
      return body();
    } catch (cause) {
      throw storeError(cause, path, action, resolved.busyTimeoutMs);
    }
  };
  const read = (row: RecordRow): OperationRecord =>
    decodeRecord(row.data, row.id, row.generation, `${name} record ${row.id}`, { state: row.state, tenant: row.tenant, expiresAt: row.expires_at });
  const selectRow = (id: string): RecordRow | undefined => select.get(id) as RecordRow | undefined;

  return {
    name,

    async claim(record: OperationRecord): Promise<ClaimResult> {
      if (closed) throw closedError(name, 'claim');
      const { data, columns } = encodeRecord(record, 'claim');
      const id = record.id;
      // The conflict read runs in the insert's transaction so the winner cannot be purged in between.
      const existing = await batch.write(
        (): RecordRow | undefined => {
          if (insert.run(id, ...columnValues(columns), data).changes === 1) return undefined;
          const row = selectRow(id);
          if (row === undefined) throw new Error(`record ${id} vanished inside its claim transaction`);
          return row;
        },
        gatesSend(record),
        `claiming record ${id}`,
      );
      if (existing !== undefined) return { created: false, record: read(existing) };
      return { created: true, record: JSON.parse(data) as OperationRecord };
    },

    async get(id: string): Promise<OperationRecord | undefined> {
      return guard('get', `reading record ${id}`, () => {
        const row = selectRow(id);
        return row === undefined ? undefined : read(row);
      });
    },

    async compareAndSet(id: string, expectedGeneration: number, next: OperationRecord): Promise<CompareAndSetResult> {
      if (closed) throw closedError(name, 'compareAndSet');
      checkCompareAndSet(id, expectedGeneration, next);
      const { data, columns } = encodeRecord(next, 'compareAndSet');
      // The generation check and the write are one UPDATE; a miss reads the current row back in the same transaction.
      const current = await batch.write(
        (): RecordRow | null | undefined => {
          if (update.run(...columnValues(columns), data, id, expectedGeneration).changes === 1) return null;
          return selectRow(id);
        },
        gatesSend(next),
        `updating record ${id}`,
      );
      if (current === null) return { ok: true };
      return { ok: false, current: current === undefined ? undefined : read(current) };
    },

    async list(query?: ListQuery): Promise<OperationRecord[]> {
      if (closed) throw closedError(name, 'list');
      const q = resolveListQuery(query);
      if (q.states !== undefined && q.states.length === 0) return [];
      const rows = guard('list', 'listing records', () => {
        const params: unknown[] = [...(q.states ?? [])];
        if (q.leaseExpiredBefore !== undefined) params.push(q.leaseExpiredBefore);
        if (q.tenant !== undefined) params.push(q.tenant);
        params.push(q.limit);
        return listStatement(db, statements.list, q).all(...params) as RecordRow[];
      });
      return readListed(rows, q, (row) => row.id, read);
    },

    async purge(now: number): Promise<number> {
      if (closed) throw closedError(name, 'purge');
      checkPurgeNow(now);
      let total = 0;
      for (;;) {
        // Each batch is its own short transaction, so other writers get the lock in between.
        let deleted: number;
        try {
          deleted = guard('purge', 'purging expired records', () => purgeBatch.run(now).changes);
        } catch (error) {
          throw purgeFailed(error, total);
        }
        total += deleted;
        if (deleted < PURGE_BATCH) return total;
        await new Promise<void>((done) => setImmediate(done));
      }
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      // Writes issued before close() still commit (and settle) before the handle goes.
      batch.flush();
      if (ownsHandle) {
        try {
          db.close();
        } catch (cause) {
          throw storeError(cause, path, 'closing');
        }
      }
    },
  };
}
