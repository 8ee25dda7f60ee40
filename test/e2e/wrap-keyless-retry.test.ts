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
import { orderInit } from '../helpers/setup.js';

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
});
