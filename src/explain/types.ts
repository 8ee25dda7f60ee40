/**
 * Types of `client.explain(scope)` (DESIGN §9): the structured hand-off of one
 * operation to a person or an agent that has to decide what to do next.
 *
 * @module
 */
import type { JitterMode } from '../backoff/backoff.js';
import type { OperationState, RecordedClass, Scope } from '../operation/record.js';

/**
 * What the evidence says happened, from the evidence-to-decision map:
 *
 * | code | evidence | decision |
 * |---|---|---|
 * | `timeout_before_response` | an attempt may have reached the provider and nothing said whether it took effect: no answer came (timeout, reset after send), or one that does not tell (500/502/504, a body that did not end after its status), or a same-key resend after it was refused as key reuse with other content (the provider saw the key: that attempt may have taken effect), or with a terminal answer (a 401 checked before the provider's dedupe: it says nothing of that attempt) | look up first; never a new ref |
 * | `stale_lease` | the owner stopped renewing its lease while an attempt was on the wire (crash), or its late answer came after the takeover and nothing settled it (after a late success no "absent" does: only a lookup that finds it, or, with `providerDedupes`, a same-key resend) | take over, then look up first |
 * | `concurrent_duplicates` | another owner holds the operation, or the provider said "in progress" (409; a 422 "request … in progress" from PayPal, Adyen) | one owner: wait for it, never a parallel send |
 * | `payload_changed` | the provider reported the key reused with other content, on the first attempt (or after attempts that never left), or on a resend once a lookup found no effect of the earlier ones (and no superseded owner's late success says one took effect) | conflict: the key's earlier request may have taken effect; check at the provider before sending the intent under a new ref (a new intent needs a new ref) |
 * | `terminal_client_error` | the provider refused the request (4xx), on the first attempt, or on a resend after attempts that did not act or that a settled "absent" cleared | do not retry unchanged input |
 * | `retryable_backoff` | the provider said "not processed, later" (429, 503, …) or the request never left | call again, same key |
 * | `never_sent` | nothing reached the provider (every attempt `not_sent`, and no superseded owner's late outcome says one was answered) | send it, or cancel it |
 * | `succeeded` | a 2xx or a lookup found it | nothing: later calls replay (beside a superseded owner's late success or late ambiguous end nothing settled, unless the provider deduped them: check for a duplicate) |
 * | `cancelled` | cancelled before anything was delivered | nothing: a new intent needs a new ref |
 * | `unknown` | nothing above fits (a record an earlier version ended `failed` on a key conflict, or a terminal answer, that answered a resend, say, or a `failed` one beside a superseded owner's late success) | escalate |
 *
 * A `pending` record with a cancel requested sends nothing more, whatever its code: the next call
 * re-applies the cancel, which ends it `cancelled`, or, where an attempt may have reached the
 * provider, puts it back to reconciliation; the plan says which.
 *
 * @example
 * ```ts
 * const code: DiagnosisCode | undefined = (await client.explain(scope))?.diagnosis.code
 * // the key's earlier request, with other content, may have taken effect: a person checks before any new ref
 * if (code === 'payload_changed') await escalate(scope, 'key reused with other content: check at the provider')
 * ```
 */
export type DiagnosisCode =
  | 'timeout_before_response'
  | 'concurrent_duplicates'
  | 'payload_changed'
  | 'terminal_client_error'
  | 'succeeded'
  | 'retryable_backoff'
  | 'never_sent'
  | 'cancelled'
  | 'stale_lease'
  | 'unknown';

/**
 * How far the diagnosis can be trusted: from the number of independent
 * observations (attempt outcomes with an HTTP status, lookup answers, provider
 * replays), lowered by contradictory or stale evidence. `high` needs two or
 * more, `medium` one, `low` none; a record that proves nothing was sent is
 * `high` on its own.
 *
 * @example
 * ```ts
 * const x = await client.explain(scope)
 * const confidence: Confidence | undefined = x?.confidence
 * if (confidence !== 'high') await askAPerson(x)
 * ```
 */
export type Confidence = 'high' | 'medium' | 'low';

/**
 * The diagnosis of {@link Explanation}: what happened, and why oncefetch
 * thinks so.
 *
 * @example
 * ```ts
 * const diagnosis: Diagnosis | undefined = (await client.explain(scope))?.diagnosis
 * if (diagnosis) console.log(`${diagnosis.code}: ${diagnosis.summary}\n  ${diagnosis.evidence.join('\n  ')}`)
 * ```
 */
export interface Diagnosis {
  /** the row of the evidence-to-decision map that fits */
  code: DiagnosisCode;
  /** one sentence for a person */
  summary: string;
  /** the observations the diagnosis rests on, oldest first, one line each */
  evidence: string[];
}

/**
 * One attempt as handed off (attempts count from 1). An attempt with
 * `finishedAt: null` is the one whose outcome nobody saw.
 *
 * @example
 * ```ts
 * const attempts: HandoffAttempt[] = (await client.explain(scope))?.handoff.attempts ?? []
 * for (const a of attempts) console.log(a.number, a.class ?? 'unfinished', a.status, a.reason)
 * ```
 */
export interface HandoffAttempt {
  /** the attempt's number, from 1 */
  number: number;
  /** outcome class; `null` while (or if forever) unfinished */
  class: RecordedClass | null;
  /** HTTP status observed, if any */
  status: number | null;
  /** why it was classified so, e.g. `'status 503'`, `'ECONNRESET'`; `null` while unfinished */
  reason: string | null;
  /** epoch ms */
  startedAt: number;
  /** epoch ms; `null` when no outcome was recorded (on the wire, or its owner died) */
  finishedAt: number | null;
  /** lease owner that sent it */
  owner: string;
  /** lease generation it ran under (fencing token) */
  generation: number;
}

/**
 * One lookup (reconciliation) as handed off.
 *
 * @example
 * ```ts
 * const lookups: HandoffLookup[] = (await client.explain(scope))?.handoff.lookups ?? []
 * const unanswered = lookups.filter((l) => l.outcome === 'unknown').map((l) => l.detail)
 * ```
 */
export interface HandoffLookup {
  /** epoch ms */
  at: number;
  /** `resend` is the engine's decision to resend with the same key when the provider dedupes */
  outcome: 'found' | 'absent' | 'unknown' | 'resend';
  /** what the lookup answered or why it failed, one line */
  detail: string;
}

/**
 * Retry policy in force for the operation: the explaining client's, which
 * may differ from the one that made the attempts.
 *
 * @example
 * ```ts
 * const policy: HandoffRetryPolicy | undefined = (await client.explain(scope))?.handoff.retryPolicy
 * if (policy && !policy.lookupRegistered) console.warn(`no lookup for ${scope.action}: ${policy.summary}`)
 * ```
 */
export interface HandoffRetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  attemptTimeoutMs: number;
  deadlineMs: number;
  maxRetryAfterMs: number;
  jitter: JitterMode;
  providerDedupes: boolean;
  /** whether a lookup is registered for the operation's action */
  lookupRegistered: boolean;
  summary: string;
}

/**
 * Retention of the record and of the key at the provider. All times epoch ms.
 * Once `keyStale`, a resend with the key may no longer be deduplicated.
 *
 * @example
 * ```ts
 * const retention: HandoffRetention | undefined = (await client.explain(scope))?.handoff.retention
 * if (retention?.keyStale) console.warn('the provider may have forgotten the key: check by hand before any resend')
 * ```
 */
export interface HandoffRetention {
  createdAt: number;
  /** the record is purgeable after this (terminal records only) */
  expiresAt: number;
  retentionMs: number;
  providerRetentionMs: number;
  /** how old the key is at explanation time */
  keyAgeMs: number;
  /** no automatic resend after this: `createdAt + 0.9 · providerRetentionMs` */
  resendCutoffAt: number;
  /** true once past `resendCutoffAt`: the provider may have forgotten the key */
  keyStale: boolean;
}

/**
 * Everything another person or agent needs to take the operation over. The key is redacted,
 * but three fields can still hold a secret; check them before it goes into a ticket:
 * `keyScope.ref` is the whole key when the ref was minted or adopted from a key header (no
 * `once.ref`), and some providers take a key as a bearer capability; `request.url` keeps the
 * path, which is itself the credential of a capability URL (Slack and Discord webhooks, a
 * Telegram bot token); `fingerprint` is an unsalted SHA-256 of the request, so a body that
 * differs from a known one only by a short secret (a PIN, a CVC, an OTP) can be recovered by
 * trying every value (about 20,000 guesses a second through oncefetch's own function).
 *
 * @example
 * ```ts
 * const handoff: Handoff | undefined = (await client.explain(scope))?.handoff
 * if (handoff) await tickets.create({ title: `${handoff.state}: ${scope.ref}`, body: JSON.stringify(handoff, null, 2) })
 * ```
 */
export interface Handoff {
  /** the key belongs to this scope and to nothing else */
  keyScope: Scope & { description: string };
  /** the idempotency key, redacted to its last 4 characters (`…3f9a`) */
  key: string;
  keySource: 'minted' | 'caller';
  /** how the fingerprint is computed */
  canonicalPayload: string;
  /** SHA-256 hex of the canonical request */
  fingerprint: string;
  /** method and URL (origin and path; the query is never stored) */
  request: { method: string; url: string } | null;
  state: OperationState;
  /** record version and fencing token */
  generation: number;
  lease: { owner: string; expiresAt: number; expired: boolean } | null;
  attempts: HandoffAttempt[];
  lookups: HandoffLookup[];
  /** why the last call stopped, if it did */
  error: { code: string; message: string } | null;
  /** the stored result replayed to later calls */
  result: { status: number; source: 'attempt' | 'lookup' } | null;
  retryPolicy: HandoffRetryPolicy;
  retention: HandoffRetention;
  /** business effects at the provider, when the record alone proves the count (a superseded owner's late success proves one); else `'unknown'` (a possible duplicate: `verification` gives the range, up to one per send that may have acted) */
  effects: 'unknown' | number;
}

/**
 * The structured hand-off of one operation.
 *
 * @example
 * ```ts
 * const x = await client.explain({ action: 'create-order', ref: task.id })
 * if (x?.escalate) page(x.escalation, x.handoff)
 * ```
 */
export interface Explanation {
  scope: Scope;
  state: OperationState;
  diagnosis: Diagnosis;
  /** what to do next, in order; never a resend that could repeat an effect */
  plan: string[];
  /** how to check that the diagnosis and the outcome are right */
  verification: string[];
  handoff: Handoff;
  confidence: Confidence;
  /** independent observations counted for {@link Explanation.confidence} */
  observations: number;
  /** true when a person must decide: evidence missing, contradictory or stale */
  escalate: boolean;
  /** why it escalates; present only when `escalate` */
  escalation?: string;
}

/**
 * The policy an explanation is made under: the explaining client's resolved
 * options and the clock. `client.explain()` builds it; the type is exported
 * for code that stores or compares it. Shown here with the defaults:
 *
 * @example
 * ```ts
 * const policy: ExplainPolicy = {
 *   retry: { maxAttempts: 5, baseDelayMs: 200, maxDelayMs: 10_000, attemptTimeoutMs: 30_000, deadlineMs: 120_000, maxRetryAfterMs: 60_000, jitter: 'full' },
 *   retentionMs: 86_400_000, providerRetentionMs: 86_400_000, providerDedupes: false, lookupRegistered: false, now: Date.now(),
 * }
 * ```
 */
export interface ExplainPolicy {
  retry: Omit<HandoffRetryPolicy, 'providerDedupes' | 'lookupRegistered' | 'summary'>;
  retentionMs: number;
  providerRetentionMs: number;
  providerDedupes: boolean;
  /** whether a lookup is registered for the record's action (a per-call lookup is not visible here); not counted for a `client.run()` operation, which only its own `spec.lookup` reconciles */
  lookupRegistered: boolean;
  /** epoch ms */
  now: number;
  /**
   * whether the `oncefetch` command can be suggested; `false` (the browser entry's client: a page
   * has no command line) names `client.get()` instead @default true
   */
  cli?: boolean | undefined;
}
