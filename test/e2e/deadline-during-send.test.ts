/**
 * A deadline that passes while the request is on the wire (sent, its answer not back) leaves the
 * record `ambiguous`: the provider may have taken the order, or may still take it. The call's error
 * must say so, as every other stop that leaves the record ambiguous does (`unlessAmbiguous`): an
 * `AmbiguousOutcomeError`, its cause the `DeadlineExceededError`, telling the caller to call again
 * with the same ref (never a new one) or let recover() reconcile it. It said "deadline of 300 ms
 * passed …; the record stays resumable", a DeadlineExceededError: a queue's dead-letter handler may
 * read "resumable" as "nothing happened" and send the intent again under a new ref (a second order).
 *
 * The provider does not dedupe (every POST is a new order), so a second send shows as a second effect.
 * It stalls after receiving the POST, before committing it (the order lands after the call gave up), or
 * commits it then stalls before answering.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, DeadlineExceededError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { lookupByRef, orderInit, until } from '../helpers/setup.js';

const ACTION = 'create-order';
const DEADLINE_MS = 300;
/** how long the provider holds the POST: past the first call's deadline */
const STALL_MS = 700;

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

function client(store: OnceStore, options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store, telemetry: false, retry: { deadlineMs: DEADLINE_MS, budget: false }, ...options });
  cleanups.push(() => c.close());
  return c;
}

function order(c: OnceClient, ref: string, withLookup: boolean, signal?: AbortSignal): Promise<Response> {
  return c.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal === undefined ? {} : { signal }), once: { action: ACTION, ref, ...(withLookup ? { lookup: lookupByRef(provider.url) } : {}) } });
}

const sent = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;
const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });

/** The first call's error: ambiguous, with the deadline as its cause, and what to do next. */
function expectAmbiguous(error: unknown, ref: string): void {
  expect(error).toBeInstanceOf(AmbiguousOutcomeError);
  const e = error as AmbiguousOutcomeError;
  expect(e.code).toBe('AMBIGUOUS_OUTCOME');
  expect(e.scope).toEqual({ tenant: 'default', action: ACTION, ref });
  expect(e.message).toContain(`deadline of ${DEADLINE_MS} ms passed for operation default/${ACTION}/${ref}`);
  expect(e.message).toMatch(/may have taken effect/);
  expect(e.message).toMatch(/call again with the same ref \(never a new one\)/i);
  expect(e.message).toMatch(/recover\(\)/);
  expect(e.message).not.toMatch(/resumable/);
  expect(e.cause).toBeInstanceOf(DeadlineExceededError);
}

describe('the deadline passes while the POST is on the wire', () => {
  for (const kind of ['delay_before_commit', 'delay_after_commit'] as const) {
    const stall = kind === 'delay_before_commit' ? 'stalls before committing' : 'commits, then stalls';
    it(`the provider ${stall}: AmbiguousOutcomeError (cause the deadline), record ambiguous; the same ref again reconciles to 1 order, never 2`, async () => {
      const ref = `DDS-${kind}`;
      const store = memoryStore();
      provider.fault({ kind, delayMs: STALL_MS, match: { ref } });
      const first = await timed(order(client(store), ref, true), 3_000);
      expectAmbiguous(first.value, ref);
      expect(sent(ref)).toBe(1);
      expect(provider.effectsFor(ref)).toBe(kind === 'delay_after_commit' ? 1 : 0);
      const rec = await store.get(idOf(ref));
      expect(rec).toMatchObject({ state: 'ambiguous', lease: null, attempts: [{ class: 'ambiguous' }] });
      // the stop it records says what the caller was told, not "resumable"
      expect(rec?.error?.code).toBe('AMBIGUOUS_OUTCOME');
      expect(rec?.error?.message).not.toMatch(/resumable/);
      // The stalled order lands after the call gave up. The same ref again (another client, a longer
      // deadline): reconciled by lookup, found, never sent again.
      await until(() => provider.effectsFor(ref) === 1);
      const again = await timed(order(client(store, { retry: { deadlineMs: 5_000, budget: false }, settleMs: STALL_MS }), ref, true), 8_000);
      expect(again.outcome).toBe('200');
      expect(await (again.value as Response).json()).toMatchObject({ ref });
      expect(sent(ref)).toBe(1);
      expect(provider.effectsFor(ref)).toBe(1);
      expect(await store.get(idOf(ref))).toMatchObject({ state: 'succeeded' });
    });
  }

  it('no lookup: the same; the same ref again sends nothing (AmbiguousOutcomeError), 1 order', async () => {
    const ref = 'DDS-nolookup';
    const store = memoryStore();
    provider.fault({ kind: 'delay_after_commit', delayMs: STALL_MS, match: { ref } });
    const c = client(store);
    const first = await timed(order(c, ref, false), 3_000);
    expectAmbiguous(first.value, ref);
    expect((await store.get(idOf(ref)))?.state).toBe('ambiguous');
    expect((await timed(order(c, ref, false), 3_000)).outcome).toBe('AmbiguousOutcomeError');
    expect(sent(ref)).toBe(1);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it("the caller's own abort while the POST is out still rejects with its reason, as given", async () => {
    const ref = 'DDS-abort';
    const store = memoryStore();
    provider.fault({ kind: 'delay_after_commit', delayMs: STALL_MS, match: { ref } });
    const reason = new Error('caller gave up');
    const first = await timed(order(client(store), ref, true, abortAfter(100, reason)), 3_000);
    expect(first.value).toBe(reason);
    expect((await store.get(idOf(ref)))?.state).toBe('ambiguous');
    expect(sent(ref)).toBe(1);
  });
});

function abortAfter(ms: number, reason: unknown): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(reason), ms);
  return controller.signal;
}
