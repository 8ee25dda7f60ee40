/**
 * The test page's script, bundled by esbuild for Chromium (with `vitest`
 * aliased to ./vitest-shim.ts). It exposes `window.oncefetchTest`, which the
 * Node side drives with `page.evaluate`. Every function returns plain JSON.
 */
import { createClient, isOnceError, REPLAYED_HEADER } from '../../src/browser.js';
import type { OnceClient, OnceEvent } from '../../src/browser.js';
import { createClientWith } from '../../src/client.js';
import { indexedDbStore } from '../../src/stores/indexeddb.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';
import { blockIdb, corruptIdbRecord, deleteIdb, freshDbName } from './idb-raw.js';
import { runRegistered, type CaseResult } from './vitest-shim.js';

/** Where the orders API is: another origin, reached with CORS. */
const api = new URLSearchParams(location.search).get('api') ?? location.origin;

/** What the Node side asks for. */
export interface OrderCall {
  ref: string;
  item: string;
  /** IndexedDB database of this test */
  dbName: string;
  leaseMs?: number;
  attemptTimeoutMs?: number;
  deadlineMs?: number;
  /** false: a client without Web Locks (store lease + compare-and-set alone) */
  locks?: boolean;
  /** register a lookup by ref @default true */
  lookup?: boolean;
}

/** What a call reports back. */
export type OrderOutcome =
  | { ok: true; status: number; order: { id: string; ref: string }; replayed: string | null; events: string[]; ms: number }
  | { ok: false; error: { name: string; code: string | undefined; message: string }; events: string[]; ms: number };

const lookupByRef = async ({ scope, signal }: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
  const res = await fetch(`${api}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`lookup failed with ${res.status}`);
  return res;
};

function client(call: OrderCall, events: string[]): OnceClient {
  const options = {
    tenant: 'shop',
    leaseMs: call.leaseMs ?? 30_000,
    retry: { attemptTimeoutMs: call.attemptTimeoutMs ?? 10_000, maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200, deadlineMs: call.deadlineMs ?? 25_000 },
    lookups: call.lookup === false ? {} : { 'create-order': lookupByRef },
    onEvent: (e: OnceEvent) => events.push(e.type),
    store: indexedDbStore({ dbName: call.dbName }),
  };
  if (call.locks === false) {
    // The browser defaults, minus Web Locks.
    return createClientWith(options, { store: () => options.store, fetch: () => (i, init) => fetch(i, init) });
  }
  return createClient(options);
}

/** Places one order with the once-only client; the shape of the page's "place order" button. */
async function placeOrder(call: OrderCall): Promise<OrderOutcome> {
  const events: string[] = [];
  const started = performance.now();
  const c = client(call, events);
  // Remembered so that a reload can find the order it was placing.
  sessionStorage.setItem('pending-order', JSON.stringify(call));
  try {
    const res = await c.fetch(`${api}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: call.ref, item: call.item }),
      once: { action: 'create-order', ref: call.ref },
    });
    const order = (await res.json()) as { id: string; ref: string };
    sessionStorage.removeItem('pending-order');
    return { ok: true, status: res.status, order, replayed: res.headers.get(REPLAYED_HEADER), events, ms: Math.round(performance.now() - started) };
  } catch (error) {
    const e = error as Error;
    return {
      ok: false,
      error: { name: e.name, code: isOnceError(error) ? error.code : undefined, message: e.message },
      events,
      ms: Math.round(performance.now() - started),
    };
  } finally {
    await c.close();
  }
}

/**
 * The order placed while its database is blocked (see `blockIdb`), alongside a bare store read of
 * that database; then, unblocked, the order placed again.
 */
async function placeWhileBlocked(call: OrderCall): Promise<{ blocked: OrderOutcome; read: { code: string | undefined; message: string; ms: number }; after: OrderOutcome }> {
  const setup = indexedDbStore({ dbName: call.dbName });
  await setup.get('none'); // creates the database
  await setup.close();
  const { release } = await blockIdb(call.dbName);
  const readBlocked = async (): Promise<{ code: string | undefined; message: string; ms: number }> => {
    const store = indexedDbStore({ dbName: call.dbName });
    const started = performance.now();
    const error = await store.get('none').then(() => new Error('the read went through'), (e: unknown) => e as Error);
    await store.close();
    return { code: isOnceError(error) ? error.code : undefined, message: error.message, ms: Math.round(performance.now() - started) };
  };
  const [blocked, read] = await Promise.all([placeOrder(call), readBlocked()]);
  await release();
  const { deadlineMs: _short, ...unhurried } = call;
  const after = await placeOrder(unhurried);
  return { blocked, read, after };
}

/** `client.explain()` and `client.recover()` on a ref's database: the diagnosis and the recovery report. */
async function explainAndRecover(call: OrderCall): Promise<{ code: string | undefined; state: string | undefined; recovered: unknown }> {
  const c = client(call, []);
  try {
    const x = await c.explain({ action: 'create-order', ref: call.ref });
    const recovered = await c.recover();
    return { code: x?.diagnosis.code, state: x?.state, recovered };
  } finally {
    await c.close();
  }
}

/** The order a previous page load was placing, if it did not finish. */
function pendingOrder(): OrderCall | null {
  const raw = sessionStorage.getItem('pending-order');
  return raw === null ? null : (JSON.parse(raw) as OrderCall);
}

/** The stored record of a ref, as the IndexedDB store holds it. */
async function record(dbName: string, ref: string): Promise<unknown> {
  const store = indexedDbStore({ dbName });
  try {
    return (await store.list({ limit: 1000 })).find((r) => r.ref === ref) ?? null;
  } finally {
    await store.close();
  }
}

describeStoreContract('indexedDbStore (Chromium)', {
  durable: true,
  setup() {
    const dbName = freshDbName('contract');
    return {
      open: () => indexedDbStore({ dbName }),
      corrupt: (id, raw) => corruptIdbRecord(dbName, 'records', id, raw),
      teardown: () => deleteIdb(dbName),
    };
  },
});

/** Runs the store contract suite on this browser's IndexedDB. */
function contract(): Promise<CaseResult[]> {
  return runRegistered();
}

const api_ = { placeOrder, placeWhileBlocked, explainAndRecover, pendingOrder, record, contract, hasWebLocks: () => 'locks' in navigator, isSecureContext: () => isSecureContext };
declare global {
  interface Window {
    oncefetchTest: typeof api_;
  }
}
window.oncefetchTest = api_;
document.body.dataset['ready'] = 'true';
