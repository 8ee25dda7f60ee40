import { describe, expect, it } from 'vitest';

import { parseHttpDate, parseRetryAfter } from '../../src/backoff/retry-after.js';

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);

function parse(headers: Record<string, string> | [string, string][], now = NOW): number | undefined {
  return parseRetryAfter(new Headers(headers), now);
}

describe('parseRetryAfter', () => {
  it.each<[string, Record<string, string> | [string, string][], number | undefined]>([
    ["'1' → 1000", { 'retry-after': '1' }, 1000],
    ["'0' → 0", { 'retry-after': '0' }, 0],
    ["'120' → 120000", { 'retry-after': '120' }, 120_000],
    ['surrounding whitespace is trimmed', { 'retry-after': '  3  ' }, 3000],
    ['HTTP-date 5 s ahead (IMF-fixdate)', { 'retry-after': new Date(NOW + 5000).toUTCString() }, 5000],
    ['HTTP-date in the past → 0', { 'retry-after': new Date(NOW - 60_000).toUTCString() }, 0],
    ['HTTP-date now → 0', { 'retry-after': new Date(NOW).toUTCString() }, 0],
    ['RFC 850 date', { 'retry-after': 'Wednesday, 15-Jan-25 12:00:10 GMT' }, 10_000],
    ['asctime date, space-padded day', { 'retry-after': 'Wed Jan 15 12:00:30 2025' }, 30_000],
    ['asctime date, single digit day', { 'retry-after': 'Sun Jan  5 12:00:00 2025' }, 0],
    ["'-1' → undefined", { 'retry-after': '-1' }, undefined],
    ["'5abc' → undefined", { 'retry-after': '5abc' }, undefined],
    ["'1.5' → undefined", { 'retry-after': '1.5' }, undefined],
    ["'' → undefined", { 'retry-after': '' }, undefined],
    ["'1, 2' → undefined", { 'retry-after': '1, 2' }, undefined],
    [
      'two headers joined by Headers.get → undefined',
      [
        ['retry-after', '1'],
        ['retry-after', '2'],
      ],
      undefined,
    ],
    ["'+5' → undefined", { 'retry-after': '+5' }, undefined],
    ["'1e3' → undefined", { 'retry-after': '1e3' }, undefined],
    ["'Infinity' → undefined", { 'retry-after': 'Infinity' }, undefined],
    ['garbage date → undefined', { 'retry-after': 'tomorrow' }, undefined],
    ['impossible date (31 Feb) → undefined', { 'retry-after': 'Mon, 31 Feb 2025 12:00:00 GMT' }, undefined],
    ['hour 24 → undefined', { 'retry-after': 'Wed, 15 Jan 2025 24:00:00 GMT' }, undefined],
    ['date without GMT → undefined', { 'retry-after': 'Wed, 15 Jan 2025 12:00:05' }, undefined],
    ['two dates joined → undefined', { 'retry-after': `${new Date(NOW).toUTCString()}, ${new Date(NOW).toUTCString()}` }, undefined],
    ['absent → undefined', {}, undefined],
    ["retry-after-ms '250' → 250", { 'retry-after-ms': '250' }, 250],
    ["retry-after-ms '0' → 0", { 'retry-after-ms': '0' }, 0],
    ['retry-after-ms decimal rounds up', { 'retry-after-ms': '12.2' }, 13],
    ['retry-after-ms wins over retry-after', { 'retry-after-ms': '250', 'retry-after': '10' }, 250],
    ['invalid retry-after-ms falls back to retry-after', { 'retry-after-ms': '-5', 'retry-after': '2' }, 2000],
    ["retry-after-ms '5abc' alone → undefined", { 'retry-after-ms': '5abc' }, undefined],
    ["retry-after-ms '' alone → undefined", { 'retry-after-ms': '' }, undefined],
    ['huge delta-seconds is returned, not capped', { 'retry-after': '99999999999' }, 99_999_999_999_000],
    ['absurd delta-seconds is clamped, never Infinity', { 'retry-after': '9'.repeat(400) }, Number.MAX_SAFE_INTEGER],
    ['absurd retry-after-ms is clamped', { 'retry-after-ms': '9'.repeat(400) }, Number.MAX_SAFE_INTEGER],
  ])('%s', (_label, headers, expected) => {
    expect(parse(headers)).toBe(expected);
  });

  it('uses the injected clock, not Date.now()', () => {
    const header = { 'retry-after': 'Wed, 15 Jan 2025 12:00:05 GMT' };
    expect(parse(header, NOW)).toBe(5000);
    expect(parse(header, NOW + 2000)).toBe(3000);
    expect(parse(header, NOW + 10_000)).toBe(0);
  });

  it('rounds a fractional clock up to whole ms', () => {
    expect(parse({ 'retry-after': 'Wed, 15 Jan 2025 12:00:05 GMT' }, NOW + 0.5)).toBe(5000);
  });

  it('ignores an HTTP-date when the clock is not finite', () => {
    expect(parse({ 'retry-after': 'Wed, 15 Jan 2025 12:00:05 GMT' }, Number.NaN)).toBeUndefined();
    expect(parse({ 'retry-after': '2' }, Number.NaN)).toBe(2000);
  });
});

describe('parseHttpDate', () => {
  it.each<[string, string, number | undefined]>([
    ['IMF-fixdate (RFC 9110 example)', 'Sun, 06 Nov 1994 08:49:37 GMT', Date.UTC(1994, 10, 6, 8, 49, 37)],
    ['RFC 850 (RFC 9110 example)', 'Sunday, 06-Nov-94 08:49:37 GMT', Date.UTC(1994, 10, 6, 8, 49, 37)],
    ['asctime (RFC 9110 example)', 'Sun Nov  6 08:49:37 1994', Date.UTC(1994, 10, 6, 8, 49, 37)],
    ['RFC 850 near-future two-digit year', 'Friday, 01-Jan-27 00:00:00 GMT', Date.UTC(2027, 0, 1)],
    ['29 Feb in a leap year', 'Thu, 29 Feb 2024 00:00:00 GMT', Date.UTC(2024, 1, 29)],
    ['29 Feb in a common year', 'Sat, 29 Feb 2025 00:00:00 GMT', undefined],
    ['leap second reads as :59', 'Wed, 31 Dec 2025 23:59:60 GMT', Date.UTC(2025, 11, 31, 23, 59, 59)],
    ['year below 100 is not 19xx', 'Mon, 01 Jan 0050 00:00:00 GMT', new Date('0050-01-01T00:00:00Z').getTime()],
    ['ISO 8601 is not an HTTP-date', '2025-01-15T12:00:05Z', undefined],
    ['minute 60', 'Wed, 15 Jan 2025 12:60:00 GMT', undefined],
  ])('%s', (_label, value, expected) => {
    expect(parseHttpDate(value, NOW)).toBe(expected);
  });
});
