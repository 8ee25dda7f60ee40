/**
 * `$ONCEFETCH_DB` names the Node default store's SQLite file. A URL there (`postgres://…`, as the CLI
 * takes it, or `mysql://`, `file://`) was read as a relative path: `createClient()` made a local SQLite
 * file under `./postgres:/…` and ran on it, so a fleet that meant to share PostgreSQL had one store per
 * machine, and no single flight across them. It is refused before anything is recorded, as is an empty one.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../src/index.js';

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('$ONCEFETCH_DB for the Node default store', () => {
  it.each(['postgres://agent@127.0.0.1:5432/test', 'postgresql://127.0.0.1/test', 'mysql://root@127.0.0.1/test', 'file:///tmp/oncefetch-x.db'])('%s: a TypeError naming the variable, no file made', (value) => {
    vi.stubEnv('ONCEFETCH_DB', value);
    expect(() => createClient({ tenant: 't1' })).toThrow(TypeError);
    expect(() => createClient({ tenant: 't1' })).toThrow(/^createClient: \$ONCEFETCH_DB is a URL \(.*\); the default store is SQLite at a file path: set it to one, or pass a store \(postgresStore\(\{ connectionString \}\) for PostgreSQL\)$/);
    const scheme = value.slice(0, value.indexOf(':') + 1);
    expect(existsSync(join(process.cwd(), scheme))).toBe(false);
  });

  it('a URL is shown without its credentials', () => {
    vi.stubEnv('ONCEFETCH_DB', 'postgres://agent:s3cret@127.0.0.1/test');
    expect(() => createClient({ tenant: 't1' })).toThrow(/postgres:\/\/127\.0\.0\.1\/test/);
    expect(() => createClient({ tenant: 't1' })).not.toThrow(/s3cret/);
  });

  it('empty: a TypeError naming the variable', () => {
    vi.stubEnv('ONCEFETCH_DB', '');
    expect(() => createClient({ tenant: 't1' })).toThrow(/^createClient: \$ONCEFETCH_DB is set but empty: unset it for \.\/\.oncefetch\/oncefetch\.db, or set it to a file path$/);
  });

  it('a file path still works, and a store given needs none', async () => {
    vi.stubEnv('ONCEFETCH_DB', 'postgres://agent@127.0.0.1/test');
    const { memoryStore } = await import('../../src/index.js');
    const client = createClient({ tenant: 't1', store: memoryStore() });
    await client.close();
  });
});
