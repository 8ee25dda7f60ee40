/**
 * Two cancels that reach a call running in the same client:
 *
 * - (B) a call that joined a running one (same scope and payload) and aborts its own `once.signal`:
 *   the cancel acts as `client.cancel(scope)` does for that operation (recorded at once; nothing on the
 *   wire → cancelled; an attempt on the wire → its outcome decides; after an ambiguous attempt, reconciled
 *   first), and the joined call ends as the call it joined does. Before, its `once.signal` was ignored:
 *   the owner's retry went out after the cancel and the joiner got its 201.
 * - (C) `client.cancel(scope)` while the owner's call of this client waits before a retry (a
 *   `Retry-After`, the backoff): the wait ends at once, as the call's own `once.signal` ends it, and the
 *   call ends as it would have after the wait. Before, it waited out the whole `Retry-After`.
 *
 * Effects are counted at a loopback provider that does not dedupe: a second send is a second effect.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, OperationCancelledError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { lookupByRef, orderInit, until, wait } from '../helpers/setup.js';
import { slowAck } from '../helpers/slow-ack.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

function client(options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store: memoryStore(), telemetry: false, ...options, retry: { deadlineMs: 60_000, budget: false, ...options.retry } });
  cleanups.push(() => c.close({ waitMs: 0 }));
  return c;
}

function post(c: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(signal === undefined ? {} : { signal }) } });
}

type Timed = Awaited<ReturnType<typeof timed>>;

/** A second call of `ref` joins the running `owner`, then aborts its `once.signal` 20 ms in; both outcomes. */
async function joinThenCancel(c: OnceClient, ref: string, owner: Promise<Timed>, capMs: number): Promise<[Timed, Timed]> {
  const cancel = new AbortController();
  const joiner = timed(post(c, ref, cancel.signal), capMs);
  await wait(20); // joined
  cancel.abort(new Error('the joiner cancels'));
  return Promise.all([owner, joiner]);
}

/** A fetch that holds each request `ms` before it leaves (the attempt is on the wire meanwhile), and tells when one is handed to it. */
function slowFetch(ms: number): { fetch: typeof globalThis.fetch; handed: { n: number } } {
  const handed = { n: 0 };
  const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    handed.n++;
    await wait(ms);
    return globalThis.fetch(input, init);
  }) as typeof globalThis.fetch;
  return { fetch, handed };
}

describe("(B) a joined call's once.signal", () => {
  it('aborted before anything is sent (the claim that opens attempt 1 acknowledged late): both end "cancelled before it was sent"; 0 requests, 0 effects', async () => {
    const { store, plan } = slowAck(memoryStore());
    plan.only = ['claim+attempt'];
    plan.ackDelayMs = 300;
    const c = client({ store });
    const ref = 'J-unsent';
    const owner = timed(post(c, ref), 3_000);
    await until(() => plan.pending);
    const [o, j] = await joinThenCancel(c, ref, owner, 3_000);
    expect(o.outcome).toBe('OperationCancelledError');
    expect(j.outcome).toBe('OperationCancelledError');
    expect(String((j.value as Error).message)).toContain('before it was sent');
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    expect(provider.requests.length).toBe(0);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('aborted while the call it joined waits a 503 Retry-After: 30: both end at once, cancelled, the cancel recorded; 1 request, 0 effects', async () => {
    const c = client();
    const ref = 'J-wait';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '30' });
    const owner = timed(post(c, ref), 3_000);
    await until(() => provider.requests.length === 1);
    await wait(50); // the 503 answered, the wait begun
    const [o, j] = await joinThenCancel(c, ref, owner, 3_000);
    expect(j.outcome).toBe('OperationCancelledError');
    expect(o.outcome).toBe('OperationCancelledError');
    console.log(`joined call cancelled during a Retry-After: 30: joiner ended ${j.ms} ms after it started (cancel ~20 ms in), owner ${o.ms} ms`);
    expect(j.ms).toBeLessThan(1_000);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    await expect(post(c, ref)).rejects.toBeInstanceOf(OperationCancelledError);
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('aborted while the attempt is on the wire and the provider acts: both get the 201 (delivery won, never "cancelled"), the cancel recorded; 1 request, 1 effect', async () => {
    const c = client();
    const ref = 'J-delivered';
    provider.fault({ kind: 'delay_before_commit', delayMs: 400 });
    const owner = post(c, ref);
    await until(() => provider.requests.length === 1);
    const cancel = new AbortController();
    const joiner = post(c, ref, cancel.signal);
    await wait(20);
    cancel.abort(new Error('the joiner cancels'));
    const [o, j] = await Promise.all([owner, joiner]);
    expect(o.status).toBe(201);
    expect(j.status).toBe(201);
    const rec = await c.get({ action: ACTION, ref });
    expect(rec?.state).toBe('succeeded');
    expect(rec?.cancelRequestedAt).not.toBeNull();
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('aborted while the attempt is on the wire and the provider refuses it (503): no retry, both end "cancelled after its attempts"; 1 request, 0 effects', async () => {
    const slow = slowFetch(300);
    const c = client({ fetch: slow.fetch, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
    const ref = 'J-refused';
    provider.fault({ kind: 'status_before_commit', status: 503 });
    const owner = timed(post(c, ref), 3_000);
    await until(() => slow.handed.n === 1);
    const [o, j] = await joinThenCancel(c, ref, owner, 3_000);
    expect(o.outcome).toBe('OperationCancelledError');
    expect(j.outcome).toBe('OperationCancelledError');
    expect(String((j.value as Error).message)).toContain('nothing delivered');
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('aborted while the attempt is on the wire and its response is lost after the provider acted: reconciled, the lookup finds it, both get its answer (200, the order); 1 request, 1 effect', async () => {
    const slow = slowFetch(300);
    const c = client({ fetch: slow.fetch, lookups: { [ACTION]: lookupByRef(provider.url) }, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
    const ref = 'J-lost';
    provider.fault({ kind: 'drop_after_commit' });
    const owner = timed(post(c, ref), 5_000);
    await until(() => slow.handed.n === 1);
    const [o, j] = await joinThenCancel(c, ref, owner, 5_000);
    // (the lookup's answer, the order it found: 200)
    expect(o.outcome).toBe('200');
    expect(j.outcome).toBe('200');
    const rec = await c.get({ action: ACTION, ref });
    expect(rec?.state).toBe('succeeded');
    expect(rec?.cancelRequestedAt).not.toBeNull();
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('aborted while the attempt is on the wire and its response is lost, no lookup: never resent, both end AmbiguousOutcomeError (not "cancelled"); 1 request, 1 effect', async () => {
    const slow = slowFetch(300);
    const c = client({ fetch: slow.fetch, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
    const ref = 'J-lost-nolookup';
    provider.fault({ kind: 'drop_after_commit' });
    const owner = timed(post(c, ref), 5_000);
    await until(() => slow.handed.n === 1);
    const [o, j] = await joinThenCancel(c, ref, owner, 5_000);
    expect(o.outcome).toBe('AmbiguousOutcomeError');
    expect(j.outcome).toBe('AmbiguousOutcomeError');
    expect(j.value).toBeInstanceOf(AmbiguousOutcomeError);
    const rec = await c.get({ action: ACTION, ref });
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.cancelRequestedAt).not.toBeNull();
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('(C) client.cancel(scope) while the call of this client waits before a retry', () => {
  for (const [how, fault, retry] of [
    ['a 503 Retry-After: 30', { kind: 'status_before_commit', status: 503, retryAfter: '30' }, {}],
    ['a 503 and a 30 s backoff', { kind: 'status_before_commit', status: 503 }, { baseDelayMs: 30_000, maxDelayMs: 30_000, jitter: 'none' }],
  ] as const) {
    it(`after ${how}: the call ends at once with OperationCancelledError, cancel() says cancelled; 1 request, 0 effects`, async () => {
      const c = client({ retry });
      const ref = `L-${how}`;
      provider.fault(fault);
      const call = timed(post(c, ref), 3_000);
      await until(() => provider.requests.length === 1);
      await wait(50); // the 503 answered, the wait begun
      const started = performance.now();
      const result = await c.cancel({ action: ACTION, ref }, { waitMs: 5_000 });
      const cancelMs = performance.now() - started;
      const ended = await call;
      console.log(`client.cancel during ${how}: cancel() returned in ${Math.round(cancelMs)} ms, the call ended ${ended.ms} ms after it started`);
      expect(ended.outcome).toBe('OperationCancelledError');
      expect(ended.ms).toBeLessThan(1_000);
      expect(cancelMs).toBeLessThan(1_000);
      expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
      await expect(post(c, ref)).rejects.toBeInstanceOf(OperationCancelledError);
      expect(provider.requests.length).toBe(1);
      expect(provider.effectsFor(ref)).toBe(0);
    });
  }
});

describe('(C) client.cancel(scope) while the call waits before a same-key resend after an ambiguous attempt (providerDedupes, no lookup)', () => {
  it('the call ends at once, AmbiguousOutcomeError (never "cancelled"), and resends nothing after the cancel; 1 request, 1 effect', async () => {
    const keyed = await startProvider();
    cleanups.push(() => keyed.close());
    const c = client({ providerDedupes: true, retry: { baseDelayMs: 30_000, maxDelayMs: 30_000, jitter: 'none' } });
    const ref = 'L-ambiguous';
    keyed.fault({ kind: 'drop_after_commit' });
    const call = timed(c.fetch(`${keyed.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }), 3_000);
    await until(() => keyed.requests.length === 1);
    await wait(100); // the response lost, the wait before the same-key resend begun
    const result = await c.cancel({ action: ACTION, ref }, { waitMs: 5_000 });
    const ended = await call;
    console.log(`client.cancel during the wait before a same-key resend: the call ended ${ended.outcome} ${ended.ms} ms after it started; cancel() ${result.outcome}`);
    expect(ended.outcome).toBe('AmbiguousOutcomeError');
    expect(ended.ms).toBeLessThan(1_000);
    expect(result).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    await wait(200);
    expect(keyed.requests.length).toBe(1);
    expect(keyed.effectsFor(ref)).toBe(1);
  });
});
