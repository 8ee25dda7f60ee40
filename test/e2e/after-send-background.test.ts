/**
 * What goes on in the background after the call's deadline (or its caller's abort) cut off a store
 * write after the send (bf5f710): the write and its follow-up (settle's tries, the lease's release)
 * must stop at `client.close()` and hold nothing open; the same client's later calls wait for it
 * while its lease is held; an answer in hand whose write fails is tried again; and never a second
 * send. Effects are counted at a loopback provider that does not dedupe (every POST is a new order).
 *
 * The store is a memory store whose compare-and-set, per write (named as `writeOf` names it), once
 * the provider has answered, follows a script: `ok`, `fail` (a StoreError at once, not applied),
 * `hang` (never answers), a positive number (applied after so many ms) or a negative one (fails,
 * not applied, after so many ms: a PostgreSQL query_timeout on a dead connection).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { writeOf } from '../helpers/lossy-store.js';
import { orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';
const DEADLINE_MS = 400;

type Step = 'ok' | 'fail' | 'hang' | number;

function scripted(inner: OnceStore) {
  const plan = { armed: false, steps: {} as Record<string, Step[]>, log: [] as string[], closed: false, afterClose: 0 };
  const store: OnceStore = {
    name: 'scripted',
    claim: (record) => inner.claim(record),
    compareAndSet: async (id, expected, next) => {
      if (plan.closed) plan.afterClose++;
      const label = writeOf(await inner.get(id), next);
      const step = plan.armed ? (plan.steps[label]?.shift() ?? 'ok') : 'ok';
      plan.log.push(`${label}:${String(step)}`);
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

let provider: Provider;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  provider = await startProvider({ ignoreKeys: true });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await provider.close();
});

/** A client whose transport arms the store's script once the provider has answered. */
function clientOn(store: OnceStore, arm: { armed: boolean } | undefined, options: OnceClientOptions = {}): OnceClient {
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
    retry: { deadlineMs: DEADLINE_MS, baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry },
  });
  cleanups.push(() => client.close().catch(() => undefined));
  return client;
}

function order(client: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal === undefined ? {} : { signal }), once: { action: ACTION, ref } });
}

/** How a call ended (its status, or its error's name) and after how many ms. */
async function timed(call: Promise<Response>): Promise<{ outcome: string; ms: number; value: unknown }> {
  const started = performance.now();
  const ended = await call.then(
    (res) => ({ outcome: String(res.status), value: res as unknown }),
    (error: unknown) => ({ outcome: error instanceof Error ? error.name : String(error), value: error }),
  );
  return { ...ended, ms: Math.round(performance.now() - started) };
}

const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;
const wait = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs `body` counting the intervals it starts that are still running when it returns. */
async function intervalsLeftBy(body: () => Promise<void>): Promise<number> {
  const live = new Set<unknown>();
  const { setInterval: realSet, clearInterval: realClear } = globalThis;
  globalThis.setInterval = ((...args: Parameters<typeof realSet>) => {
    const timer = realSet(...args);
    live.add(timer);
    return timer;
  }) as typeof realSet;
  globalThis.clearInterval = ((timer: Parameters<typeof realClear>[0]) => {
    live.delete(timer);
    realClear(timer);
  }) as typeof realClear;
  try {
    await body();
  } finally {
    globalThis.setInterval = realSet;
    globalThis.clearInterval = realClear;
  }
  for (const timer of live) realClear(timer as Parameters<typeof realClear>[0]);
  return live.size;
}

describe("client.close() while a cut-off answer's write is tried again in the background", () => {
  it('a try that never answers: close() leaves no lease-renewal timer running (it held the process open)', async () => {
    const { store, plan } = scripted(memoryStore());
    // settle: the first try fails, the next (under lease renewal) never answers; the deadline cuts it
    plan.steps['attempt_finished:success'] = ['fail', 'hang'];
    const ref = 'BG-close-hang';
    const left = await intervalsLeftBy(async () => {
      const a = clientOn(store, plan);
      const first = await timed(order(a, ref));
      expect(first.outcome).toBe('201');
      await a.close();
      await wait(300); // three ticks of the renewal timer (leaseMs / 3)
    });
    expect(left).toBe(0);
    expect(sent(ref)).toBe(1);
  });

  it('a try that fails after close(): the renewal queued behind it is not written to the closed store', async () => {
    const { store, plan } = scripted(memoryStore());
    plan.steps['attempt_finished:success'] = ['fail', -1_000];
    const ref = 'BG-close-late';
    const a = clientOn(store, plan);
    expect((await timed(order(a, ref))).outcome).toBe('201');
    await a.close();
    await wait(1_000);
    expect(plan.afterClose).toBe(0);
    expect(sent(ref)).toBe(1);
  });
});
