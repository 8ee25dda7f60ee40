/**
 * A store wrapper for lost acknowledgements: a write APPLIED but reported FAILED (PostgreSQL: the
 * connection drops after COMMIT; a wrapper's timeout given up on while the write lands), and
 * failing or hanging reads. Used by test/e2e/lost-ack.test.ts and recover-lost-ack.test.ts.
 */
import { StoreError } from '../../src/index.js';
import type { OnceStore, OperationRecord } from '../../src/index.js';

/** Which write a record change is, told from the record before and after it. */
export function writeOf(prev: OperationRecord | undefined, next: OperationRecord): string {
  if (prev === undefined) return next.attempts.length > 0 ? 'claim+attempt' : 'claim';
  if (next.attempts.length > prev.attempts.length) return 'attempt_started';
  const a = prev.attempts.at(-1);
  const b = next.attempts.at(-1);
  if (a?.finishedAt === null && b?.finishedAt !== null) return b?.reason?.includes('before it was sent') === true ? 'never_sent' : `attempt_finished:${b?.class}`;
  const e = next.evidence.length > prev.evidence.length ? next.evidence.at(-1) : undefined;
  if (e?.kind === 'lookup') return `lookup:${e.detail.split(/[: ]/)[0]}`;
  if (e !== undefined) return e.kind; // stop, cancel, takeover, …
  if (prev.lease !== null && next.lease === null) return 'release';
  return 'lease';
}

/**
 * A store whose next write named `plan.lose` (see {@link writeOf}) is applied, then reported failed
 * (once); optionally after `plan.delayMs`, so a caller can give up on it while it is pending. With
 * `plan.fail`, the next write so named fails without being applied (the ordinary failure); the next
 * `plan.failTimes` writes so named, when set; after `plan.delayMs` too (a store slow to fail).
 * `plan.failReads`: the next so many reads (`get`) fail; `plan.hangReads`: every read hangs.
 * `plan.reads` counts the reads asked for.
 */
export function lossy(inner: OnceStore) {
  const plan: { lose: string; fail: string; failTimes: number; delayMs: number; hangReads: boolean; failReads: number; reads: number; lost: string[]; writes: string[] } = { lose: '', fail: '', failTimes: 1, delayMs: 0, hangReads: false, failReads: 0, reads: 0, lost: [], writes: [] };
  const before = async (label: string, id: string): Promise<void> => {
    if (label !== plan.fail) return;
    if (--plan.failTimes <= 0) plan.fail = '';
    plan.lost.push(`failed ${label}`);
    if (plan.delayMs > 0) await new Promise((r) => setTimeout(r, plan.delayMs));
    throw new StoreError(`lossy: ${label} on ${id} failed (not applied)`);
  };
  const after = async (label: string, applied: boolean, id: string): Promise<void> => {
    plan.writes.push(label);
    if (!applied || label !== plan.lose) return;
    plan.lose = '';
    plan.lost.push(label);
    if (plan.delayMs > 0) await new Promise((r) => setTimeout(r, plan.delayMs));
    throw new StoreError(`lossy: the acknowledgement of ${label} on ${id} was lost (the write was applied)`);
  };
  const store: OnceStore = {
    name: 'lossy',
    claim: async (record) => {
      await before(writeOf(undefined, record), record.id);
      const res = await inner.claim(record);
      await after(writeOf(undefined, record), res.created, record.id);
      return res;
    },
    compareAndSet: async (id, expected, next) => {
      const prev = await inner.get(id);
      await before(writeOf(prev, next), id);
      const res = await inner.compareAndSet(id, expected, next);
      await after(writeOf(prev, next), res.ok, id);
      return res;
    },
    get: async (id) => {
      plan.reads++;
      if (plan.hangReads) return new Promise<never>(() => undefined);
      if (plan.failReads > 0) {
        plan.failReads--;
        throw new StoreError(`lossy: the read of ${id} failed`);
      }
      return inner.get(id);
    },
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  return { store, plan };
}
