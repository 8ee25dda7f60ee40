/**
 * explain() of a finished record past its expiresAt said "Nothing to do: calls with this scope and payload
 * replay the stored result", which holds only until the next purge(): a call with the ref after it is a
 * new operation, a new key, sent again (user trial: 2 effects at a provider that does not dedupe, on the
 * memory, SQLite, PostgreSQL and IndexedDB stores). The plan must say so; a record within its retention
 * keeps the plain plan. Effects counted at a scripted fetch.
 */
import { expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';

const H = 3_600_000;

it("explain() of a succeeded record past its expiry says the next purge removes it and the ref then sends anew; within retention it does not", async () => {
  let t = Date.UTC(2026, 0, 1);
  let effects = 0;
  const fetch = (async () => {
    effects++;
    return new Response('{"id":1}', { status: 201 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, now: () => t, telemetry: false, retentionMs: 24 * H });
  const scope = { action: 'create-order', ref: 'A-17' };
  const post = () => client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: scope });
  await post();
  t += 23 * H;
  const within = await client.explain(scope);
  expect(within?.plan.join(' ')).not.toMatch(/purge/);
  t += 2 * H;
  const expired = await client.explain(scope);
  const plan = expired?.plan.join(' ') ?? '';
  expect(plan).toMatch(/expired at 2026-01-02T00:00:00\.000Z/);
  expect(plan).toMatch(/after the next purge\(\) a call with ref 'A-17' is a new operation: a new key, sent again/);
  // what it says, measured: before the purge the ref replays, after it the ref sends again
  await post();
  expect(effects).toBe(1);
  expect(await client.purge()).toBe(1);
  await post();
  expect(effects).toBe(2);
  await client.close();
});
