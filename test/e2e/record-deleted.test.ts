/**
 * A record deleted while its request is on the wire (a row deleted by hand; in browsers, the
 * site's data cleared): the owner's next write puts it back, so a later call with the same scope
 * finds it and replays or waits for it, rather than sending afresh under a new key, which the
 * provider would count as a second order. Counted at the loopback provider.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { recordId } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, tempDir, until, wait } from '../helpers/setup.js';

const ACTION = 'create-order';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
let path: string;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  tmp = tempDir();
  path = join(tmp.dir, 'once.db');
  provider = await startProvider();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await provider.close();
  tmp.cleanup();
});

function client(options: OnceClientOptions = {}): OnceClient {
  const c = createClient({ store: sqliteStore({ path }), lookups: { [ACTION]: lookupByRef(provider.url) }, settleMs: 20, ...options });
  cleanups.push(() => c.close());
  return c;
}

const order = (c: OnceClient, ref: string): Promise<Response> => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } });
const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });
/** Requests with a body of that ref (the lookups carry none). */
const posts = (ref: string): number => provider.requests.filter((r) => r.ref === ref).length;

/** Deletes the record's row through a handle of its own, as an operator or a cleanup job would; returns the rows deleted. */
function deleteRow(ref: string): number {
  const db = new Database(path);
  try {
    return db.prepare('DELETE FROM oncefetch_records WHERE id = ?').run(idOf(ref)).changes;
  } finally {
    db.close();
  }
}

/** The record's state as stored, read through a handle of its own. */
function storedState(ref: string): string | undefined {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT state FROM oncefetch_records WHERE id = ?').get(idOf(ref)) as { state: string } | undefined)?.state;
  } finally {
    db.close();
  }
}

describe('a record deleted while its request is on the wire', () => {
  it("the call returns the provider's 201 and writes the record back; the next call with the same ref replays it: 1 effect, 1 POST", async () => {
    const c = client();
    provider.fault({ kind: 'delay_after_commit', delayMs: 500, match: { ref: 'DEL-1' } });
    const first = order(c, 'DEL-1');
    await until(() => provider.effectsFor('DEL-1') === 1);
    expect(deleteRow('DEL-1')).toBe(1);
    const res = await first;
    expect(res.status).toBe(201);
    expect(storedState('DEL-1')).toBe('succeeded');
    const again = await order(client(), 'DEL-1');
    expect(again.status).toBe(201);
    expect(await again.json()).toEqual(await res.json());
    expect(provider.effectsFor('DEL-1')).toBe(1);
    expect(posts('DEL-1')).toBe(1);
  });

  it('a lease renewal writes it back while the request is still out: a call from another client waits for it rather than sending: 1 effect, 1 POST', async () => {
    // leaseMs 300: renewed every 100 ms while the provider holds its answer for 1.2 s
    const a = client({ leaseMs: 300 });
    provider.fault({ kind: 'delay_after_commit', delayMs: 1_200, match: { ref: 'DEL-2' } });
    const first = order(a, 'DEL-2');
    await until(() => provider.effectsFor('DEL-2') === 1);
    expect(deleteRow('DEL-2')).toBe(1);
    await wait(250);
    expect(storedState('DEL-2')).toBe('in_flight');
    const second = order(client({ leaseMs: 300 }), 'DEL-2');
    const [r1, r2] = await Promise.all([first, second]);
    expect([r1.status, r2.status]).toEqual([201, 201]);
    expect(provider.effectsFor('DEL-2')).toBe(1);
    expect(posts('DEL-2')).toBe(1);
  });
});

// Review of 1e58272: a call that lost its lease with its 201 in hand settles the record it takes back with that 201.
// When the row was deleted meanwhile and claimed afresh (a new key minted, its own attempt ambiguous), the 201
// answers a request under the old key, not this record's: it is no proof about this record's attempt, which
// is left unreconciled while the record claimed a success (and explain counted one send, no duplicate).
describe('a record deleted and claimed afresh under a new key while the first call waits for its answer', () => {
  it("that call's late 201 (old key) does not settle the new record: AmbiguousOutcomeError, the record stays ambiguous for a reconciliation", async () => {
    const ref = 'DEL-KEY';
    provider.fault({ kind: 'delay_before_commit', delayMs: 800, match: { ref } });
    provider.fault({ kind: 'status_before_commit', status: 502, match: { ref } });
    const a = client({ lookups: {} });
    const first = order(a, ref).catch((e: unknown) => e);
    await until(() => posts(ref) === 1);
    const oldKey = (await a.get({ action: ACTION, ref }))?.key;
    expect(deleteRow(ref)).toBe(1);
    const c = client({ lookups: {} });
    expect(await order(c, ref).catch((e: unknown) => e)).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const fresh = await c.get({ action: ACTION, ref });
    expect(fresh?.key).not.toBe(oldKey);
    expect(fresh?.state).toBe('ambiguous');
    expect(await first).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    const after = await c.get({ action: ACTION, ref });
    expect(after).toMatchObject({ state: 'ambiguous', key: fresh?.key, result: null });
    // the late 201 is on it as evidence all the same
    expect(after?.evidence).toContainEqual(expect.objectContaining({ kind: 'late_response', status: 201 }));
    expect(posts(ref)).toBe(2);
  });
});
