/**
 * The page script of tabs.test.ts, bundled by esbuild for Chromium: what one tab does to the
 * IndexedDB store and the Web Locks that another tab must survive (racing compare-and-set on
 * its own connection, a lock held and never released, an upgrade of the database) and the
 * once-only POST the other tab makes meanwhile. Every function returns plain JSON.
 */
import { createClient, isOnceError } from '../../src/browser.js';
import { applyEvent, newRecord, recordId, type OperationRecord } from '../../src/operation/record.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { LOCK_PREFIX } from '../../src/web-locks.js';

/** What the Node side asks for. */
export interface TabCall {
  /** the provider's endpoint (same origin) */
  url: string;
  ref: string;
  dbName: string;
  inFlightWaitMs?: number;
  deadlineMs?: number;
  leaseMs?: number;
  /** the caller aborts after this many ms */
  abortAfterMs?: number;
  /** the page calls `client.close({ waitMs: 0 })` after this many ms (as on `pagehide`) */
  closeAfterMs?: number;
  /** register a lookup on the provider's /lookup */
  lookup?: boolean;
}

/** What a call reports back. */
export interface TabOutcome {
  ok: boolean;
  status?: number;
  error?: { name: string; code: string | undefined; message: string };
  events: string[];
  ms: number;
  /** Web Locks of this origin named after the call's record, right after the call ended */
  locks: { held: number; pending: number };
}

const SCOPE_ACTION = 'order';
/** The Web Lock of `ref`'s record in database `dbName`: named after the store and the record, as the engine names it. */
const lockName = (dbName: string, ref: string): string =>
  `${LOCK_PREFIX}${indexedDbStore({ dbName }).name} ${recordId({ tenant: 'tabs', action: SCOPE_ACTION, ref })}`;

/** One once-only POST with the browser entry (IndexedDB, Web Locks). */
async function post(call: TabCall): Promise<TabOutcome> {
  const events: string[] = [];
  const started = performance.now();
  const client = createClient({
    tenant: 'tabs',
    leaseMs: call.leaseMs ?? 30_000,
    ...(call.inFlightWaitMs === undefined ? {} : { inFlightWaitMs: call.inFlightWaitMs }),
    retry: { maxAttempts: 3, baseDelayMs: 20, maxDelayMs: 50, deadlineMs: call.deadlineMs ?? 25_000 },
    onEvent: (e: { type: string }) => events.push(e.type),
    store: indexedDbStore({ dbName: call.dbName }),
    lookups:
      call.lookup === true
        ? {
            [SCOPE_ACTION]: async ({ scope }: { scope: { ref: string } }): Promise<Response | null> => {
              const res = await fetch(`${new URL(call.url).origin}/lookup?ref=${encodeURIComponent(scope.ref)}`);
              if (res.status === 404) return null;
              if (!res.ok) throw new Error(`lookup failed with ${res.status}`);
              return res;
            },
          }
        : {},
  });
  const caller = new AbortController();
  const timer = call.abortAfterMs === undefined ? undefined : setTimeout(() => caller.abort(new Error('caller gave up')), call.abortAfterMs);
  const closer = call.closeAfterMs === undefined ? undefined : setTimeout(() => void client.close({ waitMs: 0 }), call.closeAfterMs);
  let outcome: Omit<TabOutcome, 'ms' | 'locks'>;
  try {
    const res = await client.fetch(call.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: call.ref }),
      signal: caller.signal,
      once: { action: SCOPE_ACTION, ref: call.ref },
    });
    await res.text();
    outcome = { ok: true, status: res.status, events };
  } catch (error) {
    const e = error as Error;
    outcome = { ok: false, error: { name: e.name, code: isOnceError(error) ? error.code : undefined, message: e.message }, events };
  } finally {
    clearTimeout(timer);
    clearTimeout(closer);
    await client.close();
  }
  const ms = Math.round(performance.now() - started);
  // (a third-party frame whose storage the browser blocks is refused the query too: SecurityError)
  // (and a tab without Web Locks has none to query)
  const none: LockManagerSnapshot = { held: [], pending: [] };
  const snapshot = navigator.locks === undefined ? none : await navigator.locks.query().catch(() => none);
  const name = lockName(call.dbName, call.ref);
  const locks = { held: (snapshot.held ?? []).filter((l) => l.name === name).length, pending: (snapshot.pending ?? []).filter((l) => l.name === name).length };
  return { ...outcome, ms, locks };
}

/** Starts a POST and leaves it running. */
function start(call: TabCall): void {
  void post(call);
}

/** Takes the Web Lock of `ref`'s record in `dbName` and never lets go: a tab hung in the middle of an operation. */
function holdLock(dbName: string, ref: string): Promise<void> {
  return new Promise<void>((granted) => {
    void navigator.locks.request(lockName(dbName, ref), () => {
      granted();
      return new Promise<never>(() => undefined);
    });
  });
}

/**
 * Takes the Web Lock of `ref`'s record in `dbName` with `steal: true` (as devtools or another library
 * may), holds it `holdMs`, then lets go.
 */
async function stealLock(dbName: string, ref: string, holdMs: number): Promise<void> {
  await navigator.locks.request(lockName(dbName, ref), { steal: true }, () => new Promise<void>((done) => setTimeout(done, holdMs)));
}

/**
 * Opens `dbName` (at its version), starts a readwrite transaction on oncefetch's records and keeps
 * the main thread busy `ms` inside that transaction's first callback: a tab hung in the middle of a
 * write, whose transaction every other tab's transaction on the store queues behind.
 */
function hangInTransaction(dbName: string, ms: number): Promise<string> {
  return new Promise<string>((resolve) => {
    const req = indexedDB.open(dbName);
    req.onsuccess = () => {
      const db = req.result;
      const tx = db.transaction('records', 'readwrite');
      const got = tx.objectStore('records').get('none');
      got.onsuccess = () => {
        const until = performance.now() + ms;
        while (performance.now() < until);
      };
      tx.oncomplete = () => {
        db.close();
        resolve('complete');
      };
    };
    req.onerror = () => resolve(`error ${String(req.error)}`);
  });
}

/**
 * Upgrades database `dbName` to `version` (as a newer app in another tab would), dropping oncefetch's
 * `state_updated` index when `dropIndex` (a layout this oncefetch cannot read); resolves with what happened.
 */
function upgrade(dbName: string, version: number, dropIndex = false): Promise<string> {
  return new Promise<string>((resolve) => {
    const req = indexedDB.open(dbName, version);
    if (dropIndex) req.onupgradeneeded = () => req.transaction!.objectStore('records').deleteIndex('state_updated');
    let blocked = false;
    req.onblocked = () => (blocked = true);
    req.onsuccess = () => {
      req.result.close();
      resolve(blocked ? 'upgraded after blocked' : 'upgraded');
    };
    req.onerror = () => resolve(`error ${String(req.error)}`);
  });
}

/** Deletes database `dbName` (as another tab of the site may, or its own code on logout); resolves with what happened. */
function deleteDatabase(dbName: string): Promise<string> {
  return new Promise<string>((resolve) => {
    const req = indexedDB.deleteDatabase(dbName);
    let blocked = false;
    req.onblocked = () => (blocked = true);
    req.onsuccess = () => resolve(blocked ? 'deleted after blocked' : 'deleted');
    req.onerror = () => resolve(`error ${String(req.error)}`);
  });
}

let seq = 0;
/**
 * `rounds` compare-and-set steps on one shared record from this tab's own store (its own
 * connection): read the record, write the next generation if still the one read. Returns how
 * many writes this tab won. Two tabs doing this at once must together win exactly as many
 * writes as the generation advanced: one more would be a lost update.
 */
async function casRace(dbName: string, id: string, rounds: number, groupCommit: boolean): Promise<{ won: number; lost: number }> {
  const store = indexedDbStore({ dbName, groupCommit });
  let won = 0;
  let lost = 0;
  try {
    for (let i = 0; i < rounds; i++) {
      // two steps of this tab in flight at once, as a page's concurrent calls would be
      const steps = [0, 1].map(async () => {
        const current = await store.get(id);
        if (current === undefined) throw new Error(`no record ${id}`);
        const next = applyEvent(current, { type: 'renew', leaseExpiresAt: current.updatedAt + 60_000 + ++seq }, current.updatedAt + 1, 'owner');
        const res = await store.compareAndSet(id, current.generation, next);
        if (res.ok) won++;
        else lost++;
      });
      await Promise.all(steps);
    }
  } finally {
    await store.close();
  }
  return { won, lost };
}

/** Creates the shared record of {@link casRace}; returns its id. */
async function casSetup(dbName: string, ref: string): Promise<string> {
  const store = indexedDbStore({ dbName });
  const record = newRecord({
    scope: { tenant: 'tabs', action: 'race', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    now: 1_000,
    leaseMs: 60_000,
    retentionMs: 1_000,
  });
  await store.claim(record);
  await store.close();
  return record.id;
}

/** The record of `ref` of {@link post} as stored now: its state and the classes of its attempts. */
async function stored(dbName: string, ref: string): Promise<{ state: string; attempts: (string | null)[] } | null> {
  const store = indexedDbStore({ dbName });
  try {
    const r = await store.get(recordId({ tenant: 'tabs', action: SCOPE_ACTION, ref }));
    return r === undefined ? null : { state: r.state, attempts: r.attempts.map((a) => a.class ?? null) };
  } finally {
    await store.close();
  }
}

/** The generation of a record now. */
async function generation(dbName: string, id: string): Promise<number | undefined> {
  const store = indexedDbStore({ dbName });
  try {
    return ((await store.get(id)) as OperationRecord | undefined)?.generation;
  } finally {
    await store.close();
  }
}

const api = { post, start, stored, holdLock, stealLock, hangInTransaction, upgrade, deleteDatabase, casRace, casSetup, generation };
declare global {
  interface Window {
    tabsTest: typeof api;
  }
}
window.tabsTest = api;
document.body.dataset['ready'] = 'true';
