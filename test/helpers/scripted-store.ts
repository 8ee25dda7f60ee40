/**
 * A memory store whose compare-and-set follows a script per write once armed (the provider has
 * answered: the writes after the send), and a client that arms it. Used by
 * test/e2e/deadline-after-send.test.ts and test/e2e/after-send-background.test.ts.
 */
import { StoreError, createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { writeOf } from './lossy-store.js';

/**
 * What one write does: `ok`, `fail` (a StoreError at once, not applied), `hang` (never answers, never
 * applied: a statement lost on a dead connection), a positive number (applied after so many ms) or a
 * negative one (fails, not applied, after so many ms: a PostgreSQL query_timeout on a dead connection).
 */
export type Step = 'ok' | 'fail' | 'hang' | number;

/**
 * `inner` whose writes, named as {@link writeOf} names them, take their steps from `plan.steps[name]`
 * (in order, `ok` once used up) while `plan.armed`. `plan.log`: every write as `name:step`;
 * `plan.held`: the names of the writes given a step other than `ok`; `plan.afterClose`: writes asked
 * for after `close()`.
 */
export function scripted(inner: OnceStore) {
  const plan = { armed: false, steps: {} as Record<string, Step[]>, log: [] as string[], held: [] as string[], closed: false, afterClose: 0 };
  const store: OnceStore = {
    name: 'scripted',
    claim: (record) => inner.claim(record),
    compareAndSet: async (id, expected, next) => {
      if (plan.closed) plan.afterClose++;
      const label = writeOf(await inner.get(id), next);
      const step = plan.armed ? (plan.steps[label]?.shift() ?? 'ok') : 'ok';
      plan.log.push(`${label}:${String(step)}`);
      if (step !== 'ok') plan.held.push(label);
      if (step === 'hang') return new Promise<never>(() => undefined);
      if (step === 'fail') throw new StoreError(`scripted: ${label} failed (not applied)`);
      if (typeof step === 'number') {
        await new Promise((r) => setTimeout(r, Math.abs(step)));
        if (step < 0) throw new StoreError(`scripted: ${label} failed after ${-step} ms (not applied)`);
      }
      return inner.compareAndSet(id, expected, next);
    },
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

/**
 * A client on `store` whose transport arms `arm` (a scripted store's plan) once an answer is back
 * from the provider, with short leases and backoff and `deadlineMs`; closed by `cleanups`.
 */
export function armedClient(store: OnceStore, arm: { armed: boolean } | undefined, options: OnceClientOptions, setup: { deadlineMs: number; cleanups: (() => unknown)[] }): OnceClient {
  const client = createClient({
    store,
    settleMs: 0,
    leaseMs: 300,
    ...options,
    fetch: async (input, init) => {
      try {
        return await fetch(input, init);
      } finally {
        if (arm !== undefined) arm.armed = true;
      }
    },
    retry: { deadlineMs: setup.deadlineMs, baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry },
  });
  setup.cleanups.push(() => client.close().catch(() => undefined));
  return client;
}
