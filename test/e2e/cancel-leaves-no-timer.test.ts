/**
 * `client.cancel(scope, { waitMs })` while a call of this client is still claiming the operation waits
 * for that call, up to `waitMs`. Once the call ends the wait's timer must go: left armed, it holds a
 * script's process open for the rest of `waitMs` after everything was closed (20 s here).
 *
 * The process is a child this test starts; the provider is a loopback one inside it.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER = fileURLToPath(new URL('../helpers/cancel-exit-worker.ts', import.meta.url));

it('a script that cancels its claiming call (waitMs 20 s), then closes the client, exits at once: no timer left', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, '20000'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
  let printedAt = 0;
  let line = '';
  createInterface({ input: child.stdout }).on('line', (text) => {
    line = text;
    printedAt = performance.now();
  });
  const exited = await new Promise<{ code: number | null; at: number }>((resolve) => child.on('exit', (code) => resolve({ code, at: performance.now() })));
  clearTimeout(kill);
  expect(stderr).toBe('');
  expect(JSON.parse(line)).toEqual({ result: { outcome: 'cancelled', state: 'cancelled' }, outcome: 'OperationCancelledError', requests: 0, effects: 0 });
  // (at once: well under the 20 s the wait's timer would hold it; killed after 15 s otherwise)
  expect(exited.at - printedAt).toBeLessThan(3_000);
  expect(exited.code).toBe(0);
}, 20_000);
