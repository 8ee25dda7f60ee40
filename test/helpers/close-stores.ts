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
import { afterAll, beforeAll, beforeEach, describe, expect } from 'vitest';
import { createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { deleteIdb, freshDbName } from '../browser/idb-raw.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from './postgres.js';
import { orderInit, tempDir, wait } from './setup.js';
import { storedAt } from './slow-ack.js';

/** One test's store: `open` opens another handle on the same data (a new client's, a new process's). */
export interface StoreAt {
  kind: 'sqlite' | 'indexeddb' | 'postgres';
  open: () => OnceStore;
  /**
   * Holds the store's writes up for `ms` at the store itself, as another writer does (not in a wrapper):
   * PostgreSQL, a transaction of another connection holding the table's EXCLUSIVE lock (reads go on);
   * IndexedDB, another connection's readwrite transaction kept busy. Resolves once the hold is on, with
   * its end. None for SQLite, whose synchronous driver would wait for the lock on the event loop itself.
   */
  holdWrites?: (ms: number) => Promise<{ released: Promise<void> }>;
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
      const open = (): OnceStore => indexedDbStore({ dbName });
      return { at: { kind: 'indexeddb' as const, open, holdWrites: (ms: number) => holdIdb(open, dbName, ms) }, cleanup: () => deleteIdb(dbName) };
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
    const open = (): OnceStore => postgresStore({ connectionString: url, schema });
    declare(() => ({ at: { kind: 'postgres', open, holdWrites: (ms: number) => holdPostgres(open, admin, schema, ms) }, cleanup: () => undefined }))();
  });
}

/**
 * What the close tests share on the store `at()` gives: their clients (closed after the test), the record
 * of a ref as stored, and the checks that the next client sends (or runs) a stopped call once.
 */
export function closeCase(at: () => StoreAt, cleanups: (() => unknown)[], provider: () => Provider, { action, leaseMs }: { action: string; leaseMs: number }) {
  function clientOf(options: OnceClientOptions = {}): OnceClient {
    // (the test's own store when given: a store opened and not used would be left open)
    const client = createClient({ telemetry: false, leaseMs, ...options, store: options.store ?? at().open() });
    cleanups.push(() => client.close());
    return client;
  }

  const stored = (ref: string) => storedAt(at().open, { action, ref }, { leaseMs });

  /** The record a stopped call left: pending, no lease, its attempt never sent; returns it. */
  async function leftPending(ref: string) {
    const rec = await stored(ref);
    expect(rec).toMatchObject({ state: 'pending', lease: null, attempts: ['not_sent'] });
    return rec;
  }

  /** The record a stopped call left (see `leftPending`); the next client (no lookup, no provider dedupe) sends it once, with the key minted before. */
  async function sentOnceByNextClient(ref: string): Promise<void> {
    const rec = await leftPending(ref);
    const res = await clientOf().fetch(`${provider().url}/orders`, { ...orderInit(ref), once: { action, ref } });
    expect(res.status).toBe(201);
    expect(provider().requests.filter((r) => r.ref === ref).map((r) => r.key)).toEqual([rec.key]);
    expect(provider().effectsFor(ref)).toBe(1);
  }

  /** The record a stopped `client.run()` left (see `leftPending`); the next client runs `effect` (which logs its keys in `runs` and returns `{ id: 'o-1' }`) once, with the key minted before. */
  async function ranOnceByNextClient(ref: string, effect: (ctx: { key: string }) => Promise<unknown>, runs: string[]): Promise<void> {
    const rec = await leftPending(ref);
    expect(await clientOf().run({ action, ref }, effect)).toEqual({ id: 'o-1' });
    expect(runs).toEqual([rec.key]);
  }

  return { clientOf, stored, sentOnceByNextClient, ranOnceByNextClient };
}

/** Creates the store's tables (or database) as its first use does. */
async function created(open: () => OnceStore): Promise<void> {
  const store = open();
  await store.get('none');
  await store.close();
}

async function holdPostgres(open: () => OnceStore, admin: pg.Pool, schema: string, ms: number): Promise<{ released: Promise<void> }> {
  await created(open);
  const holder = await admin.connect();
  await holder.query('BEGIN');
  await holder.query(`LOCK TABLE "${schema}".oncefetch_records IN EXCLUSIVE MODE`);
  const released = wait(ms)
    .then(() => holder.query('COMMIT'))
    .then(() => holder.release());
  return { released };
}

async function holdIdb(open: () => OnceStore, dbName: string, ms: number): Promise<{ released: Promise<void> }> {
  await created(open);
  const db = await new Promise<IDBDatabase>((resolve, reject) => {
    const req = indexedDB.open(dbName);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error(`could not open ${dbName}`));
  });
  const tx = db.transaction('records', 'readwrite');
  const records = tx.objectStore('records');
  const end = Date.now() + ms;
  // (a transaction lives while it has requests: one after another until `ms` has passed)
  const spin = (): void => {
    records.get('none').onsuccess = () => {
      if (Date.now() < end) spin();
    };
  };
  spin();
  const released = new Promise<void>((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error ?? new Error('the holding transaction aborted'));
  }).finally(() => db.close());
  return { released };
}
