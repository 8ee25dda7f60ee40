/**
 * Regression (review): since lookups accept a Response of another fetch implementation by its
 * shape, nothing checked what that shape holds. A lookup answering status 0 (undici's
 * `Response.error()`) or 999 settled the record `succeeded` with a status no `Response` can carry:
 * the call and every later call with that ref threw a RangeError, for good. One without a
 * `statusText` failed the record write with a message about compareAndSet. A lookup's answer is
 * read as found only with a status fetch can return (200–599); a missing statusText is ''.
 */
import { Response as UndiciResponse } from 'undici';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn } from '../../src/index.js';

const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { tenant: 'default', action: 'create-order', ref: 'A-17' };

function setup(answer: unknown) {
  let sends = 0;
  const fetch = (async () => {
    sends++;
    return new Response('{"error":"oops"}', { status: 500 });
  }) as typeof globalThis.fetch;
  const client = createClient({ store: memoryStore(), fetch, random: () => 0, retry: { budget: false } });
  const lookup = (async () => (typeof answer === 'function' ? (answer as () => unknown)() : answer)) as LookupFn;
  const call = () => client.fetch(URL_ORDERS, { method: 'POST', body: '{"sku":"A-17"}', once: { action: SCOPE.action, ref: SCOPE.ref, lookup } });
  return { client, call, sends: () => sends };
}

const bytes = async () => new TextEncoder().encode('{"id":"o-1"}').buffer;

describe('a lookup answer read as a Response', () => {
  it.each([
    ['undici Response.error() (status 0)', () => UndiciResponse.error()],
    ['a shape with status 0', { status: 0, statusText: '', headers: new Headers(), arrayBuffer: bytes }],
    ['a shape with status 999', { status: 999, statusText: '', headers: new Headers(), arrayBuffer: bytes }],
    ['a shape with status 200.5', { status: 200.5, statusText: '', headers: new Headers(), arrayBuffer: bytes }],
  ])('%s is not "found": the record stays ambiguous and a later call is not bricked', async (_name, answer) => {
    const { client, call, sends } = setup(answer);
    await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect((await client.get(SCOPE))?.state).toBe('ambiguous');
    await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(sends()).toBe(1);
    await client.close();
  });

  it('a shape without statusText is found, with statusText ""', async () => {
    const { client, call, sends } = setup({ status: 200, headers: new Headers({ 'content-type': 'application/json' }), arrayBuffer: bytes });
    const res = await call();
    expect([res.status, res.statusText]).toEqual([200, '']);
    expect(await res.json()).toEqual({ id: 'o-1' });
    const replay = await call();
    expect(await replay.json()).toEqual({ id: 'o-1' });
    expect((await client.get(SCOPE))?.result?.source).toBe('lookup');
    expect(sends()).toBe(1);
    await client.close();
  });
});
