import { describe, expect, it } from 'vitest';

import { createRetryBudget, type RetryBudgetOptions } from '../../src/backoff/budget.js';

/** 1000 operations that always fail, each wanting up to `maxRetries` retries. */
function simulate(options: RetryBudgetOptions | undefined, operations: number, maxRetries: number): number {
  const budget = createRetryBudget(options);
  let attempts = 0;
  for (let op = 0; op < operations; op++) {
    budget.recordRequest();
    attempts++; // attempt 1
    for (let retry = 0; retry < maxRetries && budget.tryRetry(); retry++) attempts++;
  }
  return attempts;
}

describe('createRetryBudget', () => {
  it('starts with the reserve (default 10)', () => {
    expect(createRetryBudget().tokens).toBe(10);
    expect(createRetryBudget({ reserve: 3 }).tokens).toBe(3);
  });

  // The default ratio became 0.09 (was 0.1) so that reserve + deposits fit the 1.1× target.
  it('caps retry amplification at 1.1 under 100% failure with defaults', () => {
    const amplification = simulate(undefined, 1000, 5) / 1000;
    expect(amplification).toBeLessThanOrEqual(1.1);
    expect(amplification).toBeGreaterThanOrEqual(1.05);
  });

  it('grants exactly reserve + operations · ratio retries (fixed point, no float drift)', () => {
    expect(simulate(undefined, 1000, 5)).toBe(1000 + 10 + 90); // defaults: reserve 10, ratio 0.09
    expect(simulate({ ratio: 0.1 }, 1000, 5)).toBe(1000 + 10 + 100);
    expect(simulate({ ratio: 0.2, reserve: 0 }, 1000, 5)).toBe(1000 + 200);
    expect(simulate({ ratio: 0, reserve: 4 }, 1000, 5)).toBe(1000 + 4);
  });

  it('lets ten first attempts at ratio 0.1 fund exactly one retry', () => {
    const budget = createRetryBudget({ ratio: 0.1, reserve: 0 });
    for (let i = 0; i < 9; i++) budget.recordRequest();
    expect(budget.tryRetry()).toBe(false);
    budget.recordRequest();
    expect(budget.tokens).toBe(1);
    expect(budget.tryRetry()).toBe(true);
    expect(budget.tryRetry()).toBe(false);
    expect(budget.tokens).toBe(0);
  });

  it('withdraws one token per allowed retry and nothing when refused', () => {
    const budget = createRetryBudget({ reserve: 2 });
    expect(budget.tryRetry()).toBe(true);
    expect(budget.tokens).toBe(1);
    expect(budget.tryRetry()).toBe(true);
    expect(budget.tryRetry()).toBe(false);
    expect(budget.tokens).toBe(0);
  });

  it('never stores more than maxTokens (default 100)', () => {
    const budget = createRetryBudget();
    for (let i = 0; i < 10_000; i++) budget.recordRequest();
    expect(budget.tokens).toBe(100);
    const small = createRetryBudget({ reserve: 1, maxTokens: 2, ratio: 1 });
    for (let i = 0; i < 5; i++) small.recordRequest();
    expect(small.tokens).toBe(2);
  });

  it('recovers after a healthy period', () => {
    const budget = createRetryBudget({ ratio: 0.1, reserve: 0 });
    expect(budget.tryRetry()).toBe(false);
    for (let i = 0; i < 50; i++) budget.recordRequest();
    let granted = 0;
    while (budget.tryRetry()) granted++;
    expect(granted).toBe(5);
  });

  it.each<[RetryBudgetOptions, RegExp]>([
    [{ ratio: -0.1 }, /ratio/],
    [{ ratio: 1.5 }, /ratio/],
    [{ ratio: Number.NaN }, /ratio/],
    [{ reserve: -1 }, /reserve/],
    [{ reserve: Infinity }, /reserve/],
    [{ reserve: 200 }, /reserve/],
    [{ maxTokens: -1 }, /maxTokens/],
    [{ maxTokens: Infinity }, /maxTokens/],
  ])('rejects %o with a RangeError naming the option', (options, name) => {
    expect(() => createRetryBudget(options)).toThrow(RangeError);
    expect(() => createRetryBudget(options)).toThrow(name);
  });

  it('accepts the edges of each range', () => {
    expect(() => createRetryBudget({ ratio: 0, reserve: 0, maxTokens: 0 })).not.toThrow();
    expect(() => createRetryBudget({ ratio: 1, reserve: 100, maxTokens: 100 })).not.toThrow();
  });
});
