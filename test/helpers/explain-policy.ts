/**
 * The explain policy the explain tests build records against: the client defaults (five attempts,
 * a day of retention at both ends, no lookup, a provider that does not dedupe), at `now`.
 */
import type { ExplainPolicy } from '../../src/explain/types.js';
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';

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

/**
 * A POST record of (t1, create-order, `ref`) under `key` (minted), owner 'a', made at `t0`, with its
 * first attempt started at `t0 + 10`: what explain's unit tests build their histories on.
 */
export function startedRecord(ref: string, key: string, t0: number): OperationRecord {
  const r = newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key,
    keySource: 'minted',
    fingerprint: 'f'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.com/orders' },
    owner: 'a',
    now: t0,
    leaseMs: 30_000,
    retentionMs: 86_400_000,
  });
  return applyEvent(r, { type: 'attempt_started', attemptId: 'att-1' }, t0 + 10, 'a');
}
