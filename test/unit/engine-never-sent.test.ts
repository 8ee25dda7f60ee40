/**
 * A late `never_sent` lands while another owner reconciles. A gave up on its claim (its deadline
 * passed while the write was pending); the claim landed, its lease expired, and B took the record
 * over (in_flight → ambiguous) and asked its lookup. Then A's abandon closes the attempt its claim
 * opened as never sent: the record is back to `pending`, under B's lease. Nothing was ever sent, so
 * B sends once, whatever its lookup answers (the ambiguity it asked about is gone), with or without
 * providerDedupes, and whether or not a lease renewal picked the `pending` record up before the
 * answer came. Fake clock, gated store and lookups; effects counted at the provider.
 *
 * Before the fix, when a renewal had picked it up, B's write of the answer was refused by the
 * record (lookup_* / resend_after_ambiguous apply to `ambiguous` only): the caller got an
 * `IllegalTransitionError` ("oncefetch bug"), the lease stayed held until it expired and the record
 * stayed `pending`.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions, OnceStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/operation/record.js';
import { advance, settleUntil, track } from '../helpers/fake-clock.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'N-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };
const UNSENT = 'aborted before it was sent';

/** A memory store that holds owner a's claim, and a's close of the attempt it opened, until the test opens them. */
function gated() {
  const inner = memoryStore();
  let claimsByA = 0;
  let openClaim!: () => void;
  const claimGate = new Promise<void>((r) => (openClaim = r));
  let openClose!: () => void;
  const closeGate = new Promise<void>((r) => (openClose = r));
  const closes = (next: OperationRecord): boolean => next.attempts.at(-1)?.owner === 'a' && next.attempts.at(-1)?.reason === UNSENT;
  const store: OnceStore = {
    name: 'gated',
    claim: async (r) => {
      if (r.lease?.owner === 'a') {
        claimsByA++;
        await claimGate;
      }
      return inner.claim(r);
    },
    compareAndSet: async (id, g, next) => {
      if (closes(next)) await closeGate;
      return inner.compareAndSet(id, g, next);
    },
    get: (id) => inner.get(id),
    list: (q) => inner.list(q),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
  /** A's claim has reached the store (its call began after the client's first, real-time, telemetry import: fake time waits for it). */
  const claimed = (): Promise<void> => settleUntil(() => claimsByA > 0, "A's claim to reach the store");
  return { store, openClaim, openClose, claimed };
}

/** A lookup whose first answer waits until `answer()`; later ones answer at once. */
function heldLookup<T>(result: () => T) {
  let asked = 0;
  let answer!: () => void;
  const gate = new Promise<void>((r) => (answer = r));
  const lookup = async (): Promise<T> => {
    if (++asked === 1) await gate;
    return result();
  };
  return { lookup, asked: () => asked, answer };
}

function makeClient(store: OnceStore, fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) {
  return createClient({ store, fetch, now: () => Date.now(), random: () => 0.5, ...options, retry: { budget: false, ...options.retry } });
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
});

afterEach(() => {
  vi.useRealTimers();
});

type Api = 'fetch' | 'run';
type Answer = 'found' | 'absent' | 'unknown';
const cases: [Api, Answer, boolean, boolean][] = [];
for (const api of ['fetch', 'run'] as const) {
  for (const answer of ['found', 'absent', 'unknown'] as const) {
    for (const providerDedupes of [false, true]) for (const renewed of [true, false]) cases.push([api, answer, providerDedupes, renewed]);
  }
}

describe("a superseded owner's never_sent lands during the new owner's lookup", () => {
  it.each(cases)('client.%s, lookup %s, providerDedupes %s, renewal before the answer %s: sent once, succeeded, lease released', async (api, answer, providerDedupes, renewed) => {
    const { store, openClaim, openClose, claimed } = gated();
    let sends = 0;
    const fetch = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    const effect = async (): Promise<{ id: string }> => (sends++, { id: 'o-1' });
    const call = (c: ReturnType<typeof makeClient>, lookups?: { fetch: () => Promise<Response | null>; run: () => Promise<{ value: { id: string } } | null> }) =>
      api === 'fetch'
        ? c.fetch(URL_ORDERS, { ...post, once: { ...SCOPE, ...(lookups && { lookup: lookups.fetch }) } }).then((r) => r.status)
        : c.run({ ...SCOPE, payload: { sku: 'book' }, ...(lookups && { lookup: lookups.run }) }, effect).then(() => 201);

    // A: its claim (which opens attempt 1) does not answer before its deadline
    const a = makeClient(store, fetch, { owner: 'a', leaseMs: 100, retry: { deadlineMs: 150 } });
    const first = track(call(a));
    await claimed();
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(50);
    expect(first.reason()).toBeInstanceOf(DeadlineExceededError);
    // the claim lands, its lease runs out; A's close of attempt 1 is held
    openClaim();
    await advance(300);

    // B takes the record over (attempt 1 may have been sent) and asks its lookup
    const fetchLookup = heldLookup(() => {
      if (answer === 'found') return new Response('{"id":"o-1"}', { status: 200 });
      if (answer === 'absent') return null;
      throw new Error('orders index unavailable');
    });
    const runLookup = heldLookup(() => {
      if (answer === 'found') return { value: { id: 'o-1' } };
      if (answer === 'absent') return null;
      throw new Error('orders index unavailable');
    });
    const b = makeClient(store, fetch, { owner: 'b', leaseMs: 3_000, providerDedupes });
    const second = track(call(b, { fetch: fetchLookup.lookup, run: runLookup.lookup }));
    await advance(50);
    expect(fetchLookup.asked() + runLookup.asked()).toBe(1);
    expect(await b.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: { owner: 'b' } });

    // A's never_sent lands under B's lease: back to pending
    openClose();
    await advance(50);
    expect(await b.get(SCOPE)).toMatchObject({ state: 'pending', lease: { owner: 'b' }, attempts: [{ owner: 'a', class: 'not_sent', reason: UNSENT }] });
    // a renewal (every leaseMs / 3) runs before the answer, or not
    if (renewed) await advance(1_100);

    fetchLookup.answer();
    runLookup.answer();
    await advance(8_000);
    expect(second.state(), String(second.reason())).toBe('resolved');
    expect(second.value()).toBe(201);
    expect(sends).toBe(1);
    expect(await b.get(SCOPE)).toMatchObject({
      state: 'succeeded',
      lease: null,
      attempts: [
        { owner: 'a', class: 'not_sent' },
        { owner: 'b', class: 'success' },
      ],
    });
  });
});

describe("a superseded owner's never_sent lands during recover()'s lookup", () => {
  it.each([
    ['found', true],
    ['found', false],
    ['absent', true],
    ['absent', false],
    ['unknown', true],
    ['unknown', false],
  ] as const)('lookup %s, renewal before the answer %s: reported absent (back to pending, nothing sent), lease released', async (answer, renewed) => {
    const { store, openClaim, openClose, claimed } = gated();
    let sends = 0;
    const fetch = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    const a = makeClient(store, fetch, { owner: 'a', leaseMs: 100, retry: { deadlineMs: 150 } });
    const first = track(a.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await claimed();
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(50);
    expect(first.reason()).toBeInstanceOf(DeadlineExceededError);
    openClaim();
    await advance(300);

    const held = heldLookup(() => {
      if (answer === 'found') return new Response('{"id":"o-1"}', { status: 200 });
      if (answer === 'absent') return null;
      throw new Error('orders index unavailable');
    });
    const b = makeClient(store, fetch, { owner: 'b', leaseMs: 3_000, lookups: { [SCOPE.action]: held.lookup } });
    const recovering = track(b.recover());
    await advance(50);
    expect(held.asked()).toBe(1);
    expect(await b.get(SCOPE)).toMatchObject({ state: 'ambiguous', lease: { owner: 'b/recover' } });

    openClose();
    await advance(50);
    expect(await b.get(SCOPE)).toMatchObject({ state: 'pending', lease: { owner: 'b/recover' } });
    if (renewed) await advance(1_100);

    held.answer();
    await advance(100);
    expect(recovering.state(), String(recovering.reason())).toBe('resolved');
    expect(recovering.value()).toMatchObject({ resolved: [], absent: [{ ref: SCOPE.ref }], stillAmbiguous: [], errors: [] });
    expect(sends).toBe(0);
    expect(await b.get(SCOPE)).toMatchObject({ state: 'pending', lease: null, attempts: [{ owner: 'a', class: 'not_sent', reason: UNSENT }] });
    // its caller's next call sends it, once
    expect((await b.fetch(URL_ORDERS, { ...post, once: SCOPE })).status).toBe(201);
    expect(sends).toBe(1);
  });
});

describe('never_sent under its own live lease, after a cancel request moved the record', () => {
  it('the abandon still releases the lease: the cancel decides at once, not after leaseMs', async () => {
    const { store, openClaim, openClose, claimed } = gated();
    let sends = 0;
    const fetch = (async () => (sends++, new Response('{"id":"o-1"}', { status: 201 }))) as typeof globalThis.fetch;
    // A's lease is long: it is still A's when its abandon closes the attempt its claim opened
    const a = makeClient(store, fetch, { owner: 'a', leaseMs: 60_000, retry: { deadlineMs: 150 } });
    const first = track(a.fetch(URL_ORDERS, { ...post, once: SCOPE }));
    await claimed();
    for (let i = 0; i < 50 && first.state() === 'pending'; i++) await advance(50);
    expect(first.reason()).toBeInstanceOf(DeadlineExceededError);
    openClaim();
    await advance(50);
    expect(await a.get(SCOPE)).toMatchObject({ state: 'in_flight', lease: { owner: 'a' } });

    // a cancel request lands first (ordered by compare-and-set against A's writes)
    const c = makeClient(store, fetch, { owner: 'c' });
    const cancelling = track(c.cancel(SCOPE, { waitMs: 5_000 }));
    await advance(50);
    expect(await c.get(SCOPE)).toMatchObject({ state: 'in_flight', cancelRequestedAt: expect.any(Number) });

    // then A's close of its unsent attempt, and its release
    openClose();
    await advance(1_000);
    expect(cancelling.state(), String(cancelling.reason())).toBe('resolved');
    expect(cancelling.value()).toMatchObject({ outcome: 'cancelled' });
    expect(await c.get(SCOPE)).toMatchObject({ state: 'cancelled', lease: null, attempts: [{ owner: 'a', class: 'not_sent', reason: UNSENT }] });
    expect(sends).toBe(0);
  });
});
