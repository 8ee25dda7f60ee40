/**
 * The one abortable wait. The timer is kept so that an abort cancels it: an aborted
 * operation leaves no pending timer behind.
 *
 * @module
 */

/** setTimeout fires early (after 1 ms) beyond this, so longer waits are chained. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * `setTimeout` that waits the whole `ms`, also beyond the platform's timer limit (about 24.8
 * days: chained, never shortened). Returns the function that cancels it.
 *
 * @example
 * const cancel = longTimeout(() => controller.abort(), deadlineMs);
 */
export function longTimeout(fn: () => void, ms: number): () => void {
  let remaining = Math.max(0, ms);
  let timer: ReturnType<typeof setTimeout>;
  const arm = (): void => {
    const chunk = Math.min(remaining, MAX_TIMER_MS);
    remaining -= chunk;
    timer = setTimeout(remaining > 0 ? arm : fn, chunk);
  };
  arm();
  return () => clearTimeout(timer);
}

/**
 * Settles as `promise` does, or rejects with `signal.reason` as soon as `signal` aborts: code that
 * ignores its signal (a lookup, an effect, a custom fetch) cannot hold a call past its deadline.
 * What `promise` does afterwards is ignored; `gaveUp`, when given, is called then (synchronously, in
 * the abort's dispatch), so that the caller can take it over.
 *
 * @example
 * const snapshot = await untilAborted(lookup(ctx), ctx.signal);
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, gaveUp?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      gaveUp?.();
      reject(signal.reason);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Resolves after `ms` milliseconds. `ms <= 0` resolves on the next macrotask.
 *
 * If `signal` is or becomes aborted, rejects with `signal.reason` unchanged (the same
 * object, `===`) and clears the timer. Waits longer than the platform's timer limit
 * (about 24.8 days) are split, never shortened.
 *
 * @throws RangeError (as a rejection) when `ms` is NaN.
 *
 * @example
 * await sleep(250, AbortSignal.timeout(1_000));
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (Number.isNaN(ms)) return Promise.reject(new RangeError('sleep: ms must be a number, got NaN'));
  if (signal?.aborted === true) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    let remaining = Math.max(0, ms);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const arm = (): void => {
      const chunk = Math.min(remaining, MAX_TIMER_MS);
      remaining -= chunk;
      timer = setTimeout(() => {
        if (remaining > 0) {
          arm();
          return;
        }
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, chunk);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    arm();
  });
}
