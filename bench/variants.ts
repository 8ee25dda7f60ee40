/**
 * The clients the benchmark compares. Every variant sends the same request —
 * `POST /orders` with a ~150-byte JSON body and an `Idempotency-Key` — and
 * reads the whole response body, so the provider does the same work for all.
 *
 * @module
 */
import { join } from 'node:path';
import got from 'got';
import ky from 'ky';
import pRetry from 'p-retry';
import { Agent, request as undiciRequest, fetch as undiciFetch } from 'undici';
import { REPLAYED_HEADER, createClient, memoryStore } from '../src/index.js';
import type { OnceClient } from '../src/index.js';
import { defaultFetch } from '../src/node-defaults.js';
import { sqliteStore } from '../src/stores/sqlite.js';

/** A client under test, set up fresh for each measured cell. */
export interface Variant {
  name: string;
  /** the group its ratios are reported against */
  kind: 'transport' | 'peer' | 'oncefetch';
  setup(url: string, dir: string): Promise<Instance> | Instance;
}

/** One set-up client. */
export interface Instance {
  send(i: number): Promise<unknown>;
  close(): Promise<void>;
}

/** ~150 bytes of JSON, different per request. */
export function orderBody(i: number): string {
  return JSON.stringify({
    sku: 'A-17',
    qty: 1 + (i % 3),
    customer: `c-${i % 1000}`,
    address: { city: 'Lisbon', street: 'Rua Augusta 100', zip: '1100-053' },
    note: 'leave at the door',
  });
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function keyed(): Record<string, string> {
  return { ...JSON_HEADERS, 'idempotency-key': globalThis.crypto.randomUUID() };
}

async function drain(res: Response): Promise<void> {
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`unexpected status ${res.status}`);
}

const noClose = async (): Promise<void> => undefined;

/** A client with no retry layer over a fetch function. */
function plainFetch(name: string, kind: Variant['kind'], make: () => typeof globalThis.fetch): Variant {
  return {
    name,
    kind,
    setup(url) {
      const fetch = make();
      return { send: async (i) => drain(await fetch(`${url}/orders`, { method: 'POST', headers: keyed(), body: orderBody(i) })), close: noClose };
    },
  };
}

function onceVariant(name: string, makeStore: ((path: string) => ReturnType<typeof sqliteStore>) | 'memory' | 'default'): Variant {
  return {
    name,
    kind: 'oncefetch',
    setup(url, dir) {
      const path = join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}-${Date.now()}-${Math.random().toString(36).slice(2)}.db`);
      let client: OnceClient;
      if (makeStore === 'default') {
        // Exactly what `createClient()` gives on Node: the default store (at $ONCEFETCH_DB) and transport.
        const before = process.env['ONCEFETCH_DB'];
        process.env['ONCEFETCH_DB'] = path;
        client = createClient({ tenant: 'bench' });
        if (before === undefined) delete process.env['ONCEFETCH_DB'];
        else process.env['ONCEFETCH_DB'] = before;
      } else {
        client = createClient({ tenant: 'bench', store: makeStore === 'memory' ? memoryStore() : makeStore(path) });
      }
      const run = `${process.pid}-${Date.now()}`;
      return {
        async send(i) {
          const res = await client.fetch(`${url}/orders`, {
            method: 'POST',
            headers: JSON_HEADERS,
            body: orderBody(i),
            once: { action: 'create-order', ref: `${run}-${i}` },
          });
          // Every measured call must be a new operation that reaches the provider, never a replay.
          if (res.headers.has(REPLAYED_HEADER)) throw new Error(`bench bug: ${run}-${i} was replayed`);
          await drain(res);
        },
        close: () => client.close(),
      };
    },
  };
}

let agent: Agent | undefined;
const sharedAgent = (): Agent => (agent ??= new Agent({ connect: { timeout: 10_000 } }));

/** Every variant, in report order. */
export const VARIANTS: readonly Variant[] = [
  {
    name: 'undici.request (raw)',
    kind: 'transport',
    setup(url) {
      const dispatcher = sharedAgent();
      return {
        async send(i) {
          const res = await undiciRequest(`${url}/orders`, { method: 'POST', headers: keyed(), body: orderBody(i), dispatcher });
          await res.body.arrayBuffer();
        },
        close: noClose,
      };
    },
  },
  plainFetch('oncefetch transport', 'transport', defaultFetch),
  plainFetch('undici fetch', 'transport', () => {
    const dispatcher = sharedAgent();
    return ((input: string, init: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch;
  }),
  plainFetch('global fetch', 'transport', () => globalThis.fetch),
  {
    name: 'p-retry + fetch',
    kind: 'peer',
    setup(url) {
      return {
        send: (i) =>
          pRetry(async () => {
            const res = await globalThis.fetch(`${url}/orders`, { method: 'POST', headers: keyed(), body: orderBody(i) });
            await drain(res);
          }),
        close: noClose,
      };
    },
  },
  {
    name: 'ky',
    kind: 'peer',
    setup(url) {
      const client = ky.create({ retry: { limit: 2, methods: ['post'] } });
      return { send: async (i) => client.post(`${url}/orders`, { headers: keyed(), body: orderBody(i) }).arrayBuffer(), close: noClose };
    },
  },
  {
    name: 'got',
    kind: 'peer',
    setup(url) {
      const client = got.extend({ retry: { limit: 2, methods: ['POST'] } });
      return { send: async (i) => client.post(`${url}/orders`, { headers: keyed(), body: orderBody(i) }).buffer(), close: noClose };
    },
  },
  onceVariant('oncefetch memory', 'memory'),
  onceVariant('oncefetch sqlite', 'default'),
  onceVariant('oncefetch sqlite power-loss', (path) => sqliteStore({ path, durability: 'power-loss' })),
];
