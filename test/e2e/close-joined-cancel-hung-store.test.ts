/**
 * `client.close()` without `waitMs` after a joined call's `once.signal` cancel, on a store that stops
 * answering reads (a database blackholed). The cancel write (`Engine.requestCancel`: a read, then a
 * compare-and-set) runs in the background; `close()` waits for it (`Engine.cancelling`, b0239b4).
 * Review: that wait had no bound. Every other wait of a close without `waitMs` ends by itself (a call
 * by its deadline, an outcome's write cut off by its lease's end, an undo at most 1 s), as the README
 * says ("Without `waitMs` the wait lasts as long as that work (each call ends by its own deadline)");
 * a cancel write whose read never settles held `close()` for ever (before b0239b4 it returned at once).
 * Now close() waits for such a write at most `retry.deadlineMs` from the cancel, as a call would, and
 * that bound's timer keeps no process alive (a first version of the bound held the process's exit
 * until `retry.deadlineMs` after the close: 119.8 s with the default 120 s; now unref'd on Node).
 * Effects are counted at a loopback provider that does not dedupe.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RetriesExhaustedError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import type { Provider } from '../../src/testing/provider.js';
import { keylessProviderEachTest, timed } from '../helpers/keyless-provider.js';
import { orderInit, until, wait } from '../helpers/setup.js';

let provider: Provider;
const cleanups = keylessProviderEachTest((p) => (provider = p));
const ACTION = 'create-order';

/** A memory store whose reads never settle while `plan.hang`. */
function hangingReads() {
  const inner = memoryStore();
  const plan = { hang: false, hungReads: 0 };
  const store: OnceStore = {
    name: inner.name,
    claim: (record) => inner.claim(record),
    get: async (id) => {
      if (plan.hang) {
        plan.hungReads++;
        return new Promise(() => undefined);
      }
      return inner.get(id);
    },
    compareAndSet: (id, expected, next) => inner.compareAndSet(id, expected, next),
    list: (query) => inner.list(query),
    purge: (now) => inner.purge(now),
    close: async () => undefined,
  };
  return { store, plan };
}

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
beforeEach(() => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => void process.off('unhandledRejection', onUnhandled));

describe("client.close() without waitMs after a joined call's once.signal cancel, the store's reads hung", () => {
  it('returns by the deadline counted from the cancel, not never; 1 request, 0 effects', async () => {
    const { store, plan } = hangingReads();
    const deadlineMs = 1_500;
    const handed = { n: 0 };
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      handed.n++;
      await wait(100);
      return globalThis.fetch(input, init);
    }) as typeof globalThis.fetch;
    const c: OnceClient = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, deadlineMs, budget: false } });
    cleanups.push(() => c.close({ waitMs: 0 }));
    const ref = 'JC-HUNG';
    const post = (signal?: AbortSignal) => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, ...(signal === undefined ? {} : { signal }) } });
    provider.fault({ kind: 'status_before_commit', status: 503 });

    const owner = timed(post(), 5_000);
    await until(() => handed.n === 1);
    const cancel = new AbortController();
    const joiner = timed(post(cancel.signal), 5_000);
    await wait(20);
    plan.hang = true;
    cancel.abort(new Error('the joiner cancels'));
    const [o, j] = await Promise.all([owner, joiner]);
    expect(o.outcome).toBe(RetriesExhaustedError.name);
    expect(j.outcome).toBe(RetriesExhaustedError.name);
    await until(() => plan.hungReads > 0);

    const closing = performance.now();
    const closed = await Promise.race([c.close().then(() => 'closed'), wait(deadlineMs + 4_000).then(() => 'still waiting')]);
    const closeMs = Math.round(performance.now() - closing);
    console.log(`close() without waitMs: ${closed} after ${closeMs} ms (deadlineMs ${deadlineMs}); hung reads ${plan.hungReads}; unhandled ${unhandled.length}; requests ${provider.requests.length}, effects ${provider.effectsFor(ref)}`);
    expect(closed).toBe('closed');
    // (the bound counts from the cancel, before the close; the slack is for a loaded machine's timers)
    expect(closeMs).toBeLessThanOrEqual(deadlineMs + 1_500);
    expect(unhandled).toEqual([]);
    expect(provider.requests.length).toBe(1);
    expect(provider.effectsFor(ref)).toBe(0);
  });
});

/** Runs test/helpers/joined-cancel-child.ts in `mode`; its exit code, output, and when it printed and exited. */
async function runChild(mode: 'exit' | 'returns'): Promise<{ code: number | null; stdout: string; stderr: string; exitMs: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../helpers/joined-cancel-child.ts', import.meta.url)), mode], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let printedAt: number | undefined;
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    if (printedAt === undefined && stdout.includes('\n')) printedAt = performance.now();
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const kill = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
  const exitedAt = performance.now();
  clearTimeout(kill);
  return { code, stdout: stdout.trim(), stderr: stderr.trim(), exitMs: printedAt === undefined ? Infinity : Math.round(exitedAt - printedAt) };
}

type ChildResult = { outcomes: string[]; closeMs: number; requests: number; effects: number };

describe('the bound on that wait keeps no process alive', () => {
  it('a process whose close({ waitMs: 300 }) left such a write hung exits at once, not at retry.deadlineMs (60 s); 1 request, 0 effects', async () => {
    const { stdout, stderr, exitMs } = await runChild('exit');
    console.log(`child: ${stdout}; exited ${exitMs} ms after its last line${stderr === '' ? '' : `; stderr ${stderr}`}`);
    const result = JSON.parse(stdout) as ChildResult;
    expect(result.outcomes).toEqual([RetriesExhaustedError.name, RetriesExhaustedError.name]);
    expect(result.closeMs).toBeLessThan(2_000);
    expect(exitMs).toBeLessThan(5_000);
    expect(result.requests).toBe(1);
    expect(result.effects).toBe(0);
  }, 30_000);
  it('a process with nothing else left to wait for: close() without waitMs still returns by that bound and the code after it runs (not an exit under it, code 13); 1 request, 0 effects', async () => {
    const { code, stdout, stderr } = await runChild('returns');
    console.log(`child (close() without waitMs, deadlineMs 1500): exit code ${code}; stdout ${JSON.stringify(stdout)}${stderr === '' ? '' : `; stderr ${stderr.slice(0, 300)}`}`);
    expect(code).toBe(0);
    const result = JSON.parse(stdout) as ChildResult;
    expect(result.outcomes).toEqual([RetriesExhaustedError.name, RetriesExhaustedError.name]);
    // (the bound counts from the cancel, before the close; the slack is for a loaded machine's timers)
    expect(result.closeMs).toBeLessThanOrEqual(1_500 + 1_500);
    expect(result.requests).toBe(1);
    expect(result.effects).toBe(0);
  }, 30_000);
});
