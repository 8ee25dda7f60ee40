/**
 * PostgreSQL close() on a healthy network with a legitimately slow query (a row lock held by another
 * session for 1.5 s, longer than close()'s 1 s grace): a graceful client.close() waits for the call,
 * which records its 2xx; a user-given pool is never touched; a second store.close() waits as the first.
 */
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createClient } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { startProvider } from '../../src/testing/provider.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';
import { orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';

describeWithPostgres('PostgreSQL close() with a slow query on a healthy network', (url) => {
  const schema = freshSchemaName();
  let admin: pg.Pool;

  beforeAll(() => {
    admin = adminPool(url);
  });
  afterAll(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });

  /** Holds an exclusive lock on the records table for `ms` (another session), resolved once taken. */
  async function lockFor(ms: number): Promise<Promise<void>> {
    const conn = await admin.connect();
    await conn.query('BEGIN');
    await conn.query(`LOCK TABLE "${schema}".oncefetch_records IN ACCESS EXCLUSIVE MODE`);
    return new Promise<void>((resolve) =>
      setTimeout(() => {
        void conn
          .query('COMMIT')
          .finally(() => conn.release())
          .then(() => resolve());
      }, ms),
    );
  }

  it('graceful client.close() while a call waits 1.5 s on a lock: the call ends 201, recorded succeeded, 1 effect', async () => {
    const provider = await startProvider({ ignoreKeys: true });
    try {
      const client = createClient({ store: postgresStore({ connectionString: url, schema }), retry: { deadlineMs: 10_000 } });
      const ref = 'PG-slow-graceful';
      const warm = await client.fetch(`${provider.url}/orders`, { ...orderInit('PG-warm'), once: { action: ACTION, ref: 'PG-warm' } });
      expect(warm.status).toBe(201);
      const released = await lockFor(1_500);
      const call = client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
      await new Promise((r) => setTimeout(r, 100));
      const closed = client.close();
      const res = await call;
      expect(res.status).toBe(201);
      await closed;
      await released;
      const row = await admin.query(`SELECT state FROM "${schema}".oncefetch_records WHERE id = $1`, [recordId({ tenant: 'default', action: ACTION, ref })]);
      expect(row.rows[0]?.state).toBe('succeeded');
      expect(provider.effectsFor(ref)).toBe(1);
    } finally {
      await provider.close();
    }
  }, 15_000);

  it('a user-given pool: store.close() neither waits for nor cuts its slow query, and the pool stays usable', async () => {
    const pool = adminPool(url, 2);
    try {
      const store = postgresStore({ pool, schema });
      expect(await store.get('warm')).toBeUndefined();
      const released = await lockFor(1_500);
      const slow = store.get('x');
      await new Promise((r) => setTimeout(r, 100));
      const started = performance.now();
      await store.close();
      expect(performance.now() - started).toBeLessThan(200);
      expect(await slow).toBeUndefined(); // finished after the lock, never cut
      await released;
      expect((await pool.query('SELECT 1 AS one')).rows[0]).toEqual({ one: 1 });
    } finally {
      await pool.end();
    }
  }, 10_000);

  it('store.close() called twice: the second waits for the pool to end as the first does', async () => {
    const store = postgresStore({ connectionString: url, schema });
    expect(await store.get('warm')).toBeUndefined();
    const released = await lockFor(600);
    const slow = store.get('y').catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    const order: string[] = [];
    const first = store.close().then(() => order.push('first'));
    const second = store.close().then(() => order.push('second'));
    // the slow query ends (lock released at 600 ms, within the 1 s grace) before either close resolves
    void slow.then(() => order.push('query'));
    await Promise.all([first, second, slow, released]);
    expect(order.indexOf('query')).toBeLessThan(order.indexOf('second'));
    expect(await slow).toBeUndefined();
  }, 10_000);

  it("a user-given pool whose migration outlasts close()'s 1 s grace, then fails for its own reason: not said cut off by close()", async () => {
    const own = freshSchemaName();
    const pool = adminPool(url, 2);
    const holder = await admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`oncefetch-schema:${own}`]);
      const store = postgresStore({ pool, schema: own });
      const call = store.get('x').then(
        () => 'resolved',
        (e: unknown) => String(e),
      );
      await new Promise((r) => setTimeout(r, 100));
      const closed = store.close();
      await new Promise((r) => setTimeout(r, 1_300)); // past the grace
      // the migration's backend ends for a reason of its own (an administrator, a failover)
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> $1 AND query LIKE '%pg_advisory_xact_lock%' AND wait_event_type = 'Lock'`,
        [(await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid],
      );
      const failed = await call;
      expect(failed).toMatch(/StoreError/);
      expect(failed).not.toMatch(/cut off by the store's close\(\)/);
      await closed;
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      await pool.end();
      await dropSchema(admin, own);
    }
  }, 10_000);
});
