/**
 * Lost acknowledgements: a store write that is APPLIED but reported FAILED (PostgreSQL: the
 * connection drops after COMMIT, before the client reads the ack; a store wrapper's timeout given
 * up on while the write lands). `lossy()` wraps a real store: on the chosen write it performs the
 * claim or compare-and-set, then throws a `StoreError` as if the ack were lost. Effects are counted
 * at a loopback provider that does not dedupe (every POST that reaches it is a new order) unless a
 * case says otherwise.
 *
 * The guarantee: at most one effect; no resend without a lookup's "absent" or provider dedupe; no
 * ref left stuck by an attempt this process knows it never handed to the transport; the caller told
 * the truth (a call that ends with its outcome unknown says so, whatever the store did with the
 * writes that close it).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, OperationCancelledError, StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lossy } from '../helpers/lossy-store.js';
import { lookupByRef, orderInit, tempDir } from '../helpers/setup.js';

const ACTION = 'create-order';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

function clientOn(store: OnceStore, options: OnceClientOptions = {}): OnceClient {
  const client = createClient({
    store,
    settleMs: 20,
    leaseMs: 400,
    ...options,
    retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry },
  });
  cleanups.push(() => client.close());
  return client;
}

function order(client: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal ? { signal } : {}), once: { action: ACTION, ref } });
}

const caught = (call: Promise<unknown>): Promise<unknown> => call.then(() => undefined, (error: unknown) => error);
const idOf = (ref: string, action = ACTION): string => recordId({ tenant: 'default', action, ref });

describe('the write that opens an attempt is applied, its acknowledgement lost', () => {
  // Nothing was handed to the transport: the record must not read as "possibly sent" (in_flight
  // under this owner, then ambiguous at the next call, an AmbiguousOutcomeError for good without a
  // lookup or provider dedupe). Before the fix: the StoreError left attempt 1 open, and every later
  // call, of this client or another, threw AmbiguousOutcomeError with 0 effects.
  const cases = [
    { write: 'claim+attempt', what: 'the claim of a new record (attempt 1 opened with it)', retry: {} },
    { write: 'attempt_started', what: 'attempt_started of a retry after a 503', retry: { maxAttempts: 2 } },
  ] as const;

  for (const { write, what, retry } of cases) {
    for (const next of ['same client', 'fresh client'] as const) {
      it(`${what}: the caller gets the StoreError, nothing more is sent; the ${next} sends once, no lookup, no dedupe`, async () => {
        const inner = memoryStore();
        const { store, plan } = lossy(inner);
        const ref = `LA-${write}-${next}`;
        if (write === 'attempt_started') provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
        const client = clientOn(store, { retry });
        plan.lose = write;

        const error = await caught(order(client, ref));
        expect(plan.lost).toEqual([write]);
        expect(error).toBeInstanceOf(StoreError);
        expect(provider.effectsFor(ref)).toBe(0);
        const sentBefore = provider.requests.filter((r) => r.ref === ref).length;
        expect(sentBefore).toBe(write === 'attempt_started' ? 1 : 0); // the 503, not processed
        // the attempt the lost write opened is closed as never sent; the lease is released
        const record = await inner.get(idOf(ref));
        expect(record?.state).toBe('pending');
        expect(record?.attempts.at(-1)?.class).toBe('not_sent');
        expect(record?.lease).toBeNull();

        const again = next === 'same client' ? client : clientOn(store, { retry });
        expect((await order(again, ref)).status).toBe(201);
        expect(provider.effectsFor(ref)).toBe(1);
        expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(sentBefore + 1);
        // and from then on a replay
        expect((await order(clientOn(store), ref)).status).toBe(201);
        expect(provider.effectsFor(ref)).toBe(1);
      });
    }
  }

  it('client.run: the claim applied, its ack lost; the next run performs the effect once', async () => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const client = clientOn(store);
    let effects = 0;
    const effect = async (): Promise<{ id: number }> => ({ id: ++effects });
    plan.lose = 'claim+attempt';
    expect(await caught(client.run({ action: 'charge', ref: 'LA-run' }, effect))).toBeInstanceOf(StoreError);
    expect(effects).toBe(0);
    expect(await client.run({ action: 'charge', ref: 'LA-run' }, effect)).toEqual({ id: 1 });
    expect(await clientOn(store).run({ action: 'charge', ref: 'LA-run' }, effect)).toEqual({ id: 1 });
    expect(effects).toBe(1);
  });

  it('on SQLite: the claim applied, its ack lost; a fresh client on the file sends once', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.cleanup());
    const path = join(dir.dir, 'once.db');
    const inner = sqliteStore({ path });
    cleanups.push(() => inner.close());
    const { store, plan } = lossy(inner);
    plan.lose = 'claim+attempt';
    expect(await caught(order(clientOn(store), 'LA-sqlite'))).toBeInstanceOf(StoreError);
    expect(provider.effectsFor('LA-sqlite')).toBe(0);
    expect((await order(clientOn(sqliteStore({ path })), 'LA-sqlite')).status).toBe(201);
    expect(provider.effectsFor('LA-sqlite')).toBe(1);
  });

  it('the caller gave up while the claim was pending, and it then failed though applied: the abandon closes the attempt; the next call sends once', async () => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const client = clientOn(store);
    plan.lose = 'claim+attempt';
    plan.delayMs = 100;
    const reason = new Error('caller gave up');
    const error = await caught(order(client, 'LA-abort', abortAfter(30, reason)));
    expect(error).toBe(reason);
    expect(provider.effectsFor('LA-abort')).toBe(0);
    // the next call of this client waits for the abandon of the write it gave up on
    expect((await order(client, 'LA-abort')).status).toBe(201);
    expect(provider.effectsFor('LA-abort')).toBe(1);
    expect(provider.requests.filter((r) => r.ref === 'LA-abort')).toHaveLength(1);
  });
});

describe('the caller gave up while attempt_started was pending, and it then failed though applied', () => {
  it('the abandon closes the attempt it opened; the next call (same client, then a fresh one) sends once', async () => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const ref = 'LA-abort-started';
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    // the retry's backoff is at most 5 ms: 30 ms later its attempt_started is pending (100 ms)
    const client = clientOn(store, { retry: { maxAttempts: 2 }, onEvent: (e) => void (e.type === 'retry_scheduled' && setTimeout(() => controller.abort(reason), 30)) });
    plan.lose = 'attempt_started';
    plan.delayMs = 100;
    expect(await caught(order(client, ref, controller.signal))).toBe(reason);
    expect(plan.lost).toEqual(['attempt_started']);
    expect((await order(client, ref)).status).toBe(201);
    expect((await order(clientOn(store), ref)).status).toBe(201);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(2); // the 503, then the one send
  });
});

describe('the read-back after a lost acknowledgement', () => {
  it('hangs: the caller still gets its StoreError within the lease, not at the deadline', async () => {
    const { store, plan } = lossy(memoryStore());
    const client = clientOn(store, { retry: { deadlineMs: 10_000 } });
    plan.lose = 'claim+attempt';
    plan.hangReads = true;
    const startedAt = Date.now();
    expect(await caught(order(client, 'LA-hang'))).toBeInstanceOf(StoreError);
    expect(Date.now() - startedAt).toBeLessThan(3_000); // leaseMs is 400
    expect(provider.requests).toHaveLength(0);
  });

  it("hangs after a 503's write lost its ack: the release is given up at the lease's end, the StoreError thrown", async () => {
    const { store, plan } = lossy(memoryStore());
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'LA-hang-503' } });
    const client = clientOn(store, { retry: { deadlineMs: 10_000 } });
    plan.lose = 'attempt_finished:retryable';
    plan.hangReads = true;
    const startedAt = Date.now();
    expect(await caught(order(client, 'LA-hang-503'))).toBeInstanceOf(StoreError);
    expect(Date.now() - startedAt).toBeLessThan(3_000); // leaseMs is 400
    expect(provider.requests).toHaveLength(1);
  });

  it("hangs after a 503's write lost its ack, under a long lease: the caller waits about a second for the release, not the lease", async () => {
    const { store, plan } = lossy(memoryStore());
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'LA-hang-long' } });
    const client = clientOn(store, { leaseMs: 10_000, retry: { deadlineMs: 20_000 } });
    plan.lose = 'attempt_finished:retryable';
    plan.hangReads = true;
    const startedAt = Date.now();
    expect(await caught(order(client, 'LA-hang-long'))).toBeInstanceOf(StoreError);
    expect(Date.now() - startedAt).toBeLessThan(3_000);
  }, 15_000);
});

describe('the read-back after a lost acknowledgement fails too', () => {
  it.each([1, 3])('%i failed read(s): the read-back is tried again; the attempt is closed unsent and another process sends once, at once', async (reads) => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const client = clientOn(store, { leaseMs: 30_000 });
    plan.lose = 'claim+attempt';
    plan.failReads = reads;
    expect(await caught(order(client, `LA-read-${reads}`))).toBeInstanceOf(StoreError);
    // (the read-back goes on after the caller's error; give it a moment)
    let stored = await inner.get(idOf(`LA-read-${reads}`));
    for (let i = 0; i < 50 && stored?.lease !== null; i++) {
      await new Promise((r) => setTimeout(r, 50));
      stored = await inner.get(idOf(`LA-read-${reads}`));
    }
    expect(stored?.state).toBe('pending');
    expect(stored?.attempts.at(-1)?.class).toBe('not_sent');
    const other = clientOn(inner, { inFlightWaitMs: 100 });
    expect((await order(other, `LA-read-${reads}`)).status).toBe(201);
    expect(provider.effects).toBe(1);
  });

  it('every read fails, under a long lease: the caller gets its StoreError in about a second, not at the lease\'s end', async () => {
    const { store, plan } = lossy(memoryStore());
    const client = clientOn(store, { leaseMs: 10_000, retry: { deadlineMs: 20_000 } });
    plan.lose = 'claim+attempt';
    plan.failReads = 1_000_000;
    const startedAt = Date.now();
    expect(await caught(order(client, 'LA-read-all'))).toBeInstanceOf(StoreError);
    expect(Date.now() - startedAt).toBeLessThan(3_000);
    expect(provider.requests).toHaveLength(0);
  }, 15_000);
});

describe('client.close() while the read-back after a lost acknowledgement is still being tried', () => {
  // Every read fails (the connection is gone): the read-back goes on after the caller's StoreError,
  // until the lease's end. Before the fix it went on after close() too (a closed store fails every
  // read), its timers holding the process open for up to leaseMs (30 s by default) after close().
  it('close() ends it: no read is asked for, no timer kept, after close()', async () => {
    const { store, plan } = lossy(memoryStore());
    const client = clientOn(store, { leaseMs: 30_000 });
    plan.lose = 'claim+attempt';
    plan.failReads = 1_000_000;
    expect(await caught(order(client, 'LA-close'))).toBeInstanceOf(StoreError);
    await client.close();
    const readsAtClose = plan.reads;
    await new Promise((r) => setTimeout(r, 1_500)); // the read-back's waits grow to 1 s
    expect(plan.reads).toBe(readsAtClose);
    expect(provider.requests).toHaveLength(0);
  });

  // close() waits for the work a call left going in the background; an undo of a write before the
  // send (this read-back) gets at most 1 s more, as the call gave it: a store that keeps failing must
  // not hold the close until the lease's end.
  it('close() gives it at most 1 s more (as the call did), then ends it: no read after close()', async () => {
    const { store, plan } = lossy(memoryStore());
    const client = clientOn(store, { leaseMs: 30_000 });
    plan.lose = 'claim+attempt';
    plan.failReads = 1_000_000;
    expect(await caught(order(client, 'LA-close-graceful'))).toBeInstanceOf(StoreError);
    const readsBefore = plan.reads;
    const closing = Date.now();
    await client.close();
    expect(Date.now() - closing).toBeGreaterThanOrEqual(900);
    expect(Date.now() - closing).toBeLessThan(1_800);
    expect(plan.reads).toBeGreaterThan(readsBefore); // it went on trying meanwhile
    const readsAtClose = plan.reads;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(plan.reads).toBe(readsAtClose);
    expect(provider.requests).toHaveLength(0);
  });
});

describe('never_sent of an attempt opened and never handed to the transport fails once, not applied', () => {
  // The claim opened attempt 1; the caller aborts (or cancels) before the send, and the store fails
  // the write that closes it as never sent (a blip). Only this process knows that attempt never left
  // it. Before the fix the abandon's `stopped` released the lease over the still-open attempt: every
  // later call took it for possibly sent and, with no lookup and no provider dedupe, threw
  // AmbiguousOutcomeError for good (0 effects). The write is tried again, as an answer in hand is.
  for (const how of ['abort', 'cancel'] as const) {
    it(`${how} before the send: the attempt is closed all the same; the next call sends once, no lookup, no dedupe`, async () => {
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-never_sent-fail-${how}`;
      const ctl = new AbortController();
      const reason = new Error('caller gave up');
      const client = clientOn(store, { leaseMs: 30_000, onEvent: (e) => void (e.type === 'operation_created' && ctl.abort(reason)) });
      plan.fail = 'never_sent';
      const error = await caught(
        client.fetch(`${provider.url}/orders`, {
          ...orderInit(ref),
          ...(how === 'abort' ? { signal: ctl.signal } : {}),
          once: { action: ACTION, ref, ...(how === 'cancel' ? { signal: ctl.signal } : {}) },
        }),
      );
      expect(plan.lost).toEqual(['failed never_sent']);
      if (how === 'abort') expect(error).toBe(reason);
      else expect(error).toBeInstanceOf(OperationCancelledError);
      const record = await inner.get(idOf(ref));
      expect(record?.attempts.map((a) => a.class)).toEqual(['not_sent']);
      expect(record).toMatchObject({ state: how === 'abort' ? 'pending' : 'cancelled', lease: null });
      expect(provider.requests).toHaveLength(0);

      const next = clientOn(store, { inFlightWaitMs: 100 });
      if (how === 'abort') expect((await order(next, ref)).status).toBe(201);
      else expect(await caught(order(next, ref))).toBeInstanceOf(OperationCancelledError);
      expect(provider.effectsFor(ref)).toBe(how === 'abort' ? 1 : 0);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(how === 'abort' ? 1 : 0);
    });
  }
});

describe('a call that ends with its outcome unknown says so, whatever the store did with the writes that close it', () => {
  // The attempt got a 502 after the provider committed (one effect); nothing can settle it (no
  // lookup that answers, no provider dedupe), so the call stops with AmbiguousOutcomeError. A
  // StoreError instead would read as "nothing was sent" (README: StoreError). Before the fix the
  // caller got the StoreError of the stop (or of the lookup_unknown note) in each case below.
  const cases = [
    { write: 'stop', how: 'lose', lookup: false, what: 'the stop applied, its ack lost' },
    { write: 'stop', how: 'fail', lookup: false, what: 'the stop failed, not applied' },
    { write: 'lookup:unknown', how: 'lose', lookup: true, what: "the lookup's 'unknown' note applied, its ack lost" },
    { write: 'lookup:unknown', how: 'fail', lookup: true, what: "the lookup's 'unknown' note failed, not applied" },
  ] as const;

  for (const { write, how, lookup, what } of cases) {
    it(`${what}: AmbiguousOutcomeError, one effect, never resent; the next call says ambiguous too`, async () => {
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-${write}-${how}`;
      provider.fault({ kind: 'error_after_commit', status: 502, match: { ref } });
      const failingLookup = async (): Promise<Response | null> => {
        throw new Error('lookup service down');
      };
      const client = clientOn(store, lookup ? { lookups: { [ACTION]: failingLookup } } : {});
      plan[how] = write;

      const error = await caught(order(client, ref));
      expect(plan.lost).toEqual([how === 'lose' ? write : `failed ${write}`]);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect(provider.effectsFor(ref)).toBe(1);
      expect((await inner.get(idOf(ref)))?.state).toBe('ambiguous');

      expect(await caught(order(client, ref))).toBeInstanceOf(AmbiguousOutcomeError);
      // with a lookup that answers, the next call settles it: found, not resent
      const settled = clientOn(store, { lookups: { [ACTION]: lookupByRef(provider.url) } });
      expect((await order(settled, ref)).status).toBe(200);
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    });
  }
});

describe('every other engine write applied, its acknowledgement lost: at most one effect, the next call finishes', () => {
  type Case = {
    write: string;
    what: string;
    /** the call ends with this (a StoreError, unless said) */
    first?: (error: unknown) => void;
    /** the call returns a Response with this status instead */
    firstStatus?: number;
    /** what the provider has seen when the first call ended: [requests, effects] */
    sent: [number, number];
    /** the next call's status, or the error it throws */
    next: number | typeof OperationCancelledError;
    /** requests at the end (a resend only after an "absent" or with a provider that dedupes) */
    requests: number;
    effects: number;
    fault?: 'ambiguous' | 'retryable' | 'unsent-ambiguous';
    lookup?: boolean;
    dedupes?: boolean;
    options?: (signals: { abort: AbortController; cancel: AbortController }) => OnceClientOptions;
    call?: { abort?: boolean; cancel?: boolean; classifyThrows?: boolean };
    /** a record to take over: left pending under a crashed owner's expired lease */
    crashed?: boolean;
  };
  const onCreated = (fn: () => void): OnceClientOptions => ({ onEvent: (e) => void (e.type === 'operation_created' && fn()) });
  const cases: Case[] = [
    { write: 'takeover', what: 'the takeover of a crashed owner\'s record', crashed: true, sent: [0, 0], next: 201, requests: 2, effects: 1 },
    { write: 'attempt_finished:success', what: 'a 201 recorded (the record says succeeded)', firstStatus: 201, sent: [1, 1], next: 201, requests: 1, effects: 1 },
    { write: 'attempt_finished:retryable', what: 'a 503 recorded', fault: 'retryable', sent: [1, 0], next: 201, requests: 2, effects: 1 },
    { write: 'attempt_finished:ambiguous', what: 'a 502 after commit recorded', fault: 'ambiguous', lookup: true, sent: [1, 1], next: 200, requests: 1, effects: 1 },
    { write: 'lookup:found', what: "the lookup's 'found'", fault: 'ambiguous', lookup: true, firstStatus: 200, sent: [1, 1], next: 200, requests: 1, effects: 1 },
    { write: 'lookup:absent', what: "the lookup's 'absent'", fault: 'unsent-ambiguous', lookup: true, sent: [1, 0], next: 201, requests: 2, effects: 1 },
    { write: 'lookup:resend', what: 'the same-key resend cleared by providerDedupes', fault: 'ambiguous', dedupes: true, sent: [1, 1], next: 201, requests: 2, effects: 1 },
    {
      write: 'release',
      what: "the release after the caller's classify threw",
      fault: 'retryable',
      call: { classifyThrows: true },
      first: (error) => expect((error as Error).message).toBe('classify failed'),
      sent: [1, 0],
      next: 201,
      requests: 2,
      effects: 1,
    },
    {
      write: 'never_sent',
      what: 'never_sent of an attempt the caller aborted before the send',
      options: ({ abort }) => onCreated(() => abort.abort(new Error('caller gave up'))),
      call: { abort: true },
      first: (error) => expect((error as Error).message).toBe('caller gave up'),
      sent: [0, 0],
      next: 201,
      requests: 1,
      effects: 1,
    },
    {
      write: 'cancel',
      what: 'the cancel of a call whose once.signal aborted before the send',
      options: ({ cancel }) => onCreated(() => cancel.abort()),
      call: { cancel: true },
      sent: [0, 0],
      next: OperationCancelledError,
      requests: 0,
      effects: 0,
    },
  ];

  for (const c of cases) {
    it(`${c.write}: ${c.what}`, async () => {
      if (c.dedupes === true) {
        await provider.close();
        provider = await startProvider();
      }
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-${c.write}`;
      const signals = { abort: new AbortController(), cancel: new AbortController() };
      const base: OnceClientOptions = { providerDedupes: c.dedupes === true, ...(c.lookup === true ? { lookups: { [ACTION]: lookupByRef(provider.url) } } : {}) };
      if (c.crashed === true) {
        provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
        await caught(order(clientOn(store, { ...base, retry: { maxAttempts: 1 } }), ref));
        const left = await inner.get(idOf(ref));
        if (left === undefined) throw new Error('no record');
        await inner.compareAndSet(left.id, left.generation, { ...left, generation: left.generation + 1, lease: { owner: 'crashed', expiresAt: Date.now() - 1 } });
      }
      if (c.fault === 'ambiguous') provider.fault({ kind: 'error_after_commit', status: 502, match: { ref } });
      if (c.fault === 'retryable') provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
      if (c.fault === 'unsent-ambiguous') provider.fault({ kind: 'reset_before_commit', match: { ref } });
      const client = clientOn(store, { ...base, ...c.options?.(signals) });
      const requestsBefore = provider.requests.length;
      plan.lose = c.write;

      let status: number | undefined;
      const error = await caught(
        client.fetch(`${provider.url}/orders`, {
          ...orderInit(ref),
          ...(c.call?.abort === true ? { signal: signals.abort.signal } : {}),
          once: {
            action: ACTION,
            ref,
            ...(c.call?.cancel === true ? { signal: signals.cancel.signal } : {}),
            ...(c.call?.classifyThrows === true
              ? {
                  classify: () => {
                    throw new Error('classify failed');
                  },
                }
              : {}),
          },
        }).then((res) => void (status = res.status)),
      );
      expect(plan.lost).toEqual([c.write]);
      if (c.firstStatus !== undefined) expect([status, error]).toEqual([c.firstStatus, undefined]);
      else if (c.first === undefined) expect(error).toBeInstanceOf(StoreError);
      else c.first(error);
      expect([provider.requests.length - requestsBefore, provider.effectsFor(ref)]).toEqual(c.sent);
      // the lease is not left held (another process need not wait for it), and our own write is never filed as another's
      const left = await inner.get(idOf(ref));
      expect(left?.lease).toBeNull();
      expect(left?.evidence.filter((e) => e.kind === 'stale_write')).toEqual([]);

      for (const next of [client, clientOn(store, base), clientOn(store, base)]) {
        if (c.next === OperationCancelledError) expect(await caught(order(next, ref))).toBeInstanceOf(OperationCancelledError);
        else expect((await order(next, ref)).status).toBe(c.next);
      }
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(c.requests);
      expect(provider.effectsFor(ref)).toBe(c.effects);
    });
  }

  it('client.cancel: the cancel applied, its ack lost; the cancel is recorded all the same, and asked again it says so', async () => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const client = clientOn(store, { retry: { maxAttempts: 1 } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'LA-cancel' } });
    await caught(order(client, 'LA-cancel')); // pending, nothing delivered
    plan.lose = 'cancel';
    expect(await caught(client.cancel({ action: ACTION, ref: 'LA-cancel' }))).toBeInstanceOf(StoreError);
    expect(await client.cancel({ action: ACTION, ref: 'LA-cancel' })).toEqual({ outcome: 'cancelled', state: 'cancelled' });
    expect(await caught(order(clientOn(store), 'LA-cancel'))).toBeInstanceOf(OperationCancelledError);
    expect(provider.effectsFor('LA-cancel')).toBe(0);
  });
});

describe('never_sent applied inside the abandon, its acknowledgement lost: the engine knows its own write', () => {
  // The caller aborts before the send; the abandon closes attempt 1 never_sent (applied, ack lost),
  // then writes `stopped`. Before the fix that write conflicted with our own closed attempt: it was
  // filed as "superseded write (stopped)" evidence and the lease stayed held until it expired, so
  // another process's call waited the whole leaseMs (30 s here; it gives up after 100 ms).
  it('the stop applies on top of it: lease released, no misleading evidence; another process sends at once', async () => {
    const inner = memoryStore();
    const { store, plan } = lossy(inner);
    const ref = 'LA-never_sent-abandon';
    const abort = new AbortController();
    const reason = new Error('caller gave up');
    const client = clientOn(store, { leaseMs: 30_000, onEvent: (e) => void (e.type === 'operation_created' && abort.abort(reason)) });
    plan.lose = 'never_sent';
    expect(await caught(order(client, ref, abort.signal))).toBe(reason);
    expect(plan.lost).toEqual(['never_sent']);
    const record = await inner.get(idOf(ref));
    expect(record).toMatchObject({ state: 'pending', lease: null, error: { code: 'ABORTED' } });
    expect(record?.attempts.map((a) => a.class)).toEqual(['not_sent']);
    expect(record?.evidence.map((e) => e.kind)).toEqual(['stop']);

    expect((await order(clientOn(store, { inFlightWaitMs: 100 }), ref)).status).toBe(201);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
  });
});

describe('a StoreError while owning the record: the lease is released before the error, so another process need not wait', () => {
  // leaseMs is 30 s and the other process gives up after 100 ms: before the fix each case below
  // left the lease held, and the other process's call threw OperationInFlightError (it would have
  // waited the 30 s). The StoreError stands; only the lease goes (attempts stay as evidence).
  type Case = { write: string; how: 'lose' | 'fail'; fault: 'retryable' | 'ambiguous' | 'unsent-ambiguous' | 'crashed'; lookup?: boolean; dedupes?: boolean; maxAttempts?: number; next: number | 'ambiguous'; requests: number; effects: number };
  const cases: Case[] = [
    { write: 'takeover', how: 'lose', fault: 'crashed', next: 201, requests: 2, effects: 1 },
    { write: 'attempt_finished:retryable', how: 'lose', fault: 'retryable', next: 201, requests: 2, effects: 1 },
    // not applied: the 503 is not on record, the attempt reads as possibly sent; a lookup settles it
    { write: 'attempt_finished:retryable', how: 'fail', fault: 'retryable', lookup: true, next: 201, requests: 2, effects: 1 },
    { write: 'attempt_finished:retryable', how: 'fail', fault: 'retryable', next: 'ambiguous', requests: 1, effects: 0 },
    { write: 'attempt_finished:ambiguous', how: 'lose', fault: 'ambiguous', lookup: true, next: 200, requests: 1, effects: 1 },
    // (the write that opens a retry's attempt, not applied: pending, nothing of it sent)
    { write: 'attempt_started', how: 'fail', fault: 'retryable', maxAttempts: 2, next: 201, requests: 2, effects: 1 },
    { write: 'lookup:absent', how: 'lose', fault: 'unsent-ambiguous', lookup: true, next: 201, requests: 2, effects: 1 },
    { write: 'lookup:absent', how: 'fail', fault: 'unsent-ambiguous', lookup: true, next: 201, requests: 2, effects: 1 },
    { write: 'lookup:resend', how: 'lose', fault: 'ambiguous', dedupes: true, next: 201, requests: 2, effects: 1 },
    { write: 'lookup:resend', how: 'fail', fault: 'ambiguous', dedupes: true, next: 201, requests: 2, effects: 1 },
  ];
  for (const c of cases) {
    it(`${c.write} ${c.how === 'lose' ? 'applied, its ack lost' : 'failed, not applied'}${c.lookup === true ? ', with a lookup' : ''}: StoreError; another process finishes at once`, async () => {
      if (c.dedupes === true) {
        await provider.close();
        provider = await startProvider();
      }
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-release-${c.write}-${c.how}`;
      const base: OnceClientOptions = { providerDedupes: c.dedupes === true, ...(c.lookup === true ? { lookups: { [ACTION]: lookupByRef(provider.url) } } : {}) };
      if (c.fault === 'crashed') {
        provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
        await caught(order(clientOn(store, { retry: { maxAttempts: 1 } }), ref));
        const left = await inner.get(idOf(ref));
        if (left === undefined) throw new Error('no record');
        await inner.compareAndSet(left.id, left.generation, { ...left, generation: left.generation + 1, lease: { owner: 'crashed', expiresAt: Date.now() - 1 } });
      }
      if (c.fault === 'ambiguous') provider.fault({ kind: 'error_after_commit', status: 502, match: { ref } });
      if (c.fault === 'retryable') provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
      if (c.fault === 'unsent-ambiguous') provider.fault({ kind: 'reset_before_commit', match: { ref } });
      plan[c.how] = c.write;

      expect(await caught(order(clientOn(store, { ...base, leaseMs: 30_000, retry: { maxAttempts: c.maxAttempts ?? 3 } }), ref))).toBeInstanceOf(StoreError);
      expect(plan.lost).toEqual([c.how === 'lose' ? c.write : `failed ${c.write}`]);
      const left = await inner.get(idOf(ref));
      expect(left?.lease).toBeNull();
      expect(left?.error?.code).toBe('STORE_ERROR');

      const other = clientOn(store, { ...base, inFlightWaitMs: 100 });
      if (c.next === 'ambiguous') expect(await caught(order(other, ref))).toBeInstanceOf(AmbiguousOutcomeError);
      else expect((await order(other, ref)).status).toBe(c.next);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(c.requests);
      expect(provider.effectsFor(ref)).toBe(c.effects);
    });
  }
});

describe('on SQLite (records serialised, read back parsed): a write applied, its ack lost, is still known as ours', () => {
  it("a 503's write: the lease is released; a fresh client on the file sends once, at once", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.cleanup());
    const path = join(dir.dir, 'once.db');
    const inner = sqliteStore({ path });
    cleanups.push(() => inner.close());
    const { store, plan } = lossy(inner);
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'LA-sqlite-503' } });
    plan.lose = 'attempt_finished:retryable';
    expect(await caught(order(clientOn(store, { leaseMs: 30_000 }), 'LA-sqlite-503'))).toBeInstanceOf(StoreError);
    expect((await inner.get(idOf('LA-sqlite-503')))?.lease).toBeNull();
    expect((await order(clientOn(sqliteStore({ path }), { inFlightWaitMs: 100 }), 'LA-sqlite-503')).status).toBe(201);
    expect(provider.effectsFor('LA-sqlite-503')).toBe(1);
  });
});

describe('a definitive answer in hand (a 201, a 422, a lookup\'s found) whose write the store fails or loses the ack of', () => {
  // The provider answered and this process holds the Response: the write that records it is tried
  // again a few times on a StoreError. A retry after a lost ack finds its own write landed (the
  // record says succeeded) and returns; one after a blip applies it. Before the fix the caller got
  // the StoreError in every case below, though the provider had answered (and the record, after a
  // lost ack, said succeeded).
  type Case = { write: string; how: 'lose' | 'fail'; status: number; fault?: 'ambiguous' | 'terminal'; state: 'succeeded' | 'failed' };
  const cases: Case[] = [
    { write: 'attempt_finished:success', how: 'lose', status: 201, state: 'succeeded' },
    { write: 'attempt_finished:success', how: 'fail', status: 201, state: 'succeeded' },
    { write: 'attempt_finished:terminal', how: 'lose', status: 422, fault: 'terminal', state: 'failed' },
    { write: 'attempt_finished:terminal', how: 'fail', status: 422, fault: 'terminal', state: 'failed' },
    { write: 'lookup:found', how: 'lose', status: 200, fault: 'ambiguous', state: 'succeeded' },
    { write: 'lookup:found', how: 'fail', status: 200, fault: 'ambiguous', state: 'succeeded' },
  ];
  for (const c of cases) {
    it(`${c.write} ${c.how === 'lose' ? 'applied, its ack lost' : 'failed once, not applied'}: the caller gets the ${c.status}; the record says ${c.state}`, async () => {
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-in-hand-${c.write}-${c.how}`;
      if (c.fault === 'ambiguous') provider.fault({ kind: 'error_after_commit', status: 502, match: { ref } });
      if (c.fault === 'terminal') provider.fault({ kind: 'status_before_commit', status: 422, match: { ref } });
      const client = clientOn(store, { lookups: { [ACTION]: lookupByRef(provider.url) } });
      plan[c.how] = c.write;

      const res = await order(client, ref);
      expect(res.status).toBe(c.status);
      if (c.status !== 422) expect(await res.json()).toMatchObject({ ref });
      expect(plan.lost).toEqual([c.how === 'lose' ? c.write : `failed ${c.write}`]);
      expect(await inner.get(idOf(ref))).toMatchObject({ state: c.state, lease: null, result: { status: c.status } });
      expect((await inner.get(idOf(ref)))?.evidence.filter((e) => e.kind === 'stale_write' || e.kind === 'late_response')).toEqual([]);
      // replayed from then on, nothing sent
      expect((await order(clientOn(store), ref)).status).toBe(c.status);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
      expect(provider.effectsFor(ref)).toBe(c.status === 422 ? 0 : 1);
    });
  }

  // The store refuses the write every time: the StoreError stands (no success is returned while the
  // record says in_flight), the lease is released, and the next call reconciles: never a resend
  // without a lookup's "absent" or provider dedupe.
  for (const next of ['lookup', 'dedupes', 'neither'] as const) {
    it(`a 201 whose write fails every time: StoreError, the record stays in_flight, unleased; the next call (${next}) settles it without a second effect`, async () => {
      if (next === 'dedupes') {
        await provider.close();
        provider = await startProvider();
      }
      const inner = memoryStore();
      const { store, plan } = lossy(inner);
      const ref = `LA-in-hand-down-${next}`;
      const client = clientOn(store, { leaseMs: 30_000 });
      plan.fail = 'attempt_finished:success';
      plan.failTimes = 100;
      expect(await caught(order(client, ref))).toBeInstanceOf(StoreError);
      expect(plan.lost.length).toBeGreaterThan(1); // tried again
      expect(provider.effectsFor(ref)).toBe(1);
      expect(await inner.get(idOf(ref))).toMatchObject({ state: 'in_flight', lease: null });
      plan.fail = '';

      const other = clientOn(store, { inFlightWaitMs: 100, providerDedupes: next === 'dedupes', ...(next === 'lookup' ? { lookups: { [ACTION]: lookupByRef(provider.url) } } : {}) });
      if (next === 'neither') expect(await caught(order(other, ref))).toBeInstanceOf(AmbiguousOutcomeError);
      else expect((await order(other, ref)).status).toBe(next === 'lookup' ? 200 : 201);
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(next === 'dedupes' ? 2 : 1);
    });
  }

  it('a store slow to fail (1.2 s a write) is not asked again: the StoreError comes after one try, not four', async () => {
    const { store, plan } = lossy(memoryStore());
    const client = clientOn(store);
    plan.fail = 'attempt_finished:success';
    plan.failTimes = 100;
    plan.delayMs = 1_200;
    const startedAt = Date.now();
    expect(await caught(order(client, 'LA-in-hand-slow'))).toBeInstanceOf(StoreError);
    expect(plan.lost).toEqual(['failed attempt_finished:success']);
    expect(Date.now() - startedAt).toBeLessThan(2_500);
    expect(provider.effectsFor('LA-in-hand-slow')).toBe(1);
  });
});

function abortAfter(ms: number, reason: unknown): AbortSignal {
  const controller = new AbortController();
  setTimeout(() => controller.abort(reason), ms);
  return controller.signal;
}
