/**
 * The IndexedDB store under fake-indexeddb: the same contract suite as memory
 * and SQLite (it runs again on real IndexedDB in headless Chromium, see
 * test/browser/), plus what is particular to IndexedDB.
 */
import 'fake-indexeddb/auto';
import { describe, expect, it, vi } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { DeadlineExceededError, StoreError, createClient } from '../../src/index.js';
import { applyEvent, newRecord, recordId, type OperationRecord } from '../../src/operation/record.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';
import { blockIdb, clearRawRows, corruptIdbRecord, deleteIdb, freshDbName, openIdbAt, putRawRow } from '../browser/idb-raw.js';

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
function sample(ref = `r${++n}`, at: { now: number; leaseMs: number; retentionMs: number } = { now: 1_000, leaseMs: 100, retentionMs: 1_000 }): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    ...at,
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
      expect(error.message).toMatch(/storage unavailable here \(sandboxed or third-party frame, private mode, storage disabled\?\); nothing was sent \(SecurityError/);
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

  it("its connection closed under it (site data cleared): the rows it wrote with a live lease are put back where absent; a released, an expired, a finished row, one another writer took over and one written meanwhile are not; after close(), nothing", async () => {
    const dbName = freshDbName();
    const connections: IDBDatabase[] = [];
    const realOpen = indexedDB.open.bind(indexedDB);
    const open = vi.spyOn(indexedDB, 'open').mockImplementation((...args: Parameters<IDBFactory['open']>) => {
      const req = realOpen(...args);
      req.addEventListener('success', () => connections.push(req.result));
      return req;
    });
    const clearRows = (): Promise<void> => clearRawRows(dbName, 'records');
    /** What a browser does when the user clears site data: closes the connection, then fires `close` on it. */
    const forceClose = (): void => {
      const db = connections[0]!; // `store` opens first
      db.close();
      db.onclose?.call(db, new Event('close'));
    };
    try {
      const now = Date.now();
      const fresh = (ref: string, leaseMs = 60_000): OperationRecord => sample(ref, { now, leaseMs, retentionMs: 3_600_000 });
      const store = indexedDbStore({ dbName });
      const other = indexedDbStore({ dbName });
      const live = fresh('live');
      const sent = fresh('sent');
      const released = fresh('released');
      const expired = fresh('expired', -1);
      const finished = fresh('finished');
      const taken = fresh('taken');
      const meanwhile = fresh('meanwhile');
      for (const r of [live, sent, released, expired, finished, taken, meanwhile]) expect((await store.claim(r)).created).toBe(true);
      const step = (r: OperationRecord, event: Parameters<typeof applyEvent>[1]): OperationRecord => applyEvent(r, event, now, 'owner');
      const sentNext = step(sent, { type: 'attempt_started', attemptId: 'a-sent' });
      expect(await store.compareAndSet(sent.id, sent.generation, sentNext)).toEqual({ ok: true });
      expect(await store.compareAndSet(released.id, released.generation, step(released, { type: 'release' }))).toEqual({ ok: true });
      const started = step(finished, { type: 'attempt_started', attemptId: 'a-fin' });
      const done = step(started, { type: 'attempt_finished', class: 'success', status: 201, reason: 'created', result: null });
      expect(await store.compareAndSet(finished.id, finished.generation, started)).toEqual({ ok: true });
      expect(await store.compareAndSet(finished.id, started.generation, done)).toEqual({ ok: true });
      // Another tab moves `taken` on; our next write to it finds that out.
      const theirs = step(taken, { type: 'renew', leaseExpiresAt: now + 90_000 });
      expect(await other.compareAndSet(taken.id, taken.generation, theirs)).toEqual({ ok: true });
      expect((await store.compareAndSet(taken.id, taken.generation, step(taken, { type: 'release' }))).ok).toBe(false);

      await clearRows();
      const newer = { ...meanwhile, key: 'key-of-another-tab' };
      expect((await other.claim(newer)).created).toBe(true); // claimed afresh between the clear and the close
      forceClose();
      await vi.waitFor(async () => expect(await other.get(live.id)).toEqual(live), { timeout: 2_000, interval: 10 });
      expect(await other.get(sent.id)).toEqual(sentNext);
      expect(await other.get(meanwhile.id)).toEqual(newer);
      for (const gone of [released, expired, finished, taken]) expect(await other.get(gone.id), gone.ref).toBeUndefined();

      // Once closed, a close under it puts nothing back.
      await clearRows();
      await store.close();
      forceClose();
      await new Promise((r) => setTimeout(r, 100));
      expect(await other.list()).toEqual([]);
      await other.close();
    } finally {
      open.mockRestore();
      await deleteIdb(dbName);
    }
  });

  it("another tab deletes the database: the rows this store holds a live lease on are put back in the new database; a released one is not", async () => {
    const dbName = freshDbName();
    const now = Date.now();
    const store = indexedDbStore({ dbName });
    const live = sample('deleted-live', { now, leaseMs: 60_000, retentionMs: 3_600_000 });
    const released = sample('deleted-released', { now, leaseMs: 60_000, retentionMs: 3_600_000 });
    for (const r of [live, released]) expect((await store.claim(r)).created).toBe(true);
    expect(await store.compareAndSet(released.id, released.generation, applyEvent(released, { type: 'release' }, now, 'owner'))).toEqual({ ok: true });
    await deleteIdb(dbName, 1_000);
    const reader = indexedDbStore({ dbName });
    await vi.waitFor(async () => expect(await reader.get(live.id)).toEqual(live), { timeout: 2_000, interval: 10 });
    expect(await reader.get(released.id)).toBeUndefined();
    await reader.close();
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

  // Regression: a row that is not an oncefetch row skipped the tenant filter, so another tenant's
  // corrupt row was reported to this tenant's list (and recover()). As in the SQL stores, where the
  // tenant column filters every row, it is reported only to the tenant its key names.
  it("a foreign row is reported only to the tenant its key names; a key that names none, only to a list of all tenants", async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const mine = sample();
    await store.claim(mine); // tenant t1
    const theirs = recordId({ tenant: 't2', action: 'create-order', ref: 'x' });
    // `state` puts them in the state index, where recover()'s list finds them
    await putRawRow(dbName, 'records', theirs, { state: 'ambiguous', note: 'hand-edited' });
    await putRawRow(dbName, 'records', 'not-an-id', { state: 'ambiguous', note: 'another app' });
    const corrupt = async (query: { tenant?: string; states?: OperationRecord['state'][] | undefined }): Promise<string[]> => {
      const ids: string[] = [];
      await store.list({ ...query, onCorrupt: ({ id }) => ids.push(id) });
      return ids.sort();
    };
    for (const states of [undefined, ['pending', 'ambiguous'] as OperationRecord['state'][]]) {
      expect(await corrupt({ tenant: 't1', states })).toEqual([]);
      expect(await corrupt({ tenant: 't2', states })).toEqual([theirs]);
      expect(await corrupt({ states })).toEqual(['not-an-id', theirs].sort());
    }
    expect((await store.list({ tenant: 't1', limit: 1, onCorrupt: () => undefined })).map((r) => r.id)).toEqual([mine.id]);
    await store.close();
    await deleteIdb(dbName);
  });

  // Regression (review): list() decoded a row by the id it carries, not the key it is filed under, so
  // a copy of record A under B's key listed as A, twice; get(B) already rejected it.
  it('a row filed under another record\'s key is a StoreError for list too, as for get', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const a = sample();
    const b = sample();
    await store.claim(a);
    const { id, generation, state, tenant, expiresAt, updatedAt } = a;
    await putRawRow(dbName, 'records', b.id, { id, data: JSON.stringify(a), generation, state, tenant, leaseExpiresAt: a.lease?.expiresAt ?? null, expiresAt, updatedAt });
    expect((await storeError(store.get(b.id))).message).toMatch(/another id/);
    expect((await storeError(store.list())).message).toMatch(/another id/);
    await store.close();
    await deleteIdb(dbName);
  });

  it('a database of the same name without our object store is a StoreError naming the store', async () => {
    const dbName = freshDbName();
    await openIdbAt(dbName, 1, (db) => db.createObjectStore('something-else'));
    const store = indexedDbStore({ dbName });
    const error = await storeError(store.get('x'));
    expect(error.message).toContain(`indexeddb:${dbName}/records`);
    expect(error.message).toMatch(/exists without an object store "records"/);
    await store.close();
    // not upgraded to our version: another program's database is left as it was
    expect((await indexedDB.databases()).find((d) => d.name === dbName)?.version).toBe(1);
    await deleteIdb(dbName);
  });

  it('a database an older oncefetch left at version 1 (a state index) is upgraded in place: its records read and list in order', async () => {
    const dbName = freshDbName();
    await openIdbAt(dbName, 1, (db) => db.createObjectStore('records').createIndex('state', 'state'));
    const [young, old] = [sample(), sample()];
    const older = { ...old, createdAt: 500, updatedAt: 500 };
    for (const r of [young, older]) {
      const { id, generation, state, tenant, expiresAt, updatedAt } = r;
      await putRawRow(dbName, 'records', id, { id, data: JSON.stringify(r), generation, state, tenant, leaseExpiresAt: r.lease?.expiresAt ?? null, expiresAt, updatedAt });
    }
    const store = indexedDbStore({ dbName });
    expect(await store.get(young.id)).toEqual(young);
    expect((await store.list()).map((r) => r.id)).toEqual([older.id, young.id]);
    expect((await store.list({ states: ['pending'], limit: 1 })).map((r) => r.id)).toEqual([older.id]);
    await store.close();
    expect((await indexedDB.databases()).find((d) => d.name === dbName)?.version).toBe(2);
    await deleteIdb(dbName);
  });

  // Regression: a database a newer oncefetch had upgraded (a tab of the next deploy; an app rolled back)
  // failed every call of this one with "newer than version 2 … use another dbName": a new dbName
  // forgets the records of operations in progress, and their next calls send afresh.
  it('a database a newer oncefetch left at a higher version that keeps our object store and index: used at its version, its records read and written', async () => {
    const dbName = freshDbName();
    const before = indexedDbStore({ dbName });
    const earlier = sample();
    await before.claim(earlier);
    await before.close();
    await openIdbAt(dbName, 5, (_db, tx) => tx.objectStore('records').createIndex('by_tenant', 'tenant'));
    const store = indexedDbStore({ dbName });
    expect(await store.get(earlier.id)).toEqual(earlier);
    const later = sample();
    expect(await store.claim(later)).toMatchObject({ created: true });
    expect((await store.list()).map((r) => r.id)).toEqual([earlier.id, later.id]);
    await store.close();
    expect((await indexedDB.databases()).find((d) => d.name === dbName)?.version).toBe(5);
    await deleteIdb(dbName);
  });

  it('a database at a higher version whose layout keeps the index name on other fields: the StoreError naming the version (list would read it in a wrong order)', async () => {
    const dbName = freshDbName();
    const before = indexedDbStore({ dbName });
    await before.claim(sample());
    await before.close();
    await openIdbAt(dbName, 5, (_db, tx) => {
      const records = tx.objectStore('records');
      records.deleteIndex('state_updated');
      records.createIndex('state_updated', ['tenant', 'updatedAt']);
    });
    const store = indexedDbStore({ dbName });
    const error = await storeError(store.list());
    expect(error.message).toContain(`database "${dbName}" is at version 5, newer than version 2 this oncefetch opens`);
    await store.close();
    await deleteIdb(dbName);
  });

  it('a database at a higher version whose layout dropped our index: the StoreError naming the version, nothing read or written', async () => {
    const dbName = freshDbName();
    const before = indexedDbStore({ dbName });
    await before.claim(sample());
    await before.close();
    await openIdbAt(dbName, 5, (_db, tx) => tx.objectStore('records').deleteIndex('state_updated'));
    const store = indexedDbStore({ dbName });
    const error = await storeError(store.claim(sample()));
    expect(error.message).toContain(`database "${dbName}" is at version 5, newer than version 2 this oncefetch opens`);
    await store.close();
    await deleteIdb(dbName);
  });

  // Regression (review of 18122ae): the reopen without a version that follows a VersionError made the
  // database anew, empty, at version 1, when it had been deleted in between (another tab's deletion
  // queued between the two opens); every later call then failed for good with "exists without an
  // object store … use another dbName".
  it('a database at a higher version deleted between the VersionError and the reopen: not made anew at version 1; the next call opens it afresh', async () => {
    const dbName = freshDbName();
    await openIdbAt(dbName, 5, (db) => db.createObjectStore('records').createIndex('state_updated', ['state', 'updatedAt']));
    const factory = IDBFactory.prototype;
    const realOpen = factory.open;
    const spy = vi.spyOn(factory, 'open').mockImplementation(function (this: IDBFactory, name: string, version?: number) {
      if (version !== undefined) return realOpen.call(this, name, version);
      spy.mockRestore();
      this.deleteDatabase(name); // queued before the reopen, as another tab's deletion would be
      return realOpen.call(this, name);
    });
    const store = indexedDbStore({ dbName });
    await storeError(store.get('x'));
    expect((await indexedDB.databases()).find((d) => d.name === dbName)).toBeUndefined();
    expect(await store.claim(sample())).toMatchObject({ created: true });
    await store.close();
    expect((await indexedDB.databases()).find((d) => d.name === dbName)?.version).toBe(2);
    await deleteIdb(dbName);
  });

  // Regression: a database at a newer version (another program's, or a newer oncefetch's) failed every
  // call with IndexedDB's VersionError inside "updating record ... failed"; it now says what to do.
  it('a database at a newer version than ours: a StoreError naming the version and saying to use another dbName; the VersionError its cause', async () => {
    const dbName = freshDbName();
    await openIdbAt(dbName, 3);
    const store = indexedDbStore({ dbName });
    const error = await storeError(store.claim(sample()));
    expect(error.message).toContain(`indexeddb:${dbName}/records: database "${dbName}" is at version 3, newer than version 2 this oncefetch opens: another program or a newer oncefetch uses it; use another dbName`);
    expect((error.cause as Error).name).toBe('VersionError');
    await storeError(store.get('x')); // every call, not the first only
    await store.close();
    await deleteIdb(dbName);
  });

  it('a database at a newer version, in a browser without indexedDB.databases() (Firefox before 126): the same StoreError without the number', async () => {
    const dbName = freshDbName();
    await openIdbAt(dbName, 3);
    const databases = vi.spyOn(IDBFactory.prototype, 'databases').mockImplementation(() => {
      throw new TypeError('indexedDB.databases is not a function');
    });
    try {
      const store = indexedDbStore({ dbName });
      const error = await storeError(store.claim(sample()));
      expect(error.message).toMatch(/is at a version, newer than version 2 this oncefetch opens: .*use another dbName$/);
      await store.close();
    } finally {
      databases.mockRestore();
    }
    await deleteIdb(dbName);
  });

  // Regression (adversarial review): purge ran in one readwrite transaction over every terminal
  // record, and every write of every tab waited behind it: in Chromium, 20,000 terminal records
  // (10,000 expired) held a claim of another tab 14.1 s, lease renewals with it.
  it("purge over many records goes in short transactions: another connection's claim is not held until it ends", async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const records = Array.from({ length: 3_000 }, (_, i) => {
      const done = applyEvent(sample(), { type: 'cancel' }, 1_001, 'owner');
      return i % 3 === 0 ? { ...done, expiresAt: 3e12 } : done; // a third kept
    });
    for (const r of records) await store.claim(r);
    const other = indexedDbStore({ dbName });
    expect(await other.get('none')).toBeUndefined(); // its connection open
    const order: string[] = [];
    const purged = store.purge(2e12).then((n) => (order.push('purge'), n));
    await new Promise((r) => setImmediate(r));
    const claimed = other.claim(sample()).then((c) => (order.push('claim'), c));
    expect((await claimed).created).toBe(true);
    expect(await purged).toBe(2_000);
    expect(order).toEqual(['claim', 'purge']);
    expect((await store.list({ limit: 5_000 })).filter((r) => r.state === 'cancelled')).toHaveLength(1_000);
    await store.close();
    await other.close();
    await deleteIdb(dbName);
  });

  it('close() during a purge of many records: the purge stops between pages with a StoreError and opens nothing again', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    for (let i = 0; i < 1_000; i++) await store.claim(applyEvent(sample(), { type: 'cancel' }, 1_001, 'owner'));
    const open = indexedDB.open.bind(indexedDB);
    let opened = 0;
    indexedDB.open = (...args: Parameters<IDBFactory['open']>) => {
      opened++;
      return open(...args);
    };
    let error: unknown;
    try {
      const purged = store.purge(2e12).catch((e: unknown) => e);
      await store.close();
      error = await purged;
      expect(String(error)).toMatch(/purge called after close\(\)/);
      await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      indexedDB.open = open;
    }
    expect(opened).toBe(0);
    const reopened = indexedDbStore({ dbName });
    const left = (await reopened.list({ limit: 2_000 })).length;
    expect(left).toBeGreaterThan(0); // not all purged
    // the error says how many the pages before it removed (regression: the count was lost)
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).purged).toBe(1_000 - left);
    expect((error as StoreError).message).toContain(`purge had removed ${1_000 - left} expired records before this`);
    await reopened.close();
    await deleteIdb(dbName);
  });

  // Regression: a purge that failed on one page rejected with the page's error alone: the caller could
  // not tell how many records the pages before had removed. It also counted the rows a failing page
  // had deleted, which its transaction's abort put back.
  it('a purge whose third page fails: a StoreError carrying how many the two pages before removed, as many as are gone', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    await Promise.all(Array.from({ length: 900 }, () => store.claim(applyEvent(sample(), { type: 'cancel' }, 1_001, 'owner'))));
    const original = IDBObjectStore.prototype.delete;
    let deletes = 0;
    IDBObjectStore.prototype.delete = function (this: IDBObjectStore, key: IDBValidKey | IDBKeyRange) {
      if (++deletes === 600) throw new DOMException('simulated', 'UnknownError'); // 88 rows into the third page: it aborts
      return original.call(this, key);
    };
    let error: unknown;
    try {
      error = await store.purge(2e12).then(
        () => undefined,
        (e: unknown) => e,
      );
    } finally {
      IDBObjectStore.prototype.delete = original;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).message).toMatch(/: purging expired records failed \(AbortError.*\) \(purge had removed 512 expired records before this\)$/);
    expect((error as StoreError).purged).toBe(512);
    expect((error as StoreError).cause).toBeInstanceOf(DOMException);
    expect(await store.list({ limit: 1_000 })).toHaveLength(900 - 512);
    expect(await store.purge(2e12)).toBe(900 - 512);
    await store.close();
    await deleteIdb(dbName);
  });

  // Regression: a list() whose transaction was aborted mid-walk (no error of its own: tx.error is
  // null) rejected with "listing records failed (null)", its cause null.
  it('a list() whose transaction is aborted mid-walk: a StoreError saying the transaction was aborted, an AbortError its cause', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    await Promise.all(Array.from({ length: 5 }, () => store.claim(sample())));
    const original = IDBCursor.prototype.continue;
    let steps = 0;
    IDBCursor.prototype.continue = function (this: IDBCursor, key?: IDBValidKey) {
      original.call(this, key);
      if (++steps === 2) this.request.transaction!.abort(); // two rows into the walk
    };
    let error: unknown;
    try {
      error = await store.list({ limit: 5 }).then(
        () => undefined,
        (e: unknown) => e,
      );
    } finally {
      IDBCursor.prototype.continue = original;
    }
    expect(steps).toBe(2);
    expect(error).toBeInstanceOf(StoreError);
    const message = (error as StoreError).message;
    expect(message).not.toContain('(null)');
    expect(message).toMatch(/: listing records failed \(AbortError: the transaction was aborted\b.*\)$/);
    expect((error as StoreError).cause).toBeInstanceOf(DOMException);
    expect((error as StoreError).cause).toMatchObject({ name: 'AbortError' });
    expect(await store.list({ limit: 5 })).toHaveLength(5); // the store is fine afterwards
    await store.close();
    await deleteIdb(dbName);
  });

  // The same for the transactions of writes and of purge's pages: 'claiming record … failed (null)'.
  it('a write or a purge page whose transaction is aborted: a StoreError saying the transaction was aborted, not (null)', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    await store.claim(applyEvent(sample(), { type: 'cancel' }, 1_001, 'owner'));
    const put = IDBObjectStore.prototype.put;
    const del = IDBObjectStore.prototype.delete;
    const errors: unknown[] = [];
    try {
      IDBObjectStore.prototype.put = function (this: IDBObjectStore, value: unknown, key?: IDBValidKey) {
        const request = put.call(this, value, key);
        this.transaction.abort();
        return request;
      };
      errors.push(await store.claim(sample()).then(() => undefined, (e: unknown) => e));
      IDBObjectStore.prototype.put = put;
      IDBObjectStore.prototype.delete = function (this: IDBObjectStore, key: IDBValidKey | IDBKeyRange) {
        const request = del.call(this, key);
        this.transaction.abort();
        return request;
      };
      errors.push(await store.purge(2e12).then(() => undefined, (e: unknown) => e));
    } finally {
      IDBObjectStore.prototype.put = put;
      IDBObjectStore.prototype.delete = del;
    }
    const [claimed, purged] = errors as StoreError[];
    expect(claimed).toBeInstanceOf(StoreError);
    expect(claimed!.message).toMatch(/: claiming record .* failed \(AbortError: the transaction was aborted\b.*\)$/);
    expect(claimed!.cause).toMatchObject({ name: 'AbortError' });
    expect(purged).toBeInstanceOf(StoreError);
    expect(purged!.message).toMatch(/: purging expired records failed \(AbortError: the transaction was aborted\b.*\) \(purge had removed 0 expired records before this\)$/);
    expect(purged!.cause).toMatchObject({ name: 'AbortError' });
    expect(await store.purge(2e12)).toBe(1); // nothing was lost: the page is purged once nothing aborts it
    await store.close();
    await deleteIdb(dbName);
  });

  /**
   * Counts the rows `body` makes IndexedDB hand over with their values (each row a `getAll`
   * returns, each step of a cursor over values); keys alone are not counted.
   */
  async function countRowsRead(body: () => Promise<void>): Promise<number> {
    let rows = 0;
    const patched: Array<() => void> = [];
    const patch = (proto: IDBObjectStore | IDBIndex, method: 'getAll' | 'openCursor', count: (result: unknown) => number): void => {
      const original = proto[method] as (...args: unknown[]) => IDBRequest;
      (proto as unknown as Record<string, unknown>)[method] = function (this: unknown, ...args: unknown[]) {
        const request = original.apply(this, args);
        request.addEventListener('success', () => (rows += count(request.result)));
        return request;
      };
      patched.push(() => ((proto as unknown as Record<string, unknown>)[method] = original));
    };
    for (const proto of [IDBObjectStore.prototype, IDBIndex.prototype]) {
      patch(proto, 'getAll', (result) => (result as unknown[]).length);
      patch(proto, 'openCursor', (result) => (result === null ? 0 : 1));
    }
    try {
      await body();
    } finally {
      patched.forEach((restore) => restore());
    }
    return rows;
  }

  // Regression: list() read every row of the states asked for (every row of the store without
  // states) and sorted them, to return `limit` of them: 20,000 records for list({ limit: 10 }).
  it('list with a limit reads about `limit` rows, not every row of the states asked for', async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    const states = ['pending', 'ambiguous', 'cancelled'] as const;
    const records = Array.from({ length: 1_500 }, (_, i) => {
      const fresh = newRecord({
        scope: { tenant: `t${i % 2}`, action: 'create-order', ref: `m${i}` },
        key: `key-m${i}`,
        keySource: 'minted',
        fingerprint: 'c'.repeat(64),
        request: { method: 'POST', url: 'https://api.example.test/orders' },
        owner: 'owner',
        now: 1_000 + (i % 250), // ties: records i and i + 750 share state, tenant and updatedAt
        leaseMs: 100,
        retentionMs: 1_000,
      });
      const state = states[i % 3]!;
      if (state === 'pending') return fresh;
      const acquired = applyEvent(fresh, { type: 'acquire', owner: 'owner', leaseExpiresAt: fresh.updatedAt + 100 }, fresh.updatedAt, 'owner');
      if (state === 'cancelled') return applyEvent(acquired, { type: 'cancel' }, fresh.updatedAt, 'owner');
      const started = applyEvent(acquired, { type: 'attempt_started', attemptId: `att-${i}` }, fresh.updatedAt, 'owner');
      return applyEvent(started, { type: 'attempt_finished', class: 'ambiguous', status: 502, reason: 'bad gateway', result: null }, fresh.updatedAt, 'owner');
    });
    await Promise.all(records.map((r) => store.claim(r)));
    const order = (rs: OperationRecord[]): string[] =>
      [...rs].sort((a, b) => a.updatedAt - b.updatedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((r) => r.id);
    const queries = [
      { query: { limit: 10 }, expected: order(records).slice(0, 10) },
      { query: { states: ['ambiguous', 'pending'] as const, limit: 10 }, expected: order(records.filter((r) => r.state !== 'cancelled')).slice(0, 10) },
      { query: { states: ['cancelled'] as const, tenant: 't1', limit: 5 }, expected: order(records.filter((r) => r.state === 'cancelled' && r.tenant === 't1')).slice(0, 5) },
    ];
    for (const { query, expected } of queries) {
      let listed: OperationRecord[] = [];
      const read = await countRowsRead(async () => {
        listed = await store.list(query);
      });
      expect(listed.map((r) => r.id)).toEqual(expected);
      // the rows listed, the ones a filter skipped on the way, and one more ahead in each state
      expect(read, JSON.stringify(query)).toBeLessThanOrEqual(2 * query.limit + states.length);
    }
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

/**
 * Another tab deletes (or upgrades) the database while a connection that ignores `versionchange`
 * stays open: the deletion waits, and so does every `open` of the database behind it, without any
 * event. Regression: store calls awaited that open forever, and `client.fetch` with them, past its
 * deadline and its caller's abort.
 */
describe('indexedDbStore on a blocked database', () => {
  const URL_ORDERS = 'https://api.example.test/orders';
  const SCOPE = { action: 'create-order', ref: 'B-1' };
  const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };

  /** A transport that counts its sends and answers 201 (after `before`, when given). */
  function provider(before?: () => Promise<unknown>): { sends: () => number; fetch: typeof globalThis.fetch } {
    let sends = 0;
    const fetch = (async () => {
      sends++;
      await before?.();
      return new Response('{"id":"o-1"}', { status: 201 });
    }) as typeof globalThis.fetch;
    return { sends: () => sends, fetch };
  }

  /** Settles as `promise` does, or rejects when it is still pending after `ms`: a hang fails the test, it does not time it out. */
  function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms);
      promise.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  /** A store with its database created and its connection open, then blocked. */
  async function blockedStore(): Promise<{ dbName: string; store: ReturnType<typeof indexedDbStore>; release: () => Promise<void> }> {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    expect(await store.get('none')).toBeUndefined();
    const { release } = await blockIdb(dbName);
    return { dbName, store, release };
  }

  it('client.fetch with a short deadline ends at it with DeadlineExceededError, nothing sent; its claim, landing once unblocked, is closed unsent', async () => {
    const { dbName, store, release } = await blockedStore();
    const p = provider();
    const client = createClient({ store, fetch: p.fetch, telemetry: false, retry: { deadlineMs: 300 } });
    const started = Date.now();
    const error = await within(client.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e), 3_000, 'client.fetch with deadlineMs 300');
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(p.sends()).toBe(0);
    await release();
    // The claim still queued lands now; the record must not claim a send that never happened.
    let record = await client.get(SCOPE);
    for (let i = 0; i < 100 && record?.lease !== null; i++) {
      await new Promise((r) => setTimeout(r, 10));
      record = await client.get(SCOPE);
    }
    expect(record).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
    const res = await client.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect(res.status).toBe(201);
    expect(p.sends()).toBe(1);
    await client.close();
    await deleteIdb(dbName);
  });

  it("the caller's abort ends a call waiting on the blocked database, with the caller's reason", async () => {
    const { dbName, store, release } = await blockedStore();
    const p = provider();
    const client = createClient({ store, fetch: p.fetch, telemetry: false });
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    setTimeout(() => caller.abort(reason), 100);
    const error = await within(client.fetch(URL_ORDERS, { ...post, signal: caller.signal, once: SCOPE }).catch((e: unknown) => e), 3_000, 'an aborted client.fetch');
    expect(error).toBe(reason);
    expect(p.sends()).toBe(0);
    await release();
    await client.close();
    await deleteIdb(dbName);
  });

  it('store calls fail with a StoreError saying what to do once the open has waited 5 s; an open that succeeds later is closed at once', async () => {
    const { dbName, store, release } = await blockedStore();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const outcomes: unknown[] = ['pending', 'pending'];
    try {
      store.get('x').then((v) => (outcomes[0] = v), (e: unknown) => (outcomes[0] = e));
      store.claim(sample()).then((v) => (outcomes[1] = v), (e: unknown) => (outcomes[1] = e));
      await new Promise((r) => setImmediate(r)); // the claim's group commit asks for the connection too
      await vi.advanceTimersByTimeAsync(4_900);
      expect(outcomes).toEqual(['pending', 'pending']);
      await vi.advanceTimersByTimeAsync(200);
    } finally {
      vi.useRealTimers();
    }
    for (const outcome of outcomes) {
      expect(outcome).toBeInstanceOf(StoreError);
      expect((outcome as Error).message).toMatch(new RegExp(`^indexeddb:${dbName}/records: open blocked 5000 ms .*other tabs`));
    }
    await release();
    // the open we gave up on goes through after the deletion: it must not keep the database open
    await deleteIdb(dbName, 1_000);
    const r = sample();
    expect((await store.claim(r)).created).toBe(true);
    expect(await store.get(r.id)).toEqual(r);
    await store.close();
    await deleteIdb(dbName);
  });

  // (until 5ebac72 the call waited for the store: a StoreError after its 5 s bound, past the deadline)
  it("a response whose record write meets a blocked database: the 201 at the call's deadline (it was sent), and a call again while blocked sends nothing", async () => {
    const dbName = freshDbName();
    const store = indexedDbStore({ dbName });
    let release: (() => Promise<void>) | undefined;
    // the database gets blocked while the request is out: the response cannot be recorded
    const p = provider(async () => ({ release } = await blockIdb(dbName)));
    const client = createClient({ store, fetch: p.fetch, telemetry: false, leaseMs: 300, retry: { deadlineMs: 1_000 } });
    const started = Date.now();
    const res = await within(client.fetch(URL_ORDERS, { ...post, once: SCOPE }), 10_000, 'client.fetch');
    const tookMs = Date.now() - started;
    expect(res.status).toBe(201);
    expect(await res.text()).toBe('{"id":"o-1"}');
    expect(tookMs).toBeGreaterThanOrEqual(950);
    expect(tookMs).toBeLessThan(3_000);
    expect(p.sends()).toBe(1);
    // the write is still queued behind the blocked open: the same ref again must not send
    const again = await within(client.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e), 10_000, 'client.fetch again');
    expect(again).toBeInstanceOf(DeadlineExceededError);
    expect(p.sends()).toBe(1);
    // (release deletes the database, its records with it: what lands after that is not this test's)
    await release?.();
    await client.close();
    await deleteIdb(dbName);
  }, 15_000);
});
