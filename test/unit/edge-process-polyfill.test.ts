/**
 * Next.js's Edge Runtime (and its build, which evaluates edge routes to collect their
 * configuration) gives code a `process` whose Node functions throw when called:
 * `process.getBuiltinModule` is a function that throws "A Node.js API is used
 * (process.getBuiltinModule) which is not supported in the Edge Runtime".
 * Regression (a Next.js 16.4.6 trial): the browser entry probed it at module evaluation, so
 * `next build` failed on any edge route that imported oncefetch, before a store was even chosen.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

const proc = process as unknown as { getBuiltinModule?: unknown };
const real = proc.getBuiltinModule;

/** As next/dist/server/web/sandbox/context.js has it: each of Node's process functions throws. */
function edge(): void {
  proc.getBuiltinModule = () => {
    throw new Error('A Node.js API is used (process.getBuiltinModule) which is not supported in the Edge Runtime.');
  };
}

afterEach(() => {
  proc.getBuiltinModule = real;
  vi.resetModules();
});

describe('browser entry under an Edge Runtime process polyfill', () => {
  it('loads, fingerprints with WebCrypto and captures a stream body', async () => {
    vi.resetModules();
    edge();
    const { createClient, memoryStore } = await import('../../src/browser.js');
    const { captureBody } = await import('../../src/operation/body.js');
    let posts = 0;
    const fetch = (async () => {
      posts++;
      return new Response('{"id":"o1"}', { status: 201 });
    }) as typeof globalThis.fetch;
    {
      const client = createClient({ store: memoryStore(), fetch });
      const call = () =>
        client.fetch('https://api.example.test/orders', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"ref":"r1"}',
          once: { action: 'place-order', ref: 'r1' },
        });
      expect((await call()).status).toBe(201);
      expect((await call()).headers.get('oncefetch-replayed')).toBe('true');
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode('abc'));
          c.close();
        },
      });
      expect(new TextDecoder().decode((await captureBody(stream)).bytes)).toBe('abc');
    }
    expect(posts).toBe(1);
  });
});

describe('fingerprints without node:crypto (WebCrypto) equal the Node hash path', () => {
  it.each([
    ['getBuiltinModule throws (Next.js Edge Runtime)', edge],
    ['getBuiltinModule returns undefined', () => void (proc.getBuiltinModule = () => undefined)],
    ['no getBuiltinModule', () => void (proc.getBuiltinModule = undefined)],
  ])('%s: every vector, and a disturbed stream is still refused', async (_name, setUp) => {
    vi.resetModules();
    setUp();
    const { FINGERPRINT_VECTORS } = await import('../helpers/fingerprint-vectors.js');
    const { captureBody } = await import('../../src/operation/body.js');
    const digest = vi.spyOn(globalThis.crypto.subtle, 'digest');
    try {
      for (const [name, compute, expected] of FINGERPRINT_VECTORS) expect([name, await compute()]).toEqual([name, expected]);
      // (the WebCrypto path it is: each vector hashed there)
      expect(digest.mock.calls.length).toBeGreaterThanOrEqual(FINGERPRINT_VECTORS.length);
    } finally {
      digest.mockRestore();
    }
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new Uint8Array([1]));
        c.enqueue(new Uint8Array([2]));
        c.close();
      },
    });
    const reader = stream.getReader();
    await reader.read();
    reader.releaseLock();
    await expect(captureBody(stream)).rejects.toThrow(/must not be locked or already read from/);
  });
});
