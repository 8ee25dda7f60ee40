/**
 * Everything a chaos run derives from its seed: which ref each operation
 * calls and which process calls it, which refs go to the provider that does
 * not dedupe, the providers' fault mixes, and when processes are killed or
 * paused. Shared by the runner and its workers, so both compute the same plan.
 *
 * @module
 */
import { mulberry32 } from '../src/testing/provider-faults.js';
import type { Fault } from '../src/testing/provider.js';

export { mulberry32 };

/** A seed for one purpose, derived from the run's seed. */
export function subSeed(seed: number, purpose: number): number {
  return (Math.imul(seed ^ 0x5bd1e995, 0x9e3779b1) + Math.imul(purpose + 1, 0x85ebca6b)) >>> 0;
}

/** The parameters a run is reproduced from. */
export interface RunPlan {
  seed: number;
  /** scheduled operations (calls), over all workers */
  ops: number;
  workers: number;
  /** distinct refs the operations draw from */
  refs: number;
  /** calls in flight at once per worker */
  concurrency: number;
  /** share of refs sent to the provider that ignores keys (only lookups stand between a resend and a second effect) */
  strictShare: number;
  /** half-width of the window of refs around an operation's position: small = more collisions */
  window: number;
}

/** Actions: one per provider, so that `recover()` finds the right lookup. */
export const DEDUPE_ACTION = 'create-order';
export const STRICT_ACTION = 'create-order-no-dedupe';

/**
 * The lease owner of a worker's client for one provider in one life (incarnation): `w3#2-d`
 * (dedupes) or `w3#2-s` (ignores keys). Every life has its own: a restarted process is a new
 * owner, which takes over its dead life's leases as any other process would (once they run
 * out), instead of resuming them at once as their holder.
 */
export function ownerName(worker: number, life: number, provider: 'd' | 's'): string {
  return `w${worker}#${life}-${provider}`;
}

/**
 * The worker and life of a worker's owner name (`w3#2-s`, `w3#2-s-burst`, `w3#2-d/recover`; life
 * undefined in a name without one, `w3-s`), or undefined for any other owner (`final`).
 */
export function ownerOf(owner: string): { worker: number; life: number | undefined } | undefined {
  const m = /^w(\d+)(?:#(\d+))?-/.exec(owner);
  return m === null ? undefined : { worker: Number(m[1]), life: m[2] === undefined ? undefined : Number(m[2]) };
}

/**
 * Whether an owner's client declares `providerDedupes: true`, and so trusts a lookup's
 * "absent" at once: the clients of even workers for the provider that dedupes. Honest both
 * ways; never for the provider that ignores keys, nor for the final recovery (`final`).
 */
export function reliesOnDedupe(owner: string): boolean {
  // a worker's recover() writes as `<owner>/recover`, with the worker's options
  const m = /^w(\d+)(?:#\d+)?-d(?:\/recover)?$/.exec(owner);
  return m !== null && Number(m[1]) % 2 === 0;
}

/**
 * Whether worker `worker`'s client for the provider that dedupes has no lookup: workers 2, 6, 10…
 * (every fourth, from the third; none in a run of fewer than three workers). They are among those
 * that rely on the provider's dedupe ({@link reliesOnDedupe}), so an ambiguous outcome is resent with
 * the same key; a key conflict that answers such a resend cannot be reconciled by the call that got it
 * (`AmbiguousOutcomeError`), and is left ambiguous for a call or `recover()` that has a lookup.
 */
export function lacksLookup(worker: number): boolean {
  return worker % 4 === 2;
}

/** Whether ref number `i` goes to the provider that ignores keys. */
export function isStrictRef(plan: RunPlan, i: number): boolean {
  return mulberry32(subSeed(plan.seed, 1_000_000 + i))() < plan.strictShare;
}

/** The ref name of ref number `i`: `D-00042` (dedupes) or `S-00042` (does not). */
export function refName(plan: RunPlan, i: number): string {
  return `${isStrictRef(plan, i) ? 'S' : 'D'}-${String(i).padStart(5, '0')}`;
}

/** Whether a ref name belongs to the provider that ignores keys. */
export function isStrict(ref: string): boolean {
  return ref.startsWith('S-');
}

/** The operation number of the calls of burst `n` (from 0): past the schedule and the final recovery's first calls. */
export function burstOp(plan: RunPlan, n: number): number {
  return 2 * plan.ops + n;
}

/**
 * Whether a call of ref `ref` gives up at its first retryable answer (its caller aborts it during the
 * backoff): a seeded half of the refs of the provider that ignores keys. The record is left
 * `pending`, its lease released and nothing done at the provider, and a burst calls it (see the worker).
 */
export function givesUpOnRetryable(plan: RunPlan, ref: string): boolean {
  return isStrict(ref) && mulberry32(subSeed(plan.seed, 2_000_000 + Number(ref.slice(2))))() < 0.5;
}

/** One scheduled call. */
export interface ScheduledOp {
  op: number;
  worker: number;
  ref: string;
}

/**
 * Every operation of the run: operation `i` belongs to worker `i % workers`
 * and calls a ref near position `i · refs / ops`, so that workers, which move
 * through their lists at about the same pace, call the same refs at about the
 * same time.
 */
export function schedule(plan: RunPlan): ScheduledOp[] {
  const random = mulberry32(subSeed(plan.seed, 1));
  const out: ScheduledOp[] = [];
  for (let op = 0; op < plan.ops; op++) {
    const center = Math.floor((op * plan.refs) / plan.ops);
    const offset = Math.floor(random() * (2 * plan.window + 1)) - plan.window;
    const i = Math.min(plan.refs - 1, Math.max(0, center + offset));
    out.push({ op, worker: op % plan.workers, ref: refName(plan, i) });
  }
  return out;
}

/** Retry-After values a hostile or broken server sends: huge, far-future, invalid. */
const HOSTILE_RETRY_AFTER = ['86400', 'Fri, 31 Dec 9999 23:59:59 GMT', '-1', 'garbage', '1.5', '10000000000000000000000000', '5abc', 'Wed, 21 Oct 2015 07:28:00 GMT', '0, 0'];

/** Provider-side timing of the fault mix; `settleMs` must stay well above `holdMs` (see the runner). */
export interface FaultTiming {
  /** every attempt's timeout in the workers */
  attemptTimeoutMs: number;
  /** the longest the provider holds a request before it commits (`delay_before_commit`) */
  holdMs: number;
}

/**
 * The random fault mix of one provider, every kind the provider can inject,
 * with seeded random `Retry-After` values beside the hostile ones. Faults are
 * drawn uniformly from this list, so a kind listed twice is twice as likely.
 */
export function faultMix(seed: number, timing: FaultTiming): Fault[] {
  const random = mulberry32(seed);
  const slow = timing.attemptTimeoutMs + 150;
  const randomRetryAfter = (): Fault => {
    const status = random() < 0.5 ? 503 : 429;
    return random() < 0.5
      ? { kind: 'status_before_commit', status, retryAfter: String(Math.floor(random() * 2)) }
      : { kind: 'status_before_commit', status, headers: { 'retry-after-ms': String(Math.floor(random() * 300)) } };
  };
  const hostile = (): Fault => {
    const value = HOSTILE_RETRY_AFTER[Math.floor(random() * HOSTILE_RETRY_AFTER.length)] ?? '86400';
    return { kind: 'status_before_commit', status: random() < 0.5 ? 503 : 429, retryAfter: value };
  };
  return [
    { kind: 'drop_after_commit' },
    { kind: 'drop_after_commit' },
    // past the attempt timeout: the attempt times out after the commit
    { kind: 'delay_after_commit', delayMs: slow },
    { kind: 'delay_after_commit', delayMs: Math.floor(timing.attemptTimeoutMs / 3) },
    { kind: 'error_after_commit' },
    { kind: 'error_after_commit', status: 502 },
    { kind: 'error_after_commit', status: 504 },
    { kind: 'truncate_after_commit' },
    { kind: 'truncate_after_commit' },
    { kind: 'reset_before_commit' },
    { kind: 'reset_before_commit' },
    // held past the attempt timeout before the commit: the lookup says absent at first, and a
    // same-key resend meanwhile is answered 409 "in progress" by the provider that dedupes
    { kind: 'delay_before_commit', delayMs: timing.holdMs },
    { kind: 'delay_before_commit', delayMs: timing.holdMs },
    { kind: 'delay_before_commit', delayMs: timing.holdMs },
    { kind: 'delay_before_commit', delayMs: timing.holdMs },
    { kind: 'delay_before_commit', delayMs: Math.floor(timing.attemptTimeoutMs / 3) },
    { kind: 'status_before_commit', status: 503, retryAfter: '0' },
    randomRetryAfter(),
    randomRetryAfter(),
    randomRetryAfter(),
    hostile(),
    hostile(),
    hostile(),
  ];
}

/** One act of violence against a worker process. */
export interface ChaosEvent {
  /** fires once this many calls have completed, over all workers */
  afterCompletions: number;
  kind: 'kill' | 'pause';
  /** the worker to hit; the next live one when it is done or busy */
  worker: number;
  /** SIGSTOP duration, for pauses */
  pauseMs: number;
  /** delay before the restart, for kills */
  restartDelayMs: number;
  /**
   * Hit the worker as a response of the provider that ignores keys reaches it, before its engine has
   * recorded that response: its record is left `in_flight` with the effect made (see the fleet).
   */
  aimed: boolean;
}

/**
 * Kills and pauses at seeded points of the run's progress (between 3 % and
 * 90 % of the operations), pauses lasting from `pauseMs.min` to `pauseMs.max`;
 * some aimed at a send (`aimed`: three kills in four, half the pauses), drawn
 * apart so that the other draws, and so the events of a seed, are as before.
 */
export function chaosEvents(plan: RunPlan, kills: number, pauses: number, pauseMs: { min: number; max: number }): ChaosEvent[] {
  const random = mulberry32(subSeed(plan.seed, 2));
  const aim = mulberry32(subSeed(plan.seed, 3));
  const events: ChaosEvent[] = [];
  const kinds: ('kill' | 'pause')[] = [...Array<'kill'>(kills).fill('kill'), ...Array<'pause'>(pauses).fill('pause')];
  for (const kind of kinds) {
    events.push({
      afterCompletions: Math.floor(plan.ops * (0.03 + random() * 0.87)),
      kind,
      worker: Math.floor(random() * plan.workers),
      pauseMs: Math.floor(pauseMs.min + random() * (pauseMs.max - pauseMs.min)),
      restartDelayMs: Math.floor(random() * 300),
      aimed: aim() < (kind === 'kill' ? 0.75 : 0.5),
    });
  }
  return events.sort((a, b) => a.afterCompletions - b.afterCompletions);
}
