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
    const error = await call().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    // (found needs a 2xx since a 3xx, 4xx or 5xx answer counts as the lookup failing; was 200 to 399)
    expect((error as Error).message).toMatch(/a found effect needs a status from 200 to 299/);
    expect((await client.get(SCOPE))?.state).toBe('ambiguous');
    await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(sends()).toBe(1);
    await client.close();
  });

  it("a browser's opaque redirect (redirect: 'manual': type opaqueredirect, status 0) is unknown, and the message says it is a redirect the lookup did not follow", async () => {
    const { client, call, sends } = setup({ type: 'opaqueredirect', status: 0, statusText: '', headers: new Headers(), body: null, arrayBuffer: bytes });
    const error = await call().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).message).toMatch(/lookup resolved to a Response with status 0 \(an opaque redirect: a redirect the lookup did not follow\)/);
    expect((await client.get(SCOPE))?.state).toBe('ambiguous');
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

describe('a lookup answer with a 4xx or 5xx status', () => {
  it.each([400, 401, 403, 404, 409, 500, 502, 503, 599])('%i is unknown, not found: AmbiguousOutcomeError naming the status, the record ambiguous, its body cancelled', async (status) => {
    let cancelled = 0;
    // one chunk queued, the end on the next pull: read to its end, or cancelled before
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => controller.enqueue(new TextEncoder().encode('{"error":"lookup endpoint down"}')),
      pull: (controller) => controller.close(),
      cancel: () => void cancelled++,
    });
    const { client, call, sends } = setup(() => new Response(body, { status }));
    const error = await call().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    // (was 'status 200–399': a 3xx is no longer found, deliberately)
    expect((error as Error).message).toContain(`lookup failed: lookup resolved to a ${status} Response; return null for absent, a Response only for a found effect (status 200–299), throw for unknown`);
    expect(cancelled).toBe(1);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('ambiguous');
    expect(record?.result).toBeNull();
    expect(sends()).toBe(1);
    await client.close();
  });

  // (was [200, 204, 302, 399]: a 3xx was found, and settled the record succeeded on a redirect to a login page)
  it.each([200, 204, 299])('%i is still found', async (status) => {
    const { client, call, sends } = setup(() => new Response(status === 204 ? null : '{"id":"o-1"}', { status }));
    expect((await call()).status).toBe(status);
    expect((await client.get(SCOPE))?.state).toBe('succeeded');
    expect(sends()).toBe(1);
    await client.close();
  });

  it.each([300, 301, 302, 303, 307, 308, 399])("%i (a redirect the lookup did not follow, redirect: 'manual') is unknown, not found: the message says why, the record ambiguous, its body cancelled", async (status) => {
    let cancelled = 0;
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => controller.enqueue(new TextEncoder().encode('<a href="/login">Found</a>')),
      pull: (controller) => controller.close(),
      cancel: () => void cancelled++,
    });
    const { client, call, sends } = setup(() => new Response(body, { status, headers: { location: '/login' } }));
    const error = await call().then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as Error).message).toContain(`lookup failed: lookup resolved to a ${status} Response: a redirect the lookup did not follow`);
    expect((error as Error).message).toContain('a Response only for a found effect (status 200–299)');
    expect(cancelled).toBe(1);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('ambiguous');
    expect(record?.result).toBeNull();
    expect(sends()).toBe(1);
    await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect(sends()).toBe(1);
    await client.close();
  });

  it('304 (no body) is unknown, not found', async () => {
    const { client, call, sends } = setup(() => new Response(null, { status: 304 }));
    const error = await call().catch((e: unknown) => e);
    expect(String((error as Error).cause)).toMatch(/lookup resolved to a 304 Response; /);
    // a 304 is no redirect: not told to follow one
    expect(String((error as Error).cause)).not.toMatch(/redirect/);
    expect((await client.get(SCOPE))?.state).toBe('ambiguous');
    expect(sends()).toBe(1);
    await client.close();
  });

  it('a shape whose body cancel throws is still unknown, nothing thrown past the call', async () => {
    const shape = { status: 500, statusText: '', headers: new Headers(), arrayBuffer: bytes, body: { cancel: () => { throw new Error('cancel refused'); } } };
    const { client, call } = setup(shape);
    await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
    expect((await client.get(SCOPE))?.state).toBe('ambiguous');
    await client.close();
  });
});

describe('a 4xx or 5xx lookup answer whose body cannot be freed (its cancel, or its read, rejects)', () => {
  // a polyfill's body whose cancel() returns a rejected promise; a shape with no cancel() whose arrayBuffer() rejects
  // (its socket gone): the rejection is the freeing's, nobody awaits it. Left unhandled it ends a Node process.
  it.each([
    ['cancel() rejects', { cancel: () => Promise.reject(new Error('cancel refused')) }, bytes],
    ['no cancel(), arrayBuffer() rejects', {}, () => Promise.reject(new Error('socket hang up'))],
  ])('%s: still unknown, and no unhandled rejection', async (_name, body, arrayBuffer) => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const { client, call, sends } = setup({ status: 503, statusText: '', headers: new Headers(), arrayBuffer, body });
      await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
      expect((await client.get(SCOPE))?.state).toBe('ambiguous');
      expect(sends()).toBe(1);
      await client.close();
      await new Promise((r) => setTimeout(r, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe("a 4xx lookup answer of another fetch whose body is a Node stream (node-fetch's shape)", () => {
  it("its body is freed: the connection goes back to the agent (maxSockets 1: the next request gets it)", async () => {
    const http = await import('node:http');
    const server = http.createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<p>not found</p>'.repeat(16_384)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<import('node:http').IncomingMessage>((resolve, reject) => http.get({ host: '127.0.0.1', port, path: '/lookup', agent }, resolve).on('error', reject));
    // as node-fetch builds it: status, headers, arrayBuffer() reading `body`, `body` a Node stream: v3 pipes the
    // message into a PassThrough with stream.pipeline (destroying one destroys the other), v2 with .pipe() (it does not)
    const { PassThrough, pipeline } = await import('node:stream');
    const nodeFetchLike = (v: 2 | 3) => async () => {
      const msg = await get();
      const body = v === 2 ? msg.pipe(new PassThrough()) : pipeline(msg, new PassThrough(), () => undefined);
      const chunks: Buffer[] = [];
      return {
        status: msg.statusCode,
        statusText: msg.statusMessage,
        headers: new Headers(Object.entries(msg.headers).map(([k, v]) => [k, String(v)])),
        body,
        arrayBuffer: async () => {
          for await (const c of body) chunks.push(c as Buffer);
          return new Uint8Array(Buffer.concat(chunks)).buffer;
        },
      };
    };
    try {
      for (const v of [2, 3] as const) {
        const { client, call, sends } = setup(nodeFetchLike(v));
        await expect(call()).rejects.toBeInstanceOf(AmbiguousOutcomeError);
        // the agent's only socket: free again only once that 404's body was read or destroyed
        const next = await Promise.race([get().then((m) => (m.resume(), m.statusCode)), new Promise((r) => setTimeout(() => r('no socket after 1 s'), 1_000))]);
        expect([v, next]).toEqual([v, 404]);
        expect(sends()).toBe(1);
        await client.close();
      }
    } finally {
      agent.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
