/**
 * Helpers for engine tests under fake timers (`vi.useFakeTimers` faking setTimeout, setInterval and
 * Date, not setImmediate): let real I/O and microtasks settle, step fake time, wait for a state that
 * real work leads to, and watch a call's promise without awaiting it.
 */
import { vi } from 'vitest';

/** Captured at import, before any test fakes the timers. */
const realSetImmediate = globalThis.setImmediate;
const realNow = performance.now.bind(performance);

/** Lets real I/O and microtasks settle: 25 turns of the real event loop. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 25; i++) await new Promise<void>((resolve) => realSetImmediate(resolve));
}

/**
 * Lets real I/O settle, without moving fake time, until `check` holds; throws once `realMs` of real
 * time passed. For a state that real work leads to, which no fixed number of turns is sure to reach
 * under CPU load: a client's first call waits for its `import('@opentelemetry/api')` (the Node
 * entry's tracing), whose first load in a vitest worker goes through the main process and took
 * from ~1 000 to over 5 000 turns of the event loop on a loaded machine. Wait here for the call to
 * reach the effect before advancing fake time: fake time advanced before then is not the call's.
 */
export async function settleUntil(check: () => boolean, what: string, realMs = 10_000): Promise<void> {
  const end = realNow() + realMs;
  while (!check()) {
    if (realNow() > end) throw new Error(`not reached after ${realMs} ms of real time: ${what}`);
    await settle();
  }
}

/** Advances fake time by `ms` in 10 ms steps, letting real I/O settle in between. */
export async function advance(ms: number): Promise<void> {
  for (let t = 0; t < ms; t += 10) {
    await settle();
    await vi.advanceTimersByTimeAsync(10);
  }
  await settle();
}

/** Tracks a promise without awaiting it (and keeps its rejection handled). */
export function track<T>(promise: Promise<T>) {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let value: T | undefined;
  let reason: unknown;
  promise.then(
    (v) => ((state = 'resolved'), (value = v)),
    (e: unknown) => ((state = 'rejected'), (reason = e)),
  );
  return { state: () => state, value: () => value, reason: () => reason };
}
