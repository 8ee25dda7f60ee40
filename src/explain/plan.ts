/**
 * The decision half of the evidence-to-decision map: for each diagnosis, the
 * plan, how to verify it, and whether a person must decide. Nothing here ever
 * proposes a resend that could repeat an effect: a resend is proposed only
 * after a lookup said absent, or with the same key to a provider that dedupes
 * and still remembers the key.
 *
 * @module
 */
import type { OperationRecord } from '../operation/record.js';
import type { Facts } from './facts.js';
import { iso, listOf, unprovenFound } from './facts.js';
import type { DiagnosisCode, ExplainPolicy } from './types.js';

/** What to do about one diagnosis. */
export interface Decision {
  plan: string[];
  verification: string[];
  /** set when a person must decide */
  escalation?: string;
}

interface Ctx {
  r: OperationRecord;
  f: Facts;
  p: ExplainPolicy;
  ref: string;
  action: string;
  key: string;
}

/**
 * record.ts's `refMinted`, restated: importing it would make the explain chunk and the entry share
 * record.ts as a chunk of its own (+~1 kB min+gzip on the entry, measured with `npm run size`).
 */
export const refMinted = (r: Pick<OperationRecord, 'key' | 'keySource' | 'ref'>): boolean => r.keySource === 'minted' && r.key === r.ref;

/**
 * A 3xx: a redirect handed back (`redirect: 'manual'`), terminal (a 303 is a success) but no refusal.
 * classify/status.ts's `isRedirectStatus`, restated as `refMinted` is: importing it made status.ts a
 * chunk the entry and this one share (+291 B min+gzip on the entry, measured with `npm run size`).
 */
export const redirected = (status: number | null | undefined): boolean => status != null && status >= 300 && status < 400;

/** What to look for at the provider: a ref oncefetch minted is its key, the only name the provider got for it. */
const effectFor = (c: Ctx): string =>
  refMinted(c.r) ? `the request sent with key '${c.ref}' (oncefetch minted it, and the ref as the same UUID: the provider knows no ref for it)` : `ref '${c.ref}' (key ${c.key})`;

/** The last 4 characters of a key, for messages and hand-offs; none of a key under 12 characters, which they would give away whole or nearly. */
export function redactKey(key: string): string {
  return key.length < 12 ? `… (${key.length} characters)` : `…${key.slice(-4)}`;
}

/** The effect count at the provider: `n`, or what a possible duplicate leaves open. */
const atProvider = (c: Ctx, n: string): string => `At the provider: ${c.f.sends > 1 ? possible(c) : n} effect for ref '${c.ref}' (key ${c.key}).`;

/** Effects the record may have: a success (late or its own) says at least one; a possible duplicate, up to one per send that may have acted. */
function possible(c: Ctx): string {
  const low = c.f.lateSuccess || c.r.state === 'succeeded' ? 1 : 0;
  return listOf(Array.from({ length: Math.max(1, c.f.sends) - low + 1 }, (_, i) => low + i), 'or');
}

/** Whether the policy trusts a same-key resend to be deduplicated (the engine's `trustsDedupe`): `providerDedupes`, the key within 90 % of the provider's retention. */
const trusts = (c: Ctx): boolean => c.p.providerDedupes && !c.f.keyPastCutoff;

/**
 * Whether client.recover() takes the record (once its lease expired): any live one but a `pending`
 * one, which it takes only where a dedupe the policy does not trust was all that cleared it (recover.ts).
 */
const recoverTakes = (c: Ctx): boolean => c.r.state !== 'pending' || (c.f.needsDedupe && !trusts(c));

/** `value` as one shell word: as is when plain, else single-quoted. */
const sh = (value: string): string => (/^[\w.:/@%+=,-]+$/.test(value) ? value : `'${value.replace(/'/g, "'\\''")}'`);

/** The `oncefetch show` command line for this record; where there is no command line, the `client.get()` call. */
const showCmd = (c: Ctx): string =>
  c.p.cli === false
    ? `\`client.get({ action: ${JSON.stringify(c.action)}, ref: ${JSON.stringify(c.ref)}, tenant: ${JSON.stringify(c.r.tenant)} })\``
    : `\`oncefetch show ${sh(c.ref)} --action ${sh(c.action)}${c.r.tenant === 'default' ? '' : ` --tenant ${sh(c.r.tenant)}`}\``;

/**
 * An outcome nobody has settled yet: look up first, resend only where the provider dedupes, else
 * escalate. After a superseded owner's late success an "absent" settles nothing (the engine refuses
 * it and sends nothing): only a lookup that finds it, or a same-key resend to a deduping provider.
 */
function unsettled(c: Ctx, lead: string[]): Decision {
  const late = c.f.lateSuccess;
  const cancelRequested = c.r.cancelRequestedAt !== null;
  // a key conflict on a resend is never resent: a lookup settles it (absent: the conflict stands), or a person
  const conflict = c.f.resendConflict;
  // so is a terminal answer to a resend after an attempt that may have taken effect (absent: the answer stands)
  const refused = c.f.resendRefused;
  const earlier = refused ? c.f.unsettledEarlier : c.f.reachedEarlier;
  const stands = conflict ? 'failed, the conflict standing' : `failed, the ${c.f.last?.status ?? 'terminal'} answer standing`;
  // a pending record recover() skips (one with a cancel requested, say): the next call acts on it
  const pending = !recoverTakes(c);
  const verification = [
    `${atProvider(c, possible(c))} Two would be a duplicate.`,
    `After reconciliation, ${showCmd(c)} shows succeeded (found) or ${late ? 'still ambiguous' : cancelRequested ? 'cancelled' : conflict || refused ? stands : 'pending'} (absent) and a new lookup line.`,
  ];
  const guard =
    conflict || refused
      ? [`Do not send this intent again under a new ref or a new key: ${earlier === undefined ? 'an earlier attempt' : `attempt ${earlier.number}`} may have taken effect, and a new ref would make a second effect.`]
      : [];
  // what the engine does on "unknown" (a failed lookup): a call resends with the same key where the provider dedupes
  const resend = trusts(c) && !cancelRequested && !conflict && !refused;
  if (c.p.lookupRegistered) {
    const unknown = resend
      ? `unknown → a call resends with the same key ${c.key}, which the provider dedupes (client.recover() leaves it ambiguous)`
      : 'unknown → it stays ambiguous: escalate then';
    return {
      plan: [
        ...lead,
        ...guard,
        `Look up first: ${pending ? 'call again with the same ref and payload (client.recover() skips a pending record)' : 'run client.recover() (or call again with the same ref and payload)'}; the lookup registered for '${c.action}' asks the provider whether it took effect.`,
        late
          ? `found → succeeded, later calls replay it; absent → nothing is sent, it stays ambiguous: check at the provider by hand; ${unknown}.`
          : cancelRequested
            ? `found → succeeded (delivery won over the cancel requested); absent → cancelled, nothing is sent; ${unknown}.`
            : conflict
              ? `found → succeeded, later calls replay it; absent → the conflict stands: the record ends failed (IdempotencyConflictError), nothing is sent; ${unknown}.`
              : refused
              ? `found → succeeded, later calls replay it; absent → the refusal stands: the record ends failed and replays ${c.f.last?.status ?? 'its answer'}, nothing is sent; ${unknown}.`
              : `found → succeeded, later calls replay it; absent → the next call resends with the same key ${c.key}; ${unknown}.`,
      ],
      verification,
    };
  }
  if (resend) {
    return {
      plan: [
        ...lead,
        `Call again with the same ref and payload before ${iso(c.f.resendCutoffAt)}: the same key ${c.key} is resent and the provider, which dedupes by key, answers with the original outcome instead of acting twice.`,
      ],
      verification,
    };
  }
  // a client.fetch call's own lookup (once.lookup, no registered one) that was asked and answered nothing certain
  const own = c.r.request !== null && !refMinted(c.r) ? c.f.lookups.findLast((l) => l.outcome === 'unknown') : undefined;
  const noLookup = `no lookup is registered for '${c.action}'${own === undefined ? '' : `, and the call's own lookup (once.lookup) could not settle it (${own.detail})`}`;
  const why = cancelRequested
    ? `a cancel was requested at ${iso(c.r.cancelRequestedAt ?? 0)}, which withdrew the authority to send, and ${noLookup}`
    : conflict
      ? `the provider refused a same-key resend as key reuse (${c.f.last?.reason ?? 'key conflict'}), so a resend cannot settle it, and ${c.r.request === null ? 'client.run() reconciles only with its own lookup' : noLookup}`
      : refused
      ? `the provider refused a same-key resend (${c.f.last?.reason ?? 'a terminal answer'}) after an attempt that may have taken effect, so a resend cannot settle it, and ${c.r.request === null ? 'client.run() reconciles only with its own lookup' : noLookup}`
      : c.p.providerDedupes
      ? `the key is past ${iso(c.f.resendCutoffAt)} (90 % of the provider's retention), so the provider may no longer recognise it`
      : `${c.r.request === null ? 'client.run() reconciles only with its own lookup' : refMinted(c.r) ? `oncefetch minted ref '${c.ref}' for one call (no once.ref, no key header), so no lookup by ref can find it (client.recover() asks none)` : `${noLookup}${own === undefined ? '' : ','}`} and the provider does not dedupe by key`;
  return {
    plan: [
      `Do not resend: ${why}; a resend could create a second effect.`,
      ...guard,
      `Check at the provider whether an effect exists for ${effectFor(c)}: its API, dashboard or support.`,
      `Then ${c.r.request === null ? 'call client.run() again with a lookup (spec.lookup)' : refMinted(c.r) ? `call again with the same payload and once: { ref: '${c.ref}', lookup } (its own lookup)` : own !== undefined ? `call again with the same ref, payload and a once.lookup that can answer (or register a lookup for '${c.action}' (createClient({ lookups })) and ${pending ? 'call again' : 'run client.recover()'})` : `register a lookup for '${c.action}' (createClient({ lookups }))`} that reports what you found${c.r.request === null || refMinted(c.r) || own !== undefined ? '' : `, and ${pending ? 'call again' : 'run client.recover()'}`}: found settles it as succeeded; ${late ? 'absent leaves it ambiguous' : cancelRequested ? 'absent cancels it' : conflict || refused ? `absent ends it ${stands}` : 'absent lets the next call resend with the same key'}.`,
    ],
    verification,
    escalation: `The outcome is unknown and nothing can settle it automatically: ${why}.`,
  };
}

/**
 * A `pending` record that only a provider's dedupe cleared for a send (`Facts.needsDedupe`), under a
 * policy that does not trust it (no `providerDedupes`, or the key past 90 % of the provider's
 * retention): the next call, or client.recover(), sends nothing first (execute.ts, `step`:
 * `reconcile_first`); it turns the record ambiguous and reconciles it: its lookup, else
 * AmbiguousOutcomeError (recover(): still ambiguous).
 */
function reconcileFirst(c: Ctx): Decision {
  const cleared = `the record was cleared only for a same-key resend (key ${c.key}), not by a lookup, and an earlier attempt may have acted`;
  const stale = c.p.providerDedupes ? `, and the key is past ${iso(c.f.resendCutoffAt)} (90 % of the provider's retention)` : '';
  const from = stale === '' ? ' from a client without providerDedupes' : '';
  if (c.p.lookupRegistered) {
    return unsettled(c, [`Nothing is resent blind: ${cleared}${stale}; the next call${from} sends nothing first, turns the record ambiguous and looks it up.`]);
  }
  return {
    plan: [
      `Do not call again${from} to resend it: ${cleared}${stale}. Such a call sends nothing: it turns the record ambiguous and ends with AmbiguousOutcomeError.`,
      `Check at the provider whether an effect exists for ${refMinted(c.r) ? effectFor(c) : `ref '${c.ref}'`}; ${stale === '' ? 'call again only from a client whose provider dedupes by key, or ' : ''}${c.r.request === null ? 'call client.run() again with a lookup (spec.lookup)' : refMinted(c.r) ? `call again with the same payload and once: { ref: '${c.ref}', lookup } (its own lookup)` : `register a lookup for '${c.action}' (createClient({ lookups })) and call again`}.`,
    ],
    verification: [`${atProvider(c, possible(c))} Two would be a duplicate.`],
    escalation: `The record may be resent only with the same key to a provider that dedupes, and ${stale === '' ? 'this policy says the provider does not' : 'the provider may no longer recognise the key'}.`,
  };
}

/** After a 409 "in progress": the provider tracks the key, so the next call sends it again (it is never reconciled first for a 409). */
function inProgress(c: Ctx): Decision {
  return {
    plan: [
      `Call again later with the same ref and payload: the provider answered ${c.f.inProgress409?.status ?? 409} because a request with key ${c.key} was still being processed; it replays that outcome once done.`,
      'Never mint a new key to get past an "in progress" answer: that is how duplicates are made.',
    ],
    verification: [atProvider(c, 'at most one'), 'Every attempt in the record carries the same key (one key per operation).'],
  };
}

function decideCode(code: DiagnosisCode, c: Ctx): Decision {
  const { r, f } = c;
  const status = f.last?.status ?? r.result?.status;
  switch (code) {
    case 'succeeded': {
      const replay =
        r.result?.kind === 'value' && r.result.bodyTruncated
          ? `calls with this scope and payload do not run the effect again: its value (${/\d+/.exec(r.result.body)?.[0] ?? '?'} bytes of JSON) was over maxStoredBodyBytes and was not stored, so they ask their lookup for it, or throw ValueNotStoredError.`
          : `calls with this scope and payload replay the stored result (status ${r.result?.status ?? '?'}) without touching the network.`;
      const shown = `${showCmd(c)}: state succeeded, result from ${r.result?.source ?? '?'}.`;
      // An earlier attempt whose outcome stayed unknown, cleared for the resend by a lookup's settled
      // "absent" (not by the provider's dedupe): one effect holds only if the provider did not act on
      // it later than settleMs after it ended (a first-hour trial: a provider 6 s past a 2 s timeout, 2 orders).
      const cleared = c.p.providerDedupes ? undefined : r.attempts.find((a) => a !== f.last && (a.class === 'ambiguous' || a.class === null));
      // settled by a lookup's 3xx (see `unprovenFound`): the replayed answer proves nothing
      const unproven = unprovenFound(r);
      if (unproven !== undefined) {
        return {
          plan: [
            `Check at the provider whether an effect exists for ${effectFor(c)}: the stored ${unproven} proves nothing, and ${replay}`,
            `If none exists, send the intent under a new ref (this one only replays the ${unproven}); if one exists, nothing to do.`,
          ],
          verification: [atProvider(c, '0 or 1'), shown],
        };
      }
      return f.sends < 2
        ? {
            plan: [`Nothing to do: ${replay}`, 'A new intent needs a new ref; this ref with another payload is a conflict.'],
            verification: [
              atProvider(c, 'exactly one'),
              shown,
              ...(cleared !== undefined && f.lookups.some((l) => l.outcome === 'absent')
                ? [
                    `Attempt ${cleared.number}'s outcome was unknown and a lookup's "absent", trusted settleMs after it ended, cleared it for a resend with the same key, which the provider does not dedupe: had the provider acted on attempt ${cleared.number} later than that, there are two effects. If so, undo one and raise settleMs above the provider's slowest request.`,
                  ]
                : []),
            ],
          }
        : {
            plan: [
              `Possible duplicate: check at the provider for ${f.sends > 2 ? `up to ${f.sends}` : 'two'} effects for ref '${c.ref}' (key ${c.key}), from attempts ${listOf(f.sent.map((a) => a.number))}; undo any extra one by hand.`,
              `Do not resend: ${replay}`,
            ],
            verification: [`${atProvider(c, possible(c))} Two would be a duplicate.`, shown],
          };
    }
    case 'cancelled': {
      // (past expiresAt, until purge() only: see the expiry step in `decide`)
      const until = r.expiresAt < c.p.now ? ' until purge() removes this record' : '';
      return {
        plan: [`Nothing to do: nothing was delivered and nothing will be sent for this ref${until}.`, 'A new intent needs a new ref.'],
        verification: [atProvider(c, 'no'), `Later calls with this ref reject with OperationCancelledError and send nothing${until}.`],
      };
    }
    case 'terminal_client_error':
      if (redirected(status)) {
        return {
          plan: [
            `Do not send it again under a new ref before checking: a ${status} after a ${c.r.request?.method ?? 'request'} may follow the effect or mean "not here".`,
            `Read the stored response (${showCmd(c)}) and its Location, and check at the provider whether an effect exists for ${effectFor(c)}.`,
          ],
          verification: [atProvider(c, '0 or 1'), 'Later calls with this ref get the stored response with `oncefetch-replayed: true` and send nothing.'],
        };
      }
      // A 409 to a key the caller gave (other clients may send it too) may be "a request with this key is in
      // progress" without the words (the IETF draft's 409; a provider's bare lock conflict): that request may charge.
      if (status === 409 && r.keySource === 'caller') {
        return {
          plan: [
            `Do not send it under a new ref before checking: a 409 to key ${c.key}, which you supplied, may mean another request with this key was still being processed (as the IETF draft answers a concurrent duplicate), and that one may take effect.`,
            `Check at the provider whether an effect exists for ${effectFor(c)}; if none does and none is pending, read the stored response (${showCmd(c)}), fix the input and send it with a new ref.`,
          ],
          verification: [atProvider(c, '0 or 1'), 'Later calls with this ref get the stored response with `oncefetch-replayed: true` and send nothing.'],
        };
      }
      return {
        plan: [
          `Do not retry unchanged input: the provider refused it${status === undefined || status === null ? '' : ` with ${status}`} (${f.last?.reason ?? r.error?.message ?? 'terminal'}).`,
          `Read the stored response (${showCmd(c)}), fix the input, and send the fixed request with a new ref: this ref replays the refusal.`,
        ],
        verification: [atProvider(c, 'no'), 'Later calls with this ref get the stored response with `oncefetch-replayed: true` and send nothing.'],
      };
    case 'payload_changed':
      return {
        plan: [
          `Do not retry and do not mint a new key for this ref: the provider refused key ${c.key} because it was used with other content.`,
          "The key's earlier request, with other content (another client or store, or the key given to two intents), may have taken effect: check at the provider before sending this intent under a new ref; a new intent needs a new ref.",
          'If it is the same intent, find what changes between calls (timestamps, random ids in the body) and make the payload deterministic.',
        ],
        verification: [
          'The same method, URL and canonical body give the same fingerprint: compare the one below with the new call\'s.',
          `${atProvider(c, 'at most one')}`,
        ],
      };
    case 'never_sent':
      return {
        plan: [
          'Nothing reached the provider: call again with the same ref and payload to send it (its key is kept).',
          'Or retire it without sending: client.cancel(scope).',
        ],
        verification: [atProvider(c, 'no'), 'The record has no attempts, or only not_sent ones.'],
      };
    case 'retryable_backoff':
      return {
        plan: [
          `Call again with the same ref and payload: the provider said "not processed, later" (${f.last?.reason ?? 'retryable'}); the same key ${c.key} is reused.`,
          ...(r.error === null ? [] : [`The last call stopped with ${r.error.code}: ${r.error.message}`]),
          "Honour the provider's Retry-After; raise retry.maxAttempts or retry.deadlineMs only within the provider's limits.",
        ],
        verification: [`${atProvider(c, 'no')} (until a call succeeds; then exactly one).`],
      };
    case 'concurrent_duplicates':
      // a 409 after an attempt only a provider's dedupe cleared: a call that does not trust it reconciles that one first
      if (r.state === 'pending' && !trusts(c) && f.needsDedupe) return reconcileFirst(c);
      if (f.inProgress409 !== undefined && r.state === 'pending') return inProgress(c);
      return {
        plan: [
          `Let the one owner finish: ${r.lease?.owner ?? 'another owner'} holds the lease until ${iso(r.lease?.expiresAt ?? r.updatedAt)}. Do not start a parallel request with another key or ref.`,
          'Calls with the same scope wait for that lease (single flight) and replay its result.',
          'If the lease expires without a result, the next call or client.recover() takes over and looks up first.',
        ],
        verification: [atProvider(c, 'at most one'), `${showCmd(c)} again later: a terminal state, or an expired lease.`],
      };
    case 'timeout_before_response':
      if (r.state === 'pending') {
        // cleared by a lookup after the last attempt, only when nothing earlier stays unresolved (a late success never is)
        const absent = f.clearedByLookup;
        if (!absent && !trusts(c) && f.needsDedupe) return reconcileFirst(c);
        // Else only a 409 "in progress" left an attempt unresolved (needsDedupe counts no 409): the next call sends.
        if (!absent && !c.p.providerDedupes && f.inProgress409 !== undefined) return inProgress(c);
        return {
          plan: [
            absent
              ? `A lookup found no effect: call again with the same ref and payload; the same key ${c.key} is resent.`
              : `Call again with the same ref and payload: the provider dedupes by key ${c.key}, so the resend cannot act twice.`,
          ],
          verification: [`Once the resend succeeds: ${atProvider(c, 'exactly one')}`],
        };
      }
      return unsettled(c, []);
    case 'stale_lease': {
      const lead =
        r.state === 'in_flight'
          ? [`Take it over: ${r.lease === null ? `${f.last?.owner ?? 'its owner'} released its lease` : `the lease of ${r.lease.owner} expired at ${iso(r.lease.expiresAt)}`}; client.recover() (or a call with the same ref) becomes the new owner and the record turns ambiguous.`]
          : [];
      return unsettled(c, lead);
    }
    case 'unknown':
      // a key conflict on a resend that an earlier version ended failed: the record says "did not happen", the evidence says it may have
      if (c.f.resendConflict && r.state === 'failed' && !f.lateSuccess) {
        return {
          plan: [
            `Do not send this intent again under a new ref or a new key: ${f.reachedEarlier === undefined ? 'an earlier attempt' : `attempt ${f.reachedEarlier.number}`} reached the provider and may have taken effect; a new ref would make a second effect.`,
            `Check at the provider whether an effect exists for ${effectFor(c)}: its API, dashboard or support.`,
            'If it exists, the operation happened: set right by hand whatever was done because the record said failed. If not, the conflict stands: a new intent needs a new ref.',
          ],
          verification: [atProvider(c, '0 or 1')],
          escalation: `The record ended failed on a key conflict, but the conflict answered a same-key resend (attempt ${f.last?.number ?? '?'}) after ${f.reachedEarlier === undefined ? 'a superseded owner\'s attempt' : `attempt ${f.reachedEarlier.number}`} may have reached the provider: the request may have taken effect; check it.`,
        };
      }
      // a terminal answer to a resend that an earlier version ended failed, as above
      if (f.resendRefused && r.state === 'failed' && !f.lateSuccess) {
        const earlier = f.unsettledEarlier === undefined ? 'a superseded owner\'s attempt' : `attempt ${f.unsettledEarlier.number}`;
        return {
          plan: [
            `Do not send this intent again under a new ref or a new key: ${earlier} may have taken effect; a new ref would make a second effect.`,
            `Check at the provider whether an effect exists for ${effectFor(c)}: its API, dashboard or support.`,
            `If it exists, the operation happened: set right by hand whatever was done because the record said failed. If not, the ${f.last?.status ?? 'terminal'} answer stands: fix the request, then send it with a new ref.`,
          ],
          verification: [atProvider(c, '0 or 1')],
          escalation: `The record ended failed on ${f.last?.status ?? 'a terminal answer'}, but it answered a same-key resend (attempt ${f.last?.number ?? '?'}) after ${earlier}, which may have taken effect and which nothing settled: the request may have taken effect; check it.`,
        };
      }
      return {
        plan: ['Do not resend.', `Inspect the record (${showCmd(c)}) and the provider's records, then decide by hand.`],
        verification: [atProvider(c, possible(c))],
        // a failed or cancelled record beside a superseded owner's late success: a rule fits, the contradiction (facts.ts)
        escalation:
          f.lateSuccess && f.terminal
            ? `The evidence contradicts the record's end state (${r.state}): the request took effect; check it. ${atProvider(c, possible(c))} Set right by hand what was done because the record said ${r.state} (a new ref for the same intent, say).`
            : `No rule of the evidence-to-decision map fits a ${r.state} record with this evidence.`,
      };
  }
}

/**
 * A pending record with a cancel requested, whatever else it shows: the next call re-applies the
 * cancel before any send (execute.ts, `step`), which ends it cancelled where no attempt may have been
 * delivered, else puts it back to reconciliation, which never resends after a cancel.
 */
function cancelling(c: Ctx): Decision {
  const at = `a cancel was requested at ${iso(c.r.cancelRequestedAt ?? 0)}`;
  if (c.f.deliveryUnresolved) {
    return unsettled(c, [
      `Nothing is resent: ${at}, but an attempt may have reached the provider; the next call with this ref re-applies the cancel, sends nothing and reconciles it (the record turns ambiguous).`,
    ]);
  }
  return {
    plan: [
      `Nothing is sent: ${at}; the next call with this ref (or client.cancel(scope)) applies it and the operation ends cancelled.`,
      'A new intent needs a new ref.',
    ],
    verification: [atProvider(c, 'no'), 'Later calls with this ref reject with OperationCancelledError and send nothing.'],
  };
}

/** Plan, verification and escalation for a diagnosis, with contradictions and staleness folded in. */
export function decide(code: DiagnosisCode, r: OperationRecord, f: Facts, p: ExplainPolicy): Decision {
  const c: Ctx = { r, f, p, ref: r.ref, action: r.action, key: redactKey(r.key) };
  const d = r.state === 'pending' && r.cancelRequestedAt !== null ? cancelling(c) : decideCode(code, c);
  const reasons: string[] = d.escalation === undefined ? [] : [d.escalation];
  let plan = d.plan;
  if (f.contradictions.length > 0) {
    reasons.push(`Contradictory evidence: ${f.contradictions.join('; ')}.`);
    // After a superseded owner's late success the plan above already counts on no "absent".
    if (!f.lateSuccess) {
      // what acts next: recover() takes only in_flight and ambiguous records, once their lease expired; a
      // call looks those up first, re-applies a cancel requested on a pending one, else sends at once
      plan = f.terminal
        ? [...plan, `Check the lookup registered for '${c.action}': it disagrees with what the provider answered.`]
        : [
            `Do not resend while the evidence contradicts itself (${f.contradictions.join('; ')}).`,
            `Check at the provider whether an effect exists for ${effectFor(c)}.`,
            `Fix or verify the lookup for '${c.action}'${
              r.state !== 'pending'
                ? ', then run client.recover() (once the lease has expired) or call again: either looks it up before any send'
                : recoverTakes(c)
                  ? `, then run client.recover() or call again: either sends nothing first, turns the record ambiguous and ${p.lookupRegistered ? 'looks it up' : 'cannot settle it (a call ends with AmbiguousOutcomeError)'}`
                  : `. client.recover() skips a pending record; the next call ${
                      r.cancelRequestedAt !== null
                        ? 're-applies the cancel requested and sends nothing'
                        : `sends again with key ${c.key}, no lookup first: call again only if the check finds no effect${f.keyPastCutoff ? '' : ', or the provider dedupes by key'}`
                    }`
            }.`,
          ];
    }
  }
  if (f.sends > 1) {
    const dup = f.duplicate;
    reasons.push(
      `Possible duplicate: check at the provider. Attempt ${f.lateAttempt?.number ?? '?'} ${f.lateSuccess ? `got ${f.late?.status ?? 'a 2xx'}` : 'ended ambiguous'} late and attempt ${dup?.number ?? '?'} ${dup?.class === 'success' ? `got ${dup.status ?? 'a 2xx'}` : 'may have acted'} too${f.sends > 2 ? `; ${f.sends} sends may have acted (attempts ${listOf(f.sent.map((a) => a.number))})` : ''}; nothing proves the provider deduped them by key.`,
    );
  }
  if (f.staleLease) {
    reasons.push(
      `The record is stale: the lease of ${r.lease?.owner ?? 'its owner'} ended while attempt ${f.last?.number ?? '?'} was on the wire, so its state does not say whether the request reached the provider.`,
    );
  }
  // After a cancel nothing is ever resent (the engine only reconciles): the key's age changes nothing.
  if (f.keyPastCutoff && f.effects === 'unknown' && !f.terminal && r.cancelRequestedAt === null && d.escalation === undefined) {
    reasons.push(`The key is stale: past ${iso(f.resendCutoffAt)} the provider may no longer recognise it, so a resend might act twice.`);
    plan = plan.filter((step) => !step.startsWith('Call again'));
    plan.unshift(`Do not resend with key ${c.key}: check at the provider whether an effect exists for ref '${c.ref}' first.`);
  }
  // A finished record answers later calls only until purge() removes it: past expiresAt that can be any time.
  if (f.terminal && r.expiresAt < p.now) {
    plan = [
      ...plan,
      `This record expired at ${iso(r.expiresAt)} (retentionMs after it finished): after the next purge() ${
        r.state === 'cancelled' ? `the cancel is forgotten: a call with ref '${c.ref}' is a new operation and is sent, under a new key` : `a call with ref '${c.ref}' is a new operation: a new key, sent again`
      }. Keep retentionMs at least as long as callers may call with this ref.`,
    ];
  }
  const out: Decision = { plan, verification: d.verification };
  if (reasons.length > 0) out.escalation = reasons.join(' ');
  return out;
}
