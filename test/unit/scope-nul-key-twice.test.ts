/**
 * Two input defects from a user trial, refused before anything is recorded or sent, alike on every store.
 *
 * A NUL (`\u0000`) in a tenant: the memory, SQLite and IndexedDB stores kept it, PostgreSQL failed the
 * claim with a StoreError ("invalid byte sequence for encoding UTF8: 0x00", its tenant column is text),
 * so code tested on memory or SQLite failed in production. A NUL in an action or a ref is kept by every
 * store (both travel JSON-escaped, see the store contract), so it stays accepted.
 *
 * The caller's key header given twice (two casings in a plain object, two array entries, Headers.append):
 * fetch joins the values, and `"k-a, k-b"` was adopted and sent as the key, a key nobody meant.
 */
import { describe, expect, it } from 'vitest';
import * as browserEntry from '../../src/browser.js';
import { createClient, memoryStore, wrapFetch } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';

/** A client on a memory store whose transport counts its sends and the key each carried. */
function counted(keyHeader?: string) {
  const keys: (string | null)[] = [];
  const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    keys.push(headers.get(keyHeader ?? 'idempotency-key'));
    return new Response('{}', { status: 201 });
  }) as typeof globalThis.fetch;
  const store = memoryStore();
  return { client: createClient({ store, fetch, ...(keyHeader === undefined ? {} : { keyHeader }) }), store, keys, fetch };
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e as Error,
  );
}

async function nothingRecorded(store: OnceStore, keys: unknown[]): Promise<void> {
  expect(keys).toEqual([]);
  expect(await store.list({})).toEqual([]);
}

const URL_ = 'https://api.example.test/orders';
const NUL = /tenant must not contain a NUL character/;

describe('a NUL in a tenant is refused by the client, before any store sees it', () => {
  it('createClient({ tenant }) names the option (Node and browser entries, wrapFetch)', () => {
    for (const make of [createClient, browserEntry.createClient]) {
      const error = (() => {
        try {
          make({ store: memoryStore(), tenant: 't1\u0000x' });
        } catch (e) {
          return e as Error;
        }
        return new Error('expected a throw');
      })();
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(/^createClient: option "tenant" must not contain a NUL character/);
    }
    expect(() => wrapFetch(globalThis.fetch, { store: memoryStore(), tenant: '\u0000' })).toThrow(/^wrapFetch: option "tenant" must not contain a NUL/);
  });

  it('once.tenant: a TypeError naming it; nothing recorded or sent', async () => {
    const { client, store, keys } = counted();
    const error = await rejection(client.fetch(URL_, { method: 'POST', body: '{}', once: { tenant: 't\u0000', action: 'a', ref: 'r' } }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^client\.fetch: once\.tenant must not contain a NUL character/);
    await nothingRecorded(store, keys);
  });

  it('client.run spec.tenant: a TypeError naming it; the effect is not called (an empty one too)', async () => {
    const { client, store, keys } = counted();
    let calls = 0;
    const effect = async () => ++calls;
    const error = await rejection(client.run({ tenant: 'a\u0000b', action: 'a', ref: 'r' }, effect));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^client\.run: spec\.tenant must not contain a NUL character/);
    const empty = await rejection(client.run({ tenant: '', action: 'a', ref: 'r' }, effect));
    expect(empty).toBeInstanceOf(TypeError);
    expect(empty.message).toBe('client.run: spec.tenant must be a non-empty string');
    expect(calls).toBe(0);
    await nothingRecorded(store, keys);
  });

  it('get, cancel, explain and recover name the tenant', async () => {
    const { client } = counted();
    const scope = { tenant: 't\u0000', action: 'a', ref: 'r' };
    for (const [method, call] of [
      ['get', (c: OnceClient) => c.get(scope)],
      ['cancel', (c: OnceClient) => c.cancel(scope)],
      ['explain', (c: OnceClient) => c.explain(scope)],
    ] as const) {
      const error = await rejection(call(client));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toMatch(new RegExp(`^client\\.${method}: scope\\.${NUL.source}`));
    }
    const error = await rejection(client.recover({ tenant: '\u0000' }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^client\.recover: option "tenant" must not contain a NUL character/);
  });

  it('a NUL in an action or a ref is kept (every store keeps it): one effect, then a replay', async () => {
    const { client, keys } = counted();
    const once = { action: 'a\u0000', ref: 'r\u0000' };
    expect((await client.fetch(URL_, { method: 'POST', body: '{}', once })).status).toBe(201);
    const again = await client.fetch(URL_, { method: 'POST', body: '{}', once });
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(keys).toHaveLength(1);
    let calls = 0;
    await client.run({ action: 'b\u0000', ref: 'r\u0000' }, async () => ++calls);
    await client.run({ action: 'b\u0000', ref: 'r\u0000' }, async () => ++calls);
    expect(calls).toBe(1);
  });

  it('a key header with a NUL is refused by Headers itself: nothing recorded or sent', async () => {
    const { client, store, keys } = counted();
    const error = await rejection(client.fetch(URL_, { method: 'POST', body: '{}', headers: { 'Idempotency-Key': 'k\u0000' } }));
    expect(error).toBeInstanceOf(TypeError);
    await nothingRecorded(store, keys);
  });
});

describe("the caller's key header given twice", () => {
  const twice = (a: string, b: string): [string, HeadersInit][] => {
    const appended = new Headers();
    appended.append('Idempotency-Key', a);
    appended.append('Idempotency-Key', b);
    return [
      ['two casings in an object', { 'Idempotency-Key': a, 'idempotency-key': b }],
      ['two array entries', [['Idempotency-Key', a], ['Idempotency-Key', b]]],
      ['Headers.append', appended],
    ];
  };

  it.each(twice('k-a', 'k-b'))('%s: a TypeError naming both; nothing recorded or sent', async (_how, headers) => {
    const { client, store, keys } = counted();
    const error = await rejection(client.fetch(URL_, { method: 'POST', body: '{}', headers }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/^client\.fetch: the Idempotency-Key header /);
    expect(error.message).toContain('k-a');
    expect(error.message).toContain('k-b');
    await nothingRecorded(store, keys);
  });

  it('two casings in an object: the message names both forms', async () => {
    const { client } = counted();
    const error = await rejection(client.fetch(URL_, { method: 'POST', body: '{}', headers: { 'Idempotency-Key': 'k-a', 'idempotency-key': 'k-b' } }));
    expect(error.message).toContain('Idempotency-Key: k-a');
    expect(error.message).toContain('idempotency-key: k-b');
  });

  it.each(twice('k', 'k'))('%s with one value twice: refused too (fetch would send "k, k")', async (_how, headers) => {
    const { client, store, keys } = counted();
    const error = await rejection(client.fetch(URL_, { method: 'POST', body: '{}', headers }));
    expect(error).toBeInstanceOf(TypeError);
    await nothingRecorded(store, keys);
  });

  it('a configured keyHeader, a Request, client.wrap() and wrapFetch refuse it alike', async () => {
    const custom = counted('X-Request-Id');
    const e1 = await rejection(custom.client.fetch(URL_, { method: 'POST', body: '{}', headers: { 'X-Request-Id': 'a', 'x-request-id': 'b' } }));
    expect(e1.message).toMatch(/^client\.fetch: the X-Request-Id header /);
    await nothingRecorded(custom.store, custom.keys);

    const { client, store, keys, fetch } = counted();
    const req = new Request(URL_, { method: 'POST', body: '{}', headers: [['Idempotency-Key', 'k-a'], ['Idempotency-Key', 'k-b']] });
    expect(await rejection(client.fetch(req))).toBeInstanceOf(TypeError);
    const wrapped = client.wrap();
    expect(await rejection(wrapped(URL_, { method: 'POST', body: '{}', headers: { 'Idempotency-Key': 'k-a', 'IDEMPOTENCY-KEY': 'k-b' } }))).toBeInstanceOf(TypeError);
    await nothingRecorded(store, keys);
    const viaWrapFetch = wrapFetch(fetch, { store });
    expect(await rejection(viaWrapFetch(URL_, { method: 'POST', body: '{}', headers: [['idempotency-key', 'k-a'], ['Idempotency-Key', 'k-b']] }))).toBeInstanceOf(TypeError);
    await nothingRecorded(store, keys);
  });

  it('one key, and one quoted key holding a comma (RFC 8941), are adopted as before', async () => {
    const { client, keys } = counted();
    expect((await client.fetch(URL_, { method: 'POST', body: '{}', headers: { 'Idempotency-Key': 'k-a' } })).status).toBe(201);
    expect((await client.fetch(URL_, { method: 'POST', body: '{}', headers: new Headers({ 'Idempotency-Key': '"k, b"' }) })).status).toBe(201);
    expect(keys).toEqual(['k-a', 'k, b']); // (unquoted: quoteKey is off)
  });
});
