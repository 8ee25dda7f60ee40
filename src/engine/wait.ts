/**
 * Waiting on another owner's operation without a polling storm: reads grow
 * from 25 ms to 1 s, jittered, and never sleep past the owner's lease.
 *
 * @module
 */
import { sleep, untilAborted } from '../backoff/sleep.js';
import { isTerminal } from '../operation/record.js';
import type { OperationRecord } from '../operation/record.js';
import type { OnceStore } from '../stores/contract.js';

/** True while someone holds a live lease on a record that is not finished. */
export function isOwned(record: OperationRecord | undefined, now: number): record is OperationRecord & { lease: NonNullable<OperationRecord['lease']> } {
  return record !== undefined && !isTerminal(record.state) && record.lease !== null && record.lease.expiresAt > now;
}

/**
 * Reads the record until it is gone, finished or without a live lease, or
 * until `maxWaitMs` has passed; returns the last record read (check it with
 * {@link isOwned}). Aborts with `signal.reason`, also during a read.
 */
export async function waitWhileOwned(
  store: OnceStore,
  id: string,
  opts: { now: () => number; random: () => number; maxWaitMs: number; signal?: AbortSignal | undefined; onRead?: (record: OperationRecord | undefined) => void },
): Promise<OperationRecord | undefined> {
  const until = opts.now() + opts.maxWaitMs;
  let intervalMs = 25;
  for (;;) {
    const read = store.get(id);
    const record = await (opts.signal === undefined ? read : untilAborted(read, opts.signal));
    opts.onRead?.(record);
    const now = opts.now();
    if (!isOwned(record, now) || now >= until) return record;
    const untilExpiry = record.lease.expiresAt - now + 1;
    await sleep(Math.max(1, Math.min(intervalMs * (0.5 + opts.random() / 2), untilExpiry, until - now)), opts.signal);
    intervalMs = Math.min(intervalMs * 2, 1000);
  }
}
