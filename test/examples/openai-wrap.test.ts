/**
 * openai-node with `client.wrap()` as its `fetch` (and `maxRetries: 0`) against a
 * loopback fake of the API: lost responses are replayed or reconciled, never
 * created twice.
 */
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient, OnceClientOptions } from '../../src/index.js';
import { startFakeOpenAI } from '../helpers/fake-openai.js';
import type { FakeOpenAI } from '../helpers/fake-openai.js';

const MESSAGE = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Order 2 copies of A-17' }] };

describe('openai-node with client.wrap()', () => {
  let fake: FakeOpenAI;
  let once: OnceClient | undefined;
  beforeEach(async () => {
    fake = await startFakeOpenAI();
  });
  afterEach(async () => {
    await once?.close();
    await fake.close();
  });

  const sdk = (options: OnceClientOptions): OpenAI => {
    once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 }, ...options });
    return new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, fetch: once.wrap(), maxRetries: 0 });
  };

  /** openai-node whose client registers, for completions, a lookup by the ref in their metadata. */
  const withLookupByRef = (): OpenAI => {
    const openai: OpenAI = sdk({
      lookups: {
        [`POST ${fake.origin}/v1/chat/completions`]: async ({ scope }) => {
          const page = await openai.chat.completions.list({ metadata: { ref: scope.ref } });
          return page.data[0] === undefined ? null : Response.json(page.data[0]);
        },
      },
    });
    return openai;
  };

  it('sends our key on the POST (openai-node sends none of its own)', async () => {
    const openai = sdk({});
    const completion = await openai.chat.completions.create(MESSAGE);
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.key).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('dropped after commit, provider dedupes: the resend with the same key is replayed', async () => {
    fake.fault('drop_after_commit');
    const openai = sdk({ providerDedupes: true });
    const completion = await openai.chat.completions.create(MESSAGE);
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.effects).toBe(1);
    const [first, second] = fake.requests;
    expect(fake.requests).toHaveLength(2);
    expect(second?.key).toBe(first?.key);
    expect(once?.stats()).toMatchObject({ attempts: 2, ambiguous: 1 });
  });

  it('500 after commit, with a lookup: found, nothing is sent again', async () => {
    fake.fault('error_after_commit');
    const openai = withLookupByRef();
    const completion = await openai.chat.completions.create(
      { ...MESSAGE, store: true, metadata: { ref: 'task-9' } },
      { headers: { 'Idempotency-Key': 'task-9' } },
    );
    expect(completion.id).toBe('chatcmpl-1');
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
    expect(fake.lookups).toBe(1);
    expect(once?.stats()).toMatchObject({ attempts: 1, ambiguous: 1, lookups: 1 });
  });

  it('500 after commit, a registered lookup, no Idempotency-Key: the lookup is not asked about a ref nobody gave (it would answer "absent" and a second completion be made)', async () => {
    fake.fault('error_after_commit');
    const openai = withLookupByRef();
    await expect(openai.chat.completions.create({ ...MESSAGE, store: true, metadata: { ref: 'task-9' } })).rejects.toMatchObject({ cause: { code: 'AMBIGUOUS_OUTCOME' } });
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
    expect(fake.lookups).toBe(0);
  });

  it('500 after commit, no lookup, provider does not dedupe: an error, never a second completion', async () => {
    fake.fault('error_after_commit');
    const openai = sdk({});
    // openai-node reports our AmbiguousOutcomeError as a connection error, with it as the cause
    await expect(openai.chat.completions.create(MESSAGE)).rejects.toMatchObject({ cause: { code: 'AMBIGUOUS_OUTCOME' } });
    expect(fake.effects).toBe(1);
    expect(fake.requests).toHaveLength(1);
  });

  it('without oncefetch, openai-node retries the 500 without a key: two completions', async () => {
    fake.fault('error_after_commit');
    const plain = new OpenAI({ apiKey: 'sk-test', baseURL: fake.baseURL, maxRetries: 1 });
    await plain.chat.completions.create(MESSAGE);
    expect(fake.effects).toBe(2);
    expect(fake.requests.map((r) => r.key)).toEqual([undefined, undefined]);
  });
});
