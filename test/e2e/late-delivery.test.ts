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
import { RetriesExhaustedError, StoreError } from '../../src/index.js';
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
  // after a renewal found the lease lost, when the last one's failure used to read as a lost lease.
  it.each([1, 4])('whose write as evidence the store fails %i time(s): the call that holds it does not send again', async (failures) => {
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
    // Kept on a try: A follows the reopened record, a lookup finds the order. Never kept: A's call
    // ends with the StoreError, and the record stays as B left it.
    if (failures === 1) expect((endedA as Response).status).toBe(200);
    else expect(endedA).toBeInstanceOf(StoreError);
    await new Promise((r) => setTimeout(r, 300));
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(2);
  });
});
