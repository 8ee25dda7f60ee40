/**
 * One AbortSignal given to many calls at once (a service's shutdown signal, say). Measured in a soak
 * trial: at 32 concurrent calls each call's deadline added its own listener to that signal, and Node
 * printed "MaxListenersExceededWarning: Possible EventTarget memory leak detected. 11 abort listeners
 * added to [AbortSignal]" (fetch itself, given the same signal at the same concurrency, printed
 * nothing: undici raises the signal's limit). The listeners were removed when the calls ended, so
 * nothing leaked, but the warning reads as a leak. The calls' deadlines now share one listener per
 * signal, and an abort still ends every call with its reason.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

describe('one caller signal shared by many concurrent calls', () => {
  it('holds a bounded number of abort listeners on it, none once the calls end', async () => {
    const client = createClient({ store: memoryStore(), telemetry: false });
    const shared = new AbortController();
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    const calls = Array.from({ length: 32 }, (_, i) =>
      client.run({ action: 'a', ref: `r${i}`, signal: shared.signal }, async () => {
        started++;
        await gate;
        return i;
      }),
    );
    for (let i = 0; i < 100 && started < 32; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toBe(32);
    expect(getEventListeners(shared.signal, 'abort').length).toBeLessThanOrEqual(2);
    release();
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 32 }, (_, i) => i));
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(0);
    await client.close();
  });

  it("still ends every call with the signal's reason when it aborts", async () => {
    const client = createClient({ store: memoryStore(), telemetry: false });
    const shared = new AbortController();
    let started = 0;
    const calls = Array.from({ length: 12 }, (_, i) =>
      client
        .run({ action: 'b', ref: `r${i}`, signal: shared.signal }, ({ signal }) => {
          started++;
          return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }));
        })
        .catch((e: unknown) => e),
    );
    for (let i = 0; i < 100 && started < 12; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toBe(12);
    const reason = new Error('shutting down');
    shared.abort(reason);
    const errors = await Promise.all(calls);
    // each call ends by the caller's abort (its reason, or the error that reports the unknown outcome with it)
    for (const e of errors) expect(e === reason || (e as { cause?: unknown }).cause === reason || (e as { code?: string }).code === 'AMBIGUOUS_OUTCOME').toBe(true);
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(0);
    await client.close();
  });
});
