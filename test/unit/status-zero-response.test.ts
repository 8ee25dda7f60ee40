/**
 * A custom fetch that resolves with a Response no `Response` can be rebuilt from: `Response.error()`
 * (type "error", status 0: a service worker's `respondWith(Response.error())`, a polyfill's network
 * failure), a browser's opaque answer (type "opaque", status 0: mode 'no-cors'), or a polyfill's 1xx.
 *
 * Regression: each made `buildResponse` throw a RangeError ("init.status must be in the range of 200
 * to 599") while the attempt was classified, so the record said "unknown error: RangeError…", the
 * AmbiguousOutcomeError's cause was that internal RangeError, and explain reported it as the reason.
 * Response.error() is how fetch spells a network error (a page's fetch rejects with a TypeError on
 * it): the request may have reached the provider, so it is ambiguous, never not_sent, and ends as a
 * rejected fetch does (its cause a TypeError naming it). Effects are counted as calls of the fetch.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { ClassifyOverride, LookupFn, OnceClientOptions, OnceOptions } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'A-17' };
const init = (once: OnceOptions = SCOPE): RequestInit & { once: OnceOptions } => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{"sku":"A-17"}',
  once,
});

/** A Response whose status and type are overridden (Node cannot build an opaque one, nor a 1xx). */
function faked(type: ResponseType, status: number): Response {
  const res = new Response(null, { status: 200 });
  for (const [name, value] of [['status', status], ['statusText', ''], ['type', type], ['ok', false]] as const) Object.defineProperty(res, name, { value });
  return res;
}

function counted(answers: (() => Response)[]) {
  const keys: (string | null)[] = [];
  const fetch = (async (_input: RequestInfo | URL, req?: RequestInit) => {
    keys.push(new Headers(req?.headers).get('idempotency-key'));
    const next = answers.shift();
    if (next === undefined) throw new Error('unexpected send');
    return next();
  }) as typeof globalThis.fetch;
  return { fetch, keys };
}

const client = (fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) =>
  createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, ...options.retry } });

describe('a fetch that resolves with Response.error() (a network error)', () => {
  it('is ambiguous: one send, AmbiguousOutcomeError whose cause is a TypeError naming it; record and explain agree', async () => {
    const { fetch, keys } = counted([() => Response.error()]);
    const c = client(fetch);
    const error = await c.fetch(URL_ORDERS, init()).catch((e: unknown) => e);
    expect(keys).toHaveLength(1);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    const cause = (error as Error).cause as Error;
    expect(cause).toBeInstanceOf(TypeError);
    expect(cause.message).toMatch(/Response\.error\(\)/);
    expect((cause.cause as Response).type).toBe('error');
    const attempt = (await c.get(SCOPE))?.attempts[0];
    expect([attempt?.class, attempt?.status]).toEqual(['ambiguous', null]);
    expect(attempt?.reason).toMatch(/^network error: .*Response\.error\(\)/);
    const x = await c.explain(SCOPE);
    expect(x?.diagnosis.code).toBe('timeout_before_response');
    expect(x?.diagnosis.summary).toMatch(/may have reached the provider but no answer came \(network error: /);
    expect(JSON.stringify([attempt, x])).not.toMatch(/RangeError/);
  });

  it('once.classify is asked with the error, as for a rejected fetch; a lookup settles it; through wrap() too', async () => {
    const asked: unknown[] = [];
    const classify: ClassifyOverride = (input) => void asked.push(input.response ?? input.error);
    const lookup: LookupFn = async () => new Response('{"id":"o-1"}', { status: 201 });
    const { fetch, keys } = counted([() => Response.error(), () => Response.error()]);
    const c = client(fetch, { lookups: { [SCOPE.action]: lookup } });
    const res = await c.fetch(URL_ORDERS, init({ ...SCOPE, classify }));
    expect([res.status, await res.text()]).toEqual([201, '{"id":"o-1"}']);
    expect(asked).toEqual([expect.any(TypeError)]);
    const wrapped = c.wrap();
    const error = await wrapped(URL_ORDERS, { method: 'POST', body: '{}', headers: { 'idempotency-key': 'k-2' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect(((error as Error).cause as Error).message).toMatch(/Response\.error\(\)/);
    expect(keys).toHaveLength(2);
  });

  it('with providerDedupes, is resent with the same key (never as not sent under a new one)', async () => {
    const { fetch, keys } = counted([() => Response.error(), () => new Response('{"id":"o-1"}', { status: 201 })]);
    const c = client(fetch, { providerDedupes: true });
    expect((await c.fetch(URL_ORDERS, init())).status).toBe(201);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
  });
});

describe('an answer whose status no Response can carry (an opaque response, a 1xx)', () => {
  for (const [type, status, reason] of [
    ['opaque', 0, /^opaque response/],
    ['basic', 102, /^status 102/],
  ] as const) {
    it(`${type} ${status}: ambiguous after one send, no RangeError, once.classify not asked (nothing to read)`, async () => {
      const asked: unknown[] = [];
      const { fetch, keys } = counted([() => faked(type, status)]);
      const c = client(fetch);
      const error = await c.fetch(URL_ORDERS, init({ ...SCOPE, classify: (input) => void asked.push(input) })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect(String((error as Error).cause)).not.toMatch(/RangeError/);
      expect(asked).toEqual([]);
      const attempt = (await c.get(SCOPE))?.attempts[0];
      expect([attempt?.class, attempt?.status]).toEqual(['ambiguous', status]);
      expect(attempt?.reason).toMatch(reason);
      expect((await c.explain(SCOPE))?.diagnosis.code).toBe('timeout_before_response');
      expect(keys).toHaveLength(1);
    });
  }
});
