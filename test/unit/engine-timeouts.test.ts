/**
 * One deadline holds even against user code that ignores its signal (a lookup, a `client.run`
 * effect, a custom fetch), and timers longer than the platform's limit (about 24.8 days) wait the
 * whole time instead of firing at once. Memory store, injected transports, real short timers.
 * Regressions found by an adversarial run: such calls hung forever, renewing their lease, and
 * `deadlineMs: 3e9` ended every call after about 1 ms.
 */
import { describe, expect, it } from 'vitest';
import { createClientWith } from '../../src/client.js';
import { AmbiguousOutcomeError, DeadlineExceededError, OperationInFlightError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import { webLocks } from '../../src/web-locks.js';
import { fakeLocks } from '../helpers/fake-locks.js';
import type { OnceClientOptions, OnceStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/operation/record.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'T-1' };
const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const tick = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function client(fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  return createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, ...options.retry } });
}

const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };

describe('user code that ignores its signal', () => {
  it('a lookup that never answers: the call ends at deadlineMs, the lease is released', async () => {
    let sends = 0;
    const store = memoryStore();
    const fetch = (async () => {
      sends++;
      throw Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
    }) as typeof globalThis.fetch;
    const c = client(fetch, { store, leaseMs: 300, retry: { deadlineMs: 400 } });
    const started = Date.now();
    const error = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup: never } }).catch((e: unknown) => e);
    // the record is ambiguous: AmbiguousOutcomeError, its cause the deadline's error (as every stop that leaves it so)
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).cause).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(sends).toBe(1);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null });
    // another client can take it up at once (no OperationInFlightError), and reconciles first
    const other = client(fetch, { store, inFlightWaitMs: 100 });
    await expect(other.fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(sends).toBe(1);
  });

  it("the caller's abort ends a call waiting on such a lookup, with the caller's reason", async () => {
    const fetch = (async () => {
      throw Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) });
    }) as typeof globalThis.fetch;
    const c = client(fetch);
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    setTimeout(() => caller.abort(reason), 150);
    const started = Date.now();
    const error = await c.fetch(URL_ORDERS, { ...post, signal: caller.signal, once: { ...SCOPE, lookup: never } }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect((await c.get(SCOPE))?.lease).toBeNull();
  });

  it('a client.run effect that never settles: the attempt ends at attemptTimeoutMs, ambiguous, not re-run', async () => {
    let runs = 0;
    const c = client(never, { retry: { attemptTimeoutMs: 100, deadlineMs: 1_000 } });
    const effect = (): Promise<string> => {
      runs++;
      return never();
    };
    const started = Date.now();
    await expect(c.run({ action: 'charge', ref: 'R-1' }, effect)).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(runs).toBe(1);
    expect(await c.get({ action: 'charge', ref: 'R-1' })).toMatchObject({ state: 'ambiguous', lease: null, attempts: [{ class: 'ambiguous' }] });
  });

  it('a custom fetch that never settles: ambiguous at attemptTimeoutMs, then the lookup decides', async () => {
    let sends = 0;
    const fetch = ((): Promise<Response> => {
      sends++;
      return never();
    }) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 100 } });
    const found = async (): Promise<Response> => new Response('{"id":"o-1"}', { status: 200 });
    const res = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup: found } });
    expect(res.status).toBe(200);
    expect(sends).toBe(1);
    expect((await c.get(SCOPE))?.attempts.map((a) => [a.class, a.reason])).toEqual([['ambiguous', 'TimeoutError']]);
  });
});

describe('timers beyond the platform limit', () => {
  it('deadlineMs and attemptTimeoutMs of 3e9 ms (34 days) wait, they do not fire at once', async () => {
    let sends = 0;
    // a transport that honours its signal, as fetch does
    const fetch = ((_input: RequestInfo | URL, init?: RequestInit) => {
      sends++;
      return new Promise<Response>((resolve, reject) => {
        const timer = setTimeout(() => resolve(new Response('{"id":"o-1"}', { status: 201 })), 30);
        init?.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(init.signal?.reason);
        });
      });
    }) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { deadlineMs: 3e9, attemptTimeoutMs: 3e9 }, leaseMs: 9e9, inFlightWaitMs: 3e9 });
    const res = await c.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect(res.status).toBe(201);
    expect(sends).toBe(1);
    expect((await c.get(SCOPE))?.state).toBe('succeeded');
  });
});

// Regression (adversarial run in Chromium): with Web Locks a waiting tab waited inFlightWaitMs for
// the lock, then inFlightWaitMs again for the lease: twice the documented bound.
describe('inFlightWaitMs with a cross-tab lock', () => {
  /** Two "tabs" sharing one store and one lock per name, held until released (the Web Locks contract); tab A holds the scope's lock with a send that never ends. */
  async function tabAHoldingTheLock(tabB: OnceClientOptions) {
    const locks = fakeLocks();
    const store = memoryStore();
    const platform = { store: () => store, fetch: () => never as typeof globalThis.fetch, exclusive: webLocks(locks) };
    const tabA = createClientWith({ store, fetch: () => never<Response>(), random: () => 0, retry: { attemptTimeoutMs: 60_000, budget: false } }, platform);
    void tabA.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch(() => undefined);
    while ((await tabA.get(SCOPE))?.state !== 'in_flight') await tick(5);
    return createClientWith({ store, fetch: () => never<Response>(), random: () => 0, ...tabB, retry: { budget: false, ...tabB.retry } }, platform);
  }

  it('bounds the lock wait and the lease wait together', async () => {
    const tabB = await tabAHoldingTheLock({ inFlightWaitMs: 400 });
    const started = Date.now();
    const error = await tabB.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
    const waited = Date.now() - started;
    expect(error).toBeInstanceOf(OperationInFlightError);
    expect(waited).toBeGreaterThanOrEqual(390);
    expect(waited).toBeLessThan(720); // twice the bound would be 800
  });

  // Regression: the call's deadline began once the lock was held; deadlineMs 200 ended after inFlightWaitMs (1.5 s).
  it('deadlineMs bounds the wait for the lock', async () => {
    const tabB = await tabAHoldingTheLock({ inFlightWaitMs: 1_500, retry: { deadlineMs: 200 } });
    const started = Date.now();
    const error = await tabB.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(700);
  });
});

// Regression: the store calls before the send (claim, takeover, reads while waiting on an owner) were
// awaited without the deadline or the caller's signal; a store that stopped answering (a blocked
// IndexedDB) held the call forever.
describe('a store that stops answering before the send', () => {
  type Op = 'claim' | 'cas' | 'get';
  /**
   * A memory store whose calls of the `held` kinds (and the compare-and-sets `holdCas` picks) wait
   * until `release()`; `slowCas` delays the compare-and-sets it picks by the milliseconds it returns.
   */
  function stalling() {
    const inner = memoryStore();
    let held = new Set<Op>();
    let holdCas = (_next: OperationRecord): boolean => false;
    let slowCas = (_next: OperationRecord): number => 0;
    let open = (): void => undefined;
    let gate = Promise.resolve();
    let claims = 0;
    const pass = async (op: Op): Promise<void> => {
      if (held.has(op)) await gate;
    };
    const store: OnceStore = {
      name: 'stalling',
      claim: async (r) => (claims++, await pass('claim'), inner.claim(r)),
      compareAndSet: async (id, g, next) => {
        if (holdCas(next)) await gate;
        else await pass('cas');
        const ms = slowCas(next);
        if (ms > 0) await tick(ms);
        return inner.compareAndSet(id, g, next);
      },
      get: async (id) => (await pass('get'), inner.get(id)),
      list: (q) => inner.list(q),
      purge: (now) => inner.purge(now),
      close: () => inner.close(),
    };
    const hold = (...ops: Op[]): void => {
      held = new Set(ops);
      gate = new Promise<void>((r) => (open = r));
    };
    const release = (): void => {
      held = new Set();
      holdCas = () => false;
      open();
    };
    const pick = {
      holdCas: (when: (next: OperationRecord) => boolean): void => {
        holdCas = when;
        gate = new Promise<void>((r) => (open = r));
      },
      slowCas: (ms: (next: OperationRecord) => number): void => void (slowCas = ms),
    };
    return { store, hold, release, ...pick, claims: () => claims };
  }

  async function eventually(check: () => Promise<boolean>): Promise<void> {
    for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 5));
    expect(await check()).toBe(true);
  }

  it('a claim that does not answer: DeadlineExceededError at deadlineMs, nothing sent; when it lands, its attempt is closed unsent', async () => {
    let sends = 0;
    const fetch = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    const { store, hold, release } = stalling();
    const c = client(fetch, { store, retry: { deadlineMs: 200 } });
    hold('claim');
    const started = Date.now();
    const error = await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(sends).toBe(0);
    release();
    await eventually(async () => (await c.get(SCOPE))?.lease === null);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'pending', attempts: [{ class: 'not_sent', reason: 'aborted before it was sent' }], error: { code: 'DEADLINE_EXCEEDED' } });
    expect((await c.fetch(URL_ORDERS, { ...post, once: SCOPE })).status).toBe(201);
    expect(sends).toBe(1);
  });

  it("a takeover whose compare-and-set does not answer: the caller's reason at once; when it lands, the lease is released", async () => {
    const { store, hold, release } = stalling();
    const busy = (async () => new Response('', { status: 503 })) as typeof globalThis.fetch;
    await expect(client(busy, { store, retry: { maxAttempts: 1 } }).fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(RetriesExhaustedError);
    const c = client(busy, { store });
    hold('cas');
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    setTimeout(() => caller.abort(reason), 100);
    await expect(c.fetch(URL_ORDERS, { ...post, signal: caller.signal, once: SCOPE })).rejects.toBe(reason);
    release();
    await eventually(async () => (await c.get(SCOPE))?.error?.message === reason.message);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'retryable' }] });
  });

  it('a read while waiting on another owner does not answer: DeadlineExceededError at deadlineMs', async () => {
    const { store, hold, release } = stalling();
    const owner = client(never, { store, retry: { attemptTimeoutMs: 60_000 } });
    void owner.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch(() => undefined);
    while ((await owner.get(SCOPE))?.state !== 'in_flight') await new Promise((r) => setTimeout(r, 5));
    hold('get');
    const started = Date.now();
    const error = await client(never, { store, retry: { deadlineMs: 200 } }).fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(Date.now() - started).toBeLessThan(1_000);
    release();
    // (its own call waits on a transport that never answers: close() would wait for it until its attempt timeout)
    await owner.close({ waitMs: 0 });
  });

  // Regression: the write that opens an attempt on a resumed record (attempt_started) was awaited
  // without the deadline; when it landed, the transport was called with an aborted signal (recorded
  // ambiguous although fetch never left) and a client.run effect ran after the deadline.
  describe('the write that opens an attempt on a resumed record does not answer', () => {
    const opening = (next: OperationRecord): boolean => next.state === 'in_flight';

    it('client.fetch: DeadlineExceededError at deadlineMs, nothing sent; when it lands, the attempt is closed unsent', async () => {
      const { store, holdCas, release } = stalling();
      const busy = (async () => new Response('', { status: 503 })) as typeof globalThis.fetch;
      await expect(client(busy, { store, retry: { maxAttempts: 1 } }).fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(RetriesExhaustedError);
      let sends = 0;
      // honours its signal as fetch does: an aborted signal sends nothing
      const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
        init?.signal?.throwIfAborted();
        sends++;
        return new Response('{"id":"o-1"}', { status: 201 });
      }) as typeof globalThis.fetch;
      const c = client(fetch, { store, retry: { deadlineMs: 200 } });
      holdCas(opening);
      const call = c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
      const early = await Promise.race([call, tick(1_000).then(() => 'still waiting after 1 s')]);
      release();
      await call;
      expect(early).toBeInstanceOf(DeadlineExceededError);
      await eventually(async () => (await c.get(SCOPE))?.lease === null);
      expect(await c.get(SCOPE)).toMatchObject({ state: 'pending', attempts: [{ class: 'retryable' }, { class: 'not_sent', reason: 'aborted before it was sent' }] });
      expect(sends).toBe(0);
      expect((await c.fetch(URL_ORDERS, { ...post, once: SCOPE })).status).toBe(201);
      expect(sends).toBe(1);
    });

    it("client.run: the caller's reason at once, the effect is never run with an aborted signal", async () => {
      const { store, holdCas, release } = stalling();
      const REF = { action: 'charge', ref: 'R-1' };
      const c0 = client(never, { store, retry: { maxAttempts: 1 } });
      await expect(c0.run(REF, async () => Promise.reject(Object.assign(new Error('busy'), { status: 503 })))).rejects.toBeInstanceOf(RetriesExhaustedError);
      let runs = 0;
      const c = client(never, { store });
      holdCas(opening);
      const caller = new AbortController();
      const reason = new Error('caller gave up');
      setTimeout(() => caller.abort(reason), 100);
      const call = c.run({ ...REF, signal: caller.signal }, async () => (runs++, 'done')).catch((e: unknown) => e);
      const early = await Promise.race([call, tick(1_000).then(() => 'still waiting after 1 s')]);
      release();
      await call;
      expect(early).toBe(reason);
      await eventually(async () => (await c.get(REF))?.lease === null);
      expect(runs).toBe(0);
      expect(await c.get(REF)).toMatchObject({ state: 'pending', attempts: [{ class: 'retryable' }, { class: 'not_sent' }] });
    });
  });

  // Regression: a claim that landed after its call gave up is abandoned in the background; a new call
  // of the same client read it first (in_flight, attempt 1 open, the lease in our own name) and took
  // it over as ambiguous: nothing sent, AmbiguousOutcomeError, the record stuck ambiguous.
  describe('a claim that lands after its call gave up, and a new call of the same client', () => {
    const AFTER_ABANDON = 'aborted before it was sent';
    /** the abandon's close of the late claim's attempt is slower than the new call's takeover would be */
    const slowClose = (): ((next: OperationRecord) => number) => {
      let once = true;
      return (next) => (once && next.attempts.at(-1)?.reason === AFTER_ABANDON ? ((once = false), 30) : 0);
    };
    const counting = () => {
      const sent = { n: 0 };
      const fetch = (async () => (sent.n++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
      return { sent, fetch };
    };

    it('a joined call whose first caller gave up waits for the abandon, then sends once', async () => {
      const { sent, fetch } = counting();
      const { store, hold, release, slowCas, claims } = stalling();
      slowCas(slowClose());
      const c = client(fetch, { store });
      hold('claim');
      const callerA = new AbortController();
      const reason = new Error('A gave up');
      const a = c.fetch(URL_ORDERS, { ...post, signal: callerA.signal, once: SCOPE }).catch((e: unknown) => e);
      while (claims() < 1) await tick(5);
      const joined = c.fetch(URL_ORDERS, { ...post, once: SCOPE }).then((r) => r.status, (e: unknown) => e);
      await tick(10);
      callerA.abort(reason);
      expect(await a).toBe(reason);
      await tick(10);
      release();
      expect(await joined).toBe(201);
      expect(sent.n).toBe(1);
      expect(await c.get(SCOPE)).toMatchObject({ state: 'succeeded', attempts: [{ class: 'not_sent', reason: AFTER_ABANDON }, { class: 'success' }] });
    });

    it('a retry right after the deadline waits for the abandon, then sends once', async () => {
      const { sent, fetch } = counting();
      const { store, hold, release, slowCas } = stalling();
      slowCas(slowClose());
      const c = client(fetch, { store, retry: { deadlineMs: 150 } });
      hold('claim');
      expect(await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e)).toBeInstanceOf(DeadlineExceededError);
      const again = c.fetch(URL_ORDERS, { ...post, once: SCOPE }).then((r) => r.status, (e: unknown) => e);
      await tick(20);
      release();
      expect(await again).toBe(201);
      expect(sent.n).toBe(1);
      expect(await c.get(SCOPE)).toMatchObject({ state: 'succeeded', attempts: [{ class: 'not_sent' }, { class: 'success' }] });
    });

    it('a new call waiting for such an abandon ends at its own deadline, nothing sent', async () => {
      const { sent, fetch } = counting();
      const { store, hold, release } = stalling();
      const c = client(fetch, { store, retry: { deadlineMs: 100 } });
      hold('claim');
      expect(await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e)).toBeInstanceOf(DeadlineExceededError);
      const started = Date.now();
      expect(await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e)).toBeInstanceOf(DeadlineExceededError);
      expect(Date.now() - started).toBeLessThan(1_000);
      release();
      await eventually(async () => (await c.get(SCOPE))?.lease === null);
      expect((await c.fetch(URL_ORDERS, { ...post, once: SCOPE })).status).toBe(201);
      expect(sent.n).toBe(1);
    });
  });

  // Review R1b: another owner took the late claim over (its lease had expired) before the abandon
  // closed the attempt that claim opened: the attempt read as possibly sent and the abandon's "not
  // sent" was kept only as a note, so the record stayed ambiguous for good (no lookup, no dedupe).
  // Only the owner that opened an attempt knows it never handed it to the transport: its close
  // (never_sent, by attempt id) now applies under the new owner's lease too.
  it("another owner takes a late claim over first: the abandon's close clears the attempt it opened, the next call sends once", async () => {
    const AFTER_ABANDON = 'aborted before it was sent';
    let sends = 0;
    const fetch = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    const { store, hold, release, slowCas } = stalling();
    slowCas((next) => (next.attempts.at(-1)?.reason === AFTER_ABANDON ? 150 : 0));
    const a = client(fetch, { store, owner: 'a', leaseMs: 100, retry: { deadlineMs: 150 } });
    hold('claim');
    expect(await a.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e)).toBeInstanceOf(DeadlineExceededError);
    release(); // the claim lands, its lease already expired; its abandon's close is slow
    const b = client(fetch, { store, owner: 'b' });
    await eventually(async () => (await b.get(SCOPE)) !== undefined);
    // b takes over first: attempt 1 may have been sent; no lookup, no dedupe
    expect(await b.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e)).toBeInstanceOf(AmbiguousOutcomeError);
    await eventually(async () => (await b.get(SCOPE))?.attempts[0]?.finishedAt !== null || (await b.get(SCOPE))!.evidence.some((e) => e.owner === 'a'));
    expect(await b.get(SCOPE)).toMatchObject({ state: 'pending', attempts: [{ owner: 'a', class: 'not_sent', reason: AFTER_ABANDON }] });
    expect((await b.fetch(URL_ORDERS, { ...post, once: SCOPE })).status).toBe(201);
    expect(sends).toBe(1);
  });

  it('a gating write that never answers holds the record for this client only until its lease would have expired', async () => {
    const { store, holdCas } = stalling();
    const busy = (async () => new Response('', { status: 503 })) as typeof globalThis.fetch;
    await expect(client(busy, { store, retry: { maxAttempts: 1 } }).fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(RetriesExhaustedError);
    let sends = 0;
    const ok = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    const c = client(ok, { store, leaseMs: 200, retry: { deadlineMs: 150 } });
    let lost = false; // the first attempt_started write of the resumed record is lost: it never answers
    holdCas((next) => next.state === 'in_flight' && !lost && (lost = true));
    await expect(c.fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(DeadlineExceededError);
    await tick(250); // that write's lease has expired
    const res = await c.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect(res.status).toBe(201);
    expect(sends).toBe(1);
  });

  it("an onEvent listener that aborts the call at attempt_started: nothing is sent, the attempt is closed not_sent", async () => {
    let sends = 0;
    const abort = new AbortController();
    const c = client((async () => (sends++, new Response('{}', { status: 201 }))) as typeof globalThis.fetch, {
      onEvent: (e) => {
        if (e.type === 'attempt_started') abort.abort(new Error('caller gave up'));
      },
    });
    await expect(c.fetch(URL_ORDERS, { ...post, signal: abort.signal, once: SCOPE })).rejects.toThrow('caller gave up');
    expect(sends).toBe(0);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'pending', lease: null, attempts: [{ class: 'not_sent' }] });
  });
});

describe('clock skew between owners', () => {
  it("a stamp from an owner whose clock runs a minute ahead holds an \"absent\" off for settleMs, not for the skew", async () => {
    const store = memoryStore();
    let effects = 0;
    // B, its clock a minute ahead, sends; its request never reaches the provider, and B's call is
    // aborted while it hangs: the attempt is ambiguous, stamped a minute in our future.
    const abortB = new AbortController();
    let bSent!: () => void;
    const bOnWire = new Promise<void>((r) => (bSent = r));
    const b = client(
      (async (_input: RequestInfo | URL, init?: RequestInit) => {
        bSent();
        await new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)));
        return new Response(null, { status: 500 });
      }) as typeof globalThis.fetch,
      { store, owner: 'b', now: () => Date.now() + 60_000 },
    );
    const bCall = b.fetch(URL_ORDERS, { ...post, signal: abortB.signal, once: SCOPE }).catch((e: unknown) => e);
    await bOnWire;
    abortB.abort(new Error('B gives up'));
    await bCall;
    expect(await b.get(SCOPE)).toMatchObject({ state: 'ambiguous' });
    // C, on the real clock: its lookup says absent (true: nothing reached the provider).
    const c = client(
      (async () => {
        effects++;
        return new Response('{"id":1}', { status: 201 });
      }) as typeof globalThis.fetch,
      { store, owner: 'c', settleMs: 200, retry: { deadlineMs: 5_000 } },
    );
    const started = Date.now();
    const res = await c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, lookup: async () => null } });
    expect(res.status).toBe(201);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(effects).toBe(1);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'succeeded' });
  });
});
