/**
 * Cloudflare's 521/522/523/525 say the origin was never reached (refused, no handshake, unreachable,
 * TLS failed): retryable with Cloudflare's cf-ray header; without it, another server's 52x stays an
 * unknown 5xx. The workerd trial met them as "ambiguous" (a lookup, or AmbiguousOutcomeError) while
 * the origin was down.
 */
import { describe, expect, it } from 'vitest';
import { classifyResponse } from '../../src/classify/classify.js';
import { createClient, memoryStore } from '../../src/index.js';

const cf = (extra: Record<string, string> = {}): Headers => new Headers({ 'cf-ray': '8a1b2c3d4e5f6a7b-AMS', server: 'cloudflare', ...extra });

describe('Cloudflare origin-unreached statuses', () => {
  it.each([521, 522, 523, 525])('%i with cf-ray is retryable', (status) => {
    expect(classifyResponse({ status, headers: cf() }, 0).class).toBe('retryable');
  });
  it.each([520, 524, 526, 527, 530])('%i with cf-ray stays ambiguous (the origin may have been reached, or the answer does not say)', (status) => {
    expect(classifyResponse({ status, headers: cf() }, 0).class).toBe('ambiguous');
  });
  it.each([521, 522, 523, 525])('%i without cf-ray stays ambiguous', (status) => {
    expect(classifyResponse({ status, headers: new Headers() }, 0).class).toBe('ambiguous');
  });
  it('a should-retry false makes it terminal, as a 503', () => {
    expect(classifyResponse({ status: 522, headers: cf({ 'x-should-retry': 'false' }) }, 0).class).toBe('terminal');
  });
  it('a client retries a 522 with the same key and places one order', async () => {
    const keys: string[] = [];
    let orders = 0;
    const fetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
      keys.push(new Headers(init?.headers).get('idempotency-key') ?? '');
      if (keys.length === 1) return new Response('origin down', { status: 522, headers: cf() });
      orders++;
      return new Response('{"id":"o-1"}', { status: 201 });
    }) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch, telemetry: false, random: () => 0 });
    const res = await client.fetch('https://api.example.test/orders', { method: 'POST', body: '{}', once: { action: 'order', ref: 'cf-1' } });
    expect(res.status).toBe(201);
    expect(orders).toBe(1);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    await client.close();
  });
});
