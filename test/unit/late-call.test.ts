/**
 * A call kept for the next attempt (src/engine/late-call.ts), through `client.run`: the attempt that
 * gave its call up never reads its outcome; the next attempt does, once, so the caller's classify is
 * asked once for it. (That a call rejecting at its abort is not waited for, whatever the clock read
 * meanwhile: test/e2e/late-fetch.test.ts, through client.fetch.) Fake timers.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import { advance, settleUntil, track } from '../helpers/fake-clock.js';

const SPEC = { action: 'charge', ref: 'late-call-1', payload: { amount: 500 } };

describe('an effect call kept for the next attempt', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it("the attempt that gave its call up does not read its outcome: the caller's classify is asked once for it", async () => {
    let calls = 0;
    const classified: unknown[] = [];
    // ignores its signal; fails at 1.2 s, after its attempt timed out (1 s), before the next attempt (after settleMs)
    const effect = (): Promise<never> => {
      calls++;
      return new Promise((_resolve, reject) => setTimeout(() => reject(Object.assign(new Error('card declined'), { status: 402 })), 1_200));
    };
    const client = createClient({ store: memoryStore(), random: () => 0, settleMs: 500, retry: { budget: false, attemptTimeoutMs: 1_000, maxAttempts: 3, deadlineMs: 60_000 } });
    const call = track(
      client.run({ ...SPEC, lookup: async () => null, classify: (error) => (classified.push(error), 'terminal') }, effect),
    );
    // (the call starts after the client's first, real-time, telemetry import: fake time waits for it)
    await settleUntil(() => calls > 0, 'the effect to be called');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    expect(call.state()).toBe('rejected');
    expect((call.reason() as Error).message).toBe('card declined');
    expect(calls).toBe(1);
    expect(classified).toHaveLength(1);
  });
});
