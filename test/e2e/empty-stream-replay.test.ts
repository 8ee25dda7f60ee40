/**
 * A 2xx event stream (or JSON lines) is passed to the caller as it arrives and its body is not
 * stored, so a replay is marked `oncefetch-body-truncated: true`. A stream the provider declared
 * empty (`Content-Length: 0`) has no bytes to lose: its replay is the whole answer, not marked.
 * Counted at a loopback provider, on the default Node transport.
 */
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const loop = eachTest();

/** Answers every POST with `body` as `type`, `Content-Length` set; counts the POSTs that ran. */
async function provider(type: string, body: string): Promise<{ url: string; effects: () => number }> {
  let effects = 0;
  const origin = await loop.serve((req, res) => {
    req.resume();
    req.on('end', () => {
      effects++;
      res.writeHead(200, { 'content-type': type, 'content-length': String(Buffer.byteLength(body)) });
      res.end(body);
    });
  });
  return { url: `${origin}/v1/stream`, effects: () => effects };
}

const call = (c: OnceClient, url: string): Promise<Response> =>
  c.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"stream":true}', once: { action: 'stream', ref: 's1' } });

describe('a 2xx stream declared empty (Content-Length: 0)', () => {
  it.each(['text/event-stream', 'application/x-ndjson'])('%s: the replay is the whole (empty) answer, not marked truncated', async (type) => {
    const p = await provider(type, '');
    const client = loop.use(createClient({ store: memoryStore() }));
    const first = await call(client, p.url);
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('');
    const again = await call(client, p.url);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(again.headers.get('oncefetch-body-truncated')).toBeNull();
    expect(again.headers.get('content-length')).toBe('0');
    expect(await again.text()).toBe('');
    expect((await client.get({ action: 'stream', ref: 's1' }))?.result?.bodyTruncated).toBe(false);
    expect(p.effects()).toBe(1);
  });

  it('a stream with bytes (Content-Length: 9) is still marked truncated on replay: its bytes were not stored', async () => {
    const p = await provider('text/event-stream', 'data: 1\n\n');
    const client = loop.use(createClient({ store: memoryStore() }));
    const first = await call(client, p.url);
    expect(await first.text()).toBe('data: 1\n\n');
    const again = await call(client, p.url);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(again.headers.get('oncefetch-body-truncated')).toBe('true');
    expect(again.headers.get('content-length')).toBeNull();
    expect(p.effects()).toBe(1);
  });
});

describe('a 2xx stream with no Content-Length (chunked) that turns out empty', () => {
  it.each(['text/event-stream', 'application/x-ndjson'])('%s: its record is written before it is read, so the replay (empty) is marked truncated, as the README says: in doubt, never resent', async (type) => {
    let effects = 0;
    const origin = await loop.serve((req, res) => {
      req.resume();
      req.on('end', () => {
        effects++;
        res.writeHead(200, { 'content-type': type });
        res.end();
      });
    });
    const client = loop.use(createClient({ store: memoryStore() }));
    const first = await call(client, `${origin}/v1/stream`);
    expect({ status: first.status, truncated: first.headers.get('oncefetch-body-truncated') }).toEqual({ status: 200, truncated: null });
    expect(await first.text()).toBe('');
    const again = await call(client, `${origin}/v1/stream`);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(again.headers.get('oncefetch-body-truncated')).toBe('true');
    expect(await again.text()).toBe('');
    expect((await client.get({ action: 'stream', ref: 's1' }))?.result?.bodyTruncated).toBe(true);
    expect(effects).toBe(1);
  });
});
