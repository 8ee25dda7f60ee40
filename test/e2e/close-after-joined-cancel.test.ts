/**
 * `client.close()` right after a joined call's cancel. A second call of the same scope joins a running
 * one, then its caller aborts its `once.signal`: that starts a cancel write in the background
 * (`Engine.requestCancel`: a read of the record, then a compare-and-set), as `client.cancel()` does.
 * When the call it joined ends without a step after the cancel (its last attempt refused, 503, with
 * `maxAttempts: 1`: RetriesExhaustedError, the record `pending`), that background write is the only
 * one to record the cancel. Review: nothing tracked it; a close once both calls had ended closed the
 * store under it, its compare-and-set failed "store closed" (swallowed) and the cancel went
 * unrecorded: the record stayed `pending`, resumable, and the next call sent the order.
 *
 * The store: memory, its reads slowed (a pool under load, a far replica) while `slowReads`; closing it
 * makes every later operation fail as a closed store does (and counted), its data kept for the test to
 * read. Effects are counted at a loopback provider that does not dedupe.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OperationCancelledError, RetriesExhaustedError, StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit, until, wait } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

/** A memory store whose reads take `plan.readMs` while `plan.slowReads`, and which fails (and counts) every operation after its close. */
function slowReads() {
  const inner = memoryStore();
  const plan = { slowReads: false, readMs: 300, closed: false, afterClose: [] as string[] };
  const open = (method: string): void => {
    if (!plan.closed) return;
    plan.afterClose.push(method);
    throw new StoreError(`memory: store closed (${method})`);
  };
  const store: OnceStore = {
    name: inner.name,
    claim: async (record) => (open('claim'), inner.claim(record)),
    get: async (id) => {
      open('get');
      if (plan.slowReads) await wait(plan.readMs);
      return inner.get(id);
    },
    compareAndSet: async (id, expected, next) => (open('compareAndSet'), inner.compareAndSet(id, expected, next)),
    list: async (query) => (open('list'), inner.list(query)),
    purge: async (now) => (open('purge'), inner.purge(now)),
    close: async () => void (plan.closed = true),
  };
  return { store, plan, inner };
}

/** A fetch that holds each request `ms` before it leaves (the attempt is on the wire meanwhile). */
function slowFetch(ms: number): { fetch: typeof globalThis.fetch; handed: { n: number } } {
  const handed = { n: 0 };
  const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    handed.n++;
    await wait(ms);
    return globalThis.fetch(input, init);
  }) as typeof globalThis.fetch;
  return { fetch, handed };
}

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
beforeEach(() => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => void process.off('unhandledRejection', onUnhandled));

describe("client.close() right after a joined call's once.signal cancel", () => {
  it.each([
    // the call it joined has no step after the cancel: the background write alone records it
    ['its last attempt refused (503, maxAttempts 1): the background cancel write is the only one', 1, RetriesExhaustedError.name],
    // (control) a retry left: the call it joined records the cancel itself at its next step
    ['the attempt refused (503) with a retry left: the call it joined records the cancel itself', 3, OperationCancelledError.name],
  ] as const)('%s: close() waits for it, the cancel recorded; no store-closed failure, no unhandled rejection; 1 request, 0 effects', async (_name, maxAttempts, ownerEnds) => {
    const { store, plan, inner } = slowReads();
    const slow = slowFetch(100);
    const c: OnceClient = createClient({ store, fetch: slow.fetch, telemetry: false, retry: { maxAttempts, baseDelayMs: 5, maxDelayMs: 20, budget: false } });
    cleanups.push(() => c.close({ waitMs: 0 }));
    const ref = `JC-${maxAttempts}`;
    const post = (signal?: AbortSignal) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(signal === undefined ? {} : { signal }) } });
    provider.fault({ kind: 'status_before_commit', status: 503 });

    const owner = timed(post(), 5_000);
    await until(() => slow.handed.n === 1); // the attempt on the wire
    const cancel = new AbortController();
    const joiner = timed(post(cancel.signal), 5_000);
    await wait(20); // joined
    plan.slowReads = true;
    cancel.abort(new Error('the joiner cancels'));
    const [o, j] = await Promise.all([owner, joiner]);
    expect(o.outcome).toBe(ownerEnds);
    expect(j.outcome).toBe(ownerEnds);

    const closing = performance.now();
    await c.close();
    const closeMs = Math.round(performance.now() - closing);
    await wait(plan.readMs + 100); // what a write left going after the close would do by now
    const rec = await inner.get(recordId({ tenant: 'default', action: ACTION, ref }));
    // the same ref called again by a new client on the store (the process restarted): cancelled, nothing sent
    const next = createClient({ store: inner, telemetry: false, retry: { maxAttempts: 1, budget: false } });
    cleanups.push(() => next.close({ waitMs: 0 }));
    const again = await timed(next.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }), 5_000);
    console.log(
      `maxAttempts ${maxAttempts}: owner ${o.outcome}, joiner ${j.outcome}; close() took ${closeMs} ms; record ${rec?.state}, cancelRequestedAt ${rec?.cancelRequestedAt === null ? 'null' : 'set'}; ` +
        `store operations after its close: ${JSON.stringify(plan.afterClose)}; unhandled rejections ${unhandled.length}; the next call ${again.outcome}; requests ${provider.requests.length}, effects ${provider.effectsFor(ref)}`,
    );
    expect(plan.afterClose).toEqual([]);
    expect(rec?.cancelRequestedAt).not.toBeNull();
    expect(rec?.state).toBe('cancelled');
    expect(unhandled).toEqual([]);
    expect(again.outcome).toBe(OperationCancelledError.name);
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });
});
