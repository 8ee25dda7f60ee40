/**
 * Loopback servers for the browser tests (and the browser example): a static
 * server for the test page, and a CORS front for the fault-injecting provider
 * (the page calls it from another origin, as a web app calls its API; the front
 * exposes the headers a real API would, and strips Origin, so src/testing/provider.ts's
 * own permissive CORS answer never shows). Only 127.0.0.1.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running loopback server. */
export interface Loopback {
  /** `http://127.0.0.1:PORT` */
  url: string;
  close(): Promise<void>;
}

/** One file the static server serves. */
export interface StaticFile {
  type: string;
  body: string | Uint8Array;
}

/** Listens on 127.0.0.1 (`port` 0: any free one); `close()` ends the server and its open connections. */
export async function listen(server: Server, port = 0): Promise<Loopback> {
  const sockets = new Set<import('node:net').Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port: bound } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      })),
  };
}

/**
 * Serves `files` by path (`/` included); everything else is 404. `files` may
 * change while the server runs. No caching, so a reload gets the current build.
 */
export function startStaticServer(files: Map<string, StaticFile>, port = 0): Promise<Loopback> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const file = files.get(path);
    if (req.method !== 'GET' || file === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no ${path}`);
      return;
    }
    res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body);
  });
  return listen(server, port);
}

/** Response headers a page of another origin may read. */
const EXPOSED = 'idempotent-replayed, idempotency-replayed, retry-after, retry-after-ms, location, content-type';

/**
 * A CORS front for `target`: answers preflights (allowing any request header,
 * the idempotency key included) and forwards everything else, adding the CORS
 * headers to the answer. When the page goes away mid-request the forwarded
 * request goes on, as a real server goes on processing.
 */
export function startCorsProxy(target: string, port = 0): Promise<Loopback> {
  const cors = (req: IncomingMessage): Record<string, string> => ({
    'access-control-allow-origin': req.headers.origin ?? '*',
    vary: 'origin',
    'access-control-expose-headers': EXPOSED,
  });
  const server = createServer((req, res: ServerResponse) => {
    if (req.method === 'OPTIONS') {
      res
        .writeHead(204, {
          ...cors(req),
          'access-control-allow-methods': 'GET, POST, PATCH, PUT, DELETE',
          'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '',
          'access-control-max-age': '600',
        })
        .end();
      return;
    }
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.origin;
    delete headers.referer;
    const upstream = request(new URL(req.url ?? '/', target), { method: req.method, headers }, (answer) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined) out[k] = v;
      res.writeHead(answer.statusCode ?? 502, { ...out, ...cors(req) });
      answer.pipe(res);
      // A reset or truncation by the provider reaches the page as one.
      answer.once('error', () => res.destroy());
      answer.once('aborted', () => res.destroy());
    });
    upstream.once('error', () => res.destroy());
    req.pipe(upstream);
  });
  return listen(server, port);
}
