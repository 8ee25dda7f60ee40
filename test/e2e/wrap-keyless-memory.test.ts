/**
 * `client.wrap()` remembers the payload of each keyless call whose outcome stayed unknown, with its
 * error, for `retry.deadlineMs` (see wrap.ts). Measured in a soak trial: an entry past that window was
 * dropped only when the same payload came again, or when 1,000 newer ones pushed it out; the error
 * keeps its 5xx `Response` (a clone: twice its body), so 1,000 keyless 500s with a 1 MB error page held
 * 1.9 GB of ArrayBuffers for as long as the process ran, 10 minutes and 100 calls later too. An entry
 * past its window is now forgotten on the next keyless call.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let server: Server | undefined;
let once: OnceClient | undefined;
afterEach(async () => {
  await once?.close();
  await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  once = server = undefined;
});

/** 500 with a 64 KiB page to every request but `/ok` (201). */
async function provider(): Promise<string> {
  const page = 'E'.repeat(65_536);
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/ok') res.writeHead(201).end('{}');
      else res.writeHead(500, { 'content-type': 'text/html' }).end(page);
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('client.wrap(): what it remembers of keyless calls of unknown outcome', () => {
  it('is let go once retry.deadlineMs has passed, on the next keyless call (not held until 1,000 newer ones push it out)', async () => {
    const url = await provider();
    let clock = 1_000_000;
    once = createClient({ store: memoryStore(), now: () => clock, telemetry: false, retry: { maxAttempts: 1, deadlineMs: 60_000 } });
    const wrapped = once.wrap();
    // (each error only in its own frame: one the test's frame or expect() kept would not be let go)
    const ambiguous = async (i: number): Promise<WeakRef<object>> => {
      const error = (await wrapped(`${url}/orders`, { method: 'POST', body: JSON.stringify({ i }) }).catch((e: unknown) => e)) as { code?: unknown };
      expect(error.code).toBe('AMBIGUOUS_OUTCOME');
      return new WeakRef(error);
    };
    const refs: WeakRef<object>[] = [];
    for (let i = 0; i < 5; i++) refs.push(await ambiguous(i));
    // within the window: still remembered (a resend of the same payload is refused)
    const refused = await wrapped(`${url}/orders`, { method: 'POST', body: JSON.stringify({ i: 0 }) }).then(
      () => false,
      (e: unknown) => e instanceof TypeError,
    );
    expect(refused).toBe(true);
    clock += 60_001;
    const res = await wrapped(`${url}/ok`, { method: 'POST', body: '{"other":1}' });
    expect(res.status).toBe(201);
    await res.arrayBuffer();
    // (a WeakRef's target is kept until the end of the job that made it)
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(refs.flatMap((r, i) => (r.deref() === undefined ? [] : [i]))).toEqual([]);
  });
});
