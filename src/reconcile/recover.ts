/**
 * `client.recover()`: after a restart, settle every operation of the
 * client's tenant left `in_flight` or `ambiguous` under an expired lease,
 * without the original caller, using the lookups registered per action. A `pending` record that
 * only a provider's dedupe cleared for a resend (`resendNeedsDedupe`) is settled too when this
 * client does not trust that dedupe, as its own call would (`reconcile_first`, then a lookup); it
 * never sends. Those lookups answer for
 * `client.fetch` operations (a `Response`); a `client.run()` operation takes
 * its lookup per call, so recovery leaves it `ambiguous` for its next call.
 *
 * @module
 */
import { awaitAbandon } from '../engine/acquire.js';
import { CallDeadline } from '../engine/deadline.js';
import { LeaseLostError, OwnedRecord } from '../engine/owned.js';
import type { Engine } from '../engine/execute.js';
import { responseLookup } from '../engine/fetch-operation.js';
import { StoreError } from '../errors.js';
import { applyEvent, refMinted, resendNeedsDedupe, scopeOfId } from '../operation/record.js';
import type { OperationRecord, Scope } from '../operation/record.js';
import type { CorruptRow, OnceStore } from '../stores/contract.js';
import { reconcile, settledAt } from './lookup.js';
import type { ReconcileOutcome } from './lookup.js';
import { NO_NUL, checkKeys } from '../options.js';

/**
 * What `client.recover()` did, per operation scope. `absent` operations wait
 * for their caller to call again with the same ref; `stillAmbiguous` ones need
 * a person or a lookup.
 *
 * @example
 * ```ts
 * const report = await client.recover()
 * for (const scope of report.stillAmbiguous) await openTicket(await client.explain(scope))
 * ```
 */
export interface RecoveryReport {
  /** settled as succeeded by a lookup */
  resolved: Scope[];
  /**
   * the lookup (or the record: its last attempt was closed as never sent) says it never happened: back to `pending`, to be re-sent by
   * its caller with the same ref and key (a record with a cancel requested ends `cancelled`; one whose resend the provider refused as
   * key reuse ends `failed`, the conflict standing)
   */
  absent: Scope[];
  /**
   * no lookup (always so for a `client.run()` operation), or the lookup could not tell: still
   * `ambiguous` (also a `pending` record only a provider's dedupe cleared, met by a client that does
   * not trust it: made `ambiguous`, as that client's own call would)
   */
  stillAmbiguous: Scope[];
  /** re-sent by recover itself; always empty, since request bodies are not stored */
  resent: Scope[];
  /**
   * records that could not be examined, with the reason: `id` is the record's id; `scope` is
   * undefined only for a row whose id names no scope (one not written by oncefetch). A row that
   * is not a valid record is reported here (a `StoreError`'s message) and left as it is, never resent.
   */
  errors: { id: string; scope: Scope | undefined; message: string }[];
}

/**
 * Options of `client.recover()`. Bound a recovery run at startup with
 * `limit` and a timeout, so a large backlog cannot hold up the process.
 *
 * @example
 * ```ts
 * await client.recover({ limit: 500, signal: AbortSignal.timeout(30_000) })
 * ```
 */
export interface RecoverOptions {
  /** at most this many records per call (rows that are not valid records, reported in `errors`, are not counted) @default 100 */
  limit?: number;
  /**
   * abort the recovery. Without it, each lookup is still bounded by `retry.deadlineMs`, as a call's
   * is: one that has not answered by then (its body still trickling, say) is given up as unknown,
   * and its record stays `ambiguous` (`stillAmbiguous`) @default undefined
   */
  signal?: AbortSignal;
  /**
   * whose records to settle; the lookups used are this client's, so name only a tenant whose
   * provider they answer for @default the client's tenant
   */
  tenant?: string;
}

/** The lease owner `client.recover()` works under: the client's owner with `/recover`. */
export function recoveryOwner(owner: string): string {
  return `${owner}/recover`;
}

function scopeOf(r: OperationRecord): Scope {
  return { tenant: r.tenant, action: r.action, ref: r.ref };
}

/**
 * Whether recover() settles `rec` (lease aside): `in_flight` or `ambiguous`, or `pending` where only a
 * provider's dedupe cleared it for a send and this client does not trust that dedupe (its own call
 * would reconcile first, `reconcile_first`). A client that trusts it leaves such a record to its
 * caller: the same-key resend it is cleared for needs the request body, which recover() lacks.
 */
function settles(engine: Engine, rec: OperationRecord): boolean {
  if (rec.state === 'in_flight' || rec.state === 'ambiguous') return true;
  return rec.state === 'pending' && resendNeedsDedupe(rec) && !engine.trustsDedupe(rec);
}

/**
 * A write that a call of this client gave up on before its send may still land, and is then undone
 * (`engine.abandoning`: its attempt closed as never sent, its lease released). Taken over first, that
 * attempt would read as possibly sent and leave the record ambiguous: wait for the undo as a call
 * does (at most until the lease it wrote would have expired), then read the record again.
 * Undefined when it is no longer stale.
 */
async function afterAbandon(engine: Engine, found: OperationRecord, signal: AbortSignal): Promise<OperationRecord | undefined> {
  if (!(await awaitAbandon(engine, found.id, signal))) return found;
  const { store, now } = engine.opts;
  const again = await store.get(found.id);
  const stale = again !== undefined && settles(engine, again) && (again.lease === null || again.lease.expiresAt < now());
  return stale ? again : undefined;
}

/**
 * Whether the record went back to `pending` under recover's own lease while it looked up: the owner
 * of the attempt that made it ambiguous closed that attempt as never sent (`never_sent`, which it
 * writes under any lease). Nothing was delivered, so the answer no longer applies.
 */
function backToPending(rec: OperationRecord, owner: string): boolean {
  return rec.state === 'pending' && rec.lease?.owner === owner;
}

/**
 * How far past records `keep` leaves out the list is read, in multiples of `limit`: a bound on one
 * recover() call's reads (a large backlog of `pending` records it does not settle, say).
 */
const MAX_SKIPPED_PER_LIMIT = 128;

/**
 * Up to `limit` records of `tenant` in `states` under no live lease, those `keep` selects. A row that
 * is not a valid record is reported in `report.errors`, not settled: the others still are. Such a
 * row keeps its place in the list's order and counts toward its limit, and is never updated, so it
 * stays first: the list is asked again past the corrupt rows, however many (each round asks for at
 * least twice as many rows, so they cost a few rounds), else enough of them would hold every other
 * record back for good. So for records `keep` leaves out (`pending` ones recover() does not settle,
 * which it does not update either), but only up to `MAX_SKIPPED_PER_LIMIT` times `limit` of them.
 */
async function listStale(
  store: OnceStore,
  q: { tenant: string; before: number; limit: number; states: OperationRecord['state'][] },
  keep: (rec: OperationRecord) => boolean,
  report: RecoveryReport,
): Promise<OperationRecord[]> {
  const { tenant, before, limit, states } = q;
  const corrupt = new Map<string, CorruptRow>();
  let asked = limit;
  let stale: OperationRecord[] = [];
  for (;;) {
    let bad = 0;
    const onCorrupt = (row: CorruptRow): void => {
      bad++;
      corrupt.set(row.id, row);
    };
    const listed = await store.list({ states, leaseExpiredBefore: before, tenant, limit: asked, onCorrupt });
    stale = listed.filter(keep);
    const left = listed.length - stale.length;
    // enough records, the end of the list (fewer rows than asked), nothing in the way, or enough
    // records left out read (corrupt rows never count: they would block recover() for good)
    if (stale.length >= limit || listed.length + bad < asked || bad + left === 0 || left >= limit * MAX_SKIPPED_PER_LIMIT) break;
    asked = Math.max(limit + bad + left, asked * 2);
  }
  for (const { id, error } of corrupt.values()) report.errors.push({ id, scope: scopeOfId(id), message: error.message });
  return stale.slice(0, limit);
}

/**
 * The records recover() settles, oldest `updatedAt` first, at most `limit`: the stale `in_flight`
 * and `ambiguous` ones, and the `pending` ones only a dedupe this client does not trust cleared.
 */
async function listToSettle(engine: Engine, tenant: string, before: number, limit: number, report: RecoveryReport): Promise<OperationRecord[]> {
  const { store } = engine.opts;
  const q = { tenant, before, limit };
  const stale = await listStale(store, { ...q, states: ['in_flight', 'ambiguous'] }, () => true, report);
  // (no such record when this client trusts the provider to dedupe every key it still remembers)
  const cleared = await listStale(store, { ...q, states: ['pending'] }, (r) => settles(engine, r), report);
  if (cleared.length === 0) return stale;
  const order = (a: OperationRecord, b: OperationRecord): number => a.updatedAt - b.updatedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  return [...stale, ...cleared].sort(order).slice(0, limit);
}

/**
 * After the takeover's compare-and-set failed with a StoreError: it may have been applied all the
 * same, its acknowledgement lost. Read back (once, as the engine's `letGo` does): found exactly as
 * that write left it (`OwnedRecord.adopt`), the lease it took is released, best effort, so that the
 * record's next call need not wait for it to expire.
 */
async function releaseTaken(engine: Engine, taken: OperationRecord, owner: string): Promise<void> {
  const { store, now } = engine.opts;
  const owned = new OwnedRecord(taken, store, owner, now);
  const stored = await store.get(taken.id);
  if (stored !== undefined && owned.adopt(stored)) await owned.commit({ type: 'release' });
}

/** Reconciles stale `in_flight`/`ambiguous` records, and `pending` ones only a dedupe this client does not trust cleared. */
export async function recover(engine: Engine, options: RecoverOptions = {}): Promise<RecoveryReport> {
  checkKeys('client.recover', 'options', options, ['limit', 'signal', 'tenant']);
  const { store, now, leaseMs, lookups } = engine.opts;
  // Its own lease holder: a call of this client that meets a record recover() holds waits for it,
  // as it would for another process, instead of sharing the lease and racing its writes.
  const owner = recoveryOwner(engine.opts.owner);
  const report: RecoveryReport = { resolved: [], absent: [], stillAmbiguous: [], resent: [], errors: [] };
  // Only this client's tenant: its lookups answer for its own account, and another tenant's
  // provider may hold an order this one's lookup calls absent.
  const tenant = options.tenant ?? engine.opts.tenant;
  if (typeof tenant !== 'string' || tenant === '') throw new TypeError('client.recover: option "tenant" must be a non-empty string');
  if (tenant.includes('\0')) throw new TypeError(`client.recover: option "tenant" ${NO_NUL}`);
  // (named here, not left to the store's list(): a custom store may check nothing)
  const limit: unknown = options.limit ?? 100;
  if (typeof limit !== 'number') throw new TypeError('client.recover: option "limit" must be a non-negative integer');
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`client.recover: option "limit" must be a non-negative integer, got ${limit}`);
  const given: unknown = options.signal;
  if (given !== undefined && !(typeof given === 'object' && given !== null && typeof (given as AbortSignal).aborted === 'boolean' && typeof (given as AbortSignal).throwIfAborted === 'function')) {
    throw new TypeError('client.recover: option "signal" must be an AbortSignal');
  }
  const stale = await listToSettle(engine, tenant, now(), limit, report);
  const signal = options.signal ?? new AbortController().signal;
  for (const listed of stale) {
    signal.throwIfAborted();
    // A store's tenant column may not tell tenants apart that differ only in text UTF-8 cannot
    // carry (a lone surrogate): the record decides.
    if (listed.tenant !== tenant) continue;
    const scope = scopeOf(listed);
    let owned: OwnedRecord | undefined;
    try {
      const found = await afterAbandon(engine, listed, signal);
      if (found === undefined) continue; // no longer stale
      // Take the lease (in_flight becomes ambiguous: the old owner may have sent), and with it turn a
      // pending record only a dedupe cleared ambiguous (as this client's own call would): one write.
      const acquired = applyEvent(found, { type: 'acquire', owner, leaseExpiresAt: now() + leaseMs }, now(), owner);
      const taken =
        acquired.state !== 'pending'
          ? acquired
          : applyEvent(acquired, { type: 'reconcile_first', detail: "recover: an earlier attempt may have been delivered and only a provider's dedupe cleared it for a resend, which this client does not trust: reconcile first" }, now(), owner);
      const cas = await store.compareAndSet(found.id, found.generation, taken).catch(async (error: unknown) => {
        // applied all the same, its ack lost: the lease it took is released (see releaseTaken)
        if (error instanceof StoreError) await releaseTaken(engine, taken, owner).catch(() => undefined);
        throw error;
      });
      if (!cas.ok) continue; // someone else is on it
      owned = new OwnedRecord(taken, store, owner, now);
      if (found.lease !== null && found.lease.owner !== owner) {
        engine.stats.takeovers++;
        engine.emit({ type: 'takeover', scope, at: now(), previousOwner: found.lease.owner, previousState: found.state });
      }
      // A registered lookup answers with a Response; a client.run() operation (no request) replays a
      // value, so only its own call's lookup can settle it; and a ref a call minted is one no lookup can find.
      const lookupFn = found.request === null || refMinted(found) || !Object.hasOwn(lookups, found.action) ? undefined : lookups[found.action];
      const settleAt = settledAt(taken, engine.opts.settleMs);
      const askedAt = now();
      // Bounded as a call's lookup is, by retry.deadlineMs (and recover's signal): one that never ends
      // (a body trickling forever) is given up, its body cancelled, and the record stays ambiguous.
      const deadline = new CallDeadline(engine.opts.retry.deadlineMs, askedAt, scope, signal);
      // renewed as a call renews it: a lookup slower than leaseMs must not let the record be taken over
      let outcome = await owned
        .renewing(leaseMs, () => reconcile(lookupFn === undefined ? undefined : responseLookup(lookupFn, engine.opts), { scope, key: taken.key, record: taken, signal: deadline.signal }))
        .catch((error: unknown): ReconcileOutcome => {
          const passed = deadline.passed;
          if (passed === undefined || error !== passed || signal.aborted) throw error;
          return { kind: 'unknown', detail: `lookup given up: ${passed.message}`, error };
        })
        .finally(() => deadline.dispose());
      // "Absent" is trusted only when asked after the last attempt can no longer take effect (or when a
      // same-key resend is deduplicated: not for a key past the provider's retention, whose early
      // "absent" would only clear the record for a resend this client then reconciles first again).
      if (outcome.kind === 'absent' && !engine.trustsDedupe(taken) && askedAt < settleAt) {
        outcome = { kind: 'unknown', detail: `lookup said absent, but the last attempt may still take effect until ${new Date(settleAt).toISOString()}`, error: undefined };
      }
      if (outcome.kind !== 'none') engine.stats.lookups++;
      engine.emit({ type: 'lookup', scope, at: now(), outcome: outcome.kind });
      if (backToPending(owned.rec, owner)) {
        // a renewal picked it up: the answer is about an ambiguity that is gone
        await owned.commit({ type: 'release' });
        report.absent.push(scope);
      } else if (outcome.kind === 'found') {
        await owned.commit({ type: 'lookup_found', result: outcome.snapshot, detail: `recover: ${outcome.detail}` });
        report.resolved.push(scope);
      } else if (outcome.kind === 'absent') {
        const absent = await owned.commit({ type: 'lookup_absent', detail: `recover: ${outcome.detail}`, settled: askedAt >= settleAt, askedGeneration: taken.generation });
        // a key conflict on a resend that this "absent" let stand (failed): a conflict, as a call counts it
        if (absent.state === 'failed' && absent.error?.code === 'IDEMPOTENCY_CONFLICT') engine.conflictStood(absent);
        await owned.commit({ type: 'release' });
        // refused when a superseded owner's late success contradicts it: still ambiguous
        (owned.rec.state === 'ambiguous' ? report.stillAmbiguous : report.absent).push(scope);
      } else {
        if (outcome.kind === 'unknown') await owned.commit({ type: 'lookup_unknown', detail: `recover: ${outcome.detail}` });
        await owned.commit({ type: 'release' });
        report.stillAmbiguous.push(scope);
      }
    } catch (error) {
      // Stopped (an abort, a store error, a record that moved on under its lease) while it still holds
      // the record: release it, best effort, so that its caller's next call need not wait out the lease.
      const held = error instanceof LeaseLostError ? error.current : owned?.rec;
      if (owned !== undefined && held?.lease?.owner === owner) await owned.commit({ type: 'release' }).catch(() => undefined);
      if (signal.aborted) throw signal.reason;
      if (error instanceof LeaseLostError && backToPending(error.current, owner)) {
        report.absent.push(scope);
        continue;
      }
      const message = error instanceof LeaseLostError ? 'taken by another owner meanwhile' : error instanceof Error ? error.message : String(error);
      report.errors.push({ id: listed.id, scope, message });
    }
  }
  return report;
}
