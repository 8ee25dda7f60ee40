/**
 * Helpers for engine tests under fake timers (`vi.useFakeTimers` faking setTimeout, setInterval and
 * Date, not setImmediate): let real I/O (WebCrypto) and microtasks settle, step fake time, and watch
 * a call's promise without awaiting it.
 */
import { vi } from 'vitest';

/** Captured at import, before any test fakes the timers. */
const realSetImmediate = globalThis.setImmediate;

/** Lets real I/O (WebCrypto) and microtasks settle: 25 turns of the real event loop. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 25; i++) await new Promise<void>((resolve) => realSetImmediate(resolve));
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
