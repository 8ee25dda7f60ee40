/**
 * The call's deadline bounds the store writes after a send too (the answer's, a lookup's answer's,
 * the stop's). When the deadline passes while one is pending, the call ends then with what it would
 * have got had the write landed: the answer in hand (a 201, a terminal 400, a lookup's "found"), or
 * the typed error (AmbiguousOutcomeError when the outcome is unknown, DeadlineExceededError when the
 * record would be resumable). The write goes on in the background: later calls of the client wait
 * for it (until the lease's end), and nothing is ever sent a second time for it: the record still
 * says "attempt started", which the next owner reconciles (lookup) or reports ambiguous.
 *
 * Before this, a write that never answered held the call for good (measured: still pending after
 * 3 s with `deadlineMs: 400`, for a 201, a 500, a 400 and a 503 alike); one answering after 2 s held
 * it 2 s.
 *
 * The store stands for a fleet's PostgreSQL where one connection went dark (partition, failover):
 * the writes given a step in `plan.steps` never answer (`'hang'`: never applied, as a statement lost
 * on a dead connection) or answer after so many ms (applied then); every other store call goes
 * through (test/helpers/scripted-store.ts). Effects are counted at a loopback provider that does not dedupe (every POST is a new
 * order), so a second send would show as a second effect.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore, OperationRecord } from '../../src/index.js';
import { Engine } from '../../src/engine/execute.js';
import { onceFetch } from '../../src/engine/fetch-operation.js';
import { resolveOptions } from '../../src/options.js';
import { recordId } from '../../src/operation/record.js';
import type { Fault, Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed as timedFor } from '../helpers/keyless-provider.js';
import { armedClient, scripted } from '../helpers/scripted-store.js';
import { lookupByRef, orderInit, until, wait } from '../helpers/setup.js';

const ACTION = 'create-order';
const DEADLINE_MS = 400;
/** how late past the deadline a call may end on this shared 2-core machine and still count as "at the deadline" */
const SLACK_MS = 250;

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

/** A client whose transport arms the store once an answer is back from the provider: the writes after the send. */
const clientOn = (store: OnceStore, arm: { armed: boolean } | undefined, options: OnceClientOptions = {}): OnceClient => armedClient(store, arm, options, { deadlineMs: DEADLINE_MS, cleanups });

function order(client: OnceClient, ref: string, withLookup = false): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(withLookup ? { lookup: lookupByRef(provider.url) } : {}) } });
}

/** How a call ended and when: its status or its error, or `pending` when it had not ended after `capMs`. */
const timed = (call: Promise<Response>, capMs = 3_000): ReturnType<typeof timedFor> => timedFor(call, capMs);

/** Ended at the deadline, not before it (the write really was pending) and not long after. */
function atDeadline(ms: number): void {
  expect(ms).toBeGreaterThanOrEqual(DEADLINE_MS - 5);
  expect(ms).toBeLessThan(DEADLINE_MS + SLACK_MS);
}

const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;
const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });

describe('an answer in hand whose write never answers: the call ends at its deadline with that answer', () => {
  it('201: the 201 Response (body readable) at the deadline; the record still says attempt started; another owner reconciles, never resends', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = ['hang'];
    const ref = 'DS-201';
    const a = clientOn(store, plan);
    const first = await timed(order(a, ref));
    expect(first.outcome).toBe('201');
    atDeadline(first.ms);
    expect(await (first.value as Response).json()).toMatchObject({ ref });
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight', attempts: [{ finishedAt: null }] });
    // Another owner, once A's lease has expired (A cannot renew it: its write holds the record's queue):
    // the attempt may have been delivered, no lookup, no dedupe: AmbiguousOutcomeError, nothing sent.
    await wait(350);
    const b = await timed(order(clientOn(store, undefined, { owner: 'b' }), ref));
    expect(b.outcome).toBe('AmbiguousOutcomeError');
    // With a lookup: found, the provider's order is the answer; still nothing sent.
    const c = await timed(order(clientOn(store, undefined, { owner: 'c' }), ref, true));
    expect(c.outcome).toBe('200');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null });
  });

  it('the same client calls again at once: it waits for the pending write (its deadline ends it, nothing sent); after the lease it reconciles, never sends', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = ['hang'];
    const ref = 'DS-same';
    const a = clientOn(store, plan, { leaseMs: 1_000 });
    const first = await timed(order(a, ref));
    expect(first.outcome).toBe('201');
    atDeadline(first.ms);
    // A's own lease still runs: the call waits for A's write, as for any write of this client given up on
    const again = await timed(order(a, ref));
    expect(again.outcome).toBe('DeadlineExceededError');
    atDeadline(again.ms);
    await until(async () => ((await inner.get(idOf(ref)))?.lease?.expiresAt ?? 0) < Date.now());
    // past the lease: the record is taken over (A's own name), found in flight: ambiguous, reconciled first
    expect((await timed(order(a, ref))).outcome).toBe('AmbiguousOutcomeError');
    expect((await timed(order(a, ref, true))).outcome).toBe('200');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a terminal 400: the 400 at the deadline', async () => {
    const { store, plan } = scripted(memoryStore());
    plan.steps['attempt_finished:terminal'] = ['hang'];
    const ref = 'DS-400';
    provider.fault({ kind: 'status_before_commit', status: 400, match: { ref } });
    const first = await timed(order(clientOn(store, plan), ref));
    expect(first.outcome).toBe('400');
    atDeadline(first.ms);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });

  it("a lookup's \"found\" whose write never answers: the found order at the deadline", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['lookup:found'] = ['hang'];
    const ref = 'DS-found';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const first = await timed(order(clientOn(store, plan), ref, true));
    expect(first.outcome).toBe('200');
    atDeadline(first.ms);
    expect(await (first.value as Response).json()).toMatchObject({ ref });
    expect(plan.held).toEqual(['lookup:found']);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'ambiguous' });
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('an outcome that settles nothing, whose write never answers: the typed error at the deadline', () => {
  it('500 (the order was made): AmbiguousOutcomeError at the deadline, its cause the DeadlineExceededError; never resent', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:ambiguous'] = ['hang'];
    const ref = 'DS-500';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const first = await timed(order(clientOn(store, plan), ref));
    expect(first.outcome).toBe('AmbiguousOutcomeError');
    atDeadline(first.ms);
    expect((first.value as AmbiguousOutcomeError).cause).toBeInstanceOf(DeadlineExceededError);
    await wait(350);
    expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('AmbiguousOutcomeError');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('503 (nothing done, the record would be resumable): DeadlineExceededError at the deadline; once the write lands the next call sends once', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:retryable'] = [1_000];
    const ref = 'DS-503';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '0', match: { ref } });
    const first = await timed(order(clientOn(store, plan), ref));
    expect(first.outcome).toBe('DeadlineExceededError');
    expect(first.value).toBeInstanceOf(DeadlineExceededError);
    atDeadline(first.ms);
    expect(sent(ref)).toBe(1);
    await until(async () => (await inner.get(idOf(ref)))?.lease === null);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'pending', error: { code: 'DEADLINE_EXCEEDED' } });
    expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('201');
    expect(sent(ref)).toBe(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('the deadline ends the attempt itself: recording that takes at most LET_GO_WAIT_MS (1 s) more', () => {
  for (const hang of ['attempt_finished:ambiguous', 'stop']) {
    it(`the provider answers after the deadline (the order made); the ${hang === 'stop' ? 'stop' : "attempt's outcome"} is never recorded: AmbiguousOutcomeError (cause the DeadlineExceededError) 1 s after the deadline; never resent`, async () => {
      const inner = memoryStore();
      const { store, plan } = scripted(inner);
      plan.steps[hang] = ['hang'];
      const ref = `DS-cut-${hang === 'stop' ? 'stop' : 'outcome'}`;
      provider.fault({ kind: 'delay_after_commit', delayMs: 1_500, match: { ref } });
      const first = await timed(order(clientOn(store, plan), ref));
      // as when the write lands at once: the record ambiguous, so AmbiguousOutcomeError, its cause the deadline's error
      expect(first.outcome).toBe('AmbiguousOutcomeError');
      expect((first.value as AmbiguousOutcomeError).cause).toBeInstanceOf(DeadlineExceededError);
      expect(first.ms).toBeGreaterThanOrEqual(DEADLINE_MS + 1_000 - 5);
      expect(first.ms).toBeLessThan(DEADLINE_MS + 1_000 + SLACK_MS);
      expect(plan.held).toEqual([hang]);
      await wait(350);
      expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('AmbiguousOutcomeError');
      await until(() => provider.effectsFor(ref) === 1);
      expect(sent(ref)).toBe(1);
    });
  }
});

describe('a write that answers late (2 s): the call ends at the deadline; the write lands in the background', () => {
  it('201: once it lands the record is succeeded, its lease released; the next call replays it without the network', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [2_000];
    const ref = 'DS-late-201';
    const a = clientOn(store, plan);
    const first = await timed(order(a, ref));
    expect(first.outcome).toBe('201');
    atDeadline(first.ms);
    await until(async () => (await inner.get(idOf(ref)))?.state === 'succeeded');
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    const again = await order(clientOn(store, undefined, { owner: 'b' }), ref);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('500: once its write lands, the stop is recorded after it (ambiguous, the lease released, the error kept)', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:ambiguous'] = [2_000];
    const ref = 'DS-late-500';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const first = await timed(order(clientOn(store, plan), ref));
    expect(first.outcome).toBe('AmbiguousOutcomeError');
    atDeadline(first.ms);
    await until(async () => (await inner.get(idOf(ref)))?.lease === null);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'ambiguous', lease: null, error: { code: 'AMBIGUOUS_OUTCOME' } });
    expect(plan.log.slice(plan.log.indexOf('attempt_finished:ambiguous:2000'))).toEqual(['attempt_finished:ambiguous:2000', 'stop:ok']);
    expect(sent(ref)).toBe(1);
  });

  it('client.close() while the write is pending: resolves at once; nothing is written after it, also once the write lands', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:ambiguous'] = [500];
    const ref = 'DS-close';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const a = clientOn(store, plan);
    expect((await timed(order(a, ref))).outcome).toBe('AmbiguousOutcomeError');
    const closing = performance.now();
    await a.close();
    expect(performance.now() - closing).toBeLessThan(100);
    await wait(700); // the write has landed
    expect(plan.afterClose).toBe(0);
    expect(plan.log.at(-1)).toBe('attempt_finished:ambiguous:500');
    expect(sent(ref)).toBe(1);
  });
});

describe("the caller's classify throws: its own error, whether the outcome's write lands in time or the deadline cuts it off", () => {
  const fault = new Error("the caller's classify failed");
  const classify = (): never => {
    throw fault;
  };
  function faulty(client: OnceClient, ref: string): Promise<Response> {
    return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, classify } });
  }

  it('the write lands in time: that error, at once', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    const ref = 'DS-fault-landed';
    const first = await timed(faulty(clientOn(store, plan), ref));
    expect(first.value).toBe(fault);
    expect(first.ms).toBeLessThan(DEADLINE_MS);
    expect(sent(ref)).toBe(1);
  });

  // Before: DeadlineExceededError (attempts() took any error but a OnceError, once the signal was
  // aborted, for the abort), though cutOff() threw the fault and its doc said so.
  it('the write never answers: that error at the deadline, not DeadlineExceededError; never resent', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = ['hang'];
    const ref = 'DS-fault-cut';
    const first = await timed(faulty(clientOn(store, plan), ref));
    expect(first.value).toBe(fault);
    atDeadline(first.ms);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight' });
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe('a store that hangs for good under many refs: the writes left pending are not kept past their lease', () => {
  // Before: one `engine.abandoning` entry per ref (its promise chain, the record, the response
  // snapshot) until a later call of that ref, for as long as the store hangs: 30 after 3 waves of 10.
  it("engine.abandoning holds only the refs whose lease has not ended (the last wave's 10, not all 30)", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    const fetcher: typeof fetch = async (input, init) => {
      try {
        return await fetch(input, init);
      } finally {
        plan.armed = true;
      }
    };
    const options = { store, settleMs: 0, leaseMs: 1_000, fetch: fetcher, retry: { deadlineMs: DEADLINE_MS, baseDelayMs: 1, maxDelayMs: 5, budget: false as const } };
    const engine = new Engine(resolveOptions(options, { store: () => store, fetch: () => fetcher }));
    cleanups.push(() => engine.close());
    const sizes: number[] = [];
    for (let wave = 0; wave < 3; wave++) {
      const refs = Array.from({ length: 10 }, (_, i) => `DS-hung-${wave}-${i}`);
      (plan.steps['attempt_finished:success'] ??= []).push(...refs.map(() => 'hang' as const));
      const ended = await Promise.all(refs.map((ref) => timed(onceFetch(engine, `${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }))));
      expect(ended.map((e) => e.outcome)).toEqual(refs.map(() => '201'));
      sizes.push(engine.abandoning.size);
      await wait(700);
    }
    // a wave's writes are cut off at its deadline (400 ms), within their leases (1 s from the claim), which
    // have ended when the next wave's are cut off (1.1 s later): only the entries of a lease still running
    expect(sizes).toEqual([10, 10, 10]);
    expect(plan.held).toHaveLength(30);
    expect(provider.requests).toHaveLength(30);
  });
});

describe('writes that answer at once: unchanged', () => {
  it('a 201 recorded at once is returned at once, the record succeeded when the call returns', async () => {
    const inner = memoryStore();
    const { store } = scripted(inner);
    const ref = 'DS-fast';
    const first = await timed(order(clientOn(store, undefined), ref));
    expect(first.outcome).toBe('201');
    expect(first.ms).toBeLessThan(DEADLINE_MS / 2);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null } satisfies Partial<OperationRecord>);
  });
});

describe('the usual call gains no timer or AbortController for its writes after the send', () => {
  it('timers and AbortControllers made by one once-only fetch whose writes answer at once: as before this change', async () => {
    const made = { timeouts: 0, intervals: 0, controllers: 0 };
    const { setTimeout: realTimeout, setInterval: realInterval, AbortController: RealController } = globalThis;
    const ok = (async () => new Response('{"id":"o-1"}', { status: 201, headers: { 'content-type': 'application/json' } })) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch: ok, telemetry: false });
    cleanups.push(() => client.close());
    const call = (ref: string): Promise<Response> => client.fetch('https://api.example.test/orders', { ...orderInit(ref), once: { action: ACTION, ref } });
    await call('HP-warm');
    try {
      globalThis.setTimeout = ((...args: Parameters<typeof realTimeout>) => (made.timeouts++, realTimeout(...args))) as typeof realTimeout;
      globalThis.setInterval = ((...args: Parameters<typeof realInterval>) => (made.intervals++, realInterval(...args))) as typeof realInterval;
      globalThis.AbortController = class extends RealController {
        constructor() {
          super();
          made.controllers++;
        }
      };
      expect((await call('HP-1')).status).toBe(201);
    } finally {
      globalThis.setTimeout = realTimeout;
      globalThis.setInterval = realInterval;
      globalThis.AbortController = RealController;
    }
    // the deadline's timer and controller, the attempt's timeout and controller, the lease renewal during the send
    expect(made).toEqual(HOT_PATH_MADE);
  });
});

/** As counted at a2f3ee7, before the deadline bounded the writes after the send: nothing added since. */
const HOT_PATH_MADE = { timeouts: 2, intervals: 1, controllers: 2 };

export type { Fault };
