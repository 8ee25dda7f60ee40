/**
 * One deadline per call, spanning every attempt, wait and lookup; and the
 * per-attempt timeout under it. Both are abort signals combined with the
 * caller's, so that a caller's abort rejects with its own `reason`.
 *
 * @module
 */
import { longTimeout } from '../backoff/sleep.js';
import { DeadlineExceededError } from '../errors.js';
import type { ScopeLabel } from '../errors.js';

/** The time budget of one call. */
export class CallDeadline {
  readonly signal: AbortSignal;
  readonly deadlineAt: number;
  private readonly controller = new AbortController();
  private readonly cancelTimer: () => void;
  private readonly unlinkUser: () => void;
  /** the error the deadline ends the call with, once it has passed (whoever aborted the signal first) */
  private expired: DeadlineExceededError | undefined;
  /** when it passed (Date.now(), which fake timers move with setTimeout) */
  private expiredAt = 0;
  /** when the caller's abort ended the call, before the deadline passed (Date.now()); 0 until then */
  private abortedAt = 0;
  /** called when the call ends (see {@link whenEnded}); made on first use */
  private hooks: Hook[] | undefined;

  constructor(deadlineMs: number, now: number, scope: ScopeLabel, userSignal: AbortSignal | undefined) {
    this.deadlineAt = now + deadlineMs;
    this.cancelTimer = longTimeout(() => {
      this.expired = new DeadlineExceededError(`deadline of ${deadlineMs} ms passed for ${label(scope)}; the record stays resumable`, {
        scope,
      });
      this.expiredAt = Date.now();
      this.controller.abort(this.expired);
      const hooks = this.hooks;
      this.hooks = undefined;
      for (const hook of hooks ?? []) {
        clearTimeout(hook.timer);
        hook.fn();
      }
    }, deadlineMs);
    this.signal = this.controller.signal;
    this.unlinkUser = userSignal === undefined ? noop : this.followCaller(userSignal);
  }

  /**
   * Aborts the call's signal with the caller's reason when `userSignal` aborts (the first abort wins,
   * as with `AbortSignal.any`), and notes when: the hooks then fire after their grace (see
   * {@link whenEnded}). One listener, no timer until the abort.
   */
  private followCaller(userSignal: AbortSignal): () => void {
    const onAbort = (): void => {
      if (this.controller.signal.aborted) return;
      this.abortedAt = Date.now();
      this.controller.abort(userSignal.reason);
      for (const hook of this.hooks ?? []) this.arm(hook);
    };
    if (userSignal.aborted) {
      onAbort();
      return noop;
    }
    return shareListener(userSignal, onAbort);
  }

  /** After the caller's abort: fires `hook` at the end of its grace, unless the deadline or `unhook` comes first. */
  private arm(hook: Hook): void {
    hook.timer = setTimeout(() => {
      const i = this.hooks?.indexOf(hook) ?? -1;
      if (i === -1) return;
      this.hooks?.splice(i, 1);
      hook.fn();
    }, Math.max(0, this.abortedAt + hook.graceMs - Date.now()));
  }

  /**
   * The deadline's own error once it has passed, else undefined: the deadline, not the caller's
   * abort (after which the deadline still passes, and says so here).
   */
  get passed(): DeadlineExceededError | undefined {
    return this.expired;
  }

  /**
   * Calls `fn` once when the call ends: when the deadline passes, or `graceMs` after the caller's
   * abort (whichever comes first); asked once the deadline has passed, `graceMs` after it passed (or
   * after the abort, if earlier). Unless the returned function is called first. While the call is
   * live, no timer or AbortController of its own: the deadline's timer calls it, and the caller's
   * abort starts its grace timer.
   */
  whenEnded(fn: () => void, graceMs: number): () => void {
    if (this.expired !== undefined) {
      const from = this.abortedAt === 0 ? this.expiredAt : Math.min(this.expiredAt, this.abortedAt);
      const timer = setTimeout(fn, Math.max(0, from + graceMs - Date.now()));
      return () => clearTimeout(timer);
    }
    const hook: Hook = { fn, graceMs, timer: undefined };
    const hooks = (this.hooks ??= []);
    hooks.push(hook);
    if (this.abortedAt !== 0) this.arm(hook);
    return () => {
      clearTimeout(hook.timer);
      const i = hooks.indexOf(hook);
      if (i !== -1) hooks.splice(i, 1);
    };
  }

  /** Milliseconds left before the deadline. */
  remaining(now: number): number {
    return this.deadlineAt - now;
  }

  /** A signal that also aborts after `timeoutMs` (one attempt); call `done` when the attempt ends. */
  attemptSignal(timeoutMs: number): { signal: AbortSignal; timedOut: () => boolean; done: () => void } {
    const controller = new AbortController();
    let fired = false;
    const cancelTimer = longTimeout(() => {
      fired = true;
      controller.abort(new DOMException(`attempt timed out after ${timeoutMs} ms`, 'TimeoutError'));
    }, timeoutMs);
    const unlink = follow(this.signal, controller);
    return {
      signal: controller.signal,
      timedOut: () => fired,
      done: () => {
        cancelTimer();
        unlink();
      },
    };
  }

  dispose(): void {
    this.cancelTimer();
    this.unlinkUser();
  }
}

const noop = (): void => undefined;

/** A function {@link CallDeadline.whenEnded} calls when the call ends; its grace timer once the caller aborted. */
interface Hook {
  fn: () => void;
  graceMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** The calls' `onAbort`s by caller signal, under one listener on it (see {@link shareListener}). */
const followers = new WeakMap<AbortSignal, { fns: Set<() => void>; listener: () => void }>();

/**
 * Calls `onAbort` when `signal` aborts, until the returned function unhooks it. The calls that share
 * one signal (a service's shutdown signal) share one listener on it: a listener each warned on Node
 * past 10 concurrent calls (MaxListenersExceededWarning, "Possible EventTarget memory leak"), where
 * fetch given the same signal does not.
 */
function shareListener(signal: AbortSignal, onAbort: () => void): () => void {
  let shared = followers.get(signal);
  if (shared === undefined) {
    const fns = new Set<() => void>();
    const listener = (): void => {
      followers.delete(signal);
      for (const fn of fns) fn();
    };
    shared = { fns, listener };
    followers.set(signal, shared);
    signal.addEventListener('abort', listener, { once: true });
  }
  const entry = shared;
  entry.fns.add(onAbort);
  return () => {
    if (!entry.fns.delete(onAbort) || entry.fns.size > 0 || followers.get(signal) !== entry) return;
    followers.delete(signal);
    signal.removeEventListener('abort', entry.listener);
  };
}

/**
 * Aborts `target` with `source`'s reason (the first abort wins, as with
 * `AbortSignal.any`) until the returned function unlinks them. A listener
 * costs well under a microsecond; `AbortSignal.any` costs ~10 µs and weak
 * references per call on Node 20, twice per call on the hot path.
 */
function follow(source: AbortSignal, target: AbortController): () => void {
  if (source.aborted) {
    target.abort(source.reason);
    return noop;
  }
  const onAbort = (): void => target.abort(source.reason);
  source.addEventListener('abort', onAbort, { once: true });
  return () => source.removeEventListener('abort', onAbort);
}

function label(scope: ScopeLabel): string {
  return `operation ${scope.tenant}/${scope.action}/${scope.ref}`;
}
