/**
 * `explain(record, policy)`: the structured hand-off of one operation
 * (DESIGN §9), a pure function of the record, the resolved policy and `now`.
 * `client.explain(scope)` calls it with the client's policy; the CLI's
 * `oncefetch explain` with the defaults and its flags.
 *
 * @module
 */
import type { AttemptRecord, OperationRecord } from '../operation/record.js';
import type { ResolvedOptions } from '../options.js';
import type { Facts } from './facts.js';
import { factsOf, inProgressAnswer, iso, listOf, unprovenFound } from './facts.js';
import { decide, redactKey, redirected, refMinted } from './plan.js';
import type { Confidence, Diagnosis, DiagnosisCode, ExplainPolicy, Explanation, Handoff } from './types.js';

/** How the fingerprint binds a key to its payload (DESIGN §1). */
export const CANONICAL_PAYLOAD =
  'SHA-256 over method, normalised URL and RFC 8785 canonical JSON body (exact bytes otherwise)';

/** How the fingerprint binds a `client.run()` key to its payload (it has no request). */
export const CANONICAL_RUN_PAYLOAD = "SHA-256 over the RFC 8785 canonical JSON of client.run()'s payload";

/** The policy of a client's resolved options for one action, at `now`. */
export function explainPolicy(opts: ResolvedOptions, action: string, now: number, cli?: boolean): ExplainPolicy {
  const { maxAttempts, baseDelayMs, maxDelayMs, attemptTimeoutMs, deadlineMs, maxRetryAfterMs, jitter } = opts.retry;
  return {
    retry: { maxAttempts, baseDelayMs, maxDelayMs, attemptTimeoutMs, deadlineMs, maxRetryAfterMs, jitter },
    retentionMs: opts.retentionMs,
    providerRetentionMs: opts.providerRetentionMs,
    providerDedupes: opts.providerDedupes,
    lookupRegistered: Object.hasOwn(opts.lookups, action),
    now,
    cli,
  };
}

function codeOf(r: OperationRecord, f: Facts): DiagnosisCode {
  const last = f.last;
  switch (r.state) {
    case 'cancelled':
      // cancelled on an "absent" that a superseded owner's late delivery then contradicted
      return f.late === undefined ? 'cancelled' : 'unknown';
    case 'succeeded':
      return 'succeeded';
    case 'failed':
      // a superseded owner's late success beside it (a key conflict that stood, say): the contradiction, never a new ref;
      // a key conflict on a resend ended failed (by an earlier version): an earlier attempt may have taken effect
      if (f.lateSuccess || f.resendConflict) return 'unknown';
      if (last?.class === 'conflict' || r.error?.code === 'IDEMPOTENCY_CONFLICT') return 'payload_changed';
      // A refusal of a same-key resend says nothing of an earlier attempt that may have acted.
      if (f.earlierUnresolved) return 'unknown';
      return last?.class === 'terminal' ? 'terminal_client_error' : 'unknown';
    case 'in_flight':
      return f.staleLease ? 'stale_lease' : 'concurrent_duplicates';
    case 'ambiguous':
      if (f.liveLease) return 'concurrent_duplicates';
      // an attempt whose owner stopped, or a superseded owner's late answer nothing settled
      if ((last !== undefined && last.finishedAt === null) || f.late !== undefined) return 'stale_lease';
      // (a cancel re-applied on a pending record reopens it whatever its last attempt got; a key conflict on a resend: see Facts.resendConflict)
      return last?.class === 'ambiguous' || f.resendConflict || f.deliveryUnresolved ? 'timeout_before_response' : 'unknown';
    case 'pending':
      // no attempt left, and no superseded owner's late outcome says one reached the provider
      if (!f.anySent) return 'never_sent';
      if (last !== undefined && inProgressAnswer(last)) return 'concurrent_duplicates';
      // an earlier attempt that may have acted, only cleared for a same-key resend, still decides
      if (last?.class === 'ambiguous' || last?.finishedAt === null || f.earlierUnresolved) return 'timeout_before_response';
      return last?.class === 'retryable' || last?.class === 'not_sent' ? 'retryable_backoff' : 'unknown';
  }
}

/**
 * What attempt `a` got, when a status came (`undefined` when none did: a timeout, a reset): an answer,
 * though an ambiguous one (a 502, a 500 with "do not retry", a status whose body did not end) or a 409
 * "in progress" does not say whether the request took effect.
 */
function answerOf(a: AttemptRecord | undefined): string | undefined {
  if (a?.status == null) return undefined;
  const why = a.reason === null || a.reason === `status ${a.status}` ? '' : ` (${a.reason})`;
  const unsaid = a.class === 'ambiguous' || inProgressAnswer(a);
  return `got ${a.status}${why}${unsaid ? ': the provider answered, but its answer does not say whether the request took effect' : ''}`;
}

function summaryOf(code: DiagnosisCode, r: OperationRecord, f: Facts): string {
  const last = f.last;
  const n = last?.number ?? 0;
  // a pending record with a cancel requested: the next call re-applies it before any send
  const cancel =
    r.state === 'pending' && r.cancelRequestedAt !== null
      ? `A cancel was requested at ${iso(r.cancelRequestedAt)}: the next call ${f.deliveryUnresolved ? 'sends nothing and reconciles it, as an attempt may have reached the provider' : 'cancels it and sends nothing'}.`
      : undefined;
  switch (code) {
    case 'succeeded': {
      // a superseded owner's late success (its attempt got its answer, late), or its late ambiguous end beside a possible duplicate
      const by = `${f.lateAttempt ? `attempt ${f.lateAttempt.number}` : 'an attempt'}`;
      const late = f.lateSuccess
        ? `${by} got its answer late (${f.late?.status ?? '2xx'}, superseded owner ${f.late?.owner ?? '?'})`
        : f.sends < 2
          ? ''
          : `${by} ended ambiguous late (superseded owner ${f.late?.owner ?? '?'})`;
      const beside = f.sent.filter((a) => a !== f.lateAttempt).map((a) => a.number);
      const dup = f.sends < 2 ? '' : `: possible duplicate with attempt${beside.length > 1 ? 's' : ''} ${listOf(beside)}, unless the provider deduped them by key`;
      const success = r.attempts.findLast((a) => a.class === 'success');
      return r.result?.source === 'lookup'
        ? `${unprovenFound(r) === undefined ? 'A lookup found the effect' : "A lookup's redirect, not followed, was taken for the effect"} (status ${r.result.status})${late === '' ? ` after attempt ${n} ${answerOf(last) ?? 'ended without an answer'}` : `; ${late}`}${dup}.`
        : success === undefined && f.lateSuccess
          ? // (the success of the superseded owner's own attempt, recorded by that owner once it took the record back)
            `${late[0]?.toUpperCase() ?? ''}${late.slice(1)}, and that owner recorded it when it took the record back${dup}; later calls replay it.`
          : `Attempt ${success?.number ?? n} got ${r.result?.status ?? 'a 2xx'}${late === '' ? '' : `; ${late}`}${dup}; later calls replay it.`;
    }
    case 'cancelled':
      if (r.attempts.length === 0) return 'Cancelled before anything was sent.';
      return f.lookups.some((l) => l.outcome === 'absent')
        ? 'Cancelled: a lookup found nothing delivered after the cancel was requested.'
        : 'Cancelled: no attempt could have been delivered (each was refused or never left).';
    case 'terminal_client_error':
      // a redirect (`redirect: 'manual'`; a 303 is a success) is no refusal: after a POST a 302 may follow the effect
      return redirected(last?.status)
        ? `The provider answered ${last?.status} (${last?.reason ?? ''}), a redirect, returned and stored as the final answer; after a ${r.request?.method ?? 'request'} it may follow the effect (Post/Redirect/Get).`
        : `The provider refused the request with ${last?.status ?? 'a terminal error'} (${last?.reason ?? ''}): a caller defect; retrying unchanged input will not help.`;
    case 'payload_changed':
      return `The provider reported the key reused with different content (${last?.reason ?? r.error?.message ?? ''}): a conflict, never a new key.`;
    case 'never_sent':
      return 'Nothing reached the provider yet' + (r.attempts.length === 0 ? '.' : ` (${r.attempts.length} attempt(s), all not sent).`) + (cancel === undefined ? '' : ` ${cancel}`);
    case 'retryable_backoff':
      return `The provider said "not processed, later" (${last?.reason ?? ''})${cancel === undefined ? '; the operation is resumable with the same key.' : `. ${cancel}`}`;
    case 'concurrent_duplicates':
      return r.state === 'pending'
        ? `Attempt ${n} got ${last?.status ?? 409} "in progress": an earlier request with this key was still being processed; one owner, one key.${cancel === undefined ? '' : ` ${cancel}`}`
        : `Another owner (${r.lease?.owner ?? '?'}) holds the operation under a live lease until ${iso(r.lease?.expiresAt ?? r.updatedAt)}; other calls wait for it.`;
    case 'timeout_before_response':
      if (f.resendConflict) return `${resendConflictOf(r, f)} Not resent: it is looked up first.`;
      if (f.resendRefused) return `${resendRefusedOf(r, f)} Not resent: it is looked up first.`;
      if (f.earlierUnresolved && last?.class !== 'ambiguous' && last?.finishedAt !== null) {
        // only a 409 "in progress" is unresolved (needsDedupe counts none): the next call resends, reconciling nothing first
        if (r.state === 'pending' && cancel === undefined && !f.needsDedupe && f.inProgress409 !== undefined) {
          return `Attempt ${f.inProgress409.number} got ${f.inProgress409.status ?? 409} "in progress": a request with this key was being processed at the provider, which tracks the key; attempt ${n} then got ${last?.reason ?? 'no outcome'}. It may be resent with the same key.`;
        }
        return `${f.lateSuccess ? 'A superseded owner got a success late' : 'An earlier attempt may have reached the provider'} and nothing settled it (it was only cleared for a same-key resend); attempt ${n} then got ${last?.reason ?? 'no outcome'}. ${cancel ?? (r.state === 'pending' ? 'Resend only with the same key, where the provider dedupes.' : 'Not resent: it is looked up first.')}`;
      }
      return r.state === 'pending'
        ? `Attempt ${n} ${answerOf(last) ?? `ended without an answer (${last?.reason ?? 'no outcome'})`}; ${f.clearedByLookup ? 'a lookup then found no effect' : 'it was cleared for a same-key resend (the provider dedupes by key)'}${cancel === undefined ? ', so it may be resent with the same key.' : `. ${cancel}`}`
        : `Attempt ${n} ${answerOf(last) ?? `may have reached the provider but no answer came (${last?.reason ?? 'no outcome'})`}; not resent.`;
    case 'stale_lease':
      if (f.late !== undefined && r.state !== 'in_flight') {
        return f.lateSuccess
          ? `Owner ${f.late.owner} got ${f.late.status ?? 'a success'} late, after a takeover: the request took effect; no lookup has found it yet.`
          : `Owner ${f.late.owner} ended ambiguous late, after a takeover: it may have reached the provider.`;
      }
      return r.state === 'in_flight' && f.bound?.kind !== 'stop'
        ? `The owner ${r.lease?.owner ?? '?'} stopped renewing its lease while attempt ${n} was on the wire (crash?): it may have reached the provider.`
        : `Attempt ${n} never recorded an outcome: its owner ${last?.owner ?? '?'} ${unrecordedOf(r, f)}; it may have reached the provider.`;
    case 'unknown':
      // (a late success proves the effect: that contradiction first, not a conflict's "may have")
      if (f.resendConflict && r.state === 'failed' && !f.lateSuccess) {
        return `${resendConflictOf(r, f)} Yet the record ended failed as a plain conflict: the effect may exist; a person must look at it.`;
      }
      if (f.resendRefused && r.state === 'failed' && !f.lateSuccess) {
        return `${resendRefusedOf(r, f)} Yet the record ended failed, which reads as "did not happen": the effect may exist; a person must look at it.`;
      }
      if (f.lateSuccess && (r.state === 'failed' || r.state === 'cancelled')) {
        return `The record ended ${r.state}, but owner ${f.late?.owner ?? '?'} got ${f.late?.status ?? 'a success'} late, after a takeover: the request took effect; a person must look at it.`;
      }
      return `No rule fits this ${r.state} record${f.lateSuccess ? ', and a superseded owner got a success late' : ''}; a person must look at it.`;
  }
}

/**
 * How the record got past its last attempt, whose end was never recorded (`Facts.bound`): another owner took the
 * lease over, the same owner id resumed it (a restart), or its owner stopped without recording the end (a store
 * write failed) and released the lease, a later call taking the record up with nothing to take over.
 */
function unrecordedOf(r: OperationRecord, f: Facts): string {
  const b = f.bound;
  const later = r.state === 'in_flight' ? '' : ', and a later call continued';
  if (b?.kind === 'stop') return `stopped without recording its end (${b.detail.split(':')[0] ?? ''}) and released the lease${later}`;
  if (b === undefined) return `stopped${later}`;
  if (!f.resumed) return `stopped and the lease was taken over by ${b.owner}`;
  return b.owner === f.last?.owner
    ? 'stopped with it on the wire and resumed the record under the same owner id (a restart), with no takeover'
    : `released the lease without recording its end, and a later call (${b.owner}) resumed the record with no takeover`;
}

/** What a key conflict that answered a same-key resend says (`Facts.resendConflict`). */
function resendConflictOf(r: OperationRecord, f: Facts): string {
  const earlier = f.reachedEarlier === undefined ? 'a superseded owner\'s attempt' : `attempt ${f.reachedEarlier.number} (${f.reachedEarlier.reason ?? f.reachedEarlier.class ?? 'no outcome recorded'})`;
  return (
    `Attempt ${f.last?.number ?? '?'}, a resend with the same key and the same payload, was refused as key reuse with other content (${f.last?.reason ?? r.error?.message ?? 'key conflict'}): ` +
    `the provider saw the key before, most likely from ${earlier}, which may have taken effect (or it fingerprints something that varies between sends).`
  );
}

/** What a terminal answer to a same-key resend says (`Facts.resendRefused`). */
function resendRefusedOf(r: OperationRecord, f: Facts): string {
  const a = f.unsettledEarlier;
  const earlier = a === undefined ? "a superseded owner's attempt" : `attempt ${a.number} (${a.reason ?? a.class ?? 'no outcome recorded'})`;
  return (
    `Attempt ${f.last?.number ?? '?'}, a resend with the same key and the same payload, was refused (${f.last?.reason ?? r.error?.message ?? 'a terminal answer'}) after ${earlier}, ` +
    'which may have taken effect and which nothing settled: the refusal (auth or validation checked before the provider\'s dedupe, say) says nothing of it.'
  );
}

function confidenceOf(r: OperationRecord, f: Facts): Confidence {
  const levels: Confidence[] = ['low', 'medium', 'high'];
  // A record that proves nothing was sent needs no outside observation.
  let level = !f.anySent && r.state !== 'in_flight' ? 2 : Math.min(2, f.observations);
  if (f.contradictions.length > 0 || f.sends > 1) level = 0;
  if (f.staleLease || (f.keyPastCutoff && f.effects === 'unknown' && !f.terminal && r.cancelRequestedAt === null)) level = Math.max(0, level - 1);
  return levels[level] ?? 'low';
}

function handoffOf(r: OperationRecord, f: Facts, p: ExplainPolicy): Handoff {
  const lookup = p.lookupRegistered ? 'a lookup is registered' : 'no lookup registered';
  return {
    keyScope: {
      tenant: r.tenant,
      action: r.action,
      ref: r.ref,
      description:
        'The key belongs to (tenant, action, ref) and to nothing else: minted once (or adopted from the caller), persisted before the first attempt, and reused by every retry, restart and takeover.',
    },
    key: redactKey(r.key),
    keySource: r.keySource,
    canonicalPayload: r.request === null ? CANONICAL_RUN_PAYLOAD : CANONICAL_PAYLOAD,
    fingerprint: r.fingerprint,
    request: r.request,
    state: r.state,
    generation: r.generation,
    lease: r.lease === null ? null : { ...r.lease, expired: r.lease.expiresAt <= p.now },
    attempts: r.attempts.map((a) => ({
      number: a.number,
      class: a.class,
      status: a.status,
      reason: a.reason,
      startedAt: a.startedAt,
      finishedAt: a.finishedAt,
      owner: a.owner,
      generation: a.generation,
    })),
    lookups: f.lookups,
    error: r.error,
    result: r.result === null ? null : { status: r.result.status, source: r.result.source },
    retryPolicy: {
      ...p.retry,
      providerDedupes: p.providerDedupes,
      lookupRegistered: p.lookupRegistered,
      summary:
        `Up to ${p.retry.maxAttempts} attempts per call with the same key, ${p.retry.jitter} jitter from ${p.retry.baseDelayMs} ms to ${p.retry.maxDelayMs} ms, ` +
        `Retry-After honoured up to ${p.retry.maxRetryAfterMs} ms, ${p.retry.attemptTimeoutMs} ms per attempt, ${p.retry.deadlineMs} ms per call; ` +
        `after an ambiguous outcome: lookup first (${lookup}), resend only if the provider dedupes (${p.providerDedupes ? 'it does' : 'it does not'}).`,
    },
    retention: {
      createdAt: r.createdAt,
      expiresAt: r.expiresAt,
      retentionMs: p.retentionMs,
      providerRetentionMs: p.providerRetentionMs,
      keyAgeMs: f.keyAgeMs,
      resendCutoffAt: f.resendCutoffAt,
      keyStale: f.keyPastCutoff,
    },
    effects: f.effects,
  };
}

/**
 * Explains one record: what happened (`diagnosis`), what to do (`plan`), how
 * to check it (`verification`), everything needed to take it over
 * (`handoff`), how sure it is (`confidence`), and whether a person must decide
 * (`escalate`). Pure: the same record, policy and `now` give the same result.
 *
 * @example
 * ```ts
 * const x = explain(record, explainPolicy(opts, record.action, Date.now()))
 * if (x.escalate) console.error(x.escalation)
 * ```
 */
export function explain(record: OperationRecord, policy: ExplainPolicy): Explanation {
  // recover() and calls reconcile a client.run() operation (no request) with its own spec.lookup only, never a registered one;
  // nor is a registered one asked about a ref oncefetch minted (`refMinted`), which the provider never saw
  if (record.request === null || refMinted(record)) policy = { ...policy, lookupRegistered: false };
  const f = factsOf(record, policy.now, policy.providerRetentionMs, policy.providerDedupes);
  const code = codeOf(record, f);
  const diagnosis: Diagnosis = {
    code,
    summary: summaryOf(code, record, f),
    evidence: [...f.timeline, ...f.contradictions.map((c) => `contradiction: ${c}`)],
  };
  if (f.staleLease) {
    diagnosis.evidence.push(`stale: the lease ${record.lease === null ? 'is gone' : `expired at ${iso(record.lease.expiresAt)}`} while the record is in_flight`);
  }
  const decision = decide(code, record, f, policy);
  const out: Explanation = {
    scope: { tenant: record.tenant, action: record.action, ref: record.ref },
    state: record.state,
    diagnosis,
    plan: decision.plan,
    verification: decision.verification,
    handoff: handoffOf(record, f, policy),
    confidence: confidenceOf(record, f),
    observations: f.observations,
    escalate: decision.escalation !== undefined,
  };
  if (decision.escalation !== undefined) out.escalation = decision.escalation;
  return out;
}
