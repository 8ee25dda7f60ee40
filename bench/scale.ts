/**
 * `npm run bench:scale`: the SQLite store at 1,000 and at 1,000,000 records.
 * Both files are open at once and measured interleaved (one op on each in
 * turn), so machine noise hits both alike; then the 1,000,000 expired records
 * are purged and timed. RSS is printed at each stage.
 *
 *   npm run bench:scale -- [--records 1000000] [--ops 5000] [--keep]
 *
 * @module
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type BetterSqlite3 from 'better-sqlite3';
import { applyEvent, newRecord } from '../src/operation/record.js';
import type { OperationRecord } from '../src/operation/record.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import type { OnceStore } from '../src/stores/contract.js';
import { percentile } from './harness.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    ops: { type: 'string', default: '5000' },
    keep: { type: 'boolean', default: false },
  },
});
const LARGE = Number(values.records);
const SMALL = 1000;
const OPS = Number(values.ops);
const DAY = 86_400_000;

const rssMiB = (): string => `${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`;
const fileMiB = (path: string): string => {
  let bytes = 0;
  for (const suffix of ['', '-wal']) {
    try {
      bytes += statSync(path + suffix).size;
    } catch {
      // no such file
    }
  }
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
};

/** A finished operation with a stored 201 response, as the engine writes it. */
function finished(ref: string, now: number, retentionMs: number): OperationRecord {
  const fresh = newRecord({
    scope: { tenant: 'bench', action: 'create-order', ref },
    key: globalThis.crypto.randomUUID(),
    keySource: 'minted',
    fingerprint: 'e'.repeat(64),
    request: { method: 'POST', url: 'http://127.0.0.1/orders' },
    owner: 'scale-owner',
    now,
    leaseMs: 30_000,
    retentionMs,
  });
  const started = applyEvent(fresh, { type: 'attempt_started', attemptId: globalThis.crypto.randomUUID() }, now, 'scale-owner');
  const body = Buffer.from(`{"id":"o-${ref}","status":"created"}`).toString('base64');
  return applyEvent(
    started,
    {
      type: 'attempt_finished',
      class: 'success',
      status: 201,
      reason: 'HTTP 201',
      result: { kind: 'response', source: 'attempt', status: 201, statusText: 'Created', headers: [['content-type', 'application/json']], body, bodyTruncated: false },
    },
    now,
    'scale-owner',
  );
}

/** Fills `path` (created by the store) with `n` terminal records, already expired, in large raw transactions. */
function fill(path: string, n: number, prefix: string): void {
  const Driver = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const db = new Driver(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF'); // bulk load only: the store reopens the file with its own settings
  const insert = db.prepare(
    `INSERT INTO oncefetch_records (id, generation, state, tenant, lease_expires_at, expires_at, updated_at, data)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const template = finished(`${prefix}0`, 1_000, DAY);
  const batch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const ref = `${prefix}${i}`;
      const id = JSON.stringify([template.tenant, template.action, ref]);
      const record = { ...template, id, ref, key: `key-${prefix}-${i}`, updatedAt: 1_000 + i, expiresAt: 1_000 + DAY };
      insert.run(id, record.generation, record.state, record.tenant, null, record.expiresAt, record.updatedAt, JSON.stringify(record));
    }
  });
  const step = 50_000;
  for (let from = 0; from < n; from += step) {
    batch(from, Math.min(n, from + step));
    if (n > step) process.stdout.write(`\r  filling ${Math.min(n, from + step).toLocaleString('en')} / ${n.toLocaleString('en')}`);
  }
  if (n > step) process.stdout.write('\n');
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

interface Timings {
  claim: number[];
  get: number[];
}

/** One claim of a new record and one get of a random existing record on each store, in turn. */
async function measure(stores: Array<{ store: OnceStore; size: number; prefix: string }>, ops: number, phase: string): Promise<Timings[]> {
  const out = stores.map(() => ({ claim: [] as number[], get: [] as number[] }));
  const now = Date.now();
  for (let i = 0; i < ops; i++) {
    for (const [s, { store, size, prefix }] of stores.entries()) {
      const fresh = finished(`${phase}-${prefix}-${i}`, now, DAY);
      let t = performance.now();
      const { created } = await store.claim(fresh);
      out[s]!.claim.push(performance.now() - t);
      if (!created) throw new Error('claim found an existing record');
      const id = JSON.stringify(['bench', 'create-order', `${prefix}${Math.floor(Math.random() * size)}`]);
      t = performance.now();
      const record = await store.get(id);
      out[s]!.get.push(performance.now() - t);
      if (record === undefined) throw new Error(`record ${id} missing`);
    }
  }
  return out;
}

const us = (ms: number): string => `${(ms * 1000).toFixed(0)} µs`;
const summary = (xs: number[]): { p50: number; p99: number } => {
  const sorted = Float64Array.from(xs).sort();
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
};

const dir = mkdtempSync(join(tmpdir(), 'oncefetch-scale-'));
const smallPath = join(dir, 'small.db');
const largePath = join(dir, 'large.db');
const started = performance.now();
try {
  console.log(`oncefetch bench:scale — SQLite store, ${SMALL.toLocaleString('en')} vs ${LARGE.toLocaleString('en')} records; RSS at start ${rssMiB()}`);
  await sqliteStore({ path: smallPath }).close(); // creates the schema
  await sqliteStore({ path: largePath }).close();
  let t = performance.now();
  fill(smallPath, SMALL, 's');
  fill(largePath, LARGE, 'l');
  console.log(`filled in ${((performance.now() - t) / 1000).toFixed(1)} s; large file ${fileMiB(largePath)}; RSS ${rssMiB()}`);

  const small = sqliteStore({ path: smallPath });
  const large = sqliteStore({ path: largePath });
  await measure([{ store: small, size: SMALL, prefix: 's' }, { store: large, size: LARGE, prefix: 'l' }], 500, 'warm'); // warm-up
  const [a, b] = await measure([{ store: small, size: SMALL, prefix: 's' }, { store: large, size: LARGE, prefix: 'l' }], OPS, 'new');
  const rows = [
    ['claim', summary(a!.claim), summary(b!.claim)],
    ['get', summary(a!.get), summary(b!.get)],
  ] as const;
  console.log(`\n${OPS.toLocaleString('en')} claims and gets on each, interleaved; RSS ${rssMiB()}\n`);
  console.log(`| op | p50 @ ${SMALL.toLocaleString('en')} | p99 @ ${SMALL.toLocaleString('en')} | p50 @ ${LARGE.toLocaleString('en')} | p99 @ ${LARGE.toLocaleString('en')} | p99 ratio | target ≤ 1.5× |`);
  console.log('|---|---:|---:|---:|---:|---:|---|');
  for (const [op, s, l] of rows) {
    const ratio = l.p99 / s.p99;
    console.log(`| ${op} | ${us(s.p50)} | ${us(s.p99)} | ${us(l.p50)} | ${us(l.p99)} | ${ratio.toFixed(2)}× | ${ratio <= 1.5 ? 'met' : 'NOT met'} |`);
  }
  await small.close();

  t = performance.now();
  const purged = await large.purge(Date.now());
  const purgeS = (performance.now() - t) / 1000;
  console.log(`\npurge: ${purged.toLocaleString('en')} expired records in ${purgeS.toFixed(1)} s (${Math.round(purged / purgeS).toLocaleString('en')}/s); RSS ${rssMiB()}`);
  await large.close();
  console.log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
} finally {
  if (!values.keep) rmSync(dir, { recursive: true, force: true });
  else console.log(`kept ${dir}`);
}
