/**
 * `--store PATH|URL` for the store commands: a path opens the SQLite store, a
 * `postgres://` or `postgresql://` URL the PostgreSQL store (loaded only then,
 * with its optional `pg` peer dependency). Default: `$ONCEFETCH_DB` or
 * `./.oncefetch/oncefetch.db`.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { defaultStorePath } from '../node-defaults.js';
import type { OnceStore } from '../stores/contract.js';
import { sqliteStore } from '../stores/sqlite.js';
import { holdsOncefetchStore } from '../stores/sqlite-open.js';
import { UsageError } from './args.js';

/** True for a PostgreSQL connection URI. */
export function isPostgresUrl(spec: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(spec);
}

/** The store named by `--store`, or the default one. A SQLite path must exist: inspecting never creates a database. */
export async function openStore(spec: string | undefined): Promise<OnceStore> {
  const target = spec ?? defaultStorePath();
  if (isPostgresUrl(target)) {
    let mod: typeof import('../stores/postgres.js');
    try {
      mod = await import('../stores/postgres.js');
    } catch (cause) {
      throw new Error(`the PostgreSQL store could not be loaded (${cause instanceof Error ? cause.message : String(cause)})`, { cause });
    }
    return mod.postgresStore({ connectionString: target });
  }
  const path = resolve(target);
  if (!existsSync(path)) {
    throw new UsageError(`no oncefetch database at ${path}${spec === undefined ? ' (the default; pass --store PATH|URL or set $ONCEFETCH_DB)' : ''}`);
  }
  // Never add tables to (or change the mode of) a file that is not already an oncefetch store.
  if (!holdsOncefetchStore(path)) throw new UsageError(`${path} is not an oncefetch database (it has no oncefetch_records table); nothing was changed`);
  return sqliteStore({ path });
}

/** A store name for messages, without credentials in a URL. */
export function storeLabel(store: OnceStore): string {
  return store.name.replace(/\/\/[^@/]*@/, '//***@');
}
