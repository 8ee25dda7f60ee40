/**
 * Finding records by ref for `show` and `explain`.
 *
 * @module
 */
import { recordId } from '../operation/record.js';
import type { OperationRecord } from '../operation/record.js';
import type { OnceStore } from '../stores/contract.js';

/**
 * Records scanned when `--action` is omitted. `store.list` filters by state
 * and tenant only, so a ref is found by reading up to this many records,
 * oldest `updatedAt` first: fine for a command-line look, not for a hot path.
 */
export const SCAN_LIMIT = 100_000;

/** What the user named. */
export interface RefQuery {
  ref: string;
  action: string | undefined;
  /** undefined: any tenant when scanning, 'default' for a direct look-up */
  tenant: string | undefined;
}

/** The records matching a ref: one direct read with `--action`, else a scan. */
export async function findRecords(store: OnceStore, q: RefQuery): Promise<{ records: OperationRecord[]; truncated: boolean }> {
  if (q.action !== undefined) {
    const record = await store.get(recordId({ tenant: q.tenant ?? 'default', action: q.action, ref: q.ref }));
    return { records: record === undefined ? [] : [record], truncated: false };
  }
  const all = await store.list({ tenant: q.tenant, limit: SCAN_LIMIT });
  // A full page means the scan may have stopped short of the record: say so rather than "not found".
  return { records: all.filter((r) => r.ref === q.ref), truncated: all.length >= SCAN_LIMIT };
}

/** One line per record, for "several records match". */
export function matchRows(records: readonly OperationRecord[]): string[][] {
  return records.map((r) => [r.tenant, r.action, r.ref, r.state, String(r.attempts.length), new Date(r.updatedAt).toISOString()]);
}

/** Columns of {@link matchRows}. */
export const MATCH_COLUMNS = [
  { header: 'tenant' },
  { header: 'action' },
  { header: 'ref' },
  { header: 'state' },
  { header: 'attempts', align: 'right' as const },
  { header: 'updated' },
];
