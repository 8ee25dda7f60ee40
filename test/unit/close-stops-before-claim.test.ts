/**
 * `client.close({ waitMs })` stops the calls still running when `waitMs` runs out (README "Shutting
 * down": "any other call rejects (a StoreError) and sends nothing more"). Two calls it did not stop:
 * one waiting for another owner's live lease (`waitForOwner` listened only to its deadline: it waited
 * out that lease, up to `inFlightWaitMs`, then claimed again after the close), and one admitted just
 * before a `close({ waitMs: 0 })` whose claim was begun after the engine's close (a record written,
 * then undone: 3 writes to a closing store). Effects counted at a scripted fetch, writes at the store.
 */
import { expect, it, vi } from 'vitest';
import { StoreError, createClient, memoryStore } from '../../src/index.js';
import { Engine } from '../../src/engine/execute.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch, wait } from '../helpers/setup.js';

const URL_ = 'https://api.example.test/orders';
const order = { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } };

/** A memory store that logs its writes, and the engine's close among them. */
function logged(closes = true) {
  const inner = memoryStore();
  const log: string[] = [];
  const store = storeOver(inner, {
    claim: (r) => (log.push('claim'), inner.claim(r)),
    compareAndSet: (id, g, next) => (log.push(`cas ${next.state} lease=${next.lease?.owner ?? 'none'}`), inner.compareAndSet(id, g, next)),
    close: () => (closes ? inner.close() : Promise.resolve()),
  });
  return { store, inner, log };
}

it('a call waiting for another live owner (2 s of lease left), the store staying open (another client uses it): close({ waitMs: 50 }) ends it at the close with its StoreError, 0 sends, no claim after the close', async () => {
  const { store, inner, log } = logged();
  // a record left pending by a 503, its lease then another live owner's for 2 s
  const other = countingFetch(503);
  const keeper = createClient({ store, fetch: other.fetch, telemetry: false, owner: 'keeper', retry: { maxAttempts: 1, budget: false } });
  await keeper.fetch(URL_, order).catch(() => undefined);
  const rec = (await inner.list({ limit: 1 }))[0]!;
  expect((await inner.compareAndSet(rec.id, rec.generation, { ...rec, generation: rec.generation + 1, lease: { owner: 'live', expiresAt: Date.now() + 2_000 } })).ok).toBe(true);
  log.length = 0;

  const { sends, fetch } = countingFetch(201);
  const client = createClient({ store, fetch, telemetry: false, owner: 'b', retry: { budget: false } });
  const started = Date.now();
  const call = client.fetch(URL_, order).then(
    (r) => r.status,
    (e: unknown) => e,
  );
  await wait(50);
  await client.close({ waitMs: 50 });
  const outcome = await call;
  const ended = Date.now() - started;
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 50 \}\) stopped this work/);
  // (before: 2003 ms, at the other owner's lease end, then a second claim)
  expect(ended).toBeLessThan(600);
  await wait(2_100);
  expect(log).toEqual(['claim']);
  expect(sends.n).toBe(0);
  expect(other.sends.n).toBe(1);
  await keeper.close();
}, 10_000);

it('fetch() then close({ waitMs: 0 }) at once: the call rejects with the close\'s StoreError, 0 sends, and nothing is written after the engine\'s close', async () => {
  const { store, inner, log } = logged(false);
  const orig = Engine.prototype.close;
  const spy = vi.spyOn(Engine.prototype, 'close').mockImplementation(function (this: Engine, reason) {
    log.push('engine closed');
    orig.call(this, reason);
  });
  try {
    const { sends, fetch } = countingFetch(201);
    const client = createClient({ store, fetch, telemetry: false, retry: { budget: false } });
    const call = client.fetch(URL_, order).then(
      (r) => r.status,
      (e: unknown) => e,
    );
    await client.close({ waitMs: 0 });
    const outcome = await call;
    await wait(200);
    expect(outcome).toBeInstanceOf(StoreError);
    expect((outcome as Error).message).toMatch(/client\.close\(\{ waitMs: 0 \}\) stopped this work/);
    expect(sends.n).toBe(0);
    // (before: ['engine closed', 'claim', 'cas pending lease=b', 'cas pending lease=none'], a pending record left)
    expect(log).toEqual(['engine closed']);
    expect(await inner.list({ limit: 1 })).toEqual([]);
  } finally {
    spy.mockRestore();
  }
});
