/**
 * A `client.run` effect that ignores its signal (stripe-node takes none) goes on after its attempt
 * timed out: its request may leave, or commit, after the attempt "ended". In this process that is
 * known: nothing calls the effect again while an earlier call of it is still out, and what that
 * call settles with late is the outcome the next attempt reports. Effects are counted at a fake
 * provider that ignores keys; its lookup sees only committed effects. Fake timers.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions, RunContext } from '../../src/index.js';
import { advance, settleUntil, track } from '../helpers/fake-clock.js';

const SPEC = { action: 'charge', ref: 'late-1', payload: { amount: 500 } };

/** A provider that ignores keys: every call that commits is an effect. */
function provider(commitAfterMs: number[]) {
  const committed: string[] = [];
  let calls = 0;
  const effect = ({ key }: RunContext): Promise<{ id: string }> => {
    const ms = commitAfterMs[calls++] ?? 0;
    // ignores ctx.signal, as an SDK without abort support does; Infinity: never settles
    return new Promise((resolve) =>
      ms !== Infinity && setTimeout(() => {
        committed.push(key);
        resolve({ id: `ch_${committed.length}` });
      }, ms),
    );
  };
  const lookup = async ({ key }: { key: string }): Promise<{ value: { id: string } } | null> => {
    const i = committed.indexOf(key);
    return i === -1 ? null : { value: { id: `ch_${i + 1}` } };
  };
  return { effect, lookup, committed, calls: () => calls };
}

function makeClient(options: OnceClientOptions) {
  return createClient({ store: memoryStore(), random: () => 0, settleMs: 500, ...options, retry: { budget: false, attemptTimeoutMs: 1_000, ...options.retry } });
}

describe('client.run: an effect still out after its attempt timed out', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it('within one call: the next attempt waits for it and takes its late success, never a second effect', async () => {
    const p = provider([3_000, 0]);
    const client = makeClient({ retry: { maxAttempts: 3, deadlineMs: 60_000 } });
    const call = track(client.run({ ...SPEC, lookup: p.lookup }, p.effect));
    await settleUntil(() => p.calls() > 0, 'the effect called');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    await advance(5_000); // whatever is still out lands
    expect(p.committed).toHaveLength(1);
    expect(call.state()).toBe('resolved');
    expect(call.value()).toEqual({ id: 'ch_1' });
    expect(p.calls()).toBe(1);
    expect((await client.get(SPEC))?.state).toBe('succeeded');
  });

  it('across calls of one client: the next call does not run the effect again while the first is out', async () => {
    const p = provider([3_000, 0]);
    const client = makeClient({ retry: { maxAttempts: 1, deadlineMs: 10_000 } });
    const first = track(client.run({ ...SPEC, lookup: p.lookup }, p.effect));
    await settleUntil(() => p.calls() > 0, 'the effect called');
    for (let i = 0; i < 100 && first.state() === 'pending'; i++) await advance(100);
    expect(first.state()).toBe('rejected');
    expect(p.committed).toHaveLength(0); // still out
    const second = track(client.run({ ...SPEC, lookup: p.lookup }, p.effect));
    for (let i = 0; i < 100 && second.state() === 'pending'; i++) await advance(100);
    await advance(3_000);
    expect(p.committed).toHaveLength(1);
    expect(second.state()).toBe('resolved');
    expect(second.value()).toEqual({ id: 'ch_1' });
    expect(p.calls()).toBe(1);
  });

  it('an effect that never settles: no second call of it, whatever the lookup says', async () => {
    const p = provider([Infinity, 0]);
    const client = makeClient({ retry: { maxAttempts: 3, deadlineMs: 20_000 } });
    const call = track(client.run({ ...SPEC, lookup: p.lookup }, p.effect));
    await settleUntil(() => p.calls() > 0, 'the effect called');
    for (let i = 0; i < 300 && call.state() === 'pending'; i++) await advance(100);
    expect(p.committed).toHaveLength(0);
    expect(call.state()).toBe('rejected');
    expect(p.calls()).toBe(1);
    // and the next call of this client waits for it too
    const again = track(client.run({ ...SPEC, lookup: p.lookup }, p.effect));
    for (let i = 0; i < 300 && again.state() === 'pending'; i++) await advance(100);
    expect(again.state()).toBe('rejected');
    expect(p.calls()).toBe(1);
    expect(p.committed).toHaveLength(0);
  });

  it('an effect that honours its signal (rejects at the abort) is not waited for: the next attempt calls it again', async () => {
    const committed: string[] = [];
    let calls = 0;
    // the first call would commit at 3 s, the second at once; an abort stops a call before it commits
    const effect = ({ key, signal }: RunContext): Promise<{ id: string }> => {
      const ms = calls++ === 0 ? 3_000 : 0;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => (committed.push(key), resolve({ id: `ch_${committed.length}` })), ms);
        signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
      });
    };
    const lookup = async ({ key }: { key: string }): Promise<{ value: { id: string } } | null> => (committed.includes(key) ? { value: { id: 'ch_1' } } : null);
    const client = makeClient({ retry: { maxAttempts: 2, deadlineMs: 60_000 } });
    const call = track(client.run({ ...SPEC, lookup }, effect));
    await settleUntil(() => calls > 0, 'the effect called');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    expect(call.state()).toBe('resolved');
    expect(call.value()).toEqual({ id: 'ch_1' });
    expect(calls).toBe(2);
    expect(committed).toHaveLength(1);
  });

  it("an earlier operation's call still out is not taken for a new operation of the same scope (after a purge)", async () => {
    const store = memoryStore();
    let late: (() => void) | undefined;
    const a = makeClient({ store, retentionMs: 1_000, retry: { maxAttempts: 1, deadlineMs: 1_500 } });
    const first = track(a.run(SPEC, () => new Promise<string>((resolve) => (late = () => resolve('old operation')))));
    await settleUntil(() => late !== undefined, 'the effect called');
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(100);
    expect(first.state()).toBe('rejected');
    // another client settles it (its lookup finds it), and it is purged once past its retention
    const b = makeClient({ store });
    expect(await b.run({ ...SPEC, lookup: async () => ({ value: 'old operation' }) }, async () => 'never')).toBe('old operation');
    await advance(2_000);
    expect(await a.purge()).toBe(1);
    late?.();
    // a new operation of the same scope, with a new key: its effect runs
    let effects = 0;
    const again = track(a.run(SPEC, async () => (effects++, 'new operation')));
    for (let i = 0; i < 50 && again.state() === 'pending'; i++) await advance(100);
    expect(effects).toBe(1);
    expect(again.value()).toBe('new operation');
  });

  it("an earlier operation's call still out is not taken for a new operation with the same caller key and another payload (after a purge)", async () => {
    const store = memoryStore();
    let late: (() => void) | undefined;
    const a = makeClient({ store, retentionMs: 1_000, retry: { maxAttempts: 1, deadlineMs: 1_500 } });
    const first = track(a.run({ ...SPEC, key: 'order-7' }, () => new Promise<string>((resolve) => (late = () => resolve('charged 500')))));
    await settleUntil(() => late !== undefined, 'the effect called');
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(100);
    expect(first.state()).toBe('rejected');
    const b = makeClient({ store });
    expect(await b.run({ ...SPEC, key: 'order-7', lookup: async () => ({ value: 'charged 500' }) }, async () => 'never')).toBe('charged 500');
    await advance(2_000);
    expect(await a.purge()).toBe(1);
    late?.();
    // the caller reuses its key for another payload: the old call's value is not this operation's
    let effects = 0;
    const again = track(a.run({ ...SPEC, key: 'order-7', payload: { amount: 900 } }, async () => (effects++, 'charged 900')));
    for (let i = 0; i < 50 && again.state() === 'pending'; i++) await advance(100);
    expect(again.value()).toBe('charged 900');
    expect(effects).toBe(1);
  });

  it('a late outcome nobody took is let go: the client does not keep it once it settled and settleMs passed', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const client = makeClient({ retry: { maxAttempts: 1, deadlineMs: 10_000 } });
    let held: WeakRef<object> | undefined;
    let calls = 0;
    // ignores its signal, answers at 3 s: a large value the operation, ended ambiguous at 1 s, never returns
    const effect = (): Promise<object> => {
      calls++;
      return new Promise((resolve) =>
        setTimeout(() => {
          const value = { id: 'ch_1', blob: 'x'.repeat(1_000_000) };
          held = new WeakRef(value);
          resolve(value);
        }, 3_000),
      );
    };
    const first = track(client.run(SPEC, effect));
    await settleUntil(() => calls > 0, 'the effect called');
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(100);
    expect(first.state()).toBe('rejected');
    await advance(3_000); // it settles; settleMs (500) passes
    expect(held?.deref()).toBeDefined();
    await client.run({ ...SPEC, ref: 'other' }, async () => 'ok'); // the client goes on with other work
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(held?.deref()).toBeUndefined();
  });
});
