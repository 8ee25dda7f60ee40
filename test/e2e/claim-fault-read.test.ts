/**
 * The claim fails (a store blip: a dropped connection, a rejected statement; not applied) on a ref
 * whose record the store already holds. A terminal record answers every later call without touching
 * the network (DESIGN §2/§3): one plain read of the record serves the replay, or the conflict, that
 * the claim would have found. Anything else (no record, one still live, the read failing too) ends
 * with the claim's own StoreError, as before. Nothing is sent after a failed claim, ever.
 *
 * `lossy()` fails the chosen claim before it reaches the store; effects are counted at a loopback
 * provider that ignores keys (a second POST would be a second order) or by a counting `run()` effect.
 * Before the fix, every call here that reads a terminal record ended with the StoreError.
 */
import { describe, expect, it, vi } from 'vitest';
import { IdempotencyConflictError, OperationCancelledError, RetriesExhaustedError, StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceEvent, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { REPLAYED_HEADER } from '../../src/operation/snapshot.js';
import type { Provider } from '../../src/testing/provider.js';
import { describeEachStore } from '../helpers/close-stores.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lossy } from '../helpers/lossy-store.js';
import { orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

const caught = (call: Promise<unknown>): Promise<unknown> => call.then(() => undefined, (error: unknown) => error);
const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;

function cases(kind: string, open: () => OnceStore): void {
  /** A store whose next claim is failed on demand (`plan.fail`), and a client on it recording its events. */
  function setup(options: OnceClientOptions = {}) {
    const inner = open();
    cleanups.push(() => inner.close());
    const { store, plan } = lossy(inner);
    const events: OnceEvent[] = [];
    const client = (): OnceClient => {
      const c = createClient({ store, settleMs: 20, leaseMs: 400, onEvent: (e) => void events.push(e), ...options, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry } });
      cleanups.push(() => c.close());
      return c;
    };
    /** The next claim fails once, not applied; what it threw is checked by message (`lossy` names it). */
    const failClaim = (): void => {
      plan.fail = 'claim+attempt';
      plan.failTimes = 1;
    };
    return { inner, plan, events, client, failClaim };
  }
  const order = (client: OnceClient, ref: string, init: RequestInit = orderInit(ref)): Promise<Response> =>
    client.fetch(`${provider.url}/orders`, { ...init, once: { action: ACTION, ref } });
  const claimFailed = (ref: string): string => `lossy: claim+attempt on ${recordId({ tenant: 'default', action: ACTION, ref })} failed (not applied)`;

  it('a succeeded record: the call replays the stored response; nothing sent, one effect', async () => {
    const s = setup();
    const ref = `CR-ok-${kind}`;
    const first = await order(s.client(), ref);
    const body = await first.text();
    expect(first.status).toBe(201);
    const client = s.client();
    s.failClaim();
    s.events.length = 0;
    const readsBefore = s.plan.reads;

    const res = await order(client, ref);
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(res.status).toBe(201);
    expect(res.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(await res.text()).toBe(body);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(s.plan.reads).toBeGreaterThan(readsBefore); // the record was read, not claimed
    // as the claim's replay: one `replay` event, counted, no attempt
    expect(s.events.map((e) => e.type)).toEqual(['replay']);
    expect(client.stats().replays).toBe(1);
  });

  it('client.run: a succeeded record replays its value; the effect ran once', async () => {
    const s = setup();
    const ref = `CR-run-${kind}`;
    let effects = 0;
    const effect = async (): Promise<{ n: number }> => ({ n: ++effects });
    expect(await s.client().run({ action: 'charge', ref }, effect)).toEqual({ n: 1 });
    s.plan.fail = 'claim+attempt';
    expect(await s.client().run({ action: 'charge', ref }, effect)).toEqual({ n: 1 });
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(effects).toBe(1);
  });

  it('a failed record (a terminal 422): the call replays the 422; nothing more sent', async () => {
    const s = setup();
    const ref = `CR-failed-${kind}`;
    provider.fault({ kind: 'status_before_commit', status: 422, match: { ref } });
    expect((await order(s.client(), ref)).status).toBe(422);
    expect((await s.inner.get(recordId({ tenant: 'default', action: ACTION, ref })))?.state).toBe('failed');
    s.failClaim();
    const res = await order(s.client(), ref);
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(res.status).toBe(422);
    expect(res.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('a cancelled record: OperationCancelledError, as the claim would have said; nothing more sent', async () => {
    const s = setup({ retry: { maxAttempts: 1 } });
    const ref = `CR-cancelled-${kind}`;
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    expect(await caught(order(s.client(), ref))).toBeInstanceOf(RetriesExhaustedError);
    expect(await s.client().cancel({ action: ACTION, ref })).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    s.failClaim();
    const error = await caught(order(s.client(), ref));
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(error).toBeInstanceOf(OperationCancelledError);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('a record stored with another payload: IdempotencyConflictError, as the claim would have said; nothing sent', async () => {
    const s = setup();
    const ref = `CR-conflict-${kind}`;
    expect((await order(s.client(), ref)).status).toBe(201);
    s.failClaim();
    const error = await caught(order(s.client(), ref, orderInit(ref, { qty: 2 })));
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    expect(sent(ref)).toBe(1);
    expect(s.events.filter((e) => e.type === 'conflict')).toHaveLength(1);
  });

  it('a record stored under another Idempotency-Key: IdempotencyConflictError; nothing sent', async () => {
    const s = setup();
    const ref = `CR-key-${kind}`;
    const init = (key: string): RequestInit => ({ ...orderInit(ref), headers: { 'content-type': 'application/json', 'idempotency-key': key } });
    expect((await order(s.client(), ref, init('key-1'))).status).toBe(201);
    s.failClaim();
    expect(await caught(order(s.client(), ref, init('key-2')))).toBeInstanceOf(IdempotencyConflictError);
    expect(s.plan.lost).toEqual(['failed claim+attempt']);
    expect(sent(ref)).toBe(1);
  });

  it('no record: the claim\'s own StoreError; nothing sent', async () => {
    const s = setup();
    const ref = `CR-absent-${kind}`;
    s.failClaim();
    const error = await caught(order(s.client(), ref));
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toBe(claimFailed(ref));
    expect(sent(ref)).toBe(0);
    expect(await s.inner.get(recordId({ tenant: 'default', action: ACTION, ref }))).toBeUndefined();
  });

  it('a record not terminal (pending after a 503): the claim\'s own StoreError; nothing more sent', async () => {
    const s = setup({ retry: { maxAttempts: 1 } });
    const ref = `CR-pending-${kind}`;
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    expect(await caught(order(s.client(), ref))).toBeInstanceOf(RetriesExhaustedError);
    expect((await s.inner.get(recordId({ tenant: 'default', action: ACTION, ref })))?.state).toBe('pending');
    expect(sent(ref)).toBe(1);
    s.failClaim();
    const error = await caught(order(s.client(), ref));
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toBe(claimFailed(ref));
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('a succeeded record, but the read fails too: the claim\'s own StoreError; nothing sent', async () => {
    const s = setup();
    const ref = `CR-unread-${kind}`;
    expect((await order(s.client(), ref)).status).toBe(201);
    s.failClaim();
    s.plan.failReads = 1_000_000;
    const error = await caught(order(s.client(), ref));
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toBe(claimFailed(ref));
    expect(sent(ref)).toBe(1);
  });
}

describe('memory: a failed claim on a stored record', () => cases('memory', () => memoryStore()));

// SQLite, IndexedDB, PostgreSQL (one schema per block: refs differ between its tests)
describeEachStore('a failed claim on a stored record', cleanups, (at) => cases('db', () => at().open()));

/**
 * A client on a lossy memory store (`wrap` may stand a custom store in front of it) whose first call of
 * `ref` has landed (201), and its next claim set to fail once.
 */
async function failingNextClaim(ref: string, wrap: (store: OnceStore) => OnceStore = (store) => store) {
  const inner = memoryStore();
  cleanups.push(() => inner.close());
  const { store, plan } = lossy(inner);
  const client = createClient({ store: wrap(store), leaseMs: 400, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false } });
  cleanups.push(() => client.close());
  const call = (): Promise<Response> => client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
  expect((await call()).status).toBe(201);
  plan.fail = 'claim+attempt';
  return { client, plan, call, claimFailed: `lossy: claim+attempt on ${recordId({ tenant: 'default', action: ACTION, ref })} failed (not applied)` };
}

describe('a failed claim, and a custom store whose read throws synchronously', () => {
  it('the claim\'s own StoreError stands, not the read\'s throw; nothing sent', async () => {
    // a custom adapter over a synchronous driver: its `get` is a plain method, and a locked database
    // throws from it at once (SQLITE_BUSY) instead of returning a rejected promise
    let busy = false;
    const { plan, call, claimFailed } = await failingNextClaim('CR-sync-read', (failing) => ({
      ...failing,
      get: (id) => {
        if (busy) throw new Error('SQLITE_BUSY: database is locked');
        return failing.get(id);
      },
    }));
    busy = true;
    const error = await caught(call());
    busy = false;
    expect(plan.lost).toEqual(['failed claim+attempt']);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toBe(claimFailed);
    expect(sent('CR-sync-read')).toBe(1);
  });
});

describe('a failed claim, and reads that hang', () => {
  it('the read is given up after LET_GO_WAIT_MS: the claim\'s own StoreError; the client\'s close is not held', async () => {
    const ref = 'CR-hang';
    const { client, plan, call, claimFailed } = await failingNextClaim(ref);
    plan.hangReads = true;
    const started = performance.now();
    const error = await caught(call());
    // bounded()'s read-back until the lease's end (400 ms), then this read's LET_GO_WAIT_MS (1 s)
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toBe(claimFailed);
    const closing = performance.now();
    await client.close();
    expect(performance.now() - closing).toBeLessThan(1_500);
    expect(sent(ref)).toBe(1);
  });
});

describe('a failed claim, on a runtime without AbortSignal.timeout (Safari 15.4-15.6, Chrome < 103, Firefox < 100)', () => {
  it('a succeeded record still replays; nothing sent', async () => {
    // the rest of the engine needs only throwIfAborted() and crypto.randomUUID() (Safari 15.4, Chrome 100, Firefox 97)
    const ref = 'CR-no-timeout';
    const { plan, call } = await failingNextClaim(ref);
    const timeout = Object.getOwnPropertyDescriptor(AbortSignal, 'timeout');
    Reflect.deleteProperty(AbortSignal, 'timeout');
    let res: unknown;
    try {
      res = await call().then((r) => r.status, (error: unknown) => error);
    } finally {
      if (timeout !== undefined) Object.defineProperty(AbortSignal, 'timeout', timeout);
    }
    expect(plan.lost).toEqual(['failed claim+attempt']);
    expect(res).toBe(201);
    expect(sent(ref)).toBe(1);
  });
});

/**
 * The caller aborts while the engine reads the record after the failed claim (or while `bounded()`
 * reads it back first): nothing was sent, so the call ends as any abort before a send does, with the
 * caller's reason unchanged, not with the claim's StoreError. A call that joined an aborted leader
 * runs the operation itself (as when a leader is aborted anywhere else): here its own claim finds the
 * succeeded record and replays it. Before the fix, both ended with the claim's StoreError.
 */
describe('a failed claim, and the caller aborts while the record is read', () => {
  /** As `failingNextClaim`, with every read from then on hanging, and `onRead(n)` told of the n-th. */
  async function hangingReads(ref: string, onRead: (n: number) => void) {
    let hang = false;
    let n = 0;
    const setup = await failingNextClaim(ref, (failing) => ({
      ...failing,
      get: (id) => {
        if (!hang) return failing.get(id);
        onRead(++n);
        return new Promise<never>(() => undefined);
      },
    }));
    hang = true;
    const call = (signal?: AbortSignal): Promise<Response> =>
      setup.client.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal ? { signal } : {}), once: { action: ACTION, ref } });
    return { ...setup, call };
  }

  // read 1: bounded()'s read-back of the claim (an ack lost?); read 2: the read that would answer from a finished record
  for (const [read, during] of [[2, 'the read after the claim'], [1, "bounded()'s read-back of the claim"]] as const) {
    it(`an abort during ${during}: the call rejects with the caller's reason, at once; nothing sent`, async () => {
      const ref = `CR-abort-${read}`;
      const controller = new AbortController();
      const reason = new Error('caller gave up');
      let abortedAt = 0;
      const { plan, call } = await hangingReads(ref, (n) => {
        if (n !== read) return;
        abortedAt = performance.now();
        controller.abort(reason);
      });
      const error = await caught(call(controller.signal));
      expect(plan.lost).toEqual(['failed claim+attempt']);
      expect(error).toBe(reason);
      expect(performance.now() - abortedAt).toBeLessThan(300);
      expect(sent(ref)).toBe(1);
    });
  }

  it('a call that joined the aborted leader runs the operation itself: the stored 201, replayed; nothing sent', async () => {
    const ref = 'CR-abort-joined';
    const controller = new AbortController();
    const reason = new Error('leader gave up');
    const { plan, call } = await hangingReads(ref, (n) => {
      if (n === 2) controller.abort(reason);
    });
    const leader = caught(call(controller.signal));
    // (the joiner joins while the leader's failed claim is being handled)
    await vi.waitFor(() => expect(plan.lost).toEqual(['failed claim+attempt']));
    const joined = call().then((res) => ({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER) }), (error: unknown) => error);
    expect(await leader).toBe(reason);
    expect(await joined).toEqual({ status: 201, replayed: 'true' });
    expect(plan.lost).toEqual(['failed claim+attempt']);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
