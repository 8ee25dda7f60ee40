/**
 * Other SDKs' OWN retries through `client.wrap()`, counted at loopback fakes of the
 * providers: openai-node with its default `maxRetries` (2), its streams, and stripe-node
 * with `maxNetworkRetries > 0` through `Stripe.createFetchHttpClient(once.wrap())`.
 * One call of the SDK must create at most one effect, whatever the SDK retries.
 */
import OpenAI from 'openai';
import Stripe from 'stripe';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startFakeOpenAI } from '../helpers/fake-openai.js';
import type { FakeOpenAI, OpenAIFault } from '../helpers/fake-openai.js';
import { startFakeStripe } from '../helpers/fake-stripe.js';
import type { FakeStripe, StripeFault } from '../helpers/fake-stripe.js';

const MESSAGE = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Order 2 copies of A-17' }] };

let once: OnceClient | undefined;
let fakes: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await once?.close();
  once = undefined;
  await Promise.all(fakes.map((f) => f.close()));
  fakes = [];
});

const client = (options: OnceClientOptions): OnceClient => {
  once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...options });
  return once;
};

describe('openai-node with client.wrap() and its default maxRetries (2)', () => {
  const setup = async (options: OnceClientOptions & { dedupe?: boolean } = {}): Promise<{ fake: FakeOpenAI; openai: OpenAI }> => {
    const { dedupe, ...rest } = options;
    const fake = await startFakeOpenAI(dedupe === undefined ? {} : { dedupe });
    fakes.push(fake);
    // maxRetries left at its default; the SDK's own backoff (0.5 s, 1 s) is real time
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: client(rest).wrap() });
    return { fake, openai };
  };
  // the lookup lists stored completions by the ref in their metadata, through the same SDK
  const lookupFor = (fake: FakeOpenAI, sdk: { openai?: OpenAI }): NonNullable<OnceClientOptions['lookups']> => ({
    [`POST ${fake.origin}/v1/chat/completions`]: async ({ scope }) => {
      const page = await sdk.openai!.chat.completions.list({ metadata: { ref: scope.ref } });
      return page.data[0] === undefined ? null : Response.json(page.data[0]);
    },
  });

  it.each(['drop_after_commit', 'error_after_commit'] as const)('%s, providerDedupes: oncefetch resends with its key, replayed: one completion', async (fault: OpenAIFault) => {
    const { fake, openai } = await setup({ providerDedupes: true });
    fake.fault(fault);
    const completion = await openai.chat.completions.create(MESSAGE);
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.effects).toBe(1);
    expect(new Set(fake.requests.map((r) => r.key)).size).toBe(1);
  });

  it.each(['drop_after_commit', 'error_after_commit'] as const)('%s, with a lookup: found, one completion', async (fault: OpenAIFault) => {
    const fake = await startFakeOpenAI({ dedupe: false });
    fakes.push(fake);
    const sdk: { openai?: OpenAI } = {};
    const openai = (sdk.openai = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: client({ lookups: lookupFor(fake, sdk) }).wrap() }));
    fake.fault(fault);
    const completion = await openai.chat.completions.create({ ...MESSAGE, store: true, metadata: { ref: 'task-9' } }, { headers: { 'Idempotency-Key': 'task-9' } });
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
  });

  // Measured before the refusal: openai-node resent the call under a new key and got chatcmpl-2, a success
  // with two completions created.
  it.each(['drop_after_commit', 'error_after_commit'] as const)(
    '%s, no lookup, provider does not dedupe: the SDK retry is refused, never a second completion',
    async (fault: OpenAIFault) => {
      const { fake, openai } = await setup({ dedupe: false });
      fake.fault(fault);
      const error: unknown = await openai.chat.completions.create(MESSAGE).catch((e: unknown) => e);
      expect(fake.effects).toBe(1);
      expect(fake.requests).toHaveLength(1);
      expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
      expect(String((error as Error).cause)).toMatch(/maxRetries: 0/);
      // The refusal is the SDK's last error: it names the unknown outcome it follows, with that error as its
      // cause, so the caller still learns the completion may have been created (before, a bare TypeError).
      const refusal = (error as Error).cause as Error;
      expect(refusal.message).toMatch(/after a call of the same payload whose outcome is unknown/);
      expect(refusal.cause).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    },
  );

  it('error_after_commit with an Idempotency-Key header: the SDK retries join the same operation, which stays ambiguous; one completion', async () => {
    const { fake, openai } = await setup({ dedupe: false });
    fake.fault('error_after_commit');
    const error: unknown = await openai.chat.completions.create(MESSAGE, { headers: { 'Idempotency-Key': 'task-10' } }).catch((e: unknown) => e);
    expect(error).toMatchObject({ cause: { code: 'AMBIGUOUS_OUTCOME' } });
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
    expect(once?.stats()).toMatchObject({ operationsCreated: 1 });
  });

  it.each(['rate_limited', 'unavailable'] as const)('%s (Retry-After: 0) before commit: oncefetch retries with the same key, one completion', async (fault: OpenAIFault) => {
    const { fake, openai } = await setup({});
    fake.fault(fault);
    const completion = await openai.chat.completions.create(MESSAGE);
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(2);
    expect(new Set(fake.requests.map((r) => r.key)).size).toBe(1);
  });

  it('a 409 oncefetch holds terminal (openai-node would retry it): returned with x-should-retry: false, the SDK throws its ConflictError', async () => {
    const { fake, openai } = await setup({});
    fake.fault('lock_timeout');
    const error: unknown = await openai.chat.completions.create(MESSAGE).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.ConflictError);
    expect(fake.requests).toHaveLength(1);
    expect(fake.effects).toBe(0);
  });

  it('429s past oncefetch attempts: RetriesExhausted, the SDK retry is refused (nothing was created; loud, not resent under a new key)', async () => {
    const { fake, openai } = await setup({ retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 } });
    fake.fault('rate_limited', 'rate_limited');
    const error: unknown = await openai.chat.completions.create(MESSAGE).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(fake.requests).toHaveLength(2);
    expect(fake.effects).toBe(0);
    // (nothing may have taken effect: the refusal names no unknown outcome)
    expect((error as Error).cause).toMatchObject({ message: expect.not.stringMatching(/outcome is unknown/) as unknown });
    expect(((error as Error).cause as Error).cause).toBeUndefined();
  });
});

describe('openai-node streams through client.wrap()', () => {
  it('the first chunk reaches the caller before the server ends the stream', async () => {
    const fake = await startFakeOpenAI();
    fakes.push(fake);
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: client({}).wrap(), maxRetries: 0 });
    const release = fake.holdStreams();
    try {
      const stream = await Promise.race([
        openai.chat.completions.create({ ...MESSAGE, stream: true }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no response before the stream ended (buffered)')), 2000)),
      ]);
      const it = stream[Symbol.asyncIterator]();
      const first = await it.next();
      expect(first.value?.choices[0]?.delta.role).toBe('assistant');
      release();
      const rest: string[] = [];
      for (let r = await it.next(); r.done !== true; r = await it.next()) rest.push(r.value.choices[0]?.delta.content ?? '');
      expect(rest.join('')).not.toBe('');
    } finally {
      release();
    }
    expect(fake.effects).toBe(1);
  });

  it("the caller's abort ends a stream still held open by the server", async () => {
    const fake = await startFakeOpenAI();
    fakes.push(fake);
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: client({}).wrap(), maxRetries: 0 });
    const release = fake.holdStreams();
    try {
      const stream = await openai.chat.completions.create({ ...MESSAGE, stream: true });
      const it = stream[Symbol.asyncIterator]();
      await it.next();
      stream.controller.abort();
      const ended = await Promise.race([it.next().then(() => 'ended', () => 'ended'), new Promise((r) => setTimeout(() => r('still open'), 1000))]);
      expect(ended).toBe('ended');
    } finally {
      release();
    }
  });

  it('a drop mid-stream (default maxRetries): reported, never resent', async () => {
    const fake = await startFakeOpenAI({ dedupe: false });
    fakes.push(fake);
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: client({}).wrap() });
    fake.fault('drop_mid_stream');
    const error = await (async () => {
      const stream = await openai.chat.completions.create({ ...MESSAGE, stream: true });
      for await (const chunk of stream) void chunk;
    })().catch((e: unknown) => e);
    // the stream's own error (the connection closed), not our refusal of a retry: nothing was retried
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).not.toMatch(/maxRetries/);
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
    expect(once?.stats()).toMatchObject({ attempts: 1, ambiguous: 0 });
  });

  it('a streamed success is stored without its body: the same key again is a replay marked truncated, nothing sent', async () => {
    const fake = await startFakeOpenAI();
    fakes.push(fake);
    const wrapped = client({}).wrap();
    const call = () =>
      wrapped(`${fake.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'Idempotency-Key': 'task-11' },
        body: JSON.stringify({ ...MESSAGE, stream: true }),
      });
    const first = await call();
    expect(await first.text()).toContain('data: [DONE]');
    const again = await call();
    expect(again.headers.get('oncefetch-replayed')).toBe('true');
    expect(again.headers.get('oncefetch-body-truncated')).toBe('true');
    expect(await again.text()).toBe('');
    expect(fake.requests).toHaveLength(1);
  });
});

describe('stripe-node with Stripe.createFetchHttpClient(client.wrap()) and maxNetworkRetries: 2', () => {
  const setup = async (dedupe: boolean, options: OnceClientOptions = {}): Promise<{ fake: FakeStripe; stripe: Stripe }> => {
    const fake = await startFakeStripe({ dedupe });
    fakes.push(fake);
    const stripe = new Stripe('sk_test_loopback', {
      host: fake.host,
      port: fake.port,
      protocol: 'http',
      maxNetworkRetries: 2,
      httpClient: Stripe.createFetchHttpClient(client(options).wrap()),
    });
    return { fake, stripe };
  };

  it.each(['drop_after_commit', 'error_after_commit'] as const)(
    "%s, provider ignores keys, no lookup: stripe's retries carry its key, join the same operation, one intent",
    async (fault: StripeFault) => {
      const { fake, stripe } = await setup(false);
      fake.fault(fault);
      const error = await stripe.paymentIntents.create({ amount: 500, currency: 'eur' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      expect(fake.effects).toBe(1);
      expect(fake.keys).toHaveLength(1);
      expect(fake.keys[0]).toMatch(/^stripe-node-retry-/);
      expect(once?.stats()).toMatchObject({ operationsCreated: 1, attempts: 1 });
    },
  );

  it.each(['drop_after_commit', 'error_after_commit'] as const)('%s, provider dedupes: resent with the same key, replayed, one intent', async (fault: StripeFault) => {
    const { fake, stripe } = await setup(true, { providerDedupes: true });
    fake.fault(fault);
    const intent = await stripe.paymentIntents.create({ amount: 500, currency: 'eur' });
    expect(intent.id).toBe('pi_000001');
    expect(fake.effects).toBe(1);
    expect(fake.replays).toBe(1);
    expect(new Set(fake.keys).size).toBe(1);
  });
});
