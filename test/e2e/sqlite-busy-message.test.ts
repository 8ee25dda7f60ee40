/**
 * A fleet trial (4 processes on one SQLite file) met SQLITE_BUSY as "held its lock longer than
 * busyTimeoutMs" with no figure and no way to change it: the user could not tell the 5000 ms
 * default from a value they set, nor where to set it. The message names the value and the option,
 * and says that this process waited that long (better-sqlite3's busy wait blocks its event loop).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { StoreError, createClient } from '../../src/index.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import { orderInit, tempDir } from '../helpers/setup.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('SQLITE_BUSY names busyTimeoutMs', () => {
  it('a claim blocked by another connection fails before the send with the value and the option named', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const provider = await startProvider();
    cleanups.push(() => provider.close());
    const path = join(tmp.dir, 'busy.db');
    const client = createClient({ store: sqliteStore({ path, busyTimeoutMs: 40 }) });
    cleanups.push(() => client.close());
    const other = new Database(path); // another process's connection, holding the write lock
    other.exec('BEGIN IMMEDIATE');
    cleanups.push(() => other.close());
    cleanups.push(() => other.exec('ROLLBACK'));

    const error = await client.fetch(`${provider.url}/orders`, { ...orderInit('busy-1'), once: { action: 'create-order', ref: 'busy-1' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StoreError);
    const message = (error as StoreError).message;
    expect(message).toContain('SQLITE_BUSY');
    expect(message).toContain('busyTimeoutMs (40 ms');
    expect(message).toContain('sqliteStore({ busyTimeoutMs })');
    expect(provider.effectsFor('busy-1')).toBe(0);

    other.exec('ROLLBACK');
    cleanups.pop();
    const res = await client.fetch(`${provider.url}/orders`, { ...orderInit('busy-1'), once: { action: 'create-order', ref: 'busy-1' } });
    expect(res.status).toBe(201);
    expect(provider.effectsFor('busy-1')).toBe(1);
  });
});
