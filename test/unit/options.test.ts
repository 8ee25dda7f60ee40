/**
 * createClient option validation: a bad option throws a TypeError or RangeError
 * whose message names it; good options are accepted and take effect.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';
import { thrown } from '../helpers/thrown.js';

const noFetch = (async () => {
  throw new Error('no network in option tests');
}) as typeof globalThis.fetch;

/** createClient with a memory store, so a passing validation never opens the default SQLite file. */
function build(options: Record<string, unknown>) {
  return () => createClient({ store: memoryStore(), fetch: noFetch, ...options } as unknown as OnceClientOptions);
}

describe('bad options', () => {
  it.each<[string, Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp]>([
    ['retry.maxAttempts: 0', { retry: { maxAttempts: 0 } }, RangeError, /"retry\.maxAttempts"/],
    ['retry.maxAttempts: 101', { retry: { maxAttempts: 101 } }, RangeError, /"retry\.maxAttempts"/],
    ['retry.maxAttempts: 2.5', { retry: { maxAttempts: 2.5 } }, TypeError, /"retry\.maxAttempts"/],
    ['retry.baseDelayMs: -1', { retry: { baseDelayMs: -1 } }, RangeError, /"retry\.baseDelayMs"/],
    ['retry.attemptTimeoutMs: 0', { retry: { attemptTimeoutMs: 0 } }, RangeError, /"retry\.attemptTimeoutMs"/],
    ['retry.jitter: "equal"', { retry: { jitter: 'equal' } }, TypeError, /"retry\.jitter"/],
    ['leaseMs: "x"', { leaseMs: 'x' }, TypeError, /"leaseMs"/],
    ['leaseMs: 50', { leaseMs: 50 }, RangeError, /"leaseMs"/],
    ['keyHeader: "bad header"', { keyHeader: 'bad header' }, TypeError, /"keyHeader"/],
    ['store: {}', { store: {} }, TypeError, /"store"/],
    // a path given as the store: the message names the store to pass (a first-hour trial read "see the store contract")
    ['store: "./x.db"', { store: './x.db' }, TypeError, /"store" must be a store object \(memoryStore\(\), sqliteStore\(\{ path \}\), …\), not a path/],
    ['fetch: "x"', { fetch: 'x' }, TypeError, /"fetch"/],
    ['onEvent: 1', { onEvent: 1 }, TypeError, /"onEvent"/],
    ['providerDedupes: "yes"', { providerDedupes: 'yes' }, TypeError, /"providerDedupes"/],
    ['sensitiveHeaders: "x-api-key"', { sensitiveHeaders: 'x-api-key' }, TypeError, /"sensitiveHeaders"/],
  ])('%s', (_label, options, errorClass, name) => {
    const error = thrown(build(options));
    expect(error).toBeInstanceOf(errorClass);
    expect(error.message).toMatch(name);
    expect(error.message).toMatch(/^createClient: /);
  });

  it('an unknown top-level key (retries) is a TypeError naming it', () => {
    const error = thrown(build({ retries: 3 }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/\bretries\b/);
  });

  it('an unknown key inside retry is a TypeError naming it', () => {
    const error = thrown(build({ retry: { maxRetries: 3 } }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/\bmaxRetries\b/);
  });

  it('an unknown key inside retry.budget (a typo) is a TypeError naming it, not silently ignored', () => {
    const error = thrown(build({ retry: { budget: { ratoi: 0.5 } } }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/\bratoi\b/);
  });

  it.each<[Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp]>([
    [{ ratio: 2 }, RangeError, /"retry\.budget\.ratio"/],
    [{ ratio: 'half' }, TypeError, /"retry\.budget".*numbers/],
    [{ reserve: -1 }, RangeError, /"retry\.budget\.reserve"/],
    [{ maxTokens: -5 }, RangeError, /"retry\.budget\.maxTokens"/],
  ])('retry.budget %j is rejected naming the field', (budget, errorClass, name) => {
    const error = thrown(build({ retry: { budget } }));
    expect(error).toBeInstanceOf(errorClass);
    expect(error.message).toMatch(name);
  });

  it.each<[string, Record<string, unknown>]>([
    ['reserve above maxTokens', { reserve: 200, maxTokens: 100 }],
    ['reserve above the default maxTokens (100)', { reserve: 200 }],
    ['the default reserve (10) above maxTokens', { maxTokens: 5 }],
  ])('retry.budget with %s is a RangeError from createClient naming both options', (_label, budget) => {
    const error = thrown(build({ retry: { budget } }));
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toMatch(/^createClient: /);
    expect(error.message).toMatch(/"retry\.budget\.reserve"/);
    expect(error.message).toMatch(/"retry\.budget\.maxTokens"/);
  });

  it('baseDelayMs above maxDelayMs is a RangeError naming both', () => {
    const error = thrown(build({ retry: { baseDelayMs: 500, maxDelayMs: 100 } }));
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toMatch(/retry\.baseDelayMs/);
    expect(error.message).toMatch(/retry\.maxDelayMs/);
  });

  it('baseDelayMs is compared with the default maxDelayMs (10000) too', () => {
    expect(thrown(build({ retry: { baseDelayMs: 10_001 } }))).toBeInstanceOf(RangeError);
    expect(thrown(build({ retry: { maxDelayMs: 100 } }))).toBeInstanceOf(RangeError); // default base 200
    expect(build({ retry: { baseDelayMs: 10_000 } })).not.toThrow();
  });

  it('validates before creating the default store or transport', () => {
    // no store and no fetch given: a throw here proves validation ran first
    expect(() => createClient({ retries: 3 } as unknown as OnceClientOptions)).toThrow(TypeError);
  });
});

describe('good options', () => {
  it('accepts every documented option', () => {
    expect(
      build({
        tenant: 't1',
        keyHeader: 'X-Idempotency-Key',
        quoteKey: true,
        retry: {
          maxAttempts: 1,
          baseDelayMs: 0,
          maxDelayMs: 0,
          attemptTimeoutMs: 1,
          deadlineMs: 1,
          maxRetryAfterMs: 0,
          jitter: 'none',
          budget: { ratio: 0, reserve: 0, maxTokens: 0 },
        },
        retentionMs: 1,
        providerRetentionMs: 1,
        leaseMs: 100,
        inFlightWaitMs: 0,
        providerDedupes: true,
        lookups: { 'create-order': async () => null },
        sensitiveHeaders: ['x-api-key'],
        maxBodyBytes: 1,
        maxStoredBodyBytes: 0,
        onceMethods: ['put'],
        onEvent: () => undefined,
        owner: 'worker-1',
        now: () => 0,
        random: () => 0,
      }),
    ).not.toThrow();
    expect(build({})).not.toThrow();
    expect(build({ retry: { budget: false } })).not.toThrow();
    expect(build({ retry: undefined, tenant: undefined })).not.toThrow();
  });

  it('the options take effect: tenant, keyHeader, quoteKey, onceMethods', async () => {
    const sent: Headers[] = [];
    const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
      sent.push(new Headers(init?.headers));
      return new Response('{}', { status: 201 });
    }) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch, tenant: 't9', keyHeader: 'X-Request-Key', quoteKey: true, onceMethods: ['put'] });
    await client.fetch('https://api.example.test/items/1', { method: 'PUT', body: '{}', once: { action: 'put-item', ref: 'i-1' } });
    const record = await client.get({ action: 'put-item', ref: 'i-1' });
    expect(record?.tenant).toBe('t9');
    expect(sent[0]?.get('x-request-key')).toBe(`"${record?.key}"`);
    expect(sent[0]?.get('idempotency-key')).toBeNull();
    // POST is no longer once-only by default with onceMethods: ['put']
    await client.fetch('https://api.example.test/items', { method: 'POST', body: '{}' });
    expect(sent[1]?.get('x-request-key')).toBeNull();
    expect(await client.store.list()).toHaveLength(1);
    // PUT is: without `once`, it still gets a key
    await client.fetch('https://api.example.test/items/2', { method: 'PUT', body: '{}' });
    expect(sent[2]?.get('x-request-key')).toMatch(/^"[0-9a-f-]{36}"$/);
  });
});

describe('bad options of client.recover()', () => {
  it.each<[string, Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp]>([
    ['limit: -1', { limit: -1 }, RangeError, /^client\.recover: option "limit"/],
    ['limit: 1.5', { limit: 1.5 }, RangeError, /^client\.recover: option "limit"/],
    ['limit: "10"', { limit: '10' }, TypeError, /^client\.recover: option "limit"/],
    ['signal: "x"', { signal: 'x' }, TypeError, /^client\.recover: option "signal"/],
    ['tenant: ""', { tenant: '' }, TypeError, /^client\.recover: option "tenant"/],
  ])('%s is refused naming it, whatever the store checks', async (_label, options, errorClass, name) => {
    const client = build({})();
    const error = await client.recover(options as never).then(
      () => new Error('expected a rejection'),
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(errorClass);
    expect(error.message).toMatch(name);
    await client.close();
  });
});

describe('bad options of client.cancel()', () => {
  it.each<[string, Record<string, unknown>, typeof TypeError | typeof RangeError]>([
    ['waitMs: -5', { waitMs: -5 }, RangeError],
    ['waitMs: 1.5', { waitMs: 1.5 }, RangeError],
    ['waitMs: NaN', { waitMs: Number.NaN }, RangeError],
    ['waitMs: "10"', { waitMs: '10' }, TypeError],
  ])('%s is refused naming it, before the record is touched', async (_label, options, errorClass) => {
    const client = build({})();
    const error = await client.cancel({ action: 'a', ref: 'r' }, options as never).then(
      () => new Error('expected a rejection'),
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(errorClass);
    expect(error.message).toMatch(/^client\.cancel: option "waitMs"/);
    await client.close();
  });
});
