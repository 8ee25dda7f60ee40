/**
 * The retry budget's token is spent only on a retry that is sent: one taken for a retry that an abort
 * (the caller's signal), `client.close()` or a lookup that found the effect cut before its send is
 * given back. Fake timers, injected randomness; the budget is observed through `createRetryBudget`
 * (wrapped to keep the client's instance). Effects are counted as calls of the injected fetch.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RetryBudget } from '../../src/backoff/budget.js';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';
import { settle, settleUntil, track } from '../helpers/fake-clock.js';

const budgets: RetryBudget[] = [];
vi.mock('../../src/backoff/budget.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/backoff/budget.js')>();
  return {
    ...original,
    createRetryBudget: (...args: Parameters<typeof original.createRetryBudget>) => {
      const budget = original.createRetryBudget(...args);
      budgets.push(budget);
      return budget;
    },
  };
});

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'R-1' };

/** A transport that answers from a queue and counts its calls (the effects' upper bound). */
function scriptedFetch(steps: Response[]) {
  const calls: string[] = [];
  const fetch = async (input: RequestInfo | URL): Promise<Response> => {
    calls.push(String(input));
    const step = steps.shift();
    if (step === undefined) throw new Error(`unexpected fetch #${calls.length}`);
    return step;
  };
  return { fetch: fetch as typeof globalThis.fetch, calls };
}

function makeClient(fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  budgets.length = 0;
  const client = createClient({
    store: memoryStore(),
    fetch,
    now: () => Date.now(),
    random: () => 0.5,
    settleMs: 0,
    ...options,
    retry: { baseDelayMs: 1000, maxDelayMs: 10_000, budget: { ratio: 0, reserve: 1 }, ...options.retry },
  });
  expect(budgets).toHaveLength(1);
  return { client, budget: budgets[0] as RetryBudget };
}

const order = (client: ReturnType<typeof createClient>, init: RequestInit = {}) =>
  client.fetch(URL_ORDERS, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sku":"A-17"}', ...init, once: SCOPE });

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

describe('a retry cut before its send gives its budget token back', () => {
  it('by the caller abort during the backoff wait', async () => {
    const { fetch, calls } = scriptedFetch([new Response('busy', { status: 503 })]);
    const { client, budget } = makeClient(fetch);
    const controller = new AbortController();
    const res = track(order(client, { signal: controller.signal }));
    await settleUntil(() => calls.length === 1, 'the first attempt');
    await settle();
    expect(budget.tokens).toBe(0); // taken for the scheduled retry (500 ms)
    await vi.advanceTimersByTimeAsync(100);
    const reason = new Error('user gave up');
    controller.abort(reason);
    await settleUntil(() => res.state() !== 'pending', 'the call to end');
    expect(res.reason()).toBe(reason);
    expect(calls).toHaveLength(1);
    expect(budget.tokens).toBe(1);
    await client.close();
  });

  it('by client.close() during the backoff wait', async () => {
    const { fetch, calls } = scriptedFetch([new Response('busy', { status: 503 })]);
    const { client, budget } = makeClient(fetch);
    const res = track(order(client));
    await settleUntil(() => calls.length === 1, 'the first attempt');
    await settle();
    expect(budget.tokens).toBe(0);
    const closing = client.close({ waitMs: 0 });
    await vi.advanceTimersByTimeAsync(10);
    await settleUntil(() => res.state() !== 'pending', 'the call to end');
    await closing;
    expect(res.state()).toBe('rejected');
    expect(calls).toHaveLength(1);
    expect(budget.tokens).toBe(1);
  });

  it('by a lookup that found the effect before the resend', async () => {
    const { fetch, calls } = scriptedFetch([new Response('oops', { status: 500 })]);
    let lookups = 0;
    const lookup = async () => {
      lookups++;
      return new Response('{"id":"o-1"}', { status: 200, headers: { 'content-type': 'application/json' } });
    };
    const { client, budget } = makeClient(fetch);
    const res = track(client.fetch(URL_ORDERS, { method: 'POST', body: '{}', once: { ...SCOPE, lookup } }));
    await settleUntil(() => calls.length === 1, 'the first attempt');
    await settle();
    expect(budget.tokens).toBe(0); // taken for the retry the lookup comes before
    await vi.advanceTimersByTimeAsync(600);
    await settleUntil(() => res.state() !== 'pending', 'the call to end');
    expect(res.state()).toBe('resolved');
    expect(lookups).toBe(1);
    expect(calls).toHaveLength(1);
    expect(budget.tokens).toBe(1);
    await client.close();
  });

  it('a retry that is sent keeps the token spent', async () => {
    const { fetch, calls } = scriptedFetch([new Response('busy', { status: 503 }), new Response('{"id":"o-1"}', { status: 201 })]);
    const { client, budget } = makeClient(fetch);
    const res = track(order(client));
    await settleUntil(() => calls.length === 1, 'the first attempt');
    await vi.advanceTimersByTimeAsync(600);
    await settleUntil(() => res.state() !== 'pending', 'the call to end');
    expect(res.state()).toBe('resolved');
    expect(calls).toHaveLength(2);
    expect(budget.tokens).toBe(0);
    await client.close();
  });
});
