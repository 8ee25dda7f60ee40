/**
 * The store the chaos run's processes share: one SQLite file in the run
 * directory, or one PostgreSQL table in a schema of its own, created by the
 * first process that opens it and dropped after the run (unless kept).
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { OnceStore } from '../src/index.js';
import { postgresStore } from '../src/stores/postgres.js';
import { sqliteStore } from '../src/stores/sqlite.js';

/** The kinds of store `--store` accepts. */
export const STORE_KINDS = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** The PostgreSQL server of `--store postgres`: `DATABASE_URL`, else the test server. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** Where the run's records are: what every worker and the final recovery open. */
export type StoreSpec = { kind: 'sqlite'; path: string } | { kind: 'postgres'; connectionString: string; schema: string };

/** A fresh place for one run's records. */
export function runStore(kind: StoreKind, runDir: string): StoreSpec {
  if (kind === 'sqlite') return { kind, path: join(runDir, 'once.db') };
  const url = process.env['DATABASE_URL'];
  return { kind, connectionString: url === undefined || url === '' ? DEFAULT_DATABASE_URL : url, schema: `oncefetch_chaos_${randomBytes(6).toString('hex')}` };
}

/** Opens the run's store (the PostgreSQL store creates its schema and table when missing). */
export function openStore(spec: StoreSpec): OnceStore {
  return spec.kind === 'sqlite' ? sqliteStore({ path: spec.path }) : postgresStore({ connectionString: spec.connectionString, schema: spec.schema });
}

/** Where the records are, for the totals and the kept run's pointer. */
export function describeStore(spec: StoreSpec): string {
  if (spec.kind === 'sqlite') return spec.path;
  const url = new URL(spec.connectionString);
  return `postgres://${url.host}${url.pathname} schema ${spec.schema}`;
}

/** Drops the run's PostgreSQL schema; nothing to do for SQLite (the run directory goes). */
export async function dropStore(spec: StoreSpec): Promise<void> {
  if (spec.kind === 'sqlite') return;
  const pg = (await import('pg')).default;
  // (bounded: an interrupted run drops its schema on the way out, and must get out)
  const client = new pg.Client({ connectionString: spec.connectionString, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${spec.schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
