/**
 * A fault-injecting loopback "orders" API that counts business effects. It
 * implements the IETF httpapi Idempotency-Key draft (replay, 409 in progress,
 * 422 mismatch), can be told to ignore keys, and injects scripted or seeded
 * random faults around the commit point. Only `node:` built-ins.
 *
 * Imported as `oncefetch/testing/provider`, it needs nothing else: use it from
 * jest, `node:test` or a plain script. (`oncefetch/testing` exports the same
 * provider beside the store contract suite, which imports `vitest`.)
 *
 * @example
 * ```ts
 * import { startProvider } from 'oncefetch/testing/provider'
 *
 * const provider = await startProvider({ requireKey: true })
 * provider.fault({ kind: 'drop_after_commit' })
 * await placeOrder(`${provider.url}/orders`, { ref: 'A-17' }) // your code, through oncefetch
 * assert.equal(provider.effectsFor('A-17'), 1) // business effects, not HTTP successes
 * await provider.close()
 * ```
 *
 * @module
 */

import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import {
  FaultQueue,
  parseFault,
  zeroFaultCounts,
  type Fault,
  type FaultKind,
} from './provider-faults.js';
import {
  BodyTooLargeError,
  fingerprint,
  flattenHeaders,
  json,
  parseJson,
  parseKeyHeader,
  problem,
  readBody,
  send,
  sendTruncated,
  sleep,
  type Reply,
} from './provider-http.js';
import { Ledger, type Order, type StoredResponse } from './provider-ledger.js';
import { conflictsForever, parseMisbehave, type MisbehaveOptions } from './provider-modes.js';
import { resolveOptions, type ProviderOptions } from './provider-options.js';

export { FAULT_KINDS } from './provider-faults.js';
export type { Fault, FaultKind, FaultMatch, RandomFaultsOptions } from './provider-faults.js';
export type { Order } from './provider-ledger.js';
export type { ProviderOptions } from './provider-options.js';
export type { MisbehaveOptions } from './provider-modes.js';

/**
 * One `POST /orders` as received, faulted or not: check what the client sent,
 * e.g. that every retry carried the same key.
 *
 * @example
 * ```ts
 * const sent: readonly ProviderRequest[] = provider.requests.filter((r) => r.ref === 'A-17')
 * expect(new Set(sent.map((r) => r.key)).size).toBe(1)
 * ```
 */
export interface ProviderRequest {
  /** The idempotency key (after RFC 8941 unquoting), when the request had one. */
  readonly key: string | undefined;
  /** The `ref` field of the JSON body, when it was a string. */
  readonly ref: string | undefined;
  /** Lower-case header names. */
  readonly headers: Readonly<Record<string, string>>;
  /** Arrival time, epoch ms. */
  readonly at: number;
  /** The raw request body. */
  readonly bodyText: string;
}

/**
 * What `GET /__control/state` returns: the provider's counters, for a test
 * that reaches the provider over HTTP only (it runs in another process).
 *
 * @example
 * ```ts
 * const state = (await (await fetch(`${providerUrl}/__control/state`)).json()) as ProviderState
 * expect(state.effects).toBe(1)
 * ```
 */
export interface ProviderState {
  effects: number;
  requests: readonly ProviderRequest[];
  orders: readonly Order[];
  faultsInjected: Readonly<Record<FaultKind, number>>;
  /** Scripted faults not consumed yet. */
  pendingFaults: number;
  /** Lookups served (`GET /orders?…` and `GET /orders/:id`). */
  lookups: number;
}

/**
 * A running provider.
 *
 * @example
 * ```ts
 * provider.fault({ kind: 'error_after_commit', match: { ref: 'A-17' } })
 * await agent.placeOrder('A-17')
 * expect(provider.effectsFor('A-17')).toBe(1) // business effects, not HTTP successes
 * ```
 */
export interface Provider {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  /** Business effects: orders created. */
  readonly effects: number;
  readonly orders: readonly Order[];
  /** Every `POST /orders` received, faulted or not. */
  readonly requests: readonly ProviderRequest[];
  readonly faultsInjected: Readonly<Record<FaultKind, number>>;
  /** Scripted faults not consumed yet. */
  readonly pendingFaults: number;
  /** Lookups served. */
  readonly lookups: number;
  /** Orders created with this `ref`. */
  effectsFor(ref: string): number;
  /** Enqueues one fault for the next matching `POST /orders`. Throws `TypeError`/`RangeError` on a bad fault. */
  fault(f: Fault): void;
  /** Enqueues several faults, in order; all are validated before any is enqueued. */
  faults(list: readonly Fault[]): void;
  /**
   * Clears orders, keys, requests, counters and faults; restarts random faults
   * from their seed. Requests still in progress are abandoned (socket closed).
   */
  reset(): void;
  /**
   * Simulates a restart of the provider's process: open connections are cut and
   * requests in progress are abandoned (their keys with them). Orders, counters
   * and completed keys survive, unless `misbehave.forgetKeysOnRestart` is set,
   * in which case every key is forgotten.
   */
  restart(): void;
  /** Replaces the standing misbehaviours (validated like the option); `{}` makes the provider well-behaved. */
  setMisbehave(modes: MisbehaveOptions): void;
  /** Closes the server and destroys every open socket; pending delays are cancelled. */
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;

/** State that {@link Provider.reset} replaces wholesale; in-flight requests hold the old one. */
interface Epoch {
  ledger: Ledger;
  requests: ProviderRequest[];
  faultsInjected: Record<FaultKind, number>;
  lookups: number;
  /** Aborted by reset/close: pending delays end and their requests are abandoned. */
  controller: AbortController;
}

function newEpoch(): Epoch {
  const controller = new AbortController();
  // Every held request listens on this one signal; more than 10 at once is normal, not a leak.
  try {
    setMaxListeners(0, controller.signal);
  } catch {
    // A test DOM's AbortController (happy-dom's) is not Node's EventTarget, which Node refuses
    // here; it warns of no listener count either, so there is no limit to raise.
  }
  return {
    ledger: new Ledger(),
    requests: [],
    faultsInjected: zeroFaultCounts(),
    lookups: 0,
    controller,
  };
}

/**
 * Starts the loopback provider on 127.0.0.1.
 *
 * @example
 * const provider = await startProvider({ requireKey: true });
 * provider.fault({ kind: 'drop_after_commit' });
 * // … run the client against `${provider.url}/orders` …
 * expect(provider.effectsFor('A-17')).toBe(1);
 * await provider.close();
 */
export async function startProvider(options: ProviderOptions = {}): Promise<Provider> {
  const opts = resolveOptions(options);
  const queue = new FaultQueue(opts.randomFaults);
  const sockets = new Set<Socket>();
  let modes = opts.misbehave;
  let epoch = newEpoch();
  let closing: Promise<void> | undefined;

  const state = (): ProviderState => ({
    effects: epoch.ledger.orders.length,
    requests: [...epoch.requests],
    orders: [...epoch.ledger.orders],
    faultsInjected: { ...epoch.faultsInjected },
    pendingFaults: queue.pending,
    lookups: epoch.lookups,
  });

  const enqueue = (list: readonly unknown[]): void => {
    queue.enqueue(list.map((f, i) => parseFault(f, list.length === 1 ? 'fault' : `faults[${i}]`)));
  };

  const reset = (): void => {
    epoch.controller.abort();
    epoch = newEpoch();
    queue.clear();
  };

  async function postOrder(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req, MAX_BODY_BYTES);
    const current = epoch;
    const bodyText = raw.toString('utf8');
    const parsed = parseJson(bodyText);
    const ref = parsed.ok && isRecord(parsed.value) && typeof parsed.value['ref'] === 'string' ? parsed.value['ref'] : undefined;
    const key = parseKeyHeader(req.headers[opts.keyHeader]);
    current.requests.push(Object.freeze({ key, ref, headers: Object.freeze(flattenHeaders(req.headers)), at: Date.now(), bodyText }));

    const fault = queue.take({ ref, key });
    if (fault !== undefined) current.faultsInjected[fault.kind]++;
    if (fault?.kind === 'reset_before_commit') return void req.socket.resetAndDestroy();
    if (fault?.kind === 'status_before_commit') {
      const headers: Record<string, string> = { ...fault.headers };
      if (fault.retryAfter !== undefined) headers['retry-after'] = fault.retryAfter;
      return send(res, problem(fault.status, 'injected-status', `Injected status ${fault.status}`, headers));
    }
    if (conflictsForever(modes, { ref, key })) {
      return send(res, problem(409, 'request-in-progress', 'A request with this Idempotency-Key is in progress'));
    }

    const decision = decide(current.ledger, key, raw, parsed);
    const holdMs = (decision.kind === 'commit' ? opts.processingMs : 0) + (fault?.kind === 'delay_before_commit' ? fault.delayMs : 0);
    if (!(await sleep(holdMs, current.controller.signal))) return void req.socket.destroy();
    let reply: Reply;
    if (decision.kind === 'reply') reply = decision.reply;
    else {
      const body = parsed.ok ? parsed.value : undefined;
      reply = stored(current.ledger.commit({ ref, key, body }, decision.storeUnderKey).response);
    }

    switch (fault?.kind) {
      case 'drop_after_commit':
        return void req.socket.destroy();
      case 'error_after_commit':
        // A server that caches only 2xx releases the key of a request it just executed.
        if (modes.cacheOnly2xx && decision.kind === 'commit' && decision.storeUnderKey && key !== undefined) {
          current.ledger.release(key);
        }
        return send(res, problem(fault.status ?? 500, 'injected-error', 'Injected error after commit'));
      case 'truncate_after_commit':
        return sendTruncated(res, reply);
      case 'delay_after_commit':
        if (!(await sleep(fault.delayMs, current.controller.signal))) return void req.socket.destroy();
        return send(res, reply);
      default:
        return send(res, reply);
    }
  }

  /** Synchronous, so that a new key is marked in-progress in the tick that saw it. */
  function decide(ledger: Ledger, key: string | undefined, raw: Buffer, parsed: ReturnType<typeof parseJson>): Decision {
    if (key === undefined && opts.requireKey) {
      return { kind: 'reply', reply: problem(400, 'idempotency-key-missing', `The ${opts.keyHeaderName} header is required`) };
    }
    if (!parsed.ok) return { kind: 'reply', reply: problem(400, 'invalid-body', 'The request body must be JSON') };
    if (key === undefined || opts.ignoreKeys) return { kind: 'commit', storeUnderKey: false };
    const outcome = ledger.begin(key, fingerprint(raw, parsed.value, opts.rawBodyCompare));
    switch (outcome.kind) {
      case 'execute':
        return { kind: 'commit', storeUnderKey: true };
      case 'replay':
        return { kind: 'reply', reply: replayed(outcome.response, modes.replayWithDifferentStatus) };
      case 'in_progress':
        return { kind: 'reply', reply: problem(409, 'request-in-progress', 'A request with this Idempotency-Key is in progress') };
      case 'mismatch':
        return { kind: 'reply', reply: problem(422, 'idempotency-key-mismatch', 'Idempotency-Key reused with a different payload') };
    }
  }

  function lookup(url: URL, id: string | undefined, res: ServerResponse): void {
    epoch.lookups++;
    const ref = url.searchParams.get('ref') ?? undefined;
    const key = url.searchParams.get('key') ?? undefined;
    if (id === undefined && ref === undefined && key === undefined) {
      return send(res, problem(400, 'lookup-criteria-missing', 'Pass ?ref= or ?key= to look an order up'));
    }
    const by: { id?: string; ref?: string; key?: string } = {};
    if (id !== undefined) by.id = id;
    if (ref !== undefined) by.ref = ref;
    if (key !== undefined) by.key = key;
    const order = epoch.ledger.find(by);
    send(res, order === undefined ? problem(404, 'order-not-found', 'No such order') : json(200, order));
  }

  async function control(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const route = `${req.method ?? ''} ${path}`;
    if (route === 'GET /__control/state') return send(res, json(200, state()));
    if (route === 'POST /__control/reset') {
      await readBody(req, MAX_BODY_BYTES);
      reset();
      return send(res, json(200, { ok: true }));
    }
    if (route === 'POST /__control/faults') {
      const parsed = parseJson((await readBody(req, MAX_BODY_BYTES)).toString('utf8'));
      if (!parsed.ok) return send(res, problem(400, 'invalid-body', 'The request body must be JSON'));
      try {
        enqueue(Array.isArray(parsed.value) ? parsed.value : [parsed.value]);
      } catch (error) {
        return send(res, problem(400, 'invalid-fault', error instanceof Error ? error.message : String(error)));
      }
      return send(res, json(200, { pendingFaults: queue.pending }));
    }
    send(res, problem(404, 'not-found', `No control route ${route}`));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname;
    if (path.startsWith('/__control/')) return control(req, res, path);
    const byId = /^\/orders\/([^/]+)$/.exec(path);
    if (path === '/orders' || byId !== null) {
      const id = byId?.[1] === undefined ? undefined : decodeURIComponent(byId[1]);
      if (req.method === 'GET') return lookup(url, id, res);
      if (req.method === 'POST' && id === undefined) return postOrder(req, res);
      return send(res, problem(405, 'method-not-allowed', 'Method not allowed', { allow: id === undefined ? 'GET, POST' : 'GET' }));
    }
    send(res, problem(404, 'not-found', `No route ${path}`));
  }

  const server = createServer((req, res) => {
    res.on('error', () => {}); // the client may vanish mid-reply; nothing to do
    // A page's fetch (a browser's, happy-dom's) may call this loopback fake from another origin.
    if (req.headers.origin !== undefined) {
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader('access-control-expose-headers', '*');
      const method = req.headers['access-control-request-method'];
      if (req.method === 'OPTIONS' && method !== undefined) {
        const headers = req.headers['access-control-request-headers'];
        res.writeHead(204, {
          'access-control-allow-methods': 'GET, POST',
          ...(headers === undefined ? {} : { 'access-control-allow-headers': headers }),
          'access-control-max-age': '600',
        });
        return void res.end();
      }
    }
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent || res.destroyed) return void req.socket.destroy();
      if (error instanceof BodyTooLargeError) return send(res, problem(413, 'body-too-large', error.message, { connection: 'close' }));
      send(res, problem(500, 'provider-bug', error instanceof Error ? error.message : String(error)));
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('provider: unexpected server address');
  const url = `http://127.0.0.1:${address.port}`;

  return {
    url,
    get effects() {
      return epoch.ledger.orders.length;
    },
    get orders() {
      return [...epoch.ledger.orders];
    },
    get requests() {
      return [...epoch.requests];
    },
    get faultsInjected() {
      return { ...epoch.faultsInjected };
    },
    get pendingFaults() {
      return queue.pending;
    },
    get lookups() {
      return epoch.lookups;
    },
    effectsFor: (ref) => epoch.ledger.effectsFor(ref),
    fault: (f) => enqueue([f]),
    faults: (list) => enqueue(list),
    reset,
    restart() {
      epoch.controller.abort();
      epoch.controller = new AbortController();
      for (const socket of sockets) socket.destroy();
      epoch.ledger.restart(modes.forgetKeysOnRestart);
    },
    setMisbehave(next) {
      modes = parseMisbehave(next);
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        epoch.controller.abort();
        server.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

type Decision = { kind: 'reply'; reply: Reply } | { kind: 'commit'; storeUnderKey: boolean };

function stored(response: StoredResponse, headers: Record<string, string> = {}): Reply {
  return { status: response.status, contentType: 'application/json', bodyText: response.bodyText, headers };
}

/** A replay of a stored response, marked as such; `status` overrides the stored one (a misbehaving provider). */
function replayed(response: StoredResponse, status: number | undefined): Reply {
  const reply = stored(response, { 'idempotent-replayed': 'true' });
  return status === undefined ? reply : { ...reply, status };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
