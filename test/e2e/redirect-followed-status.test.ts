/**
 * Regression (webhook-sender user trial): a POST answered with 303 See Other ("done, look here")
 * had taken effect, but under `redirect: 'follow'` (the default) the status that reached the
 * classifier was the one of the GET that followed it. A 503 there was `retryable`: the POST was
 * resent under the same key and a receiver that does not dedupe acted once per attempt (3 effects
 * with `maxAttempts: 3`, on the default transport and on Node's fetch). A 404 there ended the
 * record `failed`, which reads as "no effect" while the POST had acted. After a redirect that
 * turned the request into a GET, the final status says nothing of the request's effect: unknown.
 * A 307/308 keeps the method and body, so the target's answer is the request's answer: the default
 * transport, which follows redirects itself, still retries a 503 there.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const { serve, use } = eachTest();

/** POST /hook/<status>: acted, then 303 to GET /status/<status>, which answers that status. POST /moved: 308 to POST /target. */
function receiver(effects: string[]): (req: IncomingMessage, res: ServerResponse) => void {
  let targetHits = 0;
  return (req, res) => {
    req.resume();
    req.on('end', () => {
      const path = req.url ?? '/';
      if (req.method === 'POST' && path.startsWith('/hook/')) {
        effects.push(path);
        res.writeHead(303, { location: `/status/${path.slice('/hook/'.length)}` }).end();
      } else if (req.method === 'GET' && path.startsWith('/status/')) {
        res.writeHead(Number(path.slice('/status/'.length)), { 'retry-after': '0' }).end('{}');
      } else if (req.method === 'POST' && path === '/moved') {
        res.writeHead(308, { location: '/target' }).end();
      } else if (req.method === 'POST' && path === '/target') {
        // not processed the first time (503), processed the second
        if (++targetHits === 1) return void res.writeHead(503, { 'retry-after': '0' }).end();
        effects.push(path);
        res.writeHead(200).end('{}');
      } else {
        res.writeHead(404).end();
      }
    });
  };
}

const transports = [
  ['the default transport', undefined],
  ["Node's fetch", globalThis.fetch],
] as const;

describe.each(transports)('a POST redirected to a GET, through %s', (_name, transport) => {
  it.each([503, 429, 404, 401, 500])('a %i after a 303 is an unknown outcome: not resent, not failed', async (status) => {
    const effects: string[] = [];
    const origin = await serve(receiver(effects));
    const client = use(createClient({ store: memoryStore(), ...(transport === undefined ? {} : { fetch: transport }), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, deadlineMs: 5_000 } }));
    const call = client.fetch(`${origin}/hook/${status}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"type":"order.created"}',
      once: { action: 'webhook', ref: `evt_1/${status}` },
    });
    await expect(call).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(effects).toEqual([`/hook/${status}`]);
    const record = await client.get({ action: 'webhook', ref: `evt_1/${status}` });
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts).toHaveLength(1);
    expect(record?.attempts[0]?.reason).toContain(`status ${status}`);
  });
});

describe('a POST redirected by a 308, which keeps the method and body', () => {
  it('a 503 at the target is retried on the default transport, one effect', async () => {
    const effects: string[] = [];
    const origin = await serve(receiver(effects));
    const client = use(createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, deadlineMs: 5_000 } }));
    const res = await client.fetch(`${origin}/moved`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', once: { action: 'webhook', ref: 'evt_2' } });
    expect(res.status).toBe(200);
    expect(res.redirected).toBe(true);
    expect(effects).toEqual(['/target']);
    expect((await client.get({ action: 'webhook', ref: 'evt_2' }))?.attempts.map((a) => a.class)).toEqual(['retryable', 'success']);
  });
});

describe('a POST redirected by a 308 on the default transport, asking for a compressed answer', () => {
  // (an accept-encoding header takes the default transport through undici's fetch, which follows the redirect itself)
  it('a 503 at the target is still retried, one effect', async () => {
    const effects: string[] = [];
    const origin = await serve(receiver(effects));
    const client = use(createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, deadlineMs: 5_000 } }));
    const res = await client.fetch(`${origin}/moved`, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' }, body: '{}', once: { action: 'webhook', ref: 'evt_3' } });
    expect(res.status).toBe(200);
    expect(res.redirected).toBe(true);
    expect(effects).toEqual(['/target']);
    expect((await client.get({ action: 'webhook', ref: 'evt_3' }))?.attempts.map((a) => a.class)).toEqual(['retryable', 'success']);
  });

  it('a 503 after a 303 stays an unknown outcome: not resent', async () => {
    const effects: string[] = [];
    const origin = await serve(receiver(effects));
    const client = use(createClient({ store: memoryStore(), retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2, deadlineMs: 5_000 } }));
    const call = client.fetch(`${origin}/hook/503`, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' }, body: '{}', once: { action: 'webhook', ref: 'evt_4' } });
    await expect(call).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(effects).toEqual(['/hook/503']);
  });
});
