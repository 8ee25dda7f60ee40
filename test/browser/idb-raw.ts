/**
 * Raw IndexedDB access behind the store's back, for the contract suite's
 * `corrupt` hook and for cleanup. Runs under fake-indexeddb in Node and in
 * real Chromium alike.
 */

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('IndexedDB request failed'));
  });
}

/**
 * Replaces the stored JSON text of record `id` with `raw` on a second
 * connection, leaving the row's indexed columns (state, generation, …) alone,
 * as a damaged row would.
 */
export async function corruptIdbRecord(dbName: string, storeName: string, id: string, raw: string): Promise<void> {
  const db = await request(indexedDB.open(dbName));
  try {
    await new Promise<void>((resolve, reject) => {
      const tx = db.transaction(storeName, 'readwrite');
      const store = tx.objectStore(storeName);
      const got = store.get(id);
      got.onsuccess = () => {
        const row: unknown = got.result;
        if (typeof row !== 'object' || row === null) {
          tx.abort();
          return;
        }
        store.put({ ...row, data: raw }, id);
      };
      tx.oncomplete = () => resolve();
      tx.onabort = () => reject(tx.error ?? new Error(`no row ${id} to corrupt`));
    });
  } finally {
    db.close();
  }
}

/** Runs `write` on object store `storeName` in one readwrite transaction of a second connection. */
async function writeRaw(dbName: string, storeName: string, write: (store: IDBObjectStore) => void): Promise<void> {
  const db = await request(indexedDB.open(dbName));
  try {
    await new Promise<void>((resolve, reject) => {
      const tx = db.transaction(storeName, 'readwrite');
      write(tx.objectStore(storeName));
      tx.oncomplete = () => resolve();
      tx.onabort = () => reject(tx.error ?? new Error('write aborted'));
    });
  } finally {
    db.close();
  }
}

/** Writes `value` as the row of `id`, whatever it is (a foreign app's data). */
export function putRawRow(dbName: string, storeName: string, id: string, value: unknown): Promise<void> {
  return writeRaw(dbName, storeName, (store) => store.put(value, id));
}

/** Deletes every row of `storeName`, as clearing the site's data does (the database and its layout stay). */
export function clearRawRows(dbName: string, storeName: string): Promise<void> {
  return writeRaw(dbName, storeName, (store) => store.clear());
}

/**
 * Deletes a database. Open connections of our store let go on `versionchange`;
 * `blocked` only says that some are still finishing a transaction, so it is
 * fatal only when the deletion has not gone through `blockedMs` later.
 */
export async function deleteIdb(dbName: string, blockedMs = 5_000): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const req = indexedDB.deleteDatabase(dbName);
    req.onsuccess = () => {
      clearTimeout(timer);
      resolve();
    };
    req.onerror = () => {
      clearTimeout(timer);
      reject(req.error ?? new Error(`could not delete ${dbName}`));
    };
    req.onblocked = () => {
      timer ??= setTimeout(() => reject(new Error(`deleting ${dbName} stayed blocked by an open connection for ${blockedMs} ms`)), blockedMs);
    };
  });
}

/**
 * Blocks database `dbName` as another tab can: a connection that ignores `versionchange` (an older
 * copy of the app, say) holds up a `deleteDatabase`, and every later `open` of the database waits
 * behind that deletion without any event. Resolves once the deletion is blocked; `release` closes
 * that connection and waits for the deletion to go through.
 */
export async function blockIdb(dbName: string): Promise<{ release: () => Promise<void> }> {
  const stubborn = await request(indexedDB.open(dbName));
  let deleted!: Promise<void>;
  await new Promise<void>((blocked, reject) => {
    const req = indexedDB.deleteDatabase(dbName);
    deleted = new Promise<void>((resolve, fail) => {
      req.onsuccess = () => resolve();
      req.onerror = () => fail(req.error ?? new Error(`could not delete ${dbName}`));
    });
    deleted.then(() => reject(new Error(`deleting ${dbName} was not blocked`)), reject);
    req.onblocked = () => blocked();
  });
  return {
    release: async () => {
      stubborn.close();
      await deleted;
    },
  };
}

/**
 * Opens database `dbName` at `version` (made or upgraded to it, `upgrade` run in the upgrade) and
 * closes it: a database another program left at a version or without our object store.
 */
export async function openIdbAt(dbName: string, version: number, upgrade?: (db: IDBDatabase, tx: IDBTransaction) => void): Promise<void> {
  const req = indexedDB.open(dbName, version);
  if (upgrade !== undefined) req.onupgradeneeded = () => upgrade(req.result, req.transaction!);
  (await request(req)).close();
}

let counter = 0;
/** A database name no other test uses. */
export function freshDbName(prefix = 'oncefetch-test'): string {
  return `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
