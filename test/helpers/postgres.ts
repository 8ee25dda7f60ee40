/**
 * Finding the test PostgreSQL server and giving each run its own schema.
 *
 * The server is `DATABASE_URL` when set, else 127.0.0.1:5432 database `test`
 * as `postgres` or as the current user (trust auth). Outside CI an
 * unreachable server skips the PostgreSQL suites with a warning; with
 * `CI=true` it fails them.
 */
import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import pg from 'pg';
import { describe, it } from 'vitest';

/** The default test server when `DATABASE_URL` is not set. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** A reachable server, or why there is none. */
export type DatabaseProbe = { url: string } | { reason: string };

function candidates(): string[] {
  const fromEnv = process.env['DATABASE_URL'];
  if (fromEnv !== undefined && fromEnv !== '') return [fromEnv];
  const me = encodeURIComponent(userInfo().username);
  return [DEFAULT_DATABASE_URL, `postgres://${me}@127.0.0.1:5432/test`];
}

/** Where a URL points, without credentials. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username === '' ? '' : `${u.username}@`}${u.host}${u.pathname}`;
  } catch {
    return '(unparsable DATABASE_URL)';
  }
}

async function probe(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Tries each candidate server with a short connect timeout. */
export async function findDatabase(): Promise<DatabaseProbe> {
  const failures: string[] = [];
  for (const url of candidates()) {
    try {
      await probe(url);
      return { url };
    } catch (error) {
      failures.push(`${redact(url)}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return { reason: failures.join('; ') };
}

const found = await findDatabase();

/**
 * Declares `body` as a describe block when PostgreSQL is reachable. Otherwise
 * skips it with a warning, or, when `CI=true`, declares one failing test that
 * says why: CI machines run PostgreSQL, so an unreachable server is a fault.
 */
export function describeWithPostgres(name: string, body: (url: string) => void): void {
  if ('url' in found) {
    describe(name, () => body(found.url));
    return;
  }
  const why = `PostgreSQL is not reachable (${found.reason}). Start it on 127.0.0.1:5432 with a database "test", or set DATABASE_URL.`;
  if (process.env['CI'] === 'true') {
    describe(name, () => {
      it('needs a reachable PostgreSQL server (CI=true)', () => {
        throw new Error(why);
      });
    });
    return;
  }
  console.warn(`[oncefetch] skipping "${name}": ${why}`);
  describe.skip(name, () => body(DEFAULT_DATABASE_URL));
}

/** A fresh schema name for one test run: `oncefetch_test_<random>`. */
export function freshSchemaName(): string {
  return `oncefetch_test_${randomBytes(6).toString('hex')}`;
}

/** An admin pool for raw SQL behind the store's back (corruption, counts, cleanup). */
export function adminPool(url: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/** Drops a test schema and everything in it. */
export async function dropSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
