/**
 * A loopback fake of Stripe's `POST /v1/payment_intents`, enough for stripe-node
 * (`host`, `port`, `protocol: 'http'`). Each payment intent created is one
 * business effect. `Idempotency-Key` works like Stripe's: the same key with the
 * same parameters replays the stored response with `Idempotent-Replayed: true`;
 * other parameters get 400 `idempotency_error`. Scripted faults act after the
 * commit point: the intent exists, the client sees a dropped connection or a 500
 * (a proxy failing between Stripe and the client; Stripe itself replays what it
 * stored under the key).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** What happens to the next `POST /v1/payment_intents` after it commits. */
export type StripeFault = 'drop_after_commit' | 'error_after_commit';

/** A running fake. */
export interface FakeStripe {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** payment intents created: the business effects */
  readonly effects: number;
  /** the `Idempotency-Key` of every POST received, in order */
  readonly keys: readonly (string | undefined)[];
  /** responses replayed under a known key */
  readonly replays: number;
  /** queues faults for the next POSTs, in order */
  fault(...faults: StripeFault[]): void;
  close(): Promise<void>;
}

interface Stored {
  params: string;
  status: number;
  body: string;
}

/** Starts the fake on 127.0.0.1; `dedupe: false` ignores `Idempotency-Key` (every POST creates). */
export async function startFakeStripe(options: { dedupe?: boolean } = {}): Promise<FakeStripe> {
  const dedupe = options.dedupe ?? true;
  const byKey = new Map<string, Stored>();
  const keys: (string | undefined)[] = [];
  const faults: StripeFault[] = [];
  let effects = 0;
  let replays = 0;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'POST' || req.url !== '/v1/payment_intents') {
      return send(res, 404, JSON.stringify({ error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method} ${req.url})` } }));
    }
    const params = canonicalForm(await readBody(req));
    const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
    keys.push(key);
    const fault = faults.shift();

    const seen = key === undefined || !dedupe ? undefined : byKey.get(key);
    if (seen !== undefined && seen.params !== params) {
      return send(res, 400, JSON.stringify({
        error: {
          type: 'idempotency_error',
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
        },
      }));
    }
    let stored: Stored;
    if (seen !== undefined) {
      replays++;
      stored = seen;
      res.setHeader('idempotent-replayed', 'true');
    } else {
      effects++;
      stored = { params, status: 200, body: JSON.stringify(paymentIntent(effects, new URLSearchParams(params))) };
      if (key !== undefined) byKey.set(key, stored);
    }
    if (fault === 'drop_after_commit') return void req.socket.destroy();
    if (fault === 'error_after_commit') return send(res, 500, JSON.stringify({ error: { type: 'api_error', message: 'An unknown error occurred' } }));
    send(res, stored.status, stored.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fake-stripe: no port');
  return {
    host: '127.0.0.1',
    port: address.port,
    get effects() {
      return effects;
    },
    get keys() {
      return [...keys];
    },
    get replays() {
      return replays;
    },
    fault: (...f) => void faults.push(...f),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function paymentIntent(n: number, params: URLSearchParams): unknown {
  const metadata: Record<string, string> = {};
  for (const [name, value] of params) {
    const m = /^metadata\[(.+)\]$/.exec(name);
    if (m?.[1] !== undefined) metadata[m[1]] = value;
  }
  return {
    id: `pi_${String(n).padStart(6, '0')}`,
    object: 'payment_intent',
    amount: Number(params.get('amount')),
    currency: params.get('currency'),
    status: 'requires_payment_method',
    metadata,
    created: 1_700_000_000 + n,
    livemode: false,
  };
}

/** Form parameters in a stable order, so that equal parameters compare equal. */
function canonicalForm(body: string): string {
  const params = [...new URLSearchParams(body)].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return new URLSearchParams(params).toString();
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'request-id': `req_${Date.now()}` });
  res.end(body);
}
