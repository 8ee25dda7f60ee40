/**
 * Runs in headless Chromium (bundled by bench/browser.ts): real IndexedDB,
 * 16 concurrent operations, each a claim (insert-if-absent) and then a
 * compare-and-set of the result — what a once-only call writes — with strict
 * durability, through oncefetch's `indexedDbStore()` two ways:
 *
 * - `per-op`: `groupCommit: false`, one readwrite transaction per write;
 * - `grouped`: the default, every write issued in the same task joins one
 *   transaction (group commit), each keeping its own insert-if-absent / CAS.
 *
 * Results go to `window.__bench`.
 */
import { applyEvent, newRecord, type OperationRecord } from '../src/operation/record.js';
import type { OnceStore } from '../src/stores/contract.js';
import { indexedDbStore } from '../src/stores/indexeddb.js';

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
  const stamp = Date.now();
  const stores: Record<string, OnceStore> = {
    'per-op': indexedDbStore({ dbName: `bench-per-op-${stamp}`, groupCommit: false }),
    grouped: indexedDbStore({ dbName: `bench-grouped-${stamp}` }),
  };
  const ways: Record<string, (i: number) => Promise<void>> = {};
  for (const [name, store] of Object.entries(stores)) {
    ways[name] = async (i) => {
      const [started, done] = records(i, `${name}-${performance.now()}`);
      if (!(await store.claim(started)).created) throw new Error('claim lost');
      if (!(await store.compareAndSet(started.id, started.generation, done)).ok) throw new Error('cas lost');
    };
  }
  const out: Record<string, number[]> = { 'per-op': [], grouped: [] };
  for (const op of Object.values(ways)) await load(op, concurrency, 300); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (const name of Object.keys(ways)) out[name]!.push(await load(ways[name]!, concurrency, ms));
  }
  for (const store of Object.values(stores)) await store.close();
  return out;
}

declare global {
  interface Window {
    __runBench: (concurrency: number, ms: number, rounds: number) => Promise<Record<string, number[]>>;
  }
}
window.__runBench = run;
