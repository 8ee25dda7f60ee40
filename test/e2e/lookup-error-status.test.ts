/**
 * A lookup that resolves to its lookup endpoint's own error Response (a 500, a 401 with a wrong
 * token, a 404 of a wrong path) after the POST's answer was lost. Found in a user trial: the README's
 * `return r.status === 404 ? null : r` handed a 500 over as "found", the record settled `succeeded`
 * with that 500, replayed to every later call, while the provider held 0 orders; the caller, shown
 * a 500, placed the order again under a new ref.
 *
 * The rule: a lookup's Response is "found" only with a status from 200 to 399; a 4xx or 5xx is
 * "unknown" (the lookup failed): resent with the same key only when the provider dedupes, else
 * `AmbiguousOutcomeError` and the record stays `ambiguous`. A later call, once the lookup works,
 * settles it. Effects counted at the loopback provider: 0 or 1, never 2.
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
let broken: { status: number; contentType: string; body: string } | undefined;

const BROKEN = {
  500: { status: 500, contentType: 'application/json', body: '{"error":"internal"}' },
  401: { status: 401, contentType: 'application/json', body: '{"error":"invalid token"}' },
  404: { status: 404, contentType: 'text/html', body: '<pre>Cannot GET /v2/orders</pre>' },
} as const;

/** The lookup endpoint: a loopback server in front of the provider's `GET /orders?ref=`. */
async function lookupEndpoint(provider: Provider): Promise<string> {
  return loopback.serve((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (broken !== undefined) {
        res.writeHead(broken.status, { 'content-type': broken.contentType });
        return void res.end(broken.body);
      }
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const upstream = await fetch(`${provider.url}/orders?ref=${encodeURIComponent(url.searchParams.get('ref') ?? '')}`);
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
      res.end(await upstream.text());
    })();
  });
}

/**
 * The README's lookup (`404` → absent, any other Response returned); for the 404 case one that reads
 * the provider's `order-not-found` problem as absent and returns any other Response, a wrong path's
 * 404 among them.
 */
function lookupVia(endpoint: string, status: keyof typeof BROKEN): LookupFn {
  return async ({ scope, signal }) => {
    const r = await fetch(`${endpoint}/orders?ref=${encodeURIComponent(scope.ref)}`, { signal });
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

describe.each([500, 401, 404] as const)('the lookup resolves to the lookup endpoint\'s %i Response', (status) => {
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
        expect(message).toContain('status 200–399');
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
        for (const c of clients.splice(0)) await c.close();
        await provider.close();
      }
    });
  });
});
