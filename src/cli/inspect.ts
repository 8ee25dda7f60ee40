/**
 * `oncefetch inspect`: counts by state, and the oldest stuck records
 * (unfinished, with nobody holding a live lease).
 *
 * @module
 */
import { isTerminal } from '../operation/record.js';
import type { OperationRecord, OperationState } from '../operation/record.js';
import { EXIT, UsageError, intFlag, parseFlags } from './args.js';
import { SCAN_LIMIT, listReadable, unreadableLines } from './find.js';
import type { UnreadableRow } from './find.js';
import type { CliIo } from './format.js';
import { duration, json, table, time } from './format.js';
import { STORE_FLAG_HELP, openStore, storeLabel } from './store.js';
import { tenantFlag } from './resolve.js';

export const INSPECT_HELP = `Usage: oncefetch inspect [--store PATH|URL] [--tenant NAME] [--limit N] [--json]

Counts the operations of a store by state and lists the oldest stuck ones:
unfinished (pending, in_flight, ambiguous) with no live lease, so nobody is
working on them. Settle them with client.recover() or \`oncefetch explain <ref>\`.

${STORE_FLAG_HELP}
  --tenant NAME      only this tenant
  --limit N          stuck records listed, 0 to 10000 (default 10; 0 lists none, the count stays)
  --json             machine-readable output

Reads up to ${SCAN_LIMIT.toLocaleString('en')} records (the store contract has no count query). A row that
cannot be read as a record is listed apart (its id and the error) and makes the exit code 1.
`;

const STATES: readonly OperationState[] = ['pending', 'in_flight', 'ambiguous', 'succeeded', 'failed', 'cancelled'];

/** What `inspect` reports. */
export interface InspectReport {
  store: string;
  tenant: string | null;
  total: number;
  /** true when the scan hit its limit: counts are lower bounds */
  truncated: boolean;
  counts: Record<OperationState, number>;
  /** unfinished records under a live lease: being worked on now */
  live: number;
  /** terminal records past `expiresAt`: what `oncefetch purge` would remove */
  purgeable: number;
  /** the oldest stuck records (unfinished, no live lease), at most `--limit` of them */
  stuck: StuckRecord[];
  /** how many records are stuck, listed or not */
  stuckCount: number;
  /** rows that could not be read as records (not counted above): id, the scope the id names, the error */
  unreadable: UnreadableRow[];
}

/** One stuck record. */
export interface StuckRecord {
  tenant: string;
  action: string;
  ref: string;
  state: OperationState;
  attempts: number;
  lastClass: string | null;
  lastStatus: number | null;
  updatedAt: number;
  idleMs: number;
  lease: 'none' | 'expired';
}

function stuckOf(r: OperationRecord, now: number): StuckRecord {
  const last = r.attempts[r.attempts.length - 1];
  return {
    tenant: r.tenant,
    action: r.action,
    ref: r.ref,
    state: r.state,
    attempts: r.attempts.length,
    lastClass: last === undefined ? null : (last.class ?? 'no outcome'),
    lastStatus: last?.status ?? null,
    updatedAt: r.updatedAt,
    idleMs: now - r.updatedAt,
    lease: r.lease === null ? 'none' : 'expired',
  };
}

/** Builds the report from the records (oldest `updatedAt` first, as `store.list` returns them). */
export function inspectRecords(
  records: readonly OperationRecord[],
  now: number,
  limit: number,
  meta: { store: string; tenant: string | undefined; truncated: boolean; unreadable?: UnreadableRow[] },
): InspectReport {
  const counts = Object.fromEntries(STATES.map((s) => [s, 0])) as Record<OperationState, number>;
  let live = 0;
  let purgeable = 0;
  const stuck: StuckRecord[] = [];
  let stuckCount = 0;
  for (const r of records) {
    counts[r.state]++;
    if (isTerminal(r.state)) {
      if (r.expiresAt < now) purgeable++;
      continue;
    }
    if (r.lease !== null && r.lease.expiresAt > now) live++;
    else if (stuckCount++ < limit) stuck.push(stuckOf(r, now));
  }
  return { store: meta.store, tenant: meta.tenant ?? null, total: records.length, truncated: meta.truncated, counts, live, purgeable, stuck, stuckCount, unreadable: meta.unreadable ?? [] };
}

/** The human form of a report. */
export function formatInspect(report: InspectReport): string {
  const counts = table(
    [{ header: 'state' }, { header: 'count', align: 'right' }],
    [...STATES.map((s) => [s, String(report.counts[s])]), ['total', `${report.total}${report.truncated ? '+' : ''}`]],
  );
  const lines = [
    `store: ${report.store}${report.tenant === null ? '' : `, tenant ${report.tenant}`}`,
    '',
    counts,
    `in progress (live lease): ${report.live}    purgeable now (terminal, past expiresAt): ${report.purgeable}`,
    '',
  ];
  if (report.stuckCount === 0) {
    lines.push('stuck records: none');
  } else if (report.stuck.length === 0) {
    lines.push(`stuck records (unfinished, no live lease): ${report.stuckCount}, none listed (--limit 0)`);
  } else {
    lines.push(`oldest stuck records (unfinished, no live lease), ${report.stuck.length} of ${report.stuckCount}:`);
    lines.push(
      table(
        [{ header: 'tenant' }, { header: 'action' }, { header: 'ref' }, { header: 'state' }, { header: 'attempts', align: 'right' }, { header: 'last outcome' }, { header: 'updated' }, { header: 'idle', align: 'right' }],
        report.stuck.map((s) => [
          s.tenant,
          s.action,
          s.ref,
          s.state,
          String(s.attempts),
          s.lastClass === null ? '-' : `${s.lastClass}${s.lastStatus === null ? '' : ` ${s.lastStatus}`}`,
          time(s.updatedAt),
          duration(s.idleMs),
        ]),
      ),
    );
    lines.push('next: oncefetch explain <ref> --action <action> [--tenant <tenant>]');
  }
  if (report.unreadable.length > 0) {
    lines.push('', `unreadable records: ${report.unreadable.length} (not counted above; nothing resends them, and a call with their ref fails with a StoreError):`);
    lines.push(unreadableLines(report.unreadable).trimEnd());
  }
  if (report.truncated) lines.push(`note: only the ${SCAN_LIMIT.toLocaleString('en')} least recently updated records were read`);
  return `${lines.join('\n')}\n`;
}

/** Runs `oncefetch inspect`. */
export async function inspectCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags({
    args,
    options: {
      store: { type: 'string' },
      tenant: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    io.out(INSPECT_HELP);
    return EXIT.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0] ?? ''}"`);
  const limit = intFlag(values.limit, 'limit', 10, 0, 10_000);
  tenantFlag(values.tenant);
  const store = await openStore(values.store);
  try {
    const { records, unreadable, truncated } = await listReadable(store, { tenant: values.tenant, limit: SCAN_LIMIT });
    const report = inspectRecords(records, Date.now(), limit, { store: storeLabel(store), tenant: values.tenant, truncated, unreadable });
    io.out(values.json ? json(report) : formatInspect(report));
    if (unreadable.length === 0) return EXIT.ok;
    io.err(`oncefetch inspect: ${unreadable.length} record${unreadable.length === 1 ? '' : 's'} could not be read\n`);
    return EXIT.failure;
  } finally {
    await store.close();
  }
}
