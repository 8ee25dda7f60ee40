/**
 * Finding records by ref for `show` and `explain`.
 *
 * @module
 */
import { recordId, scopeOfId } from '../operation/record.js';
import type { OperationRecord, Scope } from '../operation/record.js';
import type { ListQuery, OnceStore } from '../stores/contract.js';

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

/** A row the store holds but cannot read as a record: its id, the scope the id names (if any), the error. */
export interface UnreadableRow {
  id: string;
  scope: Scope | null;
  message: string;
}

/** `store.list` up to `limit` rows, the unreadable ones reported beside the records instead of rejecting the list. */
export async function listReadable(store: OnceStore, query: ListQuery & { limit: number }): Promise<{ records: OperationRecord[]; unreadable: UnreadableRow[]; truncated: boolean }> {
  const unreadable: UnreadableRow[] = [];
  const records = await store.list({ ...query, onCorrupt: ({ id, error }) => void unreadable.push({ id, scope: scopeOfId(id) ?? null, message: error.message }) });
  // Unreadable rows count toward the limit: a full page may have stopped short.
  return { records, unreadable, truncated: records.length + unreadable.length >= query.limit };
}

/** Lines naming unreadable rows: the id, then the error. */
export function unreadableLines(rows: readonly UnreadableRow[]): string {
  return rows.map((u) => `  ${u.id}  ${u.message}\n`).join('');
}

/**
 * The records matching a ref: one direct read with `--action`, else a scan. `unreadable`: rows of
 * the scan that could not be read, each of which may or may not be the ref's (see its `scope`).
 */
export async function findRecords(store: OnceStore, q: RefQuery): Promise<{ records: OperationRecord[]; truncated: boolean; unreadable: UnreadableRow[] }> {
  if (q.action !== undefined) {
    const record = await store.get(recordId({ tenant: q.tenant ?? 'default', action: q.action, ref: q.ref }));
    return { records: record === undefined ? [] : [record], truncated: false, unreadable: [] };
  }
  // A full page means the scan may have stopped short of the record: say so rather than "not found".
  const { records, unreadable, truncated } = await listReadable(store, { tenant: q.tenant, limit: SCAN_LIMIT });
  return { records: records.filter((r) => r.ref === q.ref), truncated, unreadable };
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
