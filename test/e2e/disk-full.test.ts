/**
 * A store that cannot write fails the call before anything is sent: the
 * provider sees nothing. Two ways to be full: a real SQLite file that may not
 * grow (`PRAGMA max_page_count`), and a store whose write that gates the send
 * (a claim or compare-and-set that opens an attempt) fails with SQLITE_FULL. Once space is back,
 * the same call goes through with exactly one effect.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, createClient, isOnceError } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { newRecord, recordId, type OperationRecord } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider, type Provider } from '../../src/testing/provider.js';
import { lookupByRef, tempDir } from '../helpers/setup.js';

const ACTION = 'create-order';

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  try {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch {
        // the next cleanup still runs
      }
    }
    await provider.close();
  } finally {
    tmp.cleanup();
  }
});

function clientOn(store: OnceStore): OnceClient {
  const client = createClient({
    store,
    lookups: { [ACTION]: lookupByRef(provider.url) },
    retry: { baseDelayMs: 10, maxDelayMs: 50 },
  });
  cleanups.push(() => client.close());
  return client;
}

function order(client: OnceClient, ref: string): Promise<Response> {
  return client.fetch(`${provider.url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ref, sku: 'A-17' }),
    once: { action: ACTION, ref },
  });
}

/** A record of a past operation, `key` padded to `keyBytes` (the key is stored, not indexed). */
function pastRecord(ref: string, keyBytes: number) {
  return newRecord({
    scope: { tenant: 'default', action: ACTION, ref },
    key: 'k'.repeat(Math.max(1, keyBytes)),
    keySource: 'minted',
    fingerprint: '0'.repeat(64),
    request: null,
    owner: 'o',
    now: Date.now(),
    leaseMs: 0,
    retentionMs: 60_000,
  });
}

/**
 * Fills the file through the store, caps it at its current page count, then
 * tops up the remaining room with ever smaller records until not even a
 * one-byte key fits. The filler refs sort just before the ref the test claims
 * and are no longer than it, so the pages its row and index entries would go
 * to are the full ones.
 */
async function fillToTheBrim(store: OnceStore, handle: Database.Database): Promise<number> {
  let records = 0;
  for (let i = 0; i < 40; i++, records++) await store.claim(pastRecord(`B${String(i).padStart(3, '0')}`, 1_500));
  handle.pragma(`max_page_count = ${handle.pragma('page_count', { simple: true }) as number}`);
  let n = 0;
  for (const keyBytes of [2_048, 1_024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1]) {
    for (;;) {
      const error = await store.claim(pastRecord(`C${String(n++).padStart(3, '0')}`, keyBytes)).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (error === undefined) {
        records++;
        continue;
      }
      expect(String((error as Error).message)).toContain('SQLITE_FULL');
      break;
    }
  }
  return records;
}

/** True when this write opens a new attempt: the write that gates a send. */
function opensAttempt(record: OperationRecord): boolean {
  const last = record.attempts.at(-1);
  return record.state === 'in_flight' && last !== undefined && last.finishedAt === null && last.generation === record.generation;
}

/**
 * The real store, except that while `gate.full` it refuses the write that
 * opens an attempt with SQLITE_FULL: a `compareAndSet` to `in_flight`, or a
 * `claim` that already opens attempt 1 (the engine folds the first transition
 * into the claim).
 */
function gatedStore(real: OnceStore): { store: OnceStore; gate: { full: boolean; refused: string[] } } {
  const gate = { full: false, refused: [] as string[] };
  const refuse = (method: string, id: string): never => {
    gate.refused.push(method);
    throw new StoreError(`SQLite store ${real.name}: disk or database is full while updating record ${id} [SQLITE_FULL]: database or disk is full`);
  };
  const store: OnceStore = {
    name: real.name,
    // a claim writes only when the record is new (insert-if-absent)
    claim: async (record) =>
      gate.full && opensAttempt(record) && (await real.get(record.id)) === undefined ? refuse('claim', record.id) : real.claim(record),
    get: (id) => real.get(id),
    compareAndSet: async (id, expectedGeneration, next) =>
      gate.full && opensAttempt(next) ? refuse('compareAndSet', id) : real.compareAndSet(id, expectedGeneration, next),
    list: (query) => real.list(query),
    purge: (now) => real.purge(now),
    close: () => real.close(),
  };
  return { store, gate };
}

describe('a full store fails the call before anything is sent', () => {
  it('a real SQLite file that cannot grow: the claim fails with SQLITE_FULL → StoreError, the provider sees nothing', async () => {
    const path = join(tmp.dir, 'full.db');
    const handle = new Database(path);
    cleanups.push(() => handle.close());
    const store = sqliteStore({ path, database: handle });
    const client = clientOn(store);
    const filled = await fillToTheBrim(store, handle);

    const error = await order(client, 'DF-1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
    expect((error as Error).message).toMatch(/disk or database is full while claiming record .*\[SQLITE_FULL\]/);
    expect(provider.requests).toHaveLength(0);
    expect(provider.effects).toBe(0);
    expect(await store.get(recordId({ tenant: 'default', action: ACTION, ref: 'DF-1' }))).toBeUndefined();
    expect(handle.pragma('quick_check', { simple: true })).toBe('ok');

    // Space is back: the same call goes through, once.
    handle.pragma('max_page_count = 1073741823');
    const res = await order(client, 'DF-1');
    expect(res.status).toBe(201);
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
    console.log(`[disk full, file] ${filled} records filled the capped file; the claim failed with SQLITE_FULL; POSTs before space was back: 0, after: ${provider.requests.length}`);
  });

  it('the write that gates the send fails with SQLITE_FULL: nothing is sent, the error names the cause, the key survives', async () => {
    const { store, gate } = gatedStore(sqliteStore({ path: join(tmp.dir, 'once.db') }));
    const client = clientOn(store);

    // A new operation: its first gating write is refused.
    gate.full = true;
    const error = await order(client, 'DF-2').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
    expect((error as Error).message).toContain('SQLITE_FULL');
    expect(gate.refused).toHaveLength(1);
    expect(provider.requests).toHaveLength(0);
    // Whatever was written before the refused write opened no attempt.
    const before = await client.get({ action: ACTION, ref: 'DF-2' });
    expect(before?.attempts ?? []).toEqual([]);

    // Space is back: the same call sends once (with the key minted before the failure, if one was stored).
    gate.full = false;
    const res = await order(client, 'DF-2');
    expect(res.status).toBe(201);
    expect(provider.effects).toBe(1);
    const record = await client.get({ action: ACTION, ref: 'DF-2' });
    expect(provider.requests.map((r) => r.key)).toEqual([record!.key]);
    if (before !== undefined) expect(record!.key).toBe(before.key);
    expect((await order(client, 'DF-2')).status).toBe(201); // replayed from the store
    expect(provider.requests).toHaveLength(1);
    console.log(`[disk full, gating write, new operation] refused: ${gate.refused.join(', ')}; POSTs before space was back: 0, after: ${provider.requests.length}`);
  });

  it('a resumed operation whose transition to in_flight (compareAndSet) fails with SQLITE_FULL sends nothing more', async () => {
    const { store, gate } = gatedStore(sqliteStore({ path: join(tmp.dir, 'once.db') }));
    // First call: one attempt, answered 503, and the call gives up; the record stays pending, resumable.
    provider.fault({ kind: 'status_before_commit', status: 503, match: { ref: 'DF-3' } });
    const impatient = createClient({ store, retry: { maxAttempts: 1 } });
    cleanups.push(() => impatient.close());
    await expect(order(impatient, 'DF-3')).rejects.toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const pending = await impatient.get({ action: ACTION, ref: 'DF-3' });
    expect(pending).toMatchObject({ state: 'pending', lease: null });
    expect(provider.requests).toHaveLength(1);

    // Resumed while the disk is full: the compare-and-set to in_flight is refused, nothing goes out.
    const client = clientOn(store);
    gate.full = true;
    const error = await order(client, 'DF-3').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as Error).message).toContain('SQLITE_FULL');
    expect(gate.refused).toEqual(['compareAndSet']);
    expect(provider.requests).toHaveLength(1);
    const after = await client.get({ action: ACTION, ref: 'DF-3' });
    expect(after).toMatchObject({ state: 'pending', key: pending!.key });
    expect(after!.attempts).toHaveLength(pending!.attempts.length);

    // Space is back: one more send, same key, one effect.
    gate.full = false;
    expect((await order(client, 'DF-3')).status).toBe(201);
    expect(provider.effects).toBe(1);
    expect(provider.requests.map((r) => r.key)).toEqual([pending!.key, pending!.key]);
    console.log(`[disk full, gating write, resumed operation] refused: ${gate.refused.join(', ')}; POSTs: 1 before (503), 0 while full, ${provider.requests.length - 1} after`);
  });
});
