/**
 * Property-based tests of the server's requested wait: `parseRetryAfter` never
 * throws and never yields a negative, NaN, fractional or unbounded wait, whatever
 * the header says; the exact values it must read are read exactly; and through the
 * public client no hostile header ever makes oncefetch sleep past `maxRetryAfterMs`
 * or the deadline.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseRetryAfter } from '../../src/backoff/retry-after.js';
import { DeadlineExceededError, RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import type { OnceEvent } from '../../src/index.js';

const DAY_MS = 24 * 3600 * 1000;
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** A `Headers`-like view that hands any string to the parser, even ones `new Headers` would refuse. */
function rawHeaders(values: Record<string, string | undefined>): Headers {
  return { get: (name: string) => values[name.toLowerCase()] ?? null } as unknown as Headers;
}

/** A wait the engine can act on: a finite, non-negative, whole number of ms within the safe range. */
function expectSaneWait(ms: number | undefined): void {
  if (ms === undefined) return;
  expect(typeof ms).toBe('number');
  expect(Number.isSafeInteger(ms), `wait ${ms}`).toBe(true);
  expect(ms).toBeGreaterThanOrEqual(0);
}

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');
const time = (d: Date): string => `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;

/** The three HTTP-date forms RFC 9110 makes recipients accept. */
function httpDates(d: Date): string[] {
  const day = d.getUTCDay();
  const month = MONTHS[d.getUTCMonth()] ?? 'Jan';
  return [
    d.toUTCString(),
    `${LONG_DAYS[day]}, ${pad(d.getUTCDate())}-${month}-${pad(d.getUTCFullYear() % 100)} ${time(d)} GMT`,
    `${DAYS[day]} ${month} ${String(d.getUTCDate()).padStart(2, ' ')} ${time(d)} ${d.getUTCFullYear()}`,
  ];
}

const dateArb = fc.date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true });
const nowArb = fc.oneof(
  fc.integer({ min: 0, max: 253_402_300_799_000 }),
  fc.double({ noNaN: false }), // NaN, ±Infinity, negatives, fractions: a broken clock must not break the parser
);

/** Strings that look almost like a number of seconds. */
const numericishArb = fc.oneof(
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc.double().map(String), // 1.5, -0, 1e+300, NaN, Infinity
  fc.tuple(fc.constantFrom('', ' ', '+', '-', '0x', '\t', '00'), fc.nat(), fc.constantFrom('', ' ', 's', '.0', 'e3', ',1', ', 2', '\u00a0', 'abc')).map(
    ([before, n, after]) => `${before}${n}${after}`,
  ),
  fc.constantFrom('', ' ', '1, 2', '1,2', '٣', '１', 'Infinity', '-Infinity', 'NaN', '1_000', '9'.repeat(400)),
);

/** Date-like strings: real dates in all forms, then mangled. */
const datishArb = fc.oneof(
  dateArb.chain((d) => fc.constantFrom(...httpDates(d))),
  fc.tuple(dateArb, fc.nat(), fc.string({ maxLength: 2 })).map(([d, i, s]) => {
    const text = httpDates(d)[i % 3] ?? '';
    const at = i % (text.length + 1);
    return text.slice(0, at) + s + text.slice(at + 1); // one character replaced (or appended)
  }),
  dateArb.map((d) => d.toISOString()),
  dateArb.map((d) => d.toString()),
);

const anyStringArb = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: 'binary-ascii' }),
  fc.string({ unit: 'grapheme' }),
  numericishArb,
  datishArb,
);

describe('parseRetryAfter on any input', () => {
  it('never throws and never yields a negative, NaN, fractional or unsafe wait (Retry-After and retry-after-ms)', () => {
    fc.assert(
      fc.property(fc.option(anyStringArb), fc.option(anyStringArb), nowArb, (retryAfter, retryAfterMs, now) => {
        const headers = rawHeaders({ 'retry-after': retryAfter ?? undefined, 'retry-after-ms': retryAfterMs ?? undefined });
        expectSaneWait(parseRetryAfter(headers, now));
      }),
      { numRuns: 2000 },
    );
  });

  it('the same through real Headers, whatever Headers lets through (repeated headers included)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('retry-after', 'retry-after-ms', 'Retry-After'), anyStringArb), { maxLength: 3 }), nowArb, (pairs, now) => {
        let headers: Headers;
        try {
          headers = new Headers(pairs);
        } catch {
          return; // a value Headers refuses never reaches the parser
        }
        expectSaneWait(parseRetryAfter(headers, now));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('parseRetryAfter reads valid values exactly', () => {
  it('delta-seconds: n seconds is n·1000 ms (clamped to the safe range), with optional surrounding whitespace', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 30n }), fc.constantFrom('', ' ', '\t'), (n, ws) => {
        const got = parseRetryAfter(rawHeaders({ 'retry-after': `${ws}${n}${ws}` }), 0);
        expect(got).toBe(Math.min(Number(n) * 1000, Number.MAX_SAFE_INTEGER));
      }),
      { numRuns: 500 },
    );
  });

  it('retry-after-ms: decimal milliseconds rounded up, and it wins over Retry-After', () => {
    fc.assert(
      fc.property(fc.nat(), fc.option(fc.integer({ min: 0, max: 999 })), fc.nat({ max: 1000 }), (whole, fraction, seconds) => {
        const text = fraction === null ? `${whole}` : `${whole}.${pad(fraction, 3)}`;
        const got = parseRetryAfter(rawHeaders({ 'retry-after-ms': text, 'retry-after': String(seconds) }), 0);
        expect(got).toBe(Math.ceil(Number(text)));
      }),
      { numRuns: 500 },
    );
  });

  it('negative, signed, fractional or suffixed seconds are refused (undefined: fall back to backoff)', () => {
    fc.assert(
      fc.property(
        fc.nat(),
        fc.constantFrom((n: number) => `-${n}`, (n: number) => `+${n}`, (n: number) => `${n}.5`, (n: number) => `${n}abc`, (n: number) => `${n}, ${n}`, (n: number) => `${n}e1`),
        (n, spell) => {
          expect(parseRetryAfter(rawHeaders({ 'retry-after': spell(n) }), 0)).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('an HTTP-date in any of the three forms is the whole seconds until then, 0 when past', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('1990-01-01T00:00:00Z'), max: new Date('2060-12-31T23:59:59Z'), noInvalidDate: true }), fc.integer({ min: -400 * DAY_MS, max: 400 * DAY_MS }), fc.nat({ max: 2 }), (at, offset, form) => {
        const whole = new Date(Math.floor(at.getTime() / 1000) * 1000);
        const now = whole.getTime() - offset;
        const text = httpDates(whole)[form] ?? '';
        // RFC 850 has a two-digit year: it only names the date unambiguously within 50 years of now.
        const nowYear = new Date(now).getUTCFullYear();
        const year = whole.getUTCFullYear();
        fc.pre(form !== 1 || Math.abs(nowYear - year) < 49);
        expect(parseRetryAfter(rawHeaders({ 'retry-after': text }), now), text).toBe(Math.max(0, offset));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('RFC 850 two-digit years (RFC 9110 §5.6.7)', () => {
  it('a date just past a century boundary is read as the coming one, not as a century ago', () => {
    const now = Date.UTC(2099, 11, 31, 23, 59, 0);
    expect(parseRetryAfter(rawHeaders({ 'retry-after': 'Friday, 01-Jan-00 00:00:00 GMT' }), now)).toBe(60_000);
  });

  it('a two-digit year more than 50 years ahead is the most recent past year with those digits', () => {
    const now = Date.UTC(2000, 0, 1, 0, 0, 0);
    expect(parseRetryAfter(rawHeaders({ 'retry-after': 'Friday, 31-Dec-99 23:59:59 GMT' }), now)).toBe(0); // 1999, past
    expect(parseRetryAfter(rawHeaders({ 'retry-after': 'Tuesday, 01-Jan-00 00:01:00 GMT' }), now)).toBe(60_000);
  });
});

describe('hostile Retry-After through the client: never a sleep past maxRetryAfterMs or into the deadline\'s last attempt floor', () => {
  const realSetImmediate = globalThis.setImmediate;
  const tick = (): Promise<void> => new Promise((resolve) => realSetImmediate(resolve));

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const headerArb = fc.oneof(
    fc.record({ 'retry-after': fc.oneof(numericishArb, datishArb, fc.nat({ max: 10 * 86_400 }).map(String)) }),
    fc.record({ 'retry-after-ms': fc.oneof(numericishArb, fc.nat().map(String)) }),
  );

  it('every scheduled wait is within maxRetryAfterMs and the deadline; a longer request stops the call with retryAfterMs', async () => {
    const seen = { succeeded: 0, stoppedByRequestedWait: 0, honoured: 0, fellBack: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.array(headerArb, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 0, max: 20_000 }),
        fc.integer({ min: 1_000, max: 60_000 }),
        async (hints, maxRetryAfterMs, deadlineMs) => {
          const answers = hints.map((h) => {
            try {
              return new Response('busy', { status: 503, headers: h });
            } catch {
              return new Response('busy', { status: 503 }); // a value Headers refuses cannot come from a server
            }
          });
          let calls = 0;
          const fetch = (async () => answers[calls++] ?? new Response('{"id":"o-1"}', { status: 201 })) as typeof globalThis.fetch;
          const events: OnceEvent[] = [];
          const client = createClient({
            store: memoryStore(),
            fetch,
            now: () => Date.now(),
            random: () => 0.5,
            onEvent: (e) => events.push(e),
            retry: { maxAttempts: 10, baseDelayMs: 100, maxDelayMs: 1_000, maxRetryAfterMs, deadlineMs, budget: false },
          });
          const startedAt = Date.now();
          let outcome: { ok: true; status: number } | { ok: false; error: unknown } | undefined;
          client
            .fetch('https://api.example.test/orders', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' }, once: { action: 'a', ref: 'r' } })
            .then((r) => (outcome = { ok: true, status: r.status }), (error: unknown) => (outcome = { ok: false, error }));
          // Drive fake time: each scheduled wait is slept, nothing else advances the clock. (A 0 ms timer
          // armed inside a fake tick is due 1 ms later under the fake clock, hence the max.)
          let slept = 0;
          // Bounded in real time, not in ticks: WebCrypto and the store answer from outside the event loop.
          const giveUpAt = performance.now() + 5_000;
          while (outcome === undefined && performance.now() < giveUpAt) {
            await tick();
            const scheduled = events.filter((e): e is Extract<OnceEvent, { type: 'retry_scheduled' }> => e.type === 'retry_scheduled');
            if (scheduled.length > slept) {
              const delayMs = scheduled[slept]?.delayMs ?? 0;
              slept++;
              await vi.advanceTimersByTimeAsync(Math.max(1, delayMs));
            }
          }
          expect(outcome, 'the call settled').toBeDefined();
          const waits = events.filter((e): e is Extract<OnceEvent, { type: 'retry_scheduled' }> => e.type === 'retry_scheduled');
          for (const w of waits) {
            if (w.source === 'retry-after') {
              seen.honoured++;
              expect(w.delayMs).toBeLessThanOrEqual(maxRetryAfterMs);
            } else {
              seen.fellBack++;
              expect(w.delayMs).toBeLessThanOrEqual(1_000);
            }
          }
          // every wait leaves the next attempt its floor: min(attemptTimeoutMs, deadlineMs / 10), the timeout being 30 s
          const floorMs = Math.min(30_000, deadlineMs / 10);
          if (waits.length > 0) expect(waits.reduce((sum, w) => sum + w.delayMs, 0) + floorMs).toBeLessThanOrEqual(deadlineMs);
          if (outcome?.ok === true) {
            seen.succeeded++;
            expect(outcome.status).toBe(201);
            expect(calls).toBe(hints.length + 1);
          } else {
            const error = outcome?.error;
            expect(error instanceof RetriesExhaustedError || error instanceof DeadlineExceededError, String(error)).toBe(true);
            const wanted = (error as RetriesExhaustedError | DeadlineExceededError).retryAfterMs;
            // stopped by a requested wait: it is reported, and it was too long for the cap or the deadline (less the floor)
            if (wanted !== undefined) seen.stoppedByRequestedWait++;
            if (wanted !== undefined) expect(wanted > maxRetryAfterMs || wanted > deadlineMs - (Date.now() - startedAt) - floorMs).toBe(true);
          }
          await client.close();
        },
      ),
      { numRuns: 150 },
    );
    // the generators reach every branch: not a vacuous pass
    for (const [branch, count] of Object.entries(seen)) expect(count, branch).toBeGreaterThan(0);
  });
});
