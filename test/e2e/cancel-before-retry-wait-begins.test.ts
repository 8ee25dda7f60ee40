/**
 * Cancels that arrive before a call's wait before a retry begins (while its attempt is on the wire,
 * or before a joiner joins), not during it. The cancel-during-retry-wait and cancel-joined-and-local
 * tests cancel once the wait has begun; these pin the three ways the wait learns of a cancel that
 * came first:
 *
 * - the call's own `once.signal`, aborted while its attempt was on the wire;
 * - a cancel already recorded on the record (`client.cancel` of another client sharing the store),
 *   read back by the owner as it recorded the attempt's 503;
 * - a joined call whose `once.signal` was aborted before it joined.
 *
 * In each, the provider answers 503 with a `Retry-After`: the call must end at once, cancelled, and
 * send nothing more. Effects are counted at a loopback provider that ignores keys.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit, until, wait } from '../helpers/setup.js';

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

/** A fetch whose response reaches the caller `ms` after the provider answered (the attempt stays on the wire meanwhile). */
function lateAnswer(ms: number): typeof globalThis.fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const res = await globalThis.fetch(input, init);
    await wait(ms);
    return res;
  }) as typeof globalThis.fetch;
}

describe('a cancel that came before the wait before a retry began', () => {
  it("the call's own once.signal, aborted while its attempt is on the wire, then a 503 Retry-After: 30: the call ends at once, cancelled; 1 request, 0 effects", async () => {
    const c = client({ fetch: lateAnswer(300) });
    const ref = 'W-own';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '30' });
    const cancel = new AbortController();
    const call = timed(post(c, ref, cancel.signal), 3_000);
    await until(() => provider.requests.length === 1);
    cancel.abort(new Error('the caller cancels'));
    const ended = await call;
    expect(ended.outcome).toBe('OperationCancelledError');
    expect(ended.ms).toBeLessThan(1_500);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('client.cancel of another client sharing the store, while the attempt is on the wire, then a 503 Retry-After: 30: the call ends at once, cancelled; 1 request, 0 effects', async () => {
    const store = memoryStore();
    const c = client({ store, fetch: lateAnswer(300) });
    const other = client({ store });
    const ref = 'W-other';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '30' });
    const call = timed(post(c, ref), 3_000);
    await until(() => provider.requests.length === 1);
    const result = await other.cancel({ action: ACTION, ref }, { waitMs: 2_500 });
    const ended = await call;
    expect(ended.outcome).toBe('OperationCancelledError');
    expect(ended.ms).toBeLessThan(1_500);
    expect(result).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it('a joined call whose once.signal was aborted before it joined, while the call it joins is on the wire, then a 503 Retry-After: 1: both end cancelled, nothing resent; 1 request, 0 effects', async () => {
    const c = client({ fetch: lateAnswer(300) });
    const ref = 'W-joined';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '1' });
    const owner = timed(post(c, ref), 3_000);
    await until(() => provider.requests.length === 1);
    const aborted = new AbortController();
    aborted.abort(new Error('cancelled before it joined'));
    const joiner = timed(post(c, ref, aborted.signal), 3_000);
    const [o, j] = await Promise.all([owner, joiner]);
    expect(j.outcome).toBe('OperationCancelledError');
    expect(o.outcome).toBe('OperationCancelledError');
    await wait(200);
    expect((await c.get({ action: ACTION, ref }))?.state).toBe('cancelled');
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });
});

describe("a joined call's once.signal after that call ended", () => {
  // AbortSignal.timeout(…) as once.signal fires after the call ended whatever happened: it must not
  // cancel the operation the caller goes on with (a resumable stop, retried later).
  it('aborted after the shared call stopped resumable (a 503, attempts used up) cancels nothing: the retry sends and succeeds; 2 requests, 1 effect', async () => {
    const c = client({ fetch: lateAnswer(300), retry: { maxAttempts: 1 } });
    const ref = 'W-after';
    provider.fault({ kind: 'status_before_commit', status: 503 });
    const owner = timed(post(c, ref), 3_000);
    await until(() => provider.requests.length === 1);
    const signal = new AbortController();
    const joiner = timed(post(c, ref, signal.signal), 3_000);
    const [o, j] = await Promise.all([owner, joiner]);
    expect([o.outcome, j.outcome]).toEqual(['RetriesExhaustedError', 'RetriesExhaustedError']);
    signal.abort(new Error('a stale signal fires'));
    await wait(50);
    expect((await c.get({ action: ACTION, ref }))?.cancelRequestedAt).toBeNull();
    const again = await timed(post(c, ref), 3_000);
    expect(again.outcome).toBe('201');
    expect(provider.requests.length).toBe(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
