/**
 * Shared by `show` and `explain`: open the store, find the one record a ref
 * names, or say why not (none, or several: listed with the flags that pick one).
 *
 * @module
 */
import type { OperationRecord } from '../operation/record.js';
import type { OnceStore } from '../stores/contract.js';
import { EXIT, UsageError } from './args.js';
import { MATCH_COLUMNS, SCAN_LIMIT, findRecords, matchRows } from './find.js';
import type { CliIo } from './format.js';
import { json, table } from './format.js';
import { openStore, storeLabel } from './store.js';

/** Flags every record command takes. */
export const RECORD_FLAGS = {
  store: { type: 'string' },
  action: { type: 'string' },
  tenant: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** Help text for {@link RECORD_FLAGS}. */
export const RECORD_FLAGS_HELP = `  --store PATH|URL   SQLite file or postgres:// URL (default: $ONCEFETCH_DB or ./.oncefetch/oncefetch.db)
  --action NAME      the operation's action; without it the ref is searched in every record
                     (a scan of up to ${SCAN_LIMIT.toLocaleString('en')} records: fine for a look, slow on huge stores)
  --tenant NAME      the tenant (default: 'default' with --action; any tenant when scanning)
  --json             machine-readable output`;

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
  const store = await openStore(values.store);
  try {
    const { records: found, truncated } = await findRecords(store, { ref, action: values.action, tenant: values.tenant });
    const [first] = found;
    if (first === undefined) {
      const where = values.action === undefined ? `in any action${values.tenant === undefined ? ' or tenant' : ''}` : `for action '${values.action}', tenant '${values.tenant ?? 'default'}'`;
      const cut = truncated ? ` among the ${SCAN_LIMIT.toLocaleString('en')} least recently updated records (the scan stops there; pass --action to look it up directly)` : '';
      if (values.json) io.out(json({ error: 'not_found', ref, store: storeLabel(store), ...(truncated ? { truncated: true, scanned: SCAN_LIMIT } : {}) }));
      else io.err(`oncefetch: no operation with ref '${ref}' ${where}${cut} in ${storeLabel(store)}\n`);
      return EXIT.failure;
    }
    if (found.length > 1) {
      if (values.json) {
        io.out(json({ error: 'ambiguous_ref', ref, matches: found.map((r) => ({ tenant: r.tenant, action: r.action, ref: r.ref, state: r.state })) }));
      } else {
        io.err(`oncefetch: ${found.length} operations have ref '${ref}'; pick one with --action (and --tenant):\n`);
        io.out(table(MATCH_COLUMNS, matchRows(found)));
      }
      return EXIT.usage;
    }
    return await body(first, store);
  } finally {
    await store.close();
  }
}
