/**
 * The store factories' options: a misspelt key is a TypeError naming it (as createClient's
 * options), null is a TypeError, and postgresStore says when its connectionString is undefined
 * (`process.env.DATABASE_URL` unset) instead of "pass exactly one of pool and connectionString".
 * And a list query with a misspelt filter: a TypeError naming it, on every built-in store.
 */
import 'fake-indexeddb/auto';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/index.js';
import type { OnceStore } from '../../src/index.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { thrown } from '../helpers/thrown.js';

describe('store factories', () => {
  it.each<[string, () => unknown, string]>([
    ['sqliteStore({ durabilty })', () => sqliteStore({ path: ':memory:', durabilty: 'power-loss' } as never), 'sqliteStore: options has unknown keys durabilty'],
    ['indexedDbStore({ dbname })', () => indexedDbStore({ dbname: 'shop' } as never), 'indexedDbStore: options has unknown keys dbname'],
    ['indexedDbStore(null)', () => indexedDbStore(null as never), 'indexedDbStore: options must be an object, got null'],
    ['postgresStore({ scheme })', () => postgresStore({ connectionString: 'postgres://db/app', scheme: 'agents' } as never), 'postgresStore: options has unknown keys scheme'],
    ['memoryStore({ path })', () => memoryStore({ path: './x.db' } as never), 'memoryStore: options has unknown keys path'],
  ])('%s is a TypeError naming the key', (_label, make, message) => {
    const error = thrown(make);
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(message);
  });

  // User trial: a 55-character table was refused with "table must match /^[a-z_][a-z0-9_]{0,62}$/ and be
  // at most 54 characters": the pattern shown allowed 63.
  it.each<[string, { schema?: string; table?: string }, string]>([
    ['table', { table: 'a'.repeat(55) }, `postgresStore: table must match /^[a-z_][a-z0-9_]{0,53}$/ (lower-case letters, digits and _, at most 54 characters, so that the names derived from it fit in 63), got "${'a'.repeat(55)}"`],
    ['table', { table: 'Orders' }, 'postgresStore: table must match /^[a-z_][a-z0-9_]{0,53}$/ (lower-case letters, digits and _, at most 54 characters, so that the names derived from it fit in 63), got "Orders"'],
    ['schema', { schema: 's'.repeat(64) }, `postgresStore: schema must match /^[a-z_][a-z0-9_]{0,62}$/ (lower-case letters, digits and _, at most 63 characters), got "${'s'.repeat(64)}"`],
  ])('postgresStore: a bad %s is refused with a pattern and a length that agree', (_option, names, message) => {
    const error = thrown(() => postgresStore({ connectionString: 'postgres://db/app', ...names }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(message);
  });

  it('postgresStore takes a table of exactly 54 characters', async () => {
    const store = postgresStore({ connectionString: 'postgres://db/app', table: 'a'.repeat(54) });
    await store.close();
  });

  it('postgresStore({ connectionString: undefined }) says so, not "pass exactly one"', () => {
    const error = thrown(() => postgresStore({ connectionString: process.env['ONCEFETCH_TEST_UNSET_VARIABLE'] }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('postgresStore: connectionString is undefined; pass a connection string or a pool');
  });
});

// Regression: list() ignored unknown query keys, so `list({ state: ['ambiguous'] })` (for `states`)
// listed every record, of every state, as if nothing were filtered.
describe('list queries', () => {
  const noDatabase = async (): Promise<never> => {
    throw new Error('no database in this test');
  };
  it.each<[string, () => OnceStore]>([
    ['memoryStore', () => memoryStore()],
    ['sqliteStore', () => sqliteStore({ path: ':memory:' })],
    ['indexedDbStore', () => indexedDbStore({ dbName: `list-query-${globalThis.crypto.randomUUID()}` })],
    // the query is checked before the pool is asked for anything: a pool that has no database serves
    ['postgresStore', () => postgresStore({ pool: { query: noDatabase, connect: noDatabase } as never })],
  ])('%s: a misspelt filter is a TypeError naming it, not a list of everything', async (_label, open) => {
    const store = open();
    try {
      for (const [query, message] of [
        [{ state: ['ambiguous'] }, 'list: query has unknown keys state'],
        [{ states: ['ambiguous'], tennant: 't1', limt: 5 }, 'list: query has unknown keys tennant, limt'],
        ['ambiguous', 'list: query must be an object, got string'],
      ] as const) {
        const error = await store.list(query as never).then(
          () => new Error('expected a rejection'),
          (e: unknown) => e as Error,
        );
        expect(error).toBeInstanceOf(TypeError);
        expect(error.message).toBe(message);
      }
    } finally {
      await store.close();
    }
  });
});
