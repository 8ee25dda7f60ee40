/**
 * The demo's crash: a real child process places one order, the provider
 * commits it and holds the response, and the child is SIGKILLed while it
 * waits. What survives is only what the client had persisted.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import type { Provider } from '../testing/provider.js';

/** What happened to the worker. */
export interface CrashReport {
  pid: number | null;
  /** the provider committed the order before the kill */
  committed: boolean;
  /** the worker was SIGKILLed (rather than exiting on its own) */
  killed: boolean;
  /** why the crash did not go as planned, if it did not */
  problem: string | null;
}

const COMMIT_WAIT_MS = 20_000;
const POLL_MS = 5;

/**
 * Starts `demo-worker` with `args`, waits until the provider has committed
 * `ref`, then SIGKILLs the worker. The worker is this same program
 * (`process.argv[1]`, with the same Node flags, so it also works under tsx).
 */
export async function crashWorker(provider: Provider, ref: string, args: readonly string[]): Promise<CrashReport> {
  const script = process.argv[1];
  if (script === undefined) return { pid: null, committed: false, killed: false, problem: 'cannot locate the oncefetch script to start a worker' };
  // Commit, then hold the answer far longer than the worker will live.
  provider.fault({ kind: 'delay_after_commit', delayMs: 60_000, match: { ref } });
  const child = spawn(process.execPath, [...process.execArgv, script, 'demo-worker', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exit = new Promise<void>((done) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      done();
    }),
  );
  const spawnError = new Promise<Error>((done) => child.once('error', done));
  const deadline = Date.now() + COMMIT_WAIT_MS;
  let failure: Error | undefined;
  void spawnError.then((e) => (failure = e));
  while (provider.effectsFor(ref) === 0 && exited === undefined && failure === undefined && Date.now() < deadline) {
    await new Promise((done) => setTimeout(done, POLL_MS));
  }
  const committed = provider.effectsFor(ref) > 0;
  const wasRunning = exited === undefined && failure === undefined;
  if (wasRunning) child.kill('SIGKILL');
  if (failure === undefined) await exit;
  const killed = wasRunning && exited?.signal === 'SIGKILL';
  let problem: string | null = null;
  if (failure !== undefined) problem = `the worker could not start: ${failure.message}`;
  else if (!wasRunning) problem = `the worker exited on its own (code ${exited?.code ?? '?'})${stderr === '' ? '' : `: ${stderr.trim().split('\n').slice(-3).join(' ')}`}`;
  else if (!committed) problem = `the provider did not receive the order within ${COMMIT_WAIT_MS} ms`;
  return { pid: child.pid ?? null, committed, killed, problem };
}
