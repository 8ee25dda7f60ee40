import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { MAX_TIMER_MS, longTimeout, sleep, untilAborted } from '../../src/backoff/sleep.js';

/** Tracks settlement without awaiting. */
function track(promise: Promise<void>): { state: () => 'pending' | 'resolved' | 'rejected'; reason: () => unknown } {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let reason: unknown;
  promise.then(
    () => {
      state = 'resolved';
    },
    (error: unknown) => {
      state = 'rejected';
      reason = error;
    },
  );
  return { state: () => state, reason: () => reason };
}

describe('sleep', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it.each([1, 250, 30_000])('resolves only after %i ms have passed', async (ms) => {
    const tracked = track(sleep(ms));
    await vi.advanceTimersByTimeAsync(ms - 1);
    expect(tracked.state()).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(tracked.state()).toBe('resolved');
    expect(vi.getTimerCount()).toBe(0);
  });

  it.each([0, -5])('ms = %i resolves on the next macrotask, not synchronously', async (ms) => {
    const tracked = track(sleep(ms));
    await Promise.resolve();
    expect(tracked.state()).toBe('pending');
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(tracked.state()).toBe('resolved');
  });

  it('rejects with the exact signal.reason on abort and clears the timer', async () => {
    const controller = new AbortController();
    const reason = { why: 'user cancelled' };
    const promise = sleep(10_000, controller.signal);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(500);
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects with the default AbortError reason when aborted without one', async () => {
    const controller = new AbortController();
    const promise = sleep(1000, controller.signal);
    controller.abort();
    await expect(promise).rejects.toBe(controller.signal.reason);
    await expect(promise).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('rejects immediately, without a timer, for an already-aborted signal', async () => {
    const reason = new Error('gone');
    const tracked = track(sleep(1000, AbortSignal.abort(reason)));
    expect(vi.getTimerCount()).toBe(0);
    await Promise.resolve();
    expect(tracked.state()).toBe('rejected');
    expect(tracked.reason()).toBe(reason);
  });

  it('removes its abort listener once resolved', async () => {
    const controller = new AbortController();
    const remove = vi.spyOn(controller.signal, 'removeEventListener');
    const promise = sleep(100, controller.signal);
    await vi.advanceTimersByTimeAsync(100);
    await expect(promise).resolves.toBeUndefined();
    expect(remove).toHaveBeenCalledWith('abort', expect.any(Function));
    controller.abort(new Error('late'));
  });

  it('never fires early for waits beyond the platform timer limit', async () => {
    const limit = 2 ** 31 - 1;
    const tracked = track(sleep(limit + 1000));
    await vi.advanceTimersByTimeAsync(limit);
    expect(tracked.state()).toBe('pending');
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(tracked.state()).toBe('resolved');
  });

  it('clears a chained timer on abort', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const promise = sleep(2 ** 31 + 5000, controller.signal);
    await vi.advanceTimersByTimeAsync(2 ** 31);
    controller.abort(reason);
    await expect(promise).rejects.toBe(reason);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('rejects NaN with a RangeError', async () => {
    await expect(sleep(Number.NaN)).rejects.toThrow(RangeError);
  });
});

describe('longTimeout', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('waits the whole time beyond the platform timer limit (setTimeout alone fires after 1 ms)', () => {
    const fired: number[] = [];
    longTimeout(() => fired.push(Date.now()), 3e9);
    const start = Date.now();
    vi.advanceTimersByTime(MAX_TIMER_MS);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(3e9 - MAX_TIMER_MS - 1);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([start + 3e9]);
  });

  it('cancels, in any chunk', () => {
    let fired = 0;
    const cancel = longTimeout(() => fired++, 3e9);
    vi.advanceTimersByTime(MAX_TIMER_MS + 10);
    cancel();
    vi.advanceTimersByTime(3e9);
    expect(fired).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('untilAborted', () => {
  it('settles as the promise does while the signal is quiet', async () => {
    const signal = new AbortController().signal;
    await expect(untilAborted(Promise.resolve(7), signal)).resolves.toBe(7);
    const boom = new Error('boom');
    await expect(untilAborted(Promise.reject(boom), signal)).rejects.toBe(boom);
  });

  it('rejects with the reason, at once, when the signal aborts first; a later outcome is ignored', async () => {
    const controller = new AbortController();
    let settle!: (v: number) => void;
    const raced = untilAborted(new Promise<number>((r) => (settle = r)), controller.signal);
    const reason = new Error('deadline');
    controller.abort(reason);
    await expect(raced).rejects.toBe(reason);
    settle(1);
    await expect(untilAborted(Promise.resolve(2), controller.signal)).rejects.toBe(reason); // already aborted
  });
});
