/**
 * openai-node inside `client.run()` with its own retries on (its default, maxRetries 2): the error
 * it throws at the end describes only its last try. A connect error there (ECONNREFUSED) proves
 * nothing about its first try, which may have committed. Transport scripted under the real SDK;
 * the provider ignores keys (openai-node sends none of its own); effects counted at the provider.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { AmbiguousOutcomeError, createClient, memoryStore } from '../../src/index.js';

const refused = () => new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), { code: 'ECONNREFUSED', syscall: 'connect' }) });
const reset = () => new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
const completion = (n: number) =>
  new Response(JSON.stringify({ id: `chatcmpl-${n}`, object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [] }), { status: 200, headers: { 'content-type': 'application/json' } });

describe('openai-node with its own retries inside client.run()', () => {
  it('its first try commits and its connection is reset, its retry is refused: not resent blind', async () => {
    let effects = 0;
    const script: Array<() => Promise<Response>> = [
      async () => (effects++, Promise.reject(reset())), // committed, then the connection dropped
      async () => Promise.reject(refused()), // the SDK's own retry: the server went away
      async () => (effects++, completion(effects)), // anything sent after that is a second completion
    ];
    let requests = 0;
    const fetch = (async () => {
      const step = script[requests++];
      if (step === undefined) throw new Error('unexpected request');
      return step();
    }) as typeof globalThis.fetch;
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: 'https://api.example.test/v1', fetch, maxRetries: 1 });
    const once = createClient({ store: memoryStore(), random: () => 0, retry: { budget: false } });
    const ref = { action: 'complete', ref: 'task-1', payload: { prompt: 'hi' } };
    const error = await once
      .run(ref, ({ key, signal }) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { idempotencyKey: key, signal }))
      .catch((e: unknown) => e);
    expect(effects).toBe(1);
    expect(requests).toBe(2);
    expect(error).toBeInstanceOf(AmbiguousOutcomeError);
    expect((await once.get(ref))?.state).toBe('ambiguous');
  });

  it('with its retries off, spec.classify may call a refused connection not sent: resent, one effect', async () => {
    let effects = 0;
    let requests = 0;
    const fetch = (async () => (++requests === 1 ? Promise.reject(refused()) : (effects++, completion(effects)))) as typeof globalThis.fetch;
    const openai = new OpenAI({ apiKey: 'sk-test', baseURL: 'https://api.example.test/v1', fetch, maxRetries: 0 });
    const once = createClient({ store: memoryStore(), random: () => 0, retry: { budget: false } });
    const result = await once.run(
      { action: 'complete', ref: 'task-2', payload: { prompt: 'hi' }, classify: (_e, d) => (d.reason.startsWith('ECONNREFUSED') ? 'not_sent' : undefined) },
      ({ key, signal }) => openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }, { idempotencyKey: key, signal }),
    );
    expect(result.id).toBe('chatcmpl-1');
    expect(effects).toBe(1);
    expect(requests).toBe(2);
  });
});
