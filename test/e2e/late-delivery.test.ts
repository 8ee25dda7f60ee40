/**
 * A superseded owner's late response after another owner's lookup said "absent": the record had
 * gone back to `pending` (resend allowed), but the late response shows that an earlier attempt
 * reached the provider after all. The record is reopened (`ambiguous`), so the next send waits for
 * a reconciliation. Two clients on one SQLite file; the second one's clock runs a minute ahead,
 * so the first one's live lease looks expired to it (a paused process, without the pause). The
 * provider ignores keys, so every POST that commits is a business effect.
 */
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { REPLAYED_HEADER, RetriesExhaustedError, TRUNCATED_HEADER } from '../../src/index.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import type { OnceClient, OnceEvent } from '../../src/index.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { scripted } from '../helpers/scripted-store.js';
import { lookupByRef, orderInit, sqliteClient, tempDir } from '../helpers/setup.js';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const clients: OnceClient[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider({ ignoreKeys: true });
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await provider.close();
  tmp.cleanup();
});

function client(options: Parameters<typeof sqliteClient>[1]): { client: OnceClient; events: OnceEvent[] } {
  const made = sqliteClient(join(tmp.dir, 'once.db'), { lookups: { 'create-order': lookupByRef(provider.url) }, ...options });
  clients.push(made.client);
  return made;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
}

describe('a late response from a superseded owner', () => {
  it('reopens a record a lookup had found absent: reconciled by lookup, never sent again', async () => {
    const ref = 'LATE-1';
    const scope = { action: 'create-order', ref };
    const call = (c: OnceClient) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: scope });
    // A's request is held before the commit; B's resend is refused without an effect.
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });

    const a = client({ owner: 'a', leaseMs: 300 });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, retry: { maxAttempts: 1 } });
    const first = call(a.client);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");

    // B takes A's (to B, expired) lease, asks the lookup while A's request is held: absent. B's own
    // send is refused and B stops with the record pending, resumable.
    const stopped = await call(b.client).catch((e: unknown) => e);
    expect(stopped).toBeInstanceOf(RetriesExhaustedError);
    expect(b.events.map((e) => e.type)).toEqual(expect.arrayContaining(['takeover', 'lookup']));
    expect(await b.client.get(scope)).toMatchObject({ state: 'pending', lease: null });
    expect(provider.effects).toBe(0);

    // A's held request commits and its 201 arrives late: evidence, and the record is reopened.
    // A's call follows the record: a lookup finds the order; nothing is sent a third time.
    const res = await first;
    expect(res.status).toBe(200); // the lookup's answer
    expect(((await res.json()) as { ref: string }).ref).toBe(ref);
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
    const record = await a.client.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    expect(a.events.map((e) => e.type)).toContain('late_evidence');
    // explain names the late answer (it said "after attempt 2 ended without an answer": attempt 2 got a 503)
    expect((await a.client.explain(scope))?.diagnosis.summary).toBe('A lookup found the effect (status 200); attempt 1 got its answer late (201, superseded owner a).');

    // And a later call replays it.
    const again = await call(b.client);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
  });

  // Once: the answer's write is tried again at once (settle) and keeps it. Four times (every try): the tries go on
  // after a renewal found the lease lost, when the last one's failure used to read as a lost lease; then the call
  // holds its 201 and follows the record (never sending), keeping the 201 there when it takes the record back. Six:
  // that write of its own fails too (settle's tries take three or four), and is tried again as an answer in hand.
  it.each([1, 4, 6])('whose write as evidence the store fails %i time(s): the call that holds it does not send again, nor does a later call', async (failures) => {
    const ref = `LATE-2-${failures}`;
    const scope = { action: 'create-order', ref };
    const call = (c: OnceClient) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: scope });
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });

    // A's store fails the write that keeps its late 201 (not applied: a blip, found by the chaos run's --store-faults).
    const aStore = scripted(sqliteStore({ path: join(tmp.dir, 'once.db') }));
    aStore.plan.armed = true;
    aStore.plan.steps['late_response'] = Array<'fail'>(failures).fill('fail');
    const a = client({ owner: 'a', leaseMs: 300, store: aStore.store });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, retry: { maxAttempts: 1 } });
    const first = call(a.client);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect(await call(b.client).catch((e: unknown) => e)).toBeInstanceOf(RetriesExhaustedError);
    expect(await b.client.get(scope)).toMatchObject({ state: 'pending', lease: null });

    // A's held request commits (one effect); its late 201 cannot be kept. A knows the request took
    // effect: it must not follow the pending record into a send.
    const endedA = await first.catch((e: unknown) => e);
    expect(new Set(aStore.plan.held)).toEqual(new Set(['late_response']));
    expect(aStore.plan.log.filter((l) => l === 'late_response:fail')).toHaveLength(failures);
    // Kept on a try: A follows the reopened record, a lookup finds the order. Never kept: A holds its
    // 201 and follows all the same, keeps it on the record when it takes it back (reopened), and the
    // lookup finds the order. Was: A ended with the StoreError (LateOutcomeNotKeptError), the record
    // stayed pending as B left it, with no trace of the 201, and the next call sent again (2 effects).
    expect(endedA instanceof Response ? endedA.status : String(endedA)).toBe(200);
    const record = await a.client.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'lookup' } });
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    const later = await call(b.client);
    expect(later.headers.get(REPLAYED_HEADER)).toBe('true');
    await new Promise((r) => setTimeout(r, 300));
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
  });
});

// The call that sent, got its 201 and lost its lease before recording it (the engine's `held`): B
// (its clock a minute ahead) took the operation over while A's request was held before the commit.
describe('the call that sent and got its 201 after another owner took over', () => {
  const post = (c: OnceClient, ref: string) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: 'create-order', ref } });
  const found = (body: string) => async (): Promise<Response> => new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });

  // Was: the record ended failed (B's same-key resend refused with a 400, no lookup asked), A's 201
  // kept on it as evidence, and explain said "No rule fits this failed record", with high confidence
  // and no contradiction, though the provider holds the order.
  // Since terminal-on-resend.test.ts's rule, B's 400 (an answer to a resend after A's unsettled attempt)
  // no longer ends the record failed: B ends AmbiguousOutcomeError (its cause the 400), the record stays
  // ambiguous, and A, holding its 201, settles it succeeded. A failed record as an earlier version wrote
  // it (rebuilt from this one) still gets the contradiction from explain.
  it('B\'s resend refused with a 400: ambiguous, A settles it with its 201; a failed record an earlier version wrote: explain flags the contradiction, the effect happened', async () => {
    const ref = 'HELD-failed';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    provider.fault({ kind: 'status_before_commit', status: 400, match: { ref } });
    const a = client({ owner: 'a', leaseMs: 300, lookups: {} });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, lookups: {}, providerDedupes: true, retry: { maxAttempts: 1 } });
    const first = post(a.client, ref).catch((e: unknown) => e);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect(await post(b.client, ref).catch((e: unknown) => e)).toMatchObject({ code: 'AMBIGUOUS_OUTCOME', cause: { status: 400 } });
    const endedA = await first;
    expect(endedA instanceof Response ? endedA.status : String(endedA)).toBe(201);
    expect(provider.effects).toBe(1);
    const record = await a.client.get(scope);
    expect(record?.state).toBe('succeeded');
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    if (record?.result == null) throw new Error('no record');
    // as the previous state machine left it: failed on B's 400, A's 201 only kept as evidence
    const legacy = {
      ...record,
      state: 'failed' as const,
      generation: record.generation + 1,
      result: { ...record.result, status: 400, statusText: 'Bad Request', source: 'attempt' as const },
      evidence: record.evidence.filter((e) => e.kind !== 'attempt' && e.kind !== 'stop'),
    };
    expect((await a.client.store.compareAndSet(record.id, record.generation, legacy)).ok).toBe(true);
    const x = await b.client.explain(scope);
    expect(x?.handoff.effects).toBe(1);
    expect(x?.diagnosis.evidence).toContain('contradiction: the record ended failed, but a superseded owner got 201 late: the request took effect');
    expect(x?.diagnosis.summary).toBe('The record ended failed, but owner a got 201 late, after a takeover: the request took effect; a person must look at it.');
    expect(x?.confidence).toBe('low');
    expect(x?.escalate).toBe(true);
    // (it began "No rule of the evidence-to-decision map fits a failed record": a rule fits, the contradiction)
    expect(x?.escalation).toMatch(
      /^The evidence contradicts the record's end state \(failed\): the request took effect; check it\. At the provider: 1 effect for ref 'HELD-failed' \(key …\w{4}\)\. Set right by hand what was done because the record said failed \(a new ref for the same intent, say\)\. Contradictory evidence: the record ended failed, but a superseded owner got 201 late: the request took effect\.$/,
    );
  });

  // Was: A's call returned B's record marked as a replay (oncefetch-replayed: true), though it is the call that sent.
  it('B recorded the success (its lookup found it): A returns it, not marked as a replay', async () => {
    const ref = 'HELD-found';
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    const a = client({ owner: 'a', leaseMs: 300 });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, lookups: { 'create-order': found('{"found":true}') } });
    const first = post(a.client, ref);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect((await post(b.client, ref)).status).toBe(200);
    const res = await first;
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER), body: await res.text() }).toEqual({ status: 200, replayed: null, body: '{"found":true}' });
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
    // a later call is a replay
    expect((await post(b.client, ref)).headers.get(REPLAYED_HEADER)).toBe('true');
  });

  // Was: A's call returned B's truncated body (a replay, marked truncated) though it held its own 201 whole.
  it('B recorded the success, its body cut by maxStoredBodyBytes: A returns its own 201, whole', async () => {
    const ref = 'HELD-cut';
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    const a = client({ owner: 'a', leaseMs: 300, maxStoredBodyBytes: 8 });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, maxStoredBodyBytes: 8, lookups: { 'create-order': found(`{"found":"${'x'.repeat(64)}"}`) } });
    const first = post(a.client, ref);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect((await post(b.client, ref)).status).toBe(200);
    const res = await first;
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER), truncated: res.headers.get(TRUNCATED_HEADER) }).toEqual({ status: 201, replayed: null, truncated: null });
    expect(((await res.json()) as { ref: string }).ref).toBe(ref);
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
  });

  // Was: "the lookup ... said absent, but a superseded owner got a success for it late", the superseded owner being this call;
  // then (until this change) AmbiguousOutcomeError "said absent, but this call, its lease taken over, got a success for it late",
  // the record left ambiguous though A holds the provider's 201 for this key: A now records it (succeeded) and returns it.
  it('A takes the record back and its lookup says absent: A records its own 201 (succeeded) and returns it; a later call replays it, nothing sent', async () => {
    const ref = 'HELD-absent';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref } });
    const absent = { 'create-order': async (): Promise<null> => null };
    const a = client({ owner: 'a', leaseMs: 300, settleMs: 0, lookups: absent });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, settleMs: 0, lookups: absent, retry: { maxAttempts: 1 } });
    const first = post(a.client, ref);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect(await post(b.client, ref).catch((e: unknown) => e)).toBeInstanceOf(RetriesExhaustedError);
    const res = await first;
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER) }).toEqual({ status: 201, replayed: null });
    expect(((await res.json()) as { ref: string }).ref).toBe(ref);
    const record = await a.client.get(scope);
    expect(record).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 }, lease: null });
    // (it said "Attempt 2 got 201": attempt 2 got a 503)
    const x = await a.client.explain(scope);
    expect(x?.diagnosis.summary).toBe('Attempt 1 got its answer late (201, superseded owner a), and that owner recorded it when it took the record back; later calls replay it.');
    // (the note A wrote when it recorded its own 201 was left out of the timeline)
    expect(x?.diagnosis.evidence.at(-1)).toMatch(/^own success at \S+: a's call recorded its own attempt's 201 \(no lookup found it\): this call's own attempt got it; its write had lost the lease to another owner$/);
    expect(record?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', owner: 'a', status: 201 }));
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
    // a later call replays it: nothing sent
    const again = await post(b.client, ref);
    expect({ status: again.status, replayed: again.headers.get(REPLAYED_HEADER) }).toEqual({ status: 201, replayed: 'true' });
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
  });

  // DESIGN §8: a cancel requested while an attempt may have been delivered is decided by the outcome; delivery won.
  it('B left it ambiguous and a cancel was requested: A records its own 201 all the same (delivery won); cancel() then says delivered', async () => {
    const ref = 'HELD-cancel';
    const scope = { action: 'create-order', ref };
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    const down = {
      'create-order': async (): Promise<never> => {
        throw new Error('lookup service down');
      },
    };
    const a = client({ owner: 'a', leaseMs: 300, lookups: down });
    const b = client({ owner: 'b', now: () => Date.now() + 60_000, lookups: down });
    const first = post(a.client, ref);
    await until(() => provider.requests.length === 1, "A's request to reach the provider");
    expect(await post(b.client, ref).catch((e: unknown) => e)).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(await b.client.cancel(scope)).toEqual({ outcome: 'undecided', state: 'ambiguous' });
    const res = await first;
    expect({ status: res.status, replayed: res.headers.get(REPLAYED_HEADER) }).toEqual({ status: 201, replayed: null });
    expect(await b.client.get(scope)).toMatchObject({ state: 'succeeded', result: { source: 'attempt', status: 201 } });
    expect(await b.client.cancel(scope)).toEqual({ outcome: 'delivered', state: 'succeeded' });
    expect((await post(b.client, ref)).headers.get(REPLAYED_HEADER)).toBe('true');
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
  });
});
