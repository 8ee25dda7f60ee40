/**
 * The PostgreSQL store, `oncefetch/postgres`: one database shared by a fleet
 * of agents on many machines (DESIGN §6).
 *
 * `claim` is `INSERT … ON CONFLICT DO NOTHING RETURNING`, `compareAndSet` an
 * `UPDATE … WHERE id = $8 AND generation = $9`, each one autocommit statement.
 * `purge` deletes in bounded batches, each its own statement, so claims never
 * queue behind a long delete.
 *
 * `pg` is an optional peer dependency, imported on the first call of a store
 * opened with `connectionString` (never when a `pool` is passed), so
 * importing `oncefetch` or this module loads nothing.
 *
 * @module
 */
import type Pg from 'pg';
import { StoreError } from '../errors.js';
import { findLoneSurrogate } from '../operation/canonical-json.js';
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
} from './common.js';
import { TERMINAL_SQL, migrate, names, storeError, type Names, type PostgresPool } from './postgres-schema.js';
import { installRecordPrecheck } from '../operation/record-shape.js';
import { checkKeys } from '../options.js';

// Node entry point: the exact-shape pre-check in front of the record schema (record.ts, usePrecheck).
installRecordPrecheck();

export type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from './postgres-schema.js';

/**
 * Options of {@link postgresStore}: exactly one of `pool` and `connectionString`.
 *
 * @example
 * ```ts
 * postgresStore({ connectionString: process.env.DATABASE_URL, schema: 'agents' })
 * postgresStore({ pool: myPgPool })
 * ```
 */
export interface PostgresStoreOptions {
  /**
   * A `pg.Pool` (or anything with its `query` and `connect`) owned by the
   * caller. `close()` leaves it open; the caller ends it.
   *
   * @default undefined (give `connectionString` instead)
   */
  pool?: PostgresPool | undefined;
  /**
   * A libpq connection URI, e.g. `postgres://agent@db.internal:5432/app`.
   * The store creates its own `pg.Pool` from it and ends it on `close()`.
   *
   * @default undefined (give `pool` instead)
   */
  connectionString?: string | undefined;
  /**
   * Schema of the tables, created when missing. Lower-case letters, digits
   * and `_`, at most 63 characters, not starting with `pg_`.
   *
   * @default 'public'
   */
  schema?: string | undefined;
  /**
   * Table of the records; the store also creates `<table>_meta` and the
   * indexes `<table>_recovery` and `<table>_purge`. Lower-case letters,
   * digits and `_`, at most 54 characters (so the derived names fit in 63).
   *
   * @default 'oncefetch_records'
   */
  table?: string | undefined;
  /**
   * Connections of the pool created from `connectionString` (pg's `max`).
   * Ignored with `pool`.
   *
   * @default 10
   */
  poolMax?: number | undefined;
  /**
   * How long opening a connection may take before the call fails with a
   * `StoreError` (pg's `connectionTimeoutMillis`). Ignored with `pool`.
   *
   * @default 10000
   */
  connectTimeoutMs?: number | undefined;
  /**
   * Server-side `statement_timeout` of the pool's connections; 0 disables it.
   * Ignored with `pool`.
   *
   * @default 30000
   */
  statementTimeoutMs?: number | undefined;
  /**
   * Client-side limit on each query (pg's `query_timeout`): a query with no reply by then fails
   * with a `StoreError`, and its connection is discarded. `statement_timeout` cannot end a query
   * whose server cannot reply (a network partition, a failover): without this limit pg waits until
   * TCP gives up, which can take many minutes, and the write holds its record meanwhile (the call
   * itself ends at its deadline, the write goes on; `close()` drops its connection after 1 s). A
   * connection whose bytes were lost stays hung after the network heals, until this limit: the pool
   * has up to `poolMax` such connections, and the store answers nothing until they end. A write it
   * ends may have been applied all the same, its reply lost: the engine reads it back or reconciles,
   * as after any lost acknowledgement. By default 5 s above `statementTimeoutMs`, so that a statement
   * the server can still end is ended there; 0 disables it. Ignored with `pool` (set pg's
   * `query_timeout` on your pool).
   *
   * @default statementTimeoutMs + 5000 (35000); 0 when statementTimeoutMs is 0
   */
  queryTimeoutMs?: number | undefined;
  /**
   * Rows deleted per `purge` statement. Each batch is its own short
   * statement, so claims and writes interleave with a large purge.
   *
   * @default 5000
   */
  purgeBatchSize?: number | undefined;
}

/** PostgreSQL's longest identifier (NAMEDATALEN - 1). */
const MAX_IDENTIFIER_LENGTH = 63;
const MAX_TABLE_LENGTH = MAX_IDENTIFIER_LENGTH - '_recovery'.length;
const CLAIM_TRIES = 3;
/** How far the default `queryTimeoutMs` lies above `statementTimeoutMs`. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000;
/**
 * How long `close()` lets a query still pending finish before it drops that query's connection (and
 * a connection still opening). pg's `pool.end()` waits for every checked-out connection: on a dark
 * network (a partition, a failover's dead primary) until `queryTimeoutMs` (35 s by default) or
 * `connectTimeoutMs`, past any `client.close({ waitMs })`. Dropping the connection does not undo a
 * statement the server already runs; its result is only not read, as after `queryTimeoutMs`.
 */
const CLOSE_GRACE_MS = 1_000;

type Driver = typeof Pg;
let driver: Promise<Driver> | undefined;

function loadDriver(): Promise<Driver> {
  // pg is CommonJS: its default export is the module. A failed import is retried next time.
  driver ??= import('pg').then(
    (module) => module.default,
    (cause: unknown) => {
      driver = undefined;
      // "npm install pg" only when pg itself is missing: an edge runtime has pg but not the Node modules it
      // needs, and a broken install has pg but not one of its own dependencies (named in the message, not 'pg').
      const code = (cause as { code?: unknown } | undefined)?.code;
      const detail = cause instanceof Error ? (cause.message.split('\n')[0] ?? '') : String(cause);
      if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && /['"]pg['"]/.test(detail)) {
        throw new StoreError('oncefetch/postgres needs the pg package, an optional peer dependency: npm install pg', { cause });
      }
      throw new StoreError(
        `oncefetch/postgres could not load the pg package (${detail}). ` +
          "On an edge runtime: pg needs Node's net and tls modules, which an edge runtime lacks: run this in Node (Next.js: runtime 'nodejs'). " +
          'In Node: its install is broken; reinstall it',
        { cause },
      );
    },
  );
  return driver;
}

interface Resolved {
  schema: string;
  table: string;
  poolMax: number;
  connectTimeoutMs: number;
  statementTimeoutMs: number;
  queryTimeoutMs: number;
  purgeBatchSize: number;
}

function nonNegativeInteger(value: number | undefined, fallback: number, option: string, min = 0): number {
  const n = value ?? fallback;
  if (!Number.isSafeInteger(n) || n < min) {
    throw new RangeError(`postgresStore: ${option} must be an integer of at least ${min}`);
  }
  return n;
}

/** A lower-case SQL identifier of 1 to `maxLength` characters; the message's pattern and length agree. */
function identifier(value: string | undefined, fallback: string, option: string, maxLength: number, why = ''): string {
  const id = value ?? fallback;
  const pattern = new RegExp(`^[a-z_][a-z0-9_]{0,${maxLength - 1}}$`);
  if (typeof id !== 'string' || !pattern.test(id)) {
    throw new TypeError(
      `postgresStore: ${option} must match ${String(pattern)} (lower-case letters, digits and _, at most ${maxLength} characters${why}), got ${JSON.stringify(id)}`,
    );
  }
  return id;
}

function resolveOptions(options: PostgresStoreOptions): Resolved {
  checkKeys('postgresStore', 'options', options, [
    'pool',
    'connectionString',
    'schema',
    'table',
    'poolMax',
    'connectTimeoutMs',
    'statementTimeoutMs',
    'queryTimeoutMs',
    'purgeBatchSize',
  ]);
  const hasPool = options.pool !== undefined;
  const hasUrl = options.connectionString !== undefined;
  // `{ connectionString: process.env.DATABASE_URL }` with the variable unset: say that, not "pass one"
  if (!hasPool && !hasUrl && Object.hasOwn(options, 'connectionString')) {
    throw new TypeError('postgresStore: connectionString is undefined; pass a connection string or a pool');
  }
  if (hasPool === hasUrl) throw new TypeError('postgresStore: pass exactly one of pool and connectionString');
  if (hasPool && (typeof options.pool?.query !== 'function' || typeof options.pool.connect !== 'function')) {
    throw new TypeError('postgresStore: pool must be a pg.Pool (with query and connect)');
  }
  if (hasUrl && (typeof options.connectionString !== 'string' || options.connectionString.length === 0)) {
    throw new TypeError('postgresStore: connectionString must be a non-empty string');
  }
  const schema = identifier(options.schema, 'public', 'schema', MAX_IDENTIFIER_LENGTH);
  if (schema.startsWith('pg_')) throw new TypeError('postgresStore: schema names starting with pg_ are reserved');
  const statementTimeoutMs = nonNegativeInteger(options.statementTimeoutMs, 30_000, 'statementTimeoutMs');
  return {
    schema,
    table: identifier(options.table, 'oncefetch_records', 'table', MAX_TABLE_LENGTH, `, so that the names derived from it fit in ${MAX_IDENTIFIER_LENGTH}`),
    poolMax: nonNegativeInteger(options.poolMax, 10, 'poolMax', 1),
    connectTimeoutMs: nonNegativeInteger(options.connectTimeoutMs, 10_000, 'connectTimeoutMs'),
    statementTimeoutMs,
    queryTimeoutMs: nonNegativeInteger(options.queryTimeoutMs, statementTimeoutMs === 0 ? 0 : statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS, 'queryTimeoutMs'),
    purgeBatchSize: nonNegativeInteger(options.purgeBatchSize, 5000, 'purgeBatchSize', 1),
  };
}

/** Where the store points, for messages: host, port and database, never credentials. */
function describeTarget(options: PostgresStoreOptions, n: Names): string {
  let where = 'pool';
  if (options.connectionString !== undefined) {
    try {
      const url = new URL(options.connectionString);
      where = `${url.host}${url.pathname}`;
    } catch {
      where = 'connection string';
    }
  }
  return `postgres:${where}/${n.schema}.${n.table}`;
}

interface RecordRow {
  id: string;
  generation: string | number;
  state: unknown;
  tenant: unknown;
  expires_at: unknown;
  data: string;
}

function columnValues(c: RecordColumns): unknown[] {
  return [c.generation, c.state, c.tenant, c.leaseExpiresAt, c.expiresAt, c.updatedAt];
}

function statements(n: Names) {
  const t = n.records;
  return {
    insert: `INSERT INTO ${t} (id, generation, state, tenant, lease_expires_at, expires_at, updated_at, data)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING RETURNING id`,
    select: `SELECT id, generation, state, tenant, expires_at, data FROM ${t} WHERE id = $1`,
    update: `UPDATE ${t}
             SET generation = $1, state = $2, tenant = $3, lease_expires_at = $4, expires_at = $5, updated_at = $6, data = $7
             WHERE id = $8 AND generation = $9`,
    // The state list repeats the purge index's predicate so the planner uses it. SKIP LOCKED lets
    // several purging processes split the work instead of queueing on each other's rows. A row is
    // deleted only when its text is one JSON object naming the state, id and expiry its columns
    // hold, as JSON.stringify or jsonb writes them, so a row that is not that record (truncated,
    // another operation's, expiring later) stays, as evidence. (PostgreSQL before 16 cannot test
    // JSON validity without failing the whole statement; a terminal record has no lease, so the
    // only "expiresAt" in its text is its own.)
    purgeBatch: `DELETE FROM ${t} WHERE id IN (
                   SELECT id FROM ${t} WHERE state IN (${TERMINAL_SQL}) AND expires_at < $1
                   AND data ~ ('"state"[[:space:]]*:[[:space:]]*"' || state || '"')
                   AND data LIKE '{%}' AND strpos(data, to_json(id)::text) > 0
                   AND (strpos(data, '"expiresAt":' || expires_at || ',') > 0 OR strpos(data, '"expiresAt": ' || expires_at || ',') > 0)
                   LIMIT $2 FOR UPDATE SKIP LOCKED)`,
  };
}

/**
 * Opens a PostgreSQL {@link OnceStore}. Returns at once; the first call
 * connects, creates schema, tables and indexes when missing (safe when
 * several processes start together), and checks the schema version. A call
 * that cannot connect rejects with a `StoreError`; the next call tries again.
 *
 * @throws TypeError or RangeError naming a bad option.
 * @example
 * ```ts
 * import { createClient } from 'oncefetch';
 * import { postgresStore } from 'oncefetch/postgres';
 * const client = createClient({ store: postgresStore({ connectionString: process.env.DATABASE_URL }) });
 * ```
 */
export function postgresStore(options: PostgresStoreOptions): OnceStore {
  const resolved = resolveOptions(options);
  const n = names(resolved.schema, resolved.table);
  const name = describeTarget(options, n);
  const sql = statements(n);
  let ownedPool: Pg.Pool | undefined;
  /** the owned pool's connections not yet ended (opening, idle or running a query): see CLOSE_GRACE_MS */
  const connections = new Set<Pg.Client>();
  /** set when close() drops the connections still busy: the queries it cuts off say so */
  let dropped = false;
  let setup: Promise<PostgresPool> | undefined;
  let closed = false;
  /** the first close()'s end of the owned pool */
  let closing: Promise<void> | undefined;

  const open = async (): Promise<PostgresPool> => {
    let pool = options.pool;
    if (pool === undefined) {
      const pg = await loadDriver();
      class TrackedClient extends pg.Client {
        constructor(config?: string | Pg.ClientConfig) {
          super(config);
          connections.add(this);
          this.once('end', () => connections.delete(this));
        }
      }
      if (ownedPool === undefined) {
        ownedPool = new pg.Pool({
          Client: TrackedClient,
          connectionString: options.connectionString,
          max: resolved.poolMax,
          connectionTimeoutMillis: resolved.connectTimeoutMs,
          statement_timeout: resolved.statementTimeoutMs,
          // (pg: 0 or undefined is no limit)
          query_timeout: resolved.queryTimeoutMs,
          application_name: 'oncefetch',
          // an idle store does not keep the process alive, like the SQLite store
          allowExitOnIdle: true,
        });
        // An idle connection dropped by the server is an 'error' on the pool; unhandled, it would
        // crash the process. The next query gets a fresh connection or reports the failure. Added
        // once: a failed opening is retried on the same pool (one listener per try leaked).
        ownedPool.on('error', () => undefined);
      }
      pool = ownedPool;
    }
    await migrate(pool, n, name);
    return pool;
  };

  const ready = (): Promise<PostgresPool> => {
    setup ??= open().catch((cause: unknown) => {
      setup = undefined;
      throw storeError(cause, name, dropped ? "opening, cut off by the store's close() (its connection dropped)" : 'opening');
    });
    return setup;
  };

  /** Runs `body` on the ready pool unless closed; every failure becomes a StoreError naming its cause. */
  const run = async <T>(method: string, action: string, body: (pool: PostgresPool) => Promise<T>): Promise<T> => {
    if (closed) throw closedError(name, method);
    const pool = await ready();
    try {
      return await body(pool);
    } catch (cause) {
      throw storeError(cause, name, dropped ? `${action}, cut off by the store's close() (its connection dropped)` : action + noConnection(cause));
    }
  };
  /** pg's "timeout exceeded when trying to connect" is also its wait for a free connection: says so */
  const noConnection = (cause: unknown): string =>
    !(cause instanceof Error) || cause.message !== 'timeout exceeded when trying to connect'
      ? ''
      : options.pool === undefined
        ? ` (the pool (poolMax ${resolved.poolMax}) gave it no connection within connectTimeoutMs (${resolved.connectTimeoutMs} ms): all busy, or a new one not opened in time)`
        : " (your pool gave it no connection within its connectionTimeoutMillis: all busy, or a new one not opened in time)";
  const read = (row: RecordRow): OperationRecord =>
    decodeRecord(row.data, row.id, Number(row.generation), `${name} record ${row.id}`, { state: row.state, tenant: row.tenant, expiresAt: row.expires_at });
  const selectRow = async (pool: PostgresPool, id: string): Promise<RecordRow | undefined> =>
    (await pool.query(sql.select, [id])).rows[0] as RecordRow | undefined;

  /** Ends the owned pool (a user-given one is left alone), dropping after CLOSE_GRACE_MS the connections still busy. */
  const endPool = async (): Promise<void> => {
    // (pool.end() waits for every connection in use, the setup's connect or migration too: those still
    // busy after the grace, counted from close(), are dropped)
    const drop = setTimeout(() => {
      // (a user-given pool's connections are not ours: none tracked, none dropped, nothing said cut off)
      if (connections.size === 0) return;
      dropped = true;
      for (const client of connections) dropConnection(client);
    }, CLOSE_GRACE_MS);
    try {
      // Let a connect or migration in progress settle, so the pool it may create is ended too.
      await setup?.catch(() => undefined);
      if (ownedPool !== undefined) {
        try {
          await ownedPool.end();
        } catch (cause) {
          throw storeError(cause, name, 'closing');
        }
      }
    } finally {
      clearTimeout(drop);
    }
  };

  return {
    name,

    async claim(record: OperationRecord): Promise<ClaimResult> {
      if (closed) throw closedError(name, 'claim');
      const { data, columns } = encodeRecord(record, 'claim');
      return run('claim', `claiming record ${record.id}`, async (pool) => {
        for (let i = 0; i < CLAIM_TRIES; i++) {
          const inserted = await pool.query(sql.insert, [record.id, ...columnValues(columns), data]);
          if (inserted.rowCount === 1) return { created: true, record: JSON.parse(data) as OperationRecord };
          // A second statement sees the winner once it committed (READ COMMITTED).
          const row = await selectRow(pool, record.id);
          if (row !== undefined) return { created: false, record: read(row) };
          // The winner was purged between the two statements: claim again.
        }
        throw new StoreError(`PostgreSQL store ${name}: record ${record.id} kept vanishing while being claimed`);
      });
    },

    async get(id: string): Promise<OperationRecord | undefined> {
      return run('get', `reading record ${id}`, async (pool) => {
        const row = await selectRow(pool, id);
        return row === undefined ? undefined : read(row);
      });
    },

    async compareAndSet(id: string, expectedGeneration: number, next: OperationRecord): Promise<CompareAndSetResult> {
      if (closed) throw closedError(name, 'compareAndSet');
      checkCompareAndSet(id, expectedGeneration, next);
      const { data, columns } = encodeRecord(next, 'compareAndSet');
      return run('compareAndSet', `updating record ${id}`, async (pool): Promise<CompareAndSetResult> => {
        // One autocommit UPDATE: the generation check and the write are one step.
        const updated = await pool.query(sql.update, [...columnValues(columns), data, id, expectedGeneration]);
        if (updated.rowCount === 1) return { ok: true };
        const row = await selectRow(pool, id);
        return { ok: false, current: row === undefined ? undefined : read(row) };
      });
    },

    async list(query?: ListQuery): Promise<OperationRecord[]> {
      if (closed) throw closedError(name, 'list');
      const q = resolveListQuery(query);
      if (q.states !== undefined && q.states.length === 0) return [];
      const where: string[] = [];
      const params: unknown[] = [];
      if (q.states !== undefined) where.push(`state = ANY($${params.push(q.states)}::text[])`);
      if (q.leaseExpiredBefore !== undefined) {
        where.push(`(lease_expires_at IS NULL OR lease_expires_at < $${params.push(q.leaseExpiredBefore)})`);
      }
      if (q.tenant !== undefined) where.push(`tenant = $${params.push(q.tenant)}`);
      // The tenant column cannot tell apart tenants that differ only in a lone surrogate (pg sends
      // each as U+FFFD), so LIMIT would count the others' rows: such a tenant is also matched in the
      // record's text, where JSON.stringify escapes it.
      if (q.tenant !== undefined && findLoneSurrogate(q.tenant) !== -1) where.push(`strpos(data, $${params.push(`"tenant":${JSON.stringify(q.tenant)}`)}) > 0`);
      const text = `SELECT id, generation, state, tenant, expires_at, data FROM ${n.records}
                    ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
                    ORDER BY updated_at ASC, id ASC LIMIT $${params.push(q.limit)}`;
      const { rows } = await run('list', 'listing records', (pool) => pool.query(text, params));
      // The record decides.
      return readListed(rows as RecordRow[], q, (row) => row.id, read).filter((r) => q.tenant === undefined || r.tenant === q.tenant);
    },

    async purge(now: number): Promise<number> {
      if (closed) throw closedError(name, 'purge');
      checkPurgeNow(now);
      let total = 0;
      for (;;) {
        // Each batch is its own statement and transaction: row locks last one batch, not the purge.
        const deleted = await run('purge', 'purging expired records', async (pool) => {
          const result = await pool.query(sql.purgeBatch, [now, resolved.purgeBatchSize]);
          return result.rowCount ?? 0;
        }).catch((error: unknown) => {
          throw purgeFailed(error, total);
        });
        total += deleted;
        if (deleted < resolved.purgeBatchSize) return total;
      }
    },

    close(): Promise<void> {
      closed = true;
      // (a second close() waits for the pool's end as the first does)
      closing ??= endPool();
      return closing;
    },
  };
}

/**
 * Destroys a pg connection's socket, as pg's `client.end()` does for a connection running a query;
 * `end()` alone would wait for a reply to its goodbye from a connection still opening. Its query (or
 * connect) then fails, and the pool lets it go.
 */
function dropConnection(client: Pg.Client): void {
  const stream = (client as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream;
  if (typeof stream?.destroy === 'function') stream.destroy();
  else void client.end().catch(() => undefined);
}
