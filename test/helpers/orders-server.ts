/**
 * The shell of a loopback orders API, whose answers each test scripts for itself: it reads a
 * request's body to its end, then hands a GET (the lookup: GET /orders?ref=, any path) to `onGet` and
 * any other request (a POST of a JSON body with a `ref`) to `onPost`, in that same turn, counting both
 * in `seen`. The orders are what the test says it created (`create(ref)`): `created` holds their
 * refs in turn (a test's own array when given), `effects(ref)` counts a ref's, `has(ref, olderThanMs)`
 * finds one (at least `olderThanMs` old). Serve `handler` with eachTest().serve (loopback.ts), which
 * listens on 127.0.0.1:0 and closes the server after each test.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface OrdersRequest {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  /** a GET's `ref` query parameter ('' without one); a POST's body's `ref` */
  ref: string;
}

export function ordersServer(opts: { onPost: (post: OrdersRequest) => void; onGet: (get: OrdersRequest) => void; created?: string[] }) {
  const { onPost, onGet, created = [] } = opts;
  const createdAt: number[] = [];
  const seen = { posts: 0, lookups: 0 };
  /** Records an order of `ref`; returns how many orders there are now (all refs). */
  const create = (ref: string): number => {
    createdAt.push(Date.now());
    return created.push(ref);
  };
  const has = (ref: string, olderThanMs = 0): boolean => {
    const now = Date.now();
    return created.some((r, i) => r === ref && createdAt[i]! + olderThanMs <= now);
  };
  const effects = (ref: string): number => created.filter((r) => r === ref).length;
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') {
        seen.lookups++;
        return onGet({ req, res, url, ref: url.searchParams.get('ref') ?? '' });
      }
      seen.posts++;
      const { ref } = JSON.parse(Buffer.concat(chunks).toString()) as { ref: string };
      onPost({ req, res, url, ref });
    });
  };
  return { handler, seen, created, create, has, effects };
}
