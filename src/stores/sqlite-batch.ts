/**
 * Group commit for the SQLite store: writes issued during one turn of the
 * event loop run, in the order they were issued, inside one
 * `BEGIN IMMEDIATE … COMMIT`, and each promise settles only after that commit.
 * Each write keeps its own semantics (an insert-if-absent, a compare-and-set on
 * the generation): grouping changes how many commits (and fsyncs) they cost,
 * not what they do.
 *
 * @internal
 * @module
 */
import type { SqliteDatabase as Database, SqliteStatement as Statement } from './sqlite-handle.js';

interface Pending {
  run: () => unknown;
  /** must be fsynced before it resolves (power-loss mode) */
  gating: boolean;
  action: string;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Options of {@link createGroupCommit}. */
export interface GroupCommitOptions {
  db: Database;
  /** `synchronous=FULL` is the resting state; a batch with no gating write runs under NORMAL */
  powerLoss: boolean;
  /** turns a driver error into the store's error for one write */
  toError: (cause: unknown, action: string) => Error;
}

/** The write queue of one store. */
export interface GroupCommit {
  /** Queues `run` (synchronous statements) for the next group commit; resolves after the commit. */
  write<T>(run: () => T, gating: boolean, action: string): Promise<T>;
  /** Commits whatever is queued, now. */
  flush(): void;
}

/** Creates the write queue of one store connection. */
export function createGroupCommit({ db, powerLoss, toError }: GroupCommitOptions): GroupCommit {
  const begin: Statement = db.prepare('BEGIN IMMEDIATE');
  const commit: Statement = db.prepare('COMMIT');
  const rollback: Statement = db.prepare('ROLLBACK');
  let queue: Pending[] = [];
  let scheduled: ReturnType<typeof setImmediate> | undefined;

  const setSynchronous = (level: 'NORMAL' | 'FULL'): void => {
    // db.pragma, not a prepared statement: a prepared PRAGMA re-run does not reliably re-apply.
    db.pragma(`synchronous = ${level}`);
  };

  const flush = (): void => {
    if (scheduled !== undefined) {
      clearImmediate(scheduled);
      scheduled = undefined;
    }
    const batch = queue;
    queue = [];
    if (batch.length === 0) return;
    // Only a write that lets a send start (or records a cancel) needs the fsync before it resolves.
    const relaxed = powerLoss && !batch.some((w) => w.gating);
    const outcomes: Outcome[] = [];
    let failed: unknown;
    let began = false;
    try {
      if (relaxed) setSynchronous('NORMAL');
      begin.run();
      began = true;
      for (const w of batch) {
        try {
          outcomes.push({ ok: true, value: w.run() });
        } catch (error) {
          outcomes.push({ ok: false, error });
          // SQLITE_FULL, IOERR, NOMEM… roll the whole transaction back: nothing of it stands.
          if (!db.inTransaction) {
            failed = error;
            break;
          }
        }
      }
      if (failed === undefined) commit.run();
    } catch (error) {
      failed ??= error;
    } finally {
      if (began && db.inTransaction) {
        try {
          rollback.run();
        } catch {
          // the failure being reported is the one that matters
        }
      }
      if (relaxed) {
        try {
          setSynchronous('FULL');
        } catch (error) {
          failed ??= error;
        }
      }
    }
    batch.forEach((w, i) => {
      const outcome = outcomes[i];
      if (failed !== undefined) {
        // Not committed: every write of the batch fails, the one that broke it with its own cause.
        w.reject(toError(outcome?.ok === false ? outcome.error : failed, w.action));
      } else if (outcome?.ok === true) {
        w.resolve(outcome.value);
      } else {
        w.reject(toError(outcome?.error, w.action));
      }
    });
  };

  return {
    write<T>(run: () => T, gating: boolean, action: string): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, gating, action, resolve: resolve as (value: unknown) => void, reject });
        // After this turn's I/O callbacks: every write they issue joins the same commit.
        scheduled ??= setImmediate(flush);
      });
    },
    flush,
  };
}
