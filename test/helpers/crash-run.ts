/**
 * Spawning and watching crash-worker processes from a test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { recordId, type OperationRecord } from '../../src/operation/record.js';
import { CRASH_ACTION, type CrashLine, type CrashWorkerConfig, type ErrorLine, type ResultLine } from './crash-protocol.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER = fileURLToPath(new URL('./crash-worker.ts', import.meta.url));

/** A worker process and what it printed so far. */
export interface WorkerRun {
  readonly child: ChildProcess;
  readonly lines: CrashLine[];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  results(): ResultLine[];
  errors(): ErrorLine[];
}

/** Starts `crash-worker.ts` in its own Node process; it is SIGKILLed after `timeoutMs` at the latest. */
export function startWorker(config: CrashWorkerConfig, timeoutMs = 40_000): WorkerRun {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  if (config.waitForGo !== true) child.stdin?.end();
  const lines: CrashLine[] = [];
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      lines.push(JSON.parse(text) as CrashLine);
    } catch {
      stderr += `(non-JSON stdout) ${text}\n`;
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal });
    }),
  );
  return {
    child,
    lines,
    exited,
    stderr: () => stderr,
    results: () => lines.filter((l): l is ResultLine => l.type === 'result'),
    errors: () => lines.filter((l): l is ErrorLine => l.type === 'error'),
  };
}

/** Releases workers started with `waitForGo` once every one of them is ready. */
export async function startTogether(runs: WorkerRun[], timeoutMs = 20_000): Promise<void> {
  await waitUntil(() => runs.every((r) => r.lines.some((l) => l.type === 'ready') || r.child.exitCode !== null), 'every worker to be ready', timeoutMs);
  for (const run of runs) run.child.stdin?.end('go\n');
}

/** Kills (SIGCONT first, in case it is stopped) every run still alive, and waits for all to exit. */
export async function killAll(runs: WorkerRun[]): Promise<void> {
  for (const run of runs) {
    if (run.child.exitCode === null && run.child.signalCode === null) {
      run.child.kill('SIGCONT');
      run.child.kill('SIGKILL');
    }
  }
  await Promise.all(runs.splice(0).map((r) => r.exited));
}

/** Polls `condition` every few ms until it holds; fails naming `what` after `timeoutMs`. */
export async function waitUntil(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * Reads a record as the files on disk hold it right now, without touching
 * them: the database and its `-wal`/`-shm` are copied aside and the copy is
 * opened (recovering its WAL there). The next worker on the real file does
 * its own recovery, as a restarted process would.
 */
export function readRecordOnDisk(dbPath: string, ref: string, tenant = 'default'): OperationRecord | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'oncefetch-peek-'));
  try {
    const copy = join(dir, 'peek.db');
    copyFileSync(dbPath, copy);
    for (const suffix of ['-wal', '-shm']) if (existsSync(dbPath + suffix)) copyFileSync(dbPath + suffix, copy + suffix);
    const db = new Database(copy);
    try {
      const row = db.prepare('SELECT data FROM oncefetch_records WHERE id = ?').get(recordId({ tenant, action: CRASH_ACTION, ref })) as
        | { data: string }
        | undefined;
      return row === undefined ? undefined : (JSON.parse(row.data) as OperationRecord);
    } finally {
      db.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Whether the process is stopped (SIGSTOP), from `/proc/<pid>/stat`; undefined
 * where there is no `/proc`.
 */
export function isStopped(pid: number): boolean | undefined {
  const file = `/proc/${pid}/stat`;
  if (!existsSync(file)) return undefined;
  const stat = readFileSync(file, 'utf8');
  // "pid (comm) S ...": the state follows the last ')'.
  return stat.charAt(stat.lastIndexOf(')') + 2) === 'T';
}
