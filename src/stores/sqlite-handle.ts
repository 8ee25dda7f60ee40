/**
 * The part of a better-sqlite3 `Database` the SQLite store uses, typed
 * structurally so that the package's declarations name neither better-sqlite3
 * nor Node: `@types/better-sqlite3` (which pulls in `@types/node`) stays out of
 * the projects that install oncefetch, browser apps among them.
 *
 * @module
 */

/**
 * The part of a better-sqlite3 `Statement` the store uses.
 *
 * @example
 * ```ts
 * const statement: SqliteStatement = db.prepare('SELECT 1')
 * ```
 */
export interface SqliteStatement {
  /** Runs the statement; `changes` counts the rows it wrote. */
  run(...params: unknown[]): { changes: number };
  /** The first row, or `undefined`. */
  get(...params: unknown[]): unknown;
  /** Every row. */
  all(...params: unknown[]): unknown[];
  /** Makes the statement return the first column only. */
  pluck(toggleState?: boolean): SqliteStatement;
}

/**
 * The part of a better-sqlite3 `Database` the SQLite store uses: a handle
 * from `new Database(path)` of better-sqlite3 satisfies it.
 *
 * @example
 * ```ts
 * import Database from 'better-sqlite3'
 * const database: SqliteDatabase = new Database('app.db')
 * const store = sqliteStore({ path: 'app.db', database })
 * ```
 */
export interface SqliteDatabase {
  /** Whether the handle is open. */
  readonly open: boolean;
  /** Whether a transaction is open on the handle. */
  readonly inTransaction: boolean;
  /** Whether the handle was opened read-only. */
  readonly readonly: boolean;
  /** Whether the database is in memory. */
  readonly memory: boolean;
  /** Compiles one SQL statement. */
  prepare(source: string): SqliteStatement;
  /** Runs a PRAGMA. */
  pragma(source: string): unknown;
  /** Runs SQL text that may hold several statements. */
  exec(source: string): unknown;
  /** Wraps `fn` in a transaction. */
  transaction(fn: () => unknown): {
    /** Runs the transaction under `BEGIN IMMEDIATE`. */
    immediate(): unknown;
  };
  /** Closes the handle. */
  close(): unknown;
}
