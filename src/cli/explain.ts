/**
 * `oncefetch explain <ref>`: the structured hand-off of one operation
 * (`client.explain` over a store, with the policy given by flags).
 *
 * @module
 */
import { explain, explainPolicy } from '../explain/explain.js';
import type { Explanation } from '../explain/types.js';
import { resolveOptions } from '../options.js';
import type { OnceClientOptions } from '../options.js';
import { EXIT, UsageError, intFlag, parseFlags } from './args.js';
import type { CliIo } from './format.js';
import { duration, json, section, time } from './format.js';
import { RECORD_FLAGS, RECORD_FLAGS_HELP, withRecord } from './resolve.js';

export const EXPLAIN_HELP = `Usage: oncefetch explain <ref> [--action NAME] [--tenant NAME] [--store PATH|URL] [--json]
                        [--lookup] [--provider-dedupes] [--provider-retention-ms N] [--max-attempts N]

Explains one operation: diagnosis (what the evidence says), plan (what to do,
never a resend that could repeat an effect), verification, hand-off (key scope,
canonical payload, state and attempts, retry and retention policy, effects) and
confidence. It escalates where evidence is missing, contradictory or stale.

The command cannot see your application's client options: describe them with
the flags below (defaults are createClient's). The output's "assumed" line
(--json: "assumed") says which value of each it used, and whether it came
from a flag or the default.

${RECORD_FLAGS_HELP}
  --lookup                   your client registers a lookup for this action
  --provider-dedupes         your client sets providerDedupes: true
  --provider-retention-ms N  how long the provider remembers a key (default 86400000)
  --max-attempts N           retry.maxAttempts (default 5)
`;

/** A client option the command's conclusions rest on: the value it used, from its flag or createClient's default. */
export interface Assumed {
  value: boolean | number;
  from: 'flag' | 'default';
}

/** The options explain's diagnosis and plan depend on, by name (`retry.maxAttempts` only enters the policy summary), with their flags. */
const ASSUMED_FLAGS = { lookup: 'lookup', providerDedupes: 'provider-dedupes', providerRetentionMs: 'provider-retention-ms', 'retry.maxAttempts': 'max-attempts' } as const;

type AssumedSettings = Record<keyof typeof ASSUMED_FLAGS, Assumed>;

/** The `assumed` line: each setting the output rests on, its value and where it came from. */
function assumedLine(a: AssumedSettings): string {
  const items = Object.entries(ASSUMED_FLAGS).map(([name, flag]) => {
    const { value, from } = a[name as keyof AssumedSettings];
    const shown = name === 'lookup' ? (value === true ? 'registered' : 'none') : String(value);
    return `${name}: ${shown} (${from === 'default' ? 'default, ' : ''}--${flag})`;
  });
  return `${items.join('; ')}. The CLI cannot see your client's options: pass the flags where yours differ; other retry and retention values are createClient's defaults.`;
}

/** The human form of an explanation; `assumed`, the settings it rests on (the CLI's flags or defaults). */
export function formatExplanation(x: Explanation, assumed?: AssumedSettings): string {
  const h = x.handoff;
  const head = [
    `operation     ${x.scope.tenant} / ${x.scope.action} / ${x.scope.ref}`,
    `state         ${x.state}`,
    `diagnosis     ${x.diagnosis.code}: ${x.diagnosis.summary}`,
    `confidence    ${x.confidence} (${x.observations} independent observation${x.observations === 1 ? '' : 's'})`,
    x.escalate ? `ESCALATE      ${x.escalation ?? ''}` : 'escalate      no',
    ...(assumed === undefined ? [] : [`assumed       ${assumedLine(assumed)}`]),
  ].join('\n');
  const attempts = h.attempts.map(
    (a) =>
      `#${a.number} ${a.class ?? '(no outcome)'}${a.status === null ? '' : ` ${a.status}`}${a.reason === null ? '' : ` (${a.reason})`} at ${time(a.startedAt)} by ${a.owner}, generation ${a.generation}`,
  );
  const handoff = [
    `key scope     ${h.keyScope.tenant} / ${h.keyScope.action} / ${h.keyScope.ref}: ${h.keyScope.description}`,
    `key           ${h.key} (${h.keySource})`,
    `payload       ${h.canonicalPayload}`,
    `fingerprint   ${h.fingerprint}`,
    `request       ${h.request === null ? '-' : `${h.request.method} ${h.request.url}`}`,
    `lease         ${h.lease === null ? 'none' : `${h.lease.owner} until ${time(h.lease.expiresAt)}${h.lease.expired ? ' (expired)' : ''}`}`,
    `attempts      ${attempts.length === 0 ? 'none' : attempts.join('\n              ')}`,
    `result        ${h.result === null ? '-' : `${h.result.status} from ${h.result.source}`}`,
    `last error    ${h.error === null ? '-' : `${h.error.code}: ${h.error.message}`}`,
    `retry policy  ${h.retryPolicy.summary}`,
    `retention     created ${time(h.retention.createdAt)} (key age ${duration(h.retention.keyAgeMs)}); record purgeable after ${time(h.retention.expiresAt)}; ` +
      `no automatic resend after ${time(h.retention.resendCutoffAt)}${h.retention.keyStale ? ' (passed)' : ''}`,
    `effects       ${h.effects}`,
  ];
  return [
    head,
    '',
    section('evidence', x.diagnosis.evidence.length === 0 ? ['(none)'] : x.diagnosis.evidence.map((e) => `- ${e}`)),
    section('plan', x.plan.map((p, i) => `${i + 1}. ${p}`)),
    section('verification', x.verification.map((v) => `- ${v}`)),
    section('hand-off', handoff),
  ].join('\n');
}

/** Runs `oncefetch explain`. */
export async function explainCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags({
    args,
    options: {
      ...RECORD_FLAGS,
      lookup: { type: 'boolean', default: false },
      'provider-dedupes': { type: 'boolean', default: false },
      'provider-retention-ms': { type: 'string' },
      'max-attempts': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    io.out(EXPLAIN_HELP);
    return EXIT.ok;
  }
  if (positionals.length > 1) throw new UsageError(`one <ref> expected, got ${positionals.length}`);
  const client: OnceClientOptions = {
    providerDedupes: values['provider-dedupes'],
    providerRetentionMs: intFlag(values['provider-retention-ms'], 'provider-retention-ms', 86_400_000, 1, Number.MAX_SAFE_INTEGER),
    retry: { maxAttempts: intFlag(values['max-attempts'], 'max-attempts', 5, 1, 100), budget: false },
  };
  return withRecord(io, values, positionals[0], (record, store) => {
    const opts = resolveOptions(client, { store: () => store, fetch: () => globalThis.fetch });
    const policy = { ...explainPolicy(opts, record.action, Date.now()), lookupRegistered: values.lookup };
    const x = explain(record, policy);
    const from = (given: unknown): Assumed['from'] => (given === undefined || given === false ? 'default' : 'flag');
    const assumed: AssumedSettings = {
      lookup: { value: values.lookup, from: from(values.lookup) },
      providerDedupes: { value: opts.providerDedupes, from: from(values['provider-dedupes']) },
      providerRetentionMs: { value: opts.providerRetentionMs, from: from(values['provider-retention-ms']) },
      'retry.maxAttempts': { value: opts.retry.maxAttempts, from: from(values['max-attempts']) },
    };
    io.out(values.json ? json({ ...x, assumed }) : formatExplanation(x, assumed));
    return EXIT.ok;
  });
}
