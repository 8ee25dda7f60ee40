/**
 * Retry-budget invariants over many calls with mixed outcomes (503, 500 before/after the effect, a
 * reset after the effect, ECONNREFUSED, a Retry-After over the cap), lookups that find, miss or fail,
 * and caller aborts: with ratio 0 nothing is deposited, so every token taken and not given back is a
 * retry sent. At the end `reserve - tokens` equals the retries sent (attempts numbered 2 and up);
 * meanwhile tokens never exceed the reserve. Effects are counted at a scripted provider (per ref: at
 * most one).
 */
import { describe, expect, it, vi } from 'vitest';
import type { RetryBudget } from '../../src/backoff/budget.js';
import { createClient, memoryStore } from '../../src/index.js';
import type { LookupFn } from '../../src/index.js';

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

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const connRefused = () => new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
const connReset = () => new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

const RESERVE = 40;

async function round(seed: number, dedupes: boolean) {
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  budgets.length = 0;
  const effects = new Map<string, number>();
  const keysSeen = new Map<string, Set<string>>();
  let over = 0;
  let retriesSent = 0;
  const fetch = (async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const ref = new URL(String(input)).searchParams.get('ref') ?? '';
    const key = new Headers(init?.headers).get('idempotency-key') ?? '';
    const act = () => {
      const seen = keysSeen.get(ref) ?? new Set<string>();
      keysSeen.set(ref, seen);
      if (dedupes && seen.has(key)) return;
      seen.add(key);
      effects.set(ref, (effects.get(ref) ?? 0) + 1);
    };
    await delay(Math.floor(random() * 3));
    switch (pick(['ok', 'busy', 'busy', 'busyLong', '500before', '500after', 'resetAfter', 'refused'] as const)) {
      case 'ok':
        act();
        return new Response('{"id":1}', { status: 201 });
      case 'busy':
        return new Response('busy', { status: 503 });
      case 'busyLong':
        return new Response('busy', { status: 503, headers: { 'retry-after': '3600' } });
      case '500before':
        return new Response('oops', { status: 500 });
      case '500after':
        act();
        return new Response('oops', { status: 500 });
      case 'resetAfter':
        act();
        throw connReset();
      case 'refused':
        throw connRefused();
    }
  }) as typeof globalThis.fetch;
  const lookup: LookupFn = async ({ scope }) => {
    await delay(Math.floor(random() * 3));
    const r = random();
    if (r < 0.2) throw new Error('lookup down');
    return (effects.get(scope.ref) ?? 0) > 0 ? new Response('{"id":1}', { status: 200 }) : null;
  };
  const client = createClient({
    store: memoryStore(),
    fetch,
    random,
    settleMs: 0,
    providerDedupes: dedupes,
    telemetry: false,
    onEvent: (e) => {
      if ((budgets[0]?.tokens ?? 0) > RESERVE) over++;
      if (e.type === 'attempt_started' && e.attempt >= 2) retriesSent++;
    },
    retry: { baseDelayMs: 1, maxDelayMs: 4, maxAttempts: 1 + Math.floor(random() * 4), deadlineMs: 400, attemptTimeoutMs: 100, budget: { ratio: 0, reserve: RESERVE, maxTokens: 100 } },
  });
  const budget = budgets[0];
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < 30; i++) {
    const ref = `R-${seed}-${i}`;
    const ctl = new AbortController();
    if (random() < 0.2) setTimeout(() => ctl.abort(new Error('gave up')), Math.floor(random() * 10));
    const withLookup = random() < 0.7;
    calls.push(
      client
        .fetch(`https://api.example.test/orders?ref=${ref}`, {
          method: 'POST',
          body: '{}',
          signal: ctl.signal,
          once: { action: 'create-order', ref, ...(withLookup ? { lookup } : {}) },
        })
        .then((r) => r.status, (e: unknown) => (e instanceof Error ? e.name : String(e))),
    );
    if (random() < 0.5) await delay(1);
  }
  await Promise.all(calls);
  await delay(20);
  await client.close();
  return { tokens: budget?.tokens, retriesSent, over, effects };
}

describe('retry budget over many calls', () => {
  for (const dedupes of [false, true]) {
    it(`ratio 0: reserve - tokens == retries sent, never over the reserve (providerDedupes ${dedupes})`, async () => {
      for (let seed = 1; seed <= 25; seed++) {
        const { tokens, retriesSent, over, effects } = await round(seed, dedupes);
        expect({ seed, spent: RESERVE - (tokens ?? NaN), over }).toEqual({ seed, spent: retriesSent, over: 0 });
        for (const [ref, n] of effects) expect(n, ref).toBeLessThanOrEqual(1);
      }
    }, 60_000);
  }
});
