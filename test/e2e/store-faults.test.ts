/**
 * Store faults through the public client, on the real SQLite store: a disk that
 * fills at random points, a read-only database, a corrupt page, and SQLITE_BUSY
 * storms from a competing writer in another process.
 *
 * The guarantee under test: every call either completes correctly (one effect at
 * the provider, its result returned) or fails with a `StoreError` that names the
 * cause. A call that failed before its attempt was recorded sent nothing; one that
 * failed after sending left its record `in_flight`/`ambiguous` (never lost), and a
 * later call reconciles it by lookup to exactly one effect.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  RetriesExhaustedError,
  StoreError,
  createClient,
  isOnceError,
  wrapFetch,
} from '../../src/index.js';
import type { OnceClient, OnceClientOptions, OnceStore, OperationRecord } from '../../src/index.js';
import { fingerprintRequest } from '../../src/operation/fingerprint.js';
import { applyEvent, newRecord, recordId } from '../../src/operation/record.js';
import { REPLAYED_HEADER } from '../../src/operation/snapshot.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Fault, Provider } from '../../src/testing/provider.js';
import { lookupByRef, orderInit, tempDir } from '../helpers/setup.js';

const ACTION = 'create-order';
const DRIVER = createRequire(import.meta.url).resolve('better-sqlite3');

let provider: Provider;
let tmp: ReturnType<typeof tempDir>;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  tmp = tempDir();
  provider = await startProvider();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await provider.close();
  tmp.cleanup();
});

function clientOn(store: OnceStore, p: Provider = provider, options: OnceClientOptions = {}): OnceClient {
  const client = createClient({
    store,
    lookups: { [ACTION]: lookupByRef(p.url) },
    // the loopback provider commits before it answers: an "absent" lookup can be trusted almost at once
    settleMs: 20,
    ...options,
    retry: { baseDelayMs: 1, maxDelayMs: 5, budget: false, ...options.retry },
  });
  cleanups.push(() => client.close());
  return client;
}

function order(client: OnceClient, ref: string, p: Provider = provider, extra: Record<string, unknown> = {}): Promise<Response> {
  return client.fetch(`${p.url}/orders`, { ...orderInit(ref, extra), once: { action: ACTION, ref } });
}

type Outcome = { ok: true; status: number } | { ok: false; error: unknown };

async function attempt(call: Promise<Response>): Promise<Outcome> {
  return call.then(
    (res) => ({ ok: true as const, status: res.status }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

const idOf = (ref: string): string => recordId({ tenant: 'default', action: ACTION, ref });
const requestsFor = (p: Provider, ref: string) => p.requests.filter((r) => r.ref === ref);

/**
 * The guarantee for one call, checked against the provider and the record the store
 * holds (read through a handle that still works). Returns how the call ended.
 */
function checkCall(p: Provider, ref: string, outcome: Outcome, record: OperationRecord | undefined, cause: RegExp): 'completed' | 'before-send' | 'after-send' | 'exhausted' {
  const sent = requestsFor(p, ref);
  expect(p.effectsFor(ref), `effects for ${ref}`).toBeLessThanOrEqual(1);
  // nothing leaves without a durable attempt, and every request carries the record's one key
  expect(record?.attempts.length ?? 0, `attempts recorded before the ${sent.length} request(s) of ${ref}`).toBeGreaterThanOrEqual(sent.length);
  for (const r of sent) expect(r.key).toBe(record?.key);
  if (outcome.ok) {
    expect([200, 201]).toContain(outcome.status); // 200: the lookup's answer after an ambiguous attempt
    expect(p.effectsFor(ref), `a completed call of ${ref} has its effect`).toBe(1);
    expect(record?.state).toBe('succeeded');
    return 'completed';
  }
  if (outcome.error instanceof RetriesExhaustedError) {
    expect(record?.state).toBe('pending');
    return 'exhausted';
  }
  expect(outcome.error, String(outcome.error)).toBeInstanceOf(StoreError);
  expect(isOnceError(outcome.error) && outcome.error.code).toBe('STORE_ERROR');
  expect((outcome.error as Error).message).toMatch(cause);
  if (record === undefined || record.attempts.length === 0) {
    expect(sent, `${ref} failed before its attempt was recorded: nothing sent`).toHaveLength(0);
    return 'before-send';
  }
  // sent, or about to be: the record knows, so it is not lost
  expect(record.state).not.toBe('succeeded');
  if (p.effectsFor(ref) === 1) expect(['in_flight', 'ambiguous']).toContain(record.state);
  return 'after-send';
}

/** A store whose `plan.failAt`-th writes (claims and compare-and-sets, counted from 1) fail with SQLITE_FULL before touching the file. */
function fillingStore(inner: OnceStore, path: string, plan: { failAt: ReadonlySet<number>; on: boolean }): OnceStore & { writes: () => number } {
  let writes = 0;
  const full = (what: string): StoreError =>
    new StoreError(`SQLite store ${path}: disk or database is full while ${what} [SQLITE_FULL]: database or disk is full (injected at write #${writes})`);
  return {
    name: inner.name,
    writes: () => writes,
    claim: async (record) => {
      writes++;
      if (plan.on && plan.failAt.has(writes)) throw full(`claiming record ${record.id}`);
      return inner.claim(record);
    },
    compareAndSet: async (id, expected, next) => {
      writes++;
      if (plan.on && plan.failAt.has(writes)) throw full(`updating record ${id}`);
      return inner.compareAndSet(id, expected, next);
    },
    get: (id) => inner.get(id),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: () => inner.close(),
  };
}

describe('disk full at random points', () => {
  const PROVIDER_FAULTS: Fault[] = [
    { kind: 'drop_after_commit' },
    { kind: 'error_after_commit', status: 502 },
    { kind: 'truncate_after_commit' },
    { kind: 'reset_before_commit' },
  ];

  it('every call completes with one effect or fails with a StoreError naming SQLITE_FULL; nothing is sent unrecorded, nothing is lost, and once space is back each operation ends with exactly one effect', async () => {
    const endings = { completed: 0, 'before-send': 0, 'after-send': 0, exhausted: 0 };
    await fc.assert(
      fc.asyncProperty(
        // Each full spell lasts 1 to 5 writes: the write that records an answer in hand is tried again
        // (up to 4 tries, 49685f3), so only a spell that outlasts it fails a call after its send.
        fc.uniqueArray(fc.tuple(fc.integer({ min: 1, max: 45 }), fc.integer({ min: 1, max: 5 })), { minLength: 1, maxLength: 10, selector: ([at]) => at }),
        fc.integer(),
        async (spells, providerSeed) => {
          const p = await startProvider({ randomFaults: { seed: providerSeed, rate: 0.3, kinds: PROVIDER_FAULTS } });
          const dir = tempDir();
          const path = join(dir.dir, 'once.db');
          const inner = sqliteStore({ path });
          const failAt = spells.flatMap(([at, length]) => Array.from({ length }, (_, i) => at + i));
          const plan = { failAt: new Set(failAt), on: true };
          const client = createClient({
            store: fillingStore(inner, path, plan),
            lookups: { [ACTION]: lookupByRef(p.url) },
            settleMs: 20,
            retry: { baseDelayMs: 1, maxDelayMs: 5, maxAttempts: 6, budget: false },
          });
          try {
            const refs = Array.from({ length: 6 }, (_, i) => `DF-${i}`);
            const unfinished: string[] = [];
            for (const ref of refs) {
              const outcome = await attempt(order(client, ref, p));
              const ending = checkCall(p, ref, outcome, await inner.get(idOf(ref)), /disk or database is full.*SQLITE_FULL/);
              endings[ending]++;
              if (ending !== 'completed') unfinished.push(ref);
            }
            // Space is back: the same calls finish, reconciling by lookup where something was sent.
            plan.on = false;
            for (const ref of unfinished) {
              const res = await order(client, ref, p);
              expect([200, 201]).toContain(res.status);
            }
            for (const ref of refs) {
              expect(p.effectsFor(ref), `effects for ${ref} at the end`).toBe(1);
              const record = await inner.get(idOf(ref));
              expect(record?.state).toBe('succeeded');
              expect(new Set(requestsFor(p, ref).map((r) => r.key))).toEqual(new Set([record?.key]));
            }
            expect(p.effects).toBe(refs.length);
          } finally {
            await client.close();
            await p.close();
            dir.cleanup();
          }
        },
      ),
      { numRuns: 25 },
    );
    console.log(`[store faults, disk full at random points] ${JSON.stringify(endings)}`);
    // the random points hit each side of the send: not a vacuous pass
    expect(endings['before-send']).toBeGreaterThan(0);
    expect(endings['after-send']).toBeGreaterThan(0);
    expect(endings.completed).toBeGreaterThan(0);
  });

  it('a real SQLite file capped by PRAGMA max_page_count: SQLITE_FULL from SQLite itself, on either side of the send; all settled once it may grow', async () => {
    const path = join(tmp.dir, 'capped.db');
    const handle = new Database(path);
    cleanups.push(() => handle.close());
    const store = sqliteStore({ path, database: handle });
    const client = clientOn(store);
    // A few operations first, then a cap a little above the file's size: results carry a 3 KiB
    // body, so the write that stores one needs more room than the writes before the send.
    const padding = 'x'.repeat(3_000);
    for (let i = 0; i < 3; i++) expect((await order(client, `PC-warm-${i}`, provider, { padding })).status).toBe(201);
    handle.pragma(`max_page_count = ${(handle.pragma('page_count', { simple: true }) as number) + 6}`);

    const endings = { completed: 0, 'before-send': 0, 'after-send': 0, exhausted: 0 };
    const unfinished: string[] = [];
    for (let i = 0; i < 12; i++) {
      const ref = `PC-${i}`;
      const outcome = await attempt(order(client, ref, provider, { padding }));
      const ending = checkCall(provider, ref, outcome, await store.get(idOf(ref)), /disk or database is full.*\[SQLITE_FULL\]/);
      endings[ending]++;
      if (ending !== 'completed') unfinished.push(ref);
    }
    expect(endings['before-send'] + endings['after-send'], JSON.stringify(endings)).toBeGreaterThan(0);
    expect(handle.pragma('quick_check', { simple: true })).toBe('ok');

    handle.pragma('max_page_count = 1073741823');
    for (const ref of unfinished) expect([200, 201]).toContain((await order(client, ref, provider, { padding })).status);
    for (let i = 0; i < 12; i++) expect(provider.effectsFor(`PC-${i}`)).toBe(1);
    console.log(`[store faults, max_page_count] ${JSON.stringify(endings)}; all ${unfinished.length} unfinished settled with one effect each`);
  });
});

describe('a read-only database', () => {
  async function seed(path: string): Promise<void> {
    const writer = sqliteStore({ path });
    const client = clientOn(writer);
    expect((await order(client, 'RO-done')).status).toBe(201);
    // an operation a crashed process left on the wire (in_flight, lease long expired), of the request made below
    const init = orderInit('RO-stuck');
    const body = new TextEncoder().encode(init.body as string);
    const claimed = newRecord({
      scope: { tenant: 'default', action: ACTION, ref: 'RO-stuck' },
      key: 'stuck-key',
      keySource: 'minted',
      fingerprint: await fingerprintRequest({ method: 'POST', url: `${provider.url}/orders`, body, contentType: 'application/json' }),
      request: null,
      owner: 'crashed',
      now: Date.now() - 60_000,
      leaseMs: 1_000,
      retentionMs: 3_600_000,
    });
    await writer.claim(applyEvent(claimed, { type: 'attempt_started', attemptId: 'a-1' }, claimed.createdAt, 'crashed'));
    await client.close();
  }

  it('a new operation fails with a StoreError naming read-only before anything is sent; a stuck one is not resent either; a finished one replays', async () => {
    const path = join(tmp.dir, 'ro.db');
    await seed(path);
    const sentBefore = provider.requests.length;
    const handle = new Database(path, { readonly: true });
    cleanups.push(() => handle.close());
    const client = clientOn(sqliteStore({ path, database: handle }));

    // its claim fails too, but a read of the record (which a read-only database serves) answers it
    const done = await order(client, 'RO-done');
    expect(done.status).toBe(201);
    expect(done.headers.get(REPLAYED_HEADER)).toBe('true');
    for (const ref of ['RO-new', 'RO-stuck']) {
      const outcome = await attempt(order(client, ref));
      expect(outcome.ok, ref).toBe(false);
      const error = (outcome as { error: unknown }).error;
      expect(error, ref).toBeInstanceOf(StoreError);
      expect((error as Error).message).toMatch(/database is read-only.*\[SQLITE_READONLY/);
      expect((error as Error).message).toContain(path);
    }
    expect(provider.requests).toHaveLength(sentBefore);
    expect(provider.lookups).toBe(0);
    expect(await client.get({ action: ACTION, ref: 'RO-new' })).toBeUndefined();
    expect((await client.get({ action: ACTION, ref: 'RO-stuck' }))?.state).toBe('in_flight');
  });
});

describe('a corrupt database', () => {
  it('createClient on a damaged file throws a StoreError naming the file and leaves it untouched; nothing is sent', async () => {
    const path = join(tmp.dir, 'corrupt.db');
    const writer = sqliteStore({ path });
    for (let i = 0; i < 200; i++) {
      await writer.claim(
        newRecord({
          scope: { tenant: 'default', action: ACTION, ref: `C-${i}-${'x'.repeat(1_000)}` },
          key: `k-${i}`,
          keySource: 'minted',
          fingerprint: 'a'.repeat(64),
          request: null,
          owner: 'o',
          now: Date.now(),
          leaseMs: 1_000,
          retentionMs: 3_600_000,
        }),
      );
    }
    await writer.close();
    const damaged = Buffer.from(readFileSync(path));
    expect(damaged.length).toBeGreaterThan(50 * 4096);
    damaged.fill(0xab, 20 * 4096, 21 * 4096);
    writeFileSync(path, damaged);

    const attempts: [string, () => unknown][] = [
      ['createClient({ store: sqliteStore({ path }) })', () => createClient({ store: sqliteStore({ path }) })],
      ['createClient() with ONCEFETCH_DB', () => withEnv('ONCEFETCH_DB', path, () => createClient())],
      ['wrapFetch() with ONCEFETCH_DB', () => withEnv('ONCEFETCH_DB', path, () => wrapFetch(globalThis.fetch))],
    ];
    for (const [what, open] of attempts) {
      let thrown: unknown;
      try {
        open();
      } catch (error) {
        thrown = error;
      }
      expect(thrown, what).toBeInstanceOf(StoreError);
      expect((thrown as Error).message, what).toMatch(/database is corrupt/);
      expect((thrown as Error).message, what).toContain(path);
    }
    expect(readFileSync(path).equals(damaged)).toBe(true);
    expect(provider.requests).toHaveLength(0);
  });
});

function withEnv<T>(name: string, value: string, body: () => T): T {
  const before = process.env[name];
  process.env[name] = value;
  try {
    return body();
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

describe('SQLITE_BUSY storms from a competing writer', () => {
  /** Holds the write lock for random short spells, in another process, until its stdin closes. */
  const STORM = `
    const Database = require(${JSON.stringify(DRIVER)});
    const db = new Database(process.argv[1], { timeout: 5 });
    let state = Number(process.argv[2]) >>> 0;
    const random = () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pause = new Int32Array(new SharedArrayBuffer(4));
    let running = true;
    let spells = 0;
    process.stdin.on('end', () => { running = false; });
    process.stdin.resume();
    const storm = () => {
      if (!running) { db.close(); process.stdout.write('spells ' + spells + '\\n'); process.exit(0); }
      try {
        db.exec('BEGIN IMMEDIATE');
      } catch {
        return setTimeout(storm, 1); // the client holds the lock: try again at once
      }
      db.prepare("UPDATE oncefetch_meta SET value = value WHERE key = 'schema_version'").run();
      if (spells++ === 0) process.stdout.write('storming\\n');
      Atomics.wait(pause, 0, 0, 5 + Math.floor(random() * 60)); // hold the lock
      db.exec('COMMIT');
      setTimeout(storm, Math.floor(random() * 15)); // let others in, sometimes
    };
    storm();
    setTimeout(() => process.exit(3), 60000);
  `;

  function startStorm(path: string, seed: number): Promise<{ child: ChildProcess; stop: () => Promise<string> }> {
    const child = spawn(process.execPath, ['-e', STORM, path, String(seed)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    const stop = async (): Promise<string> => {
      child.stdin?.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      return out;
    };
    return new Promise((done, fail) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('storming')) done({ child, stop });
      });
      child.once('exit', (code) => fail(new Error(`the storm exited early (${code})`)));
    });
  }

  it('calls under the storm (30, more until it hits one): each completes with one effect or fails with a StoreError naming busy; before the send nothing went out, after it the record reconciles to one effect', async () => {
    const path = join(tmp.dir, 'busy.db');
    const store = sqliteStore({ path, busyTimeoutMs: 20 });
    const reader = new Database(path, { readonly: true }); // WAL: readers are not blocked by the writer
    cleanups.push(() => reader.close());
    const peek = (ref: string): OperationRecord | undefined => {
      const row = reader.prepare('SELECT data FROM oncefetch_records WHERE id = ?').get(idOf(ref)) as { data: string } | undefined;
      return row === undefined ? undefined : (JSON.parse(row.data) as OperationRecord);
    };
    const client = clientOn(store, provider, { retry: { maxAttempts: 6 } });
    const seed = Math.floor(Math.random() * 2 ** 31);
    const storm = await startStorm(path, seed);
    cleanups.push(() => storm.stop());

    const endings = { completed: 0, 'before-send': 0, 'after-send': 0, exhausted: 0 };
    const hit = (): number => endings['before-send'] + endings['after-send'];
    const unfinished: string[] = [];
    const refs: string[] = [];
    // Five at a time (the store's own writers compete with each other too): 30 calls, and more, up to
    // 100, until the storm has hit one (about 1 run in 10 it let 30 short calls through untouched).
    while (refs.length < 30 || (hit() === 0 && refs.length < 100)) {
      const batch = Array.from({ length: 5 }, (_, j) => `SB-${refs.length + j}`);
      refs.push(...batch);
      const outcomes = await Promise.all(batch.map((ref) => attempt(order(client, ref))));
      batch.forEach((ref, j) => {
        const ending = checkCall(provider, ref, outcomes[j] as Outcome, peek(ref), /database is busy.*\[SQLITE_BUSY/);
        endings[ending]++;
        if (ending !== 'completed') unfinished.push(ref);
      });
    }
    const report = await storm.stop();
    expect(hit(), `storm seed ${seed}: ${JSON.stringify(endings)}`).toBeGreaterThan(0);

    // The storm is over: every unfinished call finishes, reconciling by lookup where something was sent.
    for (const ref of unfinished) expect([200, 201]).toContain((await order(client, ref)).status);
    for (const ref of refs) expect(provider.effectsFor(ref), ref).toBe(1);
    expect(provider.effects).toBe(refs.length);
    console.log(`[store faults, SQLITE_BUSY storm seed ${seed}, ${report.trim()}] ${refs.length} calls: ${JSON.stringify(endings)}; ${unfinished.length} unfinished settled with one effect each`);
  });
});
