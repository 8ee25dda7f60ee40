/**
 * `client.close()` as a graceful shutdown (a SIGTERM handler's): no new work once it is called, then
 * a wait for the work already started (calls in flight, joined calls, a cancel, the writes a call
 * left going in the background), and only then the store's close; `close({ waitMs })` bounds that
 * wait, after which a call holding the provider's answer returns it (unrecorded) and nothing more is
 * sent. Effects are counted at a loopback provider that does not dedupe (every POST is a new order),
 * on a SQLite file that a fresh client reopens.
 *
 * Before: close() resolved at once; a call whose provider answered 201 a moment later rejected with
 * `StoreError: the client was closed`, its record left `in_flight`, which the next client could only
 * report as an AmbiguousOutcomeError; a call after close() got the store's own "claim called after
 * close()".
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, REPLAYED_HEADER, StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { armedClient, scripted } from '../helpers/scripted-store.js';
import { lookupByRef, orderInit, sqliteClient, tempDir, until, wait } from '../helpers/setup.js';
import { ended } from '../helpers/slow-ack.js';

const ACTION = 'create-order';
/** how late past its mark a step may end on this shared 2-core machine */
const SLACK_MS = 300;

let provider: Provider;
let dir: { dir: string; cleanup: () => void };
let path: string;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  provider = await startProvider({ ignoreKeys: true });
  dir = tempDir();
  path = join(dir.dir, 'close.db');
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await provider.close();
  dir.cleanup();
});

/** A client on the test's SQLite file, closed after the test. */
function clientOf(options: OnceClientOptions = {}): OnceClient {
  const { client } = sqliteClient(path, { telemetry: false, ...options });
  cleanups.push(() => client.close());
  return client;
}

function order(client: OnceClient, ref: string): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
}

const scope = (ref: string) => ({ action: ACTION, ref });
const posts = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;

describe('close() during a call: it waits for the call, which returns and records the answer', () => {
  it('201 after 300 ms, close() at 100 ms: the caller gets the 201, close() resolves after it, the record is succeeded; a fresh client replays it, 1 effect', async () => {
    const ref = 'CG-201';
    provider.fault({ kind: 'delay_after_commit', delayMs: 300, match: { ref } });
    const a = clientOf();
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await wait(100);
    const closing = ended(a.close(), t0);
    const [c, d] = await Promise.all([call, closing]);
    expect(c.outcome).toBe('201');
    expect(await (c.value as Response).json()).toMatchObject({ ref });
    expect(d.outcome).toBe('ok');
    expect(d.at).toBeGreaterThanOrEqual(c.at);
    expect(d.at).toBeGreaterThanOrEqual(300);

    const b = clientOf();
    expect(await b.get(scope(ref))).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    const again = await order(b, ref);
    expect(again.status).toBe(201);
    expect(again.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(posts(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a call that joined it (same scope, same payload) gets the same 201; close() waits for both; 1 effect', async () => {
    const ref = 'CG-joined';
    provider.fault({ kind: 'delay_after_commit', delayMs: 300, match: { ref } });
    const a = clientOf();
    const t0 = performance.now();
    const first = ended(order(a, ref), t0);
    await wait(50);
    const joined = ended(order(a, ref), t0);
    await wait(50);
    const closing = ended(a.close(), t0);
    const [f, j, d] = await Promise.all([first, joined, closing]);
    expect([f.outcome, j.outcome, d.outcome]).toEqual(['201', '201', 'ok']);
    expect(d.at).toBeGreaterThanOrEqual(Math.max(f.at, j.at));
    expect(a.stats().replays).toBe(1);
    expect(await clientOf().get(scope(ref))).toMatchObject({ state: 'succeeded' });
    expect(posts(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a cancel() in progress (waiting on the call it raced) ends first, with "delivered"; then the store closes', async () => {
    const ref = 'CG-cancel';
    provider.fault({ kind: 'delay_after_commit', delayMs: 300, match: { ref } });
    const a = clientOf();
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await wait(50);
    const cancelling = ended(a.cancel(scope(ref)), t0);
    await wait(50);
    const closing = ended(a.close(), t0);
    const [c, x, d] = await Promise.all([call, cancelling, closing]);
    expect(c.outcome).toBe('201');
    expect(x.value).toEqual({ outcome: 'delivered', state: 'succeeded' });
    expect(d.at).toBeGreaterThanOrEqual(x.at);
    expect(posts(ref)).toBe(1);
  });

  it("an answer's write the call's deadline cut off (it returned the 201 at its deadline): close() waits for it to land; the record is succeeded", async () => {
    const { store, plan } = scripted(sqliteStore({ path }));
    // the 201's write lands after 600 ms, past the call's deadline (400 ms), within its lease (1 s)
    plan.steps['attempt_finished:success'] = [600];
    const ref = 'CG-cut';
    const a = armedClient(store, plan, { leaseMs: 1_000, telemetry: false }, { deadlineMs: 400, cleanups });
    const t0 = performance.now();
    const c = await ended(order(a, ref), t0);
    expect(c.outcome).toBe('201');
    expect(c.at).toBeLessThan(600);
    const d = await ended(a.close(), t0);
    expect(d.outcome).toBe('ok');
    expect(d.at).toBeGreaterThanOrEqual(550);
    expect(plan.afterClose).toBe(0);
    const b = clientOf();
    expect(await b.get(scope(ref))).toMatchObject({ state: 'succeeded', lease: null });
    expect((await order(b, ref)).headers.get(REPLAYED_HEADER)).toBe('true');
    expect(posts(ref)).toBe(1);
  });
});

describe('after close() began: no new work', () => {
  it('every method that does work rejects at once with a StoreError naming client.close(): 0 effects, nothing in the store', async () => {
    const busy = 'CG-busy';
    provider.fault({ kind: 'delay_after_commit', delayMs: 300, match: { ref: busy } });
    const a = clientOf();
    const inFlight = order(a, busy);
    await wait(50);
    const closing = a.close();
    let closed = false;
    void closing.then(() => (closed = true));
    const ref = 'CG-after';
    let effectRan = false;
    const calls: Record<string, () => Promise<unknown>> = {
      fetch: () => order(a, ref),
      wrap: () => a.wrap()(`${provider.url}/orders`, { ...orderInit(ref), headers: { 'content-type': 'application/json', 'Idempotency-Key': ref } }),
      run: () => a.run({ action: ACTION, ref }, async () => ((effectRan = true), 1)),
      get: () => a.get(scope(busy)),
      cancel: () => a.cancel(scope(busy)),
      recover: () => a.recover(),
      purge: () => a.purge(),
      explain: () => a.explain(scope(busy)),
      plainGet: () => a.fetch(`${provider.url}/orders?ref=${ref}`),
    };
    for (const [name, call] of Object.entries(calls)) {
      const error: unknown = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, name).toBeInstanceOf(StoreError);
      expect((error as Error).message, name).toMatch(/called after client\.close\(\); nothing was recorded or sent/);
    }
    expect(closed).toBe(false); // rejected at once, not after the wait
    expect(effectRan).toBe(false);
    expect((await inFlight).status).toBe(201);
    await closing;
    expect(posts(ref)).toBe(0);
    expect(provider.lookups).toBe(0);
    const b = clientOf();
    expect(await b.get(scope(ref))).toBeUndefined();
    expect(await b.get({ action: 'POST ' + provider.url + '/orders', ref })).toBeUndefined();
    expect(await b.get(scope(busy))).toMatchObject({ state: 'succeeded' });
    expect(provider.effectsFor(busy)).toBe(1);
  });

  it('after close() resolved too', async () => {
    const a = clientOf();
    await a.close();
    await expect(order(a, 'CG-late')).rejects.toThrow(/client\.fetch: called after client\.close\(\)/);
    expect(posts('CG-late')).toBe(0);
  });
});

describe('close({ waitMs }): a bound for an impatient shutdown', () => {
  it('201 after 600 ms, close({ waitMs: 100 }) at 100 ms: close() resolves near 200 ms; the caller still gets the 201 (unrecorded); the next client reconciles it, never resends', async () => {
    const ref = 'CG-forced';
    provider.fault({ kind: 'delay_after_commit', delayMs: 600, match: { ref } });
    const a = clientOf({ leaseMs: 300 });
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await wait(100);
    const d = await ended(a.close({ waitMs: 100 }), t0);
    expect(d.outcome).toBe('ok');
    expect(d.at).toBeGreaterThanOrEqual(190);
    expect(d.at).toBeLessThan(200 + SLACK_MS);
    const c = await call;
    expect(c.outcome).toBe('201');
    expect(c.at).toBeGreaterThanOrEqual(590);
    expect(await (c.value as Response).json()).toMatchObject({ ref });
    expect(posts(ref)).toBe(1);

    // Not recorded (the store was closed): the record still holds the open attempt.
    const b = clientOf();
    expect(await b.get(scope(ref))).toMatchObject({ state: 'in_flight' });
    await wait(300); // past A's lease
    // No lookup: reported, not resent.
    const blind = await ended(order(b, ref), performance.now());
    expect(blind.outcome).toBe('AmbiguousOutcomeError');
    expect(blind.value).toBeInstanceOf(AmbiguousOutcomeError);
    expect(posts(ref)).toBe(1);
    // A lookup settles it: the order found, returned, recorded; still 1 effect.
    const c2 = clientOf({ lookups: { [ACTION]: lookupByRef(provider.url) } });
    const found = await order(c2, ref);
    expect(found.ok).toBe(true); // the lookup's answer (the order as found)
    expect(await found.json()).toMatchObject({ ref });
    expect(await c2.get(scope(ref))).toMatchObject({ state: 'succeeded' });
    expect(posts(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('waitMs ends a wait for a retry (Retry-After 2 s after a 503): the call rejects with the close reason soon after, nothing more sent; the next client sends it once', async () => {
    const ref = 'CG-backoff';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '2', match: { ref } });
    const a = clientOf({ leaseMs: 300 });
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await until(() => posts(ref) === 1);
    await wait(50);
    const d = await ended(a.close({ waitMs: 50 }), t0);
    const c = await call;
    expect(d.outcome).toBe('ok');
    expect(c.outcome).toBe('StoreError');
    expect((c.value as Error).message).toMatch(/client\.close\(\{ waitMs: 50 \}\)/);
    expect(c.at).toBeLessThan(d.at + SLACK_MS);
    expect(c.at).toBeLessThan(1_000);
    expect(posts(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
    // The 503 was recorded (nothing delivered): the next client sends it once, with the same key.
    const b = clientOf();
    expect((await order(b, ref)).status).toBe(201);
    expect(posts(ref)).toBe(2);
    expect(new Set(provider.requests.filter((r) => r.ref === ref).map((r) => r.key)).size).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('waitMs: 0 stops at once: close() resolves at once; the call in flight still returns its 201', async () => {
    const ref = 'CG-zero';
    provider.fault({ kind: 'delay_after_commit', delayMs: 300, match: { ref } });
    const a = clientOf();
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await wait(50);
    const d = await ended(a.close({ waitMs: 0 }), t0);
    expect(d.at).toBeLessThan(50 + SLACK_MS);
    expect((await call).outcome).toBe('201');
    expect(posts(ref)).toBe(1);
  });
});

describe('close() twice', () => {
  it('the same promise; both resolve once the call has ended', async () => {
    const ref = 'CG-twice';
    provider.fault({ kind: 'delay_after_commit', delayMs: 200, match: { ref } });
    const a = clientOf();
    const call = order(a, ref);
    await wait(50);
    const first = a.close();
    const second = a.close();
    expect(second).toBe(first);
    await Promise.all([first, second]);
    expect((await call).status).toBe(201);
    expect(a.close()).toBe(first);
    await a.close();
  });

  it('a second close({ waitMs: 0 }) during a graceful one ends the wait at once (the impatient second signal)', async () => {
    const ref = 'CG-second';
    provider.fault({ kind: 'delay_after_commit', delayMs: 500, match: { ref } });
    const a = clientOf();
    const t0 = performance.now();
    const call = ended(order(a, ref), t0);
    await wait(50);
    const first = ended(a.close(), t0);
    await wait(50);
    const second = ended(a.close({ waitMs: 0 }), t0);
    const [f, s] = await Promise.all([first, second]);
    expect(f.at).toBeLessThan(100 + SLACK_MS);
    expect(s.at).toBeLessThan(100 + SLACK_MS);
    expect((await call).outcome).toBe('201');
    expect(posts(ref)).toBe(1);
  });

  it('a bad waitMs: TypeError or RangeError naming it, and the client is not closed by it', async () => {
    const a = clientOf();
    await expect(a.close({ waitMs: -1 })).rejects.toThrow(RangeError);
    await expect(a.close({ waitMs: 1.5 })).rejects.toThrow(/option "waitMs"/);
    await expect(a.close({ waitMs: '10' as unknown as number })).rejects.toThrow(TypeError);
    await expect(a.close({ waitMs: Number.POSITIVE_INFINITY })).rejects.toThrow(RangeError);
    expect((await order(a, 'CG-open')).status).toBe(201);
  });
});

describe('a memory store: the same', () => {
  it('close during a call: the 201 returned and recorded before the store closes', async () => {
    const store = memoryStore();
    let recorded: unknown;
    const ref = 'CG-memory';
    provider.fault({ kind: 'delay_after_commit', delayMs: 200, match: { ref } });
    const a = createClient({ store, telemetry: false });
    const realClose = store.close.bind(store);
    store.close = async () => {
      recorded = (await store.get(recordId({ tenant: 'default', action: ACTION, ref })))?.state;
      return realClose();
    };
    const call = order(a, ref);
    await wait(50);
    await a.close();
    expect((await call).status).toBe(201);
    expect(recorded).toBe('succeeded');
  });
});
