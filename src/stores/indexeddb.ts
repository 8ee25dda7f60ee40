/**
 * The IndexedDB store, `oncefetch/indexeddb`: the default store in browsers
 * (DESIGN §6), shared by every tab and worker of an origin.
 *
 * Built on idb-keyval: its `promisifyRequest`, and its custom-store hook
 * (`UseStore`) for reads, with our own connection so that writes can ask for
 * `durability: 'strict'` and the database can carry the indexes that `list`
 * and `purge` use. `claim` and `compareAndSet` read and write inside **one**
 * readwrite transaction with no `await` in between — the same atomic
 * read-modify-write as idb-keyval's `update`, minus the write when the check
 * fails. IndexedDB runs readwrite transactions on one object store one after
 * the other, across tabs too, so the check and the write cannot interleave
 * with anyone else's.
 *
 * **Group commit.** Writes issued during one task of the page (16 concurrent
 * calls resuming after the same commit, say) run in order inside one
 * readwrite transaction, each with its own insert-if-absent or
 * compare-and-set, and every promise settles after that transaction commits
 * (with `durability: 'strict'`, after the flush to disk). One commit per batch
 * instead of one per write: about 3.6× the operations per second at 16 concurrent
 * operations in Chromium (`npm run bench`). A failing transaction fails every
 * write of it: nothing of it stands.
 *
 * @module
 */
import { get, promisifyRequest, type UseStore } from 'idb-keyval';
import { StoreError } from '../errors.js';
import { checkKeys } from '../options.js';
import type { OperationRecord } from '../operation/record.js';
import { TERMINAL_STATES, scopeOfId } from '../operation/record.js';
import type { ClaimResult, CompareAndSetResult, ListQuery, OnceStore } from './contract.js';
import {
  checkCompareAndSet,
  checkPurgeNow,
  closedError,
  decodeRecord,
  encodeRecord,
  purgeable,
  purgeFailed,
  readListed,
  resolveListQuery,
  type RecordColumns,
} from './common.js';
import { completed, firstInOrder } from './indexeddb-list.js';

/**
 * Options of {@link indexedDbStore}. Give each app on one origin its own
 * `dbName` when they must not see each other's operations.
 *
 * @example
 * ```ts
 * const store = indexedDbStore({ dbName: 'shop-checkout', durability: 'relaxed' })
 * ```
 */
export interface IndexedDbStoreOptions {
  /** the IndexedDB database @default 'oncefetch' */
  dbName?: string | undefined;
  /**
   * the object store inside it, created with the database: one oncefetch store per database (for
   * a second one, use another `dbName`) @default 'records'
   */
  storeName?: string | undefined;
  /**
   * Durability of every write transaction.
   * - `'strict'`: the browser flushes to disk before the write resolves; a resolved
   *   claim survives a crash of the operating system or a power loss.
   * - `'relaxed'`: about 1.5× faster in Chromium; survives a closed or crashed tab
   *   and a crashed browser, not a power loss.
   *
   * @default 'strict'
   */
  durability?: 'strict' | 'relaxed' | undefined;
  /**
   * Writes issued in the same task share one transaction (see the module
   * notes). `false`: one transaction per write, for comparison.
   *
   * @default true
   */
  groupCommit?: boolean | undefined;
}

/** One stored row: the record's JSON text plus the columns that queries filter on. */
interface Row extends RecordColumns {
  id: string;
  data: string;
}

/**
 * Version of the database layout (object store + indexes). 2: the `state_updated` index
 * replaces version 1's `state` index, so that `list` reads in its order and stops at `limit`.
 * A database at a higher version that still has the object store and that index is used as it is
 * (see `connect`): so a later layout keeps both and rows this version reads, or takes another name.
 */
const DB_VERSION = 2;
/** `[state, updatedAt]`, then the key: each state's rows in `list`'s order (see indexeddb-list.ts). */
const ORDER_INDEX = 'state_updated';
const ORDER_KEY = ['state', 'updatedAt'];
/** The store has {@link ORDER_INDEX} on {@link ORDER_KEY}, as `list` reads it (a newer layout's too: see `connect`). */
const ordered = (records: IDBObjectStore): boolean =>
  records.indexNames.contains(ORDER_INDEX) && String(records.index(ORDER_INDEX).keyPath) === String(ORDER_KEY);
/**
 * How long an open may wait. One queued behind another tab's deletion or upgrade of the database
 * gets no event while a connection holds that up; past this, calls fail with a StoreError.
 */
const OPEN_WAIT_MS = 5_000;
/** Rows `purge` reads per transaction: other writes wait for one page at most, not for the whole purge. */
const PURGE_PAGE = 256;

/** An error's name and message, for a StoreError's text. */
const detailOf = (cause: unknown): string => (cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause));

/**
 * Chromium's refusal of a frame's storage (a third-party frame when third-party storage is blocked, site
 * settings): the open fails with an UnknownError "The user denied permission to access the database."
 */
const refused = (cause: DOMException): boolean => cause.name === 'UnknownError' && /denied permission/i.test(cause.message);

const isRow = (value: unknown): value is Row =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Row).id === 'string' &&
  typeof (value as Row).generation === 'number' &&
  typeof (value as Row).state === 'string';

/**
 * Opens (creating when missing) an IndexedDB {@link OnceStore}. Nothing is
 * opened until the first call. Needs a secure context (https or localhost),
 * like the rest of oncefetch in a browser. An open still waiting after 5 s
 * (queued behind a deletion or upgrade of the database that a connection left
 * open, in another tab say, holds up) fails the calls waiting on it with a
 * StoreError; none of their writes happens later.
 *
 * @example
 * ```ts
 * import { createClient } from 'oncefetch';
 * import { indexedDbStore } from 'oncefetch/indexeddb';
 * const client = createClient({ tenant: 't1', store: indexedDbStore({ dbName: 'shop' }) });
 * ```
 */
export function indexedDbStore(options: IndexedDbStoreOptions = {}): OnceStore {
  checkKeys('indexedDbStore', 'options', options, ['dbName', 'storeName', 'durability', 'groupCommit']);
  const dbName = options.dbName ?? 'oncefetch';
  const storeName = options.storeName ?? 'records';
  const durability = options.durability ?? 'strict';
  const groupCommit = options.groupCommit ?? true;
  if (typeof dbName !== 'string' || dbName === '') throw new TypeError('indexedDbStore: option "dbName" must be a non-empty string');
  if (typeof storeName !== 'string' || storeName === '') throw new TypeError('indexedDbStore: option "storeName" must be a non-empty string');
  if (durability !== 'strict' && durability !== 'relaxed') throw new TypeError('indexedDbStore: option "durability" must be \'strict\' or \'relaxed\'');
  if (typeof groupCommit !== 'boolean') throw new TypeError('indexedDbStore: option "groupCommit" must be a boolean');
  // The name also names the store's Web Locks: no two pairs may share it. 'a/b' + 'c' and 'a' + 'b/c'
  // would (both 'indexeddb:a/b/c'), so a pair with a '/' is named by its JSON form, whose name keeps
  // that '/' after another (a pair without one has a single '/' in its name: never the same name).
  // A pair without a '/' keeps the name it always had: tabs of an older version share its locks.
  const name = dbName.includes('/') || storeName.includes('/') ? `indexeddb:/${JSON.stringify([dbName, storeName])}` : `indexeddb:${dbName}/${storeName}`;
  let closed = false;
  let connection: Promise<IDBDatabase> | undefined;
  /** Whether an open has succeeded: before one, no record was written, so no call has sent anything. */
  let everOpened = false;

  /**
   * An open refused in this context (a sandboxed or third-party frame, private mode, storage disabled:
   * a SecurityError or InvalidStateError, or no `indexedDB`) as a StoreError that says so.
   */
  const unavailable = (cause: unknown): StoreError =>
    new StoreError(
      `${name}: storage unavailable here (sandboxed or third-party frame, private mode, storage disabled?)${everOpened ? '' : '; nothing was sent'} (${detailOf(cause)})`,
      { cause },
    );

  /**
   * The open's VersionError (the database is at a higher version than ours) as a StoreError saying what
   * to do. Not every browser's message carries the version (Firefox's, fake-indexeddb's): ask for it.
   */
  const newerVersion = async (cause: DOMException): Promise<StoreError> => {
    let version;
    try {
      version = (await indexedDB.databases()).find((d) => d.name === dbName)?.version;
    } catch {
      // no indexedDB.databases() (Firefox before 126): the message goes without the number
    }
    const at = version === undefined ? 'a version' : `version ${version}`;
    return new StoreError(
      `${name}: database "${dbName}" is at ${at}, newer than version ${DB_VERSION} this oncefetch opens: another program or a newer oncefetch uses it; use another dbName`,
      { cause },
    );
  };

  const connect = (): Promise<IDBDatabase> => {
    if (connection !== undefined) return connection;
    let request: IDBOpenDBRequest;
    if (typeof indexedDB === 'undefined') {
      // Every browser and worker defines it (null where storage is disabled): this is Node, an edge runtime or a test DOM.
      return Promise.reject(
        new StoreError(
          `${name}: no IndexedDB in this JavaScript environment (Node, an edge runtime, or a test DOM such as jsdom or happy-dom)${everOpened ? '' : '; nothing was sent'}. ` +
            'Pass a store (store: memoryStore() keeps records only in this process or isolate: an edge runtime such as ' +
            'Cloudflare Workers needs one of your own on durable storage, D1 or a Durable Object, proven with ' +
            "describeStoreContract from oncefetch/testing), or in tests load an IndexedDB (import 'fake-indexeddb/auto')",
        ),
      );
    }
    try {
      request = indexedDB.open(dbName, DB_VERSION);
    } catch (cause) {
      // Synchronous refusals (an opaque origin's SecurityError, no indexedDB at all) reject, never escape.
      return Promise.reject(unavailable(cause));
    }
    const noStore = (): StoreError =>
      new StoreError(`${name}: database "${dbName}" exists without an object store "${storeName}"; each database holds one oncefetch store, so use another dbName`);
    let foreign = false;
    request.onupgradeneeded = (event) => {
      const db = request.result;
      const upgrade = request.transaction!;
      if (!db.objectStoreNames.contains(storeName)) {
        if (event.oldVersion > 0) {
          // Someone else's database: left as it was, at its version.
          foreign = true;
          upgrade.abort();
          return;
        }
        db.createObjectStore(storeName);
      }
      const records = upgrade.objectStore(storeName);
      if (records.indexNames.contains('state')) records.deleteIndex('state'); // version 1's
      if (!records.indexNames.contains(ORDER_INDEX)) records.createIndex(ORDER_INDEX, ORDER_KEY);
    };
    const got = promisifyRequest(request).catch(async (cause: unknown) => {
      if (foreign) throw noStore();
      if (!(cause instanceof DOMException)) throw cause;
      if (cause.name === 'SecurityError' || cause.name === 'InvalidStateError' || refused(cause)) throw unavailable(cause);
      if (cause.name !== 'VersionError') throw cause;
      // A newer oncefetch's layout (another tab's after a deploy, or before a rollback) that keeps what
      // this one reads is used at its version: these records, never a fresh database that forgets them.
      const reopen = indexedDB.open(dbName);
      // Deleted since: this open would make it anew, empty, at version 1, which every later open would
      // refuse as another program's. Left unmade: this call fails, the next one opens it afresh.
      reopen.onupgradeneeded = () => reopen.transaction!.abort();
      const db = await promisifyRequest(reopen).catch(() => undefined);
      if (db?.objectStoreNames.contains(storeName) === true && ordered(db.transaction(storeName).objectStore(storeName))) return db;
      db?.close();
      throw await newerVersion(cause);
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const opened = Promise.race([
      got.then((db) => {
        if (db.objectStoreNames.contains(storeName)) return db;
        db.close();
        throw noStore();
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new StoreError(`${name}: open blocked ${OPEN_WAIT_MS} ms by a deletion or upgrade that an open connection holds up; close or reload this site's other tabs`)),
          OPEN_WAIT_MS,
        );
      }),
    ]);
    connection = opened;
    opened.then(
      (db) => {
        clearTimeout(timer);
        everOpened = true;
        // Another tab deleting or upgrading the database must not be blocked by us:
        // let go, and reconnect on the next call. A deletion takes our leased rows: put them back.
        db.onversionchange = (event) => {
          db.close();
          if (connection === opened) connection = undefined;
          if (event.newVersion === null) restore();
        };
        db.onclose = () => {
          if (connection === opened) connection = undefined;
          restore();
        };
      },
      () => {
        clearTimeout(timer);
        if (connection === opened) connection = undefined;
        // An open we gave up on may succeed later: it must not hold the database for nobody.
        got.then((db) => db.close(), () => undefined);
      },
    );
    return opened;
  };

  /** idb-keyval's custom-store hook, on our connection, with our durability for writes. */
  const useStore: UseStore = (mode, callback) =>
    connect().then((db) =>
      callback(db.transaction(storeName, mode, mode === 'readwrite' ? { durability } : undefined).objectStore(storeName)),
    );

  /** An IndexedDB failure as a StoreError naming the store; our own errors as they are. */
  const asStoreError = (action: string, cause: unknown): unknown => {
    if (cause instanceof StoreError || cause instanceof TypeError || cause instanceof RangeError) return cause;
    return new StoreError(`${name}: ${action} failed (${detailOf(cause)})`, { cause });
  };

  /** Runs a store operation unless closed; every IndexedDB failure becomes a StoreError naming the store. */
  const guard = async <T>(method: string, action: string, body: () => Promise<T>): Promise<T> => {
    if (closed) throw closedError(name, method);
    try {
      return await body();
    } catch (cause) {
      throw asStoreError(action, cause);
    }
  };

  const read = (row: unknown, id: string): OperationRecord => {
    if (!isRow(row)) throw new StoreError(`${name} record ${id}: stored row is not an oncefetch row`);
    // The key asked for, not the row's own id: a row filed under another key is another record.
    return decodeRecord(row.data, id, row.generation, `${name} record ${id}`, { state: row.state, tenant: row.tenant, expiresAt: row.expiresAt });
  };

  /** A write waiting for the next transaction: read the row, then `put` it when `decide` returns one. */
  interface Pending {
    id: string;
    decide: (current: unknown) => Row | undefined;
    resolve: (current: unknown) => void;
    reject: (error: unknown) => void;
  }
  let queue: Pending[] = [];
  let scheduled = false;

  /**
   * Runs `batch` in one readwrite transaction, in order. All reads are issued
   * at once; their results arrive in the order issued, and a write sees the
   * rows written before it in this batch (`written`), so two writes to one
   * record behave as if they had run one after the other.
   */
  const commit = (batch: Pending[]): void => {
    const failAll = (error: unknown): void => batch.forEach((w) => w.reject(error));
    useStore('readwrite', (store) => {
      const written = new Map<string, unknown>();
      const read: unknown[] = [];
      batch.forEach((w, i) => {
        const got = store.get(w.id);
        got.onsuccess = () => {
          const current = written.has(w.id) ? written.get(w.id) : got.result;
          read[i] = current;
          const next = w.decide(current);
          if (next !== undefined) {
            store.put(next, w.id);
            written.set(w.id, next);
          }
        };
      });
      return completed(store.transaction).then(() => batch.forEach((w, i) => w.resolve(read[i])));
    }).catch(failAll);
  };

  const flush = (): void => {
    scheduled = false;
    const batch = queue;
    queue = [];
    if (batch.length > 0) commit(batch);
  };

  /**
   * The next task: `setImmediate` where there is one (Node, with fake-indexeddb),
   * else a MessageChannel message (browsers, where a timer may wait ≥4 ms).
   */
  const nextTask: (fn: () => void) => void = (() => {
    const immediate = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
    if (typeof immediate === 'function') return (fn) => void immediate(fn);
    if (typeof MessageChannel !== 'function') return (fn) => void setTimeout(fn, 0);
    let channel: MessageChannel | undefined;
    let next: (() => void) | undefined;
    return (fn) => {
      next = fn;
      if (channel === undefined) {
        channel = new MessageChannel();
        channel.port1.onmessage = () => next?.();
      }
      channel.port2.postMessage(0);
    };
  })();

  /**
   * Reads the row, then `put`s it only when `decide` returns a row, inside a
   * readwrite transaction (shared with the writes of the same task, or its
   * own with `groupCommit: false`). Resolves with the row that was read once
   * the transaction has committed (so a resolved write is durable).
   */
  const readModifyWrite = (id: string, decide: (current: unknown) => Row | undefined): Promise<unknown> =>
    // No IndexedDB (an edge runtime, whose setImmediate may throw): say that, not what nextTask hit. Only
    // when not connected: connect() then rejects; an open connection (indexedDB gone since) still serves.
    connection === undefined && typeof indexedDB === 'undefined' ? connect() : new Promise((resolve, reject) => {
      const write: Pending = { id, decide, resolve, reject };
      if (!groupCommit) return commit([write]);
      queue.push(write);
      if (!scheduled) {
        scheduled = true;
        nextTask(flush);
      }
    });

  /**
   * The rows this store object last wrote that hold a live lease, by id: requests of this page that may be on
   * the wire. A connection closed under us (site data cleared, a `Clear-Site-Data` header) or a deletion of
   * the database (another tab's `deleteDatabase`) took them; they are put back at once where absent, so that
   * a tab calling the ref meanwhile waits for this one and reconciles instead of claiming it afresh (the
   * engine's own write-back waits for its next write: up to `leaseMs`/3).
   */
  const owned = new Map<string, Row>();
  const remember = (row: Row): void => {
    // A finished record holds no lease either (applyEvent drops it on the way to a terminal state).
    if (row.leaseExpiresAt === null) owned.delete(row.id);
    else owned.set(row.id, row);
  };
  /** Writes `row` where no row of its id is; resolves to the row found instead, if any (a claim's insert). */
  const putIfAbsent = (row: Row): Promise<unknown> => readModifyWrite(row.id, (current) => (current === undefined ? row : undefined));
  const restore = (attempt = 0): void => {
    const now = Date.now();
    const writes: Promise<unknown>[] = [];
    for (const [id, row] of owned) {
      // As the engine's write-back: only a row whose lease and expiry are still ahead, and only where no row is.
      if (closed || row.leaseExpiresAt! <= now || row.expiresAt <= now) owned.delete(id);
      else writes.push(putIfAbsent(row));
    }
    // The clear may still run (Chromium fails an open during it with an AbortError): again, 20 ms on, then
    // twice as long each time, 6 times (1.26 s in all). Past that, the engine writes the record back on its
    // next write (a renewal, every `leaseMs`/3, or its answer).
    Promise.all(writes).then(
      () => undefined,
      () => {
        if (attempt < 6 && !closed) setTimeout(() => restore(attempt + 1), 20 << attempt);
      },
    );
  };

  return {
    name,

    claim(record: OperationRecord): Promise<ClaimResult> {
      return guard('claim', `claiming record ${record.id}`, async () => {
        const { data, columns } = encodeRecord(record, 'claim');
        const row = { id: record.id, data, ...columns };
        const existing = await putIfAbsent(row);
        if (existing !== undefined) return { created: false, record: read(existing, record.id) };
        remember(row);
        return { created: true, record: JSON.parse(data) as OperationRecord };
      });
    },

    get(id: string): Promise<OperationRecord | undefined> {
      return guard('get', `reading record ${id}`, async () => {
        const row = await get<unknown>(id, useStore);
        return row === undefined ? undefined : read(row, id);
      });
    },

    compareAndSet(id: string, expectedGeneration: number, next: OperationRecord): Promise<CompareAndSetResult> {
      return guard('compareAndSet', `updating record ${id}`, async (): Promise<CompareAndSetResult> => {
        checkCompareAndSet(id, expectedGeneration, next);
        const { data, columns } = encodeRecord(next, 'compareAndSet');
        const row = { id, data, ...columns };
        let written = false;
        // Like SQLite's `UPDATE … WHERE generation = ?`, the check uses the row's column, not its text.
        const current = await readModifyWrite(id, (stored) => {
          if (!isRow(stored) || stored.generation !== expectedGeneration) return undefined;
          written = true;
          return row;
        });
        if (written) {
          remember(row);
          return { ok: true };
        }
        owned.delete(id); // moved on without us: no longer ours to put back
        return { ok: false, current: current === undefined ? undefined : read(current, id) };
      });
    },

    list(query?: ListQuery): Promise<OperationRecord[]> {
      return guard('list', 'listing records', async () => {
        const q = resolveListQuery(query);
        // A row that is not ours has no tenant column: the key it is filed under names its tenant (a key
        // that names none, no tenant's). Listed, reading it rejects; it sorts first where it has no place.
        const selects = (key: string, row: unknown): boolean =>
          (q.tenant === undefined || (isRow(row) ? row.tenant : scopeOfId(key)?.tenant) === q.tenant) &&
          !(isRow(row) && q.leaseExpiredBefore !== undefined && row.leaseExpiresAt !== null && !(row.leaseExpiresAt < q.leaseExpiredBefore));
        const rows = await useStore('readonly', (store) =>
          firstInOrder(store, ORDER_INDEX, q, selects, (row) => (isRow(row) ? row.updatedAt : -Infinity)),
        );
        return readListed(rows, q, ([key]) => key, ([key, row]) => read(row, key));
      });
    },

    purge(now: number): Promise<number> {
      return guard('purge', 'purging expired records', async () => {
        checkPurgeNow(now);
        // Page by page in key order, each page read and purged in one short readwrite transaction:
        // a row is deleted only as that transaction read it, and every tab's writes go between two
        // pages (one transaction over 20,000 records held them 14 s in Chromium).
        let count = 0; // in pages that committed: a page whose transaction fails deletes nothing
        try {
          for (let after: IDBValidKey | undefined, full = true; full; ) {
            if (closed) throw closedError(name, 'purge');
            const range = after === undefined ? null : IDBKeyRange.lowerBound(after, true);
            let deleted = 0;
            const keys = await useStore('readwrite', (store) => {
              const listed = store.getAllKeys(range, PURGE_PAGE);
              const got = store.getAll(range, PURGE_PAGE);
              got.onsuccess = () => {
                got.result.forEach((row: unknown, i) => {
                  const key = listed.result[i]!;
                  // Only a row that reads as the expired terminal record its columns say: a hand-edited
                  // column never deletes a live record, and nothing deletes a row it cannot read.
                  if (isRow(row) && TERMINAL_STATES.includes(row.state) && row.expiresAt < now && purgeable(row, (r) => read(r, String(key)), now)) {
                    store.delete(key);
                    deleted++;
                  }
                });
              };
              return completed(store.transaction).then(() => listed.result);
            });
            count += deleted;
            full = keys.length === PURGE_PAGE;
            after = keys[keys.length - 1];
          }
        } catch (error) {
          throw purgeFailed(asStoreError('purging expired records', error), count);
        }
        return count;
      });
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      flush(); // writes already queued still get their transaction, on this connection
      const open = connection;
      connection = undefined;
      // close() waits for running transactions to finish before the connection goes.
      if (open !== undefined) (await open.catch(() => undefined))?.close();
    },
  };
}
