/**
 * `oncefetch purge`: removes terminal records past their `expiresAt`
 * (the store's `purge(now)`); unfinished records are never removed.
 *
 * @module
 */
import { StoreError } from '../errors.js';
import { isTerminal } from '../operation/record.js';
import { EXIT, UsageError, parseFlags } from './args.js';
import { SCAN_LIMIT, listReadable, unreadableLines } from './find.js';
import type { UnreadableRow } from './find.js';
import type { CliIo } from './format.js';
import { json } from './format.js';
import { STORE_FLAG_HELP, openStore, storeLabel } from './store.js';

export const PURGE_HELP = `Usage: oncefetch purge [--store PATH|URL] [--dry-run] [--json]

Removes succeeded, failed and cancelled records whose retention (expiresAt) has
passed, of every tenant and action: purge is store-wide (it takes no --tenant,
--action or --ref). Unfinished records are never removed: settle them with
client.recover().
It removes in batches; when the store fails part-way, it prints how many records
the batches before had removed, then the error (exit 1).

${STORE_FLAG_HELP}
  --dry-run          count what would be removed (reads up to ${SCAN_LIMIT.toLocaleString('en')} records), remove nothing
  --json             machine-readable output
`;

/** Runs `oncefetch purge`. */
export async function purgeCommand(args: string[], io: CliIo): Promise<number> {
  // Store-wide by design, as client.purge() (which refuses { tenant }): said so, not parseArgs' "Unknown option".
  const end = args.indexOf('--');
  const scoped = args.slice(0, end < 0 ? undefined : end).map((a) => /^--(tenant|action|ref)(?:=|$)/.exec(a)?.[1]).find((f) => f !== undefined);
  if (scoped !== undefined) {
    throw new UsageError(`purge takes no --${scoped}: it is store-wide, removing every tenant's terminal records past their expiresAt (set by each client's retentionMs), as client.purge() does`);
  }
  const { values, positionals } = parseFlags({
    args,
    options: {
      store: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    io.out(PURGE_HELP);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0] ?? ''}"`);
  const store = await openStore(values.store);
  try {
    const now = Date.now();
    const dryRun = values['dry-run'];
    let purged: number;
    let unreadable: UnreadableRow[] | undefined; // a dry run reads the rows; purge itself leaves unreadable ones alone
    if (dryRun) {
      const listed = await listReadable(store, { states: ['succeeded', 'failed', 'cancelled'], limit: SCAN_LIMIT });
      purged = listed.records.filter((r) => isTerminal(r.state) && r.expiresAt < now).length;
      unreadable = listed.unreadable;
    } else {
      try {
        purged = await store.purge(now);
      } catch (error) {
        // The batches before the failure are removed for good: say how many (stdout), then fail.
        if (error instanceof StoreError && error.purged !== undefined) {
          const n = error.purged;
          const label = storeLabel(store);
          if (values.json) io.out(json({ store: label, purged: n, dryRun, error: error.message }));
          else io.out(`purged ${n} terminal record${n === 1 ? '' : 's'} past their expiresAt from ${label}, then failed\n`);
        }
        throw error;
      }
    }
    const label = storeLabel(store);
    if (values.json) io.out(json({ store: label, purged, dryRun, ...(unreadable === undefined ? {} : { unreadable }) }));
    else io.out(`${dryRun ? 'would purge' : 'purged'} ${purged} terminal record${purged === 1 ? '' : 's'} past their expiresAt from ${label}\n`);
    if (unreadable === undefined || unreadable.length === 0) return EXIT.ok;
    io.err(`oncefetch purge: ${unreadable.length} record${unreadable.length === 1 ? '' : 's'} could not be read (never purged):\n${unreadableLines(unreadable)}`);
    return EXIT.failure;
  } finally {
    await store.close();
  }
}
