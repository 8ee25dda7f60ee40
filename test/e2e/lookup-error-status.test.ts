/**
 * A lookup that resolves to its lookup endpoint's own error Response (a 500, a 401 with a wrong
 * token, a 404 of a wrong path) after the POST's answer was lost. Found in a user trial: the README's
 * `return r.status === 404 ? null : r` handed a 500 over as "found", the record settled `succeeded`
 * with that 500, replayed to every later call, while the provider held 0 orders; the caller, shown
 * a 500, placed the order again under a new ref.
 *
 * The rule: a lookup's Response is "found" only with a 2xx status (a 204: "exists, no body"); a 3xx,
 * 4xx or 5xx is "unknown" (the lookup failed): resent with the same key only when the provider
 * dedupes, else `AmbiguousOutcomeError` and the record stays `ambiguous`. A later call, once the
 * lookup works, settles it. Effects counted at the loopback provider: 0 or 1, never 2.
 *
 * The 3xx (review): a lookup made with `redirect: 'manual'` whose endpoint answered 302 to a login
 * page (the session expired) was "found" while 200–399 counted as found: the record settled
 * `succeeded` with that 302, replayed to every later call, with 0 orders at the provider. A redirect
 * the lookup did not follow says nothing of the order; it now counts as the lookup failing, as a
 * 4xx/5xx does, in a call's lookup and in `client.recover()`'s.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { LookupFn, OnceClient, OnceClientOptions } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import { eachTest } from '../helpers/loopback.js';
import { orderInit } from '../helpers/setup.js';

const ACTION = 'create-order';
const loopback = eachTest();

/** What the lookup endpoint answers while broken; `undefined`: it works (relays the provider's GET /orders). */
let broken: { status: number; contentType: string; body: string; location?: string } | undefined;
/** While it works: answer a found order 204 (no body) instead of relaying the provider's 200. */
let foundAs204 = false;

/** A redirect to the login page, as an expired session gets it. */
const toLogin = (status: number) => ({ status, contentType: 'text/html', body: '<a href="/login">Found</a>', location: '/login?next=%2Forders' });

const BROKEN = {
  500: { status: 500, contentType: 'application/json', body: '{"error":"internal"}' },
  401: { status: 401, contentType: 'application/json', body: '{"error":"invalid token"}' },
  404: { status: 404, contentType: 'text/html', body: '<pre>Cannot GET /v2/orders</pre>' },
  301: toLogin(301),
  302: toLogin(302),
  303: toLogin(303),
  307: toLogin(307),
  308: toLogin(308),
} as const;

/** The lookup endpoint: a loopback server in front of the provider's `GET /orders?ref=`. */
async function lookupEndpoint(provider: Provider): Promise<string> {
  return loopback.serve((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (broken !== undefined) {
        res.writeHead(broken.status, { 'content-type': broken.contentType, ...(broken.location === undefined ? {} : { location: broken.location }) });
        return void res.end(broken.body);
      }
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const upstream = await fetch(`${provider.url}/orders?ref=${encodeURIComponent(url.searchParams.get('ref') ?? '')}`);
      if (foundAs204 && upstream.status === 200) {
        await upstream.arrayBuffer();
        return void res.writeHead(204).end();
      }
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
      res.end(await upstream.text());
    })();
  });
}

/**
 * The README's lookup (`404` → absent, any other Response returned); for the 404 case one that reads
 * the provider's `order-not-found` problem as absent and returns any other Response, a wrong path's
 * 404 among them; for a 3xx one made with `redirect: 'manual'` (the redirect handed back unfollowed).
 */
function lookupVia(endpoint: string, status: keyof typeof BROKEN | 200): LookupFn {
  return async ({ scope, signal }) => {
    const r = await fetch(`${endpoint}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal, ...(status >= 300 && status < 400 ? { redirect: 'manual' as const } : {}) });
    if (status !== 404) return r.status === 404 ? null : r;
    if (r.status === 404 && r.headers.get('content-type')?.includes('problem+json') === true) {
      const body = (await r.json()) as { type?: string };
      if (body.type?.endsWith('order-not-found') === true) return null;
    }
    return r;
  };
}

const clients: OnceClient[] = [];
function client(options: OnceClientOptions): OnceClient {
  const made = createClient({ store: memoryStore(), settleMs: 0, telemetry: false, ...options, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5, budget: false } });
  clients.push(made);
  return loopback.use(made);
}

const caught = (call: Promise<unknown>): Promise<unknown> => call.then((r) => r, (error: unknown) => error);

describe.each([500, 401, 404, 301, 302, 303, 307, 308] as const)('the lookup resolves to the lookup endpoint\'s %i Response', (status) => {
  describe.each(['reset_before_commit', 'drop_after_commit'] as const)('the POST\'s answer lost: %s', (fault) => {
    const committed = fault === 'drop_after_commit' ? 1 : 0;

    it('at a provider that ignores keys: AmbiguousOutcomeError, the record ambiguous, nothing resent; once the lookup works a later call settles it', async () => {
      const provider = await startProvider({ ignoreKeys: true });
      try {
        const ref = `LS-${status}-${fault}`;
        const endpoint = await lookupEndpoint(provider);
        const c = client({});
        const lookup = lookupVia(endpoint, status);
        const order = () => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, lookup } });
        broken = BROKEN[status];
        provider.fault({ kind: fault, match: { ref } });

        const first = await caught(order());
        expect(first).toBeInstanceOf(AmbiguousOutcomeError);
        const message = (first as Error).message;
        expect(message).toContain(`lookup failed: lookup resolved to a ${status} Response`);
        // (was 'status 200–399': a 3xx no longer counts as found, deliberately)
        expect(message).toContain('status 200–299');
        if (status < 400) expect(message).toContain('a redirect the lookup did not follow');
        const record = await c.get({ action: ACTION, ref });
        expect(record?.state).toBe('ambiguous');
        expect(record?.result).toBeNull();
        expect(provider.effectsFor(ref)).toBe(committed);
        expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
        // still broken: still unknown, still nothing sent
        expect(await caught(order())).toBeInstanceOf(AmbiguousOutcomeError);
        expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
        const x = await c.explain({ action: ACTION, ref });
        expect(JSON.stringify(x)).not.toMatch(/found the effect/);

        // the lookup works again: found (after commit) or absent, then sent once (before commit)
        broken = undefined;
        const settled = await order();
        expect(settled.status).toBe(committed === 1 ? 200 : 201);
        expect(provider.effectsFor(ref)).toBe(1);
        expect((await c.get({ action: ACTION, ref }))?.state).toBe('succeeded');
        const replay = await order();
        expect(replay.status).toBe(settled.status);
        expect(provider.effectsFor(ref)).toBe(1);
      } finally {
        broken = undefined;
        foundAs204 = false;
        for (const c of clients.splice(0)) await c.close();
        await provider.close();
      }
    });

    it('with providerDedupes at a provider that dedupes: resent with the same key, one effect, the order\'s own answer', async () => {
      const provider = await startProvider();
      try {
        const ref = `LSD-${status}-${fault}`;
        const endpoint = await lookupEndpoint(provider);
        const c = client({ providerDedupes: true });
        const lookup = lookupVia(endpoint, status);
        broken = BROKEN[status];
        provider.fault({ kind: fault, match: { ref } });

        const res = await c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, lookup } });
        expect(res.status).toBe(201);
        expect(provider.effectsFor(ref)).toBe(1);
        const sent = provider.requests.filter((r) => r.ref === ref);
        expect(sent).toHaveLength(2);
        expect(new Set(sent.map((r) => r.key)).size).toBe(1);
        const record = await c.get({ action: ACTION, ref });
        expect(record?.state).toBe('succeeded');
        expect(record?.result?.source).not.toBe('lookup');
      } finally {
        broken = undefined;
        foundAs204 = false;
        for (const c of clients.splice(0)) await c.close();
        await provider.close();
      }
    });
  });
});

describe.each([301, 302, 303, 307, 308] as const)("client.recover()'s registered lookup answers %i (redirect: 'manual')", (status) => {
  it.each(['reset_before_commit', 'drop_after_commit'] as const)("the POST's answer lost (%s): still ambiguous, nothing sent; once the lookup works recover() settles it", async (fault) => {
    const provider = await startProvider({ ignoreKeys: true });
    try {
      const committed = fault === 'drop_after_commit' ? 1 : 0;
      const ref = `LR-${status}-${fault}`;
      const endpoint = await lookupEndpoint(provider);
      const store = memoryStore();
      // the call itself has no lookup: it leaves the record ambiguous for recover()
      const caller = client({ store });
      provider.fault({ kind: fault, match: { ref } });
      expect(await caught(caller.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref } }))).toBeInstanceOf(AmbiguousOutcomeError);

      const recovering = client({ store, lookups: { [ACTION]: lookupVia(endpoint, status) } });
      broken = BROKEN[status];
      const report = await recovering.recover();
      expect(report.resolved).toEqual([]);
      expect(report.stillAmbiguous).toEqual([{ tenant: 'default', action: ACTION, ref }]);
      const record = await recovering.get({ action: ACTION, ref });
      expect(record?.state).toBe('ambiguous');
      expect(record?.result).toBeNull();
      expect(provider.effectsFor(ref)).toBe(committed);

      broken = undefined;
      const again = await recovering.recover();
      expect(again[committed === 1 ? 'resolved' : 'absent']).toEqual([{ tenant: 'default', action: ACTION, ref }]);
      expect((await recovering.get({ action: ACTION, ref }))?.state).toBe(committed === 1 ? 'succeeded' : 'pending');
      expect(provider.effectsFor(ref)).toBe(committed);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(1);
    } finally {
      broken = undefined;
      for (const c of clients.splice(0)) await c.close();
      await provider.close();
    }
  });
});

describe.each([200, 204] as const)('control: the lookup endpoint answers a found order %i', (status) => {
  it.each(['reset_before_commit', 'drop_after_commit'] as const)("the POST's answer lost (%s): found after a commit (one order, not resent), absent before it (sent once)", async (fault) => {
    const provider = await startProvider({ ignoreKeys: true });
    try {
      const committed = fault === 'drop_after_commit' ? 1 : 0;
      const ref = `LC-${status}-${fault}`;
      const endpoint = await lookupEndpoint(provider);
      foundAs204 = status === 204;
      const c = client({});
      const order = () => c.fetch(`${provider.url}/orders`, { ...orderInit(ref), once: { action: ACTION, ref, lookup: lookupVia(endpoint, 200) } });
      provider.fault({ kind: fault, match: { ref } });
      const res = await order();
      expect(res.status).toBe(committed === 1 ? status : 201);
      expect(provider.effectsFor(ref)).toBe(1);
      expect(provider.requests.filter((r) => r.ref === ref)).toHaveLength(2 - committed);
      const record = await c.get({ action: ACTION, ref });
      expect(record?.state).toBe('succeeded');
      expect(record?.result?.source).toBe(committed === 1 ? 'lookup' : 'attempt');
      expect((await order()).status).toBe(res.status);
      expect(provider.effectsFor(ref)).toBe(1);
    } finally {
      foundAs204 = false;
      for (const c of clients.splice(0)) await c.close();
      await provider.close();
    }
  });
});
