/**
 * An attempt whose end the store failed to record: the call holds its outcome (here an attempt
 * timeout: unknown), ends with a StoreError ("attempt 1 was sent and its outcome is unknown … could
 * not be recorded") and releases its lease with the attempt still open on the record (`stopped`).
 * The next call takes the record without a takeover (no lease to take over) and reconciles it.
 *
 * An "absent" is trusted only `settleMs` after the attempt can no longer take effect: when it
 * finished, or, for an attempt the record shows open, when the lease was last taken over. The
 * release is that moment here: the attempt was on the wire until its owner let it go. Before, with
 * no takeover stamp, the window counted from the attempt's start, `attemptTimeoutMs` too early: the
 * next call trusted the lagging index's "absent" and resent, 2 orders at a provider that ignores
 * keys, where the same call with the end recorded made 1 (the control case below).
 *
 * The provider (loopback) takes PROCESS_MS to create the order and never answers; its lookup index
 * lags its writes by LAG_MS (under settleMs). Effects are counted at the provider.
 */
import { describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClientOptions, OnceStore } from '../../src/index.js';
import { laggingOrdersApi } from '../helpers/lagging-orders.js';
import { eachTest } from '../helpers/loopback.js';
import { ordersServer } from '../helpers/orders-server.js';

const { serve, use } = eachTest();

const SETTLE_MS = 2_500;
const ATTEMPT_TIMEOUT_MS = 800;
const PROCESS_MS = 700;
const LAG_MS = 2_200;

/** Every POST creates an order PROCESS_MS later (no dedupe by key); the first request's answer never comes (the client times out), a resend is answered. */
const slowLaggingApi = () =>
  laggingOrdersApi({
    lagMs: LAG_MS,
    processMs: PROCESS_MS,
    answer: ({ res, ref, first }) => {
      if (!first) res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `o-${ref}-2`, ref }));
    },
  });

/** `inner`, failing every write that records the end of an open attempt while `failing.on`. */
function failingEnds(inner: OnceStore) {
  const failing = { on: false, failed: 0 };
  const store: OnceStore = {
    ...inner,
    name: 'failing-ends',
    claim: (r) => inner.claim(r),
    get: (id) => inner.get(id),
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
    compareAndSet: async (id, expected, next) => {
      const prev = await inner.get(id);
      const ends = prev !== undefined && prev.attempts.at(-1)?.finishedAt === null && next.attempts.length === prev.attempts.length && next.attempts.at(-1)?.finishedAt != null;
      if (failing.on && ends) {
        failing.failed++;
        throw new StoreError('failing-ends: disk I/O error (not applied)');
      }
      return inner.compareAndSet(id, expected, next);
    },
  };
  return { store, failing };
}

function lookupAt(base: string): LookupFn {
  return async ({ scope, signal }) => {
    const res = await fetch(`${base}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    return res.status === 404 ? null : res;
  };
}

const post = (ref: string): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }) });

describe("an attempt's end the store could not record, then the next call", () => {
  it.each([
    ['recorded (control)', false],
    ['not recorded, the lease released with the attempt open', true],
  ] as const)('end %s: the lookup is trusted settleMs after the attempt ended, 1 order', async (_, fail) => {
    const api = slowLaggingApi();
    const base = await serve(api.handler);
    await fetch(`${base}/orders?ref=warm-up`);
    const { store, failing } = failingEnds(memoryStore());
    const options: OnceClientOptions = {
      store,
      settleMs: SETTLE_MS,
      leaseMs: 10_000,
      retry: { attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, deadlineMs: 15_000, baseDelayMs: 5, maxDelayMs: 10, budget: false },
      lookups: { 'create-order': lookupAt(base) },
    };
    const ref = fail ? 'UE-unrecorded' : 'UE-recorded';
    const scope = { action: 'create-order', ref };
    const first = use(createClient({ ...options, owner: 'first' }));
    failing.on = fail;
    const firstCall = first.fetch(`${base}/orders`, { ...post(ref), once: scope }).then(
      (res) => res.status,
      (error: unknown) => error,
    );
    if (fail) {
      const ended = await firstCall;
      expect(ended).toBeInstanceOf(StoreError);
      expect((ended as Error).message).toMatch(/attempt 1 was sent and its outcome is unknown/);
      failing.on = false;
      const left = await first.get(scope);
      expect(left).toMatchObject({ state: 'in_flight', lease: null });
      expect(left?.attempts.at(-1)?.finishedAt).toBeNull();
      expect(failing.failed).toBeGreaterThan(0);
      // the next call, at once (another process would do the same: the lease is free)
      const next = createClient({ ...options, owner: 'next' });
      try {
        const res = await next.fetch(`${base}/orders`, { ...post(ref), once: scope });
        expect(res.status).toBe(200);
      } finally {
        await next.close();
      }
    } else {
      expect(await firstCall).toBe(200);
    }
    expect(api.effects(ref)).toBe(1);
    expect(api.seen.posts).toBe(1);
  });
});

describe("an attempt's end not recorded, then the same client calls again and again with a deadline under settleMs", () => {
  it('the window counts from the first stop only: a later call settles the "absent" and resends, 1 order', async () => {
    // a provider that accepts the first POST and never acts on it nor answers (the request is lost in it), answers a resend
    const orders: string[] = [];
    const api = ordersServer({
      created: orders,
      onGet: ({ res, ref }) => void (api.has(ref) ? res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ref })) : res.writeHead(404).end()),
      onPost: ({ res, ref }) => {
        if (api.seen.posts === 1) return; // never answered, never created
        api.create(ref);
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ ref }));
      },
    });
    const base = await serve(api.handler);
    await fetch(`${base}/orders?ref=warm-up`);
    const { store, failing } = failingEnds(memoryStore());
    const client = use(
      createClient({
        store,
        owner: 'w',
        settleMs: 2_000,
        leaseMs: 10_000,
        retry: { attemptTimeoutMs: 300, deadlineMs: 1_000, baseDelayMs: 5, maxDelayMs: 10, budget: false },
        lookups: { 'create-order': lookupAt(base) },
      }),
    );
    const ref = 'UE-again';
    const scope = { action: 'create-order', ref };
    failing.on = true;
    const first = await client.fetch(`${base}/orders`, { ...post(ref), once: scope }).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(StoreError);
    failing.on = false;
    // a job queue retrying every 300 ms: each call before the window ends stops at once (its wait is past its
    // deadline); once the window from the first stop is within a call's deadline, that call waits it out and resends
    let status: number | undefined;
    let failed = 0;
    for (let i = 0; i < 16 && status === undefined; i++) {
      await new Promise((r) => setTimeout(r, 300));
      status = await client.fetch(`${base}/orders`, { ...post(ref), once: scope }).then(
        (res) => res.status,
        () => void failed++,
      );
    }
    expect(status).toBe(201);
    expect(failed).toBeLessThan(8);
    expect(orders.filter((o) => o === ref)).toHaveLength(1);
    expect(api.seen.posts).toBe(2);
  }, 30_000);
});
