/**
 * The stores the `client.close({ waitMs })` tests run on, one describe block each: SQLite (a file in a
 * temporary directory), IndexedDB (fake-indexeddb, a fresh database per test), PostgreSQL (a fresh
 * schema per block on the test server, dropped after it; refs differ between tests, so one schema
 * serves the block). Without a reachable PostgreSQL its block is skipped with a warning, or fails
 * under `CI=true` (see `describeWithPostgres`).
 */
import 'fake-indexeddb/auto';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe } from 'vitest';
import type { OnceStore } from '../../src/index.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { deleteIdb, freshDbName } from '../browser/idb-raw.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from './postgres.js';
import { tempDir } from './setup.js';

/** One test's store: `open` opens another handle on the same data (a new client's, a new process's). */
export interface StoreAt {
  kind: 'sqlite' | 'indexeddb' | 'postgres';
  open: () => OnceStore;
}

/**
 * Declares `body` once per store, as `<kind>: <title>`. Before each test a fresh place for the
 * records is made (`at()` gives it); its cleanup is pushed first on `cleanups` (the file's, run
 * last first after the test), so it runs after the clients the test closes there.
 */
export function describeEachStore(title: string, cleanups: (() => unknown)[], body: (at: () => StoreAt) => void): void {
  const declare = (fresh: () => { at: StoreAt; cleanup: () => unknown }) => (): void => {
    let current: StoreAt | undefined;
    beforeEach(() => {
      const made = fresh();
      current = made.at;
      cleanups.push(made.cleanup);
    });
    body(() => {
      if (current === undefined) throw new Error('no store outside a test');
      return current;
    });
  };
  const local = {
    sqlite: () => {
      const dir = tempDir();
      const path = join(dir.dir, 'close.db');
      return { at: { kind: 'sqlite' as const, open: () => sqliteStore({ path }) }, cleanup: dir.cleanup };
    },
    indexeddb: () => {
      const dbName = freshDbName('oncefetch-close');
      return { at: { kind: 'indexeddb' as const, open: () => indexedDbStore({ dbName }) }, cleanup: () => deleteIdb(dbName) };
    },
  };
  describe.each(Object.keys(local) as (keyof typeof local)[])(`%s: ${title}`, (kind) => declare(local[kind])());
  describeWithPostgres(`postgres: ${title}`, (url) => {
    const schema = freshSchemaName();
    let admin: pg.Pool;
    beforeAll(() => {
      admin = adminPool(url, 1);
    });
    afterAll(async () => {
      await dropSchema(admin, schema);
      await admin.end();
    });
    declare(() => ({ at: { kind: 'postgres', open: () => postgresStore({ connectionString: url, schema }) }, cleanup: () => undefined }))();
  });
}
