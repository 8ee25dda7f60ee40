/**
 * What the `client.close({ waitMs })` tests share (close-unsent, close-aborted-unsent,
 * close-graceful): a store whose write that opens an attempt is acknowledged late, how a promise
 * ended and when, and the record as the next client reads it.
 */
import { createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { writeOf } from './lossy-store.js';
import { wait } from './setup.js';

/**
 * A store over `inner` (SQLite, IndexedDB, PostgreSQL: see close-stores.ts) whose next writes that open an attempt (`claim+attempt`,
 * `attempt_started`: `plan.only` says which) are applied at once and acknowledged `plan.ackDelayMs`
 * later, while `plan.slow` counts down. `plan.pending`: such an acknowledgement is being held;
 * `plan.writesAfterClose`: the writes asked for after the store's close() (a compareAndSet by that name).
 */
export function slowAck(inner: OnceStore) {
  const plan = { slow: 1, only: ['claim+attempt', 'attempt_started'], ackDelayMs: 300, pending: false, closed: false, writesAfterClose: [] as string[] };
  const held = async <T>(label: string, write: () => Promise<T>): Promise<T> => {
    if (plan.closed) plan.writesAfterClose.push(label);
    const result = await write();
    if (plan.only.includes(label) && plan.slow > 0) {
      plan.slow--;
      plan.pending = true;
      await wait(plan.ackDelayMs);
      plan.pending = false;
    }
    return result;
  };
  const store: OnceStore = {
    name: inner.name,
    claim: (record) => held(writeOf(undefined, record), () => inner.claim(record)),
    // (after the close, the read that names the write fails first: the write is recorded by its method's name)
    compareAndSet: async (id, expected, next) => held(plan.closed ? 'compareAndSet' : writeOf(await inner.get(id), next), () => inner.compareAndSet(id, expected, next)),
    get: (id) => inner.get(id),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => {
      plan.closed = true;
      return inner.close();
    },
  };
  return { store, plan };
}

/** How a promise ended (a status, or an error's name), its value, and when (ms after `from`). */
export async function ended<T>(p: Promise<T>, from: number): Promise<{ outcome: string; value: unknown; at: number }> {
  const done = await p.then(
    (v) => ({ outcome: v instanceof Response ? String(v.status) : 'ok', value: v as unknown }),
    (error: unknown) => ({ outcome: error instanceof Error ? error.name : String(error), value: error }),
  );
  return { ...done, at: Math.round(performance.now() - from) };
}

/**
 * The record of `scope` as a new client on a store `open` returns reads it: its state, lease, key,
 * and each attempt's class (`open` while unfinished). The client is closed after.
 */
export async function storedAt(open: () => OnceStore, scope: { action: string; ref: string }, options: OnceClientOptions = {}) {
  const client: OnceClient = createClient({ store: open(), telemetry: false, ...options });
  try {
    const rec = await client.get(scope);
    return { state: rec?.state, lease: rec?.lease ?? null, attempts: rec?.attempts.map((a) => (a.finishedAt === null ? 'open' : a.class)), key: rec?.key };
  } finally {
    await client.close();
  }
}
