/**
 * The lease is renewed while an attempt is on the wire and while recover() waits on a lookup, and a
 * store error on one renewal does not end the renewals: only a lost lease does. A recover() that
 * stops while it holds a record releases it. Memory store, fake timers; effects are counted as calls
 * of the injected fetch.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AmbiguousOutcomeError, REPLAYED_HEADER, createClient, memoryStore } from '../../src/index.js';
import type { LookupContext, OnceClientOptions, OnceStore } from '../../src/index.js';
import { OwnedRecord } from '../../src/engine/owned.js';
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { OperationRecord } from '../../src/operation/record.js';
import { advance, settleUntil, track } from '../helpers/fake-clock.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'L-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };
const created = (): Response => new Response('{"id":"o-1"}', { status: 201 });

/** A memory store whose compare-and-sets fail (a store blip) while `failWhen` says so. */
function flaky() {
  const inner = memoryStore();
  let failWhen = (_next: OperationRecord): boolean => false;
  const failed: OperationRecord[] = [];
  const store: OnceStore = {
    name: 'flaky',
    claim: (r) => inner.claim(r),
    get: (id) => inner.get(id),
    compareAndSet: async (id, g, next) => {
      if (failWhen(next)) {
        failed.push(next);
        throw new Error('store blip');
      }
      return inner.compareAndSet(id, g, next);
    },
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  return { store, failed, fail: (when: (next: OperationRecord) => boolean) => void (failWhen = when) };
}

/** A fetch whose answers the test hands out; counts calls. */
function heldFetch() {
  const pending: ((r: Response) => void)[] = [];
  let calls = 0;
  const fetch = ((): Promise<Response> => {
    calls++;
    return new Promise<Response>((resolve) => pending.push(resolve));
  }) as typeof globalThis.fetch;
  return { fetch, calls: () => calls, answer: (r: Response) => pending.shift()?.(r) };
}

function makeClient(store: OnceStore, fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  return createClient({ store, fetch, now: () => Date.now(), random: () => 0.5, leaseMs: 300, ...options, retry: { budget: false, ...options.retry } });
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

describe('lease renewal during a send', () => {
  it('one renewal the store fails does not stop the next ones: the lease holds through a long send, a second client waits and replays, one effect', async () => {
    const { store, failed, fail } = flaky();
    const provider = heldFetch();
    const a = makeClient(store, provider.fetch, { owner: 'a' });
    const first = track(a.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await settleUntil(() => provider.calls() > 0, 'the send on the wire');
    expect(provider.calls()).toBe(1);
    // the first renewal (at 100 ms, a third of leaseMs) fails; the ones after it are let through
    fail((next) => next.lease?.owner === 'a' && failed.length === 0);
    await advance(1_000); // three times leaseMs on the wire
    expect(failed).toHaveLength(1);
    const held = await store.get(JSON.stringify(['default', SCOPE.action, SCOPE.ref]));
    expect(held?.lease?.owner).toBe('a');
    expect(held?.lease?.expiresAt).toBeGreaterThan(Date.now());
    // another process on the same store waits for the live lease instead of taking the record over
    const b = makeClient(store, provider.fetch, { owner: 'b', inFlightWaitMs: 10_000 });
    const second = track(b.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await advance(200);
    expect(second.state()).toBe('pending');
    provider.answer(created());
    await advance(2_000);
    expect(first.state()).toBe('resolved');
    expect(first.value()?.status).toBe(201);
    expect(second.state(), String(second.reason())).toBe('resolved');
    expect(second.value()?.status).toBe(201);
    expect(second.value()?.headers.get(REPLAYED_HEADER)).toBe('true');
    expect(provider.calls()).toBe(1);
  });
});

describe('recover() holds its lease while it waits on a lookup, and releases it when it stops', () => {
  /** An ambiguous record left by a 500 that nothing settled (no lookup, provider does not dedupe). */
  async function ambiguousRecord(store: OnceStore, fetch: ReturnType<typeof heldFetch>) {
    const original = makeClient(store, fetch.fetch, { owner: 'a' });
    const call = track(original.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await settleUntil(() => fetch.calls() > 0, 'the send on the wire');
    expect(fetch.calls()).toBe(1);
    fetch.answer(new Response('oops', { status: 500 }));
    await advance(20);
    expect(call.reason()).toBeInstanceOf(AmbiguousOutcomeError);
    expect(await original.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null });
    return original;
  }

  /** A lookup that answers when the test says so. */
  function heldLookup() {
    const pending: ((r: Response | null) => void)[] = [];
    let asked = 0;
    const lookup = (_ctx: LookupContext): Promise<Response | null> => {
      asked++;
      return new Promise((resolve) => pending.push(resolve));
    };
    return { lookup, asked: () => asked, answer: (r: Response | null) => pending.shift()?.(r) };
  }

  it('a lookup slower than leaseMs: the lease is renewed, another client waits for it and replays what the lookup found', async () => {
    const { store } = flaky();
    const provider = heldFetch();
    await ambiguousRecord(store, provider);
    const slow = heldLookup();
    const recovering = makeClient(store, provider.fetch, { owner: 'r', lookups: { [SCOPE.action]: slow.lookup } });
    const report = track(recovering.recover());
    await advance(20);
    expect(slow.asked()).toBe(1);
    await advance(1_000);
    const held = await recovering.get(SCOPE);
    expect(held?.lease?.owner).toBe('r/recover');
    expect(held?.lease?.expiresAt).toBeGreaterThan(Date.now());
    const b = makeClient(store, provider.fetch, { owner: 'b', inFlightWaitMs: 10_000, lookups: { [SCOPE.action]: async () => null } });
    const call = track(b.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await advance(200);
    expect(call.state()).toBe('pending');
    slow.answer(created());
    await advance(2_000);
    expect(report.value()).toMatchObject({ resolved: [{ ref: SCOPE.ref }], errors: [] });
    expect(call.state(), String(call.reason())).toBe('resolved');
    expect(call.value()?.status).toBe(201);
    expect(provider.calls()).toBe(1);
  });

  it('aborted during the lookup: recover() rejects with the reason and releases the record, so the next call does not wait leaseMs', async () => {
    const { store } = flaky();
    const provider = heldFetch();
    const original = await ambiguousRecord(store, provider);
    const slow = heldLookup();
    const recovering = makeClient(store, provider.fetch, { owner: 'r', leaseMs: 60_000, lookups: { [SCOPE.action]: slow.lookup } });
    const controller = new AbortController();
    const report = track(recovering.recover({ signal: controller.signal }));
    await advance(20);
    expect(slow.asked()).toBe(1);
    const reason = new Error('startup budget spent');
    controller.abort(reason);
    await advance(20);
    expect(report.reason()).toBe(reason);
    expect(await original.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null });
  });

  it("the record moves on under recover()'s lease during the lookup (its crashed owner closes an attempt it never sent): recover() releases it", async () => {
    const { store } = flaky();
    // A opened attempt a1 and never handed it to the transport; its lease ran out long ago.
    const opened = applyEvent(
      newRecord({ scope: { tenant: 'default', ...SCOPE }, key: 'k-1', keySource: 'minted', fingerprint: 'f'.repeat(64), request: { method: 'POST', url: URL_ORDERS }, owner: 'A', now: Date.now() - 120_000, leaseMs: 300, retentionMs: 86_400_000 }),
      { type: 'attempt_started', attemptId: 'a1' },
      Date.now() - 120_000,
      'A',
    );
    await store.claim(opened);
    const provider = heldFetch();
    const slow = heldLookup();
    const recovering = makeClient(store, provider.fetch, { owner: 'r', leaseMs: 60_000, lookups: { [SCOPE.action]: slow.lookup } });
    const report = track(recovering.recover());
    await advance(20);
    expect(slow.asked()).toBe(1);
    // A's late close of its unsent attempt lands under recover()'s lease: the record is pending again
    await new OwnedRecord(opened, store, 'A', () => Date.now()).commit({ type: 'never_sent', attemptId: 'a1', reason: 'aborted before it was sent' }).catch(() => undefined);
    expect(await recovering.get(SCOPE)).toMatchObject({ state: 'pending', lease: { owner: 'r/recover' } });
    slow.answer(null);
    await advance(20);
    // (reported absent since 9034b99: the record itself proves nothing was sent)
    expect(report.value()).toMatchObject({ absent: [{ ref: SCOPE.ref }], errors: [] });
    expect(await recovering.get(SCOPE)).toMatchObject({ state: 'pending', lease: null });
    expect(provider.calls()).toBe(0);
  });

  it('a store error after the lookup: reported, and the lease released (best effort) rather than held for leaseMs', async () => {
    const { store, fail } = flaky();
    const provider = heldFetch();
    const original = await ambiguousRecord(store, provider);
    const recovering = makeClient(store, provider.fetch, {
      owner: 'r',
      leaseMs: 60_000,
      lookups: {
        [SCOPE.action]: async () => {
          throw new Error('orders index unavailable');
        },
      },
    });
    let blips = 0;
    fail((next) => next.lease?.owner === 'r/recover' && next.evidence.at(-1)?.kind === 'lookup' && blips++ === 0);
    const report = track(recovering.recover());
    await advance(20);
    expect(blips).toBe(1);
    expect(report.value()).toMatchObject({ errors: [{ message: 'flaky: compareAndSet failed: store blip' }] });
    expect(await original.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: null });
  });
});
