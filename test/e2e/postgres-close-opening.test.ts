/**
 * store.close() while the store's first connect (its setup: connect, then migrate) hangs on a dark
 * network: close() lets a connection still opening have 1 s, then drops it (CLOSE_GRACE_MS), also when
 * that connection is the setup's, instead of first waiting for the setup until connectTimeoutMs (10 s by
 * default; never with connectTimeoutMs 0).
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { postgresStore } from '../../src/stores/postgres.js';
import { startBlackholeProxy } from '../helpers/blackhole-proxy.js';
import type { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { describeWithPostgres, freshSchemaName } from '../helpers/postgres.js';

describeWithPostgres('PostgreSQL close() during the first connect', (url) => {
  const schema = freshSchemaName(); // never created: the setup never reaches the server
  let proxy: BlackholeProxy;
  beforeEach(async () => {
    proxy = await startBlackholeProxy(Number(new URL(url).port || 5432), new URL(url).hostname);
  });
  afterEach(async () => {
    await proxy.close();
  });

  it('the setup connect hangs (default connectTimeoutMs 10 s): close() returns in about 1 s, the call fails with a StoreError', async () => {
    const u = new URL(url);
    u.host = `127.0.0.1:${proxy.port}`;
    proxy.blackhole();
    const store = postgresStore({ connectionString: u.href, schema });
    const call = store.get('x').then(
      () => 'resolved',
      (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e)),
    );
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    await store.close();
    const ms = performance.now() - started;
    expect(await call).toMatch(/^StoreError: .*opening, cut off by the store's close\(\) \(its connection dropped\)/);
    expect(ms).toBeLessThan(1_000 + 500);
  }, 20_000);
});
