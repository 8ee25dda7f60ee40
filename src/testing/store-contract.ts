/**
 * The store contract suite, `oncefetch/testing` (DESIGN §6): every store, ours
 * or a third party's, must pass it. Run it from a vitest test file:
 *
 * ```ts
 * import { describeStoreContract } from 'oncefetch/testing';
 * describeStoreContract('myStore', {
 *   durable: true,
 *   setup: () => {
 *     const location = freshLocation();
 *     return {
 *       open: () => myStore(location),
 *       corrupt: (id, raw) => writeRawRow(location, id, raw),
 *       teardown: () => removeLocation(location),
 *     };
 *   },
 * });
 * ```
 *
 * @module
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnceError } from '../errors.js';
import type { CorruptRow, ListQuery, OnceStore } from '../stores/contract.js';
import { DEFAULT_LIST_LIMIT } from '../stores/contract.js';
import {
  applyEvent,
  newRecord,
  type OperationRecord,
  type OperationState,
  type ResultSnapshot,
} from '../operation/record.js';

/**
 * One fresh, empty location (a temp file, a schema, a map) for one test.
 *
 * @example
 * ```ts
 * const db = new Database(':memory:') // better-sqlite3
 * const subject: StoreContractSubject = {
 *   open: () => sqliteStore({ path: ':memory:', database: db }),
 *   corrupt: (id, raw) => { db.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run(raw, id) },
 *   teardown: () => void db.close(),
 * }
 * ```
 */
export interface StoreContractSubject {
  /**
   * Opens a store on this location. Called once per test, and again after
   * `close()` by the durability case: a durable store must then see
   * everything written before.
   */
  open(): OnceStore | Promise<OnceStore>;
  /**
   * Replaces, behind the store's back, the stored text of the existing record
   * `id` with `raw`, leaving whatever the store indexes (state, tenant, …)
   * untouched: a second raw connection for a database, a test hook otherwise.
   * A backend that cannot hold non-JSON text may store `raw` as a JSON string.
   */
  corrupt(id: string, raw: string): void | Promise<void>;
  /** Releases the location after the test (stores opened by the suite are already closed). */
  teardown?(): void | Promise<void>;
}

/**
 * How {@link describeStoreContract} gets stores.
 *
 * @example
 * ```ts
 * const factory: StoreContractFactory = {
 *   durable: false,
 *   setup: () => ({ open: () => myStore(), corrupt: (id, raw) => myStore.rawWrite(id, raw) }),
 * }
 * ```
 */
export interface StoreContractFactory {
  /** true when a store opened again on the same location keeps every record */
  durable: boolean;
  /**
   * true when two stores open at once on the same location share their records (many
   * processes, tabs or machines on one database) @default durable
   */
  shared?: boolean;
  /** Called before each test. */
  setup(): StoreContractSubject | Promise<StoreContractSubject>;
}

const OWNER = 'owner-a';
const LEASE_MS = 100;
const FINGERPRINT = 'f'.repeat(64);

interface RecordSpec {
  ref: string;
  tenant?: string;
  now?: number;
  retentionMs?: number;
  key?: string;
}

function record(spec: RecordSpec): OperationRecord {
  return newRecord({
    scope: { tenant: spec.tenant ?? 't1', action: 'create-order', ref: spec.ref },
    key: spec.key ?? `key-${spec.ref}`,
    keySource: 'minted',
    fingerprint: FINGERPRINT,
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: OWNER,
    now: spec.now ?? 1_000,
    leaseMs: LEASE_MS,
    retentionMs: spec.retentionMs ?? 1_000_000,
  });
}

const RESULT: ResultSnapshot = {
  kind: 'response',
  source: 'attempt',
  status: 201,
  statusText: 'Created',
  headers: [['content-type', 'application/json']],
  body: btoa('{"order":"A-17"}'), // no Buffer: the suite also runs in browsers
  bodyTruncated: false,
};

/** Moves a fresh record to `state` through the state machine, all at time `now`. */
function inState(fresh: OperationRecord, state: OperationState): OperationRecord {
  const now = fresh.updatedAt;
  const step = (r: OperationRecord, event: Parameters<typeof applyEvent>[1]): OperationRecord =>
    applyEvent(r, event, now, OWNER);
  const acquired = step(fresh, { type: 'acquire', owner: OWNER, leaseExpiresAt: now + LEASE_MS });
  const started = (): OperationRecord => step(acquired, { type: 'attempt_started', attemptId: `att-${fresh.ref}` });
  const finish = (cls: 'success' | 'terminal' | 'ambiguous'): OperationRecord =>
    step(started(), {
      type: 'attempt_finished',
      class: cls,
      status: cls === 'success' ? 201 : cls === 'terminal' ? 422 : 502,
      reason: cls,
      result: cls === 'ambiguous' ? null : RESULT,
    });
  switch (state) {
    case 'pending':
      return acquired;
    case 'in_flight':
      return started();
    case 'ambiguous':
      return finish('ambiguous');
    case 'succeeded':
      return finish('success');
    case 'failed':
      return finish('terminal');
    case 'cancelled':
      return step(acquired, { type: 'cancel' });
  }
}

async function storeError(promise: Promise<unknown>): Promise<unknown> {
  const error = await promise.then(
    (value) => ({ resolved: value }),
    (e: unknown) => e,
  );
  expect(isOnceError(error) && error.code === 'STORE_ERROR', `expected a StoreError, got ${String(error)}`).toBe(true);
  return error;
}

const ids = (records: readonly OperationRecord[]): string[] => records.map((r) => r.ref);

/**
 * Declares the store contract suite (a vitest `describe`) for one store.
 *
 * @example
 * ```ts
 * describeStoreContract('memoryStore', {
 *   durable: false,
 *   setup: () => { let s: OnceStore; return { open: () => (s = memoryStore()), corrupt: … } },
 * });
 * ```
 */
export function describeStoreContract(name: string, factory: StoreContractFactory): void {
  describe(`store contract: ${name}`, () => {
    let subject: StoreContractSubject;
    let opened: OnceStore[] = [];
    let store: OnceStore;
    const open = async (): Promise<OnceStore> => {
      const s = await subject.open();
      opened.push(s);
      return s;
    };

    beforeEach(async () => {
      subject = await factory.setup();
      opened = [];
      store = await open();
    });

    afterEach(async () => {
      for (const s of opened) await s.close().catch(() => undefined);
      await subject.teardown?.();
    });

    it('claim inserts once; a second claim of the id returns the original record', async () => {
      const first = record({ ref: 'r1', key: 'key-first' });
      const claimed = await store.claim(first);
      expect(claimed).toEqual({ created: true, record: first });
      expect(await store.get(first.id)).toEqual(first);

      const second = record({ ref: 'r1', key: 'key-second', now: 2_000 });
      const again = await store.claim(second);
      expect(again.created).toBe(false);
      expect(again.record).toEqual(first);
      expect(await store.get(first.id)).toEqual(first);
    });

    it('hands out copies: mutating inputs or results never changes stored state', async () => {
      const r = record({ ref: 'r1' });
      const snapshot = structuredClone(r);
      const claimed = await store.claim(r);
      r.state = 'failed';
      r.evidence.push({ at: 1, kind: 'cancel', generation: 1, owner: 'x', detail: 'mutated', status: null });
      claimed.record.key = 'mutated';
      const read = await store.get(snapshot.id);
      expect(read).toEqual(snapshot);
      if (read !== undefined) read.key = 'mutated-again';
      expect(await store.get(snapshot.id)).toEqual(snapshot);
    });

    it('50 parallel claims of one id: exactly one is created and everyone sees the winner', async () => {
      const candidates = Array.from({ length: 50 }, (_, i) => record({ ref: 'hot', key: `key-${i}` }));
      const results = await Promise.all(candidates.map((c) => store.claim(c)));
      const winners = results.filter((r) => r.created);
      expect(winners).toHaveLength(1);
      const winnerKey = winners[0]!.record.key;
      expect(results.map((r) => r.record.key)).toEqual(Array(50).fill(winnerKey));
      expect((await store.get(candidates[0]!.id))?.key).toBe(winnerKey);
    });

    it('compareAndSet writes only on the expected generation', async () => {
      const r = record({ ref: 'r1' });
      await store.claim(r);
      const next = applyEvent(r, { type: 'attempt_started', attemptId: 'att-1' }, 1_010, OWNER);
      expect(await store.compareAndSet(r.id, r.generation, next)).toEqual({ ok: true });
      expect(await store.get(r.id)).toEqual(next);

      const stale = applyEvent(r, { type: 'cancel' }, 1_020, OWNER);
      expect(await store.compareAndSet(r.id, r.generation, stale)).toEqual({ ok: false, current: next });
      expect(await store.get(r.id)).toEqual(next);

      // Equal, not "at least": a generation the record never reached (an owner fenced off before a
      // purge and a new claim of the id, a restored backup) matches nothing either.
      const ahead = applyEvent(applyEvent(next, { type: 'release' }, 1_030, OWNER), { type: 'cancel' }, 1_040, OWNER);
      expect(await store.compareAndSet(r.id, next.generation + 1, ahead)).toEqual({ ok: false, current: next });
      expect(await store.get(r.id)).toEqual(next);

      const unknown = record({ ref: 'nobody' });
      const unknownNext = applyEvent(unknown, { type: 'release' }, 1_000, OWNER);
      expect(await store.compareAndSet(unknown.id, unknown.generation, unknownNext)).toEqual({
        ok: false,
        current: undefined,
      });
      expect(await store.get(unknown.id)).toBeUndefined();
    });

    it('two concurrent compareAndSet on one generation: exactly one wins', async () => {
      const r = record({ ref: 'r1' });
      await store.claim(r);
      const a = applyEvent(r, { type: 'acquire', owner: 'owner-a', leaseExpiresAt: 5_000 }, 1_010, 'owner-a');
      const b = applyEvent(r, { type: 'acquire', owner: 'owner-b', leaseExpiresAt: 5_000 }, 1_010, 'owner-b');
      const [ra, rb] = await Promise.all([
        store.compareAndSet(r.id, r.generation, a),
        store.compareAndSet(r.id, r.generation, b),
      ]);
      expect([ra.ok, rb.ok].filter(Boolean)).toHaveLength(1);
      const winner = ra.ok ? a : b;
      const loser = ra.ok ? rb : ra;
      expect(loser).toEqual({ ok: false, current: winner });
      expect(await store.get(r.id)).toEqual(winner);
    });

    it('compareAndSet rejects a next record with another id or no higher generation (TypeError)', async () => {
      const r = record({ ref: 'r1' });
      const other = record({ ref: 'r2' });
      await store.claim(r);
      await store.claim(other);
      const next = applyEvent(r, { type: 'release' }, 1_010, OWNER);
      await expect(store.compareAndSet(other.id, other.generation, next)).rejects.toBeInstanceOf(TypeError);
      await expect(store.compareAndSet(r.id, next.generation, next)).rejects.toBeInstanceOf(TypeError);
      expect(await store.get(r.id)).toEqual(r);
      expect(await store.get(other.id)).toEqual(other);
    });

    it('get of an unknown id is undefined', async () => {
      expect(await store.get(record({ ref: 'never' }).id)).toBeUndefined();
      await store.claim(record({ ref: 'r1' }));
      expect(await store.get(record({ ref: 'r2' }).id)).toBeUndefined();
    });

    it('list filters by states, leaseExpiredBefore, tenant and limit, oldest updatedAt first', async () => {
      // updatedAt: done 500, a 1000, b 2000, c 3000; leases: a 1100, b 2100, c none, done none
      const a = record({ ref: 'a', now: 1_000 });
      const b = inState(record({ ref: 'b', now: 2_000 }), 'in_flight');
      const c = applyEvent(inState(record({ ref: 'c', tenant: 't2', now: 3_000 }), 'ambiguous'), { type: 'release' }, 3_000, OWNER);
      const done = inState(record({ ref: 'done', tenant: 't2', now: 500 }), 'succeeded');
      for (const r of [b, done, c, a]) await store.claim(r);

      expect(ids(await store.list())).toEqual(['done', 'a', 'b', 'c']);
      expect(ids(await store.list({ states: ['in_flight', 'ambiguous'] }))).toEqual(['b', 'c']);
      expect(ids(await store.list({ states: ['pending'] }))).toEqual(['a']);
      expect(ids(await store.list({ states: [] }))).toEqual([]);
      expect(ids(await store.list({ leaseExpiredBefore: 1_500 }))).toEqual(['done', 'a', 'c']);
      expect(ids(await store.list({ leaseExpiredBefore: 1_100 }))).toEqual(['done', 'c']);
      expect(ids(await store.list({ tenant: 't2' }))).toEqual(['done', 'c']);
      expect(ids(await store.list({ tenant: 'nobody' }))).toEqual([]);
      expect(ids(await store.list({ limit: 2 }))).toEqual(['done', 'a']);
      expect(ids(await store.list({ limit: 0 }))).toEqual([]);
      expect(
        ids(await store.list({ states: ['pending', 'in_flight', 'ambiguous'], leaseExpiredBefore: 2_100, tenant: 't1' })),
      ).toEqual(['a']);
      expect(await store.list({ states: ['in_flight'] })).toEqual([b]);
    });

    it('list with a limit returns the first records of the whole order, across states and tenants, ties by id', async () => {
      // 18 records in 4 states and 2 tenants; updatedAt 1000..1005, three records at each; refs
      // out of id order, so that a tie is broken by id and not by the order of the claims
      const states: OperationState[] = ['pending', 'ambiguous', 'succeeded', 'cancelled'];
      const records = Array.from({ length: 18 }, (_, i) =>
        inState(record({ ref: `${'qzakmx'[i % 6]!}${i}`, tenant: `t${i % 2}`, now: 1_000 + Math.floor(i / 3) }), states[i % 4]!),
      );
      for (const r of [...records].reverse()) await store.claim(r);
      const byOrder = (rs: OperationRecord[]): string[] =>
        [...rs].sort((a, b) => a.updatedAt - b.updatedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((r) => r.ref);
      const queries: Array<[ListQuery, OperationRecord[]]> = [
        [{}, records],
        [{ states: ['cancelled', 'pending'] }, records.filter((r) => r.state === 'cancelled' || r.state === 'pending')],
        [{ states: ['succeeded', 'ambiguous', 'pending'], tenant: 't1' }, records.filter((r) => r.state !== 'cancelled' && r.tenant === 't1')],
      ];
      for (const [query, selected] of queries) {
        const expected = byOrder(selected);
        for (let limit = 0; limit <= expected.length + 1; limit++) {
          expect(ids(await store.list({ ...query, limit })), `${JSON.stringify(query)} limit ${limit}`).toEqual(expected.slice(0, limit));
        }
      }
    });

    it('list follows compareAndSet: new state, lease and updatedAt are what it filters and sorts on', async () => {
      const a = record({ ref: 'a', now: 1_000 });
      const b = record({ ref: 'b', now: 2_000 });
      await store.claim(a);
      await store.claim(b);
      const moved = applyEvent(a, { type: 'attempt_started', attemptId: 'att-a' }, 3_000, OWNER);
      expect((await store.compareAndSet(a.id, a.generation, moved)).ok).toBe(true);
      expect(ids(await store.list())).toEqual(['b', 'a']);
      expect(ids(await store.list({ states: ['in_flight'] }))).toEqual(['a']);
      expect(ids(await store.list({ states: ['pending'] }))).toEqual(['b']);
      const released = applyEvent(moved, { type: 'release' }, 3_500, OWNER);
      expect((await store.compareAndSet(a.id, moved.generation, released)).ok).toBe(true);
      expect(ids(await store.list({ leaseExpiredBefore: 1_500 }))).toEqual(['a']);
    });

    it(`list returns at most ${DEFAULT_LIST_LIMIT} records by default`, async () => {
      for (let i = 0; i < DEFAULT_LIST_LIMIT + 5; i++) {
        await store.claim(record({ ref: `r${String(i).padStart(3, '0')}`, now: 1_000 + i }));
      }
      const listed = await store.list();
      expect(listed).toHaveLength(DEFAULT_LIST_LIMIT);
      expect(listed[0]?.ref).toBe('r000');
      expect(listed.at(-1)?.ref).toBe(`r${String(DEFAULT_LIST_LIMIT - 1).padStart(3, '0')}`);
    });

    it('purge removes only terminal records whose expiresAt is before now', async () => {
      const now = 10_000;
      const expired = (ref: string, state: OperationState): OperationRecord =>
        inState(record({ ref, now: 1_000, retentionMs: 1_000 }), state); // expiresAt 2000
      const gone = [expired('s', 'succeeded'), expired('f', 'failed'), expired('x', 'cancelled')];
      const kept = [
        expired('p', 'pending'),
        expired('i', 'in_flight'),
        expired('m', 'ambiguous'),
        inState(record({ ref: 'fresh', now: 1_000, retentionMs: 20_000 }), 'succeeded'),
        inState(record({ ref: 'edge', now: 1_000, retentionMs: now - 1_000 }), 'failed'), // expiresAt === now
      ];
      for (const r of [...gone, ...kept]) await store.claim(r);

      expect(await store.purge(now)).toBe(3);
      for (const r of gone) expect(await store.get(r.id)).toBeUndefined();
      for (const r of kept) expect(await store.get(r.id)).toEqual(r);
      expect(await store.purge(now)).toBe(0);
      expect(await store.purge(now + 1)).toBe(1);
      expect(await store.get(kept[4]!.id)).toBeUndefined();
    });

    // Regression (review): the PostgreSQL store's purge deleted a row whose text named a terminal
    // state even when it was no record at all (truncated JSON); the memory store purged by its
    // columns alone. A row purge cannot read as the expired terminal record it claims to be stays.
    it('purge leaves a terminal row it cannot read as an expired terminal record', async () => {
      const expired = (ref: string): OperationRecord => inState(record({ ref, now: 1_000, retentionMs: 1_000 }), 'succeeded');
      const cases: ReadonlyArray<readonly [OperationRecord, (r: OperationRecord) => string]> = [
        [expired('truncated'), (r) => JSON.stringify(r).slice(0, -1)],
        [expired('foreign'), () => JSON.stringify(expired('someone-else'))],
        [expired('later'), (r) => JSON.stringify({ ...r, expiresAt: 50_000 })],
      ];
      const fine = expired('fine');
      for (const [r] of cases) await store.claim(r);
      await store.claim(fine);
      for (const [r, raw] of cases) await subject.corrupt(r.id, raw(r));
      expect(await store.purge(10_000)).toBe(1);
      expect(await store.get(fine.id)).toBeUndefined();
      for (const [r] of cases) await storeError(store.get(r.id));
    });

    // Regression (review): a store's check of its columns against the record, or its purge, once
    // refused records whose text holds NUL or a lone surrogate (which JSON carries escaped).
    it('a record whose tenant and ref hold a lone surrogate or NUL reads back, lists, and purges', async () => {
      const odd = inState(record({ ref: 'r\u0000\ud800', tenant: 't\ud800', now: 1_000, retentionMs: 1_000 }), 'succeeded');
      await store.claim(odd);
      expect(await store.get(odd.id)).toEqual(odd);
      expect(ids(await store.list({ tenant: odd.tenant }))).toEqual([odd.ref]);
      expect(await store.purge(10_000)).toBe(1);
      expect(await store.get(odd.id)).toBeUndefined();
    });

    // Processes, tabs and machines share one location through stores of their own: the fencing
    // must hold between them, not only within one store object.
    it.skipIf(!(factory.shared ?? factory.durable))('two stores open at once on one location see and fence each other', async () => {
      const other = await open();
      const r = record({ ref: 'r1' });
      expect((await store.claim(r)).created).toBe(true);
      expect(await other.claim(record({ ref: 'r1', key: 'key-other' }))).toEqual({ created: false, record: r });
      const theirs = applyEvent(r, { type: 'attempt_started', attemptId: 'att-other' }, 1_010, OWNER);
      expect(await other.compareAndSet(r.id, r.generation, theirs)).toEqual({ ok: true });
      const mine = applyEvent(r, { type: 'cancel' }, 1_020, OWNER);
      expect(await store.compareAndSet(r.id, r.generation, mine)).toEqual({ ok: false, current: theirs });
      expect(await store.get(r.id)).toEqual(theirs);
      expect(await store.list()).toEqual([theirs]);
    });

    // Atomic within one store object is not enough: a claim or compareAndSet that reads and then
    // writes behind a lock of its own (a Redis GET then SET, a per-connection mutex) passes every
    // case above, and lets two processes both win. Run the races through two stores at once.
    it.skipIf(!(factory.shared ?? factory.durable))('two stores open at once: concurrent claims, then compareAndSets, through both: exactly one wins each', async () => {
      const stores = [store, await open()];
      const candidates = Array.from({ length: 20 }, (_, i) => record({ ref: 'hot', key: `key-${i}` }));
      const claims = await Promise.all(candidates.map((c, i) => stores[i % 2]!.claim(c)));
      expect(claims.filter((c) => c.created)).toHaveLength(1);
      const winner = claims.find((c) => c.created)!.record;
      expect(claims.map((c) => c.record.key)).toEqual(Array(20).fill(winner.key));

      const nexts = candidates.map((_, i) =>
        applyEvent(winner, { type: 'acquire', owner: `owner-${i}`, leaseExpiresAt: 5_000 }, 1_010, `owner-${i}`),
      );
      const results = await Promise.all(nexts.map((n, i) => stores[i % 2]!.compareAndSet(winner.id, winner.generation, n)));
      const won = nexts.filter((_, i) => results[i]!.ok);
      expect(won).toHaveLength(1);
      for (const r of results) if (!r.ok) expect(r.current).toEqual(won[0]);
      for (const s of stores) expect(await s.get(winner.id)).toEqual(won[0]);
    });

    it.skipIf(!factory.durable)('close and open again keeps every record and generation', async () => {
      const records = [
        record({ ref: 'p' }),
        inState(record({ ref: 's', now: 2_000 }), 'succeeded'),
        inState(record({ ref: 'm', tenant: 't2', now: 3_000 }), 'ambiguous'),
      ];
      for (const r of records) await store.claim(r);
      const p = records[0]!;
      const moved = applyEvent(p, { type: 'attempt_started', attemptId: 'att-p' }, 4_000, OWNER);
      expect((await store.compareAndSet(p.id, p.generation, moved)).ok).toBe(true);
      await store.close();

      const reopened = await open();
      const expected = [records[1]!, records[2]!, moved];
      for (const r of expected) expect(await reopened.get(r.id)).toEqual(r);
      expect(await reopened.list()).toEqual(expected);
      const stale = applyEvent(p, { type: 'release' }, 4_500, OWNER);
      expect(await reopened.compareAndSet(p.id, p.generation, stale)).toEqual({ ok: false, current: moved });
      const next = applyEvent(moved, { type: 'release' }, 5_000, OWNER);
      expect(await reopened.compareAndSet(p.id, moved.generation, next)).toEqual({ ok: true });
      expect((await reopened.claim(record({ ref: 'p', key: 'other' }))).record).toEqual(next);
    });

    const corruptions: ReadonlyArray<readonly [string, (r: OperationRecord) => string]> = [
      ['malformed JSON', (r) => JSON.stringify(r).slice(0, 40)],
      ['JSON that is not a record', () => '{"hello":"world"}'],
      ['a record failing the schema', (r) => JSON.stringify({ ...r, fingerprint: 'not-hex' })],
      ['a record with another id', () => JSON.stringify(record({ ref: 'someone-else' }))],
      // its own id, another operation's scope: read as it is, a call would get that operation's result
      ['a record whose scope does not match its id', (r) => JSON.stringify({ ...r, ref: 'someone-else' })],
    ];
    for (const [label, raw] of corruptions) {
      it(`a row holding ${label} rejects with StoreError, never reads as absent`, async () => {
        const r = record({ ref: 'victim' });
        const bystander = record({ ref: 'bystander', now: 500 });
        await store.claim(bystander);
        await store.claim(r);
        await subject.corrupt(r.id, raw(r));

        await storeError(store.get(r.id));
        await storeError(store.list());
        await storeError(store.list({ states: ['pending'] }));
        await storeError(store.claim(record({ ref: 'victim', key: 'second' })));
        // a stale compareAndSet reads the current record back: that read rejects too
        const next = applyEvent(r, { type: 'release' }, 1_000, OWNER);
        await storeError(store.compareAndSet(r.id, r.generation - 1, next));
        expect(await store.get(bystander.id)).toEqual(bystander);
      });

      it(`list with onCorrupt: a row holding ${label} is reported by id with its StoreError, the others listed`, async () => {
        const r = record({ ref: 'victim' });
        const bystander = record({ ref: 'bystander', now: 500 });
        const younger = record({ ref: 'younger', now: 2_000 });
        for (const x of [bystander, r, younger]) await store.claim(x);
        await subject.corrupt(r.id, raw(r));

        const reported: CorruptRow[] = [];
        const onCorrupt = (row: CorruptRow): void => void reported.push(row);
        expect(await store.list({ onCorrupt })).toEqual([bystander, younger]);
        expect(reported.map((row) => row.id)).toEqual([r.id]);
        expect(isOnceError(reported[0]?.error) && reported[0]?.error.code === 'STORE_ERROR').toBe(true);
        // the corrupt row keeps its place in the order and counts toward the limit
        reported.length = 0;
        expect(await store.list({ states: ['pending'], limit: 2, onCorrupt })).toEqual([bystander]);
        expect(reported.map((row) => row.id)).toEqual([r.id]);
        reported.length = 0;
        expect(await store.list({ limit: 1, onCorrupt })).toEqual([bystander]);
        expect(reported).toEqual([]);
        // without onCorrupt the list still rejects as a whole; get still rejects
        await storeError(store.list());
        await storeError(store.get(r.id));
      });
    }

    it('every call after close() rejects with StoreError (as a rejection, not a throw)', async () => {
      const r = record({ ref: 'r1' });
      await store.claim(r);
      await store.close();
      const next = applyEvent(r, { type: 'release' }, 1_010, OWNER);
      const calls: Array<() => Promise<unknown>> = [
        () => store.claim(record({ ref: 'r2' })),
        () => store.get(r.id),
        () => store.compareAndSet(r.id, r.generation, next),
        () => store.list(),
        () => store.purge(10_000),
      ];
      for (const call of calls) {
        let promise: Promise<unknown> | undefined;
        expect(() => {
          promise = call();
        }).not.toThrow();
        await storeError(promise!);
      }
    });
  });
}
