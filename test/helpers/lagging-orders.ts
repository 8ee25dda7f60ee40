/**
 * An orders API that does not dedupe keys, whose lookup is backed by an index that lags its writes:
 * every POST /orders creates an order (`processMs` after it arrived, whether or not its sender is still
 * there), and GET /orders?ref= sees only orders at least `lagMs` old (404 otherwise). `answer` says
 * what a POST gets once its order exists (`first`: no earlier order of its ref; `count`: orders in
 * all); by default a 201, unless its connection is gone. Effects are the orders, counted here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface PostAnswer {
  req: IncomingMessage;
  res: ServerResponse;
  ref: string;
  first: boolean;
  count: number;
}

export const created = ({ res, ref, count }: PostAnswer): void => {
  if (!res.destroyed) res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `o-${ref}-${count}`, ref }));
};

export function laggingOrdersApi(opts: { lagMs: number; processMs?: number; answer?: (post: PostAnswer) => void }) {
  const { lagMs, processMs = 0, answer = created } = opts;
  const orders: { ref: string; at: number }[] = [];
  const seen = { posts: 0, lookups: 0 };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET') {
        seen.lookups++;
        const ref = url.searchParams.get('ref') ?? '';
        const now = Date.now();
        if (!orders.some((o) => o.ref === ref && o.at + lagMs <= now)) return void res.writeHead(404).end();
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `o-${ref}`, ref }));
      }
      seen.posts++;
      const { ref } = JSON.parse(Buffer.concat(chunks).toString()) as { ref: string };
      const first = !orders.some((o) => o.ref === ref);
      const commit = (): void => {
        orders.push({ ref, at: Date.now() });
        answer({ req, res, ref, first, count: orders.length });
      };
      // (at once when there is no processing time: the answer goes out in the same turn as before)
      if (processMs === 0) commit();
      else setTimeout(commit, processMs);
    });
  };
  return { orders, seen, handler, effects: (ref: string) => orders.filter((o) => o.ref === ref).length };
}
