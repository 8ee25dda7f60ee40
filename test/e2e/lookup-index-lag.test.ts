/**
 * A lookup backed by an eventually consistent index (a search or list endpoint, Stripe's search):
 * an order shows there only `lagMs` after the provider created it. The provider ignores keys (every
 * POST that commits is an effect, counted here, not HTTP successes). Its first POST of a ref creates
 * the order and then loses the answer: a 500, a dropped connection, or no answer until the attempt's
 * timeout.
 *
 * What the README says about `settleMs` ("it must cover the time until a sent request shows in the
 * lookup, indexing lag included"; an "absent" is trusted only when asked `settleMs` after the attempt
 * ended), pinned: with the lag under `settleMs`, one order whatever the loss; with a commit that
 * answers at once (500, dropped connection) the lag alone must stay under `settleMs` (above it: two
 * orders, the documented limit); an attempt that ends at its timeout counts the window from there,
 * which leaves the lag that much more room. `client.recover()` asks once and does not wait: an
 * "absent" before the window is `stillAmbiguous`, and the same lookup after it finds the order.
 */
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClientOptions } from '../../src/index.js';
import { created, laggingOrdersApi } from '../helpers/lagging-orders.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();

type Loss = '500' | 'drop' | 'timeout';

const SETTLE_MS = 400;
const ATTEMPT_TIMEOUT_MS = 300;

/** The orders API: POST /orders (the first one of a ref creates the order and loses the answer by `loss`), GET /orders?ref= (sees orders `lagMs` old). */
function laggingApi(loss: Loss, lagMs: number) {
  return laggingOrdersApi({
    lagMs,
    answer: (post) => {
      if (!post.first) return created(post);
      if (loss === '500') return void post.res.writeHead(500).end('{"error":"internal"}');
      if (loss === 'drop') return void post.req.socket.destroy();
      // 'timeout': no answer; the client's attempt times out
    },
  });
}

function lookupAt(base: string): LookupFn {
  return async ({ scope, signal }) => {
    const res = await fetch(`${base}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
    if (res.status === 404) return null;
    if (!res.ok) throw new Error(`lookup answered ${res.status}`);
    return res;
  };
}

function options(extra: OnceClientOptions = {}): OnceClientOptions {
  return { store: memoryStore(), settleMs: SETTLE_MS, retry: { attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, baseDelayMs: 5, maxDelayMs: 10, deadlineMs: 10_000, budget: false }, ...extra };
}

const post = (ref: string): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ref }) });

describe('a lookup whose index lags the provider’s writes (no dedupe by key)', () => {
  it.each([
    // [loss, lagMs, orders]
    ['500', 0, 1],
    ['500', SETTLE_MS - 100, 1],
    ['drop', SETTLE_MS - 100, 1],
    ['timeout', SETTLE_MS - 100, 1],
    // the window counts from the attempt's end: here its timeout, ATTEMPT_TIMEOUT_MS after the commit
    ['timeout', SETTLE_MS + 100, 1],
    // the documented limit: settleMs under the lag, and the commit answered at once
    ['500', SETTLE_MS + 200, 2],
    ['drop', SETTLE_MS + 200, 2],
  ] as const)('lost answer %s, index lag %i ms, settleMs 400: %i order(s)', async (loss, lagMs, expected) => {
    const api = laggingApi(loss, lagMs);
    const base = await serve(api.handler);
    const client = use(createClient(options({ lookups: { 'create-order': lookupAt(base) } })));
    const ref = `lag-${loss}-${lagMs}`;
    const res = await client.fetch(`${base}/orders`, { ...post(ref), once: { action: 'create-order', ref } });
    expect(api.effects(ref)).toBe(expected);
    if (expected === 1) {
      // found by the lookup asked settleMs after the attempt ended, not resent
      expect(res.status).toBe(200);
      expect(api.seen.posts).toBe(1);
      expect((await client.get({ action: 'create-order', ref }))?.result?.source).toBe('lookup');
    } else {
      // an "absent" the index gave settleMs after the attempt: trusted, and the same key resent
      expect(res.status).toBe(201);
      expect(api.seen.posts).toBe(2);
    }
    // asked as the attempt ended, and (unless the index had it then) once more when the window had passed
    expect(api.seen.lookups).toBe(lagMs > 0 && loss !== 'timeout' ? 2 : api.seen.lookups);
    expect([1, 2]).toContain(api.seen.lookups);
  });

  it('recover(): an "absent" asked inside the window is stillAmbiguous; asked after it, the same index finds the order', async () => {
    const lagMs = SETTLE_MS - 100;
    const api = laggingApi('500', lagMs);
    const base = await serve(api.handler);
    const ref = 'lag-recover';
    const scope = { action: 'create-order', ref };
    const store = memoryStore();
    // the call itself has a lookup that fails (unknown): it ends AmbiguousOutcomeError, the record ambiguous
    const caller = use(createClient(options({ store })));
    const failing: LookupFn = async () => {
      throw new Error('search unavailable');
    };
    await expect(caller.fetch(`${base}/orders`, { ...post(ref), once: { ...scope, lookup: failing } })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    const ended = (await caller.get(scope))!;
    expect(ended.state).toBe('ambiguous');
    const endedAt = ended.attempts.at(-1)!.finishedAt!;

    const recovering = createClient(options({ store, lookups: { 'create-order': lookupAt(base) } }));
    try {
      // asked at once: the index has not caught up ("absent"), and the window has not passed
      expect(Date.now()).toBeLessThan(endedAt + lagMs);
      const early = await recovering.recover();
      expect(early).toMatchObject({ resolved: [], absent: [], stillAmbiguous: [scope] });
      expect((await recovering.get(scope))?.state).toBe('ambiguous');
      // after settleMs: the index has the order
      const wait = endedAt + SETTLE_MS + 20 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const late = await recovering.recover();
      expect(late).toMatchObject({ resolved: [scope], absent: [], stillAmbiguous: [] });
      const replay = await caller.fetch(`${base}/orders`, { ...post(ref), once: scope });
      expect(replay.headers.get('oncefetch-replayed')).toBe('true');
    } finally {
      await recovering.close();
    }
    expect(api.effects(ref)).toBe(1);
    expect(api.seen.posts).toBe(1);
  });
});
