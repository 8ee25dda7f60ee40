import { describe, expect, it } from 'vitest';

import { backoffDelay, type BackoffOptions, type JitterMode } from '../../src/backoff/backoff.js';

const OPTIONS: BackoffOptions = { baseDelayMs: 100, maxDelayMs: 5000 };
const fixed = (value: number) => () => value;

describe('backoffDelay', () => {
  it.each<[JitterMode, number, number, number | undefined, number]>([
    // full: floor(random · min(max, base · 2^(attempt-1)))
    ['full', 1, 0, undefined, 0],
    ['full', 1, 0.5, undefined, 50],
    ['full', 1, 0.999, undefined, 99],
    ['full', 2, 0.5, undefined, 100],
    ['full', 3, 0.5, undefined, 200],
    ['full', 3, 0.999, undefined, 399],
    ['full', 6, 0.999, undefined, 3196],
    ['full', 7, 0.999, undefined, 4995], // 6400 capped at 5000
    ['full', 7, 0.5, undefined, 2500],
    ['full', 7, 0, undefined, 0],
    ['full', 5000, 0.5, undefined, 2500], // 2^4999 overflows: cap applies
    // none: min(max, base · 2^(attempt-1)), random ignored
    ['none', 1, 0.5, undefined, 100],
    ['none', 2, 0, undefined, 200],
    ['none', 3, 0.999, undefined, 400],
    ['none', 6, 0.5, undefined, 3200],
    ['none', 7, 0.5, undefined, 5000],
    ['none', 1025, 0.5, undefined, 5000],
    ['none', Number.MAX_SAFE_INTEGER, 0.5, undefined, 5000],
    // decorrelated: min(max, base + random · (previous · 3 - base)), previous defaults to base
    ['decorrelated', 1, 0, undefined, 100],
    ['decorrelated', 1, 0.5, undefined, 200],
    ['decorrelated', 1, 0.999, undefined, 299],
    ['decorrelated', 2, 0, 250, 100],
    ['decorrelated', 2, 0.5, 250, 425],
    ['decorrelated', 2, 0.999, 250, 749],
    ['decorrelated', 5, 0.999, 3000, 5000], // 8991 capped
    ['decorrelated', 5, 0, 3000, 100],
    ['decorrelated', 2, 0.5, 10, 100], // previous · 3 below base: stays at base
    ['decorrelated', 2, 0, Number.MAX_VALUE, 100], // no NaN from 0 · Infinity
    ['decorrelated', 2, 0.5, Number.MAX_VALUE, 5000],
  ])('%s attempt %i random %d previous %s → %i', (mode, attempt, random, previous, expected) => {
    expect(backoffDelay(mode, attempt, OPTIONS, fixed(random), previous)).toBe(expected);
  });

  it('does not call random for mode none', () => {
    let calls = 0;
    backoffDelay('none', 2, OPTIONS, () => {
      calls++;
      return 0.5;
    });
    expect(calls).toBe(0);
  });

  it('returns whole milliseconds with a fractional base', () => {
    expect(backoffDelay('none', 2, { baseDelayMs: 0.75, maxDelayMs: 100 }, fixed(0))).toBe(1);
    expect(backoffDelay('full', 1, { baseDelayMs: 10, maxDelayMs: 100 }, fixed(0.33))).toBe(3);
  });

  it('handles base 0 and max below base', () => {
    expect(backoffDelay('full', 5000, { baseDelayMs: 0, maxDelayMs: 100 }, fixed(0.5))).toBe(0);
    expect(backoffDelay('none', 1, { baseDelayMs: 500, maxDelayMs: 200 }, fixed(0.5))).toBe(200);
    expect(backoffDelay('decorrelated', 1, { baseDelayMs: 500, maxDelayMs: 200 }, fixed(0))).toBe(200);
  });

  it('keeps decorrelated delays within [base, min(max, previous · 3)) over a random walk', () => {
    let seed = 42;
    const lcg = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let previous: number | undefined;
    for (let attempt = 1; attempt <= 200; attempt++) {
      const delay = backoffDelay('decorrelated', attempt, OPTIONS, lcg, previous);
      const upper = Math.min(OPTIONS.maxDelayMs, Math.max(OPTIONS.baseDelayMs, (previous ?? OPTIONS.baseDelayMs) * 3));
      expect(delay).toBeGreaterThanOrEqual(OPTIONS.baseDelayMs);
      expect(delay).toBeLessThanOrEqual(upper);
      expect(Number.isInteger(delay)).toBe(true);
      previous = delay;
    }
  });

  it.each<[string, () => number]>([
    ['attempt 0', () => backoffDelay('full', 0, OPTIONS, fixed(0))],
    ['attempt 1.5', () => backoffDelay('full', 1.5, OPTIONS, fixed(0))],
    ['attempt NaN', () => backoffDelay('none', Number.NaN, OPTIONS, fixed(0))],
    ['negative baseDelayMs', () => backoffDelay('full', 1, { baseDelayMs: -1, maxDelayMs: 10 }, fixed(0))],
    ['infinite maxDelayMs', () => backoffDelay('full', 1, { baseDelayMs: 1, maxDelayMs: Infinity }, fixed(0))],
    ['NaN maxDelayMs', () => backoffDelay('none', 1, { baseDelayMs: 1, maxDelayMs: Number.NaN }, fixed(0))],
    ['negative previousDelayMs', () => backoffDelay('decorrelated', 2, OPTIONS, fixed(0), -5)],
    ['random() returning 1', () => backoffDelay('full', 1, OPTIONS, fixed(1))],
    ['random() returning -0.1', () => backoffDelay('decorrelated', 1, OPTIONS, fixed(-0.1))],
    ['random() returning NaN', () => backoffDelay('full', 1, OPTIONS, fixed(Number.NaN))],
    ['unknown mode', () => backoffDelay('linear' as JitterMode, 1, OPTIONS, fixed(0))],
  ])('throws RangeError for %s', (_label, run) => {
    expect(run).toThrow(RangeError);
  });

  it('names the offending option', () => {
    expect(() => backoffDelay('full', 1, { baseDelayMs: -1, maxDelayMs: 10 }, fixed(0))).toThrow(/baseDelayMs/);
    expect(() => backoffDelay('full', 1, { baseDelayMs: 1, maxDelayMs: -1 }, fixed(0))).toThrow(/maxDelayMs/);
    expect(() => backoffDelay('full', 0, OPTIONS, fixed(0))).toThrow(/attempt/);
  });
});
