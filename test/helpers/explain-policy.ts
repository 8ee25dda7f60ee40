/**
 * The explain policy the explain tests build records against: the client defaults (five attempts,
 * a day of retention at both ends, no lookup, a provider that does not dedupe), at `now`.
 */
import type { ExplainPolicy } from '../../src/explain/types.js';

const DAY = 24 * 3600 * 1000;

export function explainPolicy(now: number, over: Partial<ExplainPolicy> = {}): ExplainPolicy {
  return {
    retry: { maxAttempts: 5, baseDelayMs: 200, maxDelayMs: 10_000, attemptTimeoutMs: 30_000, deadlineMs: 120_000, maxRetryAfterMs: 60_000, jitter: 'full' },
    retentionMs: DAY,
    providerRetentionMs: DAY,
    providerDedupes: false,
    lookupRegistered: false,
    now,
    ...over,
  };
}
