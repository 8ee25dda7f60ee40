/**
 * The IndexedDB store under fake-indexeddb: the same contract suite as memory
 * and SQLite (it runs again on real IndexedDB in headless Chromium, see
 * test/browser/), plus what is particular to IndexedDB.
 */
import 'fake-indexeddb/auto';
import { describe, expect, it } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { applyEvent, newRecord, type OperationRecord } from '../../src/operation/record.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';
import { corruptIdbRecord, deleteIdb, freshDbName, putRawRow } from '../browser/idb-raw.js';

describeStoreContract('indexedDbStore (fake-indexeddb)', {
  durable: true,
  setup() {
    const dbName = freshDbName();
    return {
      open: () => indexedDbStore({ dbName }),
      corrupt: (id, raw) => corruptIdbRecord(dbName, 'records', id, raw),
      teardown: () => deleteIdb(dbName),
    };
  },
});

describeStoreContract('indexedDbStore (custom store name, relaxed durability)', {
  durable: true,
  setup() {
    const dbName = freshDbName();
    return {
      open: () => indexedDbStore({ dbName, storeName: 'ops', durability: 'relaxed' }),
      corrupt: (id, raw) => corruptIdbRecord(dbName, 'ops', id, raw),
      teardown: () => deleteIdb(dbName),
    };
  },
});

let n = 0;
function sample(ref = `r${++n}`): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    now: 1_000,
    leaseMs: 100,
    retentionMs: 1_000,
  });
}

async function storeError(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isOnceError(outcome) && outcome.code === 'STORE_ERROR', `expected a StoreError, got ${String(outcome)}`).toBe(true);
  return outcome as Error;
}

describe('indexedDbStore', () => {
  it('rejects bad options with a TypeError naming the option', () => {
    expect(() => indexedDbStore({ dbName: '' })).toThrow(/"dbName"/);
    expect(() => indexedDbStore({ storeName: '' })).toThrow(/"storeName"/);
    expect(() => indexedDbStore({ durability: 'disk' as never })).toThrow(TypeError);
  });

  // Regression (adversarial run): a second storeName in an existing database failed on every call
  // with an IndexedDB NotFoundError; it now says what to do at once.
  it('a second storeName in an existing database: a StoreError that says to use another dbName', async () => {
    const dbName = freshDbName();
    const first = indexedDbStore({ dbName });
    expect(await first.get('none')).toBeUndefined();
    await first.close();
    const second = indexedDbStore({ dbName, storeName: 'other' });
    const error = await storeError(second.get('none'));
    expect(error.message).toMatch(/exists without an object store "other".*use another dbName/);
    await second.close();
    await deleteIdb(dbName);
  });

  // Regression (adversarial run in Chromium): in an opaque origin indexedDB.open throws at once;
  // inside the group commit's task that throw escaped and the call hung forever.
  it.each([true, false])('indexedDB.open throwing synchronously is a StoreError, never a hang (groupCommit %s)', async (groupCommit) => {
    const original = IDBFactory.prototype.open;
    IDBFactory.prototype.open = function () {
      throw new DOMException('access to the Indexed Database API is denied in this context', 'SecurityError');
    };
    try {
      const store = indexedDbStore({ dbName: freshDbName(), groupCommit });
      const error = await storeError(store.claim(sample()));
      expect(error.message).toMatch(/IndexedDB cannot be opened here \(SecurityError/);
      await store.close();
    } finally {
      IDBFactory.prototype.open = original;
    }
  });

  it('asks for strict durability on every write transaction by default, relaxed when told', async () => {
    const seen: Array<string | undefined> = [];
    const original = IDBDatabase.prototype.transaction;
    IDBDatabase.prototype.transaction = function (this: IDBDatabase, names, mode, options) {
      if (mode !== 'versionchange') seen.push(`${mode ?? 'readonly'}:${options?.durability ?? '-'}`);
      return original.call(this, names, mode, options);
    } as typeof original;
    try {
      const dbName = freshDbName();
      const strict = indexedDbStore({ dbName });
      const r = sample();
      await strict.claim(r);
      await strict.compareAndSet(r.id, r.generation, applyEvent(r, { type: 'release' }, 1_001, 'owner'));
      await strict.get(r.id);
      await strict.purge(0);
      await strict.close();
      const relaxed = indexedDbStore({ dbName, durability: 'relaxed' });
      await relaxed.claim(sample());
      await relaxed.close();
      await deleteIdb(dbName);
    } finally {
      IDBDatabase.prototype.transaction = original;
    }
    expect(seen).toEqual(['readwrite:strict', 'readwrite:strict', 'readonly:-', 'readwrite:strict', 'readwrite:relaxed']);
  });

  it('two stores on one database see each other at once (two tabs of one origin)', async () => {
    const dbName = freshDbName();
    const tabA = indexedDbStore({ dbName });
    const tabB = indexedDbStore({ dbName });
    const r = sample();
    const [a, b] = await Promise.all([tabA.claim(r), tabB.claim({ ...r, key: 'other-key' })]);
    expect([a.created, b.created].filter(Boolean)).toHaveLength(1);
    expect(a.record.key).toBe(b.record.key);
    const next = applyEvent(a.record, { type: 'release' }, 1_001, 'owner');
    const [ca, cb] = await Promise.all([
      tabA.compareAndSet(r.id, a.record.generation, next),
      tabB.compareAndSet(r.id, a.record.generation, next),
    ]);
    expect([ca.ok, cb.ok].filter(Boolean)).toHaveLength(1);
    expect(await tabB.get(r.id)).toEqual(next);
    await tabA.close();
    await tabB.close();
    await deleteIdb(dbName);
  });

  it('databases with other names are separate', async () => {
    const one = indexedDbStore({ dbName: freshDbName() });
    const two = indexedDbStore({ dbName: freshDbName() });
    const r = sample();
    await one.claim(r);
    expect(await two.get(r.id)).toBeUndefined();
    await one.close();
    await two.close();
  });

  it('an open store does not block deleting its database, and reconnects afterwards', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const r = sample();
    await store.claim(r);
    await deleteIdb(dbName, 1_000); // rejects when a connection does not let go
    expect(await store.get(r.id)).toBeUndefined();
    expect((await store.claim(r)).created).toBe(true);
    await store.close();
    await deleteIdb(dbName);
  });

  it('a foreign row (not written by oncefetch) is a StoreError for get, claim and list, never absent', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const r = sample();
    await store.claim(sample()); // creates the database
    await putRawRow(dbName, 'records', r.id, 'just a string');
    expect((await storeError(store.get(r.id))).message).toMatch(/not an oncefetch row/);
    await storeError(store.claim(r));
    await storeError(store.list());
    await store.close();
    await deleteIdb(dbName);
  });

  it('a database of the same name without our object store is a StoreError naming the store', async () => {
    const dbName = freshDbName();
    await new Promise<void>((resolve, reject) => {
      const req = indexedDB.open(dbName, 1);
      req.onupgradeneeded = () => req.result.createObjectStore('something-else');
      req.onsuccess = () => {
        req.result.close();
        resolve();
      };
      req.onerror = () => reject(req.error);
    });
    const store = indexedDbStore({ dbName });
    const error = await storeError(store.get('x'));
    expect(error.message).toContain(`indexeddb:${dbName}/records`);
    expect(error.message).toMatch(/exists without an object store "records"/);
    await store.close();
    await deleteIdb(dbName);
  });

  describe('group commit', () => {
    /** Counts readwrite transactions opened while `body` runs. */
    async function countWriteTransactions(body: () => Promise<void>): Promise<number> {
      let count = 0;
      const original = IDBDatabase.prototype.transaction;
      IDBDatabase.prototype.transaction = function (this: IDBDatabase, names, mode, options) {
        if (mode === 'readwrite') count++;
        return original.call(this, names, mode, options);
      } as typeof original;
      try {
        await body();
      } finally {
        IDBDatabase.prototype.transaction = original;
      }
      return count;
    }

    it('32 writes issued in one task share one transaction; with groupCommit: false, one each', async () => {
      const dbName = freshDbName();
      const grouped = indexedDbStore({ dbName });
      const separate = indexedDbStore({ dbName, groupCommit: false });
      const shared = await countWriteTransactions(async () => {
        const results = await Promise.all(Array.from({ length: 32 }, () => grouped.claim(sample())));
        expect(results.every((r) => r.created)).toBe(true);
      });
      const each = await countWriteTransactions(async () => {
        const results = await Promise.all(Array.from({ length: 32 }, () => separate.claim(sample())));
        expect(results.every((r) => r.created)).toBe(true);
      });
      expect(shared).toBe(1);
      expect(each).toBe(32);
      await grouped.close();
      await separate.close();
      await deleteIdb(dbName);
    });

    it('writes to one record in one batch apply in order: one claim wins, one compare-and-set wins', async () => {
      const dbName = freshDbName();
      const store = indexedDbStore({ dbName });
      const r = sample();
      const next = applyEvent(r, { type: 'attempt_started', attemptId: 'att-1' }, 1_001, 'owner');
      const rival = applyEvent(r, { type: 'cancel' }, 1_002, 'owner');
      const transactions = await countWriteTransactions(async () => {
        const [claimed, again, first, second] = await Promise.all([
          store.claim(r),
          store.claim({ ...r, key: 'another-key' }),
          store.compareAndSet(r.id, r.generation, next),
          store.compareAndSet(r.id, r.generation, rival),
        ]);
        expect(claimed.created).toBe(true);
        expect(again).toEqual({ created: false, record: r });
        expect(first).toEqual({ ok: true });
        expect(second).toEqual({ ok: false, current: next });
      });
      expect(transactions).toBe(1);
      expect(await store.get(r.id)).toEqual(next);
      await store.close();
      await deleteIdb(dbName);
    });

    it('a write settles only after its transaction committed: a second tab reads it at once', async () => {
      const dbName = freshDbName();
      const tabA = indexedDbStore({ dbName });
      const tabB = indexedDbStore({ dbName });
      const records = Array.from({ length: 8 }, () => sample());
      await Promise.all(
        records.map(async (r) => {
          await tabA.claim(r);
          expect(await tabB.get(r.id)).toEqual(r);
        }),
      );
      await tabA.close();
      await tabB.close();
      await deleteIdb(dbName);
    });

    it('a transaction that aborts fails every write of its batch, and none of them stands', async () => {
      const dbName = freshDbName();
      const store = indexedDbStore({ dbName });
      await store.claim(sample()); // creates the database
      const records = Array.from({ length: 4 }, () => sample());
      const poisoned = records[2]!.id;
      const original = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
        if (key === poisoned) throw new DOMException('simulated', 'QuotaExceededError');
        return original.call(this, value, key);
      };
      let outcomes: PromiseSettledResult<unknown>[];
      try {
        outcomes = await Promise.allSettled(records.map((r) => store.claim(r)));
      } finally {
        IDBObjectStore.prototype.put = original;
      }
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected');
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        expect(isOnceError(reason) && reason.code === 'STORE_ERROR').toBe(true);
      }
      for (const r of records) expect(await store.get(r.id)).toBeUndefined();
      expect((await store.claim(records[0]!)).created).toBe(true);
      await store.close();
      await deleteIdb(dbName);
    });

    it('close() commits writes already queued before it lets go of the connection', async () => {
      const dbName = freshDbName();
      const store = indexedDbStore({ dbName });
      await store.claim(sample()); // opens the connection
      const r = sample();
      const open = indexedDB.open.bind(indexedDB);
      let opened = 0;
      indexedDB.open = (...args: Parameters<IDBFactory['open']>) => {
        opened++;
        return open(...args);
      };
      try {
        const claimed = store.claim(r);
        await store.close();
        expect((await claimed).created).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 10));
      } finally {
        indexedDB.open = open;
      }
      expect(opened).toBe(0); // not reopened behind the caller's back after close()
      const reopened = indexedDbStore({ dbName });
      expect(await reopened.get(r.id)).toEqual(r);
      await reopened.close();
      await deleteIdb(dbName);
    });

    it('rejects a non-boolean groupCommit', () => {
      expect(() => indexedDbStore({ groupCommit: 'yes' as never })).toThrow(/"groupCommit"/);
    });
  });
});
