/**
 * A client whose `fetch` is another oncefetch client's (`createClient({ fetch: sdk.fetch })`: an SDK
 * built on oncefetch, in front of the provider, under an app that uses oncefetch too; often another
 * copy of it, `vi.resetModules()` below loading a second one). The inner call rejects with a OnceError
 * after its request may have left: an AmbiguousOutcomeError whose lookup's connection was refused (its
 * `cause`), a StoreError "attempt 1 was sent (answered 201) … could not be recorded" of a store whose
 * connection was refused. The outer client walked the error's `cause` chain as a transport's and found
 * ECONNREFUSED: `not_sent`, "proof" that nothing left. Every attempt recorded not_sent, the call ended
 * RetriesExhaustedError "the record stays resumable", and `cancel()` answered `cancelled` ("nothing was
 * delivered and nothing will be sent") with the order made: a caller who took that at its word sent
 * the intent again under a new ref, 2 orders. A OnceError is the end of a whole operation, not a
 * transport's word on one request: a connect error in its chain proves nothing about the requests it
 * made. Effects counted at a loopback orders API that does not dedupe keys.
 */
import { expect, it, vi } from 'vitest';
import * as A from '../../src/index.js';
import type { OnceClient, OnceStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { ordersServer } from '../helpers/orders-server.js';
import { storeOver } from '../helpers/store-over.js';

// A second copy of oncefetch: every module loaded anew, classes and all.
vi.resetModules();
const B = (await import('../../src/index.js')) as typeof A;
const env = eachTest();

const refused = (): Error => new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect', errno: -111 }) });
const retry = { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 };
const copies = [
  ['another copy', B],
  ['this copy', A],
] as const;

/** The orders API: a POST makes its order, then its gateway answers `status` (a 502: the order made, the answer lost). */
async function ordersApi(status: number) {
  const orders = ordersServer({
    onPost: ({ res, ref }) => {
      orders.create(ref);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ ref }));
    },
    onGet: ({ res }) => res.writeHead(404).end(),
  });
  return { orders, url: await env.serve(orders.handler) };
}

/** The SDK's fetch: its own client's, the outer call's Idempotency-Key adopted as its key (and ref). */
function sdkFetch(client: OnceClient, lookup?: () => Promise<Response | null>): typeof fetch {
  return ((input: string, init: RequestInit) => client.fetch(input, { ...init, once: { action: 'create-order', ...(lookup === undefined ? {} : { lookup }) } })) as typeof fetch;
}

/**
 * A caller who takes a cancel's `cancelled` at its word (nothing was delivered and nothing will be sent)
 * and sends the intent again under a new ref.
 */
async function carefulCaller(app: OnceClient, url: string, ref: string): Promise<{ outcome: unknown; cancel: string }> {
  const post = (r: string) =>
    app.fetch(`${url}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref: r }), once: { action: 'create-order', ref: r } }).then((res) => res.status, (e: unknown) => e);
  const outcome = await post(ref);
  const { outcome: cancel } = await app.cancel({ action: 'create-order', ref });
  if (cancel === 'cancelled') await post(`${ref}-again`);
  return { outcome, cancel };
}

it('the second copy is one (the premise of this file)', () => {
  expect(B.AmbiguousOutcomeError).not.toBe(A.AmbiguousOutcomeError);
  expect(B.createClient).not.toBe(A.createClient);
});

it.each(copies)("the SDK's call ends AmbiguousOutcomeError, its lookup refused (ECONNREFUSED in its cause), %s: the app's call is ambiguous, never recorded not_sent nor cancelled as nothing delivered; 1 order", async (_, copy) => {
  const { orders, url } = await ordersApi(502);
  const sdk = copy.createClient({ store: copy.memoryStore(), telemetry: false, retry });
  const app = env.use(A.createClient({ store: A.memoryStore(), telemetry: false, retry, fetch: sdkFetch(sdk, () => Promise.reject(refused())) }));
  try {
    const { outcome, cancel } = await carefulCaller(app, url, 'O-1');
    const record = await app.get({ action: 'create-order', ref: 'O-1' });
    expect(record?.attempts.map((a) => a.class)).not.toContain('not_sent');
    expect(outcome).toBeInstanceOf(A.AmbiguousOutcomeError);
    expect((outcome as Error).cause).toBeInstanceOf(copy.AmbiguousOutcomeError);
    expect(cancel).not.toBe('cancelled');
    expect(orders.created).toEqual(['O-1']);
  } finally {
    await sdk.close();
  }
});

it.each(copies)("the SDK's store fails the write of its 201 (ECONNREFUSED: its database went away), %s: the app's call is ambiguous, not cancelled as nothing delivered; 1 order", async (_, copy) => {
  const { orders, url } = await ordersApi(201);
  const inner = copy.memoryStore();
  const store: OnceStore = storeOver(inner, {
    compareAndSet: async (id, g, next) => {
      if ((next.attempts.at(-1)?.finishedAt ?? null) === null) return inner.compareAndSet(id, g, next);
      throw refused();
    },
  });
  const sdk = copy.createClient({ store, telemetry: false, retry });
  const app = env.use(A.createClient({ store: A.memoryStore(), telemetry: false, retry, fetch: sdkFetch(sdk) }));
  try {
    const { outcome, cancel } = await carefulCaller(app, url, 'S-1');
    const record = await app.get({ action: 'create-order', ref: 'S-1' });
    expect(record?.attempts.map((a) => a.class)).not.toContain('not_sent');
    expect(outcome).toBeInstanceOf(A.AmbiguousOutcomeError);
    expect(cancel).not.toBe('cancelled');
    expect(orders.created).toEqual(['S-1']);
  } finally {
    await sdk.close();
  }
});

it("a plain fetch's refused connection is still not_sent (retried with the same key; nothing made)", async () => {
  const { orders, url } = await ordersApi(201);
  const app = env.use(A.createClient({ store: A.memoryStore(), telemetry: false, retry, fetch: (() => Promise.reject(refused())) as typeof fetch }));
  const { outcome, cancel } = await carefulCaller(app, url, 'P-1');
  expect(outcome).toBeInstanceOf(A.RetriesExhaustedError);
  expect(cancel).toBe('cancelled');
  expect(orders.created).toEqual([]);
});
