/**
 * A superseded owner's late success lands while the new owner is busy: during its own attempt, or
 * during its lookup. Found by a review of the first late-delivery fix, which only reopened a record
 * that was pending at that very moment: the new owner's 503 (or its lookup's "absent", asked before
 * the late 201) then cleared the record for a send without reconciliation, a second effect; and a
 * cancel said `cancelled`. A late success now keeps the record from being cleared for a send until
 * a lookup finds it, and contradicts any "absent". Memory store; effects are counted at the fakes.
 */
import { describe, expect, it } from 'vitest';
import { OwnedRecord } from '../../src/engine/owned.js';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import { applyEvent, newRecord } from '../../src/operation/record.js';
import type { LookupFn, OnceClient } from '../../src/index.js';

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
const tick = (ms = 10): Promise<void> => new Promise((r) => setTimeout(r, ms));
const init = (ref: string) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}', once: { action: 'order', ref } });

/**
 * A sends; its request commits (an effect) but its 201 comes back only when released. B (its
 * clock a minute ahead, so A's lease looks expired) takes over, and `bFetch`/`bLookup` decide when
 * A's late 201 lands. A gives up as soon as it has kept the late 201 as evidence.
 */
function twoOwners(ref: string, b: { fetch: (release: () => Promise<void>) => Promise<Response>; lookup?: (release: () => Promise<void>) => Promise<Response | null>; maxAttempts: number }) {
  const store = memoryStore();
  const counts = { effects: 0, posts: [] as string[] };
  const releaseA = deferred();
  const aKeptEvidence = deferred();
  const abortA = new AbortController();
  const release = async (): Promise<void> => {
    releaseA.resolve();
    await aKeptEvidence.promise;
    await tick(20);
  };
  const a: OnceClient = createClient({
    store,
    owner: 'a',
    leaseMs: 300,
    fetch: (async () => {
      counts.posts.push('a');
      counts.effects++;
      await releaseA.promise;
      return new Response('{"id":1}', { status: 201 });
    }) as typeof fetch,
    onEvent: (e) => {
      if (e.type === 'late_evidence') {
        abortA.abort(new Error('A gives up'));
        aKeptEvidence.resolve();
      }
    },
  });
  const lookup: LookupFn = async () => (b.lookup === undefined ? null : b.lookup(release));
  const bClient: OnceClient = createClient({
    store,
    owner: 'b',
    now: () => Date.now() + 60_000,
    settleMs: 0,
    retry: { maxAttempts: b.maxAttempts, baseDelayMs: 1, maxDelayMs: 1, budget: false },
    lookups: { order: lookup },
    fetch: (async () => {
      counts.posts.push(`b${counts.posts.length}`);
      return b.fetch(release);
    }) as typeof fetch,
  });
  const first = a.fetch('https://p.test/orders', { ...init(ref), signal: abortA.signal }).catch((e: unknown) => e);
  return { store, counts, a, b: bClient, first };
}

/** B's send: lets A's late 201 land, then the provider refuses B's request (503, nothing done). */
async function busyOnceLateLanded(release: () => Promise<void>): Promise<Response> {
  await release();
  return new Response('busy', { status: 503 });
}

async function started(counts: { posts: string[] }): Promise<void> {
  for (let i = 0; i < 100 && counts.posts.length === 0; i++) await tick();
}

describe("a superseded owner's late success", () => {
  it("landing during the new owner's attempt, which the provider refuses (503): no send without a lookup that settles it", async () => {
    const { counts, b, first } = twoOwners('L-1', {
      maxAttempts: 3,
      fetch: busyOnceLateLanded,
    });
    await started(counts);
    const error = await b.fetch('https://p.test/orders', init('L-1')).catch((e: unknown) => e);
    await first;
    expect(error).toBeInstanceOf(AmbiguousOutcomeError); // its lookup says absent, the late 201 says otherwise
    expect(counts.posts).toEqual(['a', 'b1']);
    expect(counts.effects).toBe(1);
    expect((await b.get({ action: 'order', ref: 'L-1' }))?.state).toBe('ambiguous');
  });

  it('then a cancel is undecided, never cancelled', async () => {
    const { counts, b, first } = twoOwners('L-2', {
      maxAttempts: 1,
      fetch: busyOnceLateLanded,
    });
    await started(counts);
    await b.fetch('https://p.test/orders', init('L-2')).catch(() => undefined);
    await first;
    const cancelled = await b.cancel({ action: 'order', ref: 'L-2' }, { waitMs: 50 });
    expect(cancelled.outcome).not.toBe('cancelled');
    expect(counts.effects).toBe(1);
  });

  it("landing while the new owner's lookup is out: its \"absent\" is contradicted, nothing is sent", async () => {
    const { counts, b, first } = twoOwners('L-3', {
      maxAttempts: 3,
      fetch: async () => {
        counts.effects++;
        return new Response('{"id":2}', { status: 201 });
      },
      lookup: async (release) => {
        await release();
        return null; // asked before A's request committed
      },
    });
    await started(counts);
    const error = await b.fetch('https://p.test/orders', init('L-3')).catch((e: unknown) => e);
    await first;
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).message).toMatch(/said absent, but a superseded owner got a success for it late/);
    expect(counts.posts).toEqual(['a']);
    expect(counts.effects).toBe(1);
  });

  it('a lookup that finds it settles the record: succeeded, replayed from then on', async () => {
    const { counts, b, first } = twoOwners('L-4', {
      maxAttempts: 3,
      fetch: busyOnceLateLanded,
      lookup: async () => (counts.posts.length > 1 ? new Response('{"id":1}', { status: 200 }) : null),
    });
    await started(counts);
    const res = await b.fetch('https://p.test/orders', init('L-4'));
    await first;
    expect(res.status).toBe(200);
    expect(counts.effects).toBe(1);
    expect((await b.get({ action: 'order', ref: 'L-4' }))?.state).toBe('succeeded');
  });
});

// Regression (second review): recover() computed its settle window before its lookup and never
// looked again, so a late ambiguous end landing during that lookup was "settled" by its "absent".
// The "absent" now carries when it was asked; the record refuses it if a late response landed since.
describe('an "absent" asked before a late response landed', () => {
  const scope = { tenant: 'default', action: 'order', ref: 'R-1' };
  const base = () =>
    applyEvent(
      newRecord({ scope, key: 'k-1', keySource: 'minted', fingerprint: 'f'.repeat(64), request: { method: 'POST', url: 'https://p.test/orders' }, owner: 'a', now: 0, leaseMs: 300, retentionMs: 86_400_000 }),
      { type: 'attempt_started', attemptId: 'att-a' },
      0,
      'a',
    );

  it('settles nothing: the record stays ambiguous; asked after it, it clears the record', () => {
    const taken = applyEvent(base(), { type: 'acquire', owner: 'b', leaseExpiresAt: 20_300 }, 20_000, 'b');
    const late = applyEvent(taken, { type: 'evidence', kind: 'late_response', detail: 'late ambiguous outcome (attempt timeout) from a superseded owner', status: null }, 20_050, 'a');
    // generations, not times: the superseded owner's clock may run ahead or behind
    expect(applyEvent(late, { type: 'lookup_absent', detail: 'x', askedGeneration: taken.generation }, 20_100, 'b').state).toBe('ambiguous');
    expect(applyEvent(late, { type: 'lookup_absent', detail: 'x', askedGeneration: late.generation }, 21_600, 'b').state).toBe('pending');
  });

  it('recover(): a late ambiguous end during its lookup leaves the operation still ambiguous, not absent', async () => {
    const store = memoryStore();
    const t = { now: 0 };
    await store.claim(base());
    const a = new OwnedRecord(base(), store, 'a', () => t.now); // alive but paused, its attempt on the wire
    let lateDuringLookup = false;
    const client = createClient({
      store,
      owner: 'r',
      now: () => t.now,
      settleMs: 1_000,
      lookups: {
        order: async () => {
          if (lateDuringLookup) {
            t.now += 5;
            await a.commit({ type: 'attempt_finished', class: 'ambiguous', status: null, reason: 'attempt timeout', result: null }).catch(() => undefined);
          }
          return null;
        },
      },
    });
    t.now = 10_000;
    expect((await client.recover()).stillAmbiguous).toHaveLength(1); // the takeover: too early to trust "absent"
    t.now = 20_000;
    lateDuringLookup = true;
    const report = await client.recover();
    expect(report).toMatchObject({ absent: [], stillAmbiguous: [{ ref: 'R-1' }] });
    expect((await client.get(scope))?.state).toBe('ambiguous');
  });
});

// Regression (third review): the first version compared the late response's time (the superseded
// owner's clock) with the asker's: with that owner's clock ahead, every "absent" was refused and,
// with providerDedupes (no settle wait), the new owner looked up in a tight loop, one evidence
// entry per round. Generations are compared now: two rounds at most.
describe("a superseded owner's clock running ahead", () => {
  it('does not make the new owner look up in a loop (frozen clock, providerDedupes)', async () => {
    const store = memoryStore();
    const clock = { a: 0, b: 0 };
    const releaseA = deferred();
    const aDone = deferred();
    const abortA = new AbortController();
    const a = createClient({
      store,
      owner: 'a',
      leaseMs: 300,
      now: () => clock.a,
      onEvent: (e) => {
        if (e.type === 'late_evidence') {
          abortA.abort(new Error('A gives up'));
          aDone.resolve();
        }
      },
    });
    const first = a
      .run({ action: 'order', ref: 'R', signal: abortA.signal }, async () => {
        await releaseA.promise;
        throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
      })
      .catch((e: unknown) => e);
    await tick(20);
    clock.b = 10_000; // past A's lease
    let lookups = 0;
    const b = createClient({ store, owner: 'b', leaseMs: 300, settleMs: 1_000, providerDedupes: true, now: () => clock.b, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1, budget: false, deadlineMs: 5_000 } });
    let effects = 0;
    const result = await b
      .run(
        {
          action: 'order',
          ref: 'R',
          lookup: async () => {
            lookups++;
            if (lookups === 1) {
              clock.a = clock.b + 60_000; // A's clock a minute ahead when its late answer lands
              releaseA.resolve();
              await aDone.promise;
            }
            if (lookups > 50) throw new Error('looping');
            return null;
          },
        },
        async () => {
          effects++;
          return 'ok';
        },
      )
      .catch((e: unknown) => e);
    await first;
    expect(lookups).toBeLessThanOrEqual(3);
    expect((await b.get({ action: 'order', ref: 'R' }))!.evidence.length).toBeLessThan(10);
    // a late *ambiguous* end, then a settled-enough absent: the same-key resend (the provider dedupes)
    expect(result).toBe('ok');
    expect(effects).toBe(1);
  });
});

// Regression: a late outcome whose record had moved on under a lease with its own owner's name was
// dropped without a trace (OwnedRecord re-applied attempt_finished to an ambiguous record and threw
// before writing). Two clients configured with one `owner` (documented as unsupported, but a late
// 201 must never be lost): the second takes the record over at once, its lookup is asked before
// the first's request commits; that "absent" then cleared the record and the second sent again.
describe('two clients sharing one owner id', () => {
  it("the first's late 201 is kept as evidence: the second's early \"absent\" settles nothing, one effect", async () => {
    const store = memoryStore();
    const counts = { effects: 0, posts: [] as string[] };
    const releaseFirst = deferred();
    const firstKept = deferred();
    const abortFirst = new AbortController();
    const first = createClient({
      store,
      owner: 'shared',
      fetch: (async () => {
        counts.posts.push('first');
        await releaseFirst.promise;
        counts.effects++; // commits as it answers
        return new Response('{"id":1}', { status: 201 });
      }) as typeof fetch,
      onEvent: (e) => {
        if (e.type === 'late_evidence') {
          abortFirst.abort(new Error('first gives up'));
          firstKept.resolve();
        }
      },
    });
    const second = createClient({
      store,
      owner: 'shared',
      settleMs: 0,
      retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, budget: false },
      lookups: {
        order: async () => {
          if (counts.posts.length === 1) {
            // asked before the first's request committed: "absent"; its 201 lands meanwhile
            releaseFirst.resolve();
            await firstKept.promise;
            await tick(20);
          }
          return null;
        },
      },
      fetch: (async () => {
        counts.posts.push('second');
        counts.effects++;
        return new Response('{"id":2}', { status: 201 });
      }) as typeof fetch,
    });
    const firstCall = first.fetch('https://p.test/orders', { ...init('S-1'), signal: abortFirst.signal }).catch((e: unknown) => e);
    await started(counts);
    const error = await second.fetch('https://p.test/orders', init('S-1')).catch((e: unknown) => e);
    await firstCall;
    expect(counts.posts).toEqual(['first']);
    expect(counts.effects).toBe(1);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    const rec = await second.get({ action: 'order', ref: 'S-1' });
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.evidence.filter((e) => e.kind === 'late_response')).toMatchObject([{ owner: 'shared', status: 201, detail: expect.stringMatching(/^late success outcome/) }]);
  });
});

// Without shared owners the same late outcome reaches the record as a superseded owner's: here the
// client's own recover() (as `<owner>/recover`) takes over the client's own send, whose lease it sees
// expired (the client's clock jumped), and settles it by a lookup before the 201 comes back.
describe("the client's own recover() over its own slow send", () => {
  it('the late 201 is kept as evidence; the caller gets the settled result; one effect', async () => {
    const store = memoryStore();
    const clock = { skewMs: 0 };
    const counts = { effects: 0, posts: [] as string[] };
    const release = deferred();
    const c = createClient({
      store,
      owner: 'solo',
      leaseMs: 300,
      now: () => Date.now() + clock.skewMs,
      lookups: { order: async () => (counts.effects > 0 ? new Response('{"id":1}', { status: 200 }) : null) },
      fetch: (async () => {
        counts.posts.push('a');
        counts.effects++;
        await release.promise;
        return new Response('{"id":1}', { status: 201 });
      }) as typeof fetch,
    });
    const call = c.fetch('https://p.test/orders', init('O-1'));
    await started(counts);
    clock.skewMs = 10_000; // the send's lease looks expired to this client's own recover()
    expect(await c.recover()).toMatchObject({ resolved: [{ ref: 'O-1' }] });
    release.resolve();
    const res = await call;
    expect(res.status).toBe(200); // the lookup's answer, replayed
    expect(counts).toEqual({ effects: 1, posts: ['a'] });
    const rec = await c.get({ action: 'order', ref: 'O-1' });
    expect(rec?.state).toBe('succeeded');
    expect(rec?.evidence.filter((e) => e.kind === 'late_response')).toMatchObject([{ owner: 'solo', status: 201, detail: expect.stringMatching(/^late success outcome/) }]);
  });
});
