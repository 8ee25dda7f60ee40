/**
 * A custom store object missing a method of the store contract (OnceStore: claim, get,
 * compareAndSet, list, purge, close, all required) is refused by createClient (and wrapFetch) with a
 * TypeError naming the missing methods, before anything is recorded or sent. It was accepted when it
 * had a `claim`, and failed later, far from its cause: `client.close()` rejected with
 * `StoreError "<name>: close failed: store[name] is not a function"`, a call's takeover or `recover()`
 * with the same for get/list, `client.purge()` for purge.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore, wrapFetch } from '../../src/index.js';
import type { OnceClientOptions, OnceStore } from '../../src/index.js';
import { thrown } from '../helpers/thrown.js';

const METHODS = ['claim', 'get', 'compareAndSet', 'list', 'purge', 'close'] as const;

let sends = 0;
const noFetch = (async () => {
  sends++;
  throw new Error('no network in store-check tests');
}) as typeof globalThis.fetch;

/** A memory store's methods but `without` these, as a plain object; `calls` counts what the client asked of it. */
function partial(without: readonly string[]): { store: OnceStore; calls: string[] } {
  const inner = memoryStore();
  const calls: string[] = [];
  const store: Record<string, unknown> = { name: 'partial' };
  for (const m of METHODS) {
    if (without.includes(m)) continue;
    store[m] = (...args: unknown[]) => {
      calls.push(m);
      return (inner[m] as (...a: unknown[]) => unknown)(...args);
    };
  }
  return { store: store as unknown as OnceStore, calls };
}

describe('a store missing a method of the contract', () => {
  it.each<[readonly string[], string]>([
    [['purge'], 'purge()'],
    [['list', 'close'], 'list(), close()'],
    [['get', 'compareAndSet'], 'get(), compareAndSet()'],
    [['compareAndSet', 'list'], 'compareAndSet(), list()'],
    [['get', 'compareAndSet', 'list', 'purge', 'close'], 'get(), compareAndSet(), list(), purge(), close()'],
  ])('without %j: createClient throws a TypeError naming %s, nothing asked of the store, nothing sent', (without, named) => {
    const { store, calls } = partial(without);
    const error = thrown(() => createClient({ store, fetch: noFetch }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(`createClient: option "store" is missing ${named} (see the store contract, OnceStore)`);
    expect(calls).toEqual([]);
    expect(sends).toBe(0);
  });

  it('a method that is there but not a function counts as missing', () => {
    const { store } = partial([]);
    const error = thrown(() => createClient({ store: { ...store, close: true } as unknown as OnceStore, fetch: noFetch }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/"store" is missing close\(\)/);
  });

  it('wrapFetch refuses it too, naming wrapFetch', () => {
    const { store } = partial(['purge']);
    const error = thrown(() => wrapFetch(noFetch, { store }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('wrapFetch: option "store" is missing purge() (see the store contract, OnceStore)');
  });

  it('an object with none of the methods (a config object) still gets the message that names the stores to pass', () => {
    const error = thrown(() => createClient({ store: { path: './x.db' } as unknown as OnceStore, fetch: noFetch }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/"store" must be a store object \(memoryStore\(\), sqliteStore\(\{ path \}\), …\), not a path/);
  });
});

describe('a store without a name', () => {
  // `name` is part of the contract: it starts every StoreError's message and, in browsers, names
  // the Web Locks of the store's records. Missing, it read "undefined: claim failed: …".
  it.each<[string, unknown]>([
    ['missing', undefined],
    ['empty', ''],
    ['not a string', 42],
  ])('%s: createClient and wrapFetch throw a TypeError saying so, nothing asked of the store', (_, name) => {
    const { store, calls } = partial([]);
    const nameless = { ...store, name } as unknown as OnceStore;
    if (name === undefined) delete (nameless as { name?: unknown }).name;
    const error = thrown(() => createClient({ store: nameless, fetch: noFetch }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe('createClient: option "store" needs a name, a non-empty string such as \'mystore:orders\' (see the store contract, OnceStore)');
    expect(thrown(() => wrapFetch(noFetch, { store: nameless })).message).toMatch(/^wrapFetch: option "store" needs a name/);
    expect(calls).toEqual([]);
  });
});

describe('stores that keep the contract are accepted', () => {
  it('the built-in memory store, a plain object with every method, and a class whose methods are on its prototype', async () => {
    class Over implements OnceStore {
      readonly name = 'over';
      private readonly inner = memoryStore();
      claim: OnceStore['claim'] = (r) => this.inner.claim(r);
      get(id: string) {
        return this.inner.get(id);
      }
      compareAndSet(...a: Parameters<OnceStore['compareAndSet']>) {
        return this.inner.compareAndSet(...a);
      }
      list(q?: Parameters<OnceStore['list']>[0]) {
        return this.inner.list(q);
      }
      purge(now: number) {
        return this.inner.purge(now);
      }
      close() {
        return this.inner.close();
      }
    }
    for (const store of [memoryStore(), partial([]).store, new Over()]) {
      const client = createClient({ store, fetch: noFetch } as OnceClientOptions);
      expect(await client.purge()).toBe(0);
      await client.close();
    }
  });
});
