/**
 * A call whose own attempt got a 2xx after another owner took the operation over (here: its wall clock
 * stepped 2 h forward, NTP-style, while the request was on the wire, so a second client saw the lease as
 * run out) follows the new owner. When that owner still holds the lease at the end of its wait, the call
 * ends with OperationInFlightError, whose doc says "nothing was sent by this call". Its message must say
 * that this call's request was sent and answered 2xx (the effect happened), not only "call again later".
 * Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { OperationInFlightError, createClient, memoryStore } from '../../src/index.js';
import { wait } from '../helpers/setup.js';


it('a call whose own attempt got a 201, then timed out waiting for the owner that took it over, says its request took effect', async () => {
  let t = Date.UTC(2026, 0, 1);
  const now = () => t;
  const store = memoryStore();
  let effects = 0;
  let release: (() => void) | undefined;
  const fetchA = ((async () =>
    new Promise<Response>((resolve) => {
      release = () => {
        effects++;
        resolve(new Response('{"id":1}', { status: 201, headers: { 'content-type': 'application/json' } }));
      };
    })) as unknown) as typeof globalThis.fetch;
  const fetchB = (async () => {
    effects++;
    return new Response('{"id":2}', { status: 201 });
  }) as typeof globalThis.fetch;
  let lookups = 0;
  const lookup = async () => {
    lookups++;
    return effects > 0 ? new Response('{"id":1}', { status: 200 }) : null;
  };
  const common = { store, now, telemetry: false, leaseMs: 300, retry: { deadlineMs: 60_000, baseDelayMs: 1, maxDelayMs: 1, budget: false as const } };
  const a = createClient({ ...common, fetch: fetchA, inFlightWaitMs: 200 });
  const b = createClient({ ...common, fetch: fetchB, settleMs: 1_500 });
  const init = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17', lookup } };
  const pa = a.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  while (release === undefined) await wait(5);
  t += 2 * 3_600_000; // the clock steps forward while A's request is on the wire
  const pb = b.fetch('https://api.example.test/orders', init).then((r) => r.status, (e: unknown) => e);
  while (lookups === 0) await wait(5); // B took over and asked: absent; it holds the lease through settleMs
  release();
  const outA = await pa;
  const outB = await pb;
  expect(effects).toBe(1);
  expect(outB).toBe(200);
  expect(outA).toBeInstanceOf(OperationInFlightError);
  const message = (outA as Error).message;
  expect(message).toMatch(/This call's request was sent and answered 201: the operation took effect/);
  // the deadline is counted on the client's clock (`now`), which stepped 2 h past it: the message names what ended the wait
  expect(message).toMatch(/gave up waiting after 0 ms \(the call's deadline\)/);
  await a.close();
  await b.close();
}, 15_000);
