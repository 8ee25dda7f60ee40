/**
 * explain() of a cancelled record past its expiresAt said "Nothing to do: nothing was delivered and
 * nothing will be sent for this ref" and "Later calls with this ref reject with OperationCancelledError
 * and send nothing", then "after the next purge() a call with ref … is a new operation: a new key, sent
 * again". After the purge the cancel is forgotten and a call with the ref sends the request the caller
 * cancelled (measured below: 1 effect at a scripted fetch, which answered 503 before the cancel). The
 * plan and the verification must not promise that nothing will be sent, and must say the cancel is forgotten.
 */
import { expect, it } from 'vitest';
import { OperationCancelledError, createClient, memoryStore } from '../../src/index.js';

const H = 3_600_000;

it('explain() of a cancelled record past its expiry says the cancel is forgotten after the next purge (the ref then sends); within retention it promises nothing is sent', async () => {
  let t = Date.UTC(2026, 0, 1);
  let sends = 0;
  let effects = 0;
  const fetch = (async () => {
    sends++;
    if (sends === 1) return new Response('busy', { status: 503 });
    effects++;
    return new Response('{"id":1}', { status: 201 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, now: () => t, telemetry: false, retentionMs: 24 * H, retry: { maxAttempts: 1, budget: false } });
  const scope = { action: 'create-order', ref: 'C-1' };
  const post = () => client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: scope });
  await expect(post()).rejects.toThrow(/503/);
  expect((await client.cancel(scope)).state).toBe('cancelled');
  t += 23 * H;
  const within = await client.explain(scope);
  expect(within?.plan.join(' ')).toMatch(/nothing will be sent for this ref\./);
  expect(within?.plan.join(' ')).not.toMatch(/purge/);
  t += 26 * H;
  const expired = await client.explain(scope);
  const plan = expired?.plan.join(' ') ?? '';
  expect(plan).not.toMatch(/nothing will be sent for this ref\./);
  expect(plan).toMatch(/after the next purge\(\) the cancel is forgotten: a call with ref 'C-1' is a new operation and is sent, under a new key/);
  expect(expired?.verification.join(' ')).not.toMatch(/Later calls with this ref reject with OperationCancelledError and send nothing\./);
  // what it says, measured: before the purge the ref is refused, after it the ref sends
  await expect(post()).rejects.toBeInstanceOf(OperationCancelledError);
  expect(effects).toBe(0);
  expect(await client.purge()).toBe(1);
  expect((await post()).status).toBe(201);
  expect(effects).toBe(1);
  await client.close();
});
