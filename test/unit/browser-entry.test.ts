/**
 * The browser entry's own wrapper (src/browser.ts) in Node: relative URLs resolve against the
 * page, and one that cannot be resolved rejects as fetch does, instead of throwing at the call.
 * Regression (adversarial run in Chromium): `client.fetch('http://[bad')` threw synchronously.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, memoryStore } from '../../src/browser.js';

const g = globalThis as { document?: { baseURI?: string } };

afterEach(() => {
  delete g.document;
});

describe('browser entry', () => {
  it('an unresolvable URL rejects (a promise, as from fetch); a relative one resolves against the page', async () => {
    g.document = { baseURI: 'https://shop.example.test/checkout/' };
    const seen: string[] = [];
    const fetch = (async (input: RequestInfo | URL) => {
      seen.push(String(input));
      return new Response('{}', { status: 201 });
    }) as typeof globalThis.fetch;
    const client = createClient({ store: memoryStore(), fetch });
    const pending = client.fetch('http://[bad', { method: 'POST', body: '{}' });
    expect(pending).toBeInstanceOf(Promise);
    await expect(pending).rejects.toThrow(TypeError);
    const wrapped = client.wrap()('http://[bad', { method: 'POST', body: '{}' });
    await expect(wrapped).rejects.toThrow(TypeError);
    expect((await client.fetch('../orders', { method: 'POST', body: '{}', once: { action: 'o', ref: 'r1' } })).status).toBe(201);
    expect(seen).toEqual(['https://shop.example.test/orders']);
  });
});
