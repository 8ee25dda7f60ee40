/**
 * The PostgreSQL store's tables, its idempotent migration and its error
 * wording. Kept apart from `postgres.ts` so that file holds the store
 * contract and this one holds what is PostgreSQL-specific.
 *
 * @internal
 * @module
 */
import { StoreError, isOnceError } from '../errors.js';
import { TERMINAL_STATES } from '../operation/record.js';

/** Version of the table layout, kept in the `<table>_meta` table. */
export const PG_SCHEMA_VERSION = 1;

/** Literal list of the terminal states, as the purge index and purge query spell it. */
export const TERMINAL_SQL = TERMINAL_STATES.map((state) => `'${state}'`).join(', ');

/**
 * A query result as the store reads it; `pg.QueryResult` has this shape, so
 * an adapter for another driver only needs to return these two fields.
 *
 * @example
 * ```ts
 * const toResult = (r: { rows: unknown[]; count: number }): PostgresQueryResult => ({ rows: r.rows, rowCount: r.count })
 * ```
 */
export interface PostgresQueryResult {
  /** the returned rows, as objects keyed by column name */
  rows: unknown[];
  /** rows inserted, updated or deleted; `null` when the statement reports none */
  rowCount: number | null;
}

/**
 * The part of a `pg.PoolClient` the store uses (for its migration, which must
 * run on one session).
 *
 * @example
 * ```ts
 * const client: PostgresPoolClient = await pool.connect()
 * try { await client.query('SELECT 1') } finally { client.release() }
 * ```
 */
export interface PostgresPoolClient {
  /** Runs one parameterised statement on this connection. */
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
  /** Returns the connection to its pool (destroys it when given `true` or an error). */
  release(destroy?: boolean | Error): void;
  /** A `pg.PoolClient`'s 'error' listener; used, when present, while the store holds the connection. */
  on?(event: 'error', listener: (error: unknown) => void): unknown;
  /** Removes a listener added with `on`. */
  off?(event: 'error', listener: (error: unknown) => void): unknown;
}

/**
 * The part of a `pg.Pool` the store uses. A `pg.Pool` satisfies it; so does
 * any pool with the same two methods.
 *
 * @example
 * ```ts
 * import pg from 'pg'
 * const pool: PostgresPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 })
 * const store = postgresStore({ pool, schema: 'agents' })
 * ```
 */
export interface PostgresPool {
  /** Runs one parameterised statement on any pooled connection. */
  query(text: string, values?: unknown[]): Promise<PostgresQueryResult>;
  /** Checks a connection out, for statements that must share one session. */
  connect(): Promise<PostgresPoolClient>;
}

/** Quoted, schema-qualified names of everything the store creates. */
export interface Names {
  schema: string;
  table: string;
  /** `"schema"."table"` */
  records: string;
  /** `"schema"."table_meta"` */
  meta: string;
  recoveryIndex: string;
  purgeIndex: string;
}

/** Quotes an identifier already checked by `identifier()` in postgres.ts (lower-case letters, digits, _), so it can be a reserved word. */
const quote = (identifier: string): string => `"${identifier}"`;

/** Builds the quoted names for `schema` and `table`. */
export function names(schema: string, table: string): Names {
  return {
    schema,
    table,
    records: `${quote(schema)}.${quote(table)}`,
    meta: `${quote(schema)}.${quote(`${table}_meta`)}`,
    recoveryIndex: quote(`${table}_recovery`),
    purgeIndex: quote(`${table}_purge`),
  };
}

function schemaStatements(n: Names): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${n.meta} (key text PRIMARY KEY, value text NOT NULL)`,
    // id COLLATE "C": byte order, the same as SQLite's, for list()'s tie-break and a cheaper primary key.
    // data is text, not jsonb: jsonb refuses \u0000 inside strings, which a ref or a header may hold.
    `CREATE TABLE IF NOT EXISTS ${n.records} (
       id text COLLATE "C" PRIMARY KEY,
       generation bigint NOT NULL,
       state text NOT NULL,
       tenant text NOT NULL,
       lease_expires_at bigint,
       expires_at bigint NOT NULL,
       updated_at bigint NOT NULL,
       data text NOT NULL
     )`,
    `CREATE INDEX IF NOT EXISTS ${n.recoveryIndex} ON ${n.records} (state, lease_expires_at)`,
    `CREATE INDEX IF NOT EXISTS ${n.purgeIndex} ON ${n.records} (expires_at) WHERE state IN (${TERMINAL_SQL})`,
    `INSERT INTO ${n.meta} (key, value) VALUES ('schema_version', '${PG_SCHEMA_VERSION}') ON CONFLICT (key) DO NOTHING`,
  ];
}

/**
 * The schema version recorded in `<table>_meta`, or undefined when that table is missing (no
 * oncefetch store there). Reads only: nothing is created.
 */
export async function readVersion(db: Pick<PostgresPool, 'query'>, n: Names): Promise<string | undefined> {
  const found = await db.query('SELECT to_regclass($1) IS NOT NULL AS present', [n.meta]);
  if ((found.rows[0] as { present?: boolean } | undefined)?.present !== true) return undefined;
  const row = await db.query(`SELECT value FROM ${n.meta} WHERE key = 'schema_version'`);
  return (row.rows[0] as { value?: string } | undefined)?.value;
}

/**
 * Creates schema, tables and indexes when they are missing, then checks the
 * schema version. Nothing is created when the version row is already there,
 * so a role without CREATE rights works on tables made by someone else.
 * Several processes opening a fresh database at once serialise on advisory
 * locks (one per schema, one per table): concurrent `CREATE SCHEMA IF NOT
 * EXISTS` and `CREATE TABLE IF NOT EXISTS` can otherwise fail.
 */
export async function migrate(pool: PostgresPool, n: Names, name: string): Promise<void> {
  let version = await readVersion(pool, n);
  if (version === undefined) {
    const client = await pool.connect();
    let broken: Error | undefined;
    // A checked-out pg client emits 'error' when its connection drops, and its pool listens only
    // while it is idle: without a listener here, a server restart mid-migration kills the process.
    // The query in progress rejects with the same error, which is what the caller sees.
    const onError = (e: unknown): void => {
      broken ??= e instanceof Error ? e : new Error(String(e));
    };
    client.on?.('error', onError);
    try {
      await client.query('BEGIN');
      try {
        // The schema's lock first: stores of other tables creating the same new schema at once
        // would otherwise race in CREATE SCHEMA IF NOT EXISTS (23505 on pg_namespace). Then the
        // table's, which older versions take alone. Always in this order, so no deadlock.
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`oncefetch-schema:${n.schema}`]);
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`oncefetch:${n.schema}.${n.table}`]);
        // CREATE SCHEMA checks the CREATE right even with IF NOT EXISTS: skip it when the schema exists.
        const schema = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [n.schema]);
        if (schema.rows.length === 0) await client.query(`CREATE SCHEMA IF NOT EXISTS ${quote(n.schema)}`);
        for (const statement of schemaStatements(n)) await client.query(statement);
        await client.query('COMMIT');
      } catch (cause) {
        await client.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
        throw cause;
      }
    } finally {
      client.release(broken);
      client.off?.('error', onError);
    }
    version = await readVersion(pool, n);
  }
  if (version === String(PG_SCHEMA_VERSION)) return;
  const v = Number(version);
  if (Number.isInteger(v) && v > PG_SCHEMA_VERSION) {
    throw new StoreError(
      `PostgreSQL store ${name}: schema version ${v} was written by a newer oncefetch (this one reads ${PG_SCHEMA_VERSION}); upgrade oncefetch`,
    );
  }
  throw new StoreError(`PostgreSQL store ${name}: unrecognised schema version ${JSON.stringify(version ?? null)} in ${n.meta}`);
}

/** What SQLSTATEs and socket codes mean to a user; exact codes first, then SQLSTATE classes. */
const CAUSES: ReadonlyArray<readonly [string, string]> = [
  ['ECONNREFUSED', 'connection refused (is PostgreSQL running and listening there?)'],
  ['ENOTFOUND', 'database host not found'],
  ['ETIMEDOUT', 'connection timed out'],
  ['ECONNRESET', 'connection reset'],
  ['28P01', 'password authentication failed'],
  ['28000', 'connection not authorised (pg_hba.conf or role)'],
  ['3D000', 'database does not exist'],
  ['3F000', 'schema does not exist'],
  ['42P01', 'table does not exist (dropped behind the store?)'],
  ['42501', 'permission denied'],
  ['25006', 'database is read-only (a standby?)'],
  ['53300', 'too many connections: lower the pool size or raise max_connections'],
  ['57014', 'statement timed out or was cancelled'],
  // admin_shutdown: a server shutting down, or pg_terminate_backend() on this session alone
  ['57P01', 'the connection was terminated by the server (an administrator or a shutdown)'],
  ['40P01', 'deadlock detected'],
  ['40001', 'serialisation failure'],
  ['08', 'connection failure'],
  ['53', 'server out of resources (disk, memory or connections)'],
  ['57', 'operator intervention'],
];

/** Turns anything pg or the network throws into a StoreError naming cause, code and store. */
export function storeError(cause: unknown, name: string, action: string): Error {
  if (isOnceError(cause)) return cause;
  const code = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined;
  const detail = cause instanceof Error ? cause.message : String(cause);
  const known =
    typeof code === 'string'
      ? (CAUSES.find(([c]) => c === code) ?? CAUSES.find(([c]) => c.length === 2 && code.startsWith(c)))
      : undefined;
  const what = known === undefined ? 'failed' : known[1];
  const tag = typeof code === 'string' ? ` [${code}]` : '';
  return new StoreError(`PostgreSQL store ${name}: ${what} while ${action}${tag}: ${detail}${poolerHint(code, detail)}`, { cause });
}

/**
 * What PgBouncer's bare errors mean. It refuses a connection whose startup packet sets a parameter
 * it does not track, unless `ignore_startup_parameters` lists it: the store's pool sends
 * `statement_timeout` (from `statementTimeoutMs`) there; says what to change. Its
 * `query_wait_timeout` ends a client that waited that long for a server connection, and
 * `server_login_retry` one that arrives while its logins to the server fail.
 */
function poolerHint(code: unknown, detail: string): string {
  if (code === '08P01' && detail === 'query_wait_timeout') {
    return " (PgBouncer found no free server connection within its query_wait_timeout: its pool (default_pool_size) is busy, or it is paused)";
  }
  if (code === '08P01' && detail.includes('(server_login_retry)')) {
    return ' (PgBouncer cannot log in to PostgreSQL behind it: that server is down, failing over, or refusing the login)';
  }
  const parameter = code === '08P01' ? /unsupported startup parameter: (\S+)/.exec(detail)?.[1] : undefined;
  if (parameter === undefined) return '';
  const how =
    parameter === 'statement_timeout'
      ? 'pass statementTimeoutMs: 0 to postgresStore (and queryTimeoutMs, which then defaults to none; with your own pool, leave statement_timeout out of its options; the oncefetch command: add ?statementTimeoutMs=0 to the URL)'
      : `leave ${parameter} out of the connection's options`;
  return ` (a connection pooler such as PgBouncer refuses it: ${how}, or add ${parameter} to PgBouncer's ignore_startup_parameters)`;
}
