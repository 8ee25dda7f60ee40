/**
 * A terminal answer that is the late answer of the earlier attempt's own request (a call that
 * ignored its signal, see late-call.ts), not an answer to a resend: the next attempt sends nothing
 * and reports it. It settles that attempt (refused: no effect), so the record ends `failed` at once,
 * as a terminal answer to a first attempt does; terminal-on-resend.test.ts's rule (a refused resend
 * says nothing of the earlier attempt) does not apply to it. An attempt before that one that may
 * have acted still keeps it ambiguous. Fake timers; effects counted at a fake provider.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions, RunContext } from '../../src/index.js';
import { advance, settleUntil, track } from '../helpers/fake-clock.js';

const SPEC = { action: 'charge', ref: 'late-401', payload: { amount: 500 } };

/** Each call: `plan[i]` — after ms, reject with the status given (0: resolve, an effect). Ignores its signal. */
function provider(plan: { ms: number; status: number }[]) {
  let calls = 0;
  let effects = 0;
  const effect = (_ctx: RunContext): Promise<{ id: string }> => {
    const { ms, status } = plan[calls++] ?? { ms: 0, status: 0 };
    return new Promise((resolve, reject) =>
      setTimeout(() => {
        if (status === 0) resolve({ id: `ch_${++effects}` });
        else reject(Object.assign(new Error(`refused with ${status}`), { status }));
      }, ms),
    );
  };
  return { effect, calls: () => calls, effects: () => effects };
}

function makeClient(options: OnceClientOptions) {
  return createClient({ store: memoryStore(), random: () => 0, settleMs: 500, ...options, retry: { budget: false, attemptTimeoutMs: 1_000, baseDelayMs: 10, maxDelayMs: 10, ...options.retry } });
}

describe('a terminal answer that came late, the answer of the earlier attempt\'s own request', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it('client.run, providerDedupes, no lookup: the late 401 settles attempt 1: failed, its error thrown, the effect called once', async () => {
    const p = provider([{ ms: 3_000, status: 401 }]);
    const client = makeClient({ providerDedupes: true, retry: { maxAttempts: 3, deadlineMs: 60_000 } });
    const call = track(client.run(SPEC, p.effect));
    await settleUntil(() => p.calls() > 0, 'the effect called');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    expect(p.calls()).toBe(1);
    expect(call.state()).toBe('rejected');
    expect(call.reason()).toMatchObject({ status: 401, message: 'refused with 401' });
    const record = await client.get(SPEC);
    // attempt 1 timed out, its call still out; attempt 2 (a resend the dedupe cleared) waited for it and timed out
    // too, sending nothing; attempt 3 took its late 401
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['ambiguous:null', 'ambiguous:null', 'terminal:401']);
    expect(record?.state).toBe('failed');
    const x = await client.explain(SPEC);
    expect(x?.diagnosis.code).toBe('terminal_client_error');
    await client.close();
  });

  it('client.fetch, a custom fetch that ignores its signal, providerDedupes, no lookup: the late 401 is returned, the record failed, one request', async () => {
    let requests = 0;
    // never contacted: the custom fetch answers, 3 s after the request, without its signal
    const deaf: typeof fetch = () => {
      requests++;
      return new Promise((resolve) => setTimeout(() => resolve(new Response('{"error":"invalid api key"}', { status: 401, headers: { 'content-type': 'application/json' } })), 3_000));
    };
    const client = makeClient({ providerDedupes: true, fetch: deaf, retry: { maxAttempts: 3, deadlineMs: 60_000 } });
    const scope = { action: 'create-order', ref: 'late-fetch-401' };
    const call = track(client.fetch('http://127.0.0.1:9/orders', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sku":"a"}', once: scope }));
    await settleUntil(() => requests > 0, 'the request sent');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    expect(requests).toBe(1);
    expect(call.state()).toBe('resolved');
    expect(call.value()?.status).toBe(401);
    const record = await client.get(scope);
    expect(record?.attempts.at(-1)).toMatchObject({ class: 'terminal', status: 401 });
    expect(record?.state).toBe('failed');
    await client.close();
  });

  it('control: an attempt before the late one that may have acted (a 500) still keeps the record ambiguous', async () => {
    const p = provider([
      { ms: 0, status: 500 },
      { ms: 3_000, status: 401 },
    ]);
    const client = makeClient({ providerDedupes: true, retry: { maxAttempts: 4, deadlineMs: 60_000 } });
    const call = track(client.run(SPEC, p.effect));
    await settleUntil(() => p.calls() > 0, 'the effect called');
    for (let i = 0; i < 100 && call.state() === 'pending'; i++) await advance(100);
    expect(p.calls()).toBe(2);
    expect(call.state()).toBe('rejected');
    expect(call.reason()).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const record = await client.get(SPEC);
    expect(record?.attempts.map((a) => `${a.class}:${a.status}`)).toEqual(['ambiguous:500', 'ambiguous:null', 'ambiguous:null', 'terminal:401']);
    expect(record?.state).toBe('ambiguous');
    await client.close();
  });
});
