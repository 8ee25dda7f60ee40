/**
 * The default Node transport (`requestFetch`, over `undici.request`) behaves
 * like fetch where oncefetch and its users rely on it: status, headers and
 * body; redirects; aborts; and network errors whose codes classify the same.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyError } from '../../src/classify/classify.js';
import { createClient, memoryStore } from '../../src/index.js';
import { requestFetch } from '../../src/node-defaults.js';

let server: Server;
let base: string;
const seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }> = [];

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
  const url = new URL(req.url ?? '/', base);
  switch (url.pathname) {
    case '/echo':
      res.writeHead(201, 'Made', { 'content-type': 'application/json', 'x-multi': ['a', 'b'], 'set-cookie': ['s=1', 't=2'] });
      res.end(JSON.stringify({ method: req.method, body, key: req.headers['idempotency-key'] ?? null }));
      return;
    case '/sized': {
      // framed by Content-Length and small: the default transport keeps it whole in memory
      const json = JSON.stringify({ method: req.method, body });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(json)) });
      res.end(json);
      return;
    }
    case '/gzip': {
      // compressed only when asked, as servers do
      const wants = /gzip/.test(String(req.headers['accept-encoding'] ?? ''));
      const json = JSON.stringify({ ok: true, method: req.method });
      res.writeHead(201, { 'content-type': 'application/json', ...(wants ? { 'content-encoding': 'gzip' } : {}) });
      res.end(wants ? gzipSync(json) : json);
      return;
    }
    case '/empty':
      res.writeHead(204);
      res.end();
      return;
    case '/chunked':
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('part1-');
      setTimeout(() => res.end('part2'), 5);
      return;
    case '/large':
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(200_000) });
      res.end(Buffer.alloc(200_000, 7));
      return;
    case '/truncated':
    case '/truncated-chunked':
    case '/truncated-large': {
      // framed and small (read whole by the transport), chunked, framed and large (both streamed)
      const length = { '/truncated': '100', '/truncated-chunked': undefined, '/truncated-large': String(200_000) }[url.pathname];
      res.writeHead(200, { 'content-type': 'application/json', ...(length === undefined ? {} : { 'content-length': length }) });
      res.write('{"partial":');
      setTimeout(() => res.socket?.destroy(), 5);
      return;
    }
    case '/slow':
      setTimeout(() => {
        if (!res.destroyed) res.end('late');
      }, 2_000);
      return;
    case '/redirect-302':
      res.writeHead(302, { location: '/echo?from=302' });
      res.end();
      return;
    case '/redirect-307':
      res.writeHead(307, { location: `${base}/echo?from=307` });
      res.end();
      return;
    case '/loop':
      res.writeHead(302, { location: '/loop' });
      res.end();
      return;
    default:
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('nope');
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString()));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((done) => server.close(done));
});

const fetch = requestFetch();

describe('requestFetch (the default Node transport)', () => {
  it('sends method, headers and body; returns status, statusText, headers (repeated ones too) and body', async () => {
    const res = await fetch(`${base}/echo`, {
      method: 'post',
      headers: new Headers({ 'content-type': 'application/json', 'Idempotency-Key': 'k-1' }),
      body: '{"a":1}',
    });
    expect(res).toBeInstanceOf(Response);
    expect(res.status).toBe(201);
    expect(res.statusText).toBe('Made');
    expect(res.ok).toBe(true);
    expect(res.url).toBe(`${base}/echo`);
    expect(res.redirected).toBe(false);
    expect(res.headers.get('x-multi')).toBe('a, b');
    expect(res.headers.getSetCookie()).toEqual(['s=1', 't=2']);
    expect(await res.json()).toEqual({ method: 'POST', body: '{"a":1}', key: 'k-1' });
    const got = seen.at(-1)!;
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['accept']).toBe('*/*');
  });

  it('implies the content type of a string or URLSearchParams body, as fetch does', async () => {
    await (await fetch(`${base}/echo`, { method: 'POST', body: 'plain' })).arrayBuffer();
    expect(seen.at(-1)!.headers['content-type']).toBe('text/plain;charset=UTF-8');
    await (await fetch(`${base}/echo`, { method: 'POST', body: new URLSearchParams({ q: 'a b' }) })).arrayBuffer();
    expect(seen.at(-1)!.headers['content-type']).toBe('application/x-www-form-urlencoded;charset=UTF-8');
    expect(seen.at(-1)!.body).toBe('q=a+b');
    await (await fetch(`${base}/echo`, { method: 'POST', body: new Uint8Array([104, 105]) })).arrayBuffer();
    expect(seen.at(-1)!.body).toBe('hi');
  });

  it('a small body read whole: body stream, bodyUsed, clone and a second read behave as fetch', async () => {
    const res = await fetch(`${base}/echo`, { method: 'POST', body: 'x' });
    const copy = res.clone();
    expect(res.bodyUsed).toBe(false);
    expect(await res.text()).toBe('{"method":"POST","body":"x","key":null}');
    expect(res.bodyUsed).toBe(true);
    await expect(res.arrayBuffer()).rejects.toThrow(TypeError);
    expect(await copy.json()).toEqual({ method: 'POST', body: 'x', key: null });
    const streamed = await fetch(`${base}/echo`, { method: 'POST', body: 'y' });
    const reader = streamed.body!.getReader();
    let text = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    expect(JSON.parse(text)).toEqual({ method: 'POST', body: 'y', key: null });
    expect(streamed.bodyUsed).toBe(true);
    const blob = await (await fetch(`${base}/echo`, { method: 'POST', body: 'z' })).blob();
    expect(blob.type).toBe('application/json');
  });

  // Regression (review): a small answer (kept whole in memory) whose body stream was asked for, then
  // cloned, gave a clone with an empty body; cloned after a read, an empty clone instead of fetch's
  // TypeError; and asking for the stream read it (bodyUsed true a tick later, nothing read).
  it('a small body whose stream was taken, then cloned: both read it whole; a clone after a read throws, as from fetch', async () => {
    for (const f of [fetch, globalThis.fetch]) {
      const res = await f(`${base}/sized`, { method: 'POST', body: 's' });
      expect(res.body).not.toBeNull();
      await new Promise((resolve) => setTimeout(resolve, 10));
      // taking the stream is no read
      expect(res.bodyUsed).toBe(false);
      const copy = res.clone();
      expect(await copy.json()).toEqual({ method: 'POST', body: 's' });
      expect(res.bodyUsed).toBe(false);
      expect(await res.json()).toEqual({ method: 'POST', body: 's' });
      expect(res.bodyUsed).toBe(true);
      expect(() => res.clone()).toThrow(TypeError);
      const read = await f(`${base}/sized`, { method: 'POST', body: 'r' });
      await read.text();
      expect(() => read.clone()).toThrow(TypeError);
    }
  });

  // Regression (adversarial run): a caller's accept-encoding got a gzip body with its
  // content-encoding header dropped by the client, so res.json() failed; fetch decodes.
  it('a request that sets accept-encoding gets the body decoded, as from fetch (also through the client)', async () => {
    const direct = await fetch(`${base}/gzip`, { method: 'POST', headers: { 'accept-encoding': 'gzip' }, body: '{}' });
    expect(await direct.json()).toEqual({ ok: true, method: 'POST' });
    const client = createClient({ store: memoryStore() });
    const res = await client.fetch(`${base}/gzip`, { method: 'POST', headers: { 'accept-encoding': 'gzip', 'content-type': 'application/json' }, body: '{}', once: { action: 'gz', ref: 'gz-1' } });
    expect(await res.json()).toEqual({ ok: true, method: 'POST' });
    const replay = await client.fetch(`${base}/gzip`, { method: 'POST', headers: { 'accept-encoding': 'gzip', 'content-type': 'application/json' }, body: '{}', once: { action: 'gz', ref: 'gz-1' } });
    expect(await replay.json()).toEqual({ ok: true, method: 'POST' });
    await client.close();
  });

  // Regression (review): what went through undici's own fetch came back as undici's Response class,
  // not the global one, so `res instanceof Response` was false (and a lookup returning it was refused).
  it("answers with the global Response class also when undici's fetch sends the request", async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('s'));
        c.close();
      },
    });
    // (a stream body cannot follow a 307: fetch cannot send it twice)
    const cases: [string, RequestInit][] = [
      ['/redirect-307', { method: 'POST', body: new Blob(['b']) }],
      ['/echo', { method: 'POST', body: stream, duplex: 'half' } as RequestInit],
      ['/redirect-307', { method: 'POST', body: '{}', headers: { 'accept-encoding': 'gzip' } }],
    ];
    for (const [path, init] of cases) {
      const res = await fetch(`${base}${path}`, init);
      expect(res).toBeInstanceOf(Response);
      const redirected = path === '/redirect-307';
      expect([res.status, res.url, res.redirected]).toEqual([201, redirected ? `${base}/echo?from=307` : `${base}/echo`, redirected]);
      expect(res.headers.getSetCookie()).toEqual(['s=1', 't=2']);
      expect((await res.json()) as unknown).toMatchObject({ method: 'POST' });
    }
  });

  it('refuses a URL with credentials, as fetch does', async () => {
    await expect(fetch(base.replace('http://', 'http://user:pw@') + '/echo', { method: 'POST', body: 'x' })).rejects.toThrow(/includes credentials/);
  });

  it('refuses a GET or HEAD with a body, as fetch does', async () => {
    await expect(fetch(`${base}/echo`, { method: 'GET', body: 'x' })).rejects.toThrow(TypeError);
    await expect(fetch(`${base}/echo`, { method: 'head', body: 'x' })).rejects.toThrow(TypeError);
  });

  it('a 204 has a null body; 4xx are responses, not errors', async () => {
    const empty = await fetch(`${base}/empty`, { method: 'DELETE' });
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
    const missing = await fetch(`${base}/nowhere`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe('nope');
  });

  it('streams bodies without a content-length, and large ones', async () => {
    expect(await (await fetch(`${base}/chunked`)).text()).toBe('part1-part2');
    const large = new Uint8Array(await (await fetch(`${base}/large`)).arrayBuffer());
    expect(large.byteLength).toBe(200_000);
    expect(large[199_999]).toBe(7);
  });

  it('follows redirects like fetch: 302 turns a POST into a GET without body, 307 keeps both', async () => {
    const r302 = await fetch(`${base}/redirect-302`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
    expect(r302.redirected).toBe(true);
    expect(r302.url).toBe(`${base}/echo?from=302`);
    expect(await r302.json()).toEqual({ method: 'GET', body: '', key: null });
    const r307 = await fetch(`${base}/redirect-307`, { method: 'POST', body: 'same' });
    expect(await r307.json()).toEqual({ method: 'POST', body: 'same', key: null });
    const manual = await fetch(`${base}/redirect-302`, { redirect: 'manual' });
    expect(manual.status).toBe(302);
    expect(manual.headers.get('location')).toBe('/echo?from=302');
    await expect(fetch(`${base}/loop`)).rejects.toThrow(TypeError);
  });

  // Regression (adversarial run): the client's Response had url '' and redirected false.
  it("through the client, the live Response keeps the transport's url and redirected; a replay has no live URL", async () => {
    const client = createClient({ store: memoryStore() });
    const call = () => client.fetch(`${base}/redirect-307`, { method: 'POST', body: 'same', once: { action: 'rd', ref: 'rd-1' } });
    const live = await call();
    expect(live.url).toBe(`${base}/echo?from=307`);
    expect(live.redirected).toBe(true);
    expect(await live.json()).toMatchObject({ method: 'POST', body: 'same' });
    const replay = await call();
    expect(replay.headers.get('oncefetch-replayed')).toBe('true');
    expect(replay.url).toBe('');
    await client.close();
  });

  it('an abort rejects with signal.reason, before and during the request', async () => {
    const reason = new Error('stop');
    await expect(fetch(`${base}/echo`, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    const controller = new AbortController();
    const pending = fetch(`${base}/slow`, { signal: controller.signal });
    setTimeout(() => controller.abort(reason), 20);
    await expect(pending).rejects.toBe(reason);
  });

  it('connection refused: TypeError("fetch failed") with ECONNREFUSED as cause, classified not_sent', async () => {
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((done) => closed.close(done));
    const error = await fetch(`http://127.0.0.1:${port}/x`, { method: 'POST', body: '{}' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('fetch failed');
    expect(((error as Error).cause as { code?: string }).code).toBe('ECONNREFUSED');
    expect(classifyError(error, 'awaiting_response').class).toBe('not_sent');
  });

  // Regression (review): a streamed body (chunked, or framed over 64 KiB) failed its read with undici's own
  // SocketError ('other side closed'), not fetch's TypeError('terminated'); only a buffered one said 'terminated'.
  it.each(['/truncated', '/truncated-chunked', '/truncated-large'])('a body cut short fails its read with TypeError("terminated"), classified ambiguous (%s)', async (path) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(200);
    const error = await res.arrayBuffer().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('terminated');
    expect(((error as Error).cause as { code?: string } | undefined)?.code).toBe('UND_ERR_SOCKET');
    expect(classifyError(error, 'reading_body').class).toBe('ambiguous');
    expect(classifyError(error, 'awaiting_response').class).toBe('ambiguous');
  });

  it('a Request input or a stream body goes through undici fetch on the same agent', async () => {
    const viaRequest = await fetch(new Request(`${base}/echo`, { method: 'POST', body: 'r' }));
    expect(await viaRequest.json()).toEqual({ method: 'POST', body: 'r', key: null });
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('streamed'));
        c.close();
      },
    });
    const viaStream = await fetch(`${base}/echo`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
    expect(await viaStream.json()).toEqual({ method: 'POST', body: 'streamed', key: null });
  });

  // Regression (review): init was spread over the Request's parts, so an init member given as
  // undefined (or a null body) erased them: a PUT went out as a GET with no body and no headers.
  it('a Request input with init members undefined or null is sent as fetch sends it (also through wrap())', async () => {
    const request = () => new Request(`${base}/echo`, { method: 'PUT', headers: { authorization: 'Bearer t', 'x-trace': 't1' }, body: 'payload' });
    const sent = () => {
      const { method, body, headers } = seen.at(-1)!;
      return { method, body, authorization: headers['authorization'], trace: headers['x-trace'], type: headers['content-type'] };
    };
    const once = createClient({ store: memoryStore() });
    for (const init of [{ method: undefined, headers: undefined, body: undefined, signal: undefined }, { body: null }, { headers: { 'x-trace': 't2' } }] as RequestInit[]) {
      await (await globalThis.fetch(request(), init)).arrayBuffer();
      const expected = sent();
      await (await fetch(request(), init)).arrayBuffer();
      expect(sent()).toEqual(expected);
      await (await once.wrap()(request(), init)).arrayBuffer();
      expect(sent()).toEqual(expected);
    }
    await once.close();
  });

  // Regression (review): a FormData body went to undici's own fetch, which does not know the global
  // FormData class and sent the text "[object FormData]" as text/plain.
  it('sends a FormData body as multipart, as fetch does (also through the client for a method that is not once-only)', async () => {
    const form = new FormData();
    form.append('sku', 'A-17');
    form.append('file', new Blob(['xyz'], { type: 'text/plain' }), 'f.txt');
    const once = createClient({ store: memoryStore() });
    for (const send of [fetch, once.fetch]) {
      await (await send(`${base}/echo`, { method: 'PUT', body: form })).arrayBuffer();
      const { headers, body } = seen.at(-1)!;
      const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(headers['content-type'] ?? '')?.[1];
      expect(boundary).toBeDefined();
      expect(body).toContain(`--${boundary}\r\nContent-Disposition: form-data; name="sku"\r\n\r\nA-17\r\n`);
      expect(body).toContain('filename="f.txt"\r\nContent-Type: text/plain\r\n\r\nxyz\r\n');
    }
    await once.close();
  });
});
