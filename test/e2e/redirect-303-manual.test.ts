/**
 * A POST answered 303 See Other ("done, look here") with `redirect: 'manual'`: the provider
 * processed it. By default the 303 is a `success` (the record `succeeded`: not `failed`, which told an
 * operator "no effect, fix the input and send with a new ref", a second order), whatever a
 * should-retry hint says: returned, stored and replayed, never resent. A
 * caller's `once.classify` that returns `retryable` for it is the caller's explicit choice (README,
 * "Classification": an override may return any class): it is resent, always under the one key
 * minted for the operation, and each attempt keeps the override on its record. (Against a provider
 * that ignores keys, each such resend is another effect: the override's risk, not prevented.)
 * One loopback provider that ignores keys and counts effects.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';

let server: Server;
let base: string;
/** each POST the provider received (an effect: it ignores keys), with its key */
const posts: (string | undefined)[] = [];
/** whether the provider adds x-should-retry: true to its 303 */
let hinted = false;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      posts.push(req.headers['idempotency-key'] as string | undefined);
      res.writeHead(303, { location: `/orders/o-${posts.length}`, ...(hinted ? { 'x-should-retry': 'true' } : {}) });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  posts.length = 0;
});

const SCOPE = { action: 'create-order', ref: 'R303-1' };
const client = (): OnceClient => createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, budget: false } });
const post = (c: OnceClient, once: Record<string, unknown> = {}): Promise<Response> =>
  c.fetch(`${base}/orders`, { method: 'POST', body: '{"sku":"A-17"}', redirect: 'manual', once: { ...SCOPE, ...once } });

describe("a POST answered 303 See Other, redirect: 'manual'", () => {
  it('by default: a success, the record succeeded, returned with its Location, stored, replayed by the next call without a send; 1 effect', async () => {
    const c = client();
    const res = await post(c);
    expect({ status: res.status, location: res.headers.get('location') }).toEqual({ status: 303, location: '/orders/o-1' });
    const rec = await c.get(SCOPE);
    expect(rec?.attempts.map((a) => [a.status, a.class])).toEqual([[303, 'success']]);
    expect(rec?.state).toBe('succeeded');
    expect(rec?.result).toMatchObject({ status: 303, source: 'attempt' });
    // explain does not call it a refusal with no effect (its plan was: fix the input, send with a new ref)
    const x = await c.explain(SCOPE);
    expect(x?.state).toBe('succeeded');
    expect([x?.diagnosis.summary, ...(x?.plan ?? []), ...(x?.verification ?? [])].join('\n')).not.toMatch(/refused|caller defect|no effect|fix the input/);
    const again = await post(c);
    expect({ status: again.status, location: again.headers.get('location'), replayed: again.headers.get('oncefetch-replayed') }).toEqual({ status: 303, location: '/orders/o-1', replayed: 'true' });
    expect(posts).toHaveLength(1);
    await c.close();
  });

  it('a should-retry: true hint on it does not make it resent: the provider said done', async () => {
    const c = createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, budget: false } });
    hinted = true;
    try {
      const res = await post(c, { ref: 'R303-hint' });
      expect(res.status).toBe(303);
      expect((await c.get({ ...SCOPE, ref: 'R303-hint' }))?.state).toBe('succeeded');
      expect(posts).toHaveLength(1);
    } finally {
      hinted = false;
      await c.close();
    }
  });

  it("with once.classify returning 'retryable' for it: the caller's choice is followed, every resend under the one key, each attempt recording the override", async () => {
    const c = client();
    const error = await post(c, { classify: ({ response }: { response?: Response }) => (response?.status === 303 ? 'retryable' : undefined) }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'RETRIES_EXHAUSTED' });
    const rec = await c.get(SCOPE);
    expect(rec?.attempts.map((a) => [a.status, a.class, a.reason])).toEqual(posts.map(() => [303, 'retryable', 'override: status 303']));
    expect(new Set(posts)).toEqual(new Set([rec?.key]));
    await c.close();
  });
});
