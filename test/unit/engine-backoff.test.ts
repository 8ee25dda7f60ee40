/**
 * The attempt loop's waits, through the public API: which delay is scheduled
 * (fake timers, injected randomness), that no attempt leaves before it, and how
 * the loop stops (attempt limit, Retry-After caps, deadline, abort, budget).
 * Effects are counted as calls of the injected fetch.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineExceededError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceEvent } from '../../src/index.js';
import { settle, track } from '../helpers/fake-clock.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'A-17' };

const realSetImmediate = globalThis.setImmediate;

/** Waits in real time (fake time stands still) until `condition` holds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const started = performance.now();
  while (!condition()) {
    if (performance.now() - started > 5000) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((resolve) => realSetImmediate(resolve));
  }
  await settle();
}

type Step = Response | Error | { reject: unknown };

/** A transport that answers from a queue and records every call. */
function scriptedFetch(steps: Step[]) {
  const calls: { url: string; method: string; headers: Headers; at: number }[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    calls.push({ url: String(input), method: init?.method ?? 'GET', headers: new Headers(init?.headers), at: Date.now() });
    const step = steps.shift();
    if (step === undefined) throw new Error(`unexpected fetch #${calls.length}`);
    if (step instanceof Response) return step;
    if (step instanceof Error) throw step;
    throw step.reject;
  };
  return { fetch: fetch as typeof globalThis.fetch, calls };
}

const status = (code: number, headers: Record<string, string> = {}): Response =>
  new Response(code === 201 ? '{"id":"o-1"}' : `status ${code}`, { status: code, headers });

function makeClient(fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  const events: OnceEvent[] = [];
  const client = createClient({
    store: memoryStore(),
    fetch,
    now: () => Date.now(),
    random: () => 0.5,
    onEvent: (e) => events.push(e),
    ...options,
    retry: { baseDelayMs: 100, maxDelayMs: 10_000, budget: false, ...options.retry },
  });
  const scheduled = () => events.filter((e): e is Extract<OnceEvent, { type: 'retry_scheduled' }> => e.type === 'retry_scheduled');
  return { client, events, scheduled };
}

function order(client: OnceClient, init: RequestInit & { signal?: AbortSignal } = {}, scope = SCOPE): Promise<Response> {
  return client.fetch(URL_ORDERS, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sku: 'A-17', qty: 1 }),
    ...init,
    once: scope,
  });
}

/** Advances fake time in small steps until `promise` settles. */
async function drive<T>(promise: Promise<T>, stepMs = 10, maxMs = 120_000): Promise<T> {
  const t = track(promise);
  for (let elapsed = 0; elapsed <= maxMs; elapsed += stepMs) {
    await settle();
    if (t.state() !== 'pending') break;
    await vi.advanceTimersByTimeAsync(stepMs);
  }
  return promise;
}

/**
 * Asserts that fetch call number `n + 1` happens exactly `delayMs` after call `n`:
 * not at `delayMs - 1`, and at `delayMs`.
 */
async function expectNextCallAfter(calls: unknown[], delayMs: number): Promise<void> {
  const before = calls.length;
  await vi.advanceTimersByTimeAsync(delayMs - 1);
  await settle();
  expect(calls.length, `no attempt before ${delayMs} ms`).toBe(before);
  await vi.advanceTimersByTimeAsync(1);
  await until(() => calls.length > before, `attempt ${before + 1}`);
  expect(calls.length, `the next attempt at ${delayMs} ms`).toBe(before + 1);
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

describe('backoff delays', () => {
  it('full jitter: attempts 1..3 with baseDelayMs 100 and random 0.5 wait 50, 100, 200 ms, and no attempt leaves early', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(503), status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch);
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    expect(calls).toHaveLength(1);
    await expectNextCallAfter(calls, 50);
    await expectNextCallAfter(calls, 100);
    await expectNextCallAfter(calls, 200);
    await settle();
    expect(res.state()).toBe('resolved');
    expect(res.value()?.status).toBe(201);
    expect(scheduled().map((e) => [e.attempt, e.delayMs, e.source])).toEqual([
      [1, 50, 'backoff'],
      [2, 100, 'backoff'],
      [3, 200, 'backoff'],
    ]);
    expect(calls.map((c) => c.at - calls[0]!.at)).toEqual([0, 50, 150, 350]);
  });

  it('sends the same key header on every attempt', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(503), status(201)]);
    const { client } = makeClient(fetch);
    await drive(order(client));
    const keys = calls.map((c) => c.headers.get('idempotency-key'));
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
    expect((await client.get(SCOPE))?.key).toBe(keys[0]);
  });

  it('decorrelated: each delay grows from the previous one (200, 350, 575 with base 100 and random 0.5)', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(503), status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { jitter: 'decorrelated' } });
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    await expectNextCallAfter(calls, 200);
    await expectNextCallAfter(calls, 350);
    await expectNextCallAfter(calls, 575);
    await settle();
    expect(res.state()).toBe('resolved');
    expect(scheduled().map((e) => e.delayMs)).toEqual([200, 350, 575]);
  });

  it('caps a delay at maxDelayMs', async () => {
    const { fetch } = scriptedFetch([status(503), status(503), status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { baseDelayMs: 100, maxDelayMs: 150 }, random: () => 0.999 });
    await drive(order(client));
    // min(150, 100·2^(n-1)) · 0.999, floored
    expect(scheduled().map((e) => e.delayMs)).toEqual([99, 149, 149]);
  });
});

describe('server-requested waits', () => {
  it('Retry-After: 2 waits exactly 2000 ms with source retry-after, without jitter', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': '2' }), status(201)]);
    const { client, scheduled } = makeClient(fetch, { random: () => 0.999 });
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    await expectNextCallAfter(calls, 2000);
    await settle();
    expect(res.state()).toBe('resolved');
    expect(scheduled()).toEqual([expect.objectContaining({ attempt: 1, delayMs: 2000, source: 'retry-after' })]);
  });

  it('retry-after-ms: 250 waits 250 ms', async () => {
    const { fetch, calls } = scriptedFetch([status(429, { 'retry-after-ms': '250' }), status(201)]);
    const { client, scheduled } = makeClient(fetch);
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    await expectNextCallAfter(calls, 250);
    await settle();
    expect(res.state()).toBe('resolved');
    expect(scheduled()).toEqual([expect.objectContaining({ delayMs: 250, source: 'retry-after' })]);
  });

  it.each(['5abc', '-1', '1.5'])('an invalid Retry-After %j falls back to our backoff (50 ms)', async (value) => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': value }), status(201)]);
    const { client, scheduled } = makeClient(fetch);
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    await expectNextCallAfter(calls, 50);
    await settle();
    expect(res.state()).toBe('resolved');
    expect(scheduled()).toEqual([expect.objectContaining({ delayMs: 50, source: 'backoff' })]);
  });

  // Retry-After: 0, or an HTTP-date already past, means "now": the retry waits for the next timer tick
  // (a 0 ms wait, a macrotask: never a synchronous loop), without jitter (random never drawn), and
  // maxAttempts and the budget still bound how many.
  it.each<[string, () => string]>([
    ['0', () => '0'],
    ['an HTTP-date a minute ago', () => new Date(Date.now() - 60_000).toUTCString()],
  ])('Retry-After: %s retries on the next timer tick, no jitter, at most maxAttempts', async (_label, value) => {
    const { fetch, calls } = scriptedFetch(Array.from({ length: 4 }, () => status(503, { 'retry-after': value() })));
    let draws = 0;
    const { client, scheduled } = makeClient(fetch, { random: () => (draws++, 0.5), retry: { maxAttempts: 4 } });
    const started = Date.now();
    const call = order(client);
    const res = track(call);
    await until(() => calls.length === 1, 'the first attempt');
    await settle();
    expect(calls.length, 'the retry waits for a timer, even one of 0 ms').toBe(1);
    await drive(call, 1).catch(() => undefined);
    await until(() => res.state() !== 'pending', 'the call to stop');
    expect(res.reason()).toBeInstanceOf(RetriesExhaustedError);
    expect(calls).toHaveLength(4);
    // no wait (fake timers run a 0 ms timer set during a tick 1 ms later: at most 1 ms a retry)
    expect(calls.at(-1)!.at - started).toBeLessThanOrEqual(3);
    expect(scheduled().map((e) => [e.delayMs, e.source])).toEqual(Array.from({ length: 3 }, () => [0, 'retry-after']));
    expect(draws).toBe(0);
  });

  it('Retry-After: 0 still spends the retry budget: a drained budget stops it', async () => {
    const { fetch, calls } = scriptedFetch(Array.from({ length: 5 }, () => status(503, { 'retry-after': '0' })));
    const { client } = makeClient(fetch, { retry: { maxAttempts: 5, budget: { reserve: 1, ratio: 0 } } });
    const err = await drive(order(client)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect((err as Error).message).toMatch(/retry budget exhausted/);
    expect(calls).toHaveLength(2);
  });

  it('a Retry-After beyond maxRetryAfterMs stops at once with RetriesExhaustedError; the record stays resumable', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': '120' })]);
    const { client, scheduled } = makeClient(fetch, { retry: { maxRetryAfterMs: 60_000 } });
    const res = track(order(client));
    // no fake time passes: "at once", never a two-minute sleep
    await until(() => res.state() !== 'pending', 'the call to stop');
    expect(res.state()).toBe('rejected');
    const err = res.reason();
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(err).toMatchObject({ code: 'RETRIES_EXHAUSTED', retryAfterMs: 120_000, attempts: 1 });
    expect(calls).toHaveLength(1);
    expect(scheduled()).toHaveLength(0);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
    expect(record?.error?.code).toBe('RETRIES_EXHAUSTED');
  });

  it('a stopped record is resumed by the next call with the same key', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': '120' }), status(201)]);
    const { client } = makeClient(fetch, { retry: { maxRetryAfterMs: 60_000 } });
    await expect(drive(order(client))).rejects.toBeInstanceOf(RetriesExhaustedError);
    const res = await drive(order(client));
    expect(res.status).toBe(201);
    expect(calls).toHaveLength(2);
    expect(calls[1]!.headers.get('idempotency-key')).toBe(calls[0]!.headers.get('idempotency-key'));
  });

  it('a wait beyond the remaining deadline stops with DeadlineExceededError carrying retryAfterMs; the record stays resumable', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': '2' })]);
    const { client, scheduled } = makeClient(fetch, { retry: { deadlineMs: 1500 } });
    const res = track(order(client));
    await until(() => res.state() !== 'pending', 'the call to stop');
    expect(res.state()).toBe('rejected');
    expect(res.reason()).toBeInstanceOf(DeadlineExceededError);
    expect(res.reason()).toMatchObject({ code: 'DEADLINE_EXCEEDED', retryAfterMs: 2000 });
    expect(calls).toHaveLength(1);
    expect(scheduled()).toHaveLength(0);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
  });

  // The floor after a wait: min(attemptTimeoutMs, deadlineMs / 10), here min(30000, 200) = 200 ms.
  it.each([1999, 2000, 1801])('retry-after-ms %i with deadlineMs 2000 leaves under 200 ms for the attempt: stops at once, nothing sent, resumable, no budget token spent', async (waitMs) => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after-ms': String(waitMs) }), status(201), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { deadlineMs: 2000, budget: { reserve: 1, ratio: 0 } } });
    const res = track(order(client));
    await until(() => res.state() !== 'pending', 'the call to stop');
    expect(res.reason()).toBeInstanceOf(DeadlineExceededError);
    expect(res.reason()).toMatchObject({ code: 'DEADLINE_EXCEEDED', retryAfterMs: waitMs });
    expect(calls).toHaveLength(1);
    expect(scheduled()).toHaveLength(0);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
    expect(record?.attempts.map((a) => a.class)).toEqual(['retryable']);
    // the budget's one token is still there: another operation may retry
    const { fetch: f2, calls: c2 } = scriptedFetch([status(503), status(201)]);
    const other = makeClient(f2, { retry: { budget: { reserve: 1, ratio: 0 } } });
    expect((await drive(order(other.client))).status).toBe(201);
    expect(c2).toHaveLength(2);
  });

  it('retry-after-ms 1800 with deadlineMs 2000 leaves exactly the 200 ms floor: the retry is sent', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after-ms': '1800' }), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { deadlineMs: 2000 } });
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    expect(scheduled()).toEqual([expect.objectContaining({ delayMs: 1800, source: 'retry-after' })]);
    await expectNextCallAfter(calls, 1800);
    await until(() => res.state() !== 'pending', 'the call to end');
    expect(res.value()?.status).toBe(201);
  });

  it('an attemptTimeoutMs under a tenth of the deadline is the floor: 50 ms left after the wait is enough', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after-ms': '1950' }), status(201)]);
    const { client } = makeClient(fetch, { retry: { deadlineMs: 2000, attemptTimeoutMs: 50 } });
    const res = track(order(client));
    await until(() => calls.length === 1, 'the first attempt');
    await expectNextCallAfter(calls, 1950);
    await until(() => res.state() !== 'pending', 'the call to end');
    expect(res.value()?.status).toBe(201);
  });

  it('a jittered backoff that would leave under the floor stops the same way, without retryAfterMs', async () => {
    // full jitter, random 0.5: 0.5 · 3700 = 1850 ms, leaving 150 < 200 ms
    const { fetch, calls } = scriptedFetch([status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { deadlineMs: 2000, baseDelayMs: 3700 } });
    const res = track(order(client));
    await until(() => res.state() !== 'pending', 'the call to stop');
    expect(res.reason()).toBeInstanceOf(DeadlineExceededError);
    expect((res.reason() as DeadlineExceededError).retryAfterMs).toBeUndefined();
    expect(calls).toHaveLength(1);
    expect(scheduled()).toHaveLength(0);
    expect((await client.get(SCOPE))?.state).toBe('pending');
  });
});

describe('limits', () => {
  it('maxAttempts: 3 with three 503s rejects with RetriesExhaustedError after exactly 3 fetch calls', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(503), status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { maxAttempts: 3 } });
    const err = await drive(order(client)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(err).toMatchObject({ attempts: 3 });
    expect(calls).toHaveLength(3);
    expect(scheduled()).toHaveLength(2);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('pending');
    expect(record?.attempts.map((a) => a.class)).toEqual(['retryable', 'retryable', 'retryable']);
    expect(record?.lease).toBeNull();
  });

  it('abort during a backoff wait rejects with signal.reason itself and sends nothing more', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(201)]);
    const { client, scheduled } = makeClient(fetch, { retry: { baseDelayMs: 1000 } });
    const controller = new AbortController();
    const res = track(order(client, { signal: controller.signal }));
    await until(() => calls.length === 1, 'the first attempt');
    expect(scheduled()).toEqual([expect.objectContaining({ delayMs: 500 })]);
    await vi.advanceTimersByTimeAsync(100);
    const reason = new Error('user gave up');
    controller.abort(reason);
    await settle();
    expect(res.state()).toBe('rejected');
    expect(res.reason()).toBe(reason);
    await vi.advanceTimersByTimeAsync(10_000);
    await settle();
    expect(calls).toHaveLength(1);
    // the aborted call gives the operation up: another call may resume it at once
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
  });

  it('an abort reason that is not an Error is passed through unchanged', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(201)]);
    const { client } = makeClient(fetch, { retry: { baseDelayMs: 1000 } });
    const controller = new AbortController();
    const res = track(order(client, { signal: controller.signal }));
    await until(() => calls.length === 1, 'the first attempt');
    await vi.advanceTimersByTimeAsync(100);
    const reason = { why: 'navigated away' };
    controller.abort(reason);
    await settle();
    expect(res.reason()).toBe(reason);
    await vi.advanceTimersByTimeAsync(10_000);
    await settle();
    expect(calls).toHaveLength(1);
  });

  it('an abort during a lookup rejects with a non-Error reason unchanged and leaves the record ambiguous, unleased', async () => {
    const { fetch, calls } = scriptedFetch([status(500), status(201)]);
    const { client } = makeClient(fetch);
    let lookups = 0;
    const lookup = ({ signal }: { signal: AbortSignal }) =>
      new Promise<Response | null>((_, reject) => {
        lookups++;
        signal.addEventListener('abort', () => reject(new Error('lookup interrupted')), { once: true });
      });
    const controller = new AbortController();
    const res = track(
      client.fetch(URL_ORDERS, { method: 'POST', body: '{}', signal: controller.signal, once: { ...SCOPE, lookup } }),
    );
    await until(() => calls.length === 1, 'the first attempt');
    await vi.advanceTimersByTimeAsync(50); // the backoff before reconciling
    await settle();
    expect(lookups).toBe(1);
    const reason = { why: 'shutdown' };
    controller.abort(reason);
    await settle();
    expect(res.state()).toBe('rejected');
    expect(res.reason()).toBe(reason);
    expect(calls).toHaveLength(1);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('ambiguous');
    expect(record?.lease).toBeNull();
  });

  it('an already aborted signal rejects with its reason before anything is sent or stored', async () => {
    const { fetch, calls } = scriptedFetch([status(201)]);
    const { client } = makeClient(fetch);
    const reason = { why: 'too late' };
    await expect(order(client, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(calls).toHaveLength(0);
    expect(await client.get(SCOPE)).toBeUndefined();
  });
});

describe('retry budget', () => {
  it('a drained budget refuses the next operation its retry with RetriesExhaustedError naming the budget', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(201), status(503), status(201)]);
    const { client } = makeClient(fetch, { retry: { budget: { reserve: 1, ratio: 0 } } });
    const first = await drive(order(client, {}, { action: 'create-order', ref: 'B-1' }));
    expect(first.status).toBe(201);
    expect(calls).toHaveLength(2);
    const err = await drive(order(client, {}, { action: 'create-order', ref: 'B-2' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect((err as Error).message).toMatch(/budget/);
    expect(calls).toHaveLength(3);
    const record = await client.get({ action: 'create-order', ref: 'B-2' });
    expect(record?.state).toBe('pending');
    expect(record?.lease).toBeNull();
  });

  it('first attempts earn tokens: with ratio 0.5 and no reserve, the second operation may retry', async () => {
    const { fetch, calls } = scriptedFetch([status(503), status(503), status(201)]);
    const { client } = makeClient(fetch, { retry: { budget: { reserve: 0, ratio: 0.5 } } });
    // 0.5 tokens after the first request: not enough for a retry
    await expect(drive(order(client, {}, { action: 'create-order', ref: 'E-1' }))).rejects.toThrow(/budget/);
    expect(calls).toHaveLength(1);
    // 1.0 token after the second request: one retry
    const res = await drive(order(client, {}, { action: 'create-order', ref: 'E-2' }));
    expect(res.status).toBe(201);
    expect(calls).toHaveLength(3);
  });

  it('a call stopped by Retry-After does not spend a budget token', async () => {
    const { fetch, calls } = scriptedFetch([status(503, { 'retry-after': '3600' }), status(503), status(201)]);
    const { client } = makeClient(fetch, { retry: { budget: { reserve: 1, ratio: 0 } } });
    await expect(drive(order(client, {}, { action: 'create-order', ref: 'C-1' }))).rejects.toMatchObject({ retryAfterMs: 3_600_000 });
    const res = await drive(order(client, {}, { action: 'create-order', ref: 'C-2' }));
    expect(res.status).toBe(201);
    expect(calls).toHaveLength(3);
  });
});
