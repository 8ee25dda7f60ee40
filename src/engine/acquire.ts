/**
 * Step 2 of a call (DESIGN §3): claim the record atomically, or find the
 * existing one and replay it, wait for its live owner, or take it over.
 *
 * @module
 */
import { sleep, untilAborted } from '../backoff/sleep.js';
import { OperationInFlightError, StoreError } from '../errors.js';
import { applyEvent, deliveryUnresolved, isTerminal, newRecord, recordId } from '../operation/record.js';
import type { OperationRecord } from '../operation/record.js';
import type { CallDeadline } from './deadline.js';
import type { Engine, OperationSpec } from './execute.js';
import { OwnedRecord } from './owned.js';
import { isOwned, waitWhileOwned } from './wait.js';

/** What {@link acquire} found. */
export type Acquired = { kind: 'replay'; record: OperationRecord } | { kind: 'owned'; owned: OwnedRecord };

/** Claims or resumes the operation of `spec` for this owner. */
export async function acquire(engine: Engine, spec: OperationSpec, deadline: CallDeadline, waitFrom?: number): Promise<Acquired> {
  const { store, owner, now, leaseMs, retentionMs } = engine.opts;
  const id = recordId(spec.scope);
  // `inFlightWaitMs` bounds the whole wait: with Web Locks it began before the lock was asked for.
  const waitStartedAt = waitFrom ?? now();
  for (;;) {
    if (engine.abandoning.has(id)) {
      // (the client's close, its `waitMs` run out, ends this wait too, with the close's StoreError, as it does `waitForOwner`'s)
      const wake = engine.orClosed(deadline.signal);
      await awaitAbandon(engine, id, wake.signal).finally(wake.done);
    }
    // (the client's close, its `waitMs` run out, stopped the call: no claim or takeover is begun after it)
    engine.closed.throwIfAborted();
    const claimedAt = now();
    const fresh = newRecord({
      scope: spec.scope,
      key: spec.callerKey ?? spec.mintedRef ?? globalThis.crypto.randomUUID(),
      keySource: spec.callerKey === undefined ? 'minted' : 'caller',
      fingerprint: spec.fingerprint,
      request: spec.request,
      owner,
      now: claimedAt,
      leaseMs,
      retentionMs,
    });
    // A new operation is claimed with attempt 1 already started (in_flight): one durable write
    // gates the first send instead of two (claim, then pending -> in_flight). Not when a cancel is
    // already signalled: that one must end `cancelled` without an attempt.
    const startFirst = spec.cancelSignal?.aborted !== true;
    const attemptId = startFirst ? globalThis.crypto.randomUUID() : undefined;
    const candidate = attemptId !== undefined ? applyEvent(fresh, { type: 'attempt_started', attemptId }, claimedAt, owner) : fresh;
    const ours = (rec: OperationRecord): OwnedRecord => {
      const owned = new OwnedRecord(rec, store, owner, now);
      owned.unsentAttempt = startFirst;
      return owned;
    };
    // The durable write that gates every send: if it fails, nothing is sent. (From here until the send,
    // a client's close that stops the call has it close the attempt as never sent: see `Engine.unsent`.)
    if (attemptId !== undefined) engine.unsent.add(deadline);
    let failed: unknown;
    const { created, record } = await bounded(engine, id, deadline.signal, () => store.claim(candidate), (late) => (late?.created === true ? ours(late.record) : undefined), attemptId).catch(
      async (error: unknown) => {
        engine.handedOff(deadline);
        // A store blip (not an abort): a record already terminal, or of another payload or key, answers the call
        // as the claim would have, nothing sent: one plain read tells (for at most a second), after `bounded`'s
        // read-back. A claim applied all the same reads as ours, live: its error stands, as when there is no
        // record or the read fails too (a custom store's `get` that throws at once included: the read is made in `then`).
        // (`nap`, not AbortSignal.timeout: Safari < 16, Chrome < 103; its timer goes with the read, and the client's close ends it)
        const cap = new AbortController();
        const found =
          error instanceof StoreError && !deadline.signal.aborted && !engine.closed.aborted
            ? await untilAborted(Promise.race([Promise.resolve().then(() => store.get(id)), engine.nap(LET_GO_WAIT_MS, cap.signal).then(() => undefined)]), deadline.signal)
                .catch(() => undefined)
                .finally(() => cap.abort())
            : undefined;
        // The caller's abort (or the deadline) meanwhile, during that read or `bounded`'s read-back: the call ends as any
        // abort before a send does, with its reason (nothing was sent); a call that joined it then runs the operation itself.
        if (found === undefined) throw deadline.signal.aborted ? deadline.signal.reason : error;
        failed = error;
        return { created: false, record: found };
      },
    );
    if (created) {
      engine.stats.operationsCreated++;
      engine.emit({ type: 'operation_created', scope: spec.scope, at: now() });
      return { kind: 'owned', owned: ours(record) };
    }
    engine.handedOff(deadline);
    if (record.fingerprint !== spec.fingerprint) {
      throw engine.conflict(spec.scope, `the same scope was used before with ${differentPart(record.request, spec.request)}`, earlierEffect(record, now()));
    }
    if (spec.callerKey !== undefined && record.key !== spec.callerKey) {
      throw engine.conflict(spec.scope, 'the same scope was used before with a different Idempotency-Key', earlierEffect(record, now()));
    }
    if (isTerminal(record.state)) return { kind: 'replay', record };
    if (failed !== undefined) throw failed;
    const lease = record.lease;
    if (lease !== null && lease.owner !== owner && lease.expiresAt > now()) {
      engine.emit({ type: 'waiting', scope: spec.scope, at: now(), owner: lease.owner });
      await waitForOwner(engine, id, deadline, waitStartedAt);
      continue;
    }
    const next = applyEvent(record, { type: 'acquire', owner, leaseExpiresAt: now() + leaseMs }, now(), owner);
    const took = (): OwnedRecord => new OwnedRecord(next, store, owner, now);
    const res = await bounded(engine, id, deadline.signal, () => store.compareAndSet(id, record.generation, next), (late) => (late?.ok === true ? took() : undefined)).catch(
      async (error: unknown) => {
        // Applied all the same, its ack lost: the lease it took is released (see `letGo`).
        if (error instanceof StoreError && !deadline.signal.aborted) await engine.letGo(took(), error, deadline.signal);
        throw error;
      },
    );
    if (!res.ok) continue;
    if (lease !== null && lease.owner !== owner) {
      engine.stats.takeovers++;
      engine.emit({ type: 'takeover', scope: spec.scope, at: now(), previousOwner: lease.owner, previousState: record.state });
    } else {
      engine.emit({ type: 'operation_resumed', scope: spec.scope, at: now(), state: record.state });
    }
    return { kind: 'owned', owned: took() };
  }
}

/**
 * Files `undo` (an abandon, a release) as record `id`'s in `engine.abandoning` until `until`, the end
 * of the lease the undone write took (a function when that lease may be renewed meanwhile: a cut-off
 * write that settle tries again, see `Engine.behind`); later calls of this client wait for it
 * (`awaitAbandon`). The entry goes once `undo` settles; its failure is dropped (best effort).
 *
 * Or once its `until` has passed, when the next entry is filed: a store that hangs for good settles
 * none of them, and each holds its promise chain, the record and the response snapshot; past its
 * lease's end no call waits for it (`awaitAbandon` drops it then too), so the map holds at most the
 * ids filed within one lease. A sweep here, not a timer: only a write given up on files an entry.
 */
export function trackAbandon(engine: Engine, id: string, undo: Promise<unknown>, until: number | (() => number)): void {
  const now = engine.opts.now();
  for (const [other, filed] of engine.abandoning) if (untilOf(filed) <= now) engine.abandoning.delete(other);
  const entry = { done: undo.catch(() => undefined), until };
  engine.abandoning.set(id, entry);
  void entry.done.finally(() => {
    if (engine.abandoning.get(id) === entry) engine.abandoning.delete(id);
  });
}

/** The end of the lease an `abandoning` entry is waited for until, as it stands now. */
export function untilOf(entry: { until: number | (() => number) }): number {
  return typeof entry.until === 'number' ? entry.until : entry.until();
}

/** How long a call that ends with a StoreError waits for the undo or release it set going (see `bounded`, `Engine.letGo`). */
export const LET_GO_WAIT_MS = 1_000;

/**
 * A write of an earlier call of record `id` in this client that gave up may still land (see
 * {@link bounded}): until it is abandoned, its attempt would read as ours, opened, perhaps sent.
 * Waits for that abandon, under `signal`, until the lease that write took would have expired (a
 * store that never answers must not hold the id for good: compare-and-set keeps going on safe; the
 * attempt then reads as possibly sent, reconciled first), or `capMs`. Whether there was one to wait for.
 */
export async function awaitAbandon(engine: Engine, id: string, signal: AbortSignal, capMs = Infinity): Promise<boolean> {
  const abandoning = engine.abandoning.get(id);
  if (abandoning === undefined) return false;
  const { now } = engine.opts;
  const cap = new AbortController();
  const done = abandoning.done.then(() => 'done' as const);
  let over = false;
  try {
    for (let until = untilOf(abandoning), capLeft = capMs; ; ) {
      const leaseLeft = until - now();
      const from = now();
      const why = await untilAborted(Promise.race([done, sleep(Math.min(capLeft, leaseLeft), cap.signal).then(() => (leaseLeft <= capLeft ? 'lease' : 'cap'))]), signal);
      if (why !== 'lease') {
        over = why === 'done';
        break;
      }
      // (the lease's end, unless renewed meanwhile by the write's own tries: then until its new end)
      const later = untilOf(abandoning);
      if (later <= until) {
        over = true;
        break;
      }
      capLeft -= now() - from;
      until = later;
    }
  } finally {
    cap.abort();
  }
  // (given up at `capMs`, before the lease's end: left for later calls to wait for)
  if (over && engine.abandoning.get(id) === abandoning) engine.abandoning.delete(id);
  return true;
}

/**
 * A store write before a send (a claim, a takeover, the engine's `early` writes), under the call's
 * deadline and the caller's signal, and the client's close (`whenClosed`: its `waitMs` ran out). Nothing
 * is on the wire and every earlier attempt's outcome is recorded, so giving up is safe: an abort rejects
 * with its reason, the close with its StoreError, as before any send (a blocked IndexedDB holds a write
 * until the store gives up, a hung connection until the store's close drops it, a custom store's for good). A write that lands after that is abandoned in
 * turn (best effort): its attempt closed as never sent, the lease released. Until then the abandon
 * is in `engine.abandoning`, which later calls of the record in this process wait for.
 *
 * `opens`: the id of the attempt the write opens. A write that failed may have been applied all the
 * same, its acknowledgement lost (a connection dropped after COMMIT): that attempt would then read
 * as ours and possibly sent, for good without a lookup or provider dedupe. So a failed one is read
 * back and, found open under this owner, abandoned as a late one is, before the error is thrown
 * (waited for as {@link awaitAbandon} waits).
 */
export function bounded<T>(
  engine: Engine,
  id: string,
  signal: AbortSignal,
  write: () => Promise<T>,
  landed: (value: T | undefined) => OwnedRecord | undefined,
  opens?: string,
): Promise<T> {
  signal.throwIfAborted();
  const pending = write();
  // (the client's close, its `waitMs` run out, stops it too, with the close's reason, as the deadline does)
  let unhook = (): void => undefined;
  const stopped = new Promise<never>((_, reject) => (unhook = engine.whenClosed(reject)));
  return Promise.race([untilAborted(pending, signal), stopped]).finally(unhook).catch(async (error: unknown) => {
    const gaveUp = signal.aborted || engine.closed.aborted;
    if (gaveUp || opens !== undefined) {
      const abandon = (owned: OwnedRecord | undefined): Promise<unknown> | undefined => owned && engine.abandon(owned, error);
      // (`landed` gets undefined when the write failed: an owned record is still released after an abort)
      const until = engine.opts.now() + engine.opts.leaseMs;
      const failed = async (): Promise<unknown> => {
        const found = opens === undefined ? undefined : await readBack(engine, id, opens, until);
        return abandon(found ?? (gaveUp ? landed(undefined) : undefined));
      };
      trackAbandon(engine, id, pending.then((value) => abandon(landed(value)), failed), until);
      // (no longer than LET_GO_WAIT_MS: a store that hangs or keeps failing must not hold the error; the
      // read-back goes on until the lease's end, and later calls of this client wait for it)
      if (!gaveUp) await awaitAbandon(engine, id, signal, LET_GO_WAIT_MS).catch(() => undefined);
    }
    throw error;
  });
}

/**
 * {@link openedUnsent}, tried again while the read fails (a store whose connection dropped may fail
 * the read too), until `until`, when the lease that write took ends and the point is moot, or until
 * the client is closed (`engine.closed`: its timers must not hold the process open). A close that
 * cuts a wait short gets one last read at once: `client.close()` keeps the store open for it when
 * its `waitMs` cut this undo's 1 s short (`undone`); after that 1 s the store may be closing, and the
 * read's failure leaves the attempt open, as before.
 */
async function readBack(engine: Engine, id: string, attemptId: string, until: number): Promise<OwnedRecord | undefined> {
  for (let waitMs = 25; ; waitMs = Math.min(waitMs * 2, 1_000)) {
    try {
      return await openedUnsent(engine, id, attemptId);
    } catch {
      if (engine.closed.aborted || engine.opts.now() + waitMs >= until) return undefined;
      await engine.nap(waitMs).catch(() => undefined);
    }
  }
}

/** The record as a failed write that opened attempt `attemptId` may have left it: held by this owner with that attempt open, or undefined. */
async function openedUnsent(engine: Engine, id: string, attemptId: string): Promise<OwnedRecord | undefined> {
  const { store, owner, now } = engine.opts;
  const record = await store.get(id);
  const last = record?.attempts.at(-1);
  if (record === undefined || last?.id !== attemptId || last.finishedAt !== null || record.lease?.owner !== owner) return undefined;
  const owned = new OwnedRecord(record, store, owner, now);
  owned.unsentAttempt = true;
  return owned;
}

/**
 * Waits until the record is terminal or its lease is gone (see `waitWhileOwned`),
 * within `inFlightWaitMs` and the call's deadline, and until the client's close (its `waitMs` run out).
 */
async function waitForOwner(engine: Engine, id: string, deadline: CallDeadline, startedAt: number): Promise<void> {
  const { store, now, inFlightWaitMs, random } = engine.opts;
  const budgetMs = inFlightWaitMs - (now() - startedAt);
  const deadlineLeftMs = deadline.remaining(now());
  const maxWaitMs = Math.min(budgetMs, deadlineLeftMs);
  // (the client's close, its `waitMs` run out, ends the wait too, with the close's StoreError)
  const wake = engine.orClosed(deadline.signal);
  let last: OperationRecord | undefined;
  const record = await waitWhileOwned(store, id, { now, random, maxWaitMs, signal: wake.signal, onRead: (r) => (last = r) })
    .catch((error: unknown) => {
      // The deadline's own timer ends the wait's last sleep at the same moment (and usually first): when it is
      // the deadline that cut a wait on a lease still live at the last read, say so, as when the wait ran out.
      if (error === undefined || error !== deadline.passed || !isOwned(last, now())) throw error;
      return last;
    })
    .finally(wake.done);
  if (!isOwned(record, now())) return;
  // (what cut the wait short: a call's deadline (counted on the `now` clock, which a step forward moves) or inFlightWaitMs)
  const bound = deadlineLeftMs < budgetMs ? "the call's deadline" : `inFlightWaitMs ${inFlightWaitMs} ms`;
  throw new OperationInFlightError(
    `operation ${record.tenant}/${record.action}/${record.ref} is in flight under owner ${record.lease.owner} ` +
      `(lease until ${new Date(record.lease.expiresAt).toISOString()}); gave up waiting after ${Math.max(0, now() - startedAt)} ms (${bound}). Call again later.`,
    { scope: { tenant: record.tenant, action: record.action, ref: record.ref } },
  );
}

/**
 * What a record's payload did, for a conflict's message: took effect, may have, may (a call with it still holds a
 * live lease: another process's, waiting out a 429, say), or nothing said (no effect known). A `pending` record
 * counts too: one a provider's dedupe cleared for a resend still has an attempt that may have taken effect.
 */
function earlierEffect(record: OperationRecord, now: number): 'took' | 'may-have' | 'may-take' | undefined {
  if (record.state === 'succeeded') return 'took';
  if (isTerminal(record.state)) return undefined;
  if (record.state === 'ambiguous' || record.state === 'in_flight' || deliveryUnresolved(record)) return 'may-have';
  return record.lease !== null && record.lease.expiresAt > now ? 'may-take' : undefined;
}

/**
 * What differs between two requests of one scope whose fingerprints differ (method, normalised URL,
 * body), as far as the record tells: it keeps the method and the URL's origin and path, a query string
 * only as `?…`, the body and its Content-Type (the media type counts for bytes) only in the fingerprint
 * (no schema change for this). "a different method", "a different URL" (origin or path), both; else
 * "the body or Content-Type", or "the body, Content-Type or query string" when either URL has one.
 * "a different payload" for `client.run()` (no request).
 */
export function differentPart(earlier: RequestLine | null, now: RequestLine | null): string {
  const path = (r: RequestLine): string => r.url.replace(/\?…$/, '');
  const part =
    earlier === null || now === null
      ? 'payload'
      : [earlier.method.toUpperCase() !== now.method.toUpperCase() && 'method', path(earlier) !== path(now) && 'URL'].filter(Boolean).join(' and ') ||
        `body${(earlier.url + now.url).includes('?') ? ', Content-Type or query string' : ' or Content-Type'}`;
  return `a different ${part}`;
}

type RequestLine = { method: string; url: string };
