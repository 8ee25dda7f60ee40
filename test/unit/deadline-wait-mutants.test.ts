/**
 * Tests written to kill hand-made mutants of src/engine/deadline.ts and src/engine/wait.ts that
 * the engine suites let survive: when the end-of-call hooks fire after a caller's abort or the
 * deadline, how an attempt's signal follows the call's, and the bounds of the wait on an owner.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { CallDeadline } from '../../src/engine/deadline.js';
import { isOwned, waitWhileOwned } from '../../src/engine/wait.js';
import type { OperationRecord } from '../../src/operation/record.js';
import type { OnceStore } from '../../src/stores/contract.js';

const SCOPE = { tenant: 't', action: 'a', ref: 'r' };
const T0 = 1_000_000;

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('CallDeadline.whenEnded', () => {
  /** Asks `deadline.whenEnded(fn, graceMs)` now: `fn` has not run `ms` - 1 ms later, and has run once at `ms`. */
  function expectFiresIn(deadline: CallDeadline, graceMs: number, ms: number): void {
    const fn = vi.fn();
    deadline.whenEnded(fn, graceMs);
    vi.advanceTimersByTime(ms - 1);
    expect(fn).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fn).toHaveBeenCalledTimes(1);
  }

  it('asked after the caller aborted: fires graceMs after the abort, not after the asking', () => {
    const user = new AbortController();
    const deadline = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    user.abort(new Error('caller'));
    vi.advanceTimersByTime(100);
    expectFiresIn(deadline, 500, 400);
    deadline.dispose();
  });

  it('asked after the caller aborted: fires at the end of the grace, long before the deadline', () => {
    const user = new AbortController();
    const deadline = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    user.abort(new Error('caller'));
    const fn = vi.fn();
    deadline.whenEnded(fn, 200);
    vi.advanceTimersByTime(200);
    expect(fn).toHaveBeenCalledTimes(1);
    deadline.dispose();
  });

  it('asked after the deadline passed: fires graceMs after it passed', () => {
    const deadline = new CallDeadline(1_000, Date.now(), SCOPE, undefined);
    vi.advanceTimersByTime(1_000);
    expect(deadline.passed).toBeDefined();
    vi.advanceTimersByTime(100);
    expectFiresIn(deadline, 500, 400);
    deadline.dispose();
  });

  it('asked after the deadline passed that followed a caller abort: grace counts from the abort', () => {
    const user = new AbortController();
    const deadline = new CallDeadline(1_000, Date.now(), SCOPE, user.signal);
    user.abort(new Error('caller'));
    vi.advanceTimersByTime(1_000);
    expect(deadline.passed).toBeDefined();
    expectFiresIn(deadline, 1_500, 500);
    deadline.dispose();
  });
});

describe('CallDeadline.remaining', () => {
  it('is exactly the deadline less the time spent', () => {
    const deadline = new CallDeadline(1_000, T0, SCOPE, undefined);
    expect(deadline.remaining(T0)).toBe(1_000);
    expect(deadline.remaining(T0 + 999)).toBe(1);
    expect(deadline.remaining(T0 + 1_000)).toBe(0);
    deadline.dispose();
  });
});

describe('CallDeadline.attemptSignal', () => {
  it("aborts with the caller's reason when the caller aborts during the attempt", () => {
    const user = new AbortController();
    const deadline = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    const attempt = deadline.attemptSignal(30_000);
    const reason = new Error('caller');
    user.abort(reason);
    expect(attempt.signal.aborted).toBe(true);
    expect(attempt.signal.reason).toBe(reason);
    expect(attempt.timedOut()).toBe(false);
    attempt.done();
    deadline.dispose();
  });

  it('is aborted at once when the call was already aborted', () => {
    const user = new AbortController();
    const reason = new Error('caller');
    user.abort(reason);
    const deadline = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    const attempt = deadline.attemptSignal(30_000);
    expect(attempt.signal.aborted).toBe(true);
    expect(attempt.signal.reason).toBe(reason);
    attempt.done();
    deadline.dispose();
  });

  it('times out after its own timeout and says so', () => {
    const deadline = new CallDeadline(60_000, Date.now(), SCOPE, undefined);
    const attempt = deadline.attemptSignal(100);
    vi.advanceTimersByTime(99);
    expect(attempt.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(attempt.signal.aborted).toBe(true);
    expect(attempt.timedOut()).toBe(true);
    attempt.done();
    deadline.dispose();
  });
});

describe('calls sharing one caller signal', () => {
  it('one call disposed: the other still follows the shared signal', () => {
    const user = new AbortController();
    const first = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    const second = new CallDeadline(60_000, Date.now(), SCOPE, user.signal);
    first.dispose();
    user.abort(new Error('shutdown'));
    expect(second.signal.aborted).toBe(true);
    expect(first.signal.aborted).toBe(false);
    second.dispose();
  });
});

function record(state: OperationRecord['state'], expiresAt: number | null): OperationRecord {
  return { state, lease: expiresAt === null ? null : { owner: 'o', expiresAt } } as unknown as OperationRecord;
}

describe('isOwned', () => {
  it('a lease expiring exactly now is not live', () => {
    expect(isOwned(record('in_flight', T0), T0)).toBe(false);
    expect(isOwned(record('in_flight', T0 + 1), T0)).toBe(true);
  });

  it('a finished record is not owned, whatever its lease', () => {
    expect(isOwned(record('succeeded', T0 + 60_000), T0)).toBe(false);
    expect(isOwned(record('failed', T0 + 60_000), T0)).toBe(false);
  });
});

describe('waitWhileOwned', () => {
  const storeOf = (get: () => Promise<OperationRecord | undefined>): OnceStore => ({ get }) as unknown as OnceStore;

  it('maxWaitMs 0: one read, no wait', async () => {
    const get = vi.fn(() => Promise.resolve(record('in_flight', T0 + 60_000)));
    const done = vi.fn();
    void waitWhileOwned(storeOf(get), 'id', { now: Date.now, random: () => 0.5, maxWaitMs: 0 }).then(done);
    await vi.advanceTimersByTimeAsync(5);
    expect(get).toHaveBeenCalledTimes(1);
    expect(done).toHaveBeenCalledTimes(1);
    expect((done.mock.calls[0] as [OperationRecord])[0].state).toBe('in_flight');
  });

  it('never sleeps past maxWaitMs', async () => {
    const get = vi.fn(() => Promise.resolve(record('in_flight', T0 + 60_000)));
    const done = vi.fn();
    void waitWhileOwned(storeOf(get), 'id', { now: Date.now, random: () => 0.99, maxWaitMs: 10 }).then(done);
    await vi.advanceTimersByTimeAsync(10);
    expect(done).toHaveBeenCalledTimes(1);
    expect(get).toHaveBeenCalledTimes(2);
  });

  it('a read that never answers is cut by the signal, with its reason', async () => {
    const controller = new AbortController();
    const get = vi.fn(() => new Promise<OperationRecord | undefined>(() => undefined));
    const rejected = vi.fn();
    waitWhileOwned(storeOf(get), 'id', { now: Date.now, random: () => 0.5, maxWaitMs: 10_000, signal: controller.signal }).catch(rejected);
    const reason = new Error('stop');
    controller.abort(reason);
    await vi.advanceTimersByTimeAsync(0);
    expect(rejected).toHaveBeenCalledWith(reason);
  });

  it('reads grow from about 25 ms to at most 1 s apart (no polling storm, no long blind spell)', async () => {
    const get = vi.fn(() => Promise.resolve(record('in_flight', T0 + 600_000)));
    const readsAt: number[] = [];
    const done = vi.fn();
    void waitWhileOwned(storeOf(get), 'id', { now: Date.now, random: () => 0.999, maxWaitMs: 10_000, onRead: () => readsAt.push(Date.now()) }).then(done);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(done).toHaveBeenCalledTimes(1);
    const gaps = readsAt.slice(1).map((at, i) => at - (readsAt[i] as number));
    expect(gaps[0]).toBeGreaterThanOrEqual(12);
    expect(gaps[0]).toBeLessThanOrEqual(25);
    for (let i = 1; i < gaps.length - 1; i++) expect(gaps[i]).toBeGreaterThanOrEqual(gaps[i - 1] as number);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(1_000);
    expect(gaps[gaps.length - 2]).toBeGreaterThanOrEqual(950);
    expect(readsAt.length).toBeLessThan(25);
  });
});
