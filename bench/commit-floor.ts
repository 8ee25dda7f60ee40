/**
 * The floor under the SQLite store's latency: what one bare better-sqlite3
 * transaction costs on this machine, on the store's own table and indexes,
 * with no oncefetch code around it. A once-only call at c=1 commits twice in
 * its latency path (the claim before the send, the outcome before the
 * response is returned), so twice this figure is spent before any of
 * oncefetch's own work.
 *
 *   npx tsx bench/commit-floor.ts [--dir /path] [--commits 5000]
 *
 * Each commit: `BEGIN IMMEDIATE`, one insert-if-absent of a ~1 KiB row (or one
 * compare-and-set update of it), `COMMIT`, in WAL mode with
 * `synchronous=NORMAL` (the default store) and `FULL` (`power-loss`).
 *
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { sqliteStore } from '../src/stores/sqlite.js';

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: tmpdir() },
    commits: { type: 'string', default: '5000' },
  },
});
const commits = Number(values.commits);
if (!Number.isSafeInteger(commits) || commits < 1) throw new RangeError('--commits must be a positive integer');
const dir = mkdtempSync(join(values.dir, 'oncefetch-floor-'));

try {
  for (const synchronous of ['NORMAL', 'FULL'] as const) {
    const path = join(dir, `${synchronous}.db`);
    const db = new Database(path);
    // The store creates its schema (table, indexes, WAL) on this handle; then we time bare statements on it.
    const store = sqliteStore({ path, database: db });
    db.pragma(`synchronous = ${synchronous}`);
    const begin = db.prepare('BEGIN IMMEDIATE');
    const commit = db.prepare('COMMIT');
    const insert = db.prepare(
      'INSERT INTO oncefetch_records (id, generation, state, tenant, lease_expires_at, expires_at, updated_at, data) VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
    );
    const update = db.prepare(
      'UPDATE oncefetch_records SET generation = 2, state = ?, lease_expires_at = NULL, updated_at = ?, data = ? WHERE id = ? AND generation = 1',
    );
    const data = JSON.stringify({ padding: 'x'.repeat(1000) });
    const timed = (fn: (i: number) => void): number => {
      const started = process.hrtime.bigint();
      for (let i = 0; i < commits; i++) {
        begin.run();
        fn(i);
        commit.run();
      }
      return Number(process.hrtime.bigint() - started) / commits / 1000;
    };
    const now = Date.now();
    const claim = timed((i) => insert.run(`r${i}`, 'in_flight', 't1', now + 30_000, now + 86_400_000, now, data));
    const outcome = timed((i) => update.run('succeeded', now, data, `r${i}`));
    console.log(
      `synchronous=${synchronous.padEnd(6)} one claim commit ${claim.toFixed(1)} µs, one outcome commit ${outcome.toFixed(1)} µs ` +
        `(${commits} each, ${values.dir})`,
    );
    await store.close();
    db.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
