/**
 * What goes on in the background after the call's deadline (or its caller's abort) cut off a store
 * write after the send (bf5f710): the write and its follow-up (settle's tries, the lease's release)
 * must stop at `client.close()` and hold nothing open; the same client's later calls wait for it
 * while its lease is held; an answer in hand whose write fails is tried again; and never a second
 * send. Effects are counted at a loopback provider that does not dedupe (every POST is a new order).
 *
 * The store is a memory store whose compare-and-set, per write (named as `writeOf` names it), once
 * the provider has answered, follows a script: `ok`, `fail` (a StoreError at once, not applied),
 * `hang` (never answers), a positive number (applied after so many ms) or a negative one (fails,
 * not applied, after so many ms: a PostgreSQL query_timeout on a dead connection).
 */
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { armedClient, scripted } from '../helpers/scripted-store.js';
import { orderInit, until, wait } from '../helpers/setup.js';

const ACTION = 'create-order';
const DEADLINE_MS = 400;

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

/** A client whose transport arms the store's script once the provider has answered. */
const clientOn = (store: OnceStore, arm: { armed: boolean } | undefined, options: OnceClientOptions = {}): OnceClient => armedClient(store, arm, options, { deadlineMs: DEADLINE_MS, cleanups });

function order(client: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal === undefined ? {} : { signal }), once: { action: ACTION, ref } });
}

const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;
const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });

/** Runs `body` counting the intervals it starts that are still running when it returns. */
async function intervalsLeftBy(body: () => Promise<void>): Promise<number> {
  const live = new Set<unknown>();
  const { setInterval: realSet, clearInterval: realClear } = globalThis;
  globalThis.setInterval = ((...args: Parameters<typeof realSet>) => {
    const timer = realSet(...args);
    live.add(timer);
    return timer;
  }) as typeof realSet;
  globalThis.clearInterval = ((timer: Parameters<typeof realClear>[0]) => {
    live.delete(timer);
    realClear(timer);
  }) as typeof realClear;
  try {
    await body();
  } finally {
    globalThis.setInterval = realSet;
    globalThis.clearInterval = realClear;
  }
  for (const timer of live) realClear(timer as Parameters<typeof realClear>[0]);
  return live.size;
}

describe("client.close() while a cut-off answer's write is tried again in the background", () => {
  it('a try that never answers: close() leaves no lease-renewal timer running (it held the process open)', async () => {
    const { store, plan } = scripted(memoryStore());
    // settle: the first try fails, the next (under lease renewal) never answers; the deadline cuts it
    plan.steps['attempt_finished:success'] = ['fail', 'hang'];
    const ref = 'BG-close-hang';
    const left = await intervalsLeftBy(async () => {
      const a = clientOn(store, plan);
      const first = await timed(order(a, ref));
      expect(first.outcome).toBe('201');
      await a.close();
      await wait(300); // three ticks of the renewal timer (leaseMs / 3)
    });
    expect(left).toBe(0);
    expect(sent(ref)).toBe(1);
  });

  it('a try that fails after close(): the renewal queued behind it is not written to the closed store', async () => {
    const { store, plan } = scripted(memoryStore());
    plan.steps['attempt_finished:success'] = ['fail', -1_000];
    const ref = 'BG-close-late';
    const a = clientOn(store, plan);
    expect((await timed(order(a, ref))).outcome).toBe('201');
    await a.close();
    await wait(1_000);
    expect(plan.afterClose).toBe(0);
    expect(sent(ref)).toBe(1);
  });
});

describe("the caller's abort while a write after the send hangs: the call ends 1 s after the abort (LET_GO_WAIT_MS), not at its deadline", () => {
  const LONG_DEADLINE_MS = 4_000;
  const GRACE_MS = 1_000;
  /** how late past its mark a call may end on this shared 2-core machine */
  const SLACK_MS = 300;

  /** Aborts `controller` once the store has been asked for `label`; when. */
  async function abortAt(plan: { log: string[] }, label: string, controller: AbortController, reason: unknown): Promise<number> {
    await until(() => plan.log.some((l) => l.startsWith(`${label}:`)));
    controller.abort(reason);
    return performance.now();
  }

  it("201 whose write never answers: signal.reason 1 s after the abort (not the 201, not at the deadline); a call that joined it gets the 201; never resent", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = ['hang'];
    const ref = 'BG-abort-201';
    const a = clientOn(store, plan, { retry: { deadlineMs: LONG_DEADLINE_MS } });
    const controller = new AbortController();
    const reason = new Error('the caller gave up');
    const first = timed(order(a, ref, controller.signal));
    const joined = timed(order(a, ref));
    const abortedAt = await abortAt(plan, 'attempt_finished:success', controller, reason);
    const ended = await first;
    const endedAfterAbort = performance.now() - abortedAt;
    expect(ended.value).toBe(reason);
    expect(endedAfterAbort).toBeGreaterThanOrEqual(GRACE_MS - 5);
    expect(endedAfterAbort).toBeLessThan(GRACE_MS + SLACK_MS);
    const other = await joined;
    expect(other.outcome).toBe('201');
    expect((other.value as Response).headers.get('oncefetch-replayed')).toBe('true');
    expect(await (other.value as Response).json()).toMatchObject({ ref });
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight' });
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('503 whose write lands after 2 s: signal.reason 1 s after the abort; once the write lands the stop is recorded (ABORTED) and the next call sends once', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:retryable'] = [2_000];
    const ref = 'BG-abort-503';
    provider.fault({ kind: 'status_before_commit', status: 503, retryAfter: '0', match: { ref } });
    const a = clientOn(store, plan, { retry: { deadlineMs: LONG_DEADLINE_MS } });
    const controller = new AbortController();
    const first = timed(order(a, ref, controller.signal));
    const abortedAt = await abortAt(plan, 'attempt_finished:retryable', controller, 'stop');
    const ended = await first;
    const endedAfterAbort = performance.now() - abortedAt;
    expect(ended.value).toBe('stop');
    expect(endedAfterAbort).toBeGreaterThanOrEqual(GRACE_MS - 5);
    expect(endedAfterAbort).toBeLessThan(GRACE_MS + SLACK_MS);
    await until(async () => (await inner.get(idOf(ref)))?.lease === null);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'pending', error: { code: 'ABORTED' } });
    expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('201');
    expect(sent(ref)).toBe(2);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it("500, no lookup: the stop that records AmbiguousOutcomeError never answers: that error 1 s after the abort; never resent", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['stop'] = ['hang'];
    const ref = 'BG-abort-stop';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const a = clientOn(store, plan, { retry: { deadlineMs: LONG_DEADLINE_MS } });
    const controller = new AbortController();
    const first = timed(order(a, ref, controller.signal));
    const abortedAt = await abortAt(plan, 'stop', controller, 'stop');
    const ended = await first;
    const endedAfterAbort = performance.now() - abortedAt;
    // (decided before the abort: the call's own error stands, as when the stop lands)
    expect(ended.outcome).toBe('AmbiguousOutcomeError');
    expect(endedAfterAbort).toBeGreaterThanOrEqual(GRACE_MS - 5);
    expect(endedAfterAbort).toBeLessThan(GRACE_MS + SLACK_MS);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a write that lands within the grace is recorded, and the call returns its answer (unchanged)', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [500];
    const ref = 'BG-abort-grace';
    const a = clientOn(store, plan, { retry: { deadlineMs: LONG_DEADLINE_MS } });
    const controller = new AbortController();
    const first = timed(order(a, ref, controller.signal));
    const abortedAt = await abortAt(plan, 'attempt_finished:success', controller, 'stop');
    expect((await first).outcome).toBe('201');
    expect(performance.now() - abortedAt).toBeLessThan(500 + SLACK_MS);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null });
    expect(sent(ref)).toBe(1);
  });
});

describe("the same client calls again while the cut-off answer's write is still tried (its lease renewed)", () => {
  // Before: it waited only until the lease's end as it stood at the cut, then took its own record over
  // mid-settle: AmbiguousOutcomeError after 76 ms, the record left ambiguous, the 201 only evidence.
  it('it waits for that write, as another client waits for the lease, and replays the 201', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    // settle: the first try and the two after it fail at once (0 ms, then 100 ms later); the fourth, 400 ms
    // after the third, lands: about 500 ms after the 201, past the deadline (300 ms), within the second call's
    const ref = 'BG-same-client';
    plan.steps['attempt_finished:success'] = ['fail', 'fail', 'fail'];
    const a = clientOn(store, plan, { leaseMs: 100, retry: { deadlineMs: 300 } });
    const first = await timed(order(a, ref));
    expect(first.outcome).toBe('201');
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight' });
    const again = await timed(order(a, ref));
    expect(again.outcome).toBe('201');
    expect((again.value as Response).headers.get('oncefetch-replayed')).toBe('true');
    const record = await inner.get(idOf(ref));
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    expect(record?.evidence.filter((e) => e.kind === 'takeover' || e.kind === 'stop')).toEqual([]);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe("an answer in hand whose cut-off write fails for good (after settle's budget): settle's tries once more in the background, then the stop", () => {
  /** the write fails this long after it was asked (PostgreSQL's query_timeout on a connection a failover killed) */
  const SLOW_FAIL_MS = 1_500;

  it('201: the 201 at the deadline; its write fails after 1.5 s, the store is back: the record ends succeeded, the next call replays it', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [-SLOW_FAIL_MS];
    const ref = 'BG-again-201';
    const first = await timed(order(clientOn(store, plan), ref));
    expect(first.outcome).toBe('201');
    expect(first.ms).toBeLessThan(DEADLINE_MS + 250);
    await until(() => plan.log.filter((l) => l.startsWith('attempt_finished:success:')).length >= 2);
    await until(async () => (await inner.get(idOf(ref)))?.state !== 'in_flight');
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    expect(plan.log.filter((l) => l.startsWith('attempt_finished:success:'))).toEqual([`attempt_finished:success:${-SLOW_FAIL_MS}`, 'attempt_finished:success:ok']);
    const again = await timed(order(clientOn(store, undefined, { owner: 'b' }), ref));
    expect(again.outcome).toBe('201');
    expect((again.value as Response).headers.get('oncefetch-replayed')).toBe('true');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('a lookup\'s "found" whose write fails after 1.5 s: recorded on the next try; the record ends succeeded with the found order', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['lookup:found'] = [-SLOW_FAIL_MS];
    const ref = 'BG-again-found';
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const a = clientOn(store, plan);
    const { lookupByRef } = await import('../helpers/setup.js');
    const first = await timed(a.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, lookup: lookupByRef(provider.url) } }));
    expect(first.outcome).toBe('200');
    await until(async () => (await inner.get(idOf(ref)))?.state === 'succeeded');
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null, result: { status: 200 } });
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('the store still failing: one more round of tries (4 writes), then the stop, as before; nothing more later; never resent', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [-SLOW_FAIL_MS, 'fail', 'fail', 'fail', 'fail'];
    const ref = 'BG-again-down';
    expect((await timed(order(clientOn(store, plan), ref))).outcome).toBe('201');
    await until(async () => (await inner.get(idOf(ref)))?.lease === null, 5_000);
    await wait(1_000);
    expect(plan.log.filter((l) => l.startsWith('attempt_finished:success:'))).toHaveLength(5);
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight', error: { code: 'STORE_ERROR' } });
    expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('AmbiguousOutcomeError');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  // (close() without waitMs would wait for those tries while their lease runs: see test/e2e/close-graceful.test.ts)
  it('client.close({ waitMs: 0 }) during those tries: they stop, nothing is written after close()', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [-SLOW_FAIL_MS, 'fail', 'fail', 'fail', 'fail'];
    const ref = 'BG-again-close';
    const a = clientOn(store, plan);
    expect((await timed(order(a, ref))).outcome).toBe('201');
    await until(() => plan.log.filter((l) => l.startsWith('attempt_finished:success:')).length >= 2);
    await a.close({ waitMs: 0 });
    await wait(1_000);
    expect(plan.afterClose).toBe(0);
    expect(plan.log.filter((l) => l.startsWith('attempt_finished:success:')).length).toBeLessThanOrEqual(3);
    expect(sent(ref)).toBe(1);
  });

  it('another owner took the record over meanwhile: the try is refused, the 201 kept on its record as evidence, never overwriting it', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.steps['attempt_finished:success'] = [-SLOW_FAIL_MS];
    const ref = 'BG-again-taken';
    expect((await timed(order(clientOn(store, plan), ref))).outcome).toBe('201');
    await wait(400); // past A's lease
    expect((await timed(order(clientOn(store, undefined, { owner: 'b' }), ref))).outcome).toBe('AmbiguousOutcomeError');
    await until(async () => (await inner.get(idOf(ref)))?.evidence.some((e) => e.kind === 'late_response') === true);
    const record = await inner.get(idOf(ref));
    expect(record).toMatchObject({ state: 'ambiguous', result: null, lease: null });
    expect(record?.evidence.filter((e) => e.kind === 'late_response').map((e) => e.status)).toEqual([201]);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});

describe("a later call of the same client takes the record over after the lease really ended, while a cut-off answer's write is still tried", () => {
  // Before: settle's renewal, queued behind a try that failed after 700 ms, took the newer call's record
  // (same owner name, same attempts) for its own; settle's next try threw IllegalTransitionError, and the
  // stop the background work then wrote ("oncefetch bug: illegal transition") released the newer call's
  // lease mid-lookup: that call lost its lease and looked up a second time.
  it("the background tries stop quietly: the 201 kept as evidence, the newer call's lease never released, one lookup, never resent", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    // settle: the first try fails at once; the next (under renewal) fails after 450 ms, past the lease (300 ms)
    // and the deadline (400 ms); the renewals queue behind it, so the lease really ends
    plan.steps['attempt_finished:success'] = ['fail', -450];
    const ref = 'BG-same-owner';
    const a = clientOn(store, plan);
    const { lookupByRef } = await import('../helpers/setup.js');
    const find = lookupByRef(provider.url);
    let lookups = 0;
    const slowLookup = async (ctx: { scope: { ref: string }; signal: AbortSignal }): Promise<Response | null> => {
      lookups++;
      await wait(250); // the newer call holds the lease while A's background try fails and tries again
      return find(ctx);
    };
    const call = (): Promise<Response> =>
      a.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, lookup: slowLookup } });
    expect((await timed(call())).outcome).toBe('201');
    // the lease (300 ms from the claim, not renewed since the 201) has ended: the same client takes the record over
    const again = await timed(call());
    expect(again.outcome).toBe('200');
    await wait(500); // whatever the background work does next
    const record = await inner.get(idOf(ref));
    const texts = JSON.stringify(record);
    expect(texts).not.toContain('oncefetch bug');
    expect(record?.evidence.filter((e) => e.kind === 'stop')).toEqual([]);
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { status: 200 } });
    expect(record?.evidence.filter((e) => e.kind === 'late_response').map((e) => e.status)).toEqual([201]);
    expect(lookups).toBe(1);
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
