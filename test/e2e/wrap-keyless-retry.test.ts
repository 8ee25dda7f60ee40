/**
 * An SDK that retries on its own with no marker and no key (ky with `retry.methods`
 * including 'post', got, a hand-written loop) calls the wrapped fetch again with the same
 * request after oncefetch gave up on an unknown outcome. With no Idempotency-Key header
 * each call mints its own ref and key, so that retry was sent as a new operation: measured
 * in a user trial with ky (`retry: { limit: 2, methods: ['post'] }`), a dropped answer after
 * the commit gave 2 orders and a success. The wrapped fetch refuses it instead.
 */
import ky from 'ky';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/index.js';
import type { OnceClient } from '../../src/index.js';
import { startProvider } from '../../src/testing/provider.js';
import type { Provider } from '../../src/testing/provider.js';
import type { OnceStore } from '../../src/stores/contract.js';
import { orderInit, until } from '../helpers/setup.js';

let provider: Provider | undefined;
let once: OnceClient | undefined;
afterEach(async () => {
  await once?.close();
  await provider?.close();
  once = provider = undefined;
});

async function setup(): Promise<{ provider: Provider; wrapped: typeof fetch }> {
  provider = await startProvider({ ignoreKeys: true });
  once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5, attemptTimeoutMs: 500 } });
  return { provider, wrapped: once.wrap() };
}

describe('client.wrap(): a keyless resend of a call whose outcome is unknown', () => {
  it.each(['drop_after_commit', 'error_after_commit'] as const)('%s, a plain retry loop around the wrapped fetch: one order, the resend refused', async (kind) => {
    const { provider, wrapped } = await setup();
    provider.fault({ kind });
    const request = new Request(`${provider.url}/orders`, orderInit('A-1'));
    const errors: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      try {
        await wrapped(request.clone());
        break;
      } catch (error) {
        errors.push(error);
      }
    }
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(errors.slice(1)).toEqual([expect.any(TypeError), expect.any(TypeError)]);
    expect(String(errors[1])).toMatch(/Idempotency-Key/);
    // the refusal carries the earlier call's error: the outcome the SDK would otherwise hide
    expect((errors[1] as Error).cause).toBe(errors[0]);
  });

  it("the Vercel AI SDK's own retry (maxRetries, unmarked, keyless): refused with a message that names its fix, maxRetries: 0", async () => {
    // Measured in a user trial (ai 6.0.325, @ai-sdk/openai-compatible 2.0.92, fetch: client.wrap()): a dropped
    // answer after the commit, then generateText's two retries (no marker, no key), both refused: 1 completion
    // billed. The refusal said "ky's or got's retry of a POST" and "turn the SDK's retries off for this method",
    // which an AI SDK user cannot map to a setting. The AI SDK resends the same Request-like call as this loop.
    const { provider, wrapped } = await setup();
    provider.fault({ kind: 'drop_after_commit' });
    const errors: unknown[] = [];
    for (let i = 0; i < 3; i++) errors.push(await wrapped(`${provider.url}/orders`, orderInit('A-12')).catch((e: unknown) => e));
    expect(provider.effects).toBe(1);
    expect(errors[0]).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(errors[1]).toBeInstanceOf(TypeError);
    const message = (errors[1] as Error).message;
    expect(message).toMatch(/AI SDK/);
    expect(message).toMatch(/maxRetries: 0/);
    expect(message).toMatch(/retry\.methods/);
  });

  it('remembered for retry.deadlineMs after the call ended (the client\'s clock): then a new operation', async () => {
    provider = await startProvider({ ignoreKeys: true });
    let clock = 1_000_000;
    once = createClient({ store: memoryStore(), now: () => clock, retry: { baseDelayMs: 1, maxDelayMs: 5, attemptTimeoutMs: 500, deadlineMs: 60_000 } });
    const wrapped = once.wrap();
    provider.fault({ kind: 'error_after_commit' });
    await expect(wrapped(`${provider.url}/orders`, orderInit('A-5'))).rejects.toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    clock += 60_000;
    await expect(wrapped(`${provider.url}/orders`, orderInit('A-5'))).rejects.toBeInstanceOf(TypeError);
    clock += 1;
    expect((await wrapped(`${provider.url}/orders`, orderInit('A-5'))).status).toBe(201);
    expect(provider.requests).toHaveLength(2);
  });

  it("ky with retry.methods ['post']: one order, ky's retry refused", async () => {
    const { provider, wrapped } = await setup();
    provider.fault({ kind: 'drop_after_commit' });
    const api = ky.create({ fetch: wrapped, retry: { limit: 2, methods: ['post'], delay: () => 1 } });
    const error: unknown = await api.post(`${provider.url}/orders`, { json: { ref: 'A-2', sku: 'A-17', qty: 1 } }).catch((e: unknown) => e);
    expect(provider.effects).toBe(1);
    expect(provider.requests).toHaveLength(1);
    expect(error).toBeInstanceOf(TypeError);
  });

  it('the same payload after a settled success is a new operation (not refused)', async () => {
    const { provider, wrapped } = await setup();
    await wrapped(`${provider.url}/orders`, orderInit('A-3'));
    await wrapped(`${provider.url}/orders`, orderInit('A-3'));
    expect(provider.requests).toHaveLength(2);
  });

  it('with an Idempotency-Key header, a resend joins its operation (not refused): still one order', async () => {
    const { provider, wrapped } = await setup();
    provider.fault({ kind: 'drop_after_commit' });
    const init = { ...orderInit('A-4'), headers: { 'content-type': 'application/json', 'Idempotency-Key': 'A-4' } };
    const first: unknown = await wrapped(`${provider.url}/orders`, init).catch((e: unknown) => e);
    const again: unknown = await wrapped(`${provider.url}/orders`, init).catch((e: unknown) => e);
    expect(first).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(again).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(provider.effects).toBe(1);
  });

  it('a resend while the first call is still out (a timeout that did not abort it): waits, and is refused when that call ends unknown', async () => {
    provider = await startProvider({ ignoreKeys: true, processingMs: 300 });
    once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const wrapped = once.wrap();
    provider.fault({ kind: 'drop_after_commit' });
    const first = wrapped(`${provider.url}/orders`, orderInit('A-6')).catch((e: unknown) => e);
    await until(() => provider?.requests.length === 1);
    const again: unknown = await wrapped(`${provider.url}/orders`, orderInit('A-6')).catch((e: unknown) => e);
    expect(await first).toMatchObject({ code: 'AMBIGUOUS_OUTCOME' });
    expect(again).toBeInstanceOf(TypeError);
    expect((again as Error).cause).toBe(await first);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);
  });

  it("ky's timeout aborts the call and ky retries it (retryOnTimeout) before a slow store has recorded the abort: one order", async () => {
    provider = await startProvider({ ignoreKeys: true, processingMs: 400 });
    const inner = memoryStore();
    // a store 50 ms away (PostgreSQL over a network, SQLite waiting on a busy lock): each write takes that long
    const slow: OnceStore = Object.assign(Object.create(inner) as OnceStore, {
      compareAndSet: async (...args: Parameters<OnceStore['compareAndSet']>) => {
        await new Promise((r) => setTimeout(r, 50));
        return inner.compareAndSet(...args);
      },
    });
    once = createClient({ store: slow, retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const api = ky.create({ fetch: once.wrap(), timeout: 200, retry: { limit: 2, methods: ['post'], retryOnTimeout: true, delay: () => 1 } });
    const error: unknown = await api.post(`${provider.url}/orders`, { json: { ref: 'A-7', sku: 'A-17', qty: 1 } }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 700)); // every request sent has committed (400 ms) by then
    expect(error).toBeInstanceOf(TypeError);
    expect(provider.requests).toHaveLength(1);
    expect(provider.effects).toBe(1);
  });

  it('providerDedupes: an unknown outcome, then a 503 on the same-key resend and no attempt left (record pending): the keyless resend is refused', async () => {
    provider = await startProvider();
    once = createClient({ store: memoryStore(), providerDedupes: true, retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 } });
    provider.faults([{ kind: 'error_after_commit' }, { kind: 'status_before_commit', status: 503 }]);
    const api = ky.create({ fetch: once.wrap(), retry: { limit: 2, methods: ['post'], delay: () => 1 } });
    const error: unknown = await api.post(`${provider.url}/orders`, { json: { ref: 'A-8', sku: 'A-17', qty: 1 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(provider.requests).toHaveLength(2);
    expect(provider.effects).toBe(1);
  });

  it('two identical keyless calls at once, the first a success: the second waits for it, then is sent (two orders, as asked)', async () => {
    provider = await startProvider({ ignoreKeys: true, processingMs: 100 });
    once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const wrapped = once.wrap();
    const [a, b] = await Promise.all([wrapped(`${provider.url}/orders`, orderInit('A-10')), wrapped(`${provider.url}/orders`, orderInit('A-10'))]);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(provider.effects).toBe(2);
  });

  it('a call waiting for a running one of its payload rejects with its own abort reason, unsent', async () => {
    provider = await startProvider({ ignoreKeys: true, processingMs: 300 });
    once = createClient({ store: memoryStore(), retry: { baseDelayMs: 1, maxDelayMs: 5 } });
    const wrapped = once.wrap();
    const first = wrapped(`${provider.url}/orders`, orderInit('A-11'));
    await until(() => provider?.requests.length === 1);
    const reason = new Error('gave up');
    const controller = new AbortController();
    const again = wrapped(`${provider.url}/orders`, { ...orderInit('A-11'), signal: controller.signal }).catch((e: unknown) => e);
    controller.abort(reason);
    expect(await again).toBe(reason);
    expect((await first).status).toBe(201);
    expect(provider.requests).toHaveLength(1);
  });
});
