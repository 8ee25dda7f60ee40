/**
 * A StoreError thrown because the write of an attempt's outcome failed after the request was sent
 * (the provider answered, the store could not record it) must say so: the README's StoreError row
 * reads "nothing was sent, unless the failed write came after the send", and the caller cannot tell
 * which from a bare "failed while updating record …". Seen in the PostgreSQL network-fault trial.
 * Effects counted at a scripted fetch; the store's compareAndSet fails every write that finishes an
 * attempt (settle's 1 s of tries included), and nothing else.
 */
import { expect, it } from 'vitest';
import { LateOutcomeNotKeptError, StoreError, createClient, memoryStore } from '../../src/index.js';
import type { OperationRecord } from '../../src/index.js';
import { storeOver } from '../helpers/store-over.js';
import { countingFetch } from '../helpers/setup.js';

const finishes = (next: OperationRecord): boolean => {
  const last = next.attempts.at(-1);
  return last !== undefined && last.finishedAt !== null && last.class !== 'not_sent';
};

function setup(status: number, fail: (next: OperationRecord) => boolean = finishes, error = (): Error => new StoreError('pg: failed while updating record x: timeout exceeded when trying to connect', { cause: new Error('timeout exceeded when trying to connect') })) {
  const inner = memoryStore();
  const store = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if (fail(next)) throw error();
      return inner.compareAndSet(id, g, next);
    },
  });
  const { sends, fetch } = countingFetch(status);
  const client = createClient({ store, fetch, telemetry: false, retry: { maxAttempts: 1, deadlineMs: 10_000, budget: false } });
  const call = (): Promise<unknown> =>
    client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17' } }).then(
      (r) => r.status,
      (e: unknown) => e,
    );
  return { client, inner, sends, call };
}

it('a 201 whose write fails (after settle retried it): the StoreError says attempt 1 was sent, answered 201, unrecorded, and to call again with the same ref; its cause kept', async () => {
  const { client, inner, sends, call } = setup(201);
  const outcome = await call();
  expect(sends.n).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  const error = outcome as StoreError;
  expect(error.code).toBe('STORE_ERROR');
  expect(error.message).toMatch(/timeout exceeded when trying to connect; attempt 1 was sent \(answered 201\) and its outcome could not be recorded: call again with the same ref, never a new one/);
  // (its cause the store's own, as before)
  expect((error.cause as Error).message).toBe('timeout exceeded when trying to connect');
  // the record stays in_flight for the next call to reconcile
  const [rec] = await inner.list({ limit: 1 });
  expect(rec?.state).toBe('in_flight');
  await client.close();
});

it('a 500 whose write fails: the StoreError says attempt 1 was sent (answered 500) and its outcome is unknown', async () => {
  const { client, sends, call } = setup(500);
  const outcome = await call();
  expect(sends.n).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/; attempt 1 was sent \(answered 500\) and its outcome is unknown \(it may have taken effect\) and could not be recorded: call again with the same ref, never a new one/);
  await client.close();
});

it('a subclass keeps its class: a LateOutcomeNotKeptError on the write of an ambiguous outcome stays one, and says the attempt was sent', async () => {
  const { client, sends, call } = setup(500, finishes, () => new LateOutcomeNotKeptError('mem: record x: a late ambiguous outcome of owner o could not be kept on the record (now pending)'));
  const outcome = await call();
  expect(sends.n).toBe(1);
  expect(outcome).toBeInstanceOf(LateOutcomeNotKeptError);
  expect((outcome as Error).message).toMatch(/could not be kept on the record \(now pending\); attempt 1 was sent \(answered 500\) and its outcome is unknown/);
  await client.close();
});

it('a StoreError before the send (the claim) still says nothing of a send', async () => {
  const inner = memoryStore();
  const store = storeOver(inner, {
    claim: () => Promise.reject(new StoreError('mem: failed while claiming record x: down')),
  });
  let sends = 0;
  const client = createClient({ store, fetch: (async () => (sends++, new Response('{}', { status: 201 }))) as typeof globalThis.fetch, telemetry: false });
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'B-1' } }).catch((e: unknown) => e);
  expect(sends).toBe(0);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toBe('mem: failed while claiming record x: down');
  await client.close();
});

it("a lookup's \"found\" whose write fails: the StoreError says the lookup found the effect and it could not be recorded", async () => {
  const { client, inner, sends } = setup(500, (next) => next.state === 'succeeded');
  let lookups = 0;
  const lookup = async (): Promise<Response> => (lookups++, new Response('{"id":"o-1"}', { status: 200, headers: { 'content-type': 'application/json' } }));
  const outcome = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'create-order', ref: 'A-17', lookup } }).catch((e: unknown) => e);
  expect(sends.n).toBe(1);
  expect(lookups).toBe(1);
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as Error).message).toMatch(/timeout exceeded when trying to connect; its lookup found the effect \(it took effect\) and that could not be recorded: call again with the same ref, never a new one$/);
  const [rec] = await inner.list({ limit: 1 });
  expect(rec?.state).toBe('ambiguous');
  await client.close();
});
