/**
 * A custom `fetch` (`createClient({ fetch })`) that ignores its AbortSignal keeps its request out
 * after the attempt timeout ended the attempt: the provider may commit it after a lookup said
 * "absent". In this process that is known: the next attempt (or the next call of the operation in
 * this client) waits for the earlier fetch still out instead of sending again, and its late Response
 * is that attempt's outcome, as `client.run` does for an effect that ignores its signal.
 *
 * Before: a provider that ignores keys and commits 600 ms after the request got two orders (the
 * first request's late commit, and the resend's). Effects are counted at a loopback provider that
 * ignores keys; its lookup sees committed orders only.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceEvent } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { lookupByRef, orderInit, until } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

/** Node's fetch without the signal: the request goes on after the attempt's abort. */
const deaf: typeof fetch = (input, init) => {
  const { signal: _ignored, ...rest } = init ?? {};
  return fetch(input, rest);
};

const HUNG_MS = 30_000;
/** the deadline passed during an attempt (its outcome unknown) or between attempts */
const ENDED_BY_DEADLINE = /^(AmbiguousOutcomeError|DeadlineExceededError)$/;
/** how late past its bound a call or close may end on this shared 2-core machine */
const SLACK_MS = 250;

function client(options: OnceClientOptions, events: OnceEvent[] = []): OnceClient {
  const made = createClient({
    store: memoryStore(),
    onEvent: (e) => events.push(e),
    random: () => 0,
    settleMs: 50,
    ...options,
    retry: { budget: false, attemptTimeoutMs: 200, maxAttempts: 5, deadlineMs: 5_000, ...options.retry },
  });
  cleanups.push(() => made.close({ waitMs: 0 }));
  return made;
}

const order = (c: OnceClient, ref: string, extra: RequestInit = {}): Promise<Response> =>
  c.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...extra, once: { action: 'create-order', ref, lookup: lookupByRef(provider.url) } });

const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;

describe('client.fetch with a custom fetch that ignores its signal', () => {
  it('the next attempt waits for the fetch still out and takes its late 201: one request, one effect', async () => {
    // Commits 1.2 s after it came: the first attempt's lookup (at ~450 ms) must ask before it, on a loaded machine too
    // (committed at 600 ms, a lookup held up past the commit found the order: a 200 from the lookup, not the late 201);
    // the four attempts left wait 400 ms each for it (1.6 s).
    provider.fault({ kind: 'delay_before_commit', delayMs: 1_200, match: { ref: 'LF-1' } });
    const events: OnceEvent[] = [];
    const c = client({ fetch: deaf, retry: { attemptTimeoutMs: 400 } }, events);
    const res = await order(c, 'LF-1');
    expect(res.status).toBe(201);
    expect(((await res.json()) as { ref: string }).ref).toBe('LF-1');
    await new Promise((r) => setTimeout(r, 1_300)); // anything else still out lands (a resend would commit 1.2 s after it came)
    expect(provider.effectsFor('LF-1')).toBe(1);
    expect(sent('LF-1')).toBe(1);
    const record = await c.get({ action: 'create-order', ref: 'LF-1' });
    expect(record).toMatchObject({ state: 'succeeded', result: { status: 201, source: 'attempt' } });
    const finished = events.filter((e) => e.type === 'attempt_finished');
    expect(finished.at(-1)).toMatchObject({ class: 'success', status: 201, reason: 'late, the request of an earlier attempt: status 201' });
  });

  it('across calls of one client: the next call of the operation does not send while the first call\'s request is out', async () => {
    // Commits 950 ms after it came: ~300 ms after the first call's last lookup (at ~660 ms), ~300 ms before the second
    // call's one attempt (from ~660 ms) times out: margins for a loaded machine.
    provider.fault({ kind: 'delay_before_commit', delayMs: 950, match: { ref: 'LF-2' } });
    const c = client({ fetch: deaf, retry: { maxAttempts: 1, attemptTimeoutMs: 600 } });
    const first = await timed(order(c, 'LF-2'));
    expect(first.outcome).toBe('RetriesExhaustedError'); // the lookup said absent: resumable
    expect(provider.effectsFor('LF-2')).toBe(0); // still out
    const again = await order(c, 'LF-2');
    expect(again.status).toBe(201);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(provider.effectsFor('LF-2')).toBe(1);
    expect(sent('LF-2')).toBe(1);
  });

  it('a fetch that honours its signal is not waited for: the next attempt sends at once, as before', async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: 600, match: { ref: 'LF-3' } });
    const events: OnceEvent[] = [];
    // a clock that moves on at every reading: the abort and the fetch's rejection by it never read the same time
    let tick = 0;
    const c = client({ now: () => Date.now() + tick++ }, events);
    const res = await order(c, 'LF-3');
    expect(res.status).toBe(201);
    // (this provider ignores keys and commits an aborted request too: the second effect is its own, as before)
    expect(sent('LF-3')).toBe(2);
    const [a, b] = provider.requests.filter((r) => r.ref === 'LF-3');
    expect(b!.at - a!.at).toBeLessThan(600); // sent before the first could commit: not waited for
    expect(events.filter((e) => e.type === 'attempt_finished').map((e) => (e as { reason: string }).reason)).toEqual(['TimeoutError', 'status 201']);
  });
});

describe('a late response nobody takes', () => {
  it('is cancelled, not left holding its connection, once the operation ended without it', async () => {
    // committed at once, answered 600 ms later: the attempt times out, the lookup finds the order
    provider.fault({ kind: 'delay_after_commit', delayMs: 600, match: { ref: 'LF-8' } });
    const cancelled: unknown[] = [];
    const watched: typeof fetch = async (input, init) => {
      const res = await deaf(input, init);
      const reader = res.body!.getReader();
      const body = new ReadableStream<Uint8Array>({
        pull: async (controller) => {
          const next = await reader.read();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
        cancel: (reason) => (cancelled.push(reason), reader.cancel(reason)),
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const c = client({ fetch: watched });
    const res = await order(c, 'LF-8');
    expect(res.status).toBe(200); // the lookup's answer
    await until(() => cancelled.length > 0, 2_000);
    expect(provider.effectsFor('LF-8')).toBe(1);
    expect(sent('LF-8')).toBe(1);
  });
});

describe('a call waiting for an earlier fetch that never answers still ends', () => {
  it("by the caller's abort: at once, with its reason; nothing sent again", async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: HUNG_MS, match: { ref: 'LF-4' } });
    const events: OnceEvent[] = [];
    const c = client({ fetch: deaf }, events);
    const controller = new AbortController();
    const call = timed(order(c, 'LF-4', { signal: controller.signal }));
    await until(() => events.some((e) => e.type === 'attempt_started' && e.attempt === 2));
    const abortedAt = performance.now();
    const reason = new Error('caller gave up');
    controller.abort(reason);
    const ended = await call;
    expect(ended.value).toBe(reason);
    expect(performance.now() - abortedAt).toBeLessThan(SLACK_MS);
    expect(sent('LF-4')).toBe(1);
  });

  it('by the deadline', async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: HUNG_MS, match: { ref: 'LF-5' } });
    const c = client({ fetch: deaf, retry: { deadlineMs: 700 } });
    const ended = await timed(order(c, 'LF-5'), 3_000);
    expect(ended.outcome).toMatch(ENDED_BY_DEADLINE);
    expect(ended.ms).toBeLessThan(700 + SLACK_MS);
    expect(sent('LF-5')).toBe(1);
  });

  it('by close({ waitMs }): the close is not held past its waitMs, the call ends by its attempt timeout', async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: HUNG_MS, match: { ref: 'LF-6' } });
    const events: OnceEvent[] = [];
    const c = client({ fetch: deaf, retry: { attemptTimeoutMs: 400 } }, events);
    const call = timed(order(c, 'LF-6'), 3_000);
    await until(() => events.some((e) => e.type === 'attempt_started' && e.attempt === 2));
    const closing = timed(c.close({ waitMs: 100 }).then(() => new Response(null, { status: 204 })), 3_000);
    const closed = await closing;
    expect(closed.outcome).toBe('204');
    expect(closed.ms).toBeLessThan(100 + SLACK_MS);
    const ended = await call;
    expect(ended.value).toBeInstanceOf(Error);
    expect(ended.outcome).not.toMatch(/^pending/);
    expect(sent('LF-6')).toBe(1);
  });

  it('by close() without waitMs: the close waits for the call, which ends by its deadline', async () => {
    provider.fault({ kind: 'delay_before_commit', delayMs: HUNG_MS, match: { ref: 'LF-7' } });
    const events: OnceEvent[] = [];
    const c = client({ fetch: deaf, retry: { deadlineMs: 1_000 } }, events);
    const started = performance.now();
    const call = timed(order(c, 'LF-7'), 3_000);
    await until(() => events.some((e) => e.type === 'attempt_started' && e.attempt === 2));
    const closed = await timed(c.close().then(() => new Response(null, { status: 204 })), 3_000);
    expect(closed.outcome).toBe('204');
    expect(performance.now() - started).toBeLessThan(1_000 + SLACK_MS);
    expect((await call).outcome).toMatch(ENDED_BY_DEADLINE);
    expect(sent('LF-7')).toBe(1);
  });
});
