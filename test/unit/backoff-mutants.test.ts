/**
 * Tests written to kill hand-made mutants of src/backoff/ that the backoff suites let survive:
 * the 50-year edges of RFC 850 two-digit years and the last millisecond of a chained sleep.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

import { parseHttpDate } from '../../src/backoff/retry-after.js';
import { sleep } from '../../src/backoff/sleep.js';

describe('RFC 850 two-digit years at exactly 50 years (RFC 9110 §5.6.7: "more than 50 years")', () => {
  it('a year exactly 50 years ahead stays ahead', () => {
    const now = Date.UTC(2025, 5, 1);
    expect(parseHttpDate('Monday, 01-Jan-75 00:00:00 GMT', now)).toBe(Date.UTC(2075, 0, 1));
  });

  it('a year 51 years ahead is the past one', () => {
    const now = Date.UTC(2025, 5, 1);
    expect(parseHttpDate('Monday, 01-Jan-76 00:00:00 GMT', now)).toBe(Date.UTC(1976, 0, 1));
  });

  it('a year exactly 50 years back (across a century) is read as 50 years ahead', () => {
    const now = Date.UTC(2060, 5, 1);
    expect(parseHttpDate('Monday, 01-Jan-10 00:00:00 GMT', now)).toBe(Date.UTC(2110, 0, 1));
  });
});

describe('sleep beyond the platform timer limit', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits the last millisecond of a chained wait', async () => {
    vi.useFakeTimers();
    const limit = 2 ** 31 - 1;
    const resolved = vi.fn();
    void sleep(limit + 1).then(resolved);
    await vi.advanceTimersByTimeAsync(limit);
    expect(resolved).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(resolved).toHaveBeenCalledTimes(1);
  });
});
