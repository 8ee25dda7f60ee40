/** One record, fresh at T0 (lease 1 s, retention 60 s), for the state machine's unit tests. */
import { newRecord, type OperationRecord, type ResultSnapshot } from '../../src/operation/record.js';

export const T0 = 1_700_000_000_000;
export const LEASE_MS = 1_000;
export const RETENTION_MS = 60_000;
export const snapshot: ResultSnapshot = { kind: 'response', source: 'attempt', status: 201, statusText: 'Created', headers: [], body: '', bodyTruncated: false };

export function fresh(): OperationRecord {
  return newRecord({
    scope: { tenant: 't', action: 'a', ref: 'r' },
    key: 'k-1',
    keySource: 'minted',
    fingerprint: 'f'.repeat(64),
    request: { method: 'POST', url: 'http://127.0.0.1/orders' },
    owner: 'o1',
    now: T0,
    leaseMs: LEASE_MS,
    retentionMs: RETENTION_MS,
  });
}
