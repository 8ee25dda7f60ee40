/**
 * Reconciliation: after an ambiguous outcome, ask the provider whether the
 * operation happened before anything is sent again (DESIGN §2, §3).
 *
 * @module
 */
import { untilAborted } from '../backoff/sleep.js';
import { boundsOpen } from '../operation/record.js';
import type { OperationRecord, ResultSnapshot, Scope } from '../operation/record.js';

/**
 * What a lookup receives. Look the operation up by `scope.ref` (when the
 * provider stores your reference) or by `key` (when it lists requests by
 * idempotency key), and pass `signal` on.
 *
 * @example
 * ```ts
 * const byKey = async ({ key, signal }: LookupContext) =>
 *   fetch(`https://api.example.com/orders?idempotency_key=${encodeURIComponent(key)}`, { signal })
 * ```
 */
export interface LookupContext {
  /** the operation being reconciled */
  scope: Scope;
  /** the idempotency key every attempt carried */
  key: string;
  /** the stored record (attempts and evidence so far) */
  record: Readonly<OperationRecord>;
  /** aborts when the call's deadline passes or the caller aborts */
  signal: AbortSignal;
}

/**
 * Asks the provider whether the operation took effect.
 * - resolves to a `Response` with a 2xx status (200 to 299; a 204: exists, no body): found — it becomes
 *   the operation's result;
 * - resolves to a `Response` with a 3xx, 4xx or 5xx status (a redirect the lookup did not follow, as
 *   `redirect: 'manual'` hands back a 302 to a login page; the lookup endpoint's own 500, a 401 of a
 *   wrong token, a wrong path's 404): unknown, as a throw (below); its body is cancelled. Map the
 *   provider's "no such operation" answer to `null` yourself;
 * - resolves to `null`: absent — resent with the same key (but a requested cancel ends `cancelled`,
 *   and a provider's key conflict on a resend then stands, once the "absent" is settled: `failed`,
 *   `IdempotencyConflictError`);
 * - throws (or resolves to anything else): unknown — resent only when the provider dedupes,
 *   else the call fails with `AmbiguousOutcomeError` and the record stays `ambiguous`.
 *
 * @example
 * ```ts
 * const lookup: LookupFn = async ({ scope, signal }) => {
 *   // encode the ref: an unencoded '+', '&' or '#' makes the provider search for another ref and
 *   // answer 404, read here as "absent", and the order is sent again
 *   const res = await fetch(`${api}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal })
 *   if (res.status === 404) return null
 *   if (!res.ok) throw new Error(`lookup failed: ${res.status}`)
 *   return res
 * }
 * ```
 */
export type LookupFn = (ctx: LookupContext) => Promise<Response | null>;

/** The engine's view of a lookup: a stored snapshot, `null` for absent, a throw for unknown. */
export type SnapshotLookup = (ctx: LookupContext) => Promise<ResultSnapshot | null>;

/** Outcome of {@link reconcile}. */
export type ReconcileOutcome =
  | { kind: 'found'; snapshot: ResultSnapshot; detail: string }
  | { kind: 'absent'; detail: string }
  | { kind: 'unknown'; detail: string; error: unknown }
  | { kind: 'none'; detail: string };

/** Runs the lookup, turning every way it can end into data. */
export async function reconcile(lookup: SnapshotLookup | undefined, ctx: LookupContext): Promise<ReconcileOutcome> {
  if (lookup === undefined) return { kind: 'none', detail: 'no lookup registered for this action' };
  try {
    // A lookup that ignores its signal still ends at the call's deadline.
    const snapshot = await untilAborted(lookup(ctx), ctx.signal);
    if (snapshot === null) return { kind: 'absent', detail: 'lookup reported no such operation' };
    return { kind: 'found', snapshot, detail: `lookup found it (status ${snapshot.status})` };
  } catch (error) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    let detail = 'lookup failed';
    try {
      detail = `lookup failed: ${error instanceof Error ? error.message : String(error)}`;
    } catch {
      // a thrown value that cannot be read (a getter that throws, a revoked Proxy): still "unknown"
    }
    return { kind: 'unknown', detail, error };
  }
}

/**
 * When an "absent" answer about `record`'s last attempt can be trusted: `settleMs` after the
 * attempt can no longer have left this process — when it finished, or, for an attempt that never
 * finished (its owner crashed or was taken over), when the lease was last taken over, or when its
 * owner stopped and let the lease go with it still open (its end not recorded) — and after
 * the last late response of a superseded owner, whose attempt was on the wire until then. Compare
 * it with the time the lookup was *asked*, not answered: a slow lookup may have asked too early.
 * `readAt`, the time (this process's clock) the record was read, bounds the window's start: a
 * stamp from another owner's clock running ahead would otherwise hold the answer off by the skew.
 */
export function settledAt(record: Pick<OperationRecord, 'attempts' | 'evidence'>, settleMs: number, readAt = Infinity): number {
  const last = record.attempts.at(-1);
  if (last === undefined) return 0;
  let from = last.finishedAt ?? last.startedAt;
  // (an attempt left open by its own owner's stop: on the wire until then, its end not recorded. Only the
  // first bound: a later stop of that owner is a later call, which sent nothing, and would push the window
  // forward at each call that stops before it ends)
  let bounded = false;
  for (const e of record.evidence) {
    const open: boolean = last.finishedAt === null && boundsOpen(e, last) && (e.kind === 'takeover' || !bounded);
    bounded ||= open;
    if ((e.kind === 'late_response' || open) && e.at > from) from = e.at;
  }
  // Stamps come from the clocks of the owners that wrote them: one ahead of ours puts them in our
  // future, yet all of them happened before the record was read.
  return Math.min(from, readAt) + settleMs;
}
