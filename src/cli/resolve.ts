/**
 * Shared by `show` and `explain`: open the store, find the one record a ref
 * names, or say why not (none, or several: listed with the flags that pick one).
 *
 * @module
 */
import type { OperationRecord } from '../operation/record.js';
import type { OnceStore } from '../stores/contract.js';
import { EXIT, UsageError } from './args.js';
import { MATCH_COLUMNS, SCAN_LIMIT, findRecords, matchRows, unreadableLines } from './find.js';
import type { CliIo } from './format.js';
import { json, table } from './format.js';
import { STORE_FLAG_HELP, openStore, storeLabel } from './store.js';

/** Flags every record command takes. */
export const RECORD_FLAGS = {
  store: { type: 'string' },
  action: { type: 'string' },
  tenant: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** Help text for {@link RECORD_FLAGS}. */
export const RECORD_FLAGS_HELP = `${STORE_FLAG_HELP}
  --action NAME      the operation's action; without it the ref is searched in every record
                     (a scan of up to ${SCAN_LIMIT.toLocaleString('en')} records: fine for a look, slow on huge stores)
  --tenant NAME      the tenant (default: 'default' with --action; any tenant when scanning)
  --json             machine-readable output`;

/** An empty `--tenant` names a tenant no client can have (createClient refuses it): a usage error, not a silent "not found". */
export function tenantFlag(tenant: string | undefined): string | undefined {
  if (tenant === '') throw new UsageError('--tenant must not be empty (omit it for every tenant)');
  return tenant;
}

/**
 * Runs `body` on the one record named, closing the store after. Returns the
 * exit code: not found → 1, several matches → 2 (listed, with the flags to pick one).
 */
export async function withRecord(
  io: CliIo,
  values: { store?: string | undefined; action?: string | undefined; tenant?: string | undefined; json: boolean },
  ref: string | undefined,
  body: (record: OperationRecord, store: OnceStore) => Promise<number> | number,
): Promise<number> {
  if (ref === undefined || ref === '') throw new UsageError('missing <ref>');
  tenantFlag(values.tenant);
  const store = await openStore(values.store);
  try {
    const { records: found, truncated, unreadable } = await findRecords(store, { ref, action: values.action, tenant: values.tenant });
    // An unreadable row is this ref's when its id says so, or when its id names no scope.
    const theirs = unreadable.filter((u) => u.scope === null || u.scope.ref === ref);
    const others = unreadable.length - theirs.length;
    if (others > 0) io.err(`oncefetch: note: ${others} unreadable record${others === 1 ? '' : 's'} of other refs ${others === 1 ? 'was' : 'were'} skipped (oncefetch inspect lists them)\n`);
    const [first] = found;
    if (first === undefined && theirs.length > 0 && theirs.length + found.length === 1) {
      if (values.json) io.out(json({ error: 'unreadable', ref, store: storeLabel(store), unreadable: theirs }));
      else io.err(`oncefetch: the record of ref '${ref}' cannot be read (corrupt, or not written by oncefetch); nothing was changed:\n${unreadableLines(theirs)}`);
      return EXIT.failure;
    }
    if (first === undefined && theirs.length === 0) {
      const where = values.action === undefined ? values.tenant === undefined ? 'in any action or tenant' : `in any action of tenant '${values.tenant}'` : `for action '${values.action}', tenant '${values.tenant ?? 'default'}'`;
      const cut = truncated ? ` among the ${SCAN_LIMIT.toLocaleString('en')} least recently updated records (the scan stops there; pass --action to look it up directly)` : '';
      // A direct look-up without --tenant reads tenant 'default' only; the scan reads every tenant.
      const looked = values.action === undefined ? (values.tenant === undefined ? {} : { tenant: values.tenant }) : { action: values.action, tenant: values.tenant ?? 'default' };
      const further =
        values.action !== undefined && values.tenant === undefined
          ? "  --action without --tenant looks in tenant 'default' only: drop --action to search every tenant and action for the ref, or pass --tenant NAME\n"
          : '';
      if (values.json) io.out(json({ error: 'not_found', ref, ...looked, store: storeLabel(store), ...(truncated ? { truncated: true, scanned: SCAN_LIMIT } : {}) }));
      else io.err(`oncefetch: no operation with ref '${ref}' ${where}${cut} in ${storeLabel(store)}\n${further}`);
      return EXIT.failure;
    }
    if (first === undefined || found.length + theirs.length > 1) {
      const unread = theirs.map((u) => ({ ...(u.scope ?? { id: u.id }), state: 'unreadable' as const }));
      if (values.json) {
        io.out(json({ error: 'ambiguous_ref', ref, matches: [...found.map((r) => ({ tenant: r.tenant, action: r.action, ref: r.ref, state: r.state })), ...unread] }));
      } else {
        io.err(`oncefetch: ${found.length + theirs.length} operations have ref '${ref}'; pick one with --action (and --tenant):\n`);
        io.out(table(MATCH_COLUMNS, [...matchRows(found), ...theirs.map((u) => [u.scope?.tenant ?? '?', u.scope?.action ?? '?', u.scope?.ref ?? u.id, 'unreadable', '-', '-'])]));
      }
      return EXIT.usage;
    }
    return await body(first, store);
  } finally {
    await store.close();
  }
}
