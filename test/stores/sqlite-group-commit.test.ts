/**
 * Group commit in the SQLite store: concurrent writes share one transaction,
 * each keeps its own semantics and its own failure, and every promise settles
 * only after the commit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { applyEvent, newRecord, type OperationRecord } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';

function sample(ref: string): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'c'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    now: 1_000,
    leaseMs: 30_000,
    retentionMs: 60_000,
  });
}

const started = (r: OperationRecord): OperationRecord => applyEvent(r, { type: 'attempt_started', attemptId: `att-${r.ref}` }, 1_001, 'owner');

/** Frames in the write-ahead log, read through a second connection. */
function walFrames(path: string): number {
  const db = new Database(path);
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
    return row?.log ?? -1;
  } finally {
    db.close();
  }
}

describe('sqliteStore group commit', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'oncefetch-group-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('32 concurrent claims share one transaction: far fewer WAL frames than 32 commits', async () => {
    const one = join(dir, 'one-by-one.db');
    const grouped = join(dir, 'grouped.db');
    const a = sqliteStore({ path: one });
    for (let i = 0; i < 32; i++) await a.claim(sample(`r${i}`));
    const b = sqliteStore({ path: grouped });
    const results = await Promise.all(Array.from({ length: 32 }, (_, i) => b.claim(sample(`r${i}`))));
    expect(results.every((r) => r.created)).toBe(true);
    const separate = walFrames(one);
    const shared = walFrames(grouped);
    // each commit appends at least one frame per page it touched
    expect(separate).toBeGreaterThanOrEqual(32);
    expect(shared).toBeLessThan(separate / 4);
    await a.close();
    await b.close();
  });

  it('writes of one turn apply in order with per-record compare-and-set', async () => {
    const store = sqliteStore({ path: join(dir, 'order.db') });
    const r = sample('r');
    const next = started(r);
    const rival = applyEvent(r, { type: 'cancel' }, 1_002, 'owner');
    // claim, then two writes against generation 1: the first wins, the second sees it
    const [claimed, first, second] = await Promise.all([
      store.claim(r),
      store.compareAndSet(r.id, r.generation, next),
      store.compareAndSet(r.id, r.generation, rival),
    ]);
    expect(claimed.created).toBe(true);
    expect(first).toEqual({ ok: true });
    expect(second).toEqual({ ok: false, current: next });
    expect(await store.get(r.id)).toEqual(next);
    await store.close();
  });

  it('a write that fails fails alone; the rest of its group commits', async () => {
    const path = join(dir, 'partial.db');
    const db = new Database(path);
    const store = sqliteStore({ path, database: db });
    const [a, bad, c] = [sample('a'), sample('bad'), sample('c')];
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON oncefetch_records WHEN NEW.id = '${bad.id.replaceAll("'", "''")}'
             BEGIN SELECT RAISE(ABORT, 'refused by test'); END`);
    const outcomes = await Promise.allSettled([store.claim(a), store.claim(bad), store.claim(c)]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const error = (outcomes[1] as PromiseRejectedResult).reason as Error;
    expect(isOnceError(error)).toBe(true);
    expect(error.message).toMatch(/refused by test/);
    expect(await store.get(a.id)).toEqual(a);
    expect(await store.get(bad.id)).toBeUndefined();
    expect(await store.get(c.id)).toEqual(c);
    await store.close();
    db.close();
  });

  it('close() commits the writes already issued before the handle goes', async () => {
    const path = join(dir, 'close.db');
    const store = sqliteStore({ path });
    const late = sample('late');
    const pending = store.claim(late);
    await store.close();
    expect((await pending).created).toBe(true);
    const reopened = sqliteStore({ path });
    expect(await reopened.get(late.id)).toEqual(late);
    await reopened.close();
  });

  it("power-loss: synchronous stays FULL at rest, also after a group with no send-gating write", async () => {
    const path = join(dir, 'full.db');
    const db = new Database(path);
    const store = sqliteStore({ path, database: db, durability: 'power-loss' });
    const r = started(sample('r'));
    await store.claim(r); // in_flight: gates a send
    const done = applyEvent(r, { type: 'attempt_finished', class: 'success', status: 201, reason: 'ok', result: null }, 1_002, 'owner');
    const calls: string[] = [];
    const pragma = db.pragma.bind(db);
    db.pragma = ((source: string, options?: Database.PragmaOptions) => {
      calls.push(source);
      return pragma(source, options);
    }) as typeof db.pragma;
    await store.compareAndSet(r.id, r.generation, done); // an outcome: does not gate a send
    expect(calls).toEqual(['synchronous = NORMAL', 'synchronous = FULL']);
    calls.length = 0;
    const next = started(sample('s'));
    const noted = applyEvent(done, { type: 'evidence', kind: 'attempt', detail: 'x', status: null }, 1_003, 'owner');
    await Promise.all([store.claim(next), store.compareAndSet(r.id, done.generation, noted)]);
    expect(calls).toEqual([]); // a group with a send-gating write is fsynced whole
    const cancelled = applyEvent(sample('c'), { type: 'cancel' }, 1_004, 'owner');
    await store.claim(cancelled);
    expect(calls).toEqual([]); // a cancellation is an acknowledgment: fsynced too
    db.pragma = pragma as typeof db.pragma;
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    expect(await store.get(r.id)).toEqual(noted);
    await store.close();
    db.close();
  });
});
