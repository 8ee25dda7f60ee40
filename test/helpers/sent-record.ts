/**
 * The record unit tests of OwnedRecord start from: owner A claimed ref `ref` of `t/create-order`
 * with its first attempt (`a-1`) started, as the engine's claim leaves it. Used by
 * test/unit/owned.test.ts and settle-orders.test.ts.
 */
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';

/**
 * Claims in `store` A's record of `ref` (key `key`), created at `createdAt` with a lease of
 * `leaseMs`, its attempt `a-1` started at `startedAt`; `request: null` for a `client.run()` record.
 */
export async function claimSentByA(
  store: OnceStore,
  o: { ref: string; key: string; createdAt: number; startedAt: number; leaseMs: number; request?: null },
): Promise<OperationRecord> {
  const fresh = newRecord({
    scope: { tenant: 't', action: 'create-order', ref: o.ref },
    key: o.key,
    keySource: 'minted',
    fingerprint: 'f'.repeat(64),
    request: o.request === null ? null : { method: 'POST', url: 'http://127.0.0.1/orders' },
    owner: 'A',
    now: o.createdAt,
    leaseMs: o.leaseMs,
    retentionMs: 60_000,
  });
  const { record } = await store.claim(applyEvent(fresh, { type: 'attempt_started', attemptId: 'a-1' }, o.startedAt, 'A'));
  return record;
}
