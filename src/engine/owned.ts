/**
 * An operation record held under this owner's lease. Every write is
 * `applyEvent` + compare-and-set, serialised so that lease renewals and the
 * main flow never race each other.
 *
 * @module
 */
import { StoreError } from '../errors.js';
import { applyEvent, isTerminal } from '../operation/record.js';
import type { OperationRecord, RecordEvent } from '../operation/record.js';
import type { CompareAndSetResult, OnceStore } from '../stores/contract.js';

/** Thrown when another owner (or a cancel) has taken the record away from us. */
export class LeaseLostError extends Error {
  constructor(readonly current: OperationRecord) {
    super(`lease on ${current.id} lost (now ${current.state}, owner ${current.lease?.owner ?? 'none'})`);
    this.name = 'LeaseLostError';
  }
}

const MAX_REAPPLY = 8;

/** A record this process currently owns. */
export class OwnedRecord {
  private chain: Promise<unknown> = Promise.resolve();
  /** true while the record's open attempt was started by the claim and not yet handed to the transport */
  unsentAttempt = false;

  constructor(
    public rec: OperationRecord,
    private readonly store: OnceStore,
    readonly owner: string,
    private readonly now: () => number,
  ) {}

  /**
   * Applies `event` and writes it. When the stored record moved on while we
   * still hold the lease (a cancel request, say), the event is applied again
   * to the newer record. When the lease is gone, the event is kept as
   * evidence on the current record and {@link LeaseLostError} is thrown.
   */
  commit(event: RecordEvent): Promise<OperationRecord> {
    const run = this.chain.then(() => this.write(event));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async write(event: RecordEvent): Promise<OperationRecord> {
    for (let i = 0; i < MAX_REAPPLY; i++) {
      const base = this.rec;
      const next = applyEvent(base, event, this.now(), this.owner);
      const res = await this.store.compareAndSet(base.id, base.generation, next);
      if (res.ok) {
        this.rec = next;
        return next;
      }
      const current = res.current;
      if (current === undefined) throw new StoreError(`${this.store.name}: record ${base.id} vanished while owned`);
      if (current.lease?.owner !== this.owner || isTerminal(current.state)) {
        // A superseded owner's late outcome is kept as evidence, never applied.
        const late = event.type === 'attempt_finished';
        const detail = late ? `late ${event.class} outcome (${event.reason}) from a superseded owner` : `superseded write (${event.type})`;
        await keepAsEvidence(this.store, current, this.owner, detail, this.now, late ? 'late_response' : 'stale_write', late ? event.status : null);
        throw new LeaseLostError(current);
      }
      this.rec = current;
    }
    throw new StoreError(`${this.store.name}: record ${this.rec.id} keeps changing under its owner`);
  }
}

/**
 * Best effort: records a superseded owner's write (`stale_write`) or late
 * attempt outcome (`late_response`, with its status) as evidence on the
 * current record, never changing its state or result.
 */
export async function keepAsEvidence(
  store: OnceStore,
  current: OperationRecord,
  owner: string,
  detail: string,
  now: () => number,
  kind: 'stale_write' | 'late_response' = 'stale_write',
  status: number | null = null,
): Promise<void> {
  let rec: OperationRecord | undefined = current;
  for (let i = 0; i < 3 && rec !== undefined; i++) {
    const next = applyEvent(rec, { type: 'evidence', kind, detail, status }, now(), owner);
    const res: CompareAndSetResult = await store.compareAndSet(rec.id, rec.generation, next).catch(() => ({ ok: true as const }));
    if (res.ok) return;
    rec = res.current;
  }
}
