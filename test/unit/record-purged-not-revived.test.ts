/**
 * The owner's write-back of a record that vanished (src/engine/owned.ts `writeBack`) must not
 * resurrect a record that was taken over, finished and purged while the owner was paused.
 *
 * Client A owns an operation and is paused (its process asleep: the clock jumps) holding an answer
 * it has not written yet: a 503, "not processed". Its lease runs out; client B takes the record
 * over, reconciles (absent), sends under the same key (effect 1) and succeeds; the retention passes
 * and `purge()` removes the terminal record, as designed. A wakes and writes its 503: the record is
 * gone. A write-back there (as the first version of it did) re-inserted A's pending record, which A
 * then owned and sent again: a second effect, for an operation that succeeded, and a live record
 * again for a purged operation. A record is now written back only under a live lease of its owner:
 * A's write ends its call with "vanished while owned" (a StoreError), as before the write-back.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';

const DAY = 24 * 60 * 60 * 1_000;
const clients: OnceClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close({ waitMs: 0 });
});

describe('write-back after a legitimate purge', () => {
  it('a paused owner whose record was taken over, finished and purged does not write it back and send again', async () => {
    const store = memoryStore();
    let skew = 0;
    const now = (): number => Date.now() + skew;
    let effects = 0;
    const options = { store, now, random: () => 0, leaseMs: 60_000, retentionMs: DAY, retry: { budget: false, maxAttempts: 3, attemptTimeoutMs: 30_000, deadlineMs: 10 * DAY, baseDelayMs: 5 } } as const;
    const a = createClient({ ...options, owner: 'A' });
    const b = createClient({ ...options, owner: 'B' });
    clients.push(a, b);
    const spec = { action: 'charge', ref: 'R3-P1', payload: { amount: 500 }, lookup: async () => (effects > 0 ? { value: 'charged' } : null), classify: (e: unknown) => ((e as { status?: number }).status === 503 ? ('retryable' as const) : undefined) };

    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    let aCalls = 0;
    const first = a.run(spec, async () => {
      aCalls++;
      if (aCalls === 1) {
        // the provider said 503 (not processed); A pauses before it writes that down
        await answered;
        throw Object.assign(new Error('service unavailable'), { status: 503 });
      }
      effects++;
      return 'charged';
    });
    const firstSettled = first.then(
      (v) => ({ value: v }),
      (e: unknown) => ({ error: e }),
    );
    // (the effect runs once its attempt is recorded: wait for it, not for a fixed 50 ms, which a loaded machine overran)
    await vi.waitFor(() => expect(aCalls).toBe(1), { timeout: 5_000 });
    expect((await a.get({ action: 'charge', ref: 'R3-P1' }))?.state).toBe('in_flight');

    // A is asleep past its lease: B takes over, reconciles (absent), sends once, succeeds
    skew += 61_000;
    const byB = await b.run(spec, async () => {
      effects++;
      return 'charged';
    });
    expect(byB).toBe('charged');
    expect(effects).toBe(1);
    // the retention passes: the terminal record is purged, as designed
    skew += 2 * DAY;
    expect(await b.purge()).toBe(1);

    // A wakes and writes its 503
    answer();
    const outcome = await firstSettled;
    expect(effects).toBe(1);
    expect(aCalls).toBe(1);
    expect(await b.get({ action: 'charge', ref: 'R3-P1' })).toBeUndefined();
    // as before the write-back: the record vanished under an owner whose lease had run out
    expect('error' in outcome && (outcome.error as Error).name).toBe('StoreError');
  });
});
