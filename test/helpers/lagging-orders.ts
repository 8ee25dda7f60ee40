/**
 * An orders API that does not dedupe keys, whose lookup is backed by an index that lags its writes:
 * every POST /orders creates an order (`processMs` after it arrived, whether or not its sender is still
 * there), and GET /orders?ref= sees only orders at least `lagMs` old (404 otherwise). `answer` says
 * what a POST gets once its order exists (`first`: no earlier order of its ref; `count`: orders in
 * all); by default a 201, unless its connection is gone. Effects are the orders, counted here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ordersServer } from './orders-server.js';

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
  const api = ordersServer({
    onGet: ({ res, ref }) => {
      if (!api.has(ref, lagMs)) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `o-${ref}`, ref }));
    },
    onPost: ({ req, res, ref }) => {
      const first = !api.has(ref);
      const commit = (): void => answer({ req, res, ref, first, count: api.create(ref) });
      // (at once when there is no processing time: the answer goes out in the same turn as before)
      if (processMs === 0) commit();
      else setTimeout(commit, processMs);
    },
  });
  return { seen: api.seen, handler: api.handler, effects: api.effects };
}
