/**
 * A custom fetch's Response body is tied to no signal: when the engine gives an attempt up while it
 * still reads that body whole (the attempt timeout, the deadline, the caller's abort), the body's
 * source must be cancelled, with the abort's reason, or its producer goes on (its connection open)
 * for nobody. Among such bodies, an endless event stream that declared `Content-Length: 0` (read
 * whole, not passed through, so that a lying header loses no bytes: see truncated-mark.test.ts).
 * Memory store, injected fetch, real short timers.
 */
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';
import { tick, trickle as trickleOf, until } from '../helpers/trickle.js';

const trickle = () => trickleOf('data: tick\n\n');
const URL_ORDERS = 'https://api.example.test/orders';
const SCOPE = { action: 'create-order', ref: 'B-1' };
const post = { method: 'POST', body: '{"sku":"book"}', headers: { 'content-type': 'application/json' } };

const client = (fetch: typeof globalThis.fetch, options: OnceClientOptions = {}) =>
  createClient({ store: memoryStore(), fetch, random: () => 0, ...options, retry: { budget: false, maxAttempts: 1, ...options.retry } });

const answers = {
  'a JSON 2xx': { 'content-type': 'application/json' },
  'an event stream declaring Content-Length: 0': { 'content-type': 'text/event-stream', 'content-length': '0' },
  'a 500 (read for its classification)': { 'content-type': 'text/plain' },
};

describe("a custom fetch's body still being read whole when the engine gives the attempt up", () => {
  it.each(Object.entries(answers))('%s, at the attempt timeout: its source is cancelled with the timeout, the call ends ambiguous', async (name, headers) => {
    const { body, seen } = trickle();
    let sent = 0;
    const fetch = (async () => {
      sent++;
      return new Response(body, { status: name.startsWith('a 500') ? 500 : 200, headers });
    }) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 60 } });
    const error = await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    const status = name.startsWith('a 500') ? 500 : 200;
    // the error says why: the status came, the body did not end in time
    expect(String((error as Error).cause)).toMatch(new RegExp(`^Error: status ${status} came, but its body had not ended \\(\\d+ bytes read\\) when the attempt was given up: attempt timed out after 60 ms$`));
    await until(() => seen.cancelled);
    expect(seen.cancelled).toBe(true);
    expect(seen.reason).toMatchObject({ name: 'TimeoutError' });
    await tick(30);
    expect(seen.pullsAfterCancel).toBe(0);
    expect(sent).toBe(1);
    const rec = await c.get(SCOPE);
    expect(rec?.state).toBe('ambiguous');
    expect(rec?.attempts.map((a) => [a.class, a.status, a.reason?.replace(/\d+ bytes/, 'N bytes')])).toEqual([
      ['ambiguous', status, `reading body: status ${status} came, but its body had not ended (N bytes read) when the attempt was given up: attempt timed out after 60 ms`],
    ]);
  });

  it("at the caller's abort: its source is cancelled with the caller's reason, the call rejects with it", async () => {
    const { body, seen } = trickle();
    const fetch = (async () => new Response(body, { status: 200, headers: answers['a JSON 2xx'] })) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 10_000 } });
    const caller = new AbortController();
    const reason = new Error('caller gave up');
    setTimeout(() => caller.abort(reason), 60);
    const error = await c.fetch(URL_ORDERS, { ...post, signal: caller.signal, once: SCOPE }).catch((e: unknown) => e);
    expect(error).toBe(reason);
    await until(() => seen.cancelled);
    expect({ cancelled: seen.cancelled, reason: seen.reason }).toEqual({ cancelled: true, reason });
  });

  it('a source whose cancel throws: the call still ends ambiguous, nothing unhandled', async () => {
    let cancels = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await tick(5);
        controller.enqueue(new Uint8Array([1]));
      },
      cancel() {
        cancels++;
        throw new Error('cancel failed');
      },
    });
    const fetch = (async () => new Response(body, { status: 200 })) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 60 } });
    await expect(c.fetch(URL_ORDERS, { ...post, once: SCOPE })).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    await until(() => cancels > 0);
    expect(cancels).toBe(1);
  });

  it("a body whose chunks are Uint8Arrays of another realm (Node's fetch seen from a Jest test's vm context) is read whole, as arrayBuffer() reads it", async () => {
    // Under Jest, the SDK's `Uint8Array` is the test context's, while the global fetch's body chunks
    // are Node's own: `instanceof Uint8Array` is false for them (and for a Buffer), though they are
    // Uint8Arrays. arrayBuffer() took them; refusing them made every answer ambiguous.
    const chunk = (text: string): Uint8Array => runInNewContext(`new Uint8Array([${[...new TextEncoder().encode(text)].join(',')}])`) as Uint8Array;
    expect(chunk('x') instanceof Uint8Array).toBe(false);
    const fetch = (async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(chunk('{"id":'));
            controller.enqueue(chunk('"o-1"}'));
            controller.close();
          },
        }),
        { status: 201, headers: answers['a JSON 2xx'] },
      )) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 1_000 } });
    const res = await c.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect({ status: res.status, text: await res.text() }).toEqual({ status: 201, text: '{"id":"o-1"}' });
    expect((await c.get(SCOPE))?.state).toBe('succeeded');
  });

  it('a body with a chunk that is no Uint8Array (a string, a DataView) is refused, as arrayBuffer() refuses it: ambiguous', async () => {
    for (const odd of ['{"id":"o-1"}', new DataView(new ArrayBuffer(2))] as const) {
      const fetch = (async () =>
        new Response(new ReadableStream<unknown>({ start: (controller) => (controller.enqueue(odd), controller.close()) }) as ReadableStream<Uint8Array>, { status: 201 })) as typeof globalThis.fetch;
      const c = client(fetch, { retry: { attemptTimeoutMs: 1_000 } });
      const error = await c.fetch(URL_ORDERS, { ...post, once: SCOPE }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect(String((error as Error).cause)).toBe('TypeError: a response body chunk is not a Uint8Array');
    }
  });

  it('a body that ends in time is read whole, as before (no cancel)', async () => {
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"id":'));
        controller.enqueue(new TextEncoder().encode('"o-1"}'));
        controller.close();
      },
      cancel() {
        cancelled = true;
      },
    });
    const fetch = (async () => new Response(body, { status: 201, headers: answers['a JSON 2xx'] })) as typeof globalThis.fetch;
    const c = client(fetch, { retry: { attemptTimeoutMs: 1_000 } });
    const res = await c.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect({ status: res.status, text: await res.text(), cancelled }).toEqual({ status: 201, text: '{"id":"o-1"}', cancelled: false });
    const again = await c.fetch(URL_ORDERS, { ...post, once: SCOPE });
    expect(await again.text()).toBe('{"id":"o-1"}');
  });
});

// The default Node transport's small answers are whole in memory already (BufferedResponse): read with
// arrayBuffer(), not through `body`, which would build a stream for nothing (20 us a body against 0.6 us).
describe('a body already whole in memory (WHOLE_BODY)', () => {
  it("is read without touching its `body`; the default Node transport's small answers carry the mark", async () => {
    const { WHOLE_BODY } = await import('../../src/operation/body.js');
    const { requestFetch } = await import('../../src/node-defaults.js');
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(201, { 'content-type': 'application/json', 'content-length': '11' }).end('{"id":"o1"}'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/orders`;
      const small = await requestFetch()(url, { method: 'POST', body: '{}' });
      expect(WHOLE_BODY in small).toBe(true);
      await small.arrayBuffer();

      // a whole body whose stream would throw if built: the call reads it all the same
      let touched = 0;
      const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
        const res = await requestFetch()(input, init);
        Object.defineProperty(res, 'body', {
          get: () => {
            touched++;
            throw new Error('body touched');
          },
        });
        return res;
      }) as typeof globalThis.fetch;
      const res = await client(fetch).fetch(url, { ...post, once: SCOPE });
      expect(res.status).toBe(201);
      expect(await res.json()).toEqual({ id: 'o1' });
      expect(touched).toBe(0);
    } finally {
      server.close();
    }
  });
});
