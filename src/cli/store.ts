/**
 * `--store PATH|URL` for the store commands: a path opens the SQLite store, a
 * `postgres://` or `postgresql://` URL the PostgreSQL store (loaded only then,
 * with its optional `pg` peer dependency). Default: `$ONCEFETCH_DB` or
 * `./.oncefetch/oncefetch.db`.
 *
 * @module
 */
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultStorePath, urlScheme } from '../node-defaults.js';
import type { OnceStore } from '../stores/contract.js';
import { sqliteStore } from '../stores/sqlite.js';
import { holdsOncefetchStore } from '../stores/sqlite-open.js';
import { UsageError } from './args.js';

/** The query parameters of a `postgres://` URL that are `postgresStore` options, taken out before pg reads it. */
const OPTION_PARAMS = ['schema', 'table', 'statementTimeoutMs'] as const;

/** True for a PostgreSQL connection URI. */
export function isPostgresUrl(spec: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(spec);
}

/** The `--store` line of the store commands' help. */
export const STORE_FLAG_HELP = `  --store PATH|URL   SQLite file or postgres:// URL, ?schema=S&table=T for a store not in public.oncefetch_records,
                     &statementTimeoutMs=0 behind PgBouncer (default: $ONCEFETCH_DB or ./.oncefetch/oncefetch.db)`;

/** Where the store location came from, as messages name it: the flag, the variable, or neither (the built-in default). */
type StoreSource = '--store' | '$ONCEFETCH_DB' | undefined;

/** The store named by `--store`, or the default one. A SQLite path must exist: inspecting never creates a database. */
export async function openStore(spec: string | undefined): Promise<OnceStore> {
  const target = spec ?? defaultStorePath();
  const source: StoreSource = spec !== undefined ? '--store' : process.env['ONCEFETCH_DB'] !== undefined ? '$ONCEFETCH_DB' : undefined;
  const named = source ?? '--store';
  // The library refuses it too (sqliteStore: path must be a non-empty string); it would resolve to the working directory.
  if (source === '$ONCEFETCH_DB' && target === '') throw new UsageError('$ONCEFETCH_DB is set but empty: unset it for ./.oncefetch/oncefetch.db, or set it to an SQLite file or a postgres:// URL');
  if (isPostgresUrl(target)) return openPostgres(target, named);
  // Another scheme (`mysql://`, a misspelt `postgress://`) would be read as a relative path.
  const scheme = urlScheme(target);
  if (scheme !== undefined) throw new UsageError(`${named}: only postgres:// and postgresql:// URLs are read (got ${scheme}://…); anything else is an SQLite file path`);
  const path = resolve(target);
  if (!existsSync(path)) {
    const from = source === undefined ? ' (the default; pass --store PATH|URL or set $ONCEFETCH_DB)' : source === '$ONCEFETCH_DB' ? ' (from $ONCEFETCH_DB)' : '';
    throw new UsageError(`no oncefetch database at ${path}${from}`);
  }
  if (statSync(path).isDirectory()) {
    const file = join(path, 'oncefetch.db');
    throw new UsageError(
      source === '$ONCEFETCH_DB'
        ? `$ONCEFETCH_DB: ${path} is a directory; set it to the database file in it (${file}, say)`
        : `${path} is a directory; pass the database file in it (--store ${file}, say)`,
    );
  }
  // Never add tables to (or change the mode of) a file that is not already an oncefetch store.
  if (!holdsOncefetchStore(path)) throw new UsageError(`${path} is not an oncefetch database (it has no oncefetch_records table); nothing was changed`);
  return sqliteStore({ path });
}

/**
 * The PostgreSQL store a `postgres://` URL names. Its `schema`, `table` and `statementTimeoutMs` query
 * parameters (the options of `postgresStore`, default `public`, `oncefetch_records` and 30000) are taken out of the URL
 * before it reaches pg. Like a SQLite path, the tables must already be there: inspecting never
 * creates them.
 */
async function openPostgres(target: string, named: '--store' | '$ONCEFETCH_DB'): Promise<OnceStore> {
  let mod: typeof import('../stores/postgres.js');
  let schemaMod: typeof import('../stores/postgres-schema.js');
  let pg: typeof import('pg').default;
  try {
    mod = await import('../stores/postgres.js');
    schemaMod = await import('../stores/postgres-schema.js');
  } catch (cause) {
    throw new Error(`the PostgreSQL store could not be loaded (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
  }
  try {
    pg = (await import('pg')).default;
  } catch (cause) {
    // as the library says it (oncefetch/postgres loadDriver), with the cause: a missing package or a broken install
    throw new Error(`the PostgreSQL store needs the pg package, an optional peer dependency: npm install pg (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
  }
  let connectionString = target;
  let schema: string | undefined;
  let table: string | undefined;
  // `user@/db?host=…` (no host before the path, as for a Unix socket) is no WHATWG URL: pg parses it
  // with a stand-in host, and so does this, or its schema and table would be silently ignored.
  const HOSTLESS = '@/';
  const STAND_IN = '@oncefetch-no-host/';
  let url: URL | undefined;
  let hostless = false;
  try {
    url = new URL(target);
  } catch {
    try {
      url = new URL(target.replace(HOSTLESS, STAND_IN));
      hostless = true;
    } catch {
      // not a WHATWG URL: pg reads it as it is, with the default schema and table
    }
  }
  // statementTimeoutMs=0: behind PgBouncer, which refuses the statement_timeout startup parameter
  // unless its ignore_startup_parameters lists it (README, "PostgreSQL for fleets").
  let statementTimeoutMs: number | undefined;
  if (url !== undefined && OPTION_PARAMS.some((p) => url.searchParams.has(p))) {
    schema = url.searchParams.get('schema') ?? undefined;
    table = url.searchParams.get('table') ?? undefined;
    const timeout = url.searchParams.get('statementTimeoutMs');
    statementTimeoutMs = timeout === null ? undefined : /^\d+$/.test(timeout) ? Number(timeout) : NaN;
    for (const p of OPTION_PARAMS) url.searchParams.delete(p);
    connectionString = hostless ? url.toString().replace(STAND_IN, HOSTLESS) : url.toString();
  }
  let store: OnceStore;
  try {
    store = mod.postgresStore({ connectionString, schema, table, statementTimeoutMs });
  } catch (cause) {
    throw new UsageError(`${named}: ${cause instanceof Error ? cause.message.replace(/^postgresStore: /, '') : String(cause)}`);
  }
  const n = schemaMod.names(schema ?? 'public', table ?? 'oncefetch_records');
  let client: InstanceType<typeof pg.Client>;
  try {
    client = new pg.Client({ connectionString, connectionTimeoutMillis: 10_000, application_name: 'oncefetch' });
  } catch (cause) {
    // pg parses the URL here (a port out of range, a bad host): a bad command line, not a store failure
    await store.close();
    throw new UsageError(`${named}: not a valid PostgreSQL URL (${hideCredentials(cause instanceof Error ? cause.message : String(cause))})`);
  }
  client.on('error', () => undefined);
  let version: string | undefined;
  try {
    await client.connect();
    version = await schemaMod.readVersion(client, n);
  } catch (cause) {
    await store.close();
    throw schemaMod.storeError(cause, storeLabel(store), 'looking for its tables');
  } finally {
    await client.end().catch(() => undefined);
  }
  if (version === undefined) {
    await store.close();
    throw new UsageError(
      `${storeLabel(store)}: no oncefetch tables there (no ${n.meta}); nothing was created. ` +
        `Name the schema and table your clients use: ${named === '--store' ? '--store "postgres://…/db?schema=S&table=T"' : 'ONCEFETCH_DB="postgres://…/db?schema=S&table=T"'}`,
    );
  }
  return store;
}

/** A store name for messages, without credentials in a URL. */
export function storeLabel(store: OnceStore): string {
  return hideCredentials(store.name);
}

/** `text` with the credentials of any URL in it masked (`//***@host`). */
function hideCredentials(text: string): string {
  return text.replace(/\/\/[^@/]*@/g, '//***@');
}
