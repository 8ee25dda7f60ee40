/**
 * Property-based tests of backoff: every delay `backoffDelay` computes lies within
 * its jitter mode's bounds for any attempt number, base, cap and random draw; and,
 * through the public client against a transport that always answers 503, the waits
 * the engine schedules are each within those bounds and add up to no more than the
 * deadline. Time is fake; randomness is injected from the property's seed.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { backoffDelay } from '../../src/backoff/backoff.js';
import type { JitterMode } from '../../src/backoff/backoff.js';
import { DeadlineExceededError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import type { OnceEvent } from '../../src/index.js';
import { mulberry32 } from '../../src/testing/provider-faults.js';

/** A draw in [0, 1), the edges included. */
const drawArb = fc.oneof(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), fc.constantFrom(0, 0.5, 1 - Number.EPSILON / 2));
const attemptArb = fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 5_000 }));
/** Integer delays in ms, as the client's options validation requires, base <= max. */
const boundsArb = fc
  .tuple(fc.nat({ max: 100_000 }), fc.nat({ max: 1_000_000 }))
  .map(([a, b]) => ({ baseDelayMs: Math.min(a, b), maxDelayMs: Math.max(a, b) }));

/** `min(max, base · 2^(n-1))` written independently of the implementation. */
function cap(attempt: number, base: number, max: number): number {
  let value = base;
  for (let i = 1; i < attempt && value < max; i++) value *= 2;
  return Math.min(max, value);
}

describe('backoffDelay', () => {
  it("full jitter: a whole number of ms in [0, min(max, base·2^(n-1))], for any draw", () => {
    fc.assert(
      fc.property(attemptArb, boundsArb, drawArb, (attempt, bounds, draw) => {
        const delay = backoffDelay('full', attempt, bounds, () => draw);
        expect(Number.isSafeInteger(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(cap(attempt, bounds.baseDelayMs, bounds.maxDelayMs));
      }),
      { numRuns: 2000 },
    );
  });

  it('full jitter grows with the draw and spans the whole range', () => {
    fc.assert(
      fc.property(attemptArb, boundsArb, drawArb, drawArb, (attempt, bounds, a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        expect(backoffDelay('full', attempt, bounds, () => lo)).toBeLessThanOrEqual(backoffDelay('full', attempt, bounds, () => hi));
        expect(backoffDelay('full', attempt, bounds, () => 0)).toBe(0);
        const upper = cap(attempt, bounds.baseDelayMs, bounds.maxDelayMs);
        expect(backoffDelay('full', attempt, bounds, () => 1 - Number.EPSILON / 2)).toBeGreaterThanOrEqual(upper - 1);
      }),
      { numRuns: 500 },
    );
  });

  it("no jitter: exactly min(max, base·2^(n-1))", () => {
    fc.assert(
      fc.property(attemptArb, boundsArb, (attempt, bounds) => {
        expect(backoffDelay('none', attempt, bounds, () => 0.5)).toBe(cap(attempt, bounds.baseDelayMs, bounds.maxDelayMs));
      }),
      { numRuns: 1000 },
    );
  });

  it('decorrelated jitter: every delay of a chain is in [base, max], whatever the previous delay', () => {
    fc.assert(
      fc.property(boundsArb, fc.array(drawArb, { minLength: 1, maxLength: 30 }), fc.option(fc.nat({ max: 10_000_000 }), { nil: undefined }), (bounds, draws, first) => {
        let previous: number | undefined = first;
        draws.forEach((draw, i) => {
          const delay = backoffDelay('decorrelated', i + 1, bounds, () => draw, previous);
          expect(Number.isSafeInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(bounds.baseDelayMs);
          expect(delay).toBeLessThanOrEqual(bounds.maxDelayMs);
          previous = delay;
        });
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses, never computes, a draw outside [0, 1) or a bad attempt number', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<JitterMode>('full', 'decorrelated'),
        fc.oneof(fc.double({ min: 1, noNaN: false }), fc.double({ max: -Number.MIN_VALUE }), fc.constant(Number.NaN)),
        boundsArb,
        (mode, draw, bounds) => {
          expect(() => backoffDelay(mode, 1, bounds, () => draw)).toThrow(RangeError);
        },
      ),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.oneof(fc.integer({ max: 0 }), fc.double({ noInteger: true }), fc.constant(Number.NaN)), (attempt) => {
        expect(() => backoffDelay('full', attempt, { baseDelayMs: 1, maxDelayMs: 2 }, () => 0)).toThrow(RangeError);
      }),
      { numRuns: 300 },
    );
  });
});

describe('the engine against a provider that always answers 503', () => {
  const realSetImmediate = globalThis.setImmediate;
  const tick = (): Promise<void> => new Promise((resolve) => realSetImmediate(resolve));

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });


  it('each scheduled delay is within its bounds, their sum within deadlineMs, and the call stops with a typed error', async () => {
    const stops = { RETRIES_EXHAUSTED: 0, DEADLINE_EXCEEDED: 0 };
    await fc.assert(
      fc.asyncProperty(
        boundsArb.filter((b) => b.maxDelayMs <= 60_000),
        fc.integer({ min: 1, max: 120_000 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom<JitterMode>('full', 'decorrelated', 'none'),
        fc.integer(),
        async (bounds, deadlineMs, maxAttempts, jitter, seed) => {
          let calls = 0;
          const keys = new Set<string | null>();
          const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
            calls++;
            keys.add(new Headers(init?.headers).get('idempotency-key'));
            return new Response('unavailable', { status: 503 });
          }) as typeof globalThis.fetch;
          const events: OnceEvent[] = [];
          const client = createClient({
            store: memoryStore(),
            fetch,
            now: () => Date.now(),
            random: mulberry32(seed),
            onEvent: (e) => events.push(e),
            retry: { ...bounds, deadlineMs, maxAttempts, jitter, budget: false },
          });
          let error: unknown;
          let settled = false;
          client
            .fetch('https://api.example.test/orders', { method: 'POST', body: '{"sku":"A-17"}', headers: { 'content-type': 'application/json' }, once: { action: 'a', ref: 'r' } })
            .then(
              () => (settled = true),
              (e: unknown) => {
                error = e;
                settled = true;
              },
            );
          const waits = (): Extract<OnceEvent, { type: 'retry_scheduled' }>[] =>
            events.filter((e): e is Extract<OnceEvent, { type: 'retry_scheduled' }> => e.type === 'retry_scheduled');
          // Sleep exactly each scheduled wait (a 0 ms timer armed inside a fake tick is due 1 ms later).
          let slept = 0;
          // Bounded in real time, not in ticks: WebCrypto and the store answer from outside the event loop.
          const giveUpAt = performance.now() + 5_000;
          while (!settled && performance.now() < giveUpAt) {
            await tick();
            const next = waits()[slept];
            if (next !== undefined) {
              slept++;
              await vi.advanceTimersByTimeAsync(Math.max(1, next.delayMs));
            }
          }
          expect(settled, 'the call settled').toBe(true);
          const delays = waits().map((w) => w.delayMs);
          let previous: number | undefined;
          delays.forEach((delay, i) => {
            const attempt = i + 1;
            const upper = cap(attempt, bounds.baseDelayMs, bounds.maxDelayMs);
            if (jitter === 'full') expect(delay).toBeLessThanOrEqual(upper);
            if (jitter === 'none') expect(delay).toBe(upper);
            if (jitter === 'decorrelated') {
              expect(delay).toBeGreaterThanOrEqual(bounds.baseDelayMs);
              expect(delay).toBeLessThanOrEqual(bounds.maxDelayMs);
              expect(delay).toBeLessThanOrEqual(Math.max(bounds.baseDelayMs, 3 * (previous ?? bounds.baseDelayMs)));
            }
            expect(delay).toBeGreaterThanOrEqual(0);
            previous = delay;
          });
          expect(delays.reduce((sum, d) => sum + d, 0)).toBeLessThanOrEqual(deadlineMs);
          // one attempt per completed wait, plus the first (the deadline may cut the last wait short)
          if (error instanceof DeadlineExceededError) expect([delays.length, delays.length + 1]).toContain(calls);
          else expect(calls).toBe(delays.length + 1);
          expect(calls).toBeLessThanOrEqual(maxAttempts);
          expect(keys.size).toBe(1); // every attempt carried the one key
          expect(error instanceof RetriesExhaustedError || error instanceof DeadlineExceededError, String(error)).toBe(true);
          stops[(error as RetriesExhaustedError | DeadlineExceededError).code as keyof typeof stops]++;
          const record = await client.get({ action: 'a', ref: 'r' });
          expect(record?.state).toBe('pending'); // resumable
          await client.close();
        },
      ),
      { numRuns: 150 },
    );
    expect(stops.RETRIES_EXHAUSTED).toBeGreaterThan(0);
    expect(stops.DEADLINE_EXCEEDED).toBeGreaterThan(0);
  });
});
