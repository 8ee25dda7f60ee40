/**
 * Retry amplification against a provider that always fails: the default retry
 * budget keeps oncefetch at or under 1.1 attempts per operation; p-retry's and
 * ky's defaults, run for real under fake timers, make what the bench reports.
 */
import ky from 'ky';
import pRetry from 'p-retry';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultEnginePolicy, simulateContention, simulateFailingProvider } from '../../bench/amplification.js';
import { createClient, memoryStore } from '../../src/index.js';

afterEach(() => {
  vi.useRealTimers();
});

/** Advances fake time in steps until `promise` settles (or `maxMs` passes). */
async function settle<T>(promise: Promise<T>, stepMs: number, maxMs: number): Promise<PromiseSettledResult<T>> {
  let result: PromiseSettledResult<T> | undefined;
  void promise.then(
    (value) => (result = { status: 'fulfilled', value }),
    (reason: unknown) => (result = { status: 'rejected', reason }),
  );
  for (let t = 0; t <= maxMs && result === undefined; t += stepMs) await vi.advanceTimersByTimeAsync(stepMs);
  if (result === undefined) throw new Error(`did not settle within ${maxMs} ms of fake time`);
  return result;
}

describe('retry amplification under 100 % failure', () => {
  it('the simulation with the real budget and backoff: ≤ 1.1 attempts per operation for 1,000 operations', () => {
    for (const arrivalEveryMs of [0, 1, 50]) {
      const run = simulateFailingProvider(defaultEnginePolicy(), 1000, arrivalEveryMs);
      expect(run.attemptsPerOperation).toBeLessThanOrEqual(1.1);
      expect(run.attemptsPerOperation).toBeGreaterThan(1); // retries do happen, within the budget
    }
    expect(simulateFailingProvider({ ...defaultEnginePolicy(), budget: undefined }, 1000, 1).attemptsPerOperation).toBe(5);
  });

  it('the real engine with its defaults makes ≤ 1,100 attempts for 1,000 operations that all get 503', async () => {
    vi.useFakeTimers();
    let attempts = 0;
    const fetch = (async () => {
      attempts++;
      return new Response('busy', { status: 503 });
    }) as typeof globalThis.fetch;
    const client = createClient({ tenant: 't', store: memoryStore(), fetch, random: () => 0.5, telemetry: false });
    const calls = Array.from({ length: 1000 }, (_, i) =>
      client.fetch('http://provider.test/orders', { method: 'POST', body: `{"i":${i}}`, once: { action: 'create', ref: `r${i}` } }),
    );
    const outcomes = await settle(Promise.allSettled(calls), 250, 200_000);
    expect(outcomes.status).toBe('fulfilled');
    const settled = (outcomes as PromiseFulfilledResult<PromiseSettledResult<Response>[]>).value;
    expect(settled.every((o) => o.status === 'rejected')).toBe(true); // retries exhausted or budget spent
    expect(attempts).toBeGreaterThan(1000);
    expect(attempts).toBeLessThanOrEqual(1100);
    await client.close();
  });

  it("p-retry's defaults make 11 attempts per failing call", async () => {
    vi.useFakeTimers();
    let calls = 0;
    const outcome = await settle(
      pRetry(async () => {
        calls++;
        throw new Error('503');
      }),
      1_000,
      2_000_000,
    );
    expect(outcome.status).toBe('rejected');
    expect(calls).toBe(11);
  });

  it("ky's defaults: a POST is tried once, a GET three times", async () => {
    vi.useFakeTimers();
    let calls = 0;
    const fetch = (async () => {
      calls++;
      return new Response('busy', { status: 503 });
    }) as typeof globalThis.fetch;
    const post = await settle(ky.post('http://provider.test/orders', { fetch, body: '{}' }).text(), 100, 60_000);
    expect(post.status).toBe('rejected');
    expect(calls).toBe(1);
    calls = 0;
    const get = await settle(ky.get('http://provider.test/orders', { fetch }).text(), 100, 60_000);
    expect(get.status).toBe('rejected');
    expect(calls).toBe(3);
  });

  it('100 contending clients: full jitter needs fewer calls and less time than no jitter', () => {
    const { baseDelayMs, maxDelayMs } = defaultEnginePolicy();
    const none = simulateContention('none', 100, baseDelayMs, maxDelayMs);
    const full = simulateContention('full', 100, baseDelayMs, maxDelayMs);
    expect(none.calls).toBe(5050); // lock-step: one winner per round
    expect(full.calls).toBeLessThan(none.calls / 5);
    expect(full.completionMs).toBeLessThan(none.completionMs / 10);
  });
});
