/**
 * `settle` (the write that records an answer this process holds: a 201, a terminal 4xx, a lookup's
 * "found", a never_sent) tries a write the store fails again for about a second. Under a short lease
 * that is longer than the lease: this owner keeps it while it tries (renewed), so another caller
 * waits and replays instead of taking over a record whose answer is in hand. A renewal that finds
 * the answer's write landed (its ack lost) adopts it; the next try then returns it, never an
 * IllegalTransitionError. A renewal that finds the lease lost ends the tries: the new owner's record
 * is never overwritten, the answer is kept on it as evidence.
 *
 * Effects are counted at a loopback provider that does not dedupe (every POST is a new order), and
 * no lookup is configured unless a case says so: a record left in_flight reads as ambiguous to the
 * next owner, an AmbiguousOutcomeError for good.
 */
import { describe, expect, it } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore, OperationRecord } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest } from '../helpers/keyless-provider.js';
import { lookupByRef, orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';

/** Whether a write moves the record from `prev` to `next` as a renewal does (the lease's end, nothing else). */
function isRenewal(prev: OperationRecord | undefined, next: OperationRecord): boolean {
  if (prev === undefined || prev.lease === null || next.lease?.owner !== prev.lease.owner) return false;
  const same = (r: OperationRecord): string => JSON.stringify({ ...r, lease: null, generation: 0, updatedAt: 0 });
  return same(prev) === same(next);
}

/** Whether a write records the answer of the open attempt (`attempt_finished`). */
function isAnswer(prev: OperationRecord | undefined, next: OperationRecord): boolean {
  return prev !== undefined && prev.attempts.at(-1)?.finishedAt === null && next.attempts.length === prev.attempts.length && next.attempts.at(-1)?.finishedAt !== null;
}

type Step = 'ok' | 'fail' | 'lose';

/** Whether a write settles the record from a lookup's "found" (no attempt closed: the record succeeded). */
function isFound(prev: OperationRecord | undefined, next: OperationRecord): boolean {
  return prev !== undefined && prev.state !== 'succeeded' && next.state === 'succeeded' && !isAnswer(prev, next);
}

/**
 * A store whose writes of an attempt's answer follow `plan.answers` (one step a write, then `ok`),
 * and its writes of a lookup's "found" `plan.founds`:
 * `fail` is not applied, `lose` is applied and its ack lost, both after `plan.answerDelayMs`; renewals
 * follow `plan.renewals` the same way (each told from the version it was computed from, which is not
 * the stored one after a takeover or a landed write). `plan.log` says what happened, in order. One
 * record a store.
 */
function scripted(inner: OnceStore) {
  const plan = { answers: [] as Step[], founds: [] as Step[], renewals: [] as Step[], answerDelayMs: 0, renewalDelayMs: 0, log: [] as string[], closed: false, afterClose: 0 };
  const versions = new Map<number, OperationRecord>();
  const wait = (ms: number): Promise<void> => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());
  const store: OnceStore = {
    name: 'scripted',
    claim: async (record) => {
      const res = await inner.claim(record);
      if (res.created) versions.set(record.generation, record);
      return res;
    },
    compareAndSet: async (id, expected, next) => {
      if (plan.closed) plan.afterClose++;
      // (the version the writer based `next` on, which a takeover or a landed write may have replaced)
      const prev = versions.get(expected);
      const kind = isAnswer(prev, next) ? 'answer' : isRenewal(prev, next) ? 'renewal' : isFound(prev, next) ? 'found' : 'other';
      const queue = kind === 'answer' ? plan.answers : kind === 'renewal' ? plan.renewals : kind === 'found' ? plan.founds : [];
      const step = queue.shift() ?? 'ok';
      const delayMs = kind === 'answer' || kind === 'found' ? plan.answerDelayMs : kind === 'renewal' ? plan.renewalDelayMs : 0;
      if (step === 'fail') {
        await wait(delayMs);
        plan.log.push(`${kind}:failed`);
        throw new StoreError(`scripted: ${kind} on ${id} failed (not applied)`, { cause: new Error('SQLITE_IOERR: disk I/O error') });
      }
      const res = await inner.compareAndSet(id, expected, next);
      if (res.ok) versions.set(next.generation, next);
      plan.log.push(`${kind}:${res.ok ? (step === 'lose' ? 'lost-ack' : 'ok') : 'refused'}`);
      if (step === 'lose' && res.ok) {
        await wait(delayMs);
        throw new StoreError(`scripted: the acknowledgement of ${kind} on ${id} was lost (the write was applied)`);
      }
      return res;
    },
    get: (id) => inner.get(id),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => {
      plan.closed = true;
      return inner.close();
    },
  };
  return { store, plan };
}

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));

function clientOn(store: OnceStore, options: OnceClientOptions = {}): OnceClient {
  const client = createClient({ store, settleMs: 20, leaseMs: 150, ...options, retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry } });
  cleanups.push(() => client.close().catch(() => undefined));
  return client;
}

function order(client: OnceClient, ref: string, signal?: AbortSignal): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, { ...orderInit(ref), ...(signal ? { signal } : {}), once: { action: ACTION, ref } });
}

/** What a call ended with, as a word: its status, or its error's name. */
const outcome = (call: Promise<Response>): Promise<string> =>
  call.then(
    (res) => String(res.status),
    (error: unknown) => (error instanceof Error ? error.name : String(error)),
  );

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });

describe('settle under a short lease: the owner that holds the answer keeps its lease while it tries', () => {
  it('a slow 201 write that fails three times (150 ms lease): another caller waits and replays the 201; one effect', async () => {
    // Before the fix: B took the lease over during settle's 400 ms wait, and with no lookup and no
    // provider dedupe both callers got AmbiguousOutcomeError though A held the 201.
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.answers = ['fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    const ref = 'SL-slow-201';
    const a = clientOn(store);
    const b = clientOn(store);
    const first = outcome(order(a, ref));
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3); // ~250 ms: past the lease taken at the claim
    const second = outcome(order(b, ref));
    expect({ a: await first, b: await second }).toEqual({ a: '201', b: '201' });
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    const record = await inner.get(idOf(ref));
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    expect(record?.evidence.filter((e) => e.kind === 'takeover' || e.kind === 'late_response' || e.kind === 'stale_write')).toEqual([]);
    expect(plan.log).toContain('renewal:ok');
  });
});

describe('a renewal or a try that finds the answer landed returns it; a lost lease ends the tries', () => {
  it('the 201 write applied, its ack lost slowly: a renewal adopts it first; the next try returns it (no IllegalTransitionError)', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    // The first try runs without a renewal timer (the usual single write); it fails, and the tries
    // that follow run under renewal: the second is applied, its ack lost after 120 ms, and a
    // renewal (every 50 ms) is queued behind it, before settle's third try.
    plan.answers = ['fail', 'lose'];
    plan.answerDelayMs = 120;
    const ref = 'SL-landed-renewal';
    const a = clientOn(store);
    expect(await outcome(order(a, ref))).toBe('201');
    expect(plan.log.slice(plan.log.indexOf('answer:lost-ack'))).toEqual(['answer:lost-ack', 'renewal:refused']);
    const record = await inner.get(idOf(ref));
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    expect(record?.evidence.filter((e) => e.kind === 'late_response' || e.kind === 'stale_write')).toEqual([]);
    expect(await outcome(order(clientOn(store), ref))).toBe('201');
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
  });

  for (const after of ['fail', 'ok'] as const) {
    it(`the lease lost all the same (renewals fail too), another caller took over; A's write after that would ${after === 'fail' ? 'fail' : 'be refused'}: the tries stop, A follows the new owner's view, never overwrites it`, async () => {
      const inner = memoryStore();
      const { store, plan } = scripted(inner);
      plan.answers = ['fail', 'fail', 'fail', ...(after === 'fail' ? ['fail', 'fail', 'fail'] as Step[] : [])];
      plan.answerDelayMs = 50;
      plan.renewals = Array<Step>(100).fill('fail');
      const ref = `SL-lost-${after}`;
      const a = clientOn(store);
      const b = clientOn(store);
      const startedAt = Date.now();
      let aEndedAt = 0;
      const first = outcome(order(a, ref)).finally(() => (aEndedAt = Date.now()));
      await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
      const second = outcome(order(b, ref));
      // the store is back once B took the lease over: A's next renewal finds the lease lost
      await until(async () => (await inner.get(idOf(ref)))?.evidence.some((e) => e.kind === 'takeover') === true);
      plan.renewals = [];
      // B: in_flight under an expired lease, no lookup, no provider dedupe: ambiguous; B stops so. A,
      // which holds the 201 of the request it sent, takes the record back once B let it go and records
      // that 201 (succeeded). Was (until A settled it with its own success): A ended AmbiguousOutcomeError
      // and the record stayed ambiguous, though A held the provider's 201 for this key.
      expect({ a: await first, b: await second }).toEqual({ a: '201', b: 'AmbiguousOutcomeError' });
      expect(aEndedAt - startedAt).toBeLessThan(900); // not after settle's whole budget
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
      const record = (await inner.get(idOf(ref))) as OperationRecord;
      expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { source: 'attempt', status: 201 } });
      // never overwritten by A's stale write: the attempt A sent stays open under the takeover; A's 201
      // was recorded only after B's stop let the record go
      expect(record.attempts.map((x) => x.finishedAt)).toEqual([null]);
      expect(record.evidence.some((e) => e.kind === 'takeover')).toBe(true);
      const stopped = record.evidence.find((e) => e.kind === 'stop')?.generation ?? Infinity;
      expect(record.evidence.find((e) => e.detail.startsWith("found: this call's own attempt"))?.generation).toBeGreaterThan(stopped);
      // the 201 is kept as evidence: by the write itself when the store takes it, else by A once it
      // takes the record back after B (it holds the 201: no later call may read the record as unsent)
      expect(record.evidence.some((e) => e.kind === 'late_response' && e.status === 201 && e.detail.startsWith('late success outcome'))).toBe(true);
    });
  }
});

describe("a lost lease, then the store fails settle's last write: a store failure reads as one", () => {
  it("A's terminal 422, its write failing throughout, the lease taken over meanwhile: A ends with the store's StoreError (its cause kept), not B's AmbiguousOutcomeError; nothing resent, B's record not overwritten", async () => {
    // Before the fix the last write's StoreError was reported as the lost lease: A followed B into an
    // AmbiguousOutcomeError ("the outcome is unknown") though it held the provider's 422 and only the
    // store had failed. (A success still follows the new owner: see 'the lease lost all the same'.)
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.answers = ['fail', 'fail', 'fail', 'fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    plan.renewals = Array<Step>(100).fill('fail');
    const ref = 'SL-lost-422-store-fails';
    provider.fault({ kind: 'status_before_commit', status: 422, match: { ref } });
    const a = clientOn(store);
    const b = clientOn(store);
    const first = order(a, ref).then(
      (res) => res.status,
      (error: unknown) => error,
    );
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
    const second = outcome(order(b, ref));
    await until(async () => (await inner.get(idOf(ref)))?.evidence.some((e) => e.kind === 'takeover') === true);
    plan.renewals = [];
    const error = await first;
    expect(error).toBeInstanceOf(StoreError);
    // (it says the 422 was sent and not recorded: see test/unit/outcome-write-failed-message.test.ts)
    expect((error as Error).message).toBe(`scripted: answer on ${idOf(ref)} failed (not applied); attempt 1 was sent (answered 422) and its outcome could not be recorded: call again with the same ref, never a new one`);
    expect(((error as Error).cause as Error | undefined)?.message).toBe('SQLITE_IOERR: disk I/O error');
    // B: in_flight under an expired lease, no lookup, no provider dedupe: ambiguous, stopped so
    expect(await second).toBe('AmbiguousOutcomeError');
    expect(plan.log.filter((l) => l === 'answer:failed')).toHaveLength(4); // three tries, then the last after the lost lease
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(0);
    const record = (await inner.get(idOf(ref))) as OperationRecord;
    // never overwritten by A: its attempt stays open (possibly sent) on the record B took over and left ambiguous
    expect(record).toMatchObject({ state: 'ambiguous', lease: null });
    expect(record.attempts.map((x) => x.finishedAt)).toEqual([null]);
  });
});

describe("a lookup's 'found', its write failing throughout while the lease is taken over: the call follows the new owner", () => {
  /** A, whose lookup finds `ref`'s order after a 500 after commit, every write of that "found" failing (50 ms late) and no renewal landing. */
  function foundWriteFailing(ref: string) {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.founds = ['fail', 'fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    plan.renewals = Array<Step>(100).fill('fail');
    provider.fault({ kind: 'error_after_commit', match: { ref } });
    const a = clientOn(store, { lookups: { [ACTION]: lookupByRef(provider.url) } });
    return { inner, store, plan, a };
  }

  it("A's 500 after commit, its lookup finds the order; the 'found' write fails throughout and B takes over (no lookup: it stops ambiguous): A follows, takes the record back, finds it again and returns it, not a StoreError; nothing resent", async () => {
    // Before: settle's last write after the lost lease failed with a plain StoreError, which A ended
    // with, though its lookup had found the effect (only a held success of its own followed).
    const ref = 'SL-found-lost-store-fails';
    const { inner, store, plan, a } = foundWriteFailing(ref);
    const b = clientOn(store);
    const first = order(a, ref).then(
      (res) => res.status,
      (error: unknown) => error,
    );
    await until(() => plan.log.filter((l) => l === 'found:failed').length >= 3);
    const second = outcome(order(b, ref));
    await until(async () => (await inner.get(idOf(ref)))?.evidence.some((e) => e.kind === 'takeover') === true);
    plan.renewals = [];
    // B: the record ambiguous under an expired lease, no lookup, no provider dedupe: it stops so
    expect(await second).toBe('AmbiguousOutcomeError');
    // A: the order its lookup found (the lookup's 200), recorded once it took the record back
    expect(await first).toBe(200);
    expect(plan.log.filter((l) => l === 'found:failed')).toHaveLength(4); // three tries, then the last after the lost lease
    expect(plan.log).toContain('found:ok');
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
    const record = (await inner.get(idOf(ref))) as OperationRecord;
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { source: 'lookup', status: 200 } });
    // the "found" recorded once A took the record back after B's stop, never over B's lease
    const stopped = record.evidence.find((e) => e.kind === 'stop')?.generation ?? Infinity;
    expect(record.evidence.find((e) => e.kind === 'lookup' && e.detail.startsWith('found: '))?.generation).toBeGreaterThan(stopped);
  });

  it("the same, but the new owner is a recover() whose lookup says absent (an index not caught up) and puts the record back to pending: A, whose lookup found the order, does not send it again", async () => {
    // Before: A followed the pending record and sent attempt 2 (a second order at a provider that ignores
    // keys), though its own lookup had found the first; before 5a3006a it ended with the StoreError.
    const ref = 'SL-found-lost-recover-absent';
    const { inner, store, plan, a } = foundWriteFailing(ref);
    const b = clientOn(store, { settleMs: 0, lookups: { [ACTION]: async () => null } });
    const first = order(a, ref).then(
      (res) => res.status,
      (error: unknown) => (error instanceof Error ? error.name : error),
    );
    await until(() => plan.log.filter((l) => l === 'found:failed').length >= 3);
    await until(async () => ((await inner.get(idOf(ref)))?.lease?.expiresAt ?? Infinity) < Date.now());
    const report = await b.recover();
    expect(report.absent).toHaveLength(1);
    plan.renewals = [];
    const ended = await first;
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(ended).toBe(200);
    // taking the record back, A kept its found on it (the record no longer cleared for a send) and found the order again
    const record = (await inner.get(idOf(ref))) as OperationRecord;
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { source: 'lookup', status: 200 } });
    expect(record.attempts).toHaveLength(1);
    expect(record.evidence.some((e) => e.kind === 'late_response' && e.detail.startsWith("late success outcome (this call's lookup found it"))).toBe(true);
  });
});

describe("a cancel's never_sent, its write failing throughout while the lease is taken over: the call follows, and closes its attempt when it takes the record back", () => {
  it("A is cancelled during its claim (attempt 1 opened, nothing sent); closing that attempt fails throughout and B takes over (no lookup: it stops ambiguous): A takes the record back, closes its attempt as never sent and ends cancelled, not with a StoreError; nothing sent", async () => {
    // Before: settle's last write after the lost lease failed with a plain StoreError, which A ended
    // with; its attempt stayed open on the record, read as possibly sent (ambiguous) for good.
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    // (the never_sent closes the open attempt: an 'answer' to the scripted store) the early write,
    // settle's first try, two more, then the last after the lost lease
    plan.answers = ['fail', 'fail', 'fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    plan.renewals = Array<Step>(100).fill('fail');
    const ref = 'SL-cancel-unsent-lost-store-fails';
    const cancel = new AbortController();
    const claim = store.claim.bind(store);
    // the cancel comes while the claim (which opens attempt 1) is on its way to the store
    store.claim = (record) => {
      cancel.abort();
      return claim(record);
    };
    const a = clientOn(store);
    const b = clientOn(store);
    const first = a.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, signal: cancel.signal } }).then(
      (res) => res.status,
      (error: unknown) => error,
    );
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
    const second = outcome(order(b, ref));
    await until(async () => (await inner.get(idOf(ref)))?.evidence.some((e) => e.kind === 'takeover') === true);
    plan.renewals = [];
    // B: in_flight under an expired lease (A's open attempt), no lookup, no provider dedupe: it stops ambiguous
    expect(await second).toBe('AmbiguousOutcomeError');
    const error = await first;
    expect((error as Error).name).toBe('OperationCancelledError');
    expect(plan.log.filter((l) => l === 'answer:failed')).toHaveLength(5);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(0);
    const record = (await inner.get(idOf(ref))) as OperationRecord;
    expect(record).toMatchObject({ state: 'cancelled', lease: null });
    expect(record.attempts.map((x) => [x.class, x.reason])).toEqual([['not_sent', 'cancelled before it was sent']]);
  });
});

/**
 * A holds its own 201 (its lease lost to B, which stops ambiguous); taking the record back, A writes
 * that success as a "found" (its own 201, or, with `aOptions`' lookup, the lookup's), a write that
 * fails throughout while C takes the lease over. Returns how A and C ended, the plan's log and the record.
 */
async function heldLostTwice(ref: string, aOptions: OnceClientOptions = {}): Promise<{ ended: { a: string; c: string }; log: string[]; record: OperationRecord | undefined }> {
  const inner = memoryStore();
  const { store, plan } = scripted(inner);
  plan.answers = ['fail', 'fail', 'fail', 'fail', 'fail', 'fail'];
  plan.founds = ['fail', 'fail', 'fail', 'fail'];
  plan.answerDelayMs = 50;
  plan.renewals = Array<Step>(100).fill('fail');
  const a = clientOn(store, aOptions);
  const b = clientOn(store);
  const c = clientOn(store);
  const first = outcome(order(a, ref));
  await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
  const second = outcome(order(b, ref));
  const takeovers = async (): Promise<number> => (await inner.get(idOf(ref)))?.evidence.filter((e) => e.kind === 'takeover').length ?? 0;
  await until(async () => (await takeovers()) >= 1);
  plan.renewals = [];
  // A's renewal finds the lease lost; A follows B (which stops ambiguous) and takes the record back
  await until(() => plan.log.includes('renewal:refused'));
  plan.renewals = Array<Step>(100).fill('fail');
  expect(await second).toBe('AmbiguousOutcomeError');
  // A's "found" fails three times: its lease (renewals failing) runs out; C takes over
  await until(() => plan.log.filter((l) => l === 'found:failed').length >= 3);
  const third = outcome(order(c, ref));
  await until(async () => (await takeovers()) >= 2);
  plan.renewals = [];
  const ended = { a: await first, c: await third };
  return { ended, log: plan.log, record: await inner.get(idOf(ref)) };
}

describe("a call holding its own success, its lease lost again while it records that success: it follows again", () => {
  it("A holds its 201 (lease lost to B); taking the record back, its 'found' write fails throughout while C takes the lease over: A follows C and returns its 201, not a StoreError; one effect", async () => {
    // The held call's own success written as a lookup's "found" (settleOwn) is this call's own
    // success as much as its attempt_finished is: a store failure of settle's last write after the
    // lease was lost again follows the new owner (as before 269e46f), so A still ends with its 201.
    const ref = 'SL-held-lost-twice';
    const { ended, log, record } = await heldLostTwice(ref);
    expect(ended).toEqual({ a: '201', c: 'AmbiguousOutcomeError' });
    expect(log.filter((l) => l === 'found:failed')).toHaveLength(4); // three tries, then the last after the lost lease
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(record).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
  });

  it("the same when A's lookup finds the effect (A writes the lookup's 'found', not its own 201): A follows C instead of ending with a StoreError; one effect", async () => {
    const ref = 'SL-held-found-lost-twice';
    const { ended, log, record } = await heldLostTwice(ref, { lookups: { [ACTION]: lookupByRef(provider.url) } });
    expect(log.filter((l) => l === 'found:failed')).toHaveLength(4);
    // (A returns the effect as its lookup found it: the lookup's 200)
    expect(ended).toEqual({ a: '200', c: 'AmbiguousOutcomeError' });
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    expect(provider.effectsFor(ref)).toBe(1);
    expect(record).toMatchObject({ state: 'succeeded', lease: null });
  });
});

describe("the caller's abort and client.close() during settle's tries", () => {
  it("the caller aborts while settle waits to try again: the answer is recorded all the same; another caller replays it", async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.answers = ['fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    const ref = 'SL-abort';
    const a = clientOn(store);
    const controller = new AbortController();
    const first = outcome(order(a, ref, controller.signal));
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
    controller.abort(new Error('caller gave up'));
    const result = await first;
    expect(result).toBe('201');
    expect(await inner.get(idOf(ref))).toMatchObject({ state: 'succeeded', lease: null, result: { status: 201 } });
    expect(await outcome(order(clientOn(store), ref))).toBe('201');
    expect(provider.effectsFor(ref)).toBe(1);
    expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
  });

  // Before close() waited for the work in flight (and returned an answer in hand when stopped), this
  // call ended with a StoreError at close().
  it('client.close({ waitMs: 0 }) while settle waits to try again: the call ends at once with the 201 in hand (unrecorded), nothing written after close, no second effect later', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.answers = ['fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    const ref = 'SL-close';
    const a = clientOn(store);
    const first = outcome(order(a, ref));
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
    const closedAt = Date.now();
    await a.close({ waitMs: 0 });
    expect(await first).toBe('201');
    expect(Date.now() - closedAt).toBeLessThan(200);
    expect(plan.afterClose).toBe(0);
    expect(plan.log.filter((l) => l.startsWith('answer:'))).toEqual(['answer:failed', 'answer:failed', 'answer:failed']);
    expect(provider.effectsFor(ref)).toBe(1);
  });

  it('client.close() while settle waits to try again: it waits for the next try, which records the 201; the call returns it', async () => {
    const inner = memoryStore();
    const { store, plan } = scripted(inner);
    plan.answers = ['fail', 'fail', 'fail'];
    plan.answerDelayMs = 50;
    const ref = 'SL-close-graceful';
    const a = clientOn(store);
    const first = outcome(order(a, ref));
    await until(() => plan.log.filter((l) => l === 'answer:failed').length >= 3);
    let recorded: unknown;
    const close = inner.close.bind(inner);
    inner.close = async () => {
      recorded = (await inner.get(recordId({ tenant: 'default', action: ACTION, ref })))?.state;
      return close();
    };
    await a.close();
    expect(await first).toBe('201');
    expect(recorded).toBe('succeeded');
    expect(plan.afterClose).toBe(0);
    expect(plan.log.filter((l) => l.startsWith('answer:'))).toEqual(['answer:failed', 'answer:failed', 'answer:failed', 'answer:ok']);
    expect(provider.effectsFor(ref)).toBe(1);
  });
});
