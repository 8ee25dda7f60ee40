/**
 * The PostgreSQL store against a real server: the shared contract suite (with
 * a pool the store creates and with one the caller owns), then what is
 * specific to PostgreSQL. Each run works in a fresh schema, dropped at the end.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { applyEvent, newRecord, type OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { postgresStore, type PostgresPool } from '../../src/stores/postgres.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

let counter = 0;
function sample(ref = `r${++counter}`, now = 1_000, retentionMs = 1_000): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'a'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    now,
    leaseMs: 100,
    retentionMs,
  });
}

function succeeded(r: OperationRecord): OperationRecord {
  const started = applyEvent(r, { type: 'attempt_started', attemptId: `att-${r.ref}` }, r.updatedAt, 'owner');
  return applyEvent(
    started,
    { type: 'attempt_finished', class: 'success', status: 201, reason: 'ok', result: null },
    r.updatedAt,
    'owner',
  );
}

async function storeError(promise: Promise<unknown>): Promise<Error & { cause?: unknown }> {
  const outcome = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isOnceError(outcome) && outcome.code === 'STORE_ERROR', `expected a StoreError, got ${String(outcome)}`).toBe(true);
  return outcome as Error & { cause?: unknown };
}

const codeOf = (error: { cause?: unknown }): unknown => (error.cause as { code?: unknown } | undefined)?.code;

describeWithPostgres('postgresStore', (url) => {
  const schema = freshSchemaName();
  let admin: pg.Pool;
  let callerPool: pg.Pool;
  let tables = 0;
  const freshTable = (): string => `records_${++tables}`;

  beforeAll(() => {
    admin = adminPool(url);
    callerPool = adminPool(url, 10);
  });
  afterAll(async () => {
    await callerPool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  const rawUpdate = async (table: string, id: string, raw: string): Promise<void> => {
    const { rowCount } = await admin.query(`UPDATE "${schema}"."${table}" SET data = $2 WHERE id = $1`, [id, raw]);
    if (rowCount !== 1) throw new Error(`no row ${id} to corrupt`);
  };
  const dropTable = async (table: string): Promise<void> => {
    await admin.query(`DROP TABLE IF EXISTS "${schema}"."${table}", "${schema}"."${table}_meta"`);
  };

  describeStoreContract('postgresStore (connectionString)', {
    durable: true,
    setup() {
      const table = freshTable();
      return {
        open: () => postgresStore({ connectionString: url, schema, table }),
        corrupt: (id, raw) => rawUpdate(table, id, raw),
        teardown: () => dropTable(table),
      };
    },
  });

  describeStoreContract('postgresStore (caller pool)', {
    durable: true,
    setup() {
      const table = freshTable();
      return {
        open: () => postgresStore({ pool: callerPool, schema, table }),
        corrupt: (id, raw) => rawUpdate(table, id, raw),
        teardown: () => dropTable(table),
      };
    },
  });

  describe('specifics', () => {
    const open = (extra: Partial<Parameters<typeof postgresStore>[0]> = {}): { store: OnceStore; table: string } => {
      const table = freshTable();
      return { store: postgresStore({ connectionString: url, schema, table, ...extra }), table };
    };

    // Regression (adversarial run): a live record whose state column had been edited to a
    // terminal state was purged, and read as absent.
    it('a row whose state column disagrees with its record is a StoreError, and never purged', async () => {
      const { store, table } = open();
      const live = applyEvent(sample(), { type: 'attempt_started', attemptId: 'a1' }, 1_001, 'owner');
      await store.claim(live);
      await admin.query(`UPDATE "${schema}"."${table}" SET state = 'failed', expires_at = 0 WHERE id = $1`, [live.id]);
      const error = await store.get(live.id).catch((e: unknown) => e);
      expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
      expect((error as Error).message).toMatch(/state column \(failed\) disagrees with its record \(in_flight\)/);
      expect(await store.purge(Date.now())).toBe(0);
      expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}"."${table}"`)).rows).toEqual([{ n: 1 }]);
      await store.close();
    });

    it('purge leaves a row that is not a record (and purges the rest), instead of failing', async () => {
      const { store, table } = open();
      const done = (ref: string) => applyEvent(applyEvent(sample(ref), { type: 'attempt_started', attemptId: 'a1' }, 1_001, 'owner'), { type: 'attempt_finished', class: 'terminal', status: 400, reason: 'status 400', result: null }, 1_002, 'owner');
      const [bad, good] = [done(`bad-${table}`), done(`good-${table}`)];
      await store.claim(bad);
      await store.claim(good);
      await admin.query(`UPDATE "${schema}"."${table}" SET data = 'not json' WHERE id = $1`, [bad.id]);
      expect(await store.purge(Date.now())).toBe(1);
      expect(await store.get(good.id)).toBeUndefined();
      await expect(store.get(bad.id)).rejects.toMatchObject({ code: 'STORE_ERROR' });
      await store.close();
    });

    // Regression (review): the tenant column cannot tell apart tenants that differ only in a lone
    // surrogate (pg sends both as U+FFFD), and list() dropped the other tenant's rows after LIMIT:
    // a limit of 1 listed nothing while this tenant had a record.
    it('list by a tenant holding a lone surrogate: the limit counts only that tenant\'s records', async () => {
      const { store } = open();
      const of = (tenant: string, ref: string, now: number): OperationRecord =>
        newRecord({ scope: { tenant, action: 'create-order', ref }, key: `key-${ref}`, keySource: 'minted', fingerprint: 'a'.repeat(64), request: null, owner: 'owner', now, leaseMs: 100, retentionMs: 1_000 });
      await store.claim(of('t\ud801', 'other-1', 1_000));
      await store.claim(of('t\ud801', 'other-2', 1_001));
      const mine = of('t\ud800', 'mine', 1_002);
      await store.claim(mine);
      expect(await store.list({ tenant: 't\ud800', limit: 1 })).toEqual([mine]);
      expect((await store.list({ tenant: 't\ud801', limit: 1 })).map((r) => r.ref)).toEqual(['other-1']);
      await store.close();
    });

    it('a pg.Pool fits the pool option, and close() leaves a caller pool open', async () => {
      const pool: PostgresPool = callerPool;
      const store = postgresStore({ pool, schema, table: freshTable() });
      await store.claim(sample());
      await store.close();
      expect((await callerPool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    });

    it('close() ends the pool the store created from connectionString', async () => {
      const app = `oncefetch_close_${tables}_${process.pid}`;
      const { store } = open({ connectionString: `${url}${url.includes('?') ? '&' : '?'}application_name=${app}` });
      const backends = async (): Promise<number> =>
        Number((await admin.query('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', [app])).rows[0].n);
      await Promise.all(Array.from({ length: 5 }, () => store.claim(sample())));
      expect(await backends()).toBeGreaterThan(0);
      await store.close();
      await expect.poll(backends, { timeout: 5_000 }).toBe(0);
    });

    it('creates tables and indexes once when many processes start together, and records the schema version', async () => {
      const table = freshTable();
      const stores = Array.from({ length: 8 }, () => postgresStore({ connectionString: url, schema, table, poolMax: 2 }));
      const records = Array.from({ length: 8 }, (_, i) => sample(`first-${i}`));
      const claims = await Promise.all(stores.map((s, i) => s.claim(records[i]!)));
      expect(claims.every((c) => c.created)).toBe(true);
      await Promise.all(stores.map((s) => s.close()));
      const meta = await admin.query(`SELECT key, value FROM "${schema}"."${table}_meta"`);
      expect(meta.rows).toEqual([{ key: 'schema_version', value: '1' }]);
      const indexes = await admin.query(
        'SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname',
        [schema, table],
      );
      const defs = (indexes.rows as Array<{ indexname: string; indexdef: string }>).map((r) => r.indexname);
      expect(defs).toEqual([`${table}_pkey`, `${table}_purge`, `${table}_recovery`]);
      const purge = (indexes.rows as Array<{ indexname: string; indexdef: string }>).find((r) => r.indexname === `${table}_purge`);
      expect(purge?.indexdef).toMatch(/\(expires_at\) WHERE \(state = ANY/);
    });

    it('stores of different tables opening together in a schema that does not exist yet all open', async () => {
      // CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent CREATE SCHEMA (23505).
      for (let round = 0; round < 5; round++) {
        const fresh = freshSchemaName();
        const stores = Array.from({ length: 4 }, (_, i) => postgresStore({ connectionString: url, schema: fresh, table: `records_${i}`, poolMax: 1 }));
        try {
          const opened = await Promise.allSettled(stores.map((s) => s.list({ limit: 1 })));
          const failures = opened.flatMap((o) => (o.status === 'rejected' ? [String(o.reason)] : []));
          expect(failures).toEqual([]);
        } finally {
          await Promise.all(stores.map((s) => s.close()));
          await dropSchema(admin, fresh);
        }
      }
    });

    it('a connection lost while the schema is being created rejects the call with a StoreError; the process survives', { timeout: 20_000 }, async () => {
      const fresh = freshSchemaName();
      const table = 'lost_mid_migration';
      // Hold the migration's lock so the store's session waits inside its migration, then kill that session.
      const holder = await admin.connect();
      const script = `
        const { postgresStore } = await import('./src/stores/postgres.ts');
        const store = postgresStore({ connectionString: process.argv[1], schema: process.argv[2], table: process.argv[3] });
        const outcome = await store.get('x').then(() => 'resolved', (e) => e.name + ': ' + e.message);
        await store.close();
        process.stdout.write(JSON.stringify({ outcome }));
      `;
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`oncefetch:${fresh}.${table}`]);
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, url, fresh, table], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
        const waiting = async (): Promise<number> => {
          const { rows } = await admin.query(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'oncefetch' AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock%'`,
          );
          return rows.length === 0 ? 0 : (rows[0] as { pid: number }).pid;
        };
        await expect.poll(waiting, { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
        await admin.query('SELECT pg_terminate_backend($1)', [await waiting()]);
        const code = await exited;
        expect({ code, stderr: stderr.includes("Unhandled 'error' event") }).toEqual({ code: 0, stderr: false });
        expect((JSON.parse(stdout) as { outcome: string }).outcome).toMatch(/^StoreError: .*while opening/);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        holder.release();
        await dropSchema(admin, fresh);
      }
    });

    it('refuses a schema written by a newer oncefetch, and an unrecognised version', async () => {
      const { store, table } = open();
      await store.get('x');
      await store.close();
      await admin.query(`UPDATE "${schema}"."${table}_meta" SET value = '2' WHERE key = 'schema_version'`);
      const newer = postgresStore({ connectionString: url, schema, table });
      expect((await storeError(newer.get('x'))).message).toMatch(/schema version 2 .*newer oncefetch/);
      await newer.close();
      await admin.query(`UPDATE "${schema}"."${table}_meta" SET value = 'banana' WHERE key = 'schema_version'`);
      const odd = postgresStore({ connectionString: url, schema, table });
      expect((await storeError(odd.claim(sample()))).message).toMatch(/unrecognised schema version "banana"/);
      await odd.close();
    });

    it('an unreachable server rejects with a StoreError naming the cause, never credentials, and is retried', async () => {
      const store = postgresStore({
        connectionString: 'postgres://agent:s3cret@127.0.0.1:1/test',
        schema,
        connectTimeoutMs: 2_000,
      });
      const error = await storeError(store.get('x'));
      expect(error.message).toMatch(/connection refused .* while opening \[ECONNREFUSED\]/);
      expect(error.message).toContain('127.0.0.1:1/test');
      expect(error.message).not.toContain('s3cret');
      expect(codeOf(error)).toBe('ECONNREFUSED');
      await storeError(store.claim(sample())); // tried again, fails again: no cached success, no hang
      await store.close();
    });

    it('a failing statement rejects with a StoreError carrying the SQLSTATE and the pg error as cause', async () => {
      const { store, table } = open();
      const r = sample();
      await store.claim(r);
      await admin.query(`ALTER TABLE "${schema}"."${table}" RENAME TO "${table}_moved"`);
      const error = await storeError(store.get(r.id));
      expect(error.message).toMatch(/table does not exist .* while reading record .*\[42P01\]/);
      expect(codeOf(error)).toBe('42P01');
      await store.close();
      await admin.query(`DROP TABLE "${schema}"."${table}_moved"`);
    });

    // 57P01 (admin_shutdown) is also what a server that keeps running sends to the one session
    // ended by pg_terminate_backend(): the message must not claim the server is shutting down.
    it('a connection ended by pg_terminate_backend (57P01) mid-statement: a StoreError saying the server terminated the connection', { timeout: 20_000 }, async () => {
      const { store, table } = open();
      const r = sample();
      await store.claim(r);
      // Hold the table so the store's next read waits inside the server, then end only that session.
      const holder = await admin.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`LOCK TABLE "${schema}"."${table}" IN ACCESS EXCLUSIVE MODE`);
        const failed = storeError(store.get(r.id));
        const waiting = async (): Promise<number> => {
          const { rows } = await admin.query(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'oncefetch' AND wait_event_type = 'Lock' AND query LIKE $1`,
            [`%"${schema}"."${table}"%`],
          );
          return rows.length === 0 ? 0 : (rows[0] as { pid: number }).pid;
        };
        await expect.poll(waiting, { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
        await admin.query('SELECT pg_terminate_backend($1)', [await waiting()]);
        const error = await failed;
        expect(codeOf(error)).toBe('57P01');
        expect(error.message).toMatch(/the connection was terminated by the server \(an administrator or a shutdown\) while reading record .*\[57P01\]/);
        expect(error.message).not.toContain('shutting down');
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        holder.release();
        await store.close();
      }
    });

    it('purges in batches of purgeBatchSize; two purging stores split the work and count each row once', async () => {
      const table = freshTable();
      const a = postgresStore({ connectionString: url, schema, table, purgeBatchSize: 7 });
      const b = postgresStore({ connectionString: url, schema, table, purgeBatchSize: 7 });
      const terminal = 100;
      for (let i = 0; i < terminal; i++) await a.claim(succeeded(sample(`t${i}`)));
      const live = sample('live');
      await a.claim(live);
      const [na, nb] = await Promise.all([a.purge(1_000_000), b.purge(1_000_000)]);
      expect(na + nb).toBe(terminal);
      expect(await a.list()).toEqual([live]);
      await Promise.all([a.close(), b.close()]);
    });

    // Regression: a purge that failed on one batch rejected with that batch's error alone: the caller
    // could not tell how many records the batches before (each committed) had removed.
    it('a purge whose third batch fails: a StoreError carrying how many the two before removed, as many as are gone', async () => {
      const table = freshTable();
      const store = postgresStore({ connectionString: url, schema, table, purgeBatchSize: 5 });
      for (let i = 0; i < 20; i++) await store.claim(succeeded(sample(`p${i}`)));
      const t = `"${schema}"."${table}"`;
      // Any delete once 10 rows are gone fails its statement: the third batch, as a whole.
      await admin.query(`CREATE FUNCTION "${schema}".${table}_fail() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF (SELECT count(*) FROM ${t}) <= 10 THEN RAISE EXCEPTION 'simulated failure'; END IF; RETURN OLD; END $$`);
      await admin.query(`CREATE TRIGGER fail_third_batch BEFORE DELETE ON ${t} FOR EACH ROW EXECUTE FUNCTION "${schema}".${table}_fail()`);
      const error = await store.purge(1_000_000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
      expect((error as { purged?: number }).purged).toBe(10);
      expect((error as Error).message).toMatch(/simulated failure.*\(purge had removed 10 expired records before this\)$/);
      expect((await admin.query(`SELECT count(*)::int AS n FROM ${t}`)).rows).toEqual([{ n: 10 }]);
      await admin.query(`DROP TRIGGER fail_third_batch ON ${t}`);
      expect(await store.purge(1_000_000)).toBe(10);
      await store.close();
    });

    it('keeps a reference whose text PostgreSQL could not hold raw (NUL, quotes, emoji)', async () => {
      const { store } = open();
      const r = sample('nul\u0000"quote\'😀');
      await store.claim(r);
      expect(await store.get(r.id)).toEqual(r);
      expect(await store.list()).toEqual([r]);
      await store.close();
    });

    it('rejects bad options with TypeError/RangeError naming the option', () => {
      expect(() => postgresStore({} as never)).toThrow(/exactly one of pool and connectionString/);
      expect(() => postgresStore({ pool: callerPool, connectionString: url })).toThrow(TypeError);
      expect(() => postgresStore({ connectionString: '' })).toThrow(/connectionString/);
      expect(() => postgresStore({ connectionString: url, schema: 'Bad-Name' })).toThrow(/schema/);
      expect(() => postgresStore({ connectionString: url, schema: 'pg_mine' })).toThrow(/schema/);
      expect(() => postgresStore({ connectionString: url, table: 'x"; drop table y; --' })).toThrow(/table/);
      expect(() => postgresStore({ connectionString: url, table: 'a'.repeat(55) })).toThrow(/table/);
      expect(() => postgresStore({ connectionString: url, poolMax: 0 })).toThrow(RangeError);
      expect(() => postgresStore({ connectionString: url, purgeBatchSize: 1.5 })).toThrow(/purgeBatchSize/);
      expect(() => postgresStore({ connectionString: url, queryTimeoutMs: -1 })).toThrow(RangeError);
      expect(() => postgresStore({ connectionString: url, queryTimeoutMs: 1.5 })).toThrow(/queryTimeoutMs/);
      expect(() => postgresStore({ connectionString: url, queryTimeoutMs: '5000' as never })).toThrow(/queryTimeoutMs/);
      expect(() => postgresStore({ pool: {} as never })).toThrow(/pool must be a pg.Pool/);
    });

    it('importing oncefetch and oncefetch/postgres does not load pg; the first call does', { timeout: 20_000 }, async () => {
      const script = `
        import { createRequire } from 'node:module';
        const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => /[\\\\/]node_modules[\\\\/]pg[\\\\/]/.test(k));
        await import('./src/index.ts');
        const { postgresStore } = await import('./src/stores/postgres.ts');
        const store = postgresStore({ connectionString: process.argv[1], schema: process.argv[2], table: 'lazy' });
        const before = loaded();
        await store.get('x');
        const after = loaded();
        await store.close();
        process.stdout.write(JSON.stringify({ before, after }));
      `;
      const out = await new Promise<string>((done, fail) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, url, schema], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.once('exit', (code) => (code === 0 ? done(stdout) : fail(new Error(`child exited ${code}: ${stderr}`))));
      });
      expect(JSON.parse(out)).toEqual({ before: false, after: true });
    });
  });
});
