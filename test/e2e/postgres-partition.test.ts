/**
 * A fleet's PostgreSQL goes dark after the provider answered: a TCP proxy on loopback, between the
 * store and the server, stops forwarding without closing anything (a network partition, a
 * failover's dead primary). pg has no client-side query timeout by default and `statement_timeout`
 * cannot fire when the server cannot reply, so a write on such a connection waits until TCP gives
 * up: on loopback, where the proxy acknowledges every byte, for good.
 *
 * Measured before these changes, default pool options, `deadlineMs: 1000`: the 201's write never
 * answered and the call was still pending after 12 s (the row said `in_flight`); `client.close()`
 * was still pending 3 s later (pg's `pool.end()` waits for the hung connection).
 *
 * Now the call ends at its deadline with the 201 (the engine), and the store's `queryTimeoutMs`
 * (pg's `query_timeout`, by default 5 s above `statementTimeoutMs`) turns the hung write into a
 * StoreError, its connection discarded, so that `close()` ends too. Another process's call later
 * finds the attempt open: it reconciles (lookup) and never sends again. Effects are counted at a
 * loopback provider that does not dedupe.
 */
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { createClient, isOnceError } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { postgresStore } from '../../src/stores/postgres.js';
import type { PostgresStoreOptions } from '../../src/stores/postgres.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { startBlackholeProxy } from '../helpers/blackhole-proxy.js';
import type { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { adminPool, describeWithPostgres, dropSchema, freshSchemaName } from '../helpers/postgres.js';
import { lookupByRef, orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';
const SLACK_MS = 300;

describeWithPostgres('PostgreSQL unreachable after the send', (url) => {
  const schema = freshSchemaName();
  let admin: pg.Pool;
  let provider: Provider;
  let proxy: BlackholeProxy;
  const cleanups: (() => unknown)[] = [];

  beforeAll(() => {
    admin = adminPool(url);
  });
  afterAll(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });
  beforeEach(async () => {
    provider = await startProvider({ ignoreKeys: true });
    proxy = await startBlackholeProxy(Number(new URL(url).port || 5432), new URL(url).hostname);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await proxy.close();
    await provider.close();
  });

  /** `url` through the proxy. */
  const viaProxy = (): string => {
    const u = new URL(url);
    u.host = `127.0.0.1:${proxy.port}`;
    return u.href;
  };

  const storeVia = (options: Partial<PostgresStoreOptions> = {}): OnceStore => postgresStore({ connectionString: viaProxy(), schema, ...options });

  function clientOn(store: OnceStore, options: OnceClientOptions = {}, darkAfterSend = false): OnceClient {
    const client = createClient({
      store,
      leaseMs: 500,
      settleMs: 0,
      ...options,
      fetch: async (input, init) => {
        try {
          return await fetch(input, init);
        } finally {
          if (darkAfterSend) proxy.blackhole();
        }
      },
      retry: { deadlineMs: 1_000, budget: false, ...options.retry },
    });
    cleanups.push(() => client.close().catch(() => undefined));
    return client;
  }

  const order = (client: OnceClient, ref: string, withLookup = false): Promise<Response> =>
    client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(withLookup ? { lookup: lookupByRef(provider.url) } : {}) } });

  /** How a promise ended and when, or `pending` after `capMs`. */
  async function timed(call: Promise<unknown>, capMs: number): Promise<{ outcome: string; ms: number; value: unknown }> {
    const started = performance.now();
    let cap: ReturnType<typeof setTimeout> | undefined;
    const ended = await Promise.race([
      call.then(
        (value) => ({ outcome: value instanceof Response ? String(value.status) : 'resolved', value }),
        (error: unknown) => ({ outcome: isOnceError(error) ? error.code : error instanceof Error ? error.name : String(error), value: error }),
      ),
      new Promise<{ outcome: string; value: unknown }>((r) => (cap = setTimeout(() => r({ outcome: 'pending', value: undefined }), capMs))),
    ]);
    clearTimeout(cap);
    return { ...ended, ms: Math.round(performance.now() - started) };
  }

  const stateOf = async (ref: string): Promise<unknown> =>
    (await admin.query(`SELECT state FROM "${schema}".oncefetch_records WHERE id = $1`, [recordId({ tenant: 'default', action: ACTION, ref })])).rows[0]?.state;

  it('queryTimeoutMs: a read the server cannot answer fails with a StoreError then; close() ends', async () => {
    const store = storeVia({ queryTimeoutMs: 500 });
    expect(await store.get('warm')).toBeUndefined(); // connected, migrated
    proxy.blackhole();
    const read = await timed(store.get('x'), 3_000);
    expect(read.outcome).toBe('STORE_ERROR');
    expect(String((read.value as Error).message)).toMatch(/timeout/i);
    expect(read.ms).toBeGreaterThanOrEqual(495);
    expect(read.ms).toBeLessThan(500 + SLACK_MS);
    expect((await timed(store.close(), 3_000)).outcome).toBe('resolved');
  });

  it('by default 5 s above statementTimeoutMs: with statementTimeoutMs 300, a dark read fails after 5.3 s', async () => {
    const store = storeVia({ statementTimeoutMs: 300 });
    expect(await store.get('warm')).toBeUndefined();
    proxy.blackhole();
    const read = await timed(store.get('x'), 8_000);
    expect(read.outcome).toBe('STORE_ERROR');
    expect(read.ms).toBeGreaterThanOrEqual(5_295);
    expect(read.ms).toBeLessThan(5_300 + SLACK_MS);
    expect((await timed(store.close(), 3_000)).outcome).toBe('resolved');
  }, 15_000);

  it('the 201 is back, then the database goes dark: the 201 at the deadline; the hung write fails at queryTimeoutMs; another process reconciles, nothing resent', async () => {
    const ref = 'PG-dark-201';
    const store = storeVia({ queryTimeoutMs: 1_500, connectTimeoutMs: 1_000 });
    const a = clientOn(store, {}, true);
    const first = await timed(order(a, ref), 5_000);
    expect(first.outcome).toBe('201');
    expect(first.ms).toBeGreaterThanOrEqual(995);
    expect(first.ms).toBeLessThan(1_000 + SLACK_MS);
    expect(await (first.value as Response).json()).toMatchObject({ ref });
    expect(await stateOf(ref)).toBe('in_flight'); // the write never reached the server
    // the hung write ends at queryTimeoutMs, its connection discarded; the client closes then
    const closed = await timed(a.close(), 5_000);
    expect(closed.outcome).toBe('resolved');
    expect(closed.ms).toBeLessThan(1_500 + 1_000 + SLACK_MS);
    // another process, straight to the server, once A's lease has expired: the attempt may have been
    // delivered; its lookup finds the order; nothing is sent again
    await new Promise((r) => setTimeout(r, 500));
    const b = clientOn(postgresStore({ connectionString: url, schema }), { owner: 'b' });
    expect((await timed(order(b, ref), 5_000)).outcome).toBe('AMBIGUOUS_OUTCOME');
    expect((await timed(order(b, ref, true), 5_000)).outcome).toBe('200');
    expect(await stateOf(ref)).toBe('succeeded');
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('every connection of the pool hung: the next query fails at connectTimeoutMs, saying the pool had no connection for it (not only pg\'s "timeout exceeded when trying to connect")', async () => {
    const store = storeVia({ poolMax: 1, connectTimeoutMs: 500, queryTimeoutMs: 3_000 });
    expect(await store.get('warm')).toBeUndefined();
    proxy.blackhole();
    const hung = timed(store.get('x'), 5_000); // holds the only connection
    const waiting = await timed(store.get('y'), 5_000); // never gets one
    expect(waiting.outcome).toBe('STORE_ERROR');
    expect(waiting.ms).toBeLessThan(500 + SLACK_MS);
    expect(String((waiting.value as Error).message)).toMatch(
      /reading record y \(the pool \(poolMax 1\) gave it no connection within connectTimeoutMs \(500 ms\): all busy, or a new one not opened in time\): timeout exceeded when trying to connect/,
    );
    expect((await hung).outcome).toBe('STORE_ERROR');
    await store.close();
  }, 10_000);

  it('store.close() with a query hung on a dark network: its connection is dropped after 1 s, not at queryTimeoutMs (35 s by default)', async () => {
    const store = storeVia();
    expect(await store.get('warm')).toBeUndefined(); // connected, migrated: one idle connection
    proxy.blackhole();
    const hungOnIdle = timed(store.get('x'), 8_000); // on the open connection: no reply ever
    const hungOnConnect = timed(store.get('y'), 8_000); // takes a new connection: its startup is never answered
    await new Promise((r) => setTimeout(r, 100));
    const closed = await timed(store.close(), 8_000);
    expect(closed.outcome).toBe('resolved');
    expect(closed.ms).toBeLessThan(1_000 + SLACK_MS);
    // (says why: not pg's bare 'Connection terminated')
    for (const hung of [await hungOnIdle, await hungOnConnect]) {
      expect(hung.outcome).toBe('STORE_ERROR');
      expect(String((hung.value as Error).message)).toMatch(/reading record [xy], cut off by the store's close\(\) \(its connection dropped\): Connection terminated/);
    }
  }, 15_000);

  it('client.close({ waitMs: 500 }) during a partition: a call stuck in its claim is stopped, close() returns in about waitMs + 2 s, not at queryTimeoutMs; nothing sent', async () => {
    const ref = 'PG-dark-close';
    const a = clientOn(storeVia(), { retry: { deadlineMs: 20_000 } });
    expect((await timed(order(a, 'PG-warm'), 5_000)).outcome).toBe('201');
    proxy.blackhole();
    const call = timed(order(a, ref), 15_000);
    await new Promise((r) => setTimeout(r, 100));
    const closed = await timed(a.close({ waitMs: 500 }), 15_000);
    expect(closed.outcome).toBe('resolved');
    expect(closed.ms).toBeLessThan(500 + 2_000 + SLACK_MS);
    const ended = await call;
    expect(ended.outcome).toBe('STORE_ERROR');
    // (stopped at waitMs by the client's close, as its deadline would stop it: not when the store's close drops the connection, 1 s later)
    expect(String((ended.value as Error).message)).toMatch(/client\.close\(\{ waitMs: 500 \}\) stopped this work when its wait ran out/);
    expect(ended.ms).toBeLessThan(100 + 500 + SLACK_MS);
    expect(provider.effectsFor(ref)).toBe(0);
  }, 20_000);

  it('default pool options: the call still ends at its deadline; the write goes on in the background', async () => {
    const ref = 'PG-dark-default';
    const a = clientOn(storeVia(), {}, true);
    const first = await timed(order(a, ref), 5_000);
    expect(first.outcome).toBe('201');
    expect(first.ms).toBeLessThan(1_000 + SLACK_MS);
    expect(await stateOf(ref)).toBe('in_flight');
    expect(provider.effectsFor(ref)).toBe(1);
    // (the network comes back as a reset here; with it still dark, close() drops the hung connection after 1 s: see above)
    await proxy.close();
    expect((await timed(a.close(), 3_000)).outcome).toBe('resolved');
  });
});
