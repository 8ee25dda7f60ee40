import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isOnceError } from '../../src/errors.js';
import { applyEvent, newRecord, type OperationRecord } from '../../src/operation/record.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import { describeStoreContract } from '../../src/testing/store-contract.js';

const require = createRequire(import.meta.url);
const DRIVER = require.resolve('better-sqlite3');
const TSX = require.resolve('tsx/esm');
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'oncefetch-sqlite-'));
}

function rawUpdate(db: Database.Database, id: string, raw: string): void {
  const { changes } = db.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run(raw, id);
  if (changes !== 1) throw new Error(`no row ${id} to corrupt`);
}

describeStoreContract('sqliteStore (file)', {
  durable: true,
  setup() {
    const dir = tempDir();
    const path = join(dir, 'nested', 'once.db');
    return {
      open: () => sqliteStore({ path }),
      corrupt: (id, raw) => {
        // a second connection, behind the store's back
        const db = new Database(path);
        try {
          rawUpdate(db, id, raw);
        } finally {
          db.close();
        }
      },
      teardown: () => rmSync(dir, { recursive: true, force: true }),
    };
  },
});

describeStoreContract('sqliteStore (:memory: handle)', {
  durable: false,
  setup() {
    const db = new Database(':memory:');
    return {
      open: () => sqliteStore({ path: ':memory:', database: db }),
      corrupt: (id, raw) => rawUpdate(db, id, raw),
      teardown: () => void db.close(),
    };
  },
});

let counter = 0;
function sample(ref = `r${++counter}`, now = 1_000): OperationRecord {
  return newRecord({
    scope: { tenant: 't1', action: 'create-order', ref },
    key: `key-${ref}`,
    keySource: 'minted',
    fingerprint: 'a'.repeat(64),
    request: { method: 'POST', url: 'https://api.example.test/orders' },
    owner: 'owner',
    now,
    leaseMs: 100,
    retentionMs: 1_000,
  });
}

function succeeded(r: OperationRecord): OperationRecord {
  const started = applyEvent(r, { type: 'attempt_started', attemptId: `att-${r.ref}` }, r.updatedAt, 'owner');
  return applyEvent(
    started,
    { type: 'attempt_finished', class: 'success', status: 201, reason: 'ok', result: null },
    r.updatedAt,
    'owner',
  );
}

async function rejection(promise: Promise<unknown>): Promise<Error & { code?: unknown; cause?: unknown }> {
  const outcome = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isOnceError(outcome), `expected a StoreError, got ${String(outcome)}`).toBe(true);
  const error = outcome as Error & { code?: unknown };
  expect(error.code).toBe('STORE_ERROR');
  return error;
}

function openError(open: () => unknown): Error {
  try {
    open();
  } catch (e) {
    expect(isOnceError(e) && e.code === 'STORE_ERROR', `expected a StoreError, got ${String(e)}`).toBe(true);
    return e as Error;
  }
  throw new Error('expected opening to fail');
}

const mode = (p: string): number => statSync(p).mode & 0o777;

describe('sqliteStore on disk', () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = tempDir();
    path = join(dir, 'once.db');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  // Regression (adversarial run): list and purge select on these columns, and a live record whose
  // state column had been edited to 'succeeded' was purged; its next call sent again.
  it.each([
    ['state', "state = 'succeeded', expires_at = 0"],
    ['tenant', "tenant = 'someone-else'"],
    ['expires_at', 'expires_at = 0'],
  ])('a row whose %s column disagrees with its record is a StoreError, and never purged', async (_column, set) => {
    const store = sqliteStore({ path });
    const live = applyEvent(sample(), { type: 'attempt_started', attemptId: 'a1' }, 1_001, 'owner');
    await store.claim(live);
    const db = new Database(path);
    db.prepare(`UPDATE oncefetch_records SET ${set} WHERE id = ?`).run(live.id);
    db.close();
    const error = await store.get(live.id).catch((e: unknown) => e);
    expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
    expect((error as Error).message).toMatch(/column .* disagrees with its record/);
    expect(await store.purge(Date.now())).toBe(0);
    const raw = new Database(path);
    expect(raw.prepare('SELECT count(*) AS n FROM oncefetch_records').get()).toEqual({ n: 1 });
    raw.close();
    await store.close();
  });

  it('purge leaves a row that is not a record (and purges the rest), instead of failing', async () => {
    const store = sqliteStore({ path });
    const done = (ref: string) => applyEvent(applyEvent(sample(ref), { type: 'attempt_started', attemptId: 'a1' }, 1_001, 'owner'), { type: 'attempt_finished', class: 'terminal', status: 400, reason: 'status 400', result: null }, 1_002, 'owner');
    const [bad, good] = [done('bad'), done('good')];
    await store.claim(bad);
    await store.claim(good);
    const db = new Database(path);
    db.prepare('UPDATE oncefetch_records SET data = ? WHERE id = ?').run('not json', bad.id);
    db.close();
    expect(await store.purge(Date.now())).toBe(1);
    expect(await store.get(good.id)).toBeUndefined();
    await expect(store.get(bad.id)).rejects.toMatchObject({ code: 'STORE_ERROR' });
    await store.close();
  });

  // Regression: a purge that failed on one batch rejected with that batch's error alone: the caller
  // could not tell how many records the batches before (each committed) had removed.
  it('a purge whose second batch fails: a StoreError carrying how many the first removed, as many as are gone', async () => {
    const store = sqliteStore({ path });
    await Promise.all(Array.from({ length: 2_500 }, () => store.claim(succeeded(sample()))));
    const db = new Database(path);
    // Any delete once 1,000 rows are gone fails its statement: the second batch of 1,000, as a whole.
    db.exec(`CREATE TRIGGER fail_second_batch BEFORE DELETE ON oncefetch_records
             WHEN (SELECT count(*) FROM oncefetch_records) <= 1500 BEGIN SELECT RAISE(ABORT, 'simulated failure'); END`);
    const error = await store.purge(1e12).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isOnceError(error) && error.code).toBe('STORE_ERROR');
    expect((error as { purged?: number }).purged).toBe(1_000);
    expect((error as Error).message).toMatch(/simulated failure.*\(purge had removed 1000 expired records before this\)$/);
    expect(((error as Error).cause as { code?: string }).code).toBe('SQLITE_CONSTRAINT_TRIGGER');
    expect(db.prepare('SELECT count(*) AS n FROM oncefetch_records').get()).toEqual({ n: 1_500 });
    db.exec('DROP TRIGGER fail_second_batch');
    db.close();
    expect(await store.purge(1e12)).toBe(1_500);
    await store.close();
  });

  it('creates the directory 0700 and the database, -wal and -shm files 0600', async () => {
    const nested = join(dir, 'a', 'b', 'once.db');
    const store = sqliteStore({ path: nested });
    await store.claim(sample());
    expect(mode(join(dir, 'a'))).toBe(0o700);
    expect(mode(join(dir, 'a', 'b'))).toBe(0o700);
    expect(mode(nested)).toBe(0o600);
    expect(mode(`${nested}-wal`)).toBe(0o600);
    expect(mode(`${nested}-shm`)).toBe(0o600);
    await store.close();
  });

  it('tightens an existing database file to 0600 before opening it', async () => {
    writeFileSync(path, '');
    chmodSync(path, 0o644);
    const store = sqliteStore({ path });
    expect(mode(path)).toBe(0o600);
    await store.claim(sample());
    expect(mode(`${path}-wal`)).toBe(0o600);
    expect(mode(`${path}-shm`)).toBe(0o600);
    await store.close();
  });

  it('refuses a database whose pages are damaged, and leaves its bytes alone', async () => {
    const store = sqliteStore({ path });
    for (let i = 0; i < 200; i++) await store.claim(sample(`r${i}-${'x'.repeat(1_000)}`));
    await store.close(); // the last connection checkpoints the WAL into the file
    const bytes = readFileSync(path);
    expect(bytes.length).toBeGreaterThan(50 * 4096);
    const damaged = Buffer.from(bytes);
    damaged.fill(0xab, 20 * 4096, 21 * 4096);
    writeFileSync(path, damaged);

    const error = openError(() => sqliteStore({ path }));
    expect(error.message).toMatch(/database is corrupt/);
    expect(error.message).toContain(path);
    expect(readFileSync(path).equals(damaged)).toBe(true);
  });

  it('refuses a database whose quick_check reports problems', async () => {
    const store = sqliteStore({ path });
    await store.claim(succeeded(sample())); // a terminal record: lease_expires_at is NULL
    await store.close();
    const db = new Database(path);
    db.unsafeMode(true);
    db.pragma('writable_schema = ON');
    db.prepare(
      `UPDATE sqlite_master SET sql = replace(sql, 'lease_expires_at INTEGER,', 'lease_expires_at INTEGER NOT NULL,')
       WHERE name = 'oncefetch_records'`,
    ).run();
    db.close();
    const before = readFileSync(path);

    const error = openError(() => sqliteStore({ path }));
    expect(error.message).toMatch(/database is corrupt \(PRAGMA quick_check: NULL value/);
    expect(error.message).toContain(path);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('refuses a file that is not a database, and leaves its bytes alone', () => {
    const garbage = Buffer.alloc(3 * 4096);
    for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 7919 + 13) % 251;
    writeFileSync(path, garbage);
    const error = openError(() => sqliteStore({ path }));
    expect(error.message).toMatch(/not an SQLite database/);
    expect(error.message).toContain(path);
    expect((error.cause as { code?: unknown }).code).toBe('SQLITE_NOTADB');
    expect(readFileSync(path).equals(garbage)).toBe(true);
  });

  it('refuses a schema written by a newer oncefetch', async () => {
    await sqliteStore({ path }).close();
    const db = new Database(path);
    db.prepare(`UPDATE oncefetch_meta SET value = '2' WHERE key = 'schema_version'`).run();
    db.close();
    expect(openError(() => sqliteStore({ path })).message).toMatch(/schema version 2 .*newer oncefetch/);
  });

  it('a read-only database: reads work, writes reject with a StoreError naming the cause', async () => {
    const r = sample();
    const writer = sqliteStore({ path });
    await writer.claim(r);
    await writer.close();

    const readonly = new Database(path, { readonly: true });
    const store = sqliteStore({ path, database: readonly });
    expect(await store.get(r.id)).toEqual(r);
    const error = await rejection(store.claim(sample()));
    expect(error.message).toMatch(/read-only/);
    expect(error.message).toContain(path);
    expect((error.cause as { code?: unknown }).code).toBe('SQLITE_READONLY');
    await rejection(store.compareAndSet(r.id, r.generation, applyEvent(r, { type: 'release' }, 1_001, 'owner')));
    await store.close();
    expect(readonly.open).toBe(true); // a handle the caller passed stays theirs
    readonly.close();
  });

  it('a write lock held by another process fails fast after busyTimeoutMs instead of hanging', async () => {
    const r = sample();
    const store = sqliteStore({ path, busyTimeoutMs: 200 });
    await store.claim(r);
    const script = `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(${JSON.stringify(path)});
      db.exec('BEGIN IMMEDIATE');
      process.stdout.write('locked\\n');
      process.stdin.resume();
      process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close(); process.exit(0); });
      setTimeout(() => process.exit(1), 20000);
    `;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise((done) => child.once('exit', done));
    try {
      await new Promise<void>((done, fail) => {
        child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('locked') && done());
        child.once('exit', (code) => fail(new Error(`lock holder exited early (${code})`)));
      });
      const started = performance.now();
      const error = await rejection(store.claim(sample()));
      const elapsed = performance.now() - started;
      expect(error.message).toMatch(/busy/);
      expect(error.message).toContain(path);
      expect(elapsed).toBeGreaterThanOrEqual(150);
      expect(elapsed).toBeLessThan(1_000);
      // WAL: readers are not blocked by the writer
      expect(await store.get(r.id)).toEqual(r);
    } finally {
      child.stdin.end();
      await exited;
    }
    expect((await store.claim(sample())).created).toBe(true);
    await store.close();
  });

  it("durability 'power-loss' sets synchronous=FULL; the default is NORMAL, both in WAL", async () => {
    const db = new Database(path);
    const store = sqliteStore({ path, database: db, durability: 'power-loss' });
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    await store.close();
    const db2 = new Database(path);
    const store2 = sqliteStore({ path, database: db2, busyTimeoutMs: 1234 });
    expect(db2.pragma('synchronous', { simple: true })).toBe(1);
    expect(db2.pragma('busy_timeout', { simple: true })).toBe(1234);
    await store2.close();
    db.close();
    db2.close();
  });

  it('purges in batches and returns the total', async () => {
    const store = sqliteStore({ path });
    const terminal = 2_500;
    for (let i = 0; i < terminal; i++) await store.claim(succeeded(sample(`t${i}`)));
    const live = sample('live');
    await store.claim(live);
    expect(await store.purge(1_000_000)).toBe(terminal);
    expect(await store.list()).toEqual([live]);
    await store.close();
  });

  it('rejects bad options with TypeError/RangeError naming the option', () => {
    expect(() => sqliteStore({ path: '' })).toThrow(/path/);
    expect(() => sqliteStore({ path, durability: 'disk' as never })).toThrow(TypeError);
    expect(() => sqliteStore({ path, busyTimeoutMs: -1 })).toThrow(/busyTimeoutMs/);
  });
});

const WORKER = `
import { newRecord, applyEvent } from ${JSON.stringify(join(SRC, 'operation/record.ts'))};
const [path, worker, ids, increments] = process.argv.slice(2);
const loadedBefore = Object.keys((await import('node:module')).createRequire(import.meta.url).cache)
  .some((k) => k.includes('better-sqlite3'));
const { sqliteStore } = await import(${JSON.stringify(join(SRC, 'stores/sqlite.ts'))});
const loadedAfterImport = Object.keys((await import('node:module')).createRequire(import.meta.url).cache)
  .some((k) => k.includes('better-sqlite3'));
const store = sqliteStore({ path });
const make = (ref, key) => newRecord({
  scope: { tenant: 't1', action: 'a', ref }, key, keySource: 'minted', fingerprint: 'b'.repeat(64),
  request: null, owner: worker, now: 1, leaseMs: 10, retentionMs: 1000,
});
const claims = [];
await store.claim(make('counter', 'counter'));
for (let i = 0; i < Number(ids); i++) {
  const { created, record } = await store.claim(make('r' + i, worker + '-' + i));
  claims.push({ ref: 'r' + i, created, key: record.key });
}
let conflicts = 0;
for (let n = 0; n < Number(increments); ) {
  const current = await store.get(make('counter', 'counter').id);
  const next = applyEvent(current, { type: 'evidence', kind: 'attempt', detail: worker, status: null }, 2, worker);
  const result = await store.compareAndSet(current.id, current.generation, next);
  if (result.ok) n++; else conflicts++;
}
await store.close();
process.stdout.write(JSON.stringify({ loadedBefore, loadedAfterImport, claims, conflicts }));
`;

interface WorkerReport {
  loadedBefore: boolean;
  loadedAfterImport: boolean;
  claims: Array<{ ref: string; created: boolean; key: string }>;
  conflicts: number;
}

function runWorker(file: string, args: string[]): Promise<WorkerReport> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', TSX, file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) =>
      code === 0 ? done(JSON.parse(out) as WorkerReport) : fail(new Error(`worker exited ${code}: ${err}`)),
    );
  });
}

describe('sqliteStore across processes', () => {
  let dir: string;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('claims and compare-and-sets stay atomic between 4 processes on one file', { timeout: 30_000 }, async () => {
    const file = join(dir, 'worker.mts');
    writeFileSync(file, WORKER);
    const path = join(dir, 'shared.db');
    const workers = ['w0', 'w1', 'w2', 'w3'];
    const ids = 40;
    const increments = 25;
    const reports = await Promise.all(workers.map((w) => runWorker(file, [path, w, String(ids), String(increments)])));

    for (const report of reports) {
      expect(report.loadedBefore).toBe(false);
      expect(report.loadedAfterImport).toBe(false); // importing oncefetch/sqlite does not load the driver
    }
    for (let i = 0; i < ids; i++) {
      const seen = reports.map((report) => report.claims[i]!);
      expect(seen.filter((c) => c.created)).toHaveLength(1);
      const winner = seen.find((c) => c.created)!;
      expect(seen.map((c) => c.key)).toEqual(Array(workers.length).fill(winner.key));
    }
    const store = sqliteStore({ path });
    const counter = (await store.list({ limit: 1_000 })).find((r) => r.ref === 'counter')!;
    // the low 20 bits count the writes since the claim, from 1 (firstGeneration)
    expect(counter.generation % 2 ** 20).toBe(1 + workers.length * increments);
    expect(counter.evidence).toHaveLength(workers.length * increments);
    await store.close();
  });
});
