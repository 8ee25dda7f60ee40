/**
 * What a record proves, read once: attempts, lookups, independent
 * observations, contradictions, staleness and the effect count where the
 * record alone settles it. Pure; the clock comes in as `now`.
 *
 * @module
 */
import type { AttemptRecord, EvidenceRecord, OperationRecord } from '../operation/record.js';
import type { HandoffLookup } from './types.js';

/** A retryable 409 or 422: "a request with this key is still being processed" (as record.ts's `inProgressAnswer`, not imported so the chunk stays apart). */
export const inProgressAnswer = (a: Pick<AttemptRecord, 'class' | 'status'>): boolean => a.class === 'retryable' && (a.status === 409 || a.status === 422);

/** How record.ts begins the `takeover` note of an acquisition that took no lease from another owner (its `RESUMED`, not imported so the chunk stays apart). */
const RESUMED = 'lease resumed by';

/** The analysed record. */
export interface Facts {
  last: AttemptRecord | undefined;
  lookups: HandoffLookup[];
  /** independent observations: attempt outcomes with a status (a superseded owner's late ones too), lookup answers, provider replays */
  observations: number;
  /** one line per observation or notable event, in the order the record was written (generations: clocks may differ) */
  timeline: string[];
  contradictions: string[];
  /** `in_flight` under an expired (or no) lease: the owner stopped while an attempt was on the wire */
  staleLease: boolean;
  /** the lease is held and not expired */
  liveLease: boolean;
  /**
   * the state ends the operation (`succeeded`, `failed`, `cancelled`): the same
   * test as `isTerminal`, written here because importing record.ts would put
   * it (with the schema) in a chunk shared with the browser entry
   */
  terminal: boolean;
  /**
   * an attempt before the last one may have reached the provider (unfinished, ambiguous or 409),
   * and no settled "absent" lookup came after it: cleared at most for a same-key resend (the
   * same test as `deliveryUnresolved` in record.ts, on the earlier attempts; a superseded owner's
   * late delivery counts too; held to it by test/property/explain-facts.test.ts). Where the last attempt
   * is a terminal answer that came late (`answeredLate`), the attempts it answers are left out, as record.ts's
   * `unsettledBefore` leaves them out.
   */
  earlierUnresolved: boolean;
  /**
   * the same on every attempt, the last one too (record.ts's `deliveryUnresolved`): what a cancel
   * re-applied to a `pending` record decides on, `cancelled` when false, back to reconciliation when true
   */
  deliveryUnresolved: boolean;
  /**
   * only a provider's dedupe cleared the record for a send (record.ts's `resendNeedsDedupe`:
   * `deliveryUnresolved` without its 409s): on a `pending` record, a call without `providerDedupes`
   * (or past the key's retention) sends nothing first but reconciles it (`reconcile_first`); held to
   * it by test/property/explain-facts.test.ts
   */
  needsDedupe: boolean;
  /**
   * a superseded owner's late success or ambiguous end that nothing settled (record.ts's
   * `lateDeliveryUnsettled`): its first late success, else its last late ambiguous end with no
   * settled "absent" after it
   */
  late: EvidenceRecord | undefined;
  /**
   * `late` is a success (record.ts's `lateSuccess`): the effect happened, so no "absent" settles the
   * record: a lookup that finds it does, or, with `providerDedupes`, a same-key resend
   * (`resend_after_ambiguous`, then the send), whose 2xx is the provider's replay
   */
  lateSuccess: boolean;
  /** the attempt `late` answers: its owner's own one that never recorded an outcome (so it carried the record's key) */
  lateAttempt: AttemptRecord | undefined;
  /**
   * beside `late` (a late success, or a late ambiguous end nothing settled), another attempt that may
   * have acted too (the last of `sent` but the late one's): two effects or more, unless the provider
   * deduped them, which only `providerDedupes` with every late send among the attempts and every send
   * landed before `resendCutoffAt` proves
   */
  duplicate: AttemptRecord | undefined;
  /**
   * beside `late`, the sends that may have acted, by number: each superseded owner's late delivery
   * nothing settled (its owner's open attempt), and each attempt with a 2xx or an end no settled
   * "absent" followed
   */
  sent: AttemptRecord[];
  /** how many sends may have acted beside `late` (a late delivery with no open attempt counts too); 1 when the provider deduped them, 0 with no `late` */
  sends: number;
  /** a settled "absent" came after the last attempt and nothing earlier stays unresolved: a lookup, not a same-key resend, cleared it */
  clearedByLookup: boolean;
  /** the key is past `0.9 · providerRetentionMs` */
  keyPastCutoff: boolean;
  keyAgeMs: number;
  resendCutoffAt: number;
  /** an attempt may have reached the provider (anything but `not_sent`), or a superseded owner's late outcome says one did */
  anySent: boolean;
  /**
   * the last attempt, a same-key resend, got the provider's key conflict ("used with other content")
   * while an earlier attempt may have reached the provider (record.ts's `reachedBefore`), and nothing
   * settled it since: the provider's memory of the key is, above all, the trace of that earlier
   * attempt, which may have taken effect. The engine leaves such a record ambiguous and never resends it
   * (record.ts's `conflictUnsettled`); a `failed` one with no settled "absent" after the conflict was
   * ended so by an earlier version. Never a reason for a new ref.
   */
  resendConflict: boolean;
  /**
   * the last attempt, a same-key resend, got a terminal answer (a 401 checked before the provider's dedupe, a
   * 404, a 422) while an earlier attempt may have taken effect with nothing settling it (`earlierUnresolved`,
   * record.ts's `unsettledBefore`), and nothing settled it since: the refusal says nothing of that attempt. The
   * engine leaves such a record ambiguous and never resends it (record.ts's `answerUnsettled`); a `failed` one
   * was ended so by an earlier version. Never a reason for a new ref.
   */
  resendRefused: boolean;
  /** for `resendRefused`: the last attempt before the last one that may have taken effect (none: a superseded owner's) */
  unsettledEarlier: AttemptRecord | undefined;
  /** the last attempt before the last one that may have reached the provider (anything but `not_sent`) */
  reachedEarlier: AttemptRecord | undefined;
  /** some attempt got 409 "in progress" */
  inProgress409: AttemptRecord | undefined;
  /**
   * the last attempt left open (`finishedAt: null`): the first note after it that bounds its end (record.ts's
   * `boundsOpen`): another owner's takeover, a resume (`resumed`), or a stop by its own owner
   */
  bound: EvidenceRecord | undefined;
  /** `bound` is a resume note (record.ts's RESUMED): no lease was taken from another owner */
  resumed: boolean;
  /** takeovers and superseded writes: more than one owner acted */
  concurrency: string[];
  /** the provider marked the stored result as a replay of an earlier request with this key */
  providerReplayed: boolean;
  effects: 'unknown' | number;
}

/** Share of `providerRetentionMs` after which the engine never resends automatically (DESIGN §5). */
export const RESEND_CUTOFF_SHARE = 0.9;

const NO_EFFECT: ReadonlySet<string> = new Set(['not_sent', 'retryable', 'terminal', 'conflict']);
const REPLAY_HEADERS: ReadonlySet<string> = new Set(['idempotent-replayed', 'idempotency-replayed']);

/** `1, 2 and 3` (or `or`): a list for messages. */
export const listOf = (items: (string | number)[], last = 'and'): string => `${items.slice(0, -1).join(', ')}${items.length > 1 ? ` ${last} ` : ''}${items.at(-1) ?? '?'}`;

/** ISO-8601 of an epoch ms, for messages. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Parses the lookup evidence lines written by `applyEvent` (`found: …`, `absent: …`, …). */
function lookupOf(at: number, detail: string): HandoffLookup {
  if (detail.startsWith('found:')) return { at, outcome: 'found', detail };
  if (detail.startsWith('absent:')) return { at, outcome: 'absent', detail };
  // asked before settleMs, trusted only because the provider dedupes: a same-key resend, no proof
  if (detail.startsWith('absent before settleMs')) return { at, outcome: 'resend', detail };
  if (detail.startsWith('resend with the same key')) return { at, outcome: 'resend', detail };
  return { at, outcome: 'unknown', detail };
}

function attemptLine(a: AttemptRecord): string {
  if (a.finishedAt === null) return `attempt ${a.number} started ${iso(a.startedAt)} by ${a.owner}: no outcome recorded`;
  const status = a.status === null ? 'no HTTP status' : `status ${a.status}`;
  return `attempt ${a.number} at ${iso(a.startedAt)}: ${a.class ?? 'unclassified'} (${a.reason ?? 'no reason'}), ${status}`;
}

function contradictionsOf(record: OperationRecord, lookups: HandoffLookup[], providerReplayed: boolean, late: EvidenceRecord | undefined): string[] {
  const found: string[] = [];
  // A superseded owner's late success: the "absent" that cleared its attempt came too early. (No
  // time for the late one: it is that owner's clock; the timeline has the order.)
  const absent = lookups.findLast((l) => l.outcome === 'absent');
  if (late !== undefined && isSuccess(late) && absent !== undefined && record.state !== 'succeeded') {
    found.push(`a lookup said absent at ${iso(absent.at)}, but a superseded owner got ${late.status ?? 'a success'} late: the request took effect`);
  }
  // The record ended failed or cancelled (by an owner that did not know of that success): the provider has the effect all the same.
  if (late !== undefined && isSuccess(late) && (record.state === 'failed' || record.state === 'cancelled')) {
    found.push(`the record ended ${record.state}, but a superseded owner got ${late.status ?? 'a success'} late: the request took effect`);
  }
  const attempts = record.attempts;
  // An attempt after the lookup that could itself have acted explains what follows it.
  const actedBetween = (from: number, to: AttemptRecord): boolean =>
    attempts.some((a) => a.number < to.number && a.startedAt >= from && (a.class === null || !NO_EFFECT.has(a.class)));
  for (const l of lookups) {
    if (l.outcome !== 'absent') continue;
    const later409 = attempts.find((a) => a.startedAt >= l.at && inProgressAnswer(a) && !actedBetween(l.at, a));
    if (later409 !== undefined) {
      found.push(`a lookup said absent at ${iso(l.at)}, but attempt ${later409.number} afterwards got ${later409.status ?? 409} "in progress": the provider holds a request with this key`);
    }
    const success = attempts.find((a) => a.startedAt >= l.at && a.class === 'success' && !actedBetween(l.at, a));
    if (success !== undefined && providerReplayed && record.result?.source === 'attempt') {
      found.push(`a lookup said absent at ${iso(l.at)}, but attempt ${success.number} afterwards got a replay of an earlier request with this key`);
    }
  }
  // Two lookups that disagree with no attempt in between, nor a superseded owner's request landing: one of them is wrong.
  const asked = record.evidence.filter((e) => e.kind === 'lookup');
  for (let i = 1; i < lookups.length; i++) {
    const a = lookups[i - 1];
    const b = lookups[i];
    if (a === undefined || b === undefined) continue;
    const pair = new Set([a.outcome, b.outcome]);
    if (!(pair.has('found') && pair.has('absent'))) continue;
    const from = asked[i - 1]?.generation ?? 0;
    const to = asked[i]?.generation ?? 0;
    const sentBetween =
      attempts.some((t) => t.startedAt >= a.at && t.startedAt <= b.at) || record.evidence.some((e) => isLate(e) && e.generation > from && e.generation < to);
    if (!sentBetween) found.push(`lookups disagree with nothing sent in between: ${a.outcome} at ${iso(a.at)}, ${b.outcome} at ${iso(b.at)}`);
  }
  if (record.state === 'succeeded' && record.result === null) found.push('the record is succeeded but holds no result');
  const st = unprovenFound(record);
  if (st !== undefined) {
    found.push(`a lookup's ${st} answer settled the record succeeded, but a ${st} is not a found effect (a redirect the lookup did not follow, read as found before a lookup needed a 2xx): the effect may not exist`);
  }
  return found;
}

/**
 * The status of a lookup's answer that settled the record though it is no 2xx: a 3xx, read as found
 * while 200–399 counted as found (a lookup with `redirect: 'manual'` handed a 302 to a login page
 * over; measured: succeeded with 0 orders at the provider). No proof of the effect. Else undefined.
 */
export function unprovenFound(record: OperationRecord): number | undefined {
  const st = record.result?.source === 'lookup' ? record.result.status : 200;
  return st < 200 || st > 299 ? st : undefined;
}

/** A superseded owner's late outcome that says its attempt was sent (every one but a late `not_sent`). */
const saysSent = (e: EvidenceRecord): boolean => e.kind === 'late_response' && !e.detail.startsWith('late not_sent');

/** Whether a settled "absent" lookup was written after generation `generation` (record.ts's `settledAbsentAfter`). */
function settledAbsentAfter(record: OperationRecord, generation: number): boolean {
  return record.evidence.some((e) => e.kind === 'lookup' && e.generation > generation && e.detail.startsWith('absent:'));
}

/** record.ts's `isLateDelivery`: the evidence `keepAsEvidence` writes for a superseded owner's late success or ambiguous end. */
const isLate = (e: EvidenceRecord): boolean => e.kind === 'late_response' && /^late (success|ambiguous) outcome/.test(e.detail);
const isSuccess = (e: EvidenceRecord): boolean => e.detail.startsWith('late success outcome');

/**
 * record.ts's `lateDeliveryUnsettled`, with the evidence: a superseded owner's first late success
 * (no "absent" settles it: the effect happened), else its last late ambiguous end with no settled
 * "absent" after it (held to it by test/property/explain-facts.test.ts).
 */
function lateOf(record: OperationRecord): EvidenceRecord | undefined {
  const success = record.evidence.find((e) => isLate(e) && isSuccess(e));
  if (success !== undefined) return success;
  const late = record.evidence.findLast(isLate);
  return late !== undefined && !settledAbsentAfter(record, late.generation) ? late : undefined;
}

/**
 * An attempt that may have reached the provider: unfinished, ambiguous, or retried though it may take effect
 * ("in progress", a 409 or 422, {@link inProgressAnswer}; a hinted 5xx other than 503: record.ts's `retriedUnknown`
 * and `deliveryUnresolved`).
 */
const risky = (a: AttemptRecord): boolean =>
  a.finishedAt === null || !(a.class === 'not_sent' || (a.class === 'retryable' && !inProgressAnswer(a) && !(a.status != null && a.status >= 500 && a.status !== 503)));

/**
 * record.ts's `deliveryUnresolved` on `attempts` (the attempts before the last one, or all of them),
 * written out again for the lazy chunk (held to it by test/property/explain-facts.test.ts).
 */
function unresolvedOf(record: OperationRecord, attempts: AttemptRecord[], late: EvidenceRecord | undefined): boolean {
  if (late !== undefined) return true;
  const last = attempts.findLast(risky);
  return last !== undefined && !settledAbsentAfter(record, last.generation);
}

/** record.ts's `resendNeedsDedupe`: `unresolvedOf` on every attempt, a 409 "in progress" not counted (it shows that the provider tracks the key). */
function needsDedupeOf(record: OperationRecord, late: EvidenceRecord | undefined): boolean {
  if (late !== undefined) return true;
  const last = record.attempts.findLast((a) => a.finishedAt === null || !(a.class === 'not_sent' || a.class === 'retryable'));
  return last !== undefined && !settledAbsentAfter(record, last.generation);
}

/** How an attempt's reason marks an outcome that came late, the call of an earlier attempt (fetch-operation.ts, run-operation.ts). */
const LATE_ANSWER = /^(?:override: )?late, the (?:request|effect) of an earlier attempt: /;

/**
 * For a last attempt that is a terminal answer which came late: the attempts whose call it is (record.ts's
 * `attempt_finished` `answers`, which the record does not keep), read back as the run of attempts before it,
 * by its owner, that were given up with no answer (timed out: the one whose call was still out, and those
 * that only waited for it). Else none.
 */
function answeredLate(attempts: AttemptRecord[]): AttemptRecord[] {
  const last = attempts.at(-1);
  if (last?.class !== 'terminal' || !LATE_ANSWER.test(last.reason ?? '')) return [];
  let i = attempts.length - 1;
  while (i > 0) {
    const a = attempts[i - 1];
    if (a === undefined || a.owner !== last.owner || a.class !== 'ambiguous' || a.status !== null) break;
    i--;
  }
  return attempts.slice(i, -1);
}

/** Attempts that may have acted: unfinished, or an outcome other than "not processed". */
const maybeActed = (record: OperationRecord): AttemptRecord[] => record.attempts.filter((a) => a.finishedAt === null || a.class === null || !NO_EFFECT.has(a.class));

/** Business effects the record alone proves, else `'unknown'`. */
function effectsOf(record: OperationRecord, lookups: HandoffLookup[], contradictions: string[], late: EvidenceRecord | undefined, sends: number): 'unknown' | number {
  const maybe = maybeActed(record);
  // Beside a superseded owner's late delivery nothing settled, another send that may have acted: one or more.
  if (sends > 1) return 'unknown';
  // A superseded owner's late success: its attempt acted, whatever a lookup said; one, when no other attempt may have (or the provider deduped them).
  if (late !== undefined && isSuccess(late)) return 1;
  if (contradictions.length > 0) return 'unknown';
  if (record.state === 'succeeded') return 1;
  // A late ambiguous end nothing settled: an "absent" before it proves nothing.
  if (late !== undefined) return 'unknown';
  if (maybe.length === 0) return 0;
  const lastMaybe = Math.max(...maybe.map((a) => a.startedAt));
  // An absent lookup after the last attempt that could have acted settles it at 0.
  return lookups.some((l) => l.outcome === 'absent' && l.at >= lastMaybe) ? 0 : 'unknown';
}

/** Reads everything {@link explain} needs from a record. */
export function factsOf(record: OperationRecord, now: number, providerRetentionMs: number, providerDedupes = false): Facts {
  // by generation, the order of the writes: the owners' clocks may differ
  const timed: { gen: number; text: string }[] = [];
  let observations = 0;
  for (const a of record.attempts) {
    timed.push({ gen: a.generation, text: attemptLine(a) });
    if (a.finishedAt !== null && a.status !== null) observations++;
  }
  const lookups: HandoffLookup[] = [];
  const concurrency: string[] = [];
  for (const e of record.evidence) {
    if (e.kind === 'lookup') {
      const l = lookupOf(e.at, e.detail);
      lookups.push(l);
      if (l.outcome === 'found' || l.outcome === 'absent') observations++;
      timed.push({ gen: e.generation, text: `lookup at ${iso(e.at)}: ${e.detail}` });
    } else if (e.kind === 'takeover' && e.detail.startsWith(RESUMED)) {
      // no lease taken from another owner: a resume (a restart under the same owner id), marking where settleMs counts from
      timed.push({ gen: e.generation, text: `resume at ${iso(e.at)}: ${e.detail}` });
    } else if (e.kind === 'takeover' || e.kind === 'stale_write' || e.kind === 'late_response') {
      // a superseded owner's late outcome with a status is an attempt outcome all the same
      if (e.kind === 'late_response' && e.status !== null) observations++;
      concurrency.push(`${e.kind} at ${iso(e.at)}: ${e.detail}`);
      timed.push({ gen: e.generation, text: `${e.kind} at ${iso(e.at)}: ${e.detail}` });
    } else {
      // kind 'attempt', "found: …": a call recorded its own attempt's success (its write had lost the lease), no lookup's finding
      const own = e.kind === 'attempt' && e.detail.startsWith('found: ');
      timed.push({
        gen: e.generation,
        text: own
          ? `own success at ${iso(e.at)}: ${e.owner}'s call recorded its own attempt's ${e.status} (no lookup found it): ${e.detail.slice(7)}`
          : `${e.kind} at ${iso(e.at)}: ${e.detail}`,
      });
    }
  }
  const providerReplayed =
    record.result?.headers.some(([name, value]) => REPLAY_HEADERS.has(name.toLowerCase()) && value.trim().toLowerCase() === 'true') ?? false;
  if (providerReplayed) {
    observations++;
    timed.push({ gen: record.generation, text: 'the provider marked the stored response as a replay of an earlier request with this key' });
  }
  const late = lateOf(record);
  const contradictions = contradictionsOf(record, lookups, providerReplayed, late);
  const lease = record.lease;
  const liveLease = lease !== null && lease.expiresAt > now;
  const keyAgeMs = Math.max(0, now - record.createdAt);
  const resendCutoffAt = record.createdAt + Math.floor(providerRetentionMs * RESEND_CUTOFF_SHARE);
  const inProgress409 = record.attempts.find(inProgressAnswer);
  if (inProgress409 !== undefined) concurrency.push(`attempt ${inProgress409.number} got ${inProgress409.status ?? 409}: a request with this key was in progress at the provider`);
  timed.sort((a, b) => a.gen - b.gen);
  const openOf = (e: EvidenceRecord): AttemptRecord | undefined => record.attempts.findLast((a) => a.owner === e.owner && a.finishedAt === null);
  const lateAttempt = late && openOf(late);
  // Each late delivery nothing settled may have acted (a success says it did), by its owner's open attempt, when it landed;
  // so may any other attempt a settled "absent" did not clear.
  const landed = new Map<AttemptRecord | string, number>();
  if (late !== undefined) {
    for (const e of record.evidence) {
      if (!isLate(e) || (!isSuccess(e) && settledAbsentAfter(record, e.generation))) continue;
      const by = openOf(e) ?? e.owner;
      landed.set(by, Math.max(landed.get(by) ?? 0, e.at));
    }
    for (const a of maybeActed(record)) if (!landed.has(a) && (a.class === 'success' || !settledAbsentAfter(record, a.generation))) landed.set(a, a.finishedAt ?? Infinity);
  }
  const sent = record.attempts.filter((a) => landed.has(a));
  // Every attempt carries the record's one key: a provider that dedupes acted once, if each send landed while it remembered the key.
  const deduped = providerDedupes && late !== undefined && landed.size === sent.length && Math.max(...landed.values()) < resendCutoffAt;
  const duplicate = deduped ? undefined : sent.findLast((a) => a !== lateAttempt);
  const sends = deduped ? 1 : landed.size;
  const last = record.attempts[record.attempts.length - 1];
  const bound =
    last?.finishedAt === null ? record.evidence.find((e) => e.generation > last.generation && (e.kind === 'takeover' || (e.kind === 'stop' && e.owner === last.owner))) : undefined;
  const answered = answeredLate(record.attempts);
  const earlier = record.attempts.slice(0, -1).filter((a) => !answered.includes(a));
  const unresolved = unresolvedOf(record, earlier, late);
  // record.ts's `reachedBefore`, written out again for the lazy chunk
  const reachedEarlier = record.attempts.slice(0, -1).findLast((a) => a.class !== 'not_sent');
  const resendConflict =
    last?.class === 'conflict' &&
    (reachedEarlier !== undefined || record.evidence.some((e) => e.generation < last.generation && saysSent(e))) &&
    // ambiguous: as the engine left it (record.ts's `conflictUnsettled`); failed: by an earlier version, nothing settled since
    (record.state === 'ambiguous' || (record.state === 'failed' && !settledAbsentAfter(record, last.generation)));
  // ambiguous: as the engine left it (record.ts's `answerUnsettled`); failed: by an earlier version, with what was unsettled
  // before the resend started (a late delivery written after a failed attempt 1 is no resend's) and nothing settled since
  const unsettledEarlier = earlier.findLast(risky);
  const resendRefused =
    last?.class === 'terminal' &&
    (record.state === 'ambiguous' ||
      (record.state === 'failed' &&
        unresolved &&
        !settledAbsentAfter(record, last.generation) &&
        ((unsettledEarlier !== undefined && !settledAbsentAfter(record, unsettledEarlier.generation)) ||
          record.evidence.some((e) => isLate(e) && e.generation < last.generation && (isSuccess(e) || !settledAbsentAfter(record, e.generation))))));
  return {
    last,
    lookups,
    observations,
    timeline: timed.map((t) => t.text),
    contradictions,
    staleLease: record.state === 'in_flight' && !liveLease,
    liveLease,
    terminal: record.state === 'succeeded' || record.state === 'failed' || record.state === 'cancelled',
    earlierUnresolved: unresolved,
    deliveryUnresolved: unresolvedOf(record, record.attempts, late),
    needsDedupe: needsDedupeOf(record, late),
    late,
    lateSuccess: late !== undefined && isSuccess(late),
    lateAttempt,
    duplicate,
    sent,
    sends,
    clearedByLookup: last !== undefined && !unresolved && settledAbsentAfter(record, last.generation),
    keyPastCutoff: now >= resendCutoffAt,
    keyAgeMs,
    resendCutoffAt,
    anySent: record.attempts.some((a) => a.class !== 'not_sent') || record.evidence.some(saysSent),
    resendConflict,
    resendRefused,
    unsettledEarlier: resendRefused ? unsettledEarlier : undefined,
    reachedEarlier,
    inProgress409,
    bound,
    resumed: bound?.kind === 'takeover' && bound.detail.startsWith(RESUMED),
    concurrency,
    providerReplayed,
    effects: effectsOf(record, lookups, contradictions, late, sends),
  };
}
