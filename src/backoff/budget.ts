/**
 * A retry budget: a token bucket shared by many operations (Finagle / gRPC style) that
 * caps retry amplification under sustained failure. No clock: tokens are earned by
 * first attempts, not by time.
 *
 * @module
 */

/**
 * Options of the retry budget (`retry.budget` in `createClient`), which keeps
 * a provider's outage from multiplying your traffic. Raise `ratio` for a
 * client with few, precious calls; pass `budget: false` to turn it off.
 *
 * @example
 * ```ts
 * createClient({ retry: { budget: { ratio: 0.2, reserve: 20, maxTokens: 200 } } })
 * ```
 */
export interface RetryBudgetOptions {
  /**
   * Tokens deposited per first attempt; one retry costs one token, so this is the
   * long-run ratio of retries to first attempts. Must be in `[0, 1]`.
   *
   * 0.09 rather than 0.1 so that the reserve fits inside the 1.1× target:
   * 1,000 operations against a provider that always fails make at most
   * `1000 + reserve + 1000 · ratio` = 1,100 attempts (1.10 per operation).
   * @default 0.09
   */
  ratio?: number;
  /**
   * Initial tokens: retries available before any first attempt has paid in, so a
   * quiet client can still retry. Must be finite, >= 0 and <= `maxTokens`.
   * @default 10
   */
  reserve?: number;
  /**
   * Cap on stored tokens, so a long healthy period cannot fund a later retry storm.
   * Must be finite and >= 0.
   * @default 100
   */
  maxTokens?: number;
}

/** A shared retry budget. Attempts count from 1; attempt 1 is the first attempt. */
export interface RetryBudget {
  /** Records a first attempt (attempt 1), depositing `ratio` tokens up to `maxTokens`. */
  recordRequest(): void;
  /** True and withdraws 1 token if a retry is allowed; false (and no change) otherwise. */
  tryRetry(): boolean;
  /** Gives back the token of a {@link tryRetry} whose retry was not made after all, up to `maxTokens`. */
  refund(): void;
  /** Tokens currently available. */
  readonly tokens: number;
}

/** Defaults of {@link RetryBudgetOptions}. */
export const BUDGET_DEFAULTS = { ratio: 0.09, reserve: 10, maxTokens: 100 } as const;

/** Fixed-point scale: ten deposits of 0.1 must make exactly one token. */
const UNITS_PER_TOKEN = 1_000_000;

/**
 * Creates a retry budget. Under 100 % failure, N operations get at most about
 * `reserve + N · ratio` retries in total: 1.10 attempts per operation for N = 1000 with
 * the defaults (10 + 90 retries), tending to 1.09 for larger N.
 *
 * @throws RangeError naming the option when an option is out of range.
 *
 * @example
 * const budget = createRetryBudget({ ratio: 0.1 });
 * budget.recordRequest();
 * if (budget.tryRetry()) {
 *   // retry
 * }
 */
export function createRetryBudget(options: RetryBudgetOptions = {}): RetryBudget {
  const ratio = options.ratio ?? BUDGET_DEFAULTS.ratio;
  const reserve = options.reserve ?? BUDGET_DEFAULTS.reserve;
  const maxTokens = options.maxTokens ?? BUDGET_DEFAULTS.maxTokens;
  if (!(Number.isFinite(ratio) && ratio >= 0 && ratio <= 1)) {
    throw new RangeError(`retryBudget.ratio must be a number in [0, 1], got ${ratio}`);
  }
  if (!(Number.isFinite(maxTokens) && maxTokens >= 0)) {
    throw new RangeError(`retryBudget.maxTokens must be a finite number >= 0, got ${maxTokens}`);
  }
  if (!(Number.isFinite(reserve) && reserve >= 0 && reserve <= maxTokens)) {
    throw new RangeError(`retryBudget.reserve must be a finite number in [0, maxTokens (${maxTokens})], got ${reserve}`);
  }
  const deposit = Math.round(ratio * UNITS_PER_TOKEN);
  const cap = Math.round(maxTokens * UNITS_PER_TOKEN);
  let units = Math.round(reserve * UNITS_PER_TOKEN);
  return {
    recordRequest() {
      units = Math.min(cap, units + deposit);
    },
    tryRetry() {
      if (units < UNITS_PER_TOKEN) return false;
      units -= UNITS_PER_TOKEN;
      return true;
    },
    refund() {
      units = Math.min(cap, units + UNITS_PER_TOKEN);
    },
    get tokens() {
      return units / UNITS_PER_TOKEN;
    },
  };
}
