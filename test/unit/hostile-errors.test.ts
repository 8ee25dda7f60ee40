/**
 * A thrown value whose properties cannot be read (a getter that throws, a Proxy that throws on
 * every get) must still end the call with a classified outcome: `ambiguous`, since nothing proves
 * the request did not leave. Effects are counted at a loopback provider (fetch) or as calls of the
 * effect (run); delays are zero (random 0).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, OperationFailedError, createClient, memoryStore } from '../../src/index.js';
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

describe('client.fetch whose transport rejects with a revoked Proxy that once.classify calls terminal', () => {
  it('OperationFailedError (not a TypeError from asking its prototype), one effect, record failed', async () => {
    const provider = await startProvider();
    const { proxy, revoke } = Proxy.revocable(new Error('x'), {});
    revoke();
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      await (await globalThis.fetch(input, init)).arrayBuffer();
      throw proxy;
    }) as typeof globalThis.fetch;
    const client = makeClient({ fetch });
    const call = client.fetch(`${provider.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'A-17', amount: 5 }),
      once: { ...SCOPE, classify: () => 'terminal' },
    });
    await expect(call).rejects.toBeInstanceOf(OperationFailedError);
    expect(provider.effectsFor('A-17')).toBe(1);
    expect((await client.get(SCOPE))?.state).toBe('failed');
    await client.close();
    await provider.close();
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

describe('client.run whose lookup throws an unreadable error after an ambiguous attempt', () => {
  // "unknown": the provider does not dedupe, so AmbiguousOutcomeError with what the lookup threw as
  // its cause. Reading its message for the detail threw: the call rejected with the getter's error
  // (or a TypeError), and the record kept its lease.
  it.each([...HOSTILE, ['an object without a prototype', () => Object.create(null) as unknown] as [string, () => unknown]])(
    '%s: AmbiguousOutcomeError with it as cause, one call of the effect, record ambiguous with its lease released',
    async (_label, make) => {
      const client = makeClient({ fetch: globalThis.fetch });
      const thrown = make();
      let effects = 0;
      const lookup = async (): Promise<never> => {
        throw thrown;
      };
      const error = await client
        .run({ action: 'charge', ref: 'order-17', lookup }, async () => {
          effects++;
          throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AmbiguousOutcomeError);
      expect((error as AmbiguousOutcomeError).cause === thrown).toBe(true);
      expect(effects).toBe(1);
      const record = await client.get({ action: 'charge', ref: 'order-17' });
      expect(record?.state).toBe('ambiguous');
      expect(record?.lease).toBeNull();
      await client.close();
    },
  );
});

describe("client.run whose classify throws an unreadable value", () => {
  // The call ends with its classify's error (the attempt recorded by the default class, the lease
  // released). Asking whether that value was a StoreError threw for a revoked Proxy (or one trapping
  // getPrototypeOf): the call rejected with a TypeError from inside.
  it.each(HOSTILE)('%s: the call rejects with it, one call of the effect, record ambiguous with its lease released', async (_label, make) => {
    const client = makeClient({ fetch: globalThis.fetch });
    const thrown = make();
    let effects = 0;
    const classify = (): never => {
      throw thrown;
    };
    const { error } = await client
      .run({ action: 'charge', ref: 'order-17', classify }, async () => {
        effects++;
        throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
      })
      .then(
        () => ({ error: undefined }),
        (e: unknown) => ({ error: e }),
      );
    expect(error === thrown).toBe(true);
    expect(effects).toBe(1);
    const record = await client.get({ action: 'charge', ref: 'order-17' });
    expect(record?.state).toBe('ambiguous');
    expect(record?.lease).toBeNull();
    await client.close();
  });
});

describe("a caller's abort reason that cannot be read, while the attempt is out", () => {
  // DESIGN §5: an abort rejects with signal.reason unchanged. Reading the reason's message for the
  // record threw: the call rejected with that getter's error and the lease was left held.
  it.each(HOSTILE)('%s: the call rejects with it, one call of the effect, record ambiguous with its lease released', async (_label, make) => {
    const client = makeClient({ fetch: globalThis.fetch });
    const reason = make();
    const abort = new AbortController();
    let effects = 0;
    const call = client.run({ action: 'charge', ref: 'order-17', signal: abort.signal }, ({ signal }) => {
      effects++;
      setTimeout(() => abort.abort(reason), 1);
      return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    });
    // (boxed: resolving a promise with a Proxy that throws on get would read its `then`)
    const { error } = await call.then(
      () => ({ error: undefined }),
      (e: unknown) => ({ error: e }),
    );
    expect(error === reason).toBe(true);
    expect(effects).toBe(1);
    const record = await client.get({ action: 'charge', ref: 'order-17' });
    expect(record?.state).toBe('ambiguous');
    expect(record?.lease).toBeNull();
    await client.close();
  });

  it.each(HOSTILE)('%s, through client.fetch: the call rejects with it, one effect at the provider, record ambiguous with its lease released', async (_label, make) => {
    const provider = await startProvider();
    const reason = make();
    const abort = new AbortController();
    const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
      const signal = init?.signal;
      await (await globalThis.fetch(input, { ...init, signal: null })).arrayBuffer(); // the order is created
      setTimeout(() => abort.abort(reason), 1);
      return new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason)));
    }) as typeof globalThis.fetch;
    const client = makeClient({ fetch });
    const call = client.fetch(`${provider.url}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'A-17', amount: 5 }),
      signal: abort.signal,
      once: SCOPE,
    });
    const { error } = await call.then(
      () => ({ error: undefined }),
      (e: unknown) => ({ error: e }),
    );
    expect(error === reason).toBe(true);
    expect(provider.effectsFor('A-17')).toBe(1);
    const record = await client.get(SCOPE);
    expect(record?.state).toBe('ambiguous');
    expect(record?.lease).toBeNull();
    await client.close();
    await provider.close();
  });
});
