/**
 * An operation record held under this owner's lease. Every write is
 * `applyEvent` + compare-and-set, serialised so that lease renewals and the
 * main flow never race each other.
 *
 * @module
 */
import { MAX_TIMER_MS } from '../backoff/sleep.js';
import { LateOutcomeNotKeptError, StoreError } from '../errors.js';
import { canonicalJson } from '../operation/canonical-json.js';
import { IllegalTransitionError, applyEvent, isTerminal } from '../operation/record.js';
import type { OperationRecord, RecordEvent } from '../operation/record.js';
import type { CompareAndSetResult, OnceStore } from '../stores/contract.js';

/**
 * Thrown when another owner (or a cancel) has taken the record away from us, or moved it where
 * our event no longer applies (a late response reopened it): the caller starts over from the
 * stored record.
 */
export class LeaseLostError extends Error {
  constructor(
    readonly current: OperationRecord,
    message = `lease on ${current.id} lost (now ${current.state}, owner ${current.lease?.owner ?? 'none'})`,
  ) {
    super(message);
    this.name = 'LeaseLostError';
  }
}

const MAX_REAPPLY = 8;

/** A record this process currently owns. */
export class OwnedRecord {
  private chain: Promise<unknown> = Promise.resolve();
  /** true while the record's open attempt was started by the claim and not yet handed to the transport */
  unsentAttempt = false;
  /**
   * The writes since the last acknowledged one whose compare-and-set threw (a StoreError): applied
   * or not, nobody can tell from the error (the acknowledgement may have been lost after COMMIT). A
   * later read that shows exactly one's `next` says it landed: it is then adopted as ours (see
   * {@link adopt}), never filed as another's.
   */
  private unacked: { event: RecordEvent; next: OperationRecord }[] = [];
  /**
   * Events of failed writes found landed and adopted (see {@link landed}), perhaps by another write
   * (a renewal) before the event itself was tried again: tried again, it is done, never re-applied.
   */
  private adopted = new WeakSet<RecordEvent>();

  constructor(
    public rec: OperationRecord,
    private readonly store: OnceStore,
    readonly owner: string,
    private readonly now: () => number,
  ) {}

  /**
   * Runs `fn` while renewing the lease every third of `leaseMs`, so that a slow send, lookup or wait
   * keeps ownership. A renewal the store fails is tried again at the next tick: only a lost lease
   * ends the renewals, and aborts the signal `lost()` gives `fn` with the LeaseLostError. One renewal at a
   * time: a slow store is not sent a queue of them; none while the record holds no lease of ours
   * (our own terminal write landed: nothing left to renew). `stop` (the client's close) ends the
   * renewals: the timer is cleared at its next tick, and a renewal queued behind a write that hangs
   * is not written once it is aborted (the client's store is closed; its timer must not hold the
   * process open while `fn` waits on that write).
   */
  async renewing<T>(leaseMs: number, fn: (lost: () => AbortSignal) => Promise<T>, stop?: AbortSignal): Promise<T> {
    let busy = false;
    // Made on first ask: an AbortController costs ~10 µs on Node 20, and only a retrying settle asks.
    let lost: AbortController | undefined;
    let lostWith: LeaseLostError | undefined;
    const lostSignal = (): AbortSignal => {
      lost ??= new AbortController();
      if (lostWith !== undefined && !lost.signal.aborted) lost.abort(lostWith);
      return lost.signal;
    };
    const renew = setInterval(() => {
      if (stop?.aborted === true) {
        clearInterval(renew);
        return;
      }
      if (busy || this.rec.lease?.owner !== this.owner) return;
      busy = true;
      this.commit({ type: 'renew', leaseExpiresAt: this.now() + leaseMs }, stop).then(
        () => (busy = false),
        (error: unknown) => {
          busy = false;
          if (error instanceof LeaseLostError) {
            clearInterval(renew);
            lostWith = error;
            lost?.abort(error);
          }
        },
      );
    }, Math.min(MAX_TIMER_MS, Math.max(50, Math.floor(leaseMs / 3))));
    try {
      return await fn(lostSignal);
    } finally {
      clearInterval(renew);
    }
  }

  /**
   * Applies `event` and writes it. When the stored record moved on while we
   * still hold the lease (a cancel request, say), the event is applied again
   * to the newer record. When the lease is gone, the event is kept as
   * evidence on the current record and {@link LeaseLostError} is thrown.
   */
  commit(event: RecordEvent, unless?: AbortSignal): Promise<OperationRecord> {
    // (`unless`: not written when it is aborted by the time the writes queued before it are done)
    const run = this.chain.then(() => (unless?.aborted === true ? Promise.reject(unless.reason) : this.write(event)));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async write(event: RecordEvent): Promise<OperationRecord> {
    if (this.adopted.has(event)) return this.rec;
    let base = this.rec;
    for (let i = 0; i < MAX_REAPPLY; i++) {
      let next: OperationRecord;
      try {
        next = applyEvent(base, event, this.now(), this.owner);
      } catch (error) {
        // Our own record is always consistent; only a record that moved under us (a superseded
        // owner's late response reopened it, say) can refuse the event: follow the stored record.
        if (i === 0 || !(error instanceof IllegalTransitionError)) throw error;
        // An attempt's outcome is evidence all the same (another holder of this owner id took the
        // record over, say): kept as a superseded owner's is, never dropped.
        if (event.type === 'attempt_finished' || event.type === 'never_sent') await this.keep(base, event);
        throw new LeaseLostError(base, `record ${base.id} moved on under its owner (now ${base.state}): ${event.type} no longer applies`);
      }
      let res: CompareAndSetResult;
      try {
        res = await this.store.compareAndSet(base.id, base.generation, next);
        if (!res.ok && res.current === undefined && this.deletedByHand(base)) res = await this.writeBack(next);
      } catch (error) {
        if (base === this.rec) this.unacked = [...this.unacked.slice(1 - MAX_REAPPLY), { event, next }];
        throw error;
      }
      if (res.ok) {
        // (a never_sent that closed our attempt under another lease: the record is its holder's)
        if (base !== this.rec) throw new LeaseLostError(next);
        this.rec = next;
        this.unacked = [];
        return next;
      }
      const current = res.current;
      if (current === undefined) throw new StoreError(`${this.store.name}: record ${base.id} vanished while owned`);
      // Our own earlier write, applied though reported failed: ours, as if its ack had come. This
      // very event tried again finds itself done; another one applies on top of it.
      const landed = base === this.rec ? this.landed(current) : undefined;
      if (landed !== undefined) {
        if (landed === event) return current;
        // A renewal after our own write that ended the lease (an answer recorded): nothing to renew,
        // and nothing lost (not a LeaseLostError, which would stop a settle still trying that write).
        if (event.type === 'renew' && current.lease?.owner !== this.owner) return current;
        base = current;
        continue;
      }
      // Still ours (a cancel request or a note moved it, no send): follow it, as for any event; a
      // never_sent then leaves the record ours, and the abandon's release after it still applies.
      // Ours means the lease we hold, not just our name: a newer holder of this owner id (a later
      // call of this client that took the record over once our lease had ended) wrote a lease of
      // its own, which we must never renew, release or write over.
      if (base === this.rec && this.sameLease(base, current) && !isTerminal(current.state) && sameAttempts(base, current, this.owner)) {
        base = this.rec = current;
        continue;
      }
      // Only we know that we never sent the attempt we opened: that closes it whoever holds the lease
      // (but a record another owner holds is not adopted).
      if (event.type === 'never_sent') {
        base = current;
        continue;
      }
      // (Attempts that changed under a lease with our name: another holder of this owner id sent
      // meanwhile, e.g. two clients configured with one `owner`; our view is stale all the same.)
      await this.keep(current, event);
      throw new LeaseLostError(current);
    }
    throw new StoreError(`${this.store.name}: record ${this.rec.id} keeps changing under its owner`);
  }

  /**
   * A record deleted under us (the site's data cleared, a row deleted by hand) is the only memory
   * that this operation may have been sent: it is written back as `next` leaves it, so that the
   * next call with its scope reconciles rather than sends afresh under a new key. A record claimed
   * meanwhile under its id is another's: the write lost to it, as to any newer record.
   */
  private async writeBack(next: OperationRecord): Promise<CompareAndSetResult> {
    // (only a record deleted by hand: see deletedByHand)
    const back = await this.store.claim(next);
    return back.created ? { ok: true } : { ok: false, current: back.record };
  }

  /**
   * Whether a vanished `base` can only have been deleted by hand: it holds our lease, not run out, and
   * its `expiresAt` is still ahead. Any record that followed it (a cancel, another owner's takeover
   * and answer) expires no earlier (`expiresAt` never decreases), so `purge()`, which removes only
   * terminal records past it, cannot have removed one yet. Otherwise the record may have been
   * cancelled or finished by another owner and purged, as designed: writing ours back would revive
   * it and send for it again (after a confirmed cancellation, or a second time).
   */
  private deletedByHand(base: OperationRecord): boolean {
    const now = this.now();
    return base.lease?.owner === this.owner && base.lease.expiresAt > now && base.expiresAt > now;
  }

  /**
   * Whether `current` holds the lease this owner holds on `base`: the same owner and end, as we
   * wrote it or as one of our failed writes would have left it (applied, its ack lost). Others'
   * moves that keep the record ours (a cancel request, a note, evidence) leave the lease alone;
   * a takeover, even under our owner id, writes a lease of its own.
   */
  private sameLease(base: OperationRecord, current: OperationRecord): boolean {
    const lease = current.lease;
    if (lease?.owner !== this.owner) return false;
    const ours = (rec: OperationRecord): boolean => rec.lease?.owner === this.owner && rec.lease.expiresAt === lease.expiresAt;
    return ours(base) || this.unacked.some((u) => ours(u.next));
  }

  /**
   * Whether `stored`, read back after a store error, is this record as this owner knows it, or as
   * one of its failed writes left it (applied, the acknowledgement lost; then adopted).
   */
  adopt(stored: OperationRecord): boolean {
    return sameRecord(stored, this.rec) || this.landed(stored) !== undefined;
  }

  /** The event of the failed write that made exactly `current`, which then becomes ours; else undefined. */
  private landed(current: OperationRecord): RecordEvent | undefined {
    const found = this.unacked.find((u) => sameRecord(current, u.next));
    if (found === undefined) return undefined;
    this.rec = current;
    this.unacked = [];
    this.adopted.add(found.event);
    return found.event;
  }

  /**
   * A superseded write is kept as evidence on `current`, never applied. A late attempt outcome that
   * shows the request reached the provider (a success, or an ambiguous end) reopens a pending
   * record: an "absent" or a retryable answer that cleared it for a resend came too early.
   */
  private async keep(current: OperationRecord, event: RecordEvent): Promise<void> {
    const late = event.type === 'attempt_finished' || event.type === 'never_sent';
    const cls = event.type === 'attempt_finished' ? event.class : 'not_sent';
    const detail = late ? `late ${cls} outcome (${event.reason}) from a superseded owner` : `superseded write (${event.type})`;
    const reopen = cls === 'success' || cls === 'ambiguous';
    const kept = await keepAsEvidence(this.store, current, this.owner, detail, this.now, late ? 'late_response' : 'stale_write', event.type === 'attempt_finished' ? event.status : null, reopen);
    if (!kept && reopen) throw new LateOutcomeNotKeptError(`${this.store.name}: record ${current.id}: a late ${cls} outcome of owner ${this.owner} could not be kept on the record (now ${current.state})`);
  }
}

/**
 * Whether `current` holds exactly the attempts of `base` (a cancel or a note may have moved it, no
 * send; nor has another owner's close of an attempt it opened and never sent, `never_sent`).
 */
function sameAttempts(base: OperationRecord, current: OperationRecord, owner: string): boolean {
  if (current.attempts.length !== base.attempts.length) return false;
  const a = base.attempts.at(-1);
  const b = current.attempts.at(-1);
  return a?.id === b?.id && (a?.finishedAt === b?.finishedAt || (b?.class === 'not_sent' && b.owner !== owner));
}

/** Whether two records are the same version, field for field (as a store gives it back). */
function sameRecord(a: OperationRecord, b: OperationRecord): boolean {
  if (a.generation !== b.generation || a.updatedAt !== b.updatedAt) return false;
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/**
 * Best effort: records a superseded owner's write (`stale_write`) or late
 * attempt outcome (`late_response`, with its status) as evidence on the
 * current record, never changing its result. With `reopen`, a `pending`
 * record goes back to `ambiguous` (see the `evidence` event). Whether it is
 * known to be kept (false when the store failed or the record kept moving).
 */
export async function keepAsEvidence(
  store: OnceStore,
  current: OperationRecord,
  owner: string,
  detail: string,
  now: () => number,
  kind: 'stale_write' | 'late_response' = 'stale_write',
  status: number | null = null,
  reopen = false,
): Promise<boolean> {
  let rec: OperationRecord | undefined = current;
  for (let i = 0; i < 3 && rec !== undefined; i++) {
    const next = applyEvent(rec, { type: 'evidence', kind, detail, status, reopen }, now(), owner);
    // (a failed write may have been applied, its ack lost: not known to be kept)
    const res: CompareAndSetResult | undefined = await store.compareAndSet(rec.id, rec.generation, next).catch(() => undefined);
    if (res === undefined) return false;
    if (res.ok) return true;
    rec = res.current;
  }
  return false;
}
