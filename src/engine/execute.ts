/**
 * The engine: the one place that awaits the store, sends, sleeps and writes
 * transitions (DESIGN §3). Adapters (`client.fetch`, `client.run`) describe an
 * operation as an {@link OperationSpec}; the engine makes it happen at most once.
 *
 * @module
 */
import { backoffDelay } from '../backoff/backoff.js';
import { MAX_TIMER_MS, sleep, untilAborted } from '../backoff/sleep.js';
import type { Classification } from '../classify/classify.js';
import { classifyError } from '../classify/classify.js';
import {
  AmbiguousOutcomeError,
  DeadlineExceededError,
  IdempotencyConflictError,
  LateOutcomeNotKeptError,
  OperationCancelledError,
  OperationInFlightError,
  OperationFailedError,
  RetriesExhaustedError,
  StoreError,
  isOnceError,
} from '../errors.js';
import type { OnceEvent, OnceStats } from '../events.js';
import { emptyStats } from '../events.js';
import { answerUnsettled, applyEvent, conflictAfterReach, deliveryUnresolved, isTerminal, lateSuccess, reachedBefore, recordId, refMinted, resendNeedsDedupe, unsettledBefore } from '../operation/record.js';
import type { LiveBody } from '../operation/snapshot.js';
import type { OperationRecord, RecordEvent, ResultSnapshot, Scope } from '../operation/record.js';
import type { ResolvedOptions } from '../options.js';
import { reconcile, settledAt } from '../reconcile/lookup.js';
import type { ReconcileOutcome, SnapshotLookup } from '../reconcile/lookup.js';
import { CallDeadline } from './deadline.js';
import { LeaseLostError, OwnedRecord } from './owned.js';
import { LET_GO_WAIT_MS, acquire, awaitAbandon, bounded, differentPart, trackAbandon, untilOf } from './acquire.js';
import type { Acquired } from './acquire.js';
import type { Telemetry } from '../telemetry.js';

/**
 * The waits before each retry of a write that records a definitive answer in hand (see `settle`):
 * three retries, the first at once (an ack lost finds its write landed), half a second in all; none
 * begun past `SETTLE_BUDGET_MS` after the first try (a store slow to fail is not asked again).
 */
const SETTLE_RETRY_MS = [0, 100, 400] as const;
const SETTLE_BUDGET_MS = 1_000;

/** What {@link Engine.within} gives for a write the call's deadline cut off (it goes on in the background). */
const CUT: unique symbol = Symbol('cut off by the deadline');

/** What one attempt gets from the engine. */
export interface AttemptContext {
  scope: Scope;
  key: string;
  /** the attempt's number in the record, counting from 1 */
  attempt: number;
  /** aborts on the attempt timeout, the call deadline or the caller's abort */
  signal: AbortSignal;
  /**
   * Set by the adapter before its send's first await: called, synchronously in the abort's dispatch, when
   * the engine gives the send up (`signal` aborted before it settled). Saves the adapter an abort
   * listener of its own (an AbortSignal's add and remove cost ~3 µs a call on Node 20). What it returns,
   * if anything, is the attempt's outcome (the adapter knows how far the send got: a response whose body
   * it was still reading); else the abort's reason is classified as a send awaiting its response. Never throws.
   */
  abandoned?: (() => AttemptOutcome | void) | undefined;
}

/** What an adapter reports after one attempt. */
export interface AttemptOutcome {
  classification: Classification;
  /** the result to store for `success` and `terminal` */
  snapshot: ResultSnapshot | null;
  /**
   * The status that came when there is no `snapshot` (a body that broke off after its status): the
   * attempt records it, though no result is kept to replay.
   */
  status?: number | undefined;
  /** what the live caller gets (full body, value or error); never stored */
  live: unknown;
  /**
   * An error of the caller's own `classify`: the attempt is recorded by the default
   * classification (it was sent all the same), then this is thrown to the caller.
   */
  fault?: unknown;
  /**
   * What an attempt that was not a success ended with, for the caller to see as the `cause` of an
   * `AmbiguousOutcomeError` it ends in: the thrown value, or the response (the classification's
   * reason as an `Error` when left out).
   */
  cause?: unknown;
  /**
   * A late outcome (the call of an earlier attempt, still out when that attempt ended, see late-call.ts):
   * the numbers of the earlier attempts whose call it is, the first one's request the one it answers
   * (recorded with the attempt's outcome, see `attempt_finished`).
   */
  answers?: readonly number[] | undefined;
  /**
   * What the attempt threw (a `client.run` effect's error): the `cause` of a stop before the next
   * attempt (attempts, budget, a `Retry-After`, the deadline). When left out: `cause`, if no `snapshot`
   * (a transport error; a response is no thrown error).
   */
  thrown?: unknown;
}

/** An operation as the engine sees it. */
export interface OperationSpec {
  scope: Scope;
  fingerprint: string;
  /** a key given by the caller, adopted instead of minting one */
  callerKey: string | undefined;
  /** the ref oncefetch minted for this call, minted as its key too (see `refMinted`) */
  mintedRef?: string | undefined;
  request: { method: string; url: string } | null;
  send(ctx: AttemptContext): Promise<AttemptOutcome>;
  lookup: SnapshotLookup | undefined;
  /**
   * `lookup` is the one registered for the action (createClient's `lookups`), not the call's own: never
   * asked about a ref oncefetch minted (`refMinted`), which the provider never saw (see `lookupOf`)
   */
  lookupRegistered?: boolean | undefined;
  signal: AbortSignal | undefined;
  /** once aborted, the operation is cancelled at the next decision point (DESIGN §8) */
  cancelSignal?: AbortSignal | undefined;
}

/**
 * Runs `body` while holding an exclusive lock on one record, shared with other
 * tabs or processes. `key` is the store's `name`, a space and the record id: clients
 * of one store share the lock, clients of two stores (two IndexedDB databases of one
 * origin) never wait on each other. After `maxWaitMs` without the lock it runs `body`
 * anyway (the lease then decides whom to wait for); an abort of `signal` while waiting
 * rejects with `signal.reason`.
 */
export type Exclusive = <T>(
  key: string,
  body: () => Promise<T>,
  wait: { signal: AbortSignal | undefined; maxWaitMs: number },
) => Promise<T>;

/** A finished call. */
export interface ExecuteResult {
  record: OperationRecord;
  snapshot: ResultSnapshot;
  /** true when answered from the store (or from a concurrent identical call) */
  replayed: boolean;
  /** this call's live result; undefined when replayed */
  live: unknown;
}

/**
 * The error of the caller's own `classify`, thrown by `cutOff` where the call would have ended with it
 * had the cut-off write landed: `attempts` throws the fault itself, not the deadline's abort reason.
 */
class FaultStands {
  constructor(readonly fault: unknown) {}
}

/** An outcome that warrants another attempt, after a delay. */
class RetryLater extends Error {
  constructor(
    readonly classification: Classification,
    /** the attempt's {@link AttemptOutcome.cause}, after an ambiguous outcome */
    override readonly cause: unknown,
    /** what the attempt threw (no response came), whatever its class: the cause of a RetriesExhaustedError or DeadlineExceededError */
    readonly thrown: unknown,
    /** the lookup was asked after this attempt's outcome already (see `sendOnce`): a stop asks it no more */
    readonly asked: boolean,
  ) {
    super(`retry after ${classification.class}: ${classification.reason}`);
    this.name = 'RetryLater';
  }
}

type StepResult = { record: OperationRecord; live: unknown };

/** One execution in this process, which concurrent calls of the same scope join. */
interface Running {
  fingerprint: string;
  /** its method and stored URL, to name what a conflicting call changed (see `differentPart`) */
  request: OperationSpec['request'];
  callerKey: string | undefined;
  /** the first caller's signal: its abort ends this execution, not the joined calls */
  signal: AbortSignal | undefined;
  promise: Promise<ExecuteResult>;
  /** the first caller's call (see {@link Engine.requestCancel}) */
  deadline: CallDeadline;
}

/** Runs operations for one client. */
export class Engine {
  readonly stats: OnceStats = emptyStats();
  private readonly inflight = new Map<string, Running>();
  /** records a call ends with that its write, cut off (see `cutOff`), has not recorded: an aborted caller gets its reason instead */
  private readonly unrecorded = new WeakSet<OperationRecord>();
  /**
   * By call (its deadline): the success this call's own attempt got whose write lost the lease to
   * another owner, or which the store failed to keep on that owner's record (see `sendOnce`); or its
   * lookup's "found", proof of the effect all the same, whose write so lost the lease (see `reconcileOwned`). The
   * call follows that owner, and never sends again. `key`: the key it was sent with (a record deleted
   * and claimed afresh has another); `recorded`: the record this call settled with it (see
   * `reconcileOwned`).
   */
  private readonly held = new WeakMap<CallDeadline, { snapshot: ResultSnapshot | null; live: unknown; key: string; recorded?: OperationRecord }>();
  /**
   * By call (its deadline): the attempt it opened and never sent, whose close (`never_sent`) the store
   * failed after another owner took the record over (see `settle`): the call follows that owner and,
   * taking the record back with that attempt still open, closes it (only this call knows it was never sent).
   */
  private readonly unsentLost = new WeakMap<CallDeadline, string>();
  /** the calls (by their deadline) an attempt of which was answered as anything but not_sent: a record they follow is no replay for them */
  private readonly sent = new WeakSet<CallDeadline>();
  /** by call (its deadline): the record as a write after the send that the deadline cut off leaves it (see `cutOff`), read by a stop decided before it (see `scheduleRetry`) */
  private readonly cutLeaves = new WeakMap<CallDeadline, OperationRecord>();
  /**
   * The calls (by their deadline) that hold a retry budget token for a retry not sent yet: spent when
   * the retry is handed to the transport (see `sendOnce`), given back when the call ends first (an
   * abort, the client's close, a lookup that found the effect, a stop: see `attempts`).
   */
  private readonly funded = new WeakSet<CallDeadline>();
  /**
   * By call: aborted when a cancel reaches it other than by its own `once.signal`: `client.cancel()` of
   * this client, or the `once.signal` of a call that joined it (see {@link requestCancel}); taken as its
   * own `once.signal` is (see `cancelAsked`). Made only when needed: a wait before a retry, or a cancel.
   */
  private readonly cuts = new WeakMap<CallDeadline, AbortController>();
  /**
   * The cancel writes a joined call's `once.signal` started (see `requestCancel`): the only record of
   * that cancel when the call it joined takes no step after it (its last attempt refused), they may
   * outlive both calls; `client.close()` waits for them before the store goes (else it closed under one:
   * the cancel unrecorded, and the next call sent the order)
   */
  readonly cancelling = new Set<Promise<unknown>>();
  /** by record id: the abandon of a write given up on before the send, pending until it lands (see `bounded`), and until when a call waits for it */
  readonly abandoning = new Map<string, { done: Promise<unknown>; until: number | (() => number) }>();
  /**
   * The entries of `abandoning` that write what a call learned after its send (see `behind`):
   * `client.close()` waits for them until their lease's end; for the others (the undo or release of a
   * write before the send, which records nothing learned) at most `LET_GO_WAIT_MS`, as a call waits for its own
   */
  readonly afterSend = new WeakSet<object>();
  /**
   * The calls (by their deadline) from the start of the write that opens an attempt (the claim of
   * attempt 1, `attempt_started`) until they hand that attempt to the transport or end: a call the
   * client's close stops in between closes its attempt as never sent (see `sendOnce`), and
   * `client.close()` waits for that before the store goes (see {@link unsentSettled})
   */
  readonly unsent = new Set<CallDeadline>();
  /** {@link unsentSettled}'s promise while `unsent` is not empty, and what resolves it once it is */
  private unsentDrained: { promise: Promise<void>; resolve: () => void } | undefined;
  private readonly closer = new AbortController();
  /** see {@link whenClosed} */
  private readonly closers = new Set<(reason: unknown) => void>();
  /**
   * aborted by {@link close}: work left going in the background (a read-back that keeps failing) stops,
   * its timers with it; a call still running cuts off its writes after the send (see `within`) and
   * sends nothing more (see `sendOnce`)
   */
  readonly closed: AbortSignal = this.closer.signal;

  /**
   * @param exclusive optional: runs one record's execution exclusively across
   *   tabs or processes (the browser entry passes Web Locks); the store's lease and
   *   compare-and-set stay the guarantee, this only saves the waiting side its polling.
   * @param telemetry optional: OpenTelemetry spans (the Node entry passes them unless `telemetry: false`)
   */
  constructor(
    readonly opts: ResolvedOptions,
    private readonly exclusive?: Exclusive,
    private readonly telemetry?: Telemetry,
  ) {}

  /**
   * The client closes (its store next): background retries end now, not at a lease's end. `client.close()`
   * calls it once the work it waits for has ended, or when its `waitMs` ran out first: a call still
   * running then returns an answer in hand unrecorded, as at its deadline (see `cutOff`), and starts
   * no send; `reason` is what it ends with otherwise.
   */
  close(reason: StoreError = new StoreError('the client was closed')): void {
    this.closer.abort(reason);
    for (const fn of this.closers) fn(reason);
    this.closers.clear();
  }

  /** The call of `deadline` holds no attempt opened and unsent any more (see `unsent`). */
  handedOff(deadline: CallDeadline): void {
    if (!this.unsent.delete(deadline) || this.unsent.size > 0 || this.unsentDrained === undefined) return;
    this.unsentDrained.resolve();
    this.unsentDrained = undefined;
  }

  /**
   * Resolves once no call holds an attempt opened and unsent, nor a write pending that opens one (see
   * `unsent`). After {@link close}, each such call ends soon: its pending write, once acknowledged,
   * finds the client closed and its attempt is closed as never sent (see `sendOnce`).
   */
  unsentSettled(): Promise<void> {
    if (this.unsent.size === 0) return Promise.resolve();
    if (this.unsentDrained === undefined) {
      let resolve = (): void => undefined;
      const promise = new Promise<void>((r) => (resolve = r));
      this.unsentDrained = { promise, resolve };
    }
    return this.unsentDrained.promise;
  }

  /**
   * Calls `fn` with the close's reason when the client closes (at once if it has); returns its unhook.
   * The calls' waits hook here, not on `closed`: a Node AbortSignal warns past 10 listeners
   * (MaxListenersExceededWarning at c=16), and a Set costs less than an EventTarget.
   */
  whenClosed(fn: (reason: unknown) => void): () => void {
    if (this.closed.aborted) {
      fn(this.closed.reason);
      return () => undefined;
    }
    this.closers.add(fn);
    return () => void this.closers.delete(fn);
  }

  /**
   * Waits `ms`; rejects with `signal`'s reason when it aborts first, or with the close's when the client
   * closes first. `cutShort` (a caller's `once.signal`) ends the wait early without an error: the caller
   * then decides what its abort means (a cancel, recorded at the next step).
   */
  nap(ms: number, signal?: AbortSignal, cutShort?: AbortSignal): Promise<void> {
    const wake = this.orClosed(signal);
    if (cutShort === undefined) return sleep(ms, wake.signal).finally(wake.done);
    const stop = new AbortController();
    const onWake = (): void => stop.abort(wake.signal.reason);
    const onCut = (): void => stop.abort(CUT_SHORT);
    // (the wake first: a signal that is both, aborted, rejects as before)
    if (wake.signal.aborted) onWake();
    else wake.signal.addEventListener('abort', onWake, { once: true });
    if (cutShort.aborted) onCut();
    else cutShort.addEventListener('abort', onCut, { once: true });
    return sleep(ms, stop.signal)
      .catch((error: unknown) => {
        if (error !== CUT_SHORT) throw error;
      })
      .finally(() => {
        wake.signal.removeEventListener('abort', onWake);
        cutShort.removeEventListener('abort', onCut);
        wake.done();
      });
  }

  /**
   * A signal that aborts with `signal`'s reason, or with the close's when the client closes first (a
   * wait, `nap`'s, the cross-tab lock's or the wait for another owner's lease, that must not outlast the close); `done` unhooks both.
   */
  orClosed(signal: AbortSignal | undefined): { signal: AbortSignal; done: () => void } {
    const wake = new AbortController();
    const onAbort = (): void => wake.abort(signal?.reason);
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const unhook = this.whenClosed((reason) => wake.abort(reason));
    return {
      signal: wake.signal,
      done: () => {
        signal?.removeEventListener('abort', onAbort);
        unhook();
      },
    };
  }

  emit(event: OnceEvent): void {
    const listener = this.opts.onEvent;
    if (listener !== undefined) {
      try {
        // Its own copy of the scope: a listener that edits it must not redirect the operation.
        const returned: unknown = listener({ ...event, scope: { ...event.scope } } as OnceEvent);
        // An async listener's rejection is as harmless as a throw (never an unhandled rejection).
        if (typeof (returned as PromiseLike<unknown> | undefined)?.then === 'function') (returned as Promise<unknown>).then(undefined, () => undefined);
      } catch {
        // a listener's failure must never change an operation's outcome
      }
    }
    this.telemetry?.event(event);
  }

  /** Executes at most once; concurrent identical calls in this process share one execution. */
  execute(spec: OperationSpec): Promise<ExecuteResult> {
    return this.telemetry === undefined ? this.executeOnce(spec) : this.telemetry.trace(spec.scope, () => this.executeOnce(spec));
  }

  private async executeOnce(spec: OperationSpec): Promise<ExecuteResult> {
    spec.signal?.throwIfAborted();
    const id = recordId(spec.scope);
    const waitFrom = this.opts.now();
    for (let joined = this.inflight.get(id); joined !== undefined; joined = this.inflight.get(id)) {
      if (joined.fingerprint !== spec.fingerprint) throw this.conflict(spec.scope, `a concurrent call has the same scope and ${differentPart(joined.request, spec.request)}`, 'may-take');
      if (spec.callerKey !== undefined && spec.callerKey !== joined.callerKey) {
        throw this.conflict(spec.scope, 'a concurrent call has the same scope and a different Idempotency-Key', 'may-take');
      }
      let shared: ExecuteResult;
      // A joined caller's `once.signal` cancels the operation as `client.cancel()` does (DESIGN §8): the
      // call it joined sends nothing more, and this one ends as that one does (a delivery that won, say).
      const cancel = spec.cancelSignal;
      // (its write goes on after both calls end: `client.close()` waits for it, see `cancelling`, at most
      // retry.deadlineMs from the cancel, as a call: a store that stops answering must not hold it for ever;
      // that timer unref'd on Node: it bounds the wait, it must not keep the process alive after the close)
      const onCancel = (): void => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const cap = new Promise((resolve) => (timer = setTimeout(resolve, Math.min(this.opts.retry.deadlineMs, MAX_TIMER_MS))));
        (timer as { unref?: () => void } | undefined)?.unref?.();
        const write: Promise<unknown> = Promise.race([this.requestCancel(id), cap])
          .catch(() => undefined)
          .finally(() => (clearTimeout(timer), this.cancelling.delete(write)));
        this.cancelling.add(write);
      };
      if (cancel?.aborted === true) onCancel();
      else cancel?.addEventListener('abort', onCancel, { once: true });
      try {
        // A joined caller waits under its own signal, not the first caller's.
        shared = await (spec.signal === undefined ? joined.promise : untilAborted(joined.promise, spec.signal));
      } catch (error) {
        // The call it joined was given up by its own caller: run the operation itself.
        if (joined.signal?.aborted === true && error === joined.signal.reason && spec.signal?.aborted !== true) {
          if (this.inflight.get(id) === joined) this.inflight.delete(id);
          continue;
        }
        // (the call it joined was cancelled: by this one, told as that one is; else this one met that cancel)
        throw isA(error, OperationCancelledError) ? (cancel?.aborted === true ? new OperationCancelledError(error.message, { scope: spec.scope }) : cancelledError(spec.scope, true)) : error;
      } finally {
        cancel?.removeEventListener('abort', onCancel);
      }
      this.stats.replays++;
      this.emit({ type: 'replay', scope: spec.scope, at: this.opts.now(), state: shared.record.state });
      return { ...shared, replayed: true };
    }
    // from before the lock: the deadline bounds the wait for it too
    const deadline = new CallDeadline(this.opts.retry.deadlineMs, this.opts.now(), spec.scope, spec.signal);
    const promise =
      this.exclusive === undefined
        ? this.run(spec, deadline)
        : // one inFlightWaitMs for the lock and the lease together, counted from here
          this.underLock(this.exclusive, id, () => this.run(spec, deadline, waitFrom), deadline.signal);
    const running: Running = { fingerprint: spec.fingerprint, request: spec.request, callerKey: spec.callerKey, signal: spec.signal, promise, deadline };
    this.inflight.set(id, running);
    try {
      const result = await promise;
      // The caller aborted and the answer's write was cut off (1 s after the abort, or at the deadline):
      // it rejects with its reason, as an abort does; the calls that joined it get the answer in hand.
      if (spec.signal?.aborted === true && this.unrecorded.has(result.record)) throw spec.signal.reason;
      return result;
    } finally {
      deadline.dispose();
      this.handedOff(deadline);
      if (this.inflight.get(id) === running) this.inflight.delete(id);
    }
  }

  /**
   * Runs `body` under the cross-tab lock of record `id`. The wait for it ends with the call's deadline
   * or its caller's abort (`signal`), and with the client's close: a close whose `waitMs` ran out
   * rejects a call still queued behind another tab at once, with the close's reason, rather than
   * when that tab lets go (up to `inFlightWaitMs`) and the call finds the store closed.
   */
  private underLock<T>(exclusive: Exclusive, id: string, body: () => Promise<T>, signal: AbortSignal): Promise<T> {
    const wait = this.orClosed(signal);
    return exclusive(`${this.opts.store.name} ${id}`, body, { signal: wait.signal, maxWaitMs: this.opts.inFlightWaitMs }).finally(wait.done);
  }

  /**
   * Records a cancel of record `id` by compare-and-set, ordered against its owner's writes
   * (`client.cancel()`, and a joined call's `once.signal`): the record it left, or undefined when there
   * is none. A call of this client running it takes the cancel as its own `once.signal` (see `cuts`):
   * its wait before a retry ends at once, and it records the cancel at its next step (even when this
   * write found no record yet: its claim not landed).
   */
  async requestCancel(id: string): Promise<OperationRecord | undefined> {
    const running = this.inflight.get(id);
    if (running !== undefined) this.cutOf(running.deadline).abort();
    const { store, now, owner } = this.opts;
    for (let i = 0; ; i++) {
      const record = await store.get(id);
      if (record === undefined || isTerminal(record.state)) return record;
      const next = applyEvent(record, { type: 'cancel' }, now(), owner);
      if ((await store.compareAndSet(id, record.generation, next)).ok) return next;
      if (i > 16) throw new StoreError(`${store.name}: record ${id} kept changing while cancelling`);
    }
  }

  private cutOf(deadline: CallDeadline): AbortController {
    let cut = this.cuts.get(deadline);
    if (cut === undefined) this.cuts.set(deadline, (cut = new AbortController()));
    return cut;
  }

  /** Whether a cancel reached the call: its own `once.signal`, or another way (see `cuts`). */
  private cancelAsked(spec: OperationSpec, deadline: CallDeadline): boolean {
    return spec.cancelSignal?.aborted === true || this.cuts.get(deadline)?.signal.aborted === true;
  }

  /** Whether an execution of record `id` runs in this client. */
  running(id: string): boolean {
    return this.inflight.has(id);
  }

  /** The execution of record `id` running in this client, as it settles (see `client.cancel`). */
  runningCall(id: string): Promise<unknown> | undefined {
    return this.inflight.get(id)?.promise;
  }

  /** Counts a conflict (`stats().conflicts`) and emits its `conflict` event: every conflict, local or the provider's, once. */
  countConflict(scope: Scope, reason: string): void {
    this.stats.conflicts++;
    this.emit({ type: 'conflict', scope, at: this.opts.now(), reason });
  }

  /**
   * A conflict before any send. `earlier` says what the other payload's operation did: a message fed back to an
   * agent's model must not read as "nothing happened, try a new ref" when the same intent, re-worded, took effect.
   */
  conflict(scope: Scope, reason: string, earlier?: 'took' | 'may-have' | 'may-take'): IdempotencyConflictError {
    this.countConflict(scope, reason);
    const what =
      earlier === undefined
        ? ''
        : ` Its earlier payload ${earlier === 'took' ? 'took effect (succeeded)' : earlier === 'may-have' ? 'may have taken effect (its outcome is unknown)' : 'may take effect (a call with it is still running)'}: if this call is the same intent, do not send it under a new ref, which could make a second effect.`;
    return new IdempotencyConflictError(
      `${reason} (operation ${scope.tenant}/${scope.action}/${scope.ref}); nothing was sent.${what} Use a new ref for a new intent.`,
      { scope },
    );
  }

  /** A provider's key conflict on a resend that a settled "absent" let stand (`rec` failed by it): counted and emitted as any conflict (`recover()` too). */
  conflictStood(rec: OperationRecord): void {
    this.countConflict(scopeOf(rec), rec.attempts.at(-1)?.reason ?? 'key conflict');
  }

  private async run(spec: OperationSpec, deadline: CallDeadline, waitFrom?: number): Promise<ExecuteResult> {
    let passes = 0;
    for (;;) {
      // the lock's wait counts once: a later pass (after a lease loss) waits its own inFlightWaitMs
      const got = await this.acquireFor(spec, deadline, passes++ === 0 ? waitFrom : undefined);
      // (not a replay for a call that sent, its lease then lost: its own success, see `held`, or any other answer)
      if (got.kind === 'replay') return this.followed(got.record, deadline) ?? this.finish(got.record, undefined, !this.sent.has(deadline));
      const last = got.owned.rec.attempts.at(-1);
      if (last !== undefined && last.finishedAt === null && last.id === this.unsentLost.get(deadline)) got.owned.unsentAttempt = true;
      try {
        const done = await this.attempts(got.owned, spec, deadline);
        return this.followed(done.record, deadline) ?? this.finish(done.record, done.live, false);
      } catch (error) {
        // Someone else now owns or finished the operation: start over and follow them. (So does a call
        // whose success the store failed to keep on that owner's record: it holds it, see `sendOnce`.)
        if (isA(error, LeaseLostError) || (isA(error, LateOutcomeNotKeptError) && this.held.has(deadline))) {
          this.emit({ type: 'late_evidence', scope: spec.scope, at: this.opts.now(), detail: error.message });
          // (an attempt this call opened is the new owner's to read now: see `unsent`)
          this.handedOff(deadline);
          continue;
        }
        throw error;
      }
    }
  }

  /**
   * Acquires for a call, a later pass of which follows another owner that took the operation over. An
   * OperationInFlightError (its doc: "nothing was sent by this call") that ends the wait of a call which
   * holds its own attempt's success (see `held`) says that its request was sent and took effect.
   */
  private async acquireFor(spec: OperationSpec, deadline: CallDeadline, waitFrom: number | undefined): Promise<Acquired> {
    try {
      return await acquire(this, spec, deadline, waitFrom);
    } catch (error) {
      const held = this.held.get(deadline);
      if (!isA(error, OperationInFlightError) || held === undefined) throw error;
      const answer = held.snapshot === null ? 'succeeded' : held.snapshot.kind === 'value' ? 'returned its value' : `answered ${held.snapshot.status}`;
      throw new OperationInFlightError(
        `${error.message} This call's request was sent and ${answer}: the operation took effect; call again with the same ref for the recorded result, never with a new one`,
        { scope: spec.scope, cause: error },
      );
    }
  }

  /**
   * The end of a call whose own attempt got a success that its write could not record, the lease lost
   * to another owner (see `held`), by the terminal `record` it followed; undefined when it ends as
   * every call does, by the record. A success stands as the new owner recorded it (not marked as a
   * replay: this call sent), but for a result whose body the record cut (`maxStoredBodyBytes`): then
   * the one it holds whole, its own effect's (the same operation under the same key), rather than a
   * ValueNotStoredError or a truncated body. Any other end (a failure, a cancel, a conflict, recorded
   * by an owner that did not know of this success): AmbiguousOutcomeError, not that end, which would
   * hide the effect this call saw happen, nor a success the record contradicts. Its success stays on
   * the record as evidence (see `OwnedRecord.keep`).
   */
  private followed(record: OperationRecord, deadline: CallDeadline): ExecuteResult | undefined {
    const held = this.held.get(deadline);
    if (held === undefined) return undefined;
    const own = held.snapshot;
    // Its own result: on the record this call settled with it (its own value, as a call that kept its
    // lease gets), or where the record cut the body and this call holds it whole.
    const mine = held.recorded === record || (record.state === 'succeeded' && record.result?.bodyTruncated === true && (!own?.bodyTruncated || held.live !== undefined));
    if (mine && own !== null) return { record, snapshot: own, replayed: false, live: held.live };
    if (record.state === 'succeeded') return undefined;
    throw heldSuccess(scopeOf(record), `recorded it as ${record.error?.code === 'IDEMPOTENCY_CONFLICT' ? 'a key conflict' : record.state}`);
  }

  /** Turns a terminal record into the call's result or its typed error. */
  finish(record: OperationRecord, live: unknown, replayed: boolean): ExecuteResult {
    const scope = { tenant: record.tenant, action: record.action, ref: record.ref };
    if (replayed) {
      this.stats.replays++;
      this.emit({ type: 'replay', scope, at: this.opts.now(), state: record.state });
    }
    if (record.state === 'cancelled') throw cancelledError(scope, replayed, record.attempts.some((a) => a.class !== 'not_sent'));
    if (record.error?.code === 'IDEMPOTENCY_CONFLICT') {
      // (a record an earlier version ended failed on a conflict that answered a resend: the effect may exist)
      const reached = conflictAfterReach(record);
      const hint =
        reached === undefined
          ? ''
          : `; it answered a same-key resend after ${reached === 0 ? "a superseded owner's attempt" : `attempt ${reached}`}, which may have taken effect: check at the provider before sending this intent under a new ref`;
      throw new IdempotencyConflictError(`${record.error.message}${hint} (operation ${scope.tenant}/${scope.action}/${scope.ref})`, { scope });
    }
    if (record.result === null) {
      // A terminal outcome without a response (a thrown error classified terminal).
      if (!replayed && isA(live, Error)) throw live;
      throw new OperationFailedError(`operation ${scope.tenant}/${scope.action}/${scope.ref} failed earlier: ${record.error?.message ?? 'no result stored'}`, { scope });
    }
    return { record, snapshot: record.result, replayed, live: replayed ? undefined : live };
  }

  /** The attempt loop: one step per attempt number, a scheduled wait between them, all under the deadline's signal. */
  private async attempts(owned: OwnedRecord, spec: OperationSpec, deadline: CallDeadline): Promise<StepResult> {
    const { retry } = this.opts;
    const signal = deadline.signal;
    let previousDelayMs: number | undefined;
    // what the last attempt ended with, while the record is ambiguous because of it
    let cause: unknown;
    // A call entering the loop is one request: it pays into the budget that funds retries.
    retry.budget?.recordRequest();
    this.stats.operationsExecuted++;
    this.stats.attemptsPerOperation = this.stats.attempts / this.stats.operationsExecuted;
    try {
      for (let n = 1; ; n++) {
        signal.throwIfAborted();
        try {
          return await this.step(owned, spec, deadline, n, cause);
        } catch (error) {
          if (!isA(error, RetryLater)) throw error;
          cause = error.cause;
          // Throws (a typed stop) when no attempt is left, the wait is too long, or the budget is spent,
          // unless the lookup asked first made the record terminal: then that is the answer.
          const next = await this.scheduleRetry(owned, spec, deadline, error, n, retry.maxAttempts - n, previousDelayMs);
          if (typeof next !== 'number') return { record: next, live: undefined };
          previousDelayMs = next;
        }
      }
    } catch (error) {
      // (the caller's classify failed and the deadline cut off the outcome's write: see `cutOff`)
      if (isA(error, FaultStands)) throw error.fault;
      // An abort rejects with signal.reason as given; our deliberate errors (OnceError) stand. A write
      // given up on is abandoned once it lands (see `bounded`): its chain would hold this one.
      if (signal.aborted && (error === signal.reason || !isOnceError(error))) {
        const reason = deadlineEnd(this.cutLeaves.get(deadline) ?? owned.rec, deadline) ?? signal.reason;
        if (!this.abandoning.has(owned.rec.id)) await this.within(owned, deadline, this.abandon(owned, reason), false);
        throw reason;
      }
      if (isA(error, StoreError)) await this.letGo(owned, error, signal);
      throw error;
    } finally {
      // a token taken for a retry that was not sent: given back
      if (this.funded.delete(deadline)) retry.budget?.refund();
    }
  }

  /**
   * After a StoreError while holding the record: releases the lease (best effort, as `abandon` does)
   * when a read-back shows the record still ours, as this owner knows it or as the write that failed
   * left it (applied, its ack lost), so that another process's next call need not wait for the lease
   * to expire. Nothing of ours is on the wire then (a send's outcome is in hand when its write
   * fails): open attempts stay as they are, evidence; only the lease goes. The caller waits for it
   * no longer than `LET_GO_WAIT_MS` (a store slow to answer must not hold the error); later calls of
   * this client wait for it until the lease's end (then it is moot), as for the abandon of a write
   * given up on (`abandoning`).
   */
  async letGo(owned: OwnedRecord, error: StoreError, signal: AbortSignal): Promise<void> {
    const id = owned.rec.id;
    const until = Math.min(owned.rec.lease?.expiresAt ?? 0, this.opts.now() + this.opts.leaseMs);
    // (a write given up on, or one that opened an attempt, is being abandoned already: see `bounded`)
    if (this.abandoning.has(id) || owned.rec.lease?.owner !== this.opts.owner || until <= this.opts.now()) return;
    const release = async (): Promise<void> => {
      const stored = await this.opts.store.get(id);
      if (stored === undefined || stored.lease?.owner !== this.opts.owner || isTerminal(stored.state) || !owned.adopt(stored)) return;
      await this.abandon(owned, error);
    };
    trackAbandon(this, id, release(), until);
    // (the caller's abort or deadline ends the wait: its StoreError is thrown now, the release goes on)
    await awaitAbandon(this, id, signal, LET_GO_WAIT_MS).catch(() => undefined);
  }

  /**
   * After an abort: releases the lease (best effort) so the operation can be resumed at once.
   * Resolves with nothing: resolving with `reason` would read its `then` (a caller's reason may be
   * a Proxy that throws on any read).
   */
  async abandon(owned: OwnedRecord, reason: unknown): Promise<void> {
    if (!isTerminal(owned.rec.state) && owned.rec.lease !== null) {
      // An attempt the claim opened but never handed to the transport: close it, so the record says pending, not in flight.
      if (owned.unsentAttempt) await this.closeUnsent(owned, 'aborted before it was sent').catch(() => undefined);
      let code = 'ABORTED';
      let message = 'aborted by the caller';
      try {
        if (isOnceError(reason)) code = reason.code;
        if (reason instanceof Error) message = reason.message;
      } catch {
        // a reason that cannot be read (a getter that throws, a revoked Proxy): the lease goes all the same
      }
      try {
        await owned.commit({ type: 'stopped', code, message });
        this.emit({ type: 'stopped', scope: scopeOf(owned.rec), at: this.opts.now(), code, message });
      } catch {
        // the lease expires on its own; the caller still gets its reason
      }
    }
  }

  /**
   * Decides the wait before the next attempt, or stops the loop with a typed error. Before a stop while
   * the outcome is unknown (the record ambiguous, by the last attempt or an earlier one, or cleared for a
   * resend only by the provider's dedupe), the lookup is asked unless it was after the last attempt, as
   * when the attempts or the budget run out (see `sendOnce`): one lookup now may settle what the stop
   * would leave to the next call. Returns the record it made terminal (a "found"); a settled "absent"
   * leaves the stop resumable.
   */
  private async scheduleRetry(
    owned: OwnedRecord,
    spec: OperationSpec,
    deadline: CallDeadline,
    { classification: c, cause, thrown, asked }: RetryLater,
    attemptNumber: number,
    retriesLeft: number,
    previousDelayMs: number | undefined,
  ): Promise<number | OperationRecord> {
    const { retry } = this.opts;
    const scope = spec.scope;
    // (a token `sendOnce` took for this retry goes back when the retry is not sent: see `funded`)
    const end = async (error: (rec: OperationRecord) => Error & { code: string }): Promise<OperationRecord> => {
      const rec = owned.rec;
      // (`asked`: the last attempt's outcome was looked up already, see `sendOnce`)
      const unsettled = rec.state === 'ambiguous' || (rec.state === 'pending' && resendNeedsDedupe(rec));
      if (!asked && unsettled && lookupOf(spec, rec) !== undefined) {
        let first = rec.state === 'pending';
        try {
          if (first) await this.early(owned, deadline.signal, { type: 'reconcile_first', detail: `${DEDUPE_ONLY}no retry can be made: reconcile first` });
          first = false;
          const ended = await this.reconcileOwned(owned, spec, deadline, cause);
          if (ended !== undefined && isTerminal(ended.state)) return ended;
        } catch (failure) {
          // (the deadline, not the caller, cut the lookup off, or a write of it: the stop stands, by the record
          // as that write leaves it: ambiguous (reconcile_first, landing later), an AmbiguousOutcomeError;
          // cleared by a settled "absent", the stop's own error)
          if (failure !== deadline.passed || deadline.signal.reason !== failure) throw failure;
          const left = first ? { ...owned.rec, state: 'ambiguous' as const } : (this.cutLeaves.get(deadline) ?? owned.rec);
          throw await this.stop(owned, error(left), deadline);
        }
        if (isTerminal(owned.rec.state)) return owned.rec;
      }
      throw await this.stop(owned, error(owned.rec), deadline);
    };
    if (retriesLeft <= 0) {
      return end((rec) => exhausted(rec, c, retry.maxAttempts, cause, thrown));
    }
    const retryAfterMs = c.retryAfterMs;
    if (retryAfterMs !== undefined && retryAfterMs > retry.maxRetryAfterMs) {
      return end((rec) => unlessAmbiguous(rec, new RetriesExhaustedError(`provider asked to wait ${retryAfterMs} ms (over maxRetryAfterMs ${retry.maxRetryAfterMs}) for ${text(scope)}; the record stays resumable${unsure(rec)}`, { scope, retryAfterMs, attempts: attemptNumber, cause: thrown })));
    }
    const delayMs = retryAfterMs ?? backoffDelay(retry.jitter, attemptNumber, retry, this.opts.random, previousDelayMs);
    // An attempt needs time to finish: one the deadline cuts short after it was sent leaves the record
    // ambiguous, where stopping now leaves it resumable. The floor: its own timeout, at most a tenth of the deadline.
    const floorMs = Math.min(retry.attemptTimeoutMs, retry.deadlineMs / 10);
    if (delayMs + floorMs > deadline.remaining(this.opts.now())) {
      return end((rec) => unlessAmbiguous(rec, new DeadlineExceededError(`waiting ${delayMs} ms would leave under ${floorMs} ms of the deadline of ${text(scope)} for the next attempt; the record stays resumable${unsure(rec)}`, { scope, retryAfterMs, attempts: attemptNumber, cause: thrown })));
    }
    // Last check: a token is taken only for a retry that will be sent, else given back (see `funded`).
    if (retry.budget !== undefined && !this.funded.has(deadline)) {
      if (!retry.budget.tryRetry()) return end((rec) => unlessAmbiguous(rec, new RetriesExhaustedError(`retry budget exhausted for ${text(scope)} after ${c.reason}; the record stays resumable${unsure(rec)}`, { scope, attempts: attemptNumber, cause: thrown })));
      this.funded.add(deadline);
    }
    this.stats.retries++;
    this.emit({ type: 'retry_scheduled', scope, at: this.opts.now(), attempt: attemptNumber, delayMs, source: retryAfterMs === undefined ? 'backoff' : 'retry-after' });
    // Under the call's signal; the client's close ends the wait too, with its reason (the store is
    // closed: no next attempt could be recorded, so none is sent), so that a long `Retry-After` does
    // not hold the process open after `client.close()`. A cancel (`once.signal`) ends the wait at once:
    // nothing is on the wire, so the next step records it and the call ends `cancelled`, instead of
    // holding its caller for the rest of a `Retry-After` (an MCP host's timeout cancels a tool call so).
    // So does a cancel that reached it another way (`client.cancel()` of this client, a joined call's
    // `once.signal`: see `cuts`), or that the record already holds: the next step sends nothing.
    const cut = this.cutOf(deadline);
    const own = spec.cancelSignal;
    const onCancel = (): void => cut.abort();
    if (own?.aborted === true || owned.rec.cancelRequestedAt !== null) onCancel();
    else own?.addEventListener('abort', onCancel, { once: true });
    await this.nap(delayMs, deadline.signal, cut.signal).finally(() => own?.removeEventListener('abort', onCancel));
    return delayMs;
  }

  /**
   * Awaits `write`, a store write after the send (an attempt's outcome, a lookup's answer, a note, the
   * stop), until the call's deadline, so that a store that stops answering then (a partition, a
   * failover: pg has no client-side timeout unless one is set) holds the call no longer than that. A
   * write begun after the deadline passed (the outcome of an attempt the deadline ended, the stop it
   * records) is awaited until `LET_GO_WAIT_MS` after it. After the caller's abort, until
   * `LET_GO_WAIT_MS` after that abort (or the deadline, if sooner): an answer in hand is worth
   * recording after an abort (see `settle`), and one that lands by then is, but a write that hangs
   * holds the aborted call no longer. While the call is live, the usual case, no timer or
   * AbortController: the deadline's own timer ends the wait (the abort starts the grace timer).
   *
   * A write cut off returns `CUT` and goes on in the background (see `behind`); the caller ends the
   * call with what it would have got had the write landed (see `cutOff`), or with the caller's abort
   * reason (see `executeOnce`). The client's close (`closed`: its wait for the call ran out, the store
   * goes next) cuts a pending write off too, and a write begun after it at once.
   */
  private within<T>(owned: OwnedRecord, deadline: CallDeadline, write: Promise<T>, release = true, again?: RecordEvent): Promise<T | typeof CUT> {
    const late = deadline.passed !== undefined;
    return new Promise<T | typeof CUT>((resolve, reject) => {
      let ended = false;
      let unclose = (): void => undefined;
      /** The first of the write, the deadline's end and the client's close decides; false for the others. */
      const end = (): boolean => {
        if (ended) return false;
        ended = true;
        unhook();
        unclose();
        return true;
      };
      const cut = (): void => {
        if (!end()) return;
        this.behind(owned, deadline, write, release, late, again);
        resolve(CUT);
      };
      // The deadline's end, or the client's close (its store goes next): the call ends with what it holds.
      const unhook = deadline.whenEnded(cut, LET_GO_WAIT_MS);
      unclose = this.whenClosed(cut);
      write.then(
        (value) => {
          if (end()) resolve(value);
        },
        (error: unknown) => {
          if (end()) reject(error);
        },
      );
    });
  }

  /**
   * A write after the send that the call's deadline cut off (see `within`) goes on: filed in
   * `abandoning` until the lease's end, so that later calls of this client wait for it rather than
   * take over a record whose write is in flight (another owner waits for the lease, then finds the
   * attempt open: ambiguous, reconciled first, never resent). With `release`, once it lands or fails
   * the lease is released (`abandon`: the stop recorded, as the call would have) unless the record is
   * terminal or another owner's; not after the client's close (its store goes next).
   *
   * The lease is not renewed meanwhile: a renewal is a compare-and-set of the same record, queued
   * behind the write (`OwnedRecord.commit`), as the write's own retries renew it (`settle`).
   *
   * `again`: the write is `settle`'s of this event, an answer in hand (a 2xx, a terminal 4xx, a
   * lookup's "found") that the caller has been given. Failed for good (a store slow to fail, past
   * settle's budget: pg's query_timeout on a connection a failover killed), it gets settle's tries
   * once more, under settle's lease rules (a lost lease ends them, the answer kept on the new
   * owner's record as evidence; the client's close ends them), before the lease is released without
   * it: a store that is back records the answer the caller holds. Nothing is ever sent for it.
   */
  private behind(owned: OwnedRecord, deadline: CallDeadline, write: Promise<unknown>, release: boolean, late: boolean, again?: RecordEvent): void {
    const id = owned.rec.id;
    const failed = (error: unknown): unknown => error;
    const work = write
      .then(() => undefined, failed)
      .then((failure) => (again !== undefined && failure instanceof StoreError && !this.closed.aborted ? this.settle(owned, again).then(() => undefined, failed) : failure))
      .then((failure) => {
        if (!release || this.closed.aborted || failure instanceof LeaseLostError) return undefined;
        return this.abandon(owned, failure ?? this.endedBy(owned.rec, deadline, late));
      });
    // Until the lease's end, as renewed meanwhile (settle's tries renew it while they wait).
    const { owner } = this.opts;
    const lease = owned.rec.lease;
    const cutUntil = lease?.owner === owner ? lease.expiresAt : this.opts.now();
    const prev = this.abandoning.get(id);
    const until = (): number => Math.max(cutUntil, owned.rec.lease?.owner === owner ? owned.rec.lease.expiresAt : 0, prev === undefined ? 0 : untilOf(prev));
    trackAbandon(this, id, prev === undefined ? work : Promise.all([prev.done, work]), until);
    const entry = this.abandoning.get(id);
    if (entry !== undefined) this.afterSend.add(entry);
  }

  /**
   * The call's end after the deadline cut off the write of `event` after the send: what the call
   * would have got had it landed. The record `event` leaves, when terminal (an answer in hand: a 2xx,
   * a terminal 4xx, a lookup's "found"), is returned to be answered from as if written; else the
   * error is thrown (`endedBy`). `fault`, the error of the caller's own classify, is thrown instead,
   * as when the write lands in time: the caller's own error, not DeadlineExceededError. Unless the
   * call would have ended with `signal.reason` had the write landed (see `endedBy`): the caller
   * aborted first, or the write began after the deadline passed; that reason then. Cut off by the
   * client's close, while neither had happened: the answer in hand, `fault`, or the close's reason
   * (see `endedBy`).
   */
  private cutOff(owned: OwnedRecord, deadline: CallDeadline, event: RecordEvent, late: boolean, fault?: unknown): OperationRecord {
    let next = owned.rec;
    try {
      next = applyEvent(owned.rec, event, this.opts.now(), this.opts.owner);
    } catch {
      // (not applicable to the record as this owner knows it: the write finds out; the call ends as the record stands)
    }
    if (fault !== undefined) {
      const passed = deadline.passed;
      const stands = deadline.signal.aborted ? !late && passed !== undefined && deadline.signal.reason === passed : this.closed.aborted;
      throw stands ? new FaultStands(fault) : deadline.signal.reason;
    }
    if (isTerminal(next.state)) {
      // (not written: a caller that aborted gets its reason, the calls that joined it this answer; see executeOnce)
      this.unrecorded.add(next);
      return next;
    }
    this.cutLeaves.set(deadline, next);
    throw this.endedBy(next, deadline, late);
  }

  /**
   * The error of a call whose deadline passed while a write after the send was pending, `rec` the
   * record as that write leaves it: the caller's abort reason when the caller aborted first, else the
   * deadline's DeadlineExceededError, or an AmbiguousOutcomeError with it as its cause while the
   * outcome is unknown (as a call that gives up early says, see `unlessAmbiguous`). `late`: the write
   * began after the deadline passed (the deadline ended the attempt, whose outcome it records): the
   * call then ends with the signal's reason, as when that write lands (see `attempts`). Cut off by the
   * client's close while the call was live: the close's reason (a StoreError), or an
   * AmbiguousOutcomeError with it as its cause while the outcome is unknown.
   */
  private endedBy(rec: OperationRecord, deadline: CallDeadline, late: boolean): unknown {
    if (!deadline.signal.aborted && this.closed.aborted) return unlessAmbiguous(rec, this.closed.reason as StoreError);
    const passed = deadline.passed;
    if (late || passed === undefined || deadline.signal.reason !== passed) return deadline.signal.reason;
    return unlessAmbiguous(rec, passed);
  }

  /**
   * Records why the call stopped (releasing the lease) and returns the error to throw. Under the
   * call's deadline when given (see `within`): a stop the store does not record by then is left to
   * land, and the error is returned all the same.
   */
  private async stop(owned: OwnedRecord, error: Error & { code: string }, deadline?: CallDeadline): Promise<Error> {
    try {
      const write = owned.commit({ type: 'stopped', code: error.code, message: error.message });
      if (deadline !== undefined && (await this.within(owned, deadline, write, false)) === CUT) return error;
      await write;
    } catch (cause) {
      // A call that ends with its outcome unknown says so: a store that failed the stop (or lost its
      // ack) only leaves the lease to expire, and its StoreError would read as "nothing was sent".
      if (cause instanceof StoreError && owned.rec.state === 'ambiguous') return error;
      if (!(cause instanceof LeaseLostError)) return cause instanceof Error ? cause : error;
    }
    this.emit({ type: 'stopped', scope: scopeOf(owned.rec), at: this.opts.now(), code: error.code, message: error.message });
    return error;
  }

  /** One step: reconcile if needed, then at most one send. */
  private async step(owned: OwnedRecord, spec: OperationSpec, deadline: CallDeadline, n: number, cause: unknown): Promise<StepResult> {
    for (;;) {
      const rec = owned.rec;
      if (isTerminal(rec.state)) return { record: rec, live: undefined };
      const held = this.held.has(deadline);
      // This call holds its earlier attempt's success (see `held`), which its lost write did not keep on
      // the record (a store error): kept now, before anything else, or the record would read as cleared
      // for a send (or a cancel) and the next call would run the effect again.
      if (held && !lateSuccess(rec)) {
        const detail = `late success outcome (this call's ${this.held.get(deadline)?.snapshot?.source === 'lookup' ? 'lookup found it' : 'attempt'}; its write lost the lease to another owner)`;
        await this.known(owned, deadline.signal, { type: 'evidence', kind: 'late_response', detail, status: this.held.get(deadline)?.snapshot?.status ?? null, reopen: true });
        continue;
      }
      if (owned.unsentAttempt) {
        // The claim opened attempt 1 (one durable write before the send, not two); a cancel that came
        // first closes it unsent — nothing left the process — and then cancels as before any send.
        // (a call that holds its success, see `held`, never sends: reconciled below, or settled with it)
        if (held || this.cancelAsked(spec, deadline) || rec.cancelRequestedAt !== null) {
          const opened = rec.attempts.at(-1)?.id ?? '';
          await this.closeUnsent(owned, held ? 'the call holds the success of its earlier attempt' : 'cancelled before it was sent', deadline.signal).catch((error: unknown) => {
            // (the lease lost and the close not written: closed when this call takes the record back, see `run`)
            if (isA(error, LeaseLostError)) this.unsentLost.set(deadline, opened);
            throw error;
          });
          continue;
        }
        return this.sendOnce(owned, spec, deadline, n);
      }
      if (this.cancelAsked(spec, deadline) && rec.cancelRequestedAt === null) {
        await this.early(owned, deadline.signal, { type: 'cancel' });
        continue;
      }
      if (rec.state === 'ambiguous') {
        // (a terminal record, perhaps as its write would leave it: the deadline cut that write off)
        const ended = await this.reconcileOwned(owned, spec, deadline, cause);
        if (ended !== undefined && isTerminal(ended.state)) return { record: ended, live: undefined };
        continue;
      }
      if (rec.cancelRequestedAt !== null) {
        await this.early(owned, deadline.signal, { type: 'cancel' });
        continue;
      }
      // Cleared for a send only by a provider's dedupe (a client with providerDedupes, perhaps not this
      // one, stopped before its same-key resend): sent from only by a call that trusts it, else
      // reconciled first (a lookup, or AmbiguousOutcomeError), never resent blind; and by a call that
      // holds its own success (see `held`; on the record, so it needs a dedupe), which never sends.
      if ((held || !this.trustsDedupe(rec)) && resendNeedsDedupe(rec)) {
        const why = held
          ? 'this call holds the success of its earlier attempt'
          : this.opts.providerDedupes
            ? this.keyAged(rec)
            : 'this client does not trust the provider to dedupe';
        await this.early(owned, deadline.signal, { type: 'reconcile_first', detail: `${DEDUPE_ONLY}${why}: reconcile first` });
        continue;
      }
      return this.sendOnce(owned, spec, deadline, n);
    }
  }

  /** Whether a same-key resend is deduplicated, by this client's policy: `providerDedupes`, and the key within the provider's retention (less a margin). */
  trustsDedupe(rec: OperationRecord): boolean {
    return this.opts.providerDedupes && this.opts.now() - rec.createdAt < this.opts.providerRetentionMs * 0.9;
  }

  /** Why a same-key resend is no longer trusted to a provider's dedupe: the key's age against `providerRetentionMs`, less the margin (see `trustsDedupe`). */
  private keyAged(rec: OperationRecord): string {
    const span = (ms: number): string => (ms >= 3_600_000 ? `${Number((ms / 3_600_000).toFixed(1))} h` : `${Math.round(ms)} ms`);
    return `the key is ${span(this.opts.now() - rec.createdAt)} old, past 90 % of providerRetentionMs (${span(this.opts.providerRetentionMs)}), after which the provider may no longer remember it`;
  }

  /**
   * Records the open attempt as never sent (back to pending), also after a takeover; under `signal`
   * when given (see `early`). Only this process knows that the attempt never left it: a StoreError
   * (a blip, a lost ack) is tried again as an answer in hand is (`settle`), else the attempt would
   * read as possibly sent for good without a lookup or provider dedupe.
   */
  private closeUnsent(owned: OwnedRecord, reason: string, signal?: AbortSignal): Promise<unknown> {
    owned.unsentAttempt = false;
    return this.known(owned, signal, { type: 'never_sent', attemptId: owned.rec.attempts.at(-1)?.id ?? '', reason });
  }

  /**
   * `early`'s write of what only this process knows (an attempt never sent, a success it holds): on a
   * StoreError, tried again as an answer in hand is (`settle`), those tries going on in the background
   * once `signal` aborts: a try the store does not answer does not hold the call past its deadline.
   */
  private async known(owned: OwnedRecord, signal: AbortSignal | undefined, event: RecordEvent): Promise<unknown> {
    try {
      return await this.early(owned, signal, event);
    } catch (error) {
      // (given up on at an abort or the client's close: `bounded` abandons it once it lands)
      if (!(error instanceof StoreError) || signal?.aborted === true || this.closed.aborted) throw error;
      return signal === undefined ? this.settle(owned, event) : untilAborted(this.settle(owned, event), signal);
    }
  }

  /**
   * A write before the send, under the call's deadline and the caller's signal, as the claim's
   * (`bounded`): given up on at an abort, abandoned when it lands. `opens`: it opens an attempt,
   * which from then on is closed not_sent unless handed to the transport.
   */
  private early(owned: OwnedRecord, signal: AbortSignal | undefined, event: RecordEvent, opens = false): Promise<unknown> {
    const write = (): Promise<unknown> => owned.commit(event).then(() => {
      if (opens) owned.unsentAttempt = true;
    });
    return signal === undefined ? write() : bounded(this, owned.rec.id, signal, write, () => owned, opens && event.type === 'attempt_started' ? event.attemptId : undefined);
  }

  private async sendOnce(owned: OwnedRecord, spec: OperationSpec, deadline: CallDeadline, n: number): Promise<StepResult> {
    // A call that holds its own success (see `held`) never sends again: `step` settles the record with
    // it or reconciles first, so this is not reached; kept as the guard of that rule against later edits.
    if (this.held.has(deadline)) {
      if (owned.unsentAttempt) await this.closeUnsent(owned, 'the call holds the success of its earlier attempt', deadline.signal);
      throw await this.stop(owned, heldSuccess(spec.scope, 'left it unsettled'), deadline);
    }
    // The write that gates this send: already durable when the claim itself opened the attempt.
    if (!owned.unsentAttempt) {
      this.unsent.add(deadline);
      await this.early(owned, deadline.signal, { type: 'attempt_started', attemptId: globalThis.crypto.randomUUID() }, true);
    }
    // Opened, not sent: after an abort it is closed not_sent (`abandon`), never sent with an aborted signal.
    deadline.signal.throwIfAborted();
    // The lease ran out before the send, by this process's clock (the write that opened the attempt was
    // acknowledged late, or the process stalled): another owner may have taken the record over meanwhile,
    // found nothing at the provider and sent. Taken back by compare-and-set before anything leaves; lost,
    // the attempt is closed as never sent (only this call knows) and the call follows the new owner. So
    // it is when the store fails that write (the call then ends with its StoreError, nothing sent).
    // (not after the client's close: its store goes next, and the call sends nothing, see below)
    // A renew that lands with its own lease run out (a store slower than `leaseMs`) would only repeat: the call ends.
    for (let renewed = false; !this.closed.aborted && owned.rec.lease !== null && owned.rec.lease.expiresAt <= this.opts.now(); renewed = true) {
      // (this attempt is not sent; one before it may have been (`reachedBefore`), and may have taken effect: then not "nothing was sent")
      const slow = renewed
        ? new StoreError(
            `${owned.rec.id}: the store acknowledged a lease renewal after the lease (leaseMs ${this.opts.leaseMs} ms) had run out; ${reachedBefore(owned.rec) ? 'this attempt was not sent' : 'nothing was sent'}${unsettledBefore(owned.rec) ? UNSURE : ''}. Raise leaseMs above the store's write latency`,
          )
        : undefined;
      await (slow === undefined ? this.early(owned, deadline.signal, { type: 'renew', leaseExpiresAt: this.opts.now() + this.opts.leaseMs }) : Promise.reject(slow)).catch(async (error: unknown) => {
        if (isA(error, LeaseLostError) || (isA(error, StoreError) && !deadline.signal.aborted)) {
          const opened = owned.rec.attempts.at(-1)?.id ?? '';
          // (not written, or refused as closed under the new owner's lease: closed when this call takes the record back, see `run`)
          await this.closeUnsent(owned, 'its lease ran out before it was sent', deadline.signal).catch(() => this.unsentLost.set(deadline, opened));
        }
        throw error;
      });
      deadline.signal.throwIfAborted();
    }
    const attempt = owned.rec.attempts.length;
    this.stats.attempts++;
    this.stats.attemptsPerOperation = this.stats.attempts / Math.max(1, this.stats.operationsExecuted);
    this.emit({ type: 'attempt_started', scope: spec.scope, at: this.opts.now(), attempt });
    deadline.signal.throwIfAborted(); // a listener may have aborted the call
    // The client's close stopped the call before this send (its store goes next: no outcome could be
    // recorded). Nothing leaves the process, and the record says so: the attempt closed as never sent.
    if (this.closed.aborted) return this.closedUnsent(owned, deadline);
    this.handedOff(deadline);
    owned.unsentAttempt = false;
    // (the retry's token, if it holds one, is spent now: see `funded`)
    this.funded.delete(deadline);
    const outcome = await this.sendWithLease(owned, spec, deadline, attempt);
    const c = outcome.classification;
    if (c.class !== 'not_sent') this.sent.add(deadline);
    if (c.class === 'ambiguous') this.stats.ambiguous++;
    const status = outcome.snapshot?.status ?? outcome.status ?? null;
    this.emit({ type: 'attempt_finished', scope: spec.scope, at: this.opts.now(), attempt, class: c.class, status, reason: c.reason });
    const finished: RecordEvent = {
      type: 'attempt_finished',
      class: c.class,
      status,
      reason: c.reason,
      result: c.class === 'success' || c.class === 'terminal' ? outcome.snapshot : null,
      ...(outcome.answers === undefined ? {} : { answers: outcome.answers }),
    };
    const answer = c.class === 'success' || c.class === 'terminal' || c.class === 'conflict';
    const write = answer ? this.settle(owned, finished) : owned.commit(finished);
    const late = deadline.passed !== undefined;
    const landed = await this.within(owned, deadline, write, true, answer ? finished : undefined).catch((error: unknown) => {
      // Another owner took the operation over before this success was recorded: the call follows it (see `run`), the answer in hand,
      // also when the store failed to keep it there as evidence (LateOutcomeNotKeptError): the record, perhaps cleared for a
      // send, would not say it was delivered; the call keeps it there when it takes the record back (see `step`), never sending.
      // (a fetch's live body is kept only where the snapshot cut it, see `followed`; an event stream never is:
      // not kept reachable, unread, for the rest of the call)
      if (c.class === 'success' && (isA(error, LeaseLostError) || isA(error, LateOutcomeNotKeptError))) {
        const s = outcome.snapshot;
        this.held.set(deadline, { snapshot: s, key: owned.rec.key, live: s?.kind === 'value' || (s?.bodyTruncated === true && (outcome.live as LiveBody | undefined)?.stream === undefined) ? outcome.live : undefined });
      }
      // (a StoreError reads "nothing was sent" unless it says otherwise: it says so)
      throw c.class !== 'not_sent' && isA(error, StoreError)
        ? unrecorded(error, spec.scope, `attempt ${attempt} was sent${status === null ? '' : ` (answered ${status})`} and its outcome ${c.class === 'ambiguous' ? 'is unknown (it may have taken effect) and ' : ''}could not be recorded`)
        : error;
    });
    // (cut off at the deadline: the record as that write leaves it, or the call's error)
    const record = landed === CUT ? this.cutOff(owned, deadline, finished, late, outcome.fault) : landed;
    // a key conflict or a terminal answer to a resend, the record left ambiguous (see `reachedBefore`, `unsettledBefore`):
    // an ambiguous outcome, counted as one
    const refused = (c.class === 'conflict' || c.class === 'terminal') && record.state === 'ambiguous';
    if (refused) this.stats.ambiguous++;
    if (outcome.fault !== undefined) {
      // The caller's classify failed: the attempt stands as classified by default; the call ends with that error.
      if (!isTerminal(record.state)) await this.within(owned, deadline, owned.commit({ type: 'release' }).catch(() => undefined));
      throw outcome.fault;
    }
    if (isTerminal(record.state)) {
      if (c.class === 'conflict') this.countConflict(spec.scope, c.reason);
      return { record, live: outcome.live };
    }
    // The caller (or the deadline) gave up while the attempt was out: the outcome is recorded, the reason wins.
    deadline.signal.throwIfAborted();
    // An ambiguous outcome that no retry could settle: reconcile now rather than after a pointless wait.
    // (With providerDedupes and no lookup there is nothing to learn now: the record stays ambiguous for the next call.)
    // So is one whose retry the budget cannot fund (scheduleRetry would stop, the lookup unasked): the
    // token is taken here, so that no other call takes it in between (given back if the retry is not
    // sent: see `funded`). Read only for an ambiguous outcome with a lookup.
    const { maxAttempts, budget } = this.opts.retry;
    const lookup = lookupOf(spec, owned.rec);
    const funded = n < maxAttempts && c.class === 'ambiguous' && budget !== undefined && lookup !== undefined && budget.tryRetry();
    if (funded) this.funded.add(deadline);
    const lastAttempt = n >= maxAttempts || (budget !== undefined && !funded);
    // A key conflict or a terminal answer that answered a resend leaves the record ambiguous (an earlier
    // attempt may have taken effect, see `reachedBefore`, `unsettledBefore`): reconciled now, never resent
    // (a lookup, else AmbiguousOutcomeError, its cause the refusal: a 4xx Response, say).
    const cause = c.class !== 'ambiguous' && !refused ? undefined : 'cause' in outcome ? outcome.cause : new Error(c.reason);
    const asked = refused || (c.class === 'ambiguous' && (lookup === undefined ? !this.opts.providerDedupes : lastAttempt));
    if (asked) {
      // (the lookup said absent: the conflict or the terminal answer stands; a conflict is counted where the "absent" is written, see `reconcileOwned`)
      const ended = await this.reconcileOwned(owned, spec, deadline, cause);
      // (a refusal a settled "absent" let stand, ending the record failed on it: this call's own answer, as it came,
      // as a terminal answer to a first attempt is returned: the whole body, a run's own error)
      if (ended !== undefined && isTerminal(ended.state)) return { record: ended, live: refused && c.class === 'terminal' && ended.state === 'failed' ? outcome.live : undefined };
      if (isTerminal(owned.rec.state)) return { record: owned.rec, live: undefined };
    }
    throw new RetryLater(c, cause, 'thrown' in outcome ? outcome.thrown : outcome.snapshot === null ? outcome.cause : undefined, asked);
  }

  /**
   * Writes `event`, which records a definitive answer this process holds (its attempt's 2xx or
   * terminal 4xx, a lookup's "found"), trying again on a StoreError (`SETTLE_RETRY_MS`): a blip is
   * absorbed and the record ends terminal; a retry after the write was applied with its ack lost
   * finds it landed (OwnedRecord adopts it) and returns. When every try fails the last StoreError is
   * thrown: the record still says in_flight (or ambiguous), and no success is returned while it does,
   * since the next call could not replay it; that call reconciles it (lookup, or a same-key resend
   * the provider dedupes), never resends blind. Not under the call's signal: the answer is worth
   * recording after an abort too, and the waits are bounded. The call awaits it until its deadline
   * (`within`): past that (or 1 s after the caller's abort), the call ends and the tries go on in
   * the background, given one more round if they fail (`behind`). Under
   * lease renewal, as a send is: a short lease does not lapse while it tries (another caller would
   * take over a record whose answer is in hand and find it ambiguous); a renewal that finds the lease
   * lost ends the tries (the new owner's view wins, the answer kept on its record as evidence), and
   * so does the client's close.
   */
  private async settle(owned: OwnedRecord, event: RecordEvent): Promise<OperationRecord> {
    const follows = event.type === 'lookup_found' || event.type === 'never_sent' || (event.type === 'attempt_finished' && event.class === 'success');
    const startedAt = this.opts.now();
    /** Throws `error` unless it is a StoreError and a try after `delayMs` more would begin within the budget. */
    const unlessRetry = (error: unknown, delayMs: number): void => {
      if (!(error instanceof StoreError) || this.opts.now() - startedAt + delayMs > SETTLE_BUDGET_MS) throw error;
    };
    try {
      // The usual case: one write, no renewal timer (a renewal would queue behind the write anyway).
      return await owned.commit(event);
    } catch (error) {
      unlessRetry(error, SETTLE_RETRY_MS[0]);
    }
    return this.leased(owned, async (lostSignal) => {
      const lost = lostSignal();
      for (const [i, delayMs] of SETTLE_RETRY_MS.entries()) {
        // (a lost lease or the client's close ends the wait)
        if (delayMs > 0) await this.nap(delayMs, lost).catch(() => undefined);
        // (the client closed: its store goes next, and its timers must not hold the process open)
        this.closed.throwIfAborted();
        // A renewal found the lease lost: no more tries, the new owner's view wins. One last write
        // keeps the answer as evidence on its record (never applied there), then LeaseLostError. A
        // late outcome the store failed to keep there (LateOutcomeNotKeptError) is thrown as is: a
        // success is then held (see `sendOnce`), an ambiguous end ends the call. A store failure of
        // that write (a plain StoreError) reads as one, as when every try fails under a lease kept (a
        // terminal 4xx in hand: the new owner would only call it unknown); but the call follows the new owner (`follows`) with what following cannot lose:
        // its own success (its attempt's, on no record yet: it holds it, see `held`, whose record then
        // keeps it, so that no early "absent" clears that record for a second send), a lookup's
        // "found" (held as its own success is, see `reconcileOwned`: the effect, never a send), and
        // an attempt never sent (closed when it takes the record back, see `unsentLost`: it sends
        // nothing, as cancelled, or as holding its success).
        if (lost.aborted) {
          return owned.commit(event).catch((error: unknown) => {
            throw follows && error instanceof StoreError && !(error instanceof LateOutcomeNotKeptError) ? lost.reason : error;
          });
        }
        const nextDelayMs = SETTLE_RETRY_MS[i + 1];
        if (nextDelayMs === undefined) break;
        try {
          return await owned.commit(event);
        } catch (error) {
          unlessRetry(error, nextDelayMs);
        }
      }
      return owned.commit(event);
    });
  }

  /**
   * The client's close (its wait for the call ran out) stopped the call after the write that opened its
   * attempt, before the send: this process knows that nothing was sent, so it closes the attempt as
   * never sent and releases the lease (`abandon`), as after an abort, rather than leave an open attempt
   * that the next call must read as possibly delivered (a lookup first, or AmbiguousOutcomeError).
   * `client.close()` keeps the store open for it (see `unsentSettled`), as this call waits for it, at
   * most `LET_GO_WAIT_MS`; past that (a store slow to acknowledge) the attempt stays open, reconciled
   * first by the next call. Then the call rejects with the close's reason.
   */
  private async closedUnsent(owned: OwnedRecord, deadline: CallDeadline): Promise<never> {
    const reason = this.closed.reason as StoreError;
    const id = owned.rec.id;
    trackAbandon(this, id, this.abandon(owned, reason), this.opts.now() + this.opts.leaseMs);
    await awaitAbandon(this, id, deadline.signal, LET_GO_WAIT_MS).catch(() => undefined);
    throw reason;
  }

  /** Sends one attempt, renewing the lease while it is on the wire. */
  private async sendWithLease(owned: OwnedRecord, spec: OperationSpec, deadline: CallDeadline, attempt: number): Promise<AttemptOutcome> {
    const timeout = deadline.attemptSignal(this.opts.retry.attemptTimeoutMs);
    let given: AttemptOutcome | void = undefined;
    try {
      // A transport or effect that ignores its signal still ends the attempt at its timeout (ambiguous).
      const ctx: AttemptContext = { scope: spec.scope, key: owned.rec.key, attempt, signal: timeout.signal, abandoned: undefined };
      return await this.leased(owned, () => untilAborted(spec.send(ctx), timeout.signal, () => (given = ctx.abandoned?.())));
    } catch (error) {
      // Given up: the outcome the adapter gave for how far it got, if it gave one.
      if (given !== undefined) return given;
      // Adapters classify their own failures; anything escaping them may have been sent.
      return { classification: classifyError(error, 'awaiting_response'), snapshot: null, live: error, cause: error };
    } finally {
      timeout.done();
    }
  }

  /** Runs `fn` while renewing the lease, so a slow send, lookup or settle wait keeps ownership. */
  private leased<T>(owned: OwnedRecord, fn: (lost: () => AbortSignal) => Promise<T>): Promise<T> {
    return owned.renewing(this.opts.leaseMs, fn, this.closed);
  }

  /**
   * After an ambiguous outcome: look up before any resend (DESIGN §2). `cause`: what the attempt that
   * left the record ambiguous ended with, when this call made it; the cause of an `AmbiguousOutcomeError`.
   * Returns the record an answer ("found", a cancel's settled "absent") made terminal: as written, or,
   * when the deadline cut that write off, as it would leave it (see `cutOff`); else undefined.
   */
  async reconcileOwned(owned: OwnedRecord, spec: OperationSpec, deadline: CallDeadline, cause?: unknown): Promise<OperationRecord | undefined> {
    const scope = spec.scope;
    /**
     * Writes `event` (`written`) under the deadline (see `within`): the record it leaves, or would leave
     * when cut off (see `cutOff`). `answer`: `written` is settle's, tried again when it fails cut off (`behind`).
     */
    const record = async (event: RecordEvent, written: Promise<OperationRecord>, answer = false): Promise<OperationRecord> => {
      const late = deadline.passed !== undefined;
      const landed = await this.within(owned, deadline, written, true, answer ? event : undefined);
      return landed === CUT ? this.cutOff(owned, deadline, event, late) : landed;
    };
    const lookup = async (): Promise<ReconcileOutcome> => {
      const asked = lookupOf(spec, owned.rec);
      const outcome = await reconcile(asked, { scope, key: owned.rec.key, record: owned.rec, signal: deadline.signal });
      if (outcome.kind !== 'none') this.stats.lookups++;
      // name the lookup that was missing: client.run() never asks a registered one, nor does a minted ref
      else if (owned.rec.request === null) return { kind: 'none', detail: 'no spec.lookup given: client.run() asks no registered lookup' };
      else if (asked !== spec.lookup) return { kind: 'none', detail: 'the lookup registered for this action is not asked about a ref oncefetch minted (give once.ref)' };
      return outcome;
    };
    // This call's own attempt got a success whose write lost the lease (see `held`): the provider's own
    // answer for this key, first-hand proof of the effect. Unless a lookup finds it, the call records it
    // as a "found" would (the record succeeded, its snapshot, no send) and returns it: an "absent" cannot
    // settle a record with that late success on it, nor can "unknown"; a requested cancel came second
    // (DESIGN §8: delivery won). A record another owner ended (failed, cancelled) is not moved (`followed`).
    // Only under the key it was sent with: a record deleted and claimed afresh (a new key) is not answered
    // by a request under the old one, and its own attempts stay to be reconciled.
    const mine = this.held.get(deadline);
    const own = mine !== undefined && mine.key === owned.rec.key ? (mine.snapshot ?? undefined) : undefined;
    const settleOwn = async (result: ResultSnapshot): Promise<OperationRecord> => {
      const found: RecordEvent = { type: 'lookup_found', result, detail: "this call's own attempt got it; its write had lost the lease to another owner" };
      // (a StoreError reads "nothing was sent" unless it says otherwise: it says so)
      const rec = await record(found, this.settle(owned, found), true).catch((error: unknown) => {
        throw isA(error, StoreError) ? unrecorded(error, scope, `this call's request was sent${result.kind === 'value' ? '' : ` (answered ${result.status})`} and took effect, and that could not be recorded`) : error;
      });
      if (mine !== undefined) mine.recorded = rec;
      return rec;
    };
    const result = await this.leased(owned, async () => {
      // "Absent" soon after a send may only mean "not committed yet": trust it only when it was asked
      // after the attempt can no longer take effect; otherwise wait until then and ask again (unless a
      // resend with the same key would be deduplicated).
      const askedAt = this.opts.now();
      const askedGeneration = owned.rec.generation;
      const first = await lookup();
      // (a record no longer ambiguous: see below; no settle wait for an answer that cannot apply)
      // (and no settle wait for a call that holds its success: an "absent" settles nothing then)
      if (first.kind !== 'absent' || owned.rec.state !== 'ambiguous' || own !== undefined) return { ...first, settled: true, askedGeneration };
      // Settled against the record as it is now: a superseded owner's late response that landed
      // during the lookup moves the window (settledAt counts from it).
      const current = (await untilAborted(this.opts.store.get(owned.rec.id), deadline.signal)) ?? owned.rec;
      const settleAt = settledAt(current, this.opts.settleMs, this.opts.now());
      if (askedAt >= settleAt) return { ...first, settled: true, askedGeneration };
      // A provider that dedupes (and still remembers the key) makes an early "absent" enough for a same-key
      // resend, but not for a requested cancel: that one needs proof that nothing was delivered.
      // Nor for a key conflict or a terminal answer on a resend, never resent: the "absent" must prove that nothing was delivered.
      if (this.trustsDedupe(owned.rec) && owned.rec.cancelRequestedAt === null && !answerUnsettled(owned.rec)) return { ...first, settled: false, askedGeneration };
      const waitMs = Math.max(0, settleAt - this.opts.now());
      if (waitMs > deadline.remaining(this.opts.now())) {
        throw await this.stop(owned, unlessAmbiguous(owned.rec, new DeadlineExceededError(`the lookup of ${text(scope)} said absent, but the attempt may still take effect for ${waitMs} ms, past the deadline; the record stays ambiguous`, { scope })), deadline);
      }
      await sleep(waitMs, deadline.signal);
      const again = owned.rec.generation;
      return { ...(await lookup()), settled: true, askedGeneration: again };
    });
    this.emit({ type: 'lookup', scope, at: this.opts.now(), outcome: result.kind });
    // The record moved back to pending under our lease meanwhile (a renewal picked it up): the owner
    // of the open attempt that made it ambiguous closed it as never sent (`never_sent`). The answer
    // settles an ambiguity that is gone and no longer applies (lookup_* and resend_after_ambiguous
    // are refused outside `ambiguous`): the record decides, as after any move (the step sends).
    if (owned.rec.state !== 'ambiguous') return undefined;
    switch (result.kind) {
      case 'found': {
        const found: RecordEvent = { type: 'lookup_found', result: result.snapshot, detail: result.detail };
        return record(found, this.settle(owned, found), true).catch((error: unknown) => {
          // Its write lost the lease to another owner (not refused on a record that moved under ours: a
          // never_sent closed the attempt): the call follows (see `run`) holding this proof of the effect as
          // it holds its own success (`held`), so that an "absent" a later owner wrote (a lookup not caught
          // up) does not clear the record for its send.
          if (isA(error, LeaseLostError) && error.current.lease?.owner !== owned.owner && !this.held.has(deadline)) this.held.set(deadline, { snapshot: result.snapshot, key: owned.rec.key, live: undefined });
          throw isA(error, StoreError) ? unrecorded(error, scope, 'its lookup found the effect (it took effect) and that could not be recorded') : error;
        });
      }
      case 'absent': {
        const absent: RecordEvent = { type: 'lookup_absent', detail: result.detail, settled: result.settled, askedGeneration: result.askedGeneration };
        const rec = await record(absent, owned.commit(absent));
        if (isTerminal(rec.state)) {
          // a key conflict on a resend that this "absent" let stand: counted here, whichever call settles it
          if (rec.error?.code === 'IDEMPOTENCY_CONFLICT') this.conflictStood(rec);
          return rec;
        }
        if (owned.rec.state === 'ambiguous') {
          // The record refused the "absent": a superseded owner's late success says it was delivered
          // (stop), or a late response was written after the question was asked (ask again: this commit
          // brought the record up to date, so the next answer is compared with it).
          if (!lateSuccess(owned.rec)) return undefined;
          if (own !== undefined) return settleOwn(own);
          // (this call's own success, see `held`, not kept as a snapshot: it is the superseded owner)
          const who = mine !== undefined ? 'this call, its lease taken over,' : 'a superseded owner';
          throw await this.stop(owned, new AmbiguousOutcomeError(`the lookup of ${text(scope)} said absent, but ${who} got a success for it late; not resent. Reconcile it by hand.`, { scope }), deadline);
        }
        return undefined;
      }
      case 'unknown':
      case 'none': {
        if (own !== undefined) return settleOwn(own);
        const trusted = this.trustsDedupe(owned.rec);
        // A requested cancel withdrew the authority to send: a resend could make the very effect it stops.
        const cancelled = owned.rec.cancelRequestedAt !== null;
        // This call's own attempt got a success it could not record (see `held`): never run again.
        const held = this.held.has(deadline);
        // A same-key resend was refused (as key reuse, or a terminal answer): resending again cannot settle it, and an earlier attempt may have taken effect.
        const refused = answerUnsettled(owned.rec);
        const last = owned.rec.attempts.at(-1);
        if (trusted && !cancelled && !held && !refused) {
          const resend: RecordEvent = { type: 'resend_after_ambiguous', detail: `${result.detail}; the provider dedupes by key` };
          await record(resend, owned.commit(resend));
          return undefined;
        }
        const why = cancelled
          ? 'a cancel was requested'
          : held
            ? "this call's effect resolved (it took effect), but another owner took the operation over before its success was recorded (it is kept as evidence)"
            : refused && last?.class === 'conflict'
            ? `the provider refused a same-key resend as key reuse with other content (${last.reason ?? 'key conflict'}): it saw this key before, so an earlier attempt reached it and may have taken effect`
            : refused
            ? `the provider refused a same-key resend (${last?.reason ?? 'a terminal answer'}), which says nothing of an earlier attempt that may have taken effect`
            : !trusted && this.opts.providerDedupes
            ? this.keyAged(owned.rec)
            : 'the provider does not dedupe';
        const error = new AmbiguousOutcomeError(
          `the outcome of ${text(scope)} is unknown (${result.detail}) and ${why}; not resent. It may have taken effect: reconcile it with a lookup, or check at the provider before sending this intent under a new ref.`,
          { scope, cause: result.kind === 'unknown' ? result.error : cause },
        );
        // (a note: a store that fails it must not turn the AmbiguousOutcomeError into a StoreError)
        if (result.kind === 'unknown') {
          const note = owned.commit({ type: 'lookup_unknown', detail: result.detail }).catch((failure: unknown) => {
            if (!(failure instanceof StoreError)) throw failure;
          });
          if ((await this.within(owned, deadline, note)) === CUT) throw error;
        }
        throw await this.stop(owned, error, deadline);
      }
    }
  }
}

/** The start of a `reconcile_first`'s detail. */
const DEDUPE_ONLY = "an earlier attempt may have been delivered and only a provider's dedupe cleared it for a resend; ";

/**
 * A StoreError of a write after the send (an attempt's outcome, a lookup's "found"), `what` saying what
 * was sent and not recorded: a bare one reads as "nothing was sent". Same class (LateOutcomeNotKeptError
 * stays one), its fields kept, its cause the store's own (a pg or SQLite error), as before.
 */
function unrecorded(error: StoreError, scope: Scope, what: string): StoreError {
  const late = isA(error, LateOutcomeNotKeptError);
  return new (late ? LateOutcomeNotKeptError : StoreError)(
    `${error.message}; ${what}: ${late ? 'reconcile it (its lookup, client.recover()) before anything else' : 'call again with the same ref'}, never a new one`,
    { cause: error.cause, scope: error.scope ?? scope, purged: error.purged },
  );
}

/** The error of a call that holds its attempt's success unrecorded (see `Engine.held`), the owner that took over having `did` so. */
function heldSuccess(scope: Scope, did: string): AmbiguousOutcomeError {
  return new AmbiguousOutcomeError(
    `${text(scope)}: this call's effect resolved (it took effect), but another owner took the operation over before its success was recorded and ${did}; ` +
      'not sent again. The success is kept on the record as evidence: reconcile it with a lookup or by hand.',
    { scope },
  );
}

function exhausted(rec: OperationRecord, c: Classification, maxAttempts: number, cause: unknown, thrown: unknown): Error & { code: string } {
  const scope = scopeOf(rec);
  // By the record, not the last class: a lookup may have settled an ambiguous attempt as absent.
  if (rec.state === 'ambiguous') {
    return new AmbiguousOutcomeError(`${maxAttempts} attempts used and the last outcome of ${text(scope)} is ambiguous (${c.reason}); not resent. It may have taken effect: call again with the same ref (it is reconciled first, never resent blind), or check at the provider before sending this intent under a new ref`, { scope, cause });
  }
  return new RetriesExhaustedError(`${maxAttempts} attempts used for ${text(scope)}, last: ${c.reason}; the record stays resumable${unsure(rec)}`, { scope, attempts: maxAttempts, retryAfterMs: c.retryAfterMs, cause: thrown });
}

/**
 * What a resumable stop adds when an earlier attempt may have acted (a same-key resend cleared by the
 * provider's dedupe only, a 409 "in progress"): a caller (a job queue's dead-letter handler) must not
 * read "resumable" as "nothing happened" and send it again under a new ref.
 */
const unsure = (rec: OperationRecord): string => (rec.state === 'pending' && deliveryUnresolved(rec) ? UNSURE : '');
/** The reason `nap` aborts its sleep with when `cutShort` ends it: never thrown. */
const CUT_SHORT: unique symbol = Symbol('cut short');
const UNSURE = '; an earlier attempt may have taken effect: call again with the same ref, never a new one';

/**
 * The deadline's own error (not the caller's abort), "the record stays resumable", by `rec` as the call
 * leaves it (the abandon's stop leaves its state as it is). Ambiguous (the deadline passed while an
 * attempt was on the wire, or after one whose outcome is unknown): an `AmbiguousOutcomeError`, its cause
 * the deadline's error, as every stop that leaves the record ambiguous says (`unlessAmbiguous`). Pending
 * with an attempt that may have taken effect: it says so, as a resumable stop does (`unsure`). Else
 * undefined: the reason stands.
 */
function deadlineEnd(rec: OperationRecord, deadline: CallDeadline): Error | undefined {
  const passed = deadline.passed;
  if (passed === undefined || deadline.signal.reason !== passed) return undefined;
  if (rec.state === 'ambiguous') return unlessAmbiguous(rec, passed);
  return unsure(rec) === '' ? undefined : new DeadlineExceededError(`${passed.message}${UNSURE}`, { scope: scopeOf(rec), cause: passed });
}

/**
 * By the record, not the reason for stopping: a call that stops while its last attempt's outcome is
 * unknown says so (`AmbiguousOutcomeError`, the reason as its cause), as `exhausted` does.
 */
function unlessAmbiguous(rec: OperationRecord, error: Error & { code: string }): Error & { code: string } {
  if (rec.state !== 'ambiguous') return error;
  // (the reason's own "the record stays resumable" is not so: the record is ambiguous; the cause keeps it whole)
  return new AmbiguousOutcomeError(`${error.message.replace(/; the record stays resumable$/, '')}; the last outcome is ambiguous (it may have taken effect): not resent. Call again with the same ref (never a new one), which reconciles it first, or let recover() reconcile it`, {
    scope: scopeOf(rec),
    cause: error,
  });
}

/**
 * A cancelled operation's error. A call that met an earlier cancel (a replay, or a call that joined the
 * cancelled one: React StrictMode's second effect run after the first one's cleanup aborted `once.signal`)
 * is told that the ref stays cancelled, and that nothing was delivered (what `cancelled` means), so a new ref is safe.
 */
function cancelledError(scope: Scope, earlier: boolean, sent = false): OperationCancelledError {
  const op = `operation ${scope.tenant}/${scope.action}/${scope.ref}`;
  return new OperationCancelledError(
    earlier
      ? `${op} was cancelled earlier, with nothing delivered; a cancelled ref stays cancelled and is not sent again: to send it now, use a new ref`
      : // (sent: a cancel requested while an attempt was out, which took no effect: a 503, or a settled "absent")
        `${op} was cancelled ${sent ? 'after its attempts, with nothing delivered' : 'before it was sent'}`,
    { scope },
  );
}

/** `value instanceof C`, false for a value whose prototype cannot be read (a caller's abort reason may be a revoked Proxy). */
function isA<T>(value: unknown, C: abstract new (...args: never[]) => T): value is T {
  try {
    return value instanceof C;
  } catch {
    return false;
  }
}

function text(scope: Scope): string {
  return `operation ${scope.tenant}/${scope.action}/${scope.ref}`;
}

function scopeOf(rec: OperationRecord): Scope {
  return { tenant: rec.tenant, action: rec.action, ref: rec.ref };
}

/**
 * The lookup `spec` asks about `record`: none where the registered one would be asked about a ref
 * oncefetch minted (`refMinted`: the provider never saw it, so a lookup by ref could only answer
 * "absent" for an effect that happened). The same rule as `recover()`'s and explain's.
 */
function lookupOf(spec: OperationSpec, record: OperationRecord): SnapshotLookup | undefined {
  return spec.lookupRegistered === true && refMinted(record) ? undefined : spec.lookup;
}
