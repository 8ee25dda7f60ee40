/**
 * Pure backoff delays. Randomness is injected so tests can assert exact values.
 * Server-requested waits (`Retry-After`) bypass this module entirely.
 *
 * @module
 */

/**
 * A source of randomness in `[0, 1)`, like `Math.random`. Inject a fixed one
 * in tests so that backoff delays are exact.
 *
 * @example
 * ```ts
 * const midpoint: Random = () => 0.5
 * const client = createClient({ store: memoryStore(), random: midpoint })
 * ```
 */
export type Random = () => number;

/** Delay bounds, in milliseconds. */
export interface BackoffOptions {
  /** Delay scale for the first retry, ms. Must be finite and >= 0. */
  baseDelayMs: number;
  /** Upper bound on any single delay, ms. Must be finite and >= 0. */
  maxDelayMs: number;
}

/**
 * How delays are spread.
 *
 * - `full` (the default in the engine): uniform in `[0, min(max, base · 2^(attempt-1)))`.
 * - `decorrelated` (AWS): uniform in `[base, previous · 3)`, capped at max.
 * - `none`: exactly `min(max, base · 2^(attempt-1))`.
 *
 * Jitter spreads the retries of many clients that failed together; `none`
 * suits a single caller or a test.
 *
 * @example
 * ```ts
 * const jitter: JitterMode = 'decorrelated'
 * createClient({ retry: { jitter, baseDelayMs: 100 } })
 * ```
 */
export type JitterMode = 'full' | 'decorrelated' | 'none';

/** Largest exponent used; beyond it `2^n` is Infinity anyway and the cap applies. */
const MAX_EXPONENT = 1023;

/**
 * Computes the wait before the next attempt, in whole milliseconds (floored).
 *
 * @param attempt - number of the attempt that just failed, counting from 1.
 * @param previousDelayMs - the previous delay, used by `decorrelated` only
 *   (defaults to `baseDelayMs`, i.e. the first decorrelated delay is in `[base, 3·base)`).
 * @throws RangeError naming the argument when `attempt` is not an integer >= 1, a delay
 *   option or `previousDelayMs` is not a finite number >= 0, or `random()` leaves `[0, 1)`.
 *
 * @example
 * backoffDelay('full', 3, { baseDelayMs: 100, maxDelayMs: 10_000 }, () => 0.5); // 200
 */
export function backoffDelay(
  mode: JitterMode,
  attempt: number,
  options: BackoffOptions,
  random: Random,
  previousDelayMs?: number,
): number {
  if (!Number.isInteger(attempt) || attempt < 1) {
    throw new RangeError(`attempt must be an integer >= 1, got ${attempt}`);
  }
  const { baseDelayMs, maxDelayMs } = options;
  assertDelay('baseDelayMs', baseDelayMs);
  assertDelay('maxDelayMs', maxDelayMs);
  switch (mode) {
    case 'none':
      return Math.floor(exponentialCap(attempt, options));
    case 'full':
      return Math.floor(draw(random) * exponentialCap(attempt, options));
    case 'decorrelated': {
      const previous = previousDelayMs ?? baseDelayMs;
      assertDelay('previousDelayMs', previous);
      // Clamp so a huge previous delay cannot make 0 · Infinity = NaN.
      const upper = Math.max(baseDelayMs, Math.min(previous * 3, Number.MAX_VALUE));
      const delay = baseDelayMs + draw(random) * (upper - baseDelayMs);
      return Math.floor(Math.min(maxDelayMs, delay));
    }
    default:
      throw new RangeError(`jitter must be 'full', 'decorrelated' or 'none', got ${String(mode)}`);
  }
}

/** `min(maxDelayMs, baseDelayMs · 2^(attempt-1))`, overflow-safe. */
function exponentialCap(attempt: number, options: BackoffOptions): number {
  const exponent = Math.min(attempt - 1, MAX_EXPONENT);
  return Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** exponent);
}

function draw(random: Random): number {
  const value = random();
  if (!(value >= 0 && value < 1)) {
    throw new RangeError(`random() must return a number in [0, 1), got ${value}`);
  }
  return value;
}

function assertDelay(name: string, value: number): void {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a finite number >= 0, got ${value}`);
  }
}
