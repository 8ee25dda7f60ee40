/**
 * Web Lock names are `oncefetch:` + the store's name + ' ' + the record id, so that clients of two
 * stores never wait on each other (src/engine/execute.ts, src/web-locks.ts; the store contract says
 * stores that do not share records should not share a name). Every `memoryStore()` was named
 * 'memory': two clients of two memory stores (two tabs, or two clients in one page) waited on each
 * other's lock for one scope although they share no record, up to `inFlightWaitMs`.
 * A fake LockManager (one holder per name), as in engine-timeouts.test.ts.
 */
import 'fake-indexeddb/auto';
import { describe, expect, it } from 'vitest';
import { createClientWith } from '../../src/client.js';
import { memoryStore } from '../../src/index.js';
import type { OnceStore } from '../../src/index.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { deleteIdb, freshDbName } from '../browser/idb-raw.js';
import { webLocks } from '../../src/web-locks.js';
import { fakeLocks } from '../helpers/fake-locks.js';

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const SCOPE = { action: 'create-order', ref: 'R3-L1' };
const post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ref":"R3-L1"}' };
const URL_ORDERS = 'http://127.0.0.1:9/orders';

/**
 * Two clients, one of `storeA` whose request for SCOPE never ends and one of `storeB`, under one fake
 * LockManager: `b`'s call of the same scope does not wait on `a`'s lock (201 in well under its
 * `inFlightWaitMs` of 1 s), and the two took locks of two names.
 */
async function expectNoWaitAcross(storeA: OnceStore, storeB: OnceStore): Promise<void> {
  const names: string[] = [];
  const exclusive = webLocks(fakeLocks(names));
  const client = (store: OnceStore, fetch: typeof globalThis.fetch, inFlightWaitMs?: number) =>
    createClientWith(
      { store, fetch, random: () => 0, ...(inFlightWaitMs === undefined ? {} : { inFlightWaitMs }), retry: { attemptTimeoutMs: 60_000, budget: false } },
      { store: () => store, fetch: () => never as typeof fetch, exclusive },
    );
  const a = client(storeA, () => never<Response>());
  const b = client(storeB, async () => new Response('{}', { status: 201 }), 1_000);
  try {
    void a.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch(() => undefined);
    while ((await a.get(SCOPE))?.state !== 'in_flight') await tick(5);
    const started = Date.now();
    const res = await b.fetch(URL_ORDERS, { ...post, once: SCOPE });
    const waited = Date.now() - started;
    expect(res.status).toBe(201);
    expect({ waited: waited < 500, names: new Set(names).size }).toEqual({ waited: true, names: 2 });
  } finally {
    await a.close({ waitMs: 0 });
    await b.close({ waitMs: 0 });
  }
}

describe('Web Lock names of memory stores', () => {
  it('two clients of two memory stores do not wait on each other for one scope', async () => {
    await expectNoWaitAcross(memoryStore(), memoryStore());
  });
});

// The IndexedDB store's name (which names its locks) was `indexeddb:${dbName}/${storeName}` for every
// pair: 'a/b' + 'c' and 'a' + 'b/c' both read 'indexeddb:a/b/c', so two unrelated stores waited on each
// other's lock (only a slowdown: their lease and compare-and-set stay apart). A pair without a '/' keeps
// its name to the character, so tabs of an older oncefetch still share its locks in a rolling deploy.
describe('Web Lock names of IndexedDB stores', () => {
  const nameOf = (dbName: string, storeName: string): string => indexedDbStore({ dbName, storeName }).name;

  it('a pair without a slash keeps its name exactly; pairs with one never share a name with another pair', () => {
    const plain = [
      ['oncefetch', 'records'],
      ['shop', 'ops'],
      ['a b', 'c d'],
      ['a%2Fb', 'c'],
      ['["x"]', '"y"'],
      ['indexeddb:a', ':b'],
      ['\\', 'é'],
      ['a', 'b c ["t","a","r"]'],
    ] as const;
    for (const [db, store] of plain) expect(nameOf(db, store)).toBe(`indexeddb:${db}/${store}`);
    const slashed = [
      ['a/b', 'c'],
      ['a', 'b/c'],
      ['a/', 'b'],
      ['a', '/b'],
      ['/', '/'],
      ['//', 'x'],
      ['x', '//'],
    ] as const;
    const names = [...plain, ...slashed].map(([db, store]) => nameOf(db, store));
    expect(new Set(names).size).toBe(names.length);
    // nor with any pair without a slash, whose name has exactly one
    for (const [db, store] of slashed) expect(nameOf(db, store).split('/').length).toBeGreaterThan(2);
  });

  it("two clients of the stores 'a/b' + 'c' and 'a' + 'b/c' do not wait on each other for one scope", async () => {
    const prefix = freshDbName();
    try {
      await expectNoWaitAcross(indexedDbStore({ dbName: `${prefix}/b`, storeName: 'c' }), indexedDbStore({ dbName: prefix, storeName: 'b/c' }));
    } finally {
      await deleteIdb(`${prefix}/b`);
      await deleteIdb(prefix);
    }
  });
});
