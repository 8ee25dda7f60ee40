/**
 * What a record proves, read once: attempts, lookups, independent
 * observations, contradictions, staleness and the effect count where the
 * record alone settles it. Pure; the clock comes in as `now`.
 *
 * @module
 */
import type { AttemptRecord, OperationRecord } from '../operation/record.js';
import type { HandoffLookup } from './types.js';

/** The analysed record. */
export interface Facts {
  last: AttemptRecord | undefined;
  lookups: HandoffLookup[];
  /** independent observations: attempt outcomes with a status, lookup answers, provider replays */
  observations: number;
  /** one line per observation or notable event, oldest first */
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
   * late delivery counts too; held to it by test/property/explain-facts.test.ts)
   */
  earlierUnresolved: boolean;
  /** the key is past `0.9 · providerRetentionMs` */
  keyPastCutoff: boolean;
  keyAgeMs: number;
  resendCutoffAt: number;
  /** an attempt may have reached the provider (anything but `not_sent`) */
  anySent: boolean;
  /** some attempt got 409 "in progress" */
  inProgress409: AttemptRecord | undefined;
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

function contradictionsOf(record: OperationRecord, lookups: HandoffLookup[], providerReplayed: boolean): string[] {
  const found: string[] = [];
  const attempts = record.attempts;
  // An attempt after the lookup that could itself have acted explains what follows it.
  const actedBetween = (from: number, to: AttemptRecord): boolean =>
    attempts.some((a) => a.number < to.number && a.startedAt >= from && (a.class === null || !NO_EFFECT.has(a.class)));
  for (const l of lookups) {
    if (l.outcome !== 'absent') continue;
    const later409 = attempts.find((a) => a.startedAt >= l.at && a.status === 409 && a.class === 'retryable' && !actedBetween(l.at, a));
    if (later409 !== undefined) {
      found.push(`a lookup said absent at ${iso(l.at)}, but attempt ${later409.number} afterwards got 409 "in progress": the provider holds a request with this key`);
    }
    const success = attempts.find((a) => a.startedAt >= l.at && a.class === 'success' && !actedBetween(l.at, a));
    if (success !== undefined && providerReplayed && record.result?.source === 'attempt') {
      found.push(`a lookup said absent at ${iso(l.at)}, but attempt ${success.number} afterwards got a replay of an earlier request with this key`);
    }
  }
  // Two lookups that disagree with no attempt in between: one of them is wrong.
  for (let i = 1; i < lookups.length; i++) {
    const a = lookups[i - 1];
    const b = lookups[i];
    if (a === undefined || b === undefined) continue;
    const pair = new Set([a.outcome, b.outcome]);
    if (!(pair.has('found') && pair.has('absent'))) continue;
    const sentBetween = attempts.some((t) => t.startedAt >= a.at && t.startedAt <= b.at);
    if (!sentBetween) found.push(`lookups disagree with nothing sent in between: ${a.outcome} at ${iso(a.at)}, ${b.outcome} at ${iso(b.at)}`);
  }
  if (record.state === 'succeeded' && record.result === null) found.push('the record is succeeded but holds no result');
  return found;
}

/** Whether a settled "absent" lookup was written after generation `generation` (record.ts's `settledAbsentAfter`). */
function settledAbsentAfter(record: OperationRecord, generation: number): boolean {
  return record.evidence.some((e) => e.kind === 'lookup' && e.generation > generation && e.detail.startsWith('absent:'));
}

/**
 * record.ts's `deliveryUnresolved` on the attempts before the last one, written out again for the
 * lazy chunk (held to it by test/property/explain-facts.test.ts).
 */
function earlierUnresolved(record: OperationRecord): boolean {
  // `lateDeliveryUnsettled`: a superseded owner's late success anywhere (no "absent" settles it: the
  // effect happened), or its last late ambiguous end with no settled "absent" after it
  if (record.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith('late success outcome'))) return true;
  const late = record.evidence.findLast((e) => e.kind === 'late_response' && /^late (success|ambiguous) outcome/.test(e.detail));
  if (late !== undefined && !settledAbsentAfter(record, late.generation)) return true;
  const risky = record.attempts.slice(0, -1).findLast((a) => a.finishedAt === null || !(a.class === 'not_sent' || (a.class === 'retryable' && a.status !== 409)));
  return risky !== undefined && !settledAbsentAfter(record, risky.generation);
}

/** Business effects the record alone proves, else `'unknown'`. */
function effectsOf(record: OperationRecord, lookups: HandoffLookup[], contradictions: string[]): 'unknown' | number {
  if (contradictions.length > 0) return 'unknown';
  if (record.state === 'succeeded') return 1;
  const maybe = record.attempts.filter((a) => a.finishedAt === null || a.class === null || !NO_EFFECT.has(a.class));
  if (maybe.length === 0) return 0;
  const lastMaybe = Math.max(...maybe.map((a) => a.startedAt));
  // An absent lookup after the last attempt that could have acted settles it at 0.
  return lookups.some((l) => l.outcome === 'absent' && l.at >= lastMaybe) ? 0 : 'unknown';
}

/** Reads everything {@link explain} needs from a record. */
export function factsOf(record: OperationRecord, now: number, providerRetentionMs: number): Facts {
  const timed: { at: number; text: string }[] = [];
  let observations = 0;
  for (const a of record.attempts) {
    timed.push({ at: a.startedAt, text: attemptLine(a) });
    if (a.finishedAt !== null && a.status !== null) observations++;
  }
  const lookups: HandoffLookup[] = [];
  const concurrency: string[] = [];
  for (const e of record.evidence) {
    if (e.kind === 'lookup') {
      const l = lookupOf(e.at, e.detail);
      lookups.push(l);
      if (l.outcome === 'found' || l.outcome === 'absent') observations++;
      timed.push({ at: e.at, text: `lookup at ${iso(e.at)}: ${e.detail}` });
    } else if (e.kind === 'takeover' || e.kind === 'stale_write' || e.kind === 'late_response') {
      concurrency.push(`${e.kind} at ${iso(e.at)}: ${e.detail}`);
      timed.push({ at: e.at, text: `${e.kind} at ${iso(e.at)}: ${e.detail}` });
    } else if (e.kind !== 'attempt') {
      timed.push({ at: e.at, text: `${e.kind} at ${iso(e.at)}: ${e.detail}` });
    }
  }
  const providerReplayed =
    record.result?.headers.some(([name, value]) => REPLAY_HEADERS.has(name.toLowerCase()) && value.trim().toLowerCase() === 'true') ?? false;
  if (providerReplayed) {
    observations++;
    timed.push({ at: record.updatedAt, text: 'the provider marked the stored response as a replay of an earlier request with this key' });
  }
  const contradictions = contradictionsOf(record, lookups, providerReplayed);
  const lease = record.lease;
  const liveLease = lease !== null && lease.expiresAt > now;
  const keyAgeMs = Math.max(0, now - record.createdAt);
  const resendCutoffAt = record.createdAt + Math.floor(providerRetentionMs * RESEND_CUTOFF_SHARE);
  const inProgress409 = record.attempts.find((a) => a.class === 'retryable' && a.status === 409);
  if (inProgress409 !== undefined) concurrency.push(`attempt ${inProgress409.number} got 409: a request with this key was in progress at the provider`);
  timed.sort((a, b) => a.at - b.at);
  return {
    last: record.attempts[record.attempts.length - 1],
    lookups,
    observations,
    timeline: timed.map((t) => t.text),
    contradictions,
    staleLease: record.state === 'in_flight' && !liveLease,
    liveLease,
    terminal: record.state === 'succeeded' || record.state === 'failed' || record.state === 'cancelled',
    earlierUnresolved: earlierUnresolved(record),
    keyPastCutoff: now >= resendCutoffAt,
    keyAgeMs,
    resendCutoffAt,
    anySent: record.attempts.some((a) => a.class !== 'not_sent'),
    inProgress409,
    concurrency,
    providerReplayed,
    effects: effectsOf(record, lookups, contradictions),
  };
}
