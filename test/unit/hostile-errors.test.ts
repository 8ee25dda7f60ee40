/**
 * A thrown value whose properties cannot be read (a getter that throws, a Proxy that throws on
 * every get) must still end the call with a classified outcome: `ambiguous`, since nothing proves
 * the request did not leave. Effects are counted at a loopback provider (fetch) or as calls of the
 * effect (run); delays are zero (random 0).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';
import type { OnceClientOptions } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import { classifyError } from '../../src/classify/classify.js';

type Provider = Awaited<ReturnType<typeof startProvider>>;

const boom = (): never => {
  throw new Error('hostile getter');
};

/** Errors a transport or an effect might throw, each unreadable in one way. */
const HOSTILE: Array<[string, () => unknown]> = [
  ...['code', 'cause', 'name', 'message', 'status', 'statusCode', 'headers', 'syscall', 'errors'].map(
    (key): [string, () => unknown] => [`an Error whose ${key} getter throws`, () => Object.defineProperty(new Error('x'), key, { get: boom })],
  ),
  ['a Proxy of an Error that throws on every get', () => new Proxy(new Error('x'), { get: boom })],
  [
    'a Proxy that throws on every trap',
    () => new Proxy(new Error('x'), { get: boom, has: boom, getPrototypeOf: boom, ownKeys: boom, getOwnPropertyDescriptor: boom }),
  ],
  ['a TypeError whose cause throws on every get', () => new TypeError('fetch failed', { cause: new Proxy({}, { get: boom }) })],
  [
    'a revoked Proxy',
    () => {
      const { proxy, revoke } = Proxy.revocable(new Error('x'), {});
      revoke();
      return proxy;
    },
  ],
];

const SCOPE = { action: 'create-order', ref: 'A-17' };

function makeClient(options: OnceClientOptions) {
  return createClient({ store: memoryStore(), random: () => 0, ...options, retry: { budget: false, maxAttempts: 3, ...options.retry } });
}

describe('classifyError on unreadable errors', () => {
  it.each(HOSTILE)('%s: ambiguous, never a throw', (_label, make) => {
    expect(classifyError(make(), 'awaiting_response').class).toBe('ambiguous');
    expect(classifyError(make(), 'reading_body').class).toBe('ambiguous');
    expect(classifyError(make(), 'before_dispatch').class).toBe('not_sent');
  });
});

describe('client.fetch whose transport rejects with an unreadable error after the provider committed', () => {
  let provider: Provider;
  beforeEach(async () => {
    provider = await startProvider();
  });
  afterEach(async () => {
    await provider.close();
  });

  it.each(HOSTILE)('%s: AmbiguousOutcomeError, one effect, record ambiguous', async (_label, make) => {
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const res = await globalThis.fetch(input, init);
      await res.arrayBuffer(); // the order is created; the answer is "lost"
      thrown = make();
      throw thrown;
    }) as typeof globalThis.fetch;
    let thrown: unknown;
    const client = makeClient({ fetch });
    const call = client.fetch(`${provider.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'A-17', amount: 5 }),
      once: SCOPE,
    });
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as AmbiguousOutcomeError).cause).toBe(thrown);
    expect(provider.effectsFor('A-17')).toBe(1);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts.map((a) => a.class)).toEqual(['ambiguous']);
    await client.close();
  });
});

describe('client.run whose effect rejects with an unreadable error', () => {
  it.each(HOSTILE)('%s: AmbiguousOutcomeError, one call of the effect, record ambiguous', async (_label, make) => {
    const client = makeClient({ fetch: globalThis.fetch });
    let effects = 0;
    const thrown = make();
    const call = client.run({ action: 'charge', ref: 'order-17' }, async () => {
      effects++;
      throw thrown;
    });
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    // what the effect threw, not what reading it threw
    expect((error as AmbiguousOutcomeError).cause).toBe(thrown);
    expect(effects).toBe(1);
    const record = await client.get({ action: 'charge', ref: 'order-17' });
    expect(record?.state).toBe('ambiguous');
    expect(record?.attempts.map((a) => a.class)).toEqual(['ambiguous']);
    await client.close();
  });
});

describe('client.run: what reading a thrown value throws is not what the effect threw', () => {
  // A getter that throws a connect-refused error: that error says nothing about the effect's request,
  // which may have left. It was classified in place of what the effect threw (not_sent), and the
  // effect was called a second time.
  const refused = (): never => {
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
  };

  async function runOnce(thrown: unknown) {
    const client = makeClient({ fetch: globalThis.fetch });
    let effects = 0;
    const error = await client
      .run({ action: 'charge', ref: 'order-17' }, async () => {
        effects++;
        if (effects > 1) return 'charged again';
        throw thrown;
      })
      .catch((e: unknown) => e);
    const record = await client.get({ action: 'charge', ref: 'order-17' });
    await client.close();
    return { effects, error, classes: record?.attempts.map((a) => a.class) };
  }

  it('a status getter throwing ECONNREFUSED: no status, so ambiguous; one call of the effect', async () => {
    const thrown = Object.defineProperty(new Error('x'), 'status', { get: refused });
    const { effects, error, classes } = await runOnce(thrown);
    expect(effects).toBe(1);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((error as AmbiguousOutcomeError).cause).toBe(thrown);
    expect(classes).toEqual(['ambiguous']);
  });

  it.each(['headers', 'message', 'type', 'rawType', 'code'])(
    'a %s getter throwing ECONNREFUSED beside status 400: terminal by the status, the error rethrown; one call of the effect',
    async (key) => {
      const thrown = Object.defineProperty(Object.assign(new Error('x'), { status: 400 }), key, { get: refused });
      const { effects, error, classes } = await runOnce(thrown);
      expect(effects).toBe(1);
      expect(error).toBe(thrown);
      expect(classes).toEqual(['terminal']);
    },
  );
});
