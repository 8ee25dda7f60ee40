/**
 * A NUL in a scope on PostgreSQL (user trial): a tenant with one failed the claim there with a
 * StoreError (its tenant column is text: "invalid byte sequence for encoding UTF8: 0x00") while the
 * memory, SQLite and IndexedDB stores kept it. The client now refuses such a tenant on every store, so
 * here too it is the TypeError the other stores get, nothing recorded or sent. An action or a ref with
 * a NUL is kept by PostgreSQL as by the others: one effect, then a replay.
 */
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createClient } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';

describeWithPostgres('postgresStore: a NUL in a scope', (url) => {
  const schema = freshSchemaName();
  let admin: pg.Pool;
  let store: OnceStore;
  let client: OnceClient;
  let sends = 0;

  beforeAll(() => {
    admin = adminPool(url);
    store = postgresStore({ connectionString: url, schema });
    const fetch = (async () => {
      sends++;
      return new Response('{}', { status: 201 });
    }) as typeof globalThis.fetch;
    client = createClient({ store, fetch });
  });
  afterAll(async () => {
    await client.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  it('a tenant with a NUL is the TypeError of every store, not a StoreError; nothing recorded or sent', async () => {
    const fetched = await client.fetch('https://api.example.test/o', { method: 'POST', body: '{}', once: { tenant: 't\u0000', action: 'a', ref: 'r' } }).catch((e: unknown) => e);
    expect(fetched).toBeInstanceOf(TypeError);
    const ran = await client.run({ tenant: 't\u0000', action: 'a', ref: 'r' }, async () => ++sends).catch((e: unknown) => e);
    expect(ran).toBeInstanceOf(TypeError);
    expect(sends).toBe(0);
    expect(await store.list({})).toEqual([]);
  });

  it('an action and a ref with a NUL are kept: one effect, then a replay', async () => {
    const once = { action: 'a\u0000', ref: 'r\u0000' };
    await client.fetch('https://api.example.test/o', { method: 'POST', body: '{}', once });
    const again = await client.fetch('https://api.example.test/o', { method: 'POST', body: '{}', once });
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(sends).toBe(1);
    expect((await store.list({})).map((r) => r.ref)).toEqual(['r\u0000']);
  });
});
