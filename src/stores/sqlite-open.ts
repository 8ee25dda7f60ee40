/**
 * Opening an SQLite store: option checks, file and directory modes, the
 * integrity check, pragmas and the schema. A file that is not a database or
 * fails `PRAGMA quick_check` is reported, never repaired or replaced.
 *
 * @internal
 * @module
 */
import { chmodSync, closeSync, existsSync, fchmodSync, fstatSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { StoreError, isOnceError } from '../errors.js';
import { TERMINAL_STATES } from '../operation/record.js';
import { checkKeys } from '../options.js';
import type { SqliteStoreOptions } from './sqlite.js';
import type { SqliteDatabase as Database } from './sqlite-handle.js';

/** better-sqlite3's constructor, as far as it is used here. */
type Driver = new (path: string, options: { readonly?: boolean; fileMustExist?: boolean; timeout?: number }) => Database;

const SCHEMA_VERSION = 1;

/** The terminal states as an SQL list, for `state IN (…)`. */
export const TERMINAL_SQL = TERMINAL_STATES.map((state) => `'${state}'`).join(', ');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS oncefetch_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS oncefetch_records (
  id TEXT PRIMARY KEY,
  generation INTEGER NOT NULL,
  state TEXT NOT NULL,
  tenant TEXT NOT NULL,
  lease_expires_at INTEGER,
  expires_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS oncefetch_records_recovery ON oncefetch_records (state, lease_expires_at);
CREATE INDEX IF NOT EXISTS oncefetch_records_purge ON oncefetch_records (state, expires_at)
  WHERE state IN (${TERMINAL_SQL});
INSERT OR IGNORE INTO oncefetch_meta (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}');
`;
// A rowid table, not WITHOUT ROWID: `data` holds result bodies of several KiB,
// and WITHOUT ROWID tables suit rows far smaller than a page.

/** What each SQLite primary result code means to a user, most specific first. */
const CAUSES: ReadonlyArray<readonly [string, string]> = [
  ['SQLITE_BUSY', 'database is busy: another connection held its lock longer than busyTimeoutMs'],
  ['SQLITE_LOCKED', 'database table is locked'],
  ['SQLITE_FULL', 'disk or database is full'],
  ['SQLITE_READONLY', 'database is read-only'],
  ['SQLITE_CORRUPT', 'database is corrupt; restore it from a backup (oncefetch never recreates it empty)'],
  ['SQLITE_NOTADB', 'file is not an SQLite database'],
  ['SQLITE_IOERR', 'I/O error'],
  ['SQLITE_CANTOPEN', 'cannot open the database file'],
  ['SQLITE_PERM', 'permission denied'],
  ['SQLITE_NOMEM', 'out of memory'],
  ['SQLITE_PROTOCOL', 'file locking protocol error'],
  ['SQLITE_TOOBIG', 'record too big'],
];

let driver: Driver | undefined;

function loadDriver(): Driver {
  if (driver === undefined) {
    // better-sqlite3 is CommonJS and native: load it only when a store opens.
    const loaded = createRequire(import.meta.url)('better-sqlite3') as Driver;
    // Its require succeeds without a usable binding: the binding loads at the first `new Database()`,
    // which is what fails after a failed build, and under Bun and Deno. One in-memory database, once,
    // makes that failure come before any directory or file of the store is created.
    new loaded(':memory:', {}).close();
    driver = loaded;
  }
  return driver;
}

/**
 * True when `cause` (thrown while loading better-sqlite3 or creating its first
 * database) says the driver itself is unusable: not installed (it is an
 * optional dependency), or its native binding missing or built for another
 * Node. SQLite's own errors (`SQLITE_*`, e.g. a file it cannot open) are not.
 *
 * @internal exported for tests
 */
export function isDriverUnavailable(cause: unknown): boolean {
  if (typeof cause !== 'object' || cause === null) return false;
  const { code, message } = cause as { code?: unknown; message?: unknown };
  if (code === 'MODULE_NOT_FOUND' || code === 'ERR_DLOPEN_FAILED') return true;
  // Deno loads only Node-API addons; its TypeError for better-sqlite3 (nan) has no code.
  return typeof message === 'string' && /Could not locate the bindings file|NODE_MODULE_VERSION|Cannot load native addon/.test(message);
}

/**
 * Whether the SQLite file at `path` already holds an oncefetch store, read without writing
 * anything (read-only, no table created, no mode changed): what the inspecting commands need
 * before they open it. A file that is not a database is a StoreError.
 *
 * @internal for the CLI
 */
export function holdsOncefetchStore(path: string): boolean {
  let db: Database;
  try {
    db = new (loadDriver())(path, { readonly: true, fileMustExist: true });
  } catch (cause) {
    throw isDriverUnavailable(cause) ? driverError(cause, path) : storeError(cause, path, 'opening the database read-only');
  }
  try {
    return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'oncefetch_records'").get() !== undefined;
  } catch (cause) {
    throw storeError(cause, path, 'reading the schema');
  } finally {
    db.close();
  }
}

/**
 * The StoreError for an unusable driver: what is missing and the ways on. Under Bun or Deno (seen in
 * `process.versions`), where better-sqlite3 does not load at all, it names the runtime and the stores
 * that work there instead of asking to install the driver.
 *
 * @internal exported for tests
 */
export function driverError(cause: unknown, path: string, versions: Partial<Record<string, string>> = process.versions): StoreError {
  const detail = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
  const runtime = versions['bun'] !== undefined ? `Bun ${versions['bun']}` : versions['deno'] !== undefined ? `Deno ${versions['deno']}` : undefined;
  if (runtime !== undefined) {
    const sqlite = versions['bun'] !== undefined ? 'bun:sqlite' : 'node:sqlite';
    return new StoreError(
      `SQLite store ${path}: better-sqlite3 cannot be loaded under ${runtime} (${detail}). The SQLite store, the Node ` +
        `default, needs this Node native addon; on ${runtime.split(' ')[0]} pass a store: ` +
        "createClient({ store: memoryStore() }) for tests and short scripts, postgresStore({ connectionString }) from 'oncefetch/postgres' " +
        `for records that survive a restart, or your own store on ${sqlite} proven with the contract suite from 'oncefetch/testing'`,
      { cause },
    );
  }
  return new StoreError(
    `SQLite store ${path}: better-sqlite3 cannot be loaded (${detail}). It is an optional dependency of oncefetch ` +
      'and the Node default store: install it with `npm install better-sqlite3` and let its install script build the ' +
      'native binding (npm 11: `npm install-scripts approve better-sqlite3`), or pass another store, e.g. ' +
      "createClient({ store: memoryStore() }) or postgresStore() from 'oncefetch/postgres'",
    { cause },
  );
}

/** Options with defaults applied. */
export interface Resolved {
  path: string;
  synchronous: 'NORMAL' | 'FULL';
  busyTimeoutMs: number;
}

/** Validates options: a bad one is a `TypeError`/`RangeError` naming it. */
export function resolveOptions(options: SqliteStoreOptions): Resolved {
  checkKeys('sqliteStore', 'options', options, ['path', 'durability', 'busyTimeoutMs', 'database']);
  if (typeof options.path !== 'string' || options.path.length === 0) {
    throw new TypeError('sqliteStore: path must be a non-empty string');
  }
  const durability = options.durability ?? 'process';
  if (durability !== 'process' && durability !== 'power-loss') {
    throw new TypeError(`sqliteStore: durability must be 'process' or 'power-loss'`);
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError('sqliteStore: busyTimeoutMs must be a non-negative integer');
  }
  const isFile = options.database === undefined && options.path !== ':memory:';
  return {
    path: isFile ? resolve(options.path) : options.path,
    synchronous: durability === 'power-loss' ? 'FULL' : 'NORMAL',
    busyTimeoutMs,
  };
}

/** Turns anything better-sqlite3 or node:fs throws into a StoreError naming cause and path. */
export function storeError(cause: unknown, path: string, action: string, busyTimeoutMs?: number): Error {
  if (isOnceError(cause)) return cause;
  const code = typeof cause === 'object' && cause !== null ? (cause as { code?: unknown }).code : undefined;
  const detail = cause instanceof Error ? cause.message : String(cause);
  const known = typeof code === 'string' ? CAUSES.find(([prefix]) => code.startsWith(prefix)) : undefined;
  let what = known === undefined ? 'failed' : known[1];
  // The figure and the option: 5000 ms by default, and this process waited that long (its event loop blocked).
  if (known?.[0] === 'SQLITE_BUSY' && busyTimeoutMs !== undefined) what += ` (${busyTimeoutMs} ms, which this process spent blocked; set it with sqliteStore({ busyTimeoutMs }))`;
  const tag = typeof code === 'string' ? ` [${code}]` : '';
  return new StoreError(`SQLite store ${path}: ${what} while ${action}${tag}: ${detail}`, { cause });
}

/** Creates the directory (0700) and the file (0600) before SQLite opens it, whatever the umask. */
function prepareFile(path: string): void {
  const dir = dirname(path);
  const first = mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (first !== undefined) {
    // mkdir applies the umask; chmod every directory this call created.
    for (let d = dir; ; d = dirname(d)) {
      chmodSync(d, 0o700);
      if (d === first || dirname(d) === d) break;
    }
  }
  const fd = openSync(path, 'a+', 0o600);
  try {
    // Another program's file (or one a symlink at this path leads to) keeps its mode: SQLite refuses it next.
    // Only a regular file: a device reads as empty (/dev/null, as root, went 0600 for every user). Through
    // the descriptor checked, so a file swapped in at the path meanwhile is not the one changed.
    const stat = fstatSync(fd);
    if (stat.isFile() && emptyOrDatabase(fd) && (stat.mode & 0o777) !== 0o600) fchmodSync(fd, 0o600);
  } finally {
    closeSync(fd);
  }
}

/** SQLite's file header: the first 16 bytes of every database file. */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** Whether the open file is empty (SQLite makes it a database) or starts as a database does. */
function emptyOrDatabase(fd: number): boolean {
  const head = Buffer.alloc(SQLITE_HEADER.length);
  const n = readSync(fd, head, 0, head.length, 0);
  return n === 0 || (n === head.length && head.equals(SQLITE_HEADER));
}

function restrict(path: string): void {
  if (existsSync(path) && (statSync(path).mode & 0o777) !== 0o600) chmodSync(path, 0o600);
}

/** Integrity check, pragmas, schema and companion file modes, in that order. */
function configure(db: Database, resolved: Resolved, ownsHandle: boolean): void {
  const { path } = resolved;
  db.pragma(`busy_timeout = ${resolved.busyTimeoutMs}`);
  // Check before any write: a corrupt file is reported, never repaired or replaced.
  const check = db.prepare('PRAGMA quick_check').pluck().all() as unknown[];
  if (check.length !== 1 || check[0] !== 'ok') {
    const report = check.slice(0, 3).map(String).join('; ');
    throw new StoreError(
      `SQLite store ${path}: database is corrupt (PRAGMA quick_check: ${report}); ` +
        `restore it from a backup or move it aside. oncefetch never recreates it empty, ` +
        `because that would forget which operations were already sent: ${path}`,
    );
  }
  if (!db.readonly) db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${resolved.synchronous}`);
  migrate(db, path);
  if (ownsHandle && !db.memory) {
    restrict(`${path}-wal`);
    restrict(`${path}-shm`);
  }
}

function migrate(db: Database, path: string): void {
  const readVersion = (): unknown => {
    const table = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'oncefetch_meta'`).get();
    if (table === undefined) return undefined;
    return db.prepare(`SELECT value FROM oncefetch_meta WHERE key = 'schema_version'`).pluck().get();
  };
  let version = readVersion();
  if (version === undefined) {
    // IMMEDIATE: two processes creating the schema at once serialise on the write lock.
    db.transaction(() => db.exec(SCHEMA)).immediate();
    version = readVersion();
  }
  if (version === String(SCHEMA_VERSION)) return;
  const n = Number(version);
  if (Number.isInteger(n) && n > SCHEMA_VERSION) {
    throw new StoreError(
      `SQLite store ${path}: schema version ${n} was written by a newer oncefetch (this one reads ${SCHEMA_VERSION}); upgrade oncefetch`,
    );
  }
  throw new StoreError(`SQLite store ${path}: unrecognised schema version ${JSON.stringify(version)}`);
}

/**
 * Opens `options.database` or the file at the resolved path, ready for use.
 * Every failure is a StoreError naming the cause and the path; a handle this
 * function opened is closed again on failure.
 */
export function openDatabase(resolved: Resolved, handle: Database | undefined): Database {
  const { path } = resolved;
  let db: Database;
  try {
    if (handle !== undefined) {
      db = handle;
    } else {
      // The driver first, its binding loaded: without it, no directory or file is left behind.
      const Driver = loadDriver();
      if (path !== ':memory:') prepareFile(path);
      db = new Driver(path, { timeout: resolved.busyTimeoutMs });
    }
  } catch (cause) {
    throw isDriverUnavailable(cause) ? driverError(cause, path) : storeError(cause, path, 'opening', resolved.busyTimeoutMs);
  }
  try {
    configure(db, resolved, handle === undefined);
    return db;
  } catch (cause) {
    if (handle === undefined) {
      try {
        db.close();
      } catch {
        // the open failure is the error worth reporting
      }
    }
    throw storeError(cause, path, 'opening', resolved.busyTimeoutMs);
  }
}
