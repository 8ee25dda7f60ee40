/**
 * A call whose retry cannot be made (a `Retry-After` past the deadline or over `maxRetryAfterMs`, the
 * budget spent) after an attempt that did not act (503) while an earlier attempt's outcome is still
 * unknown (here: cleared for a same-key resend by `providerDedupes` only) asks the registered lookup
 * before it stops, as a call whose retry the budget cannot fund does (budget-lookup.test.ts): a found
 * is returned, a settled absent leaves the record resumable. Before, it stopped unasked and only the
 * next call asked. So does a stop right after an attempt of unknown outcome itself (a 500 with a long
 * `Retry-After`, a dropped connection whose backoff passes the deadline), which a lookup failing
 * leaves an AmbiguousOutcomeError. Effects are counted at the provider (a loopback server); lookups at its GET.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, DeadlineExceededError, memoryStore, RetriesExhaustedError } from '../../src/index.js';
import type { LookupFn, OnceClientOptions } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';
import { ordersServer } from '../helpers/orders-server.js';

const { serve, use } = eachTest();

type Answer = 'create-and-drop' | 'drop' | 'create-500-retry-after' | '500-retry-after' | '503' | '503-retry-after' | '201';

/**
 * POST /orders answers from `posts` in turn: `create-and-drop` creates the order and drops the
 * connection (an unknown outcome), `create-500-retry-after` creates it and answers 500 with
 * `Retry-After: 3600` (`500-retry-after`: the same, nothing created), `503-retry-after` answers 503 with `Retry-After: 10` (nothing created).
 * GET /orders?ref= (the lookup) answers 500 for its first `lookupFails` calls, then 200 or 404.
 */
function ordersApi(posts: Answer[], lookupFails = 0) {
  const api = ordersServer({
    onGet: ({ res, ref }) => {
      if (api.seen.lookups <= lookupFails) return void res.writeHead(500).end();
      if (!api.has(ref)) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'o-1', ref }));
    },
    onPost: ({ req, res, ref }) => {
      const answer = posts.shift();
      if (answer === 'create-and-drop') {
        api.create(ref);
        return void req.socket.destroy();
      }
      if (answer === 'drop') return void req.socket.destroy();
      if (answer === 'create-500-retry-after') {
        api.create(ref);
        return void res.writeHead(500, { 'retry-after': '3600' }).end('{"error":"internal"}');
      }
      if (answer === '500-retry-after') return void res.writeHead(500, { 'retry-after': '3600' }).end('{"error":"internal"}');
      if (answer === '503') return void res.writeHead(503).end();
      if (answer === '503-retry-after') return void res.writeHead(503, { 'retry-after': '10' }).end();
      api.create(ref);
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'o-1', ref }));
    },
  });
  return { handler: api.handler, created: api.created, seen: api.seen };
}

function lookupAt(origin: string): LookupFn {
  return async ({ scope, signal }) => {
    const r = await fetch(`${origin}/orders?ref=${scope.ref}`, { signal });
    if (r.status === 404) return null;
    if (!r.ok) throw new Error(`lookup ${r.status}`);
    return r;
  };
}

async function setUp(posts: Answer[], options: OnceClientOptions = {}, lookupFails = 0) {
  const api = ordersApi(posts, lookupFails);
  const origin = await serve(api.handler);
  const client = use(
    createClient({
      store: memoryStore(),
      settleMs: 0,
      lookups: { order: lookupAt(origin) },
      ...options,
      retry: { deadlineMs: 5_000, baseDelayMs: 1, maxDelayMs: 1, budget: false, ...options.retry },
    }),
  );
  const call = () =>
    client.fetch(`${origin}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ref":"A-1"}', once: { action: 'order', ref: 'A-1' } });
  return { ...api, client, call };
}

describe('a retry that cannot be made after an unknown outcome asks the lookup first', () => {
  it('a dropped connection, a resend the provider dedupes, then a 503 whose Retry-After passes the deadline: the lookup finds the order', async () => {
    // the first lookup (before the resend) fails: unknown, so the provider's dedupe clears the resend
    const { client, call, created, seen } = await setUp(['create-and-drop', '503-retry-after'], { providerDedupes: true }, 1);
    const res = await call();
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: 'o-1', ref: 'A-1' });
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
  });

  it('the same with a Retry-After over maxRetryAfterMs', async () => {
    const { client, call, created, seen } = await setUp(['create-and-drop', '503-retry-after'], { providerDedupes: true, retry: { maxRetryAfterMs: 5_000 } }, 1);
    const res = await call();
    expect(res.status).toBe(200);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
  });

  it('a settled absent leaves the record resumable: DeadlineExceededError, not ambiguous, nothing resent', async () => {
    const { client, call, created, seen } = await setUp(['drop', '503-retry-after'], { providerDedupes: true }, 1);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(error).not.toBeInstanceOf(AmbiguousOutcomeError);
    expect(created).toEqual([]);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    const record = await client.get({ action: 'order', ref: 'A-1' });
    expect(record?.state).toBe('pending');
    expect(record?.evidence.filter((e) => e.kind === 'lookup').map((e) => e.detail)).toEqual([
      // (the first lookup failed: with providerDedupes the same-key resend went ahead)
      expect.stringMatching(/^resend with the same key: lookup failed: lookup 500/),
      expect.stringMatching(/^absent: /),
    ]);
  });

  it('a lookup that fails again: the stop stands (DeadlineExceededError), the record cleared only for a same-key resend, as this client trusts the dedupe', async () => {
    const { client, call, created, seen } = await setUp(['create-and-drop', '503-retry-after'], { providerDedupes: true }, 2);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('pending');
    const explained = await client.explain({ action: 'order', ref: 'A-1' });
    expect(explained?.diagnosis.summary).toMatch(/nothing settled it \(it was only cleared for a same-key resend\)/);
  });

  // (before, the last attempt's own unknown outcome stopped unasked: AmbiguousOutcomeError, lookups 0, record
  // ambiguous, and only the next call looked it up; one rule now, whichever attempt's outcome is unknown)
  it('the last attempt of unknown outcome itself (a 500 with a Retry-After over maxRetryAfterMs, the order created): the lookup finds it', async () => {
    const { client, call, created, seen } = await setUp(['create-500-retry-after']);
    const res = await call();
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: 'o-1', ref: 'A-1' });
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 1, lookups: 1 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
    const explained = await client.explain({ action: 'order', ref: 'A-1' });
    expect(explained?.diagnosis).toMatchObject({ code: 'succeeded', summary: expect.stringMatching(/^A lookup found the effect \(status 200\) after attempt 1 got 500/) });
  });

  it('the same, nothing created: a settled absent leaves the record resumable (RetriesExhaustedError, not ambiguous), nothing resent', async () => {
    const { client, call, created, seen } = await setUp(['500-retry-after']);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(error).not.toBeInstanceOf(AmbiguousOutcomeError);
    expect(error).toMatchObject({ retryAfterMs: 3_600_000 });
    expect(created).toEqual([]);
    expect(seen).toEqual({ posts: 1, lookups: 1 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('pending');
    const explained = await client.explain({ action: 'order', ref: 'A-1' });
    expect(explained?.diagnosis.summary).toMatch(/a lookup then found no effect, so it may be resent with the same key\.$/);
    expect(explained?.plan[0]).toMatch(/^A lookup found no effect: call again with the same ref and payload; the same key .* is resent\.$/);
  });

  it('the same, the order created, the lookup failing, under providerDedupes: the lookup is asked once; its failure clears only a same-key resend, so the stop stands (RetriesExhaustedError), as when the attempts run out', async () => {
    const { client, call, created, seen } = await setUp(['create-500-retry-after'], { providerDedupes: true }, 1);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 1, lookups: 1 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('pending');
    const explained = await client.explain({ action: 'order', ref: 'A-1' });
    expect(explained?.diagnosis.summary).toMatch(/it was cleared for a same-key resend \(the provider dedupes by key\), so it may be resent with the same key\.$/);
  });

  it('the same, the order created, the lookup failing: AmbiguousOutcomeError, its cause the lookup\'s error; record ambiguous, nothing resent', async () => {
    const { client, call, created, seen } = await setUp(['create-500-retry-after'], {}, 1);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).cause).toMatchObject({ message: 'lookup 500' });
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 1, lookups: 1 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('ambiguous');
    const explained = await client.explain({ action: 'order', ref: 'A-1' });
    expect(explained?.diagnosis.evidence).toContainEqual(expect.stringMatching(/: unknown: lookup failed: lookup 500$/));
    expect(explained?.plan[0]).toMatch(/^Look up first: run client.recover\(\)/);
  });

  it('the same with no lookup registered (providerDedupes, so the stop is reached): AmbiguousOutcomeError, the stop its cause, as before; record ambiguous, nothing resent', async () => {
    const { client, call, created, seen } = await setUp(['create-500-retry-after'], { providerDedupes: true, lookups: {} });
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).cause).toBeInstanceOf(RetriesExhaustedError);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 1, lookups: 0 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('ambiguous');
  });

  it('the last attempt of unknown outcome (a dropped connection) and a backoff past the deadline: the lookup finds the order', async () => {
    const { client, call, created, seen } = await setUp(['create-and-drop'], { random: () => 0.99, retry: { baseDelayMs: 10_000, maxDelayMs: 10_000 } });
    const started = Date.now();
    const res = await call();
    expect(res.status).toBe(200);
    // (no backoff slept: the 9.9 s wait would pass the 5 s deadline)
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 1, lookups: 1 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
  });

  it('the budget spent after a dedupe-cleared resend got a 503: the lookup finds the order (no retry for it to fund)', async () => {
    const { client, call, created, seen } = await setUp(['create-and-drop', '503'], { providerDedupes: true, retry: { budget: { ratio: 0, reserve: 1 } } }, 1);
    const res = await call();
    expect(res.status).toBe(200);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
  });

  it('the attempts used up after a dedupe-cleared resend got a 503: the lookup finds the order', async () => {
    const { client, call, created, seen } = await setUp(['create-and-drop', '503'], { providerDedupes: true, retry: { maxAttempts: 2 } }, 1);
    const res = await call();
    expect(res.status).toBe(200);
    expect(created).toEqual(['A-1']);
    expect(seen).toEqual({ posts: 2, lookups: 2 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('succeeded');
  });

  it('earlier attempts known not to have acted (503, then 503 with Retry-After past the deadline): no lookup, DeadlineExceededError', async () => {
    const { client, call, created, seen } = await setUp(['503', '503-retry-after']);
    const error: unknown = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(error).not.toBeInstanceOf(AmbiguousOutcomeError);
    expect(created).toEqual([]);
    expect(seen).toEqual({ posts: 2, lookups: 0 });
    expect((await client.get({ action: 'order', ref: 'A-1' }))?.state).toBe('pending');
  });
});
