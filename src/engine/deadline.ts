/**
 * One deadline per call, spanning every attempt, wait and lookup; and the
 * per-attempt timeout under it. Both are abort signals combined with the
 * caller's, so that a caller's abort rejects with its own `reason`.
 *
 * @module
 */
import { DeadlineExceededError } from '../errors.js';
import type { ScopeLabel } from '../errors.js';

/** The time budget of one call. */
export class CallDeadline {
  readonly signal: AbortSignal;
  readonly deadlineAt: number;
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout>;

  constructor(deadlineMs: number, now: number, scope: ScopeLabel, userSignal: AbortSignal | undefined) {
    this.deadlineAt = now + deadlineMs;
    this.timer = setTimeout(() => {
      this.controller.abort(
        new DeadlineExceededError(`deadline of ${deadlineMs} ms passed for ${label(scope)}; the record stays resumable`, {
          scope,
        }),
      );
    }, deadlineMs);
    this.signal = userSignal === undefined ? this.controller.signal : AbortSignal.any([userSignal, this.controller.signal]);
  }

  /** Milliseconds left before the deadline. */
  remaining(now: number): number {
    return this.deadlineAt - now;
  }

  /** A signal that also aborts after `timeoutMs` (one attempt); call `done` when the attempt ends. */
  attemptSignal(timeoutMs: number): { signal: AbortSignal; timedOut: () => boolean; done: () => void } {
    const controller = new AbortController();
    let fired = false;
    const timer = setTimeout(() => {
      fired = true;
      controller.abort(new DOMException(`attempt timed out after ${timeoutMs} ms`, 'TimeoutError'));
    }, timeoutMs);
    return {
      signal: AbortSignal.any([this.signal, controller.signal]),
      timedOut: () => fired,
      done: () => clearTimeout(timer),
    };
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}

function label(scope: ScopeLabel): string {
  return `operation ${scope.tenant}/${scope.action}/${scope.ref}`;
}
