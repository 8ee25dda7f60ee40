/**
 * A 2xx stream of JSON lines (Ollama's `/api/chat`, `application/x-ndjson`) is handed to the caller
 * as it arrives, as a `text/event-stream` is: the first line reaches the reader while the provider
 * still holds the stream, and a connection dropped mid-stream reaches the reader as an error, never
 * a resend. Counted at a loopback provider.
 */
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { eachTest } from '../helpers/loopback.js';

const loop = eachTest();

/** Writes one line with `type`, then holds the response until the test ends or drops it. */
async function provider(type: string): Promise<{ url: string; effects: () => number; end: () => void; drop: () => void }> {
  let effects = 0;
  let held: ServerResponse | undefined;
  const origin = await loop.serve((req, res) => {
    req.resume();
    req.on('end', () => {
      effects++;
      res.writeHead(200, { 'content-type': type });
      res.write('{"message":{"content":"Hel"},"done":false}\n');
      held = res;
    });
  });
  return {
    url: `${origin}/api/chat`,
    effects: () => effects,
    end: () => held?.end('{"message":{"content":"lo"},"done":true}\n'),
    drop: () => held?.socket?.destroy(),
  };
}

const call = (c: OnceClient, url: string, ref: string): Promise<Response> =>
  c.fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","stream":true}', once: { action: 'chat', ref } });

/** The response, or 'held' when it has not come within `ms`. */
const within = (p: Promise<Response>, ms: number): Promise<Response | 'held'> =>
  Promise.race([p, new Promise<'held'>((resolve) => setTimeout(() => resolve('held'), ms))]);

describe('a 2xx stream of JSON lines', () => {
  it.each(['application/x-ndjson', 'application/ndjson; charset=utf-8', 'application/jsonl', 'application/x-jsonlines', 'Application/Stream+JSON'])(
    '%s: the first line reaches the reader while the provider holds the stream',
    async (type) => {
      const p = await provider(type);
      const client = loop.use(createClient({ store: memoryStore() }));
      const res = await within(call(client, p.url, 'r1'), 2_000);
      expect(res).not.toBe('held');
      const reader = (res as Response).body!.getReader();
      const first = await reader.read();
      expect(new TextDecoder().decode(first.value)).toBe('{"message":{"content":"Hel"},"done":false}\n');
      p.end();
      let rest = '';
      for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
      expect(rest).toBe('{"message":{"content":"lo"},"done":true}\n');
      expect(p.effects()).toBe(1);
      expect((await client.get({ action: 'chat', ref: 'r1' }))?.state).toBe('succeeded');
    },
  );

  it('dropped mid-stream: the reader gets the error, nothing is resent, a replay is marked truncated', async () => {
    const p = await provider('application/x-ndjson');
    const client = loop.use(createClient({ store: memoryStore() }));
    const res = (await within(call(client, p.url, 'r2'), 2_000)) as Response;
    expect(res).not.toBe('held');
    const reader = res.body!.getReader();
    await reader.read();
    p.drop();
    await expect(reader.read()).rejects.toBeDefined();
    const again = await call(client, p.url, 'r2');
    expect(again.status).toBe(200);
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(again.headers.get('oncefetch-body-truncated')).toBe('true');
    expect(p.effects()).toBe(1);
  });

  it('a plain application/json 2xx is still read whole (stored and replayed with its body)', async () => {
    const p = await provider('application/json');
    const client = loop.use(createClient({ store: memoryStore() }));
    const pending = call(client, p.url, 'r3');
    expect(await within(pending, 300)).toBe('held');
    p.end();
    const whole = '{"message":{"content":"Hel"},"done":false}\n{"message":{"content":"lo"},"done":true}\n';
    expect(await (await pending).text()).toBe(whole);
    const again = await call(client, p.url, 'r3');
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(await again.text()).toBe(whole);
    expect(p.effects()).toBe(1);
  });
});
