/**
 * Runs in headless Chromium (bundled by bench/browser.ts): real IndexedDB,
 * 16 concurrent operations, each a claim (insert-if-absent) and then a
 * compare-and-set of the result — what a once-only call writes — with strict
 * durability. Three ways:
 *
 * - `per-op`: one readwrite transaction per write (what a store without
 *   grouping does);
 * - `grouped`: every write issued in the same task joins one transaction
 *   (group commit), each keeping its own insert-if-absent / CAS check;
 * - `store`: oncefetch's `indexedDbStore()` as it is in src/stores/indexeddb.ts.
 *
 * Results go to `window.__bench`.
 */
import { applyEvent, newRecord, type OperationRecord } from '../src/operation/record.js';
import { indexedDbStore } from '../src/stores/indexeddb.js';

interface Row {
  id: string;
  generation: number;
  state: string;
  data: string;
}

type Write = { kind: 'claim'; row: Row } | { kind: 'cas'; row: Row; expected: number };

const STORE = 'records';

function openDb(name: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE, { keyPath: 'id' });
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new Error('open failed'));
  });
}

/** Applies one write inside `store`; calls `done(ok)` when decided. */
function apply(store: IDBObjectStore, w: Write, done: (ok: boolean) => void): void {
  const got = store.get(w.row.id);
  got.onsuccess = () => {
    const current = got.result as Row | undefined;
    const ok = w.kind === 'claim' ? current === undefined : current !== undefined && current.generation === w.expected;
    if (ok) store.put(w.row);
    done(ok);
  };
}

/** One transaction per write. */
function perOp(db: IDBDatabase): (w: Write) => Promise<boolean> {
  return (w) =>
    new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
      let ok = false;
      apply(tx.objectStore(STORE), w, (r) => (ok = r));
      tx.oncomplete = () => resolve(ok);
      tx.onabort = () => reject(tx.error ?? new Error('aborted'));
    });
}

/** Group commit: writes issued in the same task share one transaction; each resolves after it commits. */
function grouped(db: IDBDatabase): (w: Write) => Promise<boolean> {
  let queue: Array<{ w: Write; resolve: (ok: boolean) => void; reject: (e: unknown) => void }> = [];
  const channel = new MessageChannel();
  let scheduled = false;
  channel.port1.onmessage = () => {
    scheduled = false;
    const batch = queue;
    queue = [];
    const tx = db.transaction(STORE, 'readwrite', { durability: 'strict' });
    const store = tx.objectStore(STORE);
    const results: boolean[] = [];
    batch.forEach((item, i) => apply(store, item.w, (ok) => (results[i] = ok)));
    tx.oncomplete = () => batch.forEach((item, i) => item.resolve(results[i] ?? false));
    tx.onabort = () => batch.forEach((item) => item.reject(tx.error ?? new Error('aborted')));
  };
  return (w) =>
    new Promise((resolve, reject) => {
      queue.push({ w, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        channel.port2.postMessage(0); // a task, not a clamped timer
      }
    });
}

function records(i: number, tag: string): [OperationRecord, OperationRecord] {
  const fresh = newRecord({
    scope: { tenant: 'bench', action: 'create-order', ref: `${tag}-${i}` },
    key: crypto.randomUUID(),
    keySource: 'minted',
    fingerprint: 'f'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'page',
    now: Date.now(),
    leaseMs: 30_000,
    retentionMs: 86_400_000,
  });
  const started = applyEvent(fresh, { type: 'attempt_started', attemptId: crypto.randomUUID() }, Date.now(), 'page');
  const done = applyEvent(
    started,
    {
      type: 'attempt_finished',
      class: 'success',
      status: 201,
      reason: 'HTTP 201',
      result: { kind: 'response', source: 'attempt', status: 201, statusText: 'Created', headers: [['content-type', 'application/json']], body: btoa('{"id":"o-1"}'), bodyTruncated: false },
    },
    Date.now(),
    'page',
  );
  return [started, done];
}

const row = (r: OperationRecord): Row => ({ id: r.id, generation: r.generation, state: r.state, data: JSON.stringify(r) });

/** `concurrency` workers, each: claim, then CAS to the result, until `ms` pass. Operations per second. */
async function load(op: (i: number) => Promise<void>, concurrency: number, ms: number): Promise<number> {
  let n = 0;
  let seq = 0;
  const until = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await op(seq++);
        n++;
      }
    }),
  );
  return n / ((performance.now() - started) / 1000);
}

async function run(concurrency: number, ms: number, rounds: number): Promise<Record<string, number[]>> {
  const raw = await openDb(`bench-raw-${Date.now()}`);
  const store = indexedDbStore({ dbName: `bench-store-${Date.now()}` });
  const ways: Record<string, (i: number) => Promise<void>> = {};
  for (const [name, write] of [['per-op', perOp(raw)], ['grouped', grouped(raw)]] as const) {
    ways[name] = async (i) => {
      const [started, done] = records(i, `${name}-${performance.now()}`);
      if (!(await write({ kind: 'claim', row: row(started) }))) throw new Error('claim lost');
      if (!(await write({ kind: 'cas', row: row(done), expected: started.generation }))) throw new Error('cas lost');
    };
  }
  ways['store'] = async (i) => {
    const [started, done] = records(i, `store-${performance.now()}`);
    if (!(await store.claim(started)).created) throw new Error('claim lost');
    if (!(await store.compareAndSet(started.id, started.generation, done)).ok) throw new Error('cas lost');
  };
  const out: Record<string, number[]> = { 'per-op': [], grouped: [], store: [] };
  for (const op of Object.values(ways)) await load(op, concurrency, 300); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const name of Object.keys(ways)) out[name]!.push(await load(ways[name]!, concurrency, ms));
  }
  raw.close();
  await store.close();
  return out;
}

declare global {
  interface Window {
    __runBench: (concurrency: number, ms: number, rounds: number) => Promise<Record<string, number[]>>;
  }
}
window.__runBench = run;
