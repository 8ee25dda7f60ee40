/**
 * A chaos run on PostgreSQL stopped by SIGINT (Ctrl-C) or SIGTERM leaves nothing behind: its
 * worker processes are killed, the schema made for the run is dropped and the run directory
 * removed, and the runner exits 128 + the signal's number (130, 143).
 *
 * The workers are found by their command line (`chaos/worker.ts` and a configuration naming the
 * run's schema and history files), so this runs where `/proc` exists.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { adminPool, describeWithPostgres, dropSchema } from '../helpers/postgres.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKERS = 2;

interface Worker {
  pid: number;
  runDir: string;
}

/** The live worker processes of the run whose records are in `schema`. */
function workersOf(schema: string): Worker[] {
  const found: Worker[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    if (!args.some((a) => a.endsWith('chaos/worker.ts'))) continue;
    const config = args.find((a) => a.includes(`"schema":"${schema}"`));
    if (config === undefined) continue;
    found.push({ pid: Number(entry), runDir: dirname((JSON.parse(config) as { historyPath: string }).historyPath) });
  }
  return found;
}

/** A chaos runner on PostgreSQL as a child process, its stderr collected, and an admin connection to look at the schema. */
function startRun(url: string, ops: number) {
  const admin = adminPool(url, 1);
  const schemaExists = async (name: string): Promise<boolean> =>
    ((await admin.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [name])).rowCount ?? 0) > 0;
  const child = spawn(process.execPath, ['--import', 'tsx', 'chaos/run.ts', '--store', 'postgres', '--ops', String(ops), '--workers', String(WORKERS), '--seed', '7'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stdout.resume();
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, sig) => done({ code, signal: sig })));
  // The runner logs the schema once it has made it, then starts the workers.
  const schemaName = (): string | undefined => /schema (oncefetch_chaos_[0-9a-f]+)/.exec(stderr)?.[1];
  return { admin, schemaExists, child, exited, schemaName, stderr: () => stderr };
}

describeWithPostgres('a chaos run on PostgreSQL stopped by a signal', (url) => {
  it.skipIf(!existsSync('/proc')).each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s: workers killed, schema dropped, run directory removed, exit %i', { timeout: 30_000 }, async (signal, exitCode) => {
    const { admin, schemaExists, child, exited, schemaName, stderr } = startRun(url, 400);
    let schema: string | undefined;
    let runDir: string | undefined;
    try {
      await expect.poll(schemaName, { timeout: 15_000, interval: 50 }).toBeDefined();
      schema = schemaName()!;
      expect(await schemaExists(schema)).toBe(true);
      await expect.poll(() => workersOf(schema!).length, { timeout: 15_000, interval: 50 }).toBe(WORKERS);
      runDir = workersOf(schema)[0]!.runDir;
      expect(existsSync(runDir)).toBe(true);

      child.kill(signal);
      const exit = await Promise.race([exited, new Promise((done) => setTimeout(() => done('still running 10 s after the signal'), 10_000))]);
      expect({ exit, workers: workersOf(schema).map((w) => w.pid), schema: await schemaExists(schema), runDir: existsSync(runDir) }, stderr()).toEqual({
        exit: { code: exitCode, signal: null },
        workers: [],
        schema: false,
        runDir: false,
      });
      expect(stderr()).toContain(`[chaos] interrupted by ${signal}`);
    } finally {
      child.kill('SIGKILL');
      if (schema !== undefined) {
        for (const w of workersOf(schema)) process.kill(w.pid, 'SIGKILL');
        await dropSchema(admin, schema);
      }
      if (runDir !== undefined) rmSync(runDir, { recursive: true, force: true });
      await admin.end();
    }
  });

  it.skipIf(!existsSync('/proc'))('a runner that fails (its table dropped before the final recovery): the schema is dropped too, and the exit code stays 1', { timeout: 30_000 }, async () => {
    const { admin, schemaExists, child, exited, schemaName, stderr } = startRun(url, 40);
    let schema: string | undefined;
    try {
      await expect.poll(schemaName, { timeout: 15_000, interval: 50 }).toBeDefined();
      schema = schemaName()!;
      // The final recovery waits past the lease and settle window (2.3 s) before it reads the store.
      await expect.poll(() => stderr().includes('[chaos] workers done'), { timeout: 15_000, interval: 20 }).toBe(true);
      await admin.query(`DROP TABLE "${schema}".oncefetch_records`);
      const exit = await Promise.race([exited, new Promise((done) => setTimeout(() => done('still running 15 s after the table was dropped'), 15_000))]);
      expect({ exit, schema: await schemaExists(schema), workers: workersOf(schema).length }, stderr()).toEqual({ exit: { code: 1, signal: null }, schema: false, workers: 0 });
      expect(stderr()).toMatch(/StoreError: .*table does not exist/);
    } finally {
      child.kill('SIGKILL');
      if (schema !== undefined) await dropSchema(admin, schema);
      await admin.end();
    }
  });
});
