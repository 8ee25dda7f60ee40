/**
 * Pure parsing of the server's requested wait (`retry-after-ms`, `Retry-After`).
 * The clock is injected; nothing here sleeps or caps: the engine compares the result
 * with `maxRetryAfterMs` and the remaining deadline.
 *
 * @module
 */

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

/** `Sun, 06 Nov 1994 08:49:37 GMT` */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
/** `Sunday, 06-Nov-94 08:49:37 GMT` */
const RFC_850 = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`,
  'i',
);
/** `Sun Nov  6 08:49:37 1994` (day padded with a space) */
const ASCTIME = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, 'i');

const DELTA_SECONDS = /^\d+$/;
const DECIMAL_MS = /^\d+(?:\.\d+)?$/;

/** Clamp for absurdly large values so callers never see a non-finite or imprecise number. */
const MAX_WAIT_MS = Number.MAX_SAFE_INTEGER;

interface DateParts {
  year: number;
  month: string;
  day: string;
  hour: string;
  minute: string;
  second: string;
}

/**
 * Builds epoch ms from validated parts; `undefined` for impossible dates (31 Feb, 25:00).
 * A leap second (`:60`) is read as `:59`.
 */
function toEpochMs(parts: DateParts): number | undefined {
  const month = MONTHS.indexOf(parts.month.toLowerCase());
  const day = Number(parts.day.trim());
  const hour = Number(parts.hour);
  const minute = Number(parts.minute);
  const second = Math.min(Number(parts.second), 59);
  if (month < 0 || hour > 23 || minute > 59 || Number(parts.second) > 60) return undefined;
  // Date.UTC maps years 0–99 to 19xx, so set the full year separately.
  const date = new Date(Date.UTC(2000, month, day, hour, minute, second));
  date.setUTCFullYear(parts.year);
  if (date.getUTCMonth() !== month || date.getUTCDate() !== day) return undefined;
  return date.getTime();
}

/**
 * RFC 9110 §5.6.7: a two-digit year names the year with those digits closest to now: one that
 * would be more than 50 years ahead is the most recent past year with the same digits, and one
 * in the next century (near a century boundary) is read as ahead, not as a century ago.
 */
function expandTwoDigitYear(twoDigits: number, now: number): number {
  const currentYear = new Date(now).getUTCFullYear();
  const year = Math.floor(currentYear / 100) * 100 + twoDigits;
  if (year > currentYear + 50) return year - 100;
  if (year <= currentYear - 50) return year + 100;
  return year;
}

/**
 * Parses an HTTP-date in any of the three forms RFC 9110 requires recipients to accept.
 *
 * @returns epoch ms, or `undefined` when the text is not exactly one valid HTTP-date.
 */
export function parseHttpDate(value: string, now: number): number | undefined {
  let match = IMF_FIXDATE.exec(value);
  if (match !== null) {
    const [, day = '', month = '', year = '', hour = '', minute = '', second = ''] = match;
    return toEpochMs({ year: Number(year), month, day, hour, minute, second });
  }
  match = RFC_850.exec(value);
  if (match !== null) {
    const [, day = '', month = '', year = '', hour = '', minute = '', second = ''] = match;
    return toEpochMs({ year: expandTwoDigitYear(Number(year), now), month, day, hour, minute, second });
  }
  match = ASCTIME.exec(value);
  if (match !== null) {
    const [, month = '', day = '', hour = '', minute = '', second = '', year = ''] = match;
    return toEpochMs({ year: Number(year), month, day, hour, minute, second });
  }
  return undefined;
}

/**
 * Returns the wait the server asked for, in ms.
 *
 * Parses `retry-after-ms` first (non-negative finite decimal milliseconds, rounded up),
 * then `Retry-After`: delta-seconds (`/^\d+$/` only) or an HTTP-date in IMF-fixdate,
 * RFC 850 or asctime form. A date in the past gives `0`. An invalid `retry-after-ms`
 * falls through to `Retry-After`.
 *
 * Invalid values (negative, `5abc`, `1.5` seconds, empty, or two values joined by `, `
 * as `Headers.get` does with repeated headers) give `undefined`, so the caller falls back
 * to its own backoff. Huge values are clamped to `Number.MAX_SAFE_INTEGER`; capping to
 * a sensible wait is the engine's job. Never throws, never returns NaN or a negative.
 *
 * @param now - current time, epoch ms (injected clock).
 *
 * @example
 * parseRetryAfter(new Headers({ 'retry-after': '2' }), Date.now()); // 2000
 * parseRetryAfter(new Headers({ 'retry-after-ms': '250' }), Date.now()); // 250
 */
export function parseRetryAfter(headers: Headers, now: number): number | undefined {
  const ms = headers.get('retry-after-ms')?.trim();
  if (ms !== undefined && DECIMAL_MS.test(ms)) {
    return clampWait(Math.ceil(Number(ms)));
  }
  const value = headers.get('retry-after')?.trim();
  if (value === undefined || value === '') return undefined;
  if (DELTA_SECONDS.test(value)) return clampWait(Number(value) * 1000);
  if (!Number.isFinite(now)) return undefined;
  const at = parseHttpDate(value, now);
  if (at === undefined) return undefined;
  return clampWait(Math.max(0, Math.ceil(at - now)));
}

function clampWait(ms: number): number {
  return Number.isNaN(ms) ? 0 : Math.min(ms, MAX_WAIT_MS);
}
