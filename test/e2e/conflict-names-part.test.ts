/**
 * A call that reuses a ref with another request is refused before any send (IdempotencyConflictError).
 * Its message said "the same scope was used before with a different payload" whatever differed, so a
 * caller that changed only the URL (an order id in the path, a v1 → v2 move) or the method (PUT for
 * POST) looked for a body difference that was not there. The fingerprint covers method, URL and body;
 * the record keeps the method and the URL's origin and path (not the query string nor the body): the
 * message names the part that differs as far as the record can tell, and "the body, Content-Type or query string"
 * where it cannot tell which.
 *
 * Counted at a loopback provider: each refusal sends nothing (the request count does not move).
 */
import { describe, expect, it } from 'vitest';
import { IdempotencyConflictError } from '../../src/index.js';
import { eachSqliteClient, orderInit } from '../helpers/setup.js';

const env = eachSqliteClient();
const ACTION = 'create-order';

async function conflictOf(p: Promise<unknown>): Promise<IdempotencyConflictError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(IdempotencyConflictError);
  return error as IdempotencyConflictError;
}

/** A POST of order `ref` (the same body each time) to `path`, once-only under `ref`. */
function call(ref: string, path = '/orders', init: RequestInit = {}): Promise<Response> {
  return env.client.fetch(`${env.provider.url}${path}`, { ...orderInit(ref), ...init, once: { action: ACTION, ref } });
}

describe('reusing a ref with another request: the conflict names what differs, nothing sent', () => {
  it.each<[string, string, RequestInit, RegExp]>([
    ['a different URL path', '/orders/v2', {}, /^the same scope was used before with a different URL \(operation default\/create-order\/[^)]+\); nothing was sent\./],
    ['a different method', '/orders', { method: 'PUT' }, /^the same scope was used before with a different method \(operation /],
    ['a different method and URL', '/orders/v2', { method: 'PUT' }, /^the same scope was used before with a different method and URL \(operation /],
    ['a different body', '/orders', { body: JSON.stringify({ ref: 'x', sku: 'B-2', qty: 3 }) }, /^the same scope was used before with a different body or Content-Type \(operation /],
    ['a different query string', '/orders?coupon=1', {}, /^the same scope was used before with a different body, Content-Type or query string \(operation /],
    // the same body bytes under another Content-Type (a retry path that dropped the header: fetch sends a
    // string body as text/plain): the fingerprint counts the media type, the record does not keep it
    ['the same body, another Content-Type', '/orders', { headers: { 'content-type': 'text/plain' } }, /^the same scope was used before with a different body or Content-Type \(operation /],
    ['the same body, no Content-Type header', '/orders', { headers: {} }, /^the same scope was used before with a different body or Content-Type \(operation /],
  ])('%s', async (label, path, init, message) => {
    const ref = `CN-${label.replaceAll(' ', '-')}`;
    expect((await call(ref)).status).toBe(201);
    const before = env.provider.requests.length;
    const e = await conflictOf(call(ref, path, init.body === undefined ? init : { ...init, body: JSON.stringify({ ...(JSON.parse(init.body as string) as object), ref }) }));
    expect(e.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(e.message).toMatch(message);
    // it still says what the earlier request did and what to do
    expect(e.message).toMatch(/took effect \(succeeded\)/);
    expect(env.provider.requests.length).toBe(before);
    expect(env.provider.effectsFor(ref)).toBe(1);
  });

  it('against a concurrent call still running with another URL: the same naming, nothing sent by it', async () => {
    const ref = 'CN-concurrent';
    env.provider.fault({ kind: 'delay_after_commit', delayMs: 200, match: { ref } });
    const first = call(ref);
    // wait until the first call's POST reached the provider: the second one joins a running call
    while (env.provider.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    const e = await conflictOf(call(ref, '/orders/v2'));
    expect(e.message).toMatch(/^a concurrent call has the same scope and a different URL \(operation /);
    expect(e.message).toMatch(/may take effect/);
    expect((await first).status).toBe(201);
    expect(env.provider.requests.length).toBe(1);
    expect(env.provider.effectsFor(ref)).toBe(1);
  });
});
