/**
 * Input validation of the public surface beyond createClient's options: a misspelt key in any
 * options object (`once`, a run spec, recover/cancel/close options) is a
 * TypeError naming it, thrown before anything is recorded or sent; an options object that is not
 * an object (null) is a TypeError naming where it was passed; a malformed scope is refused. The
 * store factories: test/stores/store-options.test.ts.
 * Regression (user trial): `once: { action: 'a', reff: 'order-9' }` was ignored, a fresh ref
 * minted per call, and two calls made two effects.
 */
import { describe, expect, it } from 'vitest';
import * as browserEntry from '../../src/browser.js';
import * as nodeEntry from '../../src/index.js';
import { createClient, memoryStore, wrapFetch } from '../../src/index.js';
import type { OnceClientOptions, OnceStore } from '../../src/index.js';
import { thrown } from '../helpers/thrown.js';

/** A client on a memory store whose transport counts its sends. */
function counted() {
  const sent: string[] = [];
  const fetch = (async (input: RequestInfo | URL) => {
    sent.push(String(input));
    return new Response('{}', { status: 201 });
  }) as typeof globalThis.fetch;
  const store = memoryStore();
  return { client: createClient({ store, fetch }), store, sent };
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e as Error,
  );
}

async function nothingRecorded(store: OnceStore, sent: string[]): Promise<void> {
  expect(sent).toEqual([]);
  expect(await store.list({})).toEqual([]);
}

describe('unknown keys in per-call options', () => {
  it('once: a misspelt ref (reff) is a TypeError naming it, before anything is recorded or sent', async () => {
    const { client, store, sent } = counted();
    const init = { method: 'POST', body: '{"ref":"typo"}', once: { action: 'a', reff: 'order-9' } } as never;
    const error = await rejection(client.fetch('https://api.example.test/orders', init));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('client.fetch: once has unknown keys reff');
    await nothingRecorded(store, sent);
    // the same through wrap()
    expect(await rejection(client.wrap()('https://api.example.test/orders', init))).toMatchObject({ message: 'client.fetch: once has unknown keys reff' });
    await nothingRecorded(store, sent);
    await client.close();
  });

  it('once: every key the SDK reads is accepted (tenant, action, ref, lookup, classify, signal)', async () => {
    const { client, sent } = counted();
    const once = { tenant: 't2', action: 'a', ref: 'r', lookup: async () => null, classify: () => undefined, signal: new AbortController().signal };
    expect((await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once })).status).toBe(201);
    expect(sent).toHaveLength(1);
    await client.close();
  });

  it('client.run: a misspelt spec key (paylod) is a TypeError naming it; the effect is not called', async () => {
    const { client, store, sent } = counted();
    let calls = 0;
    const effect = async () => void calls++;
    const error = await rejection(client.run({ action: 'charge', ref: 'o-1', paylod: { amount: 5 } } as never, effect));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('client.run: spec has unknown keys paylod');
    expect(calls).toBe(0);
    await nothingRecorded(store, sent);
    await client.close();
  });

  it('client.run: spec null is a TypeError naming spec', async () => {
    const { client } = counted();
    const error = await rejection(client.run(null as never, async () => 1));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('client.run: spec must be an object, got null');
    await client.close();
  });

  it.each<[string, (c: nodeEntry.OnceClient) => Promise<unknown>, string]>([
    ['recover({ limt })', (c) => c.recover({ limt: 5 } as never), 'client.recover: options has unknown keys limt'],
    ['recover(null)', (c) => c.recover(null as never), 'client.recover: options must be an object, got null'],
    ['cancel(scope, { wait })', (c) => c.cancel({ action: 'a', ref: 'r' }, { wait: 5 } as never), 'client.cancel: options has unknown keys wait'],
    ['cancel(scope, null)', (c) => c.cancel({ action: 'a', ref: 'r' }, null as never), 'client.cancel: options must be an object, got null'],
    ['close({ wait })', (c) => c.close({ wait: 5 } as never), 'client.close: options has unknown keys wait'],
  ])('%s is a TypeError naming it', async (_label, call, message) => {
    const { client } = counted();
    const error = await rejection(call(client));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(message);
    await client.close();
  });
});

describe('close() passed as an event handler', () => {
  // `process.on('SIGTERM', client.close)` calls it with the signal's name, a page's
  // `addEventListener('pagehide', client.close)` with the event (an object, `isTrusted` its own key):
  // no options, and the client closes, as before unknown keys were refused.
  it.each<[string, unknown]>([
    ["a signal's name", 'SIGTERM'],
    ['an event', new Event('pagehide')],
    ['an event with an own isTrusted, as a browser gives', Object.defineProperty(new Event('pagehide'), 'isTrusted', { value: true, enumerable: true })],
  ])('given %s, it closes the client', async (_label, arg) => {
    const { client } = counted();
    await expect((client.close as (a: unknown) => Promise<void>)(arg)).resolves.toBeUndefined();
    await expect(client.get({ action: 'a', ref: 'r' })).rejects.toThrow(/after client.close\(\)/);
  });
});

describe('purge() takes no filter', () => {
  // It removes every tenant's finished records past their expiry: `purge({ tenant: 't1' })` did so too,
  // for all tenants, its filter ignored without a word.
  it('a filter object is a TypeError naming its keys; nothing is removed', async () => {
    const { client, store } = counted();
    await client.fetch('http://127.0.0.1:9/orders', { method: 'POST', body: '{}', once: { action: 'a', ref: 'r' } });
    const err = await rejection((client.purge as (a: unknown) => Promise<number>)({ tenant: 't1' }));
    expect(err).toBeInstanceOf(TypeError);
    expect(err.message).toBe('client.purge takes no filter (it purges every tenant\'s expired records); got tenant');
    expect(await store.list({})).toHaveLength(1);
  });

  it('no argument, undefined or an empty object: it purges', async () => {
    const { client } = counted();
    await expect(client.purge()).resolves.toBe(0);
    await expect((client.purge as (a: unknown) => Promise<number>)(undefined)).resolves.toBe(0);
    await expect((client.purge as (a: unknown) => Promise<number>)({})).resolves.toBe(0);
  });
});

describe('scopes given to get, cancel and explain', () => {
  it.each<[string, unknown, string]>([
    ['{}', {}, 'scope.action must be a non-empty string'],
    ['null', null, 'scope must be an object, got null'],
    ['a ref as a string', 'order-9', 'scope must be an object, got string'],
    ['ref missing', { action: 'a' }, 'scope.ref must be a non-empty string'],
    ['tenant: ""', { action: 'a', ref: 'r', tenant: '' }, 'scope.tenant must be a non-empty string'],
  ])('%s is a TypeError naming the method', async (_label, scope, message) => {
    const { client } = counted();
    for (const method of ['get', 'cancel', 'explain'] as const) {
      const error = await rejection(Promise.resolve().then((): Promise<unknown> => client[method](scope as never)));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toBe(`client.${method}: ${message}`);
    }
    await client.close();
  });

  it('a run spec, with its payload, still names its scope (a scope is any object with action and ref)', async () => {
    const { client } = counted();
    const spec = { action: 'charge', ref: 'o-1', payload: { amount: 5 } };
    await client.run(spec, async () => 7);
    expect(await client.get(spec)).toMatchObject({ state: 'succeeded' });
    expect(await client.explain(spec)).toMatchObject({ handoff: expect.anything() as unknown });
    await client.close();
  });
});

describe('options objects that are not objects', () => {
  it('createClient(null) is a TypeError naming the options (Node and browser entries)', () => {
    for (const create of [nodeEntry.createClient, browserEntry.createClient]) {
      const error = thrown(() => create(null as unknown as OnceClientOptions));
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toBe('createClient: options must be an object, got null');
    }
  });

  it('wrapFetch names itself: a fetch that is not a function, null options, a bad option', () => {
    for (const wrap of [wrapFetch, browserEntry.wrapFetch]) {
      expect(thrown(() => wrap(5 as never))).toMatchObject({ name: 'TypeError', message: 'wrapFetch: fetch must be a function, got number' });
      expect(thrown(() => wrap(globalThis.fetch, null as never))).toMatchObject({ name: 'TypeError', message: 'wrapFetch: options must be an object, got null' });
      expect(thrown(() => wrap(globalThis.fetch, { store: memoryStore(), tennant: 't' } as never))).toMatchObject({
        name: 'TypeError',
        message: 'wrapFetch: options has unknown keys tennant',
      });
      expect(thrown(() => wrap(globalThis.fetch, { store: memoryStore(), leaseMs: 5 }))).toMatchObject({ name: 'RangeError', message: expect.stringMatching(/^wrapFetch: option "leaseMs"/) as unknown });
    }
  });

  it('wrapFetch(f, { fetch: g }) is a TypeError saying fetch is given twice (the first argument used to win silently)', () => {
    const other = (async () => new Response('{}', { status: 201 })) as typeof globalThis.fetch;
    for (const wrap of [wrapFetch, browserEntry.wrapFetch]) {
      expect(thrown(() => wrap(globalThis.fetch, { store: memoryStore(), fetch: other } as never))).toMatchObject({
        name: 'TypeError',
        message: 'wrapFetch: fetch is given twice, as the first argument and as option "fetch"',
      });
      // an absent fetch, spelt undefined (a spread of createClient options), is no second fetch
      expect(typeof wrap(globalThis.fetch, { store: memoryStore(), fetch: undefined } as never)).toBe('function');
    }
  });
});
