/**
 * `oncefetch show` / `explain` without `--action` scan at most SCAN_LIMIT records. Regression
 * (adversarial run): past that, an existing record was reported "not found" with no word that the
 * scan had stopped short.
 */
import { describe, expect, it } from 'vitest';
import { SCAN_LIMIT, findRecords } from '../../src/cli/find.js';
import { applyEvent, newRecord, type OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';

const record = (ref: string): OperationRecord =>
  applyEvent(
    newRecord({ scope: { tenant: 't', action: 'a', ref }, key: `k-${ref}`, keySource: 'minted', fingerprint: 'f'.repeat(64), request: null, owner: 'o', now: 1, leaseMs: 100, retentionMs: 1_000 }),
    { type: 'release' },
    2,
    'o',
  );

/** A store whose list returns `rows` records (one object repeated: the scan only counts and filters). */
function storeListing(rows: number, last: OperationRecord): OnceStore {
  const filler = record('other');
  return {
    name: 'fake',
    list: async (q?: { limit?: number }) => Array.from({ length: Math.min(rows, q?.limit ?? rows) }, (_, i) => (i === rows - 1 ? last : filler)),
  } as unknown as OnceStore;
}

describe('findRecords without --action', () => {
  it('says when the scan read a full page (the record may lie beyond it)', async () => {
    expect(await findRecords(storeListing(SCAN_LIMIT, record('other')), { ref: 'wanted', action: undefined, tenant: undefined })).toEqual({ records: [], truncated: true, unreadable: [] });
    expect(await findRecords(storeListing(10, record('other')), { ref: 'wanted', action: undefined, tenant: undefined })).toEqual({ records: [], truncated: false, unreadable: [] });
    const found = await findRecords(storeListing(10, record('wanted')), { ref: 'wanted', action: undefined, tenant: undefined });
    expect(found.records.map((r) => r.ref)).toEqual(['wanted']);
  });
});
