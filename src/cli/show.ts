/**
 * `oncefetch show <ref>`: the record — state, key (redacted), lease, attempts
 * with their class, evidence, stored result.
 *
 * @module
 */
import { redactKey } from '../explain/plan.js';
import { RESUMED, isTerminal } from '../operation/record.js';
import type { OperationRecord, ResultSnapshot } from '../operation/record.js';
import { unstoredBytes } from '../operation/snapshot.js';
import { EXIT, UsageError, parseFlags } from './args.js';
import type { CliIo } from './format.js';
import { duration, json, section, table, time } from './format.js';
import { RECORD_FLAGS, RECORD_FLAGS_HELP, withRecord } from './resolve.js';

export const SHOW_HELP = `Usage: oncefetch show <ref> [--action NAME] [--tenant NAME] [--store PATH|URL] [--json] [--reveal-key]

Prints one operation record: state, key, fingerprint, lease, every attempt with
its class and status, the evidence (lookups, takeovers, resumes, stops), and the stored result.
A resume (a restart under the same owner id) is stored as kind takeover; --json keeps it so.

${RECORD_FLAGS_HELP}
  --reveal-key       print the whole idempotency key (default: its last 4 characters; a key under 12 characters, its length only)
`;

const BODY_PREVIEW_CHARS = 300;

/** The stored result body as text, when it is text. */
function bodyPreview(record: OperationRecord): string | undefined {
  const result = record.result;
  if (result === null) return undefined;
  const text = result.kind === 'value' ? result.body : Buffer.from(result.body, 'base64').toString('utf8');
  if (text.includes('\uFFFD')) return `(${Buffer.from(result.body, 'base64').length} bytes, binary)`;
  return text.length > BODY_PREVIEW_CHARS ? `${text.slice(0, BODY_PREVIEW_CHARS)}…` : text;
}

/** What the stored result lacks: a capped body (or error message), or a whole value (later calls ask their lookup, or throw ValueNotStoredError). */
function truncation(result: ResultSnapshot): string {
  if (!result.bodyTruncated) return '';
  return unstoredBytes(result) === undefined ? ' (body truncated)' : ' (value not stored: later calls ask their lookup, or throw ValueNotStoredError)';
}

/** A copy safe to print: the key redacted unless asked. */
function printable(record: OperationRecord, revealKey: boolean): OperationRecord {
  return revealKey ? record : { ...record, key: redactKey(record.key) };
}

/** The human form of a record. */
export function formatRecord(r: OperationRecord, now: number): string {
  const lease =
    r.lease === null ? 'none' : `${r.lease.owner} until ${time(r.lease.expiresAt)} (${r.lease.expiresAt > now ? 'live' : `expired ${duration(now - r.lease.expiresAt)} ago`})`;
  const head = table(
    [{ header: 'field' }, { header: 'value' }],
    [
      ['operation', `${r.tenant} / ${r.action} / ${r.ref}`],
      ['state', `${r.state} (generation ${r.generation})`],
      ['key', `${r.key} (${r.keySource})`],
      ['fingerprint', r.fingerprint],
      ['request', r.request === null ? '-' : `${r.request.method} ${r.request.url}`],
      ['created', `${time(r.createdAt)} (${duration(now - r.createdAt)} ago)`],
      ['updated', time(r.updatedAt)],
      ['expires', `${time(r.expiresAt)}${r.expiresAt < now ? (isTerminal(r.state) ? ' (purgeable now)' : ' (purgeable once terminal)') : ''}`],
      ['lease', lease],
      ['error', r.error === null ? '-' : `${r.error.code}: ${r.error.message}`],
      ['result', r.result === null ? '-' : `${r.result.status} from ${r.result.source}${truncation(r.result)}`],
      ['cancel', r.cancelRequestedAt === null ? '-' : `requested ${time(r.cancelRequestedAt)}`],
    ],
  );
  const attempts =
    r.attempts.length === 0
      ? '  (none)\n'
      : table(
          [{ header: '#', align: 'right' }, { header: 'class' }, { header: 'status', align: 'right' }, { header: 'reason' }, { header: 'started' }, { header: 'took', align: 'right' }, { header: 'gen', align: 'right' }, { header: 'owner' }],
          r.attempts.map((a) => [
            String(a.number),
            a.class ?? '(no outcome)',
            a.status === null ? '-' : String(a.status),
            a.reason ?? '-',
            time(a.startedAt),
            a.finishedAt === null ? '-' : duration(a.finishedAt - a.startedAt),
            String(a.generation),
            a.owner,
          ]),
        );
  const evidence =
    r.evidence.length === 0
      ? '  (none)\n'
      : table(
          [{ header: 'at' }, { header: 'kind' }, { header: 'gen', align: 'right' }, { header: 'detail' }],
          // a resume (no lease taken from another owner) is stored as kind `takeover`, for earlier versions to read
          r.evidence.map((e) => [time(e.at), e.kind === 'takeover' && e.detail.startsWith(RESUMED) ? 'resume' : e.kind, String(e.generation), e.detail]),
        );
  const body = bodyPreview(r);
  return [head, `attempts\n${attempts}`, `evidence\n${evidence}`, body === undefined ? '' : section('result body', [body])].join('\n');
}

/** Runs `oncefetch show`. */
export async function showCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags({ args, options: { ...RECORD_FLAGS, 'reveal-key': { type: 'boolean', default: false } }, allowPositionals: true, strict: true });
  if (values.help) {
    io.out(SHOW_HELP);
    return EXIT.ok;
  }
  if (positionals.length > 1) throw new UsageError(`one <ref> expected, got ${positionals.length} (quote a ref with spaces)`);
  return withRecord(io, values, positionals[0], (record) => {
    const shown = printable(record, values['reveal-key']);
    io.out(values.json ? json(shown) : formatRecord(shown, Date.now()));
    return EXIT.ok;
  });
}
